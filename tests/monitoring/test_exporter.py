"""contrib/monitoring for real: Debian's redis_exporter 1.45 runs
seckill-exporter.lua against a redis-server with the module, 1M plain keys
(DEBUG POPULATE) and 1,000 sales, each with a stream and a consumer group;
the pipeline's endpoints run as `python -m seckill worker --metrics-port`
and `python -m seckill metrics` over a SQLite ledger of two more sales;
Debian's Prometheus 2.42 scrapes all three through relabel.yml with
rules.yml loaded (1 s scrapes and evaluations). Every query of the Grafana
dashboard must return a series; the oversell alert stays silent on the clean
ledger and fires once the ledger is made to hold more PAID units than the
stock. Prints the script's server time per scrape (INFO commandstats).
Every server on a free port, stopped by its pid; every wait bounded."""

import json
import os
import shutil
import sqlite3
import statistics
import sys
import tempfile
import time

import pytest
import redis

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CONTRIB = os.path.join(ROOT, 'contrib', 'monitoring')
sys.path.insert(0, CONTRIB)
sys.path.insert(0, os.path.join(ROOT, 'clients', 'python'))

from stack import (Procs, dashboard_queries, free_port, http, prometheus_config,  # noqa: E402
                   query, start_redis, wait, SCRIPT)

# Another script to measure (e.g. an older one: the other tests may fail)
SCRIPT = os.path.abspath(os.environ.get('SECKILL_EXPORTER_SCRIPT', SCRIPT))
MODULE = os.path.abspath(os.environ.get('SECKILL_MODULE', os.path.join(ROOT, 'target', 'release', 'libredis_seckill.so')))
SALES = 1000
FILLER = 1000000
SHOP = ['shop:{1}', 'shop:{2}']      # the pipeline's sales (in the ledger too)
SHOP_STOCK = 5
ALL_SALES = SALES + len(SHOP)


@pytest.fixture(scope='module')
def stack():
    for tool in ('redis-server', 'prometheus-redis-exporter', 'prometheus'):
        assert shutil.which(tool), tool + ' is not installed (make monitoring-deps)'
    from seckill.pipeline.payment import pay
    from seckill.pipeline.reconciler import create_sale
    from seckill.pipeline.store import SaleConfig, open_store
    from seckill.sale import Sale
    tmp = tempfile.mkdtemp(prefix='seckill-monitoring-')
    procs = Procs()
    eport, pport, wport, mport = (free_port() for _ in range(4))
    try:
        rport = start_redis(procs, MODULE, tmp, '--enable-debug-command', 'yes')
        r = redis.Redis(port=rport, decode_responses=True)
        r.execute_command('DEBUG', 'POPULATE', FILLER, 'filler')
        p = r.pipeline(transaction=False)
        for i in range(SALES):
            key = 'sale:{%d}' % i
            p.execute_command('SECKILL.INIT', key, 100 + i % 900, 'LIMIT', 5, 'STREAM', key + ':events')
            p.execute_command('XGROUP', 'CREATE', key + ':events', 'workers', '$', 'MKSTREAM')
            p.execute_command('SECKILL.RESERVE', key, 'u1', 'QTY', 1 + i % 5)
        p.execute()

        # The pipeline: two sales in a SQLite ledger, a worker, the ledger's endpoint.
        url = 'redis://127.0.0.1:%d/0' % rport
        db = os.path.join(tmp, 'orders.db')
        store = open_store('sqlite://' + db)
        store.create_schema()
        for key in SHOP:
            create_sale(store, r, SaleConfig(key, SHOP_STOCK, stream=key + ':events', hold_ms=600000,
                                             created_ms=1))
        rids = [Sale(r, key).reserve('buyer-%d' % n, reqid='%s-o%d' % (key, n)).rid
                for key in SHOP for n in range(3)]
        cli = [sys.executable, '-m', 'seckill', '--redis', url, '--db', 'sqlite://' + db, '--wait-replicas', '0']
        procs.start(cli + ['worker', '--block-ms', '200', '--metrics-port', str(wport)],
                    os.path.join(tmp, 'worker.log'))
        procs.start(cli + ['metrics', '--port', str(mport)], os.path.join(tmp, 'metrics.log'))
        wait(lambda: len(store.orders(SHOP[0])) == 3 and len(store.orders(SHOP[1])) == 3, 30,
             'the worker to write the orders')
        from seckill.durability import OFF
        assert pay(store, Sale(r, SHOP[0]), rids[0], 'ref-0', durability=OFF).outcome == 'PAID'

        procs.start(['prometheus-redis-exporter', '-redis.addr', 'redis://127.0.0.1:%d' % rport,
                     '-web.listen-address', '127.0.0.1:%d' % eport, '-script', SCRIPT],
                    os.path.join(tmp, 'exporter.log'))
        wait(lambda: 'redis_up 1' in http('http://127.0.0.1:%d/metrics' % eport), 20, 'redis_exporter')
        config = prometheus_config(os.path.join(tmp, 'prometheus.yml'), {
            'redis': ['127.0.0.1:%d' % eport],
            'seckill-worker': ['127.0.0.1:%d' % wport],
            'seckill-pipeline': ['127.0.0.1:%d' % mport]})
        procs.start(['prometheus', '--config.file', config, '--storage.tsdb.path', os.path.join(tmp, 'tsdb'),
                     '--web.listen-address', '127.0.0.1:%d' % pport], os.path.join(tmp, 'prometheus.log'))
        yield {'redis': r, 'exporter': eport, 'prometheus': pport, 'worker': wport, 'metrics': mport,
               'db': db, 'store': store, 'tmp': tmp}
    finally:
        procs.stop()
        shutil.rmtree(tmp, ignore_errors=True)


