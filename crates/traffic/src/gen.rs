//! The generator: one sending thread per CPU of `-p`, each either running
//! `lab_gen` with `BPF_PROG_RUN` and `BPF_F_TEST_XDP_LIVE_FRAMES` (XDP mode)
//! or sending frames built in user space through an AF_PACKET socket. The
//! calling thread must be in the namespace of the interface (the senders
//! inherit it) and watches the clock, the count, Ctrl-C and the per-second
//! lines.
use crate::afpacket::{PacketSocket, BATCH};
use crate::flows::Endpoints;
use crate::frame::FrameSpec;
use crate::synth;
use crate::tcp::{Proto, TcpRun};
use anyhow::{anyhow, bail, Result};
use linerate_bpf::layout::{GenConfig, GenState};
use linerate_bpf::{loader, maps, objects, test_run};
use serde::{Deserialize, Serialize};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    /// XDP live frames (BPF_PROG_RUN): the fast one.
    Xdp,
    /// AF_PACKET sendmmsg: for interfaces without XDP.
    Afpacket,
}

impl Mode {
    /// Each mode by the name commands and reports give it.
    pub const CHOICES: &'static [(&'static str, Mode)] =
        &[("xdp", Mode::Xdp), ("afpacket", Mode::Afpacket)];
}

/// Why [`GenOptions`] are refused: the field and the reason.
pub type GenOptionsError = linerate_host::field::FieldError;

#[derive(Clone, Debug)]
pub struct GenOptions {
    pub ifname: String,
    pub frame: FrameSpec,
    pub src: Endpoints,
    pub dst: Endpoints,
    /// Stop after this long (`-t`).
    pub duration: Option<Duration>,
    /// Stop after this many frames (`-n`).
    pub count: Option<u64>,
    /// Frames per kernel batch (live frames' batch_size, at most 256).
    pub batch_size: u32,
    /// Stream id of this generator's frames (stream = base + CPU).
    pub stream_base: u16,
    /// Total offered rate in frames per second (`-R`), shared by threads.
    pub rate_pps: Option<u64>,
    /// Send from these CPUs (`-p`, `--cpu`), pinned: pacing, counts and
    /// sequence numbers are per CPU. At least one.
    pub cpus: Vec<usize>,
    pub mode: Mode,
    /// Each frame's destination address and port drawn at random from
    /// `dst` (pkt-gen's -Z), to spread lookups over a large table or make
    /// every frame a new flow. XDP mode only.
    pub random_dst: bool,
    /// The same for the source (pkt-gen's -z).
    pub random_src: bool,
    /// TCP frames (`frame.l4`): which segment of each connection, and
    /// where its data starts (crate::tcp).
    pub tcp: Option<TcpRun>,
    /// Other traffic interleaved with this frame by frame (crate::mix):
    /// each round of the mix, `weight` frames of this and each part's
    /// weight of it. Empty: this traffic alone.
    pub mix: Vec<crate::mix::GenPart>,
    pub weight: u32,
}

impl GenOptions {
    /// Refuses options no generator can run: the field of these options
    /// and why (a command line says it as its flag).
    /// [`GenOptions::check`], a refusal said as the flag of `linerate gen`
    /// that sets the field.
    pub fn check_flags(&self) -> anyhow::Result<()> {
        self.check().map_err(|e| {
            let flag = match e.field {
                "src" | "dst" => "-s and -d",
                "cpus" => "--cpu",
                "rate_pps" => "-R",
                "frame" => "-l",
                "random_dst" => "-Z",
                "random_src" => "-z",
                "batch_size" => "--batch",
                "tcp" => "--tcp",
                _ => e.field,
            };
            anyhow::anyhow!("{flag}: {}", e.reason)
        })
    }

