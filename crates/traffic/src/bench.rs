//! `linerate bench gen`: the generator's own rate, XDP against AF_PACKET
//! in the same run, into a veth whose far end drops every frame unread
//! (so neither the sink nor a DUT limits it), the rate control at fractions
//! of the XDP maximum, then the receiver as the sink: does it count every
//! frame the generator gets onto the wire?
use crate::gen::{GenOptions, GenReport, Generator, Mode};
use crate::recv::{Receiver, ReceiverMode};
use anyhow::{anyhow, Result};
use linerate_bpf::loader::{self, XdpAttachment, XdpMode};
use linerate_bpf::objects;
use linerate_host::netns::NetnsGuard;
use serde::Serialize;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

#[derive(Clone, Debug)]
pub struct GenBench {
    /// Scratch namespace and the two ends of its veth pair.
    pub netns: String,
    pub tx: String,
    pub rx: String,
    /// Options every run starts from (interface, frames, sender CPU).
    pub gen: GenOptions,
    pub seconds: f64,
    pub repeat: usize,
    /// Fractions of the median XDP rate to check `-R` at.
    pub rate_fractions: Vec<f64>,
    /// Also TCP data segments against UDP datagrams over this many
    /// connections (flows), in the same rounds.
    pub tcp_connections: Option<u32>,
}

/// TCP data segments against UDP datagrams of the same sizes and flows,
/// what the generator builds each second, a pair a round.
#[derive(Clone, Debug, Serialize)]
pub struct TcpCheck {
    pub connections: u32,
    pub udp_built_pps: Spread,
    pub tcp_built_pps: Spread,
    /// TCP over UDP, each round's pair.
    pub ratio: Spread,
}

#[derive(Clone, Debug, Serialize)]
pub struct PairRun {
    pub xdp_pps: f64,
    /// What the XDP generator built and offered; above `xdp_pps` when the
    /// sink's ring refused some (the sink, not the generator, was slower).
    pub xdp_built_pps: f64,
    pub afpacket_pps: f64,
    pub ratio: f64,
}

#[derive(Clone, Debug, Serialize)]
pub struct Spread {
    pub median: f64,
    pub min: f64,
    pub max: f64,
}

impl Spread {
    pub fn of(v: &[f64]) -> Self {
        let mut s = v.to_vec();
        s.sort_by(|a, b| a.total_cmp(b));
        let n = s.len();
        let median = if n % 2 == 1 {
            s[n / 2]
        } else {
            (s[n / 2 - 1] + s[n / 2]) / 2.0
        };
        Spread {
            median,
            min: s[0],
            max: s[n - 1],
        }
    }
}

impl RateCheck {
    /// Why the worst second missed, when it missed by more than 1%.
    pub fn worst_second_note(&self) -> &'static str {
        match self.worst_second_at_full_speed {
            _ if self.worst_second_error_percent <= 1.0 => "",
            Some(true) => " (at full speed all that second: the machine's limit)",
            Some(false) => " (it held frames back in that second too: behind for part of it)",
            None => "",
        }
    }
}

#[derive(Clone, Debug, Serialize)]
pub struct RateCheck {
    pub fraction_of_max: f64,
    pub rate_pps: u64,
    /// What the generator built and handed to the interface per second:
    /// its pacing. Frames the peer's ring refused are offered all the same.
    pub offered_pps: f64,
    /// What the wire took of it per second.
    pub sent_pps: f64,
    /// (offered - rate) / rate over the run, percent.
    pub error_percent: f64,
    /// The largest |error| of a whole second, percent.
    pub worst_second_error_percent: f64,
    /// Whether the generator ran at full speed throughout that second
    /// (it never held a frame back for the schedule): a second short of
    /// the rate then is the machine's, not the pacing's.
    pub worst_second_at_full_speed: Option<bool>,
    pub per_second_offered_pps: Vec<f64>,
    pub per_second_sent_pps: Vec<f64>,
    pub warnings: Vec<String>,
}

/// Per whole second: frames offered (sent and refused) and frames sent.
#[derive(Default)]
struct PerSecond {
    offered: Vec<f64>,
    sent: Vec<f64>,
    held: Vec<Option<u64>>,
}

