//! The report INFO and RECONCILE answer with: a plain value, turned into a
//! reply by the module layer.

use crate::sale::Sale;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Report {
    pub total: u64,
    pub remaining: u64,
    pub pending: u64,
    pub confirmed: u64,
    pub released: u64,
    pub expired: u64,
    pub buyers: u64,
    pub reservations: u64,
    pub shards: Vec<u64>,
    pub invariant_ok: bool,
}

impl Report {
    pub fn of(sale: &Sale) -> Report {
        let t = sale.tally();
        Report {
            total: sale.config().total,
            remaining: sale.remaining(),
            pending: t.pending,
            confirmed: t.confirmed,
            released: t.released,
            expired: t.expired,
            buyers: sale.buyer_count() as u64,
            reservations: sale.record_count() as u64,
            shards: sale.buckets().remaining().to_vec(),
            invariant_ok: sale.invariant_holds(),
        }
    }
}
