"""Draw sales (docs/draw-sales.md) as plain functions: the ENTER, DRAW and
ENTRANTS argument lists and replies, the draw order, the draw recomputed
from the revealed seed, the verdict of a verification, and the split sale's
proportional allocation of stock over its parts with the transfers that
reach it.

Nothing here talks to Redis (tests/test_draw_protocol.py). The operations
that send these commands are seckill._draw_ops; `Sale`, `SplitSale` and
their seckill.aio versions run them.

The draw order: each entrant's draw key is SHA-256(seed || user) (the 32
seed bytes, then the user id's bytes), ascending, compared as bytes. The
draw walks that order handing out `draw_stock`: an entrant whose QTY fits
what is left wins; the others wait on the waitlist in their place.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any, Dict, Iterable, List, Mapping, NamedTuple, Optional, Sequence, Tuple, Union

from . import protocol as p
from .protocol import ProtocolError, text

# ENTER statuses, in the order the module checks them.
NO_SALE = p.NO_SALE
FENCED = p.FENCED            # checked right after NO_SALE: retry later
ALREADY_ENTERED = 'ALREADY_ENTERED'
DRAWN = 'DRAWN'
NOT_STARTED = p.NOT_STARTED
ENDED = p.ENDED
ENTERED = 'ENTERED'
ENTER_STATUSES = (NO_SALE, FENCED, ALREADY_ENTERED, DRAWN, NOT_STARTED, ENDED, ENTERED)

# ENTRANTS results.
R_ENTERED = 'entered'        # not a reservation: not drawn yet, or on the waitlist
R_DRAWN = 'drawn'            # won in the draw
R_PROMOTED = 'promoted'      # won from the waitlist
RESULTS = (R_ENTERED, R_DRAWN, R_PROMOTED)

DEFAULT_DRAW_COUNT = 1000    # DRAW's COUNT (1..1000)
MAX_DRAW_COUNT = 1000
DEFAULT_PAGE = 100           # ENTRANTS' COUNT (1..1000)
MAX_PAGE = 1000

# Verdicts of a verification.
OK = 'ok'
MISMATCH = 'mismatch'
NOT_DRAWN = 'not_drawn'          # no DRAW yet: the seed is not revealed
IN_PROGRESS = 'in_progress'      # the draw has begun but left_to_draw > 0
BAD_COMMITMENT = 'bad_commitment'
NOT_A_DRAW = 'not_a_draw'        # the key is missing or not a draw sale

UserId = Union[str, bytes]


class RegistrationOpen(RuntimeError):
    """A split sale's draw() before END: nothing was moved or drawn."""


class Entered(NamedTuple):
    """SECKILL.ENTER's reply: [status, entrants]."""
    status: str
    entrants: int

    @property
    def ok(self) -> bool:
        """The user is an entrant (new, or the retry of an entry)."""
        return self.status in (ENTERED, ALREADY_ENTERED)


class Drawn(NamedTuple):
    """SECKILL.DRAW's reply: [drawn, remaining, left_to_draw]; for a
    draw_all, `drawn` summed over its calls."""
    drawn: int
    remaining: int
    left_to_draw: int


class Entrant(NamedTuple):
    """One entrant as ENTRANTS lists it."""
    user: UserId
    qty: int
    result: str


# ---------------------------------------------------------------- arguments and replies

def _count(value: int, lo: int, hi: int, what: str) -> int:
    value = int(value)
    if not lo <= value <= hi:
        raise ValueError('%s must be %d..%d, got %d' % (what, lo, hi, value))
    return value


def enter_args(key: str, user: UserId, qty: int = 1, reqid: Optional[str] = None) -> List[Any]:
    """SECKILL.ENTER key user [QTY n] [REQID id]."""
    if isinstance(user, (bytes, bytearray)):
        if not 1 <= len(user) <= p.MAX_ID_BYTES:
            raise ValueError('user must be 1 to %d bytes' % p.MAX_ID_BYTES)
    else:
        user = p._check_id(user, 'user')
    args: List[Any] = ['SECKILL.ENTER', key, user]
    if qty != 1:
        args += ['QTY', int(qty)]
    if reqid is not None:
        args += ['REQID', p._check_id(reqid, 'reqid')]
    return args


def parse_entered(reply: Any) -> Entered:
    if not isinstance(reply, (list, tuple)) or len(reply) != 2:
        raise ProtocolError('SECKILL.ENTER answered %r' % (reply,))
    return Entered(p._status(reply[0], ENTER_STATUSES, 'SECKILL.ENTER'),
                   p._int(reply[1], 'entrants'))


