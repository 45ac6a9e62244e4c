//! A trial through commands on the lab's hosts: `linerate
//! recv` started on the receiver's host and waited for, `linerate gen` on
//! the generator's host, once an interface, then the receiver stopped after
//! the frames in flight have arrived. The same binary and the same JSON the
//! command line prints: a remote host runs exactly what a user would.
use crate::hosts::End;
use crate::remote::Host;
use anyhow::{anyhow, Context, Result};
use linerate_traffic::gen::GenReport;
use linerate_traffic::latency::Latency;
use linerate_traffic::measure::{ReceiverMode, TrialResult};
use linerate_traffic::profile::{Family, Profile};
use linerate_traffic::recv::SequenceTotals;
use linerate_traffic::tcp::{TcpPhase, TcpRun};
use serde::Serialize;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// Where the traffic goes: the hosts and what the frames are addressed to.
#[derive(Clone)]
pub struct CommandPath {
    /// The generator hosts, and their connections.
    pub gens: Vec<(End, Arc<Host>)>,
    pub recv: End,
    pub recv_host: Arc<Host>,
    /// The DUT's MAC (the generator's destination MAC).
    pub dut_mac: String,
}

/// One generator's part of a trial.
#[derive(Clone, Debug, Serialize)]
pub struct GeneratorRun {
    /// `gen`, `gen2`, ... and its SSH target.
    pub host: String,
    pub target: String,
    pub interface: String,
    pub sent_packets: u64,
    /// Refused at the DUT's ring (counted as offered, not sent).
    pub xmit_errors: u64,
    pub pps: f64,
}

/// Grace period after the generators stop for frames still in flight (as
/// the in-process trial's).
const DRAIN: Duration = Duration::from_millis(200);
/// How long a receiver may take to attach.
const RECV_READY: Duration = Duration::from_secs(30);

/// What a trial offers: the rate over all generators (None: as fast as
/// they go), for how long, and a TCP profile's segments.
#[derive(Clone, Copy, Debug)]
pub struct Offer {
    pub rate: Option<u64>,
    pub seconds: f64,
    pub tcp: Option<TcpRun>,
}

/// One generator: a host's interface, with its CPUs.
pub struct Slot<'a> {
    pub host: usize,
    pub end: &'a End,
    pub interface: usize,
}

