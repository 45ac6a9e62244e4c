//! What each interface's driver does with frames redirected to it in XDP:
//! the kernel's `xdp_features`, read over the `netdev` generic netlink
//! family (Linux 6.3 and later). The kernel itself checks these bits when a
//! redirect reaches the device (__xdp_enqueue): without NDO_XMIT the frame
//! is dropped, without NDO_XMIT_SG so is a multi-buffer one, silently both
//! times. A veth has NDO_XMIT only while its peer can take XDP frames (GRO
//! on, or an XDP program). So the fast path sends only where the bits say
//! the frame will leave, and passes the rest to the kernel.
use crate::socket::raw_dump_on;
use crate::wire::Message;
use anyhow::{bail, Result};
use std::collections::BTreeMap;

const NETLINK_GENERIC: isize = 16;
const GENL_ID_CTRL: u16 = 16;
const CTRL_CMD_GETFAMILY: u8 = 3;
const CTRL_ATTR_FAMILY_ID: u16 = 1;
const CTRL_ATTR_FAMILY_NAME: u16 = 2;
const NETDEV_CMD_DEV_GET: u8 = 1;
const NETDEV_A_DEV_IFINDEX: u16 = 1;
const NETDEV_A_DEV_XDP_FEATURES: u16 = 3;
pub const NETDEV_XDP_ACT_NDO_XMIT: u64 = 4;
pub const NETDEV_XDP_ACT_NDO_XMIT_SG: u64 = 64;
/// struct genlmsghdr.
const GENLMSG: usize = 4;

/// What a device takes as the target of an XDP redirect.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct XdpXmit {
    /// Frames redirected to it leave (NETDEV_XDP_ACT_NDO_XMIT).
    pub redirect: bool,
    /// Multi-buffer frames too (NETDEV_XDP_ACT_NDO_XMIT_SG).
    pub multibuf: bool,
}

impl XdpXmit {
    /// What a kernel without the netdev family is taken to do: single
    /// buffers leave (as linerate assumed before it could ask), multi-buffer
    /// frames go to the kernel.
    pub const UNKNOWN: XdpXmit = XdpXmit {
        redirect: true,
        multibuf: false,
    };

    pub fn from_bits(bits: u64) -> XdpXmit {
        XdpXmit {
            redirect: bits & NETDEV_XDP_ACT_NDO_XMIT != 0,
            multibuf: bits & (NETDEV_XDP_ACT_NDO_XMIT | NETDEV_XDP_ACT_NDO_XMIT_SG)
                == NETDEV_XDP_ACT_NDO_XMIT | NETDEV_XDP_ACT_NDO_XMIT_SG,
        }
    }
}

/// Every device of the calling thread's network namespace, by ifindex, or
/// None where the kernel has no netdev family (before 6.3).
pub fn dump() -> Result<Option<BTreeMap<u32, XdpXmit>>> {
    Ok(dump_bits()?.map(|all| {
        all.into_iter()
            .map(|(i, b)| (i, XdpXmit::from_bits(b)))
            .collect()
    }))
}

/// Every device's xdp_features bits (NETDEV_XDP_ACT_*), by ifindex, or
/// None where the kernel has no netdev family.
pub fn dump_bits() -> Result<Option<BTreeMap<u32, u64>>> {
    let Some(family) = netdev_family()? else {
        return Ok(None);
    };
    let body = [NETDEV_CMD_DEV_GET, 1, 0, 0];
    match raw_dump_on(NETLINK_GENERIC, family, &body, "netdev")? {
        Ok(msgs) => Ok(Some(parse_devices(&msgs)?)),
        Err(errno) => bail!(
            "cannot read the devices' XDP features: {}",
            std::io::Error::from_raw_os_error(errno)
        ),
    }
}

/// The netdev family's id, from the generic netlink controller.
fn netdev_family() -> Result<Option<u16>> {
    let body = [CTRL_CMD_GETFAMILY, 1, 0, 0];
    match raw_dump_on(
        NETLINK_GENERIC,
        GENL_ID_CTRL,
        &body,
        "generic netlink families",
    )? {
        Ok(msgs) => Ok(family_id(&msgs, "netdev")),
        Err(errno) => bail!(
            "cannot list the generic netlink families: {}",
            std::io::Error::from_raw_os_error(errno)
        ),
    }
}

