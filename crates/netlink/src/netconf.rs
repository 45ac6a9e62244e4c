//! Whether the kernel forwards, from RTM_NEWNETCONF messages (the
//! `forwarding` sysctls, include/uapi/linux/netconf.h), which
//! netlink-packet-route does not decode. The kernel checks IPv4's on the
//! interface a packet came in on (`net.ipv4.conf.<dev>.forwarding`, which
//! `conf.all` sets on every interface), IPv6's for the whole namespace
//! (`net.ipv6.conf.all.forwarding`); where it would not forward, neither
//! may the fast path. Also IPv4's reverse path filtering (`rp_filter`),
//! which the kernel takes as the larger of `conf.all`'s and the
//! interface's.
use crate::socket::raw_dump;
use crate::wire::Message;
use anyhow::{bail, Context, Result};

pub const RTM_NEWNETCONF: u16 = 80;
pub const RTM_DELNETCONF: u16 = 81;
const RTM_GETNETCONF: u16 = 82;
/// Their multicast groups (RTNLGRP_IPV4_NETCONF, RTNLGRP_IPV6_NETCONF).
pub const RTNLGRP_IPV4_NETCONF: u32 = 24;
pub const RTNLGRP_IPV6_NETCONF: u32 = 25;

const NETCONFA_IFINDEX: u16 = 1;
const NETCONFA_FORWARDING: u16 = 2;
const NETCONFA_RP_FILTER: u16 = 3;
/// NETCONFA_IFINDEX of `conf.all` and of `conf.default`.
pub const IFINDEX_ALL: i32 = -1;

/// Whether IPv6 is on for interface `dev` (net.ipv6.conf.<dev>.
/// disable_ipv6 is 0), as the calling thread's namespace has it. The
/// kernel drops IPv6 arriving on an interface where it is off
/// (ipv6_rcv), or which has no IPv6 configuration at all (an MTU below
/// 1280 removes it: then the sysctl is gone too). netconf does not carry
/// the setting and nothing is notified when it changes, only its effects
/// (addresses and routes going), so it is read.
pub fn ipv6_enabled(dev: &str) -> bool {
    let path = format!("/proc/sys/net/ipv6/conf/{dev}/disable_ipv6");
    std::fs::read_to_string(path).is_ok_and(|v| v.trim() == "0")
}

/// One RTM_NEWNETCONF or RTM_DELNETCONF.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Netconf {
    pub ipv6: bool,
    /// An interface, IFINDEX_ALL, or -2 (`conf.default`).
    pub ifindex: i32,
    /// The forwarding setting, when the message carries it (a change of
    /// another setting carries only that one). None also when `gone`.
    pub forwarding: Option<bool>,
    /// IPv4 reverse path filtering: 0 off, 1 strict, 2 loose; when carried.
    pub rp_filter: Option<u8>,
    /// The interface's settings went with it (RTM_DELNETCONF).
    pub gone: bool,
}

/// Reads one netconf message (its netlink header included); None if it
/// is not one, or of a family other than IPv4 and IPv6.
pub fn parse(msg: &[u8]) -> Result<Option<Netconf>> {
    read(&Message::new_checked(msg)?)
}

/// [`parse`] of a checked message.
pub fn read(m: &Message) -> Result<Option<Netconf>> {
    let kind = m.kind();
    if kind != RTM_NEWNETCONF && kind != RTM_DELNETCONF {
        return Ok(None);
    }
    // struct netconfmsg is one byte, its attributes aligned after it.
    let body = m.body("netconf message", 1)?;
    let ipv6 = match body.byte(0) as i32 {
        libc::AF_INET => false,
        libc::AF_INET6 => true,
        _ => return Ok(None),
    };
    let (mut ifindex, mut forwarding, mut rp_filter) = (None, None, None);
    for a in body.attributes() {
        let a = a.context("netconf message")?;
        match a.kind {
            NETCONFA_IFINDEX => ifindex = a.i32().ok(),
            NETCONFA_FORWARDING => forwarding = a.i32().ok().map(|v| v != 0),
            NETCONFA_RP_FILTER => rp_filter = a.i32().ok().map(|v| v.clamp(0, 2) as u8),
            _ => {}
        }
    }
    let Some(ifindex) = ifindex else {
        bail!("netconf message without an interface index");
    };
    let gone = kind == RTM_DELNETCONF;
    Ok(Some(Netconf {
        ipv6,
        ifindex,
        forwarding: if gone { None } else { forwarding },
        rp_filter: if gone { None } else { rp_filter },
        gone,
    }))
}

