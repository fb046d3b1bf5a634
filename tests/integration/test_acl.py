"""The two ACL roles of docs/operations.md ("Who may do what"): a shop's front end
(RESERVE, RELEASE, CONFIRM, INFO, GET) and the sale's driver / operator
(also INIT, SEND, RECV, RECONCILE, DRAW, UNFENCE), both on `~sale:*`. Each user does what
its role allows, gets NOPERM for everything else, and a refused command
changes nothing (DEBUG DIGEST, the stream's length). Nobody but the
replication link needs SECKILL.EFFECT, so neither role has it.

Where the server has RedisModule_SetCommandACLCategories (Redis 7.2+,
Valkey 8+) the commands are in the standard categories too (`ACL CAT`);
Redis 7.0 has no such API, so there they are in none and the module still
loads.

SEND and RECV are only checked for NOPERM against allowed-to-run: their
syntax is the split sale's (a ROUND, parts declared at INIT), so an allowed
call may well answer an ERR about its arguments."""

import os
import shlex

import redis
from RLTest import Env

import contract
from seckill_helpers import conn_address, digest, get, info, reconcile, reserve, server_ms, server_version

DOC = os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..', 'docs', 'operations.md')

# The lines of docs/operations.md, word for word (test_readme_has_the_lines checks it).
FRONT_END = 'ACL SETUSER shop reset on >shop-password ~sale:* +ping +seckill.reserve +seckill.release +seckill.confirm +seckill.info +seckill.get +seckill.enter +seckill.entrants +wait +info "(~sale:*:seckill-sync ~{sale:*}:seckill-sync +set)"'
DRIVER = 'ACL SETUSER sale-driver reset on >driver-password ~sale:* +ping +seckill.reserve +seckill.release +seckill.confirm +seckill.info +seckill.get +seckill.enter +seckill.entrants +seckill.init +seckill.send +seckill.recv +seckill.reconcile +seckill.draw +seckill.unfence +hgetall +hset +set +wait +info +exists'

# Every command and its ACL categories: the contract table of docs/commands.md.
ALL = [cmd.name for cmd in contract.commands()]
CATEGORIES = {cmd.name: set(cmd.categories) for cmd in contract.commands()}
DRAW_SALE = 'sale:{d}'

SALE = 'sale:{1}'
STREAM = 'sale:{1}:events'


def _env():
    env = Env(decodeResponses=True)
    env.skipOnCluster()
    return env, env.getConnection()


def _as(c, user, password, decode=True):
    host, port, path = conn_address(c)
    kw = dict(username=user, password=password, decode_responses=decode)
    return redis.Redis(unix_socket_path=path, **kw) if path else redis.Redis(host=host, port=port, **kw)


def _setuser(c, line):
    words = shlex.split(line)
    assert words[:2] == ['ACL', 'SETUSER'], line
    return c.execute_command(*words)


def _user(c, line):
    """Creates the user of an ACL SETUSER line and connects as it."""
    _setuser(c, line)
    words = shlex.split(line)
    return _as(c, words[2], next(w[1:] for w in words if w.startswith('>')))


def has_categories(conn):
    """RedisModule_SetCommandACLCategories: Redis 7.2+, Valkey 8+."""
    name, version = server_version(conn)
    return version >= ((8, 0, 0) if name == 'valkey' else (7, 2, 0))


def _state(admin):
    return digest(admin), admin.execute_command('XLEN', STREAM)


def refused(env, admin, user, *cmd, depth=0):
    """`cmd` as `user` is refused with NOPERM and changes nothing."""
    before = _state(admin)
    try:
        user.execute_command(*cmd)
        env.assertTrue(False, depth=depth + 1, message='%r was allowed' % (cmd,))
    except redis.exceptions.NoPermissionError as e:
        env.assertContains('permission', str(e).lower(), depth=depth + 1)
    env.assertEqual(_state(admin), before, depth=depth + 1, message='a refused %r changed something' % (cmd,))


