"""The local sold-out flag against real servers (issue 18): one sale key on
a redis-server and a split sale on the three-master cluster, sync and
async. After the sell-out, calls answer SOLD_OUT without reaching Redis
(INFO commandstats `cmdstat_seckill.reserve` does not move); a restock
(RELEASE from another client) reopens the sale through the keyspace event;
when the restock message is dropped (the subscription removed) the next
RESERVE still succeeds within the lapse bound; with keyspace events off the
flag lives on replies and the lapse; a sold-out message sets the flag only
once a read from Redis confirms it, so forged messages on every channel
never make a SOLD_OUT answer while stock remains, and their verification
reads are rate-limited (both backends: the module's keyspace events and the
library's channel); a killed subscription comes back; nothing is
oversold."""

import asyncio
import collections
import logging
import random
import threading
import time

import pytest
import redis.asyncio as aioredis
from redis.asyncio.cluster import RedisCluster as AsyncRedisCluster

from seckill import Sale, SoldOutCache, SplitSale
from seckill import aio
from seckill import split_protocol as sp
from seckill.drivers.soldout import shared_cache, watcher
from seckill.soldout import RESTOCK, SOLDOUT, event_channel, keyspace_channel
from seckill.testing import wait_until

from test_split_cluster import needs_send, new_name, users_homed

KEY = 'sale:{so}'
# What a lapse bound allows beyond the lapse itself: the test's own calls and
# thread switches on a loaded 2-core CI machine (0.25 s failed there once).
SCHEDULING = 1.0


def reserve_calls(client) -> int:
    st = client.info('commandstats').get('cmdstat_seckill.reserve', {})
    return int(st.get('calls', 0))


def numsub(client, channel) -> int:
    reply = client.execute_command('PUBSUB', 'NUMSUB', channel)
    return int(reply[1]) if isinstance(reply, list) else int(dict(reply).get(channel, 0))


def wait_subscribed(client, key, n=1):
    wait_until(lambda: numsub(client, keyspace_channel(key)) == n
               and numsub(client, event_channel(key)) == n,
               timeout=10, what='subscriptions of %s == %d' % (key, n))


def until_reserved(call, timeout=5.0, pause=0.001):
    """Calls `call()` (a status) until RESERVED: (seconds taken, when it
    returned by time.monotonic())."""
    t0 = time.monotonic()
    while True:
        if call() == 'RESERVED':
            t1 = time.monotonic()
            return t1 - t0, t1
        assert time.monotonic() - t0 < timeout, 'no RESERVED within %.1f s' % timeout
        time.sleep(pause)


@pytest.fixture
def events_on(r):
    r.config_set('notify-keyspace-events', 'Kd')
    return r


def flagged_sale(r, total, lapse_ms, key=KEY):
    """A sale of `total` and a Sale with its own cache, subscribed."""
    cache = SoldOutCache(lapse_ms=lapse_ms)
    sale = Sale(r, key, local_soldout=cache)
    assert sale.init(total) is True
    wait_subscribed(r, key)
    return cache, sale


# ---------------------------------------------------------------- one key

def test_sold_out_answers_locally_and_a_restock_event_reopens(events_on, redis_server):
    r = events_on
    cache, sale = flagged_sale(r, 5, lapse_ms=10_000)      # only an event can reopen in time
    try:
        won = [sale.reserve('u%d' % i, reqid='o%d' % i) for i in range(5)]
        assert [x.status for x in won] == ['RESERVED'] * 5
        wait_until(lambda: cache.is_set(KEY), what='the flag')
        before = reserve_calls(r)
        answers = [sale.reserve('late%d' % i).status for i in range(500)]
        assert answers == ['SOLD_OUT'] * 500
        assert reserve_calls(r) == before                      # none reached Redis
        assert cache.stats['local'] >= 500
        # Another application server releases a unit: only the event can tell us.
        other = Sale(redis_server.client(), KEY)
        assert other.release('o3').status == 'RELEASED'
        took, _ = until_reserved(lambda: sale.reserve('again%f' % time.monotonic()).status)
        assert took < 2.0 and cache.stats['clear_event'] == 1
        info = sale.info()
        assert info['remaining'] == 0 and info['pending'] == 5 and info['invariant'] == 'ok'
    finally:
        cache.close()


