//! The loaded fast path: the `router` program and its maps, filled from
//! the control plane's tables.
use crate::fdb;
use crate::layout::{
    FdbEntry, FdbKey, FdbSlot, Iface, Nexthop, NhGroup, PolicyRule, PuntPolicy, RouterCounters,
    VlanKey, POLICY_PROGRAMS, POLICY_RULES, ROUTER_IFACES, VLAN_TABLE_SLOTS,
};
use crate::vlans::{Place, Vlans};
use anyhow::{bail, Context, Result};
use libbpf_rs::{MapCore, MapFlags};
use linerate_bpf::fib_arena::{self, FibArena, FibLayout};
use linerate_bpf::layout::Pod;
use linerate_bpf::loader::{self, XdpAttachment, XdpMode, SINGLE_BUFFER_MTU};
use linerate_bpf::maps::MappedArray;
use linerate_bpf::test_run::XdpAction;
use linerate_bpf::{maps, objects, test_run};
use linerate_fib::{Fib, Ipv6Layout, Key, Shape, Table, Write};
use std::os::fd::AsFd;
use std::sync::atomic::Ordering;

/// The egress ports, once for each program: a devmap takes redirects from
/// single-buffer or from multi-buffer programs, not both.
const TX_PORTS: [&str; 2] = ["tx_ports", "tx_ports_mb"];

/// The program a frame is test-run through (FastPath::run_program).
enum Entry {
    Multibuf,
    /// The single-buffer program its ingress is given.
    PortsOwn,
    /// The other single-buffer program.
    Other,
}

pub struct FastPath {
    // Drop before `obj`, whose maps they point into.
    arena: FibArena,
    /// The nexthops map, mapped: its `used` marks.
    nexthops: MappedArray,
    /// The bridges' FDB, mapped, and where its entries sit.
    fdb: MappedArray,
    fdb_places: fdb::Places,
    /// Where the VLAN devices' entries are (crate::vlans).
    vlans: Vlans,
    ipv6: Ipv6Layout,
    /// The kernel's HZ, measured once (the policer's clock: set_police).
    hz: std::sync::OnceLock<u64>,
    obj: libbpf_rs::Object,
}

impl FastPath {
    /// The router program with the default (wide) IPv6 layout.
    pub fn load() -> Result<Self> {
        Self::load_with(Ipv6Layout::default())
    }

    /// The router program compiled for `ipv6`'s table layout.
    pub fn load_with(ipv6: Ipv6Layout) -> Result<Self> {
        let object = match ipv6 {
            Ipv6Layout::Wide => objects::ROUTER,
            Ipv6Layout::Compact => objects::ROUTER_FIB6_COMPACT,
        };
        let obj = loader::load_sized(object, "router", &[], &crate::ct_cache::cache_sizes())?;
        Self::with_object(obj, ipv6)
    }

    /// The router program for `ipv6`'s layout, counting into a running
    /// router's counters map (linerate_daemon::handover) rather than a new one.
    pub fn load_taking_over(ipv6: Ipv6Layout, stats: std::os::fd::BorrowedFd<'_>) -> Result<Self> {
        let object = match ipv6 {
            Ipv6Layout::Wide => objects::ROUTER,
            Ipv6Layout::Compact => objects::ROUTER_FIB6_COMPACT,
        };
        let obj = loader::load_sized(
            object,
            "router",
            &[("router_stats", stats)],
            &crate::ct_cache::cache_sizes(),
        )?;
        Self::with_object(obj, ipv6)
    }

