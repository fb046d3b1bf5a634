#!/usr/bin/env python3
"""make bench-hardening: the stalls, idle CPU and memory peaks of issue 7,
measured against one build of the module.

Five scenarios, each on its own fresh redis-server(s) on free ports (never
6379), killed by pid at the end even on error:

  growth       one sale growing to 3M buyers under pipelined random RESERVEs:
               the slowest command (SLOWLOG), redis-benchmark's max latency,
               and the same with a replica attached (the replica's SLOWLOG
               records the replicated SECKILL.EFFECT)
  idle-cpu     20k (and 200k) sales holding one long hold each: the server's
               CPU% over 10 s of idleness, and PING latency meanwhile
  mass-expiry  300k pending holds falling due at once: the worst PING while
               they are released, live and after a restart from an RDB
  reconcile    200k unknown ledger rows through RECONCILE ... APPLY (AOF and a
               replica): call time, worst PING, memory peak
  one-buyer    200k RESERVEs by one user: throughput as it goes, slowest command

Each run updates the section of its --label in bench/reports/HARDENING.md (the raw
figures live in a JSON block at the end of that file), so runs of several
builds sit side by side. --only runs a subset and keeps the other figures of
the label. The server is pinned to CPU 0; redis-benchmark, redis-cli --pipe,
the replica and the PING probe to CPU 1. Servers and probe run at nice -10
in sessions of their own; each figure comes with how long the server waited
for a CPU meanwhile, to tell the machine's noise from the module's stalls.
Logs stay in bench/out/hardening/ (data files are removed at the end).
"""

import argparse
import csv
import hashlib
import io
import json
import multiprocessing
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time

import redis

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
from bench import free_port  # noqa: E402  (bench.py: the project's benchmark)

SCENARIOS = ('growth', 'idle-cpu', 'mass-expiry', 'reconcile', 'one-buyer')
SERVER_CPU, CLIENT_CPU = '0', '1'
SLOWLOG_US = 1000
# Servers and the PING probe run at this nice level (--nice), so that the
# compilers and tests sharing the machine preempt them less. With the
# kernel's autogroups a nice level counts only within a session, so each of
# them gets a session of its own whose autogroup gets that nice level too.
NICE = [-10]

DATA_MARK = '<!-- hardening-data'

# Every server started by this script, by pid, so that an error or a signal
# anywhere still ends them (and only them).
LIVE = {}


def own_priority():
    """In a child before exec: a session (autogroup) of its own, niced."""
    os.setsid()
    try:
        with open('/proc/self/autogroup', 'w') as f:
            f.write(str(NICE[0]))
    except OSError:
        pass


def log(msg):
    print(msg, flush=True)


# ----------------------------------------------------------------- servers

class Server:
    """A redis-server with the module, on a free port, pinned to one CPU.

    `nice` and `taskset` exec redis-server, so the pid is the server's own
    (its /proc/<pid>/stat is what idle-cpu reads)."""

    def __init__(self, name, module, workdir, cpu=SERVER_CPU, extra=(), dbfilename=None, wait=True, port=None):
        self.name = name
        self.port = port or free_port()
        self.dir = workdir
        os.makedirs(workdir, exist_ok=True)
        self.logpath = os.path.join(workdir, '%s.log' % name)
        cmd = ['nice', '-n', str(NICE[0]), 'taskset', '-c', cpu,
               'redis-server', '--port', str(self.port), '--bind', '127.0.0.1',
               '--dir', workdir, '--dbfilename', dbfilename or ('%s.rdb' % name),
               '--appenddirname', '%s-aof' % name, '--save', '', '--appendonly', 'no',
               '--enable-debug-command', 'local',
               '--slowlog-log-slower-than', str(SLOWLOG_US), '--slowlog-max-len', '10000',
               '--latency-monitor-threshold', '10',
               '--loadmodule', module] + [str(a) for a in extra]
        self.logfile = open(self.logpath, 'w')
        self.proc = subprocess.Popen(cmd, stdout=self.logfile, stderr=subprocess.STDOUT, preexec_fn=own_priority)
        self.pid = self.proc.pid
        LIVE[self.pid] = self
        self.conn = redis.Redis(port=self.port, decode_responses=True, socket_timeout=300)
        if wait:
            self.wait_ready()

    def wait_ready(self, seconds=120):
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError('%s exited (%s); see %s' % (self.name, self.proc.returncode, self.logpath))
            try:
                self.conn.ping()
                return
            except (redis.ConnectionError, redis.ResponseError):
                time.sleep(0.02)
        raise RuntimeError('%s did not start in %d s; see %s' % (self.name, seconds, self.logpath))

    def cpu_ticks(self):
        with open('/proc/%d/stat' % self.pid) as f:
            fields = f.read().rsplit(')', 1)[1].split()
        return int(fields[11]) + int(fields[12])  # utime + stime (fields 14, 15)

    def waited_ms(self):
        """How long the server's main thread has waited for a CPU while
        runnable (/proc/<pid>/schedstat): the machine's noise, not the module's."""
        try:
            with open('/proc/%d/schedstat' % self.pid) as f:
                return int(f.read().split()[1]) / 1e6
        except (OSError, IndexError, ValueError):
            return 0.0

    def stop(self):
        if self.pid not in LIVE:
            return
        del LIVE[self.pid]
        if self.proc.poll() is None:
            self.proc.kill()  # SIGKILL by pid: --save "" anyway, nothing to flush
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                pass
        self.logfile.close()


def stop_all(*_):
    for srv in list(LIVE.values()):
        srv.stop()


def on_signal(signum, _frame):
    stop_all()
    raise SystemExit(128 + signum)


def wait_link(master, replica, seconds=60):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if replica.conn.info('replication').get('master_link_status') == 'up':
            return
        time.sleep(0.05)
    raise RuntimeError('replica did not connect in %d s' % seconds)


