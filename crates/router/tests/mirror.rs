//! The mirror follows the kernel: hand-built rtnetlink messages (what a
//! dump or a notification carries) go into `Mirror`, and after each the
//! fast path's verdicts on frames are checked. Route add,
//! replace, delete and metrics; the local table over the main one;
//! connected, device-multipath and blackhole routes to the kernel;
//! neighbour states; link down and MTU; ECMP; nexthop objects; id churn;
//! resync. On the in-memory model of the fast path; with the `privileged`
//! feature (root) on the BPF program beside it, which must agree.
use linerate_dataplane::layout::{NH_GROUP_BUCKETS, ROUTER_NEXTHOPS, ROUTER_NH_GROUPS};
use linerate_router::mirror;
use linerate_router::mirror::limits::Table;

type Mirror = mirror::Mirror<TestPlane>;
use linerate_netlink::netconf::Netconf;
use netlink_packet_route::link::{LinkAttribute, LinkFlags, LinkMessage};
use netlink_packet_route::neighbour::{
    NeighbourAddress, NeighbourAttribute, NeighbourMessage, NeighbourState,
};
use netlink_packet_route::route::{
    RouteAddress, RouteAttribute, RouteMessage, RouteMetric, RouteNextHop, RouteType,
};
use netlink_packet_route::{AddressFamily, RouteNetlinkMessage as M};
use std::net::Ipv4Addr;

use linerate_testkit::frames::frame_between;
use linerate_testkit::plane::{path, verdict, TestPlane, XdpAction, MAC_IN, MAC_OUT};

const MAC_GW: [u8; 6] = [2, 0, 0, 0, 0, 4];
const MAC_GW2: [u8; 6] = [2, 0, 0, 0, 0, 5];

fn link(index: u32, mac: [u8; 6], mtu: u32, up: bool) -> M {
    let mut l = LinkMessage::default();
    l.header.index = index;
    if up {
        l.header.flags = LinkFlags::Up | LinkFlags::LowerUp;
    }
    l.attributes = vec![
        LinkAttribute::Address(mac.to_vec()),
        LinkAttribute::Mtu(mtu),
    ];
    M::NewLink(l)
}

#[allow(clippy::too_many_arguments)] // a route message has that many parts
fn route(
    dst: &str,
    len: u8,
    table: u8,
    kind: RouteType,
    gw: Option<&str>,
    oif: u32,
    prio: u32,
    mtu: Option<u32>,
) -> RouteMessage {
    let mut r = RouteMessage::default();
    r.header.address_family = AddressFamily::Inet;
    r.header.destination_prefix_length = len;
    r.header.table = table;
    r.header.kind = kind;
    r.attributes
        .push(RouteAttribute::Destination(RouteAddress::Inet(
            dst.parse().unwrap(),
        )));
    if let Some(g) = gw {
        r.attributes
            .push(RouteAttribute::Gateway(RouteAddress::Inet(
                g.parse().unwrap(),
            )));
    }
    r.attributes.push(RouteAttribute::Oif(oif));
    r.attributes.push(RouteAttribute::Priority(prio));
    if let Some(m) = mtu {
        r.attributes
            .push(RouteAttribute::Metrics(vec![RouteMetric::Mtu(m)]));
    }
    r
}

fn neigh(ifindex: u32, addr: &str, mac: [u8; 6], state: NeighbourState) -> NeighbourMessage {
    let mut n = NeighbourMessage::default();
    n.header.family = AddressFamily::Inet;
    n.header.ifindex = ifindex;
    n.header.state = state;
    n.attributes = vec![
        NeighbourAttribute::Destination(NeighbourAddress::Inet(addr.parse().unwrap())),
        NeighbourAttribute::LinkLayerAddress(mac.to_vec()),
    ];
    n
}

fn frame(dst: &str, payload: usize) -> Vec<u8> {
    let mut f = Vec::new();
    etherparse::PacketBuilder::ethernet2([2, 0, 0, 0, 0, 1], MAC_IN)
        .ipv4(
            [198, 18, 0, 1],
            dst.parse::<Ipv4Addr>().unwrap().octets(),
            64,
        )
        .udp(1, 2)
        .write(&mut f, &vec![0u8; payload])
        .unwrap();
    f
}

/// A mirror over the test plane (linerate_testkit::plane::test_plane: the model, and with
/// root the router program on a scratch veth pair beside it), m0 in, m1
/// out, both links known up. `m` drops before `_pair`.
struct Env {
    m: Mirror,
    m0: u32,
    m1: u32,
    _pair: Option<linerate_testkit::plane::ScratchPair>,
}

fn scratch_mirror(tag: &str) -> Env {
    let (pair, plane, m0, m1) = linerate_testkit::plane::test_plane(tag, "m");
    let mut m = Mirror::new(plane).unwrap();
    m.apply(&link(m0, MAC_IN, 1500, true)).unwrap();
    m.apply(&link(m1, MAC_OUT, 1500, true)).unwrap();
    Env {
        m,
        m0,
        m1,
        _pair: pair,
    }
}

