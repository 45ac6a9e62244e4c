//! rtnetlink, synchronously: dumps of the kernel's tables, and a socket
//! subscribed to their change notifications. Nexthop objects come through
//! crate::nhobj, forwarding settings through crate::netconf, the rest
//! through netlink-packet-route.
use crate::netconf::{self, Netconf};
use crate::nhobj::{self, NhMessage};
use anyhow::{bail, Context, Result};
use netlink_packet_core::{
    NetlinkHeader, NetlinkMessage, NetlinkPayload, NLM_F_DUMP, NLM_F_REQUEST,
};
use netlink_packet_route::address::AddressMessage;
use netlink_packet_route::link::LinkMessage;
use netlink_packet_route::neighbour::NeighbourMessage;
use netlink_packet_route::route::RouteMessage;
use netlink_packet_route::rule::RuleMessage;
use netlink_packet_route::{AddressFamily, RouteNetlinkMessage};
use netlink_sys::{protocols::NETLINK_ROUTE, Socket, SocketAddr};
use std::os::fd::AsRawFd;
use std::time::Duration;

/// Multicast groups (the RTMGRP_* bits): links, neighbours, tc, IPv4/IPv6
/// addresses and routes, IPv4 rules.
const GROUPS: u32 = 0x1 | 0x4 | 0x8 | 0x10 | 0x40 | 0x80 | 0x100 | 0x400;
/// IPv6 policy rules: no RTMGRP_* bit was ever defined for them, so the
/// group is joined by number.
const RTNLGRP_IPV6_RULE: u32 = 19;

fn socket(groups: u32) -> Result<Socket> {
    socket_on(NETLINK_ROUTE, groups)
}

fn socket_on(protocol: isize, groups: u32) -> Result<Socket> {
    let mut s = Socket::new(protocol).context("cannot open a netlink socket")?;
    s.bind(&SocketAddr::new(0, groups))
        .context("cannot bind the netlink socket")?;
    // Bursts of route changes (a BGP session coming up) must not overflow it.
    let size: libc::c_int = 8 << 20;
    // SAFETY: a valid socket and option value.
    unsafe {
        libc::setsockopt(
            s.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_RCVBUFFORCE,
            &size as *const _ as *const libc::c_void,
            std::mem::size_of_val(&size) as libc::socklen_t,
        );
    }
    Ok(s)
}

/// Sends a dump request and collects the answers.
fn dump(request: RouteNetlinkMessage) -> Result<Vec<RouteNetlinkMessage>> {
    let s = socket(0)?;
    s.connect(&SocketAddr::new(0, 0))?;
    let mut hdr = NetlinkHeader::default();
    hdr.flags = NLM_F_DUMP | NLM_F_REQUEST;
    let mut req = NetlinkMessage::new(hdr, NetlinkPayload::from(request));
    req.finalize();
    let mut buf = vec![0; req.buffer_len()];
    req.serialize(&mut buf);
    s.send(&buf, 0).context("netlink dump request")?;
    let mut out = Vec::new();
    let mut rx = vec![0u8; 1 << 20];
    loop {
        let n = s.recv(&mut &mut rx[..], 0).context("netlink dump")?;
        let mut off = 0;
        while off < n {
            let msg = NetlinkMessage::<RouteNetlinkMessage>::deserialize(&rx[off..n])
                .context("cannot decode a netlink message")?;
            let len = msg.header.length as usize;
            match msg.payload {
                NetlinkPayload::Done(_) => return Ok(out),
                NetlinkPayload::Error(e) => bail!("netlink dump failed: {e:?}"),
                NetlinkPayload::InnerMessage(m) => out.push(m),
                _ => {}
            }
            if len == 0 {
                break;
            }
            off += len;
        }
    }
}

/// Sends a dump request of a message type netlink-packet-route does not
/// know (`kind`, with `body` after the netlink header) and returns the
/// answers as they came, each with its netlink header; `Err(errno)` inside
/// if the kernel refused the dump.
pub fn raw_dump(kind: u16, body: &[u8], what: &str) -> Result<Result<Vec<Vec<u8>>, i32>> {
    raw_dump_on(NETLINK_ROUTE, kind, body, what)
}

