//! One sale: its rules, its stock, its buyers and its reservations.
//!
//! Plain Rust, no FFI. The master decides (`decide_reserve`, `due_holds`,
//! `plan_retake`) with its clock; every change is then made by a method that
//! takes the decision with all ids, buckets and timestamps explicit, so the
//! very same call replays on a replica or from the AOF.

use std::collections::{BTreeSet, HashMap};

use crate::buckets::{Buckets, Take};
use crate::reservation::{valid_id, Reservation, State};

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

/// A replicated change that does not fit the state it is applied to.
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

#[derive(Clone, Debug, Default, PartialEq, Eq)]
struct Buyer {
    /// Quantity held by live reservations.
    qty: u64,
    /// Sequence numbers of live reservations, ascending.
    live: Vec<u32>,
}

/// Units per reservation state, kept up to date by every change.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Tally {
    pub pending: u64,
    pub confirmed: u64,
    pub released: u64,
    pub expired: u64,
}

#[derive(Clone, Debug)]
pub struct Sale {
    config: SaleConfig,
    buckets: Buckets,
    remaining: u64,
    /// In creation order; a reservation's index is its sequence number.
    records: Vec<Reservation>,
    by_id: HashMap<Box<[u8]>, u32>,
    buyers: HashMap<Box<[u8]>, Buyer>,
    /// Pending reservations that can run out, by (deadline, seq).
    holds: BTreeSet<(u64, u32)>,
    tally: Tally,
}

impl Sale {
    pub fn new(config: SaleConfig) -> Sale {
        let buckets = Buckets::new(config.total, config.shards);
        Sale {
            remaining: config.total,
            config,
            buckets,
            records: Vec::new(),
            by_id: HashMap::new(),
            buyers: HashMap::new(),
            holds: BTreeSet::new(),
            tally: Tally::default(),
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

    pub fn records(&self) -> &[Reservation] {
        &self.records
    }

    pub fn get(&self, id: &[u8]) -> Option<&Reservation> {
        self.by_id.get(id).map(|&seq| &self.records[seq as usize])
    }

    /// `sum(bucket remaining) + pending + confirmed == total`.
    pub fn invariant_holds(&self) -> bool {
        self.buckets.total_remaining() == self.remaining
            && self.remaining.checked_add(self.tally.pending).and_then(|v| v.checked_add(self.tally.confirmed))
                == Some(self.config.total)
    }

    /// The earliest hold deadline, if any pending reservation can run out.
    pub fn next_deadline(&self) -> Option<u64> {
        self.holds.first().map(|&(deadline, _)| deadline)
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
            if self.by_id.contains_key(id) {
                return Err(Refusal::Duplicate(id.into()));
            }
        }
        if now_ms < self.config.start_ms {
            return Err(Refusal::NotStarted);
        }
        if now_ms >= self.config.end_ms {
            return Err(Refusal::Ended);
        }
        let held = self.buyers.get(user);
        if held.map_or(0, |b| b.qty).saturating_add(qty) > self.config.limit {
            let latest = held.and_then(|b| b.live.last()).map(|&seq| self.records[seq as usize].id.clone());
            return Err(Refusal::Limit(latest));
        }
        if self.remaining < qty {
            return Err(Refusal::SoldOut);
        }
        let takes = self.buckets.plan_take(self.buckets.home_of(user), qty).ok_or(Refusal::SoldOut)?;
        let id = match reqid {
            Some(id) => id.into(),
            None => self.generate_id(),
        };
        let deadline_ms = if self.config.hold_ms == 0 { 0 } else { now_ms.saturating_add(self.config.hold_ms) };
        Ok(Reservation { id, user: user.into(), qty, state: State::Pending, created_ms: now_ms, deadline_ms, takes })
    }

    /// `<tag>-<n>`, n counting reservations; skips ids a client took.
    fn generate_id(&self) -> Box<[u8]> {
        let mut n = self.records.len() as u64;
        loop {
            let id = format!("{:08x}-{}", self.config.tag, n).into_bytes().into_boxed_slice();
            if !self.by_id.contains_key(&id) {
                return id;
            }
            n += 1;
        }
    }

    /// Adds reservation records as decided (or as replicated, or as loaded),
    /// in order. Checks the whole batch first: a refused batch changes
    /// nothing. A live record takes its stock from the buckets it names.
    pub fn add_records(&mut self, recs: Vec<Reservation>) -> Result<(), EffectError> {
        if self.records.len().saturating_add(recs.len()) >= u32::MAX as usize {
            return Err(EffectError("too many reservations"));
        }
        let mut batch_ids = std::collections::HashSet::with_capacity(recs.len());
        let mut all_takes = Vec::new();
        for rec in &recs {
            self.check_record(rec)?;
            if !batch_ids.insert(&rec.id) {
                return Err(EffectError("reservation id repeats"));
            }
            all_takes.extend_from_slice(&rec.takes);
        }
        if !self.buckets.can_take(&all_takes) {
            return Err(EffectError("stock is not there to take"));
        }
        for rec in recs {
            self.insert_record(rec);
        }
        Ok(())
    }

    /// Adds one record; see `add_records`.
    pub fn add_record(&mut self, rec: Reservation) -> Result<(), EffectError> {
        self.check_record(&rec)?;
        if !self.buckets.can_take(&rec.takes) {
            return Err(EffectError("stock is not there to take"));
        }
        if self.records.len() >= u32::MAX as usize {
            return Err(EffectError("too many reservations"));
        }
        self.insert_record(rec);
        Ok(())
    }

    /// Everything about a record that does not depend on the rest of a batch.
    fn check_record(&self, rec: &Reservation) -> Result<(), EffectError> {
        if !valid_id(&rec.id) || !valid_id(&rec.user) {
            return Err(EffectError("bad reservation or user id"));
        }
        if rec.qty == 0 || rec.qty > MAX_TOTAL {
            return Err(EffectError("reservation quantity out of range"));
        }
        if self.by_id.contains_key(&rec.id) {
            return Err(EffectError("reservation id exists"));
        }
        if rec.state.is_live() {
            check_takes(&rec.takes, rec.qty)
        } else if rec.takes.is_empty() {
            Ok(())
        } else {
            Err(EffectError("released reservation holds stock"))
        }
    }

    /// Inserts a checked record whose stock is known to be there.
    fn insert_record(&mut self, rec: Reservation) {
        let seq = self.records.len() as u32;
        self.buckets.take(&rec.takes);
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
            self.join_buyer(&rec.user, rec.qty, seq);
        }
        if rec.state == State::Pending && rec.deadline_ms != 0 {
            self.holds.insert((rec.deadline_ms, seq));
        }
        self.by_id.insert(rec.id.clone(), seq);
        self.records.push(rec);
    }

