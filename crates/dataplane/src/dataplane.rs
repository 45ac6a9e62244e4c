//! What the mirror writes to: the fast path's maps, behind one small
//! trait. [`crate::fastpath::FastPath`] writes the BPF maps the program
//! reads; [`crate::model::Model`] holds the same entries in memory and
//! decides frames as the program does, so that the mirror's logic runs in
//! plain unit tests, and root tests hold the two to the same verdicts.
use crate::fastpath::FastPath;
use crate::layout::{FdbEntry, FdbKey, Iface, Nexthop, NhGroup, PolicyRule, VlanKey};
use anyhow::Result;
use linerate_fib::{Fib, Ipv6Layout, Key, Write};

pub trait Dataplane {
    /// The IPv6 table layout the dataplane reads.
    fn ipv6_layout(&self) -> Ipv6Layout;
    /// Writes interface entry `ifc` (its MAC, its IFACE_* flags, its
    /// tables), an egress only if `egress`.
    fn set_interface(&mut self, ifc: &Iface, egress: bool) -> Result<()>;
    /// Forgets interface `ifindex`: no frame of it considered, none sent.
    fn remove_interface(&mut self, ifindex: u32) -> Result<()>;
    /// The VLAN device a port's frames tagged `key` arrive on: routed as
    /// `ifc` (its MAC, flags, tables, `l3` the device), or, with None,
    /// left to the kernel. False: no room for it (the fast path holds
    /// ROUTER_VLANS devices on ROUTER_VLAN_PORTS ports): its frames stay
    /// the kernel's.
    fn set_vlan_interface(&mut self, key: &VlanKey, ifc: Option<&Iface>) -> Result<bool>;
    fn set_nexthop(&mut self, id: u32, nh: &Nexthop) -> Result<()>;
    /// Whether next hop `id` was sent through since the last call.
    fn take_nexthop_used(&mut self, id: u32) -> bool;
    /// The port a bridge's MAC is behind, as the fast path bridges to and
    /// from it (None: it does not); false when there is no room for it
    /// (crate::fdb: its set is full).
    fn set_fdb(&mut self, key: &FdbKey, entry: Option<&FdbEntry>) -> Result<bool>;
    /// The FDB entries frames were bridged from since the last call.
    fn take_fdb_used(&mut self) -> Result<Vec<FdbKey>>;
    /// ECMP group `index`'s buckets; written before a next hop points at it.
    fn set_nh_group(&mut self, index: u32, group: &NhGroup) -> Result<()>;
    /// Word `index` of the router's own IPv4 addresses' bit set.
    fn set_local_sources(&mut self, index: u32, word: u64) -> Result<()>;
    /// Readies table slot `slot` (not main's) for a table of the family,
    /// before its first write.
    fn open_table(&mut self, ipv6: bool, slot: usize) -> Result<()>;
    /// A change of table slot `slot`'s FIB (0: main's; the others' as
    /// [`FastPath::table_root_mib`] places them): `writes` name the
    /// entries of `fib` to copy, in order.
    fn apply_fib<K: Key>(&mut self, slot: usize, fib: &Fib<K>, writes: &[Write]) -> Result<()>;
    /// Copies table slot `slot`'s FIB whole (a slot no packet reads yet:
    /// a table just given it, filled at once).
    fn load_fib<K: Key>(&mut self, slot: usize, fib: &Fib<K>) -> Result<()>;
    /// Writes rule program `program` (an index of POLICY_PROGRAMS): its
    /// steps (crate::rules::encode), then the end. Write one no
    /// interface's word names.
    fn set_policy_program(&mut self, program: u16, steps: &[PolicyRule]) -> Result<()>;
}

impl Dataplane for FastPath {
    fn ipv6_layout(&self) -> Ipv6Layout {
        FastPath::ipv6_layout(self)
    }
    fn set_interface(&mut self, ifc: &Iface, egress: bool) -> Result<()> {
        FastPath::write_interface(self, ifc, egress)
    }
    fn remove_interface(&mut self, ifindex: u32) -> Result<()> {
        FastPath::remove_interface(self, ifindex)
    }
    fn set_vlan_interface(&mut self, key: &VlanKey, ifc: Option<&Iface>) -> Result<bool> {
        FastPath::set_vlan_interface(self, key, ifc)
    }
    fn set_nexthop(&mut self, id: u32, nh: &Nexthop) -> Result<()> {
        FastPath::set_nexthop(self, id, nh)
    }
    fn take_nexthop_used(&mut self, id: u32) -> bool {
        FastPath::take_nexthop_used(self, id)
    }
    fn set_fdb(&mut self, key: &FdbKey, entry: Option<&FdbEntry>) -> Result<bool> {
        FastPath::set_fdb(self, key, entry)
    }
    fn take_fdb_used(&mut self) -> Result<Vec<FdbKey>> {
        Ok(FastPath::take_fdb_used(self))
    }
    fn set_nh_group(&mut self, index: u32, group: &NhGroup) -> Result<()> {
        FastPath::set_nh_group(self, index, group)
    }
    fn set_local_sources(&mut self, index: u32, word: u64) -> Result<()> {
        FastPath::set_local_sources(self, index, word)
    }
    fn open_table(&mut self, ipv6: bool, slot: usize) -> Result<()> {
        FastPath::open_table(self, ipv6, slot);
        Ok(())
    }
    fn apply_fib<K: Key>(&mut self, slot: usize, fib: &Fib<K>, writes: &[Write]) -> Result<()> {
        FastPath::apply(self, slot, fib, writes)
    }
    fn load_fib<K: Key>(&mut self, slot: usize, fib: &Fib<K>) -> Result<()> {
        FastPath::load_fib_at(self, slot, fib)
    }
    fn set_policy_program(&mut self, program: u16, steps: &[PolicyRule]) -> Result<()> {
        FastPath::set_policy_program(self, program, steps)
    }
}
