//! `linerate bench control-burst`: the forwarding rate while the control
//! plane works. A lab with linerate as the DUT under an access list (with
//! a set of blocked sources its first rule reads, and another table's
//! chain of as many rules: `firewall_change::ruleset`), the generator
//! offering more than the DUT forwards (the lab's 2,000 flows); while it
//! runs, one burst after another, each with quiet time before it:
//!
//! - a full table's worth of routes (/24s) added to the DUT's kernel
//!   through rtnetlink as fast as it takes them (as a BGP daemon installs
//!   a table), then all withdrawn;
//! - the ruleset reloaded whole (`nft -f` of `flush ruleset` and the
//!   ruleset again: what `systemctl reload nftables` does);
//! - a million elements added to the set in one transaction, then the
//!   set flushed.
//!
//! A burst lasts from its start until the fast path works by it: the
//! routes' last one forwarded by the program attached to the DUT's
//! ingress (BPF_PROG_TEST_RUN), or the firewall's generation settled.
//! Over that span: the frames received a second against the 500 ms
//! before it (100 ms windows, the receiver read every 10 ms), what the
//! generator offered (with the control plane on the generator's CPU it
//! offers less, and a DUT that refused nothing was not what held the
//! rate), the CPU the DUT's forwarding thread (its NAPI thread) got and
//! what it spent a frame.
//!
//! Where the control plane runs is the question: `Shared` puts the
//! router (its threads inherit the placement), the injector and nft on
//! the DUT's forwarding CPU (what an unpinned router on a machine with
//! as many queues as CPUs gets); `Apart` on another CPU (here the
//! generator's: this lab has two).
use crate::firewall_change::{dips, firewall_state};
use anyhow::{anyhow, bail, Context, Result};
use linerate_bench::follow::frame_to;
use linerate_bench::route_churn::{inject, injector_socket, prefix};
use linerate_bpf::loader::{self, XdpMode};
use linerate_bpf::test_run::{self, XdpAction};
use linerate_dataplane::layout::REASONS;
use linerate_host::clock::monotonic_ns;
use linerate_host::cmd;
use linerate_lab::topology::addr;
use linerate_lab::{Lab, LabSpec, UpOutcome};
use linerate_labrun::dut_setup::{ruleset_file, RunningDut};
use linerate_labrun::scenario::builtin_dut;
use linerate_traffic::profile::builtin_profile;
use linerate_traffic::recv::Receiver;
use serde::Serialize;
use std::net::Ipv4Addr;
use std::os::fd::AsFd;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How often the counts are read.
const SAMPLE: Duration = Duration::from_millis(10);
const WINDOW_NS: u64 = 100_000_000;
/// The generator's warm-up, then quiet time before each burst (its
/// baseline is the median 100 ms window of the last 500 ms of it).
const WARM_UP: Duration = Duration::from_millis(700);
const QUIET: Duration = Duration::from_millis(2000);
/// How long a burst may take to reach the fast path before it counts as
/// never there.
const GIVE_UP: Duration = Duration::from_secs(180);
/// The firewall's generation is settled once it has not moved for this
/// long (a million elements may come in several publications).
const SETTLED: Duration = Duration::from_millis(1000);
/// Route requests in flight (route-churn's default).
const WINDOW: usize = 64;

/// Where the control plane runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Placement {
    /// On the DUT's forwarding CPU.
    Shared,
    /// On another CPU (this lab's generator's).
    Apart,
}

impl Placement {
    fn name(self) -> &'static str {
        match self {
            Placement::Shared => "control plane on the forwarding CPU",
            Placement::Apart => "control plane on another CPU",
        }
    }
}

/// What a burst does.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Burst {
    /// The routes added.
    Routes,
    /// The routes withdrawn.
    Withdrawal,
    /// The ruleset reloaded whole.
    Reload,
    /// The elements added to the set, one transaction.
    Elements,
    /// The set flushed.
    Flush,
}

impl Burst {
    const ALL: [Burst; 5] = [
        Burst::Routes,
        Burst::Withdrawal,
        Burst::Reload,
        Burst::Elements,
        Burst::Flush,
    ];
}

pub struct Options {
    pub routes: usize,
    pub rules: u32,
    pub elements: usize,
    pub placements: Vec<Placement>,
    pub gen_cpu: usize,
}

