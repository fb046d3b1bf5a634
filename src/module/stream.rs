//! Appending a sale's events to its Redis Stream through the module stream
//! API (`RedisModule_StreamAdd`), which is several times cheaper than
//! calling XADD through `RedisModule_Call`. The stream API does not
//! propagate, so the entry is replicated as an explicit
//! `XADD skey [MAXLEN = n] <id> field value ...`: the id the master gave it
//! and, after approximate trimming, the exact length it left (what Redis
//! itself propagates for `XADD ... MAXLEN ~`).

use std::os::raw::{c_char, c_int, c_longlong};
use std::ptr::null_mut;

use redis_module::{raw, CallOptionsBuilder, CallReply, CallResult, Context, ContextFlags};

use crate::module::rawapi::ModuleStrings;
use crate::rules::digits::Digits;
use crate::rules::sale::Sale;

/// One entry: `event <word> rid <id> user <user> qty <qty> [via <how>]`
/// (`via`: a draw sale's winner, `draw` or `waitlist`).
pub struct Entry<'a> {
    pub event: &'a [u8],
    pub rid: &'a [u8],
    pub user: &'a [u8],
    pub qty: u64,
    pub via: Option<&'a [u8]>,
}

/// An entry's field strings, and how many of them are used.
type Fields = ([*mut raw::RedisModuleString; 10], usize);

/// A constant if `bytes` is one, else a new string freed with `strings`.
fn string(strings: &mut ModuleStrings, bytes: &[u8]) -> *mut raw::RedisModuleString {
    crate::module::rawapi::constant(bytes).unwrap_or_else(|| strings.add(bytes))
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
pub const STREAM_AWAY: &str = "TRYAGAIN the sale's STREAM key is not on this node (slot migration in progress?); retry later";

/// Opens the stream of the sale at `name` for this call's appends (`None`:
/// the sale has no stream, or it is a copy under another name than the
/// one its stream belongs to: a backup never writes the live stream).
///
/// The stream key is not among a command's keys, so during a `MIGRATE`
/// slot migration Redis cannot redirect a command whose stream moved first
/// (or has not arrived yet). A missing stream while the slot is migrating
/// or importing refuses (TRYAGAIN) rather than start a second stream on
/// this node that the migration would then collide with; this holds for a
/// sale without reservations too (a worker's `XGROUP CREATE ... MKSTREAM`,
/// a REPLACEd round), whose stream exists all the same.
pub fn open_for_sale(ctx: &Context, name: &[u8], sale: &Sale) -> Result<Option<StreamKey>, &'static str> {
    let Some(stream) = sale.config().stream.as_ref().filter(|s| s.writes_from(name)) else {
        return Ok(None);
    };
    let key = StreamKey::open(ctx, &stream.key)?;
    if key.is_empty() && ctx.get_flags().contains(ContextFlags::CLUSTER) && slot_moving(ctx, crate::wire::slot::key_slot(&stream.key)) {
        return Err(STREAM_AWAY);
    }
    Ok(Some(key))
}

/// Whether `slot` is migrating or importing here. Asked only when a sale's
/// stream is missing in a cluster (its first append, or a migration), so
/// the `CLUSTER NODES` call costs nothing on the hot path. An unreadable
/// answer counts as moving: a retry is safe, a second stream is not.
fn slot_moving(ctx: &Context, slot: u16) -> bool {
    let opts = CallOptionsBuilder::new().errors_as_replies().build();
    let reply: CallResult = ctx.call_ext("CLUSTER", &opts, &["NODES"]);
    match reply {
        Ok(CallReply::String(s)) => crate::wire::slot::moving_in(s.as_bytes(), slot),
        Ok(CallReply::VerbatimString(s)) => s.as_parts().is_none_or(|(_, text)| crate::wire::slot::moving_in(text, slot)),
        _ => true,
    }
}

impl Drop for StreamKey {
    fn drop(&mut self) {
        unsafe {
            raw::RedisModule_CloseKey.unwrap()(self.key);
            raw::RedisModule_FreeString.unwrap()(null_mut(), self.name);
        }
    }
}

/// An entry's field strings: constants where they can be, the others freed
/// with `strings`.
fn fields(strings: &mut ModuleStrings, entry: &Entry, qty: &mut Digits) -> Fields {
    qty.push_u64(entry.qty);
    let mut f = [null_mut(); 10];
    let names: [(&[u8], &[u8]); 4] = [(b"event", entry.event), (b"rid", entry.rid), (b"user", entry.user), (b"qty", qty.as_bytes())];
    let all = names.into_iter().chain(entry.via.map(|v| (&b"via"[..], v)));
    let mut n = 0;
    for (name, value) in all {
        f[n] = string(strings, name);
        f[n + 1] = string(strings, value);
        n += 2;
    }
    (f, n)
}

