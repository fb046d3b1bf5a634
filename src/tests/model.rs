//! Reference-model property tests for the sale's domain logic.
//!
//! A deliberately simple model of one sale (a single pool of stock, a flat
//! list of reservations) is driven side by side with the real `Sale`, which
//! is driven exactly the way `commands.rs` / `expiry.rs` drive it on the
//! master: lazy expiry first (RESERVE, RELEASE, CONFIRM), then the decision,
//! then the effect committed through `Effect::apply`; RECONCILE handles its
//! orders first and expires (with EXPIRE) after them, as `commands::reconcile`
//! does; the timer (`expiry::sweep`) is a step of its own. Every effect the
//! master commits is round-tripped through `to_args` / `parse` and applied to
//! a replica. SEND and RECV (to and from two peer keys) are commands too:
//! the model keeps per-peer counters and the tids of SENDs that took units,
//! and its remaining stock is `total + received - sent - live`.
//!
//! Properties:
//! 1. `model_matches_sale`: replies, remaining, tallies, records, buyers and
//!    buckets agree with the model after every step; the invariant holds.
//! 2. `replica_replays_master`: the replica (and an AOF-rewrite rebuild)
//!    equals the master, derived state included, with identical encodings.
//! 3. `encoding_round_trips`: decode(encode(s)) == s, encode is stable.
//! 4. `decoder_survives_corruption`: truncations, flips and insertions never
//!    panic; a decoded sale keeps the invariant and stays usable.
//! 5. Effects from outside (replication link, AOF, a client calling
//!    SECKILL.EFFECT): never a panic; a refused effect changes nothing
//!    (persisted and derived state); an accepted one keeps the invariant, the
//!    bucket books and a derived state equal to what a reload rebuilds.
//!    - `effect_parser_is_robust`: random argument vectors;
//!    - `mutated_effects_keep_the_contract`: the master's real effects with
//!      tokens replaced, dropped, inserted or repeated;
//!    - `random_effects_keep_the_contract`: well-formed effects with
//!      arbitrary content (wrong states, unknown ids and buckets, batches that
//!      overdraw together, released records that hold stock, transfers that
//!      overdraw, repeat a tid, credit the wrong amount, or restore state
//!      that does not add up), in sequence.
//!
//! Each property runs 256 cases (no regression files are written); the
//! whole suite takes a few seconds in a debug build.

use std::collections::{BTreeSet, HashMap, HashSet};

use proptest::collection::vec;
use proptest::option;
use proptest::prelude::*;
use proptest::test_runner::Config as PtConfig;

use crate::rules::buckets::Buckets;
use crate::rules::effect::Effect;
use crate::rules::fence::{ReplId, UnfenceOutcome};
use crate::rules::reconcile::{reconcile_orders, Order, OrdersReport};
use crate::rules::report::Report;
use crate::rules::reservation::{valid_id, Reservation, State};
use crate::rules::sale::{ConfirmOutcome, Refusal, ReleaseOutcome, Sale, SaleConfig, StreamConfig, OPEN_END};
use crate::rules::transfers::SendDecision;
use crate::wire::effect_args::EffectArgs;
use crate::wire::encoding::{decode, encode};

/// Cases per property; `PROPTEST_CASES=n` runs more (a long soak).
const CASES: u32 = 256;