/// The id of family `name` among CTRL_CMD_GETFAMILY answers.
fn family_id(msgs: &[Vec<u8>], name: &str) -> Option<u16> {
    msgs.iter().find_map(|m| {
        let (mut id, mut found) = (None, false);
        let body = Message::new_checked(m)
            .ok()?
            .body("genetlink family", GENLMSG)
            .ok()?;
        for a in body.attributes().map_while(Result::ok) {
            match a.kind {
                CTRL_ATTR_FAMILY_ID if a.value.len() >= 2 => {
                    id = Some(u16::from_ne_bytes([a.value[0], a.value[1]]))
                }
                CTRL_ATTR_FAMILY_NAME => found = a.text() == name,
                _ => {}
            }
        }
        id.filter(|_| found)
    })
}

/// NETDEV_CMD_DEV_GET answers: ifindex -> its bits. A device whose answer
/// lacks either attribute is left out.
fn parse_devices(msgs: &[Vec<u8>]) -> Result<BTreeMap<u32, u64>> {
    let mut out = BTreeMap::new();
    for m in msgs {
        let body = Message::new_checked(m)?.body("netdev answer", GENLMSG)?;
        let (mut ifindex, mut bits) = (None, None);
        for a in body.attributes().map_while(Result::ok) {
            match a.kind {
                NETDEV_A_DEV_IFINDEX => ifindex = a.u32().ok(),
                NETDEV_A_DEV_XDP_FEATURES => bits = a.u64().ok(),
                _ => {}
            }
        }
        if let (Some(i), Some(b)) = (ifindex, bits) {
            out.insert(i, b);
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A netlink message with a generic header and these attributes.
    fn message(attrs: &[(u16, Vec<u8>)]) -> Vec<u8> {
        let mut m = vec![0u8; crate::wire::NLMSG_HDRLEN + GENLMSG];
        for (kind, v) in attrs {
            m.extend_from_slice(&((4 + v.len()) as u16).to_ne_bytes());
            m.extend_from_slice(&kind.to_ne_bytes());
            m.extend_from_slice(v);
            while !m.len().is_multiple_of(4) {
                m.push(0);
            }
        }
        let len = m.len() as u32;
        m[0..4].copy_from_slice(&len.to_ne_bytes());
        m
    }

    #[test]
    fn devices_and_their_bits() {
        let veth_with_napi_peer = message(&[
            (NETDEV_A_DEV_IFINDEX, 7u32.to_ne_bytes().to_vec()),
            (NETDEV_A_DEV_XDP_FEATURES, 0x67u64.to_ne_bytes().to_vec()),
        ]);
        let veth_without = message(&[
            (NETDEV_A_DEV_IFINDEX, 8u32.to_ne_bytes().to_vec()),
            (NETDEV_A_DEV_XDP_FEATURES, 0x23u64.to_ne_bytes().to_vec()),
        ]);
        let no_sg = message(&[
            (NETDEV_A_DEV_XDP_FEATURES, 0x7u64.to_ne_bytes().to_vec()),
            (NETDEV_A_DEV_IFINDEX, 9u32.to_ne_bytes().to_vec()),
        ]);
        let no_features = message(&[(NETDEV_A_DEV_IFINDEX, 10u32.to_ne_bytes().to_vec())]);
        let truncated_value = message(&[
            (NETDEV_A_DEV_IFINDEX, 11u32.to_ne_bytes().to_vec()),
            (NETDEV_A_DEV_XDP_FEATURES, vec![0x67, 0, 0]),
        ]);
        let got = parse_devices(&[
            veth_with_napi_peer,
            veth_without,
            no_sg,
            no_features,
            truncated_value,
        ])
        .unwrap();
        let x = |redirect, multibuf| XdpXmit { redirect, multibuf };
        assert_eq!(
            got.into_iter()
                .map(|(i, b)| (i, XdpXmit::from_bits(b)))
                .collect::<Vec<_>>(),
            [
                (7, x(true, true)),
                (8, x(false, false)),
                (9, x(true, false))
            ]
        );
        assert!(parse_devices(&[vec![0u8; 10]]).is_err());
        // SG without NDO_XMIT is not a redirect target at all.
        assert_eq!(XdpXmit::from_bits(64), x(false, false));
    }

    #[test]
    fn the_family_by_name() {
        let f = |id: u16, name: &str| {
            message(&[
                (CTRL_ATTR_FAMILY_ID, id.to_ne_bytes().to_vec()),
                (CTRL_ATTR_FAMILY_NAME, format!("{name}\0").into_bytes()),
            ])
        };
        let msgs = [f(16, "nlctrl"), f(25, "netdev"), f(26, "netdevx")];
        assert_eq!(family_id(&msgs, "netdev"), Some(25));
        assert_eq!(family_id(&msgs[..1], "netdev"), None);
        assert_eq!(family_id(&[vec![1, 2, 3]], "netdev"), None);
    }
}
