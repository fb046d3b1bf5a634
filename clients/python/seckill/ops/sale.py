"""One sale key's operations as steps (seckill.plain.steps): the argument lists and
reply parsing of seckill.protocol, one command each (reconcile: one per
chunk). `seckill.sale.Sale` runs them with redis-py, `seckill.aio.Sale`
with redis.asyncio, and the split sale's driver on its parts."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any, Iterable, List, Optional, Sequence

from ..plain import durability as dur
from ..plain import protocol as p
from ..plain.protocol import ReconcileResult, Reserved, SaleMissing
from ..plain.steps import OnNode, ReplicaInfo, Steps, call

if TYPE_CHECKING:  # pragma: no cover
    from ..plain.soldout import SoldOutCache


def init(key: str, total: int, *, shards: Optional[int] = None, limit: Optional[int] = None,
         hold_ms: Optional[int] = None, start_ms: Optional[int] = None,
         end_ms: Optional[int] = None, ttl_s: Optional[int] = None,
         stream: Optional[str] = None, maxlen: Optional[int] = None,
         replace: bool = False, split: Optional[Sequence[Any]] = None,
         draw: bool = False, fence: bool = False, beacon: Optional[Any] = None) -> Steps:
    """SECKILL.INIT: True when created (or replaced), False when it existed."""
    return p.parse_init((yield from call(p.init_args(
        key, total, shards=shards, limit=limit, hold_ms=hold_ms, start_ms=start_ms,
        end_ms=end_ms, ttl_s=ttl_s, stream=stream, maxlen=maxlen, replace=replace,
        split=split, draw=draw, fence=fence, beacon=beacon))))


def unfence(key: str) -> Steps:
    """SECKILL.UNFENCE: 'UNFENCED', 'NOT_FENCED' or 'NO_SALE'."""
    return p.parse_unfence((yield from call(['SECKILL.UNFENCE', key])))


def gated(key: str, commands: Sequence[Sequence[Any]],
          policy: dur.Durability) -> Steps:
    """`commands`, then the gate's propagating SET and WAIT, pipelined on one
    connection to the master serving `key` (seckill.durability): (their
    replies, Gate). An error reply is raised. When WAIT falls short the
    replica count is read again: a replica that left lowers what 'auto'
    asks (WAIT again for that, on a connection that writes the SET again);
    the sticky minimum of 1 stays."""
    state = yield ReplicaInfo(key)
    need = policy.required(state)
    extra = dur.gate_commands(key, need, policy.timeout_ms) if need else []
    replies = yield OnNode(key, [list(c) for c in commands] + extra)
    for r in replies:
        if isinstance(r, Exception):
            raise r
    n = len(commands)
    if not need:
        return replies, dur.Gate(0, 0)
    gate = dur.Gate(dur.acked_of(replies), need)
    if not gate.ok:
        state = yield ReplicaInfo(key, fresh=True)
        asked, need = need, policy.required(state)
        gate = dur.Gate(gate.acked, need)
        if not gate.ok and need < asked:
            again = yield OnNode(key, dur.gate_commands(key, need, policy.timeout_ms))
            gate = dur.Gate(dur.acked_of(again), need)
    return replies[:n], gate


def wait(key: str, policy: dur.Durability) -> Steps:
    """The gate alone: every write the master serving `key` did before it
    has reached Gate.acked replicas."""
    _, gate = yield from gated(key, [], policy)
    return gate


def _send(key: str, args: List[Any], policy: Optional[dur.Durability]) -> Steps:
    """One command: (reply, replicated): `replicated` None without a
    policy, else whether the gate passed (seckill.durability)."""
    if policy is None:
        return (yield from call(args)), None
    replies, gate = yield from gated(key, [args], policy)
    return replies[0], gate.ok


def _with(res: Any, replicated: Optional[bool]) -> Any:
    return res if replicated is None else dataclasses.replace(res, replicated=replicated)


def reserve(key: str, user: str, qty: int = 1, reqid: Optional[str] = None,
            flags: Optional['SoldOutCache'] = None,
            wait: Optional[dur.Durability] = None) -> Steps:
    """RESERVE. With `flags` (seckill.soldout), a sale flagged sold out is
    answered SOLD_OUT here, with no round trip (unless `reqid`'s earlier
    RESERVE got no reply: its retry must reach Redis), and the reply
    updates the flag. With `wait`, RESERVE goes with the gate on one
    connection and Reserved.replicated says whether it passed."""
    args = p.reserve_args(key, user, qty, reqid)
    if flags is None:
        reply, replicated = yield from _send(key, args, wait)
        return _with(p.parse_reserved(reply), replicated)
    if not flags.retrying(reqid) and flags.check(key):
        return Reserved(p.SOLD_OUT, None, 0)
    token = flags.token(key)
    try:
        reply, replicated = yield from _send(key, args, wait)
        res = _with(p.parse_reserved(reply), replicated)
    except BaseException:
        flags.failed(key, reqid)
        raise
    flags.answered(reqid)
    flags.reserved(key, token, res)
    return res


def _settle(key: str, rid: str, command: str, flags: Optional['SoldOutCache'],
            wait: Optional[dur.Durability] = None) -> Steps:
    token = flags.token(key) if flags is not None else 0
    reply, replicated = yield from _send(key, ['SECKILL.' + command, key, rid], wait)
    res = _with(p.parse_settled(reply, command), replicated)
    if flags is not None:
        flags.settled(key, token, res)
    return res


def release(key: str, rid: str, flags: Optional['SoldOutCache'] = None) -> Steps:
    """RELEASE; with `flags`, a reply with units left clears the flag."""
    return (yield from _settle(key, rid, 'RELEASE', flags))


def confirm(key: str, rid: str, flags: Optional['SoldOutCache'] = None,
            wait: Optional[dur.Durability] = None) -> Steps:
    """CONFIRM; with `wait`, with the gate on one connection
    (Settled.replicated)."""
    return (yield from _settle(key, rid, 'CONFIRM', flags, wait))


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
