//! The compiled ruleset judged in the fast path: a family's filter as a
//! classifier the XDP program runs for a key its verdict cache does not
//! hold, so that a new flow, or every flow after a ruleset change, is
//! judged at the fast path's speed instead of waiting for the kernel and
//! the control plane. The evaluator (crate::eval) stays the reference:
//! the classifier's verdict and counters for a key are the evaluator's
//! for the packet the key stands for (crate::cache::entry), which the
//! tests hold it to over random rulesets and keys.
//!
//! Two stages: [`terms`] flattens the chains into terms (conditions on
//! key fields and an action, in the order nf_tables meets them);
//! [`tables`] turns them into one lookup table per key field and rows of
//! bits to AND. A filter the terms cannot say (a negated concatenation,
//! overlapping concatenated elements, more terms than [`MAX_TERMS`]) is
//! refused, with why: the verdict cache then learns its flows from the
//! kernel as before.
pub mod tables;
pub mod terms;
pub mod values;

use crate::cache::Reads;
use crate::compile::FAMILY_COUNTERS;
use crate::ruleset::Filter;
use linerate_dataplane::fwc::Act;
pub use linerate_dataplane::fwc::{Tables, Walked};
use std::collections::{BTreeMap, BTreeSet};
pub use terms::{Memo, Refused};

/// The most terms a family's classifier holds: 256 words a row.
pub const MAX_TERMS: usize = 16384;

/// The classifier of a family's filter (`ipv6` its family; `reads` what
/// its rules read, as the verdict cache's key keeps it), interface names
/// by index as the firewall knows them.
pub fn compile(
    f: &Filter,
    ipv6: bool,
    reads: &Reads,
    names: &BTreeMap<u32, String>,
) -> Result<Tables, Refused> {
    compile_with(f, ipv6, reads, names, &Memo::default()).0
}

/// [`compile`], rules laid out in an earlier generation taken from `memo`
/// ([`terms::Memo`]); with this generation's memo.
pub fn compile_with(
    f: &Filter,
    ipv6: bool,
    reads: &Reads,
    names: &BTreeMap<u32, String>,
    memo: &Memo,
) -> (Result<Tables, Refused>, Memo) {
    let name = |i: u32| names.get(&i).cloned().unwrap_or_default();
    let (mut terms, next) = match terms::terms_with(f, ipv6, &name, MAX_TERMS, memo) {
        Ok(t) => t,
        Err(e) => return (Err(e), Memo::default()),
    };
    // Rule ids become the fast path's counter ids (IPv6's after IPv4's); a
    // rule past them is the kernel's to count, as the verdict cache has
    // it (crate::compile::Compiled::slot).
    let base = if ipv6 { FAMILY_COUNTERS } else { 0 };
    for t in &mut terms {
        if let Act::Count(id) = t.act {
            t.act = match (id as usize) < FAMILY_COUNTERS {
                true => Act::Count((base + id as usize) as u32),
                false => Act::Kernel,
            };
        }
    }
    let known: BTreeSet<u32> = names.keys().copied().collect();
    (
        Ok(tables::tables(&terms, ipv6, &known, reads.iif, reads.oif)),
        next,
    )
}
