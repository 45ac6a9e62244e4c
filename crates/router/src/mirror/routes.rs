//! A family's routes as the kernel has them: for each prefix of the main
//! and local tables, its candidates (one per table and metric, the
//! kernel's identity of a route), and which of them the kernel uses. One
//! implementation for IPv4 (u32 keys) and IPv6 (u128 keys).
use super::decode::TABLE_LOCAL;
use super::nexthops::{members_key, NhKey};
use linerate_fib::Key;
use std::collections::{BTreeMap, HashSet};

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Candidate {
    pub table: u32,
    pub priority: u32,
    pub nh: NhKey,
}

/// A route's identity in a dump: prefix, table and metric.
pub type RouteId<K> = ((K, u8), u32, u32);

pub struct RouteTable<K: Key> {
    by_prefix: BTreeMap<(K, u8), Vec<Candidate>>,
}

impl<K: Key> Default for RouteTable<K> {
    fn default() -> Self {
        RouteTable {
            by_prefix: BTreeMap::new(),
        }
    }
}

impl<K: Key> RouteTable<K> {
    /// A route added (it replaces the one with its table and metric) or
    /// deleted. IPv6 deletes one member of a multipath route at a time
    /// (`ip -6 route del P via G`), and says so with G alone.
    pub fn update(&mut self, key: (K, u8), c: Candidate, gone: bool) {
        let list = self.by_prefix.entry(key).or_default();
        if gone && K::BITS == 128 && remove_sibling(list, &c) {
            return;
        }
        list.retain(|x| !(x.table == c.table && x.priority == c.priority));
        if !gone {
            list.push(c);
        }
    }

    /// The next hop the kernel takes for exactly this prefix: the local
    /// table wins, then the lowest metric.
    pub fn best(&self, key: &(K, u8)) -> Option<NhKey> {
        self.by_prefix
            .get(key)?
            .iter()
            .min_by_key(|c| (c.table != TABLE_LOCAL, c.priority))
            .map(|c| c.nh.clone())
    }

    /// The next hop of the longest prefix holding `a` that has a route.
    pub fn covering(&self, a: K) -> Option<NhKey> {
        (0..=K::BITS)
            .rev()
            .find_map(|len| self.best(&(a.mask(len), len)))
    }

    /// The prefixes with a candidate `which` selects.
    pub fn having(&self, which: impl Fn(&Candidate) -> bool) -> Vec<(K, u8)> {
        self.by_prefix
            .iter()
            .filter(|(_, l)| l.iter().any(&which))
            .map(|(k, _)| *k)
            .collect()
    }

    /// Drops the candidates of `keys` that `dead` selects.
    pub fn drop_candidates(&mut self, keys: &[(K, u8)], dead: impl Fn(&Candidate) -> bool) {
        for k in keys {
            if let Some(l) = self.by_prefix.get_mut(k) {
                l.retain(|c| !dead(c));
            }
        }
    }

    /// Every prefix held (some may have no candidate left).
    pub fn prefixes(&self) -> Vec<(K, u8)> {
        self.by_prefix.keys().copied().collect()
    }

    /// Drops the routes a dump did not show; the prefixes that lost one.
    pub fn drop_unseen(&mut self, seen: &HashSet<RouteId<K>>) -> Vec<(K, u8)> {
        let mut changed = Vec::new();
        for (k, l) in self.by_prefix.iter_mut() {
            let before = l.len();
            l.retain(|c| seen.contains(&(*k, c.table, c.priority)));
            if l.len() != before {
                changed.push(*k);
            }
        }
        changed
    }
}

/// For an IPv6 delete naming one gateway: takes that member out of the
/// multipath route with the same table and metric. False if there is no
/// such member (the whole route goes, as for IPv4).
fn remove_sibling(list: &mut [Candidate], c: &Candidate) -> bool {
    let NhKey::Gateway { oif, gw, .. } = &c.nh else {
        return false;
    };
    let Some(x) = list
        .iter_mut()
        .find(|x| x.table == c.table && x.priority == c.priority)
    else {
        return false;
    };
    let NhKey::Group(members) = &x.nh else {
        return false;
    };
    let is_it =
        |k: &NhKey| matches!(k, NhKey::Gateway { oif: o, gw: g, .. } if o == oif && g == gw);
    if !members.iter().any(|(k, _)| is_it(k)) {
        return false;
    }
    let rest = members.iter().filter(|(k, _)| !is_it(k)).cloned().collect();
    x.nh = members_key(rest);
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
        assert_eq!(t.best(&k), Some(gw(2, "10.0.0.2")));
        t.update(k, cand(255, 500, NhKey::Kernel), false);
        assert_eq!(t.best(&k), Some(NhKey::Kernel));
        t.update(k, cand(255, 500, NhKey::Kernel), true);
        // A replace keeps one route per table and metric.
        t.update(k, cand(254, 10, gw(2, "10.0.0.3")), false);
        assert_eq!(t.best(&k), Some(gw(2, "10.0.0.3")));
        t.update(k, cand(254, 10, NhKey::Kernel), true);
        assert_eq!(t.best(&k), Some(gw(2, "10.0.0.1")));
        assert_eq!(t.covering(0xc612_0505), Some(gw(2, "10.0.0.1")));
        assert_eq!(t.covering(0xc613_0505), None);
    }

    #[test]
    fn ipv6_deletes_multipath_members_one_by_one() {
        let mut t = RouteTable::<u128>::default();
        let k = (0x2001_0db8u128 << 96, 32);
        let group = members_key(vec![(gw(2, "fe80::1"), 1), (gw(3, "fe80::2"), 1)]);
        t.update(k, cand(254, 1024, group), false);
        t.update(k, cand(254, 1024, gw(3, "fe80::2")), true);
        assert_eq!(t.best(&k), Some(gw(2, "fe80::1")));
        // IPv4 has no such thing: the route goes whole.
        let mut t4 = RouteTable::<u32>::default();
        let group = members_key(vec![(gw(2, "10.0.0.1"), 1), (gw(3, "10.0.0.2"), 1)]);
        t4.update((0, 0), cand(254, 0, group), false);
        t4.update((0, 0), cand(254, 0, gw(3, "10.0.0.2")), true);
        assert_eq!(t4.best(&(0, 0)), None);
    }
}
