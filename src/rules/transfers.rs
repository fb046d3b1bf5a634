//! A sale's part in a split sale: what it sent to and received from each
//! peer key (cumulative counters, so a repeated or late RECV is harmless)
//! and the ids of the SENDs it made (so a retried SEND takes nothing more).
//!
//! A key's incarnation is its tag, drawn anew at every INIT: a SEND names
//! the receiver's (`TO`) and the sender records, per peer, the incarnation
//! its `sent` counter was counted for; a RECV names the incarnation the
//! total was counted for, and a key credits only totals counted for
//! itself. So a peer deleted and re-created under the same round (whose
//! `received` starts again at 0) is never credited what was sent to the
//! key before it (docs/cluster.md, "Rounds").
//!
//! Plain sales never send or receive: they carry no `Transfers` at all
//! (`Sale::transfers` is `None`), so RESERVE pays nothing for this.
//!
//! SEND and RECV decide and apply here, over the parts of a sale they
//! read or change, each named: the log (`Option<Box<Transfers>>`), the
//! buckets, the units left in them, and the config (the split's peers and
//! round, the total the key started with). `Sale` only lends them out.

use std::collections::{BTreeMap, BTreeSet};

use crate::rules::buckets::{Buckets, Take};
use crate::rules::config::{SaleConfig, SplitConfig, MAX_TOTAL};
use crate::rules::outcome::{EffectError, TransferRefusal};
use crate::rules::reservation::valid_id;

/// Cumulative units sent to and received from one peer.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Counters {
    pub sent: u64,
    pub received: u64,
}

/// Ordered maps: the persisted form, the report and the digest list peers
/// and ids in one canonical order on every node.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Transfers {
    pub peers: BTreeMap<Box<[u8]>, Counters>,
    pub tids: BTreeSet<Box<[u8]>>,
    /// The sums over `peers`, kept as they change: every check and report
    /// reads them without a scan.
    pub totals: Counters,
    /// Per peer, the incarnation `sent` was counted for (recorded by the
    /// first SEND that named one; none for counters from before
    /// incarnations, which the next SEND records).
    pub sent_to: BTreeMap<Box<[u8]>, u32>,
}

impl Transfers {
    pub fn counters(&self, peer: &[u8]) -> Counters {
        self.peers.get(peer).copied().unwrap_or_default()
    }

    /// Sums over peers, `None` past 64 bits (a corrupt payload or effect):
    /// computed once when the counters are restored.
    pub fn sum(&self) -> Option<Counters> {
        self.peers.values().try_fold(Counters::default(), |acc, c| {
            Some(Counters { sent: acc.sent.checked_add(c.sent)?, received: acc.received.checked_add(c.received)? })
        })
    }

    pub fn heap_estimate(&self) -> usize {
        let peers: usize =
            self.peers.keys().map(|k| k.len() + 64).sum::<usize>() + self.sent_to.keys().map(|k| k.len() + 48).sum::<usize>();
        let tids: usize = self.tids.iter().map(|t| t.len() + 40).sum();
        std::mem::size_of::<Transfers>() + peers + tids
    }
}

/// What a SEND decides, before anything changes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SendDecision {
    /// Take these units (from these buckets) and send them.
    Take(Vec<Take>),
    /// The tid was seen before: nothing more is taken.
    Repeated,
    /// Less than MIN is there to take: nothing is taken.
    BelowMin,
}

/// Units sent and received, summed over peers (zero for a plain sale).
pub fn totals(log: Option<&Transfers>) -> Counters {
    log.map_or(Counters::default(), |t| t.totals)
}

/// Units sent to and received from `peer`.
pub fn counters(log: Option<&Transfers>, peer: &[u8]) -> Counters {
    log.map_or_else(Counters::default, |t| t.counters(peer))
}

