"""The ACL users of docs/operations.md ("Who may do what") run the
reference client's own code paths with nothing more, on the module and on
the Functions library: the shop reserves and pays, the order worker drains
a stream, the reconciler applies the ledger and lifts a fence, the
sale-driver runs a SplitSale on a plain server; each may PING. The lines
are read from the page, so the page and the test cannot disagree."""

from __future__ import annotations

import os
import re
import shlex

import pytest
import redis

from conftest import KEY, fence_supported, make_sale
from seckill import Sale, SplitSale
from seckill.pipeline.payment import pay
from seckill.pipeline.reconciler import create_sale, reconcile
from seckill.pipeline.worker import Worker

pytestmark = pytest.mark.both_backends   # the module and the Functions library (conftest)

DOC = os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..', '..', 'docs',
                   'operations.md')
ROLES = ('shop', 'order-worker', 'reconciler', 'sale-driver')


def role_lines(backend):
    """{user: ACL SETUSER words} of the page's block for `backend` (the
    library's lines are the ones with +fcall)."""
    text = open(DOC).read()
    lines = re.findall(r'^ACL SETUSER .*$', text, re.M)
    mine = [ln for ln in lines if ('+fcall' in ln) == (backend == 'functions')]
    out = {shlex.split(ln)[2]: shlex.split(ln) for ln in mine}
    assert set(out) == set(ROLES), (backend, sorted(out))
    return out


@pytest.fixture
def users(r, backend, redis_server):
    """A connect(role) for each role of the page, created on the server."""
    made = []
    lines = role_lines(backend)

    def connect(role):
        words = lines[role]
        r.execute_command(*words)
        password = next(w[1:] for w in words if w.startswith('>'))
        c = redis.Redis(host='127.0.0.1', port=redis_server.port, username=role,
                        password=password, decode_responses=True)
        made.append(c)
        assert c.ping() is True
        return c
    yield connect
    for c in made:
        c.close()


def _glob(pattern: str) -> 're.Pattern[str]':
    """Redis's key glob (`*`, `?`, `[...]`, `[^...]`) as a regex."""
    out, i = [], 0
    while i < len(pattern):
        ch = pattern[i]
        if ch == '*':
            out.append('.*')
        elif ch == '?':
            out.append('.')
        elif ch == '[' and ']' in pattern[i + 1:]:
            j = pattern.index(']', i + 1)
            body = pattern[i + 1:j]
            out.append('[^%s]' % re.escape(body[1:]) if body.startswith('^') else '[%s]' % re.escape(body))
            i = j
        else:
            out.append(re.escape(ch))
        i += 1
    return re.compile(''.join(out) + r'\Z', re.S)


def _reaches(words, key: str) -> bool:
    return any(_glob(w[1:]).match(key) for w in words if w.startswith('~'))


def test_lines_differ_only_by_backend(backend):
    """Every role can PING and starts from reset; the sale's keys are in
    reach, and on the library only the driver, which runs the first DRAW,
    reaches a draw sale's secret (<key>:secret until then; the module keeps
    it in the sale's value, out of every role's commands but the driver's)."""
    for role, words in role_lines(backend).items():
        assert '+ping' in words and 'reset' in words, role
        for key in ('sale:{t}', 'sale:{t}:events', 'sale:{t}:entrants', 'sale:{t}:perm', 'sale:{t}:wait'):
            assert _reaches(words, key), (role, key)
        if backend == 'functions':
            assert _reaches(words, 'sale:{t}:secret') == (role == 'sale-driver'), role


def test_shop_reserves_and_pays(users, r, store):
    cfg = make_sale(store, r, total=5, limit=2)
    shop = users('shop')
    sale = Sale(shop, cfg.key)
    res = sale.reserve('u1', reqid='o1')
    assert (res.status, res.rid, res.remaining) == ('RESERVED', 'o1', 4)
    assert sale.reserve('u1', reqid='o2', wait=True).status == 'RESERVED'
    assert sale.release('o2').status == 'RELEASED'
    assert sale.info()['pending'] == 1
    Worker(r, store, [cfg], consumer='admin').drain()
    assert pay(store, sale, 'o1', 'p1').outcome == 'PAID'
    assert sale.get('o1')['state'] == 'confirmed'
    # The gate's SET reaches the sync keys only: not the sale itself.
    for cmd in (['DEL', cfg.key], ['SET', cfg.key, 'x'], ['SET', 'sale:{t}:other', 'x']):
        with pytest.raises(redis.exceptions.NoPermissionError):
            shop.execute_command(*cmd)
    assert shop.execute_command('SET', cfg.key + ':seckill-sync', 1, 'PX', 10) is True


def test_order_worker_drains(users, r, store):
    cfg = make_sale(store, r, total=5, hold_ms=300)
    for i in range(3):
        assert Sale(r, KEY).reserve('u%d' % i, reqid='o%d' % i).status == 'RESERVED'
    w = Worker(users('order-worker'), store, [cfg], consumer='w1')
    stats = w.drain()
    assert stats.acked == 3
    assert {o.rid: o.state for o in store.orders(KEY)} == {'o0': 'UNPAID', 'o1': 'UNPAID',
                                                          'o2': 'UNPAID'}
    assert w.claim() == 0
    import time
    time.sleep(0.4)      # the holds run out: the worker releases them, then records it
    w.expire()
    w.drain()
    assert {o.state for o in store.orders(KEY)} == {'CANCELLED'}


def test_reconciler_applies_and_unfences(users, r, store):
    cfg = make_sale(store, r, total=5)
    for i in range(2):
        assert Sale(r, KEY).reserve('u%d' % i, reqid='o%d' % i).status == 'RESERVED'
    Worker(r, store, [cfg], consumer='admin').drain()
    # Redis loses both (the sale restarted empty): the ledger has them, and
    # the reconciler takes them again under their own ids.
    create_sale(store, r, cfg, replace=True, fence=fence_supported(r))
    sale = Sale(users('reconciler'), KEY)
    out = reconcile(store, sale, apply=True)
    assert out.done == {'restore': ['o0', 'o1']}, out.as_dict()
    assert out.report['remaining'] == 3 and Sale(r, KEY).get('o1')['state'] == 'pending'
    assert sale.unfence() in ('NOT_FENCED', 'UNFENCED')


def test_sale_driver_runs_a_split_sale(users, backend):
    split = SplitSale(users('sale-driver'), 'roles', backend=None)
    assert split.create(20, parts=2, limit=1) is True
    res = split.reserve('u1', reqid='o1')
    # Sale.reserve's shape (remaining: the home part's), still unpacking as two values
    assert (res.status, res.rid, res.ok) == ('RESERVED', 'o1', True) and res.remaining >= 0
    status, rid = res
    assert (status, rid) == ('RESERVED', 'o1')
    again = split.reserve('u1', reqid='o1')
    assert (again.status, again.rid, again.remaining) == ('DUPLICATE', 'o1', res.remaining)
    assert split.confirm('u1', 'o1') == 'CONFIRMED'
    info = split.info()
    assert (info['confirmed'], info['invariant']) == (1, 'ok'), info
    assert split.repair() == 0
