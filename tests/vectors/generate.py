#!/usr/bin/env python3
"""Writes the shared test vectors (tests/vectors/*.json) from real servers.

Starts two redis-servers on free ports: one with the module, one plain with
functions/seckill.lua loaded (FUNCTION LOAD). Runs one fixed scenario per
file on each backend under RESP2 and again under RESP3 (a fresh FLUSHALL
before each run), over a raw socket, and records for every step its
command, the exact reply bytes, the reply as a typed tree and what the
reference parser (clients/python/seckill/plain/protocol.py and plain/draw.py)
makes of it. README.md beside this file describes the format.

    .venv/bin/python tests/vectors/generate.py \
        [--server redis-server] [--module target/release/libredis_seckill.so]

Re-run it after a reply changes (a new status, a new report field); the
fence cases are recorded for each backend whose server takes INIT ... FENCE.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import sys
import time
from typing import Any, Callable, Dict, List, Optional, Set, Tuple

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, 'clients', 'python'))

from seckill import draw as d  # noqa: E402
from seckill import protocol as p  # noqa: E402
from seckill.testing import RedisServer  # noqa: E402

FORMAT = 1


# ---------------------------------------------------------------- RESP


class Conn:
    """One raw RESP connection: sends a command, returns (raw bytes, tree)."""

    def __init__(self, port: int):
        self.sock = socket.create_connection(('127.0.0.1', port), timeout=10)
        self.buf = b''

    def call(self, *args: Any) -> Tuple[bytes, Dict[str, Any]]:
        out = b'*%d\r\n' % len(args)
        for a in args:
            b = a if isinstance(a, bytes) else str(a).encode()
            out += b'$%d\r\n%s\r\n' % (len(b), b)
        self.sock.sendall(out)
        self.pos = 0
        tree = self._read()
        raw, self.buf = self.buf[:self.pos], self.buf[self.pos:]
        return raw, tree

    def _need(self, n: int) -> None:
        while len(self.buf) < self.pos + n:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise ConnectionError('server closed the connection')
            self.buf += chunk

    def _line(self) -> bytes:
        while True:
            i = self.buf.find(b'\r\n', self.pos)
            if i >= 0:
                line, self.pos = self.buf[self.pos:i], i + 2
                return line
            self._need(len(self.buf) - self.pos + 1)

    def _read(self) -> Dict[str, Any]:
        line = self._line()
        kind, rest = line[:1], line[1:].decode()
        if kind == b'+':
            return {'t': 'simple', 'v': rest}
        if kind == b'-':
            return {'t': 'error', 'v': rest}
        if kind == b':':
            return {'t': 'int', 'v': int(rest)}
        if kind == b'_':
            return {'t': 'null'}
        if kind == b',':
            return {'t': 'double', 'v': rest}
        if kind == b'#':
            return {'t': 'bool', 'v': rest == 't'}
        if kind == b'(':
            return {'t': 'bignum', 'v': rest}
        if kind in (b'$', b'='):
            n = int(rest)
            if n < 0:
                return {'t': 'null'}
            self._need(n + 2)
            data = self.buf[self.pos:self.pos + n]
            self.pos += n + 2
            return {'t': 'bulk' if kind == b'$' else 'verbatim', 'v': data.decode()}
        if kind in (b'*', b'~', b'>'):
            n = int(rest)
            if n < 0:
                return {'t': 'null'}
            t = {b'*': 'array', b'~': 'set', b'>': 'push'}[kind]
            return {'t': t, 'v': [self._read() for _ in range(n)]}
        if kind in (b'%', b'|'):
            n = int(rest)
            return {'t': 'map' if kind == b'%' else 'attr',
                    'v': [[self._read(), self._read()] for _ in range(n)]}
        raise ValueError('unknown RESP type %r' % line)


def plain(tree: Dict[str, Any]) -> Any:
    """The tree as redis-py (decode_responses) hands it to the parsers."""
    t = tree['t']
    if t == 'null':
        return None
    if t in ('array', 'set', 'push'):
        return [plain(x) for x in tree['v']]
    if t == 'map':
        return {plain(k): plain(v) for k, v in tree['v']}
    return tree['v']


def jsonable(v: Any) -> Any:
    if isinstance(v, tuple) and hasattr(v, '_asdict'):
        return {k: jsonable(x) for k, x in v._asdict().items()}
    if isinstance(v, (list, tuple)):
        return [jsonable(x) for x in v]
    if isinstance(v, dict):
        return {k: jsonable(x) for k, x in v.items()}
    return v


# ---------------------------------------------------------------- what the reference parser makes of a reply


def report_expect(v: Any) -> Any:
    """A report, its JSON string form parsed first (FORMAT JSON)."""
    if isinstance(v, str):
        v = json.loads(v)
    return jsonable(p.parse_report(v))


def get_expect(v: Any) -> Any:
    if isinstance(v, str):
        v = json.loads(v)
    return p.parse_get(v)


def settled_expect(v: Any, command: str) -> Any:
    r = p.parse_settled(v, command)
    return {'status': r.status, 'remaining': r.remaining}


def reserved_expect(v: Any) -> Any:
    r = p.parse_reserved(v)
    return {'status': r.status, 'id': r.rid, 'remaining': r.remaining}


PARSERS: Dict[str, Callable[[Any], Any]] = {
    'init': lambda v: {'created': p.parse_init(v)},
    'reserve': reserved_expect,
    'release': lambda v: settled_expect(v, 'RELEASE'),
    'confirm': lambda v: settled_expect(v, 'CONFIRM'),
    'report': report_expect,
    'get': get_expect,
    'enter': lambda v: jsonable(d.parse_entered(v)),
    'draw': lambda v: jsonable(d.parse_drawn(v)),
    'entrants': lambda v: (lambda c, page: {'cursor': c, 'entrants': jsonable(page)})(*d.parse_entrants(v)),
    'status': lambda v: {'status': v},
    'send': lambda v: dict(zip(('taken', 'sent_total', 'remaining'), v)),
    'recv': lambda v: dict(zip(('credited', 'received_total', 'remaining'), v)),
    'error': None,
}


# ---------------------------------------------------------------- scenarios


class Run:
    """One scenario on one backend and protocol: records the steps."""

    def __init__(self, conn: Conn, backend: str, proto: int):
        self.c, self.backend, self.proto = conn, backend, proto
        self.steps: List[Dict[str, Any]] = []
        self.stream_of: Dict[str, Optional[str]] = {}
        self.draw_sales: Set[str] = set()

    def send(self, *args: Any) -> Tuple[bytes, Dict[str, Any]]:
        """A setup call, not recorded; its error stops the generator."""
        raw, tree = self.c.call(*self.wire(args))
        if tree['t'] == 'error':
            raise RuntimeError('%s: %s' % (args, tree['v']))
        return raw, tree

    def wire(self, args: Tuple[Any, ...]) -> List[Any]:
        name = str(args[0]).upper()
        if self.backend == 'functions' and name.startswith('SECKILL.'):
            sub = name[len('SECKILL.'):]
            fn = 'FCALL_RO' if sub in ('INFO', 'GET', 'ENTRANTS') else 'FCALL'
            keys = [args[1], *self.declared(sub, str(args[1]), [str(a) for a in args[2:]])]
            return [fn, 'seckill_' + sub.lower(), len(keys), *keys, *args[2:]]
        return list(args)

    def declared(self, sub: str, key: str, rest: List[str]) -> List[str]:
        """The keys after the sale key a library call declares
        (docs/managed-redis.md, "Calling it"): the stream and draw keys its
        INIT named; <key>:secret for INIT and DRAW only."""
        words = [a.upper() for a in rest]
        draw_keys = [key + s for s in (':secret', ':entrants', ':perm', ':wait')]
        if sub == 'INIT':
            # The new stream; the draw keys of the new round, or of the draw
            # sale REPLACE deletes.
            stream = rest[words.index('STREAM') + 1] if 'STREAM' in words else None
            out = ([stream] if stream else []) + (draw_keys if 'DRAW' in words or key in self.draw_sales else [])
            self.stream_of[key] = stream
            self.draw_sales.discard(key)
            if 'DRAW' in words:
                self.draw_sales.add(key)
            return out
        if sub in ('INFO', 'GET'):
            return []
        out = [self.stream_of[key]] if self.stream_of.get(key) else []
        if key in self.draw_sales:
            out += draw_keys if sub == 'DRAW' else draw_keys[1:]
        return out

    def step(self, name: str, parse: str, *args: Any) -> Any:
        """A recorded call: `parse` names the reply's parser (PARSERS)."""
        raw, tree = self.c.call(*self.wire(args))
        rec: Dict[str, Any] = {'name': name, 'parse': parse,
                               'command': [str(a) for a in args], 'raw': raw.decode(),
                               'reply': tree}
        if tree['t'] == 'error':
            text = tree['v']
            rec['expect'] = {'error': text, 'code': text.split(' ', 1)[0]}
        elif parse == 'error':
            raise RuntimeError('%s: expected an error, got %r' % (name, tree))
        else:
            rec['expect'] = PARSERS[parse](plain(tree))
        self.steps.append(rec)
        return plain(tree)

    def server_ms(self) -> int:
        _, t = self.c.call('TIME')
        s, us = (int(x['v']) for x in t['v'])
        return s * 1000 + us // 1000


