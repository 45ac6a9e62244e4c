//! The forwarding path's nftables ruleset, per IP family: what the reader
//! makes of `nft -j list ruleset`, and what the evaluator (and, later, the
//! compiler) take. Values are numbers (addresses as u128, ports, types)
//! and interface names; symbols are resolved when read.
use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;

/// The netfilter hooks a forwarded packet crosses, in that order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Hook {
    Prerouting,
    Forward,
    Postrouting,
}

/// A value a packet has or lacks. A test on a value the packet lacks
/// fails, `!=` as well as `==` (nf_tables' expression breaks the rule):
/// `ip saddr` on IPv6, a port on a fragment or on another protocol. The
/// interfaces are never lacking: the output interface before routing
/// reads as index 0 and the empty name.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Field {
    /// Input interface index (`meta iif`).
    Iif,
    /// Output interface index (`meta oif`); 0 at prerouting.
    Oif,
    Iifname,
    Oifname,
    /// 2 for IPv4, 10 for IPv6 (`meta nfproto`).
    Nfproto,
    /// The transport protocol (`meta l4proto`): after IPv6's extension
    /// headers.
    L4proto,
    /// IPv4's protocol field (`ip protocol`).
    IpProtocol,
    /// IPv6's first next header (`ip6 nexthdr`).
    Ip6Nexthdr,
    Saddr4,
    Daddr4,
    Saddr6,
    Daddr6,
    /// 16 bits of the transport header at this byte offset, of a packet
    /// of transport protocol `proto` (`tcp dport`: 6 at 2), or of any
    /// (`th dport`: None at 2); not on a fragment after the first.
    Transport16 {
        proto: Option<u8>,
        offset: u8,
    },
    /// 8 bits of the transport header, likewise (`tcp flags`: 6 at 13,
    /// `icmp type`: 1 at 0, `icmpv6 type`: 58 at 0).
    Transport8 {
        proto: Option<u8>,
        offset: u8,
    },
    /// 32 bits of the transport header, likewise (nft merges two
    /// adjacent `th` matches of a rule into one: `@th,0,32`).
    Transport32 {
        proto: Option<u8>,
        offset: u8,
    },
    /// The packet's connection state as conntrack gave it (`ct state`):
    /// one bit of [`ct_state`]. Never lacking.
    CtState,
    /// The packet's direction in its connection (`ct direction`): 0
    /// original, 1 reply; lacking without a connection (invalid,
    /// untracked).
    CtDirection,
}

/// `ct state`'s bits (nf_conntrack_common.h: NF_CT_STATE_BIT of the
/// packet's ctinfo, NF_CT_STATE_INVALID_BIT, NF_CT_STATE_UNTRACKED_BIT):
/// a packet has exactly one.
pub mod ct_state {
    pub const INVALID: u32 = 1;
    pub const ESTABLISHED: u32 = 2;
    pub const RELATED: u32 = 4;
    pub const NEW: u32 = 8;
    pub const UNTRACKED: u32 = 64;
}

/// Conntrack's hook at prerouting (NF_IP_PRI_CONNTRACK): a chain at this
/// priority or before it sees packets without their connection.
pub const CONNTRACK_PRIORITY: i32 = -200;

impl Field {
    /// Whether the field holds an interface name (the others numbers).
    pub fn is_name(self) -> bool {
        matches!(self, Field::Iifname | Field::Oifname)
    }

    /// Whether the field is the packet's connection's, from conntrack.
    pub fn is_ct(self) -> bool {
        matches!(self, Field::CtState | Field::CtDirection)
    }
}

/// One component of a set element or a compared value.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Atom {
    /// first..=last (a value is first == last; a prefix its range).
    Range(u128, u128),
    /// An interface name, whole.
    Name(String),
    /// An interface name's beginning (`"eth*"`).
    NamePrefix(String),
}

impl Atom {
    pub fn value(v: u128) -> Atom {
        Atom::Range(v, v)
    }
}

/// A set's elements: each a tuple with one atom per key field (one for a
/// plain set), and for a verdict map its verdict.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Elements {
    pub keys: Vec<Vec<Atom>>,
    /// Verdict maps only: the verdict of `keys[i]`.
    pub verdicts: Vec<Action>,
    /// How `keys` are looked up, built when first needed (a set of a
    /// million addresses is not walked per packet). Change `keys` through
    /// [`Elements::insert`] and [`Elements::remove`], or call
    /// [`Elements::reindex`] after.
    pub index: ElementIndex,
}

