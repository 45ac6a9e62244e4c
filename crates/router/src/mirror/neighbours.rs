//! The usable neighbours: the MACs next hops send to, and the hosts on
//! connected networks that get an entry of their own (as ip_tryforward
//! reaches them: forwarded in the fast path, the rest of the network the
//! kernel's).
use linerate_fib::Key;
use std::collections::{BTreeSet, HashMap, HashSet};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// A neighbour entry: interface and address.
pub type NeighKey = (u32, IpAddr);

#[derive(Default)]
pub struct Neighbours {
    macs: HashMap<NeighKey, [u8; 6]>,
    /// The usable neighbours again, by address: the hosts a route change
    /// may give or take a host entry (a range of this set).
    hosts: BTreeSet<(IpAddr, u32)>,
    /// Usable neighbours the kernel does not confirm (PERMANENT, NOARP):
    /// never reported in use (NTF_USE takes PERMANENT away).
    fixed: HashSet<NeighKey>,
}

impl Neighbours {
    pub fn mac(&self, key: &NeighKey) -> Option<[u8; 6]> {
        self.macs.get(key).copied()
    }

    pub fn is_fixed(&self, key: &NeighKey) -> bool {
        self.fixed.contains(key)
    }

    pub fn keys(&self) -> impl Iterator<Item = &NeighKey> {
        self.macs.keys()
    }

    /// A neighbour's MAC now (None: not usable, or gone), and whether the
    /// kernel confirms it. True if the MAC changed.
    pub fn set(&mut self, key: NeighKey, mac: Option<[u8; 6]>, fixed: bool) -> bool {
        if fixed && mac.is_some() {
            self.fixed.insert(key);
        } else {
            self.fixed.remove(&key);
        }
        let before = match mac {
            Some(m) => self.macs.insert(key, m),
            None => self.macs.remove(&key),
        };
        if before == mac {
            return false;
        }
        let (oif, ip) = key;
        if mac.is_some() && !link_local(ip) {
            self.hosts.insert((ip, oif));
        } else {
            self.hosts.remove(&(ip, oif));
        }
        true
    }

    /// Whether `ip` has a usable neighbour on some interface.
    pub fn is_host(&self, ip: IpAddr) -> bool {
        self.hosts.range((ip, 0)..=(ip, u32::MAX)).next().is_some()
    }

    /// The hosts with a usable neighbour inside prefix `(a, len)`.
    pub fn hosts_within<K: Key>(&self, (a, len): (K, u8)) -> Vec<K> {
        let host_bits = (u128::MAX >> (128 - K::BITS as u32))
            .checked_shr(len as u32)
            .unwrap_or(0);
        let last = K::from_u128(a.to_u128() | host_bits);
        let mut out: Vec<K> = self
            .hosts
            .range((ip_of(a), 0)..=(ip_of(last), u32::MAX))
            .map(|(ip, _)| key_of(*ip))
            .collect();
        out.dedup();
        out
    }
}

/// An address as a FIB key's family holds it (a 32-bit key is IPv4).
pub fn ip_of<K: Key>(a: K) -> IpAddr {
    if K::BITS == 32 {
        IpAddr::V4(Ipv4Addr::from(a.to_u128() as u32))
    } else {
        IpAddr::V6(Ipv6Addr::from(a.to_u128()))
    }
}

fn key_of<K: Key>(ip: IpAddr) -> K {
    match ip {
        IpAddr::V4(v) => K::from_u128(u32::from(v) as u128),
        IpAddr::V6(v) => K::from_u128(u128::from(v)),
    }
}

/// fe80::/10: never forwarded (the fast path passes it), and every
/// interface has the same connected fe80::/64, so no host entries there.
fn link_local(ip: IpAddr) -> bool {
    matches!(ip, IpAddr::V6(v) if v.segments()[0] & 0xffc0 == 0xfe80)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hosts_are_the_usable_neighbours_but_link_local_ones() {
        let mut n = Neighbours::default();
        let a: IpAddr = "198.19.0.9".parse().unwrap();
        assert!(n.set((3, a), Some([2, 0, 0, 0, 0, 9]), false));
        assert!(!n.set((3, a), Some([2, 0, 0, 0, 0, 9]), false), "no change");
        assert!(n.set((3, "fe80::9".parse().unwrap()), Some([2; 6]), true));
        assert!(n.set((3, "2001:db8::9".parse().unwrap()), Some([2; 6]), false));
        assert!(n.is_host(a));
        assert_eq!(n.hosts_within((0xc613_0000u32, 24)), vec![0xc613_0009]);
        assert_eq!(n.hosts_within((0xc613_0100u32, 24)), Vec::<u32>::new());
        assert_eq!(n.hosts_within((0u128, 0)), vec![0x2001_0db8u128 << 96 | 9]);
        assert!(n.is_fixed(&(3, "fe80::9".parse().unwrap())));
        assert!(n.set((3, a), None, false));
        assert!(!n.is_host(a));
    }
}
