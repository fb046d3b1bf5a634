//! A hash index of `u32` sequence numbers that never stops the server to grow.
//!
//! A sale indexes its buyers (and its client ids) by sequence number only:
//! the keys live in the sale's records and arena. A general hash table
//! rehashes every entry when it doubles; at millions of buyers that is one
//! RESERVE taking hundreds of milliseconds, on the master and on every
//! replica applying the same effect. Here growth is incremental, as in
//! Redis's own dict: the doubled table is allocated beside the old one, and
//! every insert and remove moves a bounded number of old slots into it.
//! Lookups read both tables while the old one drains.
//!
//! Layout: open addressing with linear probing, a byte of tag per slot (the
//! top 7 bits of the hash, so a probe rarely reads a record: records and
//! arena bytes are cache misses) beside the `u32` slots. An all-zero table is
//! empty. Redis's allocator (as the module registers it) has no zeroed
//! allocation: `vec![0; n]` is a plain allocation and a memset of every
//! byte, so the next table is zeroed a step at a time in the last inserts
//! before it is needed, and the growth itself only swaps tables. The live
//! table deletes by backward shift and never holds tombstones; the draining
//! table takes no inserts, so its deletions (and its migrated slots) are
//! tombstones.
//!
//! The index stores no keys: callers pass the key's `hash`, an `eq(seq)`
//! that compares a stored sequence number's key with the one looked up, and
//! a `rehash(seq)` that recomputes a stored sequence number's hash (for
//! migration and backward shifts).

use std::mem;

/// A slot never used since the table was made: probes stop here.
const EMPTY: u8 = 0;
/// A deleted or migrated slot of the draining table: probes go on.
const TOMB: u8 = 1;
/// Tags of occupied slots have this bit set.
const FULL: u8 = 0x80;

/// The smallest table, once anything is inserted.
const MIN_SLOTS: usize = 8;
/// Old slots moved per insert or remove while a growth is under way. Any
/// value >= 2 drains the old table before the new one can fill (see
/// `reserve_one`); 32 keeps the extra work per call to a few microseconds
/// and the migration window to 1/28 of the inserts that fill a table.
const MIGRATE_SLOTS: usize = 32;
/// Slots of the next table zeroed per insert once a growth is near (2.5 KiB
/// of memory): preparing `2c` slots takes `c / 256` inserts, and it starts
/// `c / 128` inserts before the growth.
const PREPARE_SLOTS: usize = 512;

fn tag(hash: u64) -> u8 {
    FULL | (hash >> 57) as u8
}

/// Entries a table of `slots` slots may hold: 7/8, so a live table always
/// keeps an empty slot (probes end) and clusters stay short.
fn max_len(slots: usize) -> usize {
    slots - slots / 8
}

/// The table size for `n` entries, with room for `n / 32` more so that the
/// next growth is not near (a table sized for a load, or shrunk after one,
/// has time to prepare its successor).
fn slots_for(n: usize) -> usize {
    let n = n.saturating_add(n / 32);
    let mut slots = MIN_SLOTS;
    while max_len(slots) < n {
        slots *= 2;
    }
    slots
}

#[derive(Clone, Debug, Default)]
struct Table {
    tags: Vec<u8>,
    slots: Vec<u32>,
    /// Occupied slots.
    len: usize,
}

impl Table {
    fn with_slots(n: usize) -> Table {
        Table { tags: vec![EMPTY; n], slots: vec![0; n], len: 0 }
    }

    fn cap(&self) -> usize {
        self.tags.len()
    }

    fn mask(&self) -> usize {
        self.cap().wrapping_sub(1)
    }

    /// `Ok(slot)` of the entry `eq` accepts, or `Err(slot)` of the empty
    /// slot that ends the probe (where the key would go). The probe is
    /// bounded by the table size: every table keeps an empty slot, the bound
    /// only makes termination evident. `Err(cap)` on a full or empty table.
    fn probe(&self, hash: u64, mut eq: impl FnMut(u32) -> bool) -> Result<usize, usize> {
        let (mask, t) = (self.mask(), tag(hash));
        let mut i = hash as usize & mask;
        for _ in 0..self.cap() {
            match self.tags[i] {
                EMPTY => return Err(i),
                x if x == t && eq(self.slots[i]) => return Ok(i),
                _ => i = (i + 1) & mask,
            }
        }
        Err(self.cap())
    }

