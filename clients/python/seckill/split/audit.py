"""The audit of a split sale and the repair of interrupted transfers
(docs/cluster.md, sections 4 and 5): every key's report in one parallel
round, negative pairs confirmed by a second read, info(), and the
execution of split_audit.repair_plan."""

from __future__ import annotations

from collections import Counter
from typing import Dict, Mapping, Optional, Tuple

from ..plain import split_audit as sa
from ..plain import split_protocol as sp
from ..plain.split_protocol import StaleRound
from ..plain.steps import NodeName, Replicas, Steps
from .state import SplitState, read_states
from .topology import Topology
from .transfers import Transfers


class Auditor:
    """The audit-and-repair concern of one split-sale object."""

    def __init__(self, state: SplitState, topology: Topology, transfers: Transfers):
        self.s = state
        self.topology = topology
        self.transfers = transfers

    def states(self, lay: sp.Layout, use_cache: bool) -> Steps:
        """Every key's report; with `use_cache` the drained pool's last one
        (while it is of the layout's round) instead of reading the pool."""
        s = self.s
        cached = s.pool_drained if use_cache else None
        if cached is not None and cached.round != lay.round:
            cached = None
        keys = list(lay.parts) if cached is not None else list(lay.keys)
        states = yield from read_states(keys)
        with s.lock:    # SEND's and RECV's TO, for free
            s.incarnations.update(((st.round, k), st.incarnation) for k, st in states.items()
                                  if st is not None and st.incarnation and st.round)
        if cached is not None:
            states[lay.pool] = cached
            s.count(state_reads=len(keys))
        else:
            s.count(state_reads=len(keys), pool_calls=1)
            pool = states.get(lay.pool)
            if pool is not None and pool.round == lay.round:
                s.pool_est = pool.remaining
                if pool.remaining == 0:
                    s.pool_drained = pool
        return states

    def confirm_negative(self, a: sa.Audit) -> Steps:
        """Re-reads each negative pair destination first, then source: a
        pair still negative then is a real lost debit, not a skewed round."""
        out: Dict[Tuple[str, str], Tuple[int, int]] = {}
        for (src, dst) in a.negative:
            d = (yield from read_states([dst]))[dst]
            s = (yield from read_states([src]))[src]
            if d is None or s is None:
                continue
            got, sent = d.received.get(src, 0), s.sent.get(dst, 0)
            if got > sent:
                out[(src, dst)] = (sent, got)
        return out

    def audit(self, use_cache: bool = False, rounds: int = 3, stale_ok: bool = False,
              lay: Optional[sp.Layout] = None) -> Steps:
        """An audit whose negative pairs are confirmed (or gone after a
        fresh round): (audit, confirmed negative pairs, the states read).
        StaleRound when a key is in another round than the layout's (unless
        `stale_ok`: info() reports it): nothing may be planned from it."""
        lay = lay or (yield from self.topology.layout())
        for _ in range(rounds):
            states = yield from self.states(lay, use_cache)
            a = sa.audit(lay, states)
            if a.stale and not stale_ok:
                raise StaleRound('split sale %r: %s' % (self.s.name, '; '.join(
                    x for x in a.problems if 'round' in x or 'split sale' in x)))
            if a.stale or not a.negative:
                return a, {}, states
            confirmed = yield from self.confirm_negative(a)
            if len(confirmed) == len(a.negative):
                return a, confirmed, states
            use_cache = False
        return a, confirmed, states

    def info(self) -> Steps:
        """See SplitSale.info."""
        a, confirmed, states = yield from self.audit(use_cache=False, stale_ok=True)
        if a.stale:
            yield from self.topology.reload()
            a, confirmed, states = yield from self.audit(use_cache=False, stale_ok=True)
        lay = yield from self.topology.layout()

        def entry(k: str) -> Steps:
            st = states.get(k)
            return {'key': k, 'node': (yield NodeName(k)), 'report': st.report if st else None}

        problems = [x for x in a.problems
                    if not x.startswith('lost debit') or not a.negative or confirmed]
        pool = yield from entry(lay.pool)
        parts = []
        for k in lay.parts:
            parts.append((yield from entry(k)))
        return {'total': lay.total, 'remaining': a.remaining, 'pending': a.pending,
                'confirmed': a.confirmed, 'released': a.released, 'in_flight': a.in_flight,
                'invariant': 'ok' if not problems else 'broken',
                'pool': pool, 'parts': parts,
                'lost_debit': sum(g - s for s, g in confirmed.values()),
                'problems': problems, 'round': a.round,
                'flights': {'%s>%s' % k: v for k, v in a.flights.items()}}

    def run_repair(self, a: sa.Audit, confirmed: Mapping,
                   rt: Optional[Counter] = None) -> Steps:
        """Executes repair_plan in the audit's round: (steps that changed
        something, credits per key)."""
        done = 0
        credits: Dict[str, int] = {}
        for step in sa.repair_plan(a, confirmed):
            if step.action == sa.RECV:
                yield from self.transfers.fence_wait(step.src)
                credited, _r, _left = yield from self.transfers.recv(step.dst, step.src,
                                                                     step.amount, a.round, to=step.to)
                if rt is not None:
                    rt['repair'] += 2 if (yield Replicas(step.src)) else 1
                if credited:
                    done += 1
                    credits[step.dst] = credits.get(step.dst, 0) + credited
            else:
                taken, _s, _left, _ack = yield from self.transfers.send(
                    step.src, step.dst, step.amount, a.round, 1, step.tid)
                if rt is not None:
                    rt['repair'] += 1
                if taken:
                    done += 1
        if done:
            self.s.count(repairs=done)
        return done, credits

    def repair(self) -> Steps:
        """See SplitSale.repair."""
        def once() -> Steps:
            a, confirmed, _states = yield from self.audit(use_cache=False)
            return (yield from self.run_repair(a, confirmed))[0]
        return (yield from self.topology.round_retry(once))


__all__ = ['Auditor']
