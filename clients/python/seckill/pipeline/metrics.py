"""Prometheus metrics for the order pipeline (docs/monitoring.md).

Two collectors, read at scrape time (nothing is counted twice, nothing is
kept between scrapes but the last ledger read, for the orders' rate):

- WorkerCollector: one worker process's counters (batches, entries,
  acknowledged, claimed, database and Redis retries, batches its WAIT gate
  stopped, the ledger writes) and the backlog of its group on each sale's
  stream (XINFO GROUPS: lag = entries not delivered yet, pending =
  delivered, not acknowledged). `python -m seckill worker --metrics-port N`.
- LedgerCollector: the order ledger, per sale: orders and units by state,
  units left (the sale's total minus PAID and UNPAID units: below 0, the
  ledger sold more than the stock: the oversell alarm), orders created
  (a counter: its rate is the order TPS), the orders per second since the
  last scrape; with a Redis client, each sale's drift (Redis's confirmed
  minus the ledger's PAID units, Redis's pending minus UNPAID units) and
  the backlog of the workers' group on the sale's own stream (the stream
  the ledger names, not a guessed one); with `sales=True`, each sale's
  report as the seckill_sale_* series the exporter script makes of the
  module's sales (contrib/monitoring/seckill-exporter.lua): the Functions
  library keeps no list of sales for a script to read, the ledger names
  them. `python -m seckill metrics --port N [--sales]`.

The numbers come from plain functions (units_left, ledger_samples,
drift_samples, order_rate, worker_samples), tested without Redis or a
database; `prometheus_client` (the `metrics` extra) is imported only by
the collectors and serve().
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass
from typing import Any, Dict, Iterable, Iterator, List, Mapping, Optional, Sequence, Tuple

from .store import CANCELLED, PAID, STATES, UNPAID, SaleConfig

log = logging.getLogger('seckill.metrics')

Labels = Dict[str, str]


@dataclass(frozen=True)
class Sample:
    """One value of one metric: name (without the `_total` a counter gets
    from prometheus_client), labels, value, kind ('gauge' or 'counter')."""
    name: str
    labels: Tuple[Tuple[str, str], ...]
    value: float
    kind: str = 'gauge'


def _s(name: str, value: float, _kind: str = 'gauge', **labels: str) -> Sample:
    return Sample(name, tuple(sorted(labels.items())), float(value), _kind)


HELP = {
    'seckill_ledger_orders': 'orders in the ledger, by sale and state',
    'seckill_ledger_units': 'units of the orders in the ledger, by sale and state',
    'seckill_ledger_stock': "the sale's total units (its INIT total, from the ledger)",
    'seckill_ledger_units_left': 'stock minus PAID and UNPAID units; below 0: oversold',
    'seckill_ledger_orders_created': 'orders the ledger holds, every state (its rate is the order TPS)',
    'seckill_ledger_orders_per_second': 'orders created per second since the previous scrape',
    'seckill_ledger_up': '1 when the ledger answered this scrape, else 0',
    'seckill_pipeline_drift_units': "Redis's units minus the ledger's, by sale and kind "
                                    '(confirmed: CONFIRMED vs PAID; pending: held vs UNPAID)',
    'seckill_pipeline_redis_up': '1 when Redis answered this scrape, else 0',
    'seckill_pipeline_stream_lag': "entries of the sale's stream not delivered to the group yet",
    'seckill_pipeline_stream_pending': "entries of the sale's stream delivered to the group, not acknowledged",
    'seckill_sale_remaining': 'units the sale has left (its report)',
    'seckill_sale_pending': 'units held by pending reservations (its report)',
    'seckill_sale_confirmed': 'units confirmed (its report)',
    'seckill_sale_expired': 'units released by hold expiry (its report)',
    'seckill_sale_invariant_ok': "0 when the sale's report says its invariant is broken (absent otherwise)",
    'seckill_sale_fenced': '1 when the FENCE sale is fenced (absent otherwise)',
    'seckill_worker_batches': 'batches the worker handled',
    'seckill_worker_entries': 'stream entries the worker handled',
    'seckill_worker_acked': 'stream entries the worker acknowledged',
    'seckill_worker_claimed': "entries the worker claimed from idle consumers",
    'seckill_worker_trimmed': 'entries trimmed before the worker handled them',
    'seckill_worker_db_retries': 'batch commits retried because the database was unavailable',
    'seckill_worker_redis_retries': 'rounds retried because Redis failed',
    'seckill_worker_not_replicated': "batches the WAIT gate held back",
    'seckill_worker_ledger_writes': 'ledger writes by outcome (inserted, replayed, cancelled, paid, ...)',
    'seckill_worker_stream_lag': "entries of a stream the worker serves not delivered to its group yet",
    'seckill_worker_stream_pending': 'entries delivered to its group, not acknowledged',
    'seckill_worker_up': '1 while the worker process serves metrics',
}


# -- plain functions ------------------------------------------------------------
def units_left(total: int, summary: Mapping[str, Mapping[str, int]]) -> int:
    """The stock the ledger has not sold or held: total minus PAID and UNPAID
    units (CANCELLED ones went back). Below 0, the ledger holds more units
    than the sale had: oversold."""
    return int(total) - int(summary.get(PAID, {}).get('units', 0)) \
        - int(summary.get(UNPAID, {}).get('units', 0))


def orders_created(summary: Mapping[str, Mapping[str, int]]) -> int:
    """Orders of every state: only grows (orders are never deleted)."""
    return sum(int(summary.get(s, {}).get('orders', 0)) for s in STATES)


def ledger_samples(sales: Sequence[SaleConfig],
                   summaries: Mapping[str, Mapping[str, Mapping[str, int]]]) -> List[Sample]:
    """The ledger's samples: per sale, orders and units by state, the stock,
    units left and the orders created."""
    out: List[Sample] = []
    for cfg in sales:
        summary = summaries.get(cfg.key, {})
        for state in STATES:
            row = summary.get(state, {})
            out.append(_s('seckill_ledger_orders', row.get('orders', 0), sale=cfg.key, state=state))
            out.append(_s('seckill_ledger_units', row.get('units', 0), sale=cfg.key, state=state))
        out.append(_s('seckill_ledger_stock', cfg.total, sale=cfg.key))
        out.append(_s('seckill_ledger_units_left', units_left(cfg.total, summary), sale=cfg.key))
        out.append(_s('seckill_ledger_orders_created', orders_created(summary), 'counter',
                      sale=cfg.key))
    return out


def order_rate(prev: Optional[Tuple[float, Mapping[str, int]]],
               cur: Tuple[float, Mapping[str, int]]) -> Dict[str, float]:
    """Orders per second per sale between two reads (time, {sale: orders
    created}); 0 for the first read, a sale new since, or no time between."""
    t1, now = cur
    if prev is None:
        return {sale: 0.0 for sale in now}
    t0, before = prev
    dt = t1 - t0
    return {sale: (max(0, n - before.get(sale, n)) / dt if dt > 0 else 0.0) for sale, n in now.items()}


def drift_samples(sale: str, report: Optional[Mapping[str, Any]],
                  summary: Mapping[str, Mapping[str, int]]) -> List[Sample]:
    """Redis against the ledger for one sale: confirmed (units CONFIRMED in
    Redis) minus PAID units, pending (units held) minus UNPAID units. 0 when
    they agree; a worker behind its stream makes them differ for a moment,
    so the alert waits (rules.yml). No report (the sale is not in Redis):
    nothing, the reconciler's `rebuild` is for that."""
    if not report:
        return []
    paid = int(summary.get(PAID, {}).get('units', 0))
    unpaid = int(summary.get(UNPAID, {}).get('units', 0))
    return [_s('seckill_pipeline_drift_units', int(report.get('confirmed', 0)) - paid, sale=sale,
               kind='confirmed'),
            _s('seckill_pipeline_drift_units', int(report.get('pending', 0)) - unpaid, sale=sale,
               kind='pending')]


