//! Ids of fast-path table entries (next hops, ECMP groups) that can be
//! handed out again: a freed id waits out a grace period first, since a
//! packet that read it from the FIB a moment ago may still be using it.

#[derive(Debug)]
pub struct IdPool {
    next: u32,
    limit: u32,
    free: Vec<u32>,
    quarantined: Vec<u32>,
}

impl IdPool {
    /// Ids `first..limit`.
    pub fn new(first: u32, limit: u32) -> Self {
        IdPool {
            next: first,
            limit,
            free: Vec::new(),
            quarantined: Vec::new(),
        }
    }

    /// A free id, or None when all are taken or waiting.
    pub fn take(&mut self) -> Option<u32> {
        self.free.pop().or_else(|| {
            (self.next < self.limit).then(|| {
                self.next += 1;
                self.next - 1
            })
        })
    }

    /// Gives `id` back; it is handed out again after `release`.
    pub fn retire(&mut self, id: u32) {
        self.quarantined.push(id);
    }

    /// Ends the grace period of the ids retired so far; true if there were
    /// any.
    pub fn release(&mut self) -> bool {
        let any = !self.quarantined.is_empty();
        self.free.append(&mut self.quarantined);
        any
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_come_back_only_after_release() {
        let mut p = IdPool::new(2, 5);
        assert_eq!(
            (p.take(), p.take(), p.take(), p.take()),
            (Some(2), Some(3), Some(4), None)
        );
        p.retire(3);
        assert_eq!(p.take(), None, "still in its grace period");
        assert!(p.release());
        assert_eq!((p.take(), p.take()), (Some(3), None));
        assert!(!p.release());
    }
}
