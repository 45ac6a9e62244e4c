//! linerate's reading of nftables is the kernel's: random rulesets drawn
//! from the grammar the firewall compiles (ip, ip6 and inet tables; base
//! chains at prerouting, forward and postrouting at random priorities;
//! regular chains reached by jump, goto and verdict maps; interface names
//! with wildcards, addresses, prefixes, ranges, anonymous and named
//! interval sets, concatenations, protocols, ports, TCP flags, ICMP types,
//! comparisons, counters, every verdict) are loaded into a lab DUT with
//! `nft -f`, read back with `nft -j list ruleset` by `linerate_firewall`,
//! and random frames are sent through the kernel. Every frame the
//! evaluator accepts must arrive at the receiver and no other, and every
//! rule's counter must hold what the evaluator counted. The second test
//! does the same with linerate's router attached to the DUT, following
//! each ruleset as it is loaded: the frames are sent twice (the first
//! pass's keys are new, judged by the classifier in the program; the
//! second's are its verdict cache's), and the kernel's counters plus the
//! fast path's must hold twice what the evaluator counted. Needs root.
use etherparse::PacketBuilder;
use linerate_firewall::eval::{judge, Packet, Verdict};
use linerate_firewall::ruleset::Filter;
use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use serde_json::Value;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::process::Command;
use std::time::Duration;

mod common;
use common::frames::{capture_on, send};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// The labs: the kernel alone, and linerate's router attached.
const LAB: &str = "lrt-fwo";
const LAB_ROUTED: &str = "lrt-fwr";
const GEN: [u8; 6] = [2, 0, 0, 0, 0, 1];
const DUT_IN: [u8; 6] = [2, 0, 0, 0, 0, 2];

fn nft(lab: &str, args: &[&str]) -> std::process::Output {
    common::lab::dut_nft(lab, args)
}

// The pools values are drawn from: small, so rules and frames meet.
const SRC4: &[&str] = &["198.18.0.1", "198.18.0.9", "198.18.1.7", "198.18.200.3"];
const DST4: &[&str] = &["198.19.1.1", "198.19.1.2", "198.19.7.9", "198.19.128.4"];
const SRC6: &[&str] = &[
    "2001:2::1",
    "2001:2::9",
    "2001:2:0:1::7",
    "2001:2:0:7000::3",
];
const DST6: &[&str] = &[
    "2001:2:0:8001::1",
    "2001:2:0:8001::2",
    "2001:2:0:8007::9",
    "2001:2:0:c000::4",
];
const PORTS: &[u16] = &[22, 53, 80, 443, 1000, 1023, 1024, 5000];
const ICMP: &[u8] = &[0, 3, 8, 11];
const ICMP6: &[u8] = &[1, 3, 128, 129];
const FLAGS: &[&str] = &["fin", "syn", "rst", "ack", "psh"];

fn pick<'a, T>(r: &mut StdRng, xs: &'a [T]) -> &'a T {
    xs.choose(r).unwrap()
}

/// A prefix, range or value around one of the pool's addresses.
fn addr_atom(r: &mut StdRng, ipv6: bool) -> String {
    let pool = if ipv6 {
        SRC6.iter().chain(DST6)
    } else {
        SRC4.iter().chain(DST4)
    };
    let pool: Vec<&str> = pool.copied().collect();
    let a = *pick(r, &pool);
    match r.gen_range(0..4) {
        0 => a.to_string(),
        1 => {
            let len = if ipv6 {
                *pick(r, &[48u8, 64, 100, 128])
            } else {
                *pick(r, &[16u8, 24, 30, 32])
            };
            // nft wants the host bits clear.
            let net = if ipv6 {
                let v = u128::from(a.parse::<std::net::Ipv6Addr>().unwrap());
                let m = if len == 0 {
                    0
                } else {
                    u128::MAX << (128 - len)
                };
                std::net::Ipv6Addr::from(v & m).to_string()
            } else {
                let v = u32::from(a.parse::<std::net::Ipv4Addr>().unwrap());
                let m = if len == 0 { 0 } else { u32::MAX << (32 - len) };
                std::net::Ipv4Addr::from(v & m).to_string()
            };
            format!("{net}/{len}")
        }
        2 => {
            let b = *pick(r, &pool);
            let (x, y) = if ipv6 {
                let (x, y) = (
                    a.parse::<std::net::Ipv6Addr>().unwrap(),
                    b.parse::<std::net::Ipv6Addr>().unwrap(),
                );
                (x.min(y).to_string(), x.max(y).to_string())
            } else {
                let (x, y) = (
                    a.parse::<std::net::Ipv4Addr>().unwrap(),
                    b.parse::<std::net::Ipv4Addr>().unwrap(),
                );
                (x.min(y).to_string(), x.max(y).to_string())
            };
            if x == y {
                x
            } else {
                format!("{x}-{y}")
            }
        }
        _ => a.to_string(),
    }
}

