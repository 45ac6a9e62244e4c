//! bpf/include/fib.h and this crate describe one layout: the maps' sizes
//! match the shapes, and the BPF lookup (run with BPF_PROG_RUN on frames)
//! gives the Rust lookup's answer for every address, after a bulk load and
//! after changes pushed to the maps as the writes they returned. Needs root.
use libbpf_rs::{MapCore, MapFlags};
use linerate_bpf::{loader, objects, test_run};
use linerate_fib::{gen, Fib, Key, Shape, Table, Write};
use std::collections::BTreeSet;
use std::os::fd::AsFd;

/// Maps rows: `row` entries per map value.
struct Rows<'a> {
    map: libbpf_rs::Map<'a>,
    row: usize,
}

impl Rows<'_> {
    fn put(&self, entries: &[u32], rows: impl IntoIterator<Item = usize>) {
        for r in rows {
            let bytes: Vec<u8> = entries[r * self.row..(r + 1) * self.row]
                .iter()
                .flat_map(|e| e.to_ne_bytes())
                .collect();
            self.map
                .update(&(r as u32).to_ne_bytes(), &bytes, MapFlags::ANY)
                .unwrap();
        }
    }
}

fn rows<'a>(obj: &'a libbpf_rs::Object, name: &str, row: usize, entries: usize) -> Rows<'a> {
    let map = loader::map(obj, name).unwrap();
    assert_eq!(map.value_size() as usize, row * 4, "{name}: value size");
    assert_eq!(map.max_entries() as usize, entries / row, "{name}: rows");
    Rows { map, row }
}

fn frame_v4(a: u32) -> Vec<u8> {
    let mut f = vec![0u8; 14 + 20 + 8];
    f[12..14].copy_from_slice(&0x0800u16.to_be_bytes());
    f[14] = 0x45;
    f[30..34].copy_from_slice(&a.to_be_bytes());
    f
}

fn frame_v6(a: u128) -> Vec<u8> {
    let mut f = vec![0u8; 14 + 40 + 8];
    f[12..14].copy_from_slice(&0x86ddu16.to_be_bytes());
    f[14] = 0x60;
    f[38..54].copy_from_slice(&a.to_be_bytes());
    f
}

fn bpf_lookup(obj: &libbpf_rs::Object, frame: &[u8], at: usize) -> u32 {
    let prog = loader::prog(obj, "fib_probe").unwrap();
    let mut out = vec![0u8; frame.len()];
    let r = test_run::run_xdp(prog.as_fd(), frame, &mut out, 1).unwrap();
    assert_eq!(r.verdict, 2, "XDP_PASS");
    u32::from_ne_bytes(out[at..at + 4].try_into().unwrap())
}

/// Rows a change's writes touched.
fn touched(w: &[Write], table: Table, row: usize) -> BTreeSet<usize> {
    w.iter()
        .filter(|x| x.table == table)
        .map(|x| x.index as usize / row)
        .collect()
}

fn check<K: Key>(
    shape: Shape,
    names: (&str, &str),
    root_row: usize,
    routes: Vec<(K, u8, u32)>,
    frame: fn(K) -> Vec<u8>,
    at: usize,
) {
    let obj = loader::load(objects::FIB_PROBE, "fib probe").unwrap();
    let group = 1usize << shape.stride;
    let root = rows(&obj, names.0, root_row, 1 << shape.first);
    let groups = rows(&obj, names.1, group, shape.groups as usize * group);
    let (initial, later) = routes.split_at(routes.len() * 3 / 4);
    let mut fib: Fib<K> = Fib::new(shape);
    fib.insert(K::from_u128(0), 0, 99).unwrap();
    fib.bulk_load(initial).unwrap();
    root.put(fib.root(), 0..fib.root().len() / root_row);
    groups.put(fib.groups(), 0..fib.groups().len() / group);
    let keys = gen::lookup_keys(&routes, 3000, 7);
    let agree = |fib: &Fib<K>, what: &str| {
        for &k in &keys {
            assert_eq!(
                bpf_lookup(&obj, &frame(k), at),
                fib.lookup(k).unwrap_or(0),
                "{what}: {k:?}"
            );
        }
    };
    agree(&fib, "after the bulk load");
    // Changes: withdraw a third of the loaded routes, announce the rest;
    // each change's writes go to the maps as the rows they touched.
    let mut writes = Vec::new();
    for r in initial.iter().step_by(3) {
        writes.extend(fib.remove(r.0, r.1).unwrap());
    }
    for r in later {
        writes.extend(fib.insert(r.0, r.1, r.2).unwrap());
    }
    root.put(fib.root(), touched(&writes, Table::Root, root_row));
    groups.put(fib.groups(), touched(&writes, Table::Groups, group));
    agree(&fib, "after the changes");
}

#[test]
fn ipv4_bpf_lookup_matches() {
    check::<u32>(
        Shape::IPV4,
        ("fib4_root", "fib4_groups"),
        256,
        gen::ipv4(40_000, 64, 3),
        frame_v4,
        34,
    );
}

#[test]
fn ipv6_bpf_lookup_matches() {
    let mut routes = gen::ipv6(20_000, 64, 3);
    // Host routes make the deepest paths (28 group reads).
    routes.extend(
        routes
            .clone()
            .iter()
            .take(50)
            .map(|r| (r.0 | 0x1234, 128, r.2)),
    );
    check::<u128>(
        Shape::IPV6,
        ("fib6_root", "fib6_groups"),
        256,
        routes,
        frame_v6,
        54,
    );
}
