//! A stream key through the module stream API (`RedisModule_StreamAdd`),
//! several times cheaper than XADD through `RedisModule_Call`: open, add,
//! trim, and the explicit replication and events the API leaves to us.

use std::os::raw::{c_char, c_int, c_longlong};

use redis_module::{raw, Context};

use super::keyspace::{notify_raw, signal_modified_raw};
use super::strings::OwnedString;

/// A stream key opened for reading and writing, closed when dropped.
pub struct StreamKey {
    key: *mut raw::RedisModuleKey,
    // Dropped after the key is closed (`Drop` runs before the fields).
    name: OwnedString,
}

/// An entry id.
#[derive(Clone, Copy)]
pub struct StreamId {
    pub ms: u64,
    pub seq: u64,
}

/// How a trim counts (`MAXLEN ~` or `MAXLEN =`).
#[derive(Clone, Copy)]
pub enum Trim {
    Approx,
    Exact,
}

impl StreamKey {
    pub fn open(ctx: &Context, name: &[u8]) -> StreamKey {
        let name = OwnedString::new(name);
        let mode = (raw::REDISMODULE_READ | raw::REDISMODULE_WRITE) as c_int;
        let key = unsafe { raw::RedisModule_OpenKey.unwrap()(ctx.ctx, name.ptr(), mode) }.cast::<raw::RedisModuleKey>();
        StreamKey { key, name }
    }

    fn kind(&self) -> isize {
        unsafe { raw::RedisModule_KeyType.unwrap()(self.key) as isize }
    }

    pub fn is_empty(&self) -> bool {
        self.kind() == raw::REDISMODULE_KEYTYPE_EMPTY
    }

    /// Whether the key holds a stream or nothing.
    pub fn is_stream_or_empty(&self) -> bool {
        matches!(self.kind(), raw::REDISMODULE_KEYTYPE_EMPTY | raw::REDISMODULE_KEYTYPE_STREAM)
    }

    pub fn name(&self) -> *mut raw::RedisModuleString {
        self.name.ptr()
    }

    /// Adds an entry of `fields` (name, value, ...) under `id`, or a new
    /// id when `None`; the id it got, or `None` if Redis refused.
    pub fn add(&self, id: Option<StreamId>, fields: &mut [*mut raw::RedisModuleString]) -> Option<StreamId> {
        let (flags, mut id) = match id {
            Some(StreamId { ms, seq }) => (0, raw::RedisModuleStreamID { ms, seq }),
            None => (raw::REDISMODULE_STREAM_ADD_AUTOID as c_int, raw::RedisModuleStreamID { ms: 0, seq: 0 }),
        };
        let pairs = (fields.len() / 2) as i64;
        let added = unsafe { raw::RedisModule_StreamAdd.unwrap()(self.key, flags, &mut id, fields.as_mut_ptr(), pairs) };
        (added == raw::REDISMODULE_OK as c_int).then_some(StreamId { ms: id.ms, seq: id.seq })
    }

    /// Trims to about (or exactly) `n` entries.
    pub fn trim(&self, how: Trim, n: u64) {
        let flags = match how {
            Trim::Approx => raw::REDISMODULE_STREAM_TRIM_APPROX as c_int,
            Trim::Exact => 0,
        };
        let n = c_longlong::try_from(n).unwrap_or(c_longlong::MAX);
        unsafe { raw::RedisModule_StreamTrimByLength.unwrap()(self.key, flags, n) };
    }

    /// The number of entries.
    pub fn len(&self) -> u64 {
        unsafe { raw::RedisModule_ValueLength.unwrap()(self.key) as u64 }
    }

    /// Replicates `XADD key [MAXLEN = length] id fields...`.
    pub fn replicate_add(&self, ctx: &Context, id: &[u8], length: Option<u64>, fields: &mut [*mut raw::RedisModuleString]) {
        let (idp, idl) = (id.as_ptr().cast::<c_char>(), id.len());
        let (fp, fl) = (fields.as_mut_ptr(), fields.len());
        let name = self.name.ptr();
        unsafe {
            let replicate = raw::RedisModule_Replicate.unwrap();
            match length {
                Some(n) => {
                    let n = c_longlong::try_from(n).unwrap_or(c_longlong::MAX);
                    replicate(ctx.ctx, c"XADD".as_ptr(), c"scclbv".as_ptr(), name, c"MAXLEN".as_ptr(), c"=".as_ptr(), n, idp, idl, fp, fl)
                }
                None => replicate(ctx.ctx, c"XADD".as_ptr(), c"sbv".as_ptr(), name, idp, idl, fp, fl),
            };
        }
    }

    /// Signals the key and sends the `xadd` keyspace event.
    pub fn announce(&self, ctx: &Context) {
        signal_modified_raw(ctx, self.name.ptr());
        notify_raw(ctx, raw::REDISMODULE_NOTIFY_STREAM as c_int, c"xadd", self.name.ptr());
    }
}

impl Drop for StreamKey {
    fn drop(&mut self) {
        unsafe { raw::RedisModule_CloseKey.unwrap()(self.key) };
    }
}
