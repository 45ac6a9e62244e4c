//! VLAN devices on the router's ports (linerate_router::mirror::vlans):
//! hand-built rtnetlink messages, on the in-memory model of the fast
//! path; with the `privileged` feature (root) on the BPF program beside
//! it, which must agree. The kernel's own VLAN devices are the oracle in
//! crates/linerate/tests/vm_differential.rs (in a VM).
use linerate_netlink::netconf::Netconf;
use linerate_router::mirror;
use linerate_testkit::frames::frame_between;
use linerate_testkit::plane::{TestPlane, XdpAction, MAC_IN, MAC_OUT};
use netlink_packet_route::link::{
    BridgePortState, InfoBridgePort, InfoData, InfoKind, InfoPortData, InfoVlan, LinkAttribute,
    LinkFlags, LinkInfo, LinkMessage, VlanProtocol, VlanQosMapping,
};
use netlink_packet_route::neighbour::{
    NeighbourAddress, NeighbourAttribute, NeighbourMessage, NeighbourState,
};
use netlink_packet_route::route::{RouteAddress, RouteAttribute, RouteMessage};
use netlink_packet_route::{AddressFamily, RouteNetlinkMessage as M};

type Mirror = mirror::Mirror<TestPlane>;

/// VLAN 10 (802.1Q) on p0; VLAN 20 (802.1ad) and 30 (802.1Q, with an
/// egress QoS map) on p1.
const V10: u32 = 910;
const V20: u32 = 920;
const V30: u32 = 930;
const MAC_GW: [u8; 6] = [2, 0, 0, 0, 0, 4];
const MAC_HOST: [u8; 6] = [2, 0, 0, 0, 0, 1];

fn link(index: u32, name: &str, mac: [u8; 6], up: bool, extra: Vec<LinkAttribute>) -> M {
    let mut l = LinkMessage::default();
    l.header.index = index;
    if up {
        l.header.flags = LinkFlags::Up | LinkFlags::LowerUp;
    }
    l.attributes = vec![
        LinkAttribute::IfName(name.into()),
        LinkAttribute::Address(mac.to_vec()),
        LinkAttribute::Mtu(1500),
    ];
    l.attributes.extend(extra);
    M::NewLink(l)
}

/// VLAN device `index` on `parent`.
fn vlan(index: u32, parent: u32, proto: VlanProtocol, id: u16, qos: bool, up: bool) -> M {
    let mut data = vec![InfoVlan::Id(id), InfoVlan::Protocol(proto)];
    if qos {
        data.push(InfoVlan::EgressQos(vec![VlanQosMapping::Mapping(0, 3)]));
    }
    let mac = if index == V10 { MAC_IN } else { MAC_OUT };
    link(
        index,
        &format!("v{id}"),
        mac,
        up,
        vec![
            LinkAttribute::Link(parent),
            LinkAttribute::LinkInfo(vec![
                LinkInfo::Kind(InfoKind::Vlan),
                LinkInfo::Data(InfoData::Vlan(data)),
            ]),
        ],
    )
}

fn forwarding(ifindex: u32, on: bool) -> Netconf {
    Netconf {
        ipv6: false,
        ifindex: ifindex as i32,
        forwarding: Some(on),
        rp_filter: None,
        gone: false,
    }
}

fn route(dst: &str, gw: &str, oif: u32) -> M {
    let mut r = RouteMessage::default();
    r.header.address_family = AddressFamily::Inet;
    r.header.destination_prefix_length = 24;
    r.header.table = 254;
    r.header.kind = netlink_packet_route::route::RouteType::Unicast;
    r.attributes = vec![
        RouteAttribute::Destination(RouteAddress::Inet(dst.parse().unwrap())),
        RouteAttribute::Gateway(RouteAddress::Inet(gw.parse().unwrap())),
        RouteAttribute::Oif(oif),
    ];
    M::NewRoute(r)
}

fn neigh(ifindex: u32, addr: &str) -> M {
    let mut n = NeighbourMessage::default();
    n.header.family = AddressFamily::Inet;
    n.header.ifindex = ifindex;
    n.header.state = NeighbourState::Reachable;
    n.attributes = vec![
        NeighbourAttribute::Destination(NeighbourAddress::Inet(addr.parse().unwrap())),
        NeighbourAttribute::LinkLayerAddress(MAC_GW.to_vec()),
    ];
    M::NewNeighbour(n)
}

