"""The Functions library's own side of the contract: what the module does
through module APIs and the library does another way (docs/managed-redis.md
lists each difference). Runs with SECKILL_BACKEND=functions (mk/functions.mk),
after the shared suite of tests/integration.

Sales whose holds a test expires by hand are created with a direct
`FCALL seckill_init`: the adapter's expiry worker only follows sales created
through SECKILL.INIT."""

import hashlib
import json
import os
import random
import re
import shlex
import struct
import sys
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'integration'))

import redis  # noqa: E402
from RLTest import Env  # noqa: E402

from seckill_backend import LIBRARY, READ_ONLY, declared_keys  # noqa: E402
from seckill_helpers import (FUNCTIONS, RawConn, check_invariant, digest, digest_value, get, info,  # noqa: E402
                             reserve, server_ms, wait_aof_rewrite, wait_for)
from test_draw import _draw_order, _entrants_digest  # noqa: E402  (the contract's order, recomputed)


def draw_order(seed_hex, entrants, beacon_value=None):
    """[(user, qty)] in arrival order -> the entrants in the v2 draw order
    (test_draw's one recomputation of it)."""
    return _draw_order(seed_hex, entrants, beacon_value)[2]


def entrants_digest(entrants):
    return _entrants_digest(entrants)


def _env(**kw):
    if not FUNCTIONS:
        raise unittest.SkipTest('the Functions library only (SECKILL_BACKEND=functions)')
    env = Env(decodeResponses=True, **kw)
    return env, env.getConnection()


def _library_version():
    with open(LIBRARY) as f:
        return re.search(r"local VERSION = '([^']+)'", f.read()).group(1)


def fcall(fn, key, *args):
    """`FCALL[_RO] seckill_<fn> n key [keys...] args...` with the keys the
    call declares (the adapter's list: docs/managed-redis.md, "Calling it")."""
    sub = fn.upper()
    keys = (key,) + declared_keys(sub, ('SECKILL.' + sub, key) + args)
    verb = 'FCALL_RO' if sub in READ_ONLY + ('KEYS', 'STATS') else 'FCALL'
    return (verb, 'seckill_' + fn) + (len(keys),) + keys + args


def _init(c, key, *args):
    """INIT without the adapter's expiry worker following the sale."""
    return c.execute_command(*fcall('init', key, *args))


def _expire_reply(c, key, *count):
    """seckill_expire's [released, more]."""
    return c.execute_command(*fcall('expire', key, *count))


def _expire(c, key, *count):
    """How many holds seckill_expire released."""
    released, more = _expire_reply(c, key, *count)
    assert more in (0, 1), more
    return released


def _messages(ps, timeout=0.5):
    """(channel, message) pairs until `timeout` passes without one."""
    out = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        m = ps.get_message(ignore_subscribe_messages=True, timeout=0.05)
        if m and m['type'] in ('message', 'pmessage'):
            out.append((m['channel'], m['data']))
            deadline = time.monotonic() + timeout
    return out


def test_function_flags():
    """The module's read/write flags, as function flags: FCALL_RO runs INFO,
    GET, ENTRANTS, seckill_keys and seckill_stats (on replicas too); no
    function has allow-oom, which some managed services refuse."""
    env, c = _env()
    libs = c.execute_command('FUNCTION', 'LIST', 'LIBRARYNAME', 'seckill')
    env.assertEqual(len(libs), 1)
    lib = dict(zip(libs[0][0::2], libs[0][1::2]))
    env.assertEqual(lib['library_name'], 'seckill')
    flags = {}
    for fn in lib['functions']:
        d = dict(zip(fn[0::2], fn[1::2]))
        flags[d['name']] = set(d['flags'])
    env.assertEqual(flags, {
        'seckill_init': set(), 'seckill_reserve': set(), 'seckill_send': set(),
        'seckill_release': set(), 'seckill_confirm': set(), 'seckill_recv': set(),
        'seckill_reconcile': set(), 'seckill_expire': set(), 'seckill_unfence': set(),
        'seckill_info': {'no-writes'}, 'seckill_get': {'no-writes'},
        'seckill_enter': set(), 'seckill_draw': set(), 'seckill_entrants': {'no-writes'},
        'seckill_keys': {'no-writes'}, 'seckill_stats': {'no-writes'},
        'seckill_version': {'no-writes', 'allow-stale'}})
    # One key routes the version probe (services refuse calls without one);
    # none still answers, for older callers.
    env.assertEqual(c.execute_command('FCALL_RO', 'seckill_version', 1, 'any'), _library_version())
    env.assertEqual(c.execute_command('FCALL_RO', 'seckill_version', 0), _library_version())
    env.expect('FCALL_RO', 'seckill_reserve', 1, 's', 'u').error().contains('write flag')


def test_resp3_replies():
    """Under RESP3 the statuses, integers and nils are RESP3's; the reports
    stay flat field/value arrays in the module's order (a Lua table cannot
    keep a map's order, and a function cannot see the caller's protocol)."""
    env, c = _env()
    env.assertOk(c.execute_command('SECKILL.INIT', 's', 5, 'SHARDS', 2))
    raw = RawConn(c, resp3=True)
    r_info = raw.call('SECKILL.INFO', 's')
    r_res = raw.call('SECKILL.RESERVE', 's', 'u', 'REQID', 'r1')
    r_get = raw.call('SECKILL.GET', 's', 'r1')
    r_none = raw.call('SECKILL.INFO', 'nokey')
    r_nosale = raw.call('SECKILL.RESERVE', 'nokey', 'u')
    r_rel = raw.call('SECKILL.RELEASE', 's', 'nope')
    r_rec = raw.call('SECKILL.RECONCILE', 's', 'ORDERS', 1, 'x', 'u', 1)
    raw.close()
    env.assertTrue(r_info.startswith(b'*20\r\n$5\r\ntotal\r\n:5\r\n$9\r\nremaining\r\n:5\r\n'), message=r_info)
    env.assertContains(b'$6\r\nshards\r\n*2\r\n:3\r\n:2\r\n', r_info)
    env.assertTrue(r_info.endswith(b'$9\r\ninvariant\r\n+ok\r\n'), message=r_info)
    env.assertEqual(r_res, b'*3\r\n+RESERVED\r\n$2\r\nr1\r\n:4\r\n')
    env.assertTrue(r_get.startswith(b'*10\r\n$4\r\nuser\r\n$1\r\nu\r\n$3\r\nqty\r\n:1\r\n$5\r\nstate\r\n$7\r\npending\r\n'),
                   message=r_get)
    env.assertEqual(r_none, b'_\r\n')
    env.assertEqual(r_nosale, b'*3\r\n+NO_SALE\r\n_\r\n:0\r\n')
    env.assertEqual(r_rel, b'*2\r\n+NOT_FOUND\r\n:4\r\n')
    env.assertTrue(r_rec.startswith(b'*38\r\n'), message=r_rec)
    env.assertContains(b'$18\r\norders_unknown_ids\r\n*1\r\n$1\r\nx\r\n', r_rec)


def test_stock_edges_are_published():
    """seckill.soldout / seckill.restock reach subscribers of
    seckill:events:<key> (the module raises them as keyspace events)."""
    env, c = _env()
    ps = c.pubsub()
    ps.psubscribe('seckill:events:*')
    ps.get_message(timeout=1)
    env.assertOk(c.execute_command('SECKILL.INIT', 's', 1))
    env.assertEqual(_messages(ps, 0.2), [])
    _, rid, _ = reserve(c, 's', 'u1')
    env.assertEqual(_messages(ps), [('seckill:events:s', 'seckill.soldout')])
    env.assertEqual(reserve(c, 's', 'u2')[0], 'SOLD_OUT')
    env.assertEqual(_messages(ps, 0.2), [])
    c.execute_command('SECKILL.RELEASE', 's', rid)
    env.assertEqual(_messages(ps), [('seckill:events:s', 'seckill.restock')])
    env.assertOk(c.execute_command('SECKILL.INIT', 's', 0, 'REPLACE'))
    env.assertEqual(_messages(ps), [('seckill:events:s', 'seckill.soldout')])
    env.assertOk(c.execute_command('SECKILL.INIT', 's', 2, 'REPLACE'))
    env.assertEqual(_messages(ps), [('seckill:events:s', 'seckill.restock')])
    # A hold released by seckill_expire restocks.
    env.assertOk(_init(c, 'h', 1, 'HOLD', 50))
    reserve(c, 'h', 'u')
    time.sleep(0.1)
    env.assertEqual(_expire(c, 'h'), 1)
    env.assertEqual(_messages(ps), [('seckill:events:h', 'seckill.soldout'), ('seckill:events:h', 'seckill.restock')])
    # SEND that empties a part, RECV that refills it.
    env.assertOk(c.execute_command('SECKILL.INIT', 'a', 3, 'SPLIT', 'r1', 1, 'b'))
    c.execute_command('SECKILL.SEND', 'a', 'b', 3, 'TID', 't1', 'ROUND', 'r1')
    c.execute_command('SECKILL.SEND', 'a', 'b', 3, 'TID', 't2', 'ROUND', 'r1')
    c.execute_command('SECKILL.RECV', 'a', 'b', 1, 'ROUND', 'r1')
    env.assertEqual(_messages(ps), [('seckill:events:a', 'seckill.soldout'), ('seckill:events:a', 'seckill.restock')])
    ps.close()


