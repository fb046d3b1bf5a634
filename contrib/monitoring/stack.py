"""Helpers shared by tests/monitoring and `make monitor` (monitor.py):
processes stopped by their own pid, the redis-server with the module among
them, Prometheus's configuration with relabel.yml and rules.yml, and its
HTTP API. Free ports are seckill.testing's (both need the seckill package
anyway: make pipeline-deps)."""

import json
import os
import subprocess
import time
import urllib.parse
import urllib.request

import redis
from seckill.testing import free_port

HERE = os.path.dirname(os.path.abspath(__file__))
RULES = os.path.join(HERE, 'rules.yml')
RELABEL = os.path.join(HERE, 'relabel.yml')
SCRIPT = os.path.join(HERE, 'seckill-exporter.lua')
DASHBOARD = os.path.join(HERE, 'grafana-dashboard.json')


def wait(pred, timeout, what, every=0.1):
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        try:
            v = pred()
            if v:
                return v
        except Exception as exc:  # noqa: BLE001 - not up yet
            last = exc
        time.sleep(every)
    raise AssertionError('timed out waiting for %s (last error: %r)' % (what, last))


def http(url, timeout=5):
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return r.read().decode()


def query(port, expr):
    url = 'http://127.0.0.1:%d/api/v1/query?query=%s' % (port, urllib.parse.quote(expr))
    reply = json.loads(http(url))
    assert reply['status'] == 'success', reply
    return reply['data']['result']


class Procs:
    """Processes this code started, stopped by their own pid (SIGTERM, then
    SIGKILL after `grace` seconds), last started first."""

    def __init__(self):
        self.procs = []

    def start(self, args, log, **kw):
        with open(log, 'ab') as f:
            p = subprocess.Popen(args, stdout=f, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, **kw)
        self.procs.append(p)
        return p

    def stop(self, grace=10):
        for p in reversed(self.procs):
            if p.poll() is None:
                p.terminate()
        for p in reversed(self.procs):
            try:
                p.wait(grace)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(5)
        self.procs = []


def start_redis(procs, module, folder, *args):
    """A redis-server with `module` on a free port, started by `procs` (its
    log redis.log in `folder`, no persistence), once it answers PING; its port."""
    port = free_port()
    procs.start(['redis-server', '--port', str(port), '--bind', '127.0.0.1', '--dir', folder, '--save', '',
                 '--appendonly', 'no', '--loadmodule', os.path.abspath(module), *args],
                os.path.join(folder, 'redis.log'))
    wait(redis.Redis(port=port).ping, 10, 'redis-server')
    return port


def prometheus_config(path, jobs, interval='1s'):
    """Writes prometheus.yml: `jobs` maps a job name to its targets
    (host:port); the job `redis` (redis_exporter with the script) gets
    relabel.yml's metric_relabel_configs. rules.yml is loaded."""
    relabel = [line for line in open(RELABEL).read().splitlines() if not line.startswith('#')]
    lines = ['global: {scrape_interval: %s, evaluation_interval: %s}' % (interval, interval),
             'rule_files: [%s]' % json.dumps(RULES),
             'scrape_configs:']
    for job, targets in jobs.items():
        lines += ['  - job_name: %s' % json.dumps(job),
                  '    static_configs: [{targets: %s}]' % json.dumps(list(targets))]
        if job == 'redis':
            lines += ['    metric_relabel_configs:'] + ['      ' + x for x in relabel]
    with open(path, 'w') as f:
        f.write('\n'.join(lines) + '\n')
    return path


def dashboard_queries(path=DASHBOARD):
    """Every panel's PromQL (its targets' expr), with the panel's title."""
    board = json.load(open(path))
    out = []
    for panel in board['panels']:
        for t in panel.get('targets', []):
            out.append((panel['title'], t['expr']))
    return out
