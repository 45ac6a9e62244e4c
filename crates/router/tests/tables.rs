//! Tables other than main, chosen by the kernel's policy rules (a tenant's
//! table by its incoming interface): the mirror gives each table the rules
//! look up a FIB of its own, and the fast path walks an interface's tables
//! as the kernel's rules do, a miss or a throw route going on to the next.
//! Hand-built rtnetlink messages, on the in-memory model of the fast path;
//! with the `privileged` feature (root) on the BPF program beside it, which
//! must agree. The kernel itself is the oracle in tests/policy.rs.
use linerate_bpf::test_run::XdpAction;
use linerate_dataplane::layout::POLICY_RULES;
use linerate_netlink::netconf::{Netconf, IFINDEX_ALL};
use linerate_router::mirror;
use linerate_router::mirror::limits::Table;
use linerate_testkit::frames::frame_between;
use linerate_testkit::plane::{path, TestPlane, MAC_IN, MAC_OUT};
use netlink_packet_route::link::{LinkAttribute, LinkFlags, LinkMessage};
use netlink_packet_route::neighbour::{
    NeighbourAddress, NeighbourAttribute, NeighbourMessage, NeighbourState,
};
use netlink_packet_route::route::{RouteAddress, RouteAttribute, RouteMessage, RouteType};
use netlink_packet_route::rule::{RuleAction, RuleAttribute, RuleMessage};
use netlink_packet_route::{AddressFamily, RouteNetlinkMessage as M};
use std::net::IpAddr;

type Mirror = mirror::Mirror<TestPlane>;

const MAC_MAIN: [u8; 6] = [2, 0, 0, 0, 0, 4];
const MAC_TENANT: [u8; 6] = [2, 0, 0, 0, 0, 5];
const MAC_OTHER: [u8; 6] = [2, 0, 0, 0, 0, 6];

fn link(index: u32, name: &str, mac: [u8; 6]) -> M {
    let mut l = LinkMessage::default();
    l.header.index = index;
    l.header.flags = LinkFlags::Up | LinkFlags::LowerUp;
    l.attributes = vec![
        LinkAttribute::IfName(name.into()),
        LinkAttribute::Address(mac.to_vec()),
        LinkAttribute::Mtu(1500),
    ];
    M::NewLink(l)
}

fn addr(a: &str) -> RouteAddress {
    match a.parse::<IpAddr>().unwrap() {
        IpAddr::V4(v) => RouteAddress::Inet(v),
        IpAddr::V6(v) => RouteAddress::Inet6(v),
    }
}

/// A route of `table`: `dst/len` of `kind`, through `gw` on `oif` for a
/// unicast one.
fn route(table: u32, dst: &str, len: u8, kind: RouteType, gw: Option<&str>, oif: u32) -> M {
    let mut r = RouteMessage::default();
    r.header.address_family = if dst.contains(':') {
        AddressFamily::Inet6
    } else {
        AddressFamily::Inet
    };
    r.header.destination_prefix_length = len;
    r.header.table = table.min(252) as u8;
    r.header.kind = kind;
    r.attributes.push(RouteAttribute::Table(table));
    r.attributes.push(RouteAttribute::Destination(addr(dst)));
    if let Some(g) = gw {
        r.attributes.push(RouteAttribute::Gateway(addr(g)));
    }
    if kind == RouteType::Unicast || kind == RouteType::Local {
        r.attributes.push(RouteAttribute::Oif(oif));
    }
    M::NewRoute(r)
}

fn via(table: u32, dst: &str, len: u8, gw: &str, oif: u32) -> M {
    route(table, dst, len, RouteType::Unicast, Some(gw), oif)
}

