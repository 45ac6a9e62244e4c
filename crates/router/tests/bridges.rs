//! Bridging between a bridge's ports in the fast path
//! (linerate_router::mirror::bridges): hand-built rtnetlink messages, on
//! the in-memory model of the fast path; with the `privileged` feature
//! (root) on the BPF program beside it, which must agree. The kernel's own
//! bridge is the oracle in crates/linerate/tests/bridge_differential.rs.
use linerate_netlink::netfilter::{BrNetfilter, Hooks};
use linerate_netlink::tc::TcHooks;
use linerate_router::mirror;
use linerate_testkit::frames::{frame_between, set_ethertype};
use linerate_testkit::plane::{TestPlane, XdpAction, MAC_IN, MAC_OUT};
use netlink_packet_route::link::{
    BridgePortState, InfoBridge, InfoBridgePort, InfoData, InfoKind, InfoPortData, LinkAttribute,
    LinkFlags, LinkInfo, LinkMessage,
};
use netlink_packet_route::neighbour::{NeighbourAttribute, NeighbourMessage, NeighbourState};
use netlink_packet_route::{AddressFamily, RouteNetlinkMessage as M};

type Mirror = mirror::Mirror<TestPlane>;

const BR: u32 = 900;
/// A port of the bridge that is not one of the router's interfaces.
const ELSEWHERE: u32 = 903;
const MAC_BR: [u8; 6] = [2, 0, 0, 0, 0, 9];
const HOST_A: [u8; 6] = [2, 0, 0, 0, 0xa, 1];
const HOST_B: [u8; 6] = [2, 0, 0, 0, 0xb, 1];
const HOST_C: [u8; 6] = [2, 0, 0, 0, 0xc, 1];
const HOST_D: [u8; 6] = [2, 0, 0, 0, 0xd, 1];
const HOST_E: [u8; 6] = [2, 0, 0, 0, 0xe, 1];

fn link(index: u32, name: &str, mac: [u8; 6], extra: Vec<LinkAttribute>) -> M {
    let mut l = LinkMessage::default();
    l.header.index = index;
    l.header.flags = LinkFlags::Up | LinkFlags::LowerUp;
    l.attributes = vec![
        LinkAttribute::IfName(name.into()),
        LinkAttribute::Address(mac.to_vec()),
        LinkAttribute::Mtu(1500),
    ];
    l.attributes.extend(extra);
    M::NewLink(l)
}

/// br0, with `data` (its IFLA_INFO_DATA) and `promisc`.
fn bridge(data: Vec<InfoBridge>, promisc: bool) -> M {
    let mut m = link(
        BR,
        "br0",
        MAC_BR,
        vec![LinkAttribute::LinkInfo(vec![
            LinkInfo::Kind(InfoKind::Bridge),
            LinkInfo::Data(InfoData::Bridge(data)),
        ])],
    );
    if let (M::NewLink(l), true) = (&mut m, promisc) {
        l.header.flags |= LinkFlags::Promisc;
    }
    m
}

/// Port `index` of br0 in `state`, with `flags` (IFLA_INFO_SLAVE_DATA).
fn port(
    index: u32,
    name: &str,
    mac: [u8; 6],
    state: BridgePortState,
    flags: Vec<InfoBridgePort>,
) -> M {
    let mut data = vec![InfoBridgePort::State(state)];
    data.extend(flags);
    link(
        index,
        name,
        mac,
        vec![
            LinkAttribute::Controller(BR),
            LinkAttribute::LinkInfo(vec![LinkInfo::PortData(InfoPortData::BridgePort(data))]),
        ],
    )
}

/// br0's FDB entry: `mac` behind `port` (gone: deleted).
fn fdb(mac: [u8; 6], port: u32, gone: bool) -> M {
    let mut n = NeighbourMessage::default();
    n.header.family = AddressFamily::Bridge;
    n.header.ifindex = port;
    n.header.state = NeighbourState::Reachable;
    n.attributes = vec![
        NeighbourAttribute::LinkLayerAddress(mac.to_vec()),
        NeighbourAttribute::Controller(BR),
    ];
    if gone {
        M::DelNeighbour(n)
    } else {
        M::NewNeighbour(n)
    }
}

/// A UDP frame from `src` to `dst` (IPv4, or IPv6).
fn frame(src: [u8; 6], dst: [u8; 6], ipv6: bool) -> Vec<u8> {
    let (s, d) = if ipv6 {
        ("2001:db8:18::1", "2001:db8:18::2")
    } else {
        ("198.18.0.1", "198.18.0.2")
    };
    let mut f = frame_between(s.parse().unwrap(), d.parse().unwrap());
    f[0..6].copy_from_slice(&dst);
    f[6..12].copy_from_slice(&src);
    f
}

