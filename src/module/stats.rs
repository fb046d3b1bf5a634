//! Counters for `INFO seckill`: one per outcome, across all sales.

use std::sync::atomic::{AtomicU64, Ordering};

use crate::module::ffi::info::InfoSection;

pub struct Counter {
    pub name: &'static str,
    value: AtomicU64,
}

impl Counter {
    const fn new(name: &'static str) -> Counter {
        Counter { name, value: AtomicU64::new(0) }
    }

    /// Only Redis's main thread counts (commands, the timer, replays), so
    /// a plain load and store will do: a locked add would be a full barrier
    /// on every command, measurable on the RESERVE path (`make bench`).
    pub fn add(&self, n: u64) {
        self.value.store(self.value.load(Ordering::Relaxed).wrapping_add(n), Ordering::Relaxed);
    }

    pub fn get(&self) -> u64 {
        self.value.load(Ordering::Relaxed)
    }
}

pub static INIT_CREATED: Counter = Counter::new("init_created");
pub static INIT_EXISTS: Counter = Counter::new("init_exists");
pub static RESERVED: Counter = Counter::new("reserve_reserved");
pub static NO_SALE: Counter = Counter::new("reserve_no_sale");
pub static DUPLICATE: Counter = Counter::new("reserve_duplicate");
pub static NOT_STARTED: Counter = Counter::new("reserve_not_started");
pub static ENDED: Counter = Counter::new("reserve_ended");
pub static LIMIT: Counter = Counter::new("reserve_limit");
pub static SOLD_OUT: Counter = Counter::new("reserve_sold_out");
pub static RELEASED: Counter = Counter::new("release_released");
pub static CONFIRMED: Counter = Counter::new("confirm_confirmed");
pub static LATE: Counter = Counter::new("release_or_confirm_too_late");
pub static NOT_FOUND: Counter = Counter::new("release_or_confirm_not_found");
pub static EXPIRED: Counter = Counter::new("holds_expired");
pub static RECONCILED: Counter = Counter::new("reconcile_calls");
pub static EFFECTS_APPLIED: Counter = Counter::new("effects_applied");
pub static EFFECTS_REFUSED: Counter = Counter::new("effects_refused");
pub static EFFECTS_DENIED: Counter = Counter::new("effects_denied");
/// Sales the expiry timer opened: due ones only, never idle ones.
pub static EXPIRY_VISITS: Counter = Counter::new("expiry_visits");
pub static PANICS: Counter = Counter::new("panics_caught");
/// SENDs that took units, and the units they took.
pub static SENDS: Counter = Counter::new("send_sent");
pub static UNITS_SENT: Counter = Counter::new("send_units");
/// SENDs that took nothing: a tid seen before, or less than MIN there.
pub static SEND_REPEATED: Counter = Counter::new("send_repeated");
pub static SEND_BELOW_MIN: Counter = Counter::new("send_below_min");
/// RECVs that credited units, and the units; RECVs with nothing new.
pub static RECVS: Counter = Counter::new("recv_credited");
pub static UNITS_RECEIVED: Counter = Counter::new("recv_units");
pub static RECV_NOTHING: Counter = Counter::new("recv_nothing");
/// SENDs and RECVs refused: a plain sale, another round, an undeclared peer.
pub static TRANSFERS_REFUSED: Counter = Counter::new("transfers_refused");

/// Draw sales: ENTERs that added an entrant or found the user entered,
/// RESERVEs refused because the sale draws, winners drawn and promoted.
pub static ENTERED: Counter = Counter::new("enter_entered");
pub static ENTER_REFUSED: Counter = Counter::new("enter_refused");
pub static RESERVE_DRAW: Counter = Counter::new("reserve_draw");
pub static DRAWN: Counter = Counter::new("draw_winners");
pub static PROMOTED: Counter = Counter::new("waitlist_promoted");

/// Calls refused because their FENCE sale is fenced (RESERVE, ENTER,
/// DRAW, SEND), and UNFENCEs that lifted a fence.
pub static FENCED: Counter = Counter::new("fenced_refused");
pub static UNFENCED: Counter = Counter::new("unfence_unfenced");

static ALL: [&Counter; 35] = [
    &INIT_CREATED,
    &INIT_EXISTS,
    &RESERVED,
    &NO_SALE,
    &DUPLICATE,
    &NOT_STARTED,
    &ENDED,
    &LIMIT,
    &SOLD_OUT,
    &RELEASED,
    &CONFIRMED,
    &LATE,
    &NOT_FOUND,
    &EXPIRED,
    &RECONCILED,
    &EFFECTS_APPLIED,
    &EFFECTS_REFUSED,
    &EFFECTS_DENIED,
    &EXPIRY_VISITS,
    &PANICS,
    &SENDS,
    &UNITS_SENT,
    &SEND_REPEATED,
    &SEND_BELOW_MIN,
    &RECVS,
    &UNITS_RECEIVED,
    &RECV_NOTHING,
    &TRANSFERS_REFUSED,
    &ENTERED,
    &ENTER_REFUSED,
    &RESERVE_DRAW,
    &DRAWN,
    &PROMOTED,
    &FENCED,
    &UNFENCED,
];

/// The `INFO seckill` section's fields (Redis prefixes each with `seckill_`).
pub fn info(section: &InfoSection) {
    for c in ALL {
        section.field(c.name, c.get());
    }
    section.field("sales_scheduled_for_expiry", crate::module::expiry_registry::tracked() as u64);
    section.field("sales_listed", crate::module::sales::listed() as u64);
}
