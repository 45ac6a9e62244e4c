//! `linerate bench firewall`: what the firewall costs the fast path per
//! packet, by the ruleset's size (N rules with traffic
//! matching the last, the seeds' worst case; sets of M addresses), against
//! the same fast path without a firewall, side by side.
//!
//! Each ruleset is the kernel's: loaded with `nft -f` in a scratch
//! namespace, read back as `linerate route` reads it, compiled and
//! published without its classifiers; the flows' first frames miss the
//! verdict cache and are learned from the program's reports. Every frame must
//! then be judged in the fast path (forwarded: the traffic is accepted by
//! the last rule) before anything is measured. Then, round after round,
//! each ruleset is published again (a new generation, learned again) and
//! its frames are run (BPF_PROG_TEST_RUN, `repeat` times each, the
//! kernel's mean) right after the same frames through the fast path with
//! the firewall off: a ratio taken within seconds.
use crate::fastpath::mac_of;
use crate::median;
use anyhow::{bail, Result};
use linerate_bpf::layout::Pod;
use linerate_bpf::loader::{self, XdpAttachment, XdpMode};
use linerate_bpf::test_run::{self, XdpAction};
use linerate_dataplane::fastpath::FastPath;
use linerate_dataplane::fw_maps::FwMaps;
use linerate_dataplane::layout::{
    FwMiss, Nexthop, IFACE_FIREWALL4, IFACE_FORWARD4, IFACE_NAT4, NH_RESOLVED, NH_VALID,
};
use linerate_fib::{Fib, Shape};
use linerate_firewall::compile::{self, Compiled};
use serde::Serialize;
use std::collections::BTreeMap;
use std::os::fd::AsFd;
use std::time::Instant;

/// Repetitions at most: each forwards the frame as the previous left it,
/// one TTL each from 255.
pub const MAX_REPEAT: u32 = 254;

#[derive(Clone, Debug)]
pub struct FirewallBench {
    /// Scratch namespace and its veth pair: frames arrive on `ingress`
    /// and are routed out of `egress`.
    pub netns: String,
    pub ingress: String,
    pub egress: String,
    pub rules: Vec<u32>,
    pub set_sizes: Vec<u32>,
    /// Rule counts of the access-list shape (linerate_firewall::seeds::
    /// access_list): distinct prefixes and ports.
    pub access_lists: Vec<u32>,
    /// State counts for the stateful ruleset (linerate_firewall::seeds::
    /// stateful): the kernel's conntrack table holds this many established
    /// UDP connections, and the fast path carries every one of them; the
    /// frames measured are `flows` of them, spread over all. The caller
    /// raises the kernel's limits for the largest (crate::conntrack).
    pub states: Vec<u32>,
    /// Each state count also with the ruleset masquerading what leaves
    /// (seeds::stateful_masquerade) and as many other connections, their
    /// sources mapped: the NAT stage's cost.
    pub masquerade: bool,
    pub flows: u32,
    pub repeat: u32,
    pub rounds: usize,
    /// Set on Ctrl-C or SIGTERM: the bench ends between cases and rounds,
    /// and its caller removes the scratch namespace.
    pub stop: &'static std::sync::atomic::AtomicBool,
}

/// How long a ruleset took to reach the fast path.
#[derive(Clone, Debug, Serialize)]
pub struct LoadTimes {
    /// `nft -f`: the kernel's own load.
    pub nft_load_ms: f64,
    /// `nft -j -t list ruleset`, the sets' elements over netlink, and
    /// their parse: as `linerate route` reads it.
    pub read_ms: f64,
    /// Compiling (what the rules read, the counters' ids) and publishing
    /// the generation.
    pub compile_publish_ms: f64,
}

#[derive(Clone, Debug, Serialize)]
pub struct Case {
    /// "rules-N", "set-M", "states-S" or "states-S-masquerade".
    pub name: String,
    pub rules: usize,
    /// Elements of each named set.
    pub set_size: u32,
    /// Established connections in the kernel's table and the fast path's
    /// (the stateful ruleset; 0 for the others).
    pub states: u32,
    /// The stateful ruleset masquerading, each connection mapped.
    pub masquerade: bool,
    pub load: LoadTimes,
    /// Distinct cache entries the flows needed.
    pub entries: usize,
    /// The stateful cases: one sweep of the control plane over the fast
    /// path's connections (every way read, each connection checked
    /// against the kernel's table and its timeout set), as `linerate
    /// route` runs it every 1 to 30 s.
    pub sweep: Option<SweepCost>,
    /// Median of the rounds' means.
    pub ns_per_packet: f64,
    pub rounds_ns_per_packet: Vec<f64>,
    /// The fast path without a firewall, measured beside each round.
    pub baseline_ns_per_packet: f64,
    pub baseline_rounds_ns_per_packet: Vec<f64>,
    /// Each round's cost over its baseline's, and their median.
    pub ratio: f64,
    pub round_ratios: Vec<f64>,
    /// A key the cache lacks, judged by the classifier in the program
    /// (None: the ruleset has no classifier, or a stateful case).
    pub classifier: Option<ClassifierCost>,
}

