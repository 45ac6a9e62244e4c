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
        BenchCmd::Punt(a) => punt(a),
        BenchCmd::Search(a) => search(a),
        BenchCmd::RouteChange(a) => route_change(a),
        BenchCmd::FirewallChange(a) => firewall_change(a),
        BenchCmd::ControlBurst(a) => control_burst(a),
        BenchCmd::Tcp(a) => tcp(a),
        BenchCmd::RouteChurn(a) => route_churn(a),
        BenchCmd::RuleChurn(a) => rule_churn(a),
        BenchCmd::FirewallCache(a) => firewall_cache(a),
        BenchCmd::Conntrack(a) => conntrack(a),
        BenchCmd::Firewall(a) => firewall(a),
        BenchCmd::Bgp(a) => bgp(a),
        BenchCmd::Restart(a) => restart(a),
    }
}

fn restart(a: crate::cli::BenchRestartArgs) -> Result<()> {
    use linerate_labbench::restart::Options;
    let o = Options {
        ways: a.ways,
        rate: a.rate,
        seconds: a.seconds,
        at: a.at,
        upgrade_binary: a.upgrade_binary,
    };
    o.check()?;
    linerate_host::privilege::require_root("linerate bench restart")?;
    linerate_labbench::restart::run_printed(&o, linerate_host::stop::flag(), a.json)
}

fn bgp(a: crate::cli::BenchBgpArgs) -> Result<()> {
    use linerate_bench::bgp::{daemons::Speaker, run, Options};
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
    let r = run(&o, linerate_host::stop::flag(), progress(a.json))?;
    print_report(a.json, &r)
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
    let r = run(&o, linerate_host::stop::flag(), progress(a.json))?;
    print_report(a.json, &r)
}

fn rule_churn(a: crate::cli::BenchRuleChurnArgs) -> Result<()> {
    use linerate_bench::rule_churn::{run, Options};
    let o = Options {
        changes: a.changes,
        shape: a.shape,
        table: a.table,
        tenants: a.tenants,
        cold: a.cold,
    };
    o.check()?;
    linerate_host::privilege::require_root("linerate bench rule-churn")?;
    let json = a.json;
    let r = run(&o, linerate_host::stop::flag(), |l: &str| {
        if !json {
            println!("{l}")
        }
    })?;
    print_report(json, &r)
}

fn route_change(a: crate::cli::BenchRouteChangeArgs) -> Result<()> {
    use linerate_labbench::route_change::{run, Options};
    linerate_host::privilege::require_root("linerate bench route-change")?;
    if a.changes == 0 || !(a.interval >= 0.05 && a.interval <= 60.0) || a.rate == 0 {
        bail!("--changes at least 1, --interval 0.05 to 60 s, -R at least 1 pps");
    }
    let o = Options {
        changes: a.changes,
        interval: std::time::Duration::from_secs_f64(a.interval),
        rate_pps: a.rate,
        gen_cpu: a.gen_cpu,
    };
    let r = run(&o, linerate_host::stop::flag(), progress(a.json))?;
    print_report(a.json, &r)
}

fn firewall_change(a: crate::cli::BenchFirewallChangeArgs) -> Result<()> {
    use linerate_labbench::firewall_change::{run, Options};
    linerate_host::privilege::require_root("linerate bench firewall-change")?;
    let o = Options::checked(a.rules, a.changes, a.interval, a.new_flows, a.gen_cpu)?;
    let r = run(&o, linerate_host::stop::flag(), progress(a.json))?;
    print_report(a.json, &r)
}

fn tcp(a: crate::cli::BenchTcpArgs) -> Result<()> {
    use linerate_labbench::tcp::{run, Options};
    linerate_host::privilege::require_root("linerate bench tcp")?;
    let o = Options::checked(a.seconds, a.rounds, a.streams, a.masquerade)?;
    let r = run(&o, linerate_host::stop::flag(), progress(a.json))?;
    print_report(a.json, &r)
}

/// A bench's progress as it goes: each step printed, unless the report is
/// JSON.
fn progress<P: std::fmt::Display>(json: bool) -> impl FnMut(&P) {
    move |p| {
        if !json {
            println!("{p}");
        }
    }
}

/// Prints a report: as JSON, or as its text (ended by a newline).
pub fn print_report<R: serde::Serialize + std::fmt::Display>(json: bool, r: &R) -> Result<()> {
    let text = match json {
        true => serde_json::to_string_pretty(r)?,
        false => r.to_string(),
    };
    println!("{}", text.strip_suffix('\n').unwrap_or(&text));
    Ok(())
}

