//! What the route benches share to measure how the fast path follows the
//! kernel: linerate's router on a thread in a lab DUT's namespace, probe
//! frames for the attached XDP program, lag percentiles, and the memory
//! readings (this process, the BPF maps, the kernel's FIB).
use anyhow::{anyhow, bail, Result};
use linerate_bpf::loader::XdpMode;
use linerate_host::cmd;
use linerate_lab::topology::{addr, mac};
use linerate_lab::{Lab, LabSpec, UpOutcome};
use serde::Serialize;
use std::net::IpAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

#[derive(Clone, Copy, Debug, Default, Serialize)]
pub struct Lag {
    pub median: f64,
    pub p99: f64,
    pub max: f64,
}

impl Lag {
    /// `lag median 0.19 ms, p99 0.41 ms, max 0.52 ms (200 samples, 1 never
    /// followed)`: the lag of `samples` changes, and each of `notes` (a
    /// count and what it counts) that is not 0.
    pub fn said(&self, samples: usize, notes: &[(usize, &str)]) -> String {
        let notes: String = notes
            .iter()
            .filter(|(n, _)| *n > 0)
            .map(|(n, what)| format!(", {n} {what}"))
            .collect();
        format!(
            "lag median {:.2} ms, p99 {:.2} ms, max {:.2} ms ({samples} samples{notes})",
            self.median, self.p99, self.max
        )
    }

    /// Milliseconds from nanoseconds; nearest-rank percentiles.
    pub fn of(mut ns: Vec<u64>) -> Lag {
        if ns.is_empty() {
            return Lag::default();
        }
        ns.sort_unstable();
        let at = |q: f64| {
            let rank = ((q * ns.len() as f64).ceil() as usize).clamp(1, ns.len());
            ns[rank - 1] as f64 / 1e6
        };
        Lag {
            median: at(0.5),
            p99: at(0.99),
            max: at(1.0),
        }
    }
}

/// `--router-cpu`: the router on a CPU of its own needs another for the
/// rest, so two CPUs, and one that exists.
pub fn check_router_cpu(cpu: Option<usize>) -> Result<()> {
    if let Some(c) = cpu {
        let online = linerate_host::cpu::online();
        if online < 2 || c >= online {
            bail!(
                "--router-cpu: needs two CPUs and one of 0 to {}, got {c}",
                online.saturating_sub(1)
            );
        }
    }
    Ok(())
}

/// linerate's router (`linerate route`'s loop) on a thread of this
/// process in a lab DUT's namespace, so a bench reads its resyncs and
/// its memory is this process's.
pub struct RouterThread {
    stop: Arc<AtomicBool>,
    ready: Arc<AtomicBool>,
    resyncs: Arc<AtomicU64>,
    handle: Option<JoinHandle<Result<()>>>,
}

impl RouterThread {
    /// Starts it on `interfaces` of `netns`, pinned to `cpu` if given.
    pub fn spawn(
        netns: &str,
        interfaces: Vec<String>,
        record: &str,
        cpu: Option<usize>,
    ) -> Result<RouterThread> {
        let stop = Arc::new(AtomicBool::new(false));
        let ready = Arc::new(AtomicBool::new(false));
        let resyncs = Arc::new(AtomicU64::new(0));
        let opts = linerate_daemon::run::RouteOptions {
            interfaces,
            mode: XdpMode::Native,
            ipv6: linerate_fib::Ipv6Layout::default(),
            record: record.to_string(),
            nice: linerate_daemon::run::DEFAULT_NICE,
            status: Default::default(),
            service_manager: false,
            carry_tcp: false,
            police: Default::default(),
        };
        let handle = {
            let (ns, stop, ready, resyncs) = (
                netns.to_string(),
                stop.clone(),
                ready.clone(),
                resyncs.clone(),
            );
            std::thread::Builder::new()
                .name("bench-router".into())
                .spawn(move || -> Result<()> {
                    linerate_host::netns::enter_for_good(&ns)?;
                    if let Some(c) = cpu {
                        linerate_host::cpu::pin(0, c)?;
                    }
                    linerate_daemon::run::run(&opts, &stop, &ready, |s| {
                        resyncs.store(s.resyncs, Ordering::Relaxed)
                    })
                    .map(|_| ())
                })?
        };
        Ok(RouterThread {
            stop,
            ready,
            resyncs,
            handle: Some(handle),
        })
    }

