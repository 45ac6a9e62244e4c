//! `linerate bench route-churn`: how far the fast path lags the kernel
//! during a burst of route changes, as a BGP session delivers them.
//!
//! A lab's DUT runs linerate's router (in this process, on a thread in the
//! DUT's namespace). An injector installs N /24 routes in the DUT's kernel
//! as fast as the kernel takes them (rtnetlink, a window of requests in
//! flight, each acknowledged) or at a given rate, as a daemon paces them,
//! then withdraws them all. A prober asks the fast path itself, not
//! linerate's bookkeeping: it test-runs the XDP program attached to the
//! DUT's ingress (BPF_PROG_TEST_RUN) on a frame to a sampled prefix, until
//! the verdict is the kernel's (redirected out once announced, passed to
//! the kernel once withdrawn). Lag = that moment - the kernel's change: an
//! announced route not yet used, or a withdrawn one still used, for that
//! long. The kernel's change is timed by when it was first heard: by a
//! listener on the kernel's route notifications (queued as the kernel
//! changes the route, as to the router) or by its ack to the injector,
//! whichever came first. The listener and the prober run SCHED_FIFO: a
//! thread waiting for a CPU (the prober once 24 ms, a 100 us sleep behind
//! the router at nice -10 and the kernel's route work) stamps late, and a
//! late stamp is a wrong lag. Overflows: the router's resyncs (the kernel's notifications
//! overflowed its socket).
use crate::bgp::monitor::{self, Listener, Priority};
use crate::follow::{
    frame_to, install_table, kernel_fib_kb, lab_with_fixed_receiver, resident_kb, slab_kb, Lag,
    RouterThread,
};
use anyhow::{anyhow, bail, Context, Result};
use linerate_bpf::loader;
use linerate_bpf::test_run::{self, XdpAction};
use linerate_host::clock::monotonic_ns;
use linerate_lab::topology::addr;
use netlink_packet_core::{
    NetlinkHeader, NetlinkMessage, NetlinkPayload, NLM_F_ACK, NLM_F_CREATE, NLM_F_REPLACE,
    NLM_F_REQUEST,
};
use netlink_packet_route::route::{
    RouteAddress, RouteAttribute, RouteHeader, RouteMessage, RouteProtocol, RouteScope, RouteType,
};
use netlink_packet_route::{AddressFamily, RouteNetlinkMessage};
use netlink_sys::{protocols::NETLINK_ROUTE, Socket, SocketAddr};
use serde::Serialize;
use std::net::{IpAddr, Ipv4Addr};
use std::os::fd::AsFd;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The routes: /24s from 32.0.0.0 up (2^20 of them fit below 48.0.0.0).
const FIRST_PREFIX: u32 = 32 << 24;
/// The most routes a run may change.
pub const MAX_ROUTES: usize = 1 << 20;
/// How long a sampled change may take to reach the fast path before it
/// counts as never seen.
const GIVE_UP: Duration = Duration::from_secs(60);

pub struct Options {
    /// A full table installed before the router starts (generated, with
    /// the length mix of an Internet table; none inside the churned
    /// range): the router's start-up and memory for it, and the churn
    /// measured on top of it.
    pub table: usize,
    pub routes: usize,
    /// Sampled changes per phase (at most `routes`).
    pub samples: usize,
    /// Requests in flight at once.
    pub window: usize,
    /// Changes a second to offer the kernel (as a BGP daemon paces its
    /// installs); None: as fast as it takes them.
    pub rate: Option<f64>,
    /// Pin the router's thread to this CPU and the injector and prober to
    /// another: the router's own cost, without waiting for a core the
    /// kernel's route work (in the injector's calls) holds.
    pub router_cpu: Option<usize>,
}

