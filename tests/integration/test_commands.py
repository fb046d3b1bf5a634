"""Every SECKILL command and every status word of docs/commands.md, in a plain server."""

import time

import redis
from RLTest import Env

from seckill_helpers import (FUNCTIONS, GENERATED_ID, GET_FIELDS, ORDER_FIELDS, REPORT_FIELDS, RawConn, as_dict,
                             assert_replica_agrees, check_invariant, conn_address, digest, digest_value, events_from,
                             get, info, is_valkey_8_1, pairs, reconcile, reserve, seckill_stats, server_ms,
                             wait_for)
from seckill_helpers import MODULE, SALE_TYPE


def _env():
    env = Env(decodeResponses=True)
    env.skipOnCluster()
    return env, env.getConnection()


# --------------------------------------------------------------------- INIT

def test_init_ok_exists_replace():
    env, c = _env()
    env.assertIsNone(c.execute_command('SECKILL.INFO', 'sale:{1}'))
    env.assertEqual(c.execute_command('SECKILL.INIT', 'sale:{1}', 10, 'SHARDS', 2, 'LIMIT', 3), 'OK')
    r = check_invariant(env, c, 'sale:{1}')
    env.assertEqual([r['total'], r['remaining'], r['pending'], r['confirmed'], r['released'], r['expired'],
                     r['buyers'], r['reservations'], r['shards']], [10, 10, 0, 0, 0, 0, 0, 0, [5, 5]])

    st, rid, rem = reserve(c, 'sale:{1}', 'alice', 'QTY', 3)
    env.assertEqual((st, rem), ('RESERVED', 7))
    before = digest_value(c, 'sale:{1}')

    # Without REPLACE: idempotent warm-up, nothing changes, whatever the options.
    env.assertEqual(c.execute_command('SECKILL.INIT', 'sale:{1}', 10, 'SHARDS', 2, 'LIMIT', 3), 'EXISTS')
    env.assertEqual(c.execute_command('SECKILL.INIT', 'sale:{1}', 99, 'SHARDS', 7), 'EXISTS')
    env.assertEqual(digest_value(c, 'sale:{1}'), before)
    r = check_invariant(env, c, 'sale:{1}')
    env.assertEqual((r['total'], r['remaining'], r['pending'], r['buyers'], r['reservations'], len(r['shards'])),
                    (10, 7, 3, 1, 1, 2))

    # REPLACE: a new round; stock, buyers and reservations reset.
    env.assertEqual(c.execute_command('SECKILL.INIT', 'sale:{1}', 4, 'SHARDS', 4, 'REPLACE'), 'OK')
    r = check_invariant(env, c, 'sale:{1}')
    env.assertEqual([r['total'], r['remaining'], r['pending'], r['confirmed'], r['released'], r['expired'],
                     r['buyers'], r['reservations'], r['shards']], [4, 4, 0, 0, 0, 0, 0, 0, [1, 1, 1, 1]])
    env.assertIsNone(c.execute_command('SECKILL.GET', 'sale:{1}', rid))
    env.assertEqual(c.execute_command('SECKILL.RELEASE', 'sale:{1}', rid), ['NOT_FOUND', 4])
    env.assertEqual(c.execute_command('SECKILL.CONFIRM', 'sale:{1}', rid), ['NOT_FOUND', 4])
    # alice's quota is back (LIMIT is now the default 1).
    st, rid2, rem = reserve(c, 'sale:{1}', 'alice')
    env.assertEqual((st, rem), ('RESERVED', 3))
    env.assertNotEqual(rid2, rid)

    # REPLACE on a missing key creates it.
    env.assertEqual(c.execute_command('SECKILL.INIT', 'sale:{2}', 1, 'REPLACE'), 'OK')
    env.assertEqual(info(c, 'sale:{2}')['total'], 1)

    # total 0: a sale that starts sold out.
    env.assertEqual(c.execute_command('SECKILL.INIT', 'zero', 0), 'OK')
    env.assertEqual(reserve(c, 'zero', 'u'), ['SOLD_OUT', None, 0])
    check_invariant(env, c, 'zero')
    env.assertEqual(c.execute_command('TYPE', 'zero'), SALE_TYPE)
    assert_replica_agrees(env, c)


def test_init_ttl():
    env, c = _env()
    env.assertEqual(c.execute_command('SECKILL.INIT', 'k', 5, 'TTL', 100), 'OK')
    ttl = c.execute_command('PTTL', 'k')
    env.assertGreater(ttl, 98000)
    env.assertLessEqual(ttl, 100000)
    # The replicated form is absolute: EXPIRETIME is about now + 100 s.
    at = c.execute_command('PEXPIRETIME', 'k')
    env.assertAlmostEqual(at, server_ms(c) + 100000, 2000)

    env.assertEqual(c.execute_command('SECKILL.INIT', 'nottl', 5), 'OK')
    env.assertEqual(c.execute_command('TTL', 'nottl'), -1)
    # EXISTS leaves the key as it was, TTL included.
    env.assertEqual(c.execute_command('SECKILL.INIT', 'nottl', 5, 'TTL', 50), 'EXISTS')
    env.assertEqual(c.execute_command('TTL', 'nottl'), -1)
    # REPLACE with a TTL sets it.
    env.assertEqual(c.execute_command('SECKILL.INIT', 'nottl', 5, 'TTL', 50, 'REPLACE'), 'OK')
    ttl = c.execute_command('TTL', 'nottl')
    env.assertTrue(48 <= ttl <= 50, message='ttl %r' % ttl)

    # The key really goes away.
    env.assertEqual(c.execute_command('SECKILL.INIT', 'short', 5, 'TTL', 1), 'OK')
    env.assertTrue(wait_for(lambda: c.execute_command('EXISTS', 'short') == 0, timeout=3.0))
    env.assertEqual(reserve(c, 'short', 'u'), ['NO_SALE', None, 0])


# ------------------------------------------------------------------ RESERVE

def test_reserve_statuses():
    env, c = _env()
    # NO_SALE on a missing key.
    env.assertEqual(reserve(c, 'nokey', 'u1'), ['NO_SALE', None, 0])
    env.assertEqual(c.execute_command('EXISTS', 'nokey'), 0)

    env.assertEqual(c.execute_command('SECKILL.INIT', 's', 3), 'OK')
    st, rid, rem = reserve(c, 's', 'u1')
    env.assertEqual((st, rem), ('RESERVED', 2))
    env.assertTrue(GENERATED_ID.match(rid), message=rid)
    check_invariant(env, c, 's')

    # LIMIT (default 1): the user's latest live reservation id comes back.
    env.assertEqual(reserve(c, 's', 'u1'), ['LIMIT', rid, 2])

    # REQID becomes the reservation id; a retry is DUPLICATE with that id,
    # whoever sends it, and changes nothing.
    env.assertEqual(reserve(c, 's', 'u2', 'REQID', 'order-42'), ['RESERVED', 'order-42', 1])
    d = digest_value(c, 's')
    env.assertEqual(reserve(c, 's', 'u2', 'REQID', 'order-42'), ['DUPLICATE', 'order-42', 1])
    env.assertEqual(reserve(c, 's', 'u3', 'REQID', 'order-42'), ['DUPLICATE', 'order-42', 1])
    env.assertEqual(digest_value(c, 's'), d)

    st, rid3, rem = reserve(c, 's', 'u3')
    env.assertEqual((st, rem), ('RESERVED', 0))
    env.assertNotEqual(rid3, rid)
    # SOLD_OUT
    env.assertEqual(reserve(c, 's', 'u4'), ['SOLD_OUT', None, 0])
    # DUPLICATE is checked before stock.
    env.assertEqual(reserve(c, 's', 'u2', 'REQID', 'order-42'), ['DUPLICATE', 'order-42', 0])
    # LIMIT is checked before stock.
    env.assertEqual(reserve(c, 's', 'u1'), ['LIMIT', rid, 0])
    r = check_invariant(env, c, 's')
    env.assertEqual((r['pending'], r['buyers'], r['reservations']), (3, 3, 3))
    # A generated id never collides with a REQID: ids are unique.
    ids = {rid, 'order-42', rid3}
    env.assertEqual(len(ids), 3)

    # A REQID written like a generated id is a client's id like any other.
    env.assertOk(c.execute_command('SECKILL.INIT', 'g', 10, 'LIMIT', 10))
    st, g0, _ = reserve(c, 'g', 'u')
    tag = g0.split('-')[0]
    env.assertTrue(g0.startswith(tag + '-0-'), message=g0)
    env.assertEqual(reserve(c, 'g', 'u', 'REQID', tag + '-1')[0:2], ['RESERVED', tag + '-1'])
    st, g2, _ = reserve(c, 'g', 'u')
    env.assertEqual(st, 'RESERVED')
    env.assertNotEqual(g2, tag + '-1')
    env.assertTrue(GENERATED_ID.match(g2), message=g2)
    env.assertEqual(reserve(c, 'g', 'u', 'REQID', g0)[0:2], ['DUPLICATE', g0])
    env.assertEqual(info(c, 'g')['reservations'], 3)

    # Lower-case option names work.
    env.assertEqual(c.execute_command('SECKILL.INIT', 's2', 5, 'limit', 2), 'OK')
    env.assertEqual(reserve(c, 's2', 'u', 'qty', 2, 'reqid', 'x')[0:2], ['RESERVED', 'x'])
    assert_replica_agrees(env, c)


