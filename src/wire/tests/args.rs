//! Unit tests of `args.rs` (a child module of it: `use super::*` sees its private items).

use super::*;

#[test]
fn draw_and_init_beacon() {
    let ok = |args: &[&[u8]]| parse_draw(args).map(|(n, b)| (n, b.map(<[u8]>::to_vec)));
    assert_eq!(ok(&[]), Ok((1000, None)));
    assert_eq!(ok(&[b"BEACON", b"v", b"COUNT", b"3"]), Ok((3, Some(b"v".to_vec()))));
    assert_eq!(ok(&[b"count", b"2", b"beacon", b""]), Ok((2, Some(Vec::new()))), "the length is checked with the sale");
    assert!(msg(ok(&[b"BEACON"])).contains("BEACON needs a value"));
    assert!(msg(ok(&[b"BEACON", b"a", b"BEACON", b"a"])).contains("given twice"));
    let init = |extra: &[&[u8]]| {
        let mut args: Vec<&[u8]> = vec![b"10", b"END", b"100"];
        args.extend_from_slice(extra);
        parse_init(b"k", &args)
    };
    assert_eq!(init(&[b"DRAW", b"BEACON", b"drand 1"]).unwrap().sale.beacon.as_deref(), Some(&b"drand 1"[..]));
    assert_eq!(init(&[b"BEACON", b"drand 1", b"DRAW"]).unwrap().sale.beacon.as_deref(), Some(&b"drand 1"[..]));
    assert_eq!(msg(init(&[b"BEACON", b"x"])), "ERR BEACON needs DRAW");
    assert_eq!(msg(init(&[b"DRAW", b"BEACON", b""])), "ERR BEACON name must be 1 to 256 bytes");
    assert_eq!(msg(init(&[b"DRAW", b"BEACON", &[b'n'; 257]])), "ERR BEACON name must be 1 to 256 bytes");
    assert!(init(&[b"DRAW", b"BEACON", &[b'n'; 256]]).is_ok());
}

fn msg<T: std::fmt::Debug>(r: ArgResult<T>) -> String {
    match r {
        Err(ArgError::Msg(m)) => m,
        other => panic!("expected a message, got {other:?}"),
    }
}

#[test]
fn numbers() {
    assert_eq!(parse_u64("N", b"42", 0, 100), Ok(42));
    assert!(msg(parse_u64("N", b"-1", 0, 100)).contains("negative"));
    assert!(msg(parse_u64("N", b"1x", 0, 100)).contains("not an integer"));
    assert!(msg(parse_u64("N", b"", 0, 100)).contains("not an integer"));
    assert!(msg(parse_u64("N", b"+1", 0, 100)).contains("not an integer"));
    assert!(msg(parse_u64("N", b"18446744073709551616", 0, u64::MAX)).contains("64 bits"));
    assert_eq!(parse_u64("N", b"18446744073709551615", 0, u64::MAX), Ok(u64::MAX));
    assert!(msg(parse_u64("N", b"0", 1, 100)).contains("from 1 to 100"));
}

#[test]
fn init_defaults_and_options() {
    let a = parse_init(b"k", &[b"10"]).unwrap();
    assert_eq!((a.sale.total, a.sale.shards, a.sale.limit, a.sale.hold_ms, a.replace), (10, 1, 1, 0, false));
    let a = parse_init(
        b"s:{1}",
        &[b"10", b"shards", b"4", b"LIMIT", b"2", b"HOLD", b"500", b"STREAM", b"s:{1}:ev", b"MAXLEN", b"100", b"REPLACE"],
    )
    .unwrap();
    assert_eq!((a.sale.shards, a.sale.limit, a.sale.hold_ms, a.replace), (4, 2, 500, true));
    let stream = a.sale.stream.unwrap();
    assert_eq!((stream.maxlen, &*stream.owner), (Some(100), &b"s:{1}"[..]));
    let a = parse_init(b"k", &[b"10", b"SPLIT", b"r1", b"3", b"p2", b"p0", b"p1", b"REPLACE"]).unwrap();
    let split = a.sale.split.unwrap();
    assert_eq!((&*split.round, split.peers.len(), &*split.peers[0]), (&b"r1"[..], 3, &b"p0"[..]));
    assert!(split.declares(b"p2") && !split.declares(b"p3") && a.replace);
    assert!(!parse_init(b"k", &[b"10"]).unwrap().fence);
    let a = parse_init(b"k", &[b"10", b"fence", b"LIMIT", b"2", b"DRAW", b"END", b"9"]).unwrap();
    assert!(a.fence && a.sale.draw.is_some() && a.sale.fence.is_none(), "the master records the id");
}

