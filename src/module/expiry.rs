//! Active hold expiry: a timer on every node that, on the master only,
//! releases the holds that ran out. Lazy expiry (any write touching a sale)
//! is the backstop.
//!
//! The timer visits sales in the order of their next deadline (`Schedule`),
//! so an idle sale costs nothing; it works within a time budget per tick
//! and releases holds in bounded chunks, so a million holds falling due at
//! once never stall the server; and it writes nothing while the server asks
//! modules to avoid replica traffic (CLIENT PAUSE WRITE, FAILOVER, a
//! SHUTDOWN waiting for replicas), catching up once writes resume.
//!
//! A sale is scheduled when it gets its first hold (`Committer`), when it is
//! loaded or restored (`on_loaded`, from the type's RDB load), and when it
//! comes to a new name (RENAME, MOVE, COPY). None of these opens the key:
//! keyspace events must not touch the key's LRU/LFU or the hit counters.
//!
//! Valkey's atomic slot migration (`on_slot_migration`): a node importing
//! slots leaves their sales alone until it owns them, and a node that gave
//! slots away forgets their sales.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use redis_module::key::KeyFlags;
use redis_module::{Context, ContextFlags, NotifyEvent};

use crate::module::commit::{Committer, Origin};
use crate::module::datatype::SALE_TYPE;
use crate::rules::effect::Effect;
use crate::module::rawapi::{self, AsyncLoad, SlotMigration};
use crate::rules::sale::Sale;
use crate::rules::schedule::Schedule;

/// How often the master looks for holds that ran out, at the most.
const PERIOD: Duration = Duration::from_millis(100);
/// Work per tick: like Redis's active expiry, the timer stops when its
/// budget is spent and comes back soon, so clients are served in between.
const BUDGET: Duration = Duration::from_millis(2);
/// How soon the timer comes back when its budget ran out with work left.
const BEHIND: Duration = Duration::from_millis(2);
/// Holds released by one effect. It bounds one replicated command, and the
/// overrun of a tick past its budget.
pub const TIMER_CHUNK: usize = 128;
/// Holds a command releases lazily before its own work; the timer does the
/// rest.
pub const LAZY_CHUNK: usize = 128;

struct Schedules {
    live: Schedule,
    /// While a replica loads a new dataset beside the live one
    /// (`repl-diskless-load swapdb`): the new dataset's sales.
    staged: Option<Schedule>,
    /// Slot ranges a Valkey atomic slot migration is importing into this
    /// node (usually none).
    importing: Vec<(u16, u16)>,
    /// Sales that came due while their slot was importing: visited once the
    /// import ends.
    parked: Vec<(i32, Box<[u8]>)>,
}

static SCHEDULES: Mutex<Schedules> =
    Mutex::new(Schedules { live: Schedule::new(), staged: None, importing: Vec::new(), parked: Vec::new() });

fn lock() -> std::sync::MutexGuard<'static, Schedules> {
    SCHEDULES.lock().unwrap_or_else(|p| p.into_inner())
}

fn with_live<T>(f: impl FnOnce(&mut Schedule) -> T) -> T {
    f(&mut lock().live)
}

/// Visits the sale at `key` in `db` at `deadline` (or earlier, if it is
/// already due to be visited earlier).
pub fn schedule(db: i32, key: &[u8], deadline: u64) {
    with_live(|s| s.schedule(db, key, deadline));
}

/// Sales scheduled for a visit (INFO).
pub fn tracked() -> usize {
    let guard = lock();
    guard.live.len() + guard.parked.len()
}

/// A sale was loaded (RDB, RESTORE, a replica's sync): schedule it. During
/// an asynchronous load the sale belongs to the dataset being loaded, which
/// replaces the live one only if the load completes.
pub fn on_loaded(db: i32, key: &[u8], sale: &Sale) {
    let Some(deadline) = sale.next_deadline() else {
        return;
    };
    let mut guard = lock();
    match guard.staged.as_mut() {
        Some(staged) => staged.schedule(db, key, deadline),
        None => guard.live.schedule(db, key, deadline),
    }
}

pub fn on_async_load(event: AsyncLoad) {
    let mut guard = lock();
    match event {
        AsyncLoad::Started => guard.staged = Some(Schedule::new()),
        AsyncLoad::Aborted => guard.staged = None,
        AsyncLoad::Completed => {
            if let Some(staged) = guard.staged.take() {
                guard.live = staged;
            }
        }
    }
}

fn in_ranges(ranges: &[(u16, u16)], key: &[u8]) -> bool {
    let slot = crate::rules::slot::key_slot(key);
    ranges.iter().any(|&(start, end)| (start..=end).contains(&slot))
}

/// Valkey's atomic slot migration (`CLUSTER MIGRATESLOTS`). While this node
/// imports slots, their sales arrive as the source's effects over the
/// migration's link, as a replica gets its master's: the source still
/// decides. An expiry here would be a second decision (the source's own
/// EXPIRE of that hold would then be refused, which fails the migration),
/// so the timer parks those sales until the import ends: completed (this
/// node owns them now and expires their holds) or aborted (Valkey deletes
/// them; the visit finds nothing and drops them). A node that exported
/// slots forgets their sales: Valkey deletes them there.
pub fn on_slot_migration(phase: SlotMigration, ranges: &[(u16, u16)]) {
    let mut guard = lock();
    let s = &mut *guard;
    match phase {
        SlotMigration::ImportStarted => s.importing.extend_from_slice(ranges),
        SlotMigration::ImportCompleted | SlotMigration::ImportAborted => {
            for range in ranges {
                if let Some(i) = s.importing.iter().position(|r| r == range) {
                    s.importing.swap_remove(i);
                }
            }
            for (db, key) in std::mem::take(&mut s.parked) {
                if in_ranges(&s.importing, &key) {
                    s.parked.push((db, key));
                } else {
                    s.live.schedule(db, &key, 0);
                }
            }
        }
        SlotMigration::ExportCompleted => {
            s.live.forget(|_, key| in_ranges(ranges, key));
        }
        SlotMigration::ExportStarted | SlotMigration::ExportAborted => {}
    }
}

