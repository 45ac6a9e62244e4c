//! DUT configurations brought up in the lab's DUT namespace for a run and
//! taken down after it: the kernel as is, the kernel with an nftables
//! ruleset or sysctls, or linerate's fast path.
use super::scenario::{DutDef, Forwarder};
use anyhow::{anyhow, bail, Context, Result};
use linerate_host::cmd;
use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Checks that a configuration can be set up, before any lab exists:
/// the tools are there, the ruleset parses, the sysctls exist.
pub fn preflight(def: &DutDef) -> std::result::Result<(), String> {
    if let Some(rules) = &def.nft {
        cmd::require_tool("nft").map_err(|e| e.to_string())?;
        let f = ruleset_file(rules).map_err(|e| e.to_string())?;
        let path = f.path().display().to_string();
        // -c: parse and check against the kernel, commit nothing.
        cmd::run("nft", &["-c", "-f", &path]).map_err(|e| {
            // nft's own message, with the ruleset's line and column.
            let msg = e.to_string();
            let msg = msg
                .rsplit_once(&format!("{path}:"))
                .map_or(msg.as_str(), |m| m.1);
            format!("nft ruleset: line {}", msg.trim())
        })?;
    }
    for k in def.sysctl.keys() {
        let path = format!("/proc/sys/{}", k.replace('.', "/"));
        if !std::path::Path::new(&path).exists() {
            return Err(format!("sysctl {k}: no such setting ({path})"));
        }
    }
    Ok(())
}

fn ruleset_file(rules: &str) -> Result<tempfile::NamedTempFile> {
    let mut f = tempfile::Builder::new().prefix("linerate-nft").tempfile()?;
    f.write_all(rules.as_bytes())?;
    f.flush()?;
    Ok(f)
}

/// A DUT configuration in place. `stop` (or drop) undoes it.
pub struct RunningDut {
    netns: String,
    nft: bool,
    /// sysctls to put back: (key, old value).
    restore: Vec<(String, String)>,
    router: Option<(JoinHandle<Result<()>>, Arc<AtomicBool>)>,
}

/// How long linerate may take to attach before the run is abandoned.
const ROUTER_START: Duration = Duration::from_secs(20);

impl RunningDut {
    pub fn start(def: &DutDef, netns: &str, interfaces: [&str; 2]) -> Result<Self> {
        let mut dut = RunningDut {
            netns: netns.to_string(),
            nft: false,
            restore: Vec::new(),
            router: None,
        };
        for (k, v) in &def.sysctl {
            let old = cmd::in_netns(netns, "sysctl", &["-n", k])?
                .trim()
                .to_string();
            cmd::in_netns(netns, "sysctl", &["-qw", &format!("{k}={v}")])?;
            dut.restore.push((k.clone(), old));
        }
        if let Some(rules) = &def.nft {
            let f = ruleset_file(rules)?;
            dut.nft = true;
            cmd::in_netns(netns, "nft", &["-f", &f.path().display().to_string()])
                .context("loading the DUT's nftables ruleset")?;
        }
        if def.forwarder == Forwarder::Linerate {
            dut.router = Some(start_linerate(netns, interfaces)?);
        }
        Ok(dut)
    }

    pub fn stop(mut self) -> Result<()> {
        self.undo()
    }

    fn undo(&mut self) -> Result<()> {
        let mut first_error = None;
        if let Some((h, stop)) = self.router.take() {
            stop.store(true, Ordering::SeqCst);
            match h.join() {
                Ok(Ok(())) => {}
                Ok(Err(e)) => first_error = Some(e),
                Err(_) => first_error = Some(anyhow!("the linerate DUT thread panicked")),
            }
        }
        if std::mem::take(&mut self.nft) {
            // The DUT namespace is the lab's own: its whole ruleset is ours.
            if let Err(e) = cmd::in_netns(&self.netns, "nft", &["flush", "ruleset"]) {
                first_error.get_or_insert(e);
            }
        }
        for (k, v) in std::mem::take(&mut self.restore) {
            if let Err(e) = cmd::in_netns(&self.netns, "sysctl", &["-qw", &format!("{k}={v}")]) {
                first_error.get_or_insert(e);
            }
        }
        first_error.map_or(Ok(()), Err)
    }
}

impl Drop for RunningDut {
    fn drop(&mut self) {
        let _ = self.undo();
    }
}

/// linerate's fast path on both DUT interfaces, from a thread that lives in
/// the DUT's namespace, until told to stop.
fn start_linerate(
    netns: &str,
    interfaces: [&str; 2],
) -> Result<(JoinHandle<Result<()>>, Arc<AtomicBool>)> {
    let stop = Arc::new(AtomicBool::new(false));
    let ready = Arc::new(AtomicBool::new(false));
    let (ns, ifs) = (netns.to_string(), interfaces.map(String::from).to_vec());
    let h = {
        let (stop, ready) = (stop.clone(), ready.clone());
        std::thread::Builder::new()
            .name("linerate-dut".into())
            .spawn(move || -> Result<()> {
                linerate_host::netns::enter_for_good(&ns)?;
                linerate_router::run::run(
                    &crate::cmd_route::options(&ifs, "native", Some(&ns)),
                    &stop,
                    &ready,
                    |_| {},
                )
            })?
    };
    let t = Instant::now();
    while !ready.load(Ordering::SeqCst) {
        if h.is_finished() || t.elapsed() > ROUTER_START {
            stop.store(true, Ordering::SeqCst);
            let why = match h.join() {
                Ok(Err(e)) => format!("{e:#}"),
                Ok(Ok(())) => "it exited".into(),
                Err(_) => "it panicked".into(),
            };
            bail!("the linerate DUT did not start: {why}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Ok((h, stop))
}
