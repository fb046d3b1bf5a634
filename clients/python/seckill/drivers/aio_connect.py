"""seckill.connect for redis.asyncio: `await connect(url)`.

The same URLs (`redis://...`, `redis+sentinel://host:port[,...]/service[/db]`)
and the same following of failovers as the sync seckill.connect, with an
asyncio task instead of a thread: it listens to `+switch-master` on a
Sentinel and asks the Sentinels every `poll_s`; at a change the pool
closes its idle connections to the old master and drops the others as they
come back (redis.asyncio's SentinelConnectionPool keeps only connections to
its current master). Call it from the event loop that will use the client;
close_follower(client) cancels the task.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from .connect import FOLLOWER_ATTR, parse_switch, parse_url, switched

log = logging.getLogger('seckill.connect')


async def connect(url: str, *, decode_responses: bool = True, socket_timeout: float = 10,
                  follow: bool = True, poll_s: float = 1.0, **kw: Any):
    """A redis.asyncio client for `url`; for a Sentinel URL with `follow`,
    the follower task runs as `client._seckill_follower`."""
    import redis.asyncio as aioredis
    target = parse_url(url)
    if target is None:
        return aioredis.from_url(url, decode_responses=decode_responses,
                                 socket_timeout=socket_timeout, **kw)
    from redis.asyncio.sentinel import Sentinel
    timeout = min(socket_timeout, 2.0)
    sentinel = Sentinel(list(target.sentinels), socket_timeout=timeout,
                        sentinel_kwargs={'socket_timeout': timeout})
    client = sentinel.master_for(target.service, db=target.db, username=target.username,
                                 password=target.password, decode_responses=decode_responses,
                                 socket_timeout=socket_timeout, **kw)
    if follow:
        follower = MasterFollower(sentinel, target.service, client.connection_pool, poll_s)
        follower.task = asyncio.get_running_loop().create_task(follower.run())
        setattr(client, FOLLOWER_ATTR, follower)
    return client


def close_follower(client: Any) -> None:
    f = getattr(client, FOLLOWER_ATTR, None)
    if f is not None and f.task is not None:
        f.task.cancel()


class MasterFollower:
    """The async follower of `service`'s master (the module docstring);
    `switches` counts the changes it saw."""

    def __init__(self, sentinel: Any, service: str, pool: Any, poll_s: float = 1.0):
        self.sentinel = sentinel
        self.service = service
        self.pool = pool
        self.poll_s = poll_s
        self.switches = 0
        self.task: Any = None

    async def check(self) -> bool:
        before = self.pool.master_address
        return switched(self, before, await self.pool.get_master_address())

    async def _check_quietly(self) -> None:
        try:
            await self.check()
        except Exception as exc:        # no Sentinel answers, or no master yet
            log.debug('sentinel check: %s', exc)

    async def run(self) -> None:
        turn = 0
        while True:
            sentinels = list(self.sentinel.sentinels)
            ps = sentinels[turn % len(sentinels)].pubsub(ignore_subscribe_messages=True)
            try:
                await ps.subscribe('+switch-master')
                while True:
                    msg = await ps.get_message(timeout=self.poll_s)
                    if msg is not None:
                        switch = parse_switch(msg.get('data'))
                        if switch is None or switch[0] != self.service:
                            continue
                    await self._check_quietly()
            except asyncio.CancelledError:
                raise
            except Exception as exc:   # that Sentinel is gone: the next one
                log.debug('sentinel subscription: %s', exc)
                turn += 1
                await self._check_quietly()
                await asyncio.sleep(min(self.poll_s, 0.5))
            finally:
                try:
                    await ps.aclose()
                except Exception:  # pragma: no cover - closing a dead socket
                    pass


__all__ = ['connect', 'close_follower', 'MasterFollower']
