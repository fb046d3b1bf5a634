"""Which backend serves SECKILL.*: the module ('module') or the Redis
Functions library functions/seckill.lua ('functions'; docs/managed-redis.md).

Plain functions, no I/O:
- `to_functions(args, keys)`: one command as the library takes it
  (`SECKILL.X key args...` -> `FCALL seckill_x n key keys... args...`,
  `FCALL_RO` for INFO, GET and ENTRANTS); any other command unchanged. The
  library answers like the module under RESP2, so the replies parse the
  same.
- The keys a call declares (docs/managed-redis.md, "Calling it"): for INIT
  `init_keys(args)` (the STREAM it names, the four draw keys with DRAW,
  and with REPLACE what `FCALL_RO seckill_keys 1 key` lists for the sale
  it replaces, plus the four of a draw sale: `replaced_keys`); for every
  other function the list `seckill_keys` answers for the sale key
  (`parse_keys`), with `<key>:secret` for DRAW, none for INFO and GET. `undeclared(exc)`:
  whether an error is the library's `ERR undeclared key ...` refusal.
- `choose(module_reply, version_reply)`: the backend from the replies to
  `SECKILL.INFO` without a key (the module answers its arity error, any
  user: arity comes before the ACL; without it, `unknown command`) and
  `FCALL_RO seckill_version 1 key`. Neither needs MODULE LIST or FUNCTION
  LIST, which managed services and least-privilege ACL users may not run.

`detect()` is the operation (seckill.plain.steps steps) asking those two; the
drivers run it once per connection pool (a cluster client: once per client)
and send every command of a 'functions' client through `batch()`, the
operation that adds the keys (a `KeyCache` per connection pool, filled by
`seckill_keys` on a sale's first use) and retries once, with the list asked
again, a call refused as undeclared (the refusal changed nothing).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any, Dict, Hashable, List, Optional, Sequence, Tuple

from redis.exceptions import NoPermissionError, ResponseError

from .plain.steps import Call, Steps, kept, scope

MODULE = 'module'
FUNCTIONS = 'functions'
BACKENDS = (MODULE, FUNCTIONS)
LIBRARY_NAME = 'seckill'

READ_ONLY = frozenset({'INFO', 'GET', 'ENTRANTS'})
"""The library's no-writes functions: called with FCALL_RO (ACLs and
replicas see a read)."""

SALE_KEY_ONLY = frozenset({'INFO', 'GET'})
"""Functions that touch the sale key only: called without the list."""

PROBE_KEY = 'seckill:probe'
"""The key seckill_version is called with when there is no sale key at hand
(it reads no key: the key only routes the call, and keeps it acceptable to
services that refuse a call without one)."""

DRAW_SUFFIXES = (':secret', ':entrants', ':perm', ':wait')
"""A draw sale's own keys, after its sale key."""


CACHE_ATTR = '_seckill_backend'
"""Where a driver keeps the detected backend on the client's scope."""


class BackendError(RuntimeError):
    """Neither the module nor the library is on the server, or an unknown
    backend was asked for."""


def _text(v: Any) -> str:
    return v.decode() if isinstance(v, (bytes, bytearray)) else str(v)


def command(args: Sequence[Any]) -> Optional[str]:
    """'RESERVE' for `SECKILL.RESERVE key ...`; None for any other command
    (or a SECKILL one without a key)."""
    if len(args) < 2:
        return None
    name = _text(args[0]).upper()
    return name[len('SECKILL.'):] if name.startswith('SECKILL.') else None


def to_functions(args: Sequence[Any], keys: Sequence[Any] = ()) -> List[Any]:
    """`SECKILL.X key args...` as `FCALL seckill_x n key keys... args...`
    (`FCALL_RO` for INFO, GET and ENTRANTS); any other command unchanged."""
    sub = command(args)
    if sub is None:
        return list(args)
    return ['FCALL_RO' if sub in READ_ONLY else 'FCALL', 'seckill_' + sub.lower(),
            1 + len(keys), args[1], *keys, *args[2:]]


def draw_keys(key: Any) -> List[Any]:
    """`<key>:secret <key>:entrants <key>:perm <key>:wait`."""
    return [key + (s.encode() if isinstance(key, bytes) else s) for s in DRAW_SUFFIXES]


