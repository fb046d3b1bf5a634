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
"""

import argparse
import collections
import json
import multiprocessing
import os
import random
import re
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, 'clients', 'python'))
sys.path.insert(0, os.path.join(ROOT, 'clients', 'python', 'tests'))

from seckill import SplitSale  # noqa: E402
from seckill._servers import RedisServer  # noqa: E402
from test_split_cluster import Cluster  # noqa: E402  (the test suite's cluster fixture)

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
        'after the sell-out, the answers that must prove SOLD_OUT, not the RESERVEs, bound a split sale.'
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
    lines += ['', '<details><summary>raw figures</summary>', '', '```json',
              json.dumps(fig, indent=1, sort_keys=True, default=str), '```', '', '</details>', '']
    with open(path, 'w') as fh:
        fh.write('\n'.join(lines))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--module', default=os.path.join(ROOT, 'target', 'release', 'libredis_seckill.so'))
    ap.add_argument('--stock', type=int, default=20000)
    ap.add_argument('--demand', type=int, default=3)
    ap.add_argument('--procs', type=int, default=4)
    ap.add_argument('--threads', type=int, default=4)
    ap.add_argument('--rate-n', type=int, default=200000)
    ap.add_argument('--out', default=os.path.join(HERE, 'reports', 'CLUSTER.md'))
    args = ap.parse_args()
    os.environ['SECKILL_MODULE'] = args.module
    fig = run(args)
    report(fig, args.out)
    print(open(args.out).read())


if __name__ == '__main__':
    main()
