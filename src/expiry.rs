//! Active hold expiry: a timer on every node that, on the master only,
//! releases the holds that ran out in the sales it tracks. Lazy expiry (any
//! write touching a sale) is the backstop.
//!
//! A sale is tracked by (db, key name) when it gets a hold, when it is loaded
//! or restored, when it is renamed, moved or copied, and across SWAPDB.

use std::collections::{HashMap, HashSet};
use std::sync::Mutex;
use std::time::Duration;

use redis_module::{Context, ContextFlags, NotifyEvent};

use crate::commit::{Committer, Origin};
use crate::datatype::SALE_TYPE;
use crate::effect::Effect;
use crate::rawapi;
use crate::sale::Sale;

/// How often the master looks for holds that ran out.
const PERIOD: Duration = Duration::from_millis(100);

static TRACKED: Mutex<Option<HashMap<i32, HashSet<Vec<u8>>>>> = Mutex::new(None);

fn with_tracked<T>(f: impl FnOnce(&mut HashMap<i32, HashSet<Vec<u8>>>) -> T) -> T {
    let mut guard = TRACKED.lock().unwrap_or_else(|p| p.into_inner());
    f(guard.get_or_insert_with(HashMap::new))
}

pub fn track(db: i32, key: &[u8]) {
    with_tracked(|t| {
        let keys = t.entry(db).or_default();
        if !keys.contains(key) {
            keys.insert(key.to_vec());
        }
    });
}

fn untrack(db: i32, key: &[u8]) {
    with_tracked(|t| {
        if let Some(keys) = t.get_mut(&db) {
            keys.remove(key);
        }
    });
}

pub fn tracked() -> usize {
    with_tracked(|t| t.values().map(HashSet::len).sum())
}

/// SWAPDB exchanges the databases' sales: exchange what is tracked too.
pub fn on_swapdb(first: i32, second: i32) {
    with_tracked(|t| {
        let a = t.remove(&first);
        let b = t.remove(&second);
        if let Some(a) = a {
            t.insert(second, a);
        }
        if let Some(b) = b {
            t.insert(first, b);
        }
    });
}

/// Whether this node may decide on its own: a master, not loading.
pub fn decides(ctx: &Context) -> bool {
    let flags = ctx.get_flags();
    flags.contains(ContextFlags::MASTER) && !flags.contains(ContextFlags::LOADING)
}

pub fn now_ms() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64)
}

/// Releases the holds of `sale` that ran out at `now_ms`, as one effect.
pub fn expire_due(c: &Committer, sale: &mut Sale, now_ms: u64) {
    if sale.next_deadline().is_none_or(|d| d > now_ms) {
        return;
    }
    let due = sale.due_holds(now_ms);
    if let Err(e) = c.commit(sale, &Effect::Expire(due)) {
        c.ctx.log_warning(&format!("seckill: hold expiry refused: {}", e.0));
    }
}

/// Starts the timer; it re-arms itself from its own callback, and does
/// nothing on replicas, so a promoted replica starts expiring at once.
pub fn start(ctx: &Context) {
    ctx.create_timer(PERIOD, tick, ());
}

fn tick(ctx: &Context, _: ()) {
    let guarded = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        if decides(ctx) {
            sweep(ctx);
        }
    }));
    if guarded.is_err() {
        crate::stats::PANICS.add(1);
    }
    ctx.create_timer(PERIOD, tick, ());
}

fn sweep(ctx: &Context) {
    let snapshot: Vec<(i32, Vec<u8>)> =
        with_tracked(|t| t.iter().flat_map(|(&db, keys)| keys.iter().map(move |k| (db, k.clone()))).collect());
    if snapshot.is_empty() {
        return;
    }
    let now = now_ms();
    for (db, name) in snapshot {
        if !rawapi::select_db(ctx, db) {
            untrack(db, &name);
            continue;
        }
        let key_name = ctx.create_string(name.as_slice());
        let key = ctx.open_key_writable(&key_name);
        let Ok(Some(sale)) = key.get_value::<Sale>(&SALE_TYPE) else {
            untrack(db, &name);
            continue;
        };
        let before = sale.remaining();
        let c = Committer { ctx, key: &key_name, origin: Origin::Master, stream: None };
        expire_due(&c, sale, now);
        c.notify_stock_edge(before, sale.remaining());
        if sale.next_deadline().is_none() {
            untrack(db, &name);
        }
    }
}

/// Keyspace events that bring a sale to a new name or a new server.
pub fn on_key_event(ctx: &Context, _kind: NotifyEvent, event: &str, key: &[u8]) {
    if !matches!(event, "loaded" | "restore" | "rename_to" | "move_to" | "copy_to") {
        return;
    }
    let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let name = ctx.create_string(key);
        let k = ctx.open_key(&name);
        if let Ok(Some(sale)) = k.get_value::<Sale>(&SALE_TYPE) {
            if sale.next_deadline().is_some() {
                track(rawapi::selected_db(ctx), key);
            }
        }
    }));
}
