//! What the router's interfaces let the fast path forward: the kernel's
//! forwarding and rp_filter settings (netconf), IPv6 switched off, and the
//! flags of an interface's entry made of those, the routing policy,
//! netfilter, tc and what the driver sends (one pure function).
use linerate_dataplane::layout::{
    IFACE_FIREWALL4, IFACE_FIREWALL6, IFACE_FORWARD4, IFACE_FORWARD6, IFACE_NAT4, IFACE_NAT6,
    IFACE_NETFILTER4, IFACE_NETFILTER6, IFACE_POLICY4, IFACE_POLICY6, IFACE_RPF_LOOSE,
    IFACE_RPF_STRICT, IFACE_TABLES4, IFACE_TABLES6, IFACE_TC, IFACE_XMIT_SG,
};
use linerate_netlink::netconf::{Netconf, IFINDEX_ALL};
use std::collections::{HashMap, HashSet};

/// The kernel's settings that decide what it forwards from where.
#[derive(Default)]
pub struct Settings {
    /// What the kernel forwards (netconf): IPv4 by ingress interface, IPv6
    /// for the namespace. Unknown is off: never forward what the kernel
    /// would not.
    forward4: HashMap<u32, bool>,
    forward6: bool,
    /// Interfaces with IPv6 off (disable_ipv6, or no IPv6 configuration):
    /// the kernel drops IPv6 arriving there.
    ipv6_off: HashSet<u32>,
    /// IPv4 rp_filter by interface, and conf.all's.
    rp_filter: HashMap<u32, u8>,
    rp_filter_all: u8,
}

/// Which interfaces a settings change concerns.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scope {
    One(u32),
    All,
}

impl Settings {
    /// A forwarding or rp_filter setting from netconf.
    pub fn netconf(&mut self, n: &Netconf) -> Scope {
        let i = n.ifindex;
        match (n.ipv6, n.forwarding) {
            (false, Some(on)) if i > 0 => {
                self.forward4.insert(i as u32, on);
            }
            (true, Some(on)) if i == IFINDEX_ALL => self.forward6 = on,
            // conf.all of IPv4 is applied to every interface, which is
            // notified on its own; IPv6's per-interface setting is not
            // what the kernel checks; defaults change nothing now.
            _ => {}
        }
        match (n.ipv6, n.rp_filter) {
            (false, Some(rp)) if i > 0 => {
                self.rp_filter.insert(i as u32, rp);
            }
            (false, Some(rp)) if i == IFINDEX_ALL => self.rp_filter_all = rp,
            _ => {}
        }
        // An interface's IPv4 settings go with its IPv4 configuration; an
        // IPv6 one going (a rename, an MTU below 1280) leaves them be.
        if n.gone && i > 0 && !n.ipv6 {
            self.forward4.remove(&(i as u32));
            self.rp_filter.remove(&(i as u32));
        }
        if i > 0 {
            Scope::One(i as u32)
        } else {
            Scope::All
        }
    }

    /// IPv6 on or off on `ifindex`; true if that changed.
    pub fn set_ipv6_enabled(&mut self, ifindex: u32, on: bool) -> bool {
        if on {
            self.ipv6_off.remove(&ifindex)
        } else {
            self.ipv6_off.insert(ifindex)
        }
    }

    pub fn forwards4(&self, ifindex: u32) -> bool {
        self.forward4.get(&ifindex) == Some(&true)
    }

    pub fn forwards6(&self, ifindex: u32) -> bool {
        self.forward6 && !self.ipv6_off.contains(&ifindex)
    }

    /// The rp_filter the kernel applies on `ifindex`: the larger of the
    /// interface's and conf.all's.
    pub fn rp_filter(&self, ifindex: u32) -> u8 {
        let rp = self.rp_filter.get(&ifindex).copied().unwrap_or(0);
        rp.max(self.rp_filter_all)
    }
}

/// What else than the settings decides an interface's flags.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Context {
    /// The fast path can route the family (IPv4, IPv6) from here as the
    /// kernel's rules do: by the tables their walk lists (not enslaved).
    pub routed: [bool; 2],
    /// ... by other tables than main alone: the fast path walks the
    /// interface's tables (IFACE_TABLES4, 6).
    pub walk: [bool; 2],
    /// tc acts on what comes in here.
    pub tc_ingress: bool,
    /// Netfilter sees forwarded IPv4, IPv6.
    pub netfilter: [bool; 2],
    /// All netfilter sees of forwarded IPv4, IPv6 is chains the fast
    /// path's firewall judges.
    pub firewall: [bool; 2],
    /// Of what netfilter sees, nat chains (the firewall then maps
    /// connections as the kernel's entries say).
    pub nat: [bool; 2],
    /// The driver sends multi-buffer frames.
    pub xmit_multibuf: bool,
}

