"""SECKILL.SEND / SECKILL.RECV: stock moving between the keys of a split
sale. Replies, idempotency (repeated tid; repeated, late and out-of-order
RECV), MIN, bad input (digest unchanged), the invariant with transfers at
every step, releases after a SEND, the report fields, replicas, AOF (with
and without the RDB preamble), RDB reloads, and a version-1 RDB payload."""

import json
import os
import time

import redis

from RLTest import Env

from seckill_helpers import (replica_caught_up, PAST_64, REPORT_FIELDS, RawConn, assert_replica_agrees, caught_up_replica, digest, digest_value, events_from,
                             get, info, reconcile, reserve, restart_from_aof, seckill_stats, server_ms,
                             wait_aof_rewrite)
from seckill_helpers import FUNCTIONS, MODULE

A = 'sale:{t.a}'
B = 'sale:{t.b}'
S = 'sale:{t.a}:events'
TRANSFER_FIELDS = REPORT_FIELDS + ['round', 'incarnation', 'sent', 'received', 'peers', 'sent_to']
ROUND = 'r1'
# Every key of these tests is a part of one split sale whose parts are these.
KEYS = [A, B, 'sale:{w.pool}', 'sale:{w.p0}', 'sale:{w.p1}']


def init(conn, key, *args, round=ROUND):
    """SECKILL.INIT as a part of the split sale of KEYS."""
    peers = [k for k in KEYS if k != key]
    return conn.execute_command('SECKILL.INIT', key, *args, 'SPLIT', round, len(peers), *peers)
FIXTURES = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'fixtures')
U64_MAX = '18446744073709551615'


def incarnation(conn, key):
    """The key's incarnation (INFO incarnation), as a client names it in
    TO; '00000000' for a key that does not exist or is not split."""
    r = info(conn, key)
    return (r or {}).get('incarnation', '00000000')


def send(conn, key, peer, qty, tid, *opts, round=ROUND, to=None):
    """SEND to the peer's current incarnation (or `to`)."""
    to = incarnation(conn, peer) if to is None else to
    return conn.execute_command('SECKILL.SEND', key, peer, qty, *opts, 'TID', tid, 'ROUND', round, 'TO', to)


def recv(conn, key, peer, sent_total, round=ROUND, to=None):
    """RECV of a total the peer counted for this key's current incarnation
    (or for `to`)."""
    to = incarnation(conn, key) if to is None else to
    return conn.execute_command('SECKILL.RECV', key, peer, sent_total, 'ROUND', round, 'TO', to)


def as_list(x):
    return x if isinstance(x, list) else [x]


def check(env, conn, key, depth=0):
    """The invariant with transfers (docs/commands.md), from the report; returns the report."""
    r = info(conn, key)
    env.assertIsNotNone(r, depth=depth + 1)
    sent, received = r.get('sent', 0), r.get('received', 0)
    env.assertEqual(list(r.keys()), TRANSFER_FIELDS if 'sent' in r else REPORT_FIELDS, depth=depth + 1)
    env.assertEqual(sum(r['shards']), r['remaining'], depth=depth + 1)
    env.assertEqual(r['remaining'] + r['pending'] + r['confirmed'], r['total'] + received - sent, depth=depth + 1,
                    message='remaining + pending + confirmed == total + received - sent: %r' % (r,))
    env.assertEqual(r['invariant'], 'ok', depth=depth + 1)
    if 'peers' in r:
        env.assertEqual(sum(p[1] for p in r['peers']), sent, depth=depth + 1)
        env.assertEqual(sum(p[2] for p in r['peers']), received, depth=depth + 1)
    return r


def peers(conn, key):
    """The peers a key exchanged with (every declared peer is listed)."""
    return {p: (s, r) for p, s, r in info(conn, key)['peers'] if (s, r) != (0, 0)}