SALE_FIELDS = ('remaining', 'pending', 'confirmed', 'expired')


def sale_samples(sale: str, report: Optional[Mapping[str, Any]]) -> List[Sample]:
    """One sale's report as the exporter script's series: its four numbers,
    seckill_sale_invariant_ok 0 only when the invariant is broken and
    seckill_sale_fenced 1 only when fenced, so the same rules and dashboard
    serve both backends. No report (the key is gone): nothing."""
    if not report:
        return []
    out = [_s('seckill_sale_' + f, int(report.get(f, 0)), sale=sale) for f in SALE_FIELDS]
    if _text(report.get('invariant')) != 'ok':
        out.append(_s('seckill_sale_invariant_ok', 0, sale=sale))
    if _text(report.get('fence')) == 'fenced':
        out.append(_s('seckill_sale_fenced', 1, sale=sale))
    return out


def _text(v: Any) -> Optional[str]:
    return v.decode() if isinstance(v, bytes) else v


def backlog_samples(prefix: str, sale: str, group: str, pending: int,
                    lag: Optional[int]) -> List[Sample]:
    out = [_s(prefix + '_stream_pending', pending, sale=sale, group=group)]
    if lag is not None:
        out.append(_s(prefix + '_stream_lag', lag, sale=sale, group=group))
    return out


WORKER_COUNTERS = ('batches', 'entries', 'acked', 'claimed', 'trimmed', 'db_retries',
                   'redis_retries', 'not_replicated')
LEDGER_WRITES = ('inserted', 'replayed', 'cancelled', 'paid', 'unchanged', 'collisions')


def worker_samples(stats: Any, consumer: str) -> List[Sample]:
    """A WorkerStats as counters, labelled with the consumer."""
    out = [_s('seckill_worker_' + name, getattr(stats, name), 'counter', consumer=consumer)
           for name in WORKER_COUNTERS]
    out += [_s('seckill_worker_ledger_writes', getattr(stats.ledger, name), 'counter',
               consumer=consumer, outcome=name) for name in LEDGER_WRITES]
    out.append(_s('seckill_worker_up', 1, consumer=consumer))
    return out


