//! The argument codec of `SECKILL.EFFECT key <op> ...`: an effect to the
//! arguments replication and AOF rewrite send, and back. Byte-exact: every
//! form here is on the wire between versions (upgrade replicas first).

use crate::rules::buckets::Take;
use crate::rules::config::MAX_BEACON_VALUE;
pub use crate::rules::digits::Digits;
use crate::rules::effect::{single_record, Effect};
use crate::rules::fence::ReplId;
use crate::rules::reservation::{NewRecord, Reservation, State};
use crate::rules::sale::{DrawBegin, EntrantRec, EntrantResult, SaleConfig, SplitConfig, StreamConfig, MAX_PEERS, MAX_SHARDS, MAX_TOTAL};
use crate::rules::transfers::Counters;
use crate::wire::args::{parse_u64, ArgError, ArgResult};

/// The internal command replicas and the AOF receive.
pub const EFFECT_COMMAND: &std::ffi::CStr = c"SECKILL.EFFECT";

/// An effect as `SECKILL.EFFECT` arguments, and back.
pub trait EffectArgs: Sized {
    /// The arguments after `SECKILL.EFFECT key`.
    fn to_args(&self) -> Vec<Vec<u8>>;
    /// Parses the arguments after `SECKILL.EFFECT key`.
    fn parse(args: &[&[u8]]) -> ArgResult<Self>;
}

