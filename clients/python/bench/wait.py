"""What the WAIT gate costs, on loopback: a master with two real replicas
(throwaway redis-server processes, free ports), the order store a SQLite
file. Prints p50/p99 in ms of

- RESERVE without and with `wait=True` (Sale.reserve);
- pay() with the gate off (durability=OFF) and on (the default);
- one worker batch (XREADGROUP of 100 entries, commit, XACK) off and on;
- the gate alone (Sale.wait: SET + WAIT on one connection).

    cd clients/python && PYTHONPATH=$PWD python bench/wait.py [--n 2000] [--backend module|functions]

Figures depend on the machine and its load: print them, never assert them.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from typing import Callable, Dict, List

from seckill import Sale, library
from seckill.testing import RedisServer
from seckill.durability import DEFAULT, OFF
from seckill.pipeline.payment import pay
from seckill.pipeline.reconciler import create_sale
from seckill.pipeline.store import SaleConfig, open_store
from seckill.pipeline.worker import Worker


def pct(xs: List[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(q * (len(xs) - 1))))] * 1000


def timed(fn: Callable[[int], object], n: int) -> List[float]:
    out = []
    for i in range(n):
        t = time.perf_counter()
        fn(i)
        out.append(time.perf_counter() - t)
    return out


def interleaved(a: Callable[[int], object], b: Callable[[int], object], n: int):
    """a and b timed in turn (a drift in the machine's load hits both)."""
    xa, xb = [], []
    for i in range(n):
        for fn, out in ((a, xa), (b, xb)):
            t = time.perf_counter()
            fn(i)
            out.append(time.perf_counter() - t)
    return xa, xb


def line(name: str, xs: List[float]) -> str:
    return '%-34s n=%5d  p50 %7.3f ms  p99 %7.3f ms  mean %7.3f ms' % (
        name, len(xs), pct(xs, 0.5), pct(xs, 0.99), statistics.mean(xs) * 1000)


def servers(backend: str) -> List[RedisServer]:
    if backend == 'functions':
        master = RedisServer(load_module=False).start()
        c = master.client()
        library.install(c)
        c.close()
        kw: Dict[str, object] = {'load_module': False}
    else:
        master = RedisServer().start()
        kw = {}
    reps = [RedisServer(replicaof=master, **kw).start() for _ in range(2)]
    for rep in reps:
        rep.wait_synced()
    master.wait_replicas(len(reps))
    return [master, *reps]


def batch_worker(r, store, key: str, n: int, durability) -> Worker:
    """A sale with n reservations and a worker (batches of 100) for it."""
    cfg = SaleConfig(key, n, stream=key + ':events', limit=1, hold_ms=600_000)
    create_sale(store, r, cfg, fence=False)
    sale = Sale(r, key)
    for i in range(n):
        sale.reserve('u%d' % i, reqid='%s-o%d' % (key, i))
    w = Worker(r, store, [store.load_sale(key)], consumer='w', batch=100, block_ms=10,
               durability=durability)
    w.ensure_groups()
    w._own_pending = False
    w._next_claim = w._next_expire = float('inf')   # the batch alone: no XAUTOCLAIM round
    return w


def batches(r, store, n: int):
    """Per-batch times of a worker without and one with the gate, in turn."""
    off = batch_worker(r, store, 'sale:{b0}', n, OFF)
    on = batch_worker(r, store, 'sale:{b1}', n, DEFAULT)

    def step(w):
        assert w.step() == 100
    return interleaved(lambda _: step(off), lambda _: step(on), n // 100)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument('--n', type=int, default=2000)
    ap.add_argument('--backend', choices=('module', 'functions'), default='module')
    a = ap.parse_args()
    n = a.n
    procs = servers(a.backend)
    tmp = tempfile.mkdtemp(prefix='seckill-bench-wait-')
    try:
        r = procs[0].client()
        store = open_store('sqlite://' + os.path.join(tmp, 'orders.db'))
        store.create_schema()
        print('backend %s, master + 2 replicas on loopback, n=%d' % (a.backend, n))
        sale = Sale(r, 'sale:{r}')
        sale.init(4 * n, hold_ms=600_000)
        off, on = interleaved(lambda i: sale.reserve('a%d' % i),
                              lambda i: sale.reserve('b%d' % i, wait=True), n)
        gate = timed(lambda i: sale.wait(), n)
        print(line('RESERVE', off))
        print(line('RESERVE wait=True', on))
        print(line('gate alone (SET + WAIT)', gate))

        cfg = SaleConfig('sale:{p}', 2 * n, stream='sale:{p}:events', limit=1, hold_ms=600_000)
        create_sale(store, r, cfg, fence=False)
        psale = Sale(r, 'sale:{p}')
        for i in range(2 * n):
            psale.reserve('u%d' % i, reqid='p%d' % i)
        Worker(r, store, [store.load_sale('sale:{p}')], consumer='w', durability=OFF).drain()
        pay_off, pay_on = interleaved(
            lambda i: pay(store, psale, 'p%d' % (2 * i), 'ref', durability=OFF),
            lambda i: pay(store, psale, 'p%d' % (2 * i + 1), 'ref', durability=DEFAULT), n)
        print(line('pay() durability=OFF', pay_off))
        print(line('pay() default gate', pay_on))
        nb = max(100, n // 100 * 100)
        b_off, b_on = batches(r, store, nb)
        print(line('worker batch of 100, OFF', b_off))
        print(line('worker batch of 100, gate', b_on))
        print('added p50: RESERVE %.3f ms, pay %.3f ms, batch %.3f ms' % (
            pct(on, 0.5) - pct(off, 0.5), pct(pay_on, 0.5) - pct(pay_off, 0.5),
            pct(b_on, 0.5) - pct(b_off, 0.5)))
        store.close()
        r.close()
    finally:
        for s in procs:
            s.stop()


if __name__ == '__main__':
    main()