fn neighbour(ifindex: u32, a: &str, mac: [u8; 6]) -> M {
    let mut n = NeighbourMessage::default();
    n.header.family = if a.contains(':') {
        AddressFamily::Inet6
    } else {
        AddressFamily::Inet
    };
    n.header.ifindex = ifindex;
    n.header.state = NeighbourState::Reachable;
    n.attributes = vec![
        NeighbourAttribute::Destination(match a.parse::<IpAddr>().unwrap() {
            IpAddr::V4(v) => NeighbourAddress::Inet(v),
            IpAddr::V6(v) => NeighbourAddress::Inet6(v),
        }),
        NeighbourAttribute::LinkLayerAddress(mac.to_vec()),
    ];
    M::NewNeighbour(n)
}

/// A rule: `prio`, lookup `table`, from interface `iif` if named, from
/// `src/src_len` if not 0.
fn rule(ipv6: bool, prio: u32, table: u32, iif: Option<&str>, src_len: u8) -> RuleMessage {
    let mut m = RuleMessage::default();
    m.header.family = if ipv6 {
        AddressFamily::Inet6
    } else {
        AddressFamily::Inet
    };
    m.header.action = RuleAction::ToTable;
    m.header.table = table.min(252) as u8;
    m.header.src_len = src_len;
    m.attributes = vec![RuleAttribute::Priority(prio), RuleAttribute::Table(table)];
    // A source selector holds the frames' sources (`to`).
    if src_len > 0 {
        let net = if ipv6 { "2001:db8:18::" } else { "198.18.0.0" };
        m.attributes
            .push(RuleAttribute::Source(net.parse().unwrap()));
    }
    if let Some(i) = iif {
        m.attributes.push(RuleAttribute::Iifname(i.into()));
    }
    m
}

/// The kernel's default rules of both families, with `extra` among them.
fn rules(extra: &[RuleMessage]) -> Vec<RuleMessage> {
    let mut all = Vec::new();
    for ipv6 in [false, true] {
        all.push(rule(ipv6, 0, 255, None, 0));
        all.push(rule(ipv6, 32766, 254, None, 0));
    }
    all.push(rule(false, 32767, 253, None, 0));
    all.extend(extra.iter().cloned());
    all
}

struct Env {
    m: Mirror,
    m0: u32,
    m1: u32,
    _pair: Option<linerate_testkit::plane::ScratchPair>,
}

/// A mirror whose interfaces m0 ("t0", in) and m1 ("t1", out) forward
/// both families; main routes 198.19.0.0/16 and 2001:db8:19::/48 through
/// one gateway, table 100 the same prefixes through another, both
/// resolved.
fn tenant_mirror(tag: &str) -> Env {
    let (pair, plane, m0, m1) = linerate_testkit::plane::test_plane(tag, "t");
    let mut m = Mirror::new(plane).unwrap();
    m.apply(&link(m0, "t0", MAC_IN)).unwrap();
    m.apply(&link(m1, "t1", MAC_OUT)).unwrap();
    m.add_ingress(m0).unwrap();
    m.add_ingress(m1).unwrap();
    let on = |ipv6, ifindex| Netconf {
        ipv6,
        ifindex,
        forwarding: Some(true),
        rp_filter: None,
        gone: false,
    };
    for n in [
        on(false, m0 as i32),
        on(false, m1 as i32),
        on(true, IFINDEX_ALL),
    ] {
        m.netconf(&n).unwrap();
    }
    m.set_rules(&rules(&[])).unwrap();
    for msg in [
        via(254, "198.19.0.0", 16, "198.19.0.1", m1),
        via(100, "198.19.0.0", 16, "198.19.0.2", m1),
        via(254, "2001:db8:19::", 48, "2001:db8:1::1", m1),
        via(100, "2001:db8:19::", 48, "2001:db8:1::2", m1),
        neighbour(m1, "198.19.0.1", MAC_MAIN),
        neighbour(m1, "198.19.0.2", MAC_TENANT),
        neighbour(m1, "198.19.0.3", MAC_OTHER),
        neighbour(m1, "2001:db8:1::1", MAC_MAIN),
        neighbour(m1, "2001:db8:1::2", MAC_TENANT),
    ] {
        m.apply(&msg).unwrap();
    }
    Env {
        m,
        m0,
        m1,
        _pair: pair,
    }
}

