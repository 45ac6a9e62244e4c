//! The fast path's connection cache (bpf/include/router/ct_judge.h) and
//! the NAT stage's ways (bpf/include/router/nat.h): their layout's
//! arithmetic (keys, sets, sizes), their maps, and the sweep's program
//! that checks and refreshes the kernel's entries for the connections
//! they hold. The thread that runs the sweep and follows
//! conntrack's destroy events is the firewall's (linerate_firewall::conntrack).
use crate::layout::{
    CtFlowKey, CtKeep, CtSlot, CtWay4, FwState, NatWay4, NatWay6, CT4_SETS_MAX, CT6_SETS_MAX,
    CT_CACHE_WAYS, CT_KEEP_BATCH, CT_KEEP_GONE, CT_KEEP_KEPT, CT_SET_BITS_TOP, FW_CT_CHECKSUM,
    FW_CT_ON, FW_CT_TCP_LIBERAL,
};
use anyhow::{Context, Result};
use libbpf_rs::MapCore;
use linerate_bpf::layout::Pod;
use linerate_bpf::maps::MappedArray;
use linerate_bpf::test_run::{self, XdpAction};
use std::mem::offset_of;
use std::ops::Range;
use std::os::fd::{AsFd, OwnedFd};
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

pub use linerate_netlink::ctnetlink::End;

/// Whether end `a` sorts before `b` as the fast path orders a key's ends
/// (ct_side_first): 32-bit words as x86 loads them, then the ports as
/// loaded.
fn first(a: &End, b: &End, ipv6: bool) -> bool {
    let words = if ipv6 { 4 } else { 1 };
    for i in 0..words {
        let w = |e: &End| u32::from_le_bytes(e.addr[i * 4..i * 4 + 4].try_into().unwrap());
        if w(a) != w(b) {
            return w(a) < w(b);
        }
    }
    u16::from_le_bytes(a.port) < u16::from_le_bytes(b.port)
}

/// The fast path's key of the connection from `src` to `dst`
/// (ct_key_of), and whether `src` is its side a.
pub fn key_of(src: &End, dst: &End, l4proto: u8, ipv6: bool) -> (CtFlowKey, bool) {
    let from_a = first(src, dst, ipv6);
    let (a, b) = if from_a { (src, dst) } else { (dst, src) };
    (
        CtFlowKey {
            a: a.addr,
            b: b.addr,
            aport: u16::from_ne_bytes(a.port),
            bport: u16::from_ne_bytes(b.port),
            l4proto,
            ipv6: ipv6 as u8,
            pad: [0; 2],
        },
        from_a,
    )
}

/// The NAT stage's key of the packets from `src` to `dst` (nat_key4_of,
/// nat_key6_of): the direction's tuple, `src` its side a.
pub fn nat_key_of(src: &End, dst: &End, l4proto: u8, ipv6: bool) -> CtFlowKey {
    CtFlowKey {
        a: src.addr,
        b: dst.addr,
        aport: u16::from_ne_bytes(src.port),
        bport: u16::from_ne_bytes(dst.port),
        l4proto,
        ipv6: ipv6 as u8,
        pad: [0; 2],
    }
}

/// The final mix of both families' set hashes: the low `bits` bits of its
/// top CT_SET_BITS_TOP (ct_span).
fn fold(mut h: u64, bits: u32) -> u32 {
    h ^= h >> 29;
    h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
    ((h >> (64 - CT_SET_BITS_TOP)) as u32) & ((1u32 << bits) - 1)
}

/// The set of connection `k` in the fast path's cache of its family
/// (ct_set4, ct_set6), `bits[ipv6]` bits of its hash; of direction `k`
/// (a [`nat_key_of`]) in the NAT stage's.
pub fn set_of(k: &CtFlowKey, bits: [u32; 2]) -> u32 {
    if k.ipv6 == 0 {
        let word = |x: &[u8; 16]| u32::from_le_bytes(x[..4].try_into().unwrap()) as u64;
        let ab = word(&k.a) | word(&k.b) << 32;
        let ports = k.aport as u64 | (k.bport as u64) << 16 | (k.l4proto as u64) << 32;
        return fold(
            ab.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ ports.wrapping_mul(0xc2b2_ae3d_27d4_eb4f),
            bits[0],
        );
    }
    let b = k.as_bytes();
    let w = |i: usize| u64::from_ne_bytes(b[i * 8..i * 8 + 8].try_into().unwrap());
    fold(
        (w(0) ^ w(4)).wrapping_mul(0x9e37_79b9_7f4a_7c15)
            ^ w(1).wrapping_mul(0xc2b2_ae3d_27d4_eb4f)
            ^ (w(2) ^ w(3)).wrapping_mul(0x1656_67b1_9e37_79f9),
        bits[1],
    )
}

/// The kernel's default nf_conntrack_max on a machine of a few GiB and
/// more: what the cache is sized for where the sysctl cannot be read (no
/// conntrack yet).
const CONNTRACK_MAX_DEFAULT: u64 = 262_144;

/// The fewest sets a family's tables have, and use, `[ipv6]`: 256 KiB of
/// IPv4 connections' ways, 64 KiB of IPv6 ones'.
pub const LEAST_SETS: [usize; 2] = [1 << LEAST_BITS[0], 1 << LEAST_BITS[1]];
const LEAST_BITS: [u32; 2] = [12, 10];