_ONE_VALUE = frozenset({'SHARDS', 'LIMIT', 'HOLD', 'START', 'END', 'TTL', 'BEACON'})


def init_keys(args: Sequence[Any]) -> Tuple[List[Any], bool]:
    """(the keys INIT's arguments name, whether REPLACE is among them), from
    `SECKILL.INIT key total options...`: the STREAM key, then the four draw
    keys with DRAW. Options are case-insensitive words and their values are
    skipped as the library reads them (`STREAM skey [MAXLEN n]`, `SPLIT
    round n peer...`, `BEACON name`), so a value that reads like an option
    word (a stream named `draw`) is not taken for one. An unknown word ends
    the reading: the server refuses the call, naming it."""
    stream, draw, replace = None, False, False
    i = 3
    while i < len(args):
        w = _text(args[i]).upper()
        if w in _ONE_VALUE:
            i += 2
        elif w == 'STREAM':
            if i + 1 < len(args) and stream is None:
                stream = args[i + 1]
            i += 2
            if i < len(args) and _text(args[i]).upper() == 'MAXLEN':
                i += 2
        elif w == 'SPLIT':
            try:
                i += 3 + int(_text(args[i + 2]))
            except (IndexError, ValueError):
                break
        elif w in ('DRAW', 'FENCE', 'REPLACE'):
            draw, replace = draw or w == 'DRAW', replace or w == 'REPLACE'
            i += 1
        else:
            break
    keys = [] if stream is None else [stream]
    if draw and len(args) > 1:
        keys += draw_keys(args[1])
    return keys, replace


def replaced_keys(key: Any, listed: Sequence[Any]) -> List[Any]:
    """What INIT ... REPLACE declares beyond the list seckill_keys gave for
    the sale it replaces: a draw sale's four keys (it deletes them), the
    secret among them, which the list leaves out (only INIT and DRAW touch
    it; DRAW declares it too)."""
    four = draw_keys(key)
    return four if _text(four[1]) in {_text(k) for k in listed} else []


def merged(*lists: Sequence[Any]) -> List[Any]:
    """The lists' keys in order, each once."""
    out: List[Any] = []
    for k in (k for ks in lists for k in ks):
        if k not in out:
            out.append(k)
    return out


def keys_args(key: Any) -> List[Any]:
    """What asks the library for the keys a sale's calls declare."""
    return ['FCALL_RO', 'seckill_keys', 1, key]


def parse_keys(reply: Any) -> List[str]:
    """seckill_keys's reply: the keys, as text."""
    return [_text(k) for k in reply or ()]


def undeclared(reply: Any) -> bool:
    """Whether a reply (an exception) is the library's refusal of a key it
    was not given (`ERR undeclared key ...`; redis-py drops the `ERR `)."""
    if not isinstance(reply, ResponseError):
        return False
    text = str(reply)
    return text.startswith('undeclared key') or text.startswith('ERR undeclared key')


def version_args(key: Any = None) -> List[Any]:
    """seckill_version, with one key: the sale key at hand, else PROBE_KEY."""
    return ['FCALL_RO', 'seckill_version', 1, PROBE_KEY if key is None else key]


class KeyCache:
    """The keys `seckill_keys` listed, per sale key: one per connection pool
    (`keys_of(scope(client))`), shared by its threads and tasks."""

    LIMIT = 100_000
    """Sale keys kept at most; past it the cache starts again empty."""

    def __init__(self) -> None:
        self._keys: Dict[Hashable, List[Any]] = {}
        self._lock = threading.Lock()

    def get(self, key: Any) -> Optional[List[Any]]:
        return self._keys.get(key)

    def put(self, key: Any, keys: List[Any]) -> None:
        with self._lock:
            if len(self._keys) >= self.LIMIT:
                self._keys.clear()
            self._keys[key] = keys

    def forget(self, key: Any) -> None:
        with self._lock:
            self._keys.pop(key, None)


KEYS_ATTR = '_seckill_keys'


def keys_of(scope_: Any) -> KeyCache:
    """The KeyCache kept on a connection pool (a cluster client)."""
    return kept(scope_, KEYS_ATTR, KeyCache)


