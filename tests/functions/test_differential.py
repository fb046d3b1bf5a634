"""The library against the module, call for call: one server with the module
loaded and the library loaded; random command sequences (INIT with random
options and REPLACE, RESERVE with QTY and REQIDs, retried and generated-
looking ones, RELEASE, CONFIRM, GET, RECONCILE with and without EXPIRE and
APPLY, SEND and RECV of a split sale with stale rounds, INFO and its FORMAT JSON,
bad arguments; and when the module knows SECKILL.UNFENCE, FENCE sales,
"failovers" that give the server a new replication id, and UNFENCE)
go to a module sale and to a library sale, and every reply must be the same:
statuses, ids (generated ids up to their round tag), remaining stock,
reports, and error texts. Times are left out (the two sales are made
microseconds apart): GET is compared without created_ms, and deadline_ms as
its distance from created_ms.

Runs with the module (mk/functions.mk: functions-differential, on Redis
7.0.15); skipped without it.

A failover here is seckill_helpers.new_replication_id (REPLICAOF to a closed
port, then REPLICAOF NO ONE): the server gets a new replication id, as a
promoted replica does, and keeps its data (nothing answers on that port),
so both sales are fenced at once."""

import os
import random
import re
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'integration'))

import redis  # noqa: E402
from RLTest import Env  # noqa: E402

from seckill_backend import LIBRARY  # noqa: E402
from seckill_helpers import FUNCTIONS, new_replication_id  # noqa: E402

MOD, LIB = b'm:{k}', b'l:{k}'
# `<tag>-<seq>-<mac>` (the two backends' macs differ: ids are opaque), and
# `-<k>` after it when a client had taken that id.
GENERATED = re.compile(rb'^([0-9a-f]{8})-(\d+)-[0-9a-f]{16}(-\d+)?$')


class Pair:
    """The module sale and the library sale, driven together."""

    def __init__(self, env, conn):
        self.env, self.c = env, conn
        self.tags = {}
        self.ids = {'m': [], 'l': []}
        self.mismatches = []
        self.fenced = 0   # calls the module refused as fenced
        self.extra = []   # keys the library's calls declare after its stream

    def call(self, side, cmd, *args):
        try:
            if side == 'm':
                return self.c.execute_command('SECKILL.' + cmd, MOD, *args)
            verb = 'FCALL_RO' if cmd in ('INFO', 'GET') else 'FCALL'
            # The library's sale declares its stream (seckill_keys), which
            # some rounds have: always passed, as more keys are accepted.
            keys = [LIB, LIB + b':ev'] + self.extra
            return self.c.execute_command(verb, 'seckill_' + cmd.lower(), len(keys), *keys, *args)
        except redis.ResponseError as e:
            return ('error', str(e))

    def learn(self, side, reply):
        if isinstance(reply, list) and len(reply) == 3 and reply[0] == b'RESERVED' and reply[1] \
                and GENERATED.match(reply[1]):
            self.tags.setdefault(side, reply[1][:8])

    def incarnation(self, side):
        """This side's sale's incarnation (INFO incarnation), or None."""
        r = self.call(side, 'INFO')
        if isinstance(r, list) and b'incarnation' in r:
            return r[r.index(b'incarnation') + 1]
        return None

    def norm(self, x, side):
        # A key's incarnation is its tag: random per side.
        if isinstance(x, list) and b'incarnation' in x:
            x = list(x)
            x[x.index(b'incarnation') + 1] = b'<incarnation>'
        if isinstance(x, bytes) and x.startswith(b'{'):
            x = re.sub(rb'"incarnation":"[0-9a-f]{8}"', b'"incarnation":"<incarnation>"', x)
        if isinstance(x, bytes):
            tag = self.tags.get(side)
            if not tag or not x.startswith(tag + b'-'):
                return x
            g = GENERATED.match(x)
            return b'<tag>-%s-<mac>%s' % (g.group(2), g.group(3) or b'') if g else b'<tag>' + x[8:]
        if isinstance(x, (list, tuple)):
            return type(x)(self.norm(y, side) for y in x)
        return x

    def compare(self, what, a, b):
        if isinstance(a, list) and len(a) == 10 and a[0] == b'user':      # GET: leave the times out
            a = a[:6] + [a[9] - a[7] if a[9] else 0]
            b = b[:6] + [b[9] - b[7] if b[9] else 0] if isinstance(b, list) and len(b) == 10 else b
        if isinstance(a, bytes) and isinstance(b, bytes) and a.startswith(b'{"user":'):   # GET FORMAT JSON
            a, b = (re.sub(rb'"created_ms":\d+', b'"created_ms":<t>', x) for x in (a, b))
        na, nb = self.norm(a, 'm'), self.norm(b, 'l')
        if na != nb:
            self.mismatches.append((what, na, nb))

    def both(self, cmd, m_args, l_args=None):
        a = self.call('m', cmd, *m_args)
        b = self.call('l', cmd, *(m_args if l_args is None else l_args))
        if cmd == 'RESERVE' and b'REQID' not in m_args:   # a generated id: the round's tag
            self.learn('m', a)
            self.learn('l', b)
        self.compare((cmd,) + tuple(m_args), a, b)
        if (isinstance(a, list) and a and a[0] == b'FENCED') or (isinstance(a, tuple) and a[1].startswith('FENCED')):
            self.fenced += 1
        return a, b


