"""The pub/sub wiring of the local sold-out flag for redis.asyncio: the sync
wiring's (seckill.drivers.soldout) subscriptions, one asyncio task per node
instead of a thread. The same channels, the same bookkeeping
(NodeSubscriptions), the same dispatch to the cache and the same
verification read of a sold-out hint (awaited by the node's task)."""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any, Dict, Iterable, Optional

from ..ops import sale as ops
from ..plain import soldout as so
from ..plain.steps import scope
from .aio import AsyncDriver
from .soldout import (BACKOFF_S, POLL_S, REROUTE_S, NodeSubscriptions, Routes, config_flags, dispatch,
                      report_verification)

try:  # redis-py >= 4.3
    from redis.asyncio.cluster import RedisCluster as AsyncRedisCluster
except ImportError:  # pragma: no cover
    AsyncRedisCluster = ()  # type: ignore

log = logging.getLogger('seckill.soldout')


class _Listener:
    """One node's subscriptions, read by one task (the only one touching
    its PubSub)."""

    def __init__(self, watcher: 'AsyncWatcher', name: str, node: Any):
        self.w = watcher
        self.node_name = name
        self.node = node
        self.subs = NodeSubscriptions(watcher.db)
        self.task: Optional[asyncio.Task] = None

    def _pubsub(self) -> Any:
        if self.w.cluster:
            return self.w.client.pubsub(node=self.node)
        return self.w.client.pubsub()

    async def _config(self) -> Optional[str]:
        try:
            kw = {'target_nodes': self.node} if self.w.cluster else {}
            return config_flags(await self.w.client.execute_command(
                'CONFIG', 'GET', 'notify-keyspace-events', **kw))
        except Exception:        # CONFIG refused (ACL, a managed service): unknown
            return None

    async def run(self) -> None:
        cache = self.w.cache
        ps = None
        failures = 0
        last_route = time.monotonic()
        try:
            while True:
                try:
                    if ps is None:
                        ps = self._pubsub()
                        await ps.subscribe(*(so.keyevent_channels(self.subs.db) + self.subs.reset()))
                        self.w.note_config(self.node_name, await self._config())
                    sub, unsub = self.subs.take()
                    if sub:
                        await ps.subscribe(*sub)
                    if unsub:
                        await ps.unsubscribe(*unsub)
                    due = dispatch(cache, await ps.get_message(timeout=POLL_S), self.subs.keys)
                    if due is not None:
                        await self.w.verify(*due)
                    failures = 0
                except asyncio.CancelledError:
                    raise
                except Exception as exc:
                    log.debug('seckill sold-out listener on %s: %r', self.node_name, exc)
                    for k in list(self.subs.keys):
                        cache.lost(k)
                    await _close(ps)
                    ps = None
                    await asyncio.sleep(BACKOFF_S[min(failures, len(BACKOFF_S) - 1)])
                    failures += 1
                if self.w.cluster and time.monotonic() - last_route > REROUTE_S:
                    last_route = time.monotonic()
                    self.w.reroute()
        finally:
            await _close(ps)


async def _close(ps: Any) -> None:
    if ps is not None:
        try:
            closer = getattr(ps, 'aclose', None) or ps.close
            await closer()
        except Exception:
            pass


class AsyncWatcher(Routes):
    """seckill.drivers.soldout.Watcher for redis.asyncio clients. watch()
    must be called with the client's event loop running (the aio Sale and
    SplitSale call it from their first awaited call)."""

    def __init__(self, client: Any, cache: so.SoldOutCache):
        super().__init__(client, cache, bool(AsyncRedisCluster) and isinstance(client, AsyncRedisCluster))
        self._loop: Optional[asyncio.AbstractEventLoop] = None
        self._driver = AsyncDriver(client)

    async def verify(self, key: str, token: int) -> None:
        """Watcher.verify, awaited by the node's listener task."""
        report, error = None, None
        try:
            report = await self._driver.run(ops.info(key))
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            error = exc
        report_verification(self.cache, key, token, report, error)

    def _listener(self, name: str, node: Any) -> _Listener:
        lis = self._listeners.get(name)
        if lis is None:
            lis = self._listeners[name] = _Listener(self, name, node)
            lis.task = asyncio.get_running_loop().create_task(lis.run())
        return lis

    def watch(self, keys: Iterable[str]) -> None:
        if self._closed:
            return
        loop = asyncio.get_running_loop()
        if self._loop is not loop:        # a new loop: the old one's tasks are gone
            self.close()
            self._closed = False
            self._loop = loop
        self._add(keys)

    def unwatch(self, keys: Iterable[str]) -> None:
        self._drop(keys)

    def reroute(self) -> None:
        self._reroute()

    def subscribed(self) -> Dict[str, set]:
        return self._subscribed()

    def close(self) -> None:
        """Cancels the listener tasks (their PubSubs close as they end)."""
        self._closed = True
        for lis in self._listeners.values():
            if lis.task is not None and not lis.task.done():
                try:
                    lis.task.cancel()
                except RuntimeError:       # its loop is closed
                    pass
        self._listeners.clear()
        self._where.clear()

    async def aclose(self) -> None:
        tasks = [lis.task for lis in self._listeners.values() if lis.task is not None]
        self.close()
        for t in tasks:
            try:
                await t
            except BaseException:
                pass


def watcher(cache: so.SoldOutCache, client: Any) -> AsyncWatcher:
    """The async watcher feeding `cache` over `client` (one per client)."""
    owner = ('aio', id(scope(client)))
    w = cache.attachments.get(owner)
    if w is None or w._closed:
        w = cache.attachments[owner] = AsyncWatcher(client, cache)
    return w


__all__ = ['AsyncWatcher', 'watcher']