def test_expire_on_demand():
    """FCALL seckill_expire 1 key [count]: due holds, oldest first, at most
    count (default 128, at most 256) per call, and at most 128 (64 with a
    stream, as here) whatever the count; replies how many, and whether
    more are due."""
    env, c = _env()
    K = 'q:{e}'
    env.assertOk(_init(c, K, 500, 'HOLD', 1500, 'STREAM', K + ':ev'))
    p = c.pipeline(transaction=False)
    for i in range(300):
        p.execute_command('SECKILL.RESERVE', K, 'u%d' % i, 'REQID', 'r%03d' % i)
    p.execute()
    d = digest(c)
    env.assertEqual(_expire_reply(c, K), [0, 0])   # nothing due yet: nothing written
    env.assertEqual(digest(c), d)
    last = get(c, K, 'r299')['deadline_ms']
    env.assertTrue(wait_for(lambda: server_ms(c) > last, timeout=5))
    env.assertEqual(_expire_reply(c, K, 50), [50, 1])
    r = check_invariant(env, c, K)
    env.assertEqual((r['expired'], r['pending']), (50, 250))
    # Oldest first.
    env.assertEqual(get(c, K, 'r049')['state'], 'released')
    env.assertEqual(get(c, K, 'r050')['state'], 'pending')
    env.assertEqual(_expire_reply(c, K, 60), [60, 1])
    env.assertEqual(_expire_reply(c, K), [64, 1])
    env.assertEqual(_expire_reply(c, K, 256), [64, 1])
    env.assertEqual(get(c, K, 'r237')['state'], 'released')
    env.assertEqual(get(c, K, 'r238')['state'], 'pending')
    # The last due hold released: more says none is left.
    env.assertEqual(_expire_reply(c, K, 62), [62, 0])
    env.assertEqual(_expire_reply(c, K), [0, 0])
    r = check_invariant(env, c, K)
    env.assertEqual((r['expired'], r['pending'], r['remaining']), (300, 0, 500))
    entries = c.execute_command('XRANGE', K + ':ev', '-', '+')
    env.assertEqual([e[1]['event'] for e in entries].count('expired'), 300)
    env.assertEqual(_expire_reply(c, 'nokey'), [0, 0])
    env.expect(*fcall('expire', K, 0)).error().contains('count must be from 1 to 256')
    env.expect(*fcall('expire', K, 257)).error().contains('count must be from 1 to 256')
    env.expect(*fcall('expire', K, 'x')).error().contains('count is not an integer')
    env.expect(*fcall('expire', K, 1, 2)).error().contains('wrong number of arguments')
    c.execute_command('SET', 'str', 'x')
    env.expect(*fcall('expire', 'str')).error().contains('WRONGTYPE')


def test_expiry_is_bounded():
    """A call releases at most 128 due holds before its own work (the
    module's LAZY_CHUNK), 64 with a stream (as here), seckill_expire as
    many, and no such call takes long (the slow log's 20 ms is a loose
    bound for a shared machine: about 15 us a hold here;
    tests/functions/test_bounds.py counts the work instead)."""
    env, c = _env()
    env.assertOk(_init(c, 'e:{1}', 5000, 'HOLD', 1500, 'STREAM', 'e:{1}:ev'))
    p = c.pipeline(transaction=False)
    for i in range(2000):
        p.execute_command('SECKILL.RESERVE', 'e:{1}', 'u%d' % i)
    p.execute()
    env.assertEqual(info(c, 'e:{1}')['expired'], 0, message='holds ran out while they were made')
    last = get(c, 'e:{1}', c.execute_command('XREVRANGE', 'e:{1}:ev', '+', '-', 'COUNT', 1)[0][1]['rid'])
    env.assertTrue(wait_for(lambda: server_ms(c) > last['deadline_ms'], timeout=5))
    env.assertEqual(reserve(c, 'e:{1}', 'late')[0], 'RESERVED')
    r = info(c, 'e:{1}')
    env.assertEqual((r['expired'], r['pending']), (64, 2000 - 64 + 1))
    c.execute_command('SLOWLOG', 'RESET')
    c.execute_command('CONFIG', 'SET', 'slowlog-log-slower-than', 20000)
    left = 2000 - 64
    while left:
        n = _expire(c, 'e:{1}', 256)
        env.assertEqual(n, min(64, left))
        left -= n
    slow = c.execute_command('SLOWLOG', 'GET', 10)
    env.assertEqual([s[3] for s in slow], [], message='calls over 20 ms')
    env.assertEqual(_expire(c, 'e:{1}', 256), 0)
    check_invariant(env, c, 'e:{1}')


def test_lazy_expiry_outside_multi():
    """Every write on a sale first releases its due holds (RESERVE,
    CONFIRM, RELEASE, RECONCILE EXPIRE); reads never write. The shared
    suite checks this inside MULTI with DEBUG SLEEP, which servers that
    freeze the clock during a transaction cannot show (see SKIPS)."""
    env, c = _env()
    for cmd, want in (('SECKILL.RESERVE', None), ('SECKILL.CONFIRM', ['RELEASED', 1]),
                      ('SECKILL.RELEASE', ['ALREADY_RELEASED', 1])):
        env.assertOk(_init(c, 'x', 1, 'HOLD', 100, 'REPLACE'))
        env.assertEqual(reserve(c, 'x', 'u', 'REQID', 'q'), ['RESERVED', 'q', 0])
        time.sleep(0.2)
        d = digest(c)
        g = get(c, 'x', 'q')
        env.assertEqual((g['state'], info(c, 'x')['pending']), ('pending', 1))   # reads show it pending
        env.assertEqual(digest(c), d)
        if want is None:
            env.assertEqual(reserve(c, 'x', 'v', 'REQID', 'q2'), ['RESERVED', 'q2', 0])
        else:
            env.assertEqual(c.execute_command(cmd, 'x', 'q'), want, message=cmd)
        r = check_invariant(env, c, 'x')
        env.assertEqual((r['expired'], get(c, 'x', 'q')['state']), (1, 'released'), message=cmd)
    # RECONCILE EXPIRE with the order of a hold it releases: "released".
    env.assertOk(_init(c, 't', 4, 'HOLD', 100))
    reserve(c, 't', 'u', 'REQID', 'r9')
    time.sleep(0.2)
    rep = c.execute_command('SECKILL.RECONCILE', 't', 'ORDERS', 1, 'r9', 'u', 1)
    rep = dict(zip(rep[0::2], rep[1::2]))
    env.assertEqual((rep['orders_pending'], rep['expired']), (1, 0))     # without EXPIRE: as it stands
    rep = c.execute_command('SECKILL.RECONCILE', 't', 'EXPIRE', 'ORDERS', 1, 'r9', 'u', 1)
    rep = dict(zip(rep[0::2], rep[1::2]))
    env.assertEqual((rep['pending'], rep['expired'], rep['orders_released_ids']), (0, 1, ['r9']))


def test_cursor_moves_on_past_settled_records():
    """The hold cursor reads at most 256 records per call: a hold behind
    more than that many settled reservations still runs out, one bounded
    call after another."""
    env, c = _env()
    env.assertOk(_init(c, 's', 5000, 'HOLD', 400))
    _, a, _ = reserve(c, 's', 'a')
    p = c.pipeline(transaction=False)
    for i in range(1100):
        p.execute_command('SECKILL.RESERVE', 's', 'u%d' % i, 'REQID', 'c%d' % i)
        p.execute_command('SECKILL.CONFIRM', 's', 'c%d' % i)
    p.execute()
    _, b, _ = reserve(c, 's', 'b')
    env.assertEqual(c.execute_command('SECKILL.CONFIRM', 's', a)[0], 'CONFIRMED')
    env.assertTrue(wait_for(lambda: _expire(c, 's') == 1, timeout=3))
    env.assertEqual(get(c, 's', b)['state'], 'released')
    r = check_invariant(env, c, 's')
    env.assertEqual((r['pending'], r['confirmed'], r['expired']), (0, 1101, 1))


def test_a_copy_never_writes_the_live_stream():
    """COPY and RESTORE under another name are snapshots that write nothing
    to the original's stream. The library cannot see RENAME: a renamed sale
    writes no entries (a contract difference) until it is renamed back."""
    env, c = _env()
    key, stream = 'sale:{cp}', 'sale:{cp}:ev'
    env.assertOk(_init(c, key, 10, 'HOLD', 200, 'LIMIT', 5, 'STREAM', stream))
    reserve(c, key, 'u1', 'REQID', 'o1')
    reserve(c, key, 'u2', 'REQID', 'o2')
    c.execute_command('COPY', key, key + ':backup')
    c.execute_command('RESTORE', key + ':restored', 0, c.dump(key))
    c.execute_command('SECKILL.CONFIRM', key, 'o1')
    copies = (key + ':backup', key + ':restored')
    for copy in copies:
        env.assertEqual(reserve(c, copy, 'u3', 'REQID', 'o3')[0], 'RESERVED')
        env.assertEqual(c.execute_command('SECKILL.RELEASE', copy, 'o3')[0], 'RELEASED')
    time.sleep(0.25)
    # o2 on the sale; o1 and o2 on each copy (o1 was confirmed on the sale only).
    for k, due in ((key, 1), (copies[0], 2), (copies[1], 2)):
        env.assertEqual(_expire(c, k), due, message=k)
    events = [(e[1]['event'], e[1]['rid']) for e in c.xrange(stream)]
    env.assertEqual(events, [('reserved', 'o1'), ('reserved', 'o2'), ('confirmed', 'o1'), ('expired', 'o2')])
    c.execute_command('RENAME', key, key + ':moved')
    env.assertEqual(reserve(c, key + ':moved', 'u4', 'REQID', 'o4')[0], 'RESERVED')
    env.assertEqual(c.xrange(stream)[-1][1]['rid'], 'o2')
    c.delete(key + ':moved')
    c.execute_command('RENAME', key + ':backup', key)
    env.assertEqual(reserve(c, key, 'u5', 'REQID', 'o5')[0], 'RESERVED')
    env.assertEqual(c.xrange(stream)[-1][1]['rid'], 'o5')


