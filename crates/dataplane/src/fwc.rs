//! The firewall's classifier as the fast path holds it (bpf/include/
//! abi/firewall.h, `fwc_*`; bpf/include/router/classify.h walks it): one
//! lookup per key field to a row of term bits, the terms' actions, and
//! the walk that ANDs a key's rows and follows the terms it meets. The
//! tables are built by linerate_firewall::classify; [`Tables::walk`] is
//! the program's walk in Rust (the model's, and the reference the
//! program is tested against), and [`Tables::encode`] lays the tables
//! out as the program reads them in the router's arena.
//!
//! Bit-vector classification (as bpf-iptables and the kernel's pipapo
//! set do): for each key field, its values cut into intervals at every
//! boundary a term names, each interval mapped to a row: the bits of the
//! terms whose condition on the field the interval meets (every term that
//! names no condition on the field). A key's terms are the AND of its
//! fields' rows; the first set bit from the cursor is the term it meets.
//! Equal rows are kept once. A row also carries its summary, a bit for
//! each word with a bit set (the aggregated bit vector): the walk reads
//! only the words every row's summary has, so a key that one field
//! narrows (an address in one rule's prefix) reads a few words whatever
//! the number of rules and whatever rules come first. In the arena
//! a row keeps only its own bits beside the field's shared ones
//! ([`Row`]), so tables grow with the rules, not with their square.
use crate::layout::{FlowKey, FW_ACCEPT, FW_DROP, FW_KERNEL, TRANSPORT_BYTES};
use smallvec::SmallVec;

/// Where a field's value comes from in a [`FlowKey`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Source {
    /// The input and output interface indexes.
    Iif,
    Oif,
    /// The addresses: 32 bits (IPv4) or 128 (IPv6), network order read
    /// big-endian.
    Saddr,
    Daddr,
    /// The transport protocol, and IPv4's protocol or IPv6's first next
    /// header.
    L4proto,
    Nexthdr,
    /// The key's connection byte: its `ct state` bit and the reply bit.
    Ct,
    /// `len` bytes (1, 2 or 4) of the transport header from `offset`,
    /// big-endian; [`LACKING`] past the key's `transport_len`.
    Transport {
        offset: u8,
        len: u8,
    },
}

/// The value of a transport field the packet does not have: one past
/// every value of its width (no width reaches 128 bits).
pub const LACKING: u128 = 1 << 64;

/// Interface indexes the fast path has slots for (ROUTER_IFACES).
pub const IFACES: u128 = 1024;

impl Source {
    /// The largest value the source holds in a family (LACKING apart).
    pub fn max(self, ipv6: bool) -> u128 {
        match self {
            Source::Iif | Source::Oif => IFACES - 1,
            Source::Saddr | Source::Daddr if ipv6 => u128::MAX,
            Source::Saddr | Source::Daddr => u32::MAX as u128,
            Source::L4proto | Source::Nexthdr | Source::Ct => 0xff,
            Source::Transport { len, .. } => (1u128 << (8 * len as u32)) - 1,
        }
    }

    /// Whether the source can lack a value.
    pub fn can_lack(self) -> bool {
        matches!(self, Source::Transport { .. })
    }

    /// Whether its values are few enough for a direct table (an array
    /// indexed by the value) rather than sorted ranges.
    pub fn is_small(self, ipv6: bool) -> bool {
        self.max(ipv6) <= u16::MAX as u128
    }

    /// The source's value in `key`.
    pub fn of(self, key: &FlowKey) -> u128 {
        let ipv6 = key.ipv6 != 0;
        let addr = |b: &[u8; 16]| {
            if ipv6 {
                u128::from_be_bytes(*b)
            } else {
                u32::from_be_bytes([b[0], b[1], b[2], b[3]]) as u128
            }
        };
        match self {
            Source::Iif => key.iif as u128,
            Source::Oif => key.oif as u128,
            Source::Saddr => addr(&key.saddr),
            Source::Daddr => addr(&key.daddr),
            Source::L4proto => key.l4proto as u128,
            Source::Nexthdr => key.nexthdr as u128,
            Source::Ct => key.ct as u128,
            Source::Transport { offset, len } => {
                let end = offset as usize + len as usize;
                if end > key.transport_len as usize || end > TRANSPORT_BYTES {
                    return LACKING;
                }
                key.transport[offset as usize..end]
                    .iter()
                    .fold(0u128, |acc, b| acc << 8 | *b as u128)
            }
        }
    }
}

