//! `linerate bench bgp`: linerate's router fed by real BGP daemons, as a
//! user runs it. A peer (BIRD) originates a table of IPv4 /24s and IPv6
//! /48s and announces it over eBGP, on a link of its own, to the DUT's
//! speaker (BIRD, which installs plain routes, or FRR, which installs
//! next-hop objects); the speaker points the routes at the lab's receiver.
//! The table is announced, withdrawn and announced again, under traffic.
//! For sampled prefixes of both families, the lag from the kernel's change
//! (heard as its notification, `monitor`) to the fast path's verdict
//! becoming the kernel's (the attached XDP program test-run on a frame to
//! the prefix: redirected once announced, passed to the kernel once
//! withdrawn); once the kernel holds the whole table (or none of it), the
//! generator's frames to it must all arrive (or none).
pub mod daemons;
pub mod monitor;

use crate::follow::{frame_to, Lag, RouterThread};
use anyhow::{anyhow, bail, Context, Result};
use daemons::{Peer, Speaker};
use linerate_bpf::loader;
use linerate_bpf::test_run::{self, XdpAction};
use linerate_host::clock::monotonic_ns;
use linerate_host::cmd;
use linerate_lab::topology::mac;
use linerate_lab::Lab;
use linerate_traffic::frame::parse_mac;
use linerate_traffic::measure::{run_trial, TrialSetup};
use linerate_traffic::profile::{Family, Profile, Sender};
use monitor::{Listener, Priority};
use serde::Serialize;
use std::collections::HashMap;
use std::net::IpAddr;
use std::os::fd::AsFd;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The bench's addresses: the BGP link (TEST-NET-1 and the IPv6
/// documentation prefix), the lab's receiver, and the table.
pub mod addrs {
    use std::net::{Ipv4Addr, Ipv6Addr};
    pub const DUT_V4: &str = "192.0.2.254";
    pub const PEER_V4: &str = "192.0.2.1";
    pub const DUT_V6: &str = "2001:db8::254";
    pub const PEER_V6: &str = "2001:db8::1";
    pub const RECV_V4: &str = linerate_lab::topology::addr::RECV_V4;
    pub const RECV_V6: &str = linerate_lab::topology::addr::RECV_V6;
    /// IPv4: /24s from 32.0.0.0 (2^20 below 48.0.0.0).
    pub const MAX_ROUTES4: usize = 1 << 20;
    /// IPv6: /48s 2a00:H:L::, i = H << 16 | L (2^20 below 2a00:10::).
    pub const MAX_ROUTES6: usize = 1 << 20;

    pub fn prefix4(i: usize) -> Ipv4Addr {
        Ipv4Addr::from((32u32 << 24) + ((i as u32) << 8))
    }
    pub fn prefix6(i: usize) -> Ipv6Addr {
        Ipv6Addr::new(0x2a00, (i >> 16) as u16, i as u16, 0, 0, 0, 0, 0)
    }
    pub fn in_table4(a: Ipv4Addr) -> bool {
        (32..48).contains(&a.octets()[0])
    }
    pub fn in_table6(a: Ipv6Addr) -> bool {
        let s = a.segments();
        s[0] == 0x2a00 && s[1] < 0x10
    }
}

/// How long a sampled change may take to reach the fast path after the
/// kernel made it before the run gives up on it.
const GIVE_UP: Duration = Duration::from_secs(60);

/// How long the kernel may take the whole table from the daemons: a
/// minute, and a second per 5,000 routes (FRR installed 1.1M routes in
/// 30 s here, idle; twice that on a busy machine).
fn kernel_limit(o: &Options) -> Duration {
    GIVE_UP + Duration::from_secs(((o.routes4 + o.routes6) / 5_000) as u64)
}

pub struct Options {
    pub speaker: Speaker,
    pub routes4: usize,
    pub routes6: usize,
    /// Sampled prefixes per family (probed in every phase).
    pub samples: usize,
    /// The generator's rate during the bursts, pps (IPv4, to random
    /// destinations over the table).
    pub rate: u64,
    /// Pin the router to this CPU, the prober and listener to another.
    pub router_cpu: Option<usize>,
}

