"""The plain protocol functions, without Redis or a database."""

import itertools

import pytest
import redis.exceptions as rexc

from seckill import errors
from seckill import protocol as p
from seckill import faults
from seckill.pipeline import retry
from seckill.pipeline.payment import final
from seckill.pipeline.reconciler import (CANCEL, CANCEL_LOST, FLAG_CONFIRMED_CANCELLED,
                                         FLAG_CONFIRMED_UNPAID, MARK_PAID, RELEASE, RESTORE, plan)
from seckill.pipeline.store import Order, SaleConfig, open_store, SQLiteStore


# ------------------------------------------------------------------ arguments

def test_init_args_full_and_minimal():
    assert p.init_args('k', 10) == ['SECKILL.INIT', 'k', 10]
    assert p.init_args('k', 10, shards=4, limit=2, hold_ms=900, start_ms=1, end_ms=2, ttl_s=60,
                       stream='k:ev', maxlen=1000, replace=True) == [
        'SECKILL.INIT', 'k', 10, 'SHARDS', 4, 'LIMIT', 2, 'HOLD', 900, 'START', 1, 'END', 2,
        'TTL', 60, 'STREAM', 'k:ev', 'MAXLEN', 1000, 'REPLACE']


def test_init_args_split():
    assert p.init_args('k', 10, split=['SPLIT', 'r1', 2, 'a', 'b'], replace=True) == [
        'SECKILL.INIT', 'k', 10, 'SPLIT', 'r1', 2, 'a', 'b', 'REPLACE']


def test_init_args_maxlen_needs_stream():
    with pytest.raises(ValueError):
        p.init_args('k', 1, maxlen=5)


def test_reserve_args():
    assert p.reserve_args('k', 'u1') == ['SECKILL.RESERVE', 'k', 'u1']
    assert p.reserve_args('k', 'u1', 3, 'o-1') == ['SECKILL.RESERVE', 'k', 'u1', 'QTY', 3,
                                                   'REQID', 'o-1']


@pytest.mark.parametrize('bad', ['', 'x' * 257])
def test_ids_are_1_to_256_bytes(bad):
    with pytest.raises(ValueError):
        p.reserve_args('k', bad)
    with pytest.raises(ValueError):
        p.reserve_args('k', 'u', reqid=bad)
    assert p.reserve_args('k', 'é' * 128)[2] == 'é' * 128  # 256 bytes


# ------------------------------------------------------------------ replies

@pytest.mark.parametrize('reply,expected', [
    (['RESERVED', 'o-1', 9], p.Reserved('RESERVED', 'o-1', 9)),
    ([b'DUPLICATE', b'o-1', b'9'], p.Reserved('DUPLICATE', 'o-1', 9)),
    (['SOLD_OUT', None, 0], p.Reserved('SOLD_OUT', None, 0)),
    (['NO_SALE', None, 0], p.Reserved('NO_SALE', None, 0)),
    (['LIMIT', 'o-0', 3], p.Reserved('LIMIT', 'o-0', 3)),
])
def test_parse_reserved(reply, expected):
    got = p.parse_reserved(reply)
    assert got == expected
    assert got.ok == (expected.status in ('RESERVED', 'DUPLICATE'))


@pytest.mark.parametrize('reply', [None, 'OK', ['RESERVED', 'x'], ['WHAT', 'x', 1],
                                   ['RESERVED', 'x', 'nan']])
def test_parse_reserved_refuses_other_shapes(reply):
    with pytest.raises(p.ProtocolError):
        p.parse_reserved(reply)


def test_parse_settled_by_command():
    assert p.parse_settled(['RELEASED', 5], 'RELEASE') == p.Settled('RELEASED', 5)
    assert p.parse_settled([b'ALREADY_CONFIRMED', b'5'], 'CONFIRM') == p.Settled('ALREADY_CONFIRMED', 5)
    assert p.parse_settled(['CONFIRMED', 1], 'RELEASE').status == 'CONFIRMED'  # too late
    with pytest.raises(p.ProtocolError):
        p.parse_settled(['ALREADY_RELEASED', 1], 'CONFIRM')
    with pytest.raises(p.ProtocolError):
        p.parse_settled(['RELEASED'], 'RELEASE')


def test_parse_init():
    assert p.parse_init('OK') is True
    assert p.parse_init(b'OK') is True
    assert p.parse_init('EXISTS') is False
    with pytest.raises(p.ProtocolError):
        p.parse_init('NOPE')


REPORT_RESP2 = ['total', 10, 'remaining', 4, 'pending', 2, 'confirmed', 4, 'released', 3,
                'expired', 1, 'buyers', 6, 'reservations', 9, 'shards', [1, 3],
                'invariant', 'ok']