/// What the fast path did with `f` arriving on `ingress`: Ok when it
/// bridged it, untouched, or why it passed.
fn go(m: &Mirror, ingress: u32, f: &[u8]) -> Result<(), &'static str> {
    match m.fast_path().run(f, ingress) {
        (XdpAction::Redirect, "bridged", out) => {
            assert_eq!(out, f, "a bridged frame leaves as it came");
            Ok(())
        }
        (XdpAction::Redirect, r, _) => panic!("redirected as {r}"),
        (_, r, _) => Err(r),
    }
}

struct Env {
    m: Mirror,
    p0: u32,
    p1: u32,
    _pair: Option<linerate_testkit::plane::ScratchPair>,
}

/// br0 with the router's two interfaces as ports b0 (p0) and b1 (p1),
/// forwarding, and a third port that is not the router's; its FDB holds
/// host A behind b0, B behind b1, C behind the third.
fn bridged(tag: &str) -> Env {
    let (pair, plane, p0, p1) = linerate_testkit::plane::test_plane(tag, "b");
    let mut m = Mirror::new(plane).unwrap();
    let fwd = BridgePortState::Forwarding;
    for msg in [
        bridge(vec![], false),
        port(p0, "b0", MAC_IN, fwd, vec![]),
        port(p1, "b1", MAC_OUT, fwd, vec![]),
        port(ELSEWHERE, "b2", [2, 0, 0, 0, 0, 7], fwd, vec![]),
    ] {
        m.apply(&msg).unwrap();
    }
    m.add_ingress(p0).unwrap();
    m.add_ingress(p1).unwrap();
    for msg in [
        fdb(HOST_A, p0, false),
        fdb(HOST_B, p1, false),
        fdb(HOST_C, ELSEWHERE, false),
        fdb(HOST_E, p0, false),
    ] {
        m.apply(&msg).unwrap();
    }
    Env {
        m,
        p0,
        p1,
        _pair: pair,
    }
}

fn said(m: &Mirror) -> String {
    m.routing()
        .into_iter()
        .find(|(k, _)| k == "bridging on br0")
        .map(|(_, l)| l)
        .unwrap_or_default()
}

/// Known unicast between the router's ports is bridged, untouched, and
/// its sources are marked for the kernel's refresh; the rest goes to the
/// bridge: an unknown or moved source, an unknown destination, one behind
/// a port that is not the router's or behind the port it came in by, ARP,
/// frames for the bridge's own MAC (routed as the bridge), frames longer
/// than the egress takes.
#[test]
fn known_unicast_is_bridged_and_the_rest_is_the_bridges() {
    let env = bridged("brg");
    let (mut m, p0, p1) = (env.m, env.p0, env.p1);
    assert_eq!(
        said(&m),
        "bridging on br0: known unicast between b0, b1 in the fast path"
    );
    for ipv6 in [false, true] {
        assert_eq!(go(&m, p0, &frame(HOST_A, HOST_B, ipv6)), Ok(()));
        assert_eq!(go(&m, p1, &frame(HOST_B, HOST_A, ipv6)), Ok(()));
    }
    // Any EtherType but ARP.
    let mut other = frame(HOST_A, HOST_B, false);
    set_ethertype(&mut other, 0x88b5);
    assert_eq!(go(&m, p0, &other), Ok(()));
    let mut used = m.fdb_in_use().unwrap();
    used.sort();
    let mut want = [(p0, HOST_A), (p1, HOST_B)];
    want.sort();
    assert_eq!(used, want);
    assert_eq!(m.fdb_in_use().unwrap(), [], "the marks were taken");

    let f = |s, d| frame(s, d, false);
    assert_eq!(
        go(&m, p0, &f(HOST_D, HOST_B)),
        Err("pass_bridge_learn"),
        "unknown source"
    );
    assert_eq!(
        go(&m, p1, &f(HOST_A, HOST_B)),
        Err("pass_bridge_learn"),
        "moved source"
    );
    assert_eq!(
        go(&m, p0, &f(HOST_A, HOST_D)),
        Err("pass_bridge_flood"),
        "unknown destination"
    );
    assert_eq!(
        go(&m, p0, &f(HOST_A, HOST_C)),
        Err("pass_bridge_kernel"),
        "behind b2"
    );
    assert_eq!(
        go(&m, p0, &f(HOST_A, HOST_E)),
        Err("pass_same_if"),
        "behind b0"
    );
    let mut arp = f(HOST_A, HOST_B);
    set_ethertype(&mut arp, 0x0806);
    assert_eq!(go(&m, p0, &arp), Err("pass_bridge_kernel"), "ARP");
    // For the bridge's MAC: routed as the bridge (which forwards nothing),
    // the source learned first, and refreshed.
    assert_eq!(go(&m, p0, &f(HOST_A, MAC_BR)), Err("pass_not_forwarding"));
    assert_eq!(m.fdb_in_use().unwrap(), [(p0, HOST_A)]);
    assert_eq!(go(&m, p0, &f(HOST_D, MAC_BR)), Err("pass_bridge_learn"));
    assert_eq!(
        go(&m, p1, &f(HOST_A, MAC_BR)),
        Err("pass_bridge_learn"),
        "moved"
    );
    let mut long = f(HOST_A, HOST_B);
    long.resize(14 + 1501, 0);
    assert_eq!(go(&m, p0, &long), Err("pass_mtu"), "over b1's MTU");
    long.truncate(14 + 1500);
    assert_eq!(go(&m, p0, &long), Ok(()), "at b1's MTU");

    // The FDB followed: a move, an entry gone, one back.
    m.apply(&fdb(HOST_A, p1, false)).unwrap();
    assert_eq!(go(&m, p1, &f(HOST_A, HOST_C)), Err("pass_bridge_kernel"));
    assert_eq!(
        go(&m, p1, &f(HOST_B, HOST_A)),
        Err("pass_same_if"),
        "A moved to b1"
    );
    assert_eq!(go(&m, p0, &f(HOST_E, HOST_A)), Ok(()), "to A on b1");
    m.apply(&fdb(HOST_A, p0, false)).unwrap();
    m.apply(&fdb(HOST_B, p1, true)).unwrap();
    assert_eq!(
        go(&m, p0, &f(HOST_A, HOST_B)),
        Err("pass_bridge_flood"),
        "B aged out"
    );
    m.apply(&fdb(HOST_B, p1, false)).unwrap();
    assert_eq!(go(&m, p0, &f(HOST_A, HOST_B)), Ok(()));
}

