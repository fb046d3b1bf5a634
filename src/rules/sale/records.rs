//! A sale's reservations as stored: one packed 32-byte `Record` each, in
//! creation order (a record's place is its sequence number), the names
//! and client ids they point to, the index of client ids, the takes of
//! records that borrowed from several buckets, and the units per state.
//! `RecordView` reads one back.
//!
//! `Records` owns what a record is; a record's links to the other live
//! records of its buyer (`prev_live`, `next_live`) and the name it shares
//! with them are `Buyers`' to set, and `Holds` reads its state and deadline
//! flag.

use std::collections::HashMap;
use std::hash::BuildHasher;
use std::ops::{Index, IndexMut};

use hashbrown::DefaultHashBuilder;

use crate::rules::buckets::Take;
use crate::rules::config::{MAX_SHARDS, MAX_TIME_MS, MAX_TOTAL};
use crate::rules::digits::Digits;
use crate::rules::outcome::EffectError;
use crate::rules::reservation::{valid_id, NewRecord, Reservation, State};
use crate::rules::seq_index::SeqIndex;

use super::chunks::{Arena, Chunked};
use super::ids::{mac_matches, parse_generated, parse_shape, write_generated, IdKey};

/// Units per reservation state, kept up to date by every change.
/// `released` counts units in released reservations (hold expiry included);
/// a RECONCILE APPLY that retakes one moves its units to `confirmed`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Tally {
    pub pending: u64,
    pub confirmed: u64,
    pub released: u64,
    pub expired: u64,
}

impl Tally {
    /// Counts `qty` units in `state`. Live units never exceed `MAX_TOTAL`;
    /// released ones may add up past 64 bits over a long sale, so they
    /// saturate.
    #[inline]
    fn add(&mut self, state: State, qty: u64) {
        match state {
            State::Pending => self.pending += qty,
            State::Confirmed => self.confirmed += qty,
            State::Released => self.released = self.released.saturating_add(qty),
            State::Expired => {
                self.released = self.released.saturating_add(qty);
                self.expired = self.expired.saturating_add(qty);
            }
        }
    }

    /// Stops counting `qty` units in `state`.
    fn remove(&mut self, state: State, qty: u64) {
        match state {
            State::Pending => self.pending -= qty,
            State::Confirmed => self.confirmed -= qty,
            State::Released => self.released -= qty,
            State::Expired => {
                self.released -= qty;
                self.expired -= qty;
            }
        }
    }
}

/// No record: the end of a buyer's chain. No sequence number is `NONE`.
pub(super) const NONE: u32 = u32::MAX;
const _: () = assert!(NONE == super::ids::NO_SEQ);
/// `Record::id` of a generated id (`ids.rs`).
const GENERATED: u32 = u32::MAX;

// `Record::meta`: quantity, bucket, state and deadline flag in one word, so
// that both chain links fit in 32 bytes.
const QTY_MASK: u64 = (1 << 50) - 1;
const BUCKET_SHIFT: u32 = 50;
const BUCKET_MASK: u64 = 0x7ff;
const STATE_SHIFT: u32 = 61;
const DEADLINE_BIT: u64 = 1 << 63;
/// `Record::bucket` when the stock came from several buckets.
const MULTI: u16 = BUCKET_MASK as u16;
const _: () = assert!(MAX_TOTAL <= QTY_MASK && (MAX_SHARDS as u64) < BUCKET_MASK);
const _: () = assert!(std::mem::size_of::<Record>() == 32);

/// One reservation, 32 bytes.
#[derive(Clone, Copy, Debug)]
pub(super) struct Record {
    /// Quantity (50 bits: `MAX_TOTAL` fits), the one bucket the stock came
    /// from or `MULTI` (11 bits, see `Records::multi_takes`), state (2
    /// bits), and whether the hold runs out (at `created_ms + hold_ms`).
    meta: u64,
    pub(super) created_ms: u64,
    /// Arena offset of the user id; shared by the records of a buyer's chain.
    pub(super) user: u32,
    /// Arena offset of the client id, or `GENERATED`.
    id: u32,
    /// The buyer's previous (older) live record, or `NONE`. Live records
    /// form a chain per buyer, newest first.
    pub(super) prev_live: u32,
    /// The buyer's next (newer) live record. The newest has none: there it
    /// is the buyer's slot in `Buyers::chain_qty` when the chain has 2+
    /// records, `NONE` otherwise (the buyer's quantity is its own).
    pub(super) next_live: u32,
}

