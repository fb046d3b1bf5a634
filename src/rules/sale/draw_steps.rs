//! A draw sale's steps on `Sale`: entering, the draw, the waitlist. The
//! master decides (`decide_enter`, `draw_step`, `promote_step`) and the
//! `add_`/`apply_` methods take the decision with every id and timestamp
//! explicit, as everywhere in `Sale`.

use super::buyers::Buyers;
use super::draw_state::{self as draw, DrawBegin, EntrantRec, EntrantResult, Fit};
use super::{DrawReport, DrawStep, Promotions, Sale};
use crate::rules::config::MAX_BEACON_VALUE;
use crate::rules::fence::ReplId;
use crate::rules::outcome::{EffectError, EnterRefusal};
use crate::rules::reservation::{Reservation, State};

impl Sale {
    pub fn is_draw(&self) -> bool {
        self.draw.is_some()
    }

    /// Decides an ENTER at `now_ms` without changing anything: the new
    /// entrant, or why there is none (statuses in the contract's order).
    pub fn decide_enter(&self, user: &[u8], qty: u64, reqid: Option<&[u8]>, now_ms: u64) -> Result<EntrantRec, EnterRefusal> {
        let d = self.draw.as_deref().ok_or(EnterRefusal::NotDraw)?;
        if d.find_user(user).is_some() {
            return Err(EnterRefusal::AlreadyEntered);
        }
        if let Some(r) = reqid {
            if d.find_reqid(r).is_some() {
                return Err(EnterRefusal::ReqidOfEntrant);
            }
            if self.find(r).is_some() {
                return Err(EnterRefusal::ReqidOfReservation);
            }
        }
        if d.stock().is_some() {
            return Err(EnterRefusal::Drawn);
        }
        if now_ms < self.config.start_ms {
            return Err(EnterRefusal::NotStarted);
        }
        if now_ms >= self.config.end_ms {
            return Err(EnterRefusal::Ended);
        }
        Ok(EntrantRec { user: user.into(), qty, reqid: reqid.map(Into::into), result: EntrantResult::Entered })
    }

    /// Adds entrants as entered (or replicated, or loaded), checked whole
    /// first: a refused batch changes nothing.
    pub fn add_entrants(&mut self, entrants: &[EntrantRec]) -> Result<(), EffectError> {
        let limit = self.config.limit;
        let d = self.draw.as_deref_mut().ok_or(EffectError("the sale is not a draw sale"))?;
        let mut users = std::collections::HashSet::with_capacity(entrants.len());
        let mut reqids = std::collections::HashSet::new();
        for e in entrants {
            d.check_add(e)?;
            if e.qty > limit {
                return Err(EffectError("entrant quantity above LIMIT"));
            }
            if !users.insert(&e.user) || e.reqid.as_ref().is_some_and(|r| !reqids.insert(r)) {
                return Err(EffectError("an entrant repeats"));
            }
        }
        for e in entrants {
            d.add(e);
        }
        Ok(())
    }

    /// Whether reservation `id` is one the draw made: its user is an
    /// entrant that won (in the draw or from the waitlist) with its QTY.
    /// RECONCILE on a draw sale takes stock for no other.
    pub fn is_draw_reservation(&self, id: &[u8]) -> bool {
        let (Some(d), Some(r)) = (self.draw.as_deref(), self.get(id)) else {
            return false;
        };
        d.find_user(r.user()).is_some_and(|seq| d.result(seq) != EntrantResult::Entered && d.qty(seq) == r.qty())
    }

    pub fn entrant_count(&self) -> usize {
        self.draw.as_ref().map_or(0, |d| d.len())
    }

    /// A page of entrants in entry order (ENTRANTS): next cursor, entrants.
    pub fn entrants_page(&self, cursor: u64, count: usize) -> (u64, Vec<EntrantRec>) {
        self.draw.as_ref().map_or((0, Vec::new()), |d| d.page(cursor, count))
    }

