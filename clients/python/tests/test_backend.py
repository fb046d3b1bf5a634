"""Backend selection (seckill.backend) and one Sale scenario on both
backends: the module, and the Functions library (functions/seckill.lua
loaded into a server without the module), with identical replies."""

from __future__ import annotations

import asyncio
import os

import pytest
import redis

import seckill
from seckill import backend as be
from seckill.aio import Sale as AioSale
from seckill.testing import RedisServer

LIBRARY = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.dirname(os.path.abspath(__file__))))), 'functions', 'seckill.lua')


# -- the plain functions ------------------------------------------------------

def test_to_functions_translates_seckill_commands_only():
    assert be.to_functions(['SECKILL.RESERVE', 'k', 'u', 'QTY', 2]) == \
        ['FCALL', 'seckill_reserve', 1, 'k', 'u', 'QTY', 2]
    assert be.to_functions(['seckill.init', 'k', 10]) == ['FCALL', 'seckill_init', 1, 'k', 10]
    assert be.to_functions(['SECKILL.INFO', 'k']) == ['FCALL_RO', 'seckill_info', 1, 'k']
    assert be.to_functions(['SECKILL.GET', 'k', 'r1']) == ['FCALL_RO', 'seckill_get', 1, 'k', 'r1']
    assert be.to_functions([b'SECKILL.CONFIRM', 'k', 'r1']) == \
        ['FCALL', 'seckill_confirm', 1, 'k', 'r1']
    assert be.to_functions(['WAIT', 1, 100]) == ['WAIT', 1, 100]
    assert be.to_functions(['TIME']) == ['TIME']
    assert be.to_functions([]) == []


def test_to_functions_declares_the_keys_after_the_sale_key():
    assert be.to_functions(['SECKILL.RESERVE', 'k', 'u'], ['k:ev']) == \
        ['FCALL', 'seckill_reserve', 2, 'k', 'k:ev', 'u']
    assert be.to_functions(['SECKILL.ENTRANTS', 'k', 0], be.draw_keys('k')) == \
        ['FCALL_RO', 'seckill_entrants', 5, 'k', 'k:secret', 'k:entrants', 'k:perm', 'k:wait', 0]
    assert be.draw_keys(b'k') == [b'k:secret', b'k:entrants', b'k:perm', b'k:wait']


DRAW4 = ['s:secret', 's:entrants', 's:perm', 's:wait']


@pytest.mark.parametrize('options,keys,replace', [
    ([], [], False),
    (['STREAM', 's:ev'], ['s:ev'], False),
    (['stream', 's:ev', 'maxlen', 10, 'REPLACE'], ['s:ev'], True),
    (['END', 5, 'DRAW'], DRAW4, False),
    (['END', 5, 'draw', 'BEACON', 'nist', 'Replace'], DRAW4, True),
    (['STREAM', 's:ev', 'END', 5, 'DRAW'], ['s:ev'] + DRAW4, False),
    # values that read like option words are values
    (['STREAM', 'draw', 'MAXLEN', 5], ['draw'], False),
    (['END', 5, 'DRAW', 'BEACON', 'REPLACE'], DRAW4, False),
    (['SPLIT', 'r1', 2, 'DRAW', 'REPLACE', 'STREAM', 's:ev'], ['s:ev'], False),
    (['LIMIT', 2, 'HOLD', 1000, 'START', 1, 'TTL', 9, 'SHARDS', 2, 'FENCE', 'STREAM', b's:ev'],
     [b's:ev'], False),
    # an unknown word or a bad SPLIT count ends the reading: the server refuses the call
    (['BOGUS', 'DRAW'], [], False),
    (['SPLIT', 'r1', 'x', 'DRAW'], [], False),
    (['STREAM'], [], False),
])
def test_init_keys_from_its_arguments(options, keys, replace):
    assert be.init_keys(['SECKILL.INIT', 's', 10, *options]) == (keys, replace)


def test_init_keys_of_the_init_the_client_builds():
    from seckill import protocol as p
    args = p.init_args('s', 10, end_ms=5, stream='s:ev', maxlen=3, draw=True, beacon='b',
                       replace=True, fence=True)
    assert be.init_keys(args) == (['s:ev'] + DRAW4, True)


def test_undeclared_and_parse_keys():
    assert be.undeclared(redis.ResponseError('undeclared key s:ev: pass the keys ...'))
    assert be.undeclared(redis.ResponseError('ERR undeclared key s:ev'))
    assert not be.undeclared(redis.ResponseError('WRONGTYPE Operation against a key'))
    assert not be.undeclared('undeclared key')           # a value is no refusal
    assert be.parse_keys([b's:ev', 's:secret']) == ['s:ev', 's:secret']
    assert be.parse_keys(None) == []
    assert be.version_args() == ['FCALL_RO', 'seckill_version', 1, 'seckill:probe']
    assert be.version_args('s') == ['FCALL_RO', 'seckill_version', 1, 's']
    assert be.merged(['a', 'b'], ['b', 'c']) == ['a', 'b', 'c']


