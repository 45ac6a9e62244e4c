//! Whether tc acts on what the kernel forwards through one of the router's
//! interfaces: on its ingress (filters under an `ingress` or `clsact`
//! qdisc, tcx programs), or on its egress (a qdisc someone configured:
//! shaping, prioritising, filtering; filters under `clsact`; tcx
//! programs). XDP runs before tc ingress, and a frame it redirects leaves
//! through the driver's XDP transmit, past the egress qdisc and tc egress:
//! a frame the fast path forwarded would skip a policer, a shaper or a
//! filter the kernel applies. So what comes in where tc acts on ingress,
//! and what would go out where it acts on egress, goes to the kernel.
//!
//! A qdisc the kernel attached by itself (handle 0: `noqueue` on a veth,
//! `mq` and its `fq_codel` or `pfifo_fast` children on a NIC) is not
//! configuration, and neither is `noqueue` (it queues nothing); any other
//! qdisc is. Qdiscs and filters are read over rtnetlink (parsed here: only
//! the tcmsg header and the kind are needed, and netlink-packet-route
//! decodes every qdisc's options, failing on those it does not know);
//! their changes are notified (RTNLGRP_TC). tcx programs are asked for
//! with BPF_PROG_QUERY, and are not notified: read again once a second.
use crate::socket::raw_dump;
use crate::wire::{Body, Message};
use anyhow::{bail, Result};
use std::collections::BTreeMap;

/// RTNLGRP_TC: qdisc, class, filter and chain changes.
pub const RTNLGRP_TC: u32 = 4;
pub const RTM_NEWQDISC: u16 = 36;
const RTM_GETQDISC: u16 = 38;
const RTM_GETTFILTER: u16 = 46;
/// The tc messages (qdiscs, classes, filters: RTM_NEWQDISC to
/// RTM_GETTFILTER; chains: RTM_NEWCHAIN to RTM_GETCHAIN).
pub fn is_tc_message(kind: u16) -> bool {
    (RTM_NEWQDISC..=RTM_GETTFILTER).contains(&kind) || (100..=102).contains(&kind)
}

const TCA_KIND: u16 = 1;
/// struct tcmsg: family, padding, ifindex, handle, parent, info.
const TCMSG: usize = 20;
/// Filter parents of the ingress and egress blocks of clsact (ingress
/// takes the first): ffff:fff2, ffff:fff3.
const PARENT_INGRESS: u32 = 0xffff_fff2;
const PARENT_EGRESS: u32 = 0xffff_fff3;

/// What tc does on an interface, each entry named for logs ("tc filter
/// matchall on ingress", "tc qdisc tbf 8001: on egress"); empty: nothing,
/// the fast path may take that side.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TcHooks {
    pub ingress: Vec<String>,
    pub egress: Vec<String>,
}

/// A qdisc as the kernel dumps it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Qdisc {
    ifindex: u32,
    handle: u32,
    kind: String,
}

/// Where a qdisc acts.
#[derive(Debug, PartialEq, Eq)]
enum Role {
    /// Attached by the kernel, or queueing nothing.
    Default,
    /// `ingress`: filters on ingress.
    Ingress,
    /// `clsact`: filters on ingress and egress.
    Clsact,
    /// Configured on egress: it acts on what leaves.
    Egress,
}

impl Qdisc {
    fn role(&self) -> Role {
        match self.kind.as_str() {
            "ingress" => Role::Ingress,
            "clsact" => Role::Clsact,
            "noqueue" => Role::Default,
            _ if self.handle & 0xffff_0000 == 0 => Role::Default,
            _ => Role::Egress,
        }
    }
}

/// tc's hooks on each interface of `ifindexes`, in the calling thread's
/// namespace now (interfaces without any are left out).
pub fn dump(ifindexes: &[u32]) -> Result<BTreeMap<u32, TcHooks>> {
    let mut out: BTreeMap<u32, TcHooks> = BTreeMap::new();
    for q in qdiscs()? {
        if !ifindexes.contains(&q.ifindex) {
            continue;
        }
        let hooks = out.entry(q.ifindex).or_default();
        match q.role() {
            Role::Default => {}
            Role::Egress => hooks
                .egress
                .push(format!("tc qdisc {} {:x}:", q.kind, q.handle >> 16)),
            Role::Ingress => hooks.ingress.extend(filters(&q, PARENT_INGRESS, "ingress")),
            Role::Clsact => {
                hooks.ingress.extend(filters(&q, PARENT_INGRESS, "ingress"));
                hooks.egress.extend(filters(&q, PARENT_EGRESS, "egress"));
            }
        }
    }
    for &i in ifindexes {
        for (ingress, side) in [(true, "ingress"), (false, "egress")] {
            let n = tcx_programs(i, ingress)?;
            if n > 0 {
                let hooks = out.entry(i).or_default();
                let what = format!("{n} tcx program(s) on {side}");
                if ingress {
                    hooks.ingress.push(what);
                } else {
                    hooks.egress.push(what);
                }
            }
        }
    }
    out.retain(|_, h| *h != TcHooks::default());
    Ok(out)
}

/// Every qdisc of the namespace.
fn qdiscs() -> Result<Vec<Qdisc>> {
    match raw_dump(RTM_GETQDISC, &[0u8; TCMSG], "qdisc")? {
        Ok(msgs) => Ok(msgs.iter().filter_map(|m| parse_qdisc(m)).collect()),
        Err(errno) => bail!("the qdiscs: {}", std::io::Error::from_raw_os_error(errno)),
    }
}

