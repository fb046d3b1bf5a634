"""What the client's operations ask of Redis, as plain values (sans-IO).

Every operation of `Sale` and `SplitSale` is written once, as a generator
that yields these steps and is sent back each step's result (or has the
step's error thrown in at the yield, so `try`/`except` around a `yield`
works as around a call). Nothing here does I/O: a driver executes the
steps, `seckill.drivers.sync.Driver` with redis-py and `seckill.drivers.aio.
AsyncDriver` with redis.asyncio. So the protocol and the decisions exist
once, and the sync and async clients only send commands.

    def reserve(key, user):                       # an operation
        reply = yield from call(p.reserve_args(key, user))
        return p.parse_reserved(reply)

    Driver(client).run(reserve('sale:{1}', 'u1'))           # sync
    await AsyncDriver(client).run(reserve('sale:{1}', 'u1'))  # async
"""

from __future__ import annotations

from dataclasses import dataclass
from time import monotonic
from typing import Any, Generator, Hashable, Optional, Sequence, Tuple

from .errors import is_tryagain, redirects_exhausted

Steps = Generator[Any, Any, Any]
"""An operation: a generator of steps returning its result."""


@dataclass(frozen=True)
class Call:
    """One command through the client (a cluster client routes it by key):
    its reply."""
    args: Sequence[Any]


@dataclass(frozen=True)
class Round:
    """Commands in one parallel round (a pipeline: in a cluster, written to
    every node before any reply is read): their replies in order; the first
    error reply is raised."""
    commands: Sequence[Sequence[Any]]


@dataclass(frozen=True)
class OnNode:
    """Commands pipelined on one connection to the master serving `key` (a
    SEND and the WAIT for it must share a connection): their replies in
    order, an error reply as its exception object in its place."""
    key: str
    commands: Sequence[Sequence[Any]]


@dataclass(frozen=True)
class Sleep:
    seconds: float


@dataclass(frozen=True)
class Refresh:
    """Read the cluster's slot map again (nothing on one node); `replicas`:
    also forget a plain client's cached replica count."""
    replicas: bool = False


@dataclass(frozen=True)
class Replicas:
    """How many replicas the master serving `key` has."""
    key: str


@dataclass(frozen=True)
class ReplicaInfo:
    """The seckill.durability.ReplicaState of the master serving `key`, kept
    on the client's scope: its online replica count read again (INFO
    replication on that master) when older than a second, or at once with
    `fresh`."""
    key: str
    fresh: bool = False


@dataclass(frozen=True)
class Masters:
    """(owner, masters): `owner(slot)` names the master serving a slot and
    `masters` lists every master's name, from a fresh slot map; (None, [])
    on one node."""


@dataclass(frozen=True)
class NodeName:
    """`host:port` of the master serving `key`."""
    key: str


@dataclass(frozen=True)
class Locked:
    """Runs the operation `body` holding this client object's lock `name`
    (a threading.Lock under the sync driver, an asyncio.Lock under the
    async one): one thread or task at a time. Its result is body's."""
    name: Hashable
    body: Steps


TRYAGAIN_DELAYS = (0.05, 0.1, 0.15, 0.25, 0.45)
"""The waits between the tries of a command answered TRYAGAIN: six tries
over one second, then the TRYAGAIN error goes to the caller."""

TRYAGAIN_BUDGET = 1.5
"""No wait that would end past this many seconds from the first try: a
cluster client's tries each take its own ~0.4 s of retries."""


def advance(op: Steps, value: Any, error: Optional[BaseException]) -> Tuple[bool, Any]:
    """Resumes `op` with its last step's value, or throws that step's error
    into it: (True, its result) when it ended, else (False, its next step).
    Both drivers (sync and asyncio) run every operation through this."""
    try:
        return False, (op.send(value) if error is None else op.throw(error))
    except StopIteration as stop:
        return True, stop.value


def drive(op: Steps, do: Any, catch: Any = Exception) -> Any:
    """Runs `op` with `do(step)` as each step's value (its exception, of
    the class `catch`, thrown in where it yielded): the sync driver's loops
    in one place. Returns op's result."""
    value: Any = None
    error: Any = None
    while True:
        done, step = advance(op, value, error)
        if done:
            return step
        value = error = None
        try:
            value = do(step)
        except catch as exc:   # thrown into the operation, which may handle it
            error = exc


def scope(client: Any) -> Any:
    """What belongs to a connection pool rather than to one client object
    (the detected backend, the key lists, the replica memory, the local
    sold-out flags): a plain client's connection pool (clients sharing a
    pool share it), a cluster client itself."""
    return getattr(client, 'connection_pool', None) or client


def kept(scope: Any, attr: str, make: Any) -> Any:
    """The object kept on a client's scope under `attr` (made by `make()`
    the first time): what belongs to a connection pool, not to one driver."""
    found = getattr(scope, attr, None)
    if found is None:
        found = make()
        setattr(scope, attr, found)
    return found


def call(args: Sequence[Any]) -> Steps:
    """One command: its reply. The one place the client retries TRYAGAIN
    (a key of the command is mid-migration: the module answers it when a
    sale's stream moved before the sale): the server did nothing, so the
    command is sent again after each of TRYAGAIN_DELAYS, within
    TRYAGAIN_BUDGET. A cluster client's ClusterError('TTL exhausted.') is
    the same answer after its own retries. Every other error goes to the
    caller at once (a RESERVE whose reply was lost must not be sent twice)."""
    t0 = monotonic()
    for delay in TRYAGAIN_DELAYS:
        try:
            return (yield Call(args))
        except Exception as exc:
            if not (is_tryagain(exc) or redirects_exhausted(exc)):
                raise
            if monotonic() - t0 + delay > TRYAGAIN_BUDGET:
                raise
        yield Sleep(delay)
    return (yield Call(args))


def one(step: Any) -> Steps:
    """An operation of one step: its result."""
    return (yield step)


def pairs_dict(reply: Any) -> dict:
    """HGETALL's reply (a dict, or a flat list under some clients) as a dict."""
    if isinstance(reply, (list, tuple)):
        return dict(zip(reply[0::2], reply[1::2]))
    return dict(reply or {})


__all__ = ['TRYAGAIN_DELAYS', 'TRYAGAIN_BUDGET', 'Steps', 'Call', 'Round', 'OnNode', 'Sleep',
           'Refresh', 'Replicas', 'ReplicaInfo', 'Masters', 'NodeName', 'Locked', 'call', 'one', 'pairs_dict',
           'drive', 'kept', 'scope']
