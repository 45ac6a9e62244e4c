//! The table against an independent longest-prefix-match implementation,
//! the `prefix-trie` crate, over random tables and random changes
//! (defaults, /0, host routes, nested and overlapping prefixes, deletes
//! that uncover shorter ones), with small shapes that make many levels and
//! the real ones. After every change: lookups agree, the writes the change
//! returned are minimal and complete (applied to the old entries they give
//! the new ones, each entry once, each a real change), and replaying them
//! one by one never shows a reader anything but the old or the new route.
use ipnet::{Ipv4Net, Ipv6Net};
use linerate_fib::{shortcut, Fib, Key, Shape, Table, CHILD};
use prefix_trie::PrefixMap;
use proptest::prelude::*;

trait Oracle<K: Key> {
    fn insert(&mut self, a: K, len: u8, nh: u32);
    fn remove(&mut self, a: K, len: u8);
    fn lookup(&self, a: K) -> u32;
}

impl Oracle<u32> for PrefixMap<Ipv4Net, u32> {
    fn insert(&mut self, a: u32, len: u8, nh: u32) {
        PrefixMap::insert(self, Ipv4Net::new(a.into(), len).unwrap(), nh);
    }
    fn remove(&mut self, a: u32, len: u8) {
        PrefixMap::remove(self, &Ipv4Net::new(a.into(), len).unwrap());
    }
    fn lookup(&self, a: u32) -> u32 {
        self.get_lpm(&Ipv4Net::new(a.into(), 32).unwrap())
            .map_or(0, |(_, &v)| v)
    }
}

impl Oracle<u128> for PrefixMap<Ipv6Net, u32> {
    fn insert(&mut self, a: u128, len: u8, nh: u32) {
        PrefixMap::insert(self, Ipv6Net::new(a.into(), len).unwrap(), nh);
    }
    fn remove(&mut self, a: u128, len: u8) {
        PrefixMap::remove(self, &Ipv6Net::new(a.into(), len).unwrap());
    }
    fn lookup(&self, a: u128) -> u32 {
        self.get_lpm(&Ipv6Net::new(a.into(), 128).unwrap())
            .map_or(0, |(_, &v)| v)
    }
}

#[derive(Clone, Debug)]
enum Op<K> {
    Insert(K, u8, u32),
    /// Remove the route at this index of the present routes, if any.
    Remove(usize),
}

/// Addresses near each other so that prefixes nest and overlap.
fn addr_strategy<K: Key>() -> impl Strategy<Value = K> {
    (0u8..4, any::<u128>()).prop_map(|(base, noise)| {
        let top = (base as u128) << (K::BITS as u32 - 2);
        // Keep mostly the low bits random: neighbours share their top.
        let low = noise >> (128 - (K::BITS as u32 - 6));
        K::from_u128(top | low)
    })
}

fn len_strategy(bits: u8, shape: Shape) -> impl Strategy<Value = u8> {
    let edges: Vec<u8> = {
        let mut v = vec![0, 1, bits, bits - 1, shape.first, shape.first + 1];
        let mut l = shape.first;
        while l + shape.stride <= bits {
            l += shape.stride;
            v.extend([l, l - 1, l + 1]);
        }
        v.into_iter().filter(|&x| x <= bits).collect()
    };
    prop_oneof![0..=bits, proptest::sample::select(edges)]
}

/// `min_len` keeps the real shapes' tests fast: a /0 there writes 16M root
/// entries; the small shapes cover /0 and /1 with the same code.
fn ops<K: Key>(shape: Shape, min_len: u8) -> impl Strategy<Value = Vec<Op<K>>> {
    let op = prop_oneof![
        3 => (addr_strategy::<K>(), len_strategy(K::BITS, shape).prop_map(move |l| l.max(min_len)), 1u32..6)
            .prop_map(|(a, l, nh)| Op::Insert(a, l, nh)),
        1 => any::<usize>().prop_map(Op::Remove),
    ];
    proptest::collection::vec(op, 1..60)
}

