"""The pub/sub wiring of the local sold-out flag (seckill.soldout), sync.

One `Watcher` per (cache, client): a thread per Redis node subscribes, on
the node that owns each watched key (keyspace events are node-local in a
cluster), to every channel a stock signal may come on: the key's keyspace
channel and the Functions backend's `seckill:events:<key>`, plus the node's
two key-event channels. Messages go to the cache (SoldOutCache.event); a
(re)subscription tells the cache what it may have missed (lost). A node
that fails is subscribed again after a short wait. In a cluster, keys are
moved to their new node when the client's slot map says they moved.

A sold-out message is only a hint (anyone allowed to PUBLISH can send one):
when the cache says a verification is due, the listener reads the key's
INFO through the client (the node that owns the key) and hands the report
to the cache (SoldOutCache.verified), which alone decides.
"""

from __future__ import annotations

import collections
import logging
import threading
import time
import weakref
from typing import Any, Deque, Dict, Iterable, Optional, Tuple

from ..ops import sale as ops
from ..plain import soldout as so
from ..plain.steps import scope
from .sync import Driver, address

try:  # redis-py >= 4.1
    from redis.cluster import RedisCluster
except ImportError:  # pragma: no cover
    RedisCluster = ()  # type: ignore

log = logging.getLogger('seckill.soldout')

POLL_S = 0.05           # a listener's longest wait for a message
REROUTE_S = 1.0         # how often a cluster's key placement is checked
BACKOFF_S = (0.1, 0.2, 0.5, 1.0)


def client_db(client: Any) -> int:
    pool = getattr(client, 'connection_pool', None)
    kw = getattr(pool, 'connection_kwargs', None) or {}
    return int(kw.get('db', 0) or 0)


def config_flags(reply: Any) -> Optional[str]:
    """CONFIG GET notify-keyspace-events's reply (a dict, or a flat list) as
    the flag string."""
    if isinstance(reply, dict):
        for k, v in reply.items():
            if so.p.text(k) == 'notify-keyspace-events':
                return so.p.text(v)
        return None
    if isinstance(reply, (list, tuple)) and len(reply) >= 2:
        return so.p.text(reply[1])
    return None


class NodeSubscriptions:
    """What one node's listener has to (un)subscribe: plain bookkeeping,
    shared by the sync and async listeners."""

    def __init__(self, db: int):
        self.db = db
        self.keys: set = set()
        self.view: frozenset = frozenset()        # keys, as other threads may read them
        self.pending: Deque[Tuple[str, str]] = collections.deque()

    def add(self, key: str) -> None:
        self.pending.append(('+', key))

    def remove(self, key: str) -> None:
        self.pending.append(('-', key))

    def take(self) -> Tuple[list, list]:
        """(channels to subscribe, channels to unsubscribe) since last time."""
        sub, unsub = [], []
        while self.pending:
            op, key = self.pending.popleft()
            if op == '+' and key not in self.keys:
                self.keys.add(key)
                sub += so.key_channels(key, self.db)
            elif op == '-' and key in self.keys:
                self.keys.discard(key)
                unsub += so.key_channels(key, self.db)
        if sub or unsub:
            self.view = frozenset(self.keys)
        return sub, unsub

    def reset(self) -> list:
        """After a lost connection: every channel to subscribe again."""
        self.take()
        return [c for k in sorted(self.keys) for c in so.key_channels(k, self.db)]


def dispatch(cache: so.SoldOutCache, msg: Any, node_keys: Iterable[str]) -> Optional[Tuple[str, int]]:
    """One pub/sub message to the cache: a stock signal, or a subscription
    confirmation (what the channel feeds may have been missed). Returns
    (key, token) when a sold-out hint is to be verified by a read."""
    if not msg:
        return None
    kind = so.p.text(msg.get('type'))
    if kind == 'message':
        ev = so.parse_message(msg.get('channel'), msg.get('data'))
        if ev is not None:
            token = cache.event(*ev)
            if token is not None:
                return ev[0], token
    elif kind == 'subscribe':
        key = so.subscribed_key(msg.get('channel'))
        for k in ([key] if key is not None else list(node_keys)):
            cache.lost(k)
    return None


def report_verification(cache: so.SoldOutCache, key: str, token: int, report: Any,
                        error: Optional[BaseException]) -> None:
    """A verification read's outcome to the cache (sync and async share it)."""
    if error is not None:
        log.debug('seckill sold-out verification of %s: %r', key, error)
        cache.verify_failed(key)
    else:
        cache.verified(key, token, report)


