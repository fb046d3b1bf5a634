#!/usr/bin/env python3
"""make bench: SECKILL.* against the Lua scripts it replaces and against the
limits of one Redis key, measured in one run on one server.

Starts its own redis-server (pinned to CPU 0, redis-benchmark to CPU 1),
runs every scenario several times with redis-benchmark (-c 50, pipelined
-P 16 and unpipelined), takes medians, reads server CPU per call from
INFO commandstats, measures memory and RDB times of a 1,000,000-reservation
sale, and writes bench/reports/REPORT.md with bench/reports/chart.svg. Prints the table too.
No pass/fail: the figures are for reading, as ratios within this one run.

Then the backend column on the same server (bench/backends.py, which
`make bench-backends` runs alone): the module, the Functions library and
the seed scripts in paired rounds, expiry of 100k holds, and where the
library's time and memory go (bench/library_floor.py).
"""

import argparse
import os
import statistics
import subprocess
import sys
import time

import backends
from bench_common import (BIG, REPORT, ROOT, SCRIPT_A, SCRIPT_B, SCRIPT_ROLLBACK, benchmark, server_cpu_ns,
                          start_server, usec_per_call)

__all__ = ['SCRIPT_A', 'SCRIPT_B']   # (bench_reserve.py imports SCRIPT_A from here)
NATIVE = ('SADD new member', 'XADD', 'HMGET 3 fields')
# Pending reservations made before RELEASE / CONFIRM runs (REQIDs 000000000000 ...).
PREFILL = 200_000


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


def build_loadgen(prebuilt=None):
    """The workspace member bench/loadgen, built by cargo (in
    target/release); `prebuilt`: a loadgen binary to use instead (no build)."""
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


def report(results, mem, lat, paired, args, backend_lines=()):
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
    lines += backend_lines
    lines += ['', '## Targets', '', '| target | measured | met |', '|---|---:|---|']
    for name, value, bound, op in targets:
        met = value >= bound if op == '≥' else value <= bound
        lines.append('| %s | %.2f | %s |' % (name, value, 'yes' if met else '**no**'))
    return '\n'.join(lines) + '\n'


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument('--reps', type=int, default=3)
    p.add_argument('--requests', type=int, default=300_000)
    p.add_argument('--sale-size', type=int, default=1_000_000)
    p.add_argument('--out', default=REPORT)
    p.add_argument('--rate', type=int, default=20_000, help='offered ops/s of the latency-under-load table')
    p.add_argument('--clients', type=int, default=200)
    p.add_argument('--seconds', type=int, default=6)
    p.add_argument('--rounds', type=int, default=9, help='paired rounds of the ratio judges')
    p.add_argument('--paired-requests', type=int, default=200_000)
    p.add_argument('--loadgen', help='a built bench/loadgen binary (default: cargo builds it)')
    backends.add_args(p)
    args = p.parse_args()
    args.command = ' '.join(['bench/bench.py'] + sys.argv[1:])
    args.load_start = '%.1f' % os.getloadavg()[0]
    loadgen = build_loadgen(args.loadgen)
    srv = start_server(args.module)
    try:
        args.redis_version = srv.conn.info('server')['redis_version']
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
        bk = backends.run(srv, args)
    finally:
        srv.stop()
    args.load_end = '%.1f' % os.getloadavg()[0]
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    svg_chart(results, os.path.join(os.path.dirname(args.out), 'chart.svg'))
    text = report(results, mem, lat, paired, args, backends.sections(bk, args))
    with open(args.out, 'w') as f:
        f.write(text)
    print()
    print(text)


if __name__ == '__main__':
    sys.exit(main())
