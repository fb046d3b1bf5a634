//! A draw sale's entrants and its draw (`INIT ... DRAW`, docs/draw-sales.md,
//! draw v2); its hashes are `draw_hash`.
//!
//! Entrants are kept in the order they entered (`Chunked`, their place is
//! their arrival index; ENTRANTS pages through it), their user ids and
//! REQIDs once in an `Arena`, and two hash indexes (`SeqIndex`) find one by
//! user or by REQID. Every new entrant extends the running entrant digest
//! `D(i+1) = SHA-256(D(i) || u32be(len(user)) || user || u32be(qty))`.
//!
//! Nothing about the order exists before the first DRAW: it fixes
//! `draw_seed S = SHA-256(secret || D || beacon_value)` and the order is a
//! Fisher-Yates permutation of the arrival indices driven by `uniform(S, j,
//! m)` (SHA-1, 48-bit rejection sampling). The permutation lives in a dense
//! `u32` array allocated at the first DRAW (the identity) and is produced
//! lazily, one step per place the draw or the waitlist looks at: step `j`
//! fixes place `j` for good. Places never move once produced, so the
//! draw's cursor is a place; a winner is marked on its entrant. The
//! waitlist is every entrant that has not won, in draw order: produced
//! places are grouped in runs of `ORDER_CHUNK` with a lower bound of the
//! QTY their waiting entrants ask for, and the places not produced yet
//! share one such bound, so finding the first waiting entrant whose QTY
//! fits skips whole runs (and the unproduced tail) without looking.
//!
//! Memory per entrant, beside its user id: 16 bytes of entrant, a slot of
//! the user index (5 bytes at a load of 7/16 to 7/8) and the user id's
//! length byte in the arena; from the first DRAW on, 4 bytes of
//! permutation and 8 bytes of bound per `ORDER_CHUNK` places.

use std::hash::BuildHasher;

use hashbrown::DefaultHashBuilder;

use crate::rules::config::MAX_TOTAL;
use crate::rules::outcome::EffectError;
use crate::rules::reservation::valid_id;
use crate::rules::seq_index::SeqIndex;

use super::chunks::{Arena, Chunked};

pub use super::draw_hash::{commitment, draw_seed, draw_word, hex, next_digest, uniform, Seed, EMPTY_DIGEST};

use super::entrant::{Entrant, NO_REQID};
pub use super::entrant::{EntrantRec, EntrantResult};

/// What the first DRAW fixes, as its effect (and an AOF rewrite) carries
/// it: the beacon value it took (`None`: the sale declared none) and the
/// draw seed the master computed, which a replica recomputes and compares.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct DrawBegin {
    pub beacon: Option<Box<[u8]>>,
    pub draw_seed: [u8; 32],
}

/// Places per run of the permutation that shares one QTY bound: a
/// promotion rereads at most this many produced places per run it cannot
/// skip.
pub(super) const ORDER_CHUNK: usize = 256;

/// New places of the permutation one waitlist promotion step (a command's,
/// or a timer visit's) produces at most: one SHA-1 each, 250 to 420 ns at
/// 1M entrants (`waitlist_scan_scale`), so 0.5 to 0.9 ms per step. A search
/// that reaches it stops, and the timer's next visit continues it.
pub const SCAN_STEPS: u32 = 2048;

/// What the search for the first waiting entrant that fits found
/// (`Draw::first_fit`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Fit {
    /// That entrant.
    Entrant(u32),
    /// None fits.
    None,
    /// Not known yet: the search produced as many places as it may.
    Unfinished,
}

/// Where the draw stands: the winners it made and the entrants it looked at.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Walk {
    /// Entrant numbers of the winners, in draw order.
    pub winners: Vec<u32>,
    /// Entrants looked at (winners included).
    pub examined: u32,
}

