//! `linerate bench ...`.
use crate::cli::{BenchCmd, BenchGenArgs};
use anyhow::{bail, Result};
use linerate_lab::scratch::ScratchPair;
use linerate_traffic::bench::{self, GenBench};
use linerate_traffic::profile::{Profile, Sender};

pub fn run(cmd: BenchCmd) -> Result<()> {
    match cmd {
        BenchCmd::Gen(a) => gen(a),
        BenchCmd::Fib(a) => crate::cmd_fib::bench(a),
        BenchCmd::Fastpath(a) => fastpath(a),
        BenchCmd::Search(a) => search(a),
        BenchCmd::RouteChange(a) => route_change(a),
        BenchCmd::RouteChurn(a) => route_churn(a),
        BenchCmd::FirewallCache(a) => firewall_cache(a),
        BenchCmd::Conntrack(a) => conntrack(a),
        BenchCmd::Firewall(a) => firewall(a),
        BenchCmd::Bgp(a) => bgp(a),
        BenchCmd::Restart(a) => restart(a),
    }
}

fn restart(a: crate::cli::BenchRestartArgs) -> Result<()> {
    use linerate_bench::restart::{run, Options};
    let o = Options {
        ways: a.ways,
        rate: a.rate,
        seconds: a.seconds,
        at: a.at,
        upgrade_binary: a.upgrade_binary,
    };
    o.check()?;
    linerate_host::privilege::require_root("linerate bench restart")?;
    let json = a.json;
    if !json {
        println!(
            "{:<9} {:>9} {:>9} {:>6} {:>12} {:>10} {:>8} {:>10}  counters",
            "way", "sent", "received", "lost", "fast path", "kernel", "gap ms", "restart ms"
        );
    }
    let trials = run(&o, crate::stop::flag(), |t| {
        if !json {
            println!(
                "{:<9} {:>9} {:>9} {:>6} {:>12} {:>10} {:>8.0} {:>10.0}  {}",
                serde_json::to_value(t.way).unwrap().as_str().unwrap_or("?"),
                t.sent,
                t.received,
                t.lost,
                t.fast_path_forwarded,
                t.kernel_forwarded,
                t.gap_ms,
                t.restart_ms,
                if t.same_counters { "kept" } else { "new" }
            );
        }
    })?;
    if json {
        println!("{}", serde_json::to_string_pretty(&trials)?);
    }
    Ok(())
}

fn bgp(a: crate::cli::BenchBgpArgs) -> Result<()> {
    use linerate_bench::bgp::{daemons::Speaker, run, Followed, Options};
    let o = Options {
        speaker: match a.speaker {
            crate::cli::BgpSpeaker::Bird => Speaker::Bird,
            crate::cli::BgpSpeaker::Frr => Speaker::Frr,
        },
        routes4: a.routes,
        routes6: a.routes6,
        samples: a.samples,
        rate: a.rate,
        router_cpu: a.router_cpu,
    };
    o.check()?;
    linerate_host::privilege::require_root("linerate bench bgp")?;
    let json = a.json;
    let family = |name: &str, f: &Followed| {
        format!(
            "{name} lag median {:.2} ms, p99 {:.2} ms, max {:.2} ms ({} samples{}{})",
            f.lag_ms.median,
            f.lag_ms.p99,
            f.lag_ms.max,
            f.samples,
            if f.never > 0 {
                format!(", {} never followed", f.never)
            } else {
                String::new()
            },
            if f.unheard > 0 {
                format!(", {} never changed in the kernel", f.unheard)
            } else {
                String::new()
            },
        )
    };
    let r = run(&o, crate::stop::flag(), |p| {
        if !json {
            println!(
                "{:<10} kernel done in {:.2} s; {}; {}; during: {} of {} frames arrived; settled: IPv4 {} of {}, IPv6 {} of {}",
                p.kind,
                p.seconds,
                family("IPv4", &p.ipv4),
                family("IPv6", &p.ipv6),
                p.during.received,
                p.during.offered,
                p.settled_ipv4.received,
                p.settled_ipv4.offered,
                p.settled_ipv6.received,
                p.settled_ipv6.offered,
            );
        }
    })?;
    if json {
        println!("{}", serde_json::to_string_pretty(&r)?);
    } else {
        println!(
            "{} with {} IPv4 and {} IPv6 routes: lag median {:.2} ms, p99 {:.2} ms, max {:.2} ms; {} notification overflows",
            r.speaker, r.routes, r.routes6, r.lag_ms.median, r.lag_ms.p99, r.lag_ms.max, r.overflows
        );
    }
    Ok(())
}

