//! The SEND, RECV, DRAW and ENTRANTS parsers, and effects applied to a
//! part of a split sale and to a draw sale (before and after its draw
//! began): the input is split on 0xFF bytes into arguments, the first byte
//! picks the parser or the sale. Nothing may panic; a parse that succeeds
//! stays within the documented bounds; an effect either leaves the sale
//! unchanged or keeps its invariant.
#![no_main]

use libfuzzer_sys::fuzz_target;
use redis_seckill::rules::config::{SplitConfig, MAX_TOTAL};
use redis_seckill::rules::effect::Effect;
use redis_seckill::rules::sale::{EntrantRec, EntrantResult, Sale, SaleConfig, OPEN_END};
use redis_seckill::rules::transfers::SendDecision;
use redis_seckill::wire::args::{parse_draw, parse_entrants, parse_recv, parse_send};
use redis_seckill::wire::effect_args::EffectArgs;

const KEY: &[u8] = b"k";

fn config(draw: bool) -> SaleConfig {
    let split = SplitConfig::new(Some(KEY), b"r1", &[b"p", b"q"]).expect("a valid split");
    SaleConfig {
        total: 20,
        shards: 3,
        limit: 3,
        hold_ms: 100,
        start_ms: 0,
        end_ms: if draw { 1000 } else { OPEN_END },
        stream: None,
        tag: 0xabcd,
        split: Some(split),
        draw: draw.then_some([7; 32]),
        beacon: None,
        fence: None,
        id_key: Some([9; 16]),
    }
}

/// A part that sent to `p` and received from `q`, with reservations.
fn split_sale() -> Sale {
    let mut sale = Sale::new(config(false));
    if let SendDecision::Take(takes) = sale.decide_send(4, 1, b"t1") {
        let _ = Effect::Send { peer: b"p".as_slice().into(), tid: b"t1".as_slice().into(), takes, to: None }.apply(&mut sale);
    }
    if let Ok(Some(credits)) = sale.plan_recv(b"q", 3) {
        let _ = Effect::Recv { peer: b"q".as_slice().into(), sent_total: 3, credits }.apply(&mut sale);
    }
    for (i, user) in [&b"a"[..], b"b"].iter().enumerate() {
        if let Ok(rec) = sale.accept_reserve(user, 2, None, 10 + i as u64) {
            let _ = sale.add_record(rec.as_new());
        }
    }
    sale
}

/// A draw part with three entrants; `drawn`: its draw has begun.
fn draw_sale(drawn: bool) -> Sale {
    let mut sale = Sale::new(config(true));
    let entrants: Vec<EntrantRec> = [&b"a"[..], b"b", b"c"]
        .iter()
        .map(|u| EntrantRec { user: (*u).into(), qty: 2, reqid: None, result: EntrantResult::Entered })
        .collect();
    let _ = sale.add_entrants(&entrants);
    if drawn {
        sale.draw_step(2, 2000, None);
    }
    sale
}

fuzz_target!(|data: &[u8]| {
    let Some((&which, rest)) = data.split_first() else { return };
    let args: Vec<&[u8]> = rest.split(|&b| b == 0xff).collect();
    match which % 8 {
        0 => {
            if let Ok(a) = parse_send(KEY, &args) {
                assert!((1..=MAX_TOTAL).contains(&a.qty) && (1..=MAX_TOTAL).contains(&a.min) && a.peer != KEY);
            }
        }
        1 => {
            if let Ok(a) = parse_recv(KEY, &args) {
                assert!(a.peer != KEY && !a.round.is_empty());
            }
        }
        2 => {
            if let Ok((n, beacon)) = parse_draw(&args) {
                assert!((1..=1000).contains(&n));
                // Its length is the sale's to check (Sale::check_beacon).
                let _ = beacon.map(<[u8]>::len);
            }
        }
        3 => {
            if let Ok((_, n)) = parse_entrants(&args) {
                assert!((1..=1000).contains(&n));
            }
        }
        n => {
            let Ok(effect) = Effect::parse(&args) else { return };
            let mut sale = match n {
                4 | 5 => split_sale(),
                6 => draw_sale(false),
                _ => draw_sale(true),
            };
            let before = sale.clone();
            match effect.apply(&mut sale) {
                Ok(()) => assert!(sale.invariant_holds()),
                Err(_) => assert!(sale == before),
            }
        }
    }
});
