"""The local sold-out flag's rules (seckill.soldout) without a server: set,
clear, lapse and probe by an injected clock, stale replies, sold-out
messages as hints (never trusted, their verification reads rate-limited),
split-sale groups, retries of lost replies; the channel names and message
parsing; the RESERVE operation's use of the flag, driven step by step; the
listeners' plain bookkeeping."""

import pytest

from seckill import protocol as p
from seckill.drivers.soldout import NodeSubscriptions, config_flags, dispatch
from seckill.ops import sale as ops
from seckill.plain.steps import Call
from seckill.soldout import (RESTOCK, SOLDOUT, SoldOutCache, event_channel, key_channels,
                             keyevent_channels, keyspace_channel, notifications_deliver,
                             parse_message, subscribed_key)


class Clock:
    def __init__(self):
        self.t = 1000.0

    def __call__(self):
        return self.t

    def advance(self, ms):
        self.t += ms / 1000.0


@pytest.fixture
def clock():
    return Clock()


@pytest.fixture
def cache(clock):
    c = SoldOutCache(lapse_ms=500, probe_ms=100, clock=clock)
    c.track('k')
    return c


def R(status, remaining, rid=None):
    return p.Reserved(status, rid, remaining)


# ---------------------------------------------------------------- set, clear, lapse

def test_no_flag_asks_redis(cache):
    assert cache.check('k') is False
    assert cache.is_set('k') is False
    assert cache.stats['local'] == 0


def test_sold_out_reply_sets_until_the_lapse(cache, clock):
    assert cache.sold_out('k', cache.token('k')) is True
    assert [cache.check('k') for _ in range(3)] == [True] * 3
    assert cache.stats['local'] == 3
    clock.advance(499)
    assert cache.check('k') is True
    clock.advance(1)                       # 500 ms: lapsed
    assert cache.is_set('k') is False
    assert cache.check('k') is False       # this caller probes Redis
    assert cache.stats['probes'] == 1


def test_probe_keeps_others_local_for_at_most_probe_ms(cache, clock):
    cache.sold_out('k', cache.token('k'))
    clock.advance(500)
    assert cache.check('k') is False       # the probe
    clock.advance(99)
    assert cache.check('k') is True        # others, while the probe is out
    clock.advance(1)
    assert cache.check('k') is False       # a probe that hangs: the next caller goes too
    assert cache.stats['probes'] == 2


def test_probe_answer_sets_or_clears(cache, clock):
    cache.sold_out('k', cache.token('k'))
    clock.advance(600)
    assert cache.check('k') is False
    cache.reserved('k', cache.token('k'), R(p.SOLD_OUT, 0))   # still sold out: set again
    assert cache.check('k') is True
    clock.advance(600)
    assert cache.check('k') is False
    cache.reserved('k', cache.token('k'), R(p.RESERVED, 2, 'r'))   # a restock got lost
    assert cache.check('k') is False and cache.check('k') is False
    assert cache.stats['probes'] == 2


def test_zero_lapse_never_answers_locally(clock):
    c = SoldOutCache(lapse_ms=0, clock=clock)
    c.track('k')
    c.sold_out('k', c.token('k'))
    c.verified('k', c.token('k'), INFO_EMPTY)
    assert c.check('k') is False


def test_bad_bounds_are_refused():
    with pytest.raises(ValueError):
        SoldOutCache(lapse_ms=-1)
    for bad in (0, -5):
        with pytest.raises(ValueError):
            SoldOutCache(verify_ms=bad)


@pytest.mark.parametrize('res, flagged', [
    (R(p.SOLD_OUT, 0), True),
    (R(p.RESERVED, 0, 'r'), True),          # took the last unit
    (R(p.RESERVED, 3, 'r'), False),
    (R(p.SOLD_OUT, 1), False),              # QTY 2 with 1 left: not sold out for others
    (R(p.NO_SALE, 0), False),
    (R(p.ENDED, 0), False),                 # the local answer would hide ENDED
    (R(p.NOT_STARTED, 0), False),
    (R(p.LIMIT, 4, 'r'), False),
])
def test_reserve_replies(cache, res, flagged):
    cache.reserved('k', cache.token('k'), res)
    assert cache.is_set('k') is flagged


def test_limit_or_duplicate_at_zero_leave_the_flag_alone(cache):
    cache.reserved('k', cache.token('k'), R(p.LIMIT, 0, 'r'))
    assert cache.is_set('k') is False
    cache.sold_out('k', cache.token('k'))
    cache.reserved('k', cache.token('k'), R(p.DUPLICATE, 0, 'r'))
    assert cache.is_set('k') is True


