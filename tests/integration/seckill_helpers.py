"""Shared helpers for the seckill integration tests (RLTest).

Nothing here starts with "test", so RLTest does not collect it.
Every helper takes a redis-py connection made with decode_responses=True.
"""

import os
import random
import re
import signal
import socket
import subprocess
import tempfile
import time

import redis

# SECKILL_BACKEND=functions: the suite runs against functions/seckill.lua.
from seckill_backend import AOF_REWRITE_MARK, FUNCTIONS, MODULE, SALE_TYPE, fcall_form  # noqa: F401

# Report fields, in the order the module sends them.
REPORT_FIELDS = ['total', 'remaining', 'pending', 'confirmed', 'released',
                 'expired', 'buyers', 'reservations', 'shards', 'invariant']
ORDER_FIELDS = ['orders_ok', 'orders_pending', 'orders_released', 'orders_unknown',
                'orders_conflict', 'orders_pending_ids', 'orders_released_ids',
                'orders_unknown_ids', 'orders_conflict_ids']
GET_FIELDS = ['user', 'qty', 'state', 'created_ms', 'deadline_ms']

# A generated reservation id as both backends write it today:
# "<8 hex tag>-<seq>-<16 hex mac>" (docs/commands.md: clients treat it as opaque).
GENERATED_ID = re.compile(r'^[0-9a-f]{8}-[0-9]+-[0-9a-f]{16}$')

# Past 64 bits: u64::MAX + 1.
PAST_64 = '18446744073709551616'


def pairs(reply):
    """A RESP2 flat field/value array (or a RESP3 dict) as an ordered list of pairs."""
    if reply is None:
        return None
    if isinstance(reply, dict):
        return list(reply.items())
    assert len(reply) % 2 == 0, reply
    return [(reply[i], reply[i + 1]) for i in range(0, len(reply), 2)]


def as_dict(reply):
    p = pairs(reply)
    return None if p is None else dict(p)


def info(conn, key):
    """SECKILL.INFO as a dict (None when the key is missing)."""
    return as_dict(conn.execute_command('SECKILL.INFO', key))


def get(conn, key, rid):
    return as_dict(conn.execute_command('SECKILL.GET', key, rid))


def reconcile(conn, key, *args):
    return as_dict(conn.execute_command('SECKILL.RECONCILE', key, *args))


def reserve(conn, key, user, *args):
    """[status, id, remaining]"""
    return conn.execute_command('SECKILL.RESERVE', key, user, *args)


def server_ms(conn):
    sec, usec = conn.execute_command('TIME')
    return int(sec) * 1000 + int(usec) // 1000


def digest(conn):
    return conn.execute_command('DEBUG', 'DIGEST')


def digest_value(conn, key):
    r = conn.execute_command('DEBUG', 'DIGEST-VALUE', key)
    return r[0] if isinstance(r, list) else r


def seckill_stats(conn):
    """INFO seckill as {name without the seckill_ prefix: int}."""
    raw = conn.info('seckill')
    return {name[len('seckill_'):]: int(value) for name, value in raw.items() if name.startswith('seckill_')}


def check_invariant(env, conn, key, depth=0):
    """Asserts the invariant of docs/commands.md on the report and returns the report."""
    r = info(conn, key)
    env.assertIsNotNone(r, depth=depth + 1)
    if r is None:
        return r
    env.assertEqual(list(r.keys()), REPORT_FIELDS, depth=depth + 1)
    env.assertEqual(r['remaining'] + r['pending'] + r['confirmed'], r['total'], depth=depth + 1,
                    message='remaining + pending + confirmed == total: %r' % (r,))
    env.assertEqual(sum(r['shards']), r['remaining'], depth=depth + 1, message='sum(shards) == remaining')
    env.assertGreaterEqual(r['remaining'], 0, depth=depth + 1)
    env.assertGreaterEqual(r['released'], r['expired'], depth=depth + 1)
    env.assertEqual(r['invariant'], 'ok', depth=depth + 1)
    return r


def wait_for(pred, timeout=3.0, interval=0.02):
    """Polls pred() until it returns a true value or timeout passes; returns the last value."""
    deadline = time.monotonic() + timeout
    while True:
        v = pred()
        if v or time.monotonic() > deadline:
            return v
        time.sleep(interval)


