//! A family's routes as the kernel has them: for each prefix of the main
//! and local tables, its candidates (one per table and metric, the
//! kernel's identity of a route), and which of them the kernel uses. One
//! implementation for IPv4 (u32 keys) and IPv6 (u128 keys).
use super::decode::TABLE_LOCAL;
use super::nexthops::{members_key, NhKey};
use linerate_fib::Key;
use smallvec::SmallVec;
use std::collections::{BTreeMap, HashMap, HashSet};

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Candidate {
    pub table: u32,
    pub priority: u32,
    pub nh: NhKey,
}

/// A route's identity in a dump: prefix, table and metric.
pub type RouteId<K> = ((K, u8), u32, u32);

/// A candidate as the table stores it: its next-hop key interned.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Stored {
    table: u32,
    priority: u32,
    nh: u32,
}

/// Next-hop keys, each stored once with the number of candidates using
/// it: a full table has a million routes but a few hundred next hops, and
/// a key (an address, an interface, a group's members) is larger than a
/// route's other fields together.
#[derive(Default)]
struct Interned {
    keys: Vec<Option<NhKey>>,
    uses: Vec<u32>,
    ids: HashMap<NhKey, u32>,
    free: Vec<u32>,
}

impl Interned {
    fn get(&mut self, k: &NhKey) -> u32 {
        let id = match self.ids.get(k) {
            Some(&id) => id,
            None => {
                let id = match self.free.pop() {
                    Some(id) => {
                        self.keys[id as usize] = Some(k.clone());
                        id
                    }
                    None => {
                        self.keys.push(Some(k.clone()));
                        self.uses.push(0);
                        (self.keys.len() - 1) as u32
                    }
                };
                self.ids.insert(k.clone(), id);
                id
            }
        };
        self.uses[id as usize] += 1;
        id
    }

    fn put(&mut self, id: u32) {
        let uses = &mut self.uses[id as usize];
        *uses -= 1;
        if *uses == 0 {
            if let Some(k) = self.keys[id as usize].take() {
                self.ids.remove(&k);
            }
            self.free.push(id);
        }
    }

    fn key(&self, id: u32) -> &NhKey {
        self.keys[id as usize]
            .as_ref()
            .expect("a stored candidate's key is interned")
    }
}

/// A prefix's candidates: almost always one, kept inline.
type Candidates = SmallVec<[Stored; 1]>;

pub struct RouteTable<K: Key> {
    /// A B-tree, not a hash map: it grows a node at a time, where a hash
    /// map of a million routes rehashes all of them at once and stalls the
    /// mirror for tens of milliseconds in the middle of a burst
    /// (docs/route-changes-measured.md, "What the loop had to become").
    by_prefix: BTreeMap<(K, u8), Candidates>,
    nh: Interned,
}

impl<K: Key> Default for RouteTable<K> {
    fn default() -> Self {
        RouteTable {
            by_prefix: BTreeMap::new(),
            nh: Interned::default(),
        }
    }
}

impl<K: Key> RouteTable<K> {
    /// A route added (it replaces the one with its table and metric) or
    /// deleted. IPv6 deletes one member of a multipath route at a time
    /// (`ip -6 route del P via G`), and says so with G alone.
    pub fn update(&mut self, key: (K, u8), c: Candidate, gone: bool) {
        let list = self.by_prefix.entry(key).or_default();
        if gone && K::BITS == 128 && remove_sibling(list, &mut self.nh, &c) {
            return;
        }
        let nh = &mut self.nh;
        list.retain(|x| {
            let same = x.table == c.table && x.priority == c.priority;
            if same {
                nh.put(x.nh);
            }
            !same
        });
        if !gone {
            let id = self.nh.get(&c.nh);
            list.push(Stored {
                table: c.table,
                priority: c.priority,
                nh: id,
            });
        }
        if list.is_empty() {
            self.by_prefix.remove(&key);
        }
    }

    /// The next hop the kernel takes for exactly this prefix by `table`
    /// (the local table's routes over its own, as its first rule looks
    /// local up): the local table wins, then the lowest metric.
    pub fn best(&self, key: &(K, u8), table: u32) -> Option<NhKey> {
        self.by_prefix
            .get(key)?
            .iter()
            .filter(|c| c.table == table || c.table == TABLE_LOCAL)
            .min_by_key(|c| (c.table != TABLE_LOCAL, c.priority))
            .map(|c| self.nh.key(c.nh).clone())
    }

    /// The next hop of the longest prefix holding `a` that has a route in
    /// `table` (or local), and that prefix's length.
    pub fn covering(&self, a: K, table: u32) -> Option<(NhKey, u8)> {
        (0..=K::BITS)
            .rev()
            .find_map(|len| Some((self.best(&(a.mask(len), len), table)?, len)))
    }

