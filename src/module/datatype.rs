//! The `seckill--` data type: one sale per key, with RDB, AOF rewrite,
//! digest, memory usage and copy callbacks. Each callback guards against
//! panics: a panic here would abort the server.

use std::os::raw::{c_int, c_void};
use std::panic::{catch_unwind, AssertUnwindSafe};

use redis_module::native_types::RedisType;
use redis_module::{raw, ContextFlags};

use crate::module::rawapi;
use crate::rules::sale::Sale;
use crate::wire::effect_args::{EffectArgs, EFFECT_COMMAND};
use crate::wire::encoding;

/// Bumped with the persisted format; `encoding` reads every older version.
pub const ENCODING_VERSION: i32 = 5;

/// Records per SECKILL.EFFECT command in an AOF rewrite.
const AOF_BATCH: usize = 64;

pub static SALE_TYPE: RedisType = RedisType::new(
    "seckill--",
    ENCODING_VERSION,
    raw::RedisModuleTypeMethods {
        version: raw::REDISMODULE_TYPE_METHOD_VERSION as u64,
        rdb_load: Some(rdb_load),
        rdb_save: Some(rdb_save),
        aof_rewrite: Some(aof_rewrite),
        free: Some(free),
        mem_usage: Some(mem_usage),
        digest: Some(digest),
        aux_load: None,
        aux_save: None,
        aux_save2: None,
        aux_save_triggers: 0,
        free_effort: None,
        unlink: None,
        copy: Some(copy),
        defrag: None,
        copy2: None,
        free_effort2: None,
        mem_usage2: None,
        unlink2: Some(unlink2),
    },
);

unsafe fn sale<'a>(value: *const c_void) -> &'a Sale {
    &*value.cast::<Sale>()
}

extern "C" fn rdb_load(rdb: *mut raw::RedisModuleIO, encver: c_int) -> *mut c_void {
    let loaded = catch_unwind(AssertUnwindSafe(|| {
        if !(1..=ENCODING_VERSION).contains(&encver) {
            return None;
        }
        let buf = raw::load_string_buffer(rdb).ok()?;
        let place = rawapi::key_of_io(rdb);
        let sale = encoding::decode_as(buf.as_ref(), place.as_ref().map(|(_, key)| &key[..])).ok()?;
        if let Some((_, key)) = &place {
            if !stream_slot_allowed(rdb, key, &sale) {
                return None;
            }
        }
        if let Some((db, key)) = &place {
            crate::module::expiry_registry::on_loaded(*db, key, &sale);
            crate::module::sales::on_loaded(*db, key);
        }
        Some(sale)
    }));
    match loaded {
        Ok(Some(sale)) => Box::into_raw(Box::new(sale)).cast::<c_void>(),
        _ => std::ptr::null_mut(),
    }
}

/// The sale writes its stream from the server, outside any ACL check: a
/// payload must not name a stream in another slot than its key. RESTORE
/// (a payload from a client) refuses one in every deployment, as INIT does;
/// a load from this server's own RDB or its master refuses one only in a
/// cluster, where the slot may be another node's (outside a cluster a
/// RENAME can legitimately have moved the sale away from its stream).
fn stream_slot_allowed(rdb: *mut raw::RedisModuleIO, key: &[u8], sale: &Sale) -> bool {
    let Some(stream) = &sale.config().stream else {
        return true;
    };
    if crate::wire::slot::key_slot(&stream.key) == crate::wire::slot::key_slot(key) {
        return true;
    }
    let flags = rawapi::io_flags(rdb);
    let loading = flags.intersects(ContextFlags::LOADING | ContextFlags::ASYNC_LOADING);
    loading && !flags.contains(ContextFlags::CLUSTER)
}

unsafe extern "C" fn rdb_save(rdb: *mut raw::RedisModuleIO, value: *mut c_void) {
    let s = sale(value);
    let bytes = catch_unwind(AssertUnwindSafe(|| encoding::encode(s))).unwrap_or_default();
    raw::save_slice(rdb, &bytes);
}

/// Rebuilds the sale with the same SECKILL.EFFECT commands replication
/// uses (`effect::rebuild`: INIT, the transfer state, the records).
unsafe extern "C" fn aof_rewrite(aof: *mut raw::RedisModuleIO, key: *mut raw::RedisModuleString, value: *mut c_void) {
    let s = sale(value);
    let _ = catch_unwind(AssertUnwindSafe(|| {
        crate::rules::effect::rebuild(s, AOF_BATCH, |e| rawapi::emit_aof(aof, EFFECT_COMMAND, key, &e.to_args()));
    }));
}

unsafe extern "C" fn free(value: *mut c_void) {
    drop(Box::from_raw(value.cast::<Sale>()));
}

/// The value left the keyspace under its name (DEL, UNLINK, expiry,
/// eviction, the old name of a RENAME or MOVE, a value written over): the
/// name leaves the list of sales.
unsafe extern "C" fn unlink2(ctx: *mut raw::RedisModuleKeyOptCtx, _value: *const c_void) {
    let _ = catch_unwind(AssertUnwindSafe(|| {
        if let Some((db, key)) = rawapi::key_of_opt_ctx(ctx) {
            crate::module::sales::on_unlinked(db, &key);
        }
    }));
}

unsafe extern "C" fn mem_usage(value: *const c_void) -> usize {
    catch_unwind(AssertUnwindSafe(|| sale(value).heap_estimate())).unwrap_or(0)
}

/// `DEBUG DIGEST-VALUE`: the persisted form is canonical (records in
/// creation order, derived state left out), so equal digests mean equal sales.
unsafe extern "C" fn digest(md: *mut raw::RedisModuleDigest, value: *mut c_void) {
    let s = sale(value);
    if let Ok(bytes) = catch_unwind(AssertUnwindSafe(|| encoding::encode(s))) {
        rawapi::digest_bytes(md, &bytes);
    }
}

unsafe extern "C" fn copy(_from: *mut raw::RedisModuleString, _to: *mut raw::RedisModuleString, value: *const c_void) -> *mut c_void {
    match catch_unwind(AssertUnwindSafe(|| sale(value).clone())) {
        Ok(s) => Box::into_raw(Box::new(s)).cast::<c_void>(),
        Err(_) => std::ptr::null_mut(),
    }
}