def draw_args(key: str, count: int = DEFAULT_DRAW_COUNT) -> List[Any]:
    """SECKILL.DRAW key COUNT n."""
    return ['SECKILL.DRAW', key, 'COUNT', _count(count, 1, MAX_DRAW_COUNT, 'DRAW COUNT')]


def parse_drawn(reply: Any) -> Drawn:
    if not isinstance(reply, (list, tuple)) or len(reply) != 3:
        raise ProtocolError('SECKILL.DRAW answered %r' % (reply,))
    return Drawn(p._int(reply[0], 'drawn'), p._int(reply[1], 'remaining'),
                 p._int(reply[2], 'left_to_draw'))


def entrants_args(key: str, cursor: Any = 0, count: int = DEFAULT_PAGE) -> List[Any]:
    """SECKILL.ENTRANTS key cursor COUNT n."""
    return ['SECKILL.ENTRANTS', key, text(cursor),
            'COUNT', _count(count, 1, MAX_PAGE, 'ENTRANTS COUNT')]


def parse_entrants(reply: Any) -> Tuple[str, List[Entrant]]:
    """(next cursor, entrants of this page); the cursor '0' ends the walk.
    A user id stays bytes when the client returns bytes (a verification
    hashes exactly the bytes the server holds)."""
    if not isinstance(reply, (list, tuple)) or len(reply) != 2:
        raise ProtocolError('SECKILL.ENTRANTS answered %r' % (reply,))
    cursor, flat = text(reply[0]), reply[1] or []
    if not isinstance(flat, (list, tuple)) or len(flat) % 3:
        raise ProtocolError('SECKILL.ENTRANTS page is not (user, qty, result) triples: %r'
                            % (flat,))
    out = []
    for i in range(0, len(flat), 3):
        result = text(flat[i + 2])
        if result not in RESULTS:
            raise ProtocolError('SECKILL.ENTRANTS answered an unknown result %r' % (result,))
        user = flat[i]
        out.append(Entrant(bytes(user) if isinstance(user, bytearray) else user,
                           p._int(flat[i + 1], 'qty'), result))
    return str(cursor), out


@dataclass(frozen=True)
class DrawInfo:
    """The draw fields of a sale's INFO (parsed by seckill.protocol.
    parse_report). `seed` and `draw_stock` are None before the first DRAW."""
    entrants: int
    drawn: int
    left_to_draw: int
    waitlist: int
    remaining: int
    draw_stock: Optional[int]
    seed_commitment: str
    seed: Optional[str]
    # Units of every reservation the sale made, live or not (INFO's pending
    # + confirmed + released): on an honest draw sale exactly the QTYs of
    # the entrants that won, in the draw or from the waitlist.
    held: int = 0

    @property
    def started(self) -> bool:
        """The first DRAW has run (the seed is revealed)."""
        return self.seed is not None


def _opt_int(value: Any, what: str) -> Optional[int]:
    return None if value is None else p._int(value, what)


def draw_info(report: Optional[Mapping[str, Any]]) -> Optional[DrawInfo]:
    """DrawInfo from a parsed INFO; None for a missing key or a sale that is
    not a draw sale (`mode` is not `draw`)."""
    if not report or text(report.get('mode')) != 'draw':
        return None
    seed = text(report.get('seed'))
    return DrawInfo(entrants=_opt_int(report.get('entrants'), 'entrants') or 0,
                    drawn=_opt_int(report.get('drawn'), 'drawn') or 0,
                    left_to_draw=_opt_int(report.get('left_to_draw'), 'left_to_draw') or 0,
                    waitlist=_opt_int(report.get('waitlist'), 'waitlist') or 0,
                    remaining=int(report.get('remaining', 0)),
                    draw_stock=_opt_int(report.get('draw_stock'), 'draw_stock'),
                    seed_commitment=str(text(report.get('seed_commitment')) or ''),
                    seed=seed or None,
                    held=sum(int(report.get(f) or 0) for f in ('pending', 'confirmed', 'released')))


# ---------------------------------------------------------------- the draw order

def user_bytes(user: UserId) -> bytes:
    """A user id's bytes (a str as UTF-8; the bytes a decoding client could
    not decode come back through surrogateescape, as seckill.protocol.text
    makes them)."""
    if isinstance(user, (bytes, bytearray)):
        return bytes(user)
    return str(user).encode('utf-8', 'surrogateescape')