def test_release_through_the_flagged_sale_reopens_at_once(r):
    # Events off: the replies alone (with events on, an event still in
    # flight when the RELEASE was sent makes its reply count as stale, and
    # the restock event clears the flag a moment later instead).
    r.config_set('notify-keyspace-events', '')
    cache, sale = flagged_sale(r, 1, lapse_ms=10_000)
    try:
        res = sale.reserve('u1')
        assert sale.reserve('u2').status == 'SOLD_OUT' and cache.is_set(KEY)
        assert sale.release(res.rid).status == 'RELEASED'
        assert not cache.is_set(KEY)                           # the reply showed stock
        assert sale.reserve('u3').status == 'RESERVED'
    finally:
        cache.close()


def test_dropped_restock_delays_at_most_the_lapse(events_on, redis_server):
    r = events_on
    lapse = 0.4
    cache, sale = flagged_sale(r, 2, lapse_ms=lapse * 1000)
    try:
        assert sale.reserve('u1', reqid='a').ok and sale.reserve('u2', reqid='b').ok
        # Drop the restock message: unsubscribe, as a pub/sub reconnect would lose it.
        watcher(cache, r).unwatch([KEY])
        wait_subscribed(r, KEY, n=0)
        cache.clear(KEY)
        t_set = time.monotonic()
        assert sale.reserve('u3').status == 'SOLD_OUT'         # Redis says so: the flag is set
        assert cache.is_set(KEY)
        other = Sale(redis_server.client(), KEY)
        assert other.release('a').status == 'RELEASED'
        t_restock = time.monotonic()
        before = reserve_calls(r)
        assert sale.reserve('u4').status == 'SOLD_OUT'         # the restock was not heard ...
        assert reserve_calls(r) == before                      # ... and no call went out
        _, t_ok = until_reserved(lambda: sale.reserve('u5%f' % time.monotonic()).status)
        assert t_ok - t_restock <= lapse + SCHEDULING                # at most the bound (+ scheduling)
        assert t_ok - t_set >= lapse                           # it was the lapse that reopened it
        assert cache.stats['probes'] >= 1
        info = sale.info()
        assert info['remaining'] == 0 and info['pending'] == 2
    finally:
        cache.close()


def test_notifications_off_flag_lives_on_replies_and_the_lapse(r, redis_server, caplog):
    r.config_set('notify-keyspace-events', '')
    lapse = 0.3
    caplog.set_level(logging.WARNING, logger='seckill.soldout')
    cache, sale = flagged_sale(r, 1, lapse_ms=lapse * 1000)
    try:
        w = watcher(cache, r)
        wait_until(lambda: w.notifications, what='the listener read notify-keyspace-events')
        assert list(w.notifications.values()) == ['']
        assert any('notify-keyspace-events' in rec.getMessage() for rec in caplog.records)
        assert sale.reserve('u1', reqid='a').ok
        assert cache.is_set(KEY) and cache.stats['set_reply'] == 1    # RESERVED with 0 left
        before = reserve_calls(r)
        t0 = time.monotonic()
        for i in range(300):
            assert sale.reserve('x%d' % i).status == 'SOLD_OUT'
        lapses = (time.monotonic() - t0) / lapse
        assert reserve_calls(r) - before <= 1 + lapses          # one probe per lapse at most
        Sale(redis_server.client(), KEY).release('a')
        took, _ = until_reserved(lambda: sale.reserve('y%f' % time.monotonic()).status)
        assert took <= lapse + SCHEDULING
        assert cache.stats['set_event'] == 0 and cache.stats['clear_event'] == 0
    finally:
        cache.close()


# ------------------------------------------- signals are hints (issue 23)

