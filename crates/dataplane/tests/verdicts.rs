//! Every verdict of the fast path, one frame each, run with BPF_PROG_RUN as
//! if it arrived on a veth of a scratch namespace. Passed frames must be
//! untouched, forwarded ones decoded by etherparse as an independent check
//! (TTL - 1 and a valid header checksum, the next hop's MACs, the rest as
//! sent), and exactly the expected counter must move. Needs root.
use etherparse::{NetSlice, PacketBuilder, SlicedPacket};
use linerate_dataplane::fastpath::FastPath;
use linerate_dataplane::layout::{Nexthop, NH_KERNEL, NH_RESOLVED, NH_VALID, REASONS};
use linerate_fib::{Fib, Shape};
use std::net::{Ipv4Addr, Ipv6Addr};

use linerate_testkit::frames;
use linerate_testkit::plane::{MAC_IN, MAC_OUT};

const MAC_GEN: [u8; 6] = [2, 0, 0, 0, 0, 1];
const MAC_RECV: [u8; 6] = [2, 0, 0, 0, 0, 4];

use linerate_bpf::test_run::XdpAction;

fn v4(s: &str) -> u32 {
    u32::from(s.parse::<Ipv4Addr>().unwrap())
}

fn v6(s: &str) -> u128 {
    u128::from(s.parse::<Ipv6Addr>().unwrap())
}

fn udp4(dst_mac: [u8; 6], src: &str, dst: &str, ttl: u8, payload: usize) -> Vec<u8> {
    let b = PacketBuilder::ethernet2(MAC_GEN, dst_mac)
        .ipv4(
            src.parse::<Ipv4Addr>().unwrap().octets(),
            dst.parse::<Ipv4Addr>().unwrap().octets(),
            ttl,
        )
        .udp(2000, 3000);
    let mut f = Vec::new();
    b.write(&mut f, &vec![0x5a; payload]).unwrap();
    f
}

fn udp6(src: &str, dst: &str, hops: u8, payload: usize) -> Vec<u8> {
    let b = PacketBuilder::ethernet2(MAC_GEN, MAC_IN)
        .ipv6(
            src.parse::<Ipv6Addr>().unwrap().octets(),
            dst.parse::<Ipv6Addr>().unwrap().octets(),
            hops,
        )
        .udp(2000, 3000);
    let mut f = Vec::new();
    b.write(&mut f, &vec![0x5a; payload]).unwrap();
    f
}

/// The router program on a scratch veth pair (fp0 in, fp1 out), with next
/// hops 1-6 and routes to each (see `new`). `fp` drops before `_pair`.
struct Router {
    fp: FastPath,
    fp0: u32,
    fp1: u32,
    _pair: linerate_testkit::plane::ScratchPair,
}

impl Router {
    fn new(tag: &str) -> Router {
        let (pair, fp) = linerate_testkit::plane::scratch_pair(tag, "fp");
        let (fp0, fp1) = (pair.if0, pair.if1);
        let nh = |ifindex, mtu, flags| Nexthop {
            ifindex,
            mtu,
            flags,
            used: 0,
            dmac: MAC_RECV,
            smac: MAC_OUT,
            l3: 0,
            tag: [0; 4],
        };
        fp.set_nexthop(1, &nh(fp1, 1500, NH_VALID | NH_RESOLVED))
            .unwrap();
        fp.set_nexthop(2, &nh(fp1, 1500, NH_VALID)).unwrap();
        fp.set_nexthop(3, &nh(0, 0, NH_VALID | NH_KERNEL)).unwrap();
        fp.set_nexthop(4, &nh(fp0, 1500, NH_VALID | NH_RESOLVED))
            .unwrap();
        fp.set_nexthop(5, &nh(fp1, 576, NH_VALID | NH_RESOLVED))
            .unwrap();
        fp.set_nexthop(6, &nh(999, 1500, NH_VALID | NH_RESOLVED))
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
        f4.insert(v4("198.19.7.128"), 25, 7).unwrap(); // next hop 7: never set (invalid)
        fp.load_fib(&f4).unwrap();
        let mut f6: Fib<u128> = Fib::new(Shape::IPV6);
        f6.insert(v6("2001:2:0:8000::"), 49, 1).unwrap();
        f6.insert(v6("2001:db8::"), 32, 2).unwrap();
        fp.load_fib(&f6).unwrap();

        Router {
            fp,
            fp0,
            fp1,
            _pair: pair,
        }
    }
}

