//! `linerate lab run`: the lab runner. Builds the lab, runs every DUT
//! configuration against every traffic profile `repeat` times, writes the
//! raw values, logs, results.json, report.md and plots, prints the
//! ministat comparison, and removes the lab, also on error or Ctrl-C.
pub mod command_trial;
pub use linerate_labhosts::{hosts, remote};
pub mod dut_commands;
pub mod dut_settings;
pub mod dut_setup;
pub mod dut_vlans;
pub mod firewall_duts;
pub mod measure;
pub mod median_ci;
pub mod order;
pub mod path_flags;
pub mod plot;
pub mod probes;
pub mod profile;
pub mod report;
pub mod scenario;
pub mod throughput;

use anyhow::{bail, Result};
use dut_setup::RunningDut;
use linerate_host::queue_stats;
use linerate_lab::{topology, Lab, LabSpec, UpOutcome};
use linerate_search::{Trial, Trials};
use linerate_traffic::frame::parse_mac;
use linerate_traffic::profile::Sender;
use measure::{LabTrials, Path, Runner};
use report::{Results, RunRecord};
use scenario::{Forwarder, Method, Profile, Scenario};
use std::os::fd::AsFd;
use std::sync::atomic::{AtomicBool, Ordering};
use throughput::{SearchMethod, SearchOutcome, SearchPlan};

/// What the runner tells its caller as it goes.
pub trait Progress {
    /// A run starts: (index from 1, total, dut, profile, repeat from 1).
    fn run_start(&mut self, index: usize, total: usize, dut: &str, profile: &str, repeat: u32);
    fn trial(&mut self, t: &Trial);
    fn run_done(&mut self, r: &RunRecord);
    fn note(&mut self, line: &str);
}

/// Everything that can be refused is refused before the lab exists: the
/// DUT configurations can be set up, the output directory is free.
fn preflight(sc: &Scenario, out: &std::path::Path) -> Result<()> {
    check_duts(sc)?;
    report::check_dir(out)
}

fn check_duts(sc: &Scenario) -> Result<()> {
    for (name, def) in &sc.duts {
        dut_setup::preflight(def)
            .map_err(|why| anyhow::anyhow!("{}: {why}", sc.dut_origin(name)))?;
    }
    Ok(())
}

/// `lab run --check`: what a run checks before anything changes (the DUT
/// configurations; with hosts, each connected and checked), and nothing
/// else: no lab, no traffic, no output.
pub fn check(sc: &Scenario, progress: &mut dyn Progress) -> Result<()> {
    check_duts(sc)?;
    connect_hosts(sc, progress).map(|_| ())
}

/// With `[hosts]`: every host connected, its linerate, interfaces and
/// commands checked, the DUT's MAC known (crate::hosts::preflight).
fn connect_hosts<'s>(
    sc: &'s Scenario,
    progress: &mut dyn Progress,
) -> Result<Option<(&'s hosts::LabHosts, hosts::Connected, String)>> {
    let Some(h) = &sc.hosts else {
        return Ok(None);
    };
    let c = hosts::Connected::connect(h)?;
    let commands: Vec<&str> = sc
        .duts
        .iter()
        .flat_map(|(_, d)| d.setup.iter().chain(&d.teardown).chain(&d.record))
        .map(String::as_str)
        .collect();
    let mac = hosts::preflight(h, &c, &commands)?;
    progress.note(&format!(
        "hosts: generator {}, receiver {} ({}), DUT {} (MAC {mac}): linerate {} on each",
        h.gen
            .iter()
            .map(|g| format!("{} ({})", g.target, g.interfaces.join(", ")))
            .collect::<Vec<_>>()
            .join(" + "),
        h.recv.target,
        h.recv.interfaces[0],
        h.dut
            .target
            .as_ref()
            .map_or("without ssh".to_string(), |t| t.to_string()),
        env!("CARGO_PKG_VERSION")
    ));
    Ok(Some((h, c, mac)))
}

/// Where the runs happen: the local namespace lab, or the scenario's hosts.
enum Site {
    Local { lab: Lab, path: Path },
    Hosts { path: command_trial::CommandPath },
}

