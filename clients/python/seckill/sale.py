"""`Sale`: one sale key, typed. A thin redis-py layer: the operations are
seckill._ops (over the plain protocol functions of seckill.protocol), run by
the sync driver."""

from __future__ import annotations

from typing import Any, Dict, Iterable, Optional, Sequence

from . import _ops
from . import protocol as p
from ._driver import Driver
from ._soldout_watch import resolve, watcher
from .protocol import ReconcileResult, Reserved, SaleMissing, Settled


class Sale:
    """One sale on one key: `Sale(redis.Redis(...), 'sale:{1001}')`.

    Every method is one command (reconcile: one per chunk) and returns a
    typed result; nothing here hides a status. A command answered TRYAGAIN
    (a key mid-migration) is sent again for up to about a second
    (seckill._io.call); no other error is retried.

    `local_soldout`: True keeps a local sold-out flag in the client's shared
    seckill.soldout.SoldOutCache (one per connection pool), or pass a
    SoldOutCache to share one across the process. While the flag holds,
    reserve() answers Reserved('SOLD_OUT', None, 0) without a round trip;
    the module's keyspace events (`notify-keyspace-events` with `d` and `K`
    or `E`) or the Functions backend's channel set and clear it, and it
    lapses after the cache's bound (500 ms) whatever happens
    (docs/soldout.md).
    """

    def __init__(self, client: Any, key: str, *, local_soldout: Any = False,
                 backend: Any = None):
        self.r = client
        self.key = key
        self._driver = Driver(client, backend)
        self._run = self._driver.run
        self.soldout = resolve(client, local_soldout)
        """The SoldOutCache this sale's flag lives in (None: no flag)."""
        if self.soldout is not None:
            self.soldout.track(key)
            watcher(self.soldout, client).watch([key])

    def __repr__(self) -> str:
        return 'Sale(%r)' % (self.key,)

    def init(self, total: int, *, shards: Optional[int] = None, limit: Optional[int] = None,
             hold_ms: Optional[int] = None, start_ms: Optional[int] = None,
             end_ms: Optional[int] = None, ttl_s: Optional[int] = None,
             stream: Optional[str] = None, maxlen: Optional[int] = None,
             replace: bool = False, split: Optional[Sequence[Any]] = None) -> bool:
        """SECKILL.INIT. True when created (or replaced), False when the sale
        already existed and nothing changed. `split`: `SPLIT round n peer
        ...` for a key of a split sale (SplitSale passes it)."""
        return self._run(_ops.init(
            self.key, total, shards=shards, limit=limit, hold_ms=hold_ms, start_ms=start_ms,
            end_ms=end_ms, ttl_s=ttl_s, stream=stream, maxlen=maxlen, replace=replace,
            split=split))

    def reserve(self, user: str, qty: int = 1, reqid: Optional[str] = None) -> Reserved:
        """SECKILL.RESERVE -> Reserved(status, rid, remaining). Pass your own
        `reqid` (the order id) for anything you may need to reconcile."""
        return self._run(_ops.reserve(self.key, user, qty, reqid, self.soldout))

    def release(self, rid: str) -> Settled:
        return self._run(_ops.release(self.key, rid, self.soldout))

    def confirm(self, rid: str) -> Settled:
        return self._run(_ops.confirm(self.key, rid, self.soldout))

    def info(self) -> Optional[Dict[str, Any]]:
        """The report, or None when the key does not exist."""
        return self._run(_ops.info(self.key))

    def get(self, rid: str) -> Optional[Dict[str, Any]]:
        return self._run(_ops.get(self.key, rid))

    def reconcile(self, orders: Iterable[Any] = (), apply: bool = False, expire: bool = False,
                  chunk_size: int = p.DEFAULT_CHUNK) -> ReconcileResult:
        """SECKILL.RECONCILE over `orders` ((rid, user, qty) rows or objects
        with those attributes) in calls of at most `chunk_size` rows. Class
        counts and ids are summed; `report` is the sale after the last call.
        Raises SaleMissing when the key does not exist."""
        return self._run(_ops.reconcile(self.key, orders, apply=apply, expire=expire,
                                        chunk_size=chunk_size))

    def server_ms(self) -> int:
        """The server's clock (TIME), the one holds and windows follow."""
        return self._run(_ops.server_ms())


__all__ = ['Sale', 'SaleMissing']
