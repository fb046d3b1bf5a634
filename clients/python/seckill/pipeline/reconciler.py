"""The reconciler: the order database is the truth; make the sale agree.

SECKILL.RECONCILE ... ORDERS classifies ledger rows against the sale (ok =
confirmed there, pending, released, unknown) and, with APPLY, confirms every
row it is given. Confirming is one-way (a confirmed unit never returns to
stock), so only orders that must be confirmed go with APPLY: the PAID ones.
The orders are sent in three groups, each in chunks of at most `chunk_size`
rows:

  PAID       must be confirmed.  pending / released / unknown: the CONFIRM
             was lost (failover) or the sale was lost -> APPLY confirms them
             (released and unknown take their stock again); `conflict`: the
             stock cannot cover them any more -> reported, for a human
             (refund or find the unit): the one case that costs money.
  UNPAID     report only.  ok: `pay` crashed between CONFIRM and its write ->
             PAID if a payment was started, else flagged; released: the hold
             ran out and the worker missed it -> CANCELLED; unknown: Redis
             lost the reservation -> restored (RESERVE with the same id, a new
             hold) while its hold would still run, else CANCELLED; pending: fine.
  CANCELLED  report only.  pending: the RELEASE was lost (failover) -> RELEASE
             again; ok: a unit confirmed for a cancelled order -> flagged (it
             stays sold: never oversold, one unit undersold).

Without apply nothing changes (no EXPIRE either): the outcome says what
apply would do.

Replicas: MARK_PAID (the one repair that turns a CONFIRM into captured
money) runs only after the WAIT gate (seckill.durability) answered the
required replicas for everything the master did before it, the report
that classified the order included; short, the marks wait for the next
pass (`not_replicated` in the outcome).

The fence (docs/replication.md): a FENCE sale refuses to sell on a master
promoted or restarted since it was created. With apply, once every chunk
of the PAID orders was applied (RECONCILE ... APPLY: the ledger's units
are the sale's again), the reconciler lifts it (SECKILL.UNFENCE) and then
restores the lost UNPAID holds (a RESERVE: refused while fenced); the
outcome says `fence lifted`.

rebuild() is the same pass against a sale that Redis lost, built under a
staging key in the sale's slot and published with one RENAMENX once it
holds every order: a buyer retrying through the outage gets NO_SALE until
then, never a unit the ledger holds. On the Functions library a renamed
sale would write no stream entries (the library cannot follow a RENAME:
docs/managed-redis.md), so there the whole pass is one MULTI/EXEC on the
sale key itself: the same guarantee (no buyer runs between its commands),
paid for by a server busy for the whole transaction (about 20 µs a ledger
row on the test machine).
"""

from __future__ import annotations

import dataclasses
import logging
import os
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Tuple

import redis

from .. import backend as be
from ..drivers.sync import Driver
from ..plain import durability as dur
from ..plain import protocol as p
from ..plain.protocol import (DUPLICATE, FENCED, RELEASED, ALREADY_RELEASED, RESERVED, UNFENCED,
                              ReconcileResult, text)
from ..plain.split_protocol import hash_tag, key_slot
from ..sale import Sale, SaleMissing
from .store import CANCELLED, PAID, UNPAID, Order, SaleConfig, Store
from .worker import DEFAULT_GROUP, ensure_group

log = logging.getLogger('seckill.reconcile')

# Actions, in the order they are applied.
MARK_PAID = 'mark_paid'            # UNPAID, confirmed in Redis, payment started
CANCEL = 'cancel'                  # UNPAID, released in Redis
RESTORE = 'restore'                # UNPAID, unknown in Redis, hold not over
CANCEL_LOST = 'cancel_lost'        # UNPAID, unknown in Redis, hold over
RELEASE = 'release'                # CANCELLED, still pending in Redis
FLAG_CONFIRMED_UNPAID = 'flag_confirmed_unpaid'      # UNPAID, confirmed, no payment
FLAG_CONFIRMED_CANCELLED = 'flag_confirmed_cancelled'  # CANCELLED, confirmed in Redis
ACTIONS = (MARK_PAID, CANCEL, RESTORE, CANCEL_LOST, RELEASE,
           FLAG_CONFIRMED_UNPAID, FLAG_CONFIRMED_CANCELLED)


