//! The SECKILL.* commands: one table (name, handler, flags, arity, keys,
//! summary, ACL categories) from which registration, COMMAND INFO and
//! COMMAND DOCS, and the key-specs are made (docs/commands.md opens with
//! the same table, held to it by tests/integration/test_contract.py).
//!
//! A handler parses, opens the key, lets the sale decide, commits the
//! effects and replies; each runs behind `dispatch`, so a panic becomes an
//! error reply instead of aborting Redis. The handlers by family: `sale`
//! (INIT, INFO, GET, SALES), `settle` (RESERVE, RELEASE, CONFIRM),
//! `reconcile` (RECONCILE, UNFENCE), `split` (SEND, RECV), `draw` (ENTER,
//! DRAW, ENTRANTS), `effect` (EFFECT); `call` holds what they share (arrows
//! point from the families to `call`, never back).

use std::ffi::CStr;
use std::mem::ManuallyDrop;
use std::os::raw::c_int;
use std::panic::{catch_unwind, AssertUnwindSafe};

use redis_module::{raw, Context, RedisError, RedisResult, RedisString};

use crate::module::command_info::{Info, Keys};
use crate::module::ffi;
use crate::module::stats;

mod call;
mod draw;
mod effect;
mod reconcile;
mod sale;
mod settle;
mod split;

use call::Call;

type Handler = fn(&Context, &Call) -> RedisResult;

/// A command as registered: its entry point (which runs its handler
/// behind `dispatch`), its flags for `RedisModule_CreateCommand`, and what
/// COMMAND INFO says of it.
pub struct Command {
    pub entry: ffi::args::CommandFn,
    pub flags: &'static CStr,
    pub info: Info,
}

/// Redis's arity rule: `n` arguments exactly (the name included), or at
/// least `-n` when negative.
fn arity_fits(arity: c_int, argc: usize) -> bool {
    let n = arity.unsigned_abs() as usize;
    if arity < 0 {
        argc >= n
    } else {
        argc == n
    }
}

/// Runs a handler on the arguments as Redis passed them, read in place (no
/// retained copies, no vector on the heap for a usual call), and turns a
/// panic into an error reply. The commands are registered through the raw
/// API (`COMMANDS`) for this: the crate's own wrapper copies the arguments
/// into a vector first, a measurable share of a RESERVE (`make bench`).
fn dispatch(ctx: *mut raw::RedisModuleCtx, argv: *mut *mut raw::RedisModuleString, argc: c_int, arity: c_int, handler: Handler) -> c_int {
    let context = Context::new(ctx);
    let strings = ffi::args::command_args(argv, argc);
    let result = match catch_unwind(AssertUnwindSafe(|| run(&context, strings, arity, handler))) {
        Ok(result) => result,
        Err(_) => {
            stats::PANICS.add(1);
            Err(RedisError::Str("ERR seckill internal error: the command was aborted"))
        }
    };
    context.reply(result) as c_int
}

fn run(ctx: &Context, strings: &[*mut raw::RedisModuleString], arity: c_int, handler: Handler) -> RedisResult {
    // Redis checks the arity set from the table (`command_info`) before
    // calling; checked here too, so no handler indexes past its arguments.
    let [_, name, ..] = strings else {
        return Err(RedisError::WrongArity);
    };
    if !arity_fits(arity, strings.len()) {
        return Err(RedisError::WrongArity);
    }
    // Redis owns the argument strings for the call: borrowed, never freed here.
    let name = ManuallyDrop::new(RedisString::from_redis_module_string(ctx.ctx, *name));
    // Most calls have a handful of arguments: keep their slices on the
    // stack. Eight hold RESERVE's longest form and a replica's PENDING
    // effect with its stream entry; every slot is written on every call
    // (two stores each), so a larger array costs every RESERVE more.
    let mut stack: [&[u8]; 8] = [&[]; 8];
    let heap: Vec<&[u8]>;
    let argv: &[&[u8]] = if strings.len() <= stack.len() {
        for (slot, &s) in stack.iter_mut().zip(strings) {
            *slot = ffi::args::bytes_of(s);
        }
        &stack[..strings.len()]
    } else {
        heap = strings.iter().map(|&s| ffi::args::bytes_of(s)).collect();
        &heap
    };
    handler(ctx, &Call { key: &name, argv, strings })
}

