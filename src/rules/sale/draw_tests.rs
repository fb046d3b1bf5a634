//! Draw sales through the sale's API: the order against a reference sort
//! of the digests, the draw's budget and bounded steps, the waitlist, a
//! replica applying the master's effects, the encodings, and fairness.

use proptest::collection::vec;
use proptest::prelude::*;

use super::draw::{draw_key, PREFIX_MASK};
use super::*;
use crate::rules::effect::Effect;

const END: u64 = 1000;

fn config(total: u64, limit: u64, hold_ms: u64, seed: Seed) -> SaleConfig {
    SaleConfig { limit, hold_ms, end_ms: END, tag: 0x2a, draw: Some(seed), ..SaleConfig::plain(total, 3) }
}

fn seed_of(n: u64) -> Seed {
    draw::commitment(&{
        let mut s = [0u8; 32];
        s[..8].copy_from_slice(&n.to_le_bytes());
        s
    })
}

/// A master and a replica that applies every effect the master makes.
struct Pair {
    master: Sale,
    replica: Sale,
}

impl Pair {
    fn new(config: SaleConfig) -> Pair {
        Pair { master: Sale::new(config.clone()), replica: Sale::new(config) }
    }

    fn replay(&mut self, effect: &Effect) {
        effect.apply(&mut self.replica).expect("the replica takes the master's effect");
    }

    fn enter(&mut self, user: &[u8], qty: u64, reqid: Option<&[u8]>, now: u64) -> Result<(), EnterRefusal> {
        let e = self.master.decide_enter(user, qty, reqid, now)?;
        let effect = Effect::Entrants(vec![e]);
        effect.apply(&mut self.master).unwrap();
        self.replay(&effect);
        Ok(())
    }

    /// A DRAW call, then the waitlist's turn (as `Committer::write`).
    fn draw(&mut self, count: usize, now: u64) -> usize {
        let Some(step) = self.master.draw_step(count, now) else {
            self.promote(now);
            return 0;
        };
        assert!(step.winners.len() <= count && step.examined as usize <= 4 * count, "a step's work is bounded");
        let n = step.winners.len();
        self.replay(&Effect::Drawn { stock: step.stock, examined: step.examined, records: step.winners });
        self.promote(now);
        n
    }

    fn promote(&mut self, now: u64) -> usize {
        let recs = self.master.promote_step(4, now, || crate::rules::fence::id(b'0'));
        let n = recs.len();
        if n > 0 {
            self.replay(&Effect::Promoted(recs));
        }
        n
    }

    fn release(&mut self, id: &[u8], now: u64) {
        assert_eq!(self.master.release(id, State::Released), ReleaseOutcome::Released);
        self.replay(&Effect::Release(id.into()));
        while self.promote(now) > 0 {}
    }

    fn check(&self) {
        self.master.check_internals().unwrap();
        assert!(self.master.invariant_holds());
        assert!(self.master == self.replica, "the replica is the master");
        assert_eq!(crate::wire::encoding::encode(&self.master), crate::wire::encoding::encode(&self.replica));
    }
}

fn user(i: usize) -> Vec<u8> {
    format!("user:{i}").into_bytes()
}

/// Entrant numbers in ascending `SHA-256(seed || user)`.
fn reference_order(seed: &Seed, users: &[Vec<u8>]) -> Vec<usize> {
    let mut order: Vec<usize> = (0..users.len()).collect();
    order.sort_by_key(|&i| draw_key(seed, &users[i]));
    order
}

/// The draw as the contract states it: walk the order, each entrant whose
/// QTY fits what is left of the stock wins.
fn reference_winners(seed: &Seed, users: &[Vec<u8>], qty: &[u64], stock: u64) -> Vec<usize> {
    let mut left = stock;
    let mut winners = Vec::new();
    for i in reference_order(seed, users) {
        if qty[i] <= left {
            left -= qty[i];
            winners.push(i);
        }
    }
    winners.sort_unstable();
    winners
}

