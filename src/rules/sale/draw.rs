//! A draw sale's entrants and its draw (`INIT ... DRAW`, docs/draw-sales.md).
//!
//! Entrants are kept in the order they entered (`Chunked`, their place is
//! their sequence number; ENTRANTS pages through it), their user ids and
//! REQIDs once in an `Arena`, and two hash indexes (`SeqIndex`) find one by
//! user or by REQID. The draw order, ascending `SHA-256(seed || user)`
//! compared as bytes, is kept from the first ENTER on: the seed is known at
//! INIT on the master and on every replica, so each ENTER puts its entrant
//! in place (a binary search and a move inside one chunk of at most
//! `ORDER_CHUNK` entries). Only the first 8 bytes of the digest are stored;
//! two entrants with the same 8 bytes are ordered by their full digests,
//! recomputed, so the order is exactly the full digests' order.
//!
//! Once the draw has begun no entrant joins, so places in the order never
//! move: the draw's cursor is a place, the draw walks forwards from it, and
//! a winner is marked where it stands. The waitlist is every entrant that
//! has not won, in draw order; each order chunk keeps a lower bound of the
//! quantities its waiting entrants ask for, so finding the first one whose
//! QTY fits skips whole chunks.
//!
//! Memory per entrant, beside its user id: 16 bytes of entrant, 12 bytes of
//! order key in chunks kept between half and wholly full, a slot of the
//! user index (5 bytes at a load of 7/16 to 7/8) and the user id's length
//! byte in the arena.

use std::hash::BuildHasher;

use hashbrown::DefaultHashBuilder;
use sha2::{Digest, Sha256};

use crate::rules::config::MAX_TOTAL;
use crate::rules::outcome::EffectError;
use crate::rules::reservation::valid_id;
use crate::rules::seq_index::SeqIndex;

use super::chunks::{Arena, Chunked};

/// The secret a draw sale's order comes from: 32 bytes, drawn on the master.
pub type Seed = [u8; 32];

/// An entrant's draw key: `SHA-256(seed || user)`.
pub fn draw_key(seed: &Seed, user: &[u8]) -> [u8; 32] {
    let mut h = Sha256::new();
    h.update(seed);
    h.update(user);
    h.finalize().into()
}

/// The seed's commitment, published from INIT on: `SHA-256(seed)`.
pub fn commitment(seed: &Seed) -> [u8; 32] {
    Sha256::digest(seed).into()
}

/// Lowercase hex.
pub fn hex(bytes: &[u8]) -> Box<[u8]> {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    bytes.iter().flat_map(|b| [HEX[usize::from(b >> 4)], HEX[usize::from(b & 15)]]).collect()
}

/// What became of an entrant (ENTRANTS' `result`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum EntrantResult {
    /// Not a reservation: not drawn yet, or on the waitlist.
    Entered,
    /// Won in the draw.
    Drawn,
    /// Won from the waitlist.
    Promoted,
}

impl EntrantResult {
    pub fn word(self) -> &'static str {
        match self {
            EntrantResult::Entered => "entered",
            EntrantResult::Drawn => "drawn",
            EntrantResult::Promoted => "promoted",
        }
    }

    pub fn code(self) -> u8 {
        match self {
            EntrantResult::Entered => 0,
            EntrantResult::Drawn => 1,
            EntrantResult::Promoted => 2,
        }
    }

    pub fn from_code(code: u64) -> Option<EntrantResult> {
        Some(match code {
            0 => EntrantResult::Entered,
            1 => EntrantResult::Drawn,
            2 => EntrantResult::Promoted,
            _ => return None,
        })
    }
}

/// One entrant as a plain value (effects, RDB, tests).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct EntrantRec {
    pub user: Box<[u8]>,
    pub qty: u64,
    pub reqid: Option<Box<[u8]>>,
    pub result: EntrantResult,
}

/// `Entrant::reqid` when the entrant gave none.
const NO_REQID: u32 = u32::MAX;
const QTY_MASK: u64 = (1 << 50) - 1;
const RESULT_SHIFT: u32 = 62;
const _: () = assert!(MAX_TOTAL <= QTY_MASK && std::mem::size_of::<Entrant>() == 16);

/// One entrant, 16 bytes: quantity and result in one word, the arena
/// offsets of its user id and REQID.
#[derive(Clone, Copy, Debug)]
struct Entrant {
    meta: u64,
    user: u32,
    reqid: u32,
}