    pub fn check(&self) -> std::result::Result<(), GenOptionsError> {
        let fail = |field, reason: String| Err(GenOptionsError { field, reason });
        if self.src.is_ipv6() != self.dst.is_ipv6() {
            return fail("dst", "not of the source's address family".into());
        }
        if self.cpus.is_empty() {
            return fail("cpus", "the generator needs at least one CPU".into());
        }
        if self.rate_pps == Some(0) {
            return fail("rate_pps", "the rate must be at least 1 pps".into());
        }
        let len = self.frame.sizes.max_frame_len();
        if self.mode == Mode::Xdp && len > crate::sizes::MAX_LIVE_FRAME {
            return fail(
                "frame",
                format!(
                    "{len}-byte frames are larger than XDP live frames take ({} bytes, one page): use the AF_PACKET mode",
                    crate::sizes::MAX_LIVE_FRAME
                ),
            );
        }
        if self.random_dst && self.mode == Mode::Afpacket {
            return fail("random_dst", "random destinations need the XDP mode".into());
        }
        if self.random_src && self.mode == Mode::Afpacket {
            return fail("random_src", "random sources need the XDP mode".into());
        }
        if self.frame.l4 == Proto::Tcp {
            match self.tcp {
                None => {
                    return fail(
                        "tcp",
                        "TCP frames need a phase (syn, data, fin, last-ack, churn)".into(),
                    )
                }
                Some(t) if t.phase == crate::tcp::TcpPhase::Churn && t.segments == 0 => {
                    return fail(
                        "tcp",
                        "churned connections send one data segment at least (the handshake's last ACK)".into(),
                    )
                }
                _ => {}
            }
            if self.mode == Mode::Afpacket {
                return fail("tcp", "TCP connections need the XDP mode".into());
            }
            if self.random_dst || self.random_src {
                return fail(
                    if self.random_dst {
                        "random_dst"
                    } else {
                        "random_src"
                    },
                    "TCP connections are a fixed set of flows: no random addresses".into(),
                );
            }
            if crate::tcp::port_shares(0, self.src.port_count(), self.threads()).is_none() {
                return fail(
                    "src",
                    format!(
                        "{} source ports for {} sending CPUs: TCP needs one port a CPU at least (a connection is sent by one CPU)",
                        self.src.port_count(),
                        self.threads()
                    ),
                );
            }
        } else if self.tcp.is_some() {
            return fail("tcp", "a TCP phase for UDP frames".into());
        }
        if let Err(reason) = self.check_mix() {
            return fail("mix", reason);
        }
        if !(1..=256).contains(&self.batch_size) {
            return fail(
                "batch_size",
                format!("must be 1..256, got {}", self.batch_size),
            );
        }
        Ok(())
    }

    /// Whether every frame carries the stamp: long enough, and for TCP
    /// data segments only (a SYN, FIN or bare ACK has no payload).
    pub fn every_frame_stamped(&self) -> bool {
        self.parts()
            .iter()
            .all(|(p, _)| p.frame.stamped() && crate::tcp::data_only(p.tcp))
    }

    pub fn threads(&self) -> usize {
        self.cpus.len().max(1)
    }
}

/// One second (or the last part of one) of generation.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct Interval {
    /// Frames the interface transmitted (for a veth: its peer took them).
    pub packets: u64,
    pub bytes: u64,
    /// Frames built and handed to the interface that it could not
    /// transmit (a veth whose peer's ring was full).
    pub refused: u64,
    /// XDP mode: the program's runs that held a frame back for the `-R`
    /// schedule. None in a second, with the rate short, means the
    /// generator ran at full speed throughout: the machine gave less than
    /// `-R` then, not the pacing. None: not known (AF_PACKET mode).
    pub held: Option<u64>,
    pub usec: u64,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct GenReport {
    pub mode: Mode,
    /// Frames handed to the interface.
    pub sent_packets: u64,
    pub sent_bytes: u64,
    pub seconds: f64,
    pub pps: f64,
    /// Bits per second of frames without FCS (pkt-gen's bps).
    pub bps: f64,
    /// `-l` as given (`60`, `imix`, ...) and the mean frame length.
    pub frame_sizes: String,
    pub mean_frame_len: f64,
    pub threads: usize,
    /// `-R`, if given.
    pub rate_pps: Option<u64>,
    /// Frames built that the interface did not transmit (a veth whose
    /// peer's ring was full or has no XDP); not counted as sent.
    pub xmit_errors: u64,
    /// AF_PACKET: times the interface's queue was full; those frames were
    /// sent again once it drained (nothing lost).
    pub queue_full: u64,
    pub warnings: Vec<String>,
    /// TCP: where each connection's data starts in the next run (the
    /// data bytes it has sent, gaps included).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tcp_next: Option<u32>,
    /// A mix: frames each part built (the options' own first), and each
    /// other part's `tcp_next`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub part_frames: Vec<u64>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub mix_tcp_next: Vec<Option<u32>>,
}

/// Each BPF_PROG_RUN call costs milliseconds of set-up and tear-down (see
/// `run_live_frames`), so calls are sized to last about this long: long
/// enough to amortise that, short enough for the stop flag, the count and
/// the per-second lines.
const CALL_TARGET: Duration = Duration::from_millis(200);
const MIN_CHUNK: u64 = 1 << 12;
const MAX_CHUNK: u64 = 1 << 24;
/// Senders start this long before the run's window opens (the program
/// sends nothing before it): a sender's first calls are short and each
/// ends in an idle wait, which would otherwise leave the schedule behind
/// and make it catch up in a burst.
const WARMUP: Duration = Duration::from_millis(300);
/// XDP senders per CPU: each BPF_PROG_RUN call ends by waiting for an RCU
/// grace period with the CPU idle; a second sender on the same CPU sends
/// meanwhile.
const XDP_SENDERS_PER_CPU: usize = 2;
/// Offered rates this far below `-R` get a warning.
const RATE_TOLERANCE: f64 = 0.01;