fn results(sale: &Sale) -> Vec<EntrantResult> {
    sale.entrants_page(0, usize::MAX).1.into_iter().map(|e| e.result).collect()
}

#[test]
fn order_is_the_digests_order_even_when_prefixes_tie() {
    for mask in [u64::MAX, 0xf000_0000_0000_0000, 0] {
        PREFIX_MASK.with(|m| m.set(mask));
        let seed = seed_of(mask);
        let mut s = Sale::new(config(10, 1, 0, seed));
        let users: Vec<Vec<u8>> = (0..700).map(user).collect();
        for u in &users {
            let e = s.decide_enter(u, 1, None, 0).unwrap();
            s.add_entrants(&[e]).unwrap();
        }
        let want: Vec<u32> = reference_order(&seed, &users).into_iter().map(|i| i as u32).collect();
        assert_eq!(s.draw.as_ref().unwrap().order(), want, "mask {mask:x}");
        s.check_internals().unwrap();
    }
    PREFIX_MASK.with(|m| m.set(u64::MAX));
}

#[test]
fn enter_statuses_in_order() {
    let mut p = Pair::new(SaleConfig { start_ms: 10, ..config(5, 2, 0, seed_of(1)) });
    assert_eq!(p.enter(b"a", 1, None, 5), Err(EnterRefusal::NotStarted));
    assert_eq!(p.enter(b"a", 2, Some(b"r-a"), 10), Ok(()));
    assert_eq!(p.enter(b"a", 1, None, 2000), Err(EnterRefusal::AlreadyEntered));
    assert_eq!(p.enter(b"b", 1, Some(b"r-a"), 11), Err(EnterRefusal::ReqidOfEntrant));
    assert_eq!(p.enter(b"b", 1, None, END), Err(EnterRefusal::Ended));
    assert_eq!(p.enter(b"b", 1, None, 999), Ok(()));
    assert_eq!(p.draw(10, END), 2);
    assert_eq!(p.enter(b"c", 1, None, 500), Err(EnterRefusal::Drawn));
    assert_eq!(p.enter(b"a", 1, None, 500), Err(EnterRefusal::AlreadyEntered));
    assert_eq!(p.enter(b"c", 1, Some(b"r-a"), 500), Err(EnterRefusal::ReqidOfEntrant));
    // The winner's REQID became its reservation id.
    assert_eq!(p.master.get(b"r-a").unwrap().qty(), 2);
    assert_eq!(Sale::new(SaleConfig { draw: None, ..config(1, 1, 0, [0; 32]) }).decide_enter(b"a", 1, None, 0), Err(EnterRefusal::NotDraw));
    p.check();
}

#[test]
fn a_refused_entrants_batch_changes_nothing() {
    let mut s = Sale::new(config(5, 2, 0, seed_of(2)));
    let e = |u: &[u8], q, r: Option<&[u8]>| EntrantRec { user: u.into(), qty: q, reqid: r.map(Into::into), result: EntrantResult::Entered };
    s.add_entrants(&[e(b"a", 1, Some(b"x"))]).unwrap();
    let before = s.clone();
    for bad in [
        vec![e(b"b", 1, None), e(b"b", 1, None)],
        vec![e(b"b", 1, None), e(b"a", 1, None)],
        vec![e(b"b", 1, Some(b"x"))],
        vec![e(b"b", 1, Some(b"y")), e(b"c", 1, Some(b"y"))],
        vec![e(b"b", 3, None)],
        vec![e(b"", 1, None)],
    ] {
        assert!(s.add_entrants(&bad).is_err(), "{bad:?}");
        assert!(s == before);
    }
}

