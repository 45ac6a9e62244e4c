//! Random filters and packets: every field, atom and statement the
//! reader makes, chains reached by jump, goto and verdict maps, several
//! base chains. What the cache's and the classifier's tests draw from.
#![allow(dead_code)] // not every test binary uses all of it
use linerate_firewall::eval::Packet;
use linerate_firewall::ruleset::*;
use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::Rng;
use std::sync::Arc;

pub const NAMES: [&str; 3] = ["dut0", "dut1", "eth7"];
pub const PORTS: [u128; 5] = [22, 53, 80, 443, 5000];

pub fn name(i: u32) -> String {
    NAMES
        .get(i.wrapping_sub(1) as usize)
        .map_or(String::new(), |s| s.to_string())
}

pub fn fields(ipv6: bool) -> Vec<Field> {
    let mut f = vec![
        Field::Iif,
        Field::Oif,
        Field::Iifname,
        Field::Oifname,
        Field::Nfproto,
        Field::L4proto,
        Field::Transport16 {
            proto: Some(6),
            offset: 2,
        },
        Field::Transport16 {
            proto: Some(17),
            offset: 0,
        },
        Field::Transport16 {
            proto: None,
            offset: 2,
        },
        Field::Transport8 {
            proto: Some(6),
            offset: 13,
        },
        Field::Transport8 {
            proto: Some(1),
            offset: 0,
        },
        Field::Transport8 {
            proto: Some(58),
            offset: 0,
        },
        Field::Transport32 {
            proto: None,
            offset: 0,
        },
        Field::CtState,
        Field::CtDirection,
    ];
    f.extend(if ipv6 {
        [Field::Saddr6, Field::Daddr6, Field::Ip6Nexthdr]
    } else {
        [Field::Saddr4, Field::Daddr4, Field::IpProtocol]
    });
    f
}

pub fn atom(r: &mut StdRng, f: Field) -> Atom {
    match f {
        Field::Iifname | Field::Oifname => match r.gen_range(0..3) {
            0 => Atom::Name(NAMES.choose(r).unwrap().to_string()),
            1 => Atom::NamePrefix("dut".into()),
            _ => Atom::Name(String::new()),
        },
        Field::Iif | Field::Oif => Atom::value(r.gen_range(0..4)),
        Field::Nfproto => Atom::value(*[2, 10].choose(r).unwrap()),
        Field::L4proto | Field::IpProtocol | Field::Ip6Nexthdr => {
            Atom::value(*[1, 6, 17, 58].choose(r).unwrap())
        }
        Field::Saddr4 | Field::Daddr4 | Field::Saddr6 | Field::Daddr6 => {
            let lo = r.gen_range(0..8u128);
            Atom::Range(lo, lo + r.gen_range(0..3))
        }
        Field::Transport8 { .. } => {
            let lo = r.gen_range(0..20u128);
            Atom::Range(lo, lo + r.gen_range(0..4))
        }
        Field::Transport16 { .. } => {
            let a = *PORTS.choose(r).unwrap();
            if r.gen_bool(0.5) {
                Atom::value(a)
            } else {
                Atom::Range(a, a + 500)
            }
        }
        Field::Transport32 { .. } => {
            Atom::value(PORTS.choose(r).unwrap() << 16 | PORTS.choose(r).unwrap())
        }
        Field::CtState => Atom::value(*CT_STATES.choose(r).unwrap() as u128),
        Field::CtDirection => Atom::value(r.gen_range(0..2)),
    }
}

pub fn elements(r: &mut StdRng, key: &[Field], verdicts: bool, chains: usize) -> Elements {
    let mut e = Elements::default();
    for _ in 0..r.gen_range(1..4) {
        e.keys.push(key.iter().map(|f| atom(r, *f)).collect());
        if verdicts {
            e.verdicts.push(action(r, chains, false));
        }
    }
    e
}

pub fn action(r: &mut StdRng, chains: usize, any: bool) -> Action {
    match r.gen_range(0..if any { 8 } else { 6 }) {
        0 | 1 => Action::Accept,
        2 | 3 => Action::Drop,
        4 if chains > 1 => Action::Jump(r.gen_range(1..chains)),
        5 if chains > 1 => Action::Goto(r.gen_range(1..chains)),
        6 => Action::Return,
        7 => Action::Kernel,
        _ => Action::Continue,
    }
}