/// The table: name => handler, flags, arity, keys, summary, ACL
/// categories.
macro_rules! commands {
    ($($name:literal => $body:path, $flags:literal, $arity:literal, $keys:expr, $summary:literal, $categories:literal;)*) => {
        pub const COMMANDS: &[Command] = &[
            $(Command {
                entry: {
                    extern "C" fn entry(ctx: *mut raw::RedisModuleCtx, argv: *mut *mut raw::RedisModuleString, argc: c_int) -> c_int {
                        dispatch(ctx, argv, argc, $arity, $body)
                    }
                    entry
                },
                flags: $flags,
                info: Info { name: $name, arity: $arity, keys: $keys, summary: $summary, categories: $categories },
            }),*
        ];
    };
}

const WRITE: Keys = Keys::Sale { write: true };
const READ: Keys = Keys::Sale { write: false };

// Cost, not role, picks `fast` or `slow`: `fast` is bounded work (a
// RESERVE expires at most 128 holds and visits at most 1024 buckets),
// `slow` grows with the sale (INIT ... REPLACE frees every record,
// RECONCILE walks the ledger). EFFECT, which only the replication link and
// loading run, is `admin dangerous` and not `write`: `+@write` must not
// grant it.
commands! {
    c"seckill.init" => sale::init, c"write deny-oom", -3, Keys::SaleAndStream,
        c"Create a sale (or start a new round with REPLACE).", c"write slow";
    c"seckill.reserve" => settle::reserve, c"write deny-oom", -3, WRITE, c"Reserve stock for a user.", c"write fast";
    c"seckill.release" => settle::release, c"write", 3, WRITE, c"Release a pending reservation.", c"write fast";
    c"seckill.confirm" => settle::confirm, c"write", 3, WRITE, c"Confirm a pending reservation.", c"write fast";
    c"seckill.reconcile" => reconcile::reconcile, c"write", -2, WRITE,
        c"Compare the sale with the order ledger; EXPIRE or APPLY fix it.", c"write slow";
    c"seckill.info" => sale::info, c"readonly", -2, READ, c"Report on a sale.", c"read fast";
    c"seckill.get" => sale::get, c"readonly", -3, READ, c"Show one reservation.", c"read fast";
    c"seckill.effect" => effect::effect, c"write", -3, WRITE, c"Internal: apply a replicated effect.", c"admin slow dangerous";
    // SEND starts a transfer: refused under memory pressure like any write
    // that can wait. RECV completes one: refusing it would leave units in
    // flight (unusable) while the pressure lasts, and it allocates at most
    // one peer entry. The peer is a key name but not a key of this call:
    // it usually lives on another node, and the command never opens it.
    c"seckill.send" => split::send, c"write deny-oom", -4, WRITE,
        c"Move remaining stock towards a peer key of a split sale.", c"write fast";
    c"seckill.recv" => split::recv, c"write", -4, WRITE, c"Credit what a peer key has sent, by cumulative total.", c"write fast";
    // Draw sales. DRAW's work is bounded by COUNT (up to 1000 winners and
    // 4000 entrants looked at), ENTRANTS' by its COUNT (up to 1000): slow.
    c"seckill.enter" => draw::enter, c"write deny-oom", -3, WRITE, c"Register a user for a draw sale.", c"write fast";
    c"seckill.draw" => draw::draw, c"write deny-oom", -2, WRITE, c"Draw winners of a draw sale, COUNT at a time.", c"write slow";
    c"seckill.entrants" => draw::entrants, c"readonly", -3, READ, c"Page through a draw sale's entrants.", c"read slow";
    // The fence (after a failover or restart): lifted once the ledger is applied.
    c"seckill.unfence" => reconcile::unfence, c"write", 2, WRITE,
        c"Lift a sale's fence: record the server's replication id.", c"write fast";
    // The node's sales, COUNT (up to 1000) names a page: slow, as
    // ENTRANTS; keyless, so a cluster client sends it to each node.
    c"seckill.sales" => sale::sales, c"readonly", -2, Keys::None,
        c"Page through this node's sales (the selected database).", c"read slow";
}
