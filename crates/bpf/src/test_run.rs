//! `BPF_PROG_RUN` (a.k.a. BPF_PROG_TEST_RUN) of XDP programs.
//!
//! libbpf-rs's `Program::test_run` covers data, context, repeat and flags
//! but not `batch_size`, which live-frames generation needs, so this module
//! calls `bpf_prog_test_run_opts` directly.
use anyhow::{bail, Result};
use std::os::fd::{AsRawFd, BorrowedFd};

/// The kernel's `struct xdp_md`, the context of an XDP test run.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct XdpMd {
    pub data: u32,
    pub data_end: u32,
    pub data_meta: u32,
    pub ingress_ifindex: u32,
    pub rx_queue_index: u32,
    pub egress_ifindex: u32,
}

/// Largest batch the kernel takes for live frames (TEST_XDP_MAX_BATCH).
pub const MAX_LIVE_BATCH: u32 = 256;

/// How a live-frames run ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LiveRun {
    /// All repetitions ran.
    Complete,
    /// A signal (Ctrl-C) cut the run short; some repetitions ran.
    Interrupted,
}

/// One live-frames run: the program is run `repeat` times on copies of
/// `frame`; frames it returns `XDP_TX`/`XDP_REDIRECT` for are really sent
/// (`XDP_TX` leaves through `ingress_ifindex`).
///
/// Each call sets up and tears down a page pool, which costs about an RCU
/// grace period (milliseconds here): callers should make `repeat` large
/// enough that a call lasts tens of milliseconds, or the generator spends
/// most of its time asleep (measured: 0.3 Mpps at 8192 repetitions a call,
/// 3.3 Mpps at a million).
pub fn run_live_frames(
    prog: BorrowedFd<'_>,
    frame: &[u8],
    ingress_ifindex: u32,
    rx_queue: u32,
    repeat: u32,
    batch_size: u32,
) -> Result<LiveRun> {
    if batch_size > MAX_LIVE_BATCH {
        bail!("batch size {batch_size} is above the kernel's limit of {MAX_LIVE_BATCH}");
    }
    let mut ctx = XdpMd {
        data: 0,
        data_end: frame.len() as u32,
        ingress_ifindex,
        rx_queue_index: rx_queue,
        ..Default::default()
    };
    let mut opts = libbpf_sys::bpf_test_run_opts {
        sz: std::mem::size_of::<libbpf_sys::bpf_test_run_opts>() as _,
        data_in: frame.as_ptr() as *const _,
        data_size_in: frame.len() as u32,
        ctx_in: &mut ctx as *mut XdpMd as *const _,
        ctx_size_in: std::mem::size_of::<XdpMd>() as u32,
        repeat: repeat.min(i32::MAX as u32) as i32,
        flags: libbpf_sys::BPF_F_TEST_XDP_LIVE_FRAMES,
        batch_size,
        ..Default::default()
    };
    // SAFETY: buffers outlive the call; sizes are the buffers' sizes.
    let err = unsafe { libbpf_sys::bpf_prog_test_run_opts(prog.as_raw_fd(), &mut opts) };
    match -err {
        0 => Ok(LiveRun::Complete),
        libc::EINTR => Ok(LiveRun::Interrupted),
        e => bail!(
            "BPF_PROG_RUN (live frames) failed: {}",
            std::io::Error::from_raw_os_error(e)
        ),
    }
}

/// What an XDP program told the kernel to do with a frame (enum xdp_action).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum XdpAction {
    Aborted,
    Drop,
    Pass,
    Tx,
    Redirect,
    /// A value the kernel does not define (a program bug).
    Unknown(u32),
}

impl From<u32> for XdpAction {
    fn from(v: u32) -> Self {
        match v {
            0 => XdpAction::Aborted,
            1 => XdpAction::Drop,
            2 => XdpAction::Pass,
            3 => XdpAction::Tx,
            4 => XdpAction::Redirect,
            other => XdpAction::Unknown(other),
        }
    }
}

/// Result of a plain (not live) XDP test run.
#[derive(Clone, Copy, Debug)]
pub struct XdpRun {
    /// The program's verdict.
    pub verdict: XdpAction,
    /// Bytes of frame written to `data_out`.
    pub len: usize,
    /// Mean nanoseconds per repetition, as the kernel measured.
    pub duration_ns: u32,
}

/// Runs an XDP program `repeat` times on `data_in` without sending
/// anything; the (last) output frame goes to `data_out`.
pub fn run_xdp(
    prog: BorrowedFd<'_>,
    data_in: &[u8],
    data_out: &mut [u8],
    repeat: u32,
) -> Result<XdpRun> {
    run_xdp_on(prog, data_in, data_out, repeat, None)
}

/// Like [`run_xdp`], as if the frame had arrived on `ingress_ifindex`
/// (a device of the calling thread's namespace), queue 0.
pub fn run_xdp_on(
    prog: BorrowedFd<'_>,
    data_in: &[u8],
    data_out: &mut [u8],
    repeat: u32,
    ingress_ifindex: Option<u32>,
) -> Result<XdpRun> {
    let mut ctx = XdpMd {
        data_end: data_in.len() as u32,
        ingress_ifindex: ingress_ifindex.unwrap_or(0),
        ..Default::default()
    };
    let mut opts = libbpf_sys::bpf_test_run_opts {
        sz: std::mem::size_of::<libbpf_sys::bpf_test_run_opts>() as _,
        data_in: data_in.as_ptr() as *const _,
        data_size_in: data_in.len() as u32,
        data_out: data_out.as_mut_ptr() as *mut _,
        data_size_out: data_out.len() as u32,
        repeat: repeat.min(i32::MAX as u32) as i32,
        ..Default::default()
    };
    if ingress_ifindex.is_some() {
        opts.ctx_in = &mut ctx as *mut XdpMd as *const _;
        opts.ctx_size_in = std::mem::size_of::<XdpMd>() as u32;
    }
    // SAFETY: buffers outlive the call; sizes are the buffers' sizes.
    let err = unsafe { libbpf_sys::bpf_prog_test_run_opts(prog.as_raw_fd(), &mut opts) };
    if err < 0 {
        bail!(
            "BPF_PROG_RUN failed: {}",
            std::io::Error::from_raw_os_error(-err)
        );
    }
    Ok(XdpRun {
        verdict: XdpAction::from(opts.retval),
        len: opts.data_size_out as usize,
        duration_ns: opts.duration,
    })
}
