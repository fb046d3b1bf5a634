"""Draw sales (docs/draw-sales.md) as plain functions: the ENTER, DRAW and
ENTRANTS argument lists and replies, the entrant digest, the draw seed, the
draw order, the draw recomputed from the revealed secret, the verdict of a
verification, and the split sale's proportional allocation of stock over
its parts with the transfers that reach it.

Nothing here talks to Redis (tests/test_draw_protocol.py). The operations
that send these commands are seckill.ops.draw; `Sale`, `SplitSale` and
their seckill.aio versions run them.

The draw order (docs/draw-sales.md, "Draw order, and how anyone checks
it"): every ENTERED extends the entrant digest
D(i+1) = SHA-256(D(i) || u32be(len(user)) || user || u32be(qty)), D(0) 32
zero bytes; the first DRAW fixes the draw seed
S = SHA-256(secret || D(n) || beacon value); the order is a Fisher-Yates
shuffle of the arrival indices 0..n-1 whose step j swaps a[j] with
a[j + uniform(S, j, n - j)], `uniform` drawing from
SHA-1(S || u32be(j) || u32be(c)) (its first 48 bits, by rejection). The
draw walks that order handing out `draw_stock`: an entrant whose QTY fits
what is left wins; the others wait on the waitlist in their place.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import (Any, Dict, List, Mapping, NamedTuple, Optional, Sequence,
                    Tuple, Union)

from . import protocol as p
from .protocol import MAX_BEACON_NAME, MAX_BEACON_VALUE, ProtocolError, beacon_name_arg, text
from .draw_order import (ZERO_DIGEST, DrawOrder, UserId, commitment, commitment_ok, digest_step,  # noqa: F401
                         draw_seed, entrants_digest, hex_text, permutation, seed_bytes, uniform, user_bytes,
                         value_bytes)
from .draw_split import allocate, rebalance_tid, split_closeness, transfer_plan  # noqa: F401

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

# Verdicts of a verification. The failures (exit 1 in the CLI) name the
# first check that failed, in the order docs/draw-sales.md numbers them.
OK = 'ok'
BAD_COMMITMENT = 'bad_commitment'  # 1: not the published commitment, or not SHA-256(seed)
BAD_BEACON = 'bad_beacon'          # 2: the beacon's name or value is not the published one
BAD_DIGEST = 'bad_digest'          # 3: ENTRANTS do not hash to INFO's entrants_digest
BAD_SEED = 'bad_seed'              # 4: draw_seed is not SHA-256(seed || digest || beacon value)
MISMATCH = 'mismatch'              # 5: the winners, the stock, a split sale's shares
FAILURES = (BAD_COMMITMENT, BAD_BEACON, BAD_DIGEST, BAD_SEED, MISMATCH)
# Nothing to verify yet (exit 2).
NOT_A_DRAW = 'not_a_draw'        # the key is missing or not a draw sale
NOT_DRAWN = 'not_drawn'          # no DRAW yet: the seed is not revealed
IN_PROGRESS = 'in_progress'      # the draw has begun but left_to_draw > 0
# Every check of the sale itself passed, but not against what the shop
# published before END (no commitment given, or no beacon value): exit 3.
UNCHECKED = 'unchecked'
NOT_PUBLISHED = 'not checked against a published commitment'


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


def draw_args(key: str, count: int = DEFAULT_DRAW_COUNT,
              beacon_value: Optional[Union[str, bytes]] = None) -> List[Any]:
    """SECKILL.DRAW key COUNT n [BEACON value]. `beacon_value` (1..1024
    bytes): the public value the sale's declared beacon took; the first DRAW
    of a sale that declared one needs it, a later one may repeat it."""
    args: List[Any] = ['SECKILL.DRAW', key, 'COUNT', _count(count, 1, MAX_DRAW_COUNT, 'DRAW COUNT')]
    if beacon_value is not None:
        args += ['BEACON', p.sized_arg(beacon_value, MAX_BEACON_VALUE, 'BEACON value')]
    return args


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
    parse_report). `seed`, `draw_stock`, `draw_seed` (and `beacon_value`)
    are None before the first DRAW; `beacon` and `beacon_value` are None on
    a sale that declared no beacon. The hex fields and the beacon are str
    (bytes a decoding client could not decode come back through
    surrogateescape: seckill.protocol.text)."""
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
    entrants_digest: Optional[str] = None
    beacon: Optional[str] = None
    beacon_value: Optional[str] = None
    draw_seed: Optional[str] = None

    @property
    def started(self) -> bool:
        """The first DRAW has run (the seed is revealed)."""
        return self.seed is not None


