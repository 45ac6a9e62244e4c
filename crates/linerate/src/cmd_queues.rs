//! `linerate queues`: frames per receive queue of a running router's
//! interfaces (issue 25), a line a second in the spirit of FreeBSD's
//! nic-queue-usage (`[Q0 346K/s] [Q1 343K/s] [QT 689K/s -> 680K/s]`:
//! each queue, then the interface's total in and what the fast path
//! forwarded of it), then the totals over the window. Read from the fast
//! path's counters (router_rxq, router_stats): only interfaces linerate is
//! attached to.
use crate::cli::QueuesArgs;
use anyhow::{anyhow, bail, Result};
use linerate_router::layout::{RouterCounters, R_FORWARDED};
use linerate_router::stats;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

/// One interface's counts at one moment.
#[derive(Clone)]
struct Reading {
    queues: Vec<u64>,
    /// Every frame the fast path saw on it (all reasons), and forwarded.
    seen: u64,
    forwarded: u64,
}

pub fn run(a: QueuesArgs) -> Result<()> {
    linerate_host::privilege::require_root("linerate queues")?;
    if let Some(s) = a.seconds {
        if !(s > 0.0 && s.is_finite()) {
            bail!("-t: seconds must be a positive number, got {s}");
        }
    }
    let name = a.netns.as_deref().unwrap_or("default");
    let (rec, stats_map) = stats::open(name)?;
    if rec.rxq_map_id == 0 {
        bail!("the running linerate route (pid {}) counts no queues: it is older than linerate queues", rec.pid);
    }
    let rxq_map = libbpf_rs::MapHandle::from_map_id(rec.rxq_map_id)
        .map_err(|e| anyhow!("cannot open the router's per-queue counters: {e}"))?;
    let mut watched = Vec::new();
    for i in &a.interfaces {
        let Some((_, idx)) = rec.interfaces.iter().find(|(n, _)| n == i) else {
            let attached: Vec<&str> = rec.interfaces.iter().map(|(n, _)| n.as_str()).collect();
            bail!(
                "-i: linerate route is not attached to {i} (it routes between {}); the kernel's own per-queue statistics are not read yet",
                attached.join(", ")
            );
        };
        watched.push((i.clone(), *idx, rx_queues(a.netns.as_deref(), i)?));
    }
    let read = || -> Result<Vec<Reading>> {
        watched
            .iter()
            .map(|(_, idx, n)| {
                let c: RouterCounters = stats::read(&stats_map, *idx)?;
                Ok(Reading {
                    queues: stats::read_queues(&rxq_map, *idx, *n)?,
                    seen: c.packets.iter().sum(),
                    forwarded: c.packets[R_FORWARDED],
                })
            })
            .collect()
    };
    let first = read()?;
    let (start, mut tick, mut last) = (Instant::now(), Instant::now(), first.clone());
    let stop = crate::stop::flag();
    if a.json {
        eprintln!("linerate queues: watching {}", a.interfaces.join(", "));
    }
    let end = a.seconds.map(Duration::from_secs_f64);
    while !stop.load(Ordering::Relaxed) && end.is_none_or(|e| start.elapsed() < e) {
        std::thread::sleep(Duration::from_millis(50));
        if tick.elapsed() < Duration::from_secs(1) {
            continue;
        }
        let now = read()?;
        let secs = tick.elapsed().as_secs_f64();
        tick = Instant::now();
        if !a.json {
            let rate = |n: u64| format!("{:.0}K/s", n as f64 / secs / 1e3);
            let lines: Vec<String> = watched
                .iter()
                .zip(now.iter().zip(&last))
                .map(|((ifname, _, _), (n, l))| {
                    let queues: Vec<String> = n
                        .queues
                        .iter()
                        .zip(&l.queues)
                        .enumerate()
                        .map(|(q, (a, b))| format!("[Q{q} {}]", rate(a - b)))
                        .collect();
                    format!(
                        "{ifname} {} [QT {} -> {}]",
                        queues.join(" "),
                        rate(n.seen - l.seen),
                        rate(n.forwarded - l.forwarded)
                    )
                })
                .collect();
            println!("{}", lines.join("  "));
        }
        last = now;
    }
    let secs = start.elapsed().as_secs_f64();
    let totals: Vec<serde_json::Value> = watched
        .iter()
        .zip(last.iter().zip(&first))
        .map(|((ifname, idx, _), (n, f))| {
            let queues: Vec<u64> = n.queues.iter().zip(&f.queues).map(|(a, b)| a - b).collect();
            serde_json::json!({
                "interface": ifname,
                "ifindex": idx,
                "queues": queues,
                "seen": n.seen - f.seen,
                "forwarded": n.forwarded - f.forwarded,
            })
        })
        .collect();
    if a.json {
        println!(
            "{}",
            serde_json::to_string_pretty(
                &serde_json::json!({"seconds": secs, "pid": rec.pid, "interfaces": totals})
            )?
        );
    } else {
        for t in &totals {
            println!(
                "{} in {secs:.1} s: queues {}, {} in, {} forwarded",
                t["interface"].as_str().unwrap_or("?"),
                t["queues"],
                t["seen"],
                t["forwarded"]
            );
        }
    }
    Ok(())
}

/// How many receive queues interface `ifname` has (`ip -d -j link`'s
/// num_rx_queues), in namespace `netns`.
fn rx_queues(netns: Option<&str>, ifname: &str) -> Result<u32> {
    let out = linerate_host::cmd::ip(netns, &["-d", "-j", "link", "show", "dev", ifname])?;
    let v: serde_json::Value = serde_json::from_str(&out)?;
    v[0]["num_rx_queues"]
        .as_u64()
        .map(|n| n as u32)
        .ok_or_else(|| anyhow!("{ifname}: ip link shows no num_rx_queues"))
}
