//! The SECKILL.* command handlers: parse, open the key, let the sale decide,
//! commit the effects, reply. Each handler runs behind `dispatch`, so a panic
//! becomes an error reply instead of aborting Redis.

use std::ffi::CStr;
use std::mem::ManuallyDrop;
use std::os::raw::c_int;
use std::panic::{catch_unwind, AssertUnwindSafe};

use redis_module::key::RedisKeyWritable;
use redis_module::{raw, CallOptionsBuilder, CallResult, Context, ContextFlags, RedisError, RedisResult, RedisString};

use crate::module::commit::{Committer, DueHolds, Origin, Writer};
use crate::module::datatype::SALE_TYPE;
use crate::module::node::{self, now_ms};
use crate::module::rawapi;
use crate::module::reply::Reply;
use crate::module::stats;
use crate::module::stream::StreamKey;
use crate::rules::effect::Effect;
use crate::rules::fence::UnfenceOutcome;
use crate::rules::reconcile::reconcile_orders;
use crate::rules::report::Report;
use crate::rules::reservation::State;
use crate::rules::sale::TransferRefusal;
use crate::rules::sale::{ConfirmOutcome, EnterRefusal, Refusal, ReleaseOutcome, Sale, SaleConfig, StreamConfig};
use crate::rules::transfers::SendDecision;
use crate::wire::args::{self, ArgError};
use crate::wire::effect_args::EffectArgs;

/// One call's arguments: the key name (the first argument; a keyless
/// command such as SALES ignores it), the bytes
/// of every argument (command name first), and Redis's own strings for
/// them, which can be passed on to Redis by reference.
struct Call<'a> {
    key: &'a RedisString,
    argv: &'a [&'a [u8]],
    strings: &'a [*mut raw::RedisModuleString],
}

impl<'a> Call<'a> {
    /// An argument as the call passed it, found by the bytes parsed from it:
    /// Redis's own string (replicated by reference), or, for bytes that are
    /// no whole argument, the bytes.
    fn arg(&self, bytes: &'a [u8]) -> rawapi::Arg<'a> {
        match self.argv.iter().position(|&a| std::ptr::eq(a, bytes)) {
            Some(i) => rawapi::Arg::Str(self.strings[i]),
            None => rawapi::Arg::Bytes(bytes),
        }
    }
}

type Handler = fn(&Context, &Call) -> RedisResult;

/// Runs a handler on the arguments as Redis passed them, read in place (no
/// retained copies, no vector on the heap for a usual call), and turns a
/// panic into an error reply. The commands are registered through the raw
/// API (`COMMANDS`) for this: the crate's own wrapper copies the arguments
/// into a vector first, a measurable share of a RESERVE (`make bench`).
fn dispatch(ctx: *mut raw::RedisModuleCtx, argv: *mut *mut raw::RedisModuleString, argc: c_int, handler: Handler) -> c_int {
    let context = Context::new(ctx);
    let strings = rawapi::command_args(argv, argc);
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
            *slot = rawapi::bytes_of(s);
        }
        &stack[..strings.len()]
    } else {
        heap = strings.iter().map(|&s| rawapi::bytes_of(s)).collect();
        &heap
    };
    handler(ctx, &Call { key: &name, argv, strings })
}

impl From<ArgError> for RedisError {
    fn from(e: ArgError) -> RedisError {
        match e {
            ArgError::Arity => RedisError::WrongArity,
            ArgError::Msg(m) => RedisError::String(m),
        }
    }
}

/// A key of another type: Redis's standard WRONGTYPE error.
fn wrong_type(_: RedisError) -> RedisError {
    RedisError::WrongType
}

fn internal(e: crate::rules::sale::EffectError) -> RedisError {
    RedisError::String(format!("ERR seckill internal error: {}", e.0))
}

