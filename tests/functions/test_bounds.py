"""Every call of the library is bounded (issue 24): its work does not grow
with the sale. Each test makes a small sale and one 10 to 100 times larger
in the same shape, makes the same call on both, and compares the commands
the call ran inside the server (INFO commandstats after CONFIG RESETSTAT:
HGET, HMGET, XADD, ...): they must be the same. No timed assertion (the
machines are noisy): the slow log's duration of each call is printed as a
figure (logs/functions-*.txt with -s, and RLTest's output).

The cases are the audit's: RECONCILE ... APPLY retaking the oldest
reservation of a buyer with many live ones; RESERVE without REQID after
clients took the generated id and its suffixes as REQIDs; seckill_expire
and the first call after many holds ran out, with and without a stream;
the hold cursor behind many settled reservations."""

import hashlib
import os
import struct
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'integration'))

from seckill_helpers import check_invariant, get, info, reserve, server_ms, wait_for  # noqa: E402
from test_library import _env, _expire_reply, _init, _raw, fcall  # noqa: E402

# What the counts leave out: the test's own commands.
OWN = ('fcall', 'fcall_ro', 'config', 'slowlog', 'info')


def _call(c, *call):
    """(reply, {inner command: calls}, slow log duration in us) of one call."""
    c.execute_command('CONFIG', 'SET', 'slowlog-log-slower-than', 0)
    c.execute_command('CONFIG', 'RESETSTAT')
    c.execute_command('SLOWLOG', 'RESET')
    reply = c.execute_command(*call)
    stats = c.info('commandstats')
    inner = {}
    for name, row in stats.items():
        cmd = name[len('cmdstat_'):]
        if cmd.split('|')[0] not in OWN:
            inner[cmd] = row['calls']
    slow = [e['duration'] for e in c.slowlog_get(20)
            if (e['command'] if isinstance(e['command'], bytes) else e['command'].encode()).upper().startswith(b'FCALL')]
    c.execute_command('CONFIG', 'SET', 'slowlog-log-slower-than', 10000)
    return reply, inner, max(slow or [0])


def _pipe(c, calls, chunk=2000):
    """Sends `calls` (argument tuples) pipelined; returns the replies."""
    out = []
    for s in range(0, len(calls), chunk):
        p = c.pipeline(transaction=False)
        for args in calls[s:s + chunk]:
            p.execute_command(*args)
        out += p.execute()
    return out


def _same_work(env, what, small, big, ceiling):
    """The big sale's call ran the small one's commands, and few of them."""
    env.assertEqual(big[1], small[1], message='%s: work grows with the sale' % what)
    env.assertLessEqual(sum(small[1].values()), ceiling, message='%s: %s' % (what, small[1]))
    env.debugPrint('%s: %s inside; slow log %d us (small sale), %d us (large sale)'
                   % (what, small[1], small[2], big[2]), force=True)


def _layout(c, key):
    return struct.unpack('<d', _raw(c).hget(key, 'm')[:8])[0]


