"""The SECKILL.* wire protocol as plain functions: argument lists, reply
parsing, reconcile chunking and merging, stream entries.

Nothing here talks to Redis, so all of it is tested without a server
(tests/test_protocol.py). `seckill.sale.Sale` is the thin redis-py layer that
sends these argument lists and parses the replies with these functions.
Replies may come as bytes or str (redis-py with or without
decode_responses) and as RESP2 flat arrays or RESP3 maps.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, Iterable, Iterator, List, Optional, Sequence, Tuple, Union

# RESERVE statuses, in the order the module checks them.
NO_SALE = 'NO_SALE'
DUPLICATE = 'DUPLICATE'
NOT_STARTED = 'NOT_STARTED'
ENDED = 'ENDED'
LIMIT = 'LIMIT'
SOLD_OUT = 'SOLD_OUT'
RESERVED = 'RESERVED'
DRAW = 'DRAW'                # a draw sale refuses RESERVE (checked right after NO_SALE)
FENCED = 'FENCED'            # a FENCE sale on a promoted or restarted master: retry later
RESERVE_STATUSES = (NO_SALE, DRAW, FENCED, DUPLICATE, NOT_STARTED, ENDED, LIMIT, SOLD_OUT,
                    RESERVED)

# UNFENCE replies (docs/commands.md, SECKILL.UNFENCE).
UNFENCED = 'UNFENCED'
NOT_FENCED = 'NOT_FENCED'
UNFENCE_STATUSES = (UNFENCED, NOT_FENCED, NO_SALE)

# RELEASE / CONFIRM statuses.
RELEASED = 'RELEASED'
ALREADY_RELEASED = 'ALREADY_RELEASED'
CONFIRMED = 'CONFIRMED'
ALREADY_CONFIRMED = 'ALREADY_CONFIRMED'
NOT_FOUND = 'NOT_FOUND'
RELEASE_STATUSES = (RELEASED, ALREADY_RELEASED, CONFIRMED, NOT_FOUND)
CONFIRM_STATUSES = (CONFIRMED, ALREADY_CONFIRMED, RELEASED, NOT_FOUND)

# RECONCILE order classes.
CLASSES = ('ok', 'pending', 'released', 'unknown', 'conflict')

# Stream events.
EVENTS = ('reserved', 'released', 'confirmed', 'expired')

# Report fields that are integers (everything but shards, invariant, peers
# and the id lists).
_INT_FIELDS = {'total', 'remaining', 'pending', 'confirmed', 'released', 'expired',
               'buyers', 'reservations', 'sent', 'received',
               'orders_ok', 'orders_pending', 'orders_released', 'orders_unknown',
               'orders_conflict'}

# A draw sale's report fields (docs/draw-sales.md): integers, nil allowed
# (draw_stock is nil before the first DRAW).
_OPT_INT_FIELDS = {'entrants', 'drawn', 'left_to_draw', 'waitlist', 'draw_stock'}

# The largest chunk sent by default: the module bounds the rows per call.
DEFAULT_CHUNK = 1000

MAX_ID_BYTES = 256

MAX_BEACON_NAME = 256        # INIT ... DRAW BEACON name: 1..256 bytes
MAX_BEACON_VALUE = 1024      # DRAW ... BEACON value: 1..1024 bytes


class ProtocolError(ValueError):
    """A reply that does not have the shape docs/commands.md gives it."""


class SaleMissing(RuntimeError):
    """The sale key does not exist (never created, expired, or lost)."""


def text(value: Any) -> Any:
    """bytes -> str (UTF-8); anything else unchanged."""
    if isinstance(value, (bytes, bytearray)):
        return bytes(value).decode('utf-8', 'surrogateescape')
    return value


def _int(value: Any, what: str) -> int:
    try:
        return int(text(value))
    except (TypeError, ValueError):
        raise ProtocolError('%s is not an integer: %r' % (what, value)) from None


def _status(value: Any, allowed: Sequence[str], command: str) -> str:
    status = text(value)
    if status not in allowed:
        raise ProtocolError('%s answered an unknown status %r' % (command, status))
    return status


def _check_id(value: str, what: str) -> str:
    if not isinstance(value, str):
        value = str(value)
    n = len(value.encode('utf-8'))
    if n < 1 or n > MAX_ID_BYTES:
        raise ValueError('%s must be 1 to %d bytes, got %d' % (what, MAX_ID_BYTES, n))
    return value


def sized_arg(value: Union[str, bytes], hi: int, what: str) -> Union[str, bytes]:
    """A BEACON name or value as sent: 1..hi bytes (a str as UTF-8; what a
    decoding client could not decode comes back through surrogateescape,
    as `text` makes it)."""
    if not isinstance(value, (str, bytes, bytearray)):
        raise TypeError('%s must be str or bytes, got %r' % (what, value))
    raw = bytes(value) if isinstance(value, (bytes, bytearray)) else value.encode('utf-8', 'surrogateescape')
    if not 1 <= len(raw) <= hi:
        raise ValueError('%s must be 1 to %d bytes' % (what, hi))
    return bytes(value) if isinstance(value, bytearray) else value


def beacon_name_arg(name: Union[str, bytes]) -> Union[str, bytes]:
    """INIT's `BEACON name` (1..256 bytes), checked as the server does."""
    return sized_arg(name, MAX_BEACON_NAME, 'BEACON name')