impl Options {
    pub fn check(&self) -> Result<()> {
        if self.table > 2_000_000 {
            bail!("--table: at most 2000000 routes, got {}", self.table);
        }
        if self.routes == 0 || self.routes > MAX_ROUTES {
            bail!("--routes: must be 1 to {MAX_ROUTES}, got {}", self.routes);
        }
        if self.samples == 0 {
            bail!("--samples: must be at least 1");
        }
        if self.window == 0 || self.window > 65536 {
            bail!("--window: must be 1 to 65536, got {}", self.window);
        }
        if let Some(r) = self.rate {
            if !(r.is_finite() && (1.0..=10_000_000.0).contains(&r)) {
                bail!("--rate: must be 1 to 10000000 routes a second, got {r}");
            }
        }
        crate::follow::check_router_cpu(self.router_cpu)
    }
}

#[derive(Clone, Debug, Serialize)]
pub struct Phase {
    pub kind: &'static str,
    pub routes: usize,
    /// Seconds from the first request to the last ack.
    pub seconds: f64,
    /// Routes a second the kernel took.
    pub rate: f64,
    pub samples: usize,
    /// Sampled changes the fast path had not followed after a minute.
    pub never: usize,
    /// Sampled changes the bench's listener heard (the others are timed
    /// by their acks).
    pub heard: usize,
    pub lag_ms: Lag,
}

/// Memory for the announced table, kB: this process (the router's control
/// plane; the bench's own buffers are allocated before the baseline), the
/// BPF maps it has mapped (the FIB arena, the next hops), and the kernel's
/// own FIB for the same routes.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Memory {
    /// Resident set growth, less the BPF maps' mapped pages.
    pub control_plane_kb: u64,
    /// Growth of the BPF maps' mapped, resident pages.
    pub bpf_mapped_kb: u64,
    /// Growth of the kernel's fib_trie for the main table
    /// (/proc/net/fib_triestat).
    pub kernel_fib_kb: u64,
    /// Growth of the whole machine's slab (/proc/meminfo): the kernel's
    /// FIB with its route and next-hop objects, and anything else.
    pub slab_delta_kb: i64,
}

/// The router's start-up on the full table already in the kernel (the
/// dump path).
#[derive(Clone, Debug, Default, Serialize)]
pub struct Startup {
    /// Routes of the table (`--table`).
    pub table: usize,
    /// Seconds from start to ready (the dump read and applied).
    pub seconds: f64,
    /// This process's resident growth from before the router started, less
    /// the BPF maps' mapped pages, and those pages.
    pub control_plane_kb: u64,
    pub bpf_mapped_kb: u64,
    /// The kernel's fib_trie for the main table and the machine's slab
    /// growth, for the table.
    pub kernel_fib_kb: u64,
    pub slab_delta_kb: i64,
}

#[derive(Clone, Debug, Serialize)]
pub struct Report {
    /// The listener's socket overflowed: some changes were timed by their
    /// acks alone.
    pub notifications_lost: bool,
    /// Route notifications the listener read (its socket's filter keeps
    /// the sampled routes' only).
    pub notifications_read: u64,
    pub startup: Startup,
    pub routes: usize,
    pub overflows: u64,
    /// After the announce, against before it.
    pub memory: Memory,
    /// Both phases' samples.
    pub lag_ms: Lag,
    pub announce: Phase,
    pub withdraw: Phase,
}

/// Route `i`'s prefix (a /24).
pub fn prefix(i: usize) -> Ipv4Addr {
    Ipv4Addr::from(FIRST_PREFIX + ((i as u32) << 8))
}

