"""The library at a million (issue 24): the calls the audit found blocking
the server, made on sales of SECKILL_BIG_N reservations or entrants
(1,000,000 unless the stage says otherwise), each call's server time read
from the slow log and printed (logs/functions-*.txt, and RLTest's output).

test_bounds.py holds the same calls to the same commands on a small and a
larger sale; this file makes the large one as large as a big sale gets,
fast: the calls are sent as one stream of requests with CLIENT REPLY OFF
(the server answers nothing until CLIENT REPLY ON), and each case then
checks through the report that every call landed. No timed assertion (the
machines are shared and noisy): the durations are figures to read.

The cases: RECONCILE ... APPLY retaking the oldest reservation of a buyer
with N live ones; RESERVE without REQID after clients took the generated id
and 2,999 suffixes; INIT ... REPLACE of that sale; seckill_expire and the
first RESERVE after N holds ran out, with and without a stream; INIT ...
REPLACE of a draw sale of N entrants."""

import os
import socket
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'integration'))

from seckill_helpers import get, info, server_ms, wait_for  # noqa: E402
from test_bounds import _call, _generated, _pipe  # noqa: E402
from test_library import _env, fcall  # noqa: E402

N = int(os.environ.get('SECKILL_BIG_N', 1000000))
# ENTER runs the entrant digest (SHA-256 in Lua) on every call: about 15,000
# a second here, so a million entrants take a minute to make. The draw's
# case runs at this many (make bench-draw measures DRAW at a million).
ENTRANTS = int(os.environ.get('SECKILL_BIG_ENTRANTS', min(N, 200000)))


def _resp(args):
    """One request in RESP (bytes)."""
    parts = [b'*%d\r\n' % len(args)]
    for a in args:
        a = a if isinstance(a, bytes) else str(a).encode()
        parts.append(b'$%d\r\n%s\r\n' % (len(a), a))
    return b''.join(parts)


def _flood(c, requests, chunk=1 << 22):
    """Sends `requests` (RESP bytes, one after another) on a connection of
    its own with replies off; returns the seconds until the server had
    run them all (CLIENT REPLY ON answers after the last)."""
    kw = c.connection_pool.connection_kwargs
    started = time.monotonic()
    with socket.create_connection((kw.get('host', 'localhost'), kw['port'])) as s:
        s.sendall(_resp(('CLIENT', 'REPLY', 'OFF')))
        for at in range(0, len(requests), chunk):
            s.sendall(requests[at:at + chunk])
        s.sendall(_resp(('CLIENT', 'REPLY', 'ON')))
        answer = b''
        while not answer.endswith(b'\r\n'):
            more = s.recv(64)
            if not more:
                break
            answer += more
    assert answer == b'+OK\r\n', answer
    return time.monotonic() - started


def _calls(head, users):
    """`head` + (user,) for each user, as one RESP stream: the request's
    bytes up to the user are made once."""
    prefix = b'*%d\r\n' % (len(head) + 1) + _resp(head)[len(b'*%d\r\n' % len(head)):]
    return b''.join(prefix + b'$%d\r\n%s\r\n' % (len(u), u) for u in users)


def _users(n, prefix=b'u'):
    return [prefix + b'%d' % i for i in range(n)]


def _n(n):
    return '{:,}'.format(n)


def _show(env, rows):
    """Prints each case's slowest call (the slow log's duration, us)."""
    for what, us in rows:
        env.debugPrint('%s: slow log %d us' % (what, us), force=True)


def _rate(c):
    """Library RESERVEs (with a stream) a second on this server now, on a
    scratch sale."""
    key = 'rate:{h}'
    c.execute_command(*fcall('init', key, 100000, 'HOLD', 600000, 'STREAM', key + ':ev'))
    n = 20000
    took = _flood(c, _calls(fcall('reserve', key), _users(n)))
    c.execute_command('DEL', key, key + ':ev')
    return n / took


def _make_holds(env, c):
    """N holds on a sale without a stream and N on one with a stream; they
    last about three times as long as making them took by the measured
    rate, so none runs out while they are made and the other cases run
    while they wait. Returns ({stream: key}, deadline of the last hold)."""
    hold_ms = int(2000 + 3 * 1000 * 2 * N / _rate(c))
    keys = {False: 'hold:{h}', True: 'holds:{h}'}
    for stream, key in keys.items():
        env.assertOk(c.execute_command(*fcall('init', key, 2 * N, 'HOLD', hold_ms,
                                              *(('STREAM', key + ':ev') if stream else ()))))
    took = sum(_flood(c, _calls(fcall('reserve', key), _users(N))) for key in keys.values())
    for key in keys.values():
        r = info(c, key)
        env.assertEqual((r['pending'], r['expired']), (N, 0), message='holds ran out while they were made')
    last = c.execute_command(*fcall('reserve', keys[True], 'last'))[1]
    env.debugPrint('made %s holds in %.1f s (HOLD %d ms)' % (_n(2 * N), took, hold_ms), force=True)
    return keys, get(c, keys[True], last)['deadline_ms']


