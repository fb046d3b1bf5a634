//! Unit tests of `encoding.rs` (a child module of it: `use super::*` sees its private items).

use super::*;

fn plain(total: u64, shards: u32) -> SaleConfig {
    SaleConfig { limit: 5, tag: 9, ..SaleConfig::plain(total, shards) }
}

/// Version 1 (no transfers section) and version 2 (no stream owner, no
/// split) payloads still load; a version-2 payload takes the name it is
/// loaded under as its stream's owner.
#[test]
fn older_payloads_load() {
    let mut s = Sale::new(plain(10, 3));
    let rec = s.decide_reserve(b"u", 2, None, 1).unwrap();
    s.add_record(rec.as_new()).unwrap();
    let v6 = encode(&s);
    // A fresh plain sale's encoding ends with the split flag, the draw
    // flag, the fence flag, the id-key flag, the remainders (one byte
    // each here), the transfers flag and the record count.
    let fresh = encode(&Sale::new(plain(10, 3)));
    let (split_flag, draw_flag, fence_flag, transfers_flag) = (fresh.len() - 9, fresh.len() - 8, fresh.len() - 7, fresh.len() - 2);
    let id_flag = fresh.len() - 6;
    assert_eq!((v6[0], v6[split_flag], v6[draw_flag], v6[fence_flag], v6[id_flag], v6[transfers_flag]), (6, 0, 0, 0, 0, 0));
    let mut v5 = v6.clone();
    v5[0] = 5;
    v5.remove(id_flag);
    assert!(decode(&v5).unwrap() == s);
    let transfers_flag = transfers_flag - 1;
    let mut v4 = v5.clone();
    v4[0] = 4;
    v4.remove(fence_flag);
    assert!(decode(&v4).unwrap() == s);
    let transfers_flag = transfers_flag - 1;
    let mut v3 = v4.clone();
    v3[0] = 3;
    v3.remove(draw_flag);
    assert!(decode(&v3).unwrap() == s);
    let (transfers_flag, split_flag) = (transfers_flag - 1, split_flag);
    let mut v2 = v3.clone();
    v2[0] = 2;
    v2.remove(split_flag);
    assert!(decode(&v2).unwrap() == s);
    let mut v1 = v2.clone();
    v1[0] = 1;
    v1.remove(transfers_flag - 1);
    assert!(decode(&v1).unwrap() == s);
    let mut bad = v3.clone();
    bad[0] = 7;
    assert!(decode(&bad).is_err());
    // A stream: version 2 had no owner.
    let stream = StreamConfig { key: b"k:ev".to_vec().into(), maxlen: None, owner: b"k".to_vec().into() };
    let with = Sale::new(SaleConfig { stream: Some(stream), ..plain(10, 1) });
    let v4 = encode(&with);
    let owner_at = v4.windows(2).position(|w| w == [1, b'k']).unwrap();
    let mut v2: Vec<u8> = v4.clone();
    v2[0] = 2;
    v2.drain(owner_at..owner_at + 2);
    v2.drain(owner_at..owner_at + 4); // the split, draw, fence and id-key flags after it
    assert!(decode_as(&v2, Some(b"k")).unwrap() == with);
    let unnamed = decode(&v2).unwrap();
    assert!(unnamed.config().stream.as_ref().unwrap().owner.is_empty());
}