fn port_atom(r: &mut StdRng) -> String {
    let a = *pick(r, PORTS);
    if r.gen_bool(0.3) {
        let b = *pick(r, PORTS);
        if a != b {
            return format!("{}-{}", a.min(b), a.max(b));
        }
    }
    a.to_string()
}

/// Atoms as one value or an anonymous set (distinct, non-overlapping
/// elements: nft refuses overlaps in interval sets).
fn one_or_set(
    r: &mut StdRng,
    mut atom: impl FnMut(&mut StdRng) -> String,
    overlap_safe: bool,
) -> String {
    if !overlap_safe || r.gen_bool(0.6) {
        return atom(r);
    }
    let mut xs: Vec<String> = (0..r.gen_range(2..4)).map(|_| atom(r)).collect();
    xs.sort();
    xs.dedup();
    format!("{{ {} }}", xs.join(", "))
}

/// The transport protocol a rule's matches are bound to: nft refuses a
/// rule whose matches need two (`icmpv6 type ... tcp dport ...`).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Proto {
    Any,
    /// The raw transport header (`th`) of TCP or UDP: nft prints it by
    /// the protocol a rule names, so it keeps to rules naming none.
    Th,
    Tcp,
    Udp,
    Icmp,
}

/// One random match of the compiled grammar, for a rule of family
/// `ipv6` bound to `proto`.
fn a_match(r: &mut StdRng, ipv6: bool, inet: bool, proto: Proto) -> String {
    let neg = if r.gen_bool(0.2) { "!= " } else { "" };
    let (ip, dir) = (
        if ipv6 { "ip6" } else { "ip" },
        *pick(r, &["saddr", "daddr"]),
    );
    let icmp = if ipv6 { "icmpv6" } else { "icmp" };
    let generic = |r: &mut StdRng| -> String {
        match r.gen_range(0..6) {
            0 => format!(
                "iifname {neg}{}",
                pick(
                    r,
                    &[
                        "\"dut0\"",
                        "\"dut1\"",
                        "\"dut*\"",
                        "\"eth*\"",
                        "{ \"dut0\", \"x*\" }"
                    ]
                )
            ),
            1 => format!(
                "oifname {neg}{}",
                pick(
                    r,
                    &["\"dut1\"", "\"dut0\"", "\"du*\"", "{ \"dut1\", \"lo\" }"]
                )
            ),
            2 => format!("iif {neg}{}", pick(r, &["\"dut0\"", "\"dut1\""])),
            3 => format!("oif {neg}{}", pick(r, &["\"dut1\"", "\"dut0\""])),
            // Only the inet family takes nfproto.
            4 if inet => format!("meta nfproto {}", if ipv6 { "ipv6" } else { "ipv4" }),
            // Addresses one at a time (random ranges in an anonymous set
            // may overlap, which nft refuses).
            _ => format!("{ip} {dir} {neg}{}", addr_atom(r, ipv6)),
        }
    };
    if r.gen_bool(0.5) {
        return generic(r);
    }
    match proto {
        Proto::Any => match r.gen_range(0..2) {
            0 => format!(
                "meta l4proto {neg}{}",
                pick(
                    r,
                    &["tcp", "udp", "{ tcp, udp }", "icmp", "ipv6-icmp", "gre"]
                )
            ),
            _ if !ipv6 => format!(
                "ip protocol {neg}{}",
                pick(r, &["tcp", "udp", "icmp", "{ udp, gre }"])
            ),
            _ => format!("ip6 nexthdr {neg}{}", pick(r, &["tcp", "udp", "ipv6-icmp"])),
        },
        // th needs the protocol known first.
        Proto::Th => format!(
            "meta l4proto {{ tcp, udp }} th {} {neg}{}",
            pick(r, &["sport", "dport"]),
            port_atom(r)
        ),
        Proto::Tcp => match r.gen_range(0..5) {
            0 => format!(
                "tcp {} {neg}{}",
                pick(r, &["sport", "dport"]),
                one_or_set(r, port_atom, false)
            ),
            1 => format!("tcp flags {}", pick(r, FLAGS)),
            2 => format!(
                "tcp flags & (syn | ack) == {}",
                pick(r, &["syn", "ack", "syn | ack", "0x0"])
            ),
            3 => format!(
                "tcp flags {neg}{{ {}, {} }}",
                pick(r, &["syn", "fin"]),
                pick(r, &["ack", "rst"])
            ),
            _ => format!(
                "tcp dport {} {}",
                pick(r, &["<", ">", "<=", ">="]),
                pick(r, PORTS)
            ),
        },
        Proto::Udp => match r.gen_range(0..2) {
            0 => format!(
                "udp {} {neg}{}",
                pick(r, &["sport", "dport"]),
                one_or_set(r, port_atom, false)
            ),
            _ => format!(
                "udp sport {} {}",
                pick(r, &["<", ">", "<=", ">="]),
                pick(r, PORTS)
            ),
        },
        Proto::Icmp => format!(
            "{icmp} type {neg}{}",
            pick(
                r,
                &[
                    "echo-request",
                    "echo-reply",
                    "{ destination-unreachable, time-exceeded }"
                ]
            )
        ),
    }
}

