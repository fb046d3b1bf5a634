"""The fence (INIT ... FENCE, SECKILL.UNFENCE; docs/commands.md, "Fencing
after a failover"): a sale created with FENCE records its server's
replication id and refuses to sell (RESERVE, ENTER, DRAW, SEND) wherever
the server's id differs from the recorded one: on a promoted replica, on a
restarted master, on a master that got its first replica. UNFENCE records
the current id again. The same file runs on the module and on the Functions
library (seckill_backend.py)."""


import redis
from RLTest import Env
from RLTest.env import Defaults

from seckill_helpers import (OwnServer, replica_caught_up, FUNCTIONS, ORDER_FIELDS, REPORT_FIELDS, aof_files, as_dict, digest, digest_value,
                             info, reconcile, restart_from_aof, server_ms, wait_aof_rewrite, wait_for)

FENCE_FIELDS = REPORT_FIELDS + ['fence']
DRAW_FIELDS = ['mode', 'entrants', 'drawn', 'left_to_draw', 'waitlist', 'draw_stock', 'seed_commitment', 'seed',
               'entrants_digest', 'beacon', 'beacon_value', 'draw_seed']
FENCED_ERROR = 'FENCED the sale is fenced since a failover or restart'


def _env(**kw):
    env = Env(decodeResponses=True, **kw)
    env.skipOnCluster()
    return env, env.getConnection()


def _replid(conn):
    return conn.info('replication')['master_replid']


def _offset(conn):
    return int(conn.info('replication')['master_repl_offset'])


def _fence(conn, key):
    return info(conn, key)['fence']


def _unchanged(env, conn, args, check, depth=0):
    """Runs `args`, hands its reply (or its error, as a string) to `check`,
    and asserts the call changed nothing and replicated nothing (digest and
    replication offset equal before and after)."""
    before, offset = digest(conn), _offset(conn)
    try:
        reply = conn.execute_command(*args)
    except redis.ResponseError as e:
        reply = str(e)
    check(reply)
    env.assertEqual(digest(conn), before, depth=depth + 1, message='%r changed the data' % (args,))
    env.assertEqual(_offset(conn), offset, depth=depth + 1, message='%r replicated something' % (args,))
    return reply


def _refused_fenced(env, conn, args, depth=0):
    """A DRAW or SEND refused with the FENCED error, changing nothing."""
    def check(reply):
        env.assertTrue(isinstance(reply, str) and reply.startswith(FENCED_ERROR), depth=depth + 2,
                       message='%r answered %r' % (args, reply))
    _unchanged(env, conn, args, check, depth + 1)


def _error(env, conn, args, text, depth=0):
    try:
        conn.execute_command(*args)
        env.assertTrue(False, depth=depth + 1, message='%r was accepted' % (args,))
    except redis.ResponseError as e:
        env.assertContains(text, str(e), depth=depth + 1)


def _promote(env, replica):
    replica.execute_command('REPLICAOF', 'NO', 'ONE')
    env.assertEqual(replica.info('replication')['role'], 'master')


def _split_init(conn, key, peer, total, *opts):
    return conn.execute_command('SECKILL.INIT', key, total, *opts, 'SPLIT', 'r1', 1, peer)


# ------------------------------------------------------------------ INIT

