//! The rule programs of the fast path (abi/router.h, `struct
//! policy_rule`): a family's compiled policy rules
//! (linerate_netlink::policy::Policy::program) as the map's entries, and
//! their walk as the program does it (router.bpf.c, policy_walk), for the
//! model.
use crate::layout::{
    PolicyRule, NH_ID_THROW, POLICY_RULES, RULE_BLACKHOLE, RULE_DPORT, RULE_END, RULE_GOTO,
    RULE_IIF, RULE_INVERT, RULE_KERNEL, RULE_LOOKUP, RULE_PROTO, RULE_SPORT, RULE_TOS,
};
use linerate_netlink::policy::{mask, Compiled, Flow, Step, View};

/// A walk's outcome beside next-hop ids (POLICY_DROP, POLICY_KERNEL).
pub const POLICY_DROP: u32 = 0xffff_ffff;
pub const POLICY_KERNEL: u32 = 0xffff_fffe;

/// The two 64-bit words of an address held in a 128-bit word.
fn words(a: u128) -> [u64; 2] {
    [(a >> 64) as u64, a as u64]
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
    program
        .iter()
        .map(|c| {
            let mut r = PolicyRule::default();
            let s = &c.sel;
            if let Some((net, len)) = s.src {
                r.src = words(mask(net, len, bits));
                r.src_mask = words(mask(u128::MAX, len, bits));
            }
            if let Some((net, len)) = s.dst {
                r.dst = words(mask(net, len, bits));
                r.dst_mask = words(mask(u128::MAX, len, bits));
            }
            let mut flags = if c.invert { RULE_INVERT } else { 0 };
            if let Some(i) = s.iif {
                r.iif = i;
                flags |= RULE_IIF;
            }
            if let Some(t) = s.tos {
                r.tos = t;
                r.tos_mask = if bits == 32 { 0x1c } else { 0xfc };
                flags |= RULE_TOS;
            }
            if let Some(p) = s.proto {
                r.proto = p;
                flags |= RULE_PROTO;
            }
            if let Some((lo, hi)) = s.sport {
                (r.sport_lo, r.sport_hi) = (lo, hi);
                flags |= RULE_SPORT;
            }
            if let Some((lo, hi)) = s.dport {
                (r.dport_lo, r.dport_hi) = (lo, hi);
                flags |= RULE_DPORT;
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

/// Whether step `r` matches `f` (rule_matches).
fn matches(r: &PolicyRule, f: &Flow) -> bool {
    let (src, dst) = (words(f.src), words(f.dst));
    let off = ((src[0] ^ r.src[0]) & r.src_mask[0])
        | ((src[1] ^ r.src[1]) & r.src_mask[1])
        | ((dst[0] ^ r.dst[0]) & r.dst_mask[0])
        | ((dst[1] ^ r.dst[1]) & r.dst_mask[1]);
    let has = |flag: u8| r.flags & flag != 0;
    let m = off == 0
        && (!has(RULE_IIF) || r.iif == f.iif)
        && (!has(RULE_TOS) || f.tos & r.tos_mask == r.tos)
        && (!has(RULE_PROTO) || f.proto == r.proto)
        && (!has(RULE_SPORT) || (r.sport_lo..=r.sport_hi).contains(&f.sport))
        && (!has(RULE_DPORT) || (r.dport_lo..=r.dport_hi).contains(&f.dport));
    m != has(RULE_INVERT)
}

/// The next-hop id program `rules` (its map entries, END after the last)
/// gives `f`, as policy_walk does: POLICY_DROP, POLICY_KERNEL, or 0 when
/// no step routes it. `lookup` looks a FIB root (MiB) up.
pub fn walk(rules: &[PolicyRule], f: &Flow, mut lookup: impl FnMut(u16) -> u32) -> u32 {
    let mut i = 0usize;
    for _ in 0..POLICY_RULES {
        let Some(r) = rules.get(i) else { return 0 };
        if r.step == RULE_END {
            return 0;
        }
        if !matches(r, f) {
            i += 1;
            continue;
        }
        match r.step {
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
