//! The `seckill--` data type: one sale per key. What each callback does
//! with a sale is `sale_callbacks` (RDB load and save, AOF rewrite, the
//! list of sales, memory usage); the callbacks as Redis calls them are
//! `ffi::type_methods`.

use redis_module::native_types::RedisType;

use crate::module::ffi::type_methods;
use crate::rules::sale::Sale;

/// Bumped with the persisted format; `encoding` reads every older version.
pub const ENCODING_VERSION: i32 = 5;

pub static SALE_TYPE: RedisType = RedisType::new("seckill--", ENCODING_VERSION, type_methods::methods::<Sale>());