    /// Every entrant in entry order, and the draw's progress (stock,
    /// entrants looked at, what the first DRAW fixed): what RDB and AOF
    /// rewrite keep.
    #[allow(clippy::type_complexity)]
    pub fn draw_state(&self) -> Option<(impl Iterator<Item = EntrantRec> + '_, Option<u64>, u32, Option<DrawBegin>)> {
        self.draw.as_ref().map(|d| (d.all(), d.stock(), d.examined(), d.begun()))
    }

    /// Restores the draw's progress once its entrants are back (RDB load,
    /// AOF rewrite). A begun draw needs what its first DRAW fixed, checked
    /// against the sale's beacon declaration.
    pub fn restore_draw(&mut self, stock: Option<u64>, examined: u32, begin: Option<&DrawBegin>) -> Result<(), EffectError> {
        if begin.is_some_and(|b| b.beacon.is_some() != self.config.beacon.is_some()) {
            return Err(EffectError("the beacon value does not fit the sale's beacon declaration"));
        }
        let d = self.draw.as_deref_mut().ok_or(EffectError("the sale is not a draw sale"))?;
        d.restore_progress(stock, examined, begin)
    }

    /// The draw seed a first DRAW with `beacon` fixes (`None`: not a draw
    /// sale).
    pub fn draw_seed_for(&self, beacon: Option<&[u8]>) -> Option<[u8; 32]> {
        self.draw.as_deref().map(|d| d.seed_for(beacon))
    }

