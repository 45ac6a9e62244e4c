//! `linerate bench fib`: build time, memory, single and batch lookup rates
//! and incremental update rate of our table, and the lookup rates of the
//! `prefix-trie` and `poptrie` crates on the same table and the same keys,
//! in the same run, repeated.
use ipnet::{Ipv4Net, Ipv6Net};
use linerate_fib::Key;
use linerate_fib::{synthetic, Family, Ipv6Layout, Stats};
use linerate_fib::{Fib, Shape};
use poptrie::Poptrie;
use prefix_trie::PrefixMap;
use serde::Serialize;
use std::hint::black_box;
use std::time::Instant;

#[derive(Clone, Debug)]
pub struct FibBench {
    pub family: Family,
    pub routes: usize,
    pub keys: usize,
    pub updates: usize,
    pub repeat: usize,
    pub seed: u64,
    pub ipv6_layout: Ipv6Layout,
}

#[derive(Clone, Debug, Serialize)]
pub struct Peer {
    pub name: String,
    pub lookups_per_sec: f64,
    pub build_seconds: f64,
}

/// One run's figures.
#[derive(Clone, Debug, Serialize)]
pub struct Run {
    pub build_seconds: f64,
    pub lookups_per_sec: f64,
    pub batch_lookups_per_sec: f64,
    pub updates_per_sec: f64,
    pub peers: Vec<Peer>,
}

/// Medians over the runs in the fields the issue names; every run kept.
#[derive(Clone, Debug, Serialize)]
pub struct FibBenchReport {
    pub family: Family,
    pub routes: usize,
    pub build_seconds: f64,
    /// Fast-path bytes (root and groups in use) after the build.
    pub memory_bytes: u64,
    pub lookups_per_sec: f64,
    pub batch_lookups_per_sec: f64,
    pub updates_per_sec: f64,
    pub peers: Vec<Peer>,
    pub keys: usize,
    pub repeat: usize,
    pub stats: Stats,
    pub runs: Vec<Run>,
}

/// Lookups per second of `f` over `keys`, best of a few passes (the first
/// one warms the caches and the branch predictors as much as a router's
/// steady state would).
fn rate(keys: usize, mut f: impl FnMut() -> u64) -> f64 {
    let mut best = f64::MAX;
    for _ in 0..3 {
        let t = Instant::now();
        black_box(f());
        best = best.min(t.elapsed().as_secs_f64());
    }
    keys as f64 / best
}

/// The peers' lookups on the same routes and keys. `net` makes the
/// prefix-trie crate's prefix type from an address and a length.
fn measure_peers<K, N>(routes: &[(K, u8, u32)], keys: &[K], net: impl Fn(K, u8) -> N) -> Vec<Peer>
where
    K: Key + poptrie::Address,
    N: prefix_trie::Prefix,
{
    let t = Instant::now();
    let mut pt: PrefixMap<N, u32> = PrefixMap::new();
    for &(a, l, nh) in routes {
        pt.insert(net(a, l), nh);
    }
    let pt_build = t.elapsed().as_secs_f64();
    // Poptrie's own bulk build (its insert is slow by design).
    let t = Instant::now();
    let pop: Poptrie<(K, u8), u32> = routes.iter().map(|&(a, l, nh)| ((a, l), nh)).collect();
    let pop_build = t.elapsed().as_secs_f64();
    let hosts: Vec<N> = keys.iter().map(|&k| net(k, <K as Key>::BITS)).collect();
    vec![
        Peer {
            name: "prefix-trie".into(),
            build_seconds: pt_build,
            lookups_per_sec: rate(keys.len(), || {
                hosts
                    .iter()
                    .map(|n| pt.get_lpm(n).map_or(0, |(_, &v)| v as u64))
                    .sum()
            }),
        },
        Peer {
            name: "poptrie".into(),
            build_seconds: pop_build,
            lookups_per_sec: rate(keys.len(), || {
                keys.iter()
                    .map(|&k| pop.lookup(k).map_or(0, |&v| v as u64))
                    .sum()
            }),
        },
    ]
}

/// What the bench needs of an address family.
trait Family2: Key + poptrie::Address {
    fn shape(ipv6: Ipv6Layout) -> Shape;
    fn routes(n: usize, seed: u64) -> Vec<(Self, u8, u32)>;
    fn peers(routes: &[(Self, u8, u32)], keys: &[Self]) -> Vec<Peer>;
}

impl Family2 for u32 {
    fn shape(_: Ipv6Layout) -> Shape {
        Shape::IPV4
    }
    fn routes(n: usize, seed: u64) -> Vec<(u32, u8, u32)> {
        synthetic::ipv4(n, 64, seed)
    }
    fn peers(routes: &[(u32, u8, u32)], keys: &[u32]) -> Vec<Peer> {
        measure_peers(routes, keys, |a, l| {
            Ipv4Net::new(a.into(), l).expect("valid")
        })
    }
}

impl Family2 for u128 {
    fn shape(ipv6: Ipv6Layout) -> Shape {
        ipv6.shape()
    }
    fn routes(n: usize, seed: u64) -> Vec<(u128, u8, u32)> {
        synthetic::ipv6(n, 64, seed)
    }
    fn peers(routes: &[(u128, u8, u32)], keys: &[u128]) -> Vec<Peer> {
        measure_peers(routes, keys, |a, l| {
            Ipv6Net::new(a.into(), l).expect("valid")
        })
    }
}

pub fn run(b: &FibBench, mut progress: impl FnMut(&str)) -> anyhow::Result<FibBenchReport> {
    match b.family {
        Family::Ipv4 => run_family::<u32>(b, &mut progress),
        Family::Ipv6 => run_family::<u128>(b, &mut progress),
    }
}

