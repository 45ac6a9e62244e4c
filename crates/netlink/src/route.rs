//! rtnetlink, synchronously: dumps of the kernel's tables, and a socket
//! subscribed to their change notifications. The top of the netlink
//! layers: crate::wire checks bytes, crate::socket sends and receives,
//! the parsers (crate::nhobj, crate::netconf, crate::tc, crate::netfilter,
//! and netlink-packet-route for links, addresses, neighbours, routes and
//! rules) read messages; here [`notification`] decides what each
//! notification is, and [`rereads`] what the caller reads again.
use crate::netconf::{self, Netconf};
use crate::nhobj::{self, NhMessage};
use crate::socket::socket_on;
use crate::wire::{self, Message};
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
/// Datagrams read in one `Monitor::wait` at most (each usually one
/// notification): large enough to take a burst in one batch, small enough
/// that the fast path sees the first changes of a burst within
/// milliseconds.
const MAX_DATAGRAMS_PER_WAIT: usize = 4096;

fn socket(groups: u32) -> Result<Socket> {
    socket_on(NETLINK_ROUTE, groups)
}

/// Sends a dump request and collects the answers.
fn dump(request: RouteNetlinkMessage) -> Result<Vec<RouteNetlinkMessage>> {
    let mut out = Vec::new();
    dump_each(request, |m| {
        out.push(m);
        Ok(())
    })?;
    Ok(out)
}

/// A dump, each message handed to `each` as it is read: a full table is
/// never held whole (a million parsed routes are hundreds of MiB).
fn dump_each(
    request: RouteNetlinkMessage,
    mut each: impl FnMut(RouteNetlinkMessage) -> Result<()>,
) -> Result<()> {
    let s = socket(0)?;
    s.connect(&SocketAddr::new(0, 0))?;
    let mut hdr = NetlinkHeader::default();
    hdr.flags = NLM_F_DUMP | NLM_F_REQUEST;
    let mut req = NetlinkMessage::new(hdr, NetlinkPayload::from(request));
    req.finalize();
    let mut buf = vec![0; req.buffer_len()];
    req.serialize(&mut buf);
    s.send(&buf, 0).context("netlink dump request")?;
    let mut rx = vec![0u8; 1 << 20];
    loop {
        let n = s.recv(&mut &mut rx[..], 0).context("netlink dump")?;
        let mut off = 0;
        while off < n {
            let msg = NetlinkMessage::<RouteNetlinkMessage>::deserialize(&rx[off..n])
                .context("cannot decode a netlink message")?;
            let len = msg.header.length as usize;
            match msg.payload {
                NetlinkPayload::Done(_) => return Ok(()),
                NetlinkPayload::Error(e) => bail!("netlink dump failed: {e:?}"),
                NetlinkPayload::InnerMessage(m) => each(m)?,
                _ => {}
            }
            if len == 0 {
                break;
            }
            off += len;
        }
    }
}

/// Tells the kernel that these neighbours (interface, address) are in use
/// (RTM_NEWNEIGH with NTF_USE, `ip neigh change ... use`): it treats
/// each as if it had sent through it, moving a STALE entry to DELAY and
/// probing it. An entry gone meanwhile is not created again.
pub fn mark_neighbours_used(neighbours: &[(u32, std::net::IpAddr)]) -> Result<()> {
    use netlink_packet_route::neighbour::{
        NeighbourAddress, NeighbourAttribute, NeighbourFlags, NeighbourMessage,
    };
    send_uses(neighbours.iter().map(|(oif, ip)| {
        let mut n = NeighbourMessage::default();
        n.header.ifindex = *oif;
        n.header.flags = NeighbourFlags::Use;
        let (family, addr) = match ip {
            std::net::IpAddr::V4(v) => (AddressFamily::Inet, NeighbourAddress::Inet(*v)),
            std::net::IpAddr::V6(v) => (AddressFamily::Inet6, NeighbourAddress::Inet6(*v)),
        };
        n.header.family = family;
        n.attributes = vec![NeighbourAttribute::Destination(addr)];
        n
    }))
}

