//! Generated reservation ids, `<tag>-<seq>`: the eight hex digits of the
//! sale's tag and the record's sequence number. They are not stored: a
//! record with a generated id is marked so (`GENERATED`) and its id is
//! written from the tag and its place whenever it is read.

use crate::rules::digits::Digits;

/// No sequence number is this (`records::NONE` marks "no record"), so
/// `<tag>-4294967295` is no generated id. Spelled here rather than
/// imported: `records` builds on this file, not the other way round.
pub(super) const NO_SEQ: u32 = u32::MAX;

/// Writes `<tag>-<seq>` into `out`.
#[inline]
pub(super) fn write_generated(out: &mut Digits, tag: u32, seq: u32) {
    out.extend(&tag_hex(tag));
    out.push(b'-');
    out.push_u64(u64::from(seq));
}

/// The eight lowercase hex digits of `tag`, as `write_generated` writes them.
#[inline]
fn tag_hex(tag: u32) -> [u8; 8] {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    std::array::from_fn(|i| HEX[((tag >> (28 - 4 * i)) & 0xf) as usize])
}

/// `Some(n)` when `id` is `<tag>-<n>` written the way `write_generated` does.
/// Runs several times per RESERVE: the tag is compared as eight bytes.
#[inline]
pub(super) fn parse_generated(id: &[u8], tag: u32) -> Option<u32> {
    let (Some(hex), Some((b'-', digits))) = (id.get(..8), id.get(8..).and_then(<[u8]>::split_first)) else {
        return None;
    };
    let canonical = !digits.is_empty() && digits.len() <= 10 && (digits.len() == 1 || digits[0] != b'0');
    if !canonical || hex != tag_hex(tag) {
        return None;
    }
    let mut n: u64 = 0;
    for &b in digits {
        if !b.is_ascii_digit() {
            return None;
        }
        n = n * 10 + u64::from(b - b'0');
    }
    u32::try_from(n).ok().filter(|&n| n != NO_SEQ)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generated_ids_parse_back_and_nothing_else_does() {
        let mut x: u64 = 0x2545_f491_4f6c_dd1d;
        for _ in 0..5000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let (tag, seq) = (x as u32, ((x >> 32) as u32) >> (x % 32));
            let mut id = Digits::default();
            write_generated(&mut id, tag, seq);
            let want = (seq != NO_SEQ).then_some(seq);
            assert_eq!(parse_generated(id.as_bytes(), tag), want, "{id:?}");
            assert_eq!(parse_generated(id.as_bytes(), tag ^ 1), None);
        }
        for bad in [&b"0000002a-"[..], b"0000002a-01", b"0000002A-1", b"0000002a+1", b"0000002a-1x", b"0000002a-12345678901", b"2a-1"] {
            assert_eq!(parse_generated(bad, 0x2a), None, "{}", String::from_utf8_lossy(bad));
        }
        assert_eq!(parse_generated(b"0000002a-0", 0x2a), Some(0));
        assert_eq!(parse_generated(b"0000002a-4294967294", 0x2a), Some(4_294_967_294));
    }
}