def test_one_key_per_sale():
    """The sale is one hash (plus its stream): DEL key removes all of it,
    and nothing else is left behind."""
    env, c = _env()
    env.assertOk(c.execute_command('SECKILL.INIT', 'sale:{d}', 10, 'SHARDS', 4, 'LIMIT', 3, 'STREAM', 'sale:{d}:ev'))
    for i in range(5):
        reserve(c, 'sale:{d}', 'u%d' % i, 'QTY', 2, 'REQID', 'q%d' % i)
    c.execute_command('SECKILL.CONFIRM', 'sale:{d}', 'q0')
    env.assertEqual(sorted(c.keys('*')), ['sale:{d}', 'sale:{d}:ev'])
    env.assertEqual(c.type('sale:{d}'), 'hash')
    env.assertEqual(c.delete('sale:{d}'), 1)
    env.assertEqual(c.keys('*'), ['sale:{d}:ev'])
    env.assertIsNone(c.execute_command('SECKILL.INFO', 'sale:{d}'))
    env.assertEqual(reserve(c, 'sale:{d}', 'u'), ['NO_SALE', None, 0])


def test_a_hash_that_is_not_a_sale():
    env, c = _env()
    env.assertOk(c.execute_command('SECKILL.INIT', 's', 5))
    c.hset('h', 'f', 'v')
    for cmd in (['SECKILL.INFO', 'h'], ['SECKILL.RESERVE', 'h', 'u'], ['SECKILL.RELEASE', 'h', 'r'],
                ['SECKILL.INIT', 'h', 5], ['SECKILL.INIT', 'h', 5, 'REPLACE']):
        env.expect(*cmd).error().contains('WRONGTYPE')
    c.hset('v2', 'm', struct.pack('<23d', 17, *[0] * 22) + b'0:0:0:0:')   # a sale of a later layout
    env.expect('SECKILL.INFO', 'v2').error().contains('another version of the seckill library')
    # A draw sale of draws v1 (layout 2, 4 with FENCE: the order in <key>:draw,
    # the seed in the hash) is refused the same way, by every function.
    for layout in (2, 4):
        c.hset('v1:%d' % layout, 'm', struct.pack('<23d', layout, *[0] * 22) + b'0:0:0:0:')
        for cmd in (['SECKILL.INFO'], ['SECKILL.ENTER', 'u'], ['SECKILL.DRAW'], ['SECKILL.ENTRANTS', 0],
                    ['SECKILL.INIT', 5, 'REPLACE']):
            env.expect(cmd[0], 'v1:%d' % layout, *cmd[1:]).error().contains(
                'written by another version of the seckill library (layout %d)' % layout)
    env.assertEqual(c.hgetall('h'), {'f': 'v'})
    # A plain hash with a field `m` that is no sale's settings: too short,
    # or a layout no library writes (not an integer 1 to 255): WRONGTYPE, as
    # the module answers for any hash.
    bad = [b'x', b'hello world', struct.pack('<23d', 0, *[0] * 22) + b'0:0:0:0:',
           struct.pack('<23d', 1.5, *[0] * 22) + b'0:0:0:0:', struct.pack('<23d', 256, *[0] * 22),
           struct.pack('<23d', -1, *[0] * 22), b'\x55' * 200, b'\xff' * 200]
    for i, m in enumerate(bad):
        k = 'pm:%d' % i
        c.hset(k, mapping={'m': m, 'f': 'v'})
        for cmd in (['SECKILL.INFO'], ['SECKILL.RESERVE', 'u'], ['SECKILL.RESERVE', 'u', 'REQID', 'r'],
                    ['SECKILL.RELEASE', 'r'], ['SECKILL.RECONCILE', 'ORDERS', 1, 'r', 'u', 1, 'APPLY'],
                    ['SECKILL.INIT', 5], ['SECKILL.INIT', 5, 'REPLACE'], ['SECKILL.ENTER', 'u']):
            env.expect(cmd[0], k, *cmd[1:]).error().contains('WRONGTYPE')
        env.assertEqual(c.hlen(k), 2)   # untouched


def test_one_bucket_is_rem():
    """A one-bucket sale keeps no b:0 field (its remaining units are the
    counter in `m`); a b:0 that library 1.0.0 left is never read, and goes
    with the sale's next write that reads the whole sale (RELEASE here)."""
    env, c = _env()
    env.assertOk(c.execute_command('SECKILL.INIT', 's', 5, 'LIMIT', 2))
    env.assertEqual(sorted(c.hkeys('s')), ['a:0', 'k', 'm'])
    c.hset('s', 'b:0', 999)                      # as 1.0.0 wrote it, and stale
    env.assertEqual(reserve(c, 's', 'u')[2], 4)
    env.assertEqual(reserve(c, 's', 'u', 'REQID', 'q')[2], 3)      # the general path (a buyer with units)
    env.assertEqual(c.execute_command('SECKILL.RELEASE', 's', 'q'), ['RELEASED', 4])
    env.assertFalse(c.hexists('s', 'b:0'))
    r = info(c, 's')
    env.assertEqual((r['remaining'], r['shards'], r['invariant']), (4, [4], 'ok'))
    env.assertOk(c.execute_command('SECKILL.INIT', 'm', 5, 'SHARDS', 2))
    env.assertEqual(sorted(c.hkeys('m')), ['a:0', 'a:1', 'b:0', 'b:1', 'k', 'm'])


def test_stream_of_another_type_changes_nothing():
    """A stream key that became another type refuses the call before any
    change (the stream entry is written first, in the same call)."""
    env, c = _env()
    env.assertOk(c.execute_command('SECKILL.INIT', 's:{1}', 5, 'LIMIT', 2, 'STREAM', 's:{1}:ev'))
    _, rid, _ = reserve(c, 's:{1}', 'u')
    c.delete('s:{1}:ev')
    c.set('s:{1}:ev', 'x')
    d = digest(c)
    for cmd in (['SECKILL.RESERVE', 's:{1}', 'v'], ['SECKILL.CONFIRM', 's:{1}', rid],
                ['SECKILL.RECONCILE', 's:{1}', 'ORDERS', 1, 'n', 'w', 1, 'APPLY']):
        env.expect(*cmd).error().contains('not a stream')
        env.assertEqual(digest(c), d, message=cmd)
    # Calls that write no entry still work.
    env.assertEqual(c.execute_command('SECKILL.RELEASE', 's:{1}', 'nope'), ['NOT_FOUND', 4])
    env.assertEqual(info(c, 's:{1}')['pending'], 1)


def test_one_call_is_one_transaction():
    """A call's writes reach the AOF (and replicas) as one MULTI/EXEC of
    plain commands: a 300-row RECONCILE APPLY is one transaction, and a call
    that changes nothing writes nothing."""
    env, c = _env(useAof=True)
    c.execute_command('CONFIG', 'SET', 'auto-aof-rewrite-percentage', 0)  # no rewrite between the counts
    wait_aof_rewrite(c)
    env.assertOk(c.execute_command('SECKILL.INIT', 'r:{1}', 1000, 'STREAM', 'r:{1}:ev'))
    pending = [reserve(c, 'r:{1}', 'p%d' % i)[1] for i in range(100)]
    rows = [(rid, 'p%d' % i, 1) for i, rid in enumerate(pending)] + [('x%d' % i, 'x%d' % i, 1) for i in range(200)]
    before = len(_aof_commands(c))
    r = c.execute_command('SECKILL.RECONCILE', 'r:{1}', 'ORDERS', len(rows), *[a for row in rows for a in row], 'APPLY')
    report = dict(zip(r[0::2], r[1::2]))
    env.assertEqual((report['orders_pending'], report['orders_unknown'], report['confirmed']), (100, 200, 300))
    added = [cmd[0].upper() for cmd in _aof_commands(c)[before:]]
    env.assertEqual((added[0], added[-1], added.count(b'MULTI'), added.count(b'EXEC')), (b'MULTI', b'EXEC', 1, 1))
    env.assertEqual(added.count(b'XADD'), 300)
    env.assertGreaterEqual(added.count(b'HSET'), 1)
    before = len(_aof_commands(c))
    env.assertEqual(reserve(c, 'r:{1}', 'p0')[0], 'LIMIT')
    c.execute_command('SECKILL.INFO', 'r:{1}')
    c.execute_command('SECKILL.CONFIRM', 'r:{1}', pending[0])
    env.assertEqual(len(_aof_commands(c)[before:]), 0)
    want = digest_value(c, 'r:{1}')
    env.restartAndReload()
    env.assertEqual(digest_value(env.getConnection(), 'r:{1}'), want)


