//! The FIB's BPF arena (`bpf/include/fib.h`): one sparse region that the
//! fast path reads with plain loads and the control plane writes with plain
//! stores through its mapping, no syscall per entry or row.
//!
//! The regions' offsets are fib.h's; `crates/fib/tests/bpf_contract.rs`
//! holds both to the FIB's shapes by running the C lookup on tables written
//! here.
use anyhow::{bail, Context, Result};
use libbpf_rs::{AsRawLibbpf, MapCore, MapFlags, Object};
use std::sync::atomic::{AtomicU32, Ordering};

/// Pages of the arena map (`FIB_ARENA_PAGES`): the arena's 4 GiB limit.
/// Only pages written are allocated.
pub const ARENA_PAGES: usize = 1 << 20;
const PAGE: usize = 4096;

/// A table of 32-bit entries at a fixed byte offset of the arena.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Region {
    pub offset: usize,
    pub entries: usize,
}

const MIB: usize = 1 << 20;

/// Where a family's FIB lives in the arena, and its group size.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FibLayout {
    pub root: Region,
    pub groups: Region,
    /// Bits per group (a group is `2^stride` entries).
    pub stride: u8,
    /// The /48 shortcut's 32-bit words (`FIB6_SC_OFF`; none for IPv4):
    /// slots of an entry word then a tag word.
    pub shortcut: Region,
}

/// No shortcut (IPv4).
const NO_SHORTCUT: Region = Region {
    offset: 0,
    entries: 0,
};

/// The IPv6 /48 shortcut: 2^21 pairs of two slots of two words.
const FIB6_SHORTCUT: Region = Region {
    offset: 2048 * MIB,
    entries: 4 << 21,
};

/// The compact layout's /48 and /40 shortcut: 2^20 pairs, at the same
/// offset.
const FIB6_COMPACT_SHORTCUT: Region = Region {
    offset: 2048 * MIB,
    entries: 4 << 20,
};

/// IPv4: 2^24 root entries (`FIB4_ROOT_OFF`), up to 65536 groups of 256
/// (`FIB4_GROUPS_OFF`).
pub const FIB4: FibLayout = FibLayout {
    root: Region {
        offset: 0,
        entries: 1 << 24,
    },
    groups: Region {
        offset: 64 * MIB,
        entries: 65536 * 256,
    },
    stride: 8,
    shortcut: NO_SHORTCUT,
};

/// IPv6, wide: 2^24 root entries (`FIB6_ROOT_OFF`), up to 2^20 groups of
/// 256 (`FIB6_GROUPS_OFF`).
pub const FIB6: FibLayout = FibLayout {
    root: Region {
        offset: 128 * MIB,
        entries: 1 << 24,
    },
    groups: Region {
        offset: 192 * MIB,
        entries: (1 << 20) * 256,
    },
    stride: 8,
    shortcut: FIB6_SHORTCUT,
};

/// IPv6, compact (`FIB6_COMPACT`): 2^16 root entries, up to 2^20 groups
/// of 16, at the same offsets.
pub const FIB6_COMPACT: FibLayout = FibLayout {
    root: Region {
        offset: 128 * MIB,
        entries: 1 << 16,
    },
    groups: Region {
        offset: 192 * MIB,
        entries: (1 << 20) * 16,
    },
    stride: 4,
    shortcut: FIB6_COMPACT_SHORTCUT,
};

/// Where the FIBs of routing tables other than main live (tenants' tables
/// chosen by policy rules): each a slot of 192 MiB in a part of the arena
/// no other region uses, the IPv4 root (64 MiB) and its pool (32 MiB),
/// then the IPv6 root (64 MiB wide, 256 KiB compact), its pool (28 MiB)
/// and its shortcut (4 MiB, at the root + `FIB6_OTHER_SC_DELTA`). Offsets
/// in MiB; slot `i + 1` is at `OTHER_TABLES_MIB[i]` (slot 0 is main's,
/// above).
pub const OTHER_TABLES_MIB: [usize; 6] = [1216, 1408, 1600, 1792, 2080, 3840];
const OTHER_TABLE_MIB: usize = 192;

