//! One sale: its rules, its stock, its buyers and its reservations.
//!
//! Plain Rust, no FFI. The master decides (`accept_reserve`, `due_holds`,
//! `plan_retake`, `plan_adopt`) with its clock; every change is then made by
//! a method that takes the decision with all ids, buckets and timestamps
//! explicit, so the very same call replays on a replica or from the AOF.
//!
//! `Sale` composes owners, each with its state in its own file, and keeps
//! them consistent with each other; it holds the config, the buckets and
//! the units left in them itself:
//! - `records.rs`: the packed records, their names and client ids, the
//!   client-id index, multi-bucket takes and the tally (`Records`), and
//!   reading a record back (`RecordView`); `ids.rs` the generated ids;
//! - `buyers.rs`: buyer chains and what LIMIT reads (`Buyers`);
//! - `holds.rs`: the hold cursor and per-chunk hold counts (`Holds`);
//! - `chunks.rs`: storage that grows without moving (`Chunked`, `Arena`);
//! - `accepted.rs`: a RESERVE decided, not applied yet (`Accepted`);
//! - `draw_state.rs`: a draw sale's entrants, draw order and waitlist
//!   (`Draw`), and `draw_steps.rs` the `Sale` methods that enter, draw and
//!   promote;
//! - `tests/`: the sale's tests (`sale.rs`, `draw.rs`) and figures (`bench.rs`);
//! - `rules/transfers.rs`: SEND and RECV, over the parts of a sale they
//!   touch, lent out by `transfer_parts`.
//!
//! The small methods RESERVE calls across these files are `#[inline]`:
//! each file is a codegen unit of its own, and without the hint they stay
//! calls that one `sale.rs` had inlined (about 45 more instructions per
//! RESERVE under `bench/callgrind.sh`).
//!
//! Memory: a flash sale keeps a record per reservation, so records are
//! compact (32 bytes). User names and client ids live once in a byte arena;
//! generated ids (`<tag>-<seq>-<mac>`) are not stored at all; the two indexes hold
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

mod accepted;
mod buyers;
mod chunks;
mod draw_hash;
pub mod draw_state;
mod draw_steps;
mod entrant;
mod holds;
mod ids;
mod records;
mod transfer_steps;

#[cfg(test)]
#[path = "tests/bench.rs"]
mod bench;
#[cfg(test)]
#[path = "tests/draw.rs"]
mod draw_tests;
#[cfg(test)]
#[path = "tests/sale.rs"]
mod tests;

use crate::rules::buckets::{Buckets, Take};
use crate::rules::fence::{self, ReplId, UnfenceOutcome};
use crate::rules::reservation::{NewRecord, Reservation, State};
use crate::rules::transfers::{self, Transfers};

pub use crate::rules::config::{SaleConfig, SplitConfig, StreamConfig, MAX_PEERS, MAX_ROUND, MAX_SHARDS, MAX_TOTAL, OPEN_END};
pub use crate::rules::outcome::{ConfirmOutcome, EffectError, EnterRefusal, Refusal, ReleaseOutcome, TransferRefusal};
pub use accepted::Accepted;
pub use draw_state::{DrawBegin, EntrantRec, EntrantResult, Seed, SCAN_STEPS};
pub use records::{RecordView, Tally};

use accepted::{AcceptedId, Known, Takes};
use buyers::Buyers;
use draw_state::Draw;
use holds::Holds;
use records::{check_takes, Records, NONE};

#[derive(Clone, Debug)]
pub struct Sale {
    config: SaleConfig,
    buckets: Buckets,
    /// The units left in `buckets` (their sum, kept as they change).
    remaining: u64,
    records: Records,
    buyers: Buyers,
    holds: Holds,
    /// What the sale sent to and received from peer keys (a split sale);
    /// `None` until its first transfer, so a plain sale pays nothing.
    transfers: Option<Box<Transfers>>,
    /// A draw sale's entrants and draw (`INIT ... DRAW`); `None` for the
    /// others, which pay nothing for it.
    draw: Option<Box<Draw>>,
}

/// One DRAW call's work: the draw's stock, the entrants it looked at, the
/// winners' new reservations (in draw order).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DrawStep {
    pub stock: u64,
    pub examined: u32,
    pub winners: Vec<Reservation>,
    /// The first DRAW's: what it fixed (its effect carries it).
    pub begin: Option<DrawBegin>,
}