/// Where a frame from m0 to `dst` goes: the gateway's MAC, or why it
/// passed.
fn to(m: &Mirror, m0: u32, dst: &str) -> Result<[u8; 6], &'static str> {
    let src = if dst.contains(':') {
        "2001:db8:18::1"
    } else {
        "198.18.0.1"
    };
    path(
        m,
        m0,
        &frame_between(src.parse().unwrap(), dst.parse().unwrap()),
    )
}

/// A tenant's table chosen by the incoming interface: its routes win over
/// main's for the same prefixes; a miss and a throw route go on to main;
/// a blackhole and the local table's routes are the kernel's; other
/// interfaces keep main. Both families.
#[test]
fn a_table_chosen_by_the_incoming_interface_routes_its_packets() {
    let env = tenant_mirror("tenant");
    let (mut m, m0, m1) = (env.m, env.m0, env.m1);
    assert_eq!(to(&m, m0, "198.19.5.5"), Ok(MAC_MAIN));
    assert_eq!(to(&m, m0, "2001:db8:19::5"), Ok(MAC_MAIN));

    m.set_rules(&rules(&[
        rule(false, 100, 100, Some("t0"), 0),
        rule(true, 100, 100, Some("t0"), 0),
    ]))
    .unwrap();
    assert_eq!(to(&m, m0, "198.19.5.5"), Ok(MAC_TENANT));
    assert_eq!(to(&m, m0, "2001:db8:19::5"), Ok(MAC_TENANT));
    // What linerate route says of it: the tables, per interface and
    // family; nothing where main's table alone routes.
    let said: Vec<String> = m.routing().into_iter().map(|(_, l)| l).collect();
    assert_eq!(
        said,
        [
            "IPv4 from t0: routed by tables 100, main",
            "IPv6 from t0: routed by tables 100, main"
        ]
    );
    // From the other interface, main's: the frame to a prefix out of m1
    // would leave where it came in, so another destination through m0.
    m.apply(&via(254, "203.0.113.0", 24, "198.19.0.3", m1))
        .unwrap();
    m.apply(&via(100, "203.0.113.0", 24, "198.19.0.2", m1))
        .unwrap();
    let from_m1 = frame_between(
        "198.19.9.9".parse().unwrap(),
        "203.0.113.5".parse().unwrap(),
    );
    let mut f = from_m1.clone();
    f[0..6].copy_from_slice(&MAC_OUT);
    assert_eq!(
        path(&m, m1, &f),
        Err("pass_same_if"),
        "main's route, out of m1"
    );
    assert_eq!(to(&m, m0, "203.0.113.5"), Ok(MAC_TENANT));

    // What table 100 misses goes to main.
    m.apply(&via(254, "10.0.0.0", 8, "198.19.0.1", m1)).unwrap();
    assert_eq!(to(&m, m0, "10.1.2.3"), Ok(MAC_MAIN));
    // A throw route in 100: main's route for that part.
    m.apply(&route(100, "198.19.7.0", 24, RouteType::Throw, None, 0))
        .unwrap();
    assert_eq!(to(&m, m0, "198.19.7.7"), Ok(MAC_MAIN));
    assert_eq!(to(&m, m0, "198.19.8.8"), Ok(MAC_TENANT));
    m.apply(&route(
        100,
        "2001:db8:19:7::",
        64,
        RouteType::Throw,
        None,
        0,
    ))
    .unwrap();
    assert_eq!(to(&m, m0, "2001:db8:19:7::7"), Ok(MAC_MAIN));
    // A blackhole in 100: the kernel drops, the fast path passes.
    m.apply(&route(100, "198.19.9.0", 24, RouteType::BlackHole, None, 0))
        .unwrap();
    assert_eq!(to(&m, m0, "198.19.9.9"), Err("pass_no_route"));
    // The router's own address (the local table, looked up first by
    // every walk) is the kernel's in table 100 too.
    m.apply(&route(255, "198.19.10.1", 32, RouteType::Local, None, m1))
        .unwrap();
    assert_eq!(to(&m, m0, "198.19.10.1"), Err("pass_local"));
    // Not in any table: the kernel's (it walks on to the default table).
    assert_eq!(to(&m, m0, "172.16.0.1"), Err("pass_no_route"));
    // Routes change in table 100 as the kernel's do.
    m.apply(&via(100, "198.19.0.0", 16, "198.19.0.3", m1))
        .unwrap();
    assert_eq!(to(&m, m0, "198.19.5.5"), Ok(MAC_OTHER));

    // The rule gone: main's again.
    m.set_rules(&rules(&[])).unwrap();
    assert_eq!(to(&m, m0, "198.19.5.5"), Ok(MAC_MAIN));
    assert_eq!(to(&m, m0, "2001:db8:19::5"), Ok(MAC_MAIN));
}

