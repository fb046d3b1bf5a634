"""One split sale's client logic, composed of its concerns, every
operation a generator of seckill._io steps: the sync `SplitSale`
(seckill.split) and the async one (seckill.aio) each hold a SplitCore and
only execute its steps, so the decisions exist once.

- state.SplitState: the layout as read, the pool's figures, counters
- topology.Topology: the layout, create, recover
- transfers.Transfers: SEND / WAIT / RECV, refill, borrow
- audit.Auditor: the audit, info, repair
- reserve.Reserver: RESERVE, the low-water refill, the slow path
- reconcile.Reconciler: the per-part RECONCILE fan-out
"""

from __future__ import annotations

from collections import Counter
from typing import Any, Callable, Iterable, Optional

from .. import _ops
from .. import protocol as p
from .._io import Refresh, Steps
from .audit import Auditor
from .reconcile import Reconciler
from .reserve import Reserver
from .state import SplitState
from .topology import Topology
from .transfers import Transfers


class SplitCore:
    """The concerns of one split-sale client object, wired together."""

    def __init__(self, name: str, wait_ms: int = 1000):
        self.state = SplitState(name, wait_ms)
        self.topology = Topology(self.state)
        self.transfers = Transfers(self.state)
        self.auditor = Auditor(self.state, self.topology, self.transfers)
        self.reserver = Reserver(self.state, self.topology, self.transfers, self.auditor)
        self.reconciler = Reconciler(self.state, self.topology, self.transfers, self.auditor)

    def layout(self) -> Steps:
        return self.topology.layout()

    def refresh(self) -> Steps:
        yield Refresh(replicas=True)
        self.state.forget_pool()

    def create(self, total: int, **kw: Any) -> Steps:
        return self.topology.create(total, **kw)

    def recover(self, **kw: Any) -> Steps:
        return self.topology.recover(**kw)

    def streams(self) -> Steps:
        return self.topology.streams()

    def reserve(self, user: str, qty: int = 1, reqid: Optional[str] = None) -> Steps:
        return self.reserver.reserve(user, qty, reqid)

    def _home(self, user: str) -> Steps:
        return (yield from self.topology.layout()).home(user)

    def release(self, user: str, rid: str) -> Steps:
        return (yield from _ops.release((yield from self._home(user)), rid)).status

    def confirm(self, user: str, rid: str) -> Steps:
        return (yield from _ops.confirm((yield from self._home(user)), rid)).status

    def get(self, user: str, rid: str) -> Steps:
        return (yield from _ops.get((yield from self._home(user)), rid))

    def info(self) -> Steps:
        return self.auditor.info()

    def repair(self) -> Steps:
        return self.auditor.repair()

    def reconcile(self, orders: Iterable[Any], apply: bool = False,
                  chunk_size: int = p.DEFAULT_CHUNK) -> Steps:
        return self.reconciler.reconcile(list(orders), apply, chunk_size)


class SplitSaleBase:
    """What the sync and async SplitSale share: the core, the driver that
    runs its steps (`_driver_class`), and the object's figures."""

    _driver_class: Any = None

    def __init__(self, client: Any, name: str, *, wait_ms: int = 1000):
        self.r = client
        self.core = SplitCore(name, wait_ms=wait_ms)
        self._driver = self._driver_class(client)
        self._run = self._driver.run

    def __repr__(self) -> str:
        return '%s(%r)' % (type(self).__name__, self.name)

    @property
    def name(self) -> str:
        return self.core.state.name

    @property
    def stats(self) -> Counter:
        """Round trips and outcomes (seckill.split.state.SplitState)."""
        return self.core.state.stats

    @property
    def first_empty(self) -> Optional[float]:
        """When a home part first answered SOLD_OUT (time.time())."""
        return self.core.state.first_empty

    @property
    def cluster(self) -> bool:
        return self._driver.cluster

    @property
    def faults(self) -> Callable[[str], None]:
        """Crash points (seckill.faults), for the tests."""
        return self.core.state.faults

    @faults.setter
    def faults(self, faults: Callable[[str], None]) -> None:
        self.core.state.faults = faults


__all__ = ['SplitCore', 'SplitSaleBase']
