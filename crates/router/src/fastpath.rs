//! The loaded fast path: the `router` program and its maps, filled from
//! the control plane's tables.
use crate::layout::{Iface, Nexthop, RouterCounters, ROUTER_IFACES};
use anyhow::{bail, Context, Result};
use libbpf_rs::{MapCore, MapFlags};
use linerate_bpf::{loader, maps, objects, test_run};
use linerate_fib::{Fib, Key, Table, Write};
use std::collections::BTreeSet;
use std::os::fd::AsFd;

/// Entries per map value of the FIB maps (rows of `bpf/include/fib.h`).
const ROOT_ROW: usize = 256;

pub struct FastPath {
    obj: libbpf_rs::Object,
}

/// Which FIB maps: IPv4 (`fib4_*`) or IPv6 (`fib6_*`).
fn fib_maps<K: Key>() -> (&'static str, &'static str) {
    if K::BITS == 32 {
        ("fib4_root", "fib4_groups")
    } else {
        ("fib6_root", "fib6_groups")
    }
}

impl FastPath {
    pub fn load() -> Result<Self> {
        Ok(FastPath {
            obj: loader::load(objects::ROUTER, "router")?,
        })
    }

    pub fn program(&self) -> Result<libbpf_rs::Program<'_>> {
        loader::prog(&self.obj, "router")
    }

    /// Declares `ifindex` (in the namespace of the calling thread) one of
    /// the router's interfaces: frames to `mac` are considered, and it can
    /// be an egress.
    pub fn add_interface(&self, ifindex: u32, mac: [u8; 6]) -> Result<()> {
        if ifindex == 0 || ifindex >= ROUTER_IFACES {
            bail!("interface index {ifindex} is out of range 1..{ROUTER_IFACES}");
        }
        let ifc = Iface {
            ifindex,
            mac,
            _pad: 0,
        };
        maps::write(&loader::map(&self.obj, "ifaces")?, ifindex, &ifc)?;
        loader::map(&self.obj, "tx_ports")?
            .update(
                &ifindex.to_ne_bytes(),
                &ifindex.to_ne_bytes(),
                MapFlags::ANY,
            )
            .with_context(|| format!("cannot add interface {ifindex} to the egress ports"))
    }

    /// Stops considering frames on `ifindex` and sending through it.
    pub fn remove_interface(&self, ifindex: u32) -> Result<()> {
        if ifindex == 0 || ifindex >= ROUTER_IFACES {
            bail!("interface index {ifindex} is out of range 1..{ROUTER_IFACES}");
        }
        maps::write(
            &loader::map(&self.obj, "ifaces")?,
            ifindex,
            &Iface::default(),
        )?;
        let ports = loader::map(&self.obj, "tx_ports")?;
        match ports.delete(&ifindex.to_ne_bytes()) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == libbpf_rs::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(e).context("cannot remove the egress port"),
        }
    }

    pub fn set_nexthop(&self, id: u32, nh: &Nexthop) -> Result<()> {
        maps::write(&loader::map(&self.obj, "nexthops")?, id, nh)
    }

    /// Copies a whole table into the maps (an empty fast path).
    pub fn load_fib<K: Key>(&self, fib: &Fib<K>) -> Result<()> {
        let group = 1usize << fib.shape().stride;
        self.put_rows::<K>(
            Table::Root,
            fib.root(),
            ROOT_ROW,
            0..fib.root().len() / ROOT_ROW,
        )?;
        self.put_rows::<K>(
            Table::Groups,
            fib.groups(),
            group,
            0..fib.groups().len() / group,
        )
    }

    /// Pushes a change: the rows its writes touched, in the order of their
    /// first write (a new group's row before the row that links it).
    pub fn apply<K: Key>(&self, fib: &Fib<K>, writes: &[Write]) -> Result<()> {
        let group = 1usize << fib.shape().stride;
        let mut seen = BTreeSet::new();
        for w in writes {
            let (entries, row) = match w.table {
                Table::Root => (fib.root(), ROOT_ROW),
                Table::Groups => (fib.groups(), group),
            };
            let r = w.index as usize / row;
            if seen.insert((w.table, r)) {
                self.put_rows::<K>(w.table, entries, row, r..r + 1)?;
            }
        }
        Ok(())
    }

    fn put_rows<K: Key>(
        &self,
        table: Table,
        entries: &[u32],
        row: usize,
        rows: impl Iterator<Item = usize>,
    ) -> Result<()> {
        let (root, groups) = fib_maps::<K>();
        let map = loader::map(&self.obj, if table == Table::Root { root } else { groups })?;
        for r in rows {
            let bytes: Vec<u8> = entries[r * row..(r + 1) * row]
                .iter()
                .flat_map(|e| e.to_ne_bytes())
                .collect();
            map.update(&(r as u32).to_ne_bytes(), &bytes, MapFlags::ANY)
                .with_context(|| {
                    format!("cannot write row {r} of {}", map.name().to_string_lossy())
                })?;
        }
        Ok(())
    }

    /// The kernel's id of the counters map (for `linerate stats`).
    pub fn stats_map_id(&self) -> Result<u32> {
        Ok(loader::map(&self.obj, "router_stats")?.info()?.info.id)
    }

    /// Counters of an interface slot, summed over CPUs.
    pub fn counters(&self, ifindex: u32) -> Result<RouterCounters> {
        let slot = if ifindex < ROUTER_IFACES { ifindex } else { 0 };
        let per_cpu: Vec<RouterCounters> =
            maps::read_percpu(&loader::map(&self.obj, "router_stats")?, slot)?;
        Ok(RouterCounters::sum(&per_cpu))
    }

    /// Runs the program on one frame as if it arrived on `ingress`
    /// (BPF_PROG_RUN, nothing sent): the verdict and the frame as left.
    pub fn run(&self, frame: &[u8], ingress: u32) -> Result<(u32, Vec<u8>)> {
        let prog = self.program()?;
        let mut out = vec![0u8; frame.len() + 256];
        let r = test_run::run_xdp_on(prog.as_fd(), frame, &mut out, 1, Some(ingress))?;
        out.truncate(r.len);
        Ok((r.verdict, out))
    }
}