    /// DRAW's BEACON checks, after the command's others (docs/draw-sales.md):
    /// the error's text, or `Ok` when `beacon` fits the sale and the draw.
    pub fn check_beacon(&self, beacon: Option<&[u8]>) -> Result<(), &'static str> {
        let Some(d) = self.draw.as_deref() else { return Ok(()) };
        if beacon.is_some_and(|b| b.is_empty() || b.len() > MAX_BEACON_VALUE) {
            return Err("ERR BEACON value must be 1 to 1024 bytes");
        }
        if self.config.beacon.is_none() {
            return match beacon {
                Some(_) => Err("ERR the sale declared no beacon"),
                None => Ok(()),
            };
        }
        match (d.begun(), beacon) {
            (None, None) => Err("ERR the sale declared a beacon: the first DRAW needs BEACON value"),
            (Some(b), Some(v)) if b.beacon.as_deref() != Some(v) => Err("ERR BEACON differs from the value the draw began with"),
            _ => Ok(()),
        }
    }

    pub fn draw_report(&self) -> Option<DrawReport> {
        let d = self.draw.as_deref()?;
        let left = d.left_to_draw(self.remaining);
        Some(DrawReport {
            entrants: d.len() as u64,
            drawn: u64::from(d.won()),
            left_to_draw: left,
            waitlist: d.len() as u64 - u64::from(d.won()) - left,
            draw_stock: d.stock(),
            seed_commitment: draw::commitment(d.seed()),
            seed: d.stock().map(|_| *d.seed()),
            entrants_digest: *d.digest(),
            beacon: self.config.beacon.clone(),
            begun: d.begun(),
        })
    }

    /// Entrants the draw has not looked at while stock is left (DRAW's
    /// `left_to_draw`).
    pub fn left_to_draw(&self) -> u64 {
        self.draw.as_ref().map_or(0, |d| d.left_to_draw(self.remaining))
    }

    /// A winner's new pending reservation: the entrant's REQID as its id
    /// (a generated id if a reservation has that id already: RECONCILE
    /// APPLY adopted an order under it), else a generated id no entrant
    /// gave as its REQID, its QTY
    /// from its home bucket first, the sale's HOLD.
    fn winner_record(&self, seq: u32, now_ms: u64) -> Option<Reservation> {
        let d = self.draw.as_deref()?;
        let (user, qty) = (d.user(seq), d.qty(seq));
        if self.remaining < qty {
            return None;
        }
        let takes = self.buckets.plan_take(self.buckets.home_of(user), qty)?;
        let id: Box<[u8]> = match d.reqid(seq) {
            Some(r) if self.find(r).is_none() => r.into(),
            _ => self.records.generate_id(self.config.tag, |id| d.find_reqid(id).is_some()).text.as_bytes().into(),
        };
        let created_ms = self.records.stamp(now_ms);
        let deadline_ms = if self.config.hold_ms == 0 { 0 } else { created_ms.saturating_add(self.config.hold_ms) };
        Some(Reservation { id, user: user.into(), qty, state: State::Pending, created_ms, deadline_ms, takes })
    }

    /// A draw's winners join the buyer index (and, with REQIDs, the
    /// client-id index) a thousand per DRAW call: grown insert by insert,
    /// the indexes' incremental migration made the calls during a growth
    /// take several milliseconds (`draw_scale`). At the first DRAW of a
    /// sale without reservations both are sized for the winners the stock
    /// and the entrants allow (at most `PRESIZE_WINNERS`): one allocation,
    /// on the master and on every replica alike.
    fn presize_for_draw(&mut self, stock: u64) {
        const PRESIZE_WINNERS: u64 = 1 << 19;
        let Some(d) = self.draw.as_deref() else { return };
        if self.records.len() > 0 || d.stock().is_some() {
            return;
        }
        let n = (d.len() as u64).min(stock).min(PRESIZE_WINNERS) as usize;
        self.records.presize_client_ids(d.reqid_count().min(n));
        self.buyers = Buyers::with_capacity(n);
    }

    /// One DRAW call on the master at `now_ms`: at most `count` winners,
    /// at most `4 * count` entrants looked at. `None` when it changes
    /// nothing (not a draw sale, or the draw is complete). The first call
    /// fixes the order from `beacon` (checked first: `check_beacon`).
    /// Winners become pending reservations as they are drawn.
    pub fn draw_step(&mut self, count: usize, now_ms: u64, beacon: Option<&[u8]>) -> Option<DrawStep> {
        let remaining = self.remaining;
        let d = self.draw.as_deref_mut()?;
        let stock = d.stock().unwrap_or(remaining);
        let first = d.stock().is_none();
        if first {
            d.begin(beacon);
        }
        let (max_examined, budget) = (count.saturating_mul(4), d.budget(remaining));
        let mut walk = d.walk(count, max_examined, budget, remaining);
        if !first && walk.examined == 0 {
            return None;
        }
        self.presize_for_draw(stock);
        let mut winners = Vec::with_capacity(walk.winners.len());
        for &seq in &walk.winners {
            let Some(rec) = self.winner_record(seq, now_ms).filter(|rec| self.add_record(rec.as_new()).is_ok()) else {
                break;
            };
            winners.push(rec);
        }
        if winners.len() < walk.winners.len() {
            // Cannot happen (the walk checked the stock): stop right after
            // the last winner made.
            walk = self.draw.as_deref_mut()?.walk(winners.len(), max_examined, budget, remaining);
        }
        let d = self.draw.as_deref_mut()?;
        d.apply_walk(stock, &walk);
        let begin = if first { d.begun() } else { None };
        Some(DrawStep { stock, examined: walk.examined, winners, begin })
    }

    /// A DRAW call's effect replayed: the first call carries what it fixed
    /// (`begin`: the beacon value, and the draw seed, recomputed here and
    /// compared), a later one nothing; the same walk must give the same
    /// winners; checked whole before anything changes.
    pub fn apply_drawn(&mut self, stock: u64, examined: u32, recs: &[Reservation], begin: Option<&DrawBegin>) -> Result<(), EffectError> {
        let (remaining, declared) = (self.remaining, self.config.beacon.is_some());
        let d = self.draw.as_deref_mut().ok_or(EffectError("the sale is not a draw sale"))?;
        d.check_stock(stock)?;
        let first = d.stock().is_none();
        match (first, begin) {
            (true, None) => return Err(EffectError(draw::OLD_DRAW)),
            (false, Some(_)) => return Err(EffectError("the draw has begun already")),
            (true, Some(b)) if b.beacon.is_some() != declared => {
                return Err(EffectError("the beacon value does not fit the sale's beacon declaration"))
            }
            (true, Some(b)) if d.seed_for(b.beacon.as_deref()) != b.draw_seed => {
                return Err(EffectError("the draw seed differs from the secret's, the entrants' and the beacon's"))
            }
            (true, Some(b)) => d.begin(b.beacon.as_deref()),
            (false, None) => {}
        }
        let budget = if first { stock } else { d.budget(remaining) };
        let walk = d.walk(usize::MAX, examined as usize, budget, remaining);
        let same = walk.examined == examined
            && walk.winners.len() == recs.len()
            && walk.winners.iter().zip(recs).all(|(&s, r)| d.user(s) == &*r.user && d.qty(s) == r.qty && r.state == State::Pending);
        if !same || (first && stock != remaining) {
            d.abandon();
            return Err(EffectError("the draw's winners differ"));
        }
        self.presize_for_draw(stock);
        if !recs.is_empty() {
            if let Err(e) = self.add_records(recs) {
                if let Some(d) = self.draw.as_deref_mut() {
                    d.abandon();
                }
                return Err(e);
            }
        }
        self.draw.as_deref_mut().ok_or(EffectError("the sale is not a draw sale"))?.apply_walk(stock, &walk);
        Ok(())
    }

    /// Waitlist promotions on the master at `now_ms`, at most `max`: while
    /// the draw is complete and stock is there, the first waiting entrant
    /// in draw order whose QTY fits gets a pending reservation. The search
    /// produces at most `SCAN_STEPS` new places of the order per step, all
    /// its promotions together; a step that stops at a bound says `more`,
    /// and the next one continues where it stopped (the places produced
    /// stay; nothing else is kept). Each promotion is still the first
    /// waiting entrant in draw order whose QTY fits the stock when it is
    /// made: the bound moves only when that happens. None while the sale is fenced on a
    /// server whose id `current` gives: the units wait for the ledger to be
    /// applied and the fence lifted.
    pub fn promote_step(&mut self, max: usize, now_ms: u64, current: impl FnOnce() -> ReplId) -> Promotions {
        let mut out = Promotions::default();
        if self.fenced(current) {
            return out;
        }
        let mut steps = draw::SCAN_STEPS;
        while self.remaining > 0 && self.draw.as_deref().is_some_and(|d| d.complete(self.remaining)) {
            if out.records.len() >= max {
                out.more = true;
                break;
            }
            let free = self.remaining;
            let seq = match self.draw.as_deref_mut().map(|d| d.first_fit(free, &mut steps)) {
                Some(Fit::Entrant(seq)) => seq,
                Some(Fit::Unfinished) => {
                    out.more = true;
                    break;
                }
                Some(Fit::None) | None => break,
            };
            let Some(rec) = self.winner_record(seq, now_ms).filter(|rec| self.add_record(rec.as_new()).is_ok()) else {
                break;
            };
            if let Some(d) = self.draw.as_deref_mut() {
                d.promote(seq);
            }
            out.records.push(rec);
        }
        out
    }

    /// Whether the waitlist may have work: the draw complete, stock there,
    /// and by the order's bounds a waiting entrant may fit it. A node that
    /// did not make this sale's promotions itself (a load, a replica that
    /// may become the master) visits such a sale once it decides: a search
    /// stopped at its bound (`promote_step`'s `more`) goes on.
    pub fn waitlist_may_promote(&self) -> bool {
        self.remaining > 0 && self.draw.as_deref().is_some_and(|d| d.complete(self.remaining) && d.may_fit(self.remaining))
    }

    /// Waitlist promotions replayed: each a waiting entrant with the
    /// record's QTY, the draw complete; checked whole first.
    pub fn apply_promoted(&mut self, recs: &[Reservation]) -> Result<(), EffectError> {
        let d = self.draw.as_deref().ok_or(EffectError("the sale is not a draw sale"))?;
        if !d.complete(self.remaining) {
            return Err(EffectError("the draw is not complete"));
        }
        let mut seqs = Vec::with_capacity(recs.len());
        for r in recs {
            let seq = d.find_user(&r.user).ok_or(EffectError("no such entrant"))?;
            if d.result(seq) != EntrantResult::Entered || d.qty(seq) != r.qty || r.state != State::Pending || seqs.contains(&seq) {
                return Err(EffectError("the entrant is not waiting for this quantity"));
            }
            seqs.push(seq);
        }
        self.add_records(recs)?;
        if let Some(d) = self.draw.as_deref_mut() {
            seqs.iter().for_each(|&s| d.promote(s));
        }
        Ok(())
    }
}
