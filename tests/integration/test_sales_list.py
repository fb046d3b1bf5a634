"""SECKILL.SALES: the node's sales, paged, from the list the module keeps
(never a scan of the keyspace). After every way a sale comes or goes (INIT,
DEL, UNLINK, expiry, a value written over, RENAME, MOVE, COPY, SWAPDB,
RESTORE, FLUSHDB/FLUSHALL, DEBUG RELOAD, a restart from RDB or AOF, a
replica's full sync) the listing equals what a SCAN ... TYPE finds, and
INFO's `seckill_sales_listed` (the names the module holds) equals the
number of sales before any listing could have dropped a stale one. The
cost at 1M keys and 1,000 sales is printed (SLOWLOG)."""

import time

import redis
from RLTest import Env

from seckill_helpers import replica_caught_up, SALE_TYPE, conn_address, is_valkey_8_1, new_replication_id, seckill_stats, wait_for

# Pages a listing may take in these tests (a bound on every loop).
MAX_PAGES = 5000


def _env(**kw):
    env = Env(decodeResponses=True, **kw)
    env.skipOnCluster()
    return env, env.getConnection()


def listing(c, count=None):
    """Every name SALES lists, page by page from cursor 0."""
    names, cursor = [], '0'
    for _ in range(MAX_PAGES):
        args = ['SECKILL.SALES', cursor] + (['COUNT', count] if count else [])
        cursor, page = c.execute_command(*args)
        names += page
        if cursor == '0':
            return names
    raise AssertionError('SALES did not end within %d pages' % MAX_PAGES)


def truth(c):
    """The sales of the selected database, found the slow way."""
    found, cursor = set(), 0
    for _ in range(MAX_PAGES):
        cursor, keys = c.scan(cursor, count=1000, _type=SALE_TYPE)
        found.update(keys)
        if cursor == 0:
            return sorted(found)
    raise AssertionError('SCAN did not end')


def listed(c):
    return seckill_stats(c)['sales_listed']


def check(env, c, what, dbs=(0,), depth=0):
    """The list holds exactly the sales of `dbs` (INFO, before any listing
    drops a stale name), and each database's listing is its sales in byte order."""
    conns = {}
    try:
        for db in dbs:
            conns[db] = c if db == 0 else _conn_on(c, db)
        sales = {db: truth(k) for db, k in conns.items()}
        env.assertEqual(listed(c), sum(len(v) for v in sales.values()), depth=depth + 1,
                        message='%s: INFO seckill_sales_listed' % what)
        for db, k in conns.items():
            env.assertEqual(listing(k), sales[db], depth=depth + 1, message='%s: db %d' % (what, db))
    finally:
        for db, k in conns.items():
            if db != 0:
                k.close()


def _conn_on(c, db, decode=True):
    host, port, path = conn_address(c)
    kw = dict(db=db, decode_responses=decode)
    return redis.Redis(unix_socket_path=path, **kw) if path else redis.Redis(host=host, port=port, **kw)


def _init(c, *keys, total=5):
    for k in keys:
        env_reply = c.execute_command('SECKILL.INIT', k, total)
        assert env_reply == 'OK', env_reply


def test_pages_in_byte_order():
    env, c = _env()
    env.assertEqual(c.execute_command('SECKILL.SALES', 0), ['0', []])
    names = ['sale:%03d' % i for i in range(250)] + ['b\x00in', 'Z', '0', '>x']
    _init(c, *names)
    c.set('plain', 'x')
    c.hset('a-hash', 'f', 'v')
    everything = sorted(names)
    first = c.execute_command('SECKILL.SALES', 0)
    env.assertEqual(len(first[1]), 100)  # the default COUNT
    env.assertEqual(first[1], everything[:100])
    env.assertEqual(first[0], '>' + everything[100])
    for count in (1, 7, 100, 1000):
        env.assertEqual(listing(c, count), everything, message='COUNT %d' % count)
    env.assertEqual(c.execute_command('SECKILL.SALES', 0, 'COUNT', 1000), ['0', everything])

    # Names added or dropped between pages: each sale there from the
    # first page to the last is listed exactly once.
    cursor, seen, deleted = '0', [], set()
    for i in range(MAX_PAGES):
        cursor, page = c.execute_command('SECKILL.SALES', cursor, 'COUNT', 10)
        seen += page
        deleted.add('sale:%03d' % (249 - i))
        c.delete('sale:%03d' % (249 - i))
        _init(c, 'late:%03d' % i)
        if cursor == '0':
            break
    stayed = [n for n in everything if n not in deleted]
    env.assertTrue(len(stayed) >= 200)
    for n in stayed:
        env.assertEqual(seen.count(n), 1, message=n)
    env.assertEqual(len(seen), len(set(seen)), message='a name listed twice')

    # Bad input: a clear error, nothing changes.
    before = listed(c)
    for args, error in (((), 'wrong number'), (('1',), 'cursor'), (('x',), 'cursor'), (('>',), 'cursor'),
                        (('0', 'COUNT', 0), 'COUNT'), (('0', 'COUNT', 1001), 'COUNT'),
                        (('0', 'COUNT'), ''), (('0', 'LIMIT', 3), '')):
        try:
            c.execute_command('SECKILL.SALES', *args)
            env.assertTrue(False, message='%r was accepted' % (args,))
        except redis.ResponseError as e:
            env.assertContains(error, str(e), message=repr(args))
    env.assertEqual(listed(c), before)