def _aof_commands(conn):
    """The commands of the AOF's incremental files (manifest lines
    `file NAME seq N type i [startoffset N]`: Redis 8 adds the offset)."""
    from test_corrupt_input import _parse_resp_commands
    wait_aof_rewrite(conn)
    folder = os.path.join(conn.config_get('dir')['dir'], conn.config_get('appenddirname')['appenddirname'])
    name = conn.config_get('appendfilename')['appendfilename']
    cmds = []
    with open(os.path.join(folder, name + '.manifest')) as f:
        for line in f:
            words = line.split()
            if 'type' in words and words[words.index('type') + 1] == 'i':
                with open(os.path.join(folder, words[words.index('file') + 1]), 'rb') as g:
                    cmds += _parse_resp_commands(g.read())
    return cmds


def test_replica_reads_with_fcall_ro():
    env, c = _env(useSlaves=True)
    env.assertOk(c.execute_command('SECKILL.INIT', 'sale:{r}', 5, 'SHARDS', 2))
    _, rid, _ = reserve(c, 'sale:{r}', 'u')
    env.assertEqual(c.execute_command('WAIT', 1, 10000), 1)
    replica = env.getSlaveConnection()
    env.assertEqual(info(replica, 'sale:{r}'), info(c, 'sale:{r}'))
    env.assertEqual(get(replica, 'sale:{r}', rid)['state'], 'pending')
    env.assertEqual(replica.execute_command('FCALL_RO', 'seckill_version', 1, 'sale:{r}'), _library_version())
    env.expect(*fcall('reserve', 'sale:{r}', 'v'))  # master: fine
    try:
        replica.execute_command(*fcall('reserve', 'sale:{r}', 'w'))
        env.assertTrue(False, message='a replica ran a write function')
    except redis.exceptions.ReadOnlyError:
        pass
    env.assertEqual(c.execute_command('WAIT', 1, 10000), 1)
    env.assertEqual(digest(replica), digest(c))


def test_expiry_under_maxmemory():
    """No function has allow-oom (docs/managed-redis.md, "Settling at
    maxmemory"): over maxmemory seckill_expire is refused and changes
    nothing; once memory is back it gives the stock back."""
    env, c = _env()
    env.assertOk(_init(c, 's', 3, 'HOLD', 50))
    reserve(c, 's', 'u')
    time.sleep(0.1)
    c.execute_command('CONFIG', 'SET', 'maxmemory-policy', 'noeviction')
    c.execute_command('CONFIG', 'SET', 'maxmemory', 1)
    try:
        before = digest(c)
        env.expect('SECKILL.RESERVE', 's', 'v').error().contains('maxmemory')
        env.expect(*fcall('expire', 's')).error().contains('maxmemory')
        env.assertEqual(digest(c), before)
        env.assertEqual(info(c, 's')['pending'], 1)
    finally:
        c.execute_command('CONFIG', 'SET', 'maxmemory', 0)
    env.assertEqual(_expire_reply(c, 's'), [1, 0])
    env.assertEqual(info(c, 's')['remaining'], 3)


def test_expire_says_when_it_is_done():
    """Paid holds among the due ones: a call reads at most 256 records, so
    it may release fewer than count while due holds remain; `more` says so,
    and a worker that calls again while more is 1 releases every due hold."""
    env, c = _env()
    K = 'm:{1}'
    env.assertOk(_init(c, K, 3000, 'HOLD', 300))
    p = c.pipeline(transaction=False)
    for i in range(2000):
        p.execute_command('SECKILL.RESERVE', K, 'u%d' % i, 'REQID', 'r%d' % i)
    for i in range(1100):
        p.execute_command('SECKILL.CONFIRM', K, 'r%d' % i)
    p.execute()
    time.sleep(0.4)
    first = _expire_reply(c, K, 256)
    env.assertEqual(first[1], 1, message='due holds remain')
    released, calls, more = first[0], 1, first[1]
    while more:
        n, more = _expire_reply(c, K, 256)
        released, calls = released + n, calls + 1
        env.assertLess(calls, 20)
    env.assertEqual(released, 900)
    r = check_invariant(env, c, K)
    env.assertEqual((r['pending'], r['expired'], r['confirmed']), (0, 900, 1100))


def test_every_key_a_call_touches_is_declared():
    """seckill_keys lists a sale's stream and a draw sale's keys (INIT and
    DRAW also declare <key>:secret, which nothing else touches); a call
    that does not declare one it touches is refused before it changes
    anything, with the same error on every function; more keys are fine,
    and INFO and GET need the sale key alone."""
    env, c = _env()
    K, S = 'k:{1}', 'k:{1}:ev'
    undeclared = 'undeclared key %s: pass the keys FCALL_RO seckill_keys 1 %s lists after the sale key'
    env.expect('FCALL', 'seckill_init', 1, K, 10, 'HOLD', 60000, 'STREAM', S).error().contains(undeclared % (S, K))
    env.assertEqual(c.exists(K, S), 0)
    env.assertEqual(c.execute_command('FCALL_RO', 'seckill_keys', 1, K), [])
    env.assertOk(c.execute_command('FCALL', 'seckill_init', 2, K, S, 10, 'HOLD', 60000, 'STREAM', S))
    env.assertEqual(c.execute_command('FCALL_RO', 'seckill_keys', 1, K), [S])
    rid = c.execute_command('FCALL', 'seckill_reserve', 2, K, S, 'u1')[1]
    before = digest(c)
    for call in (('seckill_reserve', 'u2'), ('seckill_reserve', 'u2', 'REQID', 'o2'), ('seckill_release', rid),
                 ('seckill_confirm', rid), ('seckill_reconcile', 'EXPIRE'), ('seckill_expire',),
                 ('seckill_unfence',)):
        env.expect('FCALL', call[0], 1, K, *call[1:]).error().contains(undeclared % (S, K))
    env.assertEqual(digest(c), before)
    # Reads: the sale key alone; more keys than a call touches: accepted.
    env.assertEqual(c.execute_command('FCALL_RO', 'seckill_info', 1, K)[3], 9)
    env.assertEqual(c.execute_command('FCALL_RO', 'seckill_get', 1, K, rid)[1], 'u1')
    env.assertEqual(c.execute_command('FCALL', 'seckill_reserve', 3, K, S, K + ':other', 'u3')[0], 'RESERVED')
    # A draw sale: its four keys; DRAW alone needs the secret.
    D = 'k:{2}'
    draw_keys = [D + ':secret', D + ':entrants', D + ':perm', D + ':wait']
    end = server_ms(c) + 300
    env.expect('FCALL', 'seckill_init', 1, D, 5, 'END', end, 'DRAW').error().contains(
        undeclared % (D + ':secret', D))
    env.assertOk(c.execute_command('FCALL', 'seckill_init', 5, D, *draw_keys, 5, 'END', end, 'DRAW'))
    env.assertEqual(c.execute_command('FCALL_RO', 'seckill_keys', 1, D), draw_keys[1:])
    env.expect('FCALL', 'seckill_enter', 1, D, 'u1').error().contains(undeclared % (D + ':entrants', D))
    env.assertEqual(c.execute_command('FCALL', 'seckill_enter', 4, D, *draw_keys[1:], 'u1'), ['ENTERED', 1])
    env.expect('FCALL_RO', 'seckill_entrants', 1, D, 0).error().contains(undeclared % (D + ':entrants', D))
    env.assertEqual(c.execute_command('FCALL_RO', 'seckill_entrants', 2, D, D + ':entrants', 0),
                    ['0', ['u1', 1, 'entered']])
    env.assertTrue(wait_for(lambda: server_ms(c) > end, timeout=5))
    before = digest(c)
    env.expect('FCALL', 'seckill_draw', 4, D, *draw_keys[1:]).error().contains(undeclared % (D + ':secret', D))
    env.assertEqual(digest(c), before)
    env.assertEqual(c.execute_command('FCALL', 'seckill_draw', 5, D, *draw_keys), [1, 4, 0])
    # INIT REPLACE of a draw sale deletes its keys: it declares them.
    env.expect('FCALL', 'seckill_init', 1, D, 5, 'REPLACE').error().contains(undeclared % (D + ':secret', D))
    env.assertOk(c.execute_command('FCALL', 'seckill_init', 5, D, *draw_keys, 5, 'REPLACE'))
    env.assertEqual(c.execute_command('FCALL_RO', 'seckill_keys', 1, D), [])
    env.assertEqual(c.exists(*draw_keys), 0)
    # A key that is not a sale.
    c.set('str', 'x')
    env.expect('FCALL_RO', 'seckill_keys', 1, 'str').error().contains('WRONGTYPE')
    env.expect('FCALL_RO', 'seckill_keys', 0).error().contains('wrong number of arguments')


