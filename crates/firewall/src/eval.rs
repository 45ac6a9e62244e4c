//! A forwarded packet judged by a family's [`Filter`] as nf_tables judges
//! it (net/netfilter/nf_tables_core.c, nft_do_chain): base chains in hook
//! and priority order, rules in order, statements in order; a test that
//! fails, or that reads a value the packet lacks, ends the rule; `accept`
//! ends the base chain and the next one runs, `drop` ends everything;
//! `jump` pushes a return point, `goto` does not, `return` and a regular
//! chain's end pop it, a base chain's end is its policy. This is the
//! reference the compiled fast path is held to, and what the differential
//! tests hold to the kernel.
use crate::ruleset::*;

/// What the evaluator sees of a forwarded packet.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Packet {
    pub ipv6: bool,
    pub iif: u32,
    pub iifname: String,
    pub oif: u32,
    pub oifname: String,
    pub saddr: u128,
    pub daddr: u128,
    /// The transport protocol (after IPv6's extension headers).
    pub l4proto: u8,
    /// IPv4's protocol field, or IPv6's first next header.
    pub nexthdr: u8,
    /// A fragment after the first: no transport header.
    pub later_fragment: bool,
    /// The transport header's bytes, as far as the packet has them.
    pub transport: Vec<u8>,
    /// Its connection's state as conntrack gave it: one bit of
    /// [`ct_state`] (0 for a ruleset that does not read it).
    pub ct_state: u32,
    /// Whether it goes in its connection's reply direction.
    pub ct_reply: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    Accept,
    Drop,
    /// The kernel must judge it itself (`reject`, or a chain nested past
    /// the kernel's jump stack).
    Kernel,
}

/// A rule: (chain index, rule index in the chain).
pub type RuleAt = (usize, usize);

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Judgement {
    pub verdict: Verdict,
    /// The rules whose `counter` the packet reached, once per statement.
    pub counted: Vec<RuleAt>,
    /// The rule that decided each base chain's outcome (None: its
    /// policy), in order, up to the one that dropped.
    pub decided: Vec<Option<RuleAt>>,
}

/// nf_tables' jump stack (NFT_JUMP_STACK_SIZE).
const JUMP_STACK: usize = 16;

/// Judges `p` by `f`.
pub fn judge(f: &Filter, p: &Packet) -> Judgement {
    let mut j = Judgement {
        verdict: Verdict::Accept,
        counted: Vec::new(),
        decided: Vec::new(),
    };
    for b in &f.base {
        let (action, at) = run_base(f, b, p, &mut j.counted);
        j.decided.push(at);
        match action {
            Outcome::Accept => {}
            Outcome::Drop => {
                j.verdict = Verdict::Drop;
                return j;
            }
            Outcome::Kernel => {
                j.verdict = Verdict::Kernel;
                return j;
            }
        }
    }
    j
}

enum Outcome {
    Accept,
    Drop,
    Kernel,
}

/// One base chain: its outcome, and the rule that gave it (None: the
/// policy).
fn run_base(
    f: &Filter,
    b: &BaseChain,
    p: &Packet,
    counted: &mut Vec<RuleAt>,
) -> (Outcome, Option<RuleAt>) {
    let mut stack: Vec<RuleAt> = Vec::new();
    let (mut chain, mut rule) = (b.chain, 0usize);
    loop {
        let rules = &f.chains[chain].rules;
        if rule >= rules.len() {
            // A regular chain's end returns; the base chain's is its policy.
            match stack.pop() {
                Some((c, r)) => {
                    (chain, rule) = (c, r);
                    continue;
                }
                None => return (outcome_of(&b.policy), None),
            }
        }
        let at = (chain, rule);
        match run_rule(f, &rules[rule], at, b.hook, p, counted) {
            None | Some(Action::Continue) => rule += 1,
            Some(Action::Accept) => return (Outcome::Accept, Some(at)),
            Some(Action::Drop) => return (Outcome::Drop, Some(at)),
            Some(Action::Kernel) => return (Outcome::Kernel, Some(at)),
            Some(Action::Return) => match stack.pop() {
                Some((c, r)) => (chain, rule) = (c, r),
                None => return (outcome_of(&b.policy), None),
            },
            Some(Action::Jump(t)) => {
                if stack.len() >= JUMP_STACK {
                    return (Outcome::Kernel, Some(at));
                }
                stack.push((chain, rule + 1));
                (chain, rule) = (t, 0);
            }
            Some(Action::Goto(t)) => (chain, rule) = (t, 0),
        }
    }
}

fn outcome_of(policy: &Action) -> Outcome {
    match policy {
        Action::Drop => Outcome::Drop,
        _ => Outcome::Accept,
    }
}

/// A rule's statements in order: the verdict it reaches, None if a test
/// failed or none was reached.
fn run_rule(
    f: &Filter,
    r: &Rule,
    at: RuleAt,
    hook: Hook,
    p: &Packet,
    counted: &mut Vec<RuleAt>,
) -> Option<Action> {
    for s in &r.steps {
        match s {
            Step::Test(t) => {
                let member = lookup(f.set(&t.against), &t.key, t.mask, hook, p)?;
                if member.is_some() == t.negate {
                    return None;
                }
            }
            Step::Counter => counted.push(at),
            Step::Verdict(a) => return Some(a.clone()),
            Step::Vmap { key, mask, map } => {
                let e = f.set(map);
                if let Some(i) = lookup(e, key, *mask, hook, p)? {
                    return Some(e.verdicts[i].clone());
                }
            }
        }
    }
    None
}

