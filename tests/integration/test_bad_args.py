"""Bad input: every refusal is an "ERR ..." reply naming the argument, and
changes nothing (DEBUG DIGEST of the whole dataset is the same afterwards)."""

from RLTest import Env

from seckill_helpers import PAST_64, RawConn, assert_replica_agrees, check_invariant, digest, get, info, reserve
from seckill_helpers import MODULE  # INFO seckill is the module's

K = 'sale:{1}'          # an existing sale
S = 'sale:{1}:ev'       # its stream
N = 'fresh:{1}'         # a key that does not exist (bad INIT must not create it)
LONG = 'x' * 257
ARITY = 'wrong number of arguments'

TABLE = [
    # ---------------------------------------------------------------- INIT
    (('SECKILL.INIT',), ARITY),
    (('SECKILL.INIT', K), ARITY),
    (('SECKILL.INIT', N), ARITY),
    (('SECKILL.INIT', N, 'abc'), 'TOTAL'),
    (('SECKILL.INIT', N, ''), 'TOTAL'),
    (('SECKILL.INIT', N, '1.5'), 'TOTAL'),
    (('SECKILL.INIT', N, '+1'), 'TOTAL'),
    (('SECKILL.INIT', N, ' 1'), 'TOTAL'),
    (('SECKILL.INIT', N, '0x10'), 'TOTAL'),
    (('SECKILL.INIT', N, '-1'), 'TOTAL'),
    (('SECKILL.INIT', N, PAST_64), 'TOTAL'),
    (('SECKILL.INIT', N, '99999999999999999999999'), 'TOTAL'),
    (('SECKILL.INIT', N, '1000000000000001'), 'TOTAL'),
    (('SECKILL.INIT', K, '-1', 'REPLACE'), 'TOTAL'),
    (('SECKILL.INIT', N, 10, 'SHARDS'), 'SHARDS'),
    (('SECKILL.INIT', N, 10, 'SHARDS', 0), 'SHARDS'),
    (('SECKILL.INIT', N, 10, 'SHARDS', 1025), 'SHARDS'),
    (('SECKILL.INIT', N, 10, 'SHARDS', -1), 'SHARDS'),
    (('SECKILL.INIT', N, 10, 'SHARDS', 'two'), 'SHARDS'),
    (('SECKILL.INIT', N, 10, 'SHARDS', PAST_64), 'SHARDS'),
    (('SECKILL.INIT', N, 10, 'SHARDS', 2, 'SHARDS', 2), 'SHARDS'),
    (('SECKILL.INIT', N, 10, 'shards', 2, 'SHARDS', 3), 'SHARDS'),
    (('SECKILL.INIT', K, 10, 'SHARDS', 0, 'REPLACE'), 'SHARDS'),
    (('SECKILL.INIT', N, 10, 'LIMIT'), 'LIMIT'),
    (('SECKILL.INIT', N, 10, 'LIMIT', 0), 'LIMIT'),
    (('SECKILL.INIT', N, 10, 'LIMIT', -1), 'LIMIT'),
    (('SECKILL.INIT', N, 10, 'LIMIT', 'one'), 'LIMIT'),
    (('SECKILL.INIT', N, 10, 'LIMIT', PAST_64), 'LIMIT'),
    (('SECKILL.INIT', N, 10, 'LIMIT', '1000000000000001'), 'LIMIT'),
    (('SECKILL.INIT', N, 10, 'LIMIT', 1, 'LIMIT', 1), 'LIMIT'),
    (('SECKILL.INIT', N, 10, 'HOLD'), 'HOLD'),
    (('SECKILL.INIT', N, 10, 'HOLD', -1), 'HOLD'),
    (('SECKILL.INIT', N, 10, 'HOLD', '1s'), 'HOLD'),
    (('SECKILL.INIT', N, 10, 'HOLD', PAST_64), 'HOLD'),
    (('SECKILL.INIT', N, 10, 'HOLD', 10, 'HOLD', 10), 'HOLD'),
    (('SECKILL.INIT', N, 10, 'START'), 'START'),
    (('SECKILL.INIT', N, 10, 'START', -1), 'START'),
    (('SECKILL.INIT', N, 10, 'START', 'now'), 'START'),
    (('SECKILL.INIT', N, 10, 'START', PAST_64), 'START'),
    (('SECKILL.INIT', N, 10, 'START', 1, 'START', 1), 'START'),
    (('SECKILL.INIT', N, 10, 'END'), 'END'),
    (('SECKILL.INIT', N, 10, 'END', 0), 'END'),
    (('SECKILL.INIT', N, 10, 'END', -1), 'END'),
    (('SECKILL.INIT', N, 10, 'END', 'later'), 'END'),
    (('SECKILL.INIT', N, 10, 'END', PAST_64), 'END'),
    (('SECKILL.INIT', N, 10, 'END', 9, 'END', 9), 'END'),
    (('SECKILL.INIT', N, 10, 'START', 5, 'END', 5), 'START'),
    (('SECKILL.INIT', N, 10, 'START', 6, 'END', 5), 'START'),
    (('SECKILL.INIT', K, 10, 'START', 6, 'END', 5, 'REPLACE'), 'START'),
    (('SECKILL.INIT', N, 10, 'TTL'), 'TTL'),
    (('SECKILL.INIT', N, 10, 'TTL', 0), 'TTL'),
    (('SECKILL.INIT', N, 10, 'TTL', -1), 'TTL'),
    (('SECKILL.INIT', N, 10, 'TTL', 'x'), 'TTL'),
    (('SECKILL.INIT', N, 10, 'TTL', PAST_64), 'TTL'),
    (('SECKILL.INIT', N, 10, 'TTL', '18446744073709551615'), 'TTL'),
    (('SECKILL.INIT', N, 10, 'TTL', 5, 'TTL', 5), 'TTL'),
    (('SECKILL.INIT', N, 10, 'STREAM'), 'STREAM'),
    (('SECKILL.INIT', N, 10, 'STREAM', 'other-slot'), 'STREAM'),
    (('SECKILL.INIT', 'a', 10, 'STREAM', 'b'), 'STREAM'),
    (('SECKILL.INIT', N, 10, 'STREAM', N), 'STREAM'),
    (('SECKILL.INIT', K, 10, 'STREAM', 'elsewhere', 'REPLACE'), 'STREAM'),
    (('SECKILL.INIT', N, 10, 'STREAM', 'fresh:{1}:a', 'STREAM', 'fresh:{1}:b'), 'STREAM'),
    (('SECKILL.INIT', N, 10, 'STREAM', 'fresh:{1}:a', 'MAXLEN'), 'MAXLEN'),
    (('SECKILL.INIT', N, 10, 'STREAM', 'fresh:{1}:a', 'MAXLEN', 0), 'MAXLEN'),
    (('SECKILL.INIT', N, 10, 'STREAM', 'fresh:{1}:a', 'MAXLEN', -1), 'MAXLEN'),
    (('SECKILL.INIT', N, 10, 'STREAM', 'fresh:{1}:a', 'MAXLEN', 'x'), 'MAXLEN'),
    (('SECKILL.INIT', N, 10, 'STREAM', 'fresh:{1}:a', 'MAXLEN', PAST_64), 'MAXLEN'),
    (('SECKILL.INIT', N, 10, 'STREAM', 'fresh:{1}:a', 'MAXLEN', 5, 'MAXLEN', 5), 'MAXLEN'),
    (('SECKILL.INIT', N, 10, 'MAXLEN', 5), 'MAXLEN'),
    (('SECKILL.INIT', N, 10, 'REPLACE', 'REPLACE'), 'REPLACE'),
    (('SECKILL.INIT', K, 10, 'REPLACE', 'REPLACE'), 'REPLACE'),
    (('SECKILL.INIT', N, 10, 'BOGUS'), 'BOGUS'),
    (('SECKILL.INIT', K, 10, 'REPLACE', 'BOGUS'), 'BOGUS'),
    (('SECKILL.INIT', N, 10, 5), 'option'),
    (('SECKILL.INIT', N, 10, ''), 'option'),
    # ------------------------------------------------------------- RESERVE
    (('SECKILL.RESERVE',), ARITY),
    (('SECKILL.RESERVE', K), ARITY),
    (('SECKILL.RESERVE', K, ''), 'user'),
    (('SECKILL.RESERVE', K, LONG), 'user'),
    (('SECKILL.RESERVE', 'nokey', ''), 'user'),
    (('SECKILL.RESERVE', 'nokey', 'u', 'QTY', 0), 'QTY'),
    (('SECKILL.RESERVE', K, 'u', 'QTY'), 'QTY'),
    (('SECKILL.RESERVE', K, 'u', 'QTY', 0), 'QTY'),
    (('SECKILL.RESERVE', K, 'u', 'QTY', -1), 'QTY'),
    (('SECKILL.RESERVE', K, 'u', 'QTY', 'one'), 'QTY'),
    (('SECKILL.RESERVE', K, 'u', 'QTY', '1.0'), 'QTY'),
    (('SECKILL.RESERVE', K, 'u', 'QTY', PAST_64), 'QTY'),
    (('SECKILL.RESERVE', K, 'u', 'QTY', '1000000000000001'), 'QTY'),
    (('SECKILL.RESERVE', K, 'u', 'QTY', 3), 'QTY'),          # above the sale's LIMIT 2
    (('SECKILL.RESERVE', K, 'u', 'QTY', 1, 'QTY', 1), 'QTY'),
    (('SECKILL.RESERVE', K, 'u', 'REQID'), 'REQID'),
    (('SECKILL.RESERVE', K, 'u', 'REQID', ''), 'REQID'),
    (('SECKILL.RESERVE', K, 'u', 'REQID', LONG), 'REQID'),
    (('SECKILL.RESERVE', K, 'u', 'REQID', 'a', 'REQID', 'b'), 'REQID'),
    (('SECKILL.RESERVE', K, 'u', 'REQID', 'a', 'QTY', 0), 'QTY'),
    (('SECKILL.RESERVE', K, 'u', 'BOGUS'), 'BOGUS'),
    (('SECKILL.RESERVE', K, 'u', 'REQID', 'a', 'BOGUS', 1), 'BOGUS'),
    (('SECKILL.RESERVE', K, 'u', 7), 'option'),
    # ----------------------------------------------------- RELEASE / CONFIRM
    (('SECKILL.RELEASE',), ARITY),
    (('SECKILL.RELEASE', K), ARITY),
    (('SECKILL.RELEASE', K, 'r1', 'extra'), ARITY),
    (('SECKILL.RELEASE', K, ''), 'reservation id'),
    (('SECKILL.RELEASE', K, LONG), 'reservation id'),
    (('SECKILL.RELEASE', 'nokey', ''), 'reservation id'),
    (('SECKILL.CONFIRM',), ARITY),
    (('SECKILL.CONFIRM', K), ARITY),
    (('SECKILL.CONFIRM', K, 'r1', 'extra'), ARITY),
    (('SECKILL.CONFIRM', K, ''), 'reservation id'),
    (('SECKILL.CONFIRM', K, LONG), 'reservation id'),
    # --------------------------------------------------------- INFO / GET
    (('SECKILL.INFO',), ARITY),
    (('SECKILL.INFO', K, 'extra'), ARITY),
    (('SECKILL.GET',), ARITY),
    (('SECKILL.GET', K), ARITY),
    (('SECKILL.GET', K, 'r1', 'extra'), ARITY),
    (('SECKILL.GET', K, ''), 'reservation id'),
    (('SECKILL.GET', K, LONG), 'reservation id'),
    # ----------------------------------------------------------- RECONCILE
    (('SECKILL.RECONCILE',), ARITY),
    (('SECKILL.RECONCILE', K, 'BOGUS'), 'BOGUS'),
    (('SECKILL.RECONCILE', K, 'EXPIRE', 'EXPIRE'), 'EXPIRE'),
    (('SECKILL.RECONCILE', K, 'APPLY'), 'APPLY'),
    (('SECKILL.RECONCILE', K, 'EXPIRE', 'APPLY'), 'APPLY'),
    (('SECKILL.RECONCILE', K, 'ORDERS', 1, 'r1', 'u1', 1, 'APPLY', 'APPLY'), 'APPLY'),
    (('SECKILL.RECONCILE', K, 'ORDERS'), 'ORDERS'),
    (('SECKILL.RECONCILE', K, 'ORDERS', 0), 'ORDERS'),
    (('SECKILL.RECONCILE', K, 'ORDERS', -1, 'r', 'u', 1), 'ORDERS'),
    (('SECKILL.RECONCILE', K, 'ORDERS', 'x', 'r', 'u', 1), 'ORDERS'),
    (('SECKILL.RECONCILE', K, 'ORDERS', PAST_64, 'r', 'u', 1), 'ORDERS'),
    (('SECKILL.RECONCILE', K, 'ORDERS', 2, 'r1', 'u1', 1), 'ORDERS'),
    (('SECKILL.RECONCILE', K, 'ORDERS', 1, 'r1', 'u1'), 'ORDERS'),
    (('SECKILL.RECONCILE', K, 'ORDERS', 1, '', 'u1', 1), 'reservation id'),
    (('SECKILL.RECONCILE', K, 'ORDERS', 1, LONG, 'u1', 1), 'reservation id'),
    (('SECKILL.RECONCILE', K, 'ORDERS', 1, 'r1', '', 1), 'user id'),
    (('SECKILL.RECONCILE', K, 'ORDERS', 1, 'r1', LONG, 1), 'user id'),
    (('SECKILL.RECONCILE', K, 'ORDERS', 1, 'r1', 'u1', 0), 'qty'),
    (('SECKILL.RECONCILE', K, 'ORDERS', 1, 'r1', 'u1', -1), 'qty'),
    (('SECKILL.RECONCILE', K, 'ORDERS', 1, 'r1', 'u1', 'x'), 'qty'),
    (('SECKILL.RECONCILE', K, 'ORDERS', 1, 'r1', 'u1', PAST_64), 'qty'),
    (('SECKILL.RECONCILE', K, 'ORDERS', 1, 'r1', 'u1', 1, 'ORDERS', 1, 'r1', 'u1', 1), 'ORDERS'),
    # A good row before a bad one: nothing is applied (r1 stays pending).
    (('SECKILL.RECONCILE', K, 'EXPIRE', 'ORDERS', 2, 'r1', 'u1', 1, 'zz', 'u9', 0, 'APPLY'), 'qty'),
    (('SECKILL.RECONCILE', K, 'ORDERS', 1, 'r1', 'u1', 1, 'APPLY', 'BOGUS'), 'BOGUS'),
    (('SECKILL.RECONCILE', 'nokey', 'APPLY'), 'APPLY'),
]

