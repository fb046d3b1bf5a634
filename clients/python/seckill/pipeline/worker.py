"""The stream worker: reservation stream -> order rows.

Reads each sale's stream in a consumer group (XREADGROUP), writes a batch of
events to the order store in one transaction, and acknowledges the entries
(XACK) only after the commit. So:

- a crash before the commit loses nothing: the entries stay pending and are
  delivered again (to this consumer when it restarts under the same name,
  or to another worker, which claims them with XAUTOCLAIM once they have
  been idle `claim_idle_ms`);
- a crash between the commit and the XACK replays the batch, and every write
  is idempotent (store.apply_events): no duplicate order;
- when the database is down, the batch is retried with backoff and nothing
  newer is read meanwhile: the entries wait in the stream, pending;
- any number of workers can run at once: each entry goes to one consumer,
  and the writes do not depend on the order in which workers commit;
- a batch is committed only after the WAIT gate (seckill.durability: a
  propagating SET and WAIT on one connection, after the read) answered
  the required replicas: every RESERVE, CONFIRM and expiry whose entry
  the batch holds is then on them, so a failover cannot take back an
  order (or a PAID mark from a `confirmed` entry) the database has. Short
  (replicas gone or lagging, a split-brain master): nothing committed,
  nothing acknowledged, NotReplicated; run() waits and reads the same
  entries again (from its own pending ones), on whatever master its
  client reaches by then.

On the Functions library (functions/seckill.lua, docs/managed-redis.md)
nothing releases a hold that ran out by itself: the worker does, every
`expire_every_s` (a second), for each sale it serves (`expire()`:
`FCALL seckill_expire n key [keys...] 256` with the keys seckill_keys
lists for the sale, again at once while its reply `[released, more]` says
more are due). On the module it does nothing: the module's timer does it.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Sequence, Tuple

from redis.exceptions import ResponseError

from .. import backend as be
from ..drivers.sync import Driver
from ..ops import sale as ops
from ..plain import durability as dur
from ..plain import steps
from ..plain.errors import transient
from ..plain.faults import NONE, Faults
from ..plain.protocol import Event, parse_entry, text
from .retry import Backoff
from .store import ApplyStats, SaleConfig, Store, StoreUnavailable

log = logging.getLogger('seckill.worker')

DEFAULT_GROUP = 'orders'
EXPIRE_COUNT = 256
"""Holds one seckill_expire call releases at most (the library's largest
COUNT: about 3 to 5 ms of server time with a stream)."""
EXPIRE_CALLS = 40
"""seckill_expire calls per sale in one expire() (10,240 holds); when a
sale has more due, the next round comes at once."""


def default_consumer() -> str:
    return '%s-%d' % (socket.gethostname(), os.getpid())


def ensure_group(r: Any, stream: str, group: str = DEFAULT_GROUP) -> bool:
    """XGROUP CREATE stream group 0 MKSTREAM; False when it existed."""
    try:
        r.execute_command('XGROUP', 'CREATE', stream, group, '0', 'MKSTREAM')
        return True
    except Exception as exc:  # redis.ResponseError
        if 'BUSYGROUP' in str(exc):
            return False
        raise


def backlog(r: Any, stream: str, group: str = DEFAULT_GROUP) -> Tuple[int, Optional[int]]:
    """(pending, lag) of the group: entries delivered but not acknowledged,
    and entries not delivered yet (None when Redis cannot tell)."""
    for g in r.xinfo_groups(stream):
        g = {text(k): v for k, v in g.items()}
        if text(g.get('name')) == group:
            lag = g.get('lag')
            return int(g.get('pending', 0)), (int(lag) if lag is not None else None)
    raise LookupError('no group %r on %r' % (group, stream))


class Stopping(Exception):
    """stop() came while a batch waited for the database."""


class NotReplicated(Exception):
    """A batch's WAIT gate fell short: nothing was committed or acknowledged."""


@dataclass
class WorkerStats:
    batches: int = 0
    entries: int = 0
    acked: int = 0
    claimed: int = 0
    trimmed: int = 0
    expired: int = 0
    db_retries: int = 0
    redis_retries: int = 0
    not_replicated: int = 0
    ledger: ApplyStats = field(default_factory=ApplyStats)


def _entries_of(reply: Any) -> List[Tuple[str, List[Tuple[str, Any]]]]:
    """XREADGROUP's reply (RESP2 list or RESP3 dict) as [(stream, entries)]."""
    if not reply:
        return []
    if isinstance(reply, dict):
        out = []
        for k, v in reply.items():
            if len(v) == 1 and isinstance(v[0], list):
                v = v[0]  # redis-py's RESP3 form wraps the entries in a list
            out.append((text(k), v))
        return out
    return [(text(s), entries) for s, entries in reply]