/// A table's FIB, given back, is emptied: the next table to take its slot
/// (after the grace period) holds its own routes only.
#[test]
fn a_slot_given_back_holds_nothing_of_its_old_table() {
    let env = tenant_mirror("slots");
    let (mut m, m0, m1) = (env.m, env.m0, env.m1);
    m.set_rules(&rules(&[rule(false, 100, 100, Some("t0"), 0)]))
        .unwrap();
    assert_eq!(to(&m, m0, "198.19.5.5"), Ok(MAC_TENANT));
    m.set_rules(&rules(&[])).unwrap();
    m.release_quarantine().unwrap();
    m.apply(&via(200, "172.16.0.0", 12, "198.19.0.3", m1))
        .unwrap();
    m.set_rules(&rules(&[rule(false, 100, 200, Some("t0"), 0)]))
        .unwrap();
    assert_eq!(to(&m, m0, "172.16.1.1"), Ok(MAC_OTHER));
    // Table 200 has no route for it: main's, not table 100's.
    assert_eq!(to(&m, m0, "198.19.5.5"), Ok(MAC_MAIN));
}

/// A bridge's port is routed as the bridge while it forwards: the rules'
/// `iif` is the bridge's name, not the port's; a port in another STP
/// state passes.
#[test]
fn a_bridge_port_is_routed_as_its_bridge() {
    use netlink_packet_route::link::{
        BridgePortState, InfoBridge, InfoBridgePort, InfoData, InfoKind, InfoPortData, LinkInfo,
    };
    let env = tenant_mirror("brport");
    let (mut m, m0) = (env.m, env.m0);
    const BR: u32 = 900;
    let mut bridge = link(BR, "br0", MAC_IN);
    if let M::NewLink(l) = &mut bridge {
        l.attributes
            .push(LinkAttribute::LinkInfo(vec![LinkInfo::Kind(
                InfoKind::Bridge,
            )]));
    }
    let port = |state| {
        let mut p = link(m0, "t0", MAC_IN);
        if let M::NewLink(l) = &mut p {
            l.attributes.push(LinkAttribute::Controller(BR));
            l.attributes
                .push(LinkAttribute::LinkInfo(vec![LinkInfo::PortData(
                    InfoPortData::BridgePort(vec![InfoBridgePort::State(state)]),
                )]));
        }
        p
    };
    m.apply(&bridge).unwrap();
    m.netconf(&Netconf {
        ipv6: false,
        ifindex: BR as i32,
        forwarding: Some(true),
        rp_filter: None,
        gone: false,
    })
    .unwrap();
    m.apply(&port(BridgePortState::Forwarding)).unwrap();
    // The bridge learns from what it passes up: a sender it does not
    // hold behind the port is the kernel's, until it does.
    assert_eq!(to(&m, m0, "198.19.5.5"), Err("pass_bridge_learn"));
    let mut sender = NeighbourMessage::default();
    sender.header.family = AddressFamily::Bridge;
    sender.header.ifindex = m0;
    sender.header.state = NeighbourState::Reachable;
    sender.attributes = vec![
        NeighbourAttribute::LinkLayerAddress(vec![2, 0, 0, 0, 0, 1]),
        NeighbourAttribute::Controller(BR),
    ];
    m.apply(&M::NewNeighbour(sender)).unwrap();
    assert_eq!(to(&m, m0, "198.19.5.5"), Ok(MAC_MAIN));
    assert_eq!(
        m.fdb_in_use().unwrap(),
        [(m0, [2, 0, 0, 0, 0, 1])],
        "refreshed"
    );
    let said = m.routing();
    assert!(
        said.iter()
            .any(|(_, l)| l == "IPv4 from t0: routed as br0, a port of it, by main's table"),
        "{said:?}"
    );
    m.set_rules(&rules(&[rule(false, 90, 100, Some("br0"), 0)]))
        .unwrap();
    assert_eq!(to(&m, m0, "198.19.5.5"), Ok(MAC_TENANT), "iif br0");
    m.set_rules(&rules(&[rule(false, 90, 100, Some("t0"), 0)]))
        .unwrap();
    assert_eq!(to(&m, m0, "198.19.5.5"), Ok(MAC_MAIN), "iif t0, the port");
    // Netfilter's bridge chains see what the port takes in: the kernel's.
    m.set_netfilter(linerate_netlink::netfilter::Hooks {
        bridge: vec!["nft chain bridge t c".into()],
        ..Default::default()
    })
    .unwrap();
    assert_eq!(
        to(&m, m0, "198.19.5.5"),
        Err("pass_policy"),
        "bridge chains"
    );
    m.set_netfilter(Default::default()).unwrap();
    assert_eq!(to(&m, m0, "198.19.5.5"), Ok(MAC_MAIN));
    // A bridge filtering VLANs passes up by each port's VLANs: the kernel's.
    let mut filtering = bridge.clone();
    if let M::NewLink(l) = &mut filtering {
        l.attributes.push(LinkAttribute::LinkInfo(vec![
            LinkInfo::Kind(InfoKind::Bridge),
            LinkInfo::Data(InfoData::Bridge(vec![InfoBridge::VlanFiltering(true)])),
        ]));
    }
    m.apply(&filtering).unwrap();
    assert_eq!(
        to(&m, m0, "198.19.5.5"),
        Err("pass_policy"),
        "vlan_filtering"
    );
    m.apply(&bridge).unwrap();
    assert_eq!(to(&m, m0, "198.19.5.5"), Ok(MAC_MAIN));
    m.apply(&port(BridgePortState::Blocking)).unwrap();
    assert_eq!(to(&m, m0, "198.19.5.5"), Err("pass_policy"), "blocking");
}

