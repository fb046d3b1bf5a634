//! One sale: its rules, its stock, its buyers and its reservations.
//!
//! Plain Rust, no FFI. The master decides (`decide_reserve`, `due_holds`,
//! `plan_retake`, `plan_adopt`) with its clock; every change is then made by
//! a method that takes the decision with all ids, buckets and timestamps
//! explicit, so the very same call replays on a replica or from the AOF.
//!
//! Memory: a flash sale keeps a record per reservation, so records are
//! compact (32 bytes). User names and client ids live once in a byte arena;
//! generated ids (`<tag>-<seq>`) are not stored at all; the two indexes hold
//! only sequence numbers; hold deadlines follow creation order, so expiry
//! needs a cursor, not a queue.

use std::collections::HashMap;
use std::hash::BuildHasher;

use hashbrown::hash_table::Entry;
use hashbrown::{DefaultHashBuilder, HashTable};

use crate::buckets::{Buckets, Take};
use crate::reservation::{valid_id, NewRecord, Reservation, State};

pub const MAX_TOTAL: u64 = 1_000_000_000_000_000;
pub const MAX_SHARDS: u32 = 1024;
pub const OPEN_END: u64 = u64::MAX;

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct StreamConfig {
    pub key: Box<[u8]>,
    /// Approximate trim length; `None` keeps every entry.
    pub maxlen: Option<u64>,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct SaleConfig {
    pub total: u64,
    pub shards: u32,
    pub limit: u64,
    /// 0: holds never run out.
    pub hold_ms: u64,
    pub start_ms: u64,
    /// `OPEN_END` when the sale has no end.
    pub end_ms: u64,
    pub stream: Option<StreamConfig>,
    /// Random per round (made on the master), prefix of generated ids so
    /// they do not repeat across REPLACE rounds.
    pub tag: u32,
}

/// Why a RESERVE changes nothing.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Refusal {
    Duplicate(Box<[u8]>),
    NotStarted,
    Ended,
    /// Carries the user's latest live reservation id.
    Limit(Option<Box<[u8]>>),
    SoldOut,
}

/// A change that does not fit the state it is applied to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EffectError(pub &'static str);

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReleaseOutcome {
    Released,
    AlreadyReleased,
    Confirmed,
    NotFound,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ConfirmOutcome {
    Confirmed,
    AlreadyConfirmed,
    Released,
    NotFound,
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
/// `Record::bucket` when the stock came from several buckets.
const MULTI: u16 = u16::MAX;

/// One reservation, 32 bytes.
#[derive(Clone, Copy, Debug)]
struct Record {
    qty: u64,
    created_ms: u64,
    /// Arena offset of the user id.
    user: u32,
    /// Arena offset of the client id, or `GENERATED`.
    id: u32,
    /// The buyer's previous live record (live records form a chain per
    /// buyer, newest first), or `NONE`.
    prev_live: u32,
    /// The one bucket the stock came from, or `MULTI` (see `multi_takes`).
    bucket: u16,
    state: State,
    /// The hold runs out at `created_ms + hold_ms`.
    has_deadline: bool,
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
            GENERATED => write_generated(out, self.sale.config.tag, self.seq),
            off => out.extend_from_slice(arena_bytes(&self.sale.arena, off)),
        }
    }

    pub fn id(&self) -> Box<[u8]> {
        let mut out = Vec::with_capacity(20);
        self.write_id(&mut out);
        out.into_boxed_slice()
    }

    pub fn user(&self) -> &'a [u8] {
        arena_bytes(&self.sale.arena, self.rec().user)
    }

    pub fn qty(&self) -> u64 {
        self.rec().qty
    }

    pub fn state(&self) -> State {
        self.rec().state
    }

    pub fn created_ms(&self) -> u64 {
        self.rec().created_ms
    }

    pub fn deadline_ms(&self) -> u64 {
        let r = self.rec();
        if r.has_deadline {
            r.created_ms.saturating_add(self.sale.config.hold_ms)
        } else {
            0
        }
    }

    /// Where the stock came from, while the reservation is live.
    pub fn takes(&self) -> Vec<Take> {
        let r = self.rec();
        match (r.state.is_live(), r.bucket) {
            (false, _) => Vec::new(),
            (true, MULTI) => self.sale.multi_takes.get(&self.seq).map_or_else(Vec::new, |t| t.to_vec()),
            (true, b) => vec![Take { bucket: u32::from(b), qty: r.qty }],
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
    records: Vec<Record>,
    /// User ids and client ids, each as `len - 1` then the bytes.
    arena: Vec<u8>,
    /// Sequence numbers of records with a client id, keyed by that id.
    client_ids: HashTable<u32>,
    /// Each buyer's newest live record, keyed by user id.
    buyers: HashTable<u32>,
    /// Takes of live records that borrowed from several buckets.
    multi_takes: HashMap<u32, Box<[Take]>>,
    /// No pending record with a deadline sits before this sequence number.
    hold_cursor: u32,
    tally: Tally,
    /// Per process, never persisted: keyed against crafted collisions.
    hasher: DefaultHashBuilder,
}

fn arena_bytes(arena: &[u8], off: u32) -> &[u8] {
    let off = off as usize;
    let len = arena[off] as usize + 1;
    &arena[off + 1..off + 1 + len]
}

fn write_generated(out: &mut Vec<u8>, tag: u32, seq: u32) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    out.extend((0..8).rev().map(|i| HEX[((tag >> (4 * i)) & 0xf) as usize]));
    out.push(b'-');
    let mut d = crate::effect::Digits::default();
    d.push_u64(u64::from(seq));
    out.extend_from_slice(d.as_bytes());
}