impl Entrant {
    fn qty(&self) -> u64 {
        self.meta & QTY_MASK
    }

    fn result(&self) -> EntrantResult {
        EntrantResult::from_code(self.meta >> RESULT_SHIFT).unwrap_or(EntrantResult::Entered)
    }

    fn set_result(&mut self, r: EntrantResult) {
        self.meta = (self.meta & QTY_MASK) | (u64::from(r.code()) << RESULT_SHIFT);
    }

    fn waiting(&self) -> bool {
        self.result() == EntrantResult::Entered
    }
}

/// Entries per chunk of the draw order, at the most: an ENTER moves at
/// most this many keys, a promotion rereads at most this many entrants.
pub(super) const ORDER_CHUNK: usize = 256;

/// A run of the draw order: digest prefixes and entrant numbers, and a
/// lower bound of the QTY its waiting entrants ask for (`u64::MAX`: none
/// waits). Winners only raise the true minimum, so the bound stays a
/// bound; a scan that finds no fit tightens it.
#[derive(Clone, Debug, Default)]
struct OrderChunk {
    keys: Vec<u64>,
    seqs: Vec<u32>,
    min_qty: u64,
}

/// Where the draw stands: the winners it made and the entrants it looked at.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Walk {
    /// Entrant numbers of the winners, in draw order.
    pub winners: Vec<u32>,
    /// Entrants looked at (winners included).
    pub examined: u32,
}

#[derive(Clone, Debug)]
pub(super) struct Draw {
    seed: Seed,
    entrants: Chunked<Entrant>,
    arena: Arena,
    by_user: SeqIndex,
    by_reqid: SeqIndex,
    /// Per process, never persisted: keyed against crafted collisions.
    hasher: DefaultHashBuilder,
    order: Vec<OrderChunk>,
    /// The stock the draw hands out (remaining at the first DRAW); `None`
    /// until then, and entries are open.
    stock: Option<u64>,
    /// Units the draw handed out (the quantities of the `Drawn` entrants).
    handed: u64,
    /// Entrants the draw looked at: the first `examined` of the order.
    examined: u32,
    /// The place of the next entrant to look at: chunk, offset.
    cursor: (u32, u32),
    /// Entrants that won, in the draw or from the waitlist.
    won: u32,
}

impl Draw {
    pub(super) fn new(seed: Seed) -> Draw {
        Draw {
            seed,
            entrants: Chunked::new(),
            arena: Arena::default(),
            by_user: SeqIndex::new(),
            by_reqid: SeqIndex::new(),
            hasher: DefaultHashBuilder::default(),
            order: Vec::new(),
            stock: None,
            handed: 0,
            examined: 0,
            cursor: (0, 0),
            won: 0,
        }
    }

