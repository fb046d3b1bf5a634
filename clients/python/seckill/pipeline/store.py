"""The order store: the ledger, on a real database.

SQLite (stdlib sqlite3, one file) is the default; PostgreSQL through
psycopg 3 is the production option. One schema for both:

    seckill_orders   reservation_id PRIMARY KEY (so UNIQUE), sale_key,
                     user_id, qty, state UNPAID -> PAID | CANCELLED,
                     reserved_ms, deadline_ms, payment_ref, paid_ref, ...
    seckill_sales    the sale's INIT parameters (what `rebuild` needs)

Every transition is a guarded UPDATE (`... WHERE state = 'UNPAID'`) or an
upsert that changes nothing twice, so a replayed stream entry, a retried
payment or a repeated reconcile is harmless. PAID and CANCELLED are final.

A store is shared by threads: each thread gets its own connection. A lost
connection (PostgreSQL restarted, SQLite locked past its busy timeout) is
raised as StoreUnavailable and reopened on the next call.
"""

from __future__ import annotations

import contextlib
import sqlite3
import threading
import time
from dataclasses import dataclass, fields
from typing import Any, Dict, Iterable, Iterator, List, Optional, Tuple
from urllib.parse import parse_qs

from ..plain.protocol import Event

UNPAID, PAID, CANCELLED = 'UNPAID', 'PAID', 'CANCELLED'
STATES = (UNPAID, PAID, CANCELLED)

SCHEMA = (
    """CREATE TABLE IF NOT EXISTS seckill_sales (
        sale_key      TEXT PRIMARY KEY,
        stream_key    TEXT,
        total         BIGINT NOT NULL,
        shards        INTEGER,
        limit_qty     BIGINT,
        hold_ms       BIGINT,
        start_ms      BIGINT,
        end_ms        BIGINT,
        expires_at_ms BIGINT,
        maxlen        BIGINT,
        created_ms    BIGINT NOT NULL
    )""",
    """CREATE TABLE IF NOT EXISTS seckill_orders (
        reservation_id TEXT PRIMARY KEY,
        sale_key       TEXT NOT NULL,
        user_id        TEXT NOT NULL,
        qty            BIGINT NOT NULL CHECK (qty > 0),
        state          TEXT NOT NULL CHECK (state IN ('UNPAID', 'PAID', 'CANCELLED')),
        reserved_ms    BIGINT,
        deadline_ms    BIGINT,
        payment_ref    TEXT,
        paid_ref       TEXT,
        cancel_reason  TEXT,
        created_ms     BIGINT NOT NULL,
        updated_ms     BIGINT NOT NULL
    )""",
    "CREATE INDEX IF NOT EXISTS seckill_orders_sale_state ON seckill_orders (sale_key, state)",
)

_ORDER_COLUMNS = ('reservation_id, sale_key, user_id, qty, state, reserved_ms, deadline_ms, '
                  'payment_ref, paid_ref, cancel_reason')


class StoreUnavailable(RuntimeError):
    """The database cannot be reached or is locked: retry later."""


def now_ms() -> int:
    return int(time.time() * 1000)


@dataclass(frozen=True)
class Order:
    rid: str
    sale: str
    user: str
    qty: int
    state: str
    reserved_ms: Optional[int] = None
    deadline_ms: Optional[int] = None
    payment_ref: Optional[str] = None
    paid_ref: Optional[str] = None
    cancel_reason: Optional[str] = None

    def row(self) -> Tuple[str, str, int]:
        """(rid, user, qty): the form RECONCILE ORDERS takes."""
        return (self.rid, self.user, self.qty)


