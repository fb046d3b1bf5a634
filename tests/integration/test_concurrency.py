"""Many clients at once: never oversold, never above LIMIT, exactly one
winner between a racing CONFIRM and RELEASE, one reservation per REQID."""

import random
import threading
import time
from collections import Counter, defaultdict

from RLTest import Env

from seckill_helpers import assert_replica_agrees, check_invariant, get, info, reconcile


def _env():
    env = Env(decodeResponses=True)
    env.skipOnCluster()
    return env, env.getConnection()


def _run_threads(env, n, target):
    """Runs target(i, conn) in n threads, each with its own connection; returns
    their results and re-raises nothing silently (an exception is a failure)."""
    results = [None] * n
    errors = []
    start = threading.Barrier(n)

    def body(i):
        conn = env.getConnection()
        try:
            start.wait()
            results[i] = target(i, conn)
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(repr(e))
        finally:
            conn.close()

    threads = [threading.Thread(target=body, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    env.assertEqual(errors, [])
    return results


def test_race_for_few_units():
    """20 clients, 2000 attempts at 50 units, QTY 1..2, LIMIT 2."""
    env, c = _env()
    total, limit, threads, attempts = 50, 2, 20, 100
    env.assertOk(c.execute_command('SECKILL.INIT', 'hot', total, 'SHARDS', 8, 'LIMIT', limit))
    users = ['user-%d' % i for i in range(300)]

    def client(i, conn):
        rng = random.Random(i)
        out = []
        for _ in range(attempts):
            user = rng.choice(users)
            qty = rng.randint(1, 2)
            reply = conn.execute_command('SECKILL.RESERVE', 'hot', user, 'QTY', qty)
            out.append((user, qty, reply))
        return out

    replies = [r for chunk in _run_threads(env, threads, client) for r in chunk]
    env.assertEqual(len(replies), threads * attempts)

    won = [(user, qty, rep[1]) for user, qty, rep in replies if rep[0] == 'RESERVED']
    statuses = Counter(rep[0] for _, _, rep in replies)
    env.assertEqual(set(statuses) - {'RESERVED', 'SOLD_OUT', 'LIMIT'}, set(), message=repr(statuses))
    sold = sum(qty for _, qty, _ in won)
    for _, _, rep in replies:
        env.assertGreaterEqual(rep[2], 0)
        env.assertLessEqual(rep[2], total)
    r = check_invariant(env, c, 'hot')
    # Never oversold, and what was sold is exactly what the replies say.
    env.assertEqual(sold, total - r['remaining'])
    env.assertLessEqual(sold, total)
    env.assertEqual(r['pending'], sold)
    env.assertEqual(r['reservations'], len(won))
    # Demand (about 3000 units) far exceeds supply: all of it goes, and the
    # SOLD_OUT replies only start when less than 2 units remain.
    env.assertLessEqual(r['remaining'], 1)
    env.assertGreater(statuses['SOLD_OUT'], 0)
    # No user above LIMIT.
    per_user = defaultdict(int)
    for user, qty, _ in won:
        per_user[user] += qty
    env.assertLessEqual(max(per_user.values()), limit)
    env.assertEqual(r['buyers'], len(per_user))
    # Every id unique, and each record says what its reply said.
    ids = [rid for _, _, rid in won]
    env.assertEqual(len(set(ids)), len(ids))
    for user, qty, rid in won:
        g = get(c, 'hot', rid)
        env.assertEqual((g['user'], g['qty'], g['state']), (user, qty, 'pending'))
    # A LIMIT reply names one of the user's own live reservations.
    mine = defaultdict(set)
    for user, _, rid in won:
        mine[user].add(rid)
    for user, qty, rep in replies:
        if rep[0] == 'LIMIT':
            env.assertContains(rep[1], mine[user])
    assert_replica_agrees(env, c)


def test_racing_confirm_and_release():
    """Exactly one of a racing CONFIRM and RELEASE wins, and both agree on which."""
    env, c = _env()
    n = 200
    env.assertOk(c.execute_command('SECKILL.INIT', 's', n, 'SHARDS', 4))
    rids = [c.execute_command('SECKILL.RESERVE', 's', 'u%d' % i)[1] for i in range(n)]

    def client(i, conn):
        out = {}
        cmd = 'SECKILL.CONFIRM' if i % 2 == 0 else 'SECKILL.RELEASE'
        order = list(rids)
        random.Random(i).shuffle(order)
        for rid in order:
            out[rid] = conn.execute_command(cmd, 's', rid)[0]
        return (cmd, out)

    results = _run_threads(env, 8, client)
    confirmed = released = 0
    for rid in rids:
        conf = [out[rid] for cmd, out in results if cmd == 'SECKILL.CONFIRM']
        rel = [out[rid] for cmd, out in results if cmd == 'SECKILL.RELEASE']
        state = get(c, 's', rid)['state']
        wins = conf.count('CONFIRMED') + rel.count('RELEASED')
        env.assertEqual(wins, 1, message='%s: confirm %r release %r' % (rid, conf, rel))
        if state == 'confirmed':
            confirmed += 1
            env.assertEqual(set(conf) - {'CONFIRMED', 'ALREADY_CONFIRMED'}, set())
            env.assertEqual(set(rel), {'CONFIRMED'})
        else:
            released += 1
            env.assertEqual(state, 'released')
            env.assertEqual(set(conf), {'RELEASED'})
            env.assertEqual(set(rel) - {'RELEASED', 'ALREADY_RELEASED'}, set())
    r = check_invariant(env, c, 's')
    env.assertEqual((r['confirmed'], r['released'], r['pending'], r['remaining']), (confirmed, released, 0, released))
    assert_replica_agrees(env, c)


def test_same_reqid_from_many_clients():
    """Retries of one REQID from many clients: one reservation, the rest DUPLICATE."""
    env, c = _env()
    env.assertOk(c.execute_command('SECKILL.INIT', 's', 1000, 'LIMIT', 1000))

    def client(i, conn):
        return [conn.execute_command('SECKILL.RESERVE', 's', 'buyer', 'REQID', 'req-%d' % k) for k in range(50)]

    results = _run_threads(env, 10, client)
    for k in range(50):
        replies = [res[k] for res in results]
        env.assertEqual(sorted(r[0] for r in replies), ['DUPLICATE'] * 9 + ['RESERVED'])
        env.assertEqual({r[1] for r in replies}, {'req-%d' % k})
    r = check_invariant(env, c, 's')
    env.assertEqual((r['reservations'], r['pending'], r['remaining']), (50, 50, 950))
    assert_replica_agrees(env, c)


def test_churn_with_holds_and_reconcile():
    """Reserve / confirm / release / expiry / RECONCILE all at once; the
    invariant holds throughout and stock is conserved at the end."""
    env, c = _env()
    total = 30
    env.assertOk(c.execute_command('SECKILL.INIT', 's', total, 'SHARDS', 5, 'LIMIT', 2, 'HOLD', 50))
    # One hold nobody settles: expiry always runs during the churn (without
    # it a fast server can confirm all 30 units before any hold runs out).
    env.assertEqual(c.execute_command('SECKILL.RESERVE', 's', 'sleeper')[0], 'RESERVED')
    stop = threading.Event()
    broken = []

    def watcher():
        w = env.getConnection()
        try:
            while not stop.is_set():
                r = info(w, 's')
                if r['invariant'] != 'ok' or r['remaining'] + r['pending'] + r['confirmed'] != total:
                    broken.append(r)
        finally:
            w.close()

    def client(i, conn):
        rng = random.Random(100 + i)
        mine = []
        for _ in range(150):
            op = rng.random()
            if op < 0.6 or not mine:
                rep = conn.execute_command('SECKILL.RESERVE', 's', 'u%d' % rng.randrange(40), 'QTY', rng.randint(1, 2))
                if rep[0] == 'RESERVED':
                    mine.append(rep[1])
            elif op < 0.75:
                conn.execute_command('SECKILL.CONFIRM', 's', rng.choice(mine))
            elif op < 0.95:
                conn.execute_command('SECKILL.RELEASE', 's', rng.choice(mine))
            else:
                reconcile(conn, 's', 'EXPIRE')
        return mine

    t = threading.Thread(target=watcher)
    t.start()
    try:
        results = _run_threads(env, 8, client)
    finally:
        stop.set()
        t.join(30)
    env.assertEqual(broken[:3], [])
    # Let the last holds run out, then everything is confirmed or back in stock.
    r = None
    for _ in range(100):
        r = info(c, 's')
        if r['pending'] == 0:
            break
        time.sleep(0.02)
    env.assertEqual(r['pending'], 0)
    r = check_invariant(env, c, 's')
    confirmed = sum(get(c, 's', rid)['qty'] for rids in results for rid in rids
                    if get(c, 's', rid)['state'] == 'confirmed')
    env.assertEqual(r['confirmed'], confirmed)
    env.assertEqual(r['remaining'], total - confirmed)
    env.assertGreater(r['expired'], 0)
    assert_replica_agrees(env, c)

