//! The path and the traffic of a trial as the command line gives them
//! (`linerate search`, `linerate trial`): a local lab that is up, or named
//! interfaces (the generator's and the receiver's, their namespaces, the
//! DUT's MAC); a frame length, family and address ranges.
use crate::measure::Path;
use crate::scenario::{Family, Profile};
use anyhow::{anyhow, bail, Result};
use linerate_lab::topology;
use linerate_traffic::frame::parse_mac;
use linerate_traffic::profile::{Sender, Traffic};

/// The flags, as given (`-i`, `-r`, `-D`, `-S`, `--gen-netns`,
/// `--recv-netns`, `--lab`, `--gen-cpu`).
pub struct PathFlags {
    pub lab: Option<String>,
    pub gen_iface: Option<String>,
    pub gen_netns: Option<String>,
    pub recv_iface: Option<String>,
    pub recv_netns: Option<String>,
    pub dst_mac: Option<String>,
    pub src_mac: Option<String>,
    pub gen_cpu: usize,
}

impl PathFlags {
    /// The path the flags give: a lab that is up, or named interfaces.
    pub fn path(&self) -> Result<Path> {
        let a = self;
        if let Some(i) = &a.gen_iface {
            if a.lab.is_some() {
                bail!("--lab and -i: give a lab or interfaces, not both");
            }
            let recv = a
                .recv_iface
                .clone()
                .ok_or_else(|| anyhow!("-i: also give the receiving interface with -r"))?;
            let dst_mac = a
                .dst_mac
                .clone()
                .ok_or_else(|| anyhow!("-i: also give the DUT's MAC with -D"))?;
            let src_mac = match &a.src_mac {
                Some(m) => m.clone(),
                None => linerate_host::cmd::interface_mac(a.gen_netns.as_deref(), i)?,
            };
            let ns = |n: &Option<String>| -> Result<String> {
                match n {
                    Some(n) if !linerate_host::netns::exists(n) => {
                        bail!("network namespace {n} does not exist")
                    }
                    Some(n) => Ok(n.clone()),
                    // The trial enters a namespace for each side: ours.
                    None => Ok(format!("/proc/{}/ns/net", std::process::id())),
                }
            };
            return Ok(Path {
                gen_netns: ns(&a.gen_netns)?,
                sender: Sender {
                    ifname: i.clone(),
                    src_mac: parse_mac("-S", &src_mac)?,
                    dst_mac: parse_mac("-D", &dst_mac)?,
                    cpu: a.gen_cpu,
                    other_ports: Vec::new(),
                },
                gen_cpus: Vec::new(),
                recv_netns: ns(&a.recv_netns)?,
                recv_iface: recv,
            });
        }
        let name = a
            .lab
            .clone()
            .unwrap_or_else(|| topology::DEFAULT_NAME.into());
        if linerate_lab::find(&name)?.is_none() {
            bail!("lab {name} is not up: `linerate lab up --name {name}` first, or give -i/-r/-D");
        }
        let spec = linerate_lab::LabSpec::new(&name);
        let ns = spec.namespaces();
        let ifs = topology::Interfaces::default();
        Ok(Path {
            gen_netns: ns.gen,
            sender: Sender {
                ifname: ifs.gen,
                src_mac: parse_mac("the lab's generator MAC", topology::mac::GEN)?,
                dst_mac: parse_mac("the lab's DUT MAC", topology::mac::DUT_IN)?,
                cpu: a.gen_cpu,
                other_ports: Vec::new(),
            },
            gen_cpus: Vec::new(),
            recv_netns: ns.recv,
            recv_iface: ifs.recv,
        })
    }
}

/// The traffic of `-l LEN`, `-6`, `-s SRC`, `-d DST`, checked; a field
/// refused is said as its flag.
pub fn traffic(len: &str, ipv6: bool, src: Option<String>, dst: Option<String>) -> Result<Traffic> {
    let family = if ipv6 { Family::Ipv6 } else { Family::Ipv4 };
    let profile = Profile {
        src,
        dst,
        ..Profile::new(family, len)
    };
    profile.check().map_err(|e| {
        let flag = match e.field {
            "len" => "-l",
            "src" => "-s",
            _ => "-d",
        };
        anyhow!("{flag}: {}", e.reason)
    })
}
