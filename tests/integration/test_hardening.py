"""Hardening: what an operator or a hostile client can do to the server the
module lives in. Paused writes (CLIENT PAUSE, FAILOVER, SHUTDOWN waiting for
a replica) while holds fall due, bounded expiry work, the internal EFFECT
command, RESTORE of a payload whose stream lies in another slot, keys opened
without touching them, asynchronous replica loads, and the log."""

import os
import threading
import time

import redis
from RLTest import Env
from RLTest.env import Defaults

from seckill_helpers import OwnServer, replica_caught_up, aof_files, digest, digest_value, info, reserve, seckill_stats, wait_aof_rewrite, wait_for
from test_corrupt_input import _parse_resp_commands


def _module(env):
    m = env.module
    return m[0] if isinstance(m, list) else m


class Server(OwnServer):
    """A server of our own with the module (`OwnServer`), answering once
    started; every cluster node's bus port is free too."""

    def __init__(self, env, *args):
        super().__init__(Defaults.binary, *args, module=_module(env), prefix='seckill-hard-', cluster_bus=True)
        ok = wait_for(self.ping, timeout=10)
        assert ok, 'server did not start: %s' % self.read_log()


def _holds(conn, key, n, hold_ms, stream=None):
    args = ['SECKILL.INIT', key, 100000, 'LIMIT', 100000, 'HOLD', hold_ms]
    if stream:
        args += ['STREAM', stream]
    conn.execute_command(*args)
    p = conn.pipeline(transaction=False)
    for i in range(n):
        p.execute_command('SECKILL.RESERVE', key, 'u%d' % i)
    p.execute()


def _pending(conn, key):
    return info(conn, key)['pending']


def test_client_pause_write_while_holds_fall_due():
    """The timer must not write while writes are paused (Redis asserts and
    dies if it does), and must catch up once they resume."""
    env = Env(useAof=True, decodeResponses=True)
    conn = env.getConnection()
    _holds(conn, 'p:{1}', 50, 200, stream='p:{1}:ev')
    conn.execute_command('CLIENT', 'PAUSE', 1500, 'WRITE')
    time.sleep(0.8)  # every hold falls due while paused
    env.assertTrue(conn.ping())
    env.assertEqual(_pending(conn, 'p:{1}'), 50)  # nothing released while paused
    wait_for(lambda: _pending(conn, 'p:{1}') == 0, timeout=5)
    env.assertEqual(_pending(conn, 'p:{1}'), 0)
    env.assertEqual(conn.xlen('p:{1}:ev'), 100)  # 50 reserved + 50 expired
    # The AOF replays to the same sale.
    before = digest_value(conn, 'p:{1}')
    env.restartAndReload()
    env.assertEqual(digest_value(env.getConnection(), 'p:{1}'), before)


def test_failover_while_holds_fall_due():
    """FAILOVER pauses writes on the old master until the replica took
    over; holds falling due meanwhile are released by the new master."""
    env = Env(useSlaves=True, decodeResponses=True)
    master = env.getConnection()
    replica = env.getSlaveConnection()
    _holds(master, 'f:{1}', 40, 300, stream='f:{1}:ev')
    env.assertEqual(master.execute_command('WAIT', 1, 5000), 1)
    # A replica that lags keeps the old master paused (waiting for it to
    # catch up) while every hold falls due.
    sleeper = threading.Thread(target=lambda: env.getSlaveConnection().execute_command('DEBUG', 'SLEEP', 1))
    sleeper.start()
    time.sleep(0.05)
    master.set('lag', 1)
    master.execute_command('FAILOVER', 'TIMEOUT', 5000)
    sleeper.join()
    # Roles swap; both servers must stay up while holds fall due.
    ok = wait_for(lambda: replica.info('replication')['role'] == 'master', timeout=10)
    env.assertTrue(ok)
    wait_for(lambda: master.info('replication')['role'] == 'slave', timeout=10)
    env.assertTrue(master.ping())
    wait_for(lambda: _pending(replica, 'f:{1}') == 0, timeout=5)
    env.assertEqual(_pending(replica, 'f:{1}'), 0)
    env.assertEqual(replica.xlen('f:{1}:ev'), 80)
    # The old master, now a replica, ends in the same state.
    wait_for(lambda: digest(master) == digest(replica), timeout=5)
    env.assertEqual(digest(master), digest(replica))
    # Put the roles back for RLTest's teardown.
    replica.execute_command('FAILOVER')
    wait_for(lambda: master.info('replication')['role'] == 'master', timeout=10)