def test_follows_deletes_and_overwrites():
    env, c = _env()
    _init(c, 'a', 'b', 'c', 'd', 'e', 'f')
    check(env, c, 'INIT')
    env.assertEqual(c.execute_command('SECKILL.INIT', 'a', 9, 'REPLACE'), 'OK')
    env.assertEqual(c.execute_command('SECKILL.INIT', 'a', 9), 'EXISTS')
    check(env, c, 'INIT REPLACE, EXISTS')
    c.delete('a')
    c.unlink('b')
    check(env, c, 'DEL, UNLINK')
    c.set('c', 'a string now')
    check(env, c, 'SET over a sale')
    c.pexpire('d', 1)
    c.execute_command('SECKILL.INIT', 'g', 5, 'TTL', 1)
    env.assertTrue(wait_for(lambda: c.exists('d', 'g') == 0, timeout=5), message='the keys did not expire')
    check(env, c, 'expiry')
    c.execute_command('SECKILL.INIT', 'h', 5)
    c.execute_command('FLUSHDB')
    check(env, c, 'FLUSHDB')
    _init(c, 'i')
    c.execute_command('FLUSHALL', 'ASYNC')
    check(env, c, 'FLUSHALL ASYNC')


def test_follows_renames_moves_copies_and_swapdb():
    env, c = _env()
    _init(c, 'a', 'b', 'c', 'd', 'x')
    c.rename('a', 'renamed')
    c.rename('b', 'x')  # over another sale
    check(env, c, 'RENAME')
    env.assertEqual(c.execute_command('COPY', 'c', 'copied'), 1)
    env.assertEqual(c.execute_command('COPY', 'c', 'elsewhere', 'DB', 2), 1)
    if is_valkey_8_1(c):
        c.execute_command('SELECT', 0)  # as after MOVE: valkey-io/valkey#4024, see is_valkey_8_1
    check(env, c, 'COPY', dbs=(0, 2))
    env.assertTrue(c.move('d', 3))
    if is_valkey_8_1(c):
        c.execute_command('SELECT', 0)  # valkey-io/valkey#4024, see is_valkey_8_1
    check(env, c, 'MOVE', dbs=(0, 2, 3))
    env.assertTrue(c.execute_command('SWAPDB', 0, 2))
    check(env, c, 'SWAPDB 0 2', dbs=(0, 2, 3))
    env.assertTrue(c.execute_command('SWAPDB', 3, 7))
    check(env, c, 'SWAPDB 3 7', dbs=(0, 2, 3, 7))
    c.execute_command('FLUSHDB')  # db 0 only
    check(env, c, 'FLUSHDB of one database', dbs=(0, 2, 7))


def test_follows_restore_and_reloads():
    env, c = _env()
    _init(c, 'a', 'b')
    raw = _conn_on(c, 0, decode=False)
    payload = raw.dump('a')
    raw.close()
    c.delete('a')
    env.assertTrue(c.restore('restored', 0, payload))
    env.assertTrue(c.restore('b', 0, payload, replace=True))
    check(env, c, 'RESTORE')
    c.execute_command('SELECT', 1)
    _init(c, 'in-db-1')
    c.execute_command('SELECT', 0)
    env.assertEqual(c.execute_command('DEBUG', 'RELOAD'), 'OK')
    check(env, c, 'DEBUG RELOAD', dbs=(0, 1))
    env.dumpAndReload(restart=True)
    c = env.getConnection()
    check(env, c, 'a restart from the RDB', dbs=(0, 1))


