"""The reference order pipeline: Redis (the sale) -> stream -> worker ->
order database -> pay or time out -> reconcile.

- store: the order ledger on SQLite or PostgreSQL (open_store)
- worker: stream -> orders, acknowledged after the commit
- payment: pay() and cancel_order()
- reconciler: reconcile(), rebuild(), create_sale()
"""

from .payment import PayResult, cancel_order, pay
from .reconciler import Outcome, create_sale, rebuild, reconcile
from .store import CANCELLED, PAID, UNPAID, Order, SaleConfig, Store, StoreUnavailable, open_store
from .worker import Worker, backlog, ensure_group

__all__ = ['PayResult', 'cancel_order', 'pay', 'Outcome', 'create_sale', 'rebuild', 'reconcile',
           'CANCELLED', 'PAID', 'UNPAID', 'Order', 'SaleConfig', 'Store', 'StoreUnavailable',
           'open_store', 'Worker', 'backlog', 'ensure_group']