# The whole reply to an unknown option: named like a plain word (upper-cased)
# when printable ASCII of at most 32 bytes (a pasted `# comment`, a typo),
# unnamed when longer or unprintable. The module and the library answer alike.
UNKNOWN_OPTIONS = [
    (('SECKILL.RESERVE', K, 'u9', 'bogus'), b"-ERR unknown option 'BOGUS'\r\n"),
    (('SECKILL.RESERVE', K, 'u9', '#', 'a', 'comment'), b"-ERR unknown option '#'\r\n"),
    (('SECKILL.RESERVE', K, 'u9', 'x1'), b"-ERR unknown option 'X1'\r\n"),
    (('SECKILL.INIT', N, 10, 'limit=2'), b"-ERR unknown option 'LIMIT=2'\r\n"),
    (('SECKILL.RECONCILE', K, 'y' * 32), b"-ERR unknown option '" + b'Y' * 32 + b"'\r\n"),
    (('SECKILL.RECONCILE', K, 'y' * 33), b'-ERR unknown option\r\n'),
    (('SECKILL.RESERVE', K, 'u9', 'a b'), b'-ERR unknown option\r\n'),
    (('SECKILL.RESERVE', K, 'u9', b'\xff'), b'-ERR unknown option\r\n'),
]


def _setup(env, c):
    env.assertEqual(c.execute_command('SECKILL.INIT', K, 10, 'SHARDS', 2, 'LIMIT', 2, 'STREAM', S), 'OK')
    env.assertEqual(reserve(c, K, 'u1', 'REQID', 'r1')[0], 'RESERVED')
    env.assertEqual(reserve(c, K, 'u2', 'REQID', 'r2', 'QTY', 2)[0], 'RESERVED')
    env.assertEqual(c.execute_command('SECKILL.CONFIRM', K, 'r2')[0], 'CONFIRMED')
    env.assertEqual(reserve(c, K, 'u3', 'REQID', 'r3')[0], 'RESERVED')
    env.assertEqual(c.execute_command('SECKILL.RELEASE', K, 'r3')[0], 'RELEASED')
    c.execute_command('SET', 'plain', 'v')


