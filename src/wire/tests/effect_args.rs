//! Unit tests of `effect_args.rs` (a child module of it: `use super::*` sees its private items).

use super::*;

fn roundtrip(e: Effect) {
    let owned = e.to_args();
    let args: Vec<&[u8]> = owned.iter().map(|a| a.as_slice()).collect();
    assert_eq!(Effect::parse(&args), Ok(e));
}

#[test]
fn pending_carries_its_stream_entry() {
    let args: [&[u8]; 6] = [b"pending", b"r1", b"u1", b"1:2:3:0", b"1700000000000-5", b"42"];
    let (effect, tail) = split_stream_tail(&args).unwrap();
    assert_eq!(effect.len(), 4);
    assert_eq!(tail, Some(StreamTail { ms: 1_700_000_000_000, seq: 5, length: Some(42) }));
    let (effect, tail) = split_stream_tail(&args[..5]).unwrap();
    assert_eq!((effect.len(), tail.map(|t| t.length)), (4, Some(None)));
    assert_eq!(split_stream_tail(&args[..4]).unwrap(), (&args[..4], None));
    let release: [&[u8]; 3] = [b"RELEASE", b"r1", b"1-1"];
    assert_eq!(split_stream_tail(&release).unwrap(), (&release[..], None));
    for bad in [&b"15"[..], b"1-", b"-1", b"a-1", b"1-2-3", b"1--2"] {
        let args: [&[u8]; 5] = [b"PENDING", b"r1", b"u1", b"1:2:3:0", bad];
        assert!(split_stream_tail(&args).is_err(), "{:?}", String::from_utf8_lossy(bad));
    }
    let long: [&[u8]; 7] = [b"PENDING", b"r1", b"u1", b"1:2:3:0", b"1-1", b"2", b"3"];
    assert!(split_stream_tail(&long).is_err());
    let neg: [&[u8]; 6] = [b"PENDING", b"r1", b"u1", b"1:2:3:0", b"1-1", b"-2"];
    assert!(split_stream_tail(&neg).is_err());
}

#[test]
fn effects_roundtrip() {
    let config = SaleConfig {
        total: 10,
        shards: 2,
        limit: 3,
        hold_ms: 100,
        start_ms: 0,
        end_ms: u64::MAX,
        stream: Some(StreamConfig { key: b"s".to_vec().into(), maxlen: Some(5), owner: b"k".to_vec().into() }),
        tag: 7,
        split: Some(SplitConfig::new(None, b"r9", &[b"b", b"a"]).unwrap()),
        draw: Some([0xa5; 32]),
        beacon: None,
        fence: Some(crate::rules::fence::id(b'c')),
        id_key: Some([0x5a; 16]),
    };
    roundtrip(Effect::Init(SaleConfig { end_ms: 99, ..config.clone() }));
    roundtrip(Effect::Init(SaleConfig { fence: None, end_ms: 99, ..config.clone() }));
    roundtrip(Effect::Init(SaleConfig { beacon: Some(b"drand quicknet round 1234567".to_vec().into()), end_ms: 99, ..config.clone() }));
    roundtrip(Effect::Init(SaleConfig { stream: None, split: None, draw: None, beacon: None, id_key: None, ..config.clone() }));
    roundtrip(Effect::Init(SaleConfig { stream: None, split: None, draw: None, beacon: None, fence: None, ..config }));
    roundtrip(Effect::Unfence(crate::rules::fence::id(b'9')));
    let rec = |id: &[u8]| Reservation {
        id: id.into(),
        user: b"u1".to_vec().into(),
        qty: 2,
        state: State::Pending,
        created_ms: 5,
        deadline_ms: 9,
        takes: vec![Take { bucket: 0, qty: 2 }],
    };
    use crate::rules::sale::{EntrantRec, EntrantResult};
    roundtrip(Effect::Entrants(vec![
        EntrantRec { user: b"u".to_vec().into(), qty: 2, reqid: None, result: EntrantResult::Entered },
        EntrantRec { user: b"v".to_vec().into(), qty: 1, reqid: Some(b"r".to_vec().into()), result: EntrantResult::Promoted },
    ]));
    roundtrip(Effect::Drawn { stock: 10, examined: 4, records: vec![rec(b"a"), rec(b"b")], begin: None });
    roundtrip(Effect::Drawn { stock: 0, examined: 0, records: vec![], begin: None });
    let begin = DrawBegin { beacon: Some(b"round 7: \x00 binary".to_vec().into()), draw_seed: [0x5a; 32] };
    roundtrip(Effect::Drawn { stock: 10, examined: 4, records: vec![rec(b"a")], begin: Some(begin.clone()) });
    roundtrip(Effect::Drawn { stock: 3, examined: 0, records: vec![], begin: Some(DrawBegin { beacon: None, draw_seed: [1; 32] }) });
    roundtrip(Effect::DrawProgress { stock: Some(3), examined: 7, begin: Some(begin) });
    roundtrip(Effect::DrawProgress { stock: Some(3), examined: 7, begin: Some(DrawBegin { beacon: None, draw_seed: [2; 32] }) });
    roundtrip(Effect::Promoted(vec![rec(b"c")]));
    // A draw from before v2: no DRAWBEGIN part (parsed, refused on apply).
    roundtrip(Effect::DrawProgress { stock: Some(3), examined: 7, begin: None });
    roundtrip(Effect::DrawProgress { stock: None, examined: 0, begin: None });
    // An INIT effect from before owners: the owner is left for the
    // EFFECT command to fill with its key.
    let old: [&[u8]; 11] = [b"INIT", b"10", b"1", b"1", b"0", b"0", b"9", b"1", b"STREAM", b"s", b"0"];
    match Effect::parse(&old) {
        Ok(Effect::Init(c)) => assert!(c.stream.unwrap().owner.is_empty()),
        other => panic!("{other:?}"),
    }
    let junk: [&[u8]; 9] = [b"INIT", b"10", b"1", b"1", b"0", b"0", b"9", b"1", b"BOGUS"];
    assert!(Effect::parse(&junk).is_err());
    roundtrip(Effect::Records(vec![Reservation {
        id: b"r1".to_vec().into(),
        user: b"u1".to_vec().into(),
        qty: 2,
        state: State::Pending,
        created_ms: 5,
        deadline_ms: 9,
        takes: vec![Take { bucket: 1, qty: 1 }, Take { bucket: 0, qty: 1 }],
    }]));
    roundtrip(Effect::Expire(vec![b"a".to_vec().into(), b"b".to_vec().into()]));
    roundtrip(Effect::Retake(b"a".to_vec().into(), vec![Take { bucket: 0, qty: 3 }]));
    roundtrip(Effect::Release(b"a".to_vec().into()));
    roundtrip(Effect::Confirm(b"a".to_vec().into()));
    roundtrip(Effect::Batch(vec![
        Effect::Confirm(b"a".to_vec().into()),
        Effect::Retake(b"b".to_vec().into(), vec![Take { bucket: 0, qty: 3 }]),
    ]));
    let takes = vec![Take { bucket: 1, qty: 2 }, Take { bucket: 0, qty: 1 }];
    roundtrip(Effect::Send { peer: b"p".to_vec().into(), tid: b"t".to_vec().into(), takes: takes.clone(), to: None });
    roundtrip(Effect::Send { peer: b"p".to_vec().into(), tid: b"t".to_vec().into(), takes: takes.clone(), to: Some(0xdead_beef) });
    roundtrip(Effect::SentTo(vec![(b"p".to_vec().into(), 0), (b"q".to_vec().into(), 7)]));
    assert!(Effect::parse(&[b"SENTTO"]).is_err());
    assert!(Effect::parse(&[b"SENTTO", b"p"]).is_err());
    assert!(Effect::parse(&[b"SENTTO", b"p", b"7"]).is_err());
    assert!(Effect::parse(&[b"SEND", b"p", b"t", b"TO", b"0000000g", b"0", b"1"]).is_err());
    roundtrip(Effect::Recv { peer: b"p".to_vec().into(), sent_total: u64::MAX, credits: takes });
    roundtrip(Effect::Transfers {
        allocation: vec![3, 0],
        peers: vec![(b"p".to_vec().into(), crate::rules::transfers::Counters { sent: 4, received: 1 })],
        tids: vec![b"t1".to_vec().into(), b"t2".to_vec().into()],
    });
    roundtrip(Effect::Transfers { allocation: vec![3], peers: vec![], tids: vec![] });
}

