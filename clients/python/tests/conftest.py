"""Fixtures: real redis-server processes with the built module on free
ports, and real databases: a SQLite file and a throwaway PostgreSQL server
(Debian's `postgresql` package; run as the `postgres` user when we are
root). Every test that touches the order store runs against both (the `db`
fixture is parametrized).

The backend: `redis_server` (and `r`, `cluster`, `rc`) serve the module by
default. A test marked `both_backends` (or a file with
`pytestmark = pytest.mark.both_backends`) runs twice, `[module]` and
`[functions]`: for `functions` the servers start without the module and get
the Functions library (functions/seckill.lua) through
`seckill.library.install`, what `python -m seckill functions install` runs
(seckill.testing starts them); the client finds the backend by itself."""

from __future__ import annotations

import contextlib
import itertools
import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time

import pytest

from seckill import testing
from seckill.pipeline.reconciler import create_sale
from seckill.pipeline.store import SaleConfig, open_store
from seckill.testing import Cluster, PostgresServer, module_path

KEY = 'sale:{t}'
STREAM = 'sale:{t}:events'

_db_seq = itertools.count(1)


@pytest.fixture(scope='session')
def module():
    path = module_path()
    assert os.path.exists(path), 'build the module first (cargo build --release)'
    return path


BACKENDS = ('module', 'functions')


def pytest_configure(config):
    config.addinivalue_line('markers', 'both_backends: run the test on the module and on the '
                            'Functions library (the `backend` fixture)')


def pytest_generate_tests(metafunc):
    if 'backend' in metafunc.fixturenames and metafunc.definition.get_closest_marker('both_backends'):
        metafunc.parametrize('backend', BACKENDS, indirect=True, scope='module')


@pytest.fixture(scope='module')
def backend(request):
    """'module' (the default) or 'functions' (tests marked both_backends)."""
    return getattr(request, 'param', 'module')


def start_redis(backend, request, **kw):
    """A RedisServer serving `backend`, started (seckill.testing.start_redis:
    for 'functions' the library is loaded as `python -m seckill functions
    install` loads it)."""
    module = request.getfixturevalue('module') if backend == 'module' else None
    return testing.start_redis(backend, module=module, **kw)


@pytest.fixture
def redis_server(backend, request):
    srv = start_redis(backend, request)
    yield srv
    srv.stop()


@pytest.fixture
def r(redis_server):
    c = redis_server.client()
    yield c
    c.close()


@pytest.fixture(scope='module')
def cluster(backend, request):
    """Three masters (seckill.testing.Cluster) serving `backend`, one
    cluster per test module and backend."""
    module = request.getfixturevalue('module') if backend == 'module' else None
    c = Cluster(3, module=module, backend=backend)
    yield c
    c.stop()


@pytest.fixture
def rc(cluster):
    """A redis-py RedisCluster client of `cluster`."""
    c = cluster.client()
    yield c
    c.close()


@pytest.fixture(scope='session')
def pg_server():
    srv = PostgresServer()
    srv.start()
    yield srv
    srv.destroy()


class DB:
    """One empty database for one test: `url`, `store()`, and `outage()`
    (a context in which the database refuses work: PostgreSQL is stopped,
    the SQLite file is locked by another connection)."""

    def __init__(self, kind, url, tmp_path=None, pg=None):
        self.kind = kind
        self.url = url
        self.pg = pg
        self._stores = []

    def store(self, **kw):
        s = open_store(self.url, **kw)
        s.create_schema()
        self._stores.append(s)
        return s

    @contextlib.contextmanager
    def outage(self):
        if self.kind == 'postgres':
            self.pg.stop()
            try:
                yield
            finally:
                self.pg.start()
                for s in self._stores:
                    s.reset()  # this thread's connections; other threads' fail once and retry
        else:
            path = self.url[len('sqlite://'):].split('?')[0]
            conn = sqlite3.connect(path, isolation_level=None, timeout=5)
            conn.execute('BEGIN EXCLUSIVE')
            try:
                yield
            finally:
                conn.execute('ROLLBACK')
                conn.close()

    def close(self):
        for s in self._stores:
            s.close()