def plan(unpaid: ReconcileResult, cancelled: ReconcileResult, orders: Dict[str, Order],
         now_ms: int) -> List[Tuple[str, str]]:
    """The repairs for UNPAID and CANCELLED orders from their (report-only)
    classification: [(action, rid)]. Plain: no I/O."""
    out: List[Tuple[str, str]] = []
    unpaid_ok = _ok_ids(unpaid, [o for o in orders.values() if o.state == UNPAID])
    for rid in unpaid_ok:
        out.append((MARK_PAID if orders[rid].payment_ref else FLAG_CONFIRMED_UNPAID, rid))
    for rid in unpaid.ids['released']:
        out.append((CANCEL, rid))
    for rid in unpaid.ids['unknown']:
        o = orders[rid]
        over = o.deadline_ms is not None and now_ms >= o.deadline_ms
        out.append((CANCEL_LOST if over else RESTORE, rid))
    for rid in cancelled.ids['pending']:
        out.append((RELEASE, rid))
    for rid in _ok_ids(cancelled, [o for o in orders.values() if o.state == CANCELLED]):
        out.append((FLAG_CONFIRMED_CANCELLED, rid))
    order = {a: i for i, a in enumerate(ACTIONS)}
    return sorted(out, key=lambda a: order[a[0]])


def _ok_ids(result: ReconcileResult, group: List[Order]) -> List[str]:
    """RECONCILE lists the ids of every class but ok: ok = the rest."""
    not_ok = set()
    for ids in result.ids.values():
        not_ok.update(ids)
    return [o.rid for o in group if o.rid not in not_ok]


@dataclass
class Outcome:
    sale: str
    applied: bool
    paid: ReconcileResult
    unpaid: ReconcileResult
    cancelled: ReconcileResult
    planned: List[Tuple[str, str]]
    done: Dict[str, List[str]] = field(default_factory=dict)
    report: Optional[Dict[str, Any]] = None
    ledger: Dict[str, Dict[str, int]] = field(default_factory=dict)
    unfence: Optional[str] = None
    """With apply: SECKILL.UNFENCE's answer (UNFENCED: the fence was lifted)."""
    not_replicated: List[str] = field(default_factory=list)
    """MARK_PAID repairs left for the next pass: the WAIT gate fell short."""

    @property
    def paid_repaired(self) -> List[str]:
        """PAID orders the sale did not have confirmed (APPLY confirmed them)."""
        p = self.paid.ids
        return p['pending'] + p['released'] + p['unknown']

    @property
    def conflicts(self) -> List[str]:
        return list(self.paid.ids['conflict'])

    @property
    def clean(self) -> bool:
        """Nothing to repair: every PAID order confirmed, no action planned."""
        return self.paid.clean and not self.planned

    @property
    def stuck_units(self) -> int:
        """Units confirmed in Redis without a PAID order (never oversold:
        undersold by that much). 0 when consistent."""
        if self.report is None:
            return 0
        return self.report['confirmed'] - self.ledger.get(PAID, {}).get('units', 0)

    def as_dict(self) -> Dict[str, Any]:
        return {
            'sale': self.sale, 'applied': self.applied,
            'paid': dict(self.paid.counts), 'unpaid': dict(self.unpaid.counts),
            'cancelled': dict(self.cancelled.counts),
            'paid_repaired': self.paid_repaired, 'conflicts': self.conflicts,
            'planned': [list(a) for a in self.planned], 'done': self.done,
            'report': self.report, 'ledger': self.ledger, 'stuck_units': self.stuck_units,
            'unfence': self.unfence, 'not_replicated': self.not_replicated,
        }

    def lines(self) -> List[str]:
        """A human-readable summary."""
        verb = 'repaired' if self.applied else 'to repair'
        out = ['sale %s: %s' % (self.sale, 'clean' if self.clean else
                                ('repaired' if self.applied else 'needs repair (run with --apply)'))]
        for name, res in (('PAID', self.paid), ('UNPAID', self.unpaid),
                          ('CANCELLED', self.cancelled)):
            out.append('  %-9s orders: %s' % (name, ', '.join(
                '%s %d' % (c, n) for c, n in res.counts.items() if n or c == 'ok')))
        if self.paid_repaired:
            out.append('  PAID orders confirmed again (%s): %d %s' % (
                verb, len(self.paid_repaired), _few(self.paid_repaired)))
        if self.conflicts:
            out.append('  CONFLICT: %d PAID orders the stock cannot cover (refund or find '
                       'the units): %s' % (len(self.conflicts), _few(self.conflicts, 20)))
        counts: Dict[str, List[str]] = {}
        for action, rid in self.planned:
            counts.setdefault(action, []).append(rid)
        for action, rids in counts.items():
            done = self.done.get(action)
            out.append('  %-25s %d %s%s' % (action, len(rids), _few(rids),
                                              '' if done is None or not self.applied
                                              else ' (done %d)' % len(done)))
        if self.report is not None:
            r = self.report
            out.append('  sale: total %d, remaining %d, pending %d, confirmed %d, invariant %s'
                       % (r['total'], r['remaining'], r['pending'], r['confirmed'],
                          r['invariant']))
        if self.ledger:
            out.append('  ledger: ' + ', '.join('%s %d orders / %d units' % (s, v['orders'], v['units'])
                                              for s, v in self.ledger.items()))
        if self.stuck_units:
            out.append('  units confirmed in Redis without a PAID order: %d' % self.stuck_units)
        if self.not_replicated:
            out.append('  not replicated (WAIT short): %d PAID marks left for the next pass %s'
                       % (len(self.not_replicated), _few(self.not_replicated)))
        if self.unfence == UNFENCED:
            out.append('  fence lifted: the sale sells again (SECKILL.UNFENCE)')
        elif self.report is not None and self.report.get('fence') == 'fenced':
            out.append('  FENCED: the sale refuses to sell until reconcile --apply lifts the fence')
        return out


