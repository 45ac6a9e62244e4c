//! `linerate bench restart`: what a restart of the router costs
//! the traffic, in a lab of its own, under stamped traffic at a rate the
//! fast path holds. Each way of restarting runs in its own trial: a
//! router is started, the generator sends, and part-way through:
//!
//! - `takeover`: a second `linerate route` starts and takes the fast path
//!   over (crate `linerate_daemon::handover`);
//! - `upgrade`: the same from another binary (`--upgrade-binary`, a
//!   rebuilt linerate; by default a copy of this one);
//! - `kill9`: the router is killed (-9), its programs detach with it, and
//!   a new one starts;
//! - `cold`: the router is stopped (SIGTERM, it detaches) and a new one
//!   starts;
//! - `service`: `systemctl restart` of the service: stopped under systemd,
//!   the router leaves its fast path in the service manager's fd store,
//!   and the new one, given the store, takes it over (the bench plays
//!   systemd's part: crate::service_manager).
//!
//! Measured per trial: the receiver's sequence numbers (frames lost), the
//! kernel's own forwarding (the DUT's ForwDatagrams: what fell back to the
//! kernel), the fast path's counters sampled every 10 ms (the longest time
//! it forwarded nothing while traffic flowed: the gap), and whether its
//! counters map stayed the same (the counts went on rising).
use crate::service_manager::ServiceManager;
use anyhow::{anyhow, bail, Context, Result};
use linerate_lab::{Lab, LabSpec};
use serde::Serialize;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Way {
    /// No restart: the control, what the lab loses and the gaps it shows
    /// with the router left alone.
    None,
    Takeover,
    Upgrade,
    Kill9,
    Cold,
    /// `systemctl restart` of the service (systemd's fd store, played by
    /// the bench: crate::service_manager).
    Service,
}

impl Way {
    /// The ways by the names `--ways` takes.
    pub const CHOICES: &'static [(&'static str, Way)] = &[
        ("none", Way::None),
        ("takeover", Way::Takeover),
        ("upgrade", Way::Upgrade),
        ("kill9", Way::Kill9),
        ("cold", Way::Cold),
        ("service", Way::Service),
    ];

    /// What the way is, for the command line's help (None: its name says
    /// it).
    pub fn help(self) -> Option<&'static str> {
        match self {
            Way::None => Some("No restart: the control, what the lab loses and the gaps it shows with the router left alone"),
            Way::Service => Some("`systemctl restart` of the service (systemd's fd store, played by the bench: crate::service_manager)"),
            _ => None,
        }
    }
}

pub struct Options {
    pub ways: Vec<Way>,
    /// Frames a second.
    pub rate: u64,
    /// Seconds of traffic per trial, and when (seconds into it) the
    /// restart begins.
    pub seconds: f64,
    pub at: f64,
    /// The binary an `upgrade` starts (None: a copy of this one).
    pub upgrade_binary: Option<PathBuf>,
}

impl Options {
    pub fn check(&self) -> Result<()> {
        if self.ways.is_empty() {
            bail!("--ways: name at least one (none, takeover, upgrade, kill9, cold, service)");
        }
        if !(self.seconds >= 2.0 && self.seconds <= 600.0) {
            bail!("--seconds: 2 to 600, got {}", self.seconds);
        }
        if !(self.at >= 0.5 && self.at <= self.seconds - 1.0) {
            bail!(
                "--at: from 0.5 s to a second before the traffic ends ({} s), got {}",
                self.seconds - 1.0,
                self.at
            );
        }
        if !(1000..=2_000_000).contains(&self.rate) {
            bail!("--rate: 1000 to 2000000 frames a second, got {}", self.rate);
        }
        if let Some(b) = &self.upgrade_binary {
            if !b.is_file() {
                bail!("--upgrade-binary: {} is not a file", b.display());
            }
        }
        Ok(())
    }
}

