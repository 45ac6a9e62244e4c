//! The reader on rulesets nft 1.0.6 printed (tests/data: the .nft files
//! loaded with `nft -f` in a scratch namespace, listed with `nft -j list
//! ruleset`), and the evaluator on them. The kernel's own verdicts on
//! random rulesets are the linerate crate's firewall_oracle test.
use linerate_firewall::eval::{judge, Packet, Verdict};
use linerate_firewall::ruleset::{ct_state, Filter, Hook};
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

/// `ct state` and `ct direction` are read; the rules reading them judge
/// by the packet's connection as nft_ct_get_eval reads it.
#[test]
fn ct_state_and_direction_are_read_and_judged() {
    let r = read("nft-1.0.6-with-ct.json");
    let (v4, v6) = (r.ipv4.unwrap(), r.ipv6.unwrap());
    assert!(v4.reads_ct() && v6.reads_ct());
    // Rule 20: `ct state established accept`, after rules that let this
    // UDP packet from 192.0.2.1 through to the policy (drop).
    let mut p = packet(false, "192.0.2.1", 17, ports(4000, 4000, 0));
    for (state, reply, want) in [
        (ct_state::ESTABLISHED, false, (Verdict::Accept, Some(20))),
        (ct_state::ESTABLISHED, true, (Verdict::Accept, Some(20))),
        (ct_state::NEW, false, (Verdict::Drop, None)),
        (ct_state::RELATED, true, (Verdict::Drop, None)),
        (ct_state::INVALID, false, (Verdict::Drop, None)),
    ] {
        p.ct_state = state;
        p.ct_reply = reply;
        assert_eq!(decided_by(&v4, &p), want, "state {state} reply {reply}");
    }
}