/// `total + received - sent`: the units a key that started with `total`
/// holds in any form. `None` when the counters do not add up (never in a
/// sale built through its checked methods).
pub fn capacity(total: u64, log: Option<&Transfers>) -> Option<u128> {
    let t = totals(log);
    (u128::from(total) + u128::from(t.received)).checked_sub(u128::from(t.sent))
}

/// Whether a SEND or RECV between this key and `peer` in `round` may go
/// ahead: only a part of a split sale, in its own round, with a peer it
/// declared.
pub fn check_transfer(split: Option<&SplitConfig>, peer: &[u8], round: &[u8]) -> Result<(), TransferRefusal> {
    let split = split.ok_or(TransferRefusal::NotSplit)?;
    if *split.round != *round {
        return Err(TransferRefusal::StaleRound);
    }
    if !split.declares(peer) {
        return Err(TransferRefusal::UnknownPeer);
    }
    Ok(())
}

/// Whether a SEND to `peer`'s incarnation `to` may go ahead: refused when
/// this key counted its sends to `peer` for another incarnation (the peer
/// was deleted and re-created, or the caller's incarnation is stale).
pub fn check_send_to(log: Option<&Transfers>, peer: &[u8], to: u32) -> Result<(), TransferRefusal> {
    match log.and_then(|t| t.sent_to.get(peer)) {
        Some(&had) if had != to => Err(TransferRefusal::PeerRecreated),
        _ => Ok(()),
    }
}

/// Effects move stock only between declared peers (a replayed effect was
/// checked on the master; this keeps a crafted one out).
fn check_peer(split: Option<&SplitConfig>, peer: &[u8]) -> Result<(), EffectError> {
    match split {
        Some(split) if split.declares(peer) => Ok(()),
        _ => Err(EffectError("the peer is not a declared peer of a split sale")),
    }
}

/// Decides a SEND of up to `qty` units (tid `tid`) without changing
/// anything: `min(qty, remaining)` from the remaining stock only (pending
/// and confirmed units stay), unless the tid was seen or that is below
/// `min`.
pub fn decide_send(log: Option<&Transfers>, buckets: &Buckets, remaining: u64, qty: u64, min: u64, tid: &[u8]) -> SendDecision {
    if log.is_some_and(|t| t.tids.contains(tid)) {
        return SendDecision::Repeated;
    }
    let take = qty.min(remaining);
    if take < min.max(1) {
        return SendDecision::BelowMin;
    }
    match buckets.plan_send(take) {
        Some(takes) => SendDecision::Take(takes),
        None => SendDecision::BelowMin,
    }
}

/// Plans a RECV of `peer`'s cumulative `sent_total` into a key that
/// started with `total`: the buckets that take the credit, `Ok(None)` when
/// there is nothing to credit, an error when the credit would take the key
/// past `MAX_TOTAL` units.
pub fn plan_recv(
    log: Option<&Transfers>,
    total: u64,
    buckets: &Buckets,
    peer: &[u8],
    sent_total: u64,
) -> Result<Option<Vec<Take>>, EffectError> {
    let credit = sent_total.saturating_sub(counters(log, peer).received);
    if credit == 0 {
        return Ok(None);
    }
    check_credit(log, total, credit)?;
    Ok(Some(buckets.plan_credit(credit)))
}

/// A key never holds more than `MAX_TOTAL` units, and its counters stay
/// within 64 bits.
fn check_credit(log: Option<&Transfers>, total: u64, credit: u64) -> Result<(), EffectError> {
    let held = capacity(total, log).ok_or(EffectError("transfer counters do not add up"))?;
    if held + u128::from(credit) > u128::from(MAX_TOTAL) {
        return Err(EffectError("the credit would take the sale past 10^15 units"));
    }
    totals(log).received.checked_add(credit).ok_or(EffectError("received counter overflows"))?;
    Ok(())
}

/// The parts of a sale that SEND, RECV and a restore change, borrowed one
/// by one: nothing else of the sale is in reach.
pub struct Parts<'a> {
    pub config: &'a SaleConfig,
    /// `None` until the first transfer.
    pub log: &'a mut Option<Box<Transfers>>,
    pub buckets: &'a mut Buckets,
    /// The units left in `buckets` (kept equal to their sum).
    pub remaining: &'a mut u64,
}

