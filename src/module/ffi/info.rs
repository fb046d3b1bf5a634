//! The module's `INFO` section: a callback Redis calls with an info
//! context, and the fields it adds.

use std::sync::OnceLock;

use redis_module::{raw, Context};

/// The section being written.
pub struct InfoSection(*mut raw::RedisModuleInfoCtx);

impl InfoSection {
    pub fn field(&self, name: &str, value: u64) {
        raw::add_info_field_long_long(self.0, name, i64::try_from(value).unwrap_or(i64::MAX));
    }
}

/// What fills the section.
type Fill = fn(&InfoSection);

/// Calls `fill` with the section `name` whenever INFO asks for the
/// module's sections (Redis prefixes each field with the module's name).
pub fn register_info(ctx: &Context, name: &'static str, fill: Fill) -> bool {
    static SECTION: OnceLock<(&'static str, Fill)> = OnceLock::new();
    extern "C" fn trampoline(info: *mut raw::RedisModuleInfoCtx, _for_crash_report: i32) {
        if let Some(&(name, fill)) = SECTION.get() {
            if raw::add_info_section(info, Some(name)) == raw::Status::Ok {
                // Nothing may unwind into the server.
                let _ = std::panic::catch_unwind(|| fill(&InfoSection(info)));
            }
        }
    }
    let _ = SECTION.set((name, fill));
    raw::register_info_function(ctx.ctx, Some(trampoline)) == raw::Status::Ok
}
