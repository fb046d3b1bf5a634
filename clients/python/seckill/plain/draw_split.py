"""A split draw's shares as plain functions (docs/draw-sales.md, split
draw sales): each part's share of the stock in proportion to its
entrants, the transfers that move the parts there, their TIDs, and how
close the parts' chances come to one global draw."""

from __future__ import annotations

import hashlib
from typing import Dict, List, Mapping, Tuple

def _tie(salt: str, key: str) -> bytes:
    return hashlib.sha256(('%s\n%s' % (salt, key)).encode('utf-8')).digest()


def allocate(stock: int, weights: Mapping[str, int], salt: str = '') -> Dict[str, int]:
    """`stock` units over the keys of `weights` (a split sale's parts and
    their entrants) in proportion, by largest remainder: each key gets
    floor(stock * w / W), and the units left go one each to the largest
    remainders, ties broken by SHA-256(salt, key) (deterministic for a
    sale, favouring no part index). Every share is within one unit of its
    exact quota. All weights 0: every share 0."""
    if stock < 0 or any(w < 0 for w in weights.values()):
        raise ValueError('stock and weights must be >= 0')
    total_w = sum(weights.values())
    if total_w == 0:
        return {k: 0 for k in weights}
    shares = {k: stock * w // total_w for k, w in weights.items()}
    left = stock - sum(shares.values())
    ranked = sorted(weights, key=lambda k: (-(stock * weights[k] % total_w), _tie(salt, k)))
    for k in ranked[:left]:
        shares[k] += 1
    return shares


def transfer_plan(have: Mapping[str, int], target: Mapping[str, int]) -> List[Tuple[str, str, int]]:
    """The transfers [(src, dst, qty)] that take every key from `have` to
    `target` units (keys missing from `target` go to 0): the largest surplus
    pays the largest deficit first, names breaking ties, so the plan is the
    same for every client that reads the same figures. At most
    (sources + destinations - 1) transfers."""
    if sum(have.values()) != sum(target.get(k, 0) for k in have) or set(target) - set(have):
        raise ValueError('a transfer plan moves units between the same keys: %r -> %r'
                         % (dict(have), dict(target)))
    surplus = {k: v - target.get(k, 0) for k, v in have.items()}
    give = sorted(((k, d) for k, d in surplus.items() if d > 0), key=lambda x: (-x[1], x[0]))
    take = sorted(((k, -d) for k, d in surplus.items() if d < 0), key=lambda x: (-x[1], x[0]))
    plan = []
    i = j = 0
    while i < len(give) and j < len(take):
        (src, g), (dst, t) = give[i], take[j]
        q = min(g, t)
        plan.append((src, dst, q))
        give[i], take[j] = (src, g - q), (dst, t - q)
        if g == q:
            i += 1
        if t == q:
            j += 1
    return plan


def rebalance_tid(round_: str, src: str, dst: str, sent_before: int, qty: int) -> str:
    """The TID of a rebalance transfer: a function of the round, the pair,
    what the source had sent the destination before it and the quantity,
    so a retry (or a second client planning from the same figures) sends
    under the same TID and the source takes the units once."""
    h = hashlib.sha256(('draw\n%s\n%s\n%s\n%d\n%d' % (round_, src, dst, sent_before, qty))
                       .encode('utf-8')).hexdigest()
    return 'w.' + h[:16]


def split_closeness(stock: int, weights: Mapping[str, int],
                    shares: Mapping[str, int]) -> Dict[str, float]:
    """How close a split draw's per-part chances come to one global draw
    (every entrant asking one unit): `global` = stock / entrants, `parts`
    {key: share / entrants of the part}, `max_diff` the largest
    |part chance - global chance| over parts with entrants (each is below
    1 / the part's entrants, the rounding of one unit)."""
    n = sum(weights.values())
    glob = min(1.0, stock / n) if n else 0.0
    parts = {k: min(1.0, shares[k] / w) for k, w in weights.items() if w}
    return {'global': glob, 'parts': parts,
            'max_diff': max((abs(v - glob) for v in parts.values()), default=0.0)}
