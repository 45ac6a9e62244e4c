//! What a lab looks like right now, read back from the kernel with
//! `ip -json`: namespaces, links, addresses, attached XDP programs, counters.
use crate::setup::NapiThread;
use crate::state::LabRecord;
use crate::topology::{Interfaces, Namespaces};
use anyhow::{Context, Result};
use linerate_host::cmd::ip;
use linerate_host::netns;
use serde::Serialize;
use serde_json::Value;
use std::fmt;

#[derive(Debug, Serialize)]
pub struct LabStatus {
    pub name: String,
    pub queues: u32,
    pub namespaces: Namespaces,
    pub interfaces: Interfaces,
    /// Namespaces of the lab that exist now.
    pub namespaces_present: Vec<String>,
    pub links: Vec<LinkStatus>,
    pub dut_forwarding: Forwarding,
    pub napi_threads: Vec<NapiStatus>,
}

#[derive(Debug, Serialize)]
pub struct Forwarding {
    pub ipv4: bool,
    pub ipv6: bool,
}

#[derive(Debug, Serialize)]
pub struct NapiStatus {
    pub pid: i32,
    pub cpu: usize,
    /// Whether the thread still exists (it goes if NAPI is disabled).
    pub alive: bool,
}

#[derive(Debug, Serialize, PartialEq, Eq)]
pub struct LinkStatus {
    pub role: String,
    pub namespace: String,
    pub ifname: String,
    pub ifindex: u64,
    pub operstate: String,
    pub mac: String,
    pub mtu: u64,
    pub rx_queues: u64,
    pub addresses: Vec<String>,
    pub xdp: Vec<XdpProg>,
    pub rx_packets: u64,
    pub rx_bytes: u64,
    pub rx_dropped: u64,
    pub tx_packets: u64,
    pub tx_bytes: u64,
    pub tx_dropped: u64,
}

#[derive(Debug, Serialize, PartialEq, Eq)]
pub struct XdpProg {
    pub id: u64,
    pub name: String,
    /// native, generic, offload
    pub mode: String,
}

/// Reads the status of the lab recorded in `rec`.
pub fn read(rec: &LabRecord) -> Result<LabStatus> {
    let ns = rec.spec.namespaces();
    let ifs = Interfaces::default();
    let present: Vec<String> = ns
        .all()
        .iter()
        .filter(|n| netns::exists(n))
        .map(|n| n.to_string())
        .collect();
    let mut links = Vec::new();
    let mut ends = vec![
        ("gen", &ns.gen, &ifs.gen),
        ("dut_in", &ns.dut, &ifs.dut_in),
        ("dut_out", &ns.dut, &ifs.dut_out),
        ("recv", &ns.recv, &ifs.recv),
    ];
    if rec.spec.gen_ports > 1 {
        ends.push(("gen_port2", &ns.gen, &ifs.gen_port2));
        ends.push(("dut_port2", &ns.dut, &ifs.dut_port2));
    }
    for (role, n, dev) in ends {
        if !present.contains(n) {
            continue;
        }
        if let Some(l) = link(role, n, dev)? {
            links.push(l);
        }
    }
    let dut_forwarding = if present.contains(&ns.dut) {
        forwarding(&ns.dut)?
    } else {
        Forwarding {
            ipv4: false,
            ipv6: false,
        }
    };
    let napi_threads = rec
        .napi_threads
        .iter()
        .map(|NapiThread { pid, cpu }| NapiStatus {
            pid: *pid,
            cpu: *cpu,
            alive: std::path::Path::new(&format!("/proc/{pid}")).exists(),
        })
        .collect();
    Ok(LabStatus {
        name: rec.spec.name.clone(),
        queues: rec.spec.queues,
        namespaces: ns,
        interfaces: ifs,
        namespaces_present: present,
        links,
        dut_forwarding,
        napi_threads,
    })
}

fn link(role: &str, ns: &str, dev: &str) -> Result<Option<LinkStatus>> {
    let Ok(out) = ip(Some(ns), &["-j", "-s", "-d", "link", "show", "dev", dev]) else {
        return Ok(None);
    };
    let v: Value = serde_json::from_str(&out)
        .with_context(|| format!("`ip -j link show` printed bad JSON for {dev}"))?;
    let Some(l) = v.get(0) else { return Ok(None) };
    let addrs: Value = serde_json::from_str(&ip(Some(ns), &["-j", "addr", "show", "dev", dev])?)?;
    Ok(Some(parse_link(
        role,
        ns,
        l,
        addrs.get(0).unwrap_or(&Value::Null),
    )))
}

/// Builds a LinkStatus from one `ip -j -s -d link` object and its
/// `ip -j addr` object.
fn parse_link(role: &str, ns: &str, l: &Value, addrs: &Value) -> LinkStatus {
    let u = |p: &str| l.pointer(p).and_then(Value::as_u64).unwrap_or(0);
    let s = |p: &str| {
        l.pointer(p)
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string()
    };
    let xdp = l
        .pointer("/xdp/attached")
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(xdp_prog).collect())
        .or_else(|| l.get("xdp").and_then(xdp_prog).map(|p| vec![p]))
        .unwrap_or_default();
    let addresses = addrs
        .get("addr_info")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter(|x| x.get("scope").and_then(Value::as_str) == Some("global"))
                .filter_map(|x| {
                    Some(format!(
                        "{}/{}",
                        x.get("local")?.as_str()?,
                        x.get("prefixlen")?.as_u64()?
                    ))
                })
                .collect()
        })
        .unwrap_or_default();
    LinkStatus {
        role: role.into(),
        namespace: ns.into(),
        ifname: s("/ifname"),
        ifindex: u("/ifindex"),
        operstate: s("/operstate"),
        mac: s("/address"),
        mtu: u("/mtu"),
        rx_queues: u("/num_rx_queues"),
        addresses,
        xdp,
        rx_packets: u("/stats64/rx/packets"),
        rx_bytes: u("/stats64/rx/bytes"),
        rx_dropped: u("/stats64/rx/dropped"),
        tx_packets: u("/stats64/tx/packets"),
        tx_bytes: u("/stats64/tx/bytes"),
        tx_dropped: u("/stats64/tx/dropped"),
    }
}

