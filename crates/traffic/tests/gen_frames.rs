//! The generator program's frames, checked with etherparse as an
//! independent decoder (valid IPv4 header and UDP checksums, flows in
//! pkt-gen order, the stamp's sequence numbers, IMIX sizes and padding) and
//! against the Rust synthesiser the AF_PACKET mode sends, byte for byte.
//! Needs root (loads BPF).
use etherparse::{NetSlice, SlicedPacket, TransportSlice};
use linerate_traffic::flows;
use linerate_traffic::frame::FrameSpec;
use linerate_traffic::gen::{GenOptions, Generator, Mode};
use linerate_traffic::sizes::SizeMix;
use linerate_traffic::synth;

fn opts(src: &str, dst: &str, len: &str) -> GenOptions {
    let s = flows::parse("-s", src, 2000).unwrap();
    let d = flows::parse("-d", dst, 2000).unwrap();
    GenOptions {
        ifname: "unused".into(),
        frame: FrameSpec {
            src_mac: [2, 0, 0, 0, 0, 1],
            dst_mac: [2, 0, 0, 0, 0, 2],
            src: s.first,
            dst: d.first,
            src_port: s.port_first,
            dst_port: d.port_first,
            sizes: SizeMix::parse(len, s.is_ipv6()).unwrap(),
            ttl: 64,
            l4: linerate_traffic::tcp::Proto::Udp,
            headers: Default::default(),
            vlan: None,
        },
        src: s,
        dst: d,
        duration: None,
        count: Some(1),
        batch_size: 64,
        stream_base: 7,
        rate_pps: None,
        cpus: vec![0],
        mode: Mode::Xdp,
        random_dst: false,
        random_src: false,
        tcp: None,
        mix: Vec::new(),
        weight: 1,
    }
}

struct Decoded {
    src: std::net::IpAddr,
    dst: std::net::IpAddr,
    sport: u16,
    dport: u16,
    seq: Option<u32>,
}

fn decode(frame: &[u8]) -> Decoded {
    let p = SlicedPacket::from_ethernet(frame).expect("etherparse decodes the frame");
    let Some(TransportSlice::Udp(udp)) = p.transport else {
        panic!("not UDP")
    };
    let payload = udp.payload();
    let (src, dst) = match p.net.expect("IP") {
        NetSlice::Ipv4(ip) => {
            let h = ip.header().to_header();
            assert_eq!(
                h.header_checksum,
                h.calc_header_checksum(),
                "IPv4 header checksum"
            );
            let want = udp.to_header().calc_checksum_ipv4(&h, payload).unwrap();
            assert_eq!(udp.checksum(), want, "UDP checksum over IPv4");
            (h.source.into(), h.destination.into())
        }
        NetSlice::Ipv6(ip) => {
            let h = ip.header().to_header();
            let want = udp.to_header().calc_checksum_ipv6(&h, payload).unwrap();
            assert_eq!(udp.checksum(), want, "UDP checksum over IPv6");
            (h.source.into(), h.destination.into())
        }
        NetSlice::Arp(_) => panic!("ARP"),
    };
    let seq = (payload.len() >= 12 && payload[0..2] == [0x4c, 0x52]).then(|| {
        assert!(
            u16::from_be_bytes([payload[2], payload[3]]) >= 7,
            "stream id from stream_base"
        );
        u32::from_be_bytes(payload[4..8].try_into().unwrap())
    });
    Decoded {
        src,
        dst,
        sport: udp.source_port(),
        dport: udp.destination_port(),
        seq,
    }
}