def test_shutdown_waiting_for_a_lagging_replica():
    """SHUTDOWN waits (writes paused) for a replica held back by DEBUG
    SLEEP; holds falling due meanwhile must not crash the master, which
    then saves its RDB and exits cleanly."""
    env = Env(decodeResponses=True)
    master = Server(env, '--save', '3600 1', '--shutdown-timeout', '3')
    replica = Server(env, '--replicaof', '127.0.0.1', str(master.port))
    try:
        env.assertTrue(wait_for(lambda: replica.conn.info('replication').get('master_link_status') == 'up',
                                timeout=15))
        _holds(master.conn, 's:{1}', 30, 300, stream='s:{1}:ev')
        env.assertEqual(master.conn.execute_command('WAIT', 1, 5000), 1)
        # SHUTDOWN from a connection that never ran WAIT: on 7.0.15 a WAIT's
        # stale timeout crashes a later SHUTDOWN of the same client
        # (replyToBlockedClientTimedOut), module or not.
        shutdown = redis.Redis(port=master.port)
        sleeper = threading.Thread(target=lambda: replica.conn.execute_command('DEBUG', 'SLEEP', 2))
        sleeper.start()
        time.sleep(0.1)
        master.conn.set('lag', 'x')  # the replica now lags behind
        try:
            shutdown.execute_command('SHUTDOWN')
        except redis.ConnectionError:
            pass
        sleeper.join()
        env.assertEqual(master.proc.wait(15), 0)
        log = master.read_log()
        env.assertNotContains('ASSERTION FAILED', log)
        env.assertContains('DB saved on disk', log)
    finally:
        master.stop()
        replica.stop()


def test_cluster_failover_while_holds_fall_due():
    """CLUSTER FAILOVER pauses writes on the old master too. A one-shard
    cluster of our own: RLTest's cluster replicas are not cluster members."""
    env = Env(decodeResponses=True)
    a = Server(env, '--cluster-enabled', 'yes')
    b = Server(env, '--cluster-enabled', 'yes')
    try:
        a.conn.execute_command('CLUSTER', 'ADDSLOTSRANGE', 0, 16383)
        a.conn.execute_command('CLUSTER', 'MEET', '127.0.0.1', b.port)
        a_id = a.conn.execute_command('CLUSTER', 'MYID')
        env.assertTrue(wait_for(lambda: a_id in b.conn.execute_command('CLUSTER', 'NODES'), timeout=10))
        b.conn.execute_command('CLUSTER', 'REPLICATE', a_id)
        env.assertTrue(wait_for(lambda: b.conn.info('replication').get('master_link_status') == 'up',
                                timeout=15))
        env.assertTrue(wait_for(lambda: 'cluster_state:ok' in a.conn.execute_command('CLUSTER', 'INFO'),
                                timeout=10))
        _holds(a.conn, 'c:{1}', 30, 400, stream='c:{1}:ev')
        env.assertEqual(a.conn.execute_command('WAIT', 1, 5000), 1)
        b.conn.execute_command('CLUSTER', 'FAILOVER')
        env.assertTrue(wait_for(lambda: b.conn.info('replication')['role'] == 'master', timeout=15))
        env.assertTrue(a.conn.ping())
        wait_for(lambda: _pending(b.conn, 'c:{1}') == 0, timeout=5)
        env.assertEqual(_pending(b.conn, 'c:{1}'), 0)
        env.assertEqual(b.conn.xlen('c:{1}:ev'), 60)
        env.assertTrue(wait_for(lambda: a.conn.info('replication')['role'] == 'slave', timeout=10))
        env.assertIsNone(a.proc.poll())
        env.assertNotContains('ASSERTION FAILED', a.read_log())
    finally:
        a.stop()
        b.stop()


