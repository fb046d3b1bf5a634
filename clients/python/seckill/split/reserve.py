"""The reserve paths of a split sale (docs/cluster.md, section 3): RESERVE
on the user's home part; the refill after the call that crossed the
low-water mark; and, when the home part answers SOLD_OUT, the slow path
that brings stock home (refill, state round, repair, borrow) until the
RESERVE succeeds or the whole sale holds fewer than qty units."""

from __future__ import annotations

import time
from collections import Counter
from typing import Callable, Optional

from ..ops import sale as ops
from ..plain import protocol as p
from ..plain import split_protocol as sp
from ..plain.split_protocol import StaleRound
from ..plain.steps import Locked, Steps
from .parts import Parts

MAX_ATTEMPTS = 16        # slow-path rounds of one reserve before it gives up


class Reserver(Parts):
    """The reserve concern of one split-sale object."""

    def reserve(self, user: str, qty: int = 1, reqid: Optional[str] = None) -> Steps:
        """See SplitSale.reserve. With a local flag (state.soldout), a sale
        this process proved sold out answers SOLD_OUT with no round trip
        while the flag holds (seckill.soldout)."""
        flags = self.s.soldout
        if flags is None:
            return (yield from self._reserve_in_round(user, qty, reqid))
        if not flags.retrying(reqid) and flags.check(self.s.flag):
            self.s.count(sold_out_local=1)
            return p.SplitReserved(p.SOLD_OUT, None, 0)
        try:
            out = yield from self._reserve_in_round(user, qty, reqid)
        except BaseException:
            flags.failed(self.s.flag, reqid)
            raise
        flags.answered(reqid)
        return out

    def _reserve_in_round(self, user: str, qty: int, reqid: Optional[str]) -> Steps:
        try:
            lay = yield from self.topology.layout()
        except LookupError:
            return p.SplitReserved(p.NO_SALE, None, 0)
        try:
            return (yield from self._reserve(lay, user, qty, reqid))
        except StaleRound:
            lay = yield from self.topology.reload()
        return (yield from self._reserve(lay, user, qty, reqid))

    def _reserve(self, lay: sp.Layout, user: str, qty: int, reqid: Optional[str]) -> Steps:
        s = self.s
        t0 = time.monotonic()
        home = lay.home(user)

        def again() -> Steps:
            token = s.flag_token()
            res = yield from ops.reserve(home, user, qty, reqid)
            if res.status == p.RESERVED or res.remaining > 0:
                s.in_stock(token)
            return res
        res = yield from again()
        s.count(reserve_calls=1)
        rt: Counter = Counter()
        if res.status == p.RESERVED:
            if sp.crossed_low(res.remaining, qty, lay.low) and s.pool_est != 0:
                try:
                    yield from self.transfers.refill(lay, home, 0, rt)
                except StaleRound:      # the reservation stands; the next call is in the new round
                    yield from self.topology.reload()
            s.count(reserved=1)
            self._finish(rt, True)
            return p.SplitReserved(res.status, res.rid, res.remaining)
        if res.status != p.SOLD_OUT:
            return p.SplitReserved(res.status, res.rid, res.remaining)
        s.count(home_empty=1)
        with s.lock:
            if s.first_empty is None:
                s.first_empty = time.time()
        return (yield from self._slow(lay, home, again, qty, res, t0, rt))

    def _finish(self, rt: Counter, ok: bool) -> None:
        suffix = '' if ok else '_sold_out'
        self.s.count(**{'rt_%s%s' % (k, suffix): v for k, v in rt.items() if v})

    def _done(self, res: p.Reserved, rt: Counter) -> p.SplitReserved:
        if res.status == p.RESERVED:
            self.s.count(reserved=1)
        self._finish(rt, res.status == p.RESERVED)
        return p.SplitReserved(res.status, res.rid, res.remaining)

    def _sold_out_seen(self, t0: float, qty: int) -> bool:
        """A sale-wide SOLD_OUT verdict from a snapshot that began after this
        call did (so the answer is true at that instant) and saw fewer than
        `qty` units anywhere, nothing in flight."""
        v = self.s.verdict
        return v is not None and v[0] >= t0 and v[1] < qty

    def _slow(self, lay: sp.Layout, home: str, again: Callable[[], Steps], qty: int,
              res: p.Reserved, t0: float, rt: Counter) -> Steps:
        """The home part answered SOLD_OUT. One thread (or task) of this
        object at a time brings stock to a part; one that waited retries
        RESERVE first when the one before it brought some."""
        s = self.s
        if self._sold_out_seen(t0, qty):
            s.count(sold_out=1)
            return p.SplitReserved(p.SOLD_OUT, None, 0)
        with s.lock:
            gen = s.gen.get(home, 0)
        got = yield Locked(('home', home), self._bring_home(lay, home, again, qty, res, t0, rt,
                                                            gen))
        if got is not None:
            return got
        s.count(sold_out=1)
        self._finish(rt, False)
        return p.SplitReserved(p.SOLD_OUT, None, 0)

    def _bring_home(self, lay: sp.Layout, home: str, again: Callable[[], Steps], qty: int,
                    res: p.Reserved, t0: float, rt: Counter, gen: int) -> Steps:
        """The slow path under the part's lock: the call's answer, or None
        for SOLD_OUT."""
        s = self.s
        if s.gen.get(home, 0) != gen:
            res = yield from again()
            rt['borrow'] += 1
            s.count(reserve_calls=1)
            if res.status != p.SOLD_OUT:
                return self._done(res, rt)
        for _attempt in range(MAX_ATTEMPTS):
            if self._sold_out_seen(t0, qty):
                return None
            need = max(1, qty - res.remaining)
            credited = 0
            path = 'refill'
            if s.pool_est != 0:
                credited = yield from self.transfers.refill(lay, home, need, rt)
            if credited < need:
                t_snap = time.monotonic()
                token = s.flag_token()
                a, _confirmed, _states = yield from self.auditor.audit(use_cache=True, rounds=1,
                                                                       lay=lay)
                rt['state'] += 1
                if a.in_flight:
                    _n, credits = yield from self.auditor.run_repair(a, {}, rt)
                    credited += credits.get(home, 0)
                    for k, v in credits.items():
                        a.remainders[k] = a.remainders.get(k, 0) + v
                elif a.remaining < qty:
                    with s.lock:
                        if s.verdict is None or s.verdict[0] < t_snap:
                            s.verdict = (t_snap, a.remaining)
                    if s.soldout is not None:
                        if a.remaining == 0:      # proven sale-wide: the local flag
                            s.soldout.sold_out(s.flag, token)
                        else:
                            s.soldout.in_stock(s.flag, token)
                    return None
                remainders = dict(a.remainders)
                if s.pool_drained is not None:
                    remainders.pop(lay.pool, None)
                plan = sp.borrow_plan(home, need - credited, remainders, len(lay.parts),
                                      lay.bmax, lay.pool)
                got, path = yield from self.transfers.borrow(lay, home, plan, rt)
                credited += got
            if credited:
                with s.lock:
                    s.gen[home] = s.gen.get(home, 0) + 1
            res = yield from again()
            rt[path] += 1
            s.count(reserve_calls=1)
            if res.status != p.SOLD_OUT:
                return self._done(res, rt)
        s.count(gave_up=1)
        return None
