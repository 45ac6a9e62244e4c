//! The firewall's control side (docs/firewall-fast-path.md): the kernel's
//! nftables ruleset as the fast path's verdict cache judges it.
//!
//! A [`Compiled`] is one generation of the ruleset: per IP family the
//! filter the fast path may judge (crates/firewall), what its rules read
//! (the key fields the program keeps), and the interface names `iifname`
//! and `oifname` compare. A miss the program reports is judged here by the
//! evaluator the oracle holds to the kernel (`crate::judge`),
//! so a cached verdict is the kernel's by construction; [`Compiled::slot`]
//! says what to write and [`way_for`] where, and the firewall thread
//! (linerate_fwfollow::thread) writes it.
use crate::cache::{self, FlowKey, KeyOf, Reads};
use crate::ruleset::{Against, Rule, Step, Test};
use crate::ruleset::{Filter, Judged, Ruleset};
use crate::Verdict;
use linerate_dataplane::fw_cache::{set_of, slot_index, way_for, FwTable};
use linerate_dataplane::fwc::{self, Act, Tables};
use linerate_dataplane::layout::{
    FwKey, FwReads, FwSlot, FW_ACCEPT, FW_DROP, FW_ENTRY_COUNTERS, FW_KERNEL, FW_READ_CT,
    FW_READ_DADDR, FW_READ_IIF, FW_READ_L4PROTO, FW_READ_NAT, FW_READ_NEXTHDR, FW_READ_OIF,
    FW_READ_SADDR, FW_SET_BITS_ALL, FW_SET_BITS_CLASSIFIED,
};
use std::collections::{BTreeMap, BTreeSet};

/// The most set elements a family's classifier holds (named sets, all
/// together).
pub const CLASSIFIER_SET_ELEMENTS: usize = 65536;

/// Rule counter ids a family has: IPv4's are 0..32768, IPv6's follow.
pub const FAMILY_COUNTERS: usize = 32768;

/// One family's filter as the fast path judges it.
#[derive(Clone, Debug)]
pub struct Family {
    pub filter: Filter,
    pub reads: Reads,
    /// The classifier the program judges a key its cache lacks by, or why
    /// there is none (the key is then reported and judged here, and the
    /// kernel judges its packets until the verdict is cached).
    pub classifier: Result<Tables, String>,
    /// The rules the classifier laid out, for the next generation's
    /// (crate::classify::Memo).
    pub memo: crate::classify::Memo,
}

/// A rule, as `nft list` names it: what a counter id stands for.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct RuleRef {
    pub ipv6: bool,
    pub table: String,
    /// The table's handle: the same names in a table made again are
    /// other rules, counted from 0 (as the kernel's counters).
    pub table_handle: u64,
    pub chain: String,
    pub handle: u64,
}

/// A chain's rules as the kernel holds them after a transaction: their
/// handles in order, and nft's JSON of the rules new to it.
#[derive(Clone, Debug)]
pub struct ChainRules {
    pub table: crate::ruleset::TableId,
    pub chain: String,
    pub handles: Vec<u64>,
    pub added: std::collections::HashMap<u64, serde_json::Value>,
}

/// A rule of a chain's new order: read from nft's JSON, or kept from
/// its place in the chain before.
enum Planned {
    New(Rule),
    Kept(usize),
}

/// The ruleset in one generation.
#[derive(Clone, Debug, Default)]
pub struct Compiled {
    pub generation: u32,
    /// `[ipv6]`: the family's filter, or None: the fast path judges none
    /// of it (it learns nothing; every lookup misses).
    pub families: [Option<Family>; 2],
    /// Interface names by index, for `iifname` and `oifname`.
    pub names: BTreeMap<u32, String>,
    /// The fast path finds connections (a filter may read ct).
    pub ct: bool,
    /// What changed from the generation before (crate::carry).
    pub since: Since,
}

/// What changed between a generation and the one before it.
#[derive(Clone, Debug, Default)]
pub enum Since {
    /// Anything may have: the ruleset was read whole, or rules changed.
    #[default]
    Anything,
    /// Only set elements, `[ipv6]`: each set changed (its index in the
    /// family's filter), and what of it.
    Elements([Vec<(usize, Touched)>; 2]),
}

/// What of a set changed.
#[derive(Clone, Debug)]
pub enum Touched {
    /// These keys, each of single numbers, were added or removed.
    Keys(rustc_hash::FxHashSet<crate::eval::Numbers>),
    /// Ranges, names or interval boundaries: anything the set holds may
    /// have.
    Anything,
}

impl Compiled {
    /// Generation `generation` of `ruleset`; a family the reader refused,
    /// or whose rules read what a key does not hold, is left out, and why
    /// is said in the second value (`[ipv6]`, None: compiled or empty).
    /// `ct`: the fast path can find connections in the kernel's conntrack
    /// (FW_CT_ON); without it a family whose rules read them is left out.
    pub fn new(
        generation: u32,
        ruleset: &Ruleset,
        names: BTreeMap<u32, String>,
        ct: bool,
    ) -> (Compiled, [Option<String>; 2]) {
        let mut why = [None, None];
        let mut families = [None, None];
        for ipv6 in [false, true] {
            let i = ipv6 as usize;
            match family_of(ruleset.family(ipv6), ct) {
                Ok(mut f) => {
                    if let Some(f) = &mut f {
                        build_classifier(f, ipv6, &names, generation);
                    }
                    families[i] = f
                }
                Err(e) => why[i] = Some(e),
            }
        }
        (
            Compiled {
                generation,
                families,
                names,
                ct,
                since: Since::Anything,
            },
            why,
        )
    }

    /// The same generation without classifiers: every key the cache
    /// lacks is reported and judged here (the verdict cache alone).
    pub fn without_classifiers(mut self) -> Compiled {
        for f in self.families.iter_mut().flatten() {
            f.classifier = Err("the classifier is off".into());
        }
        self
    }

    /// The classifiers of the generation, `[ipv6]`.
    pub fn classifiers(&self) -> [Option<&Tables>; 2] {
        [0, 1].map(|i| {
            self.families[i]
                .as_ref()
                .and_then(|f| f.classifier.as_ref().ok())
        })
    }

    /// Per family judged here, why it has no classifier (None: it has
    /// one, or the family is not judged here).
    pub fn unclassified(&self) -> [Option<String>; 2] {
        [0, 1].map(|i| {
            self.families[i]
                .as_ref()
                .and_then(|f| f.classifier.as_ref().err().cloned())
        })
    }