/// The sets of the fast path's connection caches, `[ipv6]`, for a
/// conntrack table of `conntrack_max` entries: IPv4's the power of two at
/// or above it (its ways at most half full when the table is full of
/// IPv4 connections), IPv6's (whose ways take twice the bytes) a quarter
/// of that; [`LEAST_SETS`] at least, CT4_SETS_MAX and CT6_SETS_MAX at
/// most. What the tables have room for: how many of them the fast path
/// uses follows the connections they hold ([`CtMaps::fit`]).
pub fn cache_sets(conntrack_max: Option<u64>) -> [usize; 2] {
    let max = conntrack_max.unwrap_or(CONNTRACK_MAX_DEFAULT).max(1) as usize;
    let v4 = max.next_power_of_two().clamp(LEAST_SETS[0], CT4_SETS_MAX);
    [v4, (v4 / 4).clamp(LEAST_SETS[1], CT6_SETS_MAX)]
}

/// The share of a family's ways in use above which its span of sets
/// widens, and the share the span is fitted to at most: with two ways a
/// set, a quarter of them in use leaves about 3% of its connections with
/// no way in their set (found in the kernel's table on each packet), an
/// eighth 1%.
const WIDEN_ABOVE: f64 = 0.25;
/// ... below which it narrows (a sixteenth: a span fitted stays between).
const NARROW_BELOW: f64 = 1.0 / 16.0;
/// ... at and above which the span is taken for too narrow to show how
/// many connections want it (those that found no way are not in it):
/// widened eightfold at least.
const CROWDED: f64 = 0.75;

/// The bits of sets a family's tables should span, spanning `bits` now
/// with `in_use` of their ways in use (the fuller of the family's two
/// tables), within `least` and `most`: widened until at most a quarter
/// would be in use, narrowed where under a sixteenth are until between an
/// eighth and a quarter would be, else left. Every set the fast path does
/// not use is memory it does not touch: a table sized for
/// nf_conntrack_max holding far fewer connections scatters each over a
/// page of its own, a TLB miss on every packet (docs/firewall-stateful.md,
/// "The span of sets in use").
pub fn fitted_bits(bits: u32, in_use: f64, least: u32, most: u32) -> u32 {
    let mut b = bits;
    let mut share = in_use;
    if in_use > WIDEN_ABOVE {
        while share > WIDEN_ABOVE {
            share /= 2.0;
            b += 1;
        }
        if in_use >= CROWDED {
            b = b.max(bits + 3);
        }
    } else if in_use < NARROW_BELOW {
        while b > least && share * 2.0 <= WIDEN_ABOVE {
            share *= 2.0;
            b -= 1;
        }
    }
    b.clamp(least, most.max(least))
}

/// How many sets a family's tables span now, `[ipv6]`, and how often the
/// spans changed: for the metrics.
#[derive(Debug, Default)]
pub struct CacheSpan {
    pub sets: [AtomicU32; 2],
    /// What the tables have room for (sized at load).
    pub most: [AtomicU32; 2],
    pub refits: AtomicU64,
}

/// How long a span stays before it narrows: a widened span's moved ways
/// are empty until their connections' next packets keep them again, and
/// connections quiet for a moment (a generator opening 100,000 in passes)
/// would otherwise narrow it back at once, and widen it again.
const NARROW_AFTER: Duration = Duration::from_secs(10);

/// Sets sampled to tell how full a span is (all of a smaller one).
const SAMPLED_SETS: u32 = 4096;

/// The tables of ways the control plane keeps: each family's connection
/// cache (a connection by its canonical key) and the NAT stage's (a
/// direction by its tuple), each family's with as many sets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Table {
    Ct4,
    Ct6,
    Nat4,
    Nat6,
}

impl Table {
    const ALL: [Table; 4] = [Table::Ct4, Table::Ct6, Table::Nat4, Table::Nat6];

    fn name(self) -> &'static str {
        match self {
            Table::Ct4 => "ct_cache4",
            Table::Ct6 => "ct_cache6",
            Table::Nat4 => "nat_cache4",
            Table::Nat6 => "nat_cache6",
        }
    }

    fn ipv6(self) -> bool {
        matches!(self, Table::Ct6 | Table::Nat6)
    }

    fn nat(self) -> bool {
        matches!(self, Table::Nat4 | Table::Nat6)
    }

    /// The table of `key`'s family.
    fn of(key: &CtFlowKey, nat: bool) -> Table {
        Table::of_family(key.ipv6 != 0, nat)
    }

    fn of_family(ipv6: bool, nat: bool) -> Table {
        match (nat, ipv6) {
            (false, false) => Table::Ct4,
            (false, true) => Table::Ct6,
            (true, false) => Table::Nat4,
            (true, true) => Table::Nat6,
        }
    }

    fn way_bytes(self) -> usize {
        match self {
            Table::Ct4 => size_of::<CtWay4>(),
            Table::Ct6 => size_of::<CtSlot>(),
            Table::Nat4 => size_of::<NatWay4>(),
            Table::Nat6 => size_of::<NatWay6>(),
        }
    }

    /// Where a way holds its protocol (0: empty).
    fn proto_offset(self) -> usize {
        match self {
            Table::Ct4 => offset_of!(CtWay4, l4proto),
            Table::Ct6 => offset_of!(CtSlot, key) + offset_of!(CtFlowKey, l4proto),
            Table::Nat4 => offset_of!(NatWay4, l4proto),
            Table::Nat6 => offset_of!(NatWay6, key) + offset_of!(CtFlowKey, l4proto),
        }
    }
}

