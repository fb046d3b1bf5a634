//! The draw sale's commands: ENTER, DRAW, ENTRANTS (docs/draw-sales.md).

use super::call::*;
use crate::module::commit::{Committer, DueHolds, Origin};
use crate::module::datatype::SALE_TYPE;
use crate::module::node::{self, now_ms};
use crate::module::reply::Reply;
use crate::module::stats;
use crate::rules::effect::Effect;
use crate::rules::sale::{EnterRefusal, Sale};
use crate::wire::args;
use redis_module::{Context, RedisError, RedisResult};

pub(super) const NOT_DRAW: &str = "ERR the sale is not a draw sale (INIT ... DRAW)";

/// SECKILL.ENTER key user [QTY n] [REQID id] -> [status, entrants]
pub(super) fn enter(ctx: &Context, call: &Call) -> RedisResult {
    let name = call.key;
    let (a, key) = user_call(ctx, call)?;
    let Some(sale) = key.get_value::<Sale>(&SALE_TYPE).map_err(wrong_type)? else {
        stats::ENTER_REFUSED.add(1);
        return Reply::status_count(ctx, c"NO_SALE", 0);
    };
    if !sale.is_draw() {
        return Err(RedisError::Str(NOT_DRAW));
    }
    check_qty(sale, a.qty)?;
    if sale.fenced(node::replid) {
        stats::FENCED.add(1);
        return Reply::status_count(ctx, c"FENCED", sale.entrant_count() as u64);
    }
    let now = now_ms();
    let status = match sale.decide_enter(a.user, a.qty, a.reqid, now) {
        Ok(entrant) => {
            let c = Committer { ctx, key: name, origin: Origin::Master, stream: None };
            c.write(sale, Some(DueHolds::lazy(now)), |w, sale| w.commit(sale, &Effect::Entrants(vec![entrant])).map_err(internal))?;
            stats_of(&stats::ENTERED, c"ENTERED")
        }
        Err(EnterRefusal::NotDraw) => return Err(RedisError::Str(NOT_DRAW)),
        Err(EnterRefusal::ReqidOfEntrant) => return Err(RedisError::Str("ERR REQID is already another entrant's")),
        Err(EnterRefusal::ReqidOfReservation) => return Err(RedisError::Str("ERR REQID is already a reservation's id")),
        Err(EnterRefusal::AlreadyEntered) => stats_of(&stats::ENTER_REFUSED, c"ALREADY_ENTERED"),
        Err(EnterRefusal::Drawn) => stats_of(&stats::ENTER_REFUSED, c"DRAWN"),
        Err(EnterRefusal::NotStarted) => stats_of(&stats::ENTER_REFUSED, c"NOT_STARTED"),
        Err(EnterRefusal::Ended) => stats_of(&stats::ENTER_REFUSED, c"ENDED"),
    };
    Reply::status_count(ctx, status, sale.entrant_count() as u64)
}

/// SECKILL.DRAW key [COUNT n] [BEACON value] -> [drawn, remaining, left_to_draw]
pub(super) fn draw(ctx: &Context, call: &Call) -> RedisResult {
    let (name, argv) = (call.key, call.argv);
    let (count, beacon) = args::parse_draw(&argv[2..])?;
    let key = ctx.open_key_writable(name);
    let Some(sale) = key.get_value::<Sale>(&SALE_TYPE).map_err(wrong_type)? else {
        return Err(RedisError::Str("ERR no such sale"));
    };
    if !sale.is_draw() {
        return Err(RedisError::Str(NOT_DRAW));
    }
    check_fence(sale)?;
    let now = now_ms();
    if now < sale.config().end_ms {
        return Err(RedisError::Str("ERR registration is open until END: DRAW runs after it"));
    }
    sale.check_beacon(beacon).map_err(RedisError::Str)?;
    let stream = sale_stream(ctx, name, sale)?;
    let c = Committer { ctx, key: name, origin: Origin::Master, stream: stream.as_ref() };
    let drawn = c.write(sale, Some(DueHolds::lazy(now)), |w, sale| -> Result<_, RedisError> {
        let had_holds = sale.next_deadline().is_some();
        let Some(step) = sale.draw_step(count, now, beacon) else { return Ok(0) };
        let drawn = step.winners.len() as u64;
        stats::DRAWN.add(drawn);
        w.publish(sale, &Effect::Drawn { stock: step.stock, examined: step.examined, records: step.winners, begin: step.begin }, had_holds);
        Ok(drawn)
    })?;
    three(ctx, drawn, sale.remaining(), sale.left_to_draw())
}

/// SECKILL.ENTRANTS key cursor [COUNT n] -> [next_cursor, [user, qty,
/// result, ...]], in the order they entered; read-only.
pub(super) fn entrants(ctx: &Context, call: &Call) -> RedisResult {
    let (name, argv) = (call.key, call.argv);
    let (cursor, count) = args::parse_entrants(&argv[2..])?;
    let key = ctx.open_key(name);
    let (next, page) = match key.get_value::<Sale>(&SALE_TYPE).map_err(wrong_type)? {
        None => (0, Vec::new()),
        Some(sale) if !sale.is_draw() => return Err(RedisError::Str(NOT_DRAW)),
        Some(sale) => sale.entrants_page(cursor, count),
    };
    let items = page
        .into_iter()
        .flat_map(|e| [Reply::Bulk(e.user.into_vec()), Reply::Int(e.qty), Reply::Bulk(e.result.word().as_bytes().to_vec())]);
    Reply::Array(vec![Reply::Bulk(next.to_string().into_bytes()), Reply::Array(items.collect())]).done(ctx)
}
