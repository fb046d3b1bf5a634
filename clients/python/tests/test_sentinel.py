"""Sentinel end to end: one master, one replica, three redis-sentinel with
down-after-milliseconds 500. The client of a `redis+sentinel://` URL
(seckill.connect) follows the failover: after `kill -9` of the master it
sells on the promoted replica, and the CLI does too. A master that was
only frozen (SIGSTOP) and comes back after the switch (a split brain until
the Sentinels demote it) gets no command from the client any more. The
order store is a SQLite file only: what is under test is the client's
routing, and each run costs a failover."""

import json
import signal
import subprocess
import sys
import time

import pytest

from conftest import DB, KEY, fence_supported, make_sale, wait_for
from seckill import Sale
from seckill.connect import close_follower, connect
from seckill.testing import RedisServer, SentinelServer

SERVICE = 'shop'


@pytest.fixture
def db(tmp_path):
    d = DB('sqlite', 'sqlite://%s' % (tmp_path / 'orders.db'))
    yield d
    d.close()


@pytest.fixture
def deployment(module):
    master = RedisServer(module=module).start()
    replica = RedisServer(module=module, replicaof=master).start()
    replica.wait_synced()
    master.wait_replicas(1)
    sentinels = []
    try:
        sentinels = [SentinelServer(master, SERVICE, down_after_ms=500,
                                    failover_timeout_ms=2000).start() for _ in range(3)]
        # every Sentinel knows the replica and the others before the test
        wait_for(lambda: all(_known(s) for s in sentinels), timeout=15,
                 what='sentinels discovering the replica and each other')
        yield master, replica, sentinels
    finally:
        for s in (master, replica):
            if s.alive():
                s.proc.send_signal(signal.SIGCONT)
        for s in [*sentinels, replica, master]:
            s.stop()


def _known(sentinel):
    c = sentinel.client()
    try:
        m = c.sentinel_master(SERVICE)
        return int(m['num-other-sentinels']) == 2 and int(m['num-slaves']) == 1
    finally:
        c.close()


def url(sentinels):
    return 'redis+sentinel://%s/%s' % (','.join('127.0.0.1:%d' % s.port for s in sentinels),
                                       SERVICE)


def reserve_calls(srv):
    c = srv.client()
    try:
        return int(c.info('commandstats').get('cmdstat_seckill.reserve', {}).get('calls', 0))
    finally:
        c.close()


def test_client_and_cli_follow_a_kill_9_failover(db, deployment, tmp_path):
    master, replica, sentinels = deployment
    r = connect(url(sentinels))
    try:
        store = db.store()
        make_sale(store, r, total=20, hold_ms=60_000)
        sale = Sale(r, KEY)
        assert sale.reserve('u0', reqid='o0', wait=True).replicated is True
        master.kill()
        # bounded: detection (500 ms) + election + promotion
        deadline = time.monotonic() + 20
        while True:
            try:
                res = sale.reserve('u1', reqid='o1')
                break
            except Exception:
                assert time.monotonic() < deadline, 'no failover within 20 s'
                time.sleep(0.1)
        assert res.status == ('FENCED' if fence_supported(r) else 'RESERVED')
        assert r.connection_pool.master_address == ('127.0.0.1', replica.port)
        # the CLI follows the same URL: init says the sale exists, reconcile finds o0
        base = [sys.executable, '-m', 'seckill', '--db', db.url, '--sentinel',
                '127.0.0.1:%d' % sentinels[0].port, '--service', SERVICE]
        out = subprocess.run(base + ['reconcile', '--sale', KEY, '--json', '--apply'],
                             capture_output=True, text=True, timeout=60)
        assert out.returncode == 0, out.stderr
        outcome = json.loads(out.stdout.splitlines()[-1])
        assert outcome['report']['pending'] >= 1
        if res.status == 'FENCED':        # the promoted master fenced the sale; the CLI lifted it
            assert outcome['unfence'] == 'UNFENCED'
            assert sale.reserve('u1', reqid='o1').status == 'RESERVED'
        assert r.connection_pool.master_address == ('127.0.0.1', replica.port)
    finally:
        close_follower(r)
        r.close()


def test_frozen_old_master_gets_nothing_after_the_switch(db, deployment):
    master, replica, sentinels = deployment
    r = connect(url(sentinels), poll_s=0.2)
    try:
        store = db.store()
        make_sale(store, r, total=50, hold_ms=60_000)
        sale = Sale(r, KEY)
        for i in range(3):                    # pooled connections to the master
            assert sale.reserve('u%d' % i, reqid='o%d' % i).ok
        master.proc.send_signal(signal.SIGSTOP)
        follower = r._seckill_follower
        wait_for(lambda: follower.switches >= 1, timeout=20, what='the switch to the replica')
        before = reserve_calls_after_cont(master)
        for i in range(3, 13):
            assert sale.reserve('u%d' % i, reqid='o%d' % i).status in ('RESERVED', 'FENCED')
        assert reserve_calls(master) == before       # not one RESERVE reached the old master
        assert r.connection_pool.master_address == ('127.0.0.1', replica.port)
    finally:
        close_follower(r)
        r.close()


def reserve_calls_after_cont(master):
    """The old master runs again (as a master until the Sentinels demote
    it): its RESERVE count now."""
    master.proc.send_signal(signal.SIGCONT)
    return reserve_calls(master)


@pytest.mark.asyncio
async def test_aio_client_follows_a_kill_9_failover(deployment):
    import asyncio
    from seckill.aio import Sale as AioSale
    from seckill.aio.connect import close_follower as aclose_follower
    from seckill.aio.connect import connect as aconnect
    master, replica, sentinels = deployment
    r = await aconnect(url(sentinels), poll_s=0.2)
    try:
        sale = AioSale(r, KEY)
        await sale.init(10, hold_ms=60_000)
        assert (await sale.reserve('u0', reqid='o0', wait=True)).replicated is True
        master.kill()
        deadline = time.monotonic() + 20
        while True:
            try:
                res = await sale.reserve('u1', reqid='o1')
                break
            except Exception:
                assert time.monotonic() < deadline, 'no failover within 20 s'
                await asyncio.sleep(0.1)
        assert res.status == 'RESERVED'         # a sale without FENCE sells on at once
        assert r.connection_pool.master_address == ('127.0.0.1', replica.port)
    finally:
        aclose_follower(r)
        await r.aclose()