pub fn run(
    sc: &Scenario,
    out: &std::path::Path,
    stop: &AtomicBool,
    progress: &mut dyn Progress,
) -> Result<Results> {
    preflight(sc, out)?;
    let names = |v: Vec<&str>| v.join(", ");
    progress.note(&format!(
        "{}: {} x {} x {} runs, {}",
        sc.name,
        names(sc.duts.iter().map(|d| d.0.as_str()).collect()),
        names(sc.profiles.iter().map(|p| p.0.as_str()).collect()),
        sc.repeat,
        sc.method_words()
    ));
    // The hosts, connected and checked, before anything changes anywhere.
    let remote = connect_hosts(sc, progress)?;
    report::prepare_dir(out)?;
    // What `linerate tune` is run as on the DUT, and on which interfaces
    // (the local lab's: when the forwarder is up, in local_run).
    let mut tune_remote: Option<(String, Vec<String>)> = None;
    let (mut site, dut_shell, dut_cpu) = match remote {
        None => {
            let mut spec = LabSpec::new(&sc.lab_name);
            if let Some(c) = sc.dut_cpu {
                spec.dut_cpu = c;
            }
            spec.queues = sc.queues;
            spec.gen_ports = sc.gen_ports;
            let (lab, outcome) = Lab::up(&spec, false)?;
            if outcome == UpOutcome::AlreadyUp {
                bail!(
                    "lab {0} is already up; remove it with `linerate lab down --name {0}` or set [lab] name",
                    sc.lab_name
                );
            }
            let ns = lab.namespaces();
            let ifs = lab.interfaces();
            progress.note(&format!(
                "lab {}: {} -> {} -> {} (generator CPU {}, DUT CPU {})",
                sc.lab_name,
                ns.gen,
                ns.dut,
                ns.recv,
                sc.gen_cpu,
                lab.spec().dut_cpu
            ));
            let path = Path {
                gen_netns: ns.gen.clone(),
                sender: Sender {
                    ifname: ifs.gen.clone(),
                    src_mac: parse_mac("the lab's generator MAC", topology::mac::GEN)?,
                    dst_mac: parse_mac("the lab's DUT MAC", topology::mac::DUT_IN)?,
                    cpu: sc.gen_cpu,
                    other_ports: match sc.gen_ports {
                        1 => Vec::new(),
                        _ => vec![linerate_traffic::profile::Port {
                            ifname: ifs.gen_port2.clone(),
                            src_mac: parse_mac(
                                "the lab's generator MAC",
                                topology::mac::GEN_PORT2,
                            )?,
                            dst_mac: parse_mac("the lab's DUT MAC", topology::mac::DUT_PORT2)?,
                        }],
                    },
                },
                gen_cpus: Vec::new(),
                recv_netns: ns.recv.clone(),
                recv_iface: ifs.recv.clone(),
            };
            // The DUT's commands run in its namespace on this machine.
            let shell = dut_commands::DutShell {
                host: std::sync::Arc::new(remote::Host::connect(
                    "dut",
                    remote::Target::Local,
                    Default::default(),
                )?),
                netns: Some(ns.dut.clone()),
                timeout: std::time::Duration::from_secs(60),
            };
            let cpu = lab.spec().dut_cpu;
            (Site::Local { lab, path }, Some(shell), cpu)
        }
        Some((h, c, dut_mac)) => {
            let shell = c.dut.clone().map(|host| dut_commands::DutShell {
                host,
                netns: h.dut.netns.clone(),
                timeout: std::time::Duration::from_secs_f64(h.command_timeout),
            });
            tune_remote = Some((h.dut.linerate.clone(), h.dut.interfaces.clone()));
            let path = command_trial::CommandPath {
                gens: h.gen.iter().cloned().zip(c.gen.iter().cloned()).collect(),
                recv: h.recv.clone(),
                recv_host: c.recv.clone(),
                dut_mac,
            };
            (Site::Hosts { path }, shell, 0)
        }
    };
    let mut results = Results::new(sc, dut_cpu);
    let total = sc.repeat as usize * sc.duts.len() * sc.profiles.len();
    let mut index = 0;
    // --profile: each configuration's stacks, folded, over its runs, and
    // an XDP DUT's program's nanoseconds a frame, run by run.
    let mut stacks: std::collections::BTreeMap<String, String> = Default::default();
    let mut xdp_ns: std::collections::BTreeMap<String, Vec<f64>> = Default::default();
    let mut by_line: std::collections::BTreeMap<String, profile::LineCounts> = Default::default();
    let _run_stats = if sc.profile {
        Some(linerate_bpf::loader::RunStats::enable()?)
    } else {
        None
    };
    let mut tables = dut_setup::RouteTables::default();
    let mut recorded = std::collections::BTreeSet::new();
    // Repeats outermost: every configuration runs once per round, so slow
    // drift of the machine (heat, other load) hits all of them alike; and
    // in a balanced order that changes from round to round (order.rs), so
    // that no configuration always runs first, or always after the same
    // one.
    'rounds: for repeat in 1..=sc.repeat {
        for (pname, profile) in &sc.profiles {
            for d in order::round_order(sc.duts.len(), repeat) {
                let (dname, def) = &sc.duts[d];
                if stop.load(Ordering::Relaxed) {
                    results.interrupted = true;
                    break 'rounds;
                }
                index += 1;
                progress.run_start(index, total, dname, pname, repeat);
                let mut one_run = || -> Result<Option<RunRecord>> {
                    // The DUT's own commands first, torn down whatever
                    // happens after.
                    let set_up = match &dut_shell {
                        Some(sh) => {
                            let (guard, r) = sh.set_up(dname, def);
                            r?;
                            if recorded.insert(dname.clone()) {
                                results.records.extend(sh.record(dname, def));
                                if let Some((linerate, ifaces)) = &tune_remote {
                                    results.settings.push(sh.settings(dname, linerate, ifaces));
                                }
                            }
                            Some(guard)
                        }
                        None => None,
                    };
                    let measured = match &mut site {
                        Site::Local { lab, path } => local_run(
                            sc,
                            lab,
                            path,
                            &mut tables,
                            (dname, def),
                            dut_shell.as_ref().map(|sh| (sh, &mut results.settings)),
                            (pname, profile, repeat),
                            out,
                            stop,
                            progress,
                            (&mut stacks, &mut xdp_ns, &mut by_line),
                        )?,
                        Site::Hosts { path } => {
                            let runner = Runner::Commands {
                                path: path.clone(),
                                profile: profile.clone(),
                            };
                            let mut trials = LabTrials::new(runner, sc.receiver, stop);
                            let m = measure_one(sc, &mut trials, progress);
                            let log = report::write_log(out, dname, pname, repeat, &trials.log)?;
                            m.map(|mut r| {
                                r.log = log;
                                r.generators = std::mem::take(&mut trials.generators);
                                r
                            })
                        }
                    };
                    if let Some(g) = set_up {
                        g.tear_down()
                            .map_err(|e| e.context(format!("DUT {dname}")))?;
                    }
                    match measured {
                        Ok(r) => Ok(Some(r)),
                        Err(_) if stop.load(Ordering::Relaxed) => Ok(None),
                        Err(e) => Err(e),
                    }
                };
                match one_run() {
                    // Stopped during the run: cut short, not a finished run.
                    Ok(Some(_)) if stop.load(Ordering::Relaxed) => {
                        results.interrupted = true;
                        break 'rounds;
                    }
                    Ok(Some(mut record)) => {
                        // Whole pps, as in the raw files: the terminal's
                        // ministat and one run on the files later print the
                        // same.
                        record.value_pps = record.value_pps.round();
                        record.dut = dname.clone();
                        record.profile = pname.clone();
                        record.repeat = repeat;
                        progress.run_done(&record);
                        results.add(record);
                    }
                    Ok(None) => {
                        results.interrupted = true;
                        break 'rounds;
                    }
                    Err(e) => {
                        let why = format!("{dname}, {pname}, run {repeat}: {e:#}");
                        progress.note(&format!("stopped: {why}"));
                        results.failed = Some(why);
                        break 'rounds;
                    }
                }
            }
        }
    }
    if let Site::Local { lab, .. } = site {
        let removed = lab.down()?;
        progress.note(&format!(
            "lab {} removed ({})",
            sc.lab_name,
            removed.join(", ")
        ));
    }
    for (dut, folded) in &stacks {
        let file = format!("flame-{dut}.svg");
        profile::flame_graph(
            &format!("{dut}: the DUT's core (CPU {dut_cpu}), cpu-clock"),
            folded,
            &out.join(&file),
        )?;
        let (samples, top) = profile::top(folded, 15);
        let (program_samples, program_lines) = by_line
            .get(dut)
            .map(|c| profile::top_lines(c, 15))
            .unwrap_or_default();
        results.profiles_cpu.push(profile::DutProfile {
            dut: dut.clone(),
            xdp_ns_per_frame: xdp_ns
                .get(dut)
                .map(|v| linerate_ministat::Dataset::new(dut, v).median()),
            samples,
            flame_graph: file,
            top,
            program_samples,
            program_lines,
        });
    }
    results.finish();
    report::write_all(out, &results)?;
    Ok(results)
}

