"""The sync driver: executes the steps of seckill.plain.steps with a redis-py client
(redis.Redis, or redis.cluster.RedisCluster). Sale and SplitSale run every
operation through it; it holds what belongs to the connection rather than
to the protocol: the cluster's slot map, a plain server's replica count,
the locks of Locked steps."""

from __future__ import annotations

import threading
import time
from typing import Any, Callable, Dict, Hashable, List

from .. import backend as be
from ..plain import durability as dur
from ..plain import steps
from ..plain.split_protocol import key_slot

try:  # redis-py >= 4.1
    from redis.cluster import RedisCluster
except ImportError:  # pragma: no cover
    RedisCluster = ()  # type: ignore


class Driver:
    """Runs operations (generators of seckill.plain.steps steps) on `client`.
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

    def run(self, op: steps.Steps) -> Any:
        """Executes `op` step by step; returns its result or raises its error.
        A step's error is thrown into the operation where it yielded."""
        return steps.drive(op, lambda step: _DO[type(step)](self, step), BaseException)

    def _resolve(self, key: Any = None) -> str:
        if self.backend is None:
            scope = be.scope(self.r)
            found = getattr(scope, be.CACHE_ATTR, None)
            if found is None:
                found = steps.drive(be.detect(key), self._probe)
                setattr(scope, be.CACHE_ATTR, found)
            self.backend = found
        return self.backend

    def _probe(self, step: steps.Call) -> Any:
        # a cluster: one master answers the keyless module probe
        kw = ({'target_nodes': self.r.get_default_node()}
              if self.cluster and step.args == be.MODULE_PROBE else {})
        return self.r.execute_command(*step.args, **kw)

    def _library(self, commands: Any, send: Callable[[Any], List[Any]]) -> Any:
        """Replies (errors in place) to `commands` sent to the library with
        their keys (seckill.backend.batch): its lists through this client,
        the calls themselves with `send`. None on the module, and for
        commands none of which is SECKILL's (sent as they are)."""
        key = _first_key(commands)      # none: nothing to translate, no need to know
        if key is None or self._resolve(key) != be.FUNCTIONS:
            return None
        return steps.drive(be.batch(commands, be.keys_of(be.scope(self.r))),
                         lambda step: send(step.commands) if isinstance(step, be.Batch)
                         else self.r.execute_command(*step.args))

    def _each(self, commands: Any) -> List[Any]:
        out: List[Any] = []
        for c in commands:
            try:
                out.append(self.r.execute_command(*c))
            except Exception as exc:
                out.append(exc)
        return out

    def _call(self, step: steps.Call) -> Any:
        replies = self._library([step.args], self._each)
        if replies is None:
            return self.r.execute_command(*step.args)
        return _raised(replies)[0]

    def _pipelined(self, client: Any, commands: Any, raise_on_error: bool) -> List[Any]:
        pipe = (client.pipeline() if client is self.r and self.cluster
                else client.pipeline(transaction=False))
        for c in commands:
            pipe.execute_command(*c)
        return pipe.execute(raise_on_error=raise_on_error)

    def _round(self, step: steps.Round) -> List[Any]:
        if not step.commands:
            return []
        replies = self._library(step.commands, lambda c: self._pipelined(self.r, c, False))
        if replies is None:
            return self._pipelined(self.r, step.commands, True)
        return _raised(replies)

    def _on_node(self, step: steps.OnNode) -> List[Any]:
        client = (self.r.get_redis_connection(self.r.get_node_from_key(step.key))
                  if self.cluster else self.r)
        replies = self._library(step.commands, lambda c: self._pipelined(client, c, False))
        return self._pipelined(client, step.commands, False) if replies is None else replies

    def _sleep(self, step: steps.Sleep) -> None:
        time.sleep(step.seconds)

    def _refresh(self, step: steps.Refresh) -> None:
        if self.cluster:
            self.r.nodes_manager.initialize()
        if step.replicas:
            self._plain_replicas = None

    def _replicas(self, step: steps.Replicas) -> int:
        if self.cluster:
            nodes = self.r.nodes_manager.slots_cache.get(key_slot(step.key), [])
            return max(0, len(nodes) - 1)
        if self._plain_replicas is None:
            self._plain_replicas = int(self.r.info('replication').get('connected_slaves', 0))
        return self._plain_replicas

    def _replica_info(self, step: steps.ReplicaInfo) -> dur.ReplicaState:
        node, client = '', self.r
        if self.cluster:
            target = self.r.get_node_from_key(step.key)
            node, client = target.name, self.r.get_redis_connection(target)
        state = dur.memory_of(be.scope(self.r)).state(node)
        if step.fresh or state.stale():
            state.update(dur.online_replicas(client.info('replication')))
        return state

    def _masters(self, step: steps.Masters) -> Any:
        if not self.cluster:
            return None, []
        self.r.nodes_manager.initialize()
        cache = self.r.nodes_manager.slots_cache
        return (lambda slot: cache[slot][0].name), [n.name for n in self.r.get_primaries()]

    def _node_name(self, step: steps.NodeName) -> str:
        if self.cluster:
            return self.r.get_node_from_key(step.key).name
        return address(self.r)

    def _locked(self, step: steps.Locked) -> Any:
        with self._guard:
            lock = self._locks.setdefault(step.name, threading.Lock())
        with lock:
            return self.run(step.body)


def address(client: Any) -> str:
    """`host:port` of a plain (not cluster) client's server, as its pool
    names it: the node name a one-node sale's steps and wiring use (sync
    and asyncio clients alike)."""
    kw = client.connection_pool.connection_kwargs
    return '%s:%s' % (kw.get('host', 'localhost'), kw.get('port', 6379))


def _first_key(commands: Any) -> Any:
    """The sale key of the first SECKILL command, which the version probe
    is asked with (None: PROBE_KEY)."""
    return next((c[1] for c in commands if be.command(c) is not None), None)


def _raised(replies: List[Any]) -> List[Any]:
    """The replies, or the first error among them raised."""
    for r in replies:
        if isinstance(r, Exception):
            raise r
    return replies


_DO: Dict[type, Callable[[Driver, Any], Any]] = {
    steps.Call: Driver._call, steps.Round: Driver._round, steps.OnNode: Driver._on_node,
    steps.Sleep: Driver._sleep, steps.Refresh: Driver._refresh, steps.Replicas: Driver._replicas,
    steps.ReplicaInfo: Driver._replica_info,
    steps.Masters: Driver._masters, steps.NodeName: Driver._node_name, steps.Locked: Driver._locked}
