//! What the command handlers share: the call's arguments, the argument
//! and type errors, the stream and quantity checks, the fence check, the
//! small replies.

use crate::module::ffi;
use crate::module::node::{self};
use crate::module::reply::Reply;
use crate::module::stats;
use crate::module::stream::StreamKey;
use crate::rules::sale::{Sale, StreamConfig};
use crate::wire::args::{self, ArgError};
use redis_module::key::RedisKeyWritable;
use redis_module::{raw, Context, ContextFlags, RedisError, RedisResult, RedisString};
use std::ffi::CStr;

/// One call's arguments: the key name (the first argument; a keyless
/// command such as SALES ignores it), the bytes
/// of every argument (command name first), and Redis's own strings for
/// them, which can be passed on to Redis by reference.
pub(super) struct Call<'a> {
    pub(super) key: &'a RedisString,
    pub(super) argv: &'a [&'a [u8]],
    pub(super) strings: &'a [*mut raw::RedisModuleString],
}

impl<'a> Call<'a> {
    /// An argument as the call passed it, found by the bytes parsed from it:
    /// Redis's own string (replicated by reference), or, for bytes that are
    /// no whole argument, the bytes.
    pub(super) fn arg(&self, bytes: &'a [u8]) -> ffi::replicate::Arg<'a> {
        match self.argv.iter().position(|&a| std::ptr::eq(a, bytes)) {
            Some(i) => ffi::replicate::Arg::Str(self.strings[i]),
            None => ffi::replicate::Arg::Bytes(bytes),
        }
    }
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
pub(super) fn wrong_type(_: RedisError) -> RedisError {
    RedisError::WrongType
}

pub(super) fn internal(e: crate::rules::sale::EffectError) -> RedisError {
    RedisError::String(format!("ERR seckill internal error: {}", e.0))
}

/// DRAW's and SEND's error on a fenced sale (`rules::fence`).
pub(super) const FENCED: &str =
    "FENCED the sale is fenced since a failover or restart: reconcile it with the order ledger, then SECKILL.UNFENCE";

/// A call that would move stock out of a fenced sale (DRAW, SEND) is
/// refused before anything changes.
pub(super) fn check_fence(sale: &Sale) -> Result<(), RedisError> {
    if sale.fenced(node::replid) {
        stats::FENCED.add(1);
        return Err(RedisError::Str(FENCED));
    }
    Ok(())
}

/// A STREAM key must be empty or a stream, and writable by the caller.
/// Returns it opened, for the command's appends.
pub(super) fn check_stream(ctx: &Context, stream: &StreamConfig) -> Result<StreamKey, RedisError> {
    let key = crate::module::stream::open(ctx, &stream.key).map_err(RedisError::Str)?;
    check_acl(ctx, &key)?;
    Ok(key)
}

/// The sale's stream, checked as `check_stream` does and opened for the
/// command's appends; TRYAGAIN while a slot migration has moved it away.
pub(super) fn sale_stream(ctx: &Context, name: &RedisString, sale: &Sale) -> Result<Option<StreamKey>, RedisError> {
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

pub(super) fn check_acl(ctx: &Context, key: &StreamKey) -> Result<(), RedisError> {
    if !ctx.get_flags().contains(ContextFlags::REPLICATED) && !crate::module::ffi::keyspace::may_insert(ctx, key.name()) {
        return Err(RedisError::Str("NOPERM this user has no permission to write the sale's STREAM key"));
    }
    Ok(())
}

/// RESERVE's and ENTER's arguments (`key user [QTY n] [REQID id]`), and
/// the key opened for writing.
#[inline]
pub(super) fn user_call<'a>(ctx: &Context, call: &Call<'a>) -> Result<(args::ReserveArgs<'a>, RedisKeyWritable), RedisError> {
    Ok((args::parse_reserve(&call.argv[2..])?, ctx.open_key_writable(call.key)))
}

/// QTY within the sale's LIMIT (RESERVE, ENTER).
#[inline]
pub(super) fn check_qty(sale: &Sale, qty: u64) -> Result<(), RedisError> {
    if qty > sale.config().limit {
        return Err(RedisError::Str("ERR QTY is above the sale's LIMIT"));
    }
    Ok(())
}

pub(super) fn stats_of(counter: &stats::Counter, status: &'static CStr) -> &'static CStr {
    counter.add(1);
    status
}

pub(super) fn three(ctx: &Context, a: u64, b: u64, c: u64) -> RedisResult {
    Reply::Array(vec![Reply::Int(a), Reply::Int(b), Reply::Int(c)]).done(ctx)
}

/// The sale's stream when the call releases due holds (their releases are
/// appended); transfers themselves write no stream entry.
pub(super) fn due_stream(ctx: &Context, name: &RedisString, sale: &Sale, now: u64) -> Result<Option<StreamKey>, RedisError> {
    if sale.next_deadline().is_some_and(|d| d <= now) {
        sale_stream(ctx, name, sale)
    } else {
        Ok(None)
    }
}