/// The connection caches' and the NAT stage's sizes for this namespace's
/// nf_conntrack_max, as [`linerate_bpf::loader::load_sized`] takes them.
pub fn cache_sizes() -> [(&'static str, u32); 4] {
    let sets = cache_sets(sysctl("nf_conntrack_max"));
    Table::ALL.map(|t| (t.name(), (sets[t.ipv6() as usize] * CT_CACHE_WAYS) as u32))
}

/// The key an IPv4 way holds.
fn key4(w: &CtWay4) -> CtFlowKey {
    let mut k = CtFlowKey {
        aport: w.aport,
        bport: w.bport,
        l4proto: w.l4proto,
        ..Default::default()
    };
    k.a[..4].copy_from_slice(&w.a);
    k.b[..4].copy_from_slice(&w.b);
    k
}

/// The key an IPv4 NAT way holds.
fn nat_key4(w: &NatWay4) -> CtFlowKey {
    let mut k = CtFlowKey {
        aport: w.sport,
        bport: w.dport,
        l4proto: w.l4proto,
        ..Default::default()
    };
    k.a[..4].copy_from_slice(&w.saddr);
    k.b[..4].copy_from_slice(&w.daddr);
    k
}

/// What a sweep asks ct_keeper for a connection last carried at jiffy
/// `seen`: its kernel timeout set to run `timeout_ms` from now (0: only
/// checked). Carried since the last sweep (`seen` after `since`): the
/// stream timeout from its last packet, at least a millisecond (a flow
/// past it is the kernel's to expire, which it has or is about to).
pub fn keep_request(seen: u64, now: u64, since: u64, hz: u64, stream: Duration) -> u32 {
    if seen <= since {
        return 0;
    }
    let age = Duration::from_nanos(now.saturating_sub(seen) * 1_000_000_000 / hz.max(1));
    // Rounded up: the kernel's jiffies round up too (msecs_to_jiffies).
    stream
        .saturating_sub(age)
        .as_nanos()
        .div_ceil(1_000_000)
        .clamp(1, u32::MAX as u128) as u32
}

/// The kernel's tick rate from two readings of the fast path's clock
/// (jiffies, ns): the common HZ nearest.
/// The clock of the router program's `ct_clock` now: (bpf_jiffies64,
/// bpf_ktime_get_ns).
pub fn clock_of(ct_clock: std::os::fd::BorrowedFd<'_>) -> Result<(u64, u64)> {
    let mut out = [0u8; 64];
    let r = test_run::run_xdp(ct_clock, &[0u8; 64], &mut out, 1)?;
    anyhow::ensure!(r.verdict == XdpAction::Pass, "ct_clock: {:?}", r.verdict);
    let word = |i: usize| u64::from_ne_bytes(out[i * 8..i * 8 + 8].try_into().unwrap());
    Ok((word(0), word(1)))
}

/// The kernel's HZ, the jiffies `ct_clock` reads 40 ms apart.
pub fn measure_hz(ct_clock: std::os::fd::BorrowedFd<'_>) -> Result<u64> {
    let a = clock_of(ct_clock)?;
    std::thread::sleep(Duration::from_millis(40));
    Ok(hz_of(a, clock_of(ct_clock)?))
}

pub fn hz_of(a: (u64, u64), b: (u64, u64)) -> u64 {
    let (jiffies, ns) = (b.0.saturating_sub(a.0), b.1.saturating_sub(a.1).max(1));
    let measured = jiffies as f64 * 1e9 / ns as f64;
    *[100u64, 250, 300, 1000]
        .iter()
        .min_by(|x, y| {
            let d = |h: u64| (h as f64 - measured).abs();
            d(**x).total_cmp(&d(**y))
        })
        .unwrap()
}

/// A conntrack sysctl of the calling thread's network namespace (None:
/// not there, no conntrack).
pub fn sysctl(name: &str) -> Option<u64> {
    std::fs::read_to_string(format!("/proc/sys/net/netfilter/{name}"))
        .ok()?
        .trim()
        .parse()
        .ok()
}

/// The kernel's timeouts for the connections the fast path carries: what
/// each of their packets would set the entry's timeout to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Timeouts {
    /// nf_conntrack_udp_timeout_stream (an assured UDP connection's).
    pub udp: Duration,
    /// nf_conntrack_tcp_timeout_established.
    pub tcp: Duration,
}

impl Timeouts {
    /// This namespace's (the kernel's defaults where they cannot be read).
    pub fn now() -> Timeouts {
        let secs = |name, default| Duration::from_secs(sysctl(name).unwrap_or(default));
        Timeouts {
            udp: secs("nf_conntrack_udp_timeout_stream", 120),
            tcp: secs("nf_conntrack_tcp_timeout_established", 432_000),
        }
    }

    fn of(&self, l4proto: u8) -> Duration {
        if l4proto == 6 {
            self.tcp
        } else {
            self.udp
        }
    }
}

/// The FW_CT_* flags the namespace's conntrack sysctls give.
pub fn sysctl_flags() -> u32 {
    let on = |name, default| sysctl(name).unwrap_or(default) != 0;
    (if on("nf_conntrack_checksum", 1) {
        FW_CT_CHECKSUM
    } else {
        0
    }) | if on("nf_conntrack_tcp_be_liberal", 0) {
        FW_CT_TCP_LIBERAL
    } else {
        0
    }
}

/// What a sweep did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Swept {
    /// Ways held: a connection's in the connection cache, a direction's in
    /// the NAT stage's.
    pub entries: u64,
    /// Kernel timeouts set (carried since the last sweep).
    pub refreshed: u64,
    /// Connections forgotten: the kernel's entry was gone or not carried
    /// any more.
    pub forgotten: u64,
    /// Ways emptied for being outside their set (the span changed): their
    /// connections are kept again by their next packets.
    pub moved: u64,
}