def test_retake_is_bounded():
    """RECONCILE ... APPLY retaking the oldest reservation of a buyer with
    100 or 50,000 live ones (the audit's) runs the same commands (1.4.0 kept it out of
    the buyer's chain: before, one HGET per record of the chain). LIMIT
    still names the buyer's newest live reservation while the newer ones
    leave, and the buyer stays one buyer."""
    env, c = _env()
    runs = {}
    for n in (100, 50000):
        key = 'rt%d:{b}' % n
        env.assertOk(_init(c, key, 2 * n, 'LIMIT', 2 * n))
        env.assertEqual(reserve(c, key, 'whale', 'REQID', 'old')[0], 'RESERVED')
        env.assertEqual(c.execute_command('SECKILL.RELEASE', key, 'old'), ['RELEASED', 2 * n])
        _pipe(c, [('SECKILL.RESERVE', key, 'whale', 'REQID', 'w%d' % i) for i in range(n)])
        env.assertEqual(_layout(c, key), 1)
        runs[n] = _call(c, *fcall('reconcile', key, 'ORDERS', 1, 'old', 'whale', 1, 'APPLY'))
        rep = dict(zip(runs[n][0][0::2], runs[n][0][1::2]))
        env.assertEqual((rep['orders_released_ids'], rep['confirmed'], rep['pending'], rep['buyers']),
                        (['old'], 1, n, 1))
        # Recorded in the layout: an older library refuses the sale.
        env.assertEqual(_layout(c, key), 9)
        check_invariant(env, c, key)
    _same_work(env, 'RECONCILE APPLY retaking the oldest of 100 / 50,000 live', runs[100], runs[50000], 8)
    # The small sale: its newest live reservation goes, then the others; the
    # retaken one is the newest left, then the only one.
    key = 'rt100:{b}'
    env.assertEqual(reserve(c, key, 'whale', 'QTY', 200)[:2], ['LIMIT', 'w99'])
    env.assertEqual(c.execute_command('SECKILL.RELEASE', key, 'w99')[0], 'RELEASED')
    env.assertEqual(reserve(c, key, 'whale', 'QTY', 200)[:2], ['LIMIT', 'w98'])
    _pipe(c, [('SECKILL.RELEASE', key, 'w%d' % i) for i in range(99)])
    r = check_invariant(env, c, key)
    env.assertEqual((r['pending'], r['confirmed'], r['buyers']), (0, 1, 1))
    env.assertEqual(reserve(c, key, 'whale', 'QTY', 200)[:2], ['LIMIT', 'old'])
    # A new reservation starts the chain again; it is the newest.
    env.assertEqual(reserve(c, key, 'whale', 'REQID', 'new')[:2], ['RESERVED', 'new'])
    env.assertEqual(reserve(c, key, 'whale', 'QTY', 200)[:2], ['LIMIT', 'new'])
    env.assertEqual(c.execute_command('SECKILL.RELEASE', key, 'new')[0], 'RELEASED')
    env.assertEqual(reserve(c, key, 'whale', 'QTY', 200), ['LIMIT', 'old', 199])
    env.assertEqual(reserve(c, key, 'whale', 'QTY', 199)[0], 'RESERVED')
    r = check_invariant(env, c, key)
    env.assertEqual((r['pending'], r['confirmed'], r['buyers']), (199, 1, 1))


def _generated(c, key, tag, seq):
    """The generated id of record `seq` (the library's mac under the sale's key `k`)."""
    k = c.execute_command('HGET', key, 'k')
    return '%s-%d-%s' % (tag, seq, hashlib.sha1(('%s-%s-%d' % (k, tag, seq)).encode()).hexdigest()[:16])


def test_generated_id_is_bounded():
    """RESERVE without REQID when clients took the generated id and its
    first 99 or 2,999 (the audit's) suffixed variants as REQIDs: the same commands (the 64
    smallest suffixes in one HMGET, then random ones above them in one
    more). With fewer taken than that it answers as the module: the
    smallest free suffix."""
    env, c = _env()
    runs = {}
    for taken in (10, 100, 3000):
        key = 'g%d:{g}' % taken
        env.assertOk(_init(c, key, 10 * taken))
        st, first, _ = reserve(c, key, 'x')
        tag = first[:8]
        env.assertEqual(first, _generated(c, key, tag, 0))
        gid = _generated(c, key, tag, 1 + taken)
        taken_ids = [gid] + ['%s-%d' % (gid, j) for j in range(1, taken)]
        replies = _pipe(c, [('SECKILL.RESERVE', key, 't%d' % j, 'REQID', rid) for j, rid in enumerate(taken_ids)])
        env.assertEqual({r[0] for r in replies}, {'RESERVED'})
        runs[taken] = _call(c, *fcall('reserve', key, 'y'))
        st, rid, _ = runs[taken][0]
        env.assertEqual(st, 'RESERVED')
        env.assertTrue(rid.startswith(gid + '-') and rid[len(gid) + 1:].isdigit(), message=rid)
        if taken <= 64:
            env.assertEqual(rid, '%s-%d' % (gid, taken))
        else:
            env.assertGreater(int(rid[len(gid) + 1:]), 64)
        env.assertNotIn(rid, taken_ids)
        env.assertEqual(get(c, key, rid)['user'], 'y')
        env.assertEqual(reserve(c, key, 'z')[:2], ['RESERVED', _generated(c, key, tag, 2 + taken)])
        check_invariant(env, c, key)
    _same_work(env, 'RESERVE, the generated id and 99 / 2,999 suffixes taken', runs[100], runs[3000], 8)


