"""Throwaway local servers for `python -m seckill demo`, the tests and the
benches: redis-server with the module (or with the Functions library:
`start_redis('functions')`), redis-sentinel, and a PostgreSQL cluster in a
temporary folder. All listen on 127.0.0.1 on a free port (`free_port`,
never 6379) and are stopped by `stop()`, by pid. Nothing a shop's
application needs.

PostgreSQL refuses to run as root: when we are root, initdb and pg_ctl run
as the `postgres` user that Debian's package creates (runuser), in a folder
owned by it.
"""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from typing import Any, List, Optional, Sequence

from ..library import install
from ..plain.durability import online_replicas

_REPO_MODULE = os.path.join('target', 'release', 'libredis_seckill.so')


def _bindable(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind(('127.0.0.1', port))
        except OSError:
            return False
    return True


def free_port(cluster_bus: bool = False) -> int:
    """A TCP port on 127.0.0.1 nobody listens on now (the kernel's pick;
    never 6379 or 5432). `cluster_bus`: port + 10000 is free too (a cluster
    node listens there), so the port is below 55536."""
    while True:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            s.bind(('127.0.0.1', 0))
            port = s.getsockname()[1]
        if port in (6379, 5432):
            continue
        if not cluster_bus or (port + 10000 <= 65535 and _bindable(port + 10000)):
            return port


def module_path() -> str:
    """The built module: $SECKILL_MODULE, else target/release in the
    repository this package sits in."""
    env = os.environ.get('SECKILL_MODULE')
    if env:
        return env
    here = os.path.dirname(os.path.abspath(__file__))
    for _ in range(6):
        cand = os.path.join(here, _REPO_MODULE)
        if os.path.exists(cand):
            return cand
        here = os.path.dirname(here)
    raise FileNotFoundError('libredis_seckill.so not found: build it (cargo build --release) '
                            'or set SECKILL_MODULE')


def _wait(pred, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            if pred():
                return
        except Exception:
            pass
        if time.monotonic() > deadline:
            raise TimeoutError(what)
        time.sleep(0.02)


class RedisServer:
    """redis-server with the seckill module, no persistence, in its own
    temporary folder. `replicaof` is another RedisServer."""

    def __init__(self, module: Optional[str] = None, port: Optional[int] = None,
                 replicaof: Optional['RedisServer'] = None, args: Sequence[str] = (),
                 binary: str = 'redis-server', load_module: bool = True):
        # Absolute: redis-server changes into --dir before it loads the module.
        # load_module=False: a server without it (the Functions library's).
        self.module = os.path.abspath(module or module_path()) if load_module else None
        self.port = port or free_port()
        self.replicaof = replicaof
        self.args = list(args)
        self.binary = binary
        self.dir = tempfile.mkdtemp(prefix='seckill-redis-')
        self.proc: Optional[subprocess.Popen] = None

    @property
    def url(self) -> str:
        return 'redis://127.0.0.1:%d/0' % self.port

    @property
    def log(self) -> str:
        return os.path.join(self.dir, 'redis.log')

    def start(self) -> 'RedisServer':
        cmd = [self.binary, '--port', str(self.port), '--bind', '127.0.0.1',
               *(['--loadmodule', self.module] if self.module else []),
               '--dir', self.dir, '--logfile', self.log,
               '--save', '', '--appendonly', 'no', '--daemonize', 'no',
               '--repl-diskless-sync-delay', '0', '--enable-debug-command', 'local']
        if self.replicaof is not None:
            cmd += ['--replicaof', '127.0.0.1', str(self.replicaof.port)]
        cmd += self.args
        return self._launch(cmd, 'redis-server on port %d did not start (%s)'
                            % (self.port, self.log))

    def _launch(self, cmd: List[str], what: str) -> 'RedisServer':
        """Runs `cmd`, then waits until the port answers PING."""
        self.proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                     start_new_session=True)
        c = self.client()
        try:
            _wait(lambda: c.ping(), 10, what)
        finally:
            c.close()
        return self

    def client(self, **kw: Any):
        import redis
        kw.setdefault('decode_responses', True)
        kw.setdefault('socket_timeout', 10)
        return redis.Redis(host='127.0.0.1', port=self.port, **kw)

    def wait_synced(self, timeout: float = 10) -> None:
        """For a replica: until its link to the master is up."""
        c = self.client()
        try:
            _wait(lambda: c.info('replication').get('master_link_status') == 'up', timeout,
                  'replica on port %d did not sync' % self.port)
        finally:
            c.close()

    def wait_replicas(self, count: int, timeout: float = 10) -> None:
        """For a master: until it reports `count` replicas online. A replica's
        link is up (wait_synced) a moment before its master marks it online,
        and WAIT and Durability('auto') count what the master reports."""
        c = self.client()
        try:
            _wait(lambda: online_replicas(c.info('replication')) >= count, timeout,
                  'master on port %d did not report %d replicas online' % (self.port, count))
        finally:
            c.close()

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def kill(self) -> None:
        """SIGKILL: what a crash looks like (nothing saved, nothing flushed)."""
        if self.alive():
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(10)

    def restart(self) -> 'RedisServer':
        """SIGKILL, then the same port and folder again: what was saved
        (SAVE writes dump.rdb there) is loaded."""
        self.kill()
        return self.start()

    def stop(self) -> None:
        if self.alive():
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.kill()
        shutil.rmtree(self.dir, ignore_errors=True)

    def __enter__(self) -> 'RedisServer':
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()


def install_library(srv: RedisServer) -> None:
    """Loads the Functions library into `srv`, as `python -m seckill
    functions install` does."""
    c = srv.client()
    try:
        action, message = install(c)
        if action != 'load':
            raise RuntimeError('the library was not loaded into port %d: %s' % (srv.port, message))
    finally:
        c.close()


def start_redis(backend: str = 'module', module: Optional[str] = None, **kw: Any) -> RedisServer:
    """A RedisServer serving `backend`, started: 'module' loads `module`
    (by default the built one), 'functions' starts without it and loads the
    library. `kw`: RedisServer's other arguments."""
    if backend == 'functions':
        srv = RedisServer(load_module=False, **kw).start()
        install_library(srv)
        return srv
    return RedisServer(module=module, **kw).start()


class SentinelServer(RedisServer):
    """redis-sentinel (Debian's package) watching one master as `service`,
    in its own temporary folder (Sentinel rewrites its config file).
    `down_after_ms`: how long the master may be silent before it is judged
    down; `failover_timeout_ms` bounds a failover's steps. client(), kill()
    and stop() are RedisServer's."""

    def __init__(self, master: RedisServer, service: str = 'seckill', quorum: int = 2,
                 down_after_ms: int = 500, failover_timeout_ms: int = 2000,
                 port: Optional[int] = None, binary: str = 'redis-sentinel'):
        super().__init__(port=port, binary=binary, load_module=False)
        self.conf = os.path.join(self.dir, 'sentinel.conf')
        with open(self.conf, 'w') as f:
            f.write('port %d\nbind 127.0.0.1\ndir %s\nlogfile %s\n'
                    'sentinel monitor %s 127.0.0.1 %d %d\n'
                    'sentinel down-after-milliseconds %s %d\n'
                    'sentinel failover-timeout %s %d\n'
                    'sentinel parallel-syncs %s 1\n'
                    % (self.port, self.dir, self.log, service, master.port, quorum, service,
                       down_after_ms, service, failover_timeout_ms, service))

    def start(self) -> 'SentinelServer':
        self._launch([self.binary, self.conf],
                     'redis-sentinel on port %d did not start (%s)' % (self.port, self.log))
        return self


def pg_bindir() -> str:
    """Debian's PostgreSQL binaries (the highest installed version)."""
    env = os.environ.get('SECKILL_PG_BINDIR')
    if env:
        return env
    found = sorted(glob.glob('/usr/lib/postgresql/*/bin/initdb'),
                   key=lambda p: int(p.split('/')[4]) if p.split('/')[4].isdigit() else 0)
    if found:
        return os.path.dirname(found[-1])
    initdb = shutil.which('initdb')
    if initdb:
        return os.path.dirname(initdb)
    raise FileNotFoundError('PostgreSQL binaries not found: apt-get install postgresql')


class PostgresServer:
    """A PostgreSQL cluster in a temporary folder, on a free port, trust
    authentication on 127.0.0.1, user `postgres`. stop() then start()
    restarts it with its data (a database outage); destroy() removes it."""

    def __init__(self, port: Optional[int] = None, fsync: bool = False):
        self.bindir = pg_bindir()
        self.port = port or free_port()
        self.fsync = fsync
        self.dir = tempfile.mkdtemp(prefix='seckill-pg-')
        self.data = os.path.join(self.dir, 'data')
        self.logfile = os.path.join(self.dir, 'postgres.log')
        self._as: List[str] = []
        if os.geteuid() == 0:
            try:
                pw = pwd.getpwnam('postgres')
            except KeyError:
                raise RuntimeError('running as root needs the postgres user '
                                   '(apt-get install postgresql)') from None
            os.chown(self.dir, pw.pw_uid, pw.pw_gid)
            self._as = ['runuser', '-u', 'postgres', '--']
        self._initialised = False
        self.running = False

    def url(self, dbname: str = 'postgres') -> str:
        return 'postgresql://postgres@127.0.0.1:%d/%s' % (self.port, dbname)

    def _run(self, *cmd: str, timeout: float = 60) -> None:
        full = self._as + [os.path.join(self.bindir, cmd[0])] + list(cmd[1:])
        res = subprocess.run(full, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                             timeout=timeout, cwd=self.dir)
        if res.returncode != 0:
            raise RuntimeError('%s failed (%d): %s' % (cmd[0], res.returncode,
                                                       res.stdout.decode(errors='replace')[-2000:]))

    def start(self) -> 'PostgresServer':
        if not self._initialised:
            self._run('initdb', '-D', self.data, '-A', 'trust', '-U', 'postgres', '-E', 'UTF8',
                      '--locale=C', '--no-sync')
            self._initialised = True
        opts = ('-p %d -k %s -c listen_addresses=127.0.0.1 -c fsync=%s -c max_connections=100'
                % (self.port, self.dir, 'on' if self.fsync else 'off'))
        self._run('pg_ctl', '-D', self.data, '-l', self.logfile, '-o', opts, '-w', '-t', '60',
                  'start')
        self.running = True
        return self

    def stop(self, mode: str = 'fast') -> None:
        if self.running:
            self._run('pg_ctl', '-D', self.data, '-m', mode, '-w', '-t', '60', 'stop')
            self.running = False

    def destroy(self) -> None:
        with contextlib.suppress(Exception):
            self.stop('immediate')
        shutil.rmtree(self.dir, ignore_errors=True)

    def create_database(self, name: str) -> str:
        import psycopg
        with psycopg.connect(self.url(), autocommit=True) as conn:
            conn.execute('CREATE DATABASE "%s"' % name.replace('"', ''))
        return self.url(name)

    def __enter__(self) -> 'PostgresServer':
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.destroy()