def run_batch(commands, cache, answer):
    """Runs be.batch with `answer(step)` as the server: (replies, steps seen)."""
    from seckill.plain.steps import drive
    seen = []

    def do(step):
        seen.append(step)
        return answer(step)
    return drive(be.batch(commands, cache), do), seen


UNDECLARED = redis.ResponseError('undeclared key s:new: pass the keys FCALL_RO seckill_keys 1 s')


def test_batch_asks_the_keys_once_per_sale():
    cache = be.KeyCache()

    def answer(step):
        if isinstance(step, be.Batch):
            return ['ok'] * len(step.commands)
        assert step.args == ['FCALL_RO', 'seckill_keys', 1, 's']
        return [b's:ev']
    replies, seen = run_batch([['SECKILL.RESERVE', 's', 'u'], ['SECKILL.INFO', 's']], cache, answer)
    assert replies == ['ok', 'ok']
    assert seen[-1].commands == [['FCALL', 'seckill_reserve', 2, 's', 's:ev', 'u'],
                                 ['FCALL_RO', 'seckill_info', 1, 's']]
    _, seen = run_batch([['SECKILL.CONFIRM', 's', 'r']], cache, answer)
    assert len(seen) == 1                                        # cached: no seckill_keys


def test_batch_draw_declares_the_secret_too():
    cache = be.KeyCache()
    cache.put('s', DRAW4[1:])
    _, seen = run_batch([['SECKILL.DRAW', 's', 'COUNT', 5], ['SECKILL.ENTER', 's', 'u']], cache,
                        lambda step: ['ok'] * len(step.commands))
    assert seen[0].commands == [['FCALL', 'seckill_draw', 5, 's', *DRAW4[1:], 's:secret', 'COUNT', 5],
                                ['FCALL', 'seckill_enter', 4, 's', *DRAW4[1:], 'u']]
    assert be.replaced_keys('s', ['s:ev']) == []
    assert be.replaced_keys(b's', [b's:ev', b's:entrants']) == [b's:secret', b's:entrants', b's:perm',
                                                                 b's:wait']


def test_batch_retries_an_undeclared_refusal_once_with_the_list_asked_again():
    cache = be.KeyCache()
    cache.put('s', ['s:old'])
    tries = []

    def answer(step):
        if not isinstance(step, be.Batch):
            return ['s:new']
        tries.append(step.commands)
        return [UNDECLARED if len(tries) == 1 else 'ok', 'acked'][:len(step.commands)]
    replies, seen = run_batch([['SECKILL.RESERVE', 's', 'u'], ['WAIT', 1, 10]], cache, answer)
    assert replies == ['ok', 'acked']
    assert tries[1] == [['FCALL', 'seckill_reserve', 2, 's', 's:new', 'u'], ['WAIT', 1, 10]]
    assert cache.get('s') == ['s:new']

    tries.clear()                                  # refused again: the server's error
    replies, _ = run_batch([['SECKILL.RESERVE', 's', 'u']], cache,
                           lambda st: [UNDECLARED] if isinstance(st, be.Batch) else ['s:x'])
    assert replies == [UNDECLARED]


def test_batch_init_declares_its_own_keys_and_with_replace_the_old_ones():
    cache = be.KeyCache()
    cache.put('s', ['s:old'])

    def answer(step):
        if isinstance(step, be.Batch):
            return ['OK']
        assert step.args == ['FCALL_RO', 'seckill_keys', 1, 's']
        return ['s:old'] + DRAW4[1:]                 # a draw sale's list: no secret
    _, seen = run_batch([['SECKILL.INIT', 's', 10, 'STREAM', 's:new', 'REPLACE']], cache, answer)
    assert seen[-1].commands == [['FCALL', 'seckill_init', 7, 's', 's:new', 's:old', *DRAW4[1:],
                                  's:secret', 10, 'STREAM', 's:new', 'REPLACE']]
    assert cache.get('s') is None                  # asked again at the sale's next use
    _, seen = run_batch([['SECKILL.INIT', 's', 10, 'STREAM', 's:new']], cache, answer)
    assert len(seen) == 1 and seen[0].commands[0][2] == 2     # no REPLACE: nothing asked


UNKNOWN = redis.ResponseError("unknown command 'SECKILL.INFO', with args beginning with: ")
ARITY = redis.ResponseError("wrong number of arguments for 'seckill.info' command")


