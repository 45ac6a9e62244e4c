//! The receiver program's sequence tracking and latency, run with
//! BPF_PROG_RUN on frames with chosen sequence numbers, against an oracle
//! that remembers every number (a set) instead of a window. Needs root.
use linerate_traffic::flows;
use linerate_traffic::frame::FrameSpec;
use linerate_traffic::gen::monotonic_ns;
use linerate_traffic::recv::{Receiver, StreamStats};
use linerate_traffic::sizes::SizeMix;
use linerate_traffic::synth;
use std::collections::HashSet;

fn config() -> linerate_bpf::layout::GenConfig {
    let s = flows::parse("-s", "198.18.10.1-198.18.10.20", 2000).unwrap();
    let d = flows::parse("-d", "198.19.10.1", 2000).unwrap();
    FrameSpec {
        src_mac: [2, 0, 0, 0, 0, 1],
        dst_mac: [2, 0, 0, 0, 0, 2],
        src: s.first,
        dst: d.first,
        src_port: 2000,
        dst_port: 2000,
        sizes: SizeMix::parse("60", false).unwrap(),
        ttl: 64,
        l4: linerate_traffic::tcp::Proto::Udp,
        headers: Default::default(),
        vlan: None,
    }
    .gen_config(&s, &d, 0, 0, None)
    .unwrap()
}

/// Counts by definition: a duplicate repeats a number already seen; a
/// reordered packet (RFC 4737) is new but below the highest seen; lost
/// numbers lie between the lowest and highest seen and never came.
fn oracle(arrivals: &[u64]) -> (u64, u64, u64, u64) {
    let mut seen = HashSet::new();
    let (mut dup, mut reord, mut max) = (0, 0, None::<u64>);
    for &s in arrivals {
        if !seen.insert(s) {
            dup += 1;
            continue;
        }
        if max.is_some_and(|m| s < m) {
            reord += 1;
        }
        max = max.max(Some(s));
    }
    let lo = *seen.iter().min().unwrap();
    let hi = *seen.iter().max().unwrap();
    let lost = hi - lo + 1 - seen.len() as u64;
    (arrivals.len() as u64, lost, dup, reord)
}

use linerate_testkit::rng::Rng;

/// Sequence numbers first..first+n with some lost, some sent twice and
/// some swapped with a neighbour up to `reach` places away.
fn mangled(rng: &mut Rng, first: u64, n: u64, reach: u64) -> Vec<u64> {
    let mut v: Vec<u64> = Vec::new();
    for s in first..first + n {
        match rng.below(100) {
            0..=4 => {}                // lost
            5..=6 => v.extend([s, s]), // duplicated
            _ => v.push(s),
        }
    }
    for _ in 0..n / 10 {
        let i = rng.below(v.len() as u64) as usize;
        let j = (i + 1 + rng.below(reach) as usize).min(v.len() - 1);
        v.swap(i, j);
    }
    v
}

fn run(arrivals: &[u64], stream: u16) -> StreamStats {
    // Per-CPU state: keep every run on one CPU.
    linerate_host::cpu::pin(0, 0).unwrap();
    let r = Receiver::detached().unwrap();
    let cfg = config();
    let mut buf = vec![0u8; 60];
    let now = monotonic_ns() as u32;
    for &s in arrivals {
        let n = synth::write_frame(&cfg, s, stream, now.wrapping_sub(5_000), &mut buf);
        r.run_frame(&buf[..n]).unwrap();
    }
    let streams = r.streams().unwrap();
    assert_eq!(streams.len(), 1, "one stream");
    let total = r.total().unwrap();
    assert_eq!(total.packets, arrivals.len() as u64);
    assert_eq!(total.stamped, arrivals.len() as u64);
    let lat = r.latency().unwrap();
    assert_eq!(lat.count, arrivals.len() as u64);
    assert!(lat.min >= 5_000, "latency from a stamp 5 us old: {lat:?}");
    assert!(lat.p50 >= 5_000.0 && lat.p99 <= lat.max as f64);
    streams[0].clone()
}

