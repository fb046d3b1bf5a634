//! Byte forms, plain Rust and fuzzed: command arguments, the RDB encoding,
//! the `SECKILL.EFFECT` argument codec.
//! Every byte from outside is checked here before a rule sees it.

pub mod args;
pub mod effect_args;
pub mod encoding;
pub mod slot;