def _opt_int(value: Any, what: str) -> Optional[int]:
    return None if value is None else p._int(value, what)


def _opt_text(value: Any) -> Optional[str]:
    value = text(value)
    return None if value is None else str(value)


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
                    held=sum(int(report.get(f) or 0) for f in ('pending', 'confirmed', 'released')),
                    entrants_digest=_opt_text(report.get('entrants_digest')),
                    beacon=_opt_text(report.get('beacon')),
                    beacon_value=_opt_text(report.get('beacon_value')),
                    draw_seed=_opt_text(report.get('draw_seed')))


def draw_committed(fields: Any) -> Optional[Tuple[str, Optional[str]]]:
    """The `draw_committed` entry INIT of a draw sale appends to the sale's
    stream: (commitment, beacon name or None); None for any other entry.
    `fields`: the entry's fields as a dict or a flat list."""
    if isinstance(fields, dict):
        f = {text(k): text(v) for k, v in fields.items()}
    else:
        f = {text(k): text(v) for k, v in p.pairs(fields or [])}
    if f.get('event') != 'draw_committed' or 'commitment' not in f:
        return None
    return str(f['commitment']), (str(f['beacon']) if f.get('beacon') else None)


def draw_order(seed: Union[str, bytes], entrants: Sequence[Any]) -> List[Any]:
    """`entrants` (in arrival order) rearranged in draw order under the draw
    seed S."""
    return [entrants[i] for i in DrawOrder(seed, len(entrants))]


def simulate(seed: Union[str, bytes], entrants: Sequence[Entrant],
             draw_stock: int) -> Tuple[List[Entrant], List[bool]]:
    """The draw recomputed: (entrants in draw order, whether each wins).
    Walk the order handing out `draw_stock`: an entrant whose QTY fits what
    is left wins, the others stay on the waitlist. `seed`: the draw seed S
    (INFO's `draw_seed`), `entrants` in arrival order."""
    order = draw_order(seed, entrants)
    return order, _wins(order, draw_stock)


def _wins(order: Sequence[Any], draw_stock: int) -> List[bool]:
    left = int(draw_stock)
    wins = []
    for e in order:
        win = 0 < e.qty <= left
        if win:
            left -= e.qty
        wins.append(win)
    return wins


def winners(seed: Union[str, bytes], entrants: Sequence[Entrant], draw_stock: int) -> List[UserId]:
    """The users the draw makes winners, in draw order."""
    order, wins = simulate(seed, entrants, draw_stock)
    return [e.user for e, w in zip(order, wins) if w]


# ---------------------------------------------------------------- verification

# The checks of a verification, in the order they run (docs/draw-sales.md,
# "Checking a draw"); a failing Verdict's `check` is one of them.
CHECKS = ('commitment', 'beacon', 'entrants_digest', 'draw_seed', 'winners', 'stock', 'shares')


