#!/usr/bin/env python3
"""make bench: SECKILL.* against the Lua scripts it replaces and against the
limits of one Redis key, measured in one run on one server.

Starts its own redis-server (pinned to CPU 0, redis-benchmark to CPU 1),
runs every scenario several times with redis-benchmark (-c 50, pipelined
-P 16 and unpipelined), takes medians, reads server CPU per call from
INFO commandstats, measures memory and RDB times of a 1,000,000-reservation
sale, and writes bench/reports/REPORT.md with bench/reports/chart.svg. Prints the table too.
No pass/fail: the figures are for reading, as ratios within this one run.

The backend column (issue 16): the same server also has the Functions
library (functions/seckill.lua) loaded, and paired alternating rounds
measure the module, the library and seed script A side by side: ops/s and
server CPU per call of RESERVE, RESERVE + STREAM and a sold-out RESERVE,
memory per reservation at 1M, and the time to expire 100k due holds (the
module's timer; the library's seckill_expire called until none is due) with
the worst PING a separate client sees meanwhile.
"""

import argparse
import multiprocessing
import os
import socket
import statistics
import subprocess
import sys
import time

import redis

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
MODULE = os.path.join(ROOT, 'target', 'release', 'libredis_seckill.so')
LIBRARY = os.path.join(ROOT, 'functions', 'seckill.lua')

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

BIG = 10 ** 12
NATIVE = ('SADD new member', 'XADD', 'HMGET 3 fields')
ROOT = os.path.dirname(HERE)
# Pending reservations made before RELEASE / CONFIRM runs (REQIDs 000000000000 ...).
PREFILL = 200_000


def free_port():
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        return s.getsockname()[1]


class Server:
    def __init__(self, port, workdir, module):
        self.port = port
        log = open(os.path.join(workdir, 'redis.log'), 'w')
        self.proc = subprocess.Popen(
            ['taskset', '-c', '0', 'redis-server', '--port', str(port), '--bind', '127.0.0.1',
             '--save', '', '--appendonly', 'no', '--dir', workdir, '--dbfilename', 'bench.rdb',
             '--enable-debug-command', 'local', '--loadmodule', module],
            stdout=log, stderr=subprocess.STDOUT)
        self.conn = redis.Redis(port=port, decode_responses=True)
        for _ in range(100):
            try:
                self.conn.ping()
                return
            except redis.ConnectionError:
                time.sleep(0.05)
        raise SystemExit('redis-server did not start; see %s/redis.log' % workdir)

    def stop(self):
        self.proc.terminate()
        self.proc.wait(timeout=30)


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


class Scenario:
    def __init__(self, name, command, args, setup=None, note='', keyspace=100_000_000):
        self.name, self.command, self.args, self.setup, self.note = name, command, args, setup, note
        self.keyspace = keyspace
        self.ops = {}
        self.usec = float('nan')


