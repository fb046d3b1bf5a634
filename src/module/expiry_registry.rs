//! Which sales have holds to expire, and when: the registry the expiry
//! timer (`expiry`) works through, in the order of the next deadline
//! (`Schedule`), so an idle sale costs nothing.
//!
//! A sale is scheduled when it gets its first hold (`Committer`), when it is
//! loaded or restored (`on_loaded`, from the type's RDB load), and when it
//! comes to a new name (RENAME, MOVE, COPY: `key_events`). None of these
//! opens the key: keyspace events must not touch the key's LRU/LFU or the
//! hit counters. The server's events keep the registry in step with the
//! data: SWAPDB (`on_swapdb`), a replica's asynchronous load (`on_async_load`)
//! and Valkey's atomic slot migration (`on_slot_migration`): a node
//! importing slots leaves their sales alone until it owns them, and a node
//! that gave slots away forgets their sales.

use std::sync::Mutex;

use crate::module::ffi::events::{AsyncLoad, SlotMigration};
use crate::rules::sale::Sale;
use crate::rules::schedule::Schedule;

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

/// The earliest deadline scheduled, if any.
pub fn next_deadline() -> Option<u64> {
    with_live(|s| s.next_deadline())
}

/// A sale was loaded (RDB, RESTORE, a replica's sync): schedule it. During
/// an asynchronous load the sale belongs to the dataset being loaded, which
/// replaces the live one only if the load completes.
///
/// A draw sale whose waitlist may have work is visited at once: the
/// master that saved it may have stopped a promotion's search at its bound
/// (`commit`), and nothing here remembers that.
pub fn on_loaded(db: i32, key: &[u8], sale: &Sale) {
    let deadline = if sale.waitlist_may_promote() { Some(0) } else { sale.next_deadline() };
    let Some(deadline) = deadline else {
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
    let slot = crate::wire::slot::key_slot(key);
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
pub fn next_due(now: u64) -> Option<(i32, Box<[u8]>)> {
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
