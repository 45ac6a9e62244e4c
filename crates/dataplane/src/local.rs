//! The router's own IPv4 addresses, and its networks' broadcast
//! addresses, as the fast path's bit set (`local_src4` in
//! bpf/include/router/maps.h): a frame from one of them is a martian
//! source, which the kernel drops (a broadcast source, where it looks
//! sources up: reverse path filtering, policy rules), so the fast path
//! passes it.
use std::collections::BTreeSet;

/// Words of 64 bits: 2^16 bits.
pub const WORDS: u32 = 1024;

/// The bit of address `a`: the top 16 bits of a multiplicative hash, as
/// `local_src_bit` in C.
pub fn bit(a: u32) -> u32 {
    a.wrapping_mul(0x9E37_79B1) >> 16
}

/// The local addresses, and the words of the bit set they make.
#[derive(Default)]
pub struct LocalSources {
    addrs: BTreeSet<u32>,
}

impl LocalSources {
    /// Adds or removes `a`; the word index to write again, if it changed
    /// the set.
    pub fn set(&mut self, a: u32, local: bool) -> Option<u32> {
        let changed = if local {
            self.addrs.insert(a)
        } else {
            self.addrs.remove(&a)
        };
        changed.then_some(bit(a) >> 6)
    }

    /// Word `w` of the bit set.
    pub fn word(&self, w: u32) -> u64 {
        self.addrs
            .iter()
            .map(|&a| bit(a))
            .filter(|b| b >> 6 == w)
            .fold(0, |word, b| word | 1 << (b & 63))
    }

    pub fn addrs(&self) -> impl Iterator<Item = u32> + '_ {
        self.addrs.iter().copied()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_hold_the_bits_of_their_addresses() {
        let mut l = LocalSources::default();
        let a = u32::from(std::net::Ipv4Addr::new(198, 18, 0, 1));
        let w = l.set(a, true).unwrap();
        assert_eq!(w, bit(a) >> 6);
        assert_eq!(l.word(w), 1 << (bit(a) & 63));
        assert_eq!(l.set(a, true), None, "already there");
        // Another address sharing the word keeps its own bit.
        let b = (0..u32::MAX)
            .find(|&b| b != a && bit(b) >> 6 == w && bit(b) != bit(a))
            .unwrap();
        l.set(b, true);
        assert_eq!(l.word(w).count_ones(), 2);
        assert_eq!(l.set(a, false), Some(w));
        assert_eq!(l.word(w), 1 << (bit(b) & 63));
        assert!(bit(u32::MAX) < WORDS * 64);
    }
}