fn xdp_prog(a: &Value) -> Option<XdpProg> {
    let prog = a.get("prog")?;
    let mode = match a.get("mode").and_then(Value::as_u64) {
        Some(1) => "native",
        Some(2) => "generic",
        Some(3) => "offload",
        _ => "unknown",
    };
    Some(XdpProg {
        id: prog.get("id")?.as_u64()?,
        name: prog
            .get("name")
            .and_then(Value::as_str)
            .unwrap_or("")
            .into(),
        mode: mode.into(),
    })
}

fn forwarding(ns: &str) -> Result<Forwarding> {
    let _in = netns::NetnsGuard::enter(ns)?;
    let read = |p: &str| {
        std::fs::read_to_string(p)
            .map(|s| s.trim() == "1")
            .unwrap_or(false)
    };
    Ok(Forwarding {
        ipv4: read("/proc/sys/net/ipv4/ip_forward"),
        ipv6: read("/proc/sys/net/ipv6/conf/all/forwarding"),
    })
}

impl fmt::Display for LabStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "lab {} ({} queue{} per veth)",
            self.name,
            self.queues,
            if self.queues == 1 { "" } else { "s" }
        )?;
        for n in self.namespaces.all() {
            let state = if self.namespaces_present.iter().any(|p| p == n) {
                "present"
            } else {
                "MISSING"
            };
            writeln!(f, "  netns {n:<24} {state}")?;
        }
        writeln!(
            f,
            "  dut forwarding: ipv4 {}, ipv6 {}",
            on_off(self.dut_forwarding.ipv4),
            on_off(self.dut_forwarding.ipv6)
        )?;
        for t in &self.napi_threads {
            writeln!(
                f,
                "  napi thread pid {} on CPU {}{}",
                t.pid,
                t.cpu,
                if t.alive { "" } else { " (gone)" }
            )?;
        }
        writeln!(
            f,
            "  {:<8} {:<16} {:<7} {:<5} {:>12} {:>12} {:>9} {:>12} {:>12} {:>9}  xdp",
            "role",
            "interface",
            "state",
            "mtu",
            "rx pkts",
            "rx bytes",
            "rx drop",
            "tx pkts",
            "tx bytes",
            "tx drop"
        )?;
        for l in &self.links {
            let xdp = if l.xdp.is_empty() {
                "-".to_string()
            } else {
                l.xdp
                    .iter()
                    .map(|p| format!("{}#{} ({})", p.name, p.id, p.mode))
                    .collect::<Vec<_>>()
                    .join(", ")
            };
            writeln!(
                f,
                "  {:<8} {:<16} {:<7} {:<5} {:>12} {:>12} {:>9} {:>12} {:>12} {:>9}  {}",
                l.role,
                format!("{}@{}", l.ifname, short_ns(&l.namespace)),
                l.operstate,
                l.mtu,
                l.rx_packets,
                l.rx_bytes,
                l.rx_dropped,
                l.tx_packets,
                l.tx_bytes,
                l.tx_dropped,
                xdp
            )?;
            writeln!(f, "  {:<8} {} {}", "", l.mac, l.addresses.join(" "))?;
        }
        Ok(())
    }
}

fn on_off(b: bool) -> &'static str {
    if b {
        "on"
    } else {
        "off"
    }
}

fn short_ns(ns: &str) -> &str {
    ns.rsplit('-').next().unwrap_or(ns)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_ip_json_link_with_xdp_and_counters() {
        let l: Value = serde_json::from_str(
            r#"{"ifindex":3,"ifname":"a0","mtu":1500,"operstate":"UP","address":"02:00:00:00:00:01",
            "num_rx_queues":2,"xdp":{"mode":2,"prog":{"id":101,"name":"lab_recv"},
            "attached":[{"mode":2,"prog":{"id":101,"name":"lab_recv"}}]},
            "stats64":{"rx":{"bytes":90,"packets":1,"dropped":4},"tx":{"bytes":180,"packets":2,"dropped":0}}}"#,
        )
        .unwrap();
        let a: Value = serde_json::from_str(
            r#"{"addr_info":[{"family":"inet","local":"198.18.0.1","prefixlen":24,"scope":"global"},
            {"family":"inet6","local":"fe80::1","prefixlen":64,"scope":"link"}]}"#,
        )
        .unwrap();
        let s = parse_link("gen", "x-gen", &l, &a);
        assert_eq!(
            s.xdp,
            vec![XdpProg {
                id: 101,
                name: "lab_recv".into(),
                mode: "generic".into()
            }]
        );
        assert_eq!(
            (s.rx_packets, s.rx_bytes, s.rx_dropped, s.tx_packets),
            (1, 90, 4, 2)
        );
        assert_eq!(s.addresses, vec!["198.18.0.1/24"]);
        assert_eq!((s.ifindex, s.rx_queues, s.mtu), (3, 2, 1500));
    }

    #[test]
    fn link_without_xdp_has_none() {
        let l: Value = serde_json::from_str(r#"{"ifname":"a0"}"#).unwrap();
        assert!(parse_link("gen", "n", &l, &Value::Null).xdp.is_empty());
    }
}