def run_scenario(srv, sc, reps, requests):
    for pipeline, n in ((16, requests), (1, max(requests // 4, 10000))):
        samples, usecs = [], []
        for _ in range(reps):
            if sc.setup:
                sc.setup(srv.conn)
            srv.conn.config_resetstat()
            samples.append(benchmark(srv.port, sc.args, n, pipeline, sc.keyspace))
            if pipeline == 16:
                usecs.append(usec_per_call(srv.conn, sc.command))
        sc.ops[pipeline] = statistics.median(samples)
        if usecs:
            sc.usec = statistics.median(usecs)


def scenarios(conn):
    sha = {name: conn.script_load(src) for name, src in
           (('A', SCRIPT_A), ('B', SCRIPT_B), ('ROLLBACK', SCRIPT_ROLLBACK))}

    def stock(key, n):
        return lambda c: (c.delete(key, 'buyers:{b}', 'events:{b}'), c.set(key, n))

    def sale(key, total, *extra):
        return lambda c: (c.delete(key, key + ':ev'), c.execute_command('SECKILL.INIT', key, total, 'LIMIT', 10 ** 6, *extra))

    def prefilled(key):
        def setup(c):
            sale(key, BIG)(c)
            pipe = c.pipeline(transaction=False)
            for n in range(PREFILL):
                pipe.execute_command('SECKILL.RESERVE', key, 'u%d' % n, 'REQID', '%012d' % n)
                if n % 5000 == 4999:
                    pipe.execute()
            pipe.execute()
        return setup

    user = 'u__rand_int__'
    return [
        Scenario('PING', 'ping', ['PING']),
        Scenario('INCR (one key)', 'incr', ['INCR', 'counter:{b}']),
        Scenario('script A: reserve', 'evalsha', ['EVALSHA', sha['A'], 2, 'stock:{b}', 'buyers:{b}', user, 1],
                 stock('stock:{b}', BIG), 'SISMEMBER+GET+DECRBY+SADD+EXPIRE'),
        Scenario('script B: reserve + XADD', 'evalsha',
                 ['EVALSHA', sha['B'], 3, 'stock:{b}', 'buyers:{b}', 'events:{b}', user, 1, 'r__rand_int__'],
                 stock('stock:{b}', BIG), 'A + XADD'),
        Scenario('script A: sold out', 'evalsha', ['EVALSHA', sha['A'], 2, 'stock:{b}', 'buyers:{b}', user, 1],
                 stock('stock:{b}', 0)),
        Scenario('script: capped rollback', 'evalsha', ['EVALSHA', sha['ROLLBACK'], 1, 'stock:{b}', 1, BIG],
                 stock('stock:{b}', 0)),
        Scenario('RESERVE', 'seckill.reserve', ['SECKILL.RESERVE', 'sale:{b}', user], sale('sale:{b}', BIG),
                 'SHARDS 1'),
        Scenario('RESERVE SHARDS 64', 'seckill.reserve', ['SECKILL.RESERVE', 'sale:{b}', user],
                 sale('sale:{b}', BIG, 'SHARDS', 64)),
        Scenario('RESERVE + STREAM', 'seckill.reserve', ['SECKILL.RESERVE', 'sale:{b}', user],
                 sale('sale:{b}', BIG, 'STREAM', 'sale:{b}:ev')),
        Scenario('RESERVE: sold out', 'seckill.reserve', ['SECKILL.RESERVE', 'sale:{b}', user],
                 sale('sale:{b}', 0)),
        Scenario('SADD new member', 'sadd', ['SADD', 'buyers:{b}', user], lambda c: c.delete('buyers:{b}'),
                 'native: what remembering a buyer costs at least'),
        Scenario('XADD', 'xadd', ['XADD', 'events:{b}', '*', 'event', 'reserved', 'rid', 'r__rand_int__',
                                  'user', user, 'qty', 1], lambda c: c.delete('events:{b}'),
                 'native: the entry RESERVE + STREAM appends'),
        Scenario('HMGET 3 fields', 'hmget', ['HMGET', 'h:{b}', 'status', 'rid', 'left'],
                 lambda c: (c.delete('h:{b}'), c.hset('h:{b}', mapping={'status': 'SOLD_OUT', 'rid': 'r1', 'left': 0})),
                 'native: a lookup with a three-element reply'),
        Scenario('RELEASE', 'seckill.release', ['SECKILL.RELEASE', 'sale:{b}', '__rand_int__'],
                 prefilled('sale:{b}'), '200k pending, random ids: repeats answer ALREADY_RELEASED', PREFILL),
        Scenario('CONFIRM', 'seckill.confirm', ['SECKILL.CONFIRM', 'sale:{b}', '__rand_int__'],
                 prefilled('sale:{b}'), '200k pending, random ids: repeats answer ALREADY_CONFIRMED', PREFILL),
    ]


def server_cpu_ns(pid):
    """CPU time of the server's main thread (the event loop) so far, in ns."""
    with open('/proc/%d/schedstat' % pid) as f:
        return int(f.read().split()[0])


# The judges of issue 9, measured in paired rounds: each round runs these
# back to back on fresh keys, and a ratio is taken within the round, so a
# neighbour's load that comes and goes moves both sides of it together.
PAIRED = ('RESERVE', 'SADD new member', 'RESERVE: sold out', 'HMGET 3 fields', 'script A: reserve',
          'RESERVE + STREAM', 'XADD')


def paired_rounds(srv, by, rounds, requests):
    """Per round and scenario: ops/s (-P 16) and server CPU ns per call."""
    out = []
    for _ in range(rounds):
        row = {}
        for name in PAIRED:
            sc = by[name]
            if sc.setup:
                sc.setup(srv.conn)
            before = server_cpu_ns(srv.proc.pid)
            ops = benchmark(srv.port, sc.args, requests, 16, sc.keyspace)
            row[name] = (ops, (server_cpu_ns(srv.proc.pid) - before) / requests)
        out.append(row)
    return out


def paired_ratios(rounds):
    """(name, median, lowest, highest, bound, op) over the rounds; each
    ratio is also given by server CPU ns per call (`cpu` rows)."""
    def ops(r, n):
        return r[n][0]

    def ns(r, n):
        return r[n][1]
    judges = [
        ('RESERVE ops/s ÷ SADD-new-member ops/s', lambda r: ops(r, 'RESERVE') / ops(r, 'SADD new member'), 0.8, '≥'),
        ('  the same by server CPU per call (SADD ns ÷ RESERVE ns)',
         lambda r: ns(r, 'SADD new member') / ns(r, 'RESERVE'), None, ''),
        ('RESERVE + STREAM ns/call ÷ (SADD ns + XADD ns), server CPU',
         lambda r: ns(r, 'RESERVE + STREAM') / (ns(r, 'SADD new member') + ns(r, 'XADD')), 1.4, '≤'),
        ('sold-out RESERVE ops/s ÷ HMGET-3 ops/s', lambda r: ops(r, 'RESERVE: sold out') / ops(r, 'HMGET 3 fields'), 1.0, '≥'),
        ('  the same by server CPU per call (HMGET ns ÷ sold-out ns)',
         lambda r: ns(r, 'HMGET 3 fields') / ns(r, 'RESERVE: sold out'), None, ''),
        ('RESERVE ops/s ÷ script A ops/s', lambda r: ops(r, 'RESERVE') / ops(r, 'script A: reserve'), 3.5, '≥'),
        ('  the same by server CPU per call (script A ns ÷ RESERVE ns)',
         lambda r: ns(r, 'script A: reserve') / ns(r, 'RESERVE'), None, ''),
    ]
    out = []
    for name, f, bound, op in judges:
        values = [f(r) for r in rounds]
        out.append((name, statistics.median(values), min(values), max(values), bound, op))
    return out


def build_loadgen(workdir, prebuilt=None):
    """The workspace member bench/loadgen, built by cargo (`workdir` unused:
    cargo keeps it in target/release); `prebuilt`: a loadgen binary to use
    instead (no build)."""
    if prebuilt:
        return prebuilt
    subprocess.run(['cargo', 'build', '--release', '-q', '-p', 'loadgen'], cwd=ROOT, check=True)
    return os.path.join(ROOT, 'target', 'release', 'loadgen')


def latency_under_load(srv, exe, rate, clients, seconds):
    """p50/p99/p99.9 at a fixed offered rate, unpipelined (bench/loadgen)."""
    c = srv.conn
    sha = c.script_load(SCRIPT_A)
    user = 'u__rand_int__'
    rows = [
        ('PING', ['PING'], lambda: None),
        ('RESERVE', ['SECKILL.RESERVE', 'sale:{b}', user],
         lambda: (c.delete('sale:{b}'), c.execute_command('SECKILL.INIT', 'sale:{b}', BIG, 'LIMIT', 10 ** 6))),
        ('RESERVE + STREAM', ['SECKILL.RESERVE', 'sale:{b}', user],
         lambda: (c.delete('sale:{b}', 'sale:{b}:ev'),
                  c.execute_command('SECKILL.INIT', 'sale:{b}', BIG, 'LIMIT', 10 ** 6, 'STREAM', 'sale:{b}:ev'))),
        ('script A: reserve', ['EVALSHA', sha, 2, 'stock:{b}', 'buyers:{b}', user, 1],
         lambda: (c.delete('stock:{b}', 'buyers:{b}'), c.set('stock:{b}', BIG))),
    ]
    out = []
    for name, args, setup in rows:
        setup()
        cmd = ['taskset', '-c', '1', exe, str(srv.port), str(rate), str(clients), str(seconds), '1'] + [str(a) for a in args]
        fields = subprocess.run(cmd, capture_output=True, text=True, check=True, timeout=seconds + 60).stdout.split()
        sent, errors, achieved, p50, p99, p999, worst = (int(float(f)) for f in fields)
        out.append({'name': name, 'sent': sent, 'errors': errors, 'achieved': achieved,
                    'p50': p50, 'p99': p99, 'p999': p999, 'max': worst})
        print('%-20s offered %d/s achieved %d/s  p50 %d us  p99 %d us  p99.9 %d us  max %d us  errors %d' % (
            name, rate, achieved, p50, p99, p999, worst, errors), flush=True)
    c.flushall()
    return out


def fill_sale(conn, key, count):
    pipe = conn.pipeline(transaction=False)
    for n in range(count):
        pipe.execute_command('SECKILL.RESERVE', key, 'u%d' % n)
        if n % 10000 == 9999:
            pipe.execute()
    pipe.execute()


def memory_and_rdb(srv, count):
    c = srv.conn
    c.flushall()
    base = c.info('memory')['used_memory']
    c.execute_command('SECKILL.INIT', 'mem:{m}', BIG, 'LIMIT', 1)
    fill_sale(c, 'mem:{m}', count)
    sale_used = c.info('memory')['used_memory'] - base
    sale_usage = c.memory_usage('mem:{m}', samples=0)
    # The same buyers as a set, and the same reservations as a stream.
    base2 = c.info('memory')['used_memory']
    pipe = c.pipeline(transaction=False)
    for n in range(count):
        pipe.sadd('buyers:{m}', 'u%d' % n)
        pipe.xadd('events:{m}', {'rid': '5f3a9c1e-%d' % n, 'user': 'u%d' % n, 'qty': 1})
        if n % 10000 == 9999:
            pipe.execute()
    pipe.execute()
    lua_used = c.info('memory')['used_memory'] - base2
    lua_usage = c.memory_usage('buyers:{m}', samples=0) + c.memory_usage('events:{m}', samples=0)
    c.delete('buyers:{m}', 'events:{m}')
    t0 = time.perf_counter()
    c.save()
    save_s = time.perf_counter() - t0
    loads = []
    for _ in range(3):  # the median of three loads, like every other figure
        t0 = time.perf_counter()
        c.execute_command('DEBUG', 'RELOAD', 'NOSAVE')
        loads.append(time.perf_counter() - t0)
    load_s = statistics.median(loads)
    reply = c.execute_command('SECKILL.INFO', 'mem:{m}')
    info = reply if isinstance(reply, dict) else dict(zip(reply[0::2], reply[1::2]))
    assert int(info['reservations']) == count and info['invariant'] == 'ok'
    return {
        'count': count,
        'sale_usage': sale_usage, 'sale_used': sale_used,
        'lua_usage': lua_usage, 'lua_used': lua_used,
        'rdb_bytes': os.path.getsize(os.path.join(c.config_get('dir')['dir'], 'bench.rdb')),
        'save_s': save_s, 'load_s': load_s,
    }


def svg_chart(results, path):
    bars = [(sc.name, sc.ops.get(16, 0)) for sc in results]
    top = max(v for _, v in bars) or 1
    width, row, left = 760, 26, 230
    height = row * len(bars) + 50
    out = ['<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" font-size="12">'
           % (width, height),
           '<text x="10" y="18" font-size="14" font-weight="bold">ops/s, pipelined -P 16, -c 50 (median)</text>']
    for i, (name, v) in enumerate(bars):
        y = 32 + i * row
        w = (width - left - 90) * v / top
        color = '#c0392b' if name.startswith('script') else (
            '#7f8c8d' if name in ('PING', 'INCR (one key)') + NATIVE else '#2471a3')
        out.append('<text x="%d" y="%d" text-anchor="end">%s</text>' % (left - 8, y + 15, name.replace('&', '&amp;')))
        out.append('<rect x="%d" y="%d" width="%.1f" height="18" fill="%s"/>' % (left, y + 2, w, color))
        out.append('<text x="%.1f" y="%d">%s</text>' % (left + w + 6, y + 15, '{:,.0f}'.format(v)))
    out.append('</svg>')
    with open(path, 'w') as f:
        f.write('\n'.join(out) + '\n')


def ratios(by):
    """The issue-9 judges: the module against the native commands underneath."""
    r, sadd, xadd, hmget = by['RESERVE'], by['SADD new member'], by['XADD'], by['HMGET 3 fields']
    return [
        ('RESERVE ops/s ÷ SADD-new-member ops/s (-P 16)', r.ops[16] / sadd.ops[16], 0.8, '≥'),
        ('RESERVE + STREAM µs/call ÷ (SADD µs + XADD µs)', by['RESERVE + STREAM'].usec / (sadd.usec + xadd.usec), 1.4, '≤'),
        ('sold-out RESERVE ops/s ÷ HMGET-3 ops/s (-P 16)', by['RESERVE: sold out'].ops[16] / hmget.ops[16], 1.0, '≥'),
        ('RESERVE ops/s ÷ script A ops/s (-P 16)', r.ops[16] / by['script A: reserve'].ops[16], 3.5, '≥'),
        ('RESERVE µs/call ÷ SADD µs/call', r.usec / sadd.usec, None, ''),
        ('sold-out RESERVE µs/call ÷ HMGET-3 µs/call', by['RESERVE: sold out'].usec / hmget.usec, None, ''),
    ]


def report(results, mem, lat, paired, args, bk=None):
    by = {sc.name: sc for sc in results}
    a, b, incr = by['script A: reserve'], by['script B: reserve + XADD'], by['INCR (one key)']
    lines = ['# Benchmark report', '',
             'Written by `make bench` (bench/bench.py) on %s: redis-server %s with the module, pinned to CPU 0;'
             ' redis-benchmark on CPU 1, `-c 50`, %d runs per figure, medians. Ratios compare figures of this one'
             ' run. `µs/call` is server CPU per call from `INFO commandstats` (pipelined runs).'
             % (time.strftime('%Y-%m-%d'), args.redis_version, args.reps), '',
             '![ops/s](chart.svg)', '',
             '| scenario | ops/s -P 16 | ops/s -P 1 | µs/call | vs A | vs B | vs INCR | notes |',
             '|---|---:|---:|---:|---:|---:|---:|---|']
    for sc in results:
        p16, p1 = sc.ops.get(16, 0), sc.ops.get(1, 0)
        lines.append('| %s | %s | %s | %.2f | %.2f× | %.2f× | %.2f× | %s |' % (
            sc.name, '{:,.0f}'.format(p16), '{:,.0f}'.format(p1), sc.usec,
            p16 / a.ops[16], p16 / b.ops[16], p16 / incr.ops[16], sc.note))
    targets = [
        ('RESERVE success path ≥ 3× script A (-P 16)', by['RESERVE'].ops[16] / a.ops[16], 3.0, '≥'),
        ('RESERVE + STREAM ≥ 2.5× script B (-P 16)', by['RESERVE + STREAM'].ops[16] / b.ops[16], 2.5, '≥'),
        ('sold-out RESERVE ≥ 0.8× INCR (-P 16)', by['RESERVE: sold out'].ops[16] / incr.ops[16], 0.8, '≥'),
        ('server CPU per successful RESERVE ≤ 2 µs', by['RESERVE'].usec, 2.0, '≤'),
        ('bytes per reservation ≤ 64 (MEMORY USAGE)', mem['sale_usage'] / mem['count'], 64, '≤'),
        ('RDB load of the 1M sale ≤ 0.5 s', mem['load_s'], 0.5, '≤'),
        ('bytes per reservation ≤ 52 at 1M (MEMORY USAGE)', mem['sale_usage'] / mem['count'], 52, '≤'),
    ] + [(name + ' (paired rounds, median)', med, bound, op) for name, med, _, _, bound, op in paired_ratios(paired)
         if bound is not None]
    lines += ['', '## Memory and RDB, %s reservations' % '{:,}'.format(mem['count']), '',
              'Short user ids (`u0` … `u999999`), generated reservation ids, one sale key.', '',
              '| | MEMORY USAGE | used_memory delta | per reservation |',
              '|---|---:|---:|---:|',
              '| the sale (SECKILL) | {:,} | {:,} | {:.1f} B / {:.1f} B |'.format(
                  mem['sale_usage'], mem['sale_used'], mem['sale_usage'] / mem['count'], mem['sale_used'] / mem['count']),
              '| SET of the buyers + STREAM of the same entries | {:,} | {:,} | {:.1f} B / {:.1f} B |'.format(
                  mem['lua_usage'], mem['lua_used'], mem['lua_usage'] / mem['count'], mem['lua_used'] / mem['count']),
              '', 'RDB file {:,} bytes; SAVE {:.3f} s; load (`DEBUG RELOAD NOSAVE`, median of 3) {:.3f} s.'.format(
                  mem['rdb_bytes'], mem['save_s'], mem['load_s']),
              '', '## Against the native commands underneath', '',
              'A RESERVE must at least remember a buyer (a `SADD` of a new member); with a stream it must also'
              ' append an entry (an `XADD` of the same fields); a sold-out RESERVE is a lookup with a three-element'
              ' reply (an `HMGET` of three fields). Same run, same server.', '',
              '| ratio | measured | target |', '|---|---:|---|']
    for name, value, bound, op in ratios(by):
        lines.append('| %s | %.2f | %s |' % (name, value, '%s %s' % (op, bound) if bound is not None else ''))
    lines += ['', 'The same ratios in %d paired rounds: each round runs RESERVE, SADD, sold-out RESERVE, HMGET,'
              ' script A, RESERVE + STREAM and XADD back to back (%s requests each, -P 16, fresh keys), and each'
              ' ratio is taken within its round, so load from elsewhere on the machine moves both sides of it'
              ' together. Server CPU per call is the event-loop thread\'s CPU time (`/proc/<pid>/schedstat`)'
              ' over the run, divided by the calls: what the server spent, whatever the client did.'
              % (len(paired), '{:,}'.format(args.paired_requests)), '',
              '| ratio (per round) | median | lowest | highest | target |', '|---|---:|---:|---:|---|']
    for name, med, lo, hi, bound, op in paired_ratios(paired):
        lines.append('| %s | %.2f | %.2f | %.2f | %s |' % (name, med, lo, hi, '%s %s' % (op, bound) if bound is not None else ''))
    lines += ['', '## Latency under load', '',
              'Fixed offered rate %s/s, unpipelined, %d connections each on its own staggered schedule'
              ' (bench/loadgen, one thread on CPU 1), %d s per row, the first second dropped. Latency runs'
              ' from the moment a command was due to its reply (no coordinated omission); the PING row is the'
              ' floor of the machine and the generator. Random users: every RESERVE is a new buyer.'
              % ('{:,}'.format(args.rate), args.clients, args.seconds), '',
              '| command | achieved ops/s | p50 µs | p99 µs | p99.9 µs | max µs | errors |',
              '|---|---:|---:|---:|---:|---:|---:|']
    for row in lat:
        lines.append('| {name} | {achieved:,} | {p50:,} | {p99:,} | {p999:,} | {max:,} | {errors} |'.format(**row))
    if bk is not None:
        lines += backend_report(bk, args)
    lines += ['', '## Targets', '', '| target | measured | met |', '|---|---:|---|']
    for name, value, bound, op in targets:
        met = value >= bound if op == '≥' else value <= bound
        lines.append('| %s | %.2f | %s |' % (name, value, 'yes' if met else '**no**'))
    return '\n'.join(lines) + '\n'


# -- The backend column (issue 16): the module, the Functions library and
# seed script A on the same server, in paired alternating rounds. ----------

BACKENDS = ('module', 'library', 'script A')
KINDS = ('RESERVE', 'RESERVE + STREAM', 'RESERVE: sold out')


def load_library(conn, path):
    """FUNCTION LOAD REPLACE of the library; its version."""
    with open(path) as f:
        conn.execute_command('FUNCTION', 'LOAD', 'REPLACE', f.read())
    return conn.execute_command('FCALL_RO', 'seckill_version', 1, 'seckill:probe')


def _sale_cmd(backend, name, key, *args, stream=None):
    """SECKILL.NAME key args... as the backend takes it: the library's call
    declares the sale's stream (docs/managed-redis.md, "Calling it")."""
    if backend == 'module':
        return ['SECKILL.' + name.upper(), key, *args]
    keys = [key, stream] if stream and name not in ('info', 'get') else [key]
    return ['FCALL_RO' if name in ('info', 'get') else 'FCALL', 'seckill_' + name, len(keys), *keys, *args]


def _info(conn, backend, key):
    reply = conn.execute_command(*_sale_cmd(backend, 'info', key))
    return reply if isinstance(reply, dict) else dict(zip(reply[0::2], reply[1::2]))


def backend_case(conn, shas, backend, kind):
    """(setup, redis-benchmark args, commandstats name) of one cell."""
    user = 'u__rand_int__'
    stream = kind == 'RESERVE + STREAM'
    total = 0 if kind == 'RESERVE: sold out' else BIG
    if backend == 'script A':   # with STREAM: script B, A + XADD
        keys = ['stock:{b}', 'buyers:{b}'] + (['events:{b}'] if stream else [])

        def setup(c):
            c.delete('stock:{b}', 'buyers:{b}', 'events:{b}')
            c.set('stock:{b}', total)
        args = ['EVALSHA', shas['B' if stream else 'A'], len(keys), *keys, user, 1] + \
            (['r__rand_int__'] if stream else [])
        return setup, args, 'evalsha'
    key = 'sale:{b}' if backend == 'module' else 'lib:{b}'

    def setup(c):
        c.delete(key, key + ':ev')
        c.execute_command(*_sale_cmd(backend, 'init', key, total, 'LIMIT', 10 ** 6,
                                     *(['STREAM', key + ':ev'] if stream else []),
                                     stream=stream and key + ':ev'))
    return setup, _sale_cmd(backend, 'reserve', key, user, stream=stream and key + ':ev'), (
        'seckill.reserve' if backend == 'module' else 'fcall')


def backend_rounds(srv, rounds, requests):
    """rows[round][(backend, kind)] = (ops/s, server CPU ns per call,
    commandstats usec_per_call). Within a round each kind runs on the three
    backends back to back, in the reverse order every other round."""
    c = srv.conn
    shas = {'A': c.script_load(SCRIPT_A), 'B': c.script_load(SCRIPT_B)}
    out = []
    for i in range(rounds):
        row = {}
        for kind in KINDS:
            for backend in (BACKENDS if i % 2 == 0 else BACKENDS[::-1]):
                setup, args, command = backend_case(c, shas, backend, kind)
                setup(c)
                c.config_resetstat()
                before = server_cpu_ns(srv.proc.pid)
                ops = benchmark(srv.port, args, requests, 16, 100_000_000)
                ns = (server_cpu_ns(srv.proc.pid) - before) / requests
                row[(backend, kind)] = (ops, ns, usec_per_call(c, command))
                print('round %d %-18s %-9s %10s ops/s %8.0f ns/call' % (
                    i + 1, kind, backend, '{:,.0f}'.format(ops), ns), flush=True)
        c.flushall()
        out.append(row)
    return out


def backend_memory(srv, count):
    """used_memory delta and MEMORY USAGE per reservation of `count`
    reservations (users u0 ..., generated ids, no stream) per backend."""
    c = srv.conn
    sha = c.script_load(SCRIPT_A)
    out = {}
    for backend in BACKENDS:
        c.flushall()
        base = c.info('memory')['used_memory']
        if backend == 'script A':
            c.set('stock:{m}', BIG)
            keys = ['stock:{m}', 'buyers:{m}']
        else:
            c.execute_command(*_sale_cmd(backend, 'init', 'mem:{m}', BIG, 'LIMIT', 1))
            keys = ['mem:{m}']
        pipe = c.pipeline(transaction=False)
        for n in range(count):
            if backend == 'script A':
                pipe.evalsha(sha, 2, 'stock:{m}', 'buyers:{m}', 'u%d' % n, 1)
            else:
                pipe.execute_command(*_sale_cmd(backend, 'reserve', 'mem:{m}', 'u%d' % n))
            if n % 10000 == 9999:
                pipe.execute()
        pipe.execute()
        used = c.info('memory')['used_memory'] - base
        usage = sum(c.memory_usage(k, samples=0) or 0 for k in keys)
        if backend == 'script A':
            assert c.scard('buyers:{m}') == count
        else:
            info = _info(c, backend, 'mem:{m}')
            assert int(info['reservations']) == count and info['invariant'] == 'ok', info
        out[backend] = {'used': used / count, 'usage': usage / count}
        print('memory %-9s %.1f B per reservation (used_memory), %.1f B (MEMORY USAGE)' % (
            backend, used / count, usage / count), flush=True)
    c.flushall()
    return out


def _pinger(port, stop, conn, cpu):
    """A separate client (its own process, on CPU `cpu`): PING back to
    back until `stop`; then receives (t0, t1) and answers the worst and the
    count of the PINGs sent in [t0, t1], and the worst in the second
    before t0 (the idle floor)."""
    os.sched_setaffinity(0, {cpu})
    r = redis.Redis(port=port)
    samples = []
    while not stop.is_set():
        t = time.monotonic()
        r.ping()
        samples.append((t, time.monotonic() - t))
    t0, t1 = conn.recv()
    during = [d for t, d in samples if t0 <= t <= t1]
    idle = [d for t, d in samples if t0 - 1.0 <= t < t0]
    during.sort()
    p99 = during[int(len(during) * 0.99)] if during else float('nan')
    conn.send((max(during, default=float('nan')), len(during), max(idle, default=float('nan')), p99))


class Pinger:
    def __init__(self, port):
        ctx = multiprocessing.get_context('fork')
        self.stop = ctx.Event()
        self.conn, child = ctx.Pipe()
        self.proc = ctx.Process(target=_pinger, args=(port, self.stop, child, 1), daemon=True)
        self.proc.start()

    def result(self, t0, t1):
        """(worst PING s in [t0, t1], PINGs in it, worst PING s in the second
        before, p99 PING s in [t0, t1])."""
        self.stop.set()
        self.conn.send((t0, t1))
        out = self.conn.recv()
        self.proc.join(10)
        return out


def _server_ms(c):
    s, us = c.time()
    return s * 1000 + us // 1000


def expire_round(srv, backend, holds, hold_ms, count):
    """One sale with `holds` pending holds (a stream, as the order pipeline
    has) that all fall due, then released: the module by its timer (held
    off with CLIENT PAUSE WRITE until every hold is due), the library by
    FCALL seckill_expire key `count` until a call answers that none is
    due (`more` 0). Returns (seconds from the start to none pending, worst PING s,
    PINGs meanwhile, worst PING s of the idle second before, calls, p99
    PING s meanwhile)."""
    c = srv.conn
    c.flushall()
    key = 'exp:{e}'
    c.execute_command(*_sale_cmd(backend, 'init', key, BIG, 'LIMIT', 1, 'HOLD', hold_ms,
                                 'STREAM', key + ':ev', stream=key + ':ev'))
    pipe = c.pipeline(transaction=False)
    for n in range(holds):
        pipe.execute_command(*_sale_cmd(backend, 'reserve', key, 'u%d' % n, stream=key + ':ev'))
        if n % 10000 == 9999:
            pipe.execute()
    pipe.execute()
    if backend == 'module':   # the timer writes nothing while writes are paused
        c.execute_command('CLIENT', 'PAUSE', 10 * hold_ms + 60_000, 'WRITE')
    due = _server_ms(c) + hold_ms + 20
    info = _info(c, backend, key)
    if int(info['expired']) or int(info['pending']) != holds:
        raise FillTooSlow('holds ran out while the sale was filled (%s)' % info)
    pinger = Pinger(srv.port)
    while _server_ms(c) < due:
        time.sleep(0.05)
    time.sleep(1.0)     # the pinger's idle second
    calls = 0
    t0 = time.monotonic()
    if backend == 'module':
        c.execute_command('CLIENT', 'UNPAUSE')
        while int(_info(c, backend, key)['pending']):
            time.sleep(0.002)
    else:
        while True:
            calls += 1
            released, more = c.execute_command('FCALL', 'seckill_expire', 2, key, key + ':ev', count)
            if not int(more):
                break
    t1 = time.monotonic()
    worst, pings, idle, p99 = pinger.result(t0, t1)
    info = _info(c, backend, key)
    assert int(info['pending']) == 0 and int(info['expired']) == holds, info
    assert c.xlen(key + ':ev') == 2 * holds
    print('expire %-8s %d holds in %.3f s (%d calls), worst PING %.2f ms of %d, p99 %.2f ms '
          '(idle: worst %.2f ms)' % (backend, holds, t1 - t0, calls, worst * 1000, pings, p99 * 1000,
                                     idle * 1000), flush=True)
    c.flushall()
    return t1 - t0, worst, pings, idle, calls, p99


class FillTooSlow(Exception):
    """Filling the expiry sale took longer than its HOLD (a loaded machine)."""


def expire_rounds(srv, rounds, holds, args):
    """Paired rounds of expire_round; a round whose fill outlasted the HOLD
    runs again with the HOLD doubled (args.expire_hold_ms: the one used)."""
    out = []
    for i in range(rounds):
        row = {}
        for backend in (('module', 'library') if i % 2 == 0 else ('library', 'module')):
            while True:
                try:
                    row[backend] = expire_round(srv, backend, holds, args.expire_hold_ms,
                                                args.expire_count)
                    break
                except FillTooSlow as exc:
                    if args.expire_hold_ms >= 320_000:
                        raise
                    args.expire_hold_ms *= 2
                    print('expire %s: %s; again with HOLD %d ms' % (backend, exc, args.expire_hold_ms),
                          flush=True)
        out.append(row)
    return out


def _med(values):
    return statistics.median(values), min(values), max(values)


def backend_report(bk, args):
    """The backend section of REPORT.md."""
    rounds, mem, exp = bk['rounds'], bk['memory'], bk['expire']

    def cell(backend, kind, i):
        return statistics.median(r[(backend, kind)][i] for r in rounds)

    def ratio(a, b, kind, i):
        return _med([r[(a, kind)][i] / r[(b, kind)][i] for r in rounds])

    def fmt_ratio(m):
        return '%.2f (%.2f–%.2f)' % m

    lines = ['', '## Backends: the module, the Functions library, seed script A', '',
             'The same redis-server %s, with the module loaded and the Functions library'
             ' (`functions/seckill.lua` %s, `FUNCTION LOAD`) beside it. %d paired rounds: in each round every'
             ' call runs on the three backends back to back (%s requests each, redis-benchmark `-P 16 -c 50`,'
             ' fresh keys, new buyers; the order reversed every other round), and each ratio is taken within'
             ' its round: the table gives the median of the per-round figures and of the per-round ratios'
             ' (lowest–highest). Script A has no stream: its RESERVE + STREAM is seed script B (A + `XADD`).'
             ' Server CPU per call: the event loop thread\'s CPU time (`/proc/<pid>/schedstat`) over the run'
             ' ÷ calls; `usec_per_call`: `INFO commandstats` (`seckill.reserve`, `fcall`, `evalsha`), the'
             ' wall time inside the call, which also counts time the server thread waited for the CPU (the'
             ' machine\'s two cores are shared: load average %s at the start of the run, %s at its end), so'
             ' the CPU rows are the steadier ones. Ratio columns divide the row\'s own figures: module ÷'
             ' library > 1 on ops/s, < 1 on costs, means the module is ahead.'
             % (args.redis_version, args.library_version, len(rounds), '{:,}'.format(args.backend_requests),
                args.load_start, args.load_end),
             '',
             '| figure | module | library | script A | module ÷ library | library ÷ script A |',
             '|---|---:|---:|---:|---:|---:|']
    for kind in KINDS:
        lines.append('| %s ops/s | %s | %s | %s | %s | %s |' % (
            kind, *('{:,.0f}'.format(cell(b, kind, 0)) for b in BACKENDS),
            fmt_ratio(ratio('module', 'library', kind, 0)), fmt_ratio(ratio('library', 'script A', kind, 0))))
    for kind in KINDS:
        lines.append('| %s server CPU µs/call | %.2f | %.2f | %.2f | %s | %s |' % (
            kind, *(cell(b, kind, 1) / 1000 for b in BACKENDS),
            fmt_ratio(ratio('module', 'library', kind, 1)), fmt_ratio(ratio('library', 'script A', kind, 1))))
    for kind in KINDS:
        lines.append('| %s usec_per_call | %.2f | %.2f | %.2f | %s | %s |' % (
            kind, *(cell(b, kind, 2) for b in BACKENDS),
            fmt_ratio(ratio('module', 'library', kind, 2)), fmt_ratio(ratio('library', 'script A', kind, 2))))
    for field, label in (('used', 'used_memory delta'), ('usage', 'MEMORY USAGE')):
        m = {b: mem[b][field] for b in BACKENDS}
        lines.append('| bytes per reservation at %s, %s | %.1f | %.1f | %.1f | %.2f | %.2f |' % (
            '{:,}'.format(args.backend_sale_size), label, m['module'], m['library'], m['script A'],
            m['module'] / m['library'], m['library'] / m['script A']))
    e_time = {b: _med([r[b][0] for r in exp]) for b in ('module', 'library')}
    e_ping = {b: _med([r[b][1] for r in exp]) for b in ('module', 'library')}
    lines.append('| expire %s due holds, s | %.3f | %.3f | | %s | |' % (
        '{:,}'.format(args.expire_holds), e_time['module'][0], e_time['library'][0],
        fmt_ratio(_med([r['module'][0] / r['library'][0] for r in exp]))))
    lines.append('| worst PING meanwhile, ms | %.2f | %.2f | | %s | |' % (
        e_ping['module'][0] * 1000, e_ping['library'][0] * 1000,
        fmt_ratio(_med([r['module'][1] / r['library'][1] for r in exp]))))
    lines += ['', 'Memory: %s reservations per backend on an empty server (users `u0` … , generated ids, no'
              ' stream, LIMIT 1; script A: the stock key and the buyers set), filled through a pipeline;'
              ' `used_memory` after minus before, ÷ reservations.' % '{:,}'.format(args.backend_sale_size),
              '',
              'Expiry, %d paired rounds: a sale with HOLD %d ms, a stream, and %s pending holds made through a'
              ' pipeline; once every hold is due, the clock starts. The module: its timer (held off until then'
              ' by `CLIENT PAUSE WRITE`, which it obeys; the clock starts at `CLIENT UNPAUSE`) until'
              ' `SECKILL.INFO` shows none pending (polled every 2 ms). The library: `FCALL seckill_expire 2 key'
              ' stream %d` back to back until a call answers that none is due (what the order worker does). Every'
              ' release writes its `expired` stream entry. Meanwhile a separate client (its own process, on'
              ' CPU 1) sends PING back to back; the row is the worst round trip of the PINGs sent in that time'
              ' (idle, the second before: %s ms).'
              % (len(exp), args.expire_hold_ms, '{:,}'.format(args.expire_holds), args.expire_count,
                 ', '.join('%.2f' % (r[b][3] * 1000) for r in exp for b in ('module', 'library'))), '',
              '| expiry round | module s | module PING worst / p99 ms (PINGs) | library s | library calls |'
              ' library PING worst / p99 ms (PINGs) |',
              '|---|---:|---:|---:|---:|---:|']
    for i, r in enumerate(exp):
        m, lib = r['module'], r['library']
        lines.append('| %d | %.3f | %.2f / %.2f (%d) | %.3f | %d | %.2f / %.2f (%d) |' % (
            i + 1, m[0], m[1] * 1000, m[5] * 1000, m[2], lib[0], lib[4], lib[1] * 1000, lib[5] * 1000,
            lib[2]))
    res = ratio('module', 'library', 'RESERVE', 0)
    lib_a = ratio('library', 'script A', 'RESERVE', 0)
    lines += ['', 'Issue 16 expects:', '',
              '| expectation | measured (median of rounds) | met |', '|---|---:|---|',
              '| module ≥ 3× the library on RESERVE (ops/s) | %.2f× | %s |' % (res[0], 'yes' if res[0] >= 3 else '**no**'),
              '| library no slower than script A on RESERVE (ops/s) | %.2f× | %s |' % (
                  lib_a[0], 'yes' if lib_a[0] >= 1 else '**no**'),
              '', 'Reproduce: `%s` (`make bench` runs `bench/bench.py --module $(MODULE) $(BENCH_ARGS)`;'
              ' the figures of another run differ, their ratios much less).' % args.command]
    return lines


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument('--reps', type=int, default=3)
    p.add_argument('--requests', type=int, default=300_000)
    p.add_argument('--sale-size', type=int, default=1_000_000)
    p.add_argument('--out', default=os.path.join(HERE, 'reports', 'REPORT.md'))
    p.add_argument('--rate', type=int, default=20_000, help='offered ops/s of the latency-under-load table')
    p.add_argument('--clients', type=int, default=200)
    p.add_argument('--seconds', type=int, default=6)
    p.add_argument('--rounds', type=int, default=9, help='paired rounds of the ratio judges')
    p.add_argument('--paired-requests', type=int, default=200_000)
    p.add_argument('--module', default=MODULE, help='the module to measure (default: the release build)')
    p.add_argument('--library', default=LIBRARY, help='the Functions library to measure beside it')
    p.add_argument('--loadgen', help='a built bench/loadgen binary (default: cargo builds it)')
    p.add_argument('--backend-rounds', type=int, default=5, help='paired rounds of the backend column')
    p.add_argument('--backend-requests', type=int, default=200_000)
    p.add_argument('--backend-sale-size', type=int, default=1_000_000)
    p.add_argument('--expire-holds', type=int, default=100_000)
    p.add_argument('--expire-rounds', type=int, default=3)
    p.add_argument('--expire-hold-ms', type=int, default=10_000,
                   help='HOLD of the expiry sale: longer than filling it takes')
    p.add_argument('--expire-count', type=int, default=256, help='COUNT of each seckill_expire call')
    p.add_argument('--skip-classic', action='store_true',
                   help='only the backend column (a quick look; the report is not written)')
    args = p.parse_args()
    args.command = ' '.join(['bench/bench.py'] + sys.argv[1:])
    args.load_start = '%.1f' % os.getloadavg()[0]
    workdir = os.path.join(ROOT, 'bench', 'out')
    os.makedirs(workdir, exist_ok=True)
    # Start empty: an RDB left by a previous run would be loaded, and a
    # master restarted from an RDB keeps a replication backlog to feed.
    rdb = os.path.join(workdir, 'bench.rdb')
    if os.path.exists(rdb):
        os.remove(rdb)
    loadgen = None if args.skip_classic else build_loadgen(workdir, args.loadgen)
    srv = Server(free_port(), workdir, args.module)
    try:
        args.redis_version = srv.conn.info('server')['redis_version']
        args.library_version = load_library(srv.conn, args.library)
        bk = {'rounds': backend_rounds(srv, args.backend_rounds, args.backend_requests)}
        bk['expire'] = expire_rounds(srv, args.expire_rounds, args.expire_holds, args)
        bk['memory'] = backend_memory(srv, args.backend_sale_size)
        if args.skip_classic:
            args.load_end = '%.1f' % os.getloadavg()[0]
            print('\n'.join(backend_report(bk, args)))
            return 0
        results = scenarios(srv.conn)
        for sc in results:
            run_scenario(srv, sc, args.reps, args.requests)
            print('%-28s %12s ops/s (-P 16) %10s ops/s (-P 1) %6.2f us/call' % (
                sc.name, '{:,.0f}'.format(sc.ops[16]), '{:,.0f}'.format(sc.ops[1]), sc.usec), flush=True)
        by = {sc.name: sc for sc in results}
        paired = paired_rounds(srv, by, args.rounds, args.paired_requests)
        for name, med, lo, hi, _, _ in paired_ratios(paired):
            print('%-62s median %.3f (%.3f .. %.3f)' % (name, med, lo, hi), flush=True)
        lat = latency_under_load(srv, loadgen, args.rate, args.clients, args.seconds)
        mem = memory_and_rdb(srv, args.sale_size)
    finally:
        srv.stop()
    args.load_end = '%.1f' % os.getloadavg()[0]
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    svg_chart(results, os.path.join(os.path.dirname(args.out), 'chart.svg'))
    text = report(results, mem, lat, paired, args, bk)
    with open(args.out, 'w') as f:
        f.write(text)
    print()
    print(text)


if __name__ == '__main__':
    sys.exit(main())