/// The configuration of every property in the crate.
pub(crate) fn pt_config() -> PtConfig {
    let cases = std::env::var("PROPTEST_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(CASES);
    // No regression files: this suite must not write outside its own source.
    PtConfig { cases, failure_persistence: None, ..PtConfig::default() }
}

const USERS: [&[u8]; 5] = [b"alice", b"bob", b"carol", b"dave", b"erin"];

// ---------------------------------------------------------------------------
// Commands and generators
// ---------------------------------------------------------------------------

#[derive(Clone, Debug)]
enum Cmd {
    /// RESERVE user QTY qty [REQID reqid_name(k)]
    Reserve { user: usize, qty: u64, reqid: Option<usize> },
    /// RELEASE pick_rid(k)
    Release(usize),
    /// CONFIRM pick_rid(k)
    Confirm(usize),
    /// The background expiry timer (expiry::sweep) on the master.
    Sweep,
    /// RECONCILE [EXPIRE] ORDERS ... [APPLY]; orders are (rid choice, user, qty).
    Reconcile { orders: Vec<(usize, usize, u64)>, apply: bool, expire: bool },
    /// SEND PEERS[peer] qty MIN min TID t<tid>
    Send { peer: usize, qty: u64, min: u64, tid: usize },
    /// RECV PEERS[peer] sent_total
    Recv { peer: usize, sent_total: u64 },
    /// The server's replication id changes (a promotion, a restart).
    Failover,
    /// UNFENCE.
    Unfence,
}

/// The server's replication id after `n` failovers.
fn server_id(n: u8) -> ReplId {
    crate::rules::fence::id(b"0123456789abcdef"[usize::from(n % 16)])
}

const PEERS: [&[u8]; 2] = [b"sale:{p0}", b"sale:{p1}"];

fn config_strategy() -> impl Strategy<Value = SaleConfig> {
    (
        0u64..=12,
        1u32..=6,
        1u64..=4,
        prop_oneof![Just(0u64), 1u64..=60],
        0u64..=40,
        prop_oneof![Just(None), (1u64..=300).prop_map(Some)],
        (any::<u32>(), any::<bool>()),
        prop_oneof![
            3 => Just(None),
            1 => option::of(1u64..=100)
                .prop_map(|m| Some(StreamConfig { key: b"sale:{1}:events".to_vec().into(), maxlen: m, owner: b"sale:{1}".to_vec().into() })),
        ],
    )
        .prop_map(|(total, shards, limit, hold_ms, start_ms, len, (tag, fence), stream)| SaleConfig {
            total,
            shards,
            limit,
            hold_ms,
            start_ms,
            end_ms: len.map_or(OPEN_END, |l| start_ms + l),
            stream,
            tag,
            // Every generated sale is a part of a split sale whose peers are
            // the model's PEERS, so SEND and RECV go through; plain sales'
            // refusals are unit-tested in transfers.rs.
            split: Some(crate::rules::config::SplitConfig::new(Some(b"sale:{1}"), b"round-1", &PEERS).unwrap()),
            draw: None,
            beacon: None,
            // Half the sales are FENCE sales, created where the id is server_id(0).
            fence: fence.then(|| server_id(0)),
            // Keyless: the model writes `<tag>-<seq>` ids (keyed ids: ids.rs).
            id_key: None,
        })
}

fn cmd_strategy() -> impl Strategy<Value = Cmd> {
    prop_oneof![
        6 => (0..5usize, 1u64..=3, option::of(0..6usize))
            .prop_map(|(user, qty, reqid)| Cmd::Reserve { user, qty, reqid }),
        2 => (0..10usize).prop_map(Cmd::Release),
        2 => (0..10usize).prop_map(Cmd::Confirm),
        1 => Just(Cmd::Sweep),
        1 => (vec((0..12usize, 0..5usize, 1u64..=3), 1..4), any::<bool>(), any::<bool>())
            .prop_map(|(orders, apply, expire)| Cmd::Reconcile { orders, apply, expire }),
        1 => (0..2usize, 1u64..=8, 1u64..=4, 0..6usize).prop_map(|(peer, qty, min, tid)| Cmd::Send { peer, qty, min, tid }),
        1 => (0..2usize, 0u64..=16).prop_map(|(peer, sent_total)| Cmd::Recv { peer, sent_total }),
        1 => Just(Cmd::Failover),
        1 => Just(Cmd::Unfence),
    ]
}

/// (time step in ms, command)
fn steps_strategy() -> impl Strategy<Value = Vec<(u64, Cmd)>> {
    vec((0u64..=25, cmd_strategy()), 1..40)
}

/// REQIDs: a few client ids, plus two that look like the ids the module
/// generates for this sale, so `generate_id` has to skip them.
fn reqid_name(tag: u32, k: usize) -> Vec<u8> {
    if k < 4 {
        format!("req-{k}").into_bytes()
    } else {
        format!("{:08x}-{}", tag, k - 4).into_bytes()
    }
}

fn pick_rid(m: &Model, k: usize) -> Vec<u8> {
    if k >= 8 || m.recs.is_empty() {
        b"no-such-id".to_vec()
    } else {
        m.recs[k % m.recs.len()].id.clone()
    }
}

fn order_rid(m: &Model, k: usize) -> Vec<u8> {
    match k {
        0..=5 => reqid_name(m.cfg.tag, k),
        6 | 7 => format!("ord-{}", k - 6).into_bytes(),
        _ if m.recs.is_empty() => b"ord-2".to_vec(),
        _ => m.recs[k % m.recs.len()].id.clone(),
    }
}

// ---------------------------------------------------------------------------
// The reference model
// ---------------------------------------------------------------------------

#[derive(Clone, Debug, PartialEq, Eq)]
struct MRec {
    id: Vec<u8>,
    user: Vec<u8>,
    qty: u64,
    state: State,
    created: u64,
    deadline: u64,
}

#[derive(Clone, Debug)]
struct Model {
    cfg: SaleConfig,
    /// In creation order.
    recs: Vec<MRec>,
    index: HashMap<Vec<u8>, usize>,
    /// Users who got stock through RECONCILE APPLY (may pass LIMIT).
    ledger_users: HashSet<Vec<u8>>,
    /// Per peer: (sent, received), cumulative.
    peers: std::collections::BTreeMap<Vec<u8>, (u64, u64)>,
    /// Transfer ids of the SENDs that took units.
    tids: HashSet<Vec<u8>>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
struct ReserveReply {
    status: &'static str,
    id: Option<Vec<u8>>,
    remaining: u64,
}

fn live(s: State) -> bool {
    matches!(s, State::Pending | State::Confirmed)
}

impl Model {
    fn new(cfg: SaleConfig) -> Model {
        Model {
            cfg,
            recs: Vec::new(),
            index: HashMap::new(),
            ledger_users: HashSet::new(),
            peers: Default::default(),
            tids: HashSet::new(),
        }
    }

    /// `total + received - sent`.
    fn capacity(&self) -> u64 {
        let (sent, received) = self.peers.values().fold((0, 0), |(s, r), &(ps, pr)| (s + ps, r + pr));
        self.cfg.total + received - sent
    }

    /// SEND: `[taken, sent_total]`.
    fn send(&mut self, peer: &[u8], qty: u64, min: u64, tid: &[u8]) -> (u64, u64) {
        let take = qty.min(self.remaining());
        let taken = if self.tids.contains(tid) || take < min { 0 } else { take };
        if taken > 0 {
            self.tids.insert(tid.to_vec());
            self.peers.entry(peer.to_vec()).or_default().0 += taken;
        }
        (taken, self.peers.get(peer).map_or(0, |p| p.0))
    }

    /// RECV: `[credited, received_total]`.
    fn recv(&mut self, peer: &[u8], sent_total: u64) -> (u64, u64) {
        let got = self.peers.get(peer).map_or(0, |p| p.1);
        let credit = sent_total.saturating_sub(got);
        if credit > 0 {
            self.peers.entry(peer.to_vec()).or_default().1 = sent_total;
        }
        (credit, got.max(sent_total))
    }

    fn live_qty(&self) -> u64 {
        self.recs.iter().filter(|r| live(r.state)).map(|r| r.qty).sum()
    }

    fn remaining(&self) -> u64 {
        self.capacity() - self.live_qty()
    }

    fn sum(&self, f: impl Fn(State) -> bool) -> u64 {
        self.recs.iter().filter(|r| f(r.state)).map(|r| r.qty).sum()
    }

    fn user_qty(&self, user: &[u8]) -> u64 {
        self.recs.iter().filter(|r| live(r.state) && r.user == user).map(|r| r.qty).sum()
    }

    fn latest_live(&self, user: &[u8]) -> Option<Vec<u8>> {
        self.recs.iter().rev().find(|r| live(r.state) && r.user == user).map(|r| r.id.clone())
    }

    fn buyers(&self) -> u64 {
        self.recs.iter().filter(|r| live(r.state)).map(|r| &r.user).collect::<BTreeSet<_>>().len() as u64
    }

    /// Pending holds with a deadline, by (deadline, creation order).
    fn holds(&self) -> Vec<(u64, usize)> {
        let mut h: Vec<(u64, usize)> = self
            .recs
            .iter()
            .enumerate()
            .filter(|(_, r)| r.state == State::Pending && r.deadline != 0)
            .map(|(i, r)| (r.deadline, i))
            .collect();
        h.sort();
        h
    }

    /// Releases (as expired) every hold whose deadline is `<= now`; returns
    /// their ids in (deadline, creation) order.
    fn expire_due(&mut self, now: u64) -> Vec<Vec<u8>> {
        let due: Vec<usize> = self.holds().into_iter().filter(|&(d, _)| d <= now).map(|(_, i)| i).collect();
        due.into_iter()
            .map(|i| {
                self.recs[i].state = State::Expired;
                self.recs[i].id.clone()
            })
            .collect()
    }

    fn push(&mut self, rec: MRec) {
        self.index.insert(rec.id.clone(), self.recs.len());
        self.recs.push(rec);
    }

    /// The id the module makes: `<tag>-<seq>`, seq being the record count;
    /// when a client took that id, `<tag>-<seq>-<k>` with the smallest free k.
    fn generated_id(&self) -> Vec<u8> {
        let base = format!("{:08x}-{}", self.cfg.tag, self.recs.len());
        if !self.index.contains_key(base.as_bytes()) {
            return base.into_bytes();
        }
        (1..).map(|k| format!("{base}-{k}").into_bytes()).find(|id| !self.index.contains_key(id)).unwrap_or_default()
    }

    /// RESERVE, after expiry. The order of docs/commands.md: DUPLICATE, window, LIMIT, SOLD_OUT.
    fn reserve(&mut self, user: &[u8], qty: u64, reqid: Option<&[u8]>, now: u64) -> ReserveReply {
        let reply = |status, id| ReserveReply { status, id, remaining: 0 };
        let mut r = if let Some(id) = reqid.filter(|id| self.index.contains_key(*id)) {
            reply("DUPLICATE", Some(id.to_vec()))
        } else if now < self.cfg.start_ms {
            reply("NOT_STARTED", None)
        } else if now >= self.cfg.end_ms {
            reply("ENDED", None)
        } else if self.user_qty(user) + qty > self.cfg.limit {
            reply("LIMIT", self.latest_live(user))
        } else if self.remaining() < qty {
            reply("SOLD_OUT", None)
        } else {
            let id = reqid.map_or_else(|| self.generated_id(), <[u8]>::to_vec);
            let deadline = if self.cfg.hold_ms == 0 { 0 } else { now + self.cfg.hold_ms };
            self.push(MRec { id: id.clone(), user: user.to_vec(), qty, state: State::Pending, created: now, deadline });
            reply("RESERVED", Some(id))
        };
        r.remaining = self.remaining();
        r
    }

    fn release(&mut self, id: &[u8]) -> &'static str {
        match self.index.get(id) {
            None => "NOT_FOUND",
            Some(&i) => match self.recs[i].state {
                State::Confirmed => "CONFIRMED",
                State::Released | State::Expired => "ALREADY_RELEASED",
                State::Pending => {
                    self.recs[i].state = State::Released;
                    "RELEASED"
                }
            },
        }
    }

    fn confirm(&mut self, id: &[u8]) -> &'static str {
        match self.index.get(id) {
            None => "NOT_FOUND",
            Some(&i) => match self.recs[i].state {
                State::Confirmed => "ALREADY_CONFIRMED",
                State::Released | State::Expired => "RELEASED",
                State::Pending => {
                    self.recs[i].state = State::Confirmed;
                    "CONFIRMED"
                }
            },
        }
    }

    fn reconcile(&mut self, orders: &[(Vec<u8>, Vec<u8>, u64)], apply: bool, now: u64) -> OrdersReport {
        let mut rep = OrdersReport::default();
        for (rid, user, qty) in orders {
            let boxed: Box<[u8]> = rid.clone().into();
            match self.index.get(rid).copied() {
                Some(i) => match self.recs[i].state {
                    State::Confirmed => rep.ok += 1,
                    State::Pending => {
                        rep.pending.push(boxed);
                        if apply {
                            self.recs[i].state = State::Confirmed;
                        }
                    }
                    State::Released | State::Expired => {
                        if !apply {
                            rep.released.push(boxed);
                        } else if self.remaining() >= self.recs[i].qty {
                            rep.released.push(boxed);
                            self.recs[i].state = State::Confirmed;
                            self.ledger_users.insert(self.recs[i].user.clone());
                        } else {
                            rep.conflict.push(boxed);
                        }
                    }
                },
                None => {
                    if !apply {
                        rep.unknown.push(boxed);
                    } else if self.remaining() >= *qty {
                        rep.unknown.push(boxed);
                        self.ledger_users.insert(user.clone());
                        self.push(MRec {
                            id: rid.clone(),
                            user: user.clone(),
                            qty: *qty,
                            state: State::Confirmed,
                            created: now,
                            deadline: 0,
                        });
                    } else {
                        rep.conflict.push(boxed);
                    }
                }
            }
        }
        rep
    }
}

