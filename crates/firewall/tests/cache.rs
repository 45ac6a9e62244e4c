//! The verdict cache's key loses nothing the ruleset reads: over random
//! filters (every field, atom and statement the reader makes, chains
//! reached by jump, goto and verdict maps, several base chains) and random
//! packets, the packet rebuilt from its key is judged exactly as the
//! packet itself: same verdict, same rules deciding, same counters.
mod common;
use common::{filter, name, packet};
use linerate_firewall::cache::{entry, FlowKey, KeyOf, Reads};
use linerate_firewall::eval::{judge, Verdict};
use linerate_firewall::ruleset::*;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::sync::Arc;

#[test]
fn a_packet_rebuilt_from_its_key_is_judged_as_the_packet() {
    let mut r = StdRng::seed_from_u64(7);
    let (mut filters, mut packets, mut shared) = (0, 0, 0usize);
    let mut verdicts = [0usize; 3];
    for _ in 0..2000 {
        let ipv6 = r.gen_bool(0.5);
        let f = filter(&mut r, ipv6);
        let Some(reads) = Reads::of(&f) else { continue };
        filters += 1;
        let mut keys = std::collections::HashSet::new();
        for _ in 0..50 {
            let p = packet(&mut r, ipv6);
            let key = FlowKey::of(&p, &reads);
            let rebuilt = key.packet(&name);
            let (a, b) = (judge(&f, &p), judge(&f, &rebuilt));
            assert_eq!(a, b, "packet {p:?}\nkey {key:?}\nfilter {f:#?}");
            verdicts[a.verdict as usize] += 1;
            packets += 1;
            if !keys.insert(key) {
                shared += 1;
            }
            let e = entry(&f, &key, &name);
            if a.verdict != Verdict::Kernel && a.counted.len() <= 4 {
                assert_eq!((e.verdict, e.counters.len()), (a.verdict, a.counted.len()));
            } else {
                assert_eq!(e.verdict, Verdict::Kernel);
            }
        }
    }
    eprintln!("{filters} filters, {packets} packets ({shared} sharing a key with an earlier one), verdicts accept/drop/kernel {verdicts:?}");
    assert!(
        filters > 1000 && verdicts.iter().all(|v| *v > 1000),
        "{verdicts:?}"
    );
}

/// What no rule reads is not in the key: packets a ruleset cannot tell
/// apart share an entry. A ruleset reading past the key's transport bytes
/// is not cached.
#[test]
fn keys_hold_only_what_the_ruleset_reads() {
    let by = |key: Vec<Field>| Filter {
        base: vec![BaseChain {
            hook: Hook::Forward,
            priority: 0,
            chain: 0,
            policy: Action::Accept,
        }],
        chains: vec![Chain {
            table: TableId {
                family: "ip".into(),
                name: "t".into(),
            },
            table_handle: 1,
            name: "c".into(),
            rules: vec![Rule::new(
                1,
                vec![
                    Step::Test(Test {
                        key,
                        mask: None,
                        negate: false,
                        against: Against::Inline(Arc::new(Elements {
                            keys: vec![vec![Atom::value(5)]],
                            ..Default::default()
                        })),
                    }),
                    Step::Verdict(Action::Drop),
                ],
            )],
        }],
        sets: vec![],
        nat: vec![],
    };
    let daddr = Reads::of(&by(vec![Field::Daddr4])).unwrap();
    let mut r = StdRng::seed_from_u64(1);
    let mut a = packet(&mut r, false);
    a.daddr = 5;
    let mut b = a.clone();
    b.saddr ^= 1;
    b.iif = a.iif % 3 + 1;
    b.transport = vec![9; 20];
    assert_eq!(FlowKey::of(&a, &daddr), FlowKey::of(&b, &daddr));
    b.daddr = 6;
    assert_ne!(FlowKey::of(&a, &daddr), FlowKey::of(&b, &daddr));
    // TCP's flags (byte 13) are the furthest a cached ruleset reads.
    assert!(Reads::of(&by(vec![Field::Transport8 {
        proto: Some(6),
        offset: 13
    }]))
    .is_some());
    assert!(Reads::of(&by(vec![Field::Transport16 {
        proto: None,
        offset: 15
    }]))
    .is_none());
}
