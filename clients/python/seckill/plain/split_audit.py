"""The split-sale audit (docs/cluster.md, sections 4, 5 and 7) as plain
functions: one key's report as a KeyState, the audit of a round of reports
(in flight, lost debits, the invariant, keys of another round), the repair
plan that completes interrupted transfers and re-debits lost debits, and
the layout rebuilt from the keys when the layout hash is lost.

Nothing here talks to Redis: tests/test_split_audit.py checks it without a
server; the split sale's driver executes the plans.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, List, Mapping, Optional, Tuple

from .split_protocol import (DEFAULT_BMAX, Layout, check_name, debit_id, key_tag, low_water,
                             parse_tag, stream_key, tag_key)


# ---------------------------------------------------------------- state and audit

@dataclass
class KeyState:
    """One key's report, as SECKILL.INFO gives it; `sent` / `received` per
    peer key."""
    key: str
    total: int
    remaining: int
    pending: int
    confirmed: int
    released: int
    invariant: str
    sent: Dict[str, int] = field(default_factory=dict)
    received: Dict[str, int] = field(default_factory=dict)
    report: Dict[str, Any] = field(default_factory=dict)
    round: Optional[str] = None       # None: a plain sale (not INITed with SPLIT)
    incarnation: Optional[str] = None  # INFO incarnation: what SEND and RECV name in TO
    sent_to: Dict[str, str] = field(default_factory=dict)   # peer -> the incarnation `sent` was counted for

    @property
    def peers(self) -> List[str]:
        """The declared peers (INFO lists every one, sorted)."""
        return sorted(set(self.sent) | set(self.received))


def key_state(key: str, report: Optional[Mapping[str, Any]]) -> Optional[KeyState]:
    """A parsed report (seckill.protocol.parse_report) as a KeyState; None
    for a missing key."""
    if report is None:
        return None
    sent: Dict[str, int] = {}
    received: Dict[str, int] = {}
    for peer, s, r in report.get('peers', []) or []:
        sent[peer] = int(s)
        received[peer] = int(r)
    return KeyState(key=key, total=int(report['total']), remaining=int(report['remaining']),
                    pending=int(report['pending']), confirmed=int(report['confirmed']),
                    released=int(report.get('released', 0)), invariant=str(report['invariant']),
                    sent=sent, received=received, report=dict(report),
                    round=report.get('round'), incarnation=report.get('incarnation'),
                    sent_to={str(p): str(i) for p, i in report.get('sent_to', []) or []})


@dataclass
class Audit:
    """The whole sale from one round of reports.

    `in_flight` sums sent_i[j] - received_j[i] over the pairs where it is
    positive (`flights`: (src, dst) -> (sent_total, received_total)).
    A negative pair (`negative`: (src, dst) -> units) is a destination
    that received more than its source ever sent: a lost debit (the source
    went back in time: a restored DUMP, a failover that lost the SEND). It
    is only trusted when a read of the source after the destination
    confirms it; a single parallel round can show one across a transfer.
    """
    total: int
    remaining: int = 0
    pending: int = 0
    confirmed: int = 0
    released: int = 0
    in_flight: int = 0
    flights: Dict[Tuple[str, str], Tuple[int, int]] = field(default_factory=dict)
    negative: Dict[Tuple[str, str], int] = field(default_factory=dict)
    missing: List[str] = field(default_factory=list)
    problems: List[str] = field(default_factory=list)
    remainders: Dict[str, int] = field(default_factory=dict)
    stale: Dict[str, Optional[str]] = field(default_factory=dict)   # key -> its round, not the layout's
    flights_to: Dict[Tuple[str, str], str] = field(default_factory=dict)   # the incarnation each flight was sent to
    round: str = ''                   # the layout's round: every step planned from it carries it

    @property
    def lost_debit(self) -> int:
        return sum(self.negative.values())

    @property
    def available(self) -> int:
        """Units that are or will be reservable: remaining plus in flight."""
        return self.remaining + self.in_flight

    @property
    def invariant(self) -> str:
        return 'ok' if not self.problems else 'broken'


def audit(layout: Layout, states: Mapping[str, Optional[KeyState]]) -> Audit:
    """Checks `sum(remaining + pending + confirmed) + in_flight == total`
    and everything it rests on: every key present and in the layout's
    round, each key's own invariant ok, the INIT totals summing to the
    sale's total, no negative pair, no transfer with a key outside the
    sale. A key in another round (`stale`) means the layout read is not the
    one the keys follow (the sale was replaced since, or a replace is under
    way): a client reloads the layout rather than act on such an audit."""
    a = Audit(total=layout.total, round=layout.round)
    keys = layout.keys
    members = set(keys)
    init_sum = 0
    for k in keys:
        st = states.get(k)
        if st is None:
            a.missing.append(k)
            continue
        if st.round != layout.round:
            a.stale[k] = st.round
            a.problems.append('%s: %s, the layout says round %s' % (
                k, 'round %s' % st.round if st.round is not None else 'not a part of a split sale',
                layout.round))
        a.remaining += st.remaining
        a.pending += st.pending
        a.confirmed += st.confirmed
        a.released += st.released
        a.remainders[k] = st.remaining
        init_sum += st.total
        if st.invariant != 'ok':
            a.problems.append('%s: invariant %s' % (k, st.invariant))
        for peer in set(st.sent) | set(st.received):
            if peer not in members:
                a.problems.append('%s: transfers with %s, not a key of this sale' % (k, peer))
    for src in keys:
        s_state = states.get(src)
        if s_state is None:
            continue
        for dst in keys:
            if dst == src or states.get(dst) is None:
                continue
            sent = s_state.sent.get(dst, 0)
            got = states[dst].received.get(src, 0)
            to, now = s_state.sent_to.get(dst), states[dst].incarnation
            if to is not None and now is not None and to != now:
                # dst was deleted and re-created: what src sent went to the
                # key before it, and no RECV may credit it again.
                a.problems.append('%s was re-created (incarnation %s): %s counted %d units sent to its earlier '
                                  'incarnation %s; create(..., replace=True) starts a new round'
                                  % (dst, now, src, sent, to))
                continue
            if sent > got:
                if to is not None:
                    a.flights_to[(src, dst)] = to
                a.flights[(src, dst)] = (sent, got)
                a.in_flight += sent - got
            elif got > sent:
                a.negative[(src, dst)] = got - sent
    if a.missing:
        a.problems.append('missing keys: %s' % ', '.join(a.missing))
    elif init_sum != layout.total:
        a.problems.append('INIT totals sum to %d, the sale has %d' % (init_sum, layout.total))
    for (src, dst), n in sorted(a.negative.items()):
        a.problems.append('lost debit: %s received %d more from %s than it sent' % (dst, n, src))
    if not a.missing and a.remaining + a.pending + a.confirmed + a.in_flight != layout.total:
        a.problems.append('remaining + pending + confirmed + in_flight = %d, total %d'
                          % (a.remaining + a.pending + a.confirmed + a.in_flight, layout.total))
    return a


def sold_out(a: Audit, qty: int) -> bool:
    """The only SOLD_OUT a split sale answers: no key holds the units and
    nothing is in flight that could bring them."""
    return a.remaining < qty and a.in_flight == 0


# ---------------------------------------------------------------- keys without a layout

class RecoverError(ValueError):
    """The keys found cannot be one split sale (missing, different rounds,
    peers that disagree): nothing is written."""


def unread_peers(states: Mapping[str, Optional[KeyState]]) -> List[str]:
    """Peers named by the keys read so far that were not read yet: reading
    them, and repeating, finds every key of the round of any key found."""
    seen = set(states)
    out = set()
    for st in states.values():
        if st is not None:
            out.update(x for x in st.peers if x not in seen)
    return sorted(out)


def recover_layout(name: str, states: Mapping[str, Optional[KeyState]], *, streams: bool = False,
                   limit: int = 1, bmax: int = DEFAULT_BMAX) -> Layout:
    """The layout of a sale whose layout hash is lost, from the keys alone:
    `states` holds the INFO of every key found (unread_peers() empty). The
    pool is the key tagged `N.pool[.s]`, part i the key tagged `N.p<i>[.s]`;
    the INIT totals are each key's `total`, the round the one round every
    key is in. Refused (RecoverError) when a key a peer list names is
    missing, a key is not one this sale's placement makes, two keys claim
    the pool or one part, the parts are not 0 .. P-1, the keys are in
    different rounds (or one is a plain sale), or a key's declared peers are
    not exactly what the layout gives it. `streams`, `limit`: what INFO
    does not show (the caller finds the streams; limit is informative)."""
    check_name(name)
    missing = sorted(k for k, st in states.items() if st is None)
    if missing:
        raise RecoverError('split sale %r: keys named as peers do not exist: %s'
                           % (name, ', '.join(missing)))
    if not states:
        raise RecoverError('split sale %r: no key found' % name)
    pool: Optional[str] = None
    parts: Dict[int, str] = {}
    for key in sorted(states):
        tag = key_tag(key)
        kind = parse_tag(name, tag) if key == tag_key(tag) else None
        if kind is None:
            raise RecoverError('split sale %r: %s is not a key of its placement' % (name, key))
        if kind[0] == 'pool':
            if pool is not None:
                raise RecoverError('split sale %r: two pools, %s and %s' % (name, pool, key))
            pool = key
        else:
            i = kind[1]
            if i in parts:
                raise RecoverError('split sale %r: two keys for part %d, %s and %s'
                                   % (name, i, parts[i], key))
            parts[i] = key
    if pool is None:
        raise RecoverError('split sale %r: no pool among %s' % (name, ', '.join(sorted(states))))
    if sorted(parts) != list(range(len(parts))) or not parts:
        raise RecoverError('split sale %r: parts %s, not 0 .. P-1' % (name, sorted(parts)))
    rounds = {k: st.round for k, st in states.items()}
    if len(set(rounds.values())) != 1 or None in rounds.values():
        raise RecoverError('split sale %r: the keys are in different rounds (%s): finish the '
                           'create or replace that was interrupted (create(..., replace=True))'
                           % (name, ', '.join('%s %s' % (k, rounds[k] or 'plain')
                                              for k in sorted(rounds))))
    part_keys = tuple(parts[i] for i in range(len(parts)))
    initial = (states[pool].total,) + tuple(states[k].total for k in part_keys)
    lay = Layout(name=name, total=sum(initial), pool=pool, parts=part_keys,
                 streams=tuple(stream_key(key_tag(k)) for k in part_keys) if streams else (),
                 limit=limit, bmax=bmax, low=low_water(initial[0], len(part_keys), bmax),
                 initial=initial, round=next(iter(rounds.values())))
    for k in lay.keys:
        if states[k].peers != sorted(lay.peers(k)):
            raise RecoverError('split sale %r: %s declares peers %s, the layout gives it %s'
                               % (name, k, states[k].peers, sorted(lay.peers(k))))
    return lay


# ---------------------------------------------------------------- repair

RECV = 'recv'
DEBIT = 'debit'


@dataclass(frozen=True)
class RepairStep:
    """`recv`: RECV dst src sent_total (after a fence write and WAIT on the
    source's node when it has replicas). `debit`: SEND src dst units MIN 1
    TID debit_id(dst, received) brings src's sent counter up to what dst
    has received (only for a negative pair confirmed by a second read)."""
    action: str
    src: str
    dst: str
    amount: int          # recv: the sent_total to pass; debit: the units to take
    tid: Optional[str] = None
    to: Optional[str] = None   # recv: the incarnation of dst that src counted amount for (TO)


def repair_plan(a: Audit, confirmed_negative: Optional[Mapping[Tuple[str, str], Tuple[int, int]]] = None
                ) -> List[RepairStep]:
    """The steps that complete interrupted transfers (every pair in flight)
    and re-debit confirmed lost debits. `confirmed_negative` maps (src, dst)
    to (src's sent, dst's received) as read destination first, then source."""
    steps = [RepairStep(RECV, src, dst, sent, to=a.flights_to.get((src, dst)))
             for (src, dst), (sent, _got) in sorted(a.flights.items())]
    for (src, dst), (sent, got) in sorted((confirmed_negative or {}).items()):
        if got > sent:
            steps.append(RepairStep(DEBIT, src, dst, got - sent, debit_id(dst, got)))
    return steps


__all__ = ['KeyState', 'key_state', 'Audit', 'audit', 'sold_out', 'RecoverError', 'unread_peers',
           'recover_layout', 'RECV', 'DEBIT', 'RepairStep', 'repair_plan']