def test_parse_report_resp2_and_resp3_and_bytes():
    want = {'total': 10, 'remaining': 4, 'pending': 2, 'confirmed': 4, 'released': 3,
            'expired': 1, 'buyers': 6, 'reservations': 9, 'shards': [1, 3], 'invariant': 'ok'}
    assert p.parse_report(REPORT_RESP2) == want
    resp3 = dict(zip(REPORT_RESP2[::2], REPORT_RESP2[1::2]))
    assert p.parse_report(resp3) == want
    as_bytes = [x.encode() if isinstance(x, str) else
                ([str(v).encode() for v in x] if isinstance(x, list) else str(x).encode())
                for x in REPORT_RESP2]
    assert p.parse_report(as_bytes) == want
    assert p.parse_report(None) is None


def test_parse_report_with_orders_and_peers():
    reply = REPORT_RESP2 + ['orders_ok', 1, 'orders_pending', 1, 'orders_released', 0,
                            'orders_unknown', 2, 'orders_conflict', 0,
                            'orders_pending_ids', ['a'], 'orders_released_ids', [],
                            'orders_unknown_ids', ['b', 'c'], 'orders_conflict_ids', [],
                            'sent', 3, 'received', 1, 'peers', [['k2', 3, 1]]]
    rep = p.parse_report(reply)
    assert rep['orders_unknown_ids'] == ['b', 'c'] and rep['orders_released_ids'] == []
    assert rep['peers'] == [('k2', 3, 1)] and rep['sent'] == 3


def test_parse_report_refuses_odd_or_incomplete():
    with pytest.raises(p.ProtocolError):
        p.parse_report(['total', 1, 'remaining'])
    with pytest.raises(p.ProtocolError):
        p.parse_report(['total', 1])


def test_parse_get():
    assert p.parse_get(['user', 'u', 'qty', '2', 'state', 'pending', 'created_ms', 5,
                        'deadline_ms', 9]) == {'user': 'u', 'qty': 2, 'state': 'pending',
                                               'created_ms': 5, 'deadline_ms': 9}
    assert p.parse_get(None) is None


# ------------------------------------------------------------------ reconcile chunking

def rows(n):
    return [('o%d' % i, 'u%d' % i, 1 + i % 3) for i in range(n)]


@pytest.mark.parametrize('n,size,lens', [(0, 3, []), (1, 3, [1]), (3, 3, [3]), (4, 3, [3, 1]),
                                         (2500, 1000, [1000, 1000, 500])])
def test_chunks(n, size, lens):
    got = list(p.chunks(rows(n), size))
    assert [len(c) for c in got] == lens
    assert list(itertools.chain.from_iterable(got)) == rows(n)


def test_chunks_refuse_bad_size_and_rows():
    with pytest.raises(ValueError):
        list(p.chunks(rows(2), 0))
    with pytest.raises(ValueError):
        list(p.chunks([('o', 'u', 0)], 10))
    with pytest.raises(ValueError):
        list(p.chunks([('', 'u', 1)], 10))


def test_order_row_from_objects():
    o = Order('o1', 'k', 'u1', 2, 'PAID')
    assert p.order_row(o) == ('o1', 'u1', 2)
    assert p.order_row(('o1', 'u1', '2')) == ('o1', 'u1', 2)


def test_reconcile_calls_expire_first_apply_each():
    calls = list(p.reconcile_calls('k', rows(5), apply=True, expire=True, chunk_size=2))
    assert len(calls) == 3
    assert calls[0][:5] == ['SECKILL.RECONCILE', 'k', 'EXPIRE', 'ORDERS', 2]
    assert 'EXPIRE' not in calls[1] and 'EXPIRE' not in calls[2]
    assert all(c[-1] == 'APPLY' for c in calls)
    assert calls[2] == ['SECKILL.RECONCILE', 'k', 'ORDERS', 1, 'o4', 'u4', 2, 'APPLY']


def test_reconcile_calls_empty_ledger_is_one_report():
    assert list(p.reconcile_calls('k', [], apply=True, expire=True)) == [
        ['SECKILL.RECONCILE', 'k', 'EXPIRE']]
    assert list(p.reconcile_calls('k', [])) == [['SECKILL.RECONCILE', 'k']]


def chunk_report(ok=0, pending=(), released=(), unknown=(), conflict=(), remaining=0):
    rep = p.parse_report(REPORT_RESP2)
    rep['remaining'] = remaining
    rep.update({'orders_ok': ok, 'orders_pending': len(pending), 'orders_released': len(released),
                'orders_unknown': len(unknown), 'orders_conflict': len(conflict),
                'orders_pending_ids': list(pending), 'orders_released_ids': list(released),
                'orders_unknown_ids': list(unknown), 'orders_conflict_ids': list(conflict)})
    return rep


