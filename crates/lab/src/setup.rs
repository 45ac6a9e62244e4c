//! Building and removing a lab. Every step is an `ip`/`ethtool` call or a
//! sysctl written from inside the namespace; a failing step removes what the
//! earlier steps made before the error is returned.
use crate::topology::{addr, mac, Interfaces, LabSpec};
use anyhow::{Context, Result};
use linerate_host::cmd::{in_netns, ip};
use linerate_host::netns::{self, NetnsGuard};

/// A threaded-NAPI kernel thread of the DUT and the CPU it was pinned to.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct NapiThread {
    pub pid: i32,
    pub cpu: usize,
}

/// Builds the topology of `spec`. The namespaces must not exist yet.
pub fn build(spec: &LabSpec) -> Result<Vec<NapiThread>> {
    let ns = spec.namespaces();
    let mut made: Vec<String> = Vec::new();
    let result = (|| -> Result<Vec<NapiThread>> {
        for n in ns.all() {
            ip(None, &["netns", "add", n])?;
            made.push(n.to_string());
        }
        links(spec)?;
        addresses(spec)?;
        routes_and_neighbours(spec)?;
        sysctls(spec)?;
        tune(spec)
    })();
    result.map_err(|e| {
        for n in made.iter().rev() {
            let _ = ip(None, &["netns", "del", n]);
        }
        e.context(format!(
            "building lab {} failed; removed what was built",
            spec.name
        ))
    })
}

/// Removes the lab's namespaces, and with them its veths and any XDP
/// programs attached to them. Returns the namespaces that were removed.
pub fn remove(spec: &LabSpec) -> Result<Vec<String>> {
    let mut removed = Vec::new();
    for n in spec.namespaces().all() {
        if netns::exists(n) {
            ip(None, &["netns", "del", n])?;
            removed.push(n.to_string());
        }
    }
    Ok(removed)
}

fn links(spec: &LabSpec) -> Result<()> {
    let ns = spec.namespaces();
    let i = Interfaces::default();
    let q = spec.queues.to_string();
    let pair = |a: &str, a_ns: &str, b: &str, b_ns: &str| {
        ip(
            None,
            &[
                "link",
                "add",
                a,
                "netns",
                a_ns,
                "numtxqueues",
                &q,
                "numrxqueues",
                &q,
                "type",
                "veth",
                "peer",
                "name",
                b,
                "netns",
                b_ns,
                "numtxqueues",
                &q,
                "numrxqueues",
                &q,
            ],
        )
    };
    pair(&i.gen, &ns.gen, &i.dut_in, &ns.dut)?;
    pair(&i.dut_out, &ns.dut, &i.recv, &ns.recv)?;
    let mut ends = vec![
        (&ns.gen, &i.gen, mac::GEN),
        (&ns.dut, &i.dut_in, mac::DUT_IN),
        (&ns.dut, &i.dut_out, mac::DUT_OUT),
        (&ns.recv, &i.recv, mac::RECV),
    ];
    if spec.gen_ports > 1 {
        pair(&i.gen_port2, &ns.gen, &i.dut_port2, &ns.dut)?;
        ends.push((&ns.gen, &i.gen_port2, mac::GEN_PORT2));
        ends.push((&ns.dut, &i.dut_port2, mac::DUT_PORT2));
    }
    for (n, dev, mac) in ends {
        ip(Some(n), &["link", "set", "dev", dev, "address", mac])?;
        ip(
            Some(n),
            &["link", "set", "dev", dev, "mtu", &spec.mtu.to_string()],
        )?;
        ip(Some(n), &["link", "set", "dev", dev, "up"])?;
    }
    for n in ns.all() {
        ip(Some(n), &["link", "set", "dev", "lo", "up"])?;
    }
    Ok(())
}

fn addresses(spec: &LabSpec) -> Result<()> {
    let ns = spec.namespaces();
    let i = Interfaces::default();
    let mut ends = vec![
        (&ns.gen, &i.gen, addr::GEN_V4, addr::GEN_V6),
        (&ns.dut, &i.dut_in, addr::DUT_IN_V4, addr::DUT_IN_V6),
        (&ns.dut, &i.dut_out, addr::DUT_OUT_V4, addr::DUT_OUT_V6),
        (&ns.recv, &i.recv, addr::RECV_V4, addr::RECV_V6),
    ];
    if spec.gen_ports > 1 {
        ends.push((
            &ns.gen,
            &i.gen_port2,
            addr::GEN_PORT2_V4,
            addr::GEN_PORT2_V6,
        ));
        ends.push((
            &ns.dut,
            &i.dut_port2,
            addr::DUT_PORT2_V4,
            addr::DUT_PORT2_V6,
        ));
    }
    for (n, dev, a4, a6) in ends {
        ip(Some(n), &["addr", "add", &format!("{a4}/24"), "dev", dev])?;
        // nodad: the address is usable at once, no duplicate detection wait.
        ip(
            Some(n),
            &[
                "-6",
                "addr",
                "add",
                &format!("{a6}/64"),
                "dev",
                dev,
                "nodad",
            ],
        )?;
    }
    Ok(())
}