// ---------------------------------------------------------------------------
// Checks shared by the properties
// ---------------------------------------------------------------------------

/// Everything about a sale that is not persisted but rebuilt: tallies,
/// buyers, holds, and what RESERVE would decide for each user.
#[derive(Debug, PartialEq)]
struct Derived {
    report: Report,
    next_deadline: Option<u64>,
    due: Vec<Box<[u8]>>,
    probes: Vec<Result<Reservation, Refusal>>,
}

fn derived(s: &Sale) -> Derived {
    let c = s.config();
    let all = recs(s);
    let mut users: BTreeSet<&[u8]> = USERS.iter().copied().collect();
    users.extend(all.iter().map(|r| &*r.user));
    let mut probes = Vec::new();
    for u in users {
        for q in 1..=c.limit.min(4) {
            probes.push(s.decide_reserve(u, q, None, c.start_ms));
        }
        probes.push(s.decide_reserve(u, c.limit, None, c.start_ms));
    }
    Derived {
        report: Report::of(s, || crate::rules::fence::id(b'0')),
        next_deadline: s.next_deadline(),
        due: s.due_holds(u64::MAX, usize::MAX),
        probes,
    }
}

/// The invariant and the bucket rules, from the public view only.
fn check_sale_consistent(s: &Sale) -> Result<(), String> {
    let c = s.config();
    if !s.invariant_holds() {
        return Err("invariant_holds() is false".into());
    }
    // Buyer chains, hold counts, indexes: what the public view cannot see.
    s.check_internals()?;
    let t = s.tally();
    let io = s.transfer_totals();
    let held = u128::from(s.remaining()) + u128::from(t.pending) + u128::from(t.confirmed);
    if held + u128::from(io.sent) != u128::from(c.total) + u128::from(io.received) {
        return Err(format!(
            "remaining {} + pending {} + confirmed {} != total {} + {io:?}",
            s.remaining(),
            t.pending,
            t.confirmed,
            c.total
        ));
    }
    // The allocations start as the even split and follow the transfers.
    if s.transfers().is_none() && s.buckets().allocation() != Buckets::new(c.total, c.shards).remaining() {
        return Err("allocations moved without a transfer".into());
    }
    if u128::from(s.buckets().allocation().iter().sum::<u64>()) != held {
        return Err("allocations do not add up to total + received - sent".into());
    }
    let alloc = s.buckets().allocation();
    let rem = s.buckets().remaining();
    if rem.len() != alloc.len() {
        return Err("bucket count".into());
    }
    if rem.iter().sum::<u64>() != s.remaining() {
        return Err(format!("buckets {rem:?} do not sum to remaining {}", s.remaining()));
    }
    // Per bucket: remainder + live takes == allocation.
    let mut held = vec![0u64; rem.len()];
    let (mut pending, mut confirmed, mut released, mut expired) = (0u64, 0u64, 0u64, 0u64);
    for r in recs(s) {
        match r.state {
            State::Pending => pending += r.qty,
            State::Confirmed => confirmed += r.qty,
            State::Released => released += r.qty,
            State::Expired => {
                released += r.qty;
                expired += r.qty
            }
        }
        if r.state.is_live() {
            if r.takes.iter().map(|t| t.qty).sum::<u64>() != r.qty || r.takes.iter().any(|t| t.qty == 0) {
                return Err(format!("takes of {:?} do not add up", r));
            }
            for t in &r.takes {
                held[t.bucket as usize] += t.qty;
            }
        } else if !r.takes.is_empty() {
            return Err(format!("released record holds takes: {:?}", r));
        }
    }
    for (i, ((&r, &a), &h)) in rem.iter().zip(alloc).zip(&held).enumerate() {
        if r > a {
            return Err(format!("bucket {i} remainder {r} above allocation {a}"));
        }
        if r + h != a {
            return Err(format!("bucket {i}: remainder {r} + live takes {h} != allocation {a}"));
        }
    }
    if (t.pending, t.confirmed, t.released, t.expired) != (pending, confirmed, released, expired) {
        return Err(format!("tally {t:?} differs from the records ({pending}, {confirmed}, {released}, {expired})"));
    }
    // Ids are unique and `get` finds each record.
    let mut ids = HashSet::new();
    let all = recs(s);
    for r in &all {
        if !ids.insert(&r.id) {
            return Err(format!("reservation id {:?} appears twice", r.id));
        }
        if s.get(&r.id).map(|v| v.to_owned()).as_ref() != Some(r) {
            return Err(format!("get({:?}) does not find its record", r.id));
        }
    }
    // Buyers and holds are what the records say.
    let buyers = recs(s).iter().filter(|r| r.state.is_live()).map(|r| &r.user).collect::<HashSet<_>>().len();
    if s.buyer_count() != buyers {
        return Err(format!("buyer count {} but {} users hold live reservations", s.buyer_count(), buyers));
    }
    let mut holds: Vec<(u64, usize)> = recs(s)
        .iter()
        .enumerate()
        .filter(|(_, r)| r.state == State::Pending && r.deadline_ms != 0)
        .map(|(i, r)| (r.deadline_ms, i))
        .collect();
    holds.sort();
    let due: Vec<Box<[u8]>> = holds.iter().map(|&(_, i)| recs(s)[i].id.clone()).collect();
    if s.due_holds(u64::MAX, usize::MAX) != due || s.next_deadline() != holds.first().map(|h| h.0) {
        return Err("holds differ from the pending records".into());
    }
    // A batch is the first `max` of them; a deadline not reached stops it.
    for max in 0..3 {
        if s.due_holds(u64::MAX, max)[..] != due[..max.min(due.len())] {
            return Err(format!("due_holds(_, {max}) is not the first {max} due holds"));
        }
    }
    if let Some(&(first, _)) = holds.first() {
        if !s.due_holds(first - 1, usize::MAX).is_empty() || s.due_holds(first, 1).len() != 1 {
            return Err("due_holds does not stop at the first deadline".into());
        }
    }
    Ok(())
}

