"""RESERVE's stream entry travels inside its PENDING effect (one replicated
command per RESERVE): replicas and AOF replay append it themselves with the
master's id and trim to the master's length, ending byte-identical."""

from RLTest import Env

from seckill_helpers import replica_caught_up, digest_value, wait_aof_rewrite, wait_for
from test_hardening import _aof_commands

KEY = 'sale:{se}'
STREAM = 'sale:{se}:ev'


def _stream_state(conn):
    info = conn.execute_command('XINFO', 'STREAM', STREAM)
    info = dict(zip(info[0::2], info[1::2]))
    keep = ('length', 'last-generated-id', 'entries-added', 'max-deleted-entry-id', 'first-entry', 'last-entry')
    return {
        'digest': digest_value(conn, STREAM),
        'range': conn.xrange(STREAM),
        'info': {k: info.get(k) for k in keep},
        'groups': [sorted(g.items()) for g in conn.xinfo_groups(STREAM)],
        'pending': conn.xpending(STREAM, 'g'),
    }


def _workload(conn, n=600):
    conn.execute_command('SECKILL.INIT', KEY, 100000, 'LIMIT', 5, 'HOLD', 60000, 'STREAM', STREAM, 'MAXLEN', 100)
    conn.xgroup_create(STREAM, 'g', id='0', mkstream=True)
    rids = []
    for i in range(n):
        r = conn.execute_command('SECKILL.RESERVE', KEY, 'u%d' % i, 'QTY', 1 + i % 3)
        assert r[0] == 'RESERVED', r
        rids.append(r[1])
        if i % 7 == 0:
            conn.execute_command('SECKILL.RELEASE', KEY, rids[-1])
        if i % 50 == 49:
            conn.xreadgroup('g', 'c1', {STREAM: '>'}, count=20)
    # A RESERVE inside MULTI, and a duplicate (no effect, no entry).
    pipe = conn.pipeline(transaction=True)
    pipe.execute_command('SECKILL.RESERVE', KEY, 'multi-user')
    pipe.execute_command('SECKILL.RESERVE', KEY, 'u1')
    pipe.execute()


def test_replica_stream_is_the_masters():
    env = Env(useSlaves=True, decodeResponses=True)
    master, replica = env.getConnection(), env.getSlaveConnection()
    _workload(master)
    replica_caught_up(env, master)
    env.assertEqual(_stream_state(replica), _stream_state(master))
    env.assertEqual(digest_value(replica, KEY), digest_value(master, KEY))
    # Trimmed approximately on the master, exactly to the same length here.
    env.assertLess(master.xlen(STREAM), 600)


def test_aof_replay_rebuilds_the_stream_and_carries_one_command_per_reserve():
    env = Env(useAof=True, decodeResponses=True)
    conn = env.getConnection()
    wait_aof_rewrite(conn)
    conn.execute_command('SECKILL.INIT', 'one:{se}', 10, 'STREAM', 'one:{se}:ev', 'MAXLEN', 5)
    before = len(_aof_commands(conn))
    conn.execute_command('SECKILL.RESERVE', 'one:{se}', 'alice')
    added = _aof_commands(conn)[before:]
    names = [c[0].upper() for c in added if c[0].upper() not in (b'MULTI', b'EXEC')]
    env.assertEqual(names, [b'SECKILL.EFFECT'])
    env.assertEqual(added[-1][2] if added[-1][0].upper() != b'EXEC' else added[-2][2], b'PENDING')
    _workload(conn)
    want, want_sale = _stream_state(conn), digest_value(conn, KEY)
    env.restartAndReload()
    conn = env.getConnection()
    wait_for(lambda: conn.ping(), 10)
    env.assertEqual(_stream_state(conn), want)
    env.assertEqual(digest_value(conn, KEY), want_sale)
