//! Named network namespaces (the `ip netns` kind, bound under /run/netns).
use anyhow::{Context, Result};
use nix::sched::{setns, CloneFlags};
use std::fs::File;
use std::path::PathBuf;

const NETNS_DIR: &str = "/run/netns";

pub fn path(name: &str) -> PathBuf {
    PathBuf::from(NETNS_DIR).join(name)
}

pub fn exists(name: &str) -> bool {
    path(name).exists()
}

/// Moves the calling thread into namespace `name` for the guard's lifetime,
/// then back. Only the calling thread moves: threads spawned meanwhile
/// inherit the namespace, the rest of the process does not.
pub struct NetnsGuard {
    previous: File,
}

impl NetnsGuard {
    pub fn enter(name: &str) -> Result<Self> {
        let previous = File::open("/proc/thread-self/ns/net")
            .context("cannot open this thread's network namespace")?;
        enter_for_good(name)?;
        Ok(NetnsGuard { previous })
    }
}

impl Drop for NetnsGuard {
    fn drop(&mut self) {
        // Cannot fail for a namespace we were in a moment ago, short of a
        // kernel bug; a thread left in the wrong namespace would be worse
        // than a panic.
        setns(&self.previous, CloneFlags::CLONE_NEWNET)
            .expect("return to the previous network namespace");
    }
}

/// Moves the calling thread into namespace `name` for the rest of its life
/// (for threads that do all their work there, and for `--netns`).
pub fn enter_for_good(name: &str) -> Result<()> {
    let f = File::open(path(name)).with_context(|| {
        format!("network namespace {name} does not exist (see `ip netns list`)")
    })?;
    setns(&f, CloneFlags::CLONE_NEWNET)
        .with_context(|| format!("cannot enter network namespace {name} (are you root?)"))
}

/// How many processes named `comm` run in namespace `name` (`ip netns
/// pids`): for tests that check what they started has gone.
pub fn processes_named(name: &str, comm: &str) -> Result<usize> {
    let pids = crate::cmd::run("ip", &["netns", "pids", name])?;
    Ok(pids
        .lines()
        .filter(|pid| {
            std::fs::read_to_string(format!("/proc/{}/comm", pid.trim()))
                .is_ok_and(|c| c.trim() == comm)
        })
        .count())
}
