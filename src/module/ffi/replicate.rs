//! RM_Replicate: the effects the module sends its replicas and the AOF.

use std::ffi::CStr;
use std::os::raw::c_char;

use redis_module::{raw, Context};

use super::args::bytes_of;
use super::strings::{constant, ModuleStrings};

/// RM_Replicate of `cmd key args...`: the key string is passed as it is,
/// the other arguments are copied once into module strings.
pub fn replicate<T: AsRef<[u8]>>(ctx: &Context, cmd: &CStr, key: *mut raw::RedisModuleString, args: &[T]) {
    let mut argv = ModuleStrings::of(args);
    let (ptr, len) = (argv.0.as_mut_ptr(), argv.0.len());
    unsafe { raw::RedisModule_Replicate.unwrap()(ctx.ctx, cmd.as_ptr(), c"sv".as_ptr(), key, ptr, len) };
}

/// An argument to replicate: bytes (Redis gets a copy) or a string Redis
/// already has, a command's own argument, passed on by reference.
#[derive(Clone, Copy)]
pub enum Arg<'a> {
    Bytes(&'a [u8]),
    Str(*mut raw::RedisModuleString),
}

/// RM_Replicate of `cmd key op args...` straight from the arguments, with
/// no vector built: the short effect forms on the hot paths (PENDING with
/// or without its stream entry, RELEASE, CONFIRM), whose op is one of the
/// kept words (`strings::constant`). Bytes are copied by Redis (`b`); a
/// string Redis already has (RESERVE's user, second) is only referenced
/// (`s`). Other shapes take the general path.
pub fn replicate_args(ctx: &Context, cmd: &CStr, key: *mut raw::RedisModuleString, op: &CStr, args: &[Arg]) {
    use Arg::{Bytes as B, Str as S};
    let Some(w) = constant(op.to_bytes()) else {
        return replicate_general(ctx, cmd, key, op, args);
    };
    let f = unsafe { raw::RedisModule_Replicate.unwrap() };
    let (c, k) = (ctx.ctx, cmd.as_ptr());
    let p = |a: &[u8]| a.as_ptr().cast::<c_char>();
    // The status RM_Replicate answers is not checked: a command it does
    // not know is a programming error the tests catch.
    let _ = unsafe {
        match *args {
            [B(a)] => f(c, k, c"ssb".as_ptr(), key, w, p(a), a.len()),
            [B(a), B(u), B(n)] => f(c, k, c"ssbbb".as_ptr(), key, w, p(a), a.len(), p(u), u.len(), p(n), n.len()),
            [B(a), S(u), B(n)] => f(c, k, c"ssbsb".as_ptr(), key, w, p(a), a.len(), u, p(n), n.len()),
            [B(a), B(u), B(n), B(e)] => f(c, k, c"ssbbbb".as_ptr(), key, w, p(a), a.len(), p(u), u.len(), p(n), n.len(), p(e), e.len()),
            [B(a), S(u), B(n), B(e)] => f(c, k, c"ssbsbb".as_ptr(), key, w, p(a), a.len(), u, p(n), n.len(), p(e), e.len()),
            [B(a), B(u), B(n), B(e), B(l)] => {
                f(c, k, c"ssbbbbb".as_ptr(), key, w, p(a), a.len(), p(u), u.len(), p(n), n.len(), p(e), e.len(), p(l), l.len())
            }
            [B(a), S(u), B(n), B(e), B(l)] => {
                f(c, k, c"ssbsbbb".as_ptr(), key, w, p(a), a.len(), u, p(n), n.len(), p(e), e.len(), p(l), l.len())
            }
            _ => return replicate_general(ctx, cmd, key, op, args),
        }
    };
}

fn replicate_general(ctx: &Context, cmd: &CStr, key: *mut raw::RedisModuleString, op: &CStr, args: &[Arg]) {
    let mut all: Vec<&[u8]> = vec![op.to_bytes()];
    all.extend(args.iter().map(|a| match *a {
        Arg::Bytes(b) => b,
        Arg::Str(s) => bytes_of(s),
    }));
    replicate(ctx, cmd, key, &all);
}
