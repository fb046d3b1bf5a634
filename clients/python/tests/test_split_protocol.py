"""The split-sale protocol (seckill.split_protocol) without a server: slots,
placement, routing (the test vectors of docs/cluster.md), stock planning,
rounds and transfer arguments, the layout, the reconcile fan-out."""

import collections
import random

import pytest

from seckill import protocol as p
from seckill import split_protocol as sp

def test_key_slot_matches_redis():
    # CLUSTER KEYSLOT answers from Redis's own documentation and source.
    assert sp.key_slot('foo') == 12182
    assert sp.key_slot('123456789') == 12739
    assert sp.key_slot('{user1000}.following') == sp.key_slot('{user1000}.followers') == 3443
    assert sp.key_slot('foo{}{bar}') == sp.key_slot('foo{}{bar}')   # empty tag: whole key
    assert sp.hash_tag('foo{}{bar}') == b'foo{}{bar}'
    assert sp.hash_tag('foo{{bar}}zap') == b'{bar'
    assert sp.hash_tag('sale:{1001.p0}:events') == b'1001.p0'


def test_names():
    assert sp.layout_key('1001') == 'sale:{1001}:split'
    assert sp.tag_key('1001.p2.7') == 'sale:{1001.p2.7}'
    assert sp.stream_key('1001.p0') == 'sale:{1001.p0}:events'
    assert sp.key_slot(sp.stream_key('1001.p0.3')) == sp.key_slot(sp.tag_key('1001.p0.3'))
    for bad in ('', 'a{b', 'x}', 'y' * 129):
        with pytest.raises(ValueError):
            sp.layout_key(bad)


def _three_masters(slot):
    return 'a' if slot <= 5460 else 'b' if slot <= 10922 else 'c'


def test_placement_distinct_masters():
    pool, parts = sp.place('1001', 3, _three_masters, ['a', 'b', 'c'])
    masters = [_three_masters(sp.key_slot(sp.tag_key(t))) for t in parts]
    assert sorted(masters) == ['a', 'b', 'c']
    # Deterministic: the doc's example, first salt that lands on the least-used master.
    assert (pool, parts) == ('1001.pool', ['1001.p0', '1001.p1.1', '1001.p2.1'])
    assert sp.place('1001', 3, _three_masters, ['a', 'b', 'c']) == (pool, parts)


