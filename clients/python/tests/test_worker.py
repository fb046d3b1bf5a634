"""The stream worker under crashes, kills, database outages and
concurrency, on SQLite and PostgreSQL. Workers that get killed run as real
processes (python -m seckill worker)."""

import json
import subprocess
import sys
import threading
import time

import pytest

from conftest import KEY, STREAM, WorkerThread, fence_supported, make_sale, wait_for
from seckill import Sale
from seckill.backend import to_functions
from seckill.faults import EXIT_CODE
from seckill.pipeline.payment import pay
from seckill.pipeline.reconciler import reconcile
from seckill.pipeline.retry import Backoff
from seckill.pipeline.worker import Worker, backlog

pytestmark = pytest.mark.both_backends   # the module and the Functions library (conftest)


def group_pending(r):
    """{consumer: pending count} of the orders group."""
    return {c['name']: int(c['pending']) for c in r.xinfo_consumers(STREAM, 'orders')}


def row_count(store):
    with store.tx(write=False) as t:
        return t.one('SELECT COUNT(*) FROM seckill_orders')[0]


def drained(r):
    pend, lag = backlog(r, STREAM)
    return pend == 0 and lag == 0


def last_json(text):
    lines = [line for line in text.splitlines() if line.startswith('{')]
    return json.loads(lines[-1]) if lines else None


def test_worker_writes_every_event(db, r):
    store = db.store()
    cfg = make_sale(store, r, total=10, hold_ms=1500, limit=1)
    sale = Sale(r, KEY)
    for i in range(6):
        assert sale.reserve('u%d' % i, reqid='o%d' % i).status == 'RESERVED'
    w = Worker(r, store, [cfg], consumer='w')
    w.drain()
    assert {o.rid: o.state for o in store.orders(KEY)} == {'o%d' % i: 'UNPAID' for i in range(6)}
    assert pay(store, sale, 'o0', 'p0').outcome == 'PAID'
    sale.release('o1')
    time.sleep(1.7)  # o2..o5 expire
    w.drain()
    states = {o.rid: (o.state, o.cancel_reason) for o in store.orders(KEY)}
    assert states['o0'] == ('PAID', None)
    assert states['o1'] == ('CANCELLED', 'released')
    assert all(states['o%d' % i] == ('CANCELLED', 'expired') for i in range(2, 6))
    assert drained(r)
    assert w.stats.ledger.inserted == 6 and w.stats.acked == w.stats.entries


def test_crash_between_commit_and_xack_makes_no_duplicate(db, r, redis_server, procs):
    store = db.store()
    make_sale(store, r, total=50)
    sale = Sale(r, KEY)
    for i in range(20):
        sale.reserve('u%d' % i, reqid='o%d' % i)
    p = procs.worker(redis_server.url, db.url, 'w1', fault='after_commit:1')
    assert p.wait(30) == EXIT_CODE
    # Committed, not acknowledged: the orders exist and the entries are pending.
    assert row_count(store) == 20
    assert group_pending(r) == {'w1': 20}
    # The same consumer comes back: its pending entries are delivered again
    # and replayed without a second row.
    procs.worker(redis_server.url, db.url, 'w1')
    wait_for(lambda: drained(r), what='the replay')
    for i in range(20, 30):
        sale.reserve('u%d' % i, reqid='o%d' % i)
    wait_for(lambda: row_count(store) == 30 and drained(r), what='new entries')
    procs.stop_all()
    assert row_count(store) == 30
    assert {o.rid for o in store.orders(KEY)} == {'o%d' % i for i in range(30)}
    stats = last_json(procs.log('w1'))
    assert stats['replayed'] == 20 and stats['inserted'] == 10


