//! The terms as the fast path's tables (linerate_dataplane::fwc): for
//! each key field, its values cut into intervals at every boundary a term
//! names, each interval's row the bits of the terms whose condition on
//! the field it meets; equal rows kept once, adjacent intervals of one
//! row merged.
use super::terms::Term;
use super::values::{domain, KeyField, Source, LACKING};
use linerate_dataplane::fwc::{FieldTable, Lookup, Row, Shared, Tables, KERNEL_ROW};
use std::collections::{BTreeSet, HashMap};

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

/// The table of one field: its intervals and their rows.
fn field_table(field: KeyField, terms: &[Term], ipv6: bool, words: usize) -> FieldTable {
    let domain = domain(&field, ipv6);
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
    // Terms without a condition on the field are in every row: the
    // field's shared bits. A row keeps the others its interval meets.
    let mut base = vec![0u64; words];
    let mut own: Vec<Vec<u32>> = vec![Vec::new(); starts.len()];
    for (i, t) in terms.iter().enumerate() {
        match t.when.get(&field) {
            None => base[i / 64] |= 1 << (i % 64),
            Some(v) => {
                for &(lo, hi) in v.ranges() {
                    let from = starts.partition_point(|s| *s < lo);
                    let to = starts.partition_point(|s| *s <= hi);
                    for o in &mut own[from..to] {
                        o.push(i as u32);
                    }
                }
            }
        }
    }
    let shared = Shared::of(base);
    // Equal rows once; adjacent intervals of one row merged.
    let mut ids: HashMap<Vec<u32>, u32> = HashMap::new();
    let mut rows = Vec::new();
    let mut intervals: Vec<(u128, u32)> = Vec::new();
    for (start, mut o) in starts.iter().zip(own) {
        // A term's ranges are disjoint: each bit once, in term order.
        o.dedup();
        let id = *ids.entry(o).or_insert_with_key(|o| {
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
        shared,
        rows,
    }
}