# ---------------------------------------------------------------- results

@dataclass(frozen=True)
class Reserved:
    """SECKILL.RESERVE's reply: [status, reservation id or nil, remaining].
    `replicated`: None unless reserve() was asked to WAIT (`wait=`); then
    whether the required replicas had the reservation within the timeout."""
    status: str
    rid: Optional[str]
    remaining: int
    replicated: Optional[bool] = None

    @property
    def ok(self) -> bool:
        """The caller holds the reservation `rid` (new, or the retry of one)."""
        return self.status in (RESERVED, DUPLICATE)


class SplitReserved(Reserved):
    """SplitSale.reserve's answer: a Reserved (`remaining`: the units left on
    the buyer's home part after the call, 0 for SOLD_OUT and NO_SALE) that
    still behaves as the (status, rid) tuple it used to be for old callers:
    it unpacks into two values, indexes, and equals that tuple."""

    def _pair(self) -> tuple:
        return (self.status, self.rid)

    def __iter__(self):
        return iter(self._pair())

    def __getitem__(self, i):
        return self._pair()[i]

    def __len__(self) -> int:
        return 2

    def __eq__(self, other: object) -> bool:
        if isinstance(other, tuple):
            return self._pair() == other
        return super().__eq__(other)

    def __hash__(self) -> int:
        return hash((self.status, self.rid, self.remaining))


@dataclass(frozen=True)
class Settled:
    """SECKILL.RELEASE / SECKILL.CONFIRM's reply: [status, remaining].
    `replicated`: as Reserved's (confirm(..., wait=...))."""
    status: str
    remaining: int
    replicated: Optional[bool] = None


@dataclass
class ReconcileResult:
    """RECONCILE over all chunks: class counts and ids summed, the sale's
    report as it stood after the last chunk."""
    counts: Dict[str, int] = field(default_factory=lambda: {c: 0 for c in CLASSES})
    ids: Dict[str, List[str]] = field(default_factory=lambda: {c: [] for c in CLASSES if c != 'ok'})
    report: Optional[Dict[str, Any]] = None
    calls: int = 0

    @property
    def clean(self) -> bool:
        """Every order row is `ok` (confirmed in the sale)."""
        return all(self.counts[c] == 0 for c in CLASSES if c != 'ok')


# ---------------------------------------------------------------- arguments

def init_args(key: str, total: int, *, shards: Optional[int] = None, limit: Optional[int] = None,
              hold_ms: Optional[int] = None, start_ms: Optional[int] = None,
              end_ms: Optional[int] = None, ttl_s: Optional[int] = None,
              stream: Optional[str] = None, maxlen: Optional[int] = None,
              replace: bool = False, split: Optional[Sequence[Any]] = None,
              draw: bool = False, fence: bool = False,
              beacon: Optional[Union[str, bytes]] = None) -> List[Any]:
    """SECKILL.INIT's argument list. Range checks stay with the module (it
    names the bad argument); this only refuses what cannot be sent.
    `split`: the `SPLIT round n peer ...` words of a split sale's key
    (seckill.split_protocol.Layout.split_args). `draw`: a draw sale
    (docs/draw-sales.md; END is required). `fence`: a FENCE sale, which
    refuses to sell (FENCED) on a master promoted or restarted since INIT
    until SECKILL.UNFENCE (docs/replication.md). `beacon`: a draw sale's
    `BEACON name` (1..256 bytes), the public value its first DRAW must take
    (docs/draw-sales.md)."""
    if draw and end_ms is None:
        raise ValueError('a draw sale needs end_ms: the end of registration')
    if beacon is not None and not draw:
        raise ValueError('a beacon needs a draw sale (draw=True)')
    if maxlen is not None and stream is None:
        raise ValueError('maxlen needs a stream')
    args: List[Any] = ['SECKILL.INIT', key, int(total)]
    for name, value in (('SHARDS', shards), ('LIMIT', limit), ('HOLD', hold_ms),
                        ('START', start_ms), ('END', end_ms), ('TTL', ttl_s)):
        if value is not None:
            args += [name, int(value)]
    if stream is not None:
        args += ['STREAM', stream]
        if maxlen is not None:
            args += ['MAXLEN', int(maxlen)]
    if split:
        args += list(split)
    if draw:
        args.append('DRAW')
        if beacon is not None:
            args += ['BEACON', beacon_name_arg(beacon)]
    if fence:
        args.append('FENCE')
    if replace:
        args.append('REPLACE')
    return args


