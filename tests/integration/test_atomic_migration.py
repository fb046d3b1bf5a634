"""Valkey 9's atomic slot migration (CLUSTER MIGRATESLOTS) with sales on the
move: the slot's sale, its REQIDs, holds and STREAM key reach the target
whole while buyers keep reserving; the target leaves the imported sale to
the source until it owns it, then expires its holds; the source forgets it.
Skipped on every other server (Redis and Valkey 8 have no MIGRATESLOTS)."""

import collections
import threading
import time

import redis
from RLTest import Env

from seckill_helpers import as_dict, check_invariant, digest_value, info, seckill_stats, wait_for

HOLD_MS = 1500


def _env():
    env = Env(env='oss-cluster', shardsCount=2, decodeResponses=True)
    server = env.getConnection(1).info('server')
    version = str(server.get('valkey_version', '0'))
    if server.get('server_name') != 'valkey' or int(version.split('.')[0]) < 9:
        env.skip()
    return env


def _masters(env):
    return [env.getConnection(1), env.getConnection(2)]


def _owner_and_other(env, key):
    """(the master that serves key's slot, the other one): the other answers MOVED."""
    conns = _masters(env)
    for i, c in enumerate(conns):
        try:
            c.execute_command('SECKILL.INFO', key)
        except redis.exceptions.MovedError:
            continue
        return c, conns[1 - i]
    raise AssertionError('no master serves %s' % key)


def _job(conn, slot):
    """This node's newest migration job of `slot` (jobs are listed newest first)."""
    for job in conn.execute_command('CLUSTER', 'GETSLOTMIGRATIONS'):
        job = as_dict(job)
        if job['slot_ranges'] == '%d-%d' % (slot, slot):
            return job
    return None


def _state(conn, slot):
    job = _job(conn, slot)
    return job and job['state']


def _migrate(env, src, dst, slot, hold_before_pause):
    """Starts moving `slot` from src to dst. With hold_before_pause the source
    streams the slot's writes to the target and does not pause for the
    cutover until `_cut_over` (DEBUG SLOTMIGRATION PREVENT-PAUSE)."""
    src.execute_command('DEBUG', 'SLOTMIGRATION', 'PREVENT-PAUSE', 1 if hold_before_pause else 0)
    dst_id = dst.execute_command('CLUSTER', 'MYID')
    env.assertEqual(src.execute_command('CLUSTER', 'MIGRATESLOTS', 'SLOTSRANGE', slot, slot, 'NODE', dst_id), 'OK')
    if hold_before_pause:
        streaming = wait_for(lambda: _state(src, slot) in ('replicating', 'waiting-to-pause'), timeout=15)
        env.assertTrue(streaming, message='migration of slot %d never streamed: %r' % (slot, _job(src, slot)))


def _cut_over(env, src, dst, slot):
    src.execute_command('DEBUG', 'SLOTMIGRATION', 'PREVENT-PAUSE', 0)
    done = wait_for(lambda: _state(src, slot) == 'success' and _state(dst, slot) == 'success', timeout=20)
    env.assertTrue(done, message='migration of slot %d: source %r, target %r' % (slot, _job(src, slot), _job(dst, slot)))


def _moved(conn, *cmd):
    try:
        conn.execute_command(*cmd)
    except redis.exceptions.MovedError:
        return True
    return False


def _entries(conn, stream):
    """The stream's entries as (event, rid), oldest first."""
    out = []
    for _, fields in conn.xrange(stream, '-', '+'):
        f = fields if isinstance(fields, dict) else dict(zip(fields[::2], fields[1::2]))
        out.append((f['event'], f['rid']))
    return out


def _deltas(before, after, *names):
    return {n: after[n] - before[n] for n in names}


