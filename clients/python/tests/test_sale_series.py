"""The metrics endpoint's per-sale series (LedgerCollector(sales=True),
`python -m seckill metrics --sales`) on a real server, the module and the
Functions library: each ledger sale's report as the series the exporter
script makes of the module's sales (contrib/monitoring/seckill-exporter.lua),
so the rules and the dashboard serve a library deployment too."""

import pytest

from seckill import Sale
from seckill.pipeline import metrics as m
from seckill.pipeline.store import SaleConfig, open_store

pytestmark = pytest.mark.both_backends   # the module and the Functions library (conftest)


def series(samples, name):
    return {dict(s.labels)['sale']: s.value for s in samples if s.name == name}


def test_sale_series_follow_the_report(r, tmp_path):
    store = open_store('sqlite:%s' % (tmp_path / 'ledger.db'))
    store.create_schema()
    sale = Sale(r, 'sale:{series}')
    sale.init(5)
    store.save_sale(SaleConfig(sale.key, 5, created_ms=1))
    held = [sale.reserve('u%d' % i).rid for i in range(3)]
    sale.confirm(held[0])
    sale.release(held[1])
    samples = m.LedgerCollector(store, r, sales=True).samples()
    assert series(samples, 'seckill_sale_remaining') == {sale.key: 3}
    assert series(samples, 'seckill_sale_pending') == {sale.key: 1}
    assert series(samples, 'seckill_sale_confirmed') == {sale.key: 1}
    assert series(samples, 'seckill_sale_expired') == {sale.key: 0}
    # A sound sale sends no invariant series (the alert fires on 0 only).
    assert series(samples, 'seckill_sale_invariant_ok') == {}
    assert series(samples, 'seckill_sale_fenced') == {}
    # Without `sales`, none of them (the module's come from the exporter script).
    assert not [s for s in m.LedgerCollector(store, r).samples() if s.name.startswith('seckill_sale_')]
    # A sale the ledger names and Redis does not have: no series.
    store.save_sale(SaleConfig('sale:{gone}', 2, created_ms=1))
    assert 'sale:{gone}' not in series(m.LedgerCollector(store, r, sales=True).samples(),
                                       'seckill_sale_remaining')
