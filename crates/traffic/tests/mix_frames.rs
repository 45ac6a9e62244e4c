//! A traffic mix from the generator's program: frames of each part in the
//! order of the mix's slots, each part stepping through its own flows,
//! protocol and sequence as it would alone, its stamps on streams of its
//! own; checked with etherparse as an independent decoder (checksums,
//! addresses, ports, TCP sequence numbers). Needs root (loads BPF).
use etherparse::{NetSlice, SlicedPacket, TransportSlice};
use linerate_traffic::flows::{self, Endpoints};
use linerate_traffic::frame::FrameSpec;
use linerate_traffic::gen::{GenOptions, Generator, Mode};
use linerate_traffic::mix::{self, GenPart};
use linerate_traffic::sizes::SizeMix;
use linerate_traffic::tcp::{Proto, TcpPhase, TcpRun};
use std::collections::BTreeSet;
use std::net::IpAddr;
use std::time::Duration;

fn frame(s: &Endpoints, d: &Endpoints, len: &str, l4: Proto) -> FrameSpec {
    FrameSpec {
        src_mac: [2, 0, 0, 0, 0, 1],
        dst_mac: [2, 0, 0, 0, 0, 2],
        src: s.first,
        dst: d.first,
        src_port: s.port_first,
        dst_port: d.port_first,
        sizes: SizeMix::parse(len, s.is_ipv6()).unwrap(),
        ttl: 64,
        l4,
        headers: Default::default(),
        vlan: None,
    }
}

fn part(src: &str, dst: &str, len: &str, l4: Proto, weight: u32) -> GenPart {
    let s = flows::parse("-s", src, 2000).unwrap();
    let d = flows::parse("-d", dst, 2000).unwrap();
    GenPart {
        frame: frame(&s, &d, len, l4),
        src: s,
        dst: d,
        random_dst: false,
        random_src: false,
        tcp: (l4 == Proto::Tcp).then(|| TcpRun::phase(TcpPhase::Data, 0)),
        weight,
        rate_pps: None,
        out_ifname: None,
    }
}

/// Six TCP connections (weight 2), UDP to three IPv4 destinations and
/// UDP over IPv6 (weight 1 each).
fn edge_mix() -> GenOptions {
    let tcp = part(
        "198.18.10.1-198.18.10.2:2000-2002",
        "198.19.10.1:80",
        "60",
        Proto::Tcp,
        2,
    );
    GenOptions {
        ifname: "unused".into(),
        frame: tcp.frame.clone(),
        src: tcp.src.clone(),
        dst: tcp.dst.clone(),
        duration: Some(Duration::from_secs(1)),
        count: None,
        batch_size: 64,
        stream_base: 7,
        rate_pps: None,
        cpus: vec![0],
        mode: Mode::Xdp,
        random_dst: false,
        random_src: false,
        tcp: tcp.tcp,
        mix: vec![
            part(
                "198.18.20.1:3000",
                "198.19.20.1-198.19.20.3:53",
                "60",
                Proto::Udp,
                1,
            ),
            part(
                "[2001:2:0:20::1]:3000",
                "[2001:2:0:8020::1]:53",
                "78",
                Proto::Udp,
                1,
            ),
        ],
        weight: 2,
    }
}

struct Decoded {
    src: IpAddr,
    dst: IpAddr,
    dport: u16,
    sport: u16,
    /// TCP: its sequence number; UDP: its stamp's stream and sequence.
    tcp_seq: Option<u32>,
    stamp: Option<(u16, u32)>,
}