/// The next sale due at `now` that this node may expire; sales in slots
/// being imported are parked on the way (`on_slot_migration`).
fn next_due(now: u64) -> Option<(i32, Box<[u8]>)> {
    let mut guard = lock();
    let s = &mut *guard;
    loop {
        let (db, key) = s.live.pop_due(now)?;
        if s.importing.is_empty() || !in_ranges(&s.importing, &key) {
            return Some((db, key));
        }
        s.parked.push((db, key));
    }
}

/// SWAPDB exchanges the databases' sales: exchange what is scheduled too.
pub fn on_swapdb(first: i32, second: i32) {
    with_live(|s| s.swap_dbs(first, second));
}

/// The old name of a key being renamed: Redis sends `rename_from` (old
/// name) right before `rename_to` (new name), in the same command.
static RENAMING: Mutex<Option<Vec<u8>>> = Mutex::new(None);

/// Keyspace events that bring a sale to a new name: visit the name at the
/// next tick (the timer finds out whether it holds a sale). A RENAME also
/// carries the sale's stream ownership to the new name; every replica and
/// AOF replay runs the same RENAME, so they follow it too.
pub fn on_key_event(ctx: &Context, _kind: NotifyEvent, event: &str, key: &[u8]) {
    if event == "rename_from" {
        *RENAMING.lock().unwrap_or_else(|p| p.into_inner()) = Some(key.to_vec());
        return;
    }
    if event == "rename_to" {
        if let Some(from) = RENAMING.lock().unwrap_or_else(|p| p.into_inner()).take() {
            crate::module::datatype::follow_rename(ctx, &from, key);
        }
    }
    if matches!(event, "rename_to" | "move_to" | "copy_to") {
        schedule(rawapi::selected_db(ctx), key, 0);
    }
}

/// Whether this node may decide on its own: a master, not loading.
pub fn decides(ctx: &Context) -> bool {
    let flags = ctx.get_flags();
    flags.contains(ContextFlags::MASTER) && !flags.contains(ContextFlags::LOADING)
}

pub fn now_ms() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64)
}

/// Releases at most `max` holds of `sale` that ran out at `now_ms`, as one
/// effect, oldest first.
pub fn expire_due(c: &Committer, sale: &mut Sale, now_ms: u64, max: usize) {
    if sale.next_deadline().is_none_or(|d| d > now_ms) {
        return;
    }
    let due = sale.due_holds(now_ms, max);
    if let Err(e) = c.commit(sale, &Effect::Expire(due)) {
        crate::module::warn::limited(c.ctx, &format!("seckill: hold expiry refused: {}", e.0));
    }
}

/// Starts the timer; it re-arms itself from its own callback (stopping a
/// timer from inside it is unsafe on 7.0), and writes nothing on replicas,
/// so a promoted replica starts expiring at once.
pub fn start(ctx: &Context) {
    ctx.create_timer(PERIOD, tick, ());
}

fn tick(ctx: &Context, _: ()) {
    let next = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        // Paused writes: a write now would be propagated while clients
        // are paused, which Redis and Valkey abort on.
        if !decides(ctx) || ctx.avoid_replication_traffic() {
            return PERIOD;
        }
        sweep(ctx)
    }));
    let next = next.unwrap_or_else(|_| {
        crate::module::stats::PANICS.add(1);
        PERIOD
    });
    ctx.create_timer(next, tick, ());
}

/// Visits the due sales, earliest deadline first, until the budget is
/// spent. Returns when to come back.
fn sweep(ctx: &Context) -> Duration {
    let started = Instant::now();
    let now = now_ms();
    while let Some((db, key)) = next_due(now) {
        visit(ctx, db, &key, now);
        if started.elapsed() >= BUDGET {
            return BEHIND;
        }
    }
    match with_live(|s| s.next_deadline()) {
        Some(at) => Duration::from_millis(at.saturating_sub(now)).clamp(Duration::from_millis(1), PERIOD),
        None => PERIOD,
    }
}

/// Releases one chunk of the sale's due holds and schedules its next visit;
/// forgets a key that no longer holds a sale with holds.
fn visit(ctx: &Context, db: i32, key: &[u8], now: u64) {
    if !rawapi::select_db(ctx, db) {
        return;
    }
    let name = ctx.create_string(key);
    // An expiry visit is not an access: it leaves LRU/LFU and stats alone.
    let k = ctx.open_key_writable_with_flags(&name, KeyFlags::NOTOUCH | KeyFlags::NOSTATS);
    let Ok(Some(sale)) = k.get_value::<Sale>(&SALE_TYPE) else {
        return;
    };
    crate::module::stats::EXPIRY_VISITS.add(1);
    let stream = match crate::module::stream::open_for_sale(ctx, key, sale) {
        Ok(stream) => stream,
        Err(_) => {
            // The stream is not here (a slot migration): try again later
            // rather than start a second stream on this node.
            schedule(db, key, now.saturating_add(PERIOD.as_millis() as u64));
            return;
        }
    };
    let before = sale.remaining();
    let c = Committer { ctx, key: &name, origin: Origin::Master, stream: stream.as_ref() };
    expire_due(&c, sale, now, TIMER_CHUNK);
    c.notify_stock_edge(before, sale.remaining());
    if let Some(deadline) = sale.next_deadline() {
        schedule(db, key, deadline);
    }
}