impl Options {
    /// The command line's options, each checked (the flag named).
    pub fn checked(
        routes: usize,
        rules: u32,
        elements: usize,
        placement: &str,
        gen_cpu: usize,
    ) -> Result<Options> {
        if !(1..=linerate_bench::route_churn::MAX_ROUTES).contains(&routes) {
            bail!(
                "--routes: 1 to {} (/24s from 32.0.0.0), got {routes}",
                linerate_bench::route_churn::MAX_ROUTES
            );
        }
        if !(1..=60_000).contains(&rules) {
            bail!("--rules: 1 to 60000 (the access list's distinct ports), got {rules}");
        }
        if !(1..=1 << 24).contains(&elements) {
            bail!("--elements: 1 to 16777216 (addresses in 100.0.0.0/8), got {elements}");
        }
        let placements = match placement {
            "shared" => vec![Placement::Shared],
            "apart" => vec![Placement::Apart],
            "both" => vec![Placement::Shared, Placement::Apart],
            other => bail!("--placement: shared, apart or both, got {other:?}"),
        };
        if linerate_host::cpu::online() < 2 {
            bail!("control-burst needs two CPUs (the generator's and the DUT's)");
        }
        if gen_cpu >= linerate_host::cpu::online() {
            bail!("--gen-cpu: CPU {gen_cpu} does not exist");
        }
        Ok(Options {
            routes,
            rules,
            elements,
            placements,
            gen_cpu,
        })
    }
}

/// One burst as it went.
#[derive(Clone, Debug, Serialize)]
pub struct Event {
    pub burst: Burst,
    pub command: String,
    /// From the start to the kernel having it all (the injector's last
    /// ack, nft's exit).
    pub kernel_ms: f64,
    /// From the start to the fast path working by it (None: not within
    /// GIVE_UP).
    pub fast_path_ms: Option<f64>,
    /// Frames received a second before it (the median 100 ms window of
    /// the 500 ms before).
    pub baseline_pps: f64,
    /// Frames received a second over the burst, as a share of the
    /// baseline.
    pub forwarded: f64,
    /// The lowest 100 ms window from the start to the next burst, as a
    /// share of the baseline, and the time the trailing window spent
    /// under 0.9 of it.
    pub lowest: f64,
    pub under_ms: f64,
    /// The lowest share of what the generator offered that arrived, over a
    /// 100 ms window from the start to the next burst, against that share
    /// before: where the generator shares a CPU with the control plane, a
    /// window it sent little in is its own, not the DUT's (windows it
    /// offered under a tenth of its rate before are left out).
    pub lowest_kept: f64,
    /// The same over the windows the DUT's forwarding thread was busy in
    /// (at least half its CPU): a window it had time to spare in, frames
    /// refused, is the generator's (its CPU shared, it fills the DUT's
    /// ring before it wakes its reader), not the DUT's. Infinite if none.
    pub lowest_kept_busy: f64,
    /// When that window ended, from the burst's start (ms).
    pub lowest_kept_busy_at_ms: f64,
    /// What the generator offered over the burst, as a share of what it
    /// offered before.
    pub offered: f64,
    /// The share of what the generator offered that the DUT's port
    /// refused over the burst (its ring full): 0 means the DUT took all
    /// it was offered, and the generator held the rate.
    pub refused: f64,
    /// The forwarding thread's share of its CPU, before and over the
    /// burst.
    pub napi_cpu_before: f64,
    pub napi_cpu: f64,
    /// Its CPU time a frame received over the burst, as a share of the
    /// time before (> 1: each frame cost more).
    pub cost: f64,
    /// Where the DUT's frames went from the start to the next burst: the
    /// fast path's reasons, by packets (the ones that moved), and the
    /// policer's drops of what was passed (`policed REASON`).
    pub reasons: Vec<(String, u64)>,
}

#[derive(Clone, Debug, Serialize)]
pub struct PlacementReport {
    pub placement: Placement,
    pub control_cpu: usize,
    pub forwarding_cpu: usize,
    pub events: Vec<Event>,
}

#[derive(Clone, Debug, Serialize)]
pub struct Report {
    pub routes: usize,
    pub rules: u32,
    pub elements: usize,
    pub placements: Vec<PlacementReport>,
}

