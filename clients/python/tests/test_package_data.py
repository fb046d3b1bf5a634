"""A built package carries the Functions library: `python -m seckill
functions install` after a normal (non-editable) `pip install` finds it.

clients/python/setup.py copies functions/seckill.lua into the package at
build time (seckill/seckill.lua), so the repository keeps one source. Each
test builds from a copy of clients/python and functions/seckill.lua in its
own temporary folder, laid out as in the repository (the checkout's own
clients/python/build is left alone), with pip's ordinary isolated build.
"""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import sys
import zipfile

import pytest

from seckill import library as lib
from seckill.testing import RedisServer

CLIENT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ROOT = os.path.dirname(os.path.dirname(CLIENT))
LIBRARY = os.path.join(ROOT, 'functions', 'seckill.lua')
with open(LIBRARY, 'rb') as _f:
    CODE = _f.read()
VERSION = lib.source_version(CODE.decode())


def checkout(tmp_path) -> str:
    """clients/python and functions/seckill.lua copied to tmp_path/repo;
    the copy's clients/python."""
    repo = tmp_path / 'repo'
    shutil.copytree(CLIENT, repo / 'clients' / 'python', ignore=shutil.ignore_patterns(
        'build', 'dist', '*.egg-info', '__pycache__', '.ruff_cache', '.pytest_cache', 'demo-out',
        'tests', 'bench'))
    (repo / 'functions').mkdir()
    shutil.copy(LIBRARY, repo / 'functions' / 'seckill.lua')
    return str(repo / 'clients' / 'python')


def pip(*args, cwd=None):
    out = subprocess.run([sys.executable, '-m', 'pip', *args], capture_output=True, text=True,
                         timeout=300, cwd=cwd)
    assert out.returncode == 0, 'pip %s:\n%s%s' % (' '.join(args), out.stdout, out.stderr)


def packaged(wheel: str) -> bytes:
    with zipfile.ZipFile(wheel) as z:
        return z.read('seckill/seckill.lua')


def clean_env():
    env = dict(os.environ)
    for k in ('PYTHONPATH', 'SECKILL_LIBRARY', 'SECKILL_REDIS'):
        env.pop(k, None)
    return env


@pytest.fixture
def server():
    srv = RedisServer(load_module=False).start()
    yield srv
    srv.stop()


def test_wheel_installs_the_library(tmp_path, server):
    src = checkout(tmp_path)
    wheels = tmp_path / 'wheels'
    pip('wheel', '-q', '--no-deps', src, '-w', str(wheels))
    [wheel] = glob.glob(str(wheels / 'seckill-*.whl'))
    assert packaged(wheel) == CODE, 'the wheel carries a copy that is not functions/seckill.lua'

    venv = tmp_path / 'venv'
    subprocess.run([sys.executable, '-m', 'venv', str(venv)], check=True, timeout=120)
    py = str(venv / 'bin' / 'python')
    out = subprocess.run([py, '-m', 'pip', 'install', '-q', wheel], capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0, out.stdout + out.stderr
    shutil.rmtree(tmp_path / 'repo')        # nothing of the repository left beside the install

    def cli(*args):
        return subprocess.run([py, '-m', 'seckill', *args, '--redis', server.url],
                              capture_output=True, text=True, timeout=60, cwd=str(tmp_path),
                              env=clean_env())

    where = subprocess.run([py, '-c', 'import seckill.library as l; print(l.source_path())'],
                           capture_output=True, text=True, cwd=str(tmp_path), env=clean_env())
    assert where.stdout.strip().startswith(str(venv)), where.stdout + where.stderr
    out = cli('functions', 'install')
    assert (out.returncode, out.stdout) == (0, 'installed seckill %s\n' % VERSION), out.stderr
    out = cli('functions', 'status')
    assert (out.returncode, out.stdout) == (0, 'seckill %s loaded\n' % VERSION), out.stderr
    c = server.client()
    try:
        assert c.execute_command('FCALL_RO', 'seckill_version', 1, 'seckill:probe') == VERSION
    finally:
        c.close()


def test_sdist_carries_the_library(tmp_path):
    """A wheel built from the sdist (no functions/ beside it) carries it too."""
    src = checkout(tmp_path)
    dist = tmp_path / 'dist'
    out = subprocess.run([sys.executable, 'setup.py', '-q', 'sdist', '-d', str(dist)], cwd=src,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr
    [sdist] = glob.glob(str(dist / 'seckill-*.tar.gz'))
    shutil.rmtree(tmp_path / 'repo')        # the sdist alone
    wheels = tmp_path / 'wheels'
    pip('wheel', '-q', '--no-deps', sdist, '-w', str(wheels))
    [wheel] = glob.glob(str(wheels / 'seckill-*.whl'))
    assert packaged(wheel) == CODE