/// A UDP frame to `dst` for the router's MAC, tagged with `tag` (TPID,
/// TCI) if some.
fn frame(dst: &str, tag: Option<(u16, u16)>) -> Vec<u8> {
    let mut f = frame_between("198.18.0.1".parse().unwrap(), dst.parse().unwrap());
    f[0..6].copy_from_slice(&MAC_IN);
    f[6..12].copy_from_slice(&MAC_HOST);
    if let Some((tpid, tci)) = tag {
        let mut t = tpid.to_be_bytes().to_vec();
        t.extend(tci.to_be_bytes());
        f.splice(12..12, t);
    }
    f
}

/// Where `f` went from `ingress`: the tag it left with (None: untagged)
/// and its destination MAC, the rest checked against the frame as it came
/// (its tag, if any, popped; TTL one less); or why it passed, in which
/// case it goes back as it came.
fn go(m: &Mirror, ingress: u32, f: &[u8]) -> Result<(Option<[u8; 4]>, [u8; 6]), &'static str> {
    let (action, reason, out) = m.fast_path().run(f, ingress);
    if action != XdpAction::Redirect {
        assert_eq!(out, f, "{reason}: the kernel gets the frame as it came");
        return Err(reason);
    }
    let untag = |g: &[u8]| -> (Option<[u8; 4]>, Vec<u8>) {
        match u16::from_be_bytes([g[12], g[13]]) {
            0x8100 | 0x88a8 => {
                let mut h = g.to_vec();
                let t: Vec<u8> = h.drain(12..16).collect();
                (Some(t.try_into().unwrap()), h)
            }
            _ => (None, g.to_vec()),
        }
    };
    let (tag, plain_out) = untag(&out);
    let (_, plain_in) = untag(f);
    assert_eq!(plain_out[6..12], MAC_OUT, "the egress device's MAC");
    assert_eq!(plain_out[22], plain_in[22] - 1, "TTL");
    assert_eq!(plain_out[26..], plain_in[26..], "addresses and payload");
    Ok((tag, out[0..6].try_into().unwrap()))
}

struct Env {
    m: Mirror,
    p0: u32,
    p1: u32,
    _pair: Option<linerate_testkit::plane::ScratchPair>,
}