/// Trial-seconds of MLRsearch against binary search on simulated DUTs of
/// capacities spread over 0.1-10 Mpps (log scale), without and with noise.
fn search(a: crate::cli::BenchSearchArgs) -> Result<()> {
    use linerate_search::{cost, mlr};
    let mut cfg = mlr::Config::ndr_pdr(1.0, a.loss_ratio);
    cfg.width = a.width;
    cfg.initial_seconds = a.initial_seconds;
    cfg.final_seconds = a.final_seconds;
    let rows = cost::rows(a.duts, &cfg)?;
    if a.json {
        println!("{}", serde_json::to_string_pretty(&rows)?);
        return Ok(());
    }
    println!(
        "MLRsearch (NDR + PDR {}) vs two binary searches, width {}, final trials {} s, MLRsearch from {} s",
        a.loss_ratio, a.width, a.final_seconds, a.initial_seconds
    );
    print!("{}", cost::table(&rows));
    Ok(())
}

fn fastpath(a: crate::cli::BenchFastpathArgs) -> Result<()> {
    linerate_host::privilege::require_root("linerate bench fastpath")?;
    let ipv6 = a.family == linerate_fib::Family::Ipv6;
    let b = linerate_bench::fastpath::FastpathBench {
        netns: String::new(),
        ingress: String::new(),
        egress: String::new(),
        ipv6,
        routes: a
            .routes
            .unwrap_or(linerate_bench::fastpath::default_routes(ipv6)),
        keys: a.keys,
        repeat: a.repeat,
        rounds: a.rounds,
        seed: a.seed,
        ipv6_layouts: a.fib6.clone(),
        match_lengths: a.match_lengths,
        multibuf: a.multibuf,
        walk_tables: a.walk_tables as usize,
        rule_steps: a.rule_steps as usize,
        rp_filter: a.rp_filter,
        bridge_port: a.bridge_port,
        vlan: a.vlan,
        vlan_pop_push: a.vlan_pop_push,
    };
    let r = linerate_bench::fastpath::run_on_scratch(b, progress(a.json))?;
    print_report(a.json, &r)
}

fn punt(a: crate::cli::BenchPuntArgs) -> Result<()> {
    use linerate_bench::punt::{run, Options};
    let o = Options {
        repeat: a.repeat,
        rounds: a.rounds,
    };
    o.check()?;
    linerate_host::privilege::require_root("linerate bench punt")?;
    let r = run(&o, progress(a.json))?;
    print_report(a.json, &r)
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
    let traffic = Profile::new(linerate_traffic::profile::Family::Ipv4, &a.len)
        .check()
        .map_err(|e| anyhow::anyhow!("-l: {}", e.reason))?;
    let pair = ScratchPair::new((a.cpu + 1) % online)?;
    let sender = Sender {
        ifname: pair.tx.clone(),
        src_mac: [2, 0, 0, 0, 0, 0xfe],
        dst_mac: [2, 0, 0, 0, 0, 0xff],
        cpu: a.cpu,
        other_ports: Vec::new(),
    };
    let b = GenBench {
        netns: pair.netns.clone(),
        tx: pair.tx.clone(),
        rx: pair.rx.clone(),
        gen: traffic.gen_options(&sender, None, a.seconds)?,
        seconds: a.seconds,
        repeat: a.repeat,
        rate_fractions: a.rate_fractions.clone(),
        tcp_connections: a.tcp_connections,
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
    print!("{}", r.summary(a.repeat));
    Ok(())
}

fn firewall(a: crate::cli::BenchFirewallArgs) -> Result<()> {
    use linerate_bench::firewall::{run_counts, Counts};
    linerate_host::privilege::require_root("linerate bench firewall")?;
    let counts = Counts {
        rules: &a.rules,
        set_sizes: &a.set_size,
        states: &a.states,
        access_lists: &a.access_lists,
        masquerade: a.masquerade,
        flows: a.flows,
        repeat: a.repeat,
        rounds: a.rounds,
    };
    let json = a.json;
    let r = run_counts(
        &counts,
        (a.elements, a.per_transaction),
        linerate_host::stop::flag(),
        move |l: &String| {
            if !json {
                eprintln!("{l}");
            }
        },
    )?;
    print_report(json, &r)
}

fn control_burst(a: crate::cli::BenchControlBurstArgs) -> Result<()> {
    use linerate_labbench::control_burst::{run, Options};
    let o = Options::checked(a.routes, a.rules, a.elements, &a.placement, a.gen_cpu)?;
    linerate_host::privilege::require_root("linerate bench control-burst")?;
    let r = run(&o, linerate_host::stop::flag(), progress(a.json))?;
    print_report(a.json, &r)
}

fn conntrack(a: crate::cli::BenchConntrackArgs) -> Result<()> {
    use linerate_bench::conntrack::{run, Options};
    linerate_host::privilege::require_root("linerate bench conntrack")?;
    let r = run(&Options {
        stop: linerate_host::stop::flag(),
        states: a.states,
        samples: a.samples,
        repeat: a.repeat,
        rounds: a.rounds,
    })?;
    print_report(a.json, &r)
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
    print_report(a.json, &r)
}
