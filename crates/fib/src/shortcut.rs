//! The /48 shortcut of an IPv6 table: a hashed copy of the entries the
//! walk reads after 48 bits, probed beside the root so that a /48 costs
//! about one dependent read instead of four (24 + 8) or nine (16 + 4).
//!
//! A lookup reads the root entry and, in parallel, one pair of shortcut
//! slots chosen by the destination's top 48 bits. If the root entry is a
//! next hop, that is the answer (the shortcut is not needed). Otherwise, if
//! a slot's tag names those 48 bits, the slot's entry is what the walk would
//! have read at the level ending at bit 48, and the walk goes on from there;
//! if not, the walk goes on from the root as without a shortcut.
//!
//! What it holds: for every entry of a group at the level ending at bit 48
//! that is *specific* (a link, or written by a route longer than the
//! group's start: the entries a covering shorter route does not already
//! decide), that entry, under its /48. A /48 whose pair is full is simply
//! not held (its lookups walk). Entries of other levels are never held, so
//! a table without long prefixes has an empty shortcut.
//!
//! A slot is one 64-bit word the fast path loads at once: the entry in the
//! low 32 bits, the tag in the high 32. The control plane writes it as two
//! 32-bit stores, ordered so that a reader never pairs a tag with another
//! /48's entry: a slot is filled entry first, then tag; emptied by clearing
//! the tag; and an entry changes in place under its own tag (old or new
//! entry, both right for that /48 at that moment).
//!
//! Hash: `k` is the /48 (top 48 bits); with `p` the log2 of the pairs,
//! pair = (k ^ (k >> p)) mod 2^p and tag = bit 31 | (k >> p). The pair and
//! the tag give `k` back, so a tag match is an exact match; `p >= 17` keeps
//! the tag in 31 bits.

/// Prefix bits the shortcut is keyed on.
pub const BITS: u8 = 48;

/// Smallest log2 of the pair count (so that a tag fits in 31 bits).
pub const MIN_PAIRS_LOG2: u8 = BITS - 31;

/// Slots per pair (both in one 16-byte, cache-line-aligned run).
pub const WAYS: usize = 2;

/// 32-bit words per slot: the entry, then the tag.
pub const WORDS: usize = 2;

/// Tag bit that marks a slot in use (a tag of 0 is an empty slot).
pub const USED: u32 = 1 << 31;

/// The pair that holds /48 `k` (top 48 bits of the address).
#[inline(always)]
pub fn pair(k: u64, pairs_log2: u8) -> usize {
    ((k ^ (k >> pairs_log2)) & ((1u64 << pairs_log2) - 1)) as usize
}

/// The tag of /48 `k` in its pair.
#[inline(always)]
pub fn tag(k: u64, pairs_log2: u8) -> u32 {
    USED | (k >> pairs_log2) as u32
}

/// The /48 of an address given as its top 64 bits.
#[inline(always)]
pub fn key(hi: u64) -> u64 {
    hi >> (64 - BITS)
}

/// Index of the entry word of slot `way` of `pair`; the tag word follows it.
#[inline(always)]
pub fn entry_word(pair: usize, way: usize) -> usize {
    (pair * WAYS + way) * WORDS
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pair_and_tag_give_the_key_back() {
        let p = 21;
        for k in [0u64, 1, 0x2001_0db8_0001, (1 << 48) - 1, 0x8000_0000_0000] {
            let (pr, t) = (pair(k, p) as u64, tag(k, p));
            assert_ne!(t, 0, "a used slot's tag is never 0");
            let high = ((t & !USED) as u64) << p;
            let low = (pr ^ (t & !USED) as u64) & ((1 << p) - 1);
            assert_eq!(high | low, k);
        }
        assert!(
            (1u64 << (BITS - MIN_PAIRS_LOG2)) - 1 <= (!USED) as u64,
            "the tag fits"
        );
    }
}
