"""The layout of a split sale: reading it (and reading it again when the
keys follow another round), creating the sale (placement, orphan check,
INIT of every key, the layout hash last), and recovering a lost layout
from the keys (docs/cluster.md, sections 1 and 7)."""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, Dict, Iterable, List, Optional

from ..ops import sale as ops
from ..plain import split_audit as sa
from ..plain import split_protocol as sp
from ..plain.split_protocol import StaleRound
from ..plain.steps import Masters, Steps, call, pairs_dict
from .state import SplitState, read_states


class OrphanKeys(RuntimeError):
    """create(): keys of the sale exist but its layout hash does not (it was
    deleted or evicted). Creating over them would keep their stock and add
    new stock beside it; recover() rebuilds the layout from them instead."""

    def __init__(self, name: str, keys: Iterable[str]):
        self.keys = sorted(keys)
        super().__init__('split sale %r: keys %s exist without the layout %s: recover() '
                         'rebuilds the layout from them (or create(..., replace=True) '
                         'starts the sale over)' % (name, ', '.join(self.keys),
                                                    sp.layout_key(name)))


DRAW_END_FIELD = 'draw_end_ms'
"""The layout hash's field for a draw sale's END (INFO does not show it)."""


def _hset_args(lkey: str, lay: sp.Layout) -> List[Any]:
    args: List[Any] = ['HSET', lkey]
    for f, v in lay.to_hash().items():
        args += [f, v]
    return args