    fn join_buyer(&mut self, user: &[u8], qty: u64, seq: u32) {
        let buyer = match self.buyers.get_mut(user) {
            Some(b) => b,
            None => self.buyers.entry(user.into()).or_default(),
        };
        buyer.qty = buyer.qty.saturating_add(qty);
        let at = buyer.live.partition_point(|&s| s < seq);
        buyer.live.insert(at, seq);
    }

    fn leave_buyer(&mut self, user: &[u8], qty: u64, seq: u32) {
        if let Some(buyer) = self.buyers.get_mut(user) {
            buyer.qty = buyer.qty.saturating_sub(qty);
            buyer.live.retain(|&s| s != seq);
            if buyer.live.is_empty() {
                self.buyers.remove(user);
            }
        }
    }

    /// Ids of pending reservations whose hold has run out at `now_ms`.
    pub fn due_holds(&self, now_ms: u64) -> Vec<Box<[u8]>> {
        self.holds
            .range(..=(now_ms, u32::MAX))
            .map(|&(_, seq)| self.records[seq as usize].id.clone())
            .collect()
    }

    /// RELEASE (cause `Released`) or hold expiry (cause `Expired`).
    pub fn release(&mut self, id: &[u8], cause: State) -> ReleaseOutcome {
        let Some(&seq) = self.by_id.get(id) else {
            return ReleaseOutcome::NotFound;
        };
        let rec = &mut self.records[seq as usize];
        match rec.state {
            State::Confirmed => return ReleaseOutcome::Confirmed,
            State::Released | State::Expired => return ReleaseOutcome::AlreadyReleased,
            State::Pending => {}
        }
        let cause = if cause == State::Expired { State::Expired } else { State::Released };
        rec.state = cause;
        let (qty, deadline) = (rec.qty, rec.deadline_ms);
        let takes = std::mem::take(&mut rec.takes);
        let user = rec.user.clone();
        self.remaining += self.buckets.give_back(&takes);
        self.tally.pending -= qty;
        self.tally.released += qty;
        if cause == State::Expired {
            self.tally.expired += qty;
        }
        self.holds.remove(&(deadline, seq));
        self.leave_buyer(&user, qty, seq);
        ReleaseOutcome::Released
    }

