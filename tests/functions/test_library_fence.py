"""The fence on the Functions library's side (INIT ... FENCE, seckill_unfence;
docs/managed-redis.md, "The fence"): where the library keeps the recorded
replication id, that only FENCE sales pay for the INFO call, what a caller's
ACL needs, and the waitlist while fenced. The contract itself (replies,
order of checks, failover, restarts) is tests/integration/test_fence.py's,
on both backends.

A single server is fenced here without a replica: REPLICAOF to a closed
port then REPLICAOF NO ONE (seckill_helpers.new_replication_id) gives it a
new replication id, as a promotion does (the data stays: nothing ever
answers on that port)."""

import os
import struct
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'integration'))

import redis  # noqa: E402
from RLTest.env import Defaults  # noqa: E402

from seckill_backend import load_library  # noqa: E402
from seckill_helpers import OwnServer, digest, info, new_replication_id, reserve, wait_for  # noqa: E402
from test_library import _aof_commands, _draw_sale, _entrants, _env, _init, _raw, _wait_end, fcall  # noqa: E402

META_BYTES = 23 * 8


def _replid(c):
    return c.info('replication')['master_replid']


def _new_replid(env, c):
    """Gives the server a new replication id, as a promotion does."""
    old = _replid(c)
    new_replication_id(c)
    env.assertNotEqual(_replid(c), old)
    return _replid(c)


def _meta(c, key):
    """(layout, the strings after the numbers) of the sale's `m`."""
    m = _raw(c).hget(key, 'm')
    return struct.unpack('<d', m[:8])[0], m[META_BYTES:]


def _info_calls(c):
    """How many INFO commands the server ran since CONFIG RESETSTAT (the
    ones functions ran included; this INFO is counted after it answers)."""
    return int(c.info('commandstats').get('cmdstat_info', {}).get('calls', 0))


def test_fence_sale_records_the_id_in_its_settings():
    """A FENCE sale's `m` carries the replication id as a fifth string and
    has its own layout (3, a draw sale 7), which library 1.1.0 refuses
    rather than sell through a failover; a plain sale's `m` is what it was.
    UNFENCE rewrites only `m`, only the id in it."""
    env, c = _env()
    replid = _replid(c)
    env.assertOk(_init(c, 'f:{1}', 10, 'FENCE', 'LIMIT', 2, 'STREAM', 'f:{1}:ev'))
    env.assertOk(_init(c, 'p:{1}', 10, 'LIMIT', 2))
    env.assertOk(_init(c, 'd:{1}', 10, 'END', 10 ** 13, 'DRAW', 'FENCE'))
    env.assertEqual(_meta(c, 'f:{1}'), (3, b'8:f:{1}:ev5:f:{1}0:0:40:' + replid.encode()))
    env.assertEqual(_meta(c, 'p:{1}'), (1, b'0:0:0:0:'))
    env.assertEqual(_meta(c, 'd:{1}'), (7, b'0:0:0:0:40:' + replid.encode()))
    reserve(c, 'f:{1}', 'u1')                    # the three-call path
    reserve(c, 'f:{1}', 'u1', 'REQID', 'q1')     # the general path (a buyer with units)
    entries = [e[1] for e in c.xrange('f:{1}:ev')]
    env.assertEqual([(e['event'], e['user']) for e in entries], [('reserved', 'u1')] * 2)
    env.assertEqual(entries[1]['rid'], 'q1')
    env.assertEqual(_meta(c, 'f:{1}')[1], b'8:f:{1}:ev5:f:{1}0:0:40:' + replid.encode())

    new = _new_replid(env, c)
    fields = _raw(c).hgetall('f:{1}')
    env.assertEqual(c.execute_command('SECKILL.UNFENCE', 'f:{1}'), 'UNFENCED')
    after = _raw(c).hgetall('f:{1}')
    env.assertEqual(after[b'm'][:META_BYTES], fields[b'm'][:META_BYTES])
    env.assertEqual(after[b'm'][META_BYTES:], b'8:f:{1}:ev5:f:{1}0:0:40:' + new.encode())
    del after[b'm'], fields[b'm']
    env.assertEqual(after, fields)
    env.assertEqual(info(c, 'f:{1}')['fence'], 'clear')


