"""The two deployments the chaos runs kill masters in, each behind the
delay proxy (proxy.py): every node has a proxy port, every replica
replicates from its master's proxy port, and the addresses Redis,
Sentinel and the cluster announce are the proxy ports. So the links
replicas use are delayed whoever is master after any number of failovers.
The harness's own clients (buyers, workers, payments) do not pay the
delay: they map an announced proxy port back to the node's real port
(`real_port`), as if they sat next to the master.

- `SentinelSet`: one master, two replicas, three redis-sentinel
  (quorum 2). `master()` is what the sentinels answer
  (SENTINEL get-master-addr-by-name), polled every 50 ms.
- `ClusterSet`: three masters with one replica each (seckill.testing's
  Cluster, nodes announcing their proxy port), the cluster's own failover.

Every process is stopped by pid (RedisServer.stop, Popen.terminate/kill),
also when a start fails half way.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import threading
from typing import Any, Dict, List, Optional

import redis

from seckill import library
from seckill.testing import Cluster, RedisServer, free_port, wait_until

from proxy import DelayProxy

SERVICE = 'chaos'
SENTINEL = os.environ.get('REDIS_SENTINEL', '/usr/bin/redis-sentinel')


class Node:
    """A redis-server and its proxy port."""

    def __init__(self, srv: RedisServer, proxy_port: int):
        self.srv = srv
        self.proxy_port = proxy_port

    @property
    def port(self) -> int:
        return self.srv.port

    def client(self, **kw: Any) -> redis.Redis:
        kw.setdefault('socket_timeout', 2)
        kw.setdefault('socket_connect_timeout', 1)
        return self.srv.client(**kw)

    def role(self) -> str:
        c = self.client()
        try:
            return c.info('replication')['role']
        finally:
            c.close()

    def __repr__(self) -> str:
        return 'node:%d(proxy %d)' % (self.port, self.proxy_port)


def _install_library(node: Node) -> None:
    c = node.client(socket_timeout=10)
    try:
        library.install(c, force=True)
    finally:
        c.close()


class SentinelSet:
    """One master, two replicas, three sentinels; `backend` 'module' or
    'functions' (no module loaded, the library installed on the master and
    replicated)."""

    def __init__(self, backend: str, module: Optional[str], delay_ms: float,
                 down_after_ms: int = 1000, failover_timeout_ms: int = 10000):
        self.backend = backend
        self.module = module
        self.proxy = DelayProxy(delay_ms)
        self.nodes: List[Node] = []
        self.sentinels: List[subprocess.Popen] = []
        self.sentinel_ports: List[int] = []
        self.dirs: List[str] = []
        self.down_after_ms = down_after_ms
        self.failover_timeout_ms = failover_timeout_ms
        self._master: Optional[Node] = None
        self._clients: Dict[int, redis.Redis] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._poller: Optional[threading.Thread] = None
        self.epoch = 0
        """Counts master changes the poller saw (workers rebuild on a change)."""

    # -- start and stop ---------------------------------------------------
    def start(self) -> 'SentinelSet':
        try:
            for i in range(3):
                self._start_node(self.nodes[0] if i else None)
            for n in self.nodes[1:]:
                n.srv.wait_synced(20)
            if self.backend == 'functions':
                _install_library(self.nodes[0])
            for _ in range(3):
                self._start_sentinel(self.nodes[0])
            wait_until(lambda: all(self._sentinel_sees_all(p) for p in self.sentinel_ports),
                       30, 'sentinels to see 2 replicas and 2 other sentinels')
            self._master = self.nodes[0]
            self._poller = threading.Thread(target=self._poll, name='sentinel-poll', daemon=True)
            self._poller.start()
        except BaseException:
            self.stop()
            raise
        return self

    def _node_args(self, proxy_port: int, master: Optional[Node]) -> List[str]:
        args = ['--replica-announce-ip', '127.0.0.1', '--replica-announce-port', str(proxy_port),
                '--repl-ping-replica-period', '1', '--repl-timeout', '5']
        if master is not None:
            args += ['--replicaof', '127.0.0.1', str(master.proxy_port)]
        return args

    def _start_node(self, master: Optional[Node]) -> Node:
        pport = free_port()
        srv = RedisServer(module=self.module, load_module=self.backend == 'module',
                          args=self._node_args(pport, master))
        node = Node(srv, pport)
        self.nodes.append(node)
        self.proxy.add(pport, srv.port)
        srv.start()
        return node

    def _start_sentinel(self, master: Node) -> None:
        port = free_port()
        d = tempfile.mkdtemp(prefix='seckill-sentinel-')
        self.dirs.append(d)
        conf = os.path.join(d, 'sentinel.conf')
        with open(conf, 'w') as f:
            f.write('\n'.join([
                'port %d' % port, 'bind 127.0.0.1', 'daemonize no', 'dir %s' % d,
                'logfile %s' % os.path.join(d, 'sentinel.log'),
                'sentinel monitor %s 127.0.0.1 %d 2' % (SERVICE, master.proxy_port),
                'sentinel down-after-milliseconds %s %d' % (SERVICE, self.down_after_ms),
                'sentinel failover-timeout %s %d' % (SERVICE, self.failover_timeout_ms),
                'sentinel parallel-syncs %s 2' % SERVICE, '']))
        p = subprocess.Popen([SENTINEL, conf], stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL, start_new_session=True)
        self.sentinels.append(p)
        self.sentinel_ports.append(port)
        wait_until(lambda: self._sentinel(port).ping(), 10, 'sentinel on %d' % port)

    def _sentinel(self, port: int) -> redis.Redis:
        return redis.Redis(host='127.0.0.1', port=port, decode_responses=True,
                           socket_timeout=1, socket_connect_timeout=1)

    def _sentinel_sees_all(self, port: int) -> bool:
        s = self._sentinel(port)
        try:
            m = s.execute_command('SENTINEL', 'MASTER', SERVICE)
            m = dict(zip(m[::2], m[1::2])) if isinstance(m, list) else m
            return int(m['num-slaves']) == 2 and int(m['num-other-sentinels']) == 2
        finally:
            s.close()

    def stop(self) -> None:
        self._stop.set()
        if self._poller is not None:
            self._poller.join(5)
        for c in self._clients.values():
            c.close()
        for p in self.sentinels:
            if p.poll() is None:
                p.terminate()
        for p in self.sentinels:
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(10)
        for n in self.nodes:
            n.srv.stop()
        self.proxy.stop()
        for d in self.dirs:
            shutil.rmtree(d, ignore_errors=True)

    # -- who is master ------------------------------------------------------
    def _asked_master(self) -> Optional[Node]:
        """The master a majority of the sentinels name, once it says it is
        one: a sentinel that has not heard of a failover yet can name the
        killed node after it came back as an empty replica (on the library
        backend that replica answers FCALL with "Function not found")."""
        votes: Dict[int, int] = {}
        for port in self.sentinel_ports:
            s = self._sentinel(port)
            try:
                addr = s.execute_command('SENTINEL', 'GET-MASTER-ADDR-BY-NAME', SERVICE)
                if addr:
                    votes[int(addr[1])] = votes.get(int(addr[1]), 0) + 1
            except redis.RedisError:
                continue
            finally:
                s.close()
        for pport, n in votes.items():
            if n * 2 > len(self.sentinel_ports):
                node = self.by_proxy_port(pport)
                try:
                    return node if node.role() == 'master' else None
                except (redis.RedisError, OSError):
                    return None
        return None

    def _poll(self) -> None:
        while not self._stop.wait(0.05):
            node = self._asked_master()
            with self._lock:
                if node is not None and node is not self._master:
                    self._master = node
                    self.epoch += 1

    def by_proxy_port(self, pport: int) -> Node:
        return next(n for n in self.nodes if n.proxy_port == pport)

    def real_port(self, pport: int) -> int:
        return self.by_proxy_port(pport).port

    def master(self, key: str = '') -> Node:
        with self._lock:
            return self._master

    def client(self, key: str = '') -> redis.Redis:
        """A client of the master the sentinels name now (one per node)."""
        node = self.master(key)
        with self._lock:
            c = self._clients.get(node.port)
            if c is None:
                c = self._clients[node.port] = node.client()
            return c

    def replicas_of(self, master: Node) -> List[Node]:
        return [n for n in self.nodes if n is not master]

    # -- chaos --------------------------------------------------------------
    def wait_promoted(self, old: Node, key: str = '', timeout: float = 30.0) -> Node:
        """Until the sentinels name another master and it says it is one."""
        def promoted() -> Optional[Node]:
            node = self.master()
            return node if node is not old and node.role() == 'master' else None
        return wait_until(promoted, timeout, 'a replica of %r to be promoted' % old)

    def restart_as_replica(self, node: Node, master: Node, timeout: float = 30.0) -> None:
        """The killed node comes back empty (no persistence) as a replica of
        the new master, through the new master's proxy; until it synced."""
        node.srv.args = self._node_args(node.proxy_port, master)
        node.srv.start()
        node.srv.wait_synced(timeout)

    def healthy(self, timeout: float = 30.0) -> None:
        """Two replicas linked to the master, the sentinels agreeing."""
        m = self.master()
        wait_until(lambda: all(n.srv.alive() and n.role() == 'slave' for n in self.replicas_of(m)),
                   timeout, 'both replicas of %r' % m)
        for n in self.replicas_of(m):
            n.srv.wait_synced(timeout)
        wait_until(lambda: all(self._sentinel_sees_all(p) for p in self.sentinel_ports),
                   timeout, 'sentinels to list the restarted replica')