@dataclass(frozen=True)
class SaleConfig:
    """A sale's INIT parameters, kept in the database so that `rebuild` can
    recreate the sale from the database alone. `expires_at_ms` is the key's
    absolute expiry (INIT takes a relative TTL)."""
    key: str
    total: int
    stream: Optional[str] = None
    shards: Optional[int] = None
    limit: Optional[int] = None
    hold_ms: Optional[int] = None
    start_ms: Optional[int] = None
    end_ms: Optional[int] = None
    expires_at_ms: Optional[int] = None
    maxlen: Optional[int] = None
    created_ms: int = 0

    def init_kwargs(self, at_ms: int) -> Dict[str, Any]:
        """Sale.init keyword arguments, the TTL counted from `at_ms`."""
        ttl = None
        if self.expires_at_ms is not None:
            ttl = max(1, -(-(self.expires_at_ms - at_ms) // 1000))
        return dict(shards=self.shards, limit=self.limit, hold_ms=self.hold_ms,
                    start_ms=self.start_ms, end_ms=self.end_ms, ttl_s=ttl,
                    stream=self.stream, maxlen=self.maxlen)


@dataclass
class ApplyStats:
    """What one batch of stream events did to the ledger."""
    inserted: int = 0
    replayed: int = 0
    cancelled: int = 0
    paid: int = 0
    unchanged: int = 0
    collisions: int = 0

    def add(self, other: 'ApplyStats') -> None:
        for f in fields(self):
            setattr(self, f.name, getattr(self, f.name) + getattr(other, f.name))


def open_store(url: str, **kw: Any) -> 'Store':
    """`sqlite:///abs/path.db`, `sqlite:relative.db` (query `?timeout=s`:
    the busy timeout), a path ending in .db / .sqlite, or a PostgreSQL URL
    `postgresql://user@host:port/dbname`."""
    if url.startswith(('postgresql://', 'postgres://')) or url.startswith('host=') \
            or url.startswith('dbname='):
        return PostgresStore(url, **kw)
    if url.startswith('sqlite:'):
        path, _, query = url[len('sqlite:'):].partition('?')
        if path.startswith('//'):
            path = path[2:]  # sqlite:///abs/path -> /abs/path
        q = parse_qs(query)
        if 'timeout' in q:
            kw.setdefault('timeout', float(q['timeout'][0]))
        return SQLiteStore(path, **kw)
    if url.endswith(('.db', '.sqlite', '.sqlite3')) or url == ':memory:':
        return SQLiteStore(url, **kw)
    raise ValueError('not a database URL: %r (sqlite:///path.db or postgresql://...)' % url)


class Store:
    """The ledger operations, in SQL both databases run. Subclasses provide
    connections, the placeholder style and which errors mean 'unavailable'."""

    kind = 'sql'
    placeholder = '?'

    def __init__(self) -> None:
        self._local = threading.local()
        self._all_conns: List[Any] = []
        self._lock = threading.Lock()

    # -- connections -------------------------------------------------
    def _connect(self) -> Any:
        raise NotImplementedError

    def _unavailable(self, exc: BaseException) -> bool:
        raise NotImplementedError

    def _begin(self, conn: Any, write: bool) -> None:
        raise NotImplementedError

    def _conn(self) -> Any:
        conn = getattr(self._local, 'conn', None)
        if conn is None:
            try:
                conn = self._connect()
            except Exception as exc:
                if self._unavailable(exc):
                    raise StoreUnavailable(str(exc)) from exc
                raise
            self._local.conn = conn
            with self._lock:
                self._all_conns.append(conn)
        return conn

    def _drop(self) -> None:
        conn = getattr(self._local, 'conn', None)
        self._local.conn = None
        if conn is not None:
            with self._lock:
                if conn in self._all_conns:
                    self._all_conns.remove(conn)
            with contextlib.suppress(Exception):
                conn.close()

    def reset(self) -> None:
        """Drops this thread's connection: the next call opens a new one
        (after a database restart, instead of failing once)."""
        self._drop()

    def close(self) -> None:
        with self._lock:
            conns, self._all_conns = self._all_conns, []
        for conn in conns:
            with contextlib.suppress(Exception):
                conn.close()
        self._local = threading.local()

    def _sql(self, sql: str) -> str:
        return sql if self.placeholder == '?' else sql.replace('?', self.placeholder)

    @contextlib.contextmanager
    def tx(self, write: bool = True) -> Iterator['_Tx']:
        """One transaction: committed when the block ends, rolled back on an
        exception. Unavailability is raised as StoreUnavailable. A read-only
        one (write=False) does not take SQLite's write lock."""
        conn = self._conn()
        try:
            self._begin(conn, write)
            t = _Tx(self, conn.cursor())
            yield t
            conn.execute('COMMIT') if self.kind == 'sqlite' else conn.commit()
        except BaseException as exc:
            with contextlib.suppress(Exception):
                conn.rollback() if self.kind != 'sqlite' else conn.execute('ROLLBACK')
            if isinstance(exc, Exception) and self._unavailable(exc):
                self._drop()
                raise StoreUnavailable(str(exc)) from exc
            raise

    def ping(self) -> None:
        with self.tx(write=False) as t:
            t.one('SELECT 1')

    # -- schema and sales ---------------------------------------------
    def create_schema(self) -> None:
        """CREATE ... IF NOT EXISTS, so any process may call it at start."""
        with self.tx() as t:
            if self.kind == 'postgres':
                # Concurrent CREATE TABLE IF NOT EXISTS can collide in PostgreSQL's
                # catalog: workers starting together take turns.
                t.run('SELECT pg_advisory_xact_lock(74310)')
            for stmt in SCHEMA:
                t.run(stmt)

    def save_sale(self, cfg: SaleConfig) -> None:
        """Stores (or replaces) a sale's parameters."""
        with self.tx() as t:
            t.run('DELETE FROM seckill_sales WHERE sale_key = ?', (cfg.key,))
            t.run('INSERT INTO seckill_sales (sale_key, stream_key, total, shards, limit_qty, '
                  'hold_ms, start_ms, end_ms, expires_at_ms, maxlen, created_ms) '
                  'VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)',
                  (cfg.key, cfg.stream, cfg.total, cfg.shards, cfg.limit, cfg.hold_ms,
                   cfg.start_ms, cfg.end_ms, cfg.expires_at_ms, cfg.maxlen,
                   cfg.created_ms or now_ms()))

    def load_sale(self, key: str) -> Optional[SaleConfig]:
        with self.tx(write=False) as t:
            row = t.one('SELECT sale_key, total, stream_key, shards, limit_qty, hold_ms, start_ms, '
                        'end_ms, expires_at_ms, maxlen, created_ms FROM seckill_sales '
                        'WHERE sale_key = ?', (key,))
        return SaleConfig(*row) if row else None

    def sales(self) -> List[SaleConfig]:
        with self.tx(write=False) as t:
            rows = t.all('SELECT sale_key, total, stream_key, shards, limit_qty, hold_ms, start_ms, '
                         'end_ms, expires_at_ms, maxlen, created_ms FROM seckill_sales '
                         'ORDER BY sale_key')
        return [SaleConfig(*r) for r in rows]

    # -- the worker's writes --------------------------------------------
    def apply_events(self, sale: SaleConfig, events: Iterable[Event]) -> ApplyStats:
        """Writes a batch of stream events in ONE transaction (the worker
        acknowledges the entries only after it commits):

        - reserved: insert the order UNPAID; a row that exists is a replay.
        - released / expired: the order becomes CANCELLED if it is UNPAID;
          a row that does not exist yet (another worker holds the
          `reserved` entry) is inserted CANCELLED, so the later insert is a
          no-op: the outcome does not depend on which worker runs first.
        - confirmed: PAID only if a payment was started for it (payment_ref
          set) and it is still UNPAID: that closes a `pay` that crashed
          between CONFIRM and its own write. A CONFIRM nobody paid for
          (an operator's redis-cli) marks nothing.
        """
        stats = ApplyStats()
        with self.tx() as t:
            for ev in events:
                stats.add(t.apply_event(sale, ev))
        return stats

    # -- payment's writes ------------------------------------------------
    def order(self, rid: str) -> Optional[Order]:
        with self.tx(write=False) as t:
            return t.order(rid)

    def start_payment(self, rid: str, ref: str) -> Optional[Order]:
        """Records that a payment started (money authorized, not captured):
        the first ref is kept. Returns the order as it now stands."""
        with self.tx() as t:
            t.run('UPDATE seckill_orders SET payment_ref = COALESCE(payment_ref, ?), updated_ms = ? '
                  "WHERE reservation_id = ? AND state = 'UNPAID'", (ref, now_ms(), rid))
            return t.order(rid)

    def mark_paid(self, rid: str, ref: Optional[str] = None) -> bool:
        """UNPAID -> PAID (capture `ref`, default the started payment's)."""
        with self.tx() as t:
            return t.run('UPDATE seckill_orders SET state = \'PAID\', '
                         'paid_ref = COALESCE(?, payment_ref), updated_ms = ? '
                         "WHERE reservation_id = ? AND state = 'UNPAID'",
                         (ref, now_ms(), rid)) == 1

    def cancel(self, rid: str, reason: str) -> bool:
        """UNPAID -> CANCELLED."""
        with self.tx() as t:
            return t.run("UPDATE seckill_orders SET state = 'CANCELLED', cancel_reason = ?, "
                         "updated_ms = ? WHERE reservation_id = ? AND state = 'UNPAID'",
                         (reason, now_ms(), rid)) == 1

    def set_deadline(self, rid: str, deadline_ms: Optional[int]) -> bool:
        with self.tx() as t:
            return t.run("UPDATE seckill_orders SET deadline_ms = ?, updated_ms = ? "
                         "WHERE reservation_id = ? AND state = 'UNPAID'",
                         (deadline_ms, now_ms(), rid)) == 1

    # -- reads ------------------------------------------------------------
    def orders(self, sale_key: str, state: Optional[str] = None) -> List[Order]:
        with self.tx(write=False) as t:
            if state is None:
                rows = t.all('SELECT %s FROM seckill_orders WHERE sale_key = ? '
                             'ORDER BY reserved_ms, reservation_id' % _ORDER_COLUMNS, (sale_key,))
            else:
                rows = t.all('SELECT %s FROM seckill_orders WHERE sale_key = ? AND state = ? '
                             'ORDER BY reserved_ms, reservation_id' % _ORDER_COLUMNS,
                             (sale_key, state))
        return [Order(*r) for r in rows]

    def summary(self, sale_key: str) -> Dict[str, Dict[str, int]]:
        """{state: {'orders': n, 'units': qty}} for every state."""
        out = {s: {'orders': 0, 'units': 0} for s in STATES}
        with self.tx(write=False) as t:
            for state, n, units in t.all('SELECT state, COUNT(*), COALESCE(SUM(qty), 0) '
                                         'FROM seckill_orders WHERE sale_key = ? GROUP BY state',
                                         (sale_key,)):
                out[state] = {'orders': int(n), 'units': int(units)}
        return out


class _Tx:
    """A cursor inside Store.tx()."""

    def __init__(self, store: Store, cur: Any):
        self.store = store
        self.cur = cur

    def run(self, sql: str, params: Tuple = ()) -> int:
        self.cur.execute(self.store._sql(sql), params)
        return self.cur.rowcount

    def one(self, sql: str, params: Tuple = ()) -> Optional[Tuple]:
        self.cur.execute(self.store._sql(sql), params)
        return self.cur.fetchone()

    def all(self, sql: str, params: Tuple = ()) -> List[Tuple]:
        self.cur.execute(self.store._sql(sql), params)
        return self.cur.fetchall()

    def order(self, rid: str) -> Optional[Order]:
        row = self.one('SELECT %s FROM seckill_orders WHERE reservation_id = ?' % _ORDER_COLUMNS,
                       (rid,))
        return Order(*row) if row else None

    def apply_event(self, sale: SaleConfig, ev: Event) -> ApplyStats:
        st = ApplyStats()
        now = now_ms()
        if ev.event == 'reserved':
            deadline = ev.ms + sale.hold_ms if sale.hold_ms else None
            n = self.run('INSERT INTO seckill_orders (reservation_id, sale_key, user_id, qty, state, '
                         'reserved_ms, deadline_ms, created_ms, updated_ms) '
                         "VALUES (?, ?, ?, ?, 'UNPAID', ?, ?, ?, ?) "
                         'ON CONFLICT (reservation_id) DO NOTHING',
                         (ev.rid, sale.key, ev.user, ev.qty, ev.ms, deadline, now, now))
            if n == 1:
                st.inserted += 1
            else:
                have = self.order(ev.rid)
                if have is not None and (have.sale, have.user, have.qty) != (sale.key, ev.user, ev.qty):
                    st.collisions += 1  # an id reused for another reservation: see README
                else:
                    st.replayed += 1
        elif ev.event in ('released', 'expired'):
            n = self.run('INSERT INTO seckill_orders (reservation_id, sale_key, user_id, qty, state, '
                         'reserved_ms, cancel_reason, created_ms, updated_ms) '
                         "VALUES (?, ?, ?, ?, 'CANCELLED', NULL, ?, ?, ?) "
                         'ON CONFLICT (reservation_id) DO UPDATE SET state = excluded.state, '
                         'cancel_reason = excluded.cancel_reason, updated_ms = excluded.updated_ms '
                         "WHERE seckill_orders.state = 'UNPAID'",
                         (ev.rid, sale.key, ev.user, ev.qty, ev.event, now, now))
            if n == 1:
                st.cancelled += 1
            else:
                st.unchanged += 1
        elif ev.event == 'confirmed':
            n = self.run("UPDATE seckill_orders SET state = 'PAID', paid_ref = payment_ref, "
                         'updated_ms = ? WHERE reservation_id = ? '
                         "AND state = 'UNPAID' AND payment_ref IS NOT NULL", (now, ev.rid))
            if n == 1:
                st.paid += 1
            else:
                st.unchanged += 1
        return st


class SQLiteStore(Store):
    """One SQLite file in WAL mode; `timeout` is the busy timeout (seconds):
    a writer that waits longer gets StoreUnavailable."""

    kind = 'sqlite'
    placeholder = '?'

    def __init__(self, path: str, timeout: float = 5.0):
        super().__init__()
        self.path = path
        self.timeout = timeout
        self.url = ('sqlite://' if path.startswith('/') else 'sqlite:') + path
        if timeout != 5.0:
            self.url += '?timeout=%g' % timeout

    def __repr__(self) -> str:
        return 'SQLiteStore(%r)' % self.path

    def _connect(self) -> Any:
        conn = sqlite3.connect(self.path, timeout=self.timeout, isolation_level=None,
                               check_same_thread=False)
        conn.execute('PRAGMA journal_mode=WAL')
        conn.execute('PRAGMA synchronous=FULL')
        return conn

    def _begin(self, conn: Any, write: bool) -> None:
        conn.execute('BEGIN IMMEDIATE' if write else 'BEGIN')

    def _unavailable(self, exc: BaseException) -> bool:
        return isinstance(exc, sqlite3.OperationalError)


class PostgresStore(Store):
    """PostgreSQL through psycopg 3 (READ COMMITTED; the guarded statements
    need nothing stronger)."""

    kind = 'postgres'
    placeholder = '%s'

    def __init__(self, url: str, connect_timeout: int = 3):
        super().__init__()
        import psycopg  # optional dependency: pip install 'seckill[postgres]'
        self._psycopg = psycopg
        self.url = url
        self.connect_timeout = connect_timeout

    def __repr__(self) -> str:
        return 'PostgresStore(%r)' % self.url

    def _connect(self) -> Any:
        return self._psycopg.connect(self.url, connect_timeout=self.connect_timeout)

    def _begin(self, conn: Any, write: bool) -> None:
        pass  # psycopg opens a transaction with the first statement

    def _unavailable(self, exc: BaseException) -> bool:
        return isinstance(exc, (self._psycopg.OperationalError, self._psycopg.InterfaceError))
