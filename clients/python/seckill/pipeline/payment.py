"""Payment: an order becomes PAID only once Redis has confirmed its unit.

`pay(store, sale, rid, ref)` is what a payment provider's callback calls
when the buyer's money for order `rid` is authorized under the provider's
reference `ref` (authorized, not yet captured). The answer tells the caller
what to do with that money:

- PAID: capture it. The order is PAID with paid_ref = ref. Answered again,
  unchanged, for a retry with the same ref.
- REFUND: void or refund it; `reason` says why: `expired` (the hold ran
  out before the payment), `released` (released, or expired, before the
  payment: CONFIRM answered RELEASED), `cancelled` (the
  order was already cancelled), `paid_by_other` (another payment of the same
  order was captured), `conflict` (Redis had lost the reservation and the
  stock could not cover it again), `lost` (Redis had lost it and its hold
  was over anyway).
- RETRY: nothing decided, nothing captured: the order is not in the
  database yet (the worker has not written it), the sale is missing in
  Redis (rebuild it), Redis or the database is down, or the CONFIRM did
  not reach the required replicas in time (`not_replicated`). Call again.

Replicas (seckill.durability, docs/pipeline.md): CONFIRM, a propagating
SET and WAIT go on one connection, and the order becomes PAID only when
WAIT answered the required replicas (`durability`, default: every online
replica, at least 1 once this client saw the master with one). A
failover can then not lose a CONFIRM whose money was captured, and a
split-brain master (it lost its replicas) captures nothing. A CONFIRM
that answers ALREADY_CONFIRMED (a retry) propagates nothing, which is
why the SET is always sent: the WAIT then covers the first CONFIRM too.

The steps, and what a crash between them leaves:

1. the order's payment_ref is set (UNPAID stays UNPAID) — crash here: the
   unit is still pending in Redis; a retry goes on; without one the hold
   runs out, the worker cancels the order, a late retry gets REFUND.
2. SECKILL.CONFIRM — the arbiter: exactly one of CONFIRM and the hold's
   expiry (or a RELEASE) wins, atomically, in Redis.
3. CONFIRMED / ALREADY_CONFIRMED: the order becomes PAID (guarded UPDATE).
   Crash between 2 and 3: Redis has the unit confirmed, the order is UNPAID
   with payment_ref set. Three things close that, whichever comes first: a
   retry (ALREADY_CONFIRMED -> PAID), the worker on the `confirmed` stream
   entry, the reconciler (UNPAID + confirmed + payment_ref -> PAID).
   RELEASED: the order becomes CANCELLED; REFUND.
   NOT_FOUND (Redis lost the reservation: failover, flush): the order is
   taken again with RECONCILE ... APPLY if its hold is not over, else
   cancelled.

No order in the database: usually the worker has not written it yet
(RETRY `no_order`). But a buyer told RESERVED whose reservation a
failover lost has no order and never will: the stream entry was lost with
the reservation, so no worker can write it. pay() then asks Redis: when
the sale exists and SECKILL.GET does not know the id (Redis keeps even
released reservations, so it knows every id it holds or held), nothing
can ever confirm that unit for this payment: REFUND `lost`, nothing
captured, no order written. Had the id been known (pending, say), the
entry is on its way to a worker: RETRY. If the buyer reserves again with
the same REQID later, that is a new reservation and a new payment.

So money is captured (PAID) only after Redis confirmed the unit, and a
confirmed unit never goes back to stock: money is never taken for a unit
that went back to stock. And an order is PAID at most once (guarded
UPDATE), with exactly one paid_ref.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Optional

from ..plain import durability as dur
from ..plain.errors import transient
from ..plain.faults import NONE, Faults
from ..plain.protocol import ALREADY_CONFIRMED, ALREADY_RELEASED, CONFIRMED, NOT_FOUND, RELEASED
from ..sale import Sale, SaleMissing
from .store import CANCELLED, PAID, UNPAID, Order, Store, StoreUnavailable

log = logging.getLogger('seckill.payment')

OUT_PAID, OUT_REFUND, OUT_RETRY = 'PAID', 'REFUND', 'RETRY'


@dataclass(frozen=True)
class PayResult:
    outcome: str          # PAID, REFUND or RETRY
    rid: str
    ref: str
    reason: str = ''

    @property
    def captured(self) -> bool:
        return self.outcome == OUT_PAID

    @property
    def refund(self) -> bool:
        return self.outcome == OUT_REFUND

    def __str__(self) -> str:
        return '%s %s%s' % (self.rid, self.outcome, ' (%s)' % self.reason if self.reason else '')


def final(order: Optional[Order], rid: str, ref: str) -> PayResult:
    """The answer for payment `ref` from the order row as it stands."""
    if order is None:
        return PayResult(OUT_RETRY, rid, ref, 'no_order')
    if order.state == PAID:
        if order.paid_ref == ref:
            return PayResult(OUT_PAID, rid, ref)
        return PayResult(OUT_REFUND, rid, ref, 'paid_by_other')
    if order.state == CANCELLED:
        return PayResult(OUT_REFUND, rid, ref, order.cancel_reason or 'cancelled')
    return PayResult(OUT_RETRY, rid, ref, 'undecided')


def pay(store: Store, sale: Sale, rid: str, ref: str, faults: Faults = NONE,
        durability: dur.Durability = dur.DEFAULT) -> PayResult:
    """See the module docstring. Never raises for an outage: RETRY.
    `durability`: the replicas a CONFIRM must reach before the money is
    captured (seckill.durability.OFF: none, no WAIT)."""
    try:
        durability = dur.setting(durability)
        return _pay(store, sale, rid, ref, faults, None if durability.off else durability)
    except StoreUnavailable as exc:
        log.warning('pay %s: database unavailable: %s', rid, exc)
        return PayResult(OUT_RETRY, rid, ref, 'db_unavailable')
    except SaleMissing:
        return PayResult(OUT_RETRY, rid, ref, 'sale_missing')
    except Exception as exc:
        if transient(exc):
            log.warning('pay %s: redis unavailable: %s', rid, exc)
            return PayResult(OUT_RETRY, rid, ref, 'redis_unavailable')
        raise


def _pay(store: Store, sale: Sale, rid: str, ref: str, faults: Faults,
         wait: Optional[dur.Durability]) -> PayResult:
    order = store.order(rid)
    if order is None:
        return _no_order(store, sale, rid, ref)
    if order.state != UNPAID:
        return final(order, rid, ref)
    if order.sale != sale.key:
        raise ValueError('order %s belongs to sale %s, not %s' % (rid, order.sale, sale.key))

    order = store.start_payment(rid, ref)                      # 1
    if order is None or order.state != UNPAID:
        return final(order, rid, ref)
    faults('pay_after_start')

    settled = sale.confirm(rid, wait=wait)                     # 2
    status = settled.status
    if status in (CONFIRMED, ALREADY_CONFIRMED):
        if settled.replicated is False:
            return PayResult(OUT_RETRY, rid, ref, 'not_replicated')
        faults('pay_after_confirm')
        store.mark_paid(rid, ref)                              # 3
    elif status == RELEASED:
        store.cancel(rid, 'released')
    elif status == NOT_FOUND:
        _lost(store, sale, order)
        order = store.order(rid)
        if order is not None and order.state == UNPAID:
            if wait is not None and not sale.wait(wait).ok:    # APPLY's CONFIRM on replicas
                return PayResult(OUT_RETRY, rid, ref, 'not_replicated')
            faults('pay_after_confirm')
            store.mark_paid(rid, ref)
    return final(store.order(rid), rid, ref)


def _no_order(store: Store, sale: Sale, rid: str, ref: str) -> PayResult:
    """No order row (see the module docstring): RETRY while Redis knows the
    reservation (the worker will write it) or the sale is missing, REFUND
    `lost` when the sale exists and has never heard of the id."""
    if sale.get(rid) is not None:
        return PayResult(OUT_RETRY, rid, ref, 'no_order')
    if sale.info() is None:
        return PayResult(OUT_RETRY, rid, ref, 'sale_missing')
    order = store.order(rid)          # written meanwhile (a replayed batch, a restore)
    if order is not None:
        return final(order, rid, ref)
    return PayResult(OUT_REFUND, rid, ref, 'lost')


def _lost(store: Store, sale: Sale, order: Order) -> None:
    """Redis does not know the reservation although the order exists: it
    lost it (failover, flush). Take it again if its hold is not over (the
    ledger is the truth), else cancel it. Leaves the order UNPAID only when
    the sale confirmed it."""
    if sale.info() is None:
        raise SaleMissing(sale.key)
    if order.deadline_ms is not None and sale.server_ms() >= order.deadline_ms:
        store.cancel(order.rid, 'lost')
        return
    res = sale.reconcile([order.row()], apply=True)
    if res.counts['conflict']:
        store.cancel(order.rid, 'conflict')
        return
    got = sale.get(order.rid)
    if got is None or got.get('state') != 'confirmed':  # pragma: no cover - APPLY confirms it
        store.cancel(order.rid, 'lost')


def cancel_order(store: Store, sale: Sale, rid: str, reason: str = 'cancelled') -> bool:
    """The buyer gives the order up: RELEASE in Redis first (the unit goes
    back), then the order is CANCELLED. False when it is too late (the unit
    was confirmed: the order is paid or being paid)."""
    status = sale.release(rid).status
    if status in (RELEASED, ALREADY_RELEASED, NOT_FOUND):
        store.cancel(rid, reason)
        return True
    return False

