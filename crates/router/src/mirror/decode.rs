//! rtnetlink messages as the mirror reads them: a link's MAC, MTU, state
//! and master; a neighbour's usable MAC; a route's prefix, table, metric
//! and next hop. Pure functions of one message each.
use super::nexthops::{members_key, NhKey};
use super::routes::Candidate;
use linerate_fib::Key;
use netlink_packet_core::Nla;
use netlink_packet_route::link::{
    InfoBridge, InfoData, InfoKind, InfoPortData, InfoVlan, InfoVrf, LinkAttribute, LinkFlags,
    LinkInfo, LinkMessage, LinkProtoInfoBridge, VlanQosMapping,
};
use netlink_packet_route::neighbour::{
    NeighbourAddress, NeighbourAttribute, NeighbourMessage, NeighbourState,
};
use netlink_packet_route::route::{
    RouteAddress, RouteAttribute, RouteFlags, RouteMessage, RouteMetric, RouteNextHop,
    RouteNextHopFlags, RouteType,
};
use netlink_packet_route::AddressFamily;
use std::net::IpAddr;

pub const TABLE_MAIN: u32 = 254;
pub const TABLE_LOCAL: u32 = 255;

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Link {
    pub mac: [u8; 6],
    pub mtu: u32,
    pub up: bool,
    /// The device it is a port of (a bridge, a VRF; 0: none): the kernel
    /// routes what arrives here, if at all, as that device.
    pub master: u32,
    /// It is a bridge (`ip link add ... type bridge`).
    pub bridge: bool,
    /// As a bridge's port, its state and flags, if the message says them.
    pub port: Option<PortInfo>,
    /// As a bridge, it filters VLANs (`vlan_filtering 1`): what it passes
    /// up or sends out depends on each port's VLANs.
    pub vlan_filtering: bool,
    /// As a bridge, its `nf_call_iptables`, `nf_call_ip6tables`: what it
    /// forwards goes through the family's ip hooks (with br_netfilter).
    pub nf_call: [bool; 2],
    /// As a bridge, the most entries it learns (`fdb_max_learned`; 0:
    /// no limit).
    pub fdb_max_learned: u32,
    /// In promiscuous mode (`tcpdump -i br0`): a bridge then passes up a
    /// copy of every frame it forwards.
    pub promisc: bool,
    /// Its interface group (`ip link set ... group`), which a rule's
    /// `suppress_ifgroup` names.
    pub group: u32,
    /// As a VLAN device (`ip link add link P name P.10 type vlan id 10`),
    /// what it is on and tags with.
    pub vlan: Option<Vlan>,
    /// As a VRF device (`ip link add red type vrf table 10`), its table.
    pub vrf_table: Option<u32>,
}

/// A VLAN device's parent and tag, as the kernel reports them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Vlan {
    /// The device it sends and receives through (IFLA_LINK).
    pub parent: u32,
    /// Its parent is in another namespace (IFLA_LINK_NETNSID): not one
    /// of this router's.
    pub foreign: bool,
    /// 802.1Q (0x8100) or 802.1ad (0x88a8).
    pub tpid: u16,
    pub id: u16,
    /// It maps some skb priorities to a non-zero PCP (`egress-qos-map`):
    /// the tag it pushes depends on the packet's priority, which the fast
    /// path does not know.
    pub egress_qos: bool,
}

/// A link added, changed or gone.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LinkUpdate {
    pub index: u32,
    /// None: the link is gone.
    pub link: Option<Link>,
    pub name: Option<String>,
}

/// A bridge port's STP state: forwarding (BR_STATE_FORWARDING), the only
/// one in which the bridge passes frames up to be routed.
pub const BR_STATE_FORWARDING: u8 = 3;

/// A bridge port's state and flags, as far as the fast path weighs them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PortInfo {
    /// Its STP state (BR_STATE_*).
    pub state: u8,
    /// A flag by which the bridge treats its frames otherwise than by the
    /// FDB alone (`isolated`, `locked`, `proxy_arp`, ...), named as
    /// `bridge link` sets it.
    pub special: Option<&'static str>,
    /// It learns (`learning on`, the default): the bridge learns from
    /// what arrives here.
    pub learning: bool,
}

/// IFLA_BRPORT_* flags that change what the bridge does with a port's
/// unicast frames, by attribute number.
const SPECIAL_FLAGS: [(u16, &str); 7] = [
    (10, "proxy_arp"),
    (12, "proxy_arp_wifi"),
    (32, "neigh_suppress"),
    (33, "isolated"),
    (39, "locked"),
    (40, "mab"),
    (43, "neigh_vlan_suppress"),
];