/// A key field: a source and the mask applied to it (nft's `& mask`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct KeyField {
    pub source: Source,
    pub mask: Option<u128>,
}

impl KeyField {
    pub fn plain(source: Source) -> KeyField {
        KeyField { source, mask: None }
    }

    /// The field's value in `key` (a lacking value stays lacking).
    pub fn of(&self, key: &FlowKey) -> u128 {
        let v = self.source.of(key);
        match self.mask {
            Some(m) if v != LACKING => v & m,
            _ => v,
        }
    }
}

/// What a term does when the packet meets it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Act {
    /// Counts at counter `id` (the fast path's rule counter id) and goes
    /// on.
    Count(u32),
    /// Goes on at term `to` (a later one).
    Skip(u32),
    /// The packet's verdict: accepted by every base chain, dropped, or
    /// left to the kernel.
    Accept,
    Drop,
    Kernel,
}

/// The row of a value the classifier leaves to the kernel: an interface
/// index the control plane has no name for.
pub const KERNEL_ROW: u32 = u32::MAX;

/// The most terms a walk meets (counting ones, skips, the last): past it
/// the kernel judges.
pub const MAX_STEPS: usize = 32;

/// The rules a key's packets are counted at, most: past it the kernel
/// judges, as the verdict cache has it (FW_ENTRY_COUNTERS).
pub const MAX_COUNTED: usize = crate::layout::FW_ENTRY_COUNTERS;

/// A field's row: the terms whose condition on the field its values
/// meet, beside the field's shared terms (those with no condition on it:
/// [`FieldTable::shared`]). Only its own words are kept, so an access
/// list's tables grow with its rules, not with their square.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Row {
    /// Which words of the whole row have a bit set, a bit a word (the
    /// aggregated bit vector: the walk reads only the words every row's
    /// summary has).
    pub summary: [u64; SUMMARY_WORDS],
    /// The row's own bits, words from `own_first` on (none: empty). Most
    /// rows of an access list have one word: kept inline (10,000 rows are
    /// built again at each ruleset change).
    pub own_first: u32,
    pub own: SmallVec<[u64; 2]>,
}

impl Row {
    /// The row of terms `own` (bit numbers, ascending) beside `shared`.
    pub fn of(own: &[u32], shared: &Shared) -> Row {
        let (lo, hi) = match (own.first(), own.last()) {
            (Some(a), Some(b)) => (*a as usize / 64, *b as usize / 64),
            _ => {
                return Row {
                    summary: shared.summary,
                    own_first: 0,
                    own: SmallVec::new(),
                }
            }
        };
        let mut words: SmallVec<[u64; 2]> = smallvec::smallvec![0u64; hi - lo + 1];
        for &t in own {
            words[t as usize / 64 - lo] |= 1 << (t % 64);
        }
        let mut summary = shared.summary;
        for (i, w) in words.iter().enumerate() {
            if *w != 0 {
                summary[(lo + i) / 64] |= 1 << ((lo + i) % 64);
            }
        }
        Row {
            summary,
            own_first: lo as u32,
            own: words,
        }
    }

    /// The first and last word of the whole row with a bit set (0 and 0
    /// when none is).
    pub fn first(&self) -> usize {
        (0..WORDS)
            .find(|w| has_word(&self.summary, *w))
            .unwrap_or(0)
    }

    pub fn last(&self) -> usize {
        (0..WORDS)
            .rev()
            .find(|w| has_word(&self.summary, *w))
            .unwrap_or(0)
    }

    /// Word `w` of the whole row.
    pub fn word(&self, shared: &[u64], w: usize) -> u64 {
        let own = w
            .checked_sub(self.own_first as usize)
            .and_then(|i| self.own.get(i))
            .copied()
            .unwrap_or(0);
        shared[w] | own
    }
}

/// The bits every row of a field has: the terms with no condition on it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Shared {
    pub bits: Vec<u64>,
    /// Which words have a bit set.
    pub summary: [u64; SUMMARY_WORDS],
}

/// u64s of a row's summary: a bit for each of [`WORDS`] words.
pub const SUMMARY_WORDS: usize = WORDS / 64;

