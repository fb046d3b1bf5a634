//! The sale's persisted form: one versioned byte string, written by RDB
//! save, read by RDB load, DUMP/RESTORE and `DEBUG DIGEST-VALUE`.
//!
//! Version 6: as version 5, with
//! - the draw flag's seed followed by the declared beacon's name (`len,
//!   bytes`, empty: none), and a begun draw's section ending in the beacon
//!   value its first DRAW took (`len, bytes`, empty: none). The entrant
//!   digest and the draw seed are derived (recomputed on load). Versions 4
//!   and 5 load as draw v2 sales when their draw has not begun (no
//!   beacon); a payload of theirs whose draw has begun is refused
//!   (`draw::OLD_DRAW`): its order is the old one;
//! - the config ending in the id-key flag after the fence flag (`0`, or `1`
//!   and the 16 bytes of the key of generated ids, `rules::sale::ids`), and
//!   the transfers section (when present) ending in the incarnations its
//!   sent counters are for: `count, (peer, incarnation)...`, peers in byte
//!   order. Older payloads load with none recorded (the next SEND to a peer
//!   records its incarnation). Versions 1 to 5 (still read) load as sales
//!   without an id key: they keep issuing and accepting `<tag>-<seq>` ids,
//!   as they did when saved (a key drawn at load would differ between a
//!   master and a replica loading the same file).
//!
//! Version 5: as version 4, with the config ending in the fence flag after
//! the draw flag (`0`, or `1` and the 40 bytes of the recorded replication
//! id, `rules::fence`). Versions 1 to 4 (still read) load as sales without
//! FENCE.
//! Version 4: `version, config, bucket remainders, transfers, reservations,
//! [draw]`; the config ends with the draw flag (`0`, or `1` and the 32
//! seed bytes), and a draw sale's entrants and progress follow the
//! reservations (`Reader::draw`). Version 3 (still read) has no draw.
//! Version 3: `version, config, bucket remainders, transfers, reservations`,
//! integers as LEB128 varints, byte strings as `len, bytes`. `transfers` is
//! `0` for a sale that never sent or received, else `1, bucket allocations,
//! peer count, (peer, sent, received)..., transfer id count, ids...` (peers
//! and ids in byte order). The config ends with the stream (`0`, or `1,
//! key, maxlen, owner`) and the split (`0`, or `1, round, peer count,
//! peers...` in byte order). Version 2 (still read) has no stream owner and
//! no split; version 1 (still read) has no `transfers` either. A payload
//! without an owner takes the name it is loaded under, when known.
//! Derived state (buyers, holds, tallies) is rebuilt on load, and the stored
//! remainders must equal what the allocations and reservations imply, so a
//! corrupt payload is refused whole.

use crate::rules::buckets::Take;
use crate::rules::fence::ReplId;
use crate::rules::reservation::{NewRecord, State};
use crate::rules::sale::{DrawBegin, EntrantRec, EntrantResult, Sale, SaleConfig, StreamConfig, MAX_PEERS, MAX_SHARDS};
use crate::rules::transfers::Counters;

pub const VERSION: u64 = 6;