def test_bad_arguments_table():
    env = Env(decodeResponses=True)
    env.skipOnCluster()
    c = env.getConnection()
    _setup(env, c)
    before = digest(c)
    report = info(c, K)
    xlen = c.execute_command('XLEN', S)
    stats = c.info('seckill')

    raw = RawConn(c)
    for args, needle in TABLE:
        reply = raw.call(*args)
        env.assertTrue(reply.startswith(b'-ERR '), message='%r -> %r' % (args[:6], reply[:120]))
        env.assertContains(needle.encode(), reply, message='%r' % (args[:6],))
        # The server is still there and nothing changed so far.
        env.assertEqual(digest(c), before, message='%r changed the dataset' % (args[:6],))
    for args, want in UNKNOWN_OPTIONS:
        env.assertEqual(raw.call(*args), want, message='%r' % (args,))
    raw.close()

    env.assertEqual(digest(c), before)
    env.assertEqual(info(c, K), report)
    env.assertEqual(c.execute_command('XLEN', S), xlen)
    env.assertEqual(sorted(c.execute_command('KEYS', '*')), sorted([K, S, 'plain']))
    env.assertEqual(get(c, K, 'r1')['state'], 'pending')
    after = c.info('seckill')
    for name in () if not MODULE else ('seckill_reserve_reserved', 'seckill_init_created', 'seckill_release_released',
                 'seckill_confirm_confirmed', 'seckill_effects_applied', 'seckill_panics_caught'):
        env.assertEqual(after[name], stats[name], message=name)
    check_invariant(env, c, K)
    assert_replica_agrees(env, c)


