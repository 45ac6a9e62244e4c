//! The XDP count-and-drop receiver, with per-stream sequence tracking and
//! one-way latency from the generator's stamps.
use crate::latency::{self, Latency};
use anyhow::Result;
use linerate_bpf::layout::{
    RecvCounters, RecvLatency, RecvStream, RecvWatch, RECV_STREAMS, RECV_WATCH,
};
use linerate_bpf::loader::{self, XdpAttachment, XdpMode};
use linerate_bpf::{maps, objects};
use linerate_host::netns::NetnsGuard;
use serde::{Deserialize, Serialize};

/// The receiver's programs, from the most work per frame to the least.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ReceiverMode {
    /// Loss, duplicates, reordering per stream, and latency.
    Full,
    /// Frames, bytes and stamped frames: what throughput runs need, at a
    /// quarter of the full receiver's per-frame cost.
    #[default]
    Count,
    /// Frames and bytes, the frame never read (pkt-gen's receiver): what
    /// a program that does nothing takes; counts whatever arrives.
    Frames,
    /// Counts as `count` does, and sends each UDP frame back, its
    /// addresses and ports swapped, and answers TCP segments as the
    /// connection's peer would (SYN|ACK to a SYN, FIN|ACK to a FIN, an
    /// ACK for a connection's first data and at every MiB of it): the
    /// answers a stateful firewall must see before it holds a flow
    /// established (the lab's `establish`), and that keep TCP data in
    /// the window a conntrack checking windows allows.
    Answer,
}

impl ReceiverMode {
    /// Each receiver by the name commands, scenarios and reports give it.
    pub const CHOICES: &'static [(&'static str, ReceiverMode)] = &[
        ("full", ReceiverMode::Full),
        ("count", ReceiverMode::Count),
        ("frames", ReceiverMode::Frames),
        ("answer", ReceiverMode::Answer),
    ];

    /// How reports and the command line name it.
    pub fn label(self) -> &'static str {
        match self {
            ReceiverMode::Full => "full",
            ReceiverMode::Count => "count",
            ReceiverMode::Frames => "frames",
            ReceiverMode::Answer => "answer",
        }
    }

    /// Its program in bpf/lab/recv.bpf.c.
    pub fn program(self) -> &'static str {
        match self {
            ReceiverMode::Full => "lab_recv",
            ReceiverMode::Count => "lab_recv_count",
            ReceiverMode::Frames => "lab_recv_frames",
            ReceiverMode::Answer => "lab_recv_answer",
        }
    }
}

/// `lab_recv` attached to one interface; detached when dropped.
pub struct Receiver {
    _attachment: Option<XdpAttachment>,
    obj: libbpf_rs::Object,
}

impl Receiver {
    /// Attaches to `ifname`, in namespace `netns` if given.
    pub fn attach(ifname: &str, netns: Option<&str>, mode: XdpMode) -> Result<Self> {
        Self::attach_as(ReceiverMode::Full, ifname, netns, mode)
    }

    /// Attaches the receiver program `which`.
    pub fn attach_as(
        which: ReceiverMode,
        ifname: &str,
        netns: Option<&str>,
        mode: XdpMode,
    ) -> Result<Self> {
        Self::attach_program(which.program(), ifname, netns, mode, &[])
    }

    /// Like [`Receiver::attach`], and also tells apart stamped frames sent
    /// to each of `macs` (at most 4): which next hop the DUT chose, and
    /// when the generator sent them (see [`Receiver::watched`]).
    pub fn attach_watching(
        ifname: &str,
        netns: Option<&str>,
        mode: XdpMode,
        macs: &[[u8; 6]],
    ) -> Result<Self> {
        if macs.len() > RECV_WATCH as usize {
            anyhow::bail!("the receiver watches at most {RECV_WATCH} MACs");
        }
        Self::attach_program("lab_recv_watch", ifname, netns, mode, macs)
    }