class Topology:
    """The layout concern of one split-sale object."""

    def __init__(self, state: SplitState):
        self.s = state

    def layout(self) -> Steps:
        """The layout, read once (`sale:{name}:split`). LookupError when the
        sale was never created."""
        lay = self.s.layout
        if lay is None:
            h = yield from call(['HGETALL', sp.layout_key(self.s.name)])
            if not h:
                raise LookupError('split sale %r does not exist' % self.s.name)
            lay = self.s.layout = sp.Layout.from_hash(pairs_dict(h))
            self.s.follow(lay)
        return lay

    def reload(self) -> Steps:
        """The layout read again, every cache of the old round dropped."""
        self.s.forget_round()
        self.s.count(stale_round=1)
        return (yield from self.layout())

    def round_retry(self, op: Callable[[], Steps]) -> Steps:
        """op() once more under a reloaded layout after STALEROUND; a second
        StaleRound goes to the caller."""
        try:
            return (yield from op())
        except StaleRound:
            yield from self.reload()
        return (yield from op())

    def streams(self) -> Steps:
        return list((yield from self.layout()).streams)

    def create(self, total: int, parts: Optional[int] = None, limit: int = 1, hold_ms: int = 0,
               start_ms: Optional[int] = None, end_ms: Optional[int] = None,
               ttl_s: Optional[int] = None, stream: bool = False, replace: bool = False,
               bmax: int = sp.DEFAULT_BMAX, draw: bool = False,
               beacon: Optional[Any] = None) -> Steps:
        """See SplitSale.create. `draw`: the parts are draw sales (INIT ...
        DRAW, with `BEACON name` on each when `beacon` is given); the pool,
        which only holds stock, is not."""
        if beacon is not None and not draw:
            raise ValueError('a beacon needs a draw sale (draw=True)')
        name = self.s.name
        lkey = sp.layout_key(name)
        old = yield from call(['HGETALL', lkey])
        if old and not replace:
            return False
        owner, masters = yield Masters()
        if parts is None:
            parts = max(1, len(masters))
        pool_tag, part_tags = sp.place(name, int(parts), owner, masters)
        lay = sp.make_layout(name, int(total), pool_tag, part_tags, limit=int(limit),
                             stream=stream, bmax=bmax)
        if old:
            old_keys = set(sp.layout_keys(pairs_dict(old)))
        else:
            probe = set(lay.keys) | {sp.tag_key(sp.pool_tag(name))} | {
                sp.tag_key(sp.part_tag(name, i)) for i in range(int(parts))}
            old_keys = set((yield from self.existing(probe)))
            if old_keys and not replace:
                raise OrphanKeys(name, old_keys)
        self.s.fault('create_checked')
        common = dict(start_ms=start_ms, end_ms=end_ms, ttl_s=ttl_s, replace=replace)
        created = yield from ops.init(lay.pool, lay.initial[0], split=lay.split_args(lay.pool),
                                       **common)
        if not created:
            # Another create got between our check and this INIT: its pool
            # decides the round, as long as it made the same parts.
            st = (yield from read_states([lay.pool]))[lay.pool]
            if st is None or st.round is None or st.peers != sorted(lay.parts):
                raise RuntimeError('split sale %r: created concurrently with another layout '
                                   '(pool %s: %s)' % (name, lay.pool, st and st.report))
            lay = dataclasses.replace(lay, round=st.round)
        for i, key in enumerate(lay.parts):
            if not (yield from ops.init(key, lay.initial[1 + i], limit=limit,
                                         hold_ms=hold_ms or None,
                                         stream=lay.streams[i] if stream else None,
                                         split=lay.split_args(key), draw=draw,
                                         beacon=beacon, **common)):
                st = (yield from read_states([key]))[key]
                if st is None or st.round != lay.round:
                    raise RuntimeError('split sale %r: %s exists in round %s, not %s (an '
                                       'interrupted create or replace: replace=True finishes it)'
                                       % (name, key, st and st.round, lay.round))
        if replace:
            for k in old_keys - set(lay.keys):
                yield from call(['DEL', k])
            yield from call(['DEL', lkey])
        hset = _hset_args(lkey, lay)
        if draw and end_ms is not None:     # the draw checks END before it moves stock
            hset += [DRAW_END_FIELD, int(end_ms)]
        yield from call(hset)
        if ttl_s:
            yield from call(['EXPIRE', lkey, int(ttl_s)])
        self.s.adopt(lay, lay.initial[0])
        return created

    def existing(self, keys: Iterable[str]) -> Steps:
        """The keys among `keys` that exist, and every key they name as a
        peer (and so on) that exists: {key: state}."""
        states = yield from read_states(sorted(set(keys)))
        while True:
            more = sa.unread_peers(states)
            if not more:
                return {k: v for k, v in states.items() if v is not None}
            states.update((yield from read_states(more)))

    def recover(self, stream: Optional[bool] = None, limit: int = 1, bmax: int = sp.DEFAULT_BMAX,
                hint: Iterable[str] = (), salts: int = 64) -> Steps:
        """See SplitSale.recover."""
        name = self.s.name
        lkey = sp.layout_key(name)
        if (yield from call(['EXISTS', lkey])):
            raise RuntimeError('split sale %r: the layout %s exists' % (name, lkey))
        found = yield from read_states(sp.probe_keys(name, salts) + list(hint))
        states: Dict[str, Optional[sa.KeyState]] = {
            k: v for k, v in found.items() if v is not None}
        if not states:
            raise LookupError('split sale %r: no key found' % name)
        while True:
            more = sa.unread_peers(states)
            if not more:
                break
            states.update((yield from read_states(more)))
        lay = sa.recover_layout(name, states, streams=False, limit=int(limit), bmax=bmax)
        if stream is None:
            stream = False
            for k in lay.parts:
                if (yield from call(['EXISTS', sp.stream_key(sp.key_tag(k))])):
                    stream = True
                    break
        if stream:
            lay = dataclasses.replace(lay, streams=tuple(sp.stream_key(sp.key_tag(k))
                                                         for k in lay.parts))
        yield from call(_hset_args(lkey, lay))
        ttl = int((yield from call(['PTTL', lay.pool])))
        if ttl > 0:
            yield from call(['PEXPIRE', lkey, ttl])
        self.s.adopt(lay, None)
        return lay
