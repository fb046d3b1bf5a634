"""The parts a split-sale concern that drives whole operations works with
(the reserve paths, the reconcile fan-out): one constructor for both."""

from __future__ import annotations

from .audit import Auditor
from .state import SplitState
from .topology import Topology
from .transfers import Transfers


class Parts:
    """The state, topology, transfers and auditor of one split-sale object."""

    def __init__(self, state: SplitState, topology: Topology, transfers: Transfers,
                 auditor: Auditor):
        self.s = state
        self.topology = topology
        self.transfers = transfers
        self.auditor = auditor
