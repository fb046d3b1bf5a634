"""Which backend serves SECKILL.*: the module ('module') or the Redis
Functions library functions/seckill.lua ('functions'; docs/managed-redis.md).

Plain functions, no I/O:
- `to_functions(args)`: one command as the library takes it
  (`SECKILL.X key args...` -> `FCALL seckill_x 1 key args...`, `FCALL_RO`
  for INFO, GET and ENTRANTS); any other command unchanged. The library answers like
  the module under RESP2, so the replies parse the same.
- `choose(module_reply, version_reply)`: the backend from the replies to
  `SECKILL.INFO` without a key (the module answers its arity error, any
  user: arity comes before the ACL; without it, `unknown command`) and
  `FCALL_RO seckill_version 0`. Neither needs MODULE LIST or FUNCTION
  LIST, which managed services and least-privilege ACL users may not run.

`detect()` is the operation (seckill._io steps) asking those two; the
drivers run it once per connection pool (a cluster client: once per client)
and translate every command of a 'functions' client with `to_functions`.
"""

from __future__ import annotations

from typing import Any, List, Optional, Sequence, Tuple

from redis.exceptions import NoPermissionError, ResponseError

from ._io import Call, Steps

MODULE = 'module'
FUNCTIONS = 'functions'
BACKENDS = (MODULE, FUNCTIONS)
LIBRARY_NAME = 'seckill'

READ_ONLY = frozenset({'INFO', 'GET', 'ENTRANTS'})
"""The library's no-writes functions: called with FCALL_RO (ACLs and
replicas see a read)."""


CACHE_ATTR = '_seckill_backend'
"""Where a driver keeps the detected backend on the client's scope."""


def scope(client: Any) -> Any:
    """What one detection serves: a plain client's connection pool (clients
    sharing a pool share it), a cluster client itself."""
    return getattr(client, 'connection_pool', None) or client


class BackendError(RuntimeError):
    """Neither the module nor the library is on the server, or an unknown
    backend was asked for."""


def _text(v: Any) -> str:
    return v.decode() if isinstance(v, (bytes, bytearray)) else str(v)


def to_functions(args: Sequence[Any]) -> List[Any]:
    """`SECKILL.X key args...` as `FCALL seckill_x 1 key args...` (`FCALL_RO`
    for INFO, GET and ENTRANTS); any other command unchanged."""
    if not args:
        return list(args)
    name = _text(args[0])
    if not name.upper().startswith('SECKILL.') or len(args) < 2:
        return list(args)
    sub = name[len('SECKILL.'):].upper()
    return ['FCALL_RO' if sub in READ_ONLY else 'FCALL', 'seckill_' + sub.lower(), 1,
            *args[1:]]


def _pairs(entry: Any) -> dict:
    if isinstance(entry, dict):
        return {_text(k): v for k, v in entry.items()}
    if isinstance(entry, (list, tuple)):
        return {_text(k): v for k, v in zip(entry[0::2], entry[1::2])}
    return {}


def library_loaded(function_list: Any) -> bool:
    """Whether FUNCTION LIST's reply holds the seckill library."""
    return any(_text(_pairs(lib).get('library_name', '')) == LIBRARY_NAME
               for lib in function_list or ())


def parse_version(v: Any) -> Tuple[int, ...]:
    """'1.2.0' -> (1, 2, 0); ValueError when it is not dotted numbers."""
    return tuple(int(x) for x in _text(v).strip().split('.'))


MODULE_PROBE = ['SECKILL.INFO']
"""Asked first, without a key: a server with the module answers its arity
error (the arity is checked before the ACL, so any user gets it and
nothing runs); one without answers `unknown command`."""

VERSION_PROBE = ['FCALL_RO', 'seckill_version', 0]
"""Asked next: the library's version, or `Function not found`."""

NO_BACKEND = ('neither the seckill module nor the seckill Functions library '
              '(FCALL_RO seckill_version 0) is on this server: load the module, or run '
              '`python -m seckill functions install --redis URL` (docs/managed-redis.md)')


def _refused(reply: Any) -> bool:
    return isinstance(reply, NoPermissionError)


def module_answered(reply: Any) -> bool:
    """Whether MODULE_PROBE's reply (a value, or the ResponseError raised)
    comes from the module: anything but `unknown command` (and other
    errors a proxy may give) does: its arity error, or NOPERM where a
    server checks the ACL first."""
    if not isinstance(reply, ResponseError):
        return True
    text = str(reply).lower()
    return _refused(reply) or 'wrong number of arguments' in text


def choose(module_reply: Any, version_reply: Any = None) -> str:
    """The backend from the replies (a value, or the ResponseError raised)
    to MODULE_PROBE and VERSION_PROBE (None: not asked)."""
    if module_answered(module_reply):
        return MODULE
    if _refused(version_reply):
        raise BackendError('the seckill module is not on this server and this user may not run '
                           'FCALL_RO (%s): give its ACL user +fcall +fcall_ro, the library\'s '
                           'role lines of docs/operations.md' % (version_reply,))
    if version_reply is None or isinstance(version_reply, ResponseError):
        raise BackendError(NO_BACKEND)
    try:
        parse_version(version_reply)
    except ValueError:
        raise BackendError('FCALL_RO seckill_version 0 answered %r, not a version: load '
                           'functions/seckill.lua again (python -m seckill functions install)'
                           % (version_reply,)) from None
    return FUNCTIONS


def check(backend: Optional[str]) -> Optional[str]:
    if backend is not None and backend not in BACKENDS:
        raise BackendError("backend: 'module', 'functions' or None, not %r" % (backend,))
    return backend


def _ask(args: Sequence[Any]) -> Steps:
    try:
        return (yield Call(args))
    except ResponseError as exc:   # the answer is the error; a connection error
        return exc                 # goes to the caller, nothing cached


def detect() -> Steps:
    """The operation: the server's backend (BackendError when none). Needs
    no right beyond FCALL_RO where the module is absent: no MODULE LIST,
    no FUNCTION LIST, no key."""
    module_reply = yield from _ask(MODULE_PROBE)
    if module_answered(module_reply):
        return MODULE
    return choose(module_reply, (yield from _ask(VERSION_PROBE)))


__all__ = ['MODULE', 'FUNCTIONS', 'BACKENDS', 'BackendError', 'to_functions', 'choose',
           'module_answered', 'MODULE_PROBE', 'VERSION_PROBE', 'scope', 'CACHE_ATTR',
           'library_loaded', 'parse_version', 'detect', 'check']