#[derive(Clone, Debug, Serialize)]
pub struct Trial {
    pub way: Way,
    /// Frames the generator sent (its ring took), and refused.
    pub sent: u64,
    pub refused: u64,
    pub received: u64,
    /// Sent but never received (the receiver's sequence numbers).
    pub lost: u64,
    pub duplicated: u64,
    /// What the fast path forwarded from the generator's side, and what
    /// the kernel forwarded itself (ForwDatagrams) during the trial.
    pub fast_path_forwarded: u64,
    pub kernel_forwarded: u64,
    /// The longest time the fast path forwarded nothing while traffic
    /// flowed, to the 10 ms of its sampling.
    pub gap_ms: f64,
    /// From the restart's start to the new router's record (its start-up,
    /// its tables built, the old one gone).
    pub restart_ms: f64,
    /// The counters map was the same before and after (the counts went
    /// on rising).
    pub same_counters: bool,
    /// What the new router said (its stderr's lines).
    pub said: Vec<String>,
    /// The receiver's: frames missing between those it got, and the
    /// number of the last it got.
    pub gaps: u64,
    pub last_seq: Option<u64>,
    /// `service`: what the stopped router left in the service manager's
    /// store.
    pub stored: Vec<String>,
}

const LAB: &str = "lrt-restart";
const SAMPLE: Duration = Duration::from_millis(10);

/// Runs the trials, one after another, in a lab of its own.
/// [`run`] as `linerate bench restart` shows it: a line a trial under the
/// table's header as each ends, or (`json`) the trials as JSON at the end.
pub fn run_printed(o: &Options, stop: &AtomicBool, json: bool) -> Result<()> {
    if !json {
        println!("{}", table_header());
    }
    let trials = run(o, stop, |t| {
        if !json {
            println!("{t}");
        }
    })?;
    if json {
        println!("{}", serde_json::to_string_pretty(&trials)?);
    }
    Ok(())
}

pub fn run(o: &Options, stop: &AtomicBool, mut say: impl FnMut(&Trial)) -> Result<Vec<Trial>> {
    let this = std::env::current_exe()?;
    let copy = tempfile::tempdir()?;
    let upgraded = match &o.upgrade_binary {
        Some(b) => b.clone(),
        None => {
            let p = copy.path().join("linerate");
            std::fs::copy(&this, &p).context("cannot copy this binary for --ways upgrade")?;
            p
        }
    };
    let (lab, outcome) = Lab::up(&LabSpec::new(LAB), false)?;
    if outcome == linerate_lab::UpOutcome::AlreadyUp {
        bail!("lab {LAB} is already up (linerate lab down --name {LAB})");
    }
    let ns = lab.namespaces();
    let mut trials = Vec::new();
    for &way in &o.ways {
        if stop.load(Ordering::Relaxed) {
            break;
        }
        let t = trial(o, way, &this, &upgraded, &ns)?;
        say(&t);
        trials.push(t);
    }
    lab.down()?;
    Ok(trials)
}

/// A `linerate route` process, SIGTERMed (and waited for) when dropped.
struct Router {
    child: Option<Child>,
    err: PathBuf,
}

impl Router {
    /// `bin route` on the lab's DUT, under `manager` if given.
    fn start(
        bin: &Path,
        ns: &str,
        err: PathBuf,
        manager: Option<&ServiceManager>,
    ) -> Result<Router> {
        let args = ["route", "--netns", ns, "-i", "dut0,dut1", "-q"];
        let mut c = match manager {
            Some(m) => m.command(bin, &args)?,
            None => {
                let mut c = Command::new(bin);
                c.args(args);
                c
            }
        };
        let child = c
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&err)?)
            .spawn()
            .with_context(|| format!("cannot start {}", bin.display()))?;
        Ok(Router {
            child: Some(child),
            err,
        })
    }

    fn pid(&self) -> u32 {
        self.child.as_ref().map_or(0, |c| c.id())
    }

    /// Until its record names it (attached, tables built), for up to 60 s.
    fn wait_ready(&mut self, record: &str) -> Result<()> {
        let t = Instant::now();
        loop {
            if linerate_dataplane::record::open(record).is_ok_and(|(r, _)| r.pid == self.pid()) {
                return Ok(());
            }
            if let Some(c) = &mut self.child {
                if let Some(status) = c.try_wait()? {
                    bail!(
                        "linerate route ended ({status}): {}",
                        self.said().join("; ")
                    );
                }
            }
            if t.elapsed() > Duration::from_secs(60) {
                bail!(
                    "linerate route not ready in 60 s: {}",
                    self.said().join("; ")
                );
            }
            std::thread::sleep(Duration::from_millis(2));
        }
    }

    fn signal(&self, sig: i32) {
        // SAFETY: signals our child.
        unsafe { libc::kill(self.pid() as i32, sig) };
    }

    fn wait(&mut self) -> Result<()> {
        if let Some(mut c) = self.child.take() {
            c.wait()?;
        }
        Ok(())
    }

    fn said(&self) -> Vec<String> {
        std::fs::read_to_string(&self.err)
            .unwrap_or_default()
            .lines()
            .map(String::from)
            .collect()
    }
}

