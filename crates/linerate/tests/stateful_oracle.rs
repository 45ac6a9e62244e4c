//! The stateful firewall is the kernel's, byte for byte: one
//! script of frames from both sides (UDP conversations over IPv4 and IPv6
//! that become established and assured and go on, a new connection
//! opened from the outside, UDP datagrams conntrack finds invalid (a bad
//! checksum, a length past the packet) or valid only by its rules (no
//! checksum, a length short of the packet), ICMP errors about a
//! connection and about none, TCP over IPv4 and IPv6 (handshakes, data
//! in and out of the window, closes and a reset, segments after them), a connection deleted from the
//! kernel's table and its packets after) sent through two labs under the
//! same stateful ruleset: the kernel alone, and linerate's router. What
//! arrives at either end must be the same frames, and linerate must have
//! carried the established part itself. Needs root.
mod common;
use common::lab;
use common::script::{self, eth, only, pause, Side, Step};

const KERNEL: &str = "lrt-cto";
const ROUTED: &str = "lrt-ctr";
/// Beyond the lab's connected networks: routed through its gateways.
const C4: [u8; 4] = [198, 18, 1, 1];
const S4: [u8; 4] = [198, 19, 1, 1];
const C6: [u8; 16] = [0x20, 1, 0, 2, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 1];
const S6: [u8; 16] = [0x20, 1, 0, 2, 0, 0, 0x80, 1, 0, 0, 0, 0, 0, 0, 0, 1];

/// The ends of a frame from `side`: the client's inside, the server's
/// outside.
fn ends4(side: Side) -> ([u8; 4], [u8; 4]) {
    match side {
        Side::Gen => (C4, S4),
        Side::Recv => (S4, C4),
    }
}

fn ends6(side: Side) -> ([u8; 16], [u8; 16]) {
    match side {
        Side::Gen => (C6, S6),
        Side::Recv => (S6, C6),
    }
}

fn body(tag: u32, len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| (tag as usize * 31 + i * 7) as u8)
        .collect()
}

fn udp4(side: Side, sport: u16, dport: u16, tag: u32, len: usize) -> Vec<u8> {
    let (s, d) = ends4(side);
    let mut f = Vec::new();
    eth(side)
        .ipv4(s, d, 64)
        .udp(sport, dport)
        .write(&mut f, &body(tag, len))
        .unwrap();
    f
}

fn udp6(side: Side, sport: u16, dport: u16, tag: u32, len: usize) -> Vec<u8> {
    let (s, d) = ends6(side);
    let mut f = Vec::new();
    eth(side)
        .ipv6(s, d, 64)
        .udp(sport, dport)
        .write(&mut f, &body(tag, len))
        .unwrap();
    f
}

#[allow(clippy::too_many_arguments)]
fn tcp4(
    side: Side,
    sport: u16,
    dport: u16,
    seq: u32,
    ack: Option<u32>,
    flags: &str,
    len: usize,
) -> Vec<u8> {
    let (s, d) = ends4(side);
    tcp(eth(side).ipv4(s, d, 64), sport, dport, seq, ack, flags, len)
}

fn tcp6(
    side: Side,
    sport: u16,
    dport: u16,
    seq: u32,
    ack: Option<u32>,
    flags: &str,
    len: usize,
) -> Vec<u8> {
    let (s, d) = ends6(side);
    tcp(eth(side).ipv6(s, d, 64), sport, dport, seq, ack, flags, len)
}

/// A TCP segment after the IP layer `ip`: its flags by letter (S syn, R
/// rst, F fin, P or p psh, U urg; ack with `ack`).
fn tcp(
    ip: etherparse::PacketBuilderStep<etherparse::IpHeaders>,
    sport: u16,
    dport: u16,
    seq: u32,
    ack: Option<u32>,
    flags: &str,
    len: usize,
) -> Vec<u8> {
    let mut b = ip.tcp(sport, dport, seq, 64240);
    if let Some(a) = ack {
        b = b.ack(a);
    }
    for f in flags.chars() {
        b = match f {
            'S' => b.syn(),
            'R' => b.rst(),
            'F' => b.fin(),
            'P' | 'p' => b.psh(),
            'U' => b.urg(0),
            _ => b,
        };
    }
    let mut f = Vec::new();
    b.write(&mut f, &body(seq, len)).unwrap();
    f
}