/// A random table: sets, regular chains (each jumps only to later ones:
/// no loops), base chains.
fn a_table(r: &mut StdRng, t: usize, family: &str, reject: bool) -> String {
    let mut s = format!("table {family} t{t} {{\n");
    let v6 = family == "ip6" || (family == "inet" && r.gen_bool(0.5));
    let addr_type = if v6 { "ipv6_addr" } else { "ipv4_addr" };
    // A named interval set of addresses, a concatenation set, a vmap.
    let mut elems: Vec<String> = Vec::new();
    for a in if v6 { SRC6 } else { SRC4 } {
        if r.gen_bool(0.5) {
            elems.push(a.to_string());
        }
    }
    writeln!(
        s,
        "  set addrs {{ type {addr_type}; flags interval; {} }}",
        elements(&elems)
    )
    .unwrap();
    let mut pairs: Vec<String> = Vec::new();
    for a in if v6 { SRC6 } else { SRC4 } {
        for p in PORTS {
            if r.gen_bool(0.15) {
                pairs.push(format!("{a} . {p}"));
            }
        }
    }
    writeln!(
        s,
        "  set pairs {{ type {addr_type} . inet_service; {} }}",
        elements(&pairs)
    )
    .unwrap();
    let regular = r.gen_range(1..4);
    let mut vm: Vec<String> = Vec::new();
    for p in PORTS {
        if r.gen_bool(0.4) {
            let v = match r.gen_range(0..4) {
                0 => "accept".to_string(),
                1 => "drop".to_string(),
                2 => format!("jump c{}", r.gen_range(0..regular)),
                _ => format!("goto c{}", r.gen_range(0..regular)),
            };
            vm.push(format!("{p} : {v}"));
        }
    }
    writeln!(
        s,
        "  map ports {{ type inet_service : verdict; {} }}",
        elements(&vm)
    )
    .unwrap();
    // Regular chains last to first, so jumps go forward only; a vmap
    // naming c_k is used only from base chains.
    for c in 0..regular {
        writeln!(s, "  chain c{c} {{").unwrap();
        for _ in 0..r.gen_range(0..5) {
            let later = (c + 1..regular).collect::<Vec<_>>();
            writeln!(s, "    {}", a_rule(r, family, v6, &later, false)).unwrap();
        }
        writeln!(s, "  }}").unwrap();
    }
    let hooks = ["prerouting", "forward", "postrouting"];
    for (b, hook) in hooks.iter().enumerate() {
        // The DUT's rejects go out through postrouting: its own packets,
        // which the evaluator does not judge.
        if !r.gen_bool(0.6) || (reject && *hook == "postrouting") {
            continue;
        }
        let prio = *pick(r, &[-300, -150, -10, 0, 10, 100, 200]);
        let policy = if r.gen_bool(0.3) { "drop" } else { "accept" };
        writeln!(
            s,
            "  chain b{b} {{\n    type filter hook {hook} priority {prio}; policy {policy};"
        )
        .unwrap();
        for _ in 0..r.gen_range(1..7) {
            let all = (0..regular).collect::<Vec<_>>();
            writeln!(
                s,
                "    {}",
                a_rule(r, family, v6, &all, reject && *hook == "forward")
            )
            .unwrap();
        }
        writeln!(s, "  }}").unwrap();
    }
    s.push_str("}\n");
    s
}