    fn find(&self, hash: u64, eq: impl FnMut(u32) -> bool) -> Option<usize> {
        if self.len == 0 {
            return None;
        }
        self.probe(hash, eq).ok()
    }

    fn put(&mut self, i: usize, hash: u64, seq: u32) {
        self.tags[i] = tag(hash);
        self.slots[i] = seq;
        self.len += 1;
    }

    /// Inserts a key known to be absent (the table has room).
    fn insert_new(&mut self, hash: u64, seq: u32) {
        if let Err(i) = self.probe(hash, |_| false) {
            if i < self.cap() {
                self.put(i, hash, seq);
            }
        }
    }

    /// Deletes slot `hole` of the live table by backward shift: each later
    /// entry of the cluster that may sit earlier (its home is not between
    /// the hole and itself) moves into the hole, so no tombstone is left
    /// and probes stay as short as if the entry had never been there.
    fn remove_shift(&mut self, mut hole: usize, mut rehash: impl FnMut(u32) -> u64) {
        let mask = self.mask();
        let mut j = hole;
        for _ in 0..self.cap() {
            j = (j + 1) & mask;
            if self.tags[j] == EMPTY {
                break;
            }
            let home = rehash(self.slots[j]) as usize & mask;
            if j.wrapping_sub(home) & mask >= j.wrapping_sub(hole) & mask {
                self.tags[hole] = self.tags[j];
                self.slots[hole] = self.slots[j];
                hole = j;
            }
        }
        self.tags[hole] = EMPTY;
        self.len -= 1;
    }

    fn bytes(&self) -> usize {
        self.tags.capacity() + self.slots.capacity() * mem::size_of::<u32>()
    }

    /// Zeroes up to `n` more slots of a table being prepared to hold
    /// `slots`; true when it is complete.
    fn prepare(&mut self, slots: usize, n: usize) -> bool {
        if self.tags.capacity() < slots {
            self.tags.reserve_exact(slots - self.tags.len());
            self.slots.reserve_exact(slots - self.slots.len());
        }
        let to = slots.min(self.tags.len().saturating_add(n));
        self.tags.resize(to, EMPTY);
        self.slots.resize(to, 0);
        to == slots
    }
}

#[derive(Clone, Debug)]
pub struct SeqIndex {
    /// Takes every insert.
    live: Table,
    /// The table being drained into `live` (no slots when none is).
    old: Table,
    /// The next live table, zeroed up to its length (none until a growth
    /// is near).
    next: Table,
    /// Slots of `old` before this one have been migrated.
    cursor: usize,
    /// Old slots moved per insert or remove (`MIGRATE_SLOTS`; tests use
    /// fewer to catch operations in the middle of a migration).
    step: usize,
}

impl Default for SeqIndex {
    fn default() -> SeqIndex {
        SeqIndex::new()
    }
}

impl SeqIndex {
    /// An empty index; allocates on the first insert.
    pub fn new() -> SeqIndex {
        SeqIndex { live: Table::default(), old: Table::default(), next: Table::default(), cursor: 0, step: MIGRATE_SLOTS }
    }

    /// Room for `n` entries without any growth (RDB load: a load never
    /// migrates).
    pub fn with_capacity(n: usize) -> SeqIndex {
        let live = if n == 0 { Table::default() } else { Table::with_slots(slots_for(n)) };
        SeqIndex { live, ..SeqIndex::new() }
    }

