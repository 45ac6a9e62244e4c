//! `linerate bench tcp`: real TCP through the router (iperf3, the
//! kernel's sockets at both ends of a lab, full checksums on the wire)
//! under a stateful ruleset with the kernel's window checking on, four
//! ways in the same run, taking turns: the kernel alone; the kernel alone
//! with the ends sending segments of the MTU's size (GSO off on their
//! veths), as they must once XDP runs on the DUT's side of them (a veth
//! whose peer has an XDP program offers no GSO: the kernel alone forwards
//! 64 KiB super-segments, the fast path frames); linerate (its
//! established TCP then goes to the kernel); linerate with `--carry-tcp`;
//! the XDP samples' forwarder (xdp_redirect_map: no firewall, every
//! frame from the generator redirected; one way only), what XDP on this
//! lab's veths allows TCP at all; and the kernel behind an XDP program
//! that passes every frame (`xdp-pass`), what attaching XDP costs the
//! kernel's path by itself, which linerate passing a segment pays too.
//! For each: the throughput each way, what the fast path did with the
//! segments, conntrack's `invalid` count, and whether every connection
//! left ESTABLISHED once closed.
use anyhow::{anyhow, bail, Context, Result};
use linerate_dataplane::layout::RouterCounters;
use linerate_host::cmd;
use linerate_lab::{Lab, LabSpec, UpOutcome};
use linerate_labrun::dut_setup::RunningDut;
use linerate_labrun::scenario::builtin_dut;
use serde::Serialize;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// Beyond the lab's connected /24s, reached through gateway routes: what
/// the fast path forwards.
const CLIENT: &str = "198.18.1.1";
const SERVER: &str = "198.19.1.1";
const PORT: u16 = 5201;

pub struct Options {
    /// Seconds of each iperf3 run.
    pub seconds: u32,
    /// Turns of the three.
    pub rounds: usize,
    /// iperf3's parallel streams.
    pub streams: u32,
    /// The ruleset masquerades what leaves through dut1.
    pub masquerade: bool,
}

impl Options {
    pub fn checked(seconds: u32, rounds: usize, streams: u32, masquerade: bool) -> Result<Options> {
        if !(1..=600).contains(&seconds) {
            bail!("--seconds: 1 to 600, got {seconds}");
        }
        if !(1..=50).contains(&rounds) {
            bail!("--rounds: 1 to 50, got {rounds}");
        }
        if !(1..=128).contains(&streams) {
            bail!("--streams: 1 to 128, got {streams}");
        }
        Ok(Options {
            seconds,
            rounds,
            streams,
            masquerade,
        })
    }
}

/// The stateful ruleset of an edge router: established and related
/// accepted, invalid dropped, new connections only to the server's port
/// from the generator's side; with `masquerade`, what leaves through dut1
/// masqueraded.
fn ruleset(masquerade: bool) -> String {
    let mut r = format!(
        "table inet edge {{
  chain forward {{
    type filter hook forward priority 0; policy drop;
    ct state established,related accept
    ct state invalid drop
    iifname \"dut0\" tcp dport {PORT} ct state new accept
  }}
"
    );
    if masquerade {
        r.push_str(
            "  chain postrouting {
    type nat hook postrouting priority srcnat; policy accept;
    oifname \"dut1\" masquerade
  }
",
        );
    }
    r.push_str("}\n");
    r
}

/// The ways, in the order they take turns.
const WAYS: [&str; 6] = [
    "kernel",
    "kernel, MTU segments",
    "linerate",
    "linerate --carry-tcp",
    "xdp-redirect",
    "xdp-pass",
];

/// What the fast path did with a run's segments (None for the kernel).
#[derive(Clone, Debug, Default, Serialize)]
pub struct Segments {
    pub carried: u64,
    /// Established TCP with its windows checked, to the kernel.
    pub window: u64,
    /// SYN, FIN, RST: the kernel tracks the connection's state.
    pub state: u64,
    /// Everything else that went to the kernel.
    pub other: u64,
}