#[test]
fn the_fast_path_follows_the_kernel() {
    let env = scratch_mirror("mirror");
    let (mut m, m0, m1) = (env.m, env.m0, env.m1);
    // (verdict, reason, destination MAC when forwarded) for a frame.
    let check = |m: &Mirror, dst: &str, payload: usize| verdict(m, m0, &frame(dst, payload));
    let apply = |m: &mut Mirror, msg: M| m.apply(&msg).unwrap();

    // A connected network: the kernel's (it resolves the hosts).
    apply(
        &mut m,
        M::NewRoute(route(
            "198.19.0.0",
            24,
            254,
            RouteType::Unicast,
            None,
            m1,
            0,
            None,
        )),
    );
    assert_eq!(check(&m, "198.19.0.9", 18).1, "pass_no_neigh");
    // A route through a gateway not resolved yet: passed.
    apply(
        &mut m,
        M::NewRoute(route(
            "198.19.0.0",
            16,
            254,
            RouteType::Unicast,
            Some("198.19.0.1"),
            m1,
            0,
            None,
        )),
    );
    assert_eq!(check(&m, "198.19.5.5", 18).1, "pass_no_neigh");
    // Resolving, then failing, then resolving again.
    apply(
        &mut m,
        M::NewNeighbour(neigh(m1, "198.19.0.1", MAC_GW, NeighbourState::Incomplete)),
    );
    assert_eq!(check(&m, "198.19.5.5", 18).1, "pass_no_neigh");
    apply(
        &mut m,
        M::NewNeighbour(neigh(m1, "198.19.0.1", MAC_GW, NeighbourState::Reachable)),
    );
    assert_eq!(
        check(&m, "198.19.5.5", 18),
        (XdpAction::Redirect, "forwarded", MAC_GW)
    );
    apply(
        &mut m,
        M::NewNeighbour(neigh(m1, "198.19.0.1", MAC_GW, NeighbourState::Stale)),
    );
    assert_eq!(
        check(&m, "198.19.5.5", 18).0,
        XdpAction::Redirect,
        "STALE still forwards, as the kernel does"
    );
    apply(
        &mut m,
        M::NewNeighbour(neigh(m1, "198.19.0.1", MAC_GW, NeighbourState::Failed)),
    );
    assert_eq!(check(&m, "198.19.5.5", 18).1, "pass_no_neigh");
    apply(
        &mut m,
        M::NewNeighbour(neigh(m1, "198.19.0.1", MAC_GW2, NeighbourState::Permanent)),
    );
    assert_eq!(
        check(&m, "198.19.5.5", 18),
        (XdpAction::Redirect, "forwarded", MAC_GW2),
        "the new MAC"
    );
    // A better metric to another gateway wins; deleting it falls back.
    apply(
        &mut m,
        M::NewNeighbour(neigh(m1, "198.19.0.2", MAC_GW, NeighbourState::Reachable)),
    );
    apply(
        &mut m,
        M::NewRoute(route(
            "198.19.0.0",
            16,
            254,
            RouteType::Unicast,
            Some("198.19.0.2"),
            m1,
            0,
            None,
        )),
    );
    assert_eq!(
        check(&m, "198.19.5.5", 18).2,
        MAC_GW,
        "replaced (same metric)"
    );
    apply(
        &mut m,
        M::NewRoute(route(
            "198.19.0.0",
            16,
            254,
            RouteType::Unicast,
            Some("198.19.0.1"),
            m1,
            100,
            None,
        )),
    );
    assert_eq!(
        check(&m, "198.19.5.5", 18).2,
        MAC_GW,
        "metric 0 beats metric 100"
    );
    apply(
        &mut m,
        M::DelRoute(route(
            "198.19.0.0",
            16,
            254,
            RouteType::Unicast,
            Some("198.19.0.2"),
            m1,
            0,
            None,
        )),
    );
    assert_eq!(
        check(&m, "198.19.5.5", 18).2,
        MAC_GW2,
        "the metric 100 route remains"
    );
    // A more specific route's MTU; a local address in the local table wins.
    apply(
        &mut m,
        M::NewRoute(route(
            "198.19.7.0",
            24,
            254,
            RouteType::Unicast,
            Some("198.19.0.1"),
            m1,
            0,
            Some(500),
        )),
    );
    assert_eq!(check(&m, "198.19.7.7", 600).1, "pass_mtu");
    assert_eq!(check(&m, "198.19.7.7", 400).0, XdpAction::Redirect);
    apply(
        &mut m,
        M::NewRoute(route(
            "198.19.7.7",
            32,
            255,
            RouteType::Local,
            None,
            m1,
            0,
            None,
        )),
    );
    assert_eq!(check(&m, "198.19.7.7", 18).1, "pass_local");
    // A multipath route through no gateway, a blackhole route: the
    // kernel's.
    let mut ecmp = route("198.19.8.0", 24, 254, RouteType::Unicast, None, m1, 0, None);
    ecmp.attributes
        .push(RouteAttribute::MultiPath(vec![RouteNextHop::default()]));
    apply(&mut m, M::NewRoute(ecmp));
    assert_eq!(check(&m, "198.19.8.1", 18).1, "pass_kernel_route");
    apply(
        &mut m,
        M::NewRoute(route(
            "198.19.9.0",
            24,
            254,
            RouteType::BlackHole,
            None,
            m1,
            0,
            None,
        )),
    );
    assert_eq!(check(&m, "198.19.9.1", 18).1, "pass_no_route");
    // Other tables are not mirrored.
    apply(
        &mut m,
        M::NewRoute(route(
            "10.0.0.0",
            8,
            100,
            RouteType::Unicast,
            Some("198.19.0.1"),
            m1,
            0,
            None,
        )),
    );
    assert_eq!(check(&m, "10.1.1.1", 18).1, "pass_no_route");
    // Link down: its next hops pass; up again: forwarded.
    apply(&mut m, link(m1, MAC_OUT, 1500, false));
    assert_eq!(check(&m, "198.19.5.5", 18).1, "pass_no_neigh");
    apply(&mut m, link(m1, MAC_OUT, 1500, true));
    assert_eq!(check(&m, "198.19.5.5", 18).0, XdpAction::Redirect);
    // The last route goes: no route.
    apply(
        &mut m,
        M::DelRoute(route(
            "198.19.0.0",
            16,
            254,
            RouteType::Unicast,
            Some("198.19.0.1"),
            m1,
            100,
            None,
        )),
    );
    assert_eq!(check(&m, "198.19.5.5", 18).1, "pass_no_route");
    // IPv6: a /49 through a gateway, resolved.
    let mut r6 = RouteMessage::default();
    r6.header.address_family = AddressFamily::Inet6;
    r6.header.destination_prefix_length = 49;
    r6.header.table = 254;
    r6.header.kind = RouteType::Unicast;
    r6.attributes = vec![
        RouteAttribute::Destination(RouteAddress::Inet6("2001:2:0:8000::".parse().unwrap())),
        RouteAttribute::Gateway(RouteAddress::Inet6("2001:2:0:8000::1".parse().unwrap())),
        RouteAttribute::Oif(m1),
        RouteAttribute::Priority(1024),
    ];
    apply(&mut m, M::NewRoute(r6));
    let mut n6 = NeighbourMessage::default();
    n6.header.family = AddressFamily::Inet6;
    n6.header.ifindex = m1;
    n6.header.state = NeighbourState::Permanent;
    n6.attributes = vec![
        NeighbourAttribute::Destination(NeighbourAddress::Inet6(
            "2001:2:0:8000::1".parse().unwrap(),
        )),
        NeighbourAttribute::LinkLayerAddress(MAC_GW.to_vec()),
    ];
    apply(&mut m, M::NewNeighbour(n6));
    let mut f6 = Vec::new();
    etherparse::PacketBuilder::ethernet2([2, 0, 0, 0, 0, 1], MAC_IN)
        .ipv6(
            "2001:2::1".parse::<std::net::Ipv6Addr>().unwrap().octets(),
            "2001:2:0:8000::10:1"
                .parse::<std::net::Ipv6Addr>()
                .unwrap()
                .octets(),
            64,
        )
        .udp(1, 2)
        .write(&mut f6, &[0u8; 18])
        .unwrap();
    let (v, _, out) = m.fast_path().run(&f6, m0);
    assert_eq!(
        (v, &out[0..6]),
        (XdpAction::Redirect, &MAC_GW[..]),
        "IPv6 forwarded to the gateway"
    );
    assert_eq!(m.overflows(), Default::default());
}

fn addr(a: &str) -> RouteAddress {
    match a.parse::<std::net::IpAddr>().unwrap() {
        std::net::IpAddr::V4(v) => RouteAddress::Inet(v),
        std::net::IpAddr::V6(v) => RouteAddress::Inet6(v),
    }
}

/// A unicast route message of the main table for `dst/len`, either
/// family, before its next hops.
fn main_unicast(dst: &str, len: u8) -> RouteMessage {
    let mut r = RouteMessage::default();
    r.header.address_family = if dst.contains(':') {
        AddressFamily::Inet6
    } else {
        AddressFamily::Inet
    };
    r.header.destination_prefix_length = len;
    r.header.table = 254;
    r.header.kind = RouteType::Unicast;
    r.attributes.push(RouteAttribute::Destination(addr(dst)));
    r
}

/// A multipath route message: `dst/len` through `(gateway, weight)`s on
/// `oif`, or only the gateway named (IPv6's delete of one member).
fn multipath(dst: &str, len: u8, gws: &[(&str, u8)], oif: u32, prio: u32) -> RouteMessage {
    let mut r = main_unicast(dst, len);
    r.attributes.push(RouteAttribute::Priority(prio));
    let hops = gws
        .iter()
        .map(|(gw, weight)| {
            let mut h = RouteNextHop::default();
            h.hops = weight - 1;
            h.interface_index = oif;
            h.attributes = vec![RouteAttribute::Gateway(addr(gw))];
            h
        })
        .collect();
    r.attributes.push(RouteAttribute::MultiPath(hops));
    r
}

fn neighbour(ifindex: u32, addr: &str, mac: [u8; 6], state: NeighbourState) -> M {
    let a = match addr.parse::<std::net::IpAddr>().unwrap() {
        std::net::IpAddr::V4(v) => NeighbourAddress::Inet(v),
        std::net::IpAddr::V6(v) => NeighbourAddress::Inet6(v),
    };
    let mut n = NeighbourMessage::default();
    n.header.family = match a {
        NeighbourAddress::Inet(_) => AddressFamily::Inet,
        _ => AddressFamily::Inet6,
    };
    n.header.ifindex = ifindex;
    n.header.state = state;
    n.attributes = vec![
        NeighbourAttribute::Destination(a),
        NeighbourAttribute::LinkLayerAddress(mac.to_vec()),
    ];
    M::NewNeighbour(n)
}

