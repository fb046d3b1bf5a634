//! The keyspace around a command: the selected database, change signals
//! and events, and the caller's ACL on a key.

use std::ffi::CStr;
use std::os::raw::c_int;
use std::ptr::null_mut;

use redis_module::{raw, Context};

/// The database the command's client has selected.
pub fn selected_db(ctx: &Context) -> i32 {
    unsafe { raw::RedisModule_GetSelectedDb.unwrap()(ctx.ctx) }
}

/// Selects `db` for the following key operations of this context.
pub fn select_db(ctx: &Context, db: i32) -> bool {
    unsafe { raw::RedisModule_SelectDb.unwrap()(ctx.ctx, db) == raw::REDISMODULE_OK as c_int }
}

/// Tells Redis the key changed (WATCH, client-side caching). The module
/// signals only real changes, so a refused RESERVE leaves WATCH alone.
pub fn signal_modified(ctx: &Context, key: &redis_module::RedisString) {
    signal_modified_raw(ctx, key.inner);
}

pub(super) fn signal_modified_raw(ctx: &Context, key: *mut raw::RedisModuleString) {
    unsafe {
        raw::RedisModule_SignalModifiedKey.unwrap()(ctx.ctx, key);
    }
}

/// A keyspace event of class `d` (module) for `key`; the event name is a
/// static C string, so nothing is allocated per call.
pub fn notify(ctx: &Context, event: &CStr, key: &redis_module::RedisString) {
    notify_raw(ctx, raw::NotifyEvent::MODULE.bits(), event, key.inner);
}

pub(super) fn notify_raw(ctx: &Context, class: c_int, event: &CStr, key: *mut raw::RedisModuleString) {
    unsafe {
        raw::RedisModule_NotifyKeyspaceEvent.unwrap()(ctx.ctx, class, event.as_ptr(), key);
    }
}

/// Whether the command's user may add to `key` (ACL key permissions).
pub fn may_insert(ctx: &Context, key: *mut raw::RedisModuleString) -> bool {
    unsafe {
        let name = raw::RedisModule_GetCurrentUserName.unwrap()(ctx.ctx);
        if name.is_null() {
            return true; // no client user: a timer or the server itself
        }
        let user = raw::RedisModule_GetModuleUserFromUserName.unwrap()(name);
        raw::RedisModule_FreeString.unwrap()(null_mut(), name);
        if user.is_null() {
            return false;
        }
        let flags = raw::REDISMODULE_CMD_KEY_INSERT as c_int;
        let ok = raw::RedisModule_ACLCheckKeyPermissions.unwrap()(user, key, flags) == raw::REDISMODULE_OK as c_int;
        raw::RedisModule_FreeModuleUser.unwrap()(user);
        ok
    }
}