/// What the classifier costs a key the cache lacks: each round a new
/// generation (every entry stale), then as many keys never seen as the
/// round measures, then each of the first frames (each its own key) run
/// once, judged by the classifier and cached, then once more, a hit.
/// Single runs all, so that their overheads are alike.
#[derive(Clone, Debug, Serialize)]
pub struct ClassifierCost {
    /// Medians of the rounds' means, ns a packet.
    pub miss_ns: f64,
    pub hit_ns: f64,
    /// A new flow's first frame (a flow never sent before), judged: where
    /// the ruleset reads the address, its key is new and its cache slot
    /// out of the CPU's caches.
    pub new_flow_ns: f64,
    pub rounds_miss_ns: Vec<f64>,
    pub rounds_hit_ns: Vec<f64>,
    pub rounds_new_flow_ns: Vec<f64>,
    /// The frames (keys) a round judges.
    pub keys: usize,
}

#[derive(Clone, Debug, Serialize)]
pub struct SweepCost {
    /// Ways swept: a connection's in the connection cache, a direction's
    /// in the NAT stage's.
    pub ways: u64,
    /// Timeouts set by the first sweep (connections carried before it).
    pub refreshed: u64,
    /// The first sweep, and a second right after it that only checks.
    pub setting_ms: f64,
    pub checking_ms: f64,
}

impl Case {
    fn with_sweep(mut self, s: SweepCost) -> Case {
        self.sweep = Some(s);
        self
    }

    /// A case before its rounds: nothing measured yet.
    fn unmeasured(
        name: String,
        rules: usize,
        set_size: u32,
        states: u32,
        load: LoadTimes,
        entries: usize,
    ) -> Case {
        Case {
            name,
            rules,
            set_size,
            states,
            masquerade: false,
            load,
            entries,
            sweep: None,
            ns_per_packet: 0.0,
            rounds_ns_per_packet: Vec::new(),
            baseline_ns_per_packet: 0.0,
            baseline_rounds_ns_per_packet: Vec::new(),
            ratio: 0.0,
            round_ratios: Vec::new(),
            classifier: None,
        }
    }
}

/// A UDP frame of flow `i` from 198.18.0.0/16 to 198.19.0.0/16, TTL 255,
/// to the ingress's MAC.
/// The first of the keys the classifier's cost takes fresh each round,
/// past every flow a case measures.
const FRESH_KEYS: u32 = 1 << 20;

fn frame(i: u32, in_mac: [u8; 6]) -> Vec<u8> {
    let src = [198, 18, (i >> 8) as u8, i as u8];
    let dst = [198, 19, (i >> 16) as u8 ^ (i >> 4) as u8, (i * 7) as u8];
    let b = etherparse::PacketBuilder::ethernet2([2, 0, 0, 0, 0, 1], in_mac)
        .ipv4(src, dst, 255)
        .udp(1024 + (i % 50000) as u16, 2000 + (i % 100) as u16);
    let mut f = Vec::new();
    b.write(&mut f, &[0u8; 18]).expect("a frame");
    f
}

/// The source networks of the connections the stateful cases measure
/// (their first byte): plain, and masqueraded.
const PLAIN_NET: u32 = 10;
const MASQUERADED_NET: u32 = 11;

/// Flow `i` of the connections the conntrack probe fills (bpf/ct_probe.
/// bpf.c, ct_fill): UDP net.x.y.z:(1000 + i % 50000) -> 198.19.0.1:53,
/// TTL 255, to the ingress's MAC.
fn connection_frame(net: u32, i: u32, in_mac: [u8; 6]) -> Vec<u8> {
    let src = (net << 24) | (i & 0x00ff_ffff);
    let mut f = Vec::new();
    etherparse::PacketBuilder::ethernet2([2, 0, 0, 0, 0, 1], in_mac)
        .ipv4(src.to_be_bytes(), [198, 19, 0, 1], 255)
        .udp(1000 + (i % 50_000) as u16, 53)
        .write(&mut f, &[0u8; 18])
        .expect("a frame");
    f
}

/// Fills the kernel's conntrack table of the calling thread's namespace
/// with connections `from..to` (the probe's flows) from `net`, established
/// both ways and assured, timing out in 10 minutes; `masquerade`: their
/// sources mapped, each pair's (2k, 2k + 1) to each other's, so that a
/// frame rewritten is one of the other connection (`from` even).
fn fill_conntrack(from: u32, to: u32, net: u32, masquerade: bool) -> Result<()> {
    use libbpf_rs::{MapCore, MapFlags};
    let obj = loader::load(linerate_bpf::objects::CT_PROBE, "conntrack probe")?;
    let state = loader::map(&obj, "state")?;
    // struct probe_state.
    let mut st = [0u8; 32];
    st[0..4].copy_from_slice(&from.to_ne_bytes());
    st[16..20].copy_from_slice(&600_000u32.to_ne_bytes());
    st[24..28].copy_from_slice(&net.to_ne_bytes());
    st[28..32].copy_from_slice(&(masquerade as u32).to_ne_bytes());
    state.update(&0u32.to_ne_bytes(), &st, MapFlags::ANY)?;
    let fill = loader::prog(&obj, "ct_fill")?;
    let mut out = vec![0u8; 256];
    test_run::run_xdp(
        fill.as_fd(),
        &connection_frame(net, 0, [0; 6]),
        &mut out,
        to - from,
    )?;
    let st = state
        .lookup(&0u32.to_ne_bytes(), MapFlags::ANY)?
        .ok_or_else(|| anyhow::anyhow!("the probe's state"))?;
    let filled = u32::from_ne_bytes(st[4..8].try_into().unwrap());
    if filled != to - from {
        bail!(
            "the kernel's conntrack table took {filled} of {} entries (nf_conntrack_max?)",
            to - from
        );
    }
    Ok(())
}

