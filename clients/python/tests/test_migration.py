"""TRYAGAIN from the module on a real cluster: a sale whose stream key was
migrated before the sale (MIGRATE-based resharding moves keys one by one).
The client retries it (seckill.plain.steps.call): a RESERVE that starts in the
window and ends after it succeeds; one whose window stays open gives up
after about a second with the TRYAGAIN error."""

import threading
import time

import pytest
from redis.exceptions import TryAgainError

from seckill import Sale
from seckill import split_protocol as sp


class Migration:
    """Moving one slot from master `src` to master `dst` by hand, the way
    redis-cli --cluster reshard does, one key at a time."""

    def __init__(self, cluster, src, dst, slot):
        self.cluster, self.src, self.dst, self.slot = cluster, src, dst, slot
        self.a, self.b = src.client(), dst.client()
        self.a_id, self.b_id = cluster.node_id(src), cluster.node_id(dst)

    def start(self, *keys):
        self.b.execute_command('CLUSTER', 'SETSLOT', self.slot, 'IMPORTING', self.a_id)
        self.a.execute_command('CLUSTER', 'SETSLOT', self.slot, 'MIGRATING', self.b_id)
        self.move(*keys)

    def move(self, *keys):
        self.a.execute_command('MIGRATE', '127.0.0.1', self.dst.port, '', 0, 5000, 'KEYS', *keys)

    def finish(self, *keys):
        if keys:
            self.move(*keys)
        for n in self.cluster.masters:
            n.client().execute_command('CLUSTER', 'SETSLOT', self.slot, 'NODE', self.b_id)


def sale_on(cluster, master, prefix):
    """A sale key and its stream in a slot `master` serves."""
    lo, hi = cluster.ranges[master.port]
    tag = next('%s%d' % (prefix, i) for i in range(100000)
               if lo <= sp.key_slot('{%s%d}' % (prefix, i)) <= hi)
    return 'sale:{%s}' % tag, 'sale:{%s}:ev' % tag


def test_reserve_waits_out_a_migration_on_a_cluster_client(cluster, rc):
    src, dst = cluster.masters[0], cluster.masters[1]
    key, stream = sale_on(cluster, src, 'mw')
    sale = Sale(rc, key)
    assert sale.init(10, limit=10, stream=stream) is True
    assert sale.reserve('u0').status == 'RESERVED'
    m = Migration(cluster, src, dst, sp.key_slot(key))
    m.start(stream)                              # the stream moved first: RESERVE answers TRYAGAIN
    with pytest.raises(TryAgainError):
        src.client().execute_command('SECKILL.RESERVE', key, 'probe')
    later = threading.Timer(0.7, m.finish, args=(key,))   # longer than redis-py's own ~0.4 s
    t0 = time.monotonic()
    later.start()
    try:
        res = sale.reserve('late', reqid='late-1')
    finally:
        later.join()
    took = time.monotonic() - t0
    assert (res.status, res.rid) == ('RESERVED', 'late-1')
    assert 0.6 < took < 1.6, took
    assert dst.client().xlen(stream) == 2 and sale.info()['pending'] == 2


def test_a_migration_that_stays_open_gives_up_after_about_a_second(cluster):
    src, dst = cluster.masters[2], cluster.masters[0]
    key, stream = sale_on(cluster, src, 'mg')
    node = src.client()                          # a plain client on the sale's node
    sale = Sale(node, key)
    assert sale.init(10, stream=stream) is True
    assert sale.reserve('u0').status == 'RESERVED'
    m = Migration(cluster, src, dst, sp.key_slot(key))
    m.start(stream)
    before = int(node.info('commandstats')['cmdstat_seckill.reserve']['calls'])
    t0 = time.monotonic()
    with pytest.raises(TryAgainError, match='STREAM key is not on this node'):
        sale.reserve('late')
    took = time.monotonic() - t0
    tries = int(node.info('commandstats')['cmdstat_seckill.reserve']['calls']) - before
    m.finish(key)
    assert 1.0 <= took < 1.5, took
    assert tries == 6
    assert Sale(dst.client(), key).info()['pending'] == 1    # nothing was taken meanwhile