impl Options {
    pub fn check(&self) -> Result<()> {
        if self.routes4 == 0 || self.routes4 > addrs::MAX_ROUTES4 {
            bail!(
                "--routes: must be 1 to {}, got {}",
                addrs::MAX_ROUTES4,
                self.routes4
            );
        }
        if self.routes6 == 0 || self.routes6 > addrs::MAX_ROUTES6 {
            bail!(
                "--routes6: must be 1 to {}, got {}",
                addrs::MAX_ROUTES6,
                self.routes6
            );
        }
        if self.samples == 0 {
            bail!("--samples: must be at least 1");
        }
        if self.rate == 0 {
            bail!("-R: must be at least 1 pps");
        }
        crate::follow::check_router_cpu(self.router_cpu)
    }
}

/// One family's sampled prefixes in one phase.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Followed {
    /// Sampled changes the fast path followed, and their lag.
    pub samples: usize,
    /// Sampled changes the kernel made that the fast path had not
    /// followed after a minute.
    pub never: usize,
    /// Sampled changes the kernel never made (the speaker's doing).
    pub unheard: usize,
    pub lag_ms: Lag,
}

/// Frames the generator offered the DUT, those the DUT's receive ring
/// refused (they never reached the router: a NIC's rx drop, the DUT's
/// cores busy), and those that arrived.
#[derive(Clone, Copy, Debug, Default, Serialize)]
pub struct Frames {
    pub offered: u64,
    pub refused: u64,
    pub received: u64,
}

#[derive(Clone, Debug, Serialize)]
pub struct Phase {
    pub kind: &'static str,
    /// Seconds from the peer's command to the kernel holding the whole
    /// table (or none of it).
    pub seconds: f64,
    pub ipv4: Followed,
    pub ipv6: Followed,
    /// The generator's frames during the burst.
    pub during: Frames,
    /// Once settled (the kernel holds the whole table, or none of it, and
    /// has not changed it for a second): frames to the table, IPv4 (random over it) and IPv6
    /// (its first, middle and last prefix). All arrive when announced,
    /// none when withdrawn.
    pub settled_ipv4: Frames,
    pub settled_ipv6: Frames,
}

#[derive(Clone, Debug, Serialize)]
pub struct Report {
    pub speaker: &'static str,
    pub routes: usize,
    pub routes6: usize,
    pub overflows: u64,
    /// Every phase's and family's samples.
    pub lag_ms: Lag,
    pub phases: Vec<Phase>,
}

/// The phases: (name, announces).
const PHASES: [(&str, bool); 3] = [
    ("announce", true),
    ("withdraw", false),
    ("reannounce", true),
];

/// Removes the peer's namespace (and the BGP link with it), then the lab.
struct Teardown {
    lab: Option<Lab>,
    peer_ns: String,
}

impl Drop for Teardown {
    fn drop(&mut self) {
        let _ = cmd::ip(None, &["netns", "del", &self.peer_ns]);
        if let Some(lab) = self.lab.take() {
            let _ = lab.down();
        }
    }
}

/// The BGP link between the DUT (bgp0) and the peer's namespace (peer0).
fn bgp_link(dut_ns: &str, peer_ns: &str) -> Result<()> {
    let ip = |ns: Option<&str>, args: &[&str]| cmd::ip(ns, args).map(drop);
    ip(None, &["netns", "add", peer_ns])?;
    ip(
        None,
        &[
            "link", "add", "bgp0", "netns", dut_ns, "type", "veth", "peer", "name", "peer0",
            "netns", peer_ns,
        ],
    )?;
    for (ns, dev, v4, v6) in [
        (dut_ns, "bgp0", addrs::DUT_V4, addrs::DUT_V6),
        (peer_ns, "peer0", addrs::PEER_V4, addrs::PEER_V6),
    ] {
        ip(Some(ns), &["addr", "add", &format!("{v4}/24"), "dev", dev])?;
        ip(
            Some(ns),
            &["addr", "add", &format!("{v6}/64"), "dev", dev, "nodad"],
        )?;
        ip(Some(ns), &["link", "set", dev, "up"])?;
        ip(Some(ns), &["link", "set", "lo", "up"])?;
    }
    Ok(())
}

