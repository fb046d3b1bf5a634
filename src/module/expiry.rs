//! Active hold expiry: a timer on every node that, on the master only,
//! releases the holds that ran out. Lazy expiry (any write touching a sale,
//! `Committer`) is the backstop.
//!
//! The timer visits sales in the order of their next deadline (`expiry_registry`),
//! so an idle sale costs nothing; it works within a time budget per tick
//! and releases holds in bounded chunks, so a million holds falling due at
//! once never stall the server; and it writes nothing while the server asks
//! modules to avoid replica traffic (CLIENT PAUSE WRITE, FAILOVER, a
//! SHUTDOWN waiting for replicas), catching up once writes resume.

use std::time::{Duration, Instant};

use redis_module::key::KeyFlags;
use redis_module::Context;

use crate::module::commit::{Committer, DueHolds, Origin};
use crate::module::datatype::SALE_TYPE;
use crate::module::expiry_registry::{self, schedule};
use crate::module::ffi;
use crate::module::node::{decides, now_ms};
use crate::rules::sale::Sale;

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

/// Starts the timer; it re-arms itself from its own callback (stopping a
/// timer from inside it is not safe on 7.0), and writes nothing on replicas,
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
    while let Some((db, key)) = expiry_registry::next_due(now) {
        visit(ctx, db, &key, now);
        if started.elapsed() >= BUDGET {
            return BEHIND;
        }
    }
    match expiry_registry::next_deadline() {
        Some(at) => Duration::from_millis(at.saturating_sub(now)).clamp(Duration::from_millis(1), PERIOD),
        None => PERIOD,
    }
}

/// Releases one chunk of the sale's due holds and schedules its next visit;
/// forgets a key that no longer holds a sale with holds.
fn visit(ctx: &Context, db: i32, key: &[u8], now: u64) {
    if !ffi::keyspace::select_db(ctx, db) {
        return;
    }
    let name = ffi::args::key_name(ctx, key);
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
    let c = Committer { ctx, key: &name, origin: Origin::Master, stream: stream.as_ref() };
    c.expire(sale, DueHolds { now, max: TIMER_CHUNK });
    if let Some(deadline) = sale.next_deadline() {
        schedule(db, key, deadline);
    }
}
