//! A sale's life and reports: INIT (a draw sale's commitment in its
//! stream), INFO, GET, and the node's list of sales, SALES.

use redis_module::{CallOptionsBuilder, CallResult, Context, RedisError, RedisResult};

use super::call::*;
use crate::module::commit::{Committer, Origin};
use crate::module::datatype::SALE_TYPE;
use crate::module::node::{self, now_ms};
use crate::module::reply::Reply;
use crate::module::stats;
use crate::rules::report::{Counts, Report};
use crate::rules::sale::{Sale, SaleConfig};
use crate::wire::args;

/// SECKILL.INIT key total [options...]
pub(super) fn init(ctx: &Context, call: &Call) -> RedisResult {
    let (name, argv) = (call.key, call.argv);
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

/// SECKILL.INFO key [FORMAT JSON]
pub(super) fn info(ctx: &Context, call: &Call) -> RedisResult {
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
pub(super) fn get(ctx: &Context, call: &Call) -> RedisResult {
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

/// SECKILL.SALES cursor [COUNT n] [WITHCOUNTS] -> [next_cursor, [key, ...]]:
/// the selected database's sales in byte order, from the list the module
/// keeps (`sales`), never a scan of the keyspace; read-only and keyless.
/// The next cursor is `0` at the end, else `>` and the name the next page
/// starts at. WITHCOUNTS puts each sale's six counts after its name.
pub(super) fn sales(ctx: &Context, call: &Call) -> RedisResult {
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
