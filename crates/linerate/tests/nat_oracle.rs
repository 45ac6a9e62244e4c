//! NAT is the kernel's, byte for byte: one script of frames from both
//! sides of a DUT that masquerades what leaves through dut1, SNATs one
//! inside host to another address, and forwards ports of its outside
//! address to an inside server (DNAT, IPv4 and IPv6; one of them SNAT'd
//! inside too, both ends rewritten each way), under a stateful
//! forward chain: UDP conversations that become established and assured
//! and go on (one with checksum 0), TCP connections opened, carrying data
//! both ways and closed or reset, an ICMP error about a masqueraded
//! datagram, a hairpin (an inside host to the outside address's forwarded
//! port), a redirect to the router itself. Sent through two labs: the kernel alone, and linerate's router.
//! What arrives at either end must be the same frames (addresses, ports
//! and checksums as the kernel rewrites them), and linerate must have
//! carried the established part itself. Needs root.
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

mod common;
use common::lab;
use common::script::{self, eth, only, pause, Side, Step};

const KERNEL: &str = "lrt-nato";
const ROUTED: &str = "lrt-natr";

/// Inside hosts (behind dut0), the outside server and client (behind
/// dut1), the DUT's outside address and the SNAT address.
const C1: Ipv4Addr = Ipv4Addr::new(198, 18, 1, 1);
const C2: Ipv4Addr = Ipv4Addr::new(198, 18, 1, 2);
const INNER: Ipv4Addr = Ipv4Addr::new(198, 18, 1, 9);
const SERVER: Ipv4Addr = Ipv4Addr::new(198, 19, 1, 1);
const OUTER: Ipv4Addr = Ipv4Addr::new(198, 19, 1, 7);
const PUBLIC: Ipv4Addr = Ipv4Addr::new(198, 19, 0, 254);
const SNAT_TO: Ipv4Addr = Ipv4Addr::new(198, 19, 0, 253);
/// Where a port forward's clients appear to come from inside (DNAT and
/// SNAT on one connection).
const SNAT_IN: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 250);

fn v6(last: u16, outside: bool) -> Ipv6Addr {
    Ipv6Addr::new(
        0x2001,
        2,
        0,
        if outside { 0x8001 } else { 1 },
        0,
        0,
        0,
        last,
    )
}
const PUBLIC6: Ipv6Addr = Ipv6Addr::new(0x2001, 2, 0, 0x8000, 0, 0, 0, 0x254);

fn ruleset() -> String {
    format!(
        "table inet edge {{
  chain forward {{
    type filter hook forward priority 0; policy drop;
    ct state established,related accept
    ct state invalid drop
    iifname \"dut0\" ct state new accept
    iifname \"dut1\" ip daddr {INNER} ct state new accept
    iifname \"dut1\" ip6 daddr {inner6} ct state new accept
  }}
  chain prerouting {{
    type nat hook prerouting priority dstnat; policy accept;
    iifname \"dut1\" ip daddr {PUBLIC} tcp dport 8080 dnat ip to {INNER}:80
    iifname \"dut1\" ip daddr {PUBLIC} udp dport 5353 dnat ip to {INNER}:53
    iifname \"dut0\" ip daddr {PUBLIC} udp dport 5353 dnat ip to {INNER}:53
    iifname \"dut1\" ip daddr {PUBLIC} udp dport 5454 dnat ip to {INNER}:54
    iifname \"dut1\" ip6 daddr {PUBLIC6} tcp dport 8080 dnat ip6 to [{inner6}]:80
    iifname \"dut0\" tcp dport 3128 redirect to :8080
  }}
  chain postrouting {{
    type nat hook postrouting priority srcnat; policy accept;
    oifname \"dut1\" ip saddr {C2} snat ip to {SNAT_TO}
    oifname \"dut0\" ip daddr {INNER} udp dport 54 snat ip to {SNAT_IN}:7000
    oifname \"dut1\" masquerade
  }}
}}
",
        inner6 = v6(9, false),
    )
}

fn body(tag: u32, len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| (tag as usize * 31 + i * 7) as u8)
        .collect()
}

/// The IP layer of a frame from `side`, `s` to `d` (one family).
fn ip(side: Side, s: IpAddr, d: IpAddr) -> etherparse::PacketBuilderStep<etherparse::IpHeaders> {
    match (s, d) {
        (IpAddr::V4(s), IpAddr::V4(d)) => eth(side).ipv4(s.octets(), d.octets(), 64),
        (IpAddr::V6(s), IpAddr::V6(d)) => eth(side).ipv6(s.octets(), d.octets(), 64),
        _ => panic!("{s} and {d}: one family"),
    }
}

