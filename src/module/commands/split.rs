//! A split sale's transfers: SEND and RECV (docs/commands.md, "Moving
//! stock between keys").

use super::call::*;
use crate::module::commit::{Committer, DueHolds, Origin};
use crate::module::datatype::SALE_TYPE;
use crate::module::node::now_ms;
use crate::module::reply::Reply;
use crate::module::stats;
use crate::rules::effect::Effect;
use crate::rules::sale::Sale;
use crate::rules::sale::TransferRefusal;
use crate::rules::transfers::SendDecision;
use crate::wire::args;
use redis_module::{Context, RedisError, RedisResult};

/// Only a part of a split sale moves stock, only with a peer it declared
/// and only in its own round: checked before anything changes.
pub(super) fn check_transfer(sale: &Sale, peer: &[u8], round: &[u8]) -> Result<(), RedisError> {
    sale.check_transfer(peer, round).map_err(transfer_refused)
}

pub(super) fn transfer_refused(refusal: TransferRefusal) -> RedisError {
    stats::TRANSFERS_REFUSED.add(1);
    RedisError::Str(match refusal {
        TransferRefusal::NotSplit => "ERR the sale is not a part of a split sale (INIT ... SPLIT)",
        TransferRefusal::StaleRound => {
            "STALEROUND the key is in another round of its split sale (an INIT ... REPLACE started it): reload the layout"
        }
        TransferRefusal::UnknownPeer => "ERR the peer is not one of this part's declared peers",
        TransferRefusal::Drawing => "ERR the draw part has begun drawing: its stock moves no more",
        TransferRefusal::PeerRecreated => {
            "STALEPEER this key sent to another incarnation of the peer (it was deleted and re-created): nothing moves; INIT ... REPLACE the sale's keys in a new round"
        }
        TransferRefusal::OtherIncarnation => {
            "STALEPEER the total was sent to another incarnation of this key (it was deleted and re-created): nothing is credited"
        }
    })
}

/// SECKILL.SEND key peer qty [MIN m] TID tid ROUND round [TO inc] -> [taken,
/// sent_total, remaining] (nil when the key does not exist). Works outside
/// the sale's window: it moves stock between the keys of one sale, it
/// sells nothing.
pub(super) fn send(ctx: &Context, call: &Call) -> RedisResult {
    let (name, argv) = (call.key, call.argv);
    let a = args::parse_send(argv[1], &argv[2..])?;
    let key = ctx.open_key_writable(name);
    let Some(sale) = key.get_value::<Sale>(&SALE_TYPE).map_err(wrong_type)? else {
        return Reply::Null.done(ctx);
    };
    check_transfer(sale, a.peer, a.round)?;
    if let Some(to) = a.to {
        sale.check_send_to(a.peer, to).map_err(transfer_refused)?;
    }
    sale.check_send_move(a.tid).map_err(transfer_refused)?;
    check_fence(sale)?;
    let now = now_ms();
    let stream = due_stream(ctx, name, sale, now)?;
    let c = Committer { ctx, key: name, origin: Origin::Master, stream: stream.as_ref() };
    // Holds that ran out are stock again: a SEND may take it.
    let taken = c.write(sale, Some(DueHolds::lazy(now)), |w, sale| -> Result<_, RedisError> {
        // A refused SEND does not record its tid: nothing was taken, so a
        // retry with the same tid once stock is back (or with a lower MIN)
        // may still take it; only a SEND that took units makes its tid final.
        Ok(match sale.decide_send(a.qty, a.min, a.tid) {
            SendDecision::Take(takes) => {
                let taken = takes.iter().map(|t| t.qty).sum();
                let effect = Effect::Send { peer: a.peer.into(), tid: a.tid.into(), takes, to: a.to };
                w.commit(sale, &effect).map_err(internal)?;
                stats::SENDS.add(1);
                stats::UNITS_SENT.add(taken);
                taken
            }
            SendDecision::Repeated => {
                stats::SEND_REPEATED.add(1);
                0
            }
            SendDecision::BelowMin => {
                stats::SEND_BELOW_MIN.add(1);
                0
            }
        })
    })?;
    three(ctx, taken, sale.transfer_counters(a.peer).sent, sale.remaining())
}

/// SECKILL.RECV key peer sent_total ROUND round [TO inc] -> [credited,
/// received_total, remaining] (nil when the key does not exist). Works
/// outside the sale's window.
pub(super) fn recv(ctx: &Context, call: &Call) -> RedisResult {
    let (name, argv) = (call.key, call.argv);
    let args::RecvArgs { peer, sent_total, round, to } = args::parse_recv(argv[1], &argv[2..])?;
    let key = ctx.open_key_writable(name);
    let Some(sale) = key.get_value::<Sale>(&SALE_TYPE).map_err(wrong_type)? else {
        return Reply::Null.done(ctx);
    };
    check_transfer(sale, peer, round)?;
    if let Some(to) = to {
        sale.check_recv_to(to).map_err(transfer_refused)?;
    }
    sale.check_recv_move(peer, sent_total).map_err(transfer_refused)?;
    // A total the sale cannot hold is refused before anything changes
    // (expiry below moves units within the sale, never past this check).
    sale.plan_recv(peer, sent_total).map_err(|e| RedisError::String(format!("ERR sent_total cannot be credited: {}", e.0)))?;
    let now = now_ms();
    let stream = due_stream(ctx, name, sale, now)?;
    let c = Committer { ctx, key: name, origin: Origin::Master, stream: stream.as_ref() };
    let credited = c.write(sale, Some(DueHolds::lazy(now)), |w, sale| -> Result<_, RedisError> {
        Ok(match sale.plan_recv(peer, sent_total).map_err(internal)? {
            None => {
                stats::RECV_NOTHING.add(1);
                0
            }
            Some(credits) => {
                let credit = credits.iter().map(|t| t.qty).sum();
                w.commit(sale, &Effect::Recv { peer: peer.into(), sent_total, credits }).map_err(internal)?;
                stats::RECVS.add(1);
                stats::UNITS_RECEIVED.add(credit);
                credit
            }
        })
    })?;
    three(ctx, credited, sale.transfer_counters(peer).received, sale.remaining())
}