def test_longest_ids_are_accepted():
    """The limits are inclusive: 256-byte user and reservation ids work."""
    env = Env(decodeResponses=True)
    env.skipOnCluster()
    c = env.getConnection()
    env.assertOk(c.execute_command('SECKILL.INIT', 's', 5))
    user, rid = 'u' * 256, 'r' * 256
    env.assertEqual(reserve(c, 's', user, 'REQID', rid), ['RESERVED', rid, 4])
    env.assertEqual(get(c, 's', rid)['user'], user)
    env.assertEqual(c.execute_command('SECKILL.CONFIRM', 's', rid), ['CONFIRMED', 4])
    rep = c.execute_command('SECKILL.RECONCILE', 's', 'ORDERS', 1, 'o' * 256, 'v' * 256, 1, 'APPLY')
    env.assertIsNotNone(rep)
    env.assertEqual(get(c, 's', 'o' * 256)['state'], 'confirmed')
    # Largest values at the edge of their ranges.
    env.assertOk(c.execute_command('SECKILL.INIT', 'big', 1000000000000000, 'SHARDS', 1024,
                                   'LIMIT', 1000000000000000))
    env.assertEqual(reserve(c, 'big', 'whale', 'QTY', 1000000000000000)[0::2], ['RESERVED', 0])
    check_invariant(env, c, 'big')


