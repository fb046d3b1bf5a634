//! The few module API calls the crate has no safe wrapper for, each in one
//! small function. Everything unsafe about the raw API stays in this file.

use std::ffi::CStr;
use std::os::raw::{c_char, c_int};
use std::ptr::null_mut;

use redis_module::{raw, Context};

/// The database the command's client has selected.
pub fn selected_db(ctx: &Context) -> i32 {
    unsafe { raw::RedisModule_GetSelectedDb.unwrap()(ctx.ctx) }
}

/// A key name as a Redis string. The crate's `Context::create_string`
/// goes through a C string and panics on a NUL byte, which key names may
/// hold.
pub fn key_name(ctx: &Context, bytes: &[u8]) -> redis_module::RedisString {
    redis_module::RedisString::create_from_slice(ctx.ctx, bytes)
}

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

/// Words passed to Redis on every call (stream field names, event words,
/// the effect names of the hot paths), made into module strings once and
/// kept for the life of the module: Redis only adds references to them,
/// so passing one allocates nothing.
const WORDS: [&[u8]; 11] =
    [b"event", b"rid", b"user", b"qty", b"reserved", b"released", b"confirmed", b"expired", b"PENDING", b"RELEASE", b"CONFIRM"];

struct Constants([*mut raw::RedisModuleString; WORDS.len()]);

// The strings are never changed and only used on Redis's main thread.
unsafe impl Send for Constants {}
unsafe impl Sync for Constants {}

static CONSTANTS: std::sync::OnceLock<Constants> = std::sync::OnceLock::new();

/// The kept module string for `word`, if it is one of `WORDS`.
pub fn constant(word: &[u8]) -> Option<*mut raw::RedisModuleString> {
    let c = CONSTANTS.get_or_init(|| {
        Constants(WORDS.map(|w| unsafe { raw::RedisModule_CreateString.unwrap()(null_mut(), w.as_ptr().cast::<c_char>(), w.len()) }))
    });
    WORDS.iter().position(|&w| w == word).map(|i| c.0[i])
}

/// Module strings made for one call (no context, so never auto-freed) and
/// freed when dropped.
#[derive(Default)]
pub struct ModuleStrings(pub Vec<*mut raw::RedisModuleString>);

impl ModuleStrings {
    pub fn of<T: AsRef<[u8]>>(args: &[T]) -> ModuleStrings {
        let mut strings = ModuleStrings(Vec::with_capacity(args.len()));
        for a in args {
            strings.add(a.as_ref());
        }
        strings
    }

    pub fn add(&mut self, bytes: &[u8]) -> *mut raw::RedisModuleString {
        let s = unsafe { raw::RedisModule_CreateString.unwrap()(null_mut(), bytes.as_ptr().cast::<c_char>(), bytes.len()) };
        self.0.push(s);
        s
    }
}

impl Drop for ModuleStrings {
    fn drop(&mut self) {
        for &s in &self.0 {
            unsafe { raw::RedisModule_FreeString.unwrap()(null_mut(), s) };
        }
    }
}

/// Emits `cmd key args...` into an AOF rewrite.
pub fn emit_aof(aof: *mut raw::RedisModuleIO, cmd: &CStr, key: *mut raw::RedisModuleString, args: &[Vec<u8>]) {
    let mut argv = ModuleStrings::of(args);
    let (ptr, len) = (argv.0.as_mut_ptr(), argv.0.len());
    unsafe { raw::RedisModule_EmitAOF.unwrap()(aof, cmd.as_ptr(), c"sv".as_ptr(), key, ptr, len) };
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
    let event = raw::RedisModuleEvent { id: raw::REDISMODULE_EVENT_REPL_ASYNC_LOAD, dataver: 1 };
    raw::subscribe_to_server_event(ctx.ctx, event, Some(trampoline)) == raw::Status::Ok
}

/// What an RDB load is for: the key's database and name (full loads and
/// RESTORE give both; `None` where the server does not say).
pub fn key_of_io(io: *mut raw::RedisModuleIO) -> Option<(i32, Vec<u8>)> {
    unsafe {
        let name = raw::RedisModule_GetKeyNameFromIO?(io);
        let db = raw::RedisModule_GetDbIdFromIO?(io);
        place(db, name)
    }
}

/// A database and a key name the server passed, copied out.
fn place(db: c_int, name: *const raw::RedisModuleString) -> Option<(i32, Vec<u8>)> {
    if name.is_null() {
        return None;
    }
    Some((db, bytes_of(name.cast_mut()).to_vec()))
}

/// The database and name of the key a type callback with a key context
/// (unlink2, copy2, ...) is called for.
pub fn key_of_opt_ctx(ctx: *mut raw::RedisModuleKeyOptCtx) -> Option<(i32, Vec<u8>)> {
    unsafe {
        let name = raw::RedisModule_GetKeyNameFromOptCtx?(ctx);
        let db = raw::RedisModule_GetDbIdFromOptCtx?(ctx);
        place(db, name)
    }
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
    let event = raw::RedisModuleEvent { id: raw::REDISMODULE_EVENT_FLUSHDB, dataver: 1 };
    raw::subscribe_to_server_event(ctx.ctx, event, Some(trampoline)) == raw::Status::Ok
}

