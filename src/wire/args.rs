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
mod tests {
    use super::*;

    #[test]
    fn draw_and_init_beacon() {
        let ok = |args: &[&[u8]]| parse_draw(args).map(|(n, b)| (n, b.map(<[u8]>::to_vec)));
        assert_eq!(ok(&[]), Ok((1000, None)));
        assert_eq!(ok(&[b"BEACON", b"v", b"COUNT", b"3"]), Ok((3, Some(b"v".to_vec()))));
        assert_eq!(ok(&[b"count", b"2", b"beacon", b""]), Ok((2, Some(Vec::new()))), "the length is checked with the sale");
        assert!(msg(ok(&[b"BEACON"])).contains("BEACON needs a value"));
        assert!(msg(ok(&[b"BEACON", b"a", b"BEACON", b"a"])).contains("given twice"));
        let init = |extra: &[&[u8]]| {
            let mut args: Vec<&[u8]> = vec![b"10", b"END", b"100"];
            args.extend_from_slice(extra);
            parse_init(b"k", &args)
        };
        assert_eq!(init(&[b"DRAW", b"BEACON", b"drand 1"]).unwrap().sale.beacon.as_deref(), Some(&b"drand 1"[..]));
        assert_eq!(init(&[b"BEACON", b"drand 1", b"DRAW"]).unwrap().sale.beacon.as_deref(), Some(&b"drand 1"[..]));
        assert_eq!(msg(init(&[b"BEACON", b"x"])), "ERR BEACON needs DRAW");
        assert_eq!(msg(init(&[b"DRAW", b"BEACON", b""])), "ERR BEACON name must be 1 to 256 bytes");
        assert_eq!(msg(init(&[b"DRAW", b"BEACON", &[b'n'; 257]])), "ERR BEACON name must be 1 to 256 bytes");
        assert!(init(&[b"DRAW", b"BEACON", &[b'n'; 256]]).is_ok());
    }

    fn msg<T: std::fmt::Debug>(r: ArgResult<T>) -> String {
        match r {
            Err(ArgError::Msg(m)) => m,
            other => panic!("expected a message, got {other:?}"),
        }
    }

    #[test]
    fn numbers() {
        assert_eq!(parse_u64("N", b"42", 0, 100), Ok(42));
        assert!(msg(parse_u64("N", b"-1", 0, 100)).contains("negative"));
        assert!(msg(parse_u64("N", b"1x", 0, 100)).contains("not an integer"));
        assert!(msg(parse_u64("N", b"", 0, 100)).contains("not an integer"));
        assert!(msg(parse_u64("N", b"+1", 0, 100)).contains("not an integer"));
        assert!(msg(parse_u64("N", b"18446744073709551616", 0, u64::MAX)).contains("64 bits"));
        assert_eq!(parse_u64("N", b"18446744073709551615", 0, u64::MAX), Ok(u64::MAX));
        assert!(msg(parse_u64("N", b"0", 1, 100)).contains("from 1 to 100"));
    }

    #[test]
    fn init_defaults_and_options() {
        let a = parse_init(b"k", &[b"10"]).unwrap();
        assert_eq!((a.sale.total, a.sale.shards, a.sale.limit, a.sale.hold_ms, a.replace), (10, 1, 1, 0, false));
        let a = parse_init(
            b"s:{1}",
            &[b"10", b"shards", b"4", b"LIMIT", b"2", b"HOLD", b"500", b"STREAM", b"s:{1}:ev", b"MAXLEN", b"100", b"REPLACE"],
        )
        .unwrap();
        assert_eq!((a.sale.shards, a.sale.limit, a.sale.hold_ms, a.replace), (4, 2, 500, true));
        let stream = a.sale.stream.unwrap();
        assert_eq!((stream.maxlen, &*stream.owner), (Some(100), &b"s:{1}"[..]));
        let a = parse_init(b"k", &[b"10", b"SPLIT", b"r1", b"3", b"p2", b"p0", b"p1", b"REPLACE"]).unwrap();
        let split = a.sale.split.unwrap();
        assert_eq!((&*split.round, split.peers.len(), &*split.peers[0]), (&b"r1"[..], 3, &b"p0"[..]));
        assert!(split.declares(b"p2") && !split.declares(b"p3") && a.replace);
        assert!(!parse_init(b"k", &[b"10"]).unwrap().fence);
        let a = parse_init(b"k", &[b"10", b"fence", b"LIMIT", b"2", b"DRAW", b"END", b"9"]).unwrap();
        assert!(a.fence && a.sale.draw.is_some() && a.sale.fence.is_none(), "the master records the id");
    }