/// Below this many elements a walk is as fast as anything.
const INDEX_FROM: usize = 8;

/// A lookup structure over a set's keys.
#[derive(Debug)]
pub enum Index {
    /// Walk the keys in order.
    Walk,
    /// Every key a tuple of single numbers: the first key of each tuple.
    Exact(HashMap<Vec<u128>, usize>),
    /// One field of ranges that do not overlap, by their first value.
    Intervals(Vec<(u128, u128, usize)>),
}

impl Index {
    fn of(keys: &[Vec<Atom>]) -> Index {
        if keys.len() < INDEX_FROM {
            return Index::Walk;
        }
        let exact_keys: Option<Vec<Vec<u128>>> = keys.iter().map(|k| exact(k)).collect();
        if let Some(exact_keys) = exact_keys {
            let mut m = HashMap::with_capacity(keys.len());
            for (i, k) in exact_keys.into_iter().enumerate() {
                m.entry(k).or_insert(i);
            }
            return Index::Exact(m);
        }
        let mut v = Vec::with_capacity(keys.len());
        for (i, k) in keys.iter().enumerate() {
            match k.as_slice() {
                [Atom::Range(lo, hi)] => v.push((*lo, *hi, i)),
                _ => return Index::Walk,
            }
        }
        v.sort_unstable();
        if v.windows(2).any(|w| w[1].0 <= w[0].1) {
            // Overlaps: the first in order wins, which a walk keeps.
            return Index::Walk;
        }
        Index::Intervals(v)
    }
}

/// The lazily built [`Index`]; not part of what the elements are (equal
/// and cloned as if absent).
#[derive(Default)]
pub struct ElementIndex(std::sync::OnceLock<Index>);

impl Clone for ElementIndex {
    fn clone(&self) -> Self {
        ElementIndex::default()
    }
}

impl PartialEq for ElementIndex {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

impl Eq for ElementIndex {}

impl fmt::Debug for ElementIndex {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ElementIndex")
    }
}

impl Elements {
    /// The index over the keys as they are.
    pub fn index(&self) -> &Index {
        self.index.0.get_or_init(|| Index::of(&self.keys))
    }

    /// After `keys` changed other than by insert and remove.
    pub fn reindex(&mut self) {
        self.index = ElementIndex::default();
    }

    /// Adds an element (a verdict map's with its verdict) unless it is
    /// there: whether it was added.
    pub fn insert(&mut self, key: Vec<Atom>, verdict: Option<Action>) -> bool {
        if self.position(&key).is_some() {
            return false;
        }
        let i = self.keys.len();
        if let (Some(Index::Exact(m)), Some(values)) = (self.index.0.get_mut(), exact(&key)) {
            m.insert(values, i);
        } else {
            self.reindex();
        }
        self.keys.push(key);
        if let Some(v) = verdict {
            self.verdicts.push(v);
        }
        true
    }

    /// Removes an element: whether it was there.
    pub fn remove(&mut self, key: &[Atom]) -> bool {
        let Some(i) = self.position(key) else {
            return false;
        };
        let last = self.keys.len() - 1;
        if let Some(Index::Exact(m)) = self.index.0.get_mut() {
            m.remove(&exact(key).unwrap_or_default());
            if i != last {
                if let Some(values) = exact(&self.keys[last]) {
                    m.insert(values, i);
                }
            }
        } else {
            self.reindex();
        }
        self.keys.swap_remove(i);
        if i < self.verdicts.len() {
            self.verdicts.swap_remove(i);
        }
        true
    }

    /// The element a key of numbers (one per field) is in, as a walk in
    /// order would find it, if the index can tell: an exact key's first
    /// element, or the one range (they do not overlap) that holds the
    /// value. None: walk.
    pub fn find_numbers(&self, nums: &[u128]) -> Option<Option<usize>> {
        match self.index() {
            Index::Exact(m) => Some(m.get(nums).copied()),
            Index::Intervals(v) if nums.len() == 1 => {
                let n = nums[0];
                let at = v.partition_point(|r| r.0 <= n);
                Some(
                    at.checked_sub(1)
                        .map(|i| v[i])
                        .filter(|r| n <= r.1)
                        .map(|r| r.2),
                )
            }
            _ => None,
        }
    }