/// What makes the kernel's bridge treat unicast otherwise than by its FDB
/// leaves the frames to it: a port not forwarding, a port's flag, tc on a
/// port, a promiscuous bridge, one filtering VLANs or limiting what it
/// learns, netfilter chains that see bridged frames; with br_netfilter,
/// the families (and tagged frames) whose ip hooks are there. Each undone,
/// bridging comes back.
#[test]
fn what_the_bridge_treats_otherwise_is_the_kernels() {
    let env = bridged("brk");
    let (mut m, p0, p1) = (env.m, env.p0, env.p1);
    let ab = frame(HOST_A, HOST_B, false);
    let ba = frame(HOST_B, HOST_A, false);
    let fwd = BridgePortState::Forwarding;
    let b1 = |state, flags| port(p1, "b1", MAC_OUT, state, flags);

    m.apply(&b1(BridgePortState::Blocking, vec![])).unwrap();
    assert_eq!(
        go(&m, p0, &ab),
        Err("pass_bridge_kernel"),
        "to a blocking port"
    );
    assert_eq!(
        go(&m, p1, &ba),
        Err("pass_not_ours"),
        "from a blocking port"
    );
    assert!(
        said(&m).ends_with(
            "between b0 in the fast path; the kernel's where b1 is not forwarding (STP state 4)"
        ),
        "{}",
        said(&m)
    );
    m.apply(&b1(fwd, vec![])).unwrap();
    assert_eq!(go(&m, p0, &ab), Ok(()));

    for (flag, name) in [
        (InfoBridgePort::Isolated(true), "isolated"),
        (InfoBridgePort::NeighSupress(true), "neigh_suppress"),
        (InfoBridgePort::ProxyARP(true), "proxy_arp"),
        (InfoBridgePort::Locked(true), "locked"),
    ] {
        m.apply(&b1(fwd, vec![flag])).unwrap();
        assert_eq!(go(&m, p0, &ab), Err("pass_not_ours"), "{name}");
        assert_eq!(
            said(&m),
            format!("bridging on br0: the kernel's (its port b1 is {name})")
        );
    }
    m.apply(&b1(fwd, vec![InfoBridgePort::Isolated(false)]))
        .unwrap();
    assert_eq!(go(&m, p0, &ab), Ok(()));

    let tc = |egress: bool| {
        let hooks = vec!["tc filter".to_string()];
        let t = TcHooks {
            ingress: if egress { vec![] } else { hooks.clone() },
            egress: if egress { hooks } else { vec![] },
        };
        [(p1, t)].into_iter().collect()
    };
    m.set_tc(tc(true)).unwrap();
    assert_eq!(
        go(&m, p0, &ab),
        Err("pass_bridge_kernel"),
        "tc on b1's egress"
    );
    m.set_tc(tc(false)).unwrap();
    assert_eq!(go(&m, p1, &ba), Err("pass_not_ours"), "tc on b1's ingress");
    assert_eq!(go(&m, p0, &ab), Err("pass_bridge_kernel"), "to b1");
    m.set_tc(Default::default()).unwrap();
    assert_eq!(go(&m, p0, &ab), Ok(()));

    for (b, why) in [
        (bridge(vec![], true), "promiscuous"),
        (
            bridge(vec![InfoBridge::VlanFiltering(true)], false),
            "filtering VLANs",
        ),
        (
            bridge(vec![InfoBridge::FdbMaxLearned(100)], false),
            "limiting its FDB",
        ),
    ] {
        m.apply(&b).unwrap();
        assert_eq!(go(&m, p0, &ab), Err("pass_not_ours"), "{why}");
    }
    m.apply(&bridge(vec![], false)).unwrap();
    assert_eq!(go(&m, p0, &ab), Ok(()));

    m.set_netfilter(Hooks {
        bridged: vec!["nft chain bridge f forward".into()],
        ..Default::default()
    })
    .unwrap();
    assert_eq!(go(&m, p0, &ab), Err("pass_not_ours"), "a bridge chain");
    assert_eq!(
        said(&m),
        "bridging on br0: the kernel's (netfilter sees what br0 forwards (nft chain bridge f forward))"
    );
    // br_netfilter: IPv4 through the ip hooks there are; IPv6 has none.
    let brnf = |call: [bool; 2], tagged| Hooks {
        ipv4: vec!["nft chain ip f forward".into()],
        br_netfilter: Some(BrNetfilter { call, tagged }),
        ..Default::default()
    };
    let mut tagged = ab.clone();
    set_ethertype(&mut tagged, 0x8100);
    m.set_netfilter(brnf([true, true], true)).unwrap();
    assert_eq!(
        go(&m, p0, &ab),
        Err("pass_bridge_kernel"),
        "br_netfilter, IPv4"
    );
    assert_eq!(
        go(&m, p0, &frame(HOST_A, HOST_B, true)),
        Ok(()),
        "IPv6: no ip6 hook"
    );
    assert_eq!(
        go(&m, p0, &tagged),
        Err("pass_bridge_kernel"),
        "VLAN-tagged"
    );
    m.set_netfilter(brnf([true, true], false)).unwrap();
    assert_eq!(go(&m, p0, &tagged), Ok(()), "tagged frames not filtered");
    // Off by the sysctl, on by the bridge's own nf_call_iptables.
    m.set_netfilter(brnf([false, false], false)).unwrap();
    assert_eq!(go(&m, p0, &ab), Ok(()));
    m.apply(&bridge(vec![InfoBridge::NfCallIpTables(true)], false))
        .unwrap();
    assert_eq!(
        go(&m, p0, &ab),
        Err("pass_bridge_kernel"),
        "nf_call_iptables"
    );
    m.set_netfilter(Default::default()).unwrap();
    assert_eq!(go(&m, p0, &ab), Ok(()), "no br_netfilter");
}

