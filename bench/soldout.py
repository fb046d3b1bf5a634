#!/usr/bin/env python3
"""The local sold-out flag under a flood (issue 18): N client processes keep
calling RESERVE after the sell-out while releases restock a few units at
random times.

    .venv/bin/python bench/soldout.py --module target/release/libredis_seckill.so

For one sale key (one redis-server) and for a split sale (a three-master
cluster, `--no-split` skips it), three ways each: without the flag, with
the flag and keyspace events on (`notify-keyspace-events Kd`), and with the
flag and events off (it then lives on replies and lapses after
`--lapse-ms`). Every process has its own client and sale object (its own
cache), T threads, and a pause after each call (`--pause-ms`: this machine
has 2 cores shared by servers and clients, and a request loop with no pause
at all would starve the servers).

Figures, not assertions: the share of SOLD_OUT answers that reached Redis
(client side: answers not given by the flag; server side: SECKILL.*
calls per SOLD_OUT answer, from INFO commandstats), the worst and median
delay from a RELEASE being sent to the first RESERVE that succeeded after
it, and the units left unsold and oversold at the end (INFO, and the
RESERVED answers against the units released).
"""

from __future__ import annotations

import argparse
import collections
import json
import multiprocessing
import os
import random
import statistics
import sys
import threading
import time
import zlib

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, 'clients', 'python'))

SECKILL_CMDS = ('seckill.reserve', 'seckill.info', 'seckill.send', 'seckill.recv')
MODES = (('off', 'no flag'), ('events', 'flag, events on'), ('replies', 'flag, events off'))


# ---------------------------------------------------------------- client processes

def client_proc(spec, ready, go, stop, out_q, seed):
    """One application server: its own client, sale object and cache; T
    threads reserve for new random users until `stop`."""
    import redis
    from redis.cluster import RedisCluster

    from seckill import Sale, SoldOutCache, SplitSale
    if spec['split']:
        client = RedisCluster(host='127.0.0.1', port=spec['port'], decode_responses=True,
                              socket_timeout=30)
    else:
        client = redis.Redis(host='127.0.0.1', port=spec['port'], decode_responses=True,
                             socket_timeout=30, max_connections=64)
    cache = SoldOutCache(lapse_ms=spec['lapse_ms']) if spec['mode'] != 'off' else False
    if spec['split']:
        sale = SplitSale(client, spec['name'], local_soldout=cache)
        sale.layout()                               # read: its keys get watched
    else:
        sale = Sale(client, spec['key'], local_soldout=cache)
    lock = threading.Lock()
    counts = collections.Counter()
    wins = []
    errors = []
    pause = spec['pause_ms'] / 1000.0
    rng = random.Random(seed)
    ready.put(seed)

    def run(n):
        i = 0
        go.wait()
        while not stop.is_set():
            i += 1
            user = 'c%d-%d-%d-%x' % (seed, n, i, rng.getrandbits(32))
            try:
                if spec['split']:
                    status, rid = sale.reserve(user)
                else:
                    res = sale.reserve(user)
                    status, rid = res.status, res.rid
            except Exception as exc:
                errors.append(repr(exc))
                time.sleep(0.01)
                continue
            t1 = time.time()
            with lock:
                counts[status] += 1
                if status == 'RESERVED':
                    wins.append((t1, rid, user))
            if pause:
                time.sleep(pause)

    ts = [threading.Thread(target=run, args=(n,)) for n in range(spec['threads'])]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    local = cache.stats['local'] if cache else 0
    out_q.put({'counts': dict(counts), 'wins': wins, 'local': local,
               'probes': cache.stats['probes'] if cache else 0,
               'errors': errors[:3], 'nerrors': len(errors)})
    if cache:
        cache.close()


# ---------------------------------------------------------------- one run

def seckill_calls(clients):
    n = collections.Counter()
    for c in clients:
        st = c.info('commandstats')
        for cmd in SECKILL_CMDS:
            n[cmd] += int(st.get('cmdstat_' + cmd, {}).get('calls', 0))
    return n


