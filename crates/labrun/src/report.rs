//! The runner's results and the files they go to: one raw file per
//! configuration (`DUT.PROFILE.pps`, one value a line, ministat-ready as
//! BSDRP's netbenches), per-run logs, results.json, report.md, plots.
use super::scenario::{Method, Profile, Scenario};
use anyhow::{Context, Result};
use linerate_imix::{imix_bps, Layer};
use linerate_ministat::{compare, text, Dataset, Options};
use linerate_search::Trial;
use linerate_traffic::measure::TrialResult;
use serde::Serialize;
use std::path::Path;

/// Under overload, a run that lost less than this was not limited by the
/// DUT (the generator ran out first): its value is a floor, and flagged.
pub const OVERLOAD_MIN_LOSS: f64 = 0.01;

/// One run of one configuration.
#[derive(Clone, Debug, Default, Serialize)]
pub struct RunRecord {
    pub dut: String,
    pub profile: String,
    pub repeat: u32,
    /// The run's value: forwarding rate (overload) or the search's result.
    pub value_pps: f64,
    /// Overload: what the generator offered and what came out.
    pub offered_pps: Option<f64>,
    pub received_pps: Option<f64>,
    pub loss_ratio: Option<f64>,
    /// Overload: the DUT was the bottleneck (it lost at least 1%).
    pub overloaded: Option<bool>,
    /// Overload: how long the generator sent.
    pub overload_seconds: Option<f64>,
    /// Overload with `receiver = "full"`: loss, duplicates and reordering
    /// from the sequence numbers, and one-way latency.
    pub sequence: Option<linerate_traffic::recv::SequenceTotals>,
    pub latency_ns: Option<linerate_traffic::latency::Latency>,
    /// Overload of a mix with `receiver = "full"`: each part's frames a
    /// second, offered and received (its stamped frames that arrived).
    pub parts_offered_pps: Vec<f64>,
    pub parts_received_pps: Vec<f64>,
    /// Searches: the search's own result, and every trial.
    pub search: Option<serde_json::Value>,
    pub trials: Vec<Trial>,
    /// Trials the generator could not offer at their rate.
    pub invalid_trials: usize,
    /// The per-second receiver log, relative to the output directory.
    pub log: String,
    /// The generator's CPUs, and the frames the DUT's port took in on
    /// each of its receive queues in use during the run (the kernel's
    /// per-queue counters); overload: as rates over the run.
    pub gen_cpus: Vec<usize>,
    pub queue_frames: Vec<u64>,
    pub queue_pps: Option<Vec<f64>>,
    /// On hosts: each generator's part of the run's (overload) or last
    /// trial's (searches) offered load.
    pub generators: Vec<crate::command_trial::GeneratorRun>,
    /// linerate DUTs: what its fast path did with the frames during the
    /// measurement, packets by reason (its counters, every interface, those
    /// not zero): where a rate comes from, or what held it back.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fast_path: Option<std::collections::BTreeMap<String, u64>>,
    /// `[measure] probes`: the router's ping and the BGP session through
    /// it during the run.
    pub probes: Option<crate::probes::ProbeRecord>,
}

impl RunRecord {
    /// Adds the run's generator CPUs and per-queue frames; under overload
    /// also their rates over the run's seconds.
    pub fn set_queues(&mut self, gen_cpus: &[usize], frames: Vec<u64>) {
        self.gen_cpus = gen_cpus.to_vec();
        self.queue_pps = self.overload_seconds.map(|secs| {
            frames
                .iter()
                .map(|f| (*f as f64 / secs.max(1e-9)).round())
                .collect()
        });
        self.queue_frames = frames;
    }

    pub fn overload(r: &TrialResult) -> Self {
        let offered = super::measure::offered(r);
        let secs = r.offered.seconds.max(1e-9);
        let loss = if offered == 0 {
            0.0
        } else {
            1.0 - r.received_packets as f64 / offered as f64
        };
        RunRecord {
            value_pps: r.received_pps,
            offered_pps: Some(offered as f64 / secs),
            overload_seconds: Some(secs),
            received_pps: Some(r.received_pps),
            loss_ratio: Some(loss),
            overloaded: Some(loss >= OVERLOAD_MIN_LOSS),
            sequence: r.sequence.clone(),
            latency_ns: r.latency_ns.clone(),
            parts_offered_pps: match r.received_by_part.is_empty() {
                true => Vec::new(),
                false => r
                    .offered
                    .part_frames
                    .iter()
                    .map(|&n| n as f64 / secs)
                    .collect(),
            },
            parts_received_pps: r
                .received_by_part
                .iter()
                .map(|&n| n as f64 / secs)
                .collect(),
            ..Default::default()
        }
    }

    pub fn search(value: f64, detail: serde_json::Value, trials: Vec<Trial>) -> Self {
        RunRecord {
            value_pps: value,
            invalid_trials: trials.iter().filter(|t| !t.measurement.valid).count(),
            search: Some(detail),
            trials,
            ..Default::default()
        }
    }
}

/// One DUT configuration x profile over its runs.
#[derive(Clone, Debug, Serialize)]
pub struct Summary {
    pub dut: String,
    pub profile: String,
    /// The raw file, relative to the output directory.
    pub file: String,
    pub runs_mpps: Vec<f64>,
    pub median_mpps: f64,
    pub min_mpps: f64,
    pub max_mpps: f64,
    pub mean_frame_len: f64,
    /// Bits per second of this profile's frames at the median rate.
    pub median_gbps: f64,
    /// The median as Simple IMIX at the IP layer (the seeds' conversion).
    pub imix_gbps: f64,
    /// Overload runs in which the DUT was not the bottleneck.
    pub not_overloaded: usize,
    pub invalid_trials: usize,
    /// Churn profiles: the frames each connection takes, and the median
    /// as new connections a second.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub frames_a_connection: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub median_connections_per_s: Option<f64>,
}

