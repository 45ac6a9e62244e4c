//! The fast path changes nothing but speed: a corpus of frames (valid IPv4
//! and IPv6 of several sizes, TTL/hop limit 0-2, IPv4 options, a bad header
//! checksum, a truncated header, a fragment, non-IP, broadcast and
//! multicast, to the DUT itself, unrouted, to a neighbour not resolved yet,
//! to a host on a connected network (and its errors back to another),
//! IPv6 hop-by-hop, oversize for the egress MTU with and without DF, bytes
//! after the IP packet: padding, trailers, short length fields) goes
//! out of gen0 once with the kernel forwarding alone and once with
//! `linerate route` attached. What arrives at recv0 and what comes back to
//! gen0 (ICMP errors included) must be the same frames, byte for byte. Not
//! compared: the kernels' own ARP, ND and MLD; the IPv4 ID and header
//! checksum of packets the DUT or the receiver originates (a
//! per-destination counter).
//! Needs root.
use etherparse::PacketBuilder;
use linerate_host::cmd::ip;
use linerate_testkit::frames;
use serde_json::Value;
use std::collections::BTreeMap;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

mod common;
use common::frames::{send, Seen};

const BIN: &str = env!("CARGO_BIN_EXE_linerate");
const LAB: &str = "lrt-diff";
const GEN: [u8; 6] = [2, 0, 0, 0, 0, 1];
const DUT_IN: [u8; 6] = [2, 0, 0, 0, 0, 2];

fn linerate(args: &[&str]) -> std::process::Output {
    Command::new(BIN).args(args).output().unwrap()
}

