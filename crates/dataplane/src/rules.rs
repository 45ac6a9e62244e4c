//! The rule programs of the fast path (abi/router.h, `struct
//! policy_rule`): a family's compiled policy rules
//! (linerate_netlink::policy::Policy::program) as the map's entries, and
//! their walk as the program does it (router.bpf.c, policy_walk), for the
//! model.
use crate::layout::{
    PolicyRule, RuleWord, NH_ID_THROW, POLICY_RULES, RULE_BLACKHOLE, RULE_END, RULE_GOTO,
    RULE_INVERT, RULE_KERNEL, RULE_LOOKUP, RULE_LOW, RULE_PORTS,
};
use linerate_netlink::policy::{mask, Compiled, Flow, Step, View};

/// A walk's outcome beside next-hop ids (POLICY_DROP, POLICY_KERNEL).
pub const POLICY_DROP: u32 = 0xffff_ffff;
pub const POLICY_KERNEL: u32 = 0xffff_fffe;

/// A bit of the meta word no packet has (between the protocol's and the
/// interface's): a step that needs it matches nothing.
const META_NEVER: u64 = 1 << 16;

/// The meta word of a rule key: ingress << 32 | tos << 8 | protocol.
fn meta(iif: u32, tos: u8, proto: u8) -> u64 {
    (iif as u64) << 32 | (tos as u64) << 8 | proto as u64
}

/// `f`'s rule key, as the fast path builds it for addresses of `bits`
/// bits (abi/router.h, RULE_KEY4_WORDS): IPv4 source << 32 | destination,
/// meta; IPv6 the source's and the destination's high words, meta, their
/// low words.
pub fn key(f: &Flow, bits: u8) -> Vec<u64> {
    let m = meta(f.iif, f.tos, f.proto);
    if bits == 32 {
        vec![(f.src as u64) << 32 | f.dst as u64 & 0xffff_ffff, m]
    } else {
        let (hi, lo) = (|a: u128| (a >> 64) as u64, |a: u128| a as u64);
        vec![hi(f.src), hi(f.dst), m, lo(f.src), lo(f.dst)]
    }
}

/// The meta word's place in a key of `bits`-bit addresses.
fn meta_word(bits: u8) -> usize {
    if bits == 32 {
        1
    } else {
        2
    }
}

/// Adds a source (destination) prefix of `bits` bits to a step's words:
/// IPv4's in word 0's high (low) half, IPv6's in words 0 and 3 (1 and 4).
/// Whether it reaches an IPv6 address's low word (RULE_LOW).
fn add_prefix(words: &mut [RuleWord], (net, len): (u128, u8), bits: u8, dst: bool) -> bool {
    let (value, keep) = (mask(net, len, bits), mask(u128::MAX, len, bits));
    if bits == 32 {
        let shift = if dst { 0 } else { 32 };
        words[0].value |= (value as u64) << shift;
        words[0].mask |= (keep as u64) << shift;
        return false;
    }
    let (hi, lo) = if dst { (1, 4) } else { (0, 3) };
    for (i, half) in [(hi, 64u32), (lo, 0)] {
        words[i].value |= (value >> half) as u64;
        words[i].mask |= (keep >> half) as u64;
    }
    keep as u64 != 0
}