#[test]
#[cfg_attr(
    not(feature = "privileged"),
    ignore = "needs root: --features privileged"
)]
fn every_verdict() {
    let r = Router::new("fp");
    let (fp, fp0, fp1) = (&r.fp, r.fp0, r.fp1);
    let fwd4 = udp4(MAC_IN, "198.18.0.1", "198.19.1.2", 64, 18);
    let mut options = fwd4.clone();
    frames::add_ipv4_options(&mut options, &[1, 1, 1, 0]); // NOP NOP NOP EOL
    let mut bad_csum = fwd4.clone();
    frames::spoil_ipv4_checksum(&mut bad_csum, 0xff);
    let mut fragment = fwd4.clone();
    frames::edit_ipv4(&mut fragment, |h| {
        h.dont_fragment = false;
        h.more_fragments = true;
    });
    let mut arp = fwd4.clone();
    frames::set_ethertype(&mut arp, 0x0806);
    let mut too_long = fwd4.clone();
    frames::edit_ipv4(&mut too_long, |h| h.total_len = 200);
    let mut hbh = udp6("2001:2::1", "2001:2:0:8000::1", 64, 18);
    // The next header says hop-by-hop (none follows: the kernel's to read).
    frames::edit_ipv6(&mut hbh, |h| {
        h.next_header = etherparse::IpNumber::IPV6_HEADER_HOP_BY_HOP
    });
    let mut v6_short = udp6("2001:2::1", "2001:2:0:8000::1", 64, 18);
    v6_short.truncate(70);

    let cases: Vec<(&str, Vec<u8>, XdpAction, &str)> = vec![
        (
            "IPv4 transit",
            fwd4.clone(),
            XdpAction::Redirect,
            "forwarded",
        ),
        (
            "IPv4 padded to 60 bytes",
            udp4(MAC_IN, "198.18.0.1", "198.19.1.2", 64, 0),
            XdpAction::Redirect,
            "forwarded",
        ),
        (
            "TTL 2",
            udp4(MAC_IN, "198.18.0.1", "198.19.1.2", 2, 18),
            XdpAction::Redirect,
            "forwarded",
        ),
        (
            "TTL 1",
            udp4(MAC_IN, "198.18.0.1", "198.19.1.2", 1, 18),
            XdpAction::Pass,
            "pass_ttl",
        ),
        (
            "TTL 0",
            udp4(MAC_IN, "198.18.0.1", "198.19.1.2", 0, 18),
            XdpAction::Pass,
            "pass_ttl",
        ),
        ("IPv4 options", options, XdpAction::Pass, "pass_options"),
        (
            "bad header checksum",
            bad_csum,
            XdpAction::Pass,
            "pass_bad_csum",
        ),
        ("fragment", fragment, XdpAction::Pass, "pass_fragment"),
        ("ARP", arp, XdpAction::Pass, "pass_not_ip"),
        (
            "to another MAC",
            udp4(MAC_RECV, "198.18.0.1", "198.19.1.2", 64, 18),
            XdpAction::Pass,
            "pass_not_ours",
        ),
        (
            "broadcast MAC",
            udp4([0xff; 6], "198.18.0.1", "198.19.1.2", 64, 18),
            XdpAction::Pass,
            "pass_special",
        ),
        (
            "multicast destination",
            udp4(MAC_IN, "198.18.0.1", "224.0.0.5", 64, 18),
            XdpAction::Pass,
            "pass_special",
        ),
        (
            "loopback source",
            udp4(MAC_IN, "127.0.0.1", "198.19.1.2", 64, 18),
            XdpAction::Pass,
            "pass_special",
        ),
        (
            "no route",
            udp4(MAC_IN, "198.18.0.1", "10.1.1.1", 64, 18),
            XdpAction::Pass,
            "pass_no_route",
        ),
        (
            "invalid next hop",
            udp4(MAC_IN, "198.18.0.1", "198.19.7.200", 64, 18),
            XdpAction::Pass,
            "pass_no_route",
        ),
        (
            "unresolved neighbour",
            udp4(MAC_IN, "198.18.0.1", "198.20.1.1", 64, 18),
            XdpAction::Pass,
            "pass_no_neigh",
        ),
        (
            "kernel route",
            udp4(MAC_IN, "198.18.0.1", "198.21.1.1", 64, 18),
            XdpAction::Pass,
            "pass_local",
        ),
        (
            "back out the same interface",
            udp4(MAC_IN, "198.18.0.1", "198.22.1.1", 64, 18),
            XdpAction::Pass,
            "pass_same_if",
        ),
        (
            "over the egress MTU",
            udp4(MAC_IN, "198.18.0.1", "198.23.1.1", 64, 600),
            XdpAction::Pass,
            "pass_mtu",
        ),
        (
            "at the egress MTU",
            udp4(MAC_IN, "198.18.0.1", "198.23.1.1", 64, 576 - 28),
            XdpAction::Redirect,
            "forwarded",
        ),
        (
            "egress not attached",
            udp4(MAC_IN, "198.18.0.1", "198.24.1.1", 64, 18),
            XdpAction::Pass,
            "pass_no_port",
        ),
        (
            "IPv4 header cut short",
            fwd4[..24].to_vec(),
            XdpAction::Drop,
            "drop_malformed",
        ),
        (
            "IPv4 longer than the frame",
            too_long,
            XdpAction::Drop,
            "drop_malformed",
        ),
        // (Shorter than an Ethernet header no device delivers, and
        // BPF_PROG_RUN refuses.)
        (
            "only an Ethernet header",
            fwd4[..14].to_vec(),
            XdpAction::Drop,
            "drop_malformed",
        ),
        (
            "IPv6 transit",
            udp6("2001:2::1", "2001:2:0:8000::1", 64, 18),
            XdpAction::Redirect,
            "forwarded",
        ),
        (
            "hop limit 1",
            udp6("2001:2::1", "2001:2:0:8000::1", 1, 18),
            XdpAction::Pass,
            "pass_ttl",
        ),
        ("hop-by-hop options", hbh, XdpAction::Pass, "pass_ext_hdr"),
        (
            "link-local destination",
            udp6("2001:2::1", "fe80::1", 64, 18),
            XdpAction::Pass,
            "pass_special",
        ),
        (
            "multicast IPv6",
            udp6("2001:2::1", "ff02::1", 64, 18),
            XdpAction::Pass,
            "pass_special",
        ),
        (
            "IPv6 unrouted",
            udp6("2001:2::1", "2001:3::1", 64, 18),
            XdpAction::Pass,
            "pass_no_route",
        ),
        (
            "IPv6 unresolved",
            udp6("2001:2::1", "2001:db8::1", 64, 18),
            XdpAction::Pass,
            "pass_no_neigh",
        ),
        (
            "IPv6 payload cut short",
            v6_short,
            XdpAction::Drop,
            "drop_malformed",
        ),
    ];
    for (what, frame, want, reason) in cases {
        let before = fp.counters(fp0).unwrap();
        let (verdict, out) = fp
            .run(&frame, fp0)
            .unwrap_or_else(|e| panic!("{what}: {e}"));
        let after = fp.counters(fp0).unwrap();
        assert_eq!(verdict, want, "{what}: verdict");
        let moved: Vec<&str> = (0..REASONS.len())
            .filter(|&i| after.packets[i] != before.packets[i])
            .map(|i| REASONS[i])
            .collect();
        assert_eq!(moved, [reason], "{what}: counters");
        assert_eq!(
            after.bytes_of(reason) - before.bytes_of(reason),
            frame.len() as u64,
            "{what}: bytes"
        );
        if want == XdpAction::Pass {
            assert_eq!(out, frame, "{what}: a passed frame is untouched");
        }
        if want == XdpAction::Redirect {
            assert_eq!(out.len(), frame.len(), "{what}");
            assert_eq!(
                (&out[0..6], &out[6..12]),
                (&MAC_RECV[..], &MAC_OUT[..]),
                "{what}: MACs"
            );
            let p = SlicedPacket::from_ethernet(&out).expect("decodes");
            match p.net.unwrap() {
                NetSlice::Ipv4(ip4) => {
                    let h = ip4.header().to_header();
                    assert_eq!(
                        h.header_checksum,
                        h.calc_header_checksum(),
                        "{what}: checksum"
                    );
                    assert_eq!(h.time_to_live + 1, frame[22], "{what}: TTL - 1");
                    // Only TTL and checksum changed in the IP packet.
                    let mut expect = frame[12..].to_vec();
                    expect[22 - 12] -= 1;
                    expect[24 - 12..26 - 12].copy_from_slice(&out[24..26]);
                    assert_eq!(&out[12..], &expect[..], "{what}: the rest as sent");
                }
                NetSlice::Ipv6(ip6) => {
                    assert_eq!(
                        ip6.header().hop_limit() + 1,
                        frame[21],
                        "{what}: hop limit - 1"
                    );
                    let mut expect = frame[12..].to_vec();
                    expect[21 - 12] -= 1;
                    assert_eq!(&out[12..], &expect[..], "{what}: the rest as sent");
                }
                NetSlice::Arp(_) => unreachable!(),
            }
        }
    }
    // A frame on an interface that is not (or no longer) the router's.
    fp.remove_interface(fp1).unwrap();
    let (verdict, out) = fp.run(&fwd4, fp1).unwrap();
    assert_eq!((verdict, out), (XdpAction::Pass, fwd4.clone()));
    assert_eq!(fp.counters(fp1).unwrap().packets_of("pass_not_ours"), 1);
    // ... and the egress that is gone is no longer used.
    let (verdict, _) = fp.run(&fwd4, fp0).unwrap();
    assert_eq!(verdict, XdpAction::Pass);
}

