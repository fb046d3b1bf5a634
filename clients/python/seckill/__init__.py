"""Python client for the redis-seckill module.

- `Sale`: one sale key with typed results (seckill.sale, over the plain
  protocol functions in seckill.protocol).
- `seckill.pipeline`: the reference order pipeline: order store (SQLite or
  PostgreSQL), stream worker, payment, reconciler, rebuild.
- `python -m seckill worker|reconcile|rebuild|init|demo`: the CLI.
"""

from .protocol import (ReconcileResult, Reserved, Settled, ProtocolError, Event,
                       RESERVED, DUPLICATE, NO_SALE, NOT_STARTED, ENDED, LIMIT, SOLD_OUT,
                       RELEASED, ALREADY_RELEASED, CONFIRMED, ALREADY_CONFIRMED, NOT_FOUND)
from .sale import Sale, SaleMissing
from .split import OrphanKeys, SplitSale  # noqa: F401  (split sales over a cluster: seckill.split)
from .split_protocol import RecoverError, StaleRound  # noqa: F401

__all__ = ['Sale', 'SaleMissing', 'Reserved', 'Settled', 'ReconcileResult', 'ProtocolError',
           'Event', 'RESERVED', 'DUPLICATE', 'NO_SALE', 'NOT_STARTED', 'ENDED', 'LIMIT',
           'SOLD_OUT', 'RELEASED', 'ALREADY_RELEASED', 'CONFIRMED', 'ALREADY_CONFIRMED',
           'NOT_FOUND', 'SplitSale', 'StaleRound', 'OrphanKeys', 'RecoverError']
__version__ = '0.1.0'