#[test]
#[cfg_attr(
    not(feature = "privileged"),
    ignore = "needs root: --features privileged"
)]
fn ipv4_frames_are_valid_and_flows_advance_like_pktgen() {
    let o = opts(
        "198.18.10.1-198.18.10.3:2000-2001",
        "198.19.10.1-198.19.10.2",
        "60",
    );
    let g = Generator::new(&o).unwrap();
    let frames = g.sample(2 * 3 * 2 + 1).unwrap();
    let d: Vec<Decoded> = frames.iter().map(|f| decode(f)).collect();
    // Source port fastest, then source address, then destination address.
    let expect = |i: usize| {
        let sport = 2000 + (i % 2) as u16;
        let src = format!("198.18.10.{}", 1 + (i / 2) % 3);
        let dst = format!("198.19.10.{}", 1 + (i / 6) % 2);
        (sport, src, dst)
    };
    for (i, x) in d.iter().enumerate() {
        let (sport, src, dst) = expect(i);
        assert_eq!(
            (x.sport, x.src.to_string(), x.dst.to_string(), x.dport),
            (sport, src, dst, 2000),
            "frame {i}"
        );
    }
    // Sequence numbers increase by one per frame.
    let seqs: Vec<u32> = d
        .iter()
        .map(|x| x.seq.expect("60-byte IPv4 frames carry a stamp"))
        .collect();
    assert!(seqs.windows(2).all(|w| w[1] == w[0] + 1), "{seqs:?}");
    assert!(frames.iter().all(|f| f.len() == 60));
}

#[test]
#[cfg_attr(
    not(feature = "privileged"),
    ignore = "needs root: --features privileged"
)]
fn ipv4_checksums_hold_for_every_size() {
    for len in [60, 61, 64, 128, 577, 1514] {
        let o = opts(
            "198.18.10.1-198.18.10.20",
            "198.19.10.1-198.19.10.100",
            &len.to_string(),
        );
        for f in Generator::new(&o).unwrap().sample(50).unwrap() {
            assert_eq!(f.len(), len);
            decode(&f);
        }
    }
}

#[test]
#[cfg_attr(
    not(feature = "privileged"),
    ignore = "needs root: --features privileged"
)]
fn ipv6_frames_are_valid_with_and_without_stamp() {
    for len in [62, 73, 74, 79, 1514] {
        let o = opts(
            "2001:2::1-2001:2::14",
            "[2001:2:0:8000::1-2001:2:0:8000::64]:3000",
            &len.to_string(),
        );
        let frames = Generator::new(&o).unwrap().sample(30).unwrap();
        for (i, f) in frames.iter().enumerate() {
            let d = decode(f);
            assert_eq!(d.seq.is_some(), len >= 74, "len {len}");
            assert_eq!(d.src.to_string(), format!("2001:2::{:x}", 1 + i % 20));
            assert_eq!(d.dport, 3000);
        }
    }
}

#[test]
#[cfg_attr(
    not(feature = "privileged"),
    ignore = "needs root: --features privileged"
)]
fn a_dirtied_frame_is_rewritten() {
    // Live frames recycle pages without resetting them (docs/lab.md, OTHERHOST):
    // feed the program a frame a DUT has modified and check it comes out
    // as if fresh.
    let o = opts("198.18.10.1", "198.19.10.1", "60");
    let g = Generator::new(&o).unwrap();
    let clean = g.sample(1).unwrap().remove(0);
    let dirty = {
        let mut f = clean.clone();
        f[0..6].copy_from_slice(&[2, 0, 0, 0, 0, 4]); // DUT's MAC rewrite
        linerate_testkit::frames::edit_ipv4(&mut f, |h| h.time_to_live = 1); // TTL run down
        f
    };
    let out = g.sample_from(&dirty, 1).unwrap().remove(0);
    // Everything up to the UDP checksum (which covers the time stamp, new
    // on every run) is back to the template; decode() checks the checksums.
    assert_eq!(
        out[..40],
        clean[..40],
        "headers restored (MACs, TTL, IP checksum)"
    );
    decode(&out);
}

