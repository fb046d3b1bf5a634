"""The split-sale audit (seckill.split_audit) without a server: the audit of
a round of reports (in flight, lost debits, keys of another round), the
SOLD_OUT rule, repair planning, the layout recovered from the keys."""

import pytest

from seckill import split_audit as sa
from seckill import split_protocol as sp

LAY = sp.Layout(name='s', total=100, pool='P', parts=('A', 'B', 'C'), initial=(40, 20, 20, 20),
                round='r1')


def st(key, total, remaining, pending=0, confirmed=0, sent=None, received=None, invariant='ok',
       round_='r1', peers=None):
    """A key's report as INFO gives it: every declared peer listed (by
    default the peers LAY gives the key), with its totals."""
    sent, received = sent or {}, received or {}
    if peers is None:
        peers = LAY.peers(key) if key in LAY.keys else []
    rows = [(peer, sent.get(peer, 0), received.get(peer, 0))
            for peer in sorted(set(peers) | set(sent) | set(received))]
    report = {'total': total, 'remaining': remaining, 'pending': pending, 'confirmed': confirmed,
              'released': 0, 'invariant': invariant, 'peers': rows}
    if round_ is not None:
        report['round'] = round_
    return sa.key_state(key, report)


def healthy():
    # P sent 10 to A (received), 5 to B (in flight); A sold 25.
    return {'P': st('P', 40, 25, sent={'A': 10, 'B': 5}),
            'A': st('A', 20, 5, pending=20, confirmed=5, received={'P': 10}),
            'B': st('B', 20, 20), 'C': st('C', 20, 20)}


def test_audit_ok_with_flight():
    a = sa.audit(LAY, healthy())
    assert a.invariant == 'ok', a.problems
    assert a.in_flight == 5 and a.flights == {('P', 'B'): (5, 0)}
    assert (a.remaining, a.pending, a.confirmed) == (70, 20, 5)
    assert a.remaining + a.pending + a.confirmed + a.in_flight == 100
    assert a.available == 75 and not sa.sold_out(a, 1)
    # Never SOLD_OUT while something is in flight, even past what it brings.
    assert not sa.sold_out(a, 76)
    steps = sa.repair_plan(a)
    assert steps == [sa.RepairStep(sa.RECV, 'P', 'B', 5)]



def test_a_recreated_destination_is_no_flight():
    """Issue 23, finding 8: P counted 5 units for B's incarnation 0000000b;
    B was deleted and re-created (incarnation 0000000c, received 0). That is
    no flight to repair (a RECV would credit the units a second time) but a
    problem; a flight to the incarnation that is still there is repaired
    with TO naming it."""
    states = healthy()
    states['P'].sent_to = {'A': '0000000a', 'B': '0000000b'}
    states['A'].incarnation, states['B'].incarnation = '0000000a', '0000000b'
    a = sa.audit(LAY, states)
    assert a.invariant == 'ok', a.problems
    assert sa.repair_plan(a) == [sa.RepairStep(sa.RECV, 'P', 'B', 5, to='0000000b')]
    states['B'].incarnation = '0000000c'
    a = sa.audit(LAY, states)
    assert a.flights == {} and a.in_flight == 0 and sa.repair_plan(a) == []
    assert a.invariant == 'broken' and any('re-created' in x for x in a.problems), a.problems
    # The report's fields as INFO gives them.
    ks = sa.key_state('P', {'total': 1, 'remaining': 1, 'pending': 0, 'confirmed': 0, 'invariant': 'ok',
                            'round': 'r1', 'incarnation': '00000001', 'peers': [['A', 3, 0]],
                            'sent_to': [['A', '0000000a']]})
    assert (ks.incarnation, ks.sent_to) == ('00000001', {'A': '0000000a'})

def test_audit_lost_debit():
    s = healthy()
    s['P'] = st('P', 40, 35, sent={'B': 5})          # P restored from before its SEND to A
    a = sa.audit(LAY, s)
    assert a.invariant == 'broken' and a.lost_debit == 10
    assert a.negative == {('P', 'A'): 10}
    assert any('lost debit' in x for x in a.problems)
    # Each key's own invariant holds: only the pair shows the loss, and
    # the units exist twice (remaining + ... + in_flight passes the total).
    assert any('remaining + pending + confirmed + in_flight = 110' in x for x in a.problems)
    steps = sa.repair_plan(a, {('P', 'A'): (0, 10)})
    assert steps[-1] == sa.RepairStep(sa.DEBIT, 'P', 'A', 10, sp.debit_id('A', 10))


