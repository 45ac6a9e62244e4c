//! The table: a multibit trie with leaf pushing, in the layout the XDP
//! fast path reads (see `layout` for the exact format).
//!
//! Level 0 is one array of `2^first` entries indexed by the top `first` bits
//! of the address; every deeper level is a group of `2^stride` entries taken
//! from one pool. An entry is a next-hop id (`0` = no route) or, with
//! [`CHILD`] set, the index of the group that holds the next `stride` bits.
//! IPv4 uses 24 + 8 (DIR-24-8, as DPDK's rte_lpm), IPv6 16 + 4 * 28.
//!
//! Beside the entries the control plane keeps, per entry, the length of the
//! prefix that wrote it (the shadow; the fast path never reads it), the
//! routes themselves, and per group the number of entries that stop it from
//! collapsing back into its parent.
//!
//! Changes are made in place, one entry at a time, in an order that keeps
//! every state a concurrent reader can see valid (rte_lpm's rules): a new
//! group is filled before the entry that points to it is written; an entry
//! changes from the old next hop straight to the new one; a group is
//! unlinked before it is freed, and freed groups are quarantined until the
//! caller says readers are done with them ([`Fib::release_quarantine`]).
//! Each change returns the entry writes it made, in order: what the control
//! plane pushes to the BPF maps.
use crate::key::Key;
use crate::shortcut;
use rustc_hash::FxHashMap as HashMap;

/// One prefix length's routes: address -> next hop.
type RouteMap<K> = griddle::HashMap<K, u32, rustc_hash::FxBuildHasher>;
use serde::Serialize;
use thiserror::Error;

/// Entry bit: the rest of the entry is a group index.
pub const CHILD: u32 = 1 << 31;
/// Largest next-hop id (ids are 1..=MAX_NEXTHOP; 0 means no route).
pub const MAX_NEXTHOP: u32 = CHILD - 1;

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub enum Table {
    /// The first level, `2^first` entries.
    Root,
    /// The group pool: group `g` is entries `g << stride .. (g + 1) << stride`.
    Groups,
    /// The /48 shortcut's words (`crate::shortcut`): an even index is a
    /// slot's entry (a FIB entry, as in the other tables), an odd one its
    /// tag (written as is).
    Shortcut,
}

/// One entry write, in the order it must reach the fast path.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Write {
    pub table: Table,
    pub index: u32,
    pub value: u32,
}

#[derive(Debug, Error, PartialEq, Eq)]
pub enum FibError {
    #[error("prefix length {len} is longer than {max} bits")]
    BadLength { len: u8, max: u8 },
    #[error("next-hop id {0} is out of range 1..={MAX_NEXTHOP}")]
    NextHopOutOfRange(u32),
    #[error("table full: the route needs {needed} more groups, {free} are free of {capacity} ({quarantined} quarantined until release_quarantine)")]
    TableFull {
        needed: u32,
        free: u32,
        capacity: u32,
        quarantined: u32,
    },
    #[error("no such route")]
    NotFound,
}

/// The shape of a table: first-level bits, bits per deeper level, and the
/// number of groups the pool may hold (the BPF map is sized for it).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Shape {
    pub first: u8,
    pub stride: u8,
    pub groups: u32,
    /// log2 of the shortcut's slot pairs (IPv6; 0: none).
    pub shortcut: u8,
    /// How many of `shortcut::LEVELS` (deepest first) the shortcut holds:
    /// each needs a level of the trie ending at its bit.
    pub shortcut_levels: u8,
}

impl Shape {
    /// DIR-24-8 with room for 65536 groups of 256 entries: 64 MiB + 64 MiB
    /// of the fast path's arena, which allocates only the pages written.
    pub const IPV4: Shape = Shape {
        first: 24,
        stride: 8,
        groups: 65536,
        shortcut: 0,
        shortcut_levels: 0,
    };
    /// 24 bits, then 8 at a time (DPDK rte_lpm6's layout): a /32 is 2
    /// reads, a /48 4, a /64 6. On the generated 200k table (`linerate
    /// fib stats --family ipv6`): 251k groups, 245 MiB, plus the 64 MiB
    /// root: sparse /48s each fill a 256-entry group. Room for 4x that
    /// table (the fast path's arena allocates only the pages written).
    pub const IPV6: Shape = Shape {
        first: 24,
        stride: 8,
        groups: 1 << 20,
        shortcut: 21,
        // No /40 level: here a /33-/40 is three reads, and probing the /40
        // costs every other lookup about what it saves them (docs/router-measurements.md,
        // "A packet's cost").
        shortcut_levels: 1,
    };
    /// 16 bits, then 4 at a time: a group is 16 entries, one cache line; a
    /// /48 is 9 reads. 625k groups, 38 MiB for the generated 200k table.
    /// Its shortcut has half the wide one's pairs (16 MiB, which the
    /// hashing touches whole): the table's 330k held /48s and /40s fill
    /// 16% of its slots, and the layout stays under 64 MiB.
    pub const IPV6_COMPACT: Shape = Shape {
        first: 16,
        stride: 4,
        groups: 1 << 20,
        shortcut: 20,
        shortcut_levels: 2,
    };

    /// The shape of a routing table other than main (a tenant's, chosen
    /// by a policy rule): the same levels, so the fast path's walk reads
    /// it, in 32 MiB: IPv4 a pool of 2^15 groups of 256 entries (a full
    /// table takes about 10k); IPv6 a pool of 28 MiB and a shortcut of its
    /// own in the other 4 ([`OTHER_SHORTCUT_PAIRS_LOG2`]: its /48s cost a
    /// tenant's lookup what they cost main's, two reads instead of five).
    pub fn other_table(self) -> Shape {
        if self.shortcut == 0 {
            return Shape {
                groups: (32 << 20) / (4u32 << self.stride),
                ..self
            };
        }
        let shortcut_bytes = (shortcut::WAYS * shortcut::WORDS * 4) << OTHER_SHORTCUT_PAIRS_LOG2;
        Shape {
            groups: ((32 << 20) - shortcut_bytes as u32) / (4u32 << self.stride),
            shortcut: OTHER_SHORTCUT_PAIRS_LOG2,
            ..self
        }
    }
}