fn run_family<K: Family2>(
    b: &FibBench,
    progress: &mut dyn FnMut(&str),
) -> anyhow::Result<FibBenchReport> {
    let routes = K::routes(b.routes, b.seed);
    let keys = synthetic::lookup_keys(&routes, b.keys, b.seed ^ 0x5eed);
    // Changes: withdraw a present route, announce a new one, alternately.
    let fresh = K::routes(b.routes + b.updates / 2 + 1, b.seed ^ 0xfeed);
    let present: std::collections::HashSet<(K, u8)> = routes.iter().map(|r| (r.0, r.1)).collect();
    let announce: Vec<(K, u8, u32)> = fresh
        .into_iter()
        .filter(|r| !present.contains(&(r.0, r.1)))
        .take((b.updates / 2).min(routes.len()))
        .collect();
    // Distinct routes to withdraw, in a seeded random order.
    let withdraw: Vec<usize> = {
        use rand::seq::SliceRandom;
        use rand::SeedableRng;
        let mut idx: Vec<usize> = (0..routes.len()).collect();
        idx.shuffle(&mut rand_chacha::ChaCha8Rng::seed_from_u64(b.seed ^ 0xd1ce));
        idx.truncate(announce.len());
        idx
    };
    let mut runs = Vec::new();
    let mut last_stats = None;
    for i in 0..b.repeat {
        let t = Instant::now();
        let mut fib: Fib<K> = Fib::new(K::shape(b.ipv6_layout)).without_concurrent_readers();
        fib.bulk_load(&routes)?;
        let build_seconds = t.elapsed().as_secs_f64();
        let lookups_per_sec = rate(keys.len(), || {
            keys.iter()
                .map(|&k| fib.lookup(k).unwrap_or(0) as u64)
                .sum()
        });
        let mut out = vec![0u32; keys.len()];
        let batch_lookups_per_sec = rate(keys.len(), || {
            fib.lookup_batch(&keys, &mut out);
            out.iter().map(|&v| v as u64).sum()
        });
        last_stats = Some(fib.stats());
        let t = Instant::now();
        let mut writes = 0usize;
        for (&k, r) in withdraw.iter().zip(&announce) {
            let (a, l, _) = routes[k];
            writes += fib.remove(a, l)?.len();
            writes += fib.insert(r.0, r.1, r.2)?.len();
        }
        black_box(writes);
        let updates_per_sec = (announce.len() * 2) as f64 / t.elapsed().as_secs_f64();
        let peers = K::peers(&routes, &keys);
        progress(&format!(
            "run {}/{}: build {:.3} s, lookups {:.1} M/s, batch {:.1} M/s, updates {:.2} M/s, {}",
            i + 1,
            b.repeat,
            build_seconds,
            lookups_per_sec / 1e6,
            batch_lookups_per_sec / 1e6,
            updates_per_sec / 1e6,
            peers
                .iter()
                .map(|p| format!("{} {:.1} M/s", p.name, p.lookups_per_sec / 1e6))
                .collect::<Vec<_>>()
                .join(", ")
        ));
        runs.push(Run {
            build_seconds,
            lookups_per_sec,
            batch_lookups_per_sec,
            updates_per_sec,
            peers,
        });
    }
    let col = |f: &dyn Fn(&Run) -> f64| crate::median(&runs.iter().map(f).collect::<Vec<_>>());
    let stats = last_stats.expect("at least one run");
    let peer_names: Vec<String> = runs[0].peers.iter().map(|p| p.name.clone()).collect();
    Ok(FibBenchReport {
        family: b.family,
        routes: routes.len(),
        build_seconds: col(&|r| r.build_seconds),
        memory_bytes: stats.fast_path_bytes,
        lookups_per_sec: col(&|r| r.lookups_per_sec),
        batch_lookups_per_sec: col(&|r| r.batch_lookups_per_sec),
        updates_per_sec: col(&|r| r.updates_per_sec),
        peers: peer_names
            .iter()
            .enumerate()
            .map(|(i, n)| Peer {
                name: n.clone(),
                lookups_per_sec: col(&|r| r.peers[i].lookups_per_sec),
                build_seconds: col(&|r| r.peers[i].build_seconds),
            })
            .collect(),
        keys: keys.len(),
        repeat: b.repeat,
        stats,
        runs,
    })
}

impl std::fmt::Display for FibBenchReport {
    /// As `linerate bench fib` prints its summary.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let r = self;
        let m = |v: f64| v / 1e6;
        writeln!(
            f,
            "\n{:?} {} routes, {} keys, median of {} runs:",
            r.family, r.routes, r.keys, r.repeat
        )?;
        writeln!(f, "  build             {:>8.3} s", r.build_seconds)?;
        writeln!(
            f,
            "  memory            {:>8.1} MiB fast path ({:.1} MiB of arena space reserved)",
            r.memory_bytes as f64 / 1048576.0,
            r.stats.map_bytes as f64 / 1048576.0
        )?;
        writeln!(f, "  lookups           {:>8.1} M/s", m(r.lookups_per_sec))?;
        writeln!(
            f,
            "  batch lookups     {:>8.1} M/s",
            m(r.batch_lookups_per_sec)
        )?;
        writeln!(f, "  updates           {:>8.2} M/s", m(r.updates_per_sec))?;
        for p in &r.peers {
            writeln!(
                f,
                "  {:<17} {:>8.1} M/s lookups (our batch is {:.2}x), built in {:.3} s",
                p.name,
                m(p.lookups_per_sec),
                r.batch_lookups_per_sec / p.lookups_per_sec,
                p.build_seconds
            )?;
        }
        Ok(())
    }
}
