//! Keyspace events that bring a sale to a new name (RENAME, MOVE, COPY):
//! the name is scheduled for a visit at the next tick (the timer finds out
//! whether it holds a sale), and a RENAME carries the sale's stream
//! ownership to the new name. Every replica and AOF replay runs the same
//! RENAME, so they follow it too.

use std::sync::Mutex;

use redis_module::key::KeyFlags;
use redis_module::{Context, NotifyEvent};

use crate::module::datatype::SALE_TYPE;
use crate::module::rawapi;
use crate::module::schedules;
use crate::rules::sale::Sale;

/// The old name of a key being renamed: Redis sends `rename_from` (old
/// name) right before `rename_to` (new name), in the same command.
static RENAMING: Mutex<Option<Vec<u8>>> = Mutex::new(None);

/// The handler of every generic keyspace event (`registration`).
pub fn on_key_event(ctx: &Context, _kind: NotifyEvent, event: &str, key: &[u8]) {
    if event == "rename_from" {
        *RENAMING.lock().unwrap_or_else(|p| p.into_inner()) = Some(key.to_vec());
        return;
    }
    if event == "rename_to" {
        if let Some(from) = RENAMING.lock().unwrap_or_else(|p| p.into_inner()).take() {
            follow_rename(ctx, &from, key);
        }
    }
    if matches!(event, "rename_to" | "move_to" | "copy_to") {
        schedules::schedule(rawapi::selected_db(ctx), key, 0);
    }
}

/// A RENAME moved the key `from` to `to`: if `to` holds a sale, its stream
/// ownership follows (`Sale::follow_rename`). Opened without touching LRU,
/// LFU or the hit counters, like every visit a keyspace event causes.
fn follow_rename(ctx: &Context, from: &[u8], to: &[u8]) {
    let name = ctx.create_string(to);
    let key = ctx.open_key_writable_with_flags(&name, KeyFlags::NOTOUCH | KeyFlags::NOSTATS);
    if let Ok(Some(sale)) = key.get_value::<Sale>(&SALE_TYPE) {
        sale.follow_rename(from, to);
    }
}
