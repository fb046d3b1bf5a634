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
import multiprocessing
import os
import random
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, 'clients', 'python'))

from seckill import SplitSale  # noqa: E402
from seckill.testing import Cluster  # noqa: E402

from cluster_nodes import SECKILL_CMDS, commandstats, single_node_rate  # noqa: E402
from cluster_report import report  # noqa: E402
from cluster_soldout import soldout_phase  # noqa: E402

PATHS = ('refill', 'borrow', 'state', 'repair')


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
