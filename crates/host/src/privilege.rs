//! Privilege checks done before anything is changed.
use anyhow::{bail, Result};

/// Fails unless running as root: namespaces, veths and BPF need it.
pub fn require_root(what: &str) -> Result<()> {
    if !nix::unistd::geteuid().is_root() {
        bail!("{what} needs root (network namespaces, veth and BPF): run it as root or with sudo");
    }
    Ok(())
}
