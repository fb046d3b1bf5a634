"""One split sale's client logic, composed of its concerns, every
operation a generator of seckill.plain.steps steps: the sync `SplitSale`
(seckill.split) and the async one (seckill.aio) each hold a SplitCore and
only execute its steps, so the decisions exist once.

- state.SplitState: the layout as read, the pool's figures, counters
- topology.Topology: the layout, create, recover
- transfers.Transfers: SEND / WAIT / RECV, refill, borrow
- audit.Auditor: the audit, info, repair
- reserve.Reserver: RESERVE, the low-water refill, the slow path
- reconcile.Reconciler: the per-part RECONCILE fan-out
- draw.Drawer: a draw sale's ENTER, the rebalance and DRAW, the verification
"""

from __future__ import annotations

from collections import Counter
from typing import Any, Callable, Iterable, List, Optional

from ..drivers.soldout import resolve
from ..ops import sale as ops
from ..plain import protocol as p
from ..plain.steps import Refresh, Steps
from .audit import Auditor
from .draw import Drawer
from .reconcile import Reconciler
from .reserve import Reserver
from .state import SplitState
from .topology import Topology
from .transfers import Transfers


class SplitCore:
    """The concerns of one split-sale client object, wired together."""

    def __init__(self, name: str, wait_ms: int = 1000, soldout: Any = None):
        self.state = SplitState(name, wait_ms, soldout)
        self.topology = Topology(self.state)
        self.transfers = Transfers(self.state)
        self.auditor = Auditor(self.state, self.topology, self.transfers)
        self.reserver = Reserver(self.state, self.topology, self.transfers, self.auditor)
        self.reconciler = Reconciler(self.state, self.topology, self.transfers, self.auditor)
        self.drawer = Drawer(self.state, self.topology, self.transfers, self.auditor)

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
        home = yield from self._home(user)
        token = self.state.flag_token()
        res = yield from ops.release(home, rid)
        if res.remaining > 0:          # a RELEASE that returned stock, or stock left
            self.state.in_stock(token)
        return res.status

    def confirm(self, user: str, rid: str) -> Steps:
        home = yield from self._home(user)
        token = self.state.flag_token()
        res = yield from ops.confirm(home, rid)
        if res.remaining > 0:
            self.state.in_stock(token)
        return res.status

    def get(self, user: str, rid: str) -> Steps:
        return (yield from ops.get((yield from self._home(user)), rid))

    def info(self) -> Steps:
        return self.auditor.info()

    def repair(self) -> Steps:
        return self.auditor.repair()

    def reconcile(self, orders: Iterable[Any], apply: bool = False,
                  chunk_size: int = p.DEFAULT_CHUNK) -> Steps:
        return self.reconciler.reconcile(list(orders), apply, chunk_size)

    def enter(self, user: Any, qty: int = 1, reqid: Optional[str] = None) -> Steps:
        return self.drawer.enter(user, qty, reqid)

    def draw(self, count: int, beacon_value: Any = None) -> Steps:
        return self.drawer.draw(count, beacon_value)

    def verify_draw(self, commitments: Any = None, beacon: Any = None,
                    beacon_value: Any = None) -> Steps:
        return self.drawer.verify(commitments, beacon, beacon_value)

    def commitments(self) -> Steps:
        return self.drawer.commitments()

    def entrants_page(self, part: int, cursor: Any, count: int) -> Steps:
        return self.drawer.entrants_page(part, cursor, count)


class SplitSaleBase:
    """What the sync and async SplitSale share: the core, the driver that
    runs its steps (`_driver_class`), and the object's figures."""

    _driver_class: Any = None

    def __init__(self, client: Any, name: str, *, wait_ms: int = 1000,
                 local_soldout: Any = False, backend: Any = None):
        self.r = client
        self.soldout = resolve(client, local_soldout)
        """The SoldOutCache holding this sale's local flag (None: no flag)."""
        self.core = SplitCore(name, wait_ms=wait_ms, soldout=self.soldout)
        self._driver = self._driver_class(client, backend)
        self._run = self._driver.run
        self._watched: Any = None

    def _unwatched_keys(self) -> List[str]:
        """The keys of a layout read since the last call that the wiring has
        not subscribed yet (none without a local flag)."""
        lay = self.core.state.layout
        if self.soldout is None or lay is None or lay is self._watched:
            return []
        self._watched = lay
        return list(lay.keys)

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