/// Where an IPv6 table's shortcut other than main's lies from its root
/// (fib.h's `FIB6_OTHER_SC_DELTA`), and its 32-bit words: two of a slot,
/// two slots a pair, 2^18 pairs (`linerate_fib::trie::OTHER_SHORTCUT_PAIRS_LOG2`,
/// held to it by crates/fib/tests/bpf_contract.rs).
const OTHER_SHORTCUT_DELTA: usize = 92 * MIB;
pub const OTHER_SHORTCUT_WORDS: usize = 4 << 18;

/// The FIB slots: main's and the others'.
pub const TABLE_SLOTS: usize = 1 + OTHER_TABLES_MIB.len();

/// Where table slot `slot`'s FIB of a family lives: `main` for slot 0
/// (FIB4, FIB6, FIB6_COMPACT), a slot of `OTHER_TABLES_MIB` otherwise
/// (`linerate_fib::Shape::other_table`).
pub fn table_layout(main: FibLayout, ipv6: bool, slot: usize) -> FibLayout {
    if slot == 0 {
        return main;
    }
    let base = OTHER_TABLES_MIB[slot - 1] * MIB + if ipv6 { OTHER_TABLE_MIB / 2 * MIB } else { 0 };
    let (pool, shortcut) = if ipv6 {
        let shortcut = Region {
            offset: base + OTHER_SHORTCUT_DELTA,
            entries: OTHER_SHORTCUT_WORDS,
        };
        (OTHER_SHORTCUT_DELTA - 64 * MIB, shortcut)
    } else {
        (32 * MIB, NO_SHORTCUT)
    };
    FibLayout {
        root: Region {
            offset: base,
            entries: main.root.entries,
        },
        groups: Region {
            offset: base + 64 * MIB,
            entries: pool / 4,
        },
        stride: main.stride,
        shortcut,
    }
}

/// The arena offset of a layout's root in MiB, as an interface's tables
/// name it (`struct iface`, tables4 and tables6).
pub fn root_mib(layout: FibLayout) -> u16 {
    (layout.root.offset / MIB) as u16
}

/// The FIB's link flag (`linerate_fib::CHILD`): the rest is a group index.
const CHILD: u32 = 1 << 31;

impl FibLayout {
    /// The arena's form of a FIB entry (fib.h): a next hop `n` as `n << 1`,
    /// a link to group `g` as the group's byte offset in the arena | 1.
    pub fn encode(&self, entry: u32) -> u32 {
        if entry & CHILD != 0 {
            let g = (entry & !CHILD) as usize;
            let bytes = 4usize << self.stride;
            assert!(
                (g + 1) * bytes <= self.groups.entries * 4,
                "group {g} outside {:?}",
                self.groups
            );
            (self.groups.offset + g * bytes) as u32 | 1
        } else {
            assert!(entry < CHILD);
            entry << 1
        }
    }
}

/// The arena's form of shortcut word `index`: entries encoded, tags not.
fn shortcut_word(fib: FibLayout, index: usize, word: u32) -> u32 {
    if index.is_multiple_of(2) {
        fib.encode(word)
    } else {
        word
    }
}

/// The loaded object's arena, mapped into this process by libbpf.
///
/// Valid while the object it came from is loaded (the owner keeps both).
pub struct FibArena {
    base: *mut u8,
    len: usize,
}

// The mapping is shared memory that lives as long as the object; every
// access is an atomic 32-bit load or store.
unsafe impl Send for FibArena {}
unsafe impl Sync for FibArena {}