def sc_reserve(r: Run) -> None:
    r.send('SECKILL.INIT', 'sale:{r}', 3, 'LIMIT', 2, 'HOLD', 60000)
    r.step('reserved with REQID', 'reserve', 'SECKILL.RESERVE', 'sale:{r}', 'u1', 'REQID', 'order-1')
    r.step('duplicate REQID', 'reserve', 'SECKILL.RESERVE', 'sale:{r}', 'u1', 'REQID', 'order-1')
    r.step('reserved, generated id', 'reserve', 'SECKILL.RESERVE', 'sale:{r}', 'u1')
    r.step('limit: the id of the latest live reservation', 'reserve',
           'SECKILL.RESERVE', 'sale:{r}', 'u1', 'REQID', 'order-2')
    r.step('reserved the last unit, QTY', 'reserve', 'SECKILL.RESERVE', 'sale:{r}', 'u2', 'QTY', 1)
    r.step('sold out', 'reserve', 'SECKILL.RESERVE', 'sale:{r}', 'u3')
    r.step('no sale', 'reserve', 'SECKILL.RESERVE', 'sale:{none}', 'u1')
    now = r.server_ms()
    r.send('SECKILL.INIT', 'sale:{later}', 5, 'START', now + 3_600_000)
    r.step('not started', 'reserve', 'SECKILL.RESERVE', 'sale:{later}', 'u1')
    r.send('SECKILL.INIT', 'sale:{past}', 5, 'START', 1, 'END', 2)
    r.step('ended', 'reserve', 'SECKILL.RESERVE', 'sale:{past}', 'u1')
    r.send('SECKILL.INIT', 'sale:{draw}', 5, 'END', now + 3_600_000, 'DRAW')
    r.step('a draw sale refuses RESERVE', 'reserve', 'SECKILL.RESERVE', 'sale:{draw}', 'u1')