def test_init_fence_option():
    env, c = _env()
    before = digest(c)
    _error(env, c, ['SECKILL.INIT', 'f:{1}', 10, 'FENCE', 'FENCE'], 'option FENCE given twice')
    _error(env, c, ['SECKILL.INIT', 'f:{1}', 10, 'FENCE', 'LIMIT', 2, 'fence'], 'option FENCE given twice')
    env.assertEqual(digest(c), before)
    env.assertIsNone(info(c, 'f:{1}'))

    # FENCE goes with every other option, in any place and case.
    env.assertEqual(c.execute_command('SECKILL.INIT', 'f:{1}', 10, 'fence', 'LIMIT', 2, 'HOLD', 60000), 'OK')
    r = info(c, 'f:{1}')
    env.assertEqual(list(r.keys()), FENCE_FIELDS)
    env.assertEqual(r['fence'], 'clear')
    env.assertEqual(c.execute_command('SECKILL.INIT', 'f:{1}', 20, 'REPLACE', 'FENCE'), 'OK')
    env.assertEqual(info(c, 'f:{1}')['total'], 20)
    env.assertEqual(_fence(c, 'f:{1}'), 'clear')
    # REPLACE without FENCE makes a sale without fence.
    env.assertEqual(c.execute_command('SECKILL.INIT', 'f:{1}', 20, 'REPLACE'), 'OK')
    env.assertEqual(list(info(c, 'f:{1}').keys()), REPORT_FIELDS)

    c.execute_command('SECKILL.INIT', 'd:{1}', 10, 'END', server_ms(c) + 60000, 'DRAW', 'FENCE')
    env.assertEqual(list(info(c, 'd:{1}').keys()), REPORT_FIELDS + DRAW_FIELDS + ['fence'])
    env.assertEqual(_split_init(c, 's:{1}', 's:{2}', 10, 'FENCE'), 'OK')
    r = info(c, 's:{1}')
    env.assertEqual(list(r.keys())[-1], 'fence')
    env.assertEqual(r['fence'], 'clear')

    # A plain sale's report is what it always was.
    c.execute_command('SECKILL.INIT', 'p:{1}', 10)
    env.assertEqual(list(info(c, 'p:{1}').keys()), REPORT_FIELDS)


def test_fence_sale_on_its_master_sells():
    env, c = _env()
    c.execute_command('SECKILL.INIT', 'f:{1}', 3, 'FENCE', 'LIMIT', 3)
    status, rid, remaining = c.execute_command('SECKILL.RESERVE', 'f:{1}', 'u1', 'QTY', 2)
    env.assertEqual((status, remaining), ('RESERVED', 1))
    env.assertEqual(c.execute_command('SECKILL.CONFIRM', 'f:{1}', rid), ['CONFIRMED', 1])
    env.assertEqual(c.execute_command('SECKILL.RESERVE', 'f:{1}', 'u2', 'QTY', 2)[0], 'SOLD_OUT')
    env.assertEqual(_fence(c, 'f:{1}'), 'clear')

    # FORMAT JSON carries the field too, last.
    import json
    doc = json.loads(c.execute_command('SECKILL.INFO', 'f:{1}', 'FORMAT', 'JSON'))
    env.assertEqual(list(doc.keys()), FENCE_FIELDS)
    env.assertEqual(doc['fence'], 'clear')

    # RECONCILE's report: the sale's report (fence last), then the orders.
    r = reconcile(c, 'f:{1}', 'ORDERS', 1, rid, 'u1', 2)
    env.assertEqual(list(r.keys()), FENCE_FIELDS + ORDER_FIELDS)
    env.assertEqual((r['fence'], r['orders_ok']), ('clear', 1))

    # Not fenced: UNFENCE changes and replicates nothing.
    _unchanged(env, c, ['SECKILL.UNFENCE', 'f:{1}'], lambda r: env.assertEqual(r, 'NOT_FENCED'))
    c.execute_command('SECKILL.INIT', 'p:{1}', 3)
    _unchanged(env, c, ['SECKILL.UNFENCE', 'p:{1}'], lambda r: env.assertEqual(r, 'NOT_FENCED'))


def test_unfence_arguments():
    env, c = _env()
    _unchanged(env, c, ['SECKILL.UNFENCE', 'missing:{1}'], lambda r: env.assertEqual(r, 'NO_SALE'))
    c.set('str:{1}', 'x')
    _unchanged(env, c, ['SECKILL.UNFENCE', 'str:{1}'], lambda r: env.assertContains('WRONGTYPE', r))
    c.execute_command('SECKILL.INIT', 'f:{1}', 3, 'FENCE')
    for args in (['SECKILL.UNFENCE'], ['SECKILL.UNFENCE', 'f:{1}', 'extra']):
        _unchanged(env, c, args, lambda r: env.assertContains('wrong number of arguments', r.lower()))


# --------------------------------------------------------------- failover

