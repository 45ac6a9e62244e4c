//! `linerate fib stats` and `linerate bench fib`.
use crate::cli::{BenchFibArgs, FibCmd, FibStatsArgs};
use anyhow::{bail, Context, Result};
use linerate_bench::fib::{self as bench, FibBench};
use linerate_fib::Family;
use linerate_fib::{dump, synthetic, Fib, Key, Shape, Stats};

pub fn run(cmd: FibCmd) -> Result<()> {
    match cmd {
        FibCmd::Stats(a) => stats(a),
    }
}

fn load<K: Key>(
    a: &FibStatsArgs,
    shape: Shape,
    generate: fn(usize, u32, u64) -> Vec<linerate_fib::Route<K>>,
) -> Result<Stats> {
    let routes = match &a.file {
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("--file: cannot read {}", path.display()))?;
            dump::parse::<K>(&text, &path.display().to_string())?.routes
        }
        None => generate(default_routes(a), 64, a.seed),
    };
    let mut fib: Fib<K> = Fib::new(shape).without_concurrent_readers();
    fib.bulk_load(&routes).map_err(|e| anyhow::anyhow!("{e}"))?;
    Ok(fib.stats())
}

/// --routes, or a full table of the family.
fn default_routes(a: &FibStatsArgs) -> usize {
    a.routes.unwrap_or(match a.family {
        Family::Ipv4 => 1_000_000,
        Family::Ipv6 => 200_000,
    })
}

fn stats(a: FibStatsArgs) -> Result<()> {
    if a.file.is_none() && default_routes(&a) == 0 {
        bail!("--routes: at least 1");
    }
    let s = match a.family {
        Family::Ipv4 => load::<u32>(&a, Shape::IPV4, synthetic::ipv4)?,
        Family::Ipv6 => load::<u128>(&a, a.fib6.layout.shape(), synthetic::ipv6)?,
    };
    if a.json {
        println!("{}", serde_json::to_string_pretty(&s)?);
        return Ok(());
    }
    let mib = |b: u64| b as f64 / (1024.0 * 1024.0);
    println!("{} table: {} routes", s.family, s.routes);
    println!(
        "  layout: {} bits, then groups of {} bits ({} entries); at most {} reads per lookup in this table",
        s.first_level_bits,
        s.stride_bits,
        1u32 << s.stride_bits,
        s.max_reads
    );
    println!(
        "  root: {} entries, {} routed ({:.1}%)",
        s.root_entries,
        s.root_filled,
        100.0 * s.root_filled as f64 / s.root_entries as f64
    );
    println!(
        "  groups: {} in use of {} ({:.1}%), {} quarantined; per level: {}",
        s.groups_in_use,
        s.groups_capacity,
        100.0 * s.groups_in_use as f64 / s.groups_capacity as f64,
        s.groups_quarantined,
        s.groups_per_level[1..]
            .iter()
            .enumerate()
            .filter(|(_, &n)| n > 0)
            .map(|(i, n)| format!("L{}:{n}", i + 1))
            .collect::<Vec<_>>()
            .join(" ")
    );
    if s.shortcut_slots > 0 {
        let held: u64 = s.shortcut_held.iter().map(|&(_, n)| n).sum();
        let per_length: Vec<String> = s
            .shortcut_held
            .iter()
            .map(|&(bits, n)| format!("{n} /{bits}s"))
            .collect();
        println!(
            "  shortcut: {} held in {} slots ({:.1}% full)",
            per_length.join(" + "),
            s.shortcut_slots,
            100.0 * held as f64 / s.shortcut_slots as f64
        );
    }
    println!(
        "  memory: fast path {:.1} MiB in use (arena space reserved {:.1} MiB, allocated as written), control plane {:.1} MiB",
        mib(s.fast_path_bytes),
        mib(s.map_bytes),
        mib(s.control_bytes)
    );
    println!("  prefix lengths:");
    for chunk in s.prefix_lengths.chunks(6) {
        println!(
            "   {}",
            chunk
                .iter()
                .map(|(l, n)| format!("/{l:<3} {n:>8}"))
                .collect::<Vec<_>>()
                .join("  ")
        );
    }
    Ok(())
}

pub fn bench(a: BenchFibArgs) -> Result<()> {
    if a.repeat == 0 || a.keys == 0 {
        bail!("--repeat and --keys: at least 1");
    }
    let routes = a.routes.unwrap_or(match a.family {
        Family::Ipv4 => 1_000_000,
        Family::Ipv6 => 200_000,
    });
    if routes == 0 {
        bail!("--routes: at least 1");
    }
    let b = FibBench {
        family: a.family,
        routes,
        keys: a.keys,
        updates: a.updates,
        repeat: a.repeat,
        seed: a.seed,
        ipv6_layout: a.fib6.layout,
    };
    let json = a.json;
    let r = bench::run(&b, |line| {
        if !json {
            println!("{line}");
        }
    })?;
    if json {
        println!("{}", serde_json::to_string_pretty(&r)?);
        return Ok(());
    }
    let m = |v: f64| v / 1e6;
    println!(
        "\n{:?} {} routes, {} keys, median of {} runs:",
        r.family, r.routes, r.keys, r.repeat
    );
    println!("  build             {:>8.3} s", r.build_seconds);
    println!(
        "  memory            {:>8.1} MiB fast path ({:.1} MiB of arena space reserved)",
        r.memory_bytes as f64 / 1048576.0,
        r.stats.map_bytes as f64 / 1048576.0
    );
    println!("  lookups           {:>8.1} M/s", m(r.lookups_per_sec));
    println!(
        "  batch lookups     {:>8.1} M/s",
        m(r.batch_lookups_per_sec)
    );
    println!("  updates           {:>8.2} M/s", m(r.updates_per_sec));
    for p in &r.peers {
        println!(
            "  {:<17} {:>8.1} M/s lookups (our batch is {:.2}x), built in {:.3} s",
            p.name,
            m(p.lookups_per_sec),
            r.batch_lookups_per_sec / p.lookups_per_sec,
            p.build_seconds
        );
    }
    Ok(())
}