def seckill_calls_of(client, backend, command):
    """Server-side calls of RESERVE ('reserve') or INFO ('info'): the module's
    commands, or the library's FCALL / FCALL_RO (INFO and GET are read-only
    functions; nothing here calls GET)."""
    name = {('module', 'reserve'): 'seckill.reserve', ('module', 'info'): 'seckill.info',
            ('functions', 'reserve'): 'fcall', ('functions', 'info'): 'fcall_ro'}[backend, command]
    return int(client.info('commandstats').get('cmdstat_' + name, {}).get('calls', 0))


def forged(key, word=SOLDOUT, db=0):
    """A signal `word` for `key` on every channel the watcher subscribes:
    (channel, message) pairs anyone with PUBLISH can send."""
    return [(keyspace_channel(key, db), word), ('__keyevent@%d__:%s' % (db, word), key),
            (event_channel(key), word)]


class Forger(threading.Thread):
    """A front-end process that PUBLISHes forged `word` messages on every
    channel every 50-300 ms and RESERVEs for itself, until stopped (or for
    at most 30 s)."""

    def __init__(self, client, key, word=SOLDOUT):
        super().__init__(daemon=True)
        self.client, self.key, self.word = client, key, word
        self.stopping = threading.Event()
        self.rounds = 0
        self.own = []                    # (when, status) of its own RESERVEs
        self.error = None

    def run(self):
        rng, sale = random.Random(23), Sale(self.client, self.key)
        t_end = time.monotonic() + 30
        try:
            while not self.stopping.is_set() and time.monotonic() < t_end:
                for channel, message in forged(self.key, self.word):
                    self.client.publish(channel, message)
                self.rounds += 1
                self.own.append((time.monotonic(), sale.reserve('forger%d' % self.rounds).status))
                self.stopping.wait(rng.uniform(0.05, 0.3))
        except Exception as exc:  # pragma: no cover - reported by stop()
            self.error = exc

    def stop(self):
        self.stopping.set()
        self.join(10)
        assert self.error is None, self.error


def sell_the_rest(sale, prefix):
    """RESERVE through `sale` until SOLD_OUT: the rids taken."""
    rids = []
    for i in range(100_000):
        res = sale.reserve('%s%d' % (prefix, i))
        if res.status != 'RESERVED':
            assert res.status == 'SOLD_OUT'
            return rids
        rids.append(res.rid)
    raise AssertionError('never sold out')


def check_no_local_answer(cache, answers, forger, t_sold):
    """While stock remained: every answer came from Redis and said RESERVED,
    the forged messages were heard, the flag never held, and the forger's
    own RESERVEs succeeded."""
    assert answers.get('SOLD_OUT', 0) == 0 and answers.get('RESERVED', 0) > 0, answers
    assert cache.stats['local'] == 0
    assert cache.stats['set_verify'] == 0 and cache.stats['set_reply'] == 0
    assert forger.rounds >= 4 and cache.stats['hints'] >= forger.rounds
    own = [st for t, st in forger.own if t < t_sold]
    assert own and set(own) == {'RESERVED'}
    return '%d answers while stock remained (%d SOLD_OUT), forger %d of %d RESERVED' % (
        sum(answers.values()), answers.get('SOLD_OUT', 0), own.count('RESERVED'), len(own))


def check_reads_bounded(cache, reads, seconds, what):
    """The verification reads: as many on the server as the cache asked for,
    at least one, and at most one per key per verify_ms."""
    print('forged sold-out messages, %s: %.1f s, %d hints, %d limited, %d verification reads '
          '(bound %.1f), %d local answers after the real sell-out' % (
              what, seconds, cache.stats['hints'], cache.stats['hints_limited'], reads,
              1 + seconds / cache.verify, cache.stats['local']))
    assert reads == cache.stats['verify']
    assert 1 <= reads <= 1 + seconds / cache.verify


