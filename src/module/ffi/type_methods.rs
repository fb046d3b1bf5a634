//! A module data type's callbacks (RDB load and save, AOF rewrite, free,
//! memory usage, digest, copy, unlink) as Redis calls them: generic
//! trampolines over `TypeValue`, whose safe bodies live with the type
//! (`module::datatype`). Each guards against panics: a panic here would
//! abort the server.

use std::ffi::CStr;
use std::os::raw::{c_char, c_int, c_void};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::ptr::null_mut;

use redis_module::{raw, ContextFlags, RedisBuffer};

use super::args::bytes_of;
use super::strings::ModuleStrings;

/// A database and a key name.
pub type Place = (i32, Vec<u8>);

/// What a value stored under a module type does at each callback.
pub trait TypeValue: Clone + 'static {
    /// The value of an RDB payload of encoding version `encver` (`None`:
    /// Redis reports a load error).
    fn load(io: &RdbIo, encver: i32) -> Option<Self>;
    /// The bytes saved to the RDB as one string buffer (and digested).
    fn save(&self) -> Vec<u8>;
    /// The commands that rebuild the value in an AOF rewrite.
    fn rewrite(&self, aof: &AofIo);
    /// The value left the keyspace under its name (`None` where the server
    /// does not say which).
    fn unlinked(place: Option<Place>);
    /// Its heap size, for MEMORY USAGE.
    fn memory(&self) -> usize;
}

/// An RDB being loaded.
pub struct RdbIo(*mut raw::RedisModuleIO);

impl RdbIo {
    /// The next string buffer of the payload.
    pub fn read_buffer(&self) -> Option<RedisBuffer> {
        raw::load_string_buffer(self.0).ok()
    }

    /// The key's database and name (full loads and RESTORE give both).
    pub fn place(&self) -> Option<Place> {
        unsafe {
            let name = raw::RedisModule_GetKeyNameFromIO?(self.0);
            let db = raw::RedisModule_GetDbIdFromIO?(self.0);
            place(db, name)
        }
    }

    /// The server's state during the load (loading, cluster mode).
    pub fn flags(&self) -> ContextFlags {
        unsafe {
            let ctx = raw::RedisModule_GetContextFromIO.unwrap()(self.0);
            ContextFlags::from_bits_truncate(raw::RedisModule_GetContextFlags.unwrap()(ctx))
        }
    }
}

/// An AOF rewrite, at one key.
pub struct AofIo {
    aof: *mut raw::RedisModuleIO,
    key: *mut raw::RedisModuleString,
}

impl AofIo {
    /// Emits `cmd key args...`.
    pub fn emit(&self, cmd: &CStr, args: &[Vec<u8>]) {
        let mut argv = ModuleStrings::of(args);
        let (ptr, len) = (argv.0.as_mut_ptr(), argv.0.len());
        unsafe { raw::RedisModule_EmitAOF.unwrap()(self.aof, cmd.as_ptr(), c"sv".as_ptr(), self.key, ptr, len) };
    }
}

/// A database and a key name the server passed, copied out.
fn place(db: c_int, name: *const raw::RedisModuleString) -> Option<Place> {
    if name.is_null() {
        return None;
    }
    Some((db, bytes_of(name.cast_mut()).to_vec()))
}

/// The callbacks of a type whose values are `T`.
pub const fn methods<T: TypeValue>() -> raw::RedisModuleTypeMethods {
    raw::RedisModuleTypeMethods {
        version: raw::REDISMODULE_TYPE_METHOD_VERSION as u64,
        rdb_load: Some(rdb_load::<T>),
        rdb_save: Some(rdb_save::<T>),
        aof_rewrite: Some(aof_rewrite::<T>),
        free: Some(free::<T>),
        mem_usage: Some(mem_usage::<T>),
        digest: Some(digest::<T>),
        aux_load: None,
        aux_save: None,
        aux_save2: None,
        aux_save_triggers: 0,
        free_effort: None,
        unlink: None,
        copy: Some(copy::<T>),
        defrag: None,
        copy2: None,
        free_effort2: None,
        mem_usage2: None,
        unlink2: Some(unlink2::<T>),
    }
}

/// The value Redis holds for us: a `Box<T>` made by `rdb_load` or `copy`.
unsafe fn value<'a, T>(value: *const c_void) -> &'a T {
    &*value.cast::<T>()
}

fn boxed<T>(v: Option<T>) -> *mut c_void {
    v.map_or(null_mut(), |v| Box::into_raw(Box::new(v)).cast::<c_void>())
}

extern "C" fn rdb_load<T: TypeValue>(rdb: *mut raw::RedisModuleIO, encver: c_int) -> *mut c_void {
    boxed(catch_unwind(AssertUnwindSafe(|| T::load(&RdbIo(rdb), encver))).ok().flatten())
}

unsafe extern "C" fn rdb_save<T: TypeValue>(rdb: *mut raw::RedisModuleIO, v: *mut c_void) {
    let v = value::<T>(v);
    let bytes = catch_unwind(AssertUnwindSafe(|| v.save())).unwrap_or_default();
    raw::save_slice(rdb, &bytes);
}

unsafe extern "C" fn aof_rewrite<T: TypeValue>(aof: *mut raw::RedisModuleIO, key: *mut raw::RedisModuleString, v: *mut c_void) {
    let v = value::<T>(v);
    let _ = catch_unwind(AssertUnwindSafe(|| v.rewrite(&AofIo { aof, key })));
}

unsafe extern "C" fn free<T>(v: *mut c_void) {
    drop(Box::from_raw(v.cast::<T>()));
}

unsafe extern "C" fn unlink2<T: TypeValue>(ctx: *mut raw::RedisModuleKeyOptCtx, _v: *const c_void) {
    let _ = catch_unwind(AssertUnwindSafe(|| {
        let name = raw::RedisModule_GetKeyNameFromOptCtx.map(|f| f(ctx));
        let db = raw::RedisModule_GetDbIdFromOptCtx.map(|f| f(ctx));
        T::unlinked(name.zip(db).and_then(|(name, db)| place(db, name)))
    }));
}

unsafe extern "C" fn mem_usage<T: TypeValue>(v: *const c_void) -> usize {
    let v = value::<T>(v);
    catch_unwind(AssertUnwindSafe(|| v.memory())).unwrap_or(0)
}

/// `DEBUG DIGEST-VALUE`: the saved bytes as one sequence (a type whose
/// saved form is canonical has equal digests for equal values).
unsafe extern "C" fn digest<T: TypeValue>(md: *mut raw::RedisModuleDigest, v: *mut c_void) {
    let v = value::<T>(v);
    if let Ok(bytes) = catch_unwind(AssertUnwindSafe(|| v.save())) {
        raw::RedisModule_DigestAddStringBuffer.unwrap()(md, bytes.as_ptr().cast::<c_char>().cast_mut(), bytes.len());
        raw::RedisModule_DigestEndSequence.unwrap()(md);
    }
}

unsafe extern "C" fn copy<T: TypeValue>(
    _from: *mut raw::RedisModuleString,
    _to: *mut raw::RedisModuleString,
    v: *const c_void,
) -> *mut c_void {
    let v = value::<T>(v);
    boxed(catch_unwind(AssertUnwindSafe(|| v.clone())).ok())
}
