//! `linerate bench firewall-change`: what a ruleset change costs traffic
//! already flowing. A lab with linerate as the DUT under an access list
//! (linerate_firewall::seeds::access_list, plus a set of blocked sources
//! that a first rule reads), the generator offering more than the DUT
//! forwards; while it runs, rules are inserted and elements added to the
//! set, in turn with nft run changing nothing (the floor: on this
//! two-core machine nft's own run takes CPU from the traffic), in the
//! DUT's namespace. The receiver's count is read every 10 ms: the
//! forwarding rate over each 100 ms window is held to the steady rate
//! before the first change. A change that
//! stops the fast path (every verdict back to the kernel) shows as a
//! window far under it; one judged beside the old generation does not.
use anyhow::{anyhow, bail, Result};
use linerate_bpf::loader::XdpMode;
use linerate_dataplane::layout::REASONS;
use linerate_host::clock::monotonic_ns;
use linerate_host::cmd;
use linerate_lab::{Lab, LabSpec, UpOutcome};
use linerate_labrun::dut_setup::RunningDut;
use linerate_labrun::scenario::builtin_dut;
use linerate_traffic::profile::{builtin_profile, Family, Profile};
use linerate_traffic::recv::Receiver;
use serde::Serialize;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// How often the receiver's count is read, and the window rates are
/// taken over.
const SAMPLE: Duration = Duration::from_millis(10);
const WINDOW_NS: u64 = 100_000_000;
/// A window under this share of the steady rate is a dip.
const DIP: f64 = 0.9;
/// Traffic before the first change: the generator's warm-up, then the
/// steady rate's windows.
const WARM_UP: Duration = Duration::from_millis(700);
const STEADY: Duration = Duration::from_millis(1500);

pub struct Options {
    /// Rules of the access list.
    pub rules: u32,
    pub changes: usize,
    pub interval: Duration,
    /// Every frame a new flow (addresses and ports at random both ways),
    /// else the lab's 2,000 flows.
    pub new_flows: bool,
    pub gen_cpu: usize,
}

impl Options {
    /// The options of the command line, each checked (the flag named).
    pub fn checked(
        rules: u32,
        changes: usize,
        interval_s: f64,
        new_flows: bool,
        gen_cpu: usize,
    ) -> Result<Options> {
        if !(1..=60_000).contains(&rules) {
            bail!("--rules: 1 to 60000 (the access list's distinct ports), got {rules}");
        }
        if changes == 0 {
            bail!("--changes: at least 1");
        }
        if !(0.2..=60.0).contains(&interval_s) {
            bail!("--interval: 0.2 to 60 s (a change's windows are 100 ms), got {interval_s}");
        }
        Ok(Options {
            rules,
            changes,
            interval: Duration::from_secs_f64(interval_s),
            new_flows,
            gen_cpu,
        })
    }
}

#[derive(Clone, Debug, Serialize)]
pub struct Change {
    pub kind: Kind,
    pub command: String,
    /// Frames a second just before the change (the median 100 ms window
    /// of the half second before): what its windows are held to.
    pub baseline_pps: f64,
    /// How long `nft` took.
    pub nft_ms: f64,
    /// The lowest 100 ms window from the change to the next, as a share of
    /// the rate before it.
    pub lowest: f64,
    /// Time the trailing 100 ms window spent under 0.9 of the rate before
    /// the change.
    pub under_ms: f64,
    /// Where the DUT's frames went from the change to the next: the
    /// fast path's reasons, by packets (the ones that moved).
    pub reasons: Vec<(String, u64)>,
    /// From the start of `nft` to the fast path judging by the new
    /// ruleset (its firewall record's generation moved), if it did before
    /// the next change.
    pub published_ms: Option<f64>,
    /// The firewall read the ruleset whole for it (else: applied in place).
    pub read_whole: bool,
}

/// A change as its thread made it.
#[derive(Clone)]
struct Made {
    kind: Kind,
    at: u64,
    nft_ms: f64,
    command: String,
    reasons: Vec<(String, u64)>,
    published_ms: Option<f64>,
    read_whole: bool,
}