def test_merge_reconcile_sums_and_keeps_last_report():
    res = p.ReconcileResult()
    p.merge_reconcile(res, chunk_report(ok=2, pending=['a'], remaining=7))
    p.merge_reconcile(res, chunk_report(ok=1, unknown=['b', 'c'], conflict=['d'], remaining=3))
    assert res.counts == {'ok': 3, 'pending': 1, 'released': 0, 'unknown': 2, 'conflict': 1}
    assert res.ids == {'pending': ['a'], 'released': [], 'unknown': ['b', 'c'], 'conflict': ['d']}
    assert res.report['remaining'] == 3 and 'orders_ok' not in res.report
    assert res.calls == 2 and not res.clean
    with pytest.raises(p.ProtocolError):
        p.merge_reconcile(res, None)


def test_clean_result():
    res = p.merge_reconcile(p.ReconcileResult(), chunk_report(ok=4))
    assert res.clean


# ------------------------------------------------------------------ stream entries

def test_parse_entry_forms():
    fields = ['event', 'reserved', 'rid', 'o1', 'user', 'u1', 'qty', '2']
    ev = p.parse_entry('1700000000123-4', fields)
    assert ev == p.Event('1700000000123-4', 'reserved', 'o1', 'u1', 2)
    assert ev.ms == 1700000000123
    assert p.parse_entry(b'1-0', {b'event': b'expired', b'rid': b'o', b'user': b'u',
                                  b'qty': b'1'}).event == 'expired'


@pytest.mark.parametrize('fields', [None, {}, [], ['event', 'other', 'rid', 'o', 'user', 'u', 'qty', '1'],
                                    ['event', 'reserved', 'rid', 'o'],
                                    ['event', 'reserved', 'rid', 'o', 'user', 'u', 'qty', 'x']])
def test_parse_entry_skips_trimmed_and_foreign(fields):
    assert p.parse_entry('1-0', fields) is None


# ------------------------------------------------------------------ retry and faults

def test_backoff_doubles_to_cap_with_jitter():
    got = list(itertools.islice(retry.delays(0.1, 1.0, 2.0, 0.5, rand=lambda: 0.0), 6))
    assert got == pytest.approx([0.1, 0.2, 0.4, 0.8, 1.0, 1.0])
    low = list(itertools.islice(retry.delays(0.1, 1.0, 2.0, 0.5, rand=lambda: 1.0), 3))
    assert low == pytest.approx([0.05, 0.1, 0.2])
    b = retry.Backoff(0.1, 1.0)
    b.next(), b.next()
    assert b.failures == 2
    b.reset()
    assert b.failures == 0
    with pytest.raises(ValueError):
        next(retry.delays(0, 1))


def test_faults_parse_and_fire_on_nth():
    assert faults.parse('a:2, b') == {'a': 2, 'b': 1}
    assert faults.parse('') == {}
    with pytest.raises(ValueError):
        faults.parse('a:0')
    f = faults.Faults({'x': 2})
    f('x')
    f('y')
    with pytest.raises(faults.Crash):
        f('x')
    f('x')  # only the nth


# ------------------------------------------------------------------ transient errors

@pytest.mark.parametrize('exc', [
    rexc.ConnectionError('refused'), rexc.TimeoutError('timed out'),
    rexc.BusyLoadingError('Redis is loading the dataset in memory'),
    rexc.TryAgainError("the sale's STREAM key is not on this node"),
    rexc.MovedError('3999 127.0.0.1:7001'), rexc.AskError('3999 127.0.0.1:7001'),
    rexc.ClusterDownError('The cluster is down'), rexc.MasterDownError('Link with MASTER is down'),
    rexc.ReadOnlyError("You can't write against a read only replica."),
    rexc.ResponseError('BUSY Redis is busy running a script.'),
    rexc.ResponseError('TRYAGAIN Multiple keys request during rehashing of slot'),
    rexc.ResponseError('LOADING Redis is loading'), rexc.ResponseError('READONLY replica'),
    rexc.ResponseError('MASTERDOWN Link with MASTER is down')])
def test_transient_errors(exc):
    assert errors.transient(exc) is True


@pytest.mark.parametrize('exc', [
    rexc.ResponseError('STALEROUND the key is in round 1'), rexc.ResponseError('wrong number'),
    rexc.ResponseError('BUSYGROUP Consumer Group name already exists'),
    rexc.ResponseError('BUSYKEY Target key name already exists.'),
    rexc.ResponseError('NOGROUP No such key'), rexc.ResponseError(''),
    rexc.ResponseError('WRONGTYPE Operation against a key'), ValueError('TRYAGAIN'),
    RuntimeError('MOVED')])