def test_reserve_window_uses_server_clock():
    env, c = _env()
    now = server_ms(c)
    # START far in the future.
    env.assertOk(c.execute_command('SECKILL.INIT', 'future', 5, 'START', now + 3600 * 1000))
    env.assertEqual(reserve(c, 'future', 'u'), ['NOT_STARTED', None, 5])
    # END in the past.
    env.assertOk(c.execute_command('SECKILL.INIT', 'past', 5, 'START', 0, 'END', now - 1000))
    env.assertEqual(reserve(c, 'past', 'u'), ['ENDED', None, 5])
    env.assertOk(c.execute_command('SECKILL.INIT', 'past2', 5, 'END', now - 1))
    env.assertEqual(reserve(c, 'past2', 'u'), ['ENDED', None, 5])
    # Open window around now.
    env.assertOk(c.execute_command('SECKILL.INIT', 'open', 5, 'START', now - 1000, 'END', now + 3600 * 1000))
    env.assertEqual(reserve(c, 'open', 'u')[0], 'RESERVED')
    for k in ('future', 'past', 'past2'):
        r = check_invariant(env, c, k)
        env.assertEqual((r['remaining'], r['reservations']), (5, 0))

    # A window that opens shortly: NOT_STARTED, then RESERVED once the server's clock passes START.
    now = server_ms(c)
    env.assertOk(c.execute_command('SECKILL.INIT', 'soon', 5, 'START', now + 300, 'END', now + 600))
    env.assertEqual(reserve(c, 'soon', 'u')[0], 'NOT_STARTED')
    env.assertTrue(wait_for(lambda: server_ms(c) >= now + 320, timeout=2))
    env.assertEqual(reserve(c, 'soon', 'u')[0], 'RESERVED')
    env.assertTrue(wait_for(lambda: server_ms(c) >= now + 620, timeout=2))
    env.assertEqual(reserve(c, 'soon', 'v')[0], 'ENDED')

    # Order of checks: NOT_STARTED comes before LIMIT and SOLD_OUT (total 0).
    env.assertOk(c.execute_command('SECKILL.INIT', 'z', 0, 'START', server_ms(c) + 3600 * 1000))
    env.assertEqual(reserve(c, 'z', 'u'), ['NOT_STARTED', None, 0])
    # DUPLICATE comes before the window: adopt an order into a sale that has
    # not started (RECONCILE APPLY), then retry its REQID.
    env.assertOk(c.execute_command('SECKILL.INIT', 'w', 3, 'START', server_ms(c) + 3600 * 1000))
    rep = reconcile(c, 'w', 'ORDERS', 1, 'ord-1', 'u', 1, 'APPLY')
    env.assertEqual(rep['orders_unknown_ids'], ['ord-1'])
    env.assertEqual(reserve(c, 'w', 'u', 'REQID', 'ord-1'), ['DUPLICATE', 'ord-1', 2])
    env.assertEqual(reserve(c, 'w', 'u', 'REQID', 'ord-2'), ['NOT_STARTED', None, 2])


def test_qty_and_limit():
    env, c = _env()
    env.assertOk(c.execute_command('SECKILL.INIT', 's', 10, 'LIMIT', 3, 'SHARDS', 3))
    st, a, rem = reserve(c, 's', 'u', 'QTY', 2)
    env.assertEqual((st, rem), ('RESERVED', 8))
    # 2 + 2 > 3
    env.assertEqual(reserve(c, 's', 'u', 'QTY', 2), ['LIMIT', a, 8])
    st, b, rem = reserve(c, 's', 'u', 'QTY', 1)
    env.assertEqual((st, rem), ('RESERVED', 7))
    # The latest live reservation is reported.
    env.assertEqual(reserve(c, 's', 'u', 'QTY', 1), ['LIMIT', b, 7])
    # QTY above LIMIT is a bad argument.
    env.expect('SECKILL.RESERVE', 's', 'other', 'QTY', 4).error().contains('QTY')
    # Releasing gives the quota back.
    env.assertEqual(c.execute_command('SECKILL.RELEASE', 's', b), ['RELEASED', 8])
    env.assertEqual(reserve(c, 's', 'u', 'QTY', 1, 'REQID', 'c')[0:2], ['RESERVED', 'c'])
    env.assertEqual(reserve(c, 's', 'u', 'QTY', 1), ['LIMIT', 'c', 7])
    # A confirmed reservation still counts against the limit.
    env.assertEqual(c.execute_command('SECKILL.CONFIRM', 's', a), ['CONFIRMED', 7])
    env.assertEqual(reserve(c, 's', 'u', 'QTY', 1), ['LIMIT', 'c', 7])
    r = check_invariant(env, c, 's')
    env.assertEqual((r['pending'], r['confirmed'], r['released'], r['buyers']), (1, 2, 1, 1))
    env.assertEqual(get(c, 's', a)['qty'], 2)

    # SOLD_OUT when remaining < QTY, even though remaining > 0.
    env.assertOk(c.execute_command('SECKILL.INIT', 't', 3, 'LIMIT', 5, 'SHARDS', 2))
    env.assertEqual(reserve(c, 't', 'x', 'QTY', 2)[0], 'RESERVED')
    env.assertEqual(reserve(c, 't', 'y', 'QTY', 2), ['SOLD_OUT', None, 1])
    env.assertEqual(reserve(c, 't', 'y', 'QTY', 1)[0::2], ['RESERVED', 0])
    check_invariant(env, c, 't')
    assert_replica_agrees(env, c)


def test_shards_borrow_no_false_sold_out():
    env, c = _env()
    env.assertOk(c.execute_command('SECKILL.INIT', 's', 8, 'SHARDS', 8))
    env.assertEqual(info(c, 's')['shards'], [1] * 8)
    rids = []
    for i in range(8):
        st, rid, rem = reserve(c, 's', 'user-%d' % i)
        env.assertEqual((st, rem), ('RESERVED', 7 - i))
        rids.append(rid)
        check_invariant(env, c, 's')
    env.assertEqual(reserve(c, 's', 'user-x'), ['SOLD_OUT', None, 0])
    env.assertEqual(info(c, 's')['shards'], [0] * 8)
    # Stock goes back to the bucket it came from.
    for rid in rids:
        env.assertEqual(c.execute_command('SECKILL.RELEASE', 's', rid)[0], 'RELEASED')
    env.assertEqual(info(c, 's')['shards'], [1] * 8)

    # One user taking the whole stock borrows from every bucket.
    env.assertOk(c.execute_command('SECKILL.INIT', 'b', 10, 'SHARDS', 4, 'LIMIT', 10))
    env.assertEqual(info(c, 'b')['shards'], [3, 3, 2, 2])
    st, big, rem = reserve(c, 'b', 'whale', 'QTY', 10)
    env.assertEqual((st, rem), ('RESERVED', 0))
    env.assertEqual(info(c, 'b')['shards'], [0, 0, 0, 0])
    check_invariant(env, c, 'b')
    env.assertEqual(c.execute_command('SECKILL.RELEASE', 'b', big), ['RELEASED', 10])
    env.assertEqual(info(c, 'b')['shards'], [3, 3, 2, 2])

    # Many shards, few units: still no false sold-out.
    env.assertOk(c.execute_command('SECKILL.INIT', 'm', 3, 'SHARDS', 1024))
    r = info(c, 'm')
    env.assertEqual((len(r['shards']), sum(r['shards'])), (1024, 3))
    for i in range(3):
        env.assertEqual(reserve(c, 'm', 'u%d' % i)[0], 'RESERVED')
    env.assertEqual(reserve(c, 'm', 'u9')[0], 'SOLD_OUT')
    check_invariant(env, c, 'm')
    assert_replica_agrees(env, c)


# ---------------------------------------------------------- RELEASE / CONFIRM

def test_release_statuses():
    env, c = _env()
    env.assertEqual(c.execute_command('SECKILL.RELEASE', 'missing', 'r'), ['NOT_FOUND', 0])
    env.assertOk(c.execute_command('SECKILL.INIT', 's', 5, 'LIMIT', 2))
    st, rid, rem = reserve(c, 's', 'u', 'QTY', 2)
    env.assertEqual(rem, 3)
    env.assertEqual(c.execute_command('SECKILL.RELEASE', 's', rid), ['RELEASED', 5])
    env.assertEqual(get(c, 's', rid)['state'], 'released')
    d = digest_value(c, 's')
    env.assertEqual(c.execute_command('SECKILL.RELEASE', 's', rid), ['ALREADY_RELEASED', 5])
    env.assertEqual(c.execute_command('SECKILL.RELEASE', 's', 'nope'), ['NOT_FOUND', 5])
    env.assertEqual(digest_value(c, 's'), d)
    # Too late: confirmed first.
    st, rid2, rem = reserve(c, 's', 'u')
    env.assertEqual(c.execute_command('SECKILL.CONFIRM', 's', rid2), ['CONFIRMED', 4])
    env.assertEqual(c.execute_command('SECKILL.RELEASE', 's', rid2), ['CONFIRMED', 4])
    env.assertEqual(get(c, 's', rid2)['state'], 'confirmed')
    r = check_invariant(env, c, 's')
    env.assertEqual((r['remaining'], r['pending'], r['confirmed'], r['released'], r['expired']), (4, 0, 1, 2, 0))
    assert_replica_agrees(env, c)


