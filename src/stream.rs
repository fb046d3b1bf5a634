//! Appending a sale's events to its Redis Stream through the module stream
//! API (`RedisModule_StreamAdd`), which is several times cheaper than
//! calling XADD through `RedisModule_Call`. The stream API does not
//! propagate, so the entry is replicated as an explicit
//! `XADD skey [MAXLEN = n] <id> field value ...`: the id the master gave it
//! and, after approximate trimming, the exact length it left (what Redis
//! itself propagates for `XADD ... MAXLEN ~`).

use std::os::raw::{c_char, c_int, c_longlong};
use std::ptr::null_mut;

use redis_module::{raw, Context, ContextFlags};

use crate::effect::Digits;
use crate::rawapi::ModuleStrings;
use crate::sale::Sale;

/// One entry: `event <word> rid <id> user <user> qty <qty>`.
pub struct Entry<'a> {
    pub event: &'a [u8],
    pub rid: &'a [u8],
    pub user: &'a [u8],
    pub qty: u64,
}

/// Field names and event words, created once and kept for the life of the
/// module: most of an entry's strings never need allocating.
struct Constants([*mut raw::RedisModuleString; 8]);

// The strings are immutable and only ever used on Redis's main thread.
unsafe impl Send for Constants {}
unsafe impl Sync for Constants {}

static CONSTANTS: std::sync::OnceLock<Constants> = std::sync::OnceLock::new();

const WORDS: [&[u8]; 8] = [b"event", b"rid", b"user", b"qty", b"reserved", b"released", b"confirmed", b"expired"];

fn constant(word: &[u8]) -> Option<*mut raw::RedisModuleString> {
    let c = CONSTANTS.get_or_init(|| {
        Constants(WORDS.map(|w| unsafe {
            raw::RedisModule_CreateString.unwrap()(null_mut(), w.as_ptr().cast::<c_char>(), w.len())
        }))
    });
    WORDS.iter().position(|&w| w == word).map(|i| c.0[i])
}

/// A constant if `bytes` is one, else a new string freed with `strings`.
fn string(strings: &mut ModuleStrings, bytes: &[u8]) -> *mut raw::RedisModuleString {
    constant(bytes).unwrap_or_else(|| strings.add(bytes))
}

/// A sale's stream key, opened for writing once per command: checked before
/// the sale changes, then appended to.
pub struct StreamKey {
    name: *mut raw::RedisModuleString,
    key: *mut raw::RedisModuleKey,
}

impl StreamKey {
    /// Opens `stream`; an error if it holds something other than a stream.
    pub fn open(ctx: &Context, stream: &[u8]) -> Result<StreamKey, &'static str> {
        let name = unsafe { raw::RedisModule_CreateString.unwrap()(null_mut(), stream.as_ptr().cast::<c_char>(), stream.len()) };
        let mode = (raw::REDISMODULE_READ | raw::REDISMODULE_WRITE) as c_int;
        let key = unsafe { raw::RedisModule_OpenKey.unwrap()(ctx.ctx, name, mode) }.cast::<raw::RedisModuleKey>();
        let opened = StreamKey { name, key };
        let kind = unsafe { raw::RedisModule_KeyType.unwrap()(key) } as isize;
        if kind != raw::REDISMODULE_KEYTYPE_EMPTY && kind != raw::REDISMODULE_KEYTYPE_STREAM {
            return Err("ERR the STREAM key holds a value that is not a stream");
        }
        Ok(opened)
    }

    pub fn name(&self) -> *mut raw::RedisModuleString {
        self.name
    }

    fn is_empty(&self) -> bool {
        unsafe { raw::RedisModule_KeyType.unwrap()(self.key) as isize == raw::REDISMODULE_KEYTYPE_EMPTY }
    }
}

/// The error when a sale that has written its stream finds no stream here.
pub const STREAM_AWAY: &str =
    "TRYAGAIN the sale's STREAM key is not on this node (slot migration in progress?); retry later";

