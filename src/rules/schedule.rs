//! When each sale's next hold runs out, across databases: the order in
//! which the expiry timer visits sales.
//!
//! Plain Rust, no FFI. The timer only ever looks at the front, so a sale
//! whose holds are far off costs nothing per tick, however many there are.
//! An entry may be stale (the sale was confirmed, deleted or renamed since):
//! the timer opens the key when the entry comes due, finds out, and
//! schedules the sale again at its real next deadline or drops it. Deadlines
//! only move later on their own (holds are created in deadline order), so a
//! stale entry is early, never late.

use std::collections::{BTreeMap, BTreeSet};

/// A sale's place: a database slot (see `Schedule::dbs`) and its key name.
type Place = (u32, Box<[u8]>);

#[derive(Clone, Debug, Default)]
pub struct Schedule {
    /// (deadline, slot, key), earliest first.
    queue: BTreeSet<(u64, u32, Box<[u8]>)>,
    /// The deadline each place is queued at (one entry per place).
    at: BTreeMap<Place, u64>,
    /// `dbs[slot]` is the Redis database the slot stands for now. SWAPDB
    /// swaps two of them, so it costs nothing however many sales it moves.
    dbs: Vec<i32>,
}

impl Schedule {
    /// `const`, so the module can keep one in a static.
    pub const fn new() -> Schedule {
        Schedule { queue: BTreeSet::new(), at: BTreeMap::new(), dbs: Vec::new() }
    }

    pub fn len(&self) -> usize {
        self.at.len()
    }

    pub fn is_empty(&self) -> bool {
        self.at.is_empty()
    }

    fn slot_of(&mut self, db: i32) -> u32 {
        if let Some(slot) = self.dbs.iter().position(|&d| d == db) {
            return slot as u32;
        }
        self.dbs.push(db);
        (self.dbs.len() - 1) as u32
    }

    /// Queues the sale at `key` in `db` to be visited at `deadline`, or
    /// earlier if it is already queued earlier.
    pub fn schedule(&mut self, db: i32, key: &[u8], deadline: u64) {
        let slot = self.slot_of(db);
        let place: Place = (slot, key.into());
        match self.at.get(&place) {
            Some(&queued) if queued <= deadline => return,
            Some(&queued) => {
                self.queue.remove(&(queued, slot, place.1.clone()));
            }
            None => {}
        }
        self.queue.insert((deadline, slot, place.1.clone()));
        self.at.insert(place, deadline);
    }

    /// The earliest queued deadline.
    pub fn next_deadline(&self) -> Option<u64> {
        self.queue.first().map(|(deadline, _, _)| *deadline)
    }

    /// Takes the earliest entry if it is due at `now_ms`: (db, key).
    pub fn pop_due(&mut self, now_ms: u64) -> Option<(i32, Box<[u8]>)> {
        if self.next_deadline()? > now_ms {
            return None;
        }
        let (_, slot, key) = self.queue.pop_first()?;
        let place = (slot, key);
        self.at.remove(&place);
        Some((self.dbs[slot as usize], place.1))
    }

    /// Drops every queued sale for which `drop(db, key)` is true (the slots
    /// a migration gave to another node). Returns how many were dropped.
    pub fn forget(&mut self, mut drop: impl FnMut(i32, &[u8]) -> bool) -> usize {
        let (queue, dbs) = (&mut self.queue, &self.dbs);
        let before = self.at.len();
        self.at.retain(|(slot, key), deadline| {
            let gone = drop(dbs[*slot as usize], key);
            if gone {
                queue.remove(&(*deadline, *slot, key.clone()));
            }
            !gone
        });
        before - self.at.len()
    }

    /// SWAPDB: what was queued for one database is now the other's.
    pub fn swap_dbs(&mut self, first: i32, second: i32) {
        let a = self.slot_of(first) as usize;
        let b = self.slot_of(second) as usize;
        self.dbs.swap(a, b);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn drain(s: &mut Schedule, now: u64) -> Vec<(i32, Vec<u8>)> {
        std::iter::from_fn(|| s.pop_due(now)).map(|(db, k)| (db, k.into_vec())).collect()
    }

    #[test]
    fn pops_due_entries_in_deadline_order() {
        let mut s = Schedule::default();
        s.schedule(0, b"b", 20);
        s.schedule(0, b"a", 10);
        s.schedule(1, b"a", 30);
        assert_eq!(s.len(), 3);
        assert_eq!(s.next_deadline(), Some(10));
        assert_eq!(drain(&mut s, 5), vec![]);
        assert_eq!(drain(&mut s, 20), vec![(0, b"a".to_vec()), (0, b"b".to_vec())]);
        assert_eq!(drain(&mut s, 100), vec![(1, b"a".to_vec())]);
        assert!(s.is_empty());
    }

    #[test]
    fn one_entry_per_place_at_the_earliest_deadline() {
        let mut s = Schedule::default();
        s.schedule(0, b"k", 50);
        s.schedule(0, b"k", 70);
        assert_eq!(s.next_deadline(), Some(50));
        s.schedule(0, b"k", 10);
        assert_eq!(s.len(), 1);
        assert_eq!(drain(&mut s, 1000), vec![(0, b"k".to_vec())]);
    }

    #[test]
    fn forget_drops_only_the_chosen_entries() {
        let mut s = Schedule::default();
        s.schedule(0, b"gone:1", 10);
        s.schedule(0, b"kept", 20);
        s.schedule(2, b"gone:2", 5);
        s.swap_dbs(0, 2);
        let mut asked = Vec::new();
        let dropped = s.forget(|db, key| {
            asked.push((db, key.to_vec()));
            key.starts_with(b"gone")
        });
        assert_eq!(dropped, 2);
        // Asked with the databases as they are now (after the swap).
        asked.sort();
        assert_eq!(asked, vec![(0, b"gone:2".to_vec()), (2, b"gone:1".to_vec()), (2, b"kept".to_vec())]);
        assert_eq!(s.len(), 1);
        assert_eq!(s.next_deadline(), Some(20));
        assert_eq!(drain(&mut s, 100), vec![(2, b"kept".to_vec())]);
        assert_eq!(s.forget(|_, _| true), 0);
    }

    #[test]
    fn swapdb_moves_entries_without_touching_them() {
        let mut s = Schedule::default();
        s.schedule(0, b"x", 1);
        s.schedule(3, b"y", 2);
        s.swap_dbs(0, 3);
        assert_eq!(drain(&mut s, 10), vec![(3, b"x".to_vec()), (0, b"y".to_vec())]);
        // A database never seen before swaps too.
        s.schedule(0, b"z", 1);
        s.swap_dbs(0, 9);
        assert_eq!(drain(&mut s, 10), vec![(9, b"z".to_vec())]);
        // Scheduling after a swap lands in the right database.
        s.schedule(9, b"w", 1);
        assert_eq!(drain(&mut s, 10), vec![(9, b"w".to_vec())]);
    }
}
