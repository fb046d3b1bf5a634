"""Backoff for retries against a database or Redis that is down."""

from __future__ import annotations

import random
from typing import Callable, Iterator, Optional


def delays(base: float = 0.05, cap: float = 2.0, factor: float = 2.0,
           jitter: float = 0.5, rand: Optional[Callable[[], float]] = None) -> Iterator[float]:
    """Exponential backoff: base, base*factor, ... capped at `cap`, each
    scaled by a random factor in [1 - jitter, 1] so that several workers do
    not retry in step. Endless: the caller decides when to give up."""
    if base <= 0 or cap < base or factor < 1 or not 0 <= jitter < 1:
        raise ValueError('bad backoff parameters')
    rand = rand or random.random
    d = base
    while True:
        yield d * (1 - jitter * rand())
        d = min(cap, d * factor)


class Backoff:
    """delays() with a reset after a success."""

    def __init__(self, base: float = 0.05, cap: float = 2.0, factor: float = 2.0,
                 jitter: float = 0.5):
        self.params = (base, cap, factor, jitter)
        self.failures = 0
        self._it = delays(*self.params)

    def next(self) -> float:
        self.failures += 1
        return next(self._it)

    def reset(self) -> None:
        if self.failures:
            self.failures = 0
            self._it = delays(*self.params)