    fn position(&self, key: &[Atom]) -> Option<usize> {
        match (self.index(), exact(key)) {
            (Index::Exact(m), Some(values)) => m.get(&values).copied(),
            _ => self.keys.iter().position(|k| k == key),
        }
    }
}

/// A key of single numbers as those numbers, without allocating for the
/// keys sets have.
pub fn exact_numbers(key: &[Atom]) -> Option<crate::eval::Numbers> {
    key.iter()
        .map(|a| match a {
            Atom::Range(lo, hi) if lo == hi => Some(*lo),
            _ => None,
        })
        .collect()
}

/// A key of single numbers as those numbers.
fn exact(key: &[Atom]) -> Option<Vec<u128>> {
    exact_numbers(key).map(|n| n.into_vec())
}

/// A named set or map of a table.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NamedSet {
    pub table: TableId,
    pub name: String,
    pub elements: Elements,
    /// The key's fields, as the rule naming it reads them: how the
    /// kernel's elements are decoded (crate::raw_elements).
    pub key: Vec<Field>,
    /// Flagged interval: the kernel keeps interval boundaries.
    pub interval: bool,
    /// A verdict map.
    pub map: bool,
    /// A one-field interval set's boundaries as the kernel holds them
    /// (read over netlink), for its element changes to be applied as the
    /// kernel applies them: the intervals alone do not say which
    /// boundaries a deletion leaves.
    pub boundaries: KernelBoundaries,
}

/// [`NamedSet::boundaries`]: how the kernel holds a set, not what it
/// matches, so not compared (a set read from nft's JSON has none).
#[derive(Clone, Default)]
pub struct KernelBoundaries(pub Option<crate::raw_elements::Boundaries<Action>>);

impl PartialEq for KernelBoundaries {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

impl Eq for KernelBoundaries {}

impl fmt::Debug for KernelBoundaries {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.0 {
            Some(b) => write!(f, "KernelBoundaries({})", b.len()),
            None => f.write_str("KernelBoundaries(None)"),
        }
    }
}

impl Elements {
    /// The elements of intervals (first, last, a map's verdict).
    pub fn of_ranges(ranges: Vec<(u128, u128, Option<Action>)>) -> Elements {
        let mut e = Elements::default();
        for (lo, hi, verdict) in ranges {
            e.keys.push(vec![Atom::Range(lo, hi)]);
            if let Some(v) = verdict {
                e.verdicts.push(v);
            }
        }
        e
    }
}

/// What a test compares with the packet's key.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Against {
    /// Inline: a value, a range, a prefix, an anonymous set.
    Inline(Arc<Elements>),
    /// A named set (`@allowed`): its elements as the ruleset has them now.
    Named(usize),
}

/// `key [& mask] ==|!= set`: the key is one field or a concatenation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Test {
    pub key: Vec<Field>,
    /// A bit mask applied to a single field first (`tcp flags & (syn|ack)`).
    pub mask: Option<u128>,
    pub negate: bool,
    pub against: Against,
}

/// A verdict statement, or what a verdict map yields.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Action {
    Accept,
    Drop,
    Continue,
    Return,
    /// Index of a regular chain of the same table.
    Jump(usize),
    Goto(usize),
    /// The kernel must handle the packet itself (`reject`: it sends the
    /// ICMP error): the fast path passes it.
    Kernel,
}

/// One statement of a rule, in the rule's order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Step {
    Test(Test),
    /// `counter`: the packets that reach it.
    Counter,
    Verdict(Action),
    /// `key vmap { ... }` or `vmap @map`: the matching element's verdict,
    /// none: the rule goes on to its next statement.
    Vmap {
        key: Vec<Field>,
        mask: Option<u128>,
        map: Against,
    },
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rule {
    /// The kernel's handle: `nft ... handle N`.
    pub handle: u64,
    /// Not changed once read: a rule changed is a new rule.
    pub steps: Vec<Step>,
    pub identity: Identity,
}

impl Rule {
    /// A rule read, with an identity of its own.
    pub fn new(handle: u64, steps: Vec<Step>) -> Rule {
        Rule {
            handle,
            steps,
            identity: Identity::fresh(),
        }
    }
}