    /// The rule counters the classifiers count at.
    pub fn classifier_counters(&self) -> BTreeSet<u16> {
        self.classifiers()
            .iter()
            .flatten()
            .flat_map(|t| t.acts.iter())
            .filter_map(|a| match a {
                Act::Count(id) => Some(*id as u16),
                _ => None,
            })
            .collect()
    }

    /// An empty generation: nothing judged, every lookup misses.
    pub fn nothing(generation: u32) -> Compiled {
        Compiled {
            generation,
            ..Default::default()
        }
    }

    /// What the program keeps of a packet of the family (all zero: the
    /// family is not judged here).
    pub fn reads(&self, ipv6: bool) -> FwReads {
        self.families[ipv6 as usize]
            .as_ref()
            .map_or_else(FwReads::default, |f| {
                let r = fw_reads(&f.reads);
                FwReads {
                    set_bits: if f.classifier.is_ok() {
                        FW_SET_BITS_CLASSIFIED
                    } else {
                        FW_SET_BITS_ALL
                    },
                    fields: r.fields
                        | if f.filter.nat.is_empty() {
                            0
                        } else {
                            FW_READ_NAT
                        },
                    ..r
                }
            })
    }

    /// The base chains the fast path judges, per family, named as
    /// linerate_netlink::netfilter names hooks ("nft chain inet filter forward"):
    /// where every hook on a family's path is one of these, the fast path
    /// may forward the family through the firewall.
    pub fn covered(&self) -> [BTreeSet<String>; 2] {
        let mut out = [BTreeSet::new(), BTreeSet::new()];
        for (i, f) in self.families.iter().enumerate() {
            if let Some(f) = f {
                for b in &f.filter.base {
                    let c = &f.filter.chains[b.chain];
                    out[i].insert(format!(
                        "nft chain {} {} {}",
                        c.table.family, c.table.name, c.name
                    ));
                }
                for n in &f.filter.nat {
                    out[i].insert(format!(
                        "nft chain {} {} {}",
                        n.table.family, n.table.name, n.name
                    ));
                }
            }
        }
        out
    }

    /// The slot to cache for a reported key: the evaluator's verdict and
    /// the rules it counted. None: the key's family is not judged here, or
    /// names an interface not known (the names are read again first).
    pub fn slot(&self, key: &FlowKey) -> Option<FwSlot> {
        let ipv6 = key.ipv6 != 0;
        let family = self.families[ipv6 as usize].as_ref()?;
        // Only a key the program could have built: no field the ruleset
        // does not read (a report from before the reads changed).
        if FlowKey::of(&key.packet(&|_| String::new()), &family.reads) != *key {
            return None;
        }
        for (read, index) in [(family.reads.iif, key.iif), (family.reads.oif, key.oif)] {
            if read && index != 0 && !self.names.contains_key(&index) {
                return None;
            }
        }
        let name = |i: u32| self.names.get(&i).cloned().unwrap_or_default();
        let e = cache::entry(&family.filter, key, &name);
        let base = if ipv6 { FAMILY_COUNTERS } else { 0 };
        let ids: Option<Vec<u16>> = e
            .counters
            .iter()
            .map(|&id| {
                let id = id as usize;
                (id < FAMILY_COUNTERS).then(|| (base + id) as u16)
            })
            .collect();
        let (verdict, ids) = match (e.verdict, ids) {
            (Verdict::Accept, Some(ids)) => (FW_ACCEPT, ids),
            (Verdict::Drop, Some(ids)) => (FW_DROP, ids),
            // More rules than the counters have ids for: the kernel's.
            _ => (FW_KERNEL, Vec::new()),
        };
        debug_assert!(ids.len() <= FW_ENTRY_COUNTERS);
        let mut counters = [0u16; FW_ENTRY_COUNTERS];
        counters[..ids.len()].copy_from_slice(&ids);
        Some(FwSlot {
            seq: 0,
            generation: self.generation,
            key: FwKey { flow: *key },
            verdict,
            counters_n: ids.len() as u8,
            counters,
            reserved: [0; 14],
        })
    }

