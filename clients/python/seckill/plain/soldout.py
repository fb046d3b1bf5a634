"""The local sold-out flag (issue 18): its rules as plain code, no I/O.

After a flash sale sells out, most of its traffic is RESERVE calls that can
only answer SOLD_OUT. A process that keeps a flag per sale answers them
itself, with no round trip, while the flag holds. The flag trusts Redis,
never a pub/sub channel: anyone allowed to PUBLISH can send a message on
the channels the flag listens to (issue 23), so a message is a hint.

- Redis's own word sets it: a RESERVE reply that shows the sale at 0 units
  (SOLD_OUT, or the RESERVED that took the last unit); a read that proves
  it (INFO with `remaining` 0, made after a sold-out hint: `hint`, at most
  one per key per `verify_ms`); for a split sale, a snapshot of every key
  that proved the whole sale empty. A sold-out message alone sets nothing.
- A restock signal clears it: the event `seckill.restock` (for a split
  sale: of any of its keys), or any reply that shows units left (a
  RESERVED, a RELEASE that returned stock, ...). Clearing early only sends
  the next RESERVE to Redis, so a forged restock costs a round trip and
  can never make a wrong answer.
- It lapses `lapse_ms` after it was set (500 ms by default), and the next
  call asks Redis again. Pub/sub drops messages on a reconnect and the
  server may not have keyspace events enabled at all, so a lost restock
  delays a sale by at most that bound; it never stops it. Since only Redis
  sets the flag, the bound holds against anyone who can PUBLISH.

A reply can be older than a restock that arrived while its call was in
flight (the two come over different connections). So a call takes a
`token` before it is sent, and its reply changes the flag only when no
restock (or lost subscription) for that flag came since.

When a flag lapses, the first caller to see it goes to Redis (the probe);
the others keep answering locally until the probe's answer sets or clears
the flag, or for at most `probe_ms` (a probe that hangs). The probe is what
takes a restocked unit first, so it never delays a sale.

`SoldOutCache` is these rules, thread-safe (one lock, never held across
I/O), with an injectable monotonic clock. The pub/sub wiring that feeds it
signals and makes the verification reads is thin and separate
(seckill.drivers.soldout, seckill.drivers.aio_soldout);
`Sale(..., local_soldout=True)` and `SplitSale(..., local_soldout=True)`
use one cache per client, or pass a `SoldOutCache` to share one across a
process.
"""

from __future__ import annotations

import threading
import time
from collections import Counter, OrderedDict
from typing import Any, Callable, Dict, Hashable, Iterable, List, Optional, Set, Tuple

from . import protocol as p

SOLDOUT = 'seckill.soldout'
RESTOCK = 'seckill.restock'
WORDS = (SOLDOUT, RESTOCK)

CHANNEL_PREFIX = 'seckill:events:'
"""The Functions backend PUBLISHes `seckill.soldout` / `seckill.restock` on
`seckill:events:<key>`."""

DEFAULT_LAPSE_MS = 500
DEFAULT_PROBE_MS = 100
DEFAULT_VERIFY_MS = 500
"""At most one verification read per key per this many ms, however many
sold-out messages come."""
RETRY_MEMORY = 10_000
"""How many request ids whose RESERVE failed (no reply) a cache remembers:
their retry bypasses the flag (see SoldOutCache.retrying)."""


def keyspace_channel(key: str, db: int = 0) -> str:
    """The module's keyspace-event channel of `key` (`K` flag)."""
    return '__keyspace@%d__:%s' % (db, key)


def keyevent_channels(db: int = 0) -> List[str]:
    """The module's key-event channels (`E` flag): the message is the key."""
    return ['__keyevent@%d__:%s' % (db, w) for w in WORDS]


def event_channel(key: str) -> str:
    """The Functions backend's channel of `key`."""
    return CHANNEL_PREFIX + key


def key_channels(key: str, db: int = 0) -> List[str]:
    """Every channel a signal for `key` may come on, on either backend."""
    return [keyspace_channel(key, db), event_channel(key)]


