//! The kernel's entries for the connections the fast path carries
//! (bpf/include/router/ct_judge.h, docs/firewall-stateful.md "States"): the stateful
//! firewall's part of the control plane.
//!
//! The fast path keeps a connection in its connection cache (`ct_cache4`,
//! `ct_cache6`), or with nat chains each direction in the NAT stage's ways
//! (`nat_cache4`, `nat_cache6`, bpf/include/router/nat.h), once the
//! kernel's conntrack holds it established and assured, and writes there
//! when it last carried a packet of it. Two things keep the kernel's view
//! true:
//!
//! - conntrack's destroy events (NFNLGRP_CONNTRACK_DESTROY): the entry is
//!   forgotten when the kernel's goes (expired, `conntrack -D`, flushed),
//!   by its original tuple and, in the NAT stage's ways, its reply tuple
//!   too, so the connection's next packet is looked up in the kernel's
//!   table again, and goes to the kernel if it is not there;
//! - a sweep every [`sweep_every`]: for each connection carried since the
//!   last sweep, the kernel's timeout is set to run from its last packet
//!   (nf_conntrack_udp_timeout_stream after it, as the kernel's own
//!   refresh would); every entry is checked against the kernel's (ct_keeper
//!   in batches) and forgotten if the kernel's is gone or changed to one
//!   the fast path does not carry. The sweep bounds how long an entry can
//!   outlive the kernel's when events were lost (ENOBUFS sweeps at once).
//!
//! Each second it also fits the span of sets the fast path uses to the
//! connections the tables hold (linerate_dataplane::ct_cache, `CtMaps::fit`).
//!
//! The kernel's timeout is thus kept from the fast path's `seen` times: a
//! flow that stops expires on the kernel's schedule, to the sweep's
//! precision.
//!
//! With `carry_tcp`, it also marks the TCP connections the fast path
//! offers liberal (crate::tcp_carry).
use crate::tcp_carry::{mark, CarryCounts, Marker};
use anyhow::{Context, Result};
use linerate_bpf::layout::Pod;
use linerate_dataplane::ct_cache::{
    key_of, nat_key_of, sysctl, sysctl_flags, CacheSpan, CtMaps, Timeouts,
};
use linerate_dataplane::layout::{CtFlowKey, FW_CT_ON, FW_CT_TCP_CARRY};
use linerate_netlink::ctnetlink::{destroyed, NFNLGRP_CONNTRACK_DESTROY};
use std::cell::RefCell;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

/// How often the sweep runs: a quarter of the stream timeout (the kernel's
/// entry of a flow carried all along never has less than half of it
/// left), between a second and 30 s where destroy `events` are followed,
/// and ten without them (the sweep is then what notices an entry the
/// kernel deleted). A sweep costs up to 0.7 us a connection, nearly all
/// of it the kernel's own lookup (`linerate bench firewall --states`: 0.67
/// s at a million), so at the kernel's default UDP stream timeout (120 s)
/// a million connections take 2% of a core, not 7%.
pub fn sweep_every(stream: Duration, events: bool) -> Duration {
    let most = Duration::from_secs(if events { 30 } else { 10 });
    (stream / 4).clamp(Duration::from_secs(1), most)
}

/// How often the spans of the connection cache are fitted: a burst of new
/// connections past a span's ways is found in the kernel's table packet by
/// packet until then.
const FIT_EVERY: Duration = Duration::from_secs(1);
/// How often the conntrack sysctls the fast path follows are read again.
const SYSCTLS_EVERY: Duration = Duration::from_secs(1);

/// The thread that keeps the kernel's entries (see the module's comment);
/// it ends when dropped.
pub struct CtThread {
    wake: OwnedFd,
    thread: Option<std::thread::JoinHandle<()>>,
    carry: Arc<CarryCounts>,
    span: Arc<CacheSpan>,
}

