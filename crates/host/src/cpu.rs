//! CPU facts and thread pinning.
use anyhow::{bail, Context, Result};
use nix::sched::{sched_setaffinity, CpuSet};
use nix::unistd::Pid;

/// CPUs online, from sysconf.
pub fn online() -> usize {
    std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
}

/// Pins the calling thread (pid 0) or task `pid` to `cpu`.
pub fn pin(pid: i32, cpu: usize) -> Result<()> {
    if cpu >= CpuSet::count() || cpu >= online() {
        bail!(
            "CPU {cpu} does not exist (this machine has {} online)",
            online()
        );
    }
    let mut set = CpuSet::new();
    set.set(cpu)?;
    sched_setaffinity(Pid::from_raw(pid), &set)
        .with_context(|| format!("cannot pin task {pid} to CPU {cpu}"))
}

/// The CPU the calling thread runs on right now.
pub fn current() -> Result<usize> {
    // SAFETY: sched_getcpu has no arguments and no side effects.
    let c = unsafe { libc::sched_getcpu() };
    if c < 0 {
        bail!("sched_getcpu: {}", std::io::Error::last_os_error());
    }
    Ok(c as usize)
}
