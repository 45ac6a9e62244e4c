//! Whether netfilter sees the packets the kernel forwards: an nftables
//! base chain at prerouting, forward or postrouting (families ip, ip6,
//! inet; inet's ingress too), any netdev chain (ingress or egress of a
//! device), or a legacy iptables table (/proc/net/ip_tables_names, read
//! through thread-self: the thread may be in another namespace). XDP
//! runs before all of them, so a frame the fast path forwarded would skip
//! the firewall, NAT and connection tracking the kernel applies: where any
//! hook is there for a family, that family goes to the kernel.
//!
//! nf_tables is read over NETLINK_NETFILTER (NFT_MSG_GETCHAIN), which no
//! crate here decodes; its changes are notified (NFNLGRP_NFTABLES), legacy
//! tables' are not and are read again once a second.
use crate::socket::raw_dump_on;
use crate::wire::Message;
use anyhow::Result;
use netlink_sys::protocols::NETLINK_NETFILTER;

/// NFNLGRP_NFTABLES: nf_tables' change notifications.
pub const NFNLGRP_NFTABLES: u32 = 7;
/// nfnetlink's subsystem of nf_tables (the high byte of a message type).
pub const NFNL_SUBSYS_NFTABLES: u16 = 10;
const NFT_MSG_GETCHAIN: u16 = 4;
const NFT_MSG_NEWCHAIN: u16 = 3;

const NFTA_CHAIN_TABLE: u16 = 1;
const NFTA_CHAIN_NAME: u16 = 3;
const NFTA_CHAIN_HOOK: u16 = 4;
const NFTA_CHAIN_TYPE: u16 = 7;
const NFTA_HOOK_HOOKNUM: u16 = 1;

const NFPROTO_INET: u8 = 1;
const NFPROTO_IPV4: u8 = 2;
const NFPROTO_NETDEV: u8 = 5;
const NFPROTO_IPV6: u8 = 10;

const NFPROTO_BRIDGE: u8 = 7;
const NF_BR_PRE_ROUTING: u32 = 0;
const NF_BR_LOCAL_IN: u32 = 1;
const NF_BR_FORWARD: u32 = 2;
const NF_BR_LOCAL_OUT: u32 = 3;
const NF_BR_POST_ROUTING: u32 = 4;

const NF_INET_PRE_ROUTING: u32 = 0;
const NF_INET_FORWARD: u32 = 2;
const NF_INET_POST_ROUTING: u32 = 4;
const NF_INET_INGRESS: u32 = 5;

/// nf_tables' families by nfgenmsg number and by the name nft gives them.
const FAMILIES: [(u8, &str); 6] = [
    (NFPROTO_INET, "inet"),
    (NFPROTO_IPV4, "ip"),
    (3, "arp"),
    (NFPROTO_NETDEV, "netdev"),
    (NFPROTO_BRIDGE, "bridge"),
    (NFPROTO_IPV6, "ip6"),
];

/// The name of nf_tables family `nfproto` ("inet").
pub fn family_name(nfproto: u8) -> Option<&'static str> {
    FAMILIES.iter().find(|f| f.0 == nfproto).map(|f| f.1)
}

/// The number of the nf_tables family nft calls `name`.
pub fn nfproto(name: &str) -> Option<u8> {
    FAMILIES.iter().find(|f| f.1 == name).map(|f| f.0)
}

/// struct nfgenmsg: family, version, resource id.
const NFGENMSG: usize = 4;

/// What sees forwarded packets, per family ("nft chain inet filter
/// forward", "iptables table nat"); empty: nothing, the fast path may
/// forward that family.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Hooks {
    pub ipv4: Vec<String>,
    pub ipv6: Vec<String>,
    /// Of them, nat chains (their connections' mappings the kernel's
    /// conntrack holds), per family.
    pub nat: [bool; 2],
    /// Bridge-family chains at prerouting or input (they see what a
    /// bridge's port takes in for the bridge itself, to be routed), output
    /// or postrouting (what is routed out of a bridge); not forward, which
    /// sees only what the bridge forwards between its ports.
    pub bridge: Vec<String>,
    /// What sees the frames a bridge forwards between its ports: bridge
    /// chains at prerouting, forward or postrouting, netdev chains, inet
    /// ingress chains (XDP on a port runs before them all).
    pub bridged: Vec<String>,
    /// br_netfilter's settings (None: it is not loaded): with it, the
    /// frames a bridge forwards go through the family's ip hooks as well.
    pub br_netfilter: Option<BrNetfilter>,
}

/// br_netfilter's sysctls (net.bridge.bridge-nf-*), of the namespace.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BrNetfilter {
    /// bridge-nf-call-iptables, -ip6tables: bridged IPv4 (IPv6) goes
    /// through the ip (ip6) hooks (a bridge's `nf_call_iptables` too).
    pub call: [bool; 2],
    /// bridge-nf-filter-vlan-tagged or -pppoe-tagged: so do tagged frames.
    pub tagged: bool,
}