def test_follows_aof_replay():
    for preamble in (False, True):
        env, c = _env(useAof=True, useRdbPreamble=preamble)
        _init(c, 'a', 'b', 'c')
        c.rename('c', 'renamed')
        c.delete('b')
        env.stop()
        env.start()
        c = env.getConnection()
        check(env, c, 'AOF replay (preamble %s)' % preamble)
        env.assertEqual(c.execute_command('BGREWRITEAOF') is not None, True)
        wait_for(lambda: int(c.info('persistence')['aof_rewrite_in_progress']) == 0, timeout=30)
        env.stop()
        env.start()
        c = env.getConnection()
        check(env, c, 'AOF rewrite then replay (preamble %s)' % preamble)
        env.stop()


def _full_sync(env, master, replica):
    """Makes the replica diverge (a write of its own as a master), then
    attaches it again: its history no longer matches, so the master sends
    a full sync."""
    host, port, _ = conn_address(master)
    syncs = int(master.info('stats')['sync_full'])
    replica.execute_command('REPLICAOF', 'NO', 'ONE')
    replica.execute_command('SECKILL.INIT', 'only-on-the-replica', 1)
    replica.execute_command('REPLICAOF', host, port)
    done = wait_for(lambda: int(master.info('stats')['sync_full']) > syncs
                    and replica.info('replication').get('master_link_status') == 'up', timeout=20)
    env.assertTrue(done, message='no full sync', depth=1)
    replica_caught_up(env, master, depth=1)


def test_replica_follows_effects_and_full_syncs():
    env, master = _env(useSlaves=True)
    replica = env.getSlaveConnection()
    _init(master, 'a', 'b', 'c')
    master.rename('c', 'renamed')
    master.delete('a')
    replica_caught_up(env, master)
    check(env, replica, 'replica, by effects')
    for load in ('disabled', 'swapdb'):
        replica.execute_command('CONFIG', 'SET', 'repl-diskless-load', load)
        _init(master, 'new-' + load)
        _full_sync(env, master, replica)
        env.assertEqual(listing(replica), truth(master), message='full sync, repl-diskless-load ' + load)
        check(env, replica, 'replica after a full sync, repl-diskless-load ' + load)


def test_keyless_read_only_command():
    """No key: COMMAND GETKEYS finds none, a replica answers it, and an ACL
    user needs the command only (as SCAN, it lists every sale's name of the
    database whatever the user's key patterns)."""
    env, c = _env()
    _init(c, 'sale:{1}', 'other')
    info = c.execute_command('COMMAND', 'INFO', 'SECKILL.SALES')['seckill.sales']
    env.assertEqual(info['arity'], -2)
    env.assertContains('readonly', info['flags'])
    env.assertNotContains('write', info['flags'])
    env.assertEqual([info['first_key_pos'], info['last_key_pos'], info['step_count']], [0, 0, 0])
    env.assertEqual(info.get('key_specifications', []), [])
    try:
        c.execute_command('COMMAND', 'GETKEYS', 'SECKILL.SALES', '0')
        env.assertTrue(False, message='GETKEYS found a key')
    except redis.ResponseError as e:
        env.assertContains('no key', str(e).lower())
    c.execute_command('ACL', 'SETUSER', 'lister', 'reset', 'on', '>pw', '+seckill.sales')
    host, port, path = conn_address(c)
    kw = dict(username='lister', password='pw', decode_responses=True)
    lister = redis.Redis(unix_socket_path=path, **kw) if path else redis.Redis(host=host, port=port, **kw)
    env.assertEqual(lister.execute_command('SECKILL.SALES', 0), ['0', ['other', 'sale:{1}']])
    try:
        lister.execute_command('SECKILL.INFO', 'other')
        env.assertTrue(False, message='INFO was allowed')
    except redis.exceptions.NoPermissionError:
        pass
    lister.close()