fn check_against_model(m: &Model, s: &Sale, step: usize) {
    let ctx = |what: &str| format!("step {step}: {what}");
    if let Err(e) = check_sale_consistent(s) {
        panic!("{}", ctx(&e));
    }
    assert_eq!(s.remaining(), m.remaining(), "{}", ctx("remaining"));
    let peers: Vec<(Vec<u8>, (u64, u64))> =
        s.transfers().map_or_else(Vec::new, |t| t.peers.iter().map(|(p, c)| (p.to_vec(), (c.sent, c.received))).collect());
    assert_eq!(peers, m.peers.clone().into_iter().collect::<Vec<_>>(), "{}", ctx("transfer counters"));
    let t = s.tally();
    assert_eq!(t.pending, m.sum(|st| st == State::Pending), "{}", ctx("pending"));
    assert_eq!(t.confirmed, m.sum(|st| st == State::Confirmed), "{}", ctx("confirmed"));
    assert_eq!(t.released, m.sum(State::is_released), "{}", ctx("released"));
    assert_eq!(t.expired, m.sum(|st| st == State::Expired), "{}", ctx("expired"));
    assert_eq!(s.buyer_count() as u64, m.buyers(), "{}", ctx("buyers"));
    assert_eq!(recs(s).len(), m.recs.len(), "{}", ctx("record count"));
    for (r, mr) in recs(s).iter().zip(&m.recs) {
        let got = (&*r.id, &*r.user, r.qty, r.state, r.created_ms, r.deadline_ms);
        let want = (&mr.id[..], &mr.user[..], mr.qty, mr.state, mr.created, mr.deadline);
        assert_eq!(got, want, "{}", ctx("record"));
        assert_eq!(s.get(&mr.id).map(|v| v.to_owned()).as_ref(), Some(r), "{}", ctx("get"));
    }
    // Holds: what the expiry would pick, and when.
    let holds = m.holds();
    assert_eq!(s.next_deadline(), holds.first().map(|h| h.0), "{}", ctx("next_deadline"));
    let due: Vec<Box<[u8]>> = holds.iter().map(|&(_, i)| m.recs[i].id.clone().into()).collect();
    assert_eq!(s.due_holds(u64::MAX, usize::MAX), due, "{}", ctx("due_holds"));
    // Buyers: LIMIT is decided from each user's live quantity.
    for u in USERS {
        let q_user = m.user_qty(u);
        if !m.ledger_users.contains(u) {
            assert!(q_user <= m.cfg.limit, "{}", ctx("a user passed LIMIT without RECONCILE APPLY"));
        }
        for q in 1..=m.cfg.limit.min(4) {
            let got = s.decide_reserve(u, q, None, m.cfg.start_ms);
            if q_user + q > m.cfg.limit {
                assert_eq!(got, Err(Refusal::Limit(m.latest_live(u).map(Into::into))), "{}", ctx("LIMIT probe"));
            } else if m.remaining() < q {
                assert_eq!(got, Err(Refusal::SoldOut), "{}", ctx("SOLD_OUT probe"));
            } else {
                assert!(got.is_ok(), "{}", ctx("RESERVE probe"));
            }
        }
    }
}

fn roundtrip_effect(e: &Effect) -> Effect {
    let owned = e.to_args();
    let args: Vec<&[u8]> = owned.iter().map(Vec::as_slice).collect();
    let parsed = Effect::parse(&args).unwrap_or_else(|err| panic!("effect {e:?} does not parse back: {err:?}"));
    assert_eq!(&parsed, e, "effect changed through to_args/parse");
    parsed
}

// ---------------------------------------------------------------------------
// The master, driven as the module drives it
// ---------------------------------------------------------------------------

struct Master {
    sale: Sale,
    replica: Sale,
    effects: Vec<Effect>,
}

impl Master {
    fn commit(&mut self, e: Effect) {
        commit_to(&mut self.sale, &mut self.replica, &mut self.effects, e);
    }

    /// commit::Committer::expire_due, with the module's chunk (`commit::LAZY_CHUNK`,
    /// not compiled without the module). A run never has that many holds
    /// due at once, so the model's "release every due hold" still applies.
    fn expire_due(&mut self, now: u64) -> Vec<Vec<u8>> {
        const CHUNK: usize = 128;
        if self.sale.next_deadline().is_none_or(|d| d > now) {
            return Vec::new();
        }
        let due = self.sale.due_holds(now, CHUNK);
        let ids = due.iter().map(|id| id.to_vec()).collect();
        self.commit(Effect::Expire(due));
        ids
    }
}

/// Commit::commit on the master: apply, then replicate (to_args -> parse ->
/// apply on the replica).
fn commit_to(sale: &mut Sale, replica: &mut Sale, effects: &mut Vec<Effect>, e: Effect) {
    if let Err(err) = e.apply(sale) {
        panic!("master refused its own effect {e:?}: {err:?}");
    }
    let parsed = roundtrip_effect(&e);
    if let Err(err) = parsed.apply(replica) {
        panic!("replica refused {parsed:?}: {err:?}");
    }
    effects.push(e);
}

struct Trace {
    master: Sale,
    replica: Sale,
    effects: Vec<Effect>,
    snapshots: Vec<Sale>,
}

/// Runs the sequence against the model and the real sale. Replies are
/// always checked; with `full`, the whole state (model, replica, derived
/// state) is checked after every step too. The properties that only need the
/// sales a run produces use the light mode, to keep the suite fast.
fn run(cfg: &SaleConfig, steps: &[(u64, Cmd)]) -> Trace {
    run_checked(cfg, steps, true)
}

fn run_light(cfg: &SaleConfig, steps: &[(u64, Cmd)]) -> Trace {
    run_checked(cfg, steps, false)
}

