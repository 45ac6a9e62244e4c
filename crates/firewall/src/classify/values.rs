//! What the classifier reads of a key, and the sets of values a rule's
//! conditions allow. A key field is one of the key's parts ([`Source`]),
//! optionally masked; its values are numbers in a domain of the source's
//! width, plus [`LACKING`] for a transport field the packet does not have
//! (a test on it fails whatever its polarity).
use linerate_dataplane::layout::{FlowKey, TRANSPORT_BYTES};

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

    /// Every value the field can have in a family: the source's domain,
    /// and LACKING where the source can lack one.
    pub fn domain(&self, ipv6: bool) -> Values {
        let mut d = Values::range(0, self.source.max(ipv6));
        if self.source.can_lack() {
            d = d.union(&Values::value(LACKING));
        }
        d
    }
}

/// A set of values: sorted, disjoint, non-adjacent inclusive ranges.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Values(Vec<(u128, u128)>);

impl Values {
    pub fn empty() -> Values {
        Values(Vec::new())
    }

    pub fn value(v: u128) -> Values {
        Values(vec![(v, v)])
    }

    pub fn range(lo: u128, hi: u128) -> Values {
        if lo > hi {
            Values::empty()
        } else {
            Values(vec![(lo, hi)])
        }
    }

    /// The union of any ranges.
    pub fn of_ranges(mut ranges: Vec<(u128, u128)>) -> Values {
        ranges.retain(|(lo, hi)| lo <= hi);
        ranges.sort_unstable();
        let mut out: Vec<(u128, u128)> = Vec::with_capacity(ranges.len());
        for (lo, hi) in ranges {
            match out.last_mut() {
                Some(last) if lo <= last.1.saturating_add(1) => last.1 = last.1.max(hi),
                _ => out.push((lo, hi)),
            }
        }
        Values(out)
    }

    pub fn ranges(&self) -> &[(u128, u128)] {
        &self.0
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn contains(&self, v: u128) -> bool {
        let at = self.0.partition_point(|r| r.0 <= v);
        at > 0 && v <= self.0[at - 1].1
    }

    pub fn union(&self, other: &Values) -> Values {
        Values::of_ranges(self.0.iter().chain(&other.0).copied().collect())
    }

    pub fn intersect(&self, other: &Values) -> Values {
        let (mut i, mut j, mut out) = (0, 0, Vec::new());
        while i < self.0.len() && j < other.0.len() {
            let (a, b) = (self.0[i], other.0[j]);
            let (lo, hi) = (a.0.max(b.0), a.1.min(b.1));
            if lo <= hi {
                out.push((lo, hi));
            }
            if a.1 < b.1 {
                i += 1;
            } else {
                j += 1;
            }
        }
        Values(out)
    }

    /// The values of `within` not in this set.
    pub fn complement_in(&self, within: &Values) -> Values {
        let mut out = Vec::new();
        for &(lo, hi) in &within.0 {
            let mut at = lo;
            let mut done = false;
            for &(a, b) in &self.0 {
                if b < at || done {
                    continue;
                }
                if a > hi {
                    break;
                }
                if a > at {
                    out.push((at, a - 1));
                }
                match b.checked_add(1) {
                    Some(n) if n <= hi => at = n,
                    _ => done = true,
                }
            }
            if !done && at <= hi {
                out.push((at, hi));
            }
        }
        Values(out)
    }

    pub fn minus(&self, other: &Values) -> Values {
        other.complement_in(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};

    fn members(v: &Values, top: u128) -> Vec<u128> {
        (0..=top).filter(|x| v.contains(*x)).collect()
    }

    /// Set operations on ranges agree with the same operations on their
    /// members, value by value.
    #[test]
    fn range_sets_are_sets_of_their_members() {
        let mut r = rand::rngs::StdRng::seed_from_u64(3);
        let random = |r: &mut rand::rngs::StdRng| {
            Values::of_ranges(
                (0..r.gen_range(0..5))
                    .map(|_| {
                        let lo = r.gen_range(0..60u128);
                        (lo, lo + r.gen_range(0..8))
                    })
                    .collect(),
            )
        };
        for _ in 0..2000 {
            let (a, b) = (random(&mut r), random(&mut r));
            let within = Values::range(0, 70);
            let (ma, mb) = (members(&a, 70), members(&b, 70));
            let u: Vec<u128> = (0..=70)
                .filter(|x| ma.contains(x) || mb.contains(x))
                .collect();
            let i: Vec<u128> = (0..=70)
                .filter(|x| ma.contains(x) && mb.contains(x))
                .collect();
            let c: Vec<u128> = (0..=70).filter(|x| !ma.contains(x)).collect();
            assert_eq!(members(&a.union(&b), 70), u, "{a:?} | {b:?}");
            assert_eq!(members(&a.intersect(&b), 70), i, "{a:?} & {b:?}");
            assert_eq!(members(&a.complement_in(&within), 70), c, "!{a:?}");
            // Normal form: equal sets are equal values.
            assert_eq!(a.union(&b), b.union(&a));
            assert!(a.ranges().windows(2).all(|w| w[0].1 + 1 < w[1].0));
        }
    }

    #[test]
    fn a_complement_reaches_the_top_of_the_widest_domain() {
        let all = Values::range(0, u128::MAX);
        let v = Values::range(5, u128::MAX);
        assert_eq!(v.complement_in(&all), Values::range(0, 4));
        assert_eq!(all.complement_in(&all), Values::empty());
        assert_eq!(
            Values::value(0).complement_in(&all),
            Values::range(1, u128::MAX)
        );
    }

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