def parse_init(reply: Any) -> bool:
    """True when the sale was created or replaced, False when it existed."""
    status = text(reply)
    if status is True or status == 'OK':
        return True
    if status == 'EXISTS':
        return False
    raise ProtocolError('SECKILL.INIT answered %r' % (reply,))


def reserve_args(key: str, user: str, qty: int = 1, reqid: Optional[str] = None) -> List[Any]:
    args: List[Any] = ['SECKILL.RESERVE', key, _check_id(user, 'user')]
    if qty != 1:
        args += ['QTY', int(qty)]
    if reqid is not None:
        args += ['REQID', _check_id(reqid, 'reqid')]
    return args


def parse_reserved(reply: Any) -> Reserved:
    if not isinstance(reply, (list, tuple)) or len(reply) != 3:
        raise ProtocolError('SECKILL.RESERVE answered %r' % (reply,))
    status = _status(reply[0], RESERVE_STATUSES, 'SECKILL.RESERVE')
    rid = text(reply[1])
    return Reserved(status, rid if rid not in (None, '') else None, _int(reply[2], 'remaining'))


def parse_unfence(reply: Any) -> str:
    """SECKILL.UNFENCE's simple-string reply: UNFENCED, NOT_FENCED or NO_SALE."""
    return _status(reply, UNFENCE_STATUSES, 'SECKILL.UNFENCE')


def parse_settled(reply: Any, command: str) -> Settled:
    """RELEASE or CONFIRM's reply; `command` is 'RELEASE' or 'CONFIRM'."""
    allowed = RELEASE_STATUSES if command.upper().endswith('RELEASE') else CONFIRM_STATUSES
    if not isinstance(reply, (list, tuple)) or len(reply) != 2:
        raise ProtocolError('SECKILL.%s answered %r' % (command, reply))
    return Settled(_status(reply[0], allowed, 'SECKILL.' + command), _int(reply[1], 'remaining'))


def pairs(reply: Any) -> Optional[List[Tuple[str, Any]]]:
    """A RESP2 field/value array or a RESP3 map as (str field, value) pairs."""
    if reply is None:
        return None
    if isinstance(reply, dict):
        return [(text(k), v) for k, v in reply.items()]
    if not isinstance(reply, (list, tuple)) or len(reply) % 2:
        raise ProtocolError('expected field/value pairs, got %r' % (reply,))
    return [(text(reply[i]), reply[i + 1]) for i in range(0, len(reply), 2)]


def parse_report(reply: Any) -> Optional[Dict[str, Any]]:
    """INFO / RECONCILE's report as a dict with Python types: integers,
    `shards` a list of ints, `invariant` a str, `orders_*_ids` lists of str,
    `peers` a list of (peer, sent, received). None for a missing key."""
    p = pairs(reply)
    if p is None:
        return None
    out: Dict[str, Any] = {}
    for name, value in p:
        if name in _INT_FIELDS:
            out[name] = _int(value, name)
        elif name in _OPT_INT_FIELDS:
            out[name] = None if value is None else _int(value, name)
        elif name == 'shards':
            out[name] = [_int(v, 'shards') for v in (value or [])]
        elif name.endswith('_ids'):
            out[name] = [text(v) for v in (value or [])]
        elif name == 'peers':
            out[name] = [(text(a), _int(b, 'sent'), _int(c, 'received')) for a, b, c in (value or [])]
        else:
            out[name] = text(value)
    for required in ('total', 'remaining', 'pending', 'confirmed', 'invariant'):
        if required not in out:
            raise ProtocolError('report without %r: %r' % (required, reply))
    return out