#[derive(Clone, Debug, Serialize)]
pub struct GenBenchReport {
    pub frame_sizes: String,
    pub seconds: f64,
    pub cpu: usize,
    pub runs: Vec<PairRun>,
    pub xdp_pps: Spread,
    pub afpacket_pps: Spread,
    pub ratio: Spread,
    /// Lowest received/sent over every run: 1.0 when the receiver counted
    /// every frame the generator sent.
    pub rate_control: Vec<RateCheck>,
    pub xdp_built_pps: Spread,
    /// XDP generator at full speed into the full receiver (sequence and
    /// latency tracking), the counting receiver (frames, bytes, stamped
    /// frames) and the frames-only one (the frame unread).
    pub receiver: ReceiverCheck,
    pub receiver_count: ReceiverCheck,
    pub receiver_frames: ReceiverCheck,
    /// What the drop sink took in the receivers' rounds (each receiver's
    /// `of_drop_sink` is against its own round's).
    pub receivers_drop_sink_pps: Spread,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tcp: Option<TcpCheck>,
}

#[derive(Clone, Debug, Serialize)]
pub struct ReceiverCheck {
    /// Frames the generator built per second, and those the wire took.
    pub built_pps: Spread,
    pub sent_pps: Spread,
    /// Frames the receiver counted over frames sent, lowest run.
    pub counted_ratio_min: f64,
    /// Each run's sent rate over the drop-only sink's in the same round:
    /// 1 when this receiver takes what a program that does nothing takes.
    pub of_drop_sink: Spread,
}

/// `connections` flows, 100 sources (port 2000) times destinations (port
/// 80), for UDP and TCP alike.
fn tcp_bench(b: &GenBench, connections: u32) -> Result<(GenBench, GenBench)> {
    let dsts = connections.div_ceil(100).max(1);
    let last =
        std::net::Ipv4Addr::from(u32::from(std::net::Ipv4Addr::new(198, 19, 0, 1)) + dsts - 1);
    let src = crate::flows::parse("-s", "198.18.10.1-198.18.10.100:2000", 2000)?;
    let dst = crate::flows::parse("-d", &format!("198.19.0.1-{last}:80"), 80)?;
    let mut udp = b.clone();
    udp.gen.frame.src = src.first;
    udp.gen.frame.dst = dst.first;
    (udp.gen.src, udp.gen.dst) = (src, dst);
    let mut tcp = udp.clone();
    tcp.gen.frame.l4 = crate::tcp::Proto::Tcp;
    tcp.gen.tcp = Some(crate::tcp::TcpRun::phase(crate::tcp::TcpPhase::Data, 1));
    Ok((udp, tcp))
}

/// Rounds of a UDP and a TCP run over the same flows, into the drop sink
/// (attached), the first of the pair alternating.
fn tcp_check(b: &GenBench, connections: u32, progress: &mut impl FnMut(&str)) -> Result<TcpCheck> {
    let (udp, tcp) = tcp_bench(b, connections)?;
    let (mut u, mut t) = (Vec::new(), Vec::new());
    for i in 0..b.repeat {
        let mut pair = [(&udp, &mut u), (&tcp, &mut t)];
        if i % 2 == 1 {
            pair.reverse();
        }
        for (bench, into) in pair {
            let (x, _, _) = one_run(bench, None, Mode::Xdp, None)?;
            into.push(built(&x));
        }
        progress(&format!(
            "tcp, round {}/{}: {connections} connections, TCP data built {:.3} Mpps, UDP {:.3} Mpps, {:.2}x",
            i + 1,
            b.repeat,
            t[i] / 1e6,
            u[i] / 1e6,
            t[i] / u[i]
        ));
    }
    let ratios: Vec<f64> = t.iter().zip(&u).map(|(t, u)| t / u).collect();
    Ok(TcpCheck {
        connections,
        udp_built_pps: Spread::of(&u),
        tcp_built_pps: Spread::of(&t),
        ratio: Spread::of(&ratios),
    })
}