def test_unfence_is_one_hset_with_the_id():
    """What UNFENCE sends to the AOF (and replicas): one HSET of `m`, the
    new id in it; a replica or an AOF replay never reads its own id."""
    env, c = _env(useAof=True)
    c.execute_command('CONFIG', 'SET', 'auto-aof-rewrite-percentage', 0)
    # (everysec may postpone a write while a background fsync runs.)
    c.execute_command('CONFIG', 'SET', 'appendfsync', 'always')
    env.assertOk(_init(c, 'f:{1}', 10, 'FENCE'))
    new = _new_replid(env, c)
    before = len(_aof_commands(c))
    env.assertEqual(c.execute_command('SECKILL.UNFENCE', 'f:{1}'), 'UNFENCED')
    added = [cmd for cmd in _aof_commands(c)[before:] if cmd[0].upper() not in (b'MULTI', b'EXEC', b'SELECT')]
    env.assertEqual(len(added), 1, message=added)
    env.assertEqual(added[0][:3], [b'HSET', b'f:{1}', b'm'])
    env.assertTrue(added[0][3].endswith(b'40:' + new.encode()))
    before = len(_aof_commands(c))
    env.assertEqual(c.execute_command('SECKILL.UNFENCE', 'f:{1}'), 'NOT_FENCED')
    env.assertEqual(len(_aof_commands(c)[before:]), 0)


def test_only_fence_sales_call_info():
    """A plain sale never runs INFO (RESERVE on both paths, the settling
    commands, the report); a FENCE sale's RESERVE runs it once."""
    env, c = _env()
    env.assertOk(_init(c, 'p:{1}', 1000, 'LIMIT', 3, 'HOLD', 60000))
    env.assertOk(_init(c, 'f:{1}', 1000, 'LIMIT', 3, 'HOLD', 60000, 'FENCE'))
    c.execute_command('CONFIG', 'RESETSTAT')
    for i in range(50):
        reserve(c, 'p:{1}', 'u%d' % i)
    _, rid, _ = reserve(c, 'p:{1}', 'u0', 'QTY', 2, 'REQID', 'q0')
    c.execute_command('SECKILL.CONFIRM', 'p:{1}', rid)
    c.execute_command('SECKILL.RELEASE', 'p:{1}', 'nothing')
    c.execute_command('SECKILL.INFO', 'p:{1}')
    c.execute_command('SECKILL.RECONCILE', 'p:{1}', 'EXPIRE')
    env.assertEqual(c.execute_command('SECKILL.UNFENCE', 'p:{1}'), 'NOT_FENCED')
    env.assertEqual(_info_calls(c), 0)
    c.execute_command('CONFIG', 'RESETSTAT')
    for i in range(50):
        env.assertEqual(reserve(c, 'f:{1}', 'u%d' % i)[0], 'RESERVED')
    env.assertEqual(_info_calls(c), 50)


def test_fence_needs_info_in_the_callers_acl():
    """A caller whose ACL refuses INFO gets a NOPERM error on a FENCE sale
    (a refusal inside a function cannot be caught, so the library asks
    first) and changes nothing; its plain sales sell as before."""
    env, c = _env()
    env.assertOk(_init(c, 'f:{1}', 10, 'FENCE'))
    env.assertOk(_init(c, 'p:{1}', 10))
    c.execute_command('ACL', 'SETUSER', 'noinfo', 'on', '>pw', '~*', '&*', '+@all', '-info')
    port = c.connection_pool.connection_kwargs['port']
    u = redis.Redis(port=port, username='noinfo', password='pw', decode_responses=True)
    before = digest(c)
    for args in (['SECKILL.RESERVE', 'f:{1}', 'u1'], ['SECKILL.INIT', 'g:{1}', 5, 'FENCE'],
                 ['SECKILL.INFO', 'f:{1}'], ['SECKILL.UNFENCE', 'f:{1}']):
        try:
            u.execute_command(*args)
            env.assertTrue(False, message='%r was accepted' % (args,))
        except redis.exceptions.NoPermissionError as e:   # NOPERM
            env.assertContains('a FENCE sale needs INFO', str(e))
    env.assertEqual(digest(c), before)
    env.assertEqual(u.execute_command('SECKILL.RESERVE', 'p:{1}', 'u1')[0], 'RESERVED')
    env.assertEqual(u.execute_command('SECKILL.UNFENCE', 'p:{1}'), 'NOT_FENCED')