impl EffectArgs for Effect {
    fn to_args(&self) -> Vec<Vec<u8>> {
        let mut out: Vec<Vec<u8>> = Vec::new();
        match self {
            Effect::Init(c) => {
                out.push(b"INIT".to_vec());
                for n in [c.total, u64::from(c.shards), c.limit, c.hold_ms, c.start_ms, c.end_ms, u64::from(c.tag)] {
                    out.push(num(n));
                }
                if let Some(s) = &c.stream {
                    out.push(b"STREAM".to_vec());
                    out.push(s.key.to_vec());
                    out.push(num(s.maxlen.unwrap_or(0)));
                    if !s.owner.is_empty() {
                        out.extend([b"OWNER".to_vec(), s.owner.to_vec()]);
                    }
                }
                if let Some(split) = &c.split {
                    out.extend([b"SPLIT".to_vec(), split.round.to_vec(), num(split.peers.len() as u64)]);
                    out.extend(split.peers.iter().map(|p| p.to_vec()));
                }
                if let Some(seed) = &c.draw {
                    out.extend([b"DRAW".to_vec(), crate::rules::sale::draw_state::hex(seed).into_vec()]);
                    if let Some(name) = &c.beacon {
                        out.extend([b"BEACON".to_vec(), name.to_vec()]);
                    }
                }
                if let Some(id) = &c.fence {
                    out.extend([b"FENCE".to_vec(), id.as_bytes().to_vec()]);
                }
                if let Some(k) = &c.id_key {
                    out.extend([b"IDKEY".to_vec(), crate::rules::sale::draw_state::hex(k).into_vec()]);
                }
            }
            Effect::Unfence(id) => out.extend([b"UNFENCE".to_vec(), id.as_bytes().to_vec()]),
            Effect::Records(recs) => {
                if let Some((r, nums)) = single_record(self).and_then(|r| Some((r, pending_form(&r.as_new())?))) {
                    out.extend([b"PENDING".to_vec(), r.id.to_vec(), r.user.to_vec(), nums.as_bytes().to_vec()]);
                    return out;
                }
                out.push(b"RECORDS".to_vec());
                push_records(&mut out, recs);
            }
            Effect::Release(id) => out.extend([b"RELEASE".to_vec(), id.to_vec()]),
            Effect::Confirm(id) => out.extend([b"CONFIRM".to_vec(), id.to_vec()]),
            Effect::Expire(ids) => {
                out.push(b"EXPIRE".to_vec());
                out.extend(ids.iter().map(|id| id.to_vec()));
            }
            Effect::Retake(id, takes) => {
                out.extend([b"RETAKE".to_vec(), id.to_vec()]);
                push_takes(&mut out, takes);
            }
            Effect::Batch(fixes) => {
                out.push(b"BATCH".to_vec());
                for fix in fixes {
                    let args = fix.to_args();
                    out.push(num(args.len() as u64));
                    out.extend(args);
                }
            }
            Effect::Send { peer, tid, takes, to } => {
                out.extend([b"SEND".to_vec(), peer.to_vec(), tid.to_vec()]);
                // `TO <8 hex>` before the takes (numbers): an effect from
                // before incarnations has none.
                if let Some(to) = to {
                    out.extend([b"TO".to_vec(), format!("{to:08x}").into_bytes()]);
                }
                push_takes(&mut out, takes);
            }
            Effect::SentTo(sent_to) => {
                out.push(b"SENTTO".to_vec());
                for (peer, to) in sent_to {
                    out.extend([peer.to_vec(), format!("{to:08x}").into_bytes()]);
                }
            }
            Effect::Recv { peer, sent_total, credits } => {
                out.extend([b"RECV".to_vec(), peer.to_vec(), num(*sent_total)]);
                push_takes(&mut out, credits);
            }
            Effect::Entrants(entrants) => {
                out.push(b"ENTER".to_vec());
                for e in entrants {
                    let code = u64::from(e.result.code()) | if e.reqid.is_some() { 4 } else { 0 };
                    out.extend([e.user.to_vec(), num(e.qty), num(code)]);
                    out.extend(e.reqid.iter().map(|r| r.to_vec()));
                }
            }
            Effect::Drawn { stock, examined, records, begin } => {
                match begin {
                    None => out.push(b"DRAWN".to_vec()),
                    Some(b) => {
                        out.push(b"DRAWBEGIN".to_vec());
                        push_begin(&mut out, b);
                    }
                }
                out.extend([num(*stock), num(u64::from(*examined))]);
                push_records(&mut out, records);
            }
            Effect::Promoted(records) => {
                out.push(b"PROMOTED".to_vec());
                push_records(&mut out, records);
            }
            Effect::DrawProgress { stock, examined, begin } => {
                out.extend([b"DRAWSTATE".to_vec(), num(u64::from(*examined))]);
                out.extend(stock.map(num));
                if let (Some(_), Some(b)) = (stock, begin) {
                    push_begin(&mut out, b);
                }
            }
            Effect::Transfers { allocation, peers, tids } => {
                out.push(b"TRANSFERS".to_vec());
                out.push(num(allocation.len() as u64));
                out.extend(allocation.iter().map(|&a| num(a)));
                out.push(num(peers.len() as u64));
                for (peer, c) in peers {
                    out.extend([peer.to_vec(), num(c.sent), num(c.received)]);
                }
                out.extend(tids.iter().map(|t| t.to_vec()));
            }
        }
        out
    }