/// log2 of the slot pairs of an IPv6 table's shortcut other than main's:
/// the fewest that keep a tag in 31 bits (4 MiB). A tenant's pool of 28
/// MiB links at most 28k groups of 256 (wide) below bit 48, a twentieth of
/// its 2^19 slots.
pub const OTHER_SHORTCUT_PAIRS_LOG2: u8 = shortcut::MIN_PAIRS_LOG2;

/// The IPv6 table's layout, a trade between reads per lookup and memory
/// (FreeBSD lets one pick a FIB algorithm per family the same way).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Ipv6Layout {
    /// 24 + 8 bits: a /48 in 4 reads; about 310 MiB for a full table.
    #[default]
    Wide,
    /// 16 + 4 bits: a /48 in 9 reads; about 40 MiB for a full table.
    Compact,
}

impl Ipv6Layout {
    /// Each layout by the name commands and reports give it.
    pub const CHOICES: &'static [(&'static str, Ipv6Layout)] =
        &[("wide", Ipv6Layout::Wide), ("compact", Ipv6Layout::Compact)];

    pub fn shape(self) -> Shape {
        match self {
            Ipv6Layout::Wide => Shape::IPV6,
            Ipv6Layout::Compact => Shape::IPV6_COMPACT,
        }
    }
}

/// Per-entry shadow: 0 = nothing, else the writing prefix's length + 1.
type Owner = u8;

#[derive(Clone, Debug)]
pub struct Fib<K: Key> {
    shape: Shape,
    root: Vec<u32>,
    root_owner: Vec<Owner>,
    groups: Vec<u32>,
    group_owner: Vec<Owner>,
    /// Per group: its first bit (the level's offset) and how many of its
    /// entries are child pointers or belong to prefixes longer than that.
    group_start: Vec<u8>,
    group_specific: Vec<u32>,
    free: Vec<u32>,
    quarantine: Vec<u32>,
    /// Quarantine freed groups (a fast path may be reading them) or reuse
    /// them at once (no concurrent readers: tests, benchmarks).
    concurrent_readers: bool,
    /// The routes, one map per prefix length: finding the route that covers
    /// a removed one probes the shorter lengths, and the maps of short
    /// lengths are small enough to stay in cache. Maps that grow a slice at
    /// a time (griddle): a plain hash map of half a million /24s moves them
    /// all at once when it grows, a stall of tens of milliseconds in the
    /// middle of a BGP burst (docs/route-changes-measured.md).
    routes: Vec<RouteMap<K>>,
    route_count: usize,
    /// Groups allocated by the change in progress, with what their entries
    /// held before (a reused group keeps its old entries).
    allocated: Vec<(u32, Vec<u32>)>,
    /// Record writes (off during a bulk load into an empty table, which
    /// nothing reads yet).
    recording: bool,
    /// Per group: the top 64 bits of the address range it covers (for the
    /// shortcut's keys).
    group_prefix: Vec<u64>,
    /// The /48 shortcut's words (empty without one), and where each /48 it
    /// holds is (the index of its entry word).
    shortcut: Vec<u32>,
    shortcut_at: HashMap<u64, u32>,
}

impl<K: Key> Fib<K> {
    pub fn new(shape: Shape) -> Self {
        assert!(shape.first <= K::BITS && shape.first <= 24 && shape.stride > 0);
        assert!(
            (K::BITS - shape.first).is_multiple_of(shape.stride),
            "levels must end at the address's last bit"
        );
        let with_shortcut = shape.shortcut != 0;
        if with_shortcut {
            assert!(K::BITS == 128 && shape.shortcut >= shortcut::MIN_PAIRS_LOG2);
            assert!((1..=shortcut::LEVELS.len()).contains(&(shape.shortcut_levels as usize)));
            for &bits in &shortcut::LEVELS[..shape.shortcut_levels as usize] {
                assert!(
                    bits > shape.first && (bits - shape.first).is_multiple_of(shape.stride),
                    "the shortcut needs a level ending at bit {bits}"
                );
            }
        }
        Fib {
            shape,
            root: vec![0; 1 << shape.first],
            root_owner: vec![0; 1 << shape.first],
            groups: Vec::new(),
            group_owner: Vec::new(),
            group_start: Vec::new(),
            group_specific: Vec::new(),
            free: Vec::new(),
            quarantine: Vec::new(),
            concurrent_readers: true,
            routes: (0..=K::BITS).map(|_| RouteMap::default()).collect(),
            route_count: 0,
            allocated: Vec::new(),
            recording: true,
            group_prefix: Vec::new(),
            shortcut: if with_shortcut {
                vec![0; (shortcut::WAYS * shortcut::WORDS) << shape.shortcut]
            } else {
                Vec::new()
            },
            shortcut_at: HashMap::default(),
        }
    }

    /// Reuse freed groups at once (nothing reads the table concurrently).
    pub fn without_concurrent_readers(mut self) -> Self {
        self.concurrent_readers = false;
        self
    }

    pub fn shape(&self) -> Shape {
        self.shape
    }

    pub fn len(&self) -> usize {
        self.route_count
    }

    pub fn is_empty(&self) -> bool {
        self.route_count == 0
    }

    pub fn get(&self, addr: K, len: u8) -> Option<u32> {
        self.routes.get(len as usize)?.get(&addr.mask(len)).copied()
    }