def test_stats_sum_the_sales_named():
    """seckill_stats n key...: INFO's counters summed over the sales among
    the keys (keys that are not sales are skipped)."""
    env, c = _env()
    env.assertOk(_init(c, 'st:{1}:a', 10, 'HOLD', 60000))
    env.assertOk(_init(c, 'st:{1}:b', 5))
    reserve(c, 'st:{1}:a', 'u1', 'QTY', 1)
    _, rid, _ = reserve(c, 'st:{1}:b', 'u1')
    c.execute_command('SECKILL.CONFIRM', 'st:{1}:b', rid)
    c.set('st:{1}:str', 'x')
    reply = c.execute_command('FCALL_RO', 'seckill_stats', 4, 'st:{1}:a', 'st:{1}:b', 'st:{1}:none', 'st:{1}:str')
    stats = dict(zip(reply[0::2], reply[1::2]))
    env.assertEqual(stats, {'sales': 2, 'reservations': 2, 'total': 15, 'remaining': 13, 'pending': 1,
                            'confirmed': 1, 'released': 0, 'expired': 0, 'buyers': 2, 'holds_pending': 1,
                            'sent': 0, 'received': 0, 'entrants': 0, 'drawn': 0, 'fenced': 0})
    env.assertEqual(c.execute_command('FCALL_RO', 'seckill_stats', 0)[:2], ['sales', 0])


def test_cluster_refuses_a_key_without_hash_tag():
    """In a cluster every key of a sale shares its hash tag: INIT refuses a
    key without one."""
    if not FUNCTIONS:
        raise unittest.SkipTest('the Functions library only (SECKILL_BACKEND=functions)')
    env = Env(env='oss-cluster', shardsCount=2, decodeResponses=True)
    conn = env.getClusterConnectionIfNeeded()
    try:
        conn.execute_command('SECKILL.INIT', 'plainkey', 5)
        env.assertTrue(False, message='a key without a hash tag was accepted in a cluster')
    except redis.ResponseError as e:
        env.assertContains('hash tag', str(e))
    env.assertEqual(conn.execute_command('SECKILL.INIT', 'sale:{plainkey}', 5), 'OK')
    env.assertEqual(conn.execute_command('SECKILL.RESERVE', 'sale:{plainkey}', 'u')[0], 'RESERVED')


# ------------------------------------------------------------- draw sales

def _raw(c):
    """A connection like `c` that returns bytes (user ids may be binary)."""
    kw = c.connection_pool.connection_kwargs
    return redis.Redis(host=kw.get('host', 'localhost'), port=kw['port'], password=kw.get('password'))


def _sha256_library():
    """The library's SHA-256 section, loaded as a library of its own with one
    function: the same Lua text seckill.lua runs."""
    with open(LIBRARY) as f:
        text = f.read()
    start = text.index('-' * 64 + ' SHA-256')
    end = text.index('\n' + '-' * 40, start + 10)
    return ('#!lua name=seckill_sha256_test\n' + text[start:end] + '\n'
            "redis.register_function{function_name = 'sha256_test', flags = {'no-writes'},\n"
            '    callback = function(keys, args) return {sha256(args[1]), tohex(sha256(args[1]))} end}\n')


def test_sha256_vectors():
    """The library's pure-Lua SHA-256 against hashlib: the empty message,
    every length around the padding boundaries (55, 56, 63, 64, 65, 119,
    120 bytes...), all 256 byte values, multi-block messages."""
    env, c = _env()
    r = _raw(c)
    r.execute_command('FUNCTION', 'LOAD', 'REPLACE', _sha256_library())
    rng = random.Random(18)
    msgs = [b'', b'abc', b'abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq', bytes(range(256)),
            bytes(range(256)) * 5, b'\x00' * 64, b'\xff' * 120]
    for n in list(range(0, 140)) + [183, 184, 191, 192, 255, 256, 288, 1000, 4096]:
        msgs.append(b'a' * n)
        msgs.append(bytes(rng.randrange(256) for _ in range(n)))
    for m in msgs:
        raw, hexd = r.execute_command('FCALL_RO', 'sha256_test', 0, m)
        env.assertEqual(raw, hashlib.sha256(m).digest(), message=repr(m[:20]) + ' len %d' % len(m))
        env.assertEqual(hexd.decode(), hashlib.sha256(m).hexdigest())
    r.execute_command('FUNCTION', 'DELETE', 'seckill_sha256_test')


def _draw_sale(env, c, key, total, *extra, users=(), end_in=3000):
    """A draw sale whose registration ends `end_in` ms from now on the
    server's clock, entered by `users` ((user, qty, reqid or None) each);
    returns its END."""
    end = server_ms(c) + end_in
    env.assertIn(_init(c, key, total, 'DRAW', 'END', end, *extra), ('OK', b'OK'))
    p = c.pipeline(transaction=False)
    for user, qty, reqid in users:
        p.execute_command(*fcall('enter', key, user, 'QTY', qty, *(['REQID', reqid] if reqid else [])))
    for i, (status, n) in enumerate(p.execute()):
        env.assertEqual((status if isinstance(status, str) else status.decode(), n), ('ENTERED', i + 1))
    return end


def _wait_end(env, c, end):
    env.assertTrue(wait_for(lambda: server_ms(c) >= end, timeout=10))


def _bdict(reply):
    return {k.decode(): v for k, v in zip(reply[0::2], reply[1::2])}


def _entrants(r, key, count=3):
    """Every (user, qty, result) through ENTRANTS' cursor, in arrival order."""
    out, cursor = [], b'0'
    while True:
        cursor, page = r.execute_command(*fcall('entrants', key, cursor, 'COUNT', count))
        out += [(page[i], page[i + 1], page[i + 2].decode()) for i in range(0, len(page), 3)]
        if cursor == b'0':
            return out


def test_draw_order_is_fisher_yates_of_the_draw_seed():
    """INFO publishes SHA-256(secret) and the entrant digest from INIT on and
    reveals the secret and the draw seed at the first DRAW; the winners are
    those of a Python walk of the v2 draw order (Fisher-Yates driven by
    SHA-256(secret || digest)) over draw_stock, with binary user ids of
    every length around SHA-256's padding; ENTRANTS pages in arrival order;
    <key>:wait holds the waiting entrants the walk looked at, scored by
    their draw position."""
    env, c = _env()
    r = _raw(c)
    K = 'd:{o}'
    rng = random.Random(5)
    # Users whose D || len || user || qty hits the padding boundaries, binary bytes too.
    lengths = [1, 2, 15, 16, 17, 22, 23, 24, 25, 31, 32, 33, 79, 80, 81, 86, 87, 88, 95, 96, 200, 256]
    users = [bytes([65 + i]) + bytes(rng.randrange(256) for _ in range(n - 1)) for i, n in enumerate(lengths)]
    users += [b'user:%d' % i for i in range(30)]
    entries = [(u, rng.choice((1, 1, 2, 3)), b'order-%d' % i if i % 3 else None) for i, u in enumerate(users)]
    end = _draw_sale(env, r, K, 20, 'LIMIT', 3, 'STREAM', K + ':ev', users=entries)
    before = _bdict(r.execute_command(*fcall('info', K)))
    env.assertEqual((before['mode'], before['entrants'], before['drawn'], before['seed'], before['draw_stock']),
                    (b'draw', len(users), 0, None, None))
    env.assertEqual((before['beacon'], before['beacon_value'], before['draw_seed']), (None, None, None))
    env.assertEqual((before['left_to_draw'], before['waitlist']), (len(users), 0))
    env.assertEqual(len(before['seed_commitment']), 64)
    digest_ = entrants_digest([(u, q) for u, q, _ in entries])
    env.assertEqual(before['entrants_digest'], digest_.hex().encode())
    env.assertEqual(r.execute_command(*fcall('reserve', K, 'x')), [b'DRAW', None, 20])
    _wait_end(env, c, end)
    calls = 0
    while True:
        drawn, remaining, left = r.execute_command(*fcall('draw', K, 'COUNT', 2))
        env.assertLessEqual(drawn, 2)
        calls += 1
        if left == 0:
            break
        env.assertLess(calls, 100)
    after = _bdict(r.execute_command(*fcall('info', K)))
    seed = bytes.fromhex(after['seed'].decode())
    env.assertEqual(len(seed), 32)
    env.assertEqual(after['seed_commitment'], before['seed_commitment'])
    env.assertEqual(hashlib.sha256(seed).hexdigest().encode(), after['seed_commitment'])
    env.assertEqual(after['entrants_digest'], digest_.hex().encode())
    env.assertEqual(after['draw_seed'], hashlib.sha256(seed + digest_).hexdigest().encode())
    env.assertEqual((after['beacon'], after['beacon_value']), (None, None))
    env.assertEqual(after['draw_stock'], 20)
    # ENTRANTS: arrival order, and the winners of a walk of the draw order.
    listed = _entrants(r, K)
    env.assertEqual([(u, q) for u, q, _ in listed], [(u, q) for u, q, _ in entries])
    order = [u for u, _ in draw_order(seed.hex(), [(u, q) for u, q, _ in entries])]
    qty = {u: q for u, q, _ in entries}
    left, winners, looked = 20, set(), 0
    for u in order:
        if left == 0:
            break
        looked += 1
        if qty[u] <= left:
            winners.add(u)
            left -= qty[u]
    env.assertEqual({u for u, _, res in listed if res == 'drawn'}, winners)
    env.assertEqual({u for u, _, res in listed if res == 'entered'}, set(users) - winners)
    # The waiting entrants the walk looked at, at their draw positions.
    waiting = r.zrange(K + ':wait', 0, -1, withscores=True)
    env.assertEqual(waiting, [(u, float(i)) for i, u in enumerate(order[:looked]) if u not in winners])
    env.assertEqual((after['drawn'], after['left_to_draw'], after['waitlist']),
                    (len(winners), 0, len(users) - len(winners)))
    env.assertEqual(after['remaining'], left)
    # The stream: INIT's commitment, then each winner in draw order, a
    # pending reservation under its REQID with `via draw`.
    events = [e[1] for e in r.xrange(K + ':ev')]
    env.assertEqual(events[0], {b'event': b'draw_committed', b'commitment': after['seed_commitment'], b'beacon': b''})
    events = events[1:]
    env.assertEqual([e[b'user'] for e in events], [u for u in order if u in winners])
    reqid = {u: q for u, _, q in entries}
    for e in events:
        env.assertEqual((e[b'event'], e[b'via']), (b'reserved', b'draw'))
        if reqid[e[b'user']]:
            env.assertEqual(e[b'rid'], reqid[e[b'user']])
    # DRAW again: nothing more; ENTER: DRAWN.
    env.assertEqual(r.execute_command(*fcall('draw', K)), [0, left, 0])
    env.assertEqual(r.execute_command(*fcall('enter', K, 'late')), [b'DRAWN', len(users)])
    # REPLACE: a new round, a new secret; the old round's keys are gone.
    env.assertOk(_init(c, K, 5, 'DRAW', 'END', server_ms(c) + 60000, 'REPLACE'))
    again = _bdict(r.execute_command(*fcall('info', K)))
    env.assertNotEqual(again['seed_commitment'], after['seed_commitment'])
    env.assertEqual(again['entrants_digest'], b'0' * 64)
    env.assertEqual((again['entrants'], r.exists(K + ':entrants', K + ':perm', K + ':wait')), (0, 0))
    env.assertEqual(hashlib.sha256(r.get(K + ':secret')).hexdigest().encode(), again['seed_commitment'])
    # A plain sale replacing it takes the draw's keys with it.
    r.execute_command(*fcall('enter', K, 'someone'))
    env.assertOk(_init(c, K, 5, 'REPLACE'))
    env.assertEqual(r.exists(K + ':secret', K + ':entrants', K + ':perm', K + ':wait'), 0)