/// A rule's identity in this process: kept with the rule from one
/// generation to the next (and by its clones), new for every rule read
/// (again), so that what was made of a rule before is found again without
/// comparing its steps (crate::classify::Memo). Not part of what the rule
/// is: rules read twice are equal.
#[derive(Clone, Copy, Debug)]
pub struct Identity(pub u64);

impl Identity {
    pub fn fresh() -> Identity {
        static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
        Identity(NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed))
    }
}

impl PartialEq for Identity {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

impl Eq for Identity {}

/// A table by family and name ("inet filter"), as nf_tables names it.
pub use linerate_netlink::nft_elements::TableId;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Chain {
    pub table: TableId,
    /// The table's handle: a table deleted and made again (`nft -f` after
    /// a flush) gets a new one, and its rules new counters.
    pub table_handle: u64,
    pub name: String,
    pub rules: Vec<Rule>,
}

/// A base chain a forwarded packet of the family crosses.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BaseChain {
    pub hook: Hook,
    pub priority: i32,
    /// The chain (an index into `chains`).
    pub chain: usize,
    /// Its policy: accept or drop.
    pub policy: Action,
}

/// One family's forwarding-path filter: the base chains in the order the
/// kernel runs them (hook, then priority, then registration), the chains
/// they reach, and the named sets their rules name; and the family's nat
/// chains at prerouting and postrouting ("table name chain name"), whose
/// rules only a connection's first packet meets: the fast path maps an
/// established connection as its conntrack entry says
/// (bpf/include/router/nat.h).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Filter {
    pub base: Vec<BaseChain>,
    pub chains: Vec<Chain>,
    pub sets: Vec<NamedSet>,
    pub nat: Vec<NatChain>,
}

/// A nat base chain on the forwarding path.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NatChain {
    pub table: TableId,
    pub name: String,
}

impl Filter {
    pub fn set<'a>(&'a self, a: &'a Against) -> &'a Elements {
        match a {
            Against::Inline(e) => e,
            Against::Named(i) => &self.sets[*i].elements,
        }
    }

    /// Whether nothing filters or maps the family (no base chain on its
    /// path).
    pub fn is_empty(&self) -> bool {
        self.base.is_empty() && self.nat.is_empty()
    }

    /// The chains a packet entering `chain` can reach (it included):
    /// through jumps, gotos and verdict maps' elements.
    pub fn reachable(&self, chain: usize) -> Vec<usize> {
        let mut seen = vec![false; self.chains.len()];
        let mut todo = vec![chain];
        while let Some(c) = todo.pop() {
            if std::mem::replace(&mut seen[c], true) {
                continue;
            }
            for rule in &self.chains[c].rules {
                for s in &rule.steps {
                    let targets: Vec<&Action> = match s {
                        Step::Verdict(a) => vec![a],
                        Step::Vmap { map, .. } => self.set(map).verdicts.iter().collect(),
                        Step::Test(_) | Step::Counter => vec![],
                    };
                    for a in targets {
                        if let Action::Jump(t) | Action::Goto(t) = a {
                            todo.push(*t);
                        }
                    }
                }
            }
        }
        (0..seen.len()).filter(|&c| seen[c]).collect()
    }

    /// Whether some rule of `chain` reads the packet's connection.
    pub fn chain_reads_ct(&self, chain: usize) -> bool {
        self.chains[chain].rules.iter().any(|r| {
            r.steps.iter().any(|s| match s {
                Step::Test(t) => t.key.iter().any(|f| f.is_ct()),
                Step::Vmap { key, .. } => key.iter().any(|f| f.is_ct()),
                Step::Counter | Step::Verdict(_) => false,
            })
        })
    }

    /// Whether some rule reads the packet's connection (`ct state`): the
    /// fast path then needs it.
    pub fn reads_ct(&self) -> bool {
        (0..self.chains.len()).any(|c| self.chain_reads_ct(c))
    }

    /// A chain reading ct that a prerouting base chain at conntrack's
    /// priority or before reaches, with that base chain (before
    /// conntrack's hook a packet has no connection yet: its `ct state`
    /// reads invalid there, which the fast path, judging with the
    /// connection's state, would not see).
    pub fn ct_before_conntrack(&self) -> Option<(&BaseChain, usize)> {
        self.base
            .iter()
            .filter(|b| b.hook == Hook::Prerouting && b.priority <= CONNTRACK_PRIORITY)
            .find_map(|b| {
                self.reachable(b.chain)
                    .into_iter()
                    .find(|&c| self.chain_reads_ct(c))
                    .map(|c| (b, c))
            })
    }