/// `program`'s steps as the map's entries, for addresses of `bits` bits;
/// `root_mib` gives a view's FIB root (MiB of the arena), None for a view
/// without a FIB: its step sends what reaches it to the kernel. At most
/// POLICY_RULES - 1 steps (the END after them), which
/// Policy::program's `max_steps` ensures.
pub fn encode(
    program: &[Compiled],
    bits: u8,
    root_mib: impl Fn(View) -> Option<u16>,
) -> Vec<PolicyRule> {
    assert!(program.len() < POLICY_RULES, "{} steps", program.len());
    let v4 = bits == 32;
    program
        .iter()
        .map(|c| {
            let mut r = PolicyRule::default();
            let s = &c.sel;
            let mut low = false;
            if let Some(p) = s.src {
                low |= add_prefix(&mut r.word, p, bits, false);
            }
            if let Some(p) = s.dst {
                low |= add_prefix(&mut r.word, p, bits, true);
            }
            let meta_word = &mut r.word[meta_word(bits)];
            if let Some(i) = s.iif {
                meta_word.value |= meta(i, 0, 0);
                meta_word.mask |= meta(u32::MAX, 0, 0);
            }
            if let Some(t) = s.tos {
                let tos_mask = if v4 { 0x1c } else { 0xfc };
                meta_word.value |= meta(0, t, 0);
                meta_word.mask |= meta(0, tos_mask, 0);
                if t & !tos_mask != 0 {
                    // Bits the kernel compares the packet's without: no match.
                    meta_word.value |= META_NEVER;
                    meta_word.mask |= META_NEVER;
                }
            }
            if let Some(p) = s.proto {
                meta_word.value |= meta(0, 0, p);
                meta_word.mask |= meta(0, 0, u8::MAX);
            }
            let mut flags = if c.invert { RULE_INVERT } else { 0 };
            if low {
                flags |= RULE_LOW;
            }
            if s.sport.is_some() || s.dport.is_some() {
                (r.sport_lo, r.sport_hi) = s.sport.unwrap_or((0, u16::MAX));
                (r.dport_lo, r.dport_hi) = s.dport.unwrap_or((0, u16::MAX));
                flags |= RULE_PORTS;
            }
            r.flags = flags;
            r.step = match c.step {
                Step::Lookup(v) => match root_mib(v) {
                    Some(mib) => {
                        r.table_mib = mib;
                        RULE_LOOKUP
                    }
                    None => RULE_KERNEL,
                },
                Step::Goto(to) => {
                    r.next = to as u16;
                    RULE_GOTO
                }
                Step::Blackhole => RULE_BLACKHOLE,
                Step::Kernel => RULE_KERNEL,
            };
            r
        })
        .collect()
}

/// Whether step `r` matches the packet of key `key` and ports
/// (rule_off, rule_matches).
fn matches(r: &PolicyRule, key: &[u64], sport: u16, dport: u16) -> bool {
    // (IPv6's low words only with RULE_LOW.)
    let words = if r.flags & RULE_LOW == 0 { 3 } else { 5 };
    let off = key
        .iter()
        .zip(&r.word)
        .take(words)
        .fold(0, |off, (k, w)| off | (k ^ w.value) & w.mask);
    let ports = r.flags & RULE_PORTS == 0
        || ((r.sport_lo..=r.sport_hi).contains(&sport)
            && (r.dport_lo..=r.dport_hi).contains(&dport));
    (off == 0 && ports) != (r.flags & RULE_INVERT != 0)
}

/// The next-hop id program `rules` (its map entries, END after the last)
/// gives `f` (addresses of `bits` bits), as policy_walk does: POLICY_DROP,
/// POLICY_KERNEL, or 0 when no step routes it (the END matches every
/// packet: its words are zero). `lookup` looks a FIB root (MiB) up.
pub fn walk(rules: &[PolicyRule], f: &Flow, bits: u8, mut lookup: impl FnMut(u16) -> u32) -> u32 {
    let key = key(f, bits);
    let mut i = 0usize;
    for _ in 0..POLICY_RULES {
        let Some(r) = rules.get(i) else { return 0 };
        if !matches(r, &key, f.sport, f.dport) {
            i += 1;
            continue;
        }
        match r.step {
            RULE_END => return 0,
            RULE_GOTO => i = r.next as usize,
            RULE_BLACKHOLE => return POLICY_DROP,
            RULE_LOOKUP => {
                let nh = lookup(r.table_mib);
                if nh != 0 && nh != NH_ID_THROW {
                    return nh;
                }
                i += 1;
            }
            _ => return POLICY_KERNEL,
        }
    }
    0
}

