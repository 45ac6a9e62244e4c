//! Where the fast path keeps the VLAN devices on the router's ports: each
//! device's entry in a slot of `ifaces` past the ports', and each port
//! with VLAN devices a table of `vlan_slots` (abi/router.h) that names the
//! slot by tag. Pure bookkeeping: FastPath::set_vlan_interface writes what
//! it says.
//!
//! A key keeps its slot while it is held, a port its table while it has
//! devices; what is let go is taken again after every other free one (a
//! frame that read a table or a slot just before may still read it).
use crate::layout::{VlanKey, ROUTER_IFACES, ROUTER_VLANS, ROUTER_VLAN_PORTS};
use std::collections::{HashMap, VecDeque};

/// A device's place: its slot of `ifaces`, its port's table (1-based, as
/// iface.vlans holds it), and whether the port's table came or went with
/// it (the port's entry then says so).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Place {
    pub slot: u32,
    pub table: u16,
    pub port_changed: bool,
}

#[derive(Default)]
pub struct Vlans {
    held: HashMap<VlanKey, u32>,
    free_slots: VecDeque<u32>,
    next_slot: u32,
    /// Ports' tables and how many devices each port has.
    tables: HashMap<u32, (u16, usize)>,
    free_tables: VecDeque<u16>,
    next_table: u16,
}

impl Vlans {
    /// Port `port`'s table (0: it has no VLAN device held).
    pub fn table_of(&self, port: u32) -> u16 {
        self.tables.get(&port).map_or(0, |t| t.0)
    }

    /// The key's place: its own, or a new one; None when the slots or the
    /// tables are all taken.
    pub fn take(&mut self, key: &VlanKey) -> Option<Place> {
        if let Some(&slot) = self.held.get(key) {
            return Some(Place {
                slot,
                table: self.table_of(key.ifindex),
                port_changed: false,
            });
        }
        let slot_free = !self.free_slots.is_empty() || (self.next_slot as usize) < ROUTER_VLANS;
        let port_changed = !self.tables.contains_key(&key.ifindex);
        let table_free =
            !self.free_tables.is_empty() || (self.next_table as usize) < ROUTER_VLAN_PORTS;
        if !slot_free || (port_changed && !table_free) {
            return None;
        }
        let slot = self.free_slots.pop_front().unwrap_or_else(|| {
            self.next_slot += 1;
            ROUTER_IFACES + self.next_slot - 1
        });
        if port_changed {
            let t = self.free_tables.pop_front().unwrap_or_else(|| {
                self.next_table += 1;
                self.next_table
            });
            self.tables.insert(key.ifindex, (t, 0));
        }
        let t = self.tables.get_mut(&key.ifindex).expect("taken above");
        t.1 += 1;
        self.held.insert(*key, slot);
        Some(Place {
            slot,
            table: t.0,
            port_changed,
        })
    }

    /// Lets the key's place go: where it was, if it was held.
    pub fn give_back(&mut self, key: &VlanKey) -> Option<Place> {
        let slot = self.held.remove(key)?;
        self.free_slots.push_back(slot);
        let (table, devices) = self
            .tables
            .get_mut(&key.ifindex)
            .expect("a held key's port");
        let table = *table;
        *devices -= 1;
        let port_changed = *devices == 0;
        if port_changed {
            self.tables.remove(&key.ifindex);
            self.free_tables.push_back(table);
        }
        Some(Place {
            slot,
            table,
            port_changed,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn places_are_kept_and_given_back_last() {
        let mut v = Vlans::default();
        let k = |port: u32, id: u16| VlanKey::new(port, 0x8100, id);
        let a = v.take(&k(100, 10)).unwrap();
        assert_eq!((a.slot, a.table, a.port_changed), (ROUTER_IFACES, 1, true));
        let b = v.take(&k(100, 11)).unwrap();
        assert_eq!(
            (b.slot, b.table, b.port_changed),
            (ROUTER_IFACES + 1, 1, false)
        );
        assert_eq!(
            v.take(&k(100, 10)),
            Some(Place {
                port_changed: false,
                ..a
            }),
            "kept"
        );
        let c = v.take(&k(200, 10)).unwrap();
        assert_eq!((c.table, c.port_changed), (2, true), "another port's table");
        assert_eq!(v.table_of(200), 2);
        assert_eq!(
            v.give_back(&k(100, 10)).map(|p| p.port_changed),
            Some(false)
        );
        let gone = v.give_back(&k(100, 11)).unwrap();
        assert!(gone.port_changed, "the port's last device");
        assert_eq!(v.table_of(100), 0);
        assert_eq!(v.give_back(&k(100, 11)), None, "not held");
        // Free slots and tables are taken again, the first let go first.
        let d = v.take(&k(300, 5)).unwrap();
        assert_eq!((d.slot, d.table), (ROUTER_IFACES, 1));
        for port in 400..400 + ROUTER_VLAN_PORTS as u32 - 2 {
            assert!(v.take(&k(port, 1)).is_some(), "{port}");
        }
        assert_eq!(v.take(&k(1000, 1)), None, "no table left");
        let e = v.take(&k(300, 6)).unwrap();
        assert_eq!((e.table, e.port_changed), (1, false));
    }
}
