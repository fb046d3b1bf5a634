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
    /// Only for a key that ever sent or received: plain sales keep the
    /// report they always had.
    pub transfers: Option<TransferReport>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TransferReport {
    pub sent: u64,
    pub received: u64,
    /// `(peer, sent_total, received_total)`, in byte order of the peer.
    pub peers: Vec<(Box<[u8]>, u64, u64)>,
}

impl TransferReport {
    fn of(sale: &Sale) -> Option<TransferReport> {
        let t = sale.transfers()?;
        let totals = t.totals().unwrap_or_default();
        let peers = t.peers.iter().map(|(p, c)| (p.clone(), c.sent, c.received)).collect();
        Some(TransferReport { sent: totals.sent, received: totals.received, peers })
    }
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
            transfers: TransferReport::of(sale),
        }
    }
}
