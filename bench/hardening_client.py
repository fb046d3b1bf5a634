"""bench/hardening.py's load and readings: the RESP a load is written in,
`redis-cli --pipe` and redis-benchmark pinned to the client CPU, and what
the driver reads back from a server (SLOWLOG, LATENCY, a sale's INFO)."""

import csv
import io
import os
import re
import subprocess
import time

from hardening_servers import CLIENT_CPU


def log(msg):
    print(msg, flush=True)


def slowlog_take(conn):
    """(max duration in µs, its command) of the SLOWLOG since the last take; resets it."""
    entries = conn.slowlog_get(10000)
    conn.slowlog_reset()
    if not entries:
        return 0, ''
    worst = max(entries, key=lambda e: e['duration'])
    cmd = worst.get('command', b'')
    if isinstance(cmd, bytes):
        cmd = cmd.decode(errors='replace')
    return worst['duration'], ' '.join(cmd.split()[:3])


def latency_max(conn):
    """The LATENCY monitor's worst 'command' event (ms), 0 when none."""
    worst = 0
    for event in conn.execute_command('LATENCY', 'LATEST') or []:
        if event[0] in ('command', 'fast-command'):
            worst = max(worst, int(event[3]))
    return worst


def as_dict(reply):
    """Field/value pairs (RESP2) or a map (RESP3, or redis-py's own parsing) as a dict."""
    if reply is None or isinstance(reply, dict):
        return reply
    return dict(zip(reply[0::2], reply[1::2]))


def sale_info(conn, key):
    return as_dict(conn.execute_command('SECKILL.INFO', key))


def resp(*args):
    out = [b'*%d\r\n' % len(args)]
    for a in args:
        a = a if isinstance(a, bytes) else str(a).encode()
        out.append(b'$%d\r\n%s\r\n' % (len(a), a))
    return b''.join(out)


def pipe(port, workdir, commands, timeout=600):
    """Sends every command through `redis-cli --pipe` (as fast as the
    server takes them); returns (seconds, replies). Raises on any error reply."""
    path = os.path.join(workdir, 'pipe.resp')
    with open(path, 'wb') as f:
        for c in commands:
            f.write(c)
    t0 = time.perf_counter()
    with open(path, 'rb') as f:
        out = subprocess.run(['taskset', '-c', CLIENT_CPU, 'redis-cli', '-p', str(port), '--pipe'],
                             stdin=f, capture_output=True, text=True, timeout=timeout)
    dt = time.perf_counter() - t0
    os.remove(path)
    m = re.search(r'errors: (\d+), replies: (\d+)', out.stdout)
    if not m or int(m.group(1)):
        raise RuntimeError('redis-cli --pipe: %s %s' % (out.stdout[-500:], out.stderr[-500:]))
    return dt, int(m.group(2))


def benchmark(port, requests, args, timeout=900):
    """One pinned redis-benchmark run (-P 16 -c 50); returns its CSV row as a dict."""
    cmd = ['taskset', '-c', CLIENT_CPU, 'redis-benchmark', '-p', str(port), '-P', '16', '-c', '50',
           '-n', str(requests), '--csv'] + [str(a) for a in args]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True, timeout=timeout).stdout
    rows = list(csv.DictReader(io.StringIO(out)))
    return {k: (float(v) if k != 'test' else v) for k, v in rows[-1].items()}