/// The fast path's IPv4 header checksum check against etherparse's, over
/// random headers (addresses, TTL, TOS, ID, DF, length): a valid header is
/// forwarded, with TTL - 1 and a checksum etherparse accepts; any one bit
/// flipped in the TOS, ID or checksum makes the frame the kernel's
/// (pass_bad_csum), untouched.
#[test]
#[cfg_attr(
    not(feature = "privileged"),
    ignore = "needs root: --features privileged"
)]
fn ipv4_header_checksums_are_checked_on_random_headers() {
    let r = Router::new("csum");
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    let mut random = move || {
        // xorshift64: reproducible, and enough to spread the headers.
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    let before = r.fp.counters(r.fp0).unwrap();
    const HEADERS: u64 = 2000;
    for i in 0..HEADERS {
        let x = random();
        let src = Ipv4Addr::from(0xc612_0000 | (x as u32 & 0xffff)); // 198.18/16
                                                                     // 198.19.0-6.x: routed to next hop 1 (198.19.7.128/25 is not).
        let dst = format!("198.19.{}.{}", (x >> 16) % 7, (x >> 24) & 0xff);
        let ttl = 2 + ((x >> 32) % 254) as u8;
        let mut f = udp4(
            MAC_IN,
            &src.to_string(),
            &dst,
            ttl,
            ((x >> 40) % 64) as usize,
        );
        let tos = (x >> 48) as u8;
        frames::edit_ipv4(&mut f, |h| {
            h.dscp = etherparse::IpDscp::try_new(tos >> 2).unwrap();
            h.ecn = etherparse::IpEcn::try_new(tos & 3).unwrap();
            h.identification = (x >> 56) as u16 * 257;
            h.dont_fragment = x & (1 << 47) != 0;
        });
        let (verdict, out) = r.fp.run(&f, r.fp0).unwrap();
        assert_eq!(
            verdict,
            XdpAction::Redirect,
            "header {i} {:02x?}",
            &f[14..34]
        );
        let h = etherparse::Ipv4Header::from_slice(&out[14..]).unwrap().0;
        assert_eq!(h.header_checksum, h.calc_header_checksum(), "header {i}");
        assert_eq!(h.time_to_live + 1, ttl, "header {i}");

        let y = random();
        let byte = [15, 18, 19, 24, 25][(y % 5) as usize];
        let mut bad = f.clone();
        bad[byte] ^= 1 << ((y >> 8) % 8);
        let (verdict, out) = r.fp.run(&bad, r.fp0).unwrap();
        assert_eq!(
            (verdict, &out),
            (XdpAction::Pass, &bad),
            "header {i} with byte {byte} changed: {:02x?}",
            &bad[14..34]
        );
    }
    let after = r.fp.counters(r.fp0).unwrap();
    for name in ["forwarded", "pass_bad_csum"] {
        assert_eq!(
            after.packets_of(name) - before.packets_of(name),
            HEADERS,
            "{name}"
        );
    }
}

/// What a frame carries after its IP packet (Ethernet padding, a sender's
/// trailer, a length field that says less than the frame) is cut before
/// the frame is forwarded, as the kernel cuts it (ip_rcv_core's and
/// ipv6_rcv's pskb_trim_rcsum): the frame that leaves is the Ethernet
/// header and the IP packet, TTL - 1, nothing more. The counters count the
/// frame as it came. Frames the size of a jumbo MTU arrive in several
/// buffers (multi-buffer XDP): they are forwarded whole where the egress
/// sends such frames, and pass untouched where it does not.
#[test]
#[cfg_attr(
    not(feature = "privileged"),
    ignore = "needs root: --features privileged"
)]
fn what_follows_the_ip_packet_is_cut() {
    use linerate_dataplane::layout::{IFACE_FORWARD4, IFACE_FORWARD6, IFACE_XMIT_SG};
    let r = Router::new("trail");
    let (fp, fp0, fp1) = (&r.fp, r.fp0, r.fp1);
    // Next hop 8: MTU 9000 out of fp1, for 198.25/16 and 2001:2:1::/48.
    fp.set_nexthop(
        8,
        &Nexthop {
            ifindex: fp1,
            mtu: 9000,
            flags: NH_VALID | NH_RESOLVED,
            used: 0,
            dmac: MAC_RECV,
            smac: MAC_OUT,
            l3: 0,
            tag: [0; 4],
        },
    )
    .unwrap();
    let mut f4: Fib<u32> = Fib::new(Shape::IPV4);
    for (net, id) in [("198.19.0.0", 1), ("198.23.0.0", 5), ("198.25.0.0", 8)] {
        f4.insert(v4(net), 16, id).unwrap();
    }
    fp.load_fib(&f4).unwrap();
    let mut f6: Fib<u128> = Fib::new(Shape::IPV6);
    f6.insert(v6("2001:2:0:8000::"), 49, 1).unwrap();
    f6.insert(v6("2001:2:1::"), 48, 8).unwrap();
    fp.load_fib(&f6).unwrap();
    let both = IFACE_FORWARD4 | IFACE_FORWARD6;

    // The frame the kernel would send: the IP packet alone, TTL - 1 (and
    // the IPv4 checksum patched), the next hop's MACs.
    let expected = |frame: &[u8], ip_len: usize| -> Vec<u8> {
        let mut e = frame[..14 + ip_len].to_vec();
        e[0..6].copy_from_slice(&MAC_RECV);
        e[6..12].copy_from_slice(&MAC_OUT);
        if e[12..14] == [8, 0] {
            frames::edit_ipv4(&mut e, |h| h.time_to_live -= 1);
        } else {
            frames::edit_ipv6(&mut e, |h| h.hop_limit -= 1);
        }
        e
    };
    let with = |mut f: Vec<u8>, trailer: &[u8]| {
        f.extend_from_slice(trailer);
        f
    };
    let fwd_bytes = |fp: &FastPath| fp.counters(fp0).unwrap().bytes_of("forwarded");
    let counted = |fp: &FastPath, reason: &str| fp.counters(fp0).unwrap().packets_of(reason);

    let ack = udp4(MAC_IN, "198.18.0.1", "198.19.1.2", 64, 12); // a 40-byte packet
    let mut pseudo_random = (0..1300u32).map(|i| (i * 151 + 7) as u8);
    let noise: Vec<u8> = pseudo_random.by_ref().collect();
    let v6 = udp6("2001:2::1", "2001:2:0:8000::1", 64, 18);
    let mut v6_empty = udp6("2001:2::1", "2001:2:0:8000::1", 64, 88);
    frames::edit_ipv6(&mut v6_empty, |h| h.payload_length = 0); // next header UDP
    let mut short_len4 = udp4(MAC_IN, "198.18.0.1", "198.19.1.2", 64, 200);
    frames::edit_ipv4(&mut short_len4, |h| h.total_len = 100); // says 100 of 228 bytes
    let mut short_len6 = udp6("2001:2::1", "2001:2:0:8000::1", 64, 200);
    frames::edit_ipv6(&mut short_len6, |h| h.payload_length = 30);
    let cases: Vec<(&str, Vec<u8>, usize)> = vec![
        ("zero padding to 60 bytes", with(ack.clone(), &[0; 6]), 40),
        ("non-zero padding", with(ack.clone(), &noise[..6]), 40),
        ("a 1-byte trailer", with(ack.clone(), &noise[..1]), 40),
        ("a 100-byte trailer", with(ack.clone(), &noise[..100]), 40),
        ("a 1244-byte trailer", with(ack.clone(), &noise[..1244]), 40),
        ("an IPv4 length shorter than the packet", short_len4, 100),
        ("IPv6 with a trailer", with(v6.clone(), &noise[..33]), 66),
        ("an IPv6 payload length shorter", short_len6, 70),
        ("IPv6 payload length 0, next header UDP", v6_empty, 40),
        // 576 IP bytes at next hop 5's MTU, and a trailer that takes the
        // frame past MTU + 18.
        (
            "at the MTU with a trailer",
            with(
                udp4(MAC_IN, "198.18.0.1", "198.23.1.1", 64, 548),
                &noise[..120],
            ),
            576,
        ),
    ];
    // Both programs: the single-buffer one and its multi-buffer twin (for
    // interfaces above Ethernet's MTU) cut the same.
    type Run = fn(&FastPath, &[u8], u32) -> anyhow::Result<(XdpAction, Vec<u8>)>;
    let programs: [(&str, Run); 2] = [
        ("single-buffer", FastPath::run),
        ("multi-buffer", FastPath::run_multibuf),
    ];
    for (program, run) in programs {
        for (what, frame, ip_len) in &cases {
            let what = format!("{what}, {program}");
            let before = fwd_bytes(fp);
            let (verdict, out) = run(fp, frame, fp0).unwrap();
            assert_eq!(verdict, XdpAction::Redirect, "{what}");
            same_frame(&out, &expected(frame, *ip_len), &what);
            assert_eq!(
                fwd_bytes(fp) - before,
                frame.len() as u64,
                "{what}: bytes counted"
            );
        }
        // Over the MTU by its IP length: the kernel's (fragmentation or
        // ICMP), untouched, trailer and all.
        let over = with(
            udp4(MAC_IN, "198.18.0.1", "198.23.1.1", 64, 549),
            &noise[..20],
        );
        assert_eq!(
            run(fp, &over, fp0).unwrap(),
            (XdpAction::Pass, over.clone()),
            "{program}"
        );
    }

    // Jumbo frames: more than a page, so BPF_PROG_RUN hands them over in
    // several buffers, as a veth or a NIC does.
    let jumbo4 = udp4(MAC_IN, "198.18.0.1", "198.25.1.1", 64, 9000 - 28);
    let jumbo6 = {
        let mut f = Vec::new();
        PacketBuilder::ethernet2(MAC_GEN, MAC_IN)
            .ipv6(
                "2001:2::1".parse::<Ipv6Addr>().unwrap().octets(),
                "2001:2:1::9".parse::<Ipv6Addr>().unwrap().octets(),
                64,
            )
            .udp(2000, 3000)
            .write(&mut f, &vec![0x6b; 9000 - 48])
            .unwrap();
        f
    };
    let trailer_in_later_buffers = with(
        udp4(MAC_IN, "198.18.0.1", "198.25.1.1", 64, 1000 - 28),
        &vec![0xee; 7000],
    );
    let jumbo_with_trailer = with(jumbo4.clone(), &noise[..100]);
    // The egress sends single buffers only: multi-buffer frames pass,
    // untouched; one whose IP packet fits the first buffer goes, cut.
    let passed_before = counted(fp, "pass_multibuf");
    for (what, f) in [
        ("IPv4 9000", &jumbo4),
        ("IPv6 9000", &jumbo6),
        ("IPv4 9000 with a trailer", &jumbo_with_trailer),
    ] {
        let (verdict, out) = fp.run(f, fp0).unwrap();
        assert_eq!(
            verdict,
            XdpAction::Pass,
            "{what}, to an egress without multi-buffer XDP"
        );
        same_frame(&out, f, what);
    }
    assert_eq!(counted(fp, "pass_multibuf") - passed_before, 3);
    let (verdict, out) = fp.run(&trailer_in_later_buffers, fp0).unwrap();
    assert_eq!(
        verdict,
        XdpAction::Redirect,
        "a trailer alone in later buffers"
    );
    same_frame(
        &out,
        &expected(&trailer_in_later_buffers, 1000),
        "a trailer alone in later buffers",
    );
    // The egress sends multi-buffer frames: forwarded whole, and cut.
    fp.set_interface(fp1, MAC_OUT, both | IFACE_XMIT_SG, true)
        .unwrap();
    for (what, f, ip_len) in [
        ("IPv4 9000", &jumbo4, 9000),
        ("IPv6 9000", &jumbo6, 9000),
        ("IPv4 9000 with a trailer", &jumbo_with_trailer, 9000),
    ] {
        let before = fwd_bytes(fp);
        let (verdict, out) = fp.run(f, fp0).unwrap();
        assert_eq!(verdict, XdpAction::Redirect, "{what}");
        same_frame(&out, &expected(f, ip_len), what);
        assert_eq!(
            fwd_bytes(fp) - before,
            f.len() as u64,
            "{what}: bytes counted"
        );
    }
    // Longer than the egress MTU (9000) by its IP length: the kernel's.
    let over = udp4(MAC_IN, "198.18.0.1", "198.25.1.1", 64, 9001 - 28);
    let (verdict, out) = fp.run(&over, fp0).unwrap();
    assert_eq!(verdict, XdpAction::Pass, "over a 9000-byte MTU");
    same_frame(&out, &over, "over a 9000-byte MTU");
    // A frame shorter than its IP length claims, over several buffers:
    // malformed, dropped, as the kernel drops it.
    let mut lying = jumbo4.clone();
    lying.truncate(8000);
    assert_eq!(fp.run(&lying, fp0).unwrap().0, XdpAction::Drop);
    // An egress whose driver takes no redirected frames at all (a veth
    // whose peer has no NAPI) is no egress: the kernel forwards.
    fp.set_interface(fp1, MAC_OUT, both, false).unwrap();
    let no_port = counted(fp, "pass_no_port");
    assert_eq!(fp.run(&ack, fp0).unwrap(), (XdpAction::Pass, ack.clone()));
    assert_eq!(counted(fp, "pass_no_port") - no_port, 1);
}