def test_fence_needs_info_on_the_server():
    """Where INFO is renamed away, INIT ... FENCE says so and creates
    nothing; sales without FENCE never miss it. (A server of its own:
    RLTest itself needs INFO.)"""
    env, _ = _env()
    srv = OwnServer(Defaults.binary, '--rename-command', 'INFO', '', prefix='seckill-noinfo-')
    try:
        env.assertTrue(wait_for(srv.ping, timeout=10), message=srv.read_log())
        c = srv.conn
        load_library(c)
        try:
            c.execute_command(*fcall('init', 'f:{1}', 10, 'FENCE'))
            env.assertTrue(False, message='INIT ... FENCE was accepted')
        except redis.ResponseError as e:
            env.assertContains('a FENCE sale needs INFO, and this server has no INFO command', str(e))
        env.assertEqual(c.exists('f:{1}'), 0)
        env.assertEqual(c.execute_command(*fcall('init', 'p:{1}', 10)), 'OK')
        env.assertEqual(c.execute_command(*fcall('reserve', 'p:{1}', 'u1'))[0], 'RESERVED')
        env.assertEqual(c.execute_command(*fcall('unfence', 'p:{1}')), 'NOT_FENCED')
    finally:
        srv.stop()


def test_waitlist_waits_while_fenced():
    """Units a winner releases while the sale is fenced stay in remaining,
    whatever call comes (here seckill_expire, as the worker runs it);
    UNFENCE hands them to the waitlist, as the module's does."""
    env, c = _env()
    K = 'w:{1}'
    end = _draw_sale(env, c, K, 2, 'FENCE', users=[('u%d' % i, 1, 'q%d' % i) for i in range(5)])
    _wait_end(env, c, end)
    env.assertEqual(c.execute_command('SECKILL.DRAW', K)[:2], [2, 0])
    winner = [u for u, _, res in _entrants(_raw(c), K) if res == 'drawn'][0].decode()
    _new_replid(env, c)
    env.assertEqual(c.execute_command('SECKILL.RELEASE', K, 'q' + winner[1:]), ['RELEASED', 1])
    r = info(c, K)
    env.assertEqual((r['remaining'], r['waitlist'], r['fence']), (1, 3, 'fenced'))
    env.assertEqual(c.execute_command(*fcall('expire', K)), [0, 0])
    env.assertEqual(info(c, K)['waitlist'], 3)
    env.assertEqual(c.execute_command('SECKILL.UNFENCE', K), 'UNFENCED')
    r = info(c, K)
    env.assertEqual((r['remaining'], r['waitlist'], r['fence'], r['invariant']), (0, 2, 'clear', 'ok'))
    results = [res for _, _, res in _entrants(_raw(c), K)]
    env.assertEqual(results.count('promoted'), 1)


def test_unfence_releases_due_holds_first():
    """A fenced RESERVE releases nothing (it writes nothing); UNFENCE is a
    write like the others: the holds that ran out go back first, as with
    the module."""
    env, c = _env()
    env.assertOk(_init(c, 'h:{1}', 5, 'HOLD', 50, 'FENCE'))
    reserve(c, 'h:{1}', 'u1')
    reserve(c, 'h:{1}', 'u2')
    _new_replid(env, c)
    time.sleep(0.2)
    env.assertEqual(reserve(c, 'h:{1}', 'u3'), ['FENCED', None, 3])
    env.assertEqual(info(c, 'h:{1}')['expired'], 0)
    env.assertEqual(c.execute_command('SECKILL.UNFENCE', 'h:{1}'), 'UNFENCED')
    r = info(c, 'h:{1}')
    env.assertEqual((r['expired'], r['remaining'], r['fence'], r['invariant']), (2, 5, 'clear', 'ok'))