def _fence_op(p, rng):
    """Sometimes a failover or an UNFENCE (FENCE runs only): whether it made one."""
    y = rng.random()
    if y < 0.01:
        new_replication_id(p.c)
    elif y < 0.04:
        p.both('UNFENCE', [])
    else:
        return False
    return True


def _run(env, c, seed, ops, hold, buyers=12, shards=6, fence=False):
    rng = random.Random(seed)
    p = Pair(env, c)
    users = [b'u%d' % i for i in range(buyers)]
    for op in range(ops):
        if fence and op > 0 and _fence_op(p, rng):
            continue
        x = rng.random()
        if op == 0 or x < 0.03:
            opts = [rng.randint(0, 30)]
            if rng.random() < 0.5:
                opts += ['SHARDS', rng.randint(1, shards)]
            if rng.random() < 0.6:
                opts += ['LIMIT', rng.randint(1, 4)]
            if hold and rng.random() < 0.5:
                opts += ['HOLD', 3600000]
            split = rng.random() < 0.3
            if split:
                opts += ['SPLIT', 'r1', 1, 'peer:{k}']
            if op == 0 or rng.random() < 0.7:
                opts += ['REPLACE']
            if fence and rng.random() < 0.6:
                opts += ['FENCE']
            streams = (['STREAM', MOD + b':ev'], ['STREAM', LIB + b':ev']) if rng.random() < 0.3 else ([], [])
            a, b = p.both('INIT', opts + streams[0], opts + streams[1])
            if a == b'OK':
                p.tags.clear()
                p.ids = {'m': [], 'l': []}
        elif x < 0.45:
            args = [rng.choice(users)]
            if rng.random() < 0.4:
                args += ['QTY', rng.randint(1, 4)]
            reqid = None
            if rng.random() < 0.4:
                reqid = rng.choice([b'q%d' % rng.randint(0, 15), b'gen-%d' % rng.randint(0, 6)])
            side_args = {}
            for side in ('m', 'l'):
                r = reqid
                if r and r.startswith(b'gen-'):
                    k = int(r[4:])
                    if k % 2 and p.ids[side]:   # one of this side's generated ids (the same on both sides)
                        r = p.ids[side][k % len(p.ids[side])]
                    else:   # written like a keyless generated id: a plain REQID
                        r = p.tags.get(side, b'00000000') + r[3:]
                side_args[side] = args + ([b'REQID', r] if r else [])
            a, b = p.both('RESERVE', side_args['m'], side_args['l'])
            if isinstance(a, list) and a[0] == b'RESERVED' and isinstance(b, list) and b[0] == b'RESERVED':
                p.ids['m'].append(a[1])
                p.ids['l'].append(b[1])
        elif x < 0.75 and p.ids['m']:
            i = rng.randrange(len(p.ids['m']))
            cmd = rng.choice(['RELEASE', 'CONFIRM', 'GET'])
            p.both(cmd, [p.ids['m'][i]], [p.ids['l'][i]])
        elif x < 0.85:
            rows = []
            for _ in range(rng.randint(1, 5)):
                if p.ids['m'] and rng.random() < 0.7:
                    rows.append((rng.randrange(len(p.ids['m'])), rng.choice(users), rng.randint(1, 3)))
                else:
                    rows.append((b'new%d' % rng.randint(0, 20), rng.choice(users), rng.randint(1, 3)))
            head = ['EXPIRE'] if rng.random() < 0.3 else []
            tail = ['APPLY'] if rng.random() < 0.5 else []

            def build(side):
                out = head + ['ORDERS', len(rows)]
                for rid, user, qty in rows:
                    out += [p.ids[side][rid] if isinstance(rid, int) else rid, user, qty]
                return out + tail
            p.both('RECONCILE', build('m'), build('l'))
        elif x < 0.92:
            # TO: the peer's incarnation (two values, so a change is refused), a bad one, or none.
            to = rng.choice([[], [], ['TO', '0000abcd'], ['TO', '0000abce'], ['TO', 'ABCD0000']])
            p.both('SEND', ['peer:{k}', rng.randint(1, 8), 'MIN', rng.randint(1, 3), 'TID', 't%d' % rng.randint(0, 8),
                            'ROUND', rng.choice(['r1', 'r1', 'r0'])] + to)
        elif x < 0.97:
            args = ['peer:{k}', rng.randint(0, 20), 'ROUND', rng.choice(['r1', 'r1', 'r0'])]
            y = rng.random()
            if y < 0.4:     # TO this side's own incarnation: credited as without TO
                own = {side: p.incarnation(side) for side in ('m', 'l')}
                if own['m'] and own['l']:
                    p.both('RECV', args + ['TO', own['m']], args + ['TO', own['l']])
                    continue
            elif y < 0.6:   # another incarnation: STALEPEER, nothing credited
                args += ['TO', '00000000']
            elif y < 0.65:
                args = ['peer:{k}', 1, 'TO', '1', 'ROUND', 'r1']
            p.both('RECV', args)
        else:
            p.both('INFO', [])
            p.both('INFO', ['FORMAT', 'JSON'])
            p.both(*rng.choice([
                ('RESERVE', [b'']), ('RESERVE', ['u', 'QTY', 0]), ('RESERVE', ['u', 'QTY', 99]), ('RELEASE', []),
                ('RECONCILE', ['APPLY']), ('INIT', ['-1']), ('GET', ['x' * 257]), ('INIT', [5, 'SHARDS', 2, 'shards', 3]),
                ('SEND', ['peer:{k}', 1, 'TID', 't']), ('RECV', ['peer:{k}', 'x', 'ROUND', 'r1']),
                ('RECONCILE', ['ORDERS', 1001]), ('INIT', [5, 'BOGUS']), ('RESERVE', ['u', 7]),
                ('INFO', ['FORMAT', 'XML']), ('INFO', ['FORMAT']), ('GET', ['x', 'FORMAT', 'csv'])]
                + ([('UNFENCE', ['x']), ('INIT', [5, 'FENCE', 'LIMIT', 2, 'fence'])] if fence else [])))
    p.both('INFO', [])
    p.both('INFO', ['format', 'json'])
    return p.mismatches, p.fenced