impl Record {
    fn new(qty: u64, bucket: u16, state: State, has_deadline: bool, created_ms: u64, id: u32) -> Record {
        let mut r = Record { meta: qty & QTY_MASK, created_ms, user: NONE, id, prev_live: NONE, next_live: NONE };
        r.set_bucket(bucket);
        r.set_state(state);
        if has_deadline {
            r.meta |= DEADLINE_BIT;
        }
        r
    }

    #[inline]
    pub(super) fn qty(&self) -> u64 {
        self.meta & QTY_MASK
    }

    #[inline]
    fn bucket(&self) -> u16 {
        ((self.meta >> BUCKET_SHIFT) & BUCKET_MASK) as u16
    }

    #[inline]
    fn set_bucket(&mut self, bucket: u16) {
        self.meta = (self.meta & !(BUCKET_MASK << BUCKET_SHIFT)) | ((u64::from(bucket) & BUCKET_MASK) << BUCKET_SHIFT);
    }

    #[inline]
    pub(super) fn state(&self) -> State {
        match (self.meta >> STATE_SHIFT) & 3 {
            0 => State::Pending,
            1 => State::Confirmed,
            2 => State::Released,
            _ => State::Expired,
        }
    }

    #[inline]
    fn set_state(&mut self, state: State) {
        self.meta = (self.meta & !(3 << STATE_SHIFT)) | (u64::from(state.code() & 3) << STATE_SHIFT);
    }

    #[inline]
    pub(super) fn has_deadline(&self) -> bool {
        self.meta & DEADLINE_BIT != 0
    }

    /// A pending record whose hold can run out.
    #[inline]
    pub(super) fn is_hold(&self) -> bool {
        self.has_deadline() && self.state() == State::Pending
    }
}

#[derive(Clone, Debug)]
pub(super) struct Records {
    /// In creation order; a reservation's index is its sequence number.
    list: Chunked<Record>,
    arena: Arena,
    /// Sequence numbers of records with a client id, keyed by that id.
    client_ids: SeqIndex,
    /// Takes of live records that borrowed from several buckets.
    multi_takes: HashMap<u32, Box<[Take]>>,
    tally: Tally,
    /// Per process, never persisted: keyed against crafted collisions.
    /// `Buyers` hashes user names with it too.
    hasher: DefaultHashBuilder,
    /// The sale's id key (`SaleConfig::id_key`): generated ids carry a mac
    /// under it. `None`: the keyless form of older sales.
    id_key: Option<IdKey>,
}

impl Index<u32> for Records {
    type Output = Record;

    #[inline]
    fn index(&self, seq: u32) -> &Record {
        &self.list[seq as usize]
    }
}

impl IndexMut<u32> for Records {
    #[inline]
    fn index_mut(&mut self, seq: u32) -> &mut Record {
        &mut self.list[seq as usize]
    }
}

impl Records {
    pub(super) fn new(id_key: Option<IdKey>) -> Records {
        Records {
            id_key,
            list: Chunked::new(),
            arena: Arena::default(),
            client_ids: SeqIndex::new(),
            multi_takes: HashMap::new(),
            tally: Tally::default(),
            hasher: DefaultHashBuilder::default(),
        }
    }

    /// Room for `records` records (RDB load).
    pub(super) fn with_capacity(records: usize, id_key: Option<IdKey>) -> Records {
        let mut r = Records::new(id_key);
        r.list.reserve_first(records);
        // A short user id takes about ten arena bytes.
        r.arena.reserve_first(records.saturating_mul(10));
        r
    }

    #[inline]
    pub(super) fn len(&self) -> usize {
        self.list.len()
    }

    #[inline]
    pub(super) fn get(&self, seq: usize) -> Option<&Record> {
        self.list.get(seq)
    }

    #[inline]
    pub(super) fn tally(&self) -> Tally {
        self.tally
    }

    /// The creation time for a record made at `now_ms`: never before the
    /// previous record's, so creation order is deadline order even when the
    /// server clock steps back (and expiry can follow a cursor).
    #[inline]
    pub(super) fn stamp(&self, now_ms: u64) -> u64 {
        self.list.last().map_or(now_ms, |r| now_ms.max(r.created_ms))
    }

    #[inline]
    pub(super) fn hash(&self, bytes: &[u8]) -> u64 {
        self.hasher.hash_one(bytes)
    }

    /// The name stored at arena offset `off`.
    #[inline]
    pub(super) fn name(&self, off: u32) -> &[u8] {
        self.arena.get(off)
    }

    /// The user id of record `seq`.
    #[inline]
    pub(super) fn user_of(&self, seq: u32) -> &[u8] {
        self.arena.get(self[seq].user)
    }