/// The IPv4 and IPv6 settings of every interface, `all` and `default`.
pub fn dump() -> Result<Vec<Netconf>> {
    let mut out = Vec::new();
    for family in [libc::AF_INET, libc::AF_INET6] {
        let body = [family as u8, 0, 0, 0];
        match raw_dump(RTM_GETNETCONF, &body, "netconf")? {
            Ok(msgs) => {
                for m in msgs {
                    out.extend(parse(&m)?);
                }
            }
            Err(errno) => bail!(
                "netlink netconf dump failed: {}",
                std::io::Error::from_raw_os_error(errno)
            ),
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::NLMSG_HDRLEN as NLMSG_HDR;
    /// struct netconfmsg, one byte, aligned to 4.
    const NCMSG: usize = 4;

    fn attr(kind: u16, v: i32) -> Vec<u8> {
        let mut a = 8u16.to_ne_bytes().to_vec();
        a.extend(kind.to_ne_bytes());
        a.extend(v.to_ne_bytes());
        a
    }

    fn message(kind: u16, family: i32, attrs: &[Vec<u8>]) -> Vec<u8> {
        let body: Vec<u8> = attrs.concat();
        let mut m = ((NLMSG_HDR + NCMSG + body.len()) as u32)
            .to_ne_bytes()
            .to_vec();
        m.extend(kind.to_ne_bytes());
        m.extend([0u8; 10]);
        m.extend([family as u8, 0, 0, 0]);
        m.extend(body);
        m
    }

    #[test]
    fn forwarding_per_interface_and_for_all() {
        let v4 = message(
            RTM_NEWNETCONF,
            libc::AF_INET,
            &[attr(NETCONFA_IFINDEX, 3), attr(NETCONFA_FORWARDING, 0)],
        );
        assert_eq!(
            parse(&v4).unwrap(),
            Some(Netconf {
                ipv6: false,
                ifindex: 3,
                forwarding: Some(false),
                rp_filter: None,
                gone: false
            })
        );
        let all6 = message(
            RTM_NEWNETCONF,
            libc::AF_INET6,
            &[
                attr(NETCONFA_IFINDEX, IFINDEX_ALL),
                attr(NETCONFA_RP_FILTER, 1),
                attr(NETCONFA_FORWARDING, 1),
            ],
        );
        let p = parse(&all6).unwrap().unwrap();
        assert!(p.ipv6 && p.ifindex == IFINDEX_ALL && p.forwarding == Some(true));
        assert_eq!(p.rp_filter, Some(1));
        // A change of one setting carries that one only.
        let rp = message(
            RTM_NEWNETCONF,
            libc::AF_INET,
            &[attr(NETCONFA_IFINDEX, 3), attr(NETCONFA_RP_FILTER, 2)],
        );
        let p = parse(&rp).unwrap().unwrap();
        assert_eq!((p.forwarding, p.rp_filter), (None, Some(2)));
        let mc = message(
            RTM_NEWNETCONF,
            libc::AF_INET,
            &[attr(NETCONFA_IFINDEX, 3), attr(4, 1)],
        );
        let p = parse(&mc).unwrap().unwrap();
        assert_eq!((p.forwarding, p.rp_filter), (None, None));
        let gone = message(RTM_DELNETCONF, libc::AF_INET, &[attr(NETCONFA_IFINDEX, 3)]);
        assert!(parse(&gone).unwrap().unwrap().gone);
        let mpls = message(RTM_NEWNETCONF, 28, &[attr(NETCONFA_IFINDEX, 3)]);
        assert_eq!(parse(&mpls).unwrap(), None);
    }

    #[test]
    fn bad_messages_are_errors_not_panics() {
        assert!(parse(&[0u8; 8]).is_err());
        let mut m = message(RTM_NEWNETCONF, libc::AF_INET, &[attr(NETCONFA_IFINDEX, 3)]);
        m[NLMSG_HDR + NCMSG] = 200; // an attribute longer than the message
        assert!(parse(&m).is_err());
        let no_index = message(
            RTM_NEWNETCONF,
            libc::AF_INET,
            &[attr(NETCONFA_FORWARDING, 1)],
        );
        assert!(parse(&no_index).is_err());
        assert_eq!(parse(&message(24, libc::AF_INET, &[])).unwrap(), None);
    }
}