/// A configuration against the baseline (the scenario's first DUT), on
/// one profile: ministat's Student's t.
#[derive(Clone, Debug, Serialize)]
pub struct Comparison {
    pub dut: String,
    pub profile: String,
    pub baseline: String,
    pub confidence: f64,
    pub difference_percent: f64,
    pub ci_percent: f64,
    pub proven: bool,
    /// Median of this DUT over median of the baseline.
    pub median_ratio: f64,
}

/// A configuration against the machine's XDP limit (an `xdp-redirect`
/// DUT in the same scenario), on one profile: its value over the limit's
/// in the same round, for each round.
#[derive(Clone, Debug, Serialize)]
pub struct AgainstLimit {
    pub dut: String,
    pub profile: String,
    /// The DUT configuration that is the limit.
    pub limit: String,
    pub ratios: Vec<f64>,
    pub median_ratio: f64,
    /// The median's 95% interval (crate::median_ci): None below 6 rounds.
    pub median_interval: Option<crate::median_ci::MedianInterval>,
    pub min_ratio: f64,
    pub max_ratio: f64,
}

#[derive(Clone, Debug, Serialize)]
pub struct Machine {
    pub kernel: String,
    pub cpus: usize,
}

#[derive(Clone, Debug, Serialize)]
pub struct Results {
    pub scenario: String,
    pub source: String,
    pub method: Method,
    pub repeat: u32,
    pub seconds: f64,
    pub final_seconds: f64,
    pub gen_cpu: usize,
    pub dut_cpu: usize,
    /// The lab's veth queues (the most a DUT configuration may use).
    pub queues: u32,
    pub machine: Machine,
    pub started_utc: String,
    /// Stopped by Ctrl-C: the results hold the runs finished before.
    pub interrupted: bool,
    /// Stopped by a failure (a host gone, a command that failed or hung):
    /// which run and why; the results hold the runs finished before.
    pub failed: Option<String>,
    /// The lab's hosts (None: the local namespace lab).
    pub hosts: Option<crate::hosts::LabHosts>,
    /// The DUT configurations' `record` commands and their output.
    pub records: Vec<crate::dut_commands::Recorded>,
    /// Each DUT configuration's settings, as `linerate tune` found them.
    pub settings: Vec<crate::dut_settings::Settings>,
    pub duts: Vec<String>,
    pub profiles: Vec<(String, Profile)>,
    pub runs: Vec<RunRecord>,
    pub results: Vec<Summary>,
    pub comparisons: Vec<Comparison>,
    /// The DUT configuration that is the machine's XDP limit, if the
    /// scenario has one, and each other configuration against it.
    pub limit: Option<String>,
    pub against_limit: Vec<AgainstLimit>,
    /// `--profile`: where each configuration's DUT core went.
    pub profiles_cpu: Vec<super::profile::DutProfile>,
    /// ministat's output per profile, as printed.
    pub ministat: Vec<(String, String)>,
}

impl Results {
    pub fn new(sc: &Scenario, dut_cpu: usize) -> Self {
        Results {
            scenario: sc.name.clone(),
            source: sc.source.clone(),
            method: sc.method,
            repeat: sc.repeat,
            seconds: sc.seconds,
            final_seconds: sc.final_seconds,
            gen_cpu: sc.gen_cpu,
            dut_cpu,
            queues: sc.queues,
            machine: Machine {
                kernel: std::fs::read_to_string("/proc/sys/kernel/osrelease")
                    .map(|s| s.trim().to_string())
                    .unwrap_or_default(),
                cpus: linerate_host::cpu::online(),
            },
            started_utc: utc_now(),
            interrupted: false,
            failed: None,
            hosts: sc.hosts.clone(),
            records: Vec::new(),
            settings: Vec::new(),
            duts: sc.duts.iter().map(|d| d.0.clone()).collect(),
            profiles: sc.profiles.clone(),
            runs: Vec::new(),
            results: Vec::new(),
            comparisons: Vec::new(),
            limit: sc
                .duts
                .iter()
                .find(|d| d.1.forwarder == super::scenario::Forwarder::XdpRedirect)
                .map(|d| d.0.clone()),
            against_limit: Vec::new(),
            profiles_cpu: Vec::new(),
            ministat: Vec::new(),
        }
    }

    pub fn add(&mut self, r: RunRecord) {
        self.runs.push(r);
    }

    /// Summaries, comparisons and ministat text from the runs.
    pub fn finish(&mut self) {
        self.results.clear();
        self.comparisons.clear();
        self.ministat.clear();
        self.against_limit = self.against_limit();
        for (pname, profile) in &self.profiles {
            let mut sets = Vec::new();
            for dut in &self.duts {
                let runs: Vec<&RunRecord> = self
                    .runs
                    .iter()
                    .filter(|r| &r.dut == dut && &r.profile == pname)
                    .collect();
                if runs.is_empty() {
                    continue;
                }
                let pps: Vec<f64> = runs.iter().map(|r| r.value_pps).collect();
                let ds = Dataset::new(&raw_name(dut, pname), &pps);
                let v = ds.vitals();
                let len = super::mean_frame_len(profile);
                self.results.push(Summary {
                    dut: dut.clone(),
                    profile: pname.clone(),
                    file: raw_name(dut, pname),
                    runs_mpps: pps.iter().map(|p| p / 1e6).collect(),
                    median_mpps: v.median / 1e6,
                    min_mpps: v.min / 1e6,
                    max_mpps: v.max / 1e6,
                    mean_frame_len: len,
                    median_gbps: v.median * len * 8.0 / 1e9,
                    imix_gbps: imix_bps(v.median, Layer::Ip) / 1e9,
                    not_overloaded: runs.iter().filter(|r| r.overloaded == Some(false)).count(),
                    invalid_trials: runs.iter().map(|r| r.invalid_trials).sum(),
                    frames_a_connection: frames_a_connection(profile),
                    median_connections_per_s: frames_a_connection(profile)
                        .map(|k| v.median / k as f64),
                });
                sets.push((dut.clone(), ds));
            }
            if sets.len() < 2 {
                continue;
            }
            let (base_name, base) = &sets[0];
            for (dut, ds) in &sets[1..] {
                // Student's t needs at least two points a set, ministat three.
                if ds.n() < 3 || base.n() < 3 {
                    continue;
                }
                let c = compare(ds, base, 2);
                self.comparisons.push(Comparison {
                    dut: dut.clone(),
                    profile: pname.clone(),
                    baseline: base_name.clone(),
                    confidence: c.confidence,
                    difference_percent: c.difference_percent,
                    ci_percent: c.percent_error,
                    proven: c.proven,
                    median_ratio: ds.median() / base.median(),
                });
            }
            if sets.iter().all(|(_, d)| d.n() >= 3) {
                // ministat compares at most 7 data sets (FreeBSD's MAX_DS
                // - 1): the baseline and up to 6 others a table.
                let mut only: Vec<Dataset> = sets.into_iter().map(|s| s.1).collect();
                let base = only.remove(0);
                for group in only.chunks(linerate_ministat::MAX_SETS - 1) {
                    let mut table = vec![base.clone()];
                    table.extend(group.iter().cloned());
                    self.ministat
                        .push((pname.clone(), text(&table, &Options::default())));
                }
            }
        }
    }
}