/// The sampled prefixes: every k-th of each family, IPv4 first.
fn sample(o: &Options) -> Vec<(IpAddr, u8)> {
    let pick = |n: usize| (0..n).step_by(n.div_ceil(o.samples.min(n)));
    pick(o.routes4)
        .map(|i| (IpAddr::V4(addrs::prefix4(i)), 24))
        .chain(pick(o.routes6).map(|i| (IpAddr::V6(addrs::prefix6(i)), 48)))
        .collect()
}

/// The prefix's first host: what the probe frames go to.
fn host_in(p: IpAddr) -> IpAddr {
    match p {
        IpAddr::V4(a) => IpAddr::V4((u32::from(a) + 1).into()),
        IpAddr::V6(a) => IpAddr::V6((u128::from(a) + 1).into()),
    }
}

/// Probes every sampled prefix, round-robin, once the kernel has made its
/// change (`at[i]` set), until the fast path's verdict is `want`: each
/// one's lag (ns) from the kernel's change, or None if it never came
/// before `stop`.
fn probe(
    prog: &std::os::fd::OwnedFd,
    ingress: u32,
    frames: &[Vec<u8>],
    at: &[AtomicU64],
    want: XdpAction,
    stop: &AtomicBool,
) -> Result<Vec<Option<u64>>> {
    let mut out = vec![0u8; 256];
    let mut lags = vec![None; frames.len()];
    let mut pending: Vec<usize> = (0..frames.len()).collect();
    while !pending.is_empty() && !stop.load(Ordering::Relaxed) {
        // The router applies the kernel's changes in the order the kernel
        // made them: a round probes the changed samples in that order and
        // stops at the first the fast path has not followed yet (the later
        // ones wait behind it), so a round costs what was followed since
        // the last, not a probe of every pending sample (a thousand test
        // runs a round would take the CPU the router needs). A change
        // still unfollowed after a second no longer holds the others up.
        let mut changed: Vec<(u64, usize)> = pending
            .iter()
            .map(|&i| (at[i].load(Ordering::Acquire), i))
            .filter(|&(t, _)| t != 0)
            .collect();
        changed.sort_unstable();
        let now = monotonic_ns();
        for (t, i) in changed {
            let r = test_run::run_xdp_on(prog.as_fd(), &frames[i], &mut out, 1, Some(ingress))?;
            if r.verdict == want {
                lags[i] = Some(monotonic_ns().saturating_sub(t));
            } else if now.saturating_sub(t) < 1_000_000_000 {
                break;
            }
        }
        pending.retain(|&i| lags[i].is_none());
        // Rounds 100 us apart: the prober must not starve the router of
        // the CPU it measures.
        std::thread::sleep(Duration::from_micros(100));
    }
    Ok(lags)
}

/// The generator and receiver of the lab, for IPv4 to random
/// destinations over the table or IPv6 to one destination.
struct Traffic {
    gen_ns: String,
    recv_ns: String,
    recv_if: String,
    sender: Sender,
    routes4: usize,
}