class _Listener(threading.Thread):
    """One node's subscriptions, read by one daemon thread (the only one
    touching its PubSub)."""

    def __init__(self, watcher: 'Watcher', name: str, node: Any):
        super().__init__(name='seckill-soldout-%s' % name, daemon=True)
        self.w = watcher
        self.node_name = name
        self.node = node
        self.subs = NodeSubscriptions(watcher.db)
        self.stopping = threading.Event()

    def _pubsub(self) -> Any:
        if self.w.cluster:
            return self.w.client.get_redis_connection(self.node).pubsub()
        return self.w.client.pubsub()

    def _config(self) -> Optional[str]:
        try:
            if self.w.cluster:
                conn = self.w.client.get_redis_connection(self.node)
                return config_flags(conn.execute_command('CONFIG', 'GET', 'notify-keyspace-events'))
            return config_flags(self.w.client.execute_command('CONFIG', 'GET',
                                                              'notify-keyspace-events'))
        except Exception:        # CONFIG refused (ACL, a managed service): unknown
            return None

    def run(self) -> None:
        cache = self.w.cache
        ps = None
        failures = 0
        last_route = time.monotonic()
        while not self.stopping.is_set():
            try:
                if ps is None:
                    ps = self._pubsub()
                    ps.subscribe(*(so.keyevent_channels(self.subs.db) + self.subs.reset()))
                    self.w.note_config(self.node_name, self._config())
                sub, unsub = self.subs.take()
                if sub:
                    ps.subscribe(*sub)
                if unsub:
                    ps.unsubscribe(*unsub)
                due = dispatch(cache, ps.get_message(timeout=POLL_S), self.subs.keys)
                if due is not None:
                    self.w.verify(*due)
                failures = 0
            except Exception as exc:
                if self.stopping.is_set():
                    break
                log.debug('seckill sold-out listener on %s: %r', self.node_name, exc)
                for k in list(self.subs.keys):
                    cache.lost(k)
                _close(ps)
                ps = None
                self.stopping.wait(BACKOFF_S[min(failures, len(BACKOFF_S) - 1)])
                failures += 1
            if self.w.cluster and time.monotonic() - last_route > REROUTE_S:
                last_route = time.monotonic()
                self.w.reroute()
        _close(ps)


def _close(ps: Any) -> None:
    if ps is not None:
        try:
            ps.close()
        except Exception:
            pass


class Routes:
    """Which node's listener subscribes each watched key: the bookkeeping
    the thread and asyncio watchers share. Subclasses make a node's
    listener (`_listener`) and, when threads touch it, hold their lock
    around these calls."""

    def __init__(self, client: Any, cache: so.SoldOutCache, cluster: bool):
        self.client = client
        self.cache = cache
        self.cluster = cluster
        self.db = 0 if self.cluster else client_db(client)
        self.notifications: Dict[str, Optional[str]] = {}
        self._where: Dict[str, str] = {}              # key -> node name
        self._listeners: Dict[str, Any] = {}
        self._closed = False

    def _listener(self, name: str, node: Any) -> Any:
        raise NotImplementedError

    def _node_of(self, key: str) -> Tuple[str, Any]:
        if self.cluster:
            node = self.client.get_node_from_key(key)
            return node.name, node
        return address(self.client), None

    def _add(self, keys: Iterable[str]) -> None:
        for key in keys:
            if key in self._where:
                continue
            name, node = self._node_of(key)
            self._where[key] = name
            self._listener(name, node).subs.add(key)

    def _drop(self, keys: Iterable[str]) -> None:
        for key in keys:
            name = self._where.pop(key, None)
            if name is not None:
                self._listeners[name].subs.remove(key)

    def _reroute(self) -> None:
        if self._closed:
            return
        for key, name in list(self._where.items()):
            try:
                new, node = self._node_of(key)
            except Exception:
                continue
            if new != name:
                self._listeners[name].subs.remove(key)
                self._where[key] = new
                self._listener(new, node).subs.add(key)
                self.cache.lost(key)

    def _subscribed(self) -> Dict[str, set]:
        return {name: set(lis.subs.view) for name, lis in self._listeners.items()}

    def note_config(self, node: str, flags: Optional[str]) -> None:
        old = self.notifications.get(node, '?')
        self.notifications[node] = flags
        if flags != old and so.notifications_deliver(flags) is False:
            log.warning('notify-keyspace-events is %r on %s: the seckill module\'s sold-out and '
                        'restock events are not delivered (enable them with CONFIG SET '
                        'notify-keyspace-events Kd); the local sold-out flag works from replies '
                        'alone and lapses after %g ms', flags, node, self.cache.lapse * 1000)