def _holds_run_out(env, c, keys, deadline):
    """Once every hold ran out: seckill_expire 256 and the first RESERVE
    after them each release their bound (128, or 64 with a stream) and
    leave the rest due."""
    env.assertTrue(wait_for(lambda: server_ms(c) > deadline, timeout=max(5, (deadline - server_ms(c)) / 1000 + 5)))
    rows = []
    for stream, key in keys.items():
        most = 64 if stream else 128
        label = ' with a stream' if stream else ''
        reply, _, us = _call(c, *fcall('expire', key, 256))
        env.assertEqual(reply, [most, 1])
        rows.append(('seckill_expire 256 on %s due holds%s' % (_n(N), label), us))
        reply, _, us = _call(c, *fcall('reserve', key, 'new'))
        env.assertEqual(reply[0], 'RESERVED')
        env.assertEqual(info(c, key)['expired'], 2 * most)
        rows.append(('the first RESERVE after %s holds ran out%s' % (_n(N), label), us))
    return rows


def _whale(env, c):
    """One buyer holding N live reservations: the retake of the oldest, a
    generated id whose next 3,000 candidates clients took, then INIT ...
    REPLACE of the whole sale (UNLINK: freed in the background)."""
    key = 'big:{w}'
    env.assertOk(c.execute_command(*fcall('init', key, 2 * N + 10000, 'LIMIT', 2 * N + 10000)))
    env.assertEqual(c.execute_command(*fcall('reserve', key, 'whale', 'REQID', 'old'))[0], 'RESERVED')
    env.assertEqual(c.execute_command(*fcall('release', key, 'old'))[0], 'RELEASED')
    took = _flood(c, _calls(fcall('reserve', key), [b'whale'] * N))
    env.assertEqual(info(c, key)['pending'], N)
    env.debugPrint('made %s reservations of one buyer in %.1f s' % (_n(N), took), force=True)
    rows = []
    reply, _, us = _call(c, *fcall('reconcile', key, 'ORDERS', 1, 'old', 'whale', 1, 'APPLY'))
    rep = dict(zip(reply[0::2], reply[1::2]))
    env.assertEqual((rep['orders_released_ids'], rep['confirmed'], rep['pending'], rep['buyers']),
                    (['old'], 1, N, 1))
    rows.append(('RECONCILE APPLY retaking the oldest of a buyer with %s live' % _n(N), us))
    # The generated ids: the next one and its 2,999 suffixes taken as REQIDs.
    st, rid, _ = c.execute_command(*fcall('reserve', key, 'whale'))
    env.assertEqual(st, 'RESERVED')
    tag, seq = rid.split('-')[0], int(rid.split('-')[1])
    gid = _generated(c, key, tag, seq + 3001)
    taken = [gid] + ['%s-%d' % (gid, j) for j in range(1, 3000)]
    replies = _pipe(c, [fcall('reserve', key, 't%d' % j, 'REQID', t) for j, t in enumerate(taken)])
    env.assertEqual({r[0] for r in replies}, {'RESERVED'})
    reply, _, us = _call(c, *fcall('reserve', key, 'y'))
    env.assertEqual(reply[0], 'RESERVED')
    env.assertTrue(reply[1].startswith(gid + '-') and reply[1] not in taken, message=reply[1])
    rows.append(('RESERVE after clients took the generated id and 2,999 suffixes (%s records)' % _n(N), us))
    reply, _, us = _call(c, *fcall('init', key, 10, 'REPLACE'))
    env.assertEqual(reply, 'OK')
    r = info(c, key)
    env.assertEqual((r['total'], r['pending']), (10, 0))
    rows.append(('INIT REPLACE of a sale of %s reservations' % _n(N), us))
    return rows


def _draw_replace(env, c):
    """INIT ... REPLACE of a draw sale of ENTRANTS entrants: its arrival
    list, entrants and REQIDs go (UNLINK) in one call."""
    key = 'draw:{d}'
    env.assertOk(c.execute_command(*fcall('init', key, 1000, 'END', server_ms(c) + 3600 * 1000, 'DRAW')))
    took = _flood(c, _calls(fcall('enter', key), _users(ENTRANTS)))
    env.assertEqual(info(c, key)['entrants'], ENTRANTS)
    env.debugPrint('made %s entrants in %.1f s' % (_n(ENTRANTS), took), force=True)
    reply, _, us = _call(c, *fcall('init', key, 10, 'REPLACE'))
    env.assertEqual(reply, 'OK')
    env.assertEqual(c.execute_command('EXISTS', key + ':entrants'), 0)
    return [('INIT REPLACE of a draw sale of %s entrants' % _n(ENTRANTS), us)]


def test_big_sales():
    """Every case on one server, the holds made first so that the other
    cases run while they wait to run out."""
    env, c = _env()
    keys, deadline = _make_holds(env, c)
    rows = _whale(env, c) + _draw_replace(env, c)
    rows += _holds_run_out(env, c, keys, deadline)
    _show(env, rows)
