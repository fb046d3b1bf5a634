"""The demo's end: the ledger check (the order database against the sale in
Redis, the stream and the payments made), the report and the chart."""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING, Any, Dict, List, Optional

from ..sale import Sale
from .payment import OUT_PAID, OUT_REFUND
from .store import CANCELLED, PAID, UNPAID
from .worker import backlog

if TYPE_CHECKING:  # pragma: no cover
    from .demo_types import DemoConfig, Tally


def ledger_check(cfg: DemoConfig, store, sale: Sale, stream: str, r, tally: Tally, outcome,
                 errors: List[BaseException]):
    """The eight checks of the demo's ledger against the sale and the
    stream: [(name, passed, detail)], and the figures they rest on."""
    info = sale.info()
    db = store.summary(sale.key)
    orders = store.orders(sale.key)
    pend, lag = backlog(r, stream)
    paid_orders = [o for o in orders if o.state == PAID]
    captured: Dict[str, List[str]] = {}
    refunds: Dict[str, int] = {}
    for (rid, ref), (out, reason) in tally.payments.items():
        if out == OUT_PAID:
            captured.setdefault(rid, []).append(ref)
        elif out == OUT_REFUND:
            refunds[reason] = refunds.get(reason, 0) + 1
    unresolved = [k for k in _attempted(tally) if k not in tally.payments]
    resold = max(0, info['released'] - info['remaining'])
    figures = {
        'total': info['total'], 'remaining': info['remaining'], 'pending': info['pending'],
        'confirmed': info['confirmed'], 'released': info['released'], 'expired': info['expired'],
        'paid_units': db[PAID]['units'], 'paid_orders': db[PAID]['orders'],
        'unpaid_orders': db[UNPAID]['orders'], 'cancelled_units': db[CANCELLED]['units'],
        'cancelled_orders': db[CANCELLED]['orders'], 'orders': len(orders),
        'reserved': len(tally.reserved), 'resold': resold, 'refunds': refunds,
        'captured': sum(len(v) for v in captured.values()), 'stream_pending': pend,
        'lag': lag or 0,
    }
    paid_by_ref = {o.rid: o.paid_ref for o in paid_orders}
    checks = [
        ('no unit oversold',
         db[PAID]['units'] <= info['total'] and info['invariant'] == 'ok'
         and info['remaining'] + info['pending'] + info['confirmed'] == info['total'],
         '%d paid of %d; remaining %d + pending %d + confirmed %d = %d, invariant %s'
         % (db[PAID]['units'], info['total'], info['remaining'], info['pending'],
            info['confirmed'], info['remaining'] + info['pending'] + info['confirmed'],
            info['invariant'])),
        ('every unit paid or back in stock',
         info['pending'] == 0 and db[UNPAID]['orders'] == 0
         and info['confirmed'] + info['remaining'] == info['total'],
         '%d paid + %d in stock = %d; 0 held, %d unpaid orders'
         % (info['confirmed'], info['remaining'], info['total'], db[UNPAID]['orders'])),
        ('units back in stock were sold again',
         info['released'] == db[CANCELLED]['units'],
         '%d units went back (%d expired holds, %d released), %d of them sold again, '
         '%d still in stock' % (info['released'], info['expired'],
                                info['released'] - info['expired'], resold, info['remaining'])),
        ('PAID orders in DB == units confirmed in Redis',
         db[PAID]['units'] == info['confirmed'] and outcome.paid.counts['ok'] == len(paid_orders)
         and outcome.paid.clean,
         '%d PAID units, %d confirmed; RECONCILE: %d of %d PAID orders ok'
         % (db[PAID]['units'], info['confirmed'], outcome.paid.counts['ok'], len(paid_orders))),
        ('no order paid twice',
         all(len(v) == 1 for v in captured.values()) and set(captured) == set(paid_by_ref)
         and all(captured[rid] == [paid_by_ref[rid]] for rid in captured),
         '%d payments captured for %d PAID orders; %d duplicate callbacks answered PAID '
         'once more, not charged; refunds: %s'
         % (sum(len(v) for v in captured.values()), len(paid_orders), _dup_callbacks(tally),
            ', '.join('%s %d' % kv for kv in sorted(refunds.items())) or 'none')),
        ('every reservation became exactly one order',
         set(tally.reserved) == {o.rid for o in orders} and pend == 0 and not lag,
         '%d reservations, %d orders; stream: %d pending, %d unread'
         % (len(tally.reserved), len(orders), pend, lag or 0)),
        ('every payment answered PAID or REFUND',
         not unresolved and not errors,
         '%d payments, %d RETRY answers along the way%s'
         % (len(tally.payments), tally.pay_retries,
            '; errors: %s' % errors[:3] if errors else '')),
        ('reconciler finds nothing to repair', outcome.clean and outcome.stuck_units == 0,
         'PAID %s; UNPAID %d; CANCELLED released/unknown %d'
         % ('all ok' if outcome.paid.clean else str(outcome.paid.counts),
            sum(outcome.unpaid.counts.values()),
            outcome.cancelled.counts['released'] + outcome.cancelled.counts['unknown'])),
    ]
    return checks, figures


