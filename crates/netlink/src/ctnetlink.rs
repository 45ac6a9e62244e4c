//! ctnetlink, the kernel's conntrack over netlink: what the stateful
//! firewall reads of it (the destroy events of the connections the fast
//! path carries) and the one change it makes (TCP connections marked
//! liberal, as the kernel's flowtable marks those it offloads).
use crate::wire::{attribute, request, Message, WireError};

/// NFNLGRP_CONNTRACK_DESTROY.
pub const NFNLGRP_CONNTRACK_DESTROY: u32 = 3;
/// nfnetlink's conntrack subsystem, and its delete message.
const NFNL_SUBSYS_CTNETLINK: u16 = 1;
const IPCTNL_MSG_CT_NEW: u16 = 0;
const IPCTNL_MSG_CT_DELETE: u16 = 2;
const NLA_F_NESTED: u16 = 0x8000;
const NLM_F_REQUEST: u16 = 1;
const NLM_F_ACK: u16 = 4;
const CTA_PROTOINFO: u16 = 4;
const CTA_PROTOINFO_TCP: u16 = 1;
const CTA_PROTOINFO_TCP_FLAGS_ORIGINAL: u16 = 4;
const CTA_PROTOINFO_TCP_FLAGS_REPLY: u16 = 5;
/// ip_conntrack_tcp's per-direction flags (uapi nf_conntrack_tcp.h).
pub const IP_CT_TCP_FLAG_BE_LIBERAL: u8 = 0x08;
pub const IP_CT_TCP_FLAG_MAXACK_SET: u8 = 0x20;
const NFGENMSG: usize = 4;
const CTA_TUPLE_ORIG: u16 = 1;
const CTA_TUPLE_REPLY: u16 = 2;
const CTA_TUPLE_IP: u16 = 1;
const CTA_TUPLE_PROTO: u16 = 2;
const CTA_IP_V4_SRC: u16 = 1;
const CTA_IP_V4_DST: u16 = 2;
const CTA_IP_V6_SRC: u16 = 3;
const CTA_IP_V6_DST: u16 = 4;
const CTA_PROTO_NUM: u16 = 1;
const CTA_PROTO_SRC_PORT: u16 = 2;
const CTA_PROTO_DST_PORT: u16 = 3;

/// One end of a connection: address (network order, IPv4 in the first
/// four bytes) and port (network order).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct End {
    pub addr: [u8; 16],
    pub port: [u8; 2],
}

/// A connection's original tuple: from `src` to `dst`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Tuple {
    pub src: End,
    pub dst: End,
    pub l4proto: u8,
    pub ipv6: bool,
}

/// The connection a conntrack destroy event names: its original tuple,
/// and its reply tuple (what the reply direction's packets carry as they
/// arrive: under NAT not the original's inverse). None for another
/// message or an original tuple without ports.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Destroyed {
    pub orig: Tuple,
    pub reply: Option<Tuple>,
}

pub fn destroyed(m: &Message) -> Result<Option<Destroyed>, WireError> {
    if m.kind() != (NFNL_SUBSYS_CTNETLINK << 8) | IPCTNL_MSG_CT_DELETE {
        return Ok(None);
    }
    let body = m.body("conntrack event", NFGENMSG)?;
    let (mut orig, mut reply) = (None, None);
    for a in body.attributes() {
        let a = a?;
        match a.kind {
            CTA_TUPLE_ORIG => orig = tuple(&a)?,
            CTA_TUPLE_REPLY => reply = tuple(&a)?,
            _ => {}
        }
    }
    Ok(orig.map(|orig| Destroyed { orig, reply }))
}