fn route_churn(a: crate::cli::BenchRouteChurnArgs) -> Result<()> {
    use linerate_bench::route_churn::{run, Options};
    let o = Options {
        table: a.table,
        routes: a.routes,
        samples: a.samples,
        window: a.window,
        rate: a.rate,
        router_cpu: a.router_cpu,
    };
    o.check()?;
    linerate_host::privilege::require_root("linerate bench route-churn")?;
    let json = a.json;
    let r = run(&o, crate::stop::flag(), |p| {
        if !json {
            println!(
                "{:<8} {} routes in {:.2} s ({:.0} routes/s): fast path lag median {:.2} ms, p99 {:.2} ms, max {:.2} ms ({} samples{})",
                p.kind,
                p.routes,
                p.seconds,
                p.rate,
                p.lag_ms.median,
                p.lag_ms.p99,
                p.lag_ms.max,
                p.samples,
                if p.never > 0 { format!(", {} never followed", p.never) } else { String::new() }
            );
        }
    })?;
    if json {
        println!("{}", serde_json::to_string_pretty(&r)?);
    } else {
        let s = &r.startup;
        let mib = |kb: u64| kb as f64 / 1024.0;
        println!(
            "start-up on a table of {} routes: {:.2} s; control plane {:.1} MiB, BPF maps mapped {:.1} MiB; the kernel's FIB {:.1} MiB (fib_trie), slab {:+.1} MiB",
            s.table,
            s.seconds,
            mib(s.control_plane_kb),
            mib(s.bpf_mapped_kb),
            mib(s.kernel_fib_kb),
            s.slab_delta_kb as f64 / 1024.0
        );
        println!(
            "{} routes: lag median {:.2} ms, p99 {:.2} ms, max {:.2} ms; {} notification overflows",
            r.routes, r.lag_ms.median, r.lag_ms.p99, r.lag_ms.max, r.overflows
        );
        let m = &r.memory;
        println!(
            "memory for them: control plane {:.1} MiB, BPF maps mapped {:.1} MiB; the kernel's FIB {:.1} MiB (fib_trie), slab {:+.1} MiB",
            m.control_plane_kb as f64 / 1024.0,
            m.bpf_mapped_kb as f64 / 1024.0,
            m.kernel_fib_kb as f64 / 1024.0,
            m.slab_delta_kb as f64 / 1024.0
        );
    }
    Ok(())
}