fn udp(side: Side, s: (IpAddr, u16), d: (IpAddr, u16), tag: u32) -> Step {
    let mut f = Vec::new();
    ip(side, s.0, d.0)
        .udp(s.1, d.1)
        .write(&mut f, &body(tag, 24 + (tag as usize % 40)))
        .unwrap();
    Step::Send(side, f)
}

/// A TCP segment: flags by letter (S syn, A ack, F fin, R rst, P psh).
fn tcp(
    side: Side,
    s: (IpAddr, u16),
    d: (IpAddr, u16),
    seq: u32,
    ack: u32,
    flags: &str,
    len: usize,
) -> Step {
    let mut b = ip(side, s.0, d.0).tcp(s.1, d.1, seq, 64240);
    for f in flags.chars() {
        b = match f {
            'S' => b.syn(),
            'A' => b.ack(ack),
            'F' => b.fin(),
            'R' => b.rst(),
            'P' => b.psh(),
            _ => b,
        };
    }
    let mut f = Vec::new();
    b.write(&mut f, &body(seq, len)).unwrap();
    Step::Send(side, f)
}

/// A TCP connection from `client` (on `cside`) to `server` (on the other
/// side) as the ends see it, `to` where the client sends (the server's
/// address, or the public one it is forwarded from) and `from` where the
/// server's replies go (the client's, or its NAT address): handshake,
/// data both ways, then a close (FIN both ways) or a reset.
#[allow(clippy::too_many_arguments)]
fn tcp_connection(
    s: &mut Vec<Step>,
    cside: Side,
    client: (IpAddr, u16),
    to: (IpAddr, u16),
    from: (IpAddr, u16),
    server: (IpAddr, u16),
    reset: bool,
) {
    let sside = if cside == Side::Gen {
        Side::Recv
    } else {
        Side::Gen
    };
    let (mut c, mut v) = (1000u32, 5000u32);
    s.push(tcp(cside, client, to, c, 0, "S", 0));
    s.push(tcp(sside, server, from, v, c + 1, "SA", 0));
    c += 1;
    v += 1;
    s.push(tcp(cside, client, to, c, v, "A", 0));
    for i in 0..4 {
        let len = 100 + i * 300;
        s.push(tcp(cside, client, to, c, v, "PA", len));
        c += len as u32;
        s.push(tcp(sside, server, from, v, c, "A", 0));
        let back = 60 + i * 200;
        s.push(tcp(sside, server, from, v, c, "PA", back));
        v += back as u32;
        s.push(tcp(cside, client, to, c, v, "A", 0));
    }
    if reset {
        s.push(tcp(cside, client, to, c, v, "RA", 0));
    } else {
        s.push(tcp(cside, client, to, c, v, "FA", 0));
        s.push(tcp(sside, server, from, v, c + 1, "FA", 0));
        s.push(tcp(cside, client, to, c + 1, v + 1, "A", 0));
    }
    // Segments after the end, which conntrack judges by the closed state.
    s.push(tcp(cside, client, to, c + 1, v + 1, "PA", 10));
}

/// An ICMP port unreachable from the outside server about `about` (a
/// UDP frame as it arrived outside, masqueraded): the kernel's to
/// translate.
fn unreachable(about: &[u8]) -> Step {
    let mut inner = about[14..14 + 28].to_vec();
    let mut f = Vec::new();
    // (Its own checksums as they arrived; the kernel rewrites the inner
    // header's addresses and checksums.)
    inner[8] = inner[8].saturating_sub(0);
    eth(Side::Recv)
        .ipv4(SERVER.octets(), PUBLIC.octets(), 64)
        .icmpv4(etherparse::Icmpv4Type::DestinationUnreachable(
            etherparse::icmpv4::DestUnreachableHeader::Port,
        ))
        .write(&mut f, &inner)
        .unwrap();
    Step::Send(Side::Recv, f)
}

