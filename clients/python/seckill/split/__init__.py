"""`SplitSale`: one hot sale spread over the masters of a Redis Cluster
(docs/cluster.md). A thin redis-py layer: the plans (placement, routing,
batches, borrows, the audit, repairs, the reconcile fan-out) come from
seckill.split_protocol and seckill.split_audit, the decisions from
seckill.split.core (its concerns: topology, transfers, audit, reserve,
reconcile); this class only runs them with the sync driver.

    from redis.cluster import RedisCluster
    from seckill import SplitSale

    rc = RedisCluster(host='127.0.0.1', port=7000, decode_responses=True)
    sale = SplitSale(rc, '1001')
    sale.create(100_000, limit=1, hold_ms=900_000, stream=True)
    status, rid = sale.reserve('user:42', reqid='order-7f3a')
    sale.confirm('user:42', rid)

Thread-safe: one SplitSale may serve many threads (redis-py's clients are).

Rounds: every create or replace gives the sale a new round id, INITed into
every key (`SPLIT round n peer ...`) and stored in the layout; every SEND
and RECV carries the round the object read from the layout, and a key of
another round refuses it (STALEROUND) and changes nothing. On STALEROUND,
or an audit that finds a key in another round, the object reloads the
layout, drops every cached report and estimate, and runs the call once
more under the new round; a second one raises StaleRound (a replace is
under way, or was interrupted: finish it with create(..., replace=True)).
"""

from __future__ import annotations

from typing import Any, Dict, Iterable, Iterator, List, Optional, Tuple

from ..drivers.soldout import watcher
from ..drivers.sync import Driver
from ..plain import draw as d
from ..plain import protocol as p
from ..plain import split_protocol as sp
from ..plain.split_audit import RecoverError
from ..plain.split_protocol import StaleRound
from ..plain.steps import NodeName, one
from .core import SplitCore, SplitSaleBase
from .reserve import MAX_ATTEMPTS
from .topology import OrphanKeys


