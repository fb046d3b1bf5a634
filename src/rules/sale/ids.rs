//! Generated reservation ids. A sale made by INIT has a secret id key (16
//! random bytes the master draws, `SaleConfig::id_key`) and writes
//! `<tag>-<seq>-<mac>`: the eight hex digits of the sale's tag, the
//! record's sequence number, and sixteen hex digits of SipHash-2-4 of
//! `tag, seq` (little-endian u32s) under the id key. So one id tells
//! nothing of its neighbours': a guessed id is refused as unknown. A sale
//! without a key (loaded from a payload or an INIT effect from before id
//! keys) keeps `<tag>-<seq>`, the form it has always issued.
//!
//! Generated ids are not stored: a record with a generated id is marked so
//! (`GENERATED`) and its id is written from the tag, the key and its place
//! whenever it is read; a lookup parses the sequence number and checks the
//! mac (O(1)).

use crate::rules::digits::Digits;

/// A sale's secret id key.
pub type IdKey = [u8; 16];

/// No sequence number is this (`records::NONE` marks "no record"), so
/// `<tag>-4294967295` is no generated id. Spelled here rather than
/// imported: `records` builds on this file, not the other way round.
pub(super) const NO_SEQ: u32 = u32::MAX;

/// SipHash-2-4 of `tag, seq` under `key`: a keyed pseudo-random function,
/// so without the key one mac does not predict another.
#[inline]
fn mac(key: &IdKey, tag: u32, seq: u32) -> u64 {
    use std::hash::Hasher;
    let (k0, k1) = key.split_at(8);
    #[allow(deprecated)] // std's SipHasher is SipHash-2-4, stable, with keys
    let mut h = std::hash::SipHasher::new_with_keys(u64::from_le_bytes(k0.try_into().unwrap()), u64::from_le_bytes(k1.try_into().unwrap()));
    let mut msg = [0u8; 8];
    msg[..4].copy_from_slice(&tag.to_le_bytes());
    msg[4..].copy_from_slice(&seq.to_le_bytes());
    h.write(&msg);
    h.finish()
}

#[inline]
fn mac_hex(key: &IdKey, tag: u32, seq: u32) -> [u8; 16] {
    let m = mac(key, tag, seq);
    let (hi, lo) = (hex8((m >> 32) as u32), hex8(m as u32));
    let mut out = [0u8; 16];
    out[..8].copy_from_slice(&hi);
    out[8..].copy_from_slice(&lo);
    out
}

/// The eight lowercase hex digits of `x`, most significant first, made in
/// one register (a table lookup per digit cost about 100 instructions per
/// generated id): each nibble is spread into a byte of its own, then
/// `'0' + n`, plus `'a' - '0' - 10` for the nibbles above 9 (those whose
/// byte reaches 16 when 6 is added). No byte carries into the next.
#[inline]
fn hex8(x: u32) -> [u8; 8] {
    const BYTES: u64 = 0x0101_0101_0101_0101;
    let mut v = u64::from(x);
    v = (v | v << 16) & 0x0000_ffff_0000_ffff;
    v = (v | v << 8) & 0x00ff_00ff_00ff_00ff;
    v = (v | v << 4) & 0x0f0f_0f0f_0f0f_0f0f;
    let above_9 = ((v + 6 * BYTES) >> 4) & BYTES;
    // Byte k holds nibble k (least significant first): big-endian order
    // writes the most significant digit first.
    (v + u64::from(b'0') * BYTES + above_9 * u64::from(b'a' - b'0' - 10)).to_be_bytes()
}

/// Sixteen lowercase hex digits as a number (`None` for anything else).
#[inline]
fn parse_hex16(hex: &[u8]) -> Option<u64> {
    if hex.len() != 16 {
        return None;
    }
    hex.iter().try_fold(0u64, |n, &b| {
        let d = match b {
            b'0'..=b'9' => b - b'0',
            b'a'..=b'f' => b - b'a' + 10,
            _ => return None,
        };
        Some(n << 4 | u64::from(d))
    })
}