/// The commands: name, handler, flags. All take one key, the first argument.
macro_rules! commands {
    ($($name:literal => $body:ident, $flags:literal;)*) => {
        pub const COMMANDS: &[(&CStr, rawapi::CommandFn, &CStr)] = &[
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
    c"seckill.send" => send, c"write deny-oom";
    c"seckill.recv" => recv, c"write";
    c"seckill.enter" => enter, c"write deny-oom";
    c"seckill.draw" => draw, c"write deny-oom";
    c"seckill.entrants" => entrants, c"readonly";
    c"seckill.unfence" => unfence, c"write";
    c"seckill.sales" => sales, c"readonly";
}

/// DRAW's and SEND's error on a fenced sale (`rules::fence`).
const FENCED: &str = "FENCED the sale is fenced since a failover or restart: reconcile it with the order ledger, then SECKILL.UNFENCE";

/// A call that would move stock out of a fenced sale (DRAW, SEND) is
/// refused before anything changes.
fn check_fence(sale: &Sale) -> Result<(), RedisError> {
    if sale.fenced(node::replid) {
        stats::FENCED.add(1);
        return Err(RedisError::Str(FENCED));
    }
    Ok(())
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

const NOT_DRAW: &str = "ERR the sale is not a draw sale (INIT ... DRAW)";

/// SECKILL.ENTER key user [QTY n] [REQID id] -> [status, entrants]
fn enter(ctx: &Context, call: &Call) -> RedisResult {
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

/// SECKILL.DRAW key [COUNT n] -> [drawn, remaining, left_to_draw]
fn draw(ctx: &Context, call: &Call) -> RedisResult {
    let (name, argv) = (call.key, call.argv);
    if argv.len() < 2 {
        return Err(RedisError::WrongArity);
    }
    let count = args::parse_draw(&argv[2..])?;
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
    let stream = sale_stream(ctx, name, sale)?;
    let c = Committer { ctx, key: name, origin: Origin::Master, stream: stream.as_ref() };
    let drawn = c.write(sale, Some(DueHolds::lazy(now)), |w, sale| -> Result<_, RedisError> {
        let had_holds = sale.next_deadline().is_some();
        let Some(step) = sale.draw_step(count, now) else { return Ok(0) };
        let drawn = step.winners.len() as u64;
        stats::DRAWN.add(drawn);
        w.publish(sale, &Effect::Drawn { stock: step.stock, examined: step.examined, records: step.winners }, had_holds);
        Ok(drawn)
    })?;
    three(ctx, drawn, sale.remaining(), sale.left_to_draw())
}

/// SECKILL.ENTRANTS key cursor [COUNT n] -> [next_cursor, [user, qty,
/// result, ...]], in the order they entered; read-only.
fn entrants(ctx: &Context, call: &Call) -> RedisResult {
    let (name, argv) = (call.key, call.argv);
    if argv.len() < 3 {
        return Err(RedisError::WrongArity);
    }
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

/// SECKILL.SALES cursor [COUNT n] -> [next_cursor, [key, ...]]: the
/// selected database's sales in byte order, from the list the module keeps
/// (`sales`), never a scan of the keyspace; read-only and keyless. The
/// next cursor is `0` at the end, else `>` and the name the next page
/// starts at.
fn sales(ctx: &Context, call: &Call) -> RedisResult {
    let (from, count) = args::parse_sales(&call.argv[1..])?;
    let (names, next) = crate::module::sales::page(ctx, from, count);
    let cursor = match next {
        Some(name) => [&b">"[..], &name].concat(),
        None => b"0".to_vec(),
    };
    let names = names.into_iter().map(|n| Reply::Bulk(n.into_vec())).collect();
    Reply::Array(vec![Reply::Bulk(cursor), Reply::Array(names)]).done(ctx)
}

/// A STREAM key must be empty or a stream, and writable by the caller.
/// Returns it opened, for the command's appends.
fn check_stream(ctx: &Context, stream: &StreamConfig) -> Result<StreamKey, RedisError> {
    let key = StreamKey::open(ctx, &stream.key).map_err(RedisError::Str)?;
    check_acl(ctx, &key)?;
    Ok(key)
}

/// The sale's stream, checked as `check_stream` does and opened for the
/// command's appends; TRYAGAIN while a slot migration has moved it away.
fn sale_stream(ctx: &Context, name: &RedisString, sale: &Sale) -> Result<Option<StreamKey>, RedisError> {
    // Most sales have no stream: they do not read the key's name.
    if sale.config().stream.is_none() {
        return Ok(None);
    }
    let key = crate::module::stream::open_for_sale(ctx, name.as_slice(), sale).map_err(RedisError::Str)?;
    if let Some(key) = &key {
        check_acl(ctx, key)?;
    }
    Ok(key)
}

fn check_acl(ctx: &Context, key: &StreamKey) -> Result<(), RedisError> {
    if !ctx.get_flags().contains(ContextFlags::REPLICATED) && !crate::module::rawapi::may_insert(ctx, key.name()) {
        return Err(RedisError::Str("NOPERM this user has no permission to write the sale's STREAM key"));
    }
    Ok(())
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
    c.init(&key, SaleConfig { tag: rand::random(), draw, fence, ..a.sale }, before)?;
    drop(key);
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

/// RESERVE's and ENTER's arguments (`key user [QTY n] [REQID id]`), and
/// the key opened for writing.
#[inline]
fn user_call<'a>(ctx: &Context, call: &Call<'a>) -> Result<(args::ReserveArgs<'a>, RedisKeyWritable), RedisError> {
    if call.argv.len() < 3 {
        return Err(RedisError::WrongArity);
    }
    Ok((args::parse_reserve(&call.argv[2..])?, ctx.open_key_writable(call.key)))
}

/// QTY within the sale's LIMIT (RESERVE, ENTER).
#[inline]
fn check_qty(sale: &Sale, qty: u64) -> Result<(), RedisError> {
    if qty > sale.config().limit {
        return Err(RedisError::Str("ERR QTY is above the sale's LIMIT"));
    }
    Ok(())
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

fn stats_of(counter: &stats::Counter, status: &'static CStr) -> &'static CStr {
    counter.add(1);
    status
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
    if !flags.intersects(ContextFlags::REPLICATED | ContextFlags::LOADING) && !crate::module::config::client_effects() {
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
    let result = StreamKey::open(ctx, &stream.key)
        .and_then(|key| crate::module::stream::append_replayed(ctx, &key, tail.ms, tail.seq, tail.length, &entry));
    if let Err(e) = result {
        crate::module::warn::limited(ctx, &format!("seckill: {e}"));
    }
}

/// The sale's stream when the call releases due holds (their releases are
/// appended); transfers themselves write no stream entry.
fn due_stream(ctx: &Context, name: &RedisString, sale: &Sale, now: u64) -> Result<Option<StreamKey>, RedisError> {
    if sale.next_deadline().is_some_and(|d| d <= now) {
        sale_stream(ctx, name, sale)
    } else {
        Ok(None)
    }
}

fn three(ctx: &Context, a: u64, b: u64, c: u64) -> RedisResult {
    Reply::Array(vec![Reply::Int(a), Reply::Int(b), Reply::Int(c)]).done(ctx)
}

/// Only a part of a split sale moves stock, only with a peer it declared
/// and only in its own round: checked before anything changes.
fn check_transfer(sale: &Sale, peer: &[u8], round: &[u8]) -> Result<(), RedisError> {
    sale.check_transfer(peer, round).map_err(transfer_refused)
}

fn transfer_refused(refusal: TransferRefusal) -> RedisError {
    stats::TRANSFERS_REFUSED.add(1);
    RedisError::Str(match refusal {
        TransferRefusal::NotSplit => "ERR the sale is not a part of a split sale (INIT ... SPLIT)",
        TransferRefusal::StaleRound => {
            "STALEROUND the key is in another round of its split sale (an INIT ... REPLACE started it): reload the layout"
        }
        TransferRefusal::UnknownPeer => "ERR the peer is not one of this part's declared peers",
        TransferRefusal::Drawing => "ERR the draw part has begun drawing: its stock moves no more",
    })
}

/// SECKILL.SEND key peer qty [MIN m] TID tid ROUND round -> [taken,
/// sent_total, remaining] (nil when the key does not exist). Works outside
/// the sale's window: it moves stock between the keys of one sale, it
/// sells nothing.
fn send(ctx: &Context, call: &Call) -> RedisResult {
    let (name, argv) = (call.key, call.argv);
    if argv.len() < 4 {
        return Err(RedisError::WrongArity);
    }
    let a = args::parse_send(argv[1], &argv[2..])?;
    let key = ctx.open_key_writable(name);
    let Some(sale) = key.get_value::<Sale>(&SALE_TYPE).map_err(wrong_type)? else {
        return Reply::Null.done(ctx);
    };
    check_transfer(sale, a.peer, a.round)?;
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
                let effect = Effect::Send { peer: a.peer.into(), tid: a.tid.into(), takes };
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

/// SECKILL.RECV key peer sent_total ROUND round -> [credited,
/// received_total, remaining] (nil when the key does not exist). Works
/// outside the sale's window.
fn recv(ctx: &Context, call: &Call) -> RedisResult {
    let (name, argv) = (call.key, call.argv);
    if argv.len() < 4 {
        return Err(RedisError::WrongArity);
    }
    let args::RecvArgs { peer, sent_total, round } = args::parse_recv(argv[1], &argv[2..])?;
    let key = ctx.open_key_writable(name);
    let Some(sale) = key.get_value::<Sale>(&SALE_TYPE).map_err(wrong_type)? else {
        return Reply::Null.done(ctx);
    };
    check_transfer(sale, peer, round)?;
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