# Ids and users FORMAT JSON must write byte for byte as the module
# (serde_json over String::from_utf8_lossy): `/` and DEL as is, the control
# characters, quotes and backslashes escaped, invalid UTF-8 as U+FFFD.
ODD_IDS = [b'a/b', b'</script>', bytes(range(0, 32)) + b'\x7f"\\', b'\xff\xfe', b'ok\xc3\xa9\xe2\x82',
           b'\xe0\x80\xaf', b'\xed\xa0\x80x', b'\xf0\x9f\x98\x80\xf4\x90\x80\x80', b'\xc0\xaf\xf8',
           b'\xe2\x82\xac\xe2\x28\xa1', b'\xf1\x80\x80', b'\xf0\x90\x80', b'\xdf', b'caf\xc3\xa9 \xe6\x97\xa5']


def _edge_cases(c):
    """Fixed cases: STREAM keys (length, another type at RESERVE and
    RECONCILE), FORMAT JSON of odd ids and users."""
    p = Pair(None, c)
    long_key = b'{k}' + b'x' * 254
    p.extra = [long_key[:-1]]
    for skey in (b'', long_key, long_key[:-1]):
        for tail in ([], ['START', 5, 'END', 3]):
            p.both('INIT', [5, 'STREAM', skey] + tail + ['REPLACE'])
    p.extra = []
    c.delete(MOD + b':ev', LIB + b':ev', long_key[:-1])
    # A stream key that holds a string: every RESERVE, RECONCILE EXPIRE
    # and APPLY refused up front, whatever it would answer.
    for opts in ([1, 'LIMIT', 2], [1, 'LIMIT', 2, 'HOLD', 3600000], [3, 'SHARDS', 2, 'LIMIT', 2],
                 [1, 'LIMIT', 2, 'START', 4000000000000], [1, 'LIMIT', 2, 'END', 1]):
        c.delete(MOD + b':ev', LIB + b':ev')
        p.both('INIT', opts + ['STREAM', MOD + b':ev', 'REPLACE'], opts + ['STREAM', LIB + b':ev', 'REPLACE'])
        p.both('RESERVE', ['u1', 'REQID', 'a'])
        c.set(MOD + b':ev', 'x')
        c.set(LIB + b':ev', 'x')
        for args in (['u1', 'REQID', 'a'], ['u2', 'REQID', 'a'], ['u1'], ['u2'], ['u2', 'QTY', 2], ['u3', 'QTY', 3]):
            p.both('RESERVE', args)
        for args in (['ORDERS', 1, 'a', 'u1', 1], ['EXPIRE'], ['ORDERS', 1, 'a', 'u1', 1, 'APPLY'],
                     ['EXPIRE', 'ORDERS', 1, 'zz', 'u1', 1]):
            p.both('RECONCILE', args)
        for cmd in ('RELEASE', 'CONFIRM', 'GET'):
            p.both(cmd, ['a'])
    c.delete(MOD + b':ev', LIB + b':ev')
    p.both('INIT', [100, 'LIMIT', 5, 'REPLACE'])
    for i, x in enumerate(ODD_IDS):
        rid = x + b'/%d' % i
        p.both('RESERVE', [x, 'REQID', rid])
        p.both('GET', [rid, 'FORMAT', 'JSON'])
        p.both('RECONCILE', ['ORDERS', 2, rid, x, 1, x, x, 1, 'FORMAT', 'JSON'])
    p.both('INFO', ['FORMAT', 'JSON'])
    # Retakes older than the buyer's newest live reservation (the library
    # keeps them out of the buyer's chain), then the newer ones leave:
    # LIMIT names the newest live reservation all along.
    p.both('INIT', [100, 'LIMIT', 10, 'REPLACE'])
    for rid in ('o1', 'o2', 'o3', 'o4', 'o5'):
        p.both('RESERVE', ['w', 'REQID', rid])
    p.both('RELEASE', ['o1'])
    p.both('RELEASE', ['o3'])
    p.both('RECONCILE', ['ORDERS', 2, 'o3', 'w', 1, 'o1', 'w', 1, 'APPLY'])
    for rid in ('o5', 'o4', 'o2', None, 'o3'):
        p.both('RESERVE', ['w', 'QTY', 9])
        if rid:
            p.both('RELEASE', [rid])
        else:
            p.both('RESERVE', ['w'])
    p.both('INFO', [])
    return p.mismatches