/// The ports the kernel's flow dissector reads for a protocol: from
/// `l4`'s first four bytes (TCP, UDP, DCCP, ESP's SPI, SCTP, UDP-Lite) or
/// AH's SPI, none (0) for the others; None if the header is cut short.
pub fn ports(proto: u8, l4: &[u8]) -> Option<(u16, u16)> {
    let off = match proto {
        6 | 17 | 33 | 50 | 132 | 136 => 0,
        51 => 4,
        _ => return Some((0, 0)),
    };
    let p = l4.get(off..off + 4)?;
    Some((
        u16::from_be_bytes([p[0], p[1]]),
        u16::from_be_bytes([p[2], p[3]]),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use linerate_netlink::policy::{Outcome, Selectors};

    /// The encoded program walked as the fast path walks it (one masked
    /// compare a word) decides every packet as the compiled program's
    /// reference walk (linerate_netlink::policy::walk, each selector
    /// tested on its own): random programs over every selector, `not`,
    /// gotos, lookups that hit, miss or throw, in both families.
    #[test]
    fn the_encoded_walk_decides_as_the_programs_walk() {
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        let mut next = move |n: u64| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed % n
        };
        let mut decided = [0usize; 4];
        for case in 0..4_000 {
            let bits: u8 = if case % 2 == 0 { 32 } else { 128 };
            // Addresses from a few prefixes, so that selectors match often.
            let addr = |next: &mut dyn FnMut(u64) -> u64| -> u128 {
                let base: u128 = [0x0a00_0000, 0xc612_0000, 0xc613_0000][next(3) as usize];
                let a = base | next(1 << 16) as u128;
                if bits == 32 {
                    a
                } else {
                    0x2001_0db8u128 << 96 | a << 32 | next(4) as u128
                }
            };
            let prefix = |a: u128, next: &mut dyn FnMut(u64) -> u64| {
                let len = next(bits as u64 + 1) as u8;
                (mask(a, len, bits), len)
            };
            let range = |next: &mut dyn FnMut(u64) -> u64| {
                let lo = next(8) as u16;
                (lo, lo + next(4) as u16)
            };
            let steps = 1 + next(12) as usize;
            let program: Vec<Compiled> = (0..steps)
                .map(|i| {
                    let pick = |next: &mut dyn FnMut(u64) -> u64| next(3) == 0;
                    let sel = Selectors {
                        iif: pick(&mut next).then(|| 1 + next(3) as u32),
                        src: pick(&mut next).then(|| prefix(addr(&mut next), &mut next)),
                        dst: pick(&mut next).then(|| prefix(addr(&mut next), &mut next)),
                        tos: pick(&mut next)
                            .then(|| [0x04, 0x10, 0x1c, 0x12, 0xb8][next(5) as usize]),
                        proto: pick(&mut next).then(|| [6, 17, 47][next(3) as usize]),
                        sport: pick(&mut next).then(|| range(&mut next)),
                        dport: pick(&mut next).then(|| range(&mut next)),
                    };
                    let step = match next(6) {
                        0 if i + 1 < steps => Step::Goto(i + 1 + next((steps - i) as u64) as usize),
                        1 => Step::Blackhole,
                        2 => Step::Kernel,
                        _ => Step::Lookup(View::table(100 + next(3) as u32)),
                    };
                    Compiled {
                        invert: next(6) == 0,
                        sel,
                        step,
                        text: String::new(),
                    }
                })
                .collect();
            // Table 100 routes (nh 10), 101 throws, 102 has no route.
            let content = |table: u32| match table {
                100 => 10,
                101 => NH_ID_THROW,
                _ => 0,
            };
            let mut rules = encode(&program, bits, |v| Some(v.table as u16));
            rules.push(PolicyRule::default());
            for _ in 0..20 {
                let f = Flow {
                    iif: 1 + next(3) as u32,
                    src: addr(&mut next),
                    dst: addr(&mut next),
                    tos: next(256) as u8,
                    proto: [6, 17, 47][next(3) as usize],
                    sport: next(12) as u16,
                    dport: next(12) as u16,
                };
                let want = match linerate_netlink::policy::walk(&program, &f, bits, |v| {
                    let nh = content(v.table);
                    (nh != 0 && nh != NH_ID_THROW).then_some(nh)
                }) {
                    Outcome::Route(nh) => nh,
                    Outcome::Blackhole => POLICY_DROP,
                    Outcome::Kernel => POLICY_KERNEL,
                    Outcome::Unrouted => 0,
                };
                let got = walk(&rules, &f, bits, |mib| content(mib as u32));
                assert_eq!(got, want, "{bits}-bit flow {f:?}\nprogram {program:#?}");
                decided[match want {
                    0 => 0,
                    POLICY_DROP => 1,
                    POLICY_KERNEL => 2,
                    _ => 3,
                }] += 1;
            }
        }
        // Every outcome is reached (unrouted, dropped, the kernel's, routed).
        assert!(decided.iter().all(|&n| n > 1_000), "{decided:?}");
    }
}
