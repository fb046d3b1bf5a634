//! `RedisModule_SetCommandInfo` and `RedisModule_SetCommandACLCategories`
//! (the crate's `#[command]` macro needs the 7.2 ACL-category API, which
//! 7.0 lacks): a command's arity, summary and key-specs, and its ACL
//! categories, from plain descriptions.

use std::ffi::CStr;
use std::os::raw::c_int;

use redis_module::raw::{self, RedisModuleCommandKeySpec as KeySpec};
use redis_module::Context;

/// Where a key-spec's search begins.
#[derive(Clone, Copy)]
pub enum Begin {
    /// The key at this argument.
    Index(c_int),
    /// The argument after this keyword, searched from argument `from`.
    Keyword(&'static CStr, c_int),
}

/// One key-spec: where its key is and its `REDISMODULE_CMD_KEY_*` flags
/// (one key found from the beginning).
#[derive(Clone, Copy)]
pub struct KeySpecDesc {
    pub begin: Begin,
    pub flags: u32,
}

fn key_spec(desc: KeySpecDesc) -> KeySpec {
    let mut spec: KeySpec = unsafe { std::mem::zeroed() };
    spec.flags = u64::from(desc.flags);
    match desc.begin {
        Begin::Index(pos) => {
            spec.begin_search_type = raw::RedisModuleKeySpecBeginSearchType_REDISMODULE_KSPEC_BS_INDEX;
            spec.bs.index.pos = pos;
        }
        Begin::Keyword(keyword, startfrom) => {
            spec.begin_search_type = raw::RedisModuleKeySpecBeginSearchType_REDISMODULE_KSPEC_BS_KEYWORD;
            spec.bs.keyword = raw::RedisModuleCommandKeySpec__bindgen_ty_1__bindgen_ty_2 { keyword: keyword.as_ptr(), startfrom };
        }
    }
    spec.find_keys_type = raw::RedisModuleKeySpecFindKeysType_REDISMODULE_KSPEC_FK_RANGE;
    spec.fk.range = raw::RedisModuleCommandKeySpec__bindgen_ty_2__bindgen_ty_1 { lastkey: 0, keystep: 1, limit: 0 };
    spec
}

/// What a server says to a call: done, refused, or it has no such API.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    Done,
    Refused,
    NoApi,
}

fn command(ctx: &Context, name: &CStr) -> Option<*mut raw::RedisModuleCommand> {
    let get_command = unsafe { raw::RedisModule_GetCommand }?;
    let cmd = unsafe { get_command(ctx.ctx, name.as_ptr()) };
    (!cmd.is_null()).then_some(cmd)
}

/// Sets arity, summary, `since` and key-specs of the registered command
/// `name` (Redis copies what it is given).
pub fn set_info(ctx: &Context, name: &CStr, arity: c_int, summary: &CStr, since: &CStr, keys: &[KeySpecDesc]) -> Outcome {
    let (Some(_), Some(set_info)) = (unsafe { raw::RedisModule_GetCommand }, unsafe { raw::RedisModule_SetCommandInfo }) else {
        return Outcome::NoApi;
    };
    let Some(cmd) = command(ctx, name) else {
        return Outcome::Refused;
    };
    let version = raw::RedisModuleCommandInfoVersion {
        version: 1,
        sizeof_historyentry: std::mem::size_of::<raw::RedisModuleCommandHistoryEntry>(),
        sizeof_keyspec: std::mem::size_of::<KeySpec>(),
        sizeof_arg: std::mem::size_of::<raw::RedisModuleCommandArg>(),
    };
    let mut key_specs: Vec<KeySpec> = keys.iter().map(|&k| key_spec(k)).collect();
    key_specs.push(unsafe { std::mem::zeroed() }); // the terminator
    let mut info: raw::RedisModuleCommandInfo = unsafe { std::mem::zeroed() };
    info.version = &version;
    info.summary = summary.as_ptr();
    info.since = since.as_ptr();
    info.arity = arity;
    info.key_specs = key_specs.as_mut_ptr();
    if unsafe { set_info(cmd, &info) } == raw::REDISMODULE_OK as c_int {
        Outcome::Done
    } else {
        Outcome::Refused
    }
}

/// Puts the registered command `name` into the ACL categories named
/// (space-separated). Must run inside OnLoad (the API refuses later calls).
pub fn set_categories(ctx: &Context, name: &CStr, categories: &CStr) -> Outcome {
    let (Some(_), Some(set)) = (unsafe { raw::RedisModule_GetCommand }, unsafe { raw::RedisModule_SetCommandACLCategories }) else {
        return Outcome::NoApi;
    };
    let Some(cmd) = command(ctx, name) else {
        return Outcome::Refused;
    };
    if unsafe { set(cmd, categories.as_ptr()) } == raw::REDISMODULE_OK as c_int {
        Outcome::Done
    } else {
        Outcome::Refused
    }
}
