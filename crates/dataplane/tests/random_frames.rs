//! The router program against its model on a million random and mutated
//! frames: frames of every kind the fast path meets (forwarded, to an
//! unresolved neighbour, for the router, too big, without a route, TTL 1,
//! options, fragments, extension headers, ARP, VLAN tags of a device
//! there is and of none, priority and double tags, multicast),
//! their bytes flipped, set to edge values, cut or lengthened at random
//! (a seeded generator: a failure names its frame and seed). With root the
//! program runs each frame beside the model (BPF_PROG_RUN), and the two
//! must agree on the action, the reason and every byte, whichever of the
//! two single-buffer programs meets the frame first; without it the model
//! alone must not panic.
use etherparse::PacketBuilder;
use linerate_dataplane::dataplane::Dataplane;
use linerate_dataplane::layout::{
    Iface, Nexthop, NhGroup, VlanKey, IFACE_FORWARD4, IFACE_FORWARD6, NH_GROUP, NH_GROUP_BUCKETS,
    NH_KERNEL, NH_ONLINK, NH_RESOLVED, NH_UNREACHABLE, NH_UNSUPPORTED, NH_VALID,
};
use linerate_fib::{Fib, Shape};
use linerate_testkit::frames;
use linerate_testkit::plane::{MAC_IN, MAC_OUT};
use std::net::{Ipv4Addr, Ipv6Addr};

use linerate_testkit::rng::Rng;

/// An index below `n`.
fn pick(rng: &mut Rng, n: usize) -> usize {
    rng.below(n as u64) as usize
}

const MAC_GEN: [u8; 6] = [2, 0, 0, 0, 0, 1];

fn v4(dst: &str, ttl: u8, proto: u8, payload: usize) -> Vec<u8> {
    let b = PacketBuilder::ethernet2(MAC_GEN, MAC_IN).ipv4(
        [198, 18, 0, 1],
        dst.parse::<Ipv4Addr>().unwrap().octets(),
        ttl,
    );
    let mut f = Vec::new();
    match proto {
        6 => b.tcp(2000, 80, 1, 1000).write(&mut f, &vec![7; payload]),
        1 => b.icmpv4_echo_request(1, 1).write(&mut f, &vec![7; payload]),
        _ => b.udp(2000, 53).write(&mut f, &vec![7; payload]),
    }
    .unwrap();
    f
}

fn v6(dst: &str, hops: u8, payload: usize) -> Vec<u8> {
    let mut f = Vec::new();
    PacketBuilder::ethernet2(MAC_GEN, MAC_IN)
        .ipv6(
            "2001:db8:ff::1".parse::<Ipv6Addr>().unwrap().octets(),
            dst.parse::<Ipv6Addr>().unwrap().octets(),
            hops,
        )
        .udp(2000, 53)
        .write(&mut f, &vec![7; payload])
        .unwrap();
    f
}

