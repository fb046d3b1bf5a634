"""The order store on SQLite and PostgreSQL: guarded transitions, idempotent
event writes, one row per reservation id."""

import pytest

from seckill.protocol import Event
from seckill.pipeline.store import SaleConfig, StoreUnavailable

SALE = SaleConfig('sale:{s}', 10, stream='sale:{s}:ev', hold_ms=1000)


def ev(kind, rid, user='u', qty=1, ms=1_000_000):
    return Event('%d-0' % ms, kind, rid, user, qty)


def test_schema_is_idempotent_and_sales_round_trip(store):
    store.create_schema()
    cfg = SaleConfig('sale:{x}', 7, stream='sale:{x}:e', shards=2, limit=3, hold_ms=500,
                     start_ms=1, end_ms=2, expires_at_ms=3, maxlen=100, created_ms=42)
    store.save_sale(cfg)
    assert store.load_sale('sale:{x}') == cfg
    store.save_sale(SaleConfig('sale:{x}', 9, created_ms=43))
    assert store.load_sale('sale:{x}').total == 9
    assert store.load_sale('nope') is None
    assert [s.key for s in store.sales()] == ['sale:{x}']


def test_reserved_inserts_once(store):
    st = store.apply_events(SALE, [ev('reserved', 'o1', ms=5000)])
    assert st.inserted == 1
    st = store.apply_events(SALE, [ev('reserved', 'o1', ms=5000)])
    assert (st.inserted, st.replayed) == (0, 1)
    o = store.order('o1')
    assert (o.state, o.user, o.qty, o.reserved_ms, o.deadline_ms) == ('UNPAID', 'u', 1, 5000, 6000)
    assert store.summary(SALE.key)['UNPAID'] == {'orders': 1, 'units': 1}


def test_reservation_id_collision_is_counted_not_merged(store):
    store.apply_events(SALE, [ev('reserved', 'o1', user='a')])
    st = store.apply_events(SALE, [ev('reserved', 'o1', user='b')])
    assert st.collisions == 1 and st.inserted == 0
    assert store.order('o1').user == 'a'


def test_unique_reservation_id_in_the_schema(store):
    store.apply_events(SALE, [ev('reserved', 'o1')])
    with pytest.raises(Exception) as exc:
        with store.tx() as t:
            t.run("INSERT INTO seckill_orders (reservation_id, sale_key, user_id, qty, state, "
                  "created_ms, updated_ms) VALUES ('o1', 'x', 'u', 1, 'UNPAID', 0, 0)")
    assert not isinstance(exc.value, StoreUnavailable)
    assert 'unique' in str(exc.value).lower() or 'duplicate' in str(exc.value).lower()


@pytest.mark.parametrize('kind', ['released', 'expired'])
def test_release_cancels_unpaid_only(store, kind):
    store.apply_events(SALE, [ev('reserved', 'o1'), ev(kind, 'o1')])
    o = store.order('o1')
    assert (o.state, o.cancel_reason) == ('CANCELLED', kind)
    st = store.apply_events(SALE, [ev('reserved', 'o1'), ev(kind, 'o1')])  # replay
    assert (st.inserted, st.cancelled, st.unchanged) == (0, 0, 1)
    assert store.order('o1').state == 'CANCELLED'


def test_release_before_reserved_any_order(store):
    """Two workers may commit `released` before `reserved`: same outcome."""
    store.apply_events(SALE, [ev('expired', 'o1', user='u9', qty=2)])
    assert store.order('o1').state == 'CANCELLED'
    st = store.apply_events(SALE, [ev('reserved', 'o1', user='u9', qty=2)])
    assert st.inserted == 0 and st.collisions == 0
    assert store.order('o1').state == 'CANCELLED'


def test_confirmed_pays_only_a_started_payment(store):
    store.apply_events(SALE, [ev('reserved', 'a'), ev('reserved', 'b')])
    store.start_payment('a', 'pay-a')
    st = store.apply_events(SALE, [ev('confirmed', 'a'), ev('confirmed', 'b')])
    assert (st.paid, st.unchanged) == (1, 1)
    a, b = store.order('a'), store.order('b')
    assert (a.state, a.paid_ref) == ('PAID', 'pay-a')
    assert b.state == 'UNPAID'   # nobody paid: a CONFIRM alone is no payment
    assert store.apply_events(SALE, [ev('confirmed', 'a')]).paid == 0


def test_guarded_transitions(store):
    store.apply_events(SALE, [ev('reserved', 'a'), ev('reserved', 'b')])
    assert store.start_payment('a', 'p1').payment_ref == 'p1'
    assert store.start_payment('a', 'p2').payment_ref == 'p1'   # the first ref stays
    assert store.mark_paid('a', 'p2') is True
    assert store.mark_paid('a', 'p3') is False
    assert store.order('a').paid_ref == 'p2'
    assert store.cancel('a', 'late') is False
    assert store.order('a').state == 'PAID'
    assert store.cancel('b', 'expired') is True
    assert store.cancel('b', 'again') is False
    assert store.mark_paid('b') is False
    assert store.start_payment('b', 'p').state == 'CANCELLED'
    assert store.order('b').payment_ref is None
    assert store.set_deadline('b', 5) is False


def test_orders_by_state(store):
    store.apply_events(SALE, [ev('reserved', 'o%d' % i, ms=1000 + i) for i in range(5)])
    store.start_payment('o1', 'p')
    store.mark_paid('o1')
    store.cancel('o2', 'x')
    assert [o.rid for o in store.orders(SALE.key)] == ['o0', 'o1', 'o2', 'o3', 'o4']
    assert [o.rid for o in store.orders(SALE.key, 'UNPAID')] == ['o0', 'o3', 'o4']
    assert store.order('o1').paid_ref == 'p'
    s = store.summary(SALE.key)
    assert (s['PAID']['orders'], s['CANCELLED']['orders'], s['UNPAID']['orders']) == (1, 1, 3)


def test_outage_raises_unavailable_then_recovers(db):
    store = db.store(**({'timeout': 0.2} if db.kind == 'sqlite' else {}))
    store.apply_events(SALE, [ev('reserved', 'o1')])
    with db.outage():
        with pytest.raises(StoreUnavailable):
            store.apply_events(SALE, [ev('reserved', 'o2')])
    store.apply_events(SALE, [ev('reserved', 'o2')])
    assert {o.rid for o in store.orders(SALE.key)} == {'o1', 'o2'}
