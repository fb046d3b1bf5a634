//! SECKILL.EFFECT: a replica's and an AOF replay's side of replication by
//! effect (docs/replication.md).

use redis_module::{Context, ContextFlags, RedisError, RedisResult};

use super::call::*;
use crate::module::commit::{Committer, Origin};
use crate::module::datatype::SALE_TYPE;
use crate::module::reply::Reply;
use crate::module::stats;
use crate::rules::effect::Effect;
use crate::rules::sale::Sale;
use crate::wire::effect_args::EffectArgs;

/// SECKILL.EFFECT key op args... (internal): applies a replicated effect.
/// Never reads the clock; refuses, changing nothing, an effect that does not
/// fit the sale. It runs only from the master link and while loading (AOF):
/// an effect states its own ids, quantities and times, so a client sending
/// one could pass LIMIT, the window or the stock.
pub(super) fn effect(ctx: &Context, call: &Call) -> RedisResult {
    let (name, argv) = (call.key, call.argv);
    let flags = ctx.get_flags();
    if !flags.intersects(ContextFlags::REPLICATED | ContextFlags::LOADING) && !crate::module::load_args::client_effects() {
        stats::EFFECTS_DENIED.add(1);
        return Err(RedisError::Str(
            "ERR SECKILL.EFFECT is internal: it runs from the master link and while loading \
             (load the module with ALLOW-CLIENT-EFFECTS yes to replay effects from a client)",
        ));
    }
    let (effect_args, tail) = crate::wire::effect_args::split_stream_tail(&argv[2..])?;
    let mut effect = Effect::parse(effect_args)?;
    if let Effect::Init(config) = &mut effect {
        // An INIT effect from before stream owners: the stream is this key's.
        if let Some(stream) = config.stream.as_mut().filter(|s| s.owner.is_empty()) {
            stream.owner = name.as_slice().into();
        }
    }
    let key = ctx.open_key_writable(name);
    let c = Committer { ctx, key: name, origin: Origin::Replayed, stream: None };
    let existing = key.get_value::<Sale>(&SALE_TYPE).map_err(wrong_type)?;
    let result = match (effect, existing) {
        (Effect::Init(config), existing) => {
            c.init(&key, config, existing.map(|s| s.remaining()))?;
            return Reply::Simple(c"OK").done(ctx);
        }
        (_, None) => Err(crate::rules::sale::EffectError("no sale at this key")),
        // A replayed effect never expires holds of its own: the master's
        // expiries arrive as their own effects. A refused one changes nothing.
        (effect, Some(sale)) => c.write(sale, None, |w, sale| {
            w.commit(sale, &effect)?;
            if let (Some(tail), Effect::Records(recs)) = (tail, &effect) {
                replay_stream_entry(ctx, sale, recs, tail);
            }
            Ok(())
        }),
    };
    match result {
        Ok(()) => Reply::Simple(c"OK").done(ctx),
        Err(e) => {
            crate::module::warn::limited(ctx, &format!("seckill: refused SECKILL.EFFECT: {}", e.0));
            Err(RedisError::String(format!("ERR effect refused: {}", e.0)))
        }
    }
}

/// The stream entry a PENDING effect carried: appended here with the
/// master's id and trimmed to the master's length.
fn replay_stream_entry(
    ctx: &Context,
    sale: &Sale,
    recs: &[crate::rules::reservation::Reservation],
    tail: crate::wire::effect_args::StreamTail,
) {
    let (Some(stream), [r]) = (&sale.config().stream, recs) else { return };
    let Some(rec) = sale.get(&r.id) else { return };
    let entry = crate::module::stream::Entry {
        event: crate::rules::effect::Event::Reserved.word().as_bytes(),
        rid: &r.id,
        user: rec.user(),
        qty: rec.qty(),
        via: None,
    };
    let result = crate::module::stream::open(ctx, &stream.key)
        .and_then(|key| crate::module::stream::append_replayed(ctx, &key, tail.ms, tail.seq, tail.length, &entry));
    if let Err(e) = result {
        crate::module::warn::limited(ctx, &format!("seckill: {e}"));
    }
}