/// One route request: `i`'s /24 via `gateway` on `oif`.
fn route_message(i: usize, announce: bool, gateway: Ipv4Addr, oif: u32) -> Vec<u8> {
    let mut m = RouteMessage::default();
    m.header = RouteHeader {
        address_family: AddressFamily::Inet,
        destination_prefix_length: 24,
        table: RouteHeader::RT_TABLE_MAIN,
        protocol: RouteProtocol::Static,
        scope: RouteScope::Universe,
        kind: RouteType::Unicast,
        ..Default::default()
    };
    m.attributes = vec![RouteAttribute::Destination(RouteAddress::Inet(prefix(i)))];
    if announce {
        m.attributes
            .push(RouteAttribute::Gateway(RouteAddress::Inet(gateway)));
        m.attributes.push(RouteAttribute::Oif(oif));
    }
    let mut header = NetlinkHeader::default();
    header.sequence_number = i as u32 + 1;
    header.flags = NLM_F_REQUEST
        | NLM_F_ACK
        | if announce {
            NLM_F_CREATE | NLM_F_REPLACE
        } else {
            0
        };
    let payload = if announce {
        RouteNetlinkMessage::NewRoute(m)
    } else {
        RouteNetlinkMessage::DelRoute(m)
    };
    let mut msg = NetlinkMessage::new(header, NetlinkPayload::from(payload));
    msg.finalize();
    let mut buf = vec![0u8; msg.buffer_len()];
    msg.serialize(&mut buf);
    buf
}

/// How many of a phase's changes may have been sent by now: all at once,
/// or `rate` a second from the phase's start.
struct Pace {
    start: Instant,
    rate: Option<f64>,
}

impl Pace {
    fn allowed(&self, routes: usize) -> usize {
        match self.rate {
            None => routes,
            Some(r) => ((self.start.elapsed().as_secs_f64() * r) as usize + 1).min(routes),
        }
    }

    /// Until change `n` may be sent.
    fn wait_for(&self, n: usize) {
        if let Some(r) = self.rate {
            let at = Duration::from_secs_f64(n as f64 / r);
            std::thread::sleep(at.saturating_sub(self.start.elapsed()));
        }
    }
}

/// An rtnetlink socket of the calling thread's namespace for [`inject`],
/// with room for a window's acks.
pub fn injector_socket() -> Result<Socket> {
    let mut sock = Socket::new(NETLINK_ROUTE)?;
    sock.bind_auto()?;
    sock.connect(&SocketAddr::new(0, 0))?;
    let _ = sock.set_rx_buf_sz(8 << 20);
    Ok(sock)
}

/// Sends every change of a phase with `window` in flight, paced at
/// `rate` a second if given; each change's ack time goes to `acked[i]`.
/// The calling thread is in the DUT's namespace.
#[allow(clippy::too_many_arguments)] // one phase's whole description
pub fn inject(
    sock: &Socket,
    routes: usize,
    announce: bool,
    window: usize,
    rate: Option<f64>,
    gateway: Ipv4Addr,
    oif: u32,
    acked: &[AtomicU64],
) -> Result<()> {
    let mut rx = vec![0u8; 1 << 16];
    let (mut sent, mut done) = (0usize, 0usize);
    let pace = Pace {
        start: Instant::now(),
        rate,
    };
    while done < routes {
        // Fill the window with one send per request, batched in one buffer.
        let mut batch = Vec::new();
        let allowed = pace.allowed(routes);
        while sent < allowed && sent - done < window {
            batch.extend(route_message(sent, announce, gateway, oif));
            sent += 1;
        }
        if !batch.is_empty() {
            sock.send(&batch, 0).context("sending route requests")?;
        }
        if sent == done {
            // Nothing in flight: the next change is not due yet.
            pace.wait_for(sent);
            continue;
        }
        let n = sock
            .recv(&mut &mut rx[..], 0)
            .context("reading the kernel's acks")?;
        let now = monotonic_ns();
        let mut at = 0;
        while at + 16 <= n {
            let len = u32::from_ne_bytes(rx[at..at + 4].try_into().unwrap()) as usize;
            let kind = u16::from_ne_bytes(rx[at + 4..at + 6].try_into().unwrap());
            let seq = u32::from_ne_bytes(rx[at + 8..at + 12].try_into().unwrap()) as usize;
            if len < 16 || at + len > n {
                bail!("a malformed netlink reply");
            }
            if kind == libc::NLMSG_ERROR as u16 {
                let code = i32::from_ne_bytes(rx[at + 16..at + 20].try_into().unwrap());
                if code != 0 {
                    bail!(
                        "the kernel refused route {} ({}): {}",
                        seq,
                        prefix(seq.saturating_sub(1)),
                        std::io::Error::from_raw_os_error(-code)
                    );
                }
                if (1..=routes).contains(&seq) {
                    acked[seq - 1].store(now, Ordering::Release);
                    done += 1;
                }
            }
            at += (len + 3) & !3;
        }
    }
    Ok(())
}