    pub fn routes(&self) -> impl Iterator<Item = (K, u8, u32)> + '_ {
        self.routes
            .iter()
            .enumerate()
            .flat_map(|(l, m)| m.iter().map(move |(&a, &n)| (a, l as u8, n)))
    }

    /// The first level's entries, as the fast path reads them.
    pub fn root(&self) -> &[u32] {
        &self.root
    }

    /// The group pool's entries (groups in use and free ones).
    pub fn groups(&self) -> &[u32] {
        &self.groups
    }

    /// The /48 shortcut's words (empty when the shape has none).
    pub fn shortcut(&self) -> &[u32] {
        &self.shortcut
    }

    /// Prefixes the shortcut holds.
    pub fn shortcut_len(&self) -> usize {
        self.shortcut_at.len()
    }

    /// The shortcut level (index into `shortcut::LEVELS`) that mirrors the
    /// groups starting at bit `start`, if the table has a shortcut.
    fn shortcut_level(&self, start: u8) -> Option<usize> {
        if self.shortcut.is_empty() {
            return None;
        }
        shortcut::level_ending_at(start + self.shape.stride)
            .filter(|&level| level < self.shape.shortcut_levels as usize)
    }

    pub fn groups_in_use(&self) -> u32 {
        (self.group_start.len() - self.free.len() - self.quarantine.len()) as u32
    }

    pub fn groups_quarantined(&self) -> u32 {
        self.quarantine.len() as u32
    }

    /// Returns quarantined groups to the free list: call once every reader
    /// that could have seen them has finished (an RCU grace period after
    /// the writes reached the maps).
    pub fn release_quarantine(&mut self) {
        self.free.append(&mut self.quarantine);
    }

    fn group_size(&self) -> usize {
        1 << self.shape.stride
    }

    /// Groups a route may take now (quarantined ones not counted).
    pub fn free_groups(&self) -> u32 {
        self.shape.groups - self.group_start.len() as u32 + self.free.len() as u32
    }

    // ---- lookups -------------------------------------------------------

    /// Longest-prefix match: the next-hop id, or `None`. Reads what the
    /// fast path reads: the root, then the shortcut, then the groups.
    #[inline]
    pub fn lookup(&self, addr: K) -> Option<u32> {
        self.tables().lookup(addr)
    }

    /// The three tables as the fast path holds them.
    pub fn tables(&self) -> Tables<'_> {
        Tables {
            shape: self.shape,
            root: &self.root,
            groups: &self.groups,
            shortcut: &self.shortcut,
        }
    }

    /// Looks up every address; `out[i]` is the next-hop id of `addrs[i]`
    /// or 0. Cache misses are what a lookup costs, so the batch keeps many
    /// in flight: with a wide first level (IPv4's DIR-24-8, most lookups
    /// end at the root) the root entry `AHEAD` addresses on is prefetched
    /// while this one is looked up; with many narrow levels (IPv6) lanes of
    /// addresses advance level by level, each level's entries prefetched
    /// for all lanes before any is read.
    pub fn lookup_batch(&self, addrs: &[K], out: &mut [u32]) {
        assert_eq!(addrs.len(), out.len());
        if self.shape.first >= 24 {
            self.lookup_pipelined(addrs, out)
        } else {
            self.lookup_lanes(addrs, out)
        }
    }

    fn lookup_pipelined(&self, addrs: &[K], out: &mut [u32]) {
        const AHEAD: usize = 16;
        let first = self.shape.first;
        for a in addrs.iter().take(AHEAD) {
            prefetch(&self.root[a.chunk(0, first)]);
        }
        for (i, (a, o)) in addrs.iter().zip(out.iter_mut()).enumerate() {
            if let Some(next) = addrs.get(i + AHEAD) {
                prefetch(&self.root[next.chunk(0, first)]);
            }
            *o = self.lookup(*a).unwrap_or(0);
        }
    }

    fn lookup_lanes(&self, addrs: &[K], out: &mut [u32]) {
        const LANES: usize = 16;
        let s = self.shape;
        for (a, o) in addrs.chunks(LANES).zip(out.chunks_mut(LANES)) {
            let n = a.len();
            let mut idx = [0usize; LANES];
            for i in 0..n {
                idx[i] = a[i].chunk(0, s.first);
                prefetch(&self.root[idx[i]]);
            }
            let mut open = 0;
            for i in 0..n {
                o[i] = self.root[idx[i]];
                open |= o[i];
            }
            let mut start = s.first;
            while open & CHILD != 0 {
                for i in 0..n {
                    if o[i] & CHILD != 0 {
                        idx[i] =
                            (((o[i] & !CHILD) as usize) << s.stride) + a[i].chunk(start, s.stride);
                        prefetch(&self.groups[idx[i]]);
                    }
                }
                open = 0;
                for i in 0..n {
                    if o[i] & CHILD != 0 {
                        o[i] = self.groups[idx[i]];
                        open |= o[i];
                    }
                }
                start += s.stride;
            }
        }
    }

    // ---- changes -------------------------------------------------------

    fn check(&self, len: u8, nexthop: Option<u32>) -> Result<(), FibError> {
        if len > K::BITS {
            return Err(FibError::BadLength { len, max: K::BITS });
        }
        if let Some(nh) = nexthop {
            if nh == 0 || nh > MAX_NEXTHOP {
                return Err(FibError::NextHopOutOfRange(nh));
            }
        }
        Ok(())
    }

    /// Adds a route or replaces its next hop. Returns the entry writes, in
    /// order. On error nothing has changed.
    pub fn insert(&mut self, addr: K, len: u8, nexthop: u32) -> Result<Vec<Write>, FibError> {
        self.check(len, Some(nexthop))?;
        let addr = addr.mask(len);
        let needed = self.groups_needed(addr, len);
        if needed > self.free_groups() {
            return Err(FibError::TableFull {
                needed,
                free: self.free_groups(),
                capacity: self.shape.groups,
                quarantined: self.quarantine.len() as u32,
            });
        }
        if self.routes[len as usize].insert(addr, nexthop).is_none() {
            self.route_count += 1;
        }
        self.allocated.clear();
        let mut w = Vec::new();
        for slot in self.descend(addr, len, &mut w) {
            self.paint(slot, nexthop, len + 1, &mut w);
        }
        if !self.allocated.is_empty() {
            w = self.new_groups_first(w);
        }
        Ok(w)
    }

    /// A group made by this change is unreachable until the entry linking
    /// it is written, so its entries can go first, once each, with their
    /// final values (and not at all where that is what they held); then the
    /// other writes in their order.
    fn new_groups_first(&mut self, w: Vec<Write>) -> Vec<Write> {
        let gs = self.shape.stride;
        let allocated = std::mem::take(&mut self.allocated);
        let mut out = Vec::with_capacity(w.len());
        for (g, before) in &allocated {
            let base = (*g as usize) << gs;
            for (i, &old) in before.iter().enumerate() {
                let value = self.groups[base + i];
                if value != old {
                    out.push(Write {
                        table: Table::Groups,
                        index: (base + i) as u32,
                        value,
                    });
                }
            }
        }
        let is_new = |wr: &Write| {
            wr.table == Table::Groups && allocated.iter().any(|(g, _)| *g == wr.index >> gs)
        };
        out.extend(w.into_iter().filter(|wr| !is_new(wr)));
        self.allocated = allocated;
        self.allocated.clear();
        out
    }

    /// Removes a route; addresses it covered fall back to the next shorter
    /// route that covers them. Returns the entry writes, in order.
    pub fn remove(&mut self, addr: K, len: u8) -> Result<Vec<Write>, FibError> {
        self.check(len, None)?;
        let addr = addr.mask(len);
        if self.routes[len as usize].remove(&addr).is_none() {
            return Err(FibError::NotFound);
        }
        self.route_count -= 1;
        let (value, owner) = self.covering(addr, len);
        let mut w = Vec::new();
        // The path exists: the route's own entries keep its groups alive.
        let (slots, path) = self.path(addr, len);
        for slot in slots {
            self.unpaint(slot, len + 1, value, owner, &mut w);
        }
        // Groups on the path that nothing longer than their start needs any
        // more fold back into their parent entry, deepest first.
        for (parent, g) in path.into_iter().rev() {
            if self.group_specific[g as usize] != 0 {
                break;
            }
            let base = (g as usize) << self.shape.stride;
            let (v, o) = (self.groups[base], self.group_owner[base]);
            self.set(parent, v, o, &mut w);
            self.release(g);
        }
        Ok(w)
    }

    /// Loads many routes into an empty table, shortest prefixes first (so
    /// each entry is written about once).
    pub fn bulk_load(&mut self, routes: &[(K, u8, u32)]) -> Result<(), FibError> {
        for &(_, len, nh) in routes {
            self.check(len, Some(nh))?;
        }
        let mut sorted: Vec<(K, u8, u32)> = routes.to_vec();
        sorted.sort_unstable_by_key(|r| r.1);
        let mut per_len = vec![0usize; K::BITS as usize + 1];
        for r in &sorted {
            per_len[r.1 as usize] += 1;
        }
        for (m, n) in self.routes.iter_mut().zip(per_len) {
            m.reserve(n);
        }
        let empty = self.is_empty();
        let recording = std::mem::replace(&mut self.recording, !empty);
        let result = sorted
            .into_iter()
            .try_for_each(|(a, l, nh)| self.insert(a, l, nh).map(drop));
        self.recording = recording;
        result
    }

    /// The value and owner that addresses under `addr/len` get without it:
    /// the longest shorter route covering it.
    fn covering(&self, addr: K, len: u8) -> (u32, Owner) {
        for l in (0..len).rev() {
            let m = &self.routes[l as usize];
            if m.is_empty() {
                continue;
            }
            if let Some(&nh) = m.get(&addr.mask(l)) {
                return (nh, l + 1);
            }
        }
        (0, 0)
    }

    /// Groups an insert of `addr/len` would have to create.
    fn groups_needed(&self, addr: K, len: u8) -> u32 {
        let s = self.shape;
        let (mut start, mut width) = (0u8, s.first);
        let mut e = 0u32;
        let mut at_root = true;
        while len > start + width {
            let i = addr.chunk(start, width);
            e = if at_root {
                self.root[i]
            } else {
                self.groups[(((e & !CHILD) as usize) << s.stride) + i]
            };
            if e & CHILD == 0 {
                // Every level from here to the prefix's needs a new group.
                return ((len - start - width) as u32).div_ceil(s.stride as u32);
            }
            at_root = false;
            start += width;
            width = s.stride;
        }
        0
    }

    /// Walks (and builds) the path to the level where `addr/len` ends.
    /// Returns the slots the prefix covers there and that level's end bit.
    fn descend(&mut self, addr: K, len: u8, w: &mut Vec<Write>) -> Covered {
        let s = self.shape;
        let (mut table, mut base, mut start, mut width) = (Table::Root, 0usize, 0u8, s.first);
        while len > start + width {
            let slot = Slot {
                table,
                index: base + addr.chunk(start, width),
            };
            let e = self.value(slot);
            let g = if e & CHILD != 0 {
                e & !CHILD
            } else {
                let prefix = (addr.mask(start + width).to_u128() >> 64) as u64;
                self.push_down(slot, start + width, prefix, w)
            };
            table = Table::Groups;
            base = (g as usize) << s.stride;
            start += width;
            width = s.stride;
        }
        covered(table, base, addr, start, width, len)
    }

    /// Like `descend` for a route that exists: also returns the path as
    /// (parent slot, group) pairs, top down.
    fn path(&self, addr: K, len: u8) -> (Covered, Vec<(Slot, u32)>) {
        let s = self.shape;
        let (mut table, mut base, mut start, mut width) = (Table::Root, 0usize, 0u8, s.first);
        let mut path = Vec::new();
        while len > start + width {
            let slot = Slot {
                table,
                index: base + addr.chunk(start, width),
            };
            let e = self.value(slot);
            debug_assert!(e & CHILD != 0, "a route's path has groups");
            let g = e & !CHILD;
            path.push((slot, g));
            table = Table::Groups;
            base = (g as usize) << s.stride;
            start += width;
            width = s.stride;
        }
        (covered(table, base, addr, start, width, len), path)
    }

    /// Gives `slot`'s range its own group, filled with `slot`'s route, then
    /// points `slot` at it.
    fn push_down(&mut self, slot: Slot, group_start: u8, prefix: u64, w: &mut Vec<Write>) -> u32 {
        let g = self.allocate(group_start);
        self.group_prefix[g as usize] = prefix;
        let (v, o) = (self.value(slot), self.owner(slot));
        let base = (g as usize) << self.shape.stride;
        for i in 0..self.group_size() {
            let child = Slot {
                table: Table::Groups,
                index: base + i,
            };
            self.set(child, v, o, w);
        }
        self.set(slot, CHILD | g, o, w);
        g
    }

    /// Writes a route into `slot` unless a longer one owns it; into every
    /// entry of its group if it points to one.
    fn paint(&mut self, slot: Slot, nh: u32, owner: Owner, w: &mut Vec<Write>) {
        self.repaint(slot, &|o| o <= owner, nh, owner, w);
    }

    /// Gives the entries a removed route owned to the route now covering.
    fn unpaint(&mut self, slot: Slot, old: Owner, value: u32, owner: Owner, w: &mut Vec<Write>) {
        self.repaint(slot, &|o| o == old, value, owner, w);
    }

    /// Writes (value, owner) into `slot`, or into every entry of the group
    /// it points to, wherever the entry's owner passes `takes`.
    fn repaint(
        &mut self,
        slot: Slot,
        takes: &dyn Fn(Owner) -> bool,
        value: u32,
        owner: Owner,
        w: &mut Vec<Write>,
    ) {
        let e = self.value(slot);
        if e & CHILD != 0 {
            let base = ((e & !CHILD) as usize) << self.shape.stride;
            for i in 0..self.group_size() {
                let child = Slot {
                    table: Table::Groups,
                    index: base + i,
                };
                self.repaint(child, takes, value, owner, w);
            }
        } else if takes(self.owner(slot)) {
            self.set(slot, value, owner, w);
        }
    }

    fn allocate(&mut self, start: u8) -> u32 {
        let g = match self.free.pop() {
            Some(g) => g,
            None => {
                let g = self.group_start.len() as u32;
                self.group_start.push(0);
                self.group_specific.push(0);
                self.group_prefix.push(0);
                self.groups.resize(self.groups.len() + self.group_size(), 0);
                self.group_owner.resize(self.groups.len(), 0);
                g
            }
        };
        self.group_start[g as usize] = start;
        debug_assert_eq!(self.group_specific[g as usize], 0);
        if self.recording {
            let base = (g as usize) << self.shape.stride;
            let size = self.group_size();
            self.allocated
                .push((g, self.groups[base..base + size].to_vec()));
        }
        g
    }

    fn release(&mut self, g: u32) {
        // A freed group keeps its entries (readers may still be in it) but
        // not its bookkeeping. It holds no child pointer (it had no specific
        // entry), so with owners cleared none counts as specific on reuse.
        debug_assert_eq!(self.group_specific[g as usize], 0);
        let base = (g as usize) << self.shape.stride;
        let size = self.group_size();
        self.group_owner[base..base + size].fill(0);
        if self.concurrent_readers {
            self.quarantine.push(g);
        } else {
            self.free.push(g);
        }
    }

    fn value(&self, s: Slot) -> u32 {
        match s.table {
            Table::Root => self.root[s.index],
            Table::Groups => self.groups[s.index],
            Table::Shortcut => self.shortcut[s.index],
        }
    }

    fn owner(&self, s: Slot) -> Owner {
        match s.table {
            Table::Root => self.root_owner[s.index],
            Table::Groups => self.group_owner[s.index],
            Table::Shortcut => unreachable!("shortcut words have no owner"),
        }
    }

    /// Prefix `k` now has the specific entry `entry`: updates its slot, or
    /// takes a free one of its pair (entry word first, then the tag); with
    /// none free the prefix is not held and its lookups walk.
    fn shortcut_put(&mut self, k: u64, entry: u32, w: &mut Vec<Write>) {
        let p = self.shape.shortcut;
        if let Some(&at) = self.shortcut_at.get(&k) {
            self.set_word(at as usize, entry, w);
            return;
        }
        let Some(at) = shortcut::slot_tagged(&self.shortcut, shortcut::pair(k, p), 0) else {
            return;
        };
        self.set_word(at, entry, w);
        self.set_word(at + 1, shortcut::tag(k, p), w);
        self.shortcut_at.insert(k, at as u32);
    }

    /// Prefix `k`'s entry is no longer specific: empties its slot (the tag).
    fn shortcut_drop(&mut self, k: u64, w: &mut Vec<Write>) {
        if let Some(at) = self.shortcut_at.remove(&k) {
            self.set_word(at as usize + 1, 0, w);
        }
    }

    fn set_word(&mut self, index: usize, value: u32, w: &mut Vec<Write>) {
        if self.shortcut[index] != value {
            self.shortcut[index] = value;
            if self.recording {
                w.push(Write {
                    table: Table::Shortcut,
                    index: index as u32,
                    value,
                });
            }
        }
    }

    /// The one place entries change: keeps the specific counts and records
    /// the write when the fast path's value changes.
    fn set(&mut self, s: Slot, value: u32, owner: Owner, w: &mut Vec<Write>) {
        let old = self.value(s);
        match s.table {
            Table::Root => {
                self.root[s.index] = value;
                self.root_owner[s.index] = owner;
            }
            Table::Groups => {
                let g = s.index >> self.shape.stride;
                let start = self.group_start[g];
                let specific = |v: u32, o: Owner| v & CHILD != 0 || o > start + 1;
                let was = specific(old, self.group_owner[s.index]);
                let is = specific(value, owner);
                if was != is {
                    if is {
                        self.group_specific[g] += 1;
                    } else {
                        self.group_specific[g] -= 1;
                    }
                }
                self.groups[s.index] = value;
                self.group_owner[s.index] = owner;
                if let Some(level) = self.shortcut_level(start).filter(|_| was || is) {
                    let end = start + self.shape.stride;
                    let at = (s.index & (self.group_size() - 1)) as u64;
                    let k = shortcut::key(self.group_prefix[g] | (at << (64 - end)), level);
                    if is {
                        self.shortcut_put(k, value, w);
                    } else {
                        self.shortcut_drop(k, w);
                    }
                }
            }
            Table::Shortcut => unreachable!("shortcut words change through set_word"),
        }
        if old != value && self.recording {
            w.push(Write {
                table: s.table,
                index: s.index as u32,
                value,
            });
        }
    }

    /// Bytes of entries the fast path reads (root, shortcut, groups in
    /// use): [`Stats::fast_path_bytes`] without the walk over the groups.
    pub fn fast_path_bytes(&self) -> u64 {
        (self.root.len() + self.shortcut.len()) as u64 * 4
            + self.groups_in_use() as u64 * (self.group_size() * 4) as u64
    }

    /// Depth, fill and memory, like Linux's fib_triestat.
    pub fn stats(&self) -> Stats {
        let by_len: Vec<(u8, u32)> = self
            .routes
            .iter()
            .enumerate()
            .filter(|(_, m)| !m.is_empty())
            .map(|(l, m)| (l as u8, m.len() as u32))
            .collect();
        let in_use = self.groups_in_use();
        let gbytes = (self.group_size() * 4) as u64;
        let mut levels =
            vec![0u32; 1 + ((K::BITS - self.shape.first) / self.shape.stride) as usize];
        levels[0] = 1;
        let live: Vec<bool> = {
            let mut v = vec![true; self.group_start.len()];
            for &g in self.free.iter().chain(&self.quarantine) {
                v[g as usize] = false;
            }
            v
        };
        for (g, &start) in self.group_start.iter().enumerate() {
            if live[g] {
                levels[1 + ((start - self.shape.first) / self.shape.stride) as usize] += 1;
            }
        }
        let root_filled = self.root.iter().filter(|&&e| e != 0).count() as u64;
        Stats {
            family: if K::BITS == 32 { "ipv4" } else { "ipv6" },
            routes: self.route_count as u64,
            prefix_lengths: by_len,
            first_level_bits: self.shape.first,
            stride_bits: self.shape.stride,
            root_entries: self.root.len() as u64,
            root_filled,
            groups_in_use: in_use,
            groups_quarantined: self.quarantine.len() as u32,
            groups_capacity: self.shape.groups,
            groups_per_level: levels,
            max_reads: 1 + levels_used(&self.group_start, &live, self.shape),
            shortcut_held: shortcut::LEVELS[..self.shape.shortcut_levels as usize]
                .iter()
                .enumerate()
                .map(|(level, &bits)| {
                    let n = self
                        .shortcut_at
                        .keys()
                        .filter(|&&k| shortcut::prefix_of(k).0 == level);
                    (bits, n.count() as u64)
                })
                .collect(),
            shortcut_slots: (self.shortcut.len() / shortcut::WORDS) as u64,
            fast_path_bytes: self.fast_path_bytes(),
            map_bytes: (self.root.len() + self.shortcut.len()) as u64 * 4
                + self.shape.groups as u64 * gbytes,
            control_bytes: self.root_owner.len() as u64
                + self.group_owner.len() as u64
                + self.shortcut_at.capacity() as u64 * 12
                + self
                    .routes
                    .iter()
                    .map(|m| m.capacity() as u64 * (std::mem::size_of::<K>() + 4 + 1) as u64)
                    .sum::<u64>(),
        }
    }
}