impl Swept {
    fn add(&mut self, o: Swept) {
        self.entries += o.entries;
        self.refreshed += o.refreshed;
        self.forgotten += o.forgotten;
        self.moved += o.moved;
    }
}

/// How long a connection keeps its way after its last packet while
/// another wants its set (fw_state.ct_idle): two seconds, so that where
/// more busy connections hash to a set than it has ways, those in it stay
/// (the others are found in the kernel's table each packet) rather than
/// all pushing each other out.
const KEEP_WAY_FOR: Duration = Duration::from_secs(2);

/// A way of any table, as read.
struct Way {
    seq: u32,
    /// l4proto 0: empty.
    key: CtFlowKey,
    seen: Seen,
}

/// A way's `seen`: the jiffies whole, or their low 32 bits (an IPv4 NAT
/// way's).
#[derive(Clone, Copy)]
enum Seen {
    Whole(u64),
    Low(u32),
}

impl Seen {
    /// The jiffy it stands for, `now` the jiffies within 2^31 of it:
    /// before it, or after it where the fast path carried a packet after
    /// `now` was read (a sweep reads the clock once, then walks the ways).
    fn at(self, now: u64) -> u64 {
        match self {
            Seen::Whole(j) => j,
            Seen::Low(low) => now.wrapping_add_signed(low.wrapping_sub(now as u32) as i32 as i64),
        }
    }
}

/// The fast path's connection cache and the NAT stage's ways, the keeper
/// program and its clock.
pub struct CtMaps {
    keeper: OwnedFd,
    clock: OwnedFd,
    /// The tables, by [`Table`].
    cache: [MappedArray; 4],
    /// Each family's tables' sets, in bits: what they have room for.
    table_bits: [u32; 2],
    /// ... the sets the fast path uses (fw_state.ct_bits: [`CtMaps::fit`]).
    bits: [u32; 2],
    /// ... the most it has used since the sets above were last emptied.
    used_bits: [u32; 2],
    /// When each span last changed (or the router started).
    changed_at: [std::time::Instant; 2],
    span: Arc<CacheSpan>,
    /// fw_state, for its ct_flags and ct_idle words.
    state: MappedArray,
    /// The kernel's HZ: the length of the jiffies `seen` counts.
    hz: u64,
    /// The ring the fast path offers established TCP connections on
    /// (FW_CT_TCP_CARRY; a [`CtFlowKey`] each, the offering packet's
    /// source in `a`).
    offers: libbpf_rs::MapHandle,
}

impl CtMaps {
    /// Those of a loaded router object.
    pub fn open(obj: &libbpf_rs::Object) -> Result<CtMaps> {
        let fd = |name| -> Result<OwnedFd> {
            let prog = linerate_bpf::loader::prog(obj, name)?;
            prog.as_fd()
                .try_clone_to_owned()
                .with_context(|| format!("program {name}"))
        };
        // Each table's sets, a power of two, as the object was sized.
        let table = |name, most: usize| -> Result<(MappedArray, u32)> {
            let map = linerate_bpf::loader::map(obj, name)?;
            let sets = map.max_entries() as usize / CT_CACHE_WAYS;
            anyhow::ensure!(
                sets.is_power_of_two()
                    && sets <= most
                    && map.max_entries() as usize == sets * CT_CACHE_WAYS,
                "map {name} holds {} ways: not two ways a set, a power of two sets up to {most}",
                map.max_entries()
            );
            Ok((MappedArray::open(&map)?, sets.trailing_zeros()))
        };
        let (v4, bits4) = table("ct_cache4", CT4_SETS_MAX)?;
        let (v6, bits6) = table("ct_cache6", CT6_SETS_MAX)?;
        let (nat4, nat_bits4) = table("nat_cache4", CT4_SETS_MAX)?;
        let (nat6, nat_bits6) = table("nat_cache6", CT6_SETS_MAX)?;
        anyhow::ensure!(
            [nat_bits4, nat_bits6] == [bits4, bits6],
            "the NAT stage's tables have {} and {} bits of sets, the connection cache's {bits4} and {bits6}: they must have as many",
            nat_bits4,
            nat_bits6
        );
        // The span the connections the kernel holds now would want, each
        // perhaps NAT'd (two ways).
        let count = sysctl("nf_conntrack_count").unwrap_or(0) as f64;
        let table_bits = [bits4, bits6];
        let bits: [u32; 2] = std::array::from_fn(|f| {
            let least = LEAST_BITS[f];
            fitted_bits(least, count / (1u64 << least) as f64, least, table_bits[f])
        });
        let mut m = CtMaps {
            keeper: fd("ct_keeper")?,
            clock: fd("ct_clock")?,
            cache: [v4, v6, nat4, nat6],
            table_bits,
            bits,
            used_bits: bits,
            changed_at: [std::time::Instant::now(); 2],
            span: Arc::new(CacheSpan::default()),
            state: MappedArray::open(&linerate_bpf::loader::map(obj, "fw_state")?)?,
            hz: 0,
            offers: libbpf_rs::MapHandle::try_from(&linerate_bpf::loader::map(obj, "ct_offers")?)
                .context("map ct_offers")?,
        };
        m.hz = measure_hz(m.clock.as_fd())?;
        m.state
            .word(0, offset_of!(FwState, ct_idle))
            .store((KEEP_WAY_FOR.as_secs() * m.hz) as u32, Ordering::Release);
        // Before FW_CT_ON (publish_flags), which the fast path reads first.
        for f in 0..2 {
            m.span.most[f].store(1 << table_bits[f], Ordering::Relaxed);
            m.publish_bits(f, bits[f]);
        }
        Ok(m)
    }