def test_the_secret_stays_out_of_the_sale_hash_until_the_draw():
    """INIT writes the 32-byte secret to <key>:secret alone (SHA-256 of it is
    the commitment): no field of the sale hash, and no byte string of its
    DUMP, holds it before the first DRAW. That DRAW copies it into the hash
    (INFO's `seed`) and deletes <key>:secret; a TTL given at INIT applies to
    the secret key too."""
    env, c = _env()
    r = _raw(c)
    K = 'sec:{1}'
    end = _draw_sale(env, r, K, 3, 'TTL', 3600, users=[(b'u%d' % i, 1, None) for i in range(10)], end_in=1500)
    secret = r.get(K + ':secret')
    env.assertEqual(len(secret), 32)
    rep = _bdict(r.execute_command(*fcall('info', K)))
    env.assertEqual(hashlib.sha256(secret).hexdigest().encode(), rep['seed_commitment'])
    env.assertIsNone(rep['seed'])
    env.assertGreater(r.pttl(K + ':secret'), 3000 * 1000)
    for k in r.scan_iter(match=K + '*'):
        if k != (K + ':secret').encode():
            env.assertNotContains(secret, r.dump(k), message=k)
    for f, v in r.hgetall(K).items():
        env.assertNotContains(secret, f)
        env.assertNotContains(secret, v)
    _wait_end(env, c, end)
    env.assertEqual(r.execute_command(*fcall('draw', K))[2], 0)
    rep = _bdict(r.execute_command(*fcall('info', K)))
    env.assertEqual(rep['seed'], secret.hex().encode())
    env.assertEqual(r.exists(K + ':secret'), 0)
    env.assertContains(secret, r.hget(K, 'd'))
    # A sale whose secret key went missing (or was replaced) is refused at its
    # first DRAW, and nothing changes.
    end = _draw_sale(env, r, 'sec:{2}', 3, users=[(b'a', 1, None)], end_in=500)
    r.set('sec:{2}:secret', b'x' * 32)
    _wait_end(env, c, end)
    before = digest(c)
    env.expect(*fcall('draw', 'sec:{2}')).error().contains(
        "secret key <key>:secret is missing or does not match its seed_commitment")
    r.delete('sec:{2}:secret')
    env.expect(*fcall('draw', 'sec:{2}')).error().contains('secret key <key>:secret is missing')
    r.set('sec:{2}:secret', b'x' * 32)
    env.assertEqual(digest(c), before)


def _library_role(name):
    """The words of docs/operations.md's ACL SETUSER line for `name` on the
    Functions library (the lines with +fcall)."""
    doc = os.path.join(os.path.dirname(LIBRARY), '..', 'docs', 'operations.md')
    for line in re.findall(r'^ACL SETUSER .*$', open(doc).read(), re.M):
        words = shlex.split(line)
        if words[2] == name and '+fcall' in words:
            return words
    raise AssertionError('docs/operations.md has no library line for %s' % name)


def test_enter_needs_no_access_to_the_secret():
    """The documented front end (docs/operations.md, the library's `shop`
    line) enters a draw sale, reads INFO and ENTRANTS, and releases a
    winner's reservation (the waitlist's turn), although its key patterns
    do not match <key>:secret: not even with GET added. Its DRAW is
    refused (NOPERM, nothing changes); the driver's DRAW reads the secret."""
    env, c = _env()
    K = 'sale:{d}'
    end = _draw_sale(env, c, K, 2, 'HOLD', 60000, end_in=1500)
    shop_line = _library_role('shop')
    c.execute_command(*shop_line)
    kw = c.connection_pool.connection_kwargs
    shop = redis.Redis(host=kw.get('host', 'localhost'), port=kw['port'], username='shop',
                       password=next(w[1:] for w in shop_line if w.startswith('>')), decode_responses=True)
    for i in range(6):
        env.assertEqual(shop.execute_command(*fcall('enter', K, 'u%d' % i, 'REQID', 'r%d' % i)),
                        ['ENTERED', i + 1])
    env.assertEqual(info(shop, K)['entrants_digest'], info(c, K)['entrants_digest'])
    # The shop's key patterns, with GET and DUMP: still no access to the secret.
    patterns = [w for w in shop_line if w.startswith('~') or w.startswith('%')]
    c.execute_command('ACL', 'SETUSER', 'probe', 'reset', 'on', 'nopass', *patterns, '+get', '+dump', '+type')
    probe = redis.Redis(host=kw.get('host', 'localhost'), port=kw['port'], username='probe', password='x')
    for cmd in (['GET', K + ':secret'], ['DUMP', K + ':secret']):
        try:
            probe.execute_command(*cmd)
            env.assertTrue(False, message='%r was allowed to the shop\'s patterns' % (cmd,))
        except redis.exceptions.NoPermissionError:
            pass
    env.assertEqual(probe.execute_command('TYPE', K), b'hash')   # (the patterns do match the sale)
    # Every other key under sale: matches (any sale name, the stream, the
    # draw's other keys, the sync keys); no key ending in :secret does.
    for k in ('sale:{d}:entrants', 'sale:{d}:perm', 'sale:{d}:wait', 'sale:{d}:events', 'sale:{roles}17', 'sale:1001',
              'sale:{d}:seckill-sync', 'sale:{d}:secrets', 'sale:{d}xsecret', 'sale:{x}:ecret', 'sale:{d}:Secret'):
        env.assertIn(probe.execute_command('TYPE', k), (b'none', b'list', b'hash', b'zset'), message=k)
    for k in ('sale:{d}:secret', 'sale:1001:secret', 'sale:{x}:y:secret', 'sale::secret'):
        try:
            probe.execute_command('TYPE', k)
            env.assertTrue(False, message='the shop\'s patterns match %s' % k)
        except redis.exceptions.NoPermissionError:
            pass
    _wait_end(env, c, end)
    before = digest(c)
    try:
        shop.execute_command(*fcall('draw', K))
        env.assertTrue(False, message="the shop's DRAW was allowed")
    except redis.exceptions.NoPermissionError as e:
        # (DRAW declares <key>:secret: the server refuses it before the
        # library runs; Redis 7.0 says "one of the keys", Redis 8 and
        # Valkey 8 and 9 "a key".)
        env.assertTrue(re.search(r'no permissions to access (one of the keys|a key)', str(e), re.I) is not None,
                       message=str(e))
    env.assertEqual(digest(c), before)
    # The driver draws; the shop's RELEASE gives the unit to the waitlist.
    c.execute_command(*_library_role('sale-driver'))
    driver = redis.Redis(host=kw.get('host', 'localhost'), port=kw['port'], username='sale-driver',
                         password='driver-password', decode_responses=True)
    env.assertEqual(driver.execute_command(*fcall('draw', K)), [2, 0, 0])
    listed = shop.execute_command(*fcall('entrants', K, 0))[1]
    winner = [listed[i] for i in range(0, len(listed), 3) if listed[i + 2] == 'drawn'][0]
    env.assertEqual(shop.execute_command(*fcall('release', K, 'r' + winner[1:])), ['RELEASED', 0])
    r = info(c, K)
    env.assertEqual((r['drawn'], r['waitlist'], r['invariant']), (3, 3, 'ok'))


