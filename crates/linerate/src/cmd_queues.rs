//! `linerate queues`.
use crate::cli::QueuesArgs;
use anyhow::{bail, Result};
use linerate_daemon::queues::{watch, Watch};

pub fn run(a: QueuesArgs) -> Result<()> {
    linerate_host::privilege::require_root("linerate queues")?;
    if let Some(s) = a.seconds {
        if !(s > 0.0 && s.is_finite()) {
            bail!("-t: seconds must be a positive number, got {s}");
        }
    }
    let w = Watch {
        interfaces: a.interfaces,
        netns: a.netns,
        seconds: a.seconds,
        json: a.json,
    };
    watch(&w, linerate_host::stop::flag())
}