    fn parse(args: &[&[u8]]) -> ArgResult<Effect> {
        let (op, rest) = args.split_first().ok_or(ArgError::Arity)?;
        let mut r = Reader { args: rest, pos: 0 };
        let effect = match op.to_ascii_uppercase().as_slice() {
            b"INIT" => Effect::Init(r.config()?),
            b"RECORDS" => {
                let recs = r.records()?;
                if recs.is_empty() {
                    return Err(ArgError::Arity);
                }
                Effect::Records(recs)
            }
            b"ENTER" => {
                let mut entrants = Vec::new();
                while !r.done() {
                    let user = r.id()?;
                    let qty = r.u64("qty", 1, MAX_TOTAL)?;
                    let code = r.u64("entrant code", 0, 7)?;
                    let result = EntrantResult::from_code(code & 3).ok_or(ArgError::Arity)?;
                    let reqid = if code & 4 != 0 { Some(r.id()?) } else { None };
                    entrants.push(EntrantRec { user, qty, reqid, result });
                }
                if entrants.is_empty() {
                    return Err(ArgError::Arity);
                }
                Effect::Entrants(entrants)
            }
            b"DRAWN" | b"DRAWBEGIN" => {
                let begin = if op.eq_ignore_ascii_case(b"DRAWBEGIN") { Some(r.begin()?) } else { None };
                let stock = r.u64("stock", 0, MAX_TOTAL)?;
                let examined = r.u64("examined", 0, u64::from(u32::MAX))? as u32;
                Effect::Drawn { stock, examined, records: r.records()?, begin }
            }
            b"PROMOTED" => {
                let recs = r.records()?;
                if recs.is_empty() {
                    return Err(ArgError::Arity);
                }
                Effect::Promoted(recs)
            }
            b"DRAWSTATE" => {
                let examined = r.u64("examined", 0, u64::from(u32::MAX))? as u32;
                let stock = if r.done() { None } else { Some(r.u64("stock", 0, MAX_TOTAL)?) };
                // Without what the first DRAW fixed: a draw from before v2.
                let begin = if r.done() { None } else { Some(r.begin()?) };
                Effect::DrawProgress { stock, examined, begin }
            }
            b"PENDING" => Effect::Records(vec![r.pending()?]),
            b"UNFENCE" => Effect::Unfence(r.replid()?),
            b"RELEASE" => Effect::Release(r.id()?),
            b"CONFIRM" => Effect::Confirm(r.id()?),
            b"EXPIRE" => {
                let mut ids = Vec::new();
                while !r.done() {
                    ids.push(r.id()?);
                }
                if ids.is_empty() {
                    return Err(ArgError::Arity);
                }
                Effect::Expire(ids)
            }
            b"RETAKE" => {
                let id = r.id()?;
                let mut takes = Vec::new();
                while !r.done() {
                    takes.push(r.take()?);
                }
                Effect::Retake(id, takes)
            }
            b"BATCH" => {
                let mut fixes = Vec::new();
                while !r.done() {
                    let n = r.u64("batch part", 1, MAX_TOTAL)? as usize;
                    let part = r.args.get(r.pos..r.pos.saturating_add(n)).ok_or(ArgError::Arity)?;
                    let fix = Effect::parse(part)?;
                    if !matches!(fix, Effect::Confirm(_) | Effect::Retake(..) | Effect::Records(_)) {
                        return Err(ArgError::Msg("ERR a batch holds CONFIRM, RETAKE and RECORDS effects".into()));
                    }
                    r.pos += n;
                    fixes.push(fix);
                }
                if fixes.is_empty() {
                    return Err(ArgError::Arity);
                }
                Effect::Batch(fixes)
            }
            b"SEND" => {
                let (peer, tid) = (r.id()?, r.id()?);
                let to = if r.next_is(b"TO") { Some(crate::wire::args::parse_incarnation(r.raw()?)?) } else { None };
                Effect::Send { peer, tid, takes: r.takes()?, to }
            }
            b"SENTTO" => {
                let mut sent_to = Vec::new();
                while !r.done() {
                    let peer = r.id()?;
                    sent_to.push((peer, crate::wire::args::parse_incarnation(r.raw()?)?));
                }
                if sent_to.is_empty() || sent_to.len() > MAX_PEERS {
                    return Err(ArgError::Arity);
                }
                Effect::SentTo(sent_to)
            }
            b"RECV" => {
                let peer = r.id()?;
                let sent_total = r.u64("sent_total", 1, u64::MAX)?;
                Effect::Recv { peer, sent_total, credits: r.takes()? }
            }
            b"TRANSFERS" => r.transfers()?,
            _ => return Err(ArgError::Msg("ERR unknown effect".into())),
        };
        if !r.done() {
            return Err(ArgError::Arity);
        }
        Ok(effect)
    }
}

/// RESERVE's effect, a new pending record with one take, has a short wire
/// form, `PENDING id user qty:created:deadline:bucket`: replication costs
/// grow with the number of arguments, and this one runs on every sale.
pub fn pending_form(r: &NewRecord) -> Option<Digits> {
    let [take] = r.takes else { return None };
    if r.state != State::Pending || take.qty != r.qty {
        return None;
    }
    let mut d = Digits::default();
    for (i, n) in [r.qty, r.created_ms, r.deadline_ms, u64::from(take.bucket)].into_iter().enumerate() {
        if i > 0 {
            d.push(b':');
        }
        d.push_u64(n);
    }
    Some(d)
}

