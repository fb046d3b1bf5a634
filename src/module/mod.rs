//! The Redis shell around the rules: commands, the one write path, the
//! data type, hold expiry, the reservation stream, replies, stats, and the
//! small wrappers of the raw module API (`ffi`).
//!
//! Imports point one way, from the entry point down:
//! - `registration` (entry) -> `commands`, `expiry` (the timer),
//!   `key_events` (RENAME, MOVE, COPY);
//! - those -> `commit` (the one write path, lazy expiry included);
//! - `commit` -> `datatype` (its callbacks' bodies: `sale_callbacks`),
//!   `expiry_registry` (which sales have holds, and the
//!   load, SWAPDB and slot-migration hooks), `sales` (the list of sales),
//!   `stream`, `stats`, `warn`;
//! - at the bottom: `node` (clock, whether this node decides), `reply`,
//!   `load_args`, `command_info`, and `ffi`, the one room where the raw
//!   module API is called (every file above reaches the server through it).

pub mod command_info;
pub mod commands;
pub mod commit;
pub mod datatype;
pub mod expiry;
pub mod expiry_registry;
pub mod ffi;
pub mod key_events;
pub mod load_args;
pub mod node;
pub mod reply;
pub mod sale_callbacks;
pub mod sales;
pub mod stats;
pub mod stream;
pub mod warn;

#[cfg(not(test))]
mod registration;