impl Traffic {
    fn trial(
        &self,
        dst: Option<IpAddr>,
        rate: u64,
        seconds: f64,
        stop: &AtomicBool,
    ) -> Result<Frames> {
        let profile = match dst {
            None => Profile {
                family: Family::Ipv4,
                len: "60".into(),
                src: None,
                dst: Some(format!(
                    "{}-{}",
                    host_in(addrs::prefix4(0).into()),
                    host_in(addrs::prefix4(self.routes4 - 1).into())
                )),
                random_dst: true,
                random_src: false,
                ..Profile::new(Family::Ipv4, "60")
            },
            Some(d) => Profile {
                family: if d.is_ipv4() {
                    Family::Ipv4
                } else {
                    Family::Ipv6
                },
                len: if d.is_ipv4() { "60" } else { "78" }.into(),
                src: None,
                dst: Some(d.to_string()),
                random_dst: false,
                random_src: false,
                ..Profile::new(Family::Ipv4, "60")
            },
        };
        let traffic = profile.check()?;
        let gen = traffic.gen_options(&self.sender, Some(rate), seconds)?;
        let t = TrialSetup {
            gen_netns: self.gen_ns.clone(),
            recv_netns: self.recv_ns.clone(),
            recv_ifname: self.recv_if.clone(),
            gen,
            receiver: Default::default(),
        };
        let r = run_trial(&t, stop, |_, _, _| {})?;
        Ok(Frames {
            offered: r.offered.sent_packets + r.offered.xmit_errors,
            refused: r.offered.xmit_errors,
            received: r.received_packets,
        })
    }

    /// Frames to the settled table: IPv4 at random over it for a second,
    /// IPv6 to its first, middle and last prefix.
    fn settled(&self, routes6: usize, stop: &AtomicBool) -> Result<(Frames, Frames)> {
        let v4 = self.trial(None, 20_000, 1.0, stop)?;
        let mut v6 = Frames::default();
        for i in [0, routes6 / 2, routes6 - 1] {
            let f = self.trial(Some(host_in(addrs::prefix6(i).into())), 10_000, 0.3, stop)?;
            v6.offered += f.offered;
            v6.refused += f.refused;
            v6.received += f.received;
        }
        Ok((v4, v6))
    }
}