    /// Rules, all chains.
    pub fn rules(&self) -> usize {
        self.chains.iter().map(|c| c.rules.len()).sum()
    }
}

/// What keeps a family's ruleset from being judged outside the kernel:
/// named as `nft list` names it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NotCompiled {
    pub table: TableId,
    pub chain: Option<String>,
    pub handle: Option<u64>,
    pub why: String,
}

impl fmt::Display for NotCompiled {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "table {}", self.table)?;
        if let Some(c) = &self.chain {
            write!(f, " chain {c}")?;
        }
        if let Some(h) = self.handle {
            write!(f, " rule handle {h}")?;
        }
        write!(f, ": {}", self.why)
    }
}

/// Per IP family: the filter, or why the kernel keeps it.
pub type Judged = Result<Filter, Vec<NotCompiled>>;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Ruleset {
    pub ipv4: Judged,
    pub ipv6: Judged,
}

impl Ruleset {
    pub fn family(&self, ipv6: bool) -> &Judged {
        if ipv6 {
            &self.ipv6
        } else {
            &self.ipv4
        }
    }
}

/// Interface names to indexes, as the namespace has them (iif and oif
/// are indexes in the kernel; nft prints their names).
pub type Interfaces = HashMap<String, u32>;

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};

    /// What a walk in order finds for a key of numbers.
    fn walk(e: &Elements, nums: &[u128]) -> Option<usize> {
        e.keys.iter().position(|k| {
            k.iter().zip(nums).all(|(a, n)| match a {
                Atom::Range(lo, hi) => lo <= n && n <= hi,
                _ => false,
            })
        })
    }

    #[test]
    fn the_index_finds_what_a_walk_finds() {
        let mut r = rand::rngs::StdRng::seed_from_u64(5);
        let (mut exact, mut intervals) = (0, 0);
        for _ in 0..3000 {
            let fields = r.gen_range(1..3);
            let ranges = r.gen_bool(0.5);
            let mut e = Elements::default();
            for _ in 0..r.gen_range(0..40) {
                let k = (0..fields)
                    .map(|_| {
                        // Ranges spread wider: most sets of them do not overlap.
                        let lo = r.gen_range(0..if ranges { 2000u128 } else { 200 });
                        let hi = if ranges { lo + r.gen_range(0..6) } else { lo };
                        Atom::Range(lo, hi)
                    })
                    .collect();
                // A set holds an element once.
                if !e.keys.contains(&k) {
                    e.keys.push(k);
                }
            }
            match e.index() {
                Index::Exact(_) => exact += 1,
                Index::Intervals(_) => intervals += 1,
                Index::Walk => {}
            }
            let top = if ranges { 2010 } else { 210 };
            for _ in 0..50 {
                let nums: Vec<u128> = (0..fields).map(|_| r.gen_range(0..top)).collect();
                if let Some(found) = e.find_numbers(&nums) {
                    assert_eq!(found, walk(&e, &nums), "{nums:?} in {:?}", e.keys);
                }
            }
            // Changes keep it: remove half, add some, compare again.
            let keys = e.keys.clone();
            for k in keys.iter().step_by(2) {
                assert!(e.remove(k));
                assert!(!e.remove(k));
            }
            for _ in 0..5 {
                let k: Vec<Atom> = (0..fields)
                    .map(|_| Atom::value(r.gen_range(0..200)))
                    .collect();
                let had = e.keys.contains(&k);
                assert_eq!(e.insert(k, None), !had);
            }
            for _ in 0..50 {
                let nums: Vec<u128> = (0..fields).map(|_| r.gen_range(0..210)).collect();
                let fresh = Elements {
                    keys: e.keys.clone(),
                    ..Default::default()
                };
                if let Some(found) = e.find_numbers(&nums) {
                    assert_eq!(found.is_some(), walk(&fresh, &nums).is_some());
                    if let Some(i) = found {
                        assert_eq!(
                            walk(
                                &Elements {
                                    keys: vec![e.keys[i].clone()],
                                    ..Default::default()
                                },
                                &nums
                            ),
                            Some(0)
                        );
                    }
                }
            }
        }
        assert!(
            exact > 300 && intervals > 100,
            "{exact} exact, {intervals} interval indexes"
        );
    }
}
