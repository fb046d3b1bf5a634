"""`SplitSale`: one hot sale spread over the masters of a Redis Cluster
(docs/cluster.md). A thin redis-py layer: the plans (placement, routing,
batches, borrows, the audit, repairs, the reconcile fan-out) come from
seckill.split_protocol; this module only sends the commands.

    from redis.cluster import RedisCluster
    from seckill import SplitSale

    rc = RedisCluster(host='127.0.0.1', port=7000, decode_responses=True)
    sale = SplitSale(rc, '1001')
    sale.create(100_000, limit=1, hold_ms=900_000, stream=True)
    status, rid = sale.reserve('user:42', reqid='order-7f3a')
    sale.confirm('user:42', rid)

Thread-safe: one SplitSale may serve many threads (redis-py's clients are).

Rounds: every create or replace gives the sale a new round id, INITed into
every key (`SPLIT round n peer ...`) and stored in the layout; every SEND
and RECV carries the round the object read from the layout, and a key of
another round refuses it (STALEROUND) and changes nothing. On STALEROUND,
or an audit that finds a key in another round, the object reloads the
layout, drops every cached report and estimate, and runs the call once
more under the new round; a second one raises StaleRound (a replace is
under way, or was interrupted: finish it with create(..., replace=True)).
"""

from __future__ import annotations

import dataclasses
import threading
import time
from collections import Counter
from typing import Any, Callable, Dict, Iterable, List, Mapping, Optional, Tuple

from redis.exceptions import ResponseError

from . import protocol as p
from . import split_protocol as sp
from .errors import transient
from .faults import NONE
from .sale import Sale
from .split_protocol import RecoverError, StaleRound

try:  # redis-py >= 4.1
    from redis.cluster import RedisCluster
except ImportError:  # pragma: no cover
    RedisCluster = ()  # type: ignore

MAX_ATTEMPTS = 16        # slow-path rounds of one reserve before it gives up


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


