#!/usr/bin/env python3
"""The library's RESERVE against the seed's script A (bench/bench.py
SCRIPT_A), paired on one server: blocks of --block calls (pipelined, a new
user every call) rotate between script A and the library (and, with
--baseline FILE, an older copy of the library loaded beside it under the
name seckill_old; with --fence, the library's RESERVE on a FENCE sale,
which runs INFO replication once per call), for --cycles cycles; each
block's server time per call
comes from the INFO commandstats delta (evalsha / fcall). Rotating short
blocks keeps a shared machine's load changes out of the ratios. Prints the
median server time per call of each, and the median of the per-cycle ratios
to script A (issue 16: the library should be no slower than script A),
and with --fence the per-cycle ratio of the FENCE sale to the plain one.

    .venv/bin/python bench/bench_reserve.py [--cycles 30] [--block 2000] [--server PATH] [--baseline FILE] [--fence]

Starts its own server on a free port and stops it by pid.
"""

import argparse
import statistics

from local_server import local_server

from bench import SCRIPT_A


def usec(c, cmd):
    s = c.info('commandstats').get('cmdstat_' + cmd, {'usec': 0, 'calls': 0})
    return s['usec'], s['calls']


def block(c, cmd, make, first, count):
    """Server us per call of `count` calls make(first) ... make(first + count - 1)."""
    u0, n0 = usec(c, cmd)
    pipe = c.pipeline(transaction=False)
    for i in range(first, first + count):
        pipe.execute_command(*make(i))
    pipe.execute()
    u1, n1 = usec(c, cmd)
    return (u1 - u0) / (n1 - n0)


def main():
    p = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    p.add_argument('--cycles', type=int, default=30)
    p.add_argument('--block', type=int, default=2000)
    p.add_argument('--server', default='redis-server')
    p.add_argument('--baseline', help='an older seckill.lua to measure beside this one')
    p.add_argument('--fence', action='store_true', help="RESERVE on a FENCE sale too (INIT ... FENCE)")
    a = p.parse_args()
    with local_server(a.server) as c:
        c.execute_command('FCALL', 'seckill_init', 1, 'sale:{b}', 10 ** 12)
        sha = c.script_load(SCRIPT_A)
        c.set('stock:{b}', 10 ** 12)
        runs = {'script A': ('evalsha', lambda i: ('EVALSHA', sha, 2, 'stock:{b}', 'buyers:{b}', 'u%d' % i, 1)),
                'library': ('fcall', lambda i: ('FCALL', 'seckill_reserve', 1, 'sale:{b}', 'u%d' % i))}
        if a.baseline:
            with open(a.baseline) as f:
                old = f.read().replace('#!lua name=seckill', '#!lua name=seckill_old', 1)
            old = old.replace("register('seckill_", "register('seckold_")
            c.execute_command('FUNCTION', 'LOAD', 'REPLACE', old)
            c.execute_command('FCALL', 'seckold_init', 1, 'old:{b}', 10 ** 12)
            runs['baseline'] = ('fcall', lambda i: ('FCALL', 'seckold_reserve', 1, 'old:{b}', 'u%d' % i))
        if a.fence:
            c.execute_command('FCALL', 'seckill_init', 1, 'fence:{b}', 10 ** 12, 'FENCE')
            runs['FENCE'] = ('fcall', lambda i: ('FCALL', 'seckill_reserve', 1, 'fence:{b}', 'u%d' % i))
        names = list(runs)
        times = {n: [] for n in names}
        user = 0
        for cycle in range(a.cycles):
            order = names[cycle % len(names):] + names[:cycle % len(names)]
            for n in order:
                cmd, make = runs[n]
                times[n].append(block(c, cmd, make, user, a.block))
                user += a.block
        for n in names:
            line = '%-9s %.2f us per call (median of %d blocks of %d)' % (n, statistics.median(times[n]), a.cycles,
                                                                         a.block)
            if n != 'script A':
                ratios = [x / y for x, y in zip(times[n], times['script A'])]
                line += ', / script A: median %.2f (quartiles %.2f, %.2f)' % (
                    statistics.median(ratios), *statistics.quantiles(ratios, n=4)[::2])
            if n == 'FENCE':
                extra = [x / y for x, y in zip(times[n], times['library'])]
                line += '; / library: median %.2f (quartiles %.2f, %.2f)' % (
                    statistics.median(extra), *statistics.quantiles(extra, n=4)[::2])
            print(line)
        if a.fence:
            u, n = usec(c, 'info')
            print('INFO inside the FENCE sale\'s RESERVE: %.2f us per call (%d calls)' % (u / n, n))


if __name__ == '__main__':
    main()