/// Runs the bench; `say` gets each phase as it ends.
pub fn run(o: &Options, stop: &AtomicBool, mut say: impl FnMut(&Phase)) -> Result<Report> {
    o.check()?;
    let name = format!("lrbgp{}", std::process::id() % 100_000);
    let lab = crate::follow::lab_with_fixed_receiver(&name)?;
    let ns = lab.namespaces();
    let ifs = lab.interfaces();
    let teardown = Teardown {
        lab: Some(lab),
        peer_ns: format!("{name}-peer"),
    };
    bgp_link(&ns.dut, &teardown.peer_ns)?;
    let dir = tempfile::Builder::new().prefix("linerate-bgp").tempdir()?;

    let router = RouterThread::spawn(
        &ns.dut,
        vec![ifs.dut_in.clone(), ifs.dut_out.clone()],
        &name,
        o.router_cpu,
    )?;
    router.wait_ready(Duration::from_secs(60))?;
    let other_cpu = o.router_cpu.map(|c| (c + 1) % linerate_host::cpu::online());

    let prefixes = sample(o);
    let n4 = prefixes.iter().filter(|p| p.0.is_ipv4()).count();
    let index: HashMap<(IpAddr, u8), usize> =
        prefixes.iter().enumerate().map(|(i, &p)| (p, i)).collect();
    let frames: Arc<Vec<Vec<u8>>> = Arc::new(
        prefixes
            .iter()
            .map(|p| frame_to(host_in(p.0)))
            .collect::<Result<_>>()?,
    );
    let listener = Listener::start(
        &ns.dut,
        index,
        PHASES.iter().map(|p| p.1).collect(),
        None,
        Priority::Ordinary,
        other_cpu,
    )?;
    let heard = listener.heard.clone();

    let result = (|| -> Result<Report> {
        let mut speaker = daemons::start_speaker(o.speaker, &ns.dut, dir.path())?;
        let mut peer = Peer::start(&teardown.peer_ns, dir.path(), o.routes4, o.routes6)?;
        peer.wait_established(&mut speaker, Duration::from_secs(60))?;
        let traffic = Traffic {
            gen_ns: ns.gen.clone(),
            recv_ns: ns.recv.clone(),
            recv_if: ifs.recv.clone(),
            sender: Sender {
                ifname: ifs.gen.clone(),
                src_mac: parse_mac("the lab's generator MAC", mac::GEN)?,
                dst_mac: parse_mac("the lab's DUT MAC", mac::DUT_IN)?,
                cpu: 0,
                other_ports: Vec::new(),
            },
            routes4: o.routes4,
        };
        let mut phases = Vec::new();
        let mut all_lags = Vec::new();
        for (k, &(kind, announce)) in PHASES.iter().enumerate() {
            heard.phase.store(k, Ordering::SeqCst);
            let probe_stop = Arc::new(AtomicBool::new(false));
            let prober = {
                let (ns, ifname, frames, heard, pstop) = (
                    ns.dut.clone(),
                    ifs.dut_in.clone(),
                    frames.clone(),
                    heard.clone(),
                    probe_stop.clone(),
                );
                std::thread::spawn(move || -> Result<Vec<Option<u64>>> {
                    linerate_host::netns::enter_for_good(&ns)?;
                    if let Some(c) = other_cpu {
                        linerate_host::cpu::pin(0, c)?;
                    }
                    let ingress = loader::ifindex(&ifname)?;
                    let prog = loader::attached_xdp_program(ingress)?;
                    let want = if announce {
                        XdpAction::Redirect
                    } else {
                        XdpAction::Pass
                    };
                    probe(&prog, ingress, &frames, &heard.at[k], want, &pstop)
                })
            };
            let settled = Arc::new(AtomicBool::new(false));
            let background = std::thread::scope(|s| -> Result<(f64, Frames)> {
                let during = s.spawn(|| -> Result<Frames> {
                    let mut sum = Frames::default();
                    while !settled.load(Ordering::SeqCst) && !stop.load(Ordering::Relaxed) {
                        let f = traffic.trial(None, o.rate, 0.5, stop)?;
                        sum.offered += f.offered;
                        sum.refused += f.refused;
                        sum.received += f.received;
                    }
                    Ok(sum)
                });
                // The generator sends before the burst starts.
                std::thread::sleep(Duration::from_millis(300));
                let t = Instant::now();
                let outcome = (|| -> Result<f64> {
                    peer.announce(announce)?;
                    let (want4, want6) = if announce {
                        (o.routes4 as i64, o.routes6 as i64)
                    } else {
                        (0, 0)
                    };
                    loop {
                        let (r4, r6) = (
                            heard.routes4.load(Ordering::SeqCst),
                            heard.routes6.load(Ordering::SeqCst),
                        );
                        if (r4, r6) == (want4, want6) {
                            return Ok(t.elapsed().as_secs_f64());
                        }
                        if t.elapsed() > kernel_limit(o) || stop.load(Ordering::Relaxed) {
                            bail!(
                                "{kind}: the kernel holds {r4} of {want4} IPv4 and {r6} of {want6} IPv6 routes after {} s",
                                t.elapsed().as_secs()
                            );
                        }
                        for d in speaker.iter_mut() {
                            d.check_running()?;
                        }
                        std::thread::sleep(Duration::from_millis(1));
                    }
                })();
                settled.store(true, Ordering::SeqCst);
                let during = during
                    .join()
                    .map_err(|_| anyhow!("the traffic thread panicked"))?;
                Ok((outcome?, during?))
            });
            // The fast path gets a minute past the kernel's last change.
            let waited = Instant::now();
            while !prober.is_finished() && waited.elapsed() < GIVE_UP && background.is_ok() {
                std::thread::sleep(Duration::from_millis(10));
            }
            probe_stop.store(true, Ordering::SeqCst);
            let lags = prober
                .join()
                .map_err(|_| anyhow!("the prober panicked"))??;
            let (seconds, during) = background?;
            if heard.lost.load(Ordering::SeqCst) {
                bail!(
                    "{kind}: the bench's own listener lost route notifications: the lags are void"
                );
            }
            let mut followed = |range: std::ops::Range<usize>| {
                let mut f = Followed::default();
                let mut ns = Vec::new();
                for i in range {
                    match (heard.at[k][i].load(Ordering::SeqCst), lags[i]) {
                        (0, _) => f.unheard += 1,
                        (_, Some(l)) => ns.push(l),
                        (_, None) => f.never += 1,
                    }
                }
                f.samples = ns.len();
                all_lags.extend(ns.iter().copied());
                f.lag_ms = Lag::of(ns);
                f
            };
            let (ipv4, ipv6) = (followed(0..n4), followed(n4..prefixes.len()));
            // Settled: the kernel's table unchanged for a second (a daemon
            // may replace routes after the last one came), so the frames
            // test linerate against one state of the kernel.
            let quiet = Instant::now();
            while monotonic_ns().saturating_sub(heard.last_change.load(Ordering::SeqCst))
                < 1_000_000_000
            {
                if quiet.elapsed() > GIVE_UP {
                    bail!("{kind}: the kernel's table kept changing for a minute");
                }
                std::thread::sleep(Duration::from_millis(50));
            }
            let (settled_ipv4, settled_ipv6) = traffic.settled(o.routes6, stop)?;
            let phase = Phase {
                kind,
                seconds,
                ipv4,
                ipv6,
                during,
                settled_ipv4,
                settled_ipv6,
            };
            say(&phase);
            phases.push(phase);
            if stop.load(Ordering::Relaxed) {
                bail!("stopped");
            }
        }
        // The router reports its resyncs once a second.
        std::thread::sleep(Duration::from_millis(1100));
        drop(peer);
        drop(speaker);
        Ok(Report {
            speaker: o.speaker.name(),
            routes: o.routes4,
            routes6: o.routes6,
            overflows: router.resyncs(),
            lag_ms: Lag::of(all_lags),
            phases,
        })
    })();
    let listened = listener.stop();
    let stopped = router.stop();
    drop(teardown);
    let report = result.context(format!("bench bgp with {}", o.speaker.name()))?;
    listened?;
    stopped?;
    Ok(report)
}