type ProfileTables<'a> = (
    &'a mut std::collections::BTreeMap<String, String>,
    &'a mut std::collections::BTreeMap<String, Vec<f64>>,
    &'a mut std::collections::BTreeMap<String, profile::LineCounts>,
);

/// One run in the local lab: the DUT's table, queues and forwarder set up,
/// the queues counted, the DUT's core profiled if asked. The outer error
/// is the lab's; the inner one the measurement's.
#[allow(clippy::too_many_arguments)]
fn local_run(
    sc: &Scenario,
    lab: &mut Lab,
    path: &Path,
    tables: &mut dut_setup::RouteTables,
    (dname, def): (&String, &scenario::DutDef),
    settings: Option<(&dut_commands::DutShell, &mut Vec<dut_settings::Settings>)>,
    (pname, profile, repeat): (&String, &Profile, u32),
    out: &std::path::Path,
    stop: &AtomicBool,
    progress: &mut dyn Progress,
    (stacks, xdp_ns, by_line): ProfileTables,
) -> Result<Result<RunRecord>> {
    let ns = lab.namespaces();
    let ifs = lab.interfaces();
    if let Some(note) = tables.ensure(&ns.dut, def)? {
        progress.note(&note);
    }
    // The DUT's receive queues, and a generator CPU for each.
    let queues = def.queues.unwrap_or(sc.queues);
    lab.use_queues(queues)?;
    let mut run_path = path.clone();
    run_path.gen_cpus = sc.gen_cpus(queues);
    let ports = ifs.dut_ports(lab.spec().gen_ports);
    let running = RunningDut::start(def, &ns.dut, &ports)?;
    // The DUT's settings with this configuration's forwarder up, once.
    if let Some((sh, all)) = settings {
        if !all.iter().any(|s| &s.dut == dname) {
            let exe = std::env::current_exe()?;
            all.push(sh.settings(dname, &exe.to_string_lossy(), &ports));
        }
    }
    // Checked when the scenario was read: this cannot fail.
    let traffic = profile.check()?;
    let runner = Runner::InProcess {
        path: run_path.clone(),
        traffic,
    };
    let mut trials = LabTrials::new(runner, sc.receiver, stop);
    if def.establish {
        establish_parts(
            &mut trials,
            &run_path,
            &profile.check()?,
            &ns.dut,
            sc,
            stop,
            progress,
        )?;
    }
    let queue_count = || -> Result<Vec<u64>> {
        let mut q = queue_stats::rx_queues(Some(&ns.dut), &ifs.dut_in)?.queues;
        q.truncate(queues as usize);
        Ok(q)
    };
    let queues_before = queue_count()?;
    let recording = if sc.profile {
        let data = out.join(format!("{dname}.{pname}.{repeat}.perf.data"));
        Some(profile::Recording::start(lab.spec().dut_cpu, &data)?)
    } else {
        None
    };
    let program = match (sc.profile, def.forwarder) {
        (
            true,
            Forwarder::Linerate
            | Forwarder::XdpFibLookup
            | Forwarder::XdpRedirect
            | Forwarder::XdpPass,
        ) => Some(profile::xdp_program(&ns.dut, &ifs.dut_in)?),
        _ => None,
    };
    // Its source lines, for the samples that fall in it.
    let jit_lines = match (&recording, &program) {
        (Some(_), Some(p)) => Some(linerate_bpf::loader::program_lines(p.as_fd())?),
        _ => None,
    };
    let runs_before = program
        .as_ref()
        .map(|p| linerate_bpf::loader::program_runs(p.as_fd()))
        .transpose()?;
    let fast_path_before = fast_path_counts(&ns.dut, def)?;
    let mut probes = match sc.probes {
        true => Some(probes::Probes::start(&ns, sc.probes_port)?),
        false => None,
    };
    let watch = probes.as_mut().map(|p| p.watch(sc.seconds)).transpose()?;
    let measured = measure_one(sc, &mut trials, progress);
    let probed = match (&mut probes, watch) {
        (Some(p), Some(w)) => Some(p.finish(w)?),
        _ => None,
    };
    drop(probes);
    let fast_path = match fast_path_before {
        Some(before) => {
            let after = fast_path_counts(&ns.dut, def)?.unwrap_or_default();
            let by_reason = fast_path_delta(&before, &after);
            trials.log.push_str(&fast_path_line(&by_reason));
            Some(by_reason)
        }
        None => None,
    };
    let queue_frames: Vec<u64> = queue_count()?
        .iter()
        .zip(queues_before.iter().chain(std::iter::repeat(&0)))
        .map(|(a, b)| a.saturating_sub(*b))
        .collect();
    if let (Some(p), Some(before)) = (&program, runs_before) {
        let after = linerate_bpf::loader::program_runs(p.as_fd())?;
        if let Some(ns) = profile::ns_per_run(before, after) {
            xdp_ns.entry(dname.clone()).or_default().push(ns);
        }
    }
    if let Some(r) = recording {
        let (folded, lines) = r.finish(jit_lines.as_ref())?;
        stacks.entry(dname.clone()).or_default().push_str(&folded);
        let all = by_line.entry(dname.clone()).or_default();
        for (loc, (src, n)) in lines {
            all.entry(loc).or_insert((src, 0)).1 += n;
        }
    }
    running.stop()?;
    let log = report::write_log(out, dname, pname, repeat, &trials.log)?;
    Ok(measured.map(|mut r| {
        r.log = log;
        r.set_queues(&run_path.gen_cpus, queue_frames);
        r.fast_path = fast_path;
        r.probes = probed;
        r
    }))
}