/// Follows one phase's sampled changes in order: for each, once the kernel
/// acked it, test-runs the fast path until its verdict is `want`. Returns
/// the lags (ns) and how many never came.
fn probe(
    prog: &std::os::fd::OwnedFd,
    ingress: u32,
    sampled: &[usize],
    acked: &[AtomicU64],
    heard: &[AtomicU64],
    want: XdpAction,
    stop: &AtomicBool,
) -> Result<Probed> {
    let mut out = vec![0u8; 256];
    let (mut lags, mut never, mut by_listener) = (Vec::new(), 0, 0);
    // After a change that never came, the others get one probe each: a
    // router that stopped following is said in a minute, not in hours.
    let mut give_up = GIVE_UP;
    for (s, &i) in sampled.iter().enumerate() {
        // The /24's host .1.
        let f = frame_to(Ipv4Addr::from(u32::from(prefix(i)) + 1).into())?;
        let t = Instant::now();
        let ack = loop {
            let a = acked[i].load(Ordering::Acquire);
            if a != 0 {
                // The first to hear of the change: the listener (0 if it
                // has not, or lost it) or the injector.
                let n = heard[s].load(Ordering::Acquire);
                if n == 0 {
                    break a;
                }
                by_listener += 1;
                break n.min(a);
            }
            if stop.load(Ordering::Relaxed) || t.elapsed() > GIVE_UP {
                return Ok(Probed {
                    lags,
                    never: never + 1,
                    heard: by_listener,
                });
            }
            std::thread::sleep(Duration::from_micros(50));
        };
        loop {
            let r = test_run::run_xdp_on(prog.as_fd(), &f, &mut out, 1, Some(ingress))?;
            if r.verdict == want {
                lags.push(monotonic_ns().saturating_sub(ack));
                break;
            }
            if stop.load(Ordering::Relaxed) || t.elapsed() > give_up {
                never += 1;
                give_up = Duration::ZERO;
                break;
            }
            // A probe every 100 us: the prober must not starve the router
            // of the CPU it measures.
            std::thread::sleep(Duration::from_micros(100));
        }
    }
    Ok(Probed {
        lags,
        never,
        heard: by_listener,
    })
}

/// What a phase's prober saw: the lags (ns), the changes never followed,
/// and how many were timed by the listener.
struct Probed {
    lags: Vec<u64>,
    never: usize,
    heard: usize,
}