@dataclass(frozen=True)
class Batch:
    """Library calls, translated, sent as the driver's step sends them (one
    call, a pipeline, one node's pipeline): their replies, an error reply as
    its exception in its place. (`Call` steps of `batch()` are single calls
    of their own: seckill_keys.)"""
    commands: Sequence[Sequence[Any]]


def _listed(key: Any, cache: KeyCache) -> Steps:
    keys = cache.get(key)
    if keys is None:
        keys = parse_keys((yield Call(keys_args(key))))
        cache.put(key, keys)
    return keys


def _translated(args: Sequence[Any], cache: KeyCache) -> Steps:
    sub = command(args)
    if sub is None or sub in SALE_KEY_ONLY:
        return to_functions(args)
    if sub == 'INIT':
        own, replace = init_keys(args)
        if not replace:
            return to_functions(args, own)
        old = parse_keys((yield Call(keys_args(args[1]))))
        return to_functions(args, merged(own, old, replaced_keys(args[1], old)))
    listed = yield from _listed(args[1], cache)
    return to_functions(args, merged(listed, draw_keys(args[1])[:1]) if sub == 'DRAW' else listed)


def _all_translated(cmds: Sequence[Sequence[Any]], cache: KeyCache) -> Steps:
    out = []
    for c in cmds:
        out.append((yield from _translated(c, cache)))
    return out


def batch(commands: Sequence[Sequence[Any]], cache: KeyCache) -> Steps:
    """`commands` (SECKILL.X or any other) sent to the library with their
    keys declared: their replies, errors in place. The lists come from
    `cache`, asked of seckill_keys on a sale's first use; a call refused
    as undeclared (the sale was replaced since the list was asked) is sent
    once more with the list asked again, along with the batch's other
    commands that are not the library's (a gate's WAIT: they follow the
    call on its connection). After an INIT the sale's list is asked again
    at its next use."""
    cmds = [list(c) for c in commands]
    replies = list((yield Batch((yield from _all_translated(cmds, cache)))))
    redo = [i for i, r in enumerate(replies) if undeclared(r)]
    if redo:
        for i in redo:
            cache.forget(cmds[i][1])
        redo = sorted(set(redo) | {i for i, c in enumerate(cmds) if command(c) is None})
        again = yield Batch((yield from _all_translated([cmds[i] for i in redo], cache)))
        for i, r in zip(redo, again):
            replies[i] = r
    for c in cmds:
        if command(c) == 'INIT':
            cache.forget(c[1])
    return replies


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

VERSION_PROBE = version_args()
"""Asked next (with the sale key when there is one: `version_args(key)`):
the library's version, or `Function not found`."""

NO_BACKEND = ('neither the seckill module nor the seckill Functions library '
              '(FCALL_RO seckill_version 1 key) is on this server: load the module, or run '
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
                           'role lines of docs/operations.md, and key patterns that match the '
                           'sale key the version is asked with' % (version_reply,))
    if version_reply is None or isinstance(version_reply, ResponseError):
        raise BackendError(NO_BACKEND)
    try:
        parse_version(version_reply)
    except ValueError:
        raise BackendError('FCALL_RO seckill_version answered %r, not a version: load '
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


def detect(key: Any = None) -> Steps:
    """The operation: the server's backend (BackendError when none). Needs
    no right beyond FCALL_RO where the module is absent: no MODULE LIST,
    no FUNCTION LIST. The version is asked with `key` (the sale key at
    hand), else PROBE_KEY."""
    module_reply = yield from _ask(MODULE_PROBE)
    if module_answered(module_reply):
        return MODULE
    return choose(module_reply, (yield from _ask(version_args(key))))


__all__ = ['MODULE', 'FUNCTIONS', 'BACKENDS', 'BackendError', 'to_functions', 'choose',
           'command', 'init_keys', 'draw_keys', 'keys_args', 'parse_keys', 'undeclared',
           'version_args', 'PROBE_KEY', 'KeyCache', 'keys_of', 'Batch', 'batch', 'merged',
           'replaced_keys',
           'module_answered', 'MODULE_PROBE', 'VERSION_PROBE', 'scope', 'CACHE_ATTR',
           'library_loaded', 'parse_version', 'detect', 'check']
