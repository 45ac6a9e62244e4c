//! A scratch namespace holding one veth pair, for benchmarks that need a
//! wire and nothing else (the generator's own rate). Dropping it deletes
//! the namespace and with it the pair.
use crate::setup::{threaded_napi, NapiThread};
use anyhow::Result;
use linerate_host::cmd::{in_netns, ip};

#[derive(Debug)]
pub struct ScratchPair {
    pub netns: String,
    /// The sending end and the receiving end.
    pub tx: String,
    pub rx: String,
    pub napi: Vec<NapiThread>,
}

impl ScratchPair {
    /// Namespace `lrbench-<pid>` with `lrb<pid>t` <-> `lrb<pid>r`; the
    /// receiving end's NAPI thread is pinned to `rx_cpu`, so what happens
    /// at the receiver does not run on the sender's CPU.
    pub fn new(rx_cpu: usize) -> Result<Self> {
        let pid = std::process::id();
        let pair = ScratchPair {
            netns: format!("lrbench-{pid}"),
            tx: format!("lrb{pid}t"),
            rx: format!("lrb{pid}r"),
            napi: Vec::new(),
        };
        ip(None, &["netns", "add", &pair.netns])?;
        // From here on, Drop removes whatever was made.
        let mut pair = pair;
        let ns = pair.netns.clone();
        ip(
            Some(&ns),
            &[
                "link", "add", &pair.tx, "type", "veth", "peer", "name", &pair.rx,
            ],
        )?;
        for dev in [&pair.tx, &pair.rx] {
            ip(Some(&ns), &["link", "set", dev, "up"])?;
        }
        in_netns(&ns, "ethtool", &["-K", &pair.tx, "tso", "off"])?;
        in_netns(&ns, "ethtool", &["-K", &pair.rx, "gro", "on"])?;
        pair.napi = threaded_napi(&ns, &pair.rx, rx_cpu)?;
        Ok(pair)
    }
}

impl Drop for ScratchPair {
    fn drop(&mut self) {
        let _ = ip(None, &["netns", "del", &self.netns]);
    }
}