#[test]
#[cfg_attr(
    not(feature = "privileged"),
    ignore = "needs root: --features privileged"
)]
fn imix_frames_cycle_7_4_1_with_padding() {
    for (src, dst, small) in [
        (
            "198.18.10.1-198.18.10.20",
            "198.19.10.1-198.19.10.100",
            40usize,
        ),
        (
            "2001:2::1-2001:2::14",
            "2001:2:0:8000::1-2001:2:0:8000::64",
            60,
        ),
    ] {
        let g = Generator::new(&opts(src, dst, "imix")).unwrap();
        let frames = g.sample(24).unwrap();
        let mut ip_lens = Vec::new();
        for f in &frames {
            let d = decode(f);
            assert!(d.seq.is_some(), "every IMIX frame carries the stamp");
            let p = SlicedPacket::from_ethernet(f).unwrap();
            let ip_len = match p.net.unwrap() {
                NetSlice::Ipv4(ip) => ip.header().total_len() as usize,
                NetSlice::Ipv6(ip) => 40 + ip.header().payload_length() as usize,
                NetSlice::Arp(_) => unreachable!(),
            };
            assert_eq!(f.len(), (ip_len + 14).max(60), "frame padded to 60 bytes");
            ip_lens.push(ip_len);
        }
        for want in [small, 576, 1500] {
            let n = ip_lens.iter().filter(|&&l| l == want).count();
            let expect = match want {
                576 => 8,
                1500 => 2,
                _ => 14,
            };
            assert_eq!(
                n, expect,
                "{want}-byte packets in two IMIX cycles: {ip_lens:?}"
            );
        }
    }
}

/// The XDP program and the Rust synthesiser (AF_PACKET mode) build the same
/// bytes for the same configuration and sequence number.
#[test]
#[cfg_attr(
    not(feature = "privileged"),
    ignore = "needs root: --features privileged"
)]
fn xdp_and_afpacket_frames_are_identical() {
    let cases = [
        (
            "198.18.10.1-198.18.10.3:2000-2002",
            "198.19.10.1-198.19.10.5:7-8",
            "60",
        ),
        (
            "198.18.10.1-198.18.10.20",
            "198.19.10.1-198.19.10.100",
            "imix",
        ),
        ("198.18.10.1", "198.19.10.1", "rfc2544"),
        ("198.18.10.1", "198.19.10.1", "61,1513"),
        (
            "2001:2::1-2001:2::14",
            "2001:2:0:8000::1-2001:2:0:8000::64",
            "62",
        ),
        (
            "2001:2::1-2001:2::14",
            "2001:2:0:8000::1-2001:2:0:8000::64",
            "imix",
        ),
        ("[2001:2::1]:1-[2001:2::3]:4", "2001:2:0:8000::1", "rfc2544"),
    ];
    for (src, dst, len) in cases {
        let g = Generator::new(&opts(src, dst, len)).unwrap();
        let max = g.config().sizes.iter().map(|s| s.frame_len).max().unwrap() as usize;
        for (seq, bpf) in g.sample(40).unwrap().iter().enumerate() {
            let d = decode(bpf);
            // Stream and time come from where and when the program ran.
            let (stream, tx_ns) = match d.seq {
                Some(_) => {
                    let (_, _, pay) = linerate_traffic::frame::offsets(
                        src.contains(':') && !src.starts_with("198"),
                    );
                    (
                        u16::from_be_bytes([bpf[pay + 2], bpf[pay + 3]]),
                        u32::from_be_bytes(bpf[pay + 8..pay + 12].try_into().unwrap()),
                    )
                }
                None => (0, 0),
            };
            let mut buf = vec![0u8; max];
            let n = synth::write_frame(g.config(), seq as u64, stream, tx_ns, &mut buf);
            assert_eq!(&buf[..n], &bpf[..], "{src} {dst} -l {len}: frame {seq}");
        }
    }
}

