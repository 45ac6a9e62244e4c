//! Nexthop objects (`ip nexthop`, Linux 5.3; what FRR installs its routes
//! with), from RTM_NEWNEXTHOP / RTM_DELNEXTHOP messages. netlink-packet-route
//! does not decode them, so this module reads the few attributes the
//! mirror needs (include/uapi/linux/nexthop.h); anything it does not know
//! makes the object one the kernel forwards through.
use crate::wire::Message;
use anyhow::{bail, Context, Result};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

pub const RTM_NEWNEXTHOP: u16 = 104;
pub const RTM_DELNEXTHOP: u16 = 105;
const RTM_GETNEXTHOP: u16 = 106;
/// The nexthop objects' multicast group (RTNLGRP_NEXTHOP): above 31, so
/// joined with NETLINK_ADD_MEMBERSHIP rather than bound.
pub const RTNLGRP_NEXTHOP: u32 = 32;

const NHA_ID: u16 = 1;
const NHA_GROUP: u16 = 2;
const NHA_BLACKHOLE: u16 = 4;
const NHA_OIF: u16 = 5;
const NHA_GATEWAY: u16 = 6;
const NHA_ENCAP_TYPE: u16 = 7;
const NHA_FDB: u16 = 11;

const NHMSG: usize = 8;

/// What a nexthop object forwards through.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum NhObject {
    /// A gateway on an interface.
    Gateway { oif: u32, gw: IpAddr },
    /// A group: member object ids and weights (1..).
    Group(Vec<(u32, u32)>),
    /// Anything else (a device route, blackhole, encapsulation, FDB): the
    /// kernel's.
    Kernel,
}

/// One RTM_NEWNEXTHOP or RTM_DELNEXTHOP.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NhMessage {
    pub id: u32,
    pub gone: bool,
    pub object: NhObject,
}

/// Reads one nexthop message (its netlink header included); None if it is
/// not one.
pub fn parse(msg: &[u8]) -> Result<Option<NhMessage>> {
    read(&Message::new_checked(msg)?)
}

/// [`parse`] of a checked message.
pub fn read(m: &Message) -> Result<Option<NhMessage>> {
    let kind = m.kind();
    if kind != RTM_NEWNEXTHOP && kind != RTM_DELNEXTHOP {
        return Ok(None);
    }
    let body = m.body("nexthop message", NHMSG)?;
    let family = body.byte(0);
    let (mut id, mut oif, mut gw, mut group) = (None, None, None, None);
    let mut other = false;
    for a in body.attributes() {
        let a = a.context("nexthop message")?;
        let v = a.value;
        match a.kind {
            NHA_ID => id = a.u32().ok(),
            NHA_OIF => oif = a.u32().ok(),
            NHA_GATEWAY => {
                gw = match (family as i32, v.len()) {
                    (libc::AF_INET, 4) => {
                        a.bytes::<4>().ok().map(|b| IpAddr::V4(Ipv4Addr::from(b)))
                    }
                    (libc::AF_INET6, 16) => {
                        a.bytes::<16>().ok().map(|b| IpAddr::V6(Ipv6Addr::from(b)))
                    }
                    _ => {
                        other = true;
                        None
                    }
                }
            }
            NHA_GROUP => {
                // struct nexthop_grp: id, weight - 1 (low byte), its high
                // byte (Linux 6.12), reserved.
                group = Some(
                    v.chunks_exact(8)
                        .map(|c| {
                            let member = u32::from_ne_bytes([c[0], c[1], c[2], c[3]]);
                            let weight = (c[5] as u32) << 8 | c[4] as u32;
                            (member, weight + 1)
                        })
                        .collect::<Vec<_>>(),
                )
            }
            NHA_BLACKHOLE | NHA_ENCAP_TYPE | NHA_FDB => other = true,
            _ => {}
        }
    }
    let id = id.context("nexthop message without NHA_ID")?;
    let object = match (group, gw, oif, other) {
        (Some(members), _, _, false) if !members.is_empty() => NhObject::Group(members),
        (None, Some(gw), Some(oif), false) => NhObject::Gateway { oif, gw },
        _ => NhObject::Kernel,
    };
    Ok(Some(NhMessage {
        id,
        gone: kind == RTM_DELNEXTHOP,
        object,
    }))
}