struct Setup {
    fp: FastPath,
    maps: FwMaps,
    in_idx: u32,
    out_idx: u32,
    in_mac: [u8; 6],
    out_mac: [u8; 6],
    generation: u32,
    _links: Vec<XdpAttachment>,
}

impl Setup {
    /// The firewall on or off on both interfaces, with `nat` the NAT
    /// stage too.
    fn firewall(&self, on: bool, nat: bool) -> Result<()> {
        let flags = IFACE_FORWARD4
            | if on { IFACE_FIREWALL4 } else { 0 }
            | if nat { IFACE_NAT4 } else { 0 };
        self.fp.add_interface(self.in_idx, self.in_mac, flags)?;
        self.fp.add_interface(self.out_idx, self.out_mac, flags)
    }

    /// Publishes `c` as a new generation and learns the frames' keys from
    /// the program's misses; every frame must then be forwarded by the
    /// fast path. The entries written.
    fn publish_and_learn(&mut self, c: &Compiled, frames: &[Vec<u8>]) -> Result<usize> {
        self.generation += 1;
        let c = Compiled {
            generation: self.generation,
            ..c.clone()
        };
        compile::publish(&mut self.maps, &c);
        let mut out = vec![0u8; 256];
        for f in frames {
            test_run::run_xdp_on(
                self.fp.program()?.as_fd(),
                f,
                &mut out,
                1,
                Some(self.in_idx),
            )?;
        }
        let ring = libbpf_rs::MapHandle::try_from(self.maps.misses())?;
        let mut misses = Vec::new();
        {
            let mut b = libbpf_rs::RingBufferBuilder::new();
            b.add(&ring, |d: &[u8]| {
                misses.extend(FwMiss::from_bytes(d));
                0
            })?;
            b.build()?.consume()?;
        }
        let mut learned = 0;
        for (i, m) in misses.iter().enumerate() {
            learned +=
                compile::learn(&mut self.maps, &c, &m.key.flow, i % 2 == 1).is_some() as usize;
        }
        for f in frames {
            let r = test_run::run_xdp_on(
                self.fp.program()?.as_fd(),
                f,
                &mut out,
                1,
                Some(self.in_idx),
            )?;
            if r.verdict != XdpAction::Redirect {
                bail!(
                    "a learned flow was not forwarded by the fast path ({:?}): {} misses, {learned} learned",
                    r.verdict,
                    misses.len()
                );
            }
        }
        Ok(learned)
    }

    /// The classifier's cost for a key the cache lacks, and a hit after it
    /// (ClassifierCost), with generation `c`'s classifiers, over `rounds`.
    fn classifier_cost(
        &mut self,
        c: &Compiled,
        frames: &[Vec<u8>],
        rounds: usize,
    ) -> Result<ClassifierCost> {
        // Each its own key under every shape (the flows differ in their
        // destination, and their ports by 100).
        let keys = &frames[..frames.len().min(100)];
        // One copy, its generation set each round (a copy a round would
        // sweep the tables of a large ruleset out of the CPU's caches).
        let mut g = c.clone();
        let (mut miss, mut hit, mut new) = (Vec::new(), Vec::new(), Vec::new());
        // A first round unrecorded: loading a large ruleset (nft, the
        // reading, the compiling) leaves the CPU's caches to the loader.
        for round in 0..=rounds {
            self.generation += 1;
            g.generation = self.generation;
            compile::publish(&mut self.maps, &g);
            // Keys never seen (their cache slots out of the CPU's caches,
            // as a new flow's are, where the ruleset reads the address),
            // then the known ones again (their slots in the caches).
            let fresh: Vec<Vec<u8>> = (0..keys.len() as u32)
                .map(|k| frame(FRESH_KEYS + (round * keys.len()) as u32 + k, self.in_mac))
                .collect();
            let n = self.mean_ns(&fresh, 1)?;
            let m = self.mean_ns(keys, 1)?;
            let h = self.mean_ns(keys, 1)?;
            if round > 0 {
                new.push(n);
                miss.push(m);
                hit.push(h);
            }
        }
        Ok(ClassifierCost {
            miss_ns: median(&miss),
            hit_ns: median(&hit),
            new_flow_ns: median(&new),
            rounds_miss_ns: miss,
            rounds_hit_ns: hit,
            rounds_new_flow_ns: new,
            keys: keys.len(),
        })
    }

    /// The frames' mean cost, `repeat` runs each.
    fn mean_ns(&self, frames: &[Vec<u8>], repeat: u32) -> Result<f64> {
        let prog = self.fp.program()?;
        let mut out = vec![0u8; 256];
        let mut sum = 0.0;
        for f in frames {
            let r = test_run::run_xdp_on(prog.as_fd(), f, &mut out, repeat, Some(self.in_idx))?;
            if r.verdict != XdpAction::Redirect {
                bail!("a frame was not forwarded while measured ({:?})", r.verdict);
            }
            sum += r.duration_ns as f64;
        }
        Ok(sum / frames.len() as f64)
    }
}