@pytest.mark.both_backends
def test_forged_soldout_messages_never_answer_sold_out(backend, r, redis_server):
    """A process PUBLISHes sold-out messages on every channel the watcher
    listens to, every 50-300 ms, while stock remains: no SOLD_OUT answer,
    the flag never holds, and the verification reads stay within their
    rate limit. Then a real sell-out sets the flag (the flagged process
    answers locally) and a real restock reopens the sale within the bound,
    under the same flood."""
    r.config_set('notify-keyspace-events', 'KEd')       # the library ignores it
    lapse = 0.5
    cache, sale = flagged_sale(r, 200, lapse_ms=lapse * 1000)
    oc = redis_server.client()                # other processes: the forger, and honest buyers
    other = Sale(oc, KEY)
    assert other.info()['remaining'] == 200   # (the library's detection reads too: done first)
    for s in (sale, other):                   # and each pool's seckill_keys (FCALL_RO): done first
        assert s.release('warm-up').status == 'NOT_FOUND'
    reads0 = seckill_calls_of(r, backend, 'info')
    forger = Forger(oc, KEY)
    t0 = time.monotonic()
    forger.start()
    try:
        answers = collections.Counter()
        for i in range(1000):                              # about 3 s
            if time.monotonic() - t0 > 3.0:
                break
            answers[sale.reserve('a%d' % i).status] += 1
            time.sleep(0.02)
        t_sold = time.monotonic()
        phase_a = check_no_local_answer(cache, answers, forger, t_sold)
        rids = sell_the_rest(other, 'o')
        # The flagged process made no call since: only a verified hint sets it.
        wait_until(lambda: cache.is_set(KEY), timeout=5, what='the flag from a verified hint')
        assert cache.stats['set_verify'] >= 1
        before = seckill_calls_of(r, backend, 'reserve')
        t1 = time.monotonic()
        assert [sale.reserve('late%d' % i).status for i in range(300)] == ['SOLD_OUT'] * 300
        probes = seckill_calls_of(r, backend, 'reserve') - before
        assert probes <= 1 + (time.monotonic() - t1) / lapse    # one probe per lapse at most
        assert other.release(rids[0]).status == 'RELEASED'
        took, _ = until_reserved(lambda: sale.reserve('again%f' % time.monotonic()).status)
        assert took <= lapse + SCHEDULING
    finally:
        forger.stop()
        cache.close()                         # its listener makes no read after this
        seconds = time.monotonic() - t0
    check_reads_bounded(cache, seckill_calls_of(r, backend, 'info') - reads0, seconds,
                        '%s, sync: %s' % (backend, phase_a))


@pytest.mark.both_backends
def test_forged_restocks_cost_round_trips_never_a_wrong_answer(backend, r, redis_server):
    """A forged restock clears the flag (clearing early is safe): the flagged
    process's next calls ask Redis, which answers SOLD_OUT and sets it
    again. Two threads call for 2.5 s while restocks are forged on every
    channel: every answer is SOLD_OUT, most still local; prints what each
    forged message costs in RESERVEs."""
    r.config_set('notify-keyspace-events', 'KEd')
    lapse, threads = 0.5, 2
    cache, sale = flagged_sale(r, 1, lapse_ms=lapse * 1000)
    assert sale.reserve('u0').status == 'RESERVED' and cache.is_set(KEY)   # the last unit
    forger = Forger(redis_server.client(), KEY, word=RESTOCK)
    answers, stop = collections.Counter(), threading.Event()

    def buyer(n):
        for i in range(100_000):
            if stop.is_set():
                return
            answers[sale.reserve('b%d-%d' % (n, i)).status] += 1
            time.sleep(0.0002)

    before = seckill_calls_of(r, backend, 'reserve')
    ts = [threading.Thread(target=buyer, args=(n,)) for n in range(threads)]
    t0 = time.monotonic()
    forger.start()
    for t in ts:
        t.start()
    time.sleep(2.5)
    stop.set()
    for t in ts:
        t.join(10)
    forger.stop()
    seconds = time.monotonic() - t0
    cache.close()
    reached = seckill_calls_of(r, backend, 'reserve') - before - forger.rounds   # less its own
    messages = 3 * forger.rounds
    print('forged restocks, %s: %d messages in %.1f s, %d answers, %d local, %d reached Redis '
          '(%.2f per message)' % (backend, messages, seconds, sum(answers.values()), cache.stats['local'],
                                  reached, reached / messages))
    assert set(answers) == {'SOLD_OUT'}
    assert forger.rounds >= 3 and cache.stats['clear_event'] >= forger.rounds // 2
    assert cache.stats['local'] > reached
    assert reached <= threads * (2 * messages + 1 + seconds / lapse)


