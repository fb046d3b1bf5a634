//! Arity, key-specs and ACL categories for every command (set through
//! `ffi::command_info`). With them COMMAND INFO, COMMAND GETKEYS and cluster routing see
//! the STREAM key INIT names too, and `ACL CAT write`, `+@read` and the like
//! take in the module's commands where the server has the category API
//! (Redis 7.2+, Valkey 8+; on 7.0 an ACL names the commands one by one).

use std::ffi::CStr;
use std::os::raw::c_int;

use redis_module::{raw, Context};

use crate::module::ffi::command_info::{self as ffi, Begin, KeySpecDesc, Outcome};

/// How a command's keys are found in its arguments.
#[derive(Clone, Copy)]
pub enum Keys {
    /// The sale key at argument 1.
    Sale { write: bool },
    /// INIT: the sale key, and the key after the STREAM keyword.
    SaleAndStream,
    /// No key (SALES lists the node's sales from the module's own list).
    None,
}

/// What COMMAND INFO and the ACL say of a command (the table is
/// `commands::COMMANDS`): its name, arity (Redis's rule: exact, or at
/// least -arity when negative), keys, summary and ACL categories.
pub struct Info {
    pub name: &'static CStr,
    pub arity: c_int,
    pub keys: Keys,
    pub summary: &'static CStr,
    pub categories: &'static CStr,
}

fn specs(keys: Keys) -> Vec<KeySpecDesc> {
    let rw = raw::REDISMODULE_CMD_KEY_RW | raw::REDISMODULE_CMD_KEY_UPDATE;
    let ro = raw::REDISMODULE_CMD_KEY_RO | raw::REDISMODULE_CMD_KEY_ACCESS;
    let sale = |flags| KeySpecDesc { begin: Begin::Index(1), flags };
    match keys {
        Keys::Sale { write: true } => vec![sale(rw)],
        Keys::Sale { write: false } => vec![sale(ro)],
        Keys::None => Vec::new(),
        Keys::SaleAndStream => vec![
            sale(raw::REDISMODULE_CMD_KEY_OW | raw::REDISMODULE_CMD_KEY_UPDATE),
            // INIT only checks the stream's type; later writes append to it.
            KeySpecDesc { begin: Begin::Keyword(c"STREAM", 3), flags: raw::REDISMODULE_CMD_KEY_RO },
        ],
    }
}

/// Sets arity, summary and key-specs, and the ACL categories where the
/// server has `RedisModule_SetCommandACLCategories` (not on Redis 7.0).
/// Must run inside OnLoad (the category API refuses calls made later).
/// Servers without the command-info API keep the first/last/step from
/// registration.
pub fn register<'a>(ctx: &Context, commands: impl IntoIterator<Item = &'a Info>) -> bool {
    commands.into_iter().all(|&Info { name, arity, keys, summary, categories }| {
        if ffi::set_info(ctx, name, arity, summary, c"0.1.0", &specs(keys)) == Outcome::Refused {
            return false;
        }
        if ffi::set_categories(ctx, name, categories) == Outcome::Refused {
            ctx.log_warning(&format!("seckill: could not put {name:?} into the ACL categories {categories:?}"));
            return false;
        }
        true
    })
}