def test_exporter_reports_every_sale(stack):
    text = http('http://127.0.0.1:%d/metrics' % stack['exporter'])
    lines = [line for line in text.splitlines() if line.startswith('redis_script_values{')]
    remaining = [line for line in lines if 'seckill_sale_remaining;' in line]
    assert len(remaining) == ALL_SALES
    # sale:{7}: total 107, 3 units reserved
    assert 'redis_script_values{key="seckill_sale_remaining;sale=sale:{7}"} 104' in text
    assert 'redis_script_values{key="seckill_sale_pending;sale=sale:{7}"} 3' in text
    assert 'redis_script_values{key="seckill_sale_confirmed;sale=shop:{1}"} 1' in text
    assert 'redis_script_values{key="seckill_reserve_reserved"} %d' % (SALES + 6) in text
    assert 'redis_script_values{key="seckill_exporter_sales"} %d' % ALL_SALES in text
    assert 'redis_script_values{key="seckill_exporter_invariant_broken"} 0' in text
    assert 'invariant_ok;' not in text      # sent only for a broken sale


def test_scrape_cost_at_a_million_keys(stack):
    """The script's server time per scrape: EVAL's usec in INFO commandstats,
    one scrape at a time; the minimum and the median of 20 (the machine is
    shared: the median carries its load)."""
    r = stack['redis']
    per_scrape = []
    for _ in range(20):
        r.execute_command('CONFIG', 'RESETSTAT')
        http('http://127.0.0.1:%d/metrics' % stack['exporter'])
        stats = r.info('commandstats')
        calls = [v for k, v in stats.items() if k in ('cmdstat_eval', 'cmdstat_evalsha')]
        assert calls and sum(v['calls'] for v in calls) >= 1, stats.keys()
        per_scrape.append(sum(v['usec'] for v in calls) / sum(v['calls'] for v in calls))
    print('\n%s at %d keys and %d sales: %.0f us of server time per scrape (min of 20; '
          'median %.0f us; INFO commandstats; load average %s)'
          % (os.path.basename(SCRIPT), r.dbsize(), ALL_SALES, min(per_scrape), statistics.median(per_scrape),
             open('/proc/loadavg').read().split()[0]))