/// The draw order once the first DRAW fixed its seed.
#[derive(Clone, Debug)]
struct Order {
    /// The beacon value the first DRAW took.
    beacon: Option<Box<[u8]>>,
    /// `S`.
    draw_seed: [u8; 32],
    /// The Fisher-Yates array, each place `i` holding `entrant ^ i`, so
    /// that the identity it starts as is all zeros (a zeroed allocation,
    /// no pass over a million places at the first DRAW): places
    /// `0..produced` are final.
    perm: Vec<u32>,
    produced: u32,
    /// Per run of `ORDER_CHUNK` produced places, a lower bound of the QTY
    /// its waiting entrants ask for (`u64::MAX`: none waits). Winners only
    /// raise the true minimum, so a bound stays a bound; a scan that finds
    /// no fit tightens it.
    run_min: Vec<u64>,
    /// The same bound for the places not produced yet.
    rest_min: u64,
}

impl Order {
    /// The entrant at `place` (produced or not).
    fn get(&self, place: u32) -> u32 {
        self.perm[place as usize] ^ place
    }
}

#[derive(Clone, Debug)]
pub(super) struct Draw {
    seed: Seed,
    /// The entrant digest `D` of every entrant so far.
    digest: [u8; 32],
    entrants: Chunked<Entrant>,
    arena: Arena,
    by_user: SeqIndex,
    by_reqid: SeqIndex,
    /// Per process, never persisted: keyed against crafted collisions.
    hasher: DefaultHashBuilder,
    /// `Some` from the first DRAW on (derived: the seed, the digest and the
    /// beacon value give it back).
    order: Option<Box<Order>>,
    /// The stock the draw hands out (remaining at the first DRAW); `None`
    /// until then, and entries are open.
    stock: Option<u64>,
    /// Units the draw handed out (the quantities of the `Drawn` entrants).
    handed: u64,
    /// Entrants the draw looked at: the first `examined` places.
    examined: u32,
    /// Entrants that won, in the draw or from the waitlist.
    won: u32,
    /// The smallest QTY an entrant waiting when it was added asks for
    /// (`u64::MAX`: none): the first DRAW's bound for the whole order.
    min_qty: u64,
}

impl Draw {
    pub(super) fn new(seed: Seed) -> Draw {
        Draw {
            seed,
            digest: EMPTY_DIGEST,
            entrants: Chunked::new(),
            arena: Arena::default(),
            by_user: SeqIndex::new(),
            by_reqid: SeqIndex::new(),
            hasher: DefaultHashBuilder::default(),
            order: None,
            stock: None,
            handed: 0,
            examined: 0,
            won: 0,
            min_qty: u64::MAX,
        }
    }

    pub(super) fn seed(&self) -> &Seed {
        &self.seed
    }

    pub(super) fn digest(&self) -> &[u8; 32] {
        &self.digest
    }

    /// The beacon value and the draw seed, once the draw has begun.
    pub(super) fn begun(&self) -> Option<DrawBegin> {
        let o = self.order.as_deref().filter(|_| self.stock.is_some())?;
        Some(DrawBegin { beacon: o.beacon.clone(), draw_seed: o.draw_seed })
    }

    pub(super) fn len(&self) -> usize {
        self.entrants.len()
    }

    pub(super) fn stock(&self) -> Option<u64> {
        self.stock
    }

    pub(super) fn examined(&self) -> u32 {
        self.examined
    }

    pub(super) fn won(&self) -> u32 {
        self.won
    }

    pub(super) fn user(&self, seq: u32) -> &[u8] {
        self.arena.get(self.entrants[seq as usize].user)
    }

    pub(super) fn qty(&self, seq: u32) -> u64 {
        self.entrants[seq as usize].qty()
    }

    pub(super) fn result(&self, seq: u32) -> EntrantResult {
        self.entrants[seq as usize].result()
    }

    pub(super) fn reqid(&self, seq: u32) -> Option<&[u8]> {
        match self.entrants[seq as usize].reqid {
            NO_REQID => None,
            off => Some(self.arena.get(off)),
        }
    }

    pub(super) fn entrant(&self, seq: u32) -> EntrantRec {
        EntrantRec { user: self.user(seq).into(), qty: self.qty(seq), reqid: self.reqid(seq).map(Into::into), result: self.result(seq) }
    }