/// A port's state and flags from its IFLA_BRPORT_* attributes, whichever
/// message carries them (IFLA_PROTINFO, IFLA_INFO_SLAVE_DATA): each by its
/// number and its one-byte value. None without a state.
fn port_info<'a>(attrs: impl Iterator<Item = &'a dyn Nla>) -> Option<PortInfo> {
    let (mut state, mut special, mut learning) = (None, None, true);
    for nla in attrs {
        if nla.value_len() != 1 {
            continue;
        }
        let mut b = [0u8];
        nla.emit_value(&mut b);
        match nla.kind() {
            1 => state = Some(b[0]),
            8 => learning = b[0] != 0,
            k if b[0] != 0 => {
                if let Some((_, name)) = SPECIAL_FLAGS.iter().find(|f| f.0 == k) {
                    special = special.or(Some(*name));
                }
            }
            _ => {}
        }
    }
    Some(PortInfo {
        state: state?,
        special,
        learning,
    })
}

/// An AF_BRIDGE link message: a bridge port's state and flags (its index,
/// and them; None when it leaves the bridge).
pub fn bridge_port(l: &LinkMessage, gone: bool) -> Option<(u32, Option<PortInfo>)> {
    if l.header.interface_family != AddressFamily::Bridge {
        return None;
    }
    // IFLA_PROTINFO's IFLA_BRPORT_* attributes, which the crate leaves
    // unnamed.
    let attrs = l.attributes.iter().flat_map(|a| match a {
        LinkAttribute::ProtoInfoBridge(p) => p.as_slice(),
        _ => &[],
    });
    let info = port_info(attrs.filter_map(|x| match x {
        LinkProtoInfoBridge::Other(nla) => Some(nla as &dyn Nla),
        _ => None,
    }));
    Some((l.header.index, if gone { None } else { info }))
}

/// A link message; None for AF_BRIDGE ones, which are about a bridge's
/// port (its state in the bridge; a "deletion" when it leaves the bridge),
/// not the link: [`bridge_port`].
pub fn link(l: &LinkMessage, gone: bool) -> Option<LinkUpdate> {
    if l.header.interface_family == AddressFamily::Bridge {
        return None;
    }
    let index = l.header.index;
    if gone {
        return Some(LinkUpdate {
            index,
            link: None,
            name: None,
        });
    }
    let mut link = Link {
        up: l.header.flags.contains(LinkFlags::Up) && l.header.flags.contains(LinkFlags::LowerUp),
        promisc: l.header.flags.contains(LinkFlags::Promisc),
        ..Default::default()
    };
    let mut name = None;
    let (mut parent, mut foreign) = (0, false);
    for a in &l.attributes {
        match a {
            LinkAttribute::Address(m) if m.len() == 6 => link.mac.copy_from_slice(m),
            LinkAttribute::Mtu(m) => link.mtu = *m,
            LinkAttribute::Controller(c) => link.master = *c,
            LinkAttribute::LinkInfo(info) => {
                for i in info {
                    match i {
                        LinkInfo::Kind(InfoKind::Bridge) => link.bridge = true,
                        LinkInfo::Data(InfoData::Vrf(v)) => {
                            link.vrf_table = v.iter().find_map(|a| match a {
                                InfoVrf::TableId(t) => Some(*t),
                                _ => None,
                            })
                        }
                        LinkInfo::Kind(InfoKind::Vlan) => {
                            link.vlan.get_or_insert_with(Vlan::default);
                        }
                        LinkInfo::Data(InfoData::Vlan(v)) => {
                            vlan_data(link.vlan.get_or_insert_with(Vlan::default), v)
                        }
                        LinkInfo::Data(InfoData::Bridge(b)) => {
                            link.vlan_filtering = b.contains(&InfoBridge::VlanFiltering(true));
                            link.nf_call = [
                                b.contains(&InfoBridge::NfCallIpTables(true)),
                                b.contains(&InfoBridge::NfCallIp6Tables(true)),
                            ];
                            link.fdb_max_learned = b
                                .iter()
                                .find_map(|a| match a {
                                    InfoBridge::FdbMaxLearned(n) => Some(*n),
                                    _ => None,
                                })
                                .unwrap_or(0);
                        }
                        LinkInfo::PortData(InfoPortData::BridgePort(p)) => {
                            link.port = port_info(p.iter().map(|a| a as &dyn Nla))
                        }
                        _ => {}
                    }
                }
            }
            LinkAttribute::Group(g) => link.group = *g,
            LinkAttribute::IfName(n) => name = Some(n.clone()),
            LinkAttribute::Link(p) => parent = *p,
            LinkAttribute::LinkNetNsId(_) => foreign = true,
            _ => {}
        }
    }
    if let Some(v) = &mut link.vlan {
        v.parent = parent;
        v.foreign = foreign;
    }
    Some(LinkUpdate {
        index,
        link: Some(link),
        name,
    })
}