/// The counters a run's intervals are differences of.
#[derive(Clone, Copy, Debug, Default)]
struct Totals {
    sent: u64,
    bytes: u64,
    refused: u64,
    held: u64,
}

/// Whole seconds whose offered rate fell more than RATE_TOLERANCE below
/// `-R`: with the generator at full speed throughout (it never held a
/// frame back), or with some held (ahead of the schedule in part of the
/// second, behind in another).
#[derive(Clone, Copy, Debug, Default)]
struct ShortSeconds {
    seconds: u32,
    at_full_speed: u32,
    while_holding: u32,
}

impl ShortSeconds {
    fn count(&mut self, iv: &Interval, rate: u64) {
        if iv.usec < 900_000 {
            return;
        }
        self.seconds += 1;
        let offered = (iv.packets + iv.refused) as f64 * 1e6 / iv.usec as f64;
        if offered >= rate as f64 * (1.0 - RATE_TOLERANCE) {
            return;
        }
        match iv.held {
            Some(0) => self.at_full_speed += 1,
            Some(_) => self.while_holding += 1,
            None => {}
        }
    }

    fn warning(&self) -> Option<String> {
        let short = self.at_full_speed + self.while_holding;
        (short > 0).then(|| {
            format!(
                "{short} of {} seconds more than {:.0}% below -R: {} at full speed throughout (the machine gave the generator less than -R then), {} with frames held back for the schedule in part of the second (behind in another part)",
                self.seconds,
                RATE_TOLERANCE * 100.0,
                self.at_full_speed,
                self.while_holding
            )
        })
    }
}

/// What each sending thread has sent so far (AF_PACKET mode; XDP mode
/// reads the program's own per-CPU counters).
#[derive(Default)]
struct SenderCounters {
    packets: AtomicU64,
    bytes: AtomicU64,
    refused: AtomicU64,
    last_ns: AtomicU64,
}

/// A configured generator, ready to run.
pub struct Generator {
    /// Each part's configuration (the options' own first; one without a
    /// mix), at its index in the program's maps.
    cfgs: Vec<GenConfig>,
    frame: Vec<u8>,
    /// XDP mode: the loaded program and maps.
    obj: Option<libbpf_rs::Object>,
}

impl Generator {
    /// Validates `opts`, builds the template and (XDP mode) loads the
    /// program.
    pub fn new(opts: &GenOptions) -> Result<Self> {
        opts.check()?;
        let parts = opts.parts();
        let weights_and_rates: Vec<(u32, Option<u64>)> =
            std::iter::once((opts.weight.max(1), None))
                .chain(opts.mix.iter().map(|p| (p.weight, p.rate_pps)))
                .collect();
        let rates = crate::mix::part_rates(&weights_and_rates, opts.rate_pps);
        // The runs start from the largest frame of any part (each run
        // shrinks its own).
        let mut frame = Vec::new();
        let mut cfgs = Vec::new();
        for (i, (p, _)) in parts.iter().enumerate() {
            let built = p.frame.build()?;
            if built.len() > frame.len() {
                frame = built;
            }
            // Each part its rate, shared by the CPUs.
            let per_thread = rates[i].map_or(0, |r| r.div_ceil(opts.threads() as u64));
            let stream_base = opts.stream_base + i as u16 * crate::mix::STREAMS_A_PART;
            let mut cfg = p
                .frame
                .gen_config(&p.src, &p.dst, stream_base, per_thread, p.tcp)?;
            if p.random_dst {
                cfg.flags |= linerate_bpf::layout::GEN_RANDOM_DST;
            }
            if p.random_src {
                cfg.flags |= linerate_bpf::layout::GEN_RANDOM_SRC;
            }
            cfg.clock_every = opts.batch_size;
            cfgs.push(cfg);
        }
        if parts.len() > 1 {
            let slots = crate::mix::slots(&parts.iter().map(|p| p.1).collect::<Vec<_>>());
            cfgs[0].mix_count = slots.len() as u32;
            // Where the most any part writes ends: its headers, and a
            // stamp or a SYN's options after them.
            let clear_to = parts
                .iter()
                .map(|(p, _)| p.frame.header_len() + linerate_bpf::layout::STAMP_LEN)
                .max()
                .unwrap_or(0) as u32;
            for cfg in &mut cfgs {
                cfg.clear_to = clear_to;
            }
            cfgs[0].mix[..slots.len()].copy_from_slice(&slots);
        }
        let obj = match opts.mode {
            Mode::Xdp => {
                let obj = loader::load(objects::GEN, "generator")?;
                let map = loader::map(&obj, "gen_config")?;
                for (i, cfg) in cfgs.iter().enumerate() {
                    maps::write(&map, i as u32, cfg)?;
                }
                Some(obj)
            }
            Mode::Afpacket => None,
        };
        Ok(Generator { cfgs, frame, obj })
    }

