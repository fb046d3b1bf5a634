"""SplitSale on a real three-master Redis Cluster (redis-server processes
with the module, --cluster-enabled yes, slots by ADDSLOTSRANGE, MEET, replicas
by CLUSTER REPLICATE where a test needs them; every process stopped by pid).

Cases of issue 8: concurrent buyers sell exactly the total, LIMIT per user,
parts on distinct masters, the RESERVE share of the busiest node, the crash
points of a transfer, a lost debit the audit reports, a failover repaired by
a per-part RECONCILE, releases and expired holds sold to other parts' users.
"""

from __future__ import annotations

import collections
import random
import socket
import threading
import time

import pytest
import redis
from redis.cluster import RedisCluster

from seckill import SplitSale
from seckill import split_protocol as sp
from seckill.servers import RedisServer, module_path
from seckill.split import DriverStopped


def cluster_port() -> int:
    """A free port below 55535: a cluster node also listens on port + 10000."""
    rng = random.Random()
    while True:
        port = rng.randrange(20000, 55000)
        try:
            for q in (port, port + 10000):
                with socket.socket() as s:
                    s.bind(('127.0.0.1', q))
            return port
        except OSError:
            continue


def _wait(pred, timeout=20.0, what='condition'):
    deadline = time.monotonic() + timeout
    while True:
        try:
            v = pred()
            if v:
                return v
        except redis.RedisError:
            pass
        if time.monotonic() > deadline:
            raise AssertionError('timed out waiting for ' + what)
        time.sleep(0.05)


class Cluster:
    """N masters (slots split evenly), replicas on demand. Nodes are
    seckill.servers.RedisServer (own folder, stopped by pid)."""

    def __init__(self, masters: int = 3, module: str = None, node_timeout_ms: int = 2000):
        self.module = module or module_path()
        self.node_timeout_ms = node_timeout_ms
        self.nodes = []
        self.masters = []
        try:
            for i in range(masters):
                self.masters.append(self._node())
            per = 16384 // masters
            for i, n in enumerate(self.masters):
                hi = 16383 if i == masters - 1 else (i + 1) * per - 1
                n.client().execute_command('CLUSTER', 'ADDSLOTSRANGE', i * per, hi)
            first = self.masters[0].client()
            for n in self.masters[1:]:
                first.execute_command('CLUSTER', 'MEET', '127.0.0.1', n.port)
            self.wait_ok()
        except BaseException:
            self.stop()
            raise

    def _node(self) -> RedisServer:
        srv = RedisServer(module=self.module, port=cluster_port(), args=[
            '--cluster-enabled', 'yes', '--cluster-node-timeout', str(self.node_timeout_ms),
            '--cluster-replica-validity-factor', '0', '--cluster-require-full-coverage', 'no'])
        self.nodes.append(srv)
        return srv.start()

    def node_id(self, srv: RedisServer) -> str:
        return srv.client().execute_command('CLUSTER', 'MYID')

    def wait_ok(self, nodes=None) -> None:
        nodes = [n for n in (nodes or self.nodes) if n.alive()]
        for n in nodes:
            c = n.client()
            _wait(lambda: 'cluster_state:ok' in c.execute_command('CLUSTER', 'INFO')
                  and len([l for l in c.execute_command('CLUSTER', 'NODES').splitlines()
                           if 'fail' not in l.split()[2]]) >= len(nodes),
                  what='cluster_state:ok on %d' % n.port)

    def add_replica(self, master: RedisServer) -> RedisServer:
        srv = self._node()
        c = srv.client()
        c.execute_command('CLUSTER', 'MEET', '127.0.0.1', master.port)
        mid = self.node_id(master)
        _wait(lambda: mid in c.execute_command('CLUSTER', 'NODES'), what='replica meets master')
        _wait(lambda: c.execute_command('CLUSTER', 'REPLICATE', mid), what='CLUSTER REPLICATE')
        srv.wait_synced(20)
        self.wait_ok()
        return srv

    def client(self, **kw) -> RedisCluster:
        kw.setdefault('decode_responses', True)
        kw.setdefault('socket_timeout', 10)
        return RedisCluster(host='127.0.0.1', port=self.masters[0].port, **kw)

    def by_port(self, port: int) -> RedisServer:
        return next(n for n in self.nodes if n.port == int(port))

    def reserve_calls(self) -> dict:
        """cmdstat seckill.reserve calls per live master port."""
        out = {}
        for n in self.nodes:
            if not n.alive():
                continue
            c = n.client()
            if c.info('replication')['role'] != 'master':
                continue
            st = c.info('commandstats').get('cmdstat_seckill.reserve', {})
            out[n.port] = int(st.get('calls', 0))
        return out

    def stop(self) -> None:
        for n in self.nodes:
            n.stop()