@dataclass
class Verdict:
    """The outcome of a verification. `ok` only for status OK. A failure
    (FAILURES) names the first check that failed in `check` (CHECKS). For a
    MISMATCH of the winners, `first` is the first entrant in draw order
    whose result differs from the recomputed one: {position (in draw
    order), arrival (its index in ENTRANTS), user, qty, expected, actual}.
    UNCHECKED: every check of the sale itself passed, but `unchecked` lists
    what was not checked against published values (no commitment given, no
    beacon value given)."""
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
    check: Optional[str] = None
    published_commitment: Optional[str] = None
    entrants_digest: Optional[str] = None
    beacon: Optional[str] = None
    beacon_value: Optional[str] = None
    draw_seed: Optional[str] = None
    unchecked: List[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.status == OK

    def as_dict(self) -> Dict[str, Any]:
        out = {k: v for k, v in self.__dict__.items() if k != 'parts'}
        if isinstance(self.first, dict):
            out['first'] = {k: text(v) for k, v in self.first.items()}
        if self.parts:
            out['parts'] = [v.as_dict() for v in self.parts]
        out['ok'] = self.ok
        return out


def _show(user: UserId) -> str:
    return repr(text(user)) if isinstance(user, (bytes, bytearray)) else repr(user)


def _same(a: Optional[Union[str, bytes]], b: Optional[Union[str, bytes]]) -> bool:
    """Two beacon names or values (None: none) are the same bytes."""
    if a is None or b is None:
        return a is None and b is None
    return value_bytes(a) == value_bytes(b)


def verify(info: Optional[DrawInfo], entrants: Sequence[Entrant], key: Optional[str] = None,
           *, commitment: Optional[str] = None, beacon: Optional[Union[str, bytes]] = None,
           beacon_value: Optional[Union[str, bytes]] = None) -> Verdict:
    """Checks a draw from INFO and ENTRANTS (`entrants` in arrival order) and
    what the shop published (docs/draw-sales.md, "Checking a draw"):

    1. `commitment` (the hex published before END) is INFO's
       `seed_commitment`, and SHA-256(seed) is too;
    2. the beacon: `beacon`, the name published with the commitment (None:
       none was), is INFO's `beacon`; `beacon_value`, the beacon's public
       value, is INFO's `beacon_value`;
    3. the digest of `entrants` (user, QTY, in arrival order) is INFO's
       `entrants_digest`;
    4. INFO's `draw_seed` is SHA-256(seed || digest || beacon value);
    5. the Fisher-Yates order under it, handing out `draw_stock`, makes
       exactly the entrants ENTRANTS marks `drawn` winners (a winner of the
       waitlist, `promoted`, is not one), and no stock is held outside the
       draw (`outside_draw`).

    The first failing check names the verdict. Without `commitment`, 1
    checks SHA-256(seed) against INFO alone, the name in 2 is checked only
    when `beacon` is given, and a verdict that passes everything is
    UNCHECKED, not OK; so is one of a sale with a beacon when
    `beacon_value` is not given. The published values are checked before
    the draw too (a sale REPLACEd since they were published fails at once).
    """
    if info is None:
        return Verdict(NOT_A_DRAW, 'not a draw sale (missing, or not INIT ... DRAW)', key=key)
    published = None if commitment is None else hex_text(commitment)
    base: Dict[str, Any] = dict(
        entrants=len(entrants), draw_stock=info.draw_stock, seed=info.seed,
        seed_commitment=info.seed_commitment, key=key, published_commitment=published,
        entrants_digest=info.entrants_digest, beacon=info.beacon,
        beacon_value=info.beacon_value, draw_seed=info.draw_seed)

    def fail(status: str, check: str, message: str, **kw: Any) -> Verdict:
        return Verdict(status, message, check=check, **dict(base, **kw))

    # 1 and 2 against what was published: they hold from INIT on
    if published is not None and hex_text(info.seed_commitment) != published:
        return fail(BAD_COMMITMENT, 'commitment', "the sale's seed_commitment %s is not the "
                    'published commitment %s' % (info.seed_commitment, published))
    if (published is not None or beacon is not None) and not _same(beacon, info.beacon):
        return fail(BAD_BEACON, 'beacon', 'the sale declares %s, the published beacon is %s'
                    % (_beacon_show(info.beacon), _beacon_show(beacon)))
    if not info.started or info.draw_stock is None:
        return Verdict(NOT_DRAWN, 'not drawn yet: the seed is revealed by the first DRAW', **base)
    # 1: the revealed secret
    if not commitment_ok(info.seed, info.seed_commitment):
        return fail(BAD_COMMITMENT, 'commitment', 'SHA-256(seed) = %s is not the commitment %s'
                    % (commitment_of(info.seed), info.seed_commitment))
    # 2: the value the first DRAW took
    if info.beacon is not None and info.beacon_value is None:
        return fail(BAD_BEACON, 'beacon', 'the sale declares beacon %s but shows no beacon_value'
                    % _beacon_show(info.beacon))
    if info.beacon is None and info.beacon_value is not None:
        return fail(BAD_BEACON, 'beacon', 'the sale declares no beacon but shows a beacon_value '
                    '%s' % _beacon_show(info.beacon_value))
    if beacon_value is not None and not _same(beacon_value, info.beacon_value):
        return fail(BAD_BEACON, 'beacon', "the draw took beacon_value %s, the beacon's public "
                    'value is %s' % (_beacon_show(info.beacon_value), _beacon_show(beacon_value)))
    if info.left_to_draw > 0:
        return Verdict(IN_PROGRESS, 'the draw is not complete (left_to_draw %d): run DRAW '
                       'until it is 0' % info.left_to_draw, **base)
    # 3: the entrants, in arrival order
    if len(entrants) != info.entrants:
        return fail(BAD_DIGEST, 'entrants_digest', 'ENTRANTS listed %d entrants, INFO counts %d'
                    % (len(entrants), info.entrants))
    digest = entrants_digest(entrants)
    if info.entrants_digest is None or hex_text(info.entrants_digest) != digest.hex():
        return fail(BAD_DIGEST, 'entrants_digest', 'the digest of ENTRANTS (user, QTY, in '
                    'arrival order) is %s, INFO shows entrants_digest %s'
                    % (digest.hex(), info.entrants_digest))
    # 4: the draw seed
    seed_s = draw_seed(info.seed, digest, info.beacon_value)
    if info.draw_seed is None or hex_text(info.draw_seed) != seed_s.hex():
        return fail(BAD_SEED, 'draw_seed', 'SHA-256(seed || entrants_digest || beacon_value) is '
                    '%s, INFO shows draw_seed %s' % (seed_s.hex(), info.draw_seed))
    # 5: the winners and the stock
    idx = permutation(seed_s, len(entrants))
    wins = _wins([entrants[i] for i in idx], info.draw_stock)
    first = None
    bad = 0
    for pos, (i, win) in enumerate(zip(idx, wins)):
        e = entrants[i]
        if win != (e.result == R_DRAWN):
            bad += 1
            if first is None:
                first = {'position': pos, 'arrival': i, 'user': e.user, 'qty': e.qty,
                         'expected': R_DRAWN if win else 'not drawn', 'actual': e.result}
    base['winners'] = sum(wins)
    if first is not None:
        return fail(MISMATCH, 'winners', 'entrant %s (arrival %d) at position %d of the draw '
                    'order: expected %s, ENTRANTS says %s (%d entrants differ)'
                    % (_show(first['user']), first['arrival'], first['position'],
                       first['expected'], first['actual'], bad), first=first, mismatches=bad)
    base['outside_draw'] = outside = outside_draw(info, entrants)
    if outside != 0:
        return fail(MISMATCH, 'stock', '%d units are held by reservations the draw did not make '
                    "(the sale's reservations hold %d units, its winners' QTYs add up to %d)"
                    % (outside, info.held, info.held - outside))
    done = 'verified: %d winners of %d entrants over draw_stock %d' % (
        sum(wins), len(entrants), info.draw_stock)
    unchecked = []
    if published is None:
        unchecked.append(NOT_PUBLISHED)
    if info.beacon is not None and beacon_value is None:
        unchecked.append('beacon value not checked against the public value of %s'
                         % _beacon_show(info.beacon))
    if unchecked:
        return Verdict(UNCHECKED, done + ' against the sale itself; ' + '; '.join(unchecked),
                       unchecked=unchecked, **base)
    return Verdict(OK, done + ', against the published commitment%s' % (
        ' and beacon' if info.beacon is not None else ''), **base)


def _beacon_show(value: Optional[Union[str, bytes]]) -> str:
    return 'no beacon' if value is None else _show(value)


def commitment_of(seed: Union[str, bytes]) -> str:
    """commitment() under a name verify's keyword does not shadow."""
    return commitment(seed)


def outside_draw(info: DrawInfo, entrants: Sequence[Entrant]) -> int:
    """Units of the sale's reservations (every one it ever made, released
    or not) beyond the QTYs of the entrants that won: the draw makes one
    reservation per winner with its QTY, and RECONCILE takes no draw stock
    for any other order, so this is 0 on an honest sale; stock taken outside
    the draw makes it positive."""
    return info.held - sum(e.qty for e in entrants if e.result in (R_DRAWN, R_PROMOTED))


_SEVERITY = {s: 0 for s in FAILURES}
_SEVERITY.update({NOT_A_DRAW: 1, NOT_DRAWN: 1, IN_PROGRESS: 1, UNCHECKED: 2, OK: 3})


def combine(name: str, parts: Sequence[Verdict]) -> Verdict:
    """A split sale's verdict from its parts' (each part draws on its own
    secret and entrants): OK when every part is; otherwise the first part's
    of the worst kind (a failure, then nothing to verify yet, then
    UNCHECKED)."""
    worst = min(parts, key=lambda v: _SEVERITY.get(v.status, 0), default=None)
    total = dict(entrants=sum(v.entrants for v in parts), winners=sum(v.winners for v in parts),
                 key=name, parts=list(parts))
    if worst is None or worst.ok:
        return Verdict(OK, 'verified: %d parts, %d winners of %d entrants'
                       % (len(parts), total['winners'], total['entrants']), **total)
    unchecked = sorted({u for v in parts for u in v.unchecked})
    return Verdict(worst.status, 'part %s: %s' % (worst.key, worst.message), check=worst.check,
                   first=worst.first, mismatches=sum(v.mismatches for v in parts),
                   unchecked=unchecked, **total)


def check_shares(name: str, round_: str, parts: Sequence[Verdict]) -> Optional[Verdict]:
    """A split draw's shares: each part's `draw_stock` must be its share of
    the parts' stock by entrants, as the client's own plan makes it
    (`allocate` over the parts' entrants, salted with the round). None when
    they match; a MISMATCH naming the first part that does not (stock moved
    to the part that holds more friends of the shop, say). Parts that
    verified on their own (each OK or UNCHECKED first)."""
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
                   parts=list(parts), mismatches=len(wrong), check='shares')