/// Gateways on `ifindex` resolved to their MACs.
fn resolve(m: &mut Mirror, ifindex: u32, gws: &[(&str, [u8; 6])]) {
    for (gw, mac) in gws {
        m.apply(&neighbour(ifindex, gw, *mac, NeighbourState::Reachable))
            .unwrap();
    }
}

/// ECMP: flows (one per source address) keep their gateway and spread
/// over the members by weight; a member whose neighbour fails sends its
/// flows to the kernel; a member without a gateway gives the route to the
/// kernel; IPv6 deletes one member at a time.
#[test]
fn ecmp_routes_spread_flows_over_their_gateways() {
    let env = scratch_mirror("ecmp");
    let (mut m, m0, m1) = (env.m, env.m0, env.m1);
    const FLOWS: u32 = 1024;
    // Per flow: the gateway's MAC if forwarded, else the reason.
    let paths = |m: &Mirror, dst: &str| -> Vec<Result<[u8; 6], &'static str>> {
        let dst: std::net::IpAddr = dst.parse().unwrap();
        (0..FLOWS)
            .map(|i| {
                let src: std::net::IpAddr = match dst {
                    std::net::IpAddr::V4(_) => Ipv4Addr::from(0x0a00_0000 + i * 7919).into(),
                    std::net::IpAddr::V6(_) => {
                        std::net::Ipv6Addr::from(0x2001_0002_0003_u128 << 80 | (i as u128 * 7919))
                            .into()
                    }
                };
                let f = frame_between(src, dst);
                let first = path(m, m0, &f);
                assert_eq!(first, path(m, m0, &f), "a flow keeps its path");
                first
            })
            .collect()
    };
    let share = |p: &[Result<[u8; 6], &str>], want: Result<[u8; 6], &str>| {
        p.iter().filter(|&&x| x == want).count() as f64 / p.len() as f64
    };

    resolve(
        &mut m,
        m1,
        &[("198.19.0.1", MAC_GW), ("198.19.0.2", MAC_GW2)],
    );
    let two = [("198.19.0.1", 1), ("198.19.0.2", 1)];
    m.apply(&M::NewRoute(multipath("198.51.100.0", 24, &two, m1, 0)))
        .unwrap();
    let p = paths(&m, "198.51.100.7");
    let (a, b) = (share(&p, Ok(MAC_GW)), share(&p, Ok(MAC_GW2)));
    assert_eq!(a + b, 1.0, "every flow forwarded: {:?}", &p[..4]);
    // 32 buckets each: half, within 6 standard deviations of 1024 flows.
    assert!((0.4..=0.6).contains(&a), "equal weights: {a:.3} / {b:.3}");

    // Weights 1 and 3: 16 and 48 buckets.
    let weighted = [("198.19.0.1", 1), ("198.19.0.2", 3)];
    m.apply(&M::NewRoute(multipath(
        "198.51.100.0",
        24,
        &weighted,
        m1,
        0,
    )))
    .unwrap();
    let p = paths(&m, "198.51.100.7");
    let a = share(&p, Ok(MAC_GW));
    assert!((0.17..=0.33).contains(&a), "weight 1 of 4: {a:.3}");
    assert_eq!(a + share(&p, Ok(MAC_GW2)), 1.0);

    // The first gateway's neighbour fails: its flows go to the kernel,
    // the others stay on the second.
    m.apply(&neighbour(m1, "198.19.0.1", MAC_GW, NeighbourState::Failed))
        .unwrap();
    let p = paths(&m, "198.51.100.7");
    let (kernel, b) = (share(&p, Err("pass_no_neigh")), share(&p, Ok(MAC_GW2)));
    assert_eq!(kernel + b, 1.0);
    assert!((0.17..=0.33).contains(&kernel), "{kernel:.3}");

    // A member through no gateway: the whole route is the kernel's.
    let mut dev_member = multipath("198.51.100.0", 24, &two, m1, 0);
    if let Some(RouteAttribute::MultiPath(hops)) = dev_member.attributes.last_mut() {
        hops[1].attributes.clear();
    }
    m.apply(&M::NewRoute(dev_member)).unwrap();
    assert_eq!(
        share(&paths(&m, "198.51.100.7"), Err("pass_kernel_route")),
        1.0
    );
    m.apply(&M::DelRoute(multipath("198.51.100.0", 24, &two, m1, 0)))
        .unwrap();
    assert_eq!(share(&paths(&m, "198.51.100.7"), Err("pass_no_route")), 1.0);

    // IPv6: both members, then `ip -6 route del P via G2` (a delete
    // naming one gateway) leaves G1 alone, then G1's delete the route.
    resolve(&mut m, m1, &[("2001:2::1", MAC_GW), ("2001:2::2", MAC_GW2)]);
    let v6 = [("2001:2::1", 1), ("2001:2::2", 1)];
    m.apply(&M::NewRoute(multipath("2001:db8:5::", 48, &v6, m1, 1024)))
        .unwrap();
    let p = paths(&m, "2001:db8:5::9");
    let a = share(&p, Ok(MAC_GW));
    assert!((0.4..=0.6).contains(&a), "IPv6 equal weights: {a:.3}");
    assert_eq!(a + share(&p, Ok(MAC_GW2)), 1.0);
    let mut del = multipath("2001:db8:5::", 48, &[], m1, 1024);
    del.attributes.pop(); // no RTA_MULTIPATH: a gateway and a device
    del.attributes
        .push(RouteAttribute::Gateway(RouteAddress::Inet6(
            "2001:2::2".parse().unwrap(),
        )));
    del.attributes.push(RouteAttribute::Oif(m1));
    m.apply(&M::DelRoute(del.clone())).unwrap();
    assert_eq!(share(&paths(&m, "2001:db8:5::9"), Ok(MAC_GW)), 1.0);
    del.attributes.pop();
    del.attributes.pop();
    del.attributes
        .push(RouteAttribute::Gateway(RouteAddress::Inet6(
            "2001:2::1".parse().unwrap(),
        )));
    del.attributes.push(RouteAttribute::Oif(m1));
    m.apply(&M::DelRoute(del)).unwrap();
    assert_eq!(
        share(&paths(&m, "2001:db8:5::9"), Err("pass_no_route")),
        1.0
    );
}