def sc_settle(r: Run) -> None:
    r.send('SECKILL.INIT', 'sale:{s}', 5, 'LIMIT', 5)
    for i in range(1, 5):
        r.send('SECKILL.RESERVE', 'sale:{s}', 'u%d' % i, 'REQID', 'o%d' % i)
    r.step('released', 'release', 'SECKILL.RELEASE', 'sale:{s}', 'o1')
    r.step('already released', 'release', 'SECKILL.RELEASE', 'sale:{s}', 'o1')
    r.step('confirmed', 'confirm', 'SECKILL.CONFIRM', 'sale:{s}', 'o2')
    r.step('already confirmed', 'confirm', 'SECKILL.CONFIRM', 'sale:{s}', 'o2')
    r.step('release of a confirmed one', 'release', 'SECKILL.RELEASE', 'sale:{s}', 'o2')
    r.step('confirm of a released one', 'confirm', 'SECKILL.CONFIRM', 'sale:{s}', 'o1')
    r.step('release, unknown id', 'release', 'SECKILL.RELEASE', 'sale:{s}', 'nope')
    r.step('confirm, unknown id', 'confirm', 'SECKILL.CONFIRM', 'sale:{s}', 'nope')
    r.step('release, no sale', 'release', 'SECKILL.RELEASE', 'sale:{none}', 'o1')


def sc_init(r: Run) -> None:
    r.step('created', 'init', 'SECKILL.INIT', 'sale:{i}', 10, 'SHARDS', 2, 'LIMIT', 2, 'HOLD', 60000,
           'STREAM', 'sale:{i}:events', 'MAXLEN', 1000, 'TTL', 3600)
    r.step('exists', 'init', 'SECKILL.INIT', 'sale:{i}', 10)
    r.step('replaced', 'init', 'SECKILL.INIT', 'sale:{i}', 20, 'REPLACE')


