"""The WAIT gate's rules, the fence's protocol and the Sentinel URL, without
a server: seckill.durability, the gate operation of seckill.ops.sale run step by
step with the replies a server would give, seckill.connect's plain parts."""

import pytest

from seckill import durability as dur
from seckill import protocol as p
from seckill.connect import parse_switch, parse_url, sentinel_url
from seckill.draw import parse_entered
from seckill.ops import sale as ops
from seckill.plain import steps as plain_steps
from seckill.split_protocol import key_slot


def test_durability_setting():
    assert dur.DEFAULT == dur.Durability('auto', 1000) and not dur.DEFAULT.off
    assert dur.OFF.off and dur.Durability(2).replicas == 2
    for bad in (-1, 'all', 1.5, True):
        with pytest.raises(ValueError):
            dur.Durability(replicas=bad)
    for bad in (0, -5, 2.0):
        with pytest.raises(ValueError):
            dur.Durability(timeout_ms=bad)
    assert dur.resolve(None) is None and dur.resolve(False) is None
    assert dur.resolve(True) is dur.DEFAULT and dur.resolve(3) == dur.Durability(3)
    with pytest.raises(TypeError):
        dur.resolve('auto')
    assert dur.setting(None) is dur.DEFAULT and dur.setting(False) is dur.OFF
    assert dur.setting(2) == dur.Durability(2) and dur.setting(dur.OFF) is dur.OFF


def test_auto_is_every_replica_and_sticky_at_one():
    st = dur.ReplicaState()
    assert dur.DEFAULT.required(st) == 0            # never saw a replica: a lone server
    st.update(2, now=0.0)
    assert dur.DEFAULT.required(st) == 2
    st.update(0, now=1.0)                           # lost them (a split-brain master)
    assert st.seen and dur.DEFAULT.required(st) == 1
    assert dur.Durability(0).required(st) == 0 and dur.Durability(3).required(st) == 3
    assert st.stale(now=1.0 + dur.COUNT_TTL_S) and not st.stale(now=1.5)


def test_online_replicas_from_info():
    info = {'role': 'master', 'connected_slaves': 3,
            'slave0': {'ip': '127.0.0.1', 'port': 1, 'state': 'online', 'offset': 5},
            'slave1': 'ip=127.0.0.1,port=2,state=wait_bgsave,offset=0,lag=0',
            'slave2': 'ip=127.0.0.1,port=3,state=online,offset=5,lag=0',
            'slave_read_only': 1}
    assert dur.online_replicas(info) == 2
    assert dur.online_replicas({'role': 'slave', 'slave0': {'state': 'online'}}) == 0


def test_sync_key_in_the_sales_slot():
    for key in ('sale:{1001}', 'sale:1001', 'sale:{1001}:events'):
        assert key_slot(dur.sync_key(key)) == key_slot(key)
    assert dur.sync_key('sale:{7}') == 'sale:{7}:seckill-sync'
    assert dur.sync_key('plain') == '{plain}:seckill-sync'
    assert dur.gate_commands('sale:{7}', 2, 300) == [
        ['SET', 'sale:{7}:seckill-sync', '1', 'PX', dur.SYNC_PX_MS], ['WAIT', 2, 300]]


def run(op, answer):
    """Runs an operation, `answer(step)` standing in for the driver."""
    value, error, steps = None, None, []
    while True:
        done, step = plain_steps.advance(op, value, error)
        if done:
            return step, steps
        steps.append(step)
        value, error = None, None
        try:
            value = answer(step)
        except Exception as exc:
            error = exc


def answers(counts, acks):
    """A master whose replica count reads `counts` in turn, WAIT `acks`."""
    state = dur.ReplicaState()
    counts, acks = list(counts), list(acks)

    def answer(step):
        if isinstance(step, plain_steps.ReplicaInfo):
            if step.fresh or state.stale():
                state.update(counts.pop(0))
            return state
        assert isinstance(step, plain_steps.OnNode)
        out = []
        for c in step.commands:
            out.append(acks.pop(0) if c[0] == 'WAIT' else
                       ['RESERVED', 'r1', 9] if c[0] == 'SECKILL.RESERVE' else 'OK')
        return out
    return answer