def test_not_transient_errors(exc):
    assert errors.transient(exc) is False


# ------------------------------------------------------------------ decisions

def order(rid, state, payment_ref=None, deadline=None):
    return Order(rid, 'k', 'u-' + rid, 1, state, deadline_ms=deadline, payment_ref=payment_ref)


def test_plan_repairs_for_unpaid_and_cancelled():
    orders = {o.rid: o for o in [
        order('ok-paying', 'UNPAID', payment_ref='p1'), order('ok-nopay', 'UNPAID'),
        order('pend', 'UNPAID'), order('rel', 'UNPAID'),
        order('lost-live', 'UNPAID', deadline=2000), order('lost-over', 'UNPAID', deadline=500),
        order('lost-nohold', 'UNPAID'),
        order('c-pend', 'CANCELLED'), order('c-ok', 'CANCELLED'), order('c-rel', 'CANCELLED'),
    ]}
    unpaid = p.merge_reconcile(p.ReconcileResult(), chunk_report(
        ok=2, pending=['pend'], released=['rel'], unknown=['lost-live', 'lost-over', 'lost-nohold']))
    cancelled = p.merge_reconcile(p.ReconcileResult(), chunk_report(
        ok=1, pending=['c-pend'], released=['c-rel']))
    got = plan(unpaid, cancelled, orders, now_ms=1000)
    assert got == [(MARK_PAID, 'ok-paying'), (CANCEL, 'rel'), (RESTORE, 'lost-live'),
                   (RESTORE, 'lost-nohold'), (CANCEL_LOST, 'lost-over'), (RELEASE, 'c-pend'),
                   (FLAG_CONFIRMED_UNPAID, 'ok-nopay'), (FLAG_CONFIRMED_CANCELLED, 'c-ok')]


def test_plan_nothing_when_consistent():
    orders = {'a': order('a', 'UNPAID'), 'b': order('b', 'CANCELLED')}
    unpaid = p.merge_reconcile(p.ReconcileResult(), chunk_report(pending=['a']))
    cancelled = p.merge_reconcile(p.ReconcileResult(), chunk_report(released=['b']))
    assert plan(unpaid, cancelled, orders, 0) == []


@pytest.mark.parametrize('row,ref,outcome,reason', [
    (None, 'p', 'RETRY', 'no_order'),
    (Order('o', 'k', 'u', 1, 'PAID', paid_ref='p'), 'p', 'PAID', ''),
    (Order('o', 'k', 'u', 1, 'PAID', paid_ref='q'), 'p', 'REFUND', 'paid_by_other'),
    (Order('o', 'k', 'u', 1, 'CANCELLED', cancel_reason='expired'), 'p', 'REFUND', 'expired'),
    (Order('o', 'k', 'u', 1, 'CANCELLED'), 'p', 'REFUND', 'cancelled'),
    (Order('o', 'k', 'u', 1, 'UNPAID'), 'p', 'RETRY', 'undecided'),
])
def test_pay_answer_from_the_row(row, ref, outcome, reason):
    res = final(row, 'o', ref)
    assert (res.outcome, res.reason) == (outcome, reason)
    assert res.captured == (outcome == 'PAID') and res.refund == (outcome == 'REFUND')


def test_sale_config_ttl_counts_from_now():
    cfg = SaleConfig('k', 5, expires_at_ms=10_500)
    assert cfg.init_kwargs(at_ms=1_000)['ttl_s'] == 10
    assert cfg.init_kwargs(at_ms=10_400)['ttl_s'] == 1
    assert cfg.init_kwargs(at_ms=99_000)['ttl_s'] == 1
    assert SaleConfig('k', 5).init_kwargs(0)['ttl_s'] is None


@pytest.mark.parametrize('url,path,timeout', [
    ('sqlite:///tmp/x.db', '/tmp/x.db', 5.0), ('sqlite:rel.db', 'rel.db', 5.0),
    ('sqlite:///tmp/x.db?timeout=0.2', '/tmp/x.db', 0.2), ('orders.sqlite', 'orders.sqlite', 5.0)])
def test_open_store_sqlite_urls(url, path, timeout):
    s = open_store(url)
    assert isinstance(s, SQLiteStore) and s.path == path and s.timeout == timeout
    assert open_store(s.url).path == path


def test_open_store_refuses_unknown():
    with pytest.raises(ValueError):
        open_store('mysql://x')
