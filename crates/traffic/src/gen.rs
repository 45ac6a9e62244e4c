//! The XDP live-frames generator: `BPF_PROG_RUN` of `lab_gen` with
//! `BPF_F_TEST_XDP_LIVE_FRAMES`, in chunks of repetitions, from the calling
//! thread (which must be in the namespace of the interface, and pinned if
//! the caller wants a known CPU).
use crate::flows::{addr_low32, Endpoints};
use crate::frame::FrameSpec;
use anyhow::{bail, Result};
use linerate_bpf::layout::GenState;
use linerate_bpf::{loader, maps, objects, test_run};
use serde::Serialize;
use std::os::fd::AsFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

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
}

/// One second (or the last part of one) of generation.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct Interval {
    pub packets: u64,
    pub bytes: u64,
    pub usec: u64,
}

#[derive(Clone, Debug, Serialize)]
pub struct GenReport {
    pub mode: String,
    pub sent_packets: u64,
    pub sent_bytes: u64,
    pub seconds: f64,
    pub pps: f64,
    pub bps: f64,
    pub frame_len: usize,
}

/// Each BPF_PROG_RUN call costs milliseconds of set-up and tear-down (see
/// `run_live_frames`), so calls are sized to last about this long: long
/// enough to amortise that, short enough for the stop flag, the count and
/// the per-second lines.
const CALL_TARGET: Duration = Duration::from_millis(200);
const MIN_CHUNK: u64 = 1 << 12;
const MAX_CHUNK: u64 = 1 << 24;

const XDP_TX: u32 = 3;

/// A loaded, configured generator program.
pub struct Generator {
    obj: libbpf_rs::Object,
    frame: Vec<u8>,
}

impl Generator {
    /// Validates `opts`, builds the template and loads the program.
    pub fn new(opts: &GenOptions) -> Result<Self> {
        if opts.src.is_ipv6() != opts.dst.is_ipv6() {
            bail!("-s and -d are not of the same family");
        }
        let frame = opts.frame.build()?;
        let mut cfg = opts.frame.gen_config(&frame);
        cfg.src_addr_first = addr_low32(opts.src.first);
        cfg.src_addr_count = opts.src.addr_count() as u32;
        cfg.dst_addr_first = addr_low32(opts.dst.first);
        cfg.dst_addr_count = opts.dst.addr_count() as u32;
        cfg.src_port_first = opts.src.port_first as u32;
        cfg.src_port_count = opts.src.port_count();
        cfg.dst_port_first = opts.dst.port_first as u32;
        cfg.dst_port_count = opts.dst.port_count();
        cfg.stream_base = opts.stream_base as u32;
        let obj = loader::load(objects::GEN, "generator")?;
        maps::write(&loader::map(&obj, "gen_config")?, 0, &cfg)?;
        Ok(Generator { obj, frame })
    }

    /// Frames the program has built so far, over all CPUs.
    pub fn frames_built(&self) -> Result<u64> {
        let st: Vec<GenState> = maps::read_percpu(&loader::map(&self.obj, "gen_state")?, 0)?;
        Ok(st.iter().map(|s| s.seq).sum())
    }

    /// Runs the program `n` times without sending (plain BPF_PROG_RUN) and
    /// returns the frames it built, in order: what the wire would carry.
    pub fn sample(&self, n: usize) -> Result<Vec<Vec<u8>>> {
        self.sample_from(&self.frame, n)
    }

    /// Like [`Generator::sample`], starting each run from `input_frame`
    /// (say, a frame a DUT has rewritten, as live-frame pages come back).
    pub fn sample_from(&self, input_frame: &[u8], n: usize) -> Result<Vec<Vec<u8>>> {
        let prog = loader::prog(&self.obj, "lab_gen")?;
        let mut frames = Vec::with_capacity(n);
        for _ in 0..n {
            let mut out = vec![0u8; input_frame.len()];
            let r = test_run::run_xdp(prog.as_fd(), input_frame, &mut out, 1)?;
            if r.verdict != XDP_TX {
                bail!("generator program returned {} instead of XDP_TX", r.verdict);
            }
            out.truncate(r.len);
            frames.push(out);
        }
        Ok(frames)
    }

    /// Sends frames out of `opts.ifname` until the duration, the count or
    /// `stop`; calls `on_interval` about once a second.
    pub fn run(
        &self,
        opts: &GenOptions,
        stop: &AtomicBool,
        mut on_interval: impl FnMut(&Interval),
    ) -> Result<GenReport> {
        if opts.duration.is_none() && opts.count.is_none() {
            bail!("the generator needs -t seconds or -n count");
        }
        let prog = loader::prog(&self.obj, "lab_gen")?;
        let ifindex = loader::ifindex(&opts.ifname)?;
        let frame = &self.frame;
        let len = frame.len() as u64;
        // The program's own per-CPU sequence counters say how many frames it
        // built, including in a call a signal cut short.
        let base = self.frames_built()?;
        let start = Instant::now();
        let (mut sent, mut tick, mut tick_sent) = (0u64, start, 0u64);
        let mut chunk = MIN_CHUNK * 4;
        loop {
            if stop.load(Ordering::Relaxed) || opts.duration.is_some_and(|d| start.elapsed() >= d) {
                break;
            }
            let mut n = opts.count.map_or(chunk, |c| (c - sent).min(chunk));
            if let Some(d) = opts.duration {
                // Do not run far past the end: scale to the time left.
                let left =
                    d.saturating_sub(start.elapsed()).as_secs_f64() / CALL_TARGET.as_secs_f64();
                n = n.min(((chunk as f64 * left) as u64).max(MIN_CHUNK.min(n)));
            }
            if n == 0 {
                break;
            }
            let t0 = Instant::now();
            let outcome = test_run::run_live_frames(
                prog.as_fd(),
                frame,
                ifindex,
                0,
                n as u32,
                opts.batch_size,
            )?;
            let took = t0.elapsed();
            sent = self.frames_built()? - base;
            if outcome == test_run::LiveRun::Interrupted {
                break;
            }
            let scaled = n as f64 * CALL_TARGET.as_secs_f64() / took.as_secs_f64().max(1e-6);
            chunk = (scaled as u64).clamp(MIN_CHUNK, MAX_CHUNK);
            let now = Instant::now();
            if now - tick >= Duration::from_secs(1) {
                let p = sent - tick_sent;
                on_interval(&Interval {
                    packets: p,
                    bytes: p * len,
                    usec: (now - tick).as_micros() as u64,
                });
                tick = now;
                tick_sent = sent;
            }
        }
        let seconds = start.elapsed().as_secs_f64();
        Ok(GenReport {
            mode: "xdp".into(),
            sent_packets: sent,
            sent_bytes: sent * len,
            seconds,
            pps: sent as f64 / seconds,
            bps: (sent * len * 8) as f64 / seconds,
            frame_len: frame.len(),
        })
    }
}