    fn with_object(obj: libbpf_rs::Object, ipv6: Ipv6Layout) -> Result<Self> {
        let arena = FibArena::open(&obj)?;
        // Main's roots and the IPv6 shortcut are read at an offset the
        // destination alone gives, whatever the table holds: every page
        // gets its memory now (160 MiB wide, 144 compact), so that no
        // lookup reads a page nobody wrote, which costs a microsecond
        // (an IPv6 table of 1000 routes: 740-810 ns a packet against 82-90
        // with one route, `linerate bench fastpath --family ipv6 --routes
        // 1000` before this). The groups are read only through links,
        // written before them.
        let main6 = match ipv6 {
            Ipv6Layout::Wide => fib_arena::FIB6,
            Ipv6Layout::Compact => fib_arena::FIB6_COMPACT,
        };
        for region in [fib_arena::FIB4.root, main6.root, main6.shortcut] {
            arena.populate(region);
        }
        Ok(FastPath {
            arena,
            nexthops: MappedArray::open(&loader::map(&obj, "nexthops")?)?,
            fdb: MappedArray::open(&loader::map(&obj, "bridge_fdb")?)?,
            fdb_places: fdb::Places::default(),
            vlans: Vlans::default(),
            ipv6,
            hz: Default::default(),
            obj,
        })
    }

    /// The counters map (for a successor to take over).
    pub fn stats_map_fd(&self) -> Result<std::os::fd::OwnedFd> {
        Ok(loader::map(&self.obj, "router_stats")?
            .as_fd()
            .try_clone_to_owned()?)
    }

    /// The FIB slots of the arena: main's (0) and the other tables'.
    pub const TABLE_SLOTS: usize = fib_arena::TABLE_SLOTS;

    /// The root of table slot `slot`'s FIB of a family, as an interface's
    /// tables name it (MiB of the arena).
    pub fn table_root_mib(ipv6: bool, slot: usize) -> u16 {
        let main = if ipv6 {
            fib_arena::FIB6
        } else {
            fib_arena::FIB4
        };
        fib_arena::root_mib(fib_arena::table_layout(main, ipv6, slot))
    }

    /// The IPv6 layout this fast path reads.
    pub fn ipv6_layout(&self) -> Ipv6Layout {
        self.ipv6
    }

    /// Where table slot `slot`'s FIB of a family lives in the arena
    /// (crate::tables: 0 main's); fails unless `fib` has the shape the
    /// program reads there.
    fn fib_layout<K: Key>(&self, slot: usize, fib: &Fib<K>) -> Result<FibLayout> {
        let (main_shape, main) = if K::BITS == 32 {
            (Shape::IPV4, fib_arena::FIB4)
        } else {
            match self.ipv6 {
                Ipv6Layout::Wide => (Shape::IPV6, fib_arena::FIB6),
                Ipv6Layout::Compact => (Shape::IPV6_COMPACT, fib_arena::FIB6_COMPACT),
            }
        };
        if slot >= fib_arena::TABLE_SLOTS {
            bail!(
                "table slot {slot}: the arena has {}",
                fib_arena::TABLE_SLOTS
            );
        }
        let want = if slot == 0 {
            main_shape
        } else {
            main_shape.other_table()
        };
        if fib.shape() != want {
            bail!(
                "the fast path reads {} bits then {} ({} groups) in slot {slot}, not this table's {} then {} ({})",
                want.first,
                want.stride,
                want.groups,
                fib.shape().first,
                fib.shape().stride,
                fib.shape().groups
            );
        }
        Ok(fib_arena::table_layout(main, K::BITS == 128, slot))
    }

