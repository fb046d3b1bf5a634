//! The RDB decoder: any bytes either fail to decode or give a sale whose
//! invariant holds and whose encoding decodes back to itself.
#![no_main]

use libfuzzer_sys::fuzz_target;
use redis_seckill::wire::encoding::{decode, encode};

fuzz_target!(|data: &[u8]| {
    if let Ok(sale) = decode(data) {
        assert!(sale.invariant_holds());
        let again = encode(&sale);
        assert!(decode(&again).expect("re-decode") == sale);
    }
});