class Worker:
    """One consumer of one or more sales' streams.

    r: a redis-py client (decode_responses=True); store: the order store;
    sales: the SaleConfigs whose streams to read. backend: 'module' or
    'functions' (None: asked of the server once, as Sale does); on
    'functions' the worker releases the served sales' due holds every
    `expire_every_s`. durability: the WAIT gate every batch passes before
    its commit (seckill.durability; OFF: none).
    """

    def __init__(self, r: Any, store: Store, sales: Sequence[SaleConfig], *,
                 group: str = DEFAULT_GROUP, consumer: Optional[str] = None,
                 batch: int = 100, block_ms: int = 500, claim_idle_ms: int = 5000,
                 claim_every_s: float = 1.0, backoff: Optional[Backoff] = None,
                 faults: Faults = NONE, expire_every_s: float = 1.0,
                 backend: Optional[str] = None,
                 durability: dur.Durability = dur.DEFAULT):
        self.r = r
        self.store = store
        self.sales: Dict[str, SaleConfig] = {}
        for s in sales:
            if not s.stream:
                raise ValueError('sale %r has no stream' % s.key)
            self.sales[s.stream] = s
        if not self.sales:
            raise ValueError('no sale to work on')
        self.group = group
        self.consumer = consumer or default_consumer()
        self.batch = batch
        self.block_ms = block_ms
        self.claim_idle_ms = claim_idle_ms
        self.claim_every_s = claim_every_s
        self.backoff = backoff or Backoff()
        self.faults = faults
        self.stats = WorkerStats()
        self.stop_event = threading.Event()
        self._own_pending = True
        self._next_claim = 0.0
        self._groups_ready = False
        self.expire_every_s = expire_every_s
        self._next_expire = 0.0
        self._driver = Driver(r, backend)
        self.durability = dur.setting(durability)

    # -- setup ------------------------------------------------------------
    def ensure_groups(self) -> None:
        for stream in self.sales:
            ensure_group(self.r, stream, self.group)
        self._groups_ready = True

    # -- the loop -----------------------------------------------------------
    def run(self, until: Optional[float] = None) -> WorkerStats:
        """Works until stop() (or the monotonic time `until`)."""
        redis_backoff = Backoff()
        while not self.stop_event.is_set() and (until is None or time.monotonic() < until):
            try:
                self.step()
                redis_backoff.reset()
            except Stopping:
                break  # stop() while the database was down: the entries stay pending
            except NotReplicated as exc:
                self.stats.not_replicated += 1
                self._own_pending = True     # the same entries again, gated again
                if self.stats.not_replicated in (1, 10) or self.stats.not_replicated % 100 == 0:
                    log.warning('%s; retrying', exc)
                self.stop_event.wait(redis_backoff.next())
            except Exception as exc:
                gone = _group_gone(exc)
                if not (gone or transient(exc)):
                    raise
                self.stats.redis_retries += 1
                self._own_pending = True  # what was delivered but not acknowledged first
                if gone:
                    log.warning('consumer group gone (sale lost or flushed?): recreating')
                    self._groups_ready = False
                else:
                    log.warning('redis: %s; retrying', exc)
                self.stop_event.wait(redis_backoff.next())
        return self.stats

    def stop(self) -> None:
        self.stop_event.set()

    def step(self) -> int:
        """One round: claim idle entries of dead consumers (every
        claim_every_s), then this consumer's own pending entries (after a
        restart), then new ones. Returns the entries handled."""
        if not self._groups_ready:
            self.ensure_groups()
        done = 0
        now = time.monotonic()
        if now >= self._next_expire:
            self._next_expire = now + self.expire_every_s
            self.expire()
        if now >= self._next_claim:
            self._next_claim = now + self.claim_every_s
            done += self.claim()
        if self._own_pending:
            got = self._read('0', block=False)
            if not got:
                self._own_pending = False
            done += got
        else:
            done += self._read('>', block=True)
        return done

    def drain(self, idle_rounds: int = 2, timeout: float = 30.0) -> WorkerStats:
        """Works until `idle_rounds` rounds in a row find nothing (tests)."""
        deadline = time.monotonic() + timeout
        idle = 0
        saved, self.block_ms = self.block_ms, 50
        try:
            while idle < idle_rounds and time.monotonic() < deadline:
                self._next_claim = self._next_expire = 0.0
                idle = idle + 1 if self.step() == 0 else 0
        finally:
            self.block_ms = saved
        return self.stats

    def expire(self) -> int:
        """On the Functions library: releases the due holds of every sale
        this worker serves (FCALL seckill_expire n key [keys...]
        EXPIRE_COUNT, again while its reply says more are due, EXPIRE_CALLS
        at most per sale; the rest in the next step). Their `expired` entries reach the
        stream, and the orders are cancelled as they are read. Returns the
        holds released; 0 on the module (its timer releases them)."""
        keys = [cfg.key for cfg in self.sales.values()]
        if not keys or self._driver._resolve(keys[0]) != be.FUNCTIONS:
            return 0
        released = 0
        for cfg in self.sales.values():
            try:
                for _ in range(EXPIRE_CALLS):
                    n, more = self._driver.run(_expire_op(cfg.key, EXPIRE_COUNT))
                    released += n
                    if not more:
                        break
                else:
                    self._next_expire = 0.0    # more are due: the next step goes on
            except ResponseError as exc:       # not a sale (WRONGTYPE), no library, ACL
                log.warning('seckill_expire %s: %s', cfg.key, exc)
        self.stats.expired += released
        return released

    def claim(self) -> int:
        """XAUTOCLAIM every stream: entries idle past claim_idle_ms (their
        consumer died or hangs) become this consumer's, and are handled."""
        done = 0
        for stream in self.sales:
            start = '0-0'
            while not self.stop_event.is_set():
                reply = self.r.execute_command('XAUTOCLAIM', stream, self.group, self.consumer,
                                               self.claim_idle_ms, start, 'COUNT', self.batch)
                start, entries = text(reply[0]), reply[1]
                deleted = [text(d) for d in reply[2]] if len(reply) > 2 and reply[2] else []
                if deleted:
                    self.stats.trimmed += len(deleted)
                    log.error('%d pending entries of %s were trimmed before they were handled: '
                              'run the reconciler', len(deleted), stream)
                entries = _pairs_entries(entries)
                if entries:
                    self.stats.claimed += len(entries)
                    log.info('claimed %d idle entries of %s', len(entries), stream)
                    done += self._handle(stream, entries)
                if start == '0-0':
                    break
        return done

    # -- internals ------------------------------------------------------------
    def _read(self, from_id: str, block: bool) -> int:
        args: List[Any] = ['XREADGROUP', 'GROUP', self.group, self.consumer, 'COUNT', self.batch]
        if block:
            args += ['BLOCK', self.block_ms]
        args += ['STREAMS'] + list(self.sales) + [from_id] * len(self.sales)
        reply = self.r.execute_command(*args)
        done = 0
        for stream, entries in _entries_of(reply):
            entries = _pairs_entries(entries)
            if entries:
                done += self._handle(stream, entries)
        return done

    def _handle(self, stream: str, entries: List[Tuple[str, Any]]) -> int:
        sale = self.sales[stream]
        self.faults('after_read')
        events: List[Event] = []
        ids: List[str] = []
        for eid, fields in entries:
            ids.append(eid)
            ev = parse_entry(eid, fields)
            if ev is None:
                if not fields:
                    self.stats.trimmed += 1
                    log.error('entry %s of %s was trimmed before it was handled: run the '
                              'reconciler', eid, stream)
                continue
            events.append(ev)
        if events:
            self._gate(stream, len(events))
            self._commit(sale, events)
        self.faults('after_commit')
        self._ack(stream, ids)
        self.stats.batches += 1
        self.stats.entries += len(entries)
        return len(entries)

    def _gate(self, stream: str, n: int) -> None:
        """The WAIT gate before a commit (the module docstring)."""
        if self.durability.off:
            return
        gate = self._driver.run(ops.wait(stream, self.durability))
        if not gate.ok:
            raise NotReplicated('%d entries of %s: WAIT reached %d of %d replicas in %d ms; '
                                'nothing committed' % (n, stream, gate.acked, gate.need,
                                                       self.durability.timeout_ms))

    def _commit(self, sale: SaleConfig, events: List[Event]) -> None:
        while True:
            try:
                stats = self.store.apply_events(sale, events)
                self.backoff.reset()
                self.stats.ledger.add(stats)
                if stats.collisions:
                    log.error('%d reservation ids already used by other orders: use REQIDs '
                              'unique across sales', stats.collisions)
                return
            except StoreUnavailable as exc:
                self.stats.db_retries += 1
                delay = self.backoff.next()
                if self.backoff.failures in (1, 10) or self.backoff.failures % 50 == 0:
                    log.warning('database unavailable (%s); %d entries stay pending, retry %d',
                                exc, len(events), self.backoff.failures)
                if self.stop_event.wait(delay):
                    raise Stopping() from exc

    def _ack(self, stream: str, ids: List[str]) -> None:
        if ids:
            self.stats.acked += int(self.r.execute_command('XACK', stream, self.group, *ids))


