//! Server events the module follows (SWAPDB, a replica's asynchronous
//! load, FLUSHDB, Valkey's atomic slot migration, replication changes):
//! each subscribes a trampoline that calls a plain Rust callback.

use std::os::raw::{c_char, c_int};

use redis_module::{raw, Context};

/// How the server calls a subscriber.
type Trampoline = unsafe extern "C" fn(*mut raw::RedisModuleCtx, raw::RedisModuleEvent, u64, *mut std::os::raw::c_void);

/// Subscribes `trampoline` to the server event `id` (data version 1).
fn subscribe(ctx: &Context, id: u64, trampoline: Trampoline) -> bool {
    let event = raw::RedisModuleEvent { id, dataver: 1 };
    raw::subscribe_to_server_event(ctx.ctx, event, Some(trampoline)) == raw::Status::Ok
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
    subscribe(ctx, raw::REDISMODULE_EVENT_SWAPDB, trampoline)
}

/// Phases of a replica's asynchronous load (`repl-diskless-load swapdb`),
/// which fills a new dataset beside the live one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AsyncLoad {
    Started,
    Aborted,
    Completed,
}

/// Calls `callback` at each phase of an asynchronous replica load.
pub fn on_async_load(ctx: &Context, callback: fn(AsyncLoad)) -> bool {
    static CALLBACK: std::sync::OnceLock<fn(AsyncLoad)> = std::sync::OnceLock::new();
    unsafe extern "C" fn trampoline(
        _ctx: *mut raw::RedisModuleCtx,
        _eid: raw::RedisModuleEvent,
        subevent: u64,
        _data: *mut std::os::raw::c_void,
    ) {
        let phase = match subevent {
            raw::REDISMODULE_SUBEVENT_REPL_ASYNC_LOAD_STARTED => AsyncLoad::Started,
            raw::REDISMODULE_SUBEVENT_REPL_ASYNC_LOAD_ABORTED => AsyncLoad::Aborted,
            raw::REDISMODULE_SUBEVENT_REPL_ASYNC_LOAD_COMPLETED => AsyncLoad::Completed,
            _ => return,
        };
        if let Some(cb) = CALLBACK.get() {
            cb(phase);
        }
    }
    let _ = CALLBACK.set(callback);
    subscribe(ctx, raw::REDISMODULE_EVENT_REPL_ASYNC_LOAD, trampoline)
}

/// Calls `callback(db)` once a FLUSHDB (`db`) or FLUSHALL (-1) has
/// emptied the data, a replica's full sync and DEBUG RELOAD included.
pub fn on_flush(ctx: &Context, callback: fn(i32)) -> bool {
    static CALLBACK: std::sync::OnceLock<fn(i32)> = std::sync::OnceLock::new();
    unsafe extern "C" fn trampoline(
        _ctx: *mut raw::RedisModuleCtx,
        _eid: raw::RedisModuleEvent,
        subevent: u64,
        data: *mut std::os::raw::c_void,
    ) {
        if subevent != raw::REDISMODULE_SUBEVENT_FLUSHDB_END || data.is_null() {
            return;
        }
        let info = &*data.cast::<raw::RedisModuleFlushInfoV1>();
        if let Some(cb) = CALLBACK.get() {
            cb(info.dbnum);
        }
    }
    let _ = CALLBACK.set(callback);
    subscribe(ctx, raw::REDISMODULE_EVENT_FLUSHDB, trampoline)
}

/// A phase of a Valkey atomic slot migration (`CLUSTER MIGRATESLOTS`,
/// Valkey 9+), as this node sees it: it imports slots, or exports them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SlotMigration {
    ImportStarted,
    ExportStarted,
    ImportAborted,
    ExportAborted,
    ImportCompleted,
    ExportCompleted,
}