/// One generator run inside the scratch namespace; the receiver counts.
fn one_run(
    b: &GenBench,
    receiver: Option<(&Receiver, ReceiverMode)>,
    mode: Mode,
    rate: Option<u64>,
) -> Result<(GenReport, f64, PerSecond)> {
    let mut opts = b.gen.clone();
    opts.mode = mode;
    opts.rate_pps = rate;
    opts.duration = Some(Duration::from_secs_f64(b.seconds));
    opts.count = None;
    let before = receiver.map(|(r, _)| r.total()).transpose()?;
    let netns = b.netns.clone();
    let (report, seconds) = std::thread::spawn(move || -> Result<(GenReport, PerSecond)> {
        linerate_host::netns::enter_for_good(&netns)?;
        let g = Generator::new(&opts)?;
        let mut per_second = PerSecond::default();
        let r = g.run(&opts, &AtomicBool::new(false), |iv| {
            // Whole seconds only: the last interval may be a fraction.
            if iv.usec >= 900_000 {
                let pps = |n: u64| n as f64 * 1e6 / iv.usec as f64;
                per_second.offered.push(pps(iv.packets + iv.refused));
                per_second.sent.push(pps(iv.packets));
                per_second.held.push(iv.held);
            }
        })?;
        Ok((r, per_second))
    })
    .join()
    .map_err(|_| anyhow!("generator thread panicked"))??;
    let ratio = match (receiver, before) {
        (Some((r, which)), Some(before)) if report.sent_packets > 0 => {
            std::thread::sleep(Duration::from_millis(100));
            let now = r.total()?;
            // The frames-only receiver cannot tell the generator's frames
            // from others; in the scratch namespace there are no others.
            let counted = if which == ReceiverMode::Frames {
                now.packets - before.packets
            } else {
                now.stamped - before.stamped
            };
            counted as f64 / report.sent_packets as f64
        }
        _ => f64::NAN,
    };
    Ok((report, ratio, seconds))
}

/// The drop-only sink on the receiving end; detached when dropped.
fn attach_sink(b: &GenBench) -> Result<(libbpf_rs::Object, XdpAttachment)> {
    let obj = loader::load(objects::SINK, "sink")?;
    let link = {
        let _in = NetnsGuard::enter(&b.netns)?;
        XdpAttachment::attach(&loader::prog(&obj, "lab_sink")?, &b.rx, XdpMode::Native)?
    };
    Ok((obj, link))
}

