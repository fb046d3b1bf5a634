"""A randomized flash-sale workload and the state comparisons that follow it.

Used by the replication, AOF and RDB tests: the same workload runs against
the master, then the replica / reloaded / restarted server must hold exactly
the master's state.
"""

import random
import time

HOLD_MS = 150


def info_map(conn, key):
    """SECKILL.INFO as a dict (RESP2 flat pairs)."""
    reply = conn.execute_command('SECKILL.INFO', key)
    if reply is None:
        return None
    return dict(zip(reply[0::2], reply[1::2]))


def init_sale(conn, key, stream, total=300, shards=4, limit=3, hold=HOLD_MS, ttl=3600):
    args = ['SECKILL.INIT', key, total, 'SHARDS', shards, 'LIMIT', limit, 'HOLD', hold,
            'TTL', ttl, 'REPLACE']
    if stream:
        args += ['STREAM', stream, 'MAXLEN', 100000]
    return conn.execute_command(*args)


def run(conn, key, seed, ops=1500, users=120, max_qty=3):
    """Random RESERVE (QTY > 1, REQID retries), RELEASE / CONFIRM races on
    the same ids, and pauses long enough for holds to run out mid-run.
    Returns the ids that were confirmed (the 'order ledger')."""
    rng = random.Random(seed)
    ids, reqids, confirmed = [], [], {}
    for n in range(ops):
        r = rng.random()
        if r < 0.55:
            user = 'u%d' % rng.randrange(users)
            args = ['SECKILL.RESERVE', key, user, 'QTY', rng.randint(1, max_qty)]
            if rng.random() < 0.5:
                reqid = rng.choice(reqids) if reqids and rng.random() < 0.3 else 'q%d-%d' % (seed, n)
                reqids.append(reqid)
                args += ['REQID', reqid]
            status, rid, _ = conn.execute_command(*args)
            if status == 'RESERVED':
                ids.append((rid, user))
        elif r < 0.75 and ids:
            rid, _ = rng.choice(ids)
            conn.execute_command('SECKILL.RELEASE', key, rid)
        elif r < 0.95 and ids:
            rid, user = rng.choice(ids)
            status, _ = conn.execute_command('SECKILL.CONFIRM', key, rid)
            if status in ('CONFIRMED', 'ALREADY_CONFIRMED'):
                qty = int(dict(zip(*[iter(conn.execute_command('SECKILL.GET', key, rid))] * 2))['qty'])
                confirmed[rid] = (user, qty)
        else:
            # Let some holds run out: the timer or the next write releases them.
            time.sleep(rng.choice([0.0, 0.05, HOLD_MS / 1000.0 + 0.05]))
    return confirmed


def settle(conn, key):
    """Waits until no hold is left pending, so the state stops changing."""
    deadline = time.time() + 10
    while time.time() < deadline:
        if int(info_map(conn, key)['pending']) == 0:
            return True
        time.sleep(HOLD_MS / 1000.0)
    return False


def snapshot(conn, keys, stream=None):
    """Everything that must be equal between two servers holding the same data."""
    snap = {
        'digest': conn.execute_command('DEBUG', 'DIGEST'),
        'values': {k: conn.execute_command('DEBUG', 'DIGEST-VALUE', k) for k in keys},
        'info': {k: info_map(conn, k) for k in keys},
    }
    if stream:
        snap['stream'] = conn.execute_command('XRANGE', stream, '-', '+')
    return snap


def pttls(conn, keys):
    return {k: conn.execute_command('PTTL', k) for k in keys}


def assert_same_state(env, a, b, keys, stream=None):
    sa, sb = snapshot(a, keys, stream), snapshot(b, keys, stream)
    env.assertEqual(sa['values'], sb['values'])
    env.assertEqual(sa['info'], sb['info'])
    env.assertEqual(sa['digest'], sb['digest'])
    if stream:
        env.assertEqual(len(sa['stream']), len(sb['stream']))
        env.assertEqual(sa['stream'], sb['stream'])
    ta, tb = pttls(a, keys), pttls(b, keys)
    for k in keys:
        env.assertTrue(abs(ta[k] - tb[k]) < 1000, message='TTL of %s: %s vs %s' % (k, ta[k], tb[k]))
    for k in keys:
        info = sa['info'][k]
        env.assertEqual(info['invariant'], 'ok')
        env.assertEqual(int(info['remaining']) + int(info['pending']) + int(info['confirmed']),
                        int(info['total']))
