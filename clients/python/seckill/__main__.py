"""python -m seckill init|worker|pay|reconcile|rebuild|metrics|demo|functions|verify-draw

Connections: --redis URL (default $SECKILL_REDIS or redis://127.0.0.1:7379/0,
the port of `make run`;
redis+sentinel://host:port[,host:port...]/service[/db] follows a Sentinel
deployment's master, as do --sentinel host:port ... --service NAME) and --db
URL (default $SECKILL_DB or sqlite:seckill-orders.db; a PostgreSQL URL
postgresql://user@host:port/dbname selects PostgreSQL). --wait-replicas and
--wait-timeout-ms: the WAIT gate of worker, pay and reconcile
(docs/pipeline.md).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import signal
import sys
import time
from typing import List, Optional

DEFAULT_REDIS = 'redis://127.0.0.1:7379/0'   # make run's port
DEFAULT_DB = 'sqlite:seckill-orders.db'


def _redis(url: str, **kw):
    from .drivers.connect import connect
    kw.setdefault('decode_responses', True)
    kw.setdefault('socket_timeout', 10)
    return connect(url, health_check_interval=5, **kw)


def _durability(a: argparse.Namespace):
    from .plain.durability import AUTO, Durability
    n = a.wait_replicas
    try:
        return Durability(replicas=AUTO if n == AUTO else int(n), timeout_ms=a.wait_timeout_ms)
    except ValueError as exc:
        raise SystemExit('--wait-replicas / --wait-timeout-ms: %s' % exc) from None


def _store(url: str):
    from .pipeline.store import open_store
    store = open_store(url)
    store.create_schema()
    return store


def cmd_init(a: argparse.Namespace) -> int:
    from .pipeline.reconciler import create_sale
    from .pipeline.store import SaleConfig
    from .sale import Sale
    r, store = _redis(a.redis), _store(a.db)
    now = Sale(r, a.sale).server_ms()
    cfg = SaleConfig(key=a.sale, total=a.total, stream=a.stream, shards=a.shards, limit=a.limit,
                     hold_ms=a.hold_ms, start_ms=a.start_ms, end_ms=a.end_ms,
                     expires_at_ms=now + a.ttl * 1000 if a.ttl else None, maxlen=a.maxlen,
                     created_ms=now)
    try:
        created = create_sale(store, r, cfg, replace=a.replace, fence=not a.no_fence)
    except RuntimeError as exc:
        print(str(exc), file=sys.stderr)
        return 2
    print('OK' if created else 'EXISTS')
    return 0


def cmd_worker(a: argparse.Namespace) -> int:
    from .plain.faults import Faults
    from .pipeline.worker import Worker, default_consumer
    from .pipeline.retry import Backoff
    from .pipeline.store import StoreUnavailable, open_store
    r, store = _redis(a.redis), open_store(a.db)
    backoff = Backoff(cap=5.0)
    while True:  # a worker started while the database is down waits for it
        try:
            store.create_schema()
            all_sales = store.sales()
            break
        except StoreUnavailable as exc:
            logging.getLogger('seckill.worker').warning('database unavailable: %s', exc)
            time.sleep(backoff.next())
    sales = [s for s in all_sales if not a.sale or s.key in a.sale]
    missing = set(a.sale or ()) - {s.key for s in sales}
    if missing:
        print('unknown sale(s) (not in the database): %s' % ', '.join(sorted(missing)),
              file=sys.stderr)
        return 2
    sales = [s for s in sales if s.stream]
    if not sales:
        print('no sale with a stream in the database', file=sys.stderr)
        return 2
    w = Worker(r, store, sales, group=a.group, consumer=a.consumer or default_consumer(),
               batch=a.batch, block_ms=a.block_ms, claim_idle_ms=a.claim_idle_ms,
               faults=Faults.from_env(), durability=_durability(a))
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: w.stop())
    if a.metrics_port is not None:
        from .pipeline.metrics import WorkerCollector, serve
        serve([WorkerCollector(w)], a.metrics_port, a.metrics_addr)
    logging.getLogger('seckill.worker').info('worker %s on %s', w.consumer,
                                             ', '.join(s.key for s in sales))
    until = time.monotonic() + a.seconds if a.seconds else None
    st = w.run(until=until)
    print(json.dumps({'consumer': w.consumer, 'entries': st.entries, 'acked': st.acked,
                      'claimed': st.claimed, 'db_retries': st.db_retries,
                      'inserted': st.ledger.inserted, 'replayed': st.ledger.replayed,
                      'cancelled': st.ledger.cancelled, 'paid': st.ledger.paid,
                      'not_replicated': st.not_replicated}), flush=True)
    return 0


def _print_outcome(out, as_json: bool) -> None:
    if as_json:
        print(json.dumps(out.as_dict(), default=str), flush=True)
    else:
        print('\n'.join(out.lines()), flush=True)


def cmd_reconcile(a: argparse.Namespace) -> int:
    from .pipeline.reconciler import reconcile
    from .sale import Sale, SaleMissing
    r, store = _redis(a.redis), _store(a.db)
    sale = Sale(r, a.sale)
    rc = 0
    n = 0
    while True:
        try:
            out = reconcile(store, sale, apply=a.apply, chunk_size=a.chunk,
                            durability=_durability(a))
        except SaleMissing:
            print('sale %s does not exist in Redis: run `python -m seckill rebuild --sale %s`'
                  % (a.sale, a.sale), file=sys.stderr)
            return 2
        _print_outcome(out, a.json)
        rc = 0 if (out.clean or a.apply) and not out.conflicts else 1
        n += 1
        if not a.every or (a.rounds and n >= a.rounds):
            return rc
        time.sleep(a.every)


def cmd_metrics(a: argparse.Namespace) -> int:
    """Serves the ledger's metrics (and, unless --no-redis, drift and stream
    backlog) until SIGTERM or Ctrl-C."""
    import threading
    from .pipeline.metrics import LedgerCollector, serve
    from .pipeline.store import open_store
    r = None if a.no_redis else _redis(a.redis)
    server = serve([LedgerCollector(open_store(a.db), r, group=a.group, sales=a.sales and r is not None)],
                   a.port, a.addr)
    done = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: done.set())
    print('metrics on http://%s:%d/metrics' % (a.addr, a.port), flush=True)
    done.wait(a.seconds)
    if server is not None:
        server.shutdown()
    return 0


PAY_EXIT = {'PAID': 0, 'REFUND': 1, 'RETRY': 3}


def cmd_pay(a: argparse.Namespace) -> int:
    """pay() once: exit 0 PAID (capture), 1 REFUND (void), 3 RETRY (call again)."""
    from .plain.faults import Faults
    from .pipeline.payment import pay
    from .sale import Sale
    r, store = _redis(a.redis), _store(a.db)
    res = pay(store, Sale(r, a.sale), a.rid, a.ref, faults=Faults.from_env(),
              durability=_durability(a))
    if a.json:
        print(json.dumps({'outcome': res.outcome, 'rid': res.rid, 'ref': res.ref,
                          'reason': res.reason}), flush=True)
    else:
        print(str(res), flush=True)
    return PAY_EXIT[res.outcome]


def cmd_rebuild(a: argparse.Namespace) -> int:
    from .pipeline.reconciler import rebuild
    r, store = _redis(a.redis), _store(a.db)
    try:
        out = rebuild(store, r, a.sale, chunk_size=a.chunk)
    except (LookupError, RuntimeError) as exc:
        print(str(exc), file=sys.stderr)
        return 2
    _print_outcome(out, a.json)
    return 1 if out.conflicts else 0


def cmd_demo(a: argparse.Namespace) -> int:
    from .pipeline.demo import DemoConfig, run_demo
    cfg = DemoConfig(db=a.db_kind, buyers=a.buyers, stock=a.stock, hold_ms=a.hold_ms,
                     duration_s=a.duration, workers=a.workers, out=a.out, seed=a.seed,
                     progress=not a.no_progress,
                     redis=a.demo_redis or (a.redis if a.sentinel else None),
                     worker_metrics_ports=tuple(a.worker_metrics_port or ()))
    return run_demo(cfg)


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog='python -m seckill', description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument('--redis', default=os.environ.get('SECKILL_REDIS', DEFAULT_REDIS),
                   help='Redis URL (default: %(default)s)')
    p.add_argument('--db', default=os.environ.get('SECKILL_DB', DEFAULT_DB),
                   help='order database URL: sqlite:path.db or postgresql://... (default: %(default)s)')
    p.add_argument('--sentinel', action='append', metavar='HOST:PORT',
                   help='a Sentinel (repeatable); with --service, instead of --redis')
    p.add_argument('--service', help="the Sentinels' name of the master (with --sentinel)")
    p.add_argument('--wait-replicas', default='auto',
                   help="replicas a batch's or a payment's WAIT must reach: auto (every online "
                   'replica, at least 1 once this process saw one) or a number; 0: no WAIT. A '
                   'process per call (pay) never remembers a replica: give it a number where '
                   'you run replicas (default: %(default)s)')
    p.add_argument('--wait-timeout-ms', type=int, default=1000,
                   help='how long one WAIT may block (default: %(default)s)')
    p.add_argument('-v', '--verbose', action='store_true')
    p.add_argument('--debug', action='store_true',
                   help='a traceback instead of one line for connection and permission errors')
    sub = p.add_subparsers(dest='command', required=True)

    s = sub.add_parser('init', help='create a sale: parameters into the database, then SECKILL.INIT')
    s.add_argument('--sale', required=True, help='sale key, e.g. sale:{1001}')
    s.add_argument('--total', type=int, required=True)
    s.add_argument('--stream', help='stream key (same hash tag), e.g. sale:{1001}:events')
    s.add_argument('--shards', type=int)
    s.add_argument('--limit', type=int)
    s.add_argument('--hold-ms', type=int)
    s.add_argument('--start-ms', type=int)
    s.add_argument('--end-ms', type=int)
    s.add_argument('--ttl', type=int, help='key TTL in seconds')
    s.add_argument('--maxlen', type=int)
    s.add_argument('--replace', action='store_true')
    s.add_argument('--no-fence', action='store_true',
                   help='a sale without FENCE: it sells on a promoted master before the '
                   'reconciler applied the ledger (docs/replication.md)')
    s.set_defaults(func=cmd_init)

    s = sub.add_parser('pay', help="pay(): CONFIRM behind the WAIT gate, then the order's "
                       'outcome (exit 0 PAID, 1 REFUND, 3 RETRY)')
    s.add_argument('--sale', required=True)
    s.add_argument('--rid', required=True, help='the order (reservation) id')
    s.add_argument('--ref', required=True, help="the payment provider's reference")
    s.add_argument('--json', action='store_true')
    s.set_defaults(func=cmd_pay)

    s = sub.add_parser('worker', help='stream -> order rows (XREADGROUP, commit, XACK)')
    s.add_argument('--sale', action='append', help='sale key (repeatable; default: every sale in the database)')
    s.add_argument('--group', default='orders')
    s.add_argument('--consumer', help='consumer name (default host-pid); reuse it after a restart '
                   'to take back its pending entries at once')
    s.add_argument('--batch', type=int, default=100)
    s.add_argument('--block-ms', type=int, default=500)
    s.add_argument('--claim-idle-ms', type=int, default=5000,
                   help="claim other consumers' entries pending longer than this (XAUTOCLAIM)")
    s.add_argument('--seconds', type=float, help='stop after this long (default: until SIGTERM)')
    s.add_argument('--metrics-port', type=int, metavar='PORT',
                   help="serve the worker's metrics on http://ADDR:PORT/metrics (needs the "
                   "'metrics' extra, prometheus_client; docs/monitoring.md)")
    s.add_argument('--metrics-addr', default='127.0.0.1', metavar='ADDR',
                   help='the address --metrics-port listens on (default: %(default)s)')
    s.set_defaults(func=cmd_worker)

    s = sub.add_parser('metrics', help="serve the ledger's metrics for Prometheus: orders by "
                       'state, units left per sale (below 0: oversold), orders created, drift '
                       'against Redis and stream backlog (docs/monitoring.md)')
    s.add_argument('--port', type=int, required=True)
    s.add_argument('--addr', default='127.0.0.1', help='listen address (default: %(default)s)')
    s.add_argument('--group', default='orders', help="the workers' consumer group (default: %(default)s)")
    s.add_argument('--no-redis', action='store_true', help='the ledger only: no drift, no backlog')
    s.add_argument('--sales', action='store_true',
                   help="each ledger sale's report as seckill_sale_* series, as the exporter script "
                   "gives the module's (for the Functions library, which it cannot list)")
    s.add_argument('--seconds', type=float, help='stop after this long (default: until SIGTERM)')
    s.set_defaults(func=cmd_metrics)

    for name, func, text in (('reconcile', cmd_reconcile, 'compare the sale with the order database'),
                             ('rebuild', cmd_rebuild, 'recreate a lost sale from the database')):
        s = sub.add_parser(name, help=text)
        s.add_argument('--sale', required=True)
        s.add_argument('--chunk', type=int, default=1000, help='orders per RECONCILE call (default 1000)')
        s.add_argument('--json', action='store_true')
        if name == 'reconcile':
            s.add_argument('--apply', action='store_true', help='repair (default: report only)')
            s.add_argument('--every', type=float, help='repeat every N seconds')
            s.add_argument('--rounds', type=int, help='with --every: stop after N rounds')
        s.set_defaults(func=func)

    s = sub.add_parser('demo', help='a whole flash sale on throwaway servers, with a ledger check')
    s.add_argument('--db', dest='db_kind', choices=('sqlite', 'postgres'), default='sqlite')
    s.add_argument('--buyers', type=int, default=5000)
    s.add_argument('--stock', type=int, default=200)
    s.add_argument('--hold-ms', type=int, default=6000)
    s.add_argument('--duration', type=float, default=30.0, help='seconds buyers keep coming')
    s.add_argument('--workers', type=int, default=2)
    s.add_argument('--out', default='demo-out', help='folder for the chart and the report')
    s.add_argument('--seed', type=int, default=1)
    s.add_argument('--no-progress', action='store_true')
    s.add_argument('--redis', dest='demo_redis', metavar='URL',
                   help='run against this deployment (redis:// or redis+sentinel://; the global '
                   '--sentinel/--service too) instead of a throwaway redis-server')
    s.add_argument('--worker-metrics-port', type=int, action='append', metavar='PORT',
                   help="worker i serves its metrics on the i-th of these (repeatable; make monitor)")
    s.set_defaults(func=cmd_demo)

    s = sub.add_parser('functions', help='the Redis Functions library (functions/seckill.lua): '
                       'install (FUNCTION LOAD REPLACE; idempotent, no downgrade without '
                       '--force) or status')
    s.add_argument('action', choices=('install', 'status'))
    s.add_argument('--redis', default=argparse.SUPPRESS, help='Redis URL (as the global --redis)')
    s.add_argument('--file', help='the Lua source (default: $SECKILL_LIBRARY, else the copy '
                   "the installed package carries, else the repository's functions/seckill.lua)")
    s.add_argument('--force', action='store_true', help='load even an older version')
    s.set_defaults(func=cmd_functions)

    s = sub.add_parser('commitment', help="what a draw sale's shop publishes before END: the "
                       "seed commitment and the beacon's name, as JSON (with --split: "
                       '{part key: commitment}, the file verify-draw --commitment @FILE reads)')
    s.add_argument('key', help='the sale key (with --split: the split sale\'s name)')
    s.add_argument('--redis', default=argparse.SUPPRESS, help='Redis URL (as the global --redis)')
    s.add_argument('--split', action='store_true', help='KEY is a split sale: every part')
    s.add_argument('--cluster', action='store_true', help='--redis is a node of a Redis Cluster')
    s.set_defaults(func=cmd_commitment)

    s = sub.add_parser('verify-draw', help="check a draw sale's draw against what the shop "
                       'published: the commitment, the beacon, the entrant digest recomputed from '
                       'ENTRANTS, the draw seed, the winners of the Fisher-Yates order, the '
                       'stock (docs/draw-sales.md); exit 0 only when verified against a '
                       'published commitment')
    s.add_argument('key', help='the sale key (with --split: the split sale\'s name)')
    s.add_argument('--redis', default=argparse.SUPPRESS, help='Redis URL (as the global --redis)')
    s.add_argument('--commitment', action='append', metavar='HEX',
                   help='the seed commitment the shop published before END. With --split: '
                   'PART_KEY=HEX once per part, or @FILE, a JSON object {part key: commitment} '
                   '(SplitSale.commitments()). Without it the sale is checked against itself '
                   'only, and the exit code is 3')
    s.add_argument('--beacon', metavar='NAME',
                   help='the beacon name the shop published with the commitment (leave it out '
                   'when it published none)')
    s.add_argument('--beacon-value', metavar='VALUE',
                   help="the beacon's public value (needed when the sale declares a beacon)")
    s.add_argument('--split', action='store_true', help='KEY is a split sale: verify every part')
    s.add_argument('--cluster', action='store_true', help='--redis is a node of a Redis Cluster')
    s.add_argument('--json', action='store_true', help='the verdict as one JSON object')
    s.set_defaults(func=cmd_verify_draw)
    return p


def cmd_functions(a: argparse.Namespace) -> int:
    from . import library as lib
    r = _redis(a.redis)
    try:
        if a.action == 'status':
            v = lib.loaded_version(r)
            print('seckill %s loaded' % v if v else 'no seckill library loaded')
            return 0 if v else 1
        action, message = lib.install(r, a.file, a.force)
    except lib.LibraryError as exc:
        print(str(exc), file=sys.stderr)
        return 2
    print(message)
    return 0


def cmd_commitment(a: argparse.Namespace) -> int:
    """Print what to publish before END; exit 1 when KEY is not a draw sale.
    A sale: {"key", "commitment", "beacon"}. A split sale: {part key:
    commitment} on stdout (verify-draw's @FILE form) and the beacon's name,
    if any, on stderr."""
    from .plain import draw as d
    from .sale import Sale
    if a.cluster:
        from redis.cluster import RedisCluster
        r = RedisCluster.from_url(a.redis, decode_responses=True, socket_timeout=30)
    else:
        r = _redis(a.redis, socket_timeout=30)
    try:
        if a.split:
            from .split import SplitSale
            try:
                published = SplitSale(r, a.key).commitments()
            except LookupError as exc:
                print('%s: %s' % (a.key, exc), file=sys.stderr)
                return 1
            infos = [d.draw_info(Sale(r, part).info()) for part in published]
            if not published or None in infos:
                print('%s: not a split draw sale' % a.key, file=sys.stderr)
                return 1
            print(json.dumps(published, sort_keys=True))
            if infos[0].beacon is not None:
                print('beacon: %s' % infos[0].beacon, file=sys.stderr)
            return 0
        info = d.draw_info(Sale(r, a.key).info())
    finally:
        r.close()
    if info is None:
        print('%s: not a draw sale (no such key, or INIT without DRAW)' % a.key, file=sys.stderr)
        return 1
    print(json.dumps({'key': a.key, 'commitment': info.seed_commitment, 'beacon': info.beacon}))
    return 0


def _published_commitments(values: Optional[List[str]], split: bool):
    """--commitment's values: one hex for a sale, {part key: hex} for a
    split sale (PART=HEX each, or @FILE with a JSON object). SystemExit on
    a malformed one."""
    if not values:
        return None
    if not split:
        if len(values) != 1 or '=' in values[0] or values[0].startswith('@'):
            raise SystemExit('verify-draw: --commitment takes one HEX for a sale (PART=HEX or '
                             '@FILE with --split)')
        return values[0]
    out = {}
    for v in values:
        if v.startswith('@'):
            try:
                with open(v[1:], encoding='utf-8') as f:
                    doc = json.load(f)
            except (OSError, ValueError) as exc:
                raise SystemExit('verify-draw: --commitment %s: %s' % (v, exc)) from None
            if not isinstance(doc, dict):
                raise SystemExit('verify-draw: --commitment %s: not a JSON object '
                                 '{part key: commitment}' % v)
            out.update({str(k): str(c) for k, c in doc.items()})
        else:
            part, sep, hex_ = v.rpartition('=')
            if not sep or not part:
                raise SystemExit('verify-draw: with --split, --commitment is PART_KEY=HEX or '
                                 '@FILE, got %r' % v)
            out[part] = hex_
    return out


def cmd_verify_draw(a: argparse.Namespace) -> int:
    """Exit 0 only when the draw is verified against the published
    commitment (and the beacon's value, when the sale declares a beacon); 1
    when a check fails (the verdict names the first); 2 when there is
    nothing to verify yet (no draw sale, not drawn, the draw not complete);
    3 when every check of the sale itself passed but not against a
    published commitment or beacon value (the line says which)."""
    from .plain import draw as d
    published = _published_commitments(a.commitment, a.split)
    pub = dict(beacon=a.beacon, beacon_value=a.beacon_value)
    # bytes replies: the digest hashes exactly the user ids the server holds
    if a.cluster:
        from redis.cluster import RedisCluster
        r = RedisCluster.from_url(a.redis, decode_responses=False, socket_timeout=30)
    else:
        r = _redis(a.redis, decode_responses=False, socket_timeout=30)
    try:
        if a.split:
            from .split import SplitSale
            try:
                v = SplitSale(r, a.key).verify_draw(published, **pub)
            except LookupError as exc:
                v = d.Verdict(d.NOT_A_DRAW, str(exc), key=a.key)
        else:
            from .sale import Sale
            v = Sale(r, a.key).verify_draw(published, **pub)
    finally:
        r.close()
    if a.json:
        print(json.dumps(v.as_dict(), default=str), flush=True)
    else:
        for line in _verdict_lines(v):
            print(line)
    unchecked = list(v.unchecked)
    if published is None and d.NOT_PUBLISHED not in unchecked:
        unchecked.insert(0, d.NOT_PUBLISHED)
    for line in unchecked:
        print(line, file=sys.stderr if a.json else sys.stdout, flush=True)
    if v.ok:
        return 0
    if v.status in d.FAILURES:
        return 1
    return 3 if v.status == d.UNCHECKED else 2


def _verdict_lines(v) -> List[str]:
    from .plain.protocol import text
    status = v.status.upper().replace('_', ' ')
    if v.check:
        status += ' (check: %s)' % v.check
    lines = ['%s: %s' % (v.key, status), '  ' + v.message]
    for name in ('seed_commitment', 'published_commitment', 'seed', 'entrants_digest', 'beacon',
                 'beacon_value', 'draw_seed'):
        value = getattr(v, name)
        if value is not None and value != '':
            lines.append('  %s %s' % (name, value))
    if v.draw_stock is not None:
        lines.append('  draw_stock %d, entrants %d, winners %d' % (v.draw_stock, v.entrants,
                                                                   v.winners))
    if v.first:
        f = v.first
        lines.append('  first differing entrant: %r (qty %d, arrival %d) at position %d of the '
                     'draw order: expected %s, ENTRANTS says %s'
                     % (text(f['user']), f['qty'], f['arrival'], f['position'], f['expected'],
                        f['actual']))
    for part in v.parts:
        lines += ['  ' + x for x in _verdict_lines(part)]
    return lines


def main(argv: Optional[List[str]] = None) -> int:
    p = parser()
    a = p.parse_args(argv)
    if a.sentinel or a.service:
        from .drivers.connect import sentinel_url
        try:
            a.redis = sentinel_url(a.sentinel or (), a.service or '')
        except ValueError as exc:
            p.error(str(exc))
    logging.basicConfig(level=logging.DEBUG if a.verbose else logging.INFO,
                        format='%(asctime)s %(name)s %(levelname)s %(message)s', stream=sys.stderr)
    if a.debug:
        return a.func(a)
    try:
        return a.func(a)
    except Exception as exc:
        line = _one_line(exc, a.redis)
        if line is None:
            raise
        print('python -m seckill: ' + line, file=sys.stderr)
        return 2


def _one_line(exc: BaseException, url: str) -> Optional[str]:
    """The one line (with the fix) for the errors a new user meets first:
    no server, a refused login, an ACL that lacks a right, no backend.
    None for anything else (its traceback is the report)."""
    import redis
    from .backend import BackendError
    import re
    where = 'Redis at %s' % re.sub(r'//([^:@/]*):[^@/]*@', r'//\1:***@', url)  # no password
    if isinstance(exc, redis.AuthenticationError):
        return '%s refused the login (%s): put user:password in the URL, e.g. ' \
               'redis://shop:secret@host:7379/0' % (where, exc)
    if isinstance(exc, redis.exceptions.NoPermissionError):
        return '%s: %s; give the user the right (docs/operations.md, "Who may do what")' % (
            where, exc)
    if isinstance(exc, (redis.ConnectionError, redis.TimeoutError)):
        return 'cannot reach %s (%s): start one with `make run` (port 7379), or pass ' \
               '--redis URL or set SECKILL_REDIS' % (where, exc)
    if isinstance(exc, BackendError):
        return '%s: %s' % (where, exc)
    return None


if __name__ == '__main__':
    sys.exit(main())