#[test]
#[cfg_attr(
    not(feature = "privileged"),
    ignore = "needs root: --features privileged"
)]
fn random_loss_duplication_and_reordering_match_the_oracle() {
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    for case in 0..6 {
        // Starts near 0 and just below the 32-bit wrap.
        let first = if case % 2 == 0 {
            rng.below(1000)
        } else {
            (1u64 << 32) - 1500
        };
        let reach = 1 + rng.below(400);
        let arrivals = mangled(&mut rng, first, 3000, reach);
        let got = run(&arrivals, case as u16 + 3);
        let (received, lost, dup, reord) = oracle(&arrivals);
        assert_eq!(
            (
                got.received,
                got.lost,
                got.duplicated,
                got.reordered,
                got.late
            ),
            (received, lost, dup, reord, 0),
            "case {case} from {first}"
        );
        assert_eq!(got.stream, case as u16 as u32 + 3);
    }
}

#[test]
#[cfg_attr(
    not(feature = "privileged"),
    ignore = "needs root: --features privileged"
)]
fn in_order_stream_has_nothing_to_report() {
    let arrivals: Vec<u64> = (100..5100).collect();
    let got = run(&arrivals, 0);
    assert_eq!(
        (
            got.received,
            got.lost,
            got.duplicated,
            got.reordered,
            got.first_seq,
            got.last_seq
        ),
        (5000, 0, 0, 0, 100, 5099)
    );
}

#[test]
#[cfg_attr(
    not(feature = "privileged"),
    ignore = "needs root: --features privileged"
)]
fn a_packet_from_far_back_is_late() {
    // Beyond the window (1024 numbers) a straggler is reordered and "late":
    // whether it is a duplicate can no longer be told.
    let mut arrivals: Vec<u64> = (0..5000).filter(|&s| s != 10).collect();
    arrivals.push(10);
    arrivals.push(20); // an old duplicate, also out of the window
    let got = run(&arrivals, 1);
    assert_eq!(
        (
            got.received,
            got.lost,
            got.duplicated,
            got.reordered,
            got.late
        ),
        (5001, 0, 0, 2, 2)
    );
}

/// What each receiver program counts of the same three frames: a stamped
/// one, an ARP-sized non-IP one, and a stamped one again. The frames
/// receiver counts all three and reads nothing (no stamps, no streams);
/// the counting one tells the stamped ones apart; only the full one keeps
/// a sequence.
#[test]
#[cfg_attr(
    not(feature = "privileged"),
    ignore = "needs root: --features privileged"
)]
fn each_receiver_program_counts_what_it_says() {
    use linerate_traffic::recv::ReceiverMode;
    linerate_host::cpu::pin(0, 0).unwrap();
    let cfg = config();
    let mut stamped = vec![0u8; 60];
    let n = synth::write_frame(&cfg, 7, 3, monotonic_ns() as u32, &mut stamped);
    stamped.truncate(n);
    let mut arp = vec![0u8; 42];
    arp[12..14].copy_from_slice(&[0x08, 0x06]);
    for (mode, want_stamped, want_streams) in [
        (ReceiverMode::Full, 2, 1),
        (ReceiverMode::Count, 2, 0),
        (ReceiverMode::Frames, 0, 0),
    ] {
        let r = Receiver::detached().unwrap();
        for f in [&stamped, &arp, &stamped] {
            r.run_program(mode, f, 1).unwrap();
        }
        let t = r.total().unwrap();
        assert_eq!(t.packets, 3, "{mode:?}");
        assert_eq!(t.bytes, 2 * stamped.len() as u64 + 42, "{mode:?}");
        assert_eq!(t.stamped, want_stamped, "{mode:?}");
        assert_eq!(r.streams().unwrap().len(), want_streams, "{mode:?}");
    }
}