    fn attach_program(
        prog: &str,
        ifname: &str,
        netns: Option<&str>,
        mode: XdpMode,
        macs: &[[u8; 6]],
    ) -> Result<Self> {
        let obj = loader::load(objects::RECV, "receiver")?;
        let n = libbpf_rs::num_possible_cpus()?;
        for (i, mac) in macs.iter().enumerate() {
            let w = RecvWatch {
                mac: *mac,
                ..Default::default()
            };
            maps::write_percpu_each(&loader::map(&obj, "recv_watch")?, i as u32, &vec![w; n])?;
        }
        let attachment = {
            let _in = netns.map(NetnsGuard::enter).transpose()?;
            let single = loader::prog(&obj, prog)?;
            let multi = loader::prog(&obj, &format!("{prog}_mb"))?;
            XdpAttachment::attach_sized(&single, &multi, ifname, mode)?.0
        };
        Ok(Receiver {
            _attachment: Some(attachment),
            obj,
        })
    }

    /// The receiver program, loaded but not attached: frames reach it with
    /// [`Receiver::run_frame`] (tests, benchmarks).
    pub fn detached() -> Result<Self> {
        Ok(Receiver {
            _attachment: None,
            obj: loader::load(objects::RECV, "receiver")?,
        })
    }

    /// Runs the program once on `frame` (BPF_PROG_RUN, on this CPU).
    pub fn run_frame(&self, frame: &[u8]) -> Result<()> {
        self.run_frame_repeat(frame, 1).map(|_| ())
    }

    /// Runs the program `repeat` times on `frame`; the kernel's mean
    /// nanoseconds per run.
    pub fn run_frame_repeat(&self, frame: &[u8], repeat: u32) -> Result<u32> {
        self.run_program(ReceiverMode::Full, frame, repeat)
    }

    /// Runs one of the receiver's programs `repeat` times on `frame`; the
    /// kernel's mean nanoseconds per run.
    pub fn run_program(&self, which: ReceiverMode, frame: &[u8], repeat: u32) -> Result<u32> {
        Ok(self.run_xdp(which, frame, repeat)?.0.duration_ns)
    }

    /// Runs one of the receiver's programs once on `frame`: its verdict
    /// and the frame as it left the program.
    pub fn run_program_out(
        &self,
        which: ReceiverMode,
        frame: &[u8],
    ) -> Result<(linerate_bpf::test_run::XdpAction, Vec<u8>)> {
        let (r, out) = self.run_xdp(which, frame, 1)?;
        Ok((r.verdict, out))
    }

    fn run_xdp(
        &self,
        which: ReceiverMode,
        frame: &[u8],
        repeat: u32,
    ) -> Result<(linerate_bpf::test_run::XdpRun, Vec<u8>)> {
        use std::os::fd::AsFd;
        let prog = loader::prog(&self.obj, which.program())?;
        let mut out = vec![0u8; frame.len()];
        let r = linerate_bpf::test_run::run_xdp(prog.as_fd(), frame, &mut out, repeat)?;
        out.truncate(r.len);
        Ok((r, out))
    }

    /// Counters per CPU.
    pub fn per_cpu(&self) -> Result<Vec<RecvCounters>> {
        maps::read_percpu(&loader::map(&self.obj, "recv_counters")?, 0)
    }

    /// Counters summed over CPUs.
    pub fn total(&self) -> Result<RecvCounters> {
        Ok(self
            .per_cpu()?
            .iter()
            .fold(RecvCounters::default(), |a, c| RecvCounters {
                packets: a.packets + c.packets,
                bytes: a.bytes + c.bytes,
                stamped: a.stamped + c.stamped,
                bad_stream: a.bad_stream + c.bad_stream,
            }))
    }

    /// Sequence statistics of every stream seen so far.
    pub fn streams(&self) -> Result<Vec<StreamStats>> {
        let map = loader::map(&self.obj, "recv_streams")?;
        let mut out = Vec::new();
        for id in 0..RECV_STREAMS {
            let per_cpu: Vec<RecvStream> = maps::read_percpu(&map, id)?;
            if let Some(s) = StreamStats::merge(id, &per_cpu) {
                out.push(s);
            }
        }
        Ok(out)
    }

