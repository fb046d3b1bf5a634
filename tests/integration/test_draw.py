"""Draw sales (docs/draw-sales.md, draw v2): INIT ... DRAW [BEACON name],
ENTER, DRAW [BEACON value], ENTRANTS, the waitlist, the verifiable order,
persistence and the fairness of the order.

The expected order is recomputed here, independently of the server, by one
helper (`_draw_order`) from the revealed seed, the entrants (ENTRANTS, in
arrival order) and the beacon value: the entrant digest, the draw seed
S = SHA-256(seed || digest || beacon_value) and the Fisher-Yates
permutation driven by SHA-1 words of S; each entrant whose QTY fits what is
left of the draw's stock wins."""

import hashlib
import json
import struct
import time

import redis
from RLTest import Env

from seckill_helpers import (replica_caught_up, REPORT_FIELDS, as_dict, conn_address, digest, info, reserve, restart_from_aof, seckill_stats,
                             server_ms, wait_for)

DRAW_FIELDS = ['mode', 'entrants', 'drawn', 'left_to_draw', 'waitlist', 'draw_stock', 'seed_commitment', 'seed',
               'entrants_digest', 'beacon', 'beacon_value', 'draw_seed']

# New places of the draw order a waitlist promotion step produces at most
# (rules::sale::SCAN_STEPS).
SCAN_STEPS = 2048

# The chi-square critical value for 9 degrees of freedom at p = 0.001
# (scipy.stats.chi2.ppf(0.999, 9) = 27.877; any chi-square table).
CHI2_9_P001 = 27.877


def _env(**kw):
    env = Env(decodeResponses=True, **kw)
    env.skipOnCluster()
    return env, env.getConnection()


def _draw_sale(c, key, total, window_ms=400, *opts):
    """A draw sale whose registration is open now and ends window_ms from now; returns END."""
    end = server_ms(c) + window_ms
    c.execute_command('SECKILL.INIT', key, total, 'END', end, *opts, 'DRAW')
    return end


def _after(c, end):
    wait_for(lambda: server_ms(c) >= end, timeout=10)


def _draw_all(c, key, count=1000):
    replies = []
    while True:
        drawn, remaining, left = c.execute_command('SECKILL.DRAW', key, 'COUNT', count)
        replies.append((drawn, remaining, left))
        if left == 0:
            return replies


def _entrants(c, key, count=100):
    """ENTRANTS paged to the end: [(user, qty, result)] in the order they entered."""
    out, cursor = [], 0
    while True:
        cursor, flat = c.execute_command('SECKILL.ENTRANTS', key, cursor, 'COUNT', count)
        out += [(flat[i], int(flat[i + 1]), flat[i + 2]) for i in range(0, len(flat), 3)]
        if str(cursor) == '0':
            return out


def _bytes(v):
    return v.encode() if isinstance(v, str) else v


def _entrants_digest(entrants):
    """D(n) of [(user, qty)] in arrival order: D0 = 32 zero bytes,
    D(i+1) = SHA256(D(i) || u32be(len(user)) || user || u32be(qty))."""
    d = bytes(32)
    for user, qty in entrants:
        u = _bytes(user)
        d = hashlib.sha256(d + struct.pack('>I', len(u)) + u + struct.pack('>I', qty & 0xffffffff)).digest()
    return d


