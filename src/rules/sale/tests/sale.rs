//! Sale-level tests: the owners together, through the sale's API.

use std::collections::HashMap;

use proptest::collection::vec;
use proptest::prelude::*;

use super::buyers::{walked_so_far, CHAIN_WALK};
use super::chunks::{ARENA_CHUNK, CHUNK};
use super::*;

fn config(total: u64, limit: u64, hold_ms: u64) -> SaleConfig {
    SaleConfig { limit, hold_ms, tag: 0x2a, ..SaleConfig::plain(total, 3) }
}

fn reserve(s: &mut Sale, user: &[u8], qty: u64, reqid: Option<&[u8]>, now: u64) -> Result<Box<[u8]>, Refusal> {
    let rec = s.decide_reserve(user, qty, reqid, now)?;
    s.add_record(rec.as_new()).expect("a decided record is accepted");
    Ok(rec.id)
}

#[test]
fn clock_does_not_matter_to_a_sold_out_sale_without_window_or_holds() {
    let mut timeless = Sale::new(config(2, 2, 0));
    reserve(&mut timeless, b"a", 2, None, 5).unwrap();
    let mut windowed = Sale::new(SaleConfig { start_ms: 10, end_ms: 20, ..config(2, 2, 0) });
    reserve(&mut windowed, b"a", 2, None, 15).unwrap();
    let mut holding = Sale::new(config(2, 2, 100));
    reserve(&mut holding, b"a", 2, None, 5).unwrap();
    assert!(!timeless.clock_matters(1));
    assert!(windowed.clock_matters(1) && holding.clock_matters(1) && Sale::new(config(2, 2, 0)).clock_matters(1));
    for now in [0, 1, 5, 1_000_000, u64::MAX - 1] {
        for user in [&b"a"[..], b"b"] {
            assert_eq!(timeless.decide_reserve(user, 1, None, now), timeless.decide_reserve(user, 1, None, 0), "{now}");
        }
    }
}

/// A chain of many records: LIMIT from the counter, releases in any
/// order unlink in place, the LIMIT reply names the newest live record.
#[test]
fn long_chains_count_and_unlink() {
    let mut s = Sale::new(config(1_000_000, 1000, 0));
    let ids: Vec<Box<[u8]>> = (0..600).map(|i| reserve(&mut s, b"whale", 1, None, i).unwrap()).collect();
    reserve(&mut s, b"minnow", 1, None, 600).unwrap();
    assert_eq!(s.buyers.qty(&s.records, s.buyers.head(&s.records, b"whale", s.records.hash(b"whale")).unwrap()), 600);
    // Every third from the middle out, then the newest: the head moves.
    for id in ids.iter().skip(1).step_by(3) {
        assert_eq!(s.release(id, State::Released), ReleaseOutcome::Released);
    }
    assert_eq!(s.release(&ids[599], State::Released), ReleaseOutcome::Released);
    s.check_internals().unwrap();
    assert_eq!(s.decide_reserve(b"whale", 800, None, 700), Err(Refusal::Limit(Some(ids[597].clone()))));
    for id in &ids {
        s.release(id, State::Released);
    }
    s.check_internals().unwrap();
    assert_eq!(s.buyer_count(), 1);
    assert!(s.decide_reserve(b"whale", 1000, None, 700).is_ok());
}

/// RECONCILE retakes older records back into the middle of a chain.
#[test]
fn retake_keeps_the_chain_sorted() {
    let mut s = Sale::new(config(100, 100, 0));
    let ids: Vec<Box<[u8]>> = (0..6).map(|i| reserve(&mut s, b"u", 1, None, i).unwrap()).collect();
    for i in [0, 2, 3, 5] {
        s.release(&ids[i], State::Released);
    }
    for i in [3, 0, 5, 2] {
        let takes = s.plan_retake(&ids[i]).unwrap();
        s.retake(&ids[i], takes).unwrap();
        s.check_internals().unwrap();
    }
    // Retaken records are confirmed: the pending ones can still leave.
    for i in [4, 1] {
        s.release(&ids[i], State::Released);
        s.check_internals().unwrap();
        assert_eq!(s.decide_reserve(b"u", 100, None, 9), Err(Refusal::Limit(Some(ids[5].clone()))));
    }
}