    pub fn confirm(&mut self, id: &[u8]) -> ConfirmOutcome {
        let Some(&seq) = self.by_id.get(id) else {
            return ConfirmOutcome::NotFound;
        };
        let rec = &mut self.records[seq as usize];
        match rec.state {
            State::Confirmed => return ConfirmOutcome::AlreadyConfirmed,
            State::Released | State::Expired => return ConfirmOutcome::Released,
            State::Pending => {}
        }
        rec.state = State::Confirmed;
        let (qty, deadline) = (rec.qty, rec.deadline_ms);
        self.tally.pending -= qty;
        self.tally.confirmed += qty;
        self.holds.remove(&(deadline, seq));
        ConfirmOutcome::Confirmed
    }

    /// Plans taking stock again for a released reservation (RECONCILE APPLY).
    /// `None` when the stock is not there.
    pub fn plan_retake(&self, id: &[u8]) -> Option<Vec<Take>> {
        let rec = self.get(id)?;
        if !rec.state.is_released() || self.remaining < rec.qty {
            return None;
        }
        self.buckets.plan_take(self.buckets.home_of(&rec.user), rec.qty)
    }

    /// A released reservation takes `takes` and becomes confirmed: the
    /// order ledger says the order exists.
    pub fn retake(&mut self, id: &[u8], takes: Vec<Take>) -> Result<(), EffectError> {
        let seq = *self.by_id.get(id).ok_or(EffectError("no such reservation"))?;
        let rec = &self.records[seq as usize];
        if !rec.state.is_released() {
            return Err(EffectError("reservation is not released"));
        }
        check_takes(&takes, rec.qty)?;
        if !self.buckets.can_take(&takes) {
            return Err(EffectError("stock is not there to take"));
        }
        let (qty, was) = (rec.qty, rec.state);
        self.buckets.take(&takes);
        self.remaining -= qty;
        self.tally.released -= qty;
        if was == State::Expired {
            self.tally.expired -= qty;
        }
        self.tally.confirmed += qty;
        let rec = &mut self.records[seq as usize];
        rec.state = State::Confirmed;
        rec.takes = takes;
        let user = rec.user.clone();
        self.join_buyer(&user, qty, seq);
        Ok(())
    }

    /// Plans stock for an order the sale has never seen (RECONCILE APPLY).
    pub fn plan_adopt(&self, user: &[u8], qty: u64) -> Option<Vec<Take>> {
        if self.remaining < qty {
            return None;
        }
        self.buckets.plan_take(self.buckets.home_of(user), qty)
    }

    /// Bytes this sale holds on the heap, for MEMORY USAGE (an estimate:
    /// map overheads are counted from capacities).
    pub fn heap_estimate(&self) -> usize {
        use std::mem::size_of;
        let boxed = size_of::<Box<[u8]>>();
        let record_heap: usize = self
            .records
            .iter()
            .map(|r| 2 * r.id.len() + r.user.len() + r.takes.capacity() * size_of::<Take>())
            .sum();
        let buyer_heap: usize = self.buyers.iter().map(|(u, b)| u.len() + b.live.capacity() * 4).sum();
        size_of::<Sale>()
            + self.records.capacity() * size_of::<Reservation>()
            + record_heap
            + self.by_id.capacity() * (boxed + 4 + 1)
            + self.buyers.capacity() * (boxed + size_of::<Buyer>() + 1)
            + buyer_heap
            + self.holds.len() * 2 * size_of::<(u64, u32)>()
            + self.buckets.len() as usize * 16
    }

    /// Rebuilds a sale from its parts (RDB load). Checks every record and
    /// that the stored bucket remainders are exactly what the records imply.
    pub fn from_parts(
        config: SaleConfig,
        remaining: Vec<u64>,
        records: Vec<Reservation>,
    ) -> Result<Sale, EffectError> {
        if remaining.len() != config.shards as usize {
            return Err(EffectError("bucket count differs from SHARDS"));
        }
        let mut sale = Sale::new(config);
        sale.add_records(records)?;
        if sale.buckets.remaining() != remaining.as_slice() {
            return Err(EffectError("bucket remainders do not match the reservations"));
        }
        Ok(sale)
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
        self.config == other.config && self.buckets == other.buckets && self.records == other.records
    }
}
