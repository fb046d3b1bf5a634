//! Warnings that input can trigger (a refused effect, a failed stream
//! append), logged at most once a second: a flood of bad calls must not
//! become a flood of log lines. The counters in `INFO seckill` count every
//! occurrence.

use std::sync::atomic::{AtomicU64, Ordering};

use redis_module::Context;

const INTERVAL_MS: u64 = 1000;

static LAST_MS: AtomicU64 = AtomicU64::new(0);
static SUPPRESSED: AtomicU64 = AtomicU64::new(0);

/// Logs `msg` as a warning unless one was logged in the last second; the
/// next warning logged says how many were left out meanwhile.
pub fn limited(ctx: &Context, msg: &str) {
    let now = crate::module::node::now_ms();
    let last = LAST_MS.load(Ordering::Relaxed);
    if now.saturating_sub(last) < INTERVAL_MS && last != 0 {
        SUPPRESSED.fetch_add(1, Ordering::Relaxed);
        return;
    }
    LAST_MS.store(now, Ordering::Relaxed);
    match SUPPRESSED.swap(0, Ordering::Relaxed) {
        0 => ctx.log_warning(msg),
        n => ctx.log_warning(&format!("{msg} ({n} similar warnings left out in the last second)")),
    }
}