fn route_change(a: crate::cli::BenchRouteChangeArgs) -> Result<()> {
    use linerate_bench::route_change::{run, Options};
    linerate_host::privilege::require_root("linerate bench route-change")?;
    if a.changes == 0 || !(a.interval >= 0.05 && a.interval <= 60.0) || a.rate == 0 {
        bail!("--changes at least 1, --interval 0.05 to 60 s, -R at least 1 pps");
    }
    let json = a.json;
    let r = run(
        &Options {
            changes: a.changes,
            interval: std::time::Duration::from_secs_f64(a.interval),
            rate_pps: a.rate,
            gen_cpu: a.gen_cpu,
        },
        crate::stop::flag(),
        |c| {
            if !json {
                println!(
                    "{:<5} {:>9.1} us to the new next hop ({:>5} frames to the old one, {:>7} to the new; ip took {:.0} us){}",
                    c.kind,
                    c.delay_us,
                    c.old_packets,
                    c.new_packets,
                    c.ip_us,
                    if c.late_old_us > 0.0 { format!(", old next hop used {:.1} us after the switch", c.late_old_us) } else { String::new() }
                );
            }
        },
    )?;
    if json {
        println!("{}", serde_json::to_string_pretty(&r)?);
    } else {
        println!(
            "route changes: median {:.1} us, worst {:.1} us ({} changes); neighbour changes: median {:.1} us, worst {:.1} us ({})",
            r.route_delay_us.median, r.route_delay_us.worst, r.route_delay_us.n,
            r.neigh_delay_us.median, r.neigh_delay_us.worst, r.neigh_delay_us.n
        );
        println!(
            "old next hop used after the switch: worst {:.1} us; {} frames received, {} lost, at {} pps",
            r.worst_late_old_us, r.received, r.lost, r.rate_pps
        );
    }
    Ok(())
}

/// Trial-seconds of MLRsearch against binary search on simulated DUTs of
/// capacities spread over 0.1-10 Mpps (log scale), without and with noise.
fn search(a: crate::cli::BenchSearchArgs) -> Result<()> {
    use linerate_search::{cost, mlr};
    if a.duts == 0 {
        bail!("--duts: at least 1");
    }
    let mut cfg = mlr::Config::ndr_pdr(1.0, a.loss_ratio);
    cfg.width = a.width;
    cfg.initial_seconds = a.initial_seconds;
    cfg.final_seconds = a.final_seconds;
    let mut rows = Vec::new();
    for noise in [0.0, 0.002, 0.01] {
        for i in 0..a.duts {
            let cap = 1e5 * 100f64.powf(i as f64 / a.duts.max(2).saturating_sub(1) as f64);
            rows.push(cost::compare(cap, noise, i as u64, &cfg)?);
        }
    }
    if a.json {
        println!("{}", serde_json::to_string_pretty(&rows)?);
        return Ok(());
    }
    println!(
        "MLRsearch (NDR + PDR {}) vs two binary searches, width {}, final trials {} s, MLRsearch from {} s",
        a.loss_ratio, a.width, a.final_seconds, a.initial_seconds
    );
    println!("noise   DUTs  MLR trials  MLR s (median)  binary trials  binary s (median)  saving (median, min-max)");
    for noise in [0.0, 0.002, 0.01] {
        let r: Vec<&cost::Row> = rows.iter().filter(|r| r.noise == noise).collect();
        let med = |mut v: Vec<f64>| {
            v.sort_by(f64::total_cmp);
            let n = v.len();
            (
                if n % 2 == 1 {
                    v[n / 2]
                } else {
                    (v[n / 2 - 1] + v[n / 2]) / 2.0
                },
                v[0],
                v[n - 1],
            )
        };
        let mt = med(r.iter().map(|x| x.mlr_trials as f64).collect());
        let ms = med(r.iter().map(|x| x.mlr_seconds).collect());
        let bt = med(r.iter().map(|x| x.binary_trials as f64).collect());
        let bs = med(r.iter().map(|x| x.binary_seconds).collect());
        let sv = med(r.iter().map(|x| x.saving).collect());
        println!(
            "{:<6.3} {:>5} {:>11.0} {:>15.0} {:>14.0} {:>18.0}  {:.2}x ({:.2}-{:.2})",
            noise,
            r.len(),
            mt.0,
            ms.0,
            bt.0,
            bs.0,
            sv.0,
            sv.1,
            sv.2
        );
    }
    Ok(())
}