def one_run(args, split, mode, ports, masters):
    """Sell out, flood, restock at random times, stop: the figures."""
    import redis
    from redis.cluster import RedisCluster

    from seckill import Sale, SplitSale
    rng = random.Random(zlib.crc32(('%s/%s' % (split, mode)).encode()))
    flags = 'Kd' if mode != 'replies' else ''
    for c in masters:
        c.config_set('notify-keyspace-events', flags)
    tag = '%s%d' % (mode, int(time.time() * 1000) % 10 ** 8)
    if split:
        admin = RedisCluster(host='127.0.0.1', port=ports[0], decode_responses=True,
                             socket_timeout=30)
        sale = SplitSale(admin, tag)
        sale.create(args.stock)
        spec_key = {'name': tag}
    else:
        admin = redis.Redis(host='127.0.0.1', port=ports[0], decode_responses=True,
                            socket_timeout=30)
        key = 'sale:{%s}' % tag
        sale = Sale(admin, key)
        sale.init(args.stock)
        spec_key = {'key': key}
    # The releaser holds the whole stock first (these are the units it restocks).
    held = []
    for i in range(args.stock):
        user = 'seed%d' % i
        if split:
            status, rid = sale.reserve(user)
        else:
            res = sale.reserve(user)
            status, rid = res.status, res.rid
        assert status == 'RESERVED', status
        held.append((user, rid))
    rng.shuffle(held)

    ctx = multiprocessing.get_context('spawn')
    go, stop = ctx.Event(), ctx.Event()
    q, ready = ctx.Queue(), ctx.Queue()
    spec = dict(spec_key, split=split, mode=mode, port=ports[0], threads=args.threads,
                lapse_ms=args.lapse_ms, pause_ms=args.pause_ms)
    procs = [ctx.Process(target=client_proc, args=(spec, ready, go, stop, q, 1000 + i))
             for i in range(args.procs)]
    for p in procs:
        p.start()
    for _ in procs:
        ready.get(timeout=120)
    time.sleep(args.settle)                      # the subscriptions made
    before = seckill_calls(masters)
    t_start = time.time()
    go.set()
    time.sleep(args.warmup)
    restocks = []                                # (time sent, units)
    released = 0
    for _ in range(args.restocks):
        time.sleep(rng.uniform(args.gap_lo, args.gap_hi))
        k = rng.randint(1, 3)
        batch, held = held[:k], held[k:]
        t = time.time()
        for user, rid in batch:
            status = sale.release(user, rid) if split else sale.release(rid).status
            assert status == 'RELEASED', status
        restocks.append((t, k))
        released += k
    time.sleep(args.tail)
    stop.set()
    results = [q.get(timeout=120) for _ in procs]
    for p in procs:
        p.join(30)
    t_end = time.time()
    after = seckill_calls(masters)
    info = sale.info()

    counts = collections.Counter()
    wins = []
    for r in results:
        counts.update(r['counts'])
        wins.extend(r['wins'])
    wins.sort()
    sold_out = counts['SOLD_OUT']
    local = sum(r['local'] for r in results)
    delta = {c: after[c] - before[c] for c in SECKILL_CMDS}
    delays = []
    for t, _k in restocks:
        first = next((w[0] for w in wins if w[0] >= t), None)
        delays.append(None if first is None else first - t)
    measured = [d for d in delays if d is not None]
    unsold = info['remaining'] + info.get('in_flight', 0)
    fig = {
        'sale': 'split sale (3 parts + pool)' if split else 'one key',
        'mode': mode, 'procs': args.procs, 'threads': args.threads,
        'seconds': round(t_end - t_start, 2),
        'answers': sum(counts.values()), 'statuses': dict(counts),
        'sold_out': sold_out, 'local': local,
        'reached_share': (sold_out - local) / sold_out if sold_out else 0.0,
        'server_calls': delta,
        'server_calls_per_sold_out': (sum(delta.values()) - counts['RESERVED']) / max(1, sold_out),
        'restocks': len(restocks), 'units_restocked': released, 'units_won': counts['RESERVED'],
        'delay_worst_ms': round(1000 * max(measured), 1) if measured else None,
        'delay_median_ms': round(1000 * statistics.median(measured), 1) if measured else None,
        'restocks_never_sold': sum(1 for d in delays if d is None),
        'unsold': unsold, 'oversold': max(0, counts['RESERVED'] - released),
        'pending': info['pending'], 'invariant': info['invariant'],
        'client_errors': sum(r['nerrors'] for r in results),
        'probes': sum(r['probes'] for r in results),
    }
    admin.close()
    return fig