/// Five MACs whose key hashes to one set: the fifth is left out (the
/// kernel's: flooded to, as the kernel would until told), said, and
/// placed once one of the four goes.
#[test]
fn a_mac_with_no_room_is_the_kernels_until_there_is() {
    use linerate_dataplane::fdb;
    use linerate_dataplane::layout::FdbKey;
    let env = bridged("brfull");
    let (mut m, p0, p1) = (env.m, env.p0, env.p1);
    let set = fdb::set_of(fdb::key(&FdbKey::new(BR, HOST_A)));
    let crowd: Vec<[u8; 6]> = (1u32..)
        .map(|i| {
            let [a, b, c, d] = i.to_be_bytes();
            [2, 0x77, a, b, c, d]
        })
        .filter(|&mac| fdb::set_of(fdb::key(&FdbKey::new(BR, mac))) == set)
        .take(4)
        .collect();
    // A's set holds A and three of them; the fourth finds it full.
    for &mac in &crowd {
        m.apply(&fdb(mac, p1, false)).unwrap();
    }
    assert_eq!(go(&m, p0, &frame(HOST_A, crowd[2], false)), Ok(()));
    assert_eq!(
        go(&m, p0, &frame(HOST_A, crowd[3], false)),
        Err("pass_bridge_flood")
    );
    assert!(
        said(&m)
            .ends_with("; 1 MACs left out of the fast path's FDB (their sets full): the kernel's"),
        "{}",
        said(&m)
    );
    m.apply(&fdb(crowd[0], p1, true)).unwrap();
    assert_eq!(
        go(&m, p0, &frame(HOST_A, crowd[3], false)),
        Ok(()),
        "placed"
    );
    assert_eq!(
        go(&m, p0, &frame(HOST_A, crowd[0], false)),
        Err("pass_bridge_flood"),
        "gone"
    );
    assert_eq!(
        said(&m),
        "bridging on br0: known unicast between b0, b1 in the fast path"
    );
}
