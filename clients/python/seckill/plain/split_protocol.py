"""The split-sale protocol (docs/cluster.md) as plain functions: key naming
and hash-tag placement, user routing, stock planning (refill batches,
borrows), transfer and round ids, SEND/RECV arguments, the layout, the
reconcile fan-out.

Nothing here talks to Redis: tests/test_split_protocol.py checks all of it
without a server. The audit, repair and recovery plans (what a round of
reports says and what to do about it) are in seckill.split_audit. The
split sale's client (seckill.split, and seckill.aio for redis.asyncio)
executes these plans.

A split sale named N is a pool key plus P part keys on distinct cluster
masters, and a layout hash that any process reads to open the sale:

    sale:{N}:split                the layout (HGETALL): version, total, parts, keys
    sale:{N.pool}                 the pool (no reservations, only SEND)
    sale:{N.p0} .. sale:{N.p<P-1>} the parts (users reserve on their home part)
    sale:{N.p0}:events            a part's reservation stream (stream=True)

A tag that would put a key on a master already used gets a salt
(`N.p1.7`), the first salt 1, 2, ... that lands on an unused master; the
layout stores the tags chosen, so readers never recompute them.

Every key of a sale is INITed with `SPLIT round n peer ...`: the sale's
round id (new for every create and replace) and the keys it may transfer
with. SEND and RECV carry the round (`ROUND r`); a key of another round
answers an error whose first word is STALEROUND and changes nothing, so a
client that missed a replace cannot move stock into the new round.
"""

from __future__ import annotations

import binascii
import hashlib
import os
import re
from dataclasses import dataclass
from typing import Any, Callable, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple

from . import protocol as p

LAYOUT_VERSION = 2                # 2: rounds (INIT ... SPLIT, SEND/RECV ... ROUND)
ROUTE = 'sha256-be64-mod'         # the routing function's name in the layout
PREFIX = 'sale:'
INITIAL_PERMILLE = 600            # parts start with 60% of the stock, the pool keeps the rest
DEFAULT_BMAX = 1000               # the largest refill batch
MAX_SALT = 100_000                # placement gives up (reuses a master) after this many salts
SLOTS = 16384

MAX_ROUND_BYTES = 64
MAX_PEERS = 1024

# Path names for the counters of extra round trips (bench and stats).
PATHS = ('refill', 'borrow', 'state', 'repair')

STALE = 'STALEROUND'              # the first word of the module's error for another round


class StaleRound(RuntimeError):
    """A key answered STALEROUND: it is in another round than the one this
    client believes in (the sale was replaced, or a replace is under way)."""


# ---------------------------------------------------------------- slots and names

def _crc16(data: bytes) -> int:
    """CRC16-XMODEM (poly 0x1021, init 0): Redis Cluster's key hash."""
    return binascii.crc_hqx(data, 0)


def hash_tag(key: str) -> bytes:
    """The part of a key that Redis Cluster hashes: the first {...} with
    something inside, else the whole key."""
    b = key.encode('utf-8')
    s = b.find(b'{')
    if s >= 0:
        e = b.find(b'}', s + 1)
        if e > s + 1:
            return b[s + 1:e]
    return b


def key_slot(key: str) -> int:
    """The cluster slot of `key` (CLUSTER KEYSLOT)."""
    return _crc16(hash_tag(key)) % SLOTS


def check_name(name: str) -> str:
    if not isinstance(name, str) or not name:
        raise ValueError('a split sale needs a non-empty name')
    if any(c in name for c in '{}') or len(name.encode('utf-8')) > 128:
        raise ValueError('sale name %r: no braces, at most 128 bytes' % (name,))
    return name


def layout_key(name: str) -> str:
    return '%s{%s}:split' % (PREFIX, check_name(name))


def tag_key(tag: str) -> str:
    return '%s{%s}' % (PREFIX, tag)


def stream_key(tag: str) -> str:
    return '%s{%s}:events' % (PREFIX, tag)