def sc_report(r: Run) -> None:
    r.send('SECKILL.INIT', 'sale:{rep}', 10, 'SHARDS', 3, 'LIMIT', 3, 'HOLD', 60000)
    r.send('SECKILL.RESERVE', 'sale:{rep}', 'u1', 'QTY', 2, 'REQID', 'o1')
    r.send('SECKILL.RESERVE', 'sale:{rep}', 'u2', 'REQID', 'o2')
    r.send('SECKILL.RESERVE', 'sale:{rep}', 'u3', 'REQID', 'o3')
    r.send('SECKILL.CONFIRM', 'sale:{rep}', 'o2')
    r.send('SECKILL.RELEASE', 'sale:{rep}', 'o3')
    r.step('info', 'report', 'SECKILL.INFO', 'sale:{rep}')
    r.step('info, FORMAT JSON', 'report', 'SECKILL.INFO', 'sale:{rep}', 'FORMAT', 'JSON')
    r.step('info, no sale', 'report', 'SECKILL.INFO', 'sale:{none}')
    r.step('info, no sale, FORMAT JSON', 'report', 'SECKILL.INFO', 'sale:{none}', 'FORMAT', 'JSON')
    orders = ['ORDERS', 4, 'o1', 'u1', 2, 'o2', 'u2', 1, 'o3', 'u3', 1, 'o9', 'u9', 1]
    r.step('reconcile', 'report', 'SECKILL.RECONCILE', 'sale:{rep}')
    r.step('reconcile ORDERS', 'report', 'SECKILL.RECONCILE', 'sale:{rep}', 'EXPIRE', *orders)
    r.step('reconcile ORDERS, FORMAT JSON', 'report', 'SECKILL.RECONCILE', 'sale:{rep}', *orders,
           'FORMAT', 'JSON')
    r.step('reconcile ORDERS APPLY', 'report', 'SECKILL.RECONCILE', 'sale:{rep}', *orders, 'APPLY')
    r.step('reconcile, no sale', 'report', 'SECKILL.RECONCILE', 'sale:{none}')
    r.send('SECKILL.INIT', 'sale:{sp}', 8, 'SPLIT', 'round-1', 2, 'sale:{sp.a}', 'sale:{sp.b}')
    r.send('SECKILL.INIT', 'sale:{sp.a}', 0, 'SPLIT', 'round-1', 1, 'sale:{sp}')
    r.step('send', 'send', 'SECKILL.SEND', 'sale:{sp}', 'sale:{sp.a}', 3, 'TID', 't1', 'ROUND', 'round-1')
    r.step('recv', 'recv', 'SECKILL.RECV', 'sale:{sp.a}', 'sale:{sp}', 3, 'ROUND', 'round-1')
    r.step('info of a split sale key', 'report', 'SECKILL.INFO', 'sale:{sp}')
    r.step('info of a split sale key, FORMAT JSON', 'report', 'SECKILL.INFO', 'sale:{sp}', 'FORMAT', 'JSON')


def sc_get(r: Run) -> None:
    r.send('SECKILL.INIT', 'sale:{g}', 5, 'HOLD', 60000)
    r.send('SECKILL.RESERVE', 'sale:{g}', 'u1', 'QTY', 1, 'REQID', 'o1')
    r.send('SECKILL.INIT', 'sale:{g2}', 5)
    r.send('SECKILL.RESERVE', 'sale:{g2}', 'u2', 'REQID', 'o2')
    r.send('SECKILL.CONFIRM', 'sale:{g2}', 'o2')
    r.step('get, pending with a hold', 'get', 'SECKILL.GET', 'sale:{g}', 'o1')
    r.step('get, FORMAT JSON', 'get', 'SECKILL.GET', 'sale:{g}', 'o1', 'FORMAT', 'JSON')
    r.step('get, confirmed, no hold', 'get', 'SECKILL.GET', 'sale:{g2}', 'o2')
    r.step('get, unknown id', 'get', 'SECKILL.GET', 'sale:{g}', 'nope')
    r.step('get, no sale', 'get', 'SECKILL.GET', 'sale:{none}', 'o1')