fn routes_and_neighbours(spec: &LabSpec) -> Result<()> {
    let ns = spec.namespaces();
    let i = Interfaces::default();
    let route = |n: &str, net: &str, via: &str| ip(Some(n), &["route", "add", net, "via", via]);
    // The DUT routes each benchmark range to its side; the end hosts send
    // everything through the DUT.
    route(&ns.dut, addr::GEN_NET_V4, addr::GEN_V4)?;
    route(&ns.dut, addr::RECV_NET_V4, addr::RECV_V4)?;
    route(&ns.dut, addr::GEN_NET_V6, addr::GEN_V6)?;
    route(&ns.dut, addr::RECV_NET_V6, addr::RECV_V6)?;
    route(&ns.gen, addr::RECV_NET_V4, addr::DUT_IN_V4)?;
    route(&ns.gen, addr::RECV_NET_V6, addr::DUT_IN_V6)?;
    route(&ns.recv, addr::GEN_NET_V4, addr::DUT_OUT_V4)?;
    route(&ns.recv, addr::GEN_NET_V6, addr::DUT_OUT_V6)?;
    // Static neighbours: no ARP/ND traffic during measurements.
    for (n, dev, a, m) in [
        (&ns.gen, &i.gen, addr::DUT_IN_V4, mac::DUT_IN),
        (&ns.gen, &i.gen, addr::DUT_IN_V6, mac::DUT_IN),
        (&ns.dut, &i.dut_in, addr::GEN_V4, mac::GEN),
        (&ns.dut, &i.dut_in, addr::GEN_V6, mac::GEN),
        (&ns.dut, &i.dut_out, addr::RECV_V4, mac::RECV),
        (&ns.dut, &i.dut_out, addr::RECV_V6, mac::RECV),
        (&ns.recv, &i.recv, addr::DUT_OUT_V4, mac::DUT_OUT),
        (&ns.recv, &i.recv, addr::DUT_OUT_V6, mac::DUT_OUT),
    ] {
        static_neighbour(n, a, m, dev)?;
    }
    if spec.gen_ports > 1 {
        second_port_routes(spec)?;
    }
    Ok(())
}

/// The second port: the DUT routes its network to it; the generator's
/// sockets bound to its addresses (a routing daemon's session) leave by
/// it, through a table of their own chosen by source, since the main
/// table sends the receiver's network out of the first port.
fn second_port_routes(spec: &LabSpec) -> Result<()> {
    let ns = spec.namespaces();
    let i = Interfaces::default();
    let table = SECOND_PORT_TABLE.to_string();
    for (family, net, gen, recv, via) in [
        (
            "-4",
            addr::GEN_PORT2_NET_V4,
            addr::GEN_PORT2_V4,
            addr::RECV_NET_V4,
            addr::DUT_PORT2_V4,
        ),
        (
            "-6",
            addr::GEN_PORT2_NET_V6,
            addr::GEN_PORT2_V6,
            addr::RECV_NET_V6,
            addr::DUT_PORT2_V6,
        ),
    ] {
        ip(Some(&ns.dut), &[family, "route", "add", net, "via", gen])?;
        ip(
            Some(&ns.gen),
            &[family, "rule", "add", "from", net, "lookup", &table],
        )?;
        let dev = i.gen_port2.as_str();
        ip(
            Some(&ns.gen),
            &[
                family, "route", "add", recv, "via", via, "dev", dev, "table", &table,
            ],
        )?;
    }
    for (n, dev, a, m) in [
        (&ns.gen, &i.gen_port2, addr::DUT_PORT2_V4, mac::DUT_PORT2),
        (&ns.gen, &i.gen_port2, addr::DUT_PORT2_V6, mac::DUT_PORT2),
        (&ns.dut, &i.dut_port2, addr::GEN_PORT2_V4, mac::GEN_PORT2),
        (&ns.dut, &i.dut_port2, addr::GEN_PORT2_V6, mac::GEN_PORT2),
    ] {
        static_neighbour(n, a, m, dev)?;
    }
    Ok(())
}

