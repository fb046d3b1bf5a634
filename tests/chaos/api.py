"""The client API the chaos runs drive, in one place.

`baseline`: the pipeline as shipped before issue 22 (pay, Worker,
reconcile, create_sale): against a client that has the gate and the
fence, both are turned off explicitly (`durability=OFF`, `fence=False`).
`hardened`: the same calls with what issue 22 adds, every piece passed
explicitly: sales created with `fence=True` (INIT ... FENCE, checked in
INFO), and `durability=Durability(replicas=REPLICAS)` given to pay(), to
every Worker and to reconcile() (the WAIT gate: a CONFIRM, a batch, a PAID
mark needs a replica's acknowledgement). `Api('hardened')` checks that
each piece exists and raises `MissingApi` otherwise, so a run never
measures the old client under the new name, nor a client whose defaults
changed.

REPLICAS is 1, not 'auto': 'auto' trusts a count of 0 on a connection
pool that never saw its master with a replica, and the split brain's
stale side opens its pool on a master that has just lost both.
"""

from __future__ import annotations

import inspect
from typing import Any, Dict, List

from seckill import protocol
from seckill.pipeline import payment, reconciler, worker
from seckill.sale import Sale

BASELINE, HARDENED = 'baseline', 'hardened'
REPLICAS = 1
MODES = (BASELINE, HARDENED)


class MissingApi(RuntimeError):
    """The client lacks a piece of the hardened API."""


def _require(cond: bool, what: str) -> None:
    if not cond:
        raise MissingApi('the client at %s lacks %s (issue 22): run with PYTHONPATH pointing at '
                         'a client that has it, or --client baseline'
                         % (protocol.__file__, what))


class Api:
    def __init__(self, mode: str, reserve_wait: bool = False):
        if mode not in MODES:
            raise ValueError('client mode %r: one of %s' % (mode, ', '.join(MODES)))
        self.mode = mode
        self.busy_statuses: List[str] = []
        """RESERVE statuses that mean "not now, retry" (FENCED when hardened)."""
        self.gate: Dict[str, Any] = {}
        """The WAIT gate's keyword argument for pay, Worker and reconcile."""
        self.fence: Dict[str, Any] = {}
        self.reserve_kwargs: Dict[str, Any] = {}
        """Sale.reserve's extra arguments: `wait` with reserve_wait."""
        if mode == HARDENED:
            self._check_hardened()
        else:
            self._switch_off()
        if reserve_wait:
            _require(mode == HARDENED and 'wait' in inspect.signature(Sale.reserve).parameters,
                     'Sale.reserve(..., wait=...) (--reserve-wait needs --client hardened)')
            self.reserve_kwargs = {'wait': self.gate['durability']}

    def _check_hardened(self) -> None:
        _require(getattr(protocol, 'FENCED', None) in protocol.RESERVE_STATUSES,
                 'protocol.FENCED among the RESERVE statuses')
        self.busy_statuses.append(protocol.FENCED)
        _require(hasattr(Sale, 'unfence'), 'Sale.unfence()')
        _require('fence' in inspect.signature(Sale.init).parameters, 'Sale.init(..., fence=True)')
        _require('fence' in inspect.signature(reconciler.create_sale).parameters,
                 'create_sale(..., fence=True)')
        try:
            from seckill.durability import Durability
        except ImportError:
            _require(False, 'seckill.durability (the WAIT gate)')
        for fn, name in ((payment.pay, 'pay'), (worker.Worker.__init__, 'Worker'),
                         (reconciler.reconcile, 'reconcile')):
            _require('durability' in inspect.signature(fn).parameters,
                     '%s(..., durability=...)' % name)
        self.gate = {'durability': Durability(replicas=REPLICAS)}
        self.fence = {'fence': True}

    def _switch_off(self) -> None:
        """Baseline on a client that has the gate and the fence: both turned
        off explicitly (durability OFF, fence=False), so the run still
        measures the pipeline without them."""
        if 'fence' in inspect.signature(reconciler.create_sale).parameters:
            self.fence = {'fence': False}
        try:
            from seckill.durability import OFF
        except ImportError:
            return
        self.gate = {'durability': OFF}

    def create_sale(self, store: Any, r: Any, cfg: Any) -> None:
        reconciler.create_sale(store, r, cfg, **self.fence)
        if self.mode == HARDENED:
            info = Sale(r, cfg.key).info()
            _require(info is not None and info.get('fence') == 'clear',
                     'a server that makes FENCE sales (INFO of %s has no "fence: clear": '
                     'the module or library lacks the fence)' % cfg.key)

    def worker_kwargs(self) -> Dict[str, Any]:
        """What the Worker gets on top of the baseline's arguments."""
        return dict(self.gate)

    def pay(self, store: Any, sale: Any, rid: str, ref: str) -> payment.PayResult:
        return payment.pay(store, sale, rid, ref, **self.gate)

    def reconcile(self, store: Any, sale: Any, apply: bool) -> reconciler.Outcome:
        return reconciler.reconcile(store, sale, apply=apply, **self.gate)