impl Parts<'_> {
    /// Sends the units `takes` names to `peer` (its incarnation `to`, when
    /// the effect names one) and records `tid`; refused, changing nothing,
    /// when it does not fit.
    pub fn send(self, peer: &[u8], tid: &[u8], takes: &[Take], to: Option<u32>) -> Result<(), EffectError> {
        if !valid_id(peer) || !valid_id(tid) {
            return Err(EffectError("bad peer or transfer id"));
        }
        check_peer(self.config.split.as_ref(), peer)?;
        if let Some(to) = to {
            check_send_to(self.log.as_deref(), peer, to).map_err(|_| EffectError("the peer's counter is for another incarnation"))?;
        }
        if self.log.as_ref().is_some_and(|t| t.tids.contains(tid)) {
            return Err(EffectError("transfer id seen before"));
        }
        let qty = takes.iter().try_fold(0u64, |s, t| s.checked_add(t.qty)).ok_or(EffectError("take overflows"))?;
        if qty == 0 || !self.buckets.valid_transfer(takes, qty) || !self.buckets.can_take(takes) {
            return Err(EffectError("stock is not there to send"));
        }
        let log = self.log.as_deref();
        let sent = counters(log, peer).sent.checked_add(qty).ok_or(EffectError("sent counter overflows"))?;
        totals(log).sent.checked_add(qty).ok_or(EffectError("sent counter overflows"))?;
        self.buckets.send(takes);
        *self.remaining -= qty;
        let t = self.log.get_or_insert_with(Box::default);
        t.peers.entry(peer.into()).or_default().sent = sent;
        t.totals.sent += qty;
        t.tids.insert(tid.into());
        if let Some(to) = to {
            t.sent_to.insert(peer.into(), to);
        }
        Ok(())
    }

    /// Restores the incarnations the counters were sent for (RDB, AOF
    /// rewrite): declared peers with counters, each once; a sale restored
    /// before must agree on those it has.
    pub fn restore_sent_to(self, sent_to: Vec<(Box<[u8]>, u32)>) -> Result<(), EffectError> {
        let t = self.log.as_deref_mut().ok_or(EffectError("incarnations without transfers"))?;
        let mut map = t.sent_to.clone();
        for (peer, to) in sent_to {
            if !t.peers.contains_key(&peer) {
                return Err(EffectError("an incarnation for a peer without counters"));
            }
            if map.insert(peer, to).is_some_and(|had| had != to) {
                return Err(EffectError("incarnations differ from the restored state"));
            }
        }
        t.sent_to = map;
        Ok(())
    }

    /// Credits what `peer` sent beyond what was received from it, to the
    /// buckets `credits` names; refused, changing nothing, when it does not
    /// fit.
    pub fn recv(self, peer: &[u8], sent_total: u64, credits: &[Take]) -> Result<(), EffectError> {
        if !valid_id(peer) {
            return Err(EffectError("bad peer"));
        }
        check_peer(self.config.split.as_ref(), peer)?;
        let log = self.log.as_deref();
        let credit = sent_total.checked_sub(counters(log, peer).received).filter(|&c| c > 0);
        let credit = credit.ok_or(EffectError("nothing to credit"))?;
        if !self.buckets.valid_transfer(credits, credit) {
            return Err(EffectError("credits do not add up to what was sent"));
        }
        check_credit(log, self.config.total, credit)?;
        self.buckets.credit(credits);
        *self.remaining += credit;
        let t = self.log.get_or_insert_with(Box::default);
        t.peers.entry(peer.into()).or_default().received = sent_total;
        t.totals.received += credit;
        Ok(())
    }

    /// Restores the transfer state of a sale without records (the caller
    /// checks that, and that `allocation` has a bucket per shard): bucket
    /// allocations (buckets full), peers, and `tids`; a sale restored
    /// before must get the same allocations and peers, and `tids` are
    /// added to its own (an AOF rewrite spreads them). The allocations must
    /// add up to `total + received - sent`, at most `MAX_TOTAL`.
    pub fn restore(self, allocation: Vec<u64>, peers: Vec<(Box<[u8]>, Counters)>, tids: Vec<Box<[u8]>>) -> Result<(), EffectError> {
        let mut t = Transfers::default();
        for (peer, c) in peers {
            if !valid_id(&peer) || t.peers.insert(peer, c).is_some() {
                return Err(EffectError("bad or repeated peer"));
            }
        }
        // A split sale's counters name only its declared peers; a sale from
        // before peers were declared keeps its counters but moves no more.
        if let Some(split) = &self.config.split {
            if !t.peers.keys().all(|p| split.declares(p)) {
                return Err(EffectError("transfers name a peer the sale did not declare"));
            }
        }
        // A later restore of the same sale only adds transfer ids.
        if let Some(had) = self.log.as_deref() {
            if had.peers != t.peers || self.buckets.allocation() != allocation.as_slice() {
                return Err(EffectError("transfers restore differs from the restored state"));
            }
            t.tids = had.tids.clone();
            t.sent_to = had.sent_to.clone();
        }
        if !tids.iter().all(|tid| valid_id(tid)) {
            return Err(EffectError("bad transfer id"));
        }
        t.tids.extend(tids);
        let totals = t.sum().ok_or(EffectError("transfer counters overflow"))?;
        t.totals = totals;
        let held = (u128::from(self.config.total) + u128::from(totals.received)).checked_sub(u128::from(totals.sent));
        let sum: u128 = allocation.iter().map(|&a| u128::from(a)).sum();
        if held != Some(sum) || sum > u128::from(MAX_TOTAL) {
            return Err(EffectError("allocations do not add up to total + received - sent"));
        }
        *self.remaining = sum as u64;
        *self.buckets = Buckets::with_allocation(allocation);
        *self.log = Some(Box::new(t));
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rules::effect::Effect;
    use crate::rules::reservation::State;
    use crate::rules::sale::{Sale, SaleConfig, TransferRefusal, MAX_TOTAL};
    use crate::wire::encoding::{decode, encode};

    fn plain(total: u64, shards: u32) -> SaleConfig {
        SaleConfig { limit: 5, tag: 9, ..SaleConfig::plain(total, shards) }
    }

    /// A part of a split sale in round `r1` whose peers are `p` and `q`.
    fn sale(total: u64, shards: u32) -> Sale {
        let split = crate::rules::config::SplitConfig::new(Some(b"k"), b"r1", &[b"q", b"p"]).unwrap();
        Sale::new(SaleConfig { split: Some(split), ..plain(total, shards) })
    }

    fn send(s: &mut Sale, peer: &[u8], qty: u64, min: u64, tid: &[u8]) -> u64 {
        match s.decide_send(qty, min, tid) {
            SendDecision::Take(takes) => {
                let n = takes.iter().map(|t| t.qty).sum();
                Effect::Send { peer: peer.into(), tid: tid.into(), takes, to: None }.apply(s).unwrap();
                n
            }
            _ => 0,
        }
    }

    fn recv(s: &mut Sale, peer: &[u8], total: u64) -> u64 {
        match s.plan_recv(peer, total).unwrap() {
            Some(credits) => {
                let n = credits.iter().map(|t| t.qty).sum();
                Effect::Recv { peer: peer.into(), sent_total: total, credits }.apply(s).unwrap();
                n
            }
            None => 0,
        }
    }

    #[test]
    fn send_takes_remaining_only_and_is_idempotent() {
        let mut s = sale(10, 3);
        let rec = s.decide_reserve(b"u", 4, None, 1).unwrap();
        s.add_record(rec.as_new()).unwrap();
        assert_eq!(send(&mut s, b"p", 100, 1, b"t1"), 6);
        assert_eq!((s.remaining(), s.transfer_counters(b"p").sent), (0, 6));
        assert!(s.invariant_holds());
        assert_eq!(s.decide_send(1, 1, b"t1"), SendDecision::Repeated);
        assert_eq!(s.decide_send(1, 1, b"t2"), SendDecision::BelowMin);
        // The reservation's units go back where they came from.
        s.release(&rec.id, State::Released);
        assert_eq!(s.remaining(), 4);
        assert!(s.invariant_holds());
        assert_eq!(s.decide_send(5, 5, b"t2"), SendDecision::BelowMin);
        assert_eq!(send(&mut s, b"p", 5, 4, b"t2"), 4);
        assert_eq!(s.transfer_counters(b"p").sent, 10);
    }

    #[test]
    fn release_after_send_gives_back_what_it_took() {
        let mut s = sale(6, 2);
        let ids: Vec<_> = [&b"a"[..], b"b", b"c"]
            .iter()
            .map(|u| {
                let rec = s.decide_reserve(u, 1, None, 1).unwrap();
                s.add_record(rec.as_new()).unwrap();
                rec.id
            })
            .collect();
        assert_eq!(send(&mut s, b"p", 3, 1, b"t"), 3);
        assert_eq!(s.buckets().allocation().iter().sum::<u64>(), 3);
        for id in &ids {
            s.release(id, State::Released);
            assert!(s.invariant_holds());
        }
        assert_eq!(s.remaining(), 3);
        assert_eq!(s.buckets().remaining(), s.buckets().allocation());
    }

    #[test]
    fn recv_credits_by_cumulative_total() {
        let mut s = sale(0, 2);
        assert_eq!(recv(&mut s, b"p", 0), 0);
        assert!(s.transfers().is_none(), "nothing received, nothing recorded");
        assert_eq!(recv(&mut s, b"p", 5), 5);
        assert_eq!(recv(&mut s, b"p", 5), 0);
        assert_eq!(recv(&mut s, b"p", 3), 0);
        assert_eq!(recv(&mut s, b"p", 8), 3);
        assert_eq!((s.remaining(), s.transfer_counters(b"p").received), (8, 8));
        assert_eq!(s.buckets().remaining(), &[4, 4]);
        assert!(s.invariant_holds());
        assert!(s.plan_recv(b"q", MAX_TOTAL - 8).is_ok());
        assert!(s.plan_recv(b"q", MAX_TOTAL - 7).is_err());
        assert!(s.plan_recv(b"q", MAX_TOTAL).is_err());
        assert!(s.plan_recv(b"q", u64::MAX).is_err());
    }

    #[test]
    fn refused_transfer_effects_change_nothing() {
        let mut s = sale(4, 2);
        send(&mut s, b"p", 1, 1, b"t");
        let before = s.clone();
        let bad = [
            Effect::Send { peer: b"p".to_vec().into(), tid: b"t".to_vec().into(), takes: vec![Take { bucket: 0, qty: 1 }], to: None },
            Effect::Send { peer: b"p".to_vec().into(), tid: b"u".to_vec().into(), takes: vec![Take { bucket: 0, qty: 9 }], to: None },
            Effect::Send { peer: b"p".to_vec().into(), tid: b"u".to_vec().into(), takes: vec![Take { bucket: 5, qty: 1 }], to: None },
            Effect::Recv { peer: b"p".to_vec().into(), sent_total: 2, credits: vec![Take { bucket: 0, qty: 1 }] },
            Effect::Recv { peer: b"q".to_vec().into(), sent_total: MAX_TOTAL, credits: vec![Take { bucket: 0, qty: MAX_TOTAL }] },
            Effect::Transfers { allocation: vec![2, 2], peers: vec![], tids: vec![] },
        ];
        for e in bad {
            assert!(e.apply(&mut s).is_err(), "{e:?} was accepted");
            assert!(s == before, "{e:?} changed the sale");
        }
    }

    /// The sale the effects `rebuild` gives for `s` (as an AOF rewrite
    /// writes them) equals `s`.
    fn assert_rebuilds(s: &Sale) {
        let mut rebuilt: Option<Sale> = None;
        crate::rules::effect::rebuild(s, 1, |e| match (e, &mut rebuilt) {
            (Effect::Init(c), None) => rebuilt = Some(Sale::new(c.clone())),
            (e, Some(r)) => e.apply(r).unwrap(),
            _ => unreachable!(),
        });
        assert!(rebuilt.unwrap() == *s);
    }

    #[test]
    fn state_round_trips_through_encoding_and_rebuild() {
        let mut s = sale(10, 3);
        send(&mut s, b"p", 4, 1, b"t1");
        recv(&mut s, b"q", 7);
        let rec = s.decide_reserve(b"u", 5, Some(b"r"), 1).unwrap();
        s.add_record(rec.as_new()).unwrap();
        let back = decode(&encode(&s)).unwrap();
        assert!(back == s);
        assert_rebuilds(&s);
    }

    #[test]
    fn only_declared_peers_of_the_same_round_move_stock() {
        let s = sale(10, 1);
        assert_eq!(s.check_transfer(b"p", b"r1"), Ok(()));
        assert_eq!(s.check_transfer(b"p", b"r0"), Err(TransferRefusal::StaleRound));
        assert_eq!(s.check_transfer(b"x", b"r1"), Err(TransferRefusal::UnknownPeer));
        let mut p = Sale::new(plain(10, 1));
        assert_eq!(p.check_transfer(b"p", b"r1"), Err(TransferRefusal::NotSplit));
        // Effects too: a replayed or crafted SEND/RECV cannot reach a plain
        // sale or an undeclared peer.
        let before = p.clone();
        assert!(Effect::Recv { peer: b"p".to_vec().into(), sent_total: 5, credits: vec![Take { bucket: 0, qty: 5 }] }
            .apply(&mut p)
            .is_err());
        assert!(Effect::Send { peer: b"p".to_vec().into(), tid: b"t".to_vec().into(), takes: vec![Take { bucket: 0, qty: 1 }], to: None }
            .apply(&mut p)
            .is_err());
        assert!(p == before);
        let mut s = sale(10, 1);
        assert!(Effect::Recv { peer: b"x".to_vec().into(), sent_total: 5, credits: vec![Take { bucket: 0, qty: 5 }] }
            .apply(&mut s)
            .is_err());
        assert_eq!(s.remaining(), 10);
    }

    #[test]
    fn totals_run_with_the_counters() {
        let mut s = sale(10, 2);
        send(&mut s, b"p", 3, 1, b"t1");
        send(&mut s, b"q", 2, 1, b"t2");
        recv(&mut s, b"p", 4);
        recv(&mut s, b"p", 6);
        let t = s.transfers().unwrap();
        assert_eq!(t.totals, t.sum().unwrap());
        assert_eq!(t.totals, Counters { sent: 5, received: 6 });
        assert!(s.invariant_holds());
        let back = decode(&encode(&s)).unwrap();
        assert_eq!(back.transfers().unwrap().totals, t.totals);
    }

    /// A SEND that names the peer's incarnation records it; a later one
    /// naming another is refused (the peer was re-created), and so is its
    /// effect, changing nothing; a RECV is checked against the key's own
    /// incarnation (its tag). The record survives RDB and AOF rewrite.
    #[test]
    fn incarnations_are_recorded_and_checked() {
        let mut s = sale(10, 2);
        let takes = match s.decide_send(3, 1, b"t1") {
            SendDecision::Take(t) => t,
            d => panic!("{d:?}"),
        };
        Effect::Send { peer: b"p".as_slice().into(), tid: b"t1".as_slice().into(), takes, to: Some(0xb0) }.apply(&mut s).unwrap();
        assert_eq!(s.transfers().unwrap().sent_to.get(&b"p"[..]), Some(&0xb0));
        assert_eq!(s.check_send_to(b"p", 0xb0), Ok(()));
        assert_eq!(s.check_send_to(b"p", 0xb1), Err(TransferRefusal::PeerRecreated));
        assert_eq!(s.check_send_to(b"q", 0xb1), Ok(()), "nothing recorded for q yet");
        let before = s.clone();
        let takes = vec![Take { bucket: 0, qty: 1 }];
        assert!(Effect::Send { peer: b"p".as_slice().into(), tid: b"t2".as_slice().into(), takes, to: Some(0xb1) }.apply(&mut s).is_err());
        assert!(s == before);
        assert_eq!(s.check_recv_to(9), Ok(()), "the tag of plain(): 9");
        assert_eq!(s.check_recv_to(8), Err(TransferRefusal::OtherIncarnation));
        let back = decode(&encode(&s)).unwrap();
        assert_eq!(back.transfers().unwrap().sent_to, s.transfers().unwrap().sent_to);
        assert_rebuilds(&s);
        // Incarnations only for peers with counters, each once.
        let mut t = sale(10, 2);
        assert!(t.restore_sent_to(vec![(b"p".as_slice().into(), 1)]).is_err(), "no transfers yet");
    }

    /// Restored counters may name only declared peers.    /// Restored counters may name only declared peers.
    #[test]
    fn restore_refuses_undeclared_peers() {
        let mut s = sale(10, 1);
        let peers = vec![(Box::from(&b"x"[..]), Counters { sent: 1, received: 0 })];
        assert!(s.restore_transfers(vec![9], peers, vec![]).is_err());
        let peers = vec![(Box::from(&b"p"[..]), Counters { sent: 1, received: 0 })];
        assert!(s.restore_transfers(vec![9], peers, vec![]).is_ok());
    }

    /// A draw part that has begun drawing moves no stock: SEND and a RECV
    /// that would credit are refused (changing nothing), while a repeated
    /// tid and a RECV that credits nothing are still answered; the effects
    /// are refused too.
    #[test]
    fn a_draw_part_that_has_begun_drawing_moves_no_stock() {
        let split = crate::rules::config::SplitConfig::new(Some(b"k"), b"r1", &[b"q", b"p"]).unwrap();
        let config = SaleConfig { split: Some(split), draw: Some([7; 32]), end_ms: 100, ..plain(10, 1) };
        let mut s = Sale::new(config);
        assert_eq!(send(&mut s, b"p", 2, 1, b"t1"), 2);
        assert_eq!(recv(&mut s, b"q", 3), 3);
        s.add_entrants(&[crate::rules::sale::EntrantRec {
            user: b"u".as_slice().into(),
            qty: 1,
            reqid: None,
            result: crate::rules::sale::EntrantResult::Entered,
        }])
        .unwrap();
        assert!(s.check_send_move(b"t2").is_ok() && s.check_recv_move(b"q", 4).is_ok(), "before the draw");
        s.draw_step(10, 200, None).expect("the draw begins");
        let before = encode(&s);
        assert_eq!(s.check_send_move(b"t2"), Err(TransferRefusal::Drawing));
        assert_eq!(s.check_recv_move(b"q", 4), Err(TransferRefusal::Drawing));
        assert_eq!(s.check_send_move(b"t1"), Ok(()), "a repeated tid takes nothing");
        assert_eq!(s.check_recv_move(b"q", 3), Ok(()), "nothing to credit");
        let takes = vec![crate::rules::buckets::Take { bucket: 0, qty: 1 }];
        assert!(Effect::Send { peer: b"p".as_slice().into(), tid: b"t2".as_slice().into(), takes: takes.clone(), to: None }
            .apply(&mut s)
            .is_err());
        assert!(Effect::Recv { peer: b"q".as_slice().into(), sent_total: 4, credits: takes }.apply(&mut s).is_err());
        assert_eq!(encode(&s), before, "nothing changed");
    }
}
