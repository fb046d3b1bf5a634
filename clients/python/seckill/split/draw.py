"""A split sale's draw (docs/draw-sales.md, "Split sales"): ENTER on the
user's home part; the draw, which first moves stock between the keys with
SEND/RECV so that each part holds a share of the sale's stock proportional
to its entrants (seckill.draw.allocate, largest remainder), then DRAWs
every part to completion; the verification of every part's draw.

Repair-safe: every rebalance pass starts from an audit, completes any
transfer in flight first (the repair of seckill.split.audit) and plans
from what the keys hold then; a SEND's TID is a function of the round,
the pair, the source's sent total before it and the quantity
(seckill.draw.rebalance_tid), so a retry, a rerun after a crash or a second
client planning from the same figures moves the units once. Once any part
has begun its draw (its seed is revealed) the stock is not moved again:
the rebalance finished before the first DRAW.

Crash points (seckill.faults): `after_send` and `after_recv` around each
rebalance transfer, `draw_rebalanced` (the stock in place, no DRAW sent)."""

from __future__ import annotations

from typing import Any, Dict, List, Mapping, Optional

from ..ops import draw as draw_ops
from ..ops import sale as ops
from ..plain import draw as d
from ..plain import protocol as p
from ..plain import split_protocol as sp
from ..plain.steps import Round, Steps, call
from .parts import Parts
from .reserve import MAX_ATTEMPTS
from .topology import DRAW_END_FIELD