/// The fast path's lookup on raw tables (fib.h's, in Rust): the root, then
/// if the root entry is a link the shortcut's pairs for the /48 and the
/// /40, deepest first, then the groups.
fn raw_lookup<K: Key>(shape: Shape, root: &[u32], groups: &[u32], sc: &[u32], a: K) -> u32 {
    let mut e = root[a.chunk(0, shape.first)];
    let mut start = shape.first;
    if e & CHILD != 0 && !sc.is_empty() {
        let hi = (a.to_u128() >> 64) as u64;
        let levels = &shortcut::LEVELS[..shape.shortcut_levels as usize];
        'levels: for (level, &bits) in levels.iter().enumerate() {
            let k = shortcut::key(hi, level);
            let (pair, tag) = (
                shortcut::pair(k, shape.shortcut),
                shortcut::tag(k, shape.shortcut),
            );
            for way in 0..shortcut::WAYS {
                let w = shortcut::entry_word(pair, way);
                if sc[w + 1] == tag {
                    e = sc[w];
                    start = bits;
                    break 'levels;
                }
            }
        }
    }
    while e & CHILD != 0 {
        e = groups[(((e & !CHILD) as usize) << shape.stride) + a.chunk(start, shape.stride)];
        start += shape.stride;
    }
    e
}

fn check<K: Key, O: Oracle<K> + Default>(shape: Shape, ops: Vec<Op<K>>, probes: Vec<K>) {
    let mut fib: Fib<K> = Fib::new(shape);
    let mut oracle = O::default();
    let mut present: Vec<(K, u8)> = Vec::new();
    for op in ops {
        // The op, resolved before anything changes.
        let op = match op {
            Op::Insert(a, len, nh) => (a.mask(len), len, Some(nh)),
            Op::Remove(i) => {
                if present.is_empty() {
                    continue;
                }
                let (a, len) = present.swap_remove(i % present.len());
                (a, len, None)
            }
        };
        let mut all_probes = probes.clone();
        // Each route's first and last address and the addresses either side:
        // where a route's entries end, and an entry filed one slot off
        // (a shortcut's /48, a group's index) shows.
        for &(a, len) in present.iter().chain([(op.0, op.1)].iter()) {
            let a = a.to_u128();
            let host = if len == 0 {
                u128::MAX
            } else {
                (1u128 << (K::BITS - len)) - 1
            } & (u128::MAX >> (128 - K::BITS as u32));
            let top = u128::MAX >> (128 - K::BITS as u32);
            for p in [
                a,
                a | host,
                a.wrapping_sub(1) & top,
                (a | host).wrapping_add(1) & top,
            ] {
                all_probes.push(K::from_u128(p));
            }
        }
        let old_answers: Vec<u32> = all_probes
            .iter()
            .map(|&p| fib.lookup(p).unwrap_or(0))
            .collect();
        let mut root = fib.root().to_vec();
        let mut groups = fib.groups().to_vec();
        let mut sc = fib.shortcut().to_vec();
        let w = match op {
            (a, len, Some(nh)) => {
                oracle.insert(a, len, nh);
                if !present.contains(&(a, len)) {
                    present.push((a, len));
                }
                fib.insert(a, len, nh).expect("room in the pool")
            }
            (a, len, None) => {
                oracle.remove(a, len);
                fib.remove(a, len).expect("present route")
            }
        };
        let new_answers: Vec<u32> = all_probes
            .iter()
            .map(|&p| fib.lookup(p).unwrap_or(0))
            .collect();
        groups.resize(fib.groups().len(), 0);
        // Replay the writes on the old entries. Minimal: each entry written
        // once, each write a real change. Every intermediate state gives each
        // probe the old or the new answer (every step for small changes; for
        // big ones, about 500 evenly spaced steps).
        let mut written_root = vec![false; root.len()];
        let mut written_groups = vec![false; groups.len()];
        let mut written_sc = vec![false; sc.len()];
        let every = (w.len() / 500).max(1);
        for (step, wr) in w.iter().enumerate() {
            let (entries, written) = match wr.table {
                Table::Root => (&mut root, &mut written_root),
                Table::Groups => (&mut groups, &mut written_groups),
                Table::Shortcut => (&mut sc, &mut written_sc),
            };
            let i = wr.index as usize;
            assert!(!written[i], "entry written twice: {wr:?}");
            assert_ne!(entries[i], wr.value, "a write that changes nothing: {wr:?}");
            written[i] = true;
            entries[i] = wr.value;
            if step % every != 0 && step + 1 != w.len() {
                continue;
            }
            for (k, &p) in all_probes.iter().enumerate() {
                let mid = raw_lookup(shape, &root, &groups, &sc, p);
                let (old, new) = (old_answers[k], new_answers[k]);
                assert!(
                    mid == old || mid == new,
                    "step {step} of {}: {p:?} -> {mid}, not {old} or {new}",
                    w.len()
                );
            }
        }
        // Complete: the old entries plus the writes are the new entries.
        assert!(root == fib.root(), "writes give the new root");
        assert!(groups == fib.groups(), "writes give the new groups");
        assert!(sc == fib.shortcut(), "writes give the new shortcut");
        // The shortcut only saves reads: the plain walk agrees.
        for &p in &all_probes {
            assert_eq!(
                raw_lookup(shape, fib.root(), fib.groups(), &[], p),
                fib.lookup(p).unwrap_or(0),
                "walk and shortcut disagree on {p:?}"
            );
        }
        fib.release_quarantine();
        for (k, &p) in all_probes.iter().enumerate() {
            assert_eq!(new_answers[k], oracle.lookup(p), "lookup {p:?}");
        }
        let mut batch = vec![0u32; all_probes.len()];
        fib.lookup_batch(&all_probes, &mut batch);
        assert_eq!(batch, new_answers, "batch lookups");
    }
    assert_eq!(fib.len(), present.len());
}

