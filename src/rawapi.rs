//! The few module API calls the crate has no safe wrapper for, each in one
//! small function. Everything unsafe about the raw API stays in this file.

use std::os::raw::{c_char, c_int};

use redis_module::{raw, Context};

/// The database the command's client has selected.
pub fn selected_db(ctx: &Context) -> i32 {
    unsafe { raw::RedisModule_GetSelectedDb.unwrap()(ctx.ctx) }
}

/// Selects `db` for the following key operations of this context.
pub fn select_db(ctx: &Context, db: i32) -> bool {
    unsafe { raw::RedisModule_SelectDb.unwrap()(ctx.ctx, db) == raw::REDISMODULE_OK as c_int }
}

/// Adds `bytes` to a `DEBUG DIGEST` computation as one sequence.
pub fn digest_bytes(md: *mut raw::RedisModuleDigest, bytes: &[u8]) {
    unsafe {
        raw::RedisModule_DigestAddStringBuffer.unwrap()(md, bytes.as_ptr().cast::<c_char>().cast_mut(), bytes.len());
        raw::RedisModule_DigestEndSequence.unwrap()(md);
    }
}

/// Emits `cmd key args...` into an AOF rewrite.
pub fn emit_aof(aof: *mut raw::RedisModuleIO, cmd: &std::ffi::CStr, key: *mut raw::RedisModuleString, args: &[Vec<u8>]) {
    unsafe {
        let create = raw::RedisModule_CreateString.unwrap();
        let mut argv: Vec<*mut raw::RedisModuleString> =
            args.iter().map(|a| create(std::ptr::null_mut(), a.as_ptr().cast::<c_char>(), a.len())).collect();
        raw::RedisModule_EmitAOF.unwrap()(aof, cmd.as_ptr(), c"sv".as_ptr(), key, argv.as_mut_ptr(), argv.len());
        let free = raw::RedisModule_FreeString.unwrap();
        for s in argv {
            free(std::ptr::null_mut(), s);
        }
    }
}

/// Calls `callback(first, second)` after every SWAPDB.
pub fn on_swapdb(ctx: &Context, callback: fn(i32, i32)) -> bool {
    static CALLBACK: std::sync::OnceLock<fn(i32, i32)> = std::sync::OnceLock::new();
    unsafe extern "C" fn trampoline(
        _ctx: *mut raw::RedisModuleCtx,
        _eid: raw::RedisModuleEvent,
        _subevent: u64,
        data: *mut std::os::raw::c_void,
    ) {
        let info = &*data.cast::<raw::RedisModuleSwapDbInfo>();
        if let Some(cb) = CALLBACK.get() {
            cb(info.dbnum_first, info.dbnum_second);
        }
    }
    let _ = CALLBACK.set(callback);
    let event = raw::RedisModuleEvent { id: raw::REDISMODULE_EVENT_SWAPDB, dataver: 1 };
    raw::subscribe_to_server_event(ctx.ctx, event, Some(trampoline)) == raw::Status::Ok
}