pub fn raw_name(dut: &str, profile: &str) -> String {
    format!("{dut}.{profile}.pps")
}

/// Why output directory `out` cannot take a run's results, if it cannot.
pub fn dir_refusal(out: &Path) -> Option<&'static str> {
    out.join("results.json")
        .exists()
        .then_some("holds the results of another run (results.json); pick a new directory")
}

/// Refuses an output directory that holds another run.
pub fn check_dir(out: &Path) -> Result<()> {
    if let Some(why) = dir_refusal(out) {
        anyhow::bail!("output directory {}: {why}", out.display());
    }
    Ok(())
}

/// Makes the output directory.
pub fn prepare_dir(out: &Path) -> Result<()> {
    check_dir(out)?;
    std::fs::create_dir_all(out.join("logs"))
        .with_context(|| format!("output directory {}", out.display()))?;
    Ok(())
}

/// The per-second lines of one run; returns the path relative to `out`.
pub fn write_log(out: &Path, dut: &str, profile: &str, repeat: u32, log: &str) -> Result<String> {
    let rel = format!("logs/{dut}.{profile}.{repeat}.log");
    std::fs::write(out.join(&rel), log)
        .with_context(|| format!("writing {}", out.join(&rel).display()))?;
    Ok(rel)
}

pub fn write_all(out: &Path, r: &Results) -> Result<()> {
    let w = |name: &str, data: &[u8]| {
        std::fs::write(out.join(name), data)
            .with_context(|| format!("writing {}", out.join(name).display()))
    };
    for s in &r.results {
        let lines: String = r
            .runs
            .iter()
            .filter(|x| x.dut == s.dut && x.profile == s.profile)
            .map(|x| format!("{:.0}\n", x.value_pps))
            .collect();
        w(&s.file, lines.as_bytes())?;
    }
    w("results.json", serde_json::to_string_pretty(r)?.as_bytes())?;
    let plots = super::plot::draw(out, r);
    w("report.md", markdown(r, plots.as_ref().err()).as_bytes())?;
    plots
}

impl Results {
    /// Each configuration's value over the limit's in the same round (the
    /// runs of a round are interleaved: the nearest in time there is).
    fn against_limit(&self) -> Vec<AgainstLimit> {
        let Some(limit) = &self.limit else {
            return Vec::new();
        };
        let mut out = Vec::new();
        for (pname, _) in &self.profiles {
            let value = |dut: &str, round: u32| {
                self.runs
                    .iter()
                    .find(|r| r.dut == dut && &r.profile == pname && r.repeat == round)
                    .map(|r| r.value_pps)
            };
            for dut in self.duts.iter().filter(|d| *d != limit) {
                let ratios: Vec<f64> = (1..=self.repeat)
                    .filter_map(|round| {
                        let (v, l) = (value(dut, round)?, value(limit, round)?);
                        (l > 0.0).then_some(v / l)
                    })
                    .collect();
                if ratios.is_empty() {
                    continue;
                }
                let ds = Dataset::new(dut, &ratios);
                let v = ds.vitals();
                let median_interval = crate::median_ci::median_interval(&ratios, 0.95);
                out.push(AgainstLimit {
                    dut: dut.clone(),
                    profile: pname.clone(),
                    limit: limit.clone(),
                    ratios,
                    median_ratio: v.median,
                    median_interval,
                    min_ratio: v.min,
                    max_ratio: v.max,
                });
            }
        }
        out
    }
}

/// The section of report.md that says how far each configuration is from
/// the machine's XDP limit.
fn against_limit_section(r: &Results) -> String {
    let Some(limit) = &r.limit else {
        return String::new();
    };
    let mut s = format!(
        "
## Against the machine's XDP limit

`{limit}` rewrites the MACs and redirects, with no parsing and no lookup: what this hardware forwards at all. Each configuration's rate over its rate in the same round, and how sure the median of those rounds is (95% interval from the rounds' order statistics, whatever their distribution; none below 6 rounds):

| DUT | profile | median | 95% interval | min | max | per round |
|---|---|---|---|---|---|---|
"
    );
    for a in &r.against_limit {
        let interval = match a.median_interval {
            Some(i) => format!("{:.2}x-{:.2}x", i.low, i.high),
            None => "-".into(),
        };
        s.push_str(&format!(
            "| {} | {} | {:.2}x | {} | {:.2}x | {:.2}x | {} |
",
            a.dut,
            a.profile,
            a.median_ratio,
            interval,
            a.min_ratio,
            a.max_ratio,
            a.ratios
                .iter()
                .map(|x| format!("{x:.2}"))
                .collect::<Vec<_>>()
                .join(" ")
        ));
    }
    s
}

