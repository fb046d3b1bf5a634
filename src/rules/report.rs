//! The report INFO and RECONCILE answer with: a plain value, turned into a
//! reply by the module layer.

use std::ffi::CStr;

use serde::ser::{Serialize, SerializeMap, Serializer};

use crate::rules::fence::ReplId;
use crate::rules::sale::Sale;

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
    /// A draw sale's fields (`INIT ... DRAW`); other sales have none.
    pub draw: Option<crate::rules::sale::DrawReport>,
    /// A FENCE sale's `fence` field, last: whether it is fenced. Other
    /// sales have none (their report is unchanged).
    pub fenced: Option<bool>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TransferReport {
    /// The split sale's round (`None` for a key from before rounds).
    pub round: Option<Box<[u8]>>,
    /// This key's incarnation (with the round): what SEND's and RECV's
    /// `TO` name.
    pub incarnation: u32,
    pub sent: u64,
    pub received: u64,
    /// `(peer, sent_total, received_total)`, in byte order of the peer:
    /// every declared peer of a split sale (at most `MAX_PEERS`), else the
    /// peers the key exchanged with.
    pub peers: Vec<(Box<[u8]>, u64, u64)>,
    /// `(peer, incarnation)`, in byte order of the peer: the peers whose
    /// `sent_total` was counted for a recorded incarnation of theirs.
    pub sent_to: Vec<(Box<[u8]>, u32)>,
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
        let sent_to = t.map_or_else(Vec::new, |t| t.sent_to.iter().map(|(p, &to)| (p.clone(), to)).collect());
        let peers = match (split, t) {
            (Some(s), _) => s.peers.iter().map(|p| row(p)).collect(),
            (None, Some(t)) => t.peers.keys().map(|p| row(p)).collect(),
            (None, None) => Vec::new(),
        };
        Some(TransferReport {
            round: split.map(|s| s.round.clone()),
            incarnation: sale.incarnation(),
            sent: totals.sent,
            received: totals.received,
            peers,
            sent_to,
        })
    }
}

impl Report {
    /// The report of `sale` on a server whose replication id `current`
    /// gives (asked only for a FENCE sale).
    pub fn of(sale: &Sale, current: impl FnOnce() -> ReplId) -> Report {
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
            draw: sale.draw_report(),
            fenced: sale.config().fence.is_some().then(|| sale.fenced(current)),
        }
    }
}

/// What `SECKILL.SALES ... WITHCOUNTS` gives for each sale: the numbers a
/// monitoring scrape reads, without building the whole report.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Counts {
    pub remaining: u64,
    pub pending: u64,
    pub confirmed: u64,
    pub expired: u64,
    pub invariant_ok: bool,
    /// A FENCE sale that is fenced (false for every other sale).
    pub fenced: bool,
}

impl Counts {
    pub fn of(sale: &Sale, current: impl FnOnce() -> ReplId) -> Counts {
        let t = sale.tally();
        Counts {
            remaining: sale.remaining(),
            pending: t.pending,
            confirmed: t.confirmed,
            expired: t.expired,
            invariant_ok: sale.invariant_holds(),
            fenced: sale.fenced(current),
        }
    }

    /// In the reply's order (docs/commands.md): remaining, pending,
    /// confirmed, expired, invariant (1 ok, 0 broken), fenced (1 or 0).
    pub fn values(&self) -> [u64; 6] {
        [self.remaining, self.pending, self.confirmed, self.expired, u64::from(self.invariant_ok), u64::from(self.fenced)]
    }
}

/// One field's value in a reply document: the same tree becomes the RESP
/// reply (a map, or field/value pairs under RESP2) and, with `FORMAT JSON`,
/// one JSON string, so the two forms cannot drift apart.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Value {
    Int(u64),
    /// A user id, reservation id, peer or word sent as a bulk string.
    Text(Box<[u8]>),
    /// A status word (a simple string in RESP).
    Word(&'static CStr),
    List(Vec<Value>),
    /// Nil (JSON null).
    Null,
}