    /// Per watched MAC (in the order given): stamped frames and the span of
    /// their transmit stamps since the last call, which starts a new
    /// window (the counts restart from zero).
    pub fn watched(&self, macs: usize) -> Result<Vec<Watched>> {
        let map = loader::map(&self.obj, "recv_watch")?;
        let mut out = Vec::new();
        for i in 0..macs.min(RECV_WATCH as usize) {
            let per_cpu: Vec<RecvWatch> = maps::read_percpu(&map, i as u32)?;
            let mut w = Watched::default();
            for c in per_cpu.iter().filter(|c| c.packets > 0) {
                if w.packets == 0 || (c.first_tx.wrapping_sub(w.first_tx) as i32) < 0 {
                    w.first_tx = c.first_tx;
                }
                if w.packets == 0 || (c.last_tx.wrapping_sub(w.last_tx) as i32) > 0 {
                    w.last_tx = c.last_tx;
                }
                w.packets += c.packets;
            }
            let mac = per_cpu.first().map(|c| c.mac).unwrap_or_default();
            let fresh = RecvWatch {
                mac,
                ..Default::default()
            };
            maps::write_percpu_each(&map, i as u32, &vec![fresh; per_cpu.len()])?;
            out.push(w);
        }
        Ok(out)
    }

    /// One-way latency over all stamped frames so far.
    pub fn latency(&self) -> Result<Latency> {
        let per_cpu: Vec<RecvLatency> =
            maps::read_percpu(&loader::map(&self.obj, "recv_latency")?, 0)?;
        Ok(latency::summarize(&latency::merge(&per_cpu)))
    }
}

/// Frames the receiver saw for one watched MAC in a window. The stamps are
/// the low 32 bits of the generator's CLOCK_MONOTONIC nanoseconds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Watched {
    pub packets: u64,
    pub first_tx: u32,
    pub last_tx: u32,
}

/// Loss, duplication and reordering of one stream (one generator CPU).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct StreamStats {
    pub stream: u32,
    pub received: u64,
    /// Sequence numbers between the lowest and the highest seen that never
    /// arrived (frames lost after the last one received are not seen here:
    /// compare with the generator's count for those).
    pub lost: u64,
    pub duplicated: u64,
    /// Arrived after a higher sequence number (RFC 4737).
    pub reordered: u64,
    /// Of the reordered, those too far back to check for duplicates.
    pub late: u64,
    pub first_seq: u32,
    pub last_seq: u32,
}

impl StreamStats {
    /// Merges the per-CPU states of stream `id`; `None` if never seen.
    /// Across CPUs the span is taken modulo 2^32.
    pub fn merge(id: u32, per_cpu: &[RecvStream]) -> Option<Self> {
        let seen: Vec<&RecvStream> = per_cpu.iter().filter(|s| s.seen != 0).collect();
        let first = seen.first()?;
        let before = |a: u32, b: u32| (a.wrapping_sub(b) as i32) < 0;
        let (mut lo, mut hi) = (first.first, first.max);
        for s in &seen[1..] {
            if before(s.first, lo) {
                lo = s.first;
            }
            if before(hi, s.max) {
                hi = s.max;
            }
        }
        let span = if seen.len() == 1 {
            first.span
        } else {
            hi.wrapping_sub(lo) as u64 + 1
        };
        let sum = |f: fn(&RecvStream) -> u64| seen.iter().map(|s| f(s)).sum::<u64>();
        let received = sum(|s| s.received);
        let duplicated = sum(|s| s.duplicated);
        Some(StreamStats {
            stream: id,
            received,
            lost: span.saturating_sub(received - duplicated),
            duplicated,
            reordered: sum(|s| s.reordered),
            late: sum(|s| s.late),
            first_seq: lo,
            last_seq: hi,
        })
    }
}

/// Totals over streams.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SequenceTotals {
    pub lost: u64,
    pub duplicated: u64,
    pub reordered: u64,
    pub late: u64,
}

pub fn totals(streams: &[StreamStats]) -> SequenceTotals {
    streams
        .iter()
        .fold(SequenceTotals::default(), |a, s| SequenceTotals {
            lost: a.lost + s.lost,
            duplicated: a.duplicated + s.duplicated,
            reordered: a.reordered + s.reordered,
            late: a.late + s.late,
        })
}

/// What a receiver counted over one interval.
#[derive(Clone, Copy, Debug)]
pub struct Tick {
    pub delta: RecvCounters,
    pub usec: u64,
}

/// Turns a receiver's running counters into per-second deltas.
pub struct Ticker {
    last: RecvCounters,
    since: std::time::Instant,
}

impl Ticker {
    pub fn new(r: &Receiver) -> Result<Self> {
        Ok(Ticker {
            last: r.total()?,
            since: std::time::Instant::now(),
        })
    }

