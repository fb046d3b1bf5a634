//! redis-seckill: flash-sale inventory as native Redis commands.
//!
//! Three layers, each in its folder, imports pointing down only:
//! - `rules`: the sale's rules in plain Rust (no FFI): stock and buckets,
//!   reservations, buyers and holds, transfers, reconcile, the effect model,
//!   the reports;
//! - `wire`: the byte forms, plain Rust and fuzzed: command arguments, the
//!   RDB encoding, the argument codec of the internal `SECKILL.EFFECT`;
//! - `module`: the thin Redis shell (commands, the one write path, the data
//!   type, hold expiry, the stream, replies, stats, raw API wrappers).

// Unit tests build the module layer without registering it.
#![cfg_attr(test, allow(dead_code))]

pub mod rules;
pub mod wire;

#[cfg(feature = "module")]
mod module;

#[cfg(test)]
#[path = "tests/model.rs"]
mod model_tests;
