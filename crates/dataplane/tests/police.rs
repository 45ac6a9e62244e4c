//! The policer of what the fast path passes (bpf/include/router/police.h),
//! run with BPF_PROG_RUN: each kind of frame lands in the class the
//! documentation gives it (docs/policing.md), a class's burst goes through
//! and the frame after it is dropped and counted as policed, and no other
//! class's limit touches it. Needs root.
use etherparse::PacketBuilder;
use linerate_bpf::test_run::XdpAction;
use linerate_dataplane::fastpath::FastPath;
use linerate_dataplane::layout::{
    reason_index, Nexthop, NH_KERNEL, NH_ONLINK, NH_RESOLVED, NH_UNREACHABLE, NH_UNSUPPORTED,
    NH_VALID, PUNT_CLASSES,
};
use linerate_dataplane::police::Police;
use linerate_fib::{Fib, Shape};
use linerate_testkit::frames;
use linerate_testkit::plane::{MAC_IN, MAC_OUT};
use std::net::{Ipv4Addr, Ipv6Addr};

const MAC_GEN: [u8; 6] = [2, 0, 0, 0, 0, 1];

fn v4(s: &str) -> u32 {
    u32::from(s.parse::<Ipv4Addr>().unwrap())
}

/// An IPv4 frame to the router's MAC: `proto` (UDP's or TCP's ports
/// 2000 -> `dport`, else UDP's header under another protocol number).
fn ip4(dst_mac: [u8; 6], dst: &str, ttl: u8, proto: u8, dport: u16) -> Vec<u8> {
    let b = PacketBuilder::ethernet2(MAC_GEN, dst_mac).ipv4(
        [198, 18, 0, 1],
        dst.parse::<Ipv4Addr>().unwrap().octets(),
        ttl,
    );
    let mut f = Vec::new();
    if proto == 6 {
        b.tcp(2000, dport, 1, 1000).write(&mut f, &[0; 6]).unwrap();
    } else {
        b.udp(2000, dport).write(&mut f, &[0; 18]).unwrap();
    }
    if proto != 6 && proto != 17 {
        frames::edit_ipv4(&mut f, |h| h.protocol = etherparse::IpNumber(proto));
    }
    f
}

/// An IPv6 frame: UDP to `dport`, or with `icmp` the UDP header's first
/// byte an ICMPv6 type under next header 58.
fn ip6(dst: &str, icmp: Option<u8>) -> Vec<u8> {
    let mut f = Vec::new();
    PacketBuilder::ethernet2(MAC_GEN, MAC_IN)
        .ipv6(
            "2001:2::1".parse::<Ipv6Addr>().unwrap().octets(),
            dst.parse::<Ipv6Addr>().unwrap().octets(),
            255,
        )
        .udp(2000, 3000)
        .write(&mut f, &[0; 18])
        .unwrap();
    if let Some(t) = icmp {
        frames::edit_ipv6(&mut f, |h| h.next_header = etherparse::IpNumber(58));
        f[frames::ETH_LEN + 40] = t;
    }
    f
}