/// `Some(n)` when `id` is `<tag>-<n>` written the way `write_generated` does.
fn parse_generated(id: &[u8], tag: u32) -> Option<u32> {
    if id.len() < 10 || id[8] != b'-' {
        return None;
    }
    let hex = |b: u8| match b {
        b'0'..=b'9' => Some(u32::from(b - b'0')),
        b'a'..=b'f' => Some(u32::from(b - b'a' + 10)),
        _ => None,
    };
    let mut t: u32 = 0;
    for &b in &id[..8] {
        t = (t << 4) | hex(b)?;
    }
    let digits = &id[9..];
    if t != tag || (digits.len() > 1 && digits[0] == b'0') || digits.len() > 10 {
        return None;
    }
    let mut n: u64 = 0;
    for &b in digits {
        if !b.is_ascii_digit() {
            return None;
        }
        n = n * 10 + u64::from(b - b'0');
    }
    u32::try_from(n).ok().filter(|&n| n != NONE)
}

impl Sale {
    pub fn new(config: SaleConfig) -> Sale {
        let buckets = Buckets::new(config.total, config.shards);
        Sale {
            remaining: config.total,
            config,
            buckets,
            records: Vec::new(),
            arena: Vec::new(),
            client_ids: HashTable::new(),
            buyers: HashTable::new(),
            multi_takes: HashMap::new(),
            hold_cursor: 0,
            tally: Tally::default(),
            hasher: DefaultHashBuilder::default(),
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

    /// `sum(bucket remaining) + pending + confirmed == total`.
    pub fn invariant_holds(&self) -> bool {
        self.buckets.total_remaining() == self.remaining
            && self.remaining.checked_add(self.tally.pending).and_then(|v| v.checked_add(self.tally.confirmed))
                == Some(self.config.total)
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
        self.client_ids
            .find(self.hash(id), |&s| {
                let off = records[s as usize].id;
                off != GENERATED && arena_bytes(arena, off) == id
            })
            .copied()
    }

    /// The buyer's newest live record.
    fn buyer_head(&self, user: &[u8]) -> Option<u32> {
        let (records, arena) = (&self.records, &self.arena);
        self.buyers.find(self.hash(user), |&s| arena_bytes(arena, records[s as usize].user) == user).copied()
    }

    /// Quantity the buyer holds in live reservations.
    fn buyer_qty(&self, head: u32) -> u64 {
        let mut qty: u64 = 0;
        let mut seq = head;
        while seq != NONE {
            let r = &self.records[seq as usize];
            qty = qty.saturating_add(r.qty);
            seq = r.prev_live;
        }
        qty
    }

    /// The creation time for a record made at `now_ms`: never before the
    /// previous record's, so creation order is deadline order even when the
    /// server clock steps back (and expiry can follow a cursor).
    pub fn stamp(&self, now_ms: u64) -> u64 {
        self.records.last().map_or(now_ms, |r| now_ms.max(r.created_ms))
    }

    /// The earliest hold deadline, if any pending reservation can run out.
    pub fn next_deadline(&self) -> Option<u64> {
        self.records[self.hold_cursor as usize..]
            .iter()
            .find(|r| r.has_deadline && r.state == State::Pending)
            .map(|r| r.created_ms.saturating_add(self.config.hold_ms))
    }

    /// Moves the hold cursor past records that can no longer run out.
    fn advance_hold_cursor(&mut self) {
        let skip = self.records[self.hold_cursor as usize..]
            .iter()
            .take_while(|r| !(r.has_deadline && r.state == State::Pending))
            .count();
        self.hold_cursor += skip as u32;
    }

    /// Decides a RESERVE at `now_ms` without changing anything. On success
    /// the returned record is what `add_record` takes.
    pub fn decide_reserve(
        &self,
        user: &[u8],
        qty: u64,
        reqid: Option<&[u8]>,
        now_ms: u64,
    ) -> Result<Reservation, Refusal> {
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
        let takes = self.buckets.plan_take(self.buckets.home_of(user), qty).ok_or(Refusal::SoldOut)?;
        let id = match reqid {
            Some(id) => id.into(),
            None => self.generate_id(),
        };
        let created_ms = self.stamp(now_ms);
        let deadline_ms = if self.config.hold_ms == 0 { 0 } else { created_ms.saturating_add(self.config.hold_ms) };
        Ok(Reservation { id, user: user.into(), qty, state: State::Pending, created_ms, deadline_ms, takes })
    }

    /// `<tag>-<seq>` for the next record; in the rare case a client already
    /// took that id as its REQID, `<tag>-<seq>-<k>` with the smallest free k.
    fn generate_id(&self) -> Box<[u8]> {
        let seq = self.records.len() as u32;
        let mut id = Vec::with_capacity(8 + 1 + 10);
        write_generated(&mut id, self.config.tag, seq);
        if self.find(&id).is_none() {
            return Box::from(id.as_slice());
        }
        let base = id.len();
        for k in 1u64.. {
            id.truncate(base);
            id.extend_from_slice(format!("-{k}").as_bytes());
            if self.find(&id).is_none() {
                break;
            }
        }
        id.into_boxed_slice()
    }

    /// Adds reservation records as decided (or as replicated, or as loaded),
    /// in order. Checks the whole batch first: a refused batch changes
    /// nothing. A live record takes its stock from the buckets it names.
    pub fn add_records(&mut self, recs: &[Reservation]) -> Result<(), EffectError> {
        if self.records.len().saturating_add(recs.len()) >= NONE as usize {
            return Err(EffectError("too many reservations"));
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
        if self.arena.len() > (NONE as usize) - 2 * 260 {
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

    /// Interns `bytes` in the arena.
    fn intern(&mut self, bytes: &[u8]) -> u32 {
        let off = self.arena.len() as u32;
        self.arena.push((bytes.len() - 1) as u8);
        self.arena.extend_from_slice(bytes);
        off
    }

    /// Inserts a checked record whose stock is known to be there.
    fn insert_record(&mut self, rec: NewRecord) {
        let seq = self.records.len() as u32;
        self.buckets.take(rec.takes);
        let id = if parse_generated(rec.id, self.config.tag) == Some(seq) { GENERATED } else { self.intern(rec.id) };
        let bucket = match rec.takes {
            [one] => one.bucket as u16,
            [] => 0,
            many => {
                self.multi_takes.insert(seq, many.into());
                MULTI
            }
        };
        self.records.push(Record {
            qty: rec.qty,
            created_ms: rec.created_ms,
            user: NONE,
            id,
            prev_live: NONE,
            bucket,
            state: rec.state,
            has_deadline: rec.deadline_ms != 0,
        });
        if id != GENERATED {
            let hash = self.hash(rec.id);
            let (records, arena) = (&self.records, &self.arena);
            self.client_ids.insert_unique(hash, seq, |&s| self.hasher.hash_one(arena_bytes(arena, records[s as usize].id)));
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
            let user = self.intern(rec.user);
            self.records[seq as usize].user = user;
        }
        self.advance_hold_cursor();
    }

    /// Links a live record into its buyer's chain (newest first), sharing
    /// the buyer's interned name.
    fn join_buyer(&mut self, seq: u32, user: &[u8]) {
        let hash = self.hash(user);
        // One probe finds the buyer or the slot for a new one.
        let (records, arena, hasher) = (&self.records, &self.arena, &self.hasher);
        let name_of = |s: u32| arena_bytes(arena, records[s as usize].user);
        let head = match self.buyers.entry(hash, |&s| name_of(s) == user, |&s| hasher.hash_one(name_of(s))) {
            Entry::Vacant(slot) => {
                slot.insert(seq);
                None
            }
            Entry::Occupied(mut slot) => {
                let head = *slot.get();
                if seq > head {
                    *slot.get_mut() = seq;
                }
                Some(head)
            }
        };
        let Some(head) = head else {
            if self.records[seq as usize].user == NONE {
                let off = self.intern(user);
                self.records[seq as usize].user = off;
            }
            self.records[seq as usize].prev_live = NONE;
            return;
        };
        self.records[seq as usize].user = self.records[head as usize].user;
        if seq > head {
            self.records[seq as usize].prev_live = head;
            return;
        }
        // An older record coming back (RECONCILE retake): keep the chain sorted.
        let mut at = head;
        while self.records[at as usize].prev_live != NONE && self.records[at as usize].prev_live > seq {
            at = self.records[at as usize].prev_live;
        }
        self.records[seq as usize].prev_live = self.records[at as usize].prev_live;
        self.records[at as usize].prev_live = seq;
    }

    /// Unlinks a record that stopped being live from its buyer's chain.
    fn leave_buyer(&mut self, seq: u32) {
        let prev = self.records[seq as usize].prev_live;
        let (records, arena) = (&self.records, &self.arena);
        let user = arena_bytes(arena, records[seq as usize].user);
        let hash = self.hasher.hash_one(user);
        // One probe: when the record heads the chain, the buyer's entry is
        // moved to the previous record or removed in place.
        let head = match self.buyers.find_entry(hash, |&s| arena_bytes(arena, records[s as usize].user) == user) {
            Err(_) => None,
            Ok(entry) if *entry.get() != seq => Some(*entry.get()),
            Ok(entry) if prev == NONE => {
                entry.remove();
                None
            }
            Ok(mut entry) => {
                *entry.get_mut() = prev;
                None
            }
        };
        self.records[seq as usize].prev_live = NONE;
        let Some(head) = head else {
            return;
        };
        let mut at = head;
        while self.records[at as usize].prev_live != NONE {
            if self.records[at as usize].prev_live == seq {
                self.records[at as usize].prev_live = prev;
                return;
            }
            at = self.records[at as usize].prev_live;
        }
    }

    /// Ids of pending reservations whose hold has run out at `now_ms`, in
    /// creation order (which is deadline order: HOLD is fixed per round).
    pub fn due_holds(&self, now_ms: u64) -> Vec<Box<[u8]>> {
        let hold = self.config.hold_ms;
        let mut due = Vec::new();
        for (i, r) in self.records.iter().enumerate().skip(self.hold_cursor as usize) {
            if !(r.has_deadline && r.state == State::Pending) {
                continue;
            }
            if r.created_ms.saturating_add(hold) > now_ms {
                break;
            }
            due.push(RecordView { sale: self, seq: i as u32 }.id());
        }
        due
    }

    /// RELEASE (cause `Released`) or hold expiry (cause `Expired`).
    pub fn release(&mut self, id: &[u8], cause: State) -> ReleaseOutcome {
        let Some(seq) = self.find(id) else {
            return ReleaseOutcome::NotFound;
        };
        match self.records[seq as usize].state {
            State::Confirmed => return ReleaseOutcome::Confirmed,
            State::Released | State::Expired => return ReleaseOutcome::AlreadyReleased,
            State::Pending => {}
        }
        let takes = RecordView { sale: self, seq }.takes();
        let cause = if cause == State::Expired { State::Expired } else { State::Released };
        let qty = self.records[seq as usize].qty;
        self.leave_buyer(seq);
        self.records[seq as usize].state = cause;
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
        let rec = &mut self.records[seq as usize];
        match rec.state {
            State::Confirmed => return ConfirmOutcome::AlreadyConfirmed,
            State::Released | State::Expired => return ConfirmOutcome::Released,
            State::Pending => {}
        }
        rec.state = State::Confirmed;
        let qty = rec.qty;
        self.tally.pending -= qty;
        self.tally.confirmed += qty;
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
        if !rec.state.is_released() {
            return Err(EffectError("reservation is not released"));
        }
        check_takes(&takes, rec.qty)?;
        if !self.buckets.can_take(&takes) {
            return Err(EffectError("stock is not there to take"));
        }
        self.buckets.take(&takes);
        self.remaining -= rec.qty;
        self.tally.released -= rec.qty;
        if rec.state == State::Expired {
            self.tally.expired -= rec.qty;
        }
        self.tally.confirmed += rec.qty;
        let bucket = match takes.as_slice() {
            [one] => one.bucket as u16,
            many => {
                self.multi_takes.insert(seq, many.into());
                MULTI
            }
        };
        let r = &mut self.records[seq as usize];
        r.state = State::Confirmed;
        r.bucket = bucket;
        let user = arena_bytes(&self.arena, r.user).to_vec();
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

    /// Bytes this sale holds on the heap, for MEMORY USAGE.
    pub fn heap_estimate(&self) -> usize {
        use std::mem::size_of;
        size_of::<Sale>()
            + self.records.capacity() * size_of::<Record>()
            + self.arena.capacity()
            + self.client_ids.allocation_size()
            + self.buyers.allocation_size()
            + self.multi_takes.values().map(|t| 24 + t.len() * size_of::<Take>()).sum::<usize>()
            + self.buckets.count() as usize * 16
    }

    /// An empty sale with room for `records` reservations (RDB load).
    /// The buyer index is sized up front too: growing it rehashes every
    /// buyer, and that dominated load time.
    pub fn with_capacity(config: SaleConfig, records: usize) -> Sale {
        let mut sale = Sale::new(config);
        sale.records.reserve_exact(records);
        sale.buyers = HashTable::with_capacity(records);
        // A short user id takes about ten arena bytes.
        sale.arena.reserve(records.saturating_mul(10));
        sale
    }

    /// RDB load: the stored bucket remainders must be exactly what the
    /// loaded reservations imply.
    pub fn check_buckets(&mut self, remaining: &[u64]) -> Result<(), EffectError> {
        if self.buckets.remaining() != remaining {
            return Err(EffectError("bucket remainders do not match the reservations"));
        }
        if self.arena.capacity() > self.arena.len() + self.arena.len() / 4 + 64 {
            self.arena.shrink_to_fit();
        }
        // Give back what `with_capacity` reserved for buyers that turned out
        // to be released.
        if self.buyers.capacity() > 2 * self.buyers.len() + 16 {
            let (records, arena, hasher) = (&self.records, &self.arena, &self.hasher);
            self.buyers.shrink_to_fit(|&s| hasher.hash_one(arena_bytes(arena, records[s as usize].user)));
        }
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
            && self.records.len() == other.records.len()
            && self.records().zip(other.records()).all(|(a, b)| a.to_owned() == b.to_owned())
    }
}

#[cfg(test)]
mod bench {
    //! Figures, not assertions: `cargo test --release --lib
    //! --no-default-features -- --ignored --nocapture growth`.

    use std::time::Instant;

    use super::*;

    fn open(limit: u64) -> SaleConfig {
        SaleConfig { total: MAX_TOTAL, shards: 1, limit, hold_ms: 0, start_ms: 0, end_ms: OPEN_END, stream: None, tag: 7 }
    }

    /// RESERVE as the module runs it: decide, then apply.
    fn reserve(s: &mut Sale, user: &[u8], now: u64) -> Option<Box<[u8]>> {
        let rec = s.decide_reserve(user, 1, None, now).ok()?;
        s.add_record(rec.as_new()).ok()?;
        Some(rec.id)
    }

    fn xorshift(x: &mut u64) -> u64 {
        *x ^= *x << 13;
        *x ^= *x >> 7;
        *x ^= *x << 17;
        *x
    }

    /// One sale grows to 3M random buyers, RESERVE by RESERVE: nanoseconds
    /// per call, and the heap at the end.
    fn grow(n: usize) -> (Vec<u64>, usize) {
        let mut s = Sale::new(open(1));
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let mut times = Vec::with_capacity(n);
        let mut user = Vec::with_capacity(24);
        for i in 0..n {
            user.clear();
            user.extend_from_slice(format!("user:{:016x}", xorshift(&mut x)).as_bytes());
            let t = Instant::now();
            assert!(reserve(&mut s, &user, i as u64).is_some());
            times.push(t.elapsed().as_nanos() as u64);
        }
        (times, s.heap_estimate())
    }

    fn slowest(times: &[u64], k: usize) -> String {
        let mut by: Vec<(u64, usize)> = times.iter().copied().zip(0..).collect();
        by.sort_unstable_by(|a, b| b.cmp(a));
        by.iter().take(k).map(|(ns, i)| format!("{:.0} us @{i}", *ns as f64 / 1e3)).collect::<Vec<_>>().join(", ")
    }

    /// The slowest single RESERVE while one sale grows to 3M random buyers.
    /// The same sequence runs twice and each call keeps its faster time: a
    /// stall of the structure (a rehash, a moved vector) repeats at the
    /// same call, a preemption on a busy machine does not.
    #[test]
    #[ignore]
    fn growth_worst_insert() {
        const N: usize = 3_000_000;
        let all = Instant::now();
        let (first, heap) = grow(N);
        let (second, _) = grow(N);
        let secs = all.elapsed().as_secs_f64() / 2.0;
        let best: Vec<u64> = first.iter().zip(&second).map(|(a, b)| *a.min(b)).collect();
        let mut sorted = best.clone();
        sorted.sort_unstable();
        let pct = |p: f64| sorted[((N as f64 * p) as usize).min(N - 1)] as f64 / 1e3;
        println!("growth: {N} buyers, {secs:.2} s per run; median {:.2} us, p99.9 {:.1} us, p99.99 {:.1} us", pct(0.5), pct(0.999), pct(0.9999));
        println!("growth: slowest (faster of two runs): {}", slowest(&best, 6));
        println!("growth: slowest (first run, raw): {}", slowest(&first, 4));
        println!("growth: heap {:.1} B per reservation at {N}", heap as f64 / N as f64);
        // What a doubling records vector costs where the allocator moves
        // large blocks (jemalloc in Redis; glibc here remaps them instead).
        let v = vec![1u8; 64 << 20];
        let t = Instant::now();
        let copy = v.clone();
        println!("growth: copying 64 MiB (records at 2M, moved on growth): {:.1} ms", t.elapsed().as_secs_f64() * 1e3);
        drop((v, copy));
    }

    /// Heap per reservation at 1M reservations, short user ids, generated ids.
    #[test]
    #[ignore]
    fn growth_memory_per_reservation() {
        const N: usize = 1_000_000;
        let mut s = Sale::new(open(1));
        for i in 0..N {
            assert!(reserve(&mut s, format!("u{i:06}").as_bytes(), 0).is_some());
        }
        println!("growth: heap_estimate {:.1} B per reservation at {N} (u123456 users, generated ids)", s.heap_estimate() as f64 / N as f64);
    }

    /// One buyer with a huge LIMIT: RESERVE and RELEASE cost against the
    /// buyer's own live reservations.
    #[test]
    #[ignore]
    fn growth_one_buyer_chain() {
        const N: usize = 200_000;
        let mut s = Sale::new(open(100_000_000));
        let mut ids = Vec::with_capacity(N);
        let (mut worst, mut last) = (0u128, 0u128);
        for i in 0..N {
            let t = Instant::now();
            ids.push(reserve(&mut s, b"whale", i as u64).expect("reserved"));
            let ns = t.elapsed().as_nanos();
            worst = worst.max(ns);
            if i >= N - 1000 {
                last += ns;
            }
        }
        println!("growth: one buyer, {N} RESERVEs: last 1000 average {:.2} us, slowest {:.0} us", last as f64 / 1e6, worst as f64 / 1e3);
        // Release the oldest first: the far end of the chain.
        let t = Instant::now();
        for id in &ids[..1000] {
            assert_eq!(s.release(id, State::Released), ReleaseOutcome::Released);
        }
        println!("growth: one buyer, RELEASE of the 1000 oldest: average {:.2} us", t.elapsed().as_nanos() as f64 / 1e6);
    }
}
