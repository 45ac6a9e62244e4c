//! The service manager's protocol (sd_notify(3)), under systemd's
//! `Type=notify`: READY=1 once the router forwards, STOPPING=1 as it ends.
//! Without NOTIFY_SOCKET, every call here is a no-op.
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
