//! Argument parsing and effects: the input is split on 0xFF bytes into
//! arguments; the first byte picks the parser. Nothing may panic, and an
//! effect applied to a sale either leaves it unchanged or keeps the invariant.
#![no_main]

use libfuzzer_sys::fuzz_target;
use redis_seckill::rules::effect::Effect;
use redis_seckill::rules::sale::{Sale, SaleConfig, OPEN_END};
use redis_seckill::wire::args::{parse_init, parse_reconcile, parse_reserve, parse_rid};
use redis_seckill::wire::effect_args::EffectArgs;

fn sample_sale() -> Sale {
    let mut sale = Sale::new(SaleConfig {
        total: 20,
        shards: 3,
        limit: 3,
        hold_ms: 100,
        start_ms: 0,
        end_ms: OPEN_END,
        stream: None,
        tag: 0xabcd,
        split: None,
        draw: None,
        beacon: None,
        fence: None,
        id_key: Some([9; 16]),
    });
    for (i, user) in [&b"a"[..], b"b", b"c"].iter().enumerate() {
        if let Ok(rec) = sale.accept_reserve(user, 2, None, 1000 + i as u64) {
            let _ = sale.add_record(rec.as_new());
        }
    }
    sale
}

fuzz_target!(|data: &[u8]| {
    let Some((&which, rest)) = data.split_first() else { return };
    let args: Vec<&[u8]> = rest.split(|&b| b == 0xff).collect();
    match which % 5 {
        0 => drop(parse_init(b"k{1}", &args)),
        1 => drop(parse_reserve(&args)),
        2 => drop(parse_reconcile(&args)),
        3 => drop(parse_rid(&args)),
        _ => {
            if let Ok(effect) = Effect::parse(&args) {
                let mut sale = sample_sale();
                let before = sale.clone();
                match effect.apply(&mut sale) {
                    Ok(()) => assert!(sale.invariant_holds()),
                    Err(_) => assert!(sale == before),
                }
            }
        }
    }
});