/// nft 1.0.6's JSON for one inet table's forward chain of `rules`, and
/// `pre` for a prerouting chain at `pre_priority` jumping to chain `more`.
fn ct_ruleset(rules: &[&str], pre_priority: i32, more: &[&str]) -> Ruleset {
    let mut objects = vec![
        r#"{"table": {"family": "inet", "name": "t", "handle": 1}}"#.to_string(),
        r#"{"chain": {"family": "inet", "table": "t", "name": "fw", "handle": 1, "type": "filter", "hook": "forward", "prio": 0, "policy": "drop"}}"#.to_string(),
        format!(r#"{{"chain": {{"family": "inet", "table": "t", "name": "pre", "handle": 2, "type": "filter", "hook": "prerouting", "prio": {pre_priority}, "policy": "accept"}}}}"#),
        r#"{"chain": {"family": "inet", "table": "t", "name": "more", "handle": 3}}"#.to_string(),
        r#"{"rule": {"family": "inet", "table": "t", "chain": "pre", "handle": 10, "expr": [{"jump": {"target": "more"}}]}}"#.to_string(),
    ];
    for (chain, exprs) in [("fw", rules), ("more", more)] {
        for (i, e) in exprs.iter().enumerate() {
            objects.push(format!(
                r#"{{"rule": {{"family": "inet", "table": "t", "chain": "{chain}", "handle": {}, "expr": {e}}}}}"#,
                20 + i
            ));
        }
    }
    let json = format!(r#"{{"nftables": [{}]}}"#, objects.join(","));
    parse(&json, &|_| None).unwrap()
}

/// The shapes nft prints for ct matches (listed from the kernel with nft
/// 1.0.6): bare flags (any of them), `!=`, a set, a verdict map, a mask.
#[test]
fn ct_matches_in_every_shape_nft_prints() {
    let rules = [
        r#"[{"match": {"op": "in", "left": {"ct": {"key": "state"}}, "right": ["established", "related"]}}, {"accept": null}]"#,
        r#"[{"match": {"op": "==", "left": {"ct": {"key": "direction"}}, "right": "reply"}}, {"drop": null}]"#,
        r#"[{"match": {"op": "==", "left": {"&": [{"ct": {"key": "state"}}, ["established", "new"]]}, "right": "new"}}, {"match": {"op": "!=", "left": {"ct": {"key": "state"}}, "right": "established"}}, {"vmap": {"key": {"ct": {"key": "direction"}}, "data": {"set": [["original", {"accept": null}]]}}}]"#,
        r#"[{"match": {"op": "==", "left": {"ct": {"key": "state"}}, "right": {"set": ["invalid", "untracked"]}}}, {"vmap": {"key": {"ct": {"key": "state"}}, "data": {"set": [["invalid", {"drop": null}]]}}}]"#,
    ];
    let r = ct_ruleset(&rules, 0, &[]);
    let f = r.ipv4.unwrap();
    let mut p = packet(false, "192.0.2.1", 17, ports(1, 2, 0));
    for (state, reply, want) in [
        (ct_state::ESTABLISHED, false, (Verdict::Accept, Some(20))),
        (ct_state::RELATED, true, (Verdict::Accept, Some(20))),
        (ct_state::NEW, true, (Verdict::Drop, Some(21))),
        (ct_state::NEW, false, (Verdict::Accept, Some(22))),
        // Invalid: no direction, so rule 21 fails; rule 23's map drops.
        (ct_state::INVALID, true, (Verdict::Drop, Some(23))),
        // Untracked: in rule 23's set, not in its map: the policy.
        (ct_state::UNTRACKED, false, (Verdict::Drop, None)),
    ] {
        p.ct_state = state;
        p.ct_reply = reply;
        assert_eq!(decided_by(&f, &p), want, "state {state} reply {reply}");
    }
}

/// A chain at conntrack's priority or before it sees no connection yet:
/// a ct match reached from there keeps the family in the kernel, named.
#[test]
fn a_ct_match_before_conntracks_hook_is_refused() {
    let ct = r#"[{"match": {"op": "in", "left": {"ct": {"key": "state"}}, "right": "new"}}, {"drop": null}]"#;
    let r = ct_ruleset(&[], -300, &[ct]);
    let why = r.ipv4.expect_err("refused");
    assert_eq!(
        why[0].to_string(),
        "table inet t chain more: reads ct from prerouting chain pre at priority -300, before conntrack's (-200)"
    );
    assert!(ct_ruleset(&[], -199, &[ct]).ipv6.is_ok());
    let other =
        r#"[{"match": {"op": "==", "left": {"ct": {"key": "mark"}}, "right": 1}}, {"drop": null}]"#;
    let why = ct_ruleset(&[other], 0, &[]).ipv4.expect_err("refused");
    assert!(why[0].why.contains("ct mark is not compiled"), "{}", why[0]);
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
        ct_state: 0,
        ct_reply: false,
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

/// nat chains at prerouting and postrouting are read as the family's
/// nat chains (their rules, which meet first packets only, are not
/// compiled); beside them a filter chain at prerouting keeps the family
/// in the kernel, a forward chain does not.
#[test]
fn nat_chains_are_read_and_refused_beside_prerouting_filters() {
    let ruleset = |pre_filter: bool| {
        let mut objects = vec![
            r#"{"table": {"family": "ip", "name": "t", "handle": 1}}"#.to_string(),
            r#"{"chain": {"family": "ip", "table": "t", "name": "fw", "handle": 1, "type": "filter", "hook": "forward", "prio": 0, "policy": "accept"}}"#.to_string(),
            r#"{"chain": {"family": "ip", "table": "t", "name": "post", "handle": 2, "type": "nat", "hook": "postrouting", "prio": 100, "policy": "accept"}}"#.to_string(),
            r#"{"rule": {"family": "ip", "table": "t", "chain": "post", "handle": 10, "expr": [{"masquerade": null}]}}"#.to_string(),
        ];
        if pre_filter {
            objects.push(r#"{"chain": {"family": "ip", "table": "t", "name": "pre", "handle": 3, "type": "filter", "hook": "prerouting", "prio": 0, "policy": "accept"}}"#.to_string());
        }
        parse(
            &format!(r#"{{"nftables": [{}]}}"#, objects.join(",")),
            &|_| None,
        )
        .unwrap()
    };
    let f = ruleset(false).ipv4.expect("read");
    assert_eq!(f.base.len(), 1);
    assert_eq!(
        f.nat
            .iter()
            .map(|n| format!("{} {}", n.table, n.name))
            .collect::<Vec<_>>(),
        ["ip t post"]
    );
    assert!(ruleset(false).ipv6.expect("read").is_empty(), "an ip table");
    let why = ruleset(true).ipv4.expect_err("refused");
    assert!(why[0].why.contains("beside nat chains"), "{}", why[0]);
}
