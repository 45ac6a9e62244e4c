//! `linerate bench conntrack`: what finding a packet's connection costs the
//! fast path, by the number of states: in the kernel's
//! conntrack table through the XDP kfuncs (`bpf_xdp_ct_lookup`, and with
//! `bpf_ct_change_timeout` on every packet), or in a BPF hash of our own,
//! against building the tuple alone (bpf/probe/ct_probe.bpf.c). For each state
//! count, a network namespace of its own: its conntrack table filled by the
//! probe (`bpf_xdp_ct_alloc` + `bpf_ct_insert_entry`, UDP entries seen both
//! ways), the hash with the same flows; sampled flows' frames through each
//! program side by side (BPF_PROG_TEST_RUN, `repeat` each), rounds, the
//! medians of the rounds' means. Every sampled flow must be found as
//! established by both before anything is measured. The kernel's table
//! limit (`nf_conntrack_max`) and hash size are raised for the run when
//! they are too small, and put back after, as a DUT configuration would.
use crate::probe::udp_frame as frame;
use anyhow::{bail, Context, Result};
use libbpf_rs::{MapCore, MapFlags};
use linerate_bpf::{loader, objects, test_run};
use serde::Serialize;
use std::os::fd::AsFd;

const PROGRAMS: [&str; 4] = ["tuple_only", "ct_lookup", "ct_refresh", "own_hash"];
const MAX_STATES: u32 = 1 << 21;
pub const CT_MAX: &str = "/proc/sys/net/netfilter/nf_conntrack_max";
pub const CT_HASHSIZE: &str = "/sys/module/nf_conntrack/parameters/hashsize";
const IPS_SEEN_REPLY: u32 = 1 << 1;

pub struct Options {
    /// Set by Ctrl-C: the bench stops between runs and rounds, and puts
    /// the kernel's limits back.
    pub stop: &'static std::sync::atomic::AtomicBool,
    /// State counts to measure at.
    pub states: Vec<u32>,
    /// Flows whose frames are run (spread over all).
    pub samples: u32,
    pub repeat: u32,
    pub rounds: usize,
}

#[derive(Debug, Serialize)]
pub struct AtStates {
    pub states: u32,
    pub samples: u32,
    /// Nanoseconds the probe took to insert each entry.
    pub fill_ns_per_entry: f64,
    pub lookups: Vec<crate::probe::ProgramCost>,
}

#[derive(Debug, Serialize)]
pub struct Report {
    pub nf_conntrack_max: u64,
    pub hashsize: u64,
    pub runs: Vec<AtStates>,
}

/// The probe's `struct flow_key` for flow `i`.
fn flow_key(i: u32) -> [u8; 16] {
    let f = frame(i);
    let mut k = [0u8; 16];
    k[0..8].copy_from_slice(&f[26..34]);
    k[8..12].copy_from_slice(&f[34..38]);
    k[12..16].copy_from_slice(&17u32.to_ne_bytes());
    k
}

/// A sysctl-like file set to at least `want` for the bench, put back when
/// dropped.
pub struct Raised {
    path: &'static str,
    old: Option<String>,
}

impl Raised {
    pub fn at_least(path: &'static str, want: u64) -> Result<(Raised, u64)> {
        let old = std::fs::read_to_string(path)
            .with_context(|| format!("{path}: is the kernel's conntrack there?"))?;
        let now: u64 = old
            .trim()
            .parse()
            .with_context(|| format!("{path}: {old:?}"))?;
        if now >= want {
            return Ok((Raised { path, old: None }, now));
        }
        std::fs::write(path, want.to_string())
            .with_context(|| format!("cannot raise {path} to {want}"))?;
        Ok((
            Raised {
                path,
                old: Some(old.trim().to_string()),
            },
            want,
        ))
    }
}

impl Drop for Raised {
    fn drop(&mut self) {
        if let Some(old) = self.old.take() {
            if let Err(e) = std::fs::write(self.path, &old) {
                eprintln!("warning: putting {} back to {old}: {e}", self.path);
            }
        }
    }
}

/// A namespace of the bench's own, deleted (and its conntrack table with
/// it) when dropped.
struct Namespace(String);

impl Namespace {
    fn new(name: String) -> Result<Namespace> {
        let _ = linerate_host::cmd::run("ip", &["netns", "del", &name]);
        linerate_host::cmd::run("ip", &["netns", "add", &name])?;
        let ns = Namespace(name);
        linerate_host::cmd::ip(Some(&ns.0), &["link", "set", "lo", "up"])?;
        Ok(ns)
    }
}

impl Drop for Namespace {
    fn drop(&mut self) {
        let _ = linerate_host::cmd::run("ip", &["netns", "del", &self.0]);
    }
}