def _sales_before_failover(env, master):
    """On the master: a FENCE sale with two pending reservations, a plain
    sale, a FENCE draw sale whose registration has ended, a FENCE part of a
    split sale. Returns (rid1, rid2)."""
    master.execute_command('SECKILL.INIT', 'f:{1}', 10, 'FENCE', 'LIMIT', 5)
    _, rid1, _ = master.execute_command('SECKILL.RESERVE', 'f:{1}', 'u1', 'REQID', 'order-1')
    _, rid2, _ = master.execute_command('SECKILL.RESERVE', 'f:{1}', 'u2', 'REQID', 'order-2')
    master.execute_command('SECKILL.INIT', 'p:{1}', 10)
    end = server_ms(master) + 300
    master.execute_command('SECKILL.INIT', 'd:{1}', 2, 'END', end, 'DRAW', 'FENCE')
    env.assertEqual(master.execute_command('SECKILL.ENTER', 'd:{1}', 'e1'), ['ENTERED', 1])
    master.execute_command('SECKILL.INIT', 'e:{1}', 2, 'END', server_ms(master) + 60000, 'DRAW', 'FENCE')
    _split_init(master, 's:{1}', 's:{2}', 10, 'FENCE')
    wait_for(lambda: server_ms(master) > end + 10, timeout=5)
    replica_caught_up(env, master)
    return rid1, rid2


def test_promoted_replica_is_fenced_until_unfence():
    env, master = _env(useSlaves=True)
    replica = env.getSlaveConnection()
    rid1, rid2 = _sales_before_failover(env, master)
    # On a replica the recorded id is its master's: clear.
    env.assertEqual(_replid(replica), _replid(master))
    env.assertEqual(_fence(replica, 'f:{1}'), 'clear')

    old_id = _replid(replica)
    _promote(env, replica)
    env.assertNotEqual(_replid(replica), old_id)
    r = info(replica, 'f:{1}')
    env.assertEqual(list(r.keys()), FENCE_FIELDS)
    env.assertEqual(r['fence'], 'fenced')
    env.assertEqual(r['invariant'], 'ok')

    # RESERVE: FENCED with the remaining stock; after NO_SALE and DRAW,
    # before DUPLICATE and LIMIT.
    def fenced(reply):
        env.assertEqual(reply, ['FENCED', None, 8])
    _unchanged(env, replica, ['SECKILL.RESERVE', 'f:{1}', 'u3'], fenced)
    _unchanged(env, replica, ['SECKILL.RESERVE', 'f:{1}', 'u1', 'REQID', 'order-1'], fenced)
    _unchanged(env, replica, ['SECKILL.RESERVE', 'f:{1}', 'u1', 'QTY', 5], fenced)
    _unchanged(env, replica, ['SECKILL.RESERVE', 'd:{1}', 'u3'], lambda r: env.assertEqual(r[0], 'DRAW'))
    _unchanged(env, replica, ['SECKILL.RESERVE', 'nothing:{1}', 'u3'], lambda r: env.assertEqual(r[0], 'NO_SALE'))
    # A bad argument is still an error first.
    _unchanged(env, replica, ['SECKILL.RESERVE', 'f:{1}', 'u3', 'QTY', 6], lambda r: env.assertContains('LIMIT', r))

    # ENTER: FENCED with the entrants, right after NO_SALE.
    _unchanged(env, replica, ['SECKILL.ENTER', 'e:{1}', 'e2'], lambda r: env.assertEqual(r, ['FENCED', 0]))
    _unchanged(env, replica, ['SECKILL.ENTER', 'd:{1}', 'e1'], lambda r: env.assertEqual(r, ['FENCED', 1]))
    # DRAW and SEND move stock out: the FENCED error.
    _refused_fenced(env, replica, ['SECKILL.DRAW', 'd:{1}'])
    _refused_fenced(env, replica, ['SECKILL.SEND', 's:{1}', 's:{2}', 3, 'TID', 't1', 'ROUND', 'r1'])

    # A sale without FENCE is not affected, and its report is unchanged.
    env.assertEqual(replica.execute_command('SECKILL.RESERVE', 'p:{1}', 'u1')[0], 'RESERVED')
    env.assertEqual(list(info(replica, 'p:{1}').keys()), REPORT_FIELDS)

    # What does not sell works as always on the fenced sale.
    env.assertEqual(as_dict(replica.execute_command('SECKILL.GET', 'f:{1}', rid1))['state'], 'pending')
    env.assertEqual(replica.execute_command('SECKILL.CONFIRM', 'f:{1}', rid1), ['CONFIRMED', 8])
    env.assertEqual(replica.execute_command('SECKILL.RELEASE', 'f:{1}', rid2), ['RELEASED', 9])
    env.assertEqual(replica.execute_command('SECKILL.RECV', 's:{1}', 's:{2}', 0, 'ROUND', 'r1'), [0, 0, 10])
    # The ledger has an order the new master never saw: APPLY adopts it.
    r = reconcile(replica, 'f:{1}', 'ORDERS', 2, rid1, 'u1', 1, 'lost-1', 'u9', 2, 'APPLY')
    env.assertEqual((r['orders_ok'], r['orders_unknown'], r['fence']), (1, 1, 'fenced'))
    r = info(replica, 'f:{1}')
    env.assertEqual((r['confirmed'], r['remaining'], r['fence']), (3, 7, 'fenced'))

    # UNFENCE lifts it: one write, the fence clear, RESERVE sells again.
    offset = _offset(replica)
    env.assertEqual(replica.execute_command('SECKILL.UNFENCE', 'f:{1}'), 'UNFENCED')
    env.assertGreater(_offset(replica), offset)
    env.assertEqual(_fence(replica, 'f:{1}'), 'clear')
    env.assertEqual(replica.execute_command('SECKILL.RESERVE', 'f:{1}', 'u3')[0], 'RESERVED')
    _unchanged(env, replica, ['SECKILL.UNFENCE', 'f:{1}'], lambda r: env.assertEqual(r, 'NOT_FENCED'))
    # The other sales stay fenced until their own UNFENCE.
    env.assertEqual(_fence(replica, 'e:{1}'), 'fenced')
    env.assertEqual(replica.execute_command('SECKILL.UNFENCE', 'e:{1}'), 'UNFENCED')
    env.assertEqual(replica.execute_command('SECKILL.ENTER', 'e:{1}', 'e2'), ['ENTERED', 1])
    env.assertEqual(replica.execute_command('SECKILL.UNFENCE', 'd:{1}'), 'UNFENCED')
    env.assertEqual(replica.execute_command('SECKILL.DRAW', 'd:{1}')[0], 1)
    env.assertEqual(replica.execute_command('SECKILL.UNFENCE', 's:{1}'), 'UNFENCED')
    env.assertEqual(replica.execute_command('SECKILL.SEND', 's:{1}', 's:{2}', 3, 'TID', 't1', 'ROUND', 'r1')[0], 3)


