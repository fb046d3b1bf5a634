"""seckill.aio against real servers: a plain redis-server (redis.asyncio.Redis)
and the three-master cluster (redis.asyncio.cluster.RedisCluster). Concurrent
buyers are asyncio tasks (asyncio.gather): they never oversell, LIMIT holds,
a split sale sells out exactly, a stale object after a replace reloads the
layout as the sync client does, and TRYAGAIN is retried the same way."""

import asyncio
import collections
import contextlib
import dataclasses
import random
import time

import pytest
import pytest_asyncio  # noqa: F401  (without the plugin these tests must fail, not be skipped)
import redis
import redis.asyncio as aioredis
from redis.asyncio.cluster import RedisCluster as AsyncRedisCluster
from redis.exceptions import TryAgainError

from seckill import SplitSale as SyncSplitSale
from seckill import split_protocol as sp
from seckill.aio import Sale, SplitSale, StaleRound

from test_split_cluster import users_homed

pytestmark = pytest.mark.asyncio


@contextlib.asynccontextmanager
async def plain(server):
    c = aioredis.Redis(host='127.0.0.1', port=server.port, decode_responses=True,
                       socket_timeout=10)
    try:
        yield c
    finally:
        await c.aclose()


@contextlib.asynccontextmanager
async def clustered(cluster):
    c = AsyncRedisCluster(host='127.0.0.1', port=cluster.masters[0].port, decode_responses=True,
                          socket_timeout=10)
    try:
        yield c
    finally:
        await c.aclose()


async def buy(sales, users, qty=1, tasks=32):
    """`tasks` buyer tasks (asyncio.gather) take users from one list and
    reserve, each on sales[i % len(sales)]: (ledger [(rid, user, qty)],
    statuses, SOLD_OUT answers that ended before a later success began)."""
    queue = list(enumerate(users))
    ledger, statuses, events = [], collections.Counter(), []

    async def buyer(n):
        sale = sales[n % len(sales)]
        while queue:
            i, user = queue.pop()
            t0 = time.monotonic()
            res = await sale.reserve(user, qty, reqid='o%d' % i)
            status, rid = (res.status, res.rid) if isinstance(sale, Sale) else res
            events.append((status, t0, time.monotonic()))
            statuses[status] += 1
            if status == 'RESERVED':
                ledger.append((rid, user, qty))

    await asyncio.gather(*(buyer(n) for n in range(tasks)))
    last_ok = max((t0 for s, t0, _ in events if s == 'RESERVED'), default=0)
    false_sold_out = sum(1 for s, _, t1 in events if s == 'SOLD_OUT' and t1 < last_ok)
    return ledger, statuses, false_sold_out


# ---------------------------------------------------------------- Sale, one key

async def test_sale_concurrent_buyers_never_oversell(redis_server):
    async with plain(redis_server) as r:
        sale = Sale(r, 'sale:{aio1}')
        assert await sale.init(50, hold_ms=60_000) is True
        assert await sale.init(50) is False
        ledger, statuses, _ = await buy([sale], ['u%d' % i for i in range(200)])
        assert statuses == {'RESERVED': 50, 'SOLD_OUT': 150}
        info = await sale.info()
        assert (info['remaining'], info['pending'], info['invariant']) == (0, 50, 'ok')
        rec = await sale.reconcile(ledger)
        assert rec.counts['pending'] == 50 and rec.calls == 1
        rid = ledger[0][0]
        assert (await sale.confirm(rid)).status == 'CONFIRMED'
        assert (await sale.release(rid)).status == 'CONFIRMED'
        assert (await sale.get(rid))['state'] == 'confirmed'
        assert (await sale.release('nope')).status == 'NOT_FOUND'
        assert abs(await sale.server_ms() - time.time() * 1000) < 5000


async def test_sale_limit_holds_under_concurrency(redis_server):
    async with plain(redis_server) as r:
        sale = Sale(r, 'sale:{aio2}')
        await sale.init(1000, limit=2)
        users = ['buyer%d' % (i % 20) for i in range(400)]       # 20 users, 20 tries each
        ledger, statuses, _ = await buy([sale], users)
        assert statuses == {'RESERVED': 40, 'LIMIT': 360}
        assert set(collections.Counter(u for _r, u, _q in ledger).values()) == {2}
        assert (await sale.info())['pending'] == 40