def _cluster_pair(env):
    """Two masters of a cluster of our own, slots split in half."""
    a = Server(env, '--cluster-enabled', 'yes')
    b = Server(env, '--cluster-enabled', 'yes')
    a.conn.execute_command('CLUSTER', 'ADDSLOTSRANGE', 0, 8191)
    b.conn.execute_command('CLUSTER', 'ADDSLOTSRANGE', 8192, 16383)
    a.conn.execute_command('CLUSTER', 'MEET', '127.0.0.1', b.port)
    for n in (a, b):
        assert wait_for(lambda: 'cluster_state:ok' in n.conn.execute_command('CLUSTER', 'INFO'), timeout=15)
    return a, b


def _move_sale_then_reserve(env, a, b, key, user):
    """The second half of a MIGRATE-based move whose stream went first: the
    sale follows, the target serves it under ASKING (stream and all), and
    the slot becomes the target's on both nodes."""
    slot = a.conn.execute_command('CLUSTER', 'KEYSLOT', key)
    a.conn.execute_command('MIGRATE', '127.0.0.1', b.port, '', 0, 5000, 'KEYS', key)
    p = b.conn.pipeline(transaction=False)
    p.execute_command('ASKING')
    p.execute_command('SECKILL.RESERVE', key, user)
    env.assertEqual(p.execute()[1][0], 'RESERVED', depth=1)
    b_id = b.conn.execute_command('CLUSTER', 'MYID')
    for n in (a, b):
        n.conn.execute_command('CLUSTER', 'SETSLOT', slot, 'NODE', b_id)


def test_reserve_during_slot_migration_keeps_one_stream():
    """The stream key is not among RESERVE's keys, so Redis cannot redirect
    a RESERVE whose stream moved first. The module answers TRYAGAIN rather
    than start a second stream on the source node."""
    env = Env(decodeResponses=True)
    a, b = _cluster_pair(env)
    try:
        tag = next(t for t in range(100000)
                   if a.conn.execute_command('CLUSTER', 'KEYSLOT', '{m%d}' % t) < 8192)
        key, stream = 'sale:{m%d}' % tag, 'sale:{m%d}:ev' % tag
        slot = a.conn.execute_command('CLUSTER', 'KEYSLOT', key)
        a_id, b_id = a.conn.execute_command('CLUSTER', 'MYID'), b.conn.execute_command('CLUSTER', 'MYID')
        a.conn.execute_command('SECKILL.INIT', key, 100, 'LIMIT', 100, 'STREAM', stream)
        for i in range(5):
            env.assertEqual(reserve(a.conn, key, 'u%d' % i)[0], 'RESERVED')
        # The reshard starts, and moves the stream first.
        b.conn.execute_command('CLUSTER', 'SETSLOT', slot, 'IMPORTING', a_id)
        a.conn.execute_command('CLUSTER', 'SETSLOT', slot, 'MIGRATING', b_id)
        a.conn.execute_command('MIGRATE', '127.0.0.1', b.port, '', 0, 5000, 'KEYS', stream)
        try:
            reserve(a.conn, key, 'late')
            env.assertTrue(False, message='RESERVE went on without its stream')
        except redis.ResponseError as e:
            # redis-py turns TRYAGAIN into TryAgainError and drops the word.
            env.assertEqual(type(e).__name__, 'TryAgainError', message=str(e))
            env.assertContains('STREAM key is not on this node', str(e))
        env.assertEqual(a.conn.execute_command('CLUSTER', 'COUNTKEYSINSLOT', slot), 1)
        # Sold-out or not, the sale's state did not change on the source.
        env.assertEqual(info(a.conn, key)['pending'], 5)
        # The sale follows; with ASKING the target serves it, stream and all.
        _move_sale_then_reserve(env, a, b, key, 'late')
        env.assertEqual(b.conn.xlen(stream), 6)
        env.assertEqual(info(b.conn, key)['pending'], 6)
        env.assertEqual(a.conn.execute_command('CLUSTER', 'COUNTKEYSINSLOT', slot), 0)
    finally:
        a.stop()
        b.stop()