#[test]
#[cfg_attr(
    not(feature = "privileged"),
    ignore = "needs root: --features privileged"
)]
fn random_destinations_stay_in_the_range_and_spread_over_it() {
    // pkt-gen's -Z over 1.0.0.1-126.255.255.254: every frame valid (both
    // checksums), every destination inside the range, sources and ports
    // stepping as usual, destinations spread over the range.
    let mut o = opts("198.18.10.1-198.18.10.3", "1.0.0.1-126.255.255.254", "60");
    o.random_dst = true;
    let g = Generator::new(&o).unwrap();
    let frames = g.sample(4000).unwrap();
    let d: Vec<Decoded> = frames.iter().map(|f| decode(f)).collect();
    let (lo, hi) = (
        u32::from_be_bytes([1, 0, 0, 1]),
        u32::from_be_bytes([126, 255, 255, 254]),
    );
    let dsts: Vec<u32> = d
        .iter()
        .map(|x| match x.dst {
            std::net::IpAddr::V4(a) => u32::from(a),
            _ => panic!("IPv4"),
        })
        .collect();
    assert!(dsts.iter().all(|&a| (lo..=hi).contains(&a)));
    let distinct: std::collections::HashSet<u32> = dsts.iter().map(|a| a >> 24).collect();
    assert!(
        distinct.len() > 100,
        "only {} first octets of 126",
        distinct.len()
    );
    for (i, x) in d.iter().enumerate() {
        assert_eq!(
            x.src.to_string(),
            format!("198.18.10.{}", 1 + i % 3),
            "frame {i}"
        );
    }
    // Without -Z the same range is stepped: a new destination every 3
    // frames (the three sources), from the first one on.
    o.random_dst = false;
    let g = Generator::new(&o).unwrap();
    let stepped: Vec<String> = g
        .sample(30)
        .unwrap()
        .iter()
        .map(|f| decode(f).dst.to_string())
        .collect();
    let want: Vec<String> = (0..30).map(|i| format!("1.0.0.{}", 1 + i / 3)).collect();
    assert_eq!(stepped, want);
    // AF_PACKET builds its frames in Rust and has no random mode.
    o.random_dst = true;
    o.mode = Mode::Afpacket;
    assert_eq!(o.check().unwrap_err().field, "random_dst");
    let e = Generator::new(&o).err().expect("refused");
    assert!(
        e.to_string()
            .contains("random destinations need the XDP mode"),
        "{e}"
    );
}

#[test]
#[cfg_attr(
    not(feature = "privileged"),
    ignore = "needs root: --features privileged"
)]
fn random_flows_draw_every_address_and_port_from_their_ranges() {
    // -Z and -z over a /16 and 64k ports each way: every frame valid,
    // inside its ranges, and nearly every one a flow of its own (a 4-tuple
    // over 2^64 values: 4000 draws repeat one with odds of 1 in 10^12).
    let mut o = opts(
        "198.18.0.1-198.18.255.254:1024-65535",
        "198.19.0.1-198.19.255.254:1-65535",
        "60",
    );
    o.random_dst = true;
    o.random_src = true;
    let g = Generator::new(&o).unwrap();
    let d: Vec<Decoded> = g.sample(4000).unwrap().iter().map(|f| decode(f)).collect();
    let v4 = |a: std::net::IpAddr| match a {
        std::net::IpAddr::V4(a) => u32::from(a),
        _ => panic!("IPv4"),
    };
    for x in &d {
        assert!(
            (0xc612_0001..=0xc612_fffe).contains(&v4(x.src)),
            "{}",
            x.src
        );
        assert!(
            (0xc613_0001..=0xc613_fffe).contains(&v4(x.dst)),
            "{}",
            x.dst
        );
        assert!(x.sport >= 1024 && x.dport >= 1);
    }
    let flows: std::collections::HashSet<(u32, u32, u16, u16)> = d
        .iter()
        .map(|x| (v4(x.src), v4(x.dst), x.sport, x.dport))
        .collect();
    assert_eq!(flows.len(), d.len());
    // Each field spread over its range: its top and bottom halves both.
    let halves = |f: &dyn Fn(&Decoded) -> bool| d.iter().filter(|x| f(x)).count();
    for (what, n) in [
        ("sport", halves(&|x| x.sport >= 33280)),
        ("dport", halves(&|x| x.dport >= 32768)),
        ("src", halves(&|x| v4(x.src) >= 0xc612_8000)),
        ("dst", halves(&|x| v4(x.dst) >= 0xc613_8000)),
    ] {
        assert!(
            (1600..=2400).contains(&n),
            "{what}: {n} of 4000 in the top half"
        );
    }
    o.random_src = true;
    o.random_dst = false;
    o.mode = Mode::Afpacket;
    assert_eq!(o.check().unwrap_err().field, "random_src");
}

