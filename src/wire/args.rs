//! Argument parsing for the user-facing commands: plain Rust over byte
//! slices, so it is unit-tested and fuzzed without Redis. Every argument is
//! checked here, before a command touches its key.

use crate::rules::config::{self, Bound, ConfigError, SaleConfig, SplitConfig, StreamConfig, MAX_ROUND, MAX_TOTAL};
use crate::rules::reconcile::Order;
use crate::rules::reservation::valid_id;
use crate::wire::slot::key_slot;

/// Why the arguments were refused. `Arity` becomes Redis's own message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ArgError {
    Arity,
    Msg(String),
}

pub type ArgResult<T> = Result<T, ArgError>;

fn err<T>(msg: impl Into<String>) -> ArgResult<T> {
    Err(ArgError::Msg(msg.into()))
}

/// Parses a decimal u64 in `min..=max`, naming `name` in every error.
pub fn parse_u64(name: &str, raw: &[u8], min: u64, max: u64) -> ArgResult<u64> {
    let digits = match raw.first() {
        Some(b'-') if raw.len() > 1 && raw[1..].iter().all(u8::is_ascii_digit) => {
            return err(format!("ERR {name} must not be negative"));
        }
        _ => raw,
    };
    if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
        return err(format!("ERR {name} is not an integer"));
    }
    let mut value: u64 = 0;
    for &d in digits {
        value = match value.checked_mul(10).and_then(|v| v.checked_add(u64::from(d - b'0'))) {
            Some(v) => v,
            None => return err(format!("ERR {name} is past 64 bits")),
        };
    }
    if value < min || value > max {
        return err(format!("ERR {name} must be from {min} to {max}"));
    }
    Ok(value)
}

/// Checks a user id or reservation id.
pub fn parse_id<'a>(name: &str, raw: &'a [u8]) -> ArgResult<&'a [u8]> {
    if valid_id(raw) {
        Ok(raw)
    } else {
        err(format!("ERR {name} must be 1 to 256 bytes"))
    }
}

/// An option word, upper-cased for matching; `None` if it cannot be one.
fn option_word(raw: &[u8]) -> Option<String> {
    (raw.len() <= 16 && raw.iter().all(u8::is_ascii_alphabetic)).then(|| raw.to_ascii_uppercase().iter().map(|&b| b as char).collect())
}

/// How an unknown option is named in its error: upper-cased like a plain
/// word, for any printable ASCII argument of at most 32 bytes (`#`, `x1`:
/// what a pasted comment or a typo sends); `None` for anything longer or
/// unprintable, which an error line should not carry.
fn shown_option(raw: &[u8]) -> Option<String> {
    (!raw.is_empty() && raw.len() <= 32 && raw.iter().all(|b| b.is_ascii_graphic()))
        .then(|| raw.to_ascii_uppercase().iter().map(|&b| b as char).collect())
}

fn unknown_option<T>(raw: &[u8]) -> ArgResult<T> {
    match shown_option(raw) {
        Some(word) => err(format!("ERR unknown option '{word}'")),
        None => err("ERR unknown option"),
    }
}

/// Walks `name value` option pairs, refusing repeats.
struct Options<'a> {
    args: &'a [&'a [u8]],
    pos: usize,
    seen: Vec<&'static str>,
}

impl<'a> Options<'a> {
    fn new(args: &'a [&'a [u8]]) -> Self {
        Options { args, pos: 0, seen: Vec::new() }
    }

    /// The next option word, or `None` at the end.
    fn next_word(&mut self) -> Option<&'a [u8]> {
        let word = self.args.get(self.pos)?;
        self.pos += 1;
        Some(word)
    }

    /// Marks `name` as seen; an error if it was already.
    fn once(&mut self, name: &'static str) -> ArgResult<()> {
        if self.seen.contains(&name) {
            return err(format!("ERR option {name} given twice"));
        }
        self.seen.push(name);
        Ok(())
    }

    fn value(&mut self, name: &'static str) -> ArgResult<&'a [u8]> {
        let v = self.args.get(self.pos).ok_or_else(|| ArgError::Msg(format!("ERR {name} needs a value")))?;
        self.pos += 1;
        Ok(v)
    }

    /// A numeric option within its configuration bound (`rules::config`).
    fn bounded(&mut self, b: Bound) -> ArgResult<u64> {
        self.number(b.name, b.min, b.max)
    }

    fn number(&mut self, name: &'static str, min: u64, max: u64) -> ArgResult<u64> {
        self.once(name)?;
        let v = self.value(name)?;
        parse_u64(name, v, min, max)
    }

    /// Whether the next word is `word` (case-insensitive); consumes it if so.
    fn peek_is(&mut self, word: &str) -> bool {
        let hit = self.args.get(self.pos).is_some_and(|a| a.eq_ignore_ascii_case(word.as_bytes()));
        if hit {
            self.pos += 1;
        }
        hit
    }
}