    /// How many connections of each family the cache has ways for,
    /// `[ipv6]`.
    pub fn ways(&self) -> [u64; 2] {
        self.table_bits.map(|b| (CT_CACHE_WAYS as u64) << b)
    }

    /// How many sets of each family's tables the fast path uses now,
    /// `[ipv6]`.
    pub fn sets_used(&self) -> [u32; 2] {
        self.bits.map(|b| 1 << b)
    }

    /// The spans as the metrics read them.
    pub fn span(&self) -> Arc<CacheSpan> {
        self.span.clone()
    }

    /// Makes the first 2^`bits` sets family `f`'s span (fw_state.ct_bits).
    fn publish_bits(&mut self, f: usize, bits: u32) {
        self.bits[f] = bits;
        self.state
            .write_bytes(0, offset_of!(FwState, ct_bits) + f, &[bits as u8]);
        self.span.sets[f].store(1 << bits, Ordering::Relaxed);
    }

    /// The share of `table`'s ways in use within the span: every set of a
    /// small one, else SAMPLED_SETS spread evenly over it.
    fn in_use(&self, table: Table) -> f64 {
        let sets = 1u32 << self.bits[table.ipv6() as usize];
        let step = (sets / SAMPLED_SETS).max(1);
        let t = &self.cache[table as usize];
        let (mut ways, mut used) = (0u64, 0u64);
        for set in (0..sets).step_by(step as usize) {
            for w in 0..CT_CACHE_WAYS as u32 {
                ways += 1;
                used += (t.byte(set * CT_CACHE_WAYS as u32 + w, table.proto_offset()) != 0) as u64;
            }
        }
        used as f64 / ways.max(1) as f64
    }

    /// Fits each family's span of sets to the ways in use in it
    /// ([`fitted_bits`]; narrowed only where it has not changed for
    /// NARROW_AFTER), the spans changed, `(ipv6, from, to)` in bits.
    /// Widened, the sets past the old span are emptied first (of what a
    /// packet judged by an older span may have left there), then the span
    /// published; either way, the ways then outside their set (half of
    /// them, or the narrowed-off ones) go as a sweep's would, their kernel
    /// timeouts set first (`since`, `timeouts`: see [`CtMaps::sweep`]).
    /// Their connections' next packets find them in the kernel's table and
    /// keep them in their sets again: the fast path carries them
    /// throughout.
    pub fn fit(&mut self, since: u64, timeouts: &Timeouts) -> Result<Vec<(bool, u32, u32)>> {
        let mut changed = Vec::new();
        for (f, least) in LEAST_BITS.into_iter().enumerate() {
            let in_use = [false, true]
                .map(|nat| self.in_use(Table::of_family(f == 1, nat)))
                .into_iter()
                .fold(0.0, f64::max);
            let (old, new) = (
                self.bits[f],
                fitted_bits(self.bits[f], in_use, least, self.table_bits[f]),
            );
            if new == old || (new < old && self.changed_at[f].elapsed() < NARROW_AFTER) {
                continue;
            }
            self.changed_at[f] = std::time::Instant::now();
            let now = self.clock()?.0;
            if new > old && self.used_bits[f] > old {
                let past = 1 << old..1 << new.min(self.used_bits[f]);
                self.walk(f == 1, past, (since, now), timeouts, Walk::Empty)?;
            }
            self.publish_bits(f, new);
            self.used_bits[f] = self.used_bits[f].max(new);
            self.walk(
                f == 1,
                0..1 << old.max(new),
                (since, now),
                timeouts,
                Walk::Misplaced,
            )?;
            self.span.refits.fetch_add(1, Ordering::Relaxed);
            changed.push((f == 1, old, new));
        }
        Ok(changed)
    }

    /// What the cache is: its ways and memory (the NAT stage's with it).
    pub fn describe(&self) -> String {
        let [v4, v6] = self.ways();
        let bytes: u64 = Table::ALL
            .iter()
            .map(|t| self.ways()[t.ipv6() as usize] * t.way_bytes() as u64)
            .sum();
        let [s4, s6] = self.sets_used();
        format!(
            "ways for {v4} IPv4 and {v6} IPv6 connections, and as many directions of NAT'd ones ({} MiB); {s4} and {s6} sets of two ways in use now, fitted to the connections they hold",
            bytes >> 20
        )
    }

    /// nf_conntrack_max as this namespace has it now, for a message.
    pub fn conntrack_max_now() -> String {
        sysctl("nf_conntrack_max").map_or("not set (no conntrack yet)".into(), |m| m.to_string())
    }

    /// Whether nf_conntrack_max `max` asks for a larger cache than this.
    pub fn outgrown_by(&self, max: Option<u64>) -> bool {
        cache_sets(max)[0] > (self.ways()[0] as usize / CT_CACHE_WAYS)
    }