fn levels_used(starts: &[u8], live: &[bool], s: Shape) -> u32 {
    starts
        .iter()
        .zip(live)
        .filter(|(_, &l)| l)
        .map(|(&st, _)| 1 + ((st - s.first) / s.stride) as u32)
        .max()
        .unwrap_or(0)
}

/// The slots of one level that `addr/len` covers.
fn covered<K: Key>(table: Table, base: usize, addr: K, start: u8, width: u8, len: u8) -> Covered {
    let first = base + addr.chunk(start, width);
    Covered {
        table,
        range: first..first + (1usize << (start + width - len)),
    }
}

/// A run of slots of one table.
struct Covered {
    table: Table,
    range: std::ops::Range<usize>,
}

impl Iterator for Covered {
    type Item = Slot;
    fn next(&mut self) -> Option<Slot> {
        self.range.next().map(|index| Slot {
            table: self.table,
            index,
        })
    }
}

#[derive(Clone, Copy, Debug)]
struct Slot {
    table: Table,
    index: usize,
}

#[inline(always)]
fn prefetch<T>(p: &T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: prefetch is a hint; any address is allowed.
    unsafe {
        std::arch::x86_64::_mm_prefetch(p as *const T as *const i8, std::arch::x86_64::_MM_HINT_T0);
    }
}

