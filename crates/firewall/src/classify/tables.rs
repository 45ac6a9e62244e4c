//! The terms as the fast path's tables (linerate_dataplane::fwc): for
//! each key field, its values cut into intervals at every boundary a term
//! names, each interval's row the bits of the terms whose condition on
//! the field it meets; equal rows kept once, adjacent intervals of one
//! row merged.
use super::terms::Term;
use super::values::{domain, KeyField, Source, Values, LACKING};
use linerate_dataplane::fwc::{FieldTable, Lookup, Row, Shared, Tables, KERNEL_ROW};
use rustc_hash::FxHashMap;
use std::collections::BTreeSet;

/// The tables of `terms`; `known` the interface indexes with a name
/// (an index not among them, and not 0, is the kernel's when the
/// ruleset reads that interface: `reads_iif`, `reads_oif`).
pub fn tables(
    terms: &[Term],
    ipv6: bool,
    known: &BTreeSet<u32>,
    reads_iif: bool,
    reads_oif: bool,
) -> Tables {
    let words = terms.len().div_ceil(64).max(1);
    // Each field's conditions, by term, gathered in one pass over the
    // terms (a ruleset names a few fields; its terms are many).
    let mut by_field: Vec<(KeyField, Vec<(u32, &Values)>)> = Vec::new();
    for (i, t) in terms.iter().enumerate() {
        for (f, v) in t.when.iter() {
            match by_field.iter_mut().find(|(k, _)| k == f) {
                Some((_, list)) => list.push((i as u32, v)),
                None => by_field.push((*f, vec![(i as u32, v)])),
            }
        }
    }
    for (reads, source) in [(reads_iif, Source::Iif), (reads_oif, Source::Oif)] {
        let f = KeyField::plain(source);
        if reads && !by_field.iter().any(|(k, _)| *k == f) {
            by_field.push((f, Vec::new()));
        }
    }
    by_field.sort_by_key(|(k, _)| *k);
    let fields = by_field
        .into_iter()
        .map(|(f, conditions)| {
            let mut t = field_table(f, &conditions, terms.len(), ipv6, words);
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

/// The table of one field: its intervals and their rows. `conditions`:
/// the terms (of `count`) with a condition on the field, in order, with
/// the values it allows.
fn field_table(
    field: KeyField,
    conditions: &[(u32, &Values)],
    count: usize,
    ipv6: bool,
    words: usize,
) -> FieldTable {
    let domain = domain(&field, ipv6);
    // Every value where some term's condition starts or stops.
    let mut starts: Vec<u128> = domain.ranges().iter().map(|r| r.0).collect();
    for (_, v) in conditions {
        for &(lo, hi) in v.ranges() {
            starts.push(lo);
            starts.extend(hi.checked_add(1));
        }
    }
    starts.sort_unstable();
    starts.dedup();
    starts.retain(|c| domain.contains(*c));
    // Terms without a condition on the field are in every row: the
    // field's shared bits. A row keeps the others its interval meets:
    // each term's intervals a span of them, the rows laid out one after
    // the other (a term's ranges are disjoint: each bit once a row, in
    // term order).
    let mut base = vec![0u64; words];
    for i in 0..count {
        base[i / 64] |= 1 << (i % 64);
    }
    // Where each range starts and ends among the cuts: every range's
    // first value and the one past its last are cuts (but those outside
    // the domain, searched for).
    let index: FxHashMap<u128, usize> = starts.iter().enumerate().map(|(k, s)| (*s, k)).collect();
    let at_or_after = |v: u128| {
        index
            .get(&v)
            .copied()
            .unwrap_or_else(|| starts.partition_point(|s| *s < v))
    };
    let mut spans: Vec<(usize, usize, u32)> = Vec::with_capacity(conditions.len());
    for &(i, v) in conditions {
        base[i as usize / 64] &= !(1 << (i % 64));
        for &(lo, hi) in v.ranges() {
            let from = at_or_after(lo);
            let to = hi.checked_add(1).map_or(starts.len(), at_or_after);
            spans.push((from, to, i));
        }
    }
    let mut at = vec![0usize; starts.len() + 1];
    for &(from, to, _) in &spans {
        for n in &mut at[from + 1..to + 1] {
            *n += 1;
        }
    }
    for i in 1..at.len() {
        at[i] += at[i - 1];
    }
    let mut own = vec![0u32; at[starts.len()]];
    let mut filled = at.clone();
    for &(from, to, term) in &spans {
        for f in &mut filled[from..to] {
            own[*f] = term;
            *f += 1;
        }
    }
    let shared = Shared::of(base);
    // Equal rows once; adjacent intervals of one row merged.
    let mut ids: FxHashMap<&[u32], u32> =
        FxHashMap::with_capacity_and_hasher(starts.len(), Default::default());
    let mut rows = Vec::new();
    let mut intervals: Vec<(u128, u32)> = Vec::new();
    for (k, start) in starts.iter().enumerate() {
        let o = &own[at[k]..at[k + 1]];
        let id = *ids.entry(o).or_insert_with(|| {
            rows.push(Row::of(o, &shared));
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
        // The intervals cover the domain from 0, in order: each fills its
        // values (a 16-bit field is 65,536 of them).
        for (k, &(start, id)) in intervals.iter().enumerate() {
            if start > top as u128 {
                break;
            }
            let end = intervals
                .get(k + 1)
                .map_or(top as u128, |n| (n.0 - 1).min(top as u128));
            direct[start as usize..=end as usize].fill(id);
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
        shared,
        rows,
    }
}
