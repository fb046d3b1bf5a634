#!/usr/bin/env python3
"""Memory per reservation of the Functions library, measured as `make bench`
measures the module's (bench/bench.py memory_and_rdb): one sale
`INIT mem:{m} 10^12 LIMIT 1`, filled with RESERVEs of users u0 ... u<n-1>
(generated ids, no stream), then MEMORY USAGE of the sale key (SAMPLES 0:
every field) and the used_memory delta, each divided by n.

    .venv/bin/python bench/measure_memory.py [--count N] [--server PATH] [--hold MS]
    .venv/bin/python bench/measure_memory.py --entrants [--count N] [--server PATH]

--entrants measures a draw sale (draws v2) instead: `INIT mem:{m} 1000 LIMIT 3
DRAW END <soon> STREAM mem:{m}:ev` entered by u0 ... u<n-1>; MEMORY USAGE of
the sale's keys per entrant; the server time of ENTER (INFO commandstats, and
the slowest from SLOWLOG); then, registration over, the first DRAW, the rest
of the draw, and waitlist steps (measure_entrants says which), each call's
server time from SLOWLOG.

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


def _cpu_us(c):
    i = c.info('cpu')
    return (i['used_cpu_user_main_thread'] + i['used_cpu_sys_main_thread']) * 1e6


_INFO_CPU = []


def _timed(c, *command):
    """(reply, (server time of the call, CPU time of the server's main thread
    meanwhile), in us): SLOWLOG logs every call here; the CPU time (INFO cpu
    around the call, less what an INFO costs) leaves out the moments the
    shared machine did not run the server."""
    if not _INFO_CPU:
        samples = []
        for _ in range(21):
            a = _cpu_us(c)
            samples.append(_cpu_us(c) - a)
        _INFO_CPU.append(sorted(samples)[10])
    c.slowlog_reset()
    a = _cpu_us(c)
    reply = c.execute_command(*command)
    cpu = max(0.0, _cpu_us(c) - a - _INFO_CPU[0])
    return reply, (max(e['duration'] for e in c.slowlog_get(10) if e['command'].startswith(b'FCALL ')), cpu)


def _ms(t):
    return '%.2f ms (CPU %.2f ms)' % (t[0] / 1000, t[1] / 1000)


def measure_entrants(c, count, name, version):
    """A draw sale of draws v2: 1,000 units, LIMIT 3, entrants u0 ... u<n-1>
    asking 3 units each but one in 5,000 (n % 5000 == 4999) asking 1, a
    STREAM for the winners' ids. Memory of the sale's keys per entrant; ENTER
    (mean, and the slowest from SLOWLOG); the first DRAW and the rest of the
    draw; then waitlist steps: the RELEASE of a 1-unit winner (1 unit back,
    and every waiting entrant asks 3: 512 looked at, none fits) and the calls
    that go on through the waitlist (seckill_expire, 512 more each: first what
    <key>:wait holds, then the draw positions not reached yet), and the
    RELEASE of a 3-unit winner (one promotion, then the unit left over from
    the first RELEASE looks through the rest of the call's 512). Once 333 winners hold 999
    units the draw looks for a 1-unit entrant: about 5,000 positions, the
    DRAW calls that look at 200 entrants (the library's most) and make no
    winner."""
    key, stream = 'mem:{m}', 'mem:{m}:ev'
    keys = (key, key + ':entrants', key + ':perm', key + ':wait', key + ':secret')
    # What the calls declare (docs/managed-redis.md, "Calling it"): the
    # stream and the draw keys; DRAW and INIT the secret too.
    calls = (key, stream) + keys[1:4]
    draws = calls + (key + ':secret',)
    base = c.info('memory')['used_memory']
    # Registration ends when the entrants are in: up to 150 us an ENTER on a
    # loaded machine, and the client's own time, with a margin.
    end = server_ms(c) + 10000 + count // 6
    c.execute_command('FCALL', 'seckill_init', len(draws), *draws, 1000, 'LIMIT', 3, 'DRAW', 'END', end, 'STREAM', stream)
    c.config_set('slowlog-log-slower-than', 200)
    c.config_set('slowlog-max-len', 100000)
    c.slowlog_reset()
    c.config_resetstat()
    cpu0 = _cpu_us(c)
    fill_s = fill(c, count, lambda n: ('FCALL', 'seckill_enter', len(calls), *calls, 'u%d' % n,
                                       'QTY', 1 if n % 5000 == 4999 else 3))
    enter_cpu = (_cpu_us(c) - cpu0) / count
    enter_us = c.info('commandstats')['cmdstat_fcall']['usec_per_call']
    slow = sorted(e['duration'] for e in c.slowlog_get(100000)
                  if e['command'].split()[:2] == [b'FCALL', b'seckill_enter'])
    c.slowlog_reset()
    slowest = slow[-1] if slow else None
    used = c.info('memory')['used_memory'] - base
    usage = [c.memory_usage(k, samples=0) or 0 for k in keys]
    info = c.execute_command('FCALL_RO', 'seckill_info', 1, key)
    info = dict(zip(info[0::2], info[1::2]))
    assert int(info[b'entrants']) == count, info
    print('%s %s, %d entrants (user ids u0 ... u%d): MEMORY USAGE hash %d + arrival list %d + secret %d B '
          '= %.1f B per entrant; used_memory delta %.1f B per entrant; ENTER %.1f us of server time on average '
          '(the server CPU %.1f us an ENTER), '
          'the slowest %s, %d over 200 us, %d over 1 ms, %d over 10 ms (filled in %.1f s)'
          % (name, version, count, count - 1, usage[0], usage[1], usage[4], sum(usage) / count, used / count,
             enter_us, enter_cpu, '%d us' % slowest if slowest else 'under 200 us', len(slow), sum(1 for d in slow if d > 1000),
             sum(1 for d in slow if d > 10000), fill_s))
    while server_ms(c) < end:
        time.sleep(0.05)
    c.config_set('slowlog-log-slower-than', 0)
    (drawn, _, left), first = _timed(c, 'FCALL', 'seckill_draw', len(draws), *draws, 'COUNT', 1000)
    print('first DRAW COUNT 1000: %d winners, %s' % (drawn, _ms(first)))
    took = []
    while left:
        (_, _, left), us = _timed(c, 'FCALL', 'seckill_draw', len(draws), *draws, 'COUNT', 1000)
        took.append(us)
    took.sort(key=lambda t: t[1])
    info = c.execute_command('FCALL_RO', 'seckill_info', 1, key)
    info = dict(zip(info[0::2], info[1::2]))
    print('the rest of the draw: %d DRAW calls, median %s, the most CPU %s; %d winners, '
          '%d waiting in <key>:wait, %d fields in <key>:perm'
          % (len(took), _ms(took[len(took) // 2]), _ms(took[-1]), int(info[b'drawn']), c.zcard(key + ':wait'),
             c.hlen(key + ':perm')))
    winners = [e[1] for e in c.xrange(stream) if e[1][b'event'] == b'reserved']
    one = next(w for w in winners if w[b'qty'] == b'1')
    (st, rem), us = _timed(c, 'FCALL', 'seckill_release', len(calls), *calls, one[b'rid'])
    print('waitlist step, RELEASE of a 1-unit winner (512 waiting entrants looked at, none fits): %s' % _ms(us))
    steps = []
    for _ in range(40):
        _, us = _timed(c, 'FCALL', 'seckill_expire', len(calls), *calls)
        steps.append(us)
    print('waitlist steps going on (seckill_expire: 512 looked at in <key>:wait, then unreached positions, '
          'at most 128 a call): %s; the most CPU %s' % (', '.join('%.2f' % (s[1] / 1000) for s in steps),
                                                        _ms(max(steps, key=lambda t: t[1]))))
    three = next(w for w in winners if w[b'qty'] == b'3')
    _, us = _timed(c, 'FCALL', 'seckill_release', len(calls), *calls, three[b'rid'])
    print('waitlist step, RELEASE of a 3-unit winner (one promotion, then the unit left over looks further): %s'
          % _ms(us))
    usage = [c.memory_usage(k, samples=0) or 0 for k in keys]
    print('after the draw: MEMORY USAGE hash %d + arrival list %d + perm %d + wait %d B = %.1f B per entrant'
          % (usage[0], usage[1], usage[2], usage[3], sum(usage) / count))


if __name__ == '__main__':
    main()