struct Down(&'static str);
impl Drop for Down {
    fn drop(&mut self) {
        let _ = linerate(&["lab", "down", "--name", self.0]);
    }
}

fn udp4(dst: [u8; 4], ttl: u8, payload: usize, dst_mac: [u8; 6]) -> Vec<u8> {
    let mut f = Vec::new();
    PacketBuilder::ethernet2(GEN, dst_mac)
        .ipv4([198, 18, 0, 1], dst, ttl)
        .udp(4000, 5000)
        .write(&mut f, &vec![0x33; payload])
        .unwrap();
    f
}

fn udp6(dst: &str, hops: u8, payload: usize) -> Vec<u8> {
    let mut f = Vec::new();
    let d: std::net::Ipv6Addr = dst.parse().unwrap();
    let s: std::net::Ipv6Addr = "2001:2::1".parse().unwrap();
    PacketBuilder::ethernet2(GEN, DUT_IN)
        .ipv6(s.octets(), d.octets(), hops)
        .udp(4000, 5000)
        .write(&mut f, &vec![0x44; payload])
        .unwrap();
    f
}

fn corpus() -> Vec<Vec<u8>> {
    let to = [198, 19, 10, 1];
    let mut c = vec![
        udp4(to, 64, 18, DUT_IN),
        udp4(to, 64, 200, DUT_IN),
        udp4(to, 64, 900, DUT_IN),
        udp4(to, 2, 18, DUT_IN),
        udp4(to, 1, 18, DUT_IN),
        udp4(to, 0, 18, DUT_IN),
        udp4(to, 64, 18, [0xff; 6]),
        udp4([224, 0, 0, 251], 64, 18, DUT_IN),
        udp4([198, 18, 0, 254], 64, 18, DUT_IN), // the DUT itself: port unreachable
        udp4([10, 9, 9, 9], 64, 18, DUT_IN),     // unrouted: net unreachable
        udp4([198, 19, 0, 77], 64, 18, DUT_IN),  // connected, no neighbour
        udp4([198, 19, 0, 1], 64, 18, DUT_IN),   // a connected host: the receiver
        udp4(to, 64, 1350, DUT_IN),              // over dut1's MTU (1300), as etherparse sets DF
    ];
    // Without DF: the kernel fragments.
    let mut nodf = udp4(to, 64, 1350, DUT_IN);
    frames::edit_ipv4(&mut nodf, |h| h.dont_fragment = false);
    c.push(nodf);
    let mut df = udp4(to, 64, 1350, DUT_IN);
    frames::edit_ipv4(&mut df, |h| h.dont_fragment = true);
    c.push(df);
    let mut options = udp4(to, 64, 18, DUT_IN);
    frames::add_ipv4_options(&mut options, &[1, 1, 1, 0]);
    c.push(options);
    let mut bad = udp4(to, 64, 18, DUT_IN);
    frames::spoil_ipv4_checksum(&mut bad, 0x5a);
    c.push(bad);
    let mut frag = udp4(to, 64, 18, DUT_IN);
    frames::edit_ipv4(&mut frag, |h| {
        h.dont_fragment = false;
        h.more_fragments = true;
    });
    c.push(frag);
    let mut trunc = udp4(to, 64, 18, DUT_IN);
    frames::edit_ipv4(&mut trunc, |h| h.total_len = 300);
    c.push(trunc);
    let mut non_ip = udp4(to, 64, 18, DUT_IN);
    frames::set_ethertype(&mut non_ip, 0x88b5);
    c.push(non_ip);
    // IPv6 transit goes beyond the receiver's /64, through its /49 route.
    c.extend([
        udp6("2001:2:0:8001::10:1", 64, 18),
        udp6("2001:2:0:8001::10:1", 64, 600),
        udp6("2001:2:0:8001::10:1", 2, 18),
        udp6("2001:2:0:8001::10:1", 1, 18),
        udp6("2001:2:0:8001::10:1", 64, 1300), // over the MTU: packet too big
        udp6("2001:2:0:8000::77", 64, 18),     // connected, no neighbour
        udp6("2001:2:0:8000::1", 64, 18),      // a connected host: the receiver
        udp6("2001:2::254", 64, 18),
        udp6("2001:db8::1", 64, 18),
        udp6("fe80::1", 64, 18),
        udp6("ff02::1", 64, 18),
    ]);
    let mut hbh = udp6("2001:2:0:8001::10:1", 64, 18);
    // Hop-by-hop header (8 bytes: next UDP, len 0, PadN 4) before UDP.
    frames::add_ipv6_hop_by_hop(&mut hbh);
    c.push(hbh);
    c.extend(beyond_the_ip_packet());
    c
}

/// Frames with bytes after their IP packet (Ethernet padding, zero or
/// not, and trailers of several sizes), IP length fields shorter than the
/// frame, an IPv6 payload length of 0 without a jumbo option, and packets
/// at dut1's MTU (1300) carried in frames longer than MTU + 14. The kernel
/// trims each to its IP length (ip_rcv_core / ip6_rcv_core) before it
/// routes it; the fast path must forward the same bytes.
fn beyond_the_ip_packet() -> Vec<Vec<u8>> {
    let to = [198, 19, 10, 1];
    let to6 = "2001:2:0:8001::10:1";
    let trailer = |mut f: Vec<u8>, n: usize, byte: u8| {
        f.extend((0..n).map(|i| byte.wrapping_add(i as u8)));
        f
    };
    let mut c = vec![
        trailer(udp4(to, 64, 0, DUT_IN), 18, 0), // 60-byte frame, zero padding
        trailer(udp4(to, 64, 0, DUT_IN), 18, 0xa5), // non-zero padding
        trailer(udp4(to, 64, 18, DUT_IN), 1, 0x5a), // trailers
        trailer(udp4(to, 64, 18, DUT_IN), 7, 0x11),
        trailer(udp4(to, 64, 200, DUT_IN), 100, 0x22),
        trailer(udp4(to, 64, 18, DUT_IN), 600, 0x33),
        // 1300-byte packets (dut1's MTU) in frames of MTU + 18 (what a veth
        // takes: MTU, Ethernet and a VLAN tag), MTU + 19 and MTU + 164.
        trailer(udp4(to, 64, 1272, DUT_IN), 4, 0x44),
        trailer(udp4(to, 64, 1272, DUT_IN), 5, 0x44),
        trailer(udp4(to, 64, 1272, DUT_IN), 150, 0x44),
        trailer(udp4(to, 64, 1273, DUT_IN), 150, 0x44), // one byte over: frag needed
        trailer(udp6(to6, 64, 0), 6, 0),                // 54 + 6 = 60-byte frame
        trailer(udp6(to6, 64, 18), 1, 0x5a),
        trailer(udp6(to6, 64, 200), 100, 0x66),
        trailer(udp6(to6, 64, 1252), 4, 0x77),
        trailer(udp6(to6, 64, 1252), 5, 0x77),
        trailer(udp6(to6, 64, 1252), 150, 0x77),
        trailer(udp6(to6, 64, 1253), 150, 0x77), // one byte over: packet too big
    ];
    // The IPv4 total length covers the UDP header and 10 of 200 bytes.
    let mut short4 = udp4(to, 64, 200, DUT_IN);
    frames::edit_ipv4(&mut short4, |h| h.total_len = 38);
    c.push(short4);
    let mut short6 = udp6(to6, 64, 200);
    frames::edit_ipv6(&mut short6, |h| h.payload_length = 18);
    c.push(short6);
    // Payload length 0 and next header UDP: not a jumbogram (no hop-by-hop
    // header), so the packet is the bare IPv6 header.
    let mut empty6 = udp6(to6, 64, 18);
    frames::edit_ipv6(&mut empty6, |h| h.payload_length = 0);
    c.push(empty6);
    c
}

fn send_corpus() -> Seen {
    // The unresolved neighbour's ARP gives up after about 3 s, then the
    // kernel sends host unreachable.
    send(
        LAB,
        corpus(),
        Duration::from_millis(20),
        Duration::from_millis(3500),
    )
}

#[test]
#[cfg_attr(
    not(feature = "privileged"),
    ignore = "needs root: --features privileged"
)]
fn the_fast_path_changes_nothing_but_speed() {
    let _down = Down(LAB);
    assert!(linerate(&["lab", "up", "--name", LAB]).status.success());
    let dut = format!("{LAB}-dut");
    // Every error the DUT and the receiver owe is sent (the receiver owes
    // more than the per-destination burst of 6).
    for ns in [dut.clone(), format!("{LAB}-recv")] {
        for k in ["net.ipv4.icmp_ratelimit=0", "net.ipv6.icmp.ratelimit=0"] {
            linerate_host::cmd::in_netns(&ns, "sysctl", &["-qw", k]).unwrap();
        }
    }
    // A smaller egress MTU for the oversize cases (not below 1280: IPv6
    // would leave the interface).
    ip(Some(&dut), &["link", "set", "dut1", "mtu", "1300"]).unwrap();
    ip(
        Some(&format!("{LAB}-recv")),
        &["link", "set", "recv0", "mtu", "1300"],
    )
    .unwrap();

    let kernel = send_corpus();
    let route = start_route(&dut);
    let stats = common::stats_window(&dut, "4.5");
    let linerate_run = send_corpus();
    let st: Value = serde_json::from_slice(&stats.wait_with_output().unwrap().stdout).unwrap();
    stop_route(route);

    let reasons = &st["interfaces"][0]["reasons"];
    let count = |r: &str| reasons[r]["packets"].as_u64().unwrap();
    // Four IPv4 and three IPv6 transit frames, and one of each family to
    // the receiver itself, a host on the DUT's connected network; then the
    // frames with bytes after the IP packet: ten IPv4 and eight IPv6.
    assert_eq!(
        count("forwarded"),
        9 + 10 + 8,
        "the fast path forwarded the plain transit frames: {reasons}"
    );
    // The receiver's errors back to the generator, a host on the other
    // connected network: port unreachable for each family, and no route
    // for the four IPv6 transit frames it was sent (it does not forward),
    // and for the eight with bytes after the packet.
    let back = &st["interfaces"][1]["reasons"];
    assert_eq!(back["forwarded"]["packets"], 6 + 8, "{back}");
    assert!(
        count("pass_ttl") >= 3 && count("pass_options") == 1 && count("pass_mtu") >= 4,
        "{reasons}"
    );
    common::frames::assert_same(&kernel, &linerate_run, usize::MAX, "");
    assert!(
        kernel.len() > 10,
        "the corpus produced traffic: {}",
        kernel.len()
    );
}