def verify_split(name: str, round_: str, parts: Sequence[Verdict],
                 commitments: Optional[Mapping[str, str]] = None) -> Verdict:
    """A split sale's verdict: its parts' (`combine`), then the shares
    (`check_shares`) when every part verified on its own. `commitments`
    ({part key: commitment}, as the shop published them): a published key
    that is not one of the sale's parts fails it (BAD_COMMITMENT)."""
    if commitments is not None:
        extra = sorted(set(commitments) - {v.key for v in parts})
        if extra:
            return Verdict(BAD_COMMITMENT, 'published commitments name %s, not parts of the sale '
                           '(its parts: %s)' % (', '.join(extra), ', '.join(str(v.key) for v in parts)),
                           entrants=sum(v.entrants for v in parts), key=name, parts=list(parts),
                           check='commitment')
    combined = combine(name, parts)
    if combined.status not in (OK, UNCHECKED):
        return combined
    return check_shares(name, round_, parts) or combined


__all__ = ['RegistrationOpen', 'ENTER_STATUSES', 'ENTERED', 'ALREADY_ENTERED', 'DRAWN', 'RESULTS', 'Entered', 'Drawn',
           'Entrant', 'DrawInfo', 'Verdict', 'enter_args', 'parse_entered', 'draw_args',
           'parse_drawn', 'entrants_args', 'parse_entrants', 'draw_info', 'draw_committed',
           'MAX_BEACON_NAME', 'MAX_BEACON_VALUE', 'beacon_name_arg', 'commitment', 'commitment_ok',
           'digest_step', 'entrants_digest',
           'draw_seed', 'uniform', 'DrawOrder', 'permutation', 'draw_order', 'simulate', 'winners',
           'verify', 'combine', 'check_shares', 'verify_split', 'allocate', 'transfer_plan',
           'rebalance_tid', 'split_closeness']