def test_confirm_statuses():
    env, c = _env()
    env.assertEqual(c.execute_command('SECKILL.CONFIRM', 'missing', 'r'), ['NOT_FOUND', 0])
    env.assertOk(c.execute_command('SECKILL.INIT', 's', 5, 'LIMIT', 5))
    st, rid, rem = reserve(c, 's', 'u', 'QTY', 3)
    env.assertEqual(c.execute_command('SECKILL.CONFIRM', 's', rid), ['CONFIRMED', 2])
    d = digest_value(c, 's')
    env.assertEqual(c.execute_command('SECKILL.CONFIRM', 's', rid), ['ALREADY_CONFIRMED', 2])
    env.assertEqual(c.execute_command('SECKILL.CONFIRM', 's', 'nope'), ['NOT_FOUND', 2])
    env.assertEqual(digest_value(c, 's'), d)
    # Too late: released first.
    st, rid2, rem = reserve(c, 's', 'u', 'QTY', 1)
    env.assertEqual(c.execute_command('SECKILL.RELEASE', 's', rid2), ['RELEASED', 2])
    env.assertEqual(c.execute_command('SECKILL.CONFIRM', 's', rid2), ['RELEASED', 2])
    r = check_invariant(env, c, 's')
    env.assertEqual((r['remaining'], r['pending'], r['confirmed'], r['released']), (2, 0, 3, 1))
    assert_replica_agrees(env, c)


def test_generated_ids_do_not_predict_each_other():
    """Issue 23, finding 7: a generated id is `<tag>-<seq>-<mac>`, the mac
    keyed by a secret the sale drew at INIT, so from one's own id neither a
    neighbour's id nor the seq-only form can be guessed: GET answers nil,
    RELEASE and CONFIRM NOT_FOUND, and nothing changes. REQIDs stay as
    given, whatever they look like. The ids survive a reload and reach the
    replica as they are."""
    env, c = _env()
    env.assertOk(c.execute_command('SECKILL.INIT', 'ids', 10, 'LIMIT', 10))
    mine = [reserve(c, 'ids', 'u%d' % i)[1] for i in range(4)]
    for rid in mine:
        env.assertTrue(GENERATED_ID.match(rid), message=rid)
        env.assertLessEqual(len(rid), 45)
    tag = mine[0].split('-')[0]
    env.assertEqual([r.split('-')[1] for r in mine], ['0', '1', '2', '3'])
    env.assertEqual(len({r.split('-')[2] for r in mine}), 4, message='every mac differs')
    # The guesses a buyer holding mine[1] could make about the others.
    mac = mine[1].split('-')[2]
    flipped = mine[0][:-1] + ('0' if mine[0][-1] != '0' else '1')
    guesses = ['%s-%d' % (tag, n) for n in range(6)] + ['%s-%d-%s' % (tag, n, mac) for n in (0, 2, 3, 4)] \
        + [flipped, mine[0].upper(), mine[0] + '-1', mine[0][:-1], '%s-00-%s' % (tag, mine[0].split('-')[2])]
    d = digest_value(c, 'ids')
    for g in guesses:
        env.assertIsNone(c.execute_command('SECKILL.GET', 'ids', g), message=g)
        env.assertEqual(c.execute_command('SECKILL.RELEASE', 'ids', g), ['NOT_FOUND', 6], message=g)
        env.assertEqual(c.execute_command('SECKILL.CONFIRM', 'ids', g), ['NOT_FOUND', 6], message=g)
    env.assertEqual(digest_value(c, 'ids'), d)
    env.assertEqual(check_invariant(env, c, 'ids')['pending'], 4)
    # Each buyer's own id still works.
    for i, rid in enumerate(mine):
        env.assertEqual(get(c, 'ids', rid)['user'], 'u%d' % i)
    # REQIDs are untouched, the seq-only form included (a plain client id now).
    for reqid in ('order-7', '%s-4' % tag, '%s-9-%s' % (tag, mac)):
        env.assertEqual(reserve(c, 'ids', 'v', 'REQID', reqid)[:2], ['RESERVED', reqid])
        env.assertEqual(get(c, 'ids', reqid)['user'], 'v')
    # A REQID equal to an issued id is that reservation's DUPLICATE.
    env.assertEqual(reserve(c, 'ids', 'v', 'REQID', mine[2])[:2], ['DUPLICATE', mine[2]])
    nxt = reserve(c, 'ids', 'w')[1]
    env.assertTrue(GENERATED_ID.match(nxt) and nxt.split('-')[1] == '7', message=nxt)
    # The key is kept: after a reload the same ids answer, guesses still do not.
    c.execute_command('DEBUG', 'RELOAD')
    env.assertEqual(get(c, 'ids', mine[3])['user'], 'u3')
    env.assertEqual(c.execute_command('SECKILL.RELEASE', 'ids', '%s-3' % tag), ['NOT_FOUND', 2])
    env.assertEqual(c.execute_command('SECKILL.RELEASE', 'ids', mine[3]), ['RELEASED', 3])
    after = reserve(c, 'ids', 'x')[1]
    env.assertTrue(GENERATED_ID.match(after) and after.split('-')[1] == '8', message=after)
    # REPLACE draws a new tag and key: an old id is no id of the new round.
    env.assertOk(c.execute_command('SECKILL.INIT', 'ids', 10, 'LIMIT', 10, 'REPLACE'))
    env.assertEqual(c.execute_command('SECKILL.RELEASE', 'ids', mine[0]), ['NOT_FOUND', 10])
    env.assertNotEqual(reserve(c, 'ids', 'u0')[1].split('-')[2], mine[0].split('-')[2])
    assert_replica_agrees(env, c)


def test_get():
    env, c = _env()
    env.assertIsNone(c.execute_command('SECKILL.GET', 'missing', 'r'))
    env.assertOk(c.execute_command('SECKILL.INIT', 'h', 5, 'HOLD', 60000, 'LIMIT', 2))
    env.assertOk(c.execute_command('SECKILL.INIT', 'n', 5))
    t0 = server_ms(c)
    st, rid, rem = reserve(c, 'h', 'alice', 'QTY', 2)
    t1 = server_ms(c)
    raw = c.execute_command('SECKILL.GET', 'h', rid)
    env.assertEqual([f for f, _ in pairs(raw)], GET_FIELDS)
    g = as_dict(raw)
    env.assertEqual((g['user'], g['qty'], g['state']), ('alice', 2, 'pending'))
    env.assertTrue(t0 - 5 <= g['created_ms'] <= t1 + 5, message='created_ms %r not in [%r, %r]' % (g['created_ms'], t0, t1))
    env.assertEqual(g['deadline_ms'], g['created_ms'] + 60000)
    env.assertIsNone(c.execute_command('SECKILL.GET', 'h', 'unknown'))

    st, rid2, rem = reserve(c, 'n', 'bob')
    g = get(c, 'n', rid2)
    env.assertEqual((g['user'], g['qty'], g['state'], g['deadline_ms']), ('bob', 1, 'pending', 0))
    c.execute_command('SECKILL.CONFIRM', 'n', rid2)
    env.assertEqual(get(c, 'n', rid2)['state'], 'confirmed')
    c.execute_command('SECKILL.RELEASE', 'h', rid)
    env.assertEqual(get(c, 'h', rid)['state'], 'released')
    # Binary-safe ids.
    env.assertEqual(reserve(c, 'n', 'b\x00\xffc', 'REQID', 'id\x00x')[0:2], ['RESERVED', 'id\x00x'])
    env.assertEqual(get(c, 'n', 'id\x00x')['user'], 'b\x00\xffc')


# --------------------------------------------------------------- HOLD expiry

