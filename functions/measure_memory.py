#!/usr/bin/env python3
"""Memory per reservation of the Functions library, measured as `make bench`
measures the module's (bench/bench.py memory_and_rdb): one sale
`INIT mem:{m} 10^12 LIMIT 1`, filled with RESERVEs of users u0 ... u<n-1>
(generated ids, no stream), then MEMORY USAGE of the sale key (SAMPLES 0:
every field) and the used_memory delta, each divided by n.

    .venv/bin/python functions/measure_memory.py [--count N] [--server PATH] [--hold MS]

Starts its own server on a free port (never 6379) in a temporary folder,
loads functions/seckill.lua, and stops the server by pid when done.
"""

import argparse
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time

import redis

HERE = os.path.dirname(os.path.abspath(__file__))
LIBRARY = os.path.join(HERE, 'seckill.lua')


def free_port():
    while True:
        with socket.socket() as s:
            s.bind(('127.0.0.1', 0))
            port = s.getsockname()[1]
        if port != 6379:
            return port


def main():
    p = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    p.add_argument('--count', type=int, default=1_000_000)
    p.add_argument('--server', default='redis-server')
    p.add_argument('--hold', type=int, default=0, help='HOLD ms of the sale (0: no holds, as make bench)')
    a = p.parse_args()
    folder = tempfile.mkdtemp(prefix='seckill-mem-')
    port = free_port()
    proc = subprocess.Popen([a.server, '--port', str(port), '--save', '', '--appendonly', 'no', '--dir', folder],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        c = redis.Redis(port=port)
        for _ in range(100):
            try:
                c.ping()
                break
            except redis.ConnectionError:
                time.sleep(0.05)
        version = c.info('server')
        name = version.get('server_name', 'redis')
        with open(LIBRARY, 'rb') as f:
            c.execute_command('FUNCTION', 'LOAD', 'REPLACE', f.read())
        base = c.info('memory')['used_memory']
        init = ['FCALL', 'seckill_init', 1, 'mem:{m}', 10 ** 12, 'LIMIT', 1]
        if a.hold:
            init += ['HOLD', a.hold]
        c.execute_command(*init)
        t0 = time.perf_counter()
        pipe = c.pipeline(transaction=False)
        for n in range(a.count):
            pipe.execute_command('FCALL', 'seckill_reserve', 1, 'mem:{m}', 'u%d' % n)
            if n % 10000 == 9999:
                pipe.execute()
        pipe.execute()
        fill_s = time.perf_counter() - t0
        used = c.info('memory')['used_memory'] - base
        usage = c.memory_usage('mem:{m}', samples=0)
        info = c.execute_command('FCALL_RO', 'seckill_info', 1, 'mem:{m}')
        info = dict(zip(info[0::2], info[1::2]))
        assert int(info[b'reservations']) == a.count and info[b'invariant'] == b'ok', info
        fields = c.hlen('mem:{m}')
        print('%s %s, %d reservations (HOLD %d): MEMORY USAGE %d B = %.1f B per reservation; '
              'used_memory delta %d B = %.1f B per reservation; %d hash fields; filled in %.1f s (%.0f RESERVE/s pipelined)'
              % (name, version.get(name + '_version', version['redis_version']), a.count, a.hold, usage,
                 usage / a.count, used, used / a.count, fields, fill_s, a.count / fill_s))
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == '__main__':
    main()