def wait_caught_up(master, replica, seconds=120):
    """Waits until the replica has processed the master's whole stream."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        target = master.conn.info('replication')['master_repl_offset']
        if replica.conn.info('replication').get('slave_repl_offset', -1) >= target:
            return True
        time.sleep(0.05)
    return False


# ----------------------------------------------------------------- helpers

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


# ----------------------------------------------------------------- PING probe

def _run_wait(path):
    """Seconds the thread behind a /proc .../schedstat has waited for a CPU while runnable."""
    try:
        with open(path, 'rb') as f:
            return int(f.read().split()[1]) / 1e9
    except (OSError, IndexError, ValueError):
        return 0.0


def _ping_loop(port, interval, max_seconds, connect_seconds, stop, out, server_pid):
    signal.signal(signal.SIGTERM, signal.SIG_DFL)  # the driver's handler ends servers: not here
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    try:
        os.sched_setaffinity(0, {int(CLIENT_CPU)})
        os.nice(NICE[0])
        own_priority()
    except OSError:
        pass
    deadline = time.monotonic() + connect_seconds
    s = None
    while s is None:
        try:
            s = socket.create_connection(('127.0.0.1', port), timeout=60)
        except OSError:
            if time.monotonic() > deadline or stop.is_set():
                out.send({'error': 'could not connect'})
                return
            time.sleep(0.002)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    connected = time.time()
    # Each sample: (latency, wall time sent, how long the server's main thread
    # and this probe waited for a CPU during it), so that the machine's noise
    # can be told from the server's own stalls.
    pong, loading = [], []
    mine = '/proc/thread-self/schedstat'
    end = time.monotonic() + max_seconds
    try:
        while not stop.is_set() and time.monotonic() < end:
            theirs = '/proc/%d/schedstat' % server_pid.value
            w_srv, w_me = _run_wait(theirs), _run_wait(mine)
            wall = time.time()
            t0 = time.perf_counter()
            s.sendall(b'PING\r\n')
            buf = b''
            while not buf.endswith(b'\r\n'):
                chunk = s.recv(4096)
                if not chunk:
                    raise OSError('connection closed')
                buf += chunk
            dt = time.perf_counter() - t0
            (pong if buf.startswith(b'+PONG') else loading).append(
                (dt, wall, _run_wait(theirs) - w_srv, _run_wait(mine) - w_me))
            if interval:
                time.sleep(interval)
    except OSError as e:
        out.send({'error': str(e)})
        return
    out.send({'connected': connected, 'pong': summarize(pong), 'loading': summarize(loading),
              'first_pong': pong[0][1] if pong else None})


def summarize(samples):
    if not samples:
        return {'n': 0}
    lat = sorted(x[0] for x in samples)
    worst = max(samples)

    def pct(p):
        return lat[min(len(lat) - 1, int(len(lat) * p))] * 1000
    net = max(samples, key=lambda x: x[0] - x[2] - x[3])
    return {'n': len(lat), 'max_ms': worst[0] * 1000, 'max_at': worst[1], 'p50_ms': pct(0.50),
            'p99_ms': pct(0.99), 'p999_ms': pct(0.999),
            'max_server_wait_ms': worst[2] * 1000, 'max_probe_wait_ms': worst[3] * 1000,
            'net_max_ms': max(0.0, net[0] - net[2] - net[3]) * 1000,
            'over_10ms': sum(1 for v in lat if v > 0.010), 'over_50ms': sum(1 for v in lat if v > 0.050)}


class Pinger:
    """PING on one connection, no pipeline, from another process (no GIL
    shared with the driver), every `interval` s (0: back to back). Set
    `server_pid.value` when the server's pid is known only later."""

    def __init__(self, port, interval=0.0, max_seconds=300, connect_seconds=5, pid=0):
        ctx = multiprocessing.get_context('fork')
        self.stop_ev = ctx.Event()
        self.server_pid = ctx.Value('i', pid, lock=False)
        self.rx, tx = ctx.Pipe(duplex=False)
        self.proc = ctx.Process(target=_ping_loop,
                                args=(port, interval, max_seconds, connect_seconds, self.stop_ev, tx,
                                      self.server_pid), daemon=True)
        self.proc.start()

    def finish(self):
        self.stop_ev.set()
        result = self.rx.recv() if self.rx.poll(120) else {'error': 'no result'}
        self.proc.join(10)
        if self.proc.is_alive():
            self.proc.kill()
        if 'error' in result:
            raise RuntimeError('PING probe: %s' % result['error'])
        return result


# ----------------------------------------------------------------- scenarios