pub fn run(b: &GenBench, mut progress: impl FnMut(&str)) -> Result<GenBenchReport> {
    let sink = attach_sink(b)?;
    let tcp = b
        .tcp_connections
        .map(|n| tcp_check(b, n, &mut progress))
        .transpose()?;
    let mut runs = Vec::new();
    for i in 0..b.repeat {
        let (x, _, _) = one_run(b, None, Mode::Xdp, None)?;
        let (a, _, _) = one_run(b, None, Mode::Afpacket, None)?;
        progress(&format!(
            "run {}/{}: xdp {:.3} Mpps (built {:.3}), afpacket {:.3} Mpps, ratio {:.2}",
            i + 1,
            b.repeat,
            x.pps / 1e6,
            built(&x) / 1e6,
            a.pps / 1e6,
            x.pps / a.pps
        ));
        runs.push(PairRun {
            xdp_pps: x.pps,
            xdp_built_pps: built(&x),
            afpacket_pps: a.pps,
            ratio: x.pps / a.pps,
        });
    }
    let col = |f: fn(&PairRun) -> f64| runs.iter().map(f).collect::<Vec<f64>>();
    let xdp_pps = Spread::of(&col(|r| r.xdp_pps));
    let mut rate_control = Vec::new();
    for &f in &b.rate_fractions {
        let rate = (xdp_pps.median * f).round() as u64;
        let (r, _, per_second) = one_run(b, None, Mode::Xdp, Some(rate))?;
        let err = |pps: f64| 100.0 * (pps - rate as f64) / rate as f64;
        let offered = (r.sent_packets + r.xmit_errors) as f64 / r.seconds;
        let check = RateCheck {
            fraction_of_max: f,
            rate_pps: rate,
            offered_pps: offered,
            sent_pps: r.pps,
            error_percent: err(offered),
            worst_second_error_percent: per_second
                .offered
                .iter()
                .map(|&p| err(p).abs())
                .fold(0.0, f64::max),
            worst_second_at_full_speed: per_second
                .offered
                .iter()
                .zip(&per_second.held)
                .max_by(|a, b| err(*a.0).abs().total_cmp(&err(*b.0).abs()))
                .and_then(|(_, h)| h.map(|h| h == 0)),
            per_second_offered_pps: per_second.offered,
            per_second_sent_pps: per_second.sent,
            warnings: r.warnings,
        };
        progress(&format!(
            "-R {rate} ({:.0}% of max): offered {:.0} pps, error {:+.3}%, worst second {:.3}%{}; the sink took {:.0} pps",
            f * 100.0,
            check.offered_pps,
            check.error_percent,
            check.worst_second_error_percent,
            check.worst_second_note(),
            check.sent_pps
        ));
        rate_control.push(check);
    }
    drop(sink);
    // The receivers against the drop sink, in rounds: each round sends
    // into the drop sink and into each receiver, so that every ratio is
    // taken within seconds of its baseline, in the same machine state. The
    // order rotates from round to round: none always follows the same one.
    const RECEIVERS: [ReceiverMode; 3] = [
        ReceiverMode::Full,
        ReceiverMode::Count,
        ReceiverMode::Frames,
    ];
    let mut drop_sink_sent = Vec::new();
    // runs[receiver][round]: the generator's report, the counted ratio.
    let mut runs_by_receiver: [Vec<(GenReport, f64)>; 3] = Default::default();
    for i in 0..b.repeat {
        // Slot 3 is the drop sink.
        let mut round: [Option<(GenReport, f64)>; 4] = Default::default();
        for j in 0..4 {
            let k = (i + j) % 4;
            let run = if k == 3 {
                let _sink = attach_sink(b)?;
                let (x, _, _) = one_run(b, None, Mode::Xdp, None)?;
                (x, f64::NAN)
            } else {
                let which = RECEIVERS[k];
                let receiver = Receiver::attach_as(which, &b.rx, Some(&b.netns), XdpMode::Native)?;
                let (x, counted, _) = one_run(b, Some((&receiver, which)), Mode::Xdp, None)?;
                (x, counted)
            };
            round[k] = Some(run);
        }
        let [full, count, frames, sink] = round.map(|r| r.expect("every slot runs"));
        let base = sink.0.pps;
        for (k, (x, counted)) in [full, count, frames].into_iter().enumerate() {
            progress(&format!(
                "receivers, round {}/{}: {}: generator built {:.3} Mpps, sent {:.3} Mpps ({:.2}x the drop sink's {:.3} this round), receiver counted {:.4} of them",
                i + 1,
                b.repeat,
                RECEIVERS[k].label(),
                built(&x) / 1e6,
                x.pps / 1e6,
                x.pps / base,
                base / 1e6,
                counted
            ));
            runs_by_receiver[k].push((x, counted));
        }
        drop_sink_sent.push(base);
    }
    let [receiver, receiver_count, receiver_frames] = runs_by_receiver.map(|runs| {
        let of = |f: &dyn Fn(&(GenReport, f64)) -> f64| runs.iter().map(f).collect::<Vec<f64>>();
        let of_drop_sink: Vec<f64> = runs
            .iter()
            .zip(&drop_sink_sent)
            .map(|((x, _), base)| x.pps / base)
            .collect();
        ReceiverCheck {
            built_pps: Spread::of(&of(&|(x, _)| built(x))),
            sent_pps: Spread::of(&of(&|(x, _)| x.pps)),
            counted_ratio_min: of(&|(_, c)| *c).into_iter().fold(f64::INFINITY, f64::min),
            of_drop_sink: Spread::of(&of_drop_sink),
        }
    });
    let receivers_drop_sink_pps = Spread::of(&drop_sink_sent);
    Ok(GenBenchReport {
        frame_sizes: b.gen.frame.sizes.name.clone(),
        seconds: b.seconds,
        cpu: b.gen.cpus[0],
        afpacket_pps: Spread::of(&col(|r| r.afpacket_pps)),
        ratio: Spread::of(&col(|r| r.ratio)),
        xdp_pps,
        xdp_built_pps: Spread::of(&col(|r| r.xdp_built_pps)),
        runs,
        rate_control,
        receiver,
        receiver_count,
        receiver_frames,
        receivers_drop_sink_pps,
        tcp,
    })
}