def _due_sales(env, c, sizes):
    """Sales of `sizes` holds each, with and without a stream ({(n, stream):
    key}), all run out on return."""
    keys = {}
    for n in sizes:
        for stream in (True, False):
            key = 'h%d%s:{h}' % (n, 's' if stream else '')
            env.assertOk(_init(c, key, 2 * n, 'HOLD', 5000, *(('STREAM', key + ':ev') if stream else ())))
            keys[n, stream] = key
    for (n, _), key in keys.items():
        _pipe(c, [('SECKILL.RESERVE', key, 'u%d' % i) for i in range(n)])
    deadline = max(get(c, key, reserve(c, key, 'last')[1])['deadline_ms'] for key in keys.values())
    env.assertEqual(sum(info(c, key)['expired'] for key in keys.values()), 0,
                    message='holds ran out while they were made')
    env.assertTrue(wait_for(lambda: server_ms(c) > deadline, timeout=10))
    return keys


def test_expiry_is_bounded():
    """seckill_expire 256, and the first RESERVE after the holds ran out,
    on sales of 300 and 20,000 due holds: the same commands, at most 128
    holds released a call (64 with a stream), each one HGET of its buyer
    (and one XADD with a stream)."""
    env, c = _env()
    keys = _due_sales(env, c, (300, 20000))
    for stream in (True, False):
        most = 64 if stream else 128
        label = ' with a stream' if stream else ''
        runs = {n: _call(c, *fcall('expire', keys[n, stream], 256)) for n in (300, 20000)}
        for n in (300, 20000):
            env.assertEqual(runs[n][0], [most, 1])
        _same_work(env, 'seckill_expire 256 on 300 / 20,000 due holds' + label, runs[300], runs[20000],
                   16 + 2 * most)
        env.assertEqual(runs[300][1].get('xadd', 0), most if stream else 0)
        runs = {n: _call(c, *fcall('reserve', keys[n, stream], 'new')) for n in (300, 20000)}
        for n in (300, 20000):
            env.assertEqual(runs[n][0][0], 'RESERVED')
            env.assertEqual(info(c, keys[n, stream])['expired'], 2 * most)
        _same_work(env, 'the first RESERVE after 300 / 20,000 holds ran out' + label, runs[300], runs[20000],
                   16 + 2 * most)
        # The worker's loop: more says when to stop.
        released, more, calls = 2 * most, 1, 0
        while more:
            n, more = _expire_reply(c, keys[300, stream], 256)
            released, calls = released + n, calls + 1
            env.assertLess(calls, 10)
        env.assertEqual(released, 301)
        check_invariant(env, c, keys[300, stream])


def test_cursor_walk_is_bounded():
    """A hold behind 300 or 3,000 settled reservations: the call that moves
    the hold cursor reads the same records (256 at most; the next call goes
    on: test_library's test_cursor_moves_on_past_settled_records)."""
    env, c = _env()
    runs, holds = {}, {}
    for n in (300, 3000):
        key = 'cw%d:{c}' % n
        env.assertOk(_init(c, key, 2 * n, 'HOLD', 600000))
        _, first, _ = reserve(c, key, 'a')
        calls = []
        for i in range(n):
            calls += [('SECKILL.RESERVE', key, 'u%d' % i, 'REQID', 'c%d' % i), ('SECKILL.CONFIRM', key, 'c%d' % i)]
        _pipe(c, calls)
        holds[n] = reserve(c, key, 'b')[1]
        runs[n] = _call(c, *fcall('confirm', key, first))
        env.assertEqual(runs[n][0][0], 'CONFIRMED')
    _same_work(env, 'CONFIRM moving the hold cursor past 300 / 3,000 settled', runs[300], runs[3000], 12)
    for n in (300, 3000):
        key = 'cw%d:{c}' % n
        c.execute_command('SECKILL.RELEASE', key, holds[n])
        r = check_invariant(env, c, key)
        env.assertEqual((r['pending'], r['confirmed']), (0, n + 1))