/// A CTA_TUPLE_* attribute's tuple; None without its protocol and both
/// ports.
fn tuple(a: &crate::wire::Attr) -> Result<Option<Tuple>, WireError> {
    let mut ends = [End {
        addr: [0; 16],
        port: [0; 2],
    }; 2];
    let (mut ipv6, mut proto, mut ports) = (false, None, 0);
    for t in a.nested_attributes() {
        let t = t?;
        match t.kind {
            CTA_TUPLE_IP => {
                for ip in t.nested_attributes() {
                    let ip = ip?;
                    match ip.kind {
                        CTA_IP_V4_SRC | CTA_IP_V4_DST => {
                            let v: [u8; 4] = ip.bytes()?;
                            ends[(ip.kind == CTA_IP_V4_DST) as usize].addr[..4].copy_from_slice(&v);
                        }
                        CTA_IP_V6_SRC | CTA_IP_V6_DST => {
                            ends[(ip.kind == CTA_IP_V6_DST) as usize].addr = ip.bytes()?;
                            ipv6 = true;
                        }
                        _ => {}
                    }
                }
            }
            CTA_TUPLE_PROTO => {
                for p in t.nested_attributes() {
                    let p = p?;
                    match p.kind {
                        CTA_PROTO_NUM => proto = Some(p.u8()?),
                        CTA_PROTO_SRC_PORT | CTA_PROTO_DST_PORT => {
                            ends[(p.kind == CTA_PROTO_DST_PORT) as usize].port = p.bytes()?;
                            ports += 1;
                        }
                        _ => {}
                    }
                }
            }
            _ => {}
        }
    }
    Ok(match proto {
        Some(l4proto) if ports == 2 => Some(Tuple {
            src: ends[0],
            dst: ends[1],
            l4proto,
            ipv6,
        }),
        _ => None,
    })
}

