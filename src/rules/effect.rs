//! Effects: what a write did, with every id, bucket and timestamp explicit.
//!
//! The master decides with its clock and randomness, applies the effect and
//! replicates it as `SECKILL.EFFECT key <op> ...`; replicas and AOF replay
//! apply the very same effect and never read a clock. AOF rewrite emits the
//! same commands, so one parser (`wire::effect_args`) and one apply path
//! serve all three.

use crate::rules::buckets::Take;
use crate::rules::fence::ReplId;
use crate::rules::reservation::{Reservation, State};
use crate::rules::sale::{EffectError, EntrantRec, Sale, SaleConfig};
use crate::rules::transfers::Counters;

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Effect {
    /// Create (or replace) the sale.
    Init(SaleConfig),
    /// New reservation records, in creation order (RESERVE makes one).
    Records(Vec<Reservation>),
    Release(Box<[u8]>),
    Confirm(Box<[u8]>),
    /// Holds that ran out.
    Expire(Vec<Box<[u8]>>),
    /// A released reservation takes stock again and is confirmed.
    Retake(Box<[u8]>, Vec<Take>),
    /// RECONCILE APPLY's fixes (Confirm, Retake, confirmed Records), in the
    /// order of the ledger rows: one replicated command per call, however
    /// many rows it fixed.
    Batch(Vec<Effect>),
    /// SECKILL.SEND: units leave these buckets for `peer`; `tid` is
    /// recorded, and `to`, the peer's incarnation the counter is for (none
    /// in effects from before incarnations).
    Send {
        peer: Box<[u8]>,
        tid: Box<[u8]>,
        takes: Vec<Take>,
        to: Option<u32>,
    },
    /// SECKILL.RECV: `peer`'s cumulative `sent_total`, and the buckets that
    /// take the credit (`sent_total - received[peer]` units).
    Recv {
        peer: Box<[u8]>,
        sent_total: u64,
        credits: Vec<Take>,
    },
    /// AOF rewrite: the transfer state of a sale without records yet (its
    /// bucket allocations, peers and some of its transfer ids).
    Transfers {
        allocation: Vec<u64>,
        peers: Vec<(Box<[u8]>, Counters)>,
        tids: Vec<Box<[u8]>>,
    },
    /// AOF rewrite: per peer, the incarnation its `sent` counter is for.
    SentTo(Vec<(Box<[u8]>, u32)>),
    /// New entrants of a draw sale (ENTER makes one; an AOF rewrite
    /// restores them with their results).
    Entrants(Vec<EntrantRec>),
    /// One DRAW call: the draw's stock, the entrants it looked at, the
    /// winners' reservations in draw order, and for the first call what it
    /// fixed (the beacon value and the draw seed).
    Drawn {
        stock: u64,
        examined: u32,
        records: Vec<Reservation>,
        begin: Option<crate::rules::sale::DrawBegin>,
    },
    /// Waitlist promotions: new pending reservations of waiting entrants.
    Promoted(Vec<Reservation>),
    /// AOF rewrite: the draw's progress once its entrants are back (with
    /// what the first DRAW fixed).
    DrawProgress {
        stock: Option<u64>,
        examined: u32,
        begin: Option<crate::rules::sale::DrawBegin>,
    },
    /// SECKILL.UNFENCE: the sale records this replication id (the
    /// master's), explicit so that no replica or replay reads its own.
    Unfence(ReplId),
}

/// What a write's effect means for notifications and the stream.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Event {
    Reserved,
    Released,
    Confirmed,
    Expired,
}

impl Event {
    /// The keyspace event name.
    pub fn notification(self) -> &'static std::ffi::CStr {
        match self {
            Event::Reserved => c"seckill.reserve",
            Event::Released => c"seckill.release",
            Event::Confirmed => c"seckill.confirm",
            Event::Expired => c"seckill.expire",
        }
    }

    /// The `event` field of a stream entry.
    pub fn word(self) -> &'static str {
        match self {
            Event::Reserved => "reserved",
            Event::Released => "released",
            Event::Confirmed => "confirmed",
            Event::Expired => "expired",
        }
    }
}

