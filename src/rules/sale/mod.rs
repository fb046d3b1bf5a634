//! One sale: its rules, its stock, its buyers and its reservations.
//!
//! Plain Rust, no FFI. The master decides (`accept_reserve`, `due_holds`,
//! `plan_retake`, `plan_adopt`) with its clock; every change is then made by
//! a method that takes the decision with all ids, buckets and timestamps
//! explicit, so the very same call replays on a replica or from the AOF.
//!
//! Memory: a flash sale keeps a record per reservation, so records are
//! compact (32 bytes). User names and client ids live once in a byte arena;
//! generated ids (`<tag>-<seq>`) are not stored at all; the two indexes hold
//! only sequence numbers; hold deadlines follow creation order, so expiry
//! needs a cursor, not a queue.
//!
//! Time: no command's cost grows with the size of the sale or with the
//! buyer's own reservations. The indexes grow incrementally (`SeqIndex`),
//! records and arena grow in chunks that never move, a buyer's live
//! quantity is a counter and its records a doubly linked chain, and the hold
//! cursor skips chunks without holds. An old record coming back into a long
//! chain (a RECONCILE APPLY retake) finds its place in O(log n) in an
//! ordered index of that buyer's records, kept only while the chain stays
//! long; building it walks the chain once, a cost the joins that made the
//! chain have paid for (amortised O(1) each).

use std::collections::HashMap;
use std::hash::BuildHasher;

use hashbrown::DefaultHashBuilder;

use crate::rules::buckets::{Buckets, Take};
use crate::rules::digits::Digits;
use crate::rules::reservation::{valid_id, NewRecord, Reservation, State};
use crate::rules::seq_index::SeqIndex;
use crate::rules::transfers::{self, Counters, SendDecision, Transfers};

pub use crate::rules::config::{SaleConfig, SplitConfig, StreamConfig, MAX_PEERS, MAX_ROUND, MAX_SHARDS, MAX_TOTAL, OPEN_END};
pub use crate::rules::outcome::{ConfirmOutcome, EffectError, Refusal, ReleaseOutcome, TransferRefusal};

mod chunks;
mod ids;

use chunks::{Arena, Chunked, CHUNK_BITS};
#[cfg(test)]
use chunks::{ARENA_CHUNK, CHUNK};
use ids::{parse_generated, write_generated};

/// A RESERVE the sale accepted, not applied yet: `add_record(a.as_new())`
/// applies it, on the master as a replayed PENDING effect does. Borrowed
/// and inline, so accepting allocates nothing unless the take borrows from
/// several buckets.
#[derive(Debug)]
pub struct Accepted<'a> {
    id: AcceptedId<'a>,
    pub user: &'a [u8],
    pub qty: u64,
    pub created_ms: u64,
    pub deadline_ms: u64,
    takes: Takes,
}

#[derive(Debug)]
enum AcceptedId<'a> {
    Client(&'a [u8]),
    Generated(Digits),
}

/// Where an accepted reservation's units come from.
#[derive(Debug)]
enum Takes {
    One([Take; 1]),
    Many(Vec<Take>),
}

impl Accepted<'_> {
    pub fn id(&self) -> &[u8] {
        match &self.id {
            AcceptedId::Client(id) => id,
            AcceptedId::Generated(id) => id.as_bytes(),
        }
    }

    pub fn takes(&self) -> &[Take] {
        match &self.takes {
            Takes::One(one) => one,
            Takes::Many(many) => many,
        }
    }

    pub fn as_new(&self) -> NewRecord<'_> {
        NewRecord {
            id: self.id(),
            user: self.user,
            qty: self.qty,
            state: State::Pending,
            created_ms: self.created_ms,
            deadline_ms: self.deadline_ms,
            takes: self.takes(),
        }
    }

    pub fn to_reservation(&self) -> Reservation {
        self.as_new().to_owned()
    }
}

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

/// No record: the end of a buyer's chain.
const NONE: u32 = u32::MAX;
/// `Record::id` of a generated id, `<tag>-<seq>`.
const GENERATED: u32 = u32::MAX;
/// A record coming back into its buyer's chain (RECONCILE retake) walks at
/// most this many records from the head to find its place; past that the
/// buyer gets an ordered index (`Sale::chain_index`), dropped again once
/// the chain is down to `CHAIN_WALK / 2` records.
const CHAIN_WALK: usize = 32;

