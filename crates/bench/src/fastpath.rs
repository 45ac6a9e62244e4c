//! `linerate bench fastpath`: the router program's cost per packet with one
//! route and with a full table, against a reference that does what the
//! kernel's XDP samples do (`bpf_fib_lookup` in the kernel's FIB holding
//! the same routes, then `bpf_redirect`), in the same run. Both run with
//! BPF_PROG_TEST_RUN on the same frames, one destination at a time
//! (`repeat` runs each, the kernel's mean). Both tables are loaded at once
//! (two fast paths, two kernel routing tables), and each destination runs
//! through every program before the next: the machine's speed drifts by
//! up to 2x between minutes, so only costs taken side by side compare.
use crate::median;
use anyhow::{bail, Context, Result};
use libbpf_rs::{MapCore, MapFlags};
use linerate_bpf::loader::{self, XdpAttachment, XdpMode};
use linerate_bpf::{objects, test_run};
use linerate_dataplane::fastpath::FastPath;
use linerate_dataplane::layout::{
    rules_word, tables_word, FdbEntry, FdbKey, Iface, Nexthop, PolicyRule, BRIDGE_LEARN,
    FDB_TO_PORT, FIB_TABLES_MAIN4, FIB_WALK_TABLES, IFACE_RPF_LOOSE, IFACE_RPF_STRICT,
    IFACE_TABLES4, IFACE_TABLES6, NH_RESOLVED, NH_VALID, POLICY_RULES,
};
use linerate_fib::{synthetic, Fib, Ipv6Layout, Key, Shape};
use linerate_host::cmd::ip;
use serde::Serialize;
use std::io::Write as _;
use std::net::{Ipv4Addr, Ipv6Addr};
use std::os::fd::AsFd;

/// BPF_PROG_RUN repetitions at most: the frames start at TTL 255 and each
/// repetition forwards the frame as the previous one left it.
pub const MAX_REPEAT: u32 = 254;

const GW4: &str = "192.0.2.2";
const GW6: &str = "2001:db8:ffff::2";
/// The next hop every route goes to (not 2, which a walk of tables takes
/// for a throw route: NH_ID_THROW).
const NH: u32 = 3;
/// The next hop back out of the ingress, for the frames' source
/// (--rp-filter).
const NH_BACK: u32 = 4;
/// The next hop of the VLAN device's own table with --vlan-pop-push: the
/// egress port, untagged.
const NH_POP: u32 = 5;
/// Kernel routing tables of the reference's one-route and full tables.
const KERNEL_TABLES: [u32; 2] = [1001, 1002];

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
    /// Passes over the destinations; each gives every program a mean, and
    /// the figures are the medians.
    pub rounds: usize,
    pub seed: u64,
    /// IPv6 table layouts to measure (IPv4 has one).
    pub ipv6_layouts: Vec<Ipv6Layout>,
    /// Only destinations whose longest match in the full table has a length
    /// in this range (inclusive): what one class of destinations costs.
    pub match_lengths: Option<(u8, u8)>,
    /// Measure the multi-buffer program (`router_mb`, for jumbo MTUs)
    /// instead of the single-buffer one.
    pub multibuf: bool,
    /// 0: the tables are main's. N (1 to 4): each is another table's,
    /// looked up by a walk of N tables (policy rules), the N - 1 before it
    /// empty (each a miss): what a tenant's table and the rules before it
    /// cost a packet.
    pub walk_tables: usize,
    /// 0: no rule program. N (1 to 63): the tables are main's, reached by
    /// the rule program (policy rules with selectors) after N - 1 steps
    /// that match no packet of the bench (a source prefix each), the last
    /// `lookup main`: what the rules before the table cost a packet.
    pub rule_steps: usize,
    /// IPv4's reverse path filtering on the ingress (strict, loose): the
    /// frames' source routed back out of it by a host route, checked
    /// through the egress's routing as the kernel checks it.
    pub rp_filter: Option<RpFilter>,
    /// The ingress is a bridge's port, routed as the bridge: each frame's
    /// source is looked up in the bridge's FDB (behind the port) and marked
    /// used, as the bridge learns from what it passes up.
    pub bridge_port: bool,
    /// The frames tagged 802.1Q VLAN 10 and routed as a VLAN device of the
    /// ingress, sent out of VLAN 10 of the egress (the tag rewritten in
    /// place). The reference, which routes no VLAN, gets them untagged,
    /// and so does the full table without VLAN devices, run beside them:
    /// what the tag costs, round by round.
    pub vlan: bool,
    /// With `vlan` and a walk of one table: the tag popped and pushed in
    /// turn instead of rewritten. The VLAN device routes by a table of its
    /// own (the same routes, out of the egress port untagged: the tag
    /// popped), the port by its table (out of the egress's VLAN device: a
    /// tag pushed), and every repetition takes the frame the last one
    /// left: popped, pushed, popped. Against the untagged frame through the
    /// port's table alone.
    pub vlan_pop_push: bool,
}