def test_audit_missing_and_broken_keys():
    s = healthy()
    s['C'] = None
    a = sa.audit(LAY, s)
    assert a.invariant == 'broken' and a.missing == ['C']
    s = healthy()
    s['B'] = st('B', 20, 20, invariant='broken')
    assert sa.audit(LAY, s).invariant == 'broken'
    s = healthy()
    s['C'] = st('C', 25, 25)                         # INIT totals no longer sum to 100
    assert any('INIT totals' in x for x in sa.audit(LAY, s).problems)
    s = healthy()
    s['C'] = st('C', 20, 20, received={'X': 0})
    assert any('not a key of this sale' in x for x in sa.audit(LAY, s).problems)


def test_audit_refuses_keys_of_another_round():
    """Issue 14 finding 2: a cached pool report of round r1 beside parts
    replaced into round r2. The old audit saw 5 units in flight to B (r1's
    sent counter against r2's reset received counter) and a repair would
    have RECV'd them into the new round; now the keys in another round
    make the audit `stale` and broken, whatever the counters say."""
    s = healthy()
    s['B'] = st('B', 20, 20, round_='r2')
    s['C'] = st('C', 20, 20, round_=None)            # a plain sale under a part's name
    a = sa.audit(LAY, s)
    assert a.stale == {'B': 'r2', 'C': None} and a.invariant == 'broken'
    assert any('B: round r2, the layout says round r1' in x for x in a.problems)
    assert any('C: not a part of a split sale' in x for x in a.problems)
    assert sa.audit(LAY, healthy()).stale == {}


def test_sold_out_needs_nothing_in_flight():
    s = {'P': st('P', 40, 0, sent={'A': 40}), 'A': st('A', 20, 0, confirmed=20, received={'P': 0}),
         'B': st('B', 20, 0, confirmed=20), 'C': st('C', 20, 0, confirmed=20)}
    a = sa.audit(LAY, s)
    assert a.in_flight == 40 and not sa.sold_out(a, 1)
    s['A'] = st('A', 20, 40, confirmed=20, received={'P': 40})
    a = sa.audit(LAY, s)
    assert not sa.sold_out(a, 1) and a.invariant == 'ok'
    s['A'] = st('A', 20, 0, confirmed=60, received={'P': 40})
    a = sa.audit(LAY, s)
    assert sa.sold_out(a, 1) and a.invariant == 'ok'


def _found(lay, round_=None, drop=(), **override):
    """INFO states of lay's keys as recover() reads them."""
    out = {}
    for i, k in enumerate(lay.keys):
        if k in drop:
            out[k] = None
            continue
        out[k] = override.get(k) or st(k, lay.initial[i], lay.initial[i], peers=lay.peers(k),
                                       round_=round_ or lay.round)
    return out


def test_recover_layout():
    lay = sp.make_layout('1001', 10000, '1001.pool', ['1001.p0', '1001.p1.1', '1001.p2.1'],
                         stream=True, round_='abcd')
    found = _found(lay)
    assert sa.unread_peers({lay.pool: found[lay.pool]}) == sorted(lay.parts)
    assert sa.unread_peers(found) == []
    back = sa.recover_layout('1001', found, streams=True)
    assert back == lay
    assert sa.recover_layout('1001', found).streams == ()
    # The totals are the INIT totals, whatever has been sold or moved since.
    sold = dict(found)
    sold[lay.parts[0]] = st(lay.parts[0], 2000, 3, pending=2500, peers=lay.peers(lay.parts[0]),
                            received={lay.pool: 503}, round_='abcd')
    assert sa.recover_layout('1001', sold, streams=True) == lay


def test_recover_layout_refusals():
    lay = sp.make_layout('n', 100, 'n.pool', ['n.p0', 'n.p1', 'n.p2'], round_='r1')
    cases = {
        'do not exist': _found(lay, drop=(lay.parts[1],)),
        'different rounds': _found(lay, **{lay.parts[2]: st(lay.parts[2], 20, 20, round_='r2',
                                                            peers=lay.peers(lay.parts[2]))}),
        'plain': _found(lay, **{lay.parts[2]: st(lay.parts[2], 20, 20, round_=None, peers=[])}),
        'declares peers': _found(lay, **{lay.pool: st(lay.pool, 40, 40, round_='r1',
                                                      peers=['sale:{n.p0}', 'sale:{n.p1}'])}),
        'not a key of its placement': dict(_found(lay), **{'sale:{m.p3}': st('sale:{m.p3}', 1, 1)}),
        'not 0 .. P-1': {k: v for k, v in _found(lay).items() if k != lay.parts[1]},
        'no pool': {k: v for k, v in _found(lay).items() if k != lay.pool},
        'two pools': dict(_found(lay), **{'sale:{n.pool.1}': st('sale:{n.pool.1}', 1, 1)}),
        'two keys for part 1': dict(_found(lay), **{'sale:{n.p1.4}': st('sale:{n.p1.4}', 1, 1)}),
        'no key found': {},
    }
    for what, states in cases.items():
        with pytest.raises(sa.RecoverError, match=what):
            sa.recover_layout('n', states)