/// A route out of a bridge leaves by the port its FDB holds the next
/// hop's MAC behind, and follows the entry: moved to a port that is not
/// the router's (the kernel sends), gone (the kernel floods), back.
#[test]
fn a_route_out_of_a_bridge_follows_its_fdb() {
    use netlink_packet_route::link::{
        BridgePortState, InfoBridgePort, InfoKind, InfoPortData, LinkInfo,
    };
    let env = tenant_mirror("brfdb");
    let (mut m, m0, m1) = (env.m, env.m0, env.m1);
    const BR: u32 = 901;
    const ELSEWHERE: u32 = 902;
    let mut bridge = link(BR, "br1", MAC_OUT);
    if let M::NewLink(l) = &mut bridge {
        l.attributes
            .push(LinkAttribute::LinkInfo(vec![LinkInfo::Kind(
                InfoKind::Bridge,
            )]));
    }
    let mut port = link(m1, "t1", MAC_OUT);
    if let M::NewLink(l) = &mut port {
        l.attributes.push(LinkAttribute::Controller(BR));
        l.attributes
            .push(LinkAttribute::LinkInfo(vec![LinkInfo::PortData(
                InfoPortData::BridgePort(vec![InfoBridgePort::State(BridgePortState::Forwarding)]),
            )]));
    }
    let fdb = |port: u32, gone: bool| {
        let mut n = NeighbourMessage::default();
        n.header.family = AddressFamily::Bridge;
        n.header.ifindex = port;
        n.header.state = NeighbourState::Reachable;
        n.attributes = vec![
            NeighbourAttribute::LinkLayerAddress(MAC_MAIN.to_vec()),
            NeighbourAttribute::Controller(BR),
        ];
        if gone {
            M::DelNeighbour(n)
        } else {
            M::NewNeighbour(n)
        }
    };
    for msg in [
        bridge,
        port,
        via(254, "198.19.0.0", 16, "198.19.0.1", BR),
        neighbour(BR, "198.19.0.1", MAC_MAIN),
    ] {
        m.apply(&msg).unwrap();
    }
    assert_eq!(
        to(&m, m0, "198.19.5.5"),
        Err("pass_no_neigh"),
        "no FDB entry"
    );
    m.apply(&fdb(m1, false)).unwrap();
    assert_eq!(to(&m, m0, "198.19.5.5"), Ok(MAC_MAIN), "behind t1");
    m.apply(&fdb(ELSEWHERE, false)).unwrap();
    assert_eq!(
        to(&m, m0, "198.19.5.5"),
        Err("pass_no_neigh"),
        "moved elsewhere"
    );
    m.apply(&fdb(m1, false)).unwrap();
    assert_eq!(to(&m, m0, "198.19.5.5"), Ok(MAC_MAIN), "back");
    m.apply(&fdb(m1, true)).unwrap();
    assert_eq!(to(&m, m0, "198.19.5.5"), Err("pass_no_neigh"), "gone");
}

