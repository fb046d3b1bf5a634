"""Draw sales without a server: the ENTER / DRAW / ENTRANTS arguments and
replies, the draw order against hashlib computed here, the simulation, the
verification verdicts, the fairness of the order over many seeds, the
operations as steps, and the split sale's allocation and transfer plan."""

from __future__ import annotations

import hashlib
import itertools
from dataclasses import replace

import pytest

from seckill import _draw_ops
from seckill import backend as be
from seckill import draw as d
from seckill import protocol as p
from seckill._io import Call
from seckill.draw import Entrant

SEED = bytes(range(32))
SEED_HEX = SEED.hex()


def sha(b):
    return hashlib.sha256(b).digest()


# -- arguments and replies ----------------------------------------------------------

def test_args():
    assert d.enter_args('k', 'u1') == ['SECKILL.ENTER', 'k', 'u1']
    assert d.enter_args('k', 'u1', 2, 'o-1') == ['SECKILL.ENTER', 'k', 'u1', 'QTY', 2,
                                                 'REQID', 'o-1']
    assert d.enter_args('k', b'\xff', 1) == ['SECKILL.ENTER', 'k', b'\xff']
    with pytest.raises(ValueError):
        d.enter_args('k', '')
    assert d.draw_args('k') == ['SECKILL.DRAW', 'k', 'COUNT', 1000]
    assert d.draw_args('k', 7) == ['SECKILL.DRAW', 'k', 'COUNT', 7]
    for bad in (0, 1001):
        with pytest.raises(ValueError, match='DRAW COUNT'):
            d.draw_args('k', bad)
    assert d.entrants_args('k') == ['SECKILL.ENTRANTS', 'k', 0, 'COUNT', 100]
    assert d.entrants_args('k', b'17', 1000) == ['SECKILL.ENTRANTS', 'k', '17', 'COUNT', 1000]
    with pytest.raises(ValueError):
        d.entrants_args('k', 0, 1001)
    assert p.init_args('k', 10, end_ms=5, draw=True) == ['SECKILL.INIT', 'k', 10, 'END', 5, 'DRAW']
    assert p.init_args('k', 10, end_ms=5, draw=True, replace=True)[-2:] == ['DRAW', 'REPLACE']
    with pytest.raises(ValueError, match='end_ms'):
        p.init_args('k', 10, draw=True)


def test_functions_backend_translation():
    # ENTRANTS is read-only (FCALL_RO: replicas and read-only ACLs serve it)
    assert be.to_functions(d.entrants_args('k', 0, 5)) == \
        ['FCALL_RO', 'seckill_entrants', 1, 'k', 0, 'COUNT', 5]
    assert be.to_functions(d.enter_args('k', 'u', 2)) == \
        ['FCALL', 'seckill_enter', 1, 'k', 'u', 'QTY', 2]
    assert be.to_functions(d.draw_args('k', 3)) == ['FCALL', 'seckill_draw', 1, 'k', 'COUNT', 3]


def test_replies():
    assert d.parse_entered([b'ENTERED', 3]) == ('ENTERED', 3)
    assert d.parse_entered(['ALREADY_ENTERED', '3']).ok
    assert not d.parse_entered(['DRAWN', 3]).ok
    for status in d.ENTER_STATUSES:
        assert d.parse_entered([status, 0]).status == status
    with pytest.raises(p.ProtocolError):
        d.parse_entered(['RESERVED', 1])
    with pytest.raises(p.ProtocolError):
        d.parse_entered(['ENTERED'])
    assert d.parse_drawn([2, 8, 0]) == d.Drawn(2, 8, 0)
    with pytest.raises(p.ProtocolError):
        d.parse_drawn([1, 2])
    cursor, page = d.parse_entrants([b'12', [b'u1', b'1', b'drawn', 'u2', 2, 'entered']])
    assert cursor == '12' and page == [Entrant(b'u1', 1, 'drawn'), Entrant('u2', 2, 'entered')]
    assert d.parse_entrants([0, []]) == ('0', [])
    with pytest.raises(p.ProtocolError):
        d.parse_entrants(['0', ['u1', 1]])
    with pytest.raises(p.ProtocolError):
        d.parse_entrants(['0', ['u1', 1, 'won']])
    # RESERVE on a draw sale: [DRAW, nil, remaining]
    res = p.parse_reserved([b'DRAW', None, 5])
    assert (res.status, res.rid, res.remaining, res.ok) == ('DRAW', None, 5, False)