fn elements(xs: &[String]) -> String {
    if xs.is_empty() {
        String::new()
    } else {
        format!("elements = {{ {} }};", xs.join(", "))
    }
}

/// A rule: matches, maybe a counter, a verdict or not. Jumps go to
/// `targets`; `reject` only where the kernel takes it (forward). The
/// table's named sets hold addresses of family `sets_v6`.
fn a_rule(r: &mut StdRng, family: &str, sets_v6: bool, targets: &[usize], forward: bool) -> String {
    let ipv6 = match family {
        "ip" => false,
        "ip6" => true,
        _ => r.gen_bool(0.5),
    };
    let proto = *pick(
        r,
        &[Proto::Any, Proto::Th, Proto::Tcp, Proto::Udp, Proto::Icmp],
    );
    let ip = if ipv6 { "ip6" } else { "ip" };
    let mut parts: Vec<String> = (0..r.gen_range(0..3))
        .map(|_| a_match(r, ipv6, family == "inet", proto))
        .collect();
    if ipv6 == sets_v6 {
        match r.gen_range(0..10) {
            0 => parts.push(format!(
                "{ip} saddr {}@addrs",
                if r.gen_bool(0.2) { "!= " } else { "" }
            )),
            1 if proto == Proto::Tcp => parts.push(format!("{ip} saddr . tcp dport @pairs")),
            _ => {}
        }
    }
    if r.gen_bool(0.5) {
        parts.push("counter".into());
    }
    let verdict = match r.gen_range(0..12) {
        0 | 1 => "accept".to_string(),
        2 | 3 => "drop".to_string(),
        4 => "return".to_string(),
        5 => "continue".to_string(),
        6 | 7 if !targets.is_empty() => format!("jump c{}", pick(r, targets)),
        8 if !targets.is_empty() => format!("goto c{}", pick(r, targets)),
        9 if proto == Proto::Th && targets.len() == all_targets(targets) => {
            "meta l4proto { tcp, udp } th dport vmap @ports".to_string()
        }
        10 if forward => "reject".to_string(),
        11 if proto == Proto::Tcp => {
            format!(
                "tcp dport vmap {{ {} : accept, {} : drop }}",
                PORTS[0], PORTS[1]
            )
        }
        _ => String::new(),
    };
    if !verdict.is_empty() {
        parts.push(verdict);
    }
    if parts.is_empty() {
        parts.push("counter".into());
    }
    parts.join(" ")
}

/// Whether `targets` are all the regular chains (base chains only: the
/// map may jump to any of them).
fn all_targets(targets: &[usize]) -> usize {
    if targets.first() == Some(&0) {
        targets.len()
    } else {
        usize::MAX
    }
}

fn a_ruleset(seed: u64) -> String {
    let mut r = StdRng::seed_from_u64(seed);
    let mut s = String::new();
    let reject = r.gen_bool(0.5);
    for t in 0..r.gen_range(1..4) {
        let family = *pick(&mut r, &["ip", "ip6", "inet", "inet"]);
        s.push_str(&a_table(&mut r, t, family, reject));
    }
    s
}

