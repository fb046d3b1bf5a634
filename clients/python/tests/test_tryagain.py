"""TRYAGAIN without a server: the one retry (seckill.plain.steps.call), its bounded
backoff, and that Sale and SplitSale calls go through it; other errors are
not retried."""

import time

import pytest
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import ClusterError, ResponseError, TryAgainError

from seckill import Sale, SplitSale
from seckill import split_protocol as sp
from seckill.plain import steps as plain_steps

STREAM_AWAY = "the sale's STREAM key is not on this node (slot migration in progress?); retry later"


class Scripted:
    """A stand-in for redis.Redis: execute_command answers from a script per
    command name (an exception instance is raised), and records every call."""

    _seckill_backend = 'module'     # seckill.backend's cache: no MODULE LIST asked

    def __init__(self, **script):
        self.script = {k.replace('_', '.').upper(): list(v) for k, v in script.items()}
        self.calls = []

    def execute_command(self, *args):
        self.calls.append(args)
        answers = self.script[str(args[0]).upper()]
        answer = answers.pop(0) if len(answers) > 1 else answers[0]
        if isinstance(answer, BaseException):
            raise answer
        return answer

    def count(self, name):
        return sum(1 for c in self.calls if c[0] == name)


def test_call_backoff_is_bounded_to_about_a_second():
    op = plain_steps.call(['SECKILL.RESERVE', 'k', 'u'])
    steps = [op.send(None)]
    while True:
        step = steps[-1]
        try:
            if isinstance(step, plain_steps.Call):
                steps.append(op.throw(TryAgainError(STREAM_AWAY)))
            else:
                steps.append(op.send(None))
        except TryAgainError as exc:      # the last try's error goes to the caller
            assert STREAM_AWAY in str(exc)
            break
    calls = [s for s in steps if isinstance(s, plain_steps.Call)]
    sleeps = [s.seconds for s in steps if isinstance(s, plain_steps.Sleep)]
    assert len(calls) == len(plain_steps.TRYAGAIN_DELAYS) + 1 == 6
    assert sleeps == list(plain_steps.TRYAGAIN_DELAYS) and sleeps == sorted(sleeps)
    assert sum(sleeps) == pytest.approx(1.0)


def test_call_returns_the_reply_after_tryagain():
    op = plain_steps.call(['PING'])
    assert op.send(None) == plain_steps.Call(['PING'])
    assert op.throw(ResponseError('TRYAGAIN Multiple keys request during rehashing')) == plain_steps.Sleep(0.05)
    assert op.send(None) == plain_steps.Call(['PING'])
    with pytest.raises(StopIteration) as stop:
        op.send('PONG')
    assert stop.value.value == 'PONG'


def test_sale_retries_tryagain_then_reserves():
    r = Scripted(seckill_reserve=[TryAgainError(STREAM_AWAY), TryAgainError(STREAM_AWAY),
                                  ['RESERVED', 'o1', 9]])
    t0 = time.monotonic()
    res = Sale(r, 'sale:{m}').reserve('u1', reqid='o1')
    assert (res.status, res.rid, res.remaining) == ('RESERVED', 'o1', 9)
    assert r.count('SECKILL.RESERVE') == 3
    assert time.monotonic() - t0 >= 0.05 + 0.1 - 0.01


def test_sale_gives_up_after_the_last_try(monkeypatch):
    monkeypatch.setattr(plain_steps, 'TRYAGAIN_DELAYS', (0.0, 0.0, 0.0))
    r = Scripted(seckill_release=[TryAgainError(STREAM_AWAY)])
    with pytest.raises(TryAgainError):
        Sale(r, 'sale:{m}').release('o1')
    assert r.count('SECKILL.RELEASE') == 4


@pytest.mark.parametrize('error', [RedisConnectionError('lost'), ResponseError('ERR QTY past LIMIT'),
                                   TypeError('not a redis error')])
def test_other_errors_are_not_retried(error):
    r = Scripted(seckill_reserve=[error])
    with pytest.raises(type(error)):
        Sale(r, 'sale:{m}').reserve('u1')
    assert r.count('SECKILL.RESERVE') == 1


def test_split_sale_retries_tryagain_on_its_home_part():
    lay = sp.make_layout('m', 300, 'm.pool', ['m.p0', 'm.p1', 'm.p2'], round_='r1')
    r = Scripted(hgetall=[lay.to_hash()],
                 seckill_reserve=[TryAgainError(STREAM_AWAY), ['RESERVED', 'o1', 50]],
                 seckill_confirm=[TryAgainError(STREAM_AWAY), ['CONFIRMED', 49]])
    sale = SplitSale(r, 'm')
    assert sale.reserve('alice', reqid='o1') == ('RESERVED', 'o1')
    assert sale.confirm('alice', 'o1') == 'CONFIRMED'
    home = lay.home('alice')
    assert [c[1] for c in r.calls if c[0] == 'SECKILL.RESERVE'] == [home, home]
    assert r.count('SECKILL.CONFIRM') == 2


def test_a_cluster_clients_own_retries_count_against_the_budget(monkeypatch):
    """RedisCluster retries TRYAGAIN itself (~0.4 s) and raises ClusterError
    ('TTL exhausted.'): retried too, but no wait may end past the budget."""
    clock = [100.0]
    monkeypatch.setattr(plain_steps, 'monotonic', lambda: clock[0])
    op = plain_steps.call(['SECKILL.RESERVE', 'k', 'u'])
    step, calls, sleeps = op.send(None), 0, []
    with pytest.raises(ClusterError, match='TTL exhausted'):
        while True:
            if isinstance(step, plain_steps.Call):
                calls += 1
                clock[0] += 0.41                  # the cluster client's own 16 tries
                step = op.throw(ClusterError('TTL exhausted.'))
            else:
                sleeps.append(step.seconds)
                clock[0] += step.seconds
                step = op.send(None)
    assert calls == 3 and sleeps == [0.05, 0.1]
    assert clock[0] - 100.0 <= plain_steps.TRYAGAIN_BUDGET
    other = plain_steps.call(['GET', 'k'])
    other.send(None)
    with pytest.raises(ClusterError, match='Cluster mode'):   # any other ClusterError: at once
        other.throw(ClusterError('Cluster mode is not enabled on this node'))
