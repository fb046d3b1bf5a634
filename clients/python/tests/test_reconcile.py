"""The reconciler and rebuild: every class of disagreement between the order
database and the sale, reported, then repaired; a sale lost to FLUSHALL
rebuilt from the database alone."""

import json
import subprocess
import sys

import pytest

from conftest import KEY, STREAM, WorkerThread, make_sale, orders_for, wait_for
from seckill import Sale
from seckill.faults import Crash, Faults
from seckill.pipeline.payment import pay
from seckill.pipeline.reconciler import (CANCEL, CANCEL_LOST, FLAG_CONFIRMED_UNPAID, MARK_PAID,
                                         RELEASE, RESTORE, rebuild, reconcile)
from seckill.pipeline.worker import Worker, backlog
from seckill.protocol import Event

pytestmark = pytest.mark.both_backends   # the module and the Functions library (conftest)


def digest(r):
    return r.execute_command('DEBUG', 'DIGEST-VALUE', KEY)


def snapshot(store):
    return sorted((o.rid, o.state, o.paid_ref) for o in store.orders(KEY))


def ghost(store, cfg, rid, user, deadline_ms):
    """An order row for a reservation the sale never had (as after a
    failover that lost it)."""
    store.apply_events(cfg, [Event('%d-0' % (deadline_ms - (cfg.hold_ms or 0)), 'reserved',
                                   rid, user, 1)])


def test_report_then_apply_repairs_every_class(db, r):
    store, sale, w = orders_for(db, r, 10, total=20, hold_ms=60_000)
    cfg = store.load_sale(KEY)
    now = sale.server_ms()
    assert pay(store, sale, 'o0', 'p0').outcome == 'PAID'            # ok
    store.start_payment('o1', 'p1')                                  # PAID, CONFIRM lost
    store.mark_paid('o1')
    store.start_payment('o2', 'p2')                                  # PAID, released in Redis
    store.mark_paid('o2')
    sale.release('o2')
    ghost(store, cfg, 'o3x', 'u3x', now + 60_000)                     # PAID, unknown in Redis
    store.start_payment('o3x', 'p3')
    store.mark_paid('o3x')
    with pytest.raises(Crash):                                        # UNPAID, confirmed, paying
        pay(store, sale, 'o4', 'p4', faults=Faults({'pay_after_confirm': 1}))
    sale.release('o5')                                                # UNPAID, released
    ghost(store, cfg, 'o6x', 'u6x', now + 60_000)                     # UNPAID, unknown, live
    ghost(store, cfg, 'o7x', 'u7x', now - 1)                          # UNPAID, unknown, over
    store.cancel('o8', 'cancelled')                                   # CANCELLED, still pending
    # o3, o6, o7, o9: UNPAID, pending: fine

    before, rows = digest(r), snapshot(store)
    out = reconcile(store, sale)
    assert digest(r) == before and snapshot(store) == rows           # a report changes nothing
    assert out.paid.counts == {'ok': 1, 'pending': 1, 'released': 1, 'unknown': 1, 'conflict': 0}
    assert sorted(out.paid_repaired) == ['o1', 'o2', 'o3x']
    assert out.unpaid.counts['ok'] == 1 and out.unpaid.ids['released'] == ['o5']
    assert out.planned == [(MARK_PAID, 'o4'), (CANCEL, 'o5'), (RESTORE, 'o6x'),
                           (CANCEL_LOST, 'o7x'), (RELEASE, 'o8')]
    assert not out.clean and out.done == {}
    text = '\n'.join(out.lines())
    assert 'needs repair' in text and 'restore' in text

    out = reconcile(store, sale, apply=True)
    assert out.applied and not out.conflicts
    assert out.done == {MARK_PAID: ['o4'], CANCEL: ['o5'], RESTORE: ['o6x'],
                        CANCEL_LOST: ['o7x'], RELEASE: ['o8']}
    states = {o.rid: o.state for o in store.orders(KEY)}
    assert states == {'o0': 'PAID', 'o1': 'PAID', 'o2': 'PAID', 'o3x': 'PAID', 'o4': 'PAID',
                      'o5': 'CANCELLED', 'o6x': 'UNPAID', 'o7x': 'CANCELLED',
                      'o8': 'CANCELLED', 'o3': 'UNPAID', 'o6': 'UNPAID', 'o7': 'UNPAID',
                      'o9': 'UNPAID'}
    assert [sale.get(x)['state'] for x in ('o1', 'o2', 'o3x', 'o4')] == ['confirmed'] * 4
    assert sale.get('o6x')['state'] == 'pending'
    assert store.order('o6x').deadline_ms == sale.get('o6x')['deadline_ms']
    assert sale.get('o8')['state'] == 'released'

    again = reconcile(store, sale)
    assert again.clean and again.stuck_units == 0
    info = sale.info()
    assert info['confirmed'] == store.summary(KEY)['PAID']['units'] == 5
    assert info['pending'] == 5 and info['invariant'] == 'ok'
    # The worker replays the restore's `reserved` entry: no new row.
    w.drain()
    assert w.stats.ledger.collisions == 0 and len(store.orders(KEY)) == 13
    # The restored order can be paid.
    assert pay(store, sale, 'o6x', 'p6').outcome == 'PAID'