def parse_message(channel: Any, data: Any) -> Optional[Tuple[str, str]]:
    """A pub/sub message as (key, word), or None when it is no stock signal
    (another keyspace event, a foreign channel)."""
    channel, data = p.text(channel), p.text(data)
    if not isinstance(channel, str) or not isinstance(data, str):
        return None
    if channel.startswith(CHANNEL_PREFIX):
        key, word = channel[len(CHANNEL_PREFIX):], data
    elif channel.startswith('__keyspace@'):
        key, word = channel.partition('__:')[2], data
    elif channel.startswith('__keyevent@'):
        key, word = data, channel.partition('__:')[2]
    else:
        return None
    return (key, word) if word in WORDS and key else None


def subscribed_key(channel: Any) -> Optional[str]:
    """The key a per-key channel is for (None for the key-event channels)."""
    channel = p.text(channel)
    if not isinstance(channel, str):
        return None
    if channel.startswith(CHANNEL_PREFIX):
        return channel[len(CHANNEL_PREFIX):]
    if channel.startswith('__keyspace@'):
        return channel.partition('__:')[2]
    return None


def notifications_deliver(flags: Optional[str]) -> Optional[bool]:
    """Whether a server's `notify-keyspace-events` setting delivers the
    module's events: class `d` (or `A`, which includes it) and a channel
    form, `K` or `E`. None when the setting is unknown (CONFIG refused)."""
    if flags is None:
        return None
    flags = str(flags)
    return ('d' in flags or 'A' in flags) and ('K' in flags or 'E' in flags)


