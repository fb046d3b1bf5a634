"""Replicas, AOF and RDB end in exactly the master's state; failover plus
RECONCILE ... APPLY brings a sale back to the order ledger's truth."""

from RLTest import Env

import workload as wl
from seckill_helpers import replica_caught_up, restart_from_aof

KEY = 'sale:{r1}'
KEY2 = 'sale:{r2}'
STREAM = 'sale:{r1}:events'
KEYS = [KEY, KEY2]


def _workload(conn, seed):
    wl.init_sale(conn, KEY, STREAM)
    wl.init_sale(conn, KEY2, None, total=50, shards=1, limit=2)
    ledger = wl.run(conn, KEY, seed)
    ledger.update(wl.run(conn, KEY2, seed + 1, ops=400, users=40, max_qty=2))
    return ledger


def _settled(env, conn):
    for k in KEYS:
        env.assertTrue(wl.settle(conn, k), message='holds still pending in %s' % k)


def _compare(env, before, after):
    env.assertEqual(before['values'], after['values'])
    env.assertEqual(before['info'], after['info'])
    env.assertEqual(before['digest'], after['digest'])
    env.assertEqual(before.get('stream'), after.get('stream'))


def test_replica_holds_master_state():
    env = Env(useSlaves=True, decodeResponses=True)
    master, replica = env.getConnection(), env.getSlaveConnection()
    _workload(master, seed=11)
    _settled(env, master)
    replica_caught_up(env, master)
    wl.assert_same_state(env, master, replica, KEYS, STREAM)
    # Read commands work on the replica, writes are refused there.
    env.assertEqual(wl.info_map(replica, KEY)['invariant'], 'ok')
    try:
        replica.execute_command('SECKILL.RESERVE', KEY, 'someone')
        env.assertTrue(False, message='a read-only replica accepted RESERVE')
    except Exception as e:
        env.assertContains('read only replica', str(e))


def test_rdb_reload_keeps_state():
    env = Env(decodeResponses=True)
    conn = env.getConnection()
    _workload(conn, seed=21)
    _settled(env, conn)
    before = wl.snapshot(conn, KEYS, STREAM)
    ttl_before = wl.pttls(conn, KEYS)
    env.dumpAndReload(restart=True)
    conn = env.getConnection()
    _compare(env, before, wl.snapshot(conn, KEYS, STREAM))
    for k, ttl in wl.pttls(conn, KEYS).items():
        env.assertTrue(0 < ttl <= ttl_before[k])


def _aof_restart(env, rewrite):
    conn = env.getConnection()
    _workload(conn, seed=31)
    _settled(env, conn)
    before = wl.snapshot(conn, KEYS, STREAM)
    restart_from_aof(env, rewrite)
    conn = env.getConnection()
    _compare(env, before, wl.snapshot(conn, KEYS, STREAM))
    # The restarted server keeps selling with the same rules.
    status, _, _ = conn.execute_command('SECKILL.RESERVE', KEY, 'after-restart')
    env.assertContains(status, ['RESERVED', 'SOLD_OUT'])


def test_aof_replay_without_rdb_preamble():
    _aof_restart(Env(useAof=True, useRdbPreamble=False, decodeResponses=True), rewrite=False)


def test_aof_rewrite_without_rdb_preamble():
    _aof_restart(Env(useAof=True, useRdbPreamble=False, decodeResponses=True), rewrite=True)


def test_aof_rewrite_with_rdb_preamble():
    _aof_restart(Env(useAof=True, useRdbPreamble=True, decodeResponses=True), rewrite=True)


def _reconcile(conn, key, ledger, apply):
    """Sends the ledger in chunks; returns the summed class counts."""
    totals = {}
    rows = list(ledger.items())
    for i in range(0, len(rows), 40):
        chunk = rows[i:i + 40]
        args = ['SECKILL.RECONCILE', key, 'ORDERS', len(chunk)]
        for rid, (user, qty) in chunk:
            args += [rid, user, qty]
        if apply:
            args.append('APPLY')
        report = dict(zip(*[iter(conn.execute_command(*args))] * 2))
        for cls in ('ok', 'pending', 'released', 'unknown', 'conflict'):
            totals[cls] = totals.get(cls, 0) + int(report['orders_' + cls])
    return totals


def test_failover_then_reconcile_with_ledger():
    env = Env(useSlaves=True, decodeResponses=True)
    master, replica = env.getConnection(), env.getSlaveConnection()
    wl.init_sale(master, KEY, STREAM, total=3000, limit=3, hold=0)
    ledger = wl.run(master, KEY, seed=41, ops=800)
    replica_caught_up(env, master)

    # Promote the replica mid-sale.
    replica.execute_command('REPLICAOF', 'NO', 'ONE')
    # Writes the old master still took: lost to the new master, but the
    # order ledger recorded them.
    lost = {}
    for n in range(25):
        rid = 'lost-%d' % n
        status, _, _ = master.execute_command('SECKILL.RESERVE', KEY, 'lost-user-%d' % n, 'QTY', 2, 'REQID', rid)
        env.assertEqual(status, 'RESERVED')
        env.assertEqual(master.execute_command('SECKILL.CONFIRM', KEY, rid)[0], 'CONFIRMED')
        lost[rid] = ('lost-user-%d' % n, 2)
    ledger.update(lost)

    # The new master keeps selling, and the invariant holds throughout.
    ledger.update(wl.run(replica, KEY, seed=42, ops=400))
    env.assertEqual(wl.info_map(replica, KEY)['invariant'], 'ok')

    # Report only: the lost orders are unknown here, nothing changes.
    digest = replica.execute_command('DEBUG', 'DIGEST-VALUE', KEY)
    seen = _reconcile(replica, KEY, ledger, apply=False)
    env.assertEqual(seen['unknown'], len(lost))
    env.assertEqual(replica.execute_command('DEBUG', 'DIGEST-VALUE', KEY), digest)

    # APPLY brings the sale to the ledger's truth.
    applied = _reconcile(replica, KEY, ledger, apply=True)
    env.assertEqual(applied['conflict'], 0)
    after = _reconcile(replica, KEY, ledger, apply=False)
    env.assertEqual(after['ok'], len(ledger))
    info = wl.info_map(replica, KEY)
    env.assertEqual(info['invariant'], 'ok')
    env.assertEqual(int(info['confirmed']), sum(q for _, q in ledger.values()))


def test_cluster_sale_and_stream_share_a_slot():
    env = Env(env='oss-cluster', shardsCount=2, decodeResponses=True)
    conn = env.getClusterConnectionIfNeeded()
    for tag in range(6):  # spread sales over both shards
        key, stream = 'sale:{c%d}' % tag, 'sale:{c%d}:events' % tag
        env.assertEqual(conn.execute_command('SECKILL.INIT', key, 5, 'STREAM', stream, 'SHARDS', 2), 'OK')
        status, rid, remaining = conn.execute_command('SECKILL.RESERVE', key, 'u1')
        env.assertEqual((status, remaining), ('RESERVED', 4))
        env.assertEqual(conn.execute_command('SECKILL.CONFIRM', key, rid), ['CONFIRMED', 4])
        entries = conn.execute_command('XRANGE', stream, '-', '+')
        events = [e[1]['event'] if isinstance(e[1], dict) else e[1][1] for e in entries]
        env.assertEqual(events, ['reserved', 'confirmed'])
    try:
        conn.execute_command('SECKILL.INIT', 'sale:{c0}x', 5, 'STREAM', 'other:{zz}')
        env.assertTrue(False, message='STREAM in another slot was accepted')
    except Exception as e:
        env.assertContains('slot', str(e))