/// A random frame from the generator through the DUT, tagged `tag` in its
/// payload; and what the evaluator sees of it.
fn a_frame(r: &mut StdRng, tag: u32, ifs: (u32, u32)) -> (Vec<u8>, Packet) {
    let ipv6 = r.gen_bool(0.5);
    let (src, dst) = if ipv6 {
        (pick(r, SRC6), pick(r, DST6))
    } else {
        (pick(r, SRC4), pick(r, DST4))
    };
    let payload = tag.to_be_bytes().repeat(4);
    let b = PacketBuilder::ethernet2(GEN, DUT_IN);
    let (s, d): (std::net::IpAddr, std::net::IpAddr) = (src.parse().unwrap(), dst.parse().unwrap());
    let b = match (s, d) {
        (std::net::IpAddr::V4(s), std::net::IpAddr::V4(d)) => b.ipv4(s.octets(), d.octets(), 64),
        (std::net::IpAddr::V6(s), std::net::IpAddr::V6(d)) => b.ipv6(s.octets(), d.octets(), 64),
        _ => unreachable!(),
    };
    let mut f = Vec::new();
    let l4proto = match r.gen_range(0..4) {
        0 => {
            let (sp, dp) = (*pick(r, PORTS), *pick(r, PORTS));
            let mut t = b.tcp(sp, dp, 1, 1000);
            for fl in FLAGS {
                if r.gen_bool(0.4) {
                    t = match *fl {
                        "fin" => t.fin(),
                        "syn" => t.syn(),
                        "rst" => t.rst(),
                        "ack" => t.ack(2),
                        _ => t.psh(),
                    };
                }
            }
            t.write(&mut f, &payload).unwrap();
            6u8
        }
        1 => {
            b.udp(*pick(r, PORTS), *pick(r, PORTS))
                .write(&mut f, &payload)
                .unwrap();
            17
        }
        2 if ipv6 => {
            let t = *pick(r, ICMP6);
            b.icmpv6_raw(t, 0, [0; 4]).write(&mut f, &payload).unwrap();
            58
        }
        2 => {
            let t = *pick(r, ICMP);
            b.icmpv4_raw(t, 0, [0; 4]).write(&mut f, &payload).unwrap();
            1
        }
        _ => {
            // GRE: a protocol of its own, no ports.
            b.write(&mut f, etherparse::IpNumber(47), &payload).unwrap();
            47
        }
    };
    let ip_len = if ipv6 { 40 } else { 20 };
    let l4 = 14 + ip_len;
    let addr = |a: std::net::IpAddr| match a {
        std::net::IpAddr::V4(v) => u32::from(v) as u128,
        std::net::IpAddr::V6(v) => u128::from(v),
    };
    let p = Packet {
        ipv6,
        iif: ifs.0,
        iifname: "dut0".into(),
        oif: ifs.1,
        oifname: "dut1".into(),
        saddr: addr(s),
        daddr: addr(d),
        l4proto,
        nexthdr: l4proto,
        later_fragment: false,
        transport: f[l4..].to_vec(),
        ..Default::default()
    };
    (f, p)
}

fn ifindex(lab: &str, name: &str) -> u32 {
    let _in = linerate_host::netns::NetnsGuard::enter(&format!("{lab}-dut")).unwrap();
    linerate_bpf::loader::ifindex(name).unwrap()
}

/// What the DUT itself sends passes its postrouting chains and counts,
/// even when they drop it before it leaves: a table of the test's own,
/// loaded with each ruleset, counts it at the output hook (which the
/// firewall ignores: local traffic).
const WATCH_OWN: &str = "table inet lrt_watch {\n chain out {\n  type filter hook output priority -1000;\n  counter\n }\n}\n";

/// Each rule's counter as the kernel has it: (family, table, chain,
/// handle) -> packets.
fn kernel_counters(lab: &str) -> BTreeMap<(String, String, String, u64), u64> {
    let out = nft(lab, &["-j", "list", "ruleset"]);
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let mut m = BTreeMap::new();
    for o in v["nftables"].as_array().unwrap() {
        let Some(rule) = o.get("rule") else { continue };
        let mut n = 0;
        let mut any = false;
        for e in rule["expr"].as_array().unwrap() {
            if let Some(c) = e.get("counter") {
                n += c["packets"].as_u64().unwrap();
                any = true;
            }
        }
        if any {
            let s = |k: &str| rule[k].as_str().unwrap().to_string();
            m.insert(
                (
                    s("family"),
                    s("table"),
                    s("chain"),
                    rule["handle"].as_u64().unwrap(),
                ),
                n,
            );
        }
    }
    m
}

