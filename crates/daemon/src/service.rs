//! `linerate route` as a service: its configuration read and checked,
//! the router run, and the service manager's protocol (sd_notify(3))
//! under systemd's `Type=notify`: READY=1 once the router forwards,
//! STOPPING=1 as it ends (without NOTIFY_SOCKET, a no-op).
use crate::config;
use crate::metrics::MetricsServer;
use crate::run::{run, Ended, RouteOptions};
use anyhow::Result;
use linerate_bpf::loader::XdpMode;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};

/// Whether a service manager is listening (NOTIFY_SOCKET set): then a
/// stop leaves the fast path in its fd store (crate::handover).
pub fn managed() -> bool {
    std::env::var_os("NOTIFY_SOCKET").is_some()
}

/// Says READY=1 once `ready` is set (the router is attached and has
/// mirrored the kernel's tables), or nothing if `done` is set first.
pub fn tell_when_ready(ready: &AtomicBool, done: &AtomicBool, interfaces: &[String]) {
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

/// Says STOPPING=1.
pub fn stopping() {
    let _ = sd_notify::notify(&[sd_notify::NotifyState::Stopping]);
}

/// The loop's options for a configuration.
pub fn options(c: &config::RouteConfig) -> RouteOptions {
    RouteOptions {
        nice: c.nice,
        status: Default::default(),
        // systemd's: a stop leaves the fast path in its fd store.
        service_manager: managed(),
        ipv6: c.fib6,
        record: c.netns.as_deref().unwrap_or("default").to_string(),
        interfaces: c.interfaces.clone(),
        carry_tcp: c.carry_tcp,
        police: c.police,
        mode: if c.mode == "generic" {
            XdpMode::Generic
        } else {
            XdpMode::Native
        },
    }
}

/// `linerate route`: the file `file` (or the default file where
/// there is one and `flags` name no interfaces) with `flags` on top, read
/// and checked whole before anything changes; then the router runs until
/// `stop`, and says how it ended.
pub fn route(file: Option<PathBuf>, flags: config::Overrides, stop: &AtomicBool) -> Result<()> {
    let path = match (&file, flags.interfaces.is_empty()) {
        (Some(p), _) => Some(p.clone()),
        (None, true) if std::path::Path::new(config::DEFAULT_PATH).exists() => {
            Some(config::DEFAULT_PATH.into())
        }
        (None, _) => None,
    };
    let loaded = path.as_deref().map(config::Loaded::read).transpose()?;
    let c = config::merge(loaded.as_ref().map(|l| l.config.clone()), flags)?;
    if let Some(l) = crate::log::level_of(&c.log_level) {
        crate::log::set_level(l);
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
    let opts = options(&c);
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
        s.spawn(|| tell_when_ready(&ready, &done, &c.interfaces));
        let r = run(&opts, stop, &ready, |s| {
            if !quiet {
                println!("{}", s.line());
            }
        });
        done.store(true, Ordering::SeqCst);
        r
    });
    stopping();
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
