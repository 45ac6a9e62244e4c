//! The generator's TCP segments and the answering receiver's replies,
//! checked with etherparse as an independent decoder: valid IP and TCP
//! checksums, each phase's flags, options and lengths, sequence and
//! acknowledgement numbers that follow one another as a connection's do
//! (the generator's data after the receiver's SYN|ACK, the receiver's
//! acknowledgements of what was sent), connections shared out over CPUs
//! by source port. Needs root (loads BPF).
use etherparse::{NetSlice, SlicedPacket, TransportSlice};
use linerate_bpf::layout::{LAB_TCP_ISN_GAP, LAB_TCP_MSS, LAB_TCP_WSCALE};
use linerate_bpf::{loader, objects, test_run};
use linerate_traffic::flows;
use linerate_traffic::frame::FrameSpec;
use linerate_traffic::gen::{GenOptions, Generator, Mode};
use linerate_traffic::sizes::SizeMix;
use linerate_traffic::tcp::{Proto, TcpPhase, TcpRun};
use std::net::IpAddr;
use std::os::fd::AsFd;

const SRC_V4: &str = "198.18.10.1-198.18.10.2:2000-2002";
const DST_V4: &str = "198.19.10.1:80";
const SRC_V6: &str = "[2001:2:0:10::1-2001:2:0:10::2]:2000-2002";
const DST_V6: &str = "[2001:2:0:8010::1]:80";

fn opts(src: &str, dst: &str, len: &str, phase: TcpPhase, from: u32) -> GenOptions {
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
            l4: Proto::Tcp,
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
        tcp: Some(TcpRun::phase(phase, from)),
        mix: Vec::new(),
        weight: 1,
    }
}

/// A segment as etherparse reads it, its checksums checked.
#[derive(Debug)]
struct Segment {
    src: IpAddr,
    dst: IpAddr,
    sport: u16,
    dport: u16,
    seq: u32,
    ack: u32,
    flags: (bool, bool, bool, bool, bool), // SYN, ACK, FIN, PSH, RST
    window: u16,
    options: Vec<u8>,
    payload: Vec<u8>,
}

fn decode(frame: &[u8]) -> Segment {
    let p = SlicedPacket::from_ethernet(frame).expect("etherparse decodes the frame");
    let Some(TransportSlice::Tcp(t)) = p.transport else {
        panic!("not TCP: {frame:02x?}")
    };
    let (src, dst, want) = match p.net.expect("IP") {
        NetSlice::Ipv4(ip) => {
            let h = ip.header().to_header();
            assert_eq!(h.header_checksum, h.calc_header_checksum(), "IPv4 checksum");
            let want = t.calc_checksum_ipv4(h.source, h.destination).unwrap();
            (h.source.into(), h.destination.into(), want)
        }
        NetSlice::Ipv6(ip) => {
            let h = ip.header().to_header();
            let want = t.calc_checksum_ipv6(h.source, h.destination).unwrap();
            (h.source.into(), h.destination.into(), want)
        }
        NetSlice::Arp(_) => panic!("ARP"),
    };
    assert_eq!(t.checksum(), want, "TCP checksum");
    Segment {
        src,
        dst,
        sport: t.source_port(),
        dport: t.destination_port(),
        seq: t.sequence_number(),
        ack: t.acknowledgment_number(),
        flags: (t.syn(), t.ack(), t.fin(), t.psh(), t.rst()),
        window: t.window_size(),
        options: t.options().to_vec(),
        payload: t.payload().to_vec(),
    }
}

fn low32(a: IpAddr) -> u32 {
    flows::addr_low32(a)
}

/// The generator's initial sequence number of a connection: a mix of its
/// tuple (bpf/lab/gen.bpf.c, tcp_isn).
fn isn(s: &Segment) -> u32 {
    low32(s.src).wrapping_mul(0x9e37_79b1)
        ^ low32(s.dst)
        ^ ((s.sport as u32) << 16 | s.dport as u32)
}