@pytest.mark.both_backends
def test_a_real_sellout_and_restock_come_through_the_signals(backend, r, redis_server):
    """The module's keyspace events and the library's `seckill:events:` words:
    another process sells the sale out, and the flagged process (which made
    no call) answers locally after the hint's verification read; another
    process's RELEASE reopens it through the restock signal (the lapse is
    10 s: only the signal can do it in time)."""
    r.config_set('notify-keyspace-events', 'Kd')
    cache, sale = flagged_sale(r, 3, lapse_ms=10_000)
    try:
        other = Sale(redis_server.client(), KEY)
        rids = sell_the_rest(other, 'o')
        wait_until(lambda: cache.is_set(KEY), what='the flag from the verified signal')
        assert cache.stats['set_verify'] == 1 and cache.stats['verify'] == 1
        before = seckill_calls_of(r, backend, 'reserve')
        assert sale.reserve('u1').status == 'SOLD_OUT'
        assert seckill_calls_of(r, backend, 'reserve') == before
        assert other.release(rids[1]).status == 'RELEASED'
        wait_until(lambda: not cache.is_set(KEY), what='cleared by the restock signal')
        assert cache.stats['clear_event'] == 1
        assert sale.reserve('u1').status == 'RESERVED'
    finally:
        cache.close()


def test_a_killed_subscription_comes_back_and_forgets_the_flag(events_on):
    r = events_on
    cache, sale = flagged_sale(r, 1, lapse_ms=10_000)
    try:
        rid = sale.reserve('u1').rid
        wait_until(lambda: cache.is_set(KEY), what='the flag')
        lost = cache.stats['lost']
        r.execute_command('CLIENT', 'KILL', 'TYPE', 'pubsub')
        wait_until(lambda: cache.stats['lost'] > lost, what='the listener noticed')
        assert not cache.is_set(KEY)          # a restock may have been missed while it was down
        wait_subscribed(r, KEY)
        assert sale.reserve('u2').status == 'SOLD_OUT'
        assert cache.is_set(KEY)
        Sale(r, KEY).release(rid)             # heard again through the new subscription
        wait_until(lambda: not cache.is_set(KEY), what='restock after resubscribe')
    finally:
        cache.close()


def test_a_retry_of_a_lost_reply_still_gets_its_unit(events_on):
    cache, sale = flagged_sale(events_on, 1, lapse_ms=10_000)
    try:
        assert sale.reserve('u1', reqid='order-1').status == 'RESERVED'
        cache.failed(KEY, 'order-1')          # as if that reply had been lost: the flag drops
        assert sale.reserve('u2').status == 'SOLD_OUT'     # Redis's answer sets it again
        assert cache.is_set(KEY)
        before = reserve_calls(events_on)
        assert sale.reserve('u9', reqid='order-9').status == 'SOLD_OUT'
        res = sale.reserve('u1', reqid='order-1')
        assert (res.status, res.rid) == ('DUPLICATE', 'order-1')
        assert reserve_calls(events_on) == before + 1
    finally:
        cache.close()


def test_local_soldout_true_shares_one_cache_per_connection_pool(events_on, redis_server):
    a = Sale(events_on, KEY, local_soldout=True)
    b = Sale(events_on, 'sale:{other}', local_soldout=True)
    c = Sale(redis_server.client(), KEY, local_soldout=True)
    try:
        assert a.soldout is b.soldout is shared_cache(events_on)
        assert c.soldout is not a.soldout
        assert Sale(events_on, KEY).soldout is None
        with pytest.raises(TypeError):
            Sale(events_on, KEY, local_soldout='yes')
    finally:
        a.soldout.close()
        c.soldout.close()