#[test]
fn init_refusals() {
    assert_eq!(parse_init(b"k", &[]), Err(ArgError::Arity));
    assert!(msg(parse_init(b"k", &[b"10", b"SHARDS", b"0"])).contains("SHARDS"));
    assert!(msg(parse_init(b"k", &[b"10", b"SHARDS", b"2", b"SHARDS", b"2"])).contains("twice"));
    assert!(msg(parse_init(b"k", &[b"10", b"BOGUS"])).contains("'BOGUS'"));
    assert!(msg(parse_init(b"k", &[b"10", b"LIMIT"])).contains("needs a value"));
    assert!(msg(parse_init(b"k", &[b"10", b"START", b"5", b"END", b"5"])).contains("before END"));
    assert!(msg(parse_init(b"a", &[b"10", b"STREAM", b"b"])).contains("slot"));
    assert!(msg(parse_init(b"a", &[b"10", b"STREAM", b"a"])).contains("differ"));
    assert!(msg(parse_init(b"k", &[b"1000000000000001"])).contains("TOTAL"));
    assert!(msg(parse_init(b"k", &[b"10", b"SPLIT", b"r", b"2", b"a"])).contains("more than the peers"));
    assert!(msg(parse_init(b"k", &[b"10", b"SPLIT", b"r", b"0"])).contains("SPLIT peer count"));
    assert!(msg(parse_init(b"k", &[b"10", b"SPLIT", b"r", b"1", b"k"])).contains("differ"));
    assert!(msg(parse_init(b"k", &[b"10", b"SPLIT", b"r", b"2", b"a", b"a"])).contains("twice"));
    assert!(msg(parse_init(b"k", &[b"10", b"SPLIT", b"", b"1", b"a"])).contains("round"));
    assert!(msg(parse_init(b"k", &[b"10", b"SPLIT", b"r", b"1025"])).contains("SPLIT peer count"));
    assert_eq!(msg(parse_init(b"k", &[b"10", b"FENCE", b"LIMIT", b"2", b"Fence"])), "ERR option FENCE given twice");
}

#[test]
fn reserve_and_reconcile() {
    let r = parse_reserve(&[b"u1", b"QTY", b"3", b"REQID", b"r1"]).unwrap();
    assert_eq!((r.user, r.qty, r.reqid), (&b"u1"[..], 3, Some(&b"r1"[..])));
    assert!(msg(parse_reserve(&[b""])).contains("user id"));
    let long = vec![b'x'; 257];
    assert!(msg(parse_reserve(&[b"u", b"REQID", &long])).contains("REQID"));
    let c = parse_reconcile(&[b"ORDERS", b"1", b"r1", b"u1", b"2", b"APPLY"]).unwrap();
    assert!(c.apply && c.orders.unwrap().len() == 1);
    assert!(msg(parse_reconcile(&[b"APPLY"])).contains("ORDERS"));
    assert!(msg(parse_reconcile(&[b"ORDERS", b"2", b"r1", b"u1", b"2"])).contains("ORDERS"));
    assert_eq!(parse_rid(&[]), Err(ArgError::Arity));
    assert_eq!(parse_reconcile(&[b"FORMAT", b"json"]).unwrap().format, Format::Json);
    assert!(msg(parse_reconcile(&[b"FORMAT", b"xml"])).contains("FORMAT"));
    let args: [&[u8]; 3] = [b"r1", b"format", b"JSON"];
    assert_eq!(split_format(&args), Ok((&args[..1], Format::Json)));
    assert_eq!(split_format(&args[..1]), Ok((&args[..1], Format::Resp)));
    assert!(msg(split_format(&[b"r1", b"FORMAT", b"csv"])).contains("FORMAT"));
}

