#!/usr/bin/env python3
"""make bench-cluster: what predicts how a split sale scales (issue 8).

This machine has 2 cores, so throughput scaling itself cannot be shown.
This measures what predicts it, on a three-master Redis Cluster of
redis-server processes with the module (free ports below 55535, stopped by
pid at the end): one SplitSale of --stock units, random user ids, demand of
--demand x the stock, from --procs processes of --threads threads each
(separate SplitSale instances, as separate application servers would be).

Figures (bench/reports/CLUSTER.md): the RESERVE share of the busiest node (server
side, INFO commandstats), extra round trips per successful RESERVE by path
(client side), pool calls per RESERVE, false SOLD_OUT answers (a SOLD_OUT
that returned before a later RESERVE that succeeded began; the bench never
releases, so stock only goes down), units left unsold, oversell against the
ledger (every RESERVED answer, reconciled per part), and the time from the
first empty home part to the last unit sold. Then a measured single-node
RESERVE rate (redis-benchmark on one plain sale) and a projection for
P = 1, 2, 4, 8, 16 from it and the measured shares and overheads.

Then the sold-out phase (issue 18), without and with the local sold-out
flag, paired in the same run on the same sold-out sale: --so-rounds rounds,
each one phase of --so-seconds without the flag and one with it (the order
alternates; both phases of a round RELEASE as many units at the same
times), from --so-procs processes of --so-threads threads that call with no
pause, each process holding a SplitSale without the flag and one with a
SoldOutCache (lapse --lapse-ms), `notify-keyspace-events Kd` on the
masters. During each phase the bench RELEASEs --so-restocks times 1-3 units
of the ledger at random times, the last one at least --so-tail seconds
(more than the lapse) before the phase ends. Figures: answers/s after the
sell-out (client side), the share of SOLD_OUT answers that reached Redis,
snapshot rounds and SECKILL.* calls per SOLD_OUT answer, the worst and
median delay from a RELEASE to the first RESERVED after it, the units
restocked, won and left unsold at each phase's end, and the sold-out
projection vs P with the method above.
"""

import argparse
import collections
import json
import multiprocessing
import os
import random
import re
import statistics
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, 'clients', 'python'))

from seckill import SoldOutCache, SplitSale  # noqa: E402
from seckill.testing import Cluster, RedisServer  # noqa: E402

PATHS = ('refill', 'borrow', 'state', 'repair')
SECKILL_CMDS = ('seckill.reserve', 'seckill.send', 'seckill.recv', 'seckill.info')