/// How a report (INFO, GET, RECONCILE) is sent: RESP fields, or one JSON
/// string for clients whose map decoders cannot hold nested arrays.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Format {
    #[default]
    Resp,
    Json,
}

fn format_value(raw: &[u8]) -> ArgResult<Format> {
    if raw.eq_ignore_ascii_case(b"JSON") {
        Ok(Format::Json)
    } else {
        err("ERR FORMAT must be JSON")
    }
}

/// A trailing `FORMAT JSON` (INFO and GET): the arguments before it, and the
/// format.
pub fn split_format<'a, 'b>(args: &'b [&'a [u8]]) -> ArgResult<(&'b [&'a [u8]], Format)> {
    match args {
        [rest @ .., word, value] if word.eq_ignore_ascii_case(b"FORMAT") => Ok((rest, format_value(value)?)),
        _ => Ok((args, Format::Resp)),
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InitArgs {
    /// The sale's rules; `tag` is left 0 for the master to draw.
    pub sale: SaleConfig,
    pub ttl_s: Option<u64>,
    pub replace: bool,
    /// `FENCE`: the master records its replication id in `sale.fence`.
    pub fence: bool,
}

/// Ten years: a TTL past this is a mistake, and it keeps `now + ttl` in range.
pub const MAX_TTL_S: u64 = 10 * 365 * 24 * 3600;

impl From<ConfigError> for ArgError {
    fn from(e: ConfigError) -> ArgError {
        ArgError::Msg(format!("ERR {}", e.0))
    }
}

/// `SECKILL.INIT key total [SHARDS n] [LIMIT q] [HOLD ms] [START ms] [END ms]
/// [TTL s] [STREAM skey [MAXLEN n]] [SPLIT round n peer...] [DRAW [BEACON name]] [FENCE]
/// [REPLACE]`;
/// `args` starts after the key.
pub fn parse_init(key: &[u8], args: &[&[u8]]) -> ArgResult<InitArgs> {
    let (total, rest) = args.split_first().ok_or(ArgError::Arity)?;
    let total = parse_u64(config::TOTAL.name, total, config::TOTAL.min, config::TOTAL.max)?;
    let mut sale = SaleConfig::plain(total, 1);
    let (mut ttl_s, mut replace, mut fence) = (None, false, false);
    let mut o = Options::new(rest);
    while let Some(word) = o.next_word() {
        match option_word(word).as_deref() {
            Some("SHARDS") => sale.shards = o.bounded(config::SHARDS)? as u32,
            Some("LIMIT") => sale.limit = o.bounded(config::LIMIT)?,
            Some("HOLD") => sale.hold_ms = o.bounded(config::HOLD)?,
            Some("START") => sale.start_ms = o.bounded(config::START)?,
            Some("END") => sale.end_ms = o.bounded(config::END)?,
            Some("TTL") => ttl_s = Some(o.number("TTL", 1, MAX_TTL_S)?),
            Some("STREAM") => {
                o.once("STREAM")?;
                let skey = o.value("STREAM")?;
                let maxlen = if o.peek_is("MAXLEN") { Some(o.bounded(config::MAXLEN)?) } else { None };
                sale.stream = Some(StreamConfig { key: skey.into(), maxlen, owner: key.into() });
            }
            Some("SPLIT") => {
                o.once("SPLIT")?;
                let round = o.value("SPLIT")?;
                let n = parse_u64(config::PEERS.name, o.value("SPLIT")?, config::PEERS.min, config::PEERS.max)? as usize;
                let peers = o
                    .args
                    .get(o.pos..o.pos + n)
                    .ok_or_else(|| ArgError::Msg("ERR SPLIT peer count is more than the peers given".into()))?;
                o.pos += n;
                sale.split = Some(SplitConfig::new(Some(key), round, peers)?);
            }
            Some("REPLACE") => {
                o.once("REPLACE")?;
                replace = true;
            }
            Some("DRAW") => {
                // The seed is the master's to draw (`commands::init`).
                o.once("DRAW")?;
                sale.draw = Some([0; 32]);
            }
            Some("BEACON") => {
                o.once("BEACON")?;
                sale.beacon = Some(o.value("BEACON")?.into());
            }
            Some("FENCE") => {
                // The id is the master's to record (`commands::init`).
                o.once("FENCE")?;
                fence = true;
            }
            _ => return unknown_option(word),
        }
    }
    // What each option's bound did not settle (START before END, ...).
    sale.check()?;
    if let Some(stream) = &sale.stream {
        if &*stream.key == key {
            return err("ERR STREAM key must differ from the sale key");
        }
        if key_slot(&stream.key) != key_slot(key) {
            return err("ERR STREAM key must hash to the sale key's slot: give both one hash tag, as sale:{1001} and sale:{1001}:events");
        }
    }
    Ok(InitArgs { sale, ttl_s, replace, fence })
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReserveArgs<'a> {
    pub user: &'a [u8],
    pub qty: u64,
    pub reqid: Option<&'a [u8]>,
}

/// `SECKILL.RESERVE key user [QTY n] [REQID id]`; `args` starts after the key.
/// QTY is checked against the sale's LIMIT once the sale is open.
pub fn parse_reserve<'a>(args: &'a [&'a [u8]]) -> ArgResult<ReserveArgs<'a>> {
    let (user, rest) = args.split_first().ok_or(ArgError::Arity)?;
    let mut out = ReserveArgs { user: parse_id("user id", user)?, qty: 1, reqid: None };
    let mut o = Options::new(rest);
    while let Some(word) = o.next_word() {
        match option_word(word).as_deref() {
            Some("QTY") => out.qty = o.number("QTY", 1, MAX_TOTAL)?,
            Some("REQID") => {
                o.once("REQID")?;
                out.reqid = Some(parse_id("REQID", o.value("REQID")?)?);
            }
            _ => return unknown_option(word),
        }
    }
    Ok(out)
}

/// DRAW's COUNT: winners per call at the most (it looks at 4 x COUNT
/// entrants at the most).
pub const MAX_DRAW_COUNT: u64 = 1_000;
pub const DEFAULT_DRAW_COUNT: u64 = 1000;
/// ENTRANTS' COUNT: entrants per page at the most.
pub const MAX_ENTRANTS_COUNT: u64 = 1000;
pub const DEFAULT_ENTRANTS_COUNT: u64 = 100;

/// `[COUNT n]`, alone: `n` from 1 to `max`, `default` without it.
fn parse_count(args: &[&[u8]], max: u64, default: u64) -> ArgResult<usize> {
    let mut count = default;
    let mut o = Options::new(args);
    while let Some(word) = o.next_word() {
        match option_word(word).as_deref() {
            Some("COUNT") => count = o.number("COUNT", 1, max)?,
            _ => return unknown_option(word),
        }
    }
    Ok(count as usize)
}

/// `SECKILL.DRAW key [COUNT n] [BEACON value]` (any order); `args` starts
/// after the key. The value's length is checked with the sale's beacon
/// rules, after the command's other errors (`Sale::check_beacon`).
pub fn parse_draw<'a>(args: &'a [&'a [u8]]) -> ArgResult<(usize, Option<&'a [u8]>)> {
    let (mut count, mut beacon) = (DEFAULT_DRAW_COUNT, None);
    let mut o = Options::new(args);
    while let Some(word) = o.next_word() {
        match option_word(word).as_deref() {
            Some("COUNT") => count = o.number("COUNT", 1, MAX_DRAW_COUNT)?,
            Some("BEACON") => {
                o.once("BEACON")?;
                beacon = Some(o.value("BEACON")?);
            }
            _ => return unknown_option(word),
        }
    }
    Ok((count as usize, beacon))
}

/// `SECKILL.ENTRANTS key cursor [COUNT n]`; `args` starts after the key.
pub fn parse_entrants(args: &[&[u8]]) -> ArgResult<(u64, usize)> {
    let (cursor, rest) = args.split_first().ok_or(ArgError::Arity)?;
    let cursor = parse_u64("cursor", cursor, 0, u64::MAX)?;
    Ok((cursor, parse_count(rest, MAX_ENTRANTS_COUNT, DEFAULT_ENTRANTS_COUNT)?))
}

/// SALES' COUNT: names per page at the most, and when not given.
pub const MAX_SALES_COUNT: u64 = 1000;
pub const DEFAULT_SALES_COUNT: u64 = 100;

/// `SECKILL.SALES cursor [COUNT n] [WITHCOUNTS]`, parsed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SalesArgs<'a> {
    /// The name the page starts at (`None`: the first page).
    pub from: Option<&'a [u8]>,
    pub count: usize,
    /// Each name followed by the sale's counts (`rules::report::Counts`).
    pub with_counts: bool,
}

/// `SECKILL.SALES cursor [COUNT n] [WITHCOUNTS]`; `args` starts at the
/// cursor: `0` (the first page) or a cursor SALES returned, `>` and the
/// name its next page starts at.
pub fn parse_sales<'a>(args: &[&'a [u8]]) -> ArgResult<SalesArgs<'a>> {
    let (cursor, rest) = args.split_first().ok_or(ArgError::Arity)?;
    let from = match cursor {
        [b'0'] => None,
        [b'>', name @ ..] if !name.is_empty() => Some(name),
        _ => return Err(ArgError::Msg("ERR cursor must be 0 or a cursor SECKILL.SALES returned".into())),
    };
    let mut a = SalesArgs { from, count: DEFAULT_SALES_COUNT as usize, with_counts: false };
    let mut o = Options::new(rest);
    while let Some(word) = o.next_word() {
        match option_word(word).as_deref() {
            Some("COUNT") => a.count = o.number("COUNT", 1, MAX_SALES_COUNT)? as usize,
            Some("WITHCOUNTS") => a.with_counts = true,
            _ => return unknown_option(word),
        }
    }
    Ok(a)
}

