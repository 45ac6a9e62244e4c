//! CPU facts and thread pinning.
use anyhow::{bail, Context, Result};
use nix::sched::{sched_getaffinity, sched_setaffinity, CpuSet};
use nix::unistd::Pid;

/// CPUs online, from sysconf (not the calling thread's affinity: a
/// thread pinned to one CPU may pin itself or others to another).
pub fn online() -> usize {
    // SAFETY: sysconf has no side effects.
    let n = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) };
    if n < 1 {
        1
    } else {
        n as usize
    }
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

/// Runs `f` with the calling thread held on the CPU it is on, then lets it
/// go where it could before: for work on per-CPU state (a BPF program's
/// per-CPU map run with BPF_PROG_RUN) that must see one CPU's throughout.
pub fn on_this_cpu<T>(f: impl FnOnce() -> Result<T>) -> Result<T> {
    let me = Pid::from_raw(0);
    let allowed = sched_getaffinity(me).context("sched_getaffinity")?;
    pin(0, current()?)?;
    let out = f();
    sched_setaffinity(me, &allowed).context("cannot restore the thread's CPUs")?;
    out
}

#[cfg(test)]
mod tests {
    /// Pinned to the last CPU, a thread still sees every CPU online, and
    /// may move to the first.
    #[test]
    fn a_pinned_thread_still_sees_every_cpu_online() {
        let all = super::online();
        std::thread::spawn(move || {
            super::pin(0, all - 1).unwrap();
            assert_eq!(super::online(), all);
            super::pin(0, 0).unwrap();
        })
        .join()
        .unwrap();
    }
}