    pub fn len(&self) -> usize {
        self.live.len + self.old.len
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Heap bytes, for MEMORY USAGE.
    pub fn allocation_size(&self) -> usize {
        self.live.bytes() + self.old.bytes() + self.next.bytes()
    }

    /// The stored sequence number `eq` accepts.
    pub fn find(&self, hash: u64, mut eq: impl FnMut(u32) -> bool) -> Option<u32> {
        if let Some(i) = self.live.find(hash, &mut eq) {
            return Some(self.live.slots[i]);
        }
        self.old.find(hash, eq).map(|i| self.old.slots[i])
    }

    /// The stored sequence number `eq` accepts, to replace in place (the
    /// key of the new value must be the same, its hash unchanged).
    pub fn get_mut(&mut self, hash: u64, mut eq: impl FnMut(u32) -> bool) -> Option<&mut u32> {
        if let Some(i) = self.live.find(hash, &mut eq) {
            return Some(&mut self.live.slots[i]);
        }
        self.old.find(hash, eq).map(|i| &mut self.old.slots[i])
    }

    /// One probe path: the stored entry `eq` accepts (`Some`, to read or
    /// replace), or else `seq` is inserted under `hash` (`None`).
    pub fn find_or_insert(
        &mut self,
        hash: u64,
        seq: u32,
        mut eq: impl FnMut(u32) -> bool,
        mut rehash: impl FnMut(u32) -> u64,
    ) -> Option<&mut u32> {
        self.reserve_one(&mut rehash);
        self.migrate(&mut rehash);
        let vacant = match self.live.probe(hash, &mut eq) {
            Ok(i) => return Some(&mut self.live.slots[i]),
            Err(i) => i,
        };
        if let Some(i) = self.old.find(hash, eq) {
            return Some(&mut self.old.slots[i]);
        }
        if vacant < self.live.cap() {
            self.live.put(vacant, hash, seq);
        }
        None
    }

    /// Inserts `seq` under `hash`; the caller knows its key is absent.
    pub fn insert_unique(&mut self, hash: u64, seq: u32, mut rehash: impl FnMut(u32) -> u64) {
        self.reserve_one(&mut rehash);
        self.migrate(&mut rehash);
        self.live.insert_new(hash, seq);
    }

    /// Removes the entry `eq` accepts; returns its sequence number.
    pub fn remove(&mut self, hash: u64, mut eq: impl FnMut(u32) -> bool, mut rehash: impl FnMut(u32) -> u64) -> Option<u32> {
        self.migrate(&mut rehash);
        if let Some(i) = self.live.find(hash, &mut eq) {
            let seq = self.live.slots[i];
            self.live.remove_shift(i, rehash);
            return Some(seq);
        }
        let i = self.old.find(hash, eq)?;
        self.old.tags[i] = TOMB;
        self.old.len -= 1;
        let seq = self.old.slots[i];
        self.drop_drained();
        Some(seq)
    }

    /// Gives back memory beyond what the entries need, in one rebuild. Only
    /// RDB load calls it (after `with_capacity` sized the index for records
    /// that turned out not to be live): a load is not a command, and it has
    /// just done work of the same size (a zeroed table included), so the
    /// rebuild adds no stall of its own kind. Commands never shrink the
    /// index.
    pub fn shrink_to_fit(&mut self, mut rehash: impl FnMut(u32) -> u64) {
        let n = self.len();
        if n == 0 {
            *self = SeqIndex { step: self.step, ..SeqIndex::new() };
            return;
        }
        if slots_for(n) >= self.live.cap() && self.old.len == 0 {
            self.next = Table::default();
            return;
        }
        let mut fresh = Table::with_slots(slots_for(n));
        for t in [&self.live, &self.old] {
            for (&g, &seq) in t.tags.iter().zip(&t.slots) {
                if g & FULL != 0 {
                    fresh.insert_new(rehash(seq), seq);
                }
            }
        }
        *self = SeqIndex { live: fresh, step: self.step, ..SeqIndex::new() };
    }

    /// Makes room for one more entry: when the live table is full, it
    /// becomes the draining table and the prepared table, twice its size,
    /// takes over.
    ///
    /// A growth starts at `max_len(c)` entries with a new table of `2c`
    /// slots, the next one at `max_len(2c)`: at least `max_len(c) >= c / 2`
    /// inserts later, which migrate `step` slots each, so with `step >= 2`
    /// the `c` old slots are drained first. Likewise the `c / 128` inserts
    /// before a growth prepare its table. The full drain and preparation
    /// below are for a smaller `step` (tests) and tiny tables, and cost
    /// nothing otherwise.
    fn reserve_one(&mut self, rehash: &mut impl FnMut(u32) -> u64) {
        let (cap, len) = (self.live.cap(), self.len());
        let slots = (cap * 2).max(MIN_SLOTS);
        if len.saturating_add(cap / 128) >= max_len(cap) {
            self.next.prepare(slots, PREPARE_SLOTS);
        }
        if len < max_len(cap) {
            return;
        }
        while self.old.len > 0 {
            self.migrate_slots(usize::MAX, rehash);
        }
        self.next.prepare(slots, usize::MAX);
        let next = mem::take(&mut self.next);
        self.old = mem::replace(&mut self.live, next);
        self.cursor = 0;
        self.drop_drained();
    }

    fn migrate(&mut self, rehash: &mut impl FnMut(u32) -> u64) {
        if self.old.len > 0 {
            self.migrate_slots(self.step, rehash);
        }
    }

    /// Moves the entries of the next `n` old slots into the live table.
    fn migrate_slots(&mut self, n: usize, rehash: &mut impl FnMut(u32) -> u64) {
        let end = self.cursor.saturating_add(n).min(self.old.cap());
        for i in self.cursor..end {
            if self.old.tags[i] & FULL != 0 {
                let seq = self.old.slots[i];
                self.old.tags[i] = TOMB;
                self.old.len -= 1;
                self.live.insert_new(rehash(seq), seq);
            }
        }
        self.cursor = end;
        self.drop_drained();
    }

    /// Frees the draining table once nothing is left in it.
    fn drop_drained(&mut self) {
        if self.old.len == 0 && self.old.cap() > 0 {
            self.old = Table::default();
            self.cursor = 0;
        }
    }
}

#[cfg(test)]
impl SeqIndex {
    fn with_step(step: usize) -> SeqIndex {
        SeqIndex { step, ..SeqIndex::new() }
    }