def table(figs):
    lines = [
        '| sale | local flag | SOLD_OUT answers | reached Redis | SECKILL.* calls per SOLD_OUT '
        '| restocks (units) | worst / median restock -> first RESERVED | units won | unsold | oversold |',
        '|---|---|---|---|---|---|---|---|---|---|']
    names = dict(MODES)
    for f in figs:
        lines.append('| %s | %s | %d | %.2f%% (%d) | %.4f | %d (%d) | %s / %s ms | %d | %d | %d |' % (
            f['sale'], names[f['mode']], f['sold_out'], 100 * f['reached_share'],
            f['sold_out'] - f['local'], f['server_calls_per_sold_out'], f['restocks'],
            f['units_restocked'], f['delay_worst_ms'], f['delay_median_ms'], f['units_won'],
            f['unsold'], f['oversold']))
    return '\n'.join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--module', default=os.path.join(ROOT, 'target', 'release', 'libredis_seckill.so'))
    ap.add_argument('--procs', type=int, default=4)
    ap.add_argument('--threads', type=int, default=2)
    ap.add_argument('--stock', type=int, default=100)
    ap.add_argument('--restocks', type=int, default=8)
    ap.add_argument('--gap-lo', type=float, default=0.7, help='seconds between restocks, at least')
    ap.add_argument('--gap-hi', type=float, default=1.2)
    ap.add_argument('--lapse-ms', type=float, default=500)
    ap.add_argument('--pause-ms', type=float, default=0.2, help='each client thread, after each call')
    ap.add_argument('--warmup', type=float, default=0.5)
    ap.add_argument('--settle', type=float, default=0.5)
    ap.add_argument('--tail', type=float, default=1.5, help='seconds of flood after the last restock')
    ap.add_argument('--no-split', action='store_true')
    ap.add_argument('--json', help='also write the raw figures here')
    args = ap.parse_args()
    os.environ['SECKILL_MODULE'] = os.path.abspath(args.module)

    from seckill.testing import RedisServer
    figs = []
    srv = RedisServer(module=os.environ['SECKILL_MODULE']).start()
    try:
        for mode, _ in MODES:
            figs.append(one_run(args, False, mode, [srv.port], [srv.client()]))
            print(json.dumps(figs[-1]), file=sys.stderr)
    finally:
        srv.stop()
    if not args.no_split:
        from seckill.testing import Cluster
        cl = Cluster(3)
        try:
            for mode, _ in MODES:
                figs.append(one_run(args, True, mode, [m.port for m in cl.masters],
                                    [m.client() for m in cl.masters]))
                print(json.dumps(figs[-1]), file=sys.stderr)
        finally:
            cl.stop()
    print('%d client processes x %d threads, a %.1f ms pause after each call, %d units sold out '
          'then %d restocks of 1-3 units %.1f-%.1f s apart, lapse %g ms.\n'
          % (args.procs, args.threads, args.pause_ms, args.stock, args.restocks, args.gap_lo,
             args.gap_hi, args.lapse_ms))
    print(table(figs))
    if args.json:
        with open(args.json, 'w') as fh:
            json.dump(figs, fh, indent=1)


if __name__ == '__main__':
    main()
