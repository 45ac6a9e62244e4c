//! The terms as tables a lookup per field can use (bit-vector
//! classification, as bpf-iptables and the kernel's pipapo set do): for
//! each key field, its values cut into intervals at every boundary a term
//! names, each interval mapped to a row: the bits of the terms whose
//! condition on the field the interval meets (every term that names no
//! condition on the field). A key's terms are the AND of its fields'
//! rows; the first set bit from the cursor is the term it meets. Equal
//! rows are kept once, so a field's rows are as many as the distinct sets
//! of terms its values meet, not as its intervals.
//!
//! A row also says its first and last non-zero word: the AND starts at
//! the largest first and ends at the smallest last, so a key that one
//! field narrows (an address in one rule's prefix) reads a few words
//! whatever the number of rules.
use super::terms::{Act, Term};
use super::values::{KeyField, Source, LACKING};
use crate::eval::Verdict;
use linerate_dataplane::layout::FlowKey;
use std::collections::{BTreeSet, HashMap};

/// The row of a value the classifier leaves to the kernel: an interface
/// index the control plane has no name for.
pub const KERNEL_ROW: u32 = u32::MAX;

/// The most terms a walk meets (counting ones, skips, the last): past it
/// the kernel judges.
pub const MAX_STEPS: usize = 32;

/// The rules a key's packets are counted at, most: past it the kernel
/// judges (crate::cache::ENTRY_COUNTERS).
pub const MAX_COUNTED: usize = crate::cache::ENTRY_COUNTERS;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Row {
    pub bits: Vec<u64>,
    /// The first and last word with a bit set (0 and 0 when none is).
    pub first: u32,
    pub last: u32,
}

impl Row {
    fn of(bits: Vec<u64>) -> Row {
        let first = bits.iter().position(|w| *w != 0).unwrap_or(0) as u32;
        let last = bits.iter().rposition(|w| *w != 0).unwrap_or(0) as u32;
        Row { bits, first, last }
    }
}

/// How a field's value finds its row.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Lookup {
    /// A row id per value from 0 (a small field), and LACKING's last.
    Direct(Vec<u32>),
    /// The start of each interval, in order, with its row id (a wide
    /// field: addresses, 32 bits of transport).
    Ranges(Vec<(u128, u32)>),
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FieldTable {
    pub field: KeyField,
    pub lookup: Lookup,
    pub rows: Vec<Row>,
}

impl FieldTable {
    /// The row id of the field's value in `key`.
    pub fn row_of(&self, key: &FlowKey) -> u32 {
        let v = self.field.of(key);
        match &self.lookup {
            Lookup::Direct(rows) => {
                let i = if v == LACKING {
                    rows.len() - 1
                } else {
                    v as usize
                };
                rows.get(i).copied().unwrap_or(KERNEL_ROW)
            }
            Lookup::Ranges(starts) => {
                let at = starts.partition_point(|(s, _)| *s <= v);
                starts[at.checked_sub(1).expect("the first interval starts at 0")].1
            }
        }
    }
}

/// One family's classifier.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Tables {
    pub ipv6: bool,
    /// Each term's action, by its bit.
    pub acts: Vec<Act>,
    /// Words a row has.
    pub words: usize,
    pub fields: Vec<FieldTable>,
}

/// What a walk of the tables gives a key.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Walked {
    pub verdict: Verdict,
    /// The rules counted, by id, in order.
    pub counted: Vec<u32>,
    /// The walk gave up after [`MAX_STEPS`] terms (the verdict is then
    /// the kernel's).
    pub gave_up: bool,
}

impl Tables {
    /// The tables of `terms`; `known` the interface indexes with a name
    /// (an index not among them, and not 0, is the kernel's when the
    /// ruleset reads that interface: `reads_iif`, `reads_oif`).
    pub fn new(
        terms: &[Term],
        ipv6: bool,
        known: &BTreeSet<u32>,
        reads_iif: bool,
        reads_oif: bool,
    ) -> Tables {
        let words = terms.len().div_ceil(64).max(1);
        let mut fields: BTreeSet<KeyField> =
            terms.iter().flat_map(|t| t.when.keys().copied()).collect();
        for (reads, source) in [(reads_iif, Source::Iif), (reads_oif, Source::Oif)] {
            if reads {
                fields.insert(KeyField::plain(source));
            }
        }
        let fields = fields
            .into_iter()
            .map(|f| {
                let mut t = field_table(f, terms, ipv6, words);
                if matches!(f.source, Source::Iif | Source::Oif) && f.mask.is_none() {
                    if let Lookup::Direct(rows) = &mut t.lookup {
                        for (i, r) in rows.iter_mut().enumerate() {
                            if i != 0 && !known.contains(&(i as u32)) {
                                *r = KERNEL_ROW;
                            }
                        }
                    }
                }
                t
            })
            .collect();
        Tables {
            ipv6,
            acts: terms.iter().map(|t| t.act).collect(),
            words,
            fields,
        }
    }