def parse_expired(reply: Any) -> Tuple[int, bool]:
    """seckill_expire's reply `[released, more]`: (holds released, whether
    due holds remain: call again at once)."""
    if not isinstance(reply, (list, tuple)) or len(reply) != 2:
        raise ResponseError('seckill_expire answered %r, not [released, more]: load '
                            'functions/seckill.lua again' % (reply,))
    return int(reply[0]), int(reply[1]) == 1


def _expire_op(key: str, count: int) -> steps.Steps:
    """SECKILL.EXPIRE key count: the library's seckill_expire (the driver of
    a 'functions' client sends it as FCALL seckill_expire n key [keys...]
    count): (released, more)."""
    return parse_expired((yield steps.Call(['SECKILL.EXPIRE', key, count])))


def _pairs_entries(entries: Any) -> List[Tuple[str, Any]]:
    out = []
    for e in entries or []:
        if e is None:
            continue
        eid, fields = e[0], e[1] if len(e) > 1 else None
        out.append((text(eid), fields))
    return out



def _group_gone(exc: BaseException) -> bool:
    """The consumer group (or the stream under a blocked read) is gone: the
    sale was lost or flushed. Not a Redis outage: the worker recreates the
    group and reads on."""
    return isinstance(exc, ResponseError) and str(exc).startswith(('NOGROUP', 'UNBLOCKED'))