/// `linerate route` on the DUT `dut`'s two ports, once it is running.
fn start_route(dut: &str) -> std::process::Child {
    let route = Command::new(BIN)
        .args(["route", "--netns", dut, "-i", "dut0,dut1", "-q"])
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let t = Instant::now();
    while !std::path::Path::new(&format!("/run/linerate/routers/{dut}.json")).exists() {
        assert!(t.elapsed() < Duration::from_secs(10), "route did not start");
        std::thread::sleep(Duration::from_millis(50));
    }
    route
}

fn stop_route(mut route: std::process::Child) {
    // SAFETY: signalling our child.
    unsafe { libc::kill(route.id() as i32, libc::SIGTERM) };
    route.wait().unwrap();
}

/// ECMP routes through multipath routes (`nexthop via A nexthop via B`),
/// as BIRD installs them.
#[test]
#[cfg_attr(
    not(feature = "privileged"),
    ignore = "needs root: --features privileged"
)]
fn ecmp_reaches_the_same_gateways_as_the_kernel() {
    let mut routes = Vec::new();
    for (net, a, b) in [
        ("198.51.100.0/24", "198.19.0.1", "198.19.0.2"),
        ("2001:db8:77::/48", "2001:2:0:8000::1", "2001:2:0:8000::2"),
    ] {
        routes.push(vec![
            "route", "add", net, "nexthop", "via", a, "dev", "dut1", "nexthop", "via", b, "dev",
            "dut1",
        ]);
    }
    ecmp_through("lrt-ecmp", &routes, None);
}