def test_send_and_recv_replies():
    env = Env(decodeResponses=True)
    c = env.getConnection()
    env.assertEqual(init(c, A, 10, 'SHARDS', 3), 'OK')
    env.assertEqual(init(c, B, 0, 'SHARDS', 2), 'OK')
    # A part reports its round and every declared peer from the start.
    r = check(env, c, A)
    env.assertEqual(list(r.keys()), TRANSFER_FIELDS)
    env.assertEqual((r['round'], r['sent'], r['received']), (ROUND, 0, 0))
    env.assertEqual(r['peers'], [[k, 0, 0] for k in sorted(KEYS) if k != A])
    # A plain sale keeps the report it always had.
    c.execute_command('SECKILL.INIT', 'sale:{t.plain}', 3)
    env.assertEqual(list(check(env, c, 'sale:{t.plain}').keys()), REPORT_FIELDS)
    env.assertEqual(send(c, A, B, 4, 'tx-1'), [4, 4, 6])
    check(env, c, A)
    # A repeated tid takes nothing more, and answers with the current totals.
    env.assertEqual(send(c, A, B, 4, 'tx-1'), [0, 4, 6])
    env.assertEqual(send(c, A, B, 9, 'tx-1', 'MIN', 1), [0, 4, 6])
    # Nothing received yet.
    env.assertEqual(check(env, c, B)['received'], 0)
    env.assertEqual(recv(c, B, A, 4), [4, 4, 4])
    env.assertEqual(recv(c, B, A, 4), [0, 4, 4])      # repeated
    env.assertEqual(recv(c, B, A, 2), [0, 4, 4])      # late
    env.assertEqual(recv(c, B, A, 0), [0, 4, 4])
    r = check(env, c, B)
    env.assertEqual((r['sent'], r['received'], peers(c, B)), (0, 4, {A: (0, 4)}))
    r = check(env, c, A)
    env.assertEqual((r['sent'], r['received'], peers(c, A)), (4, 0, {B: (4, 0)}))
    # Out of order: the later total arrives first, the earlier one is harmless.
    env.assertEqual(send(c, A, B, 2, 'tx-2'), [2, 6, 4])
    env.assertEqual(send(c, A, B, 1, 'tx-3'), [1, 7, 3])
    env.assertEqual(recv(c, B, A, 7), [3, 7, 7])
    env.assertEqual(recv(c, B, A, 6), [0, 7, 7])
    # And back: B sends to A; each side counts per peer.
    env.assertEqual(send(c, B, A, 5, 'back-1'), [5, 5, 2])
    env.assertEqual(recv(c, A, B, 5), [5, 5, 8])
    env.assertEqual(peers(c, A), {B: (7, 5)})
    env.assertEqual(peers(c, B), {A: (5, 7)})
    for k in (A, B):
        check(env, c, k)
    # RECONCILE reports the transfer fields too, before the order classes.
    fields = list(reconcile(c, A, 'ORDERS', 1, 'r', 'u', 1).keys())
    env.assertEqual(fields[:len(TRANSFER_FIELDS)], TRANSFER_FIELDS)
    env.assertEqual(fields[len(TRANSFER_FIELDS)], 'orders_ok')
    env.assertEqual(info(c, A)['total'], 10)
    env.assertEqual(info(c, A)['remaining'] + info(c, B)['remaining'], 10)


def test_min_and_refusals_do_not_record_the_tid():
    env = Env(decodeResponses=True)
    c = env.getConnection()
    init(c, A, 5, 'SHARDS', 2, 'LIMIT', 5)
    _, rid, _ = reserve(c, A, 'u1', 'QTY', 4)
    # Only the remaining unit can go: below MIN 2, nothing is taken.
    d = digest(c)
    env.assertEqual(send(c, A, B, 3, 'tx', 'MIN', 2), [0, 0, 1])
    env.assertEqual(digest(c), d)
    env.assertEqual(info(c, A)['sent'], 0)
    # MIN above qty: nothing can be taken.
    env.assertEqual(send(c, A, B, 1, 'tx', 'MIN', 3), [0, 0, 1])
    # The refused tid was not recorded: once stock is back, it succeeds.
    env.assertEqual(c.execute_command('SECKILL.RELEASE', A, rid), ['RELEASED', 5])
    env.assertEqual(send(c, A, B, 3, 'tx', 'MIN', 2), [3, 3, 2])
    env.assertEqual(send(c, A, B, 3, 'tx', 'MIN', 2), [0, 3, 2])
    # Sold out: nothing to send.
    reserve(c, A, 'u2', 'QTY', 2)
    env.assertEqual(send(c, A, B, 1, 'tx-2'), [0, 3, 0])
    check(env, c, A)


def test_send_takes_remaining_only_and_releases_stay_capped():
    env = Env(decodeResponses=True)
    c = env.getConnection()
    init(c, A, 8, 'SHARDS', 4, 'LIMIT', 3)
    rids = [reserve(c, A, 'user-%d' % i, 'QTY', 1 + i % 2)[1] for i in range(4)]  # 6 units
    env.assertEqual(c.execute_command('SECKILL.CONFIRM', A, rids[0]), ['CONFIRMED', 2])
    # Pending and confirmed units stay: only the 2 remaining go.
    env.assertEqual(send(c, A, B, 100, 'all'), [2, 2, 0])
    check(env, c, A)
    # Released units go back to their buckets, never above what is left.
    for rid in rids[1:]:
        env.assertEqual(c.execute_command('SECKILL.RELEASE', A, rid)[0], 'RELEASED')
        check(env, c, A)
    r = check(env, c, A)
    env.assertEqual((r['remaining'], r['confirmed'], r['sent']), (5, 1, 2))
    env.assertEqual(send(c, A, B, 100, 'again'), [5, 7, 0])
    env.assertEqual(reserve(c, A, 'late')[0], 'SOLD_OUT')
    # Credit back: the stock sells again.
    env.assertEqual(recv(c, A, B, 3), [3, 3, 3])
    env.assertEqual(reserve(c, A, 'late', 'QTY', 3)[0], 'RESERVED')
    check(env, c, A)