/// The ones'-complement sum of `b` (16-bit big-endian words).
fn sum16(b: &[u8], mut s: u32) -> u32 {
    for c in b.chunks(2) {
        s += u32::from(c[0]) << 8 | u32::from(*c.get(1).unwrap_or(&0));
    }
    s
}

fn fold(mut s: u32) -> u16 {
    while s >> 16 != 0 {
        s = (s & 0xffff) + (s >> 16);
    }
    s as u16
}

/// An IPv4 UDP frame whose UDP length says `ulen` of the `len` payload
/// bytes the IP packet carries, its checksum as conntrack checks one
/// (over the whole IP payload, the pseudo-header with its length).
fn udp4_length(side: Side, tag: u32, len: usize, ulen: u16) -> Vec<u8> {
    let mut f = udp4(side, 5000, 53, tag, len);
    f[38..40].copy_from_slice(&ulen.to_be_bytes());
    f[40..42].copy_from_slice(&[0, 0]);
    let ip_payload = (f.len() - 34) as u32;
    let mut s = sum16(&f[26..34], 0);
    s += 17 + ip_payload;
    s = sum16(&f[34..], s);
    let c = !fold(s);
    f[40..42].copy_from_slice(&(if c == 0 { 0xffff } else { c }).to_be_bytes());
    f
}

/// An ICMP port unreachable from the outside about `about` (an IPv4
/// frame from the inside, as the outside received it: TTL one less).
fn unreachable4(about: &[u8]) -> Vec<u8> {
    let mut inner = about[14..14 + 28].to_vec();
    inner[8] -= 1;
    inner[10..12].copy_from_slice(&[0, 0]);
    let c = !fold(sum16(&inner[..20], 0));
    inner[10..12].copy_from_slice(&c.to_be_bytes());
    let (s, d) = ends4(Side::Recv);
    let mut f = Vec::new();
    eth(Side::Recv)
        .ipv4(s, d, 64)
        .icmpv4(etherparse::Icmpv4Type::DestinationUnreachable(
            etherparse::icmpv4::DestUnreachableHeader::Port,
        ))
        .write(&mut f, &inner)
        .unwrap();
    f
}