/// `SECKILL.RELEASE|CONFIRM|GET key reservation-id`.
pub fn parse_rid<'a>(args: &[&'a [u8]]) -> ArgResult<&'a [u8]> {
    match args {
        [rid] => parse_id("reservation id", rid),
        _ => Err(ArgError::Arity),
    }
}

/// Order rows one RECONCILE takes. A call's work (and, with APPLY, what it
/// replicates and appends to the stream) grows with its rows: this keeps a
/// call within a few milliseconds.
pub const MAX_ORDERS: usize = 1000;

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ReconcileArgs<'a> {
    pub expire: bool,
    pub orders: Option<Vec<Order<'a>>>,
    pub apply: bool,
    pub format: Format,
}

/// `SECKILL.RECONCILE key [EXPIRE] [ORDERS count rid user qty ...] [APPLY]
/// [FORMAT JSON]`.
pub fn parse_reconcile<'a>(args: &'a [&'a [u8]]) -> ArgResult<ReconcileArgs<'a>> {
    let mut out = ReconcileArgs::default();
    let mut o = Options::new(args);
    while let Some(word) = o.next_word() {
        match option_word(word).as_deref() {
            Some("EXPIRE") => {
                o.once("EXPIRE")?;
                out.expire = true;
            }
            Some("APPLY") => {
                o.once("APPLY")?;
                out.apply = true;
            }
            Some("FORMAT") => {
                o.once("FORMAT")?;
                out.format = format_value(o.value("FORMAT")?)?;
            }
            Some("ORDERS") => {
                let count = o.number("ORDERS", 1, u64::MAX)?;
                if count > MAX_ORDERS as u64 {
                    return err(format!("ERR ORDERS takes at most {MAX_ORDERS} rows per call: send the ledger in chunks"));
                }
                if count > (args.len() / 3) as u64 {
                    return err("ERR ORDERS count is more than the rows given");
                }
                let count = count as usize;
                let mut orders = Vec::with_capacity(count);
                for _ in 0..count {
                    let rid = parse_id("order reservation id", o.value("ORDERS")?)?;
                    let user = parse_id("order user id", o.value("ORDERS")?)?;
                    let qty = parse_u64("order qty", o.value("ORDERS")?, 1, MAX_TOTAL)?;
                    orders.push(Order { rid, user, qty });
                }
                out.orders = Some(orders);
            }
            _ => return unknown_option(word),
        }
    }
    if out.apply && out.orders.is_none() {
        return err("ERR APPLY needs ORDERS");
    }
    Ok(out)
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SendArgs<'a> {
    pub peer: &'a [u8],
    pub qty: u64,
    pub min: u64,
    pub tid: &'a [u8],
    pub round: &'a [u8],
    /// The receiving key's incarnation (`TO`): the peer's for SEND, the
    /// key's own for RECV. Optional, for clients from before incarnations
    /// (which are not protected against a re-created peer).
    pub to: Option<u32>,
}

/// An incarnation as INFO shows it: eight lowercase hex digits.
pub fn parse_incarnation(raw: &[u8]) -> ArgResult<u32> {
    let hex = raw.len() == 8 && raw.iter().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'));
    match std::str::from_utf8(raw).ok().filter(|_| hex).and_then(|s| u32::from_str_radix(s, 16).ok()) {
        Some(n) => Ok(n),
        None => err("ERR TO must be 8 lowercase hex digits: the receiving key's incarnation (INFO incarnation)"),
    }
}

fn parse_round(raw: &[u8]) -> ArgResult<&[u8]> {
    if raw.is_empty() || raw.len() > MAX_ROUND {
        return err(format!("ERR ROUND must be 1 to {MAX_ROUND} bytes"));
    }
    Ok(raw)
}

fn round_required<T>() -> ArgResult<T> {
    err("ERR ROUND is required: the split sale's round, so a transfer from another round changes nothing")
}

/// A peer key: an id-like name (1 to 256 bytes) other than the key itself.
fn parse_peer<'a>(key: &[u8], peer: &'a [u8]) -> ArgResult<&'a [u8]> {
    let peer = parse_id("peer", peer)?;
    if peer == key {
        return err("ERR peer must differ from the key: a key cannot send to itself");
    }
    Ok(peer)
}