/// Waits until the router's firewall judges `ruleset`'s chains (as the
/// firewall would name them), and a generation later than the last.
fn wait_for_firewall(record: &str, ruleset: &linerate_firewall::Ruleset, seed: u64) {
    let (c, _) = linerate_firewall::compile::Compiled::new(0, ruleset, Default::default(), false);
    let want = c.covered().map(|s| s.into_iter().collect::<Vec<_>>());
    let t = std::time::Instant::now();
    loop {
        let rec = linerate_dataplane::record::read_firewall(record).unwrap();
        if rec.as_ref().is_some_and(|r| r.judged == want) {
            // Settled: no generation in the making.
            std::thread::sleep(Duration::from_millis(100));
            let again = linerate_dataplane::record::read_firewall(record).unwrap();
            if again.map(|r| r.generation) == rec.map(|r| r.generation) {
                return;
            }
            continue;
        }
        assert!(
            t.elapsed() < Duration::from_secs(10),
            "seed {seed}: the router's firewall judges {:?}, not {want:?}",
            rec.map(|r| (r.judged, r.refused))
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Frames of `ifindex` the fast path judged itself (forwarded or dropped by
/// the firewall) so far.
fn fast_path_judged(record: &str, ifindex: u32) -> u64 {
    let (_, map) = linerate_dataplane::record::open(record).unwrap();
    let c = linerate_dataplane::record::read(&map, ifindex).unwrap();
    c.packets_of("forwarded") + c.packets_of("drop_firewall")
}

/// What the fast path counted, by rule (family, table, chain, handle),
/// both IP families summed.
fn fast_path_counters(record: &str) -> BTreeMap<(String, String, String, u64), u64> {
    let rec = linerate_dataplane::record::read_firewall(record)
        .unwrap()
        .unwrap_or_default();
    let mut m = BTreeMap::new();
    for r in rec.rules {
        let (family, table) = r.table.split_once(' ').unwrap();
        *m.entry((family.to_string(), table.to_string(), r.chain, r.handle))
            .or_default() += r.packets;
    }
    m
}

#[test]
#[cfg_attr(
    not(feature = "privileged"),
    ignore = "needs root: --features privileged"
)]
fn random_rulesets_judge_frames_as_the_kernel_does() {
    oracle(LAB, false);
}

/// The same rulesets and frames with linerate's router in the DUT: each
/// frame is sent twice, the first time most miss the fast path's cache
/// and the kernel judges them, the second time the fast path judges what
/// it learned. Every accepted frame arrives twice and no other once, and
/// each rule's kernel counter plus what the fast path counted for it is
/// twice what the evaluator counted.
#[test]
#[cfg_attr(
    not(feature = "privileged"),
    ignore = "needs root: --features privileged"
)]
fn random_rulesets_judge_frames_as_the_kernel_does_with_linerate_attached() {
    oracle(LAB_ROUTED, true);
}