/// The request that marks TCP connection `t` liberal both ways: its
/// windows no longer checked, what the kernel's flowtable does to the
/// connections it offloads (flow_offload_fixup_ct's counterpart,
/// nf_flow_table_core.c). `t` is either direction's tuple (the kernel
/// finds an entry by both). An update only (no NLM_F_CREATE): a
/// connection gone by then is ENOENT, never created. MAXACK_SET is
/// cleared with it: the fast path then carries the segments the kernel
/// would have learnt the acknowledgements from, and the kernel's check of
/// a later RST against a stale one would take a valid RST for invalid
/// once the sequence numbers have moved half their space on (the
/// flowtable clears it too, as it hands a connection back).
/// `ack`: ask for the kernel's answer even on success.
pub fn mark_liberal(t: &Tuple, seq: u32, ack: bool) -> Vec<u8> {
    let (src, dst, family, len) = if t.ipv6 {
        (CTA_IP_V6_SRC, CTA_IP_V6_DST, libc::AF_INET6 as u8, 16)
    } else {
        (CTA_IP_V4_SRC, CTA_IP_V4_DST, libc::AF_INET as u8, 4)
    };
    let ip = [
        attribute(src, &t.src.addr[..len]),
        attribute(dst, &t.dst.addr[..len]),
    ]
    .concat();
    let proto = [
        attribute(CTA_PROTO_NUM, &[t.l4proto]),
        attribute(CTA_PROTO_SRC_PORT, &t.src.port),
        attribute(CTA_PROTO_DST_PORT, &t.dst.port),
    ]
    .concat();
    let tuple = [
        attribute(CTA_TUPLE_IP | NLA_F_NESTED, &ip),
        attribute(CTA_TUPLE_PROTO | NLA_F_NESTED, &proto),
    ]
    .concat();
    // struct nf_ct_tcp_flags: the flags, then the mask of those changed.
    let flags = [
        IP_CT_TCP_FLAG_BE_LIBERAL,
        IP_CT_TCP_FLAG_BE_LIBERAL | IP_CT_TCP_FLAG_MAXACK_SET,
    ];
    let tcp = [
        attribute(CTA_PROTOINFO_TCP_FLAGS_ORIGINAL, &flags),
        attribute(CTA_PROTOINFO_TCP_FLAGS_REPLY, &flags),
    ]
    .concat();
    let protoinfo = attribute(CTA_PROTOINFO_TCP | NLA_F_NESTED, &tcp);
    // struct nfgenmsg: the family, version 0, resource id 0.
    let mut body = vec![family, 0, 0, 0];
    body.extend(attribute(CTA_TUPLE_ORIG | NLA_F_NESTED, &tuple));
    body.extend(attribute(CTA_PROTOINFO | NLA_F_NESTED, &protoinfo));
    request(
        (NFNL_SUBSYS_CTNETLINK << 8) | IPCTNL_MSG_CT_NEW,
        NLM_F_REQUEST | if ack { NLM_F_ACK } else { 0 },
        seq,
        &body,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn end(a: [u8; 4], port: u16) -> End {
        let mut addr = [0; 16];
        addr[..4].copy_from_slice(&a);
        End {
            addr,
            port: port.to_be_bytes(),
        }
    }

    fn attr(kind: u16, nested: bool, value: &[u8]) -> Vec<u8> {
        let len = 4 + value.len();
        let mut v = (len as u16).to_ne_bytes().to_vec();
        v.extend((kind | if nested { 0x8000 } else { 0 }).to_ne_bytes());
        v.extend(value);
        v.resize(len.div_ceil(4) * 4, 0);
        v
    }

    /// A CTA_TUPLE_* attribute's nested tuple, IPv4.
    fn tuple_attr(kind: u16, src: [u8; 4], dst: [u8; 4], sport: u16, dport: u16) -> Vec<u8> {
        let ip = [
            attr(CTA_IP_V4_SRC, false, &src),
            attr(CTA_IP_V4_DST, false, &dst),
        ]
        .concat();
        let proto = [
            attr(CTA_PROTO_NUM, false, &[17]),
            attr(CTA_PROTO_SRC_PORT, false, &sport.to_be_bytes()),
            attr(CTA_PROTO_DST_PORT, false, &dport.to_be_bytes()),
        ]
        .concat();
        attr(
            kind,
            true,
            &[
                attr(CTA_TUPLE_IP, true, &ip),
                attr(CTA_TUPLE_PROTO, true, &proto),
            ]
            .concat(),
        )
    }

    /// A destroy event as ctnetlink sends it (ctnetlink_conntrack_event:
    /// the original tuple, then the reply tuple) names the connection's
    /// ends both ways: here a masqueraded one, whose reply tuple is not
    /// the original's inverse.
    #[test]
    fn a_destroy_event_names_the_connections_tuples() {
        let mut body = vec![2u8, 0, 0, 0];
        body.extend(tuple_attr(
            CTA_TUPLE_ORIG,
            [10, 0, 0, 2],
            [198, 19, 0, 1],
            4000,
            53,
        ));
        body.extend(tuple_attr(
            CTA_TUPLE_REPLY,
            [198, 19, 0, 1],
            [192, 0, 2, 1],
            53,
            61000,
        ));
        let kind = (NFNL_SUBSYS_CTNETLINK << 8) | IPCTNL_MSG_CT_DELETE;
        let msg = crate::wire::request(kind, 0, 0, &body);
        let m = Message::new_checked(&msg).unwrap();
        let want = Destroyed {
            orig: Tuple {
                src: end([10, 0, 0, 2], 4000),
                dst: end([198, 19, 0, 1], 53),
                l4proto: 17,
                ipv6: false,
            },
            reply: Some(Tuple {
                src: end([198, 19, 0, 1], 53),
                dst: end([192, 0, 2, 1], 61000),
                l4proto: 17,
                ipv6: false,
            }),
        };
        assert_eq!(destroyed(&m).unwrap(), Some(want));
        // IPCTNL_MSG_CT_NEW (0): not a deletion.
        let other = crate::wire::request(NFNL_SUBSYS_CTNETLINK << 8, 0, 0, &body);
        assert_eq!(
            destroyed(&Message::new_checked(&other).unwrap()).unwrap(),
            None
        );
        // A reply tuple without its ports is none; an original one
        // without them, no connection.
        let mut cut = vec![2u8, 0, 0, 0];
        cut.extend(tuple_attr(
            CTA_TUPLE_ORIG,
            [10, 0, 0, 2],
            [198, 19, 0, 1],
            4000,
            53,
        ));
        cut.extend(attr(
            CTA_TUPLE_REPLY,
            true,
            &attr(
                CTA_TUPLE_IP,
                true,
                &attr(CTA_IP_V4_SRC, false, &[9, 9, 9, 9]),
            ),
        ));
        let msg = crate::wire::request(kind, 0, 0, &cut);
        let got = destroyed(&Message::new_checked(&msg).unwrap())
            .unwrap()
            .unwrap();
        assert_eq!((got.orig, got.reply), (want.orig, None));
        let mut no_orig = vec![2u8, 0, 0, 0];
        no_orig.extend(tuple_attr(
            CTA_TUPLE_REPLY,
            [198, 19, 0, 1],
            [192, 0, 2, 1],
            53,
            61000,
        ));
        let msg = crate::wire::request(kind, 0, 0, &no_orig);
        assert_eq!(
            destroyed(&Message::new_checked(&msg).unwrap()).unwrap(),
            None
        );
    }

    /// The liberal mark: an update (no create) of the entry the tuple
    /// finds, both directions' flags BE_LIBERAL set and MAXACK_SET
    /// cleared, as nlattr_to_tcp applies them (flags under the mask).
    #[test]
    fn the_liberal_mark_sets_both_directions_flags_under_their_mask() {
        let t = Tuple {
            src: end([10, 0, 0, 2], 40000),
            dst: end([198, 19, 0, 1], 5201),
            l4proto: 6,
            ipv6: false,
        };
        let msg = mark_liberal(&t, 9, false);
        let m = Message::new_checked(&msg).unwrap();
        assert_eq!(m.kind(), NFNL_SUBSYS_CTNETLINK << 8);
        assert_eq!(m.flags(), NLM_F_REQUEST);
        assert_eq!((m.seq(), m.payload()[0]), (9, libc::AF_INET as u8));
        let body = m.body("conntrack", NFGENMSG).unwrap();
        let top: Vec<_> = body.attributes().map(|a| a.unwrap()).collect();
        assert_eq!(
            top.iter().map(|a| a.kind).collect::<Vec<_>>(),
            [CTA_TUPLE_ORIG, CTA_PROTOINFO]
        );
        // The tuple reads back as the one given (the destroy event's
        // parser reads the same attributes).
        let event = request(
            (NFNL_SUBSYS_CTNETLINK << 8) | IPCTNL_MSG_CT_DELETE,
            0,
            0,
            &msg[16..],
        );
        assert_eq!(
            destroyed(&Message::new_checked(&event).unwrap())
                .unwrap()
                .map(|d| d.orig),
            Some(t)
        );
        let tcp: Vec<_> = top[1].nested_attributes().map(|a| a.unwrap()).collect();
        assert_eq!(tcp.len(), 1);
        assert_eq!(tcp[0].kind, CTA_PROTOINFO_TCP);
        let flags: Vec<_> = tcp[0]
            .nested_attributes()
            .map(|a| a.unwrap())
            .map(|a| (a.kind, a.bytes::<2>().unwrap()))
            .collect();
        assert_eq!(
            flags,
            [
                (CTA_PROTOINFO_TCP_FLAGS_ORIGINAL, [0x08, 0x28]),
                (CTA_PROTOINFO_TCP_FLAGS_REPLY, [0x08, 0x28])
            ]
        );
        let v6 = mark_liberal(&Tuple { ipv6: true, ..t }, 1, true);
        let m = Message::new_checked(&v6).unwrap();
        assert_eq!(
            (m.payload()[0], m.flags()),
            (libc::AF_INET6 as u8, NLM_F_REQUEST | NLM_F_ACK)
        );
    }
}