/// The DUT's firewall record's (generation, whole reads).
pub(crate) fn firewall_state(dut: &str) -> Result<(u32, u64)> {
    let r = linerate_dataplane::record::read_firewall(dut)?
        .ok_or_else(|| anyhow!("the DUT keeps no firewall record"))?;
    Ok((r.generation, r.reads))
}

/// The changes of one kind: medians and the worst.
#[derive(Clone, Debug, Serialize)]
pub struct Summary {
    pub kind: Kind,
    pub changes: usize,
    pub median_lowest: f64,
    pub worst_lowest: f64,
    pub median_under_ms: f64,
    pub worst_under_ms: f64,
    /// From nft's start to the fast path judging by the new ruleset.
    pub median_published_ms: Option<f64>,
}

#[derive(Clone, Debug, Serialize)]
pub struct Report {
    pub rules: u32,
    pub traffic: &'static str,
    /// Frames a second before the first change (the median window).
    pub steady_pps: f64,
    pub changes: Vec<Change>,
    /// Per kind of change.
    pub kinds: Vec<Summary>,
}

/// The summaries of `changes`, per kind.
fn summaries(changes: &[Change]) -> Vec<Summary> {
    Kind::ALL
        .iter()
        .filter_map(|&kind| {
            let mine: Vec<&Change> = changes.iter().filter(|c| c.kind == kind).collect();
            if mine.is_empty() {
                return None;
            }
            let lowest: Vec<f64> = mine.iter().map(|c| c.lowest).collect();
            let under: Vec<f64> = mine.iter().map(|c| c.under_ms).collect();
            let published: Vec<f64> = mine.iter().filter_map(|c| c.published_ms).collect();
            Some(Summary {
                kind,
                changes: mine.len(),
                median_lowest: median(lowest.clone()),
                worst_lowest: lowest.iter().copied().fold(f64::INFINITY, f64::min),
                median_under_ms: median(under.clone()),
                worst_under_ms: under.iter().copied().fold(0.0, f64::max),
                median_published_ms: (!published.is_empty()).then(|| median(published)),
            })
        })
        .collect()
}

/// The access list of `rules`, with a set of blocked sources its first
/// rule reads (empty: nothing of the lab's is blocked), and another table
/// with a chain no hook reaches ([`spare`]).
pub(crate) fn ruleset(rules: u32) -> String {
    linerate_firewall::seeds::access_list(rules)
        .replacen(
            "table inet linerate {\n",
            "table inet linerate {\n  set blocked { type ipv4_addr; }\n",
            1,
        )
        .replacen(
            "policy drop;\n",
            "policy drop;\n    ip saddr @blocked drop\n",
            1,
        )
        + &spare(rules)
}

/// Another table, with a chain of as many rules as the access list that
/// no hook reaches: a rule inserted there costs nft and the kernel what
/// one inserted into the access list does (the kernel copies a chain's
/// rules at each transaction that changes it), and the fast path nothing.
fn spare(rules: u32) -> String {
    let list = linerate_firewall::seeds::access_list(rules);
    let body: String = list
        .lines()
        .filter(|l| l.trim_start().starts_with("ip daddr 10."))
        .map(|l| format!("{l}\n"))
        .collect();
    format!("table inet spare {{\n  chain unused {{\n{body}  }}\n}}\n")
}

/// What a change does.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    /// A rule inserted at the chain's top.
    Rule,
    /// An element added to the set the first rule reads.
    Element,
    /// A rule inserted into another table's chain of as many rules, which
    /// no packet meets: what a rule insertion costs nft and the kernel
    /// (its transaction is notified, and the fast path's generation
    /// stays).
    Elsewhere,
    /// `nft` run, nothing changed: what running nft alone costs the
    /// lab's traffic (this two-core machine runs it beside the traffic),
    /// the floor under the others.
    Nothing,
}

impl Kind {
    const ALL: [Kind; 4] = [Kind::Rule, Kind::Element, Kind::Elsewhere, Kind::Nothing];