/// A random filter: chains 0 and 1 are base chains (0 at prerouting and
/// forward, 1 at postrouting, each or not), jumps and gotos go to later
/// chains only (no loops); `return` and `reject` anywhere.
pub fn filter(r: &mut StdRng, ipv6: bool) -> Filter {
    let chains = r.gen_range(2..6);
    let mut f = Filter::default();
    let table = TableId {
        family: "inet".into(),
        name: "t".into(),
    };
    for c in 0..chains {
        let mut rules = Vec::new();
        for handle in 0..r.gen_range(0..6) {
            let mut steps = Vec::new();
            for _ in 0..r.gen_range(0..3) {
                let fs = fields(ipv6);
                let key: Vec<Field> = if r.gen_bool(0.2) {
                    vec![*fs.choose(r).unwrap(), *fs.choose(r).unwrap()]
                } else {
                    vec![*fs.choose(r).unwrap()]
                };
                let mask = (key.len() == 1 && r.gen_bool(0.1)).then(|| r.gen_range(1..255u128));
                steps.push(Step::Test(Test {
                    against: Against::Inline(Arc::new(elements(r, &key, false, chains))),
                    key,
                    mask,
                    negate: r.gen_bool(0.3),
                }));
            }
            if r.gen_bool(0.4) {
                steps.push(Step::Counter);
            }
            // Jumps only to later chains.
            let later = chains - c;
            if r.gen_bool(0.2) {
                let key = vec![Field::Transport16 {
                    proto: None,
                    offset: 2,
                }];
                let mut e = elements(r, &key, true, later);
                for v in &mut e.verdicts {
                    if let Action::Jump(i) | Action::Goto(i) = v {
                        *i += c;
                    }
                }
                steps.push(Step::Vmap {
                    key,
                    mask: None,
                    map: Against::Inline(Arc::new(e)),
                });
            } else if r.gen_bool(0.8) {
                let any = c > 0 || r.gen_bool(0.5);
                let mut a = action(r, later, any);
                if let Action::Jump(i) | Action::Goto(i) = &mut a {
                    *i += c;
                }
                steps.push(Step::Verdict(a));
            }
            rules.push(Rule::new(handle, steps));
        }
        f.chains.push(Chain {
            table: table.clone(),
            table_handle: 1,
            name: format!("c{c}"),
            rules,
        });
    }
    for (hook, chain) in [
        (Hook::Prerouting, 0),
        (Hook::Forward, 0),
        (Hook::Postrouting, 1),
    ] {
        if r.gen_bool(0.7) {
            let policy = if r.gen_bool(0.3) {
                Action::Drop
            } else {
                Action::Accept
            };
            f.base.push(BaseChain {
                hook,
                priority: 0,
                chain,
                policy,
            });
        }
    }
    f
}

pub const CT_STATES: [u32; 5] = [
    ct_state::INVALID,
    ct_state::ESTABLISHED,
    ct_state::RELATED,
    ct_state::NEW,
    ct_state::UNTRACKED,
];

pub fn packet(r: &mut StdRng, ipv6: bool) -> Packet {
    let l4proto = *[1u8, 6, 17, 58, 47].choose(r).unwrap();
    let mut transport: Vec<u8> = (0..r.gen_range(0..24))
        .map(|_| r.gen_range(0..24))
        .collect();
    if transport.len() >= 4 && r.gen_bool(0.7) {
        let (s, d) = (
            *PORTS.choose(r).unwrap() as u16,
            *PORTS.choose(r).unwrap() as u16,
        );
        transport[0..2].copy_from_slice(&s.to_be_bytes());
        transport[2..4].copy_from_slice(&d.to_be_bytes());
    }
    let (iif, oif) = (r.gen_range(1..4), r.gen_range(1..4));
    Packet {
        ipv6,
        iif,
        iifname: name(iif),
        oif,
        oifname: name(oif),
        saddr: r.gen_range(0..10),
        daddr: r.gen_range(0..10),
        l4proto,
        nexthdr: l4proto,
        later_fragment: false,
        transport,
        ct_state: *CT_STATES.choose(r).unwrap(),
        ct_reply: r.gen_bool(0.5),
    }
}