def test_choose():
    assert be.choose(ARITY) == 'module'
    assert be.choose(redis.exceptions.NoPermissionError('no permissions')) == 'module'
    assert be.choose(UNKNOWN, '1.2.0') == 'functions'
    assert be.choose(UNKNOWN, b'1.2.0') == 'functions'
    with pytest.raises(be.BackendError, match='functions install'):
        be.choose(UNKNOWN, redis.ResponseError('Function not found'))
    with pytest.raises(be.BackendError, match=r'\+fcall \+fcall_ro'):
        be.choose(UNKNOWN, redis.exceptions.NoPermissionError('no permissions to run fcall_ro'))
    with pytest.raises(be.BackendError, match='not a version'):
        be.choose(UNKNOWN, 'x.y')
    with pytest.raises(be.BackendError):
        be.choose(UNKNOWN, None)
    with pytest.raises(be.BackendError):
        be.check('lua')


def test_detect_as_steps():
    op = be.detect()
    assert op.send(None).args == ['SECKILL.INFO']
    step = op.throw(UNKNOWN)     # no module
    assert step.args == ['FCALL_RO', 'seckill_version', 1, 'seckill:probe']
    with pytest.raises(StopIteration) as stop:
        op.send('1.0.0')
    assert stop.value.value == 'functions'
    op = be.detect('sale:{1}')
    op.send(None)
    assert op.throw(UNKNOWN).args == ['FCALL_RO', 'seckill_version', 1, 'sale:{1}']
    op = be.detect()
    op.send(None)
    with pytest.raises(StopIteration) as stop:
        op.throw(ARITY)
    assert stop.value.value == 'module'
    op = be.detect()
    op.send(None)
    with pytest.raises(redis.ConnectionError):      # a server down is not "no backend"
        op.throw(redis.ConnectionError('down'))


# -- real servers ---------------------------------------------------------------

@pytest.fixture(scope='module')
def lib_server():
    srv = RedisServer(load_module=False).start()
    c = srv.client()
    with open(LIBRARY) as f:
        c.execute_command('FUNCTION', 'LOAD', 'REPLACE', f.read())
    c.close()
    yield srv
    srv.stop()


@pytest.fixture(scope='module')
def mod_server(module):
    srv = RedisServer(module=module).start()
    yield srv
    srv.stop()


@pytest.fixture(scope='module')
def bare_server():
    srv = RedisServer(load_module=False).start()
    yield srv
    srv.stop()


def test_detection_once_per_pool(mod_server, lib_server, bare_server):
    for srv, want in ((mod_server, 'module'), (lib_server, 'functions')):
        c = srv.client()
        s = seckill.Sale(c, 'sale:{d}')
        assert s.info() is None
        assert s._driver.backend == want
        assert getattr(c.connection_pool, be.CACHE_ATTR) == want
        c2 = redis.Redis(connection_pool=c.connection_pool)
        assert seckill.Sale(c2, 'sale:{d}')._driver._resolve() == want   # cached: no command
        c.close()
    c = bare_server.client()
    with pytest.raises(be.BackendError, match='neither'):
        seckill.Sale(c, 'sale:{d}').info()
    with pytest.raises(redis.ResponseError):      # forced: the server says what is missing
        seckill.Sale(c, 'sale:{d}', backend='functions').info()
    c.close()


def scenario(sale, r):
    out = [sale.init(3, limit=2, hold_ms=60000), sale.init(3)]
    a = sale.reserve('u1', reqid='o1')
    out.append((a.status, a.remaining))
    d = sale.reserve('u1', reqid='o1')
    out.append((d.status, d.rid == a.rid, d.remaining))
    b = sale.reserve('u1', qty=1, reqid='o2')
    out.append((b.status, b.remaining))
    out.append(sale.reserve('u1', qty=1, reqid='o3').status)     # LIMIT
    c = sale.reserve('u2', qty=2, reqid='o4')
    out.append((c.status, c.remaining))
    out.append(sale.confirm(a.rid))
    out.append(sale.confirm(a.rid))
    out.append(sale.release(b.rid))
    out.append(sale.release(b.rid))
    info = sale.info()
    out.append({k: v for k, v in info.items()
                if k not in ('created_ms', 'start_ms', 'end_ms', 'ttl_ms', 'now_ms')})
    got = sale.get(a.rid)
    out.append({k: v for k, v in got.items() if not k.endswith('_ms')})
    out.append(sale.get('nope'))
    out.append(seckill.Sale(r, 'sale:{none}').info())
    return out


def _normalise(out):
    return repr(out).replace("'rid': '", "'rid: ")


