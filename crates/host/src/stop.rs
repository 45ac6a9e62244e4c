//! Ctrl-C and SIGTERM become a flag that long-running commands poll, so
//! they stop cleanly (detach XDP, remove a lab) instead of dying mid-way.
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::OnceLock;

static STOP: OnceLock<&'static AtomicBool> = OnceLock::new();

/// The process-wide stop flag, with the signal handler installed.
pub fn flag() -> &'static AtomicBool {
    STOP.get_or_init(|| {
        let f: &'static AtomicBool = Box::leak(Box::new(AtomicBool::new(false)));
        // Installing fails only if another handler is set; then signals keep
        // their default action, which is still safe (BPF links detach).
        let _ = ctrlc::set_handler(move || f.store(true, Ordering::SeqCst));
        f
    })
}
