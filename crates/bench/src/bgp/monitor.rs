//! When the kernel changed each sampled route: a listener on the DUT's
//! route notifications (what `ip monitor route` reads), stamping the first
//! add (announce phases) or delete (withdraw phases) of each sampled
//! prefix, and counting the table's routes as they come and go. The
//! kernel queues a notification to every listener as it changes the
//! route, so this listener hears it when the router does; with a socket
//! buffer big enough for the whole burst it loses none (and says so if it
//! did: then the run is void).
use super::addrs;
use anyhow::{bail, Result};
use linerate_host::clock::monotonic_ns;
use netlink_packet_core::{NetlinkMessage, NetlinkPayload};
use netlink_packet_route::route::{RouteAddress, RouteAttribute};
use netlink_packet_route::RouteNetlinkMessage;
use netlink_sys::{protocols::NETLINK_ROUTE, Socket, SocketAddr};
use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

const RTMGRP_IPV4_ROUTE: u32 = 0x40;
const RTMGRP_IPV6_ROUTE: u32 = 0x400;
/// Big enough for a million routes' notifications unread.
const RCVBUF: usize = 512 << 20;

/// What the listener records; shared with the prober and the run.
pub struct Heard {
    /// The phase being recorded (an index into `at`).
    pub phase: AtomicUsize,
    /// `at[phase][sample]`: when the kernel made the phase's change to the
    /// sample (monotonic ns), 0 until it did.
    pub at: Vec<Vec<AtomicU64>>,
    /// The table's routes in the kernel now, per family (adds - deletes).
    pub routes4: AtomicI64,
    pub routes6: AtomicI64,
    /// The listener's socket overflowed: some changes were not heard.
    pub lost: AtomicBool,
    /// When the kernel last changed a route of the table (monotonic ns).
    pub last_change: AtomicU64,
    /// Route changes read (all kinds, all prefixes).
    pub read: AtomicU64,
}

impl Heard {
    pub fn new(phases: usize, samples: usize) -> Heard {
        Heard {
            phase: AtomicUsize::new(0),
            at: (0..phases)
                .map(|_| (0..samples).map(|_| AtomicU64::new(0)).collect())
                .collect(),
            routes4: AtomicI64::new(0),
            routes6: AtomicI64::new(0),
            lost: AtomicBool::new(false),
            last_change: AtomicU64::new(0),
            read: AtomicU64::new(0),
        }
    }
}

/// One route notification, as far as the bench cares.
#[derive(Debug, PartialEq, Eq)]
pub struct Change {
    pub added: bool,
    pub dst: IpAddr,
    pub len: u8,
}

/// The route changes in a buffer of notifications (the main table's;
/// others, and anything not a route, are skipped).
pub fn changes(buf: &[u8]) -> Vec<Change> {
    let mut out = Vec::new();
    for m in linerate_netlink::wire::messages(buf).map_while(Result::ok) {
        let Ok(m) = NetlinkMessage::<RouteNetlinkMessage>::deserialize(m.bytes()) else {
            continue;
        };
        let (added, r) = match m.payload {
            NetlinkPayload::InnerMessage(RouteNetlinkMessage::NewRoute(r)) => (true, r),
            NetlinkPayload::InnerMessage(RouteNetlinkMessage::DelRoute(r)) => (false, r),
            _ => continue,
        };
        let table = r
            .attributes
            .iter()
            .find_map(|a| match a {
                RouteAttribute::Table(t) => Some(*t),
                _ => None,
            })
            .unwrap_or(r.header.table as u32);
        let dst = r.attributes.iter().find_map(|a| match a {
            RouteAttribute::Destination(RouteAddress::Inet(v4)) => Some(IpAddr::V4(*v4)),
            RouteAttribute::Destination(RouteAddress::Inet6(v6)) => Some(IpAddr::V6(*v6)),
            _ => None,
        });
        if let (254, Some(dst)) = (table, dst) {
            out.push(Change {
                added,
                dst,
                len: r.header.destination_prefix_length,
            });
        }
    }
    out
}