class Buyers(threading.Thread):
    """Reserves through a cluster client (which follows MOVED and ASK) as fast
    as a gentle loop allows, confirming or releasing some of its own
    reservations, and counts every reply."""

    def __init__(self, env, key, prefix):
        super().__init__(daemon=True)
        self.rc = env.getClusterConnectionIfNeeded()
        self.key, self.prefix = key, prefix
        self.halt = threading.Event()
        self.reserved = []          # rids answered RESERVED, in order
        self.reserved_at = []       # time.monotonic() of each
        self.statuses = collections.Counter()
        self.settled = set()
        self.errors = []

    def _settle(self, cmd, rid):
        status, _ = self.rc.execute_command(cmd, self.key, rid)
        self.statuses[cmd.split('.')[1] + ':' + status] += 1
        self.settled.add(rid)

    def run(self):
        i = 0
        while not self.halt.is_set():
            rid = '%s-%d' % (self.prefix, i)
            try:
                status, got, _ = self.rc.execute_command('SECKILL.RESERVE', self.key, 'u-' + rid, 'REQID', rid)
                self.statuses['RESERVE:' + status] += 1
                if status == 'RESERVED':
                    self.reserved.append(got)
                    self.reserved_at.append(time.monotonic())
                if i % 10 == 9 and self.reserved[-3] not in self.settled:
                    self._settle('SECKILL.CONFIRM', self.reserved[-3])
                if i % 7 == 6 and self.reserved[-2] not in self.settled:
                    self._settle('SECKILL.RELEASE', self.reserved[-2])
            except Exception as e:  # every failure is reported by the test
                self.errors.append(repr(e))
            i += 1
            time.sleep(0.001)


def test_sale_moves_whole_while_buyers_keep_reserving():
    env = _env()
    key, stream = 'flash:{asm1}', 'flash:{asm1}:events'
    src, dst = _owner_and_other(env, key)
    slot = src.execute_command('CLUSTER', 'KEYSLOT', key)
    src_before, dst_before = seckill_stats(src), seckill_stats(dst)
    env.assertEqual(src.execute_command('SECKILL.INIT', key, 100000, 'SHARDS', 4, 'LIMIT', 2, 'HOLD', HOLD_MS,
                                        'STREAM', stream, 'TTL', 3600), 'OK')

    # Before the move: reservations whose holds will run out during it.
    rc = env.getClusterConnectionIfNeeded()
    for i in range(300):
        status, rid, _ = rc.execute_command('SECKILL.RESERVE', key, 'first-%d' % i, 'REQID', 'first-%d' % i)
        env.assertEqual((status, rid), ('RESERVED', 'first-%d' % i))
    for i in range(0, 30):
        env.assertEqual(rc.execute_command('SECKILL.CONFIRM', key, 'first-%d' % i)[0], 'CONFIRMED')
    for i in range(30, 60):
        env.assertEqual(rc.execute_command('SECKILL.RELEASE', key, 'first-%d' % i)[0], 'RELEASED')

    buyers = Buyers(env, key, 'during')
    buyers.start()
    started = time.monotonic()
    _migrate(env, src, dst, slot, hold_before_pause=True)

    # While the slot streams to the target the source still decides: the
    # first holds run out there; the target applies the source's effects and
    # decides nothing itself (an expiry of its own would be a second one).
    expired_on_source = wait_for(lambda: seckill_stats(src)['holds_expired'] - src_before['holds_expired'] >= 240,
                                 timeout=HOLD_MS / 1000 + 10)
    env.assertTrue(expired_on_source, message='the first holds did not run out on the source')
    dst_mid = seckill_stats(dst)
    env.assertEqual(_deltas(dst_before, dst_mid, 'holds_expired', 'effects_refused', 'effects_denied'),
                    {'holds_expired': 0, 'effects_refused': 0, 'effects_denied': 0})
    env.assertGreater(dst_mid['effects_applied'] - dst_before['effects_applied'], 0)
    env.assertTrue(_moved(dst, 'SECKILL.INFO', key), message='the target served a slot it does not own yet')
    env.assertEqual(_state(src, slot), 'waiting-to-pause')

    # The cutover, with the buyers still reserving (their client follows MOVED).
    _cut_over(env, src, dst, slot)
    cut = time.monotonic()
    wait_for(lambda: buyers.reserved_at and buyers.reserved_at[-1] > cut + 1.0, timeout=10)
    buyers.halt.set()
    buyers.join(30)
    env.assertEqual(buyers.errors, [])
    during = sum(1 for t in buyers.reserved_at if started <= t <= cut)
    after = sum(1 for t in buyers.reserved_at if t > cut)
    env.assertGreater(during, 100)
    env.assertGreater(after, 50)
    env.debugPrint('moved slot %d: 300 reservations before, %d while moving, %d after; %s'
                   % (slot, during, after, dict(buyers.statuses)), force=True)

    # The source holds nothing of the slot and forgot the sale.
    env.assertEqual(src.execute_command('CLUSTER', 'COUNTKEYSINSLOT', slot), 0)
    env.assertTrue(_moved(src, 'SECKILL.INFO', key))
    env.assertEqual(seckill_stats(src)['sales_scheduled_for_expiry'], src_before['sales_scheduled_for_expiry'])
    env.assertGreater(dst.pttl(key), 3000 * 1000)  # the TTL came along

    # Every hold runs out, on the target now.
    wait_for(lambda: info(dst, key)['pending'] == 0, timeout=HOLD_MS / 1000 + 10)
    r = check_invariant(env, dst, key)
    reserved = 300 + len(buyers.reserved)
    confirmed = 30 + buyers.statuses['CONFIRM:CONFIRMED']
    released = 30 + buyers.statuses['RELEASE:RELEASED']
    env.assertEqual((r['reservations'], r['confirmed'], r['pending']), (reserved, confirmed, 0))
    env.assertEqual(r['released'], released + r['expired'])
    env.assertEqual(r['remaining'] + r['confirmed'], r['total'])
    src_after, dst_after = seckill_stats(src), seckill_stats(dst)
    on_source = src_after['holds_expired'] - src_before['holds_expired']
    on_target = dst_after['holds_expired'] - dst_before['holds_expired']
    env.assertGreater(on_target, 0)
    # Each hold ran out once, on one node or the other.
    env.assertEqual(on_source + on_target, r['expired'])
    env.assertEqual(dst_after['effects_refused'] - dst_before['effects_refused'], 0)

    # The stream came along whole: one entry per event, none twice.
    entries = _entries(dst, stream)
    env.assertEqual(len(entries), reserved + confirmed + r['released'])
    events = collections.Counter(e for e, _ in entries)
    env.assertEqual(dict(events), {'reserved': reserved, 'confirmed': confirmed,
                                   'released': released, 'expired': r['expired']})
    by_rid = collections.defaultdict(list)
    for event, rid in entries:
        by_rid[rid].append(event)
    env.assertEqual(sorted(by_rid), sorted(['first-%d' % i for i in range(300)] + buyers.reserved))
    env.assertEqual([rid for rid, ev in by_rid.items() if ev[0] != 'reserved' or len(ev) != 2], [])
    env.debugPrint('target: %d holds expired on the source while moving, %d on the target after; stream %d entries'
                   % (on_source, on_target, len(entries)), force=True)


