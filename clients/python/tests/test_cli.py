"""The command line: init, worker, and the demo end to end (a small sale)."""

import json
import re
import socket
import subprocess
import sys

import pytest

from conftest import fence_supported
from seckill import Sale


def cli(*args, timeout=120):
    return subprocess.run([sys.executable, '-m', 'seckill', *args], capture_output=True,
                          text=True, timeout=timeout)


def test_init_and_worker(db, redis_server, r):
    base = ['--redis', redis_server.url, '--db', db.url]
    res = cli(*base, 'init', '--sale', 'sale:{c}', '--total', '5', '--stream', 'sale:{c}:ev',
              '--limit', '2', '--hold-ms', '60000', '--ttl', '3600')
    assert (res.returncode, res.stdout.strip()) == (0, 'OK'), res.stderr
    assert cli(*base, 'init', '--sale', 'sale:{c}', '--total', '5').stdout.strip() == 'EXISTS'
    assert 3500 < r.ttl('sale:{c}') <= 3600
    sale = Sale(r, 'sale:{c}')
    for i in range(3):
        sale.reserve('u%d' % i, reqid='o%d' % i)
    res = cli(*base, 'worker', '--sale', 'sale:{c}', '--seconds', '1.5', '--consumer', 'c1')
    assert res.returncode == 0, res.stderr
    assert '"inserted": 3' in res.stdout
    store = db.store()
    cfg = store.load_sale('sale:{c}')
    assert (cfg.total, cfg.limit, cfg.hold_ms, cfg.stream) == (5, 2, 60000, 'sale:{c}:ev')
    assert [o.state for o in store.orders('sale:{c}')] == ['UNPAID'] * 3
    assert cli(*base, 'worker', '--sale', 'sale:{nope}').returncode == 2
    # pay: exit 0 PAID, 1 REFUND (an id Redis never knew: lost)
    res = cli(*base, 'pay', '--sale', 'sale:{c}', '--rid', 'o0', '--ref', 'p0', '--json')
    assert (res.returncode, json.loads(res.stdout)['outcome']) == (0, 'PAID'), res.stderr
    res = cli(*base, 'pay', '--sale', 'sale:{c}', '--rid', 'nope', '--ref', 'p9')
    assert (res.returncode, res.stdout.strip()) == (1, 'nope REFUND (lost)'), res.stderr
    assert store.order('o0').state == 'PAID' and sale.get('o0')['state'] == 'confirmed'


def test_init_makes_fence_sales(db, redis_server, r):
    if not fence_supported(r):
        pytest.skip('this build has no SECKILL.UNFENCE (the fence)')
    base = ['--redis', redis_server.url, '--db', db.url]
    assert cli(*base, 'init', '--sale', 'sale:{f}', '--total', '5').returncode == 0
    assert cli(*base, 'init', '--sale', 'sale:{n}', '--total', '5', '--no-fence').returncode == 0
    assert Sale(r, 'sale:{f}').info()['fence'] == 'clear'
    assert 'fence' not in Sale(r, 'sale:{n}').info()


def closed(port):
    with socket.socket() as s:
        s.settimeout(0.5)
        return s.connect_ex(('127.0.0.1', port)) != 0


@pytest.mark.parametrize('kind', ['sqlite', 'postgres'])
def test_demo_small_sale(kind, tmp_path):
    out = tmp_path / 'demo'
    res = cli('demo', '--db', kind, '--buyers', '400', '--stock', '25', '--hold-ms', '1000',
              '--duration', '5', '--out', str(out), '--no-progress', timeout=240)
    assert res.returncode == 0, res.stdout + res.stderr
    assert 'ledger check: all 8 checks passed' in res.stdout
    assert '[FAIL]' not in res.stdout
    assert (out / 'REPORT.md').exists() and (out / 'sale.png').stat().st_size > 10_000
    assert 'worker w1 killed' in res.stdout and 'worker w1 restarted' in res.stdout
    # nothing left running
    port = int(re.search(r'redis-server on port (\d+)', res.stdout).group(1))
    assert closed(port)
    pg = re.search(r'PostgreSQL on port (\d+)', res.stdout)
    if kind == 'postgres':
        assert pg and closed(int(pg.group(1)))


def test_init_refuses_a_sale_redis_lost(db, redis_server, r):
    base = ['--redis', redis_server.url, '--db', db.url]
    assert cli(*base, 'init', '--sale', 'sale:{c}', '--total', '5').returncode == 0
    r.flushall()
    res = cli(*base, 'init', '--sale', 'sale:{c}', '--total', '5')
    assert res.returncode == 2 and 'rebuild' in res.stderr
    assert cli(*base, 'rebuild', '--sale', 'sale:{c}').returncode == 0
    assert Sale(r, 'sale:{c}').info()['total'] == 5