def test_outside_the_window_and_no_stream_entry():
    env = Env(decodeResponses=True)
    c = env.getConnection()
    later = server_ms(c) + 3600 * 1000
    init(c, A, 10, 'START', later, 'STREAM', S)
    init(c, B, 0, 'START', 1, 'END', 2)
    env.assertEqual(reserve(c, A, 'u')[0], 'NOT_STARTED')
    env.assertEqual(send(c, A, B, 6, 't'), [6, 6, 4])
    env.assertEqual(recv(c, B, A, 6), [6, 6, 6])
    env.assertEqual(reserve(c, B, 'u')[0], 'ENDED')
    env.assertEqual(c.execute_command('EXISTS', S), 0)
    check(env, c, A)
    check(env, c, B)


def test_expired_holds_are_sendable():
    env = Env(decodeResponses=True)
    c = env.getConnection()
    init(c, A, 4, 'HOLD', 50, 'LIMIT', 4, 'STREAM', S)
    reserve(c, A, 'u', 'QTY', 4)
    time.sleep(0.2)
    # The SEND releases the hold that ran out first (as any write does).
    env.assertEqual(send(c, A, B, 4, 't')[0], 4)
    r = check(env, c, A)
    env.assertEqual((r['expired'], r['remaining']), (4, 0))


def test_missing_key_and_wrong_type():
    env = Env(decodeResponses=True)
    c = env.getConnection()
    env.assertIsNone(send(c, A, B, 1, 't'))
    env.assertIsNone(recv(c, A, B, 1))
    env.assertEqual(c.execute_command('EXISTS', A), 0)
    c.execute_command('SET', A, 'x')
    for cmd in (('SECKILL.SEND', A, B, 1, 'TID', 't', 'ROUND', ROUND), ('SECKILL.RECV', A, B, 1, 'ROUND', ROUND)):
        try:
            c.execute_command(*cmd)
            env.assertTrue(False, message='%r on a string key' % (cmd,))
        except Exception as e:
            env.assertContains('WRONGTYPE', str(e))


LONG = 'x' * 257
ARITY = 'wrong number of arguments'
BAD = [
    (('SECKILL.SEND',), ARITY),
    (('SECKILL.SEND', A), ARITY),
    (('SECKILL.SEND', A, B), ARITY),
    (('SECKILL.SEND', A, B, 1), 'TID'),
    (('SECKILL.SEND', A, B, 1, 'TID'), 'TID'),
    (('SECKILL.SEND', A, B, 1, 'TID', ''), 'TID'),
    (('SECKILL.SEND', A, B, 1, 'TID', LONG), 'TID'),
    (('SECKILL.SEND', A, B, 1, 'TID', 't', 'TID', 't'), 'TID'),
    (('SECKILL.SEND', A, B, 1, 'MIN', 1, 'MIN', 1, 'TID', 't'), 'MIN'),
    (('SECKILL.SEND', A, B, 1, 'MIN', 0, 'TID', 't'), 'MIN'),
    (('SECKILL.SEND', A, B, 1, 'MIN', -1, 'TID', 't'), 'MIN'),
    (('SECKILL.SEND', A, B, 1, 'MIN', '1000000000000001', 'TID', 't'), 'MIN'),
    (('SECKILL.SEND', A, B, 1, 'MIN', PAST_64, 'TID', 't'), 'MIN'),
    (('SECKILL.SEND', A, B, 1, 'MIN', 'x', 'TID', 't'), 'MIN'),
    (('SECKILL.SEND', A, B, 1, 'MIN'), 'MIN'),
    (('SECKILL.SEND', A, B, 1, 'BOGUS', 1, 'TID', 't'), 'BOGUS'),
    (('SECKILL.SEND', A, B, 0, 'TID', 't'), 'qty'),
    (('SECKILL.SEND', A, B, -1, 'TID', 't'), 'qty'),
    (('SECKILL.SEND', A, B, 'one', 'TID', 't'), 'qty'),
    (('SECKILL.SEND', A, B, '1000000000000001', 'TID', 't'), 'qty'),
    (('SECKILL.SEND', A, B, PAST_64, 'TID', 't'), 'qty'),
    (('SECKILL.SEND', A, A, 1, 'TID', 't'), 'peer'),
    (('SECKILL.SEND', A, '', 1, 'TID', 't'), 'peer'),
    (('SECKILL.SEND', A, LONG, 1, 'TID', 't'), 'peer'),
    (('SECKILL.RECV',), ARITY),
    (('SECKILL.RECV', A), ARITY),
    (('SECKILL.RECV', A, B), ARITY),
    (('SECKILL.RECV', A, B, 1, 2), ARITY),
    (('SECKILL.RECV', A, B, PAST_64), 'sent_total'),
    (('SECKILL.RECV', A, B, '99999999999999999999999'), 'sent_total'),
    (('SECKILL.RECV', A, B, -1), 'sent_total'),
    (('SECKILL.RECV', A, B, 'x'), 'sent_total'),
    (('SECKILL.RECV', A, B, '1.5'), 'sent_total'),
    (('SECKILL.RECV', A, A, 1), 'peer'),
    (('SECKILL.RECV', A, '', 1), 'peer'),
    (('SECKILL.RECV', A, LONG, 1), 'peer'),
    # In range, but more than a key may hold (10^15 units).
    (('SECKILL.RECV', A, B, U64_MAX, 'ROUND', ROUND), 'sent_total'),
    (('SECKILL.RECV', A, B, '1000000000000000', 'ROUND', ROUND), 'sent_total'),
    (('SECKILL.RECV', A, B, 1), 'ROUND is required'),
    (('SECKILL.SEND', A, B, 1, 'TID', 't'), 'ROUND is required'),
    (('SECKILL.SEND', A, B, 1, 'TID', 't', 'ROUND', 'x' * 65), 'ROUND'),
]


