//! bpf/include/fib.h and this crate describe one layout: the arena's regions
//! match the shapes, and the BPF lookup (run with BPF_PROG_RUN on frames)
//! gives the Rust lookup's answer for every address, after a bulk load,
//! after changes pushed to the arena as the writes they returned, and once
//! every route is removed again; in main's table and in another's (a
//! tenant's, its shape `Shape::other_table`). Needs root.
use linerate_bpf::fib_arena::{self, FibArena, FibLayout};
use linerate_bpf::{loader, objects, test_run};
use linerate_fib::{shortcut, synthetic, Fib, Key, Shape, Table, Write};
use std::os::fd::AsFd;

/// A UDP frame to `a`: what the probe reads is the destination, and
/// (the source's first 32 bits) the table: `mib`, its root's offset in
/// the arena in MiB, 0 for main's.
fn frame_v4(a: u32, mib: u64) -> Vec<u8> {
    let mut f = Vec::new();
    etherparse::PacketBuilder::ethernet2([0; 6], [0; 6])
        .ipv4((mib as u32).to_be_bytes(), a.to_be_bytes(), 64)
        .udp(0, 0)
        .write(&mut f, &[])
        .unwrap();
    f
}

/// A rule step's lookup (fib6_lookup_step), where `mib` has this bit;
/// the router's without it.
const STEP: u64 = 1 << 32;

fn frame_v6(a: u128, mib: u64) -> Vec<u8> {
    let mut f = Vec::new();
    let src = ((mib as u128 & 0xffff_ffff) << 96) | ((mib as u128 >> 32) << 64);
    etherparse::PacketBuilder::ethernet2([0; 6], [0; 6])
        .ipv6(src.to_be_bytes(), a.to_be_bytes(), 64)
        .udp(0, 0)
        .write(&mut f, &[])
        .unwrap();
    f
}

fn bpf_lookup(obj: &libbpf_rs::Object, frame: &[u8], at: usize) -> u32 {
    let prog = loader::prog(obj, "fib_probe").unwrap();
    let mut out = vec![0u8; frame.len()];
    let r = test_run::run_xdp(prog.as_fd(), frame, &mut out, 1).unwrap();
    assert_eq!(r.verdict, linerate_bpf::test_run::XdpAction::Pass);
    u32::from_ne_bytes(out[at..at + 4].try_into().unwrap())
}

/// Pushes a change's writes into the arena, in order.
fn apply<K: Key>(arena: &FibArena, layout: FibLayout, fib: &Fib<K>, writes: &[Write]) {
    for w in writes {
        let i = w.index as usize;
        match w.table {
            Table::Root => arena.write_root(layout, i, fib.root()[i]),
            Table::Groups => arena.write_group(layout, i, fib.groups()[i]),
            Table::Shortcut => arena.write_shortcut(layout, i, fib.shortcut()[i]),
        }
    }
}

fn check<K: Key>(
    object: &[u8],
    shape: Shape,
    layout: FibLayout,
    routes: Vec<(K, u8, u32)>,
    frame: fn(K, u64) -> Vec<u8>,
    at: usize,
) {
    // Main's table is named 0 (the lookup the router makes for it), the
    // others by their root; IPv6 is looked up both as the router looks a
    // table up and as a rule step does.
    let mib = if layout.root.offset == main_layout::<K>(layout).root.offset {
        0
    } else {
        fib_arena::root_mib(layout) as u64
    };
    let hows = if K::BITS == 128 {
        vec![mib, mib | STEP]
    } else {
        vec![mib]
    };
    // The arena regions fib.h reads hold exactly the shape's tables.
    assert_eq!(layout.root.entries, 1 << shape.first, "root entries");
    assert_eq!(layout.stride, shape.stride, "stride");
    assert_eq!(
        layout.groups.entries,
        (shape.groups as usize) << shape.stride,
        "group pool entries"
    );
    let obj = loader::load(object, "fib probe").unwrap();
    let arena = FibArena::open(&obj).unwrap();
    let (initial, later) = routes.split_at(routes.len() * 3 / 4);
    let mut fib: Fib<K> = Fib::new(shape);
    fib.insert(K::from_u128(0), 0, 99).unwrap();
    fib.bulk_load(initial).unwrap();
    arena.fill(layout, fib.root(), fib.groups(), fib.shortcut());
    let keys = synthetic::lookup_keys(&routes, 3000, 7);
    let agree = |fib: &Fib<K>, what: &str| {
        for &how in &hows {
            for &k in &keys {
                assert_eq!(
                    bpf_lookup(&obj, &frame(k, how), at),
                    fib.lookup(k).unwrap_or(0),
                    "{what}: {k:?} ({how:x})"
                );
            }
        }
    };
    agree(&fib, "after the bulk load");
    if shape.shortcut != 0 {
        let levels = shape.shortcut_levels as usize;
        shortcut_is_read(&obj, &arena, layout, &fib, |k| frame(k, mib), levels, at);
        // A rule step probes the /48 alone.
        shortcut_is_read(&obj, &arena, layout, &fib, |k| frame(k, mib | STEP), 1, at);
    }
    // Changes: withdraw a third of the loaded routes, announce the rest;
    // each change's writes go to the arena one by one.
    for r in initial.iter().step_by(3) {
        let w = fib.remove(r.0, r.1).unwrap();
        apply(&arena, layout, &fib, &w);
    }
    for r in later {
        let w = fib.insert(r.0, r.1, r.2).unwrap();
        apply(&arena, layout, &fib, &w);
    }
    agree(&fib, "after the changes");
    // And back to no route at all: every entry the table had is written 0.
    let mut all: Vec<(K, u8)> = Vec::new();
    for r in initial
        .iter()
        .skip(1)
        .step_by(3)
        .chain(initial.iter().skip(2).step_by(3))
        .chain(later)
    {
        all.push((r.0, r.1));
    }
    all.push((K::from_u128(0), 0));
    for (a, l) in all {
        let w = fib.remove(a, l).unwrap();
        apply(&arena, layout, &fib, &w);
    }
    assert!(fib.is_empty());
    for &k in keys.iter().take(200) {
        for &how in &hows {
            assert_eq!(bpf_lookup(&obj, &frame(k, how), at), 0, "emptied: {k:?}");
        }
    }
}

