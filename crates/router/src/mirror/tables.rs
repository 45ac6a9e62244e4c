//! Routing tables other than main: the ones the kernel's policy rules
//! look a transit packet up in before or instead of main (`ip rule add iif
//! dut0 lookup 100`: a tenant's table), each with a FIB of its own in a
//! slot of the fast path's arena (linerate_bpf::fib_arena::table_layout).
//! A table looked up with `suppress_prefixlength N` is a view of its own
//! (main's included): the same routes, those of N bits or fewer that the
//! kernel would refuse as throw routes, so that the walk goes on.
//!
//! A view gets a slot while a rule walk of one of the router's
//! interfaces lists it (linerate_netlink::policy::Policy::tables) or the
//! rule program looks it up, and is filled from the routes the mirror
//! holds for its table (the local table's over them, as for main). A table no walk lists any more gives its slot back
//! emptied (its routes removed from its FIB, which writes the arena's
//! entries back to zero), and the slot is taken again only after the grace
//! period of freed FIB groups: a packet that found the old table's root a
//! moment before may still be reading its groups.
use linerate_dataplane::fastpath::FastPath;
use linerate_fib::{Fib, Key, Shape};
use linerate_netlink::policy::View;

/// A table (a view of one) with a slot, and its FIB.
pub struct OtherTable<K: Key> {
    pub view: View,
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

    /// The views with a slot.
    pub fn views(&self) -> Vec<View> {
        self.tables.iter().map(|t| t.view).collect()
    }

    /// View `view`'s slot, if it has one.
    pub fn slot_of(&self, view: View) -> Option<usize> {
        self.tables.iter().find(|t| t.view == view).map(|t| t.slot)
    }

    pub fn get_mut(&mut self, view: View) -> Option<&mut OtherTable<K>> {
        self.tables.iter_mut().find(|t| t.view == view)
    }

    pub fn iter(&self) -> impl Iterator<Item = &OtherTable<K>> {
        self.tables.iter()
    }

    /// Makes the views with a slot `wanted` (as many as there are
    /// slots, in order): those no longer wanted come out, to be emptied
    /// and then given back ([`Others::drain`]); the new ones get an empty
    /// FIB, to be filled. Returns both.
    pub fn place(&mut self, wanted: &[View]) -> (Vec<OtherTable<K>>, Vec<View>) {
        let (keep, gone): (Vec<_>, Vec<_>) = std::mem::take(&mut self.tables)
            .into_iter()
            .partition(|t| wanted.contains(&t.view));
        self.tables = keep;
        let mut added = Vec::new();
        for &view in wanted {
            if self.slot_of(view).is_some() {
                continue;
            }
            let Some(slot) = self.free.pop() else { break };
            self.tables.push(OtherTable {
                view,
                slot,
                fib: Fib::new(self.shape),
            });
            added.push(view);
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
        let set = |t: &[u32]| t.iter().map(|&t| View::table(t)).collect::<Vec<View>>();
        let v = View::table;
        let (gone, added) = o.place(&set(&[100, 200]));
        assert!(gone.is_empty());
        assert_eq!(added, [v(100), v(200)]);
        assert_eq!((o.slot_of(v(100)), o.slot_of(v(200))), (Some(1), Some(2)));
        assert_eq!(
            o.iter().next().unwrap().fib.shape(),
            Shape::IPV4.other_table()
        );
        // 100 goes; 300 comes: not into 100's slot before the grace period.
        let (gone, added) = o.place(&set(&[200, 300]));
        assert_eq!(
            gone.iter().map(|t| (t.view, t.slot)).collect::<Vec<_>>(),
            [(v(100), 1)]
        );
        assert_eq!(added, [v(300)]);
        assert_eq!(o.slot_of(v(300)), Some(3));
        o.drain(1);
        assert_eq!(o.place(&set(&[200, 300, 400])).1, [v(400)]);
        assert_eq!(o.slot_of(v(400)), Some(4));
        o.release_quarantine();
        assert_eq!(o.place(&set(&[200, 300, 400, 500])).1, [v(500)]);
        assert_eq!(o.slot_of(v(500)), Some(1));
        // More tables than slots: those past the last slot get none.
        let many: Vec<u32> = (1..=20).collect();
        let (gone, _) = o.place(&set(&many));
        assert_eq!(gone.len(), 4);
        gone.iter().for_each(|t| o.drain(t.slot));
        o.release_quarantine();
        o.place(&set(&many));
        assert_eq!(o.views().len(), FastPath::TABLE_SLOTS - 1);
        assert!(o.slot_of(v(20)).is_none());
    }
}
