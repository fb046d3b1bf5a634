//! Keyspace events that bring a sale to a new name (RENAME, MOVE, COPY,
//! RESTORE): the name is scheduled for a visit at the next tick (the timer
//! finds out whether it holds a sale), joins the list of sales (`sales`) if
//! it holds one, and a RENAME carries the sale's stream ownership to the
//! new name. Every replica and AOF replay runs the same RENAME, so they
//! follow it too.

use std::sync::Mutex;

use redis_module::key::KeyFlags;
use redis_module::{Context, NotifyEvent};

use crate::module::datatype::SALE_TYPE;
use crate::module::expiry_registry;
use crate::module::ffi;
use crate::module::sales;
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
    // RESTORE: the type's load has listed the name already, but RESTORE
    // ... REPLACE over a sale unlinks the old value after that load.
    if !matches!(event, "rename_to" | "move_to" | "copy_to" | "restore") {
        return;
    }
    let from = match event {
        "rename_to" => RENAMING.lock().unwrap_or_else(|p| p.into_inner()).take(),
        _ => None,
    };
    arrived(ctx, from.as_deref(), key);
    expiry_registry::schedule(ffi::keyspace::selected_db(ctx), key, 0);
}

/// A key came to the name `to` (from `renamed_from` for a RENAME): if it
/// holds a sale, the name joins the list of sales, and after a RENAME the
/// sale's stream ownership follows (`Sale::follow_rename`). Opened without
/// touching LRU, LFU or the hit counters, like every visit a keyspace
/// event causes.
fn arrived(ctx: &Context, renamed_from: Option<&[u8]>, to: &[u8]) {
    let name = ffi::args::key_name(ctx, to);
    let key = ctx.open_key_writable_with_flags(&name, KeyFlags::NOTOUCH | KeyFlags::NOSTATS);
    if let Ok(Some(sale)) = key.get_value::<Sale>(&SALE_TYPE) {
        sales::on_created(ffi::keyspace::selected_db(ctx), to);
        if let Some(from) = renamed_from {
            sale.follow_rename(from, to);
        }
    }
}