@pytest.fixture(params=['sqlite', 'postgres'])
def db(request, tmp_path):
    if request.param == 'sqlite':
        d = DB('sqlite', 'sqlite://%s' % (tmp_path / 'orders.db'))
    else:
        pg = request.getfixturevalue('pg_server')
        d = DB('postgres', pg.create_database('t%d_%d' % (os.getpid(), next(_db_seq))), pg=pg)
    yield d
    d.close()


@pytest.fixture
def store(db):
    return db.store()


def fence_supported(r):
    """Whether the server's backend has the fence (SECKILL.UNFENCE answers
    NO_SALE for a missing key; an older build: unknown command)."""
    import redis as _redis
    from seckill import Sale
    try:
        return Sale(r, '{fence-probe}:none').unfence() == 'NO_SALE'
    except _redis.ResponseError:
        return False


def make_sale(store, r, total=10, hold_ms=0, limit=1, key=KEY, stream=STREAM, **kw):
    """The pipeline's sale (create_sale: a FENCE sale where the build has
    the fence)."""
    cfg = SaleConfig(key, total, stream=stream, limit=limit, hold_ms=hold_ms or None, **kw)
    create_sale(store, r, cfg, fence=fence_supported(r))
    return store.load_sale(key)


def orders_for(db, r, n, total=None, hold_ms=0, limit=1):
    """A sale with n reservations o0..o(n-1) (users u0..), their orders
    written by a worker: (store, sale, worker)."""
    from seckill import Sale
    from seckill.pipeline.worker import Worker
    store = db.store()
    cfg = make_sale(store, r, total=total or n, hold_ms=hold_ms, limit=limit)
    sale = Sale(r, KEY)
    for i in range(n):
        assert sale.reserve('u%d' % i, reqid='o%d' % i).status == 'RESERVED'
    w = Worker(r, store, [cfg], consumer='w')
    w.drain()
    return store, sale, w


class Procs:
    """Worker processes (python -m seckill worker) started by a test; all
    are killed at the end of it."""

    def __init__(self, tmp_path):
        self.tmp_path = tmp_path
        self.procs = []

    def worker(self, redis_url, db_url, consumer, fault=None, claim_idle_ms=5000, sale=KEY,
               extra=()):
        env = dict(os.environ)
        env.pop('SECKILL_FAULT', None)
        if fault:
            env['SECKILL_FAULT'] = fault
        log = open(self.tmp_path / ('worker-%s.log' % consumer), 'ab')
        cmd = [sys.executable, '-m', 'seckill', '--redis', redis_url, '--db', db_url, 'worker',
               '--sale', sale, '--consumer', consumer, '--claim-idle-ms', str(claim_idle_ms),
               '--block-ms', '100', *extra]
        p = subprocess.Popen(cmd, stdout=log, stderr=log, env=env)
        log.close()
        self.procs.append(p)
        return p

    def log(self, consumer):
        p = self.tmp_path / ('worker-%s.log' % consumer)
        return p.read_text() if p.exists() else ''

    def stop_all(self):
        for p in self.procs:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in self.procs:
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()


@pytest.fixture
def procs(tmp_path):
    p = Procs(tmp_path)
    yield p
    p.stop_all()


def wait_for(pred, timeout=15.0, interval=0.05, what='condition'):
    deadline = time.monotonic() + timeout
    while True:
        v = pred()
        if v:
            return v
        if time.monotonic() > deadline:
            raise AssertionError('timed out waiting for %s' % what)
        time.sleep(interval)


class WorkerThread:
    """An in-process Worker on a thread (for tests that do not kill it)."""

    def __init__(self, worker):
        self.worker = worker
        self.error = None
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self):
        try:
            self.worker.run()
        except BaseException as exc:  # pragma: no cover - reported by stop()
            self.error = exc

    def __enter__(self):
        self.thread.start()
        return self.worker

    def __exit__(self, *exc):
        self.worker.stop()
        self.thread.join(15)
        assert not self.thread.is_alive()
        if self.error is not None and exc[0] is None:
            raise self.error