@pytest.mark.parametrize('nparts,nmasters', [(2, 3), (3, 3), (5, 3), (8, 4), (16, 5)])
def test_placement_spreads_evenly(nparts, nmasters):
    names = ['m%d' % i for i in range(nmasters)]

    def owner(slot):
        return names[slot * nmasters // sp.SLOTS]
    pool, parts = sp.place('sku-9', nparts, owner, names)
    load = collections.Counter(owner(sp.key_slot(sp.tag_key(t))) for t in parts)
    assert max(load.values()) - min(load.get(n, 0) for n in names) <= 1
    assert len(set(parts)) == nparts
    # The pool takes the least-used master after the parts.
    pool_master = owner(sp.key_slot(sp.tag_key(pool)))
    assert load.get(pool_master, 0) == min(load.get(n, 0) for n in names)


def test_placement_one_node():
    assert sp.place('s', 3) == ('s.pool', ['s.p0', 's.p1', 's.p2'])
    assert sp.place('s', 2, lambda s: 'x', ['x']) == ('s.pool', ['s.p0', 's.p1'])


def test_route_vectors():
    # The table in docs/cluster.md; a Go or Java client must match it.
    assert [sp.route('user:1', n) for n in (1, 2, 3, 4, 8, 16)] == [0, 1, 0, 1, 5, 5]
    assert [sp.route('alice', n) for n in (1, 2, 3, 4, 8, 16)] == [0, 1, 2, 3, 7, 15]
    assert [sp.route('bob', n) for n in (1, 2, 3, 4, 8, 16)] == [0, 0, 2, 2, 2, 10]
    assert [sp.route('\u7528\u62371', n) for n in (1, 3, 16)] == [0, 0, 10]
    assert sp.route('alice', 1_000_000_007) == int('2bd806c97f0e00af', 16) % 1_000_000_007


def test_route_is_even():
    rng = random.Random(7)
    counts = collections.Counter(sp.route('u%016x' % rng.getrandbits(64), 3) for _ in range(30000))
    assert all(abs(c / 30000 - 1 / 3) < 0.02 for c in counts.values())
    counts = collections.Counter(sp.route('user:%d' % i, 8) for i in range(40000))
    assert all(abs(c / 40000 - 1 / 8) < 0.01 for c in counts.values())


def test_split_stock_and_batches():
    assert sp.split_stock(10000, 3) == (4000 + 10000 * 600 // 1000 % 3, [2000, 2000, 2000])
    pool, parts = sp.split_stock(10, 3)
    assert parts == [2, 2, 2] and pool == 4
    assert sp.split_stock(2, 3) == (2, [0, 0, 0])
    assert sp.split_stock(0, 4) == (0, [0, 0, 0, 0])
    assert sp.batch_size(0, 3) == 0
    assert sp.batch_size(1, 3) == 1
    assert sp.batch_size(4000, 3) == 667
    assert sp.batch_size(4000, 3, bmax=100) == 100
    assert sp.batch_size(7, 3) == 2
    assert sp.low_water(4000, 3) == 334
    assert sp.low_water(4, 3) == 1 and sp.low_water(0, 3) == 1


def test_batches_shrink_and_drain_the_pool():
    pool, parts, refills = 4000, 3, 0
    last = None
    while pool:
        b = sp.batch_size(pool, parts)
        assert last is None or b <= last
        last, pool, refills = b, pool - b, refills + 1
    assert last == 1 and refills < 80       # ~2P ln(pool) + 2P


def test_crossed_low_once():
    low = 10
    seen = [r for r in range(30, -1, -1) if sp.crossed_low(r, 1, low)]
    assert seen == [9]
    seen = [r for r in range(30, -1, -3) if sp.crossed_low(r, 3, low)]
    assert seen == [9]


def test_transfer_ids():
    assert sp.transfer_id(b'\x00' * 8) == 't.0000000000000000'
    ids = {sp.transfer_id() for _ in range(1000)}
    assert len(ids) == 1000 and all(len(i) == 18 for i in ids)
    assert sp.debit_id('sale:{x.p1}', 5) == sp.debit_id('sale:{x.p1}', 5) != sp.debit_id('sale:{x.p1}', 6)


def test_borrow_plan():
    rem = {'pool': 0, 'p0': 0, 'p1': 40, 'p2': 10}
    assert sp.borrow_plan('p0', 1, rem, 3, pool='pool') == [('p1', 20)]
    assert sp.borrow_plan('p0', 45, rem, 3, pool='pool') == [('p1', 40), ('p2', 5)]
    assert sp.borrow_plan('p0', 100, rem, 3, pool='pool') == [('p1', 40), ('p2', 10)]
    assert sp.borrow_plan('p0', 1, rem, 3, bmax=8, pool='pool') == [('p1', 8)]
    assert sp.borrow_plan('p0', 0, rem, 3, pool='pool') == []
    # The pool first while it has stock, in a refill batch.
    assert sp.borrow_plan('p0', 1, {'pool': 60, 'p1': 500}, 3, pool='pool') == [('pool', 10)]
    assert sp.borrow_plan('p0', 2, {'p1': 1, 'p2': 1, 'p0': 9}, 3) == [('p1', 1), ('p2', 1)]
    assert sp.borrow_plan('p0', 1, {'p1': 1}, 3) == [('p1', 1)]
    assert sp.borrow_plan('p0', 1, {'p0': 5}, 3) == []


LAY = sp.Layout(name='s', total=100, pool='P', parts=('A', 'B', 'C'), initial=(40, 20, 20, 20),
                round='r1')


def test_layout_hash_roundtrip():
    lay = sp.make_layout('1001', 10000, '1001.pool', ['1001.p0', '1001.p1.1', '1001.p2.1'],
                         limit=2, stream=True, round_='00ff00ff00ff00ff')
    h = lay.to_hash()
    assert h['part.1'] == 'sale:{1001.p1.1}' and h['stream.2'] == 'sale:{1001.p2.1}:events'
    assert h['route'] == sp.ROUTE and h['initial'] == '4000,2000,2000,2000'
    assert h['version'] == '2' and h['round'] == '00ff00ff00ff00ff'
    back = sp.Layout.from_hash({k.encode(): v.encode() for k, v in h.items()})
    assert back == lay and back.keys[0] == 'sale:{1001.pool}'
    assert back.home('alice') == back.parts[2]
    for bad in (dict(h, version='1'), dict(h, version='3'), dict(h, route='crc32'),
                {k: v for k, v in h.items() if k != 'round'}):
        with pytest.raises(p.ProtocolError):
            sp.Layout.from_hash(bad)
    # Every create makes a new round.
    rounds = {sp.make_layout('x', 10, 'x.pool', ['x.p0']).round for _ in range(100)}
    assert len(rounds) == 100 and all(len(r) == 16 and int(r, 16) >= 0 for r in rounds)


def test_rounds_and_transfer_args():
    assert sp.new_round(b'\x01' * 8) == '0101010101010101'
    assert LAY.peers('P') == ['A', 'B', 'C'] and LAY.peers('B') == ['P', 'A', 'C']
    assert LAY.split_args('P') == ['SPLIT', 'r1', 3, 'A', 'B', 'C']
    assert LAY.split_args('A') == ['SPLIT', 'r1', 3, 'P', 'B', 'C']
    with pytest.raises(KeyError):
        LAY.peers('X')
    assert sp.send_args('P', 'A', 5, 1, 't.1', 'r1') == [
        'SECKILL.SEND', 'P', 'A', 5, 'MIN', 1, 'TID', 't.1', 'ROUND', 'r1']
    assert sp.recv_args('A', 'P', 9, 'r1') == ['SECKILL.RECV', 'A', 'P', 9, 'ROUND', 'r1']
    # TO: the receiving key's incarnation (docs/cluster.md, "Rounds").
    assert sp.send_args('P', 'A', 5, 1, 't.1', 'r1', '0a0b0c0d')[-2:] == ['TO', '0a0b0c0d']
    assert sp.recv_args('A', 'P', 9, 'r1', '0a0b0c0d') == [
        'SECKILL.RECV', 'A', 'P', 9, 'ROUND', 'r1', 'TO', '0a0b0c0d']
    for bad in ('', 'A0B0C0D0', '0a0b0c0', '0a0b0c0d0', 7):
        with pytest.raises(ValueError):
            sp.recv_args('A', 'P', 9, 'r1', bad)
    assert sp.is_stale_peer('STALEPEER the total was sent to another incarnation of this key')
    assert not sp.is_stale_peer('STALEROUND the key is in another round')
    for bad in ('', 'x' * 65, None):
        with pytest.raises(ValueError):
            sp.send_args('P', 'A', 5, 1, 't.1', bad)
    assert sp.is_stale_round('STALEROUND the key is in round r2, not r1')
    assert sp.is_stale_round(Exception('STALEROUND'))
    assert sp.is_stale_round('ERR STALEROUND x')
    assert not sp.is_stale_round('ERR the peer is not one of this part\'s declared peers')
    assert not sp.is_stale_round('ERR unknown STALEROUND') and not sp.is_stale_round('')


def test_tags_and_probe_keys():
    assert sp.parse_tag('1001', '1001.pool') == ('pool', None)
    assert sp.parse_tag('1001', '1001.pool.3') == ('pool', None)
    assert sp.parse_tag('1001', '1001.p0') == ('part', 0)
    assert sp.parse_tag('1001', '1001.p12.7') == ('part', 12)
    for bad in ('1001', '1001.p', '1001.p01', '1001.p1.0', '1001.pool.x', '10011.p0', 'x.p0',
                '1001.p1.2.3'):
        assert sp.parse_tag('1001', bad) is None, bad
    assert sp.parse_tag('a.b', 'a.b.p1') == ('part', 1) and sp.parse_tag('a.b', 'aXb.p1') is None
    keys = sp.probe_keys('n', salts=3)
    assert keys == ['sale:{n.pool}', 'sale:{n.pool.1}', 'sale:{n.pool.2}',
                    'sale:{n.p0}', 'sale:{n.p0.1}', 'sale:{n.p0.2}']
    # Placement's tags on three masters are among the default probes.
    pool, parts = sp.place('1001', 3, _three_masters, ['a', 'b', 'c'])
    assert sp.tag_key(pool) in sp.probe_keys('1001') and sp.tag_key(parts[0]) in sp.probe_keys('1001')


def test_group_orders_and_shortfall():
    groups = sp.group_orders(LAY, [('o1', 'alice', 1), ('o2', 'bob', 2), ('o3', 'user:1', 1)])
    assert set(groups) == {'A', 'B', 'C'}
    assert groups['C'] == [('o1', 'alice', 1), ('o2', 'bob', 2)]
    assert groups['A'] == [('o3', 'user:1', 1)] and groups['B'] == []
    rows = [('o1', 'u', 1), ('o2', 'v', 2), ('o3', 'w', 3)]
    report = {'remaining': 1, 'orders_released_ids': ['o2'], 'orders_unknown_ids': ['o3']}
    assert sp.shortfall(report, rows) == 4
    assert sp.shortfall(dict(report, remaining=9), rows) == 0


def test_merge_parts():
    r1, r2 = p.ReconcileResult(), p.ReconcileResult()
    r1.counts.update(ok=3, unknown=1)
    r1.ids['unknown'].append('o9')
    r2.counts.update(ok=1, pending=2)
    r2.ids['pending'] += ['o1', 'o2']
    out = sp.merge_parts({'A': r1, 'B': r2})
    assert out['orders_ok'] == 4 and out['orders_pending'] == 2 and out['orders_unknown'] == 1
    assert out['orders_pending_ids'] == ['o1', 'o2'] and out['orders_unknown_ids'] == ['o9']
    assert out['orders_conflict'] == 0 and [x['key'] for x in out['parts']] == ['A', 'B']