/// Writes `<tag>-<seq>-<mac>` (`<tag>-<seq>` without a key) into `out`.
#[inline]
pub(super) fn write_generated(out: &mut Digits, tag: u32, seq: u32, key: Option<&IdKey>) {
    out.extend(&tag_hex(tag));
    out.push(b'-');
    out.push_u64(u64::from(seq));
    if let Some(key) = key {
        out.push(b'-');
        out.extend(&mac_hex(key, tag, seq));
    }
}

/// The eight lowercase hex digits of `tag`, as `write_generated` writes them.
#[inline]
fn tag_hex(tag: u32) -> [u8; 8] {
    hex8(tag)
}

/// `Some(n)` when `id` is the id `write_generated` writes for record `n`
/// (with `key`, its mac checked). Runs several times per RESERVE: the tag
/// is compared as eight bytes first.
#[inline]
pub(super) fn parse_generated(id: &[u8], tag: u32, key: Option<&IdKey>) -> Option<u32> {
    let (seq, given) = parse_shape(id, tag, key)?;
    mac_matches(key, tag, seq, given).then_some(seq)
}

/// Whether `given` (from `parse_shape`) is the mac of record `seq`.
#[inline]
pub(super) fn mac_matches(key: Option<&IdKey>, tag: u32, seq: u32, given: u64) -> bool {
    key.is_none_or(|k| mac(k, tag, seq) == given)
}