# -- collectors -------------------------------------------------------------
def _families(samples: Iterable[Sample]) -> Iterator[Any]:
    """prometheus_client metric families, one per name, in first-seen order."""
    from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
    fams: Dict[str, Any] = {}
    for s in samples:
        fam = fams.get(s.name)
        if fam is None:
            cls = CounterMetricFamily if s.kind == 'counter' else GaugeMetricFamily
            fam = fams[s.name] = cls(s.name, HELP.get(s.name, s.name), labels=[k for k, _ in s.labels])
        fam.add_metric([v for _, v in s.labels], s.value)
    return iter(fams.values())


def _backlog(r: Any, stream: str, group: str) -> Optional[Tuple[int, Optional[int]]]:
    from .worker import backlog
    try:
        return backlog(r, stream, group)
    except LookupError:
        return None      # no such group yet: no worker started on the sale


class WorkerCollector:
    """A worker's counters, and its group's backlog on each of its streams."""

    def __init__(self, worker: Any):
        self.worker = worker

    def samples(self) -> List[Sample]:
        w = self.worker
        out = worker_samples(w.stats, w.consumer)
        for stream, cfg in list(w.sales.items()):
            try:
                got = _backlog(w.r, stream, w.group)
            except Exception as exc:  # noqa: BLE001 - Redis down: the counters still go out
                log.debug('backlog of %s: %s', stream, exc)
                continue
            if got is not None:
                out += backlog_samples('seckill_worker', cfg.key, w.group, *got)
        return out

    def collect(self) -> Iterator[Any]:
        return _families(self.samples())


class LedgerCollector:
    """The ledger's orders per sale; with `r`, drift and stream backlog, and
    with `sales` each sale's report (sale_samples)."""

    def __init__(self, store: Any, r: Any = None, group: str = 'orders',
                 clock: Any = time.monotonic, sales: bool = False):
        self.store = store
        self.r = r
        self.group = group
        self.clock = clock
        self.sales = sales
        self._prev: Optional[Tuple[float, Dict[str, int]]] = None
        self._lock = threading.Lock()

    def samples(self) -> List[Sample]:
        try:
            sales = self.store.sales()
            summaries = {cfg.key: self.store.summary(cfg.key) for cfg in sales}
        except Exception as exc:  # noqa: BLE001 - the database is down: say so, as a metric
            log.warning('ledger unavailable: %s', exc)
            return [_s('seckill_ledger_up', 0)]
        finally:
            # prometheus_client serves each scrape from a new thread, and the
            # store keeps a connection per thread: close this one, or every
            # scrape would leave one open
            self.store.reset()
        out = [_s('seckill_ledger_up', 1)] + ledger_samples(sales, summaries)
        with self._lock:
            cur = (self.clock(), {k: orders_created(v) for k, v in summaries.items()})
            rates = order_rate(self._prev, cur)
            self._prev = cur
        out += [_s('seckill_ledger_orders_per_second', v, sale=k) for k, v in rates.items()]
        if self.r is not None:
            out += self._redis_samples(sales, summaries)
        return out

    def _redis_samples(self, sales: Sequence[SaleConfig], summaries: Mapping[str, Any]) -> List[Sample]:
        from ..sale import Sale
        out: List[Sample] = []
        try:
            for cfg in sales:
                report = Sale(self.r, cfg.key).info()
                out += drift_samples(cfg.key, report, summaries[cfg.key])
                if self.sales:
                    out += sale_samples(cfg.key, report)
                if cfg.stream:
                    got = _backlog(self.r, cfg.stream, self.group)
                    if got is not None:
                        out += backlog_samples('seckill_pipeline', cfg.key, self.group, *got)
        except Exception as exc:  # noqa: BLE001 - Redis down: the ledger's numbers still go out
            log.warning('redis unavailable: %s', exc)
            return out + [_s('seckill_pipeline_redis_up', 0)]
        return out + [_s('seckill_pipeline_redis_up', 1)]

    def collect(self) -> Iterator[Any]:
        return _families(self.samples())


def serve(collectors: Sequence[Any], port: int, addr: str = '127.0.0.1') -> Any:
    """Serves the collectors on http://addr:port/metrics from a daemon
    thread (prometheus_client's own server, a registry of their own).
    Returns the server (its shutdown() stops it)."""
    try:
        from prometheus_client import CollectorRegistry, start_http_server
    except ImportError:
        raise SystemExit("the metrics endpoint needs prometheus_client: pip install 'seckill[metrics]'") \
            from None
    registry = CollectorRegistry(auto_describe=False)
    for c in collectors:
        registry.register(c)
    got = start_http_server(port, addr=addr, registry=registry)
    log.info('metrics on http://%s:%d/metrics', addr, port)
    return got[0] if isinstance(got, tuple) else got


__all__ = ['Sample', 'units_left', 'orders_created', 'ledger_samples', 'order_rate', 'drift_samples',
           'sale_samples', 'backlog_samples', 'worker_samples', 'WorkerCollector', 'LedgerCollector', 'serve',
           'PAID', 'UNPAID', 'CANCELLED']