/// A classic BPF filter for the listener's socket that keeps the
/// notifications of sampled routes (route i < `routes` with i % `step` ==
/// 0) and drops the other /24s of IPv4: woken at 45k notifications a
/// second, a SCHED_FIFO listener took 18% of a core from the router it
/// measures. It reads a notification as the kernel lays it out
/// (rtm_fill_info: nlmsghdr, rtmsg, RTA_TABLE, then RTA_DST at byte 36);
/// one laid out otherwise is kept, for the listener to parse.
fn sampled_only(routes: usize, step: usize) -> Vec<libc::sock_filter> {
    const RTA_DST: u32 = 1;
    // Loads are big-endian; the netlink header and attributes are in the
    // host's order.
    let rta_type = if cfg!(target_endian = "little") {
        RTA_DST << 8
    } else {
        RTA_DST
    };
    let op = |code: u32, jt: u8, jf: u8, k: u32| libc::sock_filter {
        code: code as u16,
        jt,
        jf,
        k,
    };
    let (ld, ldh, ldb) = (
        libc::BPF_LD | libc::BPF_W | libc::BPF_ABS,
        libc::BPF_LD | libc::BPF_H | libc::BPF_ABS,
        libc::BPF_LD | libc::BPF_B | libc::BPF_ABS,
    );
    let jeq = libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K;
    let alu = |o: u32| libc::BPF_ALU | o | libc::BPF_K;
    vec![
        /* 0 */ op(ldb, 0, 0, 16), // rtm_family
        /* 1 */ op(jeq, 0, 10, libc::AF_INET as u32),
        /* 2 */ op(ldb, 0, 0, 17), // rtm_dst_len
        /* 3 */ op(jeq, 0, 9, 24),
        /* 4 */ op(ldh, 0, 0, 38), // the second attribute's type
        /* 5 */ op(jeq, 0, 6, rta_type),
        /* 6 */ op(ld, 0, 0, 40), // the destination
        /* 7 */ op(alu(libc::BPF_SUB), 0, 0, FIRST_PREFIX),
        /* 8 */ op(alu(libc::BPF_RSH), 0, 0, 8),
        /* 9 */
        op(
            libc::BPF_JMP | libc::BPF_JGE | libc::BPF_K,
            3,
            0,
            routes as u32,
        ),
        /* 10 */ op(alu(libc::BPF_MOD), 0, 0, step as u32),
        /* 11 */ op(jeq, 0, 1, 0),
        /* 12 */ op(libc::BPF_RET | libc::BPF_K, 0, 0, u32::MAX), // keep
        /* 13 */ op(libc::BPF_RET | libc::BPF_K, 0, 0, 0), // drop
    ]
}