/// `Some((n, mac))` when `id` is written as the generated id of record
/// `n`, its mac (0 without a key) not checked yet: a lookup checks it only
/// when record `n` exists.
#[inline]
pub(super) fn parse_shape(id: &[u8], tag: u32, key: Option<&IdKey>) -> Option<(u32, u64)> {
    let (Some(hex), Some((b'-', rest))) = (id.get(..8), id.get(8..).and_then(<[u8]>::split_first)) else {
        return None;
    };
    if hex != tag_hex(tag) {
        return None;
    }
    let (digits, given) = match key {
        None => (rest, 0),
        Some(_) => {
            // `<seq>-<16 hex>`: the mac is the last 17 bytes.
            let at = rest.len().checked_sub(17)?;
            let (digits, tail) = rest.split_at(at);
            if tail[0] != b'-' {
                return None;
            }
            (digits, parse_hex16(&tail[1..])?)
        }
    };
    let canonical = !digits.is_empty() && digits.len() <= 10 && (digits.len() == 1 || digits[0] != b'0');
    if !canonical {
        return None;
    }
    let mut n: u64 = 0;
    for &b in digits {
        if !b.is_ascii_digit() {
            return None;
        }
        n = n * 10 + u64::from(b - b'0');
    }
    let seq = u32::try_from(n).ok().filter(|&n| n != NO_SEQ)?;
    Some((seq, given))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn xorshift(x: &mut u64) -> u64 {
        *x ^= *x << 13;
        *x ^= *x >> 7;
        *x ^= *x << 17;
        *x
    }

    #[test]
    fn generated_ids_parse_back_and_nothing_else_does() {
        let mut x: u64 = 0x2545_f491_4f6c_dd1d;
        let key: IdKey = *b"0123456789abcdef";
        for _ in 0..5000 {
            let x = xorshift(&mut x);
            let (tag, seq) = (x as u32, ((x >> 32) as u32) >> (x % 32));
            let want = (seq != NO_SEQ).then_some(seq);
            for k in [None, Some(&key)] {
                let mut id = Digits::default();
                write_generated(&mut id, tag, seq, k);
                assert_eq!(parse_generated(id.as_bytes(), tag, k), want, "{id:?}");
                assert_eq!(parse_generated(id.as_bytes(), tag ^ 1, k), None);
            }
        }
        for bad in [&b"0000002a-"[..], b"0000002a-01", b"0000002A-1", b"0000002a+1", b"0000002a-1x", b"0000002a-12345678901", b"2a-1"] {
            assert_eq!(parse_generated(bad, 0x2a, None), None, "{}", String::from_utf8_lossy(bad));
        }
        assert_eq!(parse_generated(b"0000002a-0", 0x2a, None), Some(0));
        assert_eq!(parse_generated(b"0000002a-4294967294", 0x2a, None), Some(4_294_967_294));
    }

    /// `hex8` writes what `{:08x}` writes, for every nibble in every place.
    #[test]
    fn hex_digits_match_format() {
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut samples = vec![0, 1, 9, 10, 15, 16, 0x0123_4567, 0x89ab_cdef, 0xffff_ffff, 0xa0a0_a0a0, 0x9999_9999];
        samples.extend((0..8).flat_map(|i| (0..16u32).map(move |n| n << (4 * i))));
        for _ in 0..10_000 {
            samples.push(xorshift(&mut x) as u32);
        }
        for v in samples {
            assert_eq!(hex8(v), format!("{v:08x}").as_bytes(), "{v:#x}");
        }
        let key: IdKey = *b"0123456789abcdef";
        for seq in 0..1000 {
            assert_eq!(mac_hex(&key, 7, seq), format!("{:016x}", mac(&key, 7, seq)).as_bytes());
        }
    }

    /// With a key, only the exact id parses: not the keyless form, not
    /// another record's mac, not a mac under another key, not one changed
    /// digit.
    #[test]
    fn a_keyed_id_is_refused_unless_exact() {
        let (key, other): (IdKey, IdKey) = ([7; 16], [8; 16]);
        let mut id = Digits::default();
        write_generated(&mut id, 0x2a, 5, Some(&key));
        let id = id.as_bytes().to_vec();
        assert_eq!(id.len(), 8 + 1 + 1 + 1 + 16);
        assert_eq!(parse_generated(&id, 0x2a, Some(&key)), Some(5));
        assert_eq!(parse_generated(&id, 0x2a, Some(&other)), None);
        assert_eq!(parse_generated(&id, 0x2a, None), None);
        assert_eq!(parse_generated(b"0000002a-5", 0x2a, Some(&key)), None);
        let mut next = Digits::default();
        write_generated(&mut next, 0x2a, 6, Some(&key));
        let mut forged = b"0000002a-6".to_vec();
        forged.extend_from_slice(&id[10..]);
        assert_eq!(parse_generated(&forged, 0x2a, Some(&key)), None, "a neighbour's seq with this mac");
        assert_ne!(next.as_bytes()[11..], id[11..], "neighbouring macs differ");
        for i in 0..id.len() {
            let mut bad = id.clone();
            bad[i] = if bad[i] == b'1' { b'2' } else { b'1' };
            assert_eq!(parse_generated(&bad, 0x2a, Some(&key)), None, "{}", String::from_utf8_lossy(&bad));
        }
        let mut upper = id.clone();
        upper.make_ascii_uppercase();
        assert_eq!(parse_generated(&upper, 0x2a, Some(&key)), None);
    }

    /// The reference SipHash-2-4 vectors (key 00..0f; messages 00..0n-1).
    #[test]
    fn the_mac_is_siphash_2_4() {
        use std::hash::Hasher;
        let key: IdKey = std::array::from_fn(|i| i as u8);
        let (k0, k1) = (u64::from_le_bytes(key[..8].try_into().unwrap()), u64::from_le_bytes(key[8..].try_into().unwrap()));
        #[allow(deprecated)]
        let empty = std::hash::SipHasher::new_with_keys(k0, k1).finish();
        assert_eq!(empty, 0x726f_db47_dd0e_0e31);
        // 8 bytes 00..07 = tag 0x03020100, seq 0x07060504.
        assert_eq!(mac(&key, 0x0302_0100, 0x0706_0504), 0x93f5_f579_9a93_2462);
    }
}
