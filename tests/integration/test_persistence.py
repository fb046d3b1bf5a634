"""Persistence in one plain server: RDB (DEBUG RELOAD), DUMP/RESTORE, COPY,
MEMORY USAGE and AOF via DEBUG LOADAOF (plain replay, and rewrite with and
without the RDB preamble). Restarts, replicas and corrupt payloads are in
test_replication.py and test_corrupt_input.py."""

import os

from RLTest import Env

from seckill_helpers import (check_invariant, digest, digest_value, get, info, is_valkey_8_1, reconcile, reserve,
                             server_ms, wait_aof_rewrite, wait_for)
from seckill_helpers import AOF_REWRITE_MARK


def _env():
    env = Env(decodeResponses=True)
    env.skipOnCluster()
    return env, env.getConnection()


def _rich_state(env, c, key='sale:{7}', stream='sale:{7}:ev'):
    """`key`: a sale with every kind of final record (confirmed, released,
    expired, retaken and adopted by RECONCILE APPLY) over several shards, with
    a stream and a TTL; its holds have all run out when this returns, so it
    no longer moves. 'steady': a sale without HOLD whose reservations stay
    pending. Returns (rids in `key` by kind, rids in 'steady')."""
    env.assertOk(c.execute_command('SECKILL.INIT', key, 40, 'SHARDS', 4, 'LIMIT', 3, 'HOLD', 100,
                                   'STREAM', stream, 'MAXLEN', 1000, 'TTL', 3600))
    rids = {}
    _, rids['exp'], _ = reserve(c, key, 'e-user', 'QTY', 2)
    env.assertTrue(wait_for(lambda: info(c, key)['expired'] == 2, timeout=3))
    env.assertOk(c.execute_command('SECKILL.INIT', key + ':nohold', 1))   # an untouched second sale
    _, rids['conf'], _ = reserve(c, key, 'c-user', 'QTY', 3)
    c.execute_command('SECKILL.CONFIRM', key, rids['conf'])
    _, rids['rel'], _ = reserve(c, key, 'r-user', 'QTY', 1)
    c.execute_command('SECKILL.RELEASE', key, rids['rel'])
    _, rids['retaken'], _ = reserve(c, key, 't-user', 'QTY', 2)
    c.execute_command('SECKILL.RELEASE', key, rids['retaken'])
    reconcile(c, key, 'ORDERS', 2, rids['retaken'], 't-user', 2, 'adopted', 'a-user', 3, 'APPLY')
    rids['adopted'] = 'adopted'
    for i in range(20):
        reserve(c, key, 'bulk-%d' % i, 'QTY', 1 + i % 2)
    r = check_invariant(env, c, key)
    env.assertEqual(r['expired'], 2)
    env.assertGreater(r['confirmed'], 0)
    env.assertGreater(r['released'], r['expired'])
    # Let the bulk holds run out: from then on nothing moves.
    env.assertTrue(wait_for(lambda: info(c, key)['pending'] == 0, timeout=3))
    # Pending reservations that stay: a sale without HOLD.
    env.assertOk(c.execute_command('SECKILL.INIT', 'steady', 10, 'SHARDS', 3, 'LIMIT', 2))
    steady = [reserve(c, 'steady', 'p%d' % i, 'QTY', 1 + i % 2)[1] for i in range(5)]
    steady.append(reserve(c, 'steady', 'p9')[1])
    env.assertEqual(c.execute_command('SECKILL.CONFIRM', 'steady', steady[-1])[0], 'CONFIRMED')
    env.assertEqual(info(c, 'steady')['pending'], 7)
    return rids, steady


def _snapshot(c, keys):
    return {
        'digest': digest(c),
        'values': {k: digest_value(c, k) for k in keys},
        'info': {k: info(c, k) for k in keys},
    }


def test_debug_reload_keeps_everything():
    env, c = _env()
    key = 'sale:{7}'
    rids, steady = _rich_state(env, c)
    keys = [key, 'steady', key + ':nohold']
    before = _snapshot(c, keys)
    gets = {name: get(c, key, rid) for name, rid in rids.items()}
    xlen = c.execute_command('XLEN', 'sale:{7}:ev')
    ttl = c.execute_command('PEXPIRETIME', key)

    for _ in range(2):
        env.dumpAndReload()
        env.assertEqual(_snapshot(c, keys), before)
        env.assertEqual({name: get(c, key, rid) for name, rid in rids.items()}, gets)
        env.assertEqual(c.execute_command('XLEN', 'sale:{7}:ev'), xlen)
        env.assertEqual(c.execute_command('PEXPIRETIME', key), ttl)

    # It keeps working after the reload, and new ids do not repeat old ones.
    st, new_id, _ = reserve(c, 'steady', 'after-reload')
    env.assertEqual(st, 'RESERVED')
    env.assertNotContains(new_id, steady)
    env.assertEqual(get(c, 'steady', new_id)['user'], 'after-reload')
    for rid in steady:
        env.assertIsNotNone(get(c, 'steady', rid))
    check_invariant(env, c, 'steady')
    check_invariant(env, c, key)