def test_release_that_returns_stock_clears(cache):
    cache.sold_out('k', cache.token('k'))
    cache.settled('k', cache.token('k'), p.Settled(p.NOT_FOUND, 0))
    assert cache.is_set('k') is True
    cache.settled('k', cache.token('k'), p.Settled(p.RELEASED, 1))
    assert cache.is_set('k') is False


# ---------------------------------------------------------------- signals

INFO_EMPTY = {'total': 5, 'remaining': 0, 'pending': 5, 'confirmed': 0, 'invariant': 'ok'}
INFO_LEFT = dict(INFO_EMPTY, remaining=1, pending=4)


def test_a_soldout_message_sets_nothing_a_restock_clears(cache):
    for _ in range(50):                         # anyone may PUBLISH it: a hint, never the truth
        cache.event('k', SOLDOUT)
    assert cache.is_set('k') is False and cache.check('k') is False
    assert cache.stats['local'] == 0 and cache.stats['hints'] == 50
    cache.sold_out('k', cache.token('k'))       # Redis's own reply
    cache.event('k', RESTOCK)
    assert not cache.is_set('k') and cache.stats['clear_event'] == 1
    cache.event('other', RESTOCK)               # not a key of this process
    assert cache.event('other', SOLDOUT) is None and cache.stats['hints'] == 50


def test_hint_verification_is_rate_limited_per_key(cache, clock):
    cache.track('j')
    assert cache.event('k', SOLDOUT) == cache.token('k')     # a read is due
    assert cache.event('j', SOLDOUT) is not None             # another key has its own budget
    for _ in range(20):
        clock.advance(20)
        assert cache.event('k', SOLDOUT) is None             # within verify_ms: no read
    assert cache.stats['hints_limited'] == 20
    clock.advance(101)                                       # past 500 ms after the first read
    assert cache.event('k', SOLDOUT) is not None
    assert cache.stats['verify'] == 3


def test_flood_of_hints_reads_at_most_once_per_verify_ms(cache, clock):
    # 10 s of messages every 10 ms on the three channels: 3,000 hints.
    for _ in range(1000):
        for _ in range(3):
            cache.event('k', SOLDOUT)
        clock.advance(10)
    assert cache.stats['hints'] == 3000
    assert 1 <= cache.stats['verify'] <= 1 + 10_000 // 500


def test_no_read_while_the_flag_holds(cache, clock):
    cache.sold_out('k', cache.token('k'))
    assert cache.event('k', SOLDOUT) is None and cache.stats['verify'] == 0
    clock.advance(500)                                       # lapsed: a hint may be checked
    assert cache.event('k', SOLDOUT) is not None


def test_verify_none_never_reads(clock):
    c = SoldOutCache(clock=clock, verify_ms=None)
    c.track('k')
    assert c.event('k', SOLDOUT) is None and c.stats['verify'] == 0


@pytest.mark.parametrize('report, flagged', [
    (INFO_EMPTY, True),                           # Redis shows 0 units: proven
    (INFO_LEFT, False),
    (None, False),                                # no such key: RESERVE would say NO_SALE
    (dict(INFO_EMPTY, mode='draw'), False),       # a draw sale answers RESERVE with DRAW
])
def test_verified_report(cache, report, flagged):
    token = cache.event('k', SOLDOUT)
    cache.verified('k', token, report)
    assert cache.is_set('k') is flagged
    assert cache.stats['set_verify'] == int(flagged)


def test_verified_report_with_stock_clears(cache):
    cache.sold_out('k', cache.token('k'))
    cache.verified('k', cache.token('k'), INFO_LEFT)
    assert not cache.is_set('k') and cache.stats['clear_verify'] == 1


def test_verification_older_than_a_restock_is_ignored(cache):
    token = cache.event('k', SOLDOUT)
    cache.event('k', RESTOCK)                     # while the read was in flight
    cache.verified('k', token, INFO_EMPTY)
    assert cache.is_set('k') is False and cache.stats['stale_reply'] == 1


def test_failed_verification_changes_nothing(cache):
    cache.event('k', SOLDOUT)
    cache.verify_failed('k')
    assert cache.is_set('k') is False and cache.stats['verify_failed'] == 1


def test_verified_flag_lapses_too(cache, clock):
    cache.verified('k', cache.event('k', SOLDOUT), INFO_EMPTY)
    assert cache.check('k') is True
    clock.advance(500)
    assert cache.check('k') is False


def test_a_reply_older_than_a_restock_is_ignored(cache):
    # A SOLD_OUT reply whose call was in flight when a restock arrived must
    # not set the flag after the restock cleared it.
    token = cache.token('k')
    cache.event('k', RESTOCK)
    assert cache.sold_out('k', token) is False
    assert cache.is_set('k') is False and cache.stats['stale_reply'] == 1
    # A sold-out message proves nothing: a reply in flight still counts.
    cache.sold_out('k', cache.token('k'))
    token = cache.token('k')
    cache.event('k', SOLDOUT)
    assert cache.in_stock('k', token) is True
    assert cache.is_set('k') is False