/// raw_dump over another netlink protocol (NETLINK_NETFILTER).
pub fn raw_dump_on(
    protocol: isize,
    kind: u16,
    body: &[u8],
    what: &str,
) -> Result<Result<Vec<Vec<u8>>, i32>> {
    const HDR: usize = 16;
    let s = socket_on(protocol, 0)?;
    s.connect(&SocketAddr::new(0, 0))?;
    let mut req = vec![0u8; HDR];
    req[0..4].copy_from_slice(&((HDR + body.len()) as u32).to_ne_bytes());
    req[4..6].copy_from_slice(&kind.to_ne_bytes());
    let flags = (libc::NLM_F_REQUEST | libc::NLM_F_DUMP) as u16;
    req[6..8].copy_from_slice(&flags.to_ne_bytes());
    req[8..12].copy_from_slice(&1u32.to_ne_bytes());
    req.extend_from_slice(body);
    s.send(&req, 0)
        .with_context(|| format!("netlink {what} dump request"))?;
    let mut out = Vec::new();
    let mut rx = vec![0u8; 1 << 20];
    loop {
        let n = s
            .recv(&mut &mut rx[..], 0)
            .with_context(|| format!("netlink {what} dump"))?;
        let mut off = 0;
        while off + HDR <= n {
            let len = u32::from_ne_bytes(rx[off..off + 4].try_into().unwrap()) as usize;
            let kind = u16::from_ne_bytes([rx[off + 4], rx[off + 5]]);
            if len < HDR || off + len > n {
                bail!("netlink message of length {len} overruns the {what} dump");
            }
            match kind as i32 {
                libc::NLMSG_DONE => return Ok(Ok(out)),
                libc::NLMSG_ERROR if len >= HDR + 4 => {
                    let errno =
                        i32::from_ne_bytes(rx[off + HDR..off + HDR + 4].try_into().unwrap());
                    return Ok(Err(-errno));
                }
                _ => out.push(rx[off..off + len].to_vec()),
            }
            off += (len + 3) & !3;
        }
    }
}

/// The attributes of a netlink attribute stream: (type without the
/// nested and byte-order flags, value).
pub fn attributes(mut b: &[u8]) -> impl Iterator<Item = (u16, &[u8])> {
    std::iter::from_fn(move || {
        let len = u16::from_ne_bytes(b.get(0..2)?.try_into().ok()?) as usize;
        let kind = u16::from_ne_bytes(b.get(2..4)?.try_into().ok()?) & 0x3fff;
        let value = b.get(4..len)?;
        b = b.get((len + 3) & !3..).unwrap_or(&[]);
        Some((kind, value))
    })
}

/// A NUL-terminated string attribute's text.
pub fn text(v: &[u8]) -> String {
    String::from_utf8_lossy(v.split(|&c| c == 0).next().unwrap_or(&[])).into_owned()
}

/// Tells the kernel that these neighbours (interface, address) are in use
/// (RTM_NEWNEIGH with NTF_USE, `ip neigh change ... use`): it treats
/// each as if it had sent through it, moving a STALE entry to DELAY and
/// probing it. An entry gone meanwhile is not created again.
pub fn mark_neighbours_used(neighbours: &[(u32, std::net::IpAddr)]) -> Result<()> {
    use netlink_packet_route::neighbour::{
        NeighbourAddress, NeighbourAttribute, NeighbourFlags, NeighbourMessage,
    };
    if neighbours.is_empty() {
        return Ok(());
    }
    let s = socket(0)?;
    s.connect(&SocketAddr::new(0, 0))?;
    for (oif, ip) in neighbours {
        let mut n = NeighbourMessage::default();
        n.header.ifindex = *oif;
        n.header.flags = NeighbourFlags::Use;
        let (family, addr) = match ip {
            std::net::IpAddr::V4(v) => (AddressFamily::Inet, NeighbourAddress::Inet(*v)),
            std::net::IpAddr::V6(v) => (AddressFamily::Inet6, NeighbourAddress::Inet6(*v)),
        };
        n.header.family = family;
        n.attributes = vec![NeighbourAttribute::Destination(addr)];
        let mut hdr = NetlinkHeader::default();
        hdr.flags = NLM_F_REQUEST;
        let mut req = NetlinkMessage::new(
            hdr,
            NetlinkPayload::from(RouteNetlinkMessage::NewNeighbour(n)),
        );
        req.finalize();
        let mut buf = vec![0; req.buffer_len()];
        req.serialize(&mut buf);
        s.send(&buf, 0).context("netlink neighbour use")?;
    }
    // Errors (an entry gone meanwhile) come back on this socket, which
    // closes unread: nothing to do about them.
    Ok(())
}