async def test_sale_missing_and_sync_parity(redis_server, r):
    async with plain(redis_server) as ar:
        assert await Sale(ar, 'sale:{none}').info() is None
        assert (await Sale(ar, 'sale:{none}').reserve('u')).status == 'NO_SALE'
        from seckill import Sale as SyncSale
        SyncSale(r, 'sale:{par}').init(3)
        assert await Sale(ar, 'sale:{par}').info() == SyncSale(r, 'sale:{par}').info()


class FakeAsync:
    """redis.asyncio stand-in: RESERVE answers TRYAGAIN `fails` times."""

    def __init__(self, fails):
        self.fails, self.calls = fails, 0

    async def execute_command(self, *args):
        self.calls += 1
        if self.calls <= self.fails:
            raise TryAgainError("the sale's STREAM key is not on this node")
        return ['RESERVED', 'o1', 4]


async def test_tryagain_is_retried_by_the_async_client_too():
    fake = FakeAsync(fails=2)
    res = await Sale(fake, 'sale:{m}', backend='module').reserve('u', reqid='o1')
    assert (res.status, fake.calls) == ('RESERVED', 3)
    with pytest.raises(TryAgainError):
        await Sale(FakeAsync(fails=100), 'sale:{m}', backend='module').reserve('u')


# ---------------------------------------------------------------- SplitSale

async def test_split_sale_sells_out_exactly_on_the_cluster(cluster):
    total = 300
    async with clustered(cluster) as c1, clustered(cluster) as c2:
        first = SplitSale(c1, 'aio-c')
        assert await first.create(total) is True
        lay = await first.layout()
        assert len({(await first.node_name(k)) for k in lay.parts}) == 3
        sales = [first, SplitSale(c2, 'aio-c')]                  # two app servers
        rng = random.Random(3)
        users = ['u%016x' % rng.getrandbits(64) for _ in range(3 * total)]
        ledger, statuses, false_sold_out = await buy(sales, users)
        assert statuses == {'RESERVED': total, 'SOLD_OUT': 2 * total}
        assert false_sold_out == 0
        assert sum(s.stats['gave_up'] for s in sales) == 0
        assert sum(s.stats['refills'] + s.stats['borrows'] for s in sales) > 0
        info = await sales[1].info()
        assert info['invariant'] == 'ok', info['problems']
        assert (info['remaining'], info['pending'], info['in_flight']) == (0, total, 0)
        rec = await sales[0].reconcile(ledger)
        assert rec['orders_pending'] == total and rec['orders_unknown'] == 0
        assert rec['orders_released'] == 0 and rec['orders_conflict'] == 0
        # The sync client reads the same sale the same way.
        sync = SyncSplitSale(cluster.client(), 'aio-c').info()
        assert (sync['pending'], sync['round']) == (total, info['round'])


async def test_split_sale_limit_and_settle_on_the_cluster(cluster):
    async with clustered(cluster) as c:
        sale = SplitSale(c, 'aio-l')
        await sale.create(100, limit=2)
        users = ['buyer%d' % (i % 20) for i in range(400)]
        ledger, statuses, _ = await buy([sale], users, tasks=16)
        assert statuses == {'RESERVED': 40, 'LIMIT': 360}
        assert set(collections.Counter(u for _r, u, _q in ledger).values()) == {2}
        rid, user, _q = ledger[0]
        assert await sale.confirm(user, rid) == 'CONFIRMED'
        assert await sale.release(user, rid) == 'CONFIRMED'
        assert (await sale.get(user, rid))['state'] == 'confirmed'
        info = await sale.info()
        assert (info['pending'], info['confirmed'], info['invariant']) == (39, 1, 'ok')