impl Shared {
    pub fn of(bits: Vec<u64>) -> Shared {
        let mut summary = [0u64; SUMMARY_WORDS];
        for (i, w) in bits.iter().enumerate().take(WORDS) {
            if *w != 0 {
                summary[i / 64] |= 1 << (i % 64);
            }
        }
        Shared { summary, bits }
    }
}

/// Whether `summary` has word `w`.
fn has_word(summary: &[u64; SUMMARY_WORDS], w: usize) -> bool {
    summary[w / 64] >> (w % 64) & 1 != 0
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
    pub shared: Shared,
    pub rows: Vec<Row>,
}

impl FieldTable {
    /// The row id of the field's value in `key`.
    pub fn row_of(&self, key: &FlowKey) -> u32 {
        let v = self.field.of(key);
        match &self.lookup {
            Lookup::Direct(rows) => {
                // The last entry is a lacking value's; a value past the
                // others (an interface index beyond the fast path's) is
                // the kernel's.
                if v == LACKING {
                    rows[rows.len() - 1]
                } else if v < rows.len() as u128 - 1 {
                    rows[v as usize]
                } else {
                    KERNEL_ROW
                }
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
    /// FW_ACCEPT, FW_DROP or FW_KERNEL.
    pub verdict: u8,
    /// The rules counted, by id, in order.
    pub counted: Vec<u32>,
    /// The walk gave up after [`MAX_STEPS`] terms (the verdict is then
    /// the kernel's).
    pub gave_up: bool,
}

impl Tables {
    /// The key's verdict and counted rules, as the fast path walks the
    /// tables.
    pub fn walk(&self, key: &FlowKey) -> Walked {
        let kernel = |gave_up| Walked {
            verdict: FW_KERNEL,
            counted: vec![],
            gave_up,
        };
        let mut rows = Vec::with_capacity(self.fields.len());
        for f in &self.fields {
            match f.row_of(key) {
                KERNEL_ROW => return kernel(false),
                r => rows.push((&f.rows[r as usize], &f.shared.bits[..])),
            }
        }
        // The words every row has a bit in: the only ones the walk reads.
        let mut summary = [u64::MAX; SUMMARY_WORDS];
        for (r, _) in &rows {
            for (s, w) in summary.iter_mut().zip(r.summary) {
                *s &= w;
            }
        }
        let mut counted = Vec::new();
        let mut cursor = 0usize;
        for _ in 0..MAX_STEPS {
            let Some(t) = first_set(&rows, &summary, cursor) else {
                // Every chain ends in its policy, a term with no condition.
                unreachable!("a walk past the last term")
            };
            match self.acts[t] {
                Act::Count(id) => {
                    // More counters than an entry holds: the kernel's, as
                    // the verdict cache has it.
                    if counted.len() == MAX_COUNTED {
                        return kernel(false);
                    }
                    counted.push(id);
                    cursor = t + 1;
                }
                Act::Skip(to) => cursor = to as usize,
                Act::Accept => return self.done(FW_ACCEPT, counted),
                Act::Drop => return self.done(FW_DROP, counted),
                Act::Kernel => return kernel(false),
            }
        }
        kernel(true)
    }

    fn done(&self, verdict: u8, counted: Vec<u32>) -> Walked {
        Walked {
            verdict,
            counted,
            gave_up: false,
        }
    }
}

/// The first term at or after `cursor` whose bit every row has, reading
/// only the words `summary` (the rows' summaries ANDed) has.
fn first_set(
    rows: &[(&Row, &[u64])],
    summary: &[u64; SUMMARY_WORDS],
    cursor: usize,
) -> Option<usize> {
    if rows.is_empty() {
        return Some(cursor);
    }
    let words = rows[0].1.len();
    for w in (cursor / 64..words).filter(|w| has_word(summary, *w)) {
        let mut x = u64::MAX;
        for (r, shared) in rows {
            x &= r.word(shared, w);
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

/// The arena's classifier regions (abi/firewall.h): one per
/// [generation & 1][ipv6], from FWC_ARENA_OFF.
pub const ARENA_OFF: u64 = 2304 << 20;
pub const REGION: u64 = 384 << 20;
/// The most key fields and row words a family's tables have.
pub const FIELDS: usize = 16;
pub const WORDS: usize = 256;
/// Sizes of struct fwc_header, fwc_field and fwc_range.
const HEADER_BYTES: usize = 24 + FIELDS * FIELD_BYTES;
const FIELD_BYTES: usize = 40;
const RANGE_BYTES: usize = 24;

/// The arena offset of the region of [generation & 1][ipv6].
pub fn region(generation: u32, ipv6: bool) -> u64 {
    ARENA_OFF + ((generation as u64 & 1) * 2 + ipv6 as u64) * REGION
}

/// Why tables do not fit the program.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TooBig {
    Fields(usize),
    Words(usize),
    Bytes(usize),
}

impl std::fmt::Display for TooBig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TooBig::Fields(n) => write!(f, "{n} key fields (the fast path reads {FIELDS})"),
            TooBig::Words(n) => write!(f, "{n} words of terms (the fast path reads {WORDS})"),
            TooBig::Bytes(n) => write!(f, "{n} bytes of tables (a region holds {REGION})"),
        }
    }
}

impl Source {
    /// FWC_SRC_*, and the transport field's offset and length.
    fn code(self) -> (u8, u8, u8) {
        match self {
            Source::Iif => (0, 0, 0),
            Source::Oif => (1, 0, 0),
            Source::Saddr => (2, 0, 0),
            Source::Daddr => (3, 0, 0),
            Source::L4proto => (4, 0, 0),
            Source::Nexthdr => (5, 0, 0),
            Source::Ct => (6, 0, 0),
            Source::Transport { offset, len } => (7, offset, len),
        }
    }
}

impl Act {
    /// FWC_ACT_*: the kind in the top byte, the argument below.
    pub fn code(self) -> u32 {
        match self {
            Act::Count(id) => 1 << 24 | id,
            Act::Skip(to) => 2 << 24 | to,
            Act::Accept => 3 << 24,
            Act::Drop => 4 << 24,
            Act::Kernel => 5 << 24,
        }
    }
}

impl Tables {
    /// The region's bytes for these tables at arena offset `at` (offsets
    /// in them are the arena's), header first, `on` set.
    pub fn encode(&self, at: u64) -> Result<Vec<u8>, TooBig> {
        if self.fields.len() > FIELDS {
            return Err(TooBig::Fields(self.fields.len()));
        }
        if self.words > WORDS {
            return Err(TooBig::Words(self.words));
        }
        let mut out = vec![0u8; HEADER_BYTES];
        let put32 = |out: &mut Vec<u8>, pos: usize, v: u32| {
            out[pos..pos + 4].copy_from_slice(&v.to_le_bytes())
        };
        let put64 = |out: &mut Vec<u8>, pos: usize, v: u64| {
            out[pos..pos + 8].copy_from_slice(&v.to_le_bytes())
        };
        let align = |out: &mut Vec<u8>| out.resize(out.len().div_ceil(8) * 8, 0);
        put32(&mut out, 0, 1);
        put32(&mut out, 4, self.fields.len() as u32);
        put32(&mut out, 8, self.words as u32);
        put32(&mut out, 12, self.acts.len() as u32);
        let here = at + out.len() as u64;
        put64(&mut out, 16, here);
        for a in &self.acts {
            out.extend(a.code().to_le_bytes());
        }
        for (i, f) in self.fields.iter().enumerate() {
            align(&mut out);
            let d = 24 + i * FIELD_BYTES;
            let (source, offset, len) = f.field.source.code();
            let mask = f.field.mask.unwrap_or(u128::MAX);
            let (kind, count) = match &f.lookup {
                Lookup::Direct(rows) => (0u8, rows.len()),
                Lookup::Ranges(starts) => (1u8, starts.len()),
            };
            out[d..d + 4].copy_from_slice(&[source, offset, len, kind]);
            put32(&mut out, d + 4, count as u32);
            put64(&mut out, d + 8, (mask >> 64) as u64);
            put64(&mut out, d + 16, mask as u64);
            let here = at + out.len() as u64;
            put64(&mut out, d + 24, here);
            // The field's shared row, then each row as its summary (four
            // u64), two u32 (own_first, own words) and its own words; a
            // row is named by its place in u64s from the shared row.
            let mut placed = Vec::with_capacity(f.rows.len());
            let mut rows = Vec::new();
            for r in &f.rows {
                placed.push((self.words + rows.len() / 8) as u32);
                r.summary.iter().for_each(|w| rows.extend(w.to_le_bytes()));
                for v in [r.own_first, r.own.len() as u32] {
                    rows.extend(v.to_le_bytes());
                }
                r.own.iter().for_each(|w| rows.extend(w.to_le_bytes()));
            }
            let place = |r: u32| {
                if r == KERNEL_ROW {
                    r
                } else {
                    placed[r as usize]
                }
            };
            match &f.lookup {
                Lookup::Direct(rows) => rows
                    .iter()
                    .for_each(|r| out.extend(place(*r).to_le_bytes())),
                Lookup::Ranges(starts) => {
                    for (start, row) in starts {
                        out.extend(((start >> 64) as u64).to_le_bytes());
                        out.extend((*start as u64).to_le_bytes());
                        out.extend(place(*row).to_le_bytes());
                        out.extend(0u32.to_le_bytes());
                    }
                }
            }
            align(&mut out);
            let here = at + out.len() as u64;
            put64(&mut out, d + 32, here);
            f.shared
                .bits
                .iter()
                .for_each(|w| out.extend(w.to_le_bytes()));
            out.extend(rows);
            if out.len() as u64 > REGION {
                return Err(TooBig::Bytes(out.len()));
            }
        }
        debug_assert_eq!(RANGE_BYTES, 24);
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The C header's numbers are these (abi/firewall.h: no BTF carries
    /// a #define).
    #[test]
    fn the_regions_and_limits_are_the_programs() {
        let header = std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../bpf/include/abi/firewall.h"
        ))
        .unwrap();
        let define = |name: &str| -> String {
            header
                .lines()
                .find_map(|l| l.strip_prefix(&format!("#define {name} ")))
                .unwrap_or_else(|| panic!("#define {name}"))
                .split("/*")
                .next()
                .unwrap()
                .trim()
                .to_string()
        };
        assert_eq!(
            define("FWC_ARENA_OFF"),
            format!("({}ull << 20)", ARENA_OFF >> 20)
        );
        assert_eq!(define("FWC_REGION"), format!("({}ull << 20)", REGION >> 20));
        assert_eq!(define("FWC_FIELDS"), FIELDS.to_string());
        assert_eq!(define("FWC_WORDS"), WORDS.to_string());
        assert_eq!(define("FWC_MAX_STEPS"), MAX_STEPS.to_string());
        use crate::layout::{FW_CACHE_SETS, FW_SET_BITS_ALL, FW_SET_BITS_CLASSIFIED};
        assert_eq!(
            define("FW_SET_BITS_CLASSIFIED"),
            FW_SET_BITS_CLASSIFIED.to_string()
        );
        assert_eq!(define("FW_SET_BITS_ALL"), FW_SET_BITS_ALL.to_string());
        assert_eq!(FW_CACHE_SETS, 1 << FW_SET_BITS_ALL);
        for (code, act) in [
            (1, Act::Count(0)),
            (2, Act::Skip(0)),
            (3, Act::Accept),
            (4, Act::Drop),
            (5, Act::Kernel),
        ] {
            assert_eq!(act.code() >> 24, code);
        }
    }

    /// The classifiers' regions lie past the FIB's in the arena, and
    /// within it.
    #[test]
    fn the_regions_leave_the_fib_its_room() {
        use linerate_bpf::fib_arena::{ARENA_PAGES, FIB4, FIB6, FIB6_COMPACT};
        for fib in [FIB4, FIB6, FIB6_COMPACT] {
            for r in [fib.root, fib.groups, fib.shortcut] {
                assert!((r.offset + r.entries * 4) as u64 <= ARENA_OFF, "{r:?}");
            }
        }
        assert!(region(1, true) + REGION <= (ARENA_PAGES * 4096) as u64);
        assert_ne!(region(0, false), region(1, false));
        assert_ne!(region(0, false), region(0, true));
    }

    /// A transport field past the key's bytes is lacking; a masked one is
    /// read under its mask.
    #[test]
    fn a_transport_field_past_the_keys_bytes_is_lacking() {
        let mut k = FlowKey {
            transport_len: 4,
            ..Default::default()
        };
        k.transport[..4].copy_from_slice(&[0, 53, 1, 187]);
        let port = |offset| Source::Transport { offset, len: 2 }.of(&k);
        assert_eq!(port(0), 53);
        assert_eq!(port(2), 443);
        assert_eq!(port(3), LACKING);
        let masked = KeyField {
            source: Source::Transport { offset: 2, len: 2 },
            mask: Some(0xff),
        };
        assert_eq!(masked.of(&k), 187);
    }
}