/// A dumped entry or a notification.
#[derive(Clone, Debug)]
pub enum Change {
    Rt(RouteNetlinkMessage),
    Nexthop(NhMessage),
    Netconf(Netconf),
    /// nf_tables changed (crate::netfilter): the caller reads its hooks
    /// again.
    Netfilter,
    /// A qdisc, class, filter or chain changed (crate::tc): the caller
    /// reads tc's hooks again.
    Tc,
}

/// Everything the router mirrors, as the kernel has it now: links,
/// addresses, neighbours, policy rules, the forwarding settings, then
/// nexthop objects before the routes that use them.
pub fn dump_all() -> Result<Vec<Change>> {
    let mut rt = dump(RouteNetlinkMessage::GetLink(LinkMessage::default()))?;
    for family in [AddressFamily::Inet, AddressFamily::Inet6] {
        let mut a = AddressMessage::default();
        a.header.family = family;
        rt.extend(dump(RouteNetlinkMessage::GetAddress(a))?);
        let mut n = NeighbourMessage::default();
        n.header.family = family;
        rt.extend(dump(RouteNetlinkMessage::GetNeighbour(n))?);
    }
    rt.extend(dump_rules()?.into_iter().map(RouteNetlinkMessage::NewRule));
    let mut all: Vec<Change> = rt.into_iter().map(Change::Rt).collect();
    all.extend(netconf::dump()?.into_iter().map(Change::Netconf));
    all.extend(nhobj::dump()?.into_iter().map(Change::Nexthop));
    for family in [AddressFamily::Inet, AddressFamily::Inet6] {
        let mut r = RouteMessage::default();
        r.header.address_family = family;
        all.extend(
            dump(RouteNetlinkMessage::GetRoute(r))?
                .into_iter()
                .map(Change::Rt),
        );
    }
    Ok(all)
}

/// The policy rules of both families, in the kernel's order.
pub fn dump_rules() -> Result<Vec<RuleMessage>> {
    let mut out = Vec::new();
    for family in [AddressFamily::Inet, AddressFamily::Inet6] {
        let mut r = RuleMessage::default();
        r.header.family = family;
        for m in dump(RouteNetlinkMessage::GetRule(r))? {
            if let RouteNetlinkMessage::NewRule(r) = m {
                out.push(r);
            }
        }
    }
    Ok(out)
}

/// Whether a notification says a policy rule changed.
pub fn is_rule(c: &Change) -> bool {
    matches!(
        c,
        Change::Rt(RouteNetlinkMessage::NewRule(_) | RouteNetlinkMessage::DelRule(_))
    )
}

/// What a notification is about, for callers that only time them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Topic {
    Route,
    Neighbour,
    Other,
}

pub fn topic(m: &Change) -> Topic {
    match m {
        Change::Rt(RouteNetlinkMessage::NewRoute(_) | RouteNetlinkMessage::DelRoute(_)) => {
            Topic::Route
        }
        Change::Rt(RouteNetlinkMessage::NewNeighbour(_) | RouteNetlinkMessage::DelNeighbour(_)) => {
            Topic::Neighbour
        }
        _ => Topic::Other,
    }
}

/// A socket that receives the kernel's change notifications. Open it
/// before the dump so that nothing changes unseen in between.
pub struct Monitor {
    sock: Socket,
    /// nf_tables' notifications, when the kernel has nf_tables.
    netfilter: Option<Socket>,
    buf: Vec<u8>,
}