fn run_checked(cfg: &SaleConfig, steps: &[(u64, Cmd)], full: bool) -> Trace {
    let mut model = Model::new(cfg.clone());
    let init = Effect::Init(cfg.clone());
    let Effect::Init(replica_cfg) = roundtrip_effect(&init) else { unreachable!() };
    let mut m = Master { sale: Sale::new(cfg.clone()), replica: Sale::new(replica_cfg), effects: vec![init] };
    let mut snapshots = vec![m.sale.clone()];
    let mut now = 0u64;
    // The server's replication id (`node::replid`), and whether the model
    // says the sale is fenced there: it recorded another one.
    let mut failovers = 0u8;
    let fenced = |model: &Model, failovers: u8| model.cfg.fence.is_some_and(|r| r != server_id(failovers));
    check_against_model(&model, &m.sale, 0);
    for (step, (dt, cmd)) in steps.iter().enumerate() {
        let step = step + 1;
        now += dt;
        match cmd {
            Cmd::Reserve { user, qty, reqid } => {
                let user = USERS[*user];
                let reqid = reqid.map(|k| reqid_name(cfg.tag, k));
                if *qty > cfg.limit {
                    // ERR QTY is above the sale's LIMIT: refused before anything.
                    if full {
                        check_against_model(&model, &m.sale, step);
                    }
                    snapshots.push(m.sale.clone());
                    continue;
                }
                // commands::reserve: FENCED before anything changes, lazy
                // expiry included.
                assert_eq!(m.sale.fenced(|| server_id(failovers)), fenced(&model, failovers), "step {step}: fenced");
                if fenced(&model, failovers) {
                    if full {
                        check_against_model(&model, &m.sale, step);
                    }
                    snapshots.push(m.sale.clone());
                    continue;
                }
                let want_exp = model.expire_due(now);
                let got_exp = m.expire_due(now);
                assert_eq!(got_exp, want_exp, "step {step}: expired holds");
                let (status, id) = match m.sale.decide_reserve(user, *qty, reqid.as_deref(), now) {
                    Ok(rec) => {
                        let id = rec.id.to_vec();
                        assert_eq!(rec.state, State::Pending);
                        assert!(valid_id(&id), "step {step}: generated id {id:?} is not a valid id");
                        m.commit(Effect::Records(vec![rec]));
                        ("RESERVED", Some(id))
                    }
                    Err(Refusal::Duplicate(id)) => ("DUPLICATE", Some(id.to_vec())),
                    Err(Refusal::NotStarted) => ("NOT_STARTED", None),
                    Err(Refusal::Ended) => ("ENDED", None),
                    Err(Refusal::Limit(id)) => ("LIMIT", id.map(|i| i.to_vec())),
                    Err(Refusal::SoldOut) => ("SOLD_OUT", None),
                };
                let got = ReserveReply { status, id, remaining: m.sale.remaining() };
                let want = model.reserve(user, *qty, reqid.as_deref(), now);
                assert_eq!(got, want, "step {step}: RESERVE reply");
            }
            Cmd::Release(k) | Cmd::Confirm(k) => {
                let rid = pick_rid(&model, *k);
                let want_exp = model.expire_due(now);
                let got_exp = m.expire_due(now);
                assert_eq!(got_exp, want_exp, "step {step}: expired holds");
                let is_release = matches!(cmd, Cmd::Release(_));
                let state = m.sale.get(&rid).map(|v| v.to_owned()).map(|r| r.state);
                // commands::release / commands::confirm
                let got = if is_release {
                    match state {
                        None => "NOT_FOUND",
                        Some(State::Confirmed) => "CONFIRMED",
                        Some(State::Released | State::Expired) => "ALREADY_RELEASED",
                        Some(State::Pending) => {
                            m.commit(Effect::Release(rid.clone().into()));
                            "RELEASED"
                        }
                    }
                } else {
                    match state {
                        None => "NOT_FOUND",
                        Some(State::Confirmed) => "ALREADY_CONFIRMED",
                        Some(State::Released | State::Expired) => "RELEASED",
                        Some(State::Pending) => {
                            m.commit(Effect::Confirm(rid.clone().into()));
                            "CONFIRMED"
                        }
                    }
                };
                let want = if is_release { model.release(&rid) } else { model.confirm(&rid) };
                assert_eq!((got, m.sale.remaining()), (want, model.remaining()), "step {step}: {cmd:?} reply");
                // A second call on the settled sale: the direct Sale methods
                // agree with the command's status (and change nothing more).
                let before = m.sale.clone();
                let again = if is_release {
                    match m.sale.release(&rid, State::Released) {
                        ReleaseOutcome::Released => "RELEASED",
                        ReleaseOutcome::AlreadyReleased => "ALREADY_RELEASED",
                        ReleaseOutcome::Confirmed => "CONFIRMED",
                        ReleaseOutcome::NotFound => "NOT_FOUND",
                    }
                } else {
                    match m.sale.confirm(&rid) {
                        ConfirmOutcome::Confirmed => "CONFIRMED",
                        ConfirmOutcome::AlreadyConfirmed => "ALREADY_CONFIRMED",
                        ConfirmOutcome::Released => "RELEASED",
                        ConfirmOutcome::NotFound => "NOT_FOUND",
                    }
                };
                let settled = match want {
                    "RELEASED" if is_release => "ALREADY_RELEASED",
                    "CONFIRMED" if !is_release => "ALREADY_CONFIRMED",
                    other => other,
                };
                assert_eq!(again, settled, "step {step}: repeated {cmd:?}");
                assert!(m.sale == before, "step {step}: a repeated {cmd:?} changed the sale");
            }
            Cmd::Sweep => {
                let want_exp = model.expire_due(now);
                let got_exp = m.expire_due(now);
                assert_eq!(got_exp, want_exp, "step {step}: timer expiry");
            }
            Cmd::Reconcile { orders, apply, expire } => {
                let rows: Vec<(Vec<u8>, Vec<u8>, u64)> =
                    orders.iter().map(|&(k, u, q)| (order_rid(&model, k), USERS[u].to_vec(), q)).collect();
                let parsed: Vec<Order> = rows.iter().map(|(r, u, q)| Order { rid: r, user: u, qty: *q }).collect();
                // EXPIRE (or APPLY, a write) first: orders are classified against what stays.
                if *expire || *apply {
                    let want_exp = model.expire_due(now);
                    let got_exp = m.expire_due(now);
                    assert_eq!(got_exp, want_exp, "step {step}: RECONCILE EXPIRE");
                }
                let before = m.sale.clone();
                let effects_before = m.effects.len();
                let Master { sale, replica, effects } = &mut m;
                let got = reconcile_orders(sale, &parsed, *apply, now, |sale, effect| {
                    commit_to(sale, replica, effects, effect);
                });
                if !apply {
                    assert!(m.sale == before, "step {step}: RECONCILE without APPLY changed the sale");
                    assert_eq!(m.effects.len(), effects_before, "step {step}: RECONCILE without APPLY made effects");
                }
                let want = model.reconcile(&rows, *apply, now);
                assert_eq!(got, want, "step {step}: RECONCILE orders report for {rows:?}");
                assert_eq!(
                    got.ok as usize + got.pending.len() + got.released.len() + got.unknown.len() + got.conflict.len(),
                    rows.len(),
                    "step {step}: every order row is in exactly one class"
                );
            }
            Cmd::Send { peer, qty, min, tid } => {
                // commands::send: refused while fenced, else lazy expiry,
                // decide, commit.
                let (peer, tid) = (PEERS[*peer], format!("t{tid}").into_bytes());
                if m.sale.fenced(|| server_id(failovers)) {
                    assert!(fenced(&model, failovers), "step {step}: SEND refused on a sale the model has not fenced");
                    snapshots.push(m.sale.clone());
                    continue;
                }
                assert_eq!(m.expire_due(now), model.expire_due(now), "step {step}: expired holds");
                let taken = match m.sale.decide_send(*qty, *min, &tid) {
                    SendDecision::Take(takes) => {
                        let taken = takes.iter().map(|t| t.qty).sum();
                        m.commit(Effect::Send { peer: peer.into(), tid: tid.clone().into(), takes, to: None });
                        taken
                    }
                    SendDecision::Repeated | SendDecision::BelowMin => 0,
                };
                let got = (taken, m.sale.transfer_counters(peer).sent, m.sale.remaining());
                let want = model.send(peer, *qty, *min, &tid);
                assert_eq!(got, (want.0, want.1, model.remaining()), "step {step}: SEND reply");
            }
            Cmd::Recv { peer, sent_total } => {
                let peer = PEERS[*peer];
                assert_eq!(m.expire_due(now), model.expire_due(now), "step {step}: expired holds");
                let credit = match m.sale.plan_recv(peer, *sent_total).expect("small totals fit") {
                    Some(credits) => {
                        let credit = credits.iter().map(|t| t.qty).sum();
                        m.commit(Effect::Recv { peer: peer.into(), sent_total: *sent_total, credits });
                        credit
                    }
                    None => 0,
                };
                let got = (credit, m.sale.transfer_counters(peer).received, m.sale.remaining());
                let want = model.recv(peer, *sent_total);
                assert_eq!(got, (want.0, want.1, model.remaining()), "step {step}: RECV reply");
            }
            Cmd::Failover => failovers = failovers.wrapping_add(1),
            Cmd::Unfence => {
                // commands::unfence: a fenced sale writes (lazy expiry, then
                // the effect with the current id); anything else changes nothing.
                let current = server_id(failovers);
                let before = m.sale.clone();
                match m.sale.decide_unfence(&current) {
                    UnfenceOutcome::Unfenced => {
                        assert!(fenced(&model, failovers), "step {step}: UNFENCED a sale the model has not fenced");
                        assert_eq!(m.expire_due(now), model.expire_due(now), "step {step}: expired holds");
                        m.commit(Effect::Unfence(current));
                        model.cfg.fence = Some(current);
                        assert!(!m.sale.fenced(|| current), "step {step}: still fenced after UNFENCE");
                    }
                    UnfenceOutcome::NotFenced => {
                        assert!(!fenced(&model, failovers), "step {step}: NOT_FENCED on a fenced sale");
                        assert!(m.sale == before, "step {step}: NOT_FENCED changed the sale");
                    }
                }
                assert_eq!(m.sale.config().fence, model.cfg.fence, "step {step}: recorded id");
            }
        }
        if full {
            check_against_model(&model, &m.sale, step);
            assert!(m.replica == m.sale, "step {step}: replica differs from master after {cmd:?}");
            assert_eq!(derived(&m.replica), derived(&m.sale), "step {step}: replica derived state differs");
        }
        snapshots.push(m.sale.clone());
    }
    Trace { master: m.sale, replica: m.replica, effects: m.effects, snapshots }
}

/// datatype::aof_rewrite: `effect::rebuild` (INIT, transfer state, the
/// records in chunks), each effect through to_args / parse.
fn aof_rebuild(s: &Sale, chunk: usize) -> Sale {
    let mut rebuilt: Option<Sale> = None;
    crate::rules::effect::rebuild(s, chunk, |e| match (roundtrip_effect(e), &mut rebuilt) {
        (Effect::Init(cfg), None) => rebuilt = Some(Sale::new(cfg)),
        (e, Some(sale)) => {
            if let Err(err) = e.apply(sale) {
                panic!("AOF rewrite effect {e:?} refused: {err:?}");
            }
        }
        (e, None) => panic!("AOF rewrite starts with {e:?}, not INIT"),
    });
    rebuilt.expect("an AOF rewrite emits INIT")
}

// ---------------------------------------------------------------------------
// Random arguments for the effect parser
// ---------------------------------------------------------------------------