/// The script: UDP client 198.18.1.1:5000 and [2001:2:0:1::1]:5000 on the
/// inside, server port 53 on the outside; TCP 6000 -> 80.
fn script() -> Vec<Step> {
    use Side::*;
    let mut s = Vec::new();
    let send = |s: &mut Vec<Step>, side, f| s.push(Step::Send(side, f));
    // New from the inside, answered: established, young.
    send(&mut s, Gen, udp4(Gen, 5000, 53, 1, 18));
    send(&mut s, Recv, udp4(Recv, 53, 5000, 2, 40));
    send(&mut s, Gen, udp4(Gen, 5000, 53, 3, 100));
    send(&mut s, Gen, udp6(Gen, 5000, 53, 4, 18));
    send(&mut s, Recv, udp6(Recv, 53, 5000, 5, 60));
    // New from the outside: dropped.
    send(&mut s, Recv, udp4(Recv, 53, 5001, 6, 18));
    send(&mut s, Recv, udp6(Recv, 53, 5001, 7, 18));
    // TCP: handshake, data, an answer.
    send(&mut s, Gen, tcp4(Gen, 6000, 80, 1000, None, "S", 0));
    send(&mut s, Recv, tcp4(Recv, 80, 6000, 5000, Some(1001), "S", 0));
    send(&mut s, Gen, tcp4(Gen, 6000, 80, 1001, Some(5001), "", 0));
    send(&mut s, Gen, tcp4(Gen, 6000, 80, 1001, Some(5001), "P", 100));
    send(&mut s, Recv, tcp4(Recv, 80, 6000, 5001, Some(1101), "", 0));
    // Out of the window.
    send(
        &mut s,
        Gen,
        tcp4(Gen, 6000, 80, 1101 + 3_000_000, Some(5001), "P", 100),
    );
    // Past two seconds the UDP connections become assured on their next
    // packet; then the fast path may carry them.
    s.push(pause(2300));
    for i in 0..12u32 {
        send(
            &mut s,
            Gen,
            udp4(Gen, 5000, 53, 100 + i, 18 + 97 * i as usize),
        );
        send(
            &mut s,
            Recv,
            udp4(Recv, 53, 5000, 200 + i, 30 + 61 * i as usize),
        );
        send(
            &mut s,
            Gen,
            udp6(Gen, 5000, 53, 300 + i, 18 + 89 * i as usize),
        );
        send(
            &mut s,
            Recv,
            udp6(Recv, 53, 5000, 400 + i, 30 + 53 * i as usize),
        );
    }
    // TCP, established: data both ways, an urgent segment, one far out of
    // the window (invalid with windows checked, through without), flags
    // conntrack does not list (none; PSH alone), a bad checksum.
    for i in 0..6u32 {
        send(
            &mut s,
            Gen,
            tcp4(Gen, 6000, 80, 1101 + 100 * i, Some(5021), "P", 100),
        );
        send(
            &mut s,
            Recv,
            tcp4(Recv, 80, 6000, 5001 + 20 * i, Some(1201 + 100 * i), "", 20),
        );
    }
    for i in 0..3u32 {
        send(
            &mut s,
            Gen,
            tcp6(Gen, 6000, 80, 101 + 200 * i, Some(901), "P", 200),
        );
        send(
            &mut s,
            Recv,
            tcp6(Recv, 80, 6000, 901, Some(301 + 200 * i), "", 0),
        );
    }
    send(&mut s, Gen, tcp6(Gen, 6000, 80, 701, Some(901), "F", 0));
    send(&mut s, Recv, tcp6(Recv, 80, 6000, 901, Some(702), "P", 40));
    send(&mut s, Gen, tcp4(Gen, 6000, 80, 1701, Some(5121), "U", 10));
    send(
        &mut s,
        Recv,
        tcp4(Recv, 80, 6000, 5121 + 5_000_000, Some(1711), "P", 30),
    );
    send(&mut s, Gen, tcp4(Gen, 6000, 80, 1711, None, "", 10));
    send(&mut s, Gen, tcp4(Gen, 6000, 80, 1711, None, "p", 10));
    let mut bad = tcp4(Gen, 6000, 80, 1711, Some(5121), "P", 10);
    bad[50] ^= 0x20;
    send(&mut s, Gen, bad);
    // Invalid: a bad checksum either way, a UDP length past the packet.
    let mut bad = udp4(Gen, 5000, 53, 500, 50);
    bad[41] ^= 0x5a;
    send(&mut s, Gen, bad);
    let mut bad = udp4(Recv, 53, 5000, 501, 50);
    bad[40] ^= 0x11;
    send(&mut s, Recv, bad);
    // (Short ones too: the fast path sums up to 40 bytes inline.)
    let mut bad = udp4(Gen, 5000, 53, 508, 17);
    bad[42] ^= 0x01;
    send(&mut s, Gen, bad);
    let mut bad = udp4(Recv, 53, 5000, 509, 31);
    bad[41] ^= 0x80;
    send(&mut s, Recv, bad);
    let mut bad6 = udp6(Gen, 5000, 53, 502, 50);
    bad6[61] ^= 0x33;
    send(&mut s, Gen, bad6);
    send(&mut s, Gen, udp4_length(Gen, 503, 40, 60));
    // Valid by conntrack's rules: a length short of the packet (the
    // checksum over all of it), no checksum at all.
    send(&mut s, Gen, udp4_length(Gen, 504, 40, 20));
    let mut none = udp4(Gen, 5000, 53, 505, 33);
    none[40..42].copy_from_slice(&[0, 0]);
    send(&mut s, Gen, none);
    // ICMP errors: about the connection (related), about none (invalid).
    send(&mut s, Recv, unreachable4(&udp4(Gen, 5000, 53, 506, 18)));
    send(&mut s, Recv, unreachable4(&udp4(Gen, 5002, 53, 507, 18)));
    // TCP: a reset, a segment after it.
    send(&mut s, Gen, tcp4(Gen, 6000, 80, 1101, Some(5001), "R", 0));
    send(
        &mut s,
        Recv,
        tcp4(Recv, 80, 6000, 5001, Some(1101), "P", 20),
    );
    // The IPv4 connection deleted from the kernel's table: from the
    // outside it is new (dropped), from the inside new again (through).
    s.push(Step::Conntrack(
        "-D -p udp --orig-port-src 5000 --orig-port-dst 53 -f ipv4"
            .split(' ')
            .map(str::to_string)
            .collect(),
    ));
    s.push(pause(300));
    send(&mut s, Recv, udp4(Recv, 53, 5000, 600, 18));
    send(&mut s, Gen, udp4(Gen, 5000, 53, 601, 18));
    send(&mut s, Recv, udp4(Recv, 53, 5000, 602, 18));
    // The IPv6 one goes on.
    send(&mut s, Recv, udp6(Recv, 53, 5000, 603, 18));
    send(&mut s, Gen, udp6(Gen, 5000, 53, 604, 18));
    s
}

