"""Draw sales against real servers (docs/draw-sales.md): RESERVE refused,
ENTER's statuses, DRAW in short calls, ENTRANTS paged, the draw verified by
the client and by `python -m seckill verify-draw` against the published
commitment (and a tampered verification refused, a sale REPLACEd after END
refused against the commitment published before, a wrong beacon value
refused), the same with seckill.aio and on the Functions library; a split
sale's draw on a plain redis.Redis with several parts, interrupted and
finished.

The module's tests run on SECKILL_MODULE (the build), the library's on
SECKILL_LIBRARY (the repository's functions/seckill.lua)."""

from __future__ import annotations

import asyncio
import hashlib
import json
import time

import pytest
import redis

from seckill import Sale, SplitSale
from seckill import __main__ as cli
from seckill import draw as d
from seckill import library
from seckill.aio import Sale as AioSale
from seckill.faults import Crash, Faults
from seckill.plain.steps import call
from seckill.testing import RedisServer

from test_draw_protocol import naive_digest, naive_winners
from test_split_cluster import users_homed

WINDOW_MS = 400      # registration stays open this long after INIT


@pytest.fixture
def dr(r, module):
    """The conftest's client `r`, on the module."""
    return r


@pytest.fixture(scope='module')
def lib_client():
    """A server without the module, the Functions library loaded (from
    $SECKILL_LIBRARY or the repository's functions/seckill.lua)."""
    srv = RedisServer(load_module=False).start()
    c = srv.client()
    with open(library.source_path()) as f:
        c.execute_command('FUNCTION', 'LOAD', 'REPLACE', f.read())
    try:
        yield c
    finally:
        c.close()
        srv.stop()


@pytest.fixture(params=['module', 'functions'])
def backend_client(request):
    if request.param == 'module':
        return request.getfixturevalue('dr'), 'module'
    return request.getfixturevalue('lib_client'), 'functions'


def wait_past(sale, end_ms):
    """Until the server's clock is at or past `end_ms` (DRAW runs after END)."""
    while sale.server_ms() < end_ms:
        time.sleep(0.02)


def new_draw_sale(r, key, total, backend=None, **kw):
    sale = Sale(r, key, backend=backend)
    r.delete(key)
    end = sale.server_ms() + WINDOW_MS
    assert sale.init(total, end_ms=end, draw=True, **kw) is True
    return sale, end


# -- one key ----------------------------------------------------------------------

def test_reserve_refused_and_enter_statuses(backend_client):
    r, backend = backend_client
    sale, end = new_draw_sale(r, 'sale:{dd}', 3, backend, limit=2, hold_ms=60000)
    res = sale.reserve('u1')
    assert (res.status, res.rid, res.remaining) == ('DRAW', None, 3)
    info = sale.info()
    assert (info['mode'], info['entrants'], info['remaining'], info['seed']) == ('draw', 0, 3, None)
    assert len(info['seed_commitment']) == 64 and info['draw_stock'] is None
    assert (info['entrants_digest'], info['beacon'], info['beacon_value'], info['draw_seed']) == \
        ('0' * 64, None, None, None)
    fields = list(info)
    assert fields[fields.index('mode'):fields.index('mode') + 12] == [
        'mode', 'entrants', 'drawn', 'left_to_draw', 'waitlist', 'draw_stock', 'seed_commitment',
        'seed', 'entrants_digest', 'beacon', 'beacon_value', 'draw_seed']
    assert sale.enter('u1', qty=2, reqid='o-1') == ('ENTERED', 1)
    assert sale.enter('u1', qty=1) == ('ALREADY_ENTERED', 1)       # the first entry stands
    with pytest.raises(redis.ResponseError, match='LIMIT'):
        sale.enter('u2', qty=3)
    with pytest.raises(redis.ResponseError, match='REQID'):
        sale.enter('u3', reqid='o-1')
    assert sale.enter('u2') == ('ENTERED', 2)
    assert sale.info()['entrants_digest'] == naive_digest([('u1', 2), ('u2', 1)]).hex()
    assert Sale(r, 'sale:{none}', backend=backend).enter('u1') == ('NO_SALE', 0)
    with pytest.raises(redis.ResponseError, match='END'):
        sale.draw()
    assert sale.verify_draw().status == d.NOT_DRAWN
    # a sale that is not a draw sale refuses the draw commands
    plain = Sale(r, 'sale:{plain}', backend=backend)
    plain.init(1, replace=True)
    for refused in (lambda: plain.enter('u1'), lambda: plain.draw(),
                    lambda: list(plain.entrants())):
        with pytest.raises(redis.ResponseError, match='not a draw sale'):
            refused()
    # registration not started yet
    later = Sale(r, 'sale:{later}', backend=backend)
    now = later.server_ms()
    later.init(1, start_ms=now + 60000, end_ms=now + 120000, draw=True, replace=True)
    assert later.enter('u1').status == 'NOT_STARTED'
    wait_past(sale, end)
    assert sale.enter('u9') == ('ENDED', 2)
    with pytest.raises(redis.ResponseError, match='declared no beacon'):
        sale.draw(beacon_value='v')              # changes nothing
    assert sale.info()['seed'] is None
    assert sale.draw_all() == (2, 0, 0)          # both fit: 2 + 1 units of 3
    assert sale.enter('u9').status == 'DRAWN'
    assert Sale(r, 'sale:{none}', backend=backend).info() is None
    assert list(Sale(r, 'sale:{none}', backend=backend).entrants()) == []


