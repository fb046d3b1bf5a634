"""A Redis Cluster of redis-server processes with the module, for the
tests (and bench/cluster.py, which imports it through test_split_cluster):
--cluster-enabled yes, slots by ADDSLOTSRANGE, MEET, replicas by CLUSTER
REPLICATE on demand; every process stopped by pid."""

from __future__ import annotations

import time

import redis
from redis.cluster import RedisCluster

from seckill import split_protocol as sp
from seckill._servers import RedisServer, free_port, module_path


def wait_until(pred, timeout=20.0, what='condition'):
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
    seckill._servers.RedisServer (own folder, stopped by pid)."""

    def __init__(self, masters: int = 3, module: str = None, node_timeout_ms: int = 2000):
        self.module = module or module_path()
        self.node_timeout_ms = node_timeout_ms
        self.nodes = []
        self.masters = []
        try:
            for _ in range(masters):
                self.masters.append(self._node())
            per = 16384 // masters
            self.ranges = {}
            for i, n in enumerate(self.masters):
                hi = 16383 if i == masters - 1 else (i + 1) * per - 1
                n.client().execute_command('CLUSTER', 'ADDSLOTSRANGE', i * per, hi)
                self.ranges[n.port] = (i * per, hi)
            first = self.masters[0].client()
            for n in self.masters[1:]:
                first.execute_command('CLUSTER', 'MEET', '127.0.0.1', n.port)
            self.wait_ok()
        except BaseException:
            self.stop()
            raise

    def _node(self) -> RedisServer:
        srv = RedisServer(module=self.module, port=free_port(cluster_bus=True), args=[
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

            def ok(c=c) -> bool:
                return 'cluster_state:ok' in c.execute_command('CLUSTER', 'INFO') and len(
                    [line for line in c.execute_command('CLUSTER', 'NODES').splitlines()
                     if 'fail' not in line.split()[2]]) >= len(nodes)
            wait_until(ok, what='cluster_state:ok on %d' % n.port)

    def add_replica(self, master: RedisServer) -> RedisServer:
        srv = self._node()
        c = srv.client()
        c.execute_command('CLUSTER', 'MEET', '127.0.0.1', master.port)
        mid = self.node_id(master)
        wait_until(lambda: mid in c.execute_command('CLUSTER', 'NODES'), what='replica meets master')
        wait_until(lambda: c.execute_command('CLUSTER', 'REPLICATE', mid), what='CLUSTER REPLICATE')
        srv.wait_synced(20)
        self.wait_ok()
        # CLUSTER SLOTS (what clients see) lists a replica once its offset is
        # not 0: one write on the master, then every master lists it.
        lo, hi = self.ranges[master.port]
        bump = next(k for k in ('bump%d' % i for i in range(100000)) if lo <= sp.key_slot(k) <= hi)
        master.client().set(bump, 1)
        me = self.node_id(srv)
        for m in self.masters:
            mc = m.client()
            wait_until(lambda mc=mc: any(me in str(r) for r in mc.execute_command('CLUSTER', 'SLOTS')),
                       what='replica in CLUSTER SLOTS of %d' % m.port)
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