    fn xdp(&self) -> Result<&libbpf_rs::Object> {
        self.obj
            .as_ref()
            .ok_or_else(|| anyhow!("the generator is not in XDP mode"))
    }

    /// The XDP program's per-CPU state (of the options' own traffic).
    pub fn xdp_state(&self) -> Result<Vec<GenState>> {
        self.part_state(0)
    }

    /// The per-CPU state of a mix's part `i`.
    pub fn part_state(&self, i: usize) -> Result<Vec<GenState>> {
        maps::read_percpu(&loader::map(self.xdp()?, "gen_state")?, i as u32)
    }

    /// Every part's per-CPU state, the options' own first.
    fn all_states(&self) -> Result<Vec<Vec<GenState>>> {
        (0..self.cfgs.len()).map(|i| self.part_state(i)).collect()
    }

    /// Frames the XDP program has built so far, over all CPUs and parts.
    pub fn frames_built(&self) -> Result<u64> {
        Ok(self.all_states()?.iter().flatten().map(|s| s.seq).sum())
    }

    /// Runs the XDP program `n` times without sending (plain BPF_PROG_RUN)
    /// and returns the frames it built, in order: what the wire would carry.
    pub fn sample(&self, n: usize) -> Result<Vec<Vec<u8>>> {
        self.sample_from(&self.frame, n)
    }

    /// Like [`Generator::sample`], starting each run from `input_frame`
    /// (say, a frame a DUT has rewritten, as live-frame pages come back).
    pub fn sample_from(&self, input_frame: &[u8], n: usize) -> Result<Vec<Vec<u8>>> {
        let prog = loader::prog(self.xdp()?, "lab_gen")?;
        // The flow and sequence state is per CPU: a thread that moved
        // between runs would continue another CPU's sequence.
        linerate_host::cpu::on_this_cpu(|| {
            let mut frames = Vec::with_capacity(n);
            // Churn's first rounds send nothing of the connections they
            // reach back to (XDP_DROP): as many runs as the frames asked
            // for, and a round's worth for each, at most.
            let mut drops_left = n.saturating_mul(64).max(4096);
            while frames.len() < n {
                // Room for a frame larger than the input (a TCP SYN's
                // options).
                let mut out = vec![0u8; input_frame.len() + 64];
                let r = test_run::run_xdp(prog.as_fd(), input_frame, &mut out, 1)?;
                match r.verdict {
                    test_run::XdpAction::Tx => {
                        out.truncate(r.len);
                        frames.push(out);
                    }
                    test_run::XdpAction::Drop if drops_left > 0 => drops_left -= 1,
                    v => bail!("generator program returned {v:?} instead of XDP_TX"),
                }
            }
            Ok(frames)
        })
    }

    /// Sets the pacing epoch (CLOCK_MONOTONIC ns; [`Generator::run`] sets
    /// its own): for checking the pacing with [`Generator::probe`].
    pub fn pace_from(&self, start_ns: u64) -> Result<()> {
        let map = loader::map(self.xdp()?, "gen_config")?;
        for (i, cfg) in self.cfgs.iter().enumerate() {
            let mut cfg = *cfg;
            cfg.start_ns = start_ns;
            maps::write(&map, i as u32, &cfg)?;
        }
        Ok(())
    }

    /// Runs the XDP program `n` times without sending (plain BPF_PROG_RUN)
    /// and returns how many runs built a frame; the others held theirs
    /// (pacing) or were past the stop.
    pub fn probe(&self, n: usize) -> Result<usize> {
        let prog = loader::prog(self.xdp()?, "lab_gen")?;
        let mut out = vec![0u8; self.frame.len()];
        linerate_host::cpu::on_this_cpu(|| {
            let mut built = 0;
            for _ in 0..n {
                if test_run::run_xdp(prog.as_fd(), &self.frame, &mut out, 1)?.verdict
                    == test_run::XdpAction::Tx
                {
                    built += 1;
                }
            }
            Ok(built)
        })
    }

    /// The map configuration both modes build frames from (of the
    /// options' own traffic).
    pub fn config(&self) -> &GenConfig {
        &self.cfgs[0]
    }