/// The same through nexthop objects (`ip nexthop`, as FRR installs its
/// routes); then, with linerate running, the groups are replaced by their
/// first member alone, and every flow must go to it, through the fast path.
#[test]
#[cfg_attr(
    not(feature = "privileged"),
    ignore = "needs root: --features privileged"
)]
fn nexthop_objects_reach_the_same_gateways_as_the_kernel() {
    let routes: Vec<Vec<&str>> = [
        "nexthop add id 1 via 198.19.0.1 dev dut1",
        "nexthop add id 2 via 198.19.0.2 dev dut1",
        "nexthop add id 3 via 2001:2:0:8000::1 dev dut1",
        "nexthop add id 4 via 2001:2:0:8000::2 dev dut1",
        "nexthop add id 10 group 1/2",
        "nexthop add id 11 group 3/4",
        "route add 198.51.100.0/24 nhid 10",
        "route add 2001:db8:77::/48 nhid 11",
    ]
    .iter()
    .map(|c| c.split(' ').collect())
    .collect();
    let replace: Vec<Vec<&str>> = [
        "nexthop replace id 10 group 1",
        "nexthop replace id 11 group 3",
    ]
    .iter()
    .map(|c| c.split(' ').collect())
    .collect();
    ecmp_through("lrt-nhobj", &routes, Some(&replace));
}

