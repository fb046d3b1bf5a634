"""`python -m seckill demo`: a whole flash sale on throwaway servers.

Starts its own redis-server with the module (and, with --db postgres, its
own PostgreSQL) on free ports, creates a sale with small stock and a short
hold, starts worker processes, lets thousands of simulated buyers rush it
while a payment simulator pays most orders (some too late, some twice),
kills a worker with SIGKILL midway and restarts it, then checks the ledger
and writes a chart and a report. Stops everything it started, whatever
happens.
"""

from __future__ import annotations

import contextlib
import heapq
import itertools
import os
import random
import signal
import subprocess
import sys
import threading
import time
from typing import Any, Callable, Dict, List, Optional, Tuple

from ..drivers.connect import close_follower, connect
from ..plain.protocol import FENCED, LIMIT, RESERVED, SOLD_OUT
from ..sale import Sale
from ..testing.servers import PostgresServer, RedisServer
from .demo_report import ledger_check, report_lines, worker_totals, write_chart, write_report
from .demo_types import DemoConfig, Tally
from .payment import OUT_PAID, OUT_RETRY, cancel_order, pay
from .reconciler import create_sale, reconcile
from .store import CANCELLED, PAID, UNPAID, SaleConfig, open_store
from .worker import backlog

SALE_KEY = 'sale:{demo}'
STREAM_KEY = 'sale:{demo}:events'


class Scheduler:
    """A heap of (due time, task) run by a pool of threads."""

    def __init__(self, threads: int, name: str):
        self._heap: List[Tuple[float, int, Callable[[], None]]] = []
        self._cv = threading.Condition()
        self._seq = itertools.count()
        self._stop = False
        self.running = 0
        self.errors: List[BaseException] = []
        self._threads = [threading.Thread(target=self._loop, name='%s-%d' % (name, i), daemon=True)
                         for i in range(threads)]
        for t in self._threads:
            t.start()

    def at(self, due: float, task: Callable[[], None]) -> None:
        with self._cv:
            heapq.heappush(self._heap, (due, next(self._seq), task))
            self._cv.notify()

    def idle(self) -> bool:
        with self._cv:
            return not self._heap and self.running == 0

    def _loop(self) -> None:
        while True:
            with self._cv:
                while not self._stop:
                    if self._heap and self._heap[0][0] <= time.monotonic():
                        break
                    timeout = self._heap[0][0] - time.monotonic() if self._heap else 0.2
                    self._cv.wait(max(0.001, min(timeout, 0.2)))
                if self._stop:
                    return
                _, _, task = heapq.heappop(self._heap)
                self.running += 1
            try:
                task()
            except BaseException as exc:  # recorded, reported at the end
                self.errors.append(exc)
            finally:
                with self._cv:
                    self.running -= 1

    def stop(self) -> None:
        with self._cv:
            self._stop = True
            self._cv.notify_all()
        for t in self._threads:
            t.join(5)


def _spawn_worker(redis_url: str, db_url: str, name: str, log_path: str,
                  metrics_port: Optional[int] = None) -> subprocess.Popen:
    cmd = [sys.executable, '-m', 'seckill', '--redis', redis_url, '--db', db_url, 'worker',
           '--sale', SALE_KEY, '--consumer', name, '--claim-idle-ms', '2000', '--block-ms', '200']
    if metrics_port is not None:
        cmd += ['--metrics-port', str(metrics_port)]
    logf = open(log_path, 'ab')
    try:
        return subprocess.Popen(cmd, stdout=logf, stderr=logf, stdin=subprocess.DEVNULL)
    finally:
        logf.close()


def _metrics_port(cfg: DemoConfig, worker: int) -> Optional[int]:
    ports = cfg.worker_metrics_ports
    return ports[worker - 1] if worker <= len(ports) else None