def test_holds_still_run_out_after_reload():
    env, c = _env()
    env.assertOk(c.execute_command('SECKILL.INIT', 's', 2, 'HOLD', 600))
    _, rid, _ = reserve(c, 's', 'u')
    deadline = get(c, 's', rid)['deadline_ms']
    env.dumpAndReload()
    g = get(c, 's', rid)
    env.assertEqual(g['deadline_ms'], deadline)
    # Nothing but INFO from here: the background expiry was re-armed by the load.
    env.assertTrue(wait_for(lambda: info(c, 's')['expired'] == 1, timeout=4),
                   message='hold loaded from RDB never ran out')
    env.assertGreaterEqual(server_ms(c), deadline)
    check_invariant(env, c, 's')


def test_dump_restore():
    env, c = _env()
    _rich_state(env, c)
    for src in ('sale:{7}', 'steady'):
        payload = c.dump(src)
        dst = src + ':copy'
        # The digest covers the TTL too: restore with the same absolute expiry.
        at = c.execute_command('PEXPIRETIME', src)
        ttl_args = [at, payload, 'ABSTTL'] if at > 0 else [0, payload]
        env.assertTrue(c.execute_command('RESTORE', dst, *ttl_args))
        env.assertEqual(digest_value(c, dst), digest_value(c, src), message=src)
        env.assertEqual(info(c, dst), info(c, src))
        # RESTORE onto an existing key needs REPLACE.
        env.expect('RESTORE', dst, 0, payload).error().contains('BUSYKEY')
        env.assertTrue(c.execute_command('RESTORE', dst, *ttl_args, 'REPLACE'))
        env.assertEqual(digest_value(c, dst), digest_value(c, src), message=src)
        # Without the TTL the sale itself is still the same.
        env.assertTrue(c.execute_command('RESTORE', dst + ':nottl', 0, payload))
        env.assertEqual(info(c, dst + ':nottl'), info(c, src))
        env.assertEqual(c.execute_command('PTTL', dst + ':nottl'), -1)
    # The restored sale is independent and fully working.
    st, rid, _ = reserve(c, 'steady:copy', 'someone-new')
    env.assertEqual(st, 'RESERVED')
    env.assertIsNone(get(c, 'steady', rid))
    env.assertNotEqual(digest_value(c, 'steady:copy'), digest_value(c, 'steady'))
    check_invariant(env, c, 'steady:copy')
    check_invariant(env, c, 'steady')


def test_copy_and_memory_usage():
    env, c = _env()
    env.assertOk(c.execute_command('SECKILL.INIT', 's', 100, 'SHARDS', 4, 'LIMIT', 2))
    m0 = c.execute_command('MEMORY', 'USAGE', 's')
    env.assertGreater(m0, 0)
    for i in range(50):
        reserve(c, 's', 'user-%03d' % i, 'QTY', 2, 'REQID', 'request-%03d' % i)
    m1 = c.execute_command('MEMORY', 'USAGE', 's')
    env.assertGreater(m1, m0 + 50 * 20, message='memory usage grows with reservations')

    env.assertEqual(c.execute_command('COPY', 's', 's2'), 1)
    env.assertEqual(digest_value(c, 's2'), digest_value(c, 's'))
    env.assertEqual(info(c, 's2'), info(c, 's'))
    env.assertEqual(c.execute_command('COPY', 's', 's2'), 0)     # exists, no REPLACE
    # Independent values.
    env.assertEqual(c.execute_command('SECKILL.CONFIRM', 's2', 'request-000'), ['CONFIRMED', 0])
    env.assertEqual(get(c, 's', 'request-000')['state'], 'pending')
    env.assertNotEqual(digest_value(c, 's2'), digest_value(c, 's'))
    env.assertEqual(c.execute_command('COPY', 's', 's2', 'REPLACE'), 1)
    env.assertEqual(digest_value(c, 's2'), digest_value(c, 's'))
    # Into another database.
    env.assertEqual(c.execute_command('COPY', 's', 's', 'DB', 1), 1)
    if is_valkey_8_1(c):
        # Valkey 8.1 leaves this client on db 1 after COPY ... DB 1 (server
        # bug valkey-io/valkey#4024, see is_valkey_8_1): back to db 0.
        c.execute_command('SELECT', 0)
    c1 = env.getConnection()
    c1.execute_command('SELECT', 1)
    env.assertEqual(info(c1, 's'), info(c, 's'))
    env.assertEqual(digest_value(c1, 's'), digest_value(c, 's'))
    c1.close()
    # Deleting one copy leaves the other.
    env.assertEqual(c.execute_command('DEL', 's'), 1)
    check_invariant(env, c, 's2')