impl CtThread {
    /// Starts keeping `maps`' connections, in the caller's network
    /// namespace; with `carry_tcp`, marking the TCP connections the fast
    /// path offers.
    pub fn start(maps: CtMaps, carry_tcp: bool) -> Result<CtThread> {
        // SAFETY: eventfd has no preconditions; checked below.
        let fd = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
        if fd < 0 {
            return Err(std::io::Error::last_os_error()).context("eventfd");
        }
        // SAFETY: a new fd, owned here.
        let wake = unsafe { OwnedFd::from_raw_fd(fd) };
        let their_wake = wake.try_clone()?;
        let events =
            linerate_netlink::socket::socket_on(netlink_sys::protocols::NETLINK_NETFILTER, 0)
                .ok()
                .filter(|s| s.add_membership(NFNLGRP_CONNTRACK_DESTROY).is_ok());
        if let Some(s) = &events {
            linerate_netlink::socket::force_rcvbuf(s, linerate_netlink::socket::NOTIFY_RCVBUF);
        } else {
            tracing::warn!(
                "conntrack's destroy events cannot be followed: connections the fast path carries are checked against the kernel's table by the sweep only"
            );
        }
        let carry = Arc::new(CarryCounts::default());
        carry.on.store(carry_tcp, Ordering::Relaxed);
        let marks = if carry_tcp {
            Some(
                linerate_netlink::socket::socket_on(netlink_sys::protocols::NETLINK_NETFILTER, 0)
                    .context("ctnetlink, to mark TCP connections liberal")?,
            )
        } else {
            None
        };
        let counts = carry.clone();
        let span = maps.span();
        let thread = std::thread::Builder::new()
            .name("linerate-ct".into())
            .spawn(move || keep(maps, events, marks, &counts, their_wake))?;
        Ok(CtThread {
            wake,
            thread: Some(thread),
            carry,
            span,
        })
    }

    /// What the marking of offered TCP connections has done.
    pub fn carry_counts(&self) -> Arc<CarryCounts> {
        self.carry.clone()
    }

    /// The connection cache's spans of sets.
    pub fn span(&self) -> Arc<CacheSpan> {
        self.span.clone()
    }
}

