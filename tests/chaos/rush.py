"""One chaos cycle: a fresh sale, a rush of buyers, the pipeline's
workers, payments and reconciler, and one `kill -9` of the sale's master
in the middle of it; then the ledger is checked.

Buyers (threads) each take a new REQID, RESERVE it (retried under the same
REQID through an outage: DUPLICATE then means an earlier try got it), pay
most of their reservations after a short pause with `pay()` (retried while
it answers RETRY) and abandon the rest (the hold runs out). Two workers
write the orders (rebuilt on the new master after a failover); the
reconciler runs with apply every `reconcile_every_s` and at the end. The
cycle ends once the sale is sold out with nothing held (or at its
deadline), after the killed node is back as a replica.

Every loop is bounded by the cycle's deadline or a count; threads are
joined with a timeout and an error in any of them fails the cycle.
"""

from __future__ import annotations

import os
import random
import statistics
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional

from redis.exceptions import ResponseError

from seckill import protocol as p
from seckill.errors import transient
from seckill.pipeline.payment import OUT_PAID, OUT_RETRY
from seckill.pipeline.store import PAID, SaleConfig
from seckill.pipeline.worker import Worker
from seckill.sale import Sale, SaleMissing

LOST_REASONS = ('lost', 'conflict')


def _function_not_found(exc: BaseException) -> bool:
    """"Function not found" from FCALL, on the library backend, just after
    a failover: a command of a client still bound to the killed node
    (a Sale taken before the switch, redis-py's reconnect retries) reaches
    it once it is back as an empty replica that has not synced the library
    yet (FCALL looks the function up before it refuses a write on a
    replica; the module answers READONLY there, which is transient).
    pay() and reserve() do not count it as transient, so the harness
    counts it (`function_not_found`) and calls again on the current
    master."""
    return 'Function not found' in str(exc)


@dataclass
class Params:
    stock: int = 100
    hold_ms: int = 1000
    buyers: int = 6
    workers: int = 2
    pay_share: float = 0.85
    pay_delay_s: float = 0.3
    think_s: float = 0.05
    kill_at_remaining: tuple = (0.02, 0.25)
    """The failover comes once the stock left is below a random share of it."""
    reconcile_every_s: float = 2.0
    deadline_s: float = 40.0
    pay_timeout_s: float = 20.0


@dataclass
class CycleResult:
    key: str
    stock: int
    paid_units_db: int = 0
    confirmed_redis: int = 0
    captured: int = 0
    oversold: int = 0
    conflicts: int = 0
    lost_reserved: int = 0
    reserved_answers: int = 0
    fenced_answers: int = 0
    function_not_found: int = 0
    unreplicated_answers: int = 0
    not_found_at: List[float] = field(default_factory=list)
    outage_s: Optional[float] = None
    promote_s: Optional[float] = None
    reserve_ms: List[float] = field(default_factory=list)
    pay_ms: List[float] = field(default_factory=list)
    batch_ms: List[float] = field(default_factory=list)
    split_brain: Dict[str, int] = field(default_factory=dict)
    notes: List[str] = field(default_factory=list)

    def row(self) -> Dict[str, Any]:
        d = {k: v for k, v in self.__dict__.items() if k not in ('reserve_ms', 'pay_ms', 'batch_ms')}
        d['reserve_ms_p50'], d['reserve_ms_p99'] = pct(self.reserve_ms, 50), pct(self.reserve_ms, 99)
        d['pay_ms_p50'], d['pay_ms_p99'] = pct(self.pay_ms, 50), pct(self.pay_ms, 99)
        d['batch_ms_p50'], d['batch_ms_p99'] = pct(self.batch_ms, 50), pct(self.batch_ms, 99)
        return d


def pct(xs: List[float], q: int) -> Optional[float]:
    if not xs:
        return None
    if len(xs) == 1:
        return round(xs[0], 2)
    return round(statistics.quantiles(xs, n=100, method='inclusive')[q - 1], 2)


class TimedWorker(Worker):
    """A Worker that records how long each batch takes (read to XACK,
    commit and any WAIT included)."""

    lat: List[float]

    def _handle(self, stream, entries):
        t = time.perf_counter()
        n = super()._handle(stream, entries)
        self.lat.append((time.perf_counter() - t) * 1000)
        return n


