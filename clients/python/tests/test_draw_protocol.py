"""Draw sales without a server: the ENTER / DRAW / ENTRANTS arguments and
replies, the entrant digest, the draw seed and the Fisher-Yates draw order
against a second, deliberately naive implementation written here from the
contract's pseudo-code (and fixed known-answer vectors), the simulation,
the verification verdicts and the tampering each check catches, the
fairness of the order over many seeds, the operations as steps, the
command line's verdicts and exit codes, and the split sale's allocation
and transfer plan."""

from __future__ import annotations

import hashlib
import itertools
import json
import math
import struct
from dataclasses import replace

import pytest

from seckill import __main__ as cli
from seckill import backend as be
from seckill import draw as d
from seckill import protocol as p
from seckill.draw import Entrant
from seckill.ops import draw as draw_ops
from seckill.plain.steps import Call

SECRET = bytes(range(32))
SECRET_HEX = SECRET.hex()


def sha(b):
    return hashlib.sha256(b).digest()


# -- the naive reference: the contract's pseudo-code, literally ---------------------
#
# Kept apart from seckill.draw on purpose: bytes glued with struct, the whole
# list a = [0..n-1] swapped step by step, and uniform() in floating point the
# way Lua 5.1 computes it (x built from 6 bytes as a double, floor(2^48 / m),
# fmod), so these tests also hold the contract's claim that doubles are exact.

def naive_digest(entrants):
    h = b'\0' * 32
    for user, qty in entrants:
        u = user if isinstance(user, bytes) else user.encode('utf-8')
        h = hashlib.sha256(h + struct.pack('>I', len(u)) + u + struct.pack('>I', qty)).digest()
    return h


def naive_uniform(s, j, m):
    c = 0
    while True:
        h = hashlib.sha1(s + struct.pack('>I', j) + struct.pack('>I', c)).digest()
        x = 0.0
        for byte in h[:6]:
            x = x * 256 + byte
        limit = math.floor(2.0 ** 48 / m) * m
        if x < limit:
            return int(math.fmod(x, m))
        c += 1


def naive_order(s, n):
    a = list(range(n))
    for j in range(n):
        t = j + naive_uniform(s, j, n - j)
        a[j], a[t] = a[t], a[j]
    return a


def naive_winners(secret, entrants, beacon_value, draw_stock):
    """Every step by hand: digest, S, the order, the walk."""
    s = hashlib.sha256(secret + naive_digest(entrants) + beacon_value).digest()
    left, won = draw_stock, []
    for i in naive_order(s, len(entrants)):
        user, qty = entrants[i]
        if qty <= left:
            left -= qty
            won.append(user)
    return won


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
    assert d.draw_args('k', 7, 'round 99: 5f3a') == ['SECKILL.DRAW', 'k', 'COUNT', 7,
                                                     'BEACON', 'round 99: 5f3a']
    assert d.draw_args('k', 1, b'\x00' * 1024)[-1] == b'\x00' * 1024
    for bad in ('', b'', 'x' * 1025):
        with pytest.raises(ValueError, match='BEACON value must be 1 to 1024 bytes'):
            d.draw_args('k', 1, bad)
    assert d.entrants_args('k') == ['SECKILL.ENTRANTS', 'k', 0, 'COUNT', 100]
    assert d.entrants_args('k', b'17', 1000) == ['SECKILL.ENTRANTS', 'k', '17', 'COUNT', 1000]
    with pytest.raises(ValueError):
        d.entrants_args('k', 0, 1001)
    assert p.init_args('k', 10, end_ms=5, draw=True) == ['SECKILL.INIT', 'k', 10, 'END', 5, 'DRAW']
    assert p.init_args('k', 10, end_ms=5, draw=True, replace=True)[-2:] == ['DRAW', 'REPLACE']
    assert p.init_args('k', 10, end_ms=5, draw=True, beacon='drand quicknet round 7') == \
        ['SECKILL.INIT', 'k', 10, 'END', 5, 'DRAW', 'BEACON', 'drand quicknet round 7']
    with pytest.raises(ValueError, match='end_ms'):
        p.init_args('k', 10, draw=True)
    with pytest.raises(ValueError, match='draw'):
        p.init_args('k', 10, end_ms=5, beacon='b')
    for bad in ('', 'n' * 257):
        with pytest.raises(ValueError, match='BEACON name must be 1 to 256 bytes'):
            p.init_args('k', 10, end_ms=5, draw=True, beacon=bad)