/// The generator namespace's table for what leaves by the second port.
pub const SECOND_PORT_TABLE: u32 = 2;

/// Neighbour `addr` at `mac` on `dev` of namespace `ns`, permanent: no
/// ARP or ND traffic during measurements.
pub fn static_neighbour(ns: &str, addr: &str, mac: &str, dev: &str) -> Result<()> {
    ip(
        Some(ns),
        &[
            "neigh",
            "replace",
            addr,
            "lladdr",
            mac,
            "dev",
            dev,
            "nud",
            "permanent",
        ],
    )
    .map(|_| ())
}

/// Writes a sysctl of namespace `ns` (the /proc/sys/net tree a thread sees
/// is its network namespace's).
fn sysctl(ns: &str, key: &str, value: &str) -> Result<()> {
    let _in = NetnsGuard::enter(ns)?;
    let path = format!("/proc/sys/{}", key.replace('.', "/"));
    std::fs::write(&path, value).with_context(|| format!("cannot set {key}={value} in {ns}"))
}

fn sysctls(spec: &LabSpec) -> Result<()> {
    let ns = spec.namespaces();
    sysctl(&ns.dut, "net.ipv4.ip_forward", "1")?;
    sysctl(&ns.dut, "net.ipv6.conf.all.forwarding", "1")?;
    for n in ns.all() {
        // No rp_filter or redirect surprises in a benchmark.
        sysctl(n, "net.ipv4.conf.all.rp_filter", "0")?;
        sysctl(n, "net.ipv4.conf.default.rp_filter", "0")?;
        sysctl(n, "net.ipv4.conf.all.send_redirects", "0")?;
    }
    // The receiver drops what it is sent; it must not forward it back.
    sysctl(&ns.recv, "net.ipv4.ip_forward", "0")?;
    Ok(())
}

/// The veth tuning the lab needs (docs/lab.md): a veth without NAPI runs
/// the receive on the sender's CPU, so the DUT's receiving veth gets NAPI
/// (GRO on), threaded and pinned, and the DUT's work runs on its own CPU;
/// AF_PACKET frames skip veth NAPI while the sender has TSO on, so TSO is
/// off on the generator side.
fn tune(spec: &LabSpec) -> Result<Vec<NapiThread>> {
    let ns = spec.namespaces();
    let i = Interfaces::default();
    in_netns(&ns.gen, "ethtool", &["-K", &i.gen, "tso", "off"])?;
    in_netns(&ns.dut, "ethtool", &["-K", &i.dut_in, "gro", "on"])?;
    // A veth takes frames an XDP program redirects into it only if its
    // peer has NAPI (an XDP program or GRO on); otherwise it drops them
    // silently. The receiver's end gets GRO so that an XDP DUT's frames
    // arrive whether or not an XDP receiver is attached, and so does the
    // generator's, for what an XDP DUT forwards back (ICMP errors to it).
    in_netns(&ns.recv, "ethtool", &["-K", &i.recv, "gro", "on"])?;
    in_netns(&ns.gen, "ethtool", &["-K", &i.gen, "gro", "on"])?;
    // And the DUT's outgoing end, for what an XDP receiver sends back
    // (`recv --receiver answer`, establishing a stateful DUT's
    // connections): without it a DUT with no XDP program there (the
    // kernel) never sees the answers, and its connections stay
    // unreplied.
    in_netns(&ns.dut, "ethtool", &["-K", &i.dut_out, "gro", "on"])?;
    // Checksums complete on the wire, as a NIC sends them: a veth hands a
    // local socket's segment on with its checksum partial (the
    // pseudo-header's sum only), which the kernel's conntrack trusts
    // (CHECKSUM_PARTIAL) and XDP cannot tell from a wrong one. The lab's
    // own generator writes complete checksums; this is for the sockets
    // people run at its ends (iperf3, ping, a test's client).
    for (n, dev) in [(&ns.gen, &i.gen), (&ns.recv, &i.recv)] {
        in_netns(n, "ethtool", &["-K", dev, "tx", "off"])?;
    }
    let mut threads = threaded_napi(&ns.dut, &i.dut_in, spec.dut_cpu)?;
    if spec.gen_ports > 1 {
        // The second port as the first: its DUT end on the DUT's CPU.
        in_netns(
            &ns.gen,
            "ethtool",
            &["-K", &i.gen_port2, "tso", "off", "tx", "off", "gro", "on"],
        )?;
        in_netns(&ns.dut, "ethtool", &["-K", &i.dut_port2, "gro", "on"])?;
        threads.extend(threaded_napi(&ns.dut, &i.dut_port2, spec.dut_cpu)?);
    }
    Ok(threads)
}