class Drawer(Parts):
    """The draw concern of one split-sale object."""

    def enter(self, user: d.UserId, qty: int = 1, reqid: Any = None) -> Steps:
        """ENTER on the user's home part: Entered(status, entrants of that
        part). NO_SALE when the sale does not exist."""
        try:
            lay = yield from self.topology.layout()
        except LookupError:
            return d.Entered(d.NO_SALE, 0)
        return (yield from draw_ops.enter(lay.home(p.text(user)), user, qty, reqid))

    def draw(self, count: int = d.DEFAULT_DRAW_COUNT, beacon_value: Any = None) -> Steps:
        """See SplitSale.draw."""
        if beacon_value is not None:     # refused before anything moves
            d.draw_args('x', count, beacon_value)

        def once() -> Steps:
            lay = yield from self.topology.layout()
            return (yield from self._draw(lay, count, beacon_value))
        return (yield from self.topology.round_retry(once))

    def _draw(self, lay: sp.Layout, count: int, beacon_value: Any = None) -> Steps:
        infos = yield from self.infos(lay)
        declared = sorted({i.beacon for i in infos.values() if i.beacon is not None})
        if beacon_value is None and declared and not all(i.started for i in infos.values()):
            # the parts' first DRAW would refuse it, after the stock moved
            raise ValueError('split sale %r declared the beacon %s: draw(beacon_value=...) with '
                             'its public value' % (lay.name, ', '.join(map(repr, declared))))
        out: Dict[str, Any] = {'moved': 0, 'transfers': 0, 'rebalanced': False}
        if not any(i.started for i in infos.values()):
            # before END entrants still come: a plan now would weigh too few of them
            end = yield from call(['HGET', sp.layout_key(lay.name), DRAW_END_FIELD])
            now = yield from ops.server_ms()
            if end is not None and now < int(p.text(end)):
                raise d.RegistrationOpen('split sale %r: registration is open until END (%d, '
                                         'the server says %d): draw() runs after it'
                                         % (lay.name, int(p.text(end)), now))
            out.update((yield from self.rebalance(lay)))
            out['rebalanced'] = True
            self.s.fault('draw_rebalanced')
        out.update((yield from self.draw_parts(lay, count, beacon_value)))
        return out

    def infos(self, lay: sp.Layout) -> Steps:
        """Every part's DrawInfo, in one parallel round; ValueError when a
        part is missing or not a draw sale."""
        replies = yield Round([['SECKILL.INFO', k] for k in lay.parts])
        out: Dict[str, d.DrawInfo] = {}
        for k, reply in zip(lay.parts, replies):
            info = d.draw_info(p.parse_report(reply))
            if info is None:
                raise ValueError('split sale %r: part %s is missing or not a draw sale '
                                 '(create(..., draw=True))' % (lay.name, k))
            out[k] = info
        return out

    def rebalance(self, lay: sp.Layout, weights: Optional[Mapping[str, int]] = None) -> Steps:
        """Moves stock until every part holds its share of the sale's stock
        by entrants and the pool holds none: {'moved', 'transfers',
        'entrants', 'shares', 'stock', 'closeness'}. Each pass audits first
        and repairs what is in flight, so it converges after an
        interruption. `weights` ({part: entrants}): the parts' INFO
        `entrants` when None."""
        moved = sends = 0
        for _ in range(MAX_ATTEMPTS):
            a, confirmed, states = yield from self.auditor.audit(use_cache=False, lay=lay)
            if a.missing:
                raise RuntimeError('split sale %r: keys missing: %s'
                                   % (lay.name, ', '.join(a.missing)))
            if a.in_flight or confirmed:
                yield from self.auditor.run_repair(a, confirmed)
                continue
            if weights is None:
                weights = {k: int(states[k].report.get('entrants') or 0) for k in lay.parts}
            have = {k: states[k].remaining for k in lay.keys}
            stock = sum(have.values())
            shares = d.allocate(stock, weights, lay.round)
            result = {'entrants': weights, 'shares': shares, 'stock': stock,
                      'closeness': d.split_closeness(stock, weights, shares)}
            if not any(weights.values()):
                plan: List[Any] = []          # nobody entered: nothing to draw for
            else:
                plan = d.transfer_plan(have, dict(shares, **{lay.pool: 0}))
            if not plan:
                result.update(moved=moved, transfers=sends)
                return result
            for src, dst, qty in plan:
                tid = d.rebalance_tid(lay.round, src, dst, states[src].sent.get(dst, 0), qty)
                taken, sent_total, _left, _ack = yield from self.transfers.send(
                    src, dst, qty, lay.round, 1, tid)
                sends += 1
                self.s.fault('after_send')
                if taken:
                    credited, _r, _l = yield from self.transfers.recv(dst, src, sent_total,
                                                                      lay.round)
                    moved += credited
                    self.s.fault('after_recv')
        raise RuntimeError('split sale %r: the rebalance before the draw did not settle in %d '
                           'passes' % (lay.name, MAX_ATTEMPTS))

    def draw_parts(self, lay: sp.Layout, count: int, beacon_value: Any = None) -> Steps:
        """DRAW on every part, in parallel rounds, until each part's draw is
        complete: {'drawn' (winners made by these calls), 'remaining' (the
        parts' stock after), 'rounds'}. Every DRAW carries `BEACON
        beacon_value` when given."""
        active = list(lay.parts)
        last: Dict[str, int] = {}
        drawn = rounds = 0
        remaining: Dict[str, int] = {}
        while active:
            replies = yield Round([d.draw_args(k, count, beacon_value) for k in active])
            rounds += 1
            still = []
            for k, reply in zip(active, replies):
                res = d.parse_drawn(reply)
                drawn += res.drawn
                remaining[k] = res.remaining
                if res.left_to_draw == 0:
                    continue
                if res.drawn == 0 and k in last and res.left_to_draw >= last[k]:
                    raise p.ProtocolError('SECKILL.DRAW %s made no progress (left_to_draw %d)'
                                          % (k, res.left_to_draw))
                last[k] = res.left_to_draw
                still.append(k)
            active = still
        return {'drawn': drawn, 'remaining': sum(remaining.values()), 'rounds': rounds}

    def verify(self, commitments: Optional[Mapping[str, str]] = None, beacon: Any = None,
               beacon_value: Any = None) -> Steps:
        """Every part's draw verified on its own (against its published
        commitment, `commitments[part key]`, and the sale's `beacon` and
        `beacon_value`), then the parts' shares of the stock against their
        entrants (seckill.draw.verify_split): the plan `rebalance` follows.
        A part the published `commitments` leave out is checked against
        nothing published: it fails (BAD_COMMITMENT), as does a published
        key that is not a part."""
        lay = yield from self.topology.layout()
        verdicts = []
        for k in lay.parts:
            if commitments is not None and k not in commitments:
                verdicts.append(d.Verdict(d.BAD_COMMITMENT, 'no published commitment for this '
                                          'part', key=k, check='commitment'))
                continue
            verdicts.append((yield from draw_ops.verify(
                k, commitment=None if commitments is None else commitments[k],
                beacon=beacon, beacon_value=beacon_value)))
        return d.verify_split(lay.name, lay.round, verdicts, commitments)

    def commitments(self) -> Steps:
        """{part key: seed_commitment} of every part (one parallel round
        of INFO): what to publish before END, with the beacon's name."""
        lay = yield from self.topology.layout()
        infos = yield from self.infos(lay)
        return {k: infos[k].seed_commitment for k in lay.parts}

    def entrants_page(self, part: int, cursor: Any, count: int) -> Steps:
        """A page of part `part`'s entrants: (next cursor, [Entrant], the
        number of parts, the part's key)."""
        lay = yield from self.topology.layout()
        key = lay.parts[part]
        nxt, page = yield from draw_ops.entrants_page(key, cursor, count)
        return nxt, page, len(lay.parts), key


__all__ = ['Drawer']