#[test]
#[cfg_attr(
    not(feature = "privileged"),
    ignore = "needs root: --features privileged"
)]
fn pacing_holds_frames_ahead_of_the_schedule_and_catches_up_on_those_behind() {
    // One CPU, so one schedule: the program's state is per CPU.
    linerate_host::cpu::pin(0, 0).unwrap();
    let mut o = opts("198.18.0.1", "198.19.0.1", "60");
    o.rate_pps = Some(10_000);
    let g = Generator::new(&o).unwrap();
    // A schedule that began a second ago: 10000 frames are due, every run
    // builds one.
    let now = linerate_traffic::gen::monotonic_ns();
    g.pace_from(now - 1_000_000_000).unwrap();
    assert_eq!(g.probe(2000).unwrap(), 2000, "behind the schedule");
    // One that begins now (a fresh generator): one frame is due at once,
    // then one per 100 us.
    let g = Generator::new(&o).unwrap();
    g.pace_from(linerate_traffic::gen::monotonic_ns()).unwrap();
    let t0 = std::time::Instant::now();
    let built = g.probe(2000).unwrap() as u64;
    let secs = t0.elapsed().as_secs_f64();
    assert_eq!(g.xdp_state().unwrap()[0].seq, built);
    assert!(
        built >= 1 && built as f64 <= (secs * 10_000.0).ceil() + 1.0,
        "built {built} in {secs} s at 10 kpps"
    );
}

/// The frames a router hands its kernel: TTL 1 and 0, IPv4 options, an
/// IPv6 hop-by-hop header, first fragments of both families. etherparse
/// reads each header as asked, with the lengths and checksums holding,
/// and the AF_PACKET synthesiser writes the same bytes.
#[test]
#[cfg_attr(
    not(feature = "privileged"),
    ignore = "needs root: --features privileged"
)]
fn exception_frames_carry_what_they_are_asked_to() {
    use etherparse::{IpNumber, Ipv4Header, Ipv6Header, LaxSlicedPacket};
    use linerate_traffic::frame::Headers;
    let v4 = ("198.18.10.1-198.18.10.3:2000-2001", "198.19.10.1");
    let v6 = ("2001:2::1-2001:2::3", "2001:2:0:8000::1");
    for ((src, dst), len, headers, ttl) in [
        (v4, "60", Headers::Plain, 1),
        (v4, "60", Headers::Plain, 0),
        (v4, "60", Headers::Options, 64),
        (v4, "100", Headers::Fragment, 64),
        (v6, "78", Headers::Plain, 1),
        (v6, "78", Headers::Options, 64),
        (v6, "100", Headers::Fragment, 64),
    ] {
        let what = format!("{src} -l {len} {headers:?} ttl {ttl}");
        let mut o = opts(src, dst, len);
        o.frame.headers = headers;
        o.frame.ttl = ttl;
        let g = Generator::new(&o).unwrap();
        for (seq, f) in g.sample(8).unwrap().iter().enumerate() {
            assert_eq!(f.len(), len.parse::<usize>().unwrap(), "{what}");
            let l3 = &f[14..];
            // The datagram after the IP header and its extension: its
            // length and checksum as the kernel would check them.
            let (datagram, pseudo, hops): (&[u8], Vec<u8>, u8) = if src.starts_with("198") {
                let (h, _) = Ipv4Header::from_slice(l3).unwrap();
                assert_eq!(h.header_checksum, h.calc_header_checksum(), "{what}");
                assert_eq!(h.total_len as usize, f.len() - 14, "{what}");
                assert_eq!(
                    h.options.as_slice(),
                    if headers == Headers::Options {
                        &[1, 1, 1, 1, 1, 1, 1, 0][..]
                    } else {
                        &[][..]
                    },
                    "{what}"
                );
                assert_eq!(h.more_fragments, headers == Headers::Fragment, "{what}");
                assert_eq!(h.fragment_offset.value(), 0, "{what}");
                let mut p = [h.source, h.destination].concat();
                p.extend([0, 17]);
                (&l3[h.header_len()..], p, h.time_to_live)
            } else {
                let (h, rest) = Ipv6Header::from_slice(l3).unwrap();
                assert_eq!(h.payload_length as usize, f.len() - 54, "{what}");
                let (next, ext) = match headers {
                    Headers::Plain => (IpNumber::UDP, 0),
                    Headers::Options => (IpNumber::IPV6_HEADER_HOP_BY_HOP, 8),
                    Headers::Fragment => (IpNumber::IPV6_FRAGMENTATION_HEADER, 8),
                };
                assert_eq!(h.next_header, next, "{what}");
                if ext > 0 {
                    assert_eq!(rest[0], 17, "{what}: the extension's next header");
                }
                if headers == Headers::Fragment {
                    assert_eq!(&rest[2..4], &[0, 1], "{what}: offset 0, more fragments");
                }
                let mut p = [h.source, h.destination].concat();
                p.extend([0, 17]);
                (&rest[ext..], p, h.hop_limit)
            };
            assert_eq!(hops, ttl, "{what}");
            let udp_len = u16::from_be_bytes([datagram[4], datagram[5]]) as usize;
            assert_eq!(udp_len, datagram.len(), "{what}: the UDP length");
            let mut sum: u32 = pseudo
                .chunks(2)
                .chain(datagram.chunks(2))
                .map(|w| u16::from_be_bytes([w[0], *w.get(1).unwrap_or(&0)]) as u32)
                .sum();
            sum += udp_len as u32;
            while sum >> 16 != 0 {
                sum = (sum & 0xffff) + (sum >> 16);
            }
            assert_eq!(sum, 0xffff, "{what}: the UDP checksum holds");
            // A decoder that does not reassemble sees a fragment's
            // payload, not a datagram.
            let p = LaxSlicedPacket::from_ethernet(f).unwrap();
            assert_eq!(
                p.transport.is_some(),
                headers != Headers::Fragment,
                "{what}"
            );
            let mut buf = vec![0u8; f.len()];
            let n = synth::write_frame(g.config(), seq as u64, 7, 0, &mut buf);
            // (Stream and time are the program's: compare the rest.)
            let stamped = |b: &[u8]| {
                let mut b = b.to_vec();
                let at = 14 + (f.len() - 14 - datagram.len()) + 8;
                if b.len() >= at + 12 {
                    b[at + 2..at + 4].fill(0);
                    b[at + 8..at + 12].fill(0);
                    b[at - 2..at].fill(0); // the checksum covers both
                }
                b
            };
            assert_eq!(stamped(&buf[..n]), stamped(f), "{what}: frame {seq}");
        }
    }
}