/// Routes through nexthop objects: a gateway object, a group, an object
/// changing under its routes, a blackhole, a deleted member and a deleted
/// object (the kernel deletes its routes without a word per route).
#[test]
fn nexthop_objects_are_followed() {
    use linerate_netlink::nhobj::{NhMessage, NhObject};
    let env = scratch_mirror("nhobj");
    let (mut m, m0, m1) = (env.m, env.m0, env.m1);
    let check = |m: &Mirror, src: u32| {
        let f = frame_between(Ipv4Addr::from(src).into(), "198.51.100.9".parse().unwrap());
        path(m, m0, &f)
    };
    // The MACs 64 flows reach (or the reasons they pass).
    let reached = |m: &Mirror| {
        let mut seen: Vec<Result<[u8; 6], &str>> =
            (0..64).map(|i| check(m, 0x0a00_0000 + i * 7919)).collect();
        seen.sort();
        seen.dedup();
        seen
    };
    let object = |m: &mut Mirror, id: u32, object: NhObject| {
        m.nexthop_object(&NhMessage {
            id,
            gone: false,
            object,
        })
        .unwrap()
    };
    let delete = |m: &mut Mirror, id: u32| {
        let gone = NhMessage {
            id,
            gone: true,
            object: NhObject::Kernel,
        };
        m.nexthop_object(&gone).unwrap()
    };
    // The route to 198.51.100.0/24 through object `id`.
    let via_object = |id: u32| {
        let mut r = route(
            "198.51.100.0",
            24,
            254,
            RouteType::Unicast,
            None,
            m1,
            0,
            None,
        );
        r.attributes.push(RouteAttribute::NhId(id));
        M::NewRoute(r)
    };
    let gw = |a: &str| NhObject::Gateway {
        oif: m1,
        gw: a.parse().unwrap(),
    };
    resolve(
        &mut m,
        m1,
        &[("198.19.0.1", MAC_GW), ("198.19.0.2", MAC_GW2)],
    );
    object(&mut m, 1, gw("198.19.0.1"));
    object(&mut m, 2, gw("198.19.0.2"));
    m.apply(&via_object(1)).unwrap();
    assert_eq!(reached(&m), [Ok(MAC_GW)], "through gateway object 1");
    // The object changes gateway under its route.
    object(&mut m, 1, gw("198.19.0.2"));
    assert_eq!(reached(&m), [Ok(MAC_GW2)], "object 1 replaced");
    object(&mut m, 1, gw("198.19.0.1"));
    // A group of both.
    object(&mut m, 10, NhObject::Group(vec![(1, 1), (2, 1)]));
    m.apply(&via_object(10)).unwrap();
    assert_eq!(reached(&m), [Ok(MAC_GW), Ok(MAC_GW2)], "through group 10");
    // Member 2 deleted: the kernel takes it out of the group.
    delete(&mut m, 2);
    assert_eq!(reached(&m), [Ok(MAC_GW)], "group 10 without member 2");
    // A group with a member the fast path cannot take: the kernel's.
    object(&mut m, 3, NhObject::Kernel);
    object(&mut m, 10, NhObject::Group(vec![(1, 1), (3, 1)]));
    assert_eq!(
        reached(&m),
        [Err("pass_kernel_route")],
        "a blackhole member"
    );
    // The group deleted: so is its route.
    delete(&mut m, 10);
    assert_eq!(reached(&m), [Err("pass_no_route")], "group 10 deleted");
    // A route through an object not known (yet): the kernel's.
    m.apply(&via_object(99)).unwrap();
    assert_eq!(reached(&m), [Err("pass_kernel_route")], "unknown object 99");
    object(&mut m, 99, gw("198.19.0.1"));
    assert_eq!(reached(&m), [Ok(MAC_GW)], "object 99 arrives");
}

/// Churn: a route replaced through 70,000 gateways in turn (more than the
/// fast path's 65,536 next hops), and an ECMP route through 5,000 pairs
/// (more than its 4,096 groups). Unused ids are swept and come back after
/// the grace period (`release_quarantine`, which `linerate route` calls
/// 100 ms after a change): the last route is still forwarded in XDP.
#[test]
fn next_hop_and_group_ids_are_recycled() {
    let env = scratch_mirror("churn");
    let (mut m, m0, m1) = (env.m, env.m0, env.m1);
    let gw = |i: u32| Ipv4Addr::from(0x0a00_0000 + i).to_string();
    let reaches = |m: &Mirror| {
        let f = frame_between(
            "198.18.0.1".parse().unwrap(),
            "198.51.100.9".parse().unwrap(),
        );
        verdict(m, m0, &f)
    };
    const ROUTES: u32 = 70_000;
    for i in 0..ROUTES {
        let r = route(
            "198.51.100.0",
            24,
            254,
            RouteType::Unicast,
            Some(&gw(i)),
            m1,
            0,
            None,
        );
        m.apply(&M::NewRoute(r)).unwrap();
        if i % 1000 == 999 {
            m.release_quarantine().unwrap();
        }
    }
    m.release_quarantine().unwrap();
    m.apply(&neighbour(
        m1,
        &gw(ROUTES - 1),
        MAC_GW,
        NeighbourState::Reachable,
    ))
    .unwrap();
    assert_eq!(
        reaches(&m),
        (XdpAction::Redirect, "forwarded", MAC_GW),
        "the {ROUTES}th gateway, in XDP"
    );

    const GROUPS: u32 = 5_000;
    for i in 0..GROUPS {
        let (a, b) = (gw(100_000 + 2 * i), gw(100_001 + 2 * i));
        let r = multipath("198.51.100.0", 24, &[(&a, 1), (&b, 1)], m1, 0);
        m.apply(&M::NewRoute(r)).unwrap();
        if i % 100 == 99 {
            m.release_quarantine().unwrap();
        }
    }
    m.release_quarantine().unwrap();
    for g in [
        gw(100_000 + 2 * (GROUPS - 1)),
        gw(100_001 + 2 * (GROUPS - 1)),
    ] {
        m.apply(&neighbour(m1, &g, MAC_GW2, NeighbourState::Reachable))
            .unwrap();
    }
    assert_eq!(
        reaches(&m),
        (XdpAction::Redirect, "forwarded", MAC_GW2),
        "the {GROUPS}th group, in XDP"
    );
}

/// After lost notifications, `resync` applies a full dump and drops what
/// it no longer has: a route, a neighbour and a nexthop object (with its
/// route) the kernel deleted meanwhile stop being used; what is still
/// there stays.
/// A main-table /24 through gateway `gw` on `oif`.
fn via24(net: &str, gw: &str, oif: u32) -> M {
    M::NewRoute(route(
        net,
        24,
        254,
        RouteType::Unicast,
        Some(gw),
        oif,
        0,
        None,
    ))
}

#[test]
fn a_resync_drops_what_the_kernel_no_longer_has() {
    use linerate_netlink::nhobj::{NhMessage, NhObject};
    use linerate_netlink::route::Change;
    let env = scratch_mirror("resync");
    let (mut m, m0, m1) = (env.m, env.m0, env.m1);
    let to = |dst: &str| frame_between("198.18.0.1".parse().unwrap(), dst.parse().unwrap());
    let via = |net: &str, gw: &str| via24(net, gw, m1);
    let object = NhMessage {
        id: 5,
        gone: false,
        object: NhObject::Gateway {
            oif: m1,
            gw: "198.19.0.1".parse().unwrap(),
        },
    };
    let mut through_object = route(
        "198.51.102.0",
        24,
        254,
        RouteType::Unicast,
        None,
        m1,
        0,
        None,
    );
    through_object.attributes.push(RouteAttribute::NhId(5));
    let gw1 = neighbour(m1, "198.19.0.1", MAC_GW, NeighbourState::Reachable);
    let gw2 = neighbour(m1, "198.19.0.2", MAC_GW2, NeighbourState::Reachable);
    let before = [
        Change::Rt(link(m0, MAC_IN, 1500, true)),
        Change::Rt(link(m1, MAC_OUT, 1500, true)),
        Change::Rt(gw1),
        Change::Rt(gw2.clone()),
        Change::Nexthop(object),
        Change::Rt(via("198.51.100.0", "198.19.0.1")),
        Change::Rt(via("198.51.101.0", "198.19.0.2")),
        Change::Rt(M::NewRoute(through_object)),
    ];
    m.resync(&before).unwrap();
    assert_eq!(path(&m, m0, &to("198.51.100.9")), Ok(MAC_GW));
    assert_eq!(path(&m, m0, &to("198.51.101.9")), Ok(MAC_GW2));
    assert_eq!(path(&m, m0, &to("198.51.102.9")), Ok(MAC_GW));
    // Meanwhile the kernel deleted the first route, the first gateway's
    // neighbour and the object.
    let after = [
        Change::Rt(link(m0, MAC_IN, 1500, true)),
        Change::Rt(link(m1, MAC_OUT, 1500, true)),
        Change::Rt(gw2),
        Change::Rt(via("198.51.101.0", "198.19.0.2")),
    ];
    m.resync(&after).unwrap();
    assert_eq!(path(&m, m0, &to("198.51.100.9")), Err("pass_no_route"));
    assert_eq!(
        path(&m, m0, &to("198.51.101.9")),
        Ok(MAC_GW2),
        "still there"
    );
    assert_eq!(path(&m, m0, &to("198.51.102.9")), Err("pass_no_route"));
    m.apply(&via("198.51.103.0", "198.19.0.1")).unwrap();
    assert_eq!(
        path(&m, m0, &to("198.51.103.9")),
        Err("pass_no_neigh"),
        "the first gateway's neighbour is gone"
    );
}