    /// Once a second has passed since the last tick: the counts since then.
    pub fn poll(&mut self, r: &Receiver) -> Result<Option<Tick>> {
        if self.since.elapsed() < std::time::Duration::from_secs(1) {
            return Ok(None);
        }
        let now = r.total()?;
        let usec = self.since.elapsed().as_micros() as u64;
        self.since = std::time::Instant::now();
        let delta = RecvCounters {
            packets: now.packets - self.last.packets,
            bytes: now.bytes - self.last.bytes,
            stamped: now.stamped - self.last.stamped,
            bad_stream: now.bad_stream - self.last.bad_stream,
        };
        self.last = now;
        Ok(Some(Tick { delta, usec }))
    }
}

/// `linerate recv`'s count on `r`, a receiver of `mode`: a line a second
/// (pkt-gen's) until `stop` or `seconds`, then the totals, as text or
/// (`json`) JSON, on stdout.
pub fn count(
    r: &Receiver,
    mode: ReceiverMode,
    seconds: Option<f64>,
    json: bool,
    stop: &std::sync::atomic::AtomicBool,
) -> anyhow::Result<()> {
    use crate::latency;
    use crate::units::rate_line;
    use std::sync::atomic::Ordering;
    use std::time::{Duration, Instant};
    let start = Instant::now();
    let mut ticker = Ticker::new(r)?;
    let end = seconds.map(Duration::from_secs_f64);
    while !stop.load(Ordering::Relaxed) && end.is_none_or(|e| start.elapsed() < e) {
        std::thread::sleep(Duration::from_millis(20));
        if let Some(t) = ticker.poll(r)? {
            if !json {
                println!("{}", rate_line(t.delta.packets, t.delta.bytes, t.usec));
            }
        }
    }
    let t = r.total()?;
    let secs = start.elapsed().as_secs_f64();
    // Only the full receiver tracks sequences and latency; the others
    // report them as absent, not as zero.
    let full = mode == ReceiverMode::Full;
    let streams = r.streams()?;
    let seq = totals(&streams);
    let lat = r.latency()?;
    if json {
        let (seq, lat, streams) = if full {
            (Some(seq), Some(lat), Some(streams))
        } else {
            (None, None, None)
        };
        println!(
            "{}",
            serde_json::to_string_pretty(&serde_json::json!({
                "receiver": mode.label(),
                "received_packets": t.packets, "received_bytes": t.bytes,
                "stamped_packets": (mode != ReceiverMode::Frames).then_some(t.stamped),
                "unknown_stream_packets": full.then_some(t.bad_stream),
                "seconds": secs, "pps": t.packets as f64 / secs, "bps": t.bytes as f64 * 8.0 / secs,
                "lost": seq.as_ref().map(|s| s.lost),
                "reordered": seq.as_ref().map(|s| s.reordered),
                "duplicated": seq.as_ref().map(|s| s.duplicated),
                "late": seq.as_ref().map(|s| s.late), "latency_ns": lat, "streams": streams,
            }))?
        );
        return Ok(());
    }
    println!(
        "Received {} packets {} bytes in {:.3} seconds: {}",
        t.packets,
        t.bytes,
        secs,
        rate_line(t.packets, t.bytes, (secs * 1e6) as u64)
    );
    match mode {
        ReceiverMode::Frames => {
            println!("frames counted unread (--receiver frames): no stamps, loss or latency")
        }
        ReceiverMode::Count => println!(
            "stamped {} (--receiver count: no loss or latency)",
            t.stamped
        ),
        ReceiverMode::Answer => println!(
            "stamped {} (--receiver answer: each UDP frame sent back, addresses and ports swapped)",
            t.stamped
        ),
        ReceiverMode::Full => println!(
            "stamped {} in {} stream{}: lost {} duplicated {} reordered {} (late {})",
            t.stamped,
            streams.len(),
            if streams.len() == 1 { "" } else { "s" },
            seq.lost,
            seq.duplicated,
            seq.reordered,
            seq.late
        ),
    }
    if lat.count > 0 {
        println!(
            "latency ns: min {} mean {:.0} p50 {:.0} p99 {:.0} max {}",
            lat.min, lat.mean, lat.p50, lat.p99, lat.max
        );
        print!("{}", latency::render(&lat));
    }
    Ok(())
}