def seed_bytes(seed: Union[str, bytes]) -> bytes:
    """The 32 seed bytes from INFO's hex `seed` (or the bytes themselves)."""
    if isinstance(seed, (bytes, bytearray)):
        if len(seed) == 64:
            seed = bytes(seed).decode('ascii')
        else:
            return bytes(seed)
    try:
        raw = bytes.fromhex(seed)
    except ValueError:
        raise ProtocolError('seed is not hex: %r' % (seed,)) from None
    return raw


def draw_key(seed: Union[str, bytes], user: UserId) -> bytes:
    """SHA-256(seed || user): the entrant's place in the draw order."""
    return hashlib.sha256(seed_bytes(seed) + user_bytes(user)).digest()


def commitment(seed: Union[str, bytes]) -> str:
    """The hex SHA-256 of the seed: what INFO publishes from INIT on."""
    return hashlib.sha256(seed_bytes(seed)).hexdigest()


def commitment_ok(seed: Union[str, bytes], seed_commitment: str) -> bool:
    """SHA-256(seed) equals the commitment published before the draw."""
    return commitment(seed) == str(seed_commitment).strip().lower()


def draw_order(seed: Union[str, bytes], entrants: Iterable[Any]) -> List[Any]:
    """`entrants` (Entrant, or anything whose first field or `.user` is the
    user id) in draw order: ascending draw key, as bytes."""
    raw = seed_bytes(seed)

    def key(e: Any) -> Tuple[bytes, bytes]:
        u = user_bytes(e.user if hasattr(e, 'user') else e)
        return hashlib.sha256(raw + u).digest(), u
    return sorted(entrants, key=key)


def simulate(seed: Union[str, bytes], entrants: Iterable[Entrant],
             draw_stock: int) -> Tuple[List[Entrant], List[bool]]:
    """The draw recomputed: (entrants in draw order, whether each wins).
    Walk the order handing out `draw_stock`: an entrant whose QTY fits what
    is left wins, the others stay on the waitlist."""
    order = draw_order(seed, entrants)
    left = int(draw_stock)
    wins = []
    for e in order:
        win = 0 < e.qty <= left
        if win:
            left -= e.qty
        wins.append(win)
    return order, wins


def winners(seed: Union[str, bytes], entrants: Iterable[Entrant], draw_stock: int) -> List[UserId]:
    """The users the draw makes winners, in draw order."""
    order, wins = simulate(seed, entrants, draw_stock)
    return [e.user for e, w in zip(order, wins) if w]


# ---------------------------------------------------------------- verification

@dataclass
class Verdict:
    """The outcome of a verification. `ok` only for status OK. For a
    MISMATCH, `first` is the first entrant in draw order whose result
    differs from the recomputed one: {position, user, qty, expected,
    actual, draw_key}."""
    status: str
    message: str
    entrants: int = 0
    winners: int = 0
    draw_stock: Optional[int] = None
    seed: Optional[str] = None
    seed_commitment: Optional[str] = None
    first: Optional[Dict[str, Any]] = None
    mismatches: int = 0
    key: Optional[str] = None
    parts: List['Verdict'] = field(default_factory=list)
    # Units held by reservations the draw did not make (0 on an honest
    # sale): see `outside_draw`.
    outside_draw: Optional[int] = None

    @property
    def ok(self) -> bool:
        return self.status == OK

    def as_dict(self) -> Dict[str, Any]:
        out = {k: v for k, v in self.__dict__.items() if k != 'parts'}
        if isinstance(self.first, dict):
            out['first'] = {k: (v.hex() if k == 'draw_key' else text(v))
                            for k, v in self.first.items()}
        if self.parts:
            out['parts'] = [v.as_dict() for v in self.parts]
        out['ok'] = self.ok
        return out


def _show(user: UserId) -> str:
    return repr(text(user)) if isinstance(user, (bytes, bytearray)) else repr(user)


