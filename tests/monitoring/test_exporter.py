"""contrib/monitoring for real: Debian's redis_exporter 1.45 runs
seckill-exporter.lua against a redis-server with the module, 1M plain keys
(DEBUG POPULATE) and 1,000 sales, each with a stream and a consumer group;
Debian's Prometheus 2.42 scrapes it through relabel.yml with rules.yml
loaded. Prints the script's server time per scrape (INFO commandstats).
Every server on a free port, stopped by its pid; every wait bounded."""

import json
import os
import shutil
import socket
import subprocess
import tempfile
import time
import urllib.parse
import urllib.request

import pytest
import redis

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CONTRIB = os.path.join(ROOT, 'contrib', 'monitoring')
MODULE = os.environ.get('SECKILL_MODULE', os.path.join(ROOT, 'target', 'release', 'libredis_seckill.so'))
SALES = 1000
FILLER = 1000000


def free_port():
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        return s.getsockname()[1]


def wait(pred, timeout, what):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            v = pred()
            if v:
                return v
        except Exception:  # noqa: BLE001 - not up yet
            pass
        time.sleep(0.1)
    raise AssertionError('timed out waiting for ' + what)


def http(url):
    with urllib.request.urlopen(url, timeout=5) as r:
        return r.read().decode()


class Procs:
    def __init__(self):
        self.procs = []

    def start(self, args, log):
        p = subprocess.Popen(args, stdout=open(log, 'w'), stderr=subprocess.STDOUT)
        self.procs.append(p)
        return p

    def stop(self):
        for p in reversed(self.procs):
            p.terminate()
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(5)


@pytest.fixture(scope='module')
def stack():
    for tool in ('redis-server', 'prometheus-redis-exporter', 'prometheus'):
        assert shutil.which(tool), tool + ' is not installed (make monitoring-deps)'
    tmp = tempfile.mkdtemp(prefix='seckill-monitoring-')
    procs = Procs()
    rport, eport, pport = free_port(), free_port(), free_port()
    try:
        procs.start(['redis-server', '--port', str(rport), '--dir', tmp, '--save', '', '--appendonly', 'no',
                     '--enable-debug-command', 'yes', '--loadmodule', MODULE], os.path.join(tmp, 'redis.log'))
        r = redis.Redis(port=rport, decode_responses=True)
        wait(r.ping, 10, 'redis-server')
        r.execute_command('DEBUG', 'POPULATE', FILLER, 'filler')
        p = r.pipeline(transaction=False)
        for i in range(SALES):
            key = 'sale:{%d}' % i
            p.execute_command('SECKILL.INIT', key, 100, 'STREAM', key + ':events')
            p.execute_command('XGROUP', 'CREATE', key + ':events', 'workers', '$', 'MKSTREAM')
            p.execute_command('SECKILL.RESERVE', key, 'u1')
        p.execute()
        procs.start(['prometheus-redis-exporter', '-redis.addr', 'redis://127.0.0.1:%d' % rport,
                     '-web.listen-address', '127.0.0.1:%d' % eport,
                     '-script', os.path.join(CONTRIB, 'seckill-exporter.lua')], os.path.join(tmp, 'exporter.log'))
        wait(lambda: 'redis_up 1' in http('http://127.0.0.1:%d/metrics' % eport), 20, 'redis_exporter')
        relabel = open(os.path.join(CONTRIB, 'relabel.yml')).read()
        config = os.path.join(tmp, 'prometheus.yml')
        with open(config, 'w') as f:
            f.write('global: {scrape_interval: 1s, evaluation_interval: 1s}\n'
                    'rule_files: [%s]\n'
                    'scrape_configs:\n'
                    '  - job_name: redis\n'
                    '    static_configs: [{targets: ["127.0.0.1:%d"]}]\n'
                    '    metric_relabel_configs:\n' % (json.dumps(os.path.join(CONTRIB, 'rules.yml')), eport))
            f.write(''.join('      ' + line + '\n' for line in relabel.splitlines() if not line.startswith('#')))
        procs.start(['prometheus', '--config.file', config, '--storage.tsdb.path', os.path.join(tmp, 'tsdb'),
                     '--web.listen-address', '127.0.0.1:%d' % pport], os.path.join(tmp, 'prometheus.log'))
        yield {'redis': r, 'exporter': eport, 'prometheus': pport}
    finally:
        procs.stop()
        shutil.rmtree(tmp, ignore_errors=True)


def query(port, expr):
    url = 'http://127.0.0.1:%d/api/v1/query?query=%s' % (port, urllib.parse.quote(expr))
    reply = json.loads(http(url))
    assert reply['status'] == 'success', reply
    return reply['data']['result']


def test_exporter_reports_every_sale_and_its_backlog(stack):
    text = http('http://127.0.0.1:%d/metrics' % stack['exporter'])
    lines = [line for line in text.splitlines() if line.startswith('redis_script_values{')]
    remaining = [line for line in lines if 'seckill_sale_remaining;' in line]
    assert len(remaining) == SALES
    assert 'redis_script_values{key="seckill_sale_remaining;sale=sale:{7}"} 99' in text
    assert 'redis_script_values{key="seckill_stream_lag;sale=sale:{7};group=workers"} 1' in text
    assert 'redis_script_values{key="seckill_reserve_reserved"} %d' % SALES in text
    assert 'redis_script_values{key="seckill_exporter_sales"} %d' % SALES in text


def test_scrape_cost_at_a_million_keys(stack):
    r = stack['redis']
    r.execute_command('CONFIG', 'RESETSTAT')
    for _ in range(5):
        http('http://127.0.0.1:%d/metrics' % stack['exporter'])
    stats = r.info('commandstats')
    calls = {k: v for k, v in stats.items() if k in ('cmdstat_eval', 'cmdstat_evalsha')}
    assert calls, stats.keys()
    usec = sum(v['usec'] for v in calls.values())
    n = sum(v['calls'] for v in calls.values())
    assert n >= 5
    print('\nseckill-exporter.lua at %d keys and %d sales (each with a stream and a group): '
          '%.0f us of server time per scrape (%d scrapes, INFO commandstats)' % (r.dbsize(), SALES, usec / n, n))


def test_prometheus_gets_seckill_series(stack):
    port = stack['prometheus']
    got = wait(lambda: len(query(port, 'seckill_sale_remaining')) == SALES, 30, 'seckill_sale_remaining in Prometheus')
    assert got
    one = query(port, 'seckill_sale_remaining{sale="sale:{7}"}')
    assert [s['value'][1] for s in one] == ['99']
    assert 'key' not in one[0]['metric']
    lag = query(port, 'seckill_stream_lag{sale="sale:{7}",group="workers"}')
    assert [s['value'][1] for s in lag] == ['1']
    assert query(port, 'seckill_reserve_reserved')[0]['value'][1] == str(SALES)
    rules = json.loads(http('http://127.0.0.1:%d/api/v1/rules' % port))['data']['groups']
    assert sum(len(g['rules']) for g in rules) == 8
    # A healthy sale fires nothing.
    assert query(port, 'ALERTS{alertstate="firing"}') == []
