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

/// Whether `slot` is being migrated away from or imported into this node,
/// read from this node's own line of `CLUSTER NODES`, which lists such
/// slots as `[slot->-node]` (migrating) and `[slot-<-node]` (importing).
pub fn moving_in(nodes: &[u8], slot: u16) -> bool {
    let Some(mine) = nodes
        .split(|&b| b == b'\n')
        .find(|line| line.split(|&b| b == b' ').nth(2).is_some_and(|flags| flags.split(|&b| b == b',').any(|f| f == b"myself")))
    else {
        return false;
    };
    let slot = slot.to_string();
    mine.split(|&b| b == b' ').skip(8).any(|field| {
        let Some(inner) = field.strip_prefix(b"[") else { return false };
        let end = inner.iter().position(|&b| b == b'-').unwrap_or(inner.len());
        inner[..end] == *slot.as_bytes()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_moving_from_cluster_nodes() {
        let nodes = b"07c3 127.0.0.1:30004@40004 master - 0 1 2 connected 5461-10922\n\
            e7d1 127.0.0.1:30001@40001 myself,master - 0 0 1 connected 0-5460 [5461-<-07c3] [3300->-07c3]\n";
        assert!(moving_in(nodes, 3300));
        assert!(moving_in(nodes, 5461));
        assert!(!moving_in(nodes, 330));
        assert!(!moving_in(nodes, 0));
        assert!(!moving_in(b"e7d1 127.0.0.1:30001@40001 myself,master - 0 0 1 connected 0-16383\n", 3300));
        assert!(!moving_in(b"", 1));
    }

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
