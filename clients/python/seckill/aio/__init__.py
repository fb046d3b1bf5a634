"""`seckill.aio`: Sale and SplitSale for redis.asyncio (FastAPI, aiohttp).

The same operations as seckill.Sale and seckill.SplitSale, awaited: both
run the one set of operations (seckill.ops.sale for a sale key, seckill.split.
core for a split sale, over the plain protocol functions); this package
only adds a driver that awaits their steps (seckill.drivers.aio).

    import redis.asyncio as redis
    from seckill.aio import Sale, SplitSale

    r = redis.Redis(port=7379, decode_responses=True)
    sale = Sale(r, 'sale:{1001}')
    res = await sale.reserve('user:42', reqid='order-7f3a')

    from redis.asyncio.cluster import RedisCluster
    split = SplitSale(RedisCluster(host='127.0.0.1', port=7000, decode_responses=True), '1001')
    status, rid = await split.reserve('user:42', reqid='order-7f3a')

`local_soldout=True` (or a seckill.soldout.SoldOutCache) keeps the local
sold-out flag as in the sync client; its subscriptions run as tasks of the
loop of the first awaited call.

One object may serve many tasks of one event loop. TRYAGAIN is retried as
in the sync client (about a second); STALEROUND reloads the layout once,
then raises StaleRound.
"""

from __future__ import annotations

from typing import Any, AsyncIterator, Dict, Iterable, List, Optional, Sequence, Tuple

from ..drivers.aio import AsyncDriver
from ..drivers.aio_soldout import watcher
from ..drivers.soldout import resolve
from ..ops import draw as draw_ops
from ..ops import sale as ops
from ..plain import draw as d
from ..plain import durability as dur
from ..plain import protocol as p
from ..plain import split_protocol as sp
from ..plain.draw import Drawn, Entered, Entrant, Verdict
from ..plain.protocol import ReconcileResult, Reserved, SaleMissing, Settled
from ..plain.steps import NodeName, one
from ..split import OrphanKeys, RecoverError, StaleRound
from ..split.core import SplitSaleBase


class Sale:
    """One sale on one key over redis.asyncio: `Sale(redis.asyncio.Redis(...),
    'sale:{1001}')`. Every method is seckill.Sale's, awaited."""

    def __init__(self, client: Any, key: str, *, local_soldout: Any = False,
                 backend: Any = None):
        self.r = client
        self.key = key
        self._driver = AsyncDriver(client, backend)
        self._run = self._driver.run
        self.soldout = resolve(client, local_soldout)
        self._watching = False
        if self.soldout is not None:
            self.soldout.track(key)

    def _watch(self) -> None:
        """Subscribes the key's signals from the client's event loop."""
        if self.soldout is not None and not self._watching:
            self._watching = True
            watcher(self.soldout, self.r).watch([self.key])

    def __repr__(self) -> str:
        return 'aio.Sale(%r)' % (self.key,)

    async def init(self, total: int, *, shards: Optional[int] = None, limit: Optional[int] = None,
                   hold_ms: Optional[int] = None, start_ms: Optional[int] = None,
                   end_ms: Optional[int] = None, ttl_s: Optional[int] = None,
                   stream: Optional[str] = None, maxlen: Optional[int] = None,
                   replace: bool = False, split: Optional[Sequence[Any]] = None,
                   draw: bool = False, fence: bool = False,
                   beacon: Optional[d.UserId] = None) -> bool:
        return await self._run(ops.init(
            self.key, total, shards=shards, limit=limit, hold_ms=hold_ms, start_ms=start_ms,
            end_ms=end_ms, ttl_s=ttl_s, stream=stream, maxlen=maxlen, replace=replace,
            split=split, draw=draw, fence=fence, beacon=beacon))

    create = init

    async def reserve(self, user: str, qty: int = 1, reqid: Optional[str] = None, *,
                      wait: Any = None) -> Reserved:
        """seckill.Sale.reserve, awaited (`wait`: Reserved.replicated)."""
        self._watch()
        return await self._run(ops.reserve(self.key, user, qty, reqid, self.soldout,
                                            wait=dur.resolve(wait)))

    async def release(self, rid: str) -> Settled:
        self._watch()
        return await self._run(ops.release(self.key, rid, self.soldout))

    async def confirm(self, rid: str, *, wait: Any = None) -> Settled:
        """SECKILL.CONFIRM -> Settled(status, remaining); `wait` as reserve's
        (Settled.replicated)."""
        self._watch()
        return await self._run(ops.confirm(self.key, rid, self.soldout, wait=dur.resolve(wait)))

    async def wait(self, durability: Any = True) -> dur.Gate:
        """seckill.Sale.wait, awaited."""
        return await self._run(ops.wait(self.key, dur.resolve(durability) or dur.DEFAULT))

    async def unfence(self) -> str:
        """seckill.Sale.unfence, awaited."""
        return await self._run(ops.unfence(self.key))

    async def info(self) -> Optional[Dict[str, Any]]:
        return await self._run(ops.info(self.key))

    async def get(self, rid: str) -> Optional[Dict[str, Any]]:
        return await self._run(ops.get(self.key, rid))

    async def reconcile(self, orders: Iterable[Any] = (), apply: bool = False,
                        expire: bool = False, chunk_size: int = p.DEFAULT_CHUNK) -> ReconcileResult:
        return await self._run(ops.reconcile(self.key, orders, apply=apply, expire=expire,
                                              chunk_size=chunk_size))

    async def server_ms(self) -> int:
        return await self._run(ops.server_ms())

    async def enter(self, user: d.UserId, qty: int = 1, reqid: Optional[str] = None) -> Entered:
        return await self._run(draw_ops.enter(self.key, user, qty, reqid))

    async def commitment(self) -> Optional[str]:
        info = await self._run(draw_ops.draw_info(self.key))
        return None if info is None else info.seed_commitment

    async def draw(self, count: int = d.DEFAULT_DRAW_COUNT,
                   beacon_value: Optional[d.UserId] = None) -> Drawn:
        return await self._run(draw_ops.draw(self.key, count, beacon_value))

    async def draw_all(self, count: int = d.DEFAULT_DRAW_COUNT,
                       beacon_value: Optional[d.UserId] = None) -> Drawn:
        return await self._run(draw_ops.draw_all(self.key, count, beacon_value))

    async def entrants(self, count: int = d.DEFAULT_PAGE) -> AsyncIterator[Entrant]:
        """`async for e in sale.entrants(): ...`, one ENTRANTS page per
        round trip."""
        cursor: Any = 0
        while True:
            cursor, page = await self._run(draw_ops.entrants_page(self.key, cursor, count))
            for e in page:
                yield e
            if cursor == '0':
                return

    async def verify_draw(self, commitment: Optional[str] = None,
                          beacon: Optional[d.UserId] = None,
                          beacon_value: Optional[d.UserId] = None) -> Verdict:
        return await self._run(draw_ops.verify(self.key, commitment=commitment, beacon=beacon,
                                                beacon_value=beacon_value))