    /// Sends until the duration, the count or `stop`; calls `on_interval`
    /// about once a second with what was sent in it.
    pub fn run(
        &self,
        opts: &GenOptions,
        stop: &AtomicBool,
        mut on_interval: impl FnMut(&Interval),
    ) -> Result<GenReport> {
        if opts.duration.is_none() && opts.count.is_none() {
            bail!("the generator needs -t seconds or -n count");
        }
        let ifindex = loader::ifindex(&opts.ifname)?;
        let mtu = loader::mtu(&opts.ifname)? as usize;
        if self.frame.len() > mtu + crate::sizes::ETH_LEN {
            bail!(
                "{}-byte frames carry {}-byte IP packets, more than {}'s MTU ({mtu}) takes",
                self.frame.len(),
                self.frame.len() - crate::sizes::ETH_LEN,
                opts.ifname
            );
        }
        let threads = opts.threads();
        let senders: Vec<SenderCounters> =
            (0..threads).map(|_| SenderCounters::default()).collect();
        let xdp = opts.mode == Mode::Xdp;
        // What the interface transmitted is what was sent: frames the
        // program built that the driver refused (a veth whose peer's ring
        // was full, or whose peer has no XDP) are xmit errors. The kernel's
        // own few frames (ND, MLD) are capped out by `built`.
        // (Over every port the parts leave by.)
        let ports = opts.ports();
        let tx_base = ports_tx(&ports)?;
        // A veth counts the XDP frames its peer took apart from the rest
        // (tx_queue_N_xdp_xmit): the exact count, without the kernel's own
        // frames, which the interface's totals mix in (a few ND or MLD
        // frames are counted as sent, and as many refused ones not).
        let xmit_base = if xdp { ports_xdp_xmit(&ports) } else { None };
        let totals = || -> Result<Totals> {
            let (built, built_bytes, held) = if xdp {
                self.all_states()?
                    .iter()
                    .flatten()
                    .fold((0, 0, 0), |a, s| (a.0 + s.seq, a.1 + s.bytes, a.2 + s.held))
            } else {
                senders.iter().fold((0, 0, 0), |a, c| {
                    (
                        a.0 + c.packets.load(Ordering::Relaxed),
                        a.1 + c.bytes.load(Ordering::Relaxed),
                        0,
                    )
                })
            };
            let (bytes, packets) = ports_tx(&ports)?;
            let packets = match (xmit_base, xmit_base.and(ports_xdp_xmit(&ports))) {
                (Some(base), Some(now)) => now - base + tx_base.1,
                _ => packets,
            };
            let sent = (packets - tx_base.1).min(built);
            let bytes = (bytes - tx_base.0).min(built_bytes);
            Ok(Totals {
                sent,
                bytes,
                refused: built - sent,
                held,
            })
        };
        let quota = |i: usize| {
            opts.count
                .map(|c| c / threads as u64 + u64::from((i as u64) < c % threads as u64))
        };
        let senders_per_cpu = if xdp { XDP_SENDERS_PER_CPU } else { 1 };
        let quit = AtomicBool::new(false);
        let running = AtomicUsize::new(threads * senders_per_cpu);
        let start = Instant::now() + WARMUP;
        let deadline = opts.duration.map(|d| start + d);
        let start_ns = monotonic_ns() + WARMUP.as_nanos() as u64;
        if let Some(obj) = &self.obj {
            // Each CPU starts from sequence 0 with its share of -n; the
            // program paces from start_ns and sends nothing after stop_ns
            // or the share, so two senders on a CPU never overshoot and the
            // run's window is exact whatever the calls do.
            let state_map = loader::map(obj, "gen_state")?;
            let config_map = loader::map(obj, "gen_config")?;
            for (part, (p, _)) in opts.parts().iter().enumerate() {
                let mut states = vec![GenState::default(); libbpf_rs::num_possible_cpus()?];
                let ports = p.tcp.and_then(|_| {
                    crate::tcp::port_shares(p.src.port_first as u32, p.src.port_count(), threads)
                });
                for (i, &c) in opts.cpus.iter().enumerate() {
                    states[c].limit = quota(i).unwrap_or(0);
                    if let Some(p) = &ports {
                        (states[c].sport_first, states[c].sport_count) = p[i];
                    }
                }
                maps::write_percpu_each(&state_map, part as u32, &states)?;
                let mut cfg = self.cfgs[part];
                if let Some(out) = part
                    .checked_sub(1)
                    .and_then(|i| opts.mix[i].out_ifname.as_ref())
                {
                    cfg.out_ifindex = loader::ifindex(out)?;
                }
                cfg.start_ns = start_ns;
                cfg.stop_ns = opts.duration.map_or(0, |d| start_ns + d.as_nanos() as u64);
                maps::write(&config_map, part as u32, &cfg)?;
            }
        }
        let mut short_seconds = ShortSeconds::default();
        let outcome: Result<()> = std::thread::scope(|s| {
            let mut handles = Vec::new();
            for t in 0..threads * senders_per_cpu {
                let cpu_index = t % threads;
                let job = Job {
                    cpu: opts.cpus[cpu_index],
                    start,
                    second: t >= threads,
                    quota: quota(cpu_index),
                    deadline,
                    quit: &quit,
                    counters: &senders[cpu_index],
                    ifindex,
                };
                let running = &running;
                let quit = &quit;
                handles.push(s.spawn(move || {
                    let r = self.send(opts, &job);
                    if r.is_err() {
                        quit.store(true, Ordering::SeqCst);
                    }
                    running.fetch_sub(1, Ordering::SeqCst);
                    r
                }));
            }
            // Frames count from zero (none leave before the start); the
            // runs held count from the start, as the warm-up holds all.
            std::thread::sleep(
                (start + Duration::from_millis(1)).saturating_duration_since(Instant::now()),
            );
            let held_base = totals()?.held;
            let (mut tick, mut tick_totals) = (
                start,
                Totals {
                    held: held_base,
                    ..Totals::default()
                },
            );
            // Nothing leaves after the deadline, so an interval that is read
            // later still ends there.
            let interval_end = |now: Instant| deadline.map_or(now, |d| now.min(d));
            let mut emit = |tick: Instant, from: Totals| -> Result<(Instant, Totals)> {
                // The time is taken after the read: this thread may be
                // scheduled out between the two, and the counts must not be
                // older than the interval's end.
                let t = totals()?;
                let end = interval_end(Instant::now());
                let iv = Interval {
                    packets: t.sent - from.sent,
                    bytes: t.bytes - from.bytes,
                    // Built minus transmitted also counts frames built
                    // but not yet through the driver, so it can shrink.
                    refused: t.refused.saturating_sub(from.refused),
                    held: xdp.then(|| t.held - from.held),
                    usec: (end - tick).as_micros() as u64,
                };
                if let Some(r) = opts.rate_pps {
                    short_seconds.count(&iv, r);
                }
                on_interval(&iv);
                Ok((end, t))
            };
            while running.load(Ordering::SeqCst) > 0 {
                // Wake rarely: this thread may share a CPU with the receiving
                // end of the wire, and every wake-up delays it.
                let next_tick =
                    (tick + Duration::from_secs(1)).saturating_duration_since(Instant::now());
                std::thread::sleep(
                    next_tick.clamp(Duration::from_millis(1), Duration::from_millis(50)),
                );
                if stop.load(Ordering::Relaxed) || deadline.is_some_and(|d| Instant::now() >= d) {
                    quit.store(true, Ordering::SeqCst);
                }
                if tick.elapsed() >= Duration::from_secs(1) && deadline.is_none_or(|d| tick < d) {
                    (tick, tick_totals) = emit(tick, tick_totals)?;
                }
            }
            // The last part of a second, as pkt-gen prints it.
            if interval_end(Instant::now()) > tick + Duration::from_millis(1) {
                emit(tick, tick_totals)?;
            }
            for h in handles {
                h.join()
                    .map_err(|_| anyhow!("a sending thread panicked"))??;
            }
            Ok(())
        });
        outcome?;
        // A run that reached its deadline sent in exactly [start, deadline];
        // one ended by the count or Ctrl-C, until its last frame.
        let last_ns = if xdp {
            self.all_states()?
                .iter()
                .flatten()
                .map(|s| s.last_ns)
                .max()
                .unwrap_or(0)
        } else {
            senders
                .iter()
                .map(|c| c.last_ns.load(Ordering::Relaxed))
                .max()
                .unwrap_or(0)
        };
        let seconds = match opts.duration {
            Some(d) if !stop.load(Ordering::Relaxed) && start.elapsed() >= d => d.as_secs_f64(),
            _ if last_ns > start_ns => (last_ns - start_ns) as f64 / 1e9,
            _ => start.elapsed().as_secs_f64(),
        };
        let Totals {
            sent,
            bytes,
            refused: dropped,
            ..
        } = totals()?;
        let mut report = GenReport {
            mode: opts.mode,
            sent_packets: sent,
            sent_bytes: bytes,
            seconds,
            pps: sent as f64 / seconds,
            bps: bytes as f64 * 8.0 / seconds,
            frame_sizes: opts.frame.sizes.name.clone(),
            mean_frame_len: opts.frame.sizes.mean_frame_len(),
            threads,
            rate_pps: opts.rate_pps,
            xmit_errors: dropped,
            queue_full: senders
                .iter()
                .map(|c| c.refused.load(Ordering::Relaxed))
                .sum(),
            warnings: Vec::new(),
            tcp_next: None,
            part_frames: Vec::new(),
            mix_tcp_next: Vec::new(),
        };
        if xdp {
            let states = self.all_states()?;
            // Where each TCP part's connections go on from, by what its
            // CPUs sent.
            let next = |part: usize, run: Option<TcpRun>| {
                run.map(|run| {
                    let mine: Vec<GenState> = opts
                        .cpus
                        .iter()
                        .filter_map(|&c| states[part].get(c).copied())
                        .collect();
                    crate::tcp::seq_next(run, self.cfgs[part].tcp_stride, &mine)
                })
            };
            report.tcp_next = next(0, opts.tcp);
            if !opts.mix.is_empty() {
                report.part_frames = states
                    .iter()
                    .map(|s| s.iter().map(|s| s.seq).sum())
                    .collect();
                report.mix_tcp_next = opts
                    .mix
                    .iter()
                    .enumerate()
                    .map(|(i, p)| next(i + 1, p.tcp))
                    .collect();
            }
        }
        if let Some(r) = opts.rate_pps {
            let cut_short = stop.load(Ordering::Relaxed) || opts.count.is_some_and(|c| sent < c);
            // Frames the peer refused were offered all the same: they say
            // the far end could not keep up, in their own warning below.
            let offered = (sent + dropped) as f64 / seconds;
            if offered < r as f64 * (1.0 - RATE_TOLERANCE) && !cut_short {
                report.warnings.push(format!(
                    "offered {offered:.0} pps, {:.1}% below -R {r}: the generator could not keep up",
                    100.0 * (1.0 - offered / r as f64)
                ));
            }
        }
        report.warnings.extend(short_seconds.warning());
        if report.xmit_errors > 0 {
            report.warnings.push(format!(
                "{} frames ({:.2}%) were built but not transmitted by {} (its peer could not take them); they are not counted as sent",
                report.xmit_errors,
                100.0 * report.xmit_errors as f64 / (sent + report.xmit_errors) as f64,
                opts.ifname
            ));
        }
        Ok(report)
    }