/// `--profile`'s section of report.md: per configuration, its flame graph
/// and the functions most on the DUT's core, as the seeds' pmcstat tables.
fn cpu_section(r: &Results) -> String {
    if r.profiles_cpu.is_empty() {
        return String::new();
    }
    let mut s = String::from(
        "\n## Where the DUT's core goes\n\n`perf record -e cpu-clock` of the DUT's core during every run (a timer's samples: this machine has no PMU), stacks folded and drawn by inferno. Values under `--profile` were measured while sampled.\n",
    );
    for p in &r.profiles_cpu {
        s.push_str(&format!(
            "\n### {}\n\n{} samples (999 a second); flame graph: [{}]({})\n\n| function | self | with callees |\n|---|---|---|\n",
            p.dut, p.samples, p.flame_graph, p.flame_graph
        ));
        if let Some(ns) = p.xdp_ns_per_frame {
            s.insert_str(
                s.rfind("\n| function |").unwrap_or(s.len()),
                &format!(
                    "\nIts XDP program on dut0: {ns:.1} ns a frame (the kernel's BPF run-time statistics, median over the runs; they add two clock reads a run).\n"
                ),
            );
        }
        for h in &p.top {
            s.push_str(&format!(
                "| `{}` | {:.1}% | {:.1}% |\n",
                h.function,
                h.self_share * 100.0,
                h.total_share * 100.0
            ));
        }
        if !p.program_lines.is_empty() {
            s.push_str(&format!(
                "\nIts XDP program by source line ({} samples in it; a sample lands on the instruction after the one it waited for, so a stalled load shows on the next line):\n\n| line | share of the program | source |\n|---|---|---|\n",
                p.program_samples
            ));
            for l in &p.program_lines {
                s.push_str(&format!(
                    "| {} | {:.1}% | `{}` |\n",
                    l.location,
                    l.share * 100.0,
                    l.source.replace('|', "\\|").replace('`', "'")
                ));
            }
        }
    }
    s
}

/// What a run measured, in words.
pub fn method_words(r: &Results) -> String {
    match r.method {
        Method::Overload => format!(
            "forwarding rate under overload (the generator offers all it can for {} s; value = frames received per second)",
            r.seconds
        ),
        Method::Equilibrium => format!("BSDRP equilibrium throughput ({} s trials)", r.seconds),
        Method::Rfc2544 => format!(
            "RFC 2544 throughput, zero loss ({} s search trials, {} s final trial)",
            r.seconds, r.final_seconds
        ),
        Method::Ndr => format!("MLRsearch NDR ({} s to {} s trials)", r.seconds, r.final_seconds),
        Method::Pdr => format!("MLRsearch PDR ({} s to {} s trials)", r.seconds, r.final_seconds),
    }
}

/// Each run's frames by the DUT port's receive queue (the kernel's
/// per-queue counters of dut0), when a run used more than one: how evenly
/// the generator's CPUs spread them, and what each queue carried.
fn queues_section(r: &Results) -> String {
    if r.runs.iter().all(|x| x.queue_frames.len() <= 1) {
        return String::new();
    }
    let mut s = String::from(
        "\n## Receive queues\n\nFrames the DUT's port (dut0) took in on each receive queue, from the kernel's per-queue counters (`ethtool -S`); a veth puts a frame on the queue of the generator CPU that sent it (CPU c on queue c mod k). Under overload as Mpps over the run; `share` is the smallest queue's over the largest's.\n\n| DUT | profile | run | generator CPUs | per queue | share |\n|---|---|---|---|---|---|\n",
    );
    for x in &r.runs {
        let per_queue: Vec<String> = match &x.queue_pps {
            Some(pps) => pps
                .iter()
                .enumerate()
                .map(|(q, v)| format!("Q{q} {:.3}", v / 1e6))
                .collect(),
            None => x
                .queue_frames
                .iter()
                .enumerate()
                .map(|(q, v)| format!("Q{q} {v}"))
                .collect(),
        };
        let (lo, hi) = (
            x.queue_frames.iter().min().copied().unwrap_or(0),
            x.queue_frames.iter().max().copied().unwrap_or(0),
        );
        let share = if hi == 0 {
            "-".to_string()
        } else {
            format!("{:.2}", lo as f64 / hi as f64)
        };
        s.push_str(&format!(
            "| {} | {} | {} | {:?} | {} | {share} |\n",
            x.dut,
            x.profile,
            x.repeat,
            x.gen_cpus,
            per_queue.join(", ")
        ));
    }
    s
}

/// The probes' runs (`[measure] probes`): pings answered and BGP up, per
/// configuration x profile over its runs.
fn probes_section(r: &Results) -> String {
    let mut rows = String::new();
    for x in &r.results {
        let probed: Vec<&crate::probes::ProbeRecord> = r
            .runs
            .iter()
            .filter(|y| y.dut == x.dut && y.profile == x.profile)
            .filter_map(|y| y.probes.as_ref())
            .collect();
        if probed.is_empty() {
            continue;
        }
        let sent: u64 = probed.iter().map(|p| p.pings_sent).sum();
        let answered: u64 = probed.iter().map(|p| p.pings_answered).sum();
        let up = probed.iter().filter(|p| p.bgp_up).count();
        let downs: Vec<&str> = probed
            .iter()
            .filter(|p| !p.bgp_up)
            .map(|p| p.bgp_state.as_str())
            .collect();
        rows.push_str(&format!(
            "| {} | {} | {answered} of {sent} ({:.1}%) | {up} of {} | {} |\n",
            x.dut,
            x.profile,
            100.0 * answered as f64 / sent.max(1) as f64,
            probed.len(),
            downs.join("; ")
        ));
    }
    if rows.is_empty() {
        return String::new();
    }
    format!(
        "\n## The router's services during the runs\n\nA ping of the DUT's address from the generator's side (ten a second) and a BGP session through the DUT between the generator's and the receiver's namespaces (keepalives every second, hold time 3 s), over each run: the pings answered, and the runs through which the session stayed established without a break.\n\n| DUT | profile | pings answered | BGP up throughout | the session when it was not |\n|---|---|---|---|---|\n{rows}"
    )
}

