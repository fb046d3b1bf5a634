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
enum Keys {
    /// The sale key at argument 1.
    Sale { write: bool },
    /// INIT: the sale key, and the key after the STREAM keyword.
    SaleAndStream,
    /// No key (SALES lists the node's sales from the module's own list).
    None,
}

/// Whether the command takes no key (registered with no first key).
pub fn is_keyless(name: &CStr) -> bool {
    COMMANDS.iter().any(|&(n, _, keys, _, _)| n == name && matches!(keys, Keys::None))
}

/// Name, arity, keys, summary, and the standard ACL categories. Cost, not
/// role, picks `fast` or `slow`: `fast` is bounded work (a RESERVE expires
/// at most 128 holds and visits at most 1024 buckets), `slow` grows with
/// the sale (INIT ... REPLACE frees every record, RECONCILE walks the
/// ledger). EFFECT, which only the replication link and loading run, is
/// `admin dangerous` and not `write`: `+@write` must not grant it.
const COMMANDS: [(&CStr, c_int, Keys, &CStr, &CStr); 15] = [
    (c"seckill.init", -3, Keys::SaleAndStream, c"Create a sale (or start a new round with REPLACE).", c"write slow"),
    (c"seckill.reserve", -3, Keys::Sale { write: true }, c"Reserve stock for a user.", c"write fast"),
    (c"seckill.release", 3, Keys::Sale { write: true }, c"Release a pending reservation.", c"write fast"),
    (c"seckill.confirm", 3, Keys::Sale { write: true }, c"Confirm a pending reservation.", c"write fast"),
    (
        c"seckill.reconcile",
        -2,
        Keys::Sale { write: true },
        c"Compare the sale with the order ledger; EXPIRE or APPLY fix it.",
        c"write slow",
    ),
    (c"seckill.info", -2, Keys::Sale { write: false }, c"Report on a sale.", c"read fast"),
    (c"seckill.get", -3, Keys::Sale { write: false }, c"Show one reservation.", c"read fast"),
    (c"seckill.effect", -3, Keys::Sale { write: true }, c"Internal: apply a replicated effect.", c"admin slow dangerous"),
    // The peer is a key name but not a key of this call: it usually lives
    // on another node, and the command never opens it.
    (c"seckill.send", -4, Keys::Sale { write: true }, c"Move remaining stock towards a peer key of a split sale.", c"write fast"),
    (c"seckill.recv", -4, Keys::Sale { write: true }, c"Credit what a peer key has sent, by cumulative total.", c"write fast"),
    // Draw sales. DRAW's work is bounded by COUNT (up to 1000 winners and
    // 4000 entrants looked at), ENTRANTS' by its COUNT (up to 1000): slow.
    (c"seckill.enter", -3, Keys::Sale { write: true }, c"Register a user for a draw sale.", c"write fast"),
    (c"seckill.draw", -2, Keys::Sale { write: true }, c"Draw winners of a draw sale, COUNT at a time.", c"write slow"),
    (c"seckill.entrants", -3, Keys::Sale { write: false }, c"Page through a draw sale's entrants.", c"read slow"),
    // The fence (after a failover or restart): lifted once the ledger is applied.
    (c"seckill.unfence", 2, Keys::Sale { write: true }, c"Lift a sale's fence: record the server's replication id.", c"write fast"),
    // The node's sales, COUNT (up to 1000) names a page: slow, as
    // ENTRANTS; keyless, so a cluster client sends it to each node.
    (c"seckill.sales", -2, Keys::None, c"Page through this node's sales (the selected database).", c"read slow"),
];

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
pub fn register(ctx: &Context) -> bool {
    COMMANDS.iter().all(|&(name, arity, keys, summary, categories)| {
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
