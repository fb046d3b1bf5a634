"""Payment: PAID only after CONFIRM, exactly one outcome when a late payment
races the hold's expiry, and every crash between the steps repaired."""

import random
import threading
import time

import pytest
import redis
import redis.backoff
import redis.retry

from conftest import KEY, WorkerThread, make_sale, orders_for, wait_for
from seckill import Sale
from seckill.faults import Crash, Faults
from seckill.pipeline.payment import cancel_order, pay
from seckill.pipeline.reconciler import MARK_PAID, reconcile
from seckill.pipeline.worker import Worker

pytestmark = pytest.mark.both_backends   # the module and the Functions library (conftest)


def test_pay_answers(db, r):
    store, sale, _ = orders_for(db, r, 3, total=4)
    # Redis never heard of the id (a reservation a failover lost): decided
    lost = pay(store, sale, 'nope', 'p')
    assert (lost.outcome, lost.reason, lost.captured) == ('REFUND', 'lost', False)
    assert store.order('nope') is None and sale.get('nope') is None
    # Redis knows it, the worker has not written it yet: undecided
    assert sale.reserve('u9', reqid='o9').status == 'RESERVED'
    assert (pay(store, sale, 'o9', 'p9').outcome, pay(store, sale, 'o9', 'p9').reason) == \
        ('RETRY', 'no_order')
    res = pay(store, sale, 'o0', 'p0')
    assert (res.outcome, res.captured) == ('PAID', True)
    assert sale.get('o0')['state'] == 'confirmed'
    assert pay(store, sale, 'o0', 'p0').outcome == 'PAID'   # the callback again: same answer
    other = pay(store, sale, 'o0', 'p-other')
    assert (other.outcome, other.reason, other.refund) == ('REFUND', 'paid_by_other', True)
    assert store.order('o0').paid_ref == 'p0'
    assert cancel_order(store, sale, 'o1') is True
    assert (pay(store, sale, 'o1', 'p1').outcome, pay(store, sale, 'o1', 'p1').reason) == \
        ('REFUND', 'cancelled')
    assert sale.get('o1')['state'] == 'released'
    assert cancel_order(store, sale, 'o0') is False   # paid: too late
    assert store.order('o0').state == 'PAID'