impl Drop for Router {
    fn drop(&mut self) {
        if self.child.is_some() {
            self.signal(libc::SIGTERM);
            let _ = self.wait();
        }
    }
}

/// One sample of the DUT: the fast path's counters (its map's id,
/// forwarded from dut0) if a router runs, and the kernel's ForwDatagrams.
#[derive(Clone, Copy, Debug)]
struct Sample {
    at: Duration,
    fast_path: Option<(u32, u64)>,
    kernel: u64,
}

fn trial(
    o: &Options,
    way: Way,
    this: &Path,
    upgraded: &Path,
    ns: &linerate_lab::topology::Namespaces,
) -> Result<Trial> {
    let logs = tempfile::tempdir()?;
    let record = ns.dut.clone();
    let manager = match way {
        Way::Service => Some(ServiceManager::new()?),
        _ => None,
    };
    let mut old = Router::start(this, &ns.dut, logs.path().join("old"), manager.as_ref())?;
    old.wait_ready(&record)?;
    let sampling = Arc::new(AtomicBool::new(true));
    let origin = Instant::now();
    let sampler = {
        let (dut, go, record) = (ns.dut.clone(), sampling.clone(), record.clone());
        std::thread::spawn(move || sample(&dut, &record, &go, origin))
    };
    let secs = format!("{}", o.seconds);
    let recv = Command::new(this)
        .args(["recv", "--netns", &ns.recv, "-i", "recv0", "--json"])
        .args(["-t", &format!("{}", o.seconds + 1.5)])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()?;
    std::thread::sleep(Duration::from_millis(500));
    let gen = Command::new(this)
        .args([
            "gen", "--netns", &ns.gen, "-i", "gen0", "--json", "--cpu", "0",
        ])
        .args(["-R", &o.rate.to_string(), "-t", &secs])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()?;
    std::thread::sleep(Duration::from_secs_f64(o.at));
    let restart = Instant::now();
    let mut stored = Vec::new();
    let mut new = match way {
        Way::None => Router {
            child: old.child.take(),
            err: old.err.clone(),
        },
        Way::Takeover | Way::Upgrade => {
            let bin = if way == Way::Upgrade { upgraded } else { this };
            let r = Router::start(bin, &ns.dut, logs.path().join("new"), None)?;
            old.wait()?;
            r
        }
        Way::Kill9 => {
            old.signal(libc::SIGKILL);
            old.wait()?;
            Router::start(this, &ns.dut, logs.path().join("new"), None)?
        }
        Way::Cold => {
            old.signal(libc::SIGTERM);
            old.wait()?;
            Router::start(this, &ns.dut, logs.path().join("new"), None)?
        }
        // systemctl restart: stop (SIGTERM; the router leaves its fast
        // path in the store), then start with the store.
        Way::Service => {
            old.signal(libc::SIGTERM);
            old.wait()?;
            stored = manager.as_ref().map(|m| m.stored()).unwrap_or_default();
            Router::start(this, &ns.dut, logs.path().join("new"), manager.as_ref())?
        }
    };
    new.wait_ready(&record)?;
    let restart_ms = restart.elapsed().as_secs_f64() * 1e3;
    let g = gen.wait_with_output()?;
    let r = recv.wait_with_output()?;
    sampling.store(false, Ordering::Relaxed);
    let samples = sampler
        .join()
        .map_err(|_| anyhow!("the sampler panicked"))??;
    if !g.status.success() {
        bail!("linerate gen: {}", String::from_utf8_lossy(&g.stderr));
    }
    if !r.status.success() {
        bail!("linerate recv: {}", String::from_utf8_lossy(&r.stderr));
    }
    let g: serde_json::Value = serde_json::from_slice(&g.stdout)?;
    let r: serde_json::Value = serde_json::from_slice(&r.stdout)?;
    let num =
        |v: &serde_json::Value, k: &str| v[k].as_u64().ok_or_else(|| anyhow!("no {k} in {v}"));
    let (sent, refused) = (num(&g, "sent_packets")?, num(&g, "xmit_errors")?);
    let received = num(&r, "stamped_packets")?;
    let last = r["streams"][0]["last_seq"].as_u64();
    let lost = frames_lost(sent + refused, refused, num(&r, "lost")?, last);
    let (gaps, last_seq) = (num(&r, "lost")?, last);
    // The traffic's window, less its first and last 100 ms (the
    // generator's start and end).
    let window = traffic_window(&samples).unwrap_or_default();
    let in_window: Vec<Sample> = samples
        .iter()
        .filter(|s| s.at >= window.0 && s.at <= window.1)
        .copied()
        .collect();
    let ids: std::collections::BTreeSet<u32> = samples
        .iter()
        .filter_map(|s| s.fast_path.map(|f| f.0))
        .collect();
    let trial = Trial {
        way,
        sent,
        refused,
        received,
        lost,
        duplicated: num(&r, "duplicated")?,
        fast_path_forwarded: forwarded(&samples),
        kernel_forwarded: samples.last().map_or(0, |l| l.kernel)
            - samples.first().map_or(0, |f| f.kernel),
        gap_ms: longest_gap(&in_window).as_secs_f64() * 1e3,
        restart_ms,
        same_counters: ids.len() == 1,
        said: new.said(),
        gaps,
        last_seq,
        stored,
    };
    drop(new);
    // systemctl stop: the store closes, the links detach.
    if let Some(m) = &manager {
        m.close_store();
    }
    Ok(trial)
}