/// The stream entry that travels inside a PENDING effect: the id the master
/// gave it and, when the sale trims its stream, the exact length the master
/// left after trimming (what Redis propagates for `XADD ... MAXLEN ~`).
/// Replicas and AOF replay append the entry themselves with this id, so a
/// RESERVE replicates one command instead of the effect plus an XADD.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StreamTail {
    pub ms: u64,
    pub seq: u64,
    pub length: Option<u64>,
}

/// Splits `PENDING id user nums [ms-seq [length]]` (the arguments after
/// `SECKILL.EFFECT key`) into the effect's own arguments and the stream
/// entry's tail. Any other effect is returned whole.
pub fn split_stream_tail<'a, 'b>(args: &'a [&'b [u8]]) -> ArgResult<(&'a [&'b [u8]], Option<StreamTail>)> {
    const PENDING_ARGS: usize = 4;
    let is_pending = args.first().is_some_and(|op| op.eq_ignore_ascii_case(b"PENDING"));
    if !is_pending || args.len() <= PENDING_ARGS {
        return Ok((args, None));
    }
    let (effect, tail) = args.split_at(PENDING_ARGS);
    let (ms, seq) = match tail {
        [id] | [id, _] => {
            let dash = id.iter().position(|&b| b == b'-').ok_or_else(|| ArgError::Msg("ERR invalid stream entry id in effect".into()))?;
            (parse_u64("stream entry id", &id[..dash], 0, u64::MAX)?, parse_u64("stream entry id", &id[dash + 1..], 0, u64::MAX)?)
        }
        _ => return Err(ArgError::Arity),
    };
    let length = match tail {
        [_, n] => Some(parse_u64("stream length", n, 0, i64::MAX as u64)?),
        _ => None,
    };
    Ok((effect, Some(StreamTail { ms, seq, length })))
}

/// What the first DRAW fixed, as `DRAWBEGIN` and `DRAWSTATE` carry it:
/// the draw seed's 64 hex digits, then the beacon value (empty: none).
fn push_begin(out: &mut Vec<Vec<u8>>, b: &DrawBegin) {
    out.push(crate::rules::sale::draw_state::hex(&b.draw_seed).into_vec());
    out.push(b.beacon.as_deref().unwrap_or_default().to_vec());
}

/// `N` bytes from `2 * N` hex digits, as the effects carry a draw seed
/// or the key of generated ids; anything else is `ERR bad <what>`.
fn parse_hex<const N: usize>(hex: &[u8], what: &str) -> ArgResult<[u8; N]> {
    let bad = || ArgError::Msg(format!("ERR bad {what}"));
    if hex.len() != 2 * N {
        return Err(bad());
    }
    let digit = |b: u8| (b as char).to_digit(16).map(|d| d as u8);
    let mut out = [0u8; N];
    for (i, pair) in hex.chunks(2).enumerate() {
        out[i] = digit(pair[0]).zip(digit(pair[1])).map(|(h, l)| h << 4 | l).ok_or_else(bad)?;
    }
    Ok(out)
}

fn parse_seed(hex: &[u8]) -> ArgResult<[u8; 32]> {
    parse_hex(hex, "draw seed")
}

fn num(n: u64) -> Vec<u8> {
    n.to_string().into_bytes()
}

/// Records as RECORDS writes them: `id user qty state created deadline
/// ntakes (bucket qty)...` each.
fn push_records(out: &mut Vec<Vec<u8>>, recs: &[Reservation]) {
    for r in recs {
        out.push(r.id.to_vec());
        out.push(r.user.to_vec());
        for n in [r.qty, u64::from(r.state.code()), r.created_ms, r.deadline_ms, r.takes.len() as u64] {
            out.push(num(n));
        }
        push_takes(out, &r.takes);
    }
}