def test_functions_backend_translation():
    # ENTRANTS is read-only (FCALL_RO: replicas and read-only ACLs serve it)
    assert be.to_functions(d.entrants_args('k', 0, 5)) == \
        ['FCALL_RO', 'seckill_entrants', 1, 'k', 0, 'COUNT', 5]
    assert be.to_functions(d.enter_args('k', 'u', 2)) == \
        ['FCALL', 'seckill_enter', 1, 'k', 'u', 'QTY', 2]
    assert be.to_functions(d.draw_args('k', 3)) == ['FCALL', 'seckill_draw', 1, 'k', 'COUNT', 3]
    assert be.to_functions(d.draw_args('k', 3, 'v')) == \
        ['FCALL', 'seckill_draw', 1, 'k', 'COUNT', 3, 'BEACON', 'v']


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


def test_draw_committed_stream_entry():
    c = hashlib.sha256(SECRET).hexdigest()
    assert d.draw_committed([b'event', b'draw_committed', b'commitment', c.encode(),
                             b'beacon', b'drand quicknet round 7']) == (c, 'drand quicknet round 7')
    assert d.draw_committed({'event': 'draw_committed', 'commitment': c, 'beacon': ''}) == (c, None)
    assert d.draw_committed(['event', 'reserved', 'rid', 'r1', 'user', 'u', 'qty', '1']) is None
    # the order worker skips it (no rid, user, qty): it is acknowledged, not an order
    assert p.parse_entry('1-1', ['event', 'draw_committed', 'commitment', c, 'beacon', '']) is None


def report(**kw):
    base = ['total', 10, 'remaining', 10, 'pending', 0, 'confirmed', 0, 'invariant', 'ok',
            'mode', 'draw', 'entrants', 3, 'drawn', 0, 'left_to_draw', 0, 'waitlist', 0,
            'draw_stock', None, 'seed_commitment', hashlib.sha256(SECRET).hexdigest(), 'seed', None,
            'entrants_digest', '0' * 64, 'beacon', None, 'beacon_value', None, 'draw_seed', None]
    out = dict(zip(base[0::2], base[1::2]))
    out.update(kw)
    return [x for kv in out.items() for x in kv]


def test_info_fields():
    r = p.parse_report(report())
    assert (r['entrants'], r['draw_stock'], r['seed'], r['mode']) == (3, None, None, 'draw')
    info = d.draw_info(r)
    assert not info.started and info.seed_commitment == hashlib.sha256(SECRET).hexdigest()
    assert (info.entrants_digest, info.beacon, info.beacon_value, info.draw_seed) == \
        ('0' * 64, None, None, None)
    info = d.draw_info(p.parse_report(report(
        draw_stock=b'10', seed=SECRET_HEX.encode(), beacon=b'drand 7', beacon_value=b'\xff\x01',
        draw_seed=b'ab' * 32, entrants_digest=b'cd' * 32)))
    assert info.started and info.draw_stock == 10 and info.seed == SECRET_HEX
    assert (info.beacon, info.draw_seed, info.entrants_digest) == ('drand 7', 'ab' * 32, 'cd' * 32)
    # a value a decoding client could not decode hashes as the server's bytes
    assert d.value_bytes(info.beacon_value) == b'\xff\x01'
    assert d.draw_info(p.parse_report(report(mode='sale'))) is None
    assert d.draw_info(None) is None


# -- the digest, the seed, the order -------------------------------------------------

ENTRANTS5 = [('alice', 1), ('bob', 2), ('carol', 1), ('dave', 3), (b'\xff\x00raw', 1)]
BEACON_VALUE = 'beacon value 5f3a'