def test_pipeline_endpoints(stack):
    worker = http('http://127.0.0.1:%d/metrics' % stack['worker'])
    assert 'seckill_worker_entries_total{consumer=' in worker
    assert 'seckill_worker_stream_lag{group="orders",sale="shop:{1}"} 0.0' in worker
    ledger = http('http://127.0.0.1:%d/metrics' % stack['metrics'])
    assert 'seckill_ledger_units_left{sale="shop:{1}"} 2.0' in ledger
    assert 'seckill_ledger_orders{sale="shop:{1}",state="PAID"} 1.0' in ledger
    assert 'seckill_pipeline_drift_units{kind="confirmed",sale="shop:{1}"} 0.0' in ledger
    assert 'seckill_pipeline_stream_lag{group="orders",sale="shop:{2}"} 0.0' in ledger


def test_prometheus_gets_seckill_series(stack):
    port = stack['prometheus']
    wait(lambda: len(query(port, 'seckill_sale_remaining')) == ALL_SALES, 30, 'seckill_sale_remaining in Prometheus')
    one = query(port, 'seckill_sale_remaining{sale="sale:{7}"}')
    assert [s['value'][1] for s in one] == ['104']
    assert 'key' not in one[0]['metric']
    assert query(port, 'seckill_reserve_reserved')[0]['value'][1] == str(SALES + 6)
    wait(lambda: query(port, 'seckill_ledger_units_left{sale="shop:{2}"}'), 30, 'the ledger in Prometheus')
    rules = json.loads(http('http://127.0.0.1:%d/api/v1/rules' % port))['data']['groups']
    assert sum(len(g['rules']) for g in rules) == 15
    assert all(rule['health'] == 'ok' for g in rules for rule in g['rules']), rules


def test_every_dashboard_query_returns_series(stack):
    port, r = stack['prometheus'], stack['redis']
    queries = dashboard_queries()
    assert len(queries) >= 15
    missing = queries
    deadline = time.monotonic() + 60     # rates need two samples of every series
    n = 0
    while missing and time.monotonic() < deadline:
        for _ in range(20):              # a trickle of buyers: RESERVE's rates and server time
            r.execute_command('SECKILL.RESERVE', 'sale:{%d}' % (n % SALES), 'trickle-%d' % n)
            n += 1
        missing = [(title, expr) for title, expr in missing if not query(port, expr)]
        if missing:
            time.sleep(1)
    assert not missing, 'dashboard queries without a series: %r' % missing
    print('\n%d dashboard queries, each with a series' % len(queries))


def test_oversell_alert_silent_on_the_clean_ledger_fires_on_an_oversold_one(stack):
    port = stack['prometheus']
    # the clean run: at least 5 evaluations of the ledger's series, nothing firing
    wait(lambda: float(query(port, 'count_over_time(seckill_ledger_units_left{sale="shop:{2}"}[1m])')[0]
                       ['value'][1]) >= 5, 30, 'five samples of the clean ledger')
    assert query(port, 'ALERTS{alertname="SeckillOversold"}') == []
    assert query(port, 'ALERTS{alertstate="firing"}') == []
    # made to oversell: shop:{2} (5 units, 3 held) gets 4 PAID orders Redis never sold
    now = int(time.time() * 1000)
    with sqlite3.connect(stack['db'], timeout=10) as conn:
        conn.executemany("INSERT INTO seckill_orders (reservation_id, sale_key, user_id, qty, state, "
                         "created_ms, updated_ms) VALUES (?, 'shop:{2}', ?, 1, 'PAID', ?, ?)",
                         [('oversold-%d' % i, 'ghost-%d' % i, now, now) for i in range(4)])
    firing = wait(lambda: query(port, 'ALERTS{alertname="SeckillOversold",alertstate="firing"}'), 30,
                  'SeckillOversold to fire')
    assert [(a['metric']['sale'], a['metric']['severity']) for a in firing] == [('shop:{2}', 'page')]
    assert query(port, 'seckill_ledger_units_left{sale="shop:{2}"}')[0]['value'][1] == '-2'
