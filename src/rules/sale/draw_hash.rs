//! The draw's hashes (docs/draw-sales.md, draw v2): the commitment to the
//! secret, the running entrant digest, the draw seed, and the uniform
//! numbers its Fisher-Yates order is driven by. Plain functions of their
//! bytes, so clients can check a draw with the same formulas.

use sha1::Sha1;
use sha2::{Digest, Sha256};

/// The secret a draw sale's order comes from: 32 bytes, drawn on the master.
pub type Seed = [u8; 32];

/// The entrant digest of no entrant: 32 zero bytes.
pub const EMPTY_DIGEST: [u8; 32] = [0; 32];

/// The seed's commitment, published from INIT on: `SHA-256(seed)`.
pub fn commitment(seed: &Seed) -> [u8; 32] {
    Sha256::digest(seed).into()
}

/// The entrant digest after one more entrant:
/// `SHA-256(d || u32be(len(user)) || user || u32be(qty))`. A QTY of 2^32 or
/// more (LIMIT allows it) contributes its low 32 bits.
pub fn next_digest(d: &[u8; 32], user: &[u8], qty: u64) -> [u8; 32] {
    let mut h = Sha256::new();
    h.update(d);
    h.update((user.len() as u32).to_be_bytes());
    h.update(user);
    h.update((qty as u32).to_be_bytes());
    h.finalize().into()
}

/// The draw seed the first DRAW fixes: `SHA-256(secret || D || beacon)`,
/// the beacon value empty when the sale declared none.
pub fn draw_seed(secret: &Seed, digest: &[u8; 32], beacon: &[u8]) -> [u8; 32] {
    let mut h = Sha256::new();
    h.update(secret);
    h.update(digest);
    h.update(beacon);
    h.finalize().into()
}

/// The first 6 bytes of `SHA-1(s || u32be(j) || u32be(c))`, big-endian.
pub fn draw_word(s: &[u8; 32], j: u32, c: u32) -> u64 {
    let mut h = Sha1::new();
    h.update(s);
    h.update(j.to_be_bytes());
    h.update(c.to_be_bytes());
    let h = h.finalize();
    h[..6].iter().fold(0u64, |x, &b| x << 8 | u64::from(b))
}

/// `uniform(S, j, m)`: a number in `0..m` (`m >= 1`), by rejection sampling
/// over 48-bit words `draw_word(s, j, c)` for `c = 0, 1, 2, ...`.
pub fn uniform(s: &[u8; 32], j: u32, m: u64) -> u64 {
    debug_assert!((1..=1 << 48).contains(&m));
    let limit = ((1u64 << 48) / m) * m;
    let mut c = 0u32;
    loop {
        let x = draw_word(s, j, c);
        if x < limit {
            return x % m;
        }
        c = c.wrapping_add(1);
    }
}

/// Lowercase hex.
pub fn hex(bytes: &[u8]) -> Box<[u8]> {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    bytes.iter().flat_map(|b| [HEX[usize::from(b >> 4)], HEX[usize::from(b & 15)]]).collect()
}
