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
//! holds for its table (the local table's over them, as for main). A view
//! no rule looks up any more keeps its slot, idle, its FIB still following
//! its table: a rule deleted and added again (a flapping session, an
//! operator's undo) finds it ready. An idle view gives its slot back only
//! when a view that is looked up needs one: emptied (its routes removed
//! from its FIB, which writes the arena's entries back to zero), the slot
//! is taken again only after the grace period of freed FIB groups, as a
//! packet that found the old table's root a moment before may still be
//! reading its groups.
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

    /// Gives the views `wanted` (in order) slots while there are slots:
    /// those placed already keep theirs, those no longer wanted stay
    /// placed, idle, until a wanted view needs their slot. Returns the
    /// views that come out for that (to be emptied and then given back,
    /// [`Others::drain`]: the view that needed the slot gets it after the
    /// grace period) and those that got a slot (an empty FIB, to be
    /// filled).
    pub fn place(&mut self, wanted: &[View]) -> (Vec<OtherTable<K>>, Vec<View>) {
        let (mut gone, mut added) = (Vec::new(), Vec::new());
        for &view in wanted {
            if self.slot_of(view).is_some() {
                continue;
            }
            if let Some(slot) = self.free.pop() {
                self.tables.push(OtherTable {
                    view,
                    slot,
                    fib: Fib::new(self.shape),
                });
                added.push(view);
            } else if let Some(i) = self.tables.iter().position(|t| !wanted.contains(&t.view)) {
                gone.push(self.tables.remove(i));
            } else {
                break;
            }
        }
        (gone, added)
    }

    /// Whether slots are waiting for the grace period.
    pub fn draining(&self) -> bool {
        !self.draining.is_empty()
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

    /// Views take slots in order while there are slots; one no longer
    /// wanted stays placed until a wanted one needs its slot, which it
    /// gets after the grace period.
    #[test]
    fn tables_take_slots_and_give_them_back_when_others_need_them() {
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
        // 100 no longer wanted: it stays, idle, and comes back as it was.
        let (gone, added) = o.place(&set(&[200, 300]));
        assert!(gone.is_empty());
        assert_eq!(added, [v(300)]);
        assert_eq!(o.slot_of(v(100)), Some(1));
        let (gone, added) = o.place(&set(&[100, 200, 300]));
        assert!(gone.is_empty() && added.is_empty());
        // A suppressed view is a table of its own.
        let main0 = View {
            table: 254,
            suppress_len: Some(0),
            ..View::MAIN
        };
        assert_eq!(o.place(&[main0]).1, [main0]);
        // Every slot taken: a new view takes an idle one's, after the
        // grace period.
        let many: Vec<u32> = (1..=20).collect();
        let (gone, added) = o.place(&set(&many));
        assert_eq!(added, [v(1), v(2)]);
        assert_eq!(gone.len(), 4, "the idle views out, for 3 to 6");
        gone.iter().for_each(|t| o.drain(t.slot));
        o.release_quarantine();
        let (gone, added) = o.place(&set(&many));
        assert!(gone.is_empty(), "none idle");
        assert_eq!(added, [v(3), v(4), v(5), v(6)]);
        assert_eq!(o.views().len(), FastPath::TABLE_SLOTS - 1);
        let (gone, added) = o.place(&set(&[1, 2, 7]));
        assert!(added.is_empty());
        assert_eq!(gone.len(), 1, "one idle view out, for 7");
        assert!(o.slot_of(v(7)).is_none());
        gone.iter().for_each(|t| o.drain(t.slot));
        assert!(o.draining());
        assert!(
            o.place(&set(&[1, 2, 7])).1.is_empty(),
            "not before the grace period"
        );
        o.release_quarantine();
        assert!(!o.draining());
        assert_eq!(o.place(&set(&[1, 2, 7])).1, [v(7)]);
    }
}
