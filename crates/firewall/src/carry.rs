//! Cached verdicts carried into the next generation.
//!
//! Publishing a generation makes every cached verdict stale. A family
//! with a classifier loses nothing by it: the program judges a key its
//! cache lacks at once. A family judged by its cache alone (its sets
//! larger than the classifier takes, or a filter the classifier cannot
//! say) would send every flow's next frames to the kernel until their
//! misses are learned, and the kernel walks the whole ruleset for each:
//! with 10,000 rules the forwarding CPU does nothing else for seconds.
//! So, before such a generation is published, the keys cached under the
//! one in force are written again tagged with it: as they were, where
//! only set elements changed and no lookup the key makes finds a changed
//! one (its path through the rules, and so its verdict and counters, is
//! the same); else judged again by the evaluator, what learning the
//! key's miss would write, before the miss.
use crate::cache::KeyOf;
use crate::compile::{Compiled, Since, Touched};
use crate::eval::key_numbers;
use crate::ruleset::{Against, Field, Hook, Step};
use linerate_dataplane::fw_cache::{set_of, slot_index, way_for, FwTable};
use linerate_dataplane::layout::{FlowKey, FwSlot, FW_CACHE_SETS, FW_CACHE_WAYS};
use std::collections::HashMap;
use std::time::{Duration, Instant};

/// What [`carried`] found.
#[derive(Debug, Default)]
pub struct Carried {
    /// The slots to write, by index, each tagged with the next generation.
    pub writes: Vec<(u32, FwSlot)>,
    /// Keys of the generation in force whose family `next` judges by
    /// its cache alone.
    pub keys: usize,
    /// Of those, carried as they were (no lookup they make changed).
    pub kept: usize,
    /// Of those, not carried: `next` does not read them as they were
    /// read (the reads changed, or an interface is gone), or they lost
    /// their set's ways to others.
    pub dropped: usize,
    /// Of those, left to be learned from their misses: the budget for
    /// judging keys again ran out first.
    pub left: usize,
}

/// The writes that carry the verdicts cached under generation `current`
/// into `next`, for each family `next` judges by its cache alone; stops
/// judging keys again after `budget` (the rest are learned from their
/// misses, as before). Nothing is written here: the caller writes them
/// before it publishes `next`, while frames are judged by `current`.
pub fn carried(table: &impl FwTable, current: u32, next: &Compiled, budget: Duration) -> Carried {
    let cache_only = [0, 1].map(|i| {
        next.families[i]
            .as_ref()
            .is_some_and(|f| f.classifier.is_err())
    });
    let mut out = Carried::default();
    if !cache_only.contains(&true) || current == next.generation {
        return out;
    }
    let lookups = [false, true].map(|ipv6| changed_lookups(next, ipv6));
    let set_bits = [false, true].map(|ipv6| next.reads(ipv6).set_bits);
    let started = Instant::now();
    let mut planned: HashMap<u32, FwSlot> = HashMap::new();
    let mut evict = false;
    for index in 0..FW_CACHE_SETS * FW_CACHE_WAYS {
        let s = table.slot(index);
        let ipv6 = s.key.flow.ipv6 != 0;
        if s.verdict == 0 || s.generation != current || !cache_only[ipv6 as usize] {
            continue;
        }
        out.keys += 1;
        // The program writes slots meanwhile: a slot read whole twice
        // alike, its sequence word even, was not being written.
        if s.seq & 1 != 0 || table.slot(index) != s {
            out.dropped += 1;
            continue;
        }
        let new = match &lookups[ipv6 as usize] {
            Some(l) if l.miss(next, &s.key.flow) => {
                out.kept += 1;
                Some(FwSlot {
                    generation: next.generation,
                    ..s
                })
            }
            _ if started.elapsed() >= budget => {
                out.left += 1;
                continue;
            }
            _ => next.slot(&s.key.flow),
        };
        let Some(new) = new else {
            out.dropped += 1;
            continue;
        };
        let set = set_of(&new.key, set_bits[ipv6 as usize]);
        // What the set's ways hold of `next` so far: only what is
        // planned here (everything in the cache is of older generations).
        let ways = [0, 1].map(|w| {
            planned
                .get(&slot_index(set, w))
                .copied()
                .unwrap_or_default()
        });
        evict = !evict;
        match way_for(&ways, &new, evict) {
            Some(w) => {
                if planned.insert(slot_index(set, w), new).is_some() {
                    out.dropped += 1;
                }
            }
            None => out.dropped += 1,
        }
    }
    out.writes = planned.into_iter().collect();
    out.writes.sort_by_key(|w| w.0);
    out
}