def runs(env, user, *cmd, depth=0):
    """`cmd` as `user` gets past the ACL: its reply, or the error it answers
    that is not NOPERM (an argument error, say)."""
    try:
        return user.execute_command(*cmd)
    except redis.exceptions.NoPermissionError as e:
        env.assertTrue(False, depth=depth + 1, message='%r: NOPERM %s' % (cmd, e))
    except redis.exceptions.ResponseError as e:
        return e


def _sale(c):
    reply = c.execute_command('SECKILL.INIT', SALE, 10, 'LIMIT', 2, 'STREAM', STREAM)
    assert reply == 'OK', reply


def test_readme_has_the_lines():
    env = Env(decodeResponses=True)
    text = open(DOC).read()
    for line in (FRONT_END, DRIVER):
        env.assertTrue(line in text, message='docs/operations.md lost the line %r' % line)


def test_front_end():
    env, c = _env()
    _sale(c)
    shop = _user(c, FRONT_END)

    # What it is for: on a sale with a STREAM, RESERVE appends to
    # sale:{1}:events, which the module checks against the caller's ACL:
    # ~sale:* covers it.
    st, a, rem = reserve(shop, SALE, 'u1')
    env.assertEqual((st, rem), ('RESERVED', 9))
    st, b, rem = reserve(shop, SALE, 'u2', 'REQID', 'order-2')
    env.assertEqual((st, b, rem), ('RESERVED', 'order-2', 8))
    env.assertEqual(c.execute_command('XLEN', STREAM), 2)
    env.assertEqual(shop.execute_command('SECKILL.CONFIRM', SALE, a), ['CONFIRMED', 8])
    env.assertEqual(shop.execute_command('SECKILL.RELEASE', SALE, b), ['RELEASED', 9])
    env.assertEqual(info(shop, SALE)['confirmed'], 1)
    env.assertEqual(get(shop, SALE, b)['state'], 'released')
    env.assertEqual(c.execute_command('XLEN', STREAM), 4)
    env.assertEqual(reserve(shop, 'sale:{2}', 'u1'), ['NO_SALE', None, 0])

    # Nothing more: the driver's commands, EFFECT, plain commands on the
    # sale and its stream, and any key outside sale:*.
    refused(env, c, shop, 'SECKILL.INIT', 'sale:{3}', 5)
    refused(env, c, shop, 'SECKILL.INIT', SALE, 99, 'REPLACE')
    refused(env, c, shop, 'SECKILL.RECONCILE', SALE)
    refused(env, c, shop, 'SECKILL.RECONCILE', SALE, 'EXPIRE', 'ORDERS', 1, 'x', 'u9', 1, 'APPLY')
    refused(env, c, shop, 'SECKILL.SEND', SALE, 'sale:{2}', 3, 'TID', 't1')
    refused(env, c, shop, 'SECKILL.RECV', SALE, 'sale:{2}', 100)
    refused(env, c, shop, 'SECKILL.EFFECT', SALE, 'RELEASE', a)
    refused(env, c, shop, 'DEL', SALE)
    refused(env, c, shop, 'XADD', STREAM, '*', 'event', 'reserved', 'rid', 'forged', 'user', 'x', 'qty', 1)
    refused(env, c, shop, 'XTRIM', STREAM, 'MAXLEN', 0)
    raw = _as(c, 'default', None, decode=False)
    refused(env, c, shop, 'RESTORE', 'sale:{4}', 0, raw.execute_command('DUMP', SALE))
    raw.close()
    refused(env, c, shop, 'SET', 'sale:{5}', 'x')
    refused(env, c, shop, 'FLUSHALL')
    refused(env, c, shop, 'CONFIG', 'SET', 'maxmemory', 1)
    refused(env, c, shop, 'SECKILL.RESERVE', 'other:{1}', 'u1')
    refused(env, c, shop, 'SECKILL.INFO', 'other:{1}')
    env.assertEqual(info(c, SALE)['remaining'], 9)

    # A draw sale: buyers enter and the entrants are read; the draw is the operator's.
    c.execute_command('SECKILL.INIT', DRAW_SALE, 5, 'END', server_ms(c) + 60000, 'DRAW')
    env.assertEqual(shop.execute_command('SECKILL.ENTER', DRAW_SALE, 'u1'), ['ENTERED', 1])
    env.assertEqual(shop.execute_command('SECKILL.ENTRANTS', DRAW_SALE, 0), ['0', ['u1', 1, 'entered']])
    refused(env, c, shop, 'SECKILL.DRAW', DRAW_SALE)
    # The draw's secret is in the key's value: the front end can neither
    # DUMP it (nor MIGRATE it to a server of its own) nor watch INIT's
    # effect go by.
    refused(env, c, shop, 'DUMP', DRAW_SALE)
    refused(env, c, shop, 'MIGRATE', '127.0.0.1', 1, DRAW_SALE, 0, 100)
    refused(env, c, shop, 'MONITOR')
    # Lifting a fence is the operator's (the reconciler's) too.
    c.execute_command('SECKILL.INIT', 'sale:{f}', 5, 'FENCE')
    refused(env, c, shop, 'SECKILL.UNFENCE', 'sale:{f}')
    shop.close()