def test_confirmed_without_payment_is_flagged_not_paid(db, r):
    store = db.store()
    cfg = make_sale(store, r, total=3)
    sale = Sale(r, KEY)
    sale.reserve('u', reqid='o')
    Worker(r, store, [cfg], consumer='w').drain()
    sale.confirm('o')   # an operator's CONFIRM: no money
    out = reconcile(store, sale, apply=True)
    assert out.planned == [(FLAG_CONFIRMED_UNPAID, 'o')]
    assert store.order('o').state == 'UNPAID'
    assert out.stuck_units == 1 and 'without a PAID order' in '\n'.join(out.lines())


def test_paid_orders_the_stock_cannot_cover_are_conflicts(db, r):
    store = db.store()
    cfg = make_sale(store, r, total=2)
    sale = Sale(r, KEY)
    for x in ('a', 'b'):
        ghost(store, cfg, x, 'u' + x, 10 ** 13)
        store.start_payment(x, 'p' + x)
        store.mark_paid(x)
    sale.reserve('someone-else', reqid='c')   # the stock went to another buyer meanwhile
    out = reconcile(store, sale, apply=True)
    assert out.paid.counts['unknown'] == 1 and len(out.conflicts) == 1
    assert 'CONFLICT' in '\n'.join(out.lines())
    assert sale.info()['invariant'] == 'ok' and sale.info()['remaining'] == 0