def test_beacon_errors_change_nothing():
    """BEACON at INIT (only with DRAW, a name of 1 to 256 bytes) and at DRAW
    (1 to 1024 bytes; the first DRAW of a sale that declared one needs it, a
    later one must repeat it or leave it out; a sale that declared none
    refuses it): each error changes nothing, and comes after the existing
    errors (no sale, not a draw sale, registration open). The value the
    first DRAW took is in INFO and in the draw seed."""
    env, c = _env()
    r = _raw(c)
    now = server_ms(c)
    _init(c, 'plain', 5)
    _draw_sale(env, c, 'open', 5, 'BEACON', 'drand round 9', end_in=600000)
    for args, text in [
        (['i', 5, 'BEACON', 'x'], 'BEACON needs DRAW'),
        (['i', 5, 'END', now + 10000, 'BEACON', 'x'], 'BEACON needs DRAW'),
        (['i', 5, 'BEACON', ''], 'BEACON needs DRAW'),
        (['i', 5, 'START', 9, 'END', 8, 'DRAW', 'BEACON', ''], 'START must be before END'),
        (['i', 5, 'DRAW', 'BEACON', ''], 'BEACON name must be 1 to 256 bytes'),
        (['i', 5, 'END', now + 10000, 'DRAW', 'BEACON', ''], 'BEACON name must be 1 to 256 bytes'),
        (['i', 5, 'END', now + 10000, 'DRAW', 'BEACON', 'n' * 257], 'BEACON name must be 1 to 256 bytes'),
        (['i', 5, 'END', now + 10000, 'DRAW', 'BEACON'], 'BEACON needs a value'),
        (['i', 5, 'END', now + 10000, 'DRAW', 'BEACON', 'a', 'BEACON', 'b'], 'option BEACON given twice'),
    ]:
        before = digest(c)
        env.expect(*fcall('init', *args)).error().contains(text)
        env.assertEqual(digest(c), before)
    end = _draw_sale(env, r, 'b:{1}', 3, 'BEACON', b'drand quicknet round 1234567',
                     users=[(b'u%d' % i, 1, None) for i in range(12)], end_in=1500)
    end = max(end, _draw_sale(env, r, 'n:{1}', 3, users=[(b'u%d' % i, 1, None) for i in range(12)], end_in=1500))
    env.assertEqual(info(c, 'b:{1}')['beacon'], 'drand quicknet round 1234567')
    # The existing errors come first.
    for args, text in [
        (['nokey', 'BEACON', ''], 'no such sale'),
        (['plain', 'BEACON', 'v'], 'not a draw sale'),
        (['open', 'BEACON', ''], 'registration is open until END'),
        (['open'], 'registration is open until END'),
        (['b:{1}', 'BEACON'], 'BEACON needs a value'),
        (['b:{1}', 'BEACON', 'v', 'BEACON', 'v'], 'option BEACON given twice'),
    ]:
        before = digest(c)
        env.expect(*fcall('draw', *args)).error().contains(text)
        env.assertEqual(digest(c), before)
    _wait_end(env, c, end)
    value = b'\x00beacon value \xff' + b'v' * 100
    for key, args, text in [
        ('b:{1}', ['BEACON', ''], 'BEACON value must be 1 to 1024 bytes'),
        ('b:{1}', ['BEACON', 'v' * 1025], 'BEACON value must be 1 to 1024 bytes'),
        ('b:{1}', [], 'the sale declared a beacon: the first DRAW needs BEACON value'),
        ('b:{1}', ['COUNT', 1], 'the sale declared a beacon: the first DRAW needs BEACON value'),
        ('n:{1}', ['BEACON', 'v'], 'the sale declared no beacon'),
        ('n:{1}', ['BEACON', ''], 'BEACON value must be 1 to 1024 bytes'),
    ]:
        before = digest(c)
        env.expect(*fcall('draw', key, *args)).error().contains(text)
        env.assertEqual(digest(c), before)
    # The first DRAW takes the value (options in any order) ...
    env.assertEqual(r.execute_command(*fcall('draw', 'b:{1}', 'BEACON', value, 'COUNT', 1)), [1, 2, 11])
    # ... a later DRAW may repeat it or leave it out, not change it.
    before = digest(c)
    env.expect(*fcall('draw', 'b:{1}', 'BEACON', 'other')).error().contains(
        'BEACON differs from the value the draw began with')
    env.assertEqual(digest(c), before)
    env.assertEqual(r.execute_command(*fcall('draw', 'b:{1}', 'COUNT', 1, 'BEACON', value)), [1, 1, 10])
    env.assertEqual(r.execute_command(*fcall('draw', 'b:{1}')), [1, 0, 0])
    before = digest(c)
    env.expect(*fcall('draw', 'b:{1}', 'BEACON', 'other')).error().contains('BEACON differs')
    env.expect(*fcall('draw', 'n:{1}', 'BEACON', 'v')).error().contains('the sale declared no beacon')
    env.assertEqual(digest(c), before)
    rep = _bdict(r.execute_command(*fcall('info', 'b:{1}')))
    env.assertEqual((rep['beacon'], rep['beacon_value']), (b'drand quicknet round 1234567', value))
    seed = bytes.fromhex(rep['seed'].decode())
    ents = [(b'u%d' % i, 1) for i in range(12)]
    env.assertEqual(rep['draw_seed'], hashlib.sha256(seed + entrants_digest(ents) + value).hexdigest().encode())
    won = [u for u, _, res in _entrants(r, 'b:{1}') if res == 'drawn']
    env.assertEqual(sorted(won), sorted(u for u, _ in draw_order(seed.hex(), ents, value)[:3]))
    # FORMAT JSON: the beacon's fields, null where none.
    doc = json.loads(c.execute_command(*fcall('info', 'n:{1}', 'FORMAT', 'JSON')))
    env.assertEqual((doc['beacon'], doc['beacon_value'], doc['seed']), (None, None, None))


def test_draw_commands_refuse():
    """ENTER's statuses and errors in the documented order, DRAW and
    ENTRANTS on a missing key, a sale that is not a draw sale, before END."""
    env, c = _env()
    now = server_ms(c)
    env.assertOk(_init(c, 'n', 5))
    env.assertOk(_init(c, 'later', 5, 'DRAW', 'START', now + 60000, 'END', now + 120000))
    env.expect(*fcall('init', 'x', 5, 'DRAW')).error().contains('DRAW needs END')
    for fn, args in (('enter', ['u']), ('draw', []), ('entrants', [0])):
        env.expect('FCALL', 'seckill_' + fn, 1, 'n', *args).error().contains('not a draw sale (INIT ... DRAW)')
    env.assertEqual(c.execute_command(*fcall('enter', 'nokey', 'u')), ['NO_SALE', 0])
    env.expect(*fcall('draw', 'nokey')).error().contains('no such sale')
    env.assertEqual(c.execute_command(*fcall('entrants', 'nokey', 0)), ['0', []])
    env.assertEqual(c.execute_command(*fcall('enter', 'later', 'u')), ['NOT_STARTED', 0])
    env.expect(*fcall('draw', 'later')).error().contains('registration is open until END')
    env.expect(*fcall('draw', 'later', 'COUNT', 0)).error().contains('COUNT must be from 1 to 1000')
    env.expect(*fcall('draw', 'later', 'COUNT', 1001)).error().contains('COUNT must be from 1 to 1000')
    env.expect(*fcall('entrants', 'later', 0, 'COUNT', 1001)).error().contains(
        'COUNT must be from 1 to 1000')
    env.expect(*fcall('entrants', 'later', 'x')).error().contains('cursor is not an integer')
    end = _draw_sale(env, c, 'd', 5, 'LIMIT', 2, users=[('a', 2, 'ra')])
    env.expect(*fcall('enter', 'd', 'b', 'QTY', 3)).error().contains("QTY is above the sale's LIMIT")
    env.assertEqual(c.execute_command(*fcall('enter', 'd', 'a', 'QTY', 1, 'REQID', 'other')),
                    ['ALREADY_ENTERED', 1])
    env.expect(*fcall('enter', 'd', 'b', 'REQID', 'ra')).error().contains(
        "REQID is already another entrant's")
    env.assertEqual(c.execute_command(*fcall('entrants', 'd', 0)), ['0', ['a', 2, 'entered']])
    # RECONCILE takes no draw stock for an order the draw did not make: a
    # conflict that creates nothing (docs/draw-sales.md).
    rep = c.execute_command('SECKILL.RECONCILE', 'd', 'ORDERS', 1, 'x1', 'x', 1, 'APPLY')
    env.assertEqual((rep[rep.index('orders_unknown') + 1], rep[rep.index('orders_conflict') + 1]), (0, 1))
    env.assertEqual(rep[rep.index('mode'):rep.index('entrants') + 2], ['mode', 'draw', 'entrants', 1])
    env.assertLess(rep.index('seed'), rep.index('orders_ok'))
    env.assertEqual(c.execute_command('SECKILL.GET', 'd', 'x1'), None)
    raw = RawConn(c)
    env.assertContains(b'$4\r\nmode\r\n+draw\r\n', raw.call('SECKILL.INFO', 'd'))   # a status word
    raw.close()
    _wait_end(env, c, end)
    env.assertEqual(c.execute_command(*fcall('enter', 'd', 'b')), ['ENDED', 1])
    env.assertEqual(c.execute_command(*fcall('draw', 'd')), [1, 3, 0])
    env.assertEqual(c.execute_command(*fcall('enter', 'd', 'b')), ['DRAWN', 1])
    env.assertEqual(get(c, 'd', 'ra')['state'], 'pending')
    env.assertEqual(c.execute_command(*fcall('entrants', 'd', 0)), ['0', ['a', 2, 'drawn']])