    fn send(&self, opts: &GenOptions, job: &Job) -> Result<()> {
        linerate_host::cpu::pin(0, job.cpu)?;
        match opts.mode {
            Mode::Xdp => self.send_xdp(opts, job),
            Mode::Afpacket => self.send_afpacket(job),
        }
    }

    fn send_xdp(&self, opts: &GenOptions, job: &Job) -> Result<()> {
        if job.second {
            // Calls end with an idle wait; starting half a call later keeps
            // the two senders of a CPU from waiting at the same time.
            std::thread::sleep(CALL_TARGET / 2);
        }
        let prog = loader::prog(self.xdp()?, "lab_gen")?;
        // SAFETY: the program (and its fd) outlives this call.
        let fd = unsafe { BorrowedFd::borrow_raw(prog.as_fd().as_raw_fd()) };
        let mut chunk = MIN_CHUNK * 4;
        while !job.quit.load(Ordering::Relaxed) {
            let mut n = chunk;
            if let Some(q) = job.quota {
                // Runs ahead of the rate schedule send nothing, so the
                // count is checked against what was really sent.
                let left = q - self.xdp_state()?[job.cpu].seq.min(q);
                let runs = if self.cfgs[0].rate_pps > 0 {
                    // Paced, most runs hold their frame: size the call by
                    // the time the frames left need (the program stops at
                    // the limit). Sized by frames, the tail was a string
                    // of calls sending a frame or two, each ending in an
                    // idle RCU wait: seconds for the last few hundred.
                    let secs = left as f64 / self.cfgs[0].rate_pps as f64;
                    ((chunk as f64 * secs / CALL_TARGET.as_secs_f64()) as u64).max(left)
                } else {
                    left
                };
                n = n.min(runs);
            }
            if let Some(d) = job.deadline {
                // Do not run far past the end: scale to the time left.
                let left = d.saturating_duration_since(Instant::now()).as_secs_f64()
                    / CALL_TARGET.as_secs_f64();
                n = n.min(((chunk as f64 * left) as u64).max(MIN_CHUNK.min(n)));
            }
            if n == 0 || job.deadline.is_some_and(|d| Instant::now() >= d) {
                break;
            }
            // Whole batches, so that the program's clock reads fall on batch
            // starts (bpf/lab/gen.bpf.c, batch_clock); runs past a quota are
            // dropped by the program's own limit.
            let n = n.next_multiple_of(opts.batch_size as u64);
            let t0 = Instant::now();
            let outcome = test_run::run_live_frames(
                fd,
                &self.frame,
                job.ifindex,
                0,
                n.min(u32::MAX as u64) as u32,
                opts.batch_size,
            )?;
            if outcome == test_run::LiveRun::Interrupted {
                job.quit.store(true, Ordering::SeqCst);
                break;
            }
            let scaled =
                n as f64 * CALL_TARGET.as_secs_f64() / t0.elapsed().as_secs_f64().max(1e-6);
            chunk = (scaled as u64).clamp(MIN_CHUNK, MAX_CHUNK);
        }
        Ok(())
    }