def send_supported() -> bool:
    with RedisServer(module=module_path()) as srv:
        reply = srv.client().execute_command('COMMAND', 'INFO', 'SECKILL.SEND')
    if isinstance(reply, dict):
        return any(v for v in reply.values())
    return bool(reply and reply[0])


needs_send = pytest.mark.skipif(not send_supported(), reason='the built module has no SECKILL.SEND '
                                '(COMMAND INFO SECKILL.SEND is empty): rebuild target/release')


@pytest.fixture(scope='module')
def cluster():
    c = Cluster(3)
    yield c
    c.stop()


@pytest.fixture
def rc(cluster):
    c = cluster.client()
    yield c
    c.close()


_names = iter(range(10 ** 6))


def new_name(prefix='t'):
    return '%s%d' % (prefix, next(_names))


# ---------------------------------------------------------------- placement, no transfers

def test_create_places_parts_on_distinct_masters(rc):
    sale = SplitSale(rc, new_name())
    assert sale.create(30, stream=True) is True
    assert sale.create(30) is False                       # exists: nothing changes
    lay = sale.layout()
    nodes = [rc.get_node_from_key(k).name for k in lay.parts]
    assert len(lay.parts) == 3 and len(set(nodes)) == 3
    assert lay.streams == tuple(k + ':events' for k in lay.parts)
    assert sale.streams() == list(lay.streams)
    other = SplitSale(rc, sale.name)                      # any process opens it by name
    assert other.layout() == lay
    info = other.info()
    assert info['total'] == 30 and info['remaining'] == 30 and info['invariant'] == 'ok'
    assert [x['node'] for x in info['parts']] == nodes
    assert info['pool']['report']['total'] == 12 and info['in_flight'] == 0


def test_route_and_limit_exact_per_user(rc):
    sale = SplitSale(rc, new_name())
    sale.create(300, limit=2)
    for u in ('alice', 'bob', 'user:1'):
        assert sale.reserve(u)[0] == 'RESERVED'
        assert sale.reserve(u)[0] == 'RESERVED'
        status, rid = sale.reserve(u)
        assert status == 'LIMIT'
        key = sale.layout().parts[sp.route(u, 3)]
        assert rc.execute_command('SECKILL.INFO', key)  # the home part holds the user
    with pytest.raises(redis.ResponseError):               # QTY past LIMIT: the module's error
        sale.reserve('carol', qty=3)
    st, rid = sale.reserve('dave', reqid='order-1')
    assert (st, rid) == ('RESERVED', 'order-1')
    assert sale.reserve('dave', reqid='order-1') == ('DUPLICATE', 'order-1')
    assert sale.confirm('dave', 'order-1') == 'CONFIRMED'
    assert sale.release('dave', 'order-1') == 'CONFIRMED'
    assert sale.release('erin', 'nope') == 'NOT_FOUND'
    assert sale.get('dave', 'order-1')['state'] == 'confirmed'
    info = sale.info()
    assert info['pending'] == 6 and info['confirmed'] == 1 and info['invariant'] == 'ok'


def test_missing_sale(rc):
    sale = SplitSale(rc, new_name())
    assert sale.reserve('u') == ('NO_SALE', None)
    with pytest.raises(LookupError):
        sale.info()