    /// Entrants that gave a REQID.
    pub(super) fn reqid_count(&self) -> usize {
        self.by_reqid.len()
    }

    pub(super) fn find_user(&self, user: &[u8]) -> Option<u32> {
        let (list, arena) = (&self.entrants, &self.arena);
        self.by_user.find(self.hasher.hash_one(user), |s| arena.get(list[s as usize].user) == user)
    }

    pub(super) fn find_reqid(&self, reqid: &[u8]) -> Option<u32> {
        if self.by_reqid.is_empty() {
            return None;
        }
        let (list, arena) = (&self.entrants, &self.arena);
        self.by_reqid.find(self.hasher.hash_one(reqid), |s| {
            let off = list[s as usize].reqid;
            off != NO_REQID && arena.get(off) == reqid
        })
    }

    /// Units the draw has still to hand out when the sale has `remaining`
    /// (before the first DRAW, all of it).
    pub(super) fn budget(&self, remaining: u64) -> u64 {
        self.stock.unwrap_or(remaining).saturating_sub(self.handed)
    }

    /// Entrants the draw has not looked at while stock is left to hand out.
    pub(super) fn left_to_draw(&self, remaining: u64) -> u64 {
        if self.budget(remaining) == 0 {
            0
        } else {
            self.len() as u64 - u64::from(self.examined)
        }
    }

    /// The draw has begun and has nothing left to do: the waitlist's turn.
    pub(super) fn complete(&self, remaining: u64) -> bool {
        self.stock.is_some() && self.left_to_draw(remaining) == 0
    }

    /// Checks an entrant to add (ENTER's effect, a load): entries open, a
    /// new user, a new REQID, a quantity in range.
    pub(super) fn check_add(&self, e: &EntrantRec) -> Result<(), EffectError> {
        if self.stock.is_some() {
            return Err(EffectError("the draw has begun: entries are closed"));
        }
        if !valid_id(&e.user) || e.reqid.as_deref().is_some_and(|r| !valid_id(r)) {
            return Err(EffectError("bad user id or REQID"));
        }
        if e.qty == 0 || e.qty > MAX_TOTAL {
            return Err(EffectError("entrant quantity out of range"));
        }
        if self.len() >= NO_REQID as usize - 1 || !self.arena.has_room(2) {
            return Err(EffectError("too many entrants"));
        }
        if self.find_user(&e.user).is_some() {
            return Err(EffectError("the user entered before"));
        }
        if e.reqid.as_deref().is_some_and(|r| self.find_reqid(r).is_some()) {
            return Err(EffectError("REQID is already another entrant's"));
        }
        Ok(())
    }

    /// Adds a checked entrant (`check_add`): its number, its indexes, the
    /// entrant digest.
    pub(super) fn add(&mut self, e: &EntrantRec) -> u32 {
        let seq = self.entrants.len() as u32;
        let user = self.arena.intern(&e.user);
        let reqid = e.reqid.as_deref().map_or(NO_REQID, |r| self.arena.intern(r));
        let mut entrant = Entrant { meta: e.qty, user, reqid };
        entrant.set_result(e.result);
        self.entrants.push(entrant);
        let (list, arena, hasher) = (&self.entrants, &self.arena, &self.hasher);
        self.by_user.insert_unique(hasher.hash_one(&e.user), seq, |s| hasher.hash_one(arena.get(list[s as usize].user)));
        if let Some(r) = &e.reqid {
            self.by_reqid.insert_unique(hasher.hash_one(r), seq, |s| hasher.hash_one(arena.get(list[s as usize].reqid)));
        }
        self.digest = next_digest(&self.digest, &e.user, e.qty);
        if e.result != EntrantResult::Entered {
            self.won += 1;
        } else {
            self.min_qty = self.min_qty.min(e.qty);
        }
        if e.result == EntrantResult::Drawn {
            self.handed = self.handed.saturating_add(e.qty);
        }
        seq
    }

    /// The draw seed the first DRAW would fix with `beacon`.
    pub(super) fn seed_for(&self, beacon: Option<&[u8]>) -> [u8; 32] {
        draw_seed(&self.seed, &self.digest, beacon.unwrap_or_default())
    }