def test_with_counts_follow_each_sales_report():
    """WITHCOUNTS puts six integers after each name: remaining, pending,
    confirmed, expired, invariant (1 ok) and fenced (1 for a fenced FENCE
    sale, else 0), the numbers INFO reports; a page without it is unchanged."""
    env, c = _env()
    c.execute_command('SECKILL.INIT', 'a', 10, 'LIMIT', 2, 'HOLD', 60000)
    c.execute_command('SECKILL.INIT', 'b', 5, 'LIMIT', 2, 'HOLD', 50)
    c.execute_command('SECKILL.INIT', 'f', 3, 'FENCE')
    rid = c.execute_command('SECKILL.RESERVE', 'a', 'u1', 'QTY', 2)[1]
    c.execute_command('SECKILL.RESERVE', 'a', 'u2')
    c.execute_command('SECKILL.CONFIRM', 'a', rid)
    c.execute_command('SECKILL.RESERVE', 'b', 'u1', 'QTY', 2)
    env.assertTrue(wait_for(lambda: dict(zip(*[iter(c.execute_command('SECKILL.INFO', 'b'))] * 2))['expired'] == 2,
                            timeout=10))
    cursor, flat = c.execute_command('SECKILL.SALES', 0, 'WITHCOUNTS')
    env.assertEqual(cursor, '0')
    rows = {flat[i]: flat[i + 1:i + 7] for i in range(0, len(flat), 7)}
    env.assertEqual(sorted(rows), ['a', 'b', 'f'])
    for key, counts in rows.items():
        info = dict(zip(*[iter(c.execute_command('SECKILL.INFO', key))] * 2))
        env.assertEqual(counts[:4], [info['remaining'], info['pending'], info['confirmed'], info['expired']], message=key)
        env.assertEqual(counts[4], 1 if info['invariant'] == 'ok' else 0, message=key)
    env.assertEqual([rows['a'], rows['b'], rows['f']], [[7, 1, 2, 0, 1, 0], [5, 0, 0, 2, 1, 0], [3, 0, 0, 0, 1, 0]])
    # A FENCE sale on a promoted server (a new replication id) is fenced.
    new_replication_id(c)
    env.assertTrue(wait_for(lambda: c.execute_command('SECKILL.SALES', 0, 'WITHCOUNTS')[1][-1] == 1, timeout=5))
    env.assertEqual(c.execute_command('SECKILL.SALES', 0, 'COUNT', 2, 'WITHCOUNTS'), ['>f', ['a', 7, 1, 2, 0, 1, 0, 'b', 5, 0, 0, 2, 1, 0]])
    env.assertEqual(c.execute_command('SECKILL.SALES', 0), ['0', ['a', 'b', 'f']])


def test_cost_at_a_million_keys():
    """1M plain keys (DEBUG POPULATE) and 1,000 sales: listing them all is
    one call of COUNT 1000, and SCAN is what it replaces. Prints both."""
    env, c = _env()
    started = time.monotonic()
    c.execute_command('DEBUG', 'POPULATE', 1000000, 'filler')
    p = c.pipeline(transaction=False)
    for i in range(1000):
        p.execute_command('SECKILL.INIT', 'sale:{%d}' % i, 100)
    p.execute()
    env.assertEqual(c.dbsize(), 1001000)
    print('\tbuilt 1M keys and 1,000 sales in %.1f s' % (time.monotonic() - started))
    c.execute_command('CONFIG', 'SET', 'slowlog-log-slower-than', 0)
    c.execute_command('CONFIG', 'SET', 'slowlog-max-len', 128)
    costs = []
    for _ in range(5):
        c.execute_command('SLOWLOG', 'RESET')
        cursor, names = c.execute_command('SECKILL.SALES', 0, 'COUNT', 1000)
        env.assertEqual((cursor, len(names)), ('0', 1000))
        costs.append(next(e['duration'] for e in c.slowlog_get(10) if e['command'].upper().startswith(b'SECKILL.SALES')))
    env.assertEqual(sorted(names), sorted('sale:{%d}' % i for i in range(1000)))
    print('\tSECKILL.SALES 0 COUNT 1000 at 1M keys, 1,000 sales: %d us (median of 5, SLOWLOG; all: %s)'
          % (sorted(costs)[2], costs))
    costs = []
    for _ in range(5):
        c.execute_command('SLOWLOG', 'RESET')
        cursor, flat = c.execute_command('SECKILL.SALES', 0, 'COUNT', 1000, 'WITHCOUNTS')
        env.assertEqual((cursor, len(flat)), ('0', 7000))
        costs.append(next(e['duration'] for e in c.slowlog_get(10) if e['command'].upper().startswith(b'SECKILL.SALES')))
    print('\tSECKILL.SALES 0 COUNT 1000 WITHCOUNTS: %d us (median of 5, SLOWLOG; all: %s)' % (sorted(costs)[2], costs))
    c.execute_command('CONFIG', 'RESETSTAT')
    cursor, scanned = 0, 0
    for _ in range(MAX_PAGES):
        cursor, keys = c.scan(cursor, count=1000, _type=SALE_TYPE)
        scanned += len(keys)
        if cursor == 0:
            break
    env.assertEqual(scanned, 1000)
    scan = c.info('commandstats')['cmdstat_scan']
    print('\tthe same with SCAN ... TYPE: %d us of server time in %d calls (INFO commandstats)'
          % (scan['usec'], scan['calls']))
    c.execute_command('CONFIG', 'SET', 'slowlog-log-slower-than', 10000)
    c.execute_command('FLUSHALL')