    fn send_afpacket(&self, job: &Job) -> Result<()> {
        let sock = PacketSocket::open(job.ifindex)?;
        let stream = (self.cfgs[0].stream_base as u16).wrapping_add(job.cpu as u16);
        let mut bufs = vec![vec![0u8; self.frame.len()]; BATCH];
        let mut lens = [0usize; BATCH];
        let rate = self.cfgs[0].rate_pps;
        let start = job.start;
        std::thread::sleep(start.saturating_duration_since(Instant::now()));
        let mut seq = 0u64;
        while !job.quit.load(Ordering::Relaxed) && job.deadline.is_none_or(|d| Instant::now() < d) {
            let mut n = BATCH as u64;
            if let Some(q) = job.quota {
                n = n.min(q - seq);
            }
            if rate > 0 {
                let allowed = (start.elapsed().as_secs_f64() * rate as f64) as u64 + 1;
                if seq >= allowed {
                    let due = start + Duration::from_secs_f64(seq as f64 / rate as f64);
                    let wait = due.saturating_duration_since(Instant::now());
                    if wait > Duration::from_micros(100) {
                        std::thread::sleep(wait);
                    }
                    continue;
                }
                n = n.min(allowed - seq);
            }
            if n == 0 {
                break;
            }
            let tx_ns = monotonic_ns() as u32;
            for i in 0..n as usize {
                lens[i] =
                    synth::write_frame(&self.cfgs[0], seq + i as u64, stream, tx_ns, &mut bufs[i]);
            }
            let (sent, refused) = sock.send_batch(&mut bufs, &lens[..n as usize])?;
            let bytes: usize = lens[..sent].iter().sum();
            seq += sent as u64;
            job.counters
                .packets
                .fetch_add(sent as u64, Ordering::Relaxed);
            job.counters
                .bytes
                .fetch_add(bytes as u64, Ordering::Relaxed);
            if sent > 0 {
                job.counters
                    .last_ns
                    .store(monotonic_ns(), Ordering::Relaxed);
            }
            if refused {
                job.counters.refused.fetch_add(1, Ordering::Relaxed);
                std::thread::yield_now();
            }
        }
        Ok(())
    }
}