def key_tag(key: str) -> str:
    return hash_tag(key).decode('utf-8')


def part_tag(name: str, i: int, salt: int = 0) -> str:
    return '%s.p%d' % (name, i) + ('.%d' % salt if salt else '')


def pool_tag(name: str, salt: int = 0) -> str:
    return '%s.pool' % name + ('.%d' % salt if salt else '')


def parse_tag(name: str, tag: str) -> Optional[Tuple[str, Optional[int]]]:
    """('pool', None) or ('part', i) for a tag this sale's placement can make
    (`N.pool`, `N.p<i>`, each optionally `.<salt>`), else None."""
    m = re.fullmatch(re.escape(name) + r'\.(?:(pool)|p(0|[1-9][0-9]*))(?:\.([1-9][0-9]*))?', tag)
    if m is None:
        return None
    return ('pool', None) if m.group(1) else ('part', int(m.group(2)))


def probe_keys(name: str, salts: int = 64) -> List[str]:
    """Where a sale's keys may be when its layout is lost: the pool's and
    part 0's tags with salt 0 .. salts-1 (placement takes the first salt
    that lands on the least-used master: small on any real cluster). Any
    one of them that exists names every other key as a peer."""
    check_name(name)
    return ([tag_key(pool_tag(name, s)) for s in range(salts)]
            + [tag_key(part_tag(name, 0, s)) for s in range(salts)])


def place(name: str, parts: int, owner: Optional[Callable[[int], str]] = None,
          masters: Sequence[str] = ()) -> Tuple[str, List[str]]:
    """(pool tag, [part tags]). `owner(slot)` names the master serving a
    slot, `masters` lists them all. Part i takes the first salt 0, 1, 2 ...
    whose slot lies on the least-used master (so P <= masters puts every
    part on its own master, P > masters spreads them round-robin); the pool
    then takes the least-used master left. Without `owner` (one node) the
    tags are unsalted."""
    check_name(name)
    if parts < 1:
        raise ValueError('parts must be at least 1')
    if owner is None or len(set(masters)) <= 1:
        return pool_tag(name), [part_tag(name, i) for i in range(parts)]
    load = {m: 0 for m in masters}

    def pick(make: Callable[[int], str]) -> str:
        least = min(load.values())
        for salt in range(MAX_SALT):
            tag = make(salt)
            m = owner(_crc16(tag.encode('utf-8')) % SLOTS)
            if load.get(m) == least:
                load[m] += 1
                return tag
        tag = make(0)       # a topology with a master that owns almost nothing
        m = owner(_crc16(tag.encode('utf-8')) % SLOTS)
        load[m] = load.get(m, 0) + 1
        return tag

    tags = [pick(lambda s, i=i: part_tag(name, i, s)) for i in range(parts)]
    return pick(lambda s: pool_tag(name, s)), tags


# ---------------------------------------------------------------- routing

def route(user: str, parts: int) -> int:
    """The home part of a user: the first 8 bytes of SHA-256(UTF-8 user id)
    as a big-endian unsigned 64-bit integer, modulo P."""
    if parts < 1:
        raise ValueError('parts must be at least 1')
    digest = hashlib.sha256(str(user).encode('utf-8')).digest()
    return int.from_bytes(digest[:8], 'big') % parts


# ---------------------------------------------------------------- stock planning

def split_stock(total: int, parts: int, permille: int = INITIAL_PERMILLE) -> Tuple[int, List[int]]:
    """(pool total, [part totals]): every part starts with
    floor(total * permille / 1000 / P), the pool keeps the rest."""
    if total < 0 or parts < 1:
        raise ValueError('total >= 0 and parts >= 1')
    share = total * permille // 1000 // parts
    return total - share * parts, [share] * parts