#[derive(Clone, Debug, Serialize)]
pub struct Run {
    pub way: String,
    pub round: usize,
    /// "there" (generator to receiver) or "back" (iperf3 -R).
    pub direction: String,
    pub gbit_s: f64,
    pub segments: Option<Segments>,
    /// conntrack's invalid count over the run.
    pub invalid: u64,
    /// Entries left ESTABLISHED a second after the run.
    pub left_established: usize,
}

#[derive(Clone, Debug, Serialize)]
pub struct Summary {
    pub way: String,
    pub direction: String,
    pub median_gbit_s: f64,
    pub min_gbit_s: f64,
    pub max_gbit_s: f64,
    /// Median of the rounds' ratios to the kernel's run in the same round,
    /// to its run with MTU segments, and to the kernel's behind XDP
    /// passing (`xdp-pass`: for linerate passing, what it adds to what
    /// attaching XDP costs).
    pub to_kernel: f64,
    pub to_kernel_mtu: f64,
    pub to_xdp_pass: f64,
    /// Of the segments of established connections (carried or window
    /// checked), the share carried, over all rounds.
    pub carried_share: Option<f64>,
    pub invalid: u64,
    pub left_established: usize,
}

#[derive(Clone, Debug, Serialize)]
pub struct Report {
    pub seconds: u32,
    pub streams: u32,
    pub masquerade: bool,
    pub ruleset: String,
    pub runs: Vec<Run>,
    pub summaries: Vec<Summary>,
}

/// The DUT's conntrack `invalid` count, over its CPUs.
fn invalid(dut: &str) -> Result<u64> {
    Ok(cmd::in_netns(dut, "conntrack", &["-S"])?
        .split_whitespace()
        .filter_map(|w| w.strip_prefix("invalid="))
        .filter_map(|n| n.parse::<u64>().ok())
        .sum())
}

fn established(dut: &str) -> Result<usize> {
    Ok(cmd::in_netns(dut, "conntrack", &["-L", "-p", "tcp"])?
        .lines()
        .filter(|l| l.contains("ESTABLISHED"))
        .count())
}

/// The router's counters over its interfaces.
fn counters(dut: &str) -> Result<Vec<RouterCounters>> {
    let (rec, map) = linerate_dataplane::record::open(dut)?;
    rec.interfaces
        .iter()
        .map(|(_, i)| linerate_dataplane::record::read(&map, *i))
        .collect()
}

fn segments(before: &[RouterCounters], after: &[RouterCounters]) -> Segments {
    let mut s = Segments::default();
    for (b, a) in before.iter().zip(after) {
        let moved = a.since(b);
        let n = |r: &str| moved.packets_of(r);
        s.carried += n("forwarded");
        s.window += n("pass_ct_window");
        s.state += n("pass_ct_state");
        let passed: u64 = linerate_dataplane::layout::R_PASSES
            .map(|i| moved.packets[i])
            .sum();
        s.other += passed - n("pass_ct_window") - n("pass_ct_state");
    }
    s
}