/// The router's own interfaces are followed: a new MAC becomes the one
/// frames must carry (frames to the old one are no longer the router's,
/// as the kernel would drop them), a link message without an address
/// leaves it, and an interface gone (deleted, moved away, or missing from
/// a resync's dump) is no longer considered nor sent through.
/// A resync after lost notifications costs what changed: the dump of an
/// unchanged kernel writes nothing to the fast path, and a dump with
/// three routes changed writes exactly what the three notifications would
/// have written to a mirror that had not lost them.
#[test]
fn a_resync_writes_only_what_changed() {
    use linerate_netlink::route::Change;
    let env = scratch_mirror("resync-cost");
    let (mut resynced, m0, m1) = (env.m, env.m0, env.m1);
    // The twin that saw every notification: the model alone.
    let mut notified = Mirror::new(linerate_testkit::plane::TestPlane::model(m0, m1)).unwrap();
    let via = |net: u32, gw: &str| via24(&Ipv4Addr::from(net).to_string(), gw, m1);
    let net = |i: u32| 0x0a00_0000 + (i << 8);
    let mut dump: Vec<Change> = vec![
        Change::Rt(link(m0, MAC_IN, 1500, true)),
        Change::Rt(link(m1, MAC_OUT, 1500, true)),
        Change::Rt(neighbour(
            m1,
            "198.19.0.1",
            MAC_GW,
            NeighbourState::Reachable,
        )),
        Change::Rt(neighbour(
            m1,
            "198.19.0.2",
            MAC_GW2,
            NeighbourState::Reachable,
        )),
    ];
    dump.extend((0..3000).map(|i| Change::Rt(via(net(i), "198.19.0.1"))));
    resynced.resync(&dump).unwrap();
    notified.resync(&dump).unwrap();
    let loaded = resynced.fast_path().writes;
    assert!(
        loaded.fib_entries >= 3000,
        "the table was written: {loaded:?}"
    );

    resynced.resync(&dump).unwrap();
    assert_eq!(
        resynced.fast_path().writes,
        loaded,
        "a dump of an unchanged kernel wrote to the fast path"
    );

    // While notifications were lost: one route withdrawn, one moved to
    // the other gateway, one announced.
    let gone = via(net(7), "198.19.0.1");
    let M::NewRoute(gone) = gone else {
        unreachable!()
    };
    let changes = [
        M::DelRoute(gone),
        via(net(8), "198.19.0.2"),
        via(net(5000), "198.19.0.1"),
    ];
    dump.remove(4 + 7);
    dump[4 + 7] = Change::Rt(via(net(8), "198.19.0.2"));
    dump.push(Change::Rt(via(net(5000), "198.19.0.1")));
    let before = notified.fast_path().writes;
    for c in &changes {
        notified.apply(c).unwrap();
    }
    let by_notifications = notified.fast_path().writes;
    resynced.resync(&dump).unwrap();
    let by_resync = resynced.fast_path().writes;
    assert!(
        by_notifications.fib_entries > before.fib_entries,
        "the changes wrote the FIB"
    );
    assert_eq!(
        (
            by_resync.fib_entries - loaded.fib_entries,
            by_resync.nexthops - loaded.nexthops
        ),
        (
            by_notifications.fib_entries - before.fib_entries,
            by_notifications.nexthops - before.nexthops
        ),
        "the resync's writes (FIB entries, next hops) against the notifications'"
    );
    let to = |i: u32| {
        frame_between(
            "198.18.0.1".parse().unwrap(),
            Ipv4Addr::from(net(i) + 9).into(),
        )
    };
    for m in [&resynced, &notified] {
        assert_eq!(path(m, m0, &to(7)), Err("pass_no_route"));
        assert_eq!(path(m, m0, &to(8)), Ok(MAC_GW2));
        assert_eq!(path(m, m0, &to(9)), Ok(MAC_GW));
        assert_eq!(path(m, m0, &to(5000)), Ok(MAC_GW));
    }
}

#[test]
fn the_routers_own_interfaces_are_followed() {
    use linerate_netlink::route::Change;
    const MAC_NEW: [u8; 6] = [2, 0, 0, 0, 0, 0x42];
    let env = scratch_mirror("ingress");
    let (mut m, m0, m1) = (env.m, env.m0, env.m1);
    m.add_ingress(m0).unwrap();
    m.add_ingress(m1).unwrap();
    for i in [m0, m1] {
        m.netconf(&forwarding(false, i as i32, true)).unwrap();
    }
    m.apply(&M::NewRoute(unicast(
        "198.51.100.0",
        24,
        Some("198.19.0.1"),
        m1,
        None,
    )))
    .unwrap();
    resolve(&mut m, m1, &[("198.19.0.1", MAC_GW)]);
    let to = |mac: [u8; 6]| {
        let mut f = frame_between(
            "198.18.0.1".parse().unwrap(),
            "198.51.100.9".parse().unwrap(),
        );
        f[0..6].copy_from_slice(&mac);
        f
    };
    assert_eq!(path(&m, m0, &to(MAC_IN)), Ok(MAC_GW));
    assert_eq!(path(&m, m0, &to(MAC_NEW)), Err("pass_not_ours"));

    m.apply(&link(m0, MAC_NEW, 1500, true)).unwrap();
    assert_eq!(path(&m, m0, &to(MAC_NEW)), Ok(MAC_GW));
    assert_eq!(path(&m, m0, &to(MAC_IN)), Err("pass_not_ours"));
    let mut no_address = LinkMessage::default();
    no_address.header.index = m0;
    no_address.header.flags = LinkFlags::Up | LinkFlags::LowerUp;
    m.apply(&M::NewLink(no_address)).unwrap();
    assert_eq!(m.ingress().get(&m0), Some(&MAC_NEW));
    assert_eq!(path(&m, m0, &to(MAC_NEW)), Ok(MAC_GW));

    // A bridge's word on a port (AF_BRIDGE: "deleted" when it leaves the
    // bridge) is not the link's.
    let mut port = LinkMessage::default();
    port.header.index = m0;
    port.header.interface_family = AddressFamily::Bridge;
    m.apply(&M::DelLink(port)).unwrap();
    assert_eq!(path(&m, m0, &to(MAC_NEW)), Ok(MAC_GW));

    let mut gone = LinkMessage::default();
    gone.header.index = m0;
    m.apply(&M::DelLink(gone)).unwrap();
    assert!(!m.ingress().contains_key(&m0));
    assert_eq!(path(&m, m0, &to(MAC_NEW)), Err("pass_not_ours"));

    // A dump without m1: it went while notifications were lost.
    m.resync(&[Change::Rt(link(m0, MAC_NEW, 1500, true))])
        .unwrap();
    assert!(m.ingress().is_empty());
    let mut back = to(MAC_OUT);
    back[6..12].copy_from_slice(&MAC_GW);
    assert_eq!(path(&m, m1, &back), Err("pass_not_ours"));
}

/// A netconf message: the forwarding setting of an interface (or of
/// `all`, -1) for IPv4 or IPv6.
fn forwarding(ipv6: bool, ifindex: i32, on: bool) -> Netconf {
    Netconf {
        ipv6,
        ifindex,
        forwarding: Some(on),
        rp_filter: None,
        gone: false,
    }
}

/// A netconf message: IPv4's rp_filter of an interface (or `all`, -1).
fn rp_filter(ifindex: i32, mode: u8) -> Netconf {
    Netconf {
        ipv6: false,
        ifindex,
        forwarding: None,
        rp_filter: Some(mode),
        gone: false,
    }
}

