//! Replies written straight through the module API (`ffi::reply`), so maps
//! keep the field order docs/commands.md gives (the crate's map values are
//! hashed or sorted). Under RESP2 a map is sent as a flat field/value array.

use std::ffi::CStr;

use redis_module::{Context, RedisResult, RedisValue};

use crate::module::ffi::reply as w;

use crate::rules::report::{Doc, Value};
use crate::wire::args::Format;

pub enum Reply {
    Null,
    Int(u64),
    Bulk(Vec<u8>),
    /// A status word: a simple string.
    Simple(&'static CStr),
    Array(Vec<Reply>),
    Map(Vec<(&'static str, Reply)>),
}

impl Reply {
    pub fn send(&self, ctx: &Context) {
        match self {
            Reply::Null => w::null(ctx),
            Reply::Int(n) => w::int(ctx, *n),
            Reply::Bulk(b) => w::bulk(ctx, b),
            Reply::Simple(s) => w::simple(ctx, s),
            Reply::Array(items) => {
                w::array(ctx, items.len());
                items.iter().for_each(|i| i.send(ctx));
            }
            Reply::Map(fields) => {
                w::map(ctx, fields.len());
                for (name, value) in fields {
                    w::bulk(ctx, name.as_bytes());
                    value.send(ctx);
                }
            }
        }
    }

    /// Sends the reply and tells the command wrapper it was sent.
    pub fn done(self, ctx: &Context) -> RedisResult {
        self.send(ctx);
        Ok(RedisValue::NoReply)
    }

    /// `[status, id or nil, n]` (RESERVE's reply), written directly: the
    /// hot path builds no reply tree.
    pub fn status_id_count(ctx: &Context, status: &CStr, id: Option<&[u8]>, n: u64) -> RedisResult {
        w::array(ctx, 3);
        w::simple(ctx, status);
        match id {
            Some(id) => w::bulk(ctx, id),
            None => w::null(ctx),
        }
        w::int(ctx, n);
        Ok(RedisValue::NoReply)
    }

    /// `[status, n]` (RELEASE and CONFIRM), written directly.
    pub fn status_count(ctx: &Context, status: &CStr, n: u64) -> RedisResult {
        w::array(ctx, 2);
        w::simple(ctx, status);
        w::int(ctx, n);
        Ok(RedisValue::NoReply)
    }

    /// A reply document as a RESP map (field/value pairs under RESP2), or
    /// with `FORMAT JSON` as one JSON string.
    pub fn doc(doc: Doc, format: Format) -> Reply {
        match format {
            Format::Resp => Reply::Map(doc.0.into_iter().map(|(name, v)| (name, Reply::value(v))).collect()),
            Format::Json => Reply::Bulk(doc.to_json()),
        }
    }

    fn value(v: Value) -> Reply {
        match v {
            Value::Int(n) => Reply::Int(n),
            Value::Text(b) => Reply::Bulk(b.into_vec()),
            Value::Word(w) => Reply::Simple(w),
            Value::List(items) => Reply::Array(items.into_iter().map(Reply::value).collect()),
            Value::Null => Reply::Null,
        }
    }
}
