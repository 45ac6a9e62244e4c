//! `linerate route`.
use crate::cli::RouteArgs;
use crate::stop;
use anyhow::Result;
use linerate_bpf::loader::XdpMode;
use linerate_daemon::config;
use linerate_daemon::metrics::MetricsServer;
use linerate_daemon::run::{run as route, Ended, RouteOptions};
use std::sync::atomic::{AtomicBool, Ordering};

pub fn options(
    interfaces: &[String],
    mode: &str,
    ipv6: linerate_fib::Ipv6Layout,
    netns: Option<&str>,
    nice: i32,
) -> RouteOptions {
    RouteOptions {
        nice,
        status: Default::default(),
        // systemd's: a stop leaves the fast path in its fd store.
        service_manager: std::env::var_os("NOTIFY_SOCKET").is_some(),
        ipv6,
        record: netns.unwrap_or("default").to_string(),
        interfaces: interfaces.to_vec(),
        mode: if mode == "generic" {
            XdpMode::Generic
        } else {
            XdpMode::Native
        },
    }
}

pub fn run(a: RouteArgs) -> Result<()> {
    // The file, if any, read and checked whole before anything changes.
    let path = match (&a.config, a.interfaces.is_empty()) {
        (Some(p), _) => Some(p.clone()),
        (None, true) if std::path::Path::new(config::DEFAULT_PATH).exists() => {
            Some(config::DEFAULT_PATH.into())
        }
        (None, _) => None,
    };
    let loaded = path.as_deref().map(config::Loaded::read).transpose()?;
    let c = config::merge(
        loaded.as_ref().map(|l| l.config.clone()),
        config::Overrides {
            interfaces: a.interfaces,
            mode: a.mode,
            fib6: a.fib6,
            netns: a.netns,
            nice: a.nice,
            quiet: a.quiet,
            metrics: a.metrics,
            log_level: a.log_level,
        },
    )?;
    if let Some(l) = linerate_daemon::log::level_of(&c.log_level) {
        linerate_daemon::log::set_level(l);
    }
    linerate_host::privilege::require_root("linerate route")?;
    if let Some(ns) = &c.netns {
        linerate_host::netns::enter_for_good(ns)?;
    }
    // The file's interfaces, named at their line, when the flags did not
    // replace them.
    if let Some(l) = &loaded {
        if l.config.interfaces == c.interfaces && l.config.netns == c.netns {
            l.check_interfaces()?;
        }
    }
    let opts = options(&c.interfaces, &c.mode, c.fib6, c.netns.as_deref(), c.nice);
    // Bound before anything is attached: a taken address is refused with
    // nothing changed.
    let _metrics = c
        .metrics
        .map(|addr| MetricsServer::bind(addr, &opts.record, opts.status.clone()))
        .transpose()?;
    if let Some(m) = &_metrics {
        tracing::info!("metrics at http://{}/metrics", m.addr);
    }
    let (ready, done) = (AtomicBool::new(false), AtomicBool::new(false));
    let quiet = c.quiet;
    let routed = std::thread::scope(|s| {
        s.spawn(|| tell_service_manager_when(&ready, &done, &c.interfaces));
        let r = route(&opts, stop::flag(), &ready, |s| {
            if !quiet {
                println!("{}", s.line());
            }
        });
        done.store(true, Ordering::SeqCst);
        r
    });
    let _ = sd_notify::notify(&[sd_notify::NotifyState::Stopping]);
    match routed? {
        Ended::Detached => tracing::info!("detached from {}", c.interfaces.join(", ")),
        Ended::HandedOver(pid) => tracing::info!(
            "handed the fast path on {} over to pid {pid}",
            c.interfaces.join(", ")
        ),
        Ended::Stored => tracing::info!(
            "left the fast path on {} with the service manager: the service's next start takes it over, a stop detaches it",
            c.interfaces.join(", ")
        ),
    }
    Ok(())
}

/// Under systemd (`Type=notify`, NOTIFY_SOCKET set): says READY=1 once the
/// router is attached and has mirrored the kernel's tables, or nothing if
/// it ends first. Without NOTIFY_SOCKET, a no-op.
fn tell_service_manager_when(ready: &AtomicBool, done: &AtomicBool, interfaces: &[String]) {
    while !done.load(Ordering::SeqCst) {
        if ready.load(Ordering::SeqCst) {
            let status = format!("routing between {}", interfaces.join(", "));
            if let Err(e) = sd_notify::notify(&[
                sd_notify::NotifyState::Ready,
                sd_notify::NotifyState::Status(&status),
            ]) {
                tracing::warn!("cannot tell the service manager it is ready: {e}");
            }
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
}

/// `linerate check-config`: the file read and checked as `linerate route`
/// would, its interfaces looked up in its namespace; nothing changed.
pub fn check_config(a: crate::cli::CheckConfigArgs) -> Result<()> {
    let path = a.file.unwrap_or_else(|| config::DEFAULT_PATH.into());
    let loaded = config::Loaded::read(&path)?;
    let c = &loaded.config;
    match &c.netns {
        Some(ns) => {
            let _in = linerate_host::netns::NetnsGuard::enter(ns)
                .map_err(|e| anyhow::anyhow!("{}: netns: {ns}: {e:#}", path.display()))?;
            loaded.check_interfaces()?;
        }
        None => loaded.check_interfaces()?,
    }
    println!(
        "{}: ok: route between {} ({} XDP, IPv6 FIB {}, nice {}{}{})",
        path.display(),
        c.interfaces.join(", "),
        c.mode,
        linerate_fib::Ipv6Layout::CHOICES
            .iter()
            .find(|(_, l)| *l == c.fib6)
            .map_or("?", |(n, _)| n),
        c.nice,
        c.netns
            .as_deref()
            .map(|n| format!(", namespace {n}"))
            .unwrap_or_default(),
        c.metrics
            .map(|m| format!(", metrics at http://{m}/metrics"))
            .unwrap_or_default()
    );
    Ok(())
}

/// `linerate stats`: the per-second view of a running router, per
/// interface, in the spirit of `netstat -ihw1`, then the totals by reason.
pub fn stats(a: crate::cli::StatsArgs) -> Result<()> {
    use linerate_dataplane::layout::{RouterCounters, REASONS, R_DROPS, R_FORWARDED, R_PASSES};
    use linerate_dataplane::record;
    use std::sync::atomic::Ordering;
    use std::time::{Duration, Instant};
    linerate_host::privilege::require_root("linerate stats")?;
    if let Some(s) = a.seconds {
        if !(s > 0.0 && s.is_finite()) {
            anyhow::bail!("-t: seconds must be a positive number, got {s}");
        }
    }
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
    let stop = crate::stop::flag();
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
                        d(R_FORWARDED..R_FORWARDED + 1),
                        d(R_PASSES),
                        d(R_DROPS)
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
                        serde_json::json!({"packets": t.packets[k], "bytes": t.bytes[k]}),
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