class Watcher(Routes):
    """Subscriptions that feed `cache` the stock signals of the keys it
    watches, over `client` (redis.Redis or redis.cluster.RedisCluster).

    `notifications`: per node, the server's `notify-keyspace-events` as
    read (None: CONFIG refused). When it lacks `d`, or both `K` and `E`,
    the module's events never come: a warning is logged once, and the
    flag still works from replies, lapsing after the cache's bound.
    """

    def __init__(self, client: Any, cache: so.SoldOutCache):
        super().__init__(client, cache, bool(RedisCluster) and isinstance(client, RedisCluster))
        self._lock = threading.Lock()
        self._driver = Driver(client)

    def verify(self, key: str, token: int) -> None:
        """The verification read of a sold-out hint: the key's INFO, from
        the node that owns it (on the calling listener's thread)."""
        report, error = None, None
        try:
            report = self._driver.run(ops.info(key))
        except Exception as exc:
            error = exc
        report_verification(self.cache, key, token, report, error)

    def _listener(self, name: str, node: Any) -> _Listener:
        lis = self._listeners.get(name)
        if lis is None:
            lis = self._listeners[name] = _Listener(self, name, node)
            lis.start()
        return lis

    def watch(self, keys: Iterable[str]) -> None:
        """Subscribes the keys' channels on their nodes (in the background:
        the first signals may come a few milliseconds later)."""
        with self._lock:
            if not self._closed:
                self._add(keys)

    def unwatch(self, keys: Iterable[str]) -> None:
        """Drops the keys' subscriptions (their flags then live on replies
        and the lapse alone)."""
        with self._lock:
            self._drop(keys)

    def reroute(self) -> None:
        """Moves keys whose slot the client now sees on another node."""
        with self._lock:
            self._reroute()

    def subscribed(self) -> Dict[str, set]:
        """The keys each node's listener has subscribed (for tests)."""
        with self._lock:
            return self._subscribed()

    def close(self) -> None:
        with self._lock:
            self._closed = True
            listeners = list(self._listeners.values())
            self._listeners.clear()
            self._where.clear()
        for lis in listeners:
            lis.stopping.set()
        for lis in listeners:
            if lis is not threading.current_thread():
                lis.join(timeout=2)


_SHARED: 'weakref.WeakKeyDictionary[Any, so.SoldOutCache]' = weakref.WeakKeyDictionary()
_SHARED_LOCK = threading.Lock()


def shared_cache(client: Any, **kw: Any) -> so.SoldOutCache:
    """The one cache of `client`'s connection pool (a cluster client: of the
    client), made on first use with `kw` (lapse_ms, probe_ms)."""
    owner = scope(client)
    with _SHARED_LOCK:
        cache = _SHARED.get(owner)
        if cache is None:
            cache = _SHARED[owner] = so.SoldOutCache(**kw)
        return cache


def resolve(client: Any, local_soldout: Any) -> Optional[so.SoldOutCache]:
    """`local_soldout` of a Sale: False/None (no flag), True (the client's
    shared cache) or a SoldOutCache."""
    if local_soldout is None or local_soldout is False:
        return None
    if local_soldout is True:
        return shared_cache(client)
    if isinstance(local_soldout, so.SoldOutCache):
        return local_soldout
    raise TypeError('local_soldout: True, False or a SoldOutCache, not %r' % (local_soldout,))


def watcher(cache: so.SoldOutCache, client: Any) -> Watcher:
    """The watcher feeding `cache` over `client` (one per client scope)."""
    owner = id(scope(client))
    with _SHARED_LOCK:
        w = cache.attachments.get(owner)
        if w is None or w._closed:
            w = cache.attachments[owner] = Watcher(client, cache)
        return w


__all__ = ['Watcher', 'NodeSubscriptions', 'dispatch', 'report_verification', 'shared_cache',
           'resolve', 'watcher', 'config_flags']