/// The counts read every SAMPLE.
#[derive(Clone, Copy, Debug, Default)]
struct Sample {
    t: u64,
    received: u64,
    /// The generator's frames its port's peer took, and refused.
    taken: u64,
    refused: u64,
    /// The DUT's NAPI thread's time on its CPU (ns).
    napi_ns: u64,
}

/// The first sample at or after `t` (the last one if none is).
fn at(samples: &[Sample], t: u64) -> Sample {
    let i = samples.partition_point(|s| s.t < t);
    samples[i.min(samples.len() - 1)]
}

/// A burst as its thread made it: (start, kernel done, fast path done).
#[derive(Clone)]
struct Made {
    burst: Burst,
    command: String,
    at: u64,
    kernel_ns: u64,
    fast_path_ns: Option<u64>,
    reasons: Vec<(String, u64)>,
}

/// The time `pid` has run (ns), from /proc/PID/schedstat.
fn run_ns(pid: i32) -> Result<u64> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/schedstat"))
        .with_context(|| format!("the NAPI thread {pid}'s schedstat"))?;
    s.split_whitespace()
        .next()
        .and_then(|v| v.parse().ok())
        .ok_or_else(|| anyhow!("/proc/{pid}/schedstat: {s:?}"))
}

/// The generator port's XDP frames its peer took and refused.
fn gen_port(netns: &str, ifname: &str) -> Result<(u64, u64)> {
    let stats = linerate_host::ethtool::stats_in(Some(netns), ifname)?;
    let sum = |after| -> u64 {
        linerate_host::queue_stats::by_queue(&stats, "tx_queue_", after)
            .iter()
            .sum()
    };
    Ok((sum("_xdp_xmit"), sum("_xdp_xmit_errors")))
}

/// firewall-change's ruleset, with the routes' prefixes accepted too (the
/// probes of the routes' bursts go there).
fn ruleset(rules: u32) -> String {
    crate::firewall_change::ruleset(rules).replacen(
        "    ip daddr 198.19.0.0/16 accept\n",
        "    ip daddr 198.19.0.0/16 accept\n    ip daddr 32.0.0.0/4 accept\n",
        1,
    )
}

/// `n` addresses from 100.0.0.1 up, none the lab's.
fn elements(n: usize) -> String {
    let mut s = String::with_capacity(n * 14 + 64);
    s.push_str("add element inet linerate blocked { ");
    for i in 0..n {
        let a = Ipv4Addr::from((100u32 << 24) + i as u32 + 1);
        if i > 0 {
            s.push_str(", ");
        }
        s.push_str(&a.to_string());
    }
    s.push_str(" }\n");
    s
}

/// The control plane's side of a run, on its own thread (in the DUT's
/// namespace, on the control CPU): the bursts in turn.
struct Control {
    dut: String,
    dut_in: String,
    dut_out: String,
    routes: usize,
    rules: u32,
    elements: usize,
}