fn sample(o: &GenOptions, n: usize) -> Vec<Vec<u8>> {
    Generator::new(o).unwrap().sample(n).unwrap()
}

/// Runs the answering receiver on `frame`: its answer, or None for a drop.
fn answer(frame: &[u8]) -> Option<Vec<u8>> {
    let obj = loader::load(objects::RECV, "receiver").unwrap();
    let prog = loader::prog(&obj, "lab_recv_answer").unwrap();
    let mut out = vec![0u8; frame.len() + 256];
    let r = test_run::run_xdp(prog.as_fd(), frame, &mut out, 1).unwrap();
    match r.verdict {
        test_run::XdpAction::Redirect => {
            out.truncate(r.len);
            Some(out)
        }
        test_run::XdpAction::Drop => None,
        v => panic!("answer: {v:?}"),
    }
}

const SYN: (bool, bool, bool, bool, bool) = (true, false, false, false, false);
const SYN_ACK: (bool, bool, bool, bool, bool) = (true, true, false, false, false);
const ACK: (bool, bool, bool, bool, bool) = (false, true, false, false, false);
const ACK_PSH: (bool, bool, bool, bool, bool) = (false, true, false, true, false);
const FIN_ACK: (bool, bool, bool, bool, bool) = (false, true, true, false, false);

/// A connection opened, data sent and acknowledged, and closed, segment by
/// segment, with each answer the receiver gives, both families.
#[test]
#[cfg_attr(
    not(feature = "privileged"),
    ignore = "needs root: --features privileged"
)]
fn a_connection_opens_sends_and_closes_in_sequence() {
    for (src, dst, len, frame_len, syn_len) in [
        (SRC_V4, DST_V4, "60", 60, 62),
        (SRC_V6, DST_V6, "100", 100, 82),
    ] {
        let flows = 6;
        // SYN: options, no payload; the SYN|ACK echoes them, its sequence
        // number the SYN's plus the gap.
        let syns = sample(&opts(src, dst, len, TcpPhase::Syn, 0), flows);
        let mut tuples = Vec::new();
        for f in &syns {
            assert_eq!(f.len(), syn_len, "{src}");
            let s = decode(f);
            assert_eq!(s.flags, SYN, "{s:?}");
            assert_eq!((s.seq, s.ack, s.window), (isn(&s), 0, 0xffff));
            let mss = LAB_TCP_MSS.to_be_bytes();
            assert_eq!(s.options, [2, 4, mss[0], mss[1], 1, 3, 3, LAB_TCP_WSCALE]);
            assert!(s.payload.is_empty());
            tuples.push((s.src, s.sport));
            let a = decode(&answer(f).expect("a SYN is answered"));
            assert_eq!(a.flags, SYN_ACK, "{a:?}");
            assert_eq!(
                (a.src, a.dst, a.sport, a.dport),
                (s.dst, s.src, s.dport, s.sport)
            );
            assert_eq!(
                (a.seq, a.ack),
                (
                    isn(&s).wrapping_add(LAB_TCP_ISN_GAP),
                    isn(&s).wrapping_add(1)
                )
            );
            assert_eq!(a.options, s.options);
        }
        let distinct: std::collections::HashSet<_> = tuples.iter().collect();
        assert_eq!(distinct.len(), flows, "every flow its connection");
        // Data, two passes over the flows from byte 0: the first segment
        // completes the handshake and is acknowledged, the second is not.
        let data = sample(&opts(src, dst, len, TcpPhase::Data, 0), 2 * flows);
        let payload = frame_len - 14 - if src.contains('[') { 40 } else { 20 } - 20;
        for (i, f) in data.iter().enumerate() {
            let s = decode(f);
            let first = isn(&s).wrapping_add(1);
            assert_eq!(s.flags, ACK_PSH, "{s:?}");
            assert_eq!(
                (s.seq, s.ack),
                (
                    first.wrapping_add((i / flows * payload) as u32),
                    isn(&s).wrapping_add(LAB_TCP_ISN_GAP + 1)
                ),
                "segment {i}"
            );
            assert_eq!(s.payload.len(), payload);
            let a = answer(f);
            if i < flows {
                let a = decode(&a.expect("the first data is acknowledged"));
                assert_eq!(a.flags, ACK);
                assert_eq!((a.seq, a.ack), (s.ack, s.seq.wrapping_add(payload as u32)));
                assert!(a.payload.is_empty() && a.options.is_empty());
            } else {
                assert!(a.is_none(), "segment {i} needs no answer");
            }
        }
        // A run that goes on where the last left off; one crossing a MiB
        // of the connection's data is acknowledged.
        let mib = 1u32 << 20;
        let on = sample(&opts(src, dst, len, TcpPhase::Data, mib - 2), 1);
        let s = decode(&on[0]);
        assert_eq!(s.seq, isn(&s).wrapping_add(1 + mib - 2));
        let a = decode(&answer(&on[0]).expect("crossing a MiB"));
        assert_eq!(a.ack, s.seq.wrapping_add(payload as u32));
        // FIN after the data, answered FIN|ACK; the last ACK after it.
        let sent = 5000;
        let fin_frame = &sample(&opts(src, dst, len, TcpPhase::Fin, sent), 1)[0];
        let fin = decode(fin_frame);
        assert_eq!(fin.flags, FIN_ACK);
        assert_eq!(fin.seq, isn(&fin).wrapping_add(1 + sent));
        assert!(fin.payload.is_empty());
        let a = decode(&answer(fin_frame).expect("a FIN is answered"));
        assert_eq!(a.flags, FIN_ACK);
        assert_eq!((a.seq, a.ack), (fin.ack, fin.seq.wrapping_add(1)));
        let last = &sample(&opts(src, dst, len, TcpPhase::LastAck, sent), 1)[0];
        let l = decode(last);
        assert_eq!(l.flags, ACK);
        assert_eq!((l.seq, l.ack), (a.ack, a.seq.wrapping_add(1)));
        assert!(answer(last).is_none(), "the last ACK needs no answer");
    }
}