def test_gate_rides_with_the_command_on_one_connection():
    res, steps = run(ops.reserve('sale:{1}', 'u', wait=dur.DEFAULT), answers([2], [2]))
    assert res == p.Reserved('RESERVED', 'r1', 9, replicated=True)
    node = [s for s in steps if isinstance(s, plain_steps.OnNode)]
    assert len(node) == 1 and [c[0] for c in node[0].commands] == \
        ['SECKILL.RESERVE', 'SET', 'WAIT'] and node[0].commands[2][1] == 2


def test_gate_short_then_a_replica_left():
    # WAIT 2 answered 1: the count is read again; one replica left -> 1 is enough
    gate, _ = run(ops.wait('k', dur.DEFAULT), answers([2, 1], [1]))
    assert gate == dur.Gate(1, 1) and gate.ok
    # both left: auto still wants 1 (sticky); a second WAIT 1 answers 0
    gate, steps = run(ops.wait('k', dur.DEFAULT), answers([2, 0], [0, 0]))
    assert gate == dur.Gate(0, 1) and not gate.ok
    assert sum(isinstance(s, plain_steps.OnNode) for s in steps) == 2


def test_no_replica_ever_no_wait():
    res, steps = run(ops.reserve('k', 'u', wait=dur.DEFAULT), answers([0], []))
    assert res.replicated is True
    assert [c[0] for c in steps[-1].commands] == ['SECKILL.RESERVE']


def test_an_error_reply_is_raised():
    def answer(step):
        if isinstance(step, plain_steps.ReplicaInfo):
            s = dur.ReplicaState()
            s.update(1)
            return s
        return [['RESERVED', 'r1', 9], RuntimeError('NOPERM'), 0]
    with pytest.raises(RuntimeError, match='NOPERM'):
        run(ops.reserve("k", "u", wait=dur.DEFAULT), answer)


def test_fence_protocol():
    assert 'FENCE' in p.init_args('k', 5, fence=True)
    assert 'FENCE' not in p.init_args('k', 5)
    assert p.parse_reserved(['FENCED', None, 4]) == p.Reserved('FENCED', None, 4)
    assert parse_entered(['FENCED', 12]).status == 'FENCED'
    assert [p.parse_unfence(x) for x in (b'UNFENCED', 'NOT_FENCED', 'NO_SALE')] == \
        ['UNFENCED', 'NOT_FENCED', 'NO_SALE']
    with pytest.raises(p.ProtocolError):
        p.parse_unfence('OK')


def test_sentinel_urls():
    t = parse_url('redis+sentinel://:s3cret@10.0.0.1:26379,10.0.0.2:26380/shop/2')
    assert t.sentinels == (('10.0.0.1', 26379), ('10.0.0.2', 26380))
    assert (t.service, t.db, t.password) == ('shop', 2, 's3cret')
    assert parse_url('redis+sentinel://h/shop').sentinels == (('h', 26379),)
    assert parse_url('redis://127.0.0.1:6380/0') is None
    for bad in ('redis+sentinel://h:1', 'redis+sentinel://h:1/shop/x',
                'redis+sentinel://h:99999/shop', 'redis+sentinel:///shop'):
        with pytest.raises(ValueError):
            parse_url(bad)
    assert sentinel_url(['a:1', 'b'], 'shop') == 'redis+sentinel://a:1,b:26379/shop/0'
    with pytest.raises(ValueError):
        sentinel_url([], 'shop')
    assert parse_switch(b'shop 127.0.0.1 7000 127.0.0.1 7001') == ('shop', ('127.0.0.1', 7001))
    assert parse_switch('garbage') is None