def _few(ids: List[str], n: int = 5) -> str:
    return '[%s%s]' % (', '.join(ids[:n]), ', ...' if len(ids) > n else '')


def reconcile(store: Store, sale: Sale, apply: bool = False, chunk_size: int = 1000,
              durability: dur.Durability = dur.DEFAULT) -> Outcome:
    """One reconcile pass over every order of the sale. Raises SaleMissing
    when the sale is gone from Redis (use rebuild). With apply, lifts the
    sale's fence once the PAID orders are applied (the module docstring).
    `durability`: the WAIT gate before MARK_PAID repairs."""
    return _reconcile(store, sale.key, sale, apply, chunk_size,
                      durability=dur.setting(durability))


def _reconcile(store: Store, ledger_key: str, sale: Sale, apply: bool, chunk_size: int,
               tick: Optional[Callable[[], None]] = None,
               durability: dur.Durability = dur.DEFAULT) -> Outcome:
    """reconcile() of the orders the database keeps under `ledger_key`
    against `sale` (the same key, or rebuild's staging key). `tick` is
    called between steps (rebuild keeps its lock alive with it)."""
    tick = tick or (lambda: None)
    orders, by_state = _ledger(store, ledger_key)
    # PAID first: they have the first claim on the stock.
    paid = sale.reconcile([o.row() for o in by_state[PAID]], apply=apply, expire=apply,
                          chunk_size=chunk_size)
    tick()
    unpaid = sale.reconcile([o.row() for o in by_state[UNPAID]], chunk_size=chunk_size)
    cancelled = sale.reconcile([o.row() for o in by_state[CANCELLED]], chunk_size=chunk_size)
    tick()
    planned = plan(unpaid, cancelled, orders, sale.server_ms())
    out = Outcome(ledger_key, apply, paid, unpaid, cancelled, planned)
    if apply:
        if (paid.report or {}).get('fence') == 'fenced':
            out.unfence = sale.unfence()
        marks = [rid for action, rid in planned if action == MARK_PAID]
        if marks and not durability.off and not sale.wait(durability).ok:
            out.not_replicated = marks
            planned = [a for a in planned if a[0] != MARK_PAID]
        out.done = _execute(store, sale, planned, orders, tick)
    return _finish(out, store, sale)



def _ledger(store: Store, key: str) -> Tuple[Dict[str, Order], Dict[str, List[Order]]]:
    """The sale's orders by id, and by state."""
    orders = {o.rid: o for o in store.orders(key)}
    by_state: Dict[str, List[Order]] = {PAID: [], UNPAID: [], CANCELLED: []}
    for o in orders.values():
        by_state[o.state].append(o)
    return orders, by_state


def _finish(out: Outcome, store: Store, sale: Sale) -> Outcome:
    """The outcome's report and ledger summary; conflicts logged."""
    if out.applied and out.conflicts:
        log.error('sale %s: %d PAID orders the stock cannot cover: %s', out.sale,
                  len(out.conflicts), out.conflicts[:20])
    out.report = sale.info()
    out.ledger = store.summary(out.sale)
    return out