def test_bad_arguments_change_nothing():
    env = Env(decodeResponses=True)
    c = env.getConnection()
    init(c, A, 10, 'SHARDS', 2)
    send(c, A, B, 3, 'first')
    recv(c, A, B, 2)
    for cmd, words in BAD:
        before = digest(c)
        try:
            c.execute_command(*cmd)
            env.assertTrue(False, message='%r was accepted' % (cmd,))
        except Exception as e:
            env.assertContains(words.lower(), str(e).lower(), message='%r: %s' % (cmd, e))
        env.assertEqual(digest(c), before, message='%r changed the data' % (cmd,))
    r = check(env, c, A)
    env.assertEqual((r['remaining'], r['sent'], r['received']), (9, 3, 2))
    # A u64 total within what the key may hold is accepted.
    env.assertEqual(recv(c, A, B, 1000), [998, 1000, 1007])


def _transfer_workload(c):
    """Two parts and a pool, reservations with holds, transfers both ways,
    a refused SEND, and a late RECV. Leaves no hold pending."""
    pool, p0, p1 = 'sale:{w.pool}', 'sale:{w.p0}', 'sale:{w.p1}'
    init(c, pool, 100, 'SHARDS', 4, 'LIMIT', 3)
    init(c, p0, 10, 'SHARDS', 3, 'LIMIT', 3, 'HOLD', 60000,
                      'STREAM', 'sale:{w.p0}:ev')
    init(c, p1, 0, 'SHARDS', 2, 'LIMIT', 3)
    rids = [reserve(c, p0, 'u%d' % i, 'QTY', 2)[1] for i in range(4)]
    send(c, pool, p0, 30, 'pool-p0-1')
    send(c, pool, p1, 25, 'pool-p1-1')
    recv(c, p0, pool, 30)
    recv(c, p1, pool, 25)
    c.execute_command('SECKILL.CONFIRM', p0, rids[0])
    c.execute_command('SECKILL.RELEASE', p0, rids[1])
    send(c, p0, p1, 7, 'p0-p1-1')
    send(c, p0, p1, 7, 'p0-p1-1')              # repeated
    send(c, p1, pool, 50, 'p1-pool-1', 'MIN', 40)  # refused: below MIN
    recv(c, p1, p0, 7)
    recv(c, p1, p0, 3)                          # late
    for i in range(4):
        reserve(c, p1, 'v%d' % i, 'QTY', 3)
    send(c, p1, pool, 5, 'p1-pool-2')            # not received yet: in flight
    c.execute_command('SECKILL.CONFIRM', p0, rids[2])
    c.execute_command('SECKILL.CONFIRM', p0, rids[3])
    return [pool, p0, p1]


def _states(c, keys):
    return {k: (info(c, k), digest_value(c, k)) for k in keys}


def _audit(env, c, keys):
    """The split-sale audit: every key, plus what is in flight, makes total."""
    reports = [check(env, c, k, depth=1) for k in keys]
    sent = {(k, p): s for k, r in zip(keys, reports) for p, s, _ in r.get('peers', [])}
    got = {(p, k): g for k, r in zip(keys, reports) for p, _, g in r.get('peers', [])}
    in_flight = sum(s - got.get(pair, 0) for pair, s in sent.items())
    held = sum(r['remaining'] + r['pending'] + r['confirmed'] for r in reports)
    env.assertEqual(held + in_flight, sum(r['total'] for r in reports), depth=1)
    env.assertEqual(in_flight, 5, depth=1)