/// ECMP through the kernel and through the fast path: one frame per flow
/// (source address) to an IPv4 and an IPv6 route over two gateways on
/// dut1, which `routes` (ip commands in the DUT) installs. Both must
/// deliver every frame, byte for byte the same but for the destination MAC
/// (which gateway a flow takes is each one's hash), each flow to one of
/// the two gateways, and both gateways must get a fair share. The fast
/// path must have forwarded them itself. With `to_first`, the commands
/// that leave each route with its first gateway alone: run while linerate
/// runs, after which every flow must reach the first gateway.
fn ecmp_through(lab: &'static str, routes: &[Vec<&str>], to_first: Option<&[Vec<&str>]>) {
    const FAKE_GW: &str = "02:00:00:00:00:99";
    const FLOWS: usize = 256;
    let _down = Down(lab);
    assert!(linerate(&["lab", "up", "--name", lab]).status.success());
    let dut = format!("{lab}-dut");
    let recv_ns = format!("{lab}-recv");
    let out = ip(Some(&recv_ns), &["-j", "link", "show", "dev", "recv0"]).unwrap();
    let recv_mac = serde_json::from_str::<Value>(&out).unwrap()[0]["address"]
        .as_str()
        .unwrap()
        .to_string();
    let mac_bytes = |m: &str| -> Vec<u8> {
        m.split(':')
            .map(|x| u8::from_str_radix(x, 16).unwrap())
            .collect()
    };
    // Two gateways: the receiver, and a second one nobody answers for
    // (its frames arrive at recv0 all the same).
    for (gw, mac) in [
        ("198.19.0.1", recv_mac.as_str()),
        ("198.19.0.2", FAKE_GW),
        ("2001:2:0:8000::1", recv_mac.as_str()),
        ("2001:2:0:8000::2", FAKE_GW),
    ] {
        ip(
            Some(&dut),
            &[
                "neigh",
                "replace",
                gw,
                "lladdr",
                mac,
                "dev",
                "dut1",
                "nud",
                "permanent",
            ],
        )
        .unwrap();
    }
    for r in routes {
        ip(Some(&dut), r).unwrap();
    }
    let frames: Vec<Vec<u8>> = (0..FLOWS)
        .flat_map(|i| {
            let mut f4 = Vec::new();
            PacketBuilder::ethernet2(GEN, DUT_IN)
                .ipv4(
                    [198, 18, 1 + (i / 200) as u8, (i % 200) as u8 + 1],
                    [198, 51, 100, 9],
                    64,
                )
                .udp(4000, 5000)
                .write(&mut f4, &[0x55; 18])
                .unwrap();
            let s: std::net::Ipv6Addr = format!("2001:2::1:{i:x}").parse().unwrap();
            let d: std::net::Ipv6Addr = "2001:db8:77::9".parse().unwrap();
            let mut f6 = Vec::new();
            PacketBuilder::ethernet2(GEN, DUT_IN)
                .ipv6(s.octets(), d.octets(), 64)
                .udp(4000, 5000)
                .write(&mut f6, &[0x66; 18])
                .unwrap();
            [f4, f6]
        })
        .collect();
    let run = |frames: Vec<Vec<u8>>| {
        send(
            lab,
            frames,
            Duration::from_micros(200),
            Duration::from_millis(500),
        )
    };
    let kernel = run(frames.clone());
    let route = start_route(&dut);
    let stats = common::stats_window(&dut, "2.5");
    let fast = run(frames.clone());
    let st: Value = serde_json::from_slice(&stats.wait_with_output().unwrap().stdout).unwrap();
    let after_change = to_first.map(|cmds| {
        for c in cmds {
            ip(Some(&dut), c).unwrap();
        }
        std::thread::sleep(Duration::from_millis(300));
        let stats = common::stats_window(&dut, "2.5");
        let seen = run(frames);
        let st: Value = serde_json::from_slice(&stats.wait_with_output().unwrap().stdout).unwrap();
        (seen, st)
    });
    stop_route(route);

    // `linerate stats` says the fast path forwarded every flow.
    let all_forwarded = |st: &Value, when: &str| {
        let reasons = &st["interfaces"][0]["reasons"];
        let n = reasons["forwarded"]["packets"].as_u64().unwrap();
        assert!(n >= 2 * FLOWS as u64, "{when}, forwarded in XDP: {reasons}");
    };
    all_forwarded(&st, "the flows");
    let (recv_mac, fake) = (mac_bytes(&recv_mac), mac_bytes(FAKE_GW));
    // Per run: the frames with the destination MAC blanked, and how many
    // went to each gateway (IPv4, IPv6).
    let sort = |seen: &Seen| {
        let mut blanked = BTreeMap::new();
        let mut shares = BTreeMap::new();
        for ((dev, f), n) in seen {
            if dev != "recv0" || !(f[12..14] == [8, 0] || f[12..14] == [0x86, 0xdd]) {
                continue;
            }
            let gw = if f[0..6] == recv_mac[..] {
                "receiver"
            } else if f[0..6] == fake[..] {
                "second"
            } else {
                "other"
            };
            *shares.entry((f[12], gw)).or_insert(0) += n;
            let mut b = f.clone();
            b[0..6].fill(0);
            *blanked.entry(b).or_insert(0) += n;
        }
        (blanked, shares)
    };
    let (k_frames, k_shares) = sort(&kernel);
    let (f_frames, f_shares) = sort(&fast);
    assert_eq!(k_frames.values().sum::<usize>(), 2 * FLOWS, "{k_shares:?}");
    assert!(
        k_frames == f_frames,
        "the same frames: {k_shares:?} {f_shares:?}"
    );
    for (who, shares) in [("kernel", &k_shares), ("linerate", &f_shares)] {
        for family in [8u8, 0x86] {
            for gw in ["receiver", "second"] {
                let n = shares.get(&(family, gw)).copied().unwrap_or(0);
                // Half of 256 flows each, within 5 standard deviations.
                assert!(
                    (88..=168).contains(&n),
                    "{who}: {n} of {FLOWS} flows of family {family:#x} to the {gw} gateway: {shares:?}"
                );
            }
        }
    }
    if let Some((seen, st)) = after_change {
        all_forwarded(&st, "after the change");
        let (frames, shares) = sort(&seen);
        assert!(
            frames == k_frames,
            "the same frames after the change: {shares:?}"
        );
        for family in [8u8, 0x86] {
            assert_eq!(
                shares.get(&(family, "receiver")).copied(),
                Some(FLOWS),
                "every flow to the first gateway: {shares:?}"
            );
        }
    }
}

