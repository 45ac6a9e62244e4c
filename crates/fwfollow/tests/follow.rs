//! Rules and set elements changed with nft, followed as the firewall's
//! thread follows them (nf_tables' notifications, the rules added as
//! `nft -j monitor` prints them, linerate_fwfollow::follow) and applied in
//! place: after every change, each family's filter is the one a whole
//! read of the kernel's ruleset gives (chains and sets in the same order
//! once put in a canonical one), and so is its classifier where the order
//! is the read's. Random changes: rules inserted, appended, placed before
//! and after others, replaced and deleted, one or several a transaction,
//! with inline sets, named sets, jumps and counters; elements added and
//! removed.
use linerate_firewall::compile::Compiled;
use linerate_firewall::ruleset::{Action, Against, Elements, Filter, Step};
use linerate_fwfollow::follow::{self, Notifications};
use linerate_fwfollow::monitor::RuleMonitor;
use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

const RULESET: &str = r#"
table inet t {
    set blocked { type ipv4_addr; elements = { 192.0.2.1 } }
    set ports { type inet_service; flags interval; elements = { 1000-2000 } }
    set spare { type ipv4_addr; }
    chain sub {
        tcp dport 22 counter drop
    }
    chain transit {
        type filter hook forward priority 0; policy accept;
        ip saddr 198.51.100.0/24 jump sub
        ip saddr @blocked drop
        ip daddr 10.0.0.0/24 udp dport 53 drop
        ip daddr 10.0.1.0/24 accept
    }
}
"#;

