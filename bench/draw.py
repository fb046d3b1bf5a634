"""Draw sales at scale in a real redis-server: ENTER and DRAW per call, from SLOWLOG.

Starts its own server (local_server.own_server) with the module, registers
N entrants (pipelined), waits for the end of registration and draws with
COUNT 1000 until the draw is complete, with and without a stream. Prints the
mean and the slowest calls as SLOWLOG timed them (the command alone, in
microseconds), and the same for N RESERVEs on a plain sale in the same
server as the yardstick: on a shared machine the slowest single calls of
both are the machine's, at positions that change from run to run.

    make bench-draw                      (DRAW_ARGS='--entrants 300000')
    .venv/bin/python bench/draw.py --module target/release/libredis_seckill.so --entrants 1000000
"""

import argparse
import os
import time

from local_server import own_server

PIPELINE = 10000


def server_ms(conn):
    sec, usec = conn.time()
    return sec * 1000 + usec // 1000


def send_all(conn, commands):
    for i in range(0, len(commands), PIPELINE):
        p = conn.pipeline(transaction=False)
        for cmd in commands[i:i + PIPELINE]:
            p.execute_command(*cmd)
        p.execute()


def timed(conn, name):
    """SLOWLOG durations of `name`, then a reset: [(us, slowlog id)]."""
    log = conn.slowlog_get(2000000)
    conn.slowlog_reset()
    return [(e['duration'], e['id']) for e in log if e['command'].split(b' ')[0].upper() == name]


def line(label, calls):
    us = sorted((d for d, _ in calls), reverse=True)
    worst = sorted(calls, reverse=True)[:3]
    return '| %s | %d | %.1f | %d | %d | %s |' % (label, len(us), sum(us) / len(us), us[len(us) // 2], us[0],
                                                 ', '.join('%d us (#%d)' % w for w in worst))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--module', default='target/release/libredis_seckill.so')
    ap.add_argument('--entrants', type=int, default=1000000)
    args = ap.parse_args()
    n = args.entrants
    # SLOWLOG keeps every call: its durations are the figures.
    with own_server(args=['--loadmodule', os.path.abspath(args.module), '--slowlog-log-slower-than', '0',
                          '--slowlog-max-len', '2000000']) as conn:
        rows = []
        for stream in (False, True):
            key = 'd:{%d}' % stream
            # The registration must outlast the ENTERs: about 10 us each here, with room to spare.
            end = server_ms(conn) + 5000 + n // 20
            conn.execute_command('SECKILL.INIT', key, 20000, 'END', end, 'HOLD', 600000,
                                 *(['STREAM', key + ':ev'] if stream else []), 'DRAW')
            conn.slowlog_reset()
            send_all(conn, [('SECKILL.ENTER', key, 'user-%07d' % i) for i in range(n)])
            entered = timed(conn, b'SECKILL.ENTER')
            while server_ms(conn) < end:
                time.sleep(0.05)
            conn.slowlog_reset()
            while conn.execute_command('SECKILL.DRAW', key, 'COUNT', 1000)[2] > 0:
                pass
            draws = timed(conn, b'SECKILL.DRAW')
            tag = 'with a stream' if stream else 'no stream'
            rows += [line('ENTER (%s)' % tag, entered), line('DRAW COUNT 1000, 20,000 units (%s)' % tag, draws)]
        conn.execute_command('SECKILL.INIT', 's:{1}', 2 * n)
        conn.slowlog_reset()
        send_all(conn, [('SECKILL.RESERVE', 's:{1}', 'user-%07d' % i) for i in range(n)])
        rows.append(line('RESERVE, a plain sale (yardstick)', timed(conn, b'SECKILL.RESERVE')))
        print('%d entrants; SLOWLOG, microseconds\n' % n)
        print('| call | calls | mean | median | slowest | three slowest (slowlog id) |')
        print('|---|---:|---:|---:|---:|---|')
        print('\n'.join(rows))


if __name__ == '__main__':
    main()