#[test]
fn draw_hands_out_the_first_draws_stock_and_no_more() {
    let seed = seed_of(3);
    let users: Vec<Vec<u8>> = (0..50).map(user).collect();
    let qty: Vec<u64> = (0..50).map(|i| 1 + (i as u64 * 7) % 3).collect();
    let mut p = Pair::new(config(20, 3, 0, seed));
    for (u, &q) in users.iter().zip(&qty) {
        p.enter(u, q, None, 0).unwrap();
    }
    let mut calls = 0;
    while p.master.left_to_draw() > 0 || calls == 0 {
        p.draw(2, END + calls);
        calls += 1;
        p.check();
    }
    let drawn: Vec<usize> = results(&p.master).iter().enumerate().filter(|(_, r)| **r == EntrantResult::Drawn).map(|(i, _)| i).collect();
    assert_eq!(drawn, reference_winners(&seed, &users, &qty, 20));
    let r = p.master.draw_report().unwrap();
    assert_eq!((r.draw_stock, r.left_to_draw, r.drawn as usize, r.waitlist as usize), (Some(20), 0, drawn.len(), 50 - drawn.len()));
    assert_eq!(p.draw(5, END + 100), 0, "a complete draw changes nothing");
}

#[test]
fn units_released_during_the_draw_wait_for_the_waitlist() {
    let seed = seed_of(4);
    let users: Vec<Vec<u8>> = (0..30).map(user).collect();
    let mut p = Pair::new(config(6, 1, 0, seed));
    for u in &users {
        p.enter(u, 1, Some(&[b"rid-", &u[..]].concat()), 0).unwrap();
    }
    p.draw(2, END);
    // The first winner lets its unit go while the draw runs: the draw
    // still hands out exactly its stock, in order.
    let first = p.master.records().next().unwrap().id();
    p.release(&first, END + 1);
    assert_eq!(p.master.remaining(), 5);
    while p.master.left_to_draw() > 0 {
        p.draw(2, END + 2);
    }
    // Complete: the released unit went to the first waiting entrant.
    let res = results(&p.master);
    let drawn: Vec<usize> = (0..30).filter(|&i| res[i] == EntrantResult::Drawn).collect();
    assert_eq!(drawn, reference_winners(&seed, &users, &[1; 30], 6));
    let order = reference_order(&seed, &users);
    let next = order.iter().copied().find(|i| !drawn.contains(i)).unwrap();
    assert_eq!(res[next], EntrantResult::Promoted);
    assert_eq!(p.master.remaining(), 0);
    p.check();
}

#[test]
fn waitlist_follows_the_order_and_skips_what_does_not_fit() {
    let seed = seed_of(5);
    let users: Vec<Vec<u8>> = (0..40).map(user).collect();
    let qty: Vec<u64> = (0..40).map(|i| if i % 4 == 0 { 1 } else { 3 }).collect();
    let mut p = Pair::new(config(9, 3, 0, seed));
    for (u, &q) in users.iter().zip(&qty) {
        p.enter(u, q, None, 0).unwrap();
    }
    while p.master.left_to_draw() > 0 || p.master.draw_report().unwrap().draw_stock.is_none() {
        p.draw(1000, END);
    }
    let order = reference_order(&seed, &users);
    // Release winners one by one: each unit that comes back goes to the
    // first waiting entrant in draw order whose QTY fits.
    for round in 0..6 {
        let Some(rec) = p.master.records().find(|r| r.state() == State::Pending) else { break };
        let id = rec.id();
        let res = results(&p.master);
        let mut free = p.master.remaining() + rec.qty();
        let mut want = Vec::new();
        for &i in &order {
            if res[i] == EntrantResult::Entered && qty[i] <= free {
                free -= qty[i];
                want.push(i);
            }
        }
        p.release(&id, END + round);
        let after = results(&p.master);
        let got: Vec<usize> =
            order.iter().copied().filter(|&i| res[i] == EntrantResult::Entered && after[i] == EntrantResult::Promoted).collect();
        assert_eq!(got, want, "round {round}");
        p.check();
    }
}