impl BrNetfilter {
    /// The calling thread's namespace's (its /proc/sys/net is the
    /// namespace of the thread that opens it); None without br_netfilter.
    pub fn read() -> Option<BrNetfilter> {
        let on = |name: &str| {
            std::fs::read_to_string(format!("/proc/sys/net/bridge/bridge-nf-{name}"))
                .ok()
                .map(|v| v.trim() != "0")
        };
        Some(BrNetfilter {
            call: [on("call-iptables")?, on("call-ip6tables")?],
            tagged: on("filter-vlan-tagged").unwrap_or(true)
                || on("filter-pppoe-tagged").unwrap_or(true),
        })
    }
}

/// A base chain as nf_tables dumps it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Chain {
    family: u8,
    table: String,
    name: String,
    hook: u32,
    /// "filter", "nat", "route".
    kind: String,
}

impl Hooks {
    /// The hooks of the calling thread's namespace now.
    pub fn dump() -> Result<Hooks> {
        let mut h = Hooks {
            br_netfilter: BrNetfilter::read(),
            ..Default::default()
        };
        for c in chains()? {
            h.add_chain(&c);
        }
        for (file, ipv6) in [
            ("/proc/thread-self/net/ip_tables_names", false),
            ("/proc/thread-self/net/ip6_tables_names", true),
        ] {
            let names = std::fs::read_to_string(file).unwrap_or_default();
            for t in names.split_whitespace() {
                let what = format!("iptables table {t}");
                if ipv6 {
                    h.ipv6.push(what);
                } else {
                    h.ipv4.push(what);
                }
            }
        }
        Ok(h)
    }

    fn add_chain(&mut self, c: &Chain) {
        let transit = matches!(
            c.hook,
            NF_INET_PRE_ROUTING | NF_INET_FORWARD | NF_INET_POST_ROUTING
        );
        let (v4, v6) = match c.family {
            NFPROTO_IPV4 => (transit, false),
            NFPROTO_IPV6 => (false, transit),
            NFPROTO_INET => {
                let t = transit || c.hook == NF_INET_INGRESS;
                (t, t)
            }
            // A device's ingress or egress: both families.
            NFPROTO_NETDEV => (true, true),
            _ => (false, false),
        };
        let family = family_name(c.family).unwrap_or("other");
        let what = format!("nft chain {family} {} {}", c.table, c.name);
        let bridged = match c.family {
            NFPROTO_BRIDGE => matches!(
                c.hook,
                NF_BR_PRE_ROUTING | NF_BR_FORWARD | NF_BR_POST_ROUTING
            ),
            NFPROTO_NETDEV => true,
            NFPROTO_INET => c.hook == NF_INET_INGRESS,
            _ => false,
        };
        if bridged {
            self.bridged.push(what.clone());
        }
        if c.family == NFPROTO_BRIDGE
            && matches!(
                c.hook,
                NF_BR_PRE_ROUTING | NF_BR_LOCAL_IN | NF_BR_LOCAL_OUT | NF_BR_POST_ROUTING
            )
        {
            self.bridge.push(what.clone());
        }
        let nat = c.kind == "nat";
        if v4 {
            self.ipv4.push(what.clone());
            self.nat[0] |= nat;
        }
        if v6 {
            self.ipv6.push(what);
            self.nat[1] |= nat;
        }
    }
}

/// The base chains (those hooked) of every family.
fn chains() -> Result<Vec<Chain>> {
    let kind = (NFNL_SUBSYS_NFTABLES << 8) | NFT_MSG_GETCHAIN;
    // nfgenmsg: NFPROTO_UNSPEC (every family), NFNETLINK_V0, resource 0.
    let msgs = match raw_dump_on(NETLINK_NETFILTER, kind, &[0, 0, 0, 0], "nftables chain")? {
        Ok(m) => m,
        // No nf_tables in this kernel: no chain can be there.
        Err(errno) if errno == libc::EPROTONOSUPPORT || errno == libc::ENOENT => Vec::new(),
        Err(errno) => anyhow::bail!(
            "the nftables chains: {}",
            std::io::Error::from_raw_os_error(errno)
        ),
    };
    Ok(msgs.iter().filter_map(|m| parse_chain(m)).collect())
}