/// Every kind of frame the policer tells apart: what it is, the frame, the
/// reason it passes for and its class.
fn cases() -> Vec<(&'static str, Vec<u8>, &'static str, &'static str)> {
    let udp = |dst: &str, ttl, dport| ip4(MAC_IN, dst, ttl, 17, dport);
    let mut arp = udp("198.19.1.2", 64, 3000);
    frames::set_ethertype(&mut arp, 0x0806);
    let mut lldp = udp("198.19.1.2", 64, 3000);
    lldp[..6].copy_from_slice(&[0x01, 0x80, 0xc2, 0, 0, 0x0e]);
    frames::set_ethertype(&mut lldp, 0x88cc);
    let mut other_l2 = udp("198.19.1.2", 64, 3000);
    frames::set_ethertype(&mut other_l2, 0x9000);
    let mut options = udp("198.19.1.2", 64, 3000);
    frames::add_ipv4_options(&mut options, &[1, 1, 1, 0]);
    // IGMP's reports carry a router alert.
    let mut igmp = ip4(MAC_IN, "224.0.0.22", 1, 2, 0);
    frames::add_ipv4_options(&mut igmp, &[0x94, 4, 0, 0]);
    let mut fragment = udp("198.19.1.2", 64, 3000);
    frames::edit_ipv4(&mut fragment, |h| {
        h.dont_fragment = false;
        h.more_fragments = true;
    });
    // A later fragment's ports are payload: not read as BGP's.
    let mut later = ip4(MAC_IN, "198.21.0.1", 64, 6, 179);
    frames::edit_ipv4(&mut later, |h| {
        h.dont_fragment = false;
        h.fragment_offset = etherparse::IpFragOffset::try_new(8).unwrap();
    });
    let mut bad_csum = udp("198.19.1.2", 64, 3000);
    frames::spoil_ipv4_checksum(&mut bad_csum, 0xff);
    let mut mld = ip6("ff02::16", Some(143));
    frames::add_ipv6_hop_by_hop(&mut mld);
    let mut hbh = ip6("2001:2:0:8000::1", None);
    frames::add_ipv6_hop_by_hop(&mut hbh);
    vec![
        ("ARP", arp, "pass_not_ip", "neighbour"),
        ("LLDP", lldp, "pass_special", "control"),
        ("another EtherType", other_l2, "pass_not_ip", "local"),
        (
            "OSPF hello",
            ip4(MAC_IN, "224.0.0.5", 1, 89, 0),
            "pass_special",
            "control",
        ),
        (
            "UDP to a group",
            udp("239.1.1.1", 8, 3000),
            "pass_special",
            "local",
        ),
        (
            "UDP for the router",
            udp("198.21.0.1", 64, 3000),
            "pass_local",
            "local",
        ),
        (
            "BGP for the router",
            ip4(MAC_IN, "198.21.0.1", 64, 6, 179),
            "pass_local",
            "control",
        ),
        (
            "ssh for the router",
            ip4(MAC_IN, "198.21.0.1", 64, 6, 22),
            "pass_local",
            "local",
        ),
        (
            "ping for the router",
            ip4(MAC_IN, "198.21.0.1", 64, 1, 0),
            "pass_local",
            "icmp",
        ),
        (
            "eBGP with TTL 1",
            ip4(MAC_IN, "198.21.0.1", 1, 6, 179),
            "pass_ttl",
            "control",
        ),
        (
            "BFD with TTL 1",
            udp("198.21.0.1", 1, 3784),
            "pass_ttl",
            "control",
        ),
        (
            "transit with TTL 1",
            udp("198.19.1.2", 1, 3000),
            "pass_ttl",
            "errors",
        ),
        (
            "transit with TTL 0",
            udp("198.19.1.2", 0, 3000),
            "pass_ttl",
            "errors",
        ),
        ("IPv4 options", options, "pass_options", "slow"),
        ("IGMP with a router alert", igmp, "pass_options", "control"),
        ("a first fragment", fragment, "pass_fragment", "slow"),
        ("a later fragment", later, "pass_fragment", "slow"),
        ("a bad header checksum", bad_csum, "pass_bad_csum", "errors"),
        (
            "no route",
            udp("10.9.9.9", 64, 3000),
            "pass_no_route",
            "errors",
        ),
        (
            "an unresolved neighbour",
            udp("198.20.0.1", 64, 3000),
            "pass_no_neigh",
            "unresolved",
        ),
        (
            "to a connected host not resolved",
            udp("198.22.0.1", 64, 3000),
            "pass_no_neigh",
            "unresolved",
        ),
        (
            "through a route the kernel carries",
            udp("198.23.0.1", 64, 3000),
            "pass_kernel_route",
            "transit",
        ),
        (
            "to an unreachable route",
            udp("198.24.0.1", 64, 3000),
            "pass_no_route",
            "errors",
        ),
        (
            "for another MAC",
            ip4([2, 0, 0, 0, 0, 9], "198.19.1.2", 64, 17, 3000),
            "pass_not_ours",
            "transit",
        ),
        (
            "IPv6 neighbour solicitation",
            ip6("ff02::1:ff00:1", Some(135)),
            "pass_special",
            "neighbour",
        ),
        (
            "IPv6 router advertisement",
            ip6("ff02::1", Some(134)),
            "pass_special",
            "neighbour",
        ),
        (
            "IPv6 ping to a group",
            ip6("ff02::1", Some(128)),
            "pass_special",
            "icmp",
        ),
        ("MLD report", mld, "pass_ext_hdr", "control"),
        ("IPv6 hop-by-hop transit", hbh, "pass_ext_hdr", "slow"),
    ]
}