/// Runs the bench; `say` gets a line for each phase as it ends.
pub fn run(o: &Options, stop: &AtomicBool, mut say: impl FnMut(&Phase)) -> Result<Report> {
    o.check()?;
    let name = format!("lrchurn{}", std::process::id() % 100_000);
    let lab = lab_with_fixed_receiver(&name)?;
    let ns = lab.namespaces();
    let ifs = lab.interfaces();
    let gateway: Ipv4Addr = addr::RECV_V4.parse()?;

    // The full table, then the router starting on it.
    let slab0 = slab_kb()?;
    if o.table > 0 {
        install_table(
            &ns.dut,
            o.table,
            254,
            addr::RECV_V4,
            &ifs.dut_out,
            &[(0xC612_0000, 15), (FIRST_PREFIX, 4)],
        )?;
    }
    let table_fib_kb = kernel_fib_kb(&ns.dut)?;
    let slab1 = slab_kb()?;
    let (all0, bpf0) = resident_kb()?;
    let started = Instant::now();

    // The router, on a thread in the DUT's namespace.
    let router = RouterThread::spawn(
        &ns.dut,
        vec![ifs.dut_in.clone(), ifs.dut_out.clone()],
        &name,
        o.router_cpu,
    )?;
    let result = (|| -> Result<Report> {
        router.wait_ready(Duration::from_secs(300))?;
        let (all, bpf) = resident_kb()?;
        let startup = Startup {
            table: o.table,
            seconds: started.elapsed().as_secs_f64(),
            control_plane_kb: (all - bpf).saturating_sub(all0 - bpf0),
            bpf_mapped_kb: bpf.saturating_sub(bpf0),
            kernel_fib_kb: table_fib_kb,
            slab_delta_kb: slab1 - slab0,
        };
        let step = o.routes.div_ceil(o.samples.min(o.routes));
        let sampled: Vec<usize> = (0..o.routes).step_by(step).collect();
        let other_cpu = o.router_cpu.map(|c| (c + 1) % linerate_host::cpu::online());
        // The bench's own buffers and threads first: the baseline includes
        // them.
        let listener = Listener::start(
            &ns.dut,
            sampled
                .iter()
                .enumerate()
                .map(|(s, &i)| ((IpAddr::V4(prefix(i)), 24), s))
                .collect(),
            vec![true, false],
            Some(sampled_only(o.routes, step)),
            Priority::First,
            other_cpu,
        )?;
        let mut acks: Vec<Arc<Vec<AtomicU64>>> = (0..2)
            .map(|_| Arc::new((0..o.routes).map(|_| AtomicU64::new(0)).collect()))
            .collect();
        let before = (resident_kb()?, slab_kb()?);
        let mut memory = Memory::default();
        let mut phases = Vec::new();
        for announce in [true, false] {
            listener
                .heard
                .phase
                .store(usize::from(!announce), Ordering::SeqCst);
            let acked = acks.remove(0);
            let prober_stop = Arc::new(AtomicBool::new(false));
            let prober = {
                let (ns, ifname, acked, sampled, pstop, heard) = (
                    ns.dut.clone(),
                    ifs.dut_in.clone(),
                    acked.clone(),
                    sampled.clone(),
                    prober_stop.clone(),
                    listener.heard.clone(),
                );
                std::thread::spawn(move || -> Result<Probed> {
                    linerate_host::netns::enter_for_good(&ns)?;
                    if let Some(c) = other_cpu {
                        linerate_host::cpu::pin(0, c)?;
                    }
                    monitor::run_first();
                    let ingress = loader::ifindex(&ifname)?;
                    let prog = loader::attached_xdp_program(ingress)?;
                    let want = if announce {
                        XdpAction::Redirect
                    } else {
                        XdpAction::Pass
                    };
                    probe(
                        &prog,
                        ingress,
                        &sampled,
                        &acked,
                        &heard.at[usize::from(!announce)],
                        want,
                        &pstop,
                    )
                })
            };
            let injector = {
                let (ns, out, acked, routes, window, rate) = (
                    ns.dut.clone(),
                    ifs.dut_out.clone(),
                    acked.clone(),
                    o.routes,
                    o.window,
                    o.rate,
                );
                std::thread::spawn(move || -> Result<(u64, u64)> {
                    linerate_host::netns::enter_for_good(&ns)?;
                    if let Some(c) = other_cpu {
                        linerate_host::cpu::pin(0, c)?;
                    }
                    let oif = loader::ifindex(&out)?;
                    let sock = injector_socket()?;
                    let first = monotonic_ns();
                    inject(&sock, routes, announce, window, rate, gateway, oif, &acked)?;
                    Ok((first, monotonic_ns()))
                })
            };
            let injected = injector
                .join()
                .map_err(|_| anyhow!("the injector panicked"))?;
            if injected.is_err() || stop.load(Ordering::Relaxed) {
                prober_stop.store(true, Ordering::Relaxed);
            }
            let (first, last) = injected?;
            let Probed { lags, never, heard } = prober
                .join()
                .map_err(|_| anyhow!("the prober panicked"))??;
            let seconds = (last - first) as f64 / 1e9;
            let phase = Phase {
                kind: if announce { "announce" } else { "withdraw" },
                routes: o.routes,
                seconds,
                rate: o.routes as f64 / seconds.max(1e-9),
                samples: lags.len(),
                never,
                heard,
                lag_ms: Lag::of(lags.clone()),
            };
            if announce {
                let ((all, bpf), slab) = (resident_kb()?, slab_kb()?);
                let ((all0, bpf0), slab0) = before;
                memory = Memory {
                    control_plane_kb: (all - bpf).saturating_sub(all0 - bpf0),
                    bpf_mapped_kb: bpf.saturating_sub(bpf0),
                    kernel_fib_kb: kernel_fib_kb(&ns.dut)?.saturating_sub(table_fib_kb),
                    slab_delta_kb: slab - slab0,
                };
            }
            say(&phase);
            phases.push((phase, lags));
            if stop.load(Ordering::Relaxed) {
                bail!("stopped");
            }
        }
        // The router reports its resyncs once a second.
        std::thread::sleep(Duration::from_millis(1100));
        let all: Vec<u64> = phases.iter().flat_map(|p| p.1.iter().copied()).collect();
        let heard = listener.stop()?;
        let (notifications_lost, notifications_read) = (
            heard.lost.load(Ordering::SeqCst),
            heard.read.load(Ordering::SeqCst),
        );
        let mut phases = phases.into_iter().map(|p| p.0);
        Ok(Report {
            notifications_lost,
            notifications_read,
            startup,
            routes: o.routes,
            overflows: router.resyncs(),
            memory,
            lag_ms: Lag::of(all),
            announce: phases.next().expect("two phases"),
            withdraw: phases.next().expect("two phases"),
        })
    })();
    let stopped = router.stop();
    lab.down()?;
    let report = result?;
    stopped?;
    Ok(report)
}