// Records a retake walked to find its place (tests only).
#[cfg(test)]
thread_local! {
    static WALKED: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

fn walked(_records: usize) {
    #[cfg(test)]
    WALKED.with(|w| w.set(w.get() + _records));
}

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
struct Record {
    /// Quantity (50 bits: `MAX_TOTAL` fits), the one bucket the stock came
    /// from or `MULTI` (11 bits, see `multi_takes`), state (2 bits), and
    /// whether the hold runs out (at `created_ms + hold_ms`).
    meta: u64,
    created_ms: u64,
    /// Arena offset of the user id; shared by the records of a buyer's chain.
    user: u32,
    /// Arena offset of the client id, or `GENERATED`.
    id: u32,
    /// The buyer's previous (older) live record, or `NONE`. Live records
    /// form a chain per buyer, newest first.
    prev_live: u32,
    /// The buyer's next (newer) live record. The newest has none: there it
    /// is the buyer's slot in `Sale::chain_qty` when the chain has 2+
    /// records, `NONE` otherwise (the buyer's quantity is its own).
    next_live: u32,
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

    fn qty(&self) -> u64 {
        self.meta & QTY_MASK
    }

    fn bucket(&self) -> u16 {
        ((self.meta >> BUCKET_SHIFT) & BUCKET_MASK) as u16
    }

    fn set_bucket(&mut self, bucket: u16) {
        self.meta = (self.meta & !(BUCKET_MASK << BUCKET_SHIFT)) | ((u64::from(bucket) & BUCKET_MASK) << BUCKET_SHIFT);
    }

    fn state(&self) -> State {
        match (self.meta >> STATE_SHIFT) & 3 {
            0 => State::Pending,
            1 => State::Confirmed,
            2 => State::Released,
            _ => State::Expired,
        }
    }

    fn set_state(&mut self, state: State) {
        self.meta = (self.meta & !(3 << STATE_SHIFT)) | (u64::from(state.code() & 3) << STATE_SHIFT);
    }

    fn has_deadline(&self) -> bool {
        self.meta & DEADLINE_BIT != 0
    }

    /// A pending record whose hold can run out.
    fn is_hold(&self) -> bool {
        self.has_deadline() && self.state() == State::Pending
    }
}

/// A reservation as stored, borrowed from the sale.
#[derive(Clone, Copy, Debug)]
pub struct RecordView<'a> {
    sale: &'a Sale,
    seq: u32,
}

