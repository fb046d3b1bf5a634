"""A split brain on purpose: the master is cut off by the proxy (the
sentinels and both replicas lose it; its process keeps running), a replica
is promoted, and for `split_s` seconds after the promotion clients that
still reach the old master directly (a buyer, a worker, a payer: the
"stale side") go on using it. Then the partition heals and the sentinels
turn the old master into a replica (its writes are discarded).

What the stale side got through is counted in CycleResult.split_brain:
`reserved_via_old` (RESERVED answers of the old master: expected, a
buyer's RESERVE is not gated), `orders_via_old` (orders of those
reservations in the database at the end: committed via the old master),
`worker_writes_via_old` (rows the stale worker inserted or changed),
`captured_via_old` (payments of them answered PAID). A safe pipeline has 0
in the last three.
"""

from __future__ import annotations

import threading
import time
from typing import Any, Dict, List

from seckill import protocol as p
from seckill.errors import transient
from seckill.pipeline.payment import OUT_PAID, OUT_RETRY
from seckill.pipeline.worker import Worker
from seckill.sale import Sale

from topology import wait_until


class StaleSide:
    def __init__(self, node: Any, cyc: Any):
        self.node, self.cyc = node, cyc
        self.client = node.client()
        self.stop = threading.Event()
        self.reserved: List[str] = []
        self.captured = 0
        self.worker = Worker(self.client, cyc.store, [cyc.cfg], consumer='stale', block_ms=100,
                             backend=cyc.backend, **cyc.api.worker_kwargs())
        self.threads: List[threading.Thread] = []
        self.errors: List[BaseException] = []

    def _guard(self, fn) -> None:
        try:
            fn()
        except BaseException as exc:
            self.errors.append(exc)

    def start(self) -> None:
        for fn in (self._buyer, self._worker, self._payer):
            t = threading.Thread(target=self._guard, args=(fn,), daemon=True)
            t.start()
            self.threads.append(t)

    def _sale(self) -> Sale:
        return Sale(self.client, self.cyc.key, backend=self.cyc.backend)

    def _buyer(self) -> None:
        for i in range(100000):
            if self.stop.wait(0.02):
                return
            rid = 'sb-%s-%d' % (self.cyc.key, i)
            try:
                if self._sale().reserve(rid, reqid=rid).status == p.RESERVED:
                    self.reserved.append(rid)
            except Exception as exc:
                if not transient(exc):
                    raise

    def _worker(self) -> None:
        while not self.stop.is_set():
            self.worker.run(until=time.monotonic() + 0.25)

    def _payer(self) -> None:
        done = set()
        while not self.stop.wait(0.05):
            for rid in list(self.reserved):
                if rid in done:
                    continue
                out = self.cyc.api.pay(self.cyc.store, self._sale(), rid, 'pay-' + rid)
                if out.outcome != OUT_RETRY:
                    done.add(rid)
                    self.captured += out.outcome == OUT_PAID

    def finish(self) -> Dict[str, int]:
        self.stop.set()
        for t in self.threads:
            t.join(30)
        self.client.close()
        if self.errors:
            raise self.errors[0]
        led = self.worker.stats.ledger
        orders = sum(1 for rid in self.reserved if self.cyc.store.order(rid) is not None)
        return {'reserved_via_old': len(self.reserved), 'orders_via_old': orders,
                'worker_writes_via_old': led.inserted + led.paid + led.cancelled,
                'captured_via_old': self.captured}


def split_brain_cycle(topo: Any, cyc: Any, split_s: float) -> None:
    old = topo.master(cyc.key)
    stale = StaleSide(old, cyc)
    topo.proxy.partition(old.proxy_port)
    cyc.t_kill = time.monotonic()
    stale.start()
    try:
        topo.wait_promoted(old, cyc.key)
        cyc.res.promote_s = round(time.monotonic() - cyc.t_kill, 2)
        time.sleep(split_s)
    finally:
        counts = stale.finish()
        topo.proxy.heal(old.proxy_port)
    cyc.res.split_brain = counts
    wait_until(lambda: old.role() == 'slave', 30, 'the sentinels to demote %r' % old)
    old.srv.wait_synced(30)