    fn migrating(&self) -> bool {
        self.old.cap() > 0
    }

    /// The structure's own rules: counts, an empty slot in the live table,
    /// no tombstone there, every entry reachable from its home, no entry in
    /// both tables.
    fn check(&self, rehash: impl Fn(u32) -> u64) -> Result<(), String> {
        for (name, t) in [("live", &self.live), ("old", &self.old)] {
            let full = t.tags.iter().filter(|&&g| g & FULL != 0).count();
            if full != t.len {
                return Err(format!("{name}: {full} full slots but len {}", t.len));
            }
            if t.tags.len() != t.slots.len() || (t.cap() > 0 && !t.cap().is_power_of_two()) {
                return Err(format!("{name}: bad size"));
            }
            for (i, (&g, &seq)) in t.tags.iter().zip(&t.slots).enumerate() {
                if g & FULL == 0 {
                    continue;
                }
                let h = rehash(seq);
                if g != tag(h) {
                    return Err(format!("{name}: slot {i} tag differs from its hash"));
                }
                let mut at = h as usize & t.mask();
                while at != i {
                    if t.tags[at] == EMPTY {
                        return Err(format!("{name}: slot {i} is cut off from its home"));
                    }
                    at = (at + 1) & t.mask();
                }
            }
        }
        if self.live.cap() > 0 && !self.live.tags.contains(&EMPTY) {
            return Err("live table has no empty slot".into());
        }
        if self.live.tags.contains(&TOMB) {
            return Err("tombstone in the live table".into());
        }
        if self.old.cap() > 0 && (self.old.len == 0 || self.old.cap() * 2 != self.live.cap()) {
            return Err("draining table is empty or not half the live one".into());
        }
        if self.next.tags.iter().any(|&g| g != EMPTY) || self.next.len != 0 || self.next.cap() != self.next.slots.len() {
            return Err("the table being prepared is not empty".into());
        }
        if self.old.tags[..self.cursor.min(self.old.cap())].iter().any(|&g| g & FULL != 0) {
            return Err("an entry behind the migration cursor".into());
        }
        Ok(())
    }
}

#[cfg(test)]
#[path = "tests/seq_index.rs"]
mod tests;