def test_no_oversell_with_threads_and_random_releases(events_on, redis_server):
    """8 threads keep reserving after the sell-out while another client
    releases won units at random times: every unit is held by exactly one
    RESERVED answer, and the last restock is sold too."""
    r = events_on
    total = 20
    cache, sale = flagged_sale(r, total, lapse_ms=500)
    lock = threading.Lock()
    live, statuses = {}, {'RESERVED': 0, 'SOLD_OUT': 0}
    stop = threading.Event()
    errors = []

    def buyer(n):
        i = 0
        try:
            while not stop.is_set():
                i += 1
                res = sale.reserve('b%d-%d' % (n, i), reqid='b%d-%d' % (n, i))
                with lock:
                    statuses[res.status] = statuses.get(res.status, 0) + 1
                    if res.status == 'RESERVED':
                        live[res.rid] = True
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(exc)

    ts = [threading.Thread(target=buyer, args=(n,)) for n in range(8)]
    for t in ts:
        t.start()
    rng = random.Random(7)
    releaser = Sale(redis_server.client(), KEY)
    released = 0
    try:
        wait_until(lambda: len(live) == total, what='sell-out')
        for _ in range(8):
            time.sleep(rng.uniform(0.05, 0.3))
            with lock:
                rids = rng.sample(sorted(live), rng.randint(1, 3))
                for rid in rids:
                    del live[rid]
            for rid in rids:
                assert releaser.release(rid).status == 'RELEASED'
                released += 1
        wait_until(lambda: sale.info()['remaining'] == 0, timeout=5, what='the restocks sold')
    finally:
        stop.set()
        for t in ts:
            t.join(10)
        cache.close()
    assert not errors, errors[:3]
    info = sale.info()
    assert info['remaining'] == 0 and info['pending'] == total and info['invariant'] == 'ok'
    assert statuses['RESERVED'] == total + released and len(live) == total
    assert cache.stats['local'] > 0


# ---------------------------------------------------------------- split sale

@pytest.fixture
def cluster_events(cluster):
    for n in cluster.masters:
        n.client().config_set('notify-keyspace-events', 'Kd')
    return cluster


def node_client(rc, key):
    return rc.get_redis_connection(rc.get_node_from_key(key))


def seckill_calls(cluster) -> int:
    """RESERVE and INFO calls on every master (a snapshot reads every node)."""
    n = 0
    for m in cluster.masters:
        st = m.client().info('commandstats')
        for c in ('seckill.reserve', 'seckill.info'):
            n += int(st.get('cmdstat_' + c, {}).get('calls', 0))
    return n


def split_sold_out(cluster, lapse_ms, total=30):
    """A split sale sold out by a flagged SplitSale whose flag holds: (name,
    cache, sale, ledger {user: rid})."""
    rc = cluster.client()
    name = new_name('so')
    cache = SoldOutCache(lapse_ms=lapse_ms)
    sale = SplitSale(rc, name, local_soldout=cache)
    sale.create(total)
    sale.layout()
    sale.reserve('warmup-user', qty=1)     # the layout is read: its keys get watched
    ledger = {}
    status, rid = 'RESERVED', None
    i = 0
    while True:
        user = 'u%d' % i
        status, rid = sale.reserve(user)
        if status != 'RESERVED':
            break
        ledger[user] = rid
        i += 1
    assert status == 'SOLD_OUT' and len(ledger) == total - 1
    for key in sale.layout().keys:
        wait_subscribed(node_client(rc, key), key)
    return name, cache, sale, ledger


@needs_send
def test_split_sold_out_is_answered_locally_and_a_part_restock_reopens(cluster_events):
    cluster = cluster_events
    name, cache, sale, ledger = split_sold_out(cluster, lapse_ms=10_000)
    flag = sp.layout_key(name)
    try:
        if not cache.is_set(flag):             # the subscription came after the proof
            assert sale.reserve('prove')[0] == 'SOLD_OUT'
        assert cache.is_set(flag)
        before = seckill_calls(cluster)
        assert [sale.reserve('late%d' % i)[0] for i in range(300)] == ['SOLD_OUT'] * 300
        assert seckill_calls(cluster) == before            # no RESERVE, no snapshot
        assert sale.stats['sold_out_local'] >= 300
        # Another process releases a unit of a user homed on part 0; a user
        # homed on part 2 gets it (a borrow) once the restock clears the flag.
        other = SplitSale(cluster.client(), name)
        user = next(u for u in ledger if sp.route(u, 3) == 0)
        assert other.release(user, ledger.pop(user)) == 'RELEASED'
        buyers = iter(users_homed(2, n=10_000, prefix='r'))
        took, _ = until_reserved(lambda: sale.reserve(next(buyers))[0])
        assert took < 2.0 and cache.stats['clear_event'] >= 1
        info = sale.info()
        assert info['remaining'] == 0 and info['in_flight'] == 0 and info['invariant'] == 'ok'
        assert info['pending'] == 30
    finally:
        cache.close()


