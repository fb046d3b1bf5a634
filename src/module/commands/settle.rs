//! Selling: RESERVE, and the two ways a reservation settles, RELEASE and
//! CONFIRM.

use redis_module::{Context, RedisError, RedisResult};
use std::ffi::CStr;

use super::call::*;
use crate::module::commit::{Committer, DueHolds, Origin, Writer};
use crate::module::datatype::SALE_TYPE;
use crate::module::node::{self, now_ms};
use crate::module::reply::Reply;
use crate::module::stats;
use crate::rules::effect::Effect;
use crate::rules::reservation::State;
use crate::rules::sale::{ConfirmOutcome, Refusal, ReleaseOutcome, Sale};
use crate::wire::args;

/// SECKILL.RESERVE key user [QTY n] [REQID id]
pub(super) fn reserve(ctx: &Context, call: &Call) -> RedisResult {
    let name = call.key;
    let (a, key) = user_call(ctx, call)?;
    let Some(sale) = key.get_value::<Sale>(&SALE_TYPE).map_err(wrong_type)? else {
        stats::NO_SALE.add(1);
        return Reply::status_id_count(ctx, c"NO_SALE", None, 0);
    };
    if sale.is_draw() {
        stats::RESERVE_DRAW.add(1);
        return Reply::status_id_count(ctx, c"DRAW", None, sale.remaining());
    }
    check_qty(sale, a.qty)?;
    // Before any write (lazy expiry included): a refused call writes
    // nothing. A plain sale pays one `Option` check here.
    if sale.fenced(node::replid) {
        return fenced_reserve(ctx, sale);
    }
    let stream = sale_stream(ctx, name, sale)?;
    // A sold-out sale without window or holds answers without the clock.
    let now = if sale.clock_matters(a.qty) { now_ms() } else { 0 };
    let c = Committer { ctx, key: name, origin: Origin::Master, stream: stream.as_ref() };
    // Holds that ran out may come back as stock first (`seckill.restock`).
    // The reply is sent from inside the write, where the decision is: moving
    // the decision out would copy the accepted id's inline buffer on every
    // call, sold-out ones included (a memcpy `bench/callgrind.sh` counts).
    c.write(sale, Some(DueHolds::lazy(now)), |w, sale| {
        let outcome = sale.accept_reserve(a.user, a.qty, a.reqid, now);
        if let Ok(accepted) = &outcome {
            w.commit_reserve(sale, accepted, call.arg(a.user)).map_err(internal)?;
        }
        let (status, id) = match &outcome {
            Ok(accepted) => (stats_of(&stats::RESERVED, c"RESERVED"), Some(accepted.id())),
            Err(Refusal::Duplicate(id)) => (stats_of(&stats::DUPLICATE, c"DUPLICATE"), Some(&id[..])),
            Err(Refusal::NotStarted) => (stats_of(&stats::NOT_STARTED, c"NOT_STARTED"), None),
            Err(Refusal::Ended) => (stats_of(&stats::ENDED, c"ENDED"), None),
            Err(Refusal::Limit(latest)) => (stats_of(&stats::LIMIT, c"LIMIT"), latest.as_deref()),
            Err(Refusal::SoldOut) => (stats_of(&stats::SOLD_OUT, c"SOLD_OUT"), None),
        };
        Reply::status_id_count(ctx, status, id, sale.remaining())
    })
}

/// RESERVE's reply on a fenced sale: out of RESERVE's hot path.
#[cold]
#[inline(never)]
fn fenced_reserve(ctx: &Context, sale: &Sale) -> RedisResult {
    stats::FENCED.add(1);
    Reply::status_id_count(ctx, c"FENCED", None, sale.remaining())
}

/// RELEASE's or CONFIRM's change to the reservation `rid`, made through
/// the write's `Writer`; returns the status word of its outcome.
type Settle = fn(Writer, &mut Sale, &[u8]) -> &'static CStr;

/// RELEASE and CONFIRM: opens the sale, releases holds that ran out, then
/// lets `finish` settle the reservation.
fn settle(ctx: &Context, call: &Call, finish: Settle) -> RedisResult {
    let (name, argv) = (call.key, call.argv);
    let rid = args::parse_rid(&argv[2..])?;
    let key = ctx.open_key_writable(name);
    let Some(sale) = key.get_value::<Sale>(&SALE_TYPE).map_err(wrong_type)? else {
        stats::NOT_FOUND.add(1);
        return Reply::status_count(ctx, c"NOT_FOUND", 0);
    };
    // The call appends to the stream if the reservation is pending or holds
    // ran out (their release is appended too).
    let now = now_ms();
    let appends = sale.get(rid).is_some_and(|r| r.state() == State::Pending) || sale.next_deadline().is_some_and(|d| d <= now);
    let stream = if appends { sale_stream(ctx, name, sale)? } else { None };
    let c = Committer { ctx, key: name, origin: Origin::Master, stream: stream.as_ref() };
    let status = c.write(sale, Some(DueHolds::lazy(now)), |w, sale| Ok::<_, RedisError>(finish(w, sale, rid)))?;
    Reply::status_count(ctx, status, sale.remaining())
}

/// SECKILL.RELEASE key reservation-id
pub(super) fn release(ctx: &Context, call: &Call) -> RedisResult {
    settle(ctx, call, |w, sale, rid| {
        let had_holds = sale.next_deadline().is_some();
        match sale.release(rid, State::Released) {
            ReleaseOutcome::Released => {
                w.publish(sale, &Effect::Release(rid.into()), had_holds);
                stats_of(&stats::RELEASED, c"RELEASED")
            }
            ReleaseOutcome::AlreadyReleased => stats_of(&stats::LATE, c"ALREADY_RELEASED"),
            ReleaseOutcome::Confirmed => stats_of(&stats::LATE, c"CONFIRMED"),
            ReleaseOutcome::NotFound => stats_of(&stats::NOT_FOUND, c"NOT_FOUND"),
        }
    })
}

/// SECKILL.CONFIRM key reservation-id
pub(super) fn confirm(ctx: &Context, call: &Call) -> RedisResult {
    settle(ctx, call, |w, sale, rid| {
        let had_holds = sale.next_deadline().is_some();
        match sale.confirm(rid) {
            ConfirmOutcome::Confirmed => {
                w.publish(sale, &Effect::Confirm(rid.into()), had_holds);
                stats_of(&stats::CONFIRMED, c"CONFIRMED")
            }
            ConfirmOutcome::AlreadyConfirmed => stats_of(&stats::LATE, c"ALREADY_CONFIRMED"),
            ConfirmOutcome::Released => stats_of(&stats::LATE, c"RELEASED"),
            ConfirmOutcome::NotFound => stats_of(&stats::NOT_FOUND, c"NOT_FOUND"),
        }
    })
}