def test_driver():
    env, c = _env()
    driver = _user(c, DRIVER)
    # Creates sales (with a stream under sale:* too), and starts them over.
    env.assertEqual(driver.execute_command('SECKILL.INIT', SALE, 10, 'LIMIT', 2, 'STREAM', STREAM), 'OK')
    env.assertEqual(driver.execute_command('SECKILL.INIT', SALE, 10, 'LIMIT', 2, 'STREAM', STREAM), 'EXISTS')
    env.assertEqual(driver.execute_command('SECKILL.INIT', 'sale:{2}', 0), 'OK')
    st, a, _ = reserve(driver, SALE, 'u1')
    env.assertEqual(st, 'RESERVED')
    env.assertEqual(driver.execute_command('SECKILL.CONFIRM', SALE, a), ['CONFIRMED', 9])
    _, b, _ = reserve(driver, SALE, 'u2')
    env.assertEqual(driver.execute_command('SECKILL.RELEASE', SALE, b), ['RELEASED', 9])
    env.assertEqual(get(driver, SALE, a)['state'], 'confirmed')
    env.assertEqual(c.execute_command('XLEN', STREAM), 4)
    # RECONCILE, reporting and applying: an order Redis never saw is re-taken.
    env.assertEqual(reconcile(driver, SALE)['confirmed'], 1)
    env.assertEqual(reconcile(driver, SALE, 'ORDERS', 1, 'lost-1', 'u3', 1, 'APPLY')['orders_unknown'], 1)
    env.assertEqual(info(driver, SALE)['confirmed'], 2)
    # SEND and RECV get past the ACL (what they answer is theirs to define).
    runs(env, driver, 'SECKILL.SEND', SALE, 'sale:{2}', 3, 'TID', 't1')
    runs(env, driver, 'SECKILL.RECV', 'sale:{2}', SALE, 3)
    runs(env, driver, 'SECKILL.SEND', SALE, 'sale:{2}', 3, 'TID', 't2', 'ROUND', 'r1')
    runs(env, driver, 'SECKILL.RECV', 'sale:{2}', SALE, 3, 'ROUND', 'r1')
    runs(env, driver, 'SECKILL.INIT', SALE, 10, 'STREAM', STREAM, 'REPLACE')
    env.assertEqual(info(driver, SALE)['remaining'], 10)
    # Draw sales: created, entered and drawn by the operator.
    env.assertEqual(driver.execute_command('SECKILL.INIT', DRAW_SALE, 5, 'END', server_ms(c) - 1, 'DRAW'), 'OK')
    env.assertEqual(driver.execute_command('SECKILL.ENTER', DRAW_SALE, 'u1'), ['ENDED', 0])
    env.assertEqual(driver.execute_command('SECKILL.DRAW', DRAW_SALE), [0, 5, 0])
    env.assertEqual(driver.execute_command('SECKILL.ENTRANTS', DRAW_SALE, 0), ['0', []])
    # The fence: created and lifted by the operator (its reconciler).
    env.assertEqual(driver.execute_command('SECKILL.INIT', 'sale:{f}', 5, 'FENCE'), 'OK')
    env.assertEqual(driver.execute_command('SECKILL.UNFENCE', 'sale:{f}'), 'NOT_FENCED')

    # Nothing more: EFFECT (the replication link's), plain commands, keys
    # outside sale:*, a stream outside sale:*.
    refused(env, c, driver, 'SECKILL.EFFECT', SALE, 'RELEASE', 'x')
    refused(env, c, driver, 'DEL', SALE)
    refused(env, c, driver, 'XADD', STREAM, '*', 'event', 'reserved')
    refused(env, c, driver, 'FLUSHALL')
    refused(env, c, driver, 'SECKILL.INIT', 'other:{1}', 5)
    refused(env, c, driver, 'SECKILL.INIT', 'sale:{6}', 5, 'STREAM', 'events:{6}')
    refused(env, c, driver, 'SECKILL.SEND', 'other:{1}', SALE, 1, 'TID', 't3')
    refused(env, c, driver, 'SECKILL.RECV', 'other:{1}', SALE, 1)
    c.execute_command('SECKILL.INIT', 'other:{1}', 5, 'FENCE')
    refused(env, c, driver, 'SECKILL.UNFENCE', 'other:{1}')
    c.execute_command('DEL', 'other:{1}')
    env.assertEqual(c.execute_command('EXISTS', 'other:{1}', 'sale:{6}', 'events:{6}'), 0)
    driver.close()