    /// Applies a batch of transactions as notified, and makes it
    /// generation `generation`: changes of named sets' elements to the
    /// sets the filters name, and the rules of `chains` as the kernel now
    /// holds them (the rules new to a chain read from their JSON). A
    /// one-field interval set's boundaries change as the kernel's rbtree
    /// does, and its intervals are drawn from them again once the batch is
    /// in. Ok(false): the batch changes nothing the filters hold, and the
    /// generation stays. Err: not one the firewall applies in place (an
    /// interval set read without its boundaries, a verdict to a chain not
    /// read, an element that does not decode, a rule that jumps to a chain
    /// or reads a set the filter lacks or reads what a key cannot hold):
    /// the ruleset must be read again (this generation is then half
    /// changed: not to be published).
    pub fn apply(
        &mut self,
        generation: u32,
        changes: &[linerate_netlink::nft_events::ElementChange],
        chains: &[ChainRules],
        ifindex: &dyn Fn(&str) -> Option<u32>,
    ) -> Result<bool, String> {
        // The chains' new rules: those new to them read before anything
        // changes, the others moved from where they were after.
        let mut plans = [Vec::new(), Vec::new()];
        for (i, family) in self.families.iter().enumerate() {
            let Some(family) = family else { continue };
            let filter = &family.filter;
            for ch in chains {
                let Some(at) = filter
                    .chains
                    .iter()
                    .position(|c| c.table == ch.table && c.name == ch.chain)
                else {
                    // A chain no base chain of the family reaches.
                    continue;
                };
                let had: rustc_hash::FxHashMap<u64, usize> = filter.chains[at]
                    .rules
                    .iter()
                    .enumerate()
                    .map(|(k, r)| (r.handle, k))
                    .collect();
                let mut plan = Vec::with_capacity(ch.handles.len());
                for &h in &ch.handles {
                    plan.push(match (had.get(&h), ch.added.get(&h)) {
                        (_, Some(json)) => Planned::New(
                            crate::read::rule_in(filter, &ch.table, json, ifindex).map_err(
                                |e| {
                                    format!(
                                        "rule {h} of chain {} of table {}: {e:#}",
                                        ch.chain, ch.table
                                    )
                                },
                            )?,
                        ),
                        (Some(&k), None) => Planned::Kept(k),
                        (None, None) => {
                            return Err(format!(
                            "rule {h} of chain {} of table {} is new, and its text was not printed",
                            ch.chain, ch.table
                        ))
                        }
                    });
                }
                plans[i].push((at, plan));
            }
        }
        // A batch that changes no chain or set the filters hold (another
        // table's, a set no rule reads) leaves the generation as it is.
        let holds_set = |c: &linerate_netlink::nft_events::ElementChange| {
            self.families.iter().flatten().any(|f| {
                f.filter
                    .sets
                    .iter()
                    .any(|s| s.table == c.table && s.name == c.set)
            })
        };
        if plans.iter().all(Vec::is_empty) && !changes.iter().any(holds_set) {
            return Ok(false);
        }
        let touched = self.apply_elements(changes)?;
        self.since = match plans.iter().all(Vec::is_empty) {
            true => Since::Elements(touched),
            false => Since::Anything,
        };
        // The rules replaced, kept until the filters are checked: a
        // refusal puts them back, so that rule counter ids stay what they
        // stood for until the ruleset is read.
        let mut replaced = Vec::new();
        let mut refused = None;
        for (i, family) in self.families.iter_mut().enumerate() {
            let Some(family) = family else { continue };
            // Elements alone change none of what is checked below.
            if plans[i].is_empty() {
                continue;
            }
            // Whether a rule went (the checks below are then over every
            // rule), and the rules that came.
            let mut dropped = false;
            let mut came = Vec::new();
            for (at, plan) in std::mem::take(&mut plans[i]) {
                let mut old: Vec<Option<Rule>> =
                    std::mem::take(&mut family.filter.chains[at].rules)
                        .into_iter()
                        .map(Some)
                        .collect();
                let mut from = Vec::with_capacity(plan.len());
                let new: Vec<Rule> = plan
                    .into_iter()
                    .map(|p| match p {
                        Planned::New(r) => {
                            from.push(None);
                            r
                        }
                        Planned::Kept(k) => {
                            from.push(Some(k));
                            old[k].take().expect("each kept once")
                        }
                    })
                    .collect();
                dropped |= old.iter().any(Option::is_some);
                came.extend(
                    from.iter()
                        .enumerate()
                        .filter(|(_, k)| k.is_none())
                        .map(|(j, _)| (at, j)),
                );
                family.filter.chains[at].rules = new;
                replaced.push((i, at, old, from));
            }
            let f = &family.filter;
            let came: Vec<&Rule> = came.iter().map(|&(at, j)| &f.chains[at].rules[j]).collect();
            let came_reads_ct = came.iter().any(|r| {
                r.steps.iter().any(|s| match s {
                    Step::Test(t) => t.key.iter().any(|k| k.is_ct()),
                    Step::Vmap { key, .. } => key.iter().any(|k| k.is_ct()),
                    _ => false,
                })
            });
            // Rules only added (the common change) reach no chain and read
            // no set the filter lacks (crate::read::rule_in), and read what
            // they read beside the others: only what they are is checked.
            refused = refused.or(if !self.ct && (dropped || came_reads_ct) && f.reads_ct() {
                Some("a rule reads ct, and the fast path cannot find connections here")
            } else if (dropped || came_reads_ct) && f.ct_before_conntrack().is_some() {
                Some("a rule reads ct before conntrack's hook")
            } else {
                None
            });
            if dropped {
                // A chain no rule reaches any more is not one a read keeps.
                let mut reached = vec![false; f.chains.len()];
                for b in &f.base {
                    for c in f.reachable(b.chain) {
                        reached[c] = true;
                    }
                }
                if reached.contains(&false) {
                    refused = refused.or(Some("a chain is no longer reached"));
                }
                // Nor a set no rule reads.
                let mut read = vec![false; f.sets.len()];
                for step in f
                    .chains
                    .iter()
                    .flat_map(|c| &c.rules)
                    .flat_map(|r| &r.steps)
                {
                    if let Step::Test(Test {
                        against: Against::Named(i),
                        ..
                    })
                    | Step::Vmap {
                        map: Against::Named(i),
                        ..
                    } = step
                    {
                        read[*i] = true;
                    }
                }
                if read.contains(&false) {
                    refused = refused.or(Some("a set is no longer read"));
                }
            }
            let reads = if dropped {
                Reads::of(f)
            } else {
                family.reads.with_rules(came.iter().copied())
            };
            match reads {
                Some(reads) => family.reads = reads,
                None => refused = refused.or(Some("a rule reads past what a key holds")),
            }
        }
        if let Some(why) = refused {
            for (i, at, mut old, from) in replaced {
                if let Some(f) = &mut self.families[i] {
                    // The rules kept back in their places; those new dropped.
                    let new = std::mem::take(&mut f.filter.chains[at].rules);
                    for (r, k) in new.into_iter().zip(from) {
                        if let Some(k) = k {
                            old[k] = Some(r);
                        }
                    }
                    f.filter.chains[at].rules = old.into_iter().flatten().collect();
                }
            }
            return Err(why.into());
        }
        self.generation = generation;
        // The classifiers again, with the elements and rules as they are now.
        for (i, f) in self.families.iter_mut().enumerate() {
            if let Some(f) = f {
                build_classifier(f, i == 1, &self.names, generation);
            }
        }
        Ok(true)
    }

