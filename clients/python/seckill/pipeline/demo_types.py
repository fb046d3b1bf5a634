"""What the demo is asked to do (DemoConfig) and what it counts as it goes
(Tally): shared by the demo's run and its report."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Tuple


@dataclass
class DemoConfig:
    db: str = 'sqlite'
    buyers: int = 5000
    stock: int = 200
    hold_ms: int = 6000
    duration_s: float = 30.0
    workers: int = 2
    out: str = 'demo-out'
    seed: int = 1
    progress: bool = True
    pay_ratio: float = 0.78     # pay in time
    late_ratio: float = 0.10    # pay around the end of the hold: races the expiry
    cancel_ratio: float = 0.04  # give the order up (RELEASE)
    # the rest never pay: their holds run out
    double_pay_ratio: float = 0.05  # a second, different payment of a paid order
    buyer_threads: int = 16
    pay_threads: int = 4
    redis: Optional[str] = None  # a deployment's URL (redis+sentinel:// too); None: start one
    worker_metrics_ports: Tuple[int, ...] = ()  # worker i serves its metrics on the i-th (make monitor)


@dataclass
class Tally:
    lock: threading.Lock = field(default_factory=threading.Lock)
    attempts: int = 0
    reserved: Dict[str, str] = field(default_factory=dict)  # rid -> user
    sold_out: int = 0
    limit: int = 0
    retries: int = 0
    payments: Dict[Tuple[str, str], Tuple[str, str]] = field(default_factory=dict)  # (rid, ref) -> (outcome, reason)
    attempted: set = field(default_factory=set)  # (rid, ref)
    pay_calls: int = 0
    pay_retries: int = 0
    late: int = 0
    cancels: int = 0
    cancel_too_late: int = 0
    events: List[Tuple[float, str]] = field(default_factory=list)