@needs_send
def test_split_dropped_restock_delays_at_most_the_lapse(cluster_events):
    cluster = cluster_events
    lapse = 0.4
    name, cache, sale, ledger = split_sold_out(cluster, lapse_ms=lapse * 1000)
    flag = sp.layout_key(name)
    try:
        sale._watcher.unwatch(list(sale.layout().keys))
        rc = cluster.client()
        for key in sale.layout().keys:
            wait_subscribed(node_client(rc, key), key, n=0)
        cache.clear(flag)
        t_set = time.monotonic()
        assert sale.reserve('prove')[0] == 'SOLD_OUT'     # a snapshot proves it: flag set
        assert cache.is_set(flag)
        user = next(iter(ledger))
        assert SplitSale(cluster.client(), name).release(user, ledger.pop(user)) == 'RELEASED'
        t_restock = time.monotonic()
        before = seckill_calls(cluster)
        assert sale.reserve('not-yet')[0] == 'SOLD_OUT' and seckill_calls(cluster) == before
        n = iter(range(10 ** 6))
        _, t_ok = until_reserved(lambda: sale.reserve('w%d' % next(n))[0])
        assert t_ok - t_restock <= lapse + SCHEDULING
        assert t_ok - t_set >= lapse
        info = sale.info()
        assert info['remaining'] == 0 and info['pending'] == 30 and info['invariant'] == 'ok'
    finally:
        cache.close()


# ---------------------------------------------------------------- seckill.aio

@pytest.mark.asyncio
async def test_aio_sale_flag_and_restock(events_on, redis_server):
    r = aioredis.Redis(host='127.0.0.1', port=redis_server.port, decode_responses=True)
    cache = SoldOutCache(lapse_ms=10_000)
    sale = aio.Sale(r, KEY, local_soldout=cache)
    try:
        await sale.init(2)
        won = [await sale.reserve('u%d' % i) for i in range(2)]
        await until_async(lambda: numsub(events_on, keyspace_channel(KEY)) == 1)
        if not cache.is_set(KEY):              # the subscription came after the sell-out
            assert (await sale.reserve('prove')).status == 'SOLD_OUT'
        before = reserve_calls(events_on)
        for i in range(200):
            assert (await sale.reserve('late%d' % i)).status == 'SOLD_OUT'
        assert reserve_calls(events_on) == before
        Sale(redis_server.client(), KEY).release(won[0].rid)
        t0 = time.monotonic()
        i = 0
        while (await sale.reserve('again%d' % i)).status != 'RESERVED':
            i += 1
            assert time.monotonic() - t0 < 2.0
            await asyncio.sleep(0.001)
        assert cache.stats['clear_event'] == 1
        assert (await sale.info())['pending'] == 2
    finally:
        await watcher_aclose(cache)
        await r.aclose()