#[test]
fn encodings_keep_the_draw() {
    let seed = seed_of(6);
    let mut p = Pair::new(config(7, 2, 50, seed));
    for i in 0..300 {
        p.enter(&user(i), 1 + i as u64 % 2, (i % 3 == 0).then(|| format!("r{i}")).as_deref().map(str::as_bytes), 0).unwrap();
    }
    let check = |s: &Sale| {
        let bytes = crate::wire::encoding::encode(s);
        let back = crate::wire::encoding::decode(&bytes).unwrap();
        assert!(back == *s);
        back.check_internals().unwrap();
        assert_eq!(crate::wire::encoding::encode(&back), bytes);
        assert_eq!(back.draw_report(), s.draw_report());
        let mut rebuilt: Option<Sale> = None;
        crate::rules::effect::rebuild(s, 64, |e| match (e, &mut rebuilt) {
            (Effect::Init(c), r) => *r = Some(Sale::new(c.clone())),
            (e, Some(r)) => e.apply(r).unwrap(),
            _ => unreachable!(),
        });
        assert!(rebuilt.unwrap() == *s);
    };
    check(&p.master);
    p.draw(2, END);
    check(&p.master);
    while p.master.left_to_draw() > 0 {
        p.draw(3, END);
    }
    let id = p.master.records().next().unwrap().id();
    p.release(&id, END + 1);
    check(&p.master);
    p.check();
    // A payload whose progress does not fit its entrants is refused.
    let bytes = crate::wire::encoding::encode(&p.master);
    let examined = p.master.draw.as_ref().unwrap().examined();
    let tail = if examined < 128 { 1 } else { 2 };
    let mut b = bytes[..bytes.len() - tail].to_vec();
    b.push(0);
    assert!(examined > 0 && crate::wire::encoding::decode(&b).is_err(), "examined 0 with winners");
}