def test_replica_holds_the_master_state():
    env = Env(useSlaves=True, decodeResponses=True)
    c = env.getConnection()
    keys = _transfer_workload(c)
    _audit(env, c, keys)
    replica = caught_up_replica(env, c)
    env.assertEqual(_states(replica, keys), _states(c, keys))
    env.assertEqual(digest(replica), digest(c))
    # Writes are refused on the replica.
    try:
        replica.execute_command('SECKILL.RECV', keys[0], keys[2], 5)
        env.assertTrue(False, message='a replica accepted RECV')
    except Exception as e:
        env.assertContains('read only', str(e).lower())
    # Nothing changed, nothing replicated: the replica stays equal.
    recv(c, keys[1], keys[0], 30)
    send(c, keys[1], keys[2], 7, 'p0-p1-1')
    assert_replica_agrees(env, c)


def test_rdb_reload():
    env = Env(decodeResponses=True)
    c = env.getConnection()
    keys = _transfer_workload(c)
    before = _states(c, keys)
    c.execute_command('DEBUG', 'RELOAD')
    env.assertEqual(_states(c, keys), before)
    _audit(env, c, keys)
    # The tids came back: a retry still takes nothing.
    env.assertEqual(send(c, keys[0], keys[1], 30, 'pool-p0-1')[0], 0)
    env.dumpAndReload(restart=True)
    c = env.getConnection()
    env.assertEqual(_states(c, keys), before)


def _aof(env, rewrite):
    c = env.getConnection()
    keys = _transfer_workload(c)
    before = _states(c, keys)
    restart_from_aof(env, rewrite)
    c = env.getConnection()
    env.assertEqual(_states(c, keys), before)
    _audit(env, c, keys)
    env.assertEqual(send(c, keys[2], keys[0], 5, 'p1-pool-2')[0], 0)
    env.assertEqual(recv(c, keys[0], keys[2], 5), [5, 5, info(c, keys[0])['remaining']])


def test_aof_replay_without_preamble():
    _aof(Env(useAof=True, useRdbPreamble=False, decodeResponses=True), rewrite=False)


def test_aof_rewrite_without_preamble():
    _aof(Env(useAof=True, useRdbPreamble=False, decodeResponses=True), rewrite=True)


def test_aof_rewrite_with_preamble():
    _aof(Env(useAof=True, useRdbPreamble=True, decodeResponses=True), rewrite=True)


def test_aof_rewrite_of_many_transfer_ids():
    """More transfer ids than one TRANSFERS effect of a rewrite carries."""
    env = Env(useAof=True, useRdbPreamble=False, decodeResponses=True)
    c = env.getConnection()
    init(c, A, 2000, 'SHARDS', 5)
    for i in range(600):
        send(c, A, B, 1, 'tid-%04d' % i)
    before = _states(c, [A])
    c.execute_command('BGREWRITEAOF')
    wait_aof_rewrite(c)
    env.stop()
    env.start()
    c = env.getConnection()
    env.assertEqual(_states(c, [A]), before)
    env.assertEqual(send(c, A, B, 1, 'tid-0599'), [0, 600, 1400])


def test_version_1_payload_loads():
    """tests/integration/fixtures/sale_v1.dump: DUMP of a sale made by the
    module at encoding version 1 (see fixtures/README.md)."""
    env = Env(decodeResponses=True)
    c = env.getConnection()
    with open(os.path.join(FIXTURES, 'sale_v1.json')) as f:
        want = json.load(f)
    with open(os.path.join(FIXTURES, 'sale_v1.dump'), 'rb') as f:
        payload = f.read()
    key = want['key']
    env.assertTrue(c.execute_command('RESTORE', key, 0, payload))
    env.assertEqual(info(c, key), want['info'])
    for user, rid in want['ids'].items():
        env.assertEqual(get(c, key, rid), want['get'][user], message=user)
    # Re-saved as the current version, it reloads the same and sells on.
    # It was made before split sales declared their peers: it is a plain
    # sale now, and moves no stock.
    d = digest_value(c, key)
    c.execute_command('DEBUG', 'RELOAD')
    env.assertEqual(digest_value(c, key), d)
    env.expect('SECKILL.SEND', key, B, 10, 'TID', 'from-v1', 'ROUND', ROUND).error().contains('not a part of a split sale')
    env.assertEqual(digest_value(c, key), d)
    env.assertEqual(c.execute_command('SECKILL.RELEASE', key, want['ids']['alice']), ['RELEASED', want['info']['remaining'] + 2])
    check(env, c, key)