def test_hold_active_expiry():
    """Holds run out in the background, with no command touching the sale."""
    env, c = _env()
    env.assertOk(c.execute_command('SECKILL.INIT', 's', 5, 'HOLD', 150, 'LIMIT', 2))
    st, a, _ = reserve(c, 's', 'u1', 'QTY', 2)
    st, b, _ = reserve(c, 's', 'u2')
    st, k, _ = reserve(c, 's', 'u3')
    env.assertEqual(c.execute_command('SECKILL.CONFIRM', 's', k)[0], 'CONFIRMED')
    deadline = get(c, 's', a)['deadline_ms']
    r = check_invariant(env, c, 's')
    env.assertEqual((r['pending'], r['expired']), (3, 0))
    # Only INFO (read-only) from here on.
    r = wait_for(lambda: (lambda i: i if i['pending'] == 0 else None)(info(c, 's')), timeout=3.0)
    seen_at = server_ms(c)
    env.assertTrue(r, message='holds did not run out in the background')
    env.assertLess(seen_at - deadline, 1000, message='released within about a second')
    r = check_invariant(env, c, 's')
    env.assertEqual((r['remaining'], r['pending'], r['confirmed'], r['released'], r['expired'], r['buyers']),
                    (4, 0, 1, 3, 3, 1))
    env.assertEqual(get(c, 's', a)['state'], 'released')
    env.assertEqual(get(c, 's', b)['state'], 'released')
    env.assertEqual(get(c, 's', k)['state'], 'confirmed')
    env.assertEqual(c.execute_command('SECKILL.CONFIRM', 's', a), ['RELEASED', 4])
    env.assertEqual(c.execute_command('SECKILL.RELEASE', 's', b), ['ALREADY_RELEASED', 4])
    if MODULE:  # INFO seckill is the module's
        env.assertGreaterEqual(seckill_stats(c)['holds_expired'], 2)
    assert_replica_agrees(env, c)
    # The quota came back: u1 may reserve 2 again.
    env.assertEqual(reserve(c, 's', 'u1', 'QTY', 2)[0], 'RESERVED')


def test_hold_lazy_expiry():
    """Inside MULTI no timer can run: the write itself releases due holds."""
    env, c = _env()
    env.assertOk(c.execute_command('SECKILL.INIT', 's', 1, 'HOLD', 100))
    p = c.pipeline(transaction=True)
    p.execute_command('SECKILL.RESERVE', 's', 'u1', 'REQID', 'r1')
    p.execute_command('DEBUG', 'SLEEP', '0.25')
    # Read-only commands do not write: they show the hold still pending.
    p.execute_command('SECKILL.INFO', 's')
    p.execute_command('SECKILL.GET', 's', 'r1')
    # The write releases it first (lazy expiry), so the stock is there again.
    p.execute_command('SECKILL.RESERVE', 's', 'u2', 'REQID', 'r2')
    res = p.execute()
    env.assertEqual(res[0], ['RESERVED', 'r1', 0])
    i = as_dict(res[2])
    env.assertEqual((i['remaining'], i['pending'], i['expired']), (0, 1, 0))
    env.assertEqual(as_dict(res[3])['state'], 'pending')
    env.assertEqual(res[4], ['RESERVED', 'r2', 0])
    r = check_invariant(env, c, 's')
    env.assertEqual((r['pending'], r['released'], r['expired'], r['reservations']), (1, 1, 1, 2))
    env.assertEqual(get(c, 's', 'r1')['state'], 'released')

    # Lazily by CONFIRM and RELEASE too.
    for cmd, want in (('SECKILL.CONFIRM', 'RELEASED'), ('SECKILL.RELEASE', 'ALREADY_RELEASED')):
        env.assertOk(c.execute_command('SECKILL.INIT', 'x', 1, 'HOLD', 100, 'REPLACE'))
        p = c.pipeline(transaction=True)
        p.execute_command('SECKILL.RESERVE', 'x', 'u', 'REQID', 'q')
        p.execute_command('DEBUG', 'SLEEP', '0.2')
        p.execute_command(cmd, 'x', 'q')
        res = p.execute()
        env.assertEqual(res[2], [want, 1], message=cmd)
        r = check_invariant(env, c, 'x')
        env.assertEqual((r['expired'], r['pending']), (1, 0))

    # A confirmed reservation never runs out.
    env.assertOk(c.execute_command('SECKILL.INIT', 'y', 1, 'HOLD', 100))
    st, rid, _ = reserve(c, 'y', 'u')
    env.assertEqual(c.execute_command('SECKILL.CONFIRM', 'y', rid), ['CONFIRMED', 0])
    time.sleep(0.35)
    env.assertEqual(get(c, 'y', rid)['state'], 'confirmed')
    env.assertEqual(reserve(c, 'y', 'v'), ['SOLD_OUT', None, 0])


def test_hold_zero_never_expires():
    env, c = _env()
    env.assertOk(c.execute_command('SECKILL.INIT', 's', 1, 'HOLD', 0))
    st, rid, _ = reserve(c, 's', 'u')
    env.assertEqual(get(c, 's', rid)['deadline_ms'], 0)
    p = c.pipeline(transaction=True)
    p.execute_command('DEBUG', 'SLEEP', '0.2')
    p.execute_command('SECKILL.RECONCILE', 's', 'EXPIRE')
    res = p.execute()
    env.assertEqual(as_dict(res[1])['pending'], 1)
    env.assertEqual(get(c, 's', rid)['state'], 'pending')


# ----------------------------------------------------------------- RECONCILE

def _ledger_sale(env, c, key='s'):
    """ok: confirmed; pend: pending; rel: released; and an order never seen."""
    env.assertOk(c.execute_command('SECKILL.INIT', key, 10, 'LIMIT', 5, 'SHARDS', 2))
    env.assertEqual(reserve(c, key, 'u-ok', 'REQID', 'ok', 'QTY', 2)[0], 'RESERVED')
    env.assertEqual(c.execute_command('SECKILL.CONFIRM', key, 'ok')[0], 'CONFIRMED')
    env.assertEqual(reserve(c, key, 'u-pend', 'REQID', 'pend', 'QTY', 3)[0], 'RESERVED')
    env.assertEqual(reserve(c, key, 'u-rel', 'REQID', 'rel', 'QTY', 1)[0], 'RESERVED')
    env.assertEqual(c.execute_command('SECKILL.RELEASE', key, 'rel')[0], 'RELEASED')
    r = check_invariant(env, c, key)
    env.assertEqual((r['remaining'], r['pending'], r['confirmed'], r['released']), (5, 3, 2, 1))


ORDERS = ['ORDERS', 4, 'ok', 'u-ok', 2, 'pend', 'u-pend', 3, 'rel', 'u-rel', 1, 'new', 'u-new', 4]


def test_reconcile_report_only():
    env, c = _env()
    env.assertIsNone(c.execute_command('SECKILL.RECONCILE', 'missing'))
    env.assertIsNone(c.execute_command('SECKILL.RECONCILE', 'missing', 'ORDERS', 1, 'a', 'b', 1, 'APPLY'))
    env.assertEqual(c.execute_command('EXISTS', 'missing'), 0)
    _ledger_sale(env, c)
    d = digest_value(c, 's')
    plain = c.execute_command('SECKILL.RECONCILE', 's')
    env.assertEqual([f for f, _ in pairs(plain)], REPORT_FIELDS)
    env.assertEqual(as_dict(plain), info(c, 's'))

    raw = c.execute_command('SECKILL.RECONCILE', 's', *ORDERS)
    env.assertEqual([f for f, _ in pairs(raw)], REPORT_FIELDS + ORDER_FIELDS)
    rep = as_dict(raw)
    env.assertEqual([rep[f] for f in ORDER_FIELDS], [1, 1, 1, 1, 0, ['pend'], ['rel'], ['new'], []])
    # Without APPLY nothing changes.
    env.assertEqual(digest_value(c, 's'), d)
    env.assertEqual((rep['remaining'], rep['pending'], rep['confirmed']), (5, 3, 2))
    # EXPIRE on a sale without holds changes nothing either.
    reconcile(c, 's', 'EXPIRE')
    env.assertEqual(digest_value(c, 's'), d)

    # Orders in chunks of any size: each chunk is classified the same way.
    for chunk in (ORDERS[2:5], ORDERS[5:8], ORDERS[8:11], ORDERS[11:14]):
        rep = reconcile(c, 's', 'ORDERS', 1, *chunk)
        counts = [rep[f] for f in ORDER_FIELDS[:5]]
        env.assertEqual(sum(counts), 1, message='each order is in exactly one class')
    env.assertEqual(digest_value(c, 's'), d)


def test_reconcile_apply():
    env, c = _env()
    _ledger_sale(env, c)
    rep = reconcile(c, 's', *ORDERS, 'APPLY')
    env.assertEqual([rep[f] for f in ORDER_FIELDS], [1, 1, 1, 1, 0, ['pend'], ['rel'], ['new'], []])
    # pend confirmed, rel retaken (1), new adopted (4): 10 - 2 - 3 - 1 - 4 = 0
    env.assertEqual((rep['remaining'], rep['pending'], rep['confirmed'], rep['released']), (0, 0, 10, 0))
    env.assertEqual(rep['invariant'], 'ok')
    for rid in ('ok', 'pend', 'rel', 'new'):
        env.assertEqual(get(c, 's', rid)['state'], 'confirmed', message=rid)
    g = get(c, 's', 'new')
    env.assertEqual((g['user'], g['qty']), ('u-new', 4))
    r = check_invariant(env, c, 's')
    env.assertEqual((r['buyers'], r['reservations']), (4, 4))
    # A second APPLY finds everything in agreement, and changes nothing.
    d = digest_value(c, 's')
    rep = reconcile(c, 's', *ORDERS, 'APPLY')
    env.assertEqual([rep[f] for f in ORDER_FIELDS], [4, 0, 0, 0, 0, [], [], [], []])
    env.assertEqual(digest_value(c, 's'), d)
    assert_replica_agrees(env, c)