/// A mix's parts under overload (the full receiver): each part's offered
/// and received rates, the median over the runs, and what came through.
fn parts_section(r: &Results) -> String {
    let mut rows = String::new();
    for x in &r.results {
        let runs: Vec<&RunRecord> = r
            .runs
            .iter()
            .filter(|y| {
                y.dut == x.dut && y.profile == x.profile && !y.parts_received_pps.is_empty()
            })
            .collect();
        let Some(first) = runs.first() else { continue };
        for part in 0..first.parts_received_pps.len() {
            let median = |f: &dyn Fn(&RunRecord) -> Option<f64>| {
                let mut v: Vec<f64> = runs.iter().filter_map(|y| f(y)).collect();
                v.sort_by(f64::total_cmp);
                v.get(v.len() / 2).copied()
            };
            let offered = median(&|y| y.parts_offered_pps.get(part).copied());
            let received = median(&|y| y.parts_received_pps.get(part).copied());
            let ratios: Vec<String> = runs
                .iter()
                .filter_map(|y| {
                    let o = y.parts_offered_pps.get(part)?;
                    let v = y.parts_received_pps.get(part)?;
                    (*o > 0.0).then(|| format!("{:.3}", v / o))
                })
                .collect();
            let mpps = |v: Option<f64>| v.map_or("-".into(), |v| format!("{:.4}", v / 1e6));
            rows.push_str(&format!(
                "| {} | {} | {} | {} | {} | {} |\n",
                x.dut,
                x.profile,
                part + 1,
                mpps(offered),
                mpps(received),
                ratios.join(", ")
            ));
        }
    }
    if rows.is_empty() {
        return String::new();
    }
    format!(
        "\n## A mix's parts\n\nEach part of a mix on its own (the full receiver's streams): frames a second offered and received, medians over the runs, and what came through of what was offered, run by run. A part whose frames carry no stamp the receiver reads (IP options, extension headers) receives none.\n\n| DUT | profile | part | offered Mpps | received Mpps | received / offered |\n|---|---|---|---|---|---|\n{rows}"
    )
}

/// linerate's fast path by reason, per configuration x profile over its
/// runs: the share of the frames it judged that it forwarded, passed to
/// the kernel (with the reasons), or dropped.
fn fast_path_section(r: &Results) -> String {
    // ((DUT, profile), packets by reason), in the order the runs give them.
    type Group<'a> = ((&'a str, &'a str), std::collections::BTreeMap<&'a str, u64>);
    let mut groups: Vec<Group> = Vec::new();
    for x in &r.runs {
        let Some(f) = &x.fast_path else { continue };
        let key = (x.dut.as_str(), x.profile.as_str());
        let i = match groups.iter().position(|g| g.0 == key) {
            Some(i) => i,
            None => {
                groups.push((key, Default::default()));
                groups.len() - 1
            }
        };
        for (reason, n) in f {
            *groups[i].1.entry(reason.as_str()).or_default() += n;
        }
    }
    if groups.is_empty() {
        return String::new();
    }
    let mut s = String::from(
        "\n## linerate's fast path during the runs\n\nWhat the fast path did with the frames it judged while the runs measured (its counters by reason, summed over the runs; `linerate stats` shows the same live). Frames passed go through the kernel's stack, at its speed.\n\n| DUT | profile | frames | forwarded (bridged) | passed to the kernel | dropped |\n|---|---|---:|---:|---|---|\n",
    );
    for ((dut, profile), by) in groups {
        let total: u64 = by.values().sum();
        let bridged = by.get("bridged").copied().unwrap_or(0);
        let share = |n: u64| 100.0 * n as f64 / total.max(1) as f64;
        let part = |prefix: &str| {
            let mut v: Vec<(&str, u64)> = by
                .iter()
                .filter(|(k, _)| k.starts_with(prefix))
                .map(|(k, n)| (k.trim_start_matches(prefix), *n))
                .collect();
            let sum: u64 = v.iter().map(|x| x.1).sum();
            if sum == 0 {
                return "0".to_string();
            }
            v.sort_by_key(|x| std::cmp::Reverse(x.1));
            let detail: Vec<String> = v
                .iter()
                .take(3)
                .map(|(k, n)| format!("{k} {:.3}%", share(*n)))
                .collect();
            format!("{:.3}% ({})", share(sum), detail.join(", "))
        };
        s.push_str(&format!(
            "| {dut} | {profile} | {total} | {:.3}%{} | {} | {} |\n",
            share(by.get("forwarded").copied().unwrap_or(0) + bridged),
            if bridged > 0 {
                format!(" ({:.3}%)", share(bridged))
            } else {
                String::new()
            },
            part("pass_"),
            part("drop_")
        ));
    }
    s
}

pub fn medians_table(r: &Results) -> String {
    let mut s = String::from(
        "| DUT | profile | runs | median Mpps | min | max | Gbit/s (these frames) | IMIX-equivalent Gbit/s | vs baseline |\n|---|---|---|---|---|---|---|---|---|\n",
    );
    for x in &r.results {
        let vs = r
            .comparisons
            .iter()
            .find(|c| c.dut == x.dut && c.profile == x.profile)
            .map(|c| {
                if c.proven {
                    format!(
                        "{:+.2}% ± {:.2}% ({:.2}x medians)",
                        c.difference_percent, c.ci_percent, c.median_ratio
                    )
                } else {
                    format!("no difference proven ({:.2}x medians)", c.median_ratio)
                }
            })
            .unwrap_or_else(|| {
                if r.duts.first() == Some(&x.dut) {
                    "baseline".into()
                } else {
                    "-".into()
                }
            });
        s.push_str(&format!(
            "| {} | {} | {} | {:.3} | {:.3} | {:.3} | {:.2} | {:.2} | {} |\n",
            x.dut,
            x.profile,
            x.runs_mpps.len(),
            x.median_mpps,
            x.min_mpps,
            x.max_mpps,
            x.median_gbps,
            x.imix_gbps,
            vs
        ));
    }
    s
}