def _migrate_before_any_reservation(env, a, b, tag, setup):
    """Moves the slot of a sale whose stream exists but which has no
    reservation (`setup` makes that state), the stream first as
    `redis-cli --cluster reshard --cluster-pipeline 1` may: RESERVE answers
    TRYAGAIN on either side until both keys are on one node, and the
    stream, its group and every entry end on the target."""
    key, stream = 'sale:{m%d}' % tag, 'sale:{m%d}:ev' % tag
    slot = a.conn.execute_command('CLUSTER', 'KEYSLOT', key)
    a_id, b_id = a.conn.execute_command('CLUSTER', 'MYID'), b.conn.execute_command('CLUSTER', 'MYID')
    setup(a.conn, key, stream)
    env.assertEqual(info(a.conn, key)['reservations'], 0)
    b.conn.execute_command('CLUSTER', 'SETSLOT', slot, 'IMPORTING', a_id)
    a.conn.execute_command('CLUSTER', 'SETSLOT', slot, 'MIGRATING', b_id)
    a.conn.execute_command('MIGRATE', '127.0.0.1', b.port, '', 0, 5000, 'KEYS', stream)
    with env.assertResponseError(contained='STREAM key is not on this node'):
        reserve(a.conn, key, 'early')
    env.assertEqual(a.conn.execute_command('CLUSTER', 'COUNTKEYSINSLOT', slot), 1,
                    message='a second stream was started on the source')
    env.assertEqual(info(a.conn, key)['reservations'], 0)
    _move_sale_then_reserve(env, a, b, key, 'early')
    entries = b.conn.xrange(stream)
    env.assertEqual([e[1]['event'] for e in entries][-1:], ['reserved'])
    env.assertEqual([g['name'] for g in b.conn.xinfo_groups(stream)], ['workers'])
    env.assertEqual(a.conn.execute_command('CLUSTER', 'COUNTKEYSINSLOT', slot), 0)


def _worker_group_first(conn, key, stream):
    conn.execute_command('SECKILL.INIT', key, 10, 'STREAM', stream)
    conn.xgroup_create(stream, 'workers', id='$', mkstream=True)


def _replaced_round(conn, key, stream):
    conn.execute_command('SECKILL.INIT', key, 10, 'STREAM', stream)
    conn.xgroup_create(stream, 'workers', id='$', mkstream=True)
    reserve(conn, key, 'round-1-buyer')
    conn.execute_command('SECKILL.INIT', key, 10, 'STREAM', stream, 'REPLACE')


def test_slot_migration_keeps_one_stream_before_any_reservation():
    """A sale's stream exists before its first reservation (a worker's
    XGROUP CREATE ... MKSTREAM) or after REPLACE zeroed its records: a
    migration that moves the stream first must not start a second one."""
    env = Env(decodeResponses=True)
    a, b = _cluster_pair(env)
    try:
        tags = [t for t in range(100000) if a.conn.execute_command('CLUSTER', 'KEYSLOT', '{m%d}' % t) < 8192][:2]
        _migrate_before_any_reservation(env, a, b, tags[0], _worker_group_first)
        _migrate_before_any_reservation(env, a, b, tags[1], _replaced_round)
    finally:
        a.stop()
        b.stop()