def test_acl_categories():
    """Redis 7.2+ / Valkey 8+: the commands are in the categories of the
    contract table (docs/commands.md), so `+@write` and `+@read` reach them (EFFECT only
    through `+@admin`). Redis 7.0: in none (the module loaded all the same)."""
    env, c = _env()
    _sale(c)
    listed = {cat: set(c.execute_command('ACL', 'CAT', cat)) & set(ALL)
              for cat in ('write', 'read', 'fast', 'slow', 'admin', 'dangerous')}
    if not has_categories(c):
        env.assertEqual(listed, {cat: set() for cat in listed})
        return
    env.assertEqual(listed, {cat: {cmd for cmd in ALL if cat in CATEGORIES[cmd]} for cat in listed})

    c.execute_command('ACL', 'SETUSER', 'rw', 'reset', 'on', '>pw', '~sale:*', '+@read', '+@write')
    rw = _as(c, 'rw', 'pw')
    st, rid, _ = reserve(rw, SALE, 'u1')
    env.assertEqual(st, 'RESERVED')
    env.assertEqual(get(rw, SALE, rid)['state'], 'pending')
    refused(env, c, rw, 'SECKILL.EFFECT', SALE, 'RELEASE', rid)
    rw.close()

    c.execute_command('ACL', 'SETUSER', 'ro', 'reset', 'on', '>pw', '~sale:*', '+@read')
    ro = _as(c, 'ro', 'pw')
    env.assertEqual(info(ro, SALE)['pending'], 1)
    refused(env, c, ro, 'SECKILL.RESERVE', SALE, 'u2')
    refused(env, c, ro, 'SECKILL.CONFIRM', SALE, rid)
    ro.close()

    # `-@slow` keeps the front-end commands and drops INIT and RECONCILE.
    c.execute_command('ACL', 'SETUSER', 'quick', 'reset', 'on', '>pw', '~sale:*', '+@all', '-@slow')
    quick = _as(c, 'quick', 'pw')
    env.assertEqual(quick.execute_command('SECKILL.CONFIRM', SALE, rid), ['CONFIRMED', 9])
    refused(env, c, quick, 'SECKILL.INIT', SALE, 5, 'REPLACE')
    refused(env, c, quick, 'SECKILL.RECONCILE', SALE)
    quick.close()