/// The fast path forwards only what the kernel would: IPv4 where the
/// ingress interface's forwarding sysctl is on, IPv6 where conf.all's is.
/// Unknown is off; a message about another setting changes nothing.
#[test]
fn only_what_the_kernel_forwards_is_forwarded() {
    let env = scratch_mirror("netconf");
    let (mut m, m0, m1) = (env.m, env.m0, env.m1);
    m.add_ingress(m0).unwrap();
    m.add_ingress(m1).unwrap();
    for (net, gw) in [
        ("198.51.100.0", "198.19.0.1"),
        ("2001:db8:5::", "2001:db8:1::1"),
    ] {
        let len = if net.contains(':') { 48 } else { 24 };
        m.apply(&M::NewRoute(multipath(net, len, &[(gw, 1)], m1, 0)))
            .unwrap();
        resolve(&mut m, m1, &[(gw, MAC_GW)]);
    }
    let v4 = frame_between(
        "198.18.0.1".parse().unwrap(),
        "198.51.100.9".parse().unwrap(),
    );
    let v6 = frame_between(
        "2001:db8:2::1".parse().unwrap(),
        "2001:db8:5::9".parse().unwrap(),
    );
    let both = |m: &Mirror| (path(m, m0, &v4), path(m, m0, &v6));
    let off = Err("pass_not_forwarding");
    assert_eq!(both(&m), (off, off), "nothing known yet");

    m.netconf(&forwarding(false, m0 as i32, true)).unwrap();
    assert_eq!(both(&m), (Ok(MAC_GW), off));
    // IPv6's per-interface setting is not what the kernel checks.
    m.netconf(&forwarding(true, m0 as i32, true)).unwrap();
    assert_eq!(both(&m), (Ok(MAC_GW), off));
    m.netconf(&forwarding(true, -1, true)).unwrap();
    assert_eq!(both(&m), (Ok(MAC_GW), Ok(MAC_GW)));

    // Another interface's IPv4 setting, and another setting of this one.
    m.netconf(&forwarding(false, m1 as i32, false)).unwrap();
    let mut rp_filter = forwarding(false, m0 as i32, false);
    rp_filter.forwarding = None;
    m.netconf(&rp_filter).unwrap();
    assert_eq!(both(&m), (Ok(MAC_GW), Ok(MAC_GW)));

    // An interface's IPv6 configuration going (a rename, an MTU below
    // 1280) leaves its IPv4 setting.
    let mut v6_gone = forwarding(true, m0 as i32, false);
    (v6_gone.forwarding, v6_gone.gone) = (None, true);
    m.netconf(&v6_gone).unwrap();
    assert_eq!(both(&m), (Ok(MAC_GW), Ok(MAC_GW)));

    m.netconf(&forwarding(false, m0 as i32, false)).unwrap();
    assert_eq!(both(&m), (off, Ok(MAC_GW)));
    m.netconf(&forwarding(true, -1, false)).unwrap();
    assert_eq!(both(&m), (off, off));
    // The settings follow a change of MAC.
    m.netconf(&forwarding(false, m0 as i32, true)).unwrap();
    m.apply(&link(m0, [2, 0, 0, 0, 0, 0x42], 1500, true))
        .unwrap();
    let mut v4_new = v4.clone();
    v4_new[0..6].copy_from_slice(&[2, 0, 0, 0, 0, 0x42]);
    assert_eq!(path(&m, m0, &v4_new), Ok(MAC_GW));
}

/// Reverse path filtering as the kernel does it (fib_validate_source):
/// strict (1) forwards a frame whose source is routed back out of the
/// interface it came in on, loose (2) one whose source has a unicast
/// route; the mode is the larger of conf.all's and the interface's. Where
/// the fast path cannot tell (no route, a connected source), it passes.
#[test]
fn reverse_path_filtering_is_the_kernels() {
    let env = scratch_mirror("rpf");
    let (mut m, m0, m1) = (env.m, env.m0, env.m1);
    m.add_ingress(m0).unwrap();
    m.add_ingress(m1).unwrap();
    m.netconf(&forwarding(false, m0 as i32, true)).unwrap();
    let via = |net: &str, gw: Option<&str>, oif: u32| {
        M::NewRoute(route(net, 24, 254, RouteType::Unicast, gw, oif, 0, None))
    };
    m.apply(&via("198.51.100.0", Some("198.19.0.1"), m1))
        .unwrap();
    m.apply(&via("198.18.0.0", Some("198.18.1.1"), m0)).unwrap();
    m.apply(&via("203.0.113.0", Some("198.19.0.2"), m1))
        .unwrap();
    m.apply(&via("192.0.2.0", None, m0)).unwrap();
    resolve(
        &mut m,
        m1,
        &[("198.19.0.1", MAC_GW), ("198.19.0.2", MAC_GW2)],
    );
    resolve(&mut m, m0, &[("198.18.1.1", MAC_GW2)]);
    let sources = ["198.18.0.5", "203.0.113.5", "192.0.2.5", "100.64.0.1"];
    let paths = |m: &Mirror| -> Vec<Result<[u8; 6], &'static str>> {
        sources
            .iter()
            .map(|s| {
                let f = frame_between(s.parse().unwrap(), "198.51.100.9".parse().unwrap());
                path(m, m0, &f)
            })
            .collect()
    };
    let (fwd, rpf) = (Ok(MAC_GW), Err("pass_rp_filter"));
    assert_eq!(
        paths(&m),
        [fwd, fwd, fwd, fwd],
        "off: no source is looked at"
    );
    m.netconf(&rp_filter(m0 as i32, 1)).unwrap();
    assert_eq!(paths(&m), [fwd, rpf, rpf, rpf], "strict");
    m.netconf(&rp_filter(m0 as i32, 0)).unwrap();
    m.netconf(&rp_filter(-1, 2)).unwrap();
    assert_eq!(paths(&m), [fwd, fwd, rpf, rpf], "loose, from conf.all");
    m.netconf(&rp_filter(m0 as i32, 1)).unwrap();
    assert_eq!(
        paths(&m),
        [fwd, fwd, rpf, rpf],
        "loose: the larger of all and the interface"
    );
    m.netconf(&rp_filter(-1, 0)).unwrap();
    assert_eq!(paths(&m), [fwd, rpf, rpf, rpf], "strict again");
    // Another interface's setting does not count here.
    m.netconf(&rp_filter(m0 as i32, 0)).unwrap();
    m.netconf(&rp_filter(m1 as i32, 1)).unwrap();
    assert_eq!(paths(&m), [fwd, fwd, fwd, fwd]);
    // A host on a connected network, once its neighbour is known, has an
    // entry of its own in the FIB: strict filtering judges it here, as
    // the kernel would (its connected route is on the ingress).
    m.netconf(&rp_filter(m0 as i32, 1)).unwrap();
    assert_eq!(paths(&m), [fwd, rpf, rpf, rpf]);
    resolve(&mut m, m0, &[("192.0.2.5", MAC_GW2)]);
    assert_eq!(paths(&m), [fwd, rpf, fwd, rpf]);
}

/// A frame from one of the router's own addresses is a martian source the
/// kernel drops (fib_validate_source, whatever rp_filter says): the fast
/// path passes it, and forwards that source again once the address goes
/// (by a notification, or missing from a resync's dump).
#[test]
fn frames_from_the_routers_own_addresses_pass() {
    use linerate_netlink::route::Change;
    let env = scratch_mirror("local");
    let (mut m, m0, m1) = (env.m, env.m0, env.m1);
    let to_gw = M::NewRoute(unicast("198.51.100.0", 24, Some("198.19.0.1"), m1, None));
    m.apply(&to_gw).unwrap();
    resolve(&mut m, m1, &[("198.19.0.1", MAC_GW)]);
    let own = |gone: bool| {
        let r = route("198.18.0.77", 32, 255, RouteType::Local, None, m0, 0, None);
        if gone {
            M::DelRoute(r)
        } else {
            M::NewRoute(r)
        }
    };
    let from = |m: &Mirror, src: &str| {
        let f = frame_between(src.parse().unwrap(), "198.51.100.9".parse().unwrap());
        path(m, m0, &f)
    };
    assert_eq!(from(&m, "198.18.0.77"), Ok(MAC_GW));
    m.apply(&own(false)).unwrap();
    assert_eq!(from(&m, "198.18.0.77"), Err("pass_special"));
    assert_eq!(from(&m, "198.18.0.78"), Ok(MAC_GW));
    m.apply(&own(true)).unwrap();
    assert_eq!(from(&m, "198.18.0.77"), Ok(MAC_GW));

    m.apply(&own(false)).unwrap();
    assert_eq!(from(&m, "198.18.0.77"), Err("pass_special"));
    let dump = [
        Change::Rt(link(m0, MAC_IN, 1500, true)),
        Change::Rt(link(m1, MAC_OUT, 1500, true)),
        Change::Rt(neighbour(
            m1,
            "198.19.0.1",
            MAC_GW,
            NeighbourState::Reachable,
        )),
        Change::Rt(to_gw),
    ];
    m.resync(&dump).unwrap();
    assert_eq!(from(&m, "198.18.0.77"), Ok(MAC_GW), "gone in the dump");
}