/// Retakes deep into a long chain go through the buyer's index, which
/// RESERVE and RELEASE keep exact and which goes when the chain is
/// short again; a retake near the head walks and builds nothing.
#[test]
fn retake_into_a_long_chain_indexes_the_buyer() {
    let mut s = Sale::new(config(1000, 1000, 0));
    let ids: Vec<Box<[u8]>> = (0..200).map(|i| reserve(&mut s, b"whale", 1, None, i).unwrap()).collect();
    reserve(&mut s, b"minnow", 1, None, 200).unwrap();
    let retake = |s: &mut Sale, i: usize| {
        let takes = s.plan_retake(&ids[i]).unwrap();
        s.retake(&ids[i], takes).unwrap();
        s.check_internals().unwrap();
    };
    for i in [190, 150, 100, 0, 1, 2, 99, 101, 199] {
        s.release(&ids[i], State::Released);
    }
    // 190 is 9 records from the head: a walk, no index.
    retake(&mut s, 190);
    assert!(s.buyers.chain_index().is_empty());
    // 150 is 48 deep: the buyer gets an index, and it serves the rest.
    let before = walked_so_far();
    retake(&mut s, 150);
    assert_eq!(s.buyers.chain_index().len(), 1);
    assert_eq!(walked_so_far() - before, CHAIN_WALK + 192);
    let before = walked_so_far();
    for i in [0, 2, 100, 1, 199, 99, 101] {
        retake(&mut s, i);
    }
    assert_eq!(walked_so_far(), before);
    assert_eq!(s.decide_reserve(b"whale", 1000, None, 300), Err(Refusal::Limit(Some(ids[199].clone()))));
    // RESERVE and RELEASE of the indexed buyer (head, near the tail, middle).
    let newest = reserve(&mut s, b"whale", 1, None, 300).unwrap();
    s.check_internals().unwrap();
    for id in [&newest, &ids[3], &ids[120], &ids[198]] {
        assert_eq!(s.release(id, State::Released), ReleaseOutcome::Released);
        s.check_internals().unwrap();
    }
    assert_eq!(s.decide_reserve(b"whale", 1000, None, 300), Err(Refusal::Limit(Some(ids[199].clone()))));
    // Not persisted, not compared: a reload has no index and the same state.
    let back = crate::wire::encoding::decode(&crate::wire::encoding::encode(&s)).unwrap();
    assert!(back == s && back.buyers.chain_index().is_empty());
    back.check_internals().unwrap();
    // Down to `CHAIN_WALK / 2` live records, the index goes.
    // (The 9 retaken ones are confirmed: they stay.)
    for id in &ids {
        if s.release(id, State::Released) == ReleaseOutcome::Released {
            s.check_internals().unwrap();
            let live = s.records().filter(|r| r.state().is_live() && r.user() == b"whale").count();
            assert_eq!(s.buyers.chain_index().is_empty(), live <= CHAIN_WALK / 2, "{live} live");
        }
    }
    assert!(s.buyers.chain_index().is_empty());
}

/// Retaking the 1000 oldest records of a long chain walks it once
/// (to build the index), not once per retake; a sale whose retakes stay
/// near the head never builds one.
#[test]
fn retakes_walk_a_long_chain_once() {
    const N: usize = 20_000;
    let mut s = Sale::new(config(N as u64, N as u64, 0));
    let ids: Vec<Box<[u8]>> = (0..N).map(|i| reserve(&mut s, b"whale", 1, None, i as u64).unwrap()).collect();
    for id in &ids[..1000] {
        s.release(id, State::Released);
    }
    let before = walked_so_far();
    for id in &ids[..1000] {
        let takes = s.plan_retake(id).unwrap();
        s.retake(id, takes).unwrap();
    }
    let steps = walked_so_far() - before;
    assert!(steps <= N + 1000 * CHAIN_WALK, "{steps} records walked for 1000 retakes into a chain of {N}");
    s.check_internals().unwrap();
    let mut plain = Sale::new(config(100, 100, 0));
    let ids: Vec<Box<[u8]>> = (0..50).map(|i| reserve(&mut plain, b"u", 1, None, i).unwrap()).collect();
    for id in ids.iter().rev().take(CHAIN_WALK) {
        plain.release(id, State::Released);
        let takes = plain.plan_retake(id).unwrap();
        plain.retake(id, takes).unwrap();
    }
    assert!(plain.buyers.chain_index().is_empty());
    plain.check_internals().unwrap();
}

