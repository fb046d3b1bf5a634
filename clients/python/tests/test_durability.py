"""The WAIT gate on real servers: a master with two real replicas
(redis-server --replicaof). With the replicas stopped (SIGSTOP: connected,
silent) pay() answers RETRY and the worker commits nothing; a split brain
(the old master keeps running after its replica was promoted) captures
no payment and commits no order through the old master; a FENCE sale on
the promoted master refuses to sell until the reconciler applied the
ledger (where the build has the fence)."""

import contextlib
import signal

import pytest

from conftest import KEY, fence_supported, make_sale, start_redis
from seckill import Sale
from seckill.durability import Durability
from seckill.pipeline.payment import pay
from seckill.pipeline.reconciler import reconcile
from seckill.pipeline.worker import NotReplicated, Worker
from seckill.testing import RedisServer

pytestmark = pytest.mark.both_backends   # the module and the Functions library (conftest)

SHORT = Durability(timeout_ms=200)     # where the gate must fall short: it waits this long
HEALTHY = Durability(timeout_ms=5000)  # where it must pass: it returns as soon as acked


def replica_of(master, backend, module_path):
    """A replica (the library reaches it from its master)."""
    kw = {'module': module_path} if backend == 'module' else {'load_module': False}
    srv = RedisServer(replicaof=master, **kw).start()
    srv.wait_synced()
    return srv


@pytest.fixture
def trio(backend, request):
    """(master, [replica, replica]), the replicas synced."""
    master = start_redis(backend, request)
    path = request.getfixturevalue('module') if backend == 'module' else None
    replicas = []
    try:
        replicas = [replica_of(master, backend, path) for _ in range(2)]
        master.wait_replicas(2)
        yield master, replicas
    finally:
        for s in [master, *replicas]:
            if s.proc is not None and s.alive():
                s.proc.send_signal(signal.SIGCONT)
            s.stop()


@contextlib.contextmanager
def stopped(servers):
    """SIGSTOP: the replicas stay connected (the master reports them online)
    but acknowledge nothing; SIGCONT at the end."""
    for s in servers:
        s.proc.send_signal(signal.SIGSTOP)
    try:
        yield
    finally:
        for s in servers:
            s.proc.send_signal(signal.SIGCONT)


def orders(store):
    return {o.rid: o.state for o in store.orders(KEY)}


def test_gate_on_two_replicas(db, trio):
    master, replicas = trio
    r = master.client()
    store = db.store()
    cfg = make_sale(store, r, total=10, hold_ms=60_000)
    sale = Sale(r, KEY)
    res = sale.reserve('u0', reqid='o0', wait=True)
    assert (res.status, res.rid, res.remaining, res.replicated) == ('RESERVED', 'o0', 9, True)
    assert sale.reserve('u1', reqid='o1').replicated is None      # no option: no WAIT
    assert sale.wait().need == 2                                     # auto: both replicas
    w = Worker(r, store, [cfg], consumer='w', durability=HEALTHY)
    w.drain()
    assert orders(store) == {'o0': 'UNPAID', 'o1': 'UNPAID'}
    assert pay(store, sale, 'o0', 'p0', durability=HEALTHY).outcome == 'PAID'
    for rep in replicas:     # what was captured is on both replicas
        assert Sale(rep.client(), KEY).get('o0')['state'] == 'confirmed'

    with stopped(replicas):
        assert sale.reserve('u2', reqid='o2', wait=SHORT).replicated is False
        w.durability = SHORT
        with pytest.raises(NotReplicated):
            w.step()
        assert 'o2' not in orders(store)                 # nothing committed, nothing acked
        out = pay(store, sale, 'o1', 'p1', durability=SHORT)
        assert (out.outcome, out.reason) == ('RETRY', 'not_replicated')
        assert store.order('o1').state == 'UNPAID'       # nothing captured
    # the replicas are back: the same entries and the same payment go through
    assert pay(store, sale, 'o1', 'p1', durability=HEALTHY).outcome == 'PAID'
    w.durability = HEALTHY
    w._own_pending = True
    w.drain()
    assert orders(store) == {'o0': 'PAID', 'o1': 'PAID', 'o2': 'UNPAID'}
    r.close()


def test_split_brain_old_master_captures_nothing(db, trio):
    master, (promoted, other) = trio
    old = master.client()
    store = db.store()
    cfg = make_sale(store, old, total=10, hold_ms=60_000)
    sale = Sale(old, KEY)
    assert sale.reserve('u0', reqid='o0').ok and sale.reserve('u1', reqid='o1').ok
    w = Worker(old, store, [cfg], consumer='w', durability=HEALTHY)
    w.drain()                                     # the gate saw the replicas: sticky
    w.durability = SHORT
    assert orders(store) == {'o0': 'UNPAID', 'o1': 'UNPAID'}

    # The replica is promoted, the other follows it; the old master runs on.
    new = promoted.client()
    new.execute_command('REPLICAOF', 'NO', 'ONE')
    other.client().execute_command('REPLICAOF', '127.0.0.1', promoted.port)
    other.wait_synced()
    assert old.info('replication')['connected_slaves'] == 0

    # Buyers and payments still reaching the old master: nothing decided there.
    assert sale.reserve('u2', reqid='o2').status == 'RESERVED'   # the old master sells...
    with pytest.raises(NotReplicated):
        w.step()                                  # ...but no order is committed
    out = pay(store, sale, 'o0', 'p0', durability=SHORT)
    assert (out.outcome, out.reason) == ('RETRY', 'not_replicated')
    assert orders(store) == {'o0': 'UNPAID', 'o1': 'UNPAID'}       # nothing PAID, no o2

    # On the promoted master a FENCE sale waits for the ledger.
    nsale = Sale(new, KEY)
    if fence_supported(new):
        assert nsale.reserve('u3', reqid='o3').status == 'FENCED'
        fixed = reconcile(store, nsale, apply=True, durability=HEALTHY)
        assert fixed.unfence == 'UNFENCED'
        assert any('fence lifted' in line for line in fixed.lines())
    assert nsale.reserve('u3', reqid='o3').status == 'RESERVED'
    assert pay(store, nsale, 'o0', 'p0', durability=HEALTHY).outcome == 'PAID'
    # o2 was sold by the old master alone: lost with it, the buyer's money voided
    lost = pay(store, nsale, 'o2', 'p2', durability=SHORT)
    assert (lost.outcome, lost.reason) == ('REFUND', 'lost') and store.order('o2') is None
    for c in (old, new):
        c.close()


@pytest.mark.asyncio
async def test_aio_reserve_and_confirm_wait(trio):
    import redis.asyncio as aioredis
    from seckill.aio import Sale as AioSale
    master, replicas = trio
    c = aioredis.Redis(port=master.port, decode_responses=True)
    try:
        sale = AioSale(c, KEY)
        await sale.init(5, hold_ms=60_000)
        res = await sale.reserve('u0', reqid='o0', wait=HEALTHY)
        assert (res.status, res.replicated) == ('RESERVED', True)
        assert (await sale.reserve('u1', reqid='o1')).replicated is None
        with stopped(replicas):
            assert (await sale.confirm('o0', wait=SHORT)).replicated is False
            assert not (await sale.wait(SHORT)).ok
        again = await sale.confirm('o0', wait=HEALTHY)   # ALREADY_CONFIRMED propagates nothing:
        assert (again.status, again.replicated) == ('ALREADY_CONFIRMED', True)  # the SET does
        assert (await sale.wait()).need == 2
    finally:
        await c.aclose()