    fn name(self) -> &'static str {
        match self {
            Kind::Rule => "a rule inserted",
            Kind::Element => "an element added",
            Kind::Elsewhere => "a rule inserted in another table",
            Kind::Nothing => "nft run, nothing changed",
        }
    }
}

/// Change `i`, in turn: a rule inserted at the chain's top, an element
/// added to the set, a rule inserted in another table, and nothing (`nft
/// list set`); none meets the lab's traffic.
fn change(i: usize) -> (Kind, Vec<String>) {
    let k = i / 4;
    let rule = format!(
        "ip daddr 10.250.{}.0/24 udp dport {} drop",
        k % 256,
        60_000 + k % 5000
    );
    let (kind, text) = match i % 4 {
        0 => (
            Kind::Rule,
            format!("insert rule inet linerate forward {rule}"),
        ),
        1 => (
            Kind::Element,
            format!(
                "add element inet linerate blocked {{ 10.251.{}.{} }}",
                k / 250 % 256,
                k % 250 + 1
            ),
        ),
        2 => (
            Kind::Elsewhere,
            format!("insert rule inet spare unused {rule}"),
        ),
        _ => (Kind::Nothing, "list set inet linerate blocked".to_string()),
    };
    (kind, text.split(' ').map(String::from).collect())
}

/// How long before a change its baseline is taken: the median window of
/// that half second (the lab's rate drifts over a run, with every frame a
/// new flow most).
const BASELINE_NS: u64 = 500_000_000;

/// Per change at `at` (ns), from it to the next (or `end`): the lowest
/// window rate over the rate just before it (the median window of the
/// BASELINE_NS before; `steady` if there is none), the time the trailing
/// window spent under DIP of it, and that rate. `samples` are (ns, frames
/// received so far).
pub fn dips(samples: &[(u64, u64)], steady: f64, at: &[u64], end: u64) -> Vec<(f64, f64, f64)> {
    // The trailing window's rate at each sample that has a full window.
    let mut rates = Vec::new();
    let mut from = 0;
    for (i, &(t, n)) in samples.iter().enumerate() {
        while samples[from].0 + WINDOW_NS < t {
            from += 1;
        }
        let (t0, n0) = samples[from];
        if t - t0 >= WINDOW_NS * 9 / 10 && i > from {
            rates.push((t, (n - n0) as f64 * 1e9 / (t - t0) as f64));
        }
    }
    at.iter()
        .enumerate()
        .map(|(k, &t0)| {
            let before: Vec<f64> = rates
                .iter()
                .filter(|(t, _)| *t <= t0 && *t + BASELINE_NS > t0)
                .map(|(_, r)| *r)
                .collect();
            let base = if before.is_empty() {
                steady
            } else {
                median(before)
            };
            let t1 = at.get(k + 1).copied().unwrap_or(end);
            let mine: Vec<&(u64, f64)> =
                rates.iter().filter(|(t, _)| *t > t0 && *t <= t1).collect();
            let lowest = mine
                .iter()
                .map(|(_, r)| r / base)
                .fold(f64::INFINITY, f64::min);
            let mut under = 0u64;
            for w in mine.windows(2) {
                if w[1].1 < DIP * base {
                    under += w[1].0 - w[0].0;
                }
            }
            (lowest, under as f64 / 1e6, base)
        })
        .collect()
}