/// The tag of `vlan`'s frames and of the VLAN device they are sent out of
/// (802.1Q, VLAN 10: the same, so that every repetition comes tagged).
const BENCH_TAG: [u8; 4] = [0x81, 0x00, 0x00, 0x0a];
/// The VLAN devices' ifindexes (no link has them: names to the fast path).
const BENCH_VLAN_IN: u32 = 901;
const BENCH_VLAN_OUT: u32 = 902;

/// The bridge the ingress is a port of with `bridge_port` (an index no
/// link has: the fast path reads it as a name).
const BENCH_BRIDGE: u32 = 900;

/// A reverse path filtering mode (rp_filter 1, 2).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum RpFilter {
    Strict,
    Loose,
}

impl RpFilter {
    pub const CHOICES: [(&'static str, RpFilter); 2] =
        [("strict", RpFilter::Strict), ("loose", RpFilter::Loose)];
}

#[derive(Clone, Debug, Serialize)]
pub struct Reference {
    pub name: String,
    pub ns_per_packet: f64,
    pub rounds_ns_per_packet: Vec<f64>,
}

#[derive(Clone, Debug, Serialize)]
pub struct FastpathResult {
    pub family: &'static str,
    /// The FIB's first-level and group bits, e.g. "24+8".
    pub layout: String,
    /// The router's program measured: `router` or `router_mb`.
    pub program: &'static str,
    pub routes: usize,
    /// Median of the rounds' means.
    pub ns_per_packet: f64,
    /// Each round's mean over the destinations, in round order; the same
    /// round of another table or of the reference ran beside it.
    pub rounds_ns_per_packet: Vec<f64>,
    pub reference: Reference,
    /// With `--vlan`: the same fast path without VLAN devices, the frames
    /// untagged, run beside it in every round (what the tag costs is the
    /// ratio of the two, round by round).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub untagged: Option<Reference>,
    /// With `--vlan`: the untagged frames again, met first by the program
    /// of the ports with VLAN devices, which hands them to the other:
    /// what an untagged frame costs on such a port.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub untagged_on_vlan_port: Option<Reference>,
    /// Destinations both programs forwarded (the rest are not in the mean).
    pub destinations: usize,
}

pub(crate) fn mac_of(ns: &str, dev: &str) -> Result<[u8; 6]> {
    let out = ip(Some(ns), &["-j", "link", "show", "dev", dev])?;
    let v: serde_json::Value = serde_json::from_str(&out)?;
    let s = v[0]["address"].as_str().context("no MAC")?;
    let mut m = [0u8; 6];
    for (i, p) in s.split(':').enumerate().take(6) {
        m[i] = u8::from_str_radix(p, 16)?;
    }
    Ok(m)
}

/// The IPv4 frames' source (198.18.0.1).
const SOURCE4: u32 = 0xc612_0001;

fn frame<K: Key>(dst_mac: [u8; 6], dst: K) -> Vec<u8> {
    let mut f = Vec::new();
    let eth = etherparse::PacketBuilder::ethernet2([2, 0, 0, 0, 0, 1], dst_mac);
    let payload = [0u8; 18];
    if K::BITS == 32 {
        let d = Ipv4Addr::from(dst.to_u128() as u32).octets();
        eth.ipv4(SOURCE4.to_be_bytes(), d, 255)
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

/// Replaces the routes of the family in kernel table `table` with `routes`
/// via the gateway (on-link, so no connected route is needed).
fn kernel_routes<K: Key>(
    ns: &str,
    egress: &str,
    routes: &[(K, u8, u32)],
    table: u32,
) -> Result<()> {
    let (fam, gw) = if K::BITS == 32 {
        ("-4", GW4)
    } else {
        ("-6", GW6)
    };
    let id = table.to_string();
    let _ = ip(Some(ns), &[fam, "route", "flush", "table", &id]);
    let path = std::env::temp_dir().join(format!("lrbench-routes-{}", std::process::id()));
    {
        let mut f = std::io::BufWriter::new(std::fs::File::create(&path)?);
        for &(a, l, _) in routes {
            let p = linerate_fib::dump::show(a, l);
            writeln!(
                f,
                "route add {p} via {gw} dev {egress} onlink table {table}"
            )?;
        }
    }
    let r = ip(Some(ns), &[fam, "-batch", path.to_str().unwrap()]);
    let _ = std::fs::remove_file(&path);
    r.map(drop)
        .context("installing the reference's routes in the kernel")
}

/// The reference program, looking up in kernel table `table`.
fn reference(table: u32) -> Result<libbpf_rs::Object> {
    let obj = loader::load(objects::REF_FWD, "reference")?;
    let data = loader::data_section(&obj, ".data.ref")?;
    data.update(&0u32.to_ne_bytes(), &table.to_ne_bytes(), MapFlags::ANY)
        .context("setting the reference's routing table")?;
    Ok(obj)
}

/// The bench's two veths, as the fast paths see them.
struct Ports {
    in_idx: u32,
    out_idx: u32,
    in_mac: [u8; 6],
    out_mac: [u8; 6],
}

/// The routes of the full table when none are asked for.
pub fn default_routes(ipv6: bool) -> usize {
    if ipv6 {
        200_000
    } else {
        1_000_000
    }
}

impl FastpathBench {
    /// Refuses the bench's arguments that cannot run, naming the option,
    /// before anything is built.
    pub fn check(&self) -> Result<()> {
        if self.keys == 0 || self.repeat == 0 || self.rounds == 0 {
            bail!("--keys, --repeat and --rounds: at least 1");
        }
        if self.repeat > MAX_REPEAT {
            bail!("--repeat: at most {MAX_REPEAT} (each repetition takes one TTL)");
        }
        if self.routes < 2 {
            bail!("--routes: at least 2 (the one-route case always runs)");
        }
        if self.vlan_pop_push && (!self.vlan || self.walk_tables != 1) {
            bail!("--vlan-pop-push: with --vlan and --walk-tables 1 (the port and its VLAN device each route by a table of their own, and so does the untagged frame it is compared with)");
        }
        if self.vlan && self.multibuf {
            bail!("--vlan with --multibuf: the multi-buffer program leaves tagged frames to the kernel (docs/vlans-vrfs.md); measure the tag without --multibuf");
        }
        let bits = if self.ipv6 { 128 } else { 32 };
        if let Some((_, hi)) = self.match_lengths.filter(|&(_, hi)| hi > bits) {
            bail!("--match-lengths: /{hi} is longer than an address of the family ({bits} bits)");
        }
        if self.ipv6 && self.rp_filter.is_some() {
            bail!("--rp-filter: IPv4 only (the kernel has no reverse path filter for IPv6 outside netfilter)");
        }
        Ok(())
    }
}

/// A fast path holding `table`, forwarding everything to one next hop out
/// of the egress veth, back to the ingress MAC (so that BPF_PROG_RUN's
/// repetitions, each on the frame the last one left, still arrive "to us").
fn fast_path<K: Key>(
    layout: Ipv6Layout,
    table: &[(K, u8, u32)],
    p: &Ports,
    walk_tables: usize,
    rule_steps: usize,
    rp_filter: Option<RpFilter>,
    (bridge_port, vlan, pop_push): (bool, bool, bool),
) -> Result<FastPath> {
    let mut fp = FastPath::load_with(layout)?;
    // The scratch namespace forwards both families (run_family).
    let both =
        linerate_dataplane::layout::IFACE_FORWARD4 | linerate_dataplane::layout::IFACE_FORWARD6;
    let ipv6 = K::BITS == 128;
    // A walk: the table in slot `walk_tables`, the empty slots before it;
    // or main's reached by a rule program.
    let (slot, ingress) = if rule_steps > 0 {
        let program = rule_program::<K>(rule_steps)?;
        let index = 2 * ipv6 as u16;
        fp.set_policy_program(index, &program)?;
        let flag = if ipv6 { IFACE_TABLES6 } else { IFACE_TABLES4 };
        let word = rules_word(index);
        let ifc = Iface {
            tables4: word,
            tables6: word,
            ..Iface::new(p.in_idx, p.in_mac, both | flag)
        };
        (0, ifc)
    } else if walk_tables == 0 {
        (0, Iface::new(p.in_idx, p.in_mac, both))
    } else {
        if walk_tables > FIB_WALK_TABLES || walk_tables >= FastPath::TABLE_SLOTS {
            bail!("walk_tables: 1 to {FIB_WALK_TABLES}");
        }
        let slots: Vec<usize> = (1..=walk_tables).collect();
        slots.iter().for_each(|&s| fp.open_table(ipv6, s));
        let roots: Vec<u16> = slots
            .iter()
            .map(|&s| FastPath::table_root_mib(ipv6, s))
            .collect();
        let flag = if ipv6 { IFACE_TABLES6 } else { IFACE_TABLES4 };
        let word = tables_word(&roots);
        let ifc = Iface {
            tables4: word,
            tables6: word,
            ..Iface::new(p.in_idx, p.in_mac, both | flag)
        };
        (walk_tables, ifc)
    };
    let rpf = match rp_filter {
        Some(RpFilter::Strict) => IFACE_RPF_STRICT,
        Some(RpFilter::Loose) => IFACE_RPF_LOOSE,
        None => 0,
    };
    // The egress routes as the ingress does (its word is what the reverse
    // path filter walks; main's alone, main's word).
    let egress = Iface {
        tables4: if ingress.flags & IFACE_TABLES4 != 0 {
            ingress.tables4
        } else {
            FIB_TABLES_MAIN4
        },
        tables6: ingress.tables6,
        ..Iface::new(p.out_idx, p.out_mac, ingress.flags)
    };
    let ingress = if bridge_port {
        // The frames' sources: the first repetition's, then the egress's
        // MAC (NH's source) on every later one.
        for mac in [[2, 0, 0, 0, 0, 1], p.out_mac] {
            let entry = FdbEntry {
                port: p.in_idx,
                mtu: 1500,
                flags: FDB_TO_PORT,
                used: 0,
            };
            fp.set_fdb(&FdbKey::new(BENCH_BRIDGE, mac), Some(&entry))?;
        }
        Iface {
            l3: BENCH_BRIDGE,
            bridging: BRIDGE_LEARN,
            ..ingress
        }
    } else {
        ingress
    };
    fp.write_interface(
        &Iface {
            flags: ingress.flags | rpf,
            ..ingress
        },
        true,
    )?;
    fp.write_interface(&egress, true)?;
    if vlan {
        let sub = Iface {
            ifindex: BENCH_VLAN_IN,
            l3: BENCH_VLAN_IN,
            flags: ingress.flags | rpf,
            ..ingress
        };
        // Popping and pushing: the device's own table, in the slot after
        // the port's.
        let sub = if pop_push {
            let own = [FastPath::table_root_mib(ipv6, slot + 1)];
            let flag = if ipv6 { IFACE_TABLES6 } else { IFACE_TABLES4 };
            Iface {
                tables4: tables_word(&own),
                tables6: tables_word(&own),
                flags: sub.flags | flag,
                ..sub
            }
        } else {
            sub
        };
        let key = linerate_dataplane::layout::VlanKey::new(p.in_idx, 0x8100, 10);
        fp.set_vlan_interface(&key, Some(&sub))?;
    }
    fp.set_nexthop(
        NH_BACK,
        &Nexthop {
            ifindex: p.in_idx,
            mtu: 1500,
            flags: NH_VALID | NH_RESOLVED,
            used: 0,
            dmac: p.out_mac,
            smac: p.in_mac,
            l3: 0,
            tag: [0; 4],
        },
    )?;
    // Out of the egress port, untagged; with --vlan out of its VLAN device.
    let out_untagged = Nexthop {
        ifindex: p.out_idx,
        mtu: 1500,
        flags: NH_VALID | NH_RESOLVED,
        used: 0,
        dmac: p.in_mac,
        smac: p.out_mac,
        l3: 0,
        tag: [0; 4],
    };
    let out = if vlan {
        Nexthop {
            l3: BENCH_VLAN_OUT,
            tag: BENCH_TAG,
            ..out_untagged
        }
    } else {
        out_untagged
    };
    fp.set_nexthop(NH, &out)?;
    let main = shape_of::<K>(layout);
    let shape = if slot == 0 { main } else { main.other_table() };
    let mut fib: Fib<K> = Fib::new(shape).without_concurrent_readers();
    fib.bulk_load(table)
        .map_err(|e| anyhow::anyhow!("{} routes in table slot {slot}: {e}", table.len()))?;
    if rp_filter.is_some() {
        // The frames' source, back out of the ingress.
        fib.insert(K::from_u128(SOURCE4 as u128), 32, NH_BACK)
            .map_err(|e| anyhow::anyhow!("the source's route: {e}"))?;
    }
    fp.load_fib_at(slot, &fib)?;
    if vlan && pop_push {
        // The VLAN device's table: the same routes, out of the egress port
        // untagged.
        fp.set_nexthop(NH_POP, &out_untagged)?;
        fp.open_table(ipv6, slot + 1);
        let popped: Vec<(K, u8, u32)> = table.iter().map(|&(k, l, _)| (k, l, NH_POP)).collect();
        let mut own: Fib<K> = Fib::new(main.other_table()).without_concurrent_readers();
        own.bulk_load(&popped).map_err(|e| {
            anyhow::anyhow!("{} routes in table slot {}: {e}", table.len(), slot + 1)
        })?;
        fp.load_fib_at(slot + 1, &own)?;
    }
    Ok(fp)
}

/// A rule program of `steps` steps: `steps - 1` that match no packet of
/// the bench (each `from` a documentation prefix of its own: 192.0.2.0/24
/// and its neighbours, 2001:db8:ffff::/48's), then `lookup main`.
fn rule_program<K: Key>(steps: usize) -> Result<Vec<PolicyRule>> {
    use linerate_netlink::policy::{Compiled, Selectors, Step, View};
    if steps >= POLICY_RULES {
        bail!("rule_steps: 1 to {}", POLICY_RULES - 1);
    }
    let bits = K::BITS;
    let none = |i: usize| -> (u128, u8) {
        if bits == 32 {
            ((0xc000_0200u32 + ((i as u32) << 8)) as u128, 24)
        } else {
            (0x2001_0db8_ffff_u128 << 80 | (i as u128) << 64, 64)
        }
    };
    let mut program: Vec<Compiled> = (0..steps - 1)
        .map(|i| Compiled {
            invert: false,
            sel: Selectors {
                src: Some(none(i)),
                ..Default::default()
            },
            step: Step::Lookup(View::table(100)),
            text: String::new(),
        })
        .collect();
    program.push(Compiled {
        invert: false,
        sel: Selectors::default(),
        step: Step::Lookup(View::MAIN),
        text: String::new(),
    });
    let ipv6 = bits == 128;
    Ok(linerate_dataplane::rules::encode(&program, bits, |v| {
        (v == View::MAIN).then(|| FastPath::table_root_mib(ipv6, 0))
    }))
}

/// The family's table shape (IPv4 has one; IPv6 the layout's).
fn shape_of<K: Key>(layout: Ipv6Layout) -> Shape {
    if K::BITS == 32 {
        Shape::IPV4
    } else {
        layout.shape()
    }
}

/// "24+8": the first-level and group bits of the family's table.
fn layout_name<K: Key>(layout: Ipv6Layout) -> String {
    let shape = shape_of::<K>(layout);
    format!("{}+{}", shape.first, shape.stride)
}

/// The keys whose longest match among `routes` has a length in `lengths`.
fn matching_lengths<K: Key>(
    routes: &[(K, u8, u32)],
    keys: Vec<K>,
    lengths: std::ops::RangeInclusive<u8>,
) -> Vec<K> {
    // A prefix as its top `len` bits (keys sit in the low K::BITS of a u128).
    let top = |a: u128, len: u8| a.checked_shr((K::BITS - len) as u32).unwrap_or(0);
    let prefixes: std::collections::HashSet<(u128, u8)> = routes
        .iter()
        .map(|&(a, l, _)| (top(a.to_u128(), l), l))
        .collect();
    let longest = |k: K| {
        (0..=K::BITS)
            .rev()
            .find(|&l| prefixes.contains(&(top(k.to_u128(), l), l)))
    };
    keys.into_iter()
        .filter(|&k| longest(k).is_some_and(|l| lengths.contains(&l)))
        .collect()
}

/// Runs in the calling thread, which must be in `b.netns`.
/// A run's results (as JSON, the list), printed as their summary.
#[derive(Clone, Debug, Serialize)]
#[serde(transparent)]
pub struct Report(pub Vec<FastpathResult>);

impl std::fmt::Display for Report {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "\n{}", summary(&self.0))
    }
}

/// The bench on a scratch veth pair of its own, removed after whatever
/// happens (`b`'s namespace and interfaces are the pair's).
pub fn run_on_scratch(
    mut b: FastpathBench,
    mut progress: impl FnMut(&String) + Send,
) -> Result<Report> {
    b.check()?;
    let pair = linerate_lab::scratch::ScratchPair::new(0)?;
    (b.netns, b.ingress, b.egress) = (pair.netns.clone(), pair.tx.clone(), pair.rx.clone());
    let results = std::thread::scope(|s| {
        s.spawn(|| {
            linerate_host::netns::enter_for_good(&b.netns)?;
            run(&b, &mut |line| progress(&line.to_string()))
        })
        .join()
        .map_err(|_| anyhow::anyhow!("the bench thread panicked"))?
    })?;
    Ok(Report(results))
}

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
    if b.repeat > MAX_REPEAT {
        bail!("repeat: at most {MAX_REPEAT} (each repetition takes one TTL)");
    }
    let gw_mac = linerate_host::cmd::mac_text(&in_mac);
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

    let generated: Vec<(K, u8, u32)> = if K::BITS == 32 {
        synthetic::ipv4(b.routes, 1, b.seed)
            .into_iter()
            .map(|(a, l, _)| (K::from_u128(a as u128), l, NH))
            .collect()
    } else {
        synthetic::ipv6(b.routes, 1, b.seed)
            .into_iter()
            .map(|(a, l, _)| (K::from_u128(a), l, NH))
            .collect()
    };
    // Destinations inside the full table's prefixes (the default route of
    // the one-route table covers them too).
    let keys: Vec<K> = synthetic::lookup_keys(&generated, b.keys * 2, b.seed ^ 7)
        .into_iter()
        .step_by(2)
        .collect();
    let keys = match b.match_lengths {
        Some((lo, hi)) => {
            let keys = matching_lengths(&generated, keys, lo..=hi);
            if keys.is_empty() {
                bail!("match_lengths: no destination's longest match is a /{lo}../{hi}");
            }
            keys
        }
        None => keys,
    };
    let tables = [vec![(K::from_u128(0), 0u8, NH)], generated];
    // IPv4 has one layout; IPv6 each asked for.
    let layouts: Vec<Ipv6Layout> = if K::BITS == 32 {
        vec![Ipv6Layout::default()]
    } else {
        b.ipv6_layouts.clone()
    };
    let ports = Ports {
        in_idx,
        out_idx,
        in_mac,
        out_mac,
    };

    // Everything is loaded before anything is measured: both tables in the
    // kernel (one routing table each) and in each layout's fast path, so a
    // destination's four costs are taken one after the other, in the same
    // state of this (noisy) machine.
    let mut references = Vec::new();
    for (table, id) in tables.iter().zip(KERNEL_TABLES) {
        progress(&format!(
            "{} routes: installing them in the kernel (table {id}) for the reference",
            table.len()
        ));
        kernel_routes(ns, &b.egress, table, id)?;
        references.push(reference(id)?);
    }
    let mut fast_paths = Vec::new();
    for &layout in &layouts {
        let mut pair = Vec::new();
        for table in &tables {
            progress(&format!(
                "{} routes: loading them into a fast path ({} layout)",
                table.len(),
                layout_name::<K>(layout)
            ));
            pair.push(fast_path(
                layout,
                table,
                &ports,
                b.walk_tables,
                b.rule_steps,
                b.rp_filter,
                (b.bridge_port, b.vlan, b.vlan_pop_push),
            )?);
        }
        fast_paths.push(pair);
    }
    // With --vlan, each layout's full table again without VLAN devices:
    // the untagged frame's cost, measured beside the tagged one's; and a
    // copy of it for the untagged frame met first by the VLAN program. (A
    // copy each: a program run right after another on the same tables
    // finds the destination's lines in cache, and comes out cheaper.)
    let mut untagged_paths = Vec::new();
    let mut handed_paths = Vec::new();
    if b.vlan {
        for &layout in &layouts {
            for paths in [&mut untagged_paths, &mut handed_paths] {
                progress(&format!(
                    "{} routes: loading them into a fast path without VLAN devices ({} layout)",
                    tables[1].len(),
                    layout_name::<K>(layout)
                ));
                paths.push(fast_path(
                    layout,
                    &tables[1],
                    &ports,
                    b.walk_tables,
                    b.rule_steps,
                    b.rp_filter,
                    (b.bridge_port, false, false),
                )?);
            }
        }
    }
    let untagged: Vec<libbpf_rs::Program<'_>> = untagged_paths
        .iter()
        .map(|fp| fp.program())
        .collect::<Result<_>>()?;
    let handed_over: Vec<libbpf_rs::Program<'_>> = handed_paths
        .iter()
        .map(|fp| fp.vlan_program())
        .collect::<Result<_>>()?;
    let ours: Vec<Vec<libbpf_rs::Program<'_>>> = fast_paths
        .iter()
        .map(|pair| {
            pair.iter()
                .map(|fp| {
                    if b.multibuf {
                        fp.multibuf_program()
                    } else {
                        // With --vlan, the VLAN program: the ingress has
                        // VLAN devices.
                        fp.program_for(in_idx)
                    }
                })
                .collect()
        })
        .collect::<Result<_>>()?;
    let theirs: Vec<libbpf_rs::Program<'_>> = references
        .iter()
        .map(|r| loader::prog(r, "ref_fwd"))
        .collect::<Result<_>>()?;
    // Every program stays attached for the whole run: attaching registers
    // the veths' XDP queues, which BPF_PROG_RUN needs for an ingress
    // device, and BPF_PROG_RUN of a program attached nowhere adds it to
    // the kernel's XDP dispatcher and removes it again, an RCU grace period
    // (milliseconds) per call. The first program takes the bench's veths,
    // the others veths of their own in the scratch namespace.
    let progs: Vec<&libbpf_rs::Program<'_>> = ours
        .iter()
        .flatten()
        .chain(theirs.iter())
        .chain(untagged.iter())
        .chain(handed_over.iter())
        .collect();
    let mut devices = vec![b.ingress.clone(), b.egress.clone()];
    for i in 0..progs.len() - 1 {
        let (a, z) = (format!("lrpark{i}a"), format!("lrpark{i}z"));
        ip(
            Some(ns),
            &["link", "add", &a, "type", "veth", "peer", "name", &z],
        )?;
        devices.push(a);
    }
    let _links = devices
        .iter()
        .enumerate()
        .map(|(i, d)| XdpAttachment::attach(progs[i.saturating_sub(1)], d, XdpMode::Native))
        .collect::<Result<Vec<_>>>()?;

    // Each destination's frame as ours and as the reference get it.
    let frames: Vec<(Vec<u8>, Vec<u8>)> = keys
        .iter()
        .map(|&k| {
            let plain = frame(in_mac, k);
            let mut tagged = plain.clone();
            if b.vlan {
                tagged.splice(12..12, BENCH_TAG);
            }
            (tagged, plain)
        })
        .collect();
    let mut out = vec![0u8; 256];
    let run = |prog: &libbpf_rs::Program<'_>, f: &[u8], out: &mut [u8]| {
        test_run::run_xdp_on(prog.as_fd(), f, out, b.repeat, Some(in_idx))
    };
    let redirected = linerate_bpf::test_run::XdpAction::Redirect;
    // Destinations every program forwards; the others are in no mean.
    let mut forwarded = Vec::new();
    for (f, plain) in &frames {
        let mut all = true;
        for prog in ours.iter().flatten() {
            all &= run(prog, f, &mut out)?.verdict == redirected;
        }
        for prog in theirs.iter().chain(&untagged).chain(&handed_over) {
            all &= run(prog, plain, &mut out)?.verdict == redirected;
        }
        if all {
            forwarded.push((f, plain));
        }
    }
    if forwarded.is_empty() {
        bail!("no destination was forwarded by every program");
    }
    // rounds[round][layout][table], reference[round][table]: mean ns.
    let mut ours_ns = vec![vec![[0f64; 2]; layouts.len()]; b.rounds];
    let mut ref_ns = vec![[0f64; 2]; b.rounds];
    // untagged_ns[round][layout]: the full table's, with --vlan, through
    // `router` and through `router_vlan`.
    let mut untagged_ns = vec![vec![[0f64; 2]; untagged.len()]; b.rounds];
    for round in 0..b.rounds {
        progress(&format!(
            "round {}/{}: {} destinations x {} repetitions",
            round + 1,
            b.rounds,
            forwarded.len(),
            b.repeat
        ));
        for (i, (f, plain)) in forwarded.iter().enumerate() {
            // Which table goes first alternates, so neither always runs
            // on what the other left in the caches.
            let order = if i % 2 == 0 { [0, 1] } else { [1, 0] };
            for t in order {
                for (l, pair) in ours.iter().enumerate() {
                    ours_ns[round][l][t] += run(&pair[t], f, &mut out)?.duration_ns as f64;
                }
                ref_ns[round][t] += run(&theirs[t], plain, &mut out)?.duration_ns as f64;
                if t == 1 {
                    for (l, progs) in untagged.iter().zip(&handed_over).enumerate() {
                        for (e, prog) in [progs.0, progs.1].into_iter().enumerate() {
                            untagged_ns[round][l][e] +=
                                run(prog, plain, &mut out)?.duration_ns as f64;
                        }
                    }
                }
            }
        }
    }
    let n = forwarded.len() as f64;
    let mut results = Vec::new();
    for (t, table) in tables.iter().enumerate() {
        let reference_rounds: Vec<f64> = ref_ns.iter().map(|r| r[t] / n).collect();
        for (l, &layout) in layouts.iter().enumerate() {
            let rounds: Vec<f64> = ours_ns.iter().map(|r| r[l][t] / n).collect();
            let res = FastpathResult {
                family: if K::BITS == 32 { "ipv4" } else { "ipv6" },
                layout: layout_name::<K>(layout),
                program: match (b.multibuf, b.vlan, b.vlan_pop_push) {
                    (true, _, _) => "router_mb",
                    (false, true, true) => "router, 802.1Q VLAN popped and pushed in turn",
                    (false, true, false) => "router, 802.1Q VLAN in and out",
                    (false, false, _) => "router",
                },
                routes: table.len(),
                ns_per_packet: median(&rounds),
                rounds_ns_per_packet: rounds,
                reference: Reference {
                    name: "bpf_fib_lookup".into(),
                    ns_per_packet: median(&reference_rounds),
                    rounds_ns_per_packet: reference_rounds.clone(),
                },
                untagged: (t == 1 && !untagged.is_empty())
                    .then(|| untagged_reference(&untagged_ns, l, 0, n)),
                untagged_on_vlan_port: (t == 1 && !untagged.is_empty())
                    .then(|| untagged_reference(&untagged_ns, l, 1, n)),
                destinations: forwarded.len(),
            };
            progress(&format!(
                "{} routes, {} layout: linerate {:.1} ns/packet, bpf_fib_lookup {:.1} ns/packet (medians of {} rounds, {} destinations)",
                res.routes, res.layout, res.ns_per_packet, res.reference.ns_per_packet, b.rounds, forwarded.len()
            ));
            results.push(res);
        }
    }
    Ok(results)
}