impl Effect {
    /// Applies a non-INIT effect to `sale`. Checks it fully first where a
    /// part could fail, so a refused effect changes nothing.
    pub fn apply(&self, sale: &mut Sale) -> Result<(), EffectError> {
        match self {
            Effect::Init(_) => Err(EffectError("INIT is applied to the key, not to a sale")),
            Effect::Records(recs) => match recs.as_slice() {
                [one] => sale.add_record(one.as_new()),
                many => sale.add_records(many),
            },
            Effect::Release(id) => match sale.release(id, State::Released) {
                crate::rules::sale::ReleaseOutcome::Released => Ok(()),
                _ => Err(EffectError("reservation is not pending")),
            },
            Effect::Confirm(id) => match sale.confirm(id) {
                crate::rules::sale::ConfirmOutcome::Confirmed => Ok(()),
                _ => Err(EffectError("reservation is not pending")),
            },
            Effect::Expire(ids) => {
                if ids.iter().any(|id| sale.get(id).map(|r| r.state()) != Some(State::Pending)) {
                    return Err(EffectError("reservation is not pending"));
                }
                for id in ids {
                    sale.release(id, State::Expired);
                }
                Ok(())
            }
            Effect::Retake(id, takes) => sale.retake(id, takes.clone()),
            Effect::Batch(fixes) => apply_batch(sale, fixes),
            Effect::Send { peer, tid, takes, to } => sale.send(peer, tid, takes, *to),
            Effect::SentTo(sent_to) => sale.restore_sent_to(sent_to.clone()),
            Effect::Recv { peer, sent_total, credits } => sale.recv(peer, *sent_total, credits),
            Effect::Transfers { allocation, peers, tids } => sale.restore_transfers(allocation.clone(), peers.clone(), tids.clone()),
            Effect::Entrants(entrants) => sale.add_entrants(entrants),
            Effect::Drawn { stock, examined, records, begin } => sale.apply_drawn(*stock, *examined, records, begin.as_ref()),
            Effect::Promoted(records) => sale.apply_promoted(records),
            Effect::DrawProgress { stock, examined, begin } => sale.restore_draw(*stock, *examined, begin.as_ref()),
            Effect::Unfence(id) => sale.unfence(*id),
        }
    }

    /// The `via` field of the `reserved` stream entries this effect makes:
    /// `draw` for a draw's winners, `waitlist` for promotions.
    pub fn via(&self) -> Option<&'static str> {
        match self {
            Effect::Drawn { .. } => Some("draw"),
            Effect::Promoted(_) => Some("waitlist"),
            _ => None,
        }
    }

    /// One effect for a call's fixes: the fix itself when there is one.
    pub fn batch(mut fixes: Vec<Effect>) -> Option<Effect> {
        match fixes.len() {
            0 => None,
            1 => fixes.pop(),
            _ => Some(Effect::Batch(fixes)),
        }
    }

    /// Calls `f` with each (event, reservation id) this effect stands for.
    pub fn for_each_event(&self, mut f: impl FnMut(Event, &[u8])) {
        self.each_event(&mut f);
    }

    fn each_event(&self, f: &mut dyn FnMut(Event, &[u8])) {
        match self {
            // Transfers write no stream entry and name no reservation.
            Effect::Init(_)
            | Effect::Send { .. }
            | Effect::Recv { .. }
            | Effect::Transfers { .. }
            | Effect::SentTo(_)
            | Effect::Entrants(_)
            | Effect::DrawProgress { .. }
            | Effect::Unfence(_) => {}
            Effect::Drawn { records, .. } | Effect::Promoted(records) => records.iter().for_each(|r| f(Event::Reserved, &r.id)),
            Effect::Records(recs) => recs.iter().for_each(|r| {
                let ev = match r.state {
                    State::Pending => Event::Reserved,
                    State::Confirmed => Event::Confirmed,
                    State::Released => Event::Released,
                    State::Expired => Event::Expired,
                };
                f(ev, &r.id)
            }),
            Effect::Release(id) => f(Event::Released, id),
            Effect::Confirm(id) | Effect::Retake(id, _) => f(Event::Confirmed, id),
            Effect::Expire(ids) => ids.iter().for_each(|id| f(Event::Expired, id)),
            Effect::Batch(fixes) => fixes.iter().for_each(|fix| fix.each_event(f)),
        }
    }
}

/// Transfer ids per TRANSFERS effect of an AOF rewrite.
const REWRITE_TIDS: usize = 256;

/// Calls `f` with the effects that rebuild `sale` from nothing (AOF
/// rewrite): INIT, the transfer state if any (allocations and peers in
/// each, the transfer ids spread over them), then the records in creation
/// order, `batch` per effect (live ones take their stock again, which gives
/// back the exact bucket remainders). One at a time: a rewrite of a large
/// sale never holds a copy of it.
pub fn rebuild(sale: &Sale, batch: usize, mut f: impl FnMut(&Effect)) {
    f(&Effect::Init(sale.config().clone()));
    if let Some(t) = sale.transfers() {
        let allocation = sale.buckets().allocation().to_vec();
        let peers: Vec<_> = t.peers.iter().map(|(p, c)| (p.clone(), *c)).collect();
        let tids: Vec<_> = t.tids.iter().cloned().collect();
        let mut chunks = tids.chunks(REWRITE_TIDS).peekable();
        loop {
            let tids = chunks.next().map_or_else(Vec::new, <[_]>::to_vec);
            f(&Effect::Transfers { allocation: allocation.clone(), peers: peers.clone(), tids });
            if chunks.peek().is_none() {
                break;
            }
        }
        if !t.sent_to.is_empty() {
            f(&Effect::SentTo(t.sent_to.iter().map(|(p, &to)| (p.clone(), to)).collect()));
        }
    }
    let mut records = Vec::with_capacity(batch);
    for rec in sale.records() {
        records.push(rec.to_owned());
        if records.len() == batch.max(1) {
            f(&Effect::Records(std::mem::take(&mut records)));
        }
    }
    if !records.is_empty() {
        f(&Effect::Records(records));
    }
    if let Some((entrants, stock, examined, begin)) = sale.draw_state() {
        let per = batch.max(1);
        let mut part = Vec::with_capacity(per);
        for e in entrants {
            part.push(e);
            if part.len() == per {
                f(&Effect::Entrants(std::mem::take(&mut part)));
            }
        }
        if !part.is_empty() {
            f(&Effect::Entrants(part));
        }
        if stock.is_some() {
            f(&Effect::DrawProgress { stock, examined, begin });
        }
    }
}