/// A unicast route message of either family: through `gw`, or a connected
/// network (no gateway) out of `oif`.
fn unicast(dst: &str, len: u8, gw: Option<&str>, oif: u32, mtu: Option<u32>) -> RouteMessage {
    let mut r = main_unicast(dst, len);
    if let Some(g) = gw {
        r.attributes.push(RouteAttribute::Gateway(addr(g)));
    }
    r.attributes.push(RouteAttribute::Oif(oif));
    if let Some(m) = mtu {
        r.attributes
            .push(RouteAttribute::Metrics(vec![RouteMetric::Mtu(m)]));
    }
    r
}

/// A host on a connected network is forwarded to in the fast path once
/// its neighbour is usable, to the MAC the kernel has for it; without one
/// (or failed) it is the kernel's. The route the kernel takes decides: a
/// gateway route over the host, or a /32 through a gateway, sends it to
/// that gateway; a neighbour on another interface than the connected
/// network's gets no entry; when the connected network goes, the host
/// follows the next covering route. The connected route's MTU holds. IPv6
/// the same, link-local neighbours aside.
#[test]
fn hosts_on_connected_networks_are_forwarded() {
    let env = scratch_mirror("hosts");
    let (mut m, m0, m1) = (env.m, env.m0, env.m1);
    let to = |m: &Mirror, dst: &str| {
        path(
            m,
            m0,
            &frame_between("198.18.0.1".parse().unwrap(), dst.parse().unwrap()),
        )
    };
    let to6 = |m: &Mirror, dst: &str| {
        path(
            m,
            m0,
            &frame_between("2001:db8::1".parse().unwrap(), dst.parse().unwrap()),
        )
    };
    let add = |m: &mut Mirror, r: RouteMessage| m.apply(&M::NewRoute(r)).unwrap();
    let del = |m: &mut Mirror, r: RouteMessage| m.apply(&M::DelRoute(r)).unwrap();
    let state = |m: &mut Mirror, oif: u32, ip: &str, mac: [u8; 6], s: NeighbourState| {
        m.apply(&neighbour(oif, ip, mac, s)).unwrap()
    };
    const MAC_HOST: [u8; 6] = [2, 0, 0, 0, 0, 9];
    const MAC_HOST2: [u8; 6] = [2, 0, 0, 0, 0, 0x29];

    // The neighbour first, then its connected network.
    state(
        &mut m,
        m1,
        "198.19.0.9",
        MAC_HOST,
        NeighbourState::Reachable,
    );
    assert_eq!(to(&m, "198.19.0.9"), Err("pass_no_route"));
    let connected = unicast("198.19.0.0", 24, None, m1, None);
    add(&mut m, connected.clone());
    assert_eq!(to(&m, "198.19.0.9"), Ok(MAC_HOST));
    assert_eq!(to(&m, "198.19.0.10"), Err("pass_no_neigh"), "no neighbour");
    // The network first, then a neighbour, its states and a new MAC.
    state(
        &mut m,
        m1,
        "198.19.0.10",
        MAC_HOST2,
        NeighbourState::Incomplete,
    );
    assert_eq!(to(&m, "198.19.0.10"), Err("pass_no_neigh"));
    state(&mut m, m1, "198.19.0.10", MAC_HOST2, NeighbourState::Stale);
    assert_eq!(to(&m, "198.19.0.10"), Ok(MAC_HOST2));
    state(&mut m, m1, "198.19.0.9", MAC_HOST, NeighbourState::Failed);
    assert_eq!(to(&m, "198.19.0.9"), Err("pass_no_neigh"));
    state(
        &mut m,
        m1,
        "198.19.0.9",
        MAC_HOST2,
        NeighbourState::Reachable,
    );
    assert_eq!(to(&m, "198.19.0.9"), Ok(MAC_HOST2));
    state(
        &mut m,
        m1,
        "198.19.0.9",
        MAC_HOST,
        NeighbourState::Reachable,
    );
    assert_eq!(to(&m, "198.19.0.9"), Ok(MAC_HOST));

    // A gateway route over the host: the kernel sends to the gateway.
    resolve(&mut m, m1, &[("198.19.0.1", MAC_GW)]);
    let over = unicast("198.19.0.8", 29, Some("198.19.0.1"), m1, None);
    add(&mut m, over.clone());
    assert_eq!(to(&m, "198.19.0.9"), Ok(MAC_GW));
    assert_eq!(to(&m, "198.19.0.10"), Ok(MAC_GW));
    del(&mut m, over);
    assert_eq!(to(&m, "198.19.0.9"), Ok(MAC_HOST));
    // A host route through a gateway wins; a host route out of the
    // interface is the connected network again.
    let host_gw = unicast("198.19.0.9", 32, Some("198.19.0.1"), m1, None);
    add(&mut m, host_gw.clone());
    assert_eq!(to(&m, "198.19.0.9"), Ok(MAC_GW));
    del(&mut m, host_gw);
    let host_dev = unicast("198.19.0.9", 32, None, m1, None);
    add(&mut m, host_dev.clone());
    assert_eq!(to(&m, "198.19.0.9"), Ok(MAC_HOST));
    del(&mut m, host_dev);
    assert_eq!(to(&m, "198.19.0.9"), Ok(MAC_HOST));

    // A neighbour on another interface than its network's: the kernel's.
    state(
        &mut m,
        m0,
        "198.19.0.11",
        MAC_HOST,
        NeighbourState::Reachable,
    );
    assert_eq!(to(&m, "198.19.0.11"), Err("pass_no_neigh"));

    // The connected route's MTU is the host's.
    del(&mut m, connected);
    let narrow = unicast("198.19.0.0", 24, None, m1, Some(1000));
    add(&mut m, narrow.clone());
    assert_eq!(to(&m, "198.19.0.9"), Ok(MAC_HOST));
    let big = frame("198.19.0.9", 1200);
    assert_eq!(path(&m, m0, &big), Err("pass_mtu"));

    // The network gone: its hosts follow the next covering route.
    resolve(&mut m, m0, &[("198.18.0.254", MAC_GW2)]);
    let default = unicast("0.0.0.0", 0, Some("198.18.0.254"), m0, None);
    add(&mut m, default);
    assert_eq!(to(&m, "198.19.0.9"), Ok(MAC_HOST));
    del(&mut m, narrow);
    // (out of m0, where the frame came in: the kernel's, to redirect)
    assert_eq!(to(&m, "198.19.0.9"), Err("pass_same_if"));
    assert_eq!(to(&m, "198.19.0.10"), Err("pass_same_if"));

    // IPv6: a host of a connected /64; link-local neighbours get nothing.
    add(&mut m, unicast("2001:db8:1::", 64, None, m1, None));
    add(&mut m, unicast("fe80::", 64, None, m1, None));
    state(
        &mut m,
        m1,
        "2001:db8:1::9",
        MAC_HOST,
        NeighbourState::Reachable,
    );
    state(&mut m, m1, "fe80::9", MAC_HOST, NeighbourState::Reachable);
    assert_eq!(to6(&m, "2001:db8:1::9"), Ok(MAC_HOST));
    assert_eq!(to6(&m, "2001:db8:1::a"), Err("pass_no_neigh"));
    let (v4, v6) = m.routes();
    assert_eq!(v6, 3, "the two networks and one host ({v4} IPv4 entries)");
    state(
        &mut m,
        m1,
        "2001:db8:1::9",
        MAC_HOST,
        NeighbourState::Failed,
    );
    assert_eq!(to6(&m, "2001:db8:1::9"), Err("pass_no_neigh"));
}

