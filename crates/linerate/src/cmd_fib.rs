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
    let routes = match (&a.file, &a.table) {
        (Some(path), _) => {
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("--file: cannot read {}", path.display()))?;
            dump::parse::<K>(&text, &path.display().to_string())?.routes
        }
        (None, Some(table)) => {
            let family = if K::BITS == 32 { "-4" } else { "-6" };
            let text = linerate_host::cmd::ip(None, &[family, "route", "show", "table", table])
                .with_context(|| format!("--table {table}: cannot list the kernel's table"))?;
            dump::parse::<K>(&dump::kernel_table(&text), &format!("table {table}"))?.routes
        }
        (None, None) => generate(default_routes(a), 64, a.seed),
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
    if a.file.is_none() && a.table.is_none() && default_routes(&a) == 0 {
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
    print!("{s}");
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
    print!("{r}");
    Ok(())
}