/// Listens in the calling thread's namespace until `stop`: each change
/// to a prefix in `samples` (prefix -> sample index) is stamped in the
/// current phase if it is the phase's kind (`adds[phase]`). `filter`: a
/// classic BPF program the socket runs on each notification, to be woken
/// only by those it keeps.
pub fn listen(
    heard: &Heard,
    samples: &HashMap<(IpAddr, u8), usize>,
    adds: &[bool],
    filter: Option<&[libc::sock_filter]>,
    ready: &AtomicBool,
    stop: &AtomicBool,
) -> Result<()> {
    let mut sock = Socket::new(NETLINK_ROUTE)?;
    if let Some(f) = filter {
        attach_filter(&sock, f)?;
    }
    sock.bind(&SocketAddr::new(0, RTMGRP_IPV4_ROUTE | RTMGRP_IPV6_ROUTE))?;
    linerate_netlink::socket::try_force_rcvbuf(&sock, RCVBUF)
        .map_err(|e| anyhow::anyhow!("SO_RCVBUFFORCE: {e}"))?;
    set_timeout(&sock, Duration::from_millis(100))?;
    ready.store(true, Ordering::SeqCst);
    let mut buf = vec![0u8; 1 << 20];
    while !stop.load(Ordering::Relaxed) {
        let n = match sock.recv(&mut &mut buf[..], 0) {
            Ok(n) => n,
            Err(e) if e.raw_os_error() == Some(libc::ENOBUFS) => {
                heard.lost.store(true, Ordering::SeqCst);
                continue;
            }
            Err(e) if matches!(e.raw_os_error(), Some(libc::EAGAIN) | Some(libc::EINTR)) => {
                continue
            }
            Err(e) => bail!("reading route notifications: {e}"),
        };
        let now = monotonic_ns();
        let phase = heard.phase.load(Ordering::SeqCst);
        for c in changes(&buf[..n]) {
            heard.read.fetch_add(1, Ordering::Relaxed);
            let counter = match (c.dst, c.len) {
                (IpAddr::V4(a), 24) if addrs::in_table4(a) => Some(&heard.routes4),
                (IpAddr::V6(a), 48) if addrs::in_table6(a) => Some(&heard.routes6),
                _ => None,
            };
            if let Some(counter) = counter {
                counter.fetch_add(if c.added { 1 } else { -1 }, Ordering::SeqCst);
                heard.last_change.store(now, Ordering::SeqCst);
            }
            if let Some(&i) = samples.get(&(c.dst, c.len)) {
                if adds.get(phase) == Some(&c.added) {
                    let _ = heard.at[phase][i].compare_exchange(
                        0,
                        now,
                        Ordering::AcqRel,
                        Ordering::Relaxed,
                    );
                }
            }
        }
    }
    Ok(())
}

/// How the listener's thread is scheduled.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Priority {
    /// An ordinary thread.
    Ordinary,
    /// SCHED_FIFO ([`run_first`]): it stamps a change when the kernel
    /// queues it, not when the router and the kernel's route work leave it
    /// a turn (then give it a `filter`, or it takes a core's share).
    First,
}

/// [`listen`] on a thread of its own in a namespace, ready once started.
/// Dropped, it stops (an error mid-run leaves no thread listening).
pub struct Listener {
    pub heard: Arc<Heard>,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<Result<()>>>,
}

impl Listener {
    /// Listens in `netns` (pinned to `cpu` if given) for the samples of
    /// `index`, phase kinds `adds`.
    pub fn start(
        netns: &str,
        index: HashMap<(IpAddr, u8), usize>,
        adds: Vec<bool>,
        filter: Option<Vec<libc::sock_filter>>,
        priority: Priority,
        cpu: Option<usize>,
    ) -> Result<Listener> {
        let heard = Arc::new(Heard::new(adds.len(), index.len()));
        let (stop, ready) = (
            Arc::new(AtomicBool::new(false)),
            Arc::new(AtomicBool::new(false)),
        );
        let thread = {
            let (ns, heard, stop, ready) = (
                netns.to_string(),
                heard.clone(),
                stop.clone(),
                ready.clone(),
            );
            std::thread::spawn(move || -> Result<()> {
                let r = (|| {
                    linerate_host::netns::enter_for_good(&ns)?;
                    if let Some(c) = cpu {
                        linerate_host::cpu::pin(0, c)?;
                    }
                    if priority == Priority::First {
                        run_first();
                    }
                    listen(&heard, &index, &adds, filter.as_deref(), &ready, &stop)
                })();
                ready.store(true, Ordering::SeqCst);
                r
            })
        };
        while !ready.load(Ordering::SeqCst) {
            std::thread::sleep(Duration::from_millis(5));
        }
        Ok(Listener {
            heard,
            stop,
            thread: Some(thread),
        })
    }