/// One sending thread's share of the work.
struct Job<'a> {
    cpu: usize,
    /// When the run's window opens.
    start: Instant,
    /// The second sender of its CPU.
    second: bool,
    quota: Option<u64>,
    deadline: Option<Instant>,
    quit: &'a AtomicBool,
    counters: &'a SenderCounters,
    ifindex: u32,
}

/// [`tx_counters`] summed over `ports`.
fn ports_tx(ports: &[&str]) -> Result<(u64, u64)> {
    ports.iter().try_fold((0, 0), |a, p| {
        let (bytes, packets) = tx_counters(p)?;
        Ok((a.0 + bytes, a.1 + packets))
    })
}

/// [`xdp_xmit`] summed over `ports`; None if one does not count them.
fn ports_xdp_xmit(ports: &[&str]) -> Option<u64> {
    ports.iter().map(|p| xdp_xmit(p)).sum()
}

/// The XDP frames `ifname`'s peer took from it (a veth's
/// `tx_queue_N_xdp_xmit`, summed), in the calling thread's namespace; None
/// for a driver that does not count them so.
fn xdp_xmit(ifname: &str) -> Option<u64> {
    let stats = linerate_host::ethtool::stats(ifname).ok()?;
    let counts = linerate_host::queue_stats::by_queue(&stats, "tx_queue_", "_xdp_xmit");
    (!counts.is_empty()).then(|| counts.iter().sum())
}

/// The interface's transmit counters (bytes, packets), from the calling
/// thread's namespace view of /proc/net/dev. For a veth they count what its
/// peer took, XDP frames included: frames it refused are not in them.
pub fn tx_counters(ifname: &str) -> Result<(u64, u64)> {
    let text = std::fs::read_to_string("/proc/thread-self/net/dev")?;
    for line in text.lines().skip(2) {
        let Some((name, fields)) = line.split_once(':') else {
            continue;
        };
        if name.trim() == ifname {
            // 8 receive fields, then transmit bytes and packets.
            let f: Vec<u64> = fields
                .split_whitespace()
                .map(|v| v.parse().unwrap_or(0))
                .collect();
            if f.len() < 10 {
                bail!("/proc/net/dev: short line for {ifname}");
            }
            return Ok((f[8], f[9]));
        }
    }
    bail!("interface {ifname} is not in this network namespace")
}

pub use linerate_host::clock::monotonic_ns;

impl GenReport {
    /// The line `linerate gen` ends with, pkt-gen's way.
    pub fn summary(&self) -> String {
        let r = self;
        format!(
            "Sent {} packets {} bytes in {:.3} seconds ({} mode, {} thread{}, -l {}): {}",
            r.sent_packets,
            r.sent_bytes,
            r.seconds,
            serde_json::to_value(r.mode)
                .unwrap_or_default()
                .as_str()
                .unwrap_or("?"),
            r.threads,
            if r.threads == 1 { "" } else { "s" },
            r.frame_sizes,
            crate::units::rate_line(r.sent_packets, r.sent_bytes, (r.seconds * 1e6) as u64)
        )
    }
}