def report(**kw):
    base = ['total', 10, 'remaining', 10, 'pending', 0, 'confirmed', 0, 'invariant', 'ok',
            'mode', 'draw', 'entrants', 3, 'drawn', 0, 'left_to_draw', 0, 'waitlist', 0,
            'draw_stock', None, 'seed_commitment', hashlib.sha256(SEED).hexdigest(), 'seed', None]
    out = dict(zip(base[0::2], base[1::2]))
    out.update(kw)
    return [x for kv in out.items() for x in kv]


def test_info_fields():
    r = p.parse_report(report())
    assert (r['entrants'], r['draw_stock'], r['seed'], r['mode']) == (3, None, None, 'draw')
    info = d.draw_info(r)
    assert not info.started and info.seed_commitment == hashlib.sha256(SEED).hexdigest()
    info = d.draw_info(p.parse_report(report(draw_stock=b'10', seed=SEED_HEX.encode())))
    assert info.started and info.draw_stock == 10 and info.seed == SEED_HEX
    assert d.draw_info(p.parse_report(report(mode='sale'))) is None
    assert d.draw_info(None) is None


# -- the order --------------------------------------------------------------------

def test_draw_key_is_sha256_of_seed_then_user():
    # the vector, computed once with hashlib outside the package
    assert d.draw_key(SEED_HEX, 'alice').hex() == \
        '3dd374340e1f0a5cf4070894c82b9e7253298c0c7be70a7f3a03f024c1dfea17'
    assert d.commitment(SEED_HEX) == \
        '630dcd2966c4336691125448bbb25b4ff412a49c732db2c8abc1b8581bd710dd'
    for user in ('bob', 'user:42', 'ünï', b'\xff\x00raw'):
        raw = user if isinstance(user, bytes) else user.encode()
        assert d.draw_key(SEED_HEX, user) == sha(SEED + raw)
        assert d.draw_key(SEED, user) == sha(SEED + raw)
    # a user id a decoding client could not decode comes back through surrogateescape
    assert d.draw_key(SEED_HEX, p.text(b'\xff\x00raw')) == sha(SEED + b'\xff\x00raw')
    assert d.commitment_ok(SEED_HEX, hashlib.sha256(SEED).hexdigest().upper())
    assert not d.commitment_ok(SEED_HEX, hashlib.sha256(b'x').hexdigest())
    with pytest.raises(p.ProtocolError):
        d.seed_bytes('not hex')


def test_order_and_simulation():
    users = ['alice', 'bob', 'carol', 'dave', 'erin']
    expected = sorted(users, key=lambda u: sha(SEED + u.encode()))
    assert expected == ['bob', 'alice', 'carol', 'dave', 'erin']
    assert [e.user for e in d.draw_order(SEED_HEX, [Entrant(u, 1, 'entered') for u in users])] \
        == expected
    assert d.draw_order(SEED_HEX, reversed(users)) == expected    # arrival order plays no part
    qty = {'bob': 2, 'alice': 3, 'carol': 1, 'dave': 2, 'erin': 1}
    ents = [Entrant(u, qty[u], 'entered') for u in users]
    # 4 units: bob (2) wins, alice (3) does not fit 2, carol (1) wins, dave (2) does not
    # fit 1, erin (1) wins: an entrant that does not fit keeps its place, the walk goes on
    assert d.winners(SEED_HEX, ents, 4) == ['bob', 'carol', 'erin']
    assert d.winners(SEED_HEX, ents, 0) == []
    assert d.winners(SEED_HEX, ents, 100) == expected
    order, wins = d.simulate(SEED_HEX, ents, 5)
    assert [e.user for e, w in zip(order, wins) if w] == ['bob', 'alice']


# Critical value of chi-square with 19 degrees of freedom at p = 0.001:
# 43.820, the standard tables' value; recomputed for this test by bisection
# on the regularized upper incomplete gamma function Q(19/2, x/2) = 0.001
# (series and continued fraction, math.lgamma), which gives 43.820 (and
# 27.877 for 9 dof, as the tables do).
CHI2_19_P001 = 43.820