def test_reconcile_apply_conflict():
    env, c = _env()
    env.assertOk(c.execute_command('SECKILL.INIT', 's', 3, 'LIMIT', 3))
    env.assertEqual(reserve(c, 's', 'a', 'REQID', 'gone', 'QTY', 2)[0], 'RESERVED')
    env.assertEqual(c.execute_command('SECKILL.RELEASE', 's', 'gone')[0], 'RELEASED')
    env.assertEqual(reserve(c, 's', 'b', 'REQID', 'held', 'QTY', 3)[0], 'RESERVED')
    # No stock left: a released order and an unknown order both conflict.
    orders = ['ORDERS', 3, 'gone', 'a', 2, 'lost', 'c', 1, 'held', 'b', 3]
    d = digest_value(c, 's')
    rep = reconcile(c, 's', *orders)
    env.assertEqual([rep[f] for f in ORDER_FIELDS], [0, 1, 1, 1, 0, ['held'], ['gone'], ['lost'], []])
    env.assertEqual(digest_value(c, 's'), d)
    rep = reconcile(c, 's', *orders, 'APPLY')
    env.assertEqual([rep[f] for f in ORDER_FIELDS], [0, 1, 0, 0, 2, ['held'], [], [], ['gone', 'lost']])
    env.assertEqual(sum(rep[f] for f in ORDER_FIELDS[:5]), 3)
    r = check_invariant(env, c, 's')
    env.assertEqual((r['remaining'], r['pending'], r['confirmed'], r['released']), (0, 0, 3, 2))
    env.assertEqual(get(c, 's', 'gone')['state'], 'released')
    env.assertIsNone(c.execute_command('SECKILL.GET', 's', 'lost'))

    # Stock covers the first fixes only: later rows see what earlier ones took.
    env.assertOk(c.execute_command('SECKILL.INIT', 't', 2, 'REPLACE'))
    rep = reconcile(c, 't', 'ORDERS', 3, 'o1', 'x', 1, 'o2', 'y', 1, 'o3', 'z', 1, 'APPLY')
    env.assertEqual([rep[f] for f in ORDER_FIELDS], [0, 0, 0, 2, 1, [], [], ['o1', 'o2'], ['o3']])
    r = check_invariant(env, c, 't')
    env.assertEqual((r['remaining'], r['confirmed']), (0, 2))
    assert_replica_agrees(env, c)


def test_reconcile_expire():
    env, c = _env()
    env.assertOk(c.execute_command('SECKILL.INIT', 's', 4, 'HOLD', 100, 'LIMIT', 4))
    p = c.pipeline(transaction=True)
    p.execute_command('SECKILL.RESERVE', 's', 'u', 'REQID', 'r1', 'QTY', 3)
    p.execute_command('DEBUG', 'SLEEP', '0.25')
    p.execute_command('SECKILL.RECONCILE', 's')                      # changes nothing
    p.execute_command('SECKILL.RECONCILE', 's', 'ORDERS', 1, 'zz', 'u', 1)  # nor this
    p.execute_command('SECKILL.RECONCILE', 's', 'EXPIRE')
    res = p.execute()
    a, b, e = as_dict(res[2]), as_dict(res[3]), as_dict(res[4])
    env.assertEqual((a['pending'], a['expired'], a['remaining']), (3, 0, 1))
    env.assertEqual((b['pending'], b['expired'], b['orders_unknown']), (3, 0, 1))
    env.assertEqual((e['pending'], e['expired'], e['released'], e['remaining'], e['buyers']), (0, 3, 3, 4, 0))
    env.assertEqual(get(c, 's', 'r1')['state'], 'released')
    check_invariant(env, c, 's')

    # EXPIRE and ORDERS together: the classes describe the sale as the call
    # leaves it. A hold that EXPIRE releases in this very call, while the
    # ledger has its order, is the dangerous "released" case, not "pending".
    env.assertOk(c.execute_command('SECKILL.INIT', 't', 4, 'HOLD', 100))
    p = c.pipeline(transaction=True)
    p.execute_command('SECKILL.RESERVE', 't', 'u', 'REQID', 'r9')
    p.execute_command('DEBUG', 'SLEEP', '0.25')
    p.execute_command('SECKILL.RECONCILE', 't', 'EXPIRE', 'ORDERS', 1, 'r9', 'u', 1)
    rep = as_dict(p.execute()[2])
    env.assertEqual(get(c, 't', 'r9')['state'], 'released')
    env.assertEqual((rep['pending'], rep['expired']), (0, 1))
    env.assertEqual((rep['orders_pending'], rep['orders_pending_ids'], rep['orders_released'], rep['orders_released_ids']),
                    (0, [], 1, ['r9']), message='report contradicts itself: %r' % (rep,))

    # An expired reservation with an order is "released"; APPLY takes it back.
    rep = reconcile(c, 's', 'ORDERS', 1, 'r1', 'u', 3, 'APPLY')
    env.assertEqual((rep['orders_released'], rep['orders_released_ids'], rep['expired'], rep['confirmed']),
                    (1, ['r1'], 0, 3))
    check_invariant(env, c, 's')


def test_invariant_every_step():
    env, c = _env()
    env.assertOk(c.execute_command('SECKILL.INIT', 's', 20, 'SHARDS', 3, 'LIMIT', 3, 'HOLD', 60000))
    rids = []
    for i in range(12):
        st, rid, rem = reserve(c, 's', 'u%d' % (i % 5), 'QTY', 1 + i % 3)
        if st == 'RESERVED':
            rids.append(rid)
        check_invariant(env, c, 's')
    for j, rid in enumerate(rids):
        cmd = 'SECKILL.CONFIRM' if j % 2 else 'SECKILL.RELEASE'
        c.execute_command(cmd, 's', rid)
        check_invariant(env, c, 's')
    reconcile(c, 's', 'ORDERS', 2, rids[0], 'u0', 1, 'lost', 'u9', 2, 'APPLY')
    r = check_invariant(env, c, 's')
    env.assertGreater(r['confirmed'], 0)
    env.assertGreater(r['released'], 0)
    assert_replica_agrees(env, c)


# ------------------------------------------------------------------ WRONGTYPE

def test_wrongtype():
    env, c = _env()
    c.execute_command('SET', 'str', 'x')
    raw = RawConn(c)
    # What Redis itself answers, for comparison.
    env.assertTrue(raw.call('LPUSH', 'str', 'y').startswith(b'-WRONGTYPE '))
    for cmd in (['SECKILL.INIT', 'str', 5], ['SECKILL.INIT', 'str', 5, 'REPLACE'],
                ['SECKILL.RESERVE', 'str', 'u'], ['SECKILL.RELEASE', 'str', 'r'],
                ['SECKILL.CONFIRM', 'str', 'r'], ['SECKILL.RECONCILE', 'str'],
                ['SECKILL.RECONCILE', 'str', 'EXPIRE', 'ORDERS', 1, 'r', 'u', 1, 'APPLY'],
                ['SECKILL.INFO', 'str'], ['SECKILL.GET', 'str', 'r']):
        reply = raw.call(*cmd)
        env.assertTrue(reply.startswith(b'-WRONGTYPE '), message='%r -> %r' % (cmd, reply))
    raw.close()
    env.assertEqual(c.execute_command('GET', 'str'), 'x')
    # And the other way round.
    env.assertOk(c.execute_command('SECKILL.INIT', 's', 5))
    env.expect('GET', 's').error().contains('WRONGTYPE')
    env.expect('LPUSH', 's', 'x').error().contains('WRONGTYPE')
    # A STREAM key of another type.
    c.execute_command('SET', 'k:{t}:ev', 'x')
    env.expect('SECKILL.INIT', 'k:{t}', 5, 'STREAM', 'k:{t}:ev').error().contains('STREAM')
    env.assertEqual(c.execute_command('EXISTS', 'k:{t}'), 0)


# ------------------------------------------------------------------- STREAM

def _entries(c, skey):
    """XRANGE as [(id, {field: value})] (redis-py already pairs the fields up)."""
    out = []
    for eid, f in c.execute_command('XRANGE', skey, '-', '+'):
        out.append((eid, f if isinstance(f, dict) else dict(zip(f[0::2], f[1::2]))))
    return out


