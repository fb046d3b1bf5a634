//! This node: its clock, and whether it decides on its own (a master, not
//! loading) or follows the effects of the node that does.

use redis_module::{Context, ContextFlags};

/// Whether this node may decide on its own: a master, not loading.
pub fn decides(ctx: &Context) -> bool {
    let flags = ctx.get_flags();
    flags.contains(ContextFlags::MASTER) && !flags.contains(ContextFlags::LOADING)
}

/// The wall clock in milliseconds since the Unix epoch (0 before it).
pub fn now_ms() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64)
}