/// Bucket allocations, peers, transfer ids and incarnations sent to, as stored.
type Transfers = (Vec<u64>, Vec<(Box<[u8]>, Counters)>, Vec<Box<[u8]>>, Vec<(Box<[u8]>, u32)>);

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DecodeError(pub &'static str);

pub fn encode(sale: &Sale) -> Vec<u8> {
    let mut out = Vec::with_capacity(64 + sale.record_count() * 32);
    let c = sale.config();
    put(&mut out, VERSION);
    for n in [c.total, u64::from(c.shards), c.limit, c.hold_ms, c.start_ms, c.end_ms, u64::from(c.tag)] {
        put(&mut out, n);
    }
    match &c.stream {
        None => put(&mut out, 0),
        Some(s) => {
            put(&mut out, 1);
            put_bytes(&mut out, &s.key);
            put(&mut out, s.maxlen.unwrap_or(0));
            put_bytes(&mut out, &s.owner);
        }
    }
    match &c.split {
        None => put(&mut out, 0),
        Some(split) => {
            put(&mut out, 1);
            put_bytes(&mut out, &split.round);
            put(&mut out, split.peers.len() as u64);
            for p in split.peers.iter() {
                put_bytes(&mut out, p);
            }
        }
    }
    match &c.draw {
        None => put(&mut out, 0),
        Some(seed) => {
            put(&mut out, 1);
            out.extend_from_slice(seed);
            put_bytes(&mut out, c.beacon.as_deref().unwrap_or_default());
        }
    }
    match &c.fence {
        None => put(&mut out, 0),
        Some(id) => {
            put(&mut out, 1);
            out.extend_from_slice(id.as_bytes());
        }
    }
    match &c.id_key {
        None => put(&mut out, 0),
        Some(k) => {
            put(&mut out, 1);
            out.extend_from_slice(k);
        }
    }
    for &r in sale.buckets().remaining() {
        put(&mut out, r);
    }
    put_transfers(&mut out, sale);
    put(&mut out, sale.record_count() as u64);
    let mut id = Vec::with_capacity(32);
    for r in sale.records() {
        id.clear();
        r.write_id(&mut id);
        put_bytes(&mut out, &id);
        put_bytes(&mut out, r.user());
        let takes = r.takes();
        for n in [r.qty(), u64::from(r.state().code()), r.created_ms(), r.deadline_ms(), takes.len() as u64] {
            put(&mut out, n);
        }
        for t in &takes {
            put(&mut out, u64::from(t.bucket));
            put(&mut out, t.qty);
        }
    }
    if let Some((entrants, stock, examined, begin)) = sale.draw_state() {
        put(&mut out, sale.entrant_count() as u64);
        for e in entrants {
            put_bytes(&mut out, &e.user);
            put(&mut out, e.qty);
            put(&mut out, u64::from(e.result.code()) | if e.reqid.is_some() { 4 } else { 0 });
            if let Some(r) = &e.reqid {
                put_bytes(&mut out, r);
            }
        }
        match stock {
            None => put(&mut out, 0),
            Some(s) => {
                put(&mut out, 1);
                put(&mut out, s);
            }
        }
        put(&mut out, u64::from(examined));
        if stock.is_some() {
            put_bytes(&mut out, begin.and_then(|b| b.beacon).as_deref().unwrap_or_default());
        }
    }
    out
}

fn put_transfers(out: &mut Vec<u8>, sale: &Sale) {
    let Some(t) = sale.transfers() else {
        return put(out, 0);
    };
    put(out, 1);
    for &a in sale.buckets().allocation() {
        put(out, a);
    }
    put(out, t.peers.len() as u64);
    for (peer, c) in &t.peers {
        put_bytes(out, peer);
        put(out, c.sent);
        put(out, c.received);
    }
    put(out, t.tids.len() as u64);
    for tid in &t.tids {
        put_bytes(out, tid);
    }
    put(out, t.sent_to.len() as u64);
    for (peer, &to) in &t.sent_to {
        put_bytes(out, peer);
        put(out, u64::from(to));
    }
}

pub fn decode(bytes: &[u8]) -> Result<Sale, DecodeError> {
    decode_as(bytes, None)
}

/// Decodes a payload loaded under the key `name` (when Redis says it): a
/// payload from before stream owners takes that name as its owner.
pub fn decode_as(bytes: &[u8], name: Option<&[u8]>) -> Result<Sale, DecodeError> {
    let mut r = Reader { bytes, pos: 0 };
    let version = r.u64()?;
    if !(1..=VERSION).contains(&version) {
        return Err(DecodeError("unknown encoding version"));
    }
    let mut config = r.config(version)?;
    if let (Some(s), Some(name), true) = (&mut config.stream, name, version < 3) {
        s.owner = name.into();
    }
    let remaining = (0..config.shards).map(|_| r.u64()).collect::<Result<Vec<_>, _>>()?;
    let transfers = if version >= 2 { r.transfers(config.shards, version)? } else { None };
    let count = r.u64()?;
    // Each record takes at least 7 bytes: never trust a count to allocate.
    let mut sale = Sale::with_capacity(config, count.min(r.left() as u64 / 7) as usize);
    if let Some((allocation, peers, tids, sent_to)) = transfers {
        sale.restore_transfers(allocation, peers, tids).map_err(|e| DecodeError(e.0))?;
        if !sent_to.is_empty() {
            sale.restore_sent_to(sent_to).map_err(|e| DecodeError(e.0))?;
        }
    }
    let mut takes = Vec::new();
    for _ in 0..count {
        let rec = r.record(&mut takes)?;
        sale.add_record(rec).map_err(|e| DecodeError(e.0))?;
    }
    if sale.is_draw() {
        r.draw(&mut sale, version)?;
    }
    if r.left() != 0 {
        return Err(DecodeError("trailing bytes"));
    }
    if remaining.len() != sale.config().shards as usize {
        return Err(DecodeError("bucket count differs from SHARDS"));
    }
    sale.check_buckets(&remaining).map_err(|e| DecodeError(e.0))?;
    Ok(sale)
}

fn put(out: &mut Vec<u8>, mut n: u64) {
    while n >= 0x80 {
        out.push((n as u8) | 0x80);
        n >>= 7;
    }
    out.push(n as u8);
}

fn put_bytes(out: &mut Vec<u8>, b: &[u8]) {
    put(out, b.len() as u64);
    out.extend_from_slice(b);
}

struct Reader<'a> {
    bytes: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    fn left(&self) -> usize {
        self.bytes.len() - self.pos
    }

    fn u64(&mut self) -> Result<u64, DecodeError> {
        let mut n: u64 = 0;
        for shift in (0..64).step_by(7) {
            let b = *self.bytes.get(self.pos).ok_or(DecodeError("payload ends early"))?;
            self.pos += 1;
            let part = u64::from(b & 0x7f);
            if shift == 63 && part > 1 {
                return Err(DecodeError("varint past 64 bits"));
            }
            n |= part << shift;
            if b & 0x80 == 0 {
                return Ok(n);
            }
        }
        Err(DecodeError("varint past 64 bits"))
    }

    fn bounded(&mut self, max: u64, what: &'static str) -> Result<u64, DecodeError> {
        let n = self.u64()?;
        if n > max {
            return Err(DecodeError(what));
        }
        Ok(n)
    }

    fn bytes(&mut self) -> Result<&'a [u8], DecodeError> {
        let len = self.u64()?;
        if len > self.left() as u64 {
            return Err(DecodeError("payload ends early"));
        }
        let b = &self.bytes[self.pos..self.pos + len as usize];
        self.pos += len as usize;
        Ok(b)
    }

    /// The transfer section (version 2): `None` for a plain sale. Ids and
    /// order are checked by `Sale::restore_transfers`, except that peers
    /// and ids must come in byte order, so each sale has one encoding.
    fn transfers(&mut self, shards: u32, version: u64) -> Result<Option<Transfers>, DecodeError> {
        match self.u64()? {
            0 => return Ok(None),
            1 => {}
            _ => return Err(DecodeError("bad transfers flag")),
        }
        let allocation = (0..shards).map(|_| self.u64()).collect::<Result<Vec<_>, _>>()?;
        // A peer takes at least 4 bytes, an id 2: never trust a count to allocate.
        let npeers = self.bounded(self.left() as u64 / 4, "too many peers")?;
        let mut peers: Vec<(Box<[u8]>, Counters)> = Vec::with_capacity(npeers as usize);
        for _ in 0..npeers {
            let peer: Box<[u8]> = self.bytes()?.into();
            let c = Counters { sent: self.u64()?, received: self.u64()? };
            if peers.last().is_some_and(|(last, _)| *last >= peer) {
                return Err(DecodeError("peers out of order"));
            }
            peers.push((peer, c));
        }
        let ntids = self.bounded(self.left() as u64 / 2, "too many transfer ids")?;
        let mut tids: Vec<Box<[u8]>> = Vec::with_capacity(ntids as usize);
        for _ in 0..ntids {
            let tid: Box<[u8]> = self.bytes()?.into();
            if tids.last().is_some_and(|last| *last >= tid) {
                return Err(DecodeError("transfer ids out of order"));
            }
            tids.push(tid);
        }
        let mut sent_to: Vec<(Box<[u8]>, u32)> = Vec::new();
        if version >= 6 {
            let n = self.bounded(npeers, "too many incarnations")?;
            for _ in 0..n {
                let peer: Box<[u8]> = self.bytes()?.into();
                let to = self.bounded(u64::from(u32::MAX), "incarnation out of range")? as u32;
                if sent_to.last().is_some_and(|(last, _)| *last >= peer) {
                    return Err(DecodeError("incarnations out of order"));
                }
                sent_to.push((peer, to));
            }
        }
        Ok(Some((allocation, peers, tids, sent_to)))
    }

    /// The configuration, checked by `SaleConfig::check` like INIT's.
    fn config(&mut self, version: u64) -> Result<SaleConfig, DecodeError> {
        let total = self.u64()?;
        let shards = self.bounded(u64::from(u32::MAX), "shards out of range")? as u32;
        let limit = self.u64()?;
        let hold_ms = self.u64()?;
        let start_ms = self.u64()?;
        let end_ms = self.u64()?;
        let tag = self.bounded(u64::from(u32::MAX), "tag out of range")? as u32;
        let stream = match self.u64()? {
            0 => None,
            1 => {
                let key = self.bytes()?;
                let maxlen = self.u64()?;
                let owner: Box<[u8]> = if version >= 3 { self.bytes()?.into() } else { Box::default() };
                Some(StreamConfig { key: key.into(), maxlen: (maxlen > 0).then_some(maxlen), owner })
            }
            _ => return Err(DecodeError("bad stream flag")),
        };
        let split = if version >= 3 { self.split()? } else { None };
        let draw = if version >= 4 { self.seed()? } else { None };
        let beacon = match (&draw, version >= 6) {
            (Some(_), true) => Some(self.bytes()?).filter(|b| !b.is_empty()).map(Into::into),
            _ => None,
        };
        let fence = if version >= 5 { self.fence()? } else { None };
        let id_key = if version >= 6 { self.id_key()? } else { None };
        let config = SaleConfig { total, shards, limit, hold_ms, start_ms, end_ms, stream, tag, split, draw, beacon, fence, id_key };
        config.check().map_err(|_| DecodeError("the sale's configuration is out of range"))?;
        Ok(config)
    }

    /// The split section (version 3): checked as INIT checks it, and the
    /// peers must come in byte order, so each sale has one encoding.
    fn split(&mut self) -> Result<Option<crate::rules::sale::SplitConfig>, DecodeError> {
        match self.u64()? {
            0 => return Ok(None),
            1 => {}
            _ => return Err(DecodeError("bad split flag")),
        }
        let round = self.bytes()?;
        let n = self.bounded(MAX_PEERS as u64, "too many peers")?;
        let peers = (0..n).map(|_| self.bytes()).collect::<Result<Vec<_>, _>>()?;
        if peers.windows(2).any(|w| w[0] >= w[1]) {
            return Err(DecodeError("peers out of order"));
        }
        crate::rules::config::SplitConfig::new(None, round, &peers).map(Some).map_err(|_| DecodeError("bad split"))
    }

    /// The draw flag (version 4): `0`, or `1` and the 32 seed bytes.
    fn seed(&mut self) -> Result<Option<[u8; 32]>, DecodeError> {
        match self.u64()? {
            0 => Ok(None),
            1 => {
                let bytes = self.bytes.get(self.pos..self.pos + 32).ok_or(DecodeError("payload ends early"))?;
                self.pos += 32;
                let mut seed = [0u8; 32];
                seed.copy_from_slice(bytes);
                Ok(Some(seed))
            }
            _ => Err(DecodeError("bad draw flag")),
        }
    }

    /// The id-key flag (version 6): `0`, or `1` and the key's 16 bytes.
    fn id_key(&mut self) -> Result<Option<[u8; 16]>, DecodeError> {
        match self.u64()? {
            0 => Ok(None),
            1 => {
                let bytes = self.bytes.get(self.pos..self.pos + 16).ok_or(DecodeError("payload ends early"))?;
                self.pos += 16;
                Ok(Some(bytes.try_into().expect("16 bytes")))
            }
            _ => Err(DecodeError("bad id key flag")),
        }
    }

    /// The fence flag (version 5): `0`, or `1` and a replication id's 40
    /// bytes (lower-case hex, as `ReplId` takes them).
    fn fence(&mut self) -> Result<Option<ReplId>, DecodeError> {
        match self.u64()? {
            0 => Ok(None),
            1 => {
                let bytes = self.bytes.get(self.pos..self.pos + ReplId::LEN).ok_or(DecodeError("payload ends early"))?;
                self.pos += ReplId::LEN;
                ReplId::parse(bytes).map(Some).ok_or(DecodeError("bad replication id"))
            }
            _ => Err(DecodeError("bad fence flag")),
        }
    }

    /// The draw section (version 4, draw sales): entrants in entry order
    /// (`user, qty, code, [reqid]`, code = result + 4 with a REQID), then
    /// the stock (`0`, or `1, stock`) and the entrants looked at; from
    /// version 6, a begun draw's beacon value (`len, bytes`, empty: none).
    fn draw(&mut self, sale: &mut Sale, version: u64) -> Result<(), DecodeError> {
        // An entrant takes at least 4 bytes: never trust a count to allocate.
        let n = self.bounded(self.left() as u64 / 4, "too many entrants")?;
        let mut batch = Vec::with_capacity(n.min(1024) as usize);
        for i in 0..n {
            let user: Box<[u8]> = self.bytes()?.into();
            let qty = self.u64()?;
            let code = self.bounded(7, "bad entrant code")?;
            let result = EntrantResult::from_code(code & 3).ok_or(DecodeError("bad entrant result"))?;
            let reqid = if code & 4 != 0 { Some(self.bytes()?.into()) } else { None };
            batch.push(EntrantRec { user, qty, reqid, result });
            if batch.len() == 1024 || i + 1 == n {
                sale.add_entrants(&batch).map_err(|e| DecodeError(e.0))?;
                batch.clear();
            }
        }
        let stock = match self.u64()? {
            0 => None,
            1 => Some(self.u64()?),
            _ => return Err(DecodeError("bad draw stock flag")),
        };
        let examined = self.bounded(u64::from(u32::MAX), "bad draw progress")? as u32;
        let begin = match stock {
            Some(_) if version < 6 => return Err(DecodeError(crate::rules::sale::draw_state::OLD_DRAW)),
            Some(_) => {
                let value = self.bytes()?;
                if value.len() > crate::rules::config::MAX_BEACON_VALUE {
                    return Err(DecodeError("beacon value too long"));
                }
                let beacon = (!value.is_empty()).then(|| Box::<[u8]>::from(value));
                Some(DrawBegin { draw_seed: sale.draw_seed_for(beacon.as_deref()).ok_or(DecodeError("not a draw sale"))?, beacon })
            }
            None => None,
        };
        sale.restore_draw(stock, examined, begin.as_ref()).map_err(|e| DecodeError(e.0))
    }

    /// One record, borrowing its ids from the payload; `takes` is scratch.
    fn record<'t>(&mut self, takes: &'t mut Vec<Take>) -> Result<NewRecord<'t>, DecodeError>
    where
        'a: 't,
    {
        let id = self.bytes()?;
        let user = self.bytes()?;
        let qty = self.u64()?;
        let state = State::from_code(self.u64()?).ok_or(DecodeError("bad reservation state"))?;
        let created_ms = self.u64()?;
        let deadline_ms = self.u64()?;
        let n = self.bounded(u64::from(MAX_SHARDS), "too many takes")?;
        takes.clear();
        for _ in 0..n {
            let bucket = self.bounded(u64::from(MAX_SHARDS), "bucket out of range")? as u32;
            takes.push(Take { bucket, qty: self.u64()? });
        }
        Ok(NewRecord { id, user, qty, state, created_ms, deadline_ms, takes })
    }
}

#[cfg(test)]
#[path = "tests/encoding.rs"]
mod tests;
