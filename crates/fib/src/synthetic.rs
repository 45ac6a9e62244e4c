//! Realistic full tables, seeded and reproducible (ChaCha8).
//!
//! IPv4: the global table's prefix-length mix (about 54% /24, 96% at /24 or
//! shorter, the rest /25../32 clustered a few to a /24 as more-specifics
//! are), unique prefixes in 1.0.0.0-223.255.255.255. IPv6: about 46% /48,
//! the rest mostly /29../44 and some /56, /64, generated as most are: inside
//! registry allocations (a /29../32 per organisation) under 2000::/3.
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::collections::HashSet;

/// (length, routes per million) of IPv4 prefixes; sums to 1,000,000. Close
/// to the global table (bgp.potaroo.net's length report): few short
/// prefixes, /24 the most, /22 and /23 next; plus 4% /25../32, which the
/// global table filters but a router's own table has.
#[rustfmt::skip]
pub const IPV4_LENGTHS: [(u8, u32); 25] = [
    (8, 16), (9, 12), (10, 30), (11, 90), (12, 280), (13, 550), (14, 1_000), (15, 1_800),
    (16, 13_000), (17, 8_000), (18, 14_000), (19, 25_000), (20, 40_000), (21, 45_000),
    (22, 130_000), (23, 141_222), (24, 540_000),
    (25, 6_000), (26, 7_000), (27, 6_000), (28, 5_000), (29, 5_000), (30, 4_000), (31, 1_000), (32, 6_000),
];

/// (length, routes per million) of IPv6 prefixes; sums to 1,000,000.
#[rustfmt::skip]
pub const IPV6_LENGTHS: [(u8, u32); 16] = [
    (29, 30_000), (32, 110_000), (33, 10_000), (34, 10_000), (35, 10_000), (36, 30_000),
    (40, 60_000), (42, 20_000), (44, 80_000), (45, 10_000), (46, 30_000), (47, 20_000),
    (48, 460_000), (52, 20_000), (56, 60_000), (64, 40_000),
];

fn pick_len(rng: &mut ChaCha8Rng, table: &[(u8, u32)]) -> u8 {
    let mut r = rng.gen_range(0..1_000_000u32);
    for &(len, share) in table {
        if r < share {
            return len;
        }
        r -= share;
    }
    table[table.len() - 1].0
}

/// `n` unique IPv4 routes `(address, length, next hop 1..=nexthops)`.
pub fn ipv4(n: usize, nexthops: u32, seed: u64) -> Vec<(u32, u8, u32)> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut seen: HashSet<(u32, u8)> = HashSet::with_capacity(n);
    let mut out = Vec::with_capacity(n);
    // /24s that hold more-specifics: a handful of long prefixes each.
    let mut hosts: Vec<u32> = Vec::new();
    while out.len() < n {
        let len = pick_len(&mut rng, &IPV4_LENGTHS);
        let addr = if len > 24 && !hosts.is_empty() && rng.gen_ratio(3, 4) {
            let base = hosts[rng.gen_range(0..hosts.len())];
            base | (rng.gen::<u32>() & 0xff)
        } else {
            let a = rng.gen_range(0x0100_0000u32..0xe000_0000);
            if len > 24 {
                hosts.push(a & 0xffff_ff00);
            }
            a
        };
        let p = (mask32(addr, len), len);
        if seen.insert(p) {
            out.push((p.0, p.1, rng.gen_range(1..=nexthops)));
        }
    }
    out
}

/// `n` routes of `ipv4(.., 1, seed)` a router can hold: unicast (first
/// octet 1 to 223, not 127) and touching none of `avoid` (a lab's own
/// networks, a range a benchmark changes), as "a.b.c.d/len" strings.
pub fn ipv4_routable(n: usize, seed: u64, avoid: &[(u32, u8)]) -> Vec<String> {
    let overlaps = |a: u32, l: u8, b: u32, m: u8| {
        let k = l.min(m);
        mask32(a, k) == mask32(b, k)
    };
    ipv4(n + n / 10 + 16, 1, seed)
        .into_iter()
        .filter(|&(a, l, _)| {
            let first = a >> 24;
            (1..224).contains(&first)
                && first != 127
                && !avoid.iter().any(|&(b, m)| overlaps(a, l, b, m))
        })
        .take(n)
        .map(|(a, l, _)| crate::dump::show(a, l))
        .collect()
}