# Known answers, computed by the naive reference above and checked against it
# in the tests below: any implementation of the contract must give them.
VECTORS = {
    'commitment': '630dcd2966c4336691125448bbb25b4ff412a49c732db2c8abc1b8581bd710dd',
    'digests': ['823d47c95398dd7304bebd957f80b02e979e8ec899307944517c76d1c8274bb3',
                'f60f1bd320480959b77df66a340bede33b6129147f3612fece64e5dd127dde48',
                'd73c10a4a914969d6e7147f0df1c7d1c16e6ed43c96a5ee03dcca74fd03e8ce2',
                '263279fc22943082a113d94109b241d17baf602a2a05cdaf646055bff459b5d8',
                'd6cf9c1e859500e022d1bb94379bea63589e65586d8658d78ce17964e9c83999'],
    'draw_seed': '2fb53682cba9e34b8a433f072e33750cc553ca01f922295db70588e2e806c5d6',
    'draw_seed_beacon': '55cc73977b0bdeec811b18c1e6b6e6242bd9e3538a413197481c1ab0c86c5dd2',
    'order': [3, 1, 4, 0, 2],
    'order_beacon': [2, 4, 0, 3, 1],
    'order_beacon_20': [7, 1, 11, 14, 19, 5, 4, 2, 3, 0, 13, 12, 18, 8, 10, 17, 15, 9, 16, 6],
    # uniform(draw_seed_beacon, j, m) for these (j, m)
    'uniform': [((0, 1), 0), ((0, 2), 1), ((3, 7), 3), ((9, 1000), 643),
                ((2 ** 32 - 1, 2 ** 32 - 1), 4148298089),
                ((2, 2 ** 47 + 1), 6682571662036)],    # c = 0 rejected: the loop's second round
}


def test_known_answers_digest_and_seed():
    assert d.commitment(SECRET_HEX) == d.commitment(SECRET) == VECTORS['commitment']
    h = d.ZERO_DIGEST
    for k, (user, qty) in enumerate(ENTRANTS5):
        h = d.digest_step(h, user, qty)
        assert h.hex() == VECTORS['digests'][k] == naive_digest(ENTRANTS5[:k + 1]).hex()
    assert d.entrants_digest(ENTRANTS5).hex() == VECTORS['digests'][-1]
    assert d.entrants_digest([Entrant(u, q, 'entered') for u, q in ENTRANTS5]) == h
    assert d.entrants_digest([]) == d.ZERO_DIGEST == bytes(32)
    # a user id a decoding client could not decode comes back through surrogateescape
    assert d.digest_step(d.ZERO_DIGEST, p.text(b'\xff\x00raw'), 1) == \
        naive_digest([(b'\xff\x00raw', 1)])
    # a QTY of 2^32 or more (LIMIT allows one) counts with its low 32 bits
    assert d.digest_step(d.ZERO_DIGEST, 'u', 2 ** 32 + 3) == d.digest_step(d.ZERO_DIGEST, 'u', 3)
    s = d.draw_seed(SECRET_HEX, h.hex())
    assert s.hex() == VECTORS['draw_seed'] == sha(SECRET + h).hex()
    assert d.draw_seed(SECRET, h, '') == d.draw_seed(SECRET, h, None) == s
    assert d.draw_seed(SECRET, h, BEACON_VALUE).hex() == VECTORS['draw_seed_beacon'] == \
        sha(SECRET + h + BEACON_VALUE.encode()).hex()
    assert d.commitment_ok(SECRET_HEX, VECTORS['commitment'].upper())
    assert not d.commitment_ok(SECRET_HEX, hashlib.sha256(b'x').hexdigest())
    with pytest.raises(p.ProtocolError):
        d.seed_bytes('not hex')


def test_known_answers_order_and_uniform():
    s0 = bytes.fromhex(VECTORS['draw_seed'])
    s1 = bytes.fromhex(VECTORS['draw_seed_beacon'])
    assert d.permutation(s0, 5) == naive_order(s0, 5) == VECTORS['order']
    assert d.permutation(s1.hex(), 5) == naive_order(s1, 5) == VECTORS['order_beacon']
    assert d.permutation(s1, 20) == naive_order(s1, 20) == VECTORS['order_beacon_20']
    for (j, m), want in VECTORS['uniform']:
        assert d.uniform(s1, j, m) == naive_uniform(s1, j, m) == want, (j, m)
    # the rejection: uniform(S, 2, 2^47 + 1) took the second hash
    h0 = hashlib.sha1(s1 + struct.pack('>II', 2, 0)).digest()
    assert int.from_bytes(h0[:6], 'big') >= 2 ** 47 + 1
    with pytest.raises(ValueError):
        d.uniform(s1, 0, 0)