/// A rule that brings a table the fast path holds no FIB for: while its
/// FIB fills, the packets the new rules route otherwise than by main go
/// to the kernel, which walks the new rules, never by the rules before
/// (main's route); then the table's route, in the fast path.
#[test]
fn no_packet_is_routed_by_the_old_rules_while_a_table_fills() {
    let env = tenant_mirror("cold");
    let (mut m, m0) = (env.m, env.m0);
    let probe = frame_between("198.18.0.1".parse().unwrap(), "198.19.5.5".parse().unwrap());
    m.fast_path_mut().probe = Some((probe, m0));
    assert_eq!(to(&m, m0, "198.19.5.5"), Ok(MAC_MAIN));
    m.set_rules(&rules(&[rule(false, 90, 100, Some("t0"), 0)]))
        .unwrap();
    let probed = std::mem::take(&mut m.fast_path_mut().probed);
    assert_eq!(probed, [(XdpAction::Pass, "pass_policy")]);
    assert_eq!(to(&m, m0, "198.19.5.5"), Ok(MAC_TENANT));
    // Idle once the rule goes, the table's FIB stays: no fill, no pass.
    m.set_rules(&rules(&[])).unwrap();
    m.set_rules(&rules(&[rule(false, 90, 100, Some("t0"), 0)]))
        .unwrap();
    assert!(m.fast_path().probed.is_empty());
    assert_eq!(to(&m, m0, "198.19.5.5"), Ok(MAC_TENANT));
}

/// `suppress_ifgroup`: main's routes through a device of the group are
/// refused and the walk goes on (to table 100), both families; a link
/// that joins or leaves the group takes its routes with it.
#[test]
fn a_suppressor_by_interface_group_follows_the_links_groups() {
    let env = tenant_mirror("ifgroup");
    let (mut m, m0, m1) = (env.m, env.m0, env.m1);
    let suppress = |ipv6| {
        let mut r = rule(ipv6, 90, 254, None, 0);
        r.attributes.push(RuleAttribute::SuppressIfGroup(7));
        r
    };
    m.set_rules(&rules(&[
        suppress(false),
        suppress(true),
        rule(false, 91, 100, None, 0),
        rule(true, 91, 100, None, 0),
    ]))
    .unwrap();
    let said = m.routing();
    assert!(
        said.iter()
            .any(|(k, l)| k == "IPv4 from t0"
                && l.contains("tables main suppress_ifgroup 7, 100, main")),
        "{said:?}"
    );
    let grouped = |group| {
        let mut l = link(m1, "t1", MAC_OUT);
        if let M::NewLink(l) = &mut l {
            l.attributes.push(LinkAttribute::Group(group));
        }
        l
    };
    let both = |m: &Mirror| (to(m, m0, "198.19.5.5"), to(m, m0, "2001:db8:19::5"));
    assert_eq!(both(&m), (Ok(MAC_MAIN), Ok(MAC_MAIN)));
    m.apply(&grouped(7)).unwrap();
    assert_eq!(both(&m), (Ok(MAC_TENANT), Ok(MAC_TENANT)));
    m.apply(&grouped(0)).unwrap();
    assert_eq!(both(&m), (Ok(MAC_MAIN), Ok(MAC_MAIN)));
}