/// A FIB's tables wherever they are held (a [`Fib`]'s own, or a copy
/// made of its writes, as a model of the fast path keeps): the walk the
/// fast path does over them.
#[derive(Clone, Copy, Debug)]
pub struct Tables<'a> {
    pub shape: Shape,
    pub root: &'a [u32],
    pub groups: &'a [u32],
    pub shortcut: &'a [u32],
}

impl Tables<'_> {
    /// Longest-prefix match: the root, then the shortcut, then the groups;
    /// the next-hop id, or `None`.
    #[inline]
    pub fn lookup<K: Key>(&self, addr: K) -> Option<u32> {
        let s = self.shape;
        let mut e = self.root[addr.chunk(0, s.first)];
        let mut start = s.first;
        if e & CHILD != 0 {
            if let Some((found, bits)) = self.shortcut_entry(addr) {
                e = found;
                start = bits;
            }
        }
        while e & CHILD != 0 {
            let base = ((e & !CHILD) as usize) << s.stride;
            e = self.groups[base + addr.chunk(start, s.stride)];
            start += s.stride;
        }
        (e != 0).then_some(e)
    }

    /// The shortcut's entry for `addr`'s longest prefix it holds, and the
    /// bit the walk goes on from.
    fn shortcut_entry<K: Key>(&self, addr: K) -> Option<(u32, u8)> {
        if self.shortcut.is_empty() {
            return None;
        }
        let hi = (addr.to_u128() >> 64) as u64;
        (0..self.shape.shortcut_levels as usize).find_map(|level| {
            shortcut::find(self.shortcut, shortcut::key(hi, level), self.shape.shortcut)
                .map(|e| (e, shortcut::LEVELS[level]))
        })
    }
}