/// The program on a scratch pair, with routes: 198.19/16 resolved,
/// 198.20/16 unresolved, 198.21/16 the router's (local), 198.22/16 a
/// connected network, 198.23/16 a route the fast path does not carry,
/// 198.24/16 unreachable; IPv6 none.
fn router(tag: &str) -> (linerate_testkit::plane::ScratchPair, FastPath) {
    let (pair, fp) = linerate_testkit::plane::scratch_pair(tag, "pl");
    let nh = |flags| Nexthop {
        ifindex: pair.if1,
        mtu: 1500,
        flags,
        used: 0,
        dmac: [2, 0, 0, 0, 0, 4],
        smac: MAC_OUT,
        l3: 0,
        tag: [0; 4],
    };
    fp.set_nexthop(1, &nh(NH_VALID | NH_RESOLVED)).unwrap();
    fp.set_nexthop(2, &nh(NH_VALID)).unwrap();
    fp.set_nexthop(3, &nh(NH_VALID | NH_KERNEL)).unwrap();
    fp.set_nexthop(4, &nh(NH_VALID | NH_KERNEL | NH_ONLINK))
        .unwrap();
    fp.set_nexthop(5, &nh(NH_VALID | NH_KERNEL | NH_UNSUPPORTED))
        .unwrap();
    fp.set_nexthop(6, &nh(NH_VALID | NH_KERNEL | NH_UNREACHABLE))
        .unwrap();
    let mut f4: Fib<u32> = Fib::new(Shape::IPV4);
    for (net, id) in [
        ("198.19.0.0", 1),
        ("198.20.0.0", 2),
        ("198.21.0.0", 3),
        ("198.22.0.0", 4),
        ("198.23.0.0", 5),
        ("198.24.0.0", 6),
    ] {
        f4.insert(v4(net), 16, id).unwrap();
    }
    fp.load_fib(&f4).unwrap();
    (pair, fp)
}

/// Limits: `limited` classes at a frame a second (the least rate), bursts
/// of `burst`; each case's runs take well under a second.
fn policy(limited: &[usize], burst: u64) -> Police {
    let mut p = Police::off();
    for &c in limited {
        p.set(PUNT_CLASSES[c], &format!("1/{burst}")).unwrap();
    }
    p
}

#[test]
#[cfg_attr(
    not(feature = "privileged"),
    ignore = "needs root: --features privileged"
)]
fn each_frame_is_policed_by_its_class_alone() {
    let (pair, fp) = router("police");
    let every: Vec<usize> = (0..PUNT_CLASSES.len()).collect();
    // The per-CPU schedules are one CPU's throughout.
    linerate_host::cpu::on_this_cpu(|| {
        for (what, frame, reason, class) in cases() {
            let r = reason_index(reason).unwrap();
            let c = Police::class(class).unwrap();
            // Every other class limited, and spent: the frame passes.
            let others: Vec<usize> = every.iter().copied().filter(|&i| i != c).collect();
            fp.set_police(&policy(&others, 1))?;
            for _ in 0..3 {
                let before = fp.counters(pair.if0)?;
                let (action, out) = fp.run(&frame, pair.if0)?;
                let d = fp.counters(pair.if0)?.since(&before);
                assert_eq!(action, XdpAction::Pass, "{what}: passed");
                assert_eq!(out, frame, "{what}: untouched");
                assert_eq!(
                    (d.packets[r], d.policed(), d.packets.iter().sum::<u64>()),
                    (1, 0, 1),
                    "{what}: counted as {reason} alone, policed by no other class"
                );
            }
            // Its own class limited to a burst of two (a new policy's
            // schedules start afresh): two pass, the third is policed.
            fp.set_police(&policy(&[c], 2))?;
            let before = fp.counters(pair.if0)?;
            let actions: Vec<XdpAction> = (0..3)
                .map(|_| fp.run(&frame, pair.if0).map(|(a, _)| a))
                .collect::<anyhow::Result<_>>()?;
            let d = fp.counters(pair.if0)?.since(&before);
            assert_eq!(
                actions,
                [XdpAction::Pass, XdpAction::Pass, XdpAction::Drop],
                "{what}: class {class}'s burst, then policed"
            );
            assert_eq!(
                (d.packets[r], d.policed[r], d.policed()),
                (2, 1, 1),
                "{what}: two passed as {reason}, one policed as {reason}"
            );
            // Spent for a second: turned off, the class passes again.
            fp.set_police(&Police::off())?;
            assert_eq!(fp.run(&frame, pair.if0)?.0, XdpAction::Pass, "{what}");
        }
        Ok(())
    })
    .unwrap();
}

#[test]
#[cfg_attr(
    not(feature = "privileged"),
    ignore = "needs root: --features privileged"
)]
fn forwarded_frames_are_never_policed() {
    let (pair, fp) = router("unpoliced");
    let every: Vec<usize> = (0..PUNT_CLASSES.len()).collect();
    fp.set_police(&policy(&every, 1)).unwrap();
    let frame = ip4(MAC_IN, "198.19.1.2", 64, 17, 3000);
    for _ in 0..100 {
        assert_eq!(fp.run(&frame, pair.if0).unwrap().0, XdpAction::Redirect);
    }
    let c = fp.counters(pair.if0).unwrap();
    assert_eq!((c.packets_of("forwarded"), c.policed()), (100, 0));
}
