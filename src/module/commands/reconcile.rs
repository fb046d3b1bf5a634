//! After a loss: RECONCILE (the sale against the order ledger, EXPIRE and
//! APPLY fix it) and UNFENCE (the reconciler lifts the fence).

use redis_module::{Context, ContextFlags, RedisError, RedisResult};

use super::call::*;
use crate::module::commit::{Committer, DueHolds, Origin};
use crate::module::datatype::SALE_TYPE;
use crate::module::node::{self, now_ms};
use crate::module::reply::Reply;
use crate::module::stats;
use crate::rules::effect::Effect;
use crate::rules::fence::UnfenceOutcome;
use crate::rules::reconcile::reconcile_orders;
use crate::rules::report::Report;
use crate::rules::sale::Sale;
use crate::wire::args;

/// SECKILL.RECONCILE key [EXPIRE] [ORDERS count rid user qty ...] [APPLY]
pub(super) fn reconcile(ctx: &Context, call: &Call) -> RedisResult {
    let (name, argv) = (call.key, call.argv);
    let a = args::parse_reconcile(&argv[2..])?;
    let key = ctx.open_key_writable(name);
    let Some(sale) = key.get_value::<Sale>(&SALE_TYPE).map_err(wrong_type)? else {
        return Reply::Null.done(ctx);
    };
    if a.apply && ctx.get_flags().contains(ContextFlags::OOM) {
        // Not flagged deny-oom, so a report still works under memory pressure.
        return Err(RedisError::Str("OOM command not allowed when used memory > 'maxmemory'."));
    }
    let stream = if a.apply || a.expire { sale_stream(ctx, name, sale)? } else { None };
    stats::RECONCILED.add(1);
    let now = now_ms();
    let c = Committer { ctx, key: name, origin: Origin::Master, stream: stream.as_ref() };
    // Holds that ran out go first (EXPIRE asks for it; APPLY is a write, and
    // writes release due holds), so the orders are classified, and retaken,
    // against the state that stays.
    let due = (a.expire || a.apply).then(|| DueHolds::lazy(now));
    let orders = c.write(sale, due, |w, sale| {
        // Each fix is applied as its row is classified (later rows see the
        // stock earlier fixes took), and the call's fixes go out as one effect.
        let had_holds = sale.next_deadline().is_some();
        let mut failure = None;
        let mut fixes = Vec::new();
        let orders = a.orders.as_ref().map(|orders| {
            reconcile_orders(sale, orders, a.apply, now, |sale, effect| match effect.apply(sale) {
                Ok(()) => fixes.push(effect),
                Err(e) => {
                    failure.get_or_insert(e);
                }
            })
        });
        if let Some(batch) = Effect::batch(fixes) {
            w.publish(sale, &batch, had_holds);
        }
        match failure {
            Some(e) => Err(internal(e)),
            None => Ok(orders),
        }
    })?;
    let mut doc = Report::of(sale, node::replid).doc();
    if let Some(o) = orders {
        o.extend(&mut doc);
    }
    Reply::doc(doc, a.format).done(ctx)
}

/// SECKILL.UNFENCE key -> UNFENCED | NOT_FENCED | NO_SALE. A fenced sale
/// records the server's current replication id (one effect, `UNFENCE
/// <replid>`); anything else changes nothing.
pub(super) fn unfence(ctx: &Context, call: &Call) -> RedisResult {
    let name = call.key;
    let key = ctx.open_key_writable(name);
    let Some(sale) = key.get_value::<Sale>(&SALE_TYPE).map_err(wrong_type)? else {
        return Reply::Simple(c"NO_SALE").done(ctx);
    };
    // Read afresh: the id recorded is the server's, whatever the cache held.
    let current = node::refresh_replid(ctx);
    let outcome = sale.decide_unfence(&current);
    if outcome == UnfenceOutcome::Unfenced {
        let now = now_ms();
        let stream = due_stream(ctx, name, sale, now)?;
        let c = Committer { ctx, key: name, origin: Origin::Master, stream: stream.as_ref() };
        // A write like any other: due holds first; then the waitlist gets
        // the units that came back while the sale was fenced.
        c.write(sale, Some(DueHolds::lazy(now)), |w, sale| w.commit(sale, &Effect::Unfence(current)).map_err(internal))?;
        stats::UNFENCED.add(1);
    }
    Reply::Simple(outcome.word()).done(ctx)
}