#[derive(Clone, Debug, Serialize)]
pub struct Stats {
    pub family: &'static str,
    pub routes: u64,
    /// (length, routes) for every length in use.
    pub prefix_lengths: Vec<(u8, u32)>,
    pub first_level_bits: u8,
    pub stride_bits: u8,
    pub root_entries: u64,
    pub root_filled: u64,
    pub groups_in_use: u32,
    pub groups_quarantined: u32,
    pub groups_capacity: u32,
    /// Level 0 is the root; level i > 0 counts groups at that depth.
    pub groups_per_level: Vec<u32>,
    /// Most memory reads one lookup needs in this table.
    pub max_reads: u32,
    /// Prefixes the shortcut holds, per prefix length (none without one).
    pub shortcut_held: Vec<(u8, u64)>,
    pub shortcut_slots: u64,
    /// Bytes of entries the fast path reads: root, shortcut, groups in use.
    pub fast_path_bytes: u64,
    /// Arena space reserved for the shape (root + all groups); pages are
    /// allocated only when written, so this is address space, not memory.
    pub map_bytes: u64,
    /// Control plane only: shadow lengths and the route set (estimate).
    pub control_bytes: u64,
}

impl std::fmt::Display for Stats {
    /// As `linerate fib stats` prints a table's statistics.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let s = self;
        let mib = |b: u64| b as f64 / (1024.0 * 1024.0);
        writeln!(f, "{} table: {} routes", s.family, s.routes)?;
        writeln!(
            f,
            "  layout: {} bits, then groups of {} bits ({} entries); at most {} reads per lookup in this table",
            s.first_level_bits,
            s.stride_bits,
            1u32 << s.stride_bits,
            s.max_reads
        )?;
        writeln!(
            f,
            "  root: {} entries, {} routed ({:.1}%)",
            s.root_entries,
            s.root_filled,
            100.0 * s.root_filled as f64 / s.root_entries as f64
        )?;
        writeln!(
            f,
            "  groups: {} in use of {} ({:.1}%), {} quarantined; per level: {}",
            s.groups_in_use,
            s.groups_capacity,
            100.0 * s.groups_in_use as f64 / s.groups_capacity as f64,
            s.groups_quarantined,
            s.groups_per_level[1..]
                .iter()
                .enumerate()
                .filter(|(_, &n)| n > 0)
                .map(|(i, n)| format!("L{}:{n}", i + 1))
                .collect::<Vec<_>>()
                .join(" ")
        )?;
        if s.shortcut_slots > 0 {
            let held: u64 = s.shortcut_held.iter().map(|&(_, n)| n).sum();
            let per_length: Vec<String> = s
                .shortcut_held
                .iter()
                .map(|&(bits, n)| format!("{n} /{bits}s"))
                .collect();
            writeln!(
                f,
                "  shortcut: {} held in {} slots ({:.1}% full)",
                per_length.join(" + "),
                s.shortcut_slots,
                100.0 * held as f64 / s.shortcut_slots as f64
            )?;
        }
        writeln!(
            f,
            "  memory: fast path {:.1} MiB in use (arena space reserved {:.1} MiB, allocated as written), control plane {:.1} MiB",
            mib(s.fast_path_bytes),
            mib(s.map_bytes),
            mib(s.control_bytes)
        )?;
        writeln!(f, "  prefix lengths:")?;
        for chunk in s.prefix_lengths.chunks(6) {
            writeln!(
                f,
                "   {}",
                chunk
                    .iter()
                    .map(|(l, n)| format!("/{l:<3} {n:>8}"))
                    .collect::<Vec<_>>()
                    .join("  ")
            )?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v4(s: &str) -> u32 {
        u32::from(s.parse::<std::net::Ipv4Addr>().unwrap())
    }

    #[test]
    fn golden_dir_24_8() {
        let mut f: Fib<u32> = Fib::new(Shape::IPV4);
        assert_eq!(
            f.insert(v4("0.0.0.0"), 0, 1).unwrap().len(),
            1 << 24,
            "a default route writes every root entry"
        );
        f.insert(v4("10.0.0.0"), 8, 2).unwrap();
        f.insert(v4("10.1.0.0"), 16, 3).unwrap();
        assert_eq!(f.insert(v4("10.1.2.0"), 24, 4).unwrap().len(), 1);
        // A /25 under the /24: one new group, written once with its final
        // entries (128 x 4, 128 x 5), then the link.
        let w = f.insert(v4("10.1.2.128"), 25, 5).unwrap();
        assert_eq!(w.len(), 257);
        assert_eq!(w.last().unwrap().table, Table::Root);
        assert_eq!(w.last().unwrap().value, CHILD);
        f.insert(v4("10.1.2.255"), 32, 6).unwrap();
        for (a, nh) in [
            ("9.9.9.9", 1),
            ("10.200.0.1", 2),
            ("10.1.200.1", 3),
            ("10.1.2.1", 4),
            ("10.1.2.200", 5),
            ("10.1.2.255", 6),
        ] {
            assert_eq!(f.lookup(v4(a)), Some(nh), "{a}");
        }
        assert_eq!(f.groups_in_use(), 1);
        // Removing the /25 uncovers the /24; the /32 keeps the group.
        f.remove(v4("10.1.2.128"), 25).unwrap();
        assert_eq!(f.lookup(v4("10.1.2.200")), Some(4));
        assert_eq!(f.lookup(v4("10.1.2.255")), Some(6));
        assert_eq!(f.groups_in_use(), 1);
        // Removing the /32 folds the group back: one root write.
        let w = f.remove(v4("10.1.2.255"), 32).unwrap();
        assert_eq!(
            w.last().unwrap(),
            &Write {
                table: Table::Root,
                index: 0x0a0102,
                value: 4
            }
        );
        assert_eq!(f.groups_in_use(), 0);
        assert_eq!(
            f.groups_quarantined(),
            1,
            "kept from reuse until readers are done"
        );
        f.release_quarantine();
        assert_eq!(f.groups_quarantined(), 0);
        // Replacing a next hop writes only what changes.
        assert_eq!(f.insert(v4("10.1.2.0"), 24, 4).unwrap().len(), 0);
        assert_eq!(f.insert(v4("10.1.2.0"), 24, 9).unwrap().len(), 1);
        // Removing the default leaves unrouted space unrouted.
        f.remove(0, 0).unwrap();
        assert_eq!(f.lookup(v4("9.9.9.9")), None);
        assert_eq!(f.lookup(v4("10.9.9.9")), Some(2));
    }

    #[test]
    fn host_routes_and_defaults_in_ipv6() {
        let mut f: Fib<u128> = Fib::new(Shape::IPV6);
        let a: u128 = "2001:db8::1".parse::<std::net::Ipv6Addr>().unwrap().into();
        f.insert(0, 0, 1).unwrap();
        f.insert(a, 128, 2).unwrap();
        f.insert(a, 32, 3).unwrap();
        assert_eq!(f.lookup(a), Some(2));
        assert_eq!(f.lookup(a + 1), Some(3));
        assert_eq!(f.lookup(1), Some(1));
        assert_eq!(f.stats().max_reads, 14, "a /128 is 14 reads deep");
        assert_eq!(f.groups_in_use(), 13, "groups for bits 24..128");
        f.remove(a, 128).unwrap();
        assert_eq!(f.lookup(a), Some(3));
        assert_eq!(
            f.groups_in_use(),
            1,
            "the /32 keeps the group for bits 24..32"
        );
        f.remove(a, 32).unwrap();
        assert_eq!(f.groups_in_use(), 0);
        assert_eq!(f.lookup(a), Some(1));
    }

    #[test]
    fn bad_input_changes_nothing() {
        let shape = Shape {
            first: 24,
            stride: 8,
            groups: 2,
            shortcut: 0,
            shortcut_levels: 0,
        };
        let mut f: Fib<u32> = Fib::new(shape);
        f.insert(v4("10.0.0.0"), 25, 1).unwrap();
        f.insert(v4("10.0.1.0"), 25, 2).unwrap();
        let before = (f.root().to_vec(), f.groups().to_vec(), f.len());
        assert_eq!(
            f.insert(v4("10.0.0.0"), 25, 0),
            Err(FibError::NextHopOutOfRange(0))
        );
        assert_eq!(
            f.insert(v4("10.0.0.0"), 25, CHILD),
            Err(FibError::NextHopOutOfRange(CHILD))
        );
        assert_eq!(
            f.insert(v4("10.0.0.0"), 33, 1),
            Err(FibError::BadLength { len: 33, max: 32 })
        );
        assert_eq!(f.remove(v4("10.0.2.0"), 24), Err(FibError::NotFound));
        let full = f.insert(v4("10.0.2.0"), 25, 3).unwrap_err();
        assert_eq!(
            full,
            FibError::TableFull {
                needed: 1,
                free: 0,
                capacity: 2,
                quarantined: 0
            }
        );
        assert!(full.to_string().starts_with("table full"));
        assert_eq!((f.root().to_vec(), f.groups().to_vec(), f.len()), before);
        assert_eq!(f.lookup(v4("10.0.1.5")), Some(2), "still serving");
        // Routes that fit still go in: a /24 needs no group.
        f.insert(v4("10.0.2.0"), 24, 3).unwrap();
        // Freed groups in quarantine are not free yet, and the error says so.
        f.remove(v4("10.0.0.0"), 25).unwrap();
        let e = f.insert(v4("10.0.3.0"), 26, 4).unwrap_err();
        assert_eq!(
            e,
            FibError::TableFull {
                needed: 1,
                free: 0,
                capacity: 2,
                quarantined: 1
            }
        );
        f.release_quarantine();
        f.insert(v4("10.0.3.0"), 26, 4).unwrap();
        assert_eq!(f.lookup(v4("10.0.3.1")), Some(4));
    }

    /// The compact layout's shortcut holds the /40 level, the wide one's
    /// does not: a /40 route and the link on a /48's path are held as /40s
    /// only where the shape says so, and lookups agree either way.
    #[test]
    fn shortcut_levels_follow_the_shape() {
        let v6 = |s: &str| u128::from(s.parse::<std::net::Ipv6Addr>().unwrap());
        let hi = |a: u128| (a >> 64) as u64;
        let (net40, net48) = (v6("2001:db8:100::"), v6("2001:db8:4242::"));
        for (shape, held) in [
            (Shape::IPV6, vec![(48, 1)]),
            (Shape::IPV6_COMPACT, vec![(48, 1), (40, 2)]),
        ] {
            let mut f: Fib<u128> = Fib::new(shape).without_concurrent_readers();
            f.insert(net40, 40, 1).unwrap();
            f.insert(net48, 48, 2).unwrap();
            assert_eq!(f.stats().shortcut_held, held, "{shape:?}");
            let p = shape.shortcut;
            assert_eq!(
                shortcut::find(f.shortcut(), shortcut::key(hi(net48), 0), p),
                Some(2)
            );
            let held40 = shortcut::find(f.shortcut(), shortcut::key(hi(net40), 1), p);
            assert_eq!(held40, (shape.shortcut_levels > 1).then_some(1));
            assert_eq!(f.lookup(net40 | 0xabcd), Some(1));
            assert_eq!(f.lookup(net48 | 0xabcd), Some(2));
            assert_eq!(f.lookup(v6("2001:db8:4243::1")), None);
            f.remove(net40, 40).unwrap();
            let left = held.iter().map(|&(b, n)| (b, if b == 40 { 1 } else { n }));
            assert_eq!(f.stats().shortcut_held, left.collect::<Vec<_>>());
        }
    }
}

#[cfg(test)]
mod layout_names {
    use super::Ipv6Layout;

    #[test]
    fn every_layout_has_one_name() {
        let names: Vec<&str> = Ipv6Layout::CHOICES.iter().map(|(n, _)| *n).collect();
        assert_eq!(names, ["wide", "compact"]);
        assert_eq!(Ipv6Layout::CHOICES[0].1, Ipv6Layout::default());
        assert_ne!(Ipv6Layout::CHOICES[0].1, Ipv6Layout::CHOICES[1].1);
    }
}
