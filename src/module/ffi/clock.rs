//! The server's wall clock.

use redis_module::raw;

/// RM_Milliseconds: the Unix time in milliseconds, read as Redis reads it
/// (the same realtime clock `std::time::SystemTime` reads, at a fraction
/// of the instructions: std's `duration_since(UNIX_EPOCH)` alone cost
/// about 56 per RESERVE).
pub fn milliseconds() -> i64 {
    unsafe { raw::RedisModule_Milliseconds.unwrap()() }
}