/// Reasons and their packets, as the reports print them.
pub(crate) fn reasons_text(reasons: &[(String, u64)]) -> String {
    reasons
        .iter()
        .map(|(r, n)| format!("{r} {n}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The index of interface `name` in namespace `ns` (`ip -o link`'s first
/// column).
fn ifindex(ns: &str, name: &str) -> Result<u32> {
    let out = cmd::ip(Some(ns), &["-o", "link", "show", "dev", name])?;
    out.split(':')
        .next()
        .and_then(|i| i.trim().parse().ok())
        .ok_or_else(|| anyhow!("{name} in {ns}: no index in {out:?}"))
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied().unwrap_or(0.0)
}

pub fn run(o: &Options, stop: &AtomicBool, mut progress: impl FnMut(&Change)) -> Result<Report> {
    let name = format!("lrfwc{}", std::process::id());
    let (lab, outcome) = Lab::up(&LabSpec::new(&name), false)?;
    if outcome == UpOutcome::AlreadyUp {
        bail!("lab {name} is already up");
    }
    let ns = lab.namespaces();
    let ifs = lab.interfaces();
    let mut def = builtin_dut("linerate").expect("built-in");
    def.nft = Some(ruleset(o.rules));
    let result = (|| -> Result<Report> {
        let router = RunningDut::start(&def, &ns.dut, &ifs.dut_ports(1))?;
        let receiver = Receiver::attach(&ifs.recv, Some(&ns.recv), XdpMode::Native)?;
        let sender = crate::lab_traffic::sender(&ifs, o.gen_cpu)?;
        let profile = if o.new_flows {
            Profile {
                family: Family::Ipv4,
                len: "60".into(),
                src: Some("198.18.0.1:1024-198.18.255.254:65535".into()),
                dst: Some("198.19.1.1:1-198.19.255.254:65535".into()),
                random_dst: true,
                random_src: true,
                ..Profile::new(Family::Ipv4, "60")
            }
        } else {
            builtin_profile("ipv4-60").ok_or_else(|| anyhow!("no built-in profile ipv4-60"))?
        };
        let seconds =
            (WARM_UP + STEADY).as_secs_f64() + o.changes as f64 * o.interval.as_secs_f64();
        let gen_opts = profile.check()?.gen_options(&sender, None, seconds)?;
        let gen_stop = Arc::new(AtomicBool::new(false));
        let gen = crate::lab_traffic::spawn(&ns.gen, gen_opts, gen_stop.clone());
        // The changes, from their own thread: this one reads the receiver.
        let start = monotonic_ns();
        let made: Arc<Mutex<Vec<Made>>> = Arc::default();
        let in_idx = ifindex(&ns.dut, &ifs.dut_in)?;
        let changer = {
            let (made, dut, n, interval) = (made.clone(), ns.dut.clone(), o.changes, o.interval);
            std::thread::spawn(move || -> Result<()> {
                let (_, record) = linerate_dataplane::record::open(&dut)?;
                let counts = || linerate_dataplane::record::read(&record, in_idx);
                std::thread::sleep(WARM_UP + STEADY);
                for i in 0..n {
                    let (kind, args) = change(i);
                    let a: Vec<&str> = args.iter().map(String::as_str).collect();
                    let before = counts()?;
                    let (generation, reads) = firewall_state(&dut)?;
                    let t0 = monotonic_ns();
                    cmd::in_netns(&dut, "nft", &a)?;
                    let took = (monotonic_ns() - t0) as f64 / 1e6;
                    // The record is written once the generation is
                    // published: polled until then, or the next change.
                    let until = t0 + interval.as_nanos() as u64;
                    let mut published_ms = None;
                    while monotonic_ns() < until {
                        if firewall_state(&dut)?.0 != generation {
                            published_ms = Some((monotonic_ns() - t0) as f64 / 1e6);
                            break;
                        }
                        std::thread::sleep(Duration::from_millis(2));
                    }
                    std::thread::sleep(Duration::from_nanos(until.saturating_sub(monotonic_ns())));
                    let read_whole = firewall_state(&dut)?.1 != reads;
                    let moved = counts()?.since(&before);
                    let reasons = REASONS
                        .iter()
                        .map(|r| (r.to_string(), moved.packets_of(r)))
                        .filter(|(_, n)| *n > 0)
                        .collect();
                    made.lock().unwrap().push(Made {
                        kind,
                        at: t0,
                        nft_ms: took,
                        command: format!("nft {}", args.join(" ")),
                        reasons,
                        published_ms,
                        read_whole,
                    });
                }
                Ok(())
            })
        };
        let mut samples = Vec::new();
        while !changer.is_finished() && !gen.is_finished() && !stop.load(Ordering::Relaxed) {
            samples.push((monotonic_ns(), receiver.total()?.stamped));
            std::thread::sleep(SAMPLE);
        }
        let end = monotonic_ns();
        gen_stop.store(true, Ordering::SeqCst);
        let changed = changer
            .join()
            .map_err(|_| anyhow!("the changes' thread panicked"))?;
        gen.join()
            .map_err(|_| anyhow!("generator thread panicked"))??;
        drop(receiver);
        router.stop()?;
        changed?;
        if stop.load(Ordering::Relaxed) {
            bail!("interrupted");
        }
        let made = made.lock().unwrap().clone();
        let first = made
            .first()
            .map(|m| m.at)
            .ok_or_else(|| anyhow!("no change made"))?;
        let steady_from = start + WARM_UP.as_nanos() as u64;
        let before: Vec<(u64, u64)> = samples
            .iter()
            .copied()
            .filter(|(t, _)| *t >= steady_from && *t <= first)
            .collect();
        let windows: Vec<f64> = before
            .windows(11)
            .map(|w| (w[10].1 - w[0].1) as f64 * 1e9 / (w[10].0 - w[0].0) as f64)
            .collect();
        let steady_pps = median(windows);
        if steady_pps <= 0.0 {
            bail!("nothing was forwarded before the first change");
        }
        let at: Vec<u64> = made.iter().map(|m| m.at).collect();
        let changes: Vec<Change> = dips(&samples, steady_pps, &at, end)
            .into_iter()
            .zip(made)
            .map(|((lowest, under_ms, baseline_pps), m)| Change {
                kind: m.kind,
                baseline_pps,
                command: m.command,
                nft_ms: m.nft_ms,
                lowest,
                under_ms,
                reasons: m.reasons,
                published_ms: m.published_ms,
                read_whole: m.read_whole,
            })
            .collect();
        changes.iter().for_each(&mut progress);
        Ok(Report {
            rules: o.rules,
            traffic: if o.new_flows {
                "every frame a new flow"
            } else {
                "the lab's 2,000 flows"
            },
            steady_pps,
            kinds: summaries(&changes),
            changes,
        })
    })();
    lab.down()?;
    result
}

impl std::fmt::Display for Change {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let applied = match (self.kind, self.published_ms, self.read_whole) {
            (Kind::Nothing, ..) => String::new(),
            (_, Some(ms), whole) => format!(
                "; {}, in the fast path after {ms:.0} ms",
                if whole {
                    "ruleset read whole"
                } else {
                    "applied in place"
                }
            ),
            (_, None, _) => "; not in the fast path before the next change".into(),
        };
        write!(
            f,
            "{} ({:.0} ms{}): lowest 100 ms window {:.3}x the rate before ({:.3} Mpps), {:.0} ms under 0.9x; the DUT's frames: {}",
            self.command,
            self.nft_ms,
            applied,
            self.lowest,
            self.baseline_pps / 1e6,
            self.under_ms,
            reasons_text(&self.reasons)
        )
    }
}

impl std::fmt::Display for Report {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} rules, {}: steady {:.3} Mpps",
            self.rules,
            self.traffic,
            self.steady_pps / 1e6
        )?;
        for k in &self.kinds {
            write!(
                f,
                "\n  {} ({}x): lowest 100 ms window median {:.3}x (worst {:.3}x), under 0.9x median {:.0} ms (worst {:.0} ms)",
                k.kind.name(),
                k.changes,
                k.median_lowest,
                k.worst_lowest,
                k.median_under_ms,
                k.worst_under_ms
            )?;
            if let Some(p) = k.median_published_ms {
                write!(f, ", in the fast path {p:.0} ms after nft started (median)")?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A steady 1 Mpps, then 300 ms at half of it after the second change:
    /// the first change has no dip, the second one its 300 ms (and the
    /// windows that still hold part of them).
    #[test]
    fn dips_are_the_windows_under_the_steady_rate() {
        let ms = 1_000_000u64;
        let mut samples = Vec::new();
        let mut n = 0u64;
        for i in 0..300u64 {
            let t = i * 10 * ms;
            samples.push((t, n));
            let slow = (1500..1800).contains(&(i * 10));
            n += if slow { 5_000 } else { 10_000 };
        }
        let d = dips(&samples, 1e6, &[1000 * ms, 1500 * ms], 2990 * ms);
        assert_eq!(d.len(), 2);
        assert!((d[0].0 - 1.0).abs() < 1e-9 && d[0].1 == 0.0, "{:?}", d[0]);
        assert!((d[1].0 - 0.5).abs() < 1e-9, "{:?}", d[1]);
        // Each held to the rate just before it.
        assert!((d[0].2 - 1e6).abs() < 1.0 && (d[1].2 - 1e6).abs() < 1.0);
        // Under 0.9x from 20 ms into the slow part (the trailing window
        // then holds more than 10% of it) to 80 ms past its end.
        assert!((d[1].1 - 360.0).abs() <= 10.0, "{:?}", d[1]);
    }

    /// A rate that falls slowly (1 Mpps to 0.85 over 3 s) and no dip: a
    /// change late in it is held to the rate just before it, not to the
    /// rate at the start (under 0.9 of which the end is).
    #[test]
    fn a_rate_that_drifts_is_held_to_the_rate_before_each_change() {
        let ms = 1_000_000u64;
        let mut samples = Vec::new();
        let mut n = 0u64;
        for i in 0..300u64 {
            samples.push((i * 10 * ms, n));
            n += 10_000 - 1_500 * i / 300;
        }
        let d = dips(&samples, 1e6, &[2500 * ms], 2990 * ms);
        assert_eq!(d[0].1, 0.0, "{:?}", d[0]);
        assert!(d[0].0 > 0.95 && d[0].2 < 0.9e6, "{:?}", d[0]);
    }

    #[test]
    fn changes_take_turns_none_meeting_the_labs_traffic() {
        let (kind, rule) = change(0);
        assert_eq!(kind, Kind::Rule);
        assert!(rule
            .join(" ")
            .starts_with("insert rule inet linerate forward ip daddr 10.250.0.0/24"));
        assert_eq!(
            change(1),
            (
                Kind::Element,
                "add element inet linerate blocked { 10.251.0.1 }"
                    .split(' ')
                    .map(String::from)
                    .collect()
            )
        );
        assert_eq!(change(2).0, Kind::Elsewhere);
        assert!(change(2)
            .1
            .join(" ")
            .starts_with("insert rule inet spare unused"));
        assert_eq!(change(3).0, Kind::Nothing);
        assert!(change(4).1.join(" ").contains("10.250.1.0/24"));
        let r = ruleset(100);
        assert!(r.contains("set blocked { type ipv4_addr; }"));
        assert!(r.contains("policy drop;\n    ip saddr @blocked drop\n    ip daddr 10.0.0.0/24"));
        assert!(r.contains("table inet spare {\n  chain unused {\n    ip daddr 10.0.0.0/24"));
        assert_eq!(r.matches("ip daddr 10.0.98.0/24").count(), 2);
    }

    #[test]
    fn summaries_are_per_kind() {
        let c = |kind, lowest, under_ms| Change {
            kind,
            command: String::new(),
            baseline_pps: 1e6,
            nft_ms: 1.0,
            lowest,
            under_ms,
            reasons: vec![],
            published_ms: Some(5.0),
            read_whole: false,
        };
        let s = summaries(&[
            c(Kind::Rule, 0.5, 120.0),
            c(Kind::Nothing, 0.95, 0.0),
            c(Kind::Rule, 0.7, 80.0),
            c(Kind::Rule, 0.6, 100.0),
        ]);
        assert_eq!(s.len(), 2);
        assert_eq!((s[0].kind, s[0].changes), (Kind::Rule, 3));
        assert_eq!((s[0].median_under_ms, s[0].worst_under_ms), (100.0, 120.0));
        assert_eq!((s[0].median_lowest, s[0].worst_lowest), (0.6, 0.5));
        assert_eq!((s[1].kind, s[1].changes), (Kind::Nothing, 1));
    }
}