class SplitSale(SplitSaleBase):
    """A split sale over redis.asyncio: `client` is a redis.asyncio.cluster.
    RedisCluster or a redis.asyncio.Redis (every key on one node). Every
    method is seckill.SplitSale's, awaited (docstrings there)."""

    _driver_class = AsyncDriver

    def __init__(self, client: Any, name: str, *, wait_ms: int = 1000,
                 local_soldout: Any = False, backend: Any = None):
        super().__init__(client, name, wait_ms=wait_ms, local_soldout=local_soldout,
                         backend=backend)
        if self.soldout is not None:
            self._run = self._run_watching

    async def _run_watching(self, op: Any) -> Any:
        try:
            return await self._driver.run(op)
        finally:
            keys = self._unwatched_keys()
            if keys:
                watcher(self.soldout, self.r).watch(keys)

    async def layout(self) -> sp.Layout:
        return await self._run(self.core.layout())

    async def refresh(self) -> None:
        await self._run(self.core.refresh())

    async def node_name(self, key: str) -> str:
        return await self._run(one(NodeName(key)))

    async def create(self, total: int, parts: Optional[int] = None, limit: int = 1,
                     hold_ms: int = 0, start_ms: Optional[int] = None,
                     end_ms: Optional[int] = None, ttl_s: Optional[int] = None,
                     stream: bool = False, replace: bool = False,
                     bmax: int = sp.DEFAULT_BMAX, draw: bool = False,
                     beacon: Optional[d.UserId] = None) -> bool:
        return await self._run(self.core.create(
            total, parts=parts, limit=limit, hold_ms=hold_ms, start_ms=start_ms, end_ms=end_ms,
            ttl_s=ttl_s, stream=stream, replace=replace, bmax=bmax, draw=draw, beacon=beacon))

    async def recover(self, stream: Optional[bool] = None, limit: int = 1,
                      bmax: int = sp.DEFAULT_BMAX, hint: Iterable[str] = (),
                      salts: int = 64) -> sp.Layout:
        return await self._run(self.core.recover(stream=stream, limit=limit, bmax=bmax,
                                                 hint=hint, salts=salts))

    async def streams(self) -> List[str]:
        return await self._run(self.core.streams())

    async def reserve(self, user: str, qty: int = 1,
                      reqid: Optional[str] = None) -> p.SplitReserved:
        return await self._run(self.core.reserve(user, qty, reqid))

    async def release(self, user: str, rid: str) -> str:
        return await self._run(self.core.release(user, rid))

    async def confirm(self, user: str, rid: str) -> str:
        return await self._run(self.core.confirm(user, rid))

    async def get(self, user: str, rid: str) -> Optional[Dict[str, Any]]:
        return await self._run(self.core.get(user, rid))

    async def info(self) -> Dict[str, Any]:
        return await self._run(self.core.info())

    async def repair(self) -> int:
        return await self._run(self.core.repair())

    async def reconcile(self, orders: Iterable[Any], apply: bool = False,
                        chunk_size: int = p.DEFAULT_CHUNK) -> Dict[str, Any]:
        return await self._run(self.core.reconcile(orders, apply, chunk_size))

    async def enter(self, user: d.UserId, qty: int = 1, reqid: Optional[str] = None) -> Entered:
        return await self._run(self.core.enter(user, qty, reqid))

    async def draw(self, count: int = d.DEFAULT_DRAW_COUNT,
                   beacon_value: Optional[d.UserId] = None) -> Dict[str, Any]:
        return await self._run(self.core.draw(count, beacon_value))

    async def commitments(self) -> Dict[str, str]:
        return await self._run(self.core.commitments())

    async def verify_draw(self, commitments: Optional[Dict[str, str]] = None,
                          beacon: Optional[d.UserId] = None,
                          beacon_value: Optional[d.UserId] = None) -> Verdict:
        return await self._run(self.core.verify_draw(commitments, beacon, beacon_value))

    async def entrants(self, count: int = d.DEFAULT_PAGE) -> AsyncIterator[Tuple[str, Entrant]]:
        part, n = 0, 1
        while part < n:
            cursor: Any = 0
            while True:
                cursor, page, n, key = await self._run(
                    self.core.entrants_page(part, cursor, count))
                for e in page:
                    yield key, e
                if cursor == '0':
                    break
            part += 1


__all__ = ['Sale', 'SplitSale', 'AsyncDriver', 'SaleMissing', 'StaleRound', 'OrphanKeys',
           'RecoverError']
