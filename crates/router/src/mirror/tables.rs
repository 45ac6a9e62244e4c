//! Routing tables other than main: the ones the kernel's policy rules
//! look a transit packet up in before or instead of main (`ip rule add iif
//! dut0 lookup 100`: a tenant's table), each with a FIB of its own in a
//! slot of the fast path's arena (linerate_bpf::fib_arena::table_layout).
//!
//! A table gets a slot while a rule walk of one of the router's
//! interfaces lists it (linerate_netlink::policy::Policy::tables), and is
//! filled from the routes the mirror holds for it (the local table's over
//! them, as for main). A table no walk lists any more gives its slot back
//! emptied (its routes removed from its FIB, which writes the arena's
//! entries back to zero), and the slot is taken again only after the grace
//! period of freed FIB groups: a packet that found the old table's root a
//! moment before may still be reading its groups.
use linerate_dataplane::fastpath::FastPath;
use linerate_fib::{Fib, Key, Shape};
use std::collections::BTreeSet;

/// A table with a slot, and its FIB.
pub struct OtherTable<K: Key> {
    pub table: u32,
    pub slot: usize,
    pub fib: Fib<K>,
}

/// A family's tables other than main.
pub struct Others<K: Key> {
    tables: Vec<OtherTable<K>>,
    free: Vec<usize>,
    /// Slots given back, free after the grace period.
    draining: Vec<usize>,
    shape: Shape,
}

impl<K: Key> Others<K> {
    /// None yet; their FIBs take `main`'s levels (`Shape::other_table`).
    pub fn new(main: Shape) -> Self {
        Others {
            tables: Vec::new(),
            // Taken from the end: slot 1 first.
            free: (1..FastPath::TABLE_SLOTS).rev().collect(),
            draining: Vec::new(),
            shape: main.other_table(),
        }
    }

    /// The tables with a slot.
    pub fn tables(&self) -> Vec<u32> {
        self.tables.iter().map(|t| t.table).collect()
    }

    /// Table `table`'s slot, if it has one.
    pub fn slot_of(&self, table: u32) -> Option<usize> {
        self.tables
            .iter()
            .find(|t| t.table == table)
            .map(|t| t.slot)
    }

    pub fn get_mut(&mut self, table: u32) -> Option<&mut OtherTable<K>> {
        self.tables.iter_mut().find(|t| t.table == table)
    }

    pub fn iter(&self) -> impl Iterator<Item = &OtherTable<K>> {
        self.tables.iter()
    }

    /// Makes the tables with a slot `wanted` (as many as there are
    /// slots, in order): those no longer wanted come out, to be emptied
    /// and then given back ([`Others::drain`]); the new ones get an empty
    /// FIB, to be filled. Returns both.
    pub fn place(&mut self, wanted: &BTreeSet<u32>) -> (Vec<OtherTable<K>>, Vec<u32>) {
        let (keep, gone): (Vec<_>, Vec<_>) = std::mem::take(&mut self.tables)
            .into_iter()
            .partition(|t| wanted.contains(&t.table));
        self.tables = keep;
        let mut added = Vec::new();
        for &table in wanted {
            if self.slot_of(table).is_some() {
                continue;
            }
            let Some(slot) = self.free.pop() else { break };
            self.tables.push(OtherTable {
                table,
                slot,
                fib: Fib::new(self.shape),
            });
            added.push(table);
        }
        (gone, added)
    }

    /// A slot whose table came out, its FIB emptied: free again after the
    /// grace period.
    pub fn drain(&mut self, slot: usize) {
        self.draining.push(slot);
    }

    /// The grace period is over: freed groups and slots may be used again.
    pub fn release_quarantine(&mut self) {
        for t in &mut self.tables {
            t.fib.release_quarantine();
        }
        self.free.append(&mut self.draining);
        self.free.sort_by(|a, b| b.cmp(a));
    }

    /// The next-hop ids the tables' FIBs hold.
    pub fn ids(&self) -> impl Iterator<Item = u32> + '_ {
        self.tables.iter().flat_map(|t| t.fib.routes().map(|r| r.2))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Tables take slots in order while there are slots, give them back
    /// when no longer wanted, and a slot given back waits for the grace
    /// period.
    #[test]
    fn tables_take_slots_and_give_them_back_after_the_grace_period() {
        let mut o = Others::<u32>::new(Shape::IPV4);
        let set = |t: &[u32]| t.iter().copied().collect::<BTreeSet<u32>>();
        let (gone, added) = o.place(&set(&[100, 200]));
        assert!(gone.is_empty());
        assert_eq!(added, [100, 200]);
        assert_eq!((o.slot_of(100), o.slot_of(200)), (Some(1), Some(2)));
        assert_eq!(
            o.iter().next().unwrap().fib.shape(),
            Shape::IPV4.other_table()
        );
        // 100 goes; 300 comes: not into 100's slot before the grace period.
        let (gone, added) = o.place(&set(&[200, 300]));
        assert_eq!(
            gone.iter().map(|t| (t.table, t.slot)).collect::<Vec<_>>(),
            [(100, 1)]
        );
        assert_eq!(added, [300]);
        assert_eq!(o.slot_of(300), Some(3));
        o.drain(1);
        assert_eq!(o.place(&set(&[200, 300, 400])).1, [400]);
        assert_eq!(o.slot_of(400), Some(4));
        o.release_quarantine();
        assert_eq!(o.place(&set(&[200, 300, 400, 500])).1, [500]);
        assert_eq!(o.slot_of(500), Some(1));
        // More tables than slots: those past the last slot get none.
        let many: Vec<u32> = (1..=20).collect();
        let (gone, _) = o.place(&set(&many));
        assert_eq!(gone.len(), 4);
        gone.iter().for_each(|t| o.drain(t.slot));
        o.release_quarantine();
        o.place(&set(&many));
        assert_eq!(o.tables().len(), FastPath::TABLE_SLOTS - 1);
        assert!(o.slot_of(20).is_none());
    }
}