/// Calls `callback(phase, slot ranges)` at each phase of a Valkey atomic
/// slot migration. Subscribe only on Valkey: the event's number, 19, is
/// Redis 8.4's slot-trim event, whose data is another structure.
pub fn on_atomic_slot_migration(ctx: &Context, callback: fn(SlotMigration, &[(u16, u16)])) -> bool {
    // valkeymodule.h (Valkey 9.0+): VALKEYMODULE_EVENT_ATOMIC_SLOT_MIGRATION
    // is 19, data version 1, subevents 0..=5 in the order of `SlotMigration`,
    // and the data is a ValkeyModuleAtomicSlotMigrationInfoV1.
    const EVENT: u64 = 19;
    #[repr(C)]
    struct SlotRange {
        start: c_int,
        end: c_int,
    }
    #[repr(C)]
    struct InfoV1 {
        version: u64,
        job_name: [c_char; 41],
        slot_ranges: *const SlotRange,
        num_slot_ranges: u32,
    }
    type Handler = fn(SlotMigration, &[(u16, u16)]);
    static CALLBACK: std::sync::OnceLock<Handler> = std::sync::OnceLock::new();
    unsafe extern "C" fn trampoline(
        _ctx: *mut raw::RedisModuleCtx,
        _eid: raw::RedisModuleEvent,
        subevent: u64,
        data: *mut std::os::raw::c_void,
    ) {
        use SlotMigration::*;
        let phase = match subevent {
            0 => ImportStarted,
            1 => ExportStarted,
            2 => ImportAborted,
            3 => ExportAborted,
            4 => ImportCompleted,
            5 => ExportCompleted,
            _ => return,
        };
        let info = data.cast_const().cast::<InfoV1>();
        if info.is_null() || (*info).slot_ranges.is_null() {
            return;
        }
        // The server owns the ranges for the call; copied before use.
        let raw_ranges = std::slice::from_raw_parts((*info).slot_ranges, (*info).num_slot_ranges as usize);
        let slot = |s: c_int| u16::try_from(s.clamp(0, 16383)).unwrap_or(0);
        let ranges: Vec<(u16, u16)> = raw_ranges.iter().map(|r| (slot(r.start), slot(r.end))).collect();
        if let Some(cb) = CALLBACK.get() {
            // Nothing may unwind into the server.
            let _ = std::panic::catch_unwind(|| cb(phase, &ranges));
        }
    }
    let _ = CALLBACK.set(callback);
    subscribe(ctx, EVENT, trampoline)
}

/// Calls `callback` after each server event that can change the server's
/// replication id: a role change (a replica promoted, a master made a
/// replica), a replica attached or gone (a master's first replica makes
/// its backlog with a new id), the master link up or down (a replica takes
/// its master's id), and the end of a load (a restart, a replica's full
/// sync). Returns whether every subscription was taken.
pub fn on_replication_events(ctx: &Context, callback: fn(&Context)) -> bool {
    static CALLBACK: std::sync::OnceLock<fn(&Context)> = std::sync::OnceLock::new();
    unsafe extern "C" fn trampoline(
        ctx: *mut raw::RedisModuleCtx,
        eid: raw::RedisModuleEvent,
        subevent: u64,
        _data: *mut std::os::raw::c_void,
    ) {
        // A load that starts changes nothing yet.
        if eid.id == raw::REDISMODULE_EVENT_LOADING && subevent != raw::REDISMODULE_SUBEVENT_LOADING_ENDED {
            return;
        }
        if let Some(cb) = CALLBACK.get() {
            let context = Context::new(ctx);
            // Nothing may unwind into the server.
            let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| cb(&context)));
        }
    }
    let _ = CALLBACK.set(callback);
    [
        raw::REDISMODULE_EVENT_REPLICATION_ROLE_CHANGED,
        raw::REDISMODULE_EVENT_REPLICA_CHANGE,
        raw::REDISMODULE_EVENT_MASTER_LINK_CHANGE,
        raw::REDISMODULE_EVENT_LOADING,
    ]
    .into_iter()
    .all(|id| subscribe(ctx, id, trampoline))
}
