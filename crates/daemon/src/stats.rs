//! `linerate stats`: the per-second view of a running router from another
//! process, per interface, in the spirit of `netstat -ihw1`, then the
//! totals by reason (its record: linerate_dataplane::record).
use anyhow::Result;
use linerate_dataplane::layout::{RouterCounters, REASONS, R_BRIDGED, R_FORWARDED, R_PASSES};
use linerate_dataplane::record;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// What to watch, and how.
pub struct Watch {
    /// The router's network namespace (its record's name; None: "default").
    pub netns: Option<String>,
    /// Each interface's frames by receive queue too.
    pub queues: bool,
    /// How long (None: until `stop`).
    pub seconds: Option<f64>,
    /// The totals as JSON at the end, no per-second lines.
    pub json: bool,
}

/// Watches the router `a` names: a line a second on stdout, then the
/// totals by reason.
pub fn watch(a: &Watch, stop: &AtomicBool) -> Result<()> {
    let name = a.netns.as_deref().unwrap_or("default");
    let (rec, map) = record::open(name)?;
    // --queues: each interface's frames by receive queue too.
    let rxq = if a.queues {
        if rec.rxq_map_id == 0 {
            anyhow::bail!(
                "--queues: the running linerate route (pid {}) counts no queues: it is older than --queues",
                rec.pid
            );
        }
        let map = libbpf_rs::MapHandle::from_map_id(rec.rxq_map_id)
            .map_err(|e| anyhow::anyhow!("cannot open the router's per-queue counters: {e}"))?;
        let counts = rec
            .interfaces
            .iter()
            .map(|(n, _)| linerate_host::queue_stats::rx_queue_count(a.netns.as_deref(), n))
            .collect::<Result<Vec<u32>>>()?;
        Some((map, counts))
    } else {
        None
    };
    let read_all = || -> Result<Vec<(RouterCounters, Vec<u64>)>> {
        rec.interfaces
            .iter()
            .enumerate()
            .map(|(k, (_, i))| {
                let queues = match &rxq {
                    Some((m, counts)) => record::read_queues(m, *i, counts[k])?,
                    None => Vec::new(),
                };
                Ok((record::read(&map, *i)?, queues))
            })
            .collect()
    };
    let first = read_all()?;
    let (start, mut tick, mut last) = (Instant::now(), Instant::now(), first.clone());
    if a.json {
        // Says when the window opened: what a caller sends after this line
        // is in the totals.
        let names: Vec<&str> = rec.interfaces.iter().map(|(n, _)| n.as_str()).collect();
        eprintln!("linerate stats: watching {}", names.join(", "));
    } else {
        let head: Vec<String> = rec
            .interfaces
            .iter()
            .map(|(n, _)| format!("{:^35}", format!("{n}: forwarded passed dropped")))
            .collect();
        println!("{}", head.join(" | "));
    }
    let end = a.seconds.map(Duration::from_secs_f64);
    while !stop.load(Ordering::Relaxed) && end.is_none_or(|e| start.elapsed() < e) {
        std::thread::sleep(Duration::from_millis(50));
        if tick.elapsed() < Duration::from_secs(1) {
            continue;
        }
        let now = read_all()?;
        let secs = tick.elapsed().as_secs_f64();
        tick = Instant::now();
        if !a.json {
            let cols: Vec<String> = now
                .iter()
                .zip(&last)
                .map(|((n, _), (l, _))| {
                    let delta = n.since(l);
                    let d = |i: std::ops::Range<usize>| {
                        delta.packets[i].iter().sum::<u64>() as f64 / secs
                    };
                    format!(
                        "{:>13.0} {:>10.0} {:>10.0}",
                        // (Bridged frames are forwarded too.)
                        d(R_FORWARDED..R_BRIDGED + 1),
                        d(R_PASSES),
                        delta.dropped() as f64 / secs
                    )
                })
                .collect();
            println!("{}", cols.join(" | "));
            if rxq.is_some() {
                let split: Vec<String> = rec
                    .interfaces
                    .iter()
                    .zip(now.iter().zip(&last))
                    .map(|((name, _), ((_, n), (_, l)))| {
                        let q: Vec<String> = n
                            .iter()
                            .zip(l)
                            .enumerate()
                            .map(|(q, (n, l))| {
                                format!("[Q{q} {:.0}K/s]", n.saturating_sub(*l) as f64 / secs / 1e3)
                            })
                            .collect();
                        format!("{name} {}", q.join(" "))
                    })
                    .collect();
                println!("  {}", split.join("  "));
            }
        }
        last = now;
    }
    // Totals over the run, per interface and reason.
    let secs = start.elapsed().as_secs_f64();
    let totals: Vec<serde_json::Value> = rec
        .interfaces
        .iter()
        .zip(last.iter().zip(&first))
        .map(|((name, idx), ((n, nq), (f, fq)))| {
            let t = n.since(f);
            let reasons: serde_json::Map<String, serde_json::Value> = REASONS
                .iter()
                .enumerate()
                .map(|(k, r)| {
                    (
                        r.to_string(),
                        serde_json::json!({"packets": t.packets[k], "bytes": t.bytes[k], "policed": t.policed[k]}),
                    )
                })
                .collect();
            let mut v = serde_json::json!({"interface": name, "ifindex": idx, "reasons": reasons});
            if rxq.is_some() {
                let q: Vec<u64> = nq
                    .iter()
                    .zip(fq)
                    .map(|(n, f)| n.saturating_sub(*f))
                    .collect();
                v["queues"] = q.into();
            }
            v
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
            let nonzero: Vec<String> = t["reasons"]
                .as_object()
                .unwrap()
                .iter()
                .filter(|(_, v)| v["packets"].as_u64().unwrap_or(0) > 0)
                .map(|(k, v)| format!("{k} {}", v["packets"]))
                .collect();
            let queues = match t.get("queues") {
                Some(q) => format!(" (by receive queue: {q})"),
                None => String::new(),
            };
            println!(
                "{} in {secs:.1} s: {}{queues}",
                t["interface"].as_str().unwrap_or("?"),
                if nonzero.is_empty() {
                    "nothing".into()
                } else {
                    nonzero.join(", ")
                }
            );
        }
    }
    Ok(())
}