class SoldOutCache:
    """Sold-out flags by name (a sale key, or a split sale's layout key),
    under the rules of the module docstring.

    `lapse_ms`: how long a flag holds without news; `probe_ms`: how long
    the other callers answer locally while the first caller after a lapse
    asks Redis; `verify_ms`: at most one verification read per key in that
    time, whatever number of sold-out hints arrive (None: hints are never
    verified, the flag lives on replies); `clock`: a monotonic clock in
    seconds (tests inject one).

    `stats` counts `local` (answers given without Redis), `probes`,
    `set_reply`, `set_verify`, `clear_event`, `clear_reply`,
    `clear_verify`, `stale_reply` (a reply older than a restock: ignored),
    `lost` (a subscription was (re)made: what it may have missed clears the
    flag), `failed`, `hints` (sold-out messages for a tracked key),
    `hints_limited` (not verified: a read was made less than `verify_ms`
    before), `verify` (verification reads asked for), `verify_failed`.
    """

    def __init__(self, lapse_ms: float = DEFAULT_LAPSE_MS, probe_ms: float = DEFAULT_PROBE_MS,
                 clock: Callable[[], float] = time.monotonic,
                 verify_ms: Optional[float] = DEFAULT_VERIFY_MS):
        if lapse_ms < 0 or probe_ms < 0:
            raise ValueError('lapse_ms and probe_ms must be >= 0')
        if verify_ms is not None and not verify_ms > 0:
            raise ValueError('verify_ms must be > 0 (None: never verify a hint)')
        self.lapse = lapse_ms / 1000.0
        self.probe = probe_ms / 1000.0
        self.verify = None if verify_ms is None else verify_ms / 1000.0
        self.clock = clock
        self.stats: Counter = Counter()
        self._lock = threading.Lock()
        self._until: Dict[Hashable, float] = {}      # name -> when its flag lapses
        self._probing: Dict[Hashable, float] = {}    # name -> until when a probe is trusted
        self._epoch: Dict[Hashable, int] = {}        # name -> restocks (and losses) seen
        self._verified: Dict[Hashable, float] = {}   # key -> when its last verification was asked
        self._tracked: Set[Hashable] = set()          # sale keys whose sold-out hints are verified
        self._groups: Dict[str, Set[Hashable]] = {}   # member key -> group names (split sales)
        self._retry: 'OrderedDict[str, None]' = OrderedDict()
        self.attachments: Dict[Any, Any] = {}
        """The wiring's subscriptions (one per client), kept with the cache."""

    def __repr__(self) -> str:
        return 'SoldOutCache(lapse_ms=%g, flags=%d)' % (self.lapse * 1000, len(self._until))

    # -- what a name is ------------------------------------------------------

    def track(self, key: str) -> None:
        """A sale key whose own sold-out hints are verified (`hint`)."""
        with self._lock:
            self._tracked.add(key)

    def group(self, name: Hashable, members: Iterable[str]) -> None:
        """A split sale: `name`'s flag is cleared by a restock of any member
        key (its pool and parts); no single member's sold-out sets it."""
        with self._lock:
            for groups in self._groups.values():
                groups.discard(name)
            for k in members:
                self._groups.setdefault(k, set()).add(name)
            self._groups = {k: g for k, g in self._groups.items() if g}

    # -- the hot path --------------------------------------------------------

    def check(self, name: Hashable) -> bool:
        """True: answer SOLD_OUT locally. False: ask Redis (no flag, or it
        lapsed and this caller is the probe), then report the answer with
        sold_out() / in_stock() / failed()."""
        with self._lock:
            until = self._until.get(name)
            if until is None:
                return False
            now = self.clock()
            if now < until:
                self.stats['local'] += 1
                return True
            probe = self._probing.get(name)
            if probe is None or now >= probe:
                self._probing[name] = now + self.probe
                self.stats['probes'] += 1
                return False
            self.stats['local'] += 1
            return True

    def is_set(self, name: Hashable) -> bool:
        """Whether the flag holds now (no probe taken, nothing counted)."""
        with self._lock:
            until = self._until.get(name)
            return until is not None and self.clock() < until

    def token(self, name: Hashable) -> int:
        """Taken before a call is sent: its reply counts only if no restock
        (or lost subscription) for `name` came in between."""
        with self._lock:
            return self._epoch.get(name, 0)

    # -- replies -------------------------------------------------------------

    def sold_out(self, name: Hashable, token: int, why: str = 'reply') -> bool:
        """A reply (or a split sale's snapshot) proved `name` at 0 units:
        sets the flag unless a restock came since `token`. True when set."""
        with self._lock:
            if self._epoch.get(name, 0) != token:
                self.stats['stale_reply'] += 1
                return False
            self._set(name)
            self.stats['set_' + why] += 1
            return True

    def in_stock(self, name: Hashable, token: int, why: str = 'reply') -> bool:
        """A reply showed units left: clears the flag unless a restock came
        since `token`. True when cleared (or already clear)."""
        with self._lock:
            if self._epoch.get(name, 0) != token:
                self.stats['stale_reply'] += 1
                return False
            if self._clear(name):
                self.stats['clear_' + why] += 1
            return True

    def reserved(self, name: Hashable, token: int, res: p.Reserved) -> None:
        """A plain sale's RESERVE reply: remaining 0 after SOLD_OUT or
        RESERVED sets the flag; units left, NO_SALE, NOT_STARTED and ENDED
        clear it (the local answer would be wrong for them); LIMIT and
        DUPLICATE at 0 units leave it alone."""
        if res.remaining > 0 or res.status in (p.NO_SALE, p.NOT_STARTED, p.ENDED):
            self.in_stock(name, token)
        elif res.status in (p.SOLD_OUT, p.RESERVED):
            self.sold_out(name, token)
        else:
            with self._lock:
                self._probing.pop(name, None)

    def settled(self, name: Hashable, token: int, res: p.Settled) -> None:
        """A RELEASE or CONFIRM reply: units left clear the flag (a RELEASE
        that returned stock)."""
        if res.remaining > 0:
            self.in_stock(name, token)

    def failed(self, name: Hashable, reqid: Optional[str] = None) -> None:
        """The call raised (no reply): the flag is dropped, so the next
        callers ask Redis as they would without it; `reqid`'s retry will
        bypass the flag."""
        with self._lock:
            self.stats['failed'] += 1
            self._clear(name)
            if reqid is not None:
                self._retry[reqid] = None
                self._retry.move_to_end(reqid)
                while len(self._retry) > RETRY_MEMORY:
                    self._retry.popitem(last=False)

    def retrying(self, reqid: Optional[str]) -> bool:
        """A RESERVE with `reqid` raised before: its retry must reach Redis
        (it may answer DUPLICATE with the unit the lost reply took)."""
        if reqid is None:
            return False
        with self._lock:
            return reqid in self._retry

    def answered(self, reqid: Optional[str]) -> None:
        """`reqid`'s retry got a reply: forget it."""
        if reqid is not None:
            with self._lock:
                self._retry.pop(reqid, None)

    # -- signals -----------------------------------------------------------

    def event(self, key: str, word: str) -> Optional[int]:
        """A pub/sub signal for `key`. `seckill.restock` clears the key's
        flag and every group's the key is in. `seckill.soldout` is a hint
        (anyone may PUBLISH it): it sets nothing, and returns the token of a
        verification read when one is due (see `hint`)."""
        if word == SOLDOUT:
            return self.hint(key)
        if word == RESTOCK:
            with self._lock:
                for name in self._names(key):
                    self._bump(name)
                    if self._clear(name):
                        self.stats['clear_event'] += 1
        return None

    def hint(self, key: str) -> Optional[int]:
        """A sold-out message for `key`. The token for a verification read
        (INFO of the key, reported with `verified`) when the key is tracked,
        its flag does not hold, and no read of it was asked for in the last
        `verify_ms`; None otherwise. So a flood of messages costs Redis at
        most one read per key per `verify_ms`, per cache."""
        with self._lock:
            if key not in self._tracked:
                return None
            self.stats['hints'] += 1
            now = self.clock()
            until = self._until.get(key)
            if self.verify is None or (until is not None and now < until):
                return None
            last = self._verified.get(key)
            if last is not None and now - last < self.verify:
                self.stats['hints_limited'] += 1
                return None
            self._verified[key] = now
            self.stats['verify'] += 1
            return self._epoch.get(key, 0)

    def verified(self, key: str, token: int, report: Optional[Dict[str, Any]]) -> None:
        """The verification read's INFO report (None: no such key). Redis
        showing 0 units left on a sale that is no draw sale sets the flag;
        units left or no sale clear it; both unless a restock came since
        `token`. (A draw sale answers RESERVE with DRAW: no flag.)"""
        if report is None or report.get('remaining', 0) > 0:
            self.in_stock(key, token, why='verify')
        elif report.get('mode') is None:
            self.sold_out(key, token, why='verify')

    def verify_failed(self, key: str) -> None:
        """The verification read raised: nothing was learned."""
        with self._lock:
            self.stats['verify_failed'] += 1

    def lost(self, key: str) -> None:
        """The subscription for `key` was (re)made: a restock may have been
        missed while it was down, so the flags it feeds are cleared."""
        with self._lock:
            for name in self._names(key):
                self._bump(name)
                if self._clear(name):
                    self.stats['lost'] += 1

    def clear(self, name: Hashable) -> None:
        """Forget `name`'s flag."""
        with self._lock:
            self._bump(name)
            self._clear(name)

    def close(self) -> None:
        """Stops the wiring attached to this cache (its pub/sub listeners)."""
        for w in list(self.attachments.values()):
            close = getattr(w, 'close', None)
            if close is not None:
                close()
        self.attachments.clear()

    # -- under the lock ------------------------------------------------------

    def _names(self, key: str) -> List[Hashable]:
        names: List[Hashable] = [key] if key in self._tracked else []
        names.extend(self._groups.get(key, ()))
        return names

    def _bump(self, name: Hashable) -> None:
        self._epoch[name] = self._epoch.get(name, 0) + 1

    def _set(self, name: Hashable) -> None:
        self._until[name] = self.clock() + self.lapse
        self._probing.pop(name, None)

    def _clear(self, name: Hashable) -> bool:
        self._probing.pop(name, None)
        return self._until.pop(name, None) is not None


__all__ = ['SoldOutCache', 'SOLDOUT', 'RESTOCK', 'CHANNEL_PREFIX', 'DEFAULT_LAPSE_MS',
           'DEFAULT_PROBE_MS', 'DEFAULT_VERIFY_MS', 'keyspace_channel', 'keyevent_channels',
           'event_channel', 'key_channels', 'parse_message', 'subscribed_key', 'notifications_deliver']
