//! The shortcut of an IPv6 table: a hashed copy of the entries the walk
//! reads after 48 bits and after 40 bits, probed beside the root so that a
//! /48 or a /40 costs about one dependent read instead of up to four
//! (24 + 8) or nine (16 + 4).
//!
//! A lookup reads the root entry and, in parallel, one pair of slots for
//! the destination's /48 and one for its /40. If the root entry is a next
//! hop, that is the answer (the shortcut is not needed). Otherwise, if a
//! slot's tag names the /48, the slot's entry is what the walk would have
//! read at the level ending at bit 48, and the walk goes on from there;
//! else the same with the /40; else the walk goes on from the root as
//! without a shortcut. A shape holds the levels that pay for their probe
//! (`Shape::shortcut_levels`): the compact layout both, the wide one the
//! /48 only (docs/router-measurements.md, "A packet's cost").
//!
//! What it holds: for every entry of a group at a level ending at bit 48
//! or 40 that is *specific* (a link, or written by a route longer than the
//! group's start: the entries a covering shorter route does not already
//! decide), that entry, under its prefix. A prefix whose pair is full is
//! simply not held (its lookups walk). Entries of other levels are never
//! held, so a table without long prefixes has an empty shortcut.
//!
//! A slot is one 64-bit word the fast path loads at once: the entry in the
//! low 32 bits, the tag in the high 32. The control plane writes it as two
//! 32-bit stores, ordered so that a reader never pairs a tag with another
//! prefix's entry: a slot is filled entry first, then tag; emptied by
//! clearing the tag; and an entry changes in place under its own tag (old
//! or new entry, both right for that prefix at that moment).
//!
//! Key: the prefix's top bits, with the level's index above bit 48 (0 for
//! /48, 1 for /40), so the two levels never share a key. Hash: with `p`
//! the log2 of the pairs, pair = (k ^ (k >> p)) mod 2^p and
//! tag = bit 31 | (k >> p). The pair and the tag give `k` back, so a tag
//! match is an exact match; `p >= 18` keeps the tag in 31 bits.

/// Prefix lengths the shortcut is keyed on, deepest first: the order a
/// lookup tries them in.
pub const LEVELS: [u8; 2] = [48, 40];

/// Bits of a key: 48 prefix bits and the level's index above them.
const KEY_BITS: u8 = 49;

/// Smallest log2 of the pair count (so that a tag fits in 31 bits).
pub const MIN_PAIRS_LOG2: u8 = KEY_BITS - 31;

/// Slots per pair (both in one 16-byte, cache-line-aligned run).
pub const WAYS: usize = 2;

/// 32-bit words per slot: the entry, then the tag.
pub const WORDS: usize = 2;

/// Tag bit that marks a slot in use (a tag of 0 is an empty slot).
pub const USED: u32 = 1 << 31;

/// The pair that holds key `k`.
#[inline(always)]
pub fn pair(k: u64, pairs_log2: u8) -> usize {
    ((k ^ (k >> pairs_log2)) & ((1u64 << pairs_log2) - 1)) as usize
}

/// The tag of key `k` in its pair.
#[inline(always)]
pub fn tag(k: u64, pairs_log2: u8) -> u32 {
    USED | (k >> pairs_log2) as u32
}

/// The key of the prefix of length `LEVELS[level]` of an address given as
/// its top 64 bits.
#[inline(always)]
pub fn key(hi: u64, level: usize) -> u64 {
    ((level as u64) << 48) | (hi >> (64 - LEVELS[level]))
}

/// The key a used slot of `pair` holds, from its tag.
pub fn key_of(pair: usize, tag: u32, pairs_log2: u8) -> u64 {
    let high = ((tag & !USED) as u64) << pairs_log2;
    high | ((pair as u64 ^ (high >> pairs_log2)) & ((1 << pairs_log2) - 1))
}

/// A key's level (index into `LEVELS`) and the top 64 bits of the lowest
/// address it covers.
pub fn prefix_of(k: u64) -> (usize, u64) {
    let level = (k >> 48) as usize;
    (level, (k & ((1 << 48) - 1)) << (64 - LEVELS[level]))
}

/// The level whose groups end at bit `end`, if the shortcut holds one.
pub fn level_ending_at(end: u8) -> Option<usize> {
    LEVELS.iter().position(|&l| l == end)
}

/// Index of the entry word of slot `way` of `pair`; the tag word follows it.
#[inline(always)]
pub fn entry_word(pair: usize, way: usize) -> usize {
    (pair * WAYS + way) * WORDS
}

/// The entry word of the slot of `pair` whose tag is `tag` (0: a free
/// slot), if any.
#[inline(always)]
pub fn slot_tagged(words: &[u32], pair: usize, tag: u32) -> Option<usize> {
    (0..WAYS)
        .map(|way| entry_word(pair, way))
        .find(|&w| words[w + 1] == tag)
}

/// The entry `words` hold under key `k`, if any.
#[inline(always)]
pub fn find(words: &[u32], k: u64, pairs_log2: u8) -> Option<u32> {
    slot_tagged(words, pair(k, pairs_log2), tag(k, pairs_log2)).map(|w| words[w])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pair_and_tag_give_the_key_back() {
        for p in [MIN_PAIRS_LOG2, 21] {
            for hi in [0u64, 1 << 16, 0x2001_0db8_0001 << 16, u64::MAX, 1 << 63] {
                for (level, &bits) in LEVELS.iter().enumerate() {
                    let k = key(hi, level);
                    let t = tag(k, p);
                    assert_ne!(t, 0, "a used slot's tag is never 0");
                    assert_eq!(key_of(pair(k, p), t, p), k);
                    let (l, top) = prefix_of(k);
                    assert_eq!(l, level);
                    assert_eq!(top, hi & (u64::MAX << (64 - bits)));
                }
            }
        }
        assert!(
            (1u64 << (KEY_BITS - MIN_PAIRS_LOG2)) - 1 <= (!USED) as u64,
            "the tag fits"
        );
    }

    #[test]
    fn levels_never_share_a_key() {
        let hi = 0x2001_0db8_0000_0000;
        assert_ne!(key(hi, 0), key(hi, 1));
        assert_eq!(key(hi, 0) >> 48, 0);
        assert_eq!(key(hi, 1) >> 48, 1);
    }
}