/// Rules with selectors on the packet are walked as the kernel walks them;
/// the rules the fast path leaves to the kernel take only the packets that
/// reach them; reverse path filtering checks sources by the rules for
/// packets from the egress.
#[test]
fn the_rules_are_walked_and_what_they_leave_goes_to_the_kernel() {
    let env = tenant_mirror("cannot");
    let (mut m, m0, m1) = (env.m, env.m0, env.m1);
    // A source selector first: the sources it holds take table 100, the
    // others main.
    m.set_rules(&rules(&[rule(false, 90, 100, None, 16)]))
        .unwrap();
    assert_eq!(to(&m, m0, "198.19.5.5"), Ok(MAC_TENANT));
    let elsewhere = frame_between(
        "203.0.113.1".parse().unwrap(),
        "198.19.5.5".parse().unwrap(),
    );
    assert_eq!(path(&m, m0, &elsewhere), Ok(MAC_MAIN));
    let said = m.routing();
    assert!(
        said.iter().any(|(k, l)| k == "IPv4 from t0"
            && l == "IPv4 from t0: routed by the rules (2 steps; tables 100, main)"),
        "{said:?}"
    );
    assert_eq!(
        to(&m, m0, "2001:db8:19::5"),
        Ok(MAC_MAIN),
        "IPv6 has no such rule"
    );
    // An unreachable rule the tenant's packets reach after their table:
    // what the table misses goes to the kernel (which answers with an
    // ICMP error), named; the table's routes stay in the fast path.
    let mut refuse = rule(false, 95, 0, Some("t0"), 0);
    refuse.header.action = RuleAction::Unreachable;
    m.set_rules(&rules(&[rule(false, 90, 100, Some("t0"), 0), refuse]))
        .unwrap();
    assert_eq!(to(&m, m0, "198.19.5.5"), Ok(MAC_TENANT));
    assert_eq!(to(&m, m0, "172.16.0.1"), Err("pass_policy"));
    let said = m.routing();
    assert!(
        said.iter().any(|(k, l)| k == "IPv4 from t0"
            && l.ends_with("the kernel's, what reaches `95: from all iif t0 unreachable`")),
        "{said:?}"
    );

    // rp_filter on: the kernel looks the source up as the packet coming
    // back, from the forward route's egress (t1), by the rules for
    // packets from there; `lo`'s play no part.
    let rp_filter = |mode| Netconf {
        ipv6: false,
        ifindex: m0 as i32,
        forwarding: None,
        rp_filter: Some(mode),
        gone: false,
    };
    m.netconf(&rp_filter(1)).unwrap();
    m.set_rules(&rules(&[rule(false, 90, 100, Some("t0"), 0)]))
        .unwrap();
    m.apply(&via(254, "198.18.0.0", 16, "198.18.0.254", m0))
        .unwrap();
    m.apply(&neighbour(m0, "198.18.0.254", MAC_OTHER)).unwrap();
    m.apply(&via(100, "198.18.0.0", 16, "198.19.0.3", m1))
        .unwrap();
    assert_eq!(to(&m, m0, "198.19.5.5"), Ok(MAC_TENANT));
    let back_by_100 = |from: &str| {
        rules(&[
            rule(false, 90, 100, Some("t0"), 0),
            rule(false, 91, 100, Some(from), 0),
        ])
    };
    m.set_rules(&back_by_100("lo")).unwrap();
    assert_eq!(to(&m, m0, "198.19.5.5"), Ok(MAC_TENANT));
    // Back from t1 by table 100: the source's route leaves by t1, not t0,
    // which strict filtering refuses (the kernel drops it) and loose
    // filtering takes.
    m.set_rules(&back_by_100("t1")).unwrap();
    assert_eq!(to(&m, m0, "198.19.5.5"), Err("pass_rp_filter"));
    m.netconf(&rp_filter(2)).unwrap();
    assert_eq!(to(&m, m0, "198.19.5.5"), Ok(MAC_TENANT));
}