/// `n` unique IPv6 routes.
pub fn ipv6(n: usize, nexthops: u32, seed: u64) -> Vec<(u128, u8, u32)> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut seen: HashSet<(u128, u8)> = HashSet::with_capacity(n);
    let mut out = Vec::with_capacity(n);
    // Allocations: 2000::/3 split into /29../32 blocks; each route falls in
    // one, so routes share their upper bits as real ones do.
    let blocks: Vec<u128> = (0..n / 6 + 1)
        .map(|_| {
            let top = 0x2000u128 | rng.gen_range(0..0x2000u128) & 0x1fff;
            (top << 112) | ((rng.gen::<u16>() as u128) << 96)
        })
        .collect();
    while out.len() < n {
        let len = pick_len(&mut rng, &IPV6_LENGTHS);
        let block = blocks[rng.gen_range(0..blocks.len())];
        // Bits below the block's /32 are random; the mask keeps `len` bits.
        let addr = block | ((rng.gen::<u64>() as u128) << 32);
        let p = (mask128(addr, len), len);
        if seen.insert(p) {
            out.push((p.0, p.1, rng.gen_range(1..=nexthops)));
        }
    }
    out
}

fn mask32(a: u32, len: u8) -> u32 {
    if len == 0 {
        0
    } else {
        a & (u32::MAX << (32 - len))
    }
}

fn mask128(a: u128, len: u8) -> u128 {
    if len == 0 {
        0
    } else {
        a & (u128::MAX << (128 - len))
    }
}

/// Random addresses for lookups: half inside the table's prefixes, half
/// anywhere (unrouted ones included).
pub fn lookup_keys<K: crate::Key>(routes: &[(K, u8, u32)], n: usize, seed: u64) -> Vec<K> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    (0..n)
        .map(|i| {
            let any: u128 = rng.gen();
            if i % 2 == 0 && !routes.is_empty() {
                let (a, len, _) = routes[rng.gen_range(0..routes.len())];
                let host = if len >= K::BITS {
                    0
                } else {
                    any >> (128 - (K::BITS - len) as u32)
                };
                K::from_u128(a.to_u128() | host)
            } else {
                K::from_u128(any >> (128 - K::BITS as u32))
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shares_sum_to_a_million() {
        assert_eq!(IPV4_LENGTHS.iter().map(|x| x.1).sum::<u32>(), 1_000_000);
        assert_eq!(IPV6_LENGTHS.iter().map(|x| x.1).sum::<u32>(), 1_000_000);
    }

    #[test]
    fn ipv4_mix_and_reproducibility() {
        let t = ipv4(200_000, 16, 1);
        assert_eq!(t, ipv4(200_000, 16, 1), "same seed, same table");
        assert_ne!(t, ipv4(200_000, 16, 2));
        let share =
            |f: &dyn Fn(u8) -> bool| t.iter().filter(|r| f(r.1)).count() as f64 / t.len() as f64;
        let s24 = share(&|l| l == 24);
        let le24 = share(&|l| l <= 24);
        assert!((0.50..0.56).contains(&s24), "/24 share {s24}");
        assert!((0.95..0.97).contains(&le24), "<= /24 share {le24}");
        let uniq: HashSet<_> = t.iter().map(|r| (r.0, r.1)).collect();
        assert_eq!(uniq.len(), t.len());
        assert!(t
            .iter()
            .all(|r| mask32(r.0, r.1) == r.0 && (1..=16).contains(&r.2)));
    }

    #[test]
    fn routable_ipv4_avoids_what_it_is_told() {
        let avoid = [(0xC612_0000u32, 15u8), (32 << 24, 4)];
        let r = ipv4_routable(20_000, 7, &avoid);
        assert_eq!(r.len(), 20_000);
        for p in &r {
            let (a, l) = p.split_once('/').unwrap();
            let a = u32::from(a.parse::<std::net::Ipv4Addr>().unwrap());
            let l: u8 = l.parse().unwrap();
            let first = a >> 24;
            assert!((1..224).contains(&first) && first != 127, "{p}");
            for &(b, m) in &avoid {
                let k = l.min(m);
                assert_ne!(mask32(a, k), mask32(b, k), "{p} touches {b:x}/{m}");
            }
        }
    }

    #[test]
    fn ipv6_mix() {
        let t = ipv6(50_000, 16, 1);
        let s48 = t.iter().filter(|r| r.1 == 48).count() as f64 / t.len() as f64;
        assert!((0.43..0.49).contains(&s48), "/48 share {s48}");
        assert!(t.iter().all(|r| r.0 >> 125 == 1), "inside 2000::/3");
    }
}