/// Tells the kernel's bridges that frames from these MACs came in by
/// these ports (port, MAC; RTM_NEWNEIGH AF_BRIDGE with NTF_USE and
/// NTF_MASTER, `bridge fdb replace MAC dev PORT master use`): each entry's
/// ageing starts again, as when the bridge learns from a frame (and, as
/// then, an entry gone is learned again).
pub fn mark_fdb_used(entries: &[(u32, [u8; 6])]) -> Result<()> {
    use netlink_packet_route::neighbour::{
        NeighbourAttribute, NeighbourFlags, NeighbourMessage, NeighbourState,
    };
    send_uses(entries.iter().map(|(port, mac)| {
        let mut n = NeighbourMessage::default();
        n.header.family = AddressFamily::Bridge;
        n.header.ifindex = *port;
        n.header.flags = NeighbourFlags::Use | NeighbourFlags::Controller;
        // (The kernel asks for a state; NTF_USE does not read it.)
        n.header.state = NeighbourState::Reachable;
        n.attributes = vec![NeighbourAttribute::LinkLayerAddress(mac.to_vec())];
        n
    }))
}

/// Sends each NTF_USE message as a request, unacknowledged. Errors (an
/// entry gone meanwhile) come back on the socket, which closes unread:
/// nothing to do about them.
fn send_uses(
    msgs: impl Iterator<Item = netlink_packet_route::neighbour::NeighbourMessage>,
) -> Result<()> {
    let mut msgs = msgs.peekable();
    if msgs.peek().is_none() {
        return Ok(());
    }
    let s = socket(0)?;
    s.connect(&SocketAddr::new(0, 0))?;
    for n in msgs {
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
/// addresses, neighbours, the bridges' FDBs, policy rules, the forwarding
/// settings, then
/// nexthop objects before the routes that use them.
pub fn dump_all() -> Result<Vec<Change>> {
    let mut all = Vec::new();
    dump_all_each(|c| {
        all.push(c);
        Ok(())
    })?;
    Ok(all)
}

/// What `dump_all` reads, in its order, each change handed to `each` as
/// it is read: the routes, by far the most, are never all in memory.
pub fn dump_all_each(mut each: impl FnMut(Change) -> Result<()>) -> Result<()> {
    let mut rt = dump(RouteNetlinkMessage::GetLink(LinkMessage::default()))?;
    for family in [AddressFamily::Inet, AddressFamily::Inet6] {
        let mut a = AddressMessage::default();
        a.header.family = family;
        rt.extend(dump(RouteNetlinkMessage::GetAddress(a))?);
        let mut n = NeighbourMessage::default();
        n.header.family = family;
        rt.extend(dump(RouteNetlinkMessage::GetNeighbour(n))?);
    }
    // The bridges' FDBs (`bridge fdb`): the ports next hops out of a
    // bridge leave by.
    let mut n = NeighbourMessage::default();
    n.header.family = AddressFamily::Bridge;
    rt.extend(dump(RouteNetlinkMessage::GetNeighbour(n))?);
    rt.extend(dump_rules()?.into_iter().map(RouteNetlinkMessage::NewRule));
    for m in rt {
        each(Change::Rt(m))?;
    }
    for c in netconf::dump()? {
        each(Change::Netconf(c))?;
    }
    for n in nhobj::dump()? {
        each(Change::Nexthop(n))?;
    }
    for family in [AddressFamily::Inet, AddressFamily::Inet6] {
        let mut r = RouteMessage::default();
        r.header.address_family = family;
        dump_each(RouteNetlinkMessage::GetRoute(r), |m| each(Change::Rt(m)))?;
    }
    Ok(())
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

/// What notification `m` is: the one place that decides which parser reads
/// a message, and so what the mirror applies or its caller reads again
/// (linerate_router::follow::apply_notifications): nexthop objects and netconf by their
/// own parsers; tc's objects not decoded (which changed does not matter,
/// tc is read again; and netlink-packet-route fails on qdisc options it
/// does not know); the rest by netlink-packet-route. None: not one the
/// router follows.
pub fn notification(m: &Message) -> Result<Option<Change>> {
    let kind = m.kind();
    Ok(
        if kind == nhobj::RTM_NEWNEXTHOP || kind == nhobj::RTM_DELNEXTHOP {
            nhobj::read(m)?.map(Change::Nexthop)
        } else if kind == netconf::RTM_NEWNETCONF || kind == netconf::RTM_DELNETCONF {
            netconf::read(m)?.map(Change::Netconf)
        } else if crate::tc::is_tc_message(kind) {
            Some(Change::Tc)
        } else {
            let msg = NetlinkMessage::<RouteNetlinkMessage>::deserialize(m.bytes())
                .context("cannot decode a netlink notification")?;
            match msg.payload {
                NetlinkPayload::InnerMessage(r) => Some(Change::Rt(r)),
                _ => None,
            }
        },
    )
}

/// What a batch of notifications makes the caller read again, besides
/// applying them: nftables' hooks; tc's hooks (a qdisc, class, filter or
/// chain changed; the caller adds a link that came, went or came up, as it
/// gets the kernel's default qdisc); the XDP features, which follow a
/// link's (a veth's change as its peer takes an XDP program); the policy
/// rules, which are reloaded whole (crate::policy).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Rereads {
    pub netfilter: bool,
    pub tc: bool,
    pub xdp_features: bool,
    pub rules: bool,
}

pub fn rereads(changes: &[Change]) -> Rereads {
    use RouteNetlinkMessage::{DelLink, NewLink};
    let mut r = Rereads::default();
    for c in changes {
        match c {
            Change::Netfilter => r.netfilter = true,
            Change::Tc => r.tc = true,
            Change::Rt(NewLink(_) | DelLink(_)) => r.xdp_features = true,
            c if is_rule(c) => r.rules = true,
            _ => {}
        }
    }
    r
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
        crate::socket::force_rcvbuf(&sock, crate::socket::NOTIFY_RCVBUF);
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
        // Drain what is queued, up to a batch: one wake-up per burst, not
        // per route (a BGP session delivers tens of thousands a second),
        // and the caller's work after a batch (map writes, re-reads) done
        // once for all of it.
        for _ in 0..MAX_DATAGRAMS_PER_WAIT {
            let n = match self.sock.recv(&mut &mut self.buf[..], libc::MSG_DONTWAIT) {
                Ok(n) => n,
                Err(e) if e.raw_os_error() == Some(libc::ENOBUFS) => {
                    bail!("netlink notifications overflowed: resync needed")
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                Err(e) => return Err(e).context("netlink receive"),
            };
            for m in wire::messages(&self.buf[..n]) {
                let m = m.context("a netlink notification")?;
                match notification(&m)? {
                    // Which of tc's objects changed does not matter: tc is
                    // read again, once.
                    Some(Change::Tc) if out.iter().any(|c| matches!(c, Change::Tc)) => {}
                    Some(c) => out.push(c),
                    None => {}
                }
            }
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire;

    #[test]
    fn each_notification_is_read_by_its_parser_and_says_what_to_read_again() {
        // A nexthop object (RTM_NEWNEXTHOP: nhmsg AF_INET, NHA_ID 7).
        let mut nh = wire::request(nhobj::RTM_NEWNEXTHOP, 0, 0, &[2, 0, 0, 0, 0, 0, 0, 0]);
        nh.extend(wire::attribute(1, &7u32.to_ne_bytes()));
        nh[0] = nh.len() as u8;
        // A qdisc (RTM_NEWQDISC) with options nobody decodes.
        let mut q = wire::request(crate::tc::RTM_NEWQDISC, 0, 0, &[0; 20]);
        q.extend(wire::attribute(2, &[0xff; 7]));
        q[0] = q.len() as u8;
        let read = |b: &[u8]| notification(&Message::new_checked(b).unwrap()).unwrap();
        assert!(matches!(
            read(&nh),
            Some(Change::Nexthop(NhMessage { id: 7, .. }))
        ));
        assert!(matches!(read(&q), Some(Change::Tc)));
        // NLMSG_DONE is nothing the router follows.
        assert!(read(&wire::request(libc::NLMSG_DONE as u16, 0, 0, &[0; 4])).is_none());
        let link = Change::Rt(RouteNetlinkMessage::NewLink(Default::default()));
        let rule = Change::Rt(RouteNetlinkMessage::DelRule(Default::default()));
        let route = Change::Rt(RouteNetlinkMessage::NewRoute(Default::default()));
        assert_eq!(rereads(std::slice::from_ref(&route)), Rereads::default());
        assert_eq!(
            rereads(&[route.clone(), link.clone(), Change::Netfilter, rule]),
            Rereads {
                netfilter: true,
                tc: false,
                xdp_features: true,
                rules: true
            }
        );
        assert_eq!(
            rereads(&[route, Change::Tc]),
            Rereads {
                tc: true,
                ..Default::default()
            }
        );
    }
}