def test_enter_draw_verify(backend_client, monkeypatch, capsys):
    r, backend = backend_client
    stock, n = 7, 40
    sale, end = new_draw_sale(r, 'sale:{de}', stock, backend, limit=3, hold_ms=60000,
                              stream='sale:{de}:events')
    qty = {('user:%d' % i): 1 + i % 3 for i in range(n)}
    for i, (u, q) in enumerate(qty.items()):
        assert sale.enter(u, qty=q, reqid='ord-%d' % i) == ('ENTERED', i + 1)
    commitment = sale.commitment()
    assert commitment == sale.info()['seed_commitment']
    # INIT's stream entry: the values to publish
    _id, committed = r.xrange('sale:{de}:events', count=1)[0]
    assert d.draw_committed(committed) == (commitment, None)
    assert committed == {'event': 'draw_committed', 'commitment': commitment, 'beacon': ''}
    wait_past(sale, end)
    first = sale.draw(count=1)
    assert first.drawn == 1 and first.left_to_draw > 0
    rest = sale.draw_all(count=2)
    assert rest.left_to_draw == 0
    info = sale.info()
    assert info['seed_commitment'] == commitment and d.commitment_ok(info['seed'], commitment)
    assert info['draw_stock'] == stock and info['left_to_draw'] == 0
    ents = list(sale.entrants(count=7))
    assert [e.user for e in ents] == list(qty)                    # the order they entered
    assert all(e.qty == qty[e.user] for e in ents)
    # the digest, the seed and the winners recomputed here by the tests' naive
    # reference (the contract's pseudo-code), not the package
    seed = bytes.fromhex(info['seed'])
    assert info['entrants_digest'] == naive_digest(list(qty.items())).hex()
    assert info['draw_seed'] == hashlib.sha256(seed + naive_digest(list(qty.items()))).hexdigest()
    assert (info['beacon'], info['beacon_value']) == (None, None)
    expect = naive_winners(seed, list(qty.items()), b'', stock)
    left = stock - sum(qty[u] for u in expect)
    assert sorted(e.user for e in ents if e.result == 'drawn') == sorted(expect)
    assert first.drawn + rest.drawn == len(expect)
    assert info['remaining'] == left and info['pending'] == stock - left
    for i, u in enumerate(qty):          # a winner's REQID is its reservation id
        got = sale.get('ord-%d' % i)
        assert (got is not None) == (u in expect)
        if got:
            assert (got['user'], got['qty'], got['state']) == (u, qty[u], 'pending')
    events = r.xrange('sale:{de}:events')
    assert sorted(f['user'] for _id, f in events if f.get('via') == 'draw') == sorted(expect)
    v = sale.verify_draw(commitment)
    assert v.ok and v.winners == len(expect), v.message
    assert sale.verify_draw().status == d.UNCHECKED              # nothing published given

    # the command line (it detects the backend itself), on the real server
    url = 'redis://127.0.0.1:%d/0' % r.connection_pool.connection_kwargs['port']
    capsys.readouterr()
    assert cli.main(['commitment', '--redis', url, 'sale:{de}']) == 0
    assert json.loads(capsys.readouterr().out) == {'key': 'sale:{de}', 'commitment': commitment, 'beacon': None}
    assert cli.main(['commitment', '--redis', url, 'sale:{none}']) == 1
    assert cli.main(['verify-draw', '--redis', url, 'sale:{de}', '--commitment', commitment]) == 0
    assert cli.main(['--redis', url, 'verify-draw', '--json', 'sale:{de}',
                     '--commitment', commitment]) == 0
    capsys.readouterr()
    assert cli.main(['verify-draw', '--redis', url, 'sale:{de}']) == 3
    assert 'not checked against a published commitment' in capsys.readouterr().out.splitlines()
    assert cli.main(['verify-draw', '--redis', url, 'sale:{de}', '--commitment',
                     hashlib.sha256(b'another').hexdigest()]) == 1
    assert cli.main(['verify-draw', '--redis', url, 'sale:{none}', '--commitment',
                     commitment]) == 2

    # tampered: ENTRANTS (as a client sees them) moves one win to a loser
    real_from_url = redis.Redis.from_url
    s_order = [list(qty)[i] for i in d.permutation(info['draw_seed'], len(qty))]
    loser = next(u for u in s_order if u not in expect)

    class Tampered(redis.Redis):
        def execute_command(self, *args, **kw):
            reply = super().execute_command(*args, **kw)
            if 'seckill.entrants' in [str(a).lower() for a in args[:2]] or \
                    'seckill_entrants' in args[:2]:
                flat = list(reply[1])
                for i in range(0, len(flat), 3):
                    if text_user(flat[i]) in (expect[0], loser):
                        flat[i + 2] = 'entered' if text_user(flat[i]) == expect[0] else 'drawn'
                reply = [reply[0], flat]
            return reply

    monkeypatch.setattr(redis.Redis, 'from_url',
                        lambda url, **kw: Tampered(connection_pool=real_from_url(url, **kw)
                                                   .connection_pool))
    capsys.readouterr()
    assert cli.main(['verify-draw', '--redis', url, 'sale:{de}', '--commitment', commitment]) == 1
    printed = capsys.readouterr().out
    assert 'MISMATCH' in printed and 'first differing entrant' in printed, printed
    res = Sale(Tampered(connection_pool=r.connection_pool), 'sale:{de}').verify_draw(commitment)
    assert res.status == d.MISMATCH and res.check == 'winners' and res.mismatches == 2
    assert text_user(res.first['user']) in (expect[0], loser)


