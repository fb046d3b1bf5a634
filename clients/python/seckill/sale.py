"""`Sale`: one sale key, typed. A thin redis-py layer: the operations are
seckill.ops.sale (over the plain protocol functions of seckill.protocol), run by
the sync driver."""

from __future__ import annotations

from typing import Any, Dict, Iterable, Iterator, Optional, Sequence

from .drivers.soldout import resolve, watcher
from .drivers.sync import Driver
from .ops import draw as draw_ops
from .ops import sale as ops
from .plain import draw as d
from .plain import durability as dur
from .plain import protocol as p
from .plain.draw import Drawn, Entered, Entrant, Verdict
from .plain.protocol import ReconcileResult, Reserved, SaleMissing, Settled


class Sale:
    """One sale on one key: `Sale(redis.Redis(...), 'sale:{1001}')`.

    Every method is one command (reconcile: one per chunk) and returns a
    typed result; nothing here hides a status. A command answered TRYAGAIN
    (a key mid-migration) is sent again for up to about a second
    (seckill.plain.steps.call); no other error is retried.

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
             replace: bool = False, split: Optional[Sequence[Any]] = None,
             draw: bool = False, fence: bool = False, beacon: Optional[d.UserId] = None) -> bool:
        """SECKILL.INIT. True when created (or replaced), False when the sale
        already existed and nothing changed. `split`: `SPLIT round n peer
        ...` for a key of a split sale (SplitSale passes it). `draw`: a draw
        sale (`INIT ... DRAW`, docs/draw-sales.md): [start_ms, end_ms) is
        registration, end_ms is required. `beacon` (draw sales only): the
        name of the public value the first DRAW will take (`BEACON name`,
        e.g. 'drand quicknet round 1234567'). Publish commitment() and the
        beacon's name before end_ms."""
        return self._run(ops.init(
            self.key, total, shards=shards, limit=limit, hold_ms=hold_ms, start_ms=start_ms,
            end_ms=end_ms, ttl_s=ttl_s, stream=stream, maxlen=maxlen, replace=replace,
            split=split, draw=draw, fence=fence, beacon=beacon))

    create = init
    """The same as init: `Sale(r, key).create(100, end_ms=..., draw=True)`."""

    def reserve(self, user: str, qty: int = 1, reqid: Optional[str] = None, *,
                wait: Any = None) -> Reserved:
        """SECKILL.RESERVE -> Reserved(status, rid, remaining). Pass your own
        `reqid` (the order id) for anything you may need to reconcile.

        `wait` (a seckill.durability.Durability, True for the default one,
        or a replica count): RESERVE, a propagating SET and WAIT go on one
        connection, and Reserved.replicated says whether the required
        replicas had the reservation within the timeout (a failover then
        cannot lose it); without it `replicated` is None and nothing is
        added. FENCED: the sale waits for its reconcile; retry later."""
        return self._run(ops.reserve(self.key, user, qty, reqid, self.soldout,
                                     wait=dur.resolve(wait)))

    def release(self, rid: str) -> Settled:
        return self._run(ops.release(self.key, rid, self.soldout))

    def confirm(self, rid: str, *, wait: Any = None) -> Settled:
        """SECKILL.CONFIRM -> Settled(status, remaining); `wait` as reserve's
        (Settled.replicated)."""
        return self._run(ops.confirm(self.key, rid, self.soldout, wait=dur.resolve(wait)))

    def wait(self, durability: Any = True) -> dur.Gate:
        """The WAIT gate alone (a propagating SET and WAIT on one connection
        to the sale's master): Gate(acked, need); `.ok` when every write
        the master did before it reached the required replicas."""
        return self._run(ops.wait(self.key, dur.resolve(durability) or dur.DEFAULT))

    def unfence(self) -> str:
        """SECKILL.UNFENCE: 'UNFENCED' (the sale was fenced since a failover or
        restart; it sells again), 'NOT_FENCED' (nothing to do, or not a
        FENCE sale), 'NO_SALE'. Lift a fence only once the order ledger was
        applied (the reconciler's apply does it: docs/replication.md)."""
        return self._run(ops.unfence(self.key))

    def info(self) -> Optional[Dict[str, Any]]:
        """The report, or None when the key does not exist."""
        return self._run(ops.info(self.key))

    def get(self, rid: str) -> Optional[Dict[str, Any]]:
        return self._run(ops.get(self.key, rid))

    def reconcile(self, orders: Iterable[Any] = (), apply: bool = False, expire: bool = False,
                  chunk_size: int = p.DEFAULT_CHUNK) -> ReconcileResult:
        """SECKILL.RECONCILE over `orders` ((rid, user, qty) rows or objects
        with those attributes) in calls of at most `chunk_size` rows. Class
        counts and ids are summed; `report` is the sale after the last call.
        Raises SaleMissing when the key does not exist."""
        return self._run(ops.reconcile(self.key, orders, apply=apply, expire=expire,
                                        chunk_size=chunk_size))

    def server_ms(self) -> int:
        """The server's clock (TIME), the one holds and windows follow."""
        return self._run(ops.server_ms())

    # -- draw sales (docs/draw-sales.md) ------------------------------------

    def enter(self, user: d.UserId, qty: int = 1, reqid: Optional[str] = None) -> Entered:
        """SECKILL.ENTER -> Entered(status, entrants). ALREADY_ENTERED is the
        retry of an entry (the first one stands); a `reqid` becomes the
        reservation id if the user wins."""
        return self._run(draw_ops.enter(self.key, user, qty, reqid))

    def commitment(self) -> Optional[str]:
        """INFO's `seed_commitment` (hex): what to publish before END, with
        the beacon's name when the sale declared one. None when the key is
        missing or not a draw sale."""
        info = self._run(draw_ops.draw_info(self.key))
        return None if info is None else info.seed_commitment

    def draw(self, count: int = d.DEFAULT_DRAW_COUNT,
             beacon_value: Optional[d.UserId] = None) -> Drawn:
        """One SECKILL.DRAW (at most `count` winners) -> Drawn(drawn,
        remaining, left_to_draw). Runs only at or after END. `beacon_value`:
        the public value of the sale's declared beacon (required by the
        first DRAW of a sale that declared one, refused by one that did
        not; a later DRAW may repeat it)."""
        return self._run(draw_ops.draw(self.key, count, beacon_value))

    def draw_all(self, count: int = d.DEFAULT_DRAW_COUNT,
                 beacon_value: Optional[d.UserId] = None) -> Drawn:
        """DRAW until left_to_draw is 0, each call short (each with
        `beacon_value` when given) -> Drawn(winners made by these calls,
        remaining, 0)."""
        return self._run(draw_ops.draw_all(self.key, count, beacon_value))

    def entrants(self, count: int = d.DEFAULT_PAGE) -> Iterator[Entrant]:
        """Every entrant (user, qty, result), in the order they entered,
        one ENTRANTS page of `count` per round trip."""
        cursor: Any = 0
        while True:
            cursor, page = self._run(draw_ops.entrants_page(self.key, cursor, count))
            yield from page
            if cursor == '0':
                return

    def verify_draw(self, commitment: Optional[str] = None, beacon: Optional[d.UserId] = None,
                    beacon_value: Optional[d.UserId] = None) -> Verdict:
        """Checks the draw (docs/draw-sales.md, "Checking a draw") against
        the published `commitment` and `beacon` name (None: the shop
        published none) and the beacon's public `beacon_value`: the
        commitment, the beacon, the entrant digest recomputed from ENTRANTS,
        the draw seed, the winners, the stock. A Verdict, `.ok` only when
        verified; without `commitment` (or without `beacon_value` on a sale
        with a beacon) the best it gives is UNCHECKED."""
        return self._run(draw_ops.verify(self.key, commitment=commitment, beacon=beacon,
                                          beacon_value=beacon_value))


__all__ = ['Sale', 'SaleMissing']