/// Frames a churn profile's connection takes (SYN, its data segments,
/// FIN, the last ACK), None for a profile that is not churn.
fn frames_a_connection(p: &Profile) -> Option<u32> {
    use linerate_traffic::tcp::{TcpPhase, TcpRun};
    p.churn.map(|segments| {
        TcpRun {
            segments,
            ..TcpRun::phase(TcpPhase::Churn, 0)
        }
        .steps()
    })
}

/// Churn profiles' rates as new TCP connections a second: every
/// connection is the same number of frames, so the frame rate over that.
pub fn connections_table(r: &Results) -> String {
    let mut s = String::new();
    for x in &r.results {
        let Some(k) = x.frames_a_connection else {
            continue;
        };
        if s.is_empty() {
            s.push_str("| DUT | profile | frames a connection | median connections/s | min | max |\n|---|---|---:|---:|---:|---:|\n");
        }
        let cps = |mpps: f64| mpps * 1e6 / k as f64;
        s.push_str(&format!(
            "| {} | {} | {k} | {:.0} | {:.0} | {:.0} |\n",
            x.dut,
            x.profile,
            cps(x.median_mpps),
            cps(x.min_mpps),
            cps(x.max_mpps)
        ));
    }
    s
}

fn markdown(r: &Results, plot_error: Option<&anyhow::Error>) -> String {
    let mut s = format!("# {}\n\n", r.scenario);
    let machine = if r.hosts.is_some() {
        format!(
            "- controller: Linux {}, {} CPUs (the runs are on the hosts below)",
            r.machine.kernel, r.machine.cpus
        )
    } else {
        format!(
            "- machine: Linux {}, {} CPUs; generator on CPU {}, DUT on CPU {}",
            r.machine.kernel, r.machine.cpus, r.gen_cpu, r.dut_cpu
        )
    };
    s.push_str(&format!(
        "- scenario: {}\n- measurement: {}\n- repeats: {} per configuration, configurations interleaved in each round, in a balanced order that changes from round to round\n{machine}\n- started: {}\n",
        r.source,
        method_words(r),
        r.repeat,
        r.started_utc
    ));
    if r.queues > 1 {
        s.push_str(&format!(
            "- lab: {} veth queues; a configuration using k of them has its NAPI threads on CPUs {} + q and the generator on k CPUs from {} on\n",
            r.queues, r.dut_cpu, r.gen_cpu
        ));
    }
    if let Some(h) = &r.hosts {
        let gens: Vec<String> = h
            .gen
            .iter()
            .map(|g| {
                let cpus = if g.cpus.is_empty() {
                    String::new()
                } else {
                    format!("; CPUs {:?}", g.cpus)
                };
                format!("{} ({}{cpus})", g.target, g.interfaces.join(", "))
            })
            .collect();
        s.push_str(&format!(
            "- hosts: generator {}, receiver {} ({}), DUT {}{}\n",
            gens.join(" + "),
            h.recv.target,
            h.recv.interfaces.join(", "),
            h.dut
                .target
                .as_ref()
                .map_or("without ssh".into(), |t| t.to_string()),
            h.dut
                .mac
                .as_ref()
                .map_or(String::new(), |m| format!(" ({m})")),
        ));
    }
    if r.interrupted {
        s.push_str("- **interrupted** (Ctrl-C): only the runs finished before are here\n");
    }
    if let Some(why) = &r.failed {
        s.push_str(&format!(
            "- **stopped by a failure**: {why}. Only the runs finished before are here; the DUT's teardown ran\n"
        ));
    }
    s.push_str("\n## Medians\n\n");
    s.push_str(&medians_table(r));
    for x in &r.results {
        if x.not_overloaded > 0 {
            s.push_str(&format!(
                "\n{} / {}: in {} of {} runs the DUT lost under {}% of what was offered: the generator, not the DUT, was the limit, and the value is a floor.\n",
                x.dut, x.profile, x.not_overloaded, x.runs_mpps.len(), OVERLOAD_MIN_LOSS * 100.0
            ));
        }
        if x.invalid_trials > 0 {
            s.push_str(&format!(
                "\n{} / {}: {} trials were invalid (the generator could not offer the rate asked); they bounded the search and were not counted as loss.\n",
                x.dut, x.profile, x.invalid_trials
            ));
        }
    }
    let connections = connections_table(r);
    if !connections.is_empty() {
        s.push_str("\n## New TCP connections a second\n\nChurn profiles: every frame a step of a short connection (SYN, data segments, FIN, the last ACK), so the new connections a second are the frame rate over the frames a connection takes.\n\n");
        s.push_str(&connections);
    }
    s.push_str(&against_limit_section(r));
    s.push_str(&queues_section(r));
    s.push_str(&probes_section(r));
    s.push_str(&parts_section(r));
    s.push_str(&fast_path_section(r));
    s.push_str(&cpu_section(r));
    for (profile, text) in &r.ministat {
        s.push_str(&format!("\n## ministat, {profile}\n\n```\n{text}```\n"));
    }
    if r.ministat.is_empty() {
        s.push_str(
            "\nNo ministat comparison: it needs at least 3 runs of at least 2 configurations.\n",
        );
    }
    match plot_error {
        None => s.push_str(
            "\n## Plot\n\n![median with min-max per configuration](plot.svg)\n\n(also plot.png)\n",
        ),
        Some(e) => s.push_str(&format!("\nNo plot: {e:#}\n")),
    }
    if r.runs.iter().any(|x| x.generators.len() > 1) {
        s.push_str("\n## Generators\n\nEach generator's offered rate (pps) in each run (searches: in the last trial); they add up.\n\n| configuration | profile | run | ");
        let first = r
            .runs
            .iter()
            .find(|x| !x.generators.is_empty())
            .expect("checked");
        let heads: Vec<String> = first
            .generators
            .iter()
            .map(|g| format!("{} {}", g.host, g.interface))
            .collect();
        s.push_str(&heads.join(" | "));
        s.push_str(" |\n|---|---|---|");
        s.push_str(&"---:|".repeat(heads.len()));
        s.push('\n');
        for x in &r.runs {
            let cells: Vec<String> = x
                .generators
                .iter()
                .map(|g| format!("{:.0}", g.pps))
                .collect();
            s.push_str(&format!(
                "| {} | {} | {} | {} |\n",
                x.dut,
                x.profile,
                x.repeat,
                cells.join(" | ")
            ));
        }
    }
    s.push_str("\n## Files\n\nRaw values (pps, one run a line, for `linerate ministat`): ");
    s.push_str(
        &r.results
            .iter()
            .map(|x| format!("`{}`", x.file))
            .collect::<Vec<_>>()
            .join(", "),
    );
    s.push_str(". Per-second receiver lines: `logs/`. Everything: `results.json`.\n");
    s.push_str(&crate::dut_settings::markdown(&r.settings));
    if !r.records.is_empty() {
        s.push_str("\n## Recorded from the DUT\n");
        for x in &r.records {
            s.push_str(&format!(
                "\n{}: `{}`\n\n```\n{}\n```\n",
                x.dut,
                x.command,
                x.output.trim_end()
            ));
        }
    }
    s
}