fn nft(ns: &str, args: &[&str]) -> Result<()> {
    linerate_host::cmd::in_netns(ns, "nft", args).map(|_| ())
}

/// What a run is asked for, as given (0s left out), to be checked before
/// anything is changed.
pub struct Counts<'a> {
    pub rules: &'a [u32],
    pub set_sizes: &'a [u32],
    pub states: &'a [u32],
    pub access_lists: &'a [u32],
    pub masquerade: bool,
    pub flows: u32,
    pub repeat: u32,
    pub rounds: usize,
}

/// Refuses counts a run cannot take, naming the command line's flag.
pub fn check(c: &Counts) -> Result<()> {
    if c.repeat == 0 || c.repeat > MAX_REPEAT {
        bail!(
            "--repeat: 1 to {MAX_REPEAT} (each repetition takes one TTL), got {}",
            c.repeat
        );
    }
    if c.flows == 0 || c.flows > 65536 {
        bail!("--flows: 1 to 65536, got {}", c.flows);
    }
    if c.rounds == 0 {
        bail!("--rounds: at least 1");
    }
    if c.masquerade && c.states.is_empty() {
        bail!("--masquerade: it measures the state counts masqueraded; give --states");
    }
    if let Some(n) = c.access_lists.iter().find(|&&n| n > 16000) {
        bail!("--access-lists: at most 16000 (the classifier's terms), got {n}");
    }
    if c.rules.is_empty()
        && c.set_sizes.is_empty()
        && c.states.is_empty()
        && c.access_lists.is_empty()
    {
        bail!("--rules, --set-size, --states and --access-lists: give at least one rule count, set size, state count or access list");
    }
    if let Some(n) = c.states.iter().find(|&&n| n > 2_000_000) {
        bail!("--states: at most 2000000, got {n}");
    }
    if let Some(n) = c.rules.iter().find(|&&n| n > 30000) {
        bail!("--rules: at most 30000 (the firewall counts 32768 rules a family), got {n}");
    }
    if let Some(m) = c.set_sizes.iter().find(|&&m| m > 4_000_000) {
        bail!("--set-size: at most 4000000, got {m}");
    }
    if let Some(n) = c.states.iter().find(|&&n| c.masquerade && n % 2 == 1) {
        bail!("--states with --masquerade: even counts (its connections go in pairs, each mapped to the other), got {n}");
    }
    Ok(())
}