/// Full tables (docs/reference/limits.md): seven tables looked up by
/// rules on the source, one more than the FIB slots beside main's: the
/// last is the kernel's (the program sends what reaches its lookup to
/// the kernel), counted once; a rule gone, its slot goes to the table
/// that waited after the grace period.
#[test]
fn a_table_past_the_fib_slots_is_the_kernels_until_a_slot_is_free() {
    let env = tenant_mirror("slotsfull");
    let (mut m, m0, m1) = (env.m, env.m0, env.m1);
    let tables: Vec<u32> = (1..=7).map(|x| 100 + x).collect();
    for &t in &tables {
        let net = format!("10.{}.0.0", t - 100);
        m.apply(&via(t, &net, 16, "198.19.0.2", m1)).unwrap();
    }
    let by_source = |ts: &[u32]| -> Vec<RuleMessage> {
        ts.iter().map(|&t| rule(false, t, t, None, 16)).collect()
    };
    m.set_rules(&rules(&by_source(&tables))).unwrap();
    assert_eq!(to(&m, m0, "10.1.0.1"), Ok(MAC_TENANT));
    assert_eq!(to(&m, m0, "10.6.0.1"), Ok(MAC_TENANT));
    assert!(to(&m, m0, "10.7.0.1").is_err(), "table 107: no slot");
    assert_eq!(m.overflows().of(Table::OtherTables), 1);
    // Rules changed, the same table still without a slot: not again.
    m.set_rules(&rules(&by_source(&tables))).unwrap();
    assert_eq!(m.overflows().of(Table::OtherTables), 1);
    m.set_rules(&rules(&by_source(&tables[1..]))).unwrap();
    m.release_quarantine().unwrap();
    assert_eq!(to(&m, m0, "10.7.0.1"), Ok(MAC_TENANT), "the slot taken");
    // Table 101 no longer looked up, and main has no route there.
    assert_eq!(to(&m, m0, "10.1.0.1"), Err("pass_no_route"));
}

/// A family's rules past its program's steps: what reaches the rules
/// past them is the kernel's, counted once; fewer rules, the fast path's
/// again.
#[test]
fn rules_past_the_programs_steps_are_the_kernels() {
    let env = tenant_mirror("stepsfull");
    let (mut m, m0) = (env.m, env.m0);
    // Rules for the other interface (steps the frames from t0 pass),
    // then the source's rule that sends them to table 100.
    let many = |n: u32| -> Vec<RuleMessage> {
        let mut r: Vec<RuleMessage> = (0..n)
            .map(|i| rule(false, 100 + i, 100, Some("t1"), 16))
            .collect();
        r.push(rule(false, 1000, 100, None, 16));
        r
    };
    m.set_rules(&rules(&many(10))).unwrap();
    assert_eq!(to(&m, m0, "198.19.5.5"), Ok(MAC_TENANT));
    m.set_rules(&rules(&many(POLICY_RULES as u32))).unwrap();
    assert!(to(&m, m0, "198.19.5.5").is_err(), "past the steps");
    assert_eq!(m.overflows().of(Table::RuleSteps), 1);
    m.set_rules(&rules(&many(10))).unwrap();
    assert_eq!(to(&m, m0, "198.19.5.5"), Ok(MAC_TENANT));
    assert_eq!(m.overflows().of(Table::RuleSteps), 1);
}