/// Layout `l`'s untagged frames through entry `e` (0: `router`, 1:
/// `router_vlan`), their `n` destinations' mean by round.
fn untagged_reference(untagged_ns: &[Vec<[f64; 2]>], l: usize, e: usize, n: f64) -> Reference {
    let rounds: Vec<f64> = untagged_ns.iter().map(|r| r[l][e] / n).collect();
    Reference {
        name: if e == 0 {
            "linerate, untagged".into()
        } else {
            "linerate, untagged, on a port with VLAN devices".into()
        },
        ns_per_packet: median(&rounds),
        rounds_ns_per_packet: rounds,
    }
}

/// Each round's full-table cost over its one-route cost (the two ran side
/// by side in that round).
fn round_ratios(full: &[f64], one: &[f64]) -> Vec<f64> {
    full.iter().zip(one).map(|(f, o)| f / o).collect()
}

/// A line a layout: the full table's cost over one route's, for linerate
/// and for bpf_fib_lookup, and linerate's over bpf_fib_lookup's.
pub fn summary(results: &[FastpathResult]) -> String {
    let mut out = String::new();
    for one in results.iter().filter(|r| r.routes == 1) {
        let Some(full) = results
            .iter()
            .find(|r| r.routes > 1 && r.layout == one.layout)
        else {
            continue;
        };
        let ours = round_ratios(&full.rounds_ns_per_packet, &one.rounds_ns_per_packet);
        let theirs = round_ratios(
            &full.reference.rounds_ns_per_packet,
            &one.reference.rounds_ns_per_packet,
        );
        out += &format!(
            "{} layout, {}, full table / one route, median of {} rounds (min-max): linerate {}, bpf_fib_lookup {}; linerate / bpf_fib_lookup: {:.2} (1 route), {:.2} ({} routes)\n",
            one.layout,
            one.program,
            ours.len(),
            crate::show_ratios(&ours),
            crate::show_ratios(&theirs),
            one.ns_per_packet / one.reference.ns_per_packet,
            full.ns_per_packet / full.reference.ns_per_packet,
            full.routes
        );
        if let Some(u) = &full.untagged {
            let tag = round_ratios(&full.rounds_ns_per_packet, &u.rounds_ns_per_packet);
            out += &format!(
                "{} layout, {} routes: {} costs {} an untagged one (median of {} rounds, min-max; {:.1} vs {:.1} ns)\n",
                full.layout,
                full.routes,
                if full.program.contains("popped") {
                    "a frame whose tag is popped and pushed in turn"
                } else {
                    "a tagged frame"
                },
                crate::show_ratios(&tag),
                tag.len(),
                full.ns_per_packet,
                u.ns_per_packet
            );
        }
        if let (Some(u), Some(h)) = (&full.untagged, &full.untagged_on_vlan_port) {
            let handed = round_ratios(&h.rounds_ns_per_packet, &u.rounds_ns_per_packet);
            out += &format!(
                "{} layout, {} routes: an untagged frame on a port with VLAN devices (handed from one program to the other) costs {} one on a port without (median of {} rounds, min-max; {:.1} vs {:.1} ns)\n",
                full.layout,
                full.routes,
                crate::show_ratios(&handed),
                handed.len(),
                h.ns_per_packet,
                u.ns_per_packet
            );
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::matching_lengths;

    #[test]
    fn destinations_are_classed_by_their_longest_match() {
        let v4 = |s: &str| u32::from(s.parse::<std::net::Ipv4Addr>().unwrap());
        let routes = [
            (v4("10.0.0.0"), 8, 1),
            (v4("10.1.0.0"), 16, 1),
            (v4("10.1.2.0"), 24, 1),
        ];
        let keys = ["10.1.2.3", "10.1.3.4", "10.9.9.9", "11.0.0.1"].map(v4);
        assert_eq!(matching_lengths(&routes, keys.to_vec(), 16..=32), keys[..2]);
        assert_eq!(matching_lengths(&routes, keys.to_vec(), 17..=32), keys[..1]);
        assert_eq!(matching_lengths(&routes, keys.to_vec(), 0..=8), keys[2..3]);

        let v6 = |s: &str| u128::from(s.parse::<std::net::Ipv6Addr>().unwrap());
        let routes = [
            (0, 0, 1),
            (v6("2001:db8::"), 32, 1),
            (v6("2001:db8:1::"), 48, 1),
        ];
        let keys = ["2001:db8:1::5", "2001:db8:2::5", "3000::1"].map(v6);
        assert_eq!(matching_lengths(&routes, keys.to_vec(), 41..=48), keys[..1]);
        assert_eq!(matching_lengths(&routes, keys.to_vec(), 0..=32), keys[1..]);
    }
}