/// Runs the bench; the calling thread must be in `b.netns`.
pub fn run(b: &FirewallBench, progress: &mut dyn FnMut(&str)) -> Result<Vec<Case>> {
    if b.repeat == 0 || b.repeat > MAX_REPEAT {
        bail!("repeat: 1 to {MAX_REPEAT} (each repetition takes one TTL)");
    }
    if b.flows == 0 || b.rounds == 0 {
        bail!("flows and rounds: at least 1");
    }
    let ns = &b.netns;
    linerate_host::cmd::in_netns(ns, "sysctl", &["-qw", "net.ipv4.conf.all.forwarding=1"])?;
    let (in_idx, out_idx) = (loader::ifindex(&b.ingress)?, loader::ifindex(&b.egress)?);
    let (in_mac, out_mac) = (mac_of(ns, &b.ingress)?, mac_of(ns, &b.egress)?);
    let fp = FastPath::load()?;
    // BPF_PROG_RUN takes an ingress device whose queue is registered for
    // XDP: a veth with a program attached.
    let links = [&b.ingress, &b.egress]
        .iter()
        .map(|d| XdpAttachment::attach(&fp.program()?, d, XdpMode::Native))
        .collect::<Result<Vec<_>>>()?;
    // The gateway's MAC is the ingress's own: each repetition arrives to
    // the router again.
    fp.set_nexthop(
        1,
        &Nexthop {
            ifindex: out_idx,
            mtu: 1500,
            flags: NH_VALID | NH_RESOLVED,
            used: 0,
            dmac: in_mac,
            smac: out_mac,
            l3: 0,
            tag: [0; 4],
        },
    )?;
    let mut fib: Fib<u32> = Fib::new(Shape::IPV4);
    fib.insert(0xc613_0000, 16, 1)?;
    fp.load_fib(&fib)?;
    let mut s = Setup {
        maps: fp.fw_maps()?,
        fp,
        in_idx,
        out_idx,
        in_mac,
        out_mac,
        generation: 0,
        _links: links,
    };
    s.firewall(false, false)?;
    let frames: Vec<Vec<u8>> = (0..b.flows).map(|i| frame(i, in_mac)).collect();
    let names = BTreeMap::from([(in_idx, b.ingress.clone()), (out_idx, b.egress.clone())]);

    // Load, read and compile each ruleset, the kernel's way.
    let mut cases = Vec::new();
    let wanted = b
        .rules
        .iter()
        .map(|&n| {
            (
                format!("rules-{n}"),
                linerate_firewall::seeds::rules(n),
                n as usize,
                0,
            )
        })
        .chain(
            b.set_sizes
                .iter()
                .map(|&m| (format!("set-{m}"), linerate_firewall::seeds::set(m), 3, m)),
        )
        .chain(b.access_lists.iter().map(|&n| {
            (
                format!("acl-{n}"),
                linerate_firewall::seeds::access_list(n),
                n as usize,
                0,
            )
        }));
    for (name, text, rules, set_size) in wanted {
        if b.stop.load(std::sync::atomic::Ordering::Relaxed) {
            bail!("interrupted");
        }
        progress(&format!("{name}: loading"));
        nft(ns, &["flush", "ruleset"])?;
        let file = tempfile::NamedTempFile::new()?;
        std::fs::write(file.path(), &text)?;
        let t = Instant::now();
        nft(ns, &["-f", &file.path().display().to_string()])?;
        let nft_load_ms = t.elapsed().as_secs_f64() * 1e3;
        let t = Instant::now();
        let ruleset = linerate_firewall::read::read_current_with(&|t, s| {
            linerate_netlink::nft_elements::dump(t, s)
        })?;
        let read_ms = t.elapsed().as_secs_f64() * 1e3;
        let t = Instant::now();
        let (c, refused) = Compiled::new(0, &ruleset, names.clone(), false);
        if let Some(why) = refused[0].as_ref() {
            bail!("{name}: the firewall cannot judge it: {why}");
        }
        // The verdict cache's cost: its keys learned from the program's
        // reports (the classifier, built above, is measured apart).
        let classified = c.classifiers()[0].is_some().then(|| c.clone());
        let c = c.without_classifiers();
        s.generation += 1;
        compile::publish(
            &mut s.maps,
            &Compiled {
                generation: s.generation,
                ..c.clone()
            },
        );
        let compile_publish_ms = t.elapsed().as_secs_f64() * 1e3;
        s.firewall(true, false)?;
        let entries = s.publish_and_learn(&c, &frames)?;
        progress(&format!(
            "{name}: nft -f {nft_load_ms:.0} ms, read {read_ms:.0} ms, compiled and published {compile_publish_ms:.1} ms; {entries} entries"
        ));
        let mut case = Case::unmeasured(
            name,
            rules,
            set_size,
            0,
            LoadTimes {
                nft_load_ms,
                read_ms,
                compile_publish_ms,
            },
            entries,
        );
        if let Some(full) = &classified {
            case.classifier = Some(s.classifier_cost(full, &frames, b.rounds)?);
            s.publish_and_learn(&c, &frames)?;
        }
        cases.push((c, frames.clone(), case));
    }
    nft(ns, &["flush", "ruleset"])?;

    // The stateful ruleset at each state count: the kernel's table filled
    // (each count's connections those of the smaller ones and more), every
    // connection's first frame through the fast path (found in the
    // kernel's table, kept in its own), the measured frames spread over
    // all of them.
    let mut states: Vec<u32> = b.states.clone();
    states.sort_unstable();
    if !states.is_empty() {
        let mut ct = s.fp.ct_maps()?;
        let flags = ct.flags();
        if flags & linerate_dataplane::layout::FW_CT_ON == 0 {
            bail!(
                "--states: this kernel has no XDP conntrack kfuncs (the stateful firewall is off)"
            );
        }
        ct.publish_flags(flags);
        // The stateful ruleset, and with --masquerade the same with what
        // leaves through the egress masqueraded.
        let compiled = |what: &str, text: String| -> Result<Compiled> {
            nft(ns, &["flush", "ruleset"])?;
            let file = tempfile::NamedTempFile::new()?;
            std::fs::write(file.path(), text)?;
            nft(ns, &["-f", &file.path().display().to_string()])?;
            let ruleset = linerate_firewall::read::read_current_with(&|t, s| {
                linerate_netlink::nft_elements::dump(t, s)
            })?;
            let (c, refused) = Compiled::new(0, &ruleset, names.clone(), true);
            if let Some(why) = refused[0].as_ref() {
                bail!("the {what} ruleset: the firewall cannot judge it: {why}");
            }
            Ok(c.without_classifiers())
        };
        let plain = compiled("stateful", linerate_firewall::seeds::stateful())?;
        let masqueraded = b
            .masquerade
            .then(|| {
                compiled(
                    "masquerading",
                    linerate_firewall::seeds::stateful_masquerade(&b.ingress, &b.egress),
                )
            })
            .transpose()?;
        let mut filled = 0;
        for &n in &states {
            for (net, c) in [
                (PLAIN_NET, Some(&plain)),
                (MASQUERADED_NET, masqueraded.as_ref()),
            ] {
                let Some(c) = c else { continue };
                let masquerade = net == MASQUERADED_NET;
                let name = if masquerade {
                    format!("states-{n}-masquerade")
                } else {
                    format!("states-{n}")
                };
                let t = Instant::now();
                fill_conntrack(filled, n, net, masquerade)?;
                let fill_ms = t.elapsed().as_secs_f64() * 1e3;
                let all: Vec<Vec<u8>> = (filled..n)
                    .map(|i| connection_frame(net, i, in_mac))
                    .collect();
                s.firewall(true, masquerade)?;
                let t = Instant::now();
                let timeouts = linerate_dataplane::ct_cache::Timeouts::now();
                let mut entries = s.publish_and_learn(c, &all)?;
                // The span fitted to the connections, as the router's
                // thread fits it each second, and the connections kept
                // again in their sets.
                let mut every: Option<Vec<Vec<u8>>> = None;
                while !ct.fit(0, &timeouts)?.is_empty() {
                    let every = every.get_or_insert_with(|| {
                        (0..n).map(|i| connection_frame(net, i, in_mac)).collect()
                    });
                    entries = s.publish_and_learn(c, every)?;
                }
                drop(all);
                progress(&format!(
                    "{name}: the kernel's table filled in {fill_ms:.0} ms, the fast path's in {:.0} ms, its span {:?} sets",
                    t.elapsed().as_secs_f64() * 1e3,
                    ct.sets_used()
                ));
                // Twice: the first sets every timeout (all carried since
                // 0), the second only checks (none carried since the
                // first). Every table's ways: the masqueraded case's
                // sweep holds the plain connections' too.
                let t = Instant::now();
                let (first, began) = ct.sweep(0, &timeouts)?;
                let first_ms = t.elapsed().as_secs_f64() * 1e3;
                let t = Instant::now();
                let (second, _) = ct.sweep(began, &timeouts)?;
                let second_ms = t.elapsed().as_secs_f64() * 1e3;
                progress(&format!(
                    "{name}: a sweep of {} ways took {first_ms:.0} ms setting {} timeouts, {second_ms:.0} ms checking them",
                    first.entries, first.refreshed
                ));
                let sweep = SweepCost {
                    ways: first.entries,
                    refreshed: first.refreshed,
                    setting_ms: first_ms,
                    checking_ms: second_ms,
                };
                anyhow::ensure!(
                    second.refreshed == 0,
                    "the second sweep set {} timeouts of connections not carried since the first",
                    second.refreshed
                );
                let step = (n / b.flows.min(n)).max(1);
                let sampled: Vec<Vec<u8>> = (0..n)
                    .step_by(step as usize)
                    .take(b.flows as usize)
                    .map(|i| connection_frame(net, i, in_mac))
                    .collect();
                let mut case = Case::unmeasured(
                    name,
                    c.families[0].as_ref().map_or(0, |f| f.filter.rules()),
                    0,
                    n,
                    // (The rulesets were loaded once, before the first count.)
                    LoadTimes {
                        nft_load_ms: 0.0,
                        read_ms: 0.0,
                        compile_publish_ms: 0.0,
                    },
                    entries,
                )
                .with_sweep(sweep);
                case.masquerade = masquerade;
                cases.push((c.clone(), sampled, case));
            }
            filled = n;
        }
        nft(ns, &["flush", "ruleset"])?;
    }

    for round in 0..b.rounds {
        if b.stop.load(std::sync::atomic::Ordering::Relaxed) {
            bail!("interrupted");
        }
        for (c, frames, case) in cases.iter_mut() {
            s.firewall(true, case.masquerade)?;
            s.publish_and_learn(c, frames)?;
            s.firewall(false, false)?;
            let base = s.mean_ns(frames, b.repeat)?;
            s.firewall(true, case.masquerade)?;
            let with = s.mean_ns(frames, b.repeat)?;
            case.baseline_rounds_ns_per_packet.push(base);
            case.rounds_ns_per_packet.push(with);
            case.round_ratios.push(with / base);
        }
        progress(&format!("round {} of {} done", round + 1, b.rounds));
    }
    let out = cases
        .into_iter()
        .map(|(_, _, mut c)| {
            c.ns_per_packet = median(&c.rounds_ns_per_packet);
            c.baseline_ns_per_packet = median(&c.baseline_rounds_ns_per_packet);
            c.ratio = median(&c.round_ratios);
            c
        })
        .collect();
    Ok(out)
}