/// Frames that left the generator and never arrived: `total` numbered
/// (sent and refused by its own ring), the receiver's gaps (`gaps`) and
/// those after the last it got (`last`: its number), less the refused.
fn frames_lost(total: u64, refused: u64, gaps: u64, last: Option<u64>) -> u64 {
    let after_last = match last {
        Some(l) => total.saturating_sub(l + 1),
        None => total,
    };
    (gaps + after_last).saturating_sub(refused)
}

/// What the fast path forwarded over the samples, adding each counters
/// map's rise (a new router with a new map starts from 0).
fn forwarded(samples: &[Sample]) -> u64 {
    let mut total = 0;
    let mut prev: Option<(u32, u64)> = None;
    for s in samples {
        if let Some((id, n)) = s.fast_path {
            total += match prev {
                Some((pid, pn)) if pid == id => n.saturating_sub(pn),
                // A map first seen mid-run: what it counted since it came.
                Some(_) => n,
                None => 0,
            };
            prev = Some((id, n));
        }
    }
    total
}

/// When frames went through the DUT, by the fast path or the kernel:
/// from the first sample that saw one to the last.
fn traffic_window(samples: &[Sample]) -> Option<(Duration, Duration)> {
    let moved: Vec<Duration> = samples
        .windows(2)
        .filter(|w| {
            w[1].kernel > w[0].kernel
                || match (w[0].fast_path, w[1].fast_path) {
                    (Some((a, x)), Some((b, y))) => (a == b && y > x) || (a != b && y > 0),
                    (None, Some((_, y))) => y > 0,
                    _ => false,
                }
        })
        .map(|w| w[1].at)
        .collect();
    Some((*moved.first()?, *moved.last()?))
}

/// The longest time between two rises of the fast path's count (or from
/// the window's start to the first, or from the last to its end).
fn longest_gap(samples: &[Sample]) -> Duration {
    let (Some(first), Some(last)) = (samples.first(), samples.last()) else {
        return Duration::ZERO;
    };
    let mut since = first.at;
    let mut longest = Duration::ZERO;
    let mut prev = first.fast_path;
    for s in &samples[1..] {
        let rose = match (prev, s.fast_path) {
            (Some((a, x)), Some((b, y))) => (a == b && y > x) || (a != b && y > 0),
            (None, Some((_, y))) => y > 0,
            _ => false,
        };
        if rose {
            longest = longest.max(s.at - since);
            since = s.at;
        }
        prev = s.fast_path;
    }
    longest.max(last.at - since)
}