#[test]
fn send_and_recv() {
    let a = parse_send(b"k", &[b"p", b"5", b"min", b"2", b"TID", b"t1", b"ROUND", b"r", b"TO", b"0000002a"]).unwrap();
    assert_eq!(a, SendArgs { peer: b"p", qty: 5, min: 2, tid: b"t1", round: b"r", to: Some(0x2a) });
    assert_eq!(parse_send(b"k", &[b"p", b"5", b"TID", b"t", b"round", b"r", b"to", b"ffffffff"]).unwrap().min, 1);
    assert!(msg(parse_send(b"k", &[b"p", b"5", b"TID", b"t"])).contains("ROUND is required"));
    assert_eq!(parse_send(b"k", &[b"p", b"5", b"TID", b"t", b"ROUND", b"r"]).unwrap().to, None);
    for bad in [&b"2a"[..], b"0000002A", b"00000002a", b"0000002g", b"+000002a"] {
        assert!(msg(parse_send(b"k", &[b"p", b"5", b"TID", b"t", b"ROUND", b"r", b"TO", bad])).contains("TO must be"));
    }
    assert!(msg(parse_send(b"k", &[b"p", b"5", b"TID", b"t", b"ROUND", b""])).contains("ROUND"));
    assert!(msg(parse_send(b"k", &[b"p", b"5", b"TID", b"t", b"ROUND", &[b'r'; 65]])).contains("ROUND"));
    assert!(msg(parse_send(b"k", &[b"p", b"5", b"TID", b"t", b"ROUND", b"r", b"ROUND", b"r"])).contains("twice"));
    assert_eq!(parse_send(b"k", &[b"p"]), Err(ArgError::Arity));
    assert!(msg(parse_send(b"k", &[b"k", b"5", b"TID", b"t"])).contains("peer"));
    assert!(msg(parse_send(b"k", &[b"", b"5", b"TID", b"t"])).contains("peer"));
    assert!(msg(parse_send(b"k", &[&[b'p'; 257], b"5", b"TID", b"t"])).contains("peer"));
    assert!(msg(parse_send(b"k", &[b"p", b"0", b"TID", b"t"])).contains("qty"));
    assert!(msg(parse_send(b"k", &[b"p", b"1000000000000001", b"TID", b"t"])).contains("qty"));
    assert!(msg(parse_send(b"k", &[b"p", b"5"])).contains("TID"));
    assert!(msg(parse_send(b"k", &[b"p", b"5", b"TID", b""])).contains("TID"));
    assert!(msg(parse_send(b"k", &[b"p", b"5", b"TID"])).contains("TID"));
    assert!(msg(parse_send(b"k", &[b"p", b"5", b"MIN", b"0", b"TID", b"t"])).contains("MIN"));
    assert!(msg(parse_send(b"k", &[b"p", b"5", b"MIN", b"1", b"MIN", b"1", b"TID", b"t"])).contains("twice"));
    assert!(msg(parse_send(b"k", &[b"p", b"5", b"TID", b"t", b"TID", b"t"])).contains("twice"));
    assert!(msg(parse_send(b"k", &[b"p", b"5", b"NOPE", b"TID", b"t"])).contains("NOPE"));
    let r = |args: &[&[u8]]| parse_recv(b"k", args).map(|a| (a.peer.to_vec(), a.sent_total, a.round.to_vec()));
    assert_eq!(r(&[b"p", b"18446744073709551615", b"ROUND", b"r1", b"TO", b"00000001"]), Ok((b"p".to_vec(), u64::MAX, b"r1".to_vec())));
    assert_eq!(parse_recv(b"k", &[b"p", b"1", b"to", b"0000000a", b"round", b"r"]).map(|a| a.to), Ok(Some(10)));
    assert_eq!(parse_recv(b"k", &[b"p", b"1", b"ROUND", b"r"]).map(|a| a.to), Ok(None));
    assert!(msg(r(&[b"p", b"1", b"TO", b"0000000a"])).contains("ROUND is required"));
    assert!(msg(r(&[b"p", b"1", b"ROUND", b"r", b"TO", b"1"])).contains("TO must be"));
    assert!(msg(r(&[b"p", b"1", b"ROUND", b"r", b"ROUND", b"r"])).contains("twice"));
    assert!(msg(r(&[b"p", b"18446744073709551616", b"ROUND", b"r"])).contains("sent_total"));
    assert!(msg(r(&[b"p", b"x", b"ROUND", b"r"])).contains("sent_total"));
    assert!(msg(r(&[b"k", b"1", b"ROUND", b"r"])).contains("peer"));
    assert!(msg(r(&[b"p", b"1"])).contains("ROUND is required"));
    assert!(msg(r(&[b"p", b"1", b"NOPE", b"r"])).contains("NOPE"));
    assert_eq!(r(&[b"p", b"1", b"2"]), Err(ArgError::Arity));
    assert_eq!(r(&[b"p", b"1", b"ROUND"]), Err(ArgError::Arity));
    assert_eq!(r(&[b"p"]), Err(ArgError::Arity));
}

#[test]
fn sales_cursor_and_count() {
    let page = |from, count, with_counts| Ok(SalesArgs { from, count, with_counts });
    assert_eq!(parse_sales(&[b"0"]), page(None, DEFAULT_SALES_COUNT as usize, false));
    assert_eq!(parse_sales(&[b">a\0b", b"count", b"1000"]), page(Some(&b"a\0b"[..]), 1000, false));
    assert_eq!(parse_sales(&[b"0", b"withcounts", b"COUNT", b"5"]), page(None, 5, true));
    for bad in [&b"1"[..], b">", b"", b"00", b"a"] {
        assert!(msg(parse_sales(&[bad])).contains("cursor"), "{bad:?}");
    }
    assert!(msg(parse_sales(&[b"0", b"COUNT", b"1001"])).contains("COUNT"));
    assert!(msg(parse_sales(&[b"0", b"WITHSCORES"])).contains("WITHSCORES"));
    assert_eq!(parse_sales(&[]), Err(ArgError::Arity));
}