def test_holds_run_out_while_fenced():
    """Hold expiry goes on on a fenced sale (the timer, or the library's
    seckill_expire): the units come back as stock, still not sold until
    UNFENCE. INIT ... REPLACE starts a round that records the current id."""
    env, master = _env(useSlaves=True)
    replica = env.getSlaveConnection()
    master.execute_command('SECKILL.INIT', 'h:{1}', 5, 'FENCE', 'LIMIT', 5, 'HOLD', 1500)
    # The replica's first sync can take seconds: it has the sale before the hold starts.
    env.assertEqual(master.execute_command('WAIT', 1, 20000), 1)
    env.assertEqual(master.execute_command('SECKILL.RESERVE', 'h:{1}', 'u1', 'QTY', 2)[0], 'RESERVED')
    replica_caught_up(env, master)
    _promote(env, replica)
    env.assertEqual(info(replica, 'h:{1}')['pending'], 2)
    env.assertTrue(wait_for(lambda: info(replica, 'h:{1}')['pending'] == 0, timeout=10))
    r = info(replica, 'h:{1}')
    env.assertEqual((r['remaining'], r['expired'], r['fence']), (5, 2, 'fenced'))
    env.assertEqual(replica.execute_command('SECKILL.RESERVE', 'h:{1}', 'u2'), ['FENCED', None, 5])
    env.assertEqual(replica.execute_command('SECKILL.INIT', 'h:{1}', 5, 'FENCE', 'REPLACE'), 'OK')
    env.assertEqual(_fence(replica, 'h:{1}'), 'clear')
    env.assertEqual(replica.execute_command('SECKILL.RESERVE', 'h:{1}', 'u2')[0], 'RESERVED')


def _attach(env, replica_conn, master_conn, timeout=20):
    """REPLICAOF master; waits for the link and for the replica to have the
    master's whole dataset."""
    kw = master_conn.connection_pool.connection_kwargs
    replica_conn.execute_command('REPLICAOF', kw.get('host', 'localhost'), kw['port'])

    def synced():
        r = replica_conn.info('replication')
        return r.get('master_link_status') == 'up' and r.get('master_sync_in_progress') == 0
    env.assertTrue(wait_for(synced, timeout=timeout), message='the replica did not sync')
    env.assertEqual(master_conn.execute_command('WAIT', 1, 10000), 1)