/// One RTM_NEWQDISC (netlink header included).
pub(crate) fn parse_qdisc(m: &[u8]) -> Option<Qdisc> {
    let body = Message::new_checked(m).ok()?.body("qdisc", TCMSG).ok()?;
    let ifindex = body.word(4);
    let handle = body.word(8);
    let kind = kind_of(&body)?;
    Some(Qdisc {
        ifindex,
        handle,
        kind,
    })
}

/// TCA_KIND: what a qdisc or filter is.
fn kind_of(body: &Body) -> Option<String> {
    body.attributes()
        .map_while(Result::ok)
        .find(|a| a.kind == TCA_KIND)
        .map(|a| a.text())
}

/// The filters in the block of `q` that `parent` names, by kind; if they
/// cannot be read, the qdisc itself (never bypass what may filter).
fn filters(q: &Qdisc, parent: u32, side: &str) -> Vec<String> {
    let mut body = [0u8; TCMSG];
    body[4..8].copy_from_slice(&q.ifindex.to_ne_bytes());
    body[12..16].copy_from_slice(&parent.to_ne_bytes());
    let unreadable = || vec![format!("tc qdisc {} on {side}", q.kind)];
    let Ok(Ok(msgs)) = raw_dump(RTM_GETTFILTER, &body, "tc filter") else {
        return unreadable();
    };
    let mut kinds: Vec<String> = msgs
        .iter()
        .filter_map(|m| {
            kind_of(
                &Message::new_checked(m)
                    .ok()?
                    .body("tc filter", TCMSG)
                    .ok()?,
            )
        })
        .collect();
    kinds.sort();
    kinds.dedup();
    kinds
        .into_iter()
        .map(|k| format!("tc filter {k} on {side}"))
        .collect()
}

/// How many tcx programs hang on the ingress (or egress) of `ifindex`; 0
/// where the kernel has no tcx.
fn tcx_programs(ifindex: u32, ingress: bool) -> Result<u32> {
    let kind = if ingress {
        libbpf_sys::BPF_TCX_INGRESS
    } else {
        libbpf_sys::BPF_TCX_EGRESS
    };
    // SAFETY: a zeroed opts struct with its size set, as libbpf wants;
    // no program id array, so only the count is written.
    let mut opts: libbpf_sys::bpf_prog_query_opts = unsafe { std::mem::zeroed() };
    opts.sz = std::mem::size_of::<libbpf_sys::bpf_prog_query_opts>() as _;
    let r = unsafe { libbpf_sys::bpf_prog_query_opts(ifindex as i32, kind, &mut opts) };
    match -r {
        // SAFETY: the count is what the kernel wrote.
        0 => Ok(unsafe { opts.__bindgen_anon_1.count }),
        // No tcx in this kernel, or the interface just went.
        libc::EINVAL | libc::ENODEV | libc::EOPNOTSUPP => Ok(0),
        errno => bail!(
            "the tcx programs of interface {ifindex}: {}",
            std::io::Error::from_raw_os_error(errno)
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn qdisc(kind: &str, handle: u32) -> Qdisc {
        Qdisc {
            ifindex: 2,
            handle,
            kind: kind.into(),
        }
    }

    #[test]
    fn qdiscs_the_kernel_attached_are_not_configuration() {
        assert_eq!(qdisc("noqueue", 0).role(), Role::Default);
        assert_eq!(qdisc("mq", 0).role(), Role::Default);
        assert_eq!(qdisc("fq_codel", 0).role(), Role::Default, "mq's child");
        assert_eq!(qdisc("fq_codel", 0x8001_0000).role(), Role::Egress);
        assert_eq!(qdisc("tbf", 0x0001_0000).role(), Role::Egress);
        assert_eq!(qdisc("noqueue", 0x8001_0000).role(), Role::Default);
        assert_eq!(qdisc("ingress", 0xffff_0000).role(), Role::Ingress);
        assert_eq!(qdisc("clsact", 0xffff_0000).role(), Role::Clsact);
    }

    #[test]
    fn a_qdisc_message_gives_its_interface_handle_and_kind() {
        let mut m = crate::wire::request(RTM_NEWQDISC, 0, 0, &[0, 0, 0, 0]);
        m.extend_from_slice(&7u32.to_ne_bytes());
        m.extend_from_slice(&0x8001_0000u32.to_ne_bytes());
        m.extend_from_slice(&0xffff_ffffu32.to_ne_bytes());
        m.extend_from_slice(&0u32.to_ne_bytes());
        m.extend_from_slice(&8u16.to_ne_bytes());
        m.extend_from_slice(&TCA_KIND.to_ne_bytes());
        m.extend_from_slice(b"tbf\0");
        let len = m.len() as u32;
        m[0..4].copy_from_slice(&len.to_ne_bytes());
        assert_eq!(
            parse_qdisc(&m),
            Some(Qdisc {
                ifindex: 7,
                handle: 0x8001_0000,
                kind: "tbf".into()
            })
        );
        let mut no_kind = m[..crate::wire::NLMSG_HDRLEN + TCMSG].to_vec();
        let len = no_kind.len() as u32;
        no_kind[0..4].copy_from_slice(&len.to_ne_bytes());
        assert_eq!(parse_qdisc(&no_kind), None, "no kind");
        assert_eq!(parse_qdisc(&m[..m.len() - 1]), None, "truncated");
    }
}
