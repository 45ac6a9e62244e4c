//! Addresses as integers: `u32` for IPv4, `u128` for IPv6, most significant
//! bit first, the way a trie consumes them.
use std::fmt::Debug;
use std::hash::Hash;

pub trait Key: Copy + Eq + Ord + Hash + Debug + Send + Sync + 'static {
    const BITS: u8;
    /// `len` bits starting `offset` bits from the top, as an index.
    fn chunk(self, offset: u8, len: u8) -> usize;
    /// The address with all but the top `len` bits cleared.
    fn mask(self, len: u8) -> Self;
    fn from_u128(v: u128) -> Self;
    fn to_u128(self) -> u128;
}

impl Key for u32 {
    const BITS: u8 = 32;
    #[inline(always)]
    fn chunk(self, offset: u8, len: u8) -> usize {
        ((self << offset) >> (32 - len)) as usize
    }
    #[inline(always)]
    fn mask(self, len: u8) -> Self {
        if len == 0 {
            0
        } else {
            self & (u32::MAX << (32 - len))
        }
    }
    fn from_u128(v: u128) -> Self {
        v as u32
    }
    fn to_u128(self) -> u128 {
        self as u128
    }
}

impl Key for u128 {
    const BITS: u8 = 128;
    #[inline(always)]
    fn chunk(self, offset: u8, len: u8) -> usize {
        ((self << offset) >> (128 - len)) as usize
    }
    #[inline(always)]
    fn mask(self, len: u8) -> Self {
        if len == 0 {
            0
        } else {
            self & (u128::MAX << (128 - len))
        }
    }
    fn from_u128(v: u128) -> Self {
        v
    }
    fn to_u128(self) -> u128 {
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunks_and_masks() {
        let a: u32 = 0xc0a8_0105; // 192.168.1.5
        assert_eq!(a.chunk(0, 24), 0xc0a801);
        assert_eq!(a.chunk(24, 8), 5);
        assert_eq!(a.mask(16), 0xc0a8_0000);
        assert_eq!(a.mask(0), 0);
        assert_eq!(a.mask(32), a);
        let b: u128 = 0x2001_0db8 << 96;
        assert_eq!(b.chunk(0, 16), 0x2001);
        assert_eq!(b.chunk(16, 8), 0x0d);
        assert_eq!(b.mask(20), 0x2001_0000 << 96);
    }
}
