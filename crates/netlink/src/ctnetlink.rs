//! ctnetlink, the kernel's conntrack over netlink: what the stateful
//! firewall reads of it (the destroy events of the connections the fast
//! path carries).
use crate::wire::{Message, WireError};

/// NFNLGRP_CONNTRACK_DESTROY.
pub const NFNLGRP_CONNTRACK_DESTROY: u32 = 3;
/// nfnetlink's conntrack subsystem, and its delete message.
const NFNL_SUBSYS_CTNETLINK: u16 = 1;
const IPCTNL_MSG_CT_DELETE: u16 = 2;
const NFGENMSG: usize = 4;
const CTA_TUPLE_ORIG: u16 = 1;
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

/// The connection a conntrack destroy event names (its original tuple);
/// None for another message or a tuple without ports.
pub fn destroyed(m: &Message) -> Result<Option<Tuple>, WireError> {
    if m.kind() != (NFNL_SUBSYS_CTNETLINK << 8) | IPCTNL_MSG_CT_DELETE {
        return Ok(None);
    }
    let body = m.body("conntrack event", NFGENMSG)?;
    let mut ends = [End {
        addr: [0; 16],
        port: [0; 2],
    }; 2];
    let (mut ipv6, mut proto, mut ports) = (false, None, 0);
    for a in body.attributes() {
        let a = a?;
        if a.kind != CTA_TUPLE_ORIG {
            continue;
        }
        for t in a.nested_attributes() {
            let t = t?;
            match t.kind {
                CTA_TUPLE_IP => {
                    for ip in t.nested_attributes() {
                        let ip = ip?;
                        match ip.kind {
                            CTA_IP_V4_SRC | CTA_IP_V4_DST => {
                                let v: [u8; 4] = ip.bytes()?;
                                ends[(ip.kind == CTA_IP_V4_DST) as usize].addr[..4]
                                    .copy_from_slice(&v);
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

    /// A destroy event as ctnetlink sends it (ctnetlink_conntrack_event:
    /// the original tuple first) names the connection's ends.
    #[test]
    fn a_destroy_event_names_the_connections_original_tuple() {
        let ip = [
            attr(CTA_IP_V4_SRC, false, &[10, 0, 0, 2]),
            attr(CTA_IP_V4_DST, false, &[10, 0, 0, 1]),
        ]
        .concat();
        let proto = [
            attr(CTA_PROTO_NUM, false, &[17]),
            attr(CTA_PROTO_SRC_PORT, false, &4000u16.to_be_bytes()),
            attr(CTA_PROTO_DST_PORT, false, &53u16.to_be_bytes()),
        ]
        .concat();
        let tuple = [
            attr(CTA_TUPLE_IP, true, &ip),
            attr(CTA_TUPLE_PROTO, true, &proto),
        ]
        .concat();
        let mut body = vec![2u8, 0, 0, 0];
        body.extend(attr(CTA_TUPLE_ORIG, true, &tuple));
        // A reply tuple after it, which must not be taken for the original.
        body.extend(attr(
            2,
            true,
            &attr(
                CTA_TUPLE_IP,
                true,
                &attr(CTA_IP_V4_SRC, false, &[9, 9, 9, 9]),
            ),
        ));
        let kind = (NFNL_SUBSYS_CTNETLINK << 8) | IPCTNL_MSG_CT_DELETE;
        let msg = crate::wire::request(kind, 0, 0, &body);
        let m = Message::new_checked(&msg).unwrap();
        let want = Tuple {
            src: end([10, 0, 0, 2], 4000),
            dst: end([10, 0, 0, 1], 53),
            l4proto: 17,
            ipv6: false,
        };
        assert_eq!(destroyed(&m).unwrap(), Some(want));
        // IPCTNL_MSG_CT_NEW (0): not a deletion.
        let other = crate::wire::request(NFNL_SUBSYS_CTNETLINK << 8, 0, 0, &body);
        assert_eq!(
            destroyed(&Message::new_checked(&other).unwrap()).unwrap(),
            None
        );
    }
}
