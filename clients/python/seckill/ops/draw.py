"""A draw sale's operations as steps (seckill.plain.steps): ENTER, DRAW (one call,
or repeated until the draw is complete), a page of ENTRANTS, and the
verification of a draw (INFO, every page of ENTRANTS, then
seckill.draw.verify). `Sale`, `SplitSale` and their seckill.aio versions
run them; through the drivers they reach the module or the Functions
library (`FCALL seckill_enter 5 key <its four draw keys> ...`) alike."""

from __future__ import annotations

from typing import Any, List, Optional

from ..plain import draw as d
from ..plain import protocol as p
from ..plain.draw import Drawn, Entrant
from ..plain.steps import Steps, call


def enter(key: str, user: d.UserId, qty: int = 1, reqid: Optional[str] = None) -> Steps:
    """ENTER: Entered(status, entrants)."""
    return d.parse_entered((yield from call(d.enter_args(key, user, qty, reqid))))


def draw(key: str, count: int = d.DEFAULT_DRAW_COUNT,
         beacon_value: Optional[d.UserId] = None) -> Steps:
    """One DRAW (with `BEACON value` when given): Drawn(drawn, remaining,
    left_to_draw)."""
    return d.parse_drawn((yield from call(d.draw_args(key, count, beacon_value))))


def draw_all(key: str, count: int = d.DEFAULT_DRAW_COUNT,
             beacon_value: Optional[d.UserId] = None) -> Steps:
    """DRAW until left_to_draw is 0, every call short (at most `count`
    winners): Drawn(winners made by these calls, remaining, 0). Every call
    carries `beacon_value` when given (the server takes it at the first
    DRAW and accepts the same value again), so a rerun after an
    interruption needs nothing else. A call that neither draws nor lowers
    left_to_draw is a server that makes no progress: ProtocolError rather
    than a loop without end."""
    total = 0
    last: Optional[int] = None
    while True:
        res = yield from draw(key, count, beacon_value)
        total += res.drawn
        if res.left_to_draw == 0:
            return Drawn(total, res.remaining, 0)
        if res.drawn == 0 and last is not None and res.left_to_draw >= last:
            raise p.ProtocolError('SECKILL.DRAW %s made no progress (left_to_draw %d)'
                                  % (key, res.left_to_draw))
        last = res.left_to_draw


def entrants_page(key: str, cursor: Any = 0, count: int = d.DEFAULT_PAGE) -> Steps:
    """One page of ENTRANTS: (next cursor, [Entrant])."""
    return d.parse_entrants((yield from call(d.entrants_args(key, cursor, count))))


def all_entrants(key: str, count: int = d.MAX_PAGE) -> Steps:
    """Every entrant, paging ENTRANTS until the cursor comes back '0'."""
    out: List[Entrant] = []
    cursor: Any = 0
    while True:
        cursor, page = yield from entrants_page(key, cursor, count)
        out.extend(page)
        if cursor == '0':
            return out


def draw_info(key: str) -> Steps:
    """The draw fields of INFO (seckill.draw.DrawInfo); None for a missing
    key or a sale that is not a draw sale."""
    return d.draw_info(p.parse_report((yield from call(['SECKILL.INFO', key]))))


def _fixed(info: Optional[d.DrawInfo]) -> Any:
    """What a verification reads that only a REPLACE (or a DEL) changes once
    the draw is complete, and the units held, which a waitlist promotion
    made while the entrants were read changes too."""
    return None if info is None else (info.seed, info.draw_stock, info.entrants, info.held,
                                      info.entrants_digest, info.draw_seed)


def verify(key: str, count: int = d.MAX_PAGE, *, commitment: Optional[str] = None,
           beacon: Optional[d.UserId] = None, beacon_value: Optional[d.UserId] = None) -> Steps:
    """The verification of `key`'s draw (docs/draw-sales.md) against the
    published `commitment`, `beacon` name and the beacon's `beacon_value`
    (seckill.draw.verify says what each checks, and what None means): INFO,
    every entrant, the draw recomputed: a seckill.draw.Verdict. INFO is
    read before and after the entrants: a sale replaced meanwhile is
    IN_PROGRESS, not a mismatch (waitlist promotions change nothing the
    verification reads: a winner of the draw stays `drawn`)."""
    pub = dict(commitment=commitment, beacon=beacon, beacon_value=beacon_value)
    before = yield from draw_info(key)
    if before is None or not before.started or before.left_to_draw > 0:
        return d.verify(before, [], key, **pub)
    entrants = yield from all_entrants(key, count)
    after = yield from draw_info(key)
    if _fixed(after) != _fixed(before):      # REPLACEd or deleted meanwhile
        return d.Verdict(d.IN_PROGRESS, 'the sale changed while its entrants were read '
                         '(a REPLACE, or a waitlist promotion): run the verification again', key=key)
    return d.verify(after, entrants, key, **pub)


__all__ = ['enter', 'draw', 'draw_all', 'entrants_page', 'all_entrants', 'draw_info', 'verify']