fn token_strategy(ids: Vec<Vec<u8>>) -> impl Strategy<Value = Vec<u8>> + Clone {
    let words: Vec<Vec<u8>> = [
        "0",
        "1",
        "2",
        "3",
        "4",
        "5",
        "7",
        "12",
        "100",
        "1023",
        "1024",
        "1025",
        "4294967295",
        "4294967296",
        "1000000000000000",
        "1000000000000001",
        "9223372036854775807",
        "18446744073709551615",
        "18446744073709551616",
        "-1",
        "",
        "x",
        "STREAM",
        "s",
        "alice",
        "bob",
        "erin",
        "no-such-id",
        "req-0",
        "req-1",
        "RECORDS",
        "EXPIRE",
    ]
    .iter()
    .map(|w| w.as_bytes().to_vec())
    .collect();
    let mut ids = ids;
    ids.push(b"req-0".to_vec());
    prop_oneof![
        4 => proptest::sample::select(words),
        3 => proptest::sample::select(ids),
        1 => vec(any::<u8>(), 0..5),
        1 => Just(vec![b'z'; 257]),
    ]
}

fn op_strategy() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        proptest::sample::select(
            ["INIT", "RECORDS", "records", "RELEASE", "CONFIRM", "EXPIRE", "RETAKE", "Retake", "NOPE", ""]
                .iter()
                .map(|w| w.as_bytes().to_vec())
                .collect::<Vec<_>>()
        ),
        vec(any::<u8>(), 0..4),
    ]
}

#[derive(Clone, Debug)]
enum Mutation {
    Replace(usize, Vec<u8>),
    Remove(usize),
    Insert(usize, Vec<u8>),
    Duplicate(usize),
}

fn mutate_args(mut args: Vec<Vec<u8>>, muts: &[Mutation]) -> Vec<Vec<u8>> {
    for mu in muts {
        let n = args.len();
        match mu {
            Mutation::Replace(i, t) if n > 0 => args[i % n] = t.clone(),
            Mutation::Remove(i) if n > 0 => {
                args.remove(i % n);
            }
            Mutation::Insert(i, t) => args.insert(i % (n + 1), t.clone()),
            Mutation::Duplicate(i) if n > 0 => {
                let t = args[i % n].clone();
                args.insert(i % n, t);
            }
            _ => {}
        }
    }
    args
}

fn mutation_strategy(ids: Vec<Vec<u8>>) -> impl Strategy<Value = Mutation> {
    let tok = token_strategy(ids);
    prop_oneof![
        3 => (any::<usize>(), tok.clone()).prop_map(|(i, t)| Mutation::Replace(i, t)),
        1 => any::<usize>().prop_map(Mutation::Remove),
        1 => (any::<usize>(), tok).prop_map(|(i, t)| Mutation::Insert(i, t)),
        1 => any::<usize>().prop_map(Mutation::Duplicate),
    ]
}

/// Applies a parsed effect to `sale` and checks the contract: refused means
/// unchanged; accepted means the invariant holds and the derived state is
/// what a reload would rebuild.
fn apply_checked(sale: &Sale, e: &Effect) -> Result<Sale, String> {
    if let Effect::Init(cfg) = e {
        let fresh = Sale::new(cfg.clone());
        check_sale_consistent(&fresh).map_err(|m| format!("INIT {cfg:?}: {m}"))?;
        let again = roundtrip_effect(e);
        assert_eq!(&again, e);
        return Ok(fresh);
    }
    let mut after = sale.clone();
    match e.apply(&mut after) {
        Err(_) => {
            if after != *sale || derived(&after) != derived(sale) {
                return Err(format!("refused effect {e:?} changed the sale"));
            }
            Ok(after)
        }
        Ok(()) => {
            check_sale_consistent(&after).map_err(|m| format!("after {e:?}: {m}"))?;
            let reloaded = decode(&encode(&after)).map_err(|d| format!("after {e:?}: reload refused: {d:?}"))?;
            if reloaded != after || derived(&reloaded) != derived(&after) {
                return Err(format!("after {e:?}: derived state differs from a reload"));
            }
            Ok(after)
        }
    }
}

/// A random effect, with ids as choices resolved against a sale at run time.
#[derive(Clone, Debug)]
enum EffectSpec {
    /// (id choice, user, qty, state code, created, deadline, takes)
    Records(Vec<(usize, usize, u64, u8, u64, u64, TakesSpec)>),
    Release(usize),
    Confirm(usize),
    Expire(Vec<usize>),
    Retake(usize, TakesSpec),
    /// (peer, tid choice, takes): raw, or planned by `plan_send` for qty.
    Send(usize, usize, Result<Vec<(u32, u64)>, u64>),
    /// (peer, sent_total, credits): raw, or planned by `plan_credit`.
    Recv(usize, u64, Option<Vec<(u32, u64)>>),
    /// (allocation delta per bucket, peer counters, tid choices).
    Transfers(Vec<i8>, Vec<(usize, u64, u64)>, Vec<usize>),
}

/// Takes as (bucket, qty); `Planned(b)`: what `plan_take` from home
/// `b % shards` gives for the quantity on the sale as it stands (so a batch
/// of planned records can still overdraw together); `Empty`: none.
#[derive(Clone, Debug)]
enum TakesSpec {
    Raw(Vec<(u32, u64)>),
    Planned(u32),
    Empty,
}

fn takes_strategy() -> impl Strategy<Value = TakesSpec> {
    prop_oneof![
        1 => vec((0u32..7, 0u64..=4), 0..4).prop_map(TakesSpec::Raw),
        3 => any::<u32>().prop_map(TakesSpec::Planned),
        1 => Just(TakesSpec::Empty),
    ]
}

fn effect_spec_strategy() -> impl Strategy<Value = EffectSpec> {
    let rec = (
        0..16usize,
        0..5usize,
        1u64..=4,
        prop_oneof![3 => 0u8..2, 1 => 2u8..4],
        0u64..100,
        prop_oneof![Just(0u64), 0u64..200],
        takes_strategy(),
    );
    prop_oneof![
        3 => vec(rec, 1..4).prop_map(EffectSpec::Records),
        1 => (0..12usize).prop_map(EffectSpec::Release),
        1 => (0..12usize).prop_map(EffectSpec::Confirm),
        1 => vec(0..12usize, 1..4).prop_map(EffectSpec::Expire),
        2 => (0..12usize, takes_strategy()).prop_map(|(k, t)| EffectSpec::Retake(k, t)),
        2 => (0..2usize, 0..4usize, prop_oneof![vec((0u32..7, 0u64..=4), 0..3).prop_map(Ok), (0u64..=8).prop_map(Err)])
            .prop_map(|(p, t, k)| EffectSpec::Send(p, t, k)),
        2 => (0..2usize, 0u64..=20, option::of(vec((0u32..7, 0u64..=4), 0..3)))
            .prop_map(|(p, n, c)| EffectSpec::Recv(p, n, c)),
        1 => (vec(-2i8..=2, 0..7), vec((0..3usize, 0u64..=5, 0u64..=5), 0..3), vec(0..6usize, 0..3))
            .prop_map(|(a, p, t)| EffectSpec::Transfers(a, p, t)),
    ]
}

/// Choices 0..8 name a record of `s` (when it has any), 8.. fresh ids.
fn spec_id(s: &Sale, k: usize) -> Box<[u8]> {
    if k < 8 && !recs(s).is_empty() {
        recs(s)[k % recs(s).len()].id.clone()
    } else {
        format!("fresh-{}", k % 5).into_bytes().into()
    }
}

fn to_takes(s: &Sale, t: &TakesSpec, qty: u64) -> Vec<crate::rules::buckets::Take> {
    match t {
        TakesSpec::Raw(t) => t.iter().map(|&(bucket, qty)| crate::rules::buckets::Take { bucket, qty }).collect(),
        TakesSpec::Planned(b) => s
            .buckets()
            .plan_take(b % s.config().shards, qty)
            .unwrap_or_else(|| vec![crate::rules::buckets::Take { bucket: b % s.config().shards, qty }]),
        TakesSpec::Empty => Vec::new(),
    }
}

