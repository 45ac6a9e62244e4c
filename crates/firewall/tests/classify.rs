//! The classifier judges a key as the evaluator judges the packet the key
//! stands for: over random filters (every field, atom and statement the
//! reader makes; jumps, gotos, returns, verdict maps; several base
//! chains) and random packets, the classifier's walk gives the verdict
//! and the counted rules that crate::cache::entry gives, or it refuses
//! the filter, or (rarely) gives up and leaves the key to the kernel.
mod common;
use common::{filter, name, packet, NAMES};
use linerate_dataplane::layout::{FW_ACCEPT, FW_DROP, FW_KERNEL};
use linerate_firewall::cache::{entry, FlowKey, KeyOf, Reads};
use linerate_firewall::classify::{self, Refused};
use linerate_firewall::compile::FAMILY_COUNTERS;
use linerate_firewall::eval::Verdict;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::collections::BTreeMap;

fn names() -> BTreeMap<u32, String> {
    (1..=NAMES.len() as u32).map(|i| (i, name(i))).collect()
}

#[test]
fn the_classifier_judges_a_key_as_the_evaluator_judges_its_packet() {
    let mut r = StdRng::seed_from_u64(11);
    let names = names();
    let (mut compiled, mut refused, mut keys, mut gave_up) = (0, 0usize, 0, 0);
    let mut verdicts = [0usize; 3];
    let mut counted = 0;
    let mut why: BTreeMap<String, usize> = BTreeMap::new();
    for _ in 0..3000 {
        let ipv6 = r.gen_bool(0.5);
        let f = filter(&mut r, ipv6);
        let Some(reads) = Reads::of(&f) else { continue };
        let tables = match classify::compile(&f, ipv6, &reads, &names) {
            Ok(t) => t,
            Err(e) => {
                refused += 1;
                *why.entry(match e {
                    Refused::TooManyTerms(_) => "too many terms".into(),
                    Refused::Shape(s) => s.to_string(),
                })
                .or_default() += 1;
                continue;
            }
        };
        compiled += 1;
        for _ in 0..60 {
            let mut p = packet(&mut r, ipv6);
            // Now and then an interface the firewall has no name for.
            if r.gen_bool(0.05) {
                p.iif = 9;
                p.iifname = String::new();
            }
            let key = FlowKey::of(&p, &reads);
            let w = tables.walk(&key);
            keys += 1;
            if w.gave_up {
                gave_up += 1;
                assert_eq!(w.verdict, FW_KERNEL);
                continue;
            }
            // What the control plane would cache for the key
            // (Compiled::slot): the evaluator's entry, its rules as the
            // fast path's counter ids; an unnamed interface's the kernel's.
            let unnamed = reads.iif && key.iif != 0 && !names.contains_key(&key.iif);
            let e = entry(&f, &key, &name);
            let base = if ipv6 { FAMILY_COUNTERS as u32 } else { 0 };
            let (verdict, counters): (Verdict, Vec<u32>) = if unnamed {
                (Verdict::Kernel, vec![])
            } else {
                (
                    e.verdict,
                    e.counters.iter().map(|&c| base + c as u32).collect(),
                )
            };
            let code = match verdict {
                Verdict::Accept => FW_ACCEPT,
                Verdict::Drop => FW_DROP,
                Verdict::Kernel => FW_KERNEL,
            };
            assert_eq!(
                (w.verdict, &w.counted),
                (code, &counters),
                "key {key:?}\npacket {p:?}\nfilter {f:#?}"
            );
            verdicts[verdict as usize] += 1;
            counted += !counters.is_empty() as usize;
        }
    }
    eprintln!(
        "{compiled} filters compiled, {refused} refused ({why:?}); {keys} keys, {gave_up} given up; verdicts accept/drop/kernel {verdicts:?}, {counted} counted"
    );
    // The classifier must hold nearly every filter the reader makes, and
    // the keys must reach every verdict and counters.
    assert!(
        compiled > 1500 && refused * 10 < compiled,
        "{compiled} compiled, {refused} refused"
    );
    assert!(
        verdicts.iter().all(|v| *v > 5000) && counted > 5000,
        "{verdicts:?}, {counted}"
    );
    assert!(gave_up * 1000 < keys, "{gave_up} of {keys} given up");
}

