"""Connections from a URL, Sentinel included: `connect(url)`.

- `redis://host:port/db` (and `rediss://`, `unix://`): redis.Redis.from_url.
- `redis+sentinel://host:port[,host:port...]/service[/db]`: the master of
  `service` as the Sentinels name it (redis-py's Sentinel machinery), and a
  daemon thread that follows failovers (MasterFollower): it subscribes to
  `+switch-master` on the Sentinels and, every `poll_s` too (a message
  lost with a Sentinel that died), asks them for the master. When the
  master changes, the pool's idle connections are closed and the ones in
  use are dropped when they come back (redis-py's SentinelConnectionPool
  keeps only connections to its current master), so a split-brain old
  master left running gets no more commands from this client after the
  switch; what was in flight on it fails or is refused by the WAIT gate
  (seckill.durability: a master without replicas acknowledges nothing).
  A password for the Redis servers goes in the URL's user part
  (`redis+sentinel://:secret@host:port/service`); the Sentinels are asked
  without one.

`parse_url` and `sentinel_url` are plain (tests/test_durability_protocol.py).
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass
from typing import Any, List, Optional, Sequence, Tuple
from urllib.parse import unquote, urlsplit

log = logging.getLogger('seckill.connect')

SENTINEL_SCHEME = 'redis+sentinel'
DEFAULT_SENTINEL_PORT = 26379
FOLLOWER_ATTR = '_seckill_follower'


@dataclass(frozen=True)
class SentinelTarget:
    """A parsed `redis+sentinel://` URL."""
    sentinels: Tuple[Tuple[str, int], ...]
    service: str
    db: int = 0
    username: Optional[str] = None
    password: Optional[str] = None


def _host_port(text: str) -> Tuple[str, int]:
    host, sep, port = text.strip().rpartition(':')
    if not sep:
        host, port = text.strip(), str(DEFAULT_SENTINEL_PORT)
    host = host.strip('[]')
    if not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError('sentinel address %r: expected host:port' % (text,))
    return host, int(port)


def parse_url(url: str) -> Optional[SentinelTarget]:
    """A `redis+sentinel://[user:password@]host:port[,host:port...]/service[/db]`
    URL as a SentinelTarget; None for any other scheme (a plain Redis URL).
    ValueError for a sentinel URL without a service or with a bad address
    or db."""
    parts = urlsplit(url)
    if parts.scheme != SENTINEL_SCHEME:
        return None
    netloc = parts.netloc
    username = password = None
    if '@' in netloc:
        cred, netloc = netloc.rsplit('@', 1)
        user, _, pw = cred.partition(':')
        username, password = unquote(user) or None, unquote(pw) or None
    if not netloc:
        raise ValueError('%s: no sentinel address' % url)
    hosts = tuple(_host_port(h) for h in netloc.split(',') if h.strip())
    path = [x for x in parts.path.split('/') if x]
    if not path or len(path) > 2:
        raise ValueError('%s: expected /service or /service/db after the sentinels' % url)
    db = 0
    if len(path) == 2:
        if not path[1].isdigit():
            raise ValueError('%s: db %r is not a number' % (url, path[1]))
        db = int(path[1])
    return SentinelTarget(hosts, unquote(path[0]), db, username, password)


def sentinel_url(sentinels: Sequence[str], service: str, db: int = 0) -> str:
    """The URL of `--sentinel host:port ... --service NAME` (checked)."""
    if not sentinels or not service:
        raise ValueError('--sentinel needs --service, and --service a --sentinel')
    hosts = ','.join('%s:%d' % _host_port(s) for s in sentinels)
    return '%s://%s/%s/%d' % (SENTINEL_SCHEME, hosts, service, db)


def parse_switch(data: Any) -> Optional[Tuple[str, Tuple[str, int]]]:
    """A `+switch-master` message ('service old-ip old-port new-ip
    new-port') as (service, (new ip, new port)); None if malformed."""
    if isinstance(data, (bytes, bytearray)):
        data = data.decode('utf-8', 'replace')
    words = str(data).split()
    if len(words) != 5 or not words[4].isdigit():
        return None
    return words[0], (words[3], int(words[4]))


def connect(url: str, *, decode_responses: bool = True, socket_timeout: float = 10,
            follow: bool = True, poll_s: float = 1.0, **kw: Any):
    """A redis-py client for `url` (the module docstring). For a Sentinel
    URL, `follow` starts the MasterFollower (`client._seckill_follower`;
    stop it with close_follower(client) when done)."""
    import redis
    target = parse_url(url)
    if target is None:
        return redis.Redis.from_url(url, decode_responses=decode_responses,
                                    socket_timeout=socket_timeout, **kw)
    from redis.sentinel import Sentinel
    sentinel = Sentinel(list(target.sentinels), socket_timeout=min(socket_timeout, 2.0),
                        sentinel_kwargs={'socket_timeout': min(socket_timeout, 2.0)})
    client = sentinel.master_for(target.service, db=target.db, username=target.username,
                                 password=target.password, decode_responses=decode_responses,
                                 socket_timeout=socket_timeout, **kw)
    if follow:
        f = MasterFollower(sentinel, target.service, client.connection_pool, poll_s)
        setattr(client, FOLLOWER_ATTR, f)
        f.start()
    return client


def close_follower(client: Any) -> None:
    f = getattr(client, FOLLOWER_ATTR, None)
    if f is not None:
        f.stop()


def switched(follower: Any, before: Any, after: Any) -> bool:
    """Whether the master moved from `before` to `after` (counted in
    follower.switches and logged); a first address is no switch."""
    if before is None or after == before:
        return False
    follower.switches += 1
    log.warning('%s: master %s:%s -> %s:%s', follower.service, before[0], before[1],
                after[0], after[1])
    return True


class MasterFollower(threading.Thread):
    """Follows `service`'s master for a SentinelConnectionPool (the module
    docstring). `switches` counts the changes it saw."""

    def __init__(self, sentinel: Any, service: str, pool: Any, poll_s: float = 1.0):
        super().__init__(name='seckill-sentinel-%s' % service, daemon=True)
        self.sentinel = sentinel
        self.service = service
        self.pool = pool
        self.poll_s = poll_s
        self.switches = 0
        self._stop = threading.Event()

    def stop(self) -> None:
        self._stop.set()

    def check(self) -> bool:
        """Asks the Sentinels for the master now; True when it changed (the
        pool then dropped its connections to the old one)."""
        before = self.pool.master_address
        return switched(self, before, self.pool.get_master_address())  # drops idle ones

    def run(self) -> None:
        turn = 0
        while not self._stop.is_set():
            sentinels: List[Any] = list(self.sentinel.sentinels)
            ps = None
            try:
                ps = sentinels[turn % len(sentinels)].pubsub(ignore_subscribe_messages=True)
                ps.subscribe('+switch-master')
                while not self._stop.is_set():
                    msg = ps.get_message(timeout=self.poll_s)
                    if msg is not None:
                        switch = parse_switch(msg.get('data'))
                        if switch is None or switch[0] != self.service:
                            continue
                    self._check_quietly()
            except Exception as exc:   # that Sentinel is gone: the next one
                log.debug('sentinel subscription: %s', exc)
                turn += 1
                self._check_quietly()
                self._stop.wait(min(self.poll_s, 0.5))
            finally:
                if ps is not None:
                    try:
                        ps.close()
                    except Exception:  # pragma: no cover - closing a dead socket
                        pass

    def _check_quietly(self) -> None:
        try:
            self.check()
        except Exception as exc:        # no Sentinel answers, or no master yet
            log.debug('sentinel check: %s', exc)


__all__ = ['SentinelTarget', 'parse_url', 'sentinel_url', 'parse_switch', 'connect',
           'close_follower', 'MasterFollower', 'switched']