/// The server's state during an RDB load (loading, cluster mode).
pub fn io_flags(io: *mut raw::RedisModuleIO) -> redis_module::ContextFlags {
    unsafe {
        let ctx = raw::RedisModule_GetContextFromIO.unwrap()(io);
        redis_module::ContextFlags::from_bits_truncate(raw::RedisModule_GetContextFlags.unwrap()(ctx))
    }
}

/// RM_Replicate of `cmd key args...`: the key string is passed as it is,
/// the other arguments are copied once into module strings.
pub fn replicate<T: AsRef<[u8]>>(ctx: &Context, cmd: &CStr, key: *mut raw::RedisModuleString, args: &[T]) {
    let mut argv = ModuleStrings::of(args);
    let (ptr, len) = (argv.0.as_mut_ptr(), argv.0.len());
    unsafe { raw::RedisModule_Replicate.unwrap()(ctx.ctx, cmd.as_ptr(), c"sv".as_ptr(), key, ptr, len) };
}

/// An argument to replicate: bytes (Redis gets a copy) or a string Redis
/// already has, a command's own argument, passed on by reference.
#[derive(Clone, Copy)]
pub enum Arg<'a> {
    Bytes(&'a [u8]),
    Str(*mut raw::RedisModuleString),
}

/// RM_Replicate of `cmd key op args...` straight from the arguments, with
/// no vector built: the short effect forms on the hot paths (PENDING with
/// or without its stream entry, RELEASE, CONFIRM), whose op is one of the
/// kept `WORDS`. Bytes are copied by Redis (`b`); a string Redis already
/// has (RESERVE's user, second) is only referenced (`s`). Other shapes
/// take the general path.
pub fn replicate_args(ctx: &Context, cmd: &CStr, key: *mut raw::RedisModuleString, op: &CStr, args: &[Arg]) {
    use Arg::{Bytes as B, Str as S};
    let Some(w) = constant(op.to_bytes()) else {
        return replicate_general(ctx, cmd, key, op, args);
    };
    let f = unsafe { raw::RedisModule_Replicate.unwrap() };
    let (c, k) = (ctx.ctx, cmd.as_ptr());
    let p = |a: &[u8]| a.as_ptr().cast::<c_char>();
    // The status RM_Replicate answers is not checked: a command it does
    // not know is a programming error the tests catch.
    let _ = unsafe {
        match *args {
            [B(a)] => f(c, k, c"ssb".as_ptr(), key, w, p(a), a.len()),
            [B(a), B(u), B(n)] => f(c, k, c"ssbbb".as_ptr(), key, w, p(a), a.len(), p(u), u.len(), p(n), n.len()),
            [B(a), S(u), B(n)] => f(c, k, c"ssbsb".as_ptr(), key, w, p(a), a.len(), u, p(n), n.len()),
            [B(a), B(u), B(n), B(e)] => f(c, k, c"ssbbbb".as_ptr(), key, w, p(a), a.len(), p(u), u.len(), p(n), n.len(), p(e), e.len()),
            [B(a), S(u), B(n), B(e)] => f(c, k, c"ssbsbb".as_ptr(), key, w, p(a), a.len(), u, p(n), n.len(), p(e), e.len()),
            [B(a), B(u), B(n), B(e), B(l)] => {
                f(c, k, c"ssbbbbb".as_ptr(), key, w, p(a), a.len(), p(u), u.len(), p(n), n.len(), p(e), e.len(), p(l), l.len())
            }
            [B(a), S(u), B(n), B(e), B(l)] => {
                f(c, k, c"ssbsbbb".as_ptr(), key, w, p(a), a.len(), u, p(n), n.len(), p(e), e.len(), p(l), l.len())
            }
            _ => return replicate_general(ctx, cmd, key, op, args),
        }
    };
}

fn replicate_general(ctx: &Context, cmd: &CStr, key: *mut raw::RedisModuleString, op: &CStr, args: &[Arg]) {
    let mut all: Vec<&[u8]> = vec![op.to_bytes()];
    all.extend(args.iter().map(|a| match *a {
        Arg::Bytes(b) => b,
        Arg::Str(s) => bytes_of(s),
    }));
    replicate(ctx, cmd, key, &all);
}

/// Tells Redis the key changed (WATCH, client-side caching). The module
/// signals only real changes, so a refused RESERVE leaves WATCH alone.
pub fn signal_modified(ctx: &Context, key: &redis_module::RedisString) {
    unsafe {
        raw::RedisModule_SignalModifiedKey.unwrap()(ctx.ctx, key.inner);
    }
}

/// A keyspace event of class `d` (module) for `key`; the event name is a
/// static C string, so nothing is allocated per call.
pub fn notify(ctx: &Context, event: &CStr, key: &redis_module::RedisString) {
    unsafe {
        raw::RedisModule_NotifyKeyspaceEvent.unwrap()(ctx.ctx, raw::NotifyEvent::MODULE.bits(), event.as_ptr(), key.inner);
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
    let event = raw::RedisModuleEvent { id: EVENT, dataver: 1 };
    raw::subscribe_to_server_event(ctx.ctx, event, Some(trampoline)) == raw::Status::Ok
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
    .all(|id| {
        let event = raw::RedisModuleEvent { id, dataver: 1 };
        raw::subscribe_to_server_event(ctx.ctx, event, Some(trampoline)) == raw::Status::Ok
    })
}
