"""`Sale`: one sale key, typed. A thin redis-py layer over seckill.protocol."""

from __future__ import annotations

from typing import Any, Dict, Iterable, Optional, Sequence

from . import protocol as p
from .protocol import ReconcileResult, Reserved, Settled


class SaleMissing(RuntimeError):
    """The sale key does not exist (never created, expired, or lost)."""


class Sale:
    """One sale on one key: `Sale(redis.Redis(...), 'sale:{1001}')`.

    Every method is one command (reconcile: one per chunk) and returns a
    typed result; nothing here retries or hides a status.
    """

    def __init__(self, client: Any, key: str):
        self.r = client
        self.key = key

    def __repr__(self) -> str:
        return 'Sale(%r)' % (self.key,)

    def _call(self, args):
        return self.r.execute_command(*args)

    def init(self, total: int, *, shards: Optional[int] = None, limit: Optional[int] = None,
             hold_ms: Optional[int] = None, start_ms: Optional[int] = None,
             end_ms: Optional[int] = None, ttl_s: Optional[int] = None,
             stream: Optional[str] = None, maxlen: Optional[int] = None,
             replace: bool = False, split: Optional[Sequence[Any]] = None) -> bool:
        """SECKILL.INIT. True when created (or replaced), False when the sale
        already existed and nothing changed. `split`: `SPLIT round n peer
        ...` for a key of a split sale (SplitSale passes it)."""
        return p.parse_init(self._call(p.init_args(
            self.key, total, shards=shards, limit=limit, hold_ms=hold_ms, start_ms=start_ms,
            end_ms=end_ms, ttl_s=ttl_s, stream=stream, maxlen=maxlen, replace=replace,
            split=split)))

    def reserve(self, user: str, qty: int = 1, reqid: Optional[str] = None) -> Reserved:
        """SECKILL.RESERVE -> Reserved(status, rid, remaining). Pass your own
        `reqid` (the order id) for anything you may need to reconcile."""
        return p.parse_reserved(self._call(p.reserve_args(self.key, user, qty, reqid)))

    def release(self, rid: str) -> Settled:
        return p.parse_settled(self._call(['SECKILL.RELEASE', self.key, rid]), 'RELEASE')

    def confirm(self, rid: str) -> Settled:
        return p.parse_settled(self._call(['SECKILL.CONFIRM', self.key, rid]), 'CONFIRM')

    def info(self) -> Optional[Dict[str, Any]]:
        """The report, or None when the key does not exist."""
        return p.parse_report(self._call(['SECKILL.INFO', self.key]))

    def get(self, rid: str) -> Optional[Dict[str, Any]]:
        return p.parse_get(self._call(['SECKILL.GET', self.key, rid]))

    def reconcile(self, orders: Iterable[Any] = (), apply: bool = False, expire: bool = False,
                  chunk_size: int = p.DEFAULT_CHUNK) -> ReconcileResult:
        """SECKILL.RECONCILE over `orders` ((rid, user, qty) rows or objects
        with those attributes) in calls of at most `chunk_size` rows. Class
        counts and ids are summed; `report` is the sale after the last call.
        Raises SaleMissing when the key does not exist."""
        result = ReconcileResult()
        for args in p.reconcile_calls(self.key, orders, apply=apply, expire=expire,
                                      chunk_size=chunk_size):
            report = p.parse_report(self._call(args))
            if report is None:
                raise SaleMissing(self.key)
            p.merge_reconcile(result, report)
        return result

    def server_ms(self) -> int:
        """The server's clock (TIME), the one holds and windows follow."""
        sec, usec = self.r.execute_command('TIME')
        return int(sec) * 1000 + int(usec) // 1000