impl std::fmt::Display for Followed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let notes = [
            (self.never, "never followed"),
            (self.unheard, "never changed in the kernel"),
        ];
        write!(f, "{}", self.lag_ms.said(self.samples, &notes))
    }
}

impl std::fmt::Display for Phase {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{:<10} kernel done in {:.2} s; IPv4 {}; IPv6 {}; during: {} of {} frames arrived; settled: IPv4 {} of {}, IPv6 {} of {}",
            self.kind,
            self.seconds,
            self.ipv4,
            self.ipv6,
            self.during.received,
            self.during.offered,
            self.settled_ipv4.received,
            self.settled_ipv4.offered,
            self.settled_ipv6.received,
            self.settled_ipv6.offered,
        )
    }
}

impl std::fmt::Display for Report {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} with {} IPv4 and {} IPv6 routes: lag median {:.2} ms, p99 {:.2} ms, max {:.2} ms; {} notification overflows",
            self.speaker, self.routes, self.routes6, self.lag_ms.median, self.lag_ms.p99, self.lag_ms.max, self.overflows
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_prefixes_are_distinct_and_inside_the_table() {
        assert_eq!(addrs::prefix4(0).to_string(), "32.0.0.0");
        assert_eq!(
            addrs::prefix4(addrs::MAX_ROUTES4 - 1).to_string(),
            "47.255.255.0"
        );
        assert_eq!(addrs::prefix6(0x1_0005).to_string(), "2a00:1:5::");
        assert!(addrs::in_table6(addrs::prefix6(addrs::MAX_ROUTES6 - 1)));
        assert!(!addrs::in_table6("2a00:10::".parse().unwrap()));
        assert!(!addrs::in_table4("48.0.0.0".parse().unwrap()));
    }

    #[test]
    fn samples_spread_over_both_families() {
        let o = Options {
            speaker: Speaker::Bird,
            routes4: 1000,
            routes6: 10,
            samples: 100,
            rate: 1,
            router_cpu: None,
        };
        let s = sample(&o);
        assert_eq!(s.len(), 110);
        assert_eq!(s[99], (IpAddr::V4(addrs::prefix4(990)), 24));
        assert_eq!(s[100], (IpAddr::V6(addrs::prefix6(0)), 48));
        assert_eq!(host_in(s[100].0).to_string(), "2a00::1");
    }
}