    pub(super) fn seed(&self) -> &Seed {
        &self.seed
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

    fn sort_key(&self, seq: u32) -> [u8; 32] {
        draw_key(&self.seed, self.user(seq))
    }

    /// Whether the stored order entry `(prefix, seq)` comes before the
    /// entrant whose digest is `key`.
    fn before(&self, prefix: u64, seq: u32, key: &[u8; 32]) -> bool {
        let p = prefix_of(key);
        prefix < p || (prefix == p && self.sort_key(seq) < *key)
    }

    /// Where `key` goes in the order: chunk and offset (the chunk an entry
    /// of that key is in, or would be inserted in).
    fn place(&self, key: &[u8; 32]) -> (usize, usize) {
        if self.order.is_empty() {
            return (0, 0);
        }
        let c = self.order.partition_point(|ch| match (ch.keys.last(), ch.seqs.last()) {
            (Some(&p), Some(&s)) => self.before(p, s, key),
            _ => true,
        });
        let c = c.min(self.order.len() - 1);
        let ch = &self.order[c];
        let (mut lo, mut hi) = (0, ch.keys.len());
        while lo < hi {
            let mid = (lo + hi) / 2;
            if self.before(ch.keys[mid], ch.seqs[mid], key) {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        (c, lo)
    }

    /// The place of entrant `seq` in the order.
    fn locate(&self, seq: u32) -> Option<(usize, usize)> {
        let (c, i) = self.place(&self.sort_key(seq));
        (self.order.get(c)?.seqs.get(i) == Some(&seq)).then_some((c, i))
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

    /// Adds a checked entrant (`check_add`): its number, its indexes, its
    /// place in the order.
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
        self.insert_order(seq);
        if e.result != EntrantResult::Entered {
            self.won += 1;
        }
        if e.result == EntrantResult::Drawn {
            self.handed = self.handed.saturating_add(e.qty);
        }
        seq
    }

    fn insert_order(&mut self, seq: u32) {
        let key = self.sort_key(seq);
        let (mut c, mut i) = self.place(&key);
        if self.order.is_empty() {
            self.order.push(OrderChunk { keys: Vec::with_capacity(4), seqs: Vec::with_capacity(4), min_qty: u64::MAX });
        }
        if self.order[c].keys.len() >= ORDER_CHUNK {
            // Split the full chunk in two halves, each with room for a whole chunk.
            let half = ORDER_CHUNK / 2;
            let ch = &mut self.order[c];
            let mut keys = Vec::with_capacity(ORDER_CHUNK);
            let mut seqs = Vec::with_capacity(ORDER_CHUNK);
            keys.extend_from_slice(&ch.keys[half..]);
            seqs.extend_from_slice(&ch.seqs[half..]);
            ch.keys.truncate(half);
            ch.seqs.truncate(half);
            let tail = OrderChunk { keys, seqs, min_qty: ch.min_qty };
            self.order.insert(c + 1, tail);
            if i > half {
                c += 1;
                i -= half;
            }
        }
        let ch = &mut self.order[c];
        if ch.keys.len() == ch.keys.capacity() {
            let want = (ch.keys.capacity() * 2).clamp(4, ORDER_CHUNK) - ch.keys.len();
            ch.keys.reserve_exact(want);
            ch.seqs.reserve_exact(want);
        }
        ch.keys.insert(i, prefix_of(&key));
        ch.seqs.insert(i, seq);
        let e = self.entrants[seq as usize];
        if e.waiting() {
            let ch = &mut self.order[c];
            ch.min_qty = ch.min_qty.min(e.qty());
        }
    }

    /// The draw's walk from its cursor, without changing anything: at most
    /// `max_wins` winners and `max_examined` entrants looked at. `budget`
    /// is the stock left to hand out, `remaining` the sale's stock: an
    /// entrant wins when its QTY fits both. Stops when the budget is
    /// handed out or every entrant was looked at.
    pub(super) fn walk(&self, max_wins: usize, max_examined: usize, mut budget: u64, mut remaining: u64) -> Walk {
        let mut w = Walk { winners: Vec::new(), examined: 0 };
        let (mut c, mut i) = (self.cursor.0 as usize, self.cursor.1 as usize);
        while budget > 0 && w.winners.len() < max_wins && (w.examined as usize) < max_examined {
            let Some(ch) = self.order.get(c) else { break };
            let Some(&seq) = ch.seqs.get(i) else {
                (c, i) = (c + 1, 0);
                continue;
            };
            w.examined += 1;
            i += 1;
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
        self.advance(w.examined);
    }

    fn advance(&mut self, n: u32) {
        self.examined += n;
        let mut n = n as usize;
        let (mut c, mut i) = (self.cursor.0 as usize, self.cursor.1 as usize);
        while let Some(ch) = self.order.get(c) {
            let left = ch.seqs.len().saturating_sub(i);
            if n < left {
                i += n;
                break;
            }
            n -= left;
            (c, i) = (c + 1, 0);
            if n == 0 {
                break;
            }
        }
        self.cursor = (c as u32, i as u32);
    }

    /// The first waiting entrant in draw order whose QTY is at most
    /// `free`. Chunks whose bound is above `free` are skipped; a chunk
    /// scanned without a fit gets its exact bound.
    pub(super) fn first_fit(&mut self, free: u64) -> Option<u32> {
        for c in 0..self.order.len() {
            if self.order[c].min_qty > free {
                continue;
            }
            let mut min = u64::MAX;
            for &seq in &self.order[c].seqs {
                let e = self.entrants[seq as usize];
                if !e.waiting() {
                    continue;
                }
                if e.qty() <= free {
                    return Some(seq);
                }
                min = min.min(e.qty());
            }
            self.order[c].min_qty = min;
        }
        None
    }

    /// Marks a waiting entrant as won from the waitlist.
    pub(super) fn promote(&mut self, seq: u32) {
        self.entrants[seq as usize].set_result(EntrantResult::Promoted);
        self.won += 1;
        if let Some((c, _)) = self.locate(seq) {
            let ch = &self.order[c];
            let min = ch.seqs.iter().map(|&s| self.entrants[s as usize]).filter(Entrant::waiting).map(|e| e.qty()).min();
            self.order[c].min_qty = min.unwrap_or(u64::MAX);
        }
    }

    /// Restores the draw's progress (RDB load, AOF rewrite) once every
    /// entrant is back: the stock (`None`: not begun) and the entrants
    /// looked at.
    pub(super) fn restore_progress(&mut self, stock: Option<u64>, examined: u32) -> Result<(), EffectError> {
        if self.stock.is_some() || self.examined != 0 {
            return Err(EffectError("the draw's progress is restored once"));
        }
        if examined as usize > self.len() || (stock.is_none() && (examined > 0 || self.won > 0)) {
            return Err(EffectError("the draw's progress does not fit its entrants"));
        }
        if stock.is_some_and(|s| s > MAX_TOTAL || self.handed > s) {
            return Err(EffectError("the draw handed out more than its stock"));
        }
        // The draw's winners are all among the entrants it looked at.
        let seen = self.order.iter().flat_map(|c| c.seqs.iter()).take(examined as usize);
        let drawn_seen = seen.filter(|&&s| self.result(s) == EntrantResult::Drawn).count();
        let drawn = (0..self.len() as u32).filter(|&s| self.result(s) == EntrantResult::Drawn).count();
        if drawn_seen != drawn {
            return Err(EffectError("a winner of the draw is past the entrants it looked at"));
        }
        self.stock = stock;
        self.advance(examined);
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

    /// Entrant numbers in draw order (tests, checks).
    #[cfg(test)]
    pub(super) fn order(&self) -> Vec<u32> {
        self.order.iter().flat_map(|c| c.seqs.iter().copied()).collect()
    }

    /// Heap bytes, for MEMORY USAGE.
    pub(super) fn bytes(&self) -> usize {
        self.entrants.bytes()
            + self.arena.bytes()
            + self.by_user.allocation_size()
            + self.by_reqid.allocation_size()
            + self.order.capacity() * std::mem::size_of::<OrderChunk>()
            + self.order.iter().map(|c| c.keys.capacity() * 8 + c.seqs.capacity() * 4).sum::<usize>()
    }

    /// The stored order is the full digests' order, chunks within bounds,
    /// each bound at most its chunk's waiting minimum, the counters right.
    #[cfg(test)]
    pub(super) fn check(&self) -> Result<(), String> {
        let order = self.order();
        let mut want: Vec<u32> = (0..self.len() as u32).collect();
        want.sort_by_key(|&s| self.sort_key(s));
        if order != want {
            return Err("draw order is not the digests' order".into());
        }
        for ch in &self.order {
            if ch.keys.is_empty() || ch.keys.len() > ORDER_CHUNK {
                return Err(format!("order chunk of {} entries", ch.keys.len()));
            }
            let min = ch.seqs.iter().map(|&s| self.entrants[s as usize]).filter(Entrant::waiting).map(|e| e.qty()).min();
            if ch.min_qty > min.unwrap_or(u64::MAX) {
                return Err("an order chunk's bound is above its minimum".into());
            }
        }
        let won = (0..self.len() as u32).filter(|&s| self.result(s) != EntrantResult::Entered).count();
        if won != self.won as usize {
            return Err(format!("{} won, counted {}", won, self.won));
        }
        Ok(())
    }
}

fn prefix_of(key: &[u8; 32]) -> u64 {
    let mut p = [0u8; 8];
    p.copy_from_slice(&key[..8]);
    let p = u64::from_be_bytes(p);
    #[cfg(test)]
    let p = p & PREFIX_MASK.with(std::cell::Cell::get);
    p
}

#[cfg(test)]
thread_local! {
    /// Tests keep fewer prefix bits, so that many entrants share a prefix
    /// and the full digests must order them.
    pub(super) static PREFIX_MASK: std::cell::Cell<u64> = const { std::cell::Cell::new(u64::MAX) };
}

impl PartialEq for Draw {
    fn eq(&self, other: &Draw) -> bool {
        self.seed == other.seed
            && self.stock == other.stock
            && self.examined == other.examined
            && self.len() == other.len()
            && self.all().zip(other.all()).all(|(a, b)| a == b)
    }
}