/// Frames of every kind the fast path tells apart.
fn seeds() -> Vec<Vec<u8>> {
    let mut s = vec![
        v4("198.19.1.2", 64, 17, 18),
        v4("198.19.1.2", 64, 6, 30),
        v4("198.19.1.2", 64, 1, 20),
        v4("198.19.1.2", 2, 17, 0),
        v4("198.19.1.2", 1, 17, 18),
        v4("198.20.0.1", 64, 17, 18),
        v4("198.21.0.1", 64, 17, 18),
        v4("198.22.0.1", 64, 17, 18),
        v4("198.23.0.1", 64, 17, 1000),
        v4("198.24.0.1", 64, 17, 18),
        v4("198.25.0.1", 64, 17, 18),
        v4("10.1.2.3", 64, 6, 18),
        v4("10.9.9.9", 64, 17, 18),
        v4("224.0.0.5", 1, 89, 18),
        v6("2001:db8:1::1", 64, 18),
        v6("2001:db8:1::1", 1, 18),
        v6("2001:db8:2::1", 64, 18),
        v6("ff02::1", 255, 18),
    ];
    let mut options = v4("198.19.1.2", 64, 17, 18);
    frames::add_ipv4_options(&mut options, &[1, 1, 1, 0]);
    let mut fragment = v4("198.19.1.2", 64, 17, 18);
    frames::edit_ipv4(&mut fragment, |h| {
        h.dont_fragment = false;
        h.more_fragments = true;
    });
    let mut hbh = v6("2001:db8:1::1", 64, 18);
    frames::add_ipv6_hop_by_hop(&mut hbh);
    let mut arp = v4("198.19.1.2", 64, 17, 18);
    frames::set_ethertype(&mut arp, 0x0806);
    let tagged = |mut f: Vec<u8>, tag: &[u8]| {
        f.splice(12..12, tag.iter().copied());
        f
    };
    let mut broadcast = v4("198.19.1.2", 64, 17, 18);
    broadcast[..6].copy_from_slice(&[0xff; 6]);
    s.extend([options, fragment, hbh, arp, broadcast]);
    // On VLAN devices 10 (802.1Q) and 20 (802.1ad) of if0; out of one
    // (198.26/16: tag 30 pushed, or 10's rewritten); a VLAN no device
    // holds, a priority tag, two tags.
    s.extend([
        tagged(v4("198.19.1.2", 64, 17, 18), &[0x81, 0x00, 0x00, 0x0a]),
        tagged(v4("198.26.1.2", 64, 6, 30), &[0x81, 0x00, 0x20, 0x0a]),
        tagged(v6("2001:db8:1::1", 64, 18), &[0x88, 0xa8, 0x00, 0x14]),
        tagged(v4("198.19.1.2", 1, 17, 18), &[0x88, 0xa8, 0x00, 0x14]),
        v4("198.26.1.2", 64, 17, 18),
        tagged(v4("198.19.1.2", 64, 17, 18), &[0x81, 0x00, 0x00, 0x0b]),
        tagged(v4("198.19.1.2", 64, 17, 18), &[0x81, 0x00, 0x60, 0x00]),
        tagged(
            v4("198.19.1.2", 64, 17, 18),
            &[0x88, 0xa8, 0x00, 0x14, 0x81, 0x00, 0x00, 0x0a],
        ),
    ]);
    s
}

/// Bytes a mutation writes: edges of the fields the program reads.
const EDGES: [u8; 10] = [0x00, 0x01, 0x05, 0x06, 0x11, 0x40, 0x45, 0x60, 0x86, 0xff];

/// One to three changes to a copy of `f`: a byte flipped or set to an edge
/// value (mostly in the headers), the frame cut, or lengthened.
fn mutate(f: &[u8], rng: &mut Rng) -> Vec<u8> {
    let mut g = f.to_vec();
    for _ in 0..1 + pick(rng, 3) {
        let at = if pick(rng, 4) == 0 {
            pick(rng, g.len())
        } else {
            pick(rng, g.len().min(64))
        };
        match pick(rng, 5) {
            0 => g[at] ^= 1 << pick(rng, 8),
            1 => g[at] = EDGES[pick(rng, EDGES.len())],
            2 => g[at] = rng.next_u64() as u8,
            // BPF_PROG_RUN takes frames of an Ethernet header at least.
            3 => g.truncate(14 + pick(rng, g.len() - 13)),
            _ => {
                let n = pick(rng, 40);
                g.extend((0..n).map(|_| rng.next_u64() as u8));
            }
        }
        if g.len() < 14 {
            g.resize(14, 0);
        }
    }
    g
}