/// IMIX: each segment its size's payload, the sequence advancing by the
/// largest each pass (a shorter segment leaves a gap); the stamp in the
/// payload of segments long enough.
#[test]
#[cfg_attr(
    not(feature = "privileged"),
    ignore = "needs root: --features privileged"
)]
fn imix_segments_advance_by_the_largest_payload() {
    let o = opts("198.18.10.1:2000-2002", DST_V4, "imix", TcpPhase::Data, 0);
    let frames = sample(&o, 36);
    let first: Vec<u32> = frames[..3].iter().map(|f| decode(f).seq).collect();
    for (i, f) in frames.iter().enumerate() {
        let s = decode(f);
        assert_eq!(
            s.seq,
            first[i % 3].wrapping_add((i / 3 * 1460) as u32),
            "frame {i}"
        );
        let stamped = s.payload.len() >= 12;
        assert_eq!(stamped, s.payload.starts_with(&[0x4c, 0x52]), "frame {i}");
    }
}

/// A 60-byte data segment after a SYN in the same page: what the SYN's
/// options left in the payload is zeroed (the checksum counts it).
#[test]
#[cfg_attr(
    not(feature = "privileged"),
    ignore = "needs root: --features privileged"
)]
fn a_data_segment_clears_what_a_syn_left() {
    let syn = sample(&opts(SRC_V4, DST_V4, "60", TcpPhase::Syn, 0), 1).remove(0);
    let g = Generator::new(&opts(SRC_V4, DST_V4, "60", TcpPhase::Data, 0)).unwrap();
    let mut dirty = syn.clone();
    dirty.resize(60, 0xee);
    let f = g.sample_from(&dirty, 1).unwrap().remove(0);
    let s = decode(&f);
    assert_eq!(s.payload, [0; 6]);
}