/// A VLAN device's IFLA_INFO_DATA: its id, protocol and egress map (the
/// kernel lists only the priorities it maps to a non-zero PCP).
fn vlan_data(v: &mut Vlan, data: &[InfoVlan]) {
    for a in data {
        match a {
            InfoVlan::Id(id) => v.id = *id,
            InfoVlan::Protocol(p) => v.tpid = u16::from(*p),
            InfoVlan::EgressQos(m) => {
                v.egress_qos = m.iter().any(|m| matches!(m, VlanQosMapping::Mapping(_, _)))
            }
            _ => {}
        }
    }
}

/// A neighbour entry as the kernel forwards with it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NeighUpdate {
    /// Interface and address.
    pub key: (u32, std::net::IpAddr),
    /// The MAC, when the kernel forwards with the entry: REACHABLE, STALE,
    /// DELAY, PROBE, PERMANENT and NOARP; not INCOMPLETE or FAILED, or gone.
    pub mac: Option<[u8; 6]>,
    /// Usable and PERMANENT or NOARP: the kernel does not confirm it.
    pub fixed: bool,
}

/// A neighbour message; None without a destination address.
/// A bridge's FDB entry added, changed or gone: the port its MAC is
/// behind (None: gone, or one the fast path does not send to).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FdbUpdate {
    pub bridge: u32,
    pub mac: [u8; 6],
    pub port: Option<u32>,
}

/// An AF_BRIDGE neighbour message: a bridge's FDB entry (`bridge fdb`);
/// None for other families and entries no bridge holds (a port's own
/// `self` list). The bridge's own MACs (permanent entries: frames for them
/// are its own) and entries of a VLAN (frames sent tagged) are no port to
/// send to.
pub fn fdb(n: &NeighbourMessage, gone: bool) -> Option<FdbUpdate> {
    if n.header.family != AddressFamily::Bridge {
        return None;
    }
    let (mut mac, mut bridge, mut vlan) = (None, None, 0);
    for a in &n.attributes {
        match a {
            NeighbourAttribute::LinkLayerAddress(m) if m.len() == 6 => {
                let mut x = [0u8; 6];
                x.copy_from_slice(m);
                mac = Some(x);
            }
            NeighbourAttribute::Controller(b) => bridge = Some(*b),
            NeighbourAttribute::Vlan(v) => vlan = *v,
            _ => {}
        }
    }
    let own = n.header.state == NeighbourState::Permanent;
    Some(FdbUpdate {
        bridge: bridge?,
        mac: mac?,
        port: (!gone && !own && vlan == 0).then_some(n.header.ifindex),
    })
}

pub fn neighbour(n: &NeighbourMessage, gone: bool) -> Option<NeighUpdate> {
    let mut ip = None;
    let mut mac = None;
    for a in &n.attributes {
        match a {
            NeighbourAttribute::Destination(NeighbourAddress::Inet(v4)) => {
                ip = Some(IpAddr::V4(*v4))
            }
            NeighbourAttribute::Destination(NeighbourAddress::Inet6(v6)) => {
                ip = Some(IpAddr::V6(*v6))
            }
            NeighbourAttribute::LinkLayerAddress(m) if m.len() == 6 => {
                let mut x = [0u8; 6];
                x.copy_from_slice(m);
                mac = Some(x);
            }
            _ => {}
        }
    }
    let usable = matches!(
        n.header.state,
        NeighbourState::Reachable
            | NeighbourState::Stale
            | NeighbourState::Delay
            | NeighbourState::Probe
            | NeighbourState::Permanent
            | NeighbourState::Noarp
    );
    let mac = mac.filter(|_| usable && !gone);
    let fixed = mac.is_some()
        && matches!(
            n.header.state,
            NeighbourState::Permanent | NeighbourState::Noarp
        );
    Some(NeighUpdate {
        key: (n.header.ifindex, ip?),
        mac,
        fixed,
    })
}

/// A route's destination: address (host bits zero) and length.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Prefix {
    V4(u32, u8),
    V6(u128, u8),
}