/// iperf3's server in the receiver's namespace, killed when dropped.
struct Server(Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// One iperf3 run from the generator's namespace: bits per second
/// received.
fn iperf(gen: &str, o: &Options, reverse: bool) -> Result<f64> {
    let t = Instant::now();
    loop {
        let (secs, streams) = (o.seconds.to_string(), o.streams.to_string());
        let mut args = vec![
            "iperf3", "-c", SERVER, "-B", CLIENT, "-P", &streams, "-J", "-t", &secs,
        ];
        if reverse {
            args.push("-R");
        }
        let out = Command::new("ip")
            .args(["netns", "exec", gen])
            .args(&args)
            .output()
            .context("iperf3 (apt-get install iperf3)")?;
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
        if out.status.success() && v.get("error").is_none() {
            return v["end"]["sum_received"]["bits_per_second"]
                .as_f64()
                .ok_or_else(|| anyhow!("iperf3 gave no received rate"));
        }
        // The server not listening yet.
        if t.elapsed() > Duration::from_secs(5) {
            bail!(
                "iperf3: {}",
                v.get("error").and_then(|e| e.as_str()).unwrap_or("failed")
            );
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

pub fn run(o: &Options, stop: &AtomicBool, mut progress: impl FnMut(&Run)) -> Result<Report> {
    cmd::require_tool("iperf3")?;
    let name = format!("lrtcp{}", std::process::id());
    let (lab, outcome) = Lab::up(&LabSpec::new(&name), false)?;
    if outcome == UpOutcome::AlreadyUp {
        bail!("lab {name} is already up");
    }
    let ns = lab.namespaces();
    let ifs = lab.interfaces();
    let result = (|| -> Result<Vec<Run>> {
        cmd::in_netns(
            &ns.gen,
            "ip",
            &["addr", "add", &format!("{CLIENT}/32"), "dev", "lo"],
        )?;
        cmd::in_netns(
            &ns.recv,
            "ip",
            &["addr", "add", &format!("{SERVER}/32"), "dev", "lo"],
        )?;
        let _server = Server(
            Command::new("ip")
                .args(["netns", "exec", &ns.recv, "iperf3", "-s", "-B", SERVER])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .context("iperf3 -s")?,
        );
        let mut runs = Vec::new();
        for round in 0..o.rounds {
            for way in WAYS {
                let routed = way.starts_with("linerate");
                let mut def = match way {
                    "xdp-redirect" | "xdp-pass" => builtin_dut(way),
                    _ if routed => builtin_dut("linerate"),
                    _ => builtin_dut("linux"),
                }
                .expect("built-in");
                if way != "xdp-redirect" {
                    def.nft = Some(ruleset(o.masquerade));
                }
                def.carry_tcp = way.ends_with("--carry-tcp");
                let gso = if way.ends_with("MTU segments") {
                    "off"
                } else {
                    "on"
                };
                for (n, dev) in [(&ns.gen, &ifs.gen), (&ns.recv, &ifs.recv)] {
                    cmd::in_netns(n, "ethtool", &["-K", dev, "gso", gso])?;
                }
                let dut = RunningDut::start(&def, &ns.dut, &ifs.dut_ports(1))?;
                for reverse in [false, true] {
                    // (The samples' forwarder redirects one way: back is
                    // the kernel's.)
                    if reverse && way == "xdp-redirect" {
                        continue;
                    }
                    if stop.load(Ordering::Relaxed) {
                        return Ok(runs);
                    }
                    let before = if routed {
                        Some(counters(&ns.dut)?)
                    } else {
                        None
                    };
                    let inv = invalid(&ns.dut)?;
                    let bps = iperf(&ns.gen, o, reverse)?;
                    let segments = match &before {
                        Some(b) => Some(segments(b, &counters(&ns.dut)?)),
                        None => None,
                    };
                    let invalid = invalid(&ns.dut)? - inv;
                    std::thread::sleep(Duration::from_secs(1));
                    let r = Run {
                        way: way.to_string(),
                        round,
                        direction: if reverse { "back" } else { "there" }.into(),
                        gbit_s: bps / 1e9,
                        segments,
                        invalid,
                        left_established: established(&ns.dut)?,
                    };
                    progress(&r);
                    runs.push(r);
                }
                dut.stop()?;
            }
        }
        Ok(runs)
    })();
    let down = lab.down();
    let runs = result?;
    down?;
    Ok(Report {
        seconds: o.seconds,
        streams: o.streams,
        masquerade: o.masquerade,
        ruleset: ruleset(o.masquerade),
        summaries: summaries(&runs),
        runs,
    })
}

fn summaries(runs: &[Run]) -> Vec<Summary> {
    let mut out = Vec::new();
    for way in WAYS {
        for direction in ["there", "back"] {
            let mine: Vec<&Run> = runs
                .iter()
                .filter(|r| r.way == way && r.direction == direction)
                .collect();
            if mine.is_empty() {
                continue;
            }
            let rates: Vec<f64> = mine.iter().map(|r| r.gbit_s).collect();
            let d = linerate_ministat::Dataset::new(way, &rates);
            let ratios = |to: &str| -> f64 {
                let v: Vec<f64> = mine
                    .iter()
                    .filter_map(|r| {
                        runs.iter()
                            .find(|k| k.way == to && k.direction == direction && k.round == r.round)
                            .map(|k| r.gbit_s / k.gbit_s)
                    })
                    .collect();
                if v.is_empty() {
                    f64::NAN
                } else {
                    linerate_ministat::Dataset::new("ratios", &v).median()
                }
            };
            let (carried, window) = mine
                .iter()
                .filter_map(|r| r.segments.as_ref())
                .fold((0, 0), |(c, w), s| (c + s.carried, w + s.window));
            out.push(Summary {
                way: way.to_string(),
                direction: direction.to_string(),
                median_gbit_s: d.median(),
                min_gbit_s: d.min(),
                max_gbit_s: d.max(),
                to_kernel: ratios("kernel"),
                to_kernel_mtu: ratios("kernel, MTU segments"),
                to_xdp_pass: ratios("xdp-pass"),
                carried_share: mine[0]
                    .segments
                    .as_ref()
                    .map(|_| carried as f64 / (carried + window).max(1) as f64),
                invalid: mine.iter().map(|r| r.invalid).sum(),
                left_established: mine.iter().map(|r| r.left_established).max().unwrap_or(0),
            });
        }
    }
    out
}

impl std::fmt::Display for Run {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "round {} {:<22} {:<5} {:6.2} Gbit/s",
            self.round + 1,
            self.way,
            self.direction,
            self.gbit_s
        )?;
        if let Some(s) = &self.segments {
            write!(
                f,
                "  segments: {} carried, {} window-checked, {} SYN/FIN/RST, {} other",
                s.carried, s.window, s.state, s.other
            )?;
        }
        write!(
            f,
            "  invalid {}, left established {}",
            self.invalid, self.left_established
        )
    }
}

impl std::fmt::Display for Report {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(
            f,
            "iperf3, {} streams, {} s a run, the kernel's window checking on (nf_conntrack_tcp_be_liberal=0){}:",
            self.streams,
            self.seconds,
            if self.masquerade { ", masqueraded" } else { "" }
        )?;
        for s in &self.summaries {
            write!(
                f,
                "  {:<22} {:<5} {:6.2} Gbit/s ({:.2}-{:.2}), {:.2}x the kernel, {:.2}x with MTU segments, {:.2}x behind XDP passing",
                s.way,
                s.direction,
                s.median_gbit_s,
                s.min_gbit_s,
                s.max_gbit_s,
                s.to_kernel,
                s.to_kernel_mtu,
                s.to_xdp_pass
            )?;
            if let Some(c) = s.carried_share {
                write!(f, ", {:.2}% of established segments carried", c * 100.0)?;
            }
            writeln!(
                f,
                ", invalid {}, left established {}",
                s.invalid, s.left_established
            )?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(way: &str, round: usize, direction: &str, gbit_s: f64, seg: Option<(u64, u64)>) -> Run {
        Run {
            way: way.into(),
            round,
            direction: direction.into(),
            gbit_s,
            segments: seg.map(|(carried, window)| Segments {
                carried,
                window,
                ..Default::default()
            }),
            invalid: 0,
            left_established: 0,
        }
    }

    /// Each way's rounds are held to the kernel's run of the same round
    /// and direction; the carried share counts the established segments.
    #[test]
    fn summaries_hold_each_round_to_the_kernels() {
        let runs = vec![
            run("kernel", 0, "there", 10.0, None),
            run("linerate --carry-tcp", 0, "there", 5.0, Some((990, 10))),
            run("kernel", 1, "there", 8.0, None),
            run("linerate --carry-tcp", 1, "there", 6.0, Some((1000, 0))),
        ];
        let s = summaries(&runs);
        assert_eq!(s.len(), 2);
        let carry = &s[1];
        assert_eq!(carry.way, "linerate --carry-tcp");
        assert!(
            (carry.to_kernel - 0.625).abs() < 1e-9,
            "{}",
            carry.to_kernel
        );
        assert!((carry.carried_share.unwrap() - 0.995).abs() < 1e-9);
        assert_eq!(s[0].carried_share, None);
        assert!(Options::checked(0, 1, 1, false).is_err());
        assert!(Options::checked(5, 3, 4, true).is_ok());
    }
}