fn script() -> Vec<Step> {
    use Side::{Gen, Recv};
    let a = |a: Ipv4Addr, p: u16| (IpAddr::V4(a), p);
    let a6 = |a: Ipv6Addr, p: u16| (IpAddr::V6(a), p);
    let mut s = Vec::new();
    // UDP: masqueraded (IPv4, IPv6), forwarded in (DNAT), their first
    // exchanges, then past the two seconds that make them assured.
    let flows = [
        (
            Gen,
            a(C1, 5000),
            a(SERVER, 53),
            a(PUBLIC, 5000),
            a(SERVER, 53),
        ),
        (
            Recv,
            a(OUTER, 6001),
            a(PUBLIC, 5353),
            a(OUTER, 6001),
            a(INNER, 53),
        ),
        (
            Gen,
            a6(v6(1, false), 5000),
            a6(v6(1, true), 53),
            a6(PUBLIC6, 5000),
            a6(v6(1, true), 53),
        ),
        // Forwarded in and SNAT'd too: both ends rewritten each way.
        (
            Recv,
            a(OUTER, 6002),
            a(PUBLIC, 5454),
            a(SNAT_IN, 7000),
            a(INNER, 54),
        ),
    ];
    let exchange = |s: &mut Vec<Step>, tag: u32| {
        for (i, &(side, client, to, from, server)) in flows.iter().enumerate() {
            let back = if side == Gen { Recv } else { Gen };
            s.push(udp(side, client, to, tag * 10 + i as u32));
            s.push(udp(back, server, from, tag * 10 + 5 + i as u32));
        }
    };
    exchange(&mut s, 1);
    s.push(pause(2100));
    for tag in 2..6 {
        exchange(&mut s, tag);
    }
    // A datagram without a checksum (IPv4 allows it): masqueraded, it
    // keeps none.
    if let Step::Send(side, mut f) = udp(Gen, a(C1, 5000), a(SERVER, 53), 77) {
        f[40..42].copy_from_slice(&[0, 0]);
        s.push(Step::Send(side, f));
    }
    // An error about a masqueraded datagram, as the server got it.
    let mut outside = Vec::new();
    eth(Recv)
        .ipv4(PUBLIC.octets(), SERVER.octets(), 63)
        .udp(5000, 53)
        .write(&mut outside, &body(88, 30))
        .unwrap();
    s.push(unreachable(&outside));
    // A hairpin: an inside host to the forwarded port of the outside
    // address, which sends it back in.
    s.push(udp(Gen, a(C1, 5002), a(PUBLIC, 5353), 99));
    // Redirected to the router itself (a transparent proxy's rule), where
    // nothing listens: the kernel's, which resets it.
    s.push(tcp(Gen, a(C1, 5003), a(SERVER, 3128), 1, 0, "S", 0));
    // TCP: SNAT'd to another address and closed; forwarded in (IPv4 and
    // IPv6) and reset.
    tcp_connection(
        &mut s,
        Gen,
        a(C2, 40000),
        a(SERVER, 80),
        a(SNAT_TO, 40000),
        a(SERVER, 80),
        false,
    );
    tcp_connection(
        &mut s,
        Recv,
        a(OUTER, 6000),
        a(PUBLIC, 8080),
        a(OUTER, 6000),
        a(INNER, 80),
        true,
    );
    tcp_connection(
        &mut s,
        Recv,
        a6(v6(7, true), 6000),
        a6(PUBLIC6, 8080),
        a6(v6(7, true), 6000),
        a6(v6(9, false), 80),
        true,
    );
    // Masqueraded TCP over IPv6, closed.
    tcp_connection(
        &mut s,
        Gen,
        a6(v6(1, false), 41000),
        a6(v6(1, true), 80),
        a6(PUBLIC6, 41000),
        a6(v6(1, true), 80),
        false,
    );
    s
}

#[test]
#[cfg_attr(
    not(feature = "privileged"),
    ignore = "needs root: --features privileged"
)]
fn nat_delivers_what_the_kernel_does_byte_for_byte() {
    // TCP windows unchecked: the established segments are the fast
    // path's to carry (with them checked, `--carry-tcp` would carry them
    // once marked, which takes a moment the script does not wait for).
    let _k = script::set_up(KERNEL, &ruleset(), true);
    let kernel = script::run(KERNEL, script());
    let _r = script::set_up(ROUTED, &ruleset(), true);
    let _router = lab::start_router(ROUTED);
    // (The forward chain and both nat chains, each family.)
    lab::wait_for_firewall(ROUTED, 3);
    let carried0 = lab::router_counted(ROUTED, "forwarded");
    let routed = script::run(ROUTED, script());
    let carried = lab::router_counted(ROUTED, "forwarded") - carried0;
    assert!(
        kernel == routed,
        "the kernel alone delivered, linerate did not:\n{}\nlinerate delivered, the kernel alone did not:\n{}",
        only(&kernel, &routed).join("\n"),
        only(&routed, &kernel).join("\n")
    );
    let delivered: usize = kernel.values().sum();
    eprintln!(
        "{delivered} frames delivered alike; the fast path carried {carried}, mapped as the kernel's entries say"
    );
    // The established UDP exchanges (4 rounds of 3 flows both ways, the
    // datagram without a checksum) and TCP's established segments (the
    // data and acknowledgements of four connections).
    assert!(
        carried >= 24 + 1 + 4 * 12,
        "the fast path carried {carried}"
    );
}