    /// The prefixes with a route in `table` or the local table.
    pub fn prefixes_in(&self, table: u32) -> Vec<(K, u8)> {
        self.by_prefix
            .iter()
            .filter(|(_, l)| l.iter().any(|c| c.table == table || c.table == TABLE_LOCAL))
            .map(|(k, _)| *k)
            .collect()
    }

    /// The prefixes with a candidate whose next hop `which` selects.
    pub fn having(&self, which: impl Fn(&NhKey) -> bool) -> Vec<(K, u8)> {
        self.by_prefix
            .iter()
            .filter(|(_, l)| l.iter().any(|c| which(self.nh.key(c.nh))))
            .map(|(k, _)| *k)
            .collect()
    }

    /// Drops the candidates of `keys` whose next hop `dead` selects.
    pub fn drop_candidates(&mut self, keys: &[(K, u8)], dead: impl Fn(&NhKey) -> bool) {
        for k in keys {
            if let Some(l) = self.by_prefix.get_mut(k) {
                let nh = &mut self.nh;
                l.retain(|c| {
                    let drop = dead(nh.key(c.nh));
                    if drop {
                        nh.put(c.nh);
                    }
                    !drop
                });
            }
        }
    }

    /// Every prefix held (some may have no candidate left).
    pub fn prefixes(&self) -> Vec<(K, u8)> {
        self.by_prefix.keys().copied().collect()
    }

    /// Rebuilds the B-tree with full nodes. Routes inserted in order (a
    /// dump, a table arriving) leave each node a little over half full (a
    /// node splits in two halves when full and the left one is never
    /// filled again): 73 bytes a route for a full table, against 35 once
    /// rebuilt from the sorted entries (`BTreeMap`'s bulk build). Run after
    /// a dump (the start-up, a resync); changes after it split the nodes
    /// they touch, as before.
    pub fn compact(&mut self) {
        let entries = std::mem::take(&mut self.by_prefix);
        self.by_prefix = entries.into_iter().collect();
    }

    /// Drops the routes a dump did not show; the prefixes that lost one.
    pub fn drop_unseen(&mut self, seen: &HashSet<RouteId<K>>) -> Vec<(K, u8)> {
        let mut changed = Vec::new();
        let nh = &mut self.nh;
        for (k, l) in self.by_prefix.iter_mut() {
            let before = l.len();
            l.retain(|c| {
                let keep = seen.contains(&(*k, c.table, c.priority));
                if !keep {
                    nh.put(c.nh);
                }
                keep
            });
            if l.len() != before {
                changed.push(*k);
            }
        }
        changed
    }

    /// Distinct next-hop keys held (for tests).
    #[cfg(test)]
    fn interned(&self) -> usize {
        self.nh.ids.len()
    }
}