impl Control {
    fn run(&self, cpu: usize, made: &Mutex<Vec<Made>>, stop: &AtomicBool) -> Result<()> {
        linerate_host::netns::enter_for_good(&self.dut)?;
        linerate_host::cpu::pin(0, cpu)?;
        let (_, record) = linerate_dataplane::record::open(&self.dut)?;
        let ingress = loader::ifindex(&self.dut_in)?;
        let counts = || linerate_dataplane::record::read(&record, ingress);
        let prog = loader::attached_xdp_program(ingress)?;
        let oif = loader::ifindex(&self.dut_out)?;
        let gateway: Ipv4Addr = addr::RECV_V4.parse()?;
        let reload = ruleset_file(&format!("flush ruleset\n{}", ruleset(self.rules)))?;
        let add = ruleset_file(&elements(self.elements))?;
        let path = |f: &tempfile::NamedTempFile| f.path().display().to_string();
        std::thread::sleep(WARM_UP);
        for burst in Burst::ALL {
            std::thread::sleep(QUIET);
            if stop.load(Ordering::Relaxed) {
                break;
            }
            let before = counts()?;
            let generation = firewall_state(&self.dut)?.0;
            let t0 = monotonic_ns();
            let (command, fast_path_ns, kernel_ns) = match burst {
                Burst::Routes | Burst::Withdrawal => {
                    let announce = burst == Burst::Routes;
                    let sock = injector_socket()?;
                    let acked: Vec<AtomicU64> =
                        (0..self.routes).map(|_| AtomicU64::new(0)).collect();
                    inject(
                        &sock,
                        self.routes,
                        announce,
                        WINDOW,
                        None,
                        gateway,
                        oif,
                        &acked,
                    )?;
                    let kernel = monotonic_ns();
                    // The last route's host .1: forwarded once there,
                    // passed to the kernel (no route) once gone.
                    let last = prefix(self.routes - 1);
                    let frame = frame_to(Ipv4Addr::from(u32::from(last) + 1).into())?;
                    let want = if announce {
                        XdpAction::Redirect
                    } else {
                        XdpAction::Pass
                    };
                    let mut out = vec![0u8; 256];
                    let done = until(t0, stop, || {
                        let r =
                            test_run::run_xdp_on(prog.as_fd(), &frame, &mut out, 1, Some(ingress))?;
                        Ok(r.verdict == want)
                    })?;
                    let what = if announce { "added" } else { "withdrawn" };
                    (
                        format!("{} /24 routes {what} (rtnetlink)", self.routes),
                        done,
                        kernel,
                    )
                }
                Burst::Reload | Burst::Elements | Burst::Flush => {
                    let (command, args): (String, Vec<String>) = match burst {
                        Burst::Reload => (
                            format!("nft -f (flush ruleset, {} rules again)", 2 * self.rules),
                            vec!["-f".into(), path(&reload)],
                        ),
                        Burst::Elements => (
                            format!("nft -f (add element: {} addresses)", self.elements),
                            vec!["-f".into(), path(&add)],
                        ),
                        _ => (
                            "nft flush set inet linerate blocked".into(),
                            ["flush", "set", "inet", "linerate", "blocked"]
                                .map(String::from)
                                .to_vec(),
                        ),
                    };
                    let a: Vec<&str> = args.iter().map(String::as_str).collect();
                    cmd::in_netns(&self.dut, "nft", &a)?;
                    let kernel = monotonic_ns();
                    (command, settled(&self.dut, generation, t0, stop)?, kernel)
                }
            };
            // Counted up to the next burst (or the end).
            std::thread::sleep(QUIET / 2);
            let moved = counts()?.since(&before);
            // And what the policer dropped of what they passed.
            let reasons = REASONS
                .iter()
                .enumerate()
                .flat_map(|(i, r)| {
                    [
                        (r.to_string(), moved.packets_of(r)),
                        (format!("policed {r}"), moved.policed[i]),
                    ]
                })
                .filter(|(_, n)| *n > 0)
                .collect();
            made.lock().unwrap().push(Made {
                burst,
                command,
                at: t0,
                kernel_ns,
                fast_path_ns,
                reasons,
            });
        }
        std::thread::sleep(QUIET / 2);
        Ok(())
    }
}

/// Polls `done` (every 100 us: the prober must not take the CPU it
/// measures) until it says so (the time) or GIVE_UP from `t0`.
fn until(
    t0: u64,
    stop: &AtomicBool,
    mut done: impl FnMut() -> Result<bool>,
) -> Result<Option<u64>> {
    loop {
        if done()? {
            return Ok(Some(monotonic_ns()));
        }
        if stop.load(Ordering::Relaxed) || monotonic_ns() - t0 > GIVE_UP.as_nanos() as u64 {
            return Ok(None);
        }
        std::thread::sleep(Duration::from_micros(100));
    }
}

