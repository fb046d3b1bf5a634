"""A throw-away server for the library's measuring scripts (bench_reserve.py,
measure_memory.py) and tests/functions/test_library_fence.py: started on a
free port (never 6379) in a temporary folder with the library loaded,
stopped by pid when done."""

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
def local_server(server='redis-server', library=LIBRARY, args=()):
    """Yields a connection to a new server with `library` loaded (`args`:
    more of the server's command-line options)."""
    folder = tempfile.mkdtemp(prefix='seckill-fn-')
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
        with open(library, 'rb') as f:
            c.execute_command('FUNCTION', 'LOAD', 'REPLACE', f.read())
        yield c
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
        shutil.rmtree(folder, ignore_errors=True)