/// Holds spread over many chunks: the cursor skips chunks without any,
/// `due_holds` stops at `max` and at the first hold not yet due.
#[test]
fn holds_across_chunks() {
    let mut s = Sale::new(config(1_000_000, 1, 100));
    let n = 5 * CHUNK + 17;
    let ids: Vec<Box<[u8]>> = (0..n).map(|i| reserve(&mut s, format!("u{i}").as_bytes(), 1, None, i as u64).unwrap()).collect();
    let keep = [3 * CHUNK + 5, 3 * CHUNK + 6, 4 * CHUNK, n - 1];
    for (i, id) in ids.iter().enumerate() {
        if !keep.contains(&i) {
            s.confirm(id);
        }
    }
    s.check_internals().unwrap();
    assert_eq!(s.next_deadline(), Some(keep[0] as u64 + 100));
    assert_eq!(s.due_holds(u64::MAX, 2), vec![ids[keep[0]].clone(), ids[keep[1]].clone()]);
    assert_eq!(s.due_holds(keep[2] as u64 + 100, 10).len(), 3);
    assert_eq!(s.due_holds(u64::MAX, usize::MAX).len(), 4);
    assert!(s.due_holds(u64::MAX, 0).is_empty());
    assert!(s.due_holds(keep[0] as u64 + 99, 10).is_empty());
    for &i in &keep[..3] {
        s.release(&ids[i], State::Expired);
        s.check_internals().unwrap();
    }
    assert_eq!(s.next_deadline(), Some(n as u64 - 1 + 100));
    s.confirm(&ids[n - 1]);
    assert_eq!((s.next_deadline(), s.due_holds(u64::MAX, 9).len()), (None, 0));
    s.check_internals().unwrap();
}

/// Long client ids fill several arena chunks; none straddles two, and
/// the sale round-trips through its encoding.
#[test]
fn arena_chunks() {
    let mut s = Sale::new(config(10_000, 1, 0));
    let id = |i: usize| format!("{i:0>250}").into_bytes();
    for i in 0..1000 {
        reserve(&mut s, &id(i + 5000), 1, Some(&id(i)), 0).unwrap();
    }
    assert!(s.records.arena_chunks().len() >= 7 && s.records.arena_chunks().iter().all(|c| c.len() <= ARENA_CHUNK));
    for i in 0..1000 {
        assert_eq!(s.get(&id(i)).map(|r| r.user().to_vec()), Some(id(i + 5000)));
    }
    s.check_internals().unwrap();
    let back = crate::wire::encoding::decode(&crate::wire::encoding::encode(&s)).unwrap();
    assert!(back == s);
    back.check_internals().unwrap();
}

#[test]
fn memory_of_a_small_sale_stays_small() {
    let mut s = Sale::new(config(10, 1, 0));
    let empty = s.heap_estimate();
    reserve(&mut s, b"alice", 1, None, 0).unwrap();
    assert!(s.heap_estimate() - empty < 512, "{} bytes for one reservation", s.heap_estimate() - empty);
}

/// A buyer's live quantity and newest live record.
type Held = (u64, Option<u32>);