def test_fast_path_agrees_with_the_naive_reference():
    for k in range(40):
        s = sha(b'agree %d' % k)
        n = k * 7 % 61
        assert d.permutation(s, n) == naive_order(s, n), k
        for j, m in [(k, 1 + k), (k * 1000, 2 ** 32 - 1 - k), (k, 2 ** 47 + 1 + k * 2 ** 40),
                     (k, 2 ** 48 - 1)]:
            assert d.uniform(s, j, m) == naive_uniform(s, j, m), (k, j, m)
    assert d.permutation(SECRET, 0) == [] and d.permutation(SECRET, 1) == [0]
    # a permutation of the arrival indices
    assert sorted(d.permutation(SECRET, 500)) == list(range(500))


def test_lazy_order_is_the_whole_order_however_the_work_is_split():
    s = sha(b'lazy')
    whole = naive_order(s, 300)
    order = d.DrawOrder(s, 300)
    got = []
    for chunk in (1, 4, 37, 100, 1000):      # calls that each look at a few entrants
        got += list(itertools.islice(order, chunk))
    assert got == whole and order.j == 300
    assert list(order) == []
    # the lazy walk keeps only what it touched
    big = d.DrawOrder(s, 10 ** 9)
    first = list(itertools.islice(big, 50))
    assert len(set(first)) == 50 and len(big._moved) <= 50
    with pytest.raises(ValueError):
        d.DrawOrder(s, 2 ** 32)