def test_killed_consumers_pending_entries_are_claimed(db, r, redis_server, procs):
    """A worker is SIGKILLed holding delivered entries it could not commit
    (the database was down); another worker claims them with XAUTOCLAIM."""
    store = db.store()
    cfg = make_sale(store, r, total=100)
    sale = Sale(r, KEY)
    doomed = procs.worker(redis_server.url, db.url, 'doomed')
    wait_for(lambda: 'doomed' in group_pending(r), what='the worker to join the group')
    with db.outage():
        for i in range(30):
            sale.reserve('u%d' % i, reqid='o%d' % i)
        # It holds the entries of the batch it cannot commit (the rest wait unread).
        held = wait_for(lambda: group_pending(r).get('doomed'), what='delivery to doomed')
        time.sleep(0.3)
        held = group_pending(r)['doomed']
        doomed.kill()
        doomed.wait(10)
    assert row_count(store) == 0
    w = Worker(r, store, [cfg], consumer='alive', claim_idle_ms=300)
    time.sleep(0.35)
    w.drain()
    assert w.stats.claimed == held >= 1
    assert {o.rid for o in store.orders(KEY)} == {'o%d' % i for i in range(30)}
    assert drained(r)
    assert group_pending(r).get('doomed', 0) == 0


def test_killed_before_commit_by_fault_then_claimed(db, r, redis_server, procs):
    store = db.store()
    cfg = make_sale(store, r, total=100)
    sale = Sale(r, KEY)
    for i in range(12):
        sale.reserve('u%d' % i, reqid='o%d' % i)
    p = procs.worker(redis_server.url, db.url, 'dies', fault='after_read:1')
    assert p.wait(30) == EXIT_CODE
    assert group_pending(r) == {'dies': 12} and row_count(store) == 0
    w = Worker(r, store, [cfg], consumer='other', claim_idle_ms=200)
    time.sleep(0.25)
    w.drain()
    assert w.stats.claimed == 12 and row_count(store) == 12 and drained(r)


def test_database_down_loses_nothing(db, r):
    store = db.store()
    cfg = make_sale(store, r, total=200, hold_ms=0, limit=1)
    wstore = db.store(**({'timeout': 0.2} if db.kind == 'sqlite' else {}))
    w = Worker(r, wstore, [cfg], consumer='w', block_ms=100, backoff=Backoff(0.05, 0.4))
    sale = Sale(r, KEY)
    with WorkerThread(w):
        for i in range(10):
            sale.reserve('u%d' % i, reqid='o%d' % i)
        wait_for(lambda: row_count(store) == 10, what='the first orders')
        with db.outage():
            for i in range(10, 60):
                sale.reserve('u%d' % i, reqid='o%d' % i)
            for i in range(0, 60, 5):
                sale.release('o%d' % i)
            wait_for(lambda: w.stats.db_retries >= 3, what='retries')
            pend, lag = backlog(r, STREAM)
            assert pend + lag > 0   # waiting in the stream, not lost
        wait_for(lambda: drained(r) and row_count(store) == 60, timeout=30, what='catch-up')
        wait_for(lambda: store.summary(KEY)['CANCELLED']['orders'] == 12, what='cancels')
    for o in store.orders(KEY):
        want = 'CANCELLED' if int(o.rid[1:]) % 5 == 0 else 'UNPAID'
        assert o.state == want, o
        assert Sale(r, KEY).get(o.rid)['state'] == ('released' if want == 'CANCELLED' else 'pending')
    assert w.stats.db_retries >= 3