class SplitSale:
    """A split sale by name. `client` is a redis.cluster.RedisCluster or a
    plain redis.Redis (every key on one node). `wait_ms`: the WAIT timeout
    between SEND and RECV when the source has replicas.

    `stats` counts, per path, the round trips beyond the one RESERVE of a
    call (`rt_refill`, `rt_borrow`, `rt_state`, `rt_repair`; with the
    suffix `_sold_out` for calls that ended SOLD_OUT), and `reserve_calls`,
    `reserved`, `sold_out`, `pool_calls`, `refills`, `borrows`, `waits`,
    `wait_short` (WAIT saw no replica ack in time), `gave_up` (a SOLD_OUT
    after MAX_ATTEMPTS rounds while stock was seen: should stay 0),
    `stale_round` (layout reloads after STALEROUND or a key in another round).
    """

    def __init__(self, client: Any, name: str, *, wait_ms: int = 1000):
        self.r = client
        self.name = sp.check_name(name)
        self.cluster = bool(RedisCluster) and isinstance(client, RedisCluster)
        self.wait_ms = int(wait_ms)
        self.stats: Counter = Counter()
        self.faults: Callable[[str], None] = NONE   # crash points (seckill.faults)
        self._layout: Optional[sp.Layout] = None
        self._lock = threading.Lock()
        self._pool_est: Optional[int] = None          # the pool's remaining, last seen
        self._pool_drained: Optional[sp.KeyState] = None   # the pool's final report
        self._refilling: set = set()
        self._plain_replicas: Optional[int] = None
        self.first_empty: Optional[float] = None    # when a home part first answered SOLD_OUT
        self._home_locks: Dict[str, threading.Lock] = {}
        self._gen: Dict[str, int] = {}                # stock brought to a part, per part
        self._verdict: Optional[Tuple[float, int]] = None   # (snapshot start, units seen)

    def __repr__(self) -> str:
        return 'SplitSale(%r)' % (self.name,)

    # ------------------------------------------------------------ plumbing

    def _count(self, **kw: int) -> None:
        with self._lock:
            self.stats.update(kw)

    def _call(self, *args: Any) -> Any:
        return self.r.execute_command(*args)

    def _node(self, key: str) -> Any:
        return self.r.get_node_from_key(key) if self.cluster else None

    def _node_client(self, key: str) -> Any:
        """A redis.Redis on the master serving `key` (WAIT must go on the
        connection that wrote, not to redis-py's default node)."""
        if not self.cluster:
            return self.r
        return self.r.get_redis_connection(self.r.get_node_from_key(key))

    def node_name(self, key: str) -> str:
        if self.cluster:
            return self.r.get_node_from_key(key).name
        kw = self.r.connection_pool.connection_kwargs
        return '%s:%s' % (kw.get('host', 'localhost'), kw.get('port', 6379))

    def _replicas(self, key: str) -> int:
        if self.cluster:
            nodes = self.r.nodes_manager.slots_cache.get(sp.key_slot(key), [])
            return max(0, len(nodes) - 1)
        if self._plain_replicas is None:
            self._plain_replicas = int(self.r.info('replication').get('connected_slaves', 0))
        return self._plain_replicas

    def refresh(self) -> None:
        """Forget cached topology, replica counts and pool figures (after a
        failover or adding replicas)."""
        if self.cluster:
            self.r.nodes_manager.initialize()
        self._plain_replicas = None
        self._pool_est = None
        self._pool_drained = None

    def _on_node(self, key: str, commands: List[List[Any]]) -> List[Any]:
        """Commands pipelined on one connection to `key`'s master (SEND then
        WAIT), retried after a topology refresh on MOVED / connection loss:
        every write here is idempotent (SEND by TID, RECV by total, SET)."""
        for attempt in range(4):
            try:
                pipe = self._node_client(key).pipeline(transaction=False)
                for c in commands:
                    pipe.execute_command(*c)
                out = pipe.execute(raise_on_error=False)
                for x in out:
                    if isinstance(x, ResponseError) and sp.is_stale_round(x):
                        raise StaleRound(str(x))
                    if isinstance(x, Exception):
                        raise x
                return out
            except Exception as exc:
                if attempt == 3 or not transient(exc):
                    raise
                time.sleep(0.05 * (attempt + 1))
                if self.cluster:
                    self.r.nodes_manager.initialize()
        raise AssertionError('unreachable')

    def _read(self, keys: Iterable[str]) -> Dict[str, Optional[sp.KeyState]]:
        """SECKILL.INFO of every key in one parallel round (a pipeline; in a
        cluster redis-py writes to every node before reading any reply)."""
        keys = list(keys)
        pipe = self.r.pipeline(transaction=False) if not self.cluster else self.r.pipeline()
        for k in keys:
            pipe.execute_command('SECKILL.INFO', k)
        replies = pipe.execute()
        return {k: sp.key_state(k, p.parse_report(v)) for k, v in zip(keys, replies)}

    # ------------------------------------------------------------ layout

    def layout(self) -> sp.Layout:
        """The layout, read once from the cluster (`sale:{name}:split`).
        Raises LookupError when the sale was never created."""
        if self._layout is None:
            h = self._call('HGETALL', sp.layout_key(self.name))
            if not h:
                raise LookupError('split sale %r does not exist' % self.name)
            if isinstance(h, (list, tuple)):
                h = dict(zip(h[0::2], h[1::2]))
            self._layout = sp.Layout.from_hash(h)
        return self._layout

    def _reload(self) -> sp.Layout:
        """The layout read again, every cache of the old round dropped."""
        with self._lock:
            self._layout = None
            self._pool_est = None
            self._pool_drained = None
            self._verdict = None
        self._count(stale_round=1)
        return self.layout()

    def _round_retry(self, fn: Callable[[], Any]) -> Any:
        """fn() once more under a reloaded layout after STALEROUND; a second
        StaleRound goes to the caller."""
        try:
            return fn()
        except StaleRound:
            self._reload()
        return fn()

    def _masters(self) -> Tuple[Optional[Callable[[int], str]], List[str]]:
        if not self.cluster:
            return None, []
        self.r.nodes_manager.initialize()
        cache = self.r.nodes_manager.slots_cache
        return (lambda slot: cache[slot][0].name), [n.name for n in self.r.get_primaries()]

    def create(self, total: int, parts: Optional[int] = None, limit: int = 1, hold_ms: int = 0,
               start_ms: Optional[int] = None, end_ms: Optional[int] = None,
               ttl_s: Optional[int] = None, stream: bool = False, replace: bool = False,
               bmax: int = sp.DEFAULT_BMAX) -> bool:
        """Creates the pool and the parts (SECKILL.INIT each, with `SPLIT
        round n peer ...` under a new round id), then the layout hash. False
        when the sale exists and `replace` is not set (nothing changes).
        Raises OrphanKeys when keys of the sale exist without their layout
        (the pool and part keys this placement uses, and every key they
        name as peers): use recover(). With `replace`, a new round: every
        key REPLACEd, the old keys the new layout drops deleted (found from
        the old layout, or from the keys' peers when it is lost)."""
        lkey = sp.layout_key(self.name)
        old = self._call('HGETALL', lkey)
        if old and not replace:
            return False
        owner, masters = self._masters()
        if parts is None:
            parts = max(1, len(masters))
        pool_tag, part_tags = sp.place(self.name, int(parts), owner, masters)
        lay = sp.make_layout(self.name, int(total), pool_tag, part_tags, limit=int(limit),
                             stream=stream, bmax=bmax)
        if old:
            if isinstance(old, (list, tuple)):
                old = dict(zip(old[0::2], old[1::2]))
            old_keys = set(sp.layout_keys(old))
        else:
            probe = set(lay.keys) | {sp.tag_key(sp.pool_tag(self.name))} | {
                sp.tag_key(sp.part_tag(self.name, i)) for i in range(int(parts))}
            old_keys = set(self._existing(probe))
            if old_keys and not replace:
                raise OrphanKeys(self.name, old_keys)
        self.faults('create_checked')
        common = dict(start_ms=start_ms, end_ms=end_ms, ttl_s=ttl_s, replace=replace)
        created = Sale(self.r, lay.pool).init(lay.initial[0], split=lay.split_args(lay.pool),
                                              **common)
        if not created:
            # Another create got between our check and this INIT: its pool
            # decides the round, as long as it made the same parts.
            st = self._read([lay.pool])[lay.pool]
            if st is None or st.round is None or st.peers != sorted(lay.parts):
                raise RuntimeError('split sale %r: created concurrently with another layout '
                                   '(pool %s: %s)' % (self.name, lay.pool, st and st.report))
            lay = dataclasses.replace(lay, round=st.round)
        for i, key in enumerate(lay.parts):
            if not Sale(self.r, key).init(lay.initial[1 + i], limit=limit, hold_ms=hold_ms or None,
                                          stream=lay.streams[i] if stream else None,
                                          split=lay.split_args(key), **common):
                st = self._read([key])[key]
                if st is None or st.round != lay.round:
                    raise RuntimeError('split sale %r: %s exists in round %s, not %s (an '
                                       'interrupted create or replace: replace=True finishes it)'
                                       % (self.name, key, st and st.round, lay.round))
        if replace:
            for k in old_keys - set(lay.keys):
                self._call('DEL', k)
            self._call('DEL', lkey)
        args: List[Any] = ['HSET', lkey]
        for f, v in lay.to_hash().items():
            args += [f, v]
        self._call(*args)
        if ttl_s:
            self._call('EXPIRE', lkey, int(ttl_s))
        with self._lock:
            self._layout = lay
            self._pool_est = lay.initial[0]
            self._pool_drained = None
            self._verdict = None
        return created

    def _existing(self, keys: Iterable[str]) -> Dict[str, sp.KeyState]:
        """The keys among `keys` that exist, and every key they name as a
        peer (and so on) that exists: {key: state}."""
        states = self._read(sorted(set(keys)))
        while True:
            more = sp.unread_peers(states)
            if not more:
                return {k: v for k, v in states.items() if v is not None}
            states.update(self._read(more))

    def recover(self, stream: Optional[bool] = None, limit: int = 1, bmax: int = sp.DEFAULT_BMAX,
                hint: Iterable[str] = (), salts: int = 64) -> sp.Layout:
        """Rebuilds a lost layout hash from the sale's keys. The keys are
        found from the pool's and part 0's tags (salts 0 .. salts-1, see
        split_protocol.probe_keys) and `hint`, then from the peers each key
        declares; the layout comes from their INFO (round, peers, INIT
        totals: split_protocol.recover_layout). Refused (RecoverError,
        nothing written) when a peer is missing, the keys are in different
        rounds, or their peers disagree; LookupError when no key exists;
        RuntimeError when the layout exists. `stream`: whether the parts
        have streams (None: when any part's `:events` stream exists);
        `limit`: the parts' LIMIT as the layout records it (INFO does not
        show it); the layout takes the pool's TTL."""
        lkey = sp.layout_key(self.name)
        if self._call('EXISTS', lkey):
            raise RuntimeError('split sale %r: the layout %s exists' % (self.name, lkey))
        states = {k: v for k, v in self._read(sp.probe_keys(self.name, salts) + list(hint)).items()
                  if v is not None}
        if not states:
            raise LookupError('split sale %r: no key found' % self.name)
        while True:
            more = sp.unread_peers(states)
            if not more:
                break
            states.update(self._read(more))
        lay = sp.recover_layout(self.name, states, streams=False, limit=int(limit), bmax=bmax)
        if stream is None:
            stream = any(self._call('EXISTS', sp.stream_key(sp.key_tag(k))) for k in lay.parts)
        if stream:
            lay = dataclasses.replace(lay, streams=tuple(sp.stream_key(sp.key_tag(k))
                                                         for k in lay.parts))
        args: List[Any] = ['HSET', lkey]
        for f, v in lay.to_hash().items():
            args += [f, v]
        self._call(*args)
        ttl = int(self._call('PTTL', lay.pool))
        if ttl > 0:
            self._call('PEXPIRE', lkey, ttl)
        with self._lock:
            self._layout = lay
            self._pool_est = None
            self._pool_drained = None
            self._verdict = None
        return lay

    def streams(self) -> List[str]:
        """The part stream keys (empty when created without stream=True)."""
        return list(self.layout().streams)

    # ------------------------------------------------------------ transfers

    def _send(self, src: str, dst: str, qty: int, round_: str, min_: int = 1,
              tid: Optional[str] = None, wait: bool = True) -> Tuple[int, int, int, Optional[int]]:
        """SEND ... ROUND round_ (and WAIT 1 on the same connection when the
        source has replicas): (taken, sent_total, src remaining, replicas
        acked or None). StaleRound when src is in another round."""
        tid = tid or sp.transfer_id()
        cmds: List[List[Any]] = [sp.send_args(src, dst, qty, min_, tid, round_)]
        waiting = wait and self._replicas(src) > 0
        if waiting:
            cmds.append(['WAIT', 1, self.wait_ms])
        out = self._on_node(src, cmds)
        if out[0] is None:                    # the source key is gone
            return 0, 0, 0, None
        taken, sent_total, remaining = (int(x) for x in out[0])
        acked = None
        if waiting:
            acked = int(out[1])
            self._count(waits=1, wait_short=1 if acked < 1 else 0)
        return taken, sent_total, remaining, acked

    def _recv(self, dst: str, src: str, sent_total: int, round_: str) -> Tuple[int, int, int]:
        """RECV ... ROUND round_. StaleRound when dst is in another round."""
        out = self._on_node(dst, [sp.recv_args(dst, src, sent_total, round_)])
        if out[0] is None:                    # the destination key is gone
            return 0, 0, 0
        credited, received, remaining = (int(x) for x in out[0])
        return credited, received, remaining

    def _transfer(self, lay: sp.Layout, src: str, dst: str, qty: int, path: str, rt: Counter,
                  min_: int = 1) -> int:
        """SEND src->dst, WAIT, RECV, in `lay`'s round: the units credited to dst."""
        taken, sent_total, src_left, _acked = self._send(src, dst, qty, lay.round, min_)
        rt[path] += 1
        if src == lay.pool:
            self._pool_est = src_left
            self._count(pool_calls=1)
        self.faults('after_send')
        self.faults('after_wait')
        if taken == 0:
            return 0
        credited, _received, _left = self._recv(dst, src, sent_total, lay.round)
        rt[path] += 1
        self.faults('after_recv')
        return credited

    def _refill(self, lay: sp.Layout, home: str, need: int, rt: Counter) -> int:
        """Home part <- pool, a batch of clamp(ceil(pool/2P), 1, Bmax) or
        `need` if more. One refill per part at a time in this process."""
        if need == 0:
            with self._lock:
                if home in self._refilling:
                    return 0
                self._refilling.add(home)
        try:
            if self._pool_est is None:
                st = self._read([lay.pool])[lay.pool]
                rt['state'] += 1
                self._count(pool_calls=1)
                self._pool_est = st.remaining if st else 0
            if self._pool_est <= 0:
                return 0
            qty = max(need, sp.batch_size(self._pool_est, len(lay.parts), lay.bmax))
            got = self._transfer(lay, lay.pool, home, qty, 'refill', rt)
            if got:
                self._count(refills=1)
            return got
        finally:
            if need == 0:
                with self._lock:
                    self._refilling.discard(home)

    # ------------------------------------------------------------ state

    def _states(self, lay: sp.Layout, use_cache: bool) -> Dict[str, Optional[sp.KeyState]]:
        cached = self._pool_drained if use_cache else None
        if cached is not None and cached.round != lay.round:
            cached = None
        keys = list(lay.parts) if cached is not None else list(lay.keys)
        states = self._read(keys)
        if cached is not None:
            states[lay.pool] = cached
            self._count(state_reads=len(keys))
        else:
            self._count(state_reads=len(keys), pool_calls=1)
            pool = states.get(lay.pool)
            if pool is not None and pool.round == lay.round:
                self._pool_est = pool.remaining
                if pool.remaining == 0:
                    self._pool_drained = pool
        return states

    def _confirm_negative(self, a: sp.Audit) -> Dict[Tuple[str, str], Tuple[int, int]]:
        """Re-reads each negative pair destination first, then source: a
        pair still negative then is a real lost debit, not a skewed round."""
        out: Dict[Tuple[str, str], Tuple[int, int]] = {}
        for (src, dst) in a.negative:
            d = self._read([dst])[dst]
            s = self._read([src])[src]
            if d is None or s is None:
                continue
            got, sent = d.received.get(src, 0), s.sent.get(dst, 0)
            if got > sent:
                out[(src, dst)] = (sent, got)
        return out

    def _audit(self, use_cache: bool = False, rounds: int = 3, stale_ok: bool = False,
               lay: Optional[sp.Layout] = None) -> Tuple[sp.Audit, Dict, Dict]:
        """An audit whose negative pairs are confirmed (or gone after a
        fresh round): (audit, confirmed negative pairs, the states read).
        StaleRound when a key is in another round than the layout's (unless
        `stale_ok`: info() reports it): nothing may be planned from it."""
        lay = lay or self.layout()
        for _ in range(rounds):
            states = self._states(lay, use_cache)
            a = sp.audit(lay, states)
            if a.stale and not stale_ok:
                raise StaleRound('split sale %r: %s' % (self.name, '; '.join(
                    x for x in a.problems if 'round' in x or 'split sale' in x)))
            if a.stale or not a.negative:
                return a, {}, states
            confirmed = self._confirm_negative(a)
            if len(confirmed) == len(a.negative):
                return a, confirmed, states
            use_cache = False
        return a, confirmed, states

    def info(self) -> Dict[str, Any]:
        """The whole sale (SPEC): total, remaining, pending, confirmed,
        released, in_flight, invariant, pool, parts; plus lost_debit (units
        a destination received that its source no longer shows as sent),
        problems (why invariant is broken), flights (pairs in flight) and
        round. A key in another round than the layout read makes it read
        the layout again, once; still so, the sale is `broken` and
        `problems` names the keys (an interrupted create or replace)."""
        a, confirmed, states = self._audit(use_cache=False, stale_ok=True)
        if a.stale:
            self._reload()
            a, confirmed, states = self._audit(use_cache=False, stale_ok=True)
        lay = self.layout()

        def entry(k: str) -> Dict[str, Any]:
            st = states.get(k)
            return {'key': k, 'node': self.node_name(k), 'report': st.report if st else None}

        problems = [x for x in a.problems
                    if not x.startswith('lost debit') or not a.negative or confirmed]
        return {'total': lay.total, 'remaining': a.remaining, 'pending': a.pending,
                'confirmed': a.confirmed, 'released': a.released, 'in_flight': a.in_flight,
                'invariant': 'ok' if not problems else 'broken',
                'pool': entry(lay.pool), 'parts': [entry(k) for k in lay.parts],
                'lost_debit': sum(g - s for s, g in confirmed.values()),
                'problems': problems, 'round': a.round,
                'flights': {'%s>%s' % k: v for k, v in a.flights.items()}}

    # ------------------------------------------------------------ repair

    def _fence_wait(self, src: str) -> None:
        """A write on the source's node from our connection, then WAIT 1:
        the replication stream is ordered, so an ack for our write is an ack
        for the SEND before it."""
        if self._replicas(src) > 0:
            out = self._on_node(src, [['SET', src + ':fence', int(time.time() * 1000), 'PX', 60000],
                                      ['WAIT', 1, self.wait_ms]])
            self._count(waits=1, wait_short=1 if int(out[1]) < 1 else 0)

    def _run_repair(self, a: sp.Audit, confirmed: Mapping, rt: Optional[Counter] = None) -> Tuple[int, Dict[str, int]]:
        """Executes repair_plan in the audit's round: (steps that changed
        something, credits per key)."""
        done = 0
        credits: Dict[str, int] = {}
        for step in sp.repair_plan(a, confirmed):
            if step.action == sp.RECV:
                self._fence_wait(step.src)
                credited, _r, _left = self._recv(step.dst, step.src, step.amount, a.round)
                if rt is not None:
                    rt['repair'] += 2 if self._replicas(step.src) else 1
                if credited:
                    done += 1
                    credits[step.dst] = credits.get(step.dst, 0) + credited
            else:
                taken, _s, _left, _ack = self._send(step.src, step.dst, step.amount, a.round, 1,
                                                    step.tid)
                if rt is not None:
                    rt['repair'] += 1
                if taken:
                    done += 1
        if done:
            self._count(repairs=done)
        return done, credits

    def repair(self) -> int:
        """Completes every interrupted transfer (a SEND whose RECV never came:
        RECV by the source's cumulative total, after a fence write and WAIT
        on the source when it has replicas) and re-debits confirmed lost
        debits (a source that no longer shows a SEND its destination
        received: SEND the difference again under a deterministic TID).
        Returns how many transfers it re-drove."""
        def once() -> int:
            a, confirmed, _states = self._audit(use_cache=False)
            return self._run_repair(a, confirmed)[0]
        return self._round_retry(once)

    # ------------------------------------------------------------ reserve

    def _finish(self, rt: Counter, ok: bool) -> None:
        suffix = '' if ok else '_sold_out'
        self._count(**{'rt_%s%s' % (k, suffix): v for k, v in rt.items() if v})

    def reserve(self, user: str, qty: int = 1, reqid: Optional[str] = None) -> Tuple[str, Optional[str]]:
        """RESERVE on the user's home part. SOLD_OUT there makes this call
        bring stock home (pool refill, then a borrow from the richest
        parts, after completing anything in flight) and try again; the
        answer is SOLD_OUT only when no key holds `qty` and nothing is in
        flight. (status, reservation id). A transfer or audit that meets
        another round (the sale was replaced) reloads the layout and runs the
        call once more (its RESERVE had answered SOLD_OUT: nothing was
        taken); a second time raises StaleRound."""
        try:
            lay = self.layout()
        except LookupError:
            return p.NO_SALE, None
        try:
            return self._reserve(lay, user, qty, reqid)
        except StaleRound:
            lay = self._reload()
        return self._reserve(lay, user, qty, reqid)

    def _reserve(self, lay: sp.Layout, user: str, qty: int,
                 reqid: Optional[str]) -> Tuple[str, Optional[str]]:
        t0 = time.monotonic()
        home = lay.home(user)
        args = p.reserve_args(home, user, qty, reqid)
        res = p.parse_reserved(self._call(*args))
        self._count(reserve_calls=1)
        rt: Counter = Counter()
        if res.status == p.RESERVED:
            if sp.crossed_low(res.remaining, qty, lay.low) and self._pool_est != 0:
                try:
                    self._refill(lay, home, 0, rt)
                except StaleRound:      # the reservation stands; the next call is in the new round
                    self._reload()
            self._count(reserved=1)
            self._finish(rt, True)
            return res.status, res.rid
        if res.status != p.SOLD_OUT:
            return res.status, res.rid
        self._count(home_empty=1)
        with self._lock:
            if self.first_empty is None:
                self.first_empty = time.time()
        return self._slow(lay, home, args, qty, res, t0, rt)

    def _sold_out_seen(self, t0: float, qty: int) -> bool:
        """A sale-wide SOLD_OUT verdict from a snapshot that began after this
        call did (so the answer is true at that instant) and saw fewer than
        `qty` units anywhere, nothing in flight."""
        v = self._verdict
        return v is not None and v[0] >= t0 and v[1] < qty

    def _slow(self, lay: sp.Layout, home: str, args: List[Any], qty: int, res: p.Reserved,
              t0: float, rt: Counter) -> Tuple[str, Optional[str]]:
        """The home part answered SOLD_OUT. One thread of this process at a
        time brings stock to a part; a thread that waited retries RESERVE
        first when the one before it brought some."""
        if self._sold_out_seen(t0, qty):
            self._count(sold_out=1)
            return p.SOLD_OUT, None
        with self._lock:
            lock = self._home_locks.setdefault(home, threading.Lock())
            gen = self._gen.get(home, 0)
        path = 'refill'
        with lock:
            if self._gen.get(home, 0) != gen:
                res = p.parse_reserved(self._call(*args))
                rt['borrow'] += 1
                self._count(reserve_calls=1)
                if res.status != p.SOLD_OUT:
                    return self._done(res, rt)
            for _attempt in range(MAX_ATTEMPTS):
                if self._sold_out_seen(t0, qty):
                    break
                need = max(1, qty - res.remaining)
                credited = 0
                path = 'refill'
                if self._pool_est != 0:
                    credited = self._refill(lay, home, need, rt)
                if credited < need:
                    t_snap = time.monotonic()
                    a, _confirmed, _states = self._audit(use_cache=True, rounds=1, lay=lay)
                    rt['state'] += 1
                    if a.in_flight:
                        _n, credits = self._run_repair(a, {}, rt)
                        credited += credits.get(home, 0)
                        for k, v in credits.items():
                            a.remainders[k] = a.remainders.get(k, 0) + v
                    elif a.remaining < qty:
                        with self._lock:
                            if self._verdict is None or self._verdict[0] < t_snap:
                                self._verdict = (t_snap, a.remaining)
                        break
                    remainders = dict(a.remainders)
                    if self._pool_drained is not None:
                        remainders.pop(lay.pool, None)
                    for donor, take in sp.borrow_plan(home, need - credited, remainders,
                                                       len(lay.parts), lay.bmax, lay.pool):
                        path = 'refill' if donor == lay.pool else 'borrow'
                        got = self._transfer(lay, donor, home, take, path, rt)
                        if got and path == 'borrow':
                            self._count(borrows=1)
                        credited += got
                if credited:
                    with self._lock:
                        self._gen[home] = self._gen.get(home, 0) + 1
                res = p.parse_reserved(self._call(*args))
                rt[path] += 1
                self._count(reserve_calls=1)
                if res.status != p.SOLD_OUT:
                    return self._done(res, rt)
            else:
                self._count(gave_up=1)
        self._count(sold_out=1)
        self._finish(rt, False)
        return p.SOLD_OUT, None

    def _done(self, res: p.Reserved, rt: Counter) -> Tuple[str, Optional[str]]:
        if res.status == p.RESERVED:
            self._count(reserved=1)
        self._finish(rt, res.status == p.RESERVED)
        return res.status, res.rid

    def release(self, user: str, rid: str) -> str:
        """RELEASE on the user's home part: the status word."""
        return Sale(self.r, self.layout().home(user)).release(rid).status

    def confirm(self, user: str, rid: str) -> str:
        """CONFIRM on the user's home part: the status word."""
        return Sale(self.r, self.layout().home(user)).confirm(rid).status

    def get(self, user: str, rid: str) -> Optional[Dict[str, Any]]:
        """SECKILL.GET on the user's home part."""
        return Sale(self.r, self.layout().home(user)).get(rid)

    # ------------------------------------------------------------ reconcile

    def reconcile(self, orders: Iterable[Any], apply: bool = False,
                  chunk_size: int = p.DEFAULT_CHUNK) -> Dict[str, Any]:
        """RECONCILE on every part with the orders of its users. Counts and
        ids summed (orders_ok ... orders_conflict, orders_<class>_ids),
        `parts` per part. With apply=True a part that lacks the stock to
        take its released / unknown orders back first brings it home (pool,
        then the richest parts, as reserve does), then APPLYs; `borrowed`
        is the units it moved."""
        orders = list(orders)
        return self._round_retry(lambda: self._reconcile(self.layout(), orders, apply,
                                                         chunk_size))

    def _reconcile(self, lay: sp.Layout, orders: List[Any], apply: bool,
                   chunk_size: int) -> Dict[str, Any]:
        groups = sp.group_orders(lay, orders)
        results: Dict[str, p.ReconcileResult] = {}
        borrowed = 0
        for key, rows in groups.items():
            sale = Sale(self.r, key)
            if apply and rows:
                first = sale.reconcile(rows, apply=False, chunk_size=chunk_size)
                merged = dict(first.report or {})
                for c in ('released', 'unknown'):
                    merged['orders_%s_ids' % c] = first.ids[c]
                short = sp.shortfall(merged, rows)
                if short:
                    borrowed += self._bring_home(lay, key, short)
            results[key] = sale.reconcile(rows, apply=apply, chunk_size=chunk_size)
        out = sp.merge_parts(results)
        out['borrowed'] = borrowed
        return out

    def _bring_home(self, lay: sp.Layout, home: str, need: int) -> int:
        rt: Counter = Counter()
        got = 0
        for _ in range(MAX_ATTEMPTS):
            if got >= need:
                break
            if self._pool_est != 0:
                got += self._refill(lay, home, need - got, rt)
                if got >= need:
                    break
            a, _c, _s = self._audit(use_cache=False, rounds=1, lay=lay)
            if a.in_flight:
                _n, credits = self._run_repair(a, {})
                got += credits.get(home, 0)
                continue
            plan = sp.borrow_plan(home, need - got, {k: v for k, v in a.remainders.items()},
                                  len(lay.parts), lay.bmax, lay.pool)
            if not plan:
                break
            for donor, take in plan:
                got += self._transfer(lay, donor, home,
                                      min(take, need - got) if donor != lay.pool else take,
                                      'borrow', rt)
        return got