def _execute(store: Store, sale: Sale, planned: List[Tuple[str, str]],
             orders: Dict[str, Order],
             tick: Optional[Callable[[], None]] = None) -> Dict[str, List[str]]:
    done: Dict[str, List[str]] = {a: [] for a in ACTIONS}
    for action, rid in planned:
        if tick is not None:
            tick()
        o = orders[rid]
        if action == MARK_PAID:
            ok = store.mark_paid(rid)
        elif action in (CANCEL, CANCEL_LOST):
            ok = store.cancel(rid, 'released' if action == CANCEL else 'lost')
        elif action == RESTORE:
            ok = _restore(store, sale, o)
        elif action == RELEASE:
            ok = sale.release(rid).status in (RELEASED, ALREADY_RELEASED)
        else:
            log.warning('%s: %s (%s, qty %d)', action, rid, o.user, o.qty)
            ok = True
        if ok:
            done[action].append(rid)
    return {a: rids for a, rids in done.items() if rids}


def _restore(store: Store, sale: Sale, o: Order) -> bool:
    """An UNPAID order Redis lost: reserve it again under its own id (a new
    hold); when the sale refuses (sold out, ended, limit) the order is
    cancelled instead."""
    current = store.order(o.rid)
    if current is None or current.state != UNPAID:
        return False
    return _restored(store, sale, o, sale.reserve(o.user, o.qty, reqid=o.rid).status)


def _restored(store: Store, sale: Sale, o: Order, status: str) -> bool:
    """The order after its RESERVE answered `status`: its new deadline, or
    cancelled when the sale refused it (or it is released already)."""
    if status in (RESERVED, DUPLICATE):
        got = sale.get(o.rid)
        if got is not None and got['state'] == 'released':
            store.cancel(o.rid, 'released')
            return False
        if got is not None and got.get('deadline_ms'):
            store.set_deadline(o.rid, got['deadline_ms'])
        return True
    if status == FENCED:       # still fenced (UNFENCE refused?): the next pass restores it
        log.warning('restore %s: the sale is fenced; left for the next pass', o.rid)
        return False
    log.info('restore %s: %s; order cancelled', o.rid, status)
    store.cancel(o.rid, 'lost')
    return False


REBUILD_SUFFIX = ':rebuild'
LOCK_SUFFIX = ':lock'
REBUILD_LOCK_MS = 60_000


def staging_key(key: str) -> str:
    """The key a rebuild builds the sale under before publishing it with
    RENAMENX: `<key>:rebuild` when `key` has a hash tag, else
    `{<key>}:rebuild`. Both must lie in the key's cluster slot (RENAMENX
    needs it, and the sale's stream shares that slot); ValueError when they
    would not (a key without a tag that contains a brace). Plain."""
    tagged = hash_tag(key) != key.encode('utf-8')
    staging = key + REBUILD_SUFFIX if tagged else '{%s}%s' % (key, REBUILD_SUFFIX)
    if key_slot(staging) != key_slot(key) or key_slot(staging + LOCK_SUFFIX) != key_slot(key):
        raise ValueError('sale key %r: no staging key in its cluster slot (%r is in slot %d, '
                         'the key in %d); give the key a hash tag, e.g. sale:{1001}'
                         % (key, staging, key_slot(staging), key_slot(key)))
    return staging


class _RebuildLock:
    """`<staging>:lock`, SET NX PX with a random token: one rebuild of a sale
    at a time (two rebuilds sharing the staging key would DEL or publish
    each other's half-built sale). Kept alive by tick(); a crashed
    rebuild's lock runs out after `ms`."""

    def __init__(self, r: Any, key: str, ms: int):
        self.r = r
        self.key = key
        self.ms = ms
        self.token = os.urandom(8).hex()
        self._renewed = 0.0

    def acquire(self) -> bool:
        if not self.r.set(self.key, self.token, nx=True, px=self.ms):
            return False
        self._renewed = time.monotonic()
        return True

    def tick(self) -> None:
        if time.monotonic() - self._renewed > self.ms / 3000.0:
            self.r.pexpire(self.key, self.ms)
            self._renewed = time.monotonic()

    def mine(self) -> bool:
        return text(self.r.get(self.key)) == self.token

    def release(self) -> None:
        if self.mine():
            self.r.delete(self.key)


