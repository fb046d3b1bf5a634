#!/usr/bin/env python3
"""make chaos / make chaos-test: kill -9 the master in the middle of a
flash sale, again and again, with a delay on the replication links, and
count what the order pipeline oversold (docs/chaos.md).

Runs (--runs): `module` and `functions` (one master, two replicas, three
redis-sentinel; the module loaded, or the Functions library installed),
`cluster` and `cluster-functions` (three masters with a replica each, the
module or the library, the cluster's own failover), `split-brain` (a master cut off by the proxy while clients
that still reach it go on; the module). Each failover is one cycle of
rush.py on a fresh sale; the table has a row per run, the per-cycle rows go
to the JSON file.

--check: exit 1 unless every run had 0 oversold and 0 conflicts, and the
split brain captured and committed nothing (lost RESERVED answers are
counted, not checked: a buyer's RESERVE is not gated by default); it
prints `chaos-check: N passed, M failed` (a run is one test).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import random
import signal
import sys
import tempfile
import time
import traceback
from typing import Any, Dict, List

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from api import HARDENED, MODES, Api, MissingApi  # noqa: E402
from rush import Cycle, CycleResult, Params, pct  # noqa: E402
from splitbrain import split_brain_cycle  # noqa: E402
from topology import ClusterSet, SentinelSet  # noqa: E402

from seckill.testing import module_path  # noqa: E402
from seckill.pipeline.store import open_store  # noqa: E402

RUNS = ('module', 'functions', 'cluster', 'cluster-functions', 'split-brain')


def failover(topo: Any, cyc: Cycle) -> None:
    """kill -9 the sale's master; wait for the promotion; the killed node
    comes back as a replica of the new master."""
    node = topo.master(cyc.key)
    cyc.t_kill = time.monotonic()
    node.srv.kill()
    new = topo.wait_promoted(node, cyc.key)
    cyc.res.promote_s = round(time.monotonic() - cyc.t_kill, 2)
    topo.restart_as_replica(node, new)


def backend_of(run: str) -> str:
    return 'functions' if run in ('functions', 'cluster-functions') else 'module'


def start_topology(run: str, args: argparse.Namespace) -> Any:
    backend = backend_of(run)
    module = module_path() if backend == 'module' else None
    if run.startswith('cluster'):
        return ClusterSet(backend, module, args.delay_ms)
    return SentinelSet(backend, module, args.delay_ms,
                       down_after_ms=args.down_after_ms).start()


def one_run(run: str, args: argparse.Namespace, api: Api, rng: random.Random,
            tmp: str, errors: List[str]) -> List[CycleResult]:
    n = {'cluster': args.cluster_failovers, 'cluster-functions': args.cluster_failovers,
         'split-brain': args.split_brains}.get(run, args.failovers)
    backend = backend_of(run)
    params = Params(stock=args.stock, hold_ms=args.hold_ms, buyers=args.buyers,
                    reconcile_every_s=args.reconcile_every)
    topo = start_topology(run, args)
    store = open_store('sqlite://%s' % os.path.join(tmp, '%s.db' % run))
    store.create_schema()
    out: List[CycleResult] = []
    started = time.monotonic()
    try:
        for i in range(n):
            if time.monotonic() - started > args.max_run_s:
                print('  %s: stopped after %d cycles (--max-run-s %d)' % (run, i, args.max_run_s))
                break
            topo.healthy()
            key = 'chaos:{%s%d}' % (run[:2], i)
            cyc = Cycle(topo, store, api, backend, key, params, rng)
            try:
                if run == 'split-brain':
                    res = cyc.run(lambda c: split_brain_cycle(topo, c, args.split_s))
                else:
                    res = cyc.run(lambda c: failover(topo, c))
            except Exception:
                # The run stops here (its servers too) and says so; the
                # other runs go on, the table is written, the exit code is 1.
                traceback.print_exc()
                errors.append('%s #%d: %s' % (run, i + 1, traceback.format_exc().splitlines()[-1]))
                break
            out.append(res)
            print('  %s #%d: %s' % (run, i + 1, brief(res)), flush=True)
    finally:
        store.close()
        topo.stop()
    return out


def brief(r: CycleResult) -> str:
    s = ('stock %d, captured %d, PAID %d, confirmed %d, oversold %d, conflicts %d, lost %d, '
         'promoted in %ss, no sales for %ss, fenced answers %d'
         % (r.stock, r.captured, r.paid_units_db, r.confirmed_redis, r.oversold, r.conflicts,
            r.lost_reserved, r.promote_s, r.outage_s, r.fenced_answers))
    if r.unreplicated_answers:
        s += ', unreplicated RESERVED answers %d' % r.unreplicated_answers
    if r.function_not_found:
        s += ', "Function not found" %d' % r.function_not_found
    if r.split_brain:
        s += ', split brain %s' % json.dumps(r.split_brain, sort_keys=True)
    return s + (' (%s)' % '; '.join(r.notes) if r.notes else '')


def summarize(run: str, res: List[CycleResult], secs: float) -> Dict[str, Any]:
    outages = [r.outage_s for r in res if r.outage_s is not None]
    promos = [r.promote_s for r in res if r.promote_s is not None]
    reserves = [x for r in res for x in r.reserve_ms]
    pays = [x for r in res for x in r.pay_ms]
    batches = [x for r in res for x in r.batch_ms]
    sb = {}
    for r in res:
        for k, v in r.split_brain.items():
            sb[k] = sb.get(k, 0) + v
    return {
        'run': run, 'failovers': len(res), 'stock': sum(r.stock for r in res),
        'paid_db': sum(r.paid_units_db for r in res),
        'confirmed': sum(r.confirmed_redis for r in res),
        'captured': sum(r.captured for r in res),
        'oversold': sum(r.oversold for r in res),
        'oversold_failovers': sum(1 for r in res if r.oversold),
        'conflicts': sum(r.conflicts for r in res),
        'lost': sum(r.lost_reserved for r in res),
        'promote_s_p50': pct(promos, 50), 'outage_s_p50': pct(outages, 50),
        'outage_s_max': max(outages) if outages else None,
        'reserve_ms_p50': pct(reserves, 50), 'reserve_ms_p99': pct(reserves, 99),
        'pay_ms_p50': pct(pays, 50), 'pay_ms_p99': pct(pays, 99),
        'batch_ms_p50': pct(batches, 50), 'batch_ms_p99': pct(batches, 99),
        'split_brain': sb, 'seconds': round(secs),
    }


COLUMNS = [('run', 'run'), ('failovers', 'failovers'), ('stock', 'stock'),
           ('paid_db', 'PAID in DB'), ('confirmed', 'confirmed in Redis'),
           ('captured', 'payments captured'), ('oversold', 'oversold units'),
           ('oversold_failovers', 'failovers that oversold'), ('conflicts', 'conflicts'),
           ('lost', 'lost RESERVED'), ('promote_s_p50', 'promotion s p50'),
           ('outage_s_p50', 'no sales s p50'), ('outage_s_max', 'no sales s max'),
           ('reserve_ms_p50', 'RESERVED ms p50'), ('reserve_ms_p99', 'RESERVED ms p99'),
           ('pay_ms_p50', 'pay ms p50'), ('pay_ms_p99', 'pay ms p99'),
           ('batch_ms_p50', 'batch ms p50'), ('batch_ms_p99', 'batch ms p99'),
           ('seconds', 'run s')]


def table(rows: List[Dict[str, Any]]) -> str:
    head = '| ' + ' | '.join(t for _, t in COLUMNS) + ' |'
    sep = '|' + '---|' * len(COLUMNS)
    lines = [head, sep]
    for r in rows:
        lines.append('| ' + ' | '.join('-' if r[k] is None else str(r[k]) for k, _ in COLUMNS)
                     + ' |')
    for r in rows:
        if r['split_brain']:
            lines.append('')
            lines.append('split brain (%s): %s' % (r['run'], ', '.join(
                '%s %d' % kv for kv in sorted(r['split_brain'].items()))))
    return '\n'.join(lines)


def failed(rows: List[Dict[str, Any]], reserve_wait: bool) -> List[str]:
    bad = []
    for r in rows:
        for k in ('oversold', 'conflicts') + (('lost',) if reserve_wait else ()):
            if r[k]:
                bad.append('%s: %s %d' % (r['run'], k, r[k]))
        for k in ('captured_via_old', 'orders_via_old'):
            if r['split_brain'].get(k):
                bad.append('%s: %s %d' % (r['run'], k, r['split_brain'][k]))
    return bad


def parse(argv: List[str]) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    ap.add_argument('--runs', default='module,functions,cluster',
                    help='comma-separated, of: ' + ', '.join(RUNS))
    ap.add_argument('--client', choices=MODES, default=HARDENED,
                    help='baseline: the pipeline as it was; hardened: the WAIT/fence API, '
                         'refused loudly when missing')
    ap.add_argument('--failovers', type=int, default=30, help='per sentinel run')
    ap.add_argument('--cluster-failovers', type=int, default=5)
    ap.add_argument('--split-brains', type=int, default=1)
    ap.add_argument('--split-s', type=float, default=3.0,
                    help='how long the cut-off master keeps serving after the promotion')
    ap.add_argument('--delay-ms', type=float, default=20.0, help='each way, replication links')
    ap.add_argument('--down-after-ms', type=int, default=2000,
                    help="sentinels' down-after-milliseconds (1000 gave a second, spurious failover of the new master: redis/redis#8607)")
    ap.add_argument('--stock', type=int, default=100, help='units per cycle')
    ap.add_argument('--hold-ms', type=int, default=1000)
    ap.add_argument('--buyers', type=int, default=12)
    ap.add_argument('--reserve-wait', action='store_true',
                    help='buyers RESERVE with wait= (the answer counts once a replica has it); '
                         '--check then also fails a run with a lost RESERVED answer')
    ap.add_argument('--reconcile-every', type=float, default=2.0,
                    help='seconds between reconcile --apply passes during the rush')
    ap.add_argument('--max-run-s', type=int, default=1800, help='a run stops its cycles after')
    ap.add_argument('--seed', type=int, default=None)
    ap.add_argument('--out', default='logs/chaos.md')
    ap.add_argument('--check', action='store_true')
    a = ap.parse_args(argv)
    for run in a.runs.split(','):
        if run not in RUNS:
            ap.error('unknown run %r' % run)
    return a


def _interrupt(*_: Any) -> None:
    """SIGTERM as Ctrl-C: the finally blocks stop every server by pid."""
    raise KeyboardInterrupt()


def main(argv: List[str]) -> int:
    args = parse(argv)
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    logging.basicConfig(level=logging.WARNING, filename=os.path.splitext(args.out)[0] + '.log',
                        filemode='w', format='%(asctime)s %(threadName)s %(name)s %(message)s')
    try:
        api = Api(args.client, args.reserve_wait)    # before any server starts
    except MissingApi as exc:
        print('chaos: %s' % exc, file=sys.stderr)
        return 2
    seed = args.seed if args.seed is not None else random.randrange(1 << 30)
    rng = random.Random(seed)
    signal.signal(signal.SIGTERM, _interrupt)
    rows, cycles, errors = [], {}, []
    cmd = 'tests/chaos/chaos.py ' + ' '.join(argv)
    print('chaos: %s (client %s, seed %d, delay %g ms each way)' % (cmd, args.client, seed,
                                                                    args.delay_ms), flush=True)
    with tempfile.TemporaryDirectory(prefix='seckill-chaos-') as tmp:
        for run in args.runs.split(','):
            t = time.monotonic()
            res = one_run(run, args, api, rng, tmp, errors)
            rows.append(summarize(run, res, time.monotonic() - t))
            cycles[run] = [r.row() for r in res]
    text = table(rows)
    if errors:
        text += '\n\nstopped by an error: ' + '; '.join(errors)
    print('\n' + text)
    write(args, cmd, seed, text, rows, cycles)
    bad = failed(rows, args.reserve_wait) + errors
    if bad:
        print('chaos: not safe: ' + '; '.join(bad))
    if args.check:
        unsafe = {b.split(':')[0].split(' #')[0] for b in bad}
        print('chaos-check: %d passed, %d failed' % (len(rows) - len(unsafe), len(unsafe)))
    return 1 if errors or (args.check and bad) else 0


def write(args, cmd, seed, text, rows, cycles) -> None:
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out, 'w') as f:
        f.write('# chaos run\n\n`%s` (client %s, seed %d, %s UTC)\n\n%s\n'
                % (cmd, args.client, seed, time.strftime('%Y-%m-%d %H:%M', time.gmtime()), text))
    with open(os.path.splitext(args.out)[0] + '.json', 'w') as f:
        json.dump({'command': cmd, 'seed': seed, 'client': args.client, 'runs': rows,
                   'cycles': cycles}, f, indent=1, default=str)
    print('chaos: table in %s, every cycle in %s' % (args.out, os.path.splitext(args.out)[0]
                                                     + '.json'))


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