/// Makes the flows of each part of a profile (the profile alone, or each
/// part of its mix) connections the DUT's conntrack holds assured
/// (LabTrials::establish), part after part, each counted apart from the
/// connections the parts before it made; churn parts open their own in
/// the runs. Each TCP part's trials then go on from where establishing
/// left its connections.
fn establish_parts(
    trials: &mut LabTrials,
    path: &Path,
    traffic: &linerate_traffic::profile::Traffic,
    dut_netns: &str,
    sc: &Scenario,
    stop: &AtomicBool,
    progress: &mut dyn Progress,
) -> Result<()> {
    let parts: Vec<linerate_traffic::profile::Traffic> = std::iter::once(traffic)
        .chain(&traffic.mix)
        .map(|t| linerate_traffic::profile::Traffic {
            mix: Vec::new(),
            ..t.clone()
        })
        .collect();
    let mixed = parts.len() > 1;
    for (i, part) in parts.into_iter().enumerate() {
        let which = if mixed {
            format!("part {}: ", i + 1)
        } else {
            String::new()
        };
        if part.churn.is_some() {
            trials.log.push_str(&format!(
                "# {which}churn: the runs open and close their own connections; none established first\n"
            ));
            continue;
        }
        let before = dut_setup::conntrack_assured(dut_netns)?;
        let runner = Runner::InProcess {
            path: path.clone(),
            traffic: part.clone(),
        };
        let mut alone = LabTrials::new(runner, sc.receiver, stop);
        let e = alone.establish(part.flows(), path.gen_cpus.len(), || {
            Ok(dut_setup::conntrack_assured(dut_netns)?.saturating_sub(before))
        });
        trials.log.push_str(&alone.log);
        let e = e?;
        match i {
            0 => trials.tcp = alone.tcp,
            _ => trials.mix_tcp[i - 1] = alone.tcp,
        }
        let held = dut_setup::conntrack_count(dut_netns)?;
        progress.note(&format!(
            "  {which}{} flows established in {:.1} s, {} passes ({} frames sent, {} answered); the DUT's conntrack holds {held}, {} assured",
            e.flows, e.seconds, e.passes, e.sent, e.answered, e.assured
        ));
        trials.log.push_str(&format!(
            "# {which}established {} flows in {} passes: {} frames sent, {} answered; conntrack holds {held}, {} assured\n",
            e.flows, e.passes, e.sent, e.answered, e.assured
        ));
    }
    Ok(())
}

