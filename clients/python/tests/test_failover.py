"""A failover that loses the last writes: the master takes writes its
replica never applies (the replica's link is paused with CLIENT PAUSE
WRITE), the master dies, the replica is promoted. The order database has
what the lost master told the worker and the payments; the reconciler
reports every difference and repairs it. The WAIT gate would have refused
those orders and payments (tests/test_durability.py): here it is off
(durability=OFF), the setting of a deployment that chose not to wait, so
the reconciler has something to repair."""

import pytest

from conftest import KEY, STREAM, orders_for
from seckill import Sale
from seckill.durability import OFF
from seckill.pipeline.payment import cancel_order, pay
from seckill.pipeline.reconciler import RELEASE, RESTORE, reconcile
from seckill.pipeline.worker import Worker, backlog
from seckill.testing import RedisServer


@pytest.fixture
def replica(redis_server, module):
    srv = RedisServer(module=module, replicaof=redis_server).start()
    srv.wait_synced()
    redis_server.wait_replicas(1)
    yield srv
    srv.stop()


def test_failover_that_lost_writes_is_repaired(db, r, redis_server, replica):
    store, sale, w = orders_for(db, r, 10, total=30, hold_ms=60_000)
    cfg = store.load_sale(KEY)
    for i in range(5):
        assert pay(store, sale, 'o%d' % i, 'p%d' % i).outcome == 'PAID'
    assert r.execute_command('WAIT', 1, 5000) == 1

    # The replica stops applying what the master sends.
    rr = replica.client()
    rr.execute_command('CLIENT', 'PAUSE', 60000, 'WRITE')
    # The last writes: taken by the master, seen by the worker and the payments.
    for i in range(10, 15):
        sale.reserve('u%d' % i, reqid='o%d' % i)
    w.durability = OFF
    w.drain()
    for rid in ('o10', 'o11', 'o5', 'o6'):
        assert pay(store, sale, rid, 'p-' + rid, durability=OFF).outcome == 'PAID'
    assert cancel_order(store, sale, 'o7') is True
    w.drain()
    assert backlog(r, STREAM) == (0, 0)

    # The master dies; the replica is promoted without those writes.
    redis_server.kill()
    rr.execute_command('REPLICAOF', 'NO', 'ONE')
    rr.execute_command('CLIENT', 'UNPAUSE')
    new = Sale(rr, KEY)
    assert new.get('o10') is None and new.get('o5')['state'] == 'pending'
    assert new.get('o7')['state'] == 'pending'

    report = reconcile(store, new)
    assert report.paid.counts == {'ok': 5, 'pending': 2, 'released': 0, 'unknown': 2,
                                  'conflict': 0}
    assert sorted(report.paid.ids['pending']) == ['o5', 'o6']
    assert sorted(report.paid.ids['unknown']) == ['o10', 'o11']
    assert report.planned == [(RESTORE, 'o12'), (RESTORE, 'o13'), (RESTORE, 'o14'),
                              (RELEASE, 'o7')]
    assert new.info()['confirmed'] == 5

    fixed = reconcile(store, new, apply=True)
    assert fixed.done == {RESTORE: ['o12', 'o13', 'o14'], RELEASE: ['o7']}
    text = '\n'.join(fixed.lines())
    assert 'PAID orders confirmed again (repaired): 4' in text
    after = reconcile(store, new)
    assert after.clean and after.stuck_units == 0
    info = new.info()
    assert info['confirmed'] == store.summary(KEY)['PAID']['units'] == 9
    assert info['pending'] == 5 and info['invariant'] == 'ok'   # o8, o9, o12-o14
    assert [new.get(x)['state'] for x in ('o12', 'o13', 'o14', 'o7')] == \
        ['pending', 'pending', 'pending', 'released']

    # Workers go on against the new master: entries delivered again and the
    # restores' `reserved` entries are replays, nothing is duplicated.
    w2 = Worker(rr, store, [cfg], consumer='w2', claim_idle_ms=0)
    w2.drain()
    assert w2.stats.ledger.inserted == 0 and w2.stats.ledger.collisions == 0
    assert len(store.orders(KEY)) == 15 and backlog(rr, STREAM) == (0, 0)
    # Selling and paying go on.
    assert pay(store, new, 'o12', 'p12').outcome == 'PAID'
    assert new.reserve('u99', reqid='o99').status == 'RESERVED'
    assert reconcile(store, new).clean
