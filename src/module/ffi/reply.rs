//! Reply writes straight through the module API, one value at a time
//! (`module::reply` builds the shapes from these).

use std::ffi::CStr;
use std::os::raw::{c_char, c_long};

use redis_module::{raw, Context};

#[inline]
pub fn null(ctx: &Context) {
    raw::reply_with_null(ctx.ctx);
}

#[inline]
pub fn int(ctx: &Context, n: u64) {
    raw::reply_with_long_long(ctx.ctx, i64::try_from(n).unwrap_or(i64::MAX));
}

#[inline]
pub fn bulk(ctx: &Context, bytes: &[u8]) {
    raw::reply_with_string_buffer(ctx.ctx, bytes.as_ptr().cast::<c_char>(), bytes.len());
}

/// A status word: a simple string.
#[inline]
pub fn simple(ctx: &Context, word: &CStr) {
    raw::reply_with_simple_string(ctx.ctx, word.as_ptr());
}

/// An array of `len` values, written next.
#[inline]
pub fn array(ctx: &Context, len: usize) {
    raw::reply_with_array(ctx.ctx, len as c_long);
}

/// A map of `len` field/value pairs, written next (under RESP2 a flat
/// array of twice as many values).
#[inline]
pub fn map(ctx: &Context, len: usize) {
    raw::reply_with_map(ctx.ctx, len as c_long);
}
