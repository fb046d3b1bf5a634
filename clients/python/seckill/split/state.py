"""What one split-sale client object keeps between calls, shared by the
concerns that make it up (seckill.split.core), and the parallel read of
the keys' reports they all use."""

from __future__ import annotations

import threading
from collections import Counter
from typing import TYPE_CHECKING, Callable, Dict, Iterable, Optional, Set, Tuple

from ..plain import protocol as p
from ..plain import split_audit as sa
from ..plain import split_protocol as sp
from ..plain.faults import NONE
from ..plain.steps import Round, Steps

if TYPE_CHECKING:  # pragma: no cover
    from ..plain.soldout import SoldOutCache


class SplitState:
    """The layout as read, the pool's last figures, the SOLD_OUT verdict
    and the counters of one client object. `lock` guards short updates
    only and is never held across a step, so it serves threads and asyncio
    tasks alike.

    `stats` counts, per path, the round trips beyond the one RESERVE of a
    call (`rt_refill`, `rt_borrow`, `rt_state`, `rt_repair`; with the
    suffix `_sold_out` for calls that ended SOLD_OUT), and `reserve_calls`,
    `reserved`, `sold_out`, `pool_calls`, `refills`, `borrows`, `waits`,
    `wait_short` (WAIT saw no replica ack in time), `gave_up` (a SOLD_OUT
    after MAX_ATTEMPTS rounds while stock was seen: should stay 0),
    `stale_round` (layout reloads after STALEROUND or a key in another round),
    `sold_out_local` (SOLD_OUT answered by the local flag, no round trip).

    `soldout`: the SoldOutCache holding this sale's local flag (None: no
    flag), under the name `flag` (the layout key); every key of the layout
    is a member whose restock clears it (seckill.soldout).
    """

    def __init__(self, name: str, wait_ms: int = 1000,
                 soldout: Optional['SoldOutCache'] = None):
        self.name = sp.check_name(name)
        self.soldout = soldout
        self.flag = sp.layout_key(self.name)
        self.wait_ms = int(wait_ms)
        self.stats: Counter = Counter()
        self.faults: Callable[[str], None] = NONE     # crash points (seckill.faults)
        self.lock = threading.Lock()
        self.layout: Optional[sp.Layout] = None
        self.pool_est: Optional[int] = None           # the pool's remaining, last seen
        self.pool_drained: Optional[sa.KeyState] = None   # the pool's final report
        self.refilling: Set[str] = set()              # parts a low-water refill is under way for
        self.first_empty: Optional[float] = None      # when a home part first answered SOLD_OUT
        self.gen: Dict[str, int] = {}                 # stock brought to a part, per part
        self.verdict: Optional[Tuple[float, int]] = None   # (snapshot start, units seen)
        # (round, key) -> the key's INFO incarnation as read in that round
        # (SEND's and RECV's TO): a key INITed anew in another round is
        # never named with an incarnation from before.
        self.incarnations: Dict[Tuple[str, str], str] = {}

    def follow(self, lay: sp.Layout) -> None:
        """The layout in use: its keys feed the local flag."""
        if self.soldout is not None:
            self.soldout.group(self.flag, lay.keys)

    def flag_token(self) -> int:
        return self.soldout.token(self.flag) if self.soldout is not None else 0

    def in_stock(self, token: int) -> None:
        """A reply showed units on a key: the sale is not sold out."""
        if self.soldout is not None:
            self.soldout.in_stock(self.flag, token)

    def count(self, **kw: int) -> None:
        with self.lock:
            self.stats.update(kw)

    def fault(self, point: str) -> None:
        self.faults(point)

    def forget_pool(self) -> None:
        """The pool's figures are no longer trusted (a failover, a refresh)."""
        self.pool_est = None
        self.pool_drained = None

    def forget_round(self) -> None:
        """Drops the layout and everything cached from its round."""
        with self.lock:
            self.layout = None
            self.forget_pool()
            self.verdict = None
            self.incarnations.clear()

    def adopt(self, lay: sp.Layout, pool_est: Optional[int]) -> None:
        """A layout this object created or recovered, its caches new."""
        self.follow(lay)
        with self.lock:
            self.layout = lay
            self.pool_est = pool_est
            self.pool_drained = None
            self.verdict = None
            self.incarnations.clear()     # a create or replace INITs keys anew


def read_states(keys: Iterable[str]) -> Steps:
    """SECKILL.INFO of every key in one parallel round: {key: KeyState or
    None when the key does not exist}."""
    keys = list(keys)
    replies = yield Round([['SECKILL.INFO', k] for k in keys])
    return {k: sa.key_state(k, p.parse_report(v)) for k, v in zip(keys, replies)}