/// When the firewall's generation last moved from `generation`, once it
/// has been still for SETTLED (None: it never moved within GIVE_UP).
fn settled(dut: &str, generation: u32, t0: u64, stop: &AtomicBool) -> Result<Option<u64>> {
    let (mut seen, mut moved_at) = (generation, None);
    loop {
        let g = firewall_state(dut)?.0;
        let now = monotonic_ns();
        if g != seen {
            (seen, moved_at) = (g, Some(now));
        }
        if let Some(m) = moved_at {
            if now - m >= SETTLED.as_nanos() as u64 {
                return Ok(Some(m));
            }
        }
        if stop.load(Ordering::Relaxed) || now - t0 > GIVE_UP.as_nanos() as u64 {
            return Ok(moved_at);
        }
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// A window the DUT's forwarding thread had at least this share of its
/// CPU in is one it was busy in.
const BUSY: f64 = 0.5;

/// The lowest kept share (received over offered) of a 100 ms window
/// ending in (t0, t1], against the share over the 500 ms before t0; of
/// the windows the forwarding thread was busy in only, if `busy`.
fn lowest_kept(samples: &[Sample], t0: u64, t1: u64, busy: bool) -> f64 {
    lowest_kept_at(samples, t0, t1, busy).0
}

/// [`lowest_kept`], and when its window ended (0 if none counted).
fn lowest_kept_at(samples: &[Sample], t0: u64, t1: u64, busy: bool) -> (f64, u64) {
    let offered = |s: &Sample| s.taken + s.refused;
    let (p, q) = (at(samples, t0.saturating_sub(500_000_000)), at(samples, t0));
    let base_offered = (offered(&q) - offered(&p)) as f64 / 5.0;
    let base = (q.received - p.received) as f64 / (offered(&q) - offered(&p)).max(1) as f64;
    let (mut lowest, mut when) = (f64::INFINITY, 0);
    for s in samples.iter().filter(|s| s.t > t0 && s.t <= t1) {
        let w = at(samples, s.t - WINDOW_NS);
        let o = (offered(s) - offered(&w)) as f64;
        if o < base_offered / 10.0 || s.t - w.t < WINDOW_NS * 9 / 10 {
            continue;
        }
        if busy && ((s.napi_ns - w.napi_ns) as f64) < BUSY * (s.t - w.t) as f64 {
            continue;
        }
        let kept = (s.received - w.received) as f64 / o / base.max(1e-9);
        if kept < lowest {
            (lowest, when) = (kept, s.t);
        }
    }
    (lowest, when)
}

/// Puts the calling thread back to SCHED_OTHER (what it spawns next, the
/// next placement's router, inherits it).
fn run_as_before() {
    let p = libc::sched_param { sched_priority: 0 };
    // SAFETY: sets the calling thread's policy; `p` outlives the call.
    unsafe { libc::sched_setscheduler(0, libc::SCHED_OTHER, &p) };
}

/// The figures of each burst from the samples.
fn events(samples: &[Sample], made: &[Made], end: u64) -> Vec<Event> {
    let received: Vec<(u64, u64)> = samples.iter().map(|s| (s.t, s.received)).collect();
    let at_: Vec<u64> = made.iter().map(|m| m.at).collect();
    let windows = dips(&received, 0.0, &at_, end);
    made.iter()
        .zip(windows)
        .enumerate()
        .map(|(i, (m, (lowest, under_ms, baseline_pps)))| {
            let next = made.get(i + 1).map_or(end, |n| n.at);
            let t1 = m.fast_path_ns.unwrap_or(m.kernel_ns).max(m.kernel_ns);
            // At least one window's worth.
            let t1 = t1.max(m.at + 100_000_000);
            let (a, b) = (at(samples, m.at), at(samples, t1));
            let (p, q) = (at(samples, m.at - 500_000_000), a);
            let rate = |x: Sample, y: Sample, f: fn(&Sample) -> u64| {
                (f(&y) - f(&x)) as f64 * 1e9 / (y.t - x.t).max(1) as f64
            };
            let offered = |s: &Sample| s.taken + s.refused;
            let napi_cpu = |x: Sample, y: Sample| rate(x, y, |s| s.napi_ns) / 1e9;
            let busy = lowest_kept_at(samples, m.at, next, true);
            let cost = |x: Sample, y: Sample| {
                (y.napi_ns - x.napi_ns) as f64 / (y.received - x.received).max(1) as f64
            };
            Event {
                burst: m.burst,
                command: m.command.clone(),
                kernel_ms: (m.kernel_ns - m.at) as f64 / 1e6,
                fast_path_ms: m.fast_path_ns.map(|t| (t - m.at) as f64 / 1e6),
                baseline_pps,
                forwarded: rate(a, b, |s| s.received) / baseline_pps.max(1.0),
                lowest,
                under_ms,
                lowest_kept: lowest_kept(samples, m.at, next, false),
                lowest_kept_busy: busy.0,
                lowest_kept_busy_at_ms: busy.1.saturating_sub(m.at) as f64 / 1e6,
                offered: rate(a, b, offered) / rate(p, q, offered).max(1.0),
                refused: (b.refused - a.refused) as f64 / (offered(&b) - offered(&a)).max(1) as f64,
                napi_cpu_before: napi_cpu(p, q),
                napi_cpu: napi_cpu(a, b),
                cost: cost(a, b) / cost(p, q).max(1e-9),
                reasons: m.reasons.clone(),
            }
        })
        .collect()
}

pub fn run(o: &Options, stop: &AtomicBool, mut progress: impl FnMut(&Event)) -> Result<Report> {
    let mut placements = Vec::new();
    for &p in &o.placements {
        placements.push(run_placement(o, p, stop, &mut progress)?);
    }
    Ok(Report {
        routes: o.routes,
        rules: o.rules,
        elements: o.elements,
        placements,
    })
}

fn run_placement(
    o: &Options,
    placement: Placement,
    stop: &AtomicBool,
    progress: &mut impl FnMut(&Event),
) -> Result<PlacementReport> {
    let name = format!("lrburst{}", std::process::id() % 100_000);
    let spec = LabSpec::new(&name);
    let forwarding_cpu = spec.dut_cpu;
    let control_cpu = match placement {
        Placement::Shared => forwarding_cpu,
        Placement::Apart => o.gen_cpu,
    };
    if placement == Placement::Apart && o.gen_cpu == forwarding_cpu {
        bail!("--gen-cpu: the DUT forwards on CPU {forwarding_cpu}; the generator needs another");
    }
    let (lab, outcome) = Lab::up(&spec, false)?;
    if outcome == UpOutcome::AlreadyUp {
        bail!("lab {name} is already up");
    }
    let ns = lab.namespaces();
    let ifs = lab.interfaces();
    let napi = lab
        .record
        .napi_threads
        .first()
        .map(|t| t.pid)
        .ok_or_else(|| anyhow!("the lab's DUT has no NAPI thread"))?;
    let mut def = builtin_dut("linerate").expect("built-in");
    def.nft = Some(ruleset(o.rules));
    let result = (|| -> Result<PlacementReport> {
        // The router's threads inherit this thread's CPU.
        linerate_host::cpu::pin(0, control_cpu)?;
        let router = RunningDut::start(&def, &ns.dut, &ifs.dut_ports(1))?;
        linerate_host::cpu::pin(0, o.gen_cpu)?;
        let receiver = Receiver::attach(&ifs.recv, Some(&ns.recv), XdpMode::Native)?;
        let sender = crate::lab_traffic::sender(&ifs, o.gen_cpu)?;
        let profile =
            builtin_profile("ipv4-60").ok_or_else(|| anyhow!("no built-in profile ipv4-60"))?;
        let gen_opts = profile.check()?.gen_options(&sender, None, 3600.0)?;
        let gen_stop = Arc::new(AtomicBool::new(false));
        let gen = crate::lab_traffic::spawn(&ns.gen, gen_opts, gen_stop.clone());
        let made: Arc<Mutex<Vec<Made>>> = Arc::default();
        let control_stop = Arc::new(AtomicBool::new(false));
        let control = {
            let c = Control {
                dut: ns.dut.clone(),
                dut_in: ifs.dut_in.clone(),
                dut_out: ifs.dut_out.clone(),
                routes: o.routes,
                rules: o.rules,
                elements: o.elements,
            };
            let (made, cstop) = (made.clone(), control_stop.clone());
            std::thread::spawn(move || c.run(control_cpu, &made, &cstop))
        };
        let mut samples = Vec::new();
        let started = Instant::now();
        // The sampler runs first on the generator's CPU (the generator and
        // the control plane, spawned before, stay as they were): a count
        // read late is a window measured wrong.
        linerate_bench::bgp::monitor::run_first();
        while !control.is_finished() && !gen.is_finished() {
            if stop.load(Ordering::Relaxed) {
                control_stop.store(true, Ordering::SeqCst);
            }
            let (taken, refused) = gen_port(&ns.gen, &ifs.gen)?;
            samples.push(Sample {
                t: monotonic_ns(),
                received: receiver.total()?.stamped,
                taken,
                refused,
                napi_ns: run_ns(napi)?,
            });
            std::thread::sleep(SAMPLE);
        }
        let end = monotonic_ns();
        run_as_before();
        gen_stop.store(true, Ordering::SeqCst);
        control_stop.store(true, Ordering::SeqCst);
        let controlled = control
            .join()
            .map_err(|_| anyhow!("the control plane's thread panicked"))?;
        let generated = gen.join().map_err(|_| anyhow!("generator thread panicked"));
        drop(receiver);
        router.stop()?;
        controlled?;
        generated??;
        if stop.load(Ordering::Relaxed) {
            bail!("interrupted");
        }
        if started.elapsed() < WARM_UP + QUIET {
            bail!("the run ended before its first burst");
        }
        let made = made.lock().unwrap().clone();
        let events = events(&samples, &made, end);
        events.iter().for_each(&mut *progress);
        Ok(PlacementReport {
            placement,
            control_cpu,
            forwarding_cpu,
            events,
        })
    })();
    lab.down()?;
    result
}

impl std::fmt::Display for Event {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let fast = match self.fast_path_ms {
            Some(ms) => format!("in the fast path after {ms:.0} ms"),
            None => "never in the fast path".into(),
        };
        write!(
            f,
            "{} (kernel {:.0} ms, {fast}): forwarded {:.3}x the {:.3} Mpps before, lowest 100 ms window {:.3}x (of what was offered {:.3}x, {:.3}x where the forwarding thread was busy, {:.0} ms in), {:.0} ms under 0.9x; offered {:.3}x, {:.1}% refused; forwarding thread's CPU {:.0}% (before {:.0}%), its time a frame {:.2}x; the DUT's frames: {}",
            self.command,
            self.kernel_ms,
            self.forwarded,
            self.baseline_pps / 1e6,
            self.lowest,
            self.lowest_kept,
            self.lowest_kept_busy,
            self.lowest_kept_busy_at_ms,
            self.under_ms,
            self.offered,
            100.0 * self.refused,
            100.0 * self.napi_cpu,
            100.0 * self.napi_cpu_before,
            self.cost,
            crate::firewall_change::reasons_text(&self.reasons)
        )
    }
}

impl std::fmt::Display for Report {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} routes, {} rules, {} set elements",
            self.routes, self.rules, self.elements
        )?;
        for p in &self.placements {
            write!(
                f,
                "\n{} (CPU {}; forwarding on CPU {}):",
                p.placement.name(),
                p.control_cpu,
                p.forwarding_cpu
            )?;
            for e in &p.events {
                write!(
                    f,
                    "\n  {:<11} {:>7} ms  forwarded {:.3}x  lowest {:.3}x (kept {:.3}x, busy {:.3}x)  {:>5.0} ms under 0.9x  offered {:.3}x  forwarding CPU {:.0}%",
                    format!("{:?}", e.burst).to_lowercase(),
                    e.fast_path_ms
                        .map(|m| format!("{m:.0}"))
                        .unwrap_or_else(|| "never".into()),
                    e.forwarded,
                    e.lowest,
                    e.lowest_kept,
                    e.lowest_kept_busy,
                    e.under_ms,
                    e.offered,
                    100.0 * e.napi_cpu
                )?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(t_ms: u64, received: u64, napi_ms: u64) -> Sample {
        Sample {
            t: t_ms * 1_000_000,
            received,
            taken: received * 2,
            refused: received,
            napi_ns: napi_ms * 1_000_000,
        }
    }

    /// 1 Mpps with the forwarding thread on its CPU all the time; a burst
    /// from 1 s to 1.5 s halves both: forwarded 0.5x, the thread's CPU
    /// 50%, each frame's cost unchanged.
    #[test]
    fn a_burst_that_takes_half_the_forwarding_cpu() {
        let mut samples = Vec::new();
        let (mut n, mut cpu) = (0u64, 0u64);
        for i in 0..300u64 {
            let t = i * 10;
            samples.push(sample(t, n, cpu));
            let slow = (1000..1500).contains(&t);
            n += if slow { 5_000 } else { 10_000 };
            cpu += if slow { 5 } else { 10 };
        }
        let made = Made {
            burst: Burst::Reload,
            command: String::new(),
            at: 1_000_000_000,
            kernel_ns: 1_200_000_000,
            fast_path_ns: Some(1_500_000_000),
            reasons: vec![],
        };
        let e = &events(&samples, &[made], 2_990_000_000)[0];
        assert!((e.forwarded - 0.5).abs() < 0.03, "{e:?}");
        assert!((e.napi_cpu - 0.5).abs() < 0.03 && (e.napi_cpu_before - 1.0).abs() < 0.03);
        assert!((e.cost - 1.0).abs() < 0.03, "{e:?}");
        assert!((e.baseline_pps - 1e6).abs() < 1.0);
        assert!((e.lowest - 0.5).abs() < 1e-9);
        // The samples' generator follows the DUT: every window kept as much.
        assert!((e.lowest_kept - 1.0).abs() < 1e-9, "{e:?}");
        assert_eq!((e.kernel_ms, e.fast_path_ms), (200.0, Some(500.0)));
        // The samples' generator offers what the DUT takes twice over:
        // halved with it, a third refused.
        assert!((e.offered - 0.5).abs() < 0.03 && (e.refused - 1.0 / 3.0).abs() < 0.02);
    }

    /// The generator offering the same throughout, the DUT keeping half of
    /// it for 300 ms with its forwarding thread busy, later a quarter of
    /// it for 300 ms with the thread mostly idle (the generator's doing),
    /// and later the generator sending nothing for 300 ms: the first is
    /// the DUT's (kept 0.5x), the second counts only among all windows,
    /// the third not at all.
    #[test]
    fn what_the_dut_kept_of_what_it_was_offered() {
        let (mut samples, mut n, mut offered, mut napi) = (Vec::new(), 0u64, 0u64, 0u64);
        for i in 0..500u64 {
            let t = i * 10;
            samples.push(Sample {
                t: t * 1_000_000,
                received: n,
                taken: offered,
                refused: 0,
                napi_ns: napi,
            });
            let (o, r, busy_ms) = match t {
                1200..1500 => (20_000, 5_000, 10),
                2500..2800 => (0, 0, 0),
                3200..3500 => (20_000, 2_500, 2),
                _ => (20_000, 10_000, 10),
            };
            offered += o;
            n += r;
            napi += busy_ms * 1_000_000;
        }
        let kept = lowest_kept(&samples, 1_000_000_000, 2_000_000_000, false);
        assert!((kept - 0.5).abs() < 1e-9, "{kept}");
        let busy = lowest_kept(&samples, 1_000_000_000, 2_000_000_000, true);
        assert!((busy - 0.5).abs() < 1e-9, "{busy}");
        let idle = lowest_kept(&samples, 2_000_000_000, 3_000_000_000, false);
        assert!((idle - 1.0).abs() < 1e-9, "{idle}");
        let spare = lowest_kept(&samples, 3_000_000_000, 4_900_000_000, false);
        assert!((spare - 0.25).abs() < 1e-9, "{spare}");
        // Among busy windows, the lowest is the one that straddles the
        // spare time the most and is still busy half of it: four 10 ms
        // samples of ten busy (8 * 4 + 20 = 52 ms of its CPU), kept
        // (4 * 10,000 + 6 * 2,500) / 200,000, against 0.5 before.
        let spare_busy = lowest_kept(&samples, 3_000_000_000, 4_900_000_000, true);
        assert!((spare_busy - 0.55).abs() < 1e-9, "{spare_busy}");
    }

    #[test]
    fn the_routes_are_accepted() {
        let r = ruleset(100);
        assert!(r.contains("    ip daddr 198.19.0.0/16 accept\n    ip daddr 32.0.0.0/4 accept\n"));
        assert_eq!(r.matches("32.0.0.0/4").count(), 1);
    }

    #[test]
    fn elements_are_addresses_outside_the_lab() {
        assert_eq!(
            elements(2),
            "add element inet linerate blocked { 100.0.0.1, 100.0.0.2 }\n"
        );
        assert!(elements(1 << 20).contains("100.16.0.0 }"));
    }

    #[test]
    fn options_are_checked_by_flag() {
        let e = |r: Result<Options>| r.err().unwrap().to_string();
        assert!(e(Options::checked(0, 10, 10, "both", 0)).starts_with("--routes"));
        assert!(e(Options::checked(10, 0, 10, "both", 0)).starts_with("--rules"));
        assert!(e(Options::checked(10, 10, 0, "both", 0)).starts_with("--elements"));
        assert!(e(Options::checked(10, 10, 10, "here", 0)).starts_with("--placement"));
    }
}