    /// Applies element changes to the sets the filters name: per family,
    /// what of each set changed.
    fn apply_elements(
        &mut self,
        changes: &[linerate_netlink::nft_events::ElementChange],
    ) -> Result<[Vec<(usize, Touched)>; 2], String> {
        use crate::raw_elements::{self, Boundary};
        let mut touched: [BTreeMap<usize, Touched>; 2] = Default::default();
        for (family, touched) in self.families.iter_mut().zip(&mut touched) {
            let Some(family) = family else { continue };
            let filter = &mut family.filter;
            // Interval sets whose boundaries changed.
            let mut redraw = BTreeSet::new();
            for c in changes {
                let Some(i) = filter
                    .sets
                    .iter()
                    .position(|s| s.table == c.table && s.name == c.set)
                else {
                    // A set no rule of this family names.
                    continue;
                };
                let set = &filter.sets[i];
                let (table, map, key) = (set.table.clone(), set.map, set.key.clone());
                let action_of = |v: &raw_elements::RawVerdict| {
                    raw_elements::action(v, &mut |name| {
                        filter
                            .chains
                            .iter()
                            .position(|ch| ch.table == table && ch.name == name)
                    })
                    .map_err(|e| format!("map @{}: {e:#}", c.set))
                };
                let boundaries = set.interval && c.elements.iter().any(|e| e.key_end.is_none());
                if boundaries {
                    if set.boundaries.0.is_none() {
                        return Err(format!(
                            "set @{} keeps interval boundaries, not read from the kernel",
                            c.set
                        ));
                    }
                    let mut points = Vec::with_capacity(c.elements.len());
                    for e in &c.elements {
                        let (value, end) = raw_elements::boundary(&key, e)
                            .map_err(|e| format!("set @{}: {e:#}", c.set))?;
                        let verdict = match (&e.verdict, map && c.add && !end) {
                            (Some(v), true) => Some(action_of(v)?),
                            (None, true) => {
                                return Err(format!(
                                    "map @{}: an interval without its verdict",
                                    c.set
                                ))
                            }
                            (_, false) => None,
                        };
                        points.push((Boundary { value, start: !end }, verdict));
                    }
                    let b = filter.sets[i].boundaries.0.as_mut().expect("checked");
                    for (p, verdict) in points {
                        if c.add {
                            b.insert(p, verdict);
                        } else {
                            b.remove(&p);
                        }
                    }
                    redraw.insert(i);
                    touched.insert(i, Touched::Anything);
                    continue;
                }
                let decoded = raw_elements::decode(&key, set.interval, &c.elements)
                    .map_err(|e| format!("set @{}: {e:#}", c.set))?;
                for (atoms, verdict) in decoded {
                    let action = match (map, verdict) {
                        (false, _) => None,
                        (true, None) if !c.add => None,
                        (true, None) => {
                            return Err(format!("map @{}: an element without its verdict", c.set))
                        }
                        (true, Some(v)) => Some(action_of(&v)?),
                    };
                    let t = touched
                        .entry(i)
                        .or_insert_with(|| Touched::Keys(Default::default()));
                    if let Touched::Keys(keys) = t {
                        match crate::ruleset::exact_numbers(&atoms) {
                            Some(n) => {
                                keys.insert(n);
                            }
                            None => *t = Touched::Anything,
                        }
                    }
                    let e = &mut filter.sets[i].elements;
                    if c.add {
                        e.insert(atoms, action);
                    } else {
                        e.remove(&atoms);
                    }
                }
            }
            for i in redraw {
                let set = &mut filter.sets[i];
                let b = set.boundaries.0.as_ref().expect("redrawn sets have them");
                let max = crate::read::width_max(set.key[0]);
                let ranges = raw_elements::ranges_from(b, max)
                    .map_err(|e| format!("set @{}: {e:#}", set.name))?;
                if set.map && ranges.iter().any(|r| r.2.is_none()) {
                    return Err(format!(
                        "map @{}: an interval without its verdict",
                        set.name
                    ));
                }
                set.elements = crate::ruleset::Elements::of_ranges(ranges);
            }
        }
        Ok(touched.map(|t| t.into_iter().collect()))
    }

    /// The handles of chain `chain` of `table` in order, as a family
    /// judges it (None: no family reaches it).
    pub fn handles(&self, table: &crate::ruleset::TableId, chain: &str) -> Option<Vec<u64>> {
        self.families.iter().flatten().find_map(|f| {
            f.filter
                .chains
                .iter()
                .find(|c| &c.table == table && c.name == chain)
                .map(|c| c.rules.iter().map(|r| r.handle).collect())
        })
    }

    /// Every rule of the generation.
    pub fn rules(&self) -> BTreeSet<RuleRef> {
        let mut all = BTreeSet::new();
        for (i, f) in self.families.iter().enumerate() {
            let Some(f) = f else { continue };
            for c in &f.filter.chains {
                for r in &c.rules {
                    all.insert(RuleRef {
                        ipv6: i == 1,
                        table: c.table.to_string(),
                        table_handle: c.table_handle,
                        chain: c.name.clone(),
                        handle: r.handle,
                    });
                }
            }
        }
        all
    }

    /// The rule counter `id` stands for in this generation.
    pub fn rule_of(&self, id: u16) -> Option<RuleRef> {
        let (ipv6, mut n) = (
            id as usize >= FAMILY_COUNTERS,
            id as usize % FAMILY_COUNTERS,
        );
        let f = self.families[ipv6 as usize].as_ref()?;
        for c in &f.filter.chains {
            if n < c.rules.len() {
                return Some(RuleRef {
                    ipv6,
                    table: c.table.to_string(),
                    table_handle: c.table_handle,
                    chain: c.name.clone(),
                    handle: c.rules[n].handle,
                });
            }
            n -= c.rules.len();
        }
        None
    }
}

/// Makes `c` the generation frames are judged by: every entry cached
/// before is stale at once.
pub fn publish(table: &mut impl FwTable, c: &Compiled) {
    publish_carrying(table, c, &[]);
}

/// [`publish`], with the verdicts crate::carry carried into `c`.
pub fn publish_carrying(table: &mut impl FwTable, c: &Compiled, carried: &[(u32, FwSlot)]) {
    table.publish(
        c.generation,
        [c.reads(false), c.reads(true)],
        c.classifiers(),
        carried,
    );
}

/// Builds the classifier of family `f` for generation `generation`, or
/// says why it has none: a filter the classifier cannot say, or tables
/// larger than the program reads.
fn build_classifier(f: &mut Family, ipv6: bool, names: &BTreeMap<u32, String>, generation: u32) {
    // Large sets stay the verdict cache's: the tables are built whole for
    // each generation, and a set's element changes come many a second.
    let elements: usize = f.filter.sets.iter().map(|s| s.elements.keys.len()).sum();
    if elements > CLASSIFIER_SET_ELEMENTS {
        f.classifier = Err(format!(
            "its sets hold {elements} elements, more than the classifier takes ({CLASSIFIER_SET_ELEMENTS})"
        ));
        f.memo = Default::default();
        return;
    }
    let (t, memo) = crate::classify::compile_with(&f.filter, ipv6, &f.reads, names, &f.memo);
    f.memo = memo;
    f.classifier = t.map_err(|e| e.to_string()).and_then(|t| {
        t.encode(fwc::region(generation, ipv6))
            .map_err(|e| e.to_string())?;
        Ok(t)
    });
}

