"""A Redis Cluster of throwaway redis-server processes, for the tests and
the benches (bench/cluster.py, bench/soldout.py): --cluster-enabled yes,
slots by ADDSLOTSRANGE, MEET, replicas by CLUSTER REPLICATE on demand;
every process stopped by pid. The nodes serve the module, or with
backend='functions' run without it and get the Functions library."""

from __future__ import annotations

import time

import redis
from redis.cluster import RedisCluster

from ..plain import split_protocol as sp
from .servers import RedisServer, free_port, install_library, module_path


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
    RedisServer (own folder, stopped by pid). `backend`: 'module' (nodes
    load `module`, by default the built one) or 'functions' (no module; the
    library is loaded into each node as it starts, and a replica added
    later gets it from its master too)."""

    def __init__(self, masters: int = 3, module: str = None, node_timeout_ms: int = 2000,
                 backend: str = 'module'):
        self.backend = backend
        self.module = None if backend == 'functions' else module or module_path()
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
        srv = RedisServer(module=self.module, load_module=self.module is not None,
                          port=free_port(cluster_bus=True), args=[
                              '--cluster-enabled', 'yes', '--cluster-node-timeout', str(self.node_timeout_ms),
                              '--cluster-replica-validity-factor', '0', '--cluster-require-full-coverage', 'no'])
        self.nodes.append(srv)
        srv.start()
        if self.module is None:
            install_library(srv)
        return srv

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
        """Per live master port: the module's cmdstat seckill.reserve calls;
        on the library, the FCALL calls (its functions share that one
        counter: RESERVE, and the transfers' SEND and RECV; INFO and GET
        are FCALL_RO)."""
        stat = 'cmdstat_fcall' if self.module is None else 'cmdstat_seckill.reserve'
        out = {}
        for n in self.nodes:
            if not n.alive():
                continue
            c = n.client()
            try:
                if c.info('replication')['role'] == 'master':
                    out[n.port] = int(c.info('commandstats').get(stat, {}).get('calls', 0))
            finally:
                c.close()
        return out

    def stop(self) -> None:
        for n in self.nodes:
            n.stop()
