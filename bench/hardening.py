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
import hashlib
import os
import re
import shutil
import signal
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)

from hardening_client import log  # noqa: E402
from hardening_report import get, key_figures, load_data, render  # noqa: E402
from hardening_scenarios import RUNNERS, SCENARIOS  # noqa: E402
from hardening_servers import NICE, on_signal, stop_all  # noqa: E402


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


if __name__ == '__main__':
    sys.exit(main())
