//! The Redis shell around the rules: commands, the one write path, the
//! data type, hold expiry, the reservation stream, replies, stats, and the
//! small wrappers of the raw module API.

pub mod command_info;
pub mod commands;
pub mod commit;
pub mod config;
pub mod datatype;
pub mod expiry;
pub mod rawapi;
pub mod reply;
pub mod stats;
pub mod stream;
pub mod warn;

#[cfg(not(test))]
mod registration;