/// `SECKILL.SEND key peer qty [MIN m] TID tid ROUND round [TO incarnation]`;
/// `args` starts after the key.
pub fn parse_send<'a>(key: &[u8], args: &'a [&'a [u8]]) -> ArgResult<SendArgs<'a>> {
    let [peer, qty, rest @ ..] = args else {
        return Err(ArgError::Arity);
    };
    let peer = parse_peer(key, peer)?;
    let qty = parse_u64("qty", qty, 1, MAX_TOTAL)?;
    let (mut min, mut tid, mut round, mut to) = (1, None, None, None);
    let mut o = Options::new(rest);
    while let Some(word) = o.next_word() {
        match option_word(word).as_deref() {
            Some("MIN") => min = o.number("MIN", 1, MAX_TOTAL)?,
            Some("TID") => {
                o.once("TID")?;
                tid = Some(parse_id("TID", o.value("TID")?)?);
            }
            Some("ROUND") => {
                o.once("ROUND")?;
                round = Some(parse_round(o.value("ROUND")?)?);
            }
            Some("TO") => {
                o.once("TO")?;
                to = Some(parse_incarnation(o.value("TO")?)?);
            }
            _ => return unknown_option(word),
        }
    }
    let tid = tid.ok_or_else(|| ArgError::Msg("ERR TID is required: it makes a retried SEND take nothing more".into()))?;
    let Some(round) = round else { return round_required() };
    Ok(SendArgs { peer, qty, min, tid, round, to })
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RecvArgs<'a> {
    pub peer: &'a [u8],
    pub sent_total: u64,
    pub round: &'a [u8],
    /// The incarnation of this key the peer counted `sent_total` for.
    pub to: Option<u32>,
}

/// `SECKILL.RECV key peer sent_total ROUND round [TO incarnation]` (the two
/// options in any order); `args` starts after the key. Any 64-bit total
/// parses; the sale refuses one it cannot hold.
pub fn parse_recv<'a>(key: &[u8], args: &'a [&'a [u8]]) -> ArgResult<RecvArgs<'a>> {
    let [peer, total, rest @ ..] = args else {
        return Err(ArgError::Arity);
    };
    let peer = parse_peer(key, peer)?;
    let sent_total = parse_u64("sent_total", total, 0, u64::MAX)?;
    let (mut round, mut to) = (None, None);
    let mut pairs = rest.chunks(2);
    for pair in pairs.by_ref() {
        match pair {
            [word, value] if word.eq_ignore_ascii_case(b"ROUND") && round.is_none() => round = Some(parse_round(value)?),
            [word, value] if word.eq_ignore_ascii_case(b"TO") && to.is_none() => to = Some(parse_incarnation(value)?),
            [word, _] if word.eq_ignore_ascii_case(b"ROUND") => return err("ERR option ROUND given twice"),
            [word, _] if word.eq_ignore_ascii_case(b"TO") => return err("ERR option TO given twice"),
            [_] => return Err(ArgError::Arity),
            [word, _] => return unknown_option(word),
            _ => return Err(ArgError::Arity),
        }
    }
    let Some(round) = round else { return round_required() };
    Ok(RecvArgs { peer, sent_total, round, to })
}

#[cfg(test)]
#[path = "tests/args.rs"]
mod tests;