/// A field's value in a packet at a hook.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Value<'a> {
    Num(u128),
    Name(&'a str),
}

/// A key's values, on the stack for the keys rules have (a packet is
/// judged by thousands of rules: no allocation per test).
type Values<'a> = smallvec::SmallVec<[Value<'a>; 4]>;

/// A key's values when all are numbers.
pub type Numbers = smallvec::SmallVec<[u128; 4]>;

/// The packet's values of `key` (masked): None if it lacks a field.
fn values<'a>(key: &[Field], mask: Option<u128>, hook: Hook, p: &'a Packet) -> Option<Values<'a>> {
    let mut values = Values::new();
    for &f in key {
        let mut v = value(f, hook, p)?;
        if let (Some(m), Value::Num(n)) = (mask, v) {
            v = Value::Num(n & m);
        }
        values.push(v);
    }
    Some(values)
}

fn numbers(values: &[Value]) -> Option<Numbers> {
    values
        .iter()
        .map(|v| match v {
            Value::Num(n) => Some(*n),
            Value::Name(_) => None,
        })
        .collect()
}

/// The numbers a set lookup of `key` looks up for `p` at `hook`: None if
/// the packet lacks a field (the test fails whatever the set holds),
/// Some(None) if a value is a name.
pub fn key_numbers(
    key: &[Field],
    mask: Option<u128>,
    hook: Hook,
    p: &Packet,
) -> Option<Option<Numbers>> {
    values(key, mask, hook, p).map(|v| numbers(&v))
}

/// The element the packet's key is in: None (outer) if the packet lacks a
/// field of the key, Some(None) if it is in none.
fn lookup(
    e: &Elements,
    key: &[Field],
    mask: Option<u128>,
    hook: Hook,
    p: &Packet,
) -> Option<Option<usize>> {
    let values = values(key, mask, hook, p)?;
    if let Some(found) = numbers(&values).and_then(|n| e.find_numbers(&n)) {
        return Some(found);
    }
    Some(e.keys.iter().position(|atoms| {
        atoms.iter().zip(&values).all(|(a, v)| match (a, v) {
            (Atom::Range(lo, hi), Value::Num(n)) => lo <= n && n <= hi,
            (Atom::Name(s), Value::Name(n)) => s == n,
            (Atom::NamePrefix(s), Value::Name(n)) => n.starts_with(s.as_str()),
            _ => false,
        })
    }))
}

fn value(f: Field, hook: Hook, p: &Packet) -> Option<Value<'_>> {
    let num = |n: u128| Some(Value::Num(n));
    let transport = |proto: Option<u8>, offset: u8, len: usize| -> Option<u128> {
        if p.later_fragment || proto.is_some_and(|x| x != p.l4proto) {
            return None;
        }
        let b = p.transport.get(offset as usize..offset as usize + len)?;
        Some(b.iter().fold(0u128, |acc, x| acc << 8 | *x as u128))
    };
    match f {
        // A forwarded packet's input interface is known at every hook
        // (ip_output and ip6_output hand postrouting skb->dev as `in`);
        // its output one not before routing, where nf_tables reads index
        // 0 and the empty name (nft_meta_store_ifindex,
        // nft_meta_store_ifname): `!=` matches there.
        Field::Iif => num(p.iif as u128),
        Field::Iifname => Some(Value::Name(&p.iifname)),
        Field::Oif => num(if hook == Hook::Prerouting {
            0
        } else {
            p.oif as u128
        }),
        Field::Oifname => Some(Value::Name(if hook == Hook::Prerouting {
            ""
        } else {
            &p.oifname
        })),
        Field::Nfproto => num(if p.ipv6 { 10 } else { 2 }),
        Field::L4proto => num(p.l4proto as u128),
        Field::IpProtocol if !p.ipv6 => num(p.nexthdr as u128),
        Field::Ip6Nexthdr if p.ipv6 => num(p.nexthdr as u128),
        Field::Saddr4 if !p.ipv6 => num(p.saddr),
        Field::Daddr4 if !p.ipv6 => num(p.daddr),
        Field::Saddr6 if p.ipv6 => num(p.saddr),
        Field::Daddr6 if p.ipv6 => num(p.daddr),
        Field::IpProtocol | Field::Ip6Nexthdr => None,
        Field::Saddr4 | Field::Daddr4 | Field::Saddr6 | Field::Daddr6 => None,
        Field::Transport16 { proto, offset } => transport(proto, offset, 2).map(Value::Num),
        Field::Transport8 { proto, offset } => transport(proto, offset, 1).map(Value::Num),
        Field::Transport32 { proto, offset } => transport(proto, offset, 4).map(Value::Num),
        // nft_ct_get_eval: the state of any packet; the direction only of
        // one with a connection (an invalid or untracked packet has none).
        Field::CtState => num(p.ct_state as u128),
        Field::CtDirection => match p.ct_state {
            ct_state::ESTABLISHED | ct_state::RELATED | ct_state::NEW => num(p.ct_reply as u128),
            _ => None,
        },
    }
}