class ClusterSet:
    """Three masters, one replica each (seckill.testing.Cluster), every node
    announcing its proxy port (`cluster-announce-port`; the bus port stays
    direct), so CLUSTER REPLICATE and every failover's new link go through
    the proxy. One RedisCluster client that maps the announced ports back
    (`address_remap`) and follows the failovers itself."""

    def __init__(self, backend: str, module: Optional[str], delay_ms: float,
                 node_timeout_ms: int = 2000):
        self.backend = backend
        self.proxy = DelayProxy(delay_ms)
        self.nodes: List[Node] = []
        outer = self

        class ProxiedCluster(Cluster):
            def _node(self) -> RedisServer:
                return outer._start_node(self)

        self._module = module
        self.epoch = 0
        self._rc = None
        try:
            self.cluster = ProxiedCluster(3, module=module or 'unused', node_timeout_ms=node_timeout_ms)
        except BaseException:
            self._stop_nodes()
            raise
        try:
            for m in list(self.cluster.masters):
                self.cluster.add_replica(m)
        except BaseException:
            self.stop()
            raise

    def _start_node(self, cluster: Any) -> RedisServer:
        port, pport = free_port(cluster_bus=True), free_port()
        srv = RedisServer(module=self._module, load_module=self.backend == 'module', port=port,
                          args=['--cluster-enabled', 'yes',
                                '--cluster-node-timeout', str(cluster.node_timeout_ms),
                                '--cluster-replica-validity-factor', '0',
                                '--cluster-require-full-coverage', 'no',
                                '--cluster-announce-ip', '127.0.0.1',
                                '--cluster-announce-port', str(pport),
                                '--cluster-announce-bus-port', str(port + 10000),
                                '--repl-ping-replica-period', '1', '--repl-timeout', '5'])
        cluster.nodes.append(srv)
        node = Node(srv, pport)
        self.nodes.append(node)
        self.proxy.add(pport, port)
        srv.start()
        if self.backend == 'functions':
            _install_library(node)
        return srv

    def _stop_nodes(self) -> None:
        for n in self.nodes:
            n.srv.stop()
        self.proxy.stop()

    def stop(self) -> None:
        if self._rc is not None:
            self._rc.close()
        self._stop_nodes()

    def by_proxy_port(self, pport: int) -> Node:
        return next(n for n in self.nodes if n.proxy_port == pport)

    def real_port(self, pport: int) -> int:
        return self.by_proxy_port(pport).port

    def _remap(self, addr):
        host, port = addr
        try:
            return host, self.real_port(int(port))
        except StopIteration:
            return host, port

    def client(self, key: str = ''):
        if self._rc is None:
            from redis.cluster import RedisCluster
            first = next(n for n in self.nodes if n.srv.alive())
            self._rc = RedisCluster(host='127.0.0.1', port=first.port, decode_responses=True,
                                    socket_timeout=2, socket_connect_timeout=1,
                                    address_remap=self._remap)
        return self._rc

    def master(self, key: str) -> Node:
        """The node serving `key`'s slot, by CLUSTER SLOTS of a live node."""
        from seckill import split_protocol as sp
        slot = sp.key_slot(key)
        for n in self.nodes:
            if not n.srv.alive():
                continue
            c = n.client()
            try:
                for lo, hi, owner, *_ in c.execute_command('CLUSTER', 'SLOTS'):
                    if lo <= slot <= hi:
                        node = self.by_proxy_port(int(owner[1]))
                        if node.srv.alive() and node.role() == 'master':
                            return node
            except redis.RedisError:
                continue
            finally:
                c.close()
        raise LookupError('no live master serves %r' % key)

    def wait_promoted(self, old: Node, key: str, timeout: float = 30.0) -> Node:
        def promoted() -> Optional[Node]:
            try:
                node = self.master(key)
            except LookupError:          # the slot's master failed, no replica took over yet
                return None
            return node if node is not old else None
        return wait_until(promoted, timeout, 'the replica of %r to take over' % old)

    def restart_as_replica(self, node: Node, master: Node, timeout: float = 30.0) -> None:
        """The killed node restarts with its nodes.conf and no data: the
        cluster makes it a replica of the node that took its slots."""
        node.srv.start()
        wait_until(lambda: node.role() == 'slave', timeout, '%r to rejoin as a replica' % node)
        node.srv.wait_synced(timeout)

    def healthy(self, timeout: float = 30.0) -> None:
        self.cluster.wait_ok()
        masters = [n for n in self.nodes if n.srv.alive() and n.role() == 'master']
        wait_until(lambda: len(masters) == 3 and all(
            int(n.client().info('replication')['connected_slaves']) == 1 for n in masters),
            timeout, 'three masters with one replica each')