def worker(port, name, counter, demand, threads, seed, out_q):
    """One application server: its own cluster client and SplitSale, threads
    taking request numbers from the shared counter until demand is met."""
    from redis.cluster import RedisCluster
    rc = RedisCluster(host='127.0.0.1', port=port, decode_responses=True, socket_timeout=30)
    sale = SplitSale(rc, name)
    sale.layout()
    rng = random.Random(seed)
    lock = threading.Lock()
    events, ledger, errors = [], [], []

    def run():
        while True:
            with counter.get_lock():
                i = counter.value
                if i >= demand:
                    return
                counter.value += 1
            with lock:
                user = 'u%016x' % rng.getrandbits(64)
            t0 = time.time()
            try:
                status, rid = sale.reserve(user, reqid='o%d' % i)
            except Exception as exc:
                errors.append(repr(exc))
                continue
            t1 = time.time()
            with lock:
                events.append((status, t0, t1))
                if status == 'RESERVED':
                    ledger.append((rid, user, 1))

    ts = [threading.Thread(target=run) for _ in range(threads)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    out_q.put({'events': events, 'ledger': ledger, 'errors': errors[:5], 'nerrors': len(errors),
               'stats': dict(sale.stats), 'first_empty': sale.first_empty})
    rc.close()


# ---------------------------------------------------------------- the sold-out phase (issue 18)

SO_MODES = ('off', 'flag')


def so_worker(port, name, idx, threads, lapse_ms, phase, cmd_q, out_q):
    """One application server after the sell-out: its own cluster client, a
    SplitSale without the flag and one with its own SoldOutCache. For each
    command (k, mode) its threads call RESERVE for new random users, with no
    pause, while the shared phase number is k; then it reports that phase."""
    from redis.cluster import RedisCluster
    rc = RedisCluster(host='127.0.0.1', port=port, decode_responses=True, socket_timeout=30)
    cache = SoldOutCache(lapse_ms=lapse_ms)
    sales = {'off': SplitSale(rc, name), 'flag': SplitSale(rc, name, local_soldout=cache)}
    for sale in sales.values():
        sale.layout()                               # the flagged one's keys get watched
    out_q.put(('ready', idx))
    while True:
        cmd = cmd_q.get()
        if cmd is None:
            break
        k, mode = cmd
        sale = sales[mode]
        st0, c0 = collections.Counter(sale.stats), collections.Counter(cache.stats)
        lock = threading.Lock()
        counts, wins, errors = collections.Counter(), [], []

        def run(n, k=k, sale=sale, lock=lock, counts=counts, wins=wins, errors=errors):
            rng = random.Random('%d/%d/%d' % (idx, k, n))
            mine = collections.Counter()
            i = 0
            while phase.value == k:
                i += 1
                user = 'z%d-%d-%d-%d-%x' % (k, idx, n, i, rng.getrandbits(32))
                try:
                    status, _rid = sale.reserve(user)
                except Exception as exc:
                    with lock:
                        errors.append(repr(exc))
                    time.sleep(0.01)
                    continue
                mine[status] += 1
                if status == 'RESERVED':
                    t1 = time.time()
                    with lock:
                        wins.append(t1)
            with lock:
                counts.update(mine)

        ts = [threading.Thread(target=run, args=(n,)) for n in range(threads)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        st = collections.Counter(sale.stats)
        st.subtract(st0)
        cs = collections.Counter(cache.stats)
        cs.subtract(c0)
        out_q.put(('phase', idx, k, {'counts': dict(counts), 'wins': wins, 'errors': errors[:3],
                                     'nerrors': len(errors), 'stats': dict(+st),
                                     'cache': dict(+cs) if mode == 'flag' else {}}))
    cache.close()
    rc.close()


def so_schedule(args, rnd):
    """One round's restocks: (seconds into the phase, units), the same for
    both phases of the round."""
    rng = random.Random('restocks/%d' % rnd)
    lo, hi = 0.5, args.so_seconds - args.so_tail
    times = sorted(rng.uniform(lo, hi) for _ in range(args.so_restocks))
    return [(t, rng.randint(1, 3)) for t in times]


def so_phase(args, cl, sale, k, mode, schedule, held, phase, cmd_qs, out_q):
    """One phase: start the workers' threads, RELEASE on schedule, stop;
    the phase's figures."""
    before = commandstats(cl)
    t_go = time.time()
    phase.value = k
    for q_ in cmd_qs:
        q_.put((k, mode))
    restocks = []
    for at, units in schedule:
        time.sleep(max(0.0, t_go + at - time.time()))
        batch = [held.pop() for _ in range(units)]
        t = time.time()
        for rid, user, _q in batch:
            status = sale.release(user, rid)
            if status != 'RELEASED':
                raise RuntimeError('RELEASE of %s answered %s' % (rid, status))
        restocks.append((t, units))
    time.sleep(max(0.0, t_go + args.so_seconds - time.time()))
    phase.value = -1
    t_stop = time.time()
    parts = []
    while len(parts) < len(cmd_qs):
        msg = out_q.get(timeout=120)
        if msg[0] == 'phase' and msg[2] == k:
            parts.append(msg[3])
    after = commandstats(cl)
    info = sale.info()
    counts, stats, cache = collections.Counter(), collections.Counter(), collections.Counter()
    wins = []
    for r in parts:
        counts.update(r['counts'])
        stats.update(r['stats'])
        cache.update(r['cache'])
        wins.extend(r['wins'])
    wins.sort()
    delays = []
    for t, _units in restocks:
        first = next((w for w in wins if w >= t), None)
        delays.append(None if first is None else first - t)
    calls = collections.Counter()
    for port in after:
        for c in SECKILL_CMDS:
            calls[c] += after[port][c] - before[port][c]
    return {
        'round': k // 2, 'phase': k, 'mode': mode, 'seconds': round(t_stop - t_go, 3),
        'statuses': dict(counts), 'answers': sum(counts.values()),
        'sold_out': counts['SOLD_OUT'], 'reserved': counts['RESERVED'],
        'local': stats['sold_out_local'], 'probes': cache['probes'],
        'state_rounds_sold_out': stats['rt_state_sold_out'], 'state_rounds_all': stats['rt_state'] + stats['rt_state_sold_out'],
        'server_calls': dict(calls), 'restocks': [(round(t - t_go, 3), u) for t, u in restocks],
        'units_restocked': sum(u for _t, u in restocks),
        'delays_ms': [None if d is None else round(1000 * d, 1) for d in delays],
        'unsold_at_end': info['remaining'] + info['in_flight'], 'invariant': info['invariant'],
        'client_errors': sum(r['nerrors'] for r in parts),
        'error_samples': [e for r in parts for e in r['errors']][:3],
        'cache': dict(cache),
    }


def soldout_phase(args, cl, rc, name, ledger):
    """The sold-out phase without and with the local flag, paired: rounds of
    one phase each, the order alternating, the same restocks in both."""
    for n in cl.masters:
        n.client().config_set('notify-keyspace-events', 'Kd')
    sale = SplitSale(rc, name)
    held = list(ledger)
    random.Random(7).shuffle(held)
    phase = multiprocessing.RawValue('l', -1)
    out_q = multiprocessing.Queue()
    cmd_qs = [multiprocessing.Queue() for _ in range(args.so_procs)]
    procs = [multiprocessing.Process(target=so_worker, args=(cl.masters[0].port, name, i, args.so_threads,
                                                             args.lapse_ms, phase, cmd_qs[i], out_q))
             for i in range(args.so_procs)]
    for p in procs:
        p.start()
    phases = []
    try:
        for _ in procs:
            msg = out_q.get(timeout=120)
            assert msg[0] == 'ready', msg
        time.sleep(1.0)                             # the flagged sales' subscriptions made
        k = 0
        for rnd in range(args.so_rounds):
            schedule = so_schedule(args, rnd)
            order = SO_MODES if rnd % 2 == 0 else SO_MODES[::-1]
            for mode in order:
                phases.append(so_phase(args, cl, sale, k, mode, schedule, held, phase, cmd_qs, out_q))
                print('sold-out phase %d (%s): %s' % (k, mode, json.dumps({x: phases[-1][x] for x in (
                    'answers', 'sold_out', 'local', 'reserved', 'units_restocked', 'delays_ms',
                    'unsold_at_end')})), file=sys.stderr)
                k += 1
    finally:
        for q_ in cmd_qs:
            q_.put(None)
        for p in procs:
            p.join(60)
    out = {'rounds': args.so_rounds, 'seconds': args.so_seconds, 'procs': args.so_procs,
           'threads': args.so_threads, 'lapse_ms': args.lapse_ms, 'tail': args.so_tail, 'restocks_per_phase': args.so_restocks,
           'phases': phases}
    for mode in SO_MODES:
        ph = [x for x in phases if x['mode'] == mode]
        calls = collections.Counter()
        for x in ph:
            calls.update(x['server_calls'])
        sold_out = sum(x['sold_out'] for x in ph)
        local = sum(x['local'] for x in ph)
        delays = [d for x in ph for d in x['delays_ms']]
        measured = sorted(d for d in delays if d is not None)
        won = sum(x['reserved'] for x in ph)
        restocked = sum(x['units_restocked'] for x in ph)
        out[mode] = {
            'seconds': sum(x['seconds'] for x in ph), 'answers': sum(x['answers'] for x in ph),
            'answers_per_s': sum(x['answers'] for x in ph) / sum(x['seconds'] for x in ph),
            'sold_out': sold_out, 'local': local, 'reached': sold_out - local,
            'reached_share': (sold_out - local) / max(1, sold_out),
            'f': sum(x['state_rounds_sold_out'] for x in ph) / max(1, sold_out),
            'server_calls': dict(calls),
            'server_calls_per_sold_out': (sum(calls.values()) - won) / max(1, sold_out),
            'server_calls_per_s': sum(calls.values()) / sum(x['seconds'] for x in ph),
            'info_calls': calls['seckill.info'],
            'restocks': len(delays), 'units_restocked': restocked, 'units_won': won,
            'oversold': max(0, won - restocked),
            'unsold_at_phase_ends': sum(x['unsold_at_end'] for x in ph),
            'restocks_never_sold': sum(1 for d in delays if d is None),
            'delay_worst_ms': max(measured) if measured else None,
            'delay_median_ms': statistics.median(measured) if measured else None,
            'client_errors': sum(x['client_errors'] for x in ph),
            'probes': sum(x['probes'] for x in ph),
            'cache': dict(sum((collections.Counter(x['cache']) for x in ph), collections.Counter())),
        }
    return out


def commandstats(cluster):
    out = {}
    for n in cluster.masters:
        st = n.client().info('commandstats')
        out[n.port] = {c: int(st.get('cmdstat_' + c, {}).get('calls', 0)) for c in SECKILL_CMDS}
    return out


def single_node_rate(module, n, pipeline):
    """RESERVE/s of one redis-server on one plain sale (stock never runs out,
    random users): redis-benchmark, 50 clients."""
    srv = RedisServer(module=module).start()
    try:
        srv.client().execute_command('SECKILL.INIT', 'bench:{one}', 10 ** 12, 'LIMIT', 10 ** 12)
        res = subprocess.run(['redis-benchmark', '-p', str(srv.port), '-n', str(n), '-c', '50',
                              '-P', str(pipeline), '-r', '100000000', '-q',
                              'SECKILL.RESERVE', 'bench:{one}', 'user:__rand_int__'],
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=300)
        text = res.stdout.decode(errors='replace').replace('\r', '\n')
        m = re.findall(r'([0-9.]+) requests per second', text)
        return float(m[-1]) if m else 0.0
    finally:
        srv.stop()


def run(args):
    cl = Cluster(3)
    try:
        rc = cl.client()
        name = 'bench%d' % os.getpid()
        sale = SplitSale(rc, name)
        sale.create(args.stock, limit=1)
        lay = sale.layout()
        nodes = {k: rc.get_node_from_key(k).port for k in lay.keys}
        before = commandstats(cl)
        demand = args.stock * args.demand
        counter = multiprocessing.Value('l', 0)
        q = multiprocessing.Queue()
        t_start = time.time()
        procs = [multiprocessing.Process(target=worker, args=(cl.masters[0].port, name, counter, demand,
                                                              args.threads, 1000 + i, q))
                 for i in range(args.procs)]
        for p in procs:
            p.start()
        results = [q.get(timeout=1800) for _ in procs]
        for p in procs:
            p.join()
        wall = time.time() - t_start
        after = commandstats(cl)

        events = [e for r in results for e in r['events']]
        ledger = [x for r in results for x in r['ledger']]
        stats = collections.Counter()
        for r in results:
            stats.update(r['stats'])
        nerrors = sum(r['nerrors'] for r in results)
        statuses = collections.Counter(s for s, _, _ in events)
        ok_starts = [t0 for s, t0, _ in events if s == 'RESERVED']
        last_ok_start = max(ok_starts)
        last_sold = max(t1 for s, _, t1 in events if s == 'RESERVED')
        false_so = sum(1 for s, _, t1 in events if s == 'SOLD_OUT' and t1 < last_ok_start)
        first_empty = min(r['first_empty'] for r in results if r['first_empty'])
        info = sale.info()
        rec = sale.reconcile(ledger)
        sold = sum(q_ for _, _, q_ in ledger)
        calls = {port: {c: after[port][c] - before[port][c] for c in SECKILL_CMDS} for port in after}
        reserve_calls = {port: c['seckill.reserve'] for port, c in calls.items()}
        all_calls = {port: sum(c.values()) for port, c in calls.items()}
        reserved = stats['reserved']
        answers = len(events)
        sold_out = statuses['SOLD_OUT']
        fig = {
            'stock': args.stock, 'demand': demand, 'procs': args.procs, 'threads': args.threads,
            'parts': len(lay.parts), 'wall_s': round(wall, 2), 'client_errors': nerrors,
            'statuses': dict(statuses),
            'nodes': {k: nodes[k] for k in lay.keys},
            'reserve_calls_per_node': reserve_calls,
            'seckill_calls_per_node': all_calls,
            'busiest_reserve_share': max(reserve_calls.values()) / sum(reserve_calls.values()),
            'busiest_all_share': max(all_calls.values()) / sum(all_calls.values()),
            'extra_rt_per_success': {p_: stats['rt_' + p_] / reserved for p_ in PATHS},
            'extra_rt_per_sold_out': {p_: stats['rt_%s_sold_out' % p_] / max(1, sold_out) for p_ in PATHS},
            'pool_calls_per_reserve': stats['pool_calls'] / answers,
            'pool_calls': stats['pool_calls'], 'refills': stats['refills'], 'borrows': stats['borrows'],
            'repairs': stats['repairs'], 'gave_up': stats['gave_up'],
            'false_sold_out': false_so,
            'unsold': info['remaining'] + info['in_flight'],
            'sold': sold, 'oversell': max(0, sold - args.stock),
            'ledger_unknown': rec['orders_unknown'], 'ledger_released': rec['orders_released'],
            'ledger_pending': rec['orders_pending'], 'invariant': info['invariant'],
            'first_empty_to_last_sold_ms': round((last_sold - first_empty) * 1000, 1),
            'selling_s': round(last_sold - t_start, 2),
            'server_calls_per_success': sum(all_calls.values()) / reserved,
            'seckill_calls_total': sum(all_calls.values()),
            'info_calls_total': sum(c['seckill.info'] for c in calls.values()),
        }
        if args.so_rounds > 0:
            fig['soldout'] = soldout_phase(args, cl, rc, name, ledger)
        rc.close()
    finally:
        cl.stop()
    fig['single_node_rate'] = single_node_rate(args.module, args.rate_n, 1)
    fig['single_node_rate_pipelined'] = single_node_rate(args.module, args.rate_n, 16)
    return fig


def projection(fig):
    """RESERVE/s the busiest node allows, assuming the nodes are CPU-bound,
    every SECKILL.* call costs about one RESERVE, and clients and network
    keep up. Selling phase: each successful RESERVE costs
    `server_calls_per_success` calls, of which the busiest node takes
    k/P (k: the measured busiest share times 3). Sold-out phase: each answer
    costs one RESERVE on its home node plus, with probability f (the
    measured snapshot rounds per SOLD_OUT answer), one INFO on every node."""
    rows = []
    k = fig['busiest_reserve_share'] * fig['parts']
    ex = fig['extra_rt_per_success']
    f = fig['extra_rt_per_sold_out']['state']
    for rate_name in ('single_node_rate', 'single_node_rate_pipelined'):
        r1 = fig[rate_name]
        for P in (1, 2, 4, 8, 16):
            if P == 1:
                sell, so = r1, r1
            else:
                w = 1 + ex['refill'] + ex['borrow'] + ex['repair'] + ex['state'] * P
                sell = r1 / (w * min(1.0, k / P))
                so = r1 / (min(1.0, k / P) + f)
            rows.append((rate_name, P, sell, so))
    return rows


def so_projection(fig):
    """The sold-out phase of projection() with the paired phases' figures:
    answers/s the busiest node allows when a share g of the SOLD_OUT answers
    reaches Redis (one RESERVE on its home node, busiest share k/P) and f
    snapshot rounds (one INFO on every node) are paid per answer:
    r1 / (g * k/P + f). Without the flag g = 1, which is projection()'s
    r1 / (k/P + f). P = 1 is one plain sale (k/P = 1, no snapshot): r1 / g."""
    so = fig['soldout']
    k = fig['busiest_reserve_share'] * fig['parts']
    rows = []
    for rate_name in ('single_node_rate', 'single_node_rate_pipelined'):
        r1 = fig[rate_name]
        for P in (1, 2, 4, 8, 16):
            row = [rate_name, P]
            for mode in SO_MODES:
                g, f = so[mode]['reached_share'], so[mode]['f']
                row.append(r1 / max(g, 1e-9) if P == 1 else r1 / (g * min(1.0, k / P) + f))
            rows.append(tuple(row))
    return rows


def report(fig, path):
    P = fig['parts']
    target_share = 1 / P + 0.05
    ex = fig['extra_rt_per_success']
    lines = [
        '# make bench-cluster: one split sale on a three-master cluster',
        '',
        'Generated by `bench/cluster.py` (`make bench-cluster`). %d units, demand %d '
        'requests (%dx) from random user ids, %d client processes x %d threads, each process '
        'its own `SplitSale`; LIMIT 1, no replicas, no releases. Wall time %.1f s on this '
        '2-core machine (servers and clients share it: the rates below are not the figures; '
        'the shares and overheads are).' % (fig['stock'], fig['demand'], fig['demand'] // fig['stock'],
                                           fig['procs'], fig['threads'], fig['wall_s']),
        '',
        'This run: `%s` (`make bench-cluster` runs `bench/cluster.py --module $(MODULE) $(CLUSTER_ARGS)`).'
        % fig['command'],
        '',
        '| figure | measured | target |',
        '|---|---|---|',
        '| RESERVE calls on the busiest node | %.1f%% | at most %.1f%% (1/P + 5 points) |'
        % (100 * fig['busiest_reserve_share'], 100 * target_share),
        '| Extra round trips per successful RESERVE: refill | %.4f | at most 0.05 |' % ex['refill'],
        '| Extra round trips per successful RESERVE: borrow | %.4f | at most 0.05 |' % ex['borrow'],
        '| Extra round trips per successful RESERVE: state reads | %.4f | at most 0.05 |' % ex['state'],
        '| Extra round trips per successful RESERVE: repair of transfers seen in flight | %.4f | |' % ex['repair'],
        '| Extra round trips per successful RESERVE, all paths | %.4f | |' % sum(ex.values()),
        '| Pool calls per RESERVE (all answers) | %.5f (%d calls, %d refills) | |'
        % (fig['pool_calls_per_reserve'], fig['pool_calls'], fig['refills']),
        '| False `SOLD_OUT` answers | %d | 0 |' % fig['false_sold_out'],
        '| Units left unsold | %d | 0 |' % fig['unsold'],
        '| Oversell against the ledger | %d (ledger %d units of %d; per-part RECONCILE: %d pending, '
        '%d unknown, %d released) | 0 |' % (fig['oversell'], fig['sold'], fig['stock'], fig['ledger_pending'],
                                           fig['ledger_unknown'], fig['ledger_released']),
        '| Time from the first empty part to the last unit sold | %.1f ms (of %.2f s selling) | |'
        % (fig['first_empty_to_last_sold_ms'], fig['selling_s']),
        '',
        'Answers: %s. Borrows %d, repairs of transfers seen in flight %d, gave up %d, client errors %d, '
        'audit `%s`. RESERVE calls per node (server side): %s; all SECKILL.* calls per node: %s '
        '(%.1f%% on the busiest). A SOLD_OUT answer costs %.3f snapshot rounds on average '
        '(the others reuse a sale-wide verdict taken after they began); %d SECKILL.INFO calls in all.'
        % (', '.join('%s %d' % kv for kv in sorted(fig['statuses'].items())), fig['borrows'], fig['repairs'],
           fig['gave_up'], fig['client_errors'], fig['invariant'],
           ', '.join('%d' % v for v in fig['reserve_calls_per_node'].values()),
           ', '.join('%d' % v for v in fig['seckill_calls_per_node'].values()),
           100 * fig['busiest_all_share'], fig['extra_rt_per_sold_out']['state'], fig['info_calls_total']),
        '',
        '## Projection (not a measurement)',
        '',
        'Measured single-node RESERVE rate (redis-benchmark, one plain sale, 50 clients, random users): '
        '%.0f/s unpipelined, %.0f/s with 16-deep pipelines. Projected with the measured figures above: '
        'server calls per successful RESERVE w(P) = 1 + (refill + borrow + repair round trips) + '
        '(state-read rounds) * P = %.4f at P = 3, busiest-node share k/P with k = %.3f (measured at P = 3), '
        'snapshot rounds per SOLD_OUT answer f = %.3f. Assumes CPU-bound nodes, every SECKILL.* call '
        'costing about one RESERVE, clients and network keeping up. Selling phase: r1 / (w(P) * k/P). '
        'Sold-out phase: r1 / (k/P + f) (a snapshot reads every node), which levels off at r1/f: '
        'after the sell-out, the answers that must prove SOLD_OUT, not the RESERVEs, bound a split sale '
        '(without the local sold-out flag; the next section measures the sold-out phase with and without it).'
        % (fig['single_node_rate'], fig['single_node_rate_pipelined'],
           1 + sum(fig['extra_rt_per_success'].values()) + fig['extra_rt_per_success']['state'] * (P - 1),
           fig['busiest_reserve_share'] * P, fig['extra_rt_per_sold_out']['state']),
        '',
        '| P | selling, unpipelined | sold out, unpipelined | selling, pipelined | sold out, pipelined |',
        '|---|---|---|---|---|',
    ]
    rows = projection(fig)
    by = {(n, P_): (s, so) for n, P_, s, so in rows}
    for P_ in (1, 2, 4, 8, 16):
        a = by[('single_node_rate', P_)]
        b = by[('single_node_rate_pipelined', P_)]
        lines.append('| %d | %.0fk/s | %.0fk/s | %.0fk/s | %.0fk/s |'
                     % (P_, a[0] / 1e3, a[1] / 1e3, b[0] / 1e3, b[1] / 1e3))
    if 'soldout' in fig:
        lines += [''] + so_report(fig)
    lines += ['', '<details><summary>raw figures</summary>', '', '```json',
              json.dumps(fig, indent=1, sort_keys=True, default=str), '```', '', '</details>', '']
    with open(path, 'w') as fh:
        fh.write('\n'.join(lines))


def ratio(v):
    return '%.2f' % v if v < 100 else '%.0f' % v


def so_report(fig):
    """The section of the sold-out phase, paired without and with the flag."""
    so = fig['soldout']
    a, b = so['off'], so['flag']

    def both(fmt, key):
        return '| %s | %s |' % (fmt(a[key]), fmt(b[key]))

    def delay(x):
        return '%s / %s ms' % (x['delay_worst_ms'], x['delay_median_ms'])

    def pct(x):
        return '%.2f%% (%d of %d)' % (100 * x['reached_share'], x['reached'], x['sold_out'])

    lines = [
        '## The sold-out phase, without and with the local sold-out flag (issue 18)',
        '',
        'Paired in the same run, on the sale just sold out: %d rounds, each one phase of %g s without the flag '
        'and one with it (the order alternates; both phases of a round RELEASE the same number of units at the '
        'same times), %d client processes x %d threads calling RESERVE for new random users with no pause. Each '
        'process holds a `SplitSale` without the flag and one with its own `SoldOutCache(lapse_ms=%g)`; '
        '`notify-keyspace-events Kd` on the masters. Each phase RELEASEs %d times 1-3 units of the ledger at '
        'random times, the last at least %g s before the phase ends.'
        % (so['rounds'], so['seconds'], so['procs'], so['threads'], so['lapse_ms'], so['restocks_per_phase'],
           so['tail']),
        '',
        '| figure | without the flag | with the flag |',
        '|---|---|---|',
        '| Answers after the sell-out per second (client side; clients and servers share 2 cores) ' +
        both(lambda v: '%.0f' % v, 'answers_per_s'),
        '| `SOLD_OUT` answers | %d | %d |' % (a['sold_out'], b['sold_out']),
        '| `SOLD_OUT` answers that reached Redis (not given by the flag) | %s | %s |' % (pct(a), pct(b)),
        '| Snapshot rounds per `SOLD_OUT` answer (f) ' + both(lambda v: '%.5f' % v, 'f'),
        '| SECKILL.* calls per `SOLD_OUT` answer (server side, all nodes, less the successful RESERVEs) ' +
        both(lambda v: '%.4f' % v, 'server_calls_per_sold_out'),
        '| SECKILL.* calls per second on the cluster during the phase (server side, all nodes) ' +
        both(lambda v: '%.0f' % v, 'server_calls_per_s'),
        '| SECKILL.INFO calls ' + both(lambda v: '%d' % v, 'info_calls'),
        '| Restocks (units released) | %d (%d) | %d (%d) |'
        % (a['restocks'], a['units_restocked'], b['restocks'], b['units_restocked']),
        '| Units won / left unsold at the phase ends / oversold | %d / %d / %d | %d / %d / %d |'
        % (a['units_won'], a['unsold_at_phase_ends'], a['oversold'],
           b['units_won'], b['unsold_at_phase_ends'], b['oversold']),
        '| Worst / median delay from a RELEASE to the first RESERVED after it | %s | %s |' % (delay(a), delay(b)),
        '| Restocks with no RESERVED after them in their phase | %d | %d |'
        % (a['restocks_never_sold'], b['restocks_never_sold']),
        '| Client errors | %d | %d |' % (a['client_errors'], b['client_errors']),
        '',
        'Sold-out projection (not a measurement), the method above with the paired phases\' figures: a share g '
        'of the `SOLD_OUT` answers reaches Redis (one RESERVE on its home node, the busiest taking k/P) and each '
        'answer pays f snapshot rounds (one INFO on every node): r1 / (g * k/P + f), with g = 1 and f = %.4f '
        'without the flag (the selling run\'s tail above had f = %.4f), g = %.5f and f = %.5f with it. P = 1 is '
        'one plain sale, r1 / g (g taken from the split sale). It assumes, as above, that the clients keep up. '
        'With the flag they may not: the answers are given by the application processes (%.0f answers/s per '
        'process here, on cores shared with the servers), which the projection does not charge. And with the '
        'flag g and f are not shares that hold at any rate: what reaches Redis is about one probe per process '
        'per lapse and the calls right after each restock (%.0f SECKILL.* calls/s on the cluster above, against '
        '%.0f without the flag), so g and f fall as the answer rate rises; the projected figures say where the '
        'Redis nodes stop bounding the sold-out phase, not a rate the clients reach.'
        % (a['f'], fig['extra_rt_per_sold_out']['state'], b['reached_share'], b['f'],
           b['answers_per_s'] / so['procs'], b['server_calls_per_s'], a['server_calls_per_s']),
        '',
        '| P | selling, unpipelined | sold out, no flag | sold out, flag | selling, pipelined | sold out, no flag '
        '| sold out, flag |',
        '|---|---|---|---|---|---|---|',
    ]
    sell = {(n, P_): s for n, P_, s, _ in projection(fig)}
    so_rows = {(n, P_): (x, y) for n, P_, x, y in so_projection(fig)}

    def k_(v):
        return '%.0fk/s' % (v / 1e3) if v < 1e7 else '%.0fM/s' % (v / 1e6)
    for P_ in (1, 2, 4, 8, 16):
        u, pl = ('single_node_rate', P_), ('single_node_rate_pipelined', P_)
        lines.append('| %d | %s | %s | %s | %s | %s | %s |' % (
            P_, k_(sell[u]), k_(so_rows[u][0]), k_(so_rows[u][1]), k_(sell[pl]), k_(so_rows[pl][0]),
            k_(so_rows[pl][1])))
    u2, u16 = so_rows[('single_node_rate', 2)], so_rows[('single_node_rate', 16)]
    s2, s16 = sell[('single_node_rate', 2)], sell[('single_node_rate', 16)]
    lines += ['', 'From P = 2 to P = 16 (unpipelined): selling x%.1f, sold out without the flag x%.1f, with the flag '
              'x%.1f. The sold-out ceiling against the selling one: %s / %s at P = 2 and %s / %s at P = 16 '
              '(without / with the flag).'
              % (s16 / s2, u16[0] / u2[0], u16[1] / u2[1], ratio(u2[0] / s2), ratio(u2[1] / s2),
                 ratio(u16[0] / s16), ratio(u16[1] / s16))]
    return lines


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--module', default=os.path.join(ROOT, 'target', 'release', 'libredis_seckill.so'))
    ap.add_argument('--stock', type=int, default=20000)
    ap.add_argument('--demand', type=int, default=3)
    ap.add_argument('--procs', type=int, default=4)
    ap.add_argument('--threads', type=int, default=4)
    ap.add_argument('--rate-n', type=int, default=200000)
    ap.add_argument('--so-rounds', type=int, default=4,
                    help='sold-out phase: rounds of one phase without and one with the flag (0: skip)')
    ap.add_argument('--so-seconds', type=float, default=5.0, help='sold-out phase: seconds of each phase')
    ap.add_argument('--so-tail', type=float, default=1.5,
                    help='sold-out phase: seconds of each phase after its last restock, at least')
    ap.add_argument('--so-restocks', type=int, default=3, help='sold-out phase: RELEASEs of 1-3 units per phase')
    ap.add_argument('--so-procs', type=int, default=4)
    ap.add_argument('--so-threads', type=int, default=4)
    ap.add_argument('--lapse-ms', type=float, default=500, help='the local flag\'s lapse')
    ap.add_argument('--out', default=os.path.join(HERE, 'reports', 'CLUSTER.md'))
    args = ap.parse_args()
    os.environ['SECKILL_MODULE'] = args.module
    fig = run(args)
    fig['command'] = ' '.join(['bench/cluster.py'] + sys.argv[1:])
    report(fig, args.out)
    print(open(args.out).read())


if __name__ == '__main__':
    main()