/// One waitlist promotion step's work (`Sale::promote_step`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Promotions {
    /// The new pending reservations, in the order they were promoted.
    pub records: Vec<Reservation>,
    /// The step stopped at one of its bounds (the promotions it may make,
    /// or the places it may produce, `draw_state::SCAN_STEPS`) with stock left:
    /// more may follow, and the next step continues.
    pub more: bool,
}

/// What INFO reports of a draw sale.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DrawReport {
    pub entrants: u64,
    pub drawn: u64,
    pub left_to_draw: u64,
    pub waitlist: u64,
    pub draw_stock: Option<u64>,
    pub seed_commitment: [u8; 32],
    /// Revealed once the draw has begun.
    pub seed: Option<Seed>,
    /// The entrant digest `D` so far.
    pub entrants_digest: [u8; 32],
    /// The declared beacon's name.
    pub beacon: Option<Box<[u8]>>,
    /// Once the draw has begun: the beacon value and the draw seed.
    pub begun: Option<DrawBegin>,
}

impl Sale {
    pub fn new(config: SaleConfig) -> Sale {
        let buckets = Buckets::new(config.total, config.shards);
        let draw = config.draw.map(|seed| Box::new(Draw::new(seed)));
        let id_key = config.id_key;
        Sale {
            remaining: config.total,
            config,
            buckets,
            records: Records::new(id_key),
            buyers: Buyers::new(),
            holds: Holds::default(),
            transfers: None,
            draw,
        }
    }

    /// An empty sale with room for `records` reservations (RDB load): the
    /// buyer index is sized up front, so a load never migrates it.
    pub fn with_capacity(config: SaleConfig, records: usize) -> Sale {
        Sale { records: Records::with_capacity(records, config.id_key), buyers: Buyers::with_capacity(records), ..Sale::new(config) }
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

    /// Whether the sale is fenced on a server whose replication id
    /// `current` gives (see `rules::fence`): RESERVE and ENTER answer
    /// FENCED, DRAW and SEND are refused, waitlist promotions wait. A sale
    /// without FENCE pays one `Option` check and never calls `current`.
    #[inline(always)]
    pub fn fenced(&self, current: impl FnOnce() -> ReplId) -> bool {
        fence::fenced(self.config.fence.as_ref(), current)
    }

    /// UNFENCE on a server whose id is `current`: `Unfenced` when the sale
    /// is fenced (the caller commits `Effect::Unfence(current)`), else
    /// `NotFenced` and nothing is to change.
    pub fn decide_unfence(&self, current: &ReplId) -> UnfenceOutcome {
        if self.fenced(|| *current) {
            UnfenceOutcome::Unfenced
        } else {
            UnfenceOutcome::NotFenced
        }
    }

    /// UNFENCE's effect: the sale records `id`, the master's id when it was
    /// lifted (replicas and AOF replay record that one, not their own).
    pub fn unfence(&mut self, id: ReplId) -> Result<(), EffectError> {
        match &mut self.config.fence {
            None => Err(EffectError("the sale was not created with FENCE")),
            Some(recorded) => {
                *recorded = id;
                Ok(())
            }
        }
    }

    pub fn buckets(&self) -> &Buckets {
        &self.buckets
    }

    pub fn remaining(&self) -> u64 {
        self.remaining
    }

    pub fn tally(&self) -> Tally {
        self.records.tally()
    }

    pub fn buyer_count(&self) -> usize {
        self.buyers.len()
    }

    pub fn record_count(&self) -> usize {
        self.records.len()
    }

    pub fn records(&self) -> impl Iterator<Item = RecordView<'_>> + '_ {
        (0..self.records.len() as u32).map(move |seq| self.view(seq))
    }

    pub fn get(&self, id: &[u8]) -> Option<RecordView<'_>> {
        self.find(id).map(|seq| self.view(seq))
    }

    fn find(&self, id: &[u8]) -> Option<u32> {
        self.records.find(id, self.config.tag)
    }

