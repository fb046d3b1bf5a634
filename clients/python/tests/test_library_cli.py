"""`python -m seckill functions install|status` against a real server
without the module, and the install decision (seckill.library.plan)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
import redis

from seckill import library as lib
from seckill.__main__ import main
from seckill.testing import RedisServer

CODE = open(lib.REPO_FILE).read()
VERSION = lib.source_version(CODE)


def test_plan():
    assert lib.plan(None, '1.0.0')[0] == 'load'
    assert lib.plan('1.0.0', '1.0.0', same_code=True)[0] == 'keep'
    assert lib.plan('1.0.0', '1.0.0')[0] == 'load'
    assert lib.plan('1.0.0', '1.2.0')[1] == 'upgraded seckill 1.0.0 -> 1.2.0'
    assert lib.plan('1.10.0', '1.9.0', force=True)[0] == 'load'
    with pytest.raises(lib.LibraryError, match='refusing to downgrade'):
        lib.plan('1.10.0', '1.9.0')


def test_source_version():
    assert lib.source_version("#!lua name=seckill\nlocal VERSION = '2.3.4'\n") == '2.3.4'
    with pytest.raises(lib.LibraryError):
        lib.source_version('#!lua name=seckill\n')


@pytest.fixture
def server():
    srv = RedisServer(load_module=False).start()
    yield srv
    srv.stop()


def run(*args):
    return main(list(args))


def test_install_status_idempotent_and_no_downgrade(server, capsys, tmp_path):
    url = server.url
    assert run('functions', 'status', '--redis', url) == 1      # nothing loaded: a failure
    assert capsys.readouterr().out == 'no seckill library loaded\n'
    assert run('functions', 'install', '--redis', url) == 0
    assert capsys.readouterr().out == 'installed seckill %s\n' % VERSION
    assert run('functions', 'install', '--redis', url) == 0
    assert capsys.readouterr().out == 'seckill %s already loaded, unchanged\n' % VERSION
    assert run('functions', 'status', '--redis', url) == 0
    assert capsys.readouterr().out == 'seckill %s loaded\n' % VERSION

    newer = tmp_path / 'newer.lua'
    newer.write_text(CODE.replace("local VERSION = '%s'" % VERSION, "local VERSION = '99.0.0'"))
    assert run('functions', 'install', '--redis', url, '--file', str(newer)) == 0
    assert capsys.readouterr().out == 'upgraded seckill %s -> 99.0.0\n' % VERSION
    assert run('functions', 'install', '--redis', url) == 2          # a downgrade
    assert 'refusing to downgrade' in capsys.readouterr().err
    assert server.client().execute_command('FCALL_RO', 'seckill_version', 1, 'seckill:probe') == '99.0.0'
    assert run('functions', 'install', '--redis', url, '--force') == 0
    assert capsys.readouterr().out == 'downgraded seckill 99.0.0 -> %s (--force)\n' % VERSION
    assert server.client().execute_command('FCALL_RO', 'seckill_version', 1, 'seckill:probe') == VERSION


def test_as_a_process(server):
    env = dict(os.environ)
    env['PYTHONPATH'] = os.path.dirname(os.path.dirname(os.path.abspath(lib.__file__)))
    out = subprocess.run([sys.executable, '-m', 'seckill', 'functions', 'install', '--redis',
                          server.url], capture_output=True, text=True, env=env, timeout=60)
    assert (out.returncode, out.stdout) == (0, 'installed seckill %s\n' % VERSION), out.stderr
    import seckill
    s = seckill.Sale(server.client(), 'sale:{p}')
    assert s.init(1) is True and s.reserve('u').status == 'RESERVED'
    assert s._driver.backend == 'functions'


def test_missing_library_file_points_at_file(monkeypatch):
    """A package that carries no copy of the library (an editable install),
    moved outside the repository, has no functions/ beside it."""
    monkeypatch.setattr(lib, 'REPO_FILE', '/nonexistent/functions/seckill.lua')
    monkeypatch.setattr(lib, 'PACKAGED_FILE', '/nonexistent/seckill/seckill.lua')
    monkeypatch.delenv('SECKILL_LIBRARY', raising=False)
    with pytest.raises(lib.LibraryError, match='--file'):
        lib.source_path()


def test_one_line_errors(server, capsys):
    """No server, a wrong password, a missing right, no backend: one line
    on stderr with the fix, exit 2 (tracebacks only with --debug)."""
    from seckill.testing import free_port
    c = server.client()
    c.execute_command('ACL', 'SETUSER', 'weak', 'reset', 'on', '>pw', '~sale:*', '+ping')
    c.close()
    down = 'redis://127.0.0.1:%d/0' % free_port()
    weak = 'redis://weak:pw@127.0.0.1:%d/0' % server.port
    bad = 'redis://weak:nope@127.0.0.1:%d/0' % server.port
    for url, want in ((down, 'make run'), (bad, 'refused the login'),
                      (weak, '+fcall +fcall_ro'), (server.url, 'functions install')):
        assert run('--redis', url, 'verify-draw', 'sale:{x}') == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and want in err[0] and 'nope' not in err[0], (url, err)
    with pytest.raises(redis.ConnectionError):      # --debug: the exception itself
        run('--debug', '--redis', down, 'verify-draw', 'sale:{x}')