def wait_aof_rewrite(conn, timeout=30.0):
    def idle():
        p = conn.info('persistence')
        return int(p['aof_rewrite_in_progress']) == 0 and int(p['aof_rewrite_scheduled']) == 0
    return wait_for(idle, timeout, 0.05)


def aof_files(conn, kind):
    """The paths of the multi-part AOF's files of one kind ('b' base, 'h'
    history, 'i' incremental), in the manifest's order. A manifest line is
    `file NAME key value ...`, read by key: Redis 8 adds `startoffset` and
    `endoffset` after `type` on incremental files (7.0 and Valkey end the
    line with the type)."""
    def config(name):
        v = conn.execute_command('CONFIG', 'GET', name)
        v = v[name] if isinstance(v, dict) else v[1]
        return v.decode() if isinstance(v, bytes) else v
    folder = os.path.join(config('dir'), config('appenddirname'))
    paths = []
    with open(os.path.join(folder, config('appendfilename') + '.manifest')) as f:
        for line in f:
            words = line.split()
            fields = dict(zip(words[0::2], words[1::2]))
            if fields.get('type') == kind:
                paths.append(os.path.join(folder, fields['file']))
    return paths


def restart_from_aof(env, rewrite):
    """Restarts the server from its AOF: rewritten first (BGREWRITEAOF, so
    the sales come back as the rewrite's effects), or as written (the
    replicated effects themselves)."""
    if rewrite:
        env.restartAndReload()
    else:
        env.stop()
        env.start()


def conn_address(conn):
    kw = conn.connection_pool.connection_kwargs
    return kw.get('host', 'localhost'), kw.get('port'), kw.get('path')


def events_from(pubsub, timeout=1.0, until=None):
    """Collects keyspace event names from a pubsub until `timeout` passes with
    no message, or `until` (an event name) has been seen."""
    seen = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        m = pubsub.get_message(ignore_subscribe_messages=True, timeout=0.05)
        if m is None:
            continue
        if m['type'] in ('message', 'pmessage'):
            seen.append(m['data'])
            if until is not None and m['data'] == until:
                break
    return seen


class RawConn:
    """A plain socket to the server, for checking replies byte for byte
    (redis-py strips the "ERR " prefix of errors and reshapes replies)."""

    def __init__(self, conn, resp3=False):
        host, port, path = conn_address(conn)
        if path:
            self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            self.sock.connect(path)
        else:
            self.sock = socket.create_connection((host or 'localhost', port))
        self.sock.settimeout(10)
        self.rf = self.sock.makefile('rb')
        if resp3:
            hello = self.call('HELLO', '3')
            assert hello.startswith(b'%'), hello

    def send(self, *args):
        args = fcall_form(args)
        parts = [b'*%d\r\n' % len(args)]
        for a in args:
            a = a if isinstance(a, bytes) else str(a).encode()
            parts.append(b'$%d\r\n%s\r\n' % (len(a), a))
        self.sock.sendall(b''.join(parts))

    def read(self):
        line = self.rf.readline()
        if not line:
            raise ConnectionError('connection closed')
        t, rest = line[:1], line[1:-2]
        if t in (b'+', b'-', b':', b'_', b',', b'#', b'('):
            return line
        if t in (b'$', b'=', b'!'):
            n = int(rest)
            return line + (self.rf.read(n + 2) if n >= 0 else b'')
        if t in (b'*', b'~', b'>'):
            n = int(rest)
            return line + b''.join(self.read() for _ in range(max(n, 0)))
        if t in (b'%', b'|'):
            n = int(rest)
            return line + b''.join(self.read() for _ in range(2 * n))
        raise AssertionError('unexpected reply %r' % line)

    def call(self, *args):
        self.send(*args)
        return self.read()

    def close(self):
        try:
            self.rf.close()
        finally:
            self.sock.close()