def test_flushall_then_rebuild_from_the_database(db, r, redis_server):
    store = db.store()
    cfg = make_sale(store, r, total=10, hold_ms=60_000, limit=1, shards=2)
    sale = Sale(r, KEY)
    for i in range(9):
        sale.reserve('u%d' % i, reqid='o%d' % i)
    w = Worker(r, store, [cfg], consumer='w')
    w.drain()
    for i in range(4):
        assert pay(store, sale, 'o%d' % i, 'p%d' % i).outcome == 'PAID'
    sale.release('o4')
    sale.release('o5')
    w.drain()
    store.set_deadline('o8', 1)   # o8's hold is over by the time of the rebuild
    assert store.summary(KEY)['UNPAID']['orders'] == 3

    r.flushall()
    assert sale.info() is None
    out = rebuild(store, r, KEY)
    assert sorted(out.paid_repaired) == ['o0', 'o1', 'o2', 'o3'] and not out.conflicts
    assert out.done == {RESTORE: ['o6', 'o7'], CANCEL_LOST: ['o8']}
    info = sale.info()
    assert (info['total'], info['confirmed'], info['pending'], info['remaining']) == (10, 4, 2, 4)
    assert len(info['shards']) == 2 and info['invariant'] == 'ok'
    got = sale.get('o6')
    assert got['state'] == 'pending' and got['deadline_ms'] - got['created_ms'] == 60_000
    assert sale.reserve('u0', reqid='again').status == 'LIMIT'         # LIMIT 1 came back
    assert reconcile(store, sale).clean
    # The stream and its group are back: workers go on (NOGROUP -> recreated).
    w.drain()
    assert backlog(r, STREAM) == (0, 0) and len(store.orders(KEY)) == 9
    assert pay(store, sale, 'o6', 'p6').outcome == 'PAID'
    with pytest.raises(RuntimeError):
        rebuild(store, r, KEY)
    with pytest.raises(LookupError):
        rebuild(store, r, 'sale:{none}')

    # The same from the command line, after another loss.
    r.flushall()
    cli = [sys.executable, '-m', 'seckill', '--redis', redis_server.url, '--db', db.url]
    res = subprocess.run(cli + ['rebuild', '--sale', KEY, '--json', '--chunk', '2'],
                         capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stderr
    doc = json.loads(res.stdout)
    assert sorted(doc['paid_repaired']) == ['o0', 'o1', 'o2', 'o3', 'o6']
    assert doc['done'] == {RESTORE: ['o7']}
    assert doc['report']['confirmed'] == 5 and doc['report']['pending'] == 1


def test_reconcile_in_chunks(db, r):
    store = db.store()
    cfg = make_sale(store, r, total=300)
    for i in range(250):
        ghost(store, cfg, 'o%d' % i, 'u%d' % i, 10 ** 13)
        store.start_payment('o%d' % i, 'p')
        store.mark_paid('o%d' % i)
    out = reconcile(store, Sale(r, KEY), apply=True, chunk_size=100)
    assert out.paid.calls == 3 and out.paid.counts['unknown'] == 250
    assert reconcile(store, Sale(r, KEY), chunk_size=100).clean


def test_cli_reconcile_exit_codes(db, r, redis_server):
    store = db.store()
    cfg = make_sale(store, r, total=5)
    ghost(store, cfg, 'o1', 'u1', 10 ** 13)
    store.start_payment('o1', 'p')
    store.mark_paid('o1')
    cli = [sys.executable, '-m', 'seckill', '--redis', redis_server.url, '--db', db.url,
           'reconcile', '--sale', KEY]
    res = subprocess.run(cli, capture_output=True, text=True, timeout=60)
    assert res.returncode == 1 and 'needs repair' in res.stdout, res.stdout + res.stderr
    res = subprocess.run(cli + ['--apply'], capture_output=True, text=True, timeout=60)
    assert res.returncode == 0 and 'PAID orders confirmed again' in res.stdout, res.stdout
    res = subprocess.run(cli + ['--json'], capture_output=True, text=True, timeout=60)
    assert res.returncode == 0 and json.loads(res.stdout)['paid']['ok'] == 1
    r.flushall()
    res = subprocess.run(cli, capture_output=True, text=True, timeout=60)
    assert res.returncode == 2 and 'rebuild' in res.stderr


def test_a_running_worker_survives_flushall_and_rebuild(db, r):
    store = db.store()
    cfg = make_sale(store, r, total=5, hold_ms=60_000, limit=2)
    sale = Sale(r, KEY)
    w = Worker(r, store, [cfg], consumer='w', block_ms=1000)
    with WorkerThread(w):
        sale.reserve('u1', reqid='a')
        wait_for(lambda: store.order('a') is not None, what='order a')
        r.flushall()   # unblocks the worker's XREADGROUP: "UNBLOCKED", then NOGROUP
        wait_for(lambda: w.stats.redis_retries >= 1, what='the worker to notice')
        out = rebuild(store, r, KEY)
        assert out.done == {RESTORE: ['a']}
        sale.reserve('u2', reqid='b')
        wait_for(lambda: store.order('b') is not None, what='order b after the rebuild')
    assert w.stats.ledger.collisions == 0 and len(store.orders(KEY)) == 2


def test_rebuild_with_buyers_racing_it(db, r, redis_server):
    """Issue 14 finding 1, the reviewer's reproduction: 90 of 100 units sold
    with order ids, 80 paid; FLUSHALL; four threads keep calling RESERVE
    while `python -m seckill rebuild` runs. The rebuilt sale must hold the
    whole ledger before the first new RESERVE succeeds: new buyers get at
    most the 10 units the ledger leaves, no PAID order ends in conflict,
    every unpaid hold comes back pending."""
    import threading
    import time
    total, sold, paid = 100, 90, 80
    store = db.store()
    cfg = make_sale(store, r, total=total, hold_ms=600_000, limit=1)
    sale = Sale(r, KEY)
    for i in range(sold):
        assert sale.reserve('u%d' % i, reqid='o%d' % i).status == 'RESERVED'
    Worker(r, store, [cfg], consumer='w').drain()
    for i in range(paid):
        assert pay(store, sale, 'o%d' % i, 'p%d' % i).outcome == 'PAID'
    r.flushall()

    stop = threading.Event()
    lock = threading.Lock()
    calls = []                       # (status, monotonic time)

    def buyer(t):
        c = redis_server.client()
        s = Sale(c, KEY)
        i = 0
        while not stop.is_set():
            res = s.reserve('n%d-%d' % (t, i), reqid='n%d-%d' % (t, i))
            i += 1
            with lock:
                calls.append((res.status, time.monotonic()))
        c.close()

    threads = [threading.Thread(target=buyer, args=(t,), daemon=True) for t in range(4)]
    for t in threads:
        t.start()
    cli = [sys.executable, '-m', 'seckill', '--redis', redis_server.url, '--db', db.url]
    t0 = time.monotonic()
    res = subprocess.run(cli + ['rebuild', '--sale', KEY, '--json'], capture_output=True,
                         text=True, timeout=120)
    t1 = time.monotonic()
    # Let the buyers run until each has been answered SOLD_OUT after the rebuild.
    wait_for(lambda: sum(1 for st, t in list(calls) if st == 'SOLD_OUT' and t > t1) >= 4,
             timeout=30, what='the buyers to sell out')
    stop.set()
    for t in threads:
        t.join(10)
    during = [st for st, t in calls if t0 <= t <= t1]
    assert during, 'no RESERVE raced the rebuild'
    new = sum(1 for st, _t in calls if st == 'RESERVED')

    assert res.returncode == 0, res.stdout + res.stderr
    doc = json.loads(res.stdout)
    assert doc['conflicts'] == [], doc['conflicts']
    assert new <= total - sold, 'new buyers got %d units, the ledger left %d' % (new, total - sold)
    info = sale.info()
    assert info['invariant'] == 'ok'
    assert info['confirmed'] == paid and info['pending'] == (sold - paid) + new
    assert info['confirmed'] + info['pending'] <= total
    states = {o.rid: o.state for o in store.orders(KEY)}
    for i in range(sold):
        rid = 'o%d' % i
        got = sale.get(rid)
        if i < paid:
            assert states[rid] == 'PAID' and got['state'] == 'confirmed', (rid, got)
        else:
            assert states[rid] == 'UNPAID' and got['state'] == 'pending', (rid, states[rid], got)
    assert reconcile(store, sale).paid.clean


def test_staging_key_shares_the_slot():
    from seckill.pipeline.reconciler import staging_key
    from seckill.split_protocol import key_slot
    assert staging_key('sale:{rb1}') == 'sale:{rb1}:rebuild'
    assert staging_key('sale1001') == '{sale1001}:rebuild'
    assert staging_key('a{b') == '{a{b}:rebuild'
    for key in ('sale:{rb1}', 'sale1001', 'a{b', 'a{b}{c}'):
        assert key_slot(staging_key(key)) == key_slot(key)
    for key in ('a}b{', 'sale:{}x', 'x{}{y}'):   # no tag; the braced form would hash "a", "sale:{", "x{"
        with pytest.raises(ValueError, match='hash tag'):
            staging_key(key)


def test_rebuild_refuses_and_cleans_up(db, r, monkeypatch, backend):
    """A leftover staging key (crashed rebuild) is replaced; a second rebuild
    while one holds the lock is refused; a key INITed by someone else
    before the RENAMENX (the library: before its transaction) wins: the
    staging key is deleted, nothing else changes."""
    from seckill.pipeline import reconciler
    store, sale, _w = orders_for(db, r, 3, total=5, hold_ms=60_000)
    assert pay(store, sale, 'o0', 'p0').outcome == 'PAID'
    r.flushall()
    staging = reconciler.staging_key(KEY)
    Sale(r, staging).init(1000)                       # junk a crashed rebuild left
    lock = staging + reconciler.LOCK_SUFFIX
    r.set(lock, 'someone-else', px=60_000)
    with pytest.raises(RuntimeError, match='another rebuild'):
        rebuild(store, r, KEY)
    assert sale.info() is None and Sale(r, staging).info()['total'] == 1000
    r.delete(lock)

    hook = '_transaction' if backend == 'functions' else '_reconcile'
    real = getattr(reconciler, hook)

    def racing(*a, **kw):
        if backend == 'functions':
            sale.init(7)                              # before the WATCHed transaction
        out = real(*a, **kw)
        if backend == 'module':
            sale.init(7)                              # someone INITs the key meanwhile
        return out
    monkeypatch.setattr(reconciler, hook, racing)
    with pytest.raises(RuntimeError, match='exists'):
        rebuild(store, r, KEY)
    assert sale.info()['total'] == 7 and sale.info()['pending'] == 0
    assert r.exists(staging, lock) == 0
    monkeypatch.undo()

    r.delete(KEY)
    out = rebuild(store, r, KEY)
    assert out.paid_repaired == ['o0'] and out.done == {RESTORE: ['o1', 'o2']}
    assert (sale.info()['confirmed'], sale.info()['pending']) == (1, 2)
    assert r.exists(staging, lock) == 0
    with pytest.raises(RuntimeError, match='exists'):
        rebuild(store, r, KEY)


def test_rebuilt_holds_expire_on_the_published_key(db, r, backend):
    """Holds restored under the staging key keep their expiry schedule and
    stream across the RENAMENX: the master releases them on the real key
    (the library: the worker's seckill_expire), and the worker cancels
    their orders."""
    store, sale, w = orders_for(db, r, 2, total=4, hold_ms=1500)
    r.flushall()
    out = rebuild(store, r, KEY)
    assert out.done == {RESTORE: ['o0', 'o1']}

    def expired():
        if backend == 'functions':
            w.expire()          # no timer: the worker releases them
        return sale.info()['expired'] == 2
    wait_for(expired, timeout=10, what='the restored holds to expire')
    info = sale.info()
    assert (info['pending'], info['remaining'], info['invariant']) == (0, 4, 'ok')
    w.drain()
    assert {o.rid: o.state for o in store.orders(KEY)} == {'o0': 'CANCELLED', 'o1': 'CANCELLED'}