/// A family's lookups of the sets whose elements changed since the
/// generation before, where nothing else did.
struct ChangedLookups<'a> {
    /// The hooks its base chains are at (a lookup of the output
    /// interface reads nothing at prerouting).
    hooks: Vec<Hook>,
    /// Each test or verdict map reading a changed set: its key, mask,
    /// and what of the set changed.
    lookups: Vec<(&'a [Field], Option<u128>, &'a Touched)>,
}

/// None: anything may have changed in family `ipv6` of `next`.
fn changed_lookups(next: &Compiled, ipv6: bool) -> Option<ChangedLookups<'_>> {
    let Since::Elements(touched) = &next.since else {
        return None;
    };
    let touched = &touched[ipv6 as usize];
    let f = &next.families[ipv6 as usize].as_ref()?.filter;
    let changed = |a: &Against| match a {
        Against::Named(i) => touched.iter().find(|t| t.0 == *i).map(|t| &t.1),
        Against::Inline(_) => None,
    };
    let mut lookups = Vec::new();
    for step in f
        .chains
        .iter()
        .flat_map(|c| &c.rules)
        .flat_map(|r| &r.steps)
    {
        let (key, mask, against) = match step {
            Step::Test(t) => (&t.key, t.mask, &t.against),
            Step::Vmap { key, mask, map } => (key, *mask, map),
            _ => continue,
        };
        if let Some(t) = changed(against) {
            lookups.push((key.as_slice(), mask, t));
        }
    }
    let mut hooks: Vec<Hook> = f.base.iter().map(|b| b.hook).collect();
    hooks.sort_unstable();
    hooks.dedup();
    Some(ChangedLookups { hooks, lookups })
}