fn decode(f: &[u8]) -> Decoded {
    let p = SlicedPacket::from_ethernet(f).expect("etherparse decodes the frame");
    let (src, dst): (IpAddr, IpAddr) = match p.net.as_ref().expect("IP") {
        NetSlice::Ipv4(ip) => {
            let h = ip.header().to_header();
            assert_eq!(h.header_checksum, h.calc_header_checksum(), "IPv4 checksum");
            (h.source.into(), h.destination.into())
        }
        NetSlice::Ipv6(ip) => {
            let h = ip.header().to_header();
            (h.source.into(), h.destination.into())
        }
        NetSlice::Arp(_) => panic!("ARP"),
    };
    let checksum_of = |v4: &dyn Fn() -> u16, v6: &dyn Fn() -> u16| match src {
        IpAddr::V4(_) => v4(),
        IpAddr::V6(_) => v6(),
    };
    let (a4, b4, a6, b6) = match (src, dst) {
        (IpAddr::V4(a), IpAddr::V4(b)) => (a.octets(), b.octets(), [0; 16], [0; 16]),
        (IpAddr::V6(a), IpAddr::V6(b)) => ([0; 4], [0; 4], a.octets(), b.octets()),
        _ => panic!("mixed families"),
    };
    match p.transport.expect("a transport header") {
        TransportSlice::Tcp(t) => {
            let want = checksum_of(&|| t.calc_checksum_ipv4(a4, b4).unwrap(), &|| {
                t.calc_checksum_ipv6(a6, b6).unwrap()
            });
            assert_eq!(t.checksum(), want, "TCP checksum");
            Decoded {
                src,
                dst,
                sport: t.source_port(),
                dport: t.destination_port(),
                tcp_seq: Some(t.sequence_number()),
                stamp: None,
            }
        }
        TransportSlice::Udp(u) => {
            let h = u.to_header();
            let want = checksum_of(
                &|| h.calc_checksum_ipv4_raw(a4, b4, u.payload()).unwrap(),
                &|| h.calc_checksum_ipv6_raw(a6, b6, u.payload()).unwrap(),
            );
            assert_eq!(h.checksum, want, "UDP checksum");
            let b = u.payload();
            assert_eq!(&b[0..2], &[0x4c, 0x52], "the stamp's magic");
            Decoded {
                src,
                dst,
                sport: h.source_port,
                dport: h.destination_port,
                tcp_seq: None,
                stamp: Some((
                    u16::from_be_bytes([b[2], b[3]]),
                    u32::from_be_bytes([b[4], b[5], b[6], b[7]]),
                )),
            }
        }
        other => panic!("not TCP or UDP: {other:?}"),
    }
}

#[test]
#[cfg_attr(
    not(feature = "privileged"),
    ignore = "needs root: --features privileged"
)]
fn each_part_sends_its_own_traffic_in_the_slots_of_the_mix() {
    let o = edge_mix();
    let slots = mix::slots(&[2, 1, 1]);
    // On CPU 0: the stream ids are the part's base + CPU.
    linerate_host::cpu::pin(0, 0).unwrap();
    let cpu = 0u16;
    let frames = Generator::new(&o).unwrap().sample(48).unwrap();
    let mut tcp_seen: Vec<(IpAddr, u16, u32)> = Vec::new();
    let (mut udp4, mut udp6) = (Vec::new(), Vec::new());
    for (i, f) in frames.iter().enumerate() {
        let d = decode(f);
        match slots[i % slots.len()] {
            0 => {
                assert!(d.tcp_seq.is_some(), "frame {i}: the TCP part's slot");
                assert_eq!((d.dst, d.dport), ("198.19.10.1".parse().unwrap(), 80));
                tcp_seen.push((d.src, d.sport, d.tcp_seq.unwrap()));
            }
            1 => {
                assert_eq!(d.src, "198.18.20.1".parse::<IpAddr>().unwrap(), "frame {i}");
                assert_eq!((d.sport, d.dport), (3000, 53));
                udp4.push((d.dst, d.stamp.unwrap()));
            }
            _ => {
                assert_eq!(
                    d.dst,
                    "2001:2:0:8020::1".parse::<IpAddr>().unwrap(),
                    "frame {i}"
                );
                udp6.push(d.stamp.unwrap());
            }
        }
    }
    // The TCP part steps through its six connections as it would alone,
    // each pass one segment further (60-byte frames: 6 bytes a segment).
    assert_eq!(tcp_seen.len(), 24);
    let first: BTreeSet<(IpAddr, u16)> = tcp_seen[..6].iter().map(|t| (t.0, t.1)).collect();
    assert_eq!(first.len(), 6, "six connections a pass");
    for (a, b) in tcp_seen[..6].iter().zip(&tcp_seen[6..12]) {
        assert_eq!((a.0, a.1), (b.0, b.1), "the same order each pass");
        assert_eq!(b.2.wrapping_sub(a.2), 6, "the next segment in sequence");
    }
    // The UDP parts: their own flows, stamps on streams of their own,
    // numbered from zero as each part's frames leave.
    let dsts: Vec<IpAddr> = udp4.iter().map(|u| u.0).collect();
    assert_eq!(
        &dsts[..4],
        &["198.19.20.1", "198.19.20.2", "198.19.20.3", "198.19.20.1"]
            .map(|a| a.parse::<IpAddr>().unwrap())
    );
    let stream = |part: u16| 7 + part * mix::STREAMS_A_PART + cpu;
    for (k, (_, (s, seq))) in udp4.iter().enumerate() {
        assert_eq!((*s, *seq), (stream(1), k as u32));
    }
    for (k, (s, seq)) in udp6.iter().enumerate() {
        assert_eq!((*s, *seq), (stream(2), k as u32));
    }
    assert_eq!((udp4.len(), udp6.len()), (12, 12));
}