    /// Stops it: what it heard, or why it failed.
    pub fn stop(mut self) -> Result<Arc<Heard>> {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            t.join()
                .map_err(|_| anyhow::anyhow!("the route listener panicked"))??;
        }
        Ok(self.heard.clone())
    }
}

impl Drop for Listener {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
    }
}

/// Makes the calling thread SCHED_FIFO (the lowest real-time priority):
/// it wakes from its sleeps when due, not when the router and the kernel's
/// route work leave it a turn. Says so and goes on if refused.
pub fn run_first() {
    let p = libc::sched_param { sched_priority: 1 };
    // SAFETY: sets the calling thread's policy; `p` outlives the call.
    if unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &p) } != 0 {
        eprintln!(
            "a measuring thread stays SCHED_OTHER: {}",
            std::io::Error::last_os_error()
        );
    }
}

fn attach_filter(sock: &Socket, f: &[libc::sock_filter]) -> Result<()> {
    use std::os::fd::AsRawFd;
    let prog = libc::sock_fprog {
        len: f.len() as u16,
        filter: f.as_ptr() as *mut libc::sock_filter,
    };
    // SAFETY: setsockopt on our socket; the kernel copies the program.
    let r = unsafe {
        libc::setsockopt(
            sock.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_ATTACH_FILTER,
            &prog as *const libc::sock_fprog as *const libc::c_void,
            std::mem::size_of::<libc::sock_fprog>() as u32,
        )
    };
    if r != 0 {
        bail!("SO_ATTACH_FILTER: {}", std::io::Error::last_os_error());
    }
    Ok(())
}

fn set_timeout(sock: &Socket, d: Duration) -> Result<()> {
    use std::os::fd::AsRawFd;
    let tv = libc::timeval {
        tv_sec: d.as_secs() as _,
        tv_usec: d.subsec_micros() as _,
    };
    // SAFETY: setsockopt on our socket with a timeval.
    let r = unsafe {
        libc::setsockopt(
            sock.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_RCVTIMEO,
            &tv as *const libc::timeval as *const libc::c_void,
            std::mem::size_of::<libc::timeval>() as u32,
        )
    };
    if r != 0 {
        bail!("SO_RCVTIMEO: {}", std::io::Error::last_os_error());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use netlink_packet_core::NetlinkHeader;
    use netlink_packet_route::route::{RouteHeader, RouteMessage};
    use netlink_packet_route::AddressFamily;

    fn message(add: bool, dst: IpAddr, len: u8, table: u8) -> Vec<u8> {
        let mut r = RouteMessage::default();
        r.header = RouteHeader {
            address_family: if dst.is_ipv4() {
                AddressFamily::Inet
            } else {
                AddressFamily::Inet6
            },
            destination_prefix_length: len,
            table,
            ..Default::default()
        };
        r.attributes = vec![RouteAttribute::Destination(match dst {
            IpAddr::V4(a) => RouteAddress::Inet(a),
            IpAddr::V6(a) => RouteAddress::Inet6(a),
        })];
        let payload = if add {
            RouteNetlinkMessage::NewRoute(r)
        } else {
            RouteNetlinkMessage::DelRoute(r)
        };
        let mut m = NetlinkMessage::new(NetlinkHeader::default(), NetlinkPayload::from(payload));
        m.finalize();
        let mut b = vec![0u8; m.buffer_len()];
        m.serialize(&mut b);
        b
    }

    #[test]
    fn notifications_give_the_main_tables_changes_in_order() {
        let a: IpAddr = "32.0.5.0".parse().unwrap();
        let b: IpAddr = "2a00:0:7::".parse().unwrap();
        let mut buf = message(true, a, 24, 254);
        buf.extend(message(false, b, 48, 254));
        buf.extend(message(true, a, 24, 100)); // another table: skipped
        buf.extend(message(false, a, 24, 254));
        assert_eq!(
            changes(&buf),
            vec![
                Change {
                    added: true,
                    dst: a,
                    len: 24
                },
                Change {
                    added: false,
                    dst: b,
                    len: 48
                },
                Change {
                    added: false,
                    dst: a,
                    len: 24
                },
            ]
        );
        // A truncated last message ends the walk, nothing invented.
        let cut = &buf[..buf.len() - 4];
        assert_eq!(changes(cut).len(), 2);
    }
}