def test_unfence_is_replicated():
    env, master = _env(useSlaves=True)
    replica = env.getSlaveConnection()
    _sales_before_failover(env, master)
    _promote(env, replica)
    replica.execute_command('CONFIG', 'SET', 'repl-diskless-sync-delay', 0)
    # The old master follows the new one.
    _attach(env, master, replica)
    env.assertEqual(_replid(master), _replid(replica))
    env.assertEqual(_fence(replica, 'f:{1}'), 'fenced')
    env.assertEqual(_fence(master, 'f:{1}'), 'fenced')
    env.assertEqual(digest(master), digest(replica))

    env.assertEqual(replica.execute_command('SECKILL.UNFENCE', 'f:{1}'), 'UNFENCED')
    env.assertEqual(replica.execute_command('WAIT', 1, 10000), 1)
    env.assertEqual(digest_value(master, 'f:{1}'), digest_value(replica, 'f:{1}'))
    env.assertEqual(digest(master), digest(replica))
    # On the new replica the recorded id is its master's: clear.
    env.assertEqual(_fence(master, 'f:{1}'), 'clear')
    env.assertEqual(_fence(master, 'e:{1}'), 'fenced')
    # And a RESERVE after it replicates as usual.
    env.assertEqual(replica.execute_command('SECKILL.RESERVE', 'f:{1}', 'u5')[0], 'RESERVED')
    env.assertEqual(replica.execute_command('WAIT', 1, 10000), 1)
    env.assertEqual(digest(master), digest(replica))
    # The old master leads again, so the environment can be flushed.
    master.execute_command('REPLICAOF', 'NO', 'ONE')


# --------------------------------------------------------------- restarts

def _restart_keeps_the_fence(env, restart):
    c = env.getConnection()
    c.execute_command('SECKILL.INIT', 'f:{1}', 10, 'FENCE', 'LIMIT', 5)
    c.execute_command('SECKILL.INIT', 'p:{1}', 10)
    _, rid, _ = c.execute_command('SECKILL.RESERVE', 'f:{1}', 'u1', 'QTY', 2)
    c.execute_command('SECKILL.RESERVE', 'p:{1}', 'u1')
    before_id, before = _replid(c), digest(c)
    restart(env)
    c = env.getConnection()
    # A restarted master has a new replication id: its data may lack the
    # last writes before it stopped, so the sale is fenced.
    env.assertNotEqual(_replid(c), before_id)
    env.assertEqual(digest(c), before)
    env.assertEqual(_fence(c, 'f:{1}'), 'fenced')
    _unchanged(env, c, ['SECKILL.RESERVE', 'f:{1}', 'u2'], lambda r: env.assertEqual(r, ['FENCED', None, 8]))
    env.assertEqual(c.execute_command('SECKILL.RESERVE', 'p:{1}', 'u2')[0], 'RESERVED')
    env.assertEqual(c.execute_command('SECKILL.CONFIRM', 'f:{1}', rid), ['CONFIRMED', 8])
    env.assertEqual(c.execute_command('SECKILL.UNFENCE', 'f:{1}'), 'UNFENCED')
    env.assertEqual(c.execute_command('SECKILL.RESERVE', 'f:{1}', 'u2')[0], 'RESERVED')
    # Unfenced, then restarted again: fenced again.
    after = digest(c)
    restart(env)
    c = env.getConnection()
    env.assertEqual(digest(c), after)
    env.assertEqual(_fence(c, 'f:{1}'), 'fenced')


def _stop_start(env):
    env.getConnection().execute_command('SAVE')
    env.stop()
    env.start()


def test_rdb_restart_keeps_the_fence():
    env, _ = _env()
    _restart_keeps_the_fence(env, _stop_start)


def test_aof_restart_keeps_the_fence():
    env, _ = _env(useAof=True, useRdbPreamble=False)
    _restart_keeps_the_fence(env, lambda e: restart_from_aof(e, rewrite=False))


def test_aof_rewrite_restart_keeps_the_fence():
    env, _ = _env(useAof=True, useRdbPreamble=False)
    _restart_keeps_the_fence(env, lambda e: restart_from_aof(e, rewrite=True))