fn fastpath(a: crate::cli::BenchFastpathArgs) -> Result<()> {
    use linerate_fib::Family;
    linerate_host::privilege::require_root("linerate bench fastpath")?;
    if a.keys == 0 || a.repeat == 0 || a.rounds == 0 {
        bail!("--keys, --repeat and --rounds: at least 1");
    }
    if a.repeat > linerate_bench::fastpath::MAX_REPEAT {
        bail!(
            "--repeat: at most {} (each repetition takes one TTL)",
            linerate_bench::fastpath::MAX_REPEAT
        );
    }
    let routes = a.routes.unwrap_or(match a.family {
        Family::Ipv4 => 1_000_000,
        Family::Ipv6 => 200_000,
    });
    if routes < 2 {
        bail!("--routes: at least 2 (the one-route case always runs)");
    }
    let bits = if a.family == Family::Ipv4 { 32 } else { 128 };
    if let Some((_, hi)) = a.match_lengths.filter(|&(_, hi)| hi > bits) {
        bail!("--match-lengths: /{hi} is longer than an address of the family ({bits} bits)");
    }
    let pair = ScratchPair::new(0)?;
    let b = linerate_bench::fastpath::FastpathBench {
        netns: pair.netns.clone(),
        ingress: pair.tx.clone(),
        egress: pair.rx.clone(),
        ipv6: a.family == Family::Ipv6,
        routes,
        keys: a.keys,
        repeat: a.repeat,
        rounds: a.rounds,
        seed: a.seed,
        ipv6_layouts: a.fib6.clone(),
        match_lengths: a.match_lengths,
        multibuf: a.multibuf,
    };
    let json = a.json;
    let results = std::thread::spawn(
        move || -> Result<Vec<linerate_bench::fastpath::FastpathResult>> {
            linerate_host::netns::enter_for_good(&b.netns)?;
            linerate_bench::fastpath::run(&b, &mut |line| {
                if !json {
                    println!("{line}");
                }
            })
        },
    )
    .join()
    .map_err(|_| anyhow::anyhow!("the bench thread panicked"))??;
    drop(pair);
    if json {
        println!("{}", serde_json::to_string_pretty(&results)?);
        return Ok(());
    }
    println!();
    for one in results.iter().filter(|r| r.routes == 1) {
        let Some(full) = results
            .iter()
            .find(|r| r.routes > 1 && r.layout == one.layout)
        else {
            continue;
        };
        let ours = round_ratios(&full.rounds_ns_per_packet, &one.rounds_ns_per_packet);
        let theirs = round_ratios(
            &full.reference.rounds_ns_per_packet,
            &one.reference.rounds_ns_per_packet,
        );
        println!(
            "{} layout, {}, full table / one route, median of {} rounds (min-max): linerate {}, bpf_fib_lookup {}; linerate / bpf_fib_lookup: {:.2} (1 route), {:.2} ({} routes)",
            one.layout,
            one.program,
            ours.len(),
            show_ratios(&ours),
            show_ratios(&theirs),
            one.ns_per_packet / one.reference.ns_per_packet,
            full.ns_per_packet / full.reference.ns_per_packet,
            full.routes
        );
    }
    Ok(())
}

/// Each round's full-table cost over its one-route cost (the two ran side
/// by side in that round).
fn round_ratios(full: &[f64], one: &[f64]) -> Vec<f64> {
    full.iter().zip(one).map(|(f, o)| f / o).collect()
}

fn show_ratios(r: &[f64]) -> String {
    let d = linerate_ministat::Dataset::new("ratios", r);
    format!("{:.2}x ({:.2}-{:.2})", d.median(), d.min(), d.max())
}