def test_target_state_at_cutover_is_the_source_state_and_back():
    env = _env()
    key, stream = 'flash:{asm2}', 'flash:{asm2}:events'
    src, dst = _owner_and_other(env, key)
    slot = src.execute_command('CLUSTER', 'KEYSLOT', key)
    src_before, dst_before = seckill_stats(src), seckill_stats(dst)
    hold = 3000
    src.execute_command('SECKILL.INIT', key, 1000, 'LIMIT', 3, 'HOLD', hold, 'STREAM', stream, 'MAXLEN', 100000)
    first_hold = time.monotonic()
    for i in range(200):
        src.execute_command('SECKILL.RESERVE', key, 'user-%d' % (i % 80), 'QTY', 1, 'REQID', 'order-%d' % i)
    for i in range(0, 200, 10):
        src.execute_command('SECKILL.CONFIRM', key, 'order-%d' % i)
    for i in range(5, 200, 10):
        src.execute_command('SECKILL.RELEASE', key, 'order-%d' % i)

    # Held before its pause, the source has stopped changing (no buyers, no
    # hold due for seconds): what it has now is what it has at the cutover.
    _migrate(env, src, dst, slot, hold_before_pause=True)
    at_cutover = (digest_value(src, key), digest_value(src, stream), src.xlen(stream), info(src, key))
    _cut_over(env, src, dst, slot)
    env.assertLess(time.monotonic() - first_hold, hold / 1000, message='cutover came after the holds ran out')
    env.assertEqual((digest_value(dst, key), digest_value(dst, stream), dst.xlen(stream), info(dst, key)), at_cutover)
    env.assertEqual(src.execute_command('CLUSTER', 'COUNTKEYSINSLOT', slot), 0)

    # The holds run out on the target, not on the source.
    pending = at_cutover[3]['pending']
    env.assertEqual(pending, 160)
    wait_for(lambda: info(dst, key)['pending'] == 0, timeout=hold / 1000 + 10)
    check_invariant(env, dst, key)
    env.assertEqual(seckill_stats(dst)['holds_expired'] - dst_before['holds_expired'], pending)
    env.assertEqual(seckill_stats(src)['holds_expired'] - src_before['holds_expired'], 0)
    env.assertEqual(dst.xlen(stream), at_cutover[2] + pending)

    # And back again: new holds follow the sale home and run out there.
    for i in range(200, 250):
        env.assertEqual(dst.execute_command('SECKILL.RESERVE', key, 'late-%d' % i, 'REQID', 'order-%d' % i)[0],
                        'RESERVED')
    _migrate(env, dst, src, slot, hold_before_pause=False)
    env.assertTrue(wait_for(lambda: _state(src, slot) == 'success' and _state(dst, slot) == 'success', timeout=20))
    env.assertEqual(dst.execute_command('CLUSTER', 'COUNTKEYSINSLOT', slot), 0)
    wait_for(lambda: info(src, key)['pending'] == 0, timeout=hold / 1000 + 10)
    r = check_invariant(env, src, key)
    env.assertEqual((r['reservations'], r['expired']), (250, pending + 50))
    env.assertEqual(seckill_stats(src)['holds_expired'] - src_before['holds_expired'], 50)
    env.assertEqual(seckill_stats(dst)['holds_expired'] - dst_before['holds_expired'], pending)
    env.assertEqual(src.xlen(stream), at_cutover[2] + pending + 50 + 50)


