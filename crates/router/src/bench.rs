//! `linerate bench fastpath`: the router program's cost per packet with one
//! route and with a full table, against a reference that does what the
//! kernel's XDP samples do (`bpf_fib_lookup` in the kernel's FIB holding
//! the same routes, then `bpf_redirect`), in the same run. Both run with
//! BPF_PROG_TEST_RUN on the same frames, one destination at a time
//! (`repeat` runs each, the kernel's mean), alternating.
use crate::fastpath::FastPath;
use crate::layout::{Nexthop, NH_RESOLVED, NH_VALID};
use anyhow::{bail, Context, Result};
use linerate_bpf::loader::{self, XdpAttachment, XdpMode};
use linerate_bpf::{objects, test_run};
use linerate_fib::{gen, Fib, Ipv6Layout, Key, Shape};
use linerate_host::cmd::ip;
use serde::Serialize;
use std::io::Write as _;
use std::net::{Ipv4Addr, Ipv6Addr};
use std::os::fd::AsFd;

const GW4: &str = "192.0.2.2";
const GW6: &str = "2001:db8:ffff::2";
const NH: u32 = 2;
const XDP_REDIRECT: u32 = 4;

#[derive(Clone, Debug)]
pub struct FastpathBench {
    /// Scratch namespace and its veth pair: frames arrive on `ingress`,
    /// routes point out of `egress`.
    pub netns: String,
    pub ingress: String,
    pub egress: String,
    pub ipv6: bool,
    pub routes: usize,
    pub keys: usize,
    pub repeat: u32,
    pub seed: u64,
    /// IPv6 table layouts to measure (IPv4 has one).
    pub ipv6_layouts: Vec<Ipv6Layout>,
}

#[derive(Clone, Debug, Serialize)]
pub struct Reference {
    pub name: String,
    pub ns_per_packet: f64,
}

#[derive(Clone, Debug, Serialize)]
pub struct FastpathResult {
    pub family: &'static str,
    /// The FIB's first-level and group bits, e.g. "24+8".
    pub layout: String,
    pub routes: usize,
    pub ns_per_packet: f64,
    pub reference: Reference,
    /// Destinations both programs forwarded (the rest are not in the mean).
    pub destinations: usize,
}

fn mac_of(ns: &str, dev: &str) -> Result<[u8; 6]> {
    let out = ip(Some(ns), &["-j", "link", "show", "dev", dev])?;
    let v: serde_json::Value = serde_json::from_str(&out)?;
    let s = v[0]["address"].as_str().context("no MAC")?;
    let mut m = [0u8; 6];
    for (i, p) in s.split(':').enumerate().take(6) {
        m[i] = u8::from_str_radix(p, 16)?;
    }
    Ok(m)
}

fn frame<K: Key>(dst_mac: [u8; 6], dst: K) -> Vec<u8> {
    let mut f = Vec::new();
    let eth = etherparse::PacketBuilder::ethernet2([2, 0, 0, 0, 0, 1], dst_mac);
    let payload = [0u8; 18];
    if K::BITS == 32 {
        let d = Ipv4Addr::from(dst.to_u128() as u32).octets();
        eth.ipv4([198, 18, 0, 1], d, 255)
            .udp(2000, 2000)
            .write(&mut f, &payload)
            .unwrap();
    } else {
        let d = Ipv6Addr::from(dst.to_u128()).octets();
        let s = "2001:2::1".parse::<Ipv6Addr>().unwrap().octets();
        eth.ipv6(s, d, 255)
            .udp(2000, 2000)
            .write(&mut f, &payload)
            .unwrap();
    }
    f
}

/// Replaces the namespace's routes of the family with `routes` via the
/// gateway (on-link, so no connected route is needed).
fn kernel_routes<K: Key>(ns: &str, egress: &str, routes: &[(K, u8, u32)]) -> Result<()> {
    let (fam, gw) = if K::BITS == 32 {
        ("-4", GW4)
    } else {
        ("-6", GW6)
    };
    let _ = ip(Some(ns), &[fam, "route", "flush", "table", "main"]);
    let path = std::env::temp_dir().join(format!("lrbench-routes-{}", std::process::id()));
    {
        let mut f = std::io::BufWriter::new(std::fs::File::create(&path)?);
        for &(a, l, _) in routes {
            let p = linerate_fib::dump::show(a, l);
            writeln!(f, "route add {p} via {gw} dev {egress} onlink")?;
        }
    }
    let r = ip(Some(ns), &[fam, "-batch", path.to_str().unwrap()]);
    let _ = std::fs::remove_file(&path);
    r.map(drop)
        .context("installing the reference's routes in the kernel")
}

/// Runs in the calling thread, which must be in `b.netns`.
pub fn run(b: &FastpathBench, progress: &mut dyn FnMut(&str)) -> Result<Vec<FastpathResult>> {
    if b.ipv6 {
        run_family::<u128>(b, progress)
    } else {
        run_family::<u32>(b, progress)
    }
}

