//! The module's entry point: options, commands, events and the timer are
//! set up when Redis loads the module.

use redis_module::{redis_module, Context, ModuleOptions, RedisString, Status};

use crate::module::commands::COMMANDS;
use crate::module::datatype::SALE_TYPE;

/// `VALKEYMODULE_OPTIONS_HANDLE_ATOMIC_SLOT_MIGRATION` (valkeymodule.h, Valkey 9.0+).
const HANDLE_ATOMIC_SLOT_MIGRATION: std::os::raw::c_int = 1 << 5;

fn init(ctx: &Context, args: &[RedisString]) -> Status {
    let argv: Vec<&[u8]> = args.iter().map(RedisString::as_slice).collect();
    if let Err(e) = crate::module::load_args::apply(&argv) {
        ctx.log_warning(&format!("seckill: {e}"));
        return Status::Err;
    }
    // A short or corrupt RDB payload becomes a load error, not a crash.
    // Keys are signalled as modified only when a command changed them.
    // A replica may load a new dataset beside the live one (the sales
    // loaded then are scheduled for expiry once that load completes).
    // Valkey 9 refuses CLUSTER MIGRATESLOTS (atomic slot migration)
    // unless every module declares it can take one:
    // VALKEYMODULE_OPTIONS_HANDLE_ATOMIC_SLOT_MIGRATION, (1 << 5), which
    // the crate does not name. Redis (its options end at bit 3, up to
    // 8.4) and Valkey 8 (bit 4) store the options and test only the bits
    // they define, so the bit is set on every server (loaded on Redis
    // 7.0.15 and 8.2.3, Valkey 8.1.8 and 9.1.2). What the claim takes:
    // `expiry_registry::on_slot_migration`, docs/resharding.md.
    ctx.set_module_options(
        ModuleOptions::HANDLE_IO_ERRORS
            | ModuleOptions::NO_IMPLICIT_SIGNAL_MODIFIED
            | ModuleOptions::HANDLE_REPL_ASYNC_LOAD
            | ModuleOptions::from_bits_retain(HANDLE_ATOMIC_SLOT_MIGRATION),
    );
    // The commands go through the raw API (`commands::dispatch` reads
    // their arguments in place); the crate's table is left empty.
    for c in COMMANDS {
        let keyless = matches!(c.info.keys, crate::module::command_info::Keys::None);
        if !crate::module::ffi::args::create_command(ctx, c.info.name, c.entry, c.flags, keyless) {
            ctx.log_warning(&format!("seckill: could not create command {:?}", c.info.name));
            return Status::Err;
        }
    }
    if !crate::module::ffi::info::register_info(ctx, "stats", crate::module::stats::info) {
        ctx.log_warning("seckill: could not register the INFO section");
        return Status::Err;
    }
    if !crate::module::command_info::register(ctx, COMMANDS.iter().map(|c| &c.info)) {
        ctx.log_warning("seckill: could not set command info (key-specs)");
        return Status::Err;
    }
    if !crate::module::ffi::events::on_swapdb(ctx, on_swapdb) {
        ctx.log_warning("seckill: could not subscribe to SWAPDB events");
    }
    if !crate::module::ffi::events::on_async_load(ctx, on_async_load) {
        ctx.log_warning("seckill: could not subscribe to asynchronous load events");
        return Status::Err;
    }
    // The list of sales forgets a flushed database's names at once (a
    // listing would drop them anyway, one page at a time).
    if !crate::module::ffi::events::on_flush(ctx, crate::module::sales::on_flush) {
        ctx.log_warning("seckill: could not subscribe to FLUSHDB events");
    }
    // Valkey 9's atomic slot migration: a target leaves the sales it
    // imports to the source until it owns them, a source forgets the
    // sales it gave away (`expiry_registry::on_slot_migration`). Only Valkey has
    // the event (Redis 8.4 uses its number for another one).
    let valkey = ctx.server_info("server").field("server_name").is_some_and(|n| n.as_slice() == b"valkey");
    if valkey && !crate::module::ffi::events::on_atomic_slot_migration(ctx, on_slot_migration) {
        ctx.log_verbose("seckill: no atomic slot migration events on this server (Valkey 9+ has them)");
    }
    // The fence's current id (`node::replid`): read now, and again after
    // each event that can change it.
    crate::module::node::refresh_replid(ctx);
    if !crate::module::ffi::events::on_replication_events(ctx, crate::module::node::on_replication_event) {
        ctx.log_warning("seckill: could not subscribe to replication events (the fence needs them)");
        return Status::Err;
    }
    crate::module::expiry::start(ctx);
    Status::Ok
}

/// The registries that follow the data: the expiry schedule and the list
/// of sales.
fn on_swapdb(first: i32, second: i32) {
    crate::module::expiry_registry::on_swapdb(first, second);
    crate::module::sales::on_swapdb(first, second);
}

fn on_async_load(event: crate::module::ffi::events::AsyncLoad) {
    crate::module::expiry_registry::on_async_load(event);
    crate::module::sales::on_async_load(event);
}

fn on_slot_migration(phase: crate::module::ffi::events::SlotMigration, ranges: &[(u16, u16)]) {
    crate::module::expiry_registry::on_slot_migration(phase, ranges);
    if phase == crate::module::ffi::events::SlotMigration::ExportCompleted {
        crate::module::sales::forget(|key| {
            let slot = crate::wire::slot::key_slot(key);
            ranges.iter().any(|&(start, end)| (start..=end).contains(&slot))
        });
    }
}

redis_module! {
    name: "seckill",
    // MODULE LIST's `ver`: Cargo.toml's version as major*10000+minor*100+patch
    // (1.3.0 -> 10300), as RedisJSON and RediSearch encode theirs.
    version: 10400,
    allocator: (redis_module::alloc::RedisAlloc, redis_module::alloc::RedisAlloc),
    data_types: [SALE_TYPE],
    init: init,
    event_handlers: [
        [@GENERIC: crate::module::key_events::on_key_event],
    ],
}
