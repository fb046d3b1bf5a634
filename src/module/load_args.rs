//! Module arguments (`--loadmodule libredis_seckill.so [NAME value ...]`).
//!
//! ALLOW-CLIENT-EFFECTS yes|no (default no): whether a client may send
//! SECKILL.EFFECT, to replay an AOF's effects through a client (for example
//! `redis-cli --pipe`). Off, the command runs only from the master link and
//! while loading, since an effect states its own ids, quantities and times.

use std::sync::atomic::{AtomicBool, Ordering};

static CLIENT_EFFECTS: AtomicBool = AtomicBool::new(false);

pub fn client_effects() -> bool {
    CLIENT_EFFECTS.load(Ordering::Relaxed)
}

/// Applies the module's arguments; an unknown or malformed one is an error
/// (the module then refuses to load rather than run with a setting the
/// operator did not get).
pub fn apply(args: &[&[u8]]) -> Result<(), String> {
    let mut rest = args;
    while let [name, tail @ ..] = rest {
        let [value, tail @ ..] = tail else {
            return Err(format!("module argument {} needs a value", String::from_utf8_lossy(name)));
        };
        if !name.eq_ignore_ascii_case(b"ALLOW-CLIENT-EFFECTS") {
            return Err(format!("unknown module argument {}", String::from_utf8_lossy(name)));
        }
        let on = match value.to_ascii_lowercase().as_slice() {
            b"yes" => true,
            b"no" => false,
            _ => return Err("ALLOW-CLIENT-EFFECTS takes yes or no".into()),
        };
        CLIENT_EFFECTS.store(on, Ordering::Relaxed);
        rest = tail;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn module_arguments() {
        assert_eq!(apply(&[]), Ok(()));
        assert!(!client_effects());
        assert_eq!(apply(&[b"allow-client-effects", b"YES"]), Ok(()));
        assert!(client_effects());
        assert_eq!(apply(&[b"ALLOW-CLIENT-EFFECTS", b"no"]), Ok(()));
        assert!(!client_effects());
        assert!(apply(&[b"ALLOW-CLIENT-EFFECTS"]).is_err());
        assert!(apply(&[b"ALLOW-CLIENT-EFFECTS", b"maybe"]).is_err());
        assert!(apply(&[b"NOPE", b"yes"]).is_err());
    }
}
