"""Moving stock between the keys of a split sale (docs/cluster.md, section
3): SEND, WAIT on the same connection when the source has replicas, RECV;
the refill of a part from the pool; a borrow plan's transfers. Every write
here is idempotent (SEND by TID, RECV by cumulative total, the fence SET),
so a transient error retries it after a topology refresh."""

from __future__ import annotations

import time
from collections import Counter
from typing import Any, List, Optional, Sequence, Tuple

from redis.exceptions import ResponseError

from ..plain import split_protocol as sp
from ..plain.errors import transient
from ..plain.split_protocol import StaleRound
from ..plain.steps import OnNode, Refresh, Replicas, Sleep, Steps
from .state import SplitState, read_states

NODE_ATTEMPTS = 4        # tries of one idempotent write on its node


def on_node(key: str, commands: Sequence[Sequence[Any]]) -> Steps:
    """Commands pipelined on one connection to `key`'s master (SEND then
    WAIT), retried after a topology refresh on a transient error (MOVED, a
    lost connection: seckill.errors). StaleRound for a STALEROUND reply."""
    for attempt in range(NODE_ATTEMPTS):
        try:
            out = yield OnNode(key, commands)
            for x in out:
                if isinstance(x, ResponseError) and sp.is_stale_round(x):
                    raise StaleRound(str(x))
                if isinstance(x, Exception):
                    raise x
            return out
        except Exception as exc:
            if attempt == NODE_ATTEMPTS - 1 or not transient(exc):
                raise
        yield Sleep(0.05 * (attempt + 1))
        yield Refresh()
    raise AssertionError('unreachable')


class Transfers:
    """The stock-moving concern of one split-sale object."""

    def __init__(self, state: SplitState):
        self.s = state

    def incarnation(self, key: str, round_: str) -> Steps:
        """`key`'s incarnation (INFO incarnation) in round `round_`, cached
        per process: read once per key and round, dropped when a transfer
        with it is refused as STALEPEER. None when the key does not exist
        or is in another round (the SEND or RECV then answers STALEROUND)."""
        s = self.s
        with s.lock:
            got = s.incarnations.get((round_, key))
        if got is None:
            st = (yield from read_states([key]))[key]
            s.count(state_reads=1)
            got = st.incarnation if st is not None and st.round == round_ else None
            if got is not None:
                with s.lock:
                    s.incarnations[(round_, key)] = got
        return got

    def forget_incarnation(self, key: str) -> None:
        with self.s.lock:
            for k in [k for k in self.s.incarnations if k[1] == key]:
                del self.s.incarnations[k]

    def send(self, src: str, dst: str, qty: int, round_: str, min_: int = 1,
             tid: Optional[str] = None, wait: bool = True, to: Optional[str] = None) -> Steps:
        """SEND ... ROUND round_ TO dst's incarnation (read once, or `to`),
        and WAIT 1 on the same connection when the source has replicas:
        (taken, sent_total, src remaining, replicas acked or None).
        StaleRound when src is in another round; a ResponseError starting
        with STALEPEER when src counted its sends for another incarnation
        of dst (dst was re-created)."""
        tid = tid or sp.transfer_id()
        if to is None:
            to = yield from self.incarnation(dst, round_)
        cmds: List[List[Any]] = [sp.send_args(src, dst, qty, min_, tid, round_, to)]
        waiting = wait and (yield Replicas(src)) > 0
        if waiting:
            cmds.append(['WAIT', 1, self.s.wait_ms])
        try:
            out = yield from on_node(src, cmds)
        except ResponseError as exc:
            if sp.is_stale_peer(exc):
                self.forget_incarnation(dst)
            raise
        if out[0] is None:                    # the source key is gone
            return 0, 0, 0, None
        taken, sent_total, remaining = (int(x) for x in out[0])
        acked = None
        if waiting:
            acked = int(out[1])
            self.s.count(waits=1, wait_short=1 if acked < 1 else 0)
        return taken, sent_total, remaining, acked

    def recv(self, dst: str, src: str, sent_total: int, round_: str, to: Optional[str] = None) -> Steps:
        """RECV ... ROUND round_ [TO to]: (credited, received_total, dst
        remaining). `to`: the incarnation of dst the total was counted for
        (the SEND's TO; src's INFO sent_to in a repair). StaleRound when dst
        is in another round; a ResponseError starting with STALEPEER when
        the total was counted for another incarnation of dst."""
        try:
            out = yield from on_node(dst, [sp.recv_args(dst, src, sent_total, round_, to)])
        except ResponseError as exc:
            if sp.is_stale_peer(exc):
                self.forget_incarnation(dst)
            raise
        if out[0] is None:                    # the destination key is gone
            return 0, 0, 0
        credited, received, remaining = (int(x) for x in out[0])
        return credited, received, remaining

    def fence_wait(self, src: str) -> Steps:
        """A write on the source's node from our connection, then WAIT 1:
        the replication stream is ordered, so an ack for our write is an ack
        for the SEND before it."""
        if (yield Replicas(src)) > 0:
            out = yield from on_node(src, [
                ['SET', src + ':fence', int(time.time() * 1000), 'PX', 60000],
                ['WAIT', 1, self.s.wait_ms]])
            self.s.count(waits=1, wait_short=1 if int(out[1]) < 1 else 0)

    def transfer(self, lay: sp.Layout, src: str, dst: str, qty: int, path: str, rt: Counter,
                 min_: int = 1) -> Steps:
        """SEND src->dst, WAIT, RECV, in `lay`'s round: the units credited to dst."""
        to = yield from self.incarnation(dst, lay.round)
        taken, sent_total, src_left, _acked = yield from self.send(src, dst, qty, lay.round, min_, to=to)
        rt[path] += 1
        if src == lay.pool:
            self.s.pool_est = src_left
            self.s.count(pool_calls=1)
        self.s.fault('after_send')
        self.s.fault('after_wait')
        if taken == 0:
            return 0
        credited, _received, _left = yield from self.recv(dst, src, sent_total, lay.round, to=to)
        rt[path] += 1
        self.s.fault('after_recv')
        return credited

    def refill(self, lay: sp.Layout, home: str, need: int, rt: Counter) -> Steps:
        """Home part <- pool, a batch of clamp(ceil(pool/2P), 1, Bmax) or
        `need` if more. need 0 (the low-water refill): one at a time per part
        in this process."""
        s = self.s
        if need == 0:
            with s.lock:
                if home in s.refilling:
                    return 0
                s.refilling.add(home)
        try:
            if s.pool_est is None:
                st = (yield from read_states([lay.pool]))[lay.pool]
                rt['state'] += 1
                s.count(pool_calls=1)
                s.pool_est = st.remaining if st else 0
            if s.pool_est <= 0:
                return 0
            qty = max(need, sp.batch_size(s.pool_est, len(lay.parts), lay.bmax))
            got = yield from self.transfer(lay, lay.pool, home, qty, 'refill', rt)
            if got:
                s.count(refills=1)
            return got
        finally:
            if need == 0:
                with s.lock:
                    s.refilling.discard(home)

    def borrow(self, lay: sp.Layout, home: str, plan: Sequence[Tuple[str, int]],
               rt: Counter) -> Steps:
        """The transfers of a borrow plan (split_protocol.borrow_plan) to
        `home`: (units credited, the path of the last transfer)."""
        credited, path = 0, 'refill'
        for donor, take in plan:
            path = 'refill' if donor == lay.pool else 'borrow'
            got = yield from self.transfer(lay, donor, home, take, path, rt)
            if got and path == 'borrow':
                self.s.count(borrows=1)
            credited += got
        return credited, path