def growth_phase(srv, replica, args, workdir):
    """INIT big, then pipelined random RESERVEs in chunks until the sale has
    args.growth_buyers buyers; SLOWLOG is taken per chunk to place the
    slowest command by buyer count."""
    c = srv.conn
    c.execute_command('SECKILL.INIT', 'big', 100_000_000, 'LIMIT', 1000)
    chunks, buyers, t_start = [], 0, time.monotonic()
    worst = {'us': 0, 'cmd': '', 'from': 0, 'to': 0}
    rworst = {'us': 0, 'cmd': '', 'from': 0, 'to': 0}
    bench_max, sent = 0.0, 0
    max_chunks = 4 * (args.growth_buyers // args.growth_chunk + 1)
    while buyers < args.growth_buyers and len(chunks) < max_chunks:
        if time.monotonic() - t_start > args.phase_seconds:
            log('  growth: stopped by the time bound at %d buyers' % buyers)
            break
        w0 = srv.waited_ms()
        rw0 = replica.waited_ms() if replica else 0
        # redis-benchmark may seed its generator alike in two runs: a prefix
        # per run keeps the users of each run new.
        row = benchmark(srv.port, args.growth_chunk,
                        ['-r', 100_000_000, 'SECKILL.RESERVE', 'big', 'user:%d:__rand_int__' % len(chunks)])
        before = buyers
        info = sale_info(c, 'big')
        buyers, sent = int(info['buyers']), int(info['pending'])  # no HOLD: every RESERVE stays pending
        us, cmd = slowlog_take(c)
        waited = srv.waited_ms() - w0
        if us > worst['us']:
            worst = {'us': us, 'cmd': cmd, 'from': before, 'to': buyers, 'waited_ms': waited}
        bench_max = max(bench_max, row['max_latency_ms'])
        entry = {'buyers': buyers, 'rps': row['rps'], 'max_ms': row['max_latency_ms'], 'slow_us': us,
                 'waited_ms': waited}
        if replica:
            us_r, cmd_r = slowlog_take(replica.conn)
            rwaited = replica.waited_ms() - rw0
            entry['replica_slow_us'], entry['replica_waited_ms'] = us_r, rwaited
            if us_r > rworst['us']:
                rworst = {'us': us_r, 'cmd': cmd_r, 'from': before, 'to': buyers, 'waited_ms': rwaited}
        chunks.append(entry)
        log('  %9d buyers  %9.0f rps  bench max %7.1f ms  slowest %7.1f ms (waited for CPU %5.0f ms)%s' % (
            buyers, row['rps'], row['max_latency_ms'], us / 1000, waited,
            ('  replica %7.1f ms (waited %5.0f ms)' % (us_r / 1000, rwaited)) if replica else ''))
    out = {'buyers': buyers, 'sent': sent, 'seconds': time.monotonic() - t_start, 'slowest': worst,
           'bench_max_ms': bench_max, 'latency_max_ms': latency_max(c), 'chunks': chunks,
           'used_memory': c.info('memory')['used_memory']}
    if replica:
        out['replica_caught_up'] = wait_caught_up(srv, replica)
        us_r, cmd_r = slowlog_take(replica.conn)  # what it applied after the last chunk
        if us_r > rworst['us']:
            rworst = {'us': us_r, 'cmd': cmd_r, 'from': buyers, 'to': buyers}
        out['replica_slowest'] = rworst
        out['replica_latency_max_ms'] = latency_max(replica.conn)
    return out


def scenario_growth(args, workdir):
    res = {}
    log('growth: one sale to %s buyers' % '{:,}'.format(args.growth_buyers))
    srv = Server('growth', args.module, workdir)
    try:
        res['alone'] = growth_phase(srv, None, args, workdir)
    finally:
        srv.stop()
    log('growth: the same with a replica attached')
    srv = Server('growth-master', args.module, workdir)
    try:
        rep = Server('growth-replica', args.module, workdir, cpu=CLIENT_CPU,
                     extra=['--replicaof', '127.0.0.1', srv.port])
        wait_link(srv, rep)
        res['replica'] = growth_phase(srv, rep, args, workdir)
    finally:
        stop_all()
    return res


def idle_size(args, workdir, count):
    srv = Server('idle-%d' % count, args.module, workdir)
    try:
        time.sleep(1)
        t0 = srv.cpu_ticks()
        time.sleep(args.idle_baseline)
        base = (srv.cpu_ticks() - t0) / CLK_TCK / args.idle_baseline * 100

        def commands():
            for i in range(count):
                yield resp('SECKILL.INIT', 's:%d' % i, 10, 'HOLD', 3_600_000)
                yield resp('SECKILL.RESERVE', 's:%d' % i, 'u1')
        load_s, replies = pipe(srv.port, workdir, commands())
        tracked = srv.conn.info('seckill').get('seckill_sales_with_holds_tracked')
        pend = int(sale_info(srv.conn, 's:%d' % (count - 1))['pending'])
        used = srv.conn.info('memory')['used_memory']
        time.sleep(1)
        pinger = Pinger(srv.port, interval=0.01, max_seconds=args.idle_seconds + 30, pid=srv.pid)
        t0, w0, q0 = srv.cpu_ticks(), time.monotonic(), srv.waited_ms()
        time.sleep(args.idle_seconds)
        ticks, wall, waited = srv.cpu_ticks() - t0, time.monotonic() - w0, srv.waited_ms() - q0
        ping = pinger.finish()['pong']
        cpu = ticks / CLK_TCK / wall * 100
        log('  %7d sales: idle CPU %5.1f%% (empty server %.1f%%), PING p99 %.1f ms, max %s (%d pings);'
            ' load %.1f s, used_memory %s' % (count, cpu, base, ping.get('p99_ms', 0), ping_worst(ping),
                                              ping['n'], load_s, '{:,}'.format(used)))
        return {'sales': count, 'cpu_pct': cpu, 'baseline_pct': base, 'seconds': wall, 'ping': ping,
                'waited_ms': waited,
                'load_s': load_s, 'replies': replies, 'tracked': tracked, 'last_pending': pend,
                'used_memory': used}
    finally:
        srv.stop()


def scenario_idle(args, workdir):
    log('idle-cpu: sales with one long hold each, then %d s of idleness' % args.idle_seconds)
    res = {'sizes': []}
    for count in args.idle_sales:
        r = idle_size(args, workdir, count)
        res['sizes'].append(r)
    return res


def expiry_load(srv, args, workdir):
    """INIT with HOLD and STREAM, then args.expiry_holds RESERVEs of distinct
    users through redis-cli --pipe. Returns the due window (ms) and load time."""
    c = srv.conn
    key, stream = 's:{x}', 's:{x}:ev'
    n = args.expiry_holds
    c.execute_command('SECKILL.INIT', key, 1_000_000, 'LIMIT', 1, 'HOLD', args.expiry_hold_ms, 'STREAM', stream)
    load_s, _ = pipe(srv.port, workdir,
                     (resp('SECKILL.RESERVE', key, 'u%d' % i, 'REQID', 'r%d' % i) for i in range(n)))
    info = sale_info(c, key)
    first = as_dict(c.execute_command('SECKILL.GET', key, 'r0'))
    last = as_dict(c.execute_command('SECKILL.GET', key, 'r%d' % (n - 1)))
    now_ms = int(c.time()[0]) * 1000 + int(c.time()[1]) // 1000
    return {'load_s': load_s, 'pending_after_load': int(info['pending']),
            'due_first_ms': int(first['deadline_ms']), 'due_last_ms': int(last['deadline_ms']),
            'margin_ms': int(first['deadline_ms']) - now_ms}


def wait_released(conn, key, n, seconds):
    """Polls SECKILL.INFO (O(1)) every 20 ms until no hold is pending; returns
    (wall time of the first poll that saw a release, of the one that saw 0)."""
    first, deadline = None, time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            info = sale_info(conn, key)
        except (redis.BusyLoadingError, redis.ConnectionError):
            time.sleep(0.02)
            continue
        pending = int(info['pending']) if info else n
        now = time.time()
        if first is None and pending < n:
            first = now
        if pending == 0:
            return first, now
        time.sleep(0.02)
    return first, None


def scenario_expiry(args, workdir):
    n = args.expiry_holds
    res = {}
    log('mass-expiry: %s holds of %d ms falling due together' % ('{:,}'.format(n), args.expiry_hold_ms))
    srv = Server('expiry', args.module, workdir)
    try:
        load = expiry_load(srv, args, workdir)
        log('  loaded in %.1f s, %d pending, first due in %d ms' % (
            load['load_s'], load['pending_after_load'], load['margin_ms']))
        pinger = Pinger(srv.port, max_seconds=args.expiry_wait + args.expiry_hold_ms / 1000 + 30, pid=srv.pid)
        q0 = srv.waited_ms()
        first, done = wait_released(srv.conn, 's:{x}', load['pending_after_load'],
                                    load['margin_ms'] / 1000 + args.expiry_wait)
        ping = pinger.finish()
        info = sale_info(srv.conn, 's:{x}')
        slow_us, slow_cmd = slowlog_take(srv.conn)
        live = dict(load, ping=ping['pong'], first_release=first, all_released=done, waited_ms=srv.waited_ms() - q0,
                    pending_end=int(info['pending']), expired=int(info['expired']),
                    slowlog_us=slow_us, slowlog_cmd=slow_cmd)
        report_release(live)
        res['live'] = live
    finally:
        srv.stop()

    log('mass-expiry: the same saved to an RDB while pending, restarted after the holds are due')
    rdb = 'expiry-restart.rdb'
    path = os.path.join(workdir, rdb)
    if os.path.exists(path):
        os.remove(path)
    srv = Server('expiry-save', args.module, workdir, dbfilename=rdb)
    try:
        load = expiry_load(srv, args, workdir)
        t0 = time.perf_counter()
        srv.conn.save()
        save_s = time.perf_counter() - t0
        pending_saved = int(sale_info(srv.conn, 's:{x}')['pending'])
    finally:
        srv.stop()
    log('  loaded in %.1f s, %d pending when saved (SAVE %.2f s, %s bytes)' % (
        load['load_s'], pending_saved, save_s, '{:,}'.format(os.path.getsize(path))))
    wait_s = max(0.0, (load['due_last_ms'] + 500) / 1000 - time.time())
    time.sleep(wait_s)
    srv = None
    try:
        # The probe is started first and retries until the server listens, so
        # it sees the server from the moment it accepts connections.
        port = free_port()
        pinger = Pinger(port, max_seconds=args.expiry_wait + 60, connect_seconds=30)
        t_start = time.time()
        srv = Server('expiry-restart', args.module, workdir, dbfilename=rdb, wait=False, port=port)
        pinger.server_pid.value = srv.pid
        first, done = wait_released(srv.conn, 's:{x}', pending_saved, args.expiry_wait)
        ping = pinger.finish()
        info = sale_info(srv.conn, 's:{x}')
        slow_us, slow_cmd = slowlog_take(srv.conn)
        restart = dict(load, save_s=save_s, pending_saved=pending_saved, started=t_start,
                       waited_ms=srv.waited_ms(),
                       connected=ping['connected'], first_pong=ping['first_pong'], ping=ping['pong'],
                       loading=ping['loading'], first_release=first, all_released=done,
                       pending_end=int(info['pending']), expired=int(info['expired']),
                       slowlog_us=slow_us, slowlog_cmd=slow_cmd)
        log('  accepted connections %.0f ms after start, answered PONG after %.0f ms (worst LOADING reply %.1f ms)' % (
            (restart['connected'] - t_start) * 1000, ((restart['first_pong'] or t_start) - t_start) * 1000,
            restart['loading'].get('max_ms', 0)))
        report_release(restart, since=restart['first_pong'])
        res['restart'] = restart
    finally:
        if srv:
            srv.stop()
    if os.path.exists(path):
        os.remove(path)
    return res


def report_release(r, since=None):
    p = r['ping']
    took = (r['all_released'] - (since or r['due_first_ms'] / 1000)) * 1000 if r['all_released'] else None
    r['release_ms'] = took
    log('  worst PING %s (p99 %.2f ms, %d pings, %d over 50 ms); all released %s; pending at the end %d' % (
        ping_worst(p), p.get('p99_ms', 0), p['n'], p.get('over_50ms', 0),
        ('%.0f ms after %s' % (took, 'the first PONG' if since else 'the first hold fell due')) if took is not None
        else 'NOT within the bound', r['pending_end']))


CHUNK_ERR = re.compile(r'chunk|at most|too many|rows|ORDERS', re.I)


def scenario_reconcile(args, workdir):
    rows = args.reconcile_rows
    chunk = args.reconcile_chunk or rows
    log('reconcile: %s unknown ledger rows, %s per call, AOF on, one replica' % (
        '{:,}'.format(rows), '{:,}'.format(chunk)))
    srv = Server('reconcile', args.module, workdir, extra=['--appendonly', 'yes'])
    try:
        rep = Server('reconcile-replica', args.module, workdir, cpu=CLIENT_CPU,
                     extra=['--replicaof', '127.0.0.1', srv.port])
        wait_link(srv, rep)
        c = srv.conn
        key = 'r:{r}'
        c.execute_command('SECKILL.INIT', key, 1_000_000, 'LIMIT', 1, 'STREAM', 'r:{r}:ev')
        c.config_resetstat()
        mem0 = c.info('memory')
        raw = redis.Connection(port=srv.port, socket_timeout=600)
        raw.connect()
        pinger = Pinger(srv.port, max_seconds=900, pid=srv.pid)
        q0 = srv.waited_ms()
        calls, offset, refusals, counts = [], 0, [], {}
        t_all = time.perf_counter()
        try:
            while offset < rows and len(calls) < rows + 10:
                part = min(chunk, rows - offset)
                argv = ['SECKILL.RECONCILE', key, 'ORDERS', part]
                for i in range(offset, offset + part):
                    argv += ['o%d' % i, 'u%d' % i, 1]
                argv.append('APPLY')
                packed = raw.pack_command(*argv)
                t0 = time.perf_counter()
                raw.send_packed_command(packed)
                try:
                    reply = raw.read_response()
                except redis.ResponseError as e:
                    msg = str(e)
                    nums = [int(x) for x in re.findall(r'\d+', msg) if 0 < int(x) < part]
                    if not CHUNK_ERR.search(msg) or len(refusals) >= 3:
                        raise
                    new = max(nums) if nums else (args.reconcile_chunk if 0 < args.reconcile_chunk < part else 0)
                    refusals.append({'chunk': part, 'error': msg, 'fallback': new})
                    log('  a call of %d rows was refused: %s; falling back to %s rows' % (part, msg, new or '?'))
                    if not new:
                        raise
                    chunk = new
                    continue
                dt = time.perf_counter() - t0
                report = as_dict(reply)
                for k, v in report.items():
                    k = k.decode() if isinstance(k, bytes) else k
                    if k.startswith('orders_') and not k.endswith('_ids'):
                        counts[k] = counts.get(k, 0) + int(v)
                calls.append(dt)
                offset += part
        finally:
            wall_s = time.perf_counter() - t_all
            waited = srv.waited_ms() - q0
            ping = pinger.finish()
            raw.disconnect()
        slow_us, slow_cmd = slowlog_take(c)
        info = sale_info(c, key)
        caught_up = wait_caught_up(srv, rep)
        time.sleep(1)  # output buffers to the replica and the AOF drained: what the sale ends at
        mem1 = c.info('memory')
        rslow_us, rslow_cmd = slowlog_take(rep.conn)
        rmem = rep.conn.info('memory')
        rinfo = sale_info(rep.conn, key)
        res = {'rows': rows, 'chunk': chunk, 'calls': len(calls), 'refusals': refusals,
               'total_s': sum(calls), 'wall_s': wall_s, 'waited_ms': waited,
               'slowest_call_s': max(calls) if calls else None,
               'slowlog_us': slow_us, 'slowlog_cmd': slow_cmd, 'ping': ping['pong'],
               'used_memory_before': mem0['used_memory'], 'peak_before': mem0['used_memory_peak'],
               'used_memory_peak': mem1['used_memory_peak'], 'used_memory_end': mem1['used_memory'],
               'sale_usage': c.memory_usage(key, samples=0), 'stream_usage': c.memory_usage('r:{r}:ev', samples=0),
               'counts': counts, 'confirmed': int(info['confirmed']), 'invariant': info['invariant'],
               'replica_caught_up': caught_up, 'replica_slowlog_us': rslow_us, 'replica_slowlog_cmd': rslow_cmd,
               'replica_peak': rmem['used_memory_peak'], 'replica_used_end': rmem['used_memory'],
               'replica_confirmed': int(rinfo['confirmed']) if rinfo else None}
        log('  %d call(s) of %d rows: total %.2f s, slowest call %.2f s (SLOWLOG %.1f ms), worst PING %s' % (
            len(calls), chunk, res['total_s'], res['slowest_call_s'] or 0, slow_us / 1000, ping_worst(ping['pong'])))
        log('  used_memory %s -> peak %s -> end %s; confirmed %d, invariant %s; replica SLOWLOG %.1f ms, peak %s' % (
            mb(mem0['used_memory']), mb(mem1['used_memory_peak']), mb(mem1['used_memory']), res['confirmed'],
            res['invariant'], rslow_us / 1000, mb(rmem['used_memory_peak'])))
        return res
    finally:
        stop_all()


def scenario_one_buyer(args, workdir):
    n, step = args.one_buyer_n, args.one_buyer_chunk
    log('one-buyer: %s RESERVEs by one user' % '{:,}'.format(n))
    srv = Server('one-buyer', args.module, workdir)
    try:
        c = srv.conn
        c.execute_command('SECKILL.INIT', 'one', 1_000_000_000, 'LIMIT', 100_000_000)
        chunks, done, t_start = [], 0, time.monotonic()
        worst = 0
        while done < n:
            if time.monotonic() - t_start > args.phase_seconds:
                log('  one-buyer: stopped by the time bound after %d RESERVEs' % done)
                break
            part = min(step, n - done)
            st0 = c.info('commandstats').get('cmdstat_seckill.reserve', {'calls': 0, 'usec': 0})
            q0 = srv.waited_ms()
            t0 = time.perf_counter()
            row = benchmark(srv.port, part, ['SECKILL.RESERVE', 'one', 'user:1'])
            dt = time.perf_counter() - t0
            # redis-benchmark sends a little more than -n (whole pipelines):
            # count what the sale holds.
            done = int(sale_info(c, 'one')['pending'])
            us, _ = slowlog_take(c)
            worst = max(worst, us)
            st1 = c.info('commandstats').get('cmdstat_seckill.reserve', {'calls': 0, 'usec': 0})
            per_call = (st1['usec'] - st0['usec']) / max(1, st1['calls'] - st0['calls'])
            chunks.append({'done': done, 'rps': row['rps'], 'seconds': dt, 'max_ms': row['max_latency_ms'],
                           'slow_us': us, 'usec_per_call': per_call, 'waited_ms': srv.waited_ms() - q0})
            log('  %7d RESERVEs  %9.0f rps  %7.1f us/call  bench max %7.1f ms  slowest %6.2f ms' % (
                done, row['rps'], per_call, row['max_latency_ms'], us / 1000))
        seconds = time.monotonic() - t_start
        info = sale_info(c, 'one')
        stats = c.info('commandstats').get('cmdstat_seckill.reserve', {})
        return {'n': done, 'seconds': seconds, 'rps': done / seconds if seconds else 0, 'chunks': chunks,
                'slowest_us': worst, 'pending': int(info['pending']),
                'usec_per_call': stats.get('usec_per_call')}
    finally:
        srv.stop()


RUNNERS = {'growth': scenario_growth, 'idle-cpu': scenario_idle, 'mass-expiry': scenario_expiry,
           'reconcile': scenario_reconcile, 'one-buyer': scenario_one_buyer}


# ----------------------------------------------------------------- report

def mb(b):
    return '%.1f MB' % (b / 1e6) if b is not None else '—'


def ms(v, digits=1):
    return ('%.*f ms' % (digits, v)) if v is not None else '—'


def get(d, *path):
    for p in path:
        if not isinstance(d, (dict, list)):
            return None
        try:
            d = d[p]
        except (KeyError, IndexError, TypeError):
            return None
    return d


def key_figures(res):
    """(scenario, figure, target, value) rows of the side-by-side table."""
    g, i, e, r, o = (res.get(s) for s in SCENARIOS)
    rows = []

    def slow(w):
        if not w:
            return None
        return '%s (at %s–%s buyers%s)' % (ms(w['us'] / 1000), k(w['from']), k(w['to']), waited(w))
    rows.append(('growth', 'slowest command, master alone (SLOWLOG)', '≤ 20 ms', slow(get(g, 'alone', 'slowest'))))
    rows.append(('growth', 'redis-benchmark max latency, master alone', '', ms(get(g, 'alone', 'bench_max_ms'))))
    rows.append(('growth', 'slowest command, master with a replica', '≤ 20 ms', slow(get(g, 'replica', 'slowest'))))
    rows.append(('growth', 'slowest command on the replica (EFFECT)', '≤ 20 ms',
                 slow(get(g, 'replica', 'replica_slowest'))))
    for s in (get(i, 'sizes') or []):
        rows.append(('idle-cpu', 'server CPU idle, %s sales' % k(s['sales']), '≤ 5 %' if s['sales'] <= 20000 else '',
                     '%.1f %%' % s['cpu_pct']))
        rows.append(('idle-cpu', 'PING p99 / max meanwhile, %s sales' % k(s['sales']), '',
                     '%s / %s' % (ms(get(s, 'ping', 'p99_ms'), 2), ping_worst(s.get('ping')))))
    for v, label in (('live', 'live'), ('restart', 'after a restart from RDB')):
        x = get(e, v)
        if x:
            rows.append(('mass-expiry', 'worst PING, %s' % label, '≤ 50 ms', ping_worst(x.get('ping'))))
            rows.append(('mass-expiry', 'all %s released after (%s)' % (
                k(x['pending_saved'] if v == 'restart' else x['pending_after_load']),
                'first PONG' if v == 'restart' else 'first due'), '',
                ms(x.get('release_ms'), 0) if x.get('all_released') else 'not within the bound'))
    if r:
        rows.append(('reconcile', 'rows per call × calls', '', '%s × %d' % ('{:,}'.format(r['chunk']), r['calls'])))
        rows.append(('reconcile', 'total time / slowest call', '', '%.2f s / %.2f s' % (
            r['total_s'], r['slowest_call_s'] or 0)))
        rows.append(('reconcile', 'worst PING during the calls', '', ping_worst(r.get('ping'))))
        rows.append(('reconcile', 'used_memory_peak / final used_memory', '', '%s / %s' % (
            mb(r['used_memory_peak']), mb(r['used_memory_end']))))
    if o:
        first, last = o['chunks'][0], o['chunks'][-1]
        rows.append(('one-buyer', 'throughput, overall (first → last chunk)', '', '%s/s (%s → %s)' % (
            k(o['rps']), k(first['rps']), k(last['rps']))))
        per_call = ['%.0f µs' % x['usec_per_call'] if x.get('usec_per_call') is not None else '—'
                    for x in (first, last)]
        rows.append(('one-buyer', 'server µs per RESERVE, first → last run', '', ' → '.join(per_call)))
        rows.append(('one-buyer', 'slowest command (SLOWLOG)', '', ms(o['slowest_us'] / 1000, 2)
                     if o['slowest_us'] else '< 1 ms'))
    return rows


def waited(x, lead='; '):
    """The CPU wait of the server in the same window, as a note on noise."""
    w = x.get('waited_ms') if isinstance(x, dict) else None
    if w is None:
        return ''
    return '%sserver waited %.0f ms for a CPU in that window' % (lead, w)


def k(v):
    if v is None:
        return '—'
    v = float(v)
    if v >= 1e6:
        return '%.2fM' % (v / 1e6)
    if v >= 1e3:
        return '%.1fk' % (v / 1e3)
    return '%.0f' % v


def table(cols, rows):
    """A markdown table; a column name starting with '<' is left-aligned."""
    return (['| %s |' % ' | '.join(c.lstrip('<') for c in cols),
             '|%s|' % '|'.join('---' if c.startswith('<') else '---:' for c in cols)] +
            ['| %s |' % ' | '.join('' if x is None else str(x) for x in r) for r in rows] + [''])


def n(v):
    return '{:,}'.format(v)


def slow_ms(us, digits=1):
    return ms(us / 1000, digits) if us else '< 1 ms'


def ping_worst(p):
    """The worst PING, with the CPU waits of the server and the probe during it,
    and the worst PING less those waits (what the server itself stalled)."""
    if not p or not p.get('n'):
        return '—'
    if 'net_max_ms' not in p:
        return ms(p.get('max_ms'))
    return '%s (CPU waits in it: server %s, probe %s); less CPU waits: %s' % (
        ms(p['max_ms']), ms(p['max_server_wait_ms'], 0), ms(p['max_probe_wait_ms'], 0), ms(p['net_max_ms']))


def lat_ms(v):
    return ms(v, 0) if v else '< 10 ms'  # latency-monitor-threshold 10


def section(label, run):
    m, res, when, a = run['meta'], run['results'], run['when'], run['meta']['args']
    out = ['## %s' % label, '',
           '- module: `%s` (sha256 %s…, %s bytes, built %s)' % (m['module'], m['sha256'], n(m['size']), m['mtime']),
           '- code: %s' % m['commit'],
           '- last run %s, redis-server %s; each scenario below says when it ran, the load average then'
           ' and the module (sha256 prefix) it measured' % (m['date'], m['redis_version']),
           '- commands: %s' % ', '.join('`%s`' % x for x in m.get('commands', []))]
    out += ['- **%s failed** (%s); any figures of it below are from an earlier run' % (sc, why)
            for sc, why in sorted(run.get('failed', {}).items())] + ['']

    def head(name, text, note=''):
        return ['### %s (%s%s)' % (name, when.get(name, ''), note), '', text, '']
    g = res.get('growth')
    if g:
        out += head('growth',
                    '`SECKILL.INIT big 100000000 LIMIT 1000`, then `redis-benchmark -P 16 -c 50 -r 100000000 -n %s'
                ' SECKILL.RESERVE big user:<run>:__rand_int__` repeated (a new prefix per run) until the sale has'
                ' %s buyers; SLOWLOG read and reset after each run, so the slowest command is placed between two'
                    ' buyer counts.' % (n(a['growth_chunk']), n(a['growth_buyers'])), '; SLOWLOG threshold 1 ms')
        rows = []
        for phase, name in (('alone', 'master alone'), ('replica', 'master, replica attached')):
            p = g.get(phase)
            if not p:
                continue
            w = p['slowest']
            rows.append([name, n(p['buyers']), n(p['sent']), '%.0f s' % p['seconds'], ms(w['us'] / 1000),
                         '%s–%s' % (k(w['from']), k(w['to'])), ms(w.get('waited_ms'), 0), ms(p['bench_max_ms']),
                         lat_ms(p['latency_max_ms']), mb(p['used_memory'])])
            if phase == 'replica':
                rw = p['replica_slowest']
                rows.append(['the replica (applying `SECKILL.EFFECT`)', '', '', '', ms(rw['us'] / 1000),
                             '%s–%s' % (k(rw['from']), k(rw['to'])), ms(rw.get('waited_ms'), 0), '',
                             lat_ms(p['replica_latency_max_ms']), ''])
        out += table(['<', 'buyers reached', 'reservations', 'time', 'slowest command', '<at buyers',
                      'server waited for a CPU in that run', 'redis-benchmark max', 'LATENCY max', 'used_memory'], rows)
        out += ['Per run: the slowest command in ms, and in brackets how long the server waited for a CPU'
                ' during that run (a slow command in a run with a long wait is the machine, not the module).', '']
        alone, withrep = g['alone']['chunks'], (g.get('replica') or {}).get('chunks', [])

        def cell(us, w):
            return '%s (%s)' % (('%.0f' % (us / 1000)) if us else '<1', ('%.0f' % w) if w is not None else '?')
        rows = []
        for i in range(max(len(alone), len(withrep))):
            x = alone[i] if i < len(alone) else None
            y = withrep[i] if i < len(withrep) else None
            rows.append([k((x or y)['buyers']), cell(x['slow_us'], x.get('waited_ms')) if x else '',
                         cell(y['slow_us'], y.get('waited_ms')) if y else '',
                         cell(y['replica_slow_us'], y.get('replica_waited_ms')) if y else ''])
        out += table(['buyers after the run', 'master alone', 'master (replica attached)', 'its replica'], rows)
    i = res.get('idle-cpu')
    if i:
        out += head('idle-cpu',
                    'N sales `SECKILL.INIT s:{i} 10 HOLD 3600000` + one `SECKILL.RESERVE s:{i} u1` each (sent with'
                ' `redis-cli --pipe`), 1 s of rest, then the server\'s utime+stime over %d s of idleness'
                    ' (`/proc/<pid>/stat`), while one connection PINGs every 10 ms.' % a['idle_seconds'])
        out += table(['sales', 'server CPU', 'empty server', 'PING p50', 'p99', '<max', 'pings', 'sales tracked',
                      'used_memory', 'server waited for a CPU'],
                     [[n(x['sales']), '%.1f %%' % x['cpu_pct'], '%.1f %%' % x['baseline_pct'],
                       ms(x['ping'].get('p50_ms'), 2), ms(x['ping'].get('p99_ms'), 2), ping_worst(x['ping']),
                       x['ping']['n'], x['tracked'] if x['tracked'] is not None else '—', mb(x['used_memory']),
                       ms(x.get('waited_ms'), 0)]
                      for x in i['sizes']])
    e = res.get('mass-expiry')
    if e:
        out += head('mass-expiry',
                    '`SECKILL.INIT s:{x} 1000000 LIMIT 1 HOLD %d STREAM s:{x}:ev`, %s RESERVEs of distinct users'
                ' (`REQID r<i>`) through `redis-cli --pipe`; then one connection PINGs back to back (no pipeline)'
                ' until SECKILL.INFO shows no pending hold (polled every 20 ms, bounded by %d s).'
                ' Restart: the same, `SAVE`d while all are pending, the server killed, a new one started from'
                ' the RDB once every hold is due; the probe connects as soon as it listens.' % (
                        a['expiry_hold_ms'], n(a['expiry_holds']), a['expiry_wait']))
        rows = []
        for v in ('live', 'restart'):
            x = e.get(v)
            if not x:
                continue
            p = x['ping']
            after = ('%s after %s' % (ms(x['release_ms'], 0), 'the first PONG' if v == 'restart' else
                                      'the first hold fell due') if x.get('all_released') else 'not within the bound')
            ref = x.get('first_pong') if v == 'restart' else x['due_first_ms'] / 1000
            at = ('%+.0f ms' % ((p['max_at'] - ref) * 1000)) if p.get('max_at') and ref else '—'
            rows.append([v, '%.1f s' % x['load_s'], n(x.get('pending_saved', x['pending_after_load'])),
                         ping_worst(p), at, ms(p.get('p99_ms'), 2), p.get('over_50ms', 0), after, n(x['expired']),
                         slow_ms(x['slowlog_us']),
                         ms(x.get('waited_ms'), 0) + (' (since it started)' if v == 'restart' else '')])
        out += table(['<variant', 'load', 'pending', '<worst PING', 'sent at (from the first due / first PONG)',
                      'p99', 'PINGs > 50 ms', '<all released after',
                      'expired', 'SLOWLOG max', 'server waited for a CPU'], rows)
        x = e.get('restart')
        if x:
            out += ['Restart: SAVE %.2f s; the server accepted connections %.0f ms after it was started and'
                    ' answered PONG (loading done) after %.0f ms; the worst reply while loading (`-LOADING`) took %s.'
                    ' The worst PING above counts from the first PONG.' % (
                        x['save_s'], (x['connected'] - x['started']) * 1000,
                        ((x['first_pong'] or x['started']) - x['started']) * 1000,
                        ms(get(x, 'loading', 'max_ms')) if get(x, 'loading', 'n') else
                        'nothing (no `-LOADING` reply seen)'), '']
    r = res.get('reconcile')
    if r:
        out += head('reconcile',
                    '`SECKILL.INIT r:{r} 1000000 LIMIT 1 STREAM r:{r}:ev` on a master with `--appendonly yes` and one'
                ' replica; %s ledger rows `o<i> u<i> 1` unknown to the sale sent as `SECKILL.RECONCILE r:{r}'
                ' ORDERS n ... APPLY`, %s rows per call; another connection PINGs back to back meanwhile.'
                ' Call time is the client\'s (send to parsed reply; total: the sum over calls, without building'
                    ' the commands); SLOWLOG is the server\'s.' % (
                        n(r['rows']), n(r['chunk'])))
        out += table(['calls', 'total', 'slowest call', 'SLOWLOG max', '<worst PING', 'used_memory before',
                      'used_memory_peak', 'used_memory end', 'replica SLOWLOG max', 'replica peak / end',
                      'server waited for a CPU'],
                     [['%d × %s' % (r['calls'], n(r['chunk'])), '%.2f s' % r['total_s'],
                       '%.2f s' % (r['slowest_call_s'] or 0), slow_ms(r['slowlog_us']), ping_worst(r.get('ping')),
                       mb(r['used_memory_before']), mb(r['used_memory_peak']), mb(r['used_memory_end']),
                       slow_ms(r['replica_slowlog_us']), '%s / %s' % (mb(r['replica_peak']), mb(r['replica_used_end'])),
                       ms(r.get('waited_ms'), 0)]])
        out += ['Orders classified: %s; confirmed %s on the master, %s on the replica (caught up: %s);'
                ' invariant %s. `used_memory end` is read once the replica has caught up, 1 s after the last call;'
                ' then MEMORY USAGE is %s for the sale and %s for its stream.' % (
                    ', '.join('%s %s' % (kk[7:], n(v)) for kk, v in sorted(r['counts'].items())),
                    n(r['confirmed']), n(r['replica_confirmed'] or 0),
                    'yes' if r['replica_caught_up'] else 'no', r['invariant'], mb(r.get('sale_usage')),
                    mb(r.get('stream_usage')))]
        for f in r['refusals']:
            out.append('A call of %s rows was refused (`%s`); the script fell back to %s rows per call.' % (
                n(f['chunk']), f['error'], n(f['fallback'])))
        out.append('')
    o = res.get('one-buyer')
    if o:
        out += head('one-buyer',
                    '`SECKILL.INIT one 1000000000 LIMIT 100000000`, then `redis-benchmark -P 16 -c 50 -n %s'
                ' SECKILL.RESERVE one user:1` repeated: %s RESERVEs by one user in %.1f s, %s/s overall'
                ' (%.1f µs of server CPU per call on average, INFO commandstats); %s of them pending at the end.' % (
                    n(a['one_buyer_chunk']), n(o['n']), o['seconds'], k(o['rps']), o['usec_per_call'] or 0,
                        n(o['pending'])))
        out += table(['RESERVEs so far', 'ops/s', 'server µs per call (this run)', 'redis-benchmark max',
                      'slowest command', 'server waited for a CPU'],
                     [[n(ch['done']), '{:,.0f}'.format(ch['rps']),
                       ('%.0f' % ch['usec_per_call']) if ch.get('usec_per_call') is not None else '—',
                       ms(ch['max_ms']), slow_ms(ch['slow_us'], 2), ms(ch.get('waited_ms'), 0)]
                      for ch in o['chunks']])
    return out


HEADER = """# Hardening figures (issue 7)

Written by `make bench-hardening` (bench/hardening.py): stalls, idle CPU and
memory peaks of one module build, one section per label, so that builds sit
side by side. Each scenario starts its own redis-server(s) on free ports
(`--save ""` unless it needs an RDB), server pinned to CPU 0, the load
generators, the replica and the PING probe to CPU 1; the servers and the
probe run at nice -10 (`--nice`), each in a session (scheduler autogroup)
of its own niced alike, so that the other work on the machine preempts
them less.

**Noise.** The machine has 2 cores and other work (compiling, tests) ran
on them during these runs: throughputs and millisecond-scale latencies are
noisy and only comparable within a run. Stalls of hundreds of
milliseconds, CPU% of an idle server and memory peaks are still clearly
visible above that noise. To tell the two apart, each figure comes with
how long the server's main thread waited for a CPU while runnable in the
same window (`/proc/<pid>/schedstat`): a slow command in a window where the
server waited about as long is the machine, not the module.

Reproduce:

```sh
make bench-hardening MODULE=/path/to/libredis_seckill.so HARDENING_LABEL=before
make bench-hardening HARDENING_LABEL=after HARDENING_ARGS='--reconcile-chunk 1000'
.venv/bin/python bench/hardening.py --module PATH --label NAME [--only growth,idle-cpu,...]
```
"""


def render(data):
    labels = list(data['runs'])
    out = [HEADER, '## Side by side', '']
    table = {}
    order = []
    for label in labels:
        for sc, fig, target, value in key_figures(data['runs'][label]['results']):
            if (sc, fig) not in table:
                table[(sc, fig)] = {'target': target}
                order.append((sc, fig))
            table[(sc, fig)][label] = value
    out.append('| scenario | figure | target | %s |' % ' | '.join(labels))
    out.append('|---|---|---|%s' % ('---:|' * len(labels)))
    for sc, fig in order:
        row = table[(sc, fig)]
        out.append('| %s | %s | %s | %s |' % (sc, fig, row['target'],
                                              ' | '.join(str(row.get(lb) or '—') for lb in labels)))
    out.append('')
    for label in labels:
        out += section(label, data['runs'][label])
    out += [DATA_MARK, json.dumps(data, indent=1, sort_keys=True), '-->', '']
    return '\n'.join(out)


def load_data(path):
    if not os.path.exists(path):
        return {'runs': {}}
    text = open(path).read()
    at = text.find(DATA_MARK)
    if at < 0:
        return {'runs': {}}
    body = text[at + len(DATA_MARK):]
    body = body[:body.rfind('-->')]
    return json.loads(body)


# ----------------------------------------------------------------- main

def module_meta(args):
    with open(args.module, 'rb') as f:
        digest = hashlib.sha256(f.read()).hexdigest()[:16]
    st = os.stat(args.module)
    commit = args.commit
    if not commit:
        try:
            head = subprocess.run(['git', '-C', ROOT, 'log', '-1', '--format=%h %s'], capture_output=True,
                                  text=True).stdout.strip()
            dirty = subprocess.run(['git', '-C', ROOT, 'status', '--porcelain', '--', 'src', 'Cargo.toml'],
                                   capture_output=True, text=True).stdout.strip()
            commit = 'HEAD of %s when measured: %s%s (module path given; its build commit not recorded in it)' % (
                ROOT, head, ', with uncommitted changes in src/' if dirty else '')
        except OSError:
            commit = 'unknown'
    return {'module': args.module, 'sha256': digest, 'size': st.st_size,
            'mtime': time.strftime('%Y-%m-%d %H:%M', time.localtime(st.st_mtime)), 'commit': commit}


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument('--module', default=os.path.join(ROOT, 'target', 'release', 'libredis_seckill.so'))
    p.add_argument('--label', default='after')
    p.add_argument('--commit', default='', help='what code the module was built from (default: HEAD, noted as such)')
    p.add_argument('--only', default='', help='comma-separated: ' + ','.join(SCENARIOS))
    p.add_argument('--out', default=os.path.join(HERE, 'reports', 'HARDENING.md'))
    p.add_argument('--no-write', action='store_true', help='print only, leave the report alone')
    p.add_argument('--nice', type=int, default=-10, help='nice level of the servers and the PING probe')
    p.add_argument('--phase-seconds', type=float, default=300, help='time bound of one growth / one-buyer phase')
    p.add_argument('--growth-buyers', type=int, default=3_000_000)
    p.add_argument('--growth-chunk', type=int, default=100_000, help='RESERVEs per redis-benchmark run')
    p.add_argument('--idle-sales', default='20000,200000')
    p.add_argument('--idle-seconds', type=float, default=10)
    p.add_argument('--idle-baseline', type=float, default=3, help='seconds of CPU of the empty server')
    p.add_argument('--expiry-holds', type=int, default=300_000)
    p.add_argument('--expiry-hold-ms', type=int, default=15_000)
    p.add_argument('--expiry-wait', type=float, default=120, help='bound on the release, seconds')
    p.add_argument('--reconcile-rows', type=int, default=200_000)
    p.add_argument('--reconcile-chunk', type=int, default=0, help='rows per call (0: all in one call)')
    p.add_argument('--one-buyer-n', type=int, default=200_000)
    p.add_argument('--one-buyer-chunk', type=int, default=20_000)
    args = p.parse_args()
    args.module = os.path.abspath(args.module)
    NICE[0] = args.nice
    args.idle_sales = [int(x) for x in args.idle_sales.split(',') if x]
    only = [s.strip() for s in args.only.split(',') if s.strip()] or list(SCENARIOS)
    for s in only:
        if s not in SCENARIOS:
            p.error('unknown scenario %r (known: %s)' % (s, ', '.join(SCENARIOS)))
    if not os.path.exists(args.module):
        p.error('no module at %s (build it, or pass --module)' % args.module)

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    workdir = os.path.join(HERE, 'out', 'hardening')
    shutil.rmtree(workdir, ignore_errors=True)
    os.makedirs(workdir)

    data = load_data(args.out)
    run = data['runs'].setdefault(args.label, {'results': {}, 'when': {}})
    meta = module_meta(args)
    meta.update(date=time.strftime('%Y-%m-%d %H:%M'),
                redis_version=subprocess.run(['redis-server', '--version'], capture_output=True,
                                             text=True).stdout.split()[2].split('=')[-1],
                commands=[],
                args={k2: v for k2, v in vars(args).items() if k2 not in ('module', 'out', 'label', 'only')})
    old_args = get(run, 'meta', 'args') or {}
    meta['args'] = dict(old_args, **meta['args'])
    command = 'bench/hardening.py ' + ' '.join(
        a if re.fullmatch(r'[\w./,=:-]+', a) else "'%s'" % a.replace("'", "'\\''") for a in sys.argv[1:])
    meta['commands'] = [x for x in get(run, 'meta', 'commands') or [] if x != command] + [command]
    run['meta'] = meta
    t_all = time.monotonic()
    failed = []
    try:
        for s in only:
            t0 = time.monotonic()
            load = open('/proc/loadavg').read().split()[0]
            sdir = os.path.join(workdir, s)
            os.makedirs(sdir, exist_ok=True)
            try:
                run['results'][s] = RUNNERS[s](args, sdir)
                run['when'][s] = '%s, %.0f s, load %s, module %s' % (
                    time.strftime('%Y-%m-%d %H:%M'), time.monotonic() - t0, load, meta['sha256'][:8])
                run.setdefault('failed', {}).pop(s, None)
            except Exception as e:  # one scenario's failure leaves the others' figures
                failed.append('%s: %s' % (s, e))
                run.setdefault('failed', {})[s] = '%s, module %s: %r' % (
                    time.strftime('%Y-%m-%d %H:%M'), meta['sha256'][:8], e)
                log('%s FAILED: %r' % (s, e))
            finally:
                stop_all()
            log('%s: %.0f s' % (s, time.monotonic() - t0))
    finally:
        stop_all()
        for dirpath, dirnames, filenames in os.walk(workdir, topdown=False):
            for f in filenames:
                if f.endswith(('.rdb', '.aof', '.resp', '.manifest')):
                    os.remove(os.path.join(dirpath, f))
    run['meta']['seconds'] = time.monotonic() - t_all
    text = render(data)
    if not args.no_write:
        with open(args.out, 'w') as f:
            f.write(text)
    log('')
    for sc, fig, target, value in key_figures(run['results']):
        log('%-12s %-45s %-9s %s' % (sc, fig, target, value or '—'))
    log('total %.0f s%s' % (run['meta']['seconds'], '' if args.no_write else '; wrote ' + args.out))
    if failed:
        log('FAILED: ' + '; '.join(failed))
        return 1
    return 0


CLK_TCK = os.sysconf('SC_CLK_TCK')

if __name__ == '__main__':
    sys.exit(main())