fn push_takes(out: &mut Vec<Vec<u8>>, takes: &[Take]) {
    for t in takes {
        out.push(num(u64::from(t.bucket)));
        out.push(num(t.qty));
    }
}

struct Reader<'a> {
    args: &'a [&'a [u8]],
    pos: usize,
}

impl<'a> Reader<'a> {
    fn done(&self) -> bool {
        self.pos >= self.args.len()
    }

    /// Whether the next argument is `word` (any case); consumes it if so.
    fn next_is(&mut self, word: &[u8]) -> bool {
        let hit = self.args.get(self.pos).is_some_and(|a| a.eq_ignore_ascii_case(word));
        self.pos += usize::from(hit);
        hit
    }

    fn raw(&mut self) -> ArgResult<&'a [u8]> {
        let v = self.args.get(self.pos).ok_or(ArgError::Arity)?;
        self.pos += 1;
        Ok(v)
    }

    fn u64(&mut self, name: &str, min: u64, max: u64) -> ArgResult<u64> {
        let v = self.raw()?;
        parse_u64(name, v, min, max)
    }

    fn id(&mut self) -> ArgResult<Box<[u8]>> {
        let v = self.raw()?;
        crate::wire::args::parse_id("id", v).map(Into::into)
    }

    /// A replication id: 40 lower-case hex digits.
    fn replid(&mut self) -> ArgResult<ReplId> {
        ReplId::parse(self.raw()?).ok_or_else(|| ArgError::Msg("ERR bad replication id in effect".into()))
    }

    fn take(&mut self) -> ArgResult<Take> {
        let bucket = self.u64("bucket", 0, u64::from(MAX_SHARDS) - 1)? as u32;
        let qty = self.u64("take", 1, MAX_TOTAL)?;
        Ok(Take { bucket, qty })
    }

    /// Takes to the end, at least one.
    fn takes(&mut self) -> ArgResult<Vec<Take>> {
        let mut takes = Vec::new();
        while !self.done() {
            takes.push(self.take()?);
        }
        if takes.is_empty() {
            return Err(ArgError::Arity);
        }
        Ok(takes)
    }

    /// `n a0 .. a(n-1) npeers (peer sent received)* tid*`.
    fn transfers(&mut self) -> ArgResult<Effect> {
        let n = self.u64("buckets", 1, u64::from(MAX_SHARDS))?;
        let allocation = (0..n).map(|_| self.u64("allocation", 0, MAX_TOTAL)).collect::<ArgResult<Vec<_>>>()?;
        let npeers = self.u64("peers", 0, self.args.len() as u64)?;
        let mut peers = Vec::new();
        for _ in 0..npeers {
            let peer = self.id()?;
            let c = Counters { sent: self.u64("sent", 0, u64::MAX)?, received: self.u64("received", 0, u64::MAX)? };
            peers.push((peer, c));
        }
        let mut tids = Vec::new();
        while !self.done() {
            tids.push(self.id()?);
        }
        Ok(Effect::Transfers { allocation, peers, tids })
    }

    fn config(&mut self) -> ArgResult<SaleConfig> {
        let total = self.u64("total", 0, MAX_TOTAL)?;
        let shards = self.u64("shards", 1, u64::from(MAX_SHARDS))? as u32;
        let limit = self.u64("limit", 1, MAX_TOTAL)?;
        let hold_ms = self.u64("hold", 0, u64::MAX)?;
        let start_ms = self.u64("start", 0, u64::MAX)?;
        let end_ms = self.u64("end", 1, u64::MAX)?;
        let tag = self.u64("tag", 0, u64::from(u32::MAX))? as u32;
        // `[STREAM key maxlen [OWNER key]] [SPLIT round n peer...]`; an
        // effect without OWNER (from before owners) leaves it empty for the
        // caller to fill with the effect's key.
        let stream = if self.next_is(b"STREAM") {
            let key: Box<[u8]> = self.raw()?.into();
            let maxlen = self.u64("maxlen", 0, i64::MAX as u64)?;
            let owner: Box<[u8]> = if self.next_is(b"OWNER") { self.id()? } else { Box::default() };
            Some(StreamConfig { key, maxlen: (maxlen > 0).then_some(maxlen), owner })
        } else {
            None
        };
        let split = if self.next_is(b"SPLIT") {
            let round = self.raw()?;
            let n = self.u64("peers", 1, MAX_PEERS as u64)? as usize;
            let peers = self.args.get(self.pos..self.pos + n).ok_or(ArgError::Arity)?;
            self.pos += n;
            Some(SplitConfig::new(None, round, peers)?)
        } else {
            None
        };
        let draw = if self.next_is(b"DRAW") { Some(parse_seed(self.raw()?)?) } else { None };
        let beacon = if draw.is_some() && self.next_is(b"BEACON") { Some(self.raw()?.into()) } else { None };
        let fence = if self.next_is(b"FENCE") { Some(self.replid()?) } else { None };
        // An effect from before id keys has none: the sale keeps `<tag>-<seq>`.
        let id_key = if self.next_is(b"IDKEY") { Some(parse_hex(self.raw()?, "id key in effect")?) } else { None };
        if !self.done() {
            return Err(ArgError::Msg("ERR bad INIT effect".into()));
        }
        let config = SaleConfig { total, shards, limit, hold_ms, start_ms, end_ms, stream, tag, split, draw, beacon, fence, id_key };
        config.check()?;
        Ok(config)
    }

    /// `S-hex beacon` (see `push_begin`).
    fn begin(&mut self) -> ArgResult<DrawBegin> {
        let draw_seed = parse_seed(self.raw()?)?;
        let beacon = self.raw()?;
        if beacon.len() > MAX_BEACON_VALUE {
            return Err(ArgError::Msg("ERR bad beacon value in effect".into()));
        }
        Ok(DrawBegin { beacon: (!beacon.is_empty()).then(|| beacon.into()), draw_seed })
    }

    /// `id user qty:created:deadline:bucket`, see `pending_form`.
    fn pending(&mut self) -> ArgResult<Reservation> {
        let id = self.id()?;
        let user = self.id()?;
        let packed = self.raw()?;
        let mut parts = packed.split(|&b| b == b':');
        let mut next = |name, min, max| parse_u64(name, parts.next().unwrap_or_default(), min, max);
        let qty = next("qty", 1, MAX_TOTAL)?;
        let created_ms = next("created", 0, u64::MAX)?;
        let deadline_ms = next("deadline", 0, u64::MAX)?;
        let bucket = next("bucket", 0, u64::from(MAX_SHARDS) - 1)? as u32;
        if parts.next().is_some() {
            return Err(ArgError::Arity);
        }
        let takes = vec![Take { bucket, qty }];
        Ok(Reservation { id, user, qty, state: State::Pending, created_ms, deadline_ms, takes })
    }

    /// Records to the end.
    fn records(&mut self) -> ArgResult<Vec<Reservation>> {
        let mut recs = Vec::new();
        while !self.done() {
            recs.push(self.record()?);
        }
        Ok(recs)
    }

    fn record(&mut self) -> ArgResult<Reservation> {
        let id = self.id()?;
        let user = self.id()?;
        let qty = self.u64("qty", 1, MAX_TOTAL)?;
        let state = State::from_code(self.u64("state", 0, 3)?).ok_or(ArgError::Arity)?;
        let created_ms = self.u64("created", 0, u64::MAX)?;
        let deadline_ms = self.u64("deadline", 0, u64::MAX)?;
        let n = self.u64("takes", 0, u64::from(MAX_SHARDS))?;
        let takes = (0..n).map(|_| self.take()).collect::<ArgResult<Vec<_>>>()?;
        Ok(Reservation { id, user, qty, state, created_ms, deadline_ms, takes })
    }
}

#[cfg(test)]
#[path = "tests/effect_args.rs"]
mod tests;