def verify(info: Optional[DrawInfo], entrants: Sequence[Entrant],
           key: Optional[str] = None) -> Verdict:
    """Checks a draw: the seed against its commitment; the entrants sorted
    by SHA-256(seed || user) and `draw_stock` handed out; the winners must
    be exactly those ENTRANTS marks `drawn` (a winner of the waitlist,
    `promoted`, is not one)."""
    if info is None:
        return Verdict(NOT_A_DRAW, 'not a draw sale (missing, or not INIT ... DRAW)', key=key)
    base = dict(entrants=len(entrants), draw_stock=info.draw_stock, seed=info.seed,
                seed_commitment=info.seed_commitment, key=key)
    if not info.started or info.draw_stock is None:
        return Verdict(NOT_DRAWN, 'not drawn yet: the seed is revealed by the first DRAW', **base)
    if not commitment_ok(info.seed, info.seed_commitment):
        return Verdict(BAD_COMMITMENT, 'SHA-256(seed) = %s is not the published commitment %s'
                       % (commitment(info.seed), info.seed_commitment), **base)
    if info.left_to_draw > 0:
        return Verdict(IN_PROGRESS, 'the draw is not complete (left_to_draw %d): run DRAW '
                       'until it is 0' % info.left_to_draw, **base)
    if len(entrants) != info.entrants:
        return Verdict(MISMATCH, 'ENTRANTS listed %d entrants, INFO counts %d'
                       % (len(entrants), info.entrants), **base)
    order, wins = simulate(info.seed, entrants, info.draw_stock)
    first = None
    bad = 0
    for pos, (e, win) in enumerate(zip(order, wins)):
        actual = e.result == R_DRAWN
        if win != actual:
            bad += 1
            if first is None:
                first = {'position': pos, 'user': e.user, 'qty': e.qty,
                         'expected': R_DRAWN if win else 'not drawn', 'actual': e.result,
                         'draw_key': draw_key(info.seed, e.user)}
    base['winners'] = sum(wins)
    if first is not None:
        return Verdict(MISMATCH, 'entrant %s at position %d of the draw order: expected %s, '
                       'ENTRANTS says %s (%d entrants differ)'
                       % (_show(first['user']), first['position'], first['expected'],
                          first['actual'], bad), first=first, mismatches=bad, **base)
    base['outside_draw'] = outside = outside_draw(info, entrants)
    if outside != 0:
        return Verdict(MISMATCH, '%d units are held by reservations the draw did not make (the '
                       "sale's reservations hold %d units, its winners' QTYs add up to %d)"
                       % (outside, info.held, info.held - outside), **base)
    return Verdict(OK, 'verified: %d winners of %d entrants over draw_stock %d, seed matches '
                   'its commitment' % (sum(wins), len(entrants), info.draw_stock), **base)


def outside_draw(info: DrawInfo, entrants: Sequence[Entrant]) -> int:
    """Units of the sale's reservations (every one it ever made, released
    or not) beyond the QTYs of the entrants that won: the draw makes one
    reservation per winner with its QTY, and RECONCILE takes no draw stock
    for any other order, so this is 0 on an honest sale; stock taken outside
    the draw makes it positive."""
    return info.held - sum(e.qty for e in entrants if e.result in (R_DRAWN, R_PROMOTED))


def combine(name: str, parts: Sequence[Verdict]) -> Verdict:
    """A split sale's verdict from its parts' (each part draws on its own
    seed): ok when every part is; otherwise the first part's that is not."""
    worst = next((v for v in parts if not v.ok), None)
    total = dict(entrants=sum(v.entrants for v in parts), winners=sum(v.winners for v in parts),
                 key=name, parts=list(parts))
    if worst is None:
        return Verdict(OK, 'verified: %d parts, %d winners of %d entrants'
                       % (len(parts), total['winners'], total['entrants']), **total)
    return Verdict(worst.status, 'part %s: %s' % (worst.key, worst.message),
                   first=worst.first, mismatches=sum(v.mismatches for v in parts), **total)


def check_shares(name: str, round_: str, parts: Sequence[Verdict]) -> Optional[Verdict]:
    """A split draw's shares: each part's `draw_stock` must be its share of
    the parts' stock by entrants, as the client's own plan makes it
    (`allocate` over the parts' entrants, salted with the round). None when
    they match; a MISMATCH naming the first part that does not (stock moved
    to the part that holds more friends of the shop, say). Parts that
    verified on their own seed only (each must be OK first)."""
    stock = sum(v.draw_stock or 0 for v in parts)
    weights = {v.key: v.entrants for v in parts}
    shares = allocate(stock, weights, round_)
    wrong = [v for v in parts if any(weights.values()) and (v.draw_stock or 0) != shares[v.key]]
    if not wrong:
        return None
    v = wrong[0]
    return Verdict(MISMATCH, 'part %s drew over %d units, but its share of the %d units by its %d of %d '
                   'entrants is %d (%d parts differ)'
                   % (v.key, v.draw_stock or 0, stock, v.entrants, sum(weights.values()), shares[v.key],
                      len(wrong)),
                   entrants=sum(weights.values()), winners=sum(x.winners for x in parts), key=name,
                   parts=list(parts), mismatches=len(wrong))


