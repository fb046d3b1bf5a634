"""The bench's throw-away servers: `free_port` (never 6379), for every
bench script that starts its own; `own_server`, a server on a free port in
a temporary folder, stopped by pid when done (bench/draw.py's, with the
module); `local_server`, the same with the library loaded (bench_reserve.py,
measure_memory.py)."""

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time

import redis

LIBRARY = os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'functions', 'seckill.lua')


def free_port():
    while True:
        with socket.socket() as s:
            s.bind(('127.0.0.1', 0))
            port = s.getsockname()[1]
        if port != 6379:
            return port


@contextlib.contextmanager
def own_server(server='redis-server', args=()):
    """Yields a connection (bytes replies) to a new server on a free port in
    a temporary folder, no persistence; `args`: more of the server's
    command-line options (a module to load, SLOWLOG settings)."""
    folder = tempfile.mkdtemp(prefix='seckill-bench-')
    port = free_port()
    proc = subprocess.Popen([server, '--port', str(port), '--save', '', '--appendonly', 'no', '--dir', folder,
                             *args],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        c = redis.Redis(port=port)
        for _ in range(100):
            try:
                c.ping()
                break
            except redis.ConnectionError:
                time.sleep(0.05)
        yield c
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
        shutil.rmtree(folder, ignore_errors=True)


@contextlib.contextmanager
def local_server(server='redis-server', library=LIBRARY, args=()):
    """own_server with `library` loaded."""
    with own_server(server, args) as c:
        with open(library, 'rb') as f:
            c.execute_command('FUNCTION', 'LOAD', 'REPLACE', f.read())
        yield c
