"""The client API the chaos runs drive, in one place.

`baseline`: the pipeline as shipped before issue 22 (pay, Worker,
reconcile, create_sale, nothing else). `hardened`: the same calls, plus
what issue 22 adds (a fenced sale, WAIT-gated payments and worker
commits); `Api('hardened')` checks that every piece is there and raises
`MissingApi` otherwise, so a run never measures the old client under the
new name.
"""

from __future__ import annotations

import inspect
from typing import Any, Dict, List

from seckill import protocol
from seckill.pipeline import payment, reconciler

BASELINE, HARDENED = 'baseline', 'hardened'
MODES = (BASELINE, HARDENED)


class MissingApi(RuntimeError):
    """The client lacks a piece of the hardened API."""


def _require(cond: bool, what: str) -> None:
    if not cond:
        raise MissingApi('the client at %s lacks %s (issue 22): run with PYTHONPATH pointing at '
                         'a client that has it, or --client baseline'
                         % (protocol.__file__, what))


class Api:
    def __init__(self, mode: str):
        if mode not in MODES:
            raise ValueError('client mode %r: one of %s' % (mode, ', '.join(MODES)))
        self.mode = mode
        self.busy_statuses: List[str] = []
        """RESERVE statuses that mean "not now, retry" (FENCED when hardened)."""
        if mode == HARDENED:
            self._check_hardened()

    def _check_hardened(self) -> None:
        _require(getattr(protocol, 'FENCED', None) in protocol.RESERVE_STATUSES,
                 'protocol.FENCED among the RESERVE statuses')
        self.busy_statuses.append(protocol.FENCED)
        from seckill.sale import Sale
        _require(hasattr(Sale, 'unfence'), 'Sale.unfence()')
        _require('fence' in inspect.signature(Sale.init).parameters, "Sale.init(..., fence=True)")

    def create_sale(self, store: Any, r: Any, cfg: Any) -> None:
        reconciler.create_sale(store, r, cfg)
        if self.mode == HARDENED:
            info = reconciler.Sale(r, cfg.key).info()
            _require(info is not None and info.get('fence') == 'clear',
                     'create_sale making FENCE sales (INFO has no fence: clear)')

    def worker_kwargs(self) -> Dict[str, Any]:
        """What the Worker needs on top of the baseline's arguments."""
        return {}

    def pay(self, store: Any, sale: Any, rid: str, ref: str) -> payment.PayResult:
        return payment.pay(store, sale, rid, ref)

    def reconcile(self, store: Any, sale: Any, apply: bool) -> reconciler.Outcome:
        return reconciler.reconcile(store, sale, apply=apply)