# ---------------------------------------------------------------- split sales

def _tie(salt: str, key: str) -> bytes:
    return hashlib.sha256(('%s\n%s' % (salt, key)).encode('utf-8')).digest()


def allocate(stock: int, weights: Mapping[str, int], salt: str = '') -> Dict[str, int]:
    """`stock` units over the keys of `weights` (a split sale's parts and
    their entrants) in proportion, by largest remainder: each key gets
    floor(stock * w / W), and the units left go one each to the largest
    remainders, ties broken by SHA-256(salt, key) (deterministic for a
    sale, favouring no part index). Every share is within one unit of its
    exact quota. All weights 0: every share 0."""
    if stock < 0 or any(w < 0 for w in weights.values()):
        raise ValueError('stock and weights must be >= 0')
    total_w = sum(weights.values())
    if total_w == 0:
        return {k: 0 for k in weights}
    shares = {k: stock * w // total_w for k, w in weights.items()}
    left = stock - sum(shares.values())
    ranked = sorted(weights, key=lambda k: (-(stock * weights[k] % total_w), _tie(salt, k)))
    for k in ranked[:left]:
        shares[k] += 1
    return shares


def transfer_plan(have: Mapping[str, int], target: Mapping[str, int]) -> List[Tuple[str, str, int]]:
    """The transfers [(src, dst, qty)] that take every key from `have` to
    `target` units (keys missing from `target` go to 0): the largest surplus
    pays the largest deficit first, names breaking ties, so the plan is the
    same for every client that reads the same figures. At most
    (sources + destinations - 1) transfers."""
    if sum(have.values()) != sum(target.get(k, 0) for k in have) or set(target) - set(have):
        raise ValueError('a transfer plan moves units between the same keys: %r -> %r'
                         % (dict(have), dict(target)))
    surplus = {k: v - target.get(k, 0) for k, v in have.items()}
    give = sorted(((k, d) for k, d in surplus.items() if d > 0), key=lambda x: (-x[1], x[0]))
    take = sorted(((k, -d) for k, d in surplus.items() if d < 0), key=lambda x: (-x[1], x[0]))
    plan = []
    i = j = 0
    while i < len(give) and j < len(take):
        (src, g), (dst, t) = give[i], take[j]
        q = min(g, t)
        plan.append((src, dst, q))
        give[i], take[j] = (src, g - q), (dst, t - q)
        if g == q:
            i += 1
        if t == q:
            j += 1
    return plan


def rebalance_tid(round_: str, src: str, dst: str, sent_before: int, qty: int) -> str:
    """The TID of a rebalance transfer: a function of the round, the pair,
    what the source had sent the destination before it and the quantity,
    so a retry (or a second client planning from the same figures) sends
    under the same TID and the source takes the units once."""
    h = hashlib.sha256(('draw\n%s\n%s\n%s\n%d\n%d' % (round_, src, dst, sent_before, qty))
                       .encode('utf-8')).hexdigest()
    return 'w.' + h[:16]


def split_closeness(stock: int, weights: Mapping[str, int],
                    shares: Mapping[str, int]) -> Dict[str, float]:
    """How close a split draw's per-part chances come to one global draw
    (every entrant asking one unit): `global` = stock / entrants, `parts`
    {key: share / entrants of the part}, `max_diff` the largest
    |part chance - global chance| over parts with entrants (each is below
    1 / the part's entrants, the rounding of one unit)."""
    n = sum(weights.values())
    glob = min(1.0, stock / n) if n else 0.0
    parts = {k: min(1.0, shares[k] / w) for k, w in weights.items() if w}
    return {'global': glob, 'parts': parts,
            'max_diff': max((abs(v - glob) for v in parts.values()), default=0.0)}


__all__ = ['RegistrationOpen', 'ENTER_STATUSES', 'ENTERED', 'ALREADY_ENTERED', 'DRAWN', 'RESULTS', 'Entered', 'Drawn',
           'Entrant', 'DrawInfo', 'Verdict', 'enter_args', 'parse_entered', 'draw_args',
           'parse_drawn', 'entrants_args', 'parse_entrants', 'draw_info', 'draw_key',
           'commitment', 'commitment_ok', 'draw_order', 'simulate', 'winners', 'verify',
           'combine', 'allocate', 'transfer_plan', 'rebalance_tid', 'split_closeness']
