"""bench/hardening.py's PING probe: PING on one connection from a process of
its own, each sample with how long the server and the probe waited for a
CPU meanwhile (/proc/.../schedstat), so that the machine's noise can be
told from the server's own stalls."""

import multiprocessing
import os
import signal
import socket
import time

from hardening_servers import CLIENT_CPU, NICE, own_priority


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