    /// Waits until the router has read the kernel's tables and attached.
    pub fn wait_ready(&self, limit: Duration) -> Result<()> {
        let t = Instant::now();
        while !self.ready.load(Ordering::SeqCst) {
            let gone = self.handle.as_ref().is_none_or(|h| h.is_finished());
            if gone || t.elapsed() > limit {
                bail!("linerate's router did not start");
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        Ok(())
    }

    /// Resyncs so far (the router reports them once a second).
    pub fn resyncs(&self) -> u64 {
        self.resyncs.load(Ordering::Relaxed)
    }

    /// Stops it and says how it ended.
    pub fn stop(mut self) -> Result<()> {
        self.stop_and_join()
    }

    fn stop_and_join(&mut self) -> Result<()> {
        self.stop.store(true, Ordering::SeqCst);
        match self.handle.take() {
            Some(h) => h
                .join()
                .map_err(|_| anyhow!("the router thread panicked"))?,
            None => Ok(()),
        }
    }
}

impl Drop for RouterThread {
    fn drop(&mut self) {
        let _ = self.stop_and_join();
    }
}

/// A lab of its own for a bench (refused if one of the name is up), with
/// the receiver's addresses fixed on the DUT: the receiver drops
/// everything, neighbour solicitations too.
pub fn lab_with_fixed_receiver(name: &str) -> Result<Lab> {
    let (lab, outcome) = Lab::up(&LabSpec::new(name), false)?;
    if outcome == UpOutcome::AlreadyUp {
        bail!("lab {name} is already up");
    }
    let (ns, ifs) = (lab.namespaces(), lab.interfaces());
    for a in [addr::RECV_V4, addr::RECV_V6] {
        let fixed = [
            "neigh",
            "replace",
            a,
            "lladdr",
            mac::RECV,
            "dev",
            &ifs.dut_out,
            "nud",
            "permanent",
        ];
        if let Err(e) = cmd::ip(Some(&ns.dut), &fixed) {
            let _ = lab.down();
            return Err(e);
        }
    }
    Ok(lab)
}

/// A 60-byte (IPv4) or 78-byte (IPv6) UDP frame from the lab generator's
/// side to `dst`, as it arrives at the DUT's ingress.
pub fn frame_to(dst: IpAddr) -> Result<Vec<u8>> {
    let parse = |s: &str| -> Result<[u8; 6]> {
        let mut m = [0u8; 6];
        for (b, part) in m.iter_mut().zip(s.split(':')) {
            *b = u8::from_str_radix(part, 16)?;
        }
        Ok(m)
    };
    let eth = etherparse::PacketBuilder::ethernet2(parse(mac::GEN)?, parse(mac::DUT_IN)?);
    let builder = match dst {
        IpAddr::V4(d) => eth.ipv4([198, 18, 0, 1], d.octets(), 64),
        IpAddr::V6(d) => {
            let src: std::net::Ipv6Addr = linerate_lab::topology::addr::GEN_V6.parse()?;
            eth.ipv6(src.octets(), d.octets(), 64)
        }
    }
    .udp(1024, 1025);
    let payload = [0u8; 18];
    let mut f = Vec::with_capacity(builder.size(payload.len()));
    builder.write(&mut f, &payload)?;
    Ok(f)
}

/// (resident kB, of which BPF maps' mapped kB) of this process.
pub fn resident_kb() -> Result<(u64, u64)> {
    let smaps = std::fs::read_to_string("/proc/self/smaps")?;
    let (mut all, mut bpf, mut in_bpf) = (0, 0, false);
    for line in smaps.lines() {
        if let Some(kb) = line.strip_prefix("Rss:") {
            let kb: u64 = kb.trim().trim_end_matches("kB").trim().parse()?;
            all += kb;
            if in_bpf {
                bpf += kb;
            }
        } else if !line.contains(':') || line.split_whitespace().count() >= 5 {
            // A mapping's header line: address range, perms, ..., name.
            in_bpf = line.contains("bpf-map") || line.contains("bpf_arena");
        }
    }
    Ok((all, bpf))
}

pub fn slab_kb() -> Result<i64> {
    let m = std::fs::read_to_string("/proc/meminfo")?;
    m.lines()
        .find_map(|l| l.strip_prefix("Slab:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .ok_or_else(|| anyhow!("no Slab in /proc/meminfo"))
}

/// Installs `n` routes of an Internet table's length mix (generated, none
/// inside the `excluded` prefixes) in routing table `table` of `netns`,
/// via `gateway` on `oif`, in one `ip -batch`.
pub fn install_table(
    netns: &str,
    n: usize,
    table: u32,
    gateway: &str,
    oif: &str,
    excluded: &[(u32, u8)],
) -> Result<()> {
    use anyhow::Context;
    use std::io::Write;
    let routes = linerate_fib::synthetic::ipv4_routable(n, 2544, excluded);
    if routes.len() < n {
        bail!("--table: only {} routes could be generated", routes.len());
    }
    let mut f = tempfile::Builder::new()
        .prefix("linerate-bench-table")
        .tempfile()?;
    {
        let mut w = std::io::BufWriter::new(&mut f);
        for p in &routes {
            writeln!(
                w,
                "route add {p} via {gateway} dev {oif} table {table} proto static"
            )?;
        }
    }
    let r = cmd::ip(Some(netns), &["-batch", &f.path().display().to_string()]);
    r.map(drop).context("installing the table")
}

/// The main table's "Total size" in /proc/net/fib_triestat of `netns`.
pub fn kernel_fib_kb(netns: &str) -> Result<u64> {
    let s = cmd::in_netns(netns, "cat", &["/proc/net/fib_triestat"])?;
    let main = s.split("Main:").nth(1).unwrap_or("");
    main.lines()
        .find_map(|l| l.strip_prefix("Total size:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .ok_or_else(|| anyhow!("no main table size in /proc/net/fib_triestat"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lags_are_nearest_rank_percentiles_in_ms() {
        let l = Lag::of((1..=100).map(|i| i * 1_000_000).collect());
        assert_eq!((l.median, l.p99, l.max), (50.0, 99.0, 100.0));
        let l = Lag::of(vec![3_000_000]);
        assert_eq!((l.median, l.p99, l.max), (3.0, 3.0, 3.0));
    }

    #[test]
    fn probe_frames_decode_as_udp_to_their_destination() {
        // Decoded back by etherparse: the family, the destination, UDP.
        for dst in ["32.0.5.1", "2a00:0:5::1"] {
            let dst: IpAddr = dst.parse().unwrap();
            let f = frame_to(dst).unwrap();
            let p = etherparse::SlicedPacket::from_ethernet(&f).unwrap();
            let got = match p.net.unwrap() {
                etherparse::NetSlice::Ipv4(h) => IpAddr::V4(h.header().destination_addr()),
                etherparse::NetSlice::Ipv6(h) => IpAddr::V6(h.header().destination_addr()),
                _ => panic!("not IP"),
            };
            assert_eq!(got, dst);
            assert!(matches!(
                p.transport,
                Some(etherparse::TransportSlice::Udp(_))
            ));
        }
    }
}