fn nft_file(text: &str) {
    let path = std::env::temp_dir().join(format!("lrt-follow-{}.nft", std::process::id()));
    std::fs::write(&path, text).unwrap();
    let out = std::process::Command::new("nft")
        .args(["-f", path.to_str().unwrap()])
        .output()
        .unwrap();
    std::fs::remove_file(&path).unwrap();
    assert!(
        out.status.success(),
        "nft -f:\n{text}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn whole(generation: u32) -> Compiled {
    let rs = linerate_firewall::read::read_current_with(&|t, s| {
        linerate_netlink::nft_elements::dump(t, s)
    })
    .unwrap();
    Compiled::new(generation, &rs, BTreeMap::new(), true).0
}

/// A rule for chain `transit` (jumps only there) or `sub`.
fn rule(r: &mut StdRng, in_fwd: bool) -> String {
    let (a, b, p): (u32, u32, u32) = (
        r.gen_range(0..256),
        r.gen_range(0..256),
        r.gen_range(1..65534),
    );
    let mut shapes = vec![
        format!("ip daddr 10.{a}.{b}.0/24 udp dport {p} drop"),
        format!("tcp dport {{ {p}, {} }} counter accept", p + 1),
        "ip saddr @blocked counter drop".to_string(),
        "tcp dport @ports drop".to_string(),
        format!("ip6 daddr 2001:db8:{a:x}::/48 tcp dport {p} drop"),
        "meta l4proto icmp accept".to_string(),
        format!("udp sport {p}-{} counter", (p + 10).min(65535)),
    ];
    if in_fwd {
        shapes.push(format!("ip saddr 203.0.{a}.0/24 jump sub"));
        // A set no rule reads in the ruleset loaded.
        shapes.push("ip daddr @spare drop".into());
    }
    shapes.choose(r).unwrap().clone()
}

/// Whether rule `h` of `chain` jumps (removing it may leave chain `sub`
/// unreached: the ruleset is then read whole).
fn jumps(c: &Compiled, chain: &str, h: u64) -> bool {
    let f = &c.families[0].as_ref().unwrap().filter;
    f.chains.iter().filter(|ch| ch.name == chain).any(|ch| {
        ch.rules.iter().any(|r| {
            r.handle == h
                && r.steps
                    .iter()
                    .any(|s| matches!(s, Step::Verdict(Action::Jump(_))))
        })
    })
}

/// Whether rule `h` of `chain` reads a named set (removing it may leave
/// the set unread: the ruleset is then read whole).
fn reads_a_set(c: &Compiled, chain: &str, h: u64) -> bool {
    let f = &c.families[0].as_ref().unwrap().filter;
    f.chains.iter().filter(|ch| ch.name == chain).any(|ch| {
        ch.rules.iter().any(|r| {
            r.handle == h
                && r.steps.iter().any(|s| {
                    matches!(
                        s,
                        Step::Test(linerate_firewall::ruleset::Test {
                            against: Against::Named(_),
                            ..
                        })
                    )
                })
        })
    })
}

/// A random change, as nft -f text, and whether it may have the ruleset
/// read whole (a set or chain the filter lacks, or a chain left behind).
fn change(r: &mut StdRng, c: &Compiled) -> (String, bool) {
    let table = linerate_firewall::ruleset::TableId {
        family: "inet".into(),
        name: "t".into(),
    };
    let chain = if r.gen_bool(0.8) { "transit" } else { "sub" };
    let handles = c.handles(&table, chain).unwrap_or_default();
    let in_fwd = chain == "transit";
    let body = rule(r, in_fwd);
    let Some(&h) = handles.choose(r) else {
        return (
            format!("add rule inet t {chain} {body}"),
            body.contains('@'),
        );
    };
    let text = match r.gen_range(0..9) {
        0 => format!("insert rule inet t {chain} {body}"),
        1 => format!("add rule inet t {chain} {body}"),
        2 => format!("add rule inet t {chain} position {h} {body}"),
        3 => format!("insert rule inet t {chain} position {h} {body}"),
        4 => format!("replace rule inet t {chain} handle {h} {body}"),
        5 => format!("delete rule inet t {chain} handle {h}"),
        6 => {
            let e = format!("192.0.2.{}", r.gen_range(2..250));
            // Deleting an element not there fails: added first.
            let second = if r.gen_bool(0.5) { "add" } else { "delete" };
            return (
                format!(
                    "add element inet t blocked {{ {e} }}\n{second} element inet t blocked {{ {e} }}"
                ),
                false,
            );
        }
        // Several in one transaction.
        7 => format!(
            "insert rule inet t {chain} {body}\ninsert rule inet t {chain} {}\nadd rule inet t {chain} {}",
            rule(r, in_fwd),
            rule(r, in_fwd)
        ),
        _ => format!("add rule inet t {chain} {body}\ndelete rule inet t {chain} handle {h}"),
    };
    let removes = text.contains("delete rule") || text.contains("replace rule");
    // A set no rule read before is read with the ruleset.
    let f = &c.families[0].as_ref().unwrap().filter;
    let new_set = ["blocked", "ports", "spare"]
        .iter()
        .any(|n| text.contains(&format!("@{n}")) && !f.sets.iter().any(|s| s.name == *n));
    let whole_ok = text.contains("jump")
        || new_set
        || (removes && (jumps(c, chain, h) || reads_a_set(c, chain, h)));
    (text, whole_ok)
}

/// `f` with its chains and sets in order of (table, name), every index
/// into them moved along, and the sets' elements sorted: two reads that
/// found chains in another order, or elements, compare equal.
fn canonical(f: &Filter) -> Filter {
    let mut chains: Vec<usize> = (0..f.chains.len()).collect();
    chains.sort_by_key(|&i| (f.chains[i].table.clone(), f.chains[i].name.clone()));
    let mut sets: Vec<usize> = (0..f.sets.len()).collect();
    sets.sort_by_key(|&i| (f.sets[i].table.clone(), f.sets[i].name.clone()));
    let chain_at = |i: usize| chains.iter().position(|&c| c == i).unwrap();
    let set_at = |i: usize| sets.iter().position(|&s| s == i).unwrap();
    let action = |a: &mut Action| {
        if let Action::Jump(i) | Action::Goto(i) = a {
            *i = chain_at(*i);
        }
    };
    let elements = |e: &mut Elements| e.verdicts.iter_mut().for_each(action);
    let against = |a: &mut Against| match a {
        Against::Named(i) => *i = set_at(*i),
        Against::Inline(e) => elements(Arc::make_mut(e)),
    };
    let mut out = Filter {
        base: f.base.clone(),
        chains: chains.iter().map(|&i| f.chains[i].clone()).collect(),
        sets: sets.iter().map(|&i| f.sets[i].clone()).collect(),
        nat: f.nat.clone(),
    };
    for b in &mut out.base {
        b.chain = chain_at(b.chain);
    }
    for s in &mut out.sets {
        elements(&mut s.elements);
        // A hash set's elements come in the kernel's order, not the
        // order they were added in.
        let e = &s.elements;
        let mut pairs: Vec<_> = (0..e.keys.len())
            .map(|i| (e.keys[i].clone(), e.verdicts.get(i).cloned()))
            .collect();
        pairs.sort_by_key(|p| format!("{p:?}"));
        let keys = pairs.iter().map(|p| p.0.clone()).collect();
        let verdicts = pairs.into_iter().filter_map(|p| p.1).collect();
        s.elements = Elements {
            keys,
            verdicts,
            ..Default::default()
        };
    }
    for c in &mut out.chains {
        for r in &mut c.rules {
            for s in &mut r.steps {
                match s {
                    Step::Test(t) => against(&mut t.against),
                    Step::Verdict(a) => action(a),
                    Step::Vmap { map, .. } => against(map),
                    Step::Counter => {}
                }
            }
        }
    }
    out
}

#[test]
#[cfg_attr(
    not(feature = "privileged"),
    ignore = "needs root: --features privileged"
)]
fn rules_and_elements_applied_in_place_are_what_a_whole_read_gives() {
    let (_pair, _fp) = linerate_testkit::plane::scratch_pair("fwfollow", "fwf");
    nft_file(RULESET);
    let sock =
        linerate_netlink::socket::socket_on(netlink_sys::protocols::NETLINK_NETFILTER, 0).unwrap();
    sock.add_membership(linerate_netlink::netfilter::NFNLGRP_NFTABLES)
        .unwrap();
    linerate_netlink::socket::force_rcvbuf(&sock, linerate_netlink::socket::NOTIFY_RCVBUF);
    let mut monitor = RuleMonitor::start().unwrap();
    let mut buf = vec![0u8; 1 << 20];
    // nft subscribes after it starts: rules added until it prints one.
    let started = Instant::now();
    'ready: loop {
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "nft monitor printed nothing"
        );
        nft_file("add rule inet t sub udp dport 9 drop\n");
        std::thread::sleep(Duration::from_millis(50));
        while let Ok(n) = sock.recv(&mut &mut buf[..], libc::MSG_DONTWAIT) {
            for m in linerate_netlink::wire::messages(&buf[..n]) {
                let e = linerate_netlink::nft_events::event(m.unwrap().bytes()).unwrap();
                if let linerate_netlink::nft_events::NftEvent::Rule(r) = e {
                    let key = linerate_fwfollow::monitor::RuleKey {
                        table: r.table,
                        chain: r.chain,
                        handle: r.handle,
                    };
                    if monitor.wait_for(std::slice::from_ref(&key), Duration::from_millis(200)) {
                        monitor.forget();
                        break 'ready;
                    }
                }
            }
        }
    }
    // What the probes notified is read whole.
    while sock.recv(&mut &mut buf[..], libc::MSG_DONTWAIT).is_ok() {}
    let mut c = whole(1);
    let mut notified = Notifications::default();
    let seed = std::env::var("LINERATE_FOLLOW_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0x5eed_f011);
    let mut r = StdRng::seed_from_u64(seed);
    let (mut in_place, mut read_whole) = (0, 0);
    for step in 0..120u32 {
        let (text, whole_ok) = change(&mut r, &c);
        nft_file(&(text.clone() + "\n"));
        // Every notification of the transaction, through its end (a
        // transaction that changed nothing, an element added that was
        // there, is not notified).
        let until = Instant::now() + Duration::from_secs(1);
        let committed = loop {
            if let Ok(n) = sock.recv(&mut &mut buf[..], libc::MSG_DONTWAIT) {
                for m in linerate_netlink::wire::messages(&buf[..n]) {
                    notified.take(
                        m.map_err(anyhow::Error::from)
                            .and_then(|m| linerate_netlink::nft_events::event(m.bytes())),
                    );
                }
                continue;
            }
            if let Some(b) = notified.take_committed() {
                break Some(b);
            }
            if Instant::now() > until {
                break None;
            }
            std::thread::sleep(Duration::from_millis(2));
        };
        let next = step + 2;
        let applied = match &committed {
            Some((generation, batch)) => {
                follow::in_place(&c, batch, *generation, Some(&mut monitor), None).and_then(
                    |chains| {
                        c.apply(
                            next,
                            &batch.elements,
                            &chains,
                            &linerate_firewall::read::if_index,
                        )
                        .map_err(Some)
                    },
                )
            }
            None => Ok(false),
        };
        match applied {
            Ok(_) => in_place += 1,
            Err(why) => {
                // A rule reading a set, deleted in the same transaction as
                // one reading it is added, has nft misprint the second.
                let misprinted = why
                    .as_deref()
                    .is_some_and(|w| w.contains("without the sets"));
                assert!(
                    whole_ok || misprinted,
                    "step {step}: {text}: read whole: {why:?}"
                );
                read_whole += 1;
                monitor.forget();
                c = whole(next);
            }
        }
        let w = whole(next);
        for ipv6 in [0, 1] {
            let (mine, read) = (&c.families[ipv6], &w.families[ipv6]);
            let (mine, read) = (mine.as_ref().unwrap(), read.as_ref().unwrap());
            assert_eq!(
                canonical(&mine.filter),
                canonical(&read.filter),
                "step {step}: {text}"
            );
            assert_eq!(mine.reads, read.reads, "step {step}: {text}");
            if mine.filter == read.filter {
                assert_eq!(mine.classifier, read.classifier, "step {step}: {text}");
            }
            assert_eq!(
                mine.classifier.is_ok(),
                read.classifier.is_ok(),
                "step {step}: {text}"
            );
        }
    }
    eprintln!("seed {seed}: {in_place} changes applied in place, {read_whole} read whole");
    // Most changes are applied in place (jumps and new sets are not).
    assert!(
        in_place > 80,
        "in place {in_place}, read whole {read_whole}"
    );
}