/// `got` is `want`, byte for byte; says where they part (frames of
/// thousands of bytes are not printed whole).
fn same_frame(got: &[u8], want: &[u8], what: &str) {
    if got != want {
        let at = got.iter().zip(want).position(|(a, b)| a != b);
        panic!(
            "{what}: {} bytes sent where {} were expected; first difference at {at:?}: {:02x?} against {:02x?}",
            got.len(),
            want.len(),
            &got[at.unwrap_or(0)..got.len().min(at.unwrap_or(0) + 16)],
            &want[at.unwrap_or(0)..want.len().min(at.unwrap_or(0) + 16)],
        );
    }
}

/// Tagged frames, by hand: routed as the VLAN device their port and tag
/// name, the tag popped, or pushed and rewritten on the way out of one; a
/// frame for the kernel leaves as it came, tag and all; a tag without a
/// device, a priority tag and a second tag are the kernel's. The frames
/// the kernel would send are built here from the untagged ones (TTL - 1,
/// the next hop's MACs, the egress device's tag: priority 0).
#[test]
#[cfg_attr(
    not(feature = "privileged"),
    ignore = "needs root: --features privileged"
)]
fn tagged_frames_are_routed_as_their_vlan_device() {
    use linerate_dataplane::layout::{Iface, VlanKey, IFACE_FORWARD4, IFACE_FORWARD6};
    let mut r = Router::new("vlan");
    // VLAN 10 (802.1Q) on fp0, routed as device 900; next hop 9 out of
    // VLAN 30 on fp1 (device 901), for 198.26/16.
    let sub = Iface::new(900, MAC_IN, IFACE_FORWARD4 | IFACE_FORWARD6);
    let dev10 = VlanKey::new(r.fp0, 0x8100, 10);
    r.fp.set_vlan_interface(&dev10, Some(&sub)).unwrap();
    let (fp, fp0, fp1) = (&r.fp, r.fp0, r.fp1);
    let out = VlanKey::new(fp1, 0x8100, 30);
    fp.set_nexthop(
        9,
        &Nexthop {
            ifindex: fp1,
            mtu: 1500,
            flags: NH_VALID | NH_RESOLVED,
            used: 0,
            dmac: MAC_RECV,
            smac: MAC_OUT,
            l3: 901,
            tag: out.tag(),
        },
    )
    .unwrap();
    let mut f4: Fib<u32> = Fib::new(Shape::IPV4);
    f4.insert(v4("198.19.0.0"), 16, 1).unwrap();
    f4.insert(v4("198.26.0.0"), 16, 9).unwrap();
    fp.load_fib(&f4).unwrap();

    let tagged = |f: &[u8], tag: &[u8]| {
        let mut t = f.to_vec();
        t.splice(12..12, tag.iter().copied());
        t
    };
    let sent = |f: &[u8], tag: Option<[u8; 4]>| {
        let mut e = f.to_vec();
        e[0..6].copy_from_slice(&MAC_RECV);
        e[6..12].copy_from_slice(&MAC_OUT);
        frames::edit_ipv4(&mut e, |h| h.time_to_live -= 1);
        if let Some(t) = tag {
            e.splice(12..12, t);
        }
        e
    };
    let to19 = udp4(MAC_IN, "198.18.0.1", "198.19.1.2", 64, 18);
    let to26 = udp4(MAC_IN, "198.18.0.1", "198.26.1.2", 64, 18);
    let ttl1 = udp4(MAC_IN, "198.18.0.1", "198.19.1.2", 1, 18);
    let q10 = [0x81, 0x00, 0x00, 0x0a];
    // Priority 5 and DEI set: the device takes it all the same.
    let q10_prio = [0x81, 0x00, 0xb0, 0x0a];
    // (what, frame, action, frame out, reason, tag bytes not counted)
    type Case<'a> = (&'a str, Vec<u8>, XdpAction, Vec<u8>, &'a str, u64);
    let cases: Vec<Case> = vec![
        (
            "VLAN 10 to an untagged next hop",
            tagged(&to19, &q10),
            XdpAction::Redirect,
            sent(&to19, None),
            "forwarded",
            4,
        ),
        (
            "VLAN 10 with a priority to VLAN 30",
            tagged(&to26, &q10_prio),
            XdpAction::Redirect,
            sent(&to26, Some(out.tag())),
            "forwarded",
            4,
        ),
        (
            "untagged to VLAN 30",
            to26.clone(),
            XdpAction::Redirect,
            sent(&to26, Some(out.tag())),
            "forwarded",
            0,
        ),
        (
            "VLAN 10, TTL 1",
            tagged(&ttl1, &q10),
            XdpAction::Pass,
            tagged(&ttl1, &q10),
            "pass_ttl",
            4,
        ),
        (
            "VLAN 11: no device",
            tagged(&to19, &[0x81, 0, 0, 11]),
            XdpAction::Pass,
            tagged(&to19, &[0x81, 0, 0, 11]),
            "pass_vlan",
            0,
        ),
        (
            "802.1ad 10: no device",
            tagged(&to19, &[0x88, 0xa8, 0, 10]),
            XdpAction::Pass,
            tagged(&to19, &[0x88, 0xa8, 0, 10]),
            "pass_vlan",
            0,
        ),
        (
            "a priority tag",
            tagged(&to19, &[0x81, 0, 0x60, 0]),
            XdpAction::Pass,
            tagged(&to19, &[0x81, 0, 0x60, 0]),
            "pass_vlan",
            0,
        ),
        (
            "two tags",
            tagged(&to19, &[0x81, 0, 0, 10, 0x81, 0, 0, 10]),
            XdpAction::Pass,
            tagged(&to19, &[0x81, 0, 0, 10, 0x81, 0, 0, 10]),
            "pass_vlan",
            0,
        ),
    ];
    for (what, frame, action, want, reason, untagged) in cases {
        let before = fp.counters(fp0).unwrap();
        let (got_action, got) = fp.run(&frame, fp0).unwrap();
        let after = fp.counters(fp0).unwrap();
        assert_eq!(got_action, action, "{what}");
        same_frame(&got, &want, what);
        // Counted under its reason, as the VLAN device counts it: without
        // the tag it came with.
        let i = REASONS.iter().position(|r| *r == reason).unwrap();
        assert_eq!(after.packets[i] - before.packets[i], 1, "{what}");
        assert_eq!(
            after.bytes[i] - before.bytes[i],
            frame.len() as u64 - untagged,
            "{what}: bytes"
        );
    }
    // The device gone: its frames are the kernel's, as they came.
    let frame = tagged(&to19, &dev10.tag());
    r.fp.set_vlan_interface(&dev10, None).unwrap();
    assert_eq!(
        r.fp.run(&frame, fp0).unwrap(),
        (XdpAction::Pass, frame.clone())
    );
    // And back, in a slot of its own again.
    r.fp.set_vlan_interface(&dev10, Some(&sub)).unwrap();
    assert_eq!(r.fp.run(&frame, fp0).unwrap().0, XdpAction::Redirect);
}