fn gen(a: BenchGenArgs) -> Result<()> {
    linerate_host::privilege::require_root("linerate bench gen")?;
    if !(a.seconds >= 1.0 && a.seconds.is_finite()) {
        bail!(
            "-t: at least 1 second per run (rates are checked per second), got {}",
            a.seconds
        );
    }
    if a.repeat == 0 {
        bail!("--repeat: at least 1");
    }
    if let Some(f) = a.rate_fractions.iter().find(|f| !(**f > 0.0 && **f <= 1.0)) {
        bail!("--rate-fractions: {f} is not in (0, 1]");
    }
    let online = linerate_host::cpu::online();
    if a.cpu >= online {
        bail!(
            "--cpu: CPU {} does not exist (CPUs 0..{})",
            a.cpu,
            online - 1
        );
    }
    // Check every argument before building anything.
    if !(a.seconds > 0.0 && a.seconds.is_finite()) {
        bail!("-t: seconds must be a positive number, got {}", a.seconds);
    }
    let traffic = Profile {
        family: linerate_traffic::profile::Family::Ipv4,
        len: a.len.clone(),
        src: None,
        dst: None,
        random_dst: false,
    }
    .check()
    .map_err(|e| anyhow::anyhow!("-l: {}", e.reason))?;
    let pair = ScratchPair::new((a.cpu + 1) % online)?;
    let sender = Sender {
        ifname: pair.tx.clone(),
        src_mac: [2, 0, 0, 0, 0, 0xfe],
        dst_mac: [2, 0, 0, 0, 0, 0xff],
        cpu: a.cpu,
    };
    let b = GenBench {
        netns: pair.netns.clone(),
        tx: pair.tx.clone(),
        rx: pair.rx.clone(),
        gen: traffic.gen_options(&sender, None, a.seconds)?,
        seconds: a.seconds,
        repeat: a.repeat,
        rate_fractions: a.rate_fractions.clone(),
    };
    let json = a.json;
    let r = bench::run(&b, |line| {
        if !json {
            println!("{line}");
        }
    })?;
    drop(pair);
    if json {
        println!("{}", serde_json::to_string_pretty(&r)?);
        return Ok(());
    }
    println!(
        "\ngenerator on CPU {}, -l {}, {} s per run, {} runs each, into a drop-only sink (median [min..max]):",
        r.cpu, r.frame_sizes, r.seconds, a.repeat
    );
    let show = |name: &str, s: &bench::Spread, unit: f64, suffix: &str| {
        println!(
            "  {name:<10} {:>8.3}{suffix} [{:.3}..{:.3}]",
            s.median / unit,
            s.min / unit,
            s.max / unit
        )
    };
    show("xdp", &r.xdp_pps, 1e6, " Mpps");
    show("afpacket", &r.afpacket_pps, 1e6, " Mpps");
    show("xdp/afp", &r.ratio, 1.0, "x   ");

    for c in &r.rate_control {
        println!(
            "  -R {:>9} ({:>3.0}% of max): offered {:>11.0} pps, error {:+.3}% over the run, {:.3}% worst second{}; the sink took {:.0} pps",
            c.rate_pps,
            c.fraction_of_max * 100.0,
            c.offered_pps,
            c.error_percent,
            c.worst_second_error_percent,
            c.worst_second_note(),
            c.sent_pps
        );
    }
    println!(
        "  into the drop-only sink the generator built {:.3} Mpps, the wire took {:.3} Mpps (the veth refused the rest)",
        r.xdp_built_pps.median / 1e6,
        r.xdp_pps.median / 1e6
    );
    println!(
        "  receivers, each round against the drop-only sink (it took {:.3} Mpps [{:.3}..{:.3}] in these rounds):",
        r.receivers_drop_sink_pps.median / 1e6,
        r.receivers_drop_sink_pps.min / 1e6,
        r.receivers_drop_sink_pps.max / 1e6
    );
    for (name, rc) in [
        ("--receiver full", &r.receiver),
        ("--receiver count", &r.receiver_count),
        ("--receiver frames", &r.receiver_frames),
    ] {
        println!(
            "    {name:<18} generator built {:.3} Mpps, the wire took {:.3} Mpps, {:.2}x the drop sink's [{:.2}..{:.2}], the receiver counted {:.4} of those (lowest run)",
            rc.built_pps.median / 1e6,
            rc.sent_pps.median / 1e6,
            rc.of_drop_sink.median,
            rc.of_drop_sink.min,
            rc.of_drop_sink.max,
            rc.counted_ratio_min
        );
    }
    Ok(())
}