def _aof_bytes(c, kind):
    data = b''
    for path in aof_files(c, kind):
        with open(path, 'rb') as f:
            data += f.read()
    return data


def test_effects_carry_the_recorded_id():
    """Module only: INIT's effect ends with FENCE <replid> and UNFENCE
    replicates as UNFENCE <replid>, the master's id explicit; an AOF
    rewrite emits the INIT form with the id recorded last."""
    env, c = _env(useAof=True, useRdbPreamble=False)
    c.execute_command('SECKILL.INIT', 'f:{1}', 10, 'FENCE')
    first = _replid(c).encode()
    env.assertContains(b'FENCE\r\n$40\r\n' + first, _aof_bytes(c, 'i'))
    restart_from_aof(env, rewrite=False)
    c = env.getConnection()
    env.assertEqual(_fence(c, 'f:{1}'), 'fenced')
    env.assertEqual(c.execute_command('SECKILL.UNFENCE', 'f:{1}'), 'UNFENCED')
    second = _replid(c).encode()
    env.assertNotEqual(second, first)
    env.assertContains(b'UNFENCE\r\n$40\r\n' + second, _aof_bytes(c, 'i'))
    c.execute_command('BGREWRITEAOF')
    env.assertTrue(wait_aof_rewrite(c))
    base = _aof_bytes(c, 'b')
    env.assertContains(b'FENCE\r\n$40\r\n' + second, base)
    env.assertNotContains(first, base)


def test_debug_reload_keeps_the_id():
    """DEBUG RELOAD keeps the server's replication id: a clear sale stays
    clear, a fenced one fenced (the recorded id is persisted as it was)."""
    env, c = _env()
    c.execute_command('SECKILL.INIT', 'f:{1}', 10, 'FENCE')
    replid, before = _replid(c), digest(c)
    env.dumpAndReload()
    env.assertEqual(_replid(c), replid)
    env.assertEqual(digest(c), before)
    env.assertEqual(_fence(c, 'f:{1}'), 'clear')
    env.assertEqual(c.execute_command('SECKILL.RESERVE', 'f:{1}', 'u1')[0], 'RESERVED')


# ------------------------------------------------- a master's first replica

class _Replica(OwnServer):
    """A server of our own (`OwnServer`), replica of `master`."""

    def __init__(self, env, master):
        kw = master.connection_pool.connection_kwargs
        module = env.module[0] if isinstance(env.module, list) else env.module
        super().__init__(Defaults.binary, '--replicaof', kw.get('host', 'localhost'), str(kw['port']),
                         module=None if FUNCTIONS else module, prefix='seckill-fence-')

    def synced(self):
        try:
            r = self.conn.info('replication')
        except redis.ConnectionError:
            return False
        return r.get('master_link_status') == 'up' and r.get('master_sync_in_progress') == 0


def test_first_replica_of_a_master_fences():
    """A master without a replication backlog makes one, with a new id,
    when its first replica attaches: a documented false positive (attach
    replicas before INIT, or UNFENCE)."""
    env, c = _env()
    c.execute_command('CONFIG', 'SET', 'repl-diskless-sync-delay', 0)
    c.execute_command('SECKILL.INIT', 'f:{1}', 10, 'FENCE')
    env.assertEqual(_fence(c, 'f:{1}'), 'clear')
    replid = _replid(c)
    replica = _Replica(env, c)
    try:
        env.assertTrue(wait_for(replica.synced, timeout=20), message='the replica did not sync')
        env.assertEqual(c.execute_command('WAIT', 1, 10000), 1)
        env.assertNotEqual(_replid(c), replid)
        env.assertEqual(_fence(c, 'f:{1}'), 'fenced')
        env.assertEqual(c.execute_command('SECKILL.RESERVE', 'f:{1}', 'u1'), ['FENCED', None, 10])
        env.assertEqual(c.execute_command('SECKILL.UNFENCE', 'f:{1}'), 'UNFENCED')
        env.assertEqual(c.execute_command('SECKILL.RESERVE', 'f:{1}', 'u1')[0], 'RESERVED')
        env.assertEqual(c.execute_command('WAIT', 1, 10000), 1)
        env.assertEqual(digest(replica.conn), digest(c))
        env.assertEqual(_fence(replica.conn, 'f:{1}'), 'clear')
    finally:
        replica.stop()
