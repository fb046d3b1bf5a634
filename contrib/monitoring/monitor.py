"""make monitor: the demo's flash sale (python -m seckill demo) watched live.

Starts, each on a free port (never 6379): a redis-server with the module,
Debian's redis_exporter with seckill-exporter.lua, the ledger's endpoint
(python -m seckill metrics), and Prometheus with relabel.yml and rules.yml;
the demo runs against that redis-server and its workers serve their
metrics too. Prints the Prometheus page to open; everything stays up until
Ctrl-C (or SIGTERM), then each process this script started is stopped by
its pid. --screenshot PNG takes a headless-Chromium picture of Prometheus's
graph page once the sale is over; --exit stops right after.
"""

import argparse
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
import urllib.parse

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)

from stack import Procs, SCRIPT, free_port, http, prometheus_config, query, start_redis, wait  # noqa: E402

GRAPHS = [('{__name__=~"seckill_sale_(remaining|pending|confirmed)",sale="sale:{demo}"}', '1m'),
          ('sum by (state) (seckill_ledger_orders)', '1m')]


def graph_url(port, graphs=GRAPHS):
    q = {}
    for i, (expr, span) in enumerate(graphs):
        q['g%d.expr' % i] = expr
        q['g%d.tab' % i] = '0'
        q['g%d.range_input' % i] = span
    return 'http://127.0.0.1:%d/graph?%s' % (port, urllib.parse.urlencode(q))


def screenshot(url, path, size='1300,1640'):
    chromium = shutil.which('chromium') or shutil.which('chromium-browser')
    if not chromium:
        raise SystemExit('no chromium: apt-get install -y chromium')
    subprocess.run([chromium, '--headless', '--no-sandbox', '--disable-gpu', '--hide-scrollbars',
                    '--virtual-time-budget=10000', '--window-size=' + size, '--screenshot=' + path, url],
                   check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=120)
    print('screenshot: %s' % path, flush=True)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument('--module', default=os.path.join(ROOT, 'target', 'release', 'libredis_seckill.so'))
    p.add_argument('--out', default='monitor-out', help='logs, the ledger and the data (default: %(default)s)')
    p.add_argument('--buyers', type=int, default=5000)
    p.add_argument('--stock', type=int, default=200)
    p.add_argument('--duration', type=float, default=30.0)
    p.add_argument('--screenshot', metavar='PNG', help="Prometheus's graph page once the sale is over")
    p.add_argument('--exit', action='store_true', help='stop once the demo (and the screenshot) are done')
    a = p.parse_args(argv)
    for tool in ('redis-server', 'prometheus-redis-exporter', 'prometheus'):
        if not shutil.which(tool):
            raise SystemExit(tool + ' is not installed (make monitoring-deps)')
    out = os.path.abspath(a.out)
    shutil.rmtree(out, ignore_errors=True)
    os.makedirs(out)
    db = os.path.join(out, 'demo', 'orders.db')
    eport, pport, mport, w1, w2 = (free_port() for _ in range(5))
    procs = Procs()
    stop = []
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.append(1))
    try:
        rport = start_redis(procs, a.module, out)
        url = 'redis://127.0.0.1:%d/0' % rport
        procs.start(['prometheus-redis-exporter', '-redis.addr', 'redis://127.0.0.1:%d' % rport,
                     '-web.listen-address', '127.0.0.1:%d' % eport, '-script', SCRIPT],
                    os.path.join(out, 'exporter.log'))
        config = prometheus_config(os.path.join(out, 'prometheus.yml'), {
            'redis': ['127.0.0.1:%d' % eport],
            'seckill-worker': ['127.0.0.1:%d' % w1, '127.0.0.1:%d' % w2],
            'seckill-pipeline': ['127.0.0.1:%d' % mport]})
        procs.start(['prometheus', '--config.file', config, '--storage.tsdb.path', os.path.join(out, 'tsdb'),
                     '--web.listen-address', '127.0.0.1:%d' % pport], os.path.join(out, 'prometheus.log'))
        # ready, then its first scrapes (it applies its targets after some seconds)
        wait(lambda: http('http://127.0.0.1:%d/-/ready' % pport), 30, 'Prometheus')
        wait(lambda: query(pport, 'up{job="redis"} == 1'), 30, "Prometheus's first scrape", every=0.5)
        print('redis-server on port %d, redis_exporter on %d, ledger metrics on %d, workers\' on %d and %d'
              % (rport, eport, mport, w1, w2))
        print('Prometheus: %s' % graph_url(pport), flush=True)
        demo = procs.start([sys.executable, '-m', 'seckill', 'demo', '--redis', url, '--out',
                            os.path.join(out, 'demo'), '--no-progress', '--buyers', str(a.buyers),
                            '--stock', str(a.stock), '--duration', str(a.duration),
                            '--worker-metrics-port', str(w1), '--worker-metrics-port', str(w2)],
                           os.path.join(out, 'demo.log'))

        def ledger_ready():
            with sqlite3.connect(db, timeout=5) as conn:
                return conn.execute('SELECT COUNT(*) FROM seckill_sales').fetchone()[0]
        wait(ledger_ready, 60, "the demo's ledger", every=0.2)
        procs.start([sys.executable, '-m', 'seckill', '--redis', url, '--db', 'sqlite://' + db, 'metrics',
                     '--port', str(mport)], os.path.join(out, 'metrics.log'))
        print('the sale is on (%.0f s); its log: %s' % (a.duration, os.path.join(out, 'demo.log')), flush=True)
        while demo.poll() is None and not stop:
            time.sleep(0.5)
        if demo.returncode is not None:
            print('the demo ended (exit %d):' % demo.returncode)
            print(open(os.path.join(out, 'demo.log')).read().strip()[-1500:], flush=True)
        if a.screenshot and not stop:
            time.sleep(3)      # the last scrapes of the settled ledger
            firing = query(pport, 'ALERTS{alertstate="firing"}')
            print('alerts firing: %s' % (', '.join(sorted({x['metric']['alertname'] for x in firing})) or 'none'))
            screenshot(graph_url(pport), os.path.abspath(a.screenshot))
        if not a.exit:
            print('Prometheus stays up: %s  (Ctrl-C stops everything)' % graph_url(pport), flush=True)
            while not stop:
                time.sleep(0.5)
    finally:
        procs.stop()
        print('stopped', flush=True)
    return 0


if __name__ == '__main__':
    sys.exit(main())