def test_stream_entries():
    env, c = _env()
    sale, skey = 'sale:{1001}', 'sale:{1001}:events'
    env.assertOk(c.execute_command('SECKILL.INIT', sale, 10, 'LIMIT', 2, 'HOLD', 150, 'STREAM', skey))
    env.assertEqual(c.execute_command('TYPE', skey), 'none')
    _, a, _ = reserve(c, sale, 'alice', 'QTY', 2)
    c.execute_command('SECKILL.CONFIRM', sale, a)
    _, b, _ = reserve(c, sale, 'bob')
    c.execute_command('SECKILL.RELEASE', sale, b)
    _, e, _ = reserve(c, sale, 'eve')
    # Refusals and no-ops write nothing.
    reserve(c, sale, 'alice')
    c.execute_command('SECKILL.CONFIRM', sale, a)
    c.execute_command('SECKILL.RELEASE', sale, b)
    env.assertTrue(wait_for(lambda: info(c, sale)['expired'] == 1, timeout=3))
    got = [(f['event'], f['rid'], f['user'], f['qty']) for _, f in _entries(c, skey)]
    env.assertEqual(got, [('reserved', a, 'alice', '2'), ('confirmed', a, 'alice', '2'),
                          ('reserved', b, 'bob', '1'), ('released', b, 'bob', '1'),
                          ('reserved', e, 'eve', '1'), ('expired', e, 'eve', '1')])
    env.assertEqual(c.execute_command('TYPE', skey), 'stream')

    # Workers consume it like any stream.
    env.assertOk(c.execute_command('XGROUP', 'CREATE', skey, 'workers', '0'))
    r = c.execute_command('XREADGROUP', 'GROUP', 'workers', 'w1', 'COUNT', 100, 'STREAMS', skey, '>')
    ids = [eid for eid, _ in r[0][1]] if isinstance(r, list) else [eid for eid, _ in r[skey][0]]
    env.assertEqual(len(ids), 6)
    env.assertEqual(c.execute_command('XACK', skey, 'workers', *ids), 6)

    # RECONCILE APPLY appends its effects too.
    reconcile(c, sale, 'ORDERS', 2, b, 'bob', 1, 'new', 'zed', 1, 'APPLY')
    got = [(f['event'], f['rid']) for _, f in _entries(c, skey)][6:]
    env.assertEqual(got, [('confirmed', b), ('confirmed', 'new')])
    assert_replica_agrees(env, c)


def test_stream_maxlen():
    env, c = _env()
    env.assertOk(c.execute_command('SECKILL.INIT', 'x{a}', 1000, 'STREAM', 'y{a}', 'MAXLEN', 10))
    for i in range(400):
        reserve(c, 'x{a}', 'u%d' % i)
    n = c.execute_command('XLEN', 'y{a}')
    env.assertGreaterEqual(n, 10)
    env.assertLess(n, 400, message='MAXLEN trims the stream (approximately)')
    last = _entries(c, 'y{a}')[-1][1]
    env.assertEqual(last['user'], 'u399')


# ---------------------------------------------------------- keyspace events

def test_keyspace_events():
    env, c = _env()
    c.execute_command('CONFIG', 'SET', 'notify-keyspace-events', 'KEA')
    ps = c.pubsub()
    ps.subscribe('__keyspace@0__:s')
    ps.get_message(timeout=1)
    env.assertOk(c.execute_command('SECKILL.INIT', 's', 1, 'HOLD', 150))
    _, a, _ = reserve(c, 's', 'u1')
    env.assertEqual(events_from(ps, until='seckill.soldout'), ['seckill.reserve', 'seckill.soldout'])
    env.assertEqual(reserve(c, 's', 'u2')[0], 'SOLD_OUT')     # refused: no event
    c.execute_command('SECKILL.RELEASE', 's', a)
    env.assertEqual(events_from(ps, until='seckill.restock'), ['seckill.release', 'seckill.restock'])
    _, b, _ = reserve(c, 's', 'u2')
    c.execute_command('SECKILL.CONFIRM', 's', b)
    env.assertEqual(events_from(ps, until='seckill.confirm'), ['seckill.reserve', 'seckill.soldout', 'seckill.confirm'])
    # Hold expiry in the background.
    env.assertOk(c.execute_command('SECKILL.INIT', 's', 1, 'HOLD', 150, 'REPLACE'))
    ev = events_from(ps, timeout=0.3)
    env.assertNotContains('seckill.reserve', ev)
    reserve(c, 's', 'u3')
    env.assertEqual(events_from(ps, timeout=3, until='seckill.restock'),
                    ['seckill.reserve', 'seckill.soldout', 'seckill.expire', 'seckill.restock'])
    # Only the module class: with 'Kg' (generic only) nothing arrives.
    c.execute_command('CONFIG', 'SET', 'notify-keyspace-events', 'Kg')
    reserve(c, 's', 'u4')
    env.assertEqual(events_from(ps, timeout=0.3), [])
    c.execute_command('CONFIG', 'SET', 'notify-keyspace-events', 'Kd')
    reserve(c, 's', 'u5')
    env.assertEqual(events_from(ps, timeout=1, until='seckill.reserve'), ['seckill.reserve'])
    ps.close()

    # INIT ... REPLACE moves the stock edge too.
    c.execute_command('CONFIG', 'SET', 'notify-keyspace-events', 'KEA')
    ps = c.pubsub()
    ps.subscribe('__keyspace@0__:r')
    ps.get_message(timeout=1)
    env.assertOk(c.execute_command('SECKILL.INIT', 'r', 1))
    reserve(c, 'r', 'u')
    env.assertEqual(events_from(ps, until='seckill.soldout'), ['seckill.reserve', 'seckill.soldout'])
    env.assertOk(c.execute_command('SECKILL.INIT', 'r', 3, 'REPLACE'))
    env.assertContains('seckill.restock', events_from(ps, until='seckill.restock'))
    env.assertOk(c.execute_command('SECKILL.INIT', 'r', 0, 'REPLACE'))
    env.assertContains('seckill.soldout', events_from(ps, until='seckill.soldout'))
    ps.close()


# ---------------------------------------------------------------- INFO seckill

def test_info_seckill_counters():
    env, c = _env()
    s0 = seckill_stats(c)
    for name in ('init_created', 'init_exists', 'reserve_reserved', 'reserve_no_sale', 'reserve_duplicate',
                 'reserve_not_started', 'reserve_ended', 'reserve_limit', 'reserve_sold_out', 'holds_expired'):
        env.assertContains(name, s0)
    now = server_ms(c)
    c.execute_command('SECKILL.INIT', 's', 2)
    c.execute_command('SECKILL.INIT', 's', 2)
    c.execute_command('SECKILL.INIT', 'f', 2, 'START', now + 3600000)
    c.execute_command('SECKILL.INIT', 'e', 2, 'END', now - 1)
    c.execute_command('SECKILL.INIT', 'h', 2, 'HOLD', 100)
    reserve(c, 'none', 'u')
    reserve(c, 's', 'u', 'REQID', 'r')
    reserve(c, 's', 'u', 'REQID', 'r')
    reserve(c, 's', 'u')
    reserve(c, 's', 'v')
    reserve(c, 's', 'w')
    reserve(c, 'f', 'u')
    reserve(c, 'e', 'u')
    reserve(c, 'h', 'u')
    env.assertTrue(wait_for(lambda: info(c, 'h')['expired'] == 1, timeout=3))
    s1 = seckill_stats(c)
    delta = {k: s1[k] - s0.get(k, 0) for k in s1}
    env.assertEqual((delta['init_created'], delta['init_exists']), (4, 1))
    env.assertEqual((delta['reserve_reserved'], delta['reserve_no_sale'], delta['reserve_duplicate'],
                     delta['reserve_not_started'], delta['reserve_ended'], delta['reserve_limit'],
                     delta['reserve_sold_out']), (3, 1, 1, 1, 1, 1, 1))
    env.assertEqual(delta['holds_expired'], 1)


# ----------------------------------------------------------------------- RESP3

def test_resp3_maps():
    env, c = _env()
    env.assertOk(c.execute_command('SECKILL.INIT', 's', 5, 'SHARDS', 2))
    raw = RawConn(c, resp3=True)
    r_info = raw.call('SECKILL.INFO', 's')
    r_rec = raw.call('SECKILL.RECONCILE', 's', 'ORDERS', 1, 'x', 'u', 1)
    r_res = raw.call('SECKILL.RESERVE', 's', 'u', 'REQID', 'r1')
    r_get = raw.call('SECKILL.GET', 's', 'r1')
    r_none = raw.call('SECKILL.INFO', 'nokey')
    r_rel = raw.call('SECKILL.RELEASE', 's', 'nope')
    raw.close()
    env.assertTrue(r_info.startswith(b'%10\r\n$5\r\ntotal\r\n:5\r\n$9\r\nremaining\r\n:5\r\n'), message=r_info)
    env.assertContains(b'$6\r\nshards\r\n*2\r\n:3\r\n:2\r\n', r_info)
    env.assertTrue(r_info.endswith(b'$9\r\ninvariant\r\n+ok\r\n'), message=r_info)
    env.assertTrue(r_rec.startswith(b'%19\r\n'), message=r_rec)
    env.assertContains(b'$18\r\norders_unknown_ids\r\n*1\r\n$1\r\nx\r\n', r_rec)
    env.assertEqual(r_res, b'*3\r\n+RESERVED\r\n$2\r\nr1\r\n:4\r\n')
    env.assertTrue(r_get.startswith(b'%5\r\n$4\r\nuser\r\n$1\r\nu\r\n'), message=r_get)
    env.assertEqual(r_none, b'_\r\n')
    env.assertEqual(r_rel, b'*2\r\n+NOT_FOUND\r\n:4\r\n')

    # RESP2 on the same server: flat arrays, null bulk for a missing key.
    raw = RawConn(c)
    r2 = raw.call('SECKILL.INFO', 's')
    env.assertTrue(r2.startswith(b'*20\r\n$5\r\ntotal\r\n:5\r\n'), message=r2)
    env.assertEqual(raw.call('SECKILL.INFO', 'nokey'), b'$-1\r\n')
    raw.close()

    # And through redis-py with protocol 3: dicts.
    host, port, path = conn_address(c)
    kw = dict(decode_responses=True, protocol=3)
    r3 = redis.Redis(unix_socket_path=path, **kw) if path else redis.Redis(host=host, port=port, **kw)
    d = r3.execute_command('SECKILL.INFO', 's')
    env.assertIsInstance(d, dict)
    env.assertEqual(list(d.keys()), REPORT_FIELDS)
    env.assertEqual((d['total'], d['remaining'], d['pending'], d['invariant']), (5, 4, 1, 'ok'))
    g = r3.execute_command('SECKILL.GET', 's', 'r1')
    env.assertIsInstance(g, dict)
    env.assertEqual(g['state'], 'pending')
    r3.close()


