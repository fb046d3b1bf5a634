"""bench/cluster.py's sold-out phase (issue 18): the sale just sold out,
called without and with the local sold-out flag in paired phases while the
bench RELEASEs a few units at random times; the figures of each mode."""

import collections
import json
import multiprocessing
import random
import statistics
import sys
import threading
import time

from seckill import SoldOutCache, SplitSale

from cluster_nodes import SECKILL_CMDS, commandstats

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