impl<'a> RecordView<'a> {
    fn rec(&self) -> &'a Record {
        &self.sale.records[self.seq as usize]
    }

    pub fn seq(&self) -> u32 {
        self.seq
    }

    /// Writes the reservation id into `out` (rendered for generated ids).
    pub fn write_id(&self, out: &mut Vec<u8>) {
        match self.rec().id {
            GENERATED => {
                let mut id = Digits::default();
                write_generated(&mut id, self.sale.config.tag, self.seq);
                out.extend_from_slice(id.as_bytes());
            }
            off => out.extend_from_slice(self.sale.arena.get(off)),
        }
    }

    pub fn id(&self) -> Box<[u8]> {
        let mut out = Vec::with_capacity(20);
        self.write_id(&mut out);
        out.into_boxed_slice()
    }

    pub fn user(&self) -> &'a [u8] {
        self.sale.arena.get(self.rec().user)
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
            r.created_ms.saturating_add(self.sale.config.hold_ms)
        } else {
            0
        }
    }

    /// Where the stock came from, while the reservation is live.
    pub fn takes(&self) -> Vec<Take> {
        let r = self.rec();
        match (r.state().is_live(), r.bucket()) {
            (false, _) => Vec::new(),
            (true, MULTI) => self.sale.multi_takes.get(&self.seq).map_or_else(Vec::new, |t| t.to_vec()),
            (true, b) => vec![Take { bucket: u32::from(b), qty: r.qty() }],
        }
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

#[derive(Clone, Debug)]
pub struct Sale {
    config: SaleConfig,
    buckets: Buckets,
    remaining: u64,
    /// In creation order; a reservation's index is its sequence number.
    records: Chunked<Record>,
    /// Per chunk of `records`: how many of its records are holds (pending,
    /// with a deadline), so the hold cursor skips a chunk without any.
    holds: Vec<u32>,
    arena: Arena,
    /// Sequence numbers of records with a client id, keyed by that id.
    client_ids: SeqIndex,
    /// Each buyer's newest live record, keyed by user id.
    buyers: SeqIndex,
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
    chain_index: HashMap<u32, std::collections::BTreeSet<u32>>,
    /// Takes of live records that borrowed from several buckets.
    multi_takes: HashMap<u32, Box<[Take]>>,
    /// The first hold (the record count when there is none); every change
    /// moves it on, so `next_deadline` reads one record.
    hold_cursor: u32,
    tally: Tally,
    /// What the sale sent to and received from peer keys (a split sale);
    /// `None` until its first transfer, so a plain sale pays nothing.
    transfers: Option<Box<Transfers>>,
    /// Per process, never persisted: keyed against crafted collisions.
    hasher: DefaultHashBuilder,
}

impl Sale {
    pub fn new(config: SaleConfig) -> Sale {
        let buckets = Buckets::new(config.total, config.shards);
        Sale {
            remaining: config.total,
            config,
            buckets,
            records: Chunked::new(),
            holds: Vec::new(),
            arena: Arena::default(),
            client_ids: SeqIndex::new(),
            buyers: SeqIndex::new(),
            chain_qty: Chunked::new(),
            free_qty: NONE,
            chain_index: HashMap::new(),
            multi_takes: HashMap::new(),
            hold_cursor: 0,
            tally: Tally::default(),
            transfers: None,
            hasher: DefaultHashBuilder::default(),
        }
    }

    /// RENAME moved the sale from `from` to `to`: a stream `from` owned is
    /// `to`'s now. A copy's stream (owned by another name) stays as it is.
    pub fn follow_rename(&mut self, from: &[u8], to: &[u8]) {
        if let Some(s) = self.config.stream.as_mut().filter(|s| *s.owner == *from) {
            s.owner = to.into();
        }
    }

    pub fn config(&self) -> &SaleConfig {
        &self.config
    }

    pub fn buckets(&self) -> &Buckets {
        &self.buckets
    }

    pub fn remaining(&self) -> u64 {
        self.remaining
    }

    pub fn tally(&self) -> Tally {
        self.tally
    }

    pub fn buyer_count(&self) -> usize {
        self.buyers.len()
    }

    pub fn record_count(&self) -> usize {
        self.records.len()
    }

    pub fn records(&self) -> impl Iterator<Item = RecordView<'_>> + '_ {
        (0..self.records.len() as u32).map(move |seq| RecordView { sale: self, seq })
    }

    pub fn get(&self, id: &[u8]) -> Option<RecordView<'_>> {
        self.find(id).map(|seq| RecordView { sale: self, seq })
    }

    /// `sum(bucket remaining) + pending + confirmed == total + received - sent`.
    pub fn invariant_holds(&self) -> bool {
        let held = u128::from(self.remaining) + u128::from(self.tally.pending) + u128::from(self.tally.confirmed);
        self.buckets.total_remaining() == self.remaining && Some(held) == self.capacity()
    }

    /// `total + received - sent`: the units this key holds in any form.
    /// `None` when the transfer counters do not add up (never in a sale
    /// built through its checked methods).
    pub fn capacity(&self) -> Option<u128> {
        transfers::capacity(self.config.total, self.transfers.as_deref())
    }

    /// Units sent and received, summed over peers (zero for a plain sale).
    pub fn transfer_totals(&self) -> Option<Counters> {
        Some(transfers::totals(self.transfers.as_deref()))
    }

    /// See `transfers::check_transfer`.
    pub fn check_transfer(&self, peer: &[u8], round: &[u8]) -> Result<(), TransferRefusal> {
        transfers::check_transfer(self.config.split.as_ref(), peer, round)
    }

    pub fn transfers(&self) -> Option<&Transfers> {
        self.transfers.as_deref()
    }

    fn hash(&self, bytes: &[u8]) -> u64 {
        self.hasher.hash_one(bytes)
    }

    fn find(&self, id: &[u8]) -> Option<u32> {
        if let Some(n) = parse_generated(id, self.config.tag) {
            if self.records.get(n as usize).is_some_and(|r| r.id == GENERATED) {
                return Some(n);
            }
        }
        if self.client_ids.is_empty() {
            return None;
        }
        let (records, arena) = (&self.records, &self.arena);
        self.client_ids.find(self.hash(id), |s| {
            let off = records[s as usize].id;
            off != GENERATED && arena.get(off) == id
        })
    }

    /// The buyer's newest live record.
    fn buyer_head(&self, user: &[u8]) -> Option<u32> {
        let (records, arena) = (&self.records, &self.arena);
        self.buyers.find(self.hash(user), |s| arena.get(records[s as usize].user) == user)
    }

    /// Quantity the buyer whose newest live record is `head` holds in live
    /// reservations.
    fn buyer_qty(&self, head: u32) -> u64 {
        let r = &self.records[head as usize];
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

    /// The creation time for a record made at `now_ms`: never before the
    /// previous record's, so creation order is deadline order even when the
    /// server clock steps back (and expiry can follow a cursor).
    pub fn stamp(&self, now_ms: u64) -> u64 {
        self.records.last().map_or(now_ms, |r| now_ms.max(r.created_ms))
    }

    /// The first hold at or after `at`, or the record count. Chunks without
    /// holds are skipped unread, so this reads the records of one chunk at
    /// most (plus one counter per chunk).
    fn first_hold(&self, mut at: usize) -> usize {
        let len = self.records.len();
        while at < len {
            let chunk = at >> CHUNK_BITS;
            if self.holds.get(chunk).is_none_or(|&n| n == 0) {
                at = (chunk + 1) << CHUNK_BITS;
            } else if self.records[at].is_hold() {
                return at;
            } else {
                at += 1;
            }
        }
        len
    }

    /// The earliest hold deadline, if any pending reservation can run out.
    /// The cursor sits on the first hold after every change: one record.
    pub fn next_deadline(&self) -> Option<u64> {
        let at = self.first_hold(self.hold_cursor as usize);
        self.records.get(at).map(|r| r.created_ms.saturating_add(self.config.hold_ms))
    }

    /// Moves the hold cursor to the first hold.
    fn advance_hold_cursor(&mut self) {
        self.hold_cursor = self.first_hold(self.hold_cursor as usize) as u32;
    }

    /// Counts a record that became a hold (+1) or stopped being one (-1).
    fn count_hold(&mut self, seq: u32, becomes: bool) {
        let chunk = seq as usize >> CHUNK_BITS;
        if self.holds.len() <= chunk {
            self.holds.resize(chunk + 1, 0);
        }
        let n = &mut self.holds[chunk];
        *n = if becomes { *n + 1 } else { n.saturating_sub(1) };
    }

    /// Whether the answer to a RESERVE of `qty` can depend on the time: the
    /// sale has a window, holds that may run out, or the stock to sell. A
    /// sold-out sale with none of these answers the same at every moment,
    /// so the command need not read the clock (a sold-out storm is most of
    /// a flash sale's traffic).
    pub fn clock_matters(&self, qty: u64) -> bool {
        self.remaining >= qty || self.config.start_ms > 0 || self.config.end_ms != OPEN_END || self.next_deadline().is_some()
    }

    /// `accept_reserve` as an owned record, for tests: what `add_record`
    /// takes on success.
    #[cfg(test)]
    pub fn decide_reserve(&self, user: &[u8], qty: u64, reqid: Option<&[u8]>, now_ms: u64) -> Result<Reservation, Refusal> {
        self.accept_reserve(user, qty, reqid, now_ms).map(|a| a.to_reservation())
    }

    /// Decides a RESERVE at `now_ms` without changing anything, and
    /// without allocating: the accepted reservation borrows the caller's
    /// user and REQID and keeps a generated id and a one-bucket take inline
    /// (the RESERVE command's path). `add_record(a.as_new())` applies it.
    pub fn accept_reserve<'a>(
        &self,
        user: &'a [u8],
        qty: u64,
        reqid: Option<&'a [u8]>,
        now_ms: u64,
    ) -> Result<Accepted<'a>, Refusal> {
        if let Some(id) = reqid {
            if self.find(id).is_some() {
                return Err(Refusal::Duplicate(id.into()));
            }
        }
        if now_ms < self.config.start_ms {
            return Err(Refusal::NotStarted);
        }
        if now_ms >= self.config.end_ms {
            return Err(Refusal::Ended);
        }
        let head = self.buyer_head(user);
        if head.map_or(0, |h| self.buyer_qty(h)).saturating_add(qty) > self.config.limit {
            return Err(Refusal::Limit(head.map(|h| RecordView { sale: self, seq: h }.id())));
        }
        if self.remaining < qty {
            return Err(Refusal::SoldOut);
        }
        let home = self.buckets.home_of(user);
        // The home bucket usually has the units: the same single take
        // `plan_take` would plan, without a vector.
        let takes = match self.buckets.take_from(home, qty) {
            Some(take) => Takes::One([take]),
            None => Takes::Many(self.buckets.plan_take(home, qty).ok_or(Refusal::SoldOut)?),
        };
        let id = match reqid {
            Some(id) => AcceptedId::Client(id),
            None => AcceptedId::Generated(self.generate_id()),
        };
        let created_ms = self.stamp(now_ms);
        let deadline_ms = if self.config.hold_ms == 0 { 0 } else { created_ms.saturating_add(self.config.hold_ms) };
        Ok(Accepted { id, user, qty, created_ms, deadline_ms, takes })
    }

    /// `<tag>-<seq>` for the next record; in the rare case a client already
    /// took that id as its REQID, `<tag>-<seq>-<k>` with the smallest free k.
    fn generate_id(&self) -> Digits {
        let seq = self.records.len() as u32;
        let mut id = Digits::default();
        write_generated(&mut id, self.config.tag, seq);
        // No record has this sequence number yet: only a client id can
        // hold the string, and most sales have none.
        if self.client_ids.is_empty() || self.find(id.as_bytes()).is_none() {
            return id;
        }
        let base = id.len();
        for k in 1u64.. {
            id.truncate(base);
            id.push(b'-');
            id.push_u64(k);
            if self.find(id.as_bytes()).is_none() {
                break;
            }
        }
        id
    }

    /// Adds reservation records as decided (or as replicated, or as loaded),
    /// in order. Checks the whole batch first: a refused batch changes
    /// nothing. A live record takes its stock from the buckets it names.
    pub fn add_records(&mut self, recs: &[Reservation]) -> Result<(), EffectError> {
        if self.records.len().saturating_add(recs.len()) >= NONE as usize {
            return Err(EffectError("too many reservations"));
        }
        if !self.arena.has_room(recs.len().saturating_mul(2)) {
            return Err(EffectError("sale is too large"));
        }
        let mut batch_ids = std::collections::HashSet::with_capacity(recs.len());
        let mut all_takes = Vec::new();
        let mut last_created = self.stamp(0);
        for rec in recs {
            self.check_record(rec.as_new())?;
            if rec.created_ms < last_created {
                return Err(EffectError("creation time goes back"));
            }
            last_created = rec.created_ms;
            if !batch_ids.insert(&rec.id) {
                return Err(EffectError("reservation id repeats"));
            }
            all_takes.extend_from_slice(&rec.takes);
        }
        if !self.buckets.can_take(&all_takes) {
            return Err(EffectError("stock is not there to take"));
        }
        for rec in recs {
            self.insert_record(rec.as_new());
        }
        Ok(())
    }

    /// Adds one record; see `add_records`.
    pub fn add_record(&mut self, rec: NewRecord) -> Result<(), EffectError> {
        if self.records.len() >= NONE as usize - 1 {
            return Err(EffectError("too many reservations"));
        }
        self.check_record(rec)?;
        if !self.buckets.can_take(rec.takes) {
            return Err(EffectError("stock is not there to take"));
        }
        self.insert_record(rec);
        Ok(())
    }

    /// Everything about a record that does not depend on the rest of a batch.
    fn check_record(&self, rec: NewRecord) -> Result<(), EffectError> {
        if !valid_id(rec.id) || !valid_id(rec.user) {
            return Err(EffectError("bad reservation or user id"));
        }
        if rec.created_ms < self.stamp(0) {
            return Err(EffectError("creation time goes back"));
        }
        if rec.qty == 0 || rec.qty > MAX_TOTAL {
            return Err(EffectError("reservation quantity out of range"));
        }
        if self.find(rec.id).is_some() {
            return Err(EffectError("reservation id exists"));
        }
        if !self.arena.has_room(2) {
            return Err(EffectError("sale is too large"));
        }
        let hold_deadline = rec.created_ms.checked_add(self.config.hold_ms);
        let deadline_ok = rec.deadline_ms == 0 || (self.config.hold_ms > 0 && Some(rec.deadline_ms) == hold_deadline);
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

    /// Inserts a checked record whose stock is known to be there.
    fn insert_record(&mut self, rec: NewRecord) {
        let seq = self.records.len() as u32;
        self.buckets.take(rec.takes);
        let id = if parse_generated(rec.id, self.config.tag) == Some(seq) { GENERATED } else { self.arena.intern(rec.id) };
        let bucket = match rec.takes {
            [one] => one.bucket as u16,
            [] => 0,
            many => {
                self.multi_takes.insert(seq, many.into());
                MULTI
            }
        };
        let record = Record::new(rec.qty, bucket, rec.state, rec.deadline_ms != 0, rec.created_ms, id);
        if record.is_hold() {
            self.count_hold(seq, true);
        }
        self.records.push(record);
        if id != GENERATED {
            let hash = self.hash(rec.id);
            let (records, arena, hasher) = (&self.records, &self.arena, &self.hasher);
            self.client_ids.insert_unique(hash, seq, |s| hasher.hash_one(arena.get(records[s as usize].id)));
        }
        match rec.state {
            State::Pending => self.tally.pending += rec.qty,
            State::Confirmed => self.tally.confirmed += rec.qty,
            State::Released => self.tally.released = self.tally.released.saturating_add(rec.qty),
            State::Expired => {
                self.tally.released = self.tally.released.saturating_add(rec.qty);
                self.tally.expired = self.tally.expired.saturating_add(rec.qty);
            }
        }
        if rec.state.is_live() {
            self.remaining -= rec.qty;
            self.join_buyer(seq, rec.user);
        } else {
            self.records[seq as usize].user = self.arena.intern(rec.user);
        }
        self.advance_hold_cursor();
    }

    /// Links a live record into its buyer's chain (newest first), sharing
    /// the buyer's interned name, and counts its quantity.
    fn join_buyer(&mut self, seq: u32, user: &[u8]) {
        let hash = self.hash(user);
        let qty = self.records[seq as usize].qty();
        let (records, arena, hasher) = (&self.records, &self.arena, &self.hasher);
        let name_of = |s: u32| arena.get(records[s as usize].user);
        // One probe finds the buyer or makes this record the buyer's head.
        let found = self.buyers.find_or_insert(hash, seq, |s| name_of(s) == user, |s| hasher.hash_one(name_of(s)));
        let Some(slot) = found else {
            if self.records[seq as usize].user == NONE {
                self.records[seq as usize].user = self.arena.intern(user);
            }
            let r = &mut self.records[seq as usize];
            (r.prev_live, r.next_live) = (NONE, NONE);
            return;
        };
        let head = *slot;
        if seq > head {
            *slot = seq;
        }
        let sum = self.buyer_qty(head).saturating_add(qty);
        let qty_slot = match self.records[head as usize].prev_live {
            NONE => self.alloc_qty(sum),
            _ => {
                let k = self.records[head as usize].next_live;
                self.chain_qty[k as usize] = sum;
                k
            }
        };
        let off = self.records[head as usize].user;
        self.records[seq as usize].user = off;
        if seq > head {
            let records = &mut self.records;
            records[head as usize].next_live = seq;
            records[seq as usize].prev_live = head;
            records[seq as usize].next_live = qty_slot;
        } else {
            // An older record coming back (RECONCILE retake): it goes where
            // its sequence number sorts, so that the head is still the
            // newest after any record leaves (LIMIT replies with the newest
            // live id), and the chain is the one a reload builds.
            self.records[head as usize].next_live = qty_slot;
            let at = self.newer_live(head, seq);
            let records = &mut self.records;
            let older = records[at as usize].prev_live;
            records[seq as usize].prev_live = older;
            records[seq as usize].next_live = at;
            records[at as usize].prev_live = seq;
            if older != NONE {
                records[older as usize].next_live = seq;
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
    fn newer_live(&mut self, head: u32, seq: u32) -> u32 {
        let off = self.records[head as usize].user;
        let newer = |index: &std::collections::BTreeSet<u32>| index.range(seq..).next().copied().unwrap_or(head);
        if !self.chain_index.is_empty() {
            if let Some(index) = self.chain_index.get(&off) {
                return newer(index);
            }
        }
        let records = &self.records;
        let mut at = head;
        for step in 1..=CHAIN_WALK {
            let older = records[at as usize].prev_live;
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
            at = records[at as usize].prev_live;
        }
        walked(CHAIN_WALK + seqs.len());
        seqs.reverse();
        let index: std::collections::BTreeSet<u32> = seqs.into_iter().collect();
        let at = newer(&index);
        self.chain_index.insert(off, index);
        at
    }

    /// Unlinks a record that stops being live from its buyer's chain, in
    /// one probe of the buyer index and O(1) otherwise.
    fn leave_buyer(&mut self, seq: u32) {
        let Record { prev_live: older, next_live: newer, user, .. } = self.records[seq as usize];
        let qty = self.records[seq as usize].qty();
        if !self.chain_index.is_empty() {
            if let Some(index) = self.chain_index.get_mut(&user) {
                index.remove(&seq);
                if index.len() <= CHAIN_WALK / 2 {
                    self.chain_index.remove(&user);
                }
            }
        }
        let (records, arena, hasher) = (&self.records, &self.arena, &self.hasher);
        let hash = hasher.hash_one(arena.get(user));
        // The records of a chain share their user's arena offset: comparing
        // offsets finds the buyer without reading names.
        let is_buyer = |s: u32| records[s as usize].user == user;
        if older == NONE && newer == NONE {
            // The buyer's only live record (a head with company has an
            // older record; any other record has a newer one).
            self.buyers.remove(hash, is_buyer, |s| hasher.hash_one(arena.get(records[s as usize].user)));
            return;
        }
        let Some(slot) = self.buyers.get_mut(hash, is_buyer) else {
            // Not reachable while the chains are sound; leave this record
            // unlinked at least.
            let r = &mut self.records[seq as usize];
            (r.prev_live, r.next_live) = (NONE, NONE);
            return;
        };
        let head = *slot;
        if head == seq {
            *slot = older;
        }
        let records = &mut self.records;
        let (new_head, qty_slot) = if head == seq {
            (older, newer)
        } else {
            records[newer as usize].prev_live = older;
            if older != NONE {
                records[older as usize].next_live = newer;
            }
            (head, records[head as usize].next_live)
        };
        let r = &mut records[seq as usize];
        (r.prev_live, r.next_live) = (NONE, NONE);
        if records[new_head as usize].prev_live == NONE {
            // One record left: its quantity is the buyer's.
            records[new_head as usize].next_live = NONE;
            self.free_qty_slot(qty_slot);
        } else {
            records[new_head as usize].next_live = qty_slot;
            let sum = &mut self.chain_qty[qty_slot as usize];
            *sum = sum.saturating_sub(qty);
        }
    }

    /// Ids of pending reservations whose hold has run out at `now_ms`, at
    /// most `max` of them, in creation order (which is deadline order: HOLD
    /// is fixed per round). The cost follows the ids returned, not the
    /// holds left.
    pub fn due_holds(&self, now_ms: u64, max: usize) -> Vec<Box<[u8]>> {
        let mut due = Vec::new();
        let mut at = self.first_hold(self.hold_cursor as usize);
        while due.len() < max && at < self.records.len() {
            if self.records[at].created_ms.saturating_add(self.config.hold_ms) > now_ms {
                break;
            }
            due.push(RecordView { sale: self, seq: at as u32 }.id());
            at = self.first_hold(at + 1);
        }
        due
    }

    /// RELEASE (cause `Released`) or hold expiry (cause `Expired`).
    pub fn release(&mut self, id: &[u8], cause: State) -> ReleaseOutcome {
        let Some(seq) = self.find(id) else {
            return ReleaseOutcome::NotFound;
        };
        match self.records[seq as usize].state() {
            State::Confirmed => return ReleaseOutcome::Confirmed,
            State::Released | State::Expired => return ReleaseOutcome::AlreadyReleased,
            State::Pending => {}
        }
        let takes = RecordView { sale: self, seq }.takes();
        let cause = if cause == State::Expired { State::Expired } else { State::Released };
        let qty = self.records[seq as usize].qty();
        self.leave_buyer(seq);
        if self.records[seq as usize].has_deadline() {
            self.count_hold(seq, false);
        }
        self.records[seq as usize].set_state(cause);
        self.multi_takes.remove(&seq);
        self.remaining += self.buckets.give_back(&takes);
        self.tally.pending -= qty;
        self.tally.released = self.tally.released.saturating_add(qty);
        if cause == State::Expired {
            self.tally.expired = self.tally.expired.saturating_add(qty);
        }
        self.advance_hold_cursor();
        ReleaseOutcome::Released
    }

    pub fn confirm(&mut self, id: &[u8]) -> ConfirmOutcome {
        let Some(seq) = self.find(id) else {
            return ConfirmOutcome::NotFound;
        };
        let rec = self.records[seq as usize];
        match rec.state() {
            State::Confirmed => return ConfirmOutcome::AlreadyConfirmed,
            State::Released | State::Expired => return ConfirmOutcome::Released,
            State::Pending => {}
        }
        if rec.has_deadline() {
            self.count_hold(seq, false);
        }
        self.records[seq as usize].set_state(State::Confirmed);
        self.tally.pending -= rec.qty();
        self.tally.confirmed += rec.qty();
        self.advance_hold_cursor();
        ConfirmOutcome::Confirmed
    }

    /// Plans taking stock again for a released reservation (RECONCILE APPLY).
    /// `None` when the stock is not there.
    pub fn plan_retake(&self, id: &[u8]) -> Option<Vec<Take>> {
        let rec = self.get(id)?;
        if !rec.state().is_released() || self.remaining < rec.qty() {
            return None;
        }
        self.buckets.plan_take(self.buckets.home_of(rec.user()), rec.qty())
    }

    /// A released reservation takes `takes` and becomes confirmed: the
    /// order ledger says the order exists.
    pub fn retake(&mut self, id: &[u8], takes: Vec<Take>) -> Result<(), EffectError> {
        let seq = self.find(id).ok_or(EffectError("no such reservation"))?;
        let rec = self.records[seq as usize];
        let (state, qty) = (rec.state(), rec.qty());
        if !state.is_released() {
            return Err(EffectError("reservation is not released"));
        }
        check_takes(&takes, qty)?;
        if !self.buckets.can_take(&takes) {
            return Err(EffectError("stock is not there to take"));
        }
        self.buckets.take(&takes);
        self.remaining -= qty;
        self.tally.released -= qty;
        if state == State::Expired {
            self.tally.expired -= qty;
        }
        self.tally.confirmed += qty;
        let bucket = match takes.as_slice() {
            [one] => one.bucket as u16,
            many => {
                self.multi_takes.insert(seq, many.into());
                MULTI
            }
        };
        let r = &mut self.records[seq as usize];
        r.set_state(State::Confirmed);
        r.set_bucket(bucket);
        let user = self.arena.get(r.user).to_vec();
        self.join_buyer(seq, &user);
        Ok(())
    }

    /// Plans stock for an order the sale has never seen (RECONCILE APPLY).
    pub fn plan_adopt(&self, user: &[u8], qty: u64) -> Option<Vec<Take>> {
        if self.remaining < qty {
            return None;
        }
        self.buckets.plan_take(self.buckets.home_of(user), qty)
    }

    /// See `transfers::decide_send`.
    pub fn decide_send(&self, qty: u64, min: u64, tid: &[u8]) -> SendDecision {
        transfers::decide_send(self.transfers.as_deref(), &self.buckets, self.remaining, qty, min, tid)
    }

    /// See `transfers::Parts::send`.
    pub fn send(&mut self, peer: &[u8], tid: &[u8], takes: &[Take]) -> Result<(), EffectError> {
        self.transfer_parts().send(peer, tid, takes)
    }

    pub fn transfer_counters(&self, peer: &[u8]) -> Counters {
        transfers::counters(self.transfers.as_deref(), peer)
    }

    /// See `transfers::plan_recv`.
    pub fn plan_recv(&self, peer: &[u8], sent_total: u64) -> Result<Option<Vec<Take>>, EffectError> {
        transfers::plan_recv(self.transfers.as_deref(), self.config.total, &self.buckets, peer, sent_total)
    }

    /// See `transfers::Parts::recv`.
    pub fn recv(&mut self, peer: &[u8], sent_total: u64, credits: &[Take]) -> Result<(), EffectError> {
        self.transfer_parts().recv(peer, sent_total, credits)
    }

    /// Restores the transfer state of a sale without records (AOF rewrite,
    /// RDB load); see `transfers::Parts::restore`.
    pub fn restore_transfers(&mut self, allocation: Vec<u64>, peers: Vec<(Box<[u8]>, Counters)>, tids: Vec<Box<[u8]>>) -> Result<(), EffectError> {
        if self.records.len() > 0 || allocation.len() != self.config.shards as usize {
            return Err(EffectError("transfers restore into a sale without records"));
        }
        self.transfer_parts().restore(allocation, peers, tids)
    }

    /// What SEND, RECV and a restore may change, and nothing else.
    fn transfer_parts(&mut self) -> transfers::Parts<'_> {
        transfers::Parts { config: &self.config, log: &mut self.transfers, buckets: &mut self.buckets, remaining: &mut self.remaining }
    }

    /// Bytes this sale holds on the heap, for MEMORY USAGE.
    pub fn heap_estimate(&self) -> usize {
        use std::mem::size_of;
        size_of::<Sale>()
            + self.records.bytes()
            + self.holds.capacity() * size_of::<u32>()
            + self.arena.bytes()
            + self.client_ids.allocation_size()
            + self.buyers.allocation_size()
            + self.chain_qty.bytes()
            + self.chain_index.values().map(|index| 64 + index.len() * 9).sum::<usize>()
            + self.multi_takes.values().map(|t| 24 + t.len() * size_of::<Take>()).sum::<usize>()
            + self.buckets.count() as usize * 16
            + self.transfers.as_ref().map_or(0, |t| t.heap_estimate())
    }

    /// An empty sale with room for `records` reservations (RDB load): the
    /// buyer index is sized up front, so a load never migrates it.
    pub fn with_capacity(config: SaleConfig, records: usize) -> Sale {
        let mut sale = Sale::new(config);
        sale.records.reserve_first(records);
        sale.buyers = SeqIndex::with_capacity(records);
        // A short user id takes about ten arena bytes.
        sale.arena.reserve_first(records.saturating_mul(10));
        sale
    }

    /// RDB load: the stored bucket remainders must be exactly what the
    /// loaded reservations imply.
    pub fn check_buckets(&mut self, remaining: &[u64]) -> Result<(), EffectError> {
        if self.buckets.remaining() != remaining {
            return Err(EffectError("bucket remainders do not match the reservations"));
        }
        self.arena.shrink_last();
        self.records.shrink_last();
        // Give back what `with_capacity` reserved for buyers that turned out
        // to be released.
        let (records, arena, hasher) = (&self.records, &self.arena, &self.hasher);
        self.buyers.shrink_to_fit(|s| hasher.hash_one(arena.get(records[s as usize].user)));
        Ok(())
    }
}

/// Live takes must be positive amounts summing to `qty`.
fn check_takes(takes: &[Take], qty: u64) -> Result<(), EffectError> {
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

/// Whether two sales hold the same state (all that is persisted).
impl PartialEq for Sale {
    fn eq(&self, other: &Sale) -> bool {
        self.config == other.config
            && self.buckets == other.buckets
            && self.transfers == other.transfers
            && self.records.len() == other.records.len()
            && self.records().zip(other.records()).all(|(a, b)| a.to_owned() == b.to_owned())
    }
}

#[cfg(test)]
impl Sale {
    /// Everything derived that a test cannot see from outside: chunks, hold
    /// counts and cursor, the buyer chains (links, order, head, quantity
    /// slots and their free list) and both indexes.
    pub(crate) fn check_internals(&self) -> Result<(), String> {
        let len = self.records.len();
        let chunk_lens: Vec<usize> = self.records.chunks().iter().map(Vec::len).collect();
        if chunk_lens.iter().sum::<usize>() != len || chunk_lens.iter().rev().skip(1).any(|&n| n != CHUNK) {
            return Err(format!("record chunks {chunk_lens:?} for {len} records"));
        }
        for (c, chunk) in self.records.chunks().iter().enumerate() {
            let n = chunk.iter().filter(|r| r.is_hold()).count() as u32;
            if self.holds.get(c).copied().unwrap_or(0) != n {
                return Err(format!("chunk {c}: hold count {:?}, {n} holds", self.holds.get(c)));
            }
        }
        let first = (0..len).find(|&i| self.records[i].is_hold()).unwrap_or(len);
        if self.hold_cursor as usize != first {
            return Err(format!("hold cursor {} but the first hold is {first}", self.hold_cursor));
        }
        // Live records by user, oldest first.
        let mut chains: HashMap<&[u8], Vec<u32>> = HashMap::new();
        for seq in 0..len as u32 {
            let r = &self.records[seq as usize];
            if r.state().is_live() {
                chains.entry(self.arena.get(r.user)).or_default().push(seq);
            } else if (r.prev_live, r.next_live) != (NONE, NONE) {
                return Err(format!("released record {seq} is still linked"));
            }
        }
        if self.buyers.len() != chains.len() {
            return Err(format!("{} buyers indexed, {} hold live records", self.buyers.len(), chains.len()));
        }
        let mut used = std::collections::HashSet::new();
        let mut indexed = 0;
        for (user, seqs) in &chains {
            let head = *seqs.last().unwrap_or(&NONE);
            if self.buyer_head(user) != Some(head) {
                return Err(format!("buyer {user:?}: head {:?}, newest live {head}", self.buyer_head(user)));
            }
            let off = self.records[head as usize].user;
            let (mut at, mut newer, mut walked) = (head, NONE, Vec::new());
            while at != NONE && walked.len() <= seqs.len() {
                let r = &self.records[at as usize];
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
            let sum: u64 = seqs.iter().map(|&s| self.records[s as usize].qty()).sum();
            let h = &self.records[head as usize];
            match seqs.len() {
                1 if h.next_live != NONE => return Err(format!("buyer {user:?}: lone record with a quantity slot")),
                1 => {}
                _ if self.chain_qty.get(h.next_live as usize) != Some(&sum) || !used.insert(h.next_live) => {
                    return Err(format!("buyer {user:?}: quantity slot {} is not {sum}", h.next_live));
                }
                _ => {}
            }
            if self.buyer_qty(head) != sum {
                return Err(format!("buyer {user:?}: quantity {} but {sum}", self.buyer_qty(head)));
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
        let with_ids = (0..len).filter(|&i| self.records[i].id != GENERATED).count();
        if self.client_ids.len() != with_ids {
            return Err(format!("{} client ids indexed, {with_ids} records have one", self.client_ids.len()));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;

#[cfg(test)]
mod bench;