def test_a_copy_never_writes_the_live_stream():
    """COPY or DUMP/RESTORE of a sale under another name is a snapshot: it
    keeps the stock, but writes nothing to the stream its original owns
    (not on its own commands, not by hold expiry). RENAME carries the
    stream along, and a copy renamed back to its owner's name writes again."""
    env = Env(decodeResponses=True)
    c = env.getConnection()
    key, stream = 'sale:{cp}', 'sale:{cp}:ev'
    c.execute_command('SECKILL.INIT', key, 10, 'HOLD', 300, 'LIMIT', 5, 'STREAM', stream)
    reserve(c, key, 'u1', 'REQID', 'o1')
    reserve(c, key, 'u2', 'REQID', 'o2')
    c.execute_command('COPY', key, key + ':backup')
    c.execute_command('RESTORE', key + ':restored', 0, c.dump(key))
    c.execute_command('SECKILL.CONFIRM', key, 'o1')
    for copy in (key + ':backup', key + ':restored'):
        env.assertEqual(reserve(c, copy, 'u3', 'REQID', 'o3')[0], 'RESERVED')
        env.assertEqual(c.execute_command('SECKILL.RELEASE', copy, 'o3')[0], 'RELEASED')
    # Every hold runs out: on the live sale (o2) and on both copies.
    env.assertTrue(wait_for(lambda: all(info(c, k)['pending'] == 0 for k in (key, key + ':backup', key + ':restored')),
                            timeout=5), message='holds did not expire')
    events = [(e[1]['event'], e[1]['rid']) for e in c.xrange(stream)]
    env.assertEqual(events, [('reserved', 'o1'), ('reserved', 'o2'), ('confirmed', 'o1'), ('expired', 'o2')])
    # RENAME moves the stream with the sale.
    c.execute_command('RENAME', key, key + ':moved')
    env.assertEqual(reserve(c, key + ':moved', 'u4', 'REQID', 'o4')[0], 'RESERVED')
    env.assertEqual(c.xrange(stream)[-1][1]['rid'], 'o4')
    # A backup renamed to its owner's name (restoring it) writes again.
    c.delete(key + ':moved')
    c.execute_command('RENAME', key + ':backup', key)
    env.assertEqual(reserve(c, key, 'u5', 'REQID', 'o5')[0], 'RESERVED')
    env.assertEqual(c.xrange(stream)[-1][1]['rid'], 'o5')
    # And the owner survives persistence.
    d = digest_value(c, key)
    c.execute_command('DEBUG', 'RELOAD')
    env.assertEqual(digest_value(c, key), d)
    env.assertEqual(reserve(c, key, 'u6', 'REQID', 'o6')[0], 'RESERVED')
    env.assertEqual(c.xrange(stream)[-1][1]['rid'], 'o6')


def _aof_commands(conn):
    """The commands of the AOF's incremental files, as written. Waits for a
    rewrite in progress (RLTest's restartAndReload of an earlier test may
    have started one) so the files do not change under the caller."""
    wait_aof_rewrite(conn)
    cmds = []
    for path in aof_files(conn, 'i'):
        with open(path, 'rb') as f:
            cmds += _parse_resp_commands(f.read())
    return cmds


def test_expiry_in_bounded_chunks():
    """Many holds due at once are released in chunks: each EXPIRE effect the
    AOF and replicas receive names at most 128 holds; all are released
    within seconds."""
    env = Env(useAof=True, decodeResponses=True)
    conn = env.getConnection()
    wait_aof_rewrite(conn)
    _holds(conn, 'e:{1}', 1000, 200, stream='e:{1}:ev')
    wait_for(lambda: _pending(conn, 'e:{1}') == 0, timeout=10)
    env.assertEqual(_pending(conn, 'e:{1}'), 0)
    sizes = [len(c) - 3 for c in _aof_commands(conn)
             if c[0].upper() == b'SECKILL.EFFECT' and c[1] == b'e:{1}' and c[2] == b'EXPIRE']
    env.assertEqual(sum(sizes), 1000)
    env.assertLessEqual(max(sizes or [0]), 128)
    env.assertGreaterEqual(len(sizes), 8)
    before = digest_value(conn, 'e:{1}')
    env.restartAndReload()
    env.assertEqual(digest_value(env.getConnection(), 'e:{1}'), before)


