//! The SECKILL.* command handlers: parse, open the key, let the sale decide,
//! commit the effects, reply. Each handler runs behind `dispatch`, so a panic
//! becomes an error reply instead of aborting Redis.
//!
//! This file holds the table and the sale, reserve/settle, reconcile,
//! report, effect and fence handlers; `draw` the draw sale's, `split` the
//! transfers'; `call` what they all share (arrows point from here and the
//! families to `call`, never back).

use std::ffi::CStr;
use std::mem::ManuallyDrop;
use std::os::raw::c_int;
use std::panic::{catch_unwind, AssertUnwindSafe};

use redis_module::{raw, CallOptionsBuilder, CallResult, Context, ContextFlags, RedisError, RedisResult, RedisString};

use crate::module::commit::{Committer, DueHolds, Origin, Writer};
use crate::module::datatype::SALE_TYPE;
use crate::module::ffi;
use crate::module::node::{self, now_ms};
use crate::module::reply::Reply;
use crate::module::stats;
use crate::rules::effect::Effect;
use crate::rules::fence::UnfenceOutcome;
use crate::rules::reconcile::reconcile_orders;
use crate::rules::report::{Counts, Report};
use crate::rules::reservation::State;
use crate::rules::sale::{ConfirmOutcome, Refusal, ReleaseOutcome, Sale, SaleConfig};
use crate::wire::args;
use crate::wire::effect_args::EffectArgs;

mod call;
mod draw;
mod split;

use call::*;

type Handler = fn(&Context, &Call) -> RedisResult;

/// Runs a handler on the arguments as Redis passed them, read in place (no
/// retained copies, no vector on the heap for a usual call), and turns a
/// panic into an error reply. The commands are registered through the raw
/// API (`COMMANDS`) for this: the crate's own wrapper copies the arguments
/// into a vector first, a measurable share of a RESERVE (`make bench`).
fn dispatch(ctx: *mut raw::RedisModuleCtx, argv: *mut *mut raw::RedisModuleString, argc: c_int, handler: Handler) -> c_int {
    let context = Context::new(ctx);
    let strings = ffi::args::command_args(argv, argc);
    let result = match catch_unwind(AssertUnwindSafe(|| run(&context, strings, handler))) {
        Ok(result) => result,
        Err(_) => {
            stats::PANICS.add(1);
            Err(RedisError::Str("ERR seckill internal error: the command was aborted"))
        }
    };
    context.reply(result) as c_int
}

fn run(ctx: &Context, strings: &[*mut raw::RedisModuleString], handler: Handler) -> RedisResult {
    let [_, name, ..] = strings else {
        return Err(RedisError::WrongArity);
    };
    // Redis owns the argument strings for the call: borrowed, never freed here.
    let name = ManuallyDrop::new(RedisString::from_redis_module_string(ctx.ctx, *name));
    // Most calls have a handful of arguments: keep their slices on the stack.
    let mut stack: [&[u8]; 16] = [&[]; 16];
    let heap: Vec<&[u8]>;
    let argv: &[&[u8]] = if strings.len() <= stack.len() {
        for (slot, &s) in stack.iter_mut().zip(strings) {
            *slot = ffi::args::bytes_of(s);
        }
        &stack[..strings.len()]
    } else {
        heap = strings.iter().map(|&s| ffi::args::bytes_of(s)).collect();
        &heap
    };
    handler(ctx, &Call { key: &name, argv, strings })
}

/// The commands: name, handler, flags. All take one key, the first argument.
macro_rules! commands {
    ($($name:literal => $body:path, $flags:literal;)*) => {
        pub const COMMANDS: &[(&CStr, ffi::args::CommandFn, &CStr)] = &[
            $(($name, {
                extern "C" fn entry(ctx: *mut raw::RedisModuleCtx, argv: *mut *mut raw::RedisModuleString, argc: c_int) -> c_int {
                    dispatch(ctx, argv, argc, $body)
                }
                entry
            }, $flags)),*
        ];
    };
}