fn oracle(lab: &'static str, routed: bool) {
    let _down = common::lab::up(lab);
    // The lab's own chatter would pass the DUT's chains and count: router
    // solicitations go on with a backoff, so they are turned off; MLD's
    // reports after the links came up are done before the first ruleset.
    for ns in ["gen", "dut", "recv"] {
        for k in [
            "net.ipv6.conf.all.router_solicitations=0",
            "net.ipv6.conf.default.router_solicitations=0",
        ] {
            linerate_host::cmd::in_netns(&format!("{lab}-{ns}"), "sysctl", &["-qw", k]).unwrap();
        }
        let links = Command::new("ip")
            .args(["-n", &format!("{lab}-{ns}"), "-o", "link"])
            .output()
            .unwrap();
        for l in String::from_utf8_lossy(&links.stdout).lines() {
            let name = l
                .split(':')
                .nth(1)
                .unwrap()
                .trim()
                .split('@')
                .next()
                .unwrap();
            let k = format!("net.ipv6.conf.{name}.router_solicitations=0");
            linerate_host::cmd::in_netns(&format!("{lab}-{ns}"), "sysctl", &["-qw", &k]).unwrap();
        }
    }
    std::thread::sleep(Duration::from_secs(3));
    let ifs = (ifindex(lab, "dut0"), ifindex(lab, "dut1"));
    // The receiver answers nothing (its errors back would pass the DUT's
    // chains and count); what arrives is captured before this drops it.
    let sink = Command::new("ip")
        .args(["netns", "exec", &format!("{lab}-recv"), "nft", "add table netdev sink; add chain netdev sink in { type filter hook ingress device recv0 priority 0; policy drop; }"])
        .output()
        .unwrap();
    assert!(
        sink.status.success(),
        "{}",
        String::from_utf8_lossy(&sink.stderr)
    );
    let record = format!("{lab}-dut");
    let _router = routed.then(|| common::lab::start_router(lab));
    let (mut first_judged, mut fast_judged, mut second_pass) = (0u64, 0u64, 0u64);
    let rulesets: u64 = std::env::var("FIREWALL_ORACLE_RULESETS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(24);
    let (mut frames_total, mut accepted_total, mut counted_total, mut ties, mut disturbed) =
        (0, 0, 0, 0, 0);
    for seed in 0..rulesets {
        let text = a_ruleset(seed);
        let _ = nft(lab, &["flush", "ruleset"]);
        let file = tempfile::NamedTempFile::new().unwrap();
        std::fs::write(file.path(), format!("{text}{WATCH_OWN}")).unwrap();
        let load = nft(lab, &["-f", &file.path().display().to_string()]);
        assert!(
            load.status.success(),
            "seed {seed}: nft -f:\n{}\n{text}",
            String::from_utf8_lossy(&load.stderr)
        );
        let json = nft(lab, &["-j", "list", "ruleset"]);
        let ruleset =
            linerate_firewall::parse(&String::from_utf8_lossy(&json.stdout), &|n| match n {
                "dut0" => Some(ifs.0),
                "dut1" => Some(ifs.1),
                _ => None,
            })
            .unwrap();
        // The one thing the grammar draws that is not compiled: two
        // tables' base chains at one hook and priority.
        let mut refused = false;
        for ipv6 in [false, true] {
            if let Err(why) = ruleset.family(ipv6) {
                assert!(
                    why.iter()
                        .all(|w| w.why.contains("the same hook and priority")),
                    "seed {seed}: not compiled: {why:?}\n{text}"
                );
                refused = true;
            }
        }
        if refused {
            ties += 1;
            continue;
        }
        if routed {
            wait_for_firewall(&record, &ruleset, seed);
        }
        let filter = |ipv6: bool| -> &Filter { ruleset.family(ipv6).as_ref().unwrap() };
        let mut r = StdRng::seed_from_u64(seed ^ 0x5eed);
        let mut sent = Vec::new();
        let mut expect_arrive = Vec::new();
        let mut counted: BTreeMap<(String, String, String, u64), u64> = BTreeMap::new();
        for i in 0..60u32 {
            let tag = (seed as u32) << 16 | i;
            let (frame, p) = a_frame(&mut r, tag, ifs);
            let f = filter(p.ipv6);
            let j = judge(f, &p);
            if j.verdict == Verdict::Accept {
                expect_arrive.push(tag);
            }
            for (c, rule) in &j.counted {
                let chain = &f.chains[*c];
                let key = (
                    chain.table.family.clone(),
                    chain.table.name.clone(),
                    chain.name.clone(),
                    chain.rules[*rule].handle,
                );
                *counted.entry(key).or_default() += 1;
            }
            sent.push((tag, frame, p, j.verdict));
        }
        if std::env::var("FWO_DEBUG").is_ok() {
            for (tag, frame, p, v) in &sent {
                let before: u64 = kernel_counters(lab).values().sum();
                send(
                    lab,
                    vec![frame.clone()],
                    Duration::from_millis(1),
                    Duration::from_millis(50),
                );
                let after: u64 = kernel_counters(lab).values().sum();
                eprintln!("DBG {tag:#x} {v:?} counted {} {p:?}", after - before);
            }
        }
        // Whatever else crosses the DUT meanwhile (its own or a
        // neighbour's chatter) passes its chains and counts.
        let watch = Arc::new(AtomicBool::new(false));
        let dut = format!("{lab}-dut");
        let watchers = [
            capture_on(dut.clone(), "dut0", watch.clone(), true),
            capture_on(dut.clone(), "dut1", watch.clone(), true),
        ];
        let frames: Vec<Vec<u8>> = sent.iter().map(|s| s.1.clone()).collect();
        let send_all = || {
            send(
                lab,
                frames.clone(),
                Duration::from_millis(2),
                Duration::from_millis(300),
            )
        };
        // Each arrival of one of the frames sent, by tag.
        let arrivals = |seen: &common::frames::Seen| -> Vec<u32> {
            seen.iter()
                .filter(|((dev, _), _)| dev == "recv0")
                .filter_map(|((_, f), n)| {
                    let tail = f.get(f.len().checked_sub(4)?..)?;
                    let tag = u32::from_be_bytes(tail.try_into().ok()?);
                    sent.iter().any(|s| s.0 == tag).then_some(vec![tag; *n])
                })
                .flatten()
                .collect()
        };
        let before = routed.then(|| fast_path_judged(&record, ifs.0));
        let mut arrived = arrivals(&send_all());
        if let Some(before) = before {
            first_judged += fast_path_judged(&record, ifs.0) - before;
        }
        let passes = if routed {
            // Learned meanwhile: the fast path judges what it can.
            std::thread::sleep(Duration::from_millis(200));
            let before = fast_path_judged(&record, ifs.0);
            arrived.extend(arrivals(&send_all()));
            fast_judged += fast_path_judged(&record, ifs.0) - before;
            second_pass += sent.iter().filter(|s| s.3 != Verdict::Kernel).count() as u64;
            expect_arrive = expect_arrive.repeat(2);
            2
        } else {
            1
        };
        arrived.sort();
        expect_arrive.sort();
        if arrived != expect_arrive {
            let mut msg = String::new();
            for (tag, _, p, v) in &sent {
                let times = |tags: &[u32]| tags.iter().filter(|t| *t == tag).count();
                if times(&arrived) != times(&expect_arrive) {
                    writeln!(
                        msg,
                        "frame {tag:#x}: evaluator {v:?}, delivered {} of {passes} times: {p:?}",
                        times(&arrived)
                    )
                    .unwrap();
                }
            }
            panic!("seed {seed}:\n{msg}\nruleset:\n{text}");
        }
        watch.store(true, Ordering::SeqCst);
        // Ours: a frame sent, as sent or forwarded (same length, same
        // tag); an ICMP error quoting one is not.
        let ours: Vec<(usize, u32)> = sent.iter().map(|s| (s.1.len(), s.0)).collect();
        let foreign: Vec<Vec<u8>> = watchers
            .into_iter()
            .flat_map(|w| w.join().unwrap())
            .filter(|f| {
                let tag = f
                    .len()
                    .checked_sub(4)
                    .map(|at| u32::from_be_bytes(f[at..].try_into().unwrap()));
                let ip = f.len() > 14 && matches!([f[12], f[13]], [0x08, 0x00] | [0x86, 0xdd]);
                ip && !tag.is_some_and(|t| ours.contains(&(f.len(), t)))
            })
            .collect();
        let mut kernel = kernel_counters(lab);
        let own: u64 = kernel
            .iter()
            .filter(|(k, _)| k.1 == "lrt_watch")
            .map(|(_, n)| n)
            .sum();
        kernel.retain(|k, _| k.1 != "lrt_watch");
        if own > 0 {
            eprintln!("seed {seed}: the DUT sent {own} packets of its own; counters not compared");
            disturbed += 1;
            continue;
        }
        if !foreign.is_empty() {
            eprintln!("seed {seed}: {} frames of the lab's own crossed the DUT; counters not compared: {:02x?}", foreign.len(), foreign.iter().map(|f| &f[..f.len().min(60)]).collect::<Vec<_>>());
            disturbed += 1;
            continue;
        }
        // Counters: rules with none the evaluator reached hold 0. With the
        // router, what the fast path counted is added to the kernel's.
        if routed {
            // The router's record is brought up to date every 200 ms.
            std::thread::sleep(Duration::from_millis(600));
            for (rule, n) in fast_path_counters(&record) {
                *kernel.entry(rule).or_default() += n;
            }
        }
        let mut ours = kernel.clone();
        for v in ours.values_mut() {
            *v = 0;
        }
        ours.extend(counted.iter().map(|(k, n)| (k.clone(), n * passes as u64)));
        assert_eq!(
            kernel,
            ours,
            "seed {seed}: counters (kernel{}, evaluator)\n{text}",
            if routed { " + fast path" } else { "" }
        );
        frames_total += sent.len() * passes;
        accepted_total += expect_arrive.len();
        counted_total += counted.values().sum::<u64>() * passes as u64;
    }
    let _ = nft(lab, &["flush", "ruleset"]);
    if routed {
        eprintln!("the fast path judged {first_judged} frames of first passes (the classifier's verdicts) and {fast_judged} of second passes (the cache's), of the {second_pass} a pass it could judge");
        assert!(
            first_judged * 10 >= second_pass * 8,
            "the classifier judged most first passes: {first_judged} of {second_pass}"
        );
        assert!(
            fast_judged * 10 >= second_pass * 8,
            "the fast path judged most second passes: {fast_judged} of {second_pass}"
        );
    }
    eprintln!("{rulesets} rulesets ({ties} refused: equal priorities; counters of {disturbed} not compared: the lab's own frames crossed), {frames_total} frames, {accepted_total} delivered, {counted_total} counter hits");
    assert!(
        disturbed * 5 < rulesets,
        "counters compared for most rulesets: {disturbed} of {rulesets} disturbed"
    );
    assert!(
        ties * 3 < rulesets,
        "most rulesets compiled: {ties} of {rulesets} refused"
    );
    // The draw exercised both outcomes and the counters.
    assert!(
        accepted_total > frames_total / 10 && accepted_total < frames_total * 9 / 10,
        "{accepted_total} of {frames_total}"
    );
    assert!(counted_total > 0);
}