def batch_size(pool_remaining: int, parts: int, bmax: int = DEFAULT_BMAX) -> int:
    """A refill batch: clamp(ceil(pool / 2P), 1, Bmax); 0 for an empty pool."""
    if pool_remaining <= 0:
        return 0
    return max(1, min(bmax, -(-pool_remaining // (2 * parts))))


def low_water(pool_total: int, parts: int, bmax: int = DEFAULT_BMAX) -> int:
    """The mark under which a part refills: half the first batch, at least 1."""
    return max(1, -(-batch_size(pool_total, parts, bmax) // 2))


def crossed_low(remaining: int, qty: int, low: int) -> bool:
    """True for the one RESERVE that took the part from >= low to < low:
    that caller (and only it, unless stock came back in between) refills."""
    return remaining < low <= remaining + qty


def transfer_id(rand: Optional[bytes] = None) -> str:
    """A fresh transfer id: 't.' and 16 random hex digits. SEND is
    idempotent by it: a retry after a lost reply takes nothing twice."""
    return 't.' + (rand if rand is not None else os.urandom(8)).hex()


def new_round(rand: Optional[bytes] = None) -> str:
    """A fresh round id: 16 random hex digits (made by the creating client
    for every create and replace)."""
    return (rand if rand is not None else os.urandom(8)).hex()


def check_round(round_: str) -> str:
    if not isinstance(round_, str) or not 1 <= len(round_.encode('utf-8')) <= MAX_ROUND_BYTES:
        raise ValueError('a round id is 1 to %d bytes, got %r' % (MAX_ROUND_BYTES, round_))
    return round_


def check_incarnation(to: str) -> str:
    if not isinstance(to, str) or len(to) != 8 or any(c not in '0123456789abcdef' for c in to):
        raise ValueError('an incarnation is 8 lowercase hex digits (INFO incarnation), got %r' % (to,))
    return to


def send_args(src: str, dst: str, qty: int, min_: int, tid: str, round_: str,
              to: Optional[str] = None) -> List[Any]:
    """SECKILL.SEND src dst qty MIN m TID tid ROUND round [TO incarnation]:
    `to` is dst's incarnation (INFO incarnation), so the units are counted
    for that very key and a re-created dst is never credited them."""
    args = ['SECKILL.SEND', src, dst, int(qty), 'MIN', int(min_), 'TID', tid, 'ROUND', check_round(round_)]
    return args + (['TO', check_incarnation(to)] if to is not None else [])


def recv_args(dst: str, src: str, sent_total: int, round_: str, to: Optional[str] = None) -> List[Any]:
    """SECKILL.RECV dst src sent_total ROUND round [TO incarnation]: `to`
    is the incarnation of dst that src counted sent_total for (the SEND's
    TO, or src's INFO sent_to); dst refuses a total counted for another."""
    args = ['SECKILL.RECV', dst, src, int(sent_total), 'ROUND', check_round(round_)]
    return args + (['TO', check_incarnation(to)] if to is not None else [])


STALE_PEER = 'STALEPEER'          # the first word of the module's refusal of another incarnation


def is_stale_peer(error: Any) -> bool:
    """True for a refusal of a transfer counted for another incarnation of
    a key (it was deleted and re-created under the same round)."""
    return str(error).startswith(STALE_PEER)


def is_stale_round(error: Any) -> bool:
    """True for the module's refusal of another round: an error reply whose
    first word is STALEROUND (redis-py: a ResponseError with that text)."""
    words = str(error).split(None, 2)
    if words[:1] == ['ERR'] and len(words) > 1:    # a client that keeps the ERR prefix
        words = words[1:]
    return bool(words) and words[0] == STALE


def debit_id(dst_key: str, received_total: int) -> str:
    """The id of a repair's re-debit: a function of the destination and its
    received total, so two repairers never debit twice for one loss."""
    return 'd.' + hashlib.sha256(('%s\n%d' % (dst_key, received_total)).encode()).hexdigest()[:16]


def borrow_plan(home: str, need: int, remaining: Mapping[str, int], parts: int,
                bmax: int = DEFAULT_BMAX, pool: Optional[str] = None) -> List[Tuple[str, int]]:
    """Where an empty home part takes `need` units from: [(donor, qty)].
    Donors richest first (the pool first while it has stock, in a refill
    batch); from a part it takes max(what is still needed, half the donor's
    remaining capped at Bmax), never more than the donor has."""
    if need <= 0:
        return []
    plan: List[Tuple[str, int]] = []
    left = need
    donors = sorted((k for k, v in remaining.items() if k != home and v > 0),
                    key=lambda k: (k != pool, -remaining[k], k))
    for donor in donors:
        if left <= 0:
            break
        have = remaining[donor]
        if donor == pool:
            take = max(left, batch_size(have, parts, bmax))
        else:
            take = max(left, min(bmax, -(-have // 2)))
        take = min(take, have)
        plan.append((donor, take))
        left -= take
    return plan


# ---------------------------------------------------------------- layout

@dataclass(frozen=True)
class Layout:
    """What the layout hash holds. Keys are in the order pool, p0 .. p(P-1)."""
    name: str
    total: int
    pool: str
    parts: Tuple[str, ...]
    streams: Tuple[str, ...] = ()
    limit: int = 1
    bmax: int = DEFAULT_BMAX
    low: int = 1
    initial: Tuple[int, ...] = ()     # INIT totals: pool, then parts
    round: str = ''                   # the round id every key was INITed with
    version: int = LAYOUT_VERSION

    @property
    def keys(self) -> Tuple[str, ...]:
        return (self.pool,) + self.parts

    def peers(self, key: str) -> List[str]:
        """The peers `key` is INITed with: the pool's are every part, a
        part's the pool and the other parts."""
        if key == self.pool:
            return list(self.parts)
        if key not in self.parts:
            raise KeyError(key)
        return [self.pool] + [k for k in self.parts if k != key]

    def split_args(self, key: str) -> List[Any]:
        """INIT's `SPLIT round n peer ...` for `key`."""
        peers = self.peers(key)
        return ['SPLIT', check_round(self.round), len(peers)] + peers

    def home(self, user: str) -> str:
        return self.parts[route(user, len(self.parts))]

    def to_hash(self) -> Dict[str, str]:
        h = {'version': str(self.version), 'route': ROUTE, 'name': self.name,
             'total': str(self.total), 'parts': str(len(self.parts)), 'pool': self.pool,
             'limit': str(self.limit), 'bmax': str(self.bmax), 'low': str(self.low),
             'initial': ','.join(str(x) for x in self.initial), 'round': self.round}
        for i, k in enumerate(self.parts):
            h['part.%d' % i] = k
        for i, s in enumerate(self.streams):
            h['stream.%d' % i] = s
        return h

    @classmethod
    def from_hash(cls, h: Mapping[Any, Any]) -> 'Layout':
        f = {p.text(k): p.text(v) for k, v in h.items()}
        version = int(f.get('version', 0))
        if version != LAYOUT_VERSION:
            raise p.ProtocolError('split layout version %r: this client reads %d'
                                  % (f.get('version'), LAYOUT_VERSION))
        if f.get('route') != ROUTE:
            raise p.ProtocolError('split layout routes by %r' % f.get('route'))
        n = int(f['parts'])
        streams = tuple(f['stream.%d' % i] for i in range(n) if 'stream.%d' % i in f)
        initial = tuple(int(x) for x in f.get('initial', '').split(',') if x)
        if not f.get('round'):
            raise p.ProtocolError('split layout without a round')
        return cls(name=f['name'], total=int(f['total']), pool=f['pool'],
                   parts=tuple(f['part.%d' % i] for i in range(n)), streams=streams,
                   limit=int(f.get('limit', 1)), bmax=int(f.get('bmax', DEFAULT_BMAX)),
                   low=int(f.get('low', 1)), initial=initial, round=f['round'],
                   version=version)


def layout_keys(h: Mapping[Any, Any]) -> List[str]:
    """The pool and part keys a layout hash of any version names (a replace
    deletes the old ones that the new layout drops)."""
    f = {p.text(k): p.text(v) for k, v in h.items()}
    keys = [f['pool']] if f.get('pool') else []
    return keys + [v for k, v in sorted(f.items()) if re.fullmatch(r'part\.[0-9]+', k)]


def make_layout(name: str, total: int, pool_tag_: str, part_tags: Sequence[str], *,
                limit: int = 1, stream: bool = False, bmax: int = DEFAULT_BMAX,
                permille: int = INITIAL_PERMILLE, round_: Optional[str] = None) -> Layout:
    """A new layout; `round_` defaults to a fresh round id."""
    if len(part_tags) + 1 > MAX_PEERS + 1:
        raise ValueError('at most %d parts' % MAX_PEERS)
    pool_total, part_totals = split_stock(total, len(part_tags), permille)
    return Layout(name=name, total=total, pool=tag_key(pool_tag_),
                  parts=tuple(tag_key(t) for t in part_tags),
                  streams=tuple(stream_key(t) for t in part_tags) if stream else (),
                  limit=limit, bmax=bmax, low=low_water(pool_total, len(part_tags), bmax),
                  initial=(pool_total,) + tuple(part_totals),
                  round=check_round(round_ if round_ is not None else new_round()))


# ---------------------------------------------------------------- reconcile fan-out

def group_orders(layout: Layout, orders: Iterable[Any]) -> Dict[str, List[Tuple[str, str, int]]]:
    """Order rows (rid, user, qty) by their user's home part key (every part
    present, possibly with no rows)."""
    out: Dict[str, List[Tuple[str, str, int]]] = {k: [] for k in layout.parts}
    for order in orders:
        rid, user, qty = p.order_row(order)
        out[layout.home(user)].append((rid, user, qty))
    return out


def shortfall(part_report: Mapping[str, Any], rows: Sequence[Tuple[str, str, int]]) -> int:
    """Units a part lacks to take back its released and unknown orders
    (from a RECONCILE report without APPLY)."""
    qty = {rid: q for rid, _u, q in rows}
    need = sum(qty.get(rid, 0) for c in ('released', 'unknown')
               for rid in part_report.get('orders_%s_ids' % c, []))
    return max(0, need - int(part_report.get('remaining', 0)))


def merge_parts(results: Mapping[str, p.ReconcileResult]) -> Dict[str, Any]:
    """Per-part ReconcileResults summed as one report: orders_<class> counts,
    orders_<class>_ids lists (for every class but ok), and `parts`: each
    part's key, counts and report."""
    out: Dict[str, Any] = {'orders_' + c: 0 for c in p.CLASSES}
    for c in p.CLASSES:
        if c != 'ok':
            out['orders_%s_ids' % c] = []
    out['parts'] = []
    for key, res in results.items():
        for c in p.CLASSES:
            out['orders_' + c] += res.counts[c]
            if c != 'ok':
                out['orders_%s_ids' % c].extend(res.ids[c])
        out['parts'].append({'key': key, 'counts': dict(res.counts), 'report': res.report})
    return out


__all__ = ['LAYOUT_VERSION', 'ROUTE', 'PATHS', 'STALE', 'StaleRound', 'key_slot', 'hash_tag',
           'layout_key', 'tag_key', 'stream_key', 'key_tag', 'part_tag', 'pool_tag', 'parse_tag',
           'probe_keys', 'place', 'route', 'new_round', 'check_round', 'send_args', 'recv_args',
           'is_stale_round', 'layout_keys', 'split_stock', 'batch_size', 'low_water',
           'crossed_low', 'transfer_id', 'debit_id', 'borrow_plan', 'Layout', 'make_layout',
           'group_orders', 'shortfall', 'merge_parts']