/// "2026-11-22 09:34:45 UTC", from the system clock.
pub fn utc_now() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0);
    let (days, rem) = (secs.div_euclid(86400), secs.rem_euclid(86400));
    // Howard Hinnant's civil_from_days.
    let z = days + 719468;
    let era = z.div_euclid(146097);
    let doe = z - era * 146097;
    let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02} {:02}:{:02}:{:02} UTC",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

/// A trial as `linerate lab run` shows it, under its run.
pub fn trial_line(t: &linerate_search::Trial) -> String {
    format!(
        "    trial {} ({}): {:.3} Mpps asked for {:.2} s, offered {:.3}, received {:.3}, loss {:.4}%{}",
        t.index,
        t.step,
        t.measurement.requested_pps / 1e6,
        t.duration,
        t.measurement.offered_pps() / 1e6,
        t.measurement.forwarding_pps() / 1e6,
        t.loss_ratio * 100.0,
        if t.measurement.valid { "" } else { " INVALID (generator short)" }
    )
}

impl RunRecord {
    /// The run as `linerate lab run` shows it when it ends.
    pub fn line(&self) -> String {
        let r = self;
        let detail = match (r.offered_pps, r.loss_ratio) {
            (Some(o), Some(l)) => format!(
                " (offered {:.3} Mpps, {:.1}% lost{})",
                o / 1e6,
                l * 100.0,
                if r.overloaded == Some(false) {
                    ", DUT not overloaded"
                } else {
                    ""
                }
            ),
            _ => format!(" ({} trials)", r.trials.len()),
        };
        let queues = match &r.queue_pps {
            Some(q) if q.len() > 1 => {
                let q: Vec<String> = q
                    .iter()
                    .enumerate()
                    .map(|(i, v)| format!("Q{i} {:.3}", v / 1e6))
                    .collect();
                format!(" [{} Mpps]", q.join(" "))
            }
            _ => String::new(),
        };
        format!(
            "{} {} run {}: {:.3} Mpps{detail}{queues}",
            r.dut,
            r.profile,
            r.repeat,
            r.value_pps / 1e6
        )
    }
}

