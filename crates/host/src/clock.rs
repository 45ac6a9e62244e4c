//! The one clock stamps are compared on.

/// CLOCK_MONOTONIC in nanoseconds: the clock `bpf_ktime_get_ns()` reads,
/// so stamps taken in BPF programs, in the generator and in the benches
/// compare directly.
pub fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: valid pointer to a timespec.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}