fn set_up(lab: &'static str, liberal: bool) -> lab::Down {
    script::set_up(
        lab,
        &linerate_firewall::seeds::stateful_strict("dut0"),
        liberal,
    )
}

/// The script through the kernel alone and through linerate, TCP windows
/// checked or not (`liberal`): the same frames arrive. What linerate
/// carried itself: (UDP and TCP frames, invalid ones passed).
fn differential(liberal: bool) -> (u64, u64, u64) {
    let _k = set_up(KERNEL, liberal);
    let kernel = script::run(KERNEL, script());
    let _r = set_up(ROUTED, liberal);
    let _router = lab::start_router(ROUTED);
    lab::wait_for_firewall(ROUTED, 1);
    let carried0 = lab::router_counted(ROUTED, "forwarded");
    let routed = script::run(ROUTED, script());
    let carried = lab::router_counted(ROUTED, "forwarded") - carried0;
    let invalid = lab::router_counted(ROUTED, "pass_ct_invalid");
    let window = lab::router_counted(ROUTED, "pass_ct_window");
    assert!(
        kernel == routed,
        "TCP windows {}: the kernel alone delivered, linerate did not:\n{}\nlinerate delivered, the kernel alone did not:\n{}",
        if liberal { "unchecked" } else { "checked" },
        only(&kernel, &routed).join("\n"),
        only(&routed, &kernel).join("\n")
    );
    let delivered: usize = kernel.values().sum();
    eprintln!(
        "TCP windows {}: {delivered} frames delivered alike; the fast path carried {carried}, passed {invalid} invalid and {window} of TCP with windows checked to the kernel",
        if liberal { "unchecked" } else { "checked" }
    );
    (carried, invalid, window)
}

#[test]
#[cfg_attr(
    not(feature = "privileged"),
    ignore = "needs root: --features privileged"
)]
fn the_stateful_firewall_delivers_and_drops_what_the_kernel_does() {
    // The established UDP conversations past two seconds: 48 frames; the
    // established TCP segments: 15 more, carried only with windows
    // unchecked.
    let (carried, invalid, window) = differential(false);
    assert!(carried >= 46, "the fast path carried {carried}");
    assert!(invalid >= 6 && window >= 10, "{invalid} {window}");
    let (carried, _, window) = differential(true);
    assert!(carried >= 46 + 12, "the fast path carried {carried}");
    assert_eq!(window, 0);
}