/// A linerate DUT's counters, summed over the interfaces it routes (its
/// record in /run/linerate/routers, as `linerate stats --netns` reads
/// them); None for other DUTs.
fn fast_path_counts(
    netns: &str,
    def: &scenario::DutDef,
) -> Result<Option<linerate_dataplane::layout::RouterCounters>> {
    if def.forwarder != Forwarder::Linerate {
        return Ok(None);
    }
    let (rec, map) = linerate_dataplane::record::open(netns)?;
    let each = rec
        .interfaces
        .iter()
        .map(|(_, ifindex)| linerate_dataplane::record::read(&map, *ifindex))
        .collect::<Result<Vec<_>>>()?;
    Ok(Some(linerate_dataplane::layout::RouterCounters::sum(&each)))
}

/// Packets by reason between two readings, the reasons that moved; the
/// frames the policer dropped of a pass reason `pass_X` as `drop_policed_X`.
fn fast_path_delta(
    before: &linerate_dataplane::layout::RouterCounters,
    after: &linerate_dataplane::layout::RouterCounters,
) -> std::collections::BTreeMap<String, u64> {
    let reasons = linerate_dataplane::layout::REASONS.iter().enumerate();
    let counted = reasons.clone().map(|(i, name)| {
        (
            name.to_string(),
            after.packets[i].saturating_sub(before.packets[i]),
        )
    });
    let policed = reasons.map(|(i, name)| {
        (
            format!("drop_policed_{}", name.trim_start_matches("pass_")),
            after.policed[i].saturating_sub(before.policed[i]),
        )
    });
    counted.chain(policed).filter(|(_, n)| *n > 0).collect()
}