commands! {
    c"seckill.init" => init, c"write deny-oom";
    c"seckill.reserve" => reserve, c"write deny-oom";
    c"seckill.release" => release, c"write";
    c"seckill.confirm" => confirm, c"write";
    c"seckill.reconcile" => reconcile, c"write";
    c"seckill.info" => info, c"readonly";
    c"seckill.get" => get, c"readonly";
    c"seckill.effect" => effect, c"write";
    // SEND starts a transfer: refused under memory pressure like any write
    // that can wait. RECV completes one: refusing it would leave units in
    // flight (unusable) while the pressure lasts, and it allocates at most
    // one peer entry.
    c"seckill.send" => split::send, c"write deny-oom";
    c"seckill.recv" => split::recv, c"write";
    c"seckill.enter" => draw::enter, c"write deny-oom";
    c"seckill.draw" => draw::draw, c"write deny-oom";
    c"seckill.entrants" => draw::entrants, c"readonly";
    c"seckill.unfence" => unfence, c"write";
    c"seckill.sales" => sales, c"readonly";
}

/// SECKILL.UNFENCE key -> UNFENCED | NOT_FENCED | NO_SALE. A fenced sale
/// records the server's current replication id (one effect, `UNFENCE
/// <replid>`); anything else changes nothing.
fn unfence(ctx: &Context, call: &Call) -> RedisResult {
    let name = call.key;
    if call.argv.len() != 2 {
        return Err(RedisError::WrongArity);
    }
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

/// SECKILL.SALES cursor [COUNT n] [WITHCOUNTS] -> [next_cursor, [key, ...]]:
/// the selected database's sales in byte order, from the list the module
/// keeps (`sales`), never a scan of the keyspace; read-only and keyless.
/// The next cursor is `0` at the end, else `>` and the name the next page
/// starts at. WITHCOUNTS puts each sale's six counts after its name.
fn sales(ctx: &Context, call: &Call) -> RedisResult {
    let a = args::parse_sales(&call.argv[1..])?;
    let (sales, next) = crate::module::sales::page(ctx, a.from, a.count, |sale| a.with_counts.then(|| Counts::of(sale, node::replid)));
    let cursor = match next {
        Some(name) => [&b">"[..], &name].concat(),
        None => b"0".to_vec(),
    };
    let mut items = Vec::with_capacity(sales.len() * if a.with_counts { 7 } else { 1 });
    for (name, counts) in sales {
        items.push(Reply::Bulk(name.into_vec()));
        if let Some(c) = counts {
            items.extend(c.values().into_iter().map(Reply::Int));
        }
    }
    Reply::Array(vec![Reply::Bulk(cursor), Reply::Array(items)]).done(ctx)
}

/// SECKILL.INIT key total [options...]
fn init(ctx: &Context, call: &Call) -> RedisResult {
    let (name, argv) = (call.key, call.argv);
    if argv.len() < 3 {
        return Err(RedisError::WrongArity);
    }
    let a = args::parse_init(argv[1], &argv[2..])?;
    let key = ctx.open_key_writable(name);
    let before = key.get_value::<Sale>(&SALE_TYPE).map_err(wrong_type)?.map(|s| s.remaining());
    if before.is_some() && !a.replace {
        stats::INIT_EXISTS.add(1);
        return Reply::Simple(c"EXISTS").done(ctx);
    }
    if let Some(stream) = &a.sale.stream {
        drop(check_stream(ctx, stream)?);
    }
    let c = Committer { ctx, key: name, origin: Origin::Master, stream: None };
    // A draw sale's seed comes from the operating system's random source,
    // here on the master only: replicas and the AOF get it in the effect.
    let draw = a.sale.draw.map(|_| {
        let mut seed = [0u8; 32];
        rand::RngCore::fill_bytes(&mut rand::rngs::OsRng, &mut seed);
        seed
    });
    // A FENCE sale records the server's replication id, read afresh.
    let fence = a.fence.then(|| node::refresh_replid(ctx));
    // So is the key of generated ids (rules::sale::ids): without it, one
    // id would tell the next.
    let mut id_key = [0u8; 16];
    rand::RngCore::fill_bytes(&mut rand::rngs::OsRng, &mut id_key);
    let config = SaleConfig { tag: rand::random(), draw, fence, id_key: Some(id_key), ..a.sale };
    c.init(&key, config.clone(), before)?;
    drop(key);
    if let (Some(secret), Some(stream)) = (&config.draw, &config.stream) {
        draw_committed(ctx, secret, config.beacon.as_deref(), stream)?;
    }
    if let Some(ttl) = a.ttl_s {
        // An absolute time, so replicas and AOF replays expire it together.
        let at = (now_ms() + ttl * 1000).to_string();
        let opts = CallOptionsBuilder::new().replicate().errors_as_replies().build();
        let res: CallResult = ctx.call_ext("PEXPIREAT", &opts, &[argv[1], at.as_bytes()]);
        res.map_err(|e| RedisError::String(format!("ERR could not set TTL: {e:?}")))?;
    }
    stats::INIT_CREATED.add(1);
    Reply::Simple(c"OK").done(ctx)
}

/// A draw sale's INIT with a STREAM appends `event draw_committed
/// commitment <hex> beacon <name or empty>` (docs/draw-sales.md), an XADD
/// replicated as Redis rewrites it (the id it gave, the exact trim).
fn draw_committed(
    ctx: &Context,
    secret: &crate::rules::sale::Seed,
    beacon: Option<&[u8]>,
    stream: &crate::rules::sale::StreamConfig,
) -> RedisResult<()> {
    let commitment = crate::rules::sale::draw_state::hex(&crate::rules::sale::draw_state::commitment(secret));
    let maxlen = stream.maxlen.map(|n| n.to_string());
    let mut argv: Vec<&[u8]> = vec![&stream.key];
    if let Some(n) = &maxlen {
        argv.extend([&b"MAXLEN"[..], b"~", n.as_bytes()]);
    }
    argv.extend([&b"*"[..], b"event", b"draw_committed", b"commitment", &commitment, b"beacon", beacon.unwrap_or_default()]);
    let opts = CallOptionsBuilder::new().replicate().errors_as_replies().build();
    let res: CallResult = ctx.call_ext("XADD", &opts, argv.as_slice());
    res.map(|_| ()).map_err(|e| RedisError::String(format!("ERR could not append draw_committed to the STREAM: {e:?}")))
}

/// SECKILL.RESERVE key user [QTY n] [REQID id]
fn reserve(ctx: &Context, call: &Call) -> RedisResult {
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
    if argv.len() != 3 {
        return Err(RedisError::WrongArity);
    }
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
fn release(ctx: &Context, call: &Call) -> RedisResult {
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
fn confirm(ctx: &Context, call: &Call) -> RedisResult {
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

/// SECKILL.RECONCILE key [EXPIRE] [ORDERS count rid user qty ...] [APPLY]
fn reconcile(ctx: &Context, call: &Call) -> RedisResult {
    let (name, argv) = (call.key, call.argv);
    if argv.len() < 2 {
        return Err(RedisError::WrongArity);
    }
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

/// SECKILL.INFO key [FORMAT JSON]
fn info(ctx: &Context, call: &Call) -> RedisResult {
    let (name, argv) = (call.key, call.argv);
    let (rest, format) = args::split_format(argv)?;
    if rest.len() != 2 {
        return Err(RedisError::WrongArity);
    }
    let key = ctx.open_key(name);
    match key.get_value::<Sale>(&SALE_TYPE).map_err(wrong_type)? {
        None => Reply::Null.done(ctx),
        Some(sale) => Reply::doc(Report::of(sale, node::replid).doc(), format).done(ctx),
    }
}

/// SECKILL.GET key reservation-id [FORMAT JSON]
fn get(ctx: &Context, call: &Call) -> RedisResult {
    let (name, argv) = (call.key, call.argv);
    let (rest, format) = args::split_format(argv)?;
    if rest.len() != 3 {
        return Err(RedisError::WrongArity);
    }
    let rid = args::parse_rid(&rest[2..])?;
    let key = ctx.open_key(name);
    let Some(rec) = key.get_value::<Sale>(&SALE_TYPE).map_err(wrong_type)?.and_then(|s| s.get(rid)) else {
        return Reply::Null.done(ctx);
    };
    Reply::doc(crate::rules::report::reservation_doc(&rec), format).done(ctx)
}

/// SECKILL.EFFECT key op args... (internal): applies a replicated effect.
/// Never reads the clock; refuses, changing nothing, an effect that does not
/// fit the sale. It runs only from the master link and while loading (AOF):
/// an effect states its own ids, quantities and times, so a client sending
/// one could pass LIMIT, the window or the stock.
fn effect(ctx: &Context, call: &Call) -> RedisResult {
    let (name, argv) = (call.key, call.argv);
    let flags = ctx.get_flags();
    if !flags.intersects(ContextFlags::REPLICATED | ContextFlags::LOADING) && !crate::module::load_args::client_effects() {
        stats::EFFECTS_DENIED.add(1);
        return Err(RedisError::Str(
            "ERR SECKILL.EFFECT is internal: it runs from the master link and while loading \
             (load the module with ALLOW-CLIENT-EFFECTS yes to replay effects from a client)",
        ));
    }
    if argv.len() < 3 {
        return Err(RedisError::WrongArity);
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