    /// Fixes the order for the first DRAW (before its walk): the draw seed
    /// from `beacon`, the identity permutation, nothing produced. Derived
    /// state only: `apply_walk` (or `restore_progress`) makes it the
    /// draw's, `abandon` takes it back.
    pub(super) fn begin(&mut self, beacon: Option<&[u8]>) {
        self.order = Some(Box::new(Order {
            beacon: beacon.map(Into::into),
            draw_seed: self.seed_for(beacon),
            perm: vec![0; self.len()],
            produced: 0,
            run_min: Vec::new(),
            rest_min: self.min_qty,
        }));
    }

    /// Takes back a `begin` whose DRAW did not happen (a refused effect).
    pub(super) fn abandon(&mut self) {
        if self.stock.is_none() {
            self.order = None;
        }
    }

    /// The entrant at `place` in draw order, producing the permutation up
    /// to it (`None`: past the last entrant, or the order not fixed).
    fn at(&mut self, place: u32) -> Option<u32> {
        let n = self.entrants.len() as u32;
        let o = self.order.as_deref_mut()?;
        if place >= n {
            return None;
        }
        while o.produced <= place {
            let j = o.produced;
            let t = j + uniform(&o.draw_seed, j, u64::from(n - j)) as u32;
            let (a, b) = (o.get(j), o.get(t));
            o.perm[j as usize] = b ^ j;
            o.perm[t as usize] = a ^ t;
            o.produced += 1;
            let e = self.entrants[b as usize];
            let run = j as usize / ORDER_CHUNK;
            if run == o.run_min.len() {
                o.run_min.push(u64::MAX);
            }
            if e.waiting() {
                o.run_min[run] = o.run_min[run].min(e.qty());
            }
        }
        Some(o.get(place))
    }

    /// The draw's walk from its cursor, changing nothing but the produced
    /// part of the permutation: at most `max_wins` winners and
    /// `max_examined` entrants looked at. `budget` is the stock left to
    /// hand out, `remaining` the sale's stock: an entrant wins when its QTY
    /// fits both. Stops when the budget is handed out or every entrant was
    /// looked at.
    pub(super) fn walk(&mut self, max_wins: usize, max_examined: usize, mut budget: u64, mut remaining: u64) -> Walk {
        let mut w = Walk { winners: Vec::new(), examined: 0 };
        while budget > 0 && w.winners.len() < max_wins && (w.examined as usize) < max_examined {
            let Some(seq) = self.at(self.examined + w.examined) else { break };
            w.examined += 1;
            let e = self.entrants[seq as usize];
            if e.waiting() && e.qty() <= budget.min(remaining) {
                budget -= e.qty();
                remaining -= e.qty();
                w.winners.push(seq);
            }
        }
        w
    }

    /// Records the first DRAW's stock (a later one must name the same).
    pub(super) fn check_stock(&self, stock: u64) -> Result<(), EffectError> {
        match self.stock {
            Some(s) if s != stock => Err(EffectError("the draw's stock differs")),
            _ => Ok(()),
        }
    }

    /// Applies a walk (`walk`): the stock set, the winners marked `Drawn`,
    /// the cursor moved past the entrants looked at.
    pub(super) fn apply_walk(&mut self, stock: u64, w: &Walk) {
        self.stock = Some(stock);
        for &seq in &w.winners {
            let e = &mut self.entrants[seq as usize];
            e.set_result(EntrantResult::Drawn);
            self.handed = self.handed.saturating_add(e.qty());
            self.won += 1;
        }
        self.examined += w.examined;
    }