    fn view(&self, seq: u32) -> RecordView<'_> {
        self.records.view(seq, self.config.tag, self.config.hold_ms)
    }

    /// `sum(bucket remaining) + pending + confirmed == total + received - sent`.
    pub fn invariant_holds(&self) -> bool {
        let tally = self.records.tally();
        let held = u128::from(self.remaining) + u128::from(tally.pending) + u128::from(tally.confirmed);
        self.buckets.total_remaining() == self.remaining && Some(held) == self.capacity()
    }

    /// `total + received - sent`: the units this key holds in any form.
    /// `None` when the transfer counters do not add up (never in a sale
    /// built through its checked methods).
    pub fn capacity(&self) -> Option<u128> {
        transfers::capacity(self.config.total, self.transfers.as_deref())
    }

    /// A draw sale whose first DRAW fixed its stock.
    fn has_begun_drawing(&self) -> bool {
        self.draw.as_deref().is_some_and(|d| d.stock().is_some())
    }

    /// The creation time for a record made at `now_ms`: never before the
    /// previous record's, so creation order is deadline order even when the
    /// server clock steps back (and expiry can follow a cursor).
    pub fn stamp(&self, now_ms: u64) -> u64 {
        self.records.stamp(now_ms)
    }

    /// The earliest hold deadline, if any pending reservation can run out.
    pub fn next_deadline(&self) -> Option<u64> {
        self.holds.next_deadline(&self.records, self.config.hold_ms)
    }

    /// Ids of pending reservations whose hold has run out at `now_ms`, at
    /// most `max` of them, in creation order (which is deadline order: HOLD
    /// is fixed per round).
    pub fn due_holds(&self, now_ms: u64, max: usize) -> Vec<Box<[u8]>> {
        self.holds.due(&self.records, self.config.tag, self.config.hold_ms, now_ms, max)
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
    pub fn accept_reserve<'a>(&self, user: &'a [u8], qty: u64, reqid: Option<&'a [u8]>, now_ms: u64) -> Result<Accepted<'a>, Refusal> {
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
        let user_hash = self.records.hash(user);
        let head = self.buyers.head(&self.records, user, user_hash);
        if head.map_or(0, |h| self.buyers.qty(&self.records, h)).saturating_add(qty) > self.config.limit {
            return Err(Refusal::Limit(head.map(|h| self.view(h).id())));
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
            None => AcceptedId::Generated(self.records.generate_id(self.config.tag, |_| false)),
        };
        let created_ms = self.records.stamp(now_ms);
        let deadline_ms = if self.config.hold_ms == 0 { 0 } else { created_ms.saturating_add(self.config.hold_ms) };
        Ok(Accepted { id, user, qty, created_ms, deadline_ms, takes, user_hash })
    }

    /// Adds reservation records as decided (or as replicated, or as loaded),
    /// in order. Checks the whole batch first: a refused batch changes
    /// nothing. A live record takes its stock from the buckets it names.
    pub fn add_records(&mut self, recs: &[Reservation]) -> Result<(), EffectError> {
        if self.records.len().saturating_add(recs.len()) >= NONE as usize {
            return Err(EffectError("too many reservations"));
        }
        if !self.records.has_room(recs.len().saturating_mul(2)) {
            return Err(EffectError("sale is too large"));
        }
        let mut batch_ids = std::collections::HashSet::with_capacity(recs.len());
        let mut all_takes = Vec::new();
        let mut last_created = self.stamp(0);
        for rec in recs {
            self.records.check_new(rec.as_new(), self.config.tag, self.config.hold_ms, None)?;
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
            self.insert_record(rec.as_new(), Known::NOTHING);
        }
        Ok(())
    }

    /// Adds one record; see `add_records`.
    pub fn add_record(&mut self, rec: NewRecord) -> Result<(), EffectError> {
        self.add_checked(rec, Known::NOTHING)
    }

    /// Adds the record of a RESERVE this sale accepted (`accept_reserve`),
    /// as `add_record(a.as_new())` does; a generated id is known to be
    /// free and generated, so it is not looked up and parsed again.
    /// Only the sale that accepted `a` may apply it: the user's hash it
    /// carries is that sale's.
    pub fn add_accepted(&mut self, a: &Accepted) -> Result<(), EffectError> {
        debug_assert_eq!(a.user_hash, self.records.hash(a.user), "applied to the sale that accepted it");
        self.add_checked(a.as_new(), a.known())
    }

    fn add_checked(&mut self, rec: NewRecord, known: Known) -> Result<(), EffectError> {
        if self.records.len() >= NONE as usize - 1 {
            return Err(EffectError("too many reservations"));
        }
        self.records.check_new(rec, self.config.tag, self.config.hold_ms, known.fresh)?;
        if !self.buckets.can_take(rec.takes) {
            return Err(EffectError("stock is not there to take"));
        }
        self.insert_record(rec, known);
        Ok(())
    }

    /// Inserts a checked record whose stock is known to be there.
    fn insert_record(&mut self, rec: NewRecord, known: Known) {
        self.buckets.take(rec.takes);
        let seq = self.records.push(rec, self.config.tag, known.fresh);
        if rec.deadline_ms != 0 && rec.state == State::Pending {
            self.holds.count(seq, true);
        }
        if rec.state.is_live() {
            self.remaining -= rec.qty;
            match known.user_hash {
                Some(hash) => self.buyers.join_hashed(&mut self.records, seq, rec.user, hash),
                None => self.buyers.join(&mut self.records, seq, rec.user),
            }
        } else {
            self.records.own_user(seq, rec.user);
        }
        self.holds.advance(&self.records);
    }

    /// RELEASE (cause `Released`) or hold expiry (cause `Expired`).
    pub fn release(&mut self, id: &[u8], cause: State) -> ReleaseOutcome {
        let Some(seq) = self.find(id) else {
            return ReleaseOutcome::NotFound;
        };
        match self.records[seq].state() {
            State::Confirmed => return ReleaseOutcome::Confirmed,
            State::Released | State::Expired => return ReleaseOutcome::AlreadyReleased,
            State::Pending => {}
        }
        let cause = if cause == State::Expired { State::Expired } else { State::Released };
        self.buyers.leave(&mut self.records, seq);
        if self.records[seq].has_deadline() {
            self.holds.count(seq, false);
        }
        let takes = self.records.release(seq, cause);
        self.remaining += self.buckets.give_back(&takes);
        self.holds.advance(&self.records);
        ReleaseOutcome::Released
    }

    pub fn confirm(&mut self, id: &[u8]) -> ConfirmOutcome {
        let Some(seq) = self.find(id) else {
            return ConfirmOutcome::NotFound;
        };
        let rec = self.records[seq];
        match rec.state() {
            State::Confirmed => return ConfirmOutcome::AlreadyConfirmed,
            State::Released | State::Expired => return ConfirmOutcome::Released,
            State::Pending => {}
        }
        if rec.has_deadline() {
            self.holds.count(seq, false);
        }
        self.records.set_state(seq, State::Confirmed);
        self.holds.advance(&self.records);
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
        let rec = self.records[seq];
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
        self.records.set_state(seq, State::Confirmed);
        self.records.set_takes(seq, &takes);
        let user = self.records.user_of(seq).to_vec();
        self.buyers.join(&mut self.records, seq, &user);
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
        std::mem::size_of::<Sale>()
            + self.records.bytes()
            + self.holds.bytes()
            + self.buyers.bytes()
            + self.buckets.count() as usize * 16
            + self.transfers.as_ref().map_or(0, |t| t.heap_estimate())
            + self.draw.as_ref().map_or(0, |d| std::mem::size_of::<Draw>() + d.bytes())
    }

    /// RDB load: the stored bucket remainders must be exactly what the
    /// loaded reservations imply.
    pub fn check_buckets(&mut self, remaining: &[u64]) -> Result<(), EffectError> {
        if self.buckets.remaining() != remaining {
            return Err(EffectError("bucket remainders do not match the reservations"));
        }
        self.records.shrink();
        self.buyers.shrink(&self.records);
        Ok(())
    }

    /// Everything derived that a test cannot see from outside, each owner
    /// checking its own: record chunks and the client-id index, hold counts
    /// and cursor, the buyer chains (links, order, head, quantity slots and
    /// their free list) and the buyer index.
    #[cfg(test)]
    pub(crate) fn check_internals(&self) -> Result<(), String> {
        self.records.check()?;
        self.holds.check(&self.records)?;
        if let Some(d) = &self.draw {
            d.check()?;
        }
        self.buyers.check(&self.records)
    }
}

/// Whether two sales hold the same state (all that is persisted).
impl PartialEq for Sale {
    fn eq(&self, other: &Sale) -> bool {
        self.config == other.config
            && self.buckets == other.buckets
            && self.transfers == other.transfers
            && self.draw == other.draw
            && self.records.len() == other.records.len()
            && self.records().zip(other.records()).all(|(a, b)| a.to_owned() == b.to_owned())
    }
}