def _attempted(tally: Tally):
    with tally.lock:
        return list(tally.attempted)


def _dup_callbacks(tally: Tally) -> int:
    # pay() answers the same (rid, ref) the same way; the tally keeps one
    # entry per (rid, ref), so duplicates are pay calls beyond those.
    return max(0, tally.pay_calls - tally.pay_retries - len(tally.payments))


def worker_totals(log_path: str) -> Optional[Dict[str, int]]:
    """The sum of the JSON lines the workers print when they stop (the
    killed one prints none)."""
    import json
    total: Dict[str, int] = {}
    try:
        with open(log_path) as f:
            for line in f:
                if line.startswith('{'):
                    for k, v in json.loads(line).items():
                        if isinstance(v, int):
                            total[k] = total.get(k, 0) + v
    except (OSError, ValueError):
        return None
    return total or None


def _workers_line(w: Optional[Dict[str, int]]) -> str:
    if not w:
        return 'no figures'
    return ('%d entries acknowledged after commit, %d claimed from a dead consumer, '
            '%d replayed (already written), %d database retries (by the workers that '
            'stopped cleanly)' % (w.get('acked', 0), w.get('claimed', 0), w.get('replayed', 0),
                                  w.get('db_retries', 0)))


def report_lines(cfg: DemoConfig, tally: Tally, checks, figures, outcome, elapsed: float,
                 settle_s: float) -> List[str]:
    f = figures
    lines = [
        '',
        'flash sale over in %.1f s (buyers %.0f s, settling %.1f s), database: %s'
        % (elapsed, cfg.duration_s, settle_s, cfg.db),
        '  %d buyers made %d reservation attempts: %d reserved, %d sold out, %d refused by LIMIT'
        % (cfg.buyers, tally.attempts, len(tally.reserved), tally.sold_out, tally.limit),
        '  payments: %d captured, refunds %s; %d buyers paid late (racing the hold), '
        '%d cancelled (%d too late to)'
        % (f['captured'], ', '.join('%s %d' % kv for kv in sorted(f['refunds'].items())) or 'none',
           tally.late, tally.cancels, tally.cancel_too_late),
        '  orders: %d PAID (%d units), %d CANCELLED, %d UNPAID'
        % (f['paid_orders'], f['paid_units'], f['cancelled_orders'], f['unpaid_orders']),
        '  workers: %s' % _workers_line(f.get('workers')),
        '  events: %s' % '; '.join('%.1f s %s' % e for e in tally.events),
        '',
        'ledger check:',
    ]
    for name, ok, detail in checks:
        lines.append('  [%s] %s: %s' % ('PASS' if ok else 'FAIL', name, detail))
    lines.append('ledger check: %s' % ('all %d checks passed' % len(checks)
                                       if all(ok for _, ok, _ in checks) else 'FAILED'))
    return lines


def write_chart(samples: List[Dict[str, Any]], events, cfg: DemoConfig, path: str) -> bool:
    if not samples:
        return False
    try:
        import matplotlib
        matplotlib.use('Agg')
        import matplotlib.pyplot as plt
    except ImportError:
        print('matplotlib is not installed: no chart', file=sys.stderr)
        return False
    t = [s['t'] for s in samples]
    fig, ax = plt.subplots(figsize=(8, 3.6), dpi=100)
    ax.plot(t, [s['remaining'] for s in samples], label='stock (remaining)', color='#1f77b4')
    ax.plot(t, [s['pending'] for s in samples], label='pending (held, unpaid)', color='#ff7f0e')
    ax.plot(t, [s['confirmed'] for s in samples], label='paid (confirmed)', color='#2ca02c')
    ax.plot(t, [s['cancelled'] for s in samples], label='cancelled orders (units)',
            color='#7f7f7f', linestyle=':')
    for when, what in events:
        ax.axvline(when, color='#d62728' if 'killed' in what else '#999999', linewidth=0.8,
                   linestyle='--')
        short = what.split(',')[0].replace(' (SIGKILL)', '').replace('worker ', '')
        ax.text(when, ax.get_ylim()[1] * 0.98, ' ' + short, fontsize=7, va='top', rotation=90,
                color='#444444')
    ax.set_xlabel('seconds')
    ax.set_ylabel('units')
    ax.set_title('flash sale: %d units, hold %.1f s, %d buyers (%s)'
                 % (cfg.stock, cfg.hold_ms / 1000, cfg.buyers, cfg.db), fontsize=10)
    ax.legend(fontsize=8, loc='center right')
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return True


def write_report(path: str, cfg: DemoConfig, lines: List[str], chart: Optional[str]) -> None:
    with open(path, 'w') as f:
        f.write('# Flash sale demo (%s)\n\n' % cfg.db)
        f.write('`python -m seckill demo --db %s --buyers %d --stock %d --hold-ms %d '
                '--duration %g --workers %d --seed %d`\n\n'
                % (cfg.db, cfg.buyers, cfg.stock, cfg.hold_ms, cfg.duration_s, cfg.workers,
                   cfg.seed))
        if chart:
            f.write('![the sale over time](%s)\n\n' % os.path.basename(chart))
        f.write('```text\n%s\n```\n' % '\n'.join(line for line in lines if line.strip()))