/// With `vlan`, every frame is the untagged generator's frame with an
/// 802.1Q tag after its MACs: 4 bytes longer, the same MACs, IP header,
/// flow and sequence (the stamp's time, and so the UDP checksum, are the
/// moment's).
#[test]
#[cfg_attr(
    not(feature = "privileged"),
    ignore = "needs root: --features privileged"
)]
fn tagged_frames_are_the_untagged_ones_with_the_tag() {
    for (src, dst, len) in [
        ("198.18.10.1-198.18.10.3:2000-2001", "198.19.10.1", "imix"),
        ("2001:2::1-2001:2::3", "2001:2:0:8001::1", "78"),
    ] {
        let plain = opts(src, dst, len);
        let mut tagged = opts(src, dst, len);
        tagged.frame.vlan = Some(0x123);
        let want = Generator::new(&plain).unwrap().sample(12).unwrap();
        let got = Generator::new(&tagged).unwrap().sample(12).unwrap();
        for (i, (w, g)) in want.iter().zip(&got).enumerate() {
            assert_eq!(g[12..16], [0x81, 0x00, 0x01, 0x23], "frame {i}: the tag");
            let mut untagged = g.clone();
            untagged.drain(12..16);
            let l3 = if w[12..14] == [0x86, 0xdd] { 54 } else { 34 };
            assert_eq!(
                (untagged.len(), &untagged[..l3]),
                (w.len(), &w[..l3]),
                "frame {i}"
            );
            let (a, b) = (decode(&untagged), decode(w));
            assert_eq!(
                (a.src, a.dst, a.sport, a.dport, a.seq),
                (b.src, b.dst, b.sport, b.dport, b.seq),
                "frame {i}: flow and sequence"
            );
        }
    }
}
