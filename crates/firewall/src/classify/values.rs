//! The sets of values a rule's conditions allow on a key field
//! (linerate_dataplane::fwc: a source of the key, optionally masked),
//! each a set of ranges; a transport field the packet lacks reads as
//! [`LACKING`], which a test never allows, whatever its polarity.
pub use linerate_dataplane::fwc::{KeyField, Source, IFACES, LACKING};
use smallvec::{smallvec, SmallVec};

/// Every value a field can have in a family: the source's domain, and
/// LACKING where the source can lack one.
pub fn domain(field: &KeyField, ipv6: bool) -> Values {
    let mut d = Values::range(0, field.source.max(ipv6));
    if field.source.can_lack() {
        d = d.union(&Values::value(LACKING));
    }
    d
}

/// A set of values: sorted, disjoint, non-adjacent inclusive ranges (most
/// sets a rule makes are one range: kept inline).
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Values(SmallVec<[(u128, u128); 1]>);

impl Values {
    pub fn empty() -> Values {
        Values(SmallVec::new())
    }

    pub fn value(v: u128) -> Values {
        Values(smallvec![(v, v)])
    }

    pub fn range(lo: u128, hi: u128) -> Values {
        if lo > hi {
            Values::empty()
        } else {
            Values(smallvec![(lo, hi)])
        }
    }

    /// The union of any ranges.
    pub fn of_ranges(mut ranges: Vec<(u128, u128)>) -> Values {
        ranges.retain(|(lo, hi)| lo <= hi);
        ranges.sort_unstable();
        Values::of_sorted(ranges)
    }

    /// The union of ranges sorted by their start.
    fn of_sorted(ranges: impl IntoIterator<Item = (u128, u128)>) -> Values {
        let mut out: SmallVec<[(u128, u128); 1]> = SmallVec::new();
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
        if other.is_empty() {
            return self.clone();
        }
        if self.is_empty() {
            return other.clone();
        }
        // Both sorted: merged by their starts.
        let (a, b) = (&self.0, &other.0);
        let (mut i, mut j) = (0, 0);
        Values::of_sorted(std::iter::from_fn(|| {
            let next = match (a.get(i), b.get(j)) {
                (Some(x), Some(y)) if x <= y => x,
                (Some(_), Some(y)) | (None, Some(y)) => {
                    j += 1;
                    return Some(*y);
                }
                (Some(x), None) => x,
                (None, None) => return None,
            };
            i += 1;
            Some(*next)
        }))
    }

    pub fn intersect(&self, other: &Values) -> Values {
        let (mut i, mut j, mut out) = (0, 0, SmallVec::new());
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
        let mut out = SmallVec::new();
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
}