impl CommandPath {
    /// Every generator, host by host, interface by interface.
    pub fn slots(&self) -> Vec<Slot<'_>> {
        self.gens
            .iter()
            .enumerate()
            .flat_map(|(host, (end, _))| {
                (0..end.interfaces.len()).map(move |interface| Slot {
                    host,
                    end,
                    interface,
                })
            })
            .collect()
    }

    /// The arguments of generator `k` (of the slots). TCP connections
    /// are shared out by source port: each generator sends its own.
    pub fn gen_args(&self, k: usize, profile: &Profile, offer: Offer) -> Result<Vec<String>> {
        let Offer { rate, seconds, tcp } = offer;
        let slots = self.slots();
        let n = slots.len();
        let slot = &slots[k];
        let mut a: Vec<String> = vec![
            "gen".into(),
            "-i".into(),
            slot.end.interfaces[slot.interface].clone(),
        ];
        a.extend(["-l".into(), profile.len.clone()]);
        if profile.family == Family::Ipv6 {
            a.push("-6".into());
        }
        match (tcp, &profile.src) {
            (Some(_), _) if n > 1 => a.extend(["-s".into(), src_share(profile, k, n)?]),
            (_, Some(s)) => a.extend(["-s".into(), s.clone()]),
            _ => {}
        }
        if let Some(d) = &profile.dst {
            a.extend(["-d".into(), d.clone()]);
        }
        if profile.random_dst {
            a.push("-Z".into());
        }
        if profile.random_src {
            a.push("-z".into());
        }
        a.extend(["-D".into(), self.dut_mac.clone()]);
        if let Some(v) = profile.vlan {
            a.extend(["--vlan".into(), v.to_string()]);
        }
        if let Some(r) = rate {
            // The rate is shared: the first interfaces take the remainder.
            let share = r / n as u64 + u64::from((k as u64) < r % n as u64);
            a.extend(["-R".into(), share.max(1).to_string()]);
        }
        a.extend(["-t".into(), format!("{seconds}")]);
        if let Some((first, count)) = slot.end.cpu_shares()[slot.interface] {
            a.extend([
                "--cpu".into(),
                first.to_string(),
                "-p".into(),
                count.to_string(),
            ]);
        }
        if let Some(t) = tcp {
            a.extend([
                "--tcp".into(),
                t.phase.label().into(),
                "--tcp-from".into(),
                t.from.to_string(),
            ]);
            if t.phase == TcpPhase::Churn {
                a.extend(["--tcp-segments".into(), t.segments.to_string()]);
                if t.lag > 0 {
                    a.extend(["--tcp-lag".into(), t.lag.to_string()]);
                }
            }
        }
        // Every generator's streams apart at the one receiver.
        let base = k * linerate_bpf::layout::RECV_STREAMS as usize / n;
        a.extend(["--stream-base".into(), base.to_string(), "--json".into()]);
        Ok(a)
    }

    /// One trial at `rate` pps in all (None: as fast as they go) for
    /// `seconds`. `stop` ends the generators early. `log` gets a line per
    /// generator.
    pub fn run(
        &self,
        profile: &Profile,
        receiver: ReceiverMode,
        offer: Offer,
        stop: &AtomicBool,
        log: &mut String,
    ) -> Result<(TrialResult, Vec<GeneratorRun>)> {
        let args = (0..self.slots().len())
            .map(|k| self.gen_args(k, profile, offer))
            .collect::<Result<Vec<_>>>()?;
        let seconds = offer.seconds;
        let recv_args: Vec<String> = [
            "recv",
            "-i",
            &self.recv.interfaces[0],
            "--receiver",
            receiver.label(),
            "--json",
        ]
        .map(String::from)
        .to_vec();
        let mut recv = self
            .recv_host
            .start(&self.recv.linerate_command(&recv_args))?;
        recv.wait_for("linerate recv: counting on", RECV_READY)?;
        let slots = self.slots();
        let mut gens = slots
            .iter()
            .enumerate()
            .map(|(k, slot)| {
                let cmd = slot.end.linerate_command(&args[k]);
                self.gens[slot.host].1.start(&cmd)
            })
            .collect::<Result<Vec<_>>>()?;
        // The generators end on their own after `seconds`; a stop ends
        // them early, and a hung host is stopped at the deadline.
        let deadline = Duration::from_secs_f64(seconds) + Duration::from_secs(30);
        let started = std::time::Instant::now();
        while !gens.iter_mut().all(|g| g.ended()) {
            if stop.load(Ordering::Relaxed) {
                gens.iter_mut().for_each(|g| g.stop());
            }
            if started.elapsed() > deadline {
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let mut reports = Vec::new();
        let mut each = Vec::new();
        for (slot, g) in slots.iter().zip(gens) {
            let out = g.finish(Duration::from_secs(1))?;
            let (host, iface) = (
                crate::hosts::gen_name(slot.host),
                &slot.end.interfaces[slot.interface],
            );
            let r: GenReport = serde_json::from_slice(&out)
                .with_context(|| format!("host {host}: linerate gen on {iface}: no report"))?;
            log.push_str(&format!(
                "# generator {host} ({}) {iface}: sent {} ({} refused at the DUT's ring) in {:.3} s, {:.0} pps\n",
                slot.end.target, r.sent_packets, r.xmit_errors, r.seconds, r.pps
            ));
            each.push(GeneratorRun {
                host,
                target: slot.end.target.to_string(),
                interface: iface.clone(),
                sent_packets: r.sent_packets,
                xmit_errors: r.xmit_errors,
                pps: r.pps,
            });
            reports.push(r);
        }
        std::thread::sleep(DRAIN);
        recv.stop();
        let out = recv.finish(Duration::from_secs(30))?;
        let r: serde_json::Value = serde_json::from_slice(&out)
            .map_err(|e| anyhow!("host recv: linerate recv: no report ({e})"))?;
        let offered = merge(reports);
        // Latency compares the generator's clock with the receiver's: only
        // on one host.
        let one_clock = self.gens.iter().all(|(g, _)| g.target == self.recv.target);
        let stamped = linerate_traffic::tcp::data_only(offer.tcp);
        Ok((
            trial_result(offered, &r, receiver, one_clock, stamped)?,
            each,
        ))
    }
}

/// Several generators' reports as one: frames and rates add up, the
/// longest run is the run's time.
pub fn merge(reports: Vec<GenReport>) -> GenReport {
    let mut it = reports.into_iter();
    let mut m = it.next().expect("at least one generator");
    for r in it {
        m.sent_packets += r.sent_packets;
        m.sent_bytes += r.sent_bytes;
        m.seconds = m.seconds.max(r.seconds);
        m.pps += r.pps;
        m.bps += r.bps;
        m.threads += r.threads;
        m.rate_pps = match (m.rate_pps, r.rate_pps) {
            (Some(a), Some(b)) => Some(a + b),
            _ => None,
        };
        m.xmit_errors += r.xmit_errors;
        m.queue_full += r.queue_full;
        m.warnings.extend(r.warnings);
        m.tcp_next = m.tcp_next.max(r.tcp_next);
    }
    m
}

/// Generator `k`'s share (of `n`) of a TCP profile's source ports, as
/// `-s` takes it.
fn src_share(profile: &Profile, k: usize, n: usize) -> Result<String> {
    let t = profile.check().map_err(|e| anyhow!("profile: {e}"))?;
    let shares = linerate_traffic::tcp::port_shares(t.src.port_first as u32, t.src.port_count(), n)
        .ok_or_else(|| {
            anyhow!(
                "profile: src: {} source ports for {n} generators: TCP needs one port a generator at least",
                t.src.port_count()
            )
        })?;
    let (first, count) = shares[k];
    let ports = format!("{first}-{}", first + count - 1);
    Ok(match (t.src.first, t.src.last) {
        (std::net::IpAddr::V6(a), std::net::IpAddr::V6(b)) => format!("[{a}-{b}]:{ports}"),
        (a, b) => format!("{a}-{b}:{ports}"),
    })
}

/// A trial's result from the generators' report and `linerate recv
/// --json`'s, as the in-process trial makes it.
/// `stamped`: whether every frame the generators sent carries the stamp
/// (else every frame that arrived counts).
pub fn trial_result(
    offered: GenReport,
    r: &serde_json::Value,
    receiver: ReceiverMode,
    one_clock: bool,
    stamped: bool,
) -> Result<TrialResult> {
    let num = |k: &str| {
        r[k].as_u64()
            .ok_or_else(|| anyhow!("linerate recv's report has no {k}: {r}"))
    };
    let all = num("received_packets")?;
    let received_packets = if receiver == ReceiverMode::Frames || !stamped {
        all
    } else {
        num("stamped_packets")?
    };
    let full = receiver == ReceiverMode::Full;
    let sequence = full
        .then(|| -> Result<SequenceTotals> {
            Ok(SequenceTotals {
                lost: num("lost")?,
                duplicated: num("duplicated")?,
                reordered: num("reordered")?,
                late: num("late")?,
            })
        })
        .transpose()?;
    let latency_ns = if full && one_clock {
        Some(serde_json::from_value::<Latency>(r["latency_ns"].clone())?)
    } else {
        None
    };
    Ok(TrialResult {
        received_bytes: num("received_bytes")?,
        received_pps: received_packets as f64 / offered.seconds.max(1e-9),
        loss_ratio: if offered.sent_packets == 0 {
            0.0
        } else {
            1.0 - received_packets as f64 / offered.sent_packets as f64
        },
        received_pps_per_second: Vec::new(),
        other_packets: all - received_packets,
        received_packets,
        sequence,
        latency_ns,
        // (A host sends one profile: no mix.)
        received_by_part: Vec::new(),
        offered,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::remote::{SshOptions, Target};

    fn offer(rate: Option<u64>, seconds: f64, tcp: Option<TcpRun>) -> Offer {
        Offer { rate, seconds, tcp }
    }

    fn path(interfaces: &[&str], cpus: &[usize]) -> CommandPath {
        let end = |ifs: &[&str], cpus: &[usize]| End {
            target: Target::Local,
            netns: None,
            linerate: "linerate".into(),
            interfaces: ifs.iter().map(|s| s.to_string()).collect(),
            cpus: cpus.to_vec(),
        };
        let host = Arc::new(Host::connect("gen", Target::Local, SshOptions::default()).unwrap());
        CommandPath {
            gens: vec![(end(interfaces, cpus), host.clone())],
            recv: end(&["recv0"], &[]),
            recv_host: host,
            dut_mac: "02:00:00:00:00:02".into(),
        }
    }

    /// TCP connections are shared out by source port, each generator
    /// sending its own, and the run's phase and sequence go with them.
    #[test]
    fn tcp_generators_each_send_their_own_connections() {
        let p = path(&["a0", "b0"], &[2, 3, 6, 7]);
        let run = TcpRun::phase(linerate_traffic::tcp::TcpPhase::Data, 42);
        for (family, src) in [
            (Family::Ipv4, "198.18.10.1-198.18.10.20:2000-2009"),
            (Family::Ipv6, "[2001:2::1-2001:2::9]:2000-2009"),
        ] {
            let prof = Profile {
                family,
                len: "100".into(),
                src: Some(src.into()),
                dst: None,
                random_dst: false,
                random_src: false,
                proto: linerate_traffic::tcp::Proto::Tcp,
                churn: None,
                mix: Vec::new(),
                weight: None,
                rate: None,
                ttl: None,
                headers: Default::default(),
                vlan: None,
                port: None,
            };
            let whole = prof.check().unwrap().src;
            let mut ports = Vec::new();
            for k in 0..2 {
                let a = p.gen_args(k, &prof, offer(None, 1.0, Some(run))).unwrap();
                let s = &a[a.iter().position(|x| x == "-s").unwrap() + 1];
                let e = linerate_traffic::flows::parse("-s", s, 2000).unwrap();
                assert_eq!((e.first, e.last), (whole.first, whole.last), "{s}");
                ports.push((e.port_first, e.port_last));
                assert!(a.join(" ").contains("--tcp data --tcp-from 42 "), "{a:?}");
            }
            assert_eq!(ports, [(2000, 2004), (2005, 2009)]);
        }
        let one_port = Profile {
            family: Family::Ipv4,
            len: "100".into(),
            src: Some("198.18.10.1:2000".into()),
            dst: None,
            random_dst: false,
            random_src: false,
            proto: linerate_traffic::tcp::Proto::Tcp,
            churn: None,
            mix: Vec::new(),
            weight: None,
            rate: None,
            ttl: None,
            headers: Default::default(),
            vlan: None,
            port: None,
        };
        let e = p
            .gen_args(0, &one_port, offer(None, 1.0, Some(run)))
            .unwrap_err();
        assert!(
            e.to_string().contains("1 source ports for 2 generators"),
            "{e}"
        );
    }

    /// The arguments are the command line's: the profile's fields as its
    /// flags, the rate shared, each interface's CPUs and stream base.
    #[test]
    fn generators_get_the_profile_their_share_and_streams_apart() {
        let p = path(&["a0", "b0"], &[2, 3, 6, 7]);
        let prof = Profile {
            family: Family::Ipv6,
            len: "imix".into(),
            src: Some("2001:2::1-2001:2::9".into()),
            dst: None,
            random_dst: true,
            random_src: false,
            proto: linerate_traffic::tcp::Proto::Udp,
            churn: None,
            mix: Vec::new(),
            weight: None,
            rate: None,
            ttl: None,
            headers: Default::default(),
            vlan: None,
            port: None,
        };
        let a = p
            .gen_args(1, &prof, offer(Some(1_000_001), 2.5, None))
            .unwrap()
            .join(" ");
        assert_eq!(
            a,
            "gen -i b0 -l imix -6 -s 2001:2::1-2001:2::9 -Z -D 02:00:00:00:00:02 -R 500000 -t 2.5 --cpu 6 -p 2 --stream-base 128 --json"
        );
        let a = p
            .gen_args(0, &prof, offer(Some(1_000_001), 2.5, None))
            .unwrap()
            .join(" ");
        assert!(
            a.contains("-R 500001 ") && a.contains("--stream-base 0 "),
            "{a}"
        );
        let one = path(&["gen0"], &[]);
        let a = one
            .gen_args(0, &prof, offer(None, 1.0, None))
            .unwrap()
            .join(" ");
        assert!(!a.contains("-R") && !a.contains("--cpu"), "{a}");
    }

    fn report(sent: u64, secs: f64) -> GenReport {
        serde_json::from_value(serde_json::json!({
            "mode": "xdp", "sent_packets": sent, "sent_bytes": sent * 60, "seconds": secs,
            "pps": sent as f64 / secs, "bps": 0.0, "frame_sizes": "60", "mean_frame_len": 60.0,
            "threads": 1, "rate_pps": null, "xmit_errors": 3, "queue_full": 0, "warnings": []
        }))
        .unwrap()
    }

    #[test]
    fn reports_add_up_and_make_the_trial_result() {
        let g = merge(vec![report(1000, 1.0), report(3000, 1.5)]);
        assert_eq!((g.sent_packets, g.xmit_errors, g.threads), (4000, 6, 2));
        assert_eq!(g.seconds, 1.5);
        let r = serde_json::json!({
            "received_packets": 3900, "stamped_packets": 3800, "received_bytes": 234000,
            "lost": 200, "duplicated": 0, "reordered": 1, "late": 0,
            "latency_ns": {"count": 1, "min": 5, "mean": 5.0, "p50": 5.0, "p99": 5.0, "max": 5, "log2_histogram": []}
        });
        let t = trial_result(g.clone(), &r, ReceiverMode::Full, false, true).unwrap();
        assert_eq!((t.received_packets, t.other_packets), (3800, 100));
        assert_eq!(t.sequence.unwrap().lost, 200);
        assert!(t.latency_ns.is_none(), "two clocks: no latency");
        assert!((t.loss_ratio - 0.05).abs() < 1e-12);
        let t = trial_result(g.clone(), &r, ReceiverMode::Full, true, true).unwrap();
        assert_eq!(t.latency_ns.unwrap().max, 5);
        // Frames without a stamp (TCP's SYNs and FINs): every frame counts.
        let t = trial_result(g.clone(), &r, ReceiverMode::Answer, false, false).unwrap();
        assert_eq!(t.received_packets, 3900);
        let t = trial_result(g, &r, ReceiverMode::Frames, true, true).unwrap();
        assert_eq!((t.received_packets, t.other_packets), (3900, 0));
        assert!(t.sequence.is_none());
    }
}