def test_cancelled_migration_leaves_the_sale_on_the_source():
    env = _env()
    key, stream = 'flash:{asm3}', 'flash:{asm3}:events'
    src, dst = _owner_and_other(env, key)
    slot = src.execute_command('CLUSTER', 'KEYSLOT', key)
    src_before, dst_before = seckill_stats(src), seckill_stats(dst)
    src.execute_command('SECKILL.INIT', key, 500, 'LIMIT', 500, 'HOLD', 800, 'STREAM', stream)
    for i in range(100):
        src.execute_command('SECKILL.RESERVE', key, 'u%d' % i)
    _migrate(env, src, dst, slot, hold_before_pause=True)
    # The target learnt the imported sale (it will visit it once it may).
    env.assertTrue(wait_for(lambda: seckill_stats(dst)['sales_scheduled_for_expiry']
                            > dst_before['sales_scheduled_for_expiry'], timeout=5))
    env.assertEqual(src.execute_command('CLUSTER', 'CANCELSLOTMIGRATIONS'), 'OK')
    env.assertTrue(wait_for(lambda: _state(src, slot) == 'cancelled' and _state(dst, slot) == 'failed', timeout=10))
    src.execute_command('DEBUG', 'SLOTMIGRATION', 'PREVENT-PAUSE', 0)

    # The source keeps the sale and expires its holds; the target deleted
    # its copy, and its visit to the missing key only drops it.
    wait_for(lambda: info(src, key)['pending'] == 0, timeout=10)
    r = check_invariant(env, src, key)
    env.assertEqual((r['reservations'], r['expired']), (100, 100))
    env.assertEqual(src.xlen(stream), 200)
    env.assertTrue(_moved(dst, 'SECKILL.INFO', key))
    env.assertTrue(wait_for(lambda: seckill_stats(dst)['sales_scheduled_for_expiry']
                            == dst_before['sales_scheduled_for_expiry'], timeout=5))
    dst_after = seckill_stats(dst)
    env.assertEqual(_deltas(dst_before, dst_after, 'holds_expired', 'effects_refused'),
                    {'holds_expired': 0, 'effects_refused': 0})
    env.assertEqual(seckill_stats(src)['holds_expired'] - src_before['holds_expired'], 100)
