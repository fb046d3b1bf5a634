"""Which backend serves SECKILL.*: the module ('module') or the Redis
Functions library functions/seckill.lua ('functions'; docs/managed-redis.md).

Plain functions, no I/O:
- `to_functions(args)`: one command as the library takes it
  (`SECKILL.X key args...` -> `FCALL seckill_x 1 key args...`, `FCALL_RO`
  for INFO, GET and ENTRANTS); any other command unchanged. The library answers like
  the module under RESP2, so the replies parse the same.
- `choose(module_list, function_list, version)`: the backend from the
  replies of MODULE LIST, FUNCTION LIST LIBRARYNAME seckill and
  FCALL seckill_version 0.

`detect()` is the operation (seckill._io steps) asking those three; the
drivers run it once per connection pool (a cluster client: once per client)
and translate every command of a 'functions' client with `to_functions`.
"""

from __future__ import annotations

from typing import Any, List, Optional, Sequence, Tuple

from redis.exceptions import ResponseError

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


def module_loaded(module_list: Any) -> bool:
    """Whether MODULE LIST's reply names the seckill module."""
    return any(_text(_pairs(m).get('name', '')) == LIBRARY_NAME for m in module_list or ())


def library_loaded(function_list: Any) -> bool:
    """Whether FUNCTION LIST's reply holds the seckill library."""
    return any(_text(_pairs(lib).get('library_name', '')) == LIBRARY_NAME
               for lib in function_list or ())


def parse_version(v: Any) -> Tuple[int, ...]:
    """'1.2.0' -> (1, 2, 0); ValueError when it is not dotted numbers."""
    return tuple(int(x) for x in _text(v).strip().split('.'))


def choose(module_list: Any, function_list: Any, version: Optional[Any] = None) -> str:
    """The backend from MODULE LIST's and FUNCTION LIST's replies (either
    may be None: the server refused the command, as managed services refuse
    MODULE LIST) and the library's version (seckill_version), if any."""
    if module_list is not None and module_loaded(module_list):
        return MODULE
    if function_list is not None and library_loaded(function_list):
        if version is None:
            raise BackendError('the seckill library is loaded but does not answer '
                               'seckill_version: load functions/seckill.lua again '
                               '(python -m seckill functions install)')
        return FUNCTIONS
    raise BackendError('neither the seckill module (MODULE LIST) nor the seckill Functions '
                       'library (FUNCTION LIST) is on this server: load the module, or run '
                       '`python -m seckill functions install --redis URL` '
                       '(docs/managed-redis.md)')


def check(backend: Optional[str]) -> Optional[str]:
    if backend is not None and backend not in BACKENDS:
        raise BackendError("backend: 'module', 'functions' or None, not %r" % (backend,))
    return backend


def _maybe(args: Sequence[Any]) -> Steps:
    try:
        return (yield Call(args))
    except ResponseError:   # refused (unknown command, ACL, managed service); a
        return None         # connection error goes to the caller, nothing cached


def detect() -> Steps:
    """The operation: the server's backend (BackendError when none)."""
    modules = yield from _maybe(['MODULE', 'LIST'])
    if modules is not None and module_loaded(modules):
        return MODULE
    libs = yield from _maybe(['FUNCTION', 'LIST', 'LIBRARYNAME', LIBRARY_NAME])
    version = None
    if libs is not None and library_loaded(libs):
        version = yield from _maybe(['FCALL_RO', 'seckill_version', 0])
    return choose(modules, libs, version)


__all__ = ['MODULE', 'FUNCTIONS', 'BACKENDS', 'BackendError', 'to_functions', 'choose',
           'module_loaded', 'scope', 'CACHE_ATTR', 'library_loaded', 'parse_version', 'detect', 'check']