/// Jumbo frames: a lab whose four veth ends have MTU 9000. Frames up to
/// 9014 bytes (more than a page, so the DUT's XDP program gets them in
/// several buffers) go through the kernel alone and through `linerate
/// route`, which attaches its multi-buffer program there; what arrives at
/// recv0 and back at gen0 must be the same frames, byte for byte, and the
/// fast path must have forwarded them itself (a veth whose peer has NAPI
/// sends multi-buffer frames).
#[test]
#[cfg_attr(
    not(feature = "privileged"),
    ignore = "needs root: --features privileged"
)]
fn jumbo_frames_go_as_the_kernel_sends_them() {
    const JUMBO: &str = "lrt-jumbo";
    let _down = Down(JUMBO);
    let up = linerate(&["lab", "up", "--name", JUMBO, "--mtu", "9000"]);
    assert!(
        up.status.success(),
        "{}",
        String::from_utf8_lossy(&up.stderr)
    );
    let dut = format!("{JUMBO}-dut");
    for ns in [dut.clone(), format!("{JUMBO}-recv")] {
        for k in ["net.ipv4.icmp_ratelimit=0", "net.ipv6.icmp.ratelimit=0"] {
            linerate_host::cmd::in_netns(&ns, "sysctl", &["-qw", k]).unwrap();
        }
    }
    let to = [198, 19, 10, 1];
    let to6 = "2001:2:0:8001::10:1";
    let trailer = |mut f: Vec<u8>, n: usize| {
        f.extend((0..n).map(|i| (i * 7 + 1) as u8));
        f
    };
    // Sizes are IP packets: 9000 (the MTU), 4000 (two pages), 1500, 46.
    let frames = vec![
        udp4(to, 64, 9000 - 28, DUT_IN),
        udp4(to, 64, 4000 - 28, DUT_IN),
        udp4(to, 64, 1500 - 28, DUT_IN),
        udp4(to, 64, 18, DUT_IN),
        trailer(udp4(to, 64, 8900 - 28, DUT_IN), 100),
        trailer(udp4(to, 64, 18, DUT_IN), 3000),
        udp6(to6, 64, 9000 - 48),
        udp6(to6, 64, 4000 - 48),
        trailer(udp6(to6, 64, 8900 - 48), 100),
    ];
    let n4 = 6;
    let n6 = frames.len() - n4;
    let kernel = send(
        JUMBO,
        frames.clone(),
        Duration::from_millis(20),
        Duration::from_millis(500),
    );
    let route = start_route(&dut);
    let progs = ip(Some(&dut), &["-j", "link", "show"]).unwrap();
    let stats = common::stats_window(&dut, "1.5");
    let linerate_run = send(
        JUMBO,
        frames,
        Duration::from_millis(20),
        Duration::from_millis(500),
    );
    let st: Value = serde_json::from_slice(&stats.wait_with_output().unwrap().stdout).unwrap();
    stop_route(route);

    let links: Value = serde_json::from_str(&progs).unwrap();
    for dev in ["dut0", "dut1"] {
        let l = links
            .as_array()
            .unwrap()
            .iter()
            .find(|l| l["ifname"] == dev)
            .unwrap();
        assert_eq!(l["xdp"]["prog"]["name"], "router_mb", "{dev}: {l}");
    }
    let reasons = &st["interfaces"][0]["reasons"];
    assert_eq!(
        reasons["forwarded"]["packets"],
        (n4 + n6) as u64,
        "the fast path forwarded every transit frame: {reasons}"
    );
    // The receiver's no-route errors for the IPv6 frames, back through
    // dut1 (each quotes 1232 bytes of the packet).
    let back = &st["interfaces"][1]["reasons"];
    assert_eq!(back["forwarded"]["packets"], n6 as u64, "{back}");
    common::frames::assert_same(&kernel, &linerate_run, 64, "");
    let at_recv: Vec<usize> = kernel
        .keys()
        .filter(|(dev, _)| dev == "recv0")
        .map(|(_, f)| f.len())
        .collect();
    assert!(
        at_recv.contains(&9014),
        "a 9014-byte frame arrived: {at_recv:?}"
    );
}