#[test]
fn a_replica_refuses_a_draw_that_differs() {
    let mut p = Pair::new(config(3, 1, 0, seed_of(7)));
    for i in 0..10 {
        p.enter(&user(i), 1, None, 0).unwrap();
    }
    let step = p.master.clone().draw_step(2, END).unwrap();
    let before = p.replica.clone();
    let mut wrong = step.winners.clone();
    wrong.reverse();
    assert_eq!(wrong.len(), 2);
    for bad in [
        Effect::Drawn { stock: step.stock, examined: step.examined, records: wrong },
        Effect::Drawn { stock: step.stock + 1, examined: step.examined, records: step.winners.clone() },
        Effect::Drawn { stock: step.stock, examined: step.examined + 1, records: step.winners.clone() },
        Effect::Promoted(step.winners.clone()),
    ] {
        assert!(bad.apply(&mut p.replica).is_err(), "{bad:?}");
        assert!(p.replica == before);
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    /// Any entrants, stock, DRAW sizes and releases: the draw's winners
    /// are the reference's, every step is bounded, the replica follows,
    /// the invariant holds.
    #[test]
    fn draw_matches_the_reference(
        seed in any::<[u8; 32]>(),
        qtys in vec(1u64..=3, 1..60),
        total in 0u64..40,
        counts in vec(1usize..5, 1..40),
        releases in vec(any::<prop::sample::Index>(), 0..10),
    ) {
        let users: Vec<Vec<u8>> = (0..qtys.len()).map(user).collect();
        let mut p = Pair::new(config(total, 3, 0, seed));
        for (u, &q) in users.iter().zip(&qtys) {
            p.enter(u, q, None, 0).unwrap();
        }
        let mut calls = counts.iter().cycle();
        p.draw(*calls.next().unwrap(), END);
        while p.master.left_to_draw() > 0 {
            p.draw(*calls.next().unwrap(), END);
        }
        let res = results(&p.master);
        let drawn: Vec<usize> = (0..users.len()).filter(|&i| res[i] == EntrantResult::Drawn).collect();
        prop_assert_eq!(drawn, reference_winners(&seed, &users, &qtys, total));
        p.check();
        for ix in releases {
            let pending: Vec<Box<[u8]>> = p.master.records().filter(|r| r.state() == State::Pending).map(|r| r.id()).collect();
            if pending.is_empty() {
                break;
            }
            p.release(&pending[ix.index(pending.len())], END + 1);
            // Nothing that fits is left waiting while stock is there.
            let res = results(&p.master);
            let free = p.master.remaining();
            prop_assert!((0..users.len()).all(|i| res[i] != EntrantResult::Entered || qtys[i] > free));
            p.check();
        }
    }
}

/// Over 2,000 seeds, each of n entrants wins about k/n of the draws: the
/// chi-square statistic of the win counts stays below the critical value
/// at p = 0.001 (df = n - 1). Sampling without replacement makes the
/// statistic smaller than a multinomial's, so the test is conservative.
#[test]
fn fairness_chi_square() {
    const SEEDS: u64 = 2000;
    const N: usize = 20;
    const K: u64 = 5;
    // chi-square critical value, df = 19, p = 0.001.
    const CRITICAL: f64 = 43.820;
    let users: Vec<Vec<u8>> = (0..N).map(user).collect();
    let mut wins = [0u64; N];
    for s in 0..SEEDS {
        let mut sale = Sale::new(config(K, 1, 0, seed_of(1_000_000 + s)));
        for u in &users {
            let e = sale.decide_enter(u, 1, None, 0).unwrap();
            sale.add_entrants(&[e]).unwrap();
        }
        let step = sale.draw_step(1000, END).unwrap();
        assert_eq!(step.winners.len() as u64, K);
        for (i, r) in results(&sale).into_iter().enumerate() {
            wins[i] += u64::from(r == EntrantResult::Drawn);
        }
    }
    let expected = (SEEDS * K) as f64 / N as f64;
    let chi2: f64 = wins.iter().map(|&w| (w as f64 - expected).powi(2) / expected).sum();
    println!("fairness: {SEEDS} seeds, n {N}, k {K}, expected {expected} wins each, chi2 {chi2:.2} (df {}, critical {CRITICAL})", N - 1);
    assert!(chi2 < CRITICAL, "chi2 {chi2} with wins {wins:?}");
}

/// One run of `draw_scale`: per-call nanoseconds of every ENTER, every
/// DRAW and every promotion step, and the heap per entrant beyond its
/// user id.
fn scale_run(n: usize, count: usize) -> (Vec<u64>, Vec<u64>, Vec<u64>, f64) {
    use std::time::Instant;
    let mut s = Sale::new(SaleConfig { total: 200_000, ..config(0, 3, 0, seed_of(9)) });
    let heap0 = s.heap_estimate();
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    let (mut enters, mut draws, mut promotions, mut user_bytes) = (Vec::with_capacity(n), Vec::new(), Vec::new(), 0);
    for i in 0..n {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let u = format!("user:{x:016x}");
        user_bytes += u.len();
        let t = Instant::now();
        let e = s.decide_enter(u.as_bytes(), 1 + (i as u64 % 3), None, 0).unwrap();
        s.add_entrants(&[e]).unwrap();
        enters.push(t.elapsed().as_nanos() as u64);
    }
    let per_entrant = (s.heap_estimate() - heap0 - user_bytes) as f64 / n as f64;
    loop {
        let t = Instant::now();
        let step = s.draw_step(count, END);
        draws.push(t.elapsed().as_nanos() as u64);
        if step.is_none() || s.left_to_draw() == 0 {
            break;
        }
    }
    // The waitlist: 200 winners let go one by one, each followed by the
    // promotion step a command runs (at most 128).
    let ids: Vec<Box<[u8]>> = s.records().take(200).map(|r| r.id()).collect();
    for id in ids {
        s.release(&id, State::Released);
        let t = Instant::now();
        s.promote_step(128, END, || crate::rules::fence::id(b'0'));
        promotions.push(t.elapsed().as_nanos() as u64);
    }
    (enters, draws, promotions, per_entrant)
}

/// Figures, not assertions: `cargo test --release --lib
/// --no-default-features -- --ignored --nocapture draw_scale`. One sale
/// takes 1M entrants, ENTER by ENTER, then is drawn with DRAW COUNT 1000
/// (`DRAW_SCALE_COUNT=n` for another COUNT) until complete, then 200 winners let go feed the waitlist: the slowest
/// single call of each, and the heap per entrant beyond its user id. The
/// same sequence runs twice and each call keeps its faster time: a stall
/// of the structure repeats at the same call, a preemption on a busy
/// machine does not.
#[test]
#[ignore]
fn draw_scale() {
    const N: usize = 1_000_000;
    let count = std::env::var("DRAW_SCALE_COUNT").ok().and_then(|c| c.parse().ok()).unwrap_or(1000);
    let (e1, d1, p1, per_entrant) = scale_run(N, count);
    let (e2, d2, p2, _) = scale_run(N, count);
    let worst = |a: &[u64], b: &[u64]| -> (f64, usize) {
        let (i, ns) = a.iter().zip(b).map(|(x, y)| *x.min(y)).enumerate().max_by_key(|&(_, ns)| ns).unwrap_or((0, 0));
        (ns as f64 / 1e6, i)
    };
    let ((e, ei), (d, di), (p, _)) = (worst(&e1, &e2), worst(&d1, &d2), worst(&p1, &p2));
    if std::env::var("DRAW_SCALE_CALLS").is_ok() {
        println!("draw calls ms: {:?}", d1.iter().zip(&d2).map(|(a, b)| *a.min(b) / 100_000).collect::<Vec<_>>());
    }
    println!(
        "draw_scale: {N} entrants: ENTER max {e:.3} ms (call {ei}); DRAW COUNT {count} max {d:.3} ms (call {di} of {}); \
         waitlist promotion step max {p:.3} ms; heap {per_entrant:.1} B per entrant beyond its user id",
        d1.len()
    );
}

/// A generated id never takes an entrant's REQID (it is spoken for: the
/// id of that entrant's reservation if it wins), and an entrant whose
/// REQID a reservation took meanwhile (RECONCILE APPLY) gets a generated id.
#[test]
fn generated_ids_leave_entrants_reqids_alone() {
    let seed = seed_of(8);
    let users: Vec<Vec<u8>> = (0..6).map(user).collect();
    let order = reference_order(&seed, &users);
    let mut p = Pair::new(config(6, 1, 0, seed));
    // The last in draw order asks for the id the first winner would get.
    for (i, u) in users.iter().enumerate() {
        let reqid = (i == order[5]).then_some(&b"0000002a-0"[..]);
        p.enter(u, 1, reqid, 0).unwrap();
    }
    p.draw(10, END);
    let ids: Vec<Box<[u8]>> = p.master.records().map(|r| r.id()).collect();
    assert_eq!(&*ids[0], b"0000002a-0-1");
    assert_eq!(&*ids[5], b"0000002a-0");
    assert_eq!(p.master.get(b"0000002a-0").unwrap().user(), &users[order[5]][..]);
    p.check();
}

/// A fenced draw sale promotes nobody from its waitlist: a unit released
/// while fenced waits until the fence is lifted (UNFENCE's effect), then
/// goes to the first waiting entrant, on the master and the replica alike.
#[test]
fn waitlist_promotions_wait_while_fenced() {
    use crate::rules::fence::{id, UnfenceOutcome};
    let (old, new) = (id(b'1'), id(b'2'));
    let mut p = Pair::new(SaleConfig { fence: Some(old), ..config(2, 1, 0, seed_of(7)) });
    for i in 0..4 {
        p.enter(&user(i), 1, None, 0).unwrap();
    }
    assert_eq!(p.draw(10, END), 2);
    let winner = p.master.records().next().unwrap().id();
    // The server's id changed: the sale is fenced there.
    assert!(p.master.fenced(|| new) && !p.master.fenced(|| old));
    assert_eq!(p.master.release(&winner, State::Released), ReleaseOutcome::Released);
    p.replay(&Effect::Release(winner.clone()));
    assert_eq!(p.master.promote_step(4, END, || new), vec![], "no promotion while fenced");
    assert_eq!((p.master.remaining(), p.master.draw_report().unwrap().waitlist), (1, 2));
    // UNFENCE: decided at the current id, applied as an effect.
    assert_eq!(p.master.decide_unfence(&new), UnfenceOutcome::Unfenced);
    let unfence = Effect::Unfence(new);
    unfence.apply(&mut p.master).unwrap();
    p.replay(&unfence);
    assert_eq!(p.master.decide_unfence(&new), UnfenceOutcome::NotFenced);
    let promoted = p.master.promote_step(4, END, || new);
    assert_eq!(promoted.len(), 1);
    p.replay(&Effect::Promoted(promoted));
    assert_eq!(p.master.remaining(), 0);
    p.check();
}

/// UNFENCE's effect fits only a FENCE sale; the report's `fence` field is
/// a FENCE sale's alone, and last.
#[test]
fn unfence_effect_and_report_field() {
    use crate::rules::fence::id;
    use crate::rules::report::Report;
    let mut plain = Sale::new(SaleConfig::plain(3, 1));
    assert!(Effect::Unfence(id(b'1')).apply(&mut plain).is_err());
    assert!(plain == Sale::new(SaleConfig::plain(3, 1)));
    assert_eq!(Report::of(&plain, || panic!("a plain sale never asks for the id")).fenced, None);
    let fenced = Sale::new(SaleConfig { fence: Some(id(b'1')), ..SaleConfig::plain(3, 1) });
    let doc = Report::of(&fenced, || id(b'2')).doc();
    assert_eq!(doc.0.last().map(|(name, v)| (*name, v.clone())), Some(("fence", crate::rules::report::Value::Word(c"fenced"))));
    let doc = Report::of(&fenced, || id(b'1')).doc();
    assert_eq!(doc.0.last().map(|(name, v)| (*name, v.clone())), Some(("fence", crate::rules::report::Value::Word(c"clear"))));
    assert_eq!(doc.0.len(), Report::of(&plain, || id(b'1')).doc().0.len() + 1);
}

/// RECONCILE on a draw sale takes stock only for the draw's reservations:
/// an unknown order (an outsider's, or a winner's user under another id)
/// is a conflict with or without APPLY and changes nothing; a winner's
/// released reservation is still retaken.
#[test]
fn reconcile_takes_no_draw_stock_outside_the_draw() {
    use crate::rules::reconcile::{reconcile_orders, Order};
    let mut p = Pair::new(config(10, 1, 0, seed_of(3)));
    for i in 0..3 {
        p.enter(&user(i), 1, Some(format!("rid{i}").as_bytes()), 1).unwrap();
    }
    p.draw(100, END);
    assert!(p.master.is_draw_reservation(b"rid0") && !p.master.is_draw_reservation(b"nope"));
    let before = crate::wire::encoding::encode(&p.master);
    let u0 = user(0);
    let orders = [Order { rid: b"x1", user: b"outsider", qty: 7 }, Order { rid: b"x2", user: &u0, qty: 1 }];
    for apply in [false, true] {
        let report = reconcile_orders(&mut p.master, &orders, apply, END, |_, _| panic!("no fix"));
        assert_eq!(report.conflict, vec![b"x1".as_slice().into(), b"x2".as_slice().into()]);
        assert_eq!(crate::wire::encoding::encode(&p.master), before);
    }
    p.release(b"rid0", END);
    let mut fixes = 0;
    let orders = [Order { rid: b"rid0", user: &u0, qty: 1 }];
    let report = reconcile_orders(&mut p.master, &orders, true, END, |s, e| {
        e.apply(s).unwrap();
        fixes += 1;
    });
    assert_eq!((report.released.len(), fixes), (1, 1), "a winner's own order is retaken");
}
