"""The typed Sale wrapper against a real redis-server with the module."""

import time

import pytest

from seckill import Sale, SaleMissing


@pytest.fixture
def sale(r):
    return Sale(r, 'sale:{w}')


def test_init_then_exists_then_replace(sale):
    assert sale.init(5, limit=2, stream='sale:{w}:ev') is True
    assert sale.init(5) is False
    assert sale.info()['total'] == 5
    assert sale.init(7, replace=True) is True
    assert sale.info()['total'] == 7


def test_reserve_statuses(sale, r):
    assert sale.reserve('u1').status == 'NO_SALE'
    sale.init(3, limit=2)
    a = sale.reserve('u1', reqid='o-1')
    assert (a.status, a.rid, a.remaining, a.ok) == ('RESERVED', 'o-1', 2, True)
    again = sale.reserve('u1', reqid='o-1')
    assert (again.status, again.rid, again.ok) == ('DUPLICATE', 'o-1', True)
    assert sale.reserve('u1', qty=2).status == 'LIMIT'
    gen = sale.reserve('u2', qty=2)
    assert gen.status == 'RESERVED' and gen.rid and gen.remaining == 0
    out = sale.reserve('u3')
    assert (out.status, out.rid, out.ok) == ('SOLD_OUT', None, False)


def test_window_statuses(sale):
    now = sale.server_ms()
    sale.init(3, start_ms=now + 60_000, end_ms=now + 120_000)
    assert sale.reserve('u').status == 'NOT_STARTED'
    Sale(sale.r, 'sale:{w2}').init(3, start_ms=now - 120_000, end_ms=now - 60_000)
    assert Sale(sale.r, 'sale:{w2}').reserve('u').status == 'ENDED'


def test_release_confirm(sale):
    sale.init(3, limit=3)
    sale.reserve('u', reqid='a')
    sale.reserve('u', reqid='b')
    assert sale.confirm('a').status == 'CONFIRMED'
    assert sale.confirm('a').status == 'ALREADY_CONFIRMED'
    assert sale.release('a').status == 'CONFIRMED'
    rel = sale.release('b')
    assert (rel.status, rel.remaining) == ('RELEASED', 2)
    assert sale.release('b').status == 'ALREADY_RELEASED'
    assert sale.confirm('b').status == 'RELEASED'
    assert sale.confirm('zz').status == 'NOT_FOUND'
    assert sale.release('zz').status == 'NOT_FOUND'


def test_info_get_and_missing(sale):
    assert sale.info() is None and sale.get('x') is None
    sale.init(4, hold_ms=60_000, shards=2)
    sale.reserve('u', reqid='a')
    info = sale.info()
    assert info['remaining'] == 3 and info['pending'] == 1 and info['invariant'] == 'ok'
    assert isinstance(info['shards'], list) and sum(info['shards']) == 3
    got = sale.get('a')
    assert got['user'] == 'u' and got['qty'] == 1 and got['state'] == 'pending'
    assert got['deadline_ms'] - got['created_ms'] == 60_000


def test_hold_expiry_shows_in_state(sale):
    sale.init(2, hold_ms=200)
    sale.reserve('u', reqid='a')
    time.sleep(0.5)
    assert sale.confirm('a').status == 'RELEASED'
    assert sale.info()['expired'] == 1


def test_reconcile_chunked_equals_one_call(sale, r):
    sale.init(100, limit=5)
    ledger = []
    for i in range(60):
        sale.reserve('u%d' % i, reqid='o%d' % i)
        ledger.append(('o%d' % i, 'u%d' % i, 1))
    for i in range(0, 60, 3):
        sale.confirm('o%d' % i)
    for i in range(1, 60, 7):
        sale.release('o%d' % i)
    ledger += [('lost%d' % i, 'x%d' % i, 2) for i in range(5)]
    one = sale.reconcile(ledger)
    many = sale.reconcile(ledger, chunk_size=7)
    assert one.calls == 1 and many.calls == 10
    assert one.counts == many.counts
    assert {k: sorted(v) for k, v in one.ids.items()} == {k: sorted(v) for k, v in many.ids.items()}
    assert one.counts['unknown'] == 5 and one.counts['ok'] == 20
    assert one.counts['released'] == len([i for i in range(1, 60, 7) if i % 3])  # confirmed ones stay
    # report only: nothing changed
    assert sale.info() == one.report


def test_reconcile_apply_in_chunks(sale):
    sale.init(50)
    ledger = [('o%d' % i, 'u%d' % i, 1) for i in range(23)]
    res = sale.reconcile(ledger, apply=True, chunk_size=5)
    assert res.calls == 5 and res.counts['unknown'] == 23
    after = sale.reconcile(ledger)
    assert after.clean and after.counts['ok'] == 23
    assert sale.info()['confirmed'] == 23


def test_reconcile_missing_sale(sale):
    with pytest.raises(SaleMissing):
        sale.reconcile([('o', 'u', 1)])


def test_bytes_client(redis_server):
    r = redis_server.client(decode_responses=False)
    s = Sale(r, 'sale:{b}')
    assert s.init(2) is True
    res = s.reserve('u', reqid='o1')
    assert res.rid == 'o1' and isinstance(res.rid, str)
    assert s.info()['invariant'] == 'ok'
    assert s.get('o1')['state'] == 'pending'
    assert s.reconcile([('o1', 'u', 1)]).counts['pending'] == 1
