//! The FFI room: every `unsafe` block and every raw module API call of the
//! crate is in this folder, each behind a small safe function or type.
//! The rest of `module/` calls these; `rules/` and `wire/` never reach the
//! server at all (they build without `redis-module`: `cargo check
//! --no-default-features`).
//!
//! Nothing here knows about sales: the data type's callbacks are generic
//! (`type_methods::TypeValue`), the events call plain function pointers,
//! so imports point into this folder and never out of it (except `args`
//! and `strings`, which the others share).

pub mod args;
pub mod clock;
pub mod command_info;
pub mod events;
pub mod info;
pub mod keyspace;
pub mod replicate;
pub mod reply;
pub mod stream_key;
pub mod strings;
pub mod type_methods;
