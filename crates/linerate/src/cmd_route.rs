//! `linerate route`, `linerate check-config`, `linerate stats`.
use crate::cli::RouteArgs;
use anyhow::Result;
use linerate_daemon::config;
use linerate_host::stop;

pub fn run(a: RouteArgs) -> Result<()> {
    let flags = config::Overrides {
        interfaces: a.interfaces,
        mode: a.mode,
        fib6: a.fib6,
        netns: a.netns,
        nice: a.nice,
        quiet: a.quiet,
        metrics: a.metrics,
        log_level: a.log_level,
        carry_tcp: a.carry_tcp,
        police: a.police,
    };
    linerate_daemon::service::route(a.config, flags, stop::flag())
}

/// `linerate stats`.
pub fn stats(a: crate::cli::StatsArgs) -> Result<()> {
    linerate_host::privilege::require_root("linerate stats")?;
    if let Some(s) = a.seconds {
        if !(s > 0.0 && s.is_finite()) {
            anyhow::bail!("-t: seconds must be a positive number, got {s}");
        }
    }
    let w = linerate_daemon::stats::Watch {
        netns: a.netns,
        queues: a.queues,
        seconds: a.seconds,
        json: a.json,
    };
    linerate_daemon::stats::watch(&w, linerate_host::stop::flag())
}

/// `linerate check-config`: the file read and checked as `linerate route`
/// would, its interfaces looked up in its namespace; nothing changed.
pub fn check_config(a: crate::cli::CheckConfigArgs) -> Result<()> {
    let path = a.file.unwrap_or_else(|| config::DEFAULT_PATH.into());
    let loaded = config::Loaded::read(&path)?;
    loaded.check_in_namespace()?;
    println!("{}: ok: {}", path.display(), loaded.config.describe());
    Ok(())
}
