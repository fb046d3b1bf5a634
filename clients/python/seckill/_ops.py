"""One sale key's operations as steps (seckill._io): the argument lists and
reply parsing of seckill.protocol, one command each (reconcile: one per
chunk). `seckill.sale.Sale` runs them with redis-py, `seckill.aio.Sale`
with redis.asyncio, and the split sale's driver on its parts."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Iterable, Optional, Sequence

from . import protocol as p
from ._io import Steps, call
from .protocol import ReconcileResult, Reserved, SaleMissing

if TYPE_CHECKING:  # pragma: no cover
    from .soldout import SoldOutCache


def init(key: str, total: int, *, shards: Optional[int] = None, limit: Optional[int] = None,
         hold_ms: Optional[int] = None, start_ms: Optional[int] = None,
         end_ms: Optional[int] = None, ttl_s: Optional[int] = None,
         stream: Optional[str] = None, maxlen: Optional[int] = None,
         replace: bool = False, split: Optional[Sequence[Any]] = None,
         draw: bool = False) -> Steps:
    """SECKILL.INIT: True when created (or replaced), False when it existed."""
    return p.parse_init((yield from call(p.init_args(
        key, total, shards=shards, limit=limit, hold_ms=hold_ms, start_ms=start_ms,
        end_ms=end_ms, ttl_s=ttl_s, stream=stream, maxlen=maxlen, replace=replace,
        split=split, draw=draw))))


def reserve(key: str, user: str, qty: int = 1, reqid: Optional[str] = None,
            flags: Optional['SoldOutCache'] = None) -> Steps:
    """RESERVE. With `flags` (seckill.soldout), a sale flagged sold out is
    answered SOLD_OUT here, with no round trip (unless `reqid`'s earlier
    RESERVE got no reply: its retry must reach Redis), and the reply
    updates the flag."""
    args = p.reserve_args(key, user, qty, reqid)
    if flags is None:
        return p.parse_reserved((yield from call(args)))
    if not flags.retrying(reqid) and flags.check(key):
        return Reserved(p.SOLD_OUT, None, 0)
    token = flags.token(key)
    try:
        res = p.parse_reserved((yield from call(args)))
    except BaseException:
        flags.failed(key, reqid)
        raise
    flags.answered(reqid)
    flags.reserved(key, token, res)
    return res


def _settle(key: str, rid: str, command: str, flags: Optional['SoldOutCache']) -> Steps:
    token = flags.token(key) if flags is not None else 0
    res = p.parse_settled((yield from call(['SECKILL.' + command, key, rid])), command)
    if flags is not None:
        flags.settled(key, token, res)
    return res


def release(key: str, rid: str, flags: Optional['SoldOutCache'] = None) -> Steps:
    """RELEASE; with `flags`, a reply with units left clears the flag."""
    return (yield from _settle(key, rid, 'RELEASE', flags))


def confirm(key: str, rid: str, flags: Optional['SoldOutCache'] = None) -> Steps:
    return (yield from _settle(key, rid, 'CONFIRM', flags))


def info(key: str) -> Steps:
    return p.parse_report((yield from call(['SECKILL.INFO', key])))


def get(key: str, rid: str) -> Steps:
    return p.parse_get((yield from call(['SECKILL.GET', key, rid])))


def reconcile(key: str, orders: Iterable[Any] = (), apply: bool = False, expire: bool = False,
              chunk_size: int = p.DEFAULT_CHUNK) -> Steps:
    """RECONCILE in chunks, merged; SaleMissing when the key does not exist."""
    result = ReconcileResult()
    for args in p.reconcile_calls(key, orders, apply=apply, expire=expire,
                                  chunk_size=chunk_size):
        report = p.parse_report((yield from call(args)))
        if report is None:
            raise SaleMissing(key)
        p.merge_reconcile(result, report)
    return result


def server_ms() -> Steps:
    """The server's clock (TIME) in milliseconds."""
    sec, usec = yield from call(['TIME'])
    return int(sec) * 1000 + int(usec) // 1000