/// The flags of interface `ifindex`'s entry. Where the kernel forwards a
/// family, the first of policy, tc, netfilter that holds names why the
/// fast path leaves it to the kernel; else it is forwarded, through the
/// firewall if netfilter sees it and the firewall judges all it sees.
pub fn flags(s: &Settings, ifindex: u32, c: &Context) -> u16 {
    let family = |v6: usize, policy, netfilter, forward: u16, firewall, nat| {
        let tables = if v6 == 1 {
            IFACE_TABLES6
        } else {
            IFACE_TABLES4
        };
        let forward = forward | if c.walk[v6] { tables } else { 0 };
        if !c.routed[v6] {
            policy
        } else if c.tc_ingress {
            IFACE_TC
        } else if c.netfilter[v6] && c.firewall[v6] {
            forward | firewall | if c.nat[v6] { nat } else { 0 }
        } else if c.netfilter[v6] {
            netfilter
        } else {
            forward
        }
    };
    let mut flags = 0;
    if s.forwards4(ifindex) {
        flags |= family(
            0,
            IFACE_POLICY4,
            IFACE_NETFILTER4,
            IFACE_FORWARD4,
            IFACE_FIREWALL4,
            IFACE_NAT4,
        );
    }
    if s.forwards6(ifindex) {
        flags |= family(
            1,
            IFACE_POLICY6,
            IFACE_NETFILTER6,
            IFACE_FORWARD6,
            IFACE_FIREWALL6,
            IFACE_NAT6,
        );
    }
    flags |= match s.rp_filter(ifindex) {
        0 => 0,
        1 => IFACE_RPF_STRICT,
        _ => IFACE_RPF_LOOSE,
    };
    if c.xmit_multibuf {
        flags |= IFACE_XMIT_SG;
    }
    flags
}

#[cfg(test)]
mod tests {
    use super::*;

    fn conf(ipv6: bool, ifindex: i32, forwarding: Option<bool>, rp_filter: Option<u8>) -> Netconf {
        Netconf {
            ipv6,
            ifindex,
            forwarding,
            rp_filter,
            gone: false,
        }
    }

    #[test]
    fn flags_say_what_is_forwarded_and_why_not() {
        let mut s = Settings::default();
        let plain = Context {
            routed: [true, true],
            ..Default::default()
        };
        assert_eq!(flags(&s, 3, &plain), 0, "unknown is off");
        assert_eq!(s.netconf(&conf(false, 3, Some(true), None)), Scope::One(3));
        assert_eq!(
            s.netconf(&conf(true, IFINDEX_ALL, Some(true), None)),
            Scope::All
        );
        assert_eq!(flags(&s, 3, &plain), IFACE_FORWARD4 | IFACE_FORWARD6);
        assert_eq!(
            flags(&s, 4, &plain),
            IFACE_FORWARD6,
            "IPv4 is per interface"
        );
        assert!(s.set_ipv6_enabled(3, false));
        assert!(!s.set_ipv6_enabled(3, false));
        assert_eq!(flags(&s, 3, &plain), IFACE_FORWARD4);
        s.set_ipv6_enabled(3, true);
        // Policy before tc before netfilter.
        let all = Context {
            routed: [false, true],
            walk: [false, false],
            tc_ingress: false,
            netfilter: [true, true],
            firewall: [false, false],
            nat: [false, false],
            xmit_multibuf: true,
        };
        assert_eq!(
            flags(&s, 3, &all),
            IFACE_POLICY4 | IFACE_NETFILTER6 | IFACE_XMIT_SG
        );
        let tc = Context {
            tc_ingress: true,
            ..all
        };
        assert_eq!(flags(&s, 3, &tc), IFACE_POLICY4 | IFACE_TC | IFACE_XMIT_SG);
        // Netfilter's chains all judged by the firewall: forwarded through
        // it; only where netfilter sees the family at all.
        let judged = Context {
            routed: [true, true],
            firewall: [true, false],
            ..all
        };
        assert_eq!(
            flags(&s, 3, &judged),
            IFACE_FORWARD4 | IFACE_FIREWALL4 | IFACE_NETFILTER6 | IFACE_XMIT_SG
        );
        let unseen = Context {
            netfilter: [false, false],
            ..judged
        };
        assert_eq!(
            flags(&s, 3, &unseen),
            IFACE_FORWARD4 | IFACE_FORWARD6 | IFACE_XMIT_SG
        );
        // Tables other than main: forwarded, walking them; through the
        // firewall as well.
        let walk = Context {
            walk: [true, false],
            ..unseen
        };
        assert_eq!(
            flags(&s, 3, &walk),
            IFACE_FORWARD4 | IFACE_TABLES4 | IFACE_FORWARD6 | IFACE_XMIT_SG
        );
        assert_eq!(
            flags(
                &s,
                3,
                &Context {
                    netfilter: [true, true],
                    ..walk
                }
            ),
            IFACE_FORWARD4 | IFACE_TABLES4 | IFACE_FIREWALL4 | IFACE_NETFILTER6 | IFACE_XMIT_SG
        );
        // rp_filter: the larger of the interface's and conf.all's.
        s.netconf(&conf(false, 3, None, Some(2)));
        assert_eq!(
            flags(&s, 3, &plain) & (IFACE_RPF_LOOSE | IFACE_RPF_STRICT),
            IFACE_RPF_LOOSE
        );
        s.netconf(&conf(false, IFINDEX_ALL, None, Some(1)));
        assert_eq!(flags(&s, 4, &plain) & IFACE_RPF_STRICT, IFACE_RPF_STRICT);
        // An interface's IPv4 settings go with it.
        s.netconf(&Netconf {
            gone: true,
            ..conf(false, 3, None, None)
        });
        assert_eq!(flags(&s, 3, &plain), IFACE_FORWARD6 | IFACE_RPF_STRICT);
    }
}
