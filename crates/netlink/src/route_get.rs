//! The kernel's own route lookup for one packet (`ip route get ... iif
//! ...`, RTM_GETROUTE): with an input interface it routes the packet as
//! received there (ip_route_input, ip6_route_input: the policy rules
//! walked with the packet's source, tos or traffic class, protocol and
//! ports), which makes it the oracle the tests hold the fast path's
//! routing to.
use crate::socket::socket_on;
use crate::wire::{self, Message};
use anyhow::{bail, Context, Result};
use netlink_sys::{protocols::NETLINK_ROUTE, Socket, SocketAddr};
use std::net::IpAddr;

const RTA_DST: u16 = 1;
const RTA_SRC: u16 = 2;
const RTA_IIF: u16 = 3;
const RTA_OIF: u16 = 4;
const RTA_GATEWAY: u16 = 5;
const RTA_TABLE: u16 = 15;
const RTA_VIA: u16 = 18;
const RTA_UID: u16 = 25;
const RTA_IP_PROTO: u16 = 27;
const RTA_SPORT: u16 = 28;
const RTA_DPORT: u16 = 29;
/// struct rtmsg's size, before the attributes.
const RTMSG: usize = 12;

/// A packet arriving on interface `iif`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Query {
    pub src: IpAddr,
    pub dst: IpAddr,
    pub iif: u32,
    /// IPv4's tos, IPv6's traffic class.
    pub tos: u8,
    /// 0: none given.
    pub proto: u8,
    pub sport: u16,
    pub dport: u16,
}

/// What the kernel does with it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Answer {
    /// A route: its type (RTN_UNICAST, RTN_LOCAL, ...), output
    /// interface, gateway if it has one, and table.
    Route {
        kind: u8,
        oif: u32,
        gateway: Option<IpAddr>,
        table: u32,
    },
    /// Refused with this errno: EINVAL for a blackhole, EHOSTUNREACH or
    /// ENETUNREACH for unreachable, EACCES for prohibit.
    Refused(i32),
}

/// A netlink socket for route lookups, in the calling thread's network
/// namespace as it was when opened.
pub struct RouteGet {
    socket: Socket,
    seq: u32,
}

impl RouteGet {
    pub fn open() -> Result<RouteGet> {
        let socket = socket_on(NETLINK_ROUTE, 0)?;
        socket.connect(&SocketAddr::new(0, 0))?;
        Ok(RouteGet { socket, seq: 0 })
    }

    /// The kernel's route for `q`.
    pub fn get(&mut self, q: &Query) -> Result<Answer> {
        let (family, bits) = match q.dst {
            IpAddr::V4(_) => (libc::AF_INET as u8, 32),
            IpAddr::V6(_) => (libc::AF_INET6 as u8, 128),
        };
        let bytes = |a: IpAddr| match a {
            IpAddr::V4(a) => a.octets().to_vec(),
            IpAddr::V6(a) => a.octets().to_vec(),
        };
        let mut body = vec![family, bits, bits, q.tos, 0, 0, 0, 0, 0, 0, 0, 0];
        body.extend(wire::attribute(RTA_DST, &bytes(q.dst)));
        body.extend(wire::attribute(RTA_SRC, &bytes(q.src)));
        body.extend(wire::attribute(RTA_IIF, &q.iif.to_ne_bytes()));
        // A forwarded packet's uid is 0 (the rules' uidrange sees it);
        // without this, IPv6's lookup with an input interface takes an
        // invalid uid, which no uid range holds (inet6_rtm_getroute).
        body.extend(wire::attribute(RTA_UID, &0u32.to_ne_bytes()));
        if q.proto != 0 {
            body.extend(wire::attribute(RTA_IP_PROTO, &[q.proto]));
            body.extend(wire::attribute(RTA_SPORT, &q.sport.to_be_bytes()));
            body.extend(wire::attribute(RTA_DPORT, &q.dport.to_be_bytes()));
        }
        self.seq += 1;
        let kind = libc::RTM_GETROUTE;
        let flags = libc::NLM_F_REQUEST as u16;
        self.socket
            .send(&wire::request(kind, flags, self.seq, &body), 0)
            .context("netlink route lookup")?;
        let mut rx = vec![0u8; 1 << 16];
        loop {
            let n = self
                .socket
                .recv(&mut &mut rx[..], 0)
                .context("netlink route lookup answer")?;
            for m in wire::messages(&rx[..n]) {
                let m: Message = m.context("the route lookup's answer")?;
                if m.seq() != self.seq {
                    continue;
                }
                if m.kind() as i32 == libc::NLMSG_ERROR {
                    return match m.error() {
                        Some(e) => Ok(Answer::Refused(e.abs())),
                        None => bail!("a truncated error answer to a route lookup"),
                    };
                }
                if m.kind() == libc::RTM_NEWROUTE {
                    return answer(&m, family);
                }
            }
        }
    }
}

/// A route message's type, output interface, gateway and table.
fn answer(m: &Message, family: u8) -> Result<Answer> {
    let b = m.body("rtmsg", RTMSG)?;
    let (kind, mut table) = (b.byte(7), b.byte(4) as u32);
    let (mut oif, mut gateway) = (0, None);
    for a in b.attributes() {
        let a = a?;
        match a.kind {
            RTA_OIF => oif = a.u32()?,
            RTA_TABLE => table = a.u32()?,
            RTA_GATEWAY if family == libc::AF_INET as u8 => {
                gateway = Some(IpAddr::from(a.bytes::<4>()?))
            }
            RTA_GATEWAY => gateway = Some(IpAddr::from(a.bytes::<16>()?)),
            // An IPv4 route through an IPv6 gateway: family, address.
            RTA_VIA => {
                let v = a.value;
                if v.len() == 18 {
                    let o: [u8; 16] = v[2..].try_into().unwrap();
                    gateway = Some(IpAddr::from(o));
                }
            }
            _ => {}
        }
    }
    Ok(Answer::Route {
        kind,
        oif,
        gateway,
        table,
    })
}