def sc_draw(r: Run) -> None:
    now = r.server_ms()
    r.send('SECKILL.INIT', 'sale:{d}', 2, 'END', now + 700, 'DRAW')
    r.step('info of a draw sale before the draw', 'report', 'SECKILL.INFO', 'sale:{d}')
    r.step('entered', 'enter', 'SECKILL.ENTER', 'sale:{d}', 'u1', 'REQID', 'e1')
    r.step('already entered', 'enter', 'SECKILL.ENTER', 'sale:{d}', 'u1')
    r.send('SECKILL.ENTER', 'sale:{d}', 'u2')
    r.send('SECKILL.ENTER', 'sale:{d}', 'u3', 'QTY', 1)
    r.step('enter, no sale', 'enter', 'SECKILL.ENTER', 'sale:{none}', 'u1')
    r.step('entrants, first page', 'entrants', 'SECKILL.ENTRANTS', 'sale:{d}', 0, 'COUNT', 2)
    while r.server_ms() < now + 800:
        time.sleep(0.05)
    r.step('enter after END', 'enter', 'SECKILL.ENTER', 'sale:{d}', 'u4')
    r.step('draw', 'draw', 'SECKILL.DRAW', 'sale:{d}', 'COUNT', 10)
    r.step('enter after the draw', 'enter', 'SECKILL.ENTER', 'sale:{d}', 'u1')
    r.step('entrants after the draw', 'entrants', 'SECKILL.ENTRANTS', 'sale:{d}', 0, 'COUNT', 10)
    r.step('info of a draw sale after the draw', 'report', 'SECKILL.INFO', 'sale:{d}')
    r.step('info of a draw sale, FORMAT JSON', 'report', 'SECKILL.INFO', 'sale:{d}', 'FORMAT', 'JSON')


def sc_errors(r: Run) -> None:
    r.send('SECKILL.INIT', 'sale:{e}', 5, 'LIMIT', 2, 'STREAM', 'sale:{e}:events')
    r.step('QTY above LIMIT', 'error', 'SECKILL.RESERVE', 'sale:{e}', 'u1', 'QTY', 3)
    r.step('option given twice', 'error', 'SECKILL.INIT', 'sale:{x}', 5, 'LIMIT', 1, 'LIMIT', 2)
    r.step('SHARDS out of range', 'error', 'SECKILL.INIT', 'sale:{x}', 5, 'SHARDS', 0)
    r.step('not a number', 'error', 'SECKILL.INIT', 'sale:{x}', 'ten')
    r.step('unknown option', 'error', 'SECKILL.INIT', 'sale:{x}', 5, 'COLOUR', 'red')
    r.step('wrong number of arguments', 'error', 'SECKILL.RELEASE', 'sale:{e}')
    r.send('SET', 'plain', 'x')
    r.step('a key of another type', 'error', 'SECKILL.RESERVE', 'plain', 'u1')
    r.step('SEND on a plain sale', 'error', 'SECKILL.SEND', 'sale:{e}', 'sale:{y}', 1, 'TID', 't',
           'ROUND', 'r')
    r.send('SECKILL.INIT', 'sale:{sp}', 5, 'SPLIT', 'round-1', 1, 'sale:{sp.a}')
    r.step('stale round', 'error', 'SECKILL.SEND', 'sale:{sp}', 'sale:{sp.a}', 1, 'TID', 't',
           'ROUND', 'round-0')
    r.step('undeclared peer', 'error', 'SECKILL.SEND', 'sale:{sp}', 'sale:{sp.z}', 1, 'TID', 't',
           'ROUND', 'round-1')
    r.send('ACL', 'SETUSER', 'vec', 'on', 'nopass', '+@all', '~sale:{e}', 'resetchannels')
    r.send('AUTH', 'vec', 'x')
    r.step('the ACL user may not write the stream key', 'error',
           'SECKILL.RESERVE', 'sale:{e}', 'u1')
    r.send('AUTH', 'default', 'x')
    r.send('CONFIG', 'SET', 'maxmemory', 1)
    r.step('INIT under maxmemory', 'error', 'SECKILL.INIT', 'sale:{oom}', 5)
    r.send('CONFIG', 'SET', 'maxmemory', 0)


def sc_fence(r: Run, promoted: Callable[[int], Conn]) -> None:
    """INIT ... FENCE on the server; a replica of it, promoted (REPLICAOF NO
    ONE gives it a new replication id), holds the sale fenced until UNFENCE
    (the fence contract). The steps on the promoted replica are recorded
    as this run's."""
    r.send('SECKILL.INIT', 'sale:{f}', 5, 'FENCE')
    r.step('info of a fenced sale, clear', 'report', 'SECKILL.INFO', 'sale:{f}')
    r.step('unfence, not fenced', 'status', 'SECKILL.UNFENCE', 'sale:{f}')
    rr = Run(promoted(r.proto), r.backend, r.proto)
    rr.step('reserve on a fenced sale', 'reserve', 'SECKILL.RESERVE', 'sale:{f}', 'u1')
    rr.step('info of a fenced sale, fenced', 'report', 'SECKILL.INFO', 'sale:{f}')
    rr.step('info of a fenced sale, FORMAT JSON', 'report', 'SECKILL.INFO', 'sale:{f}', 'FORMAT', 'JSON')
    rr.step('unfence', 'status', 'SECKILL.UNFENCE', 'sale:{f}')
    rr.step('reserve after unfence', 'reserve', 'SECKILL.RESERVE', 'sale:{f}', 'u1')
    rr.step('unfence, no sale', 'status', 'SECKILL.UNFENCE', 'sale:{none}')
    r.steps += rr.steps