def test_late_payment_racing_the_hold_has_one_outcome(db, r):
    n, hold = 40, 1000
    store = db.store()
    cfg = make_sale(store, r, total=n, hold_ms=hold, limit=1)
    sale = Sale(r, KEY)
    results = {}
    rnd = random.Random(7)

    def buyer(i, delay):
        s = Sale(r, KEY)
        res = s.reserve('u%d' % i, reqid='o%d' % i)
        assert res.status == 'RESERVED'
        time.sleep(delay)
        while True:
            out = pay(store, s, res.rid, 'pay-%d' % i)
            if out.outcome != 'RETRY':
                results[res.rid] = out
                return
            time.sleep(0.02)

    with WorkerThread(Worker(r, store, [cfg], consumer='w', block_ms=50)):
        threads = [threading.Thread(target=buyer, args=(i, rnd.uniform(0.3, 1.5) * hold / 1000))
                   for i in range(n)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        wait_for(lambda: store.summary(KEY)['UNPAID']['orders'] == 0, what='expired orders cancelled')
    paid = {rid for rid, o in results.items() if o.outcome == 'PAID'}
    refunded = {rid for rid, o in results.items() if o.outcome == 'REFUND'}
    assert len(results) == n and paid | refunded == set(results) and not paid & refunded
    assert paid and refunded, 'the race should go both ways: %d paid' % len(paid)
    for rid in results:
        o, got = store.order(rid), sale.get(rid)
        if rid in paid:
            assert (o.state, o.paid_ref, got['state']) == ('PAID', 'pay-%s' % rid[1:], 'confirmed')
        else:
            assert results[rid].reason in ('released', 'expired')
            assert (o.state, got['state']) == ('CANCELLED', 'released')
    info = sale.info()
    assert info['confirmed'] == len(paid) == store.summary(KEY)['PAID']['units']
    assert info['remaining'] == n - len(paid) and info['pending'] == 0


def test_crash_after_payment_started_then_hold_runs_out(db, r):
    store, sale, w = orders_for(db, r, 2, hold_ms=2000)
    for rid in ('o0', 'o1'):
        with pytest.raises(Crash):
            pay(store, sale, rid, 'p-' + rid, faults=Faults({'pay_after_start': 1}))
        o = store.order(rid)
        assert (o.state, o.payment_ref) == ('UNPAID', 'p-' + rid)
        assert sale.get(rid)['state'] == 'pending'
    # o0's provider retries in time: paid. o1's retries after the hold ran out.
    assert pay(store, sale, 'o0', 'p-o0').outcome == 'PAID'
    time.sleep(2.3)
    w.drain()
    late = pay(store, sale, 'o1', 'p-o1')
    assert (late.outcome, late.reason) == ('REFUND', 'expired')
    assert store.order('o1').state == 'CANCELLED' and sale.get('o1')['state'] == 'released'
    assert sale.info()['confirmed'] == 1


@pytest.mark.parametrize('repair', ['retry', 'worker', 'reconciler'])
def test_crash_between_confirm_and_paid_is_completed(db, r, repair):
    store, sale, w = orders_for(db, r, 1, hold_ms=60_000)
    with pytest.raises(Crash):
        pay(store, sale, 'o0', 'p0', faults=Faults({'pay_after_confirm': 1}))
    assert store.order('o0').state == 'UNPAID' and sale.get('o0')['state'] == 'confirmed'
    if repair == 'retry':
        assert pay(store, sale, 'o0', 'p0').outcome == 'PAID'
    elif repair == 'worker':
        w.drain()   # the `confirmed` entry: a payment was started, so PAID
        assert w.stats.ledger.paid == 1
    else:
        out = reconcile(store, sale, apply=True)
        assert out.planned == [(MARK_PAID, 'o0')] and out.done == {MARK_PAID: ['o0']}
        assert reconcile(store, sale).clean
    o = store.order('o0')
    assert (o.state, o.paid_ref) == ('PAID', 'p0')
    assert pay(store, sale, 'o0', 'p0').outcome == 'PAID'


def test_two_payments_of_one_order_capture_once(db, r):
    n = 12
    store, sale, _ = orders_for(db, r, n)
    results = []
    lock = threading.Lock()

    def payer(rid, ref, barrier):
        barrier.wait()
        res = pay(store, Sale(r, KEY), rid, ref)
        with lock:
            results.append(res)

    for i in range(n):
        barrier = threading.Barrier(2)
        ts = [threading.Thread(target=payer, args=('o%d' % i, 'o%d-%s' % (i, x), barrier))
              for x in 'ab']
        for t in ts:
            t.start()
        for t in ts:
            t.join()
    by_rid = {}
    for res in results:
        by_rid.setdefault(res.rid, []).append(res)
    for rid, rs in by_rid.items():
        assert sorted(x.outcome for x in rs) == ['PAID', 'REFUND'], rs
        winner = [x for x in rs if x.outcome == 'PAID'][0]
        assert [x.reason for x in rs if x.outcome == 'REFUND'] == ['paid_by_other']
        assert store.order(rid).paid_ref == winner.ref
    assert sale.info()['confirmed'] == n


def test_pay_when_redis_lost_the_reservation(db, r):
    store, sale, _ = orders_for(db, r, 3, total=3, hold_ms=60_000)
    # Redis loses every reservation (a new round on the key); stock 2 now.
    sale.init(2, hold_ms=60_000, limit=1, stream='sale:{t}:events', replace=True)
    store.set_deadline('o2', 1)   # o2's hold is long over
    first = pay(store, sale, 'o0', 'p0')
    assert first.outcome == 'PAID' and sale.get('o0')['state'] == 'confirmed'
    assert sale.reserve('someone', reqid='x').status == 'RESERVED'   # the last unit goes
    second = pay(store, sale, 'o1', 'p1')
    assert (second.outcome, second.reason) == ('REFUND', 'conflict')
    third = pay(store, sale, 'o2', 'p2')
    assert (third.outcome, third.reason) == ('REFUND', 'lost')
    assert [store.order(x).state for x in ('o0', 'o1', 'o2')] == ['PAID', 'CANCELLED', 'CANCELLED']
    assert sale.info()['invariant'] == 'ok'


def test_pay_answers_retry_while_a_server_is_down(db, r):
    store, sale, _ = orders_for(db, r, 2)
    pstore = db.store(**({'timeout': 0.2} if db.kind == 'sqlite' else {}))
    pstore.order('o0')
    with db.outage():
        res = pay(pstore, sale, 'o0', 'p0')
        assert (res.outcome, res.reason) == ('RETRY', 'db_unavailable')
    wait_for(lambda: pay(pstore, sale, 'o0', 'p0').outcome == 'PAID', what='pay after the outage')
    down = Sale(redis.Redis(host='127.0.0.1', port=1, socket_connect_timeout=0.2,
                            retry=redis.retry.Retry(redis.backoff.NoBackoff(), 0)), KEY)
    res = pay(pstore, down, 'o1', 'p1')
    assert (res.outcome, res.reason) == ('RETRY', 'redis_unavailable')
    assert pay(pstore, sale, 'o1', 'p1').outcome == 'PAID'