def test_lost_subscription_clears(cache):
    cache.sold_out('k', cache.token('k'))
    token = cache.token('k')
    cache.lost('k')
    assert cache.is_set('k') is False and cache.stats['lost'] == 1
    assert cache.sold_out('k', token) is False      # a reply from before the gap


def test_clear(cache):
    cache.sold_out('k', cache.token('k'))
    cache.clear('k')
    assert cache.is_set('k') is False


# ---------------------------------------------------------------- split sales: groups

def test_group_cleared_by_any_member_restock_never_set_by_one_member(clock):
    c = SoldOutCache(lapse_ms=500, clock=clock)
    c.group('sale:{s}:split', ['sale:{s.pool}', 'sale:{s.p0}', 'sale:{s.p1}'])
    assert c.event('sale:{s.p0}', SOLDOUT) is None  # one part empty: not the sale; no read
    assert c.is_set('sale:{s}:split') is False and c.stats['verify'] == 0
    c.sold_out('sale:{s}:split', c.token('sale:{s}:split'))    # a snapshot proved it
    c.event('sale:{s.p0}', SOLDOUT)
    assert c.is_set('sale:{s}:split') is True
    c.event('sale:{s.p1}', RESTOCK)
    assert c.is_set('sale:{s}:split') is False
    # A new layout (a replace) drops the old members.
    c.group('sale:{s}:split', ['sale:{s.pool.1}', 'sale:{s.p0.1}'])
    c.sold_out('sale:{s}:split', c.token('sale:{s}:split'))
    c.event('sale:{s.p1}', RESTOCK)
    assert c.is_set('sale:{s}:split') is True
    c.lost('sale:{s.p0.1}')
    assert c.is_set('sale:{s}:split') is False


# ---------------------------------------------------------------- lost replies

def test_failed_call_drops_the_flag_and_its_retry_bypasses(cache):
    cache.sold_out('k', cache.token('k'))
    cache.failed('k', 'order-1')
    assert cache.is_set('k') is False
    assert cache.retrying('order-1') and not cache.retrying('order-2')
    assert not cache.retrying(None)
    cache.answered('order-1')
    assert not cache.retrying('order-1')


def test_retry_memory_is_bounded(cache, monkeypatch):
    import seckill.soldout as so
    monkeypatch.setattr(so, 'RETRY_MEMORY', 3)
    for i in range(5):
        cache.failed('k', 'r%d' % i)
    assert [cache.retrying('r%d' % i) for i in range(5)] == [False, False, True, True, True]


# ---------------------------------------------------------------- the RESERVE operation

def drive(op, replies):
    """Runs an operation's steps: each Call gets the next reply (an exception
    is thrown in). Returns (result, calls sent)."""
    sent, value, error = [], None, None
    while True:
        try:
            step = op.send(value) if error is None else op.throw(error)
        except StopIteration as stop:
            return stop.value, sent
        assert isinstance(step, Call)
        sent.append(list(step.args))
        value, error = None, None
        reply = replies.pop(0)
        if isinstance(reply, BaseException):
            error = reply
        else:
            value = reply


def test_flagged_reserve_sends_nothing(cache):
    res, sent = drive(ops.reserve('k', 'u1', flags=cache), [['SOLD_OUT', None, 0]])
    assert res.status == p.SOLD_OUT and len(sent) == 1 and cache.is_set('k')
    res, sent = drive(ops.reserve('k', 'u2', flags=cache), [])
    assert res == p.Reserved(p.SOLD_OUT, None, 0) and sent == []


def test_reserve_without_flags_is_unchanged(cache):
    cache.sold_out('k', cache.token('k'))
    res, sent = drive(ops.reserve('k', 'u1'), [['RESERVED', 'r1', 0]])
    assert res.status == p.RESERVED and len(sent) == 1


def test_lost_reply_retry_reaches_redis_and_answers_duplicate(cache):
    from redis.exceptions import ConnectionError as RedisConnectionError
    with pytest.raises(RedisConnectionError):
        drive(ops.reserve('k', 'u1', reqid='o1', flags=cache), [RedisConnectionError('lost')])
    cache.sold_out('k', cache.token('k'))   # the lost call took the last unit: Redis says so
    res, sent = drive(ops.reserve('k', 'u9', reqid='o9', flags=cache), [])
    assert res.status == p.SOLD_OUT and sent == []
    res, sent = drive(ops.reserve('k', 'u1', reqid='o1', flags=cache), [['DUPLICATE', 'o1', 0]])
    assert res.status == p.DUPLICATE and res.rid == 'o1' and len(sent) == 1
    assert not cache.retrying('o1')


