//! Traffic through a lab for the benches that change a running DUT
//! (route changes, firewall changes): the generator's sender and its
//! thread in the generator's namespace.
use anyhow::Result;
use linerate_lab::topology::{self, Interfaces};
use linerate_traffic::frame::parse_mac;
use linerate_traffic::gen::{GenOptions, Generator};
use linerate_traffic::profile::Sender;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::thread::JoinHandle;

/// The lab's generator port, with its MAC and the DUT's, sending from
/// CPU `cpu`.
pub fn sender(ifs: &Interfaces, cpu: usize) -> Result<Sender> {
    Ok(Sender {
        ifname: ifs.gen.clone(),
        src_mac: parse_mac("the lab's generator MAC", topology::mac::GEN)?,
        dst_mac: parse_mac("the lab's DUT MAC", topology::mac::DUT_IN)?,
        cpu,
        other_ports: Vec::new(),
    })
}

/// Runs the generator with `opts` in namespace `netns` until its run
/// ends or `stop` is set.
pub fn spawn(netns: &str, opts: GenOptions, stop: Arc<AtomicBool>) -> JoinHandle<Result<()>> {
    let netns = netns.to_string();
    std::thread::spawn(move || -> Result<()> {
        linerate_host::netns::enter_for_good(&netns)?;
        Generator::new(&opts)?.run(&opts, &stop, |_| {}).map(drop)
    })
}
