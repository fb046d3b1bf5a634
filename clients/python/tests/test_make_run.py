"""`make start` and `make stop` (the Makefile at the repository's root): two
servers on two ports in one checkout share no files, and `make stop PORT=...`
stops the one on that port only.

The test calls make as a user does, on two free ports, with `-o build`
(the module is already built: the `module` fixture; no cargo run, no apt
check), and deletes both ports' folders (run/PORT/) at the end.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess

import pytest
import redis

from seckill.testing import free_port

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
# The files a server of `make start` writes, by the CONFIG parameter naming them.
FILES = ('pidfile', 'logfile', 'dbfilename', 'appenddirname')

pytestmark = pytest.mark.skipif(shutil.which('make') is None, reason='make is not installed')


def make(module, *args):
    env = {k: v for k, v in os.environ.items() if k not in ('MAKEFLAGS', 'MFLAGS', 'MAKELEVEL')}
    out = subprocess.run(['make', '--no-print-directory', '-C', ROOT, '-o', 'build',
                          'MODULE=%s' % module, *args], capture_output=True, text=True, env=env,
                         timeout=120)
    assert out.returncode == 0, 'make %s:\n%s%s' % (' '.join(args), out.stdout, out.stderr)
    return out.stdout


def client(port):
    return redis.Redis(host='127.0.0.1', port=port, decode_responses=True, socket_timeout=5)


def answers(port) -> bool:
    try:
        return client(port).ping()
    except redis.ConnectionError:
        return False


def files_of(port):
    """The absolute paths of what the server on `port` writes."""
    c = client(port)
    d = c.config_get('dir')['dir']
    out = set()
    for name in FILES:
        v = c.config_get(name)[name]
        out.add(v if os.path.isabs(v) else os.path.join(d, v))
    return d, out


def root_entries():
    return set(os.listdir(ROOT)) - {'run'}


def test_two_ports_share_nothing_and_stop_alone(module):
    ports = [free_port(), free_port()]
    while ports[1] == ports[0]:
        ports[1] = free_port()
    dirs = [os.path.join(ROOT, 'run', str(p)) for p in ports]
    for d in dirs:
        assert not os.path.exists(d), '%s exists: a run of make on that port' % d
    before = root_entries()
    try:
        for p in ports:
            assert 'pid' in make(module, 'start', 'PORT=%d' % p)
            assert answers(p)
        seen = []
        for p, want in zip(ports, dirs):
            d, paths = files_of(p)
            assert os.path.realpath(d) == os.path.realpath(want)
            assert all(os.path.realpath(x).startswith(os.path.realpath(want) + os.sep) for x in paths), paths
            seen.append({os.path.realpath(x) for x in paths})
        assert not seen[0] & seen[1]
        # Each writes its own AOF: a key set on one is not in the other's folder.
        client(ports[0]).set('only-on-first', 1)
        assert client(ports[1]).get('only-on-first') is None
        for d in dirs:
            assert os.path.exists(os.path.join(d, 'redis.pid')), os.listdir(d)
        assert root_entries() == before, 'make start wrote in the repository root: %s' % (
            root_entries() - before)

        assert 'stopped the server on port %d' % ports[0] in make(module, 'stop', 'PORT=%d' % ports[0])
        assert not answers(ports[0])
        assert answers(ports[1]), 'make stop on one port stopped the other'
        assert 'no server of make run on port %d' % ports[0] in make(module, 'stop', 'PORT=%d' % ports[0])
        assert 'stopped the server on port %d' % ports[1] in make(module, 'stop', 'PORT=%d' % ports[1])
        assert not answers(ports[1])
        assert root_entries() == before
    finally:
        for d in dirs:
            pidf = os.path.join(d, 'redis.pid')
            try:
                with open(pidf) as f:
                    os.kill(int(f.read().strip()), signal.SIGKILL)
            except (OSError, ValueError):
                pass
            shutil.rmtree(d, ignore_errors=True)


def test_install_and_uninstall(module, tmp_path):
    """`make install DESTDIR=...` puts the module there with its execute bit
    (Redis refuses a module file without one) and the library beside it;
    `make uninstall` removes both."""
    dest = str(tmp_path)
    make(module, 'install', 'DESTDIR=%s' % dest)
    so = os.path.join(dest, 'usr/lib/redis/modules/libredis_seckill.so')
    lua = os.path.join(dest, 'usr/share/redis-seckill/seckill.lua')
    assert os.stat(so).st_mode & 0o777 == 0o755
    with open(lua, 'rb') as a, open(os.path.join(ROOT, 'functions', 'seckill.lua'), 'rb') as b:
        assert a.read() == b.read()
    make(module, 'uninstall', 'DESTDIR=%s' % dest)
    assert not os.path.exists(so) and not os.path.exists(lua)