def _uniform(s, j, m):
    """uniform(S, j, m): 48-bit words of SHA1(S || u32be(j) || u32be(c)), rejection sampled."""
    limit = (2 ** 48 // m) * m
    c = 0
    while True:
        x = int.from_bytes(hashlib.sha1(s + struct.pack('>II', j, c)).digest()[:6], 'big')
        if x < limit:
            return x % m
        c += 1


def _draw_order(seed_hex, entrants, beacon_value=None):
    """THE recomputation of the draw order (shared by every test here):
    [(user, qty)] in arrival order -> (entrants digest hex, draw seed hex,
    the entrants in draw order)."""
    d = _entrants_digest(entrants)
    s = hashlib.sha256(bytes.fromhex(seed_hex) + d + _bytes(beacon_value or b'')).digest()
    a = list(range(len(entrants)))
    for j in range(len(a)):
        t = j + _uniform(s, j, len(a) - j)
        a[j], a[t] = a[t], a[j]
    return d.hex(), s.hex(), [entrants[i] for i in a]


def _expected_winners(seed_hex, entrants, stock, beacon_value=None):
    """The contract's draw, recomputed: [(user, qty)] of the winners in draw order."""
    won, left = [], stock
    for user, qty in _draw_order(seed_hex, entrants, beacon_value)[2]:
        if qty <= left:
            won.append((user, qty))
            left -= qty
    return won


def _draw_info(env, c, key, depth=0):
    r = info(c, key)
    env.assertEqual(list(r.keys()), REPORT_FIELDS + DRAW_FIELDS, depth=depth + 1)
    env.assertEqual(r['remaining'] + r['pending'] + r['confirmed'], r['total'], depth=depth + 1)
    env.assertEqual(r['invariant'], 'ok', depth=depth + 1)
    return r


def _refused(env, c, args, text):
    """An error that names what is wrong and changes nothing."""
    before = digest(c)
    try:
        c.execute_command(*args)
        env.assertTrue(False, message='%r was accepted' % (args,), depth=1)
    except Exception as e:
        env.assertContains(text, str(e), depth=1)
    env.assertEqual(digest(c), before, depth=1, message='a refused %r changed the data' % (args,))


def _stream(c, skey):
    return [fields for _, fields in c.execute_command('XRANGE', skey, '-', '+')]


# --------------------------------------------------------------------- INIT

def test_init_draw_needs_end_and_reports_its_state():
    env, c = _env()
    _refused(env, c, ['SECKILL.INIT', 'd:{1}', 10, 'DRAW'], 'DRAW needs END')
    _refused(env, c, ['SECKILL.INIT', 'd:{1}', 10, 'START', 1, 'DRAW'], 'DRAW needs END')
    _refused(env, c, ['SECKILL.INIT', 'd:{1}', 10, 'END', server_ms(c) + 5000, 'DRAW', 'DRAW'], 'DRAW')
    env.assertIsNone(info(c, 'd:{1}'))

    _draw_sale(c, 'd:{1}', 10, 5000, 'LIMIT', 3, 'HOLD', 60000)
    r = _draw_info(env, c, 'd:{1}')
    env.assertEqual([r[f] for f in DRAW_FIELDS[:6]], ['draw', 0, 0, 0, 0, None])
    env.assertEqual(len(r['seed_commitment']), 64)
    int(r['seed_commitment'], 16)
    env.assertIsNone(r['seed'])
    env.assertEqual([r[f] for f in DRAW_FIELDS[8:]], ['0' * 64, None, None, None])

    # Another sale's report is unchanged, and every draw sale has its own seed.
    c.execute_command('SECKILL.INIT', 'plain:{1}', 10)
    env.assertEqual(list(info(c, 'plain:{1}').keys()), REPORT_FIELDS)
    _draw_sale(c, 'd:{2}', 10, 5000)
    env.assertNotEqual(info(c, 'd:{2}')['seed_commitment'], r['seed_commitment'])
    # REPLACE starts a new draw with a new seed.
    _draw_sale(c, 'd:{2}', 10, 5000, 'REPLACE')
    env.assertNotEqual(info(c, 'd:{2}')['seed_commitment'], r['seed_commitment'])

    # FORMAT JSON carries the same fields; the seed is null until the draw.
    doc = json.loads(c.execute_command('SECKILL.INFO', 'd:{1}', 'FORMAT', 'JSON'))
    env.assertEqual(list(doc.keys()), REPORT_FIELDS + DRAW_FIELDS)
    env.assertEqual((doc['mode'], doc['seed'], doc['draw_stock']), ('draw', None, None))
    env.assertEqual((doc['entrants_digest'], doc['beacon'], doc['beacon_value'], doc['draw_seed']),
                    ('0' * 64, None, None, None))


def test_init_beacon():
    env, c = _env()
    end = server_ms(c) + 5000
    _refused(env, c, ['SECKILL.INIT', 'b:{1}', 10, 'END', end, 'BEACON', 'drand'], 'BEACON needs DRAW')
    _refused(env, c, ['SECKILL.INIT', 'b:{1}', 10, 'END', end, 'DRAW', 'BEACON', ''], 'BEACON name must be 1 to 256 bytes')
    _refused(env, c, ['SECKILL.INIT', 'b:{1}', 10, 'END', end, 'DRAW', 'BEACON', 'n' * 257],
             'BEACON name must be 1 to 256 bytes')
    _refused(env, c, ['SECKILL.INIT', 'b:{1}', 10, 'END', end, 'DRAW', 'BEACON', 'a', 'BEACON', 'b'], 'given twice')
    _refused(env, c, ['SECKILL.INIT', 'b:{1}', 10, 'END', end, 'DRAW', 'BEACON'], 'BEACON')
    env.assertIsNone(info(c, 'b:{1}'))
    name = 'drand quicknet round 1234567'
    c.execute_command('SECKILL.INIT', 'b:{1}', 10, 'END', end, 'DRAW', 'BEACON', name)
    r = _draw_info(env, c, 'b:{1}')
    env.assertEqual((r['beacon'], r['beacon_value'], r['draw_seed']), (name, None, None))
    c.execute_command('SECKILL.INIT', 'b:{2}', 10, 'END', end, 'BEACON', 'n' * 256, 'DRAW')
    env.assertEqual(info(c, 'b:{2}')['beacon'], 'n' * 256)


def test_draw_committed_stream_entry():
    env, c = _env()
    end = server_ms(c) + 5000
    c.execute_command('SECKILL.INIT', 'c:{1}', 10, 'END', end, 'DRAW', 'BEACON', 'drand 7', 'STREAM', 'c:{1}:ev')
    c.execute_command('SECKILL.INIT', 'c:{2}', 10, 'END', end, 'DRAW', 'STREAM', 'c:{2}:ev', 'MAXLEN', 100)
    c.execute_command('SECKILL.INIT', 'c:{3}', 10, 'STREAM', 'c:{3}:ev')
    for key, beacon in (('c:{1}', 'drand 7'), ('c:{2}', '')):
        entries = c.execute_command('XRANGE', key + ':ev', '-', '+')
        env.assertEqual(len(entries), 1)
        env.assertEqual(list(entries[0][1].items()),
                        [('event', 'draw_committed'), ('commitment', info(c, key)['seed_commitment']), ('beacon', beacon)])
    # A sale that is not a draw sale writes none.
    env.assertEqual(c.execute_command('XLEN', 'c:{3}:ev'), 0)


def test_reserve_is_refused_on_a_draw_sale():
    env, c = _env()
    _draw_sale(c, 'd:{r}', 5, 5000)
    before = digest(c)
    env.assertEqual(reserve(c, 'd:{r}', 'alice'), ['DRAW', None, 5])
    env.assertEqual(reserve(c, 'd:{r}', 'alice', 'QTY', 1, 'REQID', 'x1'), ['DRAW', None, 5])
    env.assertEqual(digest(c), before)
    # NO_SALE still comes first.
    env.assertEqual(reserve(c, 'd:{missing}', 'alice'), ['NO_SALE', None, 0])


# -------------------------------------------------------------------- ENTER

def test_enter_statuses():
    env, c = _env()
    env.assertEqual(c.execute_command('SECKILL.ENTER', 'd:{e}', 'alice'), ['NO_SALE', 0])
    end = _draw_sale(c, 'd:{e}', 5, 600, 'LIMIT', 3)
    env.assertEqual(c.execute_command('SECKILL.ENTER', 'd:{e}', 'alice', 'QTY', 2, 'REQID', 'order-a'), ['ENTERED', 1])
    env.assertEqual(c.execute_command('SECKILL.ENTER', 'd:{e}', 'bob'), ['ENTERED', 2])
    # Idempotent per user: the first entry stands, whatever the retry asks.
    before = digest(c)
    env.assertEqual(c.execute_command('SECKILL.ENTER', 'd:{e}', 'alice', 'QTY', 3), ['ALREADY_ENTERED', 2])
    env.assertEqual(c.execute_command('SECKILL.ENTER', 'd:{e}', 'bob', 'REQID', 'order-b'), ['ALREADY_ENTERED', 2])
    env.assertEqual(digest(c), before)
    env.assertEqual(_entrants(c, 'd:{e}'), [('alice', 2, 'entered'), ('bob', 1, 'entered')])

    # The window, by the server's clock.
    c.execute_command('SECKILL.INIT', 'd:{later}', 5, 'START', server_ms(c) + 60000, 'END', server_ms(c) + 120000,
                      'DRAW')
    env.assertEqual(c.execute_command('SECKILL.ENTER', 'd:{later}', 'alice'), ['NOT_STARTED', 0])
    c.execute_command('SECKILL.INIT', 'd:{over}', 5, 'START', 1, 'END', server_ms(c) - 1, 'DRAW')
    env.assertEqual(c.execute_command('SECKILL.ENTER', 'd:{over}', 'alice'), ['ENDED', 0])

    # After END, before the draw: ENDED (an entrant's retry is still recognised).
    _after(c, end)
    env.assertEqual(c.execute_command('SECKILL.ENTER', 'd:{e}', 'carol'), ['ENDED', 2])
    env.assertEqual(c.execute_command('SECKILL.ENTER', 'd:{e}', 'alice'), ['ALREADY_ENTERED', 2])
    # Once the draw has begun, entries are closed.
    c.execute_command('SECKILL.DRAW', 'd:{e}', 'COUNT', 1)
    env.assertEqual(c.execute_command('SECKILL.ENTER', 'd:{e}', 'carol'), ['DRAWN', 2])
    env.assertEqual(c.execute_command('SECKILL.ENTER', 'd:{e}', 'bob'), ['ALREADY_ENTERED', 2])


def test_enter_bad_arguments_change_nothing():
    env, c = _env()
    _draw_sale(c, 'd:{b}', 5, 60000, 'LIMIT', 2)
    c.execute_command('SECKILL.ENTER', 'd:{b}', 'alice', 'REQID', 'taken')
    c.execute_command('SECKILL.INIT', 'plain:{b}', 5)
    cases = [
        (['SECKILL.ENTER', 'd:{b}'], 'wrong number of arguments'),
        (['SECKILL.ENTER', 'd:{b}', 'bob', 'QTY', 3], "QTY is above the sale's LIMIT"),
        (['SECKILL.ENTER', 'd:{b}', 'bob', 'QTY', 0], 'QTY'),
        (['SECKILL.ENTER', 'd:{b}', 'bob', 'QTY', -1], 'QTY'),
        (['SECKILL.ENTER', 'd:{b}', 'bob', 'QTY', 'x'], 'QTY'),
        (['SECKILL.ENTER', 'd:{b}', 'bob', 'QTY'], 'QTY'),
        (['SECKILL.ENTER', 'd:{b}', 'bob', 'QTY', 1, 'QTY', 1], 'given twice'),
        (['SECKILL.ENTER', 'd:{b}', 'bob', 'REQID', ''], 'REQID'),
        (['SECKILL.ENTER', 'd:{b}', 'bob', 'REQID', 'r' * 257], 'REQID'),
        (['SECKILL.ENTER', 'd:{b}', 'bob', 'REQID', 'taken'], "REQID is already another entrant's"),
        (['SECKILL.ENTER', 'd:{b}', '', 'QTY', 1], 'user'),
        (['SECKILL.ENTER', 'd:{b}', 'u' * 257], 'user'),
        (['SECKILL.ENTER', 'd:{b}', 'bob', 'FOO'], 'unknown option'),
        (['SECKILL.ENTER', 'plain:{b}', 'bob'], 'not a draw sale'),
    ]
    for args, text in cases:
        _refused(env, c, args, text)
    c.execute_command('SET', 'str:{b}', 'x')
    _refused(env, c, ['SECKILL.ENTER', 'str:{b}', 'bob'], 'WRONGTYPE')
    env.assertEqual(_entrants(c, 'd:{b}'), [('alice', 1, 'entered')])


# --------------------------------------------------------------------- DRAW

def test_draw_bad_arguments_change_nothing():
    env, c = _env()
    _draw_sale(c, 'd:{x}', 5, 60000)
    c.execute_command('SECKILL.ENTER', 'd:{x}', 'alice')
    c.execute_command('SECKILL.INIT', 'plain:{x}', 5)
    for args, text in [
        (['SECKILL.DRAW', 'd:{x}'], 'registration is open until END'),
        (['SECKILL.DRAW', 'd:{missing}'], 'no such sale'),
        (['SECKILL.DRAW', 'plain:{x}'], 'not a draw sale'),
        (['SECKILL.DRAW'], 'wrong number of arguments'),
        (['SECKILL.DRAW', 'd:{x}', 'COUNT', 0], 'COUNT'),
        (['SECKILL.DRAW', 'd:{x}', 'COUNT', 1001], 'COUNT'),
        (['SECKILL.DRAW', 'd:{x}', 'COUNT', 'many'], 'COUNT'),
        (['SECKILL.DRAW', 'd:{x}', 'COUNT'], 'COUNT'),
        (['SECKILL.DRAW', 'd:{x}', 'LIMIT', 1], 'unknown option'),
        (['SECKILL.ENTRANTS', 'plain:{x}', 0], 'not a draw sale'),
        (['SECKILL.ENTRANTS', 'd:{x}'], 'wrong number of arguments'),
        (['SECKILL.ENTRANTS', 'd:{x}', 'x'], 'cursor'),
        (['SECKILL.ENTRANTS', 'd:{x}', 0, 'COUNT', 0], 'COUNT'),
        (['SECKILL.ENTRANTS', 'd:{x}', 0, 'COUNT', 1001], 'COUNT'),
    ]:
        _refused(env, c, args, text)
    env.assertEqual(c.execute_command('SECKILL.ENTRANTS', 'd:{missing}', 0), ['0', []])  # a cursor is a string, as SCAN's
    env.assertIsNone(info(c, 'd:{x}')['seed'])


def test_draw_beacon_errors_change_nothing():
    env, c = _env()
    end = _draw_sale(c, 'd:{bc}', 3, 2000, 'BEACON', 'drand round 9')
    end = max(end, _draw_sale(c, 'd:{nb}', 3, 2000))   # created later: it ends later
    for key in ('d:{bc}', 'd:{nb}'):
        for i in range(10):
            c.execute_command('SECKILL.ENTER', key, 'u%d' % i)
    # Registration still open: that error comes first.
    _refused(env, c, ['SECKILL.DRAW', 'd:{bc}', 'BEACON', 'v'], 'registration is open until END')
    _after(c, end)
    digest_before = info(c, 'd:{bc}')['entrants_digest']
    for args, text in [
        (['SECKILL.DRAW', 'd:{bc}'], 'the sale declared a beacon: the first DRAW needs BEACON value'),
        (['SECKILL.DRAW', 'd:{bc}', 'COUNT', 1], 'the sale declared a beacon: the first DRAW needs BEACON value'),
        (['SECKILL.DRAW', 'd:{bc}', 'BEACON', ''], 'BEACON value must be 1 to 1024 bytes'),
        (['SECKILL.DRAW', 'd:{bc}', 'BEACON', 'v' * 1025], 'BEACON value must be 1 to 1024 bytes'),
        (['SECKILL.DRAW', 'd:{bc}', 'BEACON'], 'BEACON'),
        (['SECKILL.DRAW', 'd:{bc}', 'BEACON', 'a', 'BEACON', 'a'], 'given twice'),
        (['SECKILL.DRAW', 'd:{nb}', 'BEACON', 'v'], 'the sale declared no beacon'),
        (['SECKILL.DRAW', 'd:{missing}', 'BEACON', 'v'], 'no such sale'),
    ]:
        _refused(env, c, args, text)
    r = _draw_info(env, c, 'd:{bc}')
    env.assertEqual((r['entrants_digest'], r['seed'], r['beacon_value'], r['draw_seed'], r['draw_stock']),
                    (digest_before, None, None, None, None))
    # BEACON and COUNT in any order; the first DRAW fixes the value.
    env.assertEqual(c.execute_command('SECKILL.DRAW', 'd:{bc}', 'BEACON', 'v1', 'COUNT', 1), [1, 2, 9])
    _refused(env, c, ['SECKILL.DRAW', 'd:{bc}', 'BEACON', 'v2'], 'BEACON differs from the value the draw began with')
    env.assertEqual(c.execute_command('SECKILL.DRAW', 'd:{bc}', 'COUNT', 1, 'BEACON', 'v1'), [1, 1, 8])
    env.assertEqual(c.execute_command('SECKILL.DRAW', 'd:{bc}'), [1, 0, 0])
    r = _draw_info(env, c, 'd:{bc}')
    env.assertEqual((r['beacon'], r['beacon_value'], r['entrants_digest']), ('drand round 9', 'v1', digest_before))
    # A sale without a beacon draws without one.
    env.assertEqual(c.execute_command('SECKILL.DRAW', 'd:{nb}'), [3, 0, 0])
    env.assertIsNone(info(c, 'd:{nb}')['beacon_value'])


def test_order_is_the_recomputation_and_the_beacon_moves_it():
    """The same entrants, two sales, two beacon values: the order each
    shows is the recomputation from (seed, entrants, beacon_value), its
    digest and draw seed too; the two orders differ."""
    env, c = _env()
    entrants = [('s%02d' % i, 1 + i % 3) for i in range(40)]
    ends = []
    for key in ('d:{b1}', 'd:{b2}', 'd:{b3}'):
        ends.append(_draw_sale(c, key, 12, 500, 'LIMIT', 3, 'BEACON', 'drand round 77'))
        for u, q in entrants:
            c.execute_command('SECKILL.ENTER', key, u, 'QTY', q)
    _after(c, max(ends))
    orders = {}
    for key, value in (('d:{b1}', 'value A'), ('d:{b2}', 'value B'), ('d:{b3}', 'value A')):
        c.execute_command('SECKILL.DRAW', key, 'COUNT', 2, 'BEACON', value)
        _draw_all(c, key, count=3)
        r = _draw_info(env, c, key)
        got = _entrants(c, key)
        env.assertEqual([(u, q) for u, q, _ in got], entrants)
        d, s, order = _draw_order(r['seed'], entrants, value)
        env.assertEqual((r['entrants_digest'], r['draw_seed'], r['beacon_value']), (d, s, value))
        env.assertEqual(hashlib.sha256(bytes.fromhex(r['seed'])).hexdigest(), r['seed_commitment'])
        env.assertEqual(hashlib.sha256(bytes.fromhex(r['seed']) + bytes.fromhex(d) + value.encode()).hexdigest(), s)
        winners = _expected_winners(r['seed'], entrants, 12, value)
        env.assertEqual(sorted((u, q) for u, q, res in got if res == 'drawn'), sorted(winners))
        orders[key] = order
    # Same entrants, different beacon values: different orders (the secrets
    # differ as well; the recomputation with one secret shows the beacon alone moves it).
    env.assertNotEqual(orders['d:{b1}'], orders['d:{b2}'])
    seed = info(c, 'd:{b1}')['seed']
    env.assertNotEqual(_draw_order(seed, entrants, 'value A')[2], _draw_order(seed, entrants, 'value B')[2])


def _secret_from_dump(raw, key, commitment):
    """What the issue's attacker did: the 32 bytes of DUMP (of the sale, or
    of the library's <key>:secret) whose SHA-256 is the public commitment."""
    for k in (key, key + ':secret'):
        payload = raw.dump(k) or b''
        for i in range(len(payload) - 31):
            if hashlib.sha256(payload[i:i + 32]).hexdigest() == commitment:
                return payload[i:i + 32].hex()
    return None


def _first_places(s, n, k):
    """The arrival indices of the first k places of the draw order under S."""
    a = {}
    for j in range(k):
        t = j + _uniform(s, j, n - j)
        a[j], a[t] = a.get(t, t), a.get(j, j)
    return [a[j] for j in range(k)]


def _grind_sybils(secret_hex, honest, guess):
    """Three sybil ids (entering last, QTY 1) that take all three places a
    draw of three units hands out, were the beacon value `guess`."""
    secret, first = bytes.fromhex(secret_hex), ['sybil-a', 'sybil-b']
    n = len(honest) + 3
    prefix = _entrants_digest(honest + [(u, 1) for u in first])
    for i in range(2000000):
        ids = first + ['sybil-c%d' % i]
        u = ids[-1].encode()
        d = hashlib.sha256(prefix + struct.pack('>I', len(u)) + u + struct.pack('>I', 1)).digest()
        if sorted(_first_places(hashlib.sha256(secret + d + guess).digest(), n, 3)) == [n - 3, n - 2, n - 1]:
            return ids
    raise AssertionError('no sybil id found')


def test_a_secret_read_before_end_places_winners_only_without_a_beacon():
    """The issue's attack on draw v2: a front end with DUMP (or the library's
    <key>:secret) reads the secret before END, enters last with three ids
    ground offline against it, and takes all three units of a sale that
    declared no beacon (docs/draw-sales.md's table says so). The same
    grinding against a sale with a beacon must guess the value the first
    DRAW takes, which does not exist before END: the sybils win no more
    than chance (all three: 1 in C(63, 3) = 39,711)."""
    env, c = _env()
    host, port, path = conn_address(c)
    raw = redis.Redis(unix_socket_path=path) if path else redis.Redis(host=host, port=port)
    # DUMP's payload is LZF-compressed; an attacker decompresses it, the
    # test asks for it uncompressed instead.
    c.execute_command('CONFIG', 'SET', 'rdbcompression', 'no')
    end = _draw_sale(c, 'd:{nb}', 3, 6000)
    end = max(end, _draw_sale(c, 'd:{bc}', 3, 6000, 'BEACON', 'drand quicknet round 42'))
    honest = [('honest-%d' % i, 1) for i in range(60)]
    sybils = {}
    for key in ('d:{nb}', 'd:{bc}'):
        for user, _qty in honest:
            c.execute_command('SECKILL.ENTER', key, user)
        secret = _secret_from_dump(raw, key, info(c, key)['seed_commitment'])
        env.assertIsNotNone(secret, message='the secret was not in DUMP')
        sybils[key] = _grind_sybils(secret, honest, b'')
        for user in sybils[key]:
            env.assertEqual(c.execute_command('SECKILL.ENTER', key, user)[0], 'ENTERED')
    env.assertTrue(server_ms(c) < end, message='registration closed before the sybils entered')
    _after(c, end)
    c.execute_command('SECKILL.DRAW', 'd:{nb}')
    c.execute_command('SECKILL.DRAW', 'd:{bc}', 'BEACON', 'the round published after END')
    won = {k: sorted(u for u, _q, r in _entrants(c, k) if r == 'drawn') for k in sybils}
    env.assertEqual(won['d:{nb}'], sorted(sybils['d:{nb}']))          # the attack works without a beacon
    env.assertLess(len(set(won['d:{bc}']) & set(sybils['d:{bc}'])), 3)  # and not with one
    raw.close()


def test_replace_after_end_changes_the_commitment():
    env, c = _env()
    end = _draw_sale(c, 'd:{rp}', 3, 300)
    for i in range(5):
        c.execute_command('SECKILL.ENTER', 'd:{rp}', 'u%d' % i)
    published = info(c, 'd:{rp}')['seed_commitment']
    _after(c, end)
    # The shop starts the sale again after END: the published commitment no longer matches.
    _draw_sale(c, 'd:{rp}', 3, 300, 'REPLACE')
    r = _draw_info(env, c, 'd:{rp}')
    env.assertNotEqual(r['seed_commitment'], published)
    env.assertEqual((r['entrants'], r['entrants_digest']), (0, '0' * 64))


def test_draw_in_bounded_calls_follows_the_seed():
    env, c = _env()
    skey = 'd:{o}:events'
    end = _draw_sale(c, 'd:{o}', 10, 500, 'HOLD', 60000, 'STREAM', skey)
    users = ['user-%03d' % i for i in range(50)]
    for n, u in enumerate(users, 1):
        args = ['SECKILL.ENTER', 'd:{o}', u] + (['REQID', 'order-' + u] if n % 2 else [])
        env.assertEqual(c.execute_command(*args), ['ENTERED', n])
    commitment = info(c, 'd:{o}')['seed_commitment']
    _after(c, end)

    replies = _draw_all(c, 'd:{o}', count=3)
    env.assertEqual(replies, [(3, 7, 47), (3, 4, 44), (3, 1, 41), (1, 0, 0)])
    r = _draw_info(env, c, 'd:{o}')
    seed = r['seed']
    env.assertEqual(hashlib.sha256(bytes.fromhex(seed)).hexdigest(), commitment)
    env.assertEqual((r['entrants'], r['drawn'], r['left_to_draw'], r['waitlist'], r['draw_stock']),
                    (50, 10, 0, 40, 10))
    env.assertEqual((r['remaining'], r['pending'], r['buyers'], r['reservations']), (0, 10, 10, 10))

    env.assertEqual(r['entrants_digest'], _entrants_digest([(u, 1) for u in users]).hex())
    winners = _expected_winners(seed, [(u, 1) for u in users], 10)
    won = [u for u, _, result in _entrants(c, 'd:{o}') if result == 'drawn']
    env.assertEqual(sorted(won), sorted(u for u, _ in winners))
    # The stream has the commitment, then the winners in draw order, marked as drawn; a REQID is the reservation id.
    entries = _stream(c, skey)
    env.assertEqual((entries[0]['event'], entries[0]['commitment'], entries[0]['beacon']), ('draw_committed', commitment, ''))
    entries = entries[1:]
    env.assertEqual([(e['event'], e['user'], e['qty'], e['via']) for e in entries],
                    [('reserved', u, '1', 'draw') for u, _ in winners])
    for e in entries:
        n = users.index(e['user']) + 1
        if n % 2:
            env.assertEqual(e['rid'], 'order-' + e['user'])
        g = as_dict(c.execute_command('SECKILL.GET', 'd:{o}', e['rid']))
        env.assertEqual((g['user'], g['state'], int(g['deadline_ms']) - int(g['created_ms'])),
                        (e['user'], 'pending', 60000))

    # A finished draw: DRAW again changes nothing.
    before = digest(c)
    env.assertEqual(c.execute_command('SECKILL.DRAW', 'd:{o}'), [0, 0, 0])
    env.assertEqual(digest(c), before)


def test_winners_are_taken_while_their_qty_fits():
    env, c = _env()
    end = _draw_sale(c, 'd:{q}', 7, 400, 'LIMIT', 4)
    entrants = [('u%02d' % i, 1 + i % 4) for i in range(30)]
    for u, q in entrants:
        c.execute_command('SECKILL.ENTER', 'd:{q}', u, 'QTY', q)
    _after(c, end)
    _draw_all(c, 'd:{q}', count=1)
    r = _draw_info(env, c, 'd:{q}')
    winners = _expected_winners(r['seed'], entrants, 7)
    got = [(u, q) for u, q, result in _entrants(c, 'd:{q}') if result == 'drawn']
    env.assertEqual(sorted(got), sorted(winners))
    env.assertEqual(r['pending'], sum(q for _, q in winners))
    env.assertEqual(r['drawn'], len(winners))
    env.assertEqual(r['waitlist'], 30 - len(winners))


def test_interrupted_draw_is_finished_by_another_client():
    env, c = _env()
    end = _draw_sale(c, 'd:{i}', 40, 400)
    users = ['p%d' % i for i in range(200)]
    for u in users:
        c.execute_command('SECKILL.ENTER', 'd:{i}', u)
    _after(c, end)
    env.assertEqual(c.execute_command('SECKILL.DRAW', 'd:{i}', 'COUNT', 7), [7, 33, 193])
    c.close()  # the drawing client dies between two calls
    c2 = env.getConnection()
    _draw_all(c2, 'd:{i}', count=5)
    r = _draw_info(env, c2, 'd:{i}')
    winners = _expected_winners(r['seed'], [(u, 1) for u in users], 40)
    env.assertEqual(sorted(u for u, _, res in _entrants(c2, 'd:{i}') if res == 'drawn'),
                    sorted(u for u, _ in winners))


def test_entrants_pages_in_arrival_order():
    env, c = _env()
    _draw_sale(c, 'd:{p}', 5, 60000, 'LIMIT', 3)
    users = ['e%04d' % (997 * i % 1000) for i in range(250)]
    for i, u in enumerate(users):
        c.execute_command('SECKILL.ENTER', 'd:{p}', u, 'QTY', 1 + i % 3)
    pages = []
    cursor = 0
    while True:
        cursor, flat = c.execute_command('SECKILL.ENTRANTS', 'd:{p}', cursor, 'COUNT', 100)
        pages.append(len(flat) // 3)
        if str(cursor) == '0':
            break
    env.assertEqual(pages, [100, 100, 50])
    env.assertEqual(_entrants(c, 'd:{p}', count=7), [(u, 1 + i % 3, 'entered') for i, u in enumerate(users)])
    # The default page is 100.
    _, flat = c.execute_command('SECKILL.ENTRANTS', 'd:{p}', 0)
    env.assertEqual(len(flat), 300)


# ----------------------------------------------------------------- waitlist

def _sold_draw(env, c, key, stock, n, skey=None, hold=60000):
    opts = ['HOLD', hold] + (['STREAM', skey] if skey else [])
    end = _draw_sale(c, key, stock, 400, *opts)
    users = ['w%02d' % i for i in range(n)]
    for u in users:
        c.execute_command('SECKILL.ENTER', key, u, 'REQID', 'rid-' + u)
    _after(c, end)
    _draw_all(c, key)
    seed = info(c, key)['seed']
    return [u for u, _ in _draw_order(seed, [(u, 1) for u in users])[2]]


def test_waitlist_takes_released_units_in_draw_order():
    env, c = _env()
    skey = 'd:{w}:ev'
    order = _sold_draw(env, c, 'd:{w}', 3, 6, skey)
    # The first three in draw order won; a RELEASE promotes the fourth.
    env.assertEqual(c.execute_command('SECKILL.RELEASE', 'd:{w}', 'rid-' + order[1]), ['RELEASED', 0])
    results = {u: res for u, _, res in _entrants(c, 'd:{w}')}
    env.assertEqual([results[u] for u in order], ['drawn', 'drawn', 'drawn', 'promoted', 'entered', 'entered'])
    g = as_dict(c.execute_command('SECKILL.GET', 'd:{w}', 'rid-' + order[3]))
    env.assertEqual((g['user'], g['state']), (order[3], 'pending'))
    last = _stream(c, skey)[-2:]
    env.assertEqual([(e['event'], e['user']) for e in last], [('released', order[1]), ('reserved', order[3])])
    env.assertEqual(last[1]['via'], 'waitlist')
    r = _draw_info(env, c, 'd:{w}')
    env.assertEqual((r['drawn'], r['waitlist'], r['remaining'], r['pending']), (4, 2, 0, 3))

    # A confirmed winner keeps its unit; releasing the rest drains the waitlist, then stock stays.
    c.execute_command('SECKILL.CONFIRM', 'd:{w}', 'rid-' + order[0])
    for u in (order[2], order[3]):
        c.execute_command('SECKILL.RELEASE', 'd:{w}', 'rid-' + u)
    r = _draw_info(env, c, 'd:{w}')
    env.assertEqual((r['drawn'], r['waitlist'], r['remaining'], r['pending'], r['confirmed']), (6, 0, 0, 2, 1))
    for u in (order[4], order[5]):
        env.assertEqual(c.execute_command('SECKILL.RELEASE', 'd:{w}', 'rid-' + u), ['RELEASED', 1 + (u == order[5])])
    r = _draw_info(env, c, 'd:{w}')
    env.assertEqual((r['waitlist'], r['remaining'], r['pending'], r['confirmed']), (0, 2, 0, 1))
    # A loser's retry of ENTER is recognised, and RESERVE stays refused.
    env.assertEqual(reserve(c, 'd:{w}', 'latecomer'), ['DRAW', None, 2])


def test_waitlist_through_hold_expiry():
    env, c = _env()
    order = _sold_draw(env, c, 'd:{h}', 2, 5, hold=300)
    # Every hold runs out: each expiry promotes the next entrant, until the waitlist is empty.
    def drained():
        r = info(c, 'd:{h}')
        return r['waitlist'] == 0 and r['pending'] == 0 and r
    r = wait_for(drained, timeout=15, interval=0.05)
    env.assertTrue(r, message='the waitlist did not drain through expiry: %r' % (info(c, 'd:{h}'),))
    r = _draw_info(env, c, 'd:{h}')
    env.assertEqual((r['drawn'], r['remaining'], r['expired']), (5, 2, 5))
    results = {u: res for u, _, res in _entrants(c, 'd:{h}')}
    env.assertEqual([results[u] for u in order], ['drawn', 'drawn', 'promoted', 'promoted', 'promoted'])


def test_waitlist_through_reconcile():
    env, c = _env()
    order = _sold_draw(env, c, 'd:{c}', 2, 4, hold=200)
    time.sleep(0.3)
    # RECONCILE EXPIRE releases the two expired winners (unless the timer was
    # first); either way their units go to the next two in draw order.
    rep = as_dict(c.execute_command('SECKILL.RECONCILE', 'd:{c}', 'EXPIRE'))
    env.assertEqual(rep['pending'] + rep['remaining'] + rep['confirmed'], rep['total'])
    results = {u: res for u, _, res in _entrants(c, 'd:{c}')}
    env.assertEqual([results[u] for u in order], ['drawn', 'drawn', 'promoted', 'promoted'])
    # Once those holds ran out too, the ledger says the first winner paid:
    # APPLY takes its unit back from the stock the waitlist left.
    env.assertTrue(wait_for(lambda: info(c, 'd:{c}')['pending'] == 0, timeout=10))
    rid = 'rid-' + order[0]
    rep = as_dict(c.execute_command('SECKILL.RECONCILE', 'd:{c}', 'ORDERS', 1, rid, order[0], 1, 'APPLY'))
    env.assertEqual(rep['invariant'], 'ok')
    env.assertEqual(as_dict(c.execute_command('SECKILL.GET', 'd:{c}', rid))['state'], 'confirmed')


def test_reconcile_takes_no_draw_stock_outside_the_draw():
    """RECONCILE on a draw sale: an order that is no reservation the draw
    made (an unknown id, even a winner's user, any QTY) is a conflict, with
    or without APPLY, and takes nothing; a winner's own order is ok."""
    env, c = _env()
    order = _sold_draw(env, c, 'd:{o}', 10, 3)
    before = info(c, 'd:{o}')
    env.assertEqual(before['remaining'], 7)
    rows = ['ORDERS', 3, 'x1', 'outsider', 7, 'x2', order[0], 1, 'rid-' + order[1], order[1], 1]
    for tail in ([], ['APPLY']):
        rep = as_dict(c.execute_command('SECKILL.RECONCILE', 'd:{o}', *rows, *tail))
        env.assertEqual((rep['orders_conflict'], rep['orders_unknown'], rep['orders_pending']), (2, 0, 1))
        env.assertEqual(sorted(rep['orders_conflict_ids']), ['x1', 'x2'])
        env.assertEqual(rep['remaining'], 7)
    env.assertIsNone(c.execute_command('SECKILL.GET', 'd:{o}', 'x1'))
    env.assertEqual(info(c, 'd:{o}')['invariant'], 'ok')


# -------------------------------------------------------------- persistence

def _far_fit(env, c, key, n=40000, min_gap=2 * SCAN_STEPS):
    """Every entrant asks for 2 units but two ask for 1, and the stock is 1
    unit: the draw gives it to the first of the two in draw order and is
    complete there, and a release of its unit must reach the other, usually
    thousands of places past those the draw produced. The sale is drawn
    again (INIT REPLACE, a new secret) until the other is at least min_gap
    places on, five times at most. Returns (first, second, gap)."""
    for _ in range(5):
        end = _draw_sale(c, key, 1, 3000, 'LIMIT', 2, 'HOLD', 600000, 'REPLACE')
        entrants = [('f%05d' % i, 1 if i < 2 else 2) for i in range(n)]
        p = c.pipeline(transaction=False)
        for i, (u, q) in enumerate(entrants):
            p.execute_command('SECKILL.ENTER', key, u, 'QTY', q, *(['REQID', 'rid-' + u] if q == 1 else []))
            if i % 5000 == 4999:
                p.execute()
        p.execute()
        env.assertEqual(info(c, key)['entrants'], n, depth=1)
        _after(c, end)
        _draw_all(c, key)
        order = [u for u, _ in _draw_order(info(c, key)['seed'], entrants)[2]]
        first, second = [u for u in order if u < 'f00002']
        gap = order.index(second) - order.index(first)
        if gap >= min_gap:
            break
    results = {u: res for u, _, res in _entrants(c, key, 1000)}
    env.assertEqual((results[first], results[second]), ('drawn', 'entered'), depth=1)
    return first, second, gap


def test_waitlist_search_past_the_draw_continues_on_the_timer():
    """A release whose unit fits only an entrant far past the places the
    draw produced (_far_fit): a command produces at most 2048 new places of
    the order (rules::sale::SCAN_STEPS), the timer's visits the rest, with
    no other write. The entrant promoted is the contract's, the promotion
    reaches the replica as an effect, and a copy restored in the middle of
    the search finishes it too."""
    env, c = _env(useSlaves=True)
    key, n = 'd:{far}', 40000
    first, second, gap = _far_fit(env, c, key, n)
    visits = seckill_stats(c)['expiry_visits']
    # The sale as the RELEASE's own step left it, the search stopped at its bound.
    host, port, path = conn_address(c)
    with redis.Redis(host=host, port=port, unix_socket_path=path) as raw:
        p = raw.pipeline(transaction=True)
        p.execute_command('SECKILL.RELEASE', key, 'rid-' + first)
        p.dump(key)
        _, payload = p.execute()

    def promoted():
        r = info(c, key)
        return r['remaining'] == 0 and r
    r = wait_for(promoted, timeout=10, interval=0.05)
    env.assertTrue(r, message='the promotion did not come: %r' % (info(c, key),))
    results = {u: res for u, _, res in _entrants(c, key, 1000)}
    env.assertEqual(results[second], 'promoted')
    env.assertEqual(sum(1 for res in results.values() if res == 'promoted'), 1)
    g = as_dict(c.execute_command('SECKILL.GET', key, 'rid-' + second))
    env.assertEqual((g['user'], g['qty'], g['state']), (second, 1, 'pending'))
    r = _draw_info(env, c, key)
    env.assertEqual((r['drawn'], r['waitlist'], r['pending']), (2, n - 2, 1))
    # The RELEASE's own step, then one timer visit per 2048 places more.
    env.assertEqual(seckill_stats(c)['expiry_visits'] - visits, -(-gap // SCAN_STEPS) - 1,
                    message='the other entrant %d places on' % gap)
    # A copy loaded in the middle of the search (RESTORE; a restart loads
    # the same way) remembers nothing of it: it is visited at once, and its
    # search starts again from the places its draw looked at.
    c.restore(key + ':copy', 0, payload)
    copied = wait_for(lambda: info(c, key + ':copy')['remaining'] == 0, timeout=10, interval=0.05)
    env.assertTrue(copied, message='the copy promoted nobody: %r' % (info(c, key + ':copy'),))
    env.assertEqual(_entrants(c, key + ':copy', 1000), _entrants(c, key, 1000))
    replica_caught_up(env, c)
    replica = env.getSlaveConnection()
    env.assertEqual(digest(replica), digest(c))
    env.assertEqual(_entrants(replica, key, 1000), _entrants(c, key, 1000))


def test_waitlist_search_stopped_by_a_restart_goes_on():
    """A server restarted in the middle of a waitlist search (its RDB saved
    right after the release's own step) remembers nothing of it: the load
    visits the sale, and the search goes on from the places the draw
    looked at to the same entrant."""
    env, c = _env()
    key = 'd:{far}'
    first, second, gap = _far_fit(env, c, key)
    c.config_set('save', '')
    # The timer writes nothing while writes are paused: the search stays
    # where the RELEASE's own step stopped it while the RDB is saved.
    p = c.pipeline(transaction=True)
    p.execute_command('SECKILL.RELEASE', key, 'rid-' + first)
    p.execute_command('CLIENT', 'PAUSE', 10000, 'WRITE')
    p.execute()
    env.assertEqual(info(c, key)['remaining'], 1)
    c.execute_command('BGSAVE')
    env.assertTrue(wait_for(lambda: c.info('persistence')['rdb_bgsave_in_progress'] == 0, timeout=10))
    env.assertEqual((c.info('persistence')['rdb_last_bgsave_status'], c.info('persistence')['rdb_saves']), ('ok', 1))
    env.stop()
    env.start()
    c = env.getConnection()
    r = wait_for(lambda: info(c, key)['remaining'] == 0 and info(c, key), timeout=10, interval=0.05)
    env.assertTrue(r, message='nobody promoted after the restart: %r (the other %d places on)' % (info(c, key), gap))
    results = {u: res for u, _, res in _entrants(c, key, 1000)}
    env.assertEqual((results[first], results[second]), ('drawn', 'promoted'))
    env.assertEqual(sum(1 for res in results.values() if res == 'promoted'), 1)


def test_waitlist_search_stopped_by_a_failover_goes_on():
    """A replica promoted in the middle of a waitlist search (the master's
    writes paused right after the release's own step) goes on with it: the
    replayed RELEASE had the sale visited once the replica decides."""
    env, c = _env(useSlaves=True)
    key = 'd:{far}'
    first, second, gap = _far_fit(env, c, key)
    p = c.pipeline(transaction=True)
    p.execute_command('SECKILL.RELEASE', key, 'rid-' + first)
    p.execute_command('CLIENT', 'PAUSE', 10000, 'WRITE')
    p.execute()
    replica_caught_up(env, c)
    replica = env.getSlaveConnection()
    env.assertEqual((info(c, key)['remaining'], info(replica, key)['remaining']), (1, 1))
    replica.execute_command('REPLICAOF', 'NO', 'ONE')
    r = wait_for(lambda: info(replica, key)['remaining'] == 0, timeout=10, interval=0.05)
    env.assertTrue(r, message='nobody promoted after the failover: %r (the other %d places on)' % (info(replica, key), gap))
    results = {u: res for u, _, res in _entrants(replica, key, 1000)}
    env.assertEqual((results[first], results[second]), ('drawn', 'promoted'))
    env.assertEqual(sum(1 for res in results.values() if res == 'promoted'), 1)
    c.execute_command('CLIENT', 'UNPAUSE')


def _mid_draw_state(c, key, skey):
    """Entrants, a partial draw (begun with a beacon value), a finished one
    and a waitlist promotion; a second sale whose draw has not begun."""
    end = _draw_sale(c, key, 20, 400, 'LIMIT', 2, 'HOLD', 600000, 'STREAM', skey, 'BEACON', 'drand round 42')
    c.execute_command('SECKILL.INIT', key + ':open', 5, 'END', end + 600000, 'DRAW', 'BEACON', 'later')
    for i in range(120):
        c.execute_command('SECKILL.ENTER', key, 'm%03d' % i, 'QTY', 1 + i % 2, *(['REQID', 'q%d' % i] if i % 3 else []))
        if i % 10 == 0:
            c.execute_command('SECKILL.ENTER', key + ':open', 'm%03d' % i)
    _after(c, end)
    c.execute_command('SECKILL.DRAW', key, 'COUNT', 4, 'BEACON', 'value of round 42')
    _draw_all(c, key, count=5)
    rid = c.execute_command('XRANGE', skey, '-', '+', 'COUNT', 2)[1][1]['rid']
    c.execute_command('SECKILL.RELEASE', key, rid)


def test_replica_and_reloads_are_digest_equal():
    env, c = _env(useSlaves=True)
    _mid_draw_state(c, 'd:{s}', 'd:{s}:ev')
    replica_caught_up(env, c)
    replica = env.getSlaveConnection()
    env.assertEqual(digest(replica), digest(c))
    env.assertEqual(replica.execute_command('SECKILL.INFO', 'd:{s}'), c.execute_command('SECKILL.INFO', 'd:{s}'))
    env.assertEqual(_entrants(replica, 'd:{s}'), _entrants(c, 'd:{s}'))
    r = _draw_info(env, c, 'd:{s}')
    env.assertEqual((r['beacon'], r['beacon_value']), ('drand round 42', 'value of round 42'))
    entrants = [(u, q) for u, q, _ in _entrants(c, 'd:{s}')]
    d, s, _ = _draw_order(r['seed'], entrants, r['beacon_value'])
    env.assertEqual((r['entrants_digest'], r['draw_seed']), (d, s))

    before, report = digest(c), c.execute_command('SECKILL.INFO', 'd:{s}')
    open_report = c.execute_command('SECKILL.INFO', 'd:{s}:open')
    env.dumpAndReload(restart=True)
    c = env.getConnection()
    env.assertEqual((digest(c), c.execute_command('SECKILL.INFO', 'd:{s}')), (before, report))
    env.assertEqual(c.execute_command('SECKILL.INFO', 'd:{s}:open'), open_report)

    # DUMP and RESTORE of every key of the sale.
    keys = sorted(c.keys('*{s}*'))
    dumps = {k: c.dump(k) for k in keys}
    c.delete(*keys)
    for k, payload in dumps.items():
        c.restore(k, 0, payload)
    env.assertEqual(digest(c), before)
    # The restored sale keeps drawing and promoting as before.
    st, _ = c.execute_command('SECKILL.ENTER', 'd:{s}', 'late')
    env.assertEqual(st, 'DRAWN')


def _aof(rewrite, preamble):
    env, c = _env(useAof=True, useRdbPreamble=preamble)
    _mid_draw_state(c, 'd:{a}', 'd:{a}:ev')
    before, report = digest(c), c.execute_command('SECKILL.INFO', 'd:{a}')
    open_report = c.execute_command('SECKILL.INFO', 'd:{a}:open')
    restart_from_aof(env, rewrite)
    c = env.getConnection()
    env.assertEqual(digest(c), before)
    env.assertEqual(c.execute_command('SECKILL.INFO', 'd:{a}'), report)
    env.assertEqual(c.execute_command('SECKILL.INFO', 'd:{a}:open'), open_report)


def test_aof_replay():
    _aof(rewrite=False, preamble=False)


def test_aof_rewrite_without_rdb_preamble():
    _aof(rewrite=True, preamble=False)


def test_aof_rewrite_with_rdb_preamble():
    _aof(rewrite=True, preamble=True)


# ----------------------------------------------------------------- fairness

def test_every_entrant_wins_as_often_as_k_over_n():
    """2,000 draws with different seeds, 10 entrants, 3 units: each entrant's
    win count must be consistent with 3/10 (chi-square, 9 degrees of
    freedom, p > 0.001). This checks the order's statistics, not timing."""
    env, c = _env()
    draws, n, k, batch = 2000, 10, 3, 200
    entered = 0
    for first in range(0, draws, batch):
        # Each batch's registration outlasts its ENTERs by far, even where
        # an ENTER hashes in Lua on a loaded machine.
        end = server_ms(c) + 5000
        p = c.pipeline(transaction=False)
        for d in range(first, first + batch):
            p.execute_command('SECKILL.INIT', 'f:{%d}' % d, k, 'END', end, 'DRAW')
            for u in range(n):
                p.execute_command('SECKILL.ENTER', 'f:{%d}' % d, 'u%d' % u)
        entered += sum(1 for r in p.execute() if isinstance(r, list) and r[0] == 'ENTERED')
    env.assertEqual(entered, draws * n)
    _after(c, end)
    p = c.pipeline(transaction=False)
    for d in range(draws):
        p.execute_command('SECKILL.DRAW', 'f:{%d}' % d)
    env.assertEqual(set(map(tuple, p.execute())), {(k, 0, 0)})

    wins, seeds = [0] * n, set()
    for d in range(draws):
        seeds.add(info(c, 'f:{%d}' % d)['seed'])
        for u, _, res in _entrants(c, 'f:{%d}' % d):
            if res == 'drawn':
                wins[int(u[1:])] += 1
    env.assertEqual(len(seeds), draws, message='seeds repeat')
    env.assertEqual(sum(wins), draws * k)
    expected = draws * k / n
    chi2 = sum((w - expected) ** 2 / expected for w in wins)
    env.assertLess(chi2, CHI2_9_P001, message='win counts %r (chi-square %.2f)' % (wins, chi2))