fn resolve(s: &Sale, spec: &EffectSpec) -> Effect {
    match spec {
        EffectSpec::Records(recs) => Effect::Records(
            recs.iter()
                .map(|(k, u, qty, code, created, deadline, takes)| Reservation {
                    id: spec_id(s, *k),
                    user: USERS[*u].into(),
                    qty: *qty,
                    state: State::from_code(u64::from(*code)).unwrap(),
                    created_ms: *created,
                    deadline_ms: *deadline,
                    takes: to_takes(s, takes, *qty),
                })
                .collect(),
        ),
        EffectSpec::Release(k) => Effect::Release(spec_id(s, *k)),
        EffectSpec::Confirm(k) => Effect::Confirm(spec_id(s, *k)),
        EffectSpec::Expire(ks) => Effect::Expire(ks.iter().map(|k| spec_id(s, *k)).collect()),
        EffectSpec::Retake(k, t) => {
            let id = spec_id(s, *k);
            let qty = s.get(&id).map(|v| v.to_owned()).map_or(1, |r| r.qty);
            Effect::Retake(id, to_takes(s, t, qty))
        }
        EffectSpec::Send(p, tid, takes) => {
            let takes = match takes {
                Ok(raw) => raw_takes(raw),
                Err(qty) => s.buckets().plan_send(*qty).unwrap_or_default(),
            };
            Effect::Send { peer: PEERS[*p].into(), tid: format!("t{tid}").into_bytes().into(), takes, to: None }
        }
        EffectSpec::Recv(p, sent_total, credits) => {
            let owed = sent_total.saturating_sub(s.transfer_counters(PEERS[*p]).received);
            let credits = credits.as_ref().map_or_else(|| s.buckets().plan_credit(owed), |raw| raw_takes(raw));
            Effect::Recv { peer: PEERS[*p].into(), sent_total: *sent_total, credits }
        }
        EffectSpec::Transfers(delta, peers, tids) => {
            let mut allocation = s.buckets().allocation().to_vec();
            for (a, d) in allocation.iter_mut().zip(delta) {
                *a = a.saturating_add_signed(i64::from(*d));
            }
            let peers = peers.iter().map(|&(p, sent, received)| {
                let name: Box<[u8]> = if p < 2 { PEERS[p].into() } else { b"sale:{p9}".to_vec().into() };
                (name, crate::rules::transfers::Counters { sent, received })
            });
            let tids = tids.iter().map(|t| format!("t{t}").into_bytes().into()).collect();
            Effect::Transfers { allocation, peers: peers.collect(), tids }
        }
    }
}

fn raw_takes(raw: &[(u32, u64)]) -> Vec<crate::rules::buckets::Take> {
    raw.iter().map(|&(bucket, qty)| crate::rules::buckets::Take { bucket, qty }).collect()
}

fn put_varint(out: &mut Vec<u8>, mut n: u64) {
    while n >= 0x80 {
        out.push((n as u8) | 0x80);
        n >>= 7;
    }
    out.push(n as u8);
}

fn varint_len(n: u64) -> usize {
    let mut v = Vec::new();
    put_varint(&mut v, n);
    v.len()
}

/// `encode(s)` with the stored bucket remainders replaced by `rem`.
fn with_remainders(s: &Sale, rem: &[u64]) -> Vec<u8> {
    let c = s.config();
    let bytes = encode(s);
    let fresh = encode(&Sale::new(c.clone()));
    let alloc_len: usize = Buckets::new(c.total, c.shards).remaining().iter().map(|&a| varint_len(a)).sum();
    // A fresh sale ends with its remainders, the transfers flag (0) and
    // the record count (0).
    let prefix = fresh.len() - alloc_len - 2;
    let old_len: usize = s.buckets().remaining().iter().map(|&r| varint_len(r)).sum();
    let mut out = bytes[..prefix].to_vec();
    for &r in rem {
        put_varint(&mut out, r);
    }
    out.extend_from_slice(&bytes[prefix + old_len..]);
    out
}

fn exercise(s: &Sale) {
    // A loaded sale must stay usable: every operation keeps the invariant.
    let mut s = s.clone();
    let ids: Vec<Box<[u8]>> = recs(&s).iter().map(|r| r.id.clone()).collect();
    for (i, id) in ids.iter().enumerate() {
        let _ = s.decide_reserve(&recs(&s)[i].user.clone(), 1, None, s.config().start_ms);
        let _ = s.plan_retake(id);
        if i % 2 == 0 {
            s.confirm(id);
        } else {
            s.release(id, State::Expired);
        }
        assert!(s.invariant_holds(), "invariant broken after operating on a decoded sale");
    }
    let due = s.due_holds(u64::MAX, usize::MAX);
    for id in due {
        s.release(&id, State::Expired);
    }
    assert!(check_sale_consistent(&s).is_ok());
}

// ---------------------------------------------------------------------------
// The properties
// ---------------------------------------------------------------------------