    /// The first waiting entrant in draw order whose QTY is at most
    /// `free`. Runs whose bound is above `free` are skipped, and so is the
    /// unproduced tail when its bound is; a run scanned without a fit gets
    /// its exact bound. Produces the permutation as far as the fit (once:
    /// produced places stay), but at most `steps` new places (one SHA-1
    /// each), taken from it: when the draw ended with its stock handed out
    /// before it looked at every entrant, the first entrant a unit fits may
    /// lie any number of places past the produced ones, and the search then
    /// answers `Fit::Unfinished` and continues from there on a later call.
    /// Rereading produced places costs no SHA-1 and is not counted. The
    /// entrant found is the same however the search is split.
    pub(super) fn first_fit(&mut self, free: u64, steps: &mut u32) -> Fit {
        let Some(o) = self.order.as_deref_mut() else { return Fit::None };
        for run in 0..o.run_min.len() {
            if o.run_min[run] > free {
                continue;
            }
            let (from, to) = (run * ORDER_CHUNK, ((run + 1) * ORDER_CHUNK).min(o.produced as usize));
            let mut min = u64::MAX;
            for seq in (from..to).map(|p| o.get(p as u32)) {
                let e = self.entrants[seq as usize];
                if !e.waiting() {
                    continue;
                }
                if e.qty() <= free {
                    return Fit::Entrant(seq);
                }
                min = min.min(e.qty());
            }
            o.run_min[run] = min;
        }
        loop {
            let Some(o) = self.order.as_deref_mut() else { return Fit::None };
            if o.rest_min > free {
                return Fit::None;
            }
            if *steps == 0 {
                return Fit::Unfinished;
            }
            *steps -= 1;
            let place = o.produced;
            let Some(seq) = self.at(place) else {
                if let Some(o) = self.order.as_deref_mut() {
                    o.rest_min = u64::MAX;
                }
                return Fit::None;
            };
            let e = self.entrants[seq as usize];
            if e.waiting() && e.qty() <= free {
                return Fit::Entrant(seq);
            }
        }
    }

    /// Whether, by the bounds, a waiting entrant may ask for at most
    /// `free` (a bound below the true minimum answers yes: a search then
    /// finds none and tightens it).
    pub(super) fn may_fit(&self, free: u64) -> bool {
        self.order.as_deref().is_some_and(|o| o.rest_min <= free || o.run_min.iter().any(|&b| b <= free))
    }

    /// Marks a waiting entrant as won from the waitlist (the bounds stay
    /// bounds: a winner only raises a minimum).
    pub(super) fn promote(&mut self, seq: u32) {
        self.entrants[seq as usize].set_result(EntrantResult::Promoted);
        self.won += 1;
    }

    /// Restores the draw's progress (RDB load, AOF rewrite) once every
    /// entrant is back: the stock and what the first DRAW fixed (`None`:
    /// not begun) and the entrants looked at. `begin.draw_seed`, when
    /// given, must be the one the seed, the entrants and the beacon value
    /// give.
    pub(super) fn restore_progress(&mut self, stock: Option<u64>, examined: u32, begin: Option<&DrawBegin>) -> Result<(), EffectError> {
        if self.stock.is_some() || self.examined != 0 {
            return Err(EffectError("the draw's progress is restored once"));
        }
        if examined as usize > self.len() || (stock.is_none() && (examined > 0 || self.won > 0)) {
            return Err(EffectError("the draw's progress does not fit its entrants"));
        }
        if stock.is_some_and(|s| s > MAX_TOTAL || self.handed > s) {
            return Err(EffectError("the draw handed out more than its stock"));
        }
        if stock.is_none() {
            return Ok(());
        }
        let Some(begin) = begin else {
            return Err(EffectError(OLD_DRAW));
        };
        if self.seed_for(begin.beacon.as_deref()) != begin.draw_seed {
            return Err(EffectError("the draw seed differs from the secret's, the entrants' and the beacon's"));
        }
        self.begin(begin.beacon.as_deref());
        // The draw's winners are all among the entrants it looked at.
        let drawn_seen = (0..examined).filter(|&p| self.at(p).is_some_and(|s| self.result(s) == EntrantResult::Drawn)).count();
        let drawn = (0..self.len() as u32).filter(|&s| self.result(s) == EntrantResult::Drawn).count();
        if drawn_seen != drawn {
            self.order = None;
            return Err(EffectError("a winner of the draw is past the entrants it looked at"));
        }
        self.stock = stock;
        self.examined = examined;
        Ok(())
    }