/// The plane (the program beside the model with root): interfaces 0 and
/// 1 forwarding both families; routes to a resolved gateway (198.19/16,
/// 2001:db8:1::/48), an unresolved one (198.20/16), the router
/// (198.21/16), a connected network unresolved (198.22/16), a narrow MTU
/// (198.23/16), a route not carried (198.24/16), an unreachable one
/// (198.25/16), ECMP over two gateways (10/8).
fn plane() -> (
    Option<linerate_testkit::plane::ScratchPair>,
    linerate_testkit::plane::TestPlane,
    u32,
) {
    let (pair, mut p, if0, if1) = linerate_testkit::plane::test_plane("rnd", "rf");
    let nh = |flags, mtu, dmac: u8| Nexthop {
        ifindex: if1,
        mtu,
        flags,
        used: 0,
        dmac: [2, 0, 0, 0, 0, dmac],
        smac: MAC_OUT,
        l3: 0,
        tag: [0; 4],
    };
    let hops = [
        (1, nh(NH_VALID | NH_RESOLVED, 1500, 4)),
        (2, nh(NH_VALID, 1500, 0)),
        (3, nh(NH_VALID | NH_KERNEL, 0, 0)),
        (4, nh(NH_VALID | NH_KERNEL | NH_ONLINK, 0, 0)),
        (5, nh(NH_VALID | NH_RESOLVED, 576, 5)),
        (6, nh(NH_VALID | NH_KERNEL | NH_UNSUPPORTED, 0, 0)),
        (7, nh(NH_VALID | NH_KERNEL | NH_UNREACHABLE, 0, 0)),
        (8, nh(NH_VALID | NH_RESOLVED, 1500, 8)),
        (
            10,
            Nexthop {
                l3: 931,
                tag: [0x81, 0x00, 0x00, 0x1e],
                ..nh(NH_VALID | NH_RESOLVED, 1500, 10)
            },
        ),
    ];
    for (id, n) in hops {
        p.set_nexthop(id, &n).unwrap();
    }
    let mut group = NhGroup {
        bucket: [1; NH_GROUP_BUCKETS],
    };
    group.bucket[NH_GROUP_BUCKETS / 2..].fill(8);
    p.set_nh_group(0, &group).unwrap();
    // VLAN devices on if0 (ifindexes the kernel never gave: the fast path
    // only routes as them).
    for (tpid, vid, dev) in [(0x8100, 10, 910), (0x88a8, 20, 920)] {
        let sub = Iface::new(dev, MAC_IN, IFACE_FORWARD4 | IFACE_FORWARD6);
        p.set_vlan_interface(&VlanKey::new(if0, tpid, vid), Some(&sub))
            .unwrap();
    }
    p.set_nexthop(
        9,
        &Nexthop {
            ifindex: 0,
            flags: NH_VALID | NH_GROUP,
            ..Default::default()
        },
    )
    .unwrap();
    let mut f4: Fib<u32> = Fib::new(Shape::IPV4);
    for (net, len, id) in [
        ("198.19.0.0", 16, 1),
        ("198.20.0.0", 16, 2),
        ("198.21.0.0", 16, 3),
        ("198.22.0.0", 16, 4),
        ("198.23.0.0", 16, 5),
        ("198.24.0.0", 16, 6),
        ("198.25.0.0", 16, 7),
        ("10.0.0.0", 8, 9),
        ("198.26.0.0", 16, 10),
    ] {
        let w = f4
            .insert(u32::from(net.parse::<Ipv4Addr>().unwrap()), len, id)
            .unwrap();
        p.apply_fib(0, &f4, &w).unwrap();
    }
    let mut f6: Fib<u128> = Fib::new(p.ipv6_layout().shape());
    let w = f6
        .insert(
            u128::from("2001:db8:1::".parse::<Ipv6Addr>().unwrap()),
            48,
            1,
        )
        .unwrap();
    p.apply_fib(0, &f6, &w).unwrap();
    (pair, p, if0)
}

#[test]
fn a_million_random_frames_get_the_models_verdict() {
    let (_pair, p, if0) = plane();
    let seeds = seeds();
    let seed = 0x5eed_1e7a_7e00_0001;
    let mut rng = Rng(seed);
    for (i, s) in seeds.iter().enumerate() {
        // The seeds themselves first: each must be what it stands for.
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| p.run(s, if0)));
        assert!(r.is_ok(), "seed frame {i}: {s:02x?}");
    }
    let mut reasons = std::collections::BTreeMap::<&str, u64>::new();
    for n in 0..1_000_000u64 {
        let base = &seeds[pick(&mut rng, seeds.len())];
        let f = mutate(base, &mut rng);
        // Every other frame through the other single-buffer program than
        // the port's own (the one without VLAN devices: if0 has some),
        // which hands it over.
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            if n % 2 == 0 {
                p.run(&f, if0)
            } else {
                p.run_other_entry(&f, if0)
            }
        }));
        let Ok((_, reason, _)) = r else {
            panic!("frame {n} (seed {seed:#x}): {f:02x?}");
        };
        *reasons.entry(reason).or_default() += 1;
    }
    // The frames met every part of the program.
    for r in [
        "forwarded",
        "pass_not_ip",
        "pass_not_ours",
        "pass_special",
        "pass_ttl",
        "pass_options",
        "pass_fragment",
        "pass_bad_csum",
        "pass_ext_hdr",
        "pass_local",
        "pass_kernel_route",
        "pass_no_route",
        "pass_no_neigh",
        "pass_mtu",
        "pass_vlan",
        "drop_malformed",
    ] {
        assert!(
            reasons.get(r).is_some_and(|&n| n >= 100),
            "{r}: {reasons:?}"
        );
    }
}