/// A reply document: named fields in the order docs/commands.md gives.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Doc(pub Vec<(&'static str, Value)>);

impl Doc {
    fn ids(ids: &[Box<[u8]>]) -> Value {
        Value::List(ids.iter().map(|id| Value::Text(id.clone())).collect())
    }
}

impl Report {
    /// The report as INFO and RECONCILE send it.
    pub fn doc(&self) -> Doc {
        let mut fields = vec![
            ("total", Value::Int(self.total)),
            ("remaining", Value::Int(self.remaining)),
            ("pending", Value::Int(self.pending)),
            ("confirmed", Value::Int(self.confirmed)),
            ("released", Value::Int(self.released)),
            ("expired", Value::Int(self.expired)),
            ("buyers", Value::Int(self.buyers)),
            ("reservations", Value::Int(self.reservations)),
            ("shards", Value::List(self.shards.iter().map(|&n| Value::Int(n)).collect())),
            ("invariant", Value::Word(if self.invariant_ok { c"ok" } else { c"broken" })),
        ];
        if let Some(t) = &self.transfers {
            if let Some(round) = &t.round {
                fields.push(("round", Value::Text(round.clone())));
                fields.push(("incarnation", Value::Text(format!("{:08x}", t.incarnation).into_bytes().into())));
            }
            let peer = |(p, s, r): &(Box<[u8]>, u64, u64)| Value::List(vec![Value::Text(p.clone()), Value::Int(*s), Value::Int(*r)]);
            let hex = |to: u32| Value::Text(format!("{to:08x}").into_bytes().into());
            fields.extend([
                ("sent", Value::Int(t.sent)),
                ("received", Value::Int(t.received)),
                ("peers", Value::List(t.peers.iter().map(peer).collect())),
            ]);
            if t.round.is_some() {
                let rows = t.sent_to.iter().map(|(p, to)| Value::List(vec![Value::Text(p.clone()), hex(*to)])).collect();
                fields.push(("sent_to", Value::List(rows)));
            }
        }
        if let Some(d) = &self.draw {
            use crate::rules::sale::draw_state::hex;
            fields.extend([
                ("mode", Value::Word(c"draw")),
                ("entrants", Value::Int(d.entrants)),
                ("drawn", Value::Int(d.drawn)),
                ("left_to_draw", Value::Int(d.left_to_draw)),
                ("waitlist", Value::Int(d.waitlist)),
                ("draw_stock", d.draw_stock.map_or(Value::Null, Value::Int)),
                ("seed_commitment", Value::Text(hex(&d.seed_commitment))),
                ("seed", d.seed.map_or(Value::Null, |s| Value::Text(hex(&s)))),
                ("entrants_digest", Value::Text(hex(&d.entrants_digest))),
                ("beacon", d.beacon.as_ref().map_or(Value::Null, |b| Value::Text(b.clone()))),
                ("beacon_value", d.begun.as_ref().and_then(|b| b.beacon.clone()).map_or(Value::Null, Value::Text)),
                ("draw_seed", d.begun.as_ref().map_or(Value::Null, |b| Value::Text(hex(&b.draw_seed)))),
            ]);
        }
        if let Some(fenced) = self.fenced {
            fields.push(("fence", Value::Word(if fenced { c"fenced" } else { c"clear" })));
        }
        Doc(fields)
    }
}

impl crate::rules::reconcile::OrdersReport {
    /// RECONCILE's order classes, after the report's fields.
    pub fn extend(&self, doc: &mut Doc) {
        let count = |v: &Vec<Box<[u8]>>| Value::Int(v.len() as u64);
        doc.0.extend([
            ("orders_ok", Value::Int(self.ok)),
            ("orders_pending", count(&self.pending)),
            ("orders_released", count(&self.released)),
            ("orders_unknown", count(&self.unknown)),
            ("orders_conflict", count(&self.conflict)),
            ("orders_pending_ids", Doc::ids(&self.pending)),
            ("orders_released_ids", Doc::ids(&self.released)),
            ("orders_unknown_ids", Doc::ids(&self.unknown)),
            ("orders_conflict_ids", Doc::ids(&self.conflict)),
        ]);
    }
}