#[derive(Clone, Debug)]
enum Op {
    Reserve(u8, u64),
    /// One unit, `n` times: a long chain.
    ReserveMany(u8, u8),
    Release(usize),
    /// `n` ids in a row from the k-th.
    ReleaseRun(usize, u8),
    /// Every pending reservation of a user: a chain gets short again.
    ReleaseUser(u8),
    Expire(usize),
    Confirm(usize),
    Retake(usize),
    Reload,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        5 => (0u8..4, 1u64..=4).prop_map(|(u, q)| Op::Reserve(u, q)),
        2 => (0u8..4, 20u8..80).prop_map(|(u, n)| Op::ReserveMany(u, n)),
        3 => any::<usize>().prop_map(Op::Release),
        1 => (any::<usize>(), 5u8..40).prop_map(|(k, n)| Op::ReleaseRun(k, n)),
        1 => (0u8..4).prop_map(Op::ReleaseUser),
        1 => any::<usize>().prop_map(Op::Expire),
        1 => any::<usize>().prop_map(Op::Confirm),
        4 => any::<usize>().prop_map(Op::Retake),
        1 => Just(Op::Reload),
    ]
}

proptest! {
    #![proptest_config(crate::model_tests::pt_config())]

    /// Few buyers, a high LIMIT and long chains (past `CHAIN_WALK`,
    /// indexed), released, expired and retaken in any order: every
    /// derived structure stays exact, and LIMIT follows each buyer's
    /// live quantity and newest live record.
    #[test]
    fn chains_follow_the_records(
        limit in prop_oneof![1 => 1u64..=40, 2 => Just(1000u64)],
        hold in prop_oneof![Just(0u64), 1u64..50],
        ops in vec(op(), 1..160),
    ) {
        let mut s = Sale::new(config(400, limit, hold));
        let mut ids: Vec<Box<[u8]>> = Vec::new();
        for (now, op) in ops.iter().enumerate() {
            let now = now as u64;
            let pick = |k: usize| ids.get(k % ids.len().max(1)).cloned();
            match *op {
                Op::Reserve(u, q) => {
                    let user = [b'u', b'0' + u];
                    if let Ok(id) = reserve(&mut s, &user, q, None, now) {
                        ids.push(id);
                    }
                }
                Op::ReserveMany(u, n) => {
                    let user = [b'u', b'0' + u];
                    for _ in 0..n {
                        if let Ok(id) = reserve(&mut s, &user, 1, None, now) {
                            ids.push(id);
                        }
                    }
                }
                Op::ReleaseRun(k, n) => {
                    for j in 0..usize::from(n) {
                        if let Some(id) = pick(k.wrapping_add(j)) {
                            s.release(&id, State::Released);
                        }
                    }
                }
                Op::ReleaseUser(u) => {
                    for id in &ids {
                        if s.get(id).is_some_and(|r| r.user() == [b'u', b'0' + u]) {
                            s.release(id, State::Released);
                        }
                    }
                }
                Op::Release(k) | Op::Expire(k) => {
                    let cause = if matches!(op, Op::Expire(_)) { State::Expired } else { State::Released };
                    if let Some(id) = pick(k) {
                        s.release(&id, cause);
                    }
                }
                Op::Confirm(k) => {
                    if let Some(id) = pick(k) {
                        s.confirm(&id);
                    }
                }
                Op::Retake(k) => {
                    if let Some(takes) = pick(k).and_then(|id| s.plan_retake(&id).map(|t| (id, t))) {
                        s.retake(&takes.0, takes.1).unwrap();
                    }
                }
                Op::Reload => {
                    s = crate::wire::encoding::decode(&crate::wire::encoding::encode(&s)).unwrap();
                }
            }
            if let Err(e) = s.check_internals() {
                prop_assert!(false, "after {:?}: {}", op, e);
            }
            // LIMIT against a plain sum over the records.
            let mut live: HashMap<&[u8], Held> = HashMap::new();
            for r in s.records().filter(|r| r.state().is_live()) {
                let e = live.entry(r.user()).or_default();
                e.0 += r.qty();
                e.1 = Some(r.seq());
            }
            for u in 0..4u8 {
                let user = [b'u', b'0' + u];
                let (held, newest) = live.get(&user[..]).copied().unwrap_or_default();
                let newest = newest.map(|seq| s.view(seq).id());
                let got = s.decide_reserve(&user, limit, None, now);
                if held > 0 {
                    prop_assert_eq!(got, Err(Refusal::Limit(newest)));
                } else {
                    prop_assert!(!matches!(got, Err(Refusal::Limit(_))));
                }
            }
        }
    }
}