    /// The single-buffer program, for interfaces up to Ethernet's MTU:
    /// the ports without VLAN devices' (it hands tagged frames for VLAN
    /// devices to [`FastPath::vlan_program`]).
    pub fn program(&self) -> Result<libbpf_rs::Program<'_>> {
        loader::prog(&self.obj, "router")
    }

    /// The single-buffer program for the ports with VLAN devices: it
    /// routes their tagged frames and hands the others to
    /// [`FastPath::program`].
    pub fn vlan_program(&self) -> Result<libbpf_rs::Program<'_>> {
        loader::prog(&self.obj, "router_vlan")
    }

    /// Whether port `ifindex` has VLAN devices in the fast path.
    pub fn has_vlan_devices(&self, ifindex: u32) -> bool {
        self.vlans.table_of(ifindex) != 0
    }

    /// The single-buffer program port `ifindex` is given: the VLAN one
    /// where it has VLAN devices (its frames mostly tagged), the other
    /// elsewhere. Each hands the other the frames that are its, so that
    /// either is right on any port; the one given spares most of the
    /// port's frames the hand-over (a tail call, and the second program's
    /// start: about 4% of a frame's cost, docs/router-measurements.md).
    pub fn program_for(&self, ifindex: u32) -> Result<libbpf_rs::Program<'_>> {
        if self.has_vlan_devices(ifindex) {
            self.vlan_program()
        } else {
            self.program()
        }
    }

    /// The same program declared for multi-buffer frames (xdp.frags), for
    /// larger MTUs: it also reads the whole frame's length, which costs
    /// the common frame a helper call.
    pub fn multibuf_program(&self) -> Result<libbpf_rs::Program<'_>> {
        loader::prog(&self.obj, "router_mb")
    }

    /// Attaches the router to `ifname`: the single-buffer program where
    /// the interface takes it, else the multi-buffer one (true).
    pub fn attach(&self, ifname: &str, mode: XdpMode) -> Result<(XdpAttachment, bool)> {
        let single = self.program_for(loader::ifindex(ifname)?)?;
        XdpAttachment::attach_sized(&single, &self.multibuf_program()?, ifname, mode)
    }

    /// Declares `ifindex` (in the namespace of the calling thread) one of
    /// the router's interfaces: frames to `mac` of the families in `flags`
    /// (IFACE_FORWARD4, IFACE_FORWARD6) are considered, and it can be an
    /// egress.
    pub fn add_interface(&self, ifindex: u32, mac: [u8; 6], flags: u16) -> Result<()> {
        self.set_interface(ifindex, mac, flags, true)
    }

    /// Writes interface `ifindex` as add_interface does; it is an egress
    /// only if `egress` (its driver takes redirected frames).
    pub fn set_interface(
        &self,
        ifindex: u32,
        mac: [u8; 6],
        flags: u16,
        egress: bool,
    ) -> Result<()> {
        self.write_interface(&Iface::new(ifindex, mac, flags), egress)
    }

    /// Writes interface entry `ifc` whole (its tables too); an egress only
    /// if `egress`.
    pub fn write_interface(&self, ifc: &Iface, egress: bool) -> Result<()> {
        let ifindex = ifc.ifindex;
        crate::layout::check_ifindex(ifindex)?;
        let ifc = Iface {
            vlans: self.vlans.table_of(ifindex),
            ..*ifc
        };
        maps::write(&loader::map(&self.obj, "ifaces")?, ifindex, &ifc)?;
        if !egress {
            return self.remove_egress(ifindex);
        }
        for ports in TX_PORTS {
            loader::map(&self.obj, ports)?
                .update(
                    &ifindex.to_ne_bytes(),
                    &ifindex.to_ne_bytes(),
                    MapFlags::ANY,
                )
                .with_context(|| format!("cannot add interface {ifindex} to the egress ports"))?;
        }
        Ok(())
    }

    /// Routes a port's frames tagged `key` as VLAN device `ifc`, or (None)
    /// leaves them to the kernel; false when it holds all the VLAN devices
    /// or ports with them it can (crate::vlans). The device's entry is
    /// written into its slot of `ifaces` before its port's table names it.
    pub fn set_vlan_interface(&mut self, key: &VlanKey, ifc: Option<&Iface>) -> Result<bool> {
        let table = |p: &Place| (p.table as u32 - 1) * VLAN_TABLE_SLOTS + key.table_index();
        let slots = loader::map(&self.obj, "vlan_slots")?;
        match ifc {
            Some(i) => {
                let Some(place) = self.vlans.take(key) else {
                    return Ok(false);
                };
                maps::write(&loader::map(&self.obj, "ifaces")?, place.slot, i)?;
                maps::write(&slots, table(&place), &place.slot)?;
                if place.port_changed {
                    self.write_port_vlans(key.ifindex, place.table)?;
                }
            }
            None => {
                let Some(place) = self.vlans.give_back(key) else {
                    return Ok(true);
                };
                maps::write(&slots, table(&place), &0u32)?;
                if place.port_changed {
                    self.write_port_vlans(key.ifindex, 0)?;
                }
            }
        }
        Ok(true)
    }

    /// Port `port`'s entry, if written, names its VLAN table (0: none).
    fn write_port_vlans(&self, port: u32, table: u16) -> Result<()> {
        if port == 0 || port >= ROUTER_IFACES {
            return Ok(());
        }
        let ifaces = loader::map(&self.obj, "ifaces")?;
        let mut e: Iface = maps::read(&ifaces, port)?;
        if e.ifindex == 0 {
            return Ok(());
        }
        e.vlans = table;
        maps::write(&ifaces, port, &e)
    }

    /// Stops considering frames on `ifindex` and sending through it.
    pub fn remove_interface(&self, ifindex: u32) -> Result<()> {
        crate::layout::check_ifindex(ifindex)?;
        maps::write(
            &loader::map(&self.obj, "ifaces")?,
            ifindex,
            &Iface::default(),
        )?;
        self.remove_egress(ifindex)
    }

    /// Stops sending through `ifindex` (frames for it pass: pass_no_port).
    fn remove_egress(&self, ifindex: u32) -> Result<()> {
        for ports in TX_PORTS {
            match loader::map(&self.obj, ports)?.delete(&ifindex.to_ne_bytes()) {
                Ok(()) => {}
                Err(e) if e.kind() == libbpf_rs::ErrorKind::NotFound => {}
                Err(e) => return Err(e).context("cannot remove the egress port"),
            }
        }
        Ok(())
    }

    pub fn set_nexthop(&self, id: u32, nh: &Nexthop) -> Result<()> {
        maps::write(&loader::map(&self.obj, "nexthops")?, id, nh)
    }

    /// Next hop `id` as the fast path has it now.
    pub fn nexthop(&self, id: u32) -> Result<Nexthop> {
        maps::read(&loader::map(&self.obj, "nexthops")?, id)
    }

    /// Whether the fast path sent through next hop `id` since the mark
    /// was last taken, taking it (read from the mapping: no syscall).
    pub fn take_nexthop_used(&self, id: u32) -> bool {
        let at = std::mem::offset_of!(Nexthop, used);
        let used = self.nexthops.byte(id, at) != 0;
        if used {
            self.nexthops.set_byte(id, at, 0);
        }
        used
    }

    /// Writes the port a bridge's MAC is behind (None: forgets the MAC;
    /// frames to it, or from it, pass): false when its set is full (it is
    /// left out). The order the program reads in (abi/router.h): a new
    /// slot's value before its key, a freed slot's key first.
    pub fn set_fdb(&mut self, key: &FdbKey, entry: Option<&FdbEntry>) -> Result<bool> {
        if key.bridge == 0 || key.bridge > fdb::MAX_BRIDGE {
            bail!(
                "bridge index {}: the FDB's keys hold 1 to {}",
                key.bridge,
                fdb::MAX_BRIDGE
            );
        }
        let w = fdb::key(key);
        let slot = |way: usize| way * std::mem::size_of::<FdbSlot>();
        match entry {
            Some(e) => {
                let Some(((set, way), new)) = self.fdb_places.place(w) else {
                    return Ok(false);
                };
                let value = fdb::value(e);
                self.fdb
                    .word64(set, slot(way) + 8)
                    .store(value, Ordering::Release);
                if new {
                    self.fdb.word64(set, slot(way)).store(w, Ordering::Release);
                }
            }
            None => {
                if let Some((set, way)) = self.fdb_places.remove(w) {
                    self.fdb.word64(set, slot(way)).store(0, Ordering::Release);
                    self.fdb
                        .word64(set, slot(way) + 8)
                        .store(0, Ordering::Release);
                }
            }
        }
        Ok(true)
    }

    /// The FDB entries the fast path bridged frames from since the last
    /// call, their marks taken (from the mapping, the placed slots alone:
    /// no syscall).
    pub fn take_fdb_used(&mut self) -> Vec<FdbKey> {
        let used_at = std::mem::offset_of!(FdbSlot, used);
        let mut used = Vec::new();
        for (w, (set, way)) in self.fdb_places.placed() {
            let at = way * std::mem::size_of::<FdbSlot>() + used_at;
            if self.fdb.byte(set, at) != 0 {
                self.fdb.set_byte(set, at, 0);
                used.push(fdb::unkey(w));
            }
        }
        used
    }

    /// Writes ECMP group `index`'s buckets (next-hop ids). Write it before
    /// the group's next hop points at it.
    /// Writes word `index` of the router's own IPv4 addresses' bit set
    /// (crate::local).
    pub fn set_local_sources(&self, index: u32, word: u64) -> Result<()> {
        maps::write(&loader::map(&self.obj, "local_src4")?, index, &word)
    }

    /// Writes rule program `program`: its steps, then the end
    /// (crate::dataplane::Dataplane::set_policy_program).
    pub fn set_policy_program(&self, program: u16, steps: &[PolicyRule]) -> Result<()> {
        if program as usize >= POLICY_PROGRAMS || steps.len() >= POLICY_RULES {
            bail!(
                "rule program {program} of {} steps: the fast path holds {POLICY_PROGRAMS} of {} steps",
                steps.len(),
                POLICY_RULES - 1
            );
        }
        // The whole program, the end after its steps, in one write.
        let mut all = vec![PolicyRule::default(); POLICY_RULES];
        all[..steps.len()].copy_from_slice(steps);
        let bytes: Vec<u8> = all.iter().flat_map(|r| r.as_bytes().to_vec()).collect();
        loader::map(&self.obj, "policy_rules")?
            .update(&(program as u32).to_ne_bytes(), &bytes, MapFlags::ANY)
            .with_context(|| format!("cannot write rule program {program}"))
    }

    pub fn set_nh_group(&self, index: u32, group: &NhGroup) -> Result<()> {
        maps::write(&loader::map(&self.obj, "nh_groups")?, index, group)
    }

    /// Readies table slot `slot` (not main's) for a table of the family:
    /// its root's pages and its shortcut's (IPv6, 4 MiB) are given their
    /// memory, so that a lookup there never reads a page nobody wrote
    /// (crate::fib_arena's populate).
    pub fn open_table(&self, ipv6: bool, slot: usize) {
        let main = match (ipv6, self.ipv6) {
            (false, _) => fib_arena::FIB4,
            (true, Ipv6Layout::Wide) => fib_arena::FIB6,
            (true, Ipv6Layout::Compact) => fib_arena::FIB6_COMPACT,
        };
        let layout = fib_arena::table_layout(main, ipv6, slot);
        self.arena.populate(layout.root);
        self.arena.populate(layout.shortcut);
    }

    /// Copies a whole main table into the arena (an empty fast path).
    pub fn load_fib<K: Key>(&self, fib: &Fib<K>) -> Result<()> {
        self.load_fib_at(0, fib)
    }

    /// Copies a whole table into table slot `slot` (empty until then).
    pub fn load_fib_at<K: Key>(&self, slot: usize, fib: &Fib<K>) -> Result<()> {
        let layout = self.fib_layout(slot, fib)?;
        self.arena
            .fill(layout, fib.root(), fib.groups(), fib.shortcut());
        Ok(())
    }

    /// Pushes a change of table slot `slot`'s FIB: its writes, entry by
    /// entry, in their order (a new group's entries before the entry that
    /// links it).
    pub fn apply<K: Key>(&self, slot: usize, fib: &Fib<K>, writes: &[Write]) -> Result<()> {
        let layout = self.fib_layout(slot, fib)?;
        for w in writes {
            let i = w.index as usize;
            match w.table {
                Table::Root => self.arena.write_root(layout, i, fib.root()[i]),
                Table::Groups => self.arena.write_group(layout, i, fib.groups()[i]),
                Table::Shortcut => self.arena.write_shortcut(layout, i, fib.shortcut()[i]),
            }
        }
        Ok(())
    }

    /// The firewall's maps (verdict cache, generation, misses, rule
    /// counters), to hand to the thread that fills them.
    pub fn fw_maps(&self) -> Result<crate::fw_maps::FwMaps> {
        crate::fw_maps::FwMaps::open(&self.obj)
    }

    /// The connection table and its keeper (crate::ct_cache).
    pub fn ct_maps(&self) -> Result<crate::ct_cache::CtMaps> {
        crate::ct_cache::CtMaps::open(&self.obj)
    }

    /// The kernel's id of the counters map (for `linerate stats`).
    pub fn stats_map_id(&self) -> Result<u32> {
        Ok(loader::map(&self.obj, "router_stats")?.info()?.info.id)
    }

    /// The kernel's id of the per-queue counters map (`linerate queues`).
    pub fn rxq_map_id(&self) -> Result<u32> {
        Ok(loader::map(&self.obj, "router_rxq")?.info()?.info.id)
    }

    /// Sets the limits of what the program passes to the kernel, each
    /// class's (crate::police), in one write; every class's schedule then
    /// starts afresh, its whole burst allowed.
    pub fn set_police(&self, police: &crate::police::Police) -> Result<()> {
        let hz = match self.hz.get() {
            Some(&hz) => hz,
            None => {
                let prog = loader::prog(&self.obj, "ct_clock")?;
                let hz = crate::ct_cache::measure_hz(prog.as_fd())?;
                *self.hz.get_or_init(|| hz)
            }
        };
        let policy: PuntPolicy = police.program(1_000_000_000 / hz);
        maps::write(&loader::map(&self.obj, "punt_policy")?, 0, &policy)?;
        let schedules = loader::map(&self.obj, "punt_tat")?;
        for class in 0..policy.class.len() as u32 {
            maps::write_percpu(&schedules, class, &0u64)?;
        }
        Ok(())
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
    /// The program is the one the ingress is given
    /// ([`FastPath::program_for`]); frames larger than Ethernet's go to
    /// the multi-buffer program (more than a page arrives in several
    /// buffers), as on an interface whose MTU takes them.
    pub fn run(&self, frame: &[u8], ingress: u32) -> Result<(XdpAction, Vec<u8>)> {
        self.run_program(Self::entry(frame, Entry::PortsOwn), frame, ingress)
    }

    /// `single`, or the multi-buffer program for a frame larger than
    /// Ethernet's.
    fn entry(frame: &[u8], single: Entry) -> Entry {
        if frame.len() > SINGLE_BUFFER_MTU as usize + 14 {
            Entry::Multibuf
        } else {
            single
        }
    }

    /// [`FastPath::run`] with the multi-buffer program, whatever the size.
    pub fn run_multibuf(&self, frame: &[u8], ingress: u32) -> Result<(XdpAction, Vec<u8>)> {
        self.run_program(Entry::Multibuf, frame, ingress)
    }

    /// [`FastPath::run`] with the frame given first to the other
    /// single-buffer program than the ingress's own (what a port runs
    /// before it is given its own): the same verdict by another way in.
    pub fn run_other_entry(&self, frame: &[u8], ingress: u32) -> Result<(XdpAction, Vec<u8>)> {
        self.run_program(Self::entry(frame, Entry::Other), frame, ingress)
    }

    fn run_program(
        &self,
        entry: Entry,
        frame: &[u8],
        ingress: u32,
    ) -> Result<(XdpAction, Vec<u8>)> {
        let prog = match entry {
            Entry::Multibuf => self.multibuf_program()?,
            Entry::PortsOwn => self.program_for(ingress)?,
            Entry::Other if self.has_vlan_devices(ingress) => self.program()?,
            Entry::Other => self.vlan_program()?,
        };
        let mut out = vec![0u8; frame.len() + 256];
        let r = test_run::run_xdp_on(prog.as_fd(), frame, &mut out, 1, Some(ingress))?;
        out.truncate(r.len);
        Ok((r.verdict, out))
    }
}