impl std::fmt::Display for Phase {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{:<8} {} routes in {:.2} s ({:.0} routes/s): fast path {}",
            self.kind,
            self.routes,
            self.seconds,
            self.rate,
            self.lag_ms
                .said(self.samples, &[(self.never, "never followed")])
        )
    }
}

impl std::fmt::Display for Report {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let s = &self.startup;
        let mib = |kb: u64| kb as f64 / 1024.0;
        writeln!(
            f,
            "start-up on a table of {} routes: {:.2} s; control plane {:.1} MiB, BPF maps mapped {:.1} MiB; the kernel's FIB {:.1} MiB (fib_trie), slab {:+.1} MiB",
            s.table,
            s.seconds,
            mib(s.control_plane_kb),
            mib(s.bpf_mapped_kb),
            mib(s.kernel_fib_kb),
            s.slab_delta_kb as f64 / 1024.0
        )?;
        writeln!(
            f,
            "{} routes: lag median {:.2} ms, p99 {:.2} ms, max {:.2} ms; {} notification overflows",
            self.routes, self.lag_ms.median, self.lag_ms.p99, self.lag_ms.max, self.overflows
        )?;
        let m = &self.memory;
        write!(
            f,
            "memory for them: control plane {:.1} MiB, BPF maps mapped {:.1} MiB; the kernel's FIB {:.1} MiB (fib_trie), slab {:+.1} MiB",
            mib(m.control_plane_kb),
            mib(m.bpf_mapped_kb),
            mib(m.kernel_fib_kb),
            m.slab_delta_kb as f64 / 1024.0
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefixes_are_distinct_24s_below_48() {
        assert_eq!(prefix(0), Ipv4Addr::new(32, 0, 0, 0));
        assert_eq!(prefix(1), Ipv4Addr::new(32, 0, 1, 0));
        assert_eq!(prefix(MAX_ROUTES - 1), Ipv4Addr::new(47, 255, 255, 0));
    }

    #[test]
    fn route_requests_are_what_the_kernel_parses() {
        // Decoded back by netlink-packet-route: the /24, the gateway, the
        // flags.
        let b = route_message(5, true, Ipv4Addr::new(198, 19, 0, 1), 7);
        let m = NetlinkMessage::<RouteNetlinkMessage>::deserialize(&b).unwrap();
        assert_eq!(m.header.sequence_number, 6);
        assert_ne!(m.header.flags & NLM_F_ACK, 0);
        let NetlinkPayload::InnerMessage(RouteNetlinkMessage::NewRoute(r)) = m.payload else {
            panic!("not a new route: {m:?}");
        };
        assert_eq!(r.header.destination_prefix_length, 24);
        assert!(r
            .attributes
            .contains(&RouteAttribute::Destination(RouteAddress::Inet(prefix(5)))));
        assert!(r.attributes.contains(&RouteAttribute::Oif(7)));
    }
}