/// The router's ports p0 and p1 with their VLAN devices, all forwarding
/// IPv4; routes out of p1 (untagged), V20 and V30, their gateways
/// resolved.
fn vlans(tag: &str) -> Env {
    let (pair, plane, p0, p1) = linerate_testkit::plane::test_plane(tag, "v");
    let mut m = Mirror::new(plane).unwrap();
    for msg in [
        link(p0, "p0", MAC_IN, true, vec![]),
        link(p1, "p1", MAC_OUT, true, vec![]),
        vlan(V10, p0, VlanProtocol::Ieee8021Q, 10, false, true),
        vlan(V20, p1, VlanProtocol::Ieee8021Ad, 20, false, true),
        vlan(V30, p1, VlanProtocol::Ieee8021Q, 30, true, true),
    ] {
        m.apply(&msg).unwrap();
    }
    for i in [p0, p1, V10, V20, V30] {
        m.netconf(&forwarding(i, true)).unwrap();
    }
    m.add_ingress(p0).unwrap();
    m.add_ingress(p1).unwrap();
    for msg in [
        route("198.51.100.0", "198.19.20.1", V20),
        route("198.51.101.0", "198.19.0.1", p1),
        route("198.51.102.0", "198.19.30.1", V30),
        neigh(V20, "198.19.20.1"),
        neigh(p1, "198.19.0.1"),
        neigh(V30, "198.19.30.1"),
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

/// A tagged frame is routed as its VLAN device, out of a port untagged or
/// out of a VLAN device with its tag (802.1Q in, 802.1ad out: rewritten);
/// an untagged one as its port, into a VLAN; a tag without a device, the
/// wrong TPID, a priority tag and a second tag are the kernel's, as is
/// what leaves by a device whose tag depends on the packet's priority.
#[test]
fn tagged_frames_are_routed_as_their_vlan_device() {
    let env = vlans("vlan");
    let (m, p0, p1) = (&env.m, env.p0, env.p1);
    let q10 = Some((0x8100, 10));
    assert_eq!(
        go(m, p0, &frame("198.51.100.9", q10)),
        Ok((Some([0x88, 0xa8, 0, 20]), MAC_GW)),
        "VLAN 10 to VLAN 20"
    );
    assert_eq!(
        go(m, p0, &frame("198.51.101.9", q10)),
        Ok((None, MAC_GW)),
        "VLAN 10 to p1, untagged"
    );
    assert_eq!(
        go(m, p0, &frame("198.51.100.9", None)),
        Ok((Some([0x88, 0xa8, 0, 20]), MAC_GW)),
        "p0, untagged, to VLAN 20"
    );
    // The tag's priority and DEI are not the device's: a frame of any
    // priority is routed as it, and leaves with priority 0.
    assert_eq!(
        go(m, p0, &frame("198.51.100.9", Some((0x8100, 0xb00a)))),
        Ok((Some([0x88, 0xa8, 0, 20]), MAC_GW)),
    );
    for (tag, why) in [
        ((0x8100, 11), "no device of VLAN 11 on p0"),
        ((0x88a8, 10), "802.1ad 10 is not 802.1Q 10"),
        ((0x8100, 0x6000), "a priority tag"),
    ] {
        assert_eq!(
            go(m, p0, &frame("198.51.100.9", Some(tag))),
            Err("pass_vlan"),
            "{why}"
        );
    }
    let mut qinq = frame("198.51.100.9", Some((0x8100, 10)));
    qinq.splice(16..16, [0x81, 0x00, 0x00, 0x05]);
    assert_eq!(go(m, p0, &qinq), Err("pass_vlan"), "a second tag");
    assert_eq!(
        go(m, p0, &frame("198.51.102.9", q10)),
        Err("pass_kernel_route"),
        "out of VLAN 30, which maps priorities to PCPs"
    );
    // VLAN 20 arrives on p1 as 802.1ad.
    let mut back = frame("198.51.101.9", Some((0x88a8, 20)));
    back[0..6].copy_from_slice(&MAC_OUT);
    assert_eq!(go(m, p1, &back), Ok((None, MAC_GW)));
}

/// The VLAN devices' settings and states are followed: forwarding off on
/// a device, a device down or gone, a port whose driver strips tags, a
/// port that is a bridge's.
#[test]
fn vlan_devices_are_followed() {
    let env = vlans("vlanf");
    let (mut m, p0) = (env.m, env.p0);
    let said = |m: &Mirror| {
        m.routing()
            .into_iter()
            .find(|(k, _)| k == "VLANs on p0")
            .map(|(_, l)| l)
            .unwrap_or_default()
    };
    let q10 = Some((0x8100, 10));
    let to20 = Ok((Some([0x88, 0xa8, 0, 20]), MAC_GW));
    m.netconf(&forwarding(V10, false)).unwrap();
    assert_eq!(
        go(&m, p0, &frame("198.51.100.9", q10)),
        Err("pass_not_forwarding")
    );
    assert_eq!(go(&m, p0, &frame("198.51.100.9", None)), to20, "p0's own");
    m.netconf(&forwarding(V10, true)).unwrap();
    assert_eq!(go(&m, p0, &frame("198.51.100.9", q10)), to20);

    // Down: the kernel drops its frames.
    m.apply(&vlan(V10, p0, VlanProtocol::Ieee8021Q, 10, false, false))
        .unwrap();
    assert_eq!(go(&m, p0, &frame("198.51.100.9", q10)), Err("pass_vlan"));
    assert_eq!(said(&m), "VLANs on p0: the kernel's: v10 (802.1Q 10): down");
    m.apply(&vlan(V10, p0, VlanProtocol::Ieee8021Q, 10, false, true))
        .unwrap();
    assert_eq!(go(&m, p0, &frame("198.51.100.9", q10)), to20);

    // A driver stripping tags: nothing of p0's is the fast path's.
    assert_eq!(said(&m), "VLANs on p0: v10 (802.1Q 10) in the fast path");
    m.set_strips_tags([p0]).unwrap();
    assert!(said(&m).contains("the kernel's, and every frame of p0's (its driver strips tags"));
    for tag in [q10, None] {
        assert_eq!(
            go(&m, p0, &frame("198.51.100.9", tag)),
            Err(if tag.is_some() {
                "pass_vlan"
            } else {
                "pass_not_forwarding"
            })
        );
    }
    m.set_strips_tags([]).unwrap();
    assert_eq!(go(&m, p0, &frame("198.51.100.9", q10)), to20);

    // p0 a bridge's port: its tagged frames are the kernel's, for its
    // VLAN devices to take first.
    m.apply(&link(
        800,
        "br0",
        [2, 0, 0, 0, 0, 8],
        true,
        vec![LinkAttribute::LinkInfo(vec![LinkInfo::Kind(
            InfoKind::Bridge,
        )])],
    ))
    .unwrap();
    m.apply(&link(
        p0,
        "p0",
        MAC_IN,
        true,
        vec![
            LinkAttribute::Controller(800),
            LinkAttribute::LinkInfo(vec![LinkInfo::PortData(InfoPortData::BridgePort(vec![
                InfoBridgePort::State(BridgePortState::Forwarding),
            ]))]),
        ],
    ))
    .unwrap();
    let mut other = frame("198.51.100.9", q10);
    other[0..6].copy_from_slice(&[2, 0, 0, 0, 0, 0x77]);
    assert_eq!(go(&m, p0, &other), Err("pass_vlan"));
    m.apply(&link(p0, "p0", MAC_IN, true, vec![])).unwrap();
    assert_eq!(go(&m, p0, &frame("198.51.100.9", q10)), to20);

    // Gone.
    let mut del = LinkMessage::default();
    del.header.index = V10;
    m.apply(&M::DelLink(del)).unwrap();
    assert_eq!(go(&m, p0, &frame("198.51.100.9", q10)), Err("pass_vlan"));
    assert!(m.vlan_names().iter().all(|(i, _)| *i != V10));
}

/// Past the VLAN devices the fast path holds (4,096), a device's frames
/// are the kernel's, counted and said, until one goes.
#[test]
fn a_vlan_device_past_the_room_is_the_kernels_until_one_goes() {
    use linerate_dataplane::layout::ROUTER_VLANS;
    use linerate_router::mirror::limits::Table;
    let env = vlans("vlanr");
    let (mut m, p0) = (env.m, env.p0);
    // V10 on p0, V20 and V30 on p1 already: fill the rest on p0.
    let mut made = Vec::new();
    let mut i = 0;
    while made.len() + 3 < ROUTER_VLANS + 1 {
        // 802.1Q ids 1 to 4094 but V10's, then 802.1ad ones.
        let (proto, id) = if i < 4093 {
            let id = 1 + i as u16;
            (VlanProtocol::Ieee8021Q, if id < 10 { id } else { id + 1 })
        } else {
            (VlanProtocol::Ieee8021Ad, 1 + (i - 4093) as u16)
        };
        let index = 2000 + i as u32;
        m.apply(&vlan(index, p0, proto, id, false, true)).unwrap();
        made.push((index, u16::from(proto), id));
        i += 1;
    }
    assert_eq!(m.counts.full.of(Table::VlanDevices), 1);
    let &(last, tpid, id) = made.last().unwrap();
    m.netconf(&forwarding(last, true)).unwrap();
    // (The device has p1's MAC: vlan().)
    let to = |tpid, id| {
        let mut f = frame("198.51.101.9", Some((tpid, id)));
        f[0..6].copy_from_slice(&MAC_OUT);
        f
    };
    assert_eq!(go(&m, p0, &to(tpid, id)), Err("pass_vlan"), "no room");
    let lines = m.routing();
    assert!(
        lines
            .iter()
            .any(|(_, l)| l.contains(&format!("v{id} (802.1ad {id}): no room"))),
        "{:?}",
        lines
            .iter()
            .map(|(_, l)| &l[l.len().saturating_sub(300)..])
            .collect::<Vec<_>>()
    );
    let mut del = LinkMessage::default();
    del.header.index = made[0].0;
    m.apply(&M::DelLink(del)).unwrap();
    assert_eq!(go(&m, p0, &to(tpid, id)), Ok((None, MAC_GW)), "taken back");
}
