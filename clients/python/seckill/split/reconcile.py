"""The reconcile fan-out of a split sale (docs/cluster.md, section 6):
orders grouped by their users' home parts, RECONCILE on each part; with
APPLY, a part that lacks the stock to take its orders back brings it home
first (pool, repair, the richest parts)."""

from __future__ import annotations

from collections import Counter
from typing import Any, Dict, List

from ..ops import sale as ops
from ..plain import protocol as p
from ..plain import split_protocol as sp
from ..plain.steps import Steps
from .parts import Parts
from .reserve import MAX_ATTEMPTS


class Reconciler(Parts):
    """The reconcile concern of one split-sale object."""

    def reconcile(self, orders: List[Any], apply: bool = False,
                  chunk_size: int = p.DEFAULT_CHUNK) -> Steps:
        """See SplitSale.reconcile."""
        def once() -> Steps:
            lay = yield from self.topology.layout()
            return (yield from self._reconcile(lay, orders, apply, chunk_size))
        return (yield from self.topology.round_retry(once))

    def _reconcile(self, lay: sp.Layout, orders: List[Any], apply: bool,
                   chunk_size: int) -> Steps:
        groups = sp.group_orders(lay, orders)
        results: Dict[str, p.ReconcileResult] = {}
        borrowed = 0
        for key, rows in groups.items():
            if apply and rows:
                first = yield from ops.reconcile(key, rows, apply=False, chunk_size=chunk_size)
                merged = dict(first.report or {})
                for c in ('released', 'unknown'):
                    merged['orders_%s_ids' % c] = first.ids[c]
                short = sp.shortfall(merged, rows)
                if short:
                    borrowed += yield from self.bring_home(lay, key, short)
            results[key] = yield from ops.reconcile(key, rows, apply=apply,
                                                     chunk_size=chunk_size)
        out = sp.merge_parts(results)
        out['borrowed'] = borrowed
        return out

    def bring_home(self, lay: sp.Layout, home: str, need: int) -> Steps:
        """Up to `need` units to `home`: refills, repairs of transfers in
        flight, borrows from the richest parts. The units credited."""
        rt: Counter = Counter()
        got = 0
        for _ in range(MAX_ATTEMPTS):
            if got >= need:
                break
            if self.s.pool_est != 0:
                got += yield from self.transfers.refill(lay, home, need - got, rt)
                if got >= need:
                    break
            a, _c, _s = yield from self.auditor.audit(use_cache=False, rounds=1, lay=lay)
            if a.in_flight:
                _n, credits = yield from self.auditor.run_repair(a, {})
                got += credits.get(home, 0)
                continue
            plan = sp.borrow_plan(home, need - got, dict(a.remainders), len(lay.parts),
                                  lay.bmax, lay.pool)
            if not plan:
                break
            for donor, take in plan:
                got += yield from self.transfers.transfer(
                    lay, donor, home, min(take, need - got) if donor != lay.pool else take,
                    'borrow', rt)
        return got