def caught_up_replica(env, conn, depth=0, timeout=10.0):
    """The replica's connection once it has applied everything the master
    wrote so far: WAIT 1 acknowledged, and the replica itself reports its
    link up, no load in progress and its offset at the master's. The
    replica's own view is checked too because a WAIT once answered 1 while
    the replica (Valkey 9.1, CI) still read as an empty dataset."""
    offset = conn.info('replication')['master_repl_offset']
    env.assertEqual(conn.execute_command('WAIT', 1, int(timeout * 1000)), 1, depth=depth + 1)
    replica = env.getSlaveConnection()

    def applied():
        rep = replica.info('replication')
        return (rep.get('master_link_status') == 'up'
                and replica.info('persistence').get('loading') == 0
                and rep.get('slave_repl_offset', -1) >= offset)
    env.assertTrue(wait_for(applied, timeout=timeout), depth=depth + 1,
                   message='replica behind: %r' % replica.info('replication'))
    return replica


def replica_caught_up(env, conn, depth=0, timeout=10.0):
    """Wait until the replica has applied everything the master `conn` wrote
    so far (caught_up_replica's checks), before a test reads the replica."""
    caught_up_replica(env, conn, depth=depth + 1, timeout=timeout).close()


def assert_replica_agrees(env, conn, depth=0):
    """Under --use-slaves: the replica ends in exactly the master's state
    (DEBUG DIGEST of the whole dataset). Call it once the state is settled
    (no hold left to run out). Does nothing without a replica."""
    if not getattr(env, 'useSlaves', False) or env.isCluster():
        return
    replica = caught_up_replica(env, conn, depth=depth + 1)
    try:
        env.assertEqual(digest(replica), digest(conn), depth=depth + 1, message='replica digest differs')
    finally:
        replica.close()


def server_version(conn):
    """The server under test as (name, (major, minor, patch)): ('redis', (7, 0, 15)),
    ('valkey', (8, 1, 8)). Valkey's INFO has server_name and valkey_version
    (its redis_version is a fixed compatibility number); Redis 7.0's has neither."""
    s = conn.info('server')
    name = s.get('server_name', 'redis')
    version = str(s.get(name + '_version', s['redis_version']))
    return name, tuple(int(p) for p in version.split('.')[:3])


def is_valkey_8_1(conn):
    """Valkey 8.1.x, whose MOVE leaves the calling client on the target database
    when a module listens to generic keyspace events (a server bug,
    valkey-io/valkey#4024: the module notification runs on the executing client,
    selects the event's database and never selects back; Valkey 9.1.2 and
    Redis are not affected)."""
    name, version = server_version(conn)
    return name == 'valkey' and version[:2] == (8, 1)


def new_replication_id(conn):
    """Gives the server a new replication id and keeps its data, as a
    promotion does: a replica of port 1, where nothing listens (so nothing
    is synced or flushed), then a master again."""
    conn.execute_command('REPLICAOF', '127.0.0.1', 1)
    conn.execute_command('REPLICAOF', 'NO', 'ONE')


def free_port(cluster_bus=False):
    """A free port below 55535, never 6379; with cluster_bus, its cluster
    bus port (port + 10000) is free too."""
    while True:
        port = random.randrange(20000, 55000)
        if all(_bindable(p) for p in ((port, port + 10000) if cluster_bus else (port,))):
            return port


def _bindable(port):
    with socket.socket() as s:
        try:
            s.bind(('127.0.0.1', port))
            return True
        except OSError:
            return False


class OwnServer:
    """A redis-server of our own beside RLTest's, for what its environments
    cannot do (a SHUTDOWN watched to its exit code, a master's first
    replica): a free port, its own folder and log, stopped by pid.
    `binary` is the server under test (RLTest's Defaults.binary); `module`,
    when given, is loaded."""

    def __init__(self, binary, *args, module=None, prefix='seckill-own-', cluster_bus=False):
        self.dir = tempfile.mkdtemp(prefix=prefix)
        self.port = free_port(cluster_bus)
        self.log = os.path.join(self.dir, 'redis.log')
        cmd = [binary, '--port', str(self.port), '--dir', self.dir, '--logfile', self.log,
               '--enable-debug-command', 'yes', '--save', '']
        if module:
            cmd += ['--loadmodule', module]
        self.proc = subprocess.Popen(cmd + list(args), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.conn = redis.Redis(port=self.port, decode_responses=True)

    def ping(self):
        try:
            return self.conn.ping()
        except redis.ConnectionError:
            return False

    def read_log(self):
        try:
            with open(self.log) as f:
                return f.read()
        except OSError:
            return ''

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(10)