impl FibArena {
    /// The arena of `obj` (a program that includes fib.h), and tells the
    /// programs where user space mapped it: they address it by the low 32
    /// bits of that address.
    pub fn open(obj: &Object) -> Result<Self> {
        let map = crate::loader::map(obj, "fib_arena")?;
        // For an arena libbpf reports the size of its global data (none
        // here); the mapping is the whole map.
        let mut data_size = 0u64;
        let ptr = unsafe {
            libbpf_sys::bpf_map__initial_value(map.as_libbpf_object().as_ptr(), &mut data_size)
        };
        let size = map.max_entries() as usize * PAGE;
        if ptr.is_null() {
            bail!("the FIB arena is not mapped (arenas need Linux 6.9 or later)");
        }
        if size != ARENA_PAGES * PAGE {
            bail!(
                "the FIB arena has {size} bytes, expected {} (build mismatch)",
                ARENA_PAGES * PAGE
            );
        }
        let base = ptr.cast::<u8>();
        let data = obj
            .maps()
            .find(|m| m.name().to_string_lossy().ends_with(".data.fib"))
            .context("BPF object has no .data.fib section (build mismatch)")?;
        if data.value_size() != 8 {
            bail!(
                ".data.fib holds {} bytes, expected the 8 of fib_arena_base",
                data.value_size()
            );
        }
        data.update(
            &0u32.to_ne_bytes(),
            &(base as u64).to_ne_bytes(),
            MapFlags::ANY,
        )
        .context("cannot tell the fast path where the FIB arena is")?;
        Ok(FibArena { base, len: size })
    }

    fn slot(&self, region: Region, index: usize) -> &AtomicU32 {
        assert!(index < region.entries, "entry {index} outside {region:?}");
        let off = region.offset + index * 4;
        assert!(off + 4 <= self.len);
        // In bounds (checked above), 4-byte aligned (offsets are), and only
        // ever accessed atomically.
        unsafe { &*self.base.add(off).cast::<AtomicU32>() }
    }

    /// Writes one root entry of `fib`; stores become visible to the fast
    /// path in the order they are made (a group is filled before the entry
    /// linking it).
    pub fn write_root(&self, fib: FibLayout, index: usize, entry: u32) {
        self.slot(fib.root, index)
            .store(fib.encode(entry), Ordering::Release);
    }

    /// Writes one entry of the group pool (entry `index` of the pool).
    pub fn write_group(&self, fib: FibLayout, index: usize, entry: u32) {
        self.slot(fib.groups, index)
            .store(fib.encode(entry), Ordering::Release);
    }

    /// Writes one word of the /48 shortcut: an entry word (even index) is
    /// a FIB entry, a tag word (odd) goes as it is.
    pub fn write_shortcut(&self, fib: FibLayout, index: usize, word: u32) {
        self.slot(fib.shortcut, index)
            .store(shortcut_word(fib, index, word), Ordering::Release);
    }

    /// Gives every page of `region` its memory, its entries unchanged: a
    /// program's read of a page never written faults, and the kernel's
    /// fix-up (the read gives 0) costs the packet a microsecond
    /// (`linerate bench fastpath --walk-tables 2`, a miss in an empty
    /// table: 1.1 us a packet without, measured). A store of the word a
    /// page begins with, where it is 0 (a read alone gets no page of its
    /// own, and an atomic add of 0 compiles to a read): for a region the
    /// control plane alone writes, as a FIB's.
    pub fn populate(&self, region: Region) {
        let words_a_page = PAGE / 4;
        for i in (0..region.entries).step_by(words_a_page) {
            let w = self.slot(region, i);
            if w.load(Ordering::Relaxed) == 0 {
                w.store(0, Ordering::Relaxed);
            }
        }
    }

    /// Writes `bytes` (whole 32-bit words) at byte offset `offset` of the
    /// arena, each word in one store, all visible before what is written
    /// after (the classifiers' tables, linerate_dataplane::fwc).
    pub fn write_bytes(&self, offset: usize, bytes: &[u8]) {
        assert!(
            offset.is_multiple_of(4) && bytes.len().is_multiple_of(4),
            "whole words"
        );
        assert!(offset + bytes.len() <= self.len, "past the arena");
        for (i, w) in bytes.chunks_exact(4).enumerate() {
            // In bounds (checked above), 4-byte aligned, accessed
            // atomically only.
            let word = unsafe { &*self.base.add(offset + i * 4).cast::<AtomicU32>() };
            word.store(u32::from_le_bytes(w.try_into().unwrap()), Ordering::Relaxed);
        }
        std::sync::atomic::fence(Ordering::Release);
    }