    /// A page of entrants in the order they entered, from `cursor`: the
    /// next cursor (0 at the end) and the entrants.
    pub(super) fn page(&self, cursor: u64, count: usize) -> (u64, Vec<EntrantRec>) {
        let start = cursor.min(self.len() as u64) as usize;
        let end = start.saturating_add(count).min(self.len());
        let page = (start..end).map(|s| self.entrant(s as u32)).collect();
        (if end >= self.len() { 0 } else { end as u64 }, page)
    }

    /// Every entrant, in entry order (RDB, AOF rewrite).
    pub(super) fn all(&self) -> impl Iterator<Item = EntrantRec> + '_ {
        (0..self.len() as u32).map(|s| self.entrant(s))
    }

    /// Places of the permutation produced so far (tests).
    #[cfg(test)]
    pub(super) fn produced(&self) -> u32 {
        self.order.as_deref().map_or(0, |o| o.produced)
    }

    /// Entrant numbers in draw order, the whole permutation produced
    /// (tests, checks; empty before the first DRAW).
    #[cfg(test)]
    pub(super) fn order(&mut self) -> Vec<u32> {
        (0..self.len() as u32).map_while(|p| self.at(p)).collect()
    }

    /// Heap bytes, for MEMORY USAGE.
    pub(super) fn bytes(&self) -> usize {
        self.entrants.bytes()
            + self.arena.bytes()
            + self.by_user.allocation_size()
            + self.by_reqid.allocation_size()
            + self.order.as_deref().map_or(0, |o| {
                std::mem::size_of::<Order>() + o.perm.capacity() * 4 + o.run_min.capacity() * 8 + o.beacon.as_ref().map_or(0, |b| b.len())
            })
    }

    /// The digest is the entrants', the produced places are a permutation
    /// prefix, each bound at most its run's waiting minimum, the counters
    /// right.
    #[cfg(test)]
    pub(super) fn check(&self) -> Result<(), String> {
        let d = (0..self.len() as u32).fold(EMPTY_DIGEST, |d, s| next_digest(&d, self.user(s), self.qty(s)));
        if d != self.digest {
            return Err("the entrant digest is not the entrants'".into());
        }
        if let Some(o) = self.order.as_deref() {
            let mut seen = vec![false; self.len()];
            for s in (0..o.perm.len() as u32).map(|p| o.get(p)) {
                if std::mem::replace(&mut seen[s as usize], true) {
                    return Err("the permutation repeats an entrant".into());
                }
            }
            let waiting = |places: std::ops::Range<usize>| {
                places.map(|p| self.entrants[o.get(p as u32) as usize]).filter(Entrant::waiting).map(|e| e.qty()).min()
            };
            for (run, &bound) in o.run_min.iter().enumerate() {
                let (from, to) = (run * ORDER_CHUNK, ((run + 1) * ORDER_CHUNK).min(o.produced as usize));
                if bound > waiting(from..to).unwrap_or(u64::MAX) {
                    return Err("a run's bound is above its minimum".into());
                }
            }
            if o.rest_min > waiting(o.produced as usize..o.perm.len()).unwrap_or(u64::MAX) {
                return Err("the tail's bound is above its minimum".into());
            }
        }
        let won = (0..self.len() as u32).filter(|&s| self.result(s) != EntrantResult::Entered).count();
        if won != self.won as usize {
            return Err(format!("{} won, counted {}", won, self.won));
        }
        Ok(())
    }
}

/// Why a draw begun before draw v2 does not load: its order (ascending
/// `SHA-256(seed || user)`) is not this version's.
pub const OLD_DRAW: &str =
    "a draw begun before draw v2 (encoding 4 or 5, or its effects) cannot be continued by this version: finish it with the version that began it";

impl PartialEq for Draw {
    fn eq(&self, other: &Draw) -> bool {
        self.seed == other.seed
            && self.digest == other.digest
            && self.stock == other.stock
            && self.examined == other.examined
            && self.begun() == other.begun()
            && self.len() == other.len()
            && self.all().zip(other.all()).all(|(a, b)| a == b)
    }
}