/// The kernel's nexthop objects now: empty on a kernel without them.
pub fn dump() -> Result<Vec<NhMessage>> {
    match crate::socket::raw_dump(RTM_GETNEXTHOP, &[0u8; NHMSG], "nexthop")? {
        Ok(msgs) => {
            let mut out = Vec::new();
            for m in msgs {
                out.extend(parse(&m)?);
            }
            Ok(out)
        }
        // No nexthop objects in this kernel: none to mirror.
        Err(errno) if errno == libc::EOPNOTSUPP || errno == libc::EINVAL => Ok(Vec::new()),
        Err(errno) => bail!(
            "netlink nexthop dump failed: {}",
            std::io::Error::from_raw_os_error(errno)
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::NLMSG_HDRLEN as NLMSG_HDR;

    fn attr(kind: u16, v: &[u8]) -> Vec<u8> {
        let mut a = ((4 + v.len()) as u16).to_ne_bytes().to_vec();
        a.extend(kind.to_ne_bytes());
        a.extend(v);
        while !a.len().is_multiple_of(4) {
            a.push(0);
        }
        a
    }

    fn message(kind: u16, family: u8, attrs: &[Vec<u8>]) -> Vec<u8> {
        let body: Vec<u8> = attrs.concat();
        let len = (NLMSG_HDR + NHMSG + body.len()) as u32;
        let mut m = len.to_ne_bytes().to_vec();
        m.extend(kind.to_ne_bytes());
        m.extend([0u8; 10]);
        m.extend([family, 0, 0, 0, 0, 0, 0, 0]);
        m.extend(body);
        m
    }

    #[test]
    fn gateways_groups_and_the_rest() {
        let gw4 = message(
            RTM_NEWNEXTHOP,
            libc::AF_INET as u8,
            &[
                attr(NHA_ID, &7u32.to_ne_bytes()),
                attr(NHA_GATEWAY, &[198, 19, 0, 1]),
                attr(NHA_OIF, &3u32.to_ne_bytes()),
            ],
        );
        assert_eq!(
            parse(&gw4).unwrap(),
            Some(NhMessage {
                id: 7,
                gone: false,
                object: NhObject::Gateway {
                    oif: 3,
                    gw: "198.19.0.1".parse().unwrap()
                }
            })
        );
        let gw6 = "2001:db8::1".parse::<Ipv6Addr>().unwrap().octets();
        let m6 = message(
            RTM_DELNEXTHOP,
            libc::AF_INET6 as u8,
            &[
                attr(NHA_ID, &8u32.to_ne_bytes()),
                attr(NHA_GATEWAY, &gw6),
                attr(NHA_OIF, &4u32.to_ne_bytes()),
            ],
        );
        let p = parse(&m6).unwrap().unwrap();
        assert!(p.gone);
        assert_eq!(
            p.object,
            NhObject::Gateway {
                oif: 4,
                gw: IpAddr::V6(gw6.into())
            }
        );
        // Weights are stored minus one; 300 needs the high byte.
        let mut grp = Vec::new();
        for (id, w) in [(7u32, 1u32), (8, 300)] {
            grp.extend(id.to_ne_bytes());
            grp.push(((w - 1) & 0xff) as u8);
            grp.push(((w - 1) >> 8) as u8);
            grp.extend([0, 0]);
        }
        let g = message(
            RTM_NEWNEXTHOP,
            0,
            &[attr(NHA_ID, &9u32.to_ne_bytes()), attr(NHA_GROUP, &grp)],
        );
        assert_eq!(
            parse(&g).unwrap().unwrap().object,
            NhObject::Group(vec![(7, 1), (8, 300)])
        );
        let dev = message(
            RTM_NEWNEXTHOP,
            libc::AF_INET as u8,
            &[
                attr(NHA_ID, &10u32.to_ne_bytes()),
                attr(NHA_OIF, &3u32.to_ne_bytes()),
            ],
        );
        assert_eq!(parse(&dev).unwrap().unwrap().object, NhObject::Kernel);
        let hole = message(
            RTM_NEWNEXTHOP,
            libc::AF_INET as u8,
            &[attr(NHA_ID, &11u32.to_ne_bytes()), attr(NHA_BLACKHOLE, &[])],
        );
        assert_eq!(parse(&hole).unwrap().unwrap().object, NhObject::Kernel);
    }

    #[test]
    fn bad_messages_are_errors_not_panics() {
        assert!(parse(&[0u8; 10]).is_err());
        let mut m = message(RTM_NEWNEXTHOP, 2, &[attr(NHA_ID, &1u32.to_ne_bytes())]);
        m[NLMSG_HDR + NHMSG] = 200; // an attribute longer than the message
        assert!(parse(&m).is_err());
        let no_id = message(RTM_NEWNEXTHOP, 2, &[attr(NHA_OIF, &1u32.to_ne_bytes())]);
        assert!(parse(&no_id).is_err());
        let route = message(24, 2, &[]);
        assert_eq!(parse(&route).unwrap(), None);
    }
}