/// A route of any table added, replaced or deleted.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RouteUpdate {
    pub prefix: Prefix,
    pub candidate: Candidate,
    pub gone: bool,
    /// A local or broadcast /32 of the local table: one of the router's
    /// own IPv4 addresses, or a broadcast address of its networks (a
    /// source the kernel refuses whenever it checks sources by a lookup:
    /// reverse path filtering, policy rules).
    pub local_address: Option<u32>,
}

/// A route message; None for IPv6 route cache entries and other families.
pub fn route(r: &RouteMessage, gone: bool) -> Option<RouteUpdate> {
    if r.header.flags.contains(RouteFlags::Cloned) {
        return None;
    }
    let mut table = r.header.table as u32;
    let (mut dst, mut gw, mut oif, mut priority, mut mtu) = (None, None, None, 0, None);
    let (mut multipath, mut nh_object) = (None, None);
    for a in &r.attributes {
        match a {
            RouteAttribute::Table(t) => table = *t,
            RouteAttribute::Destination(d) => dst = route_addr(d),
            RouteAttribute::Gateway(g) => gw = route_addr(g),
            RouteAttribute::Oif(o) => oif = Some(*o),
            RouteAttribute::Priority(p) => priority = *p,
            RouteAttribute::MultiPath(hops) => multipath = Some(hops),
            RouteAttribute::NhId(id) => nh_object = Some(*id),
            RouteAttribute::Metrics(ms) => {
                for m in ms {
                    if let RouteMetric::Mtu(v) = m {
                        mtu = Some(*v);
                    }
                }
            }
            _ => {}
        }
    }
    let nh = match (r.header.kind, gw, oif, multipath, nh_object) {
        (RouteType::Throw, ..) => NhKey::Throw,
        (RouteType::Unicast, Some(gw), Some(oif), None, None) => NhKey::Gateway { oif, gw, mtu },
        (RouteType::Unicast, None, Some(oif), None, None) => NhKey::Device { oif, mtu },
        (RouteType::Unicast, _, _, Some(hops), None) => group_key(hops, mtu),
        (RouteType::Unicast, _, _, _, Some(id)) => NhKey::Object { id, mtu },
        (RouteType::Unreachable | RouteType::Prohibit | RouteType::BlackHole, ..) => {
            NhKey::Unreachable
        }
        (
            RouteType::Local | RouteType::Broadcast | RouteType::Anycast | RouteType::Multicast,
            ..,
        ) => NhKey::Kernel,
        _ => NhKey::Unsupported,
    };
    let candidate = Candidate {
        table,
        priority,
        nh,
    };
    let len = r.header.destination_prefix_length;
    let (prefix, local_address) = match r.header.address_family {
        AddressFamily::Inet if len <= 32 => {
            let a = match dst {
                Some(IpAddr::V4(v)) => u32::from(v),
                _ => 0,
            };
            let local = matches!(r.header.kind, RouteType::Local | RouteType::Broadcast)
                && len == 32
                && table == TABLE_LOCAL;
            (Prefix::V4(a.mask(len), len), local.then_some(a))
        }
        AddressFamily::Inet6 if len <= 128 => {
            let a = match dst {
                Some(IpAddr::V6(v)) => u128::from(v),
                _ => 0,
            };
            (Prefix::V6(a.mask(len), len), None)
        }
        _ => return None,
    };
    Some(RouteUpdate {
        prefix,
        candidate,
        gone,
        local_address,
    })
}

fn route_addr(a: &RouteAddress) -> Option<IpAddr> {
    match a {
        RouteAddress::Inet(v) => Some(IpAddr::V4(*v)),
        RouteAddress::Inet6(v) => Some(IpAddr::V6(*v)),
        _ => None,
    }
}

/// The next hop of a multipath route: its members through gateways,
/// weighted (RTNH_F_DEAD members left out, as the kernel does). A member
/// without a gateway (a device route), or through an IPv4 gateway of an
/// IPv6 route, makes the route the kernel's.
fn group_key(hops: &[RouteNextHop], mtu: Option<u32>) -> NhKey {
    let mut members = Vec::new();
    for h in hops {
        if h.flags.contains(RouteNextHopFlags::Dead) {
            continue;
        }
        let gw = h.attributes.iter().find_map(|a| match a {
            RouteAttribute::Gateway(g) => route_addr(g),
            _ => None,
        });
        match gw {
            Some(gw) if h.interface_index != 0 => {
                let oif = h.interface_index;
                members.push((NhKey::Gateway { oif, gw, mtu }, h.hops as u32 + 1));
            }
            _ => return NhKey::Unsupported,
        }
    }
    members_key(members)
}
