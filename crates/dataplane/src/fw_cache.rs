//! The verdict cache's layout (bpf/include/router/firewall.h): where a key
//! lives (its set and ways), which way a new verdict takes, and the trait
//! of what holds the cache (the fast path's maps or the model's copy).
use crate::fwc::Tables;
use crate::layout::{FlowKey, FwKey, FwReads, FwSlot, FW_CACHE_WAYS, FW_SET_BITS_ALL};

/// Where the verdict cache lives: the fast path's maps
/// ([`crate::fw_maps::FwMaps`]) or the model's copy ([`crate::model::Model`]).
pub trait FwTable {
    /// Slot `index` as it is now.
    fn slot(&self, index: u32) -> FwSlot;
    /// Writes slot `index` (all but its sequence word) so that no frame
    /// takes it half-written for a hit.
    fn write_slot(&mut self, index: u32, slot: &FwSlot);
    /// Makes `generation` the one frames are judged by, with what each
    /// family reads in it (`[ipv6]`) and the classifier it judges a key
    /// the cache lacks by (None: the key is reported, and the kernel
    /// judges), and the slots `carried` into it (each written at its
    /// index, tagged with it); all are in place before the generation
    /// is, the slots last (frames of the generation before take them for
    /// stale ones, and may write over them meanwhile).
    fn publish(
        &mut self,
        generation: u32,
        reads: [FwReads; 2],
        classifiers: [Option<&Tables>; 2],
        carried: &[(u32, FwSlot)],
    );
}

/// The key's eight words as the program loads them.
fn words(k: &FwKey) -> [u64; 8] {
    let bytes = linerate_bpf::layout::Pod::as_bytes(k);
    std::array::from_fn(|i| u64::from_le_bytes(bytes[i * 8..i * 8 + 8].try_into().unwrap()))
}

/// The set the program looks a key up in (bpf/include/router/firewall.h,
/// fw_set_of), of the 1 << `bits` its family's keys take.
pub fn set_of(k: &FwKey, bits: u8) -> u32 {
    let bits = if bits == 0 || bits > FW_SET_BITS_ALL {
        FW_SET_BITS_ALL
    } else {
        bits
    };
    let w = words(k);
    let mut h = (w[0] ^ w[4]).wrapping_mul(0x9e3779b97f4a7c15)
        ^ (w[1] ^ w[5]).wrapping_mul(0xc2b2ae3d27d4eb4f)
        ^ (w[2] ^ w[6]).wrapping_mul(0x165667b19e3779f9)
        ^ (w[3] ^ w[7]).wrapping_mul(0xd6e8feb86659fd93);
    h ^= h >> 29;
    h = h.wrapping_mul(0xff51afd7ed558ccd);
    (h >> (64 - bits as u32)) as u32
}

/// The slot index of way `way` of set `set`.
pub fn slot_index(set: u32, way: usize) -> u32 {
    set * FW_CACHE_WAYS + way as u32
}

/// Which of a set's two ways to write `new` into: None if one holds its
/// key under its generation already (learned from an earlier report);
/// else an empty way or one of another generation, else the way `evict`
/// picks (the caller alternates it).
pub fn way_for(ways: &[FwSlot; 2], new: &FwSlot, evict: bool) -> Option<usize> {
    let current = |s: &FwSlot| s.verdict != 0 && s.generation == new.generation;
    if ways.iter().any(|s| current(s) && s.key == new.key) {
        return None;
    }
    Some(
        ways.iter()
            .position(|s| !current(s))
            .unwrap_or(evict as usize),
    )
}

/// Which way a key the program judged takes when both of its set's ways
/// hold verdicts of the current generation (bpf/include/router/
/// classify.h, fwc_evict): a bit of the key's addresses and ports, so
/// that the program and the model choose alike.
pub fn evict_bit(k: &FlowKey) -> usize {
    ((k.saddr[3] ^ k.daddr[3] ^ k.transport[1] ^ k.transport[3]) & 1) as usize
}

/// The way of a set the program writes a key it judged into: one that
/// holds nothing of the generation, else the one [`evict_bit`] picks.
pub fn judged_way(ways: &[FwSlot; 2], generation: u32, key: &FlowKey) -> usize {
    let stale = |s: &FwSlot| s.verdict == 0 || s.generation != generation;
    if stale(&ways[0]) {
        0
    } else if stale(&ways[1]) {
        1
    } else {
        evict_bit(key)
    }
}