def chi2_wins(n, k, seeds, order_key):
    """The fairness statistic of `seeds` draws of k single units among n
    entrants: each draw picks a k-subset, so an entrant's win count has
    variance T p (1-p) with p = k/n and the counts are negatively correlated
    (covariance -T p (1-p) / (n-1)); (n-1)/n * sum (O-E)^2 / (T p (1-p)) is
    then chi-square with n-1 degrees of freedom (the Pearson statistic for
    sampling without replacement; k = 1 gives the usual multinomial one)."""
    users = ['user:%d' % i for i in range(n)]
    wins = dict.fromkeys(users, 0)
    for seed in seeds:
        ents = [Entrant(u, 1, 'entered') for u in users]
        won = order_key(seed, ents, k)
        assert len(won) == k
        for u in won:
            wins[u] += 1
    t, pk = len(seeds), k / n
    e = t * pk
    return (n - 1) / n * sum((o - e) ** 2 for o in wins.values()) / (t * pk * (1 - pk)), wins


SEEDS = [sha(b'fairness %d' % i) for i in range(2500)]


def test_fairness_chi_square():
    x, wins = chi2_wins(20, 5, SEEDS, d.winners)
    print('fairness: chi2 = %.2f over 19 dof (p = 0.001 critical %.3f), wins %d..%d, '
          'expected %d' % (x, CHI2_19_P001, min(wins.values()), max(wins.values()),
                           len(SEEDS) * 5 // 20))
    assert x < CHI2_19_P001


def test_fairness_statistic_catches_a_biased_order():
    # the same statistic on an order that ignores the seed (SHA-256(user)):
    # the same five users win every time
    def unseeded(seed, ents, k):
        return [e.user for e in sorted(ents, key=lambda e: sha(e.user.encode()))[:k]]

    def by_arrival(seed, ents, k):
        # first come, first served: the first five entrants always win
        return [e.user for e in ents[:k]]
    assert chi2_wins(20, 5, SEEDS, unseeded)[0] > CHI2_19_P001
    assert chi2_wins(20, 5, SEEDS, by_arrival)[0] > CHI2_19_P001


# -- verification -----------------------------------------------------------------

def drawn_sale(qtys, stock, seed=SEED_HEX, promoted=()):
    """INFO and ENTRANTS as a correct server would show them after the draw."""
    ents = [Entrant('u%d' % i, q, 'entered') for i, q in enumerate(qtys)]
    won = set(d.winners(seed, ents, stock))
    ents = [e._replace(result='drawn' if e.user in won else
                       'promoted' if e.user in promoted else 'entered') for e in ents]
    held = sum(e.qty for e in ents if e.result != 'entered')
    info = d.DrawInfo(entrants=len(ents), drawn=len(won), left_to_draw=0, waitlist=0,
                      remaining=0, draw_stock=stock, seed_commitment=d.commitment(seed), seed=seed,
                      held=held)
    return info, ents


def test_verify_ok_and_promoted():
    info, ents = drawn_sale([1, 2, 1, 3, 1, 1, 2], 5)
    v = d.verify(info, ents, 'k')
    assert v.ok and v.winners == sum(e.result == 'drawn' for e in ents), v.message
    losers = [e.user for e in ents if e.result != 'drawn']
    info, ents = drawn_sale([1, 2, 1, 3, 1, 1, 2], 5, promoted=losers[:1])
    assert d.verify(info, ents).ok            # a waitlist promotion is not a drawn winner


def test_verify_tampered():
    info, ents = drawn_sale([1] * 30, 10)
    order, wins = d.simulate(info.seed, ents, 10)
    loser = next(e for e, w in zip(order, wins) if not w)
    winner = [e for e, w in zip(order, wins) if w][-1]
    # swap one winner and one loser: same number of winners, wrong ones
    forged = [e._replace(result='drawn' if e.user == loser.user else
                         'entered' if e.user == winner.user else e.result) for e in ents]
    v = d.verify(info, forged, 'k')
    assert v.status == d.MISMATCH and not v.ok and v.mismatches == 2
    first_pos = min(order.index(loser), order.index(winner))
    assert v.first['position'] == first_pos
    assert v.first['user'] == order[first_pos].user
    assert v.first['draw_key'] == sha(SEED + order[first_pos].user.encode())
    # a seed that is not the published commitment
    v = d.verify(replace(info, seed_commitment=hashlib.sha256(b'other').hexdigest()), ents)
    assert v.status == d.BAD_COMMITMENT
    # another seed with the right commitment for it: the order differs
    other = sha(b'another seed').hex()
    v = d.verify(replace(info, seed=other, seed_commitment=d.commitment(other)), ents)
    assert v.status == d.MISMATCH
    # an entrant left out of the list
    v = d.verify(info, ents[1:])
    assert v.status == d.MISMATCH and 'listed 29' in v.message


def test_verify_counts_units_held_outside_the_draw():
    """Every winner right, but the sale's reservations hold more units than
    its winners' QTYs (stock taken for an order the draw did not make):
    a mismatch that names the figure; 0 on the honest sale."""
    info, ents = drawn_sale([1, 2, 1, 3, 1, 1, 2], 5)
    assert d.verify(info, ents).outside_draw == 0
    v = d.verify(replace(info, held=info.held + 3), ents)
    assert v.status == d.MISMATCH and v.outside_draw == 3 and 'did not make' in v.message, v.message
    assert d.verify(replace(info, held=info.held - 1), ents).status == d.MISMATCH


def test_verify_not_ready():
    info, ents = drawn_sale([1] * 5, 2)
    assert d.verify(None, []).status == d.NOT_A_DRAW
    v = d.verify(replace(info, seed=None, draw_stock=None), ents)
    assert v.status == d.NOT_DRAWN and not v.ok
    v = d.verify(replace(info, left_to_draw=3), ents)
    assert v.status == d.IN_PROGRESS and not v.ok


def test_combine():
    good = d.verify(*drawn_sale([1] * 4, 2))
    info, ents = drawn_sale([1] * 4, 2)
    bad = d.verify(info, [e._replace(result='entered') for e in ents], 'p1')
    assert d.combine('n', [good, good]).ok
    v = d.combine('n', [good, bad])
    assert v.status == d.MISMATCH and v.message.startswith('part p1') and len(v.parts) == 2
    assert v.as_dict()['parts'][1]['status'] == d.MISMATCH


# -- operations as steps ----------------------------------------------------------

def run(op, replies):
    """Runs an operation against canned replies: (result, the commands)."""
    sent = []
    replies = iter(replies)
    value = None
    try:
        while True:
            step = op.send(value)
            assert isinstance(step, Call)
            sent.append(list(step.args))
            value = next(replies)
    except StopIteration as stop:
        return stop.value, sent


def test_draw_all_loops_until_complete():
    res, sent = run(_draw_ops.draw_all('k', 2), [[2, 8, 5], [2, 6, 3], [0, 6, 1], [1, 5, 0]])
    assert res == d.Drawn(5, 5, 0)
    assert sent == [['SECKILL.DRAW', 'k', 'COUNT', 2]] * 4
    with pytest.raises(p.ProtocolError, match='no progress'):
        run(_draw_ops.draw_all('k'), [[0, 8, 5], [0, 8, 5]])


def test_entrants_pages_and_verify_op():
    info, ents = drawn_sale([1, 1, 2, 1], 3)
    rep = report(entrants=4, draw_stock=3, seed=SEED_HEX, left_to_draw=0, pending=3)
    flat = [[e.user, e.qty, e.result] for e in ents]
    pages = [['7', list(itertools.chain(*flat[:3]))], ['0', list(itertools.chain(*flat[3:]))]]
    got, sent = run(_draw_ops.all_entrants('k', 3), pages)
    assert got == ents and [s[2] for s in sent] == [0, '7']
    v, sent = run(_draw_ops.verify('k', 3), [rep] + pages + [rep])
    assert v.ok, v.message
    assert [s[0] for s in sent] == ['SECKILL.INFO', 'SECKILL.ENTRANTS', 'SECKILL.ENTRANTS',
                                    'SECKILL.INFO']
    # replaced while the entrants were read
    v, _ = run(_draw_ops.verify('k', 3), [rep] + pages + [report(seed=sha(b'x').hex(),
                                                                  draw_stock=3)])
    assert v.status == d.IN_PROGRESS
    # not drawn: no page is read
    v, sent = run(_draw_ops.verify('k'), [report()])
    assert v.status == d.NOT_DRAWN and len(sent) == 1


# -- split sales ------------------------------------------------------------------

def test_allocate_largest_remainder():
    w = {'a': 1000, 'b': 1500, 'c': 2500}
    assert d.allocate(1000, w) == {'a': 200, 'b': 300, 'c': 500}
    # quotas 199.8, 299.7, 499.5: floors 199, 299, 499 and 2 units to the largest remainders
    assert d.allocate(999, w) == {'a': 200, 'b': 300, 'c': 499}
    assert d.allocate(7, {'a': 0, 'b': 3}) == {'a': 0, 'b': 7}
    assert d.allocate(7, {'a': 0, 'b': 0}) == {'a': 0, 'b': 0}
    with pytest.raises(ValueError):
        d.allocate(-1, w)
    for stock, weights in [(10, {'a': 1, 'b': 1, 'c': 1}), (101, {'a': 7, 'b': 0, 'c': 13, 'd': 5}),
                           (3, {'x%d' % i: 1 for i in range(8)})]:
        shares = d.allocate(stock, weights, 'r1')
        assert sum(shares.values()) == stock
        total = sum(weights.values())
        assert all(abs(shares[k] - stock * weights[k] / total) < 1 for k in weights)
        assert d.allocate(stock, weights, 'r1') == shares       # deterministic
    # equal remainders: the tie goes by SHA-256(salt, key), not by the keys' order
    firsts = {next(k for k, v in d.allocate(1, {'a': 1, 'b': 1, 'c': 1}, 'r%d' % i).items() if v)
              for i in range(30)}
    assert firsts == {'a', 'b', 'c'}


def test_transfer_plan():
    have = {'pool': 400, 'p0': 200, 'p1': 200, 'p2': 200}
    target = {'pool': 0, 'p0': 100, 'p1': 300, 'p2': 600}
    plan = d.transfer_plan(have, target)
    assert plan == [('pool', 'p2', 400), ('p0', 'p1', 100)]
    after = dict(have)
    for src, dst, q in plan:
        after[src] -= q
        after[dst] += q
    assert after == target
    assert d.transfer_plan(have, have) == []
    with pytest.raises(ValueError):
        d.transfer_plan(have, {'pool': 0, 'p0': 1})
    with pytest.raises(ValueError):
        d.transfer_plan({'a': 1}, {'a': 0, 'b': 1})
    # at most sources + destinations - 1 transfers
    have = {'k%d' % i: v for i, v in enumerate([9, 0, 4, 7, 0, 1, 3])}
    target = {'k%d' % i: v for i, v in enumerate([3, 5, 3, 3, 6, 3, 1])}
    plan = d.transfer_plan(have, target)
    assert len(plan) <= 4 + 3 - 1 and all(q > 0 for _s, _d, q in plan)


def test_rebalance_tid_is_a_function_of_the_plan():
    t = d.rebalance_tid('r1', 'a', 'b', 10, 5)
    assert t == d.rebalance_tid('r1', 'a', 'b', 10, 5) and t.startswith('w.') and len(t) == 18
    assert len({t, d.rebalance_tid('r2', 'a', 'b', 10, 5), d.rebalance_tid('r1', 'a', 'b', 11, 5),
                d.rebalance_tid('r1', 'b', 'a', 10, 5), d.rebalance_tid('r1', 'a', 'b', 10, 4)}) == 5


def test_split_closeness():
    w = {'a': 1000, 'b': 1500, 'c': 2500}
    c = d.split_closeness(999, w, d.allocate(999, w))
    assert c['global'] == pytest.approx(999 / 5000)
    assert c['parts'] == pytest.approx({'a': 0.2, 'b': 0.2, 'c': 499 / 2500})
    assert c['max_diff'] == pytest.approx(0.2 - 0.1998)
    # within one unit per part: below 1 / entrants of the part
    for stock in range(0, 300, 7):
        w = {'a': 17, 'b': 101, 'c': 55, 'd': 3}
        c = d.split_closeness(stock, w, d.allocate(stock, w))
        assert all(abs(c['parts'][k] - c['global']) < 1 / w[k] for k in w)