# --------------------------------------------------------- keys move around

def _held_sale(env, c, key, hold=250):
    env.assertOk(c.execute_command('SECKILL.INIT', key, 2, 'HOLD', hold))
    env.assertEqual(reserve(c, key, 'u')[0], 'RESERVED')


def _runs_out(c, key, timeout=3.0):
    """Waits, with read-only INFO only, for the sale's holds to run out."""
    return wait_for(lambda: (info(c, key) or {}).get('expired') == 1, timeout=timeout)


def test_holds_run_out_wherever_the_sale_goes():
    """RENAME, MOVE, COPY and RESTORE: background expiry follows the sale."""
    env, c = _env()
    _held_sale(env, c, 'a')
    env.assertTrue(c.execute_command('RENAME', 'a', 'renamed'))
    env.assertTrue(_runs_out(c, 'renamed'), message='RENAME')

    _held_sale(env, c, 'b')
    env.assertTrue(c.execute_command('MOVE', 'b', 2))
    if is_valkey_8_1(c):
        # Valkey 8.1 leaves this client on db 2 after MOVE (server bug
        # valkey-io/valkey#4024, see is_valkey_8_1): back to db 0, where the
        # test goes on. The MOVE itself and the expiry in db 2 are still checked.
        c.execute_command('SELECT', 0)
    c2 = env.getConnection()
    c2.execute_command('SELECT', 2)
    env.assertTrue(_runs_out(c2, 'b'), message='MOVE')
    check_invariant(env, c2, 'b')
    c2.close()

    _held_sale(env, c, 'c')
    env.assertEqual(c.execute_command('COPY', 'c', 'copied'), 1)
    env.assertEqual(c.execute_command('DEL', 'c'), 1)
    env.assertTrue(_runs_out(c, 'copied'), message='COPY')

    _held_sale(env, c, 'd', hold=600)
    payload = c.dump('d')
    env.assertEqual(c.execute_command('DEL', 'd'), 1)
    env.assertTrue(c.execute_command('RESTORE', 'restored', 0, payload))
    env.assertTrue(_runs_out(c, 'restored'), message='RESTORE')
    for k in ('renamed', 'copied', 'restored'):
        check_invariant(env, c, k)
    # DEL: nothing left, and the server is fine.
    env.assertEqual(c.execute_command('DEL', 'renamed'), 1)
    env.assertIsNone(c.execute_command('SECKILL.INFO', 'renamed'))
    env.assertTrue(c.execute_command('PING'))


def test_holds_run_out_after_swapdb():
    """SWAPDB moves a sale with pending holds to another database: the
    background expiry must still release them within about a second."""
    env, c = _env()
    _held_sale(env, c, 'w')
    env.assertTrue(c.execute_command('SWAPDB', 0, 1))
    c1 = env.getConnection()
    c1.execute_command('SELECT', 1)
    env.assertTrue(_runs_out(c1, 'w'), message='hold in a sale moved by SWAPDB never ran out in the background')
    check_invariant(env, c1, 'w')
    c1.close()


def test_watch_sees_sale_changes():
    env, c = _env()
    env.assertOk(c.execute_command('SECKILL.INIT', 's', 5))
    other = env.getConnection()
    # A change by another client aborts the watching transaction.
    c.execute_command('WATCH', 's')
    env.assertEqual(reserve(other, 's', 'u')[0], 'RESERVED')
    p = c.pipeline(transaction=True)
    p.execute_command('SECKILL.INFO', 's')
    try:
        p.execute()
        env.assertTrue(False, message='EXEC ran although the watched sale changed')
    except redis.WatchError:
        pass
    # A read does not, and neither does a write that changed nothing.
    c.execute_command('WATCH', 's')
    other.execute_command('SECKILL.INFO', 's')
    other.execute_command('SECKILL.GET', 's', 'x')
    env.assertEqual(other.execute_command('SECKILL.RELEASE', 's', 'no-such-id')[0], 'NOT_FOUND')
    env.assertEqual(reserve(other, 's', 'u')[0], 'LIMIT')
    env.assertEqual(other.execute_command('SECKILL.INIT', 's', 9), 'EXISTS')
    p = c.pipeline(transaction=True)
    p.execute_command('SECKILL.INFO', 's')
    env.assertEqual(as_dict(p.execute()[0])['pending'], 1)
    other.close()


def _user_conn(c, user, password):
    host, port, path = conn_address(c)
    kw = dict(username=user, password=password, decode_responses=True)
    return redis.Redis(unix_socket_path=path, **kw) if path else redis.Redis(host=host, port=port, **kw)


def test_acl_key_permissions():
    """Read commands need only read access to the sale key; RESERVE needs
    write access to the STREAM key as well, and a refusal changes nothing."""
    env, c = _env()
    env.assertOk(c.execute_command('SECKILL.INIT', 'sale:{1}', 5, 'STREAM', 'sale:{1}:ev'))
    _, rid, _ = reserve(c, 'sale:{1}', 'u')
    env.assertOk(c.execute_command('ACL', 'SETUSER', 'reader', 'on', '>pw', '%R~*', '+@all'))
    env.assertOk(c.execute_command('ACL', 'SETUSER', 'narrow', 'on', '>pw', '~sale:{1}', '+@all'))
    before = digest(c)

    ro = _user_conn(c, 'reader', 'pw')
    env.assertEqual(info(ro, 'sale:{1}')['pending'], 1)
    env.assertEqual(get(ro, 'sale:{1}', rid)['state'], 'pending')
    try:
        ro.execute_command('SECKILL.RESERVE', 'sale:{1}', 'v')
        env.assertTrue(False, message='a read-only user reserved')
    except redis.exceptions.NoPermissionError:
        pass
    ro.close()

    narrow = _user_conn(c, 'narrow', 'pw')
    for cmd in (['SECKILL.RESERVE', 'sale:{1}', 'v'], ['SECKILL.CONFIRM', 'sale:{1}', rid],
                ['SECKILL.RELEASE', 'sale:{1}', rid],
                ['SECKILL.INIT', 'sale:{1}', 5, 'STREAM', 'sale:{1}:ev', 'REPLACE']):
        try:
            narrow.execute_command(*cmd)
            env.assertTrue(False, message='%r went through without access to the stream' % (cmd,))
        except redis.exceptions.NoPermissionError as e:
            env.assertContains('perm', str(e).lower())
    env.assertEqual(info(narrow, 'sale:{1}')['pending'], 1)
    narrow.close()
    env.assertEqual(digest(c), before)


def test_memory_pressure():
    """Over maxmemory: INIT, RESERVE and RECONCILE APPLY are refused with OOM,
    while RELEASE, CONFIRM, reports and reads still work (they free or do not
    grow)."""
    env, c = _env()
    env.assertOk(c.execute_command('SECKILL.INIT', 's', 5))
    _, a, _ = reserve(c, 's', 'a')
    _, b, _ = reserve(c, 's', 'b')
    c.execute_command('CONFIG', 'SET', 'maxmemory-policy', 'noeviction')
    c.execute_command('CONFIG', 'SET', 'maxmemory', 1)
    try:
        # (redis-py strips the OOM code from the message)
        env.expect('SECKILL.RESERVE', 's', 'c').error().contains('maxmemory')
        env.expect('SECKILL.INIT', 't', 5).error().contains('maxmemory')
        if FUNCTIONS:
            _library_settles_after_memory_is_back(env, c, a, b)
            return
        env.assertEqual(c.execute_command('SECKILL.RELEASE', 's', a), ['RELEASED', 4])
        env.assertEqual(c.execute_command('SECKILL.CONFIRM', 's', b), ['CONFIRMED', 4])
        env.assertEqual(info(c, 's')['confirmed'], 1)
        env.assertEqual(get(c, 's', a)['state'], 'released')
        # A report still works; APPLY, which can grow the sale, is refused.
        report = c.execute_command('SECKILL.RECONCILE', 's', 'ORDERS', 1, 'x1', 'ux', 1)
        env.assertEqual(dict(zip(report[0::2], report[1::2]))['orders_unknown'], 1)
        env.expect('SECKILL.RECONCILE', 's', 'ORDERS', 1, 'x1', 'ux', 1, 'APPLY').error().contains('maxmemory')
        env.assertEqual(info(c, 's')['reservations'], 2)
    finally:
        c.execute_command('CONFIG', 'SET', 'maxmemory', 0)
    env.assertEqual(reserve(c, 's', 'c')[0], 'RESERVED')
    env.assertEqual(c.execute_command('EXISTS', 't'), 0)
    check_invariant(env, c, 's')