    /// Stores a name (1 to 256 bytes) and returns its arena offset.
    #[inline]
    pub(super) fn intern(&mut self, bytes: &[u8]) -> u32 {
        self.arena.intern(bytes)
    }

    /// Whether `entries` more names fit (see `Arena::has_room`).
    #[inline]
    pub(super) fn has_room(&self, entries: usize) -> bool {
        self.arena.has_room(entries)
    }

    /// The record whose id is `id`, generated or a client's.
    #[inline]
    pub(super) fn find(&self, id: &[u8], tag: u32) -> Option<u32> {
        // (The mac is checked only when record n exists: the id a RESERVE
        // just made, looked up before it is stored, costs no mac.)
        let key = self.id_key.as_ref();
        if let Some((n, mac)) = parse_shape(id, tag, key) {
            if self.list.get(n as usize).is_some_and(|r| r.id == GENERATED) && mac_matches(key, tag, n, mac) {
                return Some(n);
            }
        }
        if self.client_ids.is_empty() {
            return None;
        }
        let (list, arena) = (&self.list, &self.arena);
        self.client_ids.find(self.hash(id), |s| {
            let off = list[s as usize].id;
            off != GENERATED && arena.get(off) == id
        })
    }

    /// Whether `fresh` names the next record: its id was generated for it.
    #[inline]
    fn is_fresh(&self, fresh: Option<u32>) -> bool {
        fresh == Some(self.list.len() as u32)
    }

    /// The generated id of the next record (`ids.rs`); in the rare case a
    /// client already took that id as its REQID (a reservation's, or one
    /// `taken` says is spoken for: a draw entrant's), that id and `-<k>`
    /// with the smallest free k. With an id key nobody can know the next id
    /// before it is made, so the loop runs only on a 2^-64 coincidence.
    #[inline]
    pub(super) fn generate_id(&self, tag: u32, taken: impl Fn(&[u8]) -> bool) -> NewId {
        let seq = self.list.len() as u32;
        let mut id = Digits::default();
        write_generated(&mut id, tag, seq, self.id_key.as_ref());
        // No record has this sequence number yet: only a client id can
        // hold the string, and most sales have none.
        let free = |id: &Digits| self.find(id.as_bytes(), tag).is_none() && !taken(id.as_bytes());
        if (self.client_ids.is_empty() && !taken(id.as_bytes())) || free(&id) {
            return NewId { text: id, fresh: Some(seq) };
        }
        let base = id.len();
        for k in 1u64.. {
            id.truncate(base);
            id.push(b'-');
            id.push_u64(k);
            if free(&id) {
                break;
            }
        }
        NewId { text: id, fresh: None }
    }

    /// Everything about a new record that does not depend on the rest of
    /// its batch or on the buckets, in a sale whose tag and HOLD are given.
    #[inline]
    /// `fresh`: the record `rec.id` was generated for (`NewId::fresh`);
    /// when it is this next record, the id is known to be free and
    /// generated, so it is neither looked up nor parsed again.
    pub(super) fn check_new(&self, rec: NewRecord, tag: u32, hold_ms: u64, fresh: Option<u32>) -> Result<(), EffectError> {
        if !valid_id(rec.id) || !valid_id(rec.user) {
            return Err(EffectError("bad reservation or user id"));
        }
        if rec.created_ms < self.stamp(0) {
            return Err(EffectError("creation time goes back"));
        }
        // Times past year 9999 come from no clock: a crafted payload's. One
        // would become every later record's creation time (`stamp`) and
        // push its deadline past 64 bits, so each RESERVE would be refused.
        if rec.created_ms > MAX_TIME_MS {
            return Err(EffectError("creation time out of range"));
        }
        if rec.qty == 0 || rec.qty > MAX_TOTAL {
            return Err(EffectError("reservation quantity out of range"));
        }
        if !self.is_fresh(fresh) && self.find(rec.id, tag).is_some() {
            return Err(EffectError("reservation id exists"));
        }
        if !self.arena.has_room(2) {
            return Err(EffectError("sale is too large"));
        }
        let hold_deadline = rec.created_ms.checked_add(hold_ms);
        let deadline_ok = rec.deadline_ms == 0 || (hold_ms > 0 && Some(rec.deadline_ms) == hold_deadline);
        if !deadline_ok {
            return Err(EffectError("deadline is not created + HOLD"));
        }
        if rec.state.is_live() {
            check_takes(rec.takes, rec.qty)
        } else if rec.takes.is_empty() {
            Ok(())
        } else {
            Err(EffectError("released reservation holds stock"))
        }
    }