fn firewall(a: crate::cli::BenchFirewallArgs) -> Result<()> {
    use linerate_bench::firewall::{run, FirewallBench, MAX_REPEAT};
    linerate_host::privilege::require_root("linerate bench firewall")?;
    if a.repeat == 0 || a.repeat > MAX_REPEAT {
        bail!(
            "--repeat: 1 to {MAX_REPEAT} (each repetition takes one TTL), got {}",
            a.repeat
        );
    }
    if a.flows == 0 || a.flows > 65536 {
        bail!("--flows: 1 to 65536, got {}", a.flows);
    }
    if a.rounds == 0 {
        bail!("--rounds: at least 1");
    }
    let rules: Vec<u32> = a.rules.iter().copied().filter(|&n| n > 0).collect();
    let sets: Vec<u32> = a.set_size.iter().copied().filter(|&m| m > 0).collect();
    let states: Vec<u32> = a.states.iter().copied().filter(|&n| n > 0).collect();
    if rules.is_empty() && sets.is_empty() && states.is_empty() {
        bail!("--rules, --set-size and --states: give at least one rule count, set size or state count");
    }
    if let Some(n) = states.iter().find(|&&n| n > 2_000_000) {
        bail!("--states: at most 2000000, got {n}");
    }
    if let Some(n) = rules.iter().find(|&&n| n > 30000) {
        bail!("--rules: at most 30000 (the firewall counts 32768 rules a family), got {n}");
    }
    if let Some(m) = sets.iter().find(|&&m| m > 4_000_000) {
        bail!("--set-size: at most 4000000, got {m}");
    }
    // Room in the kernel's conntrack for the largest state count (other
    // namespaces' entries count against the same limit), a bucket a
    // state; put back after.
    let largest = states.iter().copied().max().unwrap_or(0) as u64;
    let _raised = if largest > 0 {
        use linerate_bench::conntrack::{Raised, CT_HASHSIZE, CT_MAX};
        Some((
            Raised::at_least(CT_MAX, largest + 65_536)?,
            Raised::at_least(CT_HASHSIZE, largest)?,
        ))
    } else {
        None
    };
    let pair = ScratchPair::new(0)?;
    let b = FirewallBench {
        netns: pair.netns.clone(),
        ingress: pair.tx.clone(),
        egress: pair.rx.clone(),
        rules,
        set_sizes: sets,
        states,
        flows: a.flows,
        repeat: a.repeat,
        rounds: a.rounds,
    };
    if a.per_transaction == 0 {
        bail!("--per-transaction: at least 1");
    }
    let json = a.json;
    let (elements, per_transaction) = (a.elements, a.per_transaction);
    let (cases, rates) = std::thread::spawn(move || -> Result<_> {
        linerate_host::netns::enter_for_good(&b.netns)?;
        let cases = run(&b, &mut |line| {
            if !json {
                eprintln!("{line}");
            }
        })?;
        let rates = if elements > 0 {
            linerate_bench::firewall::element_rate(&b.netns, elements, per_transaction)?
        } else {
            Vec::new()
        };
        Ok((cases, rates))
    })
    .join()
    .map_err(|_| anyhow::anyhow!("the bench thread panicked"))??;
    drop(pair);
    if json {
        println!(
            "{}",
            serde_json::to_string_pretty(
                &serde_json::json!({"cases": cases, "element_changes": rates})
            )?
        );
        return Ok(());
    }
    println!("ruleset        entries  ns/packet  without  ratio (min-max)        load: nft -f   read  compile+publish");
    for c in &cases {
        println!(
            "{:<14} {:>7} {:>10.1} {:>8.1}  {:<22} {:>11.0} ms {:>4.0} ms {:>7.1} ms",
            c.name,
            c.entries,
            c.ns_per_packet,
            c.baseline_ns_per_packet,
            show_ratios(&c.round_ratios),
            c.load.nft_load_ms,
            c.load.read_ms,
            c.load.compile_publish_ms
        );
    }
    for c in &cases {
        if let Some(s) = &c.sweep {
            println!(
                "{}: a sweep of the fast path's {} connections: {:.0} ms setting {} kernel timeouts, {:.0} ms checking them ({:.2} and {:.2} us a connection)",
                c.name,
                s.connections,
                s.setting_ms,
                s.refreshed,
                s.checking_ms,
                s.setting_ms * 1e3 / s.connections.max(1) as f64,
                s.checking_ms * 1e3 / s.connections.max(1) as f64
            );
        }
    }
    for (r, what) in rates.iter().zip(["added", "removed"]) {
        println!(
            "{} set elements {what}, {} a transaction: nft -f {:.0} ms; applied by the firewall {:.0} ms after the first began ({:.1} ms after nft returned): {:.0} changes/s, {} reads of the ruleset; the firewall's own time {:.0} ms: {:.0} changes/s",
            r.elements,
            r.per_transaction,
            r.nft_ms,
            r.applied_ms,
            r.lag_ms,
            r.per_second,
            r.reads,
            r.busy_ms,
            r.own_per_second
        );
    }
    Ok(())
}

