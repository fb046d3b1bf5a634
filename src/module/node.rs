//! This node: its clock, whether it decides on its own (a master, not
//! loading) or follows the effects of the node that does, and its
//! replication id (the fence's current id).

use std::sync::{Mutex, PoisonError};

use redis_module::{Context, ContextFlags};

use crate::rules::fence::ReplId;

/// Whether this node may decide on its own: a master, not loading.
pub fn decides(ctx: &Context) -> bool {
    let flags = ctx.get_flags();
    flags.contains(ContextFlags::MASTER) && !flags.contains(ContextFlags::LOADING)
}

/// The wall clock in milliseconds since the Unix epoch (0 before it).
pub fn now_ms() -> u64 {
    u64::try_from(crate::module::ffi::clock::milliseconds()).unwrap_or(0)
}

/// The server's replication id as last read (`refresh_replid`), for the
/// fence of FENCE sales (`rules::fence`). Written and read on Redis's main
/// thread only, so the lock is never contended; it holds a `ReplId`, valid
/// by construction, so a read is a copy (re-checking forty hex digits on
/// every RESERVE of a FENCE sale cost about 420 instructions). A plain sale
/// never reads it.
static REPLID: Mutex<ReplId> = Mutex::new(ReplId::ZERO);

/// The cached replication id (see `refresh_replid`): forty zeros before
/// the first refresh, or on a server whose INFO has no valid
/// `master_replid` (still one id, the same for INIT, UNFENCE and the checks).
pub fn replid() -> ReplId {
    *REPLID.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Reads `master_replid` from `INFO replication` into the cache, and
/// returns it. Called at module load, on the server events that change the
/// id (`ffi::events::on_replication_events`), and by INIT and UNFENCE, which
/// record it.
pub fn refresh_replid(ctx: &Context) -> ReplId {
    let read = ctx.server_info("replication").field("master_replid").and_then(|s| ReplId::parse(s.as_slice()));
    if let Some(id) = read {
        *REPLID.lock().unwrap_or_else(PoisonError::into_inner) = id;
    }
    replid()
}

/// After a server event that can change the replication id: the id now,
/// and once more when the event loop comes back, because a replica's full
/// sync announces its master link up before it takes its master's id
/// (Redis 7.0 `readSyncBulkPayload`), and no event follows that.
pub fn on_replication_event(ctx: &Context) {
    refresh_replid(ctx);
    ctx.create_timer(
        std::time::Duration::ZERO,
        |ctx, ()| {
            refresh_replid(ctx);
        },
        (),
    );
}
