#!/usr/bin/env python3
"""The backend column of `make bench` (issues 16 and 24): the module, the
Functions library (functions/seckill.lua) and the seed scripts on one
server, in paired alternating rounds: ops/s and server CPU per call of
RESERVE (against script A), RESERVE + STREAM (against script B, A + XADD)
and a sold-out RESERVE; the time to expire 100k due holds (the module's
timer; the library's seckill_expire called until none is due) with the
worst PING a separate client sees meanwhile; and bench/library_floor.py on
the same server: where the library's time goes, step by step, and its
memory per reservation at 1M with what it consists of.

    .venv/bin/python bench/backends.py [--module PATH] [--backend-rounds 5] [--backend-requests 200000] ...

`make bench-backends` runs it alone (redis-server on CPU 0 with the module,
redis-benchmark on CPU 1) and writes its two sections into
bench/reports/REPORT.md in place of their last version; `make bench`
(bench/bench.py) runs it after its own tables.
"""

import argparse
import multiprocessing
import os
import statistics
import sys
import time

import redis

import library_floor
from bench_common import (BIG, LIBRARY, MODULE, REPORT, SCRIPT_A, SCRIPT_B, benchmark, load_library,
                          server_cpu_ns, start_server, usec_per_call, write_section)

HEADING = '## Backends: the module, the Functions library, the seed scripts'
# 'script A' runs script B (A + XADD) on the RESERVE + STREAM rows.
BACKENDS = ('module', 'library', 'script A')
KINDS = ('RESERVE', 'RESERVE + STREAM', 'RESERVE: sold out')


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
    """The backend section of REPORT.md (a list of lines; lines[1] the heading)."""
    rounds, mem, exp = bk['rounds'], bk['memory'], bk['expire']

    def cell(backend, kind, i):
        return statistics.median(r[(backend, kind)][i] for r in rounds)

    def ratio(a, b, kind, i):
        return _med([r[(a, kind)][i] / r[(b, kind)][i] for r in rounds])

    def fmt_ratio(m):
        return '%.2f (%.2f–%.2f)' % m

    def script(kind):
        return 'B' if kind == 'RESERVE + STREAM' else 'A'

    lines = ['', HEADING, '',
             'Written by `%s` on %s: redis-server %s with the module loaded and the Functions library'
             ' (`functions/seckill.lua` %s, `FUNCTION LOAD`) beside it. %d paired rounds: in each round every'
             ' call runs on the three backends back to back (%s requests each, redis-benchmark `-P 16 -c 50`,'
             ' fresh keys, new buyers; the order reversed every other round), and each ratio is taken within'
             ' its round: the table gives the median of the per-round figures and of the per-round ratios'
             ' (lowest–highest). The seed script column is script A on the RESERVE and sold-out rows and'
             ' script B (A + `XADD`) on the RESERVE + STREAM rows. Server CPU per call: the event loop'
             ' thread\'s CPU time (`/proc/<pid>/schedstat`) over the run ÷ calls; `usec_per_call`: `INFO'
             ' commandstats` (`seckill.reserve`, `fcall`, `evalsha`), the wall time inside the call, which also'
             ' counts time the server thread waited for the CPU (the machine\'s two cores are shared: load'
             ' average %s at the start of the run, %s at its end), so the CPU rows are the steadier ones. Ratio'
             ' columns divide the row\'s own figures: on ops/s, > 1 means the first is ahead; on costs, < 1.'
             % (args.command, time.strftime('%Y-%m-%d'), args.redis_version, args.library_version, len(rounds),
                '{:,}'.format(args.backend_requests), args.load_start, args.load_end),
             '',
             '| figure | module | library | seed script | module ÷ library | library ÷ seed script |',
             '|---|---:|---:|---:|---:|---:|']
    for label, i, scale in (('ops/s', 0, None), ('server CPU µs/call', 1, 1000), ('usec_per_call', 2, 1)):
        for kind in KINDS:
            if scale is None:
                cells = ['{:,.0f}'.format(cell(b, kind, i)) for b in BACKENDS]
            else:
                cells = ['%.2f' % (cell(b, kind, i) / scale) for b in BACKENDS]
            lines.append('| %s %s (script %s) | %s | %s | %s | %s | %s |' % (
                kind, label, script(kind), *cells, fmt_ratio(ratio('module', 'library', kind, i)),
                fmt_ratio(ratio('library', 'script A', kind, i))))
    for field, label in (('used', 'used_memory delta'), ('usage', 'MEMORY USAGE')):
        m = {b: mem[b][field] for b in BACKENDS}
        lines.append('| bytes per reservation at %s, %s (script A) | %.1f | %.1f | %.1f | %.2f | %.2f |' % (
            '{:,}'.format(mem['count']), label, m['module'], m['library'], m['script A'],
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
              ' stream, LIMIT 1; script A: its buyers set), filled through a pipeline; `used_memory` after minus'
              ' before, ÷ reservations. What the library\'s bytes consist of: the next section.'
              % '{:,}'.format(mem['count']),
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
    res = ratio('module', 'library', 'RESERVE', 0)[0]
    lib_a = ratio('library', 'script A', 'RESERVE', 0)[0]
    lib_b = ratio('library', 'script A', 'RESERVE + STREAM', 0)[0]
    cpu_a = 1 / ratio('library', 'script A', 'RESERVE', 1)[0]
    cpu_b = 1 / ratio('library', 'script A', 'RESERVE + STREAM', 1)[0]
    per = mem['library']['used']

    def met(ok):
        return 'yes' if ok else '**no**'
    lines += ['', 'Issues 16 and 24 expect:', '',
              '| expectation | measured (median of rounds) | met |', '|---|---:|---|',
              '| module ≥ 3× the library on RESERVE (ops/s) | %.2f× | %s |' % (res, met(res >= 3)),
              '| library RESERVE ≥ 0.8× script A (ops/s; by server CPU per call %.2f×) | %.2f× | %s |' % (
                  cpu_a, lib_a, met(lib_a >= 0.8)),
              '| library RESERVE + STREAM ≥ 0.8× script B (ops/s; by server CPU per call %.2f×) | %.2f× | %s |' % (
                  cpu_b, lib_b, met(lib_b >= 0.8)),
              '| library ≤ 100 B per reservation at %s, no stream (used_memory delta) | %.1f B | %s |' % (
                  '{:,}'.format(mem['count']), per, met(per <= 100)),
              '', 'Reproduce: `make bench-backends` (this section and the next alone) or `make bench` (the whole'
              ' report); the figures of another run differ, their ratios much less.']
    return lines


def add_args(p):
    """The backend options, of bench.py's command line and this one's."""
    p.add_argument('--module', default=MODULE, help='the module to measure (default: the release build)')
    p.add_argument('--library', default=LIBRARY, help='the Functions library to measure beside it')
    p.add_argument('--backend-rounds', type=int, default=5, help='paired rounds of the backend column')
    p.add_argument('--backend-requests', type=int, default=200_000)
    p.add_argument('--backend-sale-size', type=int, default=1_000_000)
    p.add_argument('--expire-holds', type=int, default=100_000)
    p.add_argument('--expire-rounds', type=int, default=3)
    p.add_argument('--expire-hold-ms', type=int, default=10_000,
                   help='HOLD of the expiry sale: longer than filling it takes')
    p.add_argument('--expire-count', type=int, default=256, help='COUNT of each seckill_expire call')
    p.add_argument('--floor-cycles', type=int, default=21, help='cycles of the library floor ladder')
    p.add_argument('--floor-block', type=int, default=2000, help='calls per block of the ladder')


def run(srv, args):
    """The backend rounds, expiry rounds, the floor ladder and the memory
    at --backend-sale-size on `srv`: the measurements for `sections`."""
    args.library_version = load_library(srv.conn, args.library)
    bk = {'rounds': backend_rounds(srv, args.backend_rounds, args.backend_requests)}
    bk['expire'] = expire_rounds(srv, args.expire_rounds, args.expire_holds, args)
    bk['floor'] = library_floor.ladder(srv.conn, args.floor_cycles, args.floor_block)
    print('\n'.join(library_floor.ladder_lines(bk['floor'])), flush=True)
    bk['memory'] = library_floor.memory(srv.conn, args.backend_sale_size, True)
    return bk


def sections(bk, args):
    """The backend section and the floor section, as lines."""
    args.cycles, args.block = args.floor_cycles, args.floor_block
    return backend_report(bk, args) + library_floor.section(bk['floor'], bk['memory'], args,
                                                            (args.load_start, args.load_end))


def main():
    p = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    add_args(p)
    p.add_argument('--out', default=REPORT)
    p.add_argument('--no-write', action='store_true', help='print the sections only')
    args = p.parse_args()
    args.command = ' '.join(['bench/backends.py'] + sys.argv[1:])
    args.load_start = '%.1f' % os.getloadavg()[0]
    srv = start_server(args.module)
    try:
        args.redis_version = srv.conn.info('server')['redis_version']
        bk = run(srv, args)
    finally:
        srv.stop()
    args.load_end = '%.1f' % os.getloadavg()[0]
    lines = sections(bk, args)
    print('\n'.join(lines))
    if not args.no_write:
        at = lines.index(library_floor.HEADING) - 1
        write_section(args.out, lines[:at])
        write_section(args.out, lines[at:])
    return 0


if __name__ == '__main__':
    sys.exit(main())