def test_info_seckill_counters():
    env = Env(decodeResponses=True)
    c = env.getConnection()
    init(c, A, 10)
    s0 = seckill_stats(c)
    send(c, A, B, 4, 't1')
    send(c, A, B, 4, 't1')
    send(c, A, B, 40, 't2', 'MIN', 7)
    recv(c, A, B, 3)
    recv(c, A, B, 3)
    s1 = seckill_stats(c)
    delta = {k: s1[k] - s0.get(k, 0) for k in ('send_sent', 'send_units', 'send_repeated', 'send_below_min',
                                              'recv_credited', 'recv_units', 'recv_nothing')}
    env.assertEqual(delta, {'send_sent': 1, 'send_units': 4, 'send_repeated': 1, 'send_below_min': 1,
                            'recv_credited': 1, 'recv_units': 3, 'recv_nothing': 1})


def test_command_info():
    env = Env(decodeResponses=True)
    raw = RawConn(env.getConnection())
    key = b'$%d\r\n%s\r\n' % (len(A), A.encode())
    # The peer is not a key of the call: it usually lives on another node.
    env.assertEqual(raw.call('COMMAND', 'GETKEYS', 'SECKILL.SEND', A, B, 1, 'TID', 't'), b'*1\r\n' + key)
    env.assertEqual(raw.call('COMMAND', 'GETKEYS', 'SECKILL.RECV', A, B, 1, 'ROUND', 'r'), b'*1\r\n' + key)
    env.assertContains(b'denyoom', raw.call('COMMAND', 'INFO', 'SECKILL.SEND'))
    env.assertNotContains(b'denyoom', raw.call('COMMAND', 'INFO', 'SECKILL.RECV'))
    raw.close()


def test_stock_edge_events():
    """Applications keep a local sold-out flag from keyspace events: a SEND
    that empties the key and a RECV that refills it say so."""
    env = Env(decodeResponses=True)
    c = env.getConnection()
    c.execute_command('CONFIG', 'SET', 'notify-keyspace-events', 'KEA')
    init(c, A, 3)
    ps = c.pubsub()
    ps.subscribe('__keyspace@0__:' + A)
    ps.get_message(timeout=1)
    send(c, A, B, 3, 't1')
    env.assertEqual(events_from(ps, timeout=0.5), ['seckill.soldout'])
    send(c, A, B, 3, 't2')                      # nothing taken: no event
    recv(c, A, B, 1)
    env.assertEqual(events_from(ps, timeout=0.5), ['seckill.restock'])
    ps.close()


def test_no_change_replicates_nothing():
    env = Env(useSlaves=True, decodeResponses=True)
    c = env.getConnection()
    init(c, A, 5)
    send(c, A, B, 2, 't1')
    recv(c, A, B, 1)
    replica_caught_up(env, c)
    offset = c.info('replication')['master_repl_offset']
    send(c, A, B, 2, 't1')                      # repeated tid
    send(c, A, B, 9, 't2', 'MIN', 9)            # below MIN
    recv(c, A, B, 1)                            # repeated total
    recv(c, A, B, 0)                            # late total
    env.assertEqual(c.info('replication')['master_repl_offset'], offset)
    assert_replica_agrees(env, c)


def test_memory_pressure():
    """Over maxmemory SEND is refused (a transfer can wait to start); RECV
    still credits with the module, so units in flight always land. The
    library has no allow-oom function (docs/managed-redis.md, "Settling at
    maxmemory"): its RECV is refused too, changes nothing, and credits once
    memory is back."""
    env = Env(decodeResponses=True)
    c = env.getConnection()
    init(c, A, 5)
    init(c, B, 0)
    env.assertEqual(send(c, A, B, 2, 't1'), [2, 2, 3])
    c.execute_command('CONFIG', 'SET', 'maxmemory-policy', 'noeviction')
    c.execute_command('CONFIG', 'SET', 'maxmemory', 1)
    try:
        env.expect('SECKILL.SEND', A, B, 1, 'TID', 't2').error().contains('maxmemory')
        if FUNCTIONS:
            before = digest(c)
            try:
                recv(c, B, A, 2)
                env.assertTrue(False, message='the library ran RECV over maxmemory')
            except redis.exceptions.OutOfMemoryError:
                pass
            env.assertEqual(digest(c), before)
        else:
            env.assertEqual(recv(c, B, A, 2), [2, 2, 2])
    finally:
        c.execute_command('CONFIG', 'SET', 'maxmemory', 0)
    if FUNCTIONS:
        env.assertEqual(recv(c, B, A, 2), [2, 2, 2])
    env.assertEqual(send(c, A, B, 1, 't2'), [1, 3, 2])
    check(env, c, A)
    check(env, c, B)