def _publish(r: Any, staging: str, key: str, lock: _RebuildLock) -> bool:
    """RENAMENX staging key, only while the lock is still ours (WATCH on a
    plain connection; a cluster client checks, then renames). True when
    published, False when the key exists."""
    if isinstance(r, redis.Redis):
        with r.pipeline(transaction=True) as pipe:
            try:
                pipe.watch(lock.key)
                if text(pipe.get(lock.key)) != lock.token:
                    raise RuntimeError('rebuild of %r: lost its lock %s (ran longer than %d ms '
                                       'without renewing it?)' % (key, lock.key, lock.ms))
                pipe.multi()
                pipe.renamenx(staging, key)
                pipe.delete(lock.key)
                renamed, _ = pipe.execute()
            except redis.WatchError:
                raise RuntimeError('rebuild of %r: another rebuild took its lock %s'
                                   % (key, lock.key)) from None
        return bool(renamed)
    if not lock.mine():
        raise RuntimeError('rebuild of %r: lost its lock %s' % (key, lock.key))
    return bool(r.renamenx(staging, key))


def rebuild(store: Store, r: Any, key: str, chunk_size: int = 1000,
            group: str = DEFAULT_GROUP, lock_ms: int = REBUILD_LOCK_MS) -> Outcome:
    """Recreates a lost sale from the database alone, out of buyers' reach
    until it holds the whole ledger: INIT of the staging key
    (staging_key(key), same slot, same STREAM, TTL, window, ...) with the
    stored parameters, a reconcile with apply against it (PAID orders
    confirmed, UNPAID ones reserved again or cancelled, CANCELLED ones left
    out), then one RENAMENX staging key. Until that RENAMENX a RESERVE on
    the key answers NO_SALE; after it the sale has every order back.
    Refuses when the sale exists (use reconcile), before and at the
    RENAMENX (someone INITed the key meanwhile: the staging key is
    deleted), and while another rebuild of the sale runs. On the Functions
    library: one MULTI/EXEC instead (the module docstring)."""
    cfg = store.load_sale(key)
    if cfg is None:
        raise LookupError('sale %r is not in the database' % key)
    exists = RuntimeError('sale %r exists in Redis: use reconcile --apply' % key)
    if Sale(r, key).info() is not None:
        raise exists
    staging = staging_key(key)
    lock = _RebuildLock(r, staging + LOCK_SUFFIX, lock_ms)
    if not lock.acquire():
        raise RuntimeError('sale %r: another rebuild is running (lock %s; a crashed one\'s '
                           'lock runs out within %d s)' % (key, lock.key, lock_ms // 1000))
    if Driver(r)._resolve(key) == be.FUNCTIONS:
        try:
            r.delete(staging)                  # a crashed rebuild's leftover (the module's way)
            out = _rebuild_in_one_transaction(store, r, cfg, chunk_size)
            if out is None:
                raise exists
            if cfg.stream:
                ensure_group(r, cfg.stream, group)
            return out
        finally:
            lock.release()
    published = False
    try:
        r.delete(staging)                      # a crashed rebuild's leftover
        sale = Sale(r, staging)
        if not sale.init(cfg.total, fence=True, **cfg.init_kwargs(sale.server_ms())):
            raise RuntimeError('rebuild of %r: staging key %s exists' % (key, staging))
        if cfg.stream:
            ensure_group(r, cfg.stream, group)
        out = _reconcile(store, key, sale, apply=True, chunk_size=chunk_size, tick=lock.tick)
        published = _publish(r, staging, key, lock)
        if not published:
            raise exists
        return out
    finally:
        if not published:
            r.delete(staging)
        lock.release()


def _rebuild_in_one_transaction(store: Store, r: Any, cfg: SaleConfig,
                                chunk_size: int) -> Optional[Outcome]:
    """rebuild() on the Functions library: INIT of the sale key, RECONCILE
    APPLY of the PAID orders, the report-only RECONCILEs of the UNPAID and
    CANCELLED ones, and the RESERVE (same id) of every UNPAID order whose
    hold would still run, in one MULTI/EXEC (WATCH on the key). On a lost
    sale those are the actions _reconcile would plan (every UNPAID order is
    `unknown` to the new sale). None when the key exists (someone INITed
    it): nothing ran."""
    key = cfg.key
    orders, by_state = _ledger(store, key)
    now = Sale(r, key).server_ms()
    restore = [o for o in by_state[UNPAID] if o.deadline_ms is None or now < o.deadline_ms]
    calls = [p.init_args(key, cfg.total, fence=True, **cfg.init_kwargs(now))]
    spans = []
    for state in (PAID, UNPAID, CANCELLED):
        apply = state == PAID
        group = list(p.reconcile_calls(key, [o.row() for o in by_state[state]], apply=apply,
                                       expire=apply, chunk_size=chunk_size))
        spans.append(range(len(calls), len(calls) + len(group)))
        calls += group
    first_reserve = len(calls)
    calls += [p.reserve_args(key, o.user, o.qty, o.rid) for o in restore]
    keys, _ = be.init_keys(calls[0])       # what the new sale's calls touch: its INIT says
    replies = _transaction(r, key, [be.to_functions(c, keys) for c in calls])
    if replies is None:
        return None
    errors = [x for x in replies if isinstance(x, Exception)]
    if errors:
        raise errors[0]
    results = []
    for span in spans:
        res = ReconcileResult()
        for i in span:
            p.merge_reconcile(res, p.parse_report(replies[i]))
        results.append(res)
    paid, unpaid, cancelled = results
    out = Outcome(key, True, paid, unpaid, cancelled, plan(unpaid, cancelled, orders, now))
    sale = Sale(r, key)
    reserved = {o.rid: p.parse_reserved(x).status for o, x in zip(restore, replies[first_reserve:])}
    done: Dict[str, List[str]] = {a: [] for a in ACTIONS}
    for action, rid in out.planned:
        if action == RESTORE and rid in reserved:
            ok = _restored(store, sale, orders[rid], reserved[rid])
        elif action in (RESTORE, CANCEL_LOST):
            ok = store.cancel(rid, 'lost')
        else:   # the new sale knows no order but those it was given: nothing else to plan
            log.warning('rebuild %s: %s %s not done', key, action, rid)
            ok = False
        if ok:
            done[action].append(rid)
    out.done = {a: rids for a, rids in done.items() if rids}
    return _finish(out, store, sale)


def _transaction(r: Any, key: str, commands: List[List[Any]]) -> Optional[List[Any]]:
    """`commands` in one MULTI/EXEC, unless `key` exists (WATCHed): their
    replies (errors as exceptions), or None when the key exists."""
    with r.pipeline(transaction=True) as pipe:
        try:
            pipe.watch(key)
            if pipe.exists(key):
                return None
            pipe.multi()
            for c in commands:
                pipe.execute_command(*c)
            return pipe.execute(raise_on_error=False)
        except redis.WatchError:
            return None


def create_sale(store: Store, r: Any, cfg: SaleConfig, replace: bool = False,
                fence: bool = True) -> bool:
    """Stores the sale's parameters, then INIT (the database first, so a sale
    that exists in Redis can always be rebuilt). Idempotent like INIT: when
    the database already has the sale, nothing changes (False), and a sale
    the database has but Redis lost is refused (rebuild it, with its
    orders). `replace` overwrites both: a new round on the same key (its
    old orders would then be `unknown`: prefer a new key per round).
    `fence`: a FENCE sale (INIT ... FENCE, docs/replication.md): after a
    failover it sells again only once reconcile with apply lifted the
    fence."""
    sale = Sale(r, cfg.key)
    now = sale.server_ms()
    if not replace:
        known = store.load_sale(cfg.key)
        if known is not None:
            if sale.info() is None:
                raise RuntimeError('sale %r is in the database but not in Redis: use rebuild'
                                   % cfg.key)
            if known.stream:
                ensure_group(r, known.stream)
            return False
    store.save_sale(cfg if cfg.created_ms else dataclasses.replace(cfg, created_ms=now))
    created = sale.init(cfg.total, replace=replace, fence=fence, **cfg.init_kwargs(now))
    if cfg.stream:
        ensure_group(r, cfg.stream)
    return created


def run_periodic(store: Store, sale: Sale, every_s: float, apply: bool = False,
                 chunk_size: int = 1000, rounds: Optional[int] = None, stop=None,
                 on_outcome=None) -> None:
    """reconcile() every `every_s` seconds (`rounds` times, or until
    stop.is_set())."""
    n = 0
    while rounds is None or n < rounds:
        try:
            out = reconcile(store, sale, apply=apply, chunk_size=chunk_size)
            if on_outcome:
                on_outcome(out)
        except SaleMissing:
            log.error('sale %s is missing in Redis: run rebuild', sale.key)
        n += 1
        if stop is not None:
            if stop.wait(every_s):
                return
        else:
            time.sleep(every_s)
