"""The async driver: executes the steps of seckill.plain.steps with a redis.asyncio
client (redis.asyncio.Redis, or redis.asyncio.cluster.RedisCluster). The
same steps the sync driver runs, awaited; Locked steps take asyncio locks."""

from __future__ import annotations

import asyncio
from typing import Any, Awaitable, Callable, Dict, Hashable, List

from .. import backend as be
from ..plain import durability as dur
from ..plain import steps
from ..plain.split_protocol import key_slot
from .sync import _first_key, _raised, address

try:  # redis-py >= 4.3
    from redis.asyncio.cluster import PipelineCommand
    from redis.asyncio.cluster import RedisCluster as AsyncRedisCluster
except ImportError:  # pragma: no cover
    AsyncRedisCluster = ()  # type: ignore
    PipelineCommand = None  # type: ignore


async def _drive(op: steps.Steps, do: Callable[[Any], Awaitable[Any]], catch: Any = Exception) -> Any:
    """seckill.plain.steps.drive, awaited."""
    value: Any = None
    error: Any = None
    while True:
        done, step = steps.advance(op, value, error)
        if done:
            return step
        value = error = None
        try:
            value = await do(step)
        except catch as exc:   # thrown into the operation, which may handle it
            error = exc


class AsyncDriver:
    """Runs operations (generators of seckill.plain.steps steps) on `client`; many
    tasks may run operations on one driver at once."""

    def __init__(self, client: Any, backend: Any = None):
        self.r = client
        self.cluster = bool(AsyncRedisCluster) and isinstance(client, AsyncRedisCluster)
        self.backend = be.check(backend)
        self._plain_replicas = None
        self._locks: Dict[Hashable, asyncio.Lock] = {}
        self._ready = not self.cluster

    async def run(self, op: steps.Steps) -> Any:
        """Executes `op` step by step; returns its result or raises its error.
        A step's error (a cancellation included) is thrown into the
        operation where it yielded."""
        if not self._ready:
            # redis.asyncio's RedisCluster reads its slot map lazily, and
            # commands sent concurrently before it has are misrouted (seen
            # with redis-py 8.1: AttributeError on a half-made connection).
            # Every task waits for the one initialization first.
            await self.r.initialize()
            self._ready = True
        return await _drive(op, lambda step: _DO[type(step)](self, step), BaseException)

    async def _resolve(self, key: Any = None) -> str:
        if self.backend is None:
            scope = be.scope(self.r)
            found = getattr(scope, be.CACHE_ATTR, None)
            if found is None:
                found = await _drive(be.detect(key), self._probe)
                setattr(scope, be.CACHE_ATTR, found)
            self.backend = found
        return self.backend

    async def _probe(self, step: steps.Call) -> Any:
        # a cluster: one master answers the keyless module probe
        kw = ({'target_nodes': self.r.get_default_node()}
              if self.cluster and step.args == be.MODULE_PROBE else {})
        return await self.r.execute_command(*step.args, **kw)

    async def _library(self, commands: Any,
                       send: Callable[[Any], Awaitable[List[Any]]]) -> Any:
        """Replies (errors in place) to `commands` sent to the library with
        their keys (seckill.backend.batch): its lists through this client,
        the calls themselves with `send`. None on the module, and for
        commands none of which is SECKILL's (sent as they are)."""
        key = _first_key(commands)      # none: nothing to translate, no need to know
        if key is None or await self._resolve(key) != be.FUNCTIONS:
            return None

        async def do(step: Any) -> Any:
            if isinstance(step, be.Batch):
                return await send(step.commands)
            return await self.r.execute_command(*step.args)
        return await _drive(be.batch(commands, be.keys_of(be.scope(self.r))), do)

    async def _each(self, commands: Any) -> List[Any]:
        out: List[Any] = []
        for c in commands:
            try:
                out.append(await self.r.execute_command(*c))
            except Exception as exc:
                out.append(exc)
        return out

    async def _call(self, step: steps.Call) -> Any:
        replies = await self._library([step.args], self._each)
        if replies is None:
            return await self.r.execute_command(*step.args)
        return _raised(replies)[0]

    async def _pipelined(self, commands: Any, raise_on_error: bool) -> List[Any]:
        pipe = self.r.pipeline() if self.cluster else self.r.pipeline(transaction=False)
        for c in commands:
            pipe.execute_command(*c)
        return await pipe.execute(raise_on_error=raise_on_error)

    async def _round(self, step: steps.Round) -> List[Any]:
        if not step.commands:
            return []
        replies = await self._library(step.commands, lambda c: self._pipelined(c, False))
        if replies is None:
            return await self._pipelined(step.commands, True)
        return _raised(replies)

    async def _on_node(self, step: steps.OnNode) -> List[Any]:
        async def send(cmds: Any) -> List[Any]:
            if not self.cluster:
                return await self._pipelined(cmds, False)
            # One connection to the key's master for all the commands (SEND and
            # its WAIT), as redis.asyncio's cluster pipeline does per node.
            commands = [PipelineCommand(i, *c) for i, c in enumerate(cmds)]
            await self.r.get_node_from_key(step.key).execute_pipeline(commands)
            return [c.result for c in commands]
        replies = await self._library(step.commands, send)
        return await send(step.commands) if replies is None else replies

    async def _sleep(self, step: steps.Sleep) -> None:
        await asyncio.sleep(step.seconds)

    async def _refresh(self, step: steps.Refresh) -> None:
        if self.cluster:
            await self.r.nodes_manager.initialize()
        if step.replicas:
            self._plain_replicas = None

    async def _replicas(self, step: steps.Replicas) -> int:
        if self.cluster:
            nodes = self.r.nodes_manager.slots_cache.get(key_slot(step.key), [])
            return max(0, len(nodes) - 1)
        if self._plain_replicas is None:
            info = await self.r.info('replication')
            self._plain_replicas = int(info.get('connected_slaves', 0))
        return self._plain_replicas

    async def _replica_info(self, step: steps.ReplicaInfo) -> dur.ReplicaState:
        node = ''
        if self.cluster:
            target = self.r.get_node_from_key(step.key)
            node = target.name
        state = dur.memory_of(be.scope(self.r)).state(node)
        if step.fresh or state.stale():
            if self.cluster:
                info = await self.r.info('replication', target_nodes=target)
            else:
                info = await self.r.info('replication')
            state.update(dur.online_replicas(info))
        return state

    async def _masters(self, step: steps.Masters) -> Any:
        if not self.cluster:
            return None, []
        await self.r.nodes_manager.initialize()
        cache = self.r.nodes_manager.slots_cache
        return (lambda slot: cache[slot][0].name), [n.name for n in self.r.get_primaries()]

    async def _node_name(self, step: steps.NodeName) -> str:
        if self.cluster:
            return self.r.get_node_from_key(step.key).name
        return address(self.r)

    async def _locked(self, step: steps.Locked) -> Any:
        lock = self._locks.get(step.name)
        if lock is None:
            lock = self._locks[step.name] = asyncio.Lock()
        async with lock:
            return await self.run(step.body)


_DO: Dict[type, Callable[[AsyncDriver, Any], Awaitable[Any]]] = {
    steps.Call: AsyncDriver._call, steps.Round: AsyncDriver._round,
    steps.OnNode: AsyncDriver._on_node, steps.Sleep: AsyncDriver._sleep,
    steps.Refresh: AsyncDriver._refresh, steps.Replicas: AsyncDriver._replicas,
    steps.ReplicaInfo: AsyncDriver._replica_info,
    steps.Masters: AsyncDriver._masters, steps.NodeName: AsyncDriver._node_name,
    steps.Locked: AsyncDriver._locked}