def test_library_answers_as_the_module():
    if FUNCTIONS:
        raise unittest.SkipTest('needs the module loaded beside the library (the module backend)')
    env = Env(decodeResponses=False, protocol=2)
    env.skipOnCluster()
    c = env.getConnection()
    if not any(b'seckill' in str(m).encode() for m in c.execute_command('MODULE', 'LIST')):
        raise unittest.SkipTest('the module is not loaded')
    with open(LIBRARY, 'rb') as f:
        c.execute_command('FUNCTION', 'LOAD', 'REPLACE', f.read())
    try:
        fence = c.execute_command('SECKILL.UNFENCE', b'nothing:{k}') == b'NO_SALE'
    except redis.ResponseError:   # a module from before the fence
        fence = False
    mismatches = _edge_cases(c)
    env.assertEqual(mismatches[:3], [], message='fixed cases')
    total = 0
    # Few buyers and several buckets (LIMIT, chains, borrowing), then many
    # buyers and one bucket (RESERVE's three-call path).
    for seed, hold, buyers, shards in ((1, False, 12, 6), (2, True, 12, 6), (3, False, 12, 6), (4, True, 12, 6),
                                       (5, False, 5000, 1), (6, True, 5000, 1)):
        mismatches, _ = _run(env, c, seed, 2500, hold, buyers, shards)
        total += 2500
        env.assertEqual(mismatches[:3], [], message='seed %d' % seed)
    fenced = 0
    if fence:
        for seed, hold, buyers, shards in ((7, False, 12, 6), (8, True, 12, 6), (9, True, 5000, 1)):
            mismatches, n = _run(env, c, seed, 2500, hold, buyers, shards, fence=True)
            total, fenced = total + 2500, fenced + n
            env.assertEqual(mismatches[:3], [], message='FENCE seed %d' % seed)
        env.assertGreater(fenced, 0, message='no call met a fenced sale')
    env.debugPrint('%d random calls, each sent to both backends%s' % (
        total, ', FENCE sales too: %d answered FENCED' % fenced if fence else ''), force=True)