    /// Stores a checked record as the next sequence number, which it
    /// returns: its id (interned and indexed unless it is the generated
    /// one), where its stock came from, and its units in the tally. It has
    /// no user yet: a live record shares its buyer's name (`Buyers::join`),
    /// any other gets its own (`own_user`).
    #[inline]
    pub(super) fn push(&mut self, rec: NewRecord, tag: u32, fresh: Option<u32>) -> u32 {
        let seq = self.list.len() as u32;
        let generated = self.is_fresh(fresh) || parse_generated(rec.id, tag, self.id_key.as_ref()) == Some(seq);
        let id = if generated { GENERATED } else { self.arena.intern(rec.id) };
        let bucket = self.keep_takes(seq, rec.takes);
        self.list.push(Record::new(rec.qty, bucket, rec.state, rec.deadline_ms != 0, rec.created_ms, id));
        if id != GENERATED {
            let hash = self.hash(rec.id);
            let (list, arena, hasher) = (&self.list, &self.arena, &self.hasher);
            self.client_ids.insert_unique(hash, seq, |s| hasher.hash_one(arena.get(list[s as usize].id)));
        }
        self.tally.add(rec.state, rec.qty);
        seq
    }

    /// Room for `n` client ids in an index that has none yet (a draw's
    /// first DRAW: its winners' REQIDs).
    pub(super) fn presize_client_ids(&mut self, n: usize) {
        if self.client_ids.is_empty() && n > 0 {
            self.client_ids = SeqIndex::with_capacity(n);
        }
    }

    /// Gives record `seq`, in no buyer's chain, a name of its own.
    #[inline]
    pub(super) fn own_user(&mut self, seq: u32, user: &[u8]) {
        let off = self.arena.intern(user);
        self[seq].user = off;
    }

    /// The `Record::bucket` for `takes`, keeping them aside when they are
    /// several.
    #[inline]
    fn keep_takes(&mut self, seq: u32, takes: &[Take]) -> u16 {
        match takes {
            [one] => one.bucket as u16,
            [] => 0,
            many => {
                self.multi_takes.insert(seq, many.into());
                MULTI
            }
        }
    }

    /// Moves record `seq` to `state`, and its units in the tally with it.
    #[inline]
    pub(super) fn set_state(&mut self, seq: u32, state: State) {
        let r = &mut self[seq];
        let (was, qty) = (r.state(), r.qty());
        r.set_state(state);
        self.tally.remove(was, qty);
        self.tally.add(state, qty);
    }

    /// A released record takes stock again (a retake): from `takes`.
    #[inline]
    pub(super) fn set_takes(&mut self, seq: u32, takes: &[Take]) {
        let bucket = self.keep_takes(seq, takes);
        self[seq].set_bucket(bucket);
    }

    /// A live record is released (cause `Released`) or its hold ran out
    /// (`Expired`): returns the takes it held, for the buckets.
    #[inline]
    pub(super) fn release(&mut self, seq: u32, cause: State) -> Vec<Take> {
        let takes = self.takes(seq);
        self.set_state(seq, cause);
        self.multi_takes.remove(&seq);
        takes
    }

    /// Where the stock of record `seq` came from, while it is live.
    #[inline]
    pub(super) fn takes(&self, seq: u32) -> Vec<Take> {
        let r = &self[seq];
        match (r.state().is_live(), r.bucket()) {
            (false, _) => Vec::new(),
            (true, MULTI) => self.multi_takes.get(&seq).map_or_else(Vec::new, |t| t.to_vec()),
            (true, b) => vec![Take { bucket: u32::from(b), qty: r.qty() }],
        }
    }

    /// Record `seq` read back, in a sale whose tag and HOLD are given.
    #[inline]
    pub(super) fn view(&self, seq: u32, tag: u32, hold_ms: u64) -> RecordView<'_> {
        RecordView { records: self, tag, hold_ms, seq }
    }

    /// RDB load: gives back what `with_capacity` reserved beyond need.
    pub(super) fn shrink(&mut self) {
        self.arena.shrink_last();
        self.list.shrink_last();
    }

    /// Heap bytes, for MEMORY USAGE.
    pub(super) fn bytes(&self) -> usize {
        self.list.bytes()
            + self.arena.bytes()
            + self.client_ids.allocation_size()
            + self.multi_takes.values().map(|t| 24 + t.len() * std::mem::size_of::<Take>()).sum::<usize>()
    }

    #[cfg(test)]
    pub(super) fn chunks(&self) -> &[Vec<Record>] {
        self.list.chunks()
    }

    #[cfg(test)]
    pub(super) fn arena_chunks(&self) -> &[Vec<u8>] {
        self.arena.chunks()
    }

    /// Full chunks but the last, and every client id indexed.
    #[cfg(test)]
    pub(super) fn check(&self) -> Result<(), String> {
        let len = self.len();
        let chunk_lens: Vec<usize> = self.chunks().iter().map(Vec::len).collect();
        if chunk_lens.iter().sum::<usize>() != len || chunk_lens.iter().rev().skip(1).any(|&n| n != super::chunks::CHUNK) {
            return Err(format!("record chunks {chunk_lens:?} for {len} records"));
        }
        let with_ids = (0..len).filter(|&i| self.list[i].id != GENERATED).count();
        if self.client_ids.len() != with_ids {
            return Err(format!("{} client ids indexed, {with_ids} records have one", self.client_ids.len()));
        }
        Ok(())
    }
}

