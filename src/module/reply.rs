//! Replies written straight through the module API, so maps keep the field
//! order docs/commands.md gives (the crate's map values are hashed or sorted).
//! Under RESP2 a map is sent as a flat field/value array.

use std::ffi::CStr;
use std::os::raw::{c_char, c_long};

use redis_module::{raw, Context, RedisResult, RedisValue};

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
        let c = ctx.ctx;
        match self {
            Reply::Null => {
                raw::reply_with_null(c);
            }
            Reply::Int(n) => {
                raw::reply_with_long_long(c, i64::try_from(*n).unwrap_or(i64::MAX));
            }
            Reply::Bulk(b) => {
                raw::reply_with_string_buffer(c, b.as_ptr().cast::<c_char>(), b.len());
            }
            Reply::Simple(s) => {
                raw::reply_with_simple_string(c, s.as_ptr());
            }
            Reply::Array(items) => {
                raw::reply_with_array(c, items.len() as c_long);
                items.iter().for_each(|i| i.send(ctx));
            }
            Reply::Map(fields) => {
                raw::reply_with_map(c, fields.len() as c_long);
                for (name, value) in fields {
                    raw::reply_with_string_buffer(c, name.as_ptr().cast::<c_char>(), name.len());
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
        let c = ctx.ctx;
        raw::reply_with_array(c, 3);
        raw::reply_with_simple_string(c, status.as_ptr());
        match id {
            Some(id) => raw::reply_with_string_buffer(c, id.as_ptr().cast::<c_char>(), id.len()),
            None => raw::reply_with_null(c),
        };
        raw::reply_with_long_long(c, i64::try_from(n).unwrap_or(i64::MAX));
        Ok(RedisValue::NoReply)
    }

    /// `[status, n]` (RELEASE and CONFIRM), written directly.
    pub fn status_count(ctx: &Context, status: &CStr, n: u64) -> RedisResult {
        let c = ctx.ctx;
        raw::reply_with_array(c, 2);
        raw::reply_with_simple_string(c, status.as_ptr());
        raw::reply_with_long_long(c, i64::try_from(n).unwrap_or(i64::MAX));
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