def text_user(u):
    return u.decode() if isinstance(u, bytes) else u


def test_waitlist_promotion_keeps_the_draw_verifiable(backend_client):
    r, backend = backend_client
    sale, end = new_draw_sale(r, 'sale:{dw}', 2, backend, hold_ms=60000)
    for i in range(6):
        sale.enter('w%d' % i, reqid='ow%d' % i)
    wait_past(sale, end)
    commitment = sale.commitment()
    assert sale.draw_all() == (2, 0, 0)
    ents = list(sale.entrants())
    order, wins = d.simulate(sale.info()['draw_seed'], ents, 2)
    winner = next(e for e, w in zip(order, wins) if w)
    first_loser = next(e for e, w in zip(order, wins) if not w)
    assert sale.release('o' + winner.user).status == 'RELEASED'
    results = {e.user: e.result for e in sale.entrants()}
    assert results[first_loser.user] == 'promoted'          # the next in draw order
    assert results[winner.user] == 'drawn'                  # a winner stays a winner of the draw
    v = sale.verify_draw(commitment)
    assert v.ok and v.winners == 2, v.message

def test_verify_draw_cli_output(dr, capsys):
    sale, end = new_draw_sale(dr, 'sale:{dc}', 2)
    for i in range(5):
        sale.enter('c%d' % i)
    commitment = sale.commitment()
    url = 'redis://127.0.0.1:%d/0' % dr.connection_pool.connection_kwargs['port']
    assert cli.main(['verify-draw', '--redis', url, 'sale:{dc}', '--commitment', commitment]) == 2
    assert 'NOT DRAWN' in capsys.readouterr().out
    wait_past(sale, end)
    sale.draw_all()
    assert cli.main(['verify-draw', '--redis', url, '--json', 'sale:{dc}',
                     '--commitment', commitment]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out['ok'] and out['status'] == 'ok' and out['winners'] == 2 and out['entrants'] == 5
    assert out['published_commitment'] == commitment and len(out['draw_seed']) == 64
    assert cli.main(['verify-draw', '--redis', url, '--json', 'sale:{dc}']) == 3
    captured = capsys.readouterr()
    assert json.loads(captured.out)['status'] == 'unchecked'
    assert 'not checked against a published commitment' in captured.err


def test_replace_after_end_fails_against_the_published_commitment(backend_client, capsys):
    """The shop publishes the commitment, registration ends, then it
    REPLACEs the sale (a new secret) and has everyone enter again: the new
    draw is consistent in itself, but not with what was published."""
    r, backend = backend_client
    users = ['r%d' % i for i in range(12)]
    sale, end = new_draw_sale(r, 'sale:{dr}', 4, backend)
    for u in users:
        assert sale.enter(u).status == 'ENTERED'
    published = sale.commitment()
    wait_past(sale, end)
    end2 = sale.server_ms() + WINDOW_MS
    assert sale.init(4, end_ms=end2, draw=True, replace=True) is True
    assert sale.commitment() != published
    for u in reversed(users):                    # everyone again, in an order of the shop's choosing
        assert sale.enter(u).status == 'ENTERED'
    wait_past(sale, end2)
    assert sale.draw_all() == (4, 0, 0)
    assert sale.verify_draw(sale.commitment()).ok            # consistent in itself
    v = sale.verify_draw(published)
    assert (v.status, v.check) == (d.BAD_COMMITMENT, 'commitment') and not v.ok, v.message
    url = 'redis://127.0.0.1:%d/0' % r.connection_pool.connection_kwargs['port']
    capsys.readouterr()
    assert cli.main(['verify-draw', '--redis', url, 'sale:{dr}', '--commitment', published]) == 1
    assert 'BAD COMMITMENT' in capsys.readouterr().out


def test_beacon_draw_and_a_wrong_beacon_value(backend_client, capsys):
    r, backend = backend_client
    name, value = 'drand quicknet round 1234567', 'the round value 9f2c'
    sale, end = new_draw_sale(r, 'sale:{db}', 3, backend, stream='sale:{db}:events',
                              beacon=name)
    entries = [('b%d' % i, 1) for i in range(10)]
    for u, q in entries:
        assert sale.enter(u, qty=q).status == 'ENTERED'
    published = sale.commitment()
    info = sale.info()
    assert (info['beacon'], info['beacon_value'], info['draw_seed']) == (name, None, None)
    _id, committed = r.xrange('sale:{db}:events', count=1)[0]
    assert d.draw_committed(committed) == (published, name)
    # the server's own checks of BEACON (each changes nothing)
    with pytest.raises(redis.ResponseError, match='BEACON needs DRAW'):
        sale._run(call(['SECKILL.INIT', 'sale:{nb}', 1, 'BEACON', name]))
    with pytest.raises(redis.ResponseError, match='BEACON name must be 1 to 256 bytes'):
        sale._run(call(['SECKILL.INIT', 'sale:{nb}', 1, 'END', end, 'DRAW',
                        'BEACON', 'n' * 257]))
    wait_past(sale, end)
    with pytest.raises(redis.ResponseError, match='the first DRAW needs BEACON value'):
        sale.draw()
    with pytest.raises(redis.ResponseError, match='BEACON value must be 1 to 1024 bytes'):
        sale._run(call(['SECKILL.DRAW', 'sale:{db}', 'BEACON', 'v' * 1025]))
    assert sale.info()['seed'] is None                    # nothing drawn, nothing revealed
    first = sale.draw(count=1, beacon_value=value)
    assert first.left_to_draw > 0
    with pytest.raises(redis.ResponseError, match='BEACON differs'):
        sale.draw(count=1, beacon_value=value + 'x')
    sale.draw(count=1)                                    # no BEACON later: fine
    sale.draw_all(count=1, beacon_value=value)            # the same value again: fine
    info = sale.info()
    assert info['beacon_value'] == value and info['left_to_draw'] == 0
    seed = bytes.fromhex(info['seed'])
    assert info['draw_seed'] == hashlib.sha256(
        seed + naive_digest(entries) + value.encode()).hexdigest()
    won = sorted(naive_winners(seed, entries, value.encode(), 3))
    assert sorted(e.user for e in sale.entrants() if e.result == 'drawn') == won
    assert sale.verify_draw(published, name, value).ok
    v = sale.verify_draw(published, name, 'another value')
    assert (v.status, v.check) == (d.BAD_BEACON, 'beacon'), v.message
    v = sale.verify_draw(published, None, value)              # published without a beacon
    assert v.status == d.BAD_BEACON, v.message
    assert sale.verify_draw(published, name).status == d.UNCHECKED
    url = 'redis://127.0.0.1:%d/0' % r.connection_pool.connection_kwargs['port']
    base = ['verify-draw', '--redis', url, 'sale:{db}', '--commitment', published,
            '--beacon', name]
    assert cli.main(base + ['--beacon-value', value]) == 0
    capsys.readouterr()
    assert cli.main(base + ['--beacon-value', 'another value']) == 1
    assert 'BAD BEACON' in capsys.readouterr().out
    assert cli.main(base) == 3


def test_async_enter_draw_verify(backend_client):
    dr, backend = backend_client
    port = dr.connection_pool.connection_kwargs['port']

    async def run():
        r = redis.asyncio.Redis(host='127.0.0.1', port=port, decode_responses=True)
        sale = AioSale(r, 'sale:{da}', backend=backend)
        now = await sale.server_ms()
        assert await sale.create(3, end_ms=now + WINDOW_MS, draw=True, replace=True,
                                 beacon='async beacon')
        commitment = await sale.commitment()
        for i in range(9):
            assert (await sale.enter('a%d' % i)).status == 'ENTERED'
        assert (await sale.reserve('a0')).status == 'DRAW'
        while await sale.server_ms() < now + WINDOW_MS:
            await asyncio.sleep(0.02)
        done = await sale.draw_all(count=2, beacon_value='async value')
        ents = [e async for e in sale.entrants(count=4)]
        v = await sale.verify_draw(commitment, 'async beacon', 'async value')
        await r.aclose()
        return done, ents, v

    done, ents, v = asyncio.run(run())
    assert done == (3, 0, 0) and len(ents) == 9 and sum(e.result == 'drawn' for e in ents) == 3
    assert v.ok, v.message


# -- split sales ------------------------------------------------------------------

def split_states(r, lay):
    return {k: Sale(r, k).info() for k in lay.keys}


def test_split_rebalance_reaches_the_shares_and_survives_a_crash(r):
    """The rebalance alone (SEND/RECV with ROUND, any build): every part
    ends with its largest-remainder share of the stock, the pool with none,
    also when the process dies between a SEND and its RECV."""
    sale = SplitSale(r, 'rb')
    sale.create(1000, parts=4, limit=1)
    lay = sale.layout()
    weights = dict(zip(lay.parts, [100, 0, 250, 37]))
    sale.faults = Faults({'after_send': 2})
    with pytest.raises(Crash):
        sale._run(sale.core.drawer.rebalance(lay, weights))
    assert sale.info()['in_flight'] > 0                          # a SEND without its RECV
    again = SplitSale(r, 'rb')
    out = again._run(again.core.drawer.rebalance(again.layout(), weights))
    shares = d.allocate(1000, weights, lay.round)
    assert out['shares'] == shares and sum(shares.values()) == 1000
    st = split_states(r, lay)
    assert {k: st[k]['remaining'] for k in lay.parts} == shares and st[lay.pool]['remaining'] == 0
    info = again.info()
    assert (info['invariant'], info['in_flight'], info['remaining']) == ('ok', 0, 1000)
    # settled: a second pass moves nothing
    assert again._run(again.core.drawer.rebalance(lay, weights))['transfers'] == 0


def test_split_draw(backend_client, capsys, tmp_path):
    dr, backend = backend_client
    parts, stock = 4, 60
    sale = SplitSale(dr, 'sd', backend=backend)
    for k in dr.keys('sale:{sd*'):
        dr.delete(k)
    now = Sale(dr, 'x').server_ms()
    end = now + WINDOW_MS + 300
    assert sale.create(stock, parts=parts, limit=1, hold_ms=60000, end_ms=end, draw=True)
    lay = sale.layout()
    # uneven entrants: 10, 60, 25, 5
    users = [u for i, n in enumerate([10, 60, 25, 5]) for u in users_homed(i, parts, n, 'sd')]
    for u in users:
        assert sale.enter(u, reqid='o-' + u).status == 'ENTERED'
    assert sale.enter(users[0]).status == 'ALREADY_ENTERED'
    assert sale.reserve(users[1])[0] == 'DRAW'
    published = sale.commitments()
    assert sorted(published) == sorted(lay.parts) and all(len(c) == 64 for c in published.values())
    before = sale.info()
    with pytest.raises(d.RegistrationOpen):
        sale.draw()
    assert sale.info()['parts'] == before['parts']      # nothing moved before END
    wait_past(Sale(dr, 'x'), end)
    sale.faults = Faults({'draw_rebalanced': 1})      # dies after the rebalance, before DRAW
    with pytest.raises(Crash):
        sale.draw(count=3)
    out = SplitSale(dr, 'sd', backend=backend).draw(count=3)   # another process finishes it
    assert out['rebalanced'] and out['transfers'] == 0       # nothing left to move
    weights = dict(zip(lay.parts, [10, 60, 25, 5]))
    shares = d.allocate(stock, weights, lay.round)
    assert out['shares'] == shares == dict(zip(lay.parts, [6, 36, 15, 3]))
    assert out['drawn'] == stock and out['remaining'] == 0
    for k in lay.parts:
        info = Sale(dr, k, backend=backend).info()
        assert info['draw_stock'] == shares[k] and info['left_to_draw'] == 0
    again = SplitSale(dr, 'sd', backend=backend).draw()                # a rerun: nothing moves, nothing drawn
    assert not again['rebalanced'] and again['drawn'] == 0
    v = sale.verify_draw(published)
    assert v.ok and len(v.parts) == parts and v.winners == stock, v.message
    assert sale.verify_draw().status == d.UNCHECKED
    missing = dict(published)
    missing.pop(lay.parts[1])
    v = sale.verify_draw(missing)
    assert v.status == d.BAD_COMMITMENT and lay.parts[1] in v.message, v.message
    won = [e for _k, e in sale.entrants(count=9) if e.result == 'drawn']
    assert len(won) == stock
    assert sale.info()['invariant'] == 'ok'
    url = 'redis://127.0.0.1:%d/0' % dr.connection_pool.connection_kwargs['port']
    assert cli.main(['verify-draw', '--redis', url, '--split', 'sd'] +
                    ['--commitment=%s=%s' % kv for kv in published.items()]) == 0
    assert cli.main(['verify-draw', '--redis', url, '--split', 'sd']) == 3
    # what the CLI prints to publish is the file verify-draw reads
    capsys.readouterr()
    assert cli.main(['commitment', '--redis', url, '--split', 'sd']) == 0
    out = capsys.readouterr().out
    assert json.loads(out) == published
    path = tmp_path / 'published.json'
    path.write_text(out)
    assert cli.main(['verify-draw', '--redis', url, '--split', 'sd', '--commitment', '@%s' % path]) == 0


def test_split_draw_proportional(backend_client):
    """More entrants than stock on every part: each part's chance per
    entrant is within one unit's rounding of the global stock / entrants."""
    dr, backend = backend_client
    parts, stock = 3, 50
    for k in dr.keys('sale:{sp*'):
        dr.delete(k)
    sale = SplitSale(dr, 'sp', backend=backend)
    now = Sale(dr, 'x').server_ms()
    end = now + WINDOW_MS + 300
    sale.create(stock, parts=parts, limit=1, end_ms=end, draw=True)
    published = sale.commitments()
    counts = [37, 81, 19]
    for i, n in enumerate(counts):
        for u in users_homed(i, parts, n, 'sp'):
            sale.enter(u)
    wait_past(Sale(dr, 'x'), end)
    out = sale.draw()
    lay = sale.layout()
    assert sum(out['shares'].values()) == stock
    for i, k in enumerate(lay.parts):
        assert abs(out['shares'][k] - stock * counts[i] / sum(counts)) < 1
        assert abs(out['closeness']['parts'][k] - stock / sum(counts)) < 1 / counts[i]
    assert out['drawn'] == stock
    assert sale.verify_draw(published).ok


def test_split_draw_with_stock_moved_to_one_part_fails_verification(backend_client):
    """Every part's draw is honest on its own seed, but all the stock went to
    the part that holds the fewest entrants (the shop's friends, say): the
    shares do not match the entrants, and verify_draw says so."""
    dr, backend = backend_client
    parts, stock = 3, 30
    for k in dr.keys('sale:{sk*'):
        dr.delete(k)
    sale = SplitSale(dr, 'sk', backend=backend)
    end = Sale(dr, 'x').server_ms() + WINDOW_MS + 300
    sale.create(stock, parts=parts, limit=1, end_ms=end, draw=True)
    published = sale.commitments()
    for i, n in enumerate([20, 20, 2]):
        for u in users_homed(i, parts, n, 'sk'):
            sale.enter(u)
    wait_past(Sale(dr, 'x'), end)
    lay = sale.layout()
    rigged = {k: (1 if k == lay.parts[2] else 0) for k in lay.parts}
    sale._run(sale.core.drawer.rebalance(lay, rigged))
    sale._run(sale.core.drawer.draw_parts(lay, 100))
    assert Sale(dr, lay.parts[2], backend=backend).info()['draw_stock'] == stock
    v = sale.verify_draw(published)
    assert all(part.ok for part in v.parts)      # each part alone verifies
    assert v.status == d.MISMATCH and v.check == 'shares' and v.mismatches == parts, v.message
    url = 'redis://127.0.0.1:%d/0' % dr.connection_pool.connection_kwargs['port']
    assert cli.main(['verify-draw', '--redis', url, '--split', 'sk'] +
                    ['--commitment=%s=%s' % kv for kv in published.items()]) == 1


def test_async_split_draw(backend_client):
    from seckill.aio import SplitSale as AioSplitSale
    dr, backend = backend_client
    for k in dr.keys('sale:{ad*'):
        dr.delete(k)
    port = dr.connection_pool.connection_kwargs['port']
    counts = [3, 9, 6]

    async def run():
        r = redis.asyncio.Redis(host='127.0.0.1', port=port, decode_responses=True)
        sale = AioSplitSale(r, 'ad', backend=backend)
        end = await AioSale(r, 'x', backend=backend).server_ms() + WINDOW_MS + 300
        assert await sale.create(6, parts=3, end_ms=end, draw=True, beacon='split beacon')
        published = await sale.commitments()
        for i, n in enumerate(counts):
            for u in users_homed(i, 3, n, 'ad'):
                assert (await sale.enter(u)).status == 'ENTERED'
        while await AioSale(r, 'x', backend=backend).server_ms() < end:
            await asyncio.sleep(0.02)
        out = await sale.draw(count=2, beacon_value='split value')
        ents = [(k, e) async for k, e in sale.entrants(count=4)]
        v = await sale.verify_draw(published, 'split beacon', 'split value')
        lay = await sale.layout()
        await r.aclose()
        return out, ents, v, lay

    out, ents, v, lay = asyncio.run(run())
    assert out['shares'] == dict(zip(lay.parts, [1, 3, 2])) and out['drawn'] == 6
    assert len(ents) == sum(counts) and sum(e.result == 'drawn' for _k, e in ents) == 6
    assert [sum(1 for k, _e in ents if k == p) for p in lay.parts] == counts
    assert v.ok, v.message


def test_split_draw_on_a_cluster(dr, request):
    """The three-master cluster (conftest): parts on different masters, the
    rebalance across nodes, verify-draw --cluster --split."""
    cluster = request.getfixturevalue('cluster')
    rc = cluster.client()
    try:
        sale = SplitSale(rc, 'cd')
        end = Sale(dr, 'x').server_ms() + WINDOW_MS + 500
        assert sale.create(30, parts=3, limit=1, end_ms=end, draw=True, replace=True)
        published = sale.commitments()
        lay = sale.layout()
        assert len({sale.node_name(k) for k in lay.parts}) == 3
        counts = [8, 40, 12]
        for i, n in enumerate(counts):
            for u in users_homed(i, 3, n, 'cd'):
                assert sale.enter(u).status == 'ENTERED'
        wait_past(Sale(dr, 'x'), end)          # one machine: the nodes share its clock
        out = sale.draw(count=5)
        assert out['shares'] == dict(zip(lay.parts, [4, 20, 6])) and out['drawn'] == 30
        assert sale.verify_draw(published).ok and sale.info()['invariant'] == 'ok'
        url = 'redis://127.0.0.1:%d/0' % cluster.masters[0].port
        assert cli.main(['verify-draw', '--redis', url, '--cluster', '--split', 'cd'] +
                        ['--commitment=%s=%s' % kv for kv in published.items()]) == 0
    finally:
        rc.close()