/// The run log's line for it: `# linerate's fast path during the run:
/// forwarded N; pass_ct_young M; ...`, largest first.
fn fast_path_line(by_reason: &std::collections::BTreeMap<String, u64>) -> String {
    let mut v: Vec<(&String, &u64)> = by_reason.iter().collect();
    v.sort_by_key(|x| std::cmp::Reverse(*x.1));
    let parts: Vec<String> = v.iter().map(|(k, n)| format!("{k} {n}")).collect();
    format!(
        "# linerate's fast path during the run: {}\n",
        if parts.is_empty() {
            "no frames".to_string()
        } else {
            parts.join("; ")
        }
    )
}

/// One run's value: the forwarding rate under overload, or a search's result.
fn measure_one(
    sc: &Scenario,
    trials: &mut LabTrials,
    progress: &mut dyn Progress,
) -> Result<RunRecord> {
    if sc.method == Method::Overload {
        let r = trials.run(None, sc.seconds)?;
        return Ok(RunRecord::overload(&r));
    }
    let max = match sc.max_rate_pps {
        Some(m) => m,
        None => {
            // "auto": the generator's unpaced rate into this DUT.
            let built = throughput::probe_max_rate(trials, sc.seconds)?;
            progress.note(&format!(
                "  max rate: {:.3} Mpps (the generator, unpaced)",
                built / 1e6
            ));
            built
        }
    };
    let plan = SearchPlan {
        method: match sc.method {
            Method::Overload => unreachable!("measured above"),
            Method::Equilibrium => SearchMethod::Equilibrium,
            Method::Rfc2544 => SearchMethod::Rfc2544,
            Method::Ndr | Method::Pdr => SearchMethod::NdrPdr,
        },
        seconds: sc.seconds,
        final_seconds: sc.final_seconds,
        tolerance: sc.tolerance,
        width: sc.width,
        loss_ratio: sc.loss_ratio,
        exceed_ratio: sc.exceed_ratio,
        duration_sum: sc.duration_sum,
    };
    let mut log = Trials::new(|t: &Trial| progress.trial(t));
    let outcome = throughput::run(trials, &plan, max, &mut log, |_| {})?;
    let value = match &outcome {
        SearchOutcome::Equilibrium(o) => o.estimate_pps,
        SearchOutcome::Rfc2544(o) => o.throughput_pps.unwrap_or(0.0),
        SearchOutcome::NdrPdr(o) => {
            let goal = if sc.method == Method::Ndr { 0 } else { 1 };
            o.goals[goal].lower_pps.unwrap_or(0.0)
        }
    };
    let detail = serde_json::to_value(&outcome)?;
    Ok(RunRecord::search(value, detail, log.list))
}

/// The profile's mean frame length, for bit rates.
pub fn mean_frame_len(p: &Profile) -> f64 {
    p.check().map(|t| t.mean_frame_len()).unwrap_or(0.0)
}
