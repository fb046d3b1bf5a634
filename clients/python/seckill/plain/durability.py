"""How many replicas must have a write before the pipeline acts on it: the
WAIT gate (plain: no I/O; seckill.ops.sale runs it, docs/pipeline.md).

Redis replicates asynchronously: a master acknowledges a CONFIRM (or a
RESERVE) before any replica has it, and a failover in that window loses
it. `WAIT n timeout` answers how many replicas have every write the
*connection* sent so far that propagated. So the gate pipelines, on one
connection: the command it covers, a small write that always propagates
(`SET <sync key> 1 PX 10000`, in the sale's hash slot: a CONFIRM that
answers ALREADY_CONFIRMED, or an XREADGROUP that reads old entries,
propagates nothing, and WAIT would then cover an older write or none),
then `WAIT n timeout`. The SET comes after the covered command, and the
replication stream is one ordered log, so a replica that has the SET has
everything the master did before it: the worker's batch WAIT covers
every RESERVE and CONFIRM whose stream entry it read.

`Durability(replicas='auto', timeout_ms=1000)`: `replicas` is a number,
or 'auto': every replica the master reports online, and at least 1 once
this client (its connection pool) has seen that master with a replica.
That memory is sticky: a split-brain master that lost its replicas (they
follow the promoted one) then answers WAIT 0 and the gate stays shut, so
it captures no payment and commits no order. 'auto' allows 0 only on a
server this client never saw with a replica (a lone development server).
A process started while its master already lost its replicas cannot know
better: a deployment with replicas sets `replicas=1` (or more).
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Sequence, Union

from .split_protocol import hash_tag
from .steps import kept

AUTO = 'auto'
DEFAULT_TIMEOUT_MS = 1000
COUNT_TTL_S = 1.0
"""How long a master's replica count is trusted before INFO is asked again
(a short WAIT asks at once)."""
SYNC_PX_MS = 10_000
SYNC_SUFFIX = ':seckill-sync'


@dataclass(frozen=True)
class Durability:
    """The WAIT gate's setting: `replicas` ('auto' or a number >= 0) and
    `timeout_ms` (> 0), how long one WAIT may block."""
    replicas: Union[str, int] = AUTO
    timeout_ms: int = DEFAULT_TIMEOUT_MS

    def __post_init__(self) -> None:
        if self.replicas != AUTO and (isinstance(self.replicas, bool)
                                      or not isinstance(self.replicas, int)
                                      or self.replicas < 0):
            raise ValueError("replicas: 'auto' or a number >= 0, not %r" % (self.replicas,))
        if isinstance(self.timeout_ms, bool) or not isinstance(self.timeout_ms, int) \
                or self.timeout_ms < 1:
            raise ValueError('timeout_ms must be a positive integer, not %r' % (self.timeout_ms,))

    @property
    def off(self) -> bool:
        """replicas=0: no WAIT at all (the behaviour before the gate)."""
        return self.replicas == 0

    def required(self, state: 'ReplicaState') -> int:
        """The replicas a WAIT must reach on the master `state` describes."""
        if self.replicas != AUTO:
            return int(self.replicas)
        return max(state.count, 1 if state.seen else 0)


DEFAULT = Durability()
OFF = Durability(replicas=0)


def resolve(value: Any) -> Optional[Durability]:
    """A method's `wait=` / `durability=` argument: None or False -> None
    (no gate), True -> DEFAULT, a Durability as given, an int -> that many
    replicas with the default timeout."""
    if value is None or value is False:
        return None
    if value is True:
        return DEFAULT
    if isinstance(value, Durability):
        return value
    if isinstance(value, int):
        return Durability(replicas=value)
    raise TypeError('wait/durability: a Durability, True, False, None or a replica count, '
                    'not %r' % (value,))


def setting(value: Any) -> Durability:
    """A pipeline's `durability=` argument (pay, Worker, reconcile): None or
    True -> DEFAULT, False -> OFF, an int -> that many replicas, a
    Durability as given."""
    if value is None or value is True:
        return DEFAULT
    if value is False:
        return OFF
    return resolve(value) or OFF


class ReplicaState:
    """What a client knows of one master's replicas: the last count (online
    replicas of INFO replication), when it was read, and whether it was ever
    above 0 (sticky)."""

    def __init__(self) -> None:
        self.count = 0
        self.seen = False
        self.read_at: Optional[float] = None
        self._lock = threading.Lock()

    def stale(self, now: Optional[float] = None) -> bool:
        now = time.monotonic() if now is None else now
        return self.read_at is None or now - self.read_at >= COUNT_TTL_S

    def update(self, count: int, now: Optional[float] = None) -> None:
        with self._lock:
            self.count = max(0, int(count))
            self.seen = self.seen or self.count > 0
            self.read_at = time.monotonic() if now is None else now


class ReplicaMemory:
    """ReplicaState per master, kept on a client's scope (its connection
    pool: clients sharing a pool share it; a Sentinel client's one pool
    follows the service across failovers, so the memory does too)."""

    def __init__(self) -> None:
        self._states: Dict[str, ReplicaState] = {}
        self._lock = threading.Lock()

    def state(self, node: str = '') -> ReplicaState:
        with self._lock:
            st = self._states.get(node)
            if st is None:
                st = self._states[node] = ReplicaState()
            return st


MEMORY_ATTR = '_seckill_replicas'


def memory_of(scope: Any) -> ReplicaMemory:
    """The ReplicaMemory kept on `scope` (seckill.backend.scope(client))."""
    return kept(scope, MEMORY_ATTR, ReplicaMemory)


def online_replicas(info: Dict[str, Any]) -> int:
    """Replicas in state `online` in INFO replication (parsed by redis-py:
    `slaveN` values are dicts; a raw `ip=..,state=..` string works too). A
    replica still loading the master's dataset cannot acknowledge: not
    counted. A server that is itself a replica: 0."""
    if str(info.get('role', 'master')) != 'master':
        return 0
    n = 0
    for k, v in info.items():
        if not (isinstance(k, str) and k.startswith('slave') and k[5:].isdigit()):
            continue
        if isinstance(v, str):
            v = dict(kv.split('=', 1) for kv in v.split(',') if '=' in kv)
        if isinstance(v, dict) and str(v.get('state', '')) == 'online':
            n += 1
    return n


def sync_key(key: str) -> str:
    """The key of the gate's propagating write for sale `key`: in its hash
    slot (`<key>:seckill-sync` when the key has a tag, else
    `{<key>}:seckill-sync`), so it goes to the sale's master on a cluster."""
    tagged = hash_tag(key) != key.encode('utf-8')
    return key + SYNC_SUFFIX if tagged else '{%s}%s' % (key, SYNC_SUFFIX)


def gate_commands(key: str, need: int, timeout_ms: int) -> List[List[Any]]:
    """The commands appended to the covered ones: the propagating SET, WAIT."""
    return [['SET', sync_key(key), '1', 'PX', SYNC_PX_MS], ['WAIT', int(need), int(timeout_ms)]]


@dataclass(frozen=True)
class Gate:
    """One gate's outcome: `acked` replicas had the write within the
    timeout, `need` were required; `ok` when acked >= need."""
    acked: int
    need: int

    @property
    def ok(self) -> bool:
        return self.acked >= self.need


def acked_of(replies: Sequence[Any]) -> int:
    """WAIT's reply (the last of the pipelined replies); an error reply
    (a replica answering READONLY to the SET, say) counts as 0."""
    for r in replies[-2:]:
        if isinstance(r, Exception):
            return 0
    try:
        return int(replies[-1])
    except (TypeError, ValueError):
        return 0


__all__ = ['AUTO', 'DEFAULT', 'OFF', 'Durability', 'Gate', 'ReplicaMemory', 'ReplicaState',
           'acked_of', 'gate_commands', 'memory_of', 'online_replicas', 'resolve', 'setting',
           'sync_key']