/// Caches the verdict for a reported key under `c`: the slot written, or
/// None (its family is not judged here, or it is cached already). `evict`
/// picks the way a full set gives up (the caller alternates it).
pub fn learn(table: &mut impl FwTable, c: &Compiled, key: &FlowKey, evict: bool) -> Option<u32> {
    let new = c.slot(key)?;
    let set = set_of(&new.key, c.reads(new.key.flow.ipv6 != 0).set_bits);
    let ways = [
        table.slot(slot_index(set, 0)),
        table.slot(slot_index(set, 1)),
    ];
    let index = slot_index(set, way_for(&ways, &new, evict)?);
    table.write_slot(index, &new);
    Some(index)
}

/// A family's filter, None if nothing filters it, or why the fast path
/// cannot judge it.
fn family_of(j: &Judged, ct: bool) -> Result<Option<Family>, String> {
    match j {
        Err(refused) => Err(refused
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join("; ")),
        Ok(f) if f.is_empty() => Ok(None),
        Ok(f) if f.reads_ct() && !ct => Err(
            "a rule reads ct, and the fast path cannot find connections here (no XDP conntrack kfuncs in this kernel)"
                .to_string(),
        ),
        Ok(f) if !f.nat.is_empty() && !ct => Err(format!(
            "nat chain {} {}: the fast path cannot find connections' mappings here (no XDP conntrack kfuncs in this kernel)",
            f.nat[0].table, f.nat[0].name
        )),
        Ok(f) => {
            let reads = Reads::of(f).ok_or_else(|| {
                format!(
                    "a rule reads past the transport header's first {} bytes",
                    cache::TRANSPORT_BYTES
                )
            })?;
            Ok(Some(Family {
                filter: f.clone(),
                reads,
                classifier: Err("not built yet".into()),
                memo: Default::default(),
            }))
        }
    }
}

