//! Byte forms, plain Rust and fuzzed: command arguments, the RDB encoding.
//! Every byte from outside is checked here before a rule sees it.

pub mod args;
pub mod encoding;
