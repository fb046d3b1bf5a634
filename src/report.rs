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
    /// For a part of a split sale, and for a key that ever sent or
    /// received: plain sales keep the report they always had.
    pub transfers: Option<TransferReport>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TransferReport {
    /// The split sale's round (`None` for a key from before rounds).
    pub round: Option<Box<[u8]>>,
    pub sent: u64,
    pub received: u64,
    /// `(peer, sent_total, received_total)`, in byte order of the peer:
    /// every declared peer of a split sale (at most `MAX_PEERS`), else the
    /// peers the key exchanged with.
    pub peers: Vec<(Box<[u8]>, u64, u64)>,
}

impl TransferReport {
    fn of(sale: &Sale) -> Option<TransferReport> {
        let split = sale.config().split.as_ref();
        let t = sale.transfers();
        if split.is_none() && t.is_none() {
            return None;
        }
        let totals = t.map(|t| t.totals).unwrap_or_default();
        let row = |p: &[u8]| {
            let c = sale.transfer_counters(p);
            (Box::from(p), c.sent, c.received)
        };
        let peers = match (split, t) {
            (Some(s), _) => s.peers.iter().map(|p| row(p)).collect(),
            (None, Some(t)) => t.peers.keys().map(|p| row(p)).collect(),
            (None, None) => Vec::new(),
        };
        Some(TransferReport { round: split.map(|s| s.round.clone()), sent: totals.sent, received: totals.received, peers })
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