/// How fast the firewall follows set element changes.
#[derive(Clone, Debug, Serialize)]
pub struct ElementRate {
    pub elements: u32,
    pub per_transaction: u32,
    /// `nft -f` adding them: the kernel's own time.
    pub nft_ms: f64,
    /// From nft's start until the firewall applied the last of them.
    pub applied_ms: f64,
    /// How long after nft returned the firewall had applied them.
    pub lag_ms: f64,
    /// Elements applied per second (over `applied_ms`): the kernel's pace
    /// and the firewall's together.
    pub per_second: f64,
    /// The firewall thread's own time on them (receiving and decoding the
    /// notifications, applying, publishing), and the changes a second
    /// that makes: how fast it would follow a kernel that took them faster.
    pub busy_ms: f64,
    pub own_per_second: f64,
    /// Whole reads of the ruleset meanwhile (0: all applied in place).
    pub reads: u64,
}

/// Adds `elements` addresses to a set a rule names, `per_transaction` a
/// transaction (one `nft -f` file of `add element` commands each, run as
/// one batch), with the firewall thread of `linerate route` following
/// them on the fast path's maps; then removes them likewise. The calling
/// thread must be in `ns`.
pub fn element_rate(ns: &str, elements: u32, per_transaction: u32) -> Result<Vec<ElementRate>> {
    if elements == 0 || per_transaction == 0 {
        bail!("elements and per_transaction: at least 1");
    }
    let fp = FastPath::load()?;
    let record = format!("{ns}-bench");
    let fw =
        linerate_fwfollow::thread::FwThread::start(fp.fw_maps()?, Some(record.clone()), false)?;
    if !fw.follows_nftables() {
        bail!("cannot follow nf_tables' notifications here");
    }
    nft(ns, &["flush", "ruleset"])?;
    let file = tempfile::NamedTempFile::new()?;
    std::fs::write(
        file.path(),
        "table inet linerate {\n  set blocked4 { type ipv4_addr; }\n  chain forward {\n    type filter hook forward priority 0; policy accept;\n    ip saddr @blocked4 drop\n  }\n}\n",
    )?;
    nft(ns, &["-f", &file.path().display().to_string()])?;
    fw.reread(BTreeMap::new());
    let read = || linerate_dataplane::record::read_firewall(&record);
    let t = Instant::now();
    while read()?.is_none_or(|r| r.judged[0].is_empty()) {
        if t.elapsed().as_secs() > 30 {
            bail!("the firewall did not take the ruleset");
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    let mut out = Vec::new();
    for add in [true, false] {
        // The batches, written before the clock starts.
        let mut text = String::new();
        let mut i = 0;
        while i < elements {
            let n = per_transaction.min(elements - i);
            let list: Vec<String> = (i..i + n)
                .map(|k| std::net::Ipv4Addr::from((100u32 << 24 | 64 << 16) + k).to_string())
                .collect();
            text.push_str(&format!(
                "{} element inet linerate blocked4 {{ {} }}\n",
                if add { "add" } else { "delete" },
                list.join(", ")
            ));
            i += n;
        }
        let batches: Vec<String> = text.lines().map(|l| format!("{l}\n")).collect();
        let before = read()?.unwrap_or_default();
        let want = before.elements_changed + elements as u64;
        let start = Instant::now();
        for b in &batches {
            let f = tempfile::NamedTempFile::new()?;
            std::fs::write(f.path(), b)?;
            nft(ns, &["-f", &f.path().display().to_string()])?;
        }
        let nft_done = start.elapsed();
        let applied = loop {
            let r = read()?.unwrap_or_default();
            if r.elements_changed >= want || r.reads > before.reads {
                break (start.elapsed(), r);
            }
            if start.elapsed().as_secs() > 120 {
                bail!(
                    "the firewall applied {} of {elements} changes",
                    r.elements_changed - before.elements_changed
                );
            }
            std::thread::sleep(std::time::Duration::from_micros(500));
        };
        let applied_ms = applied.0.as_secs_f64() * 1e3;
        let busy =
            std::time::Duration::from_micros(applied.1.elements_busy_us - before.elements_busy_us);
        out.push(ElementRate {
            elements,
            per_transaction,
            nft_ms: nft_done.as_secs_f64() * 1e3,
            applied_ms,
            lag_ms: (applied.0 - nft_done).as_secs_f64() * 1e3,
            per_second: elements as f64 / applied.0.as_secs_f64(),
            busy_ms: busy.as_secs_f64() * 1e3,
            own_per_second: elements as f64 / busy.as_secs_f64().max(1e-9),
            reads: applied.1.reads - before.reads,
        });
    }
    nft(ns, &["flush", "ruleset"])?;
    drop(fw);
    Ok(out)
}

/// What `linerate bench firewall` prints of its cases and of the element
/// changes' rates.
/// A run: the rulesets' cases and the element changes' rates; printed as
/// [`report`].
#[derive(Debug, Serialize)]
pub struct Report {
    pub cases: Vec<Case>,
    pub element_changes: Vec<ElementRate>,
}

impl std::fmt::Display for Report {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&report(&self.cases, &self.element_changes))
    }
}