#[test]
fn bad_effects_are_refused() {
    assert!(Effect::parse(&[b"NOPE"]).is_err());
    assert!(Effect::parse(&[b"RECORDS"]).is_err());
    assert!(Effect::parse(&[b"RELEASE", b"a", b"b"]).is_err());
    assert!(Effect::parse(&[b"INIT", b"1", b"1", b"1", b"0", b"5", b"5", b"0"]).is_err());
    assert!(Effect::parse(&[b"BATCH"]).is_err());
    assert!(Effect::parse(&[b"BATCH", b"2", b"EXPIRE", b"a"]).is_err());
    assert!(Effect::parse(&[b"BATCH", b"3", b"CONFIRM", b"a"]).is_err());
    assert!(Effect::parse(&[b"BATCH", b"2", b"CONFIRM", b"a", b"x"]).is_err());
    assert!(Effect::parse(&[b"SEND", b"p", b"t"]).is_err());
    assert!(Effect::parse(&[b"SEND", b"p", b"t", b"0"]).is_err());
    assert!(Effect::parse(&[b"SEND", b"p", b"t", b"0", b"0"]).is_err());
    assert!(Effect::parse(&[b"RECV", b"p", b"0", b"0", b"1"]).is_err());
    assert!(Effect::parse(&[b"RECV", b"p", b"18446744073709551616", b"0", b"1"]).is_err());
    assert!(Effect::parse(&[b"TRANSFERS", b"0"]).is_err());
    let id = [b'a'; 40];
    assert!(Effect::parse(&[b"UNFENCE"]).is_err());
    assert!(Effect::parse(&[b"UNFENCE", &id[..39]]).is_err());
    assert!(Effect::parse(&[b"UNFENCE", b"A123456789abcdef0123456789abcdef01234567"]).is_err());
    assert!(Effect::parse(&[b"UNFENCE", &id, b"x"]).is_err());
    let init: [&[u8]; 9] = [b"INIT", b"10", b"1", b"1", b"0", b"0", b"9", b"1", b"FENCE"];
    assert!(Effect::parse(&init).is_err());
    let init: [&[u8]; 10] = [b"INIT", b"10", b"1", b"1", b"0", b"0", b"9", b"1", b"FENCE", &id[..39]];
    assert!(Effect::parse(&init).is_err());
    let init: [&[u8]; 10] = [b"INIT", b"10", b"1", b"1", b"0", b"0", b"9", b"1", b"FENCE", &id];
    assert!(matches!(Effect::parse(&init), Ok(Effect::Init(SaleConfig { fence: Some(_), .. }))));
    assert!(Effect::parse(&[b"TRANSFERS", b"1", b"1", b"2", b"p", b"0", b"0"]).is_err());
}