const SMALL_V4: Shape = Shape {
    first: 8,
    stride: 4,
    groups: 4096,
    shortcut: 0,
    shortcut_levels: 0,
};
const SMALL_V6: Shape = Shape {
    first: 8,
    stride: 8,
    groups: 4096,
    shortcut: shortcut::MIN_PAIRS_LOG2,
    shortcut_levels: 2,
};

/// The real shape with the smallest shortcut: the checks copy and compare
/// the whole shortcut at every change, and its size changes nothing else.
fn small_shortcut(shape: Shape) -> Shape {
    Shape {
        shortcut: shortcut::MIN_PAIRS_LOG2,
        ..shape
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn ipv4_small_shape(ops in ops::<u32>(SMALL_V4, 0), probes in proptest::collection::vec(addr_strategy::<u32>(), 32)) {
        check::<u32, PrefixMap<Ipv4Net, u32>>(SMALL_V4, ops, probes);
    }

    #[test]
    fn ipv6_small_shape(ops in ops::<u128>(SMALL_V6, 0), probes in proptest::collection::vec(addr_strategy::<u128>(), 32)) {
        check::<u128, PrefixMap<Ipv6Net, u32>>(SMALL_V6, ops, probes);
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(12))]

    #[test]
    fn ipv4_dir_24_8(ops in ops::<u32>(Shape::IPV4, 12), probes in proptest::collection::vec(addr_strategy::<u32>(), 32)) {
        check::<u32, PrefixMap<Ipv4Net, u32>>(Shape::IPV4, ops, probes);
    }

    #[test]
    fn ipv6_16_4(ops in ops::<u128>(Shape::IPV6_COMPACT, 0), probes in proptest::collection::vec(addr_strategy::<u128>(), 32)) {
        check::<u128, PrefixMap<Ipv6Net, u32>>(small_shortcut(Shape::IPV6_COMPACT), ops, probes);
    }

    #[test]
    fn ipv6_24_8(ops in ops::<u128>(Shape::IPV6, 0), probes in proptest::collection::vec(addr_strategy::<u128>(), 32)) {
        check::<u128, PrefixMap<Ipv6Net, u32>>(small_shortcut(Shape::IPV6), ops, probes);
    }
}