def test_several_workers_at_once(db, r, redis_server, procs):
    store = db.store()
    make_sale(store, r, total=1000, limit=1)
    for name in ('w1', 'w2', 'w3'):
        procs.worker(redis_server.url, db.url, name, claim_idle_ms=1000)
    wait_for(lambda: len(group_pending(r)) == 3, what='three consumers')
    sale = Sale(r, KEY)
    n = 300

    def buyers(lo, hi):
        s = Sale(redis_server.client(), KEY)
        for i in range(lo, hi):
            s.reserve('u%d' % i, reqid='o%d' % i)
            if i % 4 == 0:
                s.release('o%d' % i)

    threads = [threading.Thread(target=buyers, args=(k * n // 4, (k + 1) * n // 4)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wait_for(lambda: row_count(store) == n and drained(r), timeout=30, what='all orders')
    wait_for(lambda: store.summary(KEY)['CANCELLED']['orders'] == n // 4, what='cancels')
    procs.stop_all()
    orders = store.orders(KEY)
    assert len(orders) == n and len({o.rid for o in orders}) == n
    for o in orders:
        assert o.state == ('CANCELLED' if int(o.rid[1:]) % 4 == 0 else 'UNPAID')
    per_worker = [last_json(procs.log(nm)) for nm in ('w1', 'w2', 'w3')]
    assert sum(s['entries'] for s in per_worker) >= n + n // 4
    assert sum(s['inserted'] for s in per_worker) + sum(s['cancelled'] for s in per_worker) >= n
    assert sum(1 for s in per_worker if s['entries'] > 0) >= 2
    assert sale.info()['invariant'] == 'ok'


def test_one_worker_several_sales(db, r):
    store = db.store()
    a = make_sale(store, r, total=5, key='sale:{a}', stream='sale:{a}:ev')
    b = make_sale(store, r, total=5, key='sale:{b}', stream='sale:{b}:ev')
    for key, prefix in (('sale:{a}', 'a'), ('sale:{b}', 'b')):
        s = Sale(r, key)
        for i in range(3):
            s.reserve('u%d' % i, reqid='%s%d' % (prefix, i))
    Sale(r, 'sale:{b}').release('b1')
    w = Worker(r, store, [a, b], consumer='w')
    w.drain()
    assert [(o.rid, o.state) for o in store.orders('sale:{a}')] == \
        [('a0', 'UNPAID'), ('a1', 'UNPAID'), ('a2', 'UNPAID')]
    assert [(o.rid, o.state) for o in store.orders('sale:{b}')] == \
        [('b0', 'UNPAID'), ('b1', 'CANCELLED'), ('b2', 'UNPAID')]


def test_workers_starting_together_on_an_empty_database(db):
    """Schema creation from several processes at once (PostgreSQL's catalog
    race for CREATE TABLE IF NOT EXISTS: without a lock it fails)."""
    runs = [subprocess.Popen([sys.executable, '-c',
                              'from seckill.pipeline.store import open_store; '
                              'open_store(%r).create_schema()' % db.url]) for _ in range(4)]
    assert [p.wait(60) for p in runs] == [0, 0, 0, 0]


def test_worker_rides_out_a_redis_restart(db, r, redis_server):
    store = db.store()
    cfg = make_sale(store, r, total=20)
    sale = Sale(r, KEY)
    w = Worker(r, store, [cfg], consumer='w', block_ms=100)
    with WorkerThread(w):
        sale.reserve('u0', reqid='o0')
        wait_for(lambda: store.order('o0') is not None, what='o0')
        sale.reserve('u1', reqid='o1')
        r.execute_command('SAVE')
        redis_server.restart()   # o1 may or may not have been acknowledged: both are fine
        # (redis-py reconnects by itself; past its retries the worker backs off)
        if fence_supported(r):   # a restarted master fences the sale: the reconciler lifts it
            assert sale.reserve('u2', reqid='o2').status == 'FENCED'
            assert reconcile(store, sale, apply=True).unfence == 'UNFENCED'
        assert sale.reserve('u2', reqid='o2').status == 'RESERVED'
        wait_for(lambda: store.order('o2') is not None and drained(r), what='o2 after the restart')
    assert {o.rid for o in store.orders(KEY)} == {'o0', 'o1', 'o2'}


def test_holds_run_out_with_no_other_traffic(db, r, backend):
    """Nothing but a running worker touches the sale: its holds still run
    out and their orders are cancelled (the module's timer; on the library,
    the worker's own seckill_expire every expire_every_s)."""
    store = db.store()
    cfg = make_sale(store, r, total=600, hold_ms=300, limit=1)
    sale = Sale(r, KEY)
    pipe = r.pipeline(transaction=False)     # at once: none runs out before the worker starts
    for i in range(300):                     # more than one seckill_expire call releases
        args = ['SECKILL.RESERVE', KEY, 'u%d' % i, 'REQID', 'o%d' % i]
        pipe.execute_command(*(to_functions(args, [cfg.stream]) if backend == 'functions' else args))
    pipe.execute()
    w = Worker(r, store, [cfg], consumer='w', block_ms=100, expire_every_s=0.2)
    with WorkerThread(w):
        wait_for(lambda: store.summary(KEY)['CANCELLED']['orders'] == 300, what='expired orders')
    assert {o.cancel_reason for o in store.orders(KEY)} == {'expired'}
    info = sale.info()
    assert (info['expired'], info['pending'], info['remaining']) == (300, 0, 600)
    assert w.stats.expired == (300 if backend == 'functions' else 0)