/// A draw sale of version 4 or 5 loads as a draw v2 sale while its draw
/// has not begun (its digest recomputed, no beacon); begun, it is
/// refused with `OLD_DRAW`. Version 6 keeps the beacon's name and value.
#[test]
fn older_draw_payloads() {
    use crate::rules::sale::draw_state::OLD_DRAW;
    let secret = [0x42u8; 32];
    let mut s = Sale::new(SaleConfig { draw: Some(secret), end_ms: 100, ..plain(10, 1) });
    for u in [&b"a"[..], b"bb", b"ccc"] {
        let e = s.decide_enter(u, 1, None, 0).unwrap();
        s.add_entrants(&[e]).unwrap();
    }
    let v6 = encode(&s);
    let at = v6.windows(32).position(|w| w == secret).unwrap() + 32;
    assert_eq!(v6[at], 0, "no beacon name");
    // Version 5 has neither the beacon's length nor the id-key flag
    // (right after the fence flag, which follows the draw section).
    let to_v5 = |v6: &[u8]| {
        let mut v5 = v6.to_vec();
        v5[0] = 5;
        v5.remove(at);
        assert_eq!((v5[at], v5[at + 1]), (0, 0), "fence and id-key flags");
        v5.remove(at + 1);
        v5
    };
    let v5 = to_v5(&v6);
    let back = decode(&v5).unwrap();
    assert!(back == s);
    assert_eq!(back.draw_report(), s.draw_report());
    // Begun: version 6 adds the beacon value's length; 5 cannot continue.
    s.draw_step(10, 100, None).unwrap();
    let v6 = encode(&s);
    assert!(decode(&v6).unwrap() == s);
    let mut v5 = to_v5(&v6);
    v5.pop();
    assert_eq!(decode(&v5).map(|_| ()), Err(DecodeError(OLD_DRAW)));
    // A beacon: name and value kept.
    let name: Box<[u8]> = b"drand round 9".to_vec().into();
    let mut b = Sale::new(SaleConfig { draw: Some(secret), beacon: Some(name.clone()), end_ms: 100, ..plain(10, 1) });
    let e = b.decide_enter(b"a", 1, None, 0).unwrap();
    b.add_entrants(&[e]).unwrap();
    b.draw_step(10, 100, Some(b"value 9")).unwrap();
    let back = decode(&encode(&b)).unwrap();
    assert!(back == b);
    let r = back.draw_report().unwrap();
    assert_eq!((r.beacon, r.begun.unwrap().beacon), (Some(name), Some(b"value 9".to_vec().into())));
}

/// A sale's id key is kept, and so are its generated ids; a payload
/// from before id keys (version 5) loads keyless, its `<tag>-<seq>`
/// ids still found; a bad flag or a short key is refused.
#[test]
fn the_id_key_is_kept() {
    let key = [0xc3; 16];
    let mut s = Sale::new(SaleConfig { id_key: Some(key), ..plain(10, 1) });
    let rec = s.decide_reserve(b"u", 1, None, 1).unwrap();
    s.add_record(rec.as_new()).unwrap();
    assert_eq!(rec.id.len(), 8 + 1 + 1 + 1 + 16, "<tag>-0-<mac>");
    let bytes = encode(&s);
    let back = decode(&bytes).unwrap();
    assert_eq!(back.config().id_key, Some(key));
    assert!(back == s);
    assert!(back.get(&rec.id).is_some());
    assert!(back.get(&rec.id[..10]).is_none(), "the keyless form is no id of a keyed sale");
    let at = bytes.windows(16).position(|w| w == key).unwrap();
    assert_eq!(bytes[at - 1], 1, "the id key flag");
    let mut flag = bytes.clone();
    flag[at - 1] = 2;
    assert_eq!(decode(&flag).map(|_| ()), Err(DecodeError("bad id key flag")));
    // Version 5: no flag; a keyless sale, whose ids are `<tag>-<seq>`.
    let mut old = Sale::new(plain(10, 1));
    let rec = old.decide_reserve(b"u", 1, None, 1).unwrap();
    old.add_record(rec.as_new()).unwrap();
    assert_eq!(&*rec.id, b"00000009-0");
    let mut v5 = encode(&old);
    let fresh = encode(&Sale::new(plain(10, 1)));
    let id_flag = fresh.len() - 4; // before the remainder, transfers flag, count... of a fresh sale
    assert_eq!(fresh[id_flag], 0);
    v5[0] = 5;
    v5.remove(id_flag);
    let back = decode(&v5).unwrap();
    assert_eq!(back.config().id_key, None);
    assert!(back == old && back.get(b"00000009-0").is_some());
}

/// A FENCE sale keeps its recorded id; a bad id or flag is refused.
#[test]
fn the_recorded_id_is_kept() {
    let id = crate::rules::fence::id(b'7');
    let s = Sale::new(SaleConfig { fence: Some(id), ..plain(10, 1) });
    let bytes = encode(&s);
    let back = decode(&bytes).unwrap();
    assert_eq!(back.config().fence, Some(id));
    assert!(back == s);
    let at = bytes.windows(ReplId::LEN).position(|w| w == id.as_bytes()).unwrap();
    assert_eq!(bytes[at - 1], 1, "the fence flag");
    let mut upper = bytes.clone();
    upper[at] = b'A';
    assert_eq!(decode(&upper).map(|_| ()), Err(DecodeError("bad replication id")));
    let mut flag = bytes.clone();
    flag[at - 1] = 2;
    assert!(decode(&flag).is_err());
    assert!(decode(&bytes[..at + 10]).is_err());
    // An older version has no fence.
    let mut v4 = bytes.clone();
    v4[0] = 4;
    v4.drain(at - 1..at + ReplId::LEN + 1); // and the id-key flag after it
    assert_eq!(decode(&v4).unwrap().config().fence, None);
}