def run_demo(cfg: DemoConfig) -> int:
    os.makedirs(cfg.out, exist_ok=True)
    rnd = random.Random(cfg.seed)
    redis_srv: Optional[RedisServer] = None
    r: Any = None
    pg: Optional[PostgresServer] = None
    store = None
    workers: Dict[str, subprocess.Popen] = {}
    buyers_pool: Optional[Scheduler] = None
    pay_pool: Optional[Scheduler] = None
    bar = None
    stop_sampler = threading.Event()
    sampler = None
    interrupted = []

    def on_signal(signum, _frame):
        interrupted.append(signum)
        raise KeyboardInterrupt()

    old_term = signal.signal(signal.SIGTERM, on_signal)
    try:
        say = _printer(cfg)
        if cfg.redis:
            say('using the Redis deployment at %s%s' % (cfg.redis, ' and starting PostgreSQL'
                                                        if cfg.db == 'postgres' else ''))
            redis_url, where = cfg.redis, cfg.redis
        else:
            say('starting redis-server with the module%s...'
                % (' and PostgreSQL' if cfg.db == 'postgres' else ''))
            redis_srv = RedisServer().start()
            redis_url, where = redis_srv.url, 'redis-server on port %d' % redis_srv.port
        if cfg.db == 'postgres':
            pg = PostgresServer().start()
            db_url = pg.create_database('seckill_demo')
        else:
            db_path = os.path.abspath(os.path.join(cfg.out, 'orders.db'))
            for suffix in ('', '-wal', '-shm'):
                with contextlib.suppress(FileNotFoundError):
                    os.remove(db_path + suffix)
            db_url = 'sqlite://' + db_path
        store = open_store(db_url)
        store.create_schema()
        r = connect(redis_url, max_connections=64)
        sale = Sale(r, SALE_KEY)
        scfg = SaleConfig(SALE_KEY, cfg.stock, stream=STREAM_KEY, shards=4, limit=1,
                          hold_ms=cfg.hold_ms, expires_at_ms=sale.server_ms() + 3600 * 1000)
        create_sale(store, r, scfg)
        say('%s, orders in %s' % (where, 'PostgreSQL on port %d' % pg.port
                                                       if pg else db_path))
        say('sale %s: %d units, LIMIT 1, HOLD %d ms; %d buyers over %.0f s; %d workers'
            % (SALE_KEY, cfg.stock, cfg.hold_ms, cfg.buyers, cfg.duration_s, cfg.workers))

        wlog = os.path.join(cfg.out, 'workers.log')
        with contextlib.suppress(FileNotFoundError):
            os.remove(wlog)
        for i in range(1, cfg.workers + 1):
            workers['w%d' % i] = _spawn_worker(redis_url, db_url, 'w%d' % i, wlog,
                                               _metrics_port(cfg, i))

        tally = Tally()
        t0 = time.monotonic()
        sale_end = t0 + cfg.duration_s
        buyers_pool = Scheduler(cfg.buyer_threads, 'buyer')
        pay_pool = Scheduler(cfg.pay_threads, 'pay')
        ref_seq = itertools.count(1)

        def note(what: str) -> None:
            with tally.lock:
                tally.events.append((time.monotonic() - t0, what))

        # -- payments ------------------------------------------------------
        def pay_task(rid: str, ref: str, tries: int = 0, again: bool = True) -> Callable[[], None]:
            with tally.lock:
                tally.attempted.add((rid, ref))

            def run() -> None:
                res = pay(store, sale, rid, ref)
                with tally.lock:
                    tally.pay_calls += 1
                    if res.outcome == OUT_RETRY:
                        tally.pay_retries += 1
                    else:
                        tally.payments[(rid, ref)] = (res.outcome, res.reason)
                if res.outcome == OUT_RETRY and tries < 100:
                    pay_pool.at(time.monotonic() + 0.2, pay_task(rid, ref, tries + 1, again))
                elif res.outcome == OUT_PAID and again:
                    # the provider's callback arrives twice: answered PAID again, not charged twice
                    if rnd.random() < 0.1:
                        pay_pool.at(time.monotonic() + 0.3, pay_task(rid, ref, 0, False))
                    # the buyer pays a second time with another card: refunded
                    if rnd.random() < cfg.double_pay_ratio:
                        pay_pool.at(time.monotonic() + 0.2,
                                    pay_task(rid, 'pay-%d' % next(ref_seq), 0, False))
            return run

        def cancel_task(rid: str) -> Callable[[], None]:
            def run() -> None:
                ok = cancel_order(store, sale, rid)
                with tally.lock:
                    tally.cancels += ok
                    tally.cancel_too_late += not ok
            return run

        def fate(rid: str) -> None:
            hold = cfg.hold_ms / 1000.0
            x = rnd.random()
            now = time.monotonic()
            if x < cfg.pay_ratio:
                pay_pool.at(now + rnd.uniform(0.15, 0.85) * hold, pay_task(rid, 'pay-%d' % next(ref_seq)))
            elif x < cfg.pay_ratio + cfg.late_ratio:
                with tally.lock:
                    tally.late += 1
                pay_pool.at(now + rnd.uniform(0.9, 1.15) * hold, pay_task(rid, 'pay-%d' % next(ref_seq)))
            elif x < cfg.pay_ratio + cfg.late_ratio + cfg.cancel_ratio:
                pay_pool.at(now + rnd.uniform(0.1, 0.6) * hold, cancel_task(rid))
            # else: never pays; the hold runs out

        # -- buyers ------------------------------------------------------------
        def buyer_task(n: int, attempt: int = 0) -> Callable[[], None]:
            def run() -> None:
                user = 'user-%05d' % n
                res = sale.reserve(user, 1, reqid='ord-%05d-%d' % (n, attempt))
                with tally.lock:
                    tally.attempts += 1
                    tally.retries += attempt > 0
                    if res.status == RESERVED:
                        tally.reserved[res.rid] = user
                    elif res.status == SOLD_OUT:
                        tally.sold_out += 1
                    elif res.status == LIMIT:
                        tally.limit += 1
                if res.status == RESERVED:
                    fate(res.rid)
                elif res.status in (SOLD_OUT, FENCED) and attempt < 12:   # FENCED: retry later
                    due = time.monotonic() + rnd.uniform(0.3, 2.5)
                    if due < sale_end:
                        buyers_pool.at(due, buyer_task(n, attempt + 1))
            return run

        for n in range(cfg.buyers):
            if rnd.random() < 0.6:
                offset = min(rnd.expovariate(1 / 0.6), 3.0)   # the rush at the opening
            else:
                offset = rnd.uniform(0, cfg.duration_s * 0.92)
            buyers_pool.at(t0 + offset, buyer_task(n))

        # -- sampling and progress -----------------------------------------------
        samples: List[Dict[str, Any]] = []

        settle_budget = cfg.hold_ms / 1000.0 * 1.5 + 15
        tty = sys.stderr.isatty()
        if cfg.progress and tty:
            with contextlib.suppress(ImportError):
                from tqdm import tqdm
                bar = tqdm(total=round(cfg.duration_s), unit='s', desc='flash sale',
                           bar_format='{desc}: {percentage:3.0f}%|{bar:24}| {n:.0f}/{total:.0f} s{postfix}',
                           file=sys.stderr, dynamic_ncols=True, mininterval=0.25)

        def sample() -> None:
            while not stop_sampler.is_set():
                try:
                    info = sale.info() or {}
                    db = store.summary(SALE_KEY)
                    pend, lag = backlog(r, STREAM_KEY)
                    s = {'t': time.monotonic() - t0, 'remaining': info.get('remaining', 0),
                         'pending': info.get('pending', 0), 'confirmed': info.get('confirmed', 0),
                         'paid': db[PAID]['units'], 'unpaid': db[UNPAID]['units'],
                         'cancelled': db[CANCELLED]['units'], 'stream_pending': pend,
                         'lag': lag or 0}
                    samples.append(s)
                    orders = sum(v['orders'] for v in db.values())
                    status = ('stock %d  held %d  paid %d  orders %d  backlog %d'
                              % (s['remaining'], s['pending'], s['paid'], orders,
                                 pend + (lag or 0)))
                    if cfg.progress and not tty and len(samples) % 20 == 1:
                        print('  %4.1f s  %s' % (s['t'], status), flush=True)
                    if bar is not None:
                        bar.n = min(bar.total, s['t'])
                        bar.set_postfix_str(status, refresh=False)
                        bar.refresh()
                except Exception:
                    pass
                stop_sampler.wait(0.25)

        sampler = threading.Thread(target=sample, name='sampler', daemon=True)
        sampler.start()

        # -- the sale runs; a worker is killed and comes back --------------------
        chaos = {'kill_at': t0 + cfg.duration_s * 0.25, 'restart_at': None}

        def chaos_tick() -> bool:
            """Kills w1 (SIGKILL, preferably while it holds delivered,
            unacknowledged entries: polled for up to 2 s), restarts it 3 s
            later under the same name. True once both happened."""
            now = time.monotonic()
            if chaos['restart_at'] is None and now >= chaos['kill_at']:
                if _pending_of(r, 'w1') or now >= chaos['kill_at'] + 2.0:
                    workers['w1'].send_signal(signal.SIGKILL)
                    workers['w1'].wait(5)
                    left = _pending_of(r, 'w1')
                    note('worker w1 killed (SIGKILL), leaving %d %s unacknowledged'
                         % (left, 'entry' if left == 1 else 'entries'))
                    chaos['restart_at'] = time.monotonic() + 3.0
            elif chaos['restart_at'] is not None and now >= chaos['restart_at'] \
                    and chaos['restart_at'] > 0:
                workers['w1'] = _spawn_worker(redis_url, db_url, 'w1', wlog, _metrics_port(cfg, 1))
                chaos['restart_at'] = -1.0
                note('worker w1 restarted')
            return chaos['restart_at'] == -1.0

        while time.monotonic() < sale_end:
            chaos_tick()
            time.sleep(0.002 if chaos['restart_at'] is None
                       and time.monotonic() >= chaos['kill_at'] else 0.05)
        note('sale window over')

        # -- settle: holds run out, late payments land, workers catch up ------------
        deadline = time.monotonic() + settle_budget
        while time.monotonic() < deadline:
            if not chaos_tick():
                time.sleep(0.01)
                continue
            info = sale.info()
            pend, lag = backlog(r, STREAM_KEY)
            if (buyers_pool.idle() and pay_pool.idle() and info['pending'] == 0
                    and pend == 0 and not lag):
                db = store.summary(SALE_KEY)
                if db[UNPAID]['orders'] == 0:
                    break
            time.sleep(0.1)
        settle_s = time.monotonic() - sale_end
        time.sleep(0.3)
        stop_sampler.set()
        sampler.join(2)
        if bar is not None:
            bar.n = bar.total
            bar.refresh()
            bar.close()
            bar = None
        buyers_pool.stop()
        pay_pool.stop()
        errors = buyers_pool.errors + pay_pool.errors
        for p in workers.values():
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in workers.values():
            with contextlib.suppress(subprocess.TimeoutExpired):
                p.wait(10)

        # -- the ledger check --------------------------------------------------------
        outcome = reconcile(store, sale)
        checks, figures = ledger_check(cfg, store, sale, STREAM_KEY, r, tally, outcome, errors)
        elapsed = time.monotonic() - t0
        figures['workers'] = worker_totals(wlog)
        lines = report_lines(cfg, tally, checks, figures, outcome, elapsed, settle_s)
        print('\n'.join(lines), flush=True)
        chart = os.path.join(cfg.out, 'sale.png')
        chart_ok = write_chart(samples, tally.events, cfg, chart)
        write_report(os.path.join(cfg.out, 'REPORT.md'), cfg, lines, chart if chart_ok else None)
        print('report: %s%s' % (os.path.join(cfg.out, 'REPORT.md'),
                                ', chart: %s' % chart if chart_ok else ''), flush=True)
        return 0 if all(ok for _, ok, _ in checks) else 1
    except KeyboardInterrupt:
        print('interrupted: stopping everything', file=sys.stderr)
        return 130
    finally:
        stop_sampler.set()
        if bar is not None:
            bar.close()
        for pool in (buyers_pool, pay_pool):
            if pool is not None:
                pool.stop()
        for p in workers.values():
            if p.poll() is None:
                p.kill()
                p.wait(5)
        if store is not None:
            store.close()
        if r is not None:
            close_follower(r)
        if redis_srv is not None:
            redis_srv.stop()
        if pg is not None:
            pg.destroy()
        signal.signal(signal.SIGTERM, old_term)


def _pending_of(r, consumer: str) -> int:
    try:
        for c in r.xinfo_consumers(STREAM_KEY, 'orders'):
            if c['name'] == consumer:
                return int(c['pending'])
    except Exception:
        pass
    return 0


def _printer(cfg: DemoConfig) -> Callable[[str], None]:
    def say(msg: str) -> None:
        print(msg, flush=True)
    return say