impl ChangedLookups<'_> {
    /// Whether every lookup of a changed set misses what changed for
    /// `key`, at every hook: its way through the rules is the one it took
    /// before.
    fn miss(&self, next: &Compiled, key: &FlowKey) -> bool {
        if self.lookups.is_empty() {
            return true;
        }
        let name = |i: u32| next.names.get(&i).cloned().unwrap_or_default();
        let p = key.packet(&name);
        self.lookups.iter().all(|(fields, mask, touched)| {
            let Touched::Keys(keys) = touched else {
                return false;
            };
            self.hooks
                .iter()
                .all(|&hook| match key_numbers(fields, *mask, hook, &p) {
                    // The packet lacks a field: the test fails whatever
                    // the set holds.
                    None => true,
                    Some(Some(n)) => !keys.contains(&n),
                    Some(None) => false,
                })
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cache::FlowKey;
    use crate::compile::tests::{
        blocked as compiled, blocked_addr as addr, blocked_change as change, key_from as key,
    };
    use crate::compile::{learn, publish, publish_carrying, CLASSIFIER_SET_ELEMENTS};
    use linerate_dataplane::fw_model::FwModel;
    use linerate_dataplane::layout::{FW_ACCEPT, FW_DROP};
    use std::net::Ipv4Addr;

    /// The cached verdict of `k` under generation `generation`, wherever
    /// its set put it.
    fn cached(t: &FwModel, c: &Compiled, k: &FlowKey, generation: u32) -> Option<FwSlot> {
        let set = set_of(
            &linerate_dataplane::layout::FwKey { flow: *k },
            c.reads(false).set_bits,
        );
        [0, 1]
            .map(|w| t.slot(slot_index(set, w)))
            .into_iter()
            .find(|s| s.verdict != 0 && s.generation == generation && s.key.flow == *k)
    }

    /// Flows cached under a classified generation; one element more makes
    /// the next judged by its cache alone. Before it is published every
    /// flow is written again under it: as it was where the lookup of the
    /// set finds no changed element, judged again where it does (the flow
    /// whose source the new element blocks now drops), where each would
    /// otherwise have gone to the kernel.
    #[test]
    fn a_generation_the_cache_alone_judges_keeps_the_flows_cached_before() {
        let flows: Vec<Ipv4Addr> = (0..200)
            .map(|i| addr(CLASSIFIER_SET_ELEMENTS - 100 + i))
            .collect();
        let mut c = compiled(1, CLASSIFIER_SET_ELEMENTS);
        assert_eq!(c.unclassified()[0], None);
        let mut t = FwModel::default();
        publish(&mut t, &c);
        for (i, f) in flows.iter().enumerate() {
            assert!(learn(&mut t, &c, &key(&c, *f), i % 2 == 0).is_some());
        }
        // A classified next generation: nothing to carry.
        let mut classified = c.clone();
        classified
            .apply(2, &[change(false, 0)], &[], &|_| None)
            .unwrap();
        let none = carried(&t, 1, &classified, Duration::from_secs(5));
        assert_eq!((none.keys, none.writes.len()), (0, 0));

        let past = CLASSIFIER_SET_ELEMENTS;
        c.apply(2, &[change(true, past)], &[], &|_| None).unwrap();
        assert!(c.unclassified()[0].is_some(), "past the room");
        // No time to judge any again: only the changed one is left.
        let hurried = carried(&t, 1, &c, Duration::ZERO);
        assert_eq!((hurried.keys, hurried.kept, hurried.left), (200, 199, 1));
        let out = carried(&t, 1, &c, Duration::from_secs(5));
        assert_eq!((out.keys, out.kept, out.left), (200, 199, 0));
        assert_eq!(out.writes.len() + out.dropped, 200);
        assert!(out.dropped <= 2, "{} lost their ways", out.dropped);
        publish_carrying(&mut t, &c, &out.writes);
        let in_cache = |t: &FwModel, c: &Compiled| {
            let mut n = 0;
            for f in &flows {
                let k = key(c, *f);
                let Some(s) = cached(t, c, &k, c.generation) else {
                    continue;
                };
                n += 1;
                // The evaluator's verdict on the flow, from the set's
                // elements: 10.0.0.0 up to `past` blocked.
                let blocked = (u32::from(*f) - 0x0a00_0000) as usize <= past;
                assert_eq!(s.verdict, if blocked { FW_DROP } else { FW_ACCEPT }, "{f}");
                assert_eq!(s.counters_n, blocked as u8, "{f}: the rule counts it");
                assert_eq!(s, c.slot(&k).map(|n| FwSlot { seq: s.seq, ..n }).unwrap());
            }
            n
        };
        assert_eq!(in_cache(&t, &c), out.writes.len());

        // Read whole (anything may have changed): every key judged again,
        // or, without the time, left to its miss.
        let whole = compiled(3, past + 1);
        assert!(whole.unclassified()[0].is_some());
        let late = carried(&t, 2, &whole, Duration::ZERO);
        assert_eq!((late.writes.len(), late.kept), (0, 0));
        assert_eq!(late.left, out.writes.len());
        let again = carried(&t, 2, &whole, Duration::from_secs(5));
        assert_eq!((again.kept, again.left), (0, 0));
        publish_carrying(&mut t, &whole, &again.writes);
        assert_eq!(in_cache(&t, &whole), again.writes.len());
        assert!(again.writes.len() + 4 >= 200);
    }
}
