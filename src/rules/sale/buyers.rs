//! The buyers of a sale and what LIMIT reads: each buyer's live records
//! form a chain, newest first, linked through the records themselves
//! (`Record::prev_live`, `Record::next_live`) and sharing one interned
//! name; `Buyers` owns the index from a name to its chain's head, the
//! quantity of each chain of 2+ records, and the ordered index of a chain
//! that a retake found long.
//!
//! The records are `Records`' and are passed in: `Buyers` sets their links
//! and shared name, nothing else.

use std::collections::{BTreeSet, HashMap};

use crate::rules::seq_index::SeqIndex;

use super::chunks::Chunked;
use super::records::{Record, Records, NONE};

/// A record coming back into its buyer's chain (RECONCILE retake) walks at
/// most this many records from the head to find its place; past that the
/// buyer gets an ordered index (`Buyers::chain_index`), dropped again once
/// the chain is down to `CHAIN_WALK / 2` records.
pub(super) const CHAIN_WALK: usize = 32;

// Records a retake walked to find its place (tests only).
#[cfg(test)]
thread_local! {
    static WALKED: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

fn walked(_records: usize) {
    #[cfg(test)]
    WALKED.with(|w| w.set(w.get() + _records));
}

/// Records walked by retakes so far on this thread.
#[cfg(test)]
pub(super) fn walked_so_far() -> usize {
    WALKED.with(|w| w.get())
}

#[derive(Clone, Debug)]
pub(super) struct Buyers {
    /// Each buyer's newest live record, keyed by user id.
    heads: SeqIndex,
    /// The live quantity of each buyer with 2+ live records, at the slot
    /// the buyer's newest record names (`Record::next_live`). A free slot
    /// holds the next free one; `free_qty` is the first.
    chain_qty: Chunked<u64>,
    free_qty: u32,
    /// Derived, never persisted, not compared: the live sequence numbers of
    /// each buyer whose chain a retake found long (see `CHAIN_WALK`), keyed
    /// by the user offset its records share (fixed while the chain is not
    /// empty), so a retake finds its place in O(log n). Joins and leaves of
    /// that buyer keep it exact. Empty in a sale without such retakes:
    /// RESERVE and RELEASE then pay one `is_empty`.
    chain_index: HashMap<u32, BTreeSet<u32>>,
}

impl Buyers {
    pub(super) fn new() -> Buyers {
        Buyers { heads: SeqIndex::new(), chain_qty: Chunked::new(), free_qty: NONE, chain_index: HashMap::new() }
    }

    /// Room for `n` buyers: an RDB load never migrates the index.
    pub(super) fn with_capacity(n: usize) -> Buyers {
        Buyers { heads: SeqIndex::with_capacity(n), ..Buyers::new() }
    }

    /// Buyers with a live reservation.
    pub(super) fn len(&self) -> usize {
        self.heads.len()
    }

    /// The buyer's newest live record; `hash` is `records.hash(user)`
    /// (RESERVE makes it once, for this and for `join_hashed`).
    #[inline]
    pub(super) fn head(&self, records: &Records, user: &[u8], hash: u64) -> Option<u32> {
        self.heads.find(hash, |s| records.user_of(s) == user)
    }

    /// Quantity the buyer whose newest live record is `head` holds in live
    /// reservations.
    #[inline]
    pub(super) fn qty(&self, records: &Records, head: u32) -> u64 {
        let r = &records[head];
        if r.prev_live == NONE {
            r.qty()
        } else {
            self.chain_qty[r.next_live as usize]
        }
    }

    /// A `chain_qty` slot holding `qty`.
    fn alloc_qty(&mut self, qty: u64) -> u32 {
        if self.free_qty == NONE {
            self.chain_qty.push(qty);
            return (self.chain_qty.len() - 1) as u32;
        }
        let slot = self.free_qty;
        self.free_qty = self.chain_qty[slot as usize] as u32;
        self.chain_qty[slot as usize] = qty;
        slot
    }

    fn free_qty_slot(&mut self, slot: u32) {
        self.chain_qty[slot as usize] = u64::from(self.free_qty);
        self.free_qty = slot;
    }

    /// Links live record `seq` of `user` into the buyer's chain (newest
    /// first), sharing the buyer's interned name, and counts its quantity.
    pub(super) fn join(&mut self, records: &mut Records, seq: u32, user: &[u8]) {
        self.join_hashed(records, seq, user, records.hash(user));
    }

    /// `join`, with the user's hash (`Records::hash`) already made: a
    /// RESERVE hashed its user to check LIMIT.
    pub(super) fn join_hashed(&mut self, records: &mut Records, seq: u32, user: &[u8], hash: u64) {
        let qty = records[seq].qty();
        let found = {
            let records = &*records;
            // One probe finds the buyer or makes this record the buyer's head.
            self.heads.find_or_insert(hash, seq, |s| records.user_of(s) == user, |s| records.hash(records.user_of(s)))
        };
        let Some(slot) = found else {
            if records[seq].user == NONE {
                let off = records.intern(user);
                records[seq].user = off;
            }
            let r = &mut records[seq];
            (r.prev_live, r.next_live) = (NONE, NONE);
            return;
        };
        let head = *slot;
        if seq > head {
            *slot = seq;
        }
        let sum = self.qty(records, head).saturating_add(qty);
        let qty_slot = match records[head].prev_live {
            NONE => self.alloc_qty(sum),
            _ => {
                let k = records[head].next_live;
                self.chain_qty[k as usize] = sum;
                k
            }
        };
        let off = records[head].user;
        records[seq].user = off;
        if seq > head {
            records[head].next_live = seq;
            records[seq].prev_live = head;
            records[seq].next_live = qty_slot;
        } else {
            // An older record coming back (RECONCILE retake): it goes where
            // its sequence number sorts, so that the head is still the
            // newest after any record leaves (LIMIT replies with the newest
            // live id), and the chain is the one a reload builds.
            records[head].next_live = qty_slot;
            let at = self.newer_live(records, head, seq);
            let older = records[at].prev_live;
            records[seq].prev_live = older;
            records[seq].next_live = at;
            records[at].prev_live = seq;
            if older != NONE {
                records[older].next_live = seq;
            }
        }
        if !self.chain_index.is_empty() {
            if let Some(index) = self.chain_index.get_mut(&off) {
                index.insert(seq);
            }
        }
    }

    /// The oldest live record of the chain headed by `head` that is newer
    /// than `seq` (`seq < head`, not in the chain): where `seq` goes. Walks
    /// at most `CHAIN_WALK` records, or asks the buyer's index; a chain
    /// found longer gets its index, built in one walk (O(n) once, paid for
    /// by the n joins that made the chain since it was last short), and
    /// from then on O(log n).
    fn newer_live(&mut self, records: &Records, head: u32, seq: u32) -> u32 {
        let off = records[head].user;
        let newer = |index: &BTreeSet<u32>| index.range(seq..).next().copied().unwrap_or(head);
        if !self.chain_index.is_empty() {
            if let Some(index) = self.chain_index.get(&off) {
                return newer(index);
            }
        }
        let mut at = head;
        for step in 1..=CHAIN_WALK {
            let older = records[at].prev_live;
            if older == NONE || older < seq {
                walked(step);
                return at;
            }
            at = older;
        }
        let mut seqs = Vec::new();
        let mut at = head;
        while at != NONE {
            seqs.push(at);
            at = records[at].prev_live;
        }
        walked(CHAIN_WALK + seqs.len());
        seqs.reverse();
        let index: BTreeSet<u32> = seqs.into_iter().collect();
        let at = newer(&index);
        self.chain_index.insert(off, index);
        at
    }

    /// Unlinks record `seq`, which stops being live, from its buyer's
    /// chain, in one probe of the buyer index and O(1) otherwise.
    pub(super) fn leave(&mut self, records: &mut Records, seq: u32) {
        let Record { prev_live: older, next_live: newer, user, .. } = records[seq];
        let qty = records[seq].qty();
        if !self.chain_index.is_empty() {
            if let Some(index) = self.chain_index.get_mut(&user) {
                index.remove(&seq);
                if index.len() <= CHAIN_WALK / 2 {
                    self.chain_index.remove(&user);
                }
            }
        }
        let found = {
            let records = &*records;
            let hash = records.hash(records.name(user));
            // The records of a chain share their user's arena offset:
            // comparing offsets finds the buyer without reading names.
            let is_buyer = |s: u32| records[s].user == user;
            if older == NONE && newer == NONE {
                // The buyer's only live record (a head with company has an
                // older record; any other record has a newer one).
                self.heads.remove(hash, is_buyer, |s| records.hash(records.user_of(s)));
                return;
            }
            self.heads.get_mut(hash, is_buyer)
        };
        let Some(slot) = found else {
            // Not reachable while the chains are sound; leave this record
            // unlinked at least.
            let r = &mut records[seq];
            (r.prev_live, r.next_live) = (NONE, NONE);
            return;
        };
        let head = *slot;
        if head == seq {
            *slot = older;
        }
        let (new_head, qty_slot) = if head == seq {
            (older, newer)
        } else {
            records[newer].prev_live = older;
            if older != NONE {
                records[older].next_live = newer;
            }
            (head, records[head].next_live)
        };
        let r = &mut records[seq];
        (r.prev_live, r.next_live) = (NONE, NONE);
        if records[new_head].prev_live == NONE {
            // One record left: its quantity is the buyer's.
            records[new_head].next_live = NONE;
            self.free_qty_slot(qty_slot);
        } else {
            records[new_head].next_live = qty_slot;
            let sum = &mut self.chain_qty[qty_slot as usize];
            *sum = sum.saturating_sub(qty);
        }
    }

    /// RDB load: gives back what `with_capacity` reserved for buyers that
    /// turned out to be released.
    pub(super) fn shrink(&mut self, records: &Records) {
        self.heads.shrink_to_fit(|s| records.hash(records.user_of(s)));
    }

    /// Heap bytes, for MEMORY USAGE.
    pub(super) fn bytes(&self) -> usize {
        self.heads.allocation_size() + self.chain_qty.bytes() + self.chain_index.values().map(|index| 64 + index.len() * 9).sum::<usize>()
    }

    /// The ordered indexes of long chains, keyed by user offset.
    #[cfg(test)]
    pub(super) fn chain_index(&self) -> &HashMap<u32, BTreeSet<u32>> {
        &self.chain_index
    }

    /// The buyer chains against the records: links, order, head, quantity
    /// slots and their free list, and the chain indexes.
    #[cfg(test)]
    pub(super) fn check(&self, records: &Records) -> Result<(), String> {
        // Live records by user, oldest first.
        let mut chains: HashMap<&[u8], Vec<u32>> = HashMap::new();
        for seq in 0..records.len() as u32 {
            let r = &records[seq];
            if r.state().is_live() {
                chains.entry(records.name(r.user)).or_default().push(seq);
            } else if (r.prev_live, r.next_live) != (NONE, NONE) {
                return Err(format!("released record {seq} is still linked"));
            }
        }
        if self.heads.len() != chains.len() {
            return Err(format!("{} buyers indexed, {} hold live records", self.heads.len(), chains.len()));
        }
        let mut used = std::collections::HashSet::new();
        let mut indexed = 0;
        for (user, seqs) in &chains {
            let head = *seqs.last().unwrap_or(&NONE);
            let found = self.head(records, user, records.hash(user));
            if found != Some(head) {
                return Err(format!("buyer {user:?}: head {found:?}, newest live {head}"));
            }
            let off = records[head].user;
            let (mut at, mut newer, mut walked) = (head, NONE, Vec::new());
            while at != NONE && walked.len() <= seqs.len() {
                let r = &records[at];
                if r.user != off || (newer != NONE && r.next_live != newer) {
                    return Err(format!("buyer {user:?}: record {at} has a bad link or name"));
                }
                walked.push(at);
                (newer, at) = (at, r.prev_live);
            }
            walked.reverse();
            if &walked != seqs {
                return Err(format!("buyer {user:?}: chain {walked:?}, live records {seqs:?}"));
            }
            let sum: u64 = seqs.iter().map(|&s| records[s].qty()).sum();
            let h = &records[head];
            match seqs.len() {
                1 if h.next_live != NONE => return Err(format!("buyer {user:?}: lone record with a quantity slot")),
                1 => {}
                _ if self.chain_qty.get(h.next_live as usize) != Some(&sum) || !used.insert(h.next_live) => {
                    return Err(format!("buyer {user:?}: quantity slot {} is not {sum}", h.next_live));
                }
                _ => {}
            }
            if self.qty(records, head) != sum {
                return Err(format!("buyer {user:?}: quantity {} but {sum}", self.qty(records, head)));
            }
            if let Some(index) = self.chain_index.get(&off) {
                indexed += 1;
                if index.len() <= CHAIN_WALK / 2 || !index.iter().eq(seqs.iter()) {
                    return Err(format!("buyer {user:?}: index {index:?}, live records {seqs:?}"));
                }
            }
        }
        if indexed != self.chain_index.len() {
            return Err(format!("{} chain indexes, {indexed} of them for a live chain", self.chain_index.len()));
        }
        let mut free = self.free_qty;
        let mut free_count = 0;
        while free != NONE && free_count <= self.chain_qty.len() {
            if used.contains(&free) {
                return Err(format!("quantity slot {free} is both used and free"));
            }
            free = self.chain_qty[free as usize] as u32;
            free_count += 1;
        }
        if free_count + used.len() != self.chain_qty.len() {
            return Err(format!("{free_count} free and {} used quantity slots of {}", used.len(), self.chain_qty.len()));
        }
        Ok(())
    }
}