/// Samples every 10 ms until `go` is cleared, from inside the DUT's
/// namespace (its ForwDatagrams are its own).
fn sample(dut: &str, record: &str, go: &AtomicBool, start: Instant) -> Result<Vec<Sample>> {
    linerate_host::netns::enter_for_good(dut)?;
    let mut out = Vec::new();
    let mut map: Option<(u32, u32, libbpf_rs::MapHandle)> = None;
    while go.load(Ordering::Relaxed) {
        let at = start.elapsed();
        let kernel = forw_datagrams()?;
        // The router's record names its counters map; a new one, a new map.
        let rec = std::fs::read_to_string(format!("/run/linerate/routers/{record}.json"))
            .ok()
            .and_then(|t| {
                serde_json::from_str::<linerate_dataplane::record::RouterRecord>(&t).ok()
            });
        if let Some(rec) = rec {
            if map.as_ref().map(|m| m.0) != Some(rec.stats_map_id) {
                map = libbpf_rs::MapHandle::from_map_id(rec.stats_map_id)
                    .ok()
                    .map(|h| (rec.stats_map_id, rec.interfaces[0].1, h));
            }
        }
        let fast_path = map.as_ref().and_then(|(id, ifindex, h)| {
            linerate_dataplane::record::read(h, *ifindex)
                .ok()
                .map(|c| (*id, c.packets[linerate_dataplane::layout::R_FORWARDED]))
        });
        out.push(Sample {
            at,
            fast_path,
            kernel,
        });
        std::thread::sleep(SAMPLE);
    }
    Ok(out)
}

/// The calling thread's namespace's IPv4 ForwDatagrams (/proc's snmp).
fn forw_datagrams() -> Result<u64> {
    let text = std::fs::read_to_string("/proc/thread-self/net/snmp")?;
    let mut ip = text.lines().filter(|l| l.starts_with("Ip: "));
    let (names, values) = (ip.next(), ip.next());
    let (Some(names), Some(values)) = (names, values) else {
        bail!("no Ip: lines in /proc/thread-self/net/snmp");
    };
    names
        .split_whitespace()
        .zip(values.split_whitespace())
        .find(|(n, _)| *n == "ForwDatagrams")
        .and_then(|(_, v)| v.parse().ok())
        .ok_or_else(|| anyhow!("no ForwDatagrams in /proc/thread-self/net/snmp"))
}

/// The header of the table `linerate bench restart` prints, a trial a row.
pub fn table_header() -> String {
    format!(
        "{:<9} {:>9} {:>9} {:>6} {:>12} {:>10} {:>8} {:>10}  counters",
        "way", "sent", "received", "lost", "fast path", "kernel", "gap ms", "restart ms"
    )
}

impl std::fmt::Display for Trial {
    /// The trial's row under [`table_header`].
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{:<9} {:>9} {:>9} {:>6} {:>12} {:>10} {:>8.0} {:>10.0}  {}",
            serde_json::to_value(self.way)
                .unwrap()
                .as_str()
                .unwrap_or("?"),
            self.sent,
            self.received,
            self.lost,
            self.fast_path_forwarded,
            self.kernel_forwarded,
            self.gap_ms,
            self.restart_ms,
            if self.same_counters { "kept" } else { "new" }
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(ms: u64, fp: Option<(u32, u64)>) -> Sample {
        Sample {
            at: Duration::from_millis(ms),
            fast_path: fp,
            kernel: 0,
        }
    }

    #[test]
    fn the_gap_is_the_longest_time_without_a_rise() {
        // Rising every 10 ms, then nothing for 50 ms, on the same map.
        let mut v: Vec<Sample> = (0..5).map(|i| s(i * 10, Some((1, i * 100)))).collect();
        v.extend((5..10).map(|i| s(i * 10, Some((1, 400)))));
        v.push(s(100, Some((1, 500))));
        assert_eq!(longest_gap(&v), Duration::from_millis(60));
        // No router between 20 and 70 ms, then a new map counting.
        let v = vec![
            s(0, Some((1, 0))),
            s(10, Some((1, 10))),
            s(20, None),
            s(50, None),
            s(70, Some((2, 5))),
            s(80, Some((2, 9))),
        ];
        assert_eq!(longest_gap(&v), Duration::from_millis(60));
        assert_eq!(forwarded(&v), 10 + 9);
        // Never rising: the whole window.
        let v = vec![s(0, Some((1, 3))), s(40, Some((1, 3)))];
        assert_eq!(longest_gap(&v), Duration::from_millis(40));
    }

    #[test]
    fn frames_lost_count_what_left_and_never_came() {
        // 1000 numbered, 10 refused by the ring, gaps of 10 (the refused):
        // nothing lost.
        assert_eq!(frames_lost(1000, 10, 10, Some(999)), 0);
        // The last 5 never came.
        assert_eq!(frames_lost(1000, 0, 0, Some(994)), 5);
        assert_eq!(frames_lost(1000, 0, 0, None), 1000);
    }
}