pub fn run(o: &Options) -> Result<Report> {
    if o.states.is_empty() || o.states.iter().any(|&n| n == 0 || n > MAX_STATES) {
        bail!(
            "--states: each must be 1 to {MAX_STATES}, got {:?}",
            o.states
        );
    }
    let most = *o.states.iter().max().unwrap();
    if o.samples == 0 || o.samples > most {
        bail!(
            "--samples: must be 1 to the largest --states ({most}), got {}",
            o.samples
        );
    }
    if o.repeat == 0 || o.rounds == 0 {
        bail!("--repeat and --rounds: at least 1");
    }
    // Room for every state of the largest run (other namespaces' entries
    // count against the same limit), and a bucket a state.
    let (_max, nf_conntrack_max) = Raised::at_least(CT_MAX, most as u64 + 65_536)?;
    let (_hash, hashsize) = Raised::at_least(CT_HASHSIZE, most as u64)?;
    let mut runs = Vec::new();
    for &n in &o.states {
        stopped(o)?;
        runs.push(at_states(o, n)?);
    }
    Ok(Report {
        nf_conntrack_max,
        hashsize,
        runs,
    })
}

fn stopped(o: &Options) -> Result<()> {
    if o.stop.load(std::sync::atomic::Ordering::Relaxed) {
        bail!("interrupted (the kernel's conntrack limits are put back)");
    }
    Ok(())
}

fn at_states(o: &Options, n: u32) -> Result<AtStates> {
    let ns = Namespace::new(format!("lrt-ctbench-{}", std::process::id()))?;
    // BPF_PROG_TEST_RUN runs an XDP program on the loopback device of the
    // calling thread's namespace: its conntrack table is the namespace's.
    let _in = linerate_host::netns::NetnsGuard::enter(&ns.0)?;
    let obj = loader::load(objects::CT_PROBE, "conntrack probe")?;
    let state = loader::map(&obj, "state")?;
    let flows = loader::map(&obj, "flows")?;
    // (struct probe_state: the flows of 10/8, not masqueraded.)
    let mut st = [0u8; 32];
    st[16..20].copy_from_slice(&600_000u32.to_ne_bytes());
    st[20..24].copy_from_slice(&120_000u32.to_ne_bytes());
    state.update(&0u32.to_ne_bytes(), &st, MapFlags::ANY)?;
    let fill = loader::prog(&obj, "ct_fill")?;
    let mut out = vec![0u8; 256];
    let started = std::time::Instant::now();
    test_run::run_xdp(fill.as_fd(), &frame(0), &mut out, n)?;
    let fill_ns_per_entry = started.elapsed().as_nanos() as f64 / n as f64;
    let st = state
        .lookup(&0u32.to_ne_bytes(), MapFlags::ANY)?
        .context("the probe's state")?;
    let word = |k: usize| u32::from_ne_bytes(st[4 * k..4 * k + 4].try_into().unwrap());
    let (filled, failed, error) = (word(1), word(2), word(3) as i32);
    if filled != n {
        bail!(
            "the kernel's conntrack table took {filled} of {n} entries ({failed} refused, last error {error}: {})",
            std::io::Error::from_raw_os_error(-error)
        );
    }
    for i in 0..n {
        flows.update(&flow_key(i), &IPS_SEEN_REPLY.to_ne_bytes(), MapFlags::ANY)?;
    }
    let step = (n / o.samples.min(n)).max(1);
    let sampled: Vec<Vec<u8>> = (0..n)
        .step_by(step as usize)
        .take(o.samples as usize)
        .map(frame)
        .collect();
    let progs: Vec<_> = PROGRAMS
        .iter()
        .map(|p| loader::prog(&obj, p))
        .collect::<Result<_>>()?;
    for f in &sampled {
        for p in &progs {
            let r = test_run::run_xdp(p.as_fd(), f, &mut out, 1)?;
            if r.verdict != test_run::XdpAction::Tx {
                bail!(
                    "{}: a flow of the table was not found established ({:?})",
                    p.name().to_string_lossy(),
                    r.verdict
                );
            }
        }
    }
    let lookups = crate::probe::rounds(&PROGRAMS, &progs, &sampled, o.repeat, o.rounds, || {
        stopped(o)
    })?;
    Ok(AtStates {
        states: n,
        samples: sampled.len() as u32,
        fill_ns_per_entry,
        lookups,
    })
}

impl std::fmt::Display for Report {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(
            f,
            "nf_conntrack_max {}, hash size {} (for the run); ns a packet, median of rounds:",
            self.nf_conntrack_max, self.hashsize
        )?;
        for at in &self.runs {
            writeln!(
                f,
                "{} states ({} sampled; filled at {:.0} ns an entry):",
                at.states, at.samples, at.fill_ns_per_entry
            )?;
            write!(f, "{}", crate::probe::lines(&at.lookups, "the tuple alone"))?;
        }
        Ok(())
    }
}