async def test_split_sale_repair_after_an_interrupted_transfer(cluster):
    """A SEND whose RECV never came holds the last units: an async reserve
    completes it instead of answering SOLD_OUT."""
    async with clustered(cluster) as c:
        sale = SplitSale(c, 'aio-f')
        await sale.create(3, parts=3)                    # every unit in the pool
        lay = await sale.layout()
        got = await c.execute_command('SECKILL.SEND', lay.pool, lay.parts[1], 3, 'TID', 'by-hand',
                                      'ROUND', lay.round)
        assert [int(x) for x in got] == [3, 3, 0]
        assert (await sale.info())['in_flight'] == 3
        assert [(await sale.reserve(u))[0] for u in users_homed(2, n=3, prefix='af')] == ['RESERVED'] * 3
        assert (await sale.reserve('another'))[0] == 'SOLD_OUT'
        info = await sale.info()
        assert (info['in_flight'], info['pending'], info['invariant']) == (0, 3, 'ok')
        assert await sale.repair() == 0


async def sell_out(sale, prefix, most=2000):
    got = 0
    for i in range(most):
        status, _rid = await sale.reserve('%s%d' % (prefix, i))
        if status == 'SOLD_OUT':
            return got
        assert status == 'RESERVED', status
        got += 1
    raise AssertionError('%s: no SOLD_OUT after %d reservations' % (prefix, most))


async def stale_object_after_replace(web, replace, fresh):
    """The sync test's reproduction (issue 14 finding 2), with an async
    long-lived object: it sells out a round; another process replaces the
    sale; the stale object sells again, then a fresh one."""
    await replace()
    assert await sell_out(web, 'a') == 300
    await replace()                                     # a new round elsewhere
    second = await sell_out(web, 'b')
    more = await sell_out(fresh(), 'c')
    assert web.stats['stale_round'] >= 1                # it noticed the new round and reloaded
    return second, more, await web.info(), await fresh().info()


async def test_stale_object_after_replace_plain_redis(redis_server):
    async with plain(redis_server) as r, plain(redis_server) as other:
        async def replace():
            await SplitSale(other, 'astale').create(300, parts=3, replace=True)
        second, more, stale_info, info = await stale_object_after_replace(
            SplitSale(r, 'astale'), replace, lambda: SplitSale(other, 'astale'))
    assert second + more == 300, (second, more)
    assert stale_info['round'] == info['round']
    assert stale_info['invariant'] == 'ok' and info['invariant'] == 'ok', info['problems']
    assert info['pending'] == 300 and info['remaining'] == 0


async def test_stale_object_after_replace_cluster(cluster):
    async with clustered(cluster) as c:
        sync = cluster.client()

        async def replace():                            # the other process is a sync client
            SyncSplitSale(sync, 'astale-c').create(300, parts=3, replace=True)
        second, more, stale_info, info = await stale_object_after_replace(
            SplitSale(c, 'astale-c'), replace, lambda: SplitSale(c, 'astale-c'))
        sync.close()
    assert second + more == 300, (second, more)
    assert stale_info['round'] == info['round']
    assert stale_info['invariant'] == 'ok' and info['invariant'] == 'ok', info['problems']
    assert info['pending'] == 300 and info['remaining'] == 0


async def test_interrupted_replace_gives_up_cleanly(redis_server, r):
    """As the sync test: a part left in another round makes reserve reload
    the layout once, then raise StaleRound, changing nothing; info() says
    broken; create(..., replace=True) ends it."""
    async with plain(redis_server) as ar:
        sale = SplitSale(ar, 'ahalf')
        await sale.create(6, parts=3)                   # pool 6, parts 0
        lay = await sale.layout()
        other = dataclasses.replace(lay, round='fedcba9876543210')
        p2 = lay.parts[2]
        r.execute_command('SECKILL.INIT', p2, 0, *other.split_args(p2), 'REPLACE')
        with pytest.raises(redis.ResponseError, match='^STALEROUND'):
            await ar.execute_command(*sp.recv_args(p2, lay.pool, 3, lay.round))
        user = users_homed(2, n=1, prefix='ahw')[0]
        before = r.execute_command('SECKILL.INFO', p2)
        with pytest.raises(StaleRound):
            await sale.reserve(user)
        assert r.execute_command('SECKILL.INFO', p2) == before
        assert sale.stats['stale_round'] >= 1
        info = await sale.info()
        assert info['invariant'] == 'broken' and any(p2 in x and 'round' in x for x in info['problems'])
        assert await sale.create(6, parts=3, replace=True) is True
        assert (await sale.reserve(user))[0] == 'RESERVED' and (await sale.info())['invariant'] == 'ok'