/// The command line's run: `c`'s lists with their 0s left out, checked
/// before anything is changed, then [`run_on_scratch`] with room in the
/// kernel's conntrack for the largest state count (other namespaces'
/// entries count against the same limit; masqueraded, as many
/// connections again), a bucket a state, put back after.
pub fn run_counts(
    c: &Counts,
    (elements, per_transaction): (u32, u32),
    stop: &'static std::sync::atomic::AtomicBool,
    progress: impl FnMut(&String) + Send,
) -> Result<Report> {
    let some = |v: &[u32]| -> Vec<u32> { v.iter().copied().filter(|&n| n > 0).collect() };
    let (rules, sets, states, acls) = (
        some(c.rules),
        some(c.set_sizes),
        some(c.states),
        some(c.access_lists),
    );
    check(&Counts {
        rules: &rules,
        set_sizes: &sets,
        states: &states,
        access_lists: &acls,
        ..*c
    })?;
    if per_transaction == 0 {
        bail!("--per-transaction: at least 1");
    }
    let largest = states.iter().copied().max().unwrap_or(0) as u64 * (1 + c.masquerade as u64);
    let _raised = if largest > 0 {
        use crate::conntrack::{Raised, CT_HASHSIZE, CT_MAX};
        Some((
            Raised::at_least(CT_MAX, largest + 65_536)?,
            Raised::at_least(CT_HASHSIZE, largest)?,
        ))
    } else {
        None
    };
    let b = FirewallBench {
        netns: String::new(),
        ingress: String::new(),
        egress: String::new(),
        rules,
        set_sizes: sets,
        access_lists: acls,
        states,
        masquerade: c.masquerade,
        flows: c.flows,
        repeat: c.repeat,
        rounds: c.rounds,
        stop,
    };
    run_on_scratch(b, (elements, per_transaction), progress)
}