/// The program's `fw_reads` for `r`.
pub fn fw_reads(r: &Reads) -> FwReads {
    let mut fields = 0;
    for (on, bit) in [
        (r.iif, FW_READ_IIF),
        (r.oif, FW_READ_OIF),
        (r.saddr, FW_READ_SADDR),
        (r.daddr, FW_READ_DADDR),
        (r.l4proto, FW_READ_L4PROTO),
        (r.nexthdr, FW_READ_NEXTHDR),
        (r.ct, FW_READ_CT),
    ] {
        if on {
            fields |= bit;
        }
    }
    let mut mask = [0u8; 16];
    for (m, read) in mask.iter_mut().zip(r.transport) {
        *m = if read { 0xff } else { 0 };
    }
    FwReads {
        transport_mask: [
            u64::from_le_bytes(mask[..8].try_into().unwrap()),
            u64::from_le_bytes(mask[8..].try_into().unwrap()),
        ],
        fields,
        transport_end: r.transport_end() as u8,
        set_bits: FW_SET_BITS_ALL,
        pad: [0; 5],
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::read::parse;
    use linerate_dataplane::layout::FW_CACHE_SETS;

    const RULESET: &str = r#"{"nftables": [
      {"table": {"family": "inet", "name": "f", "handle": 1}},
      {"chain": {"family": "inet", "table": "f", "name": "fwd", "handle": 1,
                 "type": "filter", "hook": "forward", "prio": 0, "policy": "accept"}},
      {"rule": {"family": "inet", "table": "f", "chain": "fwd", "handle": 2,
                "expr": [{"match": {"op": "==", "left": {"payload": {"protocol": "udp", "field": "dport"}}, "right": 53}},
                         {"counter": {"packets": 0, "bytes": 0}}, {"drop": null}]}},
      {"rule": {"family": "inet", "table": "f", "chain": "fwd", "handle": 3,
                "expr": [{"match": {"op": "==", "left": {"meta": {"key": "oifname"}}, "right": "out0"}},
                         {"counter": {"packets": 0, "bytes": 0}}, {"accept": null}]}}
    ]}"#;

    fn compiled(generation: u32) -> Compiled {
        let rs = parse(RULESET, &|_| None).unwrap();
        let names = BTreeMap::from([(3, "out0".to_string()), (2, "in0".to_string())]);
        let (c, why) = Compiled::new(generation, &rs, names, true);
        assert_eq!(why, [None, None]);
        c
    }

    fn udp_key(c: &Compiled, ipv6: bool, dport: u16, oif: u32) -> FlowKey {
        let p = crate::Packet {
            ipv6,
            iif: 2,
            iifname: "in0".into(),
            oif,
            oifname: String::new(),
            saddr: 1,
            daddr: 2,
            l4proto: 17,
            nexthdr: 17,
            later_fragment: false,
            transport: [
                &1000u16.to_be_bytes()[..],
                &dport.to_be_bytes(),
                &[0, 8, 0, 0],
            ]
            .concat(),
            ..Default::default()
        };
        FlowKey::of(&p, &c.families[ipv6 as usize].as_ref().unwrap().reads)
    }

    #[test]
    fn a_reported_key_is_judged_with_its_family_counters() {
        let c = compiled(7);
        // The ruleset reads the l4proto (udp dport), the ports' bytes 2-3
        // and the output interface; not the addresses.
        let r = c.reads(false);
        assert_eq!(r.fields, FW_READ_OIF | FW_READ_L4PROTO);
        assert_eq!((r.transport_end, r.transport_mask), (4, [0xffff_0000, 0]));
        assert_eq!(c.reads(true), r, "an inet table: the same for IPv6");

        let dns = c.slot(&udp_key(&c, false, 53, 3)).unwrap();
        assert_eq!((dns.verdict, dns.generation), (FW_DROP, 7));
        assert_eq!(&dns.counters[..dns.counters_n as usize], &[0]);
        let out = c.slot(&udp_key(&c, true, 80, 3)).unwrap();
        assert_eq!(out.verdict, FW_ACCEPT);
        assert_eq!(
            &out.counters[..out.counters_n as usize],
            &[FAMILY_COUNTERS as u16 + 1],
            "IPv6's second rule"
        );
        assert_eq!(
            c.rule_of(FAMILY_COUNTERS as u16 + 1),
            Some(RuleRef {
                ipv6: true,
                table: "inet f".into(),
                table_handle: 1,
                chain: "fwd".into(),
                handle: 3
            })
        );
        assert_eq!(c.rule_of(2), None);
        assert_eq!(c.rules().len(), 4, "two rules, each family");
        // Policy accept, no counter reached.
        let other = c.slot(&udp_key(&c, false, 80, 2)).unwrap();
        assert_eq!((other.verdict, other.counters_n), (FW_ACCEPT, 0));
        // An interface whose name is not known: not learned.
        assert_eq!(c.slot(&udp_key(&c, false, 80, 9)), None);
        // A key with a field the ruleset does not read: not one the
        // program built under these reads.
        let mut stale = udp_key(&c, false, 80, 3);
        stale.saddr[0] = 10;
        assert_eq!(c.slot(&stale), None);
        assert_eq!(
            c.covered()[0],
            BTreeSet::from(["nft chain inet f fwd".to_string()])
        );
        assert_eq!(Compiled::nothing(8).slot(&udp_key(&c, false, 80, 3)), None);
    }

    #[test]
    fn a_refused_family_is_left_to_the_kernel_with_its_reason() {
        let ct = RULESET.replace(
            r#"{"match": {"op": "==", "left": {"meta": {"key": "oifname"}}, "right": "out0"}}"#,
            r#"{"match": {"op": "==", "left": {"ct": {"key": "mark"}}, "right": 1}}"#,
        );
        let rs = parse(&ct, &|_| None).unwrap();
        let (c, why) = Compiled::new(1, &rs, BTreeMap::new(), true);
        assert!(c.families.iter().all(Option::is_none));
        for w in why {
            let w = w.expect("a reason");
            assert!(w.contains("table inet f chain fwd rule handle 3"), "{w}");
        }
        assert_eq!(c.reads(false), FwReads::default());
    }

    /// A ruleset reading the connection is compiled where the fast path
    /// can find connections, with the ct byte in its keys; elsewhere (no
    /// conntrack kfuncs) both families stay the kernel's, said why.
    #[test]
    fn a_stateful_ruleset_is_compiled_only_where_connections_can_be_found() {
        let ct = RULESET.replace(
            r#"{"match": {"op": "==", "left": {"meta": {"key": "oifname"}}, "right": "out0"}}"#,
            r#"{"match": {"op": "in", "left": {"ct": {"key": "state"}}, "right": ["established", "related"]}}"#,
        );
        let rs = parse(&ct, &|_| None).unwrap();
        let (c, why) = Compiled::new(1, &rs, BTreeMap::new(), true);
        assert_eq!(why, [None, None]);
        assert!(c.reads(false).fields & FW_READ_CT != 0);
        let (c, why) = Compiled::new(1, &rs, BTreeMap::new(), false);
        assert!(c.families.iter().all(Option::is_none));
        for w in why {
            assert!(w.expect("a reason").contains("no XDP conntrack kfuncs"));
        }
    }

    #[test]
    fn element_changes_apply_in_place_to_the_sets_rules_name() {
        let json = r#"{"nftables": [
          {"table": {"family": "inet", "name": "f", "handle": 1}},
          {"set": {"family": "inet", "table": "f", "name": "blocked", "handle": 2, "type": "inet_service", "elem": [53]}},
          {"set": {"family": "inet", "table": "f", "name": "nets", "handle": 3, "type": "ipv4_addr", "flags": ["interval"], "elem": [{"prefix": {"addr": "10.0.0.0", "len": 8}}]}},
          {"chain": {"family": "inet", "table": "f", "name": "fwd", "handle": 4,
                     "type": "filter", "hook": "forward", "prio": 0, "policy": "accept"}},
          {"rule": {"family": "inet", "table": "f", "chain": "fwd", "handle": 5,
                    "expr": [{"match": {"op": "==", "left": {"payload": {"protocol": "udp", "field": "dport"}}, "right": "@blocked"}}, {"drop": null}]}},
          {"rule": {"family": "inet", "table": "f", "chain": "fwd", "handle": 6,
                    "expr": [{"match": {"op": "==", "left": {"payload": {"protocol": "ip", "field": "saddr"}}, "right": "@nets"}}, {"accept": null}]}}
        ]}"#;
        let rs = parse(json, &|_| None).unwrap();
        let (mut c, why) = Compiled::new(1, &rs, BTreeMap::new(), true);
        assert_eq!(why, [None, None]);
        let verdict =
            |c: &Compiled, port: u16| c.slot(&udp_key(c, false, port, 0)).unwrap().verdict;
        assert_eq!((verdict(&c, 53), verdict(&c, 80)), (FW_DROP, FW_ACCEPT));
        let change = |add, set: &str, key: &[u8]| linerate_netlink::nft_events::ElementChange {
            add,
            table: crate::ruleset::TableId {
                family: "inet".into(),
                name: "f".into(),
            },
            set: set.into(),
            elements: vec![crate::raw_elements::RawElement {
                key: key.to_vec(),
                ..Default::default()
            }],
        };
        // inet_service: two bytes in network order, padded to four.
        c.apply(
            2,
            &[
                change(true, "blocked", &[0, 80, 0, 0]),
                change(false, "blocked", &[0, 53, 0, 0]),
            ],
            &[],
            &|_| None,
        )
        .unwrap();
        assert_eq!(c.generation, 2);
        assert_eq!((verdict(&c, 53), verdict(&c, 80)), (FW_ACCEPT, FW_DROP));
        // Both families' copies of the inet table changed.
        assert_eq!(
            c.families[1].as_ref().unwrap().filter.sets[0]
                .elements
                .keys
                .len(),
            1
        );
        // A set no rule names: nothing to do, the generation stays.
        let before = c.generation;
        assert!(!c
            .apply(3, &[change(true, "unused", &[0, 1, 0, 0])], &[], &|_| None)
            .unwrap());
        assert_eq!(c.generation, before);
        // Interval boundaries: read again.
        let e = c
            .apply(4, &[change(true, "nets", &[11, 0, 0, 0])], &[], &|_| None)
            .unwrap_err();
        assert!(e.contains("interval"), "{e}");
        c.apply(4, &[change(true, "blocked", &[0, 81])], &[], &|_| None)
            .unwrap();
        assert_eq!(verdict(&c, 81), FW_DROP, "a key of the field's own width");
        let e = c
            .apply(5, &[change(true, "blocked", &[0, 80, 0])], &[], &|_| None)
            .unwrap_err();
        assert!(e.contains("@blocked"), "{e}");
    }

    /// Address `i` of the blocklist fixtures: 10.0.0.0 on.
    pub(crate) fn blocked_addr(i: usize) -> std::net::Ipv4Addr {
        std::net::Ipv4Addr::from(0x0a00_0000 + i as u32)
    }

    /// `ip saddr @blocked counter drop`, policy accept, the set holding
    /// the first `elements` of [`blocked_addr`].
    pub(crate) fn blocked(generation: u32, elements: usize) -> Compiled {
        let elems: Vec<String> = (0..elements)
            .map(|i| format!("\"{}\"", blocked_addr(i)))
            .collect();
        let json = format!(
            r#"{{"nftables": [
          {{"table": {{"family": "ip", "name": "f", "handle": 1}}}},
          {{"set": {{"family": "ip", "table": "f", "name": "blocked", "handle": 2, "type": "ipv4_addr", "elem": [{}]}}}},
          {{"chain": {{"family": "ip", "table": "f", "name": "fwd", "handle": 3,
                     "type": "filter", "hook": "forward", "prio": 0, "policy": "accept"}}}},
          {{"rule": {{"family": "ip", "table": "f", "chain": "fwd", "handle": 4,
                    "expr": [{{"match": {{"op": "==", "left": {{"payload": {{"protocol": "ip", "field": "saddr"}}}}, "right": "@blocked"}}}}, {{"counter": {{"packets": 0, "bytes": 0}}}}, {{"drop": null}}]}}}}
        ]}}"#,
            elems.join(", ")
        );
        let rs = parse(&json, &|_| None).unwrap();
        let (c, why) = Compiled::new(generation, &rs, BTreeMap::new(), true);
        assert_eq!(why, [None, None]);
        c
    }

    /// The key of a UDP packet from `src` under `c`'s IPv4 reads.
    pub(crate) fn key_from(c: &Compiled, src: std::net::Ipv4Addr) -> FlowKey {
        let p = crate::Packet {
            saddr: u32::from(src) as u128,
            l4proto: 17,
            nexthdr: 17,
            transport: vec![0, 1, 0, 2, 0, 8, 0, 0],
            ..Default::default()
        };
        FlowKey::of(&p, &c.families[0].as_ref().unwrap().reads)
    }

    /// [`blocked_addr`] `i` added to (or removed from) the set.
    pub(crate) fn blocked_change(
        add: bool,
        i: usize,
    ) -> linerate_netlink::nft_events::ElementChange {
        linerate_netlink::nft_events::ElementChange {
            add,
            table: crate::ruleset::TableId {
                family: "ip".into(),
                name: "f".into(),
            },
            set: "blocked".into(),
            elements: vec![crate::raw_elements::RawElement {
                key: blocked_addr(i).octets().to_vec(),
                ..Default::default()
            }],
        }
    }

    /// A set at the classifier's room keeps the family's classifier; one
    /// element more, and the family is judged by the cache alone (new
    /// flows through the kernel until cached), its reason said; every
    /// key still gets the evaluator's verdict; one element fewer, the
    /// classifier is back.
    #[test]
    fn a_family_past_the_classifiers_elements_keeps_the_cache_and_says_why() {
        let (addr, change) = (blocked_addr, blocked_change);
        let mut c = blocked(1, CLASSIFIER_SET_ELEMENTS);
        assert_eq!(c.unclassified()[0], None, "at the room: classified");
        let verdict = |c: &Compiled, src| c.slot(&key_from(c, src)).unwrap().verdict;
        let past = CLASSIFIER_SET_ELEMENTS;
        c.apply(2, &[change(true, past)], &[], &|_| None).unwrap();
        let why = c.unclassified()[0].clone().expect("past the room");
        assert!(
            why.contains(&format!("{} elements", past + 1)) && why.contains("classifier"),
            "{why}"
        );
        assert_eq!(verdict(&c, addr(past)), FW_DROP);
        assert_eq!(verdict(&c, addr(0)), FW_DROP);
        assert_eq!(verdict(&c, addr(past + 1)), FW_ACCEPT);
        c.apply(3, &[change(false, past)], &[], &|_| None).unwrap();
        assert_eq!(c.unclassified()[0], None, "back at the room");
        assert_eq!(verdict(&c, addr(past)), FW_ACCEPT);
    }

    /// A chain of more rules than the classifier has terms for, and more
    /// than a family has counter ids: the family keeps the cache alone,
    /// said why; a key its rules judge before the last id is cached with
    /// its verdict and counter, one a rule past the ids decides is cached
    /// as the kernel's (which judges and counts it), and one no rule
    /// matches takes the policy. Below the terms, the classifier is there.
    #[test]
    fn rules_past_the_classifiers_terms_and_the_counter_ids_are_said_and_the_kernels() {
        let ruleset = |n: usize| {
            let rules: Vec<String> = (0..n)
                .map(|i| {
                    format!(
                        r#"{{"rule": {{"family": "ip", "table": "f", "chain": "fwd", "handle": {},
                        "expr": [{{"match": {{"op": "==", "left": {{"payload": {{"protocol": "udp", "field": "dport"}}}}, "right": {}}}}},
                                 {{"counter": {{"packets": 0, "bytes": 0}}}}, {{"drop": null}}]}}}}"#,
                        i + 10,
                        i + 1
                    )
                })
                .collect();
            let json = format!(
                r#"{{"nftables": [
              {{"table": {{"family": "ip", "name": "f", "handle": 1}}}},
              {{"chain": {{"family": "ip", "table": "f", "name": "fwd", "handle": 3,
                         "type": "filter", "hook": "forward", "prio": 0, "policy": "accept"}}}},
              {}
            ]}}"#,
                rules.join(",\n")
            );
            let rs = parse(&json, &|_| None).unwrap();
            let (c, why) = Compiled::new(1, &rs, BTreeMap::new(), true);
            assert_eq!(why, [None, None]);
            c
        };
        let slot = |c: &Compiled, port: u16| c.slot(&udp_key(c, false, port, 0)).unwrap();
        // A rule with a counter is two terms (its count, its verdict).
        let below = ruleset(crate::classify::MAX_TERMS / 4);
        assert_eq!(below.unclassified()[0], None);

        let n = FAMILY_COUNTERS + 2;
        let c = ruleset(n);
        let why = c.unclassified()[0].clone().expect("past the terms");
        assert!(
            why.contains(&format!("more than {} terms", crate::classify::MAX_TERMS)),
            "{why}"
        );
        let first = slot(&c, 1);
        assert_eq!(
            (first.verdict, first.counters_n, first.counters[0]),
            (FW_DROP, 1, 0)
        );
        let last_id = slot(&c, FAMILY_COUNTERS as u16);
        assert_eq!(
            (last_id.verdict, last_id.counters[0]),
            (FW_DROP, FAMILY_COUNTERS as u16 - 1)
        );
        for port in [FAMILY_COUNTERS as u16 + 1, n as u16] {
            let past = slot(&c, port);
            assert_eq!(
                (past.verdict, past.counters_n),
                (FW_KERNEL, 0),
                "port {port}"
            );
        }
        let none = slot(&c, n as u16 + 1);
        assert_eq!((none.verdict, none.counters_n), (FW_ACCEPT, 0));
    }

    /// An interval set's boundaries changed at random, as the kernel
    /// notifies them, then applied in place: after every batch each
    /// address is matched as the kernel's rbtree matches it (the greatest
    /// boundary at or below it decides; a start matches), judged so by the
    /// compiled ruleset, and the set is what a fresh read of the kernel's
    /// boundaries makes. Small values, so that boundaries meet, pile up
    /// at one value and leave gaps.
    #[test]
    fn interval_boundaries_change_in_place_as_the_kernels() {
        use crate::raw_elements::RawElement;
        use crate::ruleset::{Atom, TableId};
        let json = r#"{"nftables": [
          {"table": {"family": "ip", "name": "f", "handle": 1}},
          {"set": {"family": "ip", "table": "f", "name": "nets", "handle": 2, "type": "ipv4_addr", "flags": ["interval"]}},
          {"chain": {"family": "ip", "table": "f", "name": "fwd", "handle": 3,
                     "type": "filter", "hook": "forward", "prio": 0, "policy": "accept"}},
          {"rule": {"family": "ip", "table": "f", "chain": "fwd", "handle": 4,
                    "expr": [{"match": {"op": "==", "left": {"payload": {"protocol": "ip", "field": "saddr"}}, "right": "@nets"}}, {"drop": null}]}}
        ]}"#;
        let raw = |value: u32, end: bool| RawElement {
            key: value.to_be_bytes().to_vec(),
            interval_end: end,
            ..Default::default()
        };
        let read = |kernel: &BTreeSet<(u32, bool)>| {
            let elements: Vec<RawElement> = kernel.iter().map(|&(v, end)| raw(v, end)).collect();
            let source = move |_: &TableId, _: &str| Ok(elements.clone());
            let rs = crate::read::parse_with(json, &|_| None, Some(&source)).unwrap();
            let (c, why) = Compiled::new(1, &rs, BTreeMap::new(), true);
            assert_eq!(why, [None, None]);
            c
        };
        // (value, is an end): nft's own shape to start with, a gap marker
        // at 0 then [10, 19] and [20, 29] adjacent.
        let mut kernel =
            BTreeSet::from([(0, true), (10, false), (20, true), (20, false), (30, true)]);
        let mut c = read(&kernel);
        let mut rng = 0x2545_f491_4f6c_dd1du64;
        let mut next = |n: u64| {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            rng % n
        };
        for generation in 2..400 {
            let mut batch = Vec::new();
            for _ in 0..1 + next(3) {
                let add = kernel.is_empty() || next(2) == 0;
                let point = if add {
                    (next(48) as u32, next(2) == 0)
                } else {
                    *kernel
                        .iter()
                        .nth(next(kernel.len() as u64) as usize)
                        .unwrap()
                };
                if add {
                    kernel.insert(point);
                } else {
                    kernel.remove(&point);
                }
                batch.push(linerate_netlink::nft_events::ElementChange {
                    add,
                    table: TableId {
                        family: "ip".into(),
                        name: "f".into(),
                    },
                    set: "nets".into(),
                    elements: vec![raw(point.0, point.1)],
                });
            }
            c.apply(generation, &batch, &[], &|_| None).unwrap();
            let set = &c.families[0].as_ref().unwrap().filter.sets[0];
            for x in 0..52u32 {
                // The rbtree: at one value a start sorts after an end.
                let kernel_matches = kernel
                    .iter()
                    .filter(|(v, _)| *v <= x)
                    .max_by_key(|(v, end)| (*v, !*end))
                    .is_some_and(|(_, end)| !end);
                let in_set = set.elements.keys.iter().any(
                    |k| matches!(k[..], [Atom::Range(lo, hi)] if (lo..=hi).contains(&(x as u128))),
                );
                assert_eq!(
                    in_set, kernel_matches,
                    "{x} after {kernel:?}: {:?}",
                    set.elements.keys
                );
                let p = crate::Packet {
                    saddr: x as u128,
                    l4proto: 17,
                    ..Default::default()
                };
                let reads = &c.families[0].as_ref().unwrap().reads;
                let want = if kernel_matches { FW_DROP } else { FW_ACCEPT };
                assert_eq!(
                    c.slot(&FlowKey::of(&p, reads)).unwrap().verdict,
                    want,
                    "{x}"
                );
            }
            let fresh = read(&kernel);
            assert_eq!(
                set.elements.keys,
                fresh.families[0].as_ref().unwrap().filter.sets[0]
                    .elements
                    .keys,
                "in place against read again, after {kernel:?}"
            );
        }
    }

    #[test]
    fn a_learned_key_goes_to_a_free_or_stale_way_once() {
        let c = compiled(5);
        let slot = |dport| c.slot(&udp_key(&c, false, dport, 3)).unwrap();
        let empty = [FwSlot::default(); 2];
        assert_eq!(way_for(&empty, &slot(53), false), Some(0));
        let one = [slot(53), FwSlot::default()];
        assert_eq!(way_for(&one, &slot(53), false), None, "learned already");
        assert_eq!(way_for(&one, &slot(80), false), Some(1));
        let full = [slot(53), slot(80)];
        assert_eq!(way_for(&full, &slot(81), false), Some(0));
        assert_eq!(way_for(&full, &slot(81), true), Some(1));
        let mut old = slot(80);
        old.generation = 4;
        assert_eq!(way_for(&[slot(53), old], &slot(81), false), Some(1));
        // The same key of an older generation is rewritten.
        assert_eq!(way_for(&[old, slot(53)], &slot(80), true), Some(0));
        assert!(set_of(&slot(53).key, FW_SET_BITS_ALL) < FW_CACHE_SETS);
        assert_ne!(
            set_of(&slot(53).key, FW_SET_BITS_ALL),
            set_of(&slot(80).key, FW_SET_BITS_ALL)
        );
        // A classified family's keys take the first 2^13 sets: the same
        // hash's top bits.
        let k = &slot(53).key;
        assert!(set_of(k, FW_SET_BITS_CLASSIFIED) < 1 << FW_SET_BITS_CLASSIFIED);
        assert_eq!(
            set_of(k, FW_SET_BITS_CLASSIFIED),
            set_of(k, FW_SET_BITS_ALL) >> (FW_SET_BITS_ALL - FW_SET_BITS_CLASSIFIED)
        );
    }
}