def test_idle_sales_cost_nothing():
    """The timer opens only sales whose next hold is due: many sales with
    far-off holds are never visited, before or after a reload."""
    env = Env(decodeResponses=True)
    conn = env.getConnection()
    before = seckill_stats(conn)['sales_scheduled_for_expiry']
    p = conn.pipeline(transaction=False)
    for i in range(2000):
        p.execute_command('SECKILL.INIT', 'idle:%d' % i, 10, 'HOLD', 3600000)
        p.execute_command('SECKILL.RESERVE', 'idle:%d' % i, 'u')
    p.execute()
    scheduled = seckill_stats(conn)['sales_scheduled_for_expiry']
    env.assertEqual(scheduled - before, 2000)
    visits = seckill_stats(conn)['expiry_visits']
    time.sleep(0.5)
    env.assertEqual(seckill_stats(conn)['expiry_visits'], visits)
    conn.execute_command('DEBUG', 'RELOAD')
    env.assertEqual(seckill_stats(conn)['sales_scheduled_for_expiry'], scheduled)
    visits = seckill_stats(conn)['expiry_visits']
    time.sleep(0.5)
    env.assertEqual(seckill_stats(conn)['expiry_visits'], visits)
    # A due one is still found among them.
    conn.execute_command('SECKILL.INIT', 'soon', 10, 'HOLD', 100)
    reserve(conn, 'soon', 'u')
    wait_for(lambda: _pending(conn, 'soon') == 0, timeout=3)
    env.assertEqual(_pending(conn, 'soon'), 0)


def test_effect_refuses_plain_clients():
    """SECKILL.EFFECT states its own quantities and times: a client sending
    one could pass LIMIT. It runs only from the master link and the AOF."""
    env = Env(decodeResponses=True)
    conn = env.getConnection()
    conn.execute_command('SECKILL.INIT', 's', 10, 'LIMIT', 1, 'HOLD', 60000)
    now = int(conn.time()[0]) * 1000
    before = digest_value(conn, 's')
    denied = seckill_stats(conn)['effects_denied']
    try:
        conn.execute_command('SECKILL.EFFECT', 's', 'PENDING', 'x1', 'alice',
                             '5:%d:%d:0' % (now + 100000, now + 160000))
        env.assertTrue(False, message='EFFECT from a client was accepted')
    except redis.ResponseError as e:
        env.assertContains('internal', str(e))
    env.assertEqual(digest_value(conn, 's'), before)
    env.assertEqual(info(conn, 's')['remaining'], 10)
    env.assertEqual(seckill_stats(conn)['effects_denied'], denied + 1)
    # Not through a script either.
    try:
        conn.eval("return redis.call('SECKILL.EFFECT', KEYS[1], 'CONFIRM', 'x')", 1, 's')
        env.assertTrue(False, message='EFFECT from a script was accepted')
    except redis.ResponseError as e:
        env.assertContains('internal', str(e))


def test_effect_allowed_by_module_argument():
    env = Env(moduleArgs='ALLOW-CLIENT-EFFECTS yes', decodeResponses=True)
    conn = env.getConnection()
    conn.execute_command('SECKILL.INIT', 's', 10, 'LIMIT', 2, 'HOLD', 60000)
    now = int(conn.time()[0]) * 1000
    env.assertEqual(conn.execute_command('SECKILL.EFFECT', 's', 'PENDING', 'x1', 'alice',
                                         '2:%d:%d:0' % (now, now + 60000)), 'OK')
    env.assertEqual(info(conn, 's')['pending'], 2)


def test_refused_effects_do_not_flood_the_log():
    env = Env(moduleArgs='ALLOW-CLIENT-EFFECTS yes', decodeResponses=True)
    conn = env.getConnection()
    conn.execute_command('SECKILL.INIT', 's', 10)
    logfile = os.path.join(conn.config_get('dir')['dir'], conn.config_get('logfile')['logfile'])

    def logged():
        with open(logfile) as f:
            return sum(1 for line in f if 'refused SECKILL.EFFECT' in line)
    lines, refused = logged(), seckill_stats(conn)['effects_refused']
    p = conn.pipeline(transaction=False)
    for i in range(500):
        p.execute_command('SECKILL.EFFECT', 's', 'RELEASE', 'nope%d' % i)
    results = p.execute(raise_on_error=False)
    env.assertTrue(all(isinstance(r, redis.ResponseError) for r in results))
    env.assertEqual(seckill_stats(conn)['effects_refused'], refused + 500)
    # 500 refusals within a second or two: a line a second at the most.
    env.assertLessEqual(logged() - lines, 3)