    /// The key's verdict and counted rules, as the fast path walks the
    /// tables.
    pub fn walk(&self, key: &FlowKey) -> Walked {
        let kernel = |gave_up| Walked {
            verdict: Verdict::Kernel,
            counted: vec![],
            gave_up,
        };
        let mut rows = Vec::with_capacity(self.fields.len());
        for f in &self.fields {
            match f.row_of(key) {
                KERNEL_ROW => return kernel(false),
                r => rows.push(&f.rows[r as usize]),
            }
        }
        let first = rows.iter().map(|r| r.first as usize).max().unwrap_or(0);
        let last = rows
            .iter()
            .map(|r| r.last as usize)
            .min()
            .unwrap_or(self.words - 1);
        let mut counted = Vec::new();
        let mut cursor = 0usize;
        for _ in 0..MAX_STEPS {
            let Some(t) = first_set(&rows, cursor, first, last) else {
                // Every chain ends in its policy, a term with no condition.
                unreachable!("a walk past the last term")
            };
            match self.acts[t] {
                Act::Count(id) => {
                    // More counters than an entry holds: the kernel's, as
                    // the verdict cache has it (crate::cache::entry).
                    if counted.len() == MAX_COUNTED {
                        return kernel(false);
                    }
                    counted.push(id);
                    cursor = t + 1;
                }
                Act::Skip(to) => cursor = to as usize,
                Act::Accept => return self.done(Verdict::Accept, counted),
                Act::Drop => return self.done(Verdict::Drop, counted),
                Act::Kernel => return kernel(false),
            }
        }
        kernel(true)
    }

    fn done(&self, verdict: Verdict, counted: Vec<u32>) -> Walked {
        Walked {
            verdict,
            counted,
            gave_up: false,
        }
    }
}

/// The first term at or after `cursor` whose bit every row has, reading
/// words `first..=last` only.
fn first_set(rows: &[&Row], cursor: usize, first: usize, last: usize) -> Option<usize> {
    let words = rows.first().map_or(usize::MAX, |r| r.bits.len());
    let start = (cursor / 64).max(first);
    let end = last.min(words.saturating_sub(1));
    if rows.is_empty() {
        return Some(cursor);
    }
    for w in start..=end {
        let mut x = u64::MAX;
        for r in rows {
            x &= r.bits[w];
        }
        if w == cursor / 64 {
            x &= u64::MAX << (cursor % 64);
        }
        if x != 0 {
            return Some(w * 64 + x.trailing_zeros() as usize);
        }
    }
    None
}

/// The table of one field: its intervals and their rows.
fn field_table(field: KeyField, terms: &[Term], ipv6: bool, words: usize) -> FieldTable {
    let domain = field.domain(ipv6);
    // Every value where some term's condition starts or stops.
    let mut cuts: BTreeSet<u128> = domain.ranges().iter().map(|r| r.0).collect();
    for t in terms {
        if let Some(v) = t.when.get(&field) {
            for &(lo, hi) in v.ranges() {
                cuts.insert(lo);
                if let Some(n) = hi.checked_add(1) {
                    cuts.insert(n);
                }
            }
        }
    }
    let starts: Vec<u128> = cuts.into_iter().filter(|c| domain.contains(*c)).collect();
    // Terms without a condition on the field are in every row.
    let mut base = vec![0u64; words];
    for (i, t) in terms.iter().enumerate() {
        if !t.when.contains_key(&field) {
            base[i / 64] |= 1 << (i % 64);
        }
    }
    let mut bits: Vec<Vec<u64>> = vec![base; starts.len()];
    for (i, t) in terms.iter().enumerate() {
        if let Some(v) = t.when.get(&field) {
            for &(lo, hi) in v.ranges() {
                let from = starts.partition_point(|s| *s < lo);
                let to = starts.partition_point(|s| *s <= hi);
                for b in &mut bits[from..to] {
                    b[i / 64] |= 1 << (i % 64);
                }
            }
        }
    }
    // Equal rows once; adjacent intervals of one row merged.
    let mut ids: HashMap<Vec<u64>, u32> = HashMap::new();
    let mut rows = Vec::new();
    let mut intervals: Vec<(u128, u32)> = Vec::new();
    for (start, b) in starts.iter().zip(bits) {
        let id = *ids.entry(b.clone()).or_insert_with(|| {
            rows.push(Row::of(b));
            rows.len() as u32 - 1
        });
        if intervals.last().is_none_or(|(_, last)| *last != id) {
            intervals.push((*start, id));
        }
    }
    let lookup = if field.source.is_small(ipv6) {
        // A row per value up to the source's largest, LACKING's after.
        let top = field.source.max(ipv6) as usize;
        let mut direct = vec![0u32; top + 2];
        let row_at = |v: u128| {
            let at = intervals.partition_point(|(s, _)| *s <= v);
            intervals[at - 1].1
        };
        for (v, r) in direct.iter_mut().enumerate().take(top + 1) {
            *r = row_at(v as u128);
        }
        direct[top + 1] = if field.source.can_lack() {
            row_at(LACKING)
        } else {
            direct[0]
        };
        Lookup::Direct(direct)
    } else {
        Lookup::Ranges(intervals)
    };
    FieldTable {
        field,
        lookup,
        rows,
    }
}