/// Live takes must be positive amounts summing to `qty`.
pub(super) fn check_takes(takes: &[Take], qty: u64) -> Result<(), EffectError> {
    let mut sum: u64 = 0;
    for t in takes {
        if t.qty == 0 {
            return Err(EffectError("empty take"));
        }
        sum = sum.checked_add(t.qty).ok_or(EffectError("take overflows"))?;
    }
    if sum != qty {
        return Err(EffectError("takes do not add up to the quantity"));
    }
    Ok(())
}

/// A reservation as stored, borrowed from the sale's records. It carries
/// the two settings a record is read with: the tag (a generated id is
/// written from it) and HOLD (a deadline is `created + HOLD`).
#[derive(Clone, Copy, Debug)]
pub struct RecordView<'a> {
    records: &'a Records,
    tag: u32,
    hold_ms: u64,
    seq: u32,
}

impl<'a> RecordView<'a> {
    fn rec(&self) -> &'a Record {
        &self.records[self.seq]
    }

    pub fn seq(&self) -> u32 {
        self.seq
    }

    /// Writes the reservation id into `out` (rendered for generated ids).
    pub fn write_id(&self, out: &mut Vec<u8>) {
        match self.rec().id {
            GENERATED => {
                let mut id = Digits::default();
                write_generated(&mut id, self.tag, self.seq, self.records.id_key.as_ref());
                out.extend_from_slice(id.as_bytes());
            }
            off => out.extend_from_slice(self.records.name(off)),
        }
    }

    pub fn id(&self) -> Box<[u8]> {
        let mut out = Vec::with_capacity(20);
        self.write_id(&mut out);
        out.into_boxed_slice()
    }

    pub fn user(&self) -> &'a [u8] {
        self.records.name(self.rec().user)
    }

    pub fn qty(&self) -> u64 {
        self.rec().qty()
    }

    pub fn state(&self) -> State {
        self.rec().state()
    }

    pub fn created_ms(&self) -> u64 {
        self.rec().created_ms
    }

    pub fn deadline_ms(&self) -> u64 {
        let r = self.rec();
        if r.has_deadline() {
            r.created_ms.saturating_add(self.hold_ms)
        } else {
            0
        }
    }

    /// Where the stock came from, while the reservation is live.
    pub fn takes(&self) -> Vec<Take> {
        self.records.takes(self.seq)
    }

    pub fn to_owned(&self) -> Reservation {
        Reservation {
            id: self.id(),
            user: self.user().into(),
            qty: self.qty(),
            state: self.state(),
            created_ms: self.created_ms(),
            deadline_ms: self.deadline_ms(),
            takes: self.takes(),
        }
    }
}

/// An id `generate_id` made for the next record, and that record's
/// sequence number when the id is its generated one (`None`: a client held
/// that id, so this one carries a `-<k>` suffix and is stored as a
/// client's). The master passes it on to `add_accepted`, which then needs
/// neither the lookup nor the parse a replica's copy of the id takes.
#[derive(Debug)]
pub(super) struct NewId {
    pub(super) text: Digits,
    pub(super) fresh: Option<u32>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn record_fields_pack_into_one_word() {
        for state in [State::Pending, State::Confirmed, State::Released, State::Expired] {
            for (qty, bucket, deadline) in [(1, 0, false), (MAX_TOTAL, MULTI, true), (12345, 1023, true)] {
                let mut r = Record::new(qty, bucket, state, deadline, 7, GENERATED);
                assert_eq!((r.qty(), r.bucket(), r.state(), r.has_deadline()), (qty, bucket, state, deadline));
                r.set_state(State::Confirmed);
                r.set_bucket(5);
                assert_eq!((r.qty(), r.bucket(), r.state(), r.has_deadline()), (qty, 5, State::Confirmed, deadline));
            }
        }
    }
}