def test_restore_refuses_a_stream_in_another_slot():
    """A payload is client input: RESTORE refuses a sale whose stream is in
    another slot than its key (the module writes that stream itself).
    Outside a cluster, a RENAME can move a sale away from its stream; its
    own reload still loads it."""
    env = Env(decodeResponses=True)
    conn = env.getConnection()
    conn.execute_command('SECKILL.INIT', 'a:{1}', 10, 'STREAM', 'a:{1}:ev')
    reserve(conn, 'a:{1}', 'u1')
    conn.rename('a:{1}', 'b:{2}')  # now the stream is in another slot
    payload = conn.dump('b:{2}')
    try:
        conn.restore('c:{3}', 0, payload)
        env.assertTrue(False, message='RESTORE accepted a stream in another slot')
    except redis.ResponseError as e:
        env.assertContains('bad data format', str(e).lower())
    env.assertEqual(conn.exists('c:{3}'), 0)
    # A payload whose stream shares its key's slot restores.
    conn.execute_command('SECKILL.INIT', 'd:{4}', 10, 'STREAM', 'd:{4}:ev')
    good = conn.dump('d:{4}')
    conn.delete('d:{4}')
    env.assertTrue(conn.restore('d:{4}', 0, good))
    # The server's own RDB loads the renamed sale (standalone).
    conn.execute_command('DEBUG', 'RELOAD')
    env.assertEqual(info(conn, 'b:{2}')['pending'], 1)


def test_key_events_do_not_touch_keys():
    """The module's handlers for RESTORE, RENAME, COPY, MOVE and loading must
    not touch keys (Redis's own 'RESTORE can set LRU') nor count hits."""
    env = Env(decodeResponses=True)
    conn = env.getConnection()
    conn.config_set('maxmemory-policy', 'allkeys-lru')
    conn.set('foo', 'bar')
    encoded = conn.dump('foo')
    conn.delete('foo')
    conn.restore('foo', 0, encoded, idletime=1000)
    idle = conn.object('idletime', 'foo')
    env.assertGreaterEqual(idle, 1000)
    env.assertLessEqual(idle, 1010)
    # A sale restored with IDLETIME keeps it, even after the timer opened
    # it to release its hold.
    conn.execute_command('SECKILL.INIT', 'lru-sale', 10, 'HOLD', 400)
    reserve(conn, 'lru-sale', 'u1')
    payload = conn.dump('lru-sale')
    conn.delete('lru-sale')
    expired = seckill_stats(conn)['holds_expired']
    conn.restore('lru-sale', 0, payload, idletime=1000)
    env.assertTrue(wait_for(lambda: seckill_stats(conn)['holds_expired'] > expired, timeout=3))
    env.assertGreaterEqual(conn.object('idletime', 'lru-sale'), 1000)
    # Loading counts no keyspace hits.
    for i in range(100):
        conn.set('k%d' % i, i)
    hits = int(conn.info('stats')['keyspace_hits'])
    conn.execute_command('DEBUG', 'RELOAD')
    time.sleep(0.3)
    env.assertEqual(int(conn.info('stats')['keyspace_hits']), hits)