proptest! {
    #![proptest_config(pt_config())]

    /// 1. The real sale agrees with the reference model after every step.
    #[test]
    fn model_matches_sale(cfg in config_strategy(), steps in steps_strategy()) {
        run(&cfg, &steps);
    }

    /// 2. Replaying the master's effects (through to_args/parse) gives the
    /// same sale, byte for byte; so does an AOF rewrite.
    #[test]
    fn replica_replays_master(cfg in config_strategy(), steps in steps_strategy(), chunk in 1usize..6) {
        let t = run_light(&cfg, &steps);
        // A fresh replica fed the whole effect log from INIT on.
        let mut replica = None;
        for e in &t.effects {
            let e = roundtrip_effect(e);
            match (&e, &mut replica) {
                (Effect::Init(c), r) => *r = Some(Sale::new(c.clone())),
                (_, Some(r)) => prop_assert!(e.apply(r).is_ok(), "replay refused {:?}", e),
                (_, None) => prop_assert!(false, "effect before INIT"),
            }
        }
        let replica = replica.expect("INIT first");
        prop_assert!(replica == t.master);
        prop_assert!(t.replica == t.master);
        prop_assert_eq!(encode(&replica), encode(&t.master));
        prop_assert_eq!(derived(&replica), derived(&t.master));
        // datatype::aof_rewrite, with small chunks and with its own 64.
        let rebuilt = aof_rebuild(&t.master, chunk);
        prop_assert!(rebuilt == t.master);
        prop_assert_eq!(encode(&rebuilt), encode(&t.master));
        prop_assert_eq!(derived(&rebuilt), derived(&t.master));
        let rebuilt64 = aof_rebuild(&t.master, 64);
        prop_assert_eq!(derived(&rebuilt64), derived(&t.master));
    }

    /// 3. decode(encode(s)) == s and encode is a fixed point, at every step.
    #[test]
    fn encoding_round_trips(cfg in config_strategy(), steps in steps_strategy()) {
        let t = run_light(&cfg, &steps);
        for s in &t.snapshots {
            let bytes = encode(s);
            let back = decode(&bytes);
            prop_assert!(back.is_ok(), "decode refused a fresh encoding: {:?}", back);
            let back = back.unwrap();
            prop_assert!(&back == s);
            prop_assert_eq!(encode(&back), bytes);
            prop_assert_eq!(derived(&back), derived(s));
        }
    }

    /// 4. Corrupt encodings: never a panic; Err, or a sound sale.
    #[test]
    fn decoder_survives_corruption(
        cfg in config_strategy(),
        steps in steps_strategy(),
        flips in vec((any::<usize>(), any::<u8>()), 1..6),
        inserts in vec((any::<usize>(), any::<u8>()), 1..4),
        cut in any::<usize>(),
    ) {
        let t = run_light(&cfg, &steps);
        let bytes = encode(&t.master);
        let check = |b: &[u8]| -> Result<(), TestCaseError> {
            if let Ok(s) = decode(b) {
                prop_assert!(s.invariant_holds(), "decoded sale breaks the invariant");
                if let Err(m) = check_sale_consistent(&s) {
                    prop_assert!(false, "decoded sale inconsistent: {}", m);
                }
                let again = decode(&encode(&s));
                prop_assert!(again.as_ref().is_ok_and(|a| *a == s), "a decoded sale does not round-trip");
                exercise(&s);
            }
            Ok(())
        };
        // Every truncation.
        for n in 0..bytes.len() {
            prop_assert!(decode(&bytes[..n]).is_err(), "a truncation to {} of {} bytes decoded", n, bytes.len());
        }
        // Single flips, then all flips together.
        let mut all = bytes.clone();
        for &(i, x) in &flips {
            let mut one = bytes.clone();
            let i = i % one.len();
            one[i] ^= x.max(1);
            all[i] ^= x.max(1);
            check(&one)?;
        }
        check(&all)?;
        // Insertions, then a cut of the mutated bytes.
        let mut ins = bytes.clone();
        for &(i, x) in &inserts {
            let mut one = bytes.clone();
            one.insert(i % (one.len() + 1), x);
            check(&one)?;
            let at = i % (ins.len() + 1);
            ins.insert(at, x);
        }
        check(&ins)?;
        check(&all[..cut % (all.len() + 1)])?;
        // Stored bucket remainders that differ from what the records imply
        // (stock moved between buckets, or added, or removed) are refused.
        let rem = t.master.buckets().remaining().to_vec();
        prop_assert_eq!(with_remainders(&t.master, &rem), bytes.clone());
        for (i, &(j, d)) in flips.iter().enumerate() {
            let (a, b) = (i % rem.len(), j % rem.len());
            let d = u64::from(d % 3) + 1;
            let mut moved = rem.clone();
            if a != b && moved[a] >= d {
                moved[a] -= d;
                moved[b] += d;
                prop_assert!(decode(&with_remainders(&t.master, &moved)).is_err(), "stock moved between buckets was accepted");
            }
            let mut more = rem.clone();
            more[a] += d;
            prop_assert!(decode(&with_remainders(&t.master, &more)).is_err(), "a remainder above the records was accepted");
            if rem[a] >= d {
                let mut less = rem.clone();
                less[a] -= d;
                prop_assert!(decode(&with_remainders(&t.master, &less)).is_err(), "a remainder below the records was accepted");
            }
        }
        // Trailing bytes are refused.
        let mut longer = bytes.clone();
        longer.push(0);
        prop_assert!(decode(&longer).is_err());
    }

    /// 5a. Random argument vectors: parse never panics; applying keeps the
    /// contract.
    #[test]
    fn effect_parser_is_robust(
        cfg in config_strategy(),
        steps in steps_strategy(),
        op in op_strategy(),
        tokens in vec(token_strategy(vec![b"req-2".to_vec(), b"ord-0".to_vec()]), 0..14),
    ) {
        let t = run_light(&cfg, &steps);
        let mut args: Vec<&[u8]> = vec![&op];
        args.extend(tokens.iter().map(Vec::as_slice));
        if let Ok(e) = Effect::parse(&args) {
            if let Err(m) = apply_checked(&t.master, &e) {
                prop_assert!(false, "{}", m);
            }
        }
        // With ids the sale really has, too.
        let ids: Vec<Vec<u8>> = recs(&t.master).iter().map(|r| r.id.to_vec()).collect();
        if !ids.is_empty() {
            let mut args2: Vec<Vec<u8>> = vec![op.clone()];
            for (i, tok) in tokens.iter().enumerate() {
                args2.push(if tok.len() == 1 && tok[0].is_ascii_lowercase() { ids[i % ids.len()].clone() } else { tok.clone() });
            }
            let view: Vec<&[u8]> = args2.iter().map(Vec::as_slice).collect();
            if let Ok(e) = Effect::parse(&view) {
                if let Err(m) = apply_checked(&t.master, &e) {
                    prop_assert!(false, "{}", m);
                }
            }
        }
    }

    /// 5b. Mutations of the effects the master really made (so most of them
    /// parse and reach `apply`), applied to the final sale and to the sale
    /// the effect was made for.
    #[test]
    fn mutated_effects_keep_the_contract(
        cfg in config_strategy(),
        steps in steps_strategy(),
        pick in any::<usize>(),
        muts in vec(mutation_strategy(vec![b"req-0".to_vec(), b"0000002a-0".to_vec()]), 0..4),
    ) {
        let t = run_light(&cfg, &steps);
        let e = &t.effects[pick % t.effects.len()];
        let args = mutate_args(e.to_args(), &muts);
        let view: Vec<&[u8]> = args.iter().map(Vec::as_slice).collect();
        if let Ok(parsed) = Effect::parse(&view) {
            // Each valid effect's args parse to an equal effect again.
            let again = roundtrip_effect(&parsed);
            prop_assert_eq!(&again, &parsed);
            for s in [&t.master, &t.snapshots[pick % t.snapshots.len()], &t.snapshots[0]] {
                let after = apply_checked(s, &parsed);
                let after = match after {
                    Ok(a) => a,
                    Err(m) => return Err(TestCaseError::fail(m)),
                };
                // Applying the same effect again: refused, or still sound.
                if let Err(m) = apply_checked(&after, &parsed) {
                    prop_assert!(false, "second apply: {}", m);
                }
            }
        }
    }
}

proptest! {
    #![proptest_config(pt_config())]

    /// 5c. Structured random effects (well-formed arguments, arbitrary
    /// content: wrong states, stolen stock, released records with takes,
    /// unknown buckets, ...) applied through `parse` to sales of a run, one
    /// after another: refused ones change nothing, accepted ones keep the
    /// invariant and match a reload.
    #[test]
    fn random_effects_keep_the_contract(
        cfg in config_strategy(),
        steps in steps_strategy(),
        pick in any::<usize>(),
        specs in vec(effect_spec_strategy(), 1..6),
    ) {
        let t = run_light(&cfg, &steps);
        let mut sale = t.snapshots[pick % t.snapshots.len()].clone();
        for spec in &specs {
            let e = resolve(&sale, spec);
            let owned = e.to_args();
            let view: Vec<&[u8]> = owned.iter().map(Vec::as_slice).collect();
            let Ok(parsed) = Effect::parse(&view) else { continue };
            prop_assert_eq!(&parsed, &e);
            match apply_checked(&sale, &parsed) {
                Ok(after) => sale = after,
                Err(m) => return Err(TestCaseError::fail(m)),
            }
        }
    }
}

// ---------------------------------------------------------------------------
// A few fixed cases the generators reach rarely
// ---------------------------------------------------------------------------

fn plain(total: u64, shards: u32, limit: u64, hold_ms: u64) -> SaleConfig {
    SaleConfig { limit, hold_ms, tag: 0x2a, ..SaleConfig::plain(total, shards) }
}

#[test]
fn generated_ids_skip_client_ids() {
    let cfg = plain(5, 2, 5, 0);
    let steps = vec![
        (0, Cmd::Reserve { user: 0, qty: 1, reqid: Some(4) }), // "0000002a-0" as REQID
        (0, Cmd::Reserve { user: 1, qty: 1, reqid: None }),    // must skip to "-1"
        (0, Cmd::Reserve { user: 2, qty: 1, reqid: Some(5) }), // "0000002a-1": DUPLICATE
    ];
    let t = run(&cfg, &steps);
    let all = recs(&t.master);
    let ids: Vec<&[u8]> = all.iter().map(|r| &*r.id).collect();
    assert_eq!(ids, vec![&b"0000002a-0"[..], b"0000002a-1"]);
}

#[test]
fn apply_follows_the_ledger_past_limit() {
    let cfg = plain(4, 3, 1, 10);
    let steps = vec![
        (0, Cmd::Reserve { user: 0, qty: 1, reqid: Some(0) }),
        (10, Cmd::Sweep), // req-0 expires
        (0, Cmd::Reconcile { orders: vec![(0, 0, 1), (6, 0, 2)], apply: true, expire: false }),
        (0, Cmd::Reserve { user: 0, qty: 1, reqid: None }), // LIMIT, latest is ord-0
    ];
    let t = run(&cfg, &steps);
    assert_eq!(t.master.remaining(), 1);
    assert_eq!(t.master.tally().confirmed, 3);
}

#[test]
fn expire_effect_is_all_or_nothing() {
    let cfg = plain(3, 1, 3, 5);
    let mut s = Sale::new(cfg);
    let rec = s.decide_reserve(b"alice", 1, Some(b"a"), 0).unwrap();
    s.add_record(rec.as_new()).unwrap();
    let before = s.clone();
    let e = Effect::Expire(vec![b"a".to_vec().into(), b"missing".to_vec().into()]);
    assert!(e.apply(&mut s).is_err());
    assert!(s == before && derived(&s) == derived(&before));
}

/// The sale's records as owned values (the sale stores them compactly).
fn recs(s: &Sale) -> Vec<Reservation> {
    s.records().map(|r| r.to_owned()).collect()
}
