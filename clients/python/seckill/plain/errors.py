"""Which Redis errors are transient: the one definition the package uses.

`transient(exc)` is True when Redis, or the route to it, cannot serve the
command now and the same command may succeed later: nothing about the
command itself is wrong. Every caller does the same with such an error,
each in its own way: the split-sale driver retries its idempotent writes
after a topology refresh, `pay()` answers RETRY, the worker backs off and
reads again. None of them retries a non-idempotent command on its own.

The union, and why each member is in it:

- connection errors and timeouts (redis-py's ConnectionError, which
  includes LOADING as BusyLoadingError, and TimeoutError): a server
  restarting, loading its data set, or out of reach;
- TRYAGAIN: a key of the command is mid-migration (the module answers it
  when a sale's stream moved before the sale);
- MOVED and ASK: the slot moved (a reshard or a failover); a cluster-aware
  caller refreshes its slot map and goes on;
- CLUSTERDOWN and MASTERDOWN: a failover is under way;
- READONLY: a master was demoted to a replica under a writing client;
- BUSY: a script or function is running and the server answers nothing else.

redis-py turns TRYAGAIN, MOVED, ASK, CLUSTERDOWN, MASTERDOWN, READONLY and
LOADING into their own exception classes and drops the word from the
message, so the classes are checked first; the first word of the message is
also checked, for a client or parser that keeps it (a plain ResponseError).
"""

from __future__ import annotations

from redis.exceptions import (AskError, ClusterDownError, ClusterError, ReadOnlyError,
                              ResponseError, TryAgainError)
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

TRANSIENT_CLASSES = (RedisConnectionError, RedisTimeoutError, TryAgainError, AskError,
                     ClusterDownError, ReadOnlyError)
"""MovedError is an AskError; MasterDownError a ClusterDownError;
BusyLoadingError (LOADING) a ConnectionError."""

TRANSIENT_WORDS = frozenset({'LOADING', 'TRYAGAIN', 'MOVED', 'ASK', 'CLUSTERDOWN',
                             'MASTERDOWN', 'READONLY', 'BUSY'})


def first_word(exc: BaseException) -> str:
    """The first word of an error's message ('' when it has none)."""
    words = str(exc).split(None, 1)
    return words[0] if words else ''


def transient(exc: BaseException) -> bool:
    """True for an error that says "not now" rather than "not this": see the
    module docstring for the list and the reasons."""
    if isinstance(exc, TRANSIENT_CLASSES):
        return True
    return isinstance(exc, ResponseError) and first_word(exc) in TRANSIENT_WORDS


def is_tryagain(exc: BaseException) -> bool:
    """TRYAGAIN: the server refused the command before doing anything (the
    module, when a sale's stream key is mid-migration; Redis, for keys split
    by a migration), so any command, idempotent or not, may be sent again."""
    return isinstance(exc, TryAgainError) or (
        isinstance(exc, ResponseError) and first_word(exc) == 'TRYAGAIN')


def redirects_exhausted(exc: BaseException) -> bool:
    """A redis-py cluster client gave up on its own: it retries MOVED, ASK
    and TRYAGAIN itself (16 tries, about 0.4 s for TRYAGAIN) and then raises
    ClusterError('TTL exhausted.'). None of those tries ran the command."""
    return isinstance(exc, ClusterError) and str(exc).startswith('TTL exhausted')