fn run_family<K: Key>(
    b: &FastpathBench,
    progress: &mut dyn FnMut(&str),
) -> Result<Vec<FastpathResult>> {
    let ns = &b.netns;
    for (k, v) in [
        ("net.ipv4.conf.all.forwarding", "1"),
        ("net.ipv6.conf.all.forwarding", "1"),
    ] {
        linerate_host::cmd::in_netns(ns, "sysctl", &["-qw", &format!("{k}={v}")])?;
    }
    let gw = if K::BITS == 32 { GW4 } else { GW6 };
    // The kernel checks a gateway against the local table, which exists
    // once the namespace has an address.
    let own = if K::BITS == 32 {
        "192.0.2.1/24"
    } else {
        "2001:db8:ffff::1/64"
    };
    let mut add = vec!["addr", "replace", own, "dev", b.egress.as_str()];
    if K::BITS == 128 {
        add.push("nodad");
    }
    ip(Some(ns), &add)?;
    let (in_idx, out_idx) = (loader::ifindex(&b.ingress)?, loader::ifindex(&b.egress)?);
    let (in_mac, out_mac) = (mac_of(ns, &b.ingress)?, mac_of(ns, &b.egress)?);
    // BPF_PROG_RUN's repetitions run on the frame as the previous one left
    // it. With the gateway's MAC set to the ingress interface's own, every
    // repetition still arrives "to us"; the frames start at TTL 255, so up
    // to 254 repetitions all forward.
    if b.repeat > 254 {
        bail!("--repeat: at most 254 (each repetition takes one TTL)");
    }
    let gw_mac = in_mac
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect::<Vec<_>>()
        .join(":");
    ip(
        Some(ns),
        &[
            "neigh",
            "replace",
            gw,
            "lladdr",
            &gw_mac,
            "dev",
            &b.egress,
            "nud",
            "permanent",
        ],
    )?;

    let reference = loader::load(objects::REF_FWD, "reference")?;
    let ref_prog = loader::prog(&reference, "ref_fwd")?;
    let generated: Vec<(K, u8, u32)> = if K::BITS == 32 {
        gen::ipv4(b.routes, 1, b.seed)
            .into_iter()
            .map(|(a, l, _)| (K::from_u128(a as u128), l, NH))
            .collect()
    } else {
        gen::ipv6(b.routes, 1, b.seed)
            .into_iter()
            .map(|(a, l, _)| (K::from_u128(a), l, NH))
            .collect()
    };
    // Destinations inside the full table's prefixes (the default route of
    // the one-route table covers them too).
    let keys: Vec<K> = gen::lookup_keys(&generated, b.keys * 2, b.seed ^ 7)
        .into_iter()
        .step_by(2)
        .collect();
    // IPv4 has one layout; IPv6 each asked for.
    let layouts: Vec<Ipv6Layout> = if K::BITS == 32 {
        vec![Ipv6Layout::default()]
    } else {
        b.ipv6_layouts.clone()
    };
    let mut results = Vec::new();
    for table in [vec![(K::from_u128(0), 0u8, NH)], generated.clone()] {
        progress(&format!(
            "{} routes: installing them in the kernel for the reference",
            table.len()
        ));
        kernel_routes(ns, &b.egress, &table)?;
        for &layout in &layouts {
            let shape = if K::BITS == 32 {
                Shape::IPV4
            } else {
                layout.shape()
            };
            let fp = FastPath::load_with(layout)?;
            // Attaching registers the veths' XDP queues, which BPF_PROG_RUN
            // needs for an ingress device.
            let _links = [&b.ingress, &b.egress]
                .iter()
                .map(|d| XdpAttachment::attach(&fp.program()?, d, XdpMode::Native))
                .collect::<Result<Vec<_>>>()?;
            fp.add_interface(in_idx, in_mac)?;
            fp.add_interface(out_idx, out_mac)?;
            fp.set_nexthop(
                NH,
                &Nexthop {
                    ifindex: out_idx,
                    mtu: 1500,
                    flags: NH_VALID | NH_RESOLVED,
                    _pad: 0,
                    dmac: in_mac,
                    smac: out_mac,
                },
            )?;
            let mut fib: Fib<K> = Fib::new(shape).without_concurrent_readers();
            fib.bulk_load(&table).map_err(|e| anyhow::anyhow!("{e}"))?;
            fp.load_fib(&fib)?;
            let prog = fp.program()?;
            let (mut ours, mut theirs, mut n) = (0f64, 0f64, 0usize);
            let mut out = vec![0u8; 256];
            for &k in &keys {
                let f = frame(in_mac, k);
                let a = test_run::run_xdp_on(prog.as_fd(), &f, &mut out, b.repeat, Some(in_idx))?;
                let r =
                    test_run::run_xdp_on(ref_prog.as_fd(), &f, &mut out, b.repeat, Some(in_idx))?;
                if a.verdict == XDP_REDIRECT && r.verdict == XDP_REDIRECT {
                    ours += a.duration_ns as f64;
                    theirs += r.duration_ns as f64;
                    n += 1;
                }
            }
            if n == 0 {
                bail!(
                    "neither program forwarded any destination with {} routes",
                    table.len()
                );
            }
            let res = FastpathResult {
                family: if K::BITS == 32 { "ipv4" } else { "ipv6" },
                layout: format!("{}+{}", shape.first, shape.stride),
                routes: table.len(),
                ns_per_packet: ours / n as f64,
                reference: Reference {
                    name: "bpf_fib_lookup".into(),
                    ns_per_packet: theirs / n as f64,
                },
                destinations: n,
            };
            progress(&format!(
                "{} routes, {} layout: linerate {:.1} ns/packet, bpf_fib_lookup {:.1} ns/packet ({} destinations)",
                res.routes, res.layout, res.ns_per_packet, res.reference.ns_per_packet, n
            ));
            results.push(res);
        }
    }
    Ok(results)
}