/// Full tables (docs/reference/limits.md): a frame to host .9 of /24
/// number `i` from `base`.
fn to_block(m: &Mirror, ingress: u32, base: u32, i: u32) -> (XdpAction, &'static str, [u8; 6]) {
    let dst = Ipv4Addr::from(base + (i << 8) + 9);
    verdict(
        m,
        ingress,
        &frame_between("198.18.0.1".parse().unwrap(), dst.into()),
    )
}

/// Routes through more distinct gateways than the fast path has next-hop
/// entries: those past the room are the kernel's (pass_kernel_route, its
/// gateway resolved or not), counted; once as many routes are removed,
/// the ids come back a grace period later and the routes that waited
/// are forwarded in XDP.
#[test]
fn next_hops_past_their_room_are_the_kernels_until_ids_come_back() {
    let env = scratch_mirror("nhfull");
    let (mut m, m0, m1) = (env.m, env.m0, env.m1);
    const BASE: u32 = 0x1400_0000; // 20.0.0.0
    let net = |i: u32| Ipv4Addr::from(BASE + (i << 8)).to_string();
    let gw = |i: u32| Ipv4Addr::from(0x0a00_0000 + i + 1).to_string();
    let n = ROUTER_NEXTHOPS;
    for i in 0..n {
        m.apply(&via24(&net(i), &gw(i), m1)).unwrap();
    }
    // The ids below the first free one are the kernel's kinds.
    let room = ROUTER_NEXTHOPS - (mirror::UNSUPPORTED_NH + 1);
    let left = n - room;
    assert_eq!(m.overflows().of(Table::Nexthops), left as u64);
    let last = n - 1;
    resolve(&mut m, m1, &[(&gw(0), MAC_GW), (&gw(last), MAC_GW2)]);
    assert_eq!(
        to_block(&m, m0, BASE, 0),
        (XdpAction::Redirect, "forwarded", MAC_GW)
    );
    assert_eq!(to_block(&m, m0, BASE, last).1, "pass_kernel_route");
    // Nothing removed yet: a grace period changes nothing.
    m.release_quarantine().unwrap();
    assert_eq!(to_block(&m, m0, BASE, last).1, "pass_kernel_route");
    for i in 1..=left {
        let M::NewRoute(r) = via24(&net(i), &gw(i), m1) else {
            unreachable!()
        };
        m.apply(&M::DelRoute(r)).unwrap();
    }
    m.release_quarantine().unwrap();
    assert_eq!(
        to_block(&m, m0, BASE, last),
        (XdpAction::Redirect, "forwarded", MAC_GW2),
        "the route that waited, in XDP"
    );
    assert_eq!(to_block(&m, m0, BASE, 1).1, "pass_no_route");
}

/// ECMP routes each through a pair of its own: one more than the fast
/// path's groups is the kernel's, counted, until a group is freed; a
/// route of more members than a group's buckets is the kernel's too.
#[test]
fn ecmp_groups_past_their_room_are_the_kernels_until_one_is_freed() {
    let env = scratch_mirror("grpfull");
    let (mut m, m0, m1) = (env.m, env.m0, env.m1);
    const BASE: u32 = 0x1e00_0000; // 30.0.0.0
    let net = |j: u32| Ipv4Addr::from(BASE + (j << 8)).to_string();
    let gw = |i: u32| Ipv4Addr::from(0x0a00_0000 + i + 1).to_string();
    let ecmp = |j: u32| {
        let (a, b) = (gw(2 * j), gw(2 * j + 1));
        multipath(&net(j), 24, &[(&a, 1), (&b, 1)], m1, 0)
    };
    let n = ROUTER_NH_GROUPS + 1;
    for j in 0..n {
        m.apply(&M::NewRoute(ecmp(j))).unwrap();
    }
    assert_eq!(m.overflows().of(Table::Groups), 1);
    let last = n - 1;
    resolve(
        &mut m,
        m1,
        &[(&gw(2 * last), MAC_GW2), (&gw(2 * last + 1), MAC_GW2)],
    );
    assert_eq!(to_block(&m, m0, BASE, last).1, "pass_kernel_route");
    m.apply(&M::DelRoute(ecmp(0))).unwrap();
    m.release_quarantine().unwrap();
    assert_eq!(
        to_block(&m, m0, BASE, last),
        (XdpAction::Redirect, "forwarded", MAC_GW2),
        "the group that waited, in XDP"
    );

    // More members than buckets.
    let many: Vec<String> = (0..NH_GROUP_BUCKETS as u32 + 1)
        .map(|i| gw(200_000 + i))
        .collect();
    let members: Vec<(&str, u8)> = many.iter().map(|g| (g.as_str(), 1)).collect();
    m.apply(&M::NewRoute(multipath("198.51.100.0", 24, &members, m1, 0)))
        .unwrap();
    assert_eq!(m.overflows().of(Table::GroupMembers), 1);
    assert_eq!(to_block(&m, m0, 0xc633_6400, 0).1, "pass_kernel_route");
}

/// More blocks with routes longer than the first level than main's IPv4
/// FIB has groups for: the route past the room hands its whole /24 to
/// the kernel (pass_kernel_route, the rest of the block too), counted;
/// once a route is removed and a grace period has passed, the block is
/// taken back and the route forwarded in XDP.
#[test]
fn a_route_past_the_fibs_room_hands_its_block_to_the_kernel_until_there_is_room() {
    let env = scratch_mirror("fibfull");
    let (mut m, m0, m1) = (env.m, env.m0, env.m1);
    const BASE: u32 = 0x2800_0000; // 40.0.0.0
    let net = |i: u32| Ipv4Addr::from(BASE + (i << 8)).to_string();
    let half = |i: u32| {
        route(
            &net(i),
            25,
            254,
            RouteType::Unicast,
            Some("10.0.0.1"),
            m1,
            0,
            None,
        )
    };
    resolve(&mut m, m1, &[("10.0.0.1", MAC_GW)]);
    let groups = linerate_fib::Shape::IPV4.groups;
    for i in 0..=groups {
        m.apply(&M::NewRoute(half(i))).unwrap();
    }
    assert_eq!(m.overflows().of(Table::Fib4), 1);
    assert_eq!(
        to_block(&m, m0, BASE, 0),
        (XdpAction::Redirect, "forwarded", MAC_GW)
    );
    assert_eq!(to_block(&m, m0, BASE, groups).1, "pass_kernel_route");
    let upper = Ipv4Addr::from(BASE + (groups << 8) + 200);
    let f = frame_between("198.18.0.1".parse().unwrap(), upper.into());
    assert_eq!(
        verdict(&m, m0, &f).1,
        "pass_kernel_route",
        "the whole block"
    );
    // Full still: a grace period changes nothing.
    m.release_quarantine().unwrap();
    assert_eq!(to_block(&m, m0, BASE, groups).1, "pass_kernel_route");
    m.apply(&M::DelRoute(half(0))).unwrap();
    m.release_quarantine().unwrap();
    assert_eq!(
        to_block(&m, m0, BASE, groups),
        (XdpAction::Redirect, "forwarded", MAC_GW),
        "the block taken back"
    );
    assert_eq!(
        verdict(&m, m0, &f).1,
        "pass_no_route",
        "its other half: no route"
    );
    assert_eq!(to_block(&m, m0, BASE, 0).1, "pass_no_route");
}