/// GET's reply: one reservation.
pub fn reservation_doc(rec: &crate::rules::sale::RecordView) -> Doc {
    Doc(vec![
        ("user", Value::Text(rec.user().into())),
        ("qty", Value::Int(rec.qty())),
        ("state", Value::Text(rec.state().word().as_bytes().into())),
        ("created_ms", Value::Int(rec.created_ms())),
        ("deadline_ms", Value::Int(rec.deadline_ms())),
    ])
}

/// JSON: numbers as numbers, ids and words as strings (bytes that are not
/// UTF-8 become U+FFFD: clients with binary ids read the RESP form).
impl Serialize for Value {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Value::Int(n) => s.serialize_u64(*n),
            Value::Text(b) => s.serialize_str(&String::from_utf8_lossy(b)),
            Value::Word(w) => s.serialize_str(&w.to_string_lossy()),
            Value::List(items) => s.collect_seq(items),
            Value::Null => s.serialize_unit(),
        }
    }
}

/// A JSON object with the fields in the order docs/commands.md gives.
impl Serialize for Doc {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut map = s.serialize_map(Some(self.0.len()))?;
        for (name, value) in &self.0 {
            map.serialize_entry(name, value)?;
        }
        map.end()
    }
}

impl Doc {
    pub fn to_json(&self) -> Vec<u8> {
        // Serializing these types cannot fail: no maps with non-string keys,
        // no floats.
        serde_json::to_vec(self).unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rules::sale::{Sale, SaleConfig, OPEN_END};

    #[test]
    fn json_keeps_the_fields_their_order_and_numbers() {
        let mut s = Sale::new(SaleConfig {
            total: 10,
            shards: 2,
            limit: 3,
            hold_ms: 0,
            start_ms: 0,
            end_ms: OPEN_END,
            stream: None,
            tag: 1,
            split: None,
            draw: None,
            beacon: None,
            fence: None,
            id_key: None,
        });
        let rec = s.decide_reserve("user-ü".as_bytes(), 2, Some(b"o1"), 5).unwrap();
        s.add_record(rec.as_new()).unwrap();
        let json: serde_json::Value = serde_json::from_slice(&Report::of(&s, || crate::rules::fence::id(b'0')).doc().to_json()).unwrap();
        assert_eq!(json["remaining"], 8);
        assert_eq!(json["shards"], serde_json::json!(s.buckets().remaining()));
        assert_eq!(json["shards"].as_array().unwrap().iter().map(|n| n.as_u64().unwrap()).sum::<u64>(), 8);
        assert_eq!(json["invariant"], "ok");
        let text = String::from_utf8(Report::of(&s, || crate::rules::fence::id(b'0')).doc().to_json()).unwrap();
        assert!(text.starts_with(r#"{"total":10,"remaining":8,"pending":2,"#), "{text}");
        let get: serde_json::Value = serde_json::from_slice(&reservation_doc(&s.get(b"o1").unwrap()).to_json()).unwrap();
        assert_eq!(get, serde_json::json!({"user": "user-ü", "qty": 2, "state": "pending", "created_ms": 5, "deadline_ms": 0}));
        let mut doc = Report::of(&s, || crate::rules::fence::id(b'0')).doc();
        crate::rules::reconcile::OrdersReport { ok: 1, pending: vec![b"p".to_vec().into()], ..Default::default() }.extend(&mut doc);
        let json: serde_json::Value = serde_json::from_slice(&doc.to_json()).unwrap();
        assert_eq!((json["orders_ok"].clone(), json["orders_pending_ids"].clone()), (serde_json::json!(1), serde_json::json!(["p"])));
    }
}
