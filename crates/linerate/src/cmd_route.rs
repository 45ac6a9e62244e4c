//! `linerate route`.
use crate::cli::RouteArgs;
use crate::stop;
use anyhow::Result;
use linerate_bpf::loader::XdpMode;
use linerate_router::run::{run as route, RouteOptions};
use std::sync::atomic::AtomicBool;

pub fn options(interfaces: &[String], mode: &str) -> RouteOptions {
    RouteOptions {
        interfaces: interfaces.to_vec(),
        mode: if mode == "generic" {
            XdpMode::Generic
        } else {
            XdpMode::Native
        },
    }
}

pub fn run(a: RouteArgs) -> Result<()> {
    linerate_host::privilege::require_root("linerate route")?;
    if let Some(ns) = &a.netns {
        linerate_host::netns::enter_for_good(ns)?;
    }
    let opts = options(&a.interfaces, &a.mode);
    let ready = AtomicBool::new(false);
    let quiet = a.quiet;
    route(&opts, stop::flag(), &ready, |s| {
        if !quiet {
            println!("{}", s.line());
        }
    })?;
    eprintln!("linerate route: detached from {}", a.interfaces.join(", "));
    Ok(())
}