@needs_send
@pytest.mark.asyncio
async def test_aio_split_sale_flag_and_restock(cluster_events):
    cluster = cluster_events
    rc = AsyncRedisCluster(host='127.0.0.1', port=cluster.masters[0].port, decode_responses=True)
    cache = SoldOutCache(lapse_ms=10_000)
    name = new_name('aso')
    sale = aio.SplitSale(rc, name, local_soldout=cache)
    flag = sp.layout_key(name)
    try:
        await sale.create(12)
        ledger = {}
        for i in range(40):
            status, rid = await sale.reserve('u%d' % i)
            if status == 'RESERVED':
                ledger['u%d' % i] = rid
        assert len(ledger) == 12
        sync_rc = cluster.client()
        for key in (await sale.layout()).keys:
            await until_async(lambda key=key: numsub(node_client(sync_rc, key), keyspace_channel(key)) == 1)
        if not cache.is_set(flag):
            assert (await sale.reserve('prove'))[0] == 'SOLD_OUT'
        before = seckill_calls(cluster)
        for i in range(200):
            assert (await sale.reserve('late%d' % i))[0] == 'SOLD_OUT'
        assert seckill_calls(cluster) == before
        user = next(iter(ledger))
        assert SplitSale(sync_rc, name).release(user, ledger.pop(user)) == 'RELEASED'
        t0 = time.monotonic()
        i = 0
        while (await sale.reserve('again%d' % i))[0] != 'RESERVED':
            i += 1
            assert time.monotonic() - t0 < 2.0
            await asyncio.sleep(0.001)
        info = await sale.info()
        assert info['remaining'] == 0 and info['pending'] == 12 and info['invariant'] == 'ok'
    finally:
        await watcher_aclose(cache)
        await rc.aclose()


@pytest.mark.both_backends
@pytest.mark.asyncio
async def test_aio_forged_soldout_messages_never_answer_sold_out(backend, r, redis_server):
    """test_forged_soldout_messages_never_answer_sold_out with seckill.aio:
    the listener task verifies the hints over the asyncio client."""
    r.config_set('notify-keyspace-events', 'KEd')
    lapse = 0.5
    ar = aioredis.Redis(host='127.0.0.1', port=redis_server.port, decode_responses=True)
    cache = SoldOutCache(lapse_ms=lapse * 1000)
    sale = aio.Sale(ar, KEY, local_soldout=cache)
    oc = redis_server.client()
    other = Sale(oc, KEY)
    forger = Forger(oc, KEY)
    t0 = time.monotonic()
    try:
        assert await sale.init(200) is True
        assert (await sale.reserve('first')).status == 'RESERVED'    # its first call subscribes
        await until_async(lambda: numsub(r, event_channel(KEY)) == 1)
        assert other.info()['remaining'] == 199
        assert other.release('warm-up').status == 'NOT_FOUND'   # the pool's seckill_keys: done first
        reads0 = seckill_calls_of(r, backend, 'info')
        t0 = time.monotonic()
        forger.start()
        answers = collections.Counter()
        for i in range(1000):                              # about 3 s
            if time.monotonic() - t0 > 3.0:
                break
            answers[(await sale.reserve('a%d' % i)).status] += 1
            await asyncio.sleep(0.02)
        t_sold = time.monotonic()
        phase_a = check_no_local_answer(cache, answers, forger, t_sold)
        rids = sell_the_rest(other, 'o')
        await until_async(lambda: cache.is_set(KEY), timeout=5)
        assert cache.stats['set_verify'] >= 1
        before = seckill_calls_of(r, backend, 'reserve')
        t1 = time.monotonic()
        for i in range(300):
            assert (await sale.reserve('late%d' % i)).status == 'SOLD_OUT'
        assert seckill_calls_of(r, backend, 'reserve') - before <= 1 + (time.monotonic() - t1) / lapse
        assert other.release(rids[0]).status == 'RELEASED'
        t_restock = time.monotonic()
        i = 0
        while (await sale.reserve('again%d' % i)).status != 'RESERVED':
            i += 1
            assert time.monotonic() - t_restock <= lapse + SCHEDULING
            await asyncio.sleep(0.001)
    finally:
        if forger.is_alive():
            forger.stop()
        await watcher_aclose(cache)
        await ar.aclose()
        seconds = time.monotonic() - t0
    check_reads_bounded(cache, seckill_calls_of(r, backend, 'info') - reads0, seconds,
                        '%s, aio: %s' % (backend, phase_a))


async def until_async(pred, timeout=10.0):
    """wait_until for a coroutine: the loop keeps running the listeners."""
    t0 = time.monotonic()
    while not pred():
        assert time.monotonic() - t0 < timeout, 'timed out'
        await asyncio.sleep(0.02)


async def watcher_aclose(cache):
    for w in list(cache.attachments.values()):
        await w.aclose()
    cache.attachments.clear()