class Cycle:
    def __init__(self, topo: Any, store: Any, api: Any, backend: str, key: str,
                 params: Params, rng: random.Random):
        self.topo, self.store, self.api, self.backend = topo, store, api, backend
        self.key, self.P, self.rng = key, params, rng
        self.cfg = SaleConfig(key, params.stock, stream=key + ':events', limit=1,
                              hold_ms=params.hold_ms)
        self.res = CycleResult(key, params.stock)
        self.stop_buyers = threading.Event()
        self.stop_workers = threading.Event()
        self.lock = threading.Lock()
        self.reserved: Dict[str, float] = {}     # rid -> when its RESERVED call was sent
        self.sale_times: List[float] = []
        self.paid_rids: set = set()
        self.errors: List[BaseException] = []
        self.deadline = time.monotonic() + params.deadline_s
        self.t_kill: Optional[float] = None
        self._seq = 0

    # -- helpers --------------------------------------------------------------
    def sale(self) -> Sale:
        return Sale(self.topo.client(self.key), self.key, backend=self.backend)

    def _thread(self, fn, *args) -> threading.Thread:
        def run() -> None:
            try:
                fn(*args)
            except BaseException as exc:  # reported by run()
                self.errors.append(exc)
                self.stop_buyers.set()
                self.stop_workers.set()
        t = threading.Thread(target=run, daemon=True, name=fn.__name__)
        t.start()
        return t

    def _next_rid(self, bid: int) -> str:
        with self.lock:
            self._seq += 1
            return '%s-b%d-%d' % (self.key, bid, self._seq)

    def new_worker(self, consumer: str, **kw: Any) -> 'TimedWorker':
        w = TimedWorker(self.topo.client(self.key), self.store, [self.cfg], consumer=consumer,
                        backend=self.backend, **self.api.worker_kwargs(), **kw)
        w.lat = self.res.batch_ms
        return w

    def _not_found(self, exc: BaseException) -> bool:
        if isinstance(exc, ResponseError) and _function_not_found(exc):
            with self.lock:
                self.res.function_not_found += 1
                self.res.not_found_at.append(round(time.monotonic() - (self.t_kill or 0), 2))
            return True
        return False

    # -- buyers ---------------------------------------------------------------
    def reserve(self, rid: str) -> Optional[str]:
        """RESERVE under `rid` until an answer (or stop): the status."""
        while not self.stop_buyers.is_set() and time.monotonic() < self.deadline:
            sent = time.monotonic()
            try:
                got = self.sale().reserve(rid, reqid=rid, **self.api.reserve_kwargs)
                status = got.status
            except Exception as exc:
                if not (transient(exc) or self._not_found(exc)):
                    raise
                self.stop_buyers.wait(0.05)
                continue
            if status in self.api.busy_statuses:
                with self.lock:
                    self.res.fenced_answers += 1
                self.stop_buyers.wait(0.05)
                continue
            if status in (p.RESERVED, p.DUPLICATE) and getattr(got, 'replicated', None) is False:
                with self.lock:           # --reserve-wait: not on a replica yet, ask again
                    self.res.unreplicated_answers += 1
                self.stop_buyers.wait(0.05)
                continue
            if status in (p.RESERVED, p.DUPLICATE):
                with self.lock:
                    self.res.reserve_ms.append((time.monotonic() - sent) * 1000)
                    self.reserved[rid] = sent
                    self.sale_times.append(sent)
            return status
        return None

    def pay(self, rid: str) -> None:
        ref = 'pay-' + rid
        end = time.monotonic() + self.P.pay_timeout_s
        while time.monotonic() < end:
            t = time.perf_counter()
            try:
                out = self.api.pay(self.store, self.sale(), rid, ref)
            except ResponseError as exc:
                if not self._not_found(exc):
                    raise
                time.sleep(0.05)
                continue
            ms = (time.perf_counter() - t) * 1000
            if out.outcome != OUT_RETRY:
                with self.lock:
                    if out.outcome == OUT_PAID:
                        self.paid_rids.add(rid)
                        self.res.pay_ms.append(ms)
                return
            time.sleep(0.05)

    def buyer(self, bid: int) -> None:
        for _ in range(100000):
            if self.stop_buyers.is_set() or time.monotonic() > self.deadline:
                return
            rid = self._next_rid(bid)
            status = self.reserve(rid)
            if status in (p.RESERVED, p.DUPLICATE):
                if self.rng.random() < self.P.pay_share:
                    time.sleep(self.rng.uniform(0, self.P.pay_delay_s))
                    self.pay(rid)
            elif status == p.SOLD_OUT:
                self.stop_buyers.wait(0.05)
            self.stop_buyers.wait(self.rng.uniform(0, self.P.think_s))

    # -- workers and reconciler ------------------------------------------------
    def worker(self, i: int) -> None:
        while not self.stop_workers.is_set():
            epoch = self.topo.epoch
            w = self.new_worker('w%d' % i, block_ms=100, claim_idle_ms=2000)
            while not self.stop_workers.is_set() and self.topo.epoch == epoch:
                w.run(until=time.monotonic() + 0.25)

    def reconciler(self) -> None:
        while not self.stop_workers.wait(self.P.reconcile_every_s):
            try:
                self.api.reconcile(self.store, self.sale(), apply=True)
            except SaleMissing:
                continue
            except Exception as exc:
                if not (transient(exc) or self._not_found(exc)):
                    raise

    # -- the cycle ---------------------------------------------------------------
    def run(self, chaos) -> CycleResult:
        """`chaos(cycle)` does the failover (and returns when the killed
        node is back); the rush runs around it."""
        self.api.create_sale(self.store, self.topo.client(self.key), self.cfg)
        threads = [self._thread(self.buyer, b) for b in range(self.P.buyers)]
        workers = [self._thread(self.worker, i) for i in range(self.P.workers)]
        workers.append(self._thread(self.reconciler))
        try:
            self._wait_remaining(int(self.P.stock * self.rng.uniform(*self.P.kill_at_remaining)))
            if not self.errors:
                chaos(self)
            self._wait_sold_out()
        finally:
            self.stop_buyers.set()
            for t in threads:
                t.join(self.P.pay_timeout_s + 5)
            self.stop_workers.set()
            for t in workers:
                t.join(15)
        if self.errors:
            raise self.errors[0]
        self._settle()
        return self.res

    def _wait_remaining(self, units: int) -> None:
        while time.monotonic() < self.deadline and not self.errors:
            info = self.sale().info()
            if info['remaining'] <= units:
                return
            time.sleep(0.02)

    def _wait_sold_out(self) -> None:
        while time.monotonic() < self.deadline and not self.errors:
            try:
                info = self.sale().info()
                if info and info['remaining'] == 0 and info['pending'] == 0:
                    return
            except Exception as exc:
                if not (transient(exc) or self._not_found(exc)):
                    raise
            time.sleep(0.2)
        self.res.notes.append('deadline before sold out')

    def _settle(self) -> None:
        """Final drain and reconcile, then the figures."""
        sale = self.sale()
        w = self.new_worker('final', claim_idle_ms=0)
        w.drain(timeout=30)
        for _ in range(2):
            self.api.reconcile(self.store, sale, apply=True)
        final = self.api.reconcile(self.store, sale, apply=False)
        self.res.notes.extend(final.lines()) if os.environ.get('CHAOS_DEBUG') else None
        r = self.res
        r.paid_units_db = self.store.summary(self.key)[PAID]['units']
        r.confirmed_redis = sale.info()['confirmed']
        r.captured = len(self.paid_rids)
        # PAID orders the sale does not hold confirmed after APPLY: the
        # `conflict` class, and `released`/`unknown` ones APPLY could not
        # take again (no stock left). Money captured without a unit.
        unheld = set(final.conflicts) | set(final.paid_repaired)
        r.conflicts = len(unheld)
        r.oversold = max(r.captured - r.stock, len(unheld & self.paid_rids), 0)
        r.reserved_answers = len(self.reserved)
        r.lost_reserved = sum(1 for rid in self.reserved if self._lost(rid))
        if self.t_kill is not None:
            after = [t for t in self.sale_times if t > self.t_kill]
            r.outage_s = round(min(after) - self.t_kill, 2) if after else None
        # (a sale "after" the kill: a RESERVE sent after it that got a unit)

    def _lost(self, rid: str) -> bool:
        o = self.store.order(rid)
        return o is None or o.cancel_reason in LOST_REASONS