# ----------------------------------------------------------------------- AOF

def _aof_base_file(c):
    """The base file of the AOF (Redis 7 multi-part AOF), from the manifest."""
    d = c.config_get('dir')['dir']
    sub = c.config_get('appenddirname')['appenddirname']
    name = c.config_get('appendfilename')['appendfilename']
    folder = os.path.join(d, sub)
    with open(os.path.join(folder, name + '.manifest'), 'rb') as f:
        for line in f.read().decode().splitlines():
            parts = line.split()
            if 'type' in parts and parts[parts.index('type') + 1] == 'b':
                return os.path.join(folder, parts[parts.index('file') + 1])
    return None


def _aof_rewrite_and_load(env, c, preamble):
    c.execute_command('CONFIG', 'SET', 'aof-use-rdb-preamble', 'yes' if preamble else 'no')
    c.execute_command('CONFIG', 'SET', 'appendonly', 'yes')
    env.assertTrue(wait_aof_rewrite(c))
    rids, _ = _rich_state(env, c)
    keys = ['sale:{7}', 'steady', 'sale:{7}:nohold']
    before = _snapshot(c, keys)
    gets = {name: get(c, 'sale:{7}', rid) for name, rid in rids.items()}
    ttl = c.execute_command('PEXPIRETIME', 'sale:{7}')

    # Replay of the commands as they were written (base + incremental file).
    env.assertOk(c.execute_command('DEBUG', 'LOADAOF'))
    env.assertEqual(_snapshot(c, keys), before)

    # Rewrite, then load only the rewritten base.
    env.assertTrue(wait_aof_rewrite(c))
    c.execute_command('BGREWRITEAOF')
    env.assertTrue(wait_aof_rewrite(c))
    base = _aof_base_file(c)
    env.assertIsNotNone(base)
    if base is not None and os.path.exists(base):
        with open(base, 'rb') as f:
            content = f.read()
        # An RDB starts with b'REDIS' (Redis, Valkey 8) or, from Valkey 9 on
        # (RDB version 80), with b'VALKEY'.
        if preamble:
            env.assertTrue(content.startswith((b'REDIS', b'VALKEY')), message='RDB preamble expected')
        else:
            env.assertFalse(content.startswith((b'REDIS', b'VALKEY')))
            env.assertContains(AOF_REWRITE_MARK, content)
    env.assertOk(c.execute_command('DEBUG', 'LOADAOF'))
    env.assertEqual(_snapshot(c, keys), before)
    env.assertEqual({name: get(c, 'sale:{7}', rid) for name, rid in rids.items()}, gets)
    env.assertEqual(c.execute_command('PEXPIRETIME', 'sale:{7}'), ttl)
    check_invariant(env, c, 'sale:{7}')
    # Still working after the load.
    env.assertEqual(reserve(c, 'steady', 'after-aof')[0], 'RESERVED')
    check_invariant(env, c, 'steady')


def test_aof_rewrite_without_rdb_preamble():
    env, c = _env()
    _aof_rewrite_and_load(env, c, preamble=False)


def test_aof_rewrite_with_rdb_preamble():
    env, c = _env()
    _aof_rewrite_and_load(env, c, preamble=True)


def test_aof_rewrite_many_records():
    """More records than one rewrite batch, with --aof-use-rdb-preamble no."""
    env, c = _env()
    c.execute_command('CONFIG', 'SET', 'aof-use-rdb-preamble', 'no')
    c.execute_command('CONFIG', 'SET', 'appendonly', 'yes')
    env.assertTrue(wait_aof_rewrite(c))
    env.assertOk(c.execute_command('SECKILL.INIT', 'big', 1000, 'SHARDS', 16, 'LIMIT', 3))
    rids = []
    for i in range(300):
        st, rid, _ = reserve(c, 'big', 'u%d' % (i % 150), 'QTY', 1 + i % 2)
        if st == 'RESERVED':
            rids.append(rid)
    for i, rid in enumerate(rids):
        if i % 3 == 0:
            c.execute_command('SECKILL.RELEASE', 'big', rid)
        elif i % 3 == 1:
            c.execute_command('SECKILL.CONFIRM', 'big', rid)
    before = digest_value(c, 'big')
    rep = info(c, 'big')
    env.assertGreater(rep['reservations'], 128)
    c.execute_command('BGREWRITEAOF')
    env.assertTrue(wait_aof_rewrite(c))
    env.assertOk(c.execute_command('DEBUG', 'LOADAOF'))
    env.assertEqual(digest_value(c, 'big'), before)
    env.assertEqual(info(c, 'big'), rep)
