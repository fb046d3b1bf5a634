//! Module strings the crate makes itself: the words passed on every call,
//! kept for the life of the module, and the ones made for one call.

use std::os::raw::c_char;
use std::ptr::null_mut;

use redis_module::raw;

/// Words passed to Redis on every call (stream field names, event words,
/// the effect names of the hot paths), made into module strings once and
/// kept for the life of the module: Redis only adds references to them,
/// so passing one allocates nothing.
const WORDS: [&[u8]; 11] =
    [b"event", b"rid", b"user", b"qty", b"reserved", b"released", b"confirmed", b"expired", b"PENDING", b"RELEASE", b"CONFIRM"];

struct Constants([*mut raw::RedisModuleString; WORDS.len()]);

// The strings are never changed and only used on Redis's main thread.
unsafe impl Send for Constants {}
unsafe impl Sync for Constants {}

static CONSTANTS: std::sync::OnceLock<Constants> = std::sync::OnceLock::new();

fn create(bytes: &[u8]) -> *mut raw::RedisModuleString {
    unsafe { raw::RedisModule_CreateString.unwrap()(null_mut(), bytes.as_ptr().cast::<c_char>(), bytes.len()) }
}

/// The kept module string for `word`, if it is one of `WORDS`.
pub fn constant(word: &[u8]) -> Option<*mut raw::RedisModuleString> {
    let c = CONSTANTS.get_or_init(|| Constants(WORDS.map(create)));
    WORDS.iter().position(|&w| w == word).map(|i| c.0[i])
}

/// Module strings made for one call (no context, so never auto-freed) and
/// freed when dropped.
#[derive(Default)]
pub struct ModuleStrings(pub Vec<*mut raw::RedisModuleString>);

impl ModuleStrings {
    pub fn with_capacity(n: usize) -> ModuleStrings {
        ModuleStrings(Vec::with_capacity(n))
    }

    pub fn of<T: AsRef<[u8]>>(args: &[T]) -> ModuleStrings {
        let mut strings = ModuleStrings::with_capacity(args.len());
        for a in args {
            strings.add(a.as_ref());
        }
        strings
    }

    pub fn add(&mut self, bytes: &[u8]) -> *mut raw::RedisModuleString {
        let s = create(bytes);
        self.0.push(s);
        s
    }

    /// A constant if `bytes` is one, else a new string freed with these.
    pub fn word_or_add(&mut self, bytes: &[u8]) -> *mut raw::RedisModuleString {
        constant(bytes).unwrap_or_else(|| self.add(bytes))
    }
}

impl Drop for ModuleStrings {
    fn drop(&mut self) {
        for &s in &self.0 {
            unsafe { raw::RedisModule_FreeString.unwrap()(null_mut(), s) };
        }
    }
}

/// A module string made for as long as its owner lives (a stream key's
/// name), freed when dropped.
pub struct OwnedString(*mut raw::RedisModuleString);

impl OwnedString {
    pub fn new(bytes: &[u8]) -> OwnedString {
        OwnedString(create(bytes))
    }

    pub fn ptr(&self) -> *mut raw::RedisModuleString {
        self.0
    }
}

impl Drop for OwnedString {
    fn drop(&mut self) {
        unsafe { raw::RedisModule_FreeString.unwrap()(null_mut(), self.0) };
    }
}