    #[test]
    fn init_refusals() {
        assert_eq!(parse_init(b"k", &[]), Err(ArgError::Arity));
        assert!(msg(parse_init(b"k", &[b"10", b"SHARDS", b"0"])).contains("SHARDS"));
        assert!(msg(parse_init(b"k", &[b"10", b"SHARDS", b"2", b"SHARDS", b"2"])).contains("twice"));
        assert!(msg(parse_init(b"k", &[b"10", b"BOGUS"])).contains("'BOGUS'"));
        assert!(msg(parse_init(b"k", &[b"10", b"LIMIT"])).contains("needs a value"));
        assert!(msg(parse_init(b"k", &[b"10", b"START", b"5", b"END", b"5"])).contains("before END"));
        assert!(msg(parse_init(b"a", &[b"10", b"STREAM", b"b"])).contains("slot"));
        assert!(msg(parse_init(b"a", &[b"10", b"STREAM", b"a"])).contains("differ"));
        assert!(msg(parse_init(b"k", &[b"1000000000000001"])).contains("TOTAL"));
        assert!(msg(parse_init(b"k", &[b"10", b"SPLIT", b"r", b"2", b"a"])).contains("more than the peers"));
        assert!(msg(parse_init(b"k", &[b"10", b"SPLIT", b"r", b"0"])).contains("SPLIT peer count"));
        assert!(msg(parse_init(b"k", &[b"10", b"SPLIT", b"r", b"1", b"k"])).contains("differ"));
        assert!(msg(parse_init(b"k", &[b"10", b"SPLIT", b"r", b"2", b"a", b"a"])).contains("twice"));
        assert!(msg(parse_init(b"k", &[b"10", b"SPLIT", b"", b"1", b"a"])).contains("round"));
        assert!(msg(parse_init(b"k", &[b"10", b"SPLIT", b"r", b"1025"])).contains("SPLIT peer count"));
        assert_eq!(msg(parse_init(b"k", &[b"10", b"FENCE", b"LIMIT", b"2", b"Fence"])), "ERR option FENCE given twice");
    }

    #[test]
    fn reserve_and_reconcile() {
        let r = parse_reserve(&[b"u1", b"QTY", b"3", b"REQID", b"r1"]).unwrap();
        assert_eq!((r.user, r.qty, r.reqid), (&b"u1"[..], 3, Some(&b"r1"[..])));
        assert!(msg(parse_reserve(&[b""])).contains("user id"));
        let long = vec![b'x'; 257];
        assert!(msg(parse_reserve(&[b"u", b"REQID", &long])).contains("REQID"));
        let c = parse_reconcile(&[b"ORDERS", b"1", b"r1", b"u1", b"2", b"APPLY"]).unwrap();
        assert!(c.apply && c.orders.unwrap().len() == 1);
        assert!(msg(parse_reconcile(&[b"APPLY"])).contains("ORDERS"));
        assert!(msg(parse_reconcile(&[b"ORDERS", b"2", b"r1", b"u1", b"2"])).contains("ORDERS"));
        assert_eq!(parse_rid(&[]), Err(ArgError::Arity));
        assert_eq!(parse_reconcile(&[b"FORMAT", b"json"]).unwrap().format, Format::Json);
        assert!(msg(parse_reconcile(&[b"FORMAT", b"xml"])).contains("FORMAT"));
        let args: [&[u8]; 3] = [b"r1", b"format", b"JSON"];
        assert_eq!(split_format(&args), Ok((&args[..1], Format::Json)));
        assert_eq!(split_format(&args[..1]), Ok((&args[..1], Format::Resp)));
        assert!(msg(split_format(&[b"r1", b"FORMAT", b"csv"])).contains("FORMAT"));
    }