/// Frames per second the generator built and offered, sent or refused.
fn built(r: &GenReport) -> f64 {
    (r.sent_packets + r.xmit_errors) as f64 / r.seconds
}

impl GenBenchReport {
    /// What `linerate bench gen` prints of it (`repeat` runs each).
    pub fn summary(&self, repeat: usize) -> String {
        use std::fmt::Write;
        let r = self;
        let mut out = format!(
            "\ngenerator on CPU {}, -l {}, {} s per run, {} runs each, into a drop-only sink (median [min..max]):\n",
            r.cpu, r.frame_sizes, r.seconds, repeat
        );
        let mut show = |name: &str, s: &Spread, unit: f64, suffix: &str| {
            let _ = writeln!(
                out,
                "  {name:<10} {:>8.3}{suffix} [{:.3}..{:.3}]",
                s.median / unit,
                s.min / unit,
                s.max / unit
            );
        };
        show("xdp", &r.xdp_pps, 1e6, " Mpps");
        show("afpacket", &r.afpacket_pps, 1e6, " Mpps");
        show("xdp/afp", &r.ratio, 1.0, "x   ");
        for c in &r.rate_control {
            let _ = writeln!(
                out,
                "  -R {:>9} ({:>3.0}% of max): offered {:>11.0} pps, error {:+.3}% over the run, {:.3}% worst second{}; the sink took {:.0} pps",
                c.rate_pps,
                c.fraction_of_max * 100.0,
                c.offered_pps,
                c.error_percent,
                c.worst_second_error_percent,
                c.worst_second_note(),
                c.sent_pps
            );
        }
        let _ = writeln!(
            out,
            "  into the drop-only sink the generator built {:.3} Mpps, the wire took {:.3} Mpps (the veth refused the rest)",
            r.xdp_built_pps.median / 1e6,
            r.xdp_pps.median / 1e6
        );
        let _ = writeln!(
            out,
            "  receivers, each round against the drop-only sink (it took {:.3} Mpps [{:.3}..{:.3}] in these rounds):",
            r.receivers_drop_sink_pps.median / 1e6,
            r.receivers_drop_sink_pps.min / 1e6,
            r.receivers_drop_sink_pps.max / 1e6
        );
        if let Some(t) = &r.tcp {
            let _ = writeln!(
                out,
                "  TCP data segments over {} connections: built {:.3} Mpps [{:.3}..{:.3}], {:.2}x [{:.2}..{:.2}] UDP datagrams over the same flows ({:.3} Mpps)",
                t.connections,
                t.tcp_built_pps.median / 1e6,
                t.tcp_built_pps.min / 1e6,
                t.tcp_built_pps.max / 1e6,
                t.ratio.median,
                t.ratio.min,
                t.ratio.max,
                t.udp_built_pps.median / 1e6
            );
        }
        for (name, rc) in [
            ("--receiver full", &r.receiver),
            ("--receiver count", &r.receiver_count),
            ("--receiver frames", &r.receiver_frames),
        ] {
            let _ = writeln!(
                out,
                "    {name:<18} generator built {:.3} Mpps, the wire took {:.3} Mpps, {:.2}x the drop sink's [{:.2}..{:.2}], the receiver counted {:.4} of those (lowest run)",
                rc.built_pps.median / 1e6,
                rc.sent_pps.median / 1e6,
                rc.of_drop_sink.median,
                rc.of_drop_sink.min,
                rc.of_drop_sink.max,
                rc.counted_ratio_min
            );
        }
        out
    }
}