/// The bench on a scratch veth pair of its own, removed after whatever
/// happens (`b`'s namespace and interfaces are the pair's); then
/// `elements` set elements changed, `per_transaction` a transaction (0:
/// none).
pub fn run_on_scratch(
    mut b: FirewallBench,
    (elements, per_transaction): (u32, u32),
    mut progress: impl FnMut(&String) + Send,
) -> Result<Report> {
    let pair = linerate_lab::scratch::ScratchPair::new(0)?;
    (b.netns, b.ingress, b.egress) = (pair.netns.clone(), pair.tx.clone(), pair.rx.clone());
    std::thread::scope(|s| {
        s.spawn(|| {
            linerate_host::netns::enter_for_good(&b.netns)?;
            let cases = run(&b, &mut |line| progress(&line.to_string()))?;
            let element_changes = match elements {
                0 => Vec::new(),
                n => element_rate(&b.netns, n, per_transaction)?,
            };
            Ok(Report {
                cases,
                element_changes,
            })
        })
        .join()
        .map_err(|_| anyhow::anyhow!("the bench thread panicked"))?
    })
}

pub fn report(cases: &[Case], rates: &[ElementRate]) -> String {
    use std::fmt::Write;
    let mut out = String::from(
        "ruleset        entries  ns/packet  without  ratio (min-max)        load: nft -f   read  compile+publish\n",
    );
    for c in cases {
        let _ = writeln!(
            out,
            "{:<14} {:>7} {:>10.1} {:>8.1}  {:<22} {:>11.0} ms {:>4.0} ms {:>7.1} ms",
            c.name,
            c.entries,
            c.ns_per_packet,
            c.baseline_ns_per_packet,
            crate::show_ratios(&c.round_ratios),
            c.load.nft_load_ms,
            c.load.read_ms,
            c.load.compile_publish_ms
        );
    }
    for c in cases {
        if let Some(k) = &c.classifier {
            let _ = writeln!(
                out,
                "{}: after a change, a new flow's first frame {:.1} ns (rounds {:?}); a known flow's first frame, judged by the classifier in the program, {:.1} ns (rounds {:?}); a hit after it {:.1} ns ({} keys a round, single runs)",
                c.name,
                k.new_flow_ns,
                k.rounds_new_flow_ns
                    .iter()
                    .map(|v| (v * 10.0).round() / 10.0)
                    .collect::<Vec<_>>(),
                k.miss_ns,
                k.rounds_miss_ns
                    .iter()
                    .map(|v| (v * 10.0).round() / 10.0)
                    .collect::<Vec<_>>(),
                k.hit_ns,
                k.keys
            );
        }
    }
    for c in cases {
        if let Some(s) = &c.sweep {
            let _ = writeln!(
                out,
                "{}: a sweep of the fast path's {} ways (connections, NAT'd directions): {:.0} ms setting {} kernel timeouts, {:.0} ms checking them ({:.2} and {:.2} us a way)",
                c.name,
                s.ways,
                s.setting_ms,
                s.refreshed,
                s.checking_ms,
                s.setting_ms * 1e3 / s.ways.max(1) as f64,
                s.checking_ms * 1e3 / s.ways.max(1) as f64
            );
        }
    }
    for (r, what) in rates.iter().zip(["added", "removed"]) {
        let _ = writeln!(
            out,
            "{} set elements {what}, {} a transaction: nft -f {:.0} ms; applied by the firewall {:.0} ms after the first began ({:.1} ms after nft returned): {:.0} changes/s, {} reads of the ruleset; the firewall's own time {:.0} ms: {:.0} changes/s",
            r.elements,
            r.per_transaction,
            r.nft_ms,
            r.applied_ms,
            r.lag_ms,
            r.per_second,
            r.reads,
            r.busy_ms,
            r.own_per_second
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn counts<'a>(states: &'a [u32], masquerade: bool) -> Counts<'a> {
        Counts {
            rules: &[],
            set_sizes: &[],
            states,
            access_lists: &[],
            masquerade,
            flows: 1000,
            repeat: 200,
            rounds: 5,
        }
    }

    /// Masqueraded connections go in pairs, each mapped to the other: a
    /// count that leaves one alone, or masquerade without a state count,
    /// is refused by its flag before anything is changed.
    #[test]
    fn masquerade_takes_even_state_counts_only() {
        assert!(check(&counts(&[2000, 100_000], true)).is_ok());
        assert!(check(&counts(&[2001], false)).is_ok());
        let odd = check(&counts(&[2000, 2001], true)).unwrap_err().to_string();
        assert!(
            odd.starts_with("--states with --masquerade") && odd.ends_with("2001"),
            "{odd}"
        );
        let none = check(&counts(&[], true)).unwrap_err().to_string();
        assert!(none.starts_with("--masquerade"), "{none}");
        let big = check(&counts(&[2_000_002], true)).unwrap_err().to_string();
        assert!(big.starts_with("--states: at most"), "{big}");
    }
}