def _library_settles_after_memory_is_back(env, c, a, b):
    """The library has no allow-oom function (docs/managed-redis.md,
    "Settling at maxmemory"): over maxmemory its settling calls are refused
    and change nothing, reads still answer, and once memory is back the same
    calls settle."""
    before = digest(c)
    for call in (('SECKILL.RELEASE', 's', a), ('SECKILL.CONFIRM', 's', b), ('SECKILL.RECONCILE', 's')):
        env.expect(*call).error().contains('maxmemory')
    env.assertEqual(digest(c), before)
    env.assertEqual(info(c, 's')['pending'], 2)
    env.assertEqual(get(c, 's', a)['state'], 'pending')
    c.execute_command('CONFIG', 'SET', 'maxmemory', 0)
    env.assertEqual(c.execute_command('SECKILL.RELEASE', 's', a), ['RELEASED', 4])
    env.assertEqual(c.execute_command('SECKILL.CONFIRM', 's', b), ['CONFIRMED', 4])
    check_invariant(env, c, 's')


def test_effect_command_refuses_what_does_not_fit():
    """SECKILL.EFFECT is internal; where an operator lets clients replay
    effects (ALLOW-CLIENT-EFFECTS yes), a bad effect changes nothing."""
    env = Env(moduleArgs='ALLOW-CLIENT-EFFECTS yes', decodeResponses=True)
    env.skipOnCluster()
    c = env.getConnection()
    env.assertOk(c.execute_command('SECKILL.INIT', 's', 2))
    _, rid, _ = reserve(c, 's', 'u')
    c.execute_command('SECKILL.CONFIRM', 's', rid)
    d = digest(c)
    for bad in (['RELEASE', 'nope'], ['CONFIRM', rid], ['RELEASE', rid], ['EXPIRE', rid], ['BOGUS'],
                ['RECORDS', 'x', 'u', 5, 0, 0, 0, 1, 0, 5],      # takes more than the bucket holds
                ['RECORDS', rid, 'u', 1, 0, 0, 0, 1, 0, 1],      # id exists
                ['RETAKE', rid, 0, 1]):
        env.expect('SECKILL.EFFECT', 's', *bad).error()
    env.expect('SECKILL.EFFECT', 'nokey', 'RELEASE', 'x').error()
    env.assertEqual(digest(c), d)
    env.assertEqual(c.execute_command('EXISTS', 'nokey'), 0)
    check_invariant(env, c, 's')


def test_format_json_matches_the_resp_form():
    """INFO, GET and RECONCILE with FORMAT JSON: the same report as one JSON
    string, numbers as numbers, field by field equal to the RESP form (RESP2
    pairs and the RESP3 map), nested arrays included."""
    import json
    env = Env(decodeResponses=True)
    c = env.getConnection()
    key, part = 'sale:{json}', 'sale:{json.p0}'
    c.execute_command('SECKILL.INIT', key, 10, 'SHARDS', 3, 'LIMIT', 4, 'HOLD', 60000)
    reserve(c, key, 'alice', 'QTY', 2, 'REQID', 'o1')
    reserve(c, key, 'bob', 'REQID', 'o2')
    c.execute_command('SECKILL.CONFIRM', key, 'o1')
    c.execute_command('SECKILL.INIT', part, 5, 'SPLIT', 'r7', 2, 'sale:{json.pool}', 'sale:{json.p1}')
    for k in (key, part):
        as_json = json.loads(c.execute_command('SECKILL.INFO', k, 'FORMAT', 'JSON'))
        env.assertEqual(list(as_json.items()), list(info(c, k).items()), message=k)
    env.assertEqual(json.loads(c.execute_command('SECKILL.INFO', part, 'format', 'json'))['peers'],
                    [['sale:{json.p1}', 0, 0], ['sale:{json.pool}', 0, 0]])
    env.assertEqual(json.loads(c.execute_command('SECKILL.GET', key, 'o2', 'FORMAT', 'JSON')), get(c, key, 'o2'))
    rows = ['ORDERS', 3, 'o1', 'alice', 2, 'o2', 'bob', 1, 'o9', 'carol', 1]
    as_json = json.loads(c.execute_command('SECKILL.RECONCILE', key, *rows, 'FORMAT', 'JSON'))
    env.assertEqual(list(as_json.items()), list(reconcile(c, key, *rows).items()))
    env.assertEqual((as_json['orders_ok'], as_json['orders_pending_ids'], as_json['orders_unknown_ids']),
                    (1, ['o2'], ['o9']))
    # RESP3: the map and the JSON agree too (the library answers RESP3
    # reports as flat pairs: docs/managed-redis.md; its JSON is checked above).
    if FUNCTIONS:
        return
    host, port, path = conn_address(c)
    kw = dict(decode_responses=True, protocol=3)
    r3 = redis.Redis(unix_socket_path=path, **kw) if path else redis.Redis(host=host, port=port, **kw)
    try:
        env.assertEqual(json.loads(r3.execute_command('SECKILL.INFO', key, 'FORMAT', 'JSON')),
                        r3.execute_command('SECKILL.INFO', key))
    finally:
        r3.close()
    # Missing key and reservation: nil, as without FORMAT.
    env.assertIsNone(c.execute_command('SECKILL.INFO', 'sale:{none}', 'FORMAT', 'JSON'))
    env.assertIsNone(c.execute_command('SECKILL.GET', key, 'nope', 'FORMAT', 'JSON'))
    env.expect('SECKILL.INFO', key, 'FORMAT', 'XML').error().contains('FORMAT must be JSON')
    env.expect('SECKILL.INFO', key, 'FORMAT').error().contains('wrong number of arguments')
    env.expect('SECKILL.GET', key, 'o2', 'FORMAT', 'JSON', 'x').error().contains('wrong number of arguments')
    env.expect('SECKILL.RECONCILE', key, 'FORMAT', 'JSON', 'FORMAT', 'JSON').error().contains('twice')


def test_stock_edge_spans_the_whole_write():
    """A write's stock-edge event compares the stock before the holds it
    releases lazily with the stock after its own change: at most one per
    command, whichever command it is."""
    env, c = _env()
    c.execute_command('CONFIG', 'SET', 'notify-keyspace-events', 'KEA')
    ps = c.pubsub()
    ps.subscribe('__keyspace@0__:e')
    ps.get_message(timeout=1)
    env.assertOk(c.execute_command('SECKILL.INIT', 'e', 1, 'HOLD', 100))
    env.assertEqual(reserve(c, 'e', 'u1', 'REQID', 'r1'), ['RESERVED', 'r1', 0])
    env.assertEqual(events_from(ps, until='seckill.soldout'), ['seckill.reserve', 'seckill.soldout'])
    # Inside MULTI no timer runs. The hold runs out and RESERVE sells the
    # unit again: sold out before and after, so no stock edge. Then CONFIRM
    # comes too late: the release of that hold is the restock.
    p = c.pipeline(transaction=True)
    p.execute_command('DEBUG', 'SLEEP', '0.25')
    p.execute_command('SECKILL.RESERVE', 'e', 'u2', 'REQID', 'r2')
    p.execute_command('DEBUG', 'SLEEP', '0.25')
    p.execute_command('SECKILL.CONFIRM', 'e', 'r2')
    res = p.execute()
    env.assertEqual((res[1], res[3]), (['RESERVED', 'r2', 0], ['RELEASED', 1]))
    env.assertEqual(events_from(ps, timeout=0.3),
                    ['seckill.expire', 'seckill.reserve', 'seckill.expire', 'seckill.restock'])
    # Outcomes that change nothing send nothing.
    env.assertEqual(c.execute_command('SECKILL.RELEASE', 'e', 'r2'), ['ALREADY_RELEASED', 1])
    env.assertEqual(c.execute_command('SECKILL.CONFIRM', 'e', 'nope'), ['NOT_FOUND', 1])
    env.assertEqual(events_from(ps, timeout=0.3), [])
    # RECONCILE APPLY retakes the paid order: sold out again.
    r = reconcile(c, 'e', 'ORDERS', 1, 'r2', 'u2', 1, 'APPLY')
    env.assertEqual(r['remaining'], 0)
    env.assertEqual(events_from(ps, timeout=0.3), ['seckill.confirm', 'seckill.soldout'])
    ps.close()