def test_same_replies_on_both_backends(mod_server, lib_server):
    results = {}
    for name, srv in (('module', mod_server), ('functions', lib_server)):
        r = srv.client()
        r.delete('sale:{s}')
        results[name] = scenario(seckill.Sale(r, 'sale:{s}', backend=name), r)
        r.close()
    assert results['module'] == results['functions']
    assert results['module'][2] == ('RESERVED', 2)
    assert results['module'][5] == 'LIMIT'


def test_same_replies_async(mod_server, lib_server):
    async def run(srv, name):
        r = redis.asyncio.Redis(host='127.0.0.1', port=srv.port, decode_responses=True)
        await r.delete('sale:{a}')
        s = AioSale(r, 'sale:{a}')           # detected
        out = [await s.init(1), (await s.reserve('u1', reqid='o1')).status,
               (await s.reserve('u1', reqid='o1')).status, (await s.reserve('u2')).status]
        info = await s.info()
        out.append((info['total'], info['remaining']))
        assert s._driver.backend == name
        await r.aclose()
        return out

    a = asyncio.run(run(mod_server, 'module'))
    b = asyncio.run(run(lib_server, 'functions'))
    assert a == b


# -- the keys the library's calls declare (docs/managed-redis.md, "Calling it") --

def failed_fcalls(r):
    return int(r.info('commandstats').get('cmdstat_fcall', {}).get('failed_calls', 0))


def declared_keys_scenario(a, b, r, key, backend):
    """Two clients (pools) `a` and `b` on one server: a sale with a STREAM;
    `b` replaces it with another stream, so `a`'s list is stale (on the
    library: one refusal, seckill_keys again, the retry); then a draw sale
    with a stream, replaced by `b` with a plain sale (its four keys go)."""
    ev1, ev2, dkey = key + ':ev1', key + ':ev2', key + 'd'
    r.delete(key, ev1, ev2, dkey, dkey + ':ev', *be.draw_keys(dkey))
    out = [a(key).init(10, stream=ev1, hold_ms=60000), a(key).reserve('u1', reqid='o1').status]
    out.append(b(key).init(10, stream=ev2, replace=True))
    failed = failed_fcalls(r)
    res = a(key).reserve('u2', reqid='o2')
    out.append((res.status, res.remaining, failed_fcalls(r) - failed,
                r.xlen(ev1), r.xlen(ev2)))
    out.append(a(key).confirm('o2').status)
    now = int(r.time()[0]) * 1000
    out.append(a(dkey).init(2, end_ms=now + 60000, draw=True, stream=dkey + ':ev'))
    out.append(a(dkey).enter('u1').status)
    out.append(r.exists(*be.draw_keys(dkey)[:2]))
    out.append(b(dkey).init(5, replace=True))
    out.append(r.exists(*be.draw_keys(dkey)))
    out.append(a(dkey).reserve('u1').status)
    want_refused = 1 if backend == 'functions' else 0
    assert out == [True, 'RESERVED', True, ('RESERVED', 9, want_refused, 1, 1), 'CONFIRMED', True,
                   'ENTERED', 2 if backend == 'functions' else 0, True, 0, 'RESERVED'], out
    return out


@pytest.mark.parametrize('backend', ['module', 'functions'])
def test_declared_keys(mod_server, lib_server, backend):
    srv = lib_server if backend == 'functions' else mod_server
    ca, cb, r = srv.client(), srv.client(), srv.client()       # three pools
    try:
        declared_keys_scenario(lambda k: seckill.Sale(ca, k), lambda k: seckill.Sale(cb, k), r,
                               'sale:{keys}', backend)
    finally:
        for c in (ca, cb, r):
            c.close()


class _Synced:
    """An aio.Sale driven from sync code (each call run to completion)."""

    def __init__(self, loop, sale):
        self._loop, self._sale = loop, sale

    def __getattr__(self, name):
        f = getattr(self._sale, name)
        return lambda *a, **kw: self._loop.run_until_complete(f(*a, **kw))


@pytest.mark.parametrize('backend', ['module', 'functions'])
def test_declared_keys_async(mod_server, lib_server, backend):
    srv = lib_server if backend == 'functions' else mod_server
    loop = asyncio.new_event_loop()
    aa, ab = (redis.asyncio.Redis(host='127.0.0.1', port=srv.port, decode_responses=True)
              for _ in range(2))
    r = srv.client()
    try:
        declared_keys_scenario(lambda k: _Synced(loop, AioSale(aa, k)),
                               lambda k: _Synced(loop, AioSale(ab, k)), r, 'sale:{akeys}', backend)
    finally:
        for c in (aa, ab):
            loop.run_until_complete(c.aclose())
        loop.close()
        r.close()