impl Drop for CtThread {
    fn drop(&mut self) {
        let one = 1u64.to_ne_bytes();
        // SAFETY: 8 bytes to an eventfd.
        unsafe { libc::write(self.wake.as_raw_fd(), one.as_ptr().cast(), 8) };
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn keep(
    mut maps: CtMaps,
    events: Option<netlink_sys::Socket>,
    marks: Option<netlink_sys::Socket>,
    counts: &CarryCounts,
    wake: OwnedFd,
) {
    let carry = if marks.is_some() { FW_CT_TCP_CARRY } else { 0 };
    let offers: RefCell<Vec<CtFlowKey>> = RefCell::new(Vec::new());
    let ring = marks.as_ref().and_then(|_| {
        let mut b = libbpf_rs::RingBufferBuilder::new();
        b.add(maps.offers(), |d: &[u8]| {
            if let Some(o) = CtFlowKey::from_bytes(d) {
                offers.borrow_mut().push(o);
            }
            0
        })
        .ok()?;
        b.build().ok()
    });
    let mut marker = Marker::new();
    let mut buf = vec![0u8; 1 << 20];
    let mut since = 0u64;
    let every = |t: &Timeouts| sweep_every(t.udp, events.is_some());
    let mut timeouts = Timeouts::now();
    maps.publish_timeouts(&timeouts);
    let mut next = std::time::Instant::now() + every(&timeouts);
    let mut flags = maps.published_flags();
    let mut outgrown = false;
    let mut next_fit = std::time::Instant::now() + FIT_EVERY;
    let mut next_sysctls = std::time::Instant::now() + SYSCTLS_EVERY;
    loop {
        let fd = |fd: i32| libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        };
        let mut pfd = [
            fd(wake.as_raw_fd()),
            fd(events.as_ref().map_or(-1, |s| s.as_raw_fd())),
            fd(ring.as_ref().map_or(-1, |r| r.epoll_fd())),
        ];
        let wait = next
            .min(next_sysctls)
            .min(next_fit)
            .saturating_duration_since(std::time::Instant::now());
        // Rounded up: a wait under a millisecond is not a busy loop.
        let ms = wait.as_micros().div_ceil(1000).min(1000) as i32;
        // SAFETY: three pollfds (a negative fd is ignored).
        unsafe { libc::poll(pfd.as_mut_ptr(), 3, ms) };
        if pfd[0].revents != 0 {
            return;
        }
        if let (Some(ring), Some(sock)) = (&ring, &marks) {
            let _ = ring.consume();
            let batch = std::mem::take(&mut *offers.borrow_mut());
            for chunk in batch.chunks(256) {
                let (requests, n) = marker.requests(chunk, std::time::Instant::now());
                if let Err(e) = mark(sock, &requests, n, counts) {
                    tracing::warn!("{e:#}");
                }
            }
        }
        // The sysctls the fast path follows, read again each second (not
        // at every wake-up: under connection churn the events and offers
        // wake this thread thousands of times a second, on the router's
        // core): a change is published, and every connection checked
        // against it at once (TCP windows checked again: no TCP carried
        // any more).
        let now = std::time::Instant::now();
        let read_sysctls = now >= next_sysctls;
        if read_sysctls {
            next_sysctls = now + SYSCTLS_EVERY;
        }
        if read_sysctls && !outgrown && maps.outgrown_by(sysctl("nf_conntrack_max")) {
            outgrown = true;
            tracing::warn!(
                "nf_conntrack_max is now {}, more than the stateful firewall's connection cache was sized for at start ({}): connections past it are found in the kernel's table packet by packet; restart linerate route (a takeover forwards throughout) to size it again",
                sysctl("nf_conntrack_max").unwrap_or(0),
                maps.describe()
            );
        }
        if read_sysctls {
            let now_timeouts = Timeouts::now();
            if now_timeouts != timeouts {
                maps.publish_timeouts(&now_timeouts);
                timeouts = now_timeouts;
            }
            let now_flags = FW_CT_ON | sysctl_flags() | carry;
            if now_flags != flags {
                maps.publish_flags(now_flags);
                flags = now_flags;
                next = std::time::Instant::now();
            }
        }
        if let (Some(sock), true) = (&events, pfd[1].revents != 0) {
            loop {
                let n = match sock.recv(&mut &mut buf[..], libc::MSG_DONTWAIT) {
                    Ok(n) => n,
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                    // Lost events (ENOBUFS): check every entry now.
                    Err(_) => {
                        next = std::time::Instant::now();
                        break;
                    }
                };
                for m in linerate_netlink::wire::messages(&buf[..n]).map_while(Result::ok) {
                    if let Ok(Some(d)) = destroyed(&m) {
                        let t = d.orig;
                        maps.forget(&key_of(&t.src, &t.dst, t.l4proto, t.ipv6).0);
                        for t in [Some(t), d.reply].into_iter().flatten() {
                            maps.forget_nat(&nat_key_of(&t.src, &t.dst, t.l4proto, t.ipv6));
                        }
                    }
                }
            }
        }
        if std::time::Instant::now() >= next_fit {
            match maps.fit(since, &timeouts) {
                Ok(changed) => {
                    for (ipv6, from, to) in changed {
                        tracing::info!(
                            "the connection cache's {} sets in use: {} -> {} (fitted to the connections it holds)",
                            if ipv6 { "IPv6" } else { "IPv4" },
                            1u64 << from,
                            1u64 << to
                        );
                    }
                }
                Err(e) => tracing::warn!("fitting the connection cache: {e:#}"),
            }
            next_fit = std::time::Instant::now() + FIT_EVERY;
        }
        if std::time::Instant::now() >= next {
            match maps.sweep(since, &timeouts) {
                Ok((s, began)) => {
                    tracing::debug!("conntrack sweep: {s:?}");
                    since = began;
                }
                Err(e) => tracing::warn!("conntrack sweep: {e:#}"),
            }
            next = std::time::Instant::now() + every(&timeouts);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_sweep_runs_every_quarter_of_the_stream_timeout_within_its_bounds() {
        let s = Duration::from_secs(120);
        assert_eq!(sweep_every(s, true), Duration::from_secs(30));
        assert_eq!(sweep_every(s, false), Duration::from_secs(10));
        assert_eq!(
            sweep_every(Duration::from_secs(60), true),
            Duration::from_secs(15)
        );
        assert_eq!(
            sweep_every(Duration::from_secs(2), true),
            Duration::from_secs(1)
        );
    }
}
