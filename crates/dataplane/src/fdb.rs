//! The bridges' FDB as the fast path holds it (abi/router.h, `struct
//! fdb_set`): a key word for a (bridge, MAC), the set it hashes to, and
//! where each entry sits ([`Places`]): the same decisions for the program's
//! array (crate::fastpath) and the model (crate::model), so that both hold
//! the same entries and leave out the same ones when a set is full.
use crate::layout::{FdbEntry, FdbKey, FDB_SETS, FDB_SET_BITS, FDB_WAYS};
use std::collections::HashMap;

/// The largest bridge index a key holds (its top 16 bits).
pub const MAX_BRIDGE: u32 = 0xffff;

/// The key word of `k` (router.bpf.c's fdb_key): the MAC's bytes, little
/// endian, the bridge's index above them; never 0 (an empty slot) for a
/// bridge index of 1 to [`MAX_BRIDGE`].
pub fn key(k: &FdbKey) -> u64 {
    let m = k.mac;
    let b = (k.bridge & MAX_BRIDGE).to_le_bytes();
    u64::from_le_bytes([m[0], m[1], m[2], m[3], m[4], m[5], b[0], b[1]])
}

/// The (bridge, MAC) of key word `w`.
pub fn unkey(w: u64) -> FdbKey {
    let b = w.to_le_bytes();
    FdbKey::new(
        u16::from_le_bytes([b[6], b[7]]) as u32,
        [b[0], b[1], b[2], b[3], b[4], b[5]],
    )
}

/// The set key word `w` hashes to (a multiplicative hash's top bits).
pub fn set_of(w: u64) -> u32 {
    (w.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> (64 - FDB_SET_BITS)) as u32
}

/// The slot's value word as the program reads it after the key: port,
/// MTU, flags, the used mark.
pub fn value(e: &FdbEntry) -> u64 {
    e.port as u64 | (e.mtu as u64) << 32 | (e.flags as u64) << 48 | (e.used as u64) << 56
}

/// Where the entries sit: each key's (set, way), and the ways taken.
pub struct Places {
    at: HashMap<u64, (u32, usize)>,
    taken: Vec<[bool; FDB_WAYS]>,
}

impl Default for Places {
    fn default() -> Self {
        Places {
            at: HashMap::new(),
            taken: vec![[false; FDB_WAYS]; FDB_SETS as usize],
        }
    }
}

impl Places {
    /// The slot of key word `w`: its own if it has one (false), else a
    /// free way of its set (true: new); None when the set is full.
    pub fn place(&mut self, w: u64) -> Option<((u32, usize), bool)> {
        if let Some(&at) = self.at.get(&w) {
            return Some((at, false));
        }
        let set = set_of(w);
        let way = self.taken[set as usize].iter().position(|t| !t)?;
        self.taken[set as usize][way] = true;
        self.at.insert(w, (set, way));
        Some(((set, way), true))
    }

    /// Frees key word `w`'s slot, if it has one.
    pub fn remove(&mut self, w: u64) -> Option<(u32, usize)> {
        let (set, way) = self.at.remove(&w)?;
        self.taken[set as usize][way] = false;
        Some((set, way))
    }

    /// Each placed key word and its (set, way).
    pub fn placed(&self) -> impl Iterator<Item = (u64, (u32, usize))> + '_ {
        self.at.iter().map(|(&w, &at)| (w, at))
    }

    pub fn len(&self) -> usize {
        self.at.len()
    }

    pub fn is_empty(&self) -> bool {
        self.at.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_round_trip_and_are_never_empty() {
        let k = FdbKey::new(900, [2, 0, 0, 0, 0xa, 1]);
        assert_eq!(unkey(key(&k)), k);
        assert_eq!(key(&k) >> 48, 900);
        assert_ne!(key(&FdbKey::new(1, [0; 6])), 0);
        assert!(set_of(u64::MAX) < FDB_SETS);
    }

    /// A set takes four keys; a fifth is left out until one leaves, and a
    /// key keeps its slot when written again.
    #[test]
    fn a_full_set_leaves_a_key_out() {
        let mut p = Places::default();
        let same_set: Vec<u64> = (1u32..)
            .map(|i| {
                let [a, b, c, d] = i.to_be_bytes();
                key(&FdbKey::new(7, [2, 0, a, b, c, d]))
            })
            .filter(|&w| set_of(w) == 5)
            .take(FDB_WAYS + 1)
            .collect();
        let mut ways = Vec::new();
        for &w in &same_set[..FDB_WAYS] {
            let ((set, way), new) = p.place(w).unwrap();
            assert!(new && set == 5);
            ways.push(way);
        }
        ways.sort();
        assert_eq!(ways, [0, 1, 2, 3]);
        assert_eq!(p.place(same_set[FDB_WAYS]), None, "the set is full");
        assert_eq!(
            p.place(same_set[1]).map(|x| x.1),
            Some(false),
            "its own slot"
        );
        let freed = p.remove(same_set[1]).unwrap();
        assert_eq!(p.place(same_set[FDB_WAYS]), Some((freed, true)));
        assert_eq!(p.len(), FDB_WAYS);
    }
}