/// Frames of both families sent through lab `lab` twice, once through the
/// kernel alone and once with `linerate route` attached, with table 100
/// routing the receiver's networks (a throw route for a part of them)
/// while main holds blackholes for them, and `rules` (`ip` arguments)
/// choosing it: to table 100's routes, to its throw route, TTL and hop
/// limit 1, oversize, to the receiver, and to `more` (further
/// destinations). The same frames must arrive both times, byte for byte;
/// the fast path's counters are returned.
fn through_table_100(lab: &str, rules: &[&str], more: Vec<Vec<u8>>) -> Value {
    assert!(linerate(&["lab", "up", "--name", lab]).status.success());
    let dut = format!("{lab}-dut");
    for ns in [dut.clone(), format!("{lab}-recv")] {
        for k in ["net.ipv4.icmp_ratelimit=0", "net.ipv6.icmp.ratelimit=0"] {
            linerate_host::cmd::in_netns(&ns, "sysctl", &["-qw", k]).unwrap();
        }
    }
    let routes = [
        "route add 198.19.0.0/16 via 198.19.0.1 dev dut1 table 100",
        "route add throw 198.19.20.0/24 table 100",
        "-6 route add 2001:2:0:8000::/49 via 2001:2:0:8000::1 dev dut1 table 100",
        "-6 route add throw 2001:2:0:8001::20:0/112 table 100",
        "route replace blackhole 198.19.0.0/16",
        "-6 route replace blackhole 2001:2:0:8000::/49",
    ];
    for args in routes.iter().chain(rules) {
        let a: Vec<&str> = args.split(' ').collect();
        ip(Some(&dut), &a).unwrap();
    }
    let frames = || {
        let to = [198, 19, 10, 1];
        let mut f = vec![
            udp4(to, 64, 18, DUT_IN),
            udp4(to, 64, 900, DUT_IN),
            udp4(to, 1, 18, DUT_IN),
            udp4([198, 19, 20, 1], 64, 18, DUT_IN), // thrown: main's blackhole
            udp4([198, 19, 0, 1], 64, 18, DUT_IN),  // the receiver, connected
            udp6("2001:2:0:8001::10:1", 64, 18),
            udp6("2001:2:0:8001::10:1", 64, 600),
            udp6("2001:2:0:8001::10:1", 1, 18),
            udp6("2001:2:0:8001::20:1", 64, 18), // thrown
        ];
        f.extend(more.iter().cloned());
        f
    };
    let send_all = || {
        send(
            lab,
            frames(),
            Duration::from_millis(20),
            Duration::from_millis(1000),
        )
    };
    let kernel = send_all();
    let route = start_route(&dut);
    let stats = common::stats_window(&dut, "2");
    let linerate_run = send_all();
    let st: Value = serde_json::from_slice(&stats.wait_with_output().unwrap().stdout).unwrap();
    stop_route(route);
    assert_eq!(
        kernel, linerate_run,
        "the same frames arrive, through the kernel alone and with the fast path"
    );
    assert!(
        kernel.len() >= 4,
        "the frames produced traffic: {}",
        kernel.len()
    );
    st["interfaces"][0]["reasons"].clone()
}