/// For an IPv6 delete naming one gateway: takes that member out of the
/// multipath route with the same table and metric. False if there is no
/// such member (the whole route goes, as for IPv4).
fn remove_sibling(list: &mut Candidates, nh: &mut Interned, c: &Candidate) -> bool {
    let NhKey::Gateway { oif, gw, .. } = &c.nh else {
        return false;
    };
    let Some(x) = list
        .iter_mut()
        .find(|x| x.table == c.table && x.priority == c.priority)
    else {
        return false;
    };
    let NhKey::Group(members) = nh.key(x.nh) else {
        return false;
    };
    let is_it =
        |k: &NhKey| matches!(k, NhKey::Gateway { oif: o, gw: g, .. } if o == oif && g == gw);
    if !members.iter().any(|(k, _)| is_it(k)) {
        return false;
    }
    let rest = members.iter().filter(|(k, _)| !is_it(k)).cloned().collect();
    let id = nh.get(&members_key(rest));
    nh.put(x.nh);
    x.nh = id;
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::IpAddr;

    fn gw(oif: u32, ip: &str) -> NhKey {
        NhKey::Gateway {
            oif,
            gw: ip.parse::<IpAddr>().unwrap(),
            mtu: None,
        }
    }

    fn cand(table: u32, priority: u32, nh: NhKey) -> Candidate {
        Candidate {
            table,
            priority,
            nh,
        }
    }

    #[test]
    fn the_local_table_then_the_lowest_metric_wins() {
        let mut t = RouteTable::<u32>::default();
        let k = (0xc612_0000, 16);
        t.update(k, cand(254, 100, gw(2, "10.0.0.1")), false);
        t.update(k, cand(254, 10, gw(2, "10.0.0.2")), false);
        assert_eq!(t.best(&k, 254), Some(gw(2, "10.0.0.2")));
        t.update(k, cand(255, 500, NhKey::Kernel), false);
        assert_eq!(t.best(&k, 254), Some(NhKey::Kernel));
        t.update(k, cand(255, 500, NhKey::Kernel), true);
        // A replace keeps one route per table and metric.
        t.update(k, cand(254, 10, gw(2, "10.0.0.3")), false);
        assert_eq!(t.best(&k, 254), Some(gw(2, "10.0.0.3")));
        t.update(k, cand(254, 10, NhKey::Kernel), true);
        assert_eq!(t.best(&k, 254), Some(gw(2, "10.0.0.1")));
        assert_eq!(t.covering(0xc612_0505, 254), Some((gw(2, "10.0.0.1"), 16)));
        assert_eq!(t.covering(0xc613_0505, 254), None);
        // Another table's routes: its own, local's over them; main's not.
        t.update(k, cand(100, 1, gw(2, "10.9.0.1")), false);
        assert_eq!(t.best(&k, 100), Some(gw(2, "10.9.0.1")));
        assert_eq!(t.best(&k, 254), Some(gw(2, "10.0.0.1")));
        t.update(k, cand(255, 0, NhKey::Kernel), false);
        assert_eq!(t.best(&k, 100), Some(NhKey::Kernel));
        assert_eq!(t.best(&k, 200), Some(NhKey::Kernel), "local alone");
        t.update(k, cand(255, 0, NhKey::Kernel), true);
        assert_eq!(t.best(&k, 200), None);
        assert_eq!(t.prefixes_in(100), [k]);
        assert!(t.prefixes_in(200).is_empty());
    }

    #[test]
    fn next_hop_keys_are_stored_once_and_freed_with_their_last_route() {
        let mut t = RouteTable::<u32>::default();
        for i in 0..1000u32 {
            t.update((i << 8, 24), cand(254, 0, gw(2, "10.0.0.1")), false);
        }
        assert_eq!(t.interned(), 1);
        // A prefix replaced through one gateway after another: only the
        // keys in use stay.
        for g in 2..200 {
            t.update((0, 24), cand(254, 0, gw(2, &format!("10.0.0.{g}"))), false);
        }
        assert_eq!(t.interned(), 2);
        assert_eq!(t.best(&(0, 24), 254), Some(gw(2, "10.0.0.199")));
        for i in 0..1000u32 {
            t.update((i << 8, 24), cand(254, 0, NhKey::Kernel), true);
        }
        assert_eq!(t.interned(), 0);
        assert!(
            t.prefixes().is_empty(),
            "a prefix with no route left is dropped"
        );
        // Dropping by next hop frees too.
        t.update((1 << 8, 24), cand(254, 0, gw(3, "10.0.1.1")), false);
        t.drop_candidates(&[(1 << 8, 24)], |k| *k == gw(3, "10.0.1.1"));
        assert_eq!(t.interned(), 0);
        assert_eq!(t.best(&(1 << 8, 24), 254), None);
    }

    #[test]
    fn compacting_keeps_every_route_and_its_best_and_changes_go_on_after() {
        let mut t = RouteTable::<u32>::default();
        for i in 0..5000u32 {
            t.update((i << 8, 24), cand(254, 0, gw(2, "10.0.0.1")), false);
            if i % 7 == 0 {
                t.update((i << 8, 24), cand(254, 5, gw(3, "10.0.0.2")), false);
                t.update((i << 8, 23), cand(254, 0, gw(3, "10.0.0.2")), false);
            }
        }
        let before: Vec<_> = t
            .prefixes()
            .into_iter()
            .map(|k| (k, t.best(&k, 254)))
            .collect();
        t.compact();
        let after: Vec<_> = t
            .prefixes()
            .into_iter()
            .map(|k| (k, t.best(&k, 254)))
            .collect();
        assert_eq!(before, after);
        assert_eq!(t.interned(), 2);
        t.update((7 << 8, 24), cand(254, 0, gw(2, "10.0.0.1")), true);
        assert_eq!(t.best(&(7 << 8, 24), 254), Some(gw(3, "10.0.0.2")));
        t.update((1 << 30, 8), cand(254, 0, gw(2, "10.0.0.1")), false);
        assert_eq!(t.covering((1 << 30) + 5, 254), Some((gw(2, "10.0.0.1"), 8)));
    }

    #[test]
    fn ipv6_deletes_multipath_members_one_by_one() {
        let mut t = RouteTable::<u128>::default();
        let k = (0x2001_0db8u128 << 96, 32);
        let group = members_key(vec![(gw(2, "fe80::1"), 1), (gw(3, "fe80::2"), 1)]);
        t.update(k, cand(254, 1024, group), false);
        t.update(k, cand(254, 1024, gw(3, "fe80::2")), true);
        assert_eq!(t.best(&k, 254), Some(gw(2, "fe80::1")));
        assert_eq!(t.interned(), 1, "the group's key is freed");
        // IPv4 has no such thing: the route goes whole.
        let mut t4 = RouteTable::<u32>::default();
        let group = members_key(vec![(gw(2, "10.0.0.1"), 1), (gw(3, "10.0.0.2"), 1)]);
        t4.update((0, 0), cand(254, 0, group), false);
        t4.update((0, 0), cand(254, 0, gw(3, "10.0.0.2")), true);
        assert_eq!(t4.best(&(0, 0), 254), None);
    }
}