/// Turns on threaded NAPI for `dev` (in namespace `ns`) and pins its new
/// `napi/<dev>-*` threads to CPUs from `first_cpu` on, one queue each.
pub fn threaded_napi(ns: &str, dev: &str, first_cpu: usize) -> Result<Vec<NapiThread>> {
    let _lock = napi_lock()?;
    let before = napi_threads(dev);
    in_netns(
        ns,
        "sh",
        &["-c", &format!("echo 1 > /sys/class/net/{dev}/threaded")],
    )?;
    let mine: Vec<(i32, u32)> = napi_threads(dev)
        .into_iter()
        .filter(|p| !before.contains(p))
        .collect();
    pin_by_queue(mine, first_cpu)
}

/// Puts `k` of the lab's veth queues in use (`ethtool -L`): `k` receive
/// queues at the DUT's port, so that frames land on `k` NAPI threads, and
/// `k` at the generator's end (XDP on a veth wants at least as many
/// receive queues as its peer transmits on). The DUT's NAPI threads,
/// `known` before the change, are pinned again: queue q on CPU
/// `spec.dut_cpu + q`. No XDP program may be attached to dut0 meanwhile.
pub fn use_queues(spec: &LabSpec, k: u32, known: &[NapiThread]) -> Result<Vec<NapiThread>> {
    let ns = spec.namespaces();
    let i = Interfaces::default();
    let _lock = napi_lock()?;
    let before = napi_threads(&i.dut_in);
    let n = k.to_string();
    for (netns, dev) in [(&ns.dut, &i.dut_in), (&ns.gen, &i.gen)] {
        in_netns(netns, "ethtool", &["-L", dev, "rx", &n, "tx", &n])?;
    }
    let mine: Vec<(i32, u32)> = napi_threads(&i.dut_in)
        .into_iter()
        .filter(|t| !before.contains(t) || known.iter().any(|m| m.pid == t.0))
        .collect();
    let mut pinned = pin_by_queue(mine, spec.dut_cpu)?;
    // The second port's threads stay as they were.
    let port2 = napi_threads(&i.dut_port2);
    pinned.extend(
        known
            .iter()
            .filter(|m| port2.iter().any(|t| t.0 == m.pid))
            .cloned(),
    );
    Ok(pinned)
}

/// Threads are told apart by name, and every lab's DUT port has the same
/// name: two labs turning NAPI threads on at once would take each other's.
/// One at a time, across processes.
fn napi_lock() -> Result<std::fs::File> {
    std::fs::create_dir_all("/run/linerate")?;
    let lock = std::fs::File::create("/run/linerate/napi.lock")?;
    lock.lock()?;
    Ok(lock)
}

/// Pins NAPI threads (pid, NAPI id) to CPUs from `first_cpu` on, in the
/// order of their NAPI ids: a veth enables its queues' NAPI in queue
/// order, so the ids count the queues.
fn pin_by_queue(mut threads: Vec<(i32, u32)>, first_cpu: usize) -> Result<Vec<NapiThread>> {
    threads.sort_by_key(|t| t.1);
    let cpus = linerate_host::cpu::online();
    let mut pinned = Vec::new();
    for (q, (pid, _)) in threads.iter().enumerate() {
        let cpu = (first_cpu + q) % cpus;
        linerate_host::cpu::pin(*pid, cpu)?;
        pinned.push(NapiThread { pid: *pid, cpu });
    }
    Ok(pinned)
}

/// Kernel threads named `napi/<dev>-<id>` (threaded NAPI): pid and NAPI id.
pub fn napi_threads(dev: &str) -> Vec<(i32, u32)> {
    let prefix = format!("napi/{dev}-");
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.filter_map(|e| {
        let e = e.ok()?;
        let pid: i32 = e.file_name().to_str()?.parse().ok()?;
        let comm = std::fs::read_to_string(e.path().join("comm")).ok()?;
        let id = comm.trim_end().strip_prefix(&prefix)?.parse().ok()?;
        Some((pid, id))
    })
    .collect()
}
