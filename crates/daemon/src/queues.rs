//! `linerate queues`: frames per receive queue of interfaces, a line a
//! second in the spirit of FreeBSD's nic-queue-usage (`[Q0 346K/s]
//! [Q1 343K/s] [QT 689K/s -> 680K/s]`: each queue, then the interface's
//! total in and out), then the totals over the window. An
//! interface a running `linerate route` is attached to is read from the
//! fast path's counters (router_rxq, router_stats: out is what the fast
//! path forwarded of what came in); any other from the kernel's per-queue
//! statistics (`ethtool -S`) and link counters (out is what the interface
//! sent).
use anyhow::{anyhow, bail, Result};
use libbpf_rs::MapHandle;
use linerate_dataplane::layout::{RouterCounters, R_BRIDGED, R_FORWARDED};
use linerate_dataplane::record;
use linerate_host::queue_stats;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// One interface's counts at one moment.
#[derive(Clone)]
struct Reading {
    queues: Vec<u64>,
    /// Every frame that came in on it (the fast path: all reasons).
    seen: u64,
    /// The fast path: what it forwarded of `seen`; the kernel: what the
    /// interface sent.
    out: u64,
}

/// Where an interface's counts come from.
enum Source<'a> {
    FastPath {
        stats_map: &'a MapHandle,
        rxq_map: &'a MapHandle,
        ifindex: u32,
        queues: u32,
    },
    Kernel,
}

impl Source<'_> {
    fn name(&self) -> &'static str {
        match self {
            Source::FastPath { .. } => "linerate",
            Source::Kernel => "kernel",
        }
    }

    fn read(&self, netns: Option<&str>, ifname: &str) -> Result<Reading> {
        match self {
            Source::FastPath {
                stats_map,
                rxq_map,
                ifindex,
                queues,
            } => {
                let c: RouterCounters = record::read(stats_map, *ifindex)?;
                Ok(Reading {
                    queues: record::read_queues(rxq_map, *ifindex, *queues)?,
                    seen: c.packets.iter().sum(),
                    out: c.packets[R_FORWARDED] + c.packets[R_BRIDGED],
                })
            }
            Source::Kernel => {
                let (seen, out) = queue_stats::link_packets(netns, ifname)?;
                Ok(Reading {
                    queues: queue_stats::rx_queues(netns, ifname)?.queues,
                    seen,
                    out,
                })
            }
        }
    }
}

/// What to watch, and how.
pub struct Watch {
    pub interfaces: Vec<String>,
    /// Their network namespace (a router's record is found by it).
    pub netns: Option<String>,
    /// How long (None: until `stop`).
    pub seconds: Option<f64>,
    /// The totals as JSON at the end, no per-second lines.
    pub json: bool,
}

/// Watches `a`'s interfaces, a line a second on stdout, then the totals.
pub fn watch(a: &Watch, stop: &AtomicBool) -> Result<()> {
    let name = a.netns.as_deref().unwrap_or("default");
    // No router running here: every interface is the kernel's.
    let router = record::open(name).ok();
    let rxq_map = match &router {
        Some((rec, _)) if rec.rxq_map_id == 0 => bail!(
            "the running linerate route (pid {}) counts no queues: it is older than linerate queues",
            rec.pid
        ),
        Some((rec, _)) => Some(
            MapHandle::from_map_id(rec.rxq_map_id)
                .map_err(|e| anyhow!("cannot open the router's per-queue counters: {e}"))?,
        ),
        None => None,
    };
    let netns = a.netns.as_deref();
    let mut watched: Vec<(String, Source)> = Vec::new();
    for i in &a.interfaces {
        let attached = router
            .as_ref()
            .and_then(|(rec, map)| Some((rec.interfaces.iter().find(|(n, _)| n == i)?, map)));
        let source = match (attached, &rxq_map) {
            (Some(((_, idx), stats_map)), Some(rxq_map)) => Source::FastPath {
                stats_map,
                rxq_map,
                ifindex: *idx,
                queues: queue_stats::rx_queue_count(netns, i)?,
            },
            _ => Source::Kernel,
        };
        watched.push((i.clone(), source));
    }
    let read = || -> Result<Vec<Reading>> {
        watched
            .iter()
            .map(|(ifname, source)| source.read(netns, ifname))
            .collect()
    };
    let first = read()?;
    let (start, mut tick, mut last) = (Instant::now(), Instant::now(), first.clone());
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
                .map(|((ifname, _), (n, l))| {
                    let queues: Vec<String> = n
                        .queues
                        .iter()
                        .zip(&l.queues)
                        .enumerate()
                        .map(|(q, (a, b))| format!("[Q{q} {}]", rate(a.saturating_sub(*b))))
                        .collect();
                    format!(
                        "{ifname} {} [QT {} -> {}]",
                        queues.join(" "),
                        rate(n.seen.saturating_sub(l.seen)),
                        rate(n.out.saturating_sub(l.out))
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
        .map(|((ifname, source), (n, f))| {
            let queues: Vec<u64> = n
                .queues
                .iter()
                .zip(&f.queues)
                .map(|(a, b)| a.saturating_sub(*b))
                .collect();
            let out = if matches!(source, Source::FastPath { .. }) {
                "forwarded"
            } else {
                "sent"
            };
            serde_json::json!({
                "interface": ifname,
                "source": source.name(),
                "queues": queues,
                "seen": n.seen.saturating_sub(f.seen),
                out: n.out.saturating_sub(f.out),
            })
        })
        .collect();
    if a.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&serde_json::json!({
                "seconds": secs,
                "router_pid": router.as_ref().map(|(rec, _)| rec.pid),
                "interfaces": totals
            }))?
        );
    } else {
        for (t, (_, source)) in totals.iter().zip(&watched) {
            let out = match source {
                Source::FastPath { .. } => format!("{} forwarded by linerate", t["forwarded"]),
                Source::Kernel => format!("{} sent (kernel counters)", t["sent"]),
            };
            println!(
                "{} in {secs:.1} s: queues {}, {} in, {out}",
                t["interface"].as_str().unwrap_or("?"),
                t["queues"],
                t["seen"],
            );
        }
    }
    Ok(())
}
