//! The reader on rulesets nft 1.0.6 printed (tests/data: the .nft files
//! loaded with `nft -f` in a scratch namespace, listed with `nft -j list
//! ruleset`), and the evaluator on them. The kernel's own verdicts on
//! random rulesets are the linerate crate's firewall_oracle test.
use linerate_firewall::eval::{judge, Packet, Verdict};
use linerate_firewall::ruleset::{Filter, Hook};
use linerate_firewall::{parse, Ruleset};

fn read(file: &str) -> Ruleset {
    let path = format!("{}/tests/data/{file}", env!("CARGO_MANIFEST_DIR"));
    let json = std::fs::read_to_string(path).unwrap();
    parse(&json, &|name| match name {
        "lo" => Some(1),
        "dut0" => Some(2),
        "dut1" => Some(3),
        _ => None,
    })
    .unwrap()
}

#[test]
fn a_ct_match_keeps_both_families_of_an_inet_table_in_the_kernel() {
    let r = read("nft-1.0.6-with-ct.json");
    for (family, judged) in [("IPv4", &r.ipv4), ("IPv6", &r.ipv6)] {
        let why = judged.as_ref().expect_err(family);
        assert_eq!(why.len(), 1, "{family}: {why:?}");
        let s = why[0].to_string();
        assert!(
            s.starts_with(
                "table inet filter chain forward_filter rule handle 20: ct (connection tracking)"
            ),
            "{family}: {s}"
        );
    }
}

fn stateless() -> (Filter, Filter) {
    let r = read("nft-1.0.6-stateless.json");
    (r.ipv4.unwrap(), r.ipv6.unwrap())
}

#[test]
fn base_chains_come_in_the_kernels_order() {
    let (v4, v6) = stateless();
    let order = |f: &Filter| -> Vec<(Hook, i32, String)> {
        f.base
            .iter()
            .map(|b| (b.hook, b.priority, f.chains[b.chain].name.clone()))
            .collect()
    };
    assert_eq!(
        order(&v4),
        vec![
            (Hook::Prerouting, -150, "pre".to_string()),
            (Hook::Forward, 0, "forward_filter".to_string())
        ]
    );
    assert_eq!(
        order(&v6),
        vec![(Hook::Forward, 0, "forward_filter".to_string())]
    );
    // forward_filter's 11 rules and more's 2 (reached by jump and goto);
    // the ip table's one rule for IPv4 only.
    assert_eq!(v4.rules(), 14);
    assert_eq!(v6.rules(), 13);
    let sets: Vec<&str> = v4.sets.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(sets, ["allowed", "bad6", "ports"]);
}

/// A forwarded packet from dut0 to dut1.
fn packet(ipv6: bool, saddr: &str, l4proto: u8, transport: Vec<u8>) -> Packet {
    let addr = |s: &str| -> u128 {
        match s.parse::<std::net::IpAddr>().unwrap() {
            std::net::IpAddr::V4(a) => u32::from(a) as u128,
            std::net::IpAddr::V6(a) => u128::from(a),
        }
    };
    Packet {
        ipv6,
        iif: 2,
        iifname: "dut0".into(),
        oif: 3,
        oifname: "dut1".into(),
        saddr: addr(saddr),
        daddr: addr(if ipv6 { "2001:2::9" } else { "10.9.9.9" }),
        l4proto,
        nexthdr: l4proto,
        later_fragment: false,
        transport,
    }
}

/// A TCP or UDP header's first 14 bytes: ports, and TCP's flags.
fn ports(sport: u16, dport: u16, flags: u8) -> Vec<u8> {
    let mut t = vec![0u8; 20];
    t[0..2].copy_from_slice(&sport.to_be_bytes());
    t[2..4].copy_from_slice(&dport.to_be_bytes());
    t[13] = flags;
    t
}

const SYN: u8 = 0x02;
const ACK: u8 = 0x10;