    /// Way `i` of `table`.
    fn way(&self, table: Table, i: u32) -> Way {
        let t = &self.cache[table as usize];
        match table {
            Table::Ct4 => {
                let w: CtWay4 = t.read_entry(i);
                Way {
                    seq: w.seq,
                    key: key4(&w),
                    seen: Seen::Whole(w.seen),
                }
            }
            Table::Ct6 => {
                let w: CtSlot = t.read_entry(i);
                Way {
                    seq: w.seq,
                    key: w.key,
                    seen: Seen::Whole(w.seen),
                }
            }
            Table::Nat4 => {
                let w: NatWay4 = t.read_entry(i);
                Way {
                    seq: w.seq,
                    key: nat_key4(&w),
                    seen: Seen::Low(w.seen),
                }
            }
            Table::Nat6 => {
                let w: NatWay6 = t.read_entry(i);
                Way {
                    seq: w.seq,
                    key: w.key,
                    seen: Seen::Whole(w.seen),
                }
            }
        }
    }

    /// The fast path's clock now: (bpf_jiffies64, bpf_ktime_get_ns).
    fn clock(&self) -> Result<(u64, u64)> {
        clock_of(self.clock.as_fd())
    }

    /// Runs ct_keeper on `batch`, writing the results into it; false if
    /// the kernel lacks the conntrack kfuncs.
    fn keep(&self, batch: &mut [CtKeep]) -> Result<bool> {
        let bytes: Vec<u8> = batch.iter().flat_map(|r| r.as_bytes().to_vec()).collect();
        let mut out = vec![0u8; bytes.len()];
        let r = test_run::run_xdp(self.keeper.as_fd(), &bytes, &mut out, 1)?;
        if r.verdict != XdpAction::Pass {
            return Ok(false);
        }
        for (rec, chunk) in batch.iter_mut().zip(out.chunks_exact(size_of::<CtKeep>())) {
            if let Some(r) = CtKeep::from_bytes(chunk) {
                *rec = r;
            }
        }
        Ok(true)
    }

    /// fw_state's ct_flags for this namespace and kernel: FW_CT_ON if the
    /// conntrack kfuncs run here, FW_CT_CHECKSUM if conntrack checks
    /// checksums (nf_conntrack_checksum), FW_CT_TCP_LIBERAL if it does not
    /// check TCP windows (nf_conntrack_tcp_be_liberal).
    pub fn flags(&self) -> u32 {
        // One record for nothing: found or not, the kfuncs ran.
        let mut probe = [CtKeep {
            key: CtFlowKey {
                l4proto: 17,
                ..Default::default()
            },
            ..Default::default()
        }];
        let on = matches!(self.keep(&mut probe), Ok(true)) && probe[0].result != 0;
        if !on {
            return 0;
        }
        FW_CT_ON | sysctl_flags()
    }

    /// The ring of offered connections (see the field).
    pub fn offers(&self) -> &libbpf_rs::MapHandle {
        &self.offers
    }

    /// fw_state's ct_flags as the fast path reads them.
    pub fn published_flags(&self) -> u32 {
        self.state
            .word(0, offset_of!(FwState, ct_flags))
            .load(Ordering::Acquire)
    }

    /// Makes `t` the timeouts a packet the fast path carries after
    /// finding its connection in the kernel's table sets (fw_state's
    /// ct_timeout_ms; router/ct_judge.h, ct_ask_kernel).
    pub fn publish_timeouts(&self, t: &Timeouts) {
        let ms = |d: Duration| d.as_millis().clamp(1, u32::MAX as u128) as u32;
        for (i, d) in [t.udp, t.tcp].into_iter().enumerate() {
            self.state
                .word(0, offset_of!(FwState, ct_timeout_ms) + 4 * i)
                .store(ms(d), Ordering::Release);
        }
    }

    /// Makes `flags` fw_state's ct_flags (FW_CT_*).
    pub fn publish_flags(&self, flags: u32) {
        self.state
            .word(0, offset_of!(FwState, ct_flags))
            .store(flags, Ordering::Release);
    }

    /// Empties way `i` of `table` if it still holds `key`, as a writer
    /// (its sequence word odd meanwhile); false if it holds another or a
    /// program is writing it.
    fn clear(&self, table: Table, i: u32, key: &CtFlowKey) -> bool {
        let map = &self.cache[table as usize];
        // (Every way begins with its sequence word.)
        let seq = map.word(i, 0);
        let s = seq.load(Ordering::Acquire);
        if s & 1 == 1
            || seq
                .compare_exchange(s, s + 1, Ordering::AcqRel, Ordering::Relaxed)
                .is_err()
        {
            return false;
        }
        let ours = self.way(table, i).key == *key;
        if ours {
            map.write_bytes(i, table.proto_offset(), &[0]);
        }
        seq.store(s + 2, Ordering::Release);
        ours
    }

    /// Forgets connection `key` (a [`key_of`]; its kernel entry is gone).
    pub fn forget(&self, key: &CtFlowKey) {
        self.forget_in(Table::of(key, false), key);
    }

    /// Forgets direction `key` of a connection in the NAT stage's ways (a
    /// [`nat_key_of`]; its kernel entry is gone).
    pub fn forget_nat(&self, key: &CtFlowKey) {
        self.forget_in(Table::of(key, true), key);
    }

    fn forget_in(&self, table: Table, key: &CtFlowKey) {
        let set = set_of(key, self.bits);
        for w in 0..CT_CACHE_WAYS as u32 {
            self.clear(table, set * CT_CACHE_WAYS as u32 + w, key);
        }
    }

    /// One sweep (see the module's comment): timeouts set for the
    /// connections carried since jiffy `since`, every one in the spans
    /// checked, and a way outside its set (kept by a packet judged by an
    /// older span) emptied. The jiffy it began at.
    pub fn sweep(&self, since: u64, timeouts: &Timeouts) -> Result<(Swept, u64)> {
        let now = self.clock()?.0;
        let mut s = Swept::default();
        for ipv6 in [false, true] {
            let sets = 1 << self.bits[ipv6 as usize];
            s.add(self.walk(ipv6, 0..sets, (since, now), timeouts, Walk::All)?);
        }
        Ok((s, now))
    }