    #[test]
    fn send_and_recv() {
        let a = parse_send(b"k", &[b"p", b"5", b"min", b"2", b"TID", b"t1", b"ROUND", b"r", b"TO", b"0000002a"]).unwrap();
        assert_eq!(a, SendArgs { peer: b"p", qty: 5, min: 2, tid: b"t1", round: b"r", to: Some(0x2a) });
        assert_eq!(parse_send(b"k", &[b"p", b"5", b"TID", b"t", b"round", b"r", b"to", b"ffffffff"]).unwrap().min, 1);
        assert!(msg(parse_send(b"k", &[b"p", b"5", b"TID", b"t"])).contains("ROUND is required"));
        assert_eq!(parse_send(b"k", &[b"p", b"5", b"TID", b"t", b"ROUND", b"r"]).unwrap().to, None);
        for bad in [&b"2a"[..], b"0000002A", b"00000002a", b"0000002g", b"+000002a"] {
            assert!(msg(parse_send(b"k", &[b"p", b"5", b"TID", b"t", b"ROUND", b"r", b"TO", bad])).contains("TO must be"));
        }
        assert!(msg(parse_send(b"k", &[b"p", b"5", b"TID", b"t", b"ROUND", b""])).contains("ROUND"));
        assert!(msg(parse_send(b"k", &[b"p", b"5", b"TID", b"t", b"ROUND", &[b'r'; 65]])).contains("ROUND"));
        assert!(msg(parse_send(b"k", &[b"p", b"5", b"TID", b"t", b"ROUND", b"r", b"ROUND", b"r"])).contains("twice"));
        assert_eq!(parse_send(b"k", &[b"p"]), Err(ArgError::Arity));
        assert!(msg(parse_send(b"k", &[b"k", b"5", b"TID", b"t"])).contains("peer"));
        assert!(msg(parse_send(b"k", &[b"", b"5", b"TID", b"t"])).contains("peer"));
        assert!(msg(parse_send(b"k", &[&[b'p'; 257], b"5", b"TID", b"t"])).contains("peer"));
        assert!(msg(parse_send(b"k", &[b"p", b"0", b"TID", b"t"])).contains("qty"));
        assert!(msg(parse_send(b"k", &[b"p", b"1000000000000001", b"TID", b"t"])).contains("qty"));
        assert!(msg(parse_send(b"k", &[b"p", b"5"])).contains("TID"));
        assert!(msg(parse_send(b"k", &[b"p", b"5", b"TID", b""])).contains("TID"));
        assert!(msg(parse_send(b"k", &[b"p", b"5", b"TID"])).contains("TID"));
        assert!(msg(parse_send(b"k", &[b"p", b"5", b"MIN", b"0", b"TID", b"t"])).contains("MIN"));
        assert!(msg(parse_send(b"k", &[b"p", b"5", b"MIN", b"1", b"MIN", b"1", b"TID", b"t"])).contains("twice"));
        assert!(msg(parse_send(b"k", &[b"p", b"5", b"TID", b"t", b"TID", b"t"])).contains("twice"));
        assert!(msg(parse_send(b"k", &[b"p", b"5", b"NOPE", b"TID", b"t"])).contains("NOPE"));
        let r = |args: &[&[u8]]| parse_recv(b"k", args).map(|a| (a.peer.to_vec(), a.sent_total, a.round.to_vec()));
        assert_eq!(r(&[b"p", b"18446744073709551615", b"ROUND", b"r1", b"TO", b"00000001"]), Ok((b"p".to_vec(), u64::MAX, b"r1".to_vec())));
        assert_eq!(parse_recv(b"k", &[b"p", b"1", b"to", b"0000000a", b"round", b"r"]).map(|a| a.to), Ok(Some(10)));
        assert_eq!(parse_recv(b"k", &[b"p", b"1", b"ROUND", b"r"]).map(|a| a.to), Ok(None));
        assert!(msg(r(&[b"p", b"1", b"TO", b"0000000a"])).contains("ROUND is required"));
        assert!(msg(r(&[b"p", b"1", b"ROUND", b"r", b"TO", b"1"])).contains("TO must be"));
        assert!(msg(r(&[b"p", b"1", b"ROUND", b"r", b"ROUND", b"r"])).contains("twice"));
        assert!(msg(r(&[b"p", b"18446744073709551616", b"ROUND", b"r"])).contains("sent_total"));
        assert!(msg(r(&[b"p", b"x", b"ROUND", b"r"])).contains("sent_total"));
        assert!(msg(r(&[b"k", b"1", b"ROUND", b"r"])).contains("peer"));
        assert!(msg(r(&[b"p", b"1"])).contains("ROUND is required"));
        assert!(msg(r(&[b"p", b"1", b"NOPE", b"r"])).contains("NOPE"));
        assert_eq!(r(&[b"p", b"1", b"2"]), Err(ArgError::Arity));
        assert_eq!(r(&[b"p", b"1", b"ROUND"]), Err(ArgError::Arity));
        assert_eq!(r(&[b"p"]), Err(ArgError::Arity));
    }

    #[test]
    fn sales_cursor_and_count() {
        let page = |from, count, with_counts| Ok(SalesArgs { from, count, with_counts });
        assert_eq!(parse_sales(&[b"0"]), page(None, DEFAULT_SALES_COUNT as usize, false));
        assert_eq!(parse_sales(&[b">a\0b", b"count", b"1000"]), page(Some(&b"a\0b"[..]), 1000, false));
        assert_eq!(parse_sales(&[b"0", b"withcounts", b"COUNT", b"5"]), page(None, 5, true));
        for bad in [&b"1"[..], b">", b"", b"00", b"a"] {
            assert!(msg(parse_sales(&[bad])).contains("cursor"), "{bad:?}");
        }
        assert!(msg(parse_sales(&[b"0", b"COUNT", b"1001"])).contains("COUNT"));
        assert!(msg(parse_sales(&[b"0", b"WITHSCORES"])).contains("WITHSCORES"));
        assert_eq!(parse_sales(&[]), Err(ArgError::Arity));
    }
}
