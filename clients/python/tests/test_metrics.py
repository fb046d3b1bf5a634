"""seckill.pipeline.metrics without Redis: the plain functions, and the
ledger collector over a real SQLite ledger rendered by prometheus_client."""

import pytest

from seckill.pipeline import metrics as m
from seckill.pipeline.store import PAID, UNPAID, CANCELLED, SaleConfig, open_store
from seckill.pipeline.worker import WorkerStats
from seckill.protocol import Event


def summary(paid=0, unpaid=0, cancelled=0, orders=None):
    orders = orders or {}
    return {PAID: {'orders': orders.get(PAID, paid), 'units': paid},
            UNPAID: {'orders': orders.get(UNPAID, unpaid), 'units': unpaid},
            CANCELLED: {'orders': orders.get(CANCELLED, cancelled), 'units': cancelled}}


def by_name(samples, name):
    return {s.labels: s.value for s in samples if s.name == name}


def test_units_left_is_stock_minus_paid_and_unpaid():
    assert m.units_left(10, summary(paid=3, unpaid=2, cancelled=4)) == 5
    assert m.units_left(10, {}) == 10
    assert m.units_left(10, summary(paid=12)) == -2      # oversold


def test_ledger_samples_per_sale_and_state():
    sales = [SaleConfig('a', 10), SaleConfig('b', 5)]
    out = m.ledger_samples(sales, {'a': summary(paid=4, unpaid=1, cancelled=2,
                                                orders={PAID: 2, UNPAID: 1, CANCELLED: 2}),
                                   'b': summary(paid=7, orders={PAID: 7})})
    left = by_name(out, 'seckill_ledger_units_left')
    assert left == {(('sale', 'a'),): 5.0, (('sale', 'b'),): -2.0}
    orders = by_name(out, 'seckill_ledger_orders')
    assert orders[(('sale', 'a'), ('state', PAID))] == 2
    assert orders[(('sale', 'b'), ('state', UNPAID))] == 0
    assert by_name(out, 'seckill_ledger_units')[(('sale', 'a'), ('state', CANCELLED))] == 2
    assert by_name(out, 'seckill_ledger_orders_created') == {(('sale', 'a'),): 5.0, (('sale', 'b'),): 7.0}
    assert {s.kind for s in out if s.name == 'seckill_ledger_orders_created'} == {'counter'}
    assert by_name(out, 'seckill_ledger_stock')[(('sale', 'b'),)] == 5


def test_order_rate():
    assert m.order_rate(None, (10.0, {'a': 5})) == {'a': 0.0}
    assert m.order_rate((10.0, {'a': 5}), (12.0, {'a': 9, 'b': 3})) == {'a': 2.0, 'b': 0.0}
    assert m.order_rate((10.0, {'a': 5}), (10.0, {'a': 9})) == {'a': 0.0}


def test_drift_samples():
    s = summary(paid=3, unpaid=2)
    agree = m.drift_samples('a', {'confirmed': 3, 'pending': 2}, s)
    assert [x.value for x in agree] == [0, 0]
    off = by_name(m.drift_samples('a', {'confirmed': 5, 'pending': 0}, s), 'seckill_pipeline_drift_units')
    assert off == {(('kind', 'confirmed'), ('sale', 'a')): 2.0, (('kind', 'pending'), ('sale', 'a')): -2.0}
    assert m.drift_samples('a', None, s) == []


def test_worker_samples_and_backlog():
    st = WorkerStats(batches=3, entries=250, db_retries=2)
    st.ledger.inserted = 200
    out = m.worker_samples(st, 'w1')
    assert by_name(out, 'seckill_worker_batches') == {(('consumer', 'w1'),): 3.0}
    assert by_name(out, 'seckill_worker_db_retries') == {(('consumer', 'w1'),): 2.0}
    assert by_name(out, 'seckill_worker_ledger_writes')[(('consumer', 'w1'), ('outcome', 'inserted'))] == 200
    back = m.backlog_samples('seckill_worker', 'a', 'orders', 4, None)
    assert [x.name for x in back] == ['seckill_worker_stream_pending']   # lag unknown: not sent
    assert len(m.backlog_samples('seckill_worker', 'a', 'orders', 4, 7)) == 2


def test_ledger_collector_renders_an_oversold_ledger(tmp_path):
    prometheus_client = pytest.importorskip('prometheus_client')
    store = open_store('sqlite:%s' % (tmp_path / 'ledger.db'))
    store.create_schema()
    cfg = SaleConfig('sale:{1}', 2, stream='sale:{1}:events', created_ms=1)
    store.save_sale(cfg)
    store.apply_events(cfg, [Event('1-%d' % i, 'reserved', 'r%d' % i, 'u%d' % i, 1) for i in range(3)])
    for i in range(3):
        store.start_payment('r%d' % i, 'ref%d' % i)
        store.mark_paid('r%d' % i)
    ticks = iter([100.0, 102.0])
    c = m.LedgerCollector(store, clock=lambda: next(ticks))
    registry = prometheus_client.CollectorRegistry(auto_describe=False)
    registry.register(c)
    text = prometheus_client.generate_latest(registry).decode()
    assert 'seckill_ledger_units_left{sale="sale:{1}"} -1.0' in text
    assert 'seckill_ledger_orders{sale="sale:{1}",state="PAID"} 3.0' in text
    assert 'seckill_ledger_orders_created_total{sale="sale:{1}"} 3.0' in text
    assert 'seckill_ledger_up 1.0' in text
    store.apply_events(cfg, [Event('2-0', 'reserved', 'r9', 'u9', 1)])
    text = prometheus_client.generate_latest(registry).decode()
    assert 'seckill_ledger_orders_per_second{sale="sale:{1}"} 0.5' in text


def test_ledger_collector_says_when_the_ledger_is_down():
    class Down:
        def sales(self):
            raise RuntimeError('no database')

        def reset(self):
            pass
    assert [(s.name, s.value) for s in m.LedgerCollector(Down()).samples()] == [('seckill_ledger_up', 0)]


def test_ledger_collector_keeps_no_connection_per_scrape(tmp_path):
    """prometheus_client answers each scrape from a new thread; the store
    opens a connection per thread: the collector closes its own."""
    import threading
    store = open_store('sqlite:%s' % (tmp_path / 'ledger.db'))
    store.create_schema()
    store.save_sale(SaleConfig('s', 3, created_ms=1))
    c = m.LedgerCollector(store)
    for _ in range(5):
        t = threading.Thread(target=c.samples)
        t.start()
        t.join()
    assert len(store._all_conns) <= 1


def test_sale_samples():
    ok = {'remaining': 3, 'pending': 1, 'confirmed': 1, 'expired': 2, 'invariant': 'ok'}
    assert {s.name: s.value for s in m.sale_samples('s', ok)} == {
        'seckill_sale_remaining': 3, 'seckill_sale_pending': 1, 'seckill_sale_confirmed': 1,
        'seckill_sale_expired': 2}
    assert {s.labels for s in m.sale_samples('s', ok)} == {(('sale', 's'),)}
    broken = dict(ok, invariant=b'broken', fence=b'fenced')
    got = {s.name: s.value for s in m.sale_samples('s', broken)}
    assert (got['seckill_sale_invariant_ok'], got['seckill_sale_fenced']) == (0, 1)
    assert 'seckill_sale_fenced' not in {s.name for s in m.sale_samples('s', dict(ok, fence='clear'))}
    assert m.sale_samples('s', None) == []