class SplitSale(SplitSaleBase):
    """A split sale by name. `client` is a redis.cluster.RedisCluster or a
    plain redis.Redis (every key on one node). `wait_ms`: the WAIT timeout
    between SEND and RECV when the source has replicas.

    `stats` counts round trips and outcomes (seckill.split.state.SplitState);
    `faults` takes crash points (seckill.faults) for the tests.

    `local_soldout`: True (the client's shared seckill.soldout.SoldOutCache)
    or a SoldOutCache. A process that proved the whole sale sold out (a
    snapshot of every key: nothing left, nothing in flight) answers
    SOLD_OUT with no round trip until a restock of any of the sale's keys
    clears the flag, a reply shows units, or the cache's bound (500 ms)
    lapses (docs/soldout.md).
    """

    _driver_class = Driver

    def __init__(self, client: Any, name: str, *, wait_ms: int = 1000,
                 local_soldout: Any = False, backend: Any = None):
        super().__init__(client, name, wait_ms=wait_ms, local_soldout=local_soldout,
                         backend=backend)
        if self.soldout is not None:
            self._watcher = watcher(self.soldout, client)
            self._run = self._run_watching

    def _run_watching(self, op: Any) -> Any:
        try:
            return self._driver.run(op)
        finally:
            keys = self._unwatched_keys()
            if keys:
                self._watcher.watch(keys)

    def layout(self) -> sp.Layout:
        """The layout, read once from the cluster (`sale:{name}:split`).
        Raises LookupError when the sale was never created."""
        return self._run(self.core.layout())

    def refresh(self) -> None:
        """Forget cached topology, replica counts and pool figures (after a
        failover or adding replicas)."""
        self._run(self.core.refresh())

    def node_name(self, key: str) -> str:
        return self._run(one(NodeName(key)))

    def create(self, total: int, parts: Optional[int] = None, limit: int = 1, hold_ms: int = 0,
               start_ms: Optional[int] = None, end_ms: Optional[int] = None,
               ttl_s: Optional[int] = None, stream: bool = False, replace: bool = False,
               bmax: int = sp.DEFAULT_BMAX, draw: bool = False,
               beacon: Optional[d.UserId] = None) -> bool:
        """Creates the pool and the parts (SECKILL.INIT each, with `SPLIT
        round n peer ...` under a new round id), then the layout hash. False
        when the sale exists and `replace` is not set (nothing changes).
        Raises OrphanKeys when keys of the sale exist without their layout
        (the pool and part keys this placement uses, and every key they
        name as peers): use recover(). With `replace`, a new round: every
        key REPLACEd, the old keys the new layout drops deleted (found from
        the old layout, or from the keys' peers when it is lost).

        `draw`: a draw sale (docs/draw-sales.md): every part is INITed with
        DRAW ([start_ms, end_ms) is registration, end_ms required); users
        enter() on their home parts, and draw() after end_ms. `beacon`
        (draw sales only): every part is INITed with `BEACON beacon`, the
        name of the public value draw() will take; publish it with
        commitments() before end_ms."""
        return self._run(self.core.create(
            total, parts=parts, limit=limit, hold_ms=hold_ms, start_ms=start_ms, end_ms=end_ms,
            ttl_s=ttl_s, stream=stream, replace=replace, bmax=bmax, draw=draw, beacon=beacon))

    def recover(self, stream: Optional[bool] = None, limit: int = 1, bmax: int = sp.DEFAULT_BMAX,
                hint: Iterable[str] = (), salts: int = 64) -> sp.Layout:
        """Rebuilds a lost layout hash from the sale's keys. The keys are
        found from the pool's and part 0's tags (salts 0 .. salts-1, see
        split_protocol.probe_keys) and `hint`, then from the peers each key
        declares; the layout comes from their INFO (round, peers, INIT
        totals: split_audit.recover_layout). Refused (RecoverError,
        nothing written) when a peer is missing, the keys are in different
        rounds, or their peers disagree; LookupError when no key exists;
        RuntimeError when the layout exists. `stream`: whether the parts
        have streams (None: when any part's `:events` stream exists);
        `limit`: the parts' LIMIT as the layout records it (INFO does not
        show it); the layout takes the pool's TTL."""
        return self._run(self.core.recover(stream=stream, limit=limit, bmax=bmax, hint=hint,
                                           salts=salts))

    def streams(self) -> List[str]:
        """The part stream keys (empty when created without stream=True)."""
        return self._run(self.core.streams())

    def reserve(self, user: str, qty: int = 1,
                reqid: Optional[str] = None) -> p.SplitReserved:
        """RESERVE on the user's home part. SOLD_OUT there makes this call
        bring stock home (pool refill, then a borrow from the richest
        parts, after completing anything in flight) and try again; the
        answer is SOLD_OUT only when no key holds `qty` and nothing is in
        flight. A SplitReserved(status, rid, remaining): Sale.reserve's shape
        (`remaining` of the home part), which unpacks as (status, rid) too. A transfer or audit that meets
        another round (the sale was replaced) reloads the layout and runs the
        call once more (its RESERVE had answered SOLD_OUT: nothing was
        taken); a second time raises StaleRound."""
        return self._run(self.core.reserve(user, qty, reqid))

    def release(self, user: str, rid: str) -> str:
        """RELEASE on the user's home part: the status word."""
        return self._run(self.core.release(user, rid))

    def confirm(self, user: str, rid: str) -> str:
        """CONFIRM on the user's home part: the status word."""
        return self._run(self.core.confirm(user, rid))

    def get(self, user: str, rid: str) -> Optional[Dict[str, Any]]:
        """SECKILL.GET on the user's home part."""
        return self._run(self.core.get(user, rid))

    def info(self) -> Dict[str, Any]:
        """The whole sale (docs/cluster.md): total, remaining, pending, confirmed,
        released, in_flight, invariant, pool, parts; plus lost_debit (units
        a destination received that its source no longer shows as sent),
        problems (why invariant is broken), flights (pairs in flight) and
        round. A key in another round than the layout read makes it read
        the layout again, once; still so, the sale is `broken` and
        `problems` names the keys (an interrupted create or replace)."""
        return self._run(self.core.info())

    def repair(self) -> int:
        """Completes every interrupted transfer (a SEND whose RECV never came:
        RECV by the source's cumulative total, after a fence write and WAIT
        on the source when it has replicas) and re-debits confirmed lost
        debits (a source that no longer shows a SEND its destination
        received: SEND the difference again under a deterministic TID).
        Returns how many transfers it re-drove."""
        return self._run(self.core.repair())

    def reconcile(self, orders: Iterable[Any], apply: bool = False,
                  chunk_size: int = p.DEFAULT_CHUNK) -> Dict[str, Any]:
        """RECONCILE on every part with the orders of its users. Counts and
        ids summed (orders_ok ... orders_conflict, orders_<class>_ids),
        `parts` per part. With apply=True a part that lacks the stock to
        take its released / unknown orders back first brings it home (pool,
        then the richest parts, as reserve does), then APPLYs; `borrowed`
        is the units it moved."""
        return self._run(self.core.reconcile(orders, apply, chunk_size))

    # -- draw sales (docs/draw-sales.md) ------------------------------------

    def enter(self, user: d.UserId, qty: int = 1, reqid: Optional[str] = None) -> d.Entered:
        """ENTER on the user's home part: Entered(status, entrants of that
        part)."""
        return self._run(self.core.enter(user, qty, reqid))

    def draw(self, count: int = d.DEFAULT_DRAW_COUNT,
             beacon_value: Optional[d.UserId] = None) -> Dict[str, Any]:
        """After end_ms: moves stock between the keys (SEND/RECV with the
        sale's ROUND, deterministic TIDs, interrupted transfers repaired
        first) so that each part holds the sale's stock in proportion to its
        entrants (largest remainder) and the pool none, then DRAWs every
        part until its draw is complete (calls of at most `count` winners).
        Before END (the server's clock; create() keeps END in the layout
        hash as `draw_end_ms`) it raises seckill.draw.RegistrationOpen and
        changes nothing. (A layout rebuilt by recover() lacks that field:
        then the parts' DRAW refuses before END, after a rebalance that a
        draw() after END plans again.)
        Once any part has begun drawing, the stock is not moved again, so a
        rerun after an interruption only finishes the draws. Returns
        {moved, transfers, rebalanced, entrants, shares, stock, closeness,
        drawn, remaining, rounds} (seckill.draw.split_closeness: each part's
        chance per entrant against one global draw's). `beacon_value`: the
        public value of the sale's beacon, sent with every part's DRAW (a
        sale created with `beacon` needs it)."""
        return self._run(self.core.draw(count, beacon_value))

    def commitments(self) -> Dict[str, str]:
        """{part key: seed_commitment}: what to publish before end_ms (with
        the beacon's name), and what verify_draw takes."""
        return self._run(self.core.commitments())

    def verify_draw(self, commitments: Optional[Dict[str, str]] = None,
                    beacon: Optional[d.UserId] = None,
                    beacon_value: Optional[d.UserId] = None) -> d.Verdict:
        """Every part's draw verified on its own secret and entrants, then
        the parts' shares: a Verdict whose `parts` are the parts' verdicts;
        `.ok` only when every part is. `commitments`: the published
        {part key: commitment} (commitments() before END); a part it leaves
        out, or a key that is not a part, fails. `beacon`, `beacon_value`:
        the sale's beacon name and public value, as for Sale.verify_draw.
        Without `commitments` the best verdict is UNCHECKED."""
        return self._run(self.core.verify_draw(commitments, beacon, beacon_value))

    def entrants(self, count: int = d.DEFAULT_PAGE) -> Iterator[Tuple[str, d.Entrant]]:
        """(part key, Entrant) for every entrant, part after part."""
        part, n = 0, 1
        while part < n:
            cursor: Any = 0
            while True:
                cursor, page, n, key = self._run(self.core.entrants_page(part, cursor, count))
                for e in page:
                    yield key, e
                if cursor == '0':
                    break
            part += 1


__all__ = ['SplitSale', 'SplitCore', 'OrphanKeys', 'StaleRound', 'RecoverError', 'MAX_ATTEMPTS']
