//! The node's list of sales (`SECKILL.SALES`): a catalog of sale names per
//! database (`rules::catalog`), kept in step with the data so the listing
//! never scans the keyspace.
//!
//! Where a sale comes to be: `Committer::init` (INIT, and its replayed
//! effect on replicas and in the AOF), the type's RDB load (an RDB or a
//! replica's full sync, RESTORE, DEBUG RELOAD), and `key_events` (RENAME,
//! MOVE, COPY). Where one goes: the type's unlink callback (DEL, UNLINK,
//! expiry and eviction, the old name of a RENAME or MOVE, a value written
//! over), FLUSHDB and FLUSHALL (`on_flush`, which a replica's full sync
//! runs too), and SWAPDB exchanges two databases' names. A replica's
//! asynchronous load fills a staged catalog that replaces the live one
//! when the load completes, as `expiry_registry` does. Whatever slips through
//! (a path a server version treats differently) is a stale name, dropped
//! when a listing finds no sale under it.

use std::sync::Mutex;

use redis_module::key::KeyFlags;
use redis_module::Context;

use crate::module::datatype::SALE_TYPE;
use crate::module::ffi::{self, events::AsyncLoad};
use crate::rules::catalog::Catalog;
use crate::rules::sale::Sale;

struct Catalogs {
    live: Catalog,
    staged: Option<Catalog>,
}

static CATALOGS: Mutex<Catalogs> = Mutex::new(Catalogs { live: Catalog::new(), staged: None });

fn lock() -> std::sync::MutexGuard<'static, Catalogs> {
    CATALOGS.lock().unwrap_or_else(|p| p.into_inner())
}

/// Names held (INFO's `seckill_sales_listed`): the sales, and any stale
/// name a listing has not visited yet.
pub fn listed() -> usize {
    lock().live.len()
}

/// A sale was created or came to this name.
pub fn on_created(db: i32, key: &[u8]) {
    lock().live.insert(db, key);
}

/// A sale was loaded (RDB, RESTORE, a replica's sync): during an
/// asynchronous load it belongs to the staged dataset.
pub fn on_loaded(db: i32, key: &[u8]) {
    let mut guard = lock();
    match guard.staged.as_mut() {
        Some(staged) => staged.insert(db, key),
        None => guard.live.insert(db, key),
    }
}

/// The sale's value left the keyspace under this name.
pub fn on_unlinked(db: i32, key: &[u8]) {
    lock().live.remove(db, key);
}

/// FLUSHDB (`db`) or FLUSHALL (-1).
pub fn on_flush(db: i32) {
    lock().live.clear((db >= 0).then_some(db));
}

pub fn on_swapdb(first: i32, second: i32) {
    lock().live.swap_dbs(first, second);
}

pub fn on_async_load(event: AsyncLoad) {
    let mut guard = lock();
    match event {
        AsyncLoad::Started => guard.staged = Some(Catalog::new()),
        AsyncLoad::Aborted => guard.staged = None,
        AsyncLoad::Completed => {
            if let Some(staged) = guard.staged.take() {
                guard.live = staged;
            }
        }
    }
}

/// Valkey's atomic slot migration gave slots away: their sales are gone.
pub fn forget(gone: impl Fn(&[u8]) -> bool) {
    lock().live.forget(gone);
}

/// A page of sales: each name with what the caller made of its sale, and
/// the name the next page starts at (`None`: the last page).
pub type Listed<T> = (Vec<(Box<[u8]>, T)>, Option<Box<[u8]>>);

/// A page of the selected database's sales from `from` on: each name that
/// holds a sale with what `each` makes of it, and where the next page
/// starts. The names are copied out before any key is opened (opening one
/// may expire it, and the unlink callback takes the lock); a name that
/// holds no sale is dropped. Keys are opened without touching LRU/LFU or
/// the hit counters.
pub fn page<T>(ctx: &Context, from: Option<&[u8]>, count: usize, mut each: impl FnMut(&Sale) -> T) -> Listed<T> {
    let db = ffi::keyspace::selected_db(ctx);
    let (names, next) = lock().live.page(db, from, count);
    let mut sales = Vec::with_capacity(names.len());
    let mut stale = Vec::new();
    for name in names {
        let key = ctx.open_key_with_flags(&ffi::args::key_name(ctx, &name), KeyFlags::NOTOUCH | KeyFlags::NOSTATS);
        match key.get_value::<Sale>(&SALE_TYPE) {
            Ok(Some(sale)) => sales.push((name, each(sale))),
            _ => stale.push(name),
        }
    }
    if !stale.is_empty() {
        let mut guard = lock();
        for name in &stale {
            guard.live.remove(db, name);
        }
    }
    (sales, next)
}