    /// Copies a whole table (root entries, the pool, then the shortcut)
    /// into a fresh arena. Zero entries (no route, empty slots) are
    /// skipped: pages never written read as zero and take no memory.
    pub fn fill(&self, fib: FibLayout, root: &[u32], groups: &[u32], shortcut: &[u32]) {
        for (region, entries) in [(fib.root, root), (fib.groups, groups)] {
            assert!(entries.len() <= region.entries);
            for (i, &e) in entries.iter().enumerate() {
                if e != 0 {
                    self.slot(region, i).store(fib.encode(e), Ordering::Relaxed);
                }
            }
        }
        assert!(shortcut.len() <= fib.shortcut.entries);
        // Tags only for used slots: an entry word of an emptied slot may
        // still hold an old entry, which its tag of 0 hides.
        for (i, slot) in shortcut.chunks_exact(2).enumerate() {
            if slot[1] != 0 {
                for (j, &w) in slot.iter().enumerate() {
                    let at = 2 * i + j;
                    self.slot(fib.shortcut, at)
                        .store(shortcut_word(fib, at, w), Ordering::Relaxed);
                }
            }
        }
        std::sync::atomic::fence(Ordering::Release);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The other tables' slots hold both families within their 192 MiB,
    /// overlap nothing (main's FIBs, the shortcut, the classifiers' four
    /// regions from 2304 MiB), and stay in the arena.
    #[test]
    fn other_tables_have_room_of_their_own() {
        let mut taken: Vec<(usize, usize, String)> = Vec::new();
        let mut region =
            |r: Region, what: String| taken.push((r.offset, r.offset + r.entries * 4, what));
        for (main, ipv6) in [(FIB4, false), (FIB6, true)] {
            region(main.root, format!("main root {ipv6}"));
            region(main.groups, format!("main groups {ipv6}"));
        }
        region(FIB6.shortcut, "shortcut".into());
        region(
            Region {
                offset: 2304 * MIB,
                entries: 4 * 384 * MIB / 4,
            },
            "classifiers".into(),
        );
        for slot in 1..TABLE_SLOTS {
            for (main, ipv6) in [(FIB4, false), (FIB6, true), (FIB6_COMPACT, true)] {
                let l = table_layout(main, ipv6, slot);
                let base = OTHER_TABLES_MIB[slot - 1] * MIB;
                for r in [l.root, l.groups, l.shortcut] {
                    assert!(
                        r.offset + r.entries * 4 <= base + OTHER_TABLE_MIB * MIB
                            && (r.offset >= base || r.entries == 0)
                    );
                }
                let pool = if ipv6 { 28 * MIB } else { 32 * MIB };
                assert_eq!(l.groups.entries * 4, pool);
                assert_eq!(l.shortcut.entries * 4, if ipv6 { 4 * MIB } else { 0 });
                if main != FIB6_COMPACT {
                    region(l.root, format!("slot {slot} root {ipv6}"));
                    region(l.groups, format!("slot {slot} groups {ipv6}"));
                    if ipv6 {
                        region(l.shortcut, format!("slot {slot} shortcut"));
                    }
                }
            }
        }
        taken.sort();
        for w in taken.windows(2) {
            assert!(w[0].1 <= w[1].0, "{} overlaps {}", w[0].2, w[1].2);
        }
        assert!(taken.last().unwrap().1 <= ARENA_PAGES * PAGE);
        assert_eq!(root_mib(table_layout(FIB4, false, 0)), 0);
        assert_eq!(root_mib(table_layout(FIB6, true, 0)), 128);
        assert_eq!(root_mib(table_layout(FIB6, true, 2)), 1408 + 96);
    }
}
