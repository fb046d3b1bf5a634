//! Redis Cluster hash slots (CRC16/XMODEM of the key or of its `{hash tag}`),
//! computed here so INIT refuses a STREAM key in another slot in every
//! deployment, clustered or not.

const SLOTS: u16 = 16384;

fn crc16(data: &[u8]) -> u16 {
    let mut crc: u16 = 0;
    for &byte in data {
        crc ^= u16::from(byte) << 8;
        for _ in 0..8 {
            crc = if crc & 0x8000 != 0 { (crc << 1) ^ 0x1021 } else { crc << 1 };
        }
    }
    crc
}

/// The part of the key that is hashed: the first non-empty `{...}` section.
fn hash_part(key: &[u8]) -> &[u8] {
    if let Some(open) = key.iter().position(|&b| b == b'{') {
        if let Some(len) = key[open + 1..].iter().position(|&b| b == b'}') {
            if len > 0 {
                return &key[open + 1..open + 1 + len];
            }
        }
    }
    key
}

pub fn key_slot(key: &[u8]) -> u16 {
    crc16(hash_part(key)) % SLOTS
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_redis() {
        // Values from CLUSTER KEYSLOT on a real server.
        assert_eq!(key_slot(b"foo"), 12182);
        assert_eq!(key_slot(b"123456789"), 12739);
        assert_eq!(key_slot(b"sale:{1001}"), key_slot(b"sale:{1001}:events"));
        assert_eq!(key_slot(b"{}x"), crc16(b"{}x") % SLOTS);
        assert_eq!(key_slot(b"a{b}c"), key_slot(b"b"));
    }
}