impl Monitor {
    pub fn open() -> Result<Self> {
        let sock = socket(GROUPS)?;
        // A kernel without nexthop objects has no such group: nothing to
        // follow there.
        let _ = sock.add_membership(nhobj::RTNLGRP_NEXTHOP);
        sock.add_membership(RTNLGRP_IPV6_RULE)
            .context("cannot follow the IPv6 policy rules")?;
        for group in [netconf::RTNLGRP_IPV4_NETCONF, netconf::RTNLGRP_IPV6_NETCONF] {
            sock.add_membership(group)
                .context("cannot follow the forwarding settings (netconf)")?;
        }
        let netfilter = socket_on(netlink_sys::protocols::NETLINK_NETFILTER, 0)
            .ok()
            .filter(|s| s.add_membership(crate::netfilter::NFNLGRP_NFTABLES).is_ok());
        Ok(Monitor {
            sock,
            netfilter,
            buf: vec![0u8; 1 << 20],
        })
    }

    /// The notifications that arrive within `timeout` (none if nothing
    /// does). An overflowed socket is an error: the caller must resync.
    pub fn wait(&mut self, timeout: Duration) -> Result<Vec<Change>> {
        let fd = |s: Option<&Socket>| libc::pollfd {
            fd: s.map_or(-1, |s| s.as_raw_fd()),
            events: libc::POLLIN,
            revents: 0,
        };
        let mut pfd = [fd(Some(&self.sock)), fd(self.netfilter.as_ref())];
        // SAFETY: two valid pollfds (a negative fd is ignored).
        let r = unsafe { libc::poll(pfd.as_mut_ptr(), 2, timeout.as_millis() as i32) };
        if r <= 0 {
            return Ok(Vec::new());
        }
        let mut out = Vec::new();
        if pfd[1].revents != 0 {
            // What changed does not matter: the hooks are read again. An
            // overflow (ENOBUFS) says the same.
            if let Some(nf) = &self.netfilter {
                while nf.recv(&mut &mut self.buf[..], libc::MSG_DONTWAIT).is_ok() {}
            }
            out.push(Change::Netfilter);
        }
        if pfd[0].revents == 0 {
            return Ok(out);
        }
        let n = match self.sock.recv(&mut &mut self.buf[..], libc::MSG_DONTWAIT) {
            Ok(n) => n,
            Err(e) if e.raw_os_error() == Some(libc::ENOBUFS) => {
                bail!("netlink notifications overflowed: resync needed")
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return Ok(out),
            Err(e) => return Err(e).context("netlink receive"),
        };
        let mut off = 0;
        while off + 16 <= n {
            let len = u32::from_ne_bytes(self.buf[off..off + 4].try_into().unwrap()) as usize;
            if len < 16 || off + len > n {
                bail!("netlink notification of length {len} overruns what was read");
            }
            let kind = u16::from_ne_bytes([self.buf[off + 4], self.buf[off + 5]]);
            if kind == nhobj::RTM_NEWNEXTHOP || kind == nhobj::RTM_DELNEXTHOP {
                out.extend(nhobj::parse(&self.buf[off..off + len])?.map(Change::Nexthop));
            } else if kind == netconf::RTM_NEWNETCONF || kind == netconf::RTM_DELNETCONF {
                out.extend(netconf::parse(&self.buf[off..off + len])?.map(Change::Netconf));
            } else if crate::tc::is_tc_message(kind) {
                // Not decoded: which changed does not matter (tc is read
                // again), and netlink-packet-route fails on qdisc options
                // it does not know.
                if !out.iter().any(|c| matches!(c, Change::Tc)) {
                    out.push(Change::Tc);
                }
            } else {
                let msg = NetlinkMessage::<RouteNetlinkMessage>::deserialize(&self.buf[off..n])
                    .context("cannot decode a netlink notification")?;
                if let NetlinkPayload::InnerMessage(m) = msg.payload {
                    out.push(Change::Rt(m));
                }
            }
            off += (len + 3) & !3;
        }
        Ok(out)
    }
}
