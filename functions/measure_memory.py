#!/usr/bin/env python3
"""Memory per reservation of the Functions library, measured as `make bench`
measures the module's (bench/bench.py memory_and_rdb): one sale
`INIT mem:{m} 10^12 LIMIT 1`, filled with RESERVEs of users u0 ... u<n-1>
(generated ids, no stream), then MEMORY USAGE of the sale key (SAMPLES 0:
every field) and the used_memory delta, each divided by n.

    .venv/bin/python functions/measure_memory.py [--count N] [--server PATH] [--hold MS]
    .venv/bin/python functions/measure_memory.py --entrants [--count N] [--server PATH]

--entrants measures a draw sale instead: `INIT mem:{m} 10^12 LIMIT 1 DRAW
END <soon>` entered by u0 ... u<n-1>; MEMORY USAGE of the sale hash, its draw
zset and its arrival list, per entrant; the server time of ENTER (INFO
commandstats); then, registration over, 20 DRAW COUNT 1000 and 20 DRAW COUNT 100
calls: the median and the longest.

Starts its own server on a free port (never 6379) in a temporary folder,
loads functions/seckill.lua, and stops the server by pid when done.
"""

import argparse
import time

from local_server import local_server


def main():
    p = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    p.add_argument('--count', type=int, default=1_000_000)
    p.add_argument('--server', default='redis-server')
    p.add_argument('--hold', type=int, default=0, help='HOLD ms of the sale (0: no holds, as make bench)')
    p.add_argument('--entrants', action='store_true', help='a draw sale: memory per entrant, ENTER and DRAW times')
    a = p.parse_args()
    with local_server(a.server) as c:
        version = c.info('server')
        name = version.get('server_name', 'redis')
        if a.entrants:
            return measure_entrants(c, a.count, name, version.get(name + '_version', version['redis_version']))
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


def server_ms(c):
    sec, usec = c.time()
    return sec * 1000 + usec // 1000


def fill(c, count, command):
    """Sends `command(n)` for n in 0..count-1, pipelined; returns the seconds."""
    t0 = time.perf_counter()
    pipe = c.pipeline(transaction=False)
    for n in range(count):
        pipe.execute_command(*command(n))
        if n % 10000 == 9999:
            pipe.execute()
    pipe.execute()
    return time.perf_counter() - t0


def measure_entrants(c, count, name, version):
    key = 'mem:{m}'
    keys = (key, key + ':draw', key + ':entrants')
    base = c.info('memory')['used_memory']
    # Registration ends when the entrants are in: up to 150 us an ENTER on a
    # loaded machine, and the client's own time, with a margin.
    end = server_ms(c) + 10000 + count // 6
    c.execute_command('FCALL', 'seckill_init', 1, key, 10 ** 12, 'LIMIT', 1, 'DRAW', 'END', end)
    c.config_resetstat()
    fill_s = fill(c, count, lambda n: ('FCALL', 'seckill_enter', 1, key, 'u%d' % n))
    enter_us = c.info('commandstats')['cmdstat_fcall']['usec_per_call']
    used = c.info('memory')['used_memory'] - base
    usage = [c.memory_usage(k, samples=0) for k in keys]
    info = c.execute_command('FCALL_RO', 'seckill_info', 1, key)
    info = dict(zip(info[0::2], info[1::2]))
    assert int(info[b'entrants']) == count, info
    print('%s %s, %d entrants (user ids u0 ... u%d): MEMORY USAGE hash %d + draw zset %d + arrival list %d B '
          '= %.1f B per entrant; used_memory delta %.1f B per entrant; ENTER %.1f us of server time '
          '(filled in %.1f s)' % (name, version, count, count - 1, usage[0], usage[1], usage[2],
                                   sum(usage) / count, used / count, enter_us, fill_s))
    while server_ms(c) < end:
        time.sleep(0.05)
    for count in (1000, 100):
        took = []
        for _ in range(20):
            c.config_resetstat()
            left = c.execute_command('FCALL', 'seckill_draw', 1, key, 'COUNT', count)[2]
            took.append(c.info('commandstats')['cmdstat_fcall']['usec_per_call'] / 1000)
            if left == 0:
                break
        took.sort()
        print('DRAW COUNT %d: %d calls, server time median %.1f ms, longest %.1f ms'
              % (count, len(took), took[len(took) // 2], took[-1]))

if __name__ == '__main__':
    main()