/// A tenant's table chosen by the incoming interface (`ip rule add iif
/// dut0 lookup 100`, the interface's list of tables): the same frames
/// arrive at recv0 and back at gen0, byte for byte, through the kernel
/// alone and with the fast path, which forwarded by table 100.
#[test]
#[cfg_attr(
    not(feature = "privileged"),
    ignore = "needs root: --features privileged"
)]
fn a_tenants_table_routes_as_the_kernel_routes_it() {
    const TLAB: &str = "lrt-difft";
    let _down = Down(TLAB);
    let rules = [
        "rule add pref 100 iif dut0 lookup 100",
        "-6 rule add pref 100 iif dut0 lookup 100",
    ];
    let reasons = through_table_100(TLAB, &rules, Vec::new());
    // By table 100: two transit frames of each family, and the frame to
    // the receiver (its route covers it); the thrown ones go to main's
    // blackholes, which are the kernel's (pass_no_route).
    assert_eq!(reasons["forwarded"]["packets"], 5, "{reasons}");
    assert_eq!(reasons["pass_no_route"]["packets"], 2, "{reasons}");
}

/// The same table chosen by rules with selectors (the rule program: a
/// source prefix, and a `blackhole` rule on a destination before it):
/// the same frames arrive, byte for byte, through the kernel alone and
/// with the fast path, which forwarded by table 100 and dropped what the
/// blackhole rule takes, as the kernel does.
#[test]
#[cfg_attr(
    not(feature = "privileged"),
    ignore = "needs root: --features privileged"
)]
fn rules_with_selectors_route_as_the_kernel_routes() {
    const RLAB: &str = "lrt-diffr";
    let _down = Down(RLAB);
    let rules = [
        "rule add pref 90 to 203.0.113.0/24 blackhole",
        "rule add pref 100 from 198.18.0.0/16 lookup 100",
        "-6 rule add pref 90 to 2001:db8::/32 blackhole",
        "-6 rule add pref 100 from 2001:2::/49 lookup 100",
    ];
    // (Where main has no route: one main gives the kernel might be the
    // router's own address, which the local rule takes first.)
    let blackholed = vec![
        udp4([203, 0, 113, 1], 64, 18, DUT_IN),
        udp6("2001:db8::1", 64, 18),
    ];
    let reasons = through_table_100(RLAB, &rules, blackholed);
    assert_eq!(reasons["forwarded"]["packets"], 5, "{reasons}");
    assert_eq!(reasons["pass_no_route"]["packets"], 2, "{reasons}");
    assert_eq!(reasons["drop_blackhole"]["packets"], 2, "{reasons}");
}

/// A tenant's table with a connected network of its own (`ip route add
/// 198.19.0.0/24 dev dut1 table 100`), main's taken away so that only the
/// tenant's table reaches the receiver: its hosts with a neighbour entry
/// get entries in the table's FIB, as main's do, and the frames to them
/// are forwarded in XDP, byte for byte as the kernel forwards them (they
/// were the kernel's: a connected route of a table other than main).
#[test]
#[cfg_attr(
    not(feature = "privileged"),
    ignore = "needs root: --features privileged"
)]
fn a_tenants_connected_hosts_are_reached_as_the_kernel_reaches_them() {
    const CLAB: &str = "lrt-diffc";
    let _down = Down(CLAB);
    let rules = [
        "route add 198.19.0.0/24 dev dut1 table 100",
        "-6 route add 2001:2:0:8000::/64 dev dut1 table 100",
        "route del 198.19.0.0/24 dev dut1 table main",
        "-6 route del 2001:2:0:8000::/64 dev dut1 table main",
        "rule add pref 100 iif dut0 lookup 100",
        "-6 rule add pref 100 iif dut0 lookup 100",
    ];
    let to_receiver = vec![udp6("2001:2:0:8000::1", 64, 18)];
    let reasons = through_table_100(CLAB, &rules, to_receiver);
    // Table 100's transit frames (4), and the receiver by its connected
    // network in table 100, both families.
    assert_eq!(reasons["forwarded"]["packets"], 6, "{reasons}");
    assert_eq!(reasons["pass_no_route"]["packets"], 2, "{reasons}");
    assert!(
        reasons["pass_kernel_route"]["packets"]
            .as_u64()
            .unwrap_or(0)
            == 0,
        "{reasons}"
    );
}