fn conntrack(a: crate::cli::BenchConntrackArgs) -> Result<()> {
    use linerate_bench::conntrack::{run, Options};
    linerate_host::privilege::require_root("linerate bench conntrack")?;
    let r = run(&Options {
        stop: crate::stop::flag(),
        states: a.states,
        samples: a.samples,
        repeat: a.repeat,
        rounds: a.rounds,
    })?;
    if a.json {
        println!("{}", serde_json::to_string_pretty(&r)?);
        return Ok(());
    }
    println!(
        "nf_conntrack_max {}, hash size {} (for the run); ns a packet, median of rounds:",
        r.nf_conntrack_max, r.hashsize
    );
    for at in &r.runs {
        println!(
            "{} states ({} sampled; filled at {:.0} ns an entry):",
            at.states, at.samples, at.fill_ns_per_entry
        );
        print_probe_lines(&at.lookups, "the tuple alone");
    }
    Ok(())
}

/// A probe bench's programs, a line each: ns a packet, over the first
/// program (`base`), and the rounds.
fn print_probe_lines(lines: &[linerate_bench::probe::ProgramCost], base: &str) {
    let first = lines.first().map_or(0.0, |l| l.ns_per_packet);
    for l in lines {
        println!(
            "  {:<12} {:7.1} ns/packet ({:+.1} ns over {base}; rounds {:?})",
            l.program,
            l.ns_per_packet,
            l.ns_per_packet - first,
            l.rounds_ns_per_packet
                .iter()
                .map(|v| (v * 10.0).round() / 10.0)
                .collect::<Vec<_>>()
        );
    }
}

fn firewall_cache(a: crate::cli::BenchFirewallCacheArgs) -> Result<()> {
    use linerate_bench::fw_cache::{run, Options};
    linerate_host::privilege::require_root("linerate bench firewall-cache")?;
    let r = run(&Options {
        flows: a.flows,
        samples: a.samples,
        repeat: a.repeat,
        rounds: a.rounds,
    })?;
    if a.json {
        println!("{}", serde_json::to_string_pretty(&r)?);
        return Ok(());
    }
    println!(
        "{} flows cached ({} lost to a slot's collision in the direct-mapped table), {} sampled:",
        r.flows, r.direct_collisions, r.samples
    );
    print_probe_lines(&r.shapes, "the key alone");
    Ok(())
}