    /// Walks the ways of family `ipv6`'s two tables in `sets` (see
    /// [`Walk`]), the kernel's entries of those it takes checked by
    /// ct_keeper in batches, their timeouts set if carried since jiffy
    /// `since` (`now` the clock's jiffy): a way whose entry is gone, or not
    /// carried any more, or outside its set, is emptied.
    fn walk(
        &self,
        ipv6: bool,
        sets: Range<u32>,
        (since, now): (u64, u64),
        timeouts: &Timeouts,
        what: Walk,
    ) -> Result<Swept> {
        let mut s = Swept::default();
        // (table, way, outside its set, record)
        let mut batch: Vec<(Table, u32, bool, CtKeep)> = Vec::with_capacity(CT_KEEP_BATCH);
        let flush = |batch: &mut Vec<(Table, u32, bool, CtKeep)>, s: &mut Swept| -> Result<()> {
            if batch.is_empty() {
                return Ok(());
            }
            let mut records: Vec<CtKeep> = batch.iter().map(|b| b.3).collect();
            if !self.keep(&mut records)? {
                anyhow::bail!("ct_keeper did not run (no conntrack kfuncs)");
            }
            for ((table, i, misplaced, _), r) in batch.iter().zip(&records) {
                if r.result == CT_KEEP_KEPT && r.timeout_ms != 0 {
                    s.refreshed += 1;
                }
                if *misplaced {
                    s.moved += self.clear(*table, *i, &r.key) as u64;
                } else if r.result == CT_KEEP_GONE {
                    s.forgotten += self.clear(*table, *i, &r.key) as u64;
                }
            }
            batch.clear();
            Ok(())
        };
        let ways = sets.start * CT_CACHE_WAYS as u32..sets.end * CT_CACHE_WAYS as u32;
        for table in [false, true].map(|nat| Table::of_family(ipv6, nat)) {
            for i in ways.clone() {
                // An empty way by its protocol byte alone: most are, and the
                // tables run to 448 MiB.
                if self.cache[table as usize].byte(i, table.proto_offset()) == 0 {
                    continue;
                }
                let slot = self.way(table, i);
                if slot.key.l4proto == 0 || slot.seq & 1 == 1 {
                    continue;
                }
                if what == Walk::Empty {
                    s.moved += self.clear(table, i, &slot.key) as u64;
                    continue;
                }
                let misplaced = set_of(&slot.key, self.bits) != i / CT_CACHE_WAYS as u32;
                if what == Walk::Misplaced && !misplaced {
                    continue;
                }
                s.entries += 1;
                batch.push((
                    table,
                    i,
                    misplaced,
                    CtKeep {
                        key: slot.key,
                        timeout_ms: keep_request(
                            slot.seen.at(now),
                            now,
                            since,
                            self.hz,
                            timeouts.of(slot.key.l4proto),
                        ),
                        nat: table.nat() as u8,
                        ..Default::default()
                    },
                ));
                if batch.len() == CT_KEEP_BATCH {
                    flush(&mut batch, &mut s)?;
                }
            }
        }
        flush(&mut batch, &mut s)?;
        Ok(s)
    }
}

