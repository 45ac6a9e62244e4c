//! Established TCP carried with the kernel's window checking on
//! (`carry_tcp`, docs/firewall-stateful.md "TCP"): what the kernel's
//! flowtable does to the connections it offloads, done to those the fast
//! path offers.
//!
//! With nf_conntrack_tcp_be_liberal off, the kernel checks every segment
//! against the windows the previous ones moved: nothing outside it can
//! carry a segment and keep that true. The kernel's own flowtable
//! (nft_flow_offload.c) resolves it by marking both directions of an
//! offloaded connection IP_CT_TCP_FLAG_BE_LIBERAL: from then on the kernel
//! itself no longer checks that connection's windows. With `carry_tcp` the
//! fast path offers each established, assured TCP connection whose
//! segment the ruleset accepts (bpf/include/router/ct_judge.h, ct_offer);
//! this marks its entry so over ctnetlink, and the connection's next
//! segment finds it liberal and is carried. Until then its segments go to
//! the kernel, as before.
use anyhow::{Context, Result};
use linerate_dataplane::ct_cache::{key_of, End};
use linerate_dataplane::layout::CtFlowKey;
use linerate_netlink::ctnetlink::{mark_liberal, Tuple};
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// What the marking did, for the metrics (read while it runs).
#[derive(Debug, Default)]
pub struct CarryCounts {
    /// `carry_tcp` on.
    pub on: std::sync::atomic::AtomicBool,
    /// Connections marked liberal.
    pub marked: AtomicU64,
    /// Offers of connections gone by the time they were marked (ENOENT).
    pub gone: AtomicU64,
    /// Marks the kernel refused otherwise.
    pub refused: AtomicU64,
}

/// How long a marked connection's offers are taken for ones already on
/// their way: its segments in flight when it was marked, and those that
/// reach the kernel's entry before the mark does.
const MARKED_FOR: Duration = Duration::from_secs(1);

/// The requests of a batch of offers (each connection once, none marked
/// within [`MARKED_FOR`]), their sequence numbers from `seq`.
pub struct Marker {
    /// Connections marked, by their canonical key, and when.
    marked: HashMap<CtFlowKey, Instant>,
    seq: u32,
}

impl Default for Marker {
    fn default() -> Self {
        Marker::new()
    }
}

impl Marker {
    pub fn new() -> Marker {
        Marker {
            marked: HashMap::new(),
            seq: 1,
        }
    }

    /// The requests for `offers` (the offering packet's source in `a`), as
    /// one buffer, and how many; the connections are taken as marked from
    /// `now`.
    pub fn requests(&mut self, offers: &[CtFlowKey], now: Instant) -> (Vec<u8>, usize) {
        self.marked
            .retain(|_, at| now.duration_since(*at) < MARKED_FOR);
        let (mut buf, mut n) = (Vec::new(), 0);
        for o in offers {
            let t = tuple_of(o);
            let (key, _) = key_of(&t.src, &t.dst, t.l4proto, t.ipv6);
            // (The time of the mark, not of the offers after it.)
            if self.marked.contains_key(&key) {
                continue;
            }
            self.marked.insert(key, now);
            buf.extend(mark_liberal(&t, self.seq, false));
            self.seq = self.seq.wrapping_add(1).max(1);
            n += 1;
        }
        (buf, n)
    }
}

/// The tuple of an offer: from its side a to its side b.
fn tuple_of(o: &CtFlowKey) -> Tuple {
    Tuple {
        src: End {
            addr: o.a,
            port: o.aport.to_ne_bytes(),
        },
        dst: End {
            addr: o.b,
            port: o.bport.to_ne_bytes(),
        },
        l4proto: o.l4proto,
        ipv6: o.ipv6 != 0,
    }
}

/// Sends `requests` (`n` of them, no acknowledgement asked) on ctnetlink
/// socket `sock` and counts what the kernel said: the errors it answers
/// with are queued by the time the send returns (netlink handles a send in
/// the sender's context).
pub fn mark(
    sock: &netlink_sys::Socket,
    requests: &[u8],
    n: usize,
    counts: &CarryCounts,
) -> Result<()> {
    if n == 0 {
        return Ok(());
    }
    sock.send(requests, 0)
        .context("ctnetlink: marking TCP connections liberal")?;
    let (mut gone, mut refused) = (0u64, 0u64);
    let mut buf = vec![0u8; 1 << 16];
    loop {
        let got = match sock.recv(&mut &mut buf[..], libc::MSG_DONTWAIT) {
            Ok(got) => got,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
            Err(e) => return Err(e).context("ctnetlink: the answers to the marks"),
        };
        for m in linerate_netlink::wire::messages(&buf[..got]).map_while(Result::ok) {
            match m.error() {
                Some(e) if e == -libc::ENOENT => gone += 1,
                Some(0) | None => {}
                Some(e) => {
                    if refused == 0 && counts.refused.load(Ordering::Relaxed) == 0 {
                        tracing::warn!(
                            "ctnetlink refused to mark a TCP connection liberal: {}",
                            std::io::Error::from_raw_os_error(-e)
                        );
                    }
                    refused += 1;
                }
            }
        }
    }
    counts.gone.fetch_add(gone, Ordering::Relaxed);
    counts.refused.fetch_add(refused, Ordering::Relaxed);
    counts
        .marked
        .fetch_add((n as u64).saturating_sub(gone + refused), Ordering::Relaxed);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn offer(src: [u8; 4], sport: u16, dst: [u8; 4], dport: u16) -> CtFlowKey {
        let mut k = CtFlowKey {
            aport: sport.to_be(),
            bport: dport.to_be(),
            l4proto: 6,
            ..Default::default()
        };
        k.a[..4].copy_from_slice(&src);
        k.b[..4].copy_from_slice(&dst);
        k
    }

    /// Both directions' offers of a connection make one request, and
    /// offers within a second of its mark none; after it, one again (a
    /// mark the kernel lost, or a connection opened anew on its ports).
    #[test]
    fn a_connection_is_marked_once_whichever_way_it_is_offered() {
        let mut m = Marker::new();
        let there = offer([10, 0, 0, 2], 40000, [198, 19, 0, 1], 5201);
        let back = offer([198, 19, 0, 1], 5201, [10, 0, 0, 2], 40000);
        let other = offer([10, 0, 0, 2], 40001, [198, 19, 0, 1], 5201);
        let t0 = Instant::now();
        let (buf, n) = m.requests(&[there, back, there, other], t0);
        assert_eq!(n, 2);
        let msgs: Vec<_> = linerate_netlink::wire::messages(&buf)
            .map(|m| m.unwrap().seq())
            .collect();
        assert_eq!(msgs, [1, 2]);
        assert_eq!(m.requests(&[back], t0 + Duration::from_millis(900)).1, 0);
        assert_eq!(m.requests(&[back], t0 + Duration::from_millis(1100)).1, 1);
    }

    /// The request names the offering packet's tuple, source first.
    #[test]
    fn the_request_names_the_offering_packets_tuple() {
        let mut m = Marker::new();
        let back = offer([198, 19, 0, 1], 5201, [10, 0, 0, 2], 40000);
        let (buf, _) = m.requests(&[back], Instant::now());
        assert_eq!(buf, mark_liberal(&tuple_of(&back), 1, false));
        let t = tuple_of(&back);
        assert_eq!(
            (&t.src.addr[..4], t.src.port),
            (&[198, 19, 0, 1][..], 5201u16.to_be_bytes())
        );
    }
}
