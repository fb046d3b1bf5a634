"""Python client for the redis-seckill module.

- `Sale`: one sale key with typed results (seckill.sale, over the plain
  protocol functions in seckill.protocol).
- `SplitSale`: one sale over the masters of a Redis Cluster (seckill.split,
  docs/cluster.md).
- `seckill.aio`: Sale and SplitSale for redis.asyncio.
- draw sales (docs/draw-sales.md): `Sale.enter/draw/draw_all/entrants/
  commitment/verify_draw`, `SplitSale.draw/commitments/verify_draw`, the
  plain functions (digest, draw seed, Fisher-Yates order, verify) in
  seckill.draw.
- `SoldOutCache`: the local sold-out flag (seckill.soldout; `Sale(...,
  local_soldout=True)`), docs/soldout.md.
- `seckill.pipeline`: the reference order pipeline: order store (SQLite or
  PostgreSQL), stream worker, payment, reconciler, rebuild.
- `Durability` (seckill.durability): the WAIT gate of pay, the worker, the
  reconciler and `Sale.reserve(..., wait=...)`; `seckill.connect.connect(url)`:
  redis:// and redis+sentinel:// URLs.
- `python -m seckill worker|pay|reconcile|rebuild|init|demo|verify-draw`: the CLI.
"""

from .plain.draw import Drawn, Entered, Entrant, Verdict
from .plain.durability import Durability
from .plain.protocol import (ALREADY_CONFIRMED, ALREADY_RELEASED, CONFIRMED, DRAW, DUPLICATE, ENDED,
                             FENCED, LIMIT, NO_SALE, NOT_FOUND, NOT_STARTED, RELEASED, RESERVED, SOLD_OUT,
                             Event, ProtocolError, ReconcileResult, Reserved, SaleMissing, Settled)
from .plain.soldout import SoldOutCache
from .plain.split_audit import RecoverError
from .plain.split_protocol import StaleRound
from .sale import Sale
from .split import OrphanKeys, SplitSale

__all__ = ['Sale', 'SaleMissing', 'Reserved', 'Settled', 'ReconcileResult', 'ProtocolError',
           'Event', 'RESERVED', 'DUPLICATE', 'NO_SALE', 'NOT_STARTED', 'ENDED', 'LIMIT',
           'SOLD_OUT', 'RELEASED', 'ALREADY_RELEASED', 'CONFIRMED', 'ALREADY_CONFIRMED',
           'NOT_FOUND', 'DRAW', 'Entered', 'Drawn', 'Entrant', 'Verdict', 'SplitSale', 'StaleRound',
           'OrphanKeys', 'RecoverError', 'SoldOutCache', 'FENCED', 'Durability']
__version__ = '1.4.0'
