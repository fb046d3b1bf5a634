"""Crash points: the one fault-injection mechanism of the package.

Code that can be interrupted calls `faults(point)` at each crash point; a
`Faults` object counts the calls per point and fires its action on the nth
(by default it raises Crash, a BaseException nothing on the way catches,
like the process dying). The worker, pay() and SplitSale take one
(`faults=`; SplitSale also as the attribute `faults`); NONE fires nothing.

`SECKILL_FAULT=after_commit:2` makes a CLI process die (os._exit, no
cleanup: what SIGKILL or a power cut leaves) the 2nd time it reaches the
point `after_commit`. Several points: `after_read:1,after_commit:3`. Points:

- worker: `after_read` (entries delivered, nothing written),
  `after_commit` (orders committed, entries not yet acknowledged)
- pay: `pay_after_start` (payment recorded, CONFIRM not sent),
  `pay_after_confirm` (CONFIRM answered, order not yet marked PAID)
- SplitSale: `create_checked` (create() found no orphan keys, nothing INITed
  yet), `after_send` and `after_wait` (a transfer's SEND, and its WAIT,
  answered; RECV not sent), `after_recv` (the transfer complete)

An action may do more than crash: a test that races two creates passes one
that runs the other create at `create_checked`.
"""

from __future__ import annotations

import os
from typing import Callable, Dict, Optional

EXIT_CODE = 99


class Crash(BaseException):
    """Raised by an in-process fault: not an Exception, so nothing on the
    way catches it (like the process dying)."""


def _exit(point: str) -> None:
    os._exit(EXIT_CODE)


def _raise(point: str) -> None:
    raise Crash(point)


class Faults:
    """Fires `action(point)` the nth time `point` is reached, n from
    `points` ({point: n}); every other call does nothing."""

    def __init__(self, points: Optional[Dict[str, int]] = None,
                 action: Optional[Callable[[str], None]] = None):
        self.points = dict(points or {})
        self.seen: Dict[str, int] = {}
        self.action = action or _raise

    @classmethod
    def from_env(cls, var: str = 'SECKILL_FAULT') -> 'Faults':
        return cls(parse(os.environ.get(var, '')), action=_exit)

    def __call__(self, point: str) -> None:
        if point not in self.points:
            return
        self.seen[point] = self.seen.get(point, 0) + 1
        if self.seen[point] == self.points[point]:
            self.action(point)


def parse(spec: str) -> Dict[str, int]:
    """'a:2,b' -> {'a': 2, 'b': 1}"""
    out: Dict[str, int] = {}
    for part in filter(None, (p.strip() for p in spec.split(','))):
        name, _, n = part.partition(':')
        out[name] = int(n) if n else 1
        if out[name] < 1:
            raise ValueError('fault count must be at least 1: %r' % part)
    return out


NONE = Faults()