SCENARIOS = {
    'reserve': sc_reserve, 'settle': sc_settle, 'init': sc_init, 'report': sc_report,
    'get': sc_get, 'draw': sc_draw, 'errors': sc_errors,
}


# ---------------------------------------------------------------- servers


class Server(RedisServer):
    """seckill.testing's RedisServer (a free port; a folder of its own, so a
    replica's sync never meets its master's files) with a raw Conn on it."""

    def start(self) -> 'Server':
        super().start()
        self.conn = Conn(self.port)
        return self


def start_server(binary: str, module: Optional[str]) -> Server:
    """The module's server, or with `module` None a plain one for the library."""
    return Server(module=module, binary=binary, load_module=module is not None).start()


def fence_supported(c: Conn, backend: str) -> bool:
    probe = Run(c, backend, 2)
    _, t = c.call(*probe.wire(('SECKILL.INIT', 'sale:{probe}', 1, 'FENCE')))
    c.call('DEL', 'sale:{probe}')
    return t['t'] != 'error'


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    ap.add_argument('--server', default='redis-server')
    ap.add_argument('--module', default=os.environ.get('SECKILL_MODULE') or
                    os.path.join(ROOT, 'target', 'release', 'libredis_seckill.so'))
    ap.add_argument('--out', default=HERE)
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(ROOT, 'functions', 'seckill.lua')) as f:
        lua = f.read()
    servers = {'module': start_server(args.server, args.module),
               'functions': start_server(args.server, None)}
    replicas: List[Server] = []

    def promoted(backend: str, proto: int) -> Conn:
        """A new replica of the backend's server, synced, then promoted."""
        master = servers[backend]
        rep = start_server(args.server, args.module if backend == 'module' else None)
        replicas.append(rep)
        rep.conn.call('REPLICAOF', '127.0.0.1', master.port)
        deadline = time.monotonic() + 10
        while (b'master_link_status:up' not in rep.conn.call('INFO', 'replication')[0]
               or rep.conn.call('EXISTS', 'sale:{f}')[1].get('v') != 1):
            if time.monotonic() > deadline:
                raise RuntimeError('the replica did not sync')
            time.sleep(0.05)
        rep.conn.call('REPLICAOF', 'NO', 'ONE')
        rep.conn.call('HELLO', proto)
        return rep.conn

    try:
        servers['functions'].conn.call('FUNCTION', 'LOAD', 'REPLACE', lua)
        _, version = servers['module'].conn.call('INFO', 'server')
        scenarios = dict(SCENARIOS)
        # The fence, on each backend whose server takes INIT ... FENCE.
        fenced = {b for b, srv in servers.items() if fence_supported(srv.conn, b)}
        if fenced:
            scenarios['fence'] = lambda r: sc_fence(r, lambda proto: promoted(r.backend, proto))
        for name, scenario in scenarios.items():
            cases = []
            for backend, srv in servers.items():
                if name == 'fence' and backend not in fenced:
                    continue
                for proto in (2, 3):
                    srv.conn.call('HELLO', proto)
                    srv.conn.call('FLUSHALL')
                    run = Run(srv.conn, backend, proto)
                    scenario(run)
                    for s in run.steps:
                        s['backend'], s['protocol'] = backend, proto
                    cases += run.steps
            server = next(line.split(':', 1)[1] for line in version['v'].splitlines()
                          if line.startswith('redis_version:'))
            doc = {'format': FORMAT, 'generated_by': 'tests/vectors/generate.py',
                   'server': 'redis-server ' + server, 'cases': cases}
            path = os.path.join(args.out, name + '.json')
            with open(path, 'w') as f:
                json.dump(doc, f, indent=1, ensure_ascii=False)
                f.write('\n')
            print('%s: %d cases' % (os.path.relpath(path, ROOT), len(cases)))
    finally:
        for s in replicas + list(servers.values()):
            s.stop()
    return 0


if __name__ == '__main__':
    sys.exit(main())