/// Checks a whole batch before changing anything, so a refused batch
/// changes nothing: confirmed ids pending, retaken ids released with takes
/// that add up, no id twice, and every take there at once. The new records
/// go first (`add_records` checks them whole); after them the retakes and
/// confirmations cannot fail. The order differs from the master's row
/// order, but not the result: retakes and confirmations create no records,
/// and buyer chains are kept in sequence order whatever the order of joins.
fn apply_batch(sale: &mut Sale, fixes: &[Effect]) -> Result<(), EffectError> {
    let mut ids = std::collections::HashSet::with_capacity(fixes.len());
    let mut takes = Vec::new();
    let mut records = Vec::new();
    for fix in fixes {
        match fix {
            Effect::Confirm(id) => {
                if sale.get(id).map(|r| r.state()) != Some(State::Pending) {
                    return Err(EffectError("reservation is not pending"));
                }
                ids.insert(id.clone()).then_some(()).ok_or(EffectError("reservation id repeats"))?;
            }
            Effect::Retake(id, t) => {
                let rec = sale.get(id).ok_or(EffectError("no such reservation"))?;
                let sum = t.iter().try_fold(0u64, |s, t| (t.qty > 0).then(|| s.checked_add(t.qty)).flatten());
                if !rec.state().is_released() || sum != Some(rec.qty()) {
                    return Err(EffectError("retake does not fit the reservation"));
                }
                ids.insert(id.clone()).then_some(()).ok_or(EffectError("reservation id repeats"))?;
                takes.extend_from_slice(t);
            }
            Effect::Records(recs) => {
                for rec in recs {
                    takes.extend_from_slice(&rec.takes);
                    records.push(rec.clone());
                }
            }
            _ => return Err(EffectError("a batch holds CONFIRM, RETAKE and RECORDS effects")),
        }
    }
    if !sale.buckets().can_take(&takes) {
        return Err(EffectError("stock is not there to take"));
    }
    if !records.is_empty() {
        sale.add_records(&records)?;
    }
    for fix in fixes {
        match fix {
            Effect::Retake(id, t) => sale.retake(id, t.clone())?,
            Effect::Confirm(id) => {
                sale.confirm(id);
            }
            _ => {}
        }
    }
    Ok(())
}

/// The one record of a RECORDS effect, if it has just one.
pub fn single_record(effect: &Effect) -> Option<&Reservation> {
    match effect {
        Effect::Records(recs) => match recs.as_slice() {
            [one] => Some(one),
            _ => None,
        },
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sale_with(total: u64) -> Sale {
        Sale::new(SaleConfig {
            total,
            shards: 1,
            limit: 10,
            hold_ms: 0,
            start_ms: 0,
            end_ms: u64::MAX,
            stream: None,
            tag: 1,
            split: None,
            draw: None,
            beacon: None,
            fence: None,
            id_key: None,
        })
    }

    fn record(id: &[u8], qty: u64, state: State) -> Reservation {
        Reservation {
            id: id.into(),
            user: b"u".to_vec().into(),
            qty,
            state,
            created_ms: 1,
            deadline_ms: 0,
            takes: if state.is_live() { vec![Take { bucket: 0, qty }] } else { vec![] },
        }
    }

    #[test]
    fn a_batch_applies_whole_or_not_at_all() {
        let mut sale = sale_with(5);
        Effect::Records(vec![record(b"p", 1, State::Pending), record(b"r", 2, State::Released)]).apply(&mut sale).unwrap();
        let before = sale.clone();
        // The adopted record would take the stock the retake needs too.
        let too_much = Effect::Batch(vec![
            Effect::Confirm(b"p".to_vec().into()),
            Effect::Records(vec![record(b"n", 3, State::Confirmed)]),
            Effect::Retake(b"r".to_vec().into(), vec![Take { bucket: 0, qty: 2 }]),
        ]);
        assert!(too_much.apply(&mut sale).is_err());
        assert_eq!(sale, before);
        let repeated = Effect::Batch(vec![Effect::Confirm(b"p".to_vec().into()), Effect::Confirm(b"p".to_vec().into())]);
        assert!(repeated.apply(&mut sale).is_err());
        assert_eq!(sale, before);
        let fits = Effect::Batch(vec![
            Effect::Confirm(b"p".to_vec().into()),
            Effect::Records(vec![record(b"n", 2, State::Confirmed)]),
            Effect::Retake(b"r".to_vec().into(), vec![Take { bucket: 0, qty: 2 }]),
        ]);
        fits.apply(&mut sale).unwrap();
        assert_eq!(sale.remaining(), 0);
        assert_eq!(sale.tally().confirmed, 5);
        assert!(sale.invariant_holds());
    }
}