def test_release_reply_with_stock_clears(cache):
    cache.sold_out('k', cache.token('k'))
    res, _ = drive(ops.release('k', 'r1', flags=cache), [['RELEASED', 1]])
    assert res.status == p.RELEASED and not cache.is_set('k')


# ---------------------------------------------------------------- channels and messages

def test_channel_names():
    assert keyspace_channel('sale:{1}', 0) == '__keyspace@0__:sale:{1}'
    assert keyspace_channel('k', 3) == '__keyspace@3__:k'
    assert event_channel('sale:{1}') == 'seckill:events:sale:{1}'
    assert key_channels('k', 2) == ['__keyspace@2__:k', 'seckill:events:k']
    assert keyevent_channels(0) == ['__keyevent@0__:seckill.soldout', '__keyevent@0__:seckill.restock']


@pytest.mark.parametrize('channel, data, expect', [
    ('__keyspace@0__:sale:{1}', 'seckill.soldout', ('sale:{1}', SOLDOUT)),
    (b'__keyspace@0__:a:b:c', b'seckill.restock', ('a:b:c', RESTOCK)),
    ('__keyevent@5__:seckill.restock', 'sale:{1}', ('sale:{1}', RESTOCK)),
    ('seckill:events:sale:{x}', 'seckill.soldout', ('sale:{x}', SOLDOUT)),
    ('__keyspace@0__:sale:{1}', 'seckill.reserve', None),
    ('__keyspace@0__:sale:{1}', 'del', None),
    ('news', 'seckill.soldout', None),
    ('seckill:events:', 'seckill.soldout', None),
    (None, None, None),
])
def test_parse_message(channel, data, expect):
    assert parse_message(channel, data) == expect


def test_subscribed_key():
    assert subscribed_key('__keyspace@0__:k') == 'k'
    assert subscribed_key(b'seckill:events:k') == 'k'
    assert subscribed_key('__keyevent@0__:seckill.soldout') is None


@pytest.mark.parametrize('flags, ok', [
    ('', False), ('Kd', True), ('Ed', True), ('AK', True), ('KEA', True), ('Kg', False),
    ('d', False), ('KEg$lshzxet', False), (None, None)])
def test_notifications_deliver(flags, ok):
    assert notifications_deliver(flags) is ok


def test_config_flags():
    assert config_flags({'notify-keyspace-events': 'Kd'}) == 'Kd'
    assert config_flags({b'notify-keyspace-events': b'AK'}) == 'AK'
    assert config_flags([b'notify-keyspace-events', b'']) == ''
    assert config_flags({}) is None


# ---------------------------------------------------------------- listener bookkeeping

def test_node_subscriptions():
    s = NodeSubscriptions(db=1)
    s.add('a')
    s.add('b')
    s.add('a')
    sub, unsub = s.take()
    assert sub == key_channels('a', 1) + key_channels('b', 1) and unsub == []
    assert s.view == {'a', 'b'}
    s.remove('a')
    s.remove('zz')
    assert s.take() == ([], key_channels('a', 1))
    s.add('c')
    assert s.reset() == key_channels('b', 1) + key_channels('c', 1)   # after a reconnect
    assert s.take() == ([], [])


def test_dispatch(cache):
    cache.group('g', ['k', 'm'])
    due = dispatch(cache, {'type': 'message', 'channel': '__keyspace@0__:k', 'data': SOLDOUT}, [])
    assert due == ('k', cache.token('k')) and not cache.is_set('k')    # a read to make
    assert dispatch(cache, {'type': 'message', 'channel': 'seckill:events:k', 'data': SOLDOUT},
                    []) is None                                         # rate-limited
    cache.verified('k', due[1], INFO_EMPTY)
    assert cache.is_set('k')
    cache.sold_out('g', cache.token('g'))
    dispatch(cache, {'type': 'message', 'channel': 'seckill:events:m', 'data': RESTOCK}, [])
    assert cache.is_set('k') and not cache.is_set('g')
    # A (re)subscription of a key's channel: what it fed may have been missed.
    dispatch(cache, {'type': 'subscribe', 'channel': '__keyspace@0__:k', 'data': 1}, [])
    assert not cache.is_set('k')
    # Of a key-event channel: every key of the node.
    cache.sold_out('k', cache.token('k'))
    cache.sold_out('g', cache.token('g'))
    dispatch(cache, {'type': 'subscribe', 'channel': '__keyevent@0__:seckill.restock', 'data': 2},
             ['k', 'm'])
    assert not cache.is_set('k') and not cache.is_set('g')
    dispatch(cache, None, [])
    dispatch(cache, {'type': 'pong', 'channel': None, 'data': ''}, [])