/// Where an appended entry went: its id and, when trimmed, the exact length
/// the stream was left with.
pub struct Added {
    pub id: Digits,
    pub length: Option<u64>,
}

/// Adds `entry` (an automatic id) and trims approximately to `maxlen`,
/// without replicating: the caller carries the result inside its effect.
fn add(
    stream: &StreamKey,
    maxlen: Option<u64>,
    fields: &mut [*mut raw::RedisModuleString],
) -> Result<(raw::RedisModuleStreamID, Option<u64>), &'static str> {
    let mut id = raw::RedisModuleStreamID { ms: 0, seq: 0 };
    let added = unsafe {
        raw::RedisModule_StreamAdd.unwrap()(
            stream.key,
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
        raw::RedisModule_StreamTrimByLength.unwrap()(stream.key, raw::REDISMODULE_STREAM_TRIM_APPROX as c_int, n as c_longlong);
        raw::RedisModule_ValueLength.unwrap()(stream.key) as u64
    });
    Ok((id, length))
}

fn id_text(id: &raw::RedisModuleStreamID) -> Digits {
    let mut text = Digits::default();
    text.push_u64(id.ms);
    text.push(b'-');
    text.push_u64(id.seq);
    text
}

/// Signals the stream key and sends the `xadd` keyspace event.
pub fn announce(ctx: &Context, stream: &StreamKey) {
    unsafe {
        raw::RedisModule_SignalModifiedKey.unwrap()(ctx.ctx, stream.name);
        raw::RedisModule_NotifyKeyspaceEvent.unwrap()(ctx.ctx, raw::REDISMODULE_NOTIFY_STREAM, c"xadd".as_ptr(), stream.name);
    }
}

/// The master's append for an entry that travels inside its effect: added
/// and trimmed here, replicated by the caller (not announced yet: see
/// `announce`).
pub fn append_unreplicated(stream: &StreamKey, maxlen: Option<u64>, entry: &Entry) -> Result<Added, &'static str> {
    let mut strings = ModuleStrings(Vec::with_capacity(4));
    let mut qty = Digits::default();
    let (mut f, n) = fields(&mut strings, entry, &mut qty);
    let (id, length) = add(stream, maxlen, &mut f[..n])?;
    Ok(Added { id: id_text(&id), length })
}

/// A replica's (or AOF replay's) append of the entry the master carried in
/// its effect: the master's id, then an exact trim to the master's length,
/// as Redis replays `XADD key MAXLEN = n id ...`. Announced like XADD.
pub fn append_replayed(
    ctx: &Context,
    stream: &StreamKey,
    ms: u64,
    seq: u64,
    length: Option<u64>,
    entry: &Entry,
) -> Result<(), &'static str> {
    let mut strings = ModuleStrings(Vec::with_capacity(4));
    let mut qty = Digits::default();
    let (mut f, n) = fields(&mut strings, entry, &mut qty);
    let mut id = raw::RedisModuleStreamID { ms, seq };
    let added = unsafe { raw::RedisModule_StreamAdd.unwrap()(stream.key, 0, &mut id, f.as_mut_ptr(), (n / 2) as i64) };
    if added != raw::REDISMODULE_OK as c_int {
        return Err("stream append with the master's id failed (the stream differs from the master's)");
    }
    if let Some(n) = length {
        let n = c_longlong::try_from(n).unwrap_or(c_longlong::MAX);
        unsafe { raw::RedisModule_StreamTrimByLength.unwrap()(stream.key, 0, n) };
    }
    announce(ctx, stream);
    Ok(())
}

/// Appends `entry` to the stream (trimmed approximately to `maxlen`),
/// replicates it, signals the key and sends the `xadd` keyspace event.
pub fn append(ctx: &Context, stream: &StreamKey, maxlen: Option<u64>, entry: &Entry) -> Result<(), &'static str> {
    let mut strings = ModuleStrings(Vec::with_capacity(4));
    let name = stream.name;
    let mut qty = Digits::default();
    let (mut fields, n) = fields(&mut strings, entry, &mut qty);
    let fields = &mut fields[..n];
    let (id, length) = add(stream, maxlen, fields)?;
    let length = length.map(|n| n as c_longlong);
    let id_text = id_text(&id);
    let (idp, idl) = (id_text.as_bytes().as_ptr().cast::<c_char>(), id_text.as_bytes().len());
    let (fp, fl) = (fields.as_mut_ptr(), fields.len());
    unsafe {
        let replicate = raw::RedisModule_Replicate.unwrap();
        match length {
            Some(n) => {
                replicate(ctx.ctx, c"XADD".as_ptr(), c"scclbv".as_ptr(), name, c"MAXLEN".as_ptr(), c"=".as_ptr(), n, idp, idl, fp, fl)
            }
            None => replicate(ctx.ctx, c"XADD".as_ptr(), c"sbv".as_ptr(), name, idp, idl, fp, fl),
        };
    }
    announce(ctx, stream);
    Ok(())
}