def test_async_replica_load():
    """With repl-diskless-load swapdb the replica loads the new dataset
    beside the live one (the module declares it can), without the log flood
    of a refused diskless load; once promoted it expires the loaded holds."""
    env = Env(useSlaves=True, decodeResponses=True)
    master = env.getConnection()
    replica = env.getSlaveConnection()
    master.config_set('repl-diskless-sync', 'yes')
    master.config_set('repl-diskless-sync-delay', 0)
    replica.config_set('repl-diskless-load', 'swapdb')
    _holds(master, 'async:{1}', 20, 1500)
    # A new replication id forces a full sync on reconnection.
    full_syncs = int(master.info('stats')['sync_full'])
    master.execute_command('DEBUG', 'CHANGE-REPL-ID')
    master.execute_command('CLIENT', 'KILL', 'TYPE', 'replica')
    env.assertTrue(wait_for(lambda: int(master.info('stats')['sync_full']) > full_syncs, timeout=10))
    wait_for(lambda: replica.info('replication').get('master_link_status') == 'up', timeout=10)
    replica_caught_up(env, master)
    env.assertEqual(digest(replica), digest(master))
    log = os.path.join(replica.config_get('dir')['dir'], replica.config_get('logfile')['logfile'])
    with open(log) as f:
        text = f.read()
    env.assertNotContains('not aware of async replication', text)
    env.assertContains('Swapping active DB with loaded DB', text)
    env.assertNotContains('Skipping diskless-load', text)
    # Promoted, the replica's timer releases the loaded holds.
    replica.execute_command('REPLICAOF', 'NO', 'ONE')
    wait_for(lambda: _pending(replica, 'async:{1}') == 0, timeout=5)
    env.assertEqual(_pending(replica, 'async:{1}'), 0)
    # Back to a replica of the master, as RLTest set it up.
    replica.execute_command('REPLICAOF', '127.0.0.1', master.connection_pool.connection_kwargs['port'])
    wait_for(lambda: replica.info('replication').get('master_link_status') == 'up', timeout=10)


def test_reconcile_apply_is_one_effect_per_call():
    """RECONCILE APPLY replicates one effect for the whole call (before: one
    per row), and a call takes at most 1000 rows."""
    env = Env(useAof=True, decodeResponses=True)
    conn = env.getConnection()
    wait_aof_rewrite(conn)
    conn.execute_command('SECKILL.INIT', 'r:{1}', 5000, 'LIMIT', 10, 'HOLD', 60000, 'STREAM', 'r:{1}:ev')
    pending = [reserve(conn, 'r:{1}', 'p%d' % i)[1] for i in range(300)]
    released = [reserve(conn, 'r:{1}', 'q%d' % i)[1] for i in range(200)]
    for rid in released:
        conn.execute_command('SECKILL.RELEASE', 'r:{1}', rid)
    rows = [(rid, 'p%d' % i, 1) for i, rid in enumerate(pending)]
    rows += [(rid, 'q%d' % i, 1) for i, rid in enumerate(released)]
    rows += [('x%d' % i, 'x%d' % i, 1) for i in range(500)]  # unknown here
    args = [a for row in rows for a in row]
    env.expect('SECKILL.RECONCILE', 'r:{1}', 'ORDERS', 1001, *(args + ['y', 'y', 1])).error().contains('at most 1000')
    before = len(_aof_commands(conn))
    r = conn.execute_command('SECKILL.RECONCILE', 'r:{1}', 'ORDERS', len(rows), *args, 'APPLY')
    report = dict(zip(r[0::2], r[1::2]))
    env.assertEqual((report['orders_pending'], report['orders_released'], report['orders_unknown']), (300, 200, 500))
    env.assertEqual(report['confirmed'], 1000)
    added = _aof_commands(conn)[before:]
    effects = [c for c in added if c[0].upper() == b'SECKILL.EFFECT']
    env.assertEqual(len(effects), 1)
    env.assertEqual(effects[0][2], b'BATCH')
    env.assertEqual(sum(1 for c in added if c[0].upper() == b'XADD'), 1000)
    env.assertEqual(conn.xlen('r:{1}:ev'), 500 + 200 + 1000)
    want = digest_value(conn, 'r:{1}')
    env.restartAndReload()
    env.assertEqual(digest_value(env.getConnection(), 'r:{1}'), want)