/// Options refused before anything is loaded, naming the field.
#[test]
fn tcp_options_are_checked() {
    let mut o = opts(SRC_V4, DST_V4, "60", TcpPhase::Data, 0);
    o.random_dst = true;
    assert_eq!(o.check().unwrap_err().field, "random_dst");
    let mut o = opts(SRC_V4, DST_V4, "60", TcpPhase::Data, 0);
    o.cpus = vec![0, 1, 2, 3];
    let e = o.check().unwrap_err();
    assert!(
        e.field == "src" && e.reason.contains("3 source ports for 4 sending CPUs"),
        "{e}"
    );
    let mut o = opts(SRC_V4, DST_V4, "60", TcpPhase::Data, 0);
    o.mode = Mode::Afpacket;
    assert_eq!(o.check().unwrap_err().field, "tcp");
    let mut o = opts(SRC_V4, DST_V4, "60", TcpPhase::Data, 0);
    o.tcp = None;
    assert_eq!(o.check().unwrap_err().field, "tcp");
    let v6 = FrameSpec {
        sizes: SizeMix::parse("62", true).unwrap(),
        ..opts(SRC_V6, DST_V6, "100", TcpPhase::Data, 0).frame
    };
    let e = v6.validate().unwrap_err().to_string();
    assert!(e.contains("IPv6 TCP headers (74 bytes)"), "{e}");
}

/// Churn: every frame a step of a short connection, connection n's step k
/// in round n + k * lag (nothing of a connection the run never opened),
/// each connection its flow (n modulo the flows) and, as its tuple comes
/// back, another initial sequence; each step's segment what the phase's
/// would be, and the receiver answering SYN, the first data and FIN.
#[test]
#[cfg_attr(
    not(feature = "privileged"),
    ignore = "needs root: --features privileged"
)]
fn churned_connections_step_through_their_lives_lag_rounds_apart() {
    let (segments, lag, flows) = (2u32, 2u64, 6u64);
    let steps = segments as u64 + 3;
    let mut o = opts(SRC_V4, DST_V4, "60", TcpPhase::Churn, 10);
    o.tcp = Some(TcpRun {
        phase: TcpPhase::Churn,
        from: 10,
        segments,
        lag: lag as u32,
    });
    // Connection n (from 10 on) and step k of each frame sent, in order.
    let mut expect = Vec::new();
    for round in 0..20u64 {
        for k in 0..steps {
            if round >= k * lag {
                expect.push((10 + round - k * lag, k));
            }
        }
    }
    let frames = sample(&o, expect.len());
    let mut answered = [0usize; 5];
    for (f, &(n, k)) in frames.iter().zip(&expect) {
        let s = decode(f);
        let flow = n % flows;
        assert_eq!(
            (
                s.sport,
                low32(s.src) - low32("198.18.10.1".parse().unwrap())
            ),
            (2000 + (flow % 3) as u16, (flow / 3) as u32),
            "connection {n} step {k}"
        );
        let isn = isn(&s).wrapping_add((n / flows) as u32 * 0x0100_0193);
        let peer = isn.wrapping_add(LAB_TCP_ISN_GAP + 1);
        let data_end = isn.wrapping_add(1 + segments * 6);
        let (flags, seq, ack) = match k {
            0 => (SYN, isn, 0),
            1 | 2 => (ACK_PSH, isn.wrapping_add(1 + (k as u32 - 1) * 6), peer),
            3 => (FIN_ACK, data_end, peer),
            _ => (ACK, data_end.wrapping_add(1), peer.wrapping_add(1)),
        };
        assert_eq!(
            (s.flags, s.seq, s.ack),
            (flags, seq, ack),
            "connection {n} step {k}"
        );
        let a = answer(f).map(|a| decode(&a));
        match k {
            0 => assert_eq!(a.unwrap().ack, isn.wrapping_add(1)),
            1 => assert_eq!(a.unwrap().ack, seq.wrapping_add(6)),
            3 => assert_eq!(a.unwrap().ack, data_end.wrapping_add(1)),
            _ => assert!(a.is_none(), "connection {n} step {k}"),
        }
        answered[k as usize] += 1;
    }
    // Twenty rounds: twenty SYNs, the last ACK of the first twelve.
    assert_eq!(answered, [20, 18, 16, 14, 12]);
}