/// A record time past `MAX_TIME_MS` (year 9999) is refused, changing
/// nothing; one at the bound loads, and RESERVE still answers after it.
#[test]
fn record_times_are_bounded() {
    use crate::rules::config::MAX_TIME_MS;
    let mut s = Sale::new(config(10, 5, 1000));
    let take = [crate::rules::buckets::Take { bucket: 0, qty: 1 }];
    let rec = |id: &'static [u8], created_ms: u64| NewRecord {
        id,
        user: b"u",
        qty: 1,
        state: State::Confirmed,
        created_ms,
        deadline_ms: 0,
        takes: &take,
    };
    for bad in [MAX_TIME_MS + 1, u64::MAX - 5, u64::MAX] {
        assert_eq!(s.add_record(rec(b"r1", bad)), Err(EffectError("creation time out of range")));
        assert_eq!(s.record_count(), 0);
    }
    s.add_record(rec(b"r1", MAX_TIME_MS)).unwrap();
    reserve(&mut s, b"v", 1, None, 5).unwrap();
    assert_eq!(s.record_count(), 2);
}

/// The master applies an accepted RESERVE with `add_accepted`, which skips
/// the lookup and parse of an id it generated itself; a replica applies the
/// same record from its effect with `add_record`. Both must make the same
/// sale: with and without an id key, and when a client had already taken
/// the generated id (the accepted one then carries a suffix).
#[test]
fn add_accepted_makes_the_sale_add_record_makes() {
    for id_key in [None, Some([7u8; 16])] {
        let mut master = Sale::new(SaleConfig { id_key, ..config(100, 5, 1000) });
        let mut replica = master.clone();
        for i in 0..20u64 {
            let user = format!("u{}", i % 7);
            // Client ids that take the next generated id, now and then.
            let next = master.records.generate_id(master.config.tag, |_| false).text;
            let reqid = (i % 5 == 3).then(|| next.as_bytes().to_vec());
            let a = master.accept_reserve(user.as_bytes(), 1, reqid.as_deref(), 10 + i).expect("accepted");
            assert_eq!(a.fresh(), reqid.is_none().then_some(i as u32));
            let rec = a.to_reservation();
            master.add_accepted(&a).expect("the master applies it");
            replica.add_record(rec.as_new()).expect("the replica applies it");
            assert!(master == replica, "after record {i}");
            assert_eq!(master.get(&rec.id).map(|r| r.user().to_vec()), Some(user.into_bytes()));
        }
        // The buyers joined under the hash their RESERVE made: each one's
        // chain is found and holds what the replica's holds.
        for u in 0..7 {
            let user = format!("u{u}");
            let held =
                |s: &Sale| s.buyers.head(&s.records, user.as_bytes(), s.records.hash(user.as_bytes())).map(|h| s.buyers.qty(&s.records, h));
            assert_eq!(held(&master), held(&replica), "{user}");
            assert!(held(&master).is_some_and(|q| q >= 2), "{user}");
        }
        // A client takes the id the record after next will be generated
        // with: that record's id is then suffixed and stored as a client's.
        let mut later = crate::rules::digits::Digits::default();
        let next_seq = master.record_count() as u32 + 1;
        super::ids::write_generated(&mut later, master.config.tag, next_seq, id_key.as_ref());
        let a = master.accept_reserve(b"x", 1, Some(later.as_bytes()), 99).unwrap();
        master.add_accepted(&a).unwrap();
        let b = master.accept_reserve(b"y", 1, None, 100).unwrap();
        assert_eq!(b.fresh(), None, "{:?}", b.id());
        assert!(b.id().starts_with(later.as_bytes()) && b.id().len() > later.len());
        let rec = b.to_reservation();
        master.add_accepted(&b).unwrap();
        assert_eq!(master.get(&rec.id).map(|r| r.user().to_vec()), Some(b"y".to_vec()));
        assert_eq!(master.get(later.as_bytes()).map(|r| r.user().to_vec()), Some(b"x".to_vec()));
    }
}
