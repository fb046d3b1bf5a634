"""bench/hardening.py's five scenarios (growth, idle-cpu, mass-expiry,
reconcile, one-buyer), each on servers of its own; RUNNERS maps a
scenario's name to the function that runs it and returns its figures."""

import os
import re
import time

import redis

from hardening_client import as_dict, benchmark, latency_max, log, pipe, resp, sale_info, slowlog_take
from hardening_probe import Pinger
from hardening_report import mb, ping_worst
from hardening_servers import CLIENT_CPU, CLK_TCK, Server, stop_all, wait_caught_up, wait_link
from local_server import free_port


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
SCENARIOS = tuple(RUNNERS)
