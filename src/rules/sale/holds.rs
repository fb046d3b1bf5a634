//! Holds: pending records whose hold runs out at `created + HOLD`. Records
//! are created in time order and HOLD is fixed per round, so the holds
//! fall due in record order: expiry follows a cursor over the records, not
//! a queue. `Holds` owns the cursor and, per chunk of records, how many of
//! them are holds, so the cursor skips a chunk without any unread.

use super::chunks::CHUNK_BITS;
use super::records::Records;

#[derive(Clone, Debug, Default)]
pub(super) struct Holds {
    /// Per chunk of records: how many of its records are holds (pending,
    /// with a deadline).
    per_chunk: Vec<u32>,
    /// The first hold (the record count when there is none); every change
    /// moves it on, so `next_deadline` reads one record.
    cursor: u32,
}

impl Holds {
    /// The first hold at or after `at`, or the record count. Chunks without
    /// holds are skipped unread, so this reads the records of one chunk at
    /// most (plus one counter per chunk).
    #[inline]
    fn first(&self, records: &Records, mut at: usize) -> usize {
        let len = records.len();
        while at < len {
            let chunk = at >> CHUNK_BITS;
            if self.per_chunk.get(chunk).is_none_or(|&n| n == 0) {
                at = (chunk + 1) << CHUNK_BITS;
            } else if records[at as u32].is_hold() {
                return at;
            } else {
                at += 1;
            }
        }
        len
    }

    /// The earliest hold deadline, if any pending reservation can run out.
    /// The cursor sits on the first hold after every change: one record.
    #[inline]
    pub(super) fn next_deadline(&self, records: &Records, hold_ms: u64) -> Option<u64> {
        let at = self.first(records, self.cursor as usize);
        records.get(at).map(|r| r.created_ms.saturating_add(hold_ms))
    }

    /// Moves the cursor to the first hold; every change calls it last.
    #[inline]
    pub(super) fn advance(&mut self, records: &Records) {
        self.cursor = self.first(records, self.cursor as usize) as u32;
    }

    /// Counts a record that became a hold (+1) or stopped being one (-1).
    #[inline]
    pub(super) fn count(&mut self, seq: u32, becomes: bool) {
        let chunk = seq as usize >> CHUNK_BITS;
        if self.per_chunk.len() <= chunk {
            self.per_chunk.resize(chunk + 1, 0);
        }
        let n = &mut self.per_chunk[chunk];
        *n = if becomes { *n + 1 } else { n.saturating_sub(1) };
    }

    /// Ids of pending reservations whose hold has run out at `now_ms`, at
    /// most `max` of them, in creation order (which is deadline order). The
    /// cost follows the ids returned, not the holds left.
    pub(super) fn due(&self, records: &Records, tag: u32, hold_ms: u64, now_ms: u64, max: usize) -> Vec<Box<[u8]>> {
        let mut due = Vec::new();
        let mut at = self.first(records, self.cursor as usize);
        while due.len() < max && at < records.len() {
            let seq = at as u32;
            if records[seq].created_ms.saturating_add(hold_ms) > now_ms {
                break;
            }
            due.push(records.view(seq, tag, hold_ms).id());
            at = self.first(records, at + 1);
        }
        due
    }

    /// Heap bytes, for MEMORY USAGE.
    pub(super) fn bytes(&self) -> usize {
        self.per_chunk.capacity() * std::mem::size_of::<u32>()
    }

    /// The count of every chunk, and the cursor on the first hold.
    #[cfg(test)]
    pub(super) fn check(&self, records: &Records) -> Result<(), String> {
        for (c, chunk) in records.chunks().iter().enumerate() {
            let n = chunk.iter().filter(|r| r.is_hold()).count() as u32;
            if self.per_chunk.get(c).copied().unwrap_or(0) != n {
                return Err(format!("chunk {c}: hold count {:?}, {n} holds", self.per_chunk.get(c)));
            }
        }
        let len = records.len();
        let first = (0..len).find(|&i| records[i as u32].is_hold()).unwrap_or(len);
        if self.cursor as usize != first {
            return Err(format!("hold cursor {} but the first hold is {first}", self.cursor));
        }
        Ok(())
    }
}