/// Opens the sale's stream for this call's appends (`None`: the sale has no
/// stream). The stream key is not among a command's keys, so during a slot
/// migration Redis cannot redirect a command whose stream moved first. A
/// sale that wrote its stream before, finding it missing in a cluster,
/// refuses (TRYAGAIN) rather than start a second stream on this node that
/// the migration would then collide with.
pub fn open_for_sale(ctx: &Context, sale: &Sale) -> Result<Option<StreamKey>, &'static str> {
    let Some(stream) = &sale.config().stream else {
        return Ok(None);
    };
    let key = StreamKey::open(ctx, &stream.key)?;
    if key.is_empty() && sale.record_count() > 0 && ctx.get_flags().contains(ContextFlags::CLUSTER) {
        return Err(STREAM_AWAY);
    }
    Ok(Some(key))
}

impl Drop for StreamKey {
    fn drop(&mut self) {
        unsafe {
            raw::RedisModule_CloseKey.unwrap()(self.key);
            raw::RedisModule_FreeString.unwrap()(null_mut(), self.name);
        }
    }
}

/// Appends `entry` to the stream (trimmed approximately to `maxlen`),
/// replicates it, signals the key and sends the `xadd` keyspace event.
pub fn append(ctx: &Context, stream: &StreamKey, maxlen: Option<u64>, entry: &Entry) -> Result<(), &'static str> {
    let mut strings = ModuleStrings(Vec::with_capacity(4));
    let (name, key) = (stream.name, stream.key);
    let mut qty = Digits::default();
    qty.push_u64(entry.qty);
    let mut fields = [
        string(&mut strings, b"event"),
        string(&mut strings, entry.event),
        string(&mut strings, b"rid"),
        string(&mut strings, entry.rid),
        string(&mut strings, b"user"),
        string(&mut strings, entry.user),
        string(&mut strings, b"qty"),
        string(&mut strings, qty.as_bytes()),
    ];
    let mut id = raw::RedisModuleStreamID { ms: 0, seq: 0 };
    let added = unsafe {
        raw::RedisModule_StreamAdd.unwrap()(
            key,
            raw::REDISMODULE_STREAM_ADD_AUTOID as c_int,
            &mut id,
            fields.as_mut_ptr(),
            (fields.len() / 2) as i64,
        )
    };
    if added != raw::REDISMODULE_OK as c_int {
        return Err("stream append failed");
    }
    let length = maxlen.map(|n| unsafe {
        raw::RedisModule_StreamTrimByLength.unwrap()(key, raw::REDISMODULE_STREAM_TRIM_APPROX as c_int, n as c_longlong);
        raw::RedisModule_ValueLength.unwrap()(key) as c_longlong
    });

    let mut id_text = Digits::default();
    id_text.push_u64(id.ms);
    id_text.push(b'-');
    id_text.push_u64(id.seq);
    let (idp, idl) = (id_text.as_bytes().as_ptr().cast::<c_char>(), id_text.as_bytes().len());
    let (fp, fl) = (fields.as_mut_ptr(), fields.len());
    unsafe {
        let replicate = raw::RedisModule_Replicate.unwrap();
        match length {
            Some(n) => replicate(ctx.ctx, c"XADD".as_ptr(), c"scclbv".as_ptr(), name, c"MAXLEN".as_ptr(), c"=".as_ptr(), n, idp, idl, fp, fl),
            None => replicate(ctx.ctx, c"XADD".as_ptr(), c"sbv".as_ptr(), name, idp, idl, fp, fl),
        };
        raw::RedisModule_SignalModifiedKey.unwrap()(ctx.ctx, name);
        raw::RedisModule_NotifyKeyspaceEvent.unwrap()(ctx.ctx, raw::REDISMODULE_NOTIFY_STREAM, c"xadd".as_ptr(), name);
    }
    Ok(())
}
