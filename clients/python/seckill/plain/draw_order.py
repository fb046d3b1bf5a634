"""The draw's hashes and order (docs/draw-sales.md, draw v2) as plain
functions, the same formulas as the module and the library: the
commitment to the secret, the running entrant digest D(i), the draw seed
S and the Fisher-Yates order driven by uniform(S, j, m). Tested without a
server; `draw` builds the draw sale's replies and verification on them.
"""

from __future__ import annotations

import hashlib
from typing import Any, Dict, Iterable, Iterator, List, Optional, Tuple, Union

from .protocol import ProtocolError, text

UserId = Union[str, bytes]
"""A user id as clients pass it: text or the exact bytes."""

ZERO_DIGEST = bytes(32)
"""D(0): the entrant digest of a sale nobody entered."""

_2_48 = 1 << 48


def user_bytes(user: UserId) -> bytes:
    """A user id's bytes (a str as UTF-8; the bytes a decoding client could
    not decode come back through surrogateescape, as seckill.protocol.text
    makes them)."""
    if isinstance(user, (bytes, bytearray)):
        return bytes(user)
    return str(user).encode('utf-8', 'surrogateescape')


value_bytes = user_bytes
"""A beacon name or value's bytes, as user_bytes."""


def seed_bytes(seed: Union[str, bytes]) -> bytes:
    """32 bytes from a hex string (INFO's `seed`, `draw_seed`,
    `entrants_digest`), or the bytes themselves."""
    if isinstance(seed, (bytes, bytearray)):
        if len(seed) == 64:
            seed = bytes(seed).decode('ascii', 'replace')
        else:
            return bytes(seed)
    try:
        raw = bytes.fromhex(seed)
    except ValueError:
        raise ProtocolError('not hex: %r' % (seed,)) from None
    return raw


def commitment(seed: Union[str, bytes]) -> str:
    """The hex SHA-256 of the secret: what INFO publishes from INIT on."""
    return hashlib.sha256(seed_bytes(seed)).hexdigest()


def commitment_ok(seed: Union[str, bytes], seed_commitment: str) -> bool:
    """SHA-256(seed) equals the commitment published before the draw."""
    return commitment(seed) == hex_text(seed_commitment)


def hex_text(value: Any) -> str:
    """A hex value as INFO shows it, lowercase; '' for none."""
    return str(text(value) or '').strip().lower()


def _user_qty(e: Any) -> Tuple[bytes, int]:
    if hasattr(e, 'user'):
        return user_bytes(e.user), int(e.qty)
    user, qty = e[0], e[1]
    return user_bytes(user), int(qty)


def digest_step(digest: bytes, user: UserId, qty: int) -> bytes:
    """D(i+1) = SHA-256(D(i) || u32be(len(user)) || user || u32be(qty)): the
    digest after one more ENTERED. A QTY of 2^32 or more (LIMIT allows one)
    counts with its low 32 bits, as the module and the library take it."""
    u = user_bytes(user)
    return hashlib.sha256(bytes(digest) + len(u).to_bytes(4, 'big') + u
                          + (int(qty) & 0xFFFFFFFF).to_bytes(4, 'big')).digest()


def entrants_digest(entrants: Iterable[Any]) -> bytes:
    """D(n) of `entrants` in arrival order (the order ENTRANTS pages them):
    Entrant, or (user, qty) pairs. 32 zero bytes for none."""
    h = ZERO_DIGEST
    for e in entrants:
        u, q = _user_qty(e)
        h = hashlib.sha256(h + len(u).to_bytes(4, 'big') + u + q.to_bytes(4, 'big')).digest()
    return h


def draw_seed(secret: Union[str, bytes], digest: Union[str, bytes],
              beacon_value: Optional[Union[str, bytes]] = None) -> bytes:
    """S = SHA-256(secret || D || beacon value): the seed the first DRAW
    fixes (`beacon_value` None or empty for a sale that declared no
    beacon). `secret` and `digest`: 32 bytes, or their hex."""
    value = b'' if beacon_value is None else value_bytes(beacon_value)
    return hashlib.sha256(seed_bytes(secret) + seed_bytes(digest) + value).digest()


def _uniform(base: Any, j: int, m: int) -> int:
    """uniform() with SHA-1's state after S already hashed (`base`)."""
    if m == 1:
        return 0             # x mod 1: every x is below limit = 2^48
    limit = _2_48 - _2_48 % m
    prefix = j.to_bytes(4, 'big')
    c = 0
    while True:
        h = base.copy()
        h.update(prefix + c.to_bytes(4, 'big'))
        x = int.from_bytes(h.digest()[:6], 'big')
        if x < limit:
            return x % m
        c += 1


def uniform(seed: Union[str, bytes], j: int, m: int) -> int:
    """uniform(S, j, m): 0 <= result < m, from SHA-1(S || u32be(j) ||
    u32be(c)) for c = 0, 1, ...: its first 6 bytes big-endian, x, taken
    when x < floor(2^48 / m) * m, as x mod m."""
    if m < 1:
        raise ValueError('uniform needs m >= 1, got %d' % m)
    return _uniform(hashlib.sha1(seed_bytes(seed)), int(j), int(m))


class DrawOrder(Iterator[int]):
    """The draw order of `n` entrants under draw seed S, lazily: the
    arrival indices a[0], a[1], ... of the Fisher-Yates shuffle
    `for j in 0..n-1: swap a[j], a[j + uniform(S, j, n - j)]`, one step per
    next(). Only the positions the walk has touched are kept, so looking at
    the first k entrants costs k steps and memory for k, whatever n is."""

    def __init__(self, seed: Union[str, bytes], n: int):
        if not 0 <= n < 1 << 32:
            raise ValueError('a draw order has 0 to 2^32 - 1 entrants, got %d' % n)
        self.n = int(n)
        self.j = 0
        """Entrants produced so far (the next step's j)."""
        self._base = hashlib.sha1(seed_bytes(seed))
        self._moved: Dict[int, int] = {}

    def __next__(self) -> int:
        j = self.j
        if j >= self.n:
            raise StopIteration
        t = j + _uniform(self._base, j, self.n - j)
        at = self._moved.pop(t, t)
        aj = self._moved.pop(j, j)
        if t != j:
            self._moved[t] = aj
        self.j = j + 1
        return at


def permutation(seed: Union[str, bytes], n: int) -> List[int]:
    """The whole draw order of `n` entrants: arrival indices (DrawOrder's
    sequence, with the whole list in place of its sparse map)."""
    if not 0 <= n < 1 << 32:
        raise ValueError('a draw order has 0 to 2^32 - 1 entrants, got %d' % n)
    base = hashlib.sha1(seed_bytes(seed))
    a = list(range(n))
    for j in range(n):
        t = j + _uniform(base, j, n - j)
        a[j], a[t] = a[t], a[j]
    return a