/// One NFT_MSG_NEWCHAIN (netlink header included); None for a chain
/// without a hook (a regular chain) or another message.
pub(crate) fn parse_chain(m: &[u8]) -> Option<Chain> {
    let m = Message::new_checked(m).ok()?;
    if m.kind() != (NFNL_SUBSYS_NFTABLES << 8) | NFT_MSG_NEWCHAIN {
        return None;
    }
    let body = m.body("nftables chain", NFGENMSG).ok()?;
    let family = body.byte(0);
    let (mut table, mut name, mut hook, mut kind) =
        (String::new(), String::new(), None, String::new());
    for a in body.attributes().map_while(Result::ok) {
        match a.kind {
            NFTA_CHAIN_TABLE => table = a.text(),
            NFTA_CHAIN_NAME => name = a.text(),
            NFTA_CHAIN_TYPE => kind = a.text(),
            NFTA_CHAIN_HOOK => {
                hook = a
                    .nested_attributes()
                    .map_while(Result::ok)
                    .find(|h| h.kind == NFTA_HOOK_HOOKNUM)
                    .and_then(|h| h.be32().ok())
            }
            _ => {}
        }
    }
    Some(Chain {
        family,
        table,
        name,
        hook: hook?,
        kind,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chain(family: u8, hook: u32) -> Chain {
        Chain {
            family,
            table: "t".into(),
            name: "c".into(),
            hook,
            kind: "filter".into(),
        }
    }

    fn families(c: Chain) -> (bool, bool) {
        let mut h = Hooks::default();
        h.add_chain(&c);
        (!h.ipv4.is_empty(), !h.ipv6.is_empty())
    }

    #[test]
    fn chains_on_the_forwarding_path_count_for_their_families() {
        const LOCAL_IN: u32 = 1;
        const LOCAL_OUT: u32 = 3;
        assert_eq!(
            families(chain(NFPROTO_IPV4, NF_INET_FORWARD)),
            (true, false)
        );
        assert_eq!(
            families(chain(NFPROTO_IPV6, NF_INET_PRE_ROUTING)),
            (false, true)
        );
        assert_eq!(
            families(chain(NFPROTO_INET, NF_INET_POST_ROUTING)),
            (true, true)
        );
        assert_eq!(families(chain(NFPROTO_INET, NF_INET_INGRESS)), (true, true));
        assert_eq!(families(chain(NFPROTO_NETDEV, 0)), (true, true));
        assert_eq!(families(chain(NFPROTO_INET, LOCAL_IN)), (false, false));
        assert_eq!(families(chain(NFPROTO_IPV4, LOCAL_OUT)), (false, false));
        assert_eq!(families(chain(3, 0)), (false, false), "arp");
        // A bridge's chains: none of the routed families', but what its
        // ports take in for it or it sends out (prerouting, input, output,
        // postrouting), not what it forwards between ports.
        // What it forwards between ports: prerouting, forward,
        // postrouting (the last number).
        let bridge = |hook| {
            let mut h = Hooks::default();
            h.add_chain(&chain(NFPROTO_BRIDGE, hook));
            (h.ipv4.len(), h.ipv6.len(), h.bridge.len(), h.bridged.len())
        };
        assert_eq!(bridge(NF_BR_PRE_ROUTING), (0, 0, 1, 1));
        assert_eq!(bridge(NF_BR_LOCAL_IN), (0, 0, 1, 0));
        assert_eq!(bridge(NF_BR_FORWARD), (0, 0, 0, 1));
        assert_eq!(bridge(NF_BR_LOCAL_OUT), (0, 0, 1, 0));
        assert_eq!(bridge(NF_BR_POST_ROUTING), (0, 0, 1, 1));
        // A device's hooks see what a port takes in before the bridge;
        // an ip chain only through br_netfilter (the mirror's to weigh).
        let bridged = |family, hook| {
            let mut h = Hooks::default();
            h.add_chain(&chain(family, hook));
            h.bridged.len()
        };
        assert_eq!(bridged(NFPROTO_NETDEV, 0), 1);
        assert_eq!(bridged(NFPROTO_INET, NF_INET_INGRESS), 1);
        assert_eq!(bridged(NFPROTO_INET, NF_INET_FORWARD), 0);
        assert_eq!(bridged(NFPROTO_IPV4, NF_INET_PRE_ROUTING), 0);
    }

    #[test]
    fn attributes_are_read_with_their_padding_and_nesting() {
        // NFTA_CHAIN_TABLE "filter" (padded), NFTA_CHAIN_HOOK nested
        // { HOOKNUM 2 (big-endian) }.
        let mut b = Vec::new();
        b.extend_from_slice(&11u16.to_ne_bytes());
        b.extend_from_slice(&NFTA_CHAIN_TABLE.to_ne_bytes());
        b.extend_from_slice(b"filter\0\0");
        b.extend_from_slice(&16u16.to_ne_bytes());
        b.extend_from_slice(&(NFTA_CHAIN_HOOK | 0x8000).to_ne_bytes());
        b.extend_from_slice(&8u16.to_ne_bytes());
        b.extend_from_slice(&NFTA_HOOK_HOOKNUM.to_ne_bytes());
        b.extend_from_slice(&2u32.to_be_bytes());
        b.extend_from_slice(&[0; 4]); // junk: an attribute header of length 0
        let got: Vec<_> = crate::wire::Attrs::new(&b)
            .collect::<Result<_, _>>()
            .unwrap();
        assert_eq!(got.len(), 2);
        assert_eq!(got[0].text(), "filter");
        assert_eq!((got[1].kind, got[1].nested), (NFTA_CHAIN_HOOK, true));
        // The junk is inside the hook's 16 bytes: the nested walk says it
        // is no attribute, after the one that is.
        let inner: Vec<_> = got[1].nested_attributes().collect();
        assert_eq!(inner.len(), 2);
        assert!(
            inner[1].is_err(),
            "four zero bytes: an attribute of length 0"
        );
        let inner: Vec<_> = inner.into_iter().map_while(Result::ok).collect();
        assert_eq!((inner[0].kind, inner[0].be32()), (NFTA_HOOK_HOOKNUM, Ok(2)));
    }
}
