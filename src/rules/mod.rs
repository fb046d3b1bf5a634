//! The sale's rules in plain Rust, no FFI: what a sale is, what each
//! command decides, and the effects that replay a decision anywhere.

pub mod buckets;
pub mod catalog;
pub mod config;
pub mod digits;
pub mod effect;
pub mod fence;
pub mod outcome;
pub mod reconcile;
pub mod report;
pub mod reservation;
pub mod sale;
pub mod schedule;
pub mod seq_index;
pub mod transfers;