def test_only_parts_of_one_round_move_stock():
    """RECV believes the sent_total it is given, so who may move stock is
    bounded by the sale itself: a plain sale refuses SEND and RECV, a part
    accepts them only from its declared peers and only in its own round.
    Each refusal changes nothing (the digest stays)."""
    env = Env(decodeResponses=True)
    c = env.getConnection()
    plain = 'sale:{t.plain}'
    c.execute_command('SECKILL.INIT', plain, 10)
    init(c, A, 10)
    init(c, B, 0)
    d = digest(c)
    refusals = [
        # The reviewer's mint: RECV on a plain sale from any peer.
        (('SECKILL.RECV', plain, 'anypeer', '999999999999990', 'ROUND', ROUND), 'not a part of a split sale'),
        (('SECKILL.SEND', plain, B, 1, 'TID', 't', 'ROUND', ROUND), 'not a part of a split sale'),
        (('SECKILL.RECV', A, 'sale:{t.stranger}', 5, 'ROUND', ROUND), 'declared peers'),
        (('SECKILL.SEND', A, 'sale:{t.stranger}', 5, 'TID', 't', 'ROUND', ROUND), 'declared peers'),
        (('SECKILL.RECV', B, A, 5, 'ROUND', 'r0'), 'another round'),
        (('SECKILL.SEND', A, B, 5, 'TID', 't', 'ROUND', 'r0'), 'another round'),
    ]
    for cmd, text in refusals:
        env.expect(*cmd).error().contains(text)
        env.assertEqual(digest(c), d, message=cmd)
    env.assertEqual(info(c, plain)['remaining'], 10)
    if MODULE:  # INFO seckill is the module's
        env.assertEqual(seckill_stats(c)['transfers_refused'], len(refusals))
    # A stale round is a distinct error word a client can act on.
    try:
        recv(c, B, A, 5, round='r0')
        env.assertTrue(False, message='a stale round was accepted')
    except Exception as e:  # redis-py keeps unknown error words in the text
        env.assertTrue(str(e).startswith('STALEROUND'), message=str(e))


def test_replace_starts_a_round_that_old_totals_cannot_reach():
    """The reviewer's stale-object case at the module level: after a REPLACE
    round, the previous round's cumulative totals (a cached audit, a late
    repair) credit nothing; the new round's own transfers work."""
    env = Env(decodeResponses=True)
    c = env.getConnection()
    init(c, A, 300)
    init(c, B, 0)
    env.assertEqual(send(c, A, B, 100, 'r1-t1'), [100, 100, 200])
    env.assertEqual(recv(c, B, A, 100), [100, 100, 100])
    # A new round: the counters start again from zero.
    init(c, A, 300, 'REPLACE', round='r2')
    init(c, B, 0, 'REPLACE', round='r2')
    d = digest(c)
    env.expect('SECKILL.RECV', B, A, 100, 'ROUND', ROUND).error().contains('another round')
    env.assertEqual(digest(c), d)
    env.assertEqual(info(c, B)['remaining'], 0)
    env.assertEqual(send(c, A, B, 50, 'r2-t1', round='r2'), [50, 50, 250])
    env.assertEqual(recv(c, B, A, 50, round='r2'), [50, 50, 50])
    total = sum(info(c, k)['remaining'] for k in (A, B))
    env.assertEqual(total, 300)
    # The round and the declared peers survive a reload.
    c.execute_command('DEBUG', 'RELOAD')
    env.assertEqual(info(c, A)['round'], 'r2')
    env.expect('SECKILL.RECV', B, A, 100, 'ROUND', ROUND).error().contains('another round')