/// The C lookup finds the shortcut's slots where the Rust one puts them:
/// a next hop planted in a held prefix's slot (a /48, or a /40 probed with
/// an address whose /48 is not held) is what the C lookup answers for an
/// address under that prefix, and putting the entry back restores the
/// table's answer. 20 slots of each of the first `levels` levels (those
/// the lookup probes).
fn shortcut_is_read<K: Key>(
    obj: &libbpf_rs::Object,
    arena: &FibArena,
    layout: FibLayout,
    fib: &Fib<K>,
    frame: impl Fn(K) -> Vec<u8>,
    levels: usize,
    at: usize,
) {
    let (p, words) = (fib.shape().shortcut, fib.shortcut());
    assert_eq!(layout.shortcut.entries, words.len(), "shortcut words");
    let mut checked = vec![0usize; levels];
    for (slot, w) in words.chunks_exact(2).enumerate() {
        if w[1] == 0 {
            continue;
        }
        let (level, top) = shortcut::prefix_of(shortcut::key_of(slot / shortcut::WAYS, w[1], p));
        if level >= levels || checked[level] == 20 {
            continue;
        }
        // An address under the prefix that no deeper held prefix covers.
        let bits = shortcut::LEVELS[level];
        let Some(hi) = (0..1u64 << (48 - bits))
            .map(|x| top | (x << 16))
            .find(|&hi| {
                (0..level).all(|l| shortcut::find(words, shortcut::key(hi, l), p).is_none())
            })
        else {
            continue;
        };
        let addr = K::from_u128(((hi as u128) << 64) | 0x42);
        let planted = 4242;
        arena.write_shortcut(layout, 2 * slot, planted);
        assert_eq!(
            bpf_lookup(obj, &frame(addr), at),
            planted,
            "/{bits} {top:x}"
        );
        arena.write_shortcut(layout, 2 * slot, w[0]);
        assert_eq!(
            bpf_lookup(obj, &frame(addr), at),
            fib.lookup(addr).unwrap_or(0)
        );
        checked[level] += 1;
    }
    assert_eq!(checked, vec![20; levels], "the table fills each level");
}

#[test]
#[cfg_attr(
    not(feature = "privileged"),
    ignore = "needs root: --features privileged"
)]
fn ipv4_bpf_lookup_matches() {
    check::<u32>(
        objects::FIB_PROBE,
        Shape::IPV4,
        fib_arena::FIB4,
        synthetic::ipv4(40_000, 64, 3),
        frame_v4,
        34,
    );
}

/// `n` generated IPv6 routes plus host routes, which make the deepest
/// paths (13 group reads wide, 28 compact).
fn ipv6_routes(n: usize) -> Vec<(u128, u8, u32)> {
    let mut routes = synthetic::ipv6(n, 64, 3);
    routes.extend(
        routes
            .clone()
            .iter()
            .take(50)
            .map(|r| (r.0 | 0x1234, 128, r.2)),
    );
    routes
}

#[test]
#[cfg_attr(
    not(feature = "privileged"),
    ignore = "needs root: --features privileged"
)]
fn ipv6_bpf_lookup_matches() {
    check::<u128>(
        objects::FIB_PROBE,
        Shape::IPV6,
        fib_arena::FIB6,
        ipv6_routes(20_000),
        frame_v6,
        54,
    );
}

#[test]
#[cfg_attr(
    not(feature = "privileged"),
    ignore = "needs root: --features privileged"
)]
fn ipv6_compact_bpf_lookup_matches() {
    check::<u128>(
        objects::FIB_PROBE_FIB6_COMPACT,
        Shape::IPV6_COMPACT,
        fib_arena::FIB6_COMPACT,
        ipv6_routes(20_000),
        frame_v6,
        54,
    );
}

/// The main layout of a table's family and layout (slot 0's).
fn main_layout<K: Key>(layout: FibLayout) -> FibLayout {
    match (K::BITS, layout.stride) {
        (32, _) => fib_arena::FIB4,
        (_, 8) => fib_arena::FIB6,
        _ => fib_arena::FIB6_COMPACT,
    }
}

/// Another table than main (slot 2: its root, pool and, for IPv6, its own
/// shortcut where fib_arena's table_layout puts them), each layout.
#[test]
#[cfg_attr(
    not(feature = "privileged"),
    ignore = "needs root: --features privileged"
)]
fn other_tables_bpf_lookup_matches() {
    check::<u32>(
        objects::FIB_PROBE,
        Shape::IPV4.other_table(),
        fib_arena::table_layout(fib_arena::FIB4, false, 2),
        synthetic::ipv4(20_000, 64, 5),
        frame_v4,
        34,
    );
    check::<u128>(
        objects::FIB_PROBE,
        Shape::IPV6.other_table(),
        fib_arena::table_layout(fib_arena::FIB6, true, 2),
        ipv6_routes(5_000),
        frame_v6,
        54,
    );
    check::<u128>(
        objects::FIB_PROBE_FIB6_COMPACT,
        Shape::IPV6_COMPACT.other_table(),
        fib_arena::table_layout(fib_arena::FIB6_COMPACT, true, 2),
        ipv6_routes(5_000),
        frame_v6,
        54,
    );
}