def parse_get(reply: Any) -> Optional[Dict[str, Any]]:
    """SECKILL.GET: {user, qty, state, created_ms, deadline_ms} or None."""
    p = pairs(reply)
    if p is None:
        return None
    out: Dict[str, Any] = {}
    for name, value in p:
        out[name] = _int(value, name) if name in ('qty', 'created_ms', 'deadline_ms') else text(value)
    return out


# ---------------------------------------------------------------- reconcile

def order_row(order: Any) -> Tuple[str, str, int]:
    """(rid, user, qty) from a tuple or any object with those attributes
    (`rid` or `reservation_id`, `user` or `user_id`, `qty`)."""
    if isinstance(order, (tuple, list)):
        rid, user, qty = order
    else:
        rid = getattr(order, 'rid', None) or order.reservation_id
        user = getattr(order, 'user', None) or order.user_id
        qty = order.qty
    qty = int(qty)
    if qty < 1:
        raise ValueError('order %r: qty must be at least 1' % (rid,))
    return _check_id(rid, 'reservation id'), _check_id(user, 'user'), qty


def chunks(orders: Iterable[Any], size: int = DEFAULT_CHUNK) -> Iterator[List[Tuple[str, str, int]]]:
    """Order rows in lists of at most `size` (the module bounds a call)."""
    if size < 1:
        raise ValueError('chunk size must be at least 1')
    chunk: List[Tuple[str, str, int]] = []
    for order in orders:
        chunk.append(order_row(order))
        if len(chunk) == size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


def reconcile_args(key: str, chunk: Sequence[Tuple[str, str, int]] = (), *,
                   apply: bool = False, expire: bool = False) -> List[Any]:
    args: List[Any] = ['SECKILL.RECONCILE', key]
    if expire:
        args.append('EXPIRE')
    if chunk:
        args += ['ORDERS', len(chunk)]
        for rid, user, qty in chunk:
            args += [rid, user, qty]
    if apply:
        args.append('APPLY')
    return args


def reconcile_calls(key: str, orders: Iterable[Any], *, apply: bool = False, expire: bool = False,
                    chunk_size: int = DEFAULT_CHUNK) -> Iterator[List[Any]]:
    """The RECONCILE calls for a ledger: EXPIRE with the first call only
    (once is enough: later calls see the same clock), APPLY with every one.
    An empty ledger is one call without ORDERS (the report alone)."""
    first = True
    for chunk in chunks(orders, chunk_size):
        yield reconcile_args(key, chunk, apply=apply, expire=expire and first)
        first = False
    if first:
        yield reconcile_args(key, (), apply=False, expire=expire)


def merge_reconcile(result: ReconcileResult, report: Optional[Dict[str, Any]]) -> ReconcileResult:
    """Adds one chunk's parsed report to `result` (in place; also returned)."""
    if report is None:
        raise ProtocolError('RECONCILE answered nil: the sale does not exist')
    result.calls += 1
    for c in CLASSES:
        result.counts[c] += int(report.get('orders_' + c, 0))
        if c != 'ok':
            result.ids[c].extend(report.get('orders_%s_ids' % c, []))
    result.report = {k: v for k, v in report.items() if not k.startswith('orders_')}
    return result


# ---------------------------------------------------------------- the stream

@dataclass(frozen=True)
class Event:
    """One reservation stream entry."""
    entry_id: str
    event: str
    rid: str
    user: str
    qty: int

    @property
    def ms(self) -> int:
        """The master's clock when the entry was appended."""
        return entry_ms(self.entry_id)


def entry_ms(entry_id: str) -> int:
    ms, _, _seq = text(entry_id).partition('-')
    return int(ms)


def parse_entry(entry_id: Any, fields: Any) -> Optional[Event]:
    """A stream entry as an Event; None for an entry that was trimmed or
    deleted (XREADGROUP / XAUTOCLAIM show those with nil fields) or that
    is not a seckill entry."""
    eid = text(entry_id)
    if not fields:
        return None
    if isinstance(fields, dict):
        f = {text(k): text(v) for k, v in fields.items()}
    else:
        f = {text(k): text(v) for k, v in pairs(fields)}
    try:
        event, rid, user, qty = f['event'], f['rid'], f['user'], int(f['qty'])
    except (KeyError, ValueError):
        return None
    if event not in EVENTS:
        return None
    return Event(eid, event, rid, user, qty)