def test_order_and_simulation():
    ents = [Entrant(u, q, 'entered') for u, q in ENTRANTS5]
    s = d.draw_seed(SECRET, d.entrants_digest(ents))
    assert [e.user for e in d.draw_order(s, ents)] == ['dave', 'bob', b'\xff\x00raw', 'alice',
                                                       'carol']
    # 4 units: dave (3) wins, bob (2) does not fit 1, the raw id (1) wins, alice and
    # carol do not fit 0: an entrant that does not fit keeps its place, the walk goes on
    assert d.winners(s, ents, 4) == ['dave', b'\xff\x00raw']
    assert d.winners(s, ents, 4) == naive_winners(SECRET, ENTRANTS5, b'', 4)
    assert d.winners(s, ents, 0) == []
    assert d.winners(s, ents, 100) == [e.user for e in d.draw_order(s, ents)]
    order, wins = d.simulate(s, ents, 5)
    assert [e.user for e, w in zip(order, wins) if w] == ['dave', 'bob']
    # arrival order is part of the digest: the same entrants in another order
    # give another seed, and so another draw
    assert d.entrants_digest(ents[::-1]) != d.entrants_digest(ents)
    for stock in range(9):
        for bv in (b'', b'v1', BEACON_VALUE.encode()):
            assert d.winners(d.draw_seed(SECRET, d.entrants_digest(ents), bv), ents, stock) == \
                naive_winners(SECRET, ENTRANTS5, bv, stock)


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
    """The Fisher-Yates order over 2,500 draw seeds: every arrival index
    wins as often as the others, within chance."""
    x, wins = chi2_wins(20, 5, SEEDS, d.winners)
    print('fairness: chi2 = %.2f over 19 dof (p = 0.001 critical %.3f), wins %d..%d, '
          'expected %d' % (x, CHI2_19_P001, min(wins.values()), max(wins.values()),
                           len(SEEDS) * 5 // 20))
    assert x < CHI2_19_P001


def test_fairness_statistic_catches_a_biased_order():
    def naive_swap_everywhere(seed, ents, k):
        # the classic broken shuffle: swap a[j] with any a[t], t in 0..n-1
        # (n^n paths onto n! orders: some orders come up more often)
        n = len(ents)
        a = list(range(n))
        for j in range(n):
            t = d.uniform(seed, j, n)
            a[j], a[t] = a[t], a[j]
        return [ents[i].user for i in a[:k]]

    def by_arrival(seed, ents, k):
        # first come, first served: the first five entrants always win
        return [e.user for e in ents[:k]]

    def unseeded(seed, ents, k):
        # an order that ignores the seed: the same five users win every time
        return d.winners(SECRET, ents, k)
    assert chi2_wins(20, 5, SEEDS, naive_swap_everywhere)[0] > CHI2_19_P001
    assert chi2_wins(20, 5, SEEDS, by_arrival)[0] > CHI2_19_P001
    assert chi2_wins(20, 5, SEEDS, unseeded)[0] > CHI2_19_P001


# -- verification -----------------------------------------------------------------

BEACON = 'drand quicknet round 1234567'


def drawn_sale(qtys, stock, secret=SECRET, promoted=(), beacon=None, beacon_value=None):
    """INFO and ENTRANTS as a correct server would show them after the draw
    (the entrants u0, u1, ... entered in that order)."""
    ents = [Entrant('u%d' % i, q, 'entered') for i, q in enumerate(qtys)]
    digest = d.entrants_digest(ents)
    s = d.draw_seed(secret, digest, beacon_value)
    won = set(d.winners(s, ents, stock))
    assert won == set(naive_winners(secret, [(e.user, e.qty) for e in ents],
                                    (beacon_value or '').encode(), stock))
    ents = [e._replace(result='drawn' if e.user in won else
                       'promoted' if e.user in promoted else 'entered') for e in ents]
    held = sum(e.qty for e in ents if e.result != 'entered')
    info = d.DrawInfo(entrants=len(ents), drawn=len(won), left_to_draw=0, waitlist=0,
                      remaining=0, draw_stock=stock, seed_commitment=d.commitment(secret),
                      seed=secret.hex(), held=held, entrants_digest=digest.hex(), beacon=beacon,
                      beacon_value=beacon_value, draw_seed=s.hex())
    return info, ents


def published(info):
    return dict(commitment=info.seed_commitment, beacon=info.beacon,
                beacon_value=info.beacon_value)


def test_verify_ok_and_promoted():
    info, ents = drawn_sale([1, 2, 1, 3, 1, 1, 2], 5)
    v = d.verify(info, ents, 'k', commitment=info.seed_commitment)
    assert v.ok and v.winners == sum(e.result == 'drawn' for e in ents), v.message
    assert v.check is None and v.unchecked == []
    losers = [e.user for e in ents if e.result != 'drawn']
    info, ents = drawn_sale([1, 2, 1, 3, 1, 1, 2], 5, promoted=losers[:1])
    assert d.verify(info, ents, **published(info)).ok   # a promotion is not a drawn winner
    info, ents = drawn_sale([1, 2, 1, 3, 1, 1, 2], 5, beacon=BEACON, beacon_value='v 9')
    v = d.verify(info, ents, **published(info))
    assert v.ok and 'beacon' in v.message, v.message


def test_verify_without_published_values_is_unchecked():
    info, ents = drawn_sale([1, 2, 1, 3], 3)
    v = d.verify(info, ents)
    assert v.status == d.UNCHECKED and not v.ok and v.unchecked == [d.NOT_PUBLISHED]
    assert d.NOT_PUBLISHED == 'not checked against a published commitment'
    # a sale with a beacon: its value unchecked unless given
    info, ents = drawn_sale([1, 2, 1, 3], 3, beacon=BEACON, beacon_value='v 9')
    v = d.verify(info, ents, commitment=info.seed_commitment, beacon=BEACON)
    assert v.status == d.UNCHECKED and len(v.unchecked) == 1 and 'beacon value' in v.unchecked[0]
    # without a commitment the name is checked when given, not otherwise
    assert d.verify(info, ents, beacon_value='v 9').unchecked == [d.NOT_PUBLISHED]
    assert d.verify(info, ents, beacon='other', beacon_value='v 9').status == d.BAD_BEACON


def test_tampering_each_fails_the_check_it_should():
    info, ents = drawn_sale([1, 2, 1, 3, 1, 1, 2, 1, 1, 2], 6, beacon=BEACON,
                            beacon_value='v 9')
    pub = published(info)
    assert d.verify(info, ents, **pub).ok

    def check(v, status, check):
        assert (v.status, v.check) == (status, check), v.message
        assert not v.ok
        return v

    # 1. a commitment other than the published one (the sale REPLACEd after it
    # was published, with a new secret: everything else consistent)
    other = sha(b'another secret')
    forged_info, forged_ents = drawn_sale([1, 2, 1, 3, 1, 1, 2, 1, 1, 2], 6, secret=other,
                                          beacon=BEACON, beacon_value='v 9')
    assert d.verify(forged_info, forged_ents, commitment=d.commitment(other), beacon=BEACON,
                    beacon_value='v 9').ok
    v = check(d.verify(forged_info, forged_ents, **pub), d.BAD_COMMITMENT, 'commitment')
    assert 'published commitment' in v.message
    # ... also before the draw: the published commitment is checked from INIT on
    check(d.verify(replace(forged_info, seed=None, draw_stock=None), [], **pub),
          d.BAD_COMMITMENT, 'commitment')
    # a seed that is not SHA-256-committed
    check(d.verify(replace(info, seed=sha(b'x').hex()), ents, **pub), d.BAD_COMMITMENT,
          'commitment')
    # 2. the beacon: another name, another value than the public one, none
    check(d.verify(info, ents, **dict(pub, beacon='drand round 1')), d.BAD_BEACON, 'beacon')
    check(d.verify(info, ents, **dict(pub, beacon=None)), d.BAD_BEACON, 'beacon')
    check(d.verify(info, ents, **dict(pub, beacon_value='v 10')), d.BAD_BEACON, 'beacon')
    check(d.verify(replace(info, beacon_value=None), ents, **pub), d.BAD_BEACON, 'beacon')
    # INFO showing another beacon value (S recomputed from it no longer matches)
    check(d.verify(replace(info, beacon_value='v 10'), ents, commitment=pub['commitment'],
                   beacon=BEACON), d.BAD_SEED, 'draw_seed')
    check(d.verify(replace(info, beacon_value='v 10'), ents, **pub), d.BAD_BEACON, 'beacon')
    # 3. an entrant's QTY, the arrival order, an entrant left out
    qty = list(ents)
    qty[3] = qty[3]._replace(qty=qty[3].qty + 1)
    check(d.verify(info, qty, **pub), d.BAD_DIGEST, 'entrants_digest')
    swapped = list(ents)
    swapped[0], swapped[1] = swapped[1], swapped[0]
    check(d.verify(info, swapped, **pub), d.BAD_DIGEST, 'entrants_digest')
    v = check(d.verify(info, ents[1:], **pub), d.BAD_DIGEST, 'entrants_digest')
    assert 'listed 9' in v.message
    check(d.verify(replace(info, entrants_digest=None), ents, **pub), d.BAD_DIGEST,
          'entrants_digest')
    # 4. a draw seed that is not SHA-256(seed || digest || beacon value)
    check(d.verify(replace(info, draw_seed=sha(b'ground').hex()), ents, **pub), d.BAD_SEED,
          'draw_seed')
    # 5. the winners: one win moved from a winner to a loser
    s = bytes.fromhex(info.draw_seed)
    order, wins = d.simulate(s, ents, info.draw_stock)
    loser = next(e for e, w in zip(order, wins) if not w)
    winner = [e for e, w in zip(order, wins) if w][-1]
    forged = [e._replace(result='drawn' if e.user == loser.user else
                         'entered' if e.user == winner.user else e.result) for e in ents]
    v = check(d.verify(info, forged, 'k', **pub), d.MISMATCH, 'winners')
    assert v.mismatches == 2
    first_pos = min(order.index(loser), order.index(winner))
    assert v.first['position'] == first_pos and v.first['user'] == order[first_pos].user
    assert v.first['arrival'] == ents.index(order[first_pos])
    # the first failing check names the verdict: a commitment and a QTY both wrong
    check(d.verify(replace(info, seed_commitment=sha(b'c').hex()), qty, **pub),
          d.BAD_COMMITMENT, 'commitment')
    check(d.verify(replace(info, draw_seed=sha(b'g').hex()), forged, **pub), d.BAD_SEED,
          'draw_seed')


def test_verify_counts_units_held_outside_the_draw():
    """Every winner right, but the sale's reservations hold more units than
    its winners' QTYs (stock taken for an order the draw did not make):
    a mismatch that names the figure; 0 on the honest sale."""
    info, ents = drawn_sale([1, 2, 1, 3, 1, 1, 2], 5)
    pub = published(info)
    assert d.verify(info, ents, **pub).outside_draw == 0
    v = d.verify(replace(info, held=info.held + 3), ents, **pub)
    assert v.status == d.MISMATCH and v.check == 'stock' and v.outside_draw == 3
    assert 'did not make' in v.message, v.message
    assert d.verify(replace(info, held=info.held - 1), ents, **pub).status == d.MISMATCH


def test_verify_not_ready():
    info, ents = drawn_sale([1] * 5, 2)
    assert d.verify(None, []).status == d.NOT_A_DRAW
    v = d.verify(replace(info, seed=None, draw_stock=None, draw_seed=None), ents, **published(info))
    assert v.status == d.NOT_DRAWN and not v.ok
    v = d.verify(replace(info, left_to_draw=3), ents, **published(info))
    assert v.status == d.IN_PROGRESS and not v.ok


def test_combine_and_split_verdicts():
    pi, pe = drawn_sale([1] * 4, 2)
    good = d.verify(pi, pe, 'p0', commitment=pi.seed_commitment)
    bad = d.verify(pi, [e._replace(result='entered') for e in pe], 'p1',
                   commitment=pi.seed_commitment)
    unchecked = d.verify(pi, pe, 'p2')
    assert d.combine('n', [good, good]).ok
    v = d.combine('n', [good, bad])
    assert v.status == d.MISMATCH and v.message.startswith('part p1') and len(v.parts) == 2
    assert v.as_dict()['parts'][1]['status'] == d.MISMATCH and v.check == 'winners'
    # a failure outranks an unchecked part, whichever comes first
    assert d.combine('n', [unchecked, bad]).status == d.MISMATCH
    v = d.combine('n', [good, unchecked])
    assert v.status == d.UNCHECKED and v.unchecked == [d.NOT_PUBLISHED]
    # split verdicts: the published keys must be the parts
    parts = [replace(good, key='a'), replace(good, key='b')]
    assert d.verify_split('n', 'r1', parts, {'a': 'x', 'b': 'y'}).ok
    v = d.verify_split('n', 'r1', parts, {'a': 'x', 'b': 'y', 'c': 'z'})
    assert v.status == d.BAD_COMMITMENT and 'c' in v.message
    # shares are checked for unchecked parts too
    uneven = [replace(unchecked, key='a', draw_stock=4, entrants=4),
              replace(unchecked, key='b', draw_stock=0, entrants=4)]
    v = d.verify_split('n', 'r1', uneven)
    assert v.status == d.MISMATCH and v.check == 'shares'


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
    res, sent = run(draw_ops.draw_all('k', 2), [[2, 8, 5], [2, 6, 3], [0, 6, 1], [1, 5, 0]])
    assert res == d.Drawn(5, 5, 0)
    assert sent == [['SECKILL.DRAW', 'k', 'COUNT', 2]] * 4
    with pytest.raises(p.ProtocolError, match='no progress'):
        run(draw_ops.draw_all('k'), [[0, 8, 5], [0, 8, 5]])
    # the beacon's value goes with every call (the server takes the same value again)
    res, sent = run(draw_ops.draw_all('k', 2, 'v 9'), [[2, 8, 5], [1, 7, 0]])
    assert sent == [['SECKILL.DRAW', 'k', 'COUNT', 2, 'BEACON', 'v 9']] * 2


def info_reply(info):
    return report(entrants=info.entrants, draw_stock=info.draw_stock, seed=info.seed,
                  left_to_draw=info.left_to_draw, pending=info.held,
                  seed_commitment=info.seed_commitment, entrants_digest=info.entrants_digest,
                  beacon=info.beacon, beacon_value=info.beacon_value, draw_seed=info.draw_seed)


def test_entrants_pages_and_verify_op():
    info, ents = drawn_sale([1, 1, 2, 1], 3, beacon=BEACON, beacon_value='v 9')
    rep = info_reply(info)
    flat = [[e.user, e.qty, e.result] for e in ents]
    pages = [['7', list(itertools.chain(*flat[:3]))], ['0', list(itertools.chain(*flat[3:]))]]
    got, sent = run(draw_ops.all_entrants('k', 3), pages)
    assert got == ents and [s[2] for s in sent] == [0, '7']
    v, sent = run(draw_ops.verify('k', 3, **published(info)), [rep] + pages + [rep])
    assert v.ok, v.message
    assert [s[0] for s in sent] == ['SECKILL.INFO', 'SECKILL.ENTRANTS', 'SECKILL.ENTRANTS',
                                    'SECKILL.INFO']
    v, _ = run(draw_ops.verify('k', 3), [rep] + pages + [rep])
    assert v.status == d.UNCHECKED
    v, _ = run(draw_ops.verify('k', 3, **dict(published(info), beacon_value='v 8')),
               [rep] + pages + [rep])
    assert v.status == d.BAD_BEACON
    # replaced while the entrants were read
    v, _ = run(draw_ops.verify('k', 3), [rep] + pages + [report(seed=sha(b'x').hex(),
                                                                  draw_stock=3)])
    assert v.status == d.IN_PROGRESS
    # not drawn: no page is read; a published commitment is still checked
    v, sent = run(draw_ops.verify('k'), [report()])
    assert v.status == d.NOT_DRAWN and len(sent) == 1
    v, sent = run(draw_ops.verify('k', commitment=sha(b'y').hex()), [report()])
    assert v.status == d.BAD_COMMITMENT and len(sent) == 1


# -- the command line, on a canned verdict ------------------------------------------

class _Closed:
    def close(self):
        pass


@pytest.fixture
def fake_verify(monkeypatch):
    """verify-draw with Sale / SplitSale.verify_draw replaced: the calls' arguments."""
    from seckill import sale as sale_mod
    from seckill import split as split_mod
    calls = []
    state = {'verdict': None}

    def fake(self, commitment=None, beacon=None, beacon_value=None):
        calls.append((self.key if hasattr(self, 'key') else 'split', commitment, beacon,
                      beacon_value))
        return state['verdict']
    monkeypatch.setattr(cli, '_redis', lambda url, **kw: _Closed())
    monkeypatch.setattr(sale_mod.Sale, '__init__', lambda self, r, key, **kw: setattr(self, 'key', key))
    monkeypatch.setattr(sale_mod.Sale, 'verify_draw', fake)
    monkeypatch.setattr(split_mod.SplitSale, '__init__', lambda self, r, name, **kw: None)
    monkeypatch.setattr(split_mod.SplitSale, 'verify_draw', fake)
    return calls, state


def test_cli_verify_draw_exit_codes_and_lines(fake_verify, capsys, tmp_path):
    calls, state = fake_verify
    info, ents = drawn_sale([1, 2, 1], 2, beacon=BEACON, beacon_value='v 9')
    pub = published(info)
    state['verdict'] = d.verify(info, ents, 'k', **pub)
    argv = ['verify-draw', 'k', '--commitment', info.seed_commitment, '--beacon', BEACON,
            '--beacon-value', 'v 9']
    assert cli.main(argv) == 0
    assert calls[-1] == ('k', info.seed_commitment, BEACON, 'v 9')
    out = capsys.readouterr().out
    assert 'k: OK' in out and 'draw_seed %s' % info.draw_seed in out
    assert 'not checked' not in out
    # without --commitment: the sale against itself, exit 3 and the line
    state['verdict'] = d.verify(info, ents, 'k', beacon_value='v 9')
    assert cli.main(['verify-draw', 'k', '--beacon-value', 'v 9']) == 3
    assert calls[-1] == ('k', None, None, 'v 9')
    assert 'not checked against a published commitment' in capsys.readouterr().out.splitlines()
    # a failure: exit 1, the check named; without --commitment the line too
    state['verdict'] = d.verify(replace(info, draw_seed=sha(b'g').hex()), ents, 'k')
    assert cli.main(['verify-draw', 'k']) == 1
    out = capsys.readouterr().out
    assert 'BAD SEED (check: draw_seed)' in out
    assert 'not checked against a published commitment' in out.splitlines()
    state['verdict'] = d.verify(replace(info, seed=None, draw_stock=None), [], 'k', **pub)
    assert cli.main(argv + ['--json']) == 2
    assert json.loads(capsys.readouterr().out)['status'] == d.NOT_DRAWN
    # split: PART=HEX, @FILE
    state['verdict'] = d.Verdict(d.OK, 'fine', key='s')
    assert cli.main(['verify-draw', '--split', 's', '--commitment', 'sale:{s:0}=aa',
                     '--commitment', 'sale:{s:1}=bb']) == 0
    assert calls[-1] == ('split', {'sale:{s:0}': 'aa', 'sale:{s:1}': 'bb'}, None, None)
    f = tmp_path / 'published.json'
    f.write_text(json.dumps({'sale:{s:0}': 'cc', 'sale:{s:1}': 'dd'}))
    assert cli.main(['verify-draw', '--split', 's', '--commitment', '@%s' % f]) == 0
    assert calls[-1][1] == {'sale:{s:0}': 'cc', 'sale:{s:1}': 'dd'}
    for bad in (['verify-draw', 'k', '--commitment', 'a=b'],
                ['verify-draw', 'k', '--commitment', 'aa', '--commitment', 'bb'],
                ['verify-draw', '--split', 's', '--commitment', 'aa']):
        with pytest.raises(SystemExit):
            cli.main(bad)


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
