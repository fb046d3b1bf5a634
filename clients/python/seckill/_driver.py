"""The sync driver: executes the steps of seckill._io with a redis-py client
(redis.Redis, or redis.cluster.RedisCluster). Sale and SplitSale run every
operation through it; it holds what belongs to the connection rather than
to the protocol: the cluster's slot map, a plain server's replica count,
the locks of Locked steps."""

from __future__ import annotations

import threading
import time
from typing import Any, Callable, Dict, Hashable, List

from . import _io
from . import backend as be
from . import durability as dur
from .split_protocol import key_slot

try:  # redis-py >= 4.1
    from redis.cluster import RedisCluster
except ImportError:  # pragma: no cover
    RedisCluster = ()  # type: ignore


class Driver:
    """Runs operations (generators of seckill._io steps) on `client`.
    Thread-safe as redis-py's clients are: many threads may run operations
    on one driver at once."""

    def __init__(self, client: Any, backend: Any = None):
        self.r = client
        self.cluster = bool(RedisCluster) and isinstance(client, RedisCluster)
        self.backend = be.check(backend)
        """'module' or 'functions'; None until the first command asks the
        server (once per connection pool: seckill.backend.detect)."""
        self._plain_replicas = None
        self._locks: Dict[Hashable, threading.Lock] = {}
        self._guard = threading.Lock()

    def run(self, op: _io.Steps) -> Any:
        """Executes `op` step by step; returns its result or raises its error.
        A step's error is thrown into the operation where it yielded."""
        value: Any = None
        error: Any = None
        while True:
            done, step = _io.advance(op, value, error)
            if done:
                return step
            value = error = None
            try:
                value = _DO[type(step)](self, step)
            except BaseException as exc:   # thrown into the operation, which may handle it
                error = exc

    def _resolve(self) -> str:
        if self.backend is None:
            scope = be.scope(self.r)
            found = getattr(scope, be.CACHE_ATTR, None)
            if found is None:
                op, value, error = be.detect(), None, None
                while True:
                    done, step = _io.advance(op, value, error)
                    if done:
                        found = step
                        break
                    value = error = None
                    # a cluster: one master answers (these commands have no key)
                    kw = {'target_nodes': self.r.get_default_node()} if self.cluster else {}
                    try:
                        value = self.r.execute_command(*step.args, **kw)
                    except Exception as exc:
                        error = exc
                setattr(scope, be.CACHE_ATTR, found)
            self.backend = found
        return self.backend

    def _cmds(self, commands: Any) -> Any:
        if self._resolve() == be.FUNCTIONS:
            return [be.to_functions(c) for c in commands]
        return commands

    def _call(self, step: _io.Call) -> Any:
        return self.r.execute_command(*self._cmds([step.args])[0])

    def _round(self, step: _io.Round) -> List[Any]:
        if not step.commands:
            return []
        pipe = self.r.pipeline() if self.cluster else self.r.pipeline(transaction=False)
        for c in self._cmds(step.commands):
            pipe.execute_command(*c)
        return pipe.execute()

    def _on_node(self, step: _io.OnNode) -> List[Any]:
        client = (self.r.get_redis_connection(self.r.get_node_from_key(step.key))
                  if self.cluster else self.r)
        pipe = client.pipeline(transaction=False)
        for c in self._cmds(step.commands):
            pipe.execute_command(*c)
        return pipe.execute(raise_on_error=False)

    def _sleep(self, step: _io.Sleep) -> None:
        time.sleep(step.seconds)

    def _refresh(self, step: _io.Refresh) -> None:
        if self.cluster:
            self.r.nodes_manager.initialize()
        if step.replicas:
            self._plain_replicas = None

    def _replicas(self, step: _io.Replicas) -> int:
        if self.cluster:
            nodes = self.r.nodes_manager.slots_cache.get(key_slot(step.key), [])
            return max(0, len(nodes) - 1)
        if self._plain_replicas is None:
            self._plain_replicas = int(self.r.info('replication').get('connected_slaves', 0))
        return self._plain_replicas

    def _replica_info(self, step: _io.ReplicaInfo) -> dur.ReplicaState:
        node, client = '', self.r
        if self.cluster:
            target = self.r.get_node_from_key(step.key)
            node, client = target.name, self.r.get_redis_connection(target)
        state = dur.memory_of(be.scope(self.r)).state(node)
        if step.fresh or state.stale():
            state.update(dur.online_replicas(client.info('replication')))
        return state

    def _masters(self, step: _io.Masters) -> Any:
        if not self.cluster:
            return None, []
        self.r.nodes_manager.initialize()
        cache = self.r.nodes_manager.slots_cache
        return (lambda slot: cache[slot][0].name), [n.name for n in self.r.get_primaries()]

    def _node_name(self, step: _io.NodeName) -> str:
        if self.cluster:
            return self.r.get_node_from_key(step.key).name
        kw = self.r.connection_pool.connection_kwargs
        return '%s:%s' % (kw.get('host', 'localhost'), kw.get('port', 6379))

    def _locked(self, step: _io.Locked) -> Any:
        with self._guard:
            lock = self._locks.setdefault(step.name, threading.Lock())
        with lock:
            return self.run(step.body)


_DO: Dict[type, Callable[[Driver, Any], Any]] = {
    _io.Call: Driver._call, _io.Round: Driver._round, _io.OnNode: Driver._on_node,
    _io.Sleep: Driver._sleep, _io.Refresh: Driver._refresh, _io.Replicas: Driver._replicas,
    _io.ReplicaInfo: Driver._replica_info,
    _io.Masters: Driver._masters, _io.NodeName: Driver._node_name, _io.Locked: Driver._locked}