def test_waitlist_follows_the_draw_order():
    """After the draw, each unit a winner releases goes to the first waiting
    entrant in draw order whose QTY fits (a Python model of the walk, after
    every RELEASE), with a `reserved` entry `via waitlist`; once the
    waitlist is empty the stock stays in remaining."""
    env, c = _env()
    r = _raw(c)
    K = 'w:{1}'
    rng = random.Random(11)
    entries = [(b'u%d' % i, rng.choice((1, 2, 3)), None) for i in range(40)]
    end = _draw_sale(env, r, K, 12, 'LIMIT', 3, 'STREAM', K + ':ev', users=entries)
    _wait_end(env, c, end)
    env.assertEqual(r.execute_command(*fcall('draw', K))[2], 0)
    seed = bytes.fromhex(_bdict(r.execute_command(*fcall('info', K)))['seed'].decode())
    qty = {u: q for u, q, _ in entries}
    order = [u for u, _ in draw_order(seed.hex(), [(u, q) for u, q, _ in entries])]
    result, left = {u: 'entered' for u in qty}, 12
    for u in order:
        if qty[u] <= left:
            result[u], left = 'drawn', left - qty[u]
    rid = {e[1][b'user']: e[1][b'rid'] for e in r.xrange(K + ':ev') if e[1][b'event'] == b'reserved'}
    live = [u for u in order if result[u] == 'drawn']
    stock = left
    while live:
        u = live.pop(0)
        env.assertEqual(r.execute_command(*fcall('release', K, rid[u]))[0], b'RELEASED')
        stock += qty[u]
        for w in order:
            if result[w] == 'entered' and qty[w] <= stock:
                result[w], stock = 'promoted', stock - qty[w]
                live.append(w)
        rid.update({e[1][b'user']: e[1][b'rid'] for e in r.xrange(K + ':ev') if e[1].get(b'via') == b'waitlist'})
        env.assertEqual({u: res for u, _, res in _entrants(r, K, 7)}, result)
        rep = _bdict(r.execute_command(*fcall('info', K)))
        env.assertEqual(rep['remaining'], stock)
        env.assertEqual(rep['waitlist'], list(result.values()).count('entered'))
        env.assertEqual(rep['invariant'], b'ok')
    env.assertEqual(list(result.values()).count('entered'), 0)   # every entrant had its turn
    env.assertEqual(r.zcard(K + ':wait'), 0)
    vias = [e[1].get(b'via') for e in r.xrange(K + ':ev') if e[1][b'event'] == b'reserved']
    env.assertEqual(vias.count(b'waitlist'), list(result.values()).count('promoted'))


def test_waitlist_promotions_are_bounded():
    """Units that come back go to the waitlist at most 128 promotions per
    call, the rest on the next call (and seckill_expire releases at most
    128 holds a call)."""
    env, c = _env()
    K = 'b:{1}'
    end = _draw_sale(env, c, K, 300, 'HOLD', 1000, users=[('u%d' % i, 1, None) for i in range(600)])
    _wait_end(env, c, end)
    # One library DRAW call makes at most 100 winners, whatever COUNT asks.
    env.assertEqual(c.execute_command(*fcall('draw', K, 'COUNT', 1000)), [100, 200, 500])
    env.assertEqual(c.execute_command(*fcall('draw', K, 'COUNT', 1000)), [100, 100, 400])
    time.sleep(1.1)
    # The draw is not complete: the units wait for it.
    env.assertEqual(_expire_reply(c, K, 256), [128, 1])
    env.assertEqual(_expire_reply(c, K, 256), [72, 0])
    r = info(c, K)
    env.assertEqual((r['drawn'], r['remaining'], r['expired']), (200, 300, 200))
    # The last draw call, then 128 promotions of the 200 units left.
    env.assertEqual(c.execute_command(*fcall('draw', K, 'COUNT', 1000)), [100, 72, 0])
    r = info(c, K)
    env.assertEqual((r['drawn'], r['remaining'], r['waitlist']), (428, 72, 172))
    env.assertEqual(_expire_reply(c, K, 256), [0, 0])
    r = info(c, K)
    env.assertEqual((r['drawn'], r['remaining'], r['waitlist'], r['pending'], r['invariant']), (500, 0, 100, 300, 'ok'))
    results = [res for _, _, res in _entrants(_raw(c), K, 1000)]
    env.assertEqual((results.count('drawn'), results.count('promoted')), (300, 200))


def test_draw_on_a_replica():
    """ENTRANTS and INFO run with FCALL_RO on a replica, and the replica
    ends digest-equal after a draw and its promotions."""
    env, c = _env(useSlaves=True)
    K = 'r:{1}'
    end = _draw_sale(env, c, K, 3, users=[('u%d' % i, 1, 'q%d' % i) for i in range(8)])
    _wait_end(env, c, end)
    c.execute_command(*fcall('draw', K))
    winner = [u for u, _, res in _entrants(_raw(c), K) if res == 'drawn'][0]
    c.execute_command('SECKILL.RELEASE', K, 'q' + winner.decode()[1:])
    env.assertEqual(c.execute_command('WAIT', 1, 10000), 1)
    replica = env.getSlaveConnection()
    env.assertEqual(_entrants(_raw(replica), K), _entrants(_raw(c), K))
    env.assertEqual(info(replica, K), info(c, K))
    env.assertEqual(digest(replica), digest(c))


def test_waitlist_scan_goes_on_where_it_stopped():
    """A unit nobody near the head of the waitlist can take: each call
    looks at a bounded part of the waitlist (512 waiting entrants, of them
    at most 128 draw positions not reached yet), the next call goes on
    from there while the stock has not grown, and the unit goes to the
    first entrant in draw order whose QTY fits, as a Python walk of the
    v2 order says."""
    env, c = _env()
    r = _raw(c)
    K = 'g:{1}'
    n = 1500
    entries = [(b'u%d' % i, 1 if i % 300 == 299 else 3, None) for i in range(n)]
    end = _draw_sale(env, r, K, 7, 'LIMIT', 3, 'STREAM', K + ':ev', users=entries, end_in=2000)
    _wait_end(env, c, end)
    calls = 0
    while r.execute_command(*fcall('draw', K))[2]:
        calls += 1
    seed = _bdict(r.execute_command(*fcall('info', K)))['seed'].decode()
    order = [(u, q) for u, q in draw_order(seed, [(u, q) for u, q, _ in entries])]
    left, won, looked = 7, [], 0
    for u, q in order:
        if left == 0:
            break
        looked += 1
        if q <= left:
            won.append(u)
            left -= q
    listed = {u: res for u, _, res in _entrants(r, K, 1000)}
    env.assertEqual(sorted(u for u, res in listed.items() if res == 'drawn'), sorted(won))
    env.assertGreaterEqual(calls, (looked - 1) // 200)   # at most 200 looked at a DRAW call
    env.assertEqual(r.zcard(K + ':wait'), looked - len(won))
    # The 1-unit winner gives its unit back: the next 1-unit entrant in draw order takes it.
    ones = [u for u, q in order if q == 1]
    winner = next(u for u in won if dict(order)[u] == 1)
    want = next((u for u in ones if u not in won), None)
    rid = {e[1][b'user']: e[1][b'rid'] for e in r.xrange(K + ':ev') if e[1][b'event'] == b'reserved'}
    env.assertEqual(r.execute_command(*fcall('release', K, rid[winner]))[0], b'RELEASED')
    pos = [u for u, _ in order].index(want) if want else n
    waiting_before = sum(1 for u, _ in order[:pos] if u not in won)
    steps = 1
    while {u: res for u, _, res in _entrants(r, K, 1000)}.get(want) != 'promoted':
        env.assertEqual(_expire(c, K), 0)
        steps += 1
        env.assertLess(steps, 100)
    # Each call looked at 512 waiting entrants at most, 128 of them unreached.
    stored, unreached = looked - len(won), max(0, waiting_before - (looked - len(won)))
    env.assertGreaterEqual(steps, max(-(-min(stored, waiting_before) // 512), -(-unreached // 128), 1))
    listed = {u: res for u, _, res in _entrants(r, K, 1000)}
    env.assertEqual([u for u, res in listed.items() if res == 'promoted'], [want])
    rep = _bdict(r.execute_command(*fcall('info', K)))
    env.assertEqual((rep['remaining'], rep['invariant'], rep['drawn']), (0, b'ok', len(won) + 1))
    # With nothing to give, further calls change nothing.
    before = digest(c)
    env.assertEqual(_expire(c, K), 0)
    env.assertEqual(digest(c), before)
