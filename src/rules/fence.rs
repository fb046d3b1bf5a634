//! The fence (`INIT ... FENCE`, `SECKILL.UNFENCE`): a sale that records
//! the replication id of the server it was created (or last unfenced) on,
//! and sells only where the server's current id is that one. A promoted
//! replica, a restarted master and a master that made its first
//! replication backlog all have a new id, and their data may lack writes
//! the old one acknowledged: the sale waits for the order ledger to be
//! applied (RECONCILE ... APPLY) and for UNFENCE.
//!
//! The current id is always an argument here: the module keeps it cached
//! (refreshed on the server events that change it), replicas and AOF
//! replay get the recorded one inside the effect and never read their own.

/// A server's replication id (`master_replid` of `INFO replication`):
/// 40 lower-case hex digits. Made only by `parse`, so it cannot hold
/// anything else.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct ReplId([u8; ReplId::LEN]);

impl ReplId {
    pub const LEN: usize = 40;
    /// Forty zeros (what INFO shows as `master_replid2` when there is none).
    pub const ZERO: ReplId = ReplId([b'0'; ReplId::LEN]);

    /// `bytes` as an id, if they are 40 lower-case hex digits.
    pub fn parse(bytes: &[u8]) -> Option<ReplId> {
        let id: [u8; ReplId::LEN] = bytes.try_into().ok()?;
        id.iter().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(b)).then_some(ReplId(id))
    }

    pub fn as_bytes(&self) -> &[u8] {
        &self.0
    }
}

impl std::fmt::Debug for ReplId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ReplId({})", String::from_utf8_lossy(&self.0))
    }
}

/// Whether a sale that recorded `recorded` (`None`: not created with
/// FENCE) is fenced on a server whose id `current` gives. `current` is
/// called only for a FENCE sale: a plain sale pays one `Option` check.
#[inline(always)]
pub fn fenced(recorded: Option<&ReplId>, current: impl FnOnce() -> ReplId) -> bool {
    match recorded {
        None => false,
        Some(r) => differs(r, current),
    }
}

/// Out of line, so that a command's hot path keeps only the `Option`
/// check (inlined, the id's read and compare made RESERVE's write closure
/// too big to inline: about 45 more instructions per plain RESERVE under
/// `bench/callgrind.sh`).
#[cold]
#[inline(never)]
fn differs(recorded: &ReplId, current: impl FnOnce() -> ReplId) -> bool {
    *recorded != current()
}

/// What UNFENCE answers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UnfenceOutcome {
    /// The sale was fenced; it records the current id now.
    Unfenced,
    /// Not fenced, or not a FENCE sale: nothing changes.
    NotFenced,
}

impl UnfenceOutcome {
    pub fn word(self) -> &'static std::ffi::CStr {
        match self {
            UnfenceOutcome::Unfenced => c"UNFENCED",
            UnfenceOutcome::NotFenced => c"NOT_FENCED",
        }
    }
}

#[cfg(test)]
pub(crate) fn id(fill: u8) -> ReplId {
    ReplId::parse(&[fill; ReplId::LEN]).expect("a hex digit")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_forty_lower_case_hex_digits_are_an_id() {
        let good = b"0123456789abcdef0123456789abcdef01234567";
        assert_eq!(ReplId::parse(good).map(|r| r.as_bytes().to_vec()), Some(good.to_vec()));
        for bad in [
            &good[..39],
            b"0123456789abcdef0123456789abcdef012345678",
            b"0123456789ABCDEF0123456789abcdef01234567",
            b"g123456789abcdef0123456789abcdef01234567",
            b"",
        ] {
            assert_eq!(ReplId::parse(bad), None, "{}", String::from_utf8_lossy(bad));
        }
    }

    #[test]
    fn fenced_only_with_a_recorded_id_that_differs() {
        let calls = std::cell::Cell::new(0);
        let current = || {
            calls.set(calls.get() + 1);
            id(b'a')
        };
        assert!(!fenced(None, current));
        assert_eq!(calls.get(), 0, "a plain sale never asks for the current id");
        assert!(!fenced(Some(&id(b'a')), current));
        assert!(fenced(Some(&id(b'b')), current));
        assert_eq!(calls.get(), 2);
    }
}