/// What `linerate lab run` says at the end: the medians, ministat's
/// comparisons, and where the results are (`out`).
pub fn summary(r: &Results, out: &std::path::Path) -> String {
    let mut connections = connections_table(r);
    if !connections.is_empty() {
        connections.insert_str(0, "\nnew TCP connections a second:\n");
    }
    format!(
        "\n{}{connections}\n{}\nresults in {}: report.md, results.json, plot.svg, plot.png, {}",
        medians_table(r),
        r.ministat
            .iter()
            .map(|(p, t)| format!("ministat, {p}:\n{t}"))
            .collect::<Vec<_>>()
            .join("\n"),
        out.display(),
        r.results
            .iter()
            .map(|x| x.file.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A churn profile's rates as new connections a second: the frame
    /// rate over the frames a connection takes (SYN, 4 data, FIN, ACK);
    /// other profiles have none.
    #[test]
    fn churn_profiles_are_reported_in_connections_a_second() {
        let sc = Scenario::parse(
            "test",
            "duts = [\"linux\"]\nprofiles = [\"churn-4\", \"ipv4-60\"]\n[profile.churn-4]\nfamily = \"ipv4\"\nlen = \"60\"\nproto = \"tcp\"\nchurn = 4\n",
        )
        .unwrap();
        let mut r = Results::new(&sc, 1);
        for (profile, repeat, pps) in [
            ("churn-4", 1, 63_000.0),
            ("churn-4", 2, 70_000.0),
            ("churn-4", 3, 77_000.0),
            ("ipv4-60", 1, 1e6),
        ] {
            r.runs.push(RunRecord {
                dut: "linux".into(),
                profile: profile.into(),
                repeat,
                value_pps: pps,
                ..Default::default()
            });
        }
        r.finish();
        let churn = r.results.iter().find(|x| x.profile == "churn-4").unwrap();
        assert_eq!(churn.frames_a_connection, Some(7));
        assert_eq!(churn.median_connections_per_s, Some(10_000.0));
        let plain = r.results.iter().find(|x| x.profile == "ipv4-60").unwrap();
        assert_eq!(plain.median_connections_per_s, None);
        let t = connections_table(&r);
        let rows: Vec<&str> = t.lines().filter(|l| l.starts_with("| linux")).collect();
        assert_eq!(
            rows,
            ["| linux | churn-4 | 7 | 10000 | 9000 | 11000 |"],
            "{t}"
        );
        assert!(markdown(&r, None).contains("## New TCP connections a second"));
    }

    /// linerate's counters by reason: summed over a configuration's runs,
    /// as shares of every frame judged, the largest reasons first; DUTs
    /// without them left out.
    #[test]
    fn the_fast_path_section_sums_the_runs_by_reason() {
        let sc = Scenario::parse("test", "duts = [\"linux\", \"linerate\"]\n").unwrap();
        let mut r = Results::new(&sc, 1);
        let counts = |v: &[(&str, u64)]| Some(v.iter().map(|(k, n)| (k.to_string(), *n)).collect());
        for (repeat, fp) in [
            (
                1,
                counts(&[("forwarded", 900), ("pass_ct_young", 60), ("pass_ttl", 10)]),
            ),
            (
                2,
                counts(&[
                    ("forwarded", 1000),
                    ("pass_ct_young", 20),
                    ("drop_firewall", 10),
                ]),
            ),
        ] {
            r.runs.push(RunRecord {
                dut: "linerate".into(),
                profile: "ipv4-60".into(),
                repeat,
                fast_path: fp,
                ..Default::default()
            });
            r.runs.push(RunRecord {
                dut: "linux".into(),
                profile: "ipv4-60".into(),
                repeat,
                ..Default::default()
            });
        }
        let s = fast_path_section(&r);
        let rows: Vec<&str> = s.lines().filter(|l| l.starts_with("| ")).collect();
        assert_eq!(rows.len(), 2, "{s}");
        assert_eq!(
            rows[1],
            "| linerate | ipv4-60 | 2000 | 95.000% | 4.500% (ct_young 4.000%, ttl 0.500%) | 0.500% (firewall 0.500%) |"
        );
        r.runs.retain(|x| x.dut == "linux");
        assert_eq!(fast_path_section(&r), "");
    }

    /// Each round's rate over the limit's in the same round, and the
    /// median's interval from the rounds' order statistics (10 rounds: the
    /// 2nd and 9th smallest ratios), none for fewer than 6 rounds.
    #[test]
    fn the_limit_section_gives_the_rounds_ratios_and_the_medians_interval() {
        let sc = Scenario::parse(
            "test",
            "duts = [\"linerate\", \"xdp-redirect\"]\nrepeat = 10\n",
        )
        .unwrap();
        let mut r = Results::new(&sc, 1);
        r.limit = Some("xdp-redirect".into());
        // linerate's rate over the limit's, by round, in no order.
        let ratios = [0.9, 0.7, 1.0, 0.8, 0.95, 0.85, 0.75, 0.65, 1.05, 0.89];
        for (i, ratio) in ratios.iter().enumerate() {
            for (dut, value) in [("linerate", 2e6 * ratio), ("xdp-redirect", 2e6)] {
                r.runs.push(RunRecord {
                    dut: dut.into(),
                    profile: "ipv4-60".into(),
                    repeat: i as u32 + 1,
                    value_pps: value,
                    ..Default::default()
                });
            }
        }
        r.against_limit = r.against_limit();
        let a = &r.against_limit[0];
        let i = a.median_interval.unwrap();
        assert!(
            (i.low - 0.7).abs() < 1e-12 && (i.high - 1.0).abs() < 1e-12,
            "{i:?}"
        );
        let s = against_limit_section(&r);
        let row = s.lines().find(|l| l.starts_with("| linerate")).unwrap();
        assert_eq!(
            row,
            "| linerate | ipv4-60 | 0.87x | 0.70x-1.00x | 0.65x | 1.05x | 0.90 0.70 1.00 0.80 0.95 0.85 0.75 0.65 1.05 0.89 |"
        );
        // Five rounds: no interval reaches 95%.
        r.runs.retain(|x| x.repeat <= 5);
        r.against_limit = r.against_limit();
        assert!(r.against_limit[0].median_interval.is_none());
        assert!(against_limit_section(&r).contains("| linerate | ipv4-60 | 0.90x | - |"));
    }

    /// More configurations than ministat compares at once: one table of
    /// the baseline and up to six others each, and every comparison made.
    #[test]
    fn many_configurations_get_several_ministat_tables() {
        let names: Vec<String> = ["linux", "linerate"]
            .into_iter()
            .map(String::from)
            .chain(crate::firewall_duts::names().into_iter().take(7))
            .collect();
        let text = format!(
            "duts = [{}]\nprofiles = [\"ipv4-60\"]\n",
            names
                .iter()
                .map(|n| format!("{n:?}"))
                .collect::<Vec<_>>()
                .join(", ")
        );
        let sc = Scenario::parse("test", &text).unwrap();
        let mut r = Results::new(&sc, 1);
        for (i, dut) in names.iter().enumerate() {
            for repeat in 0..3 {
                r.runs.push(RunRecord {
                    dut: dut.clone(),
                    profile: "ipv4-60".into(),
                    repeat,
                    value_pps: 1e6 * (i + 1) as f64 + repeat as f64 * 1e3,
                    ..Default::default()
                });
            }
        }
        r.finish();
        assert_eq!(r.results.len(), 9);
        assert_eq!(r.comparisons.len(), 8);
        // 8 against the baseline: 6 in the first table, 2 in the second.
        assert_eq!(r.ministat.len(), 2);
        for (_, t) in &r.ministat {
            assert!(t.starts_with("x linux.ipv4-60.pps\n"), "{t}");
        }
        assert!(r.ministat[0].1.contains("O "), "{}", r.ministat[0].1);
        assert_eq!(r.ministat[1].1.matches(".pps\n").count(), 3);
    }
}
