"""What bench/bench.py, bench/backends.py and bench/library_floor.py share:
the seed scripts, the pinned server with the module loaded, one
redis-benchmark run, the server's own CPU clock, and replacing one section
of bench/reports/REPORT.md."""

import os
import subprocess
import time

import redis

from local_server import free_port

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
MODULE = os.path.join(ROOT, 'target', 'release', 'libredis_seckill.so')
LIBRARY = os.path.join(ROOT, 'functions', 'seckill.lua')
REPORT = os.path.join(HERE, 'reports', 'REPORT.md')
BIG = 10 ** 12

# The seed scripts (../shared/seeds): (A) buyer set + stock, (B) the same
# with the reservation appended to a stream, and the capped rollback.
SCRIPT_A = """
if redis.call('SISMEMBER', KEYS[2], ARGV[1]) == 1 then return -1 end
local left = tonumber(redis.call('GET', KEYS[1]) or '-1')
if left < tonumber(ARGV[2]) then return 0 end
redis.call('DECRBY', KEYS[1], ARGV[2])
redis.call('SADD', KEYS[2], ARGV[1])
redis.call('EXPIRE', KEYS[2], 86400)
return left - tonumber(ARGV[2])
"""
SCRIPT_B = SCRIPT_A.replace(
    "return left -",
    "redis.call('XADD', KEYS[3], '*', 'reservation_id', ARGV[3], 'user_id', ARGV[1])\nreturn left -")
SCRIPT_ROLLBACK = """
local stock = tonumber(redis.call('GET', KEYS[1]) or 0)
local maxStock = tonumber(ARGV[2])
local rollback = tonumber(ARGV[1])
if stock + rollback > maxStock then redis.call('SET', KEYS[1], maxStock)
else redis.call('INCRBY', KEYS[1], rollback) end
return 1
"""


class Server:
    """redis-server on CPU 0 with the module loaded, in `workdir`."""

    def __init__(self, port, workdir, module):
        self.port = port
        log = open(os.path.join(workdir, 'redis.log'), 'w')
        self.proc = subprocess.Popen(
            ['taskset', '-c', '0', 'redis-server', '--port', str(port), '--bind', '127.0.0.1',
             '--save', '', '--appendonly', 'no', '--dir', workdir, '--dbfilename', 'bench.rdb',
             '--enable-debug-command', 'local', '--loadmodule', os.path.abspath(module)],
            stdout=log, stderr=subprocess.STDOUT)
        self.conn = redis.Redis(port=port, decode_responses=True)
        for _ in range(100):
            if self.proc.poll() is not None:
                break
            try:
                self.conn.ping()
                return
            except redis.ConnectionError:
                time.sleep(0.05)
        raise SystemExit('redis-server did not start; see %s/redis.log' % workdir)

    def stop(self):
        self.proc.terminate()
        self.proc.wait(timeout=30)


def start_server(module):
    """A Server in bench/out/ (made by the run), started empty: an RDB left by a previous run
    would be loaded, and a master restarted from an RDB keeps a replication
    backlog to feed."""
    workdir = os.path.join(HERE, 'out')
    os.makedirs(workdir, exist_ok=True)
    rdb = os.path.join(workdir, 'bench.rdb')
    if os.path.exists(rdb):
        os.remove(rdb)
    return Server(free_port(), workdir, module)


def benchmark(port, args, requests, pipeline, keyspace):
    """One redis-benchmark run; returns ops/s."""
    cmd = ['taskset', '-c', '1', 'redis-benchmark', '-p', str(port), '-c', '50', '-n', str(requests),
           '-P', str(pipeline), '-r', str(keyspace), '--csv'] + [str(a) for a in args]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    last = [line for line in out.splitlines() if line.startswith('"') and 'rps' not in line][-1]
    return float(last.split('","')[1])


def usec_per_call(conn, command):
    stats = conn.info('commandstats')
    entry = stats.get('cmdstat_' + command.lower())
    return entry['usec_per_call'] if entry else float('nan')


def server_cpu_ns(pid):
    """CPU time of the server's main thread (the event loop) so far, in ns."""
    with open('/proc/%d/schedstat' % pid) as f:
        return int(f.read().split()[0])


def load_library(conn, path=LIBRARY):
    """FUNCTION LOAD REPLACE of the library; its version."""
    with open(path) as f:
        conn.execute_command('FUNCTION', 'LOAD', 'REPLACE', f.read())
    return text(conn.execute_command('FCALL_RO', 'seckill_version', 1, 'seckill:probe'))


def text(v):
    return v.decode() if isinstance(v, bytes) else v


def write_section(path, lines, before='## Targets'):
    """Replaces the section of `path` whose heading is lines[1] (lines[0]
    is blank) with `lines`, up to the next `## ` heading; a section not
    there yet goes in before the heading `before` (or at the end)."""
    heading = lines[1]
    with open(path) as f:
        old = f.read().rstrip('\n').split('\n')
    if heading in old:
        at = old.index(heading)
        end = next((i for i in range(at + 1, len(old)) if old[i].startswith('## ')), len(old))
        while at > 0 and old[at - 1] == '':
            at -= 1
        new = old[:at] + lines + ([''] if end < len(old) else []) + old[end:]
    elif before in old:
        at = old.index(before)
        new = old[:at - 1 if at and old[at - 1] == '' else at] + lines + [''] + old[at:]
    else:
        new = old + lines
    with open(path, 'w') as f:
        f.write('\n'.join(new) + '\n')