/// The handle of the rule that decided the forward chain (None: policy).
fn decided_by(f: &Filter, p: &Packet) -> (Verdict, Option<u64>) {
    let j = judge(f, p);
    let last = j.decided.last().copied().flatten();
    (j.verdict, last.map(|(c, r)| f.chains[c].rules[r].handle))
}

#[test]
fn packets_are_judged_as_nf_tables_judges_them() {
    let (v4, v6) = stateless();
    let udp = |s: &str, sport, dport| packet(false, s, 17, ports(sport, dport, 0));
    let tcp = |s: &str, dport, flags| packet(false, s, 6, ports(40000, dport, flags));
    // iifname, oifname in a set with a wildcard, a prefix, a port range.
    assert_eq!(
        decided_by(&v4, &udp("198.18.0.5", 1, 1500)),
        (Verdict::Accept, Some(7))
    );
    let mut eth = udp("198.18.0.5", 1, 1500);
    eth.oifname = "eth3".into();
    assert_eq!(decided_by(&v4, &eth), (Verdict::Accept, Some(7)));
    eth.oifname = "et".into();
    assert_eq!(decided_by(&v4, &eth), (Verdict::Drop, None), "policy");
    // A concatenation against an interval set.
    assert_eq!(
        decided_by(&v4, &tcp("10.1.2.3", 22, ACK)),
        (Verdict::Accept, Some(8))
    );
    assert_eq!(
        decided_by(&v4, &tcp("192.168.1.1", 85, SYN)),
        (Verdict::Accept, Some(8))
    );
    // A masked flag test jumps; the jumped-to chain drops.
    let j = judge(&v4, &tcp("192.168.1.2", 85, SYN));
    assert_eq!(j.verdict, Verdict::Drop);
    let more = v4.chains.iter().position(|c| c.name == "more").unwrap();
    assert!(j.counted.contains(&(more, 1)), "more's counter: {j:?}");
    // A verdict map on th dport.
    assert_eq!(
        decided_by(&v4, &tcp("192.168.1.2", 22, ACK)),
        (Verdict::Accept, Some(12))
    );
    assert_eq!(
        decided_by(&v4, &tcp("192.168.1.2", 23, ACK)),
        (Verdict::Drop, Some(12))
    );
    // ICMP by type; a protocol that is not UDP is rejected: the kernel's.
    let echo = packet(false, "1.1.1.1", 1, vec![8, 0, 0, 0]);
    assert_eq!(decided_by(&v4, &echo), (Verdict::Accept, Some(13)));
    let gre = packet(false, "1.1.1.1", 47, vec![0; 8]);
    assert_eq!(decided_by(&v4, &gre), (Verdict::Kernel, Some(16)));
    // A later fragment has no ports: rules on ports fail, even `!=`.
    let mut frag = udp("198.18.0.5", 1, 1500);
    frag.later_fragment = true;
    assert_eq!(decided_by(&v4, &frag), (Verdict::Drop, None));
    // The prerouting chain counted every IPv4 packet not to 1.2.3.4.
    let j = judge(&v4, &udp("198.18.0.5", 1, 1500));
    assert!(j.counted.contains(&(v4.base[0].chain, 0)), "{j:?}");

    let tcp6 = |s: &str, sport, dport| packet(true, s, 6, ports(sport, dport, ACK));
    // nfproto ipv6 and a port outside a range: goto more, which drops.
    assert_eq!(
        judge(&v6, &tcp6("2001:1::1", 5000, 80)).verdict,
        Verdict::Drop
    );
    // `ip protocol` and `ip daddr` fail on IPv6, `!=` too: the policy.
    assert_eq!(
        decided_by(&v6, &tcp6("2001:1::1", 80, 80)),
        (Verdict::Drop, None)
    );
    assert_eq!(
        decided_by(&v6, &tcp6("2001:db8::1", 80, 22)),
        (Verdict::Drop, Some(9))
    );
    let ns = packet(true, "2001:1::1", 58, vec![135, 0, 0, 0]);
    assert_eq!(decided_by(&v6, &ns), (Verdict::Accept, Some(15)));
}