def test_commands_are_flagged_for_the_server():
    """COMMAND INFO knows the key positions (for cluster routing and ACLs)."""
    env = Env(decodeResponses=True)
    env.skipOnCluster()
    c = env.getConnection()
    raw = RawConn(c)
    for name, rest in (('seckill.init', ['10']), ('seckill.reserve', ['u']), ('seckill.release', ['r']),
                       ('seckill.confirm', ['r']), ('seckill.reconcile', []), ('seckill.info', []),
                       ('seckill.get', ['r']), ('seckill.unfence', [])):
        env.assertEqual(raw.call('COMMAND', 'GETKEYS', name, 'k{x}', *rest), b'*1\r\n$4\r\nk{x}\r\n', message=name)
    # Read-only commands are flagged so (they run on replicas), writes as writes.
    for name in ('seckill.info', 'seckill.get'):
        r = raw.call('COMMAND', 'INFO', name)
        env.assertContains(b'+readonly\r\n', r, message=name)
        env.assertNotContains(b'+write\r\n', r, message=name)
    for name in ('seckill.init', 'seckill.reserve', 'seckill.release', 'seckill.confirm', 'seckill.reconcile',
                 'seckill.unfence'):
        env.assertContains(b'+write\r\n', raw.call('COMMAND', 'INFO', name), message=name)
    raw.close()