/// Which ways a walk takes.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Walk {
    /// Every one: checked against the kernel's entry (a sweep).
    All,
    /// Those outside their set.
    Misplaced,
    /// Every one, emptied unchecked (sets past the span, which the fast
    /// path does not read).
    Empty,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn end(a: [u8; 4], port: u16) -> End {
        let mut addr = [0; 16];
        addr[..4].copy_from_slice(&a);
        End {
            addr,
            port: port.to_be_bytes(),
        }
    }

    /// Both directions of a connection have one key, with its side a
    /// found from either.
    #[test]
    fn a_connections_two_directions_share_a_key() {
        let (x, y) = (end([10, 0, 0, 2], 4000), end([10, 0, 0, 1], 53));
        let (k1, a1) = key_of(&x, &y, 17, false);
        let (k2, a2) = key_of(&y, &x, 17, false);
        assert_eq!(k1, k2);
        assert_ne!(a1, a2);
        // Same addresses: the ports decide, as x86 loads them (port 256
        // is bytes 1, 0: loaded, 1; port 1 loads as 256).
        let (k3, _) = key_of(&end([10, 0, 0, 1], 1), &end([10, 0, 0, 1], 256), 17, false);
        assert_eq!(
            (k3.aport.to_ne_bytes(), k3.bport.to_ne_bytes()),
            (256u16.to_be_bytes(), 1u16.to_be_bytes())
        );
    }

    /// The cache follows nf_conntrack_max: IPv4's sets the power of two at
    /// or above it, IPv6's a quarter, within their bounds.
    #[test]
    fn the_cache_is_sized_by_the_conntrack_limit() {
        assert_eq!(cache_sets(None), [1 << 18, 1 << 16], "the kernel's default");
        assert_eq!(cache_sets(Some(262_144)), [1 << 18, 1 << 16]);
        assert_eq!(cache_sets(Some(2_000_000)), [1 << 21, 1 << 19]);
        assert_eq!(cache_sets(Some(100)), [1 << 12, 1 << 10]);
        assert_eq!(cache_sets(Some(0)), [1 << 12, 1 << 10]);
        assert_eq!(
            cache_sets(Some(u64::MAX >> 8)),
            [CT4_SETS_MAX, CT6_SETS_MAX]
        );
    }

    /// A set is the low bits of the top CT_SET_BITS_TOP of one hash: a
    /// span widened by a bit leaves a set's connections in it or moves
    /// them 2^bits further, and the families hash apart.
    #[test]
    fn a_wider_span_splits_each_set_in_two() {
        let mut moved = [0; 2];
        for port in 4000..4400 {
            let (k, _) = key_of(
                &end([10, 0, 0, 2], port),
                &end([10, 0, 0, 1], 53),
                17,
                false,
            );
            let (s10, s11) = (set_of(&k, [10, 10]), set_of(&k, [11, 10]));
            assert!(s10 < 1 << 10 && s11 < 1 << 11);
            assert!(s11 == s10 || s11 == s10 + (1 << 10), "{s10} {s11}");
            moved[(s11 != s10) as usize] += 1;
            let top = set_of(&k, [CT_SET_BITS_TOP, 10]);
            assert_eq!(top & ((1 << 10) - 1), s10);
            let mut k6 = k;
            k6.ipv6 = 1;
            assert_eq!(set_of(&k6, [10, 12]) & 0xff, set_of(&k6, [20, 8]));
        }
        // About half move: the new bit is a hash bit like the others.
        assert!(moved.iter().all(|&n| n > 150), "{moved:?}");
    }

    /// The span widens past a quarter of its ways in use to at most a
    /// quarter, eightfold at least when crowded; narrows under a sixteenth
    /// to between an eighth and a quarter; never past its bounds.
    #[test]
    fn a_span_is_fitted_to_the_ways_in_use() {
        let f = |bits, in_use| fitted_bits(bits, in_use, 12, 21);
        assert_eq!(f(14, 0.2), 14, "between: left");
        assert_eq!(f(14, 0.07), 14);
        assert_eq!(f(14, 0.26), 15);
        assert_eq!(f(14, 0.6), 16);
        assert_eq!(f(14, 0.74), 16);
        assert_eq!(f(14, 0.8), 17, "crowded: eightfold");
        assert_eq!(f(14, 1.0), 17);
        assert_eq!(f(20, 1.0), 21, "no wider than the tables");
        assert_eq!(f(16, 0.05), 14, "to 0.2: between an eighth and a quarter");
        assert_eq!(f(16, 0.03), 13, "to 0.24");
        assert_eq!(f(16, 0.01), 12, "the least");
        assert_eq!(f(16, 0.0), 12);
        assert_eq!(f(20, 0.002), 14, "0.002 * 2^6 = 0.128");
        // Fitted, a span stays: widened to at most a quarter, narrowed to
        // over an eighth, both inside the band it is left in.
        for bits in 12..21 {
            for i in 0..=100 {
                let in_use = i as f64 / 100.0;
                let b = f(bits, in_use);
                let then = in_use * (1u64 << bits) as f64 / (1u64 << b) as f64;
                if b != bits && b > 12 && b < 21 {
                    assert_eq!(f(b, then), b, "{bits} {in_use} -> {b} ({then})");
                }
            }
        }
    }

    /// An IPv4 NAT way keeps the low half of the jiffies: read back as
    /// the jiffy with those bits nearest the sweep's clock, across the low
    /// half's wrap, and a little after it (a packet carried while the
    /// sweep walked the ways: read as long ago, its connection would not
    /// be refreshed, and its kernel entry would expire under traffic).
    #[test]
    fn a_ways_low_half_of_the_jiffies_reads_back_whole() {
        let now = (5u64 << 32) + 100;
        assert_eq!(Seen::Low(40).at(now), now - 60);
        assert_eq!(
            Seen::Low(u32::MAX - 9).at(now),
            now - 110,
            "before the wrap"
        );
        assert_eq!(Seen::Low(100).at(now), now);
        assert_eq!(Seen::Low(103).at(now), now + 3, "after the clock read");
        let wrapping = (5u64 << 32) - 2;
        assert_eq!(
            Seen::Low(1).at(wrapping),
            wrapping + 3,
            "after, across the wrap"
        );
        assert_eq!(Seen::Whole(7).at(now), 7);
        // A way written after the sweep read the clock gets the whole
        // stream timeout, as one written just before it does.
        let s = Duration::from_secs(6);
        for seen in [Seen::Low(100), Seen::Low(103)] {
            assert_eq!(keep_request(seen.at(now), now, now - 10, 250, s), 6_000);
        }
    }

    #[test]
    fn a_flow_carried_since_the_last_sweep_gets_the_stream_timeout_from_its_last_packet() {
        let s = Duration::from_secs(120);
        // Jiffies at HZ 250: 4 ms each.
        let now = 4_300_000_000;
        assert_eq!(keep_request(now - 500, now, 0, 250, s), 118_000);
        assert_eq!(keep_request(now - 1, now, now - 10, 250, s), 119_996);
        assert_eq!(keep_request(now, now, now - 10, 1000, s), 120_000);
        // Not carried since: only checked.
        assert_eq!(keep_request(now - 10, now, now - 10, 250, s), 0);
        // Past its timeout: the kernel's to expire.
        assert_eq!(keep_request(now - 50_000, now, 0, 250, s), 1);
        assert_eq!(
            hz_of((1000, 0), (1000 + 10, 40_100_000)),
            250,
            "10 jiffies in 40.1 ms"
        );
        assert_eq!(hz_of((0, 0), (41, 40_500_000)), 1000);
    }
}