/// A filter compiled with the memo of an earlier one (its rules laid out
/// before reused: classify::Memo) gives what it gives compiled afresh:
/// the same filter, one with a rule removed, one with two rules swapped,
/// one with a rule's steps changed under the same handle (the random
/// filters' handles repeat across chains, as a table's never do: a rule
/// is reused only where its steps are the same).
#[test]
fn rules_laid_out_before_are_reused_as_if_laid_out_again() {
    let mut r = StdRng::seed_from_u64(12);
    let names = names();
    let mut reused = 0;
    for _ in 0..2000 {
        let ipv6 = r.gen_bool(0.5);
        let f = filter(&mut r, ipv6);
        let Some(reads) = Reads::of(&f) else { continue };
        let (first, memo) =
            classify::compile_with(&f, ipv6, &reads, &names, &classify::Memo::default());
        let mut g = f.clone();
        let c = r.gen_range(0..g.chains.len());
        let rules = &mut g.chains[c].rules;
        match (r.gen_range(0..4), rules.len()) {
            (0, _) | (_, 0) => {}
            (1, n) => {
                rules.remove(r.gen_range(0..n));
            }
            (2, n) => rules.swap(r.gen_range(0..n), r.gen_range(0..n)),
            (_, n) => {
                // Another rule's steps, of this filter (its chains and
                // sets are this filter's).
                // A jump or goto could close a loop, which the kernel
                // refuses: none taken.
                use linerate_firewall::ruleset::{Action, Rule, Step};
                let jumps = |s: &Step| {
                    matches!(
                        s,
                        Step::Vmap { .. } | Step::Verdict(Action::Jump(_) | Action::Goto(_))
                    )
                };
                let all: Vec<_> = f
                    .chains
                    .iter()
                    .flat_map(|c| &c.rules)
                    .filter(|r| !r.steps.iter().any(jumps))
                    .collect();
                if !all.is_empty() {
                    // A rule changed is a new rule (its steps are not
                    // changed in place): under the same handle.
                    let steps = all[r.gen_range(0..all.len())].steps.clone();
                    let k = r.gen_range(0..n);
                    rules[k] = Rule::new(rules[k].handle, steps);
                }
            }
        }
        let Some(reads) = Reads::of(&g) else { continue };
        let fresh = classify::compile(&g, ipv6, &reads, &names);
        let (again, _) = classify::compile_with(&g, ipv6, &reads, &names, &memo);
        assert_eq!(fresh, again, "filter {g:#?}");
        reused += first.is_ok() as usize;
    }
    assert!(reused > 1000, "{reused}");
}

/// Rows are kept once: an access list of many prefixes and ports has as
/// many rows on its address field as prefixes (plus the rest of the
/// space), and a key one prefix narrows reads a few words.
#[test]
fn an_access_list_narrows_each_key_to_a_few_words() {
    use linerate_firewall::ruleset::*;
    use std::sync::Arc;
    let test = |key: Field, lo: u128, hi: u128| {
        Step::Test(Test {
            key: vec![key],
            mask: None,
            negate: false,
            against: Against::Inline(Arc::new(Elements {
                keys: vec![vec![Atom::Range(lo, hi)]],
                ..Default::default()
            })),
        })
    };
    let udp_dport = Field::Transport16 {
        proto: Some(17),
        offset: 2,
    };
    let mut rules: Vec<Rule> = (0..2000u128)
        .map(|i| {
            let net = 0x0a00_0000 | (i << 8);
            Rule::new(
                i as u64,
                vec![
                    test(Field::Daddr4, net, net | 0xff),
                    test(udp_dport, 1000 + i, 1000 + i),
                    Step::Verdict(Action::Drop),
                ],
            )
        })
        .collect();
    rules.push(Rule::new(
        5000,
        vec![
            test(Field::Daddr4, 0xc613_0000, 0xc613_ffff),
            Step::Verdict(Action::Accept),
        ],
    ));
    let f = Filter {
        base: vec![BaseChain {
            hook: Hook::Forward,
            priority: 0,
            chain: 0,
            policy: Action::Drop,
        }],
        chains: vec![Chain {
            table: TableId {
                family: "ip".into(),
                name: "t".into(),
            },
            table_handle: 1,
            name: "fwd".into(),
            rules,
        }],
        sets: vec![],
        nat: vec![],
    };
    let reads = Reads::of(&f).unwrap();
    let t = classify::compile(&f, false, &reads, &names()).unwrap();
    let daddr = t
        .fields
        .iter()
        .find(|x| x.field.source == linerate_dataplane::fwc::Source::Daddr)
        .unwrap();
    // A row for each /24, the /16, and the rest.
    assert_eq!(daddr.rows.len(), 2002);
    let key = |daddr: u32, dport: u16| {
        let mut p = linerate_firewall::eval::Packet {
            daddr: daddr as u128,
            l4proto: 17,
            nexthdr: 17,
            transport: [&1u16.to_be_bytes()[..], &dport.to_be_bytes(), &[0, 8, 0, 0]].concat(),
            ..Default::default()
        };
        p.iif = 1;
        FlowKey::of(&p, &reads)
    };
    assert_eq!(t.walk(&key(0xc613_0101, 53)).verdict, FW_ACCEPT);
    assert_eq!(t.walk(&key(0x0a00_0505, 1005)).verdict, FW_DROP);
    assert_eq!(
        t.walk(&key(0x0a00_0505, 1006)).verdict,
        FW_DROP,
        "the policy"
    );
    // The /16's row has its own term's word and the policy's only.
    let row = |k: &FlowKey| &daddr.rows[daddr.row_of(k) as usize];
    let r = row(&key(0xc613_0101, 53));
    assert_eq!((r.first(), r.last()), (2000 / 64, 2001 / 64));
}