/// The answering receiver (the lab's stateful runs) sends every UDP frame
/// back with its MACs, addresses and ports swapped and its checksums
/// still right, stamped or not: the smallest IPv6 frame (62 bytes) has no
/// room for a stamp, and went unanswered when answering needed one. Frames
/// built and answers read by etherparse.
#[test]
#[cfg_attr(
    not(feature = "privileged"),
    ignore = "needs root: --features privileged"
)]
fn the_answering_receiver_swaps_every_udp_frame_back() {
    use etherparse::{PacketBuilder, SlicedPacket, TransportSlice};
    use linerate_bpf::test_run::XdpAction;
    use linerate_traffic::recv::ReceiverMode;
    let (a, b) = ([2, 0, 0, 0, 0, 1], [2, 0, 0, 0, 0, 2]);
    let v4 = {
        let p = PacketBuilder::ethernet2(a, b)
            .ipv4([198, 18, 10, 1], [198, 19, 10, 7], 63)
            .udp(2000, 2001);
        let mut f = Vec::new();
        p.write(&mut f, &[9u8; 18]).unwrap();
        f
    };
    let v6 = {
        let src: [u8; 16] = "2001:2:0:10::1"
            .parse::<std::net::Ipv6Addr>()
            .unwrap()
            .octets();
        let dst: [u8; 16] = "2001:2:0:8010::3e8"
            .parse::<std::net::Ipv6Addr>()
            .unwrap()
            .octets();
        let p = PacketBuilder::ethernet2(a, b)
            .ipv6(src, dst, 63)
            .udp(2000, 2001);
        let mut f = Vec::new();
        p.write(&mut f, &[]).unwrap();
        f
    };
    assert_eq!(v6.len(), 62);
    let r = Receiver::detached().unwrap();
    for f in [&v4, &v6] {
        let (verdict, out) = r.run_program_out(ReceiverMode::Answer, f).unwrap();
        assert_eq!(verdict, XdpAction::Redirect, "{} bytes", f.len());
        let sent = SlicedPacket::from_ethernet(f).unwrap();
        let back = SlicedPacket::from_ethernet(&out).unwrap();
        let (eth_s, eth_b) = (sent.link.unwrap(), back.link.unwrap());
        let (etherparse::LinkSlice::Ethernet2(es), etherparse::LinkSlice::Ethernet2(eb)) =
            (eth_s, eth_b)
        else {
            panic!("not Ethernet II");
        };
        assert_eq!(
            (eb.source(), eb.destination()),
            (es.destination(), es.source())
        );
        let (ns, nb) = (sent.net.unwrap(), back.net.unwrap());
        let addrs = |n: &etherparse::NetSlice| match n {
            etherparse::NetSlice::Ipv4(i) => (
                i.header().source().to_vec(),
                i.header().destination().to_vec(),
            ),
            etherparse::NetSlice::Ipv6(i) => (
                i.header().source().to_vec(),
                i.header().destination().to_vec(),
            ),
            _ => panic!("not IP"),
        };
        let ((s0, d0), (s1, d1)) = (addrs(&ns), addrs(&nb));
        assert_eq!((s1, d1), (d0, s0));
        let (Some(TransportSlice::Udp(us)), Some(TransportSlice::Udp(ub))) =
            (sent.transport, back.transport)
        else {
            panic!("not UDP");
        };
        assert_eq!(
            (ub.source_port(), ub.destination_port()),
            (us.destination_port(), us.source_port())
        );
        // The checksum, computed again over the answer, is the one it carries.
        let want = match &nb {
            etherparse::NetSlice::Ipv4(i) => ub
                .to_header()
                .calc_checksum_ipv4(&i.header().to_header(), ub.payload())
                .unwrap(),
            etherparse::NetSlice::Ipv6(i) => ub
                .to_header()
                .calc_checksum_ipv6(&i.header().to_header(), ub.payload())
                .unwrap(),
            _ => unreachable!(),
        };
        assert_eq!(ub.checksum(), want, "{} bytes", f.len());
    }
    let mut arp = vec![0u8; 42];
    arp[12..14].copy_from_slice(&[0x08, 0x06]);
    assert_eq!(
        r.run_program_out(ReceiverMode::Answer, &arp).unwrap().0,
        XdpAction::Drop
    );
}

/// A frame a DUT's VLAN device sent (802.1Q or 802.1ad) is read as it
/// would be untagged: counted with its tag's bytes, its stamp found.
#[test]
#[cfg_attr(
    not(feature = "privileged"),
    ignore = "needs root: --features privileged"
)]
fn tagged_frames_are_read_past_their_tag() {
    linerate_host::cpu::pin(0, 0).unwrap();
    let r = Receiver::detached().unwrap();
    let cfg = config();
    let mut buf = vec![0u8; 60];
    let now = monotonic_ns() as u32;
    for (s, tpid) in [(1u64, [0x81, 0x00]), (2, [0x88, 0xa8]), (3, [0x81, 0x00])] {
        let n = synth::write_frame(&cfg, s, 9, now.wrapping_sub(5_000), &mut buf);
        let mut f = buf[..n].to_vec();
        f.splice(12..12, [tpid[0], tpid[1], 0x00, 0x14]);
        r.run_frame(&f).unwrap();
    }
    let total = r.total().unwrap();
    assert_eq!((total.packets, total.stamped), (3, 3));
    assert_eq!(total.bytes, 3 * 64);
    let streams = r.streams().unwrap();
    assert_eq!(
        (streams[0].stream, streams[0].received, streams[0].lost),
        (9, 3, 0)
    );
}