/// A part with a rate of its own is paced to it while the others, with
/// none asked, run as fast as the slots come: the round's slots stay the
/// same, the paced part's ahead of its schedule send nothing.
#[test]
#[cfg_attr(
    not(feature = "privileged"),
    ignore = "needs root: --features privileged"
)]
fn a_part_with_a_rate_of_its_own_is_paced_to_it_alone() {
    let mut o = edge_mix();
    o.mix[1].rate_pps = Some(1000);
    linerate_host::cpu::pin(0, 0).unwrap();
    let g = Generator::new(&o).unwrap();
    let start = linerate_traffic::gen::monotonic_ns();
    g.pace_from(start).unwrap();
    let built = g.probe(4000).unwrap();
    let elapsed_ms = (linerate_traffic::gen::monotonic_ns() - start) / 1_000_000;
    let sent = |part| g.part_state(part).unwrap()[0].seq;
    assert_eq!(
        (sent(0), sent(1)),
        (2000, 1000),
        "the unpaced parts: every slot"
    );
    // At 1000 a second: one frame a millisecond, and the first at once.
    let paced = sent(2);
    assert!(
        paced >= 1 && paced <= elapsed_ms + 1,
        "{paced} frames in {elapsed_ms} ms"
    );
    assert_eq!(built as u64, 3000 + paced);
}

#[test]
fn a_mix_is_refused_with_the_part_and_the_reason() {
    let refused = |o: &GenOptions| {
        let e = o.check().unwrap_err();
        assert_eq!(e.field, "mix");
        e.reason
    };
    let mut o = edge_mix();
    o.mix[0].weight = 31;
    assert!(refused(&o).contains("add up to 34"), "{}", refused(&o));
    let mut o = edge_mix();
    o.mix[1].weight = 0;
    assert!(refused(&o).contains("at least 1"));
    let mut o = edge_mix();
    o.count = Some(100);
    assert!(refused(&o).contains("not a count"));
    let mut o = edge_mix();
    o.mix.push(o.mix[0].clone());
    o.mix.push(o.mix[0].clone());
    assert!(refused(&o).contains("5 parts"));
    // A part that is no good alone: TCP from random sources.
    let mut o = edge_mix();
    let mut bad = part("198.18.30.1:4000", "198.19.30.1:80", "60", Proto::Tcp, 1);
    bad.random_src = true;
    o.mix.push(bad);
    let r = refused(&o);
    assert!(r.starts_with("part 4: random_src:"), "{r}");
    assert!(edge_mix().check().is_ok());
}