def test_a_part_recreated_under_the_old_round_is_credited_nothing_again():
    """Issue 23, finding 8: B received 40 units from A; B is deleted and
    INITed again in the same round (an accident: a creator finishing an
    interrupted create, a recover). A's counter still says 40 sent to B;
    B's new incarnation says 0 received. The repair the protocol makes
    (RECV of A's total, TO the incarnation A counted it for) credits
    nothing, and neither does a retried RECV of the transfer: both are
    refused, changing nothing, and A sends no more to the new B. A REPLACE
    round moves stock again. The incarnations survive a reload and reach
    the replica."""
    env = Env(useSlaves=True, decodeResponses=True)
    c = env.getConnection()
    init(c, A, 100)
    init(c, B, 10)
    old_b = incarnation(c, B)
    env.assertEqual(send(c, A, B, 40, 'a-b-1'), [40, 40, 60])
    env.assertEqual(recv(c, B, A, 40), [40, 40, 50])
    env.assertEqual(info(c, A)['sent_to'], [[B, old_b]])
    c.execute_command('DEL', B)
    init(c, B, 10)
    new_b = incarnation(c, B)
    env.assertNotEqual(new_b, old_b)
    # What a repair reads: A's total and the incarnation it was counted for.
    a = info(c, A)
    sent_b = [p[1] for p in a['peers'] if p[0] == B][0]
    to = dict((p, i) for p, i in a['sent_to'])[B]
    env.assertEqual((sent_b, to), (40, old_b))
    d = digest(c)
    env.expect('SECKILL.RECV', B, A, sent_b, 'ROUND', ROUND, 'TO', to).error().contains('STALEPEER')
    env.expect('SECKILL.RECV', B, A, 40, 'TO', old_b, 'ROUND', ROUND).error().contains('another incarnation')
    # A SEND to the new B is refused too: A's counter is the old B's.
    env.expect('SECKILL.SEND', A, B, 5, 'TID', 'a-b-2', 'ROUND', ROUND, 'TO', new_b).error().contains('STALEPEER')
    env.assertEqual(digest(c), d)
    b = check(env, c, B)
    env.assertEqual((b['remaining'], b['received']), (10, 0))
    env.assertEqual(check(env, c, A)['remaining'], 60)
    # The incarnations are kept: after a reload the same answers.
    c.execute_command('DEBUG', 'RELOAD')
    env.assertEqual(info(c, A)['sent_to'], [[B, old_b]])
    env.expect('SECKILL.RECV', B, A, 40, 'ROUND', ROUND, 'TO', old_b).error().contains('STALEPEER')
    env.assertEqual(info(c, B)['remaining'], 10)
    assert_replica_agrees(env, c)
    replica = caught_up_replica(env, c)
    env.assertEqual(as_list(replica.execute_command('SECKILL.INFO', A)), as_list(c.execute_command('SECKILL.INFO', A)))
    # A new round moves stock between the two again.
    init(c, A, 100, 'REPLACE', round='r2')
    init(c, B, 10, 'REPLACE', round='r2')
    env.assertEqual(send(c, A, B, 5, 'r2-t1', round='r2'), [5, 5, 95])
    env.assertEqual(recv(c, B, A, 5, round='r2'), [5, 5, 15])

def test_peers_are_bounded():
    """At most 1024 declared peers: every report and check stays bounded."""
    env = Env(decodeResponses=True)
    c = env.getConnection()
    peers = ['sale:{t.p%d}' % i for i in range(1025)]
    env.expect('SECKILL.INIT', A, 10, 'SPLIT', ROUND, 1025, *peers).error().contains('SPLIT peer count')
    env.assertEqual(c.exists(A), 0)
    env.assertEqual(c.execute_command('SECKILL.INIT', A, 10, 'SPLIT', ROUND, 1024, *peers[:1024]), 'OK')
    r = info(c, A)
    env.assertEqual((len(r['peers']), r['sent'], r['received']), (1024, 0, 0))
    env.expect('SECKILL.INIT', B, 10, 'SPLIT', ROUND, 2, A, A).error().contains('twice')
    env.expect('SECKILL.INIT', B, 10, 'SPLIT', ROUND, 1, B).error().contains('differ')


def test_a_draw_part_that_has_begun_drawing_moves_no_stock():
    """Once a part of a split draw has drawn, SEND from it and a RECV that
    would credit it are refused with a clear ERR, changing nothing; a
    repeated tid and a RECV that credits nothing are still answered. A part
    that has not drawn yet still moves stock."""
    env = Env(decodeResponses=True)
    c = env.getConnection()
    end = server_ms(c) + 300
    env.assertEqual(init(c, A, 10, 'END', end, 'DRAW'), 'OK')
    env.assertEqual(init(c, B, 0, 'END', end, 'DRAW'), 'OK')
    env.assertEqual(send(c, A, B, 4, 'before'), [4, 4, 6])
    env.assertEqual(recv(c, B, A, 4), [4, 4, 4])
    c.execute_command('SECKILL.ENTER', A, 'u1')
    while server_ms(c) < end:
        time.sleep(0.02)
    c.execute_command('SECKILL.DRAW', A)
    before = digest(c)
    for args in (('SECKILL.SEND', A, B, 1, 'TID', 'after', 'ROUND', ROUND),
                 ('SECKILL.RECV', A, B, 1, 'ROUND', ROUND)):
        env.expect(*args).error().contains('has begun drawing')
        env.assertEqual(digest(c), before)
    # What moves nothing is still answered.
    env.assertEqual(send(c, A, B, 4, 'before'), [0, 4, 5])
    env.assertEqual(recv(c, A, B, 0), [0, 0, 5])
    # B has not drawn: it may still send, but A takes none of it.
    env.assertEqual(send(c, B, A, 1, 'b1'), [1, 1, 3])
    env.expect('SECKILL.RECV', A, B, 1, 'ROUND', ROUND).error().contains('has begun drawing')
    for k in (A, B):
        r = info(c, k)
        env.assertEqual(r['remaining'] + r['pending'] + r['confirmed'], r['total'] + r['received'] - r['sent'])
        env.assertEqual(r['invariant'], 'ok')
