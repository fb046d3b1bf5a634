//! Appending a sale's events to its Redis Stream through the module stream
//! API (`RedisModule_StreamAdd`), which is several times cheaper than
//! calling XADD through `RedisModule_Call`. The stream API does not
//! propagate, so the entry is replicated as an explicit
//! `XADD skey [MAXLEN = n] <id> field value ...`: the id the master gave it
//! and, after approximate trimming, the exact length it left (what Redis
//! itself propagates for `XADD ... MAXLEN ~`).

use std::ptr::null_mut;

use redis_module::{raw, CallOptionsBuilder, CallReply, CallResult, Context, ContextFlags};

use crate::module::ffi::stream_key::{StreamId, Trim};
use crate::module::ffi::strings::ModuleStrings;
use crate::rules::digits::Digits;
use crate::rules::sale::Sale;

pub use crate::module::ffi::stream_key::StreamKey;

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

/// Opens `stream` for this call (checked before the sale changes, then
/// appended to); an error if it holds something other than a stream.
pub fn open(ctx: &Context, stream: &[u8]) -> Result<StreamKey, &'static str> {
    let key = StreamKey::open(ctx, stream);
    if !key.is_stream_or_empty() {
        return Err("ERR the STREAM key holds a value that is not a stream");
    }
    Ok(key)
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
    let key = open(ctx, &stream.key)?;
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

/// An entry's field strings: constants where they can be, the others freed
/// with `strings`.
fn fields(strings: &mut ModuleStrings, entry: &Entry, qty: &mut Digits) -> Fields {
    qty.push_u64(entry.qty);
    let mut f = [null_mut(); 10];
    let names: [(&[u8], &[u8]); 4] = [(b"event", entry.event), (b"rid", entry.rid), (b"user", entry.user), (b"qty", qty.as_bytes())];
    let all = names.into_iter().chain(entry.via.map(|v| (&b"via"[..], v)));
    let mut n = 0;
    for (name, value) in all {
        f[n] = strings.word_or_add(name);
        f[n + 1] = strings.word_or_add(value);
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
) -> Result<(StreamId, Option<u64>), &'static str> {
    let id = stream.add(None, fields).ok_or("stream append failed")?;
    let length = maxlen.map(|n| {
        stream.trim(Trim::Approx, n);
        stream.len()
    });
    Ok((id, length))
}

fn id_text(id: StreamId) -> Digits {
    let mut text = Digits::default();
    text.push_u64(id.ms);
    text.push(b'-');
    text.push_u64(id.seq);
    text
}

/// Signals the stream key and sends the `xadd` keyspace event.
pub fn announce(ctx: &Context, stream: &StreamKey) {
    stream.announce(ctx);
}

/// The master's append for an entry that travels inside its effect: added
/// and trimmed here, replicated by the caller (not announced yet: see
/// `announce`).
pub fn append_unreplicated(stream: &StreamKey, maxlen: Option<u64>, entry: &Entry) -> Result<Added, &'static str> {
    let mut strings = ModuleStrings::with_capacity(4);
    let mut qty = Digits::default();
    let (mut f, n) = fields(&mut strings, entry, &mut qty);
    let (id, length) = add(stream, maxlen, &mut f[..n])?;
    Ok(Added { id: id_text(id), length })
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
    let mut strings = ModuleStrings::with_capacity(4);
    let mut qty = Digits::default();
    let (mut f, n) = fields(&mut strings, entry, &mut qty);
    if stream.add(Some(StreamId { ms, seq }), &mut f[..n]).is_none() {
        return Err("stream append with the master's id failed (the stream differs from the master's)");
    }
    if let Some(n) = length {
        stream.trim(Trim::Exact, n);
    }
    stream.announce(ctx);
    Ok(())
}

/// Appends `entry` to the stream (trimmed approximately to `maxlen`),
/// replicates it, signals the key and sends the `xadd` keyspace event.
pub fn append(ctx: &Context, stream: &StreamKey, maxlen: Option<u64>, entry: &Entry) -> Result<(), &'static str> {
    let mut strings = ModuleStrings::with_capacity(4);
    let mut qty = Digits::default();
    let (mut fields, n) = fields(&mut strings, entry, &mut qty);
    let fields = &mut fields[..n];
    let (id, length) = add(stream, maxlen, fields)?;
    stream.replicate_add(ctx, id_text(id).as_bytes(), length, fields);
    stream.announce(ctx);
    Ok(())
}
