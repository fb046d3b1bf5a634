//! Commands as Redis calls them: registration through the raw API and the
//! argument vector read in place.

use std::ffi::CStr;
use std::os::raw::c_int;

use redis_module::{raw, Context};

/// A command handler as Redis calls it.
pub type CommandFn = extern "C" fn(*mut raw::RedisModuleCtx, *mut *mut raw::RedisModuleString, c_int) -> c_int;

/// Registers a command whose only key is its first argument (`keyless`:
/// one without keys); Redis calls `handler` directly with its argument
/// vector.
pub fn create_command(ctx: &Context, name: &CStr, handler: CommandFn, flags: &CStr, keyless: bool) -> bool {
    let create = unsafe { raw::RedisModule_CreateCommand.unwrap() };
    let key = c_int::from(!keyless);
    unsafe { create(ctx.ctx, name.as_ptr(), Some(handler), flags.as_ptr(), key, key, key) == raw::REDISMODULE_OK as c_int }
}

/// The arguments Redis passed to a command handler. They live until the
/// handler returns, which outlives every use the dispatcher makes of them.
pub fn command_args<'a>(argv: *mut *mut raw::RedisModuleString, argc: c_int) -> &'a [*mut raw::RedisModuleString] {
    match usize::try_from(argc) {
        Ok(n) if n > 0 && !argv.is_null() => unsafe { std::slice::from_raw_parts(argv, n) },
        _ => &[],
    }
}

/// The bytes of a command argument, read in place (see `command_args`).
pub fn bytes_of<'a>(s: *mut raw::RedisModuleString) -> &'a [u8] {
    let mut len = 0;
    let ptr = unsafe { raw::RedisModule_StringPtrLen.unwrap()(s, &mut len) };
    if ptr.is_null() {
        return &[];
    }
    unsafe { std::slice::from_raw_parts(ptr.cast::<u8>(), len) }
}

/// A key name as a Redis string. The crate's `Context::create_string`
/// goes through a C string and panics on a NUL byte, which key names may
/// hold.
pub fn key_name(ctx: &Context, bytes: &[u8]) -> redis_module::RedisString {
    redis_module::RedisString::create_from_slice(ctx.ctx, bytes)
}
