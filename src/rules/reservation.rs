//! One reservation and its state machine.

use crate::rules::buckets::Take;

/// `pending -> confirmed` and `pending -> released | expired` are the only
/// transitions a command can make; `confirmed`, `released` and `expired`
/// are final except for `RECONCILE ... APPLY`, which follows the ledger.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum State {
    Pending,
    Confirmed,
    /// Released by RELEASE or by RECONCILE.
    Released,
    /// Released because its hold ran out.
    Expired,
}

impl State {
    /// Live reservations hold stock and count against the buyer's limit.
    pub fn is_live(self) -> bool {
        matches!(self, State::Pending | State::Confirmed)
    }

    pub fn is_released(self) -> bool {
        matches!(self, State::Released | State::Expired)
    }

    /// The word clients see. An expired hold is a released reservation.
    pub fn word(self) -> &'static str {
        match self {
            State::Pending => "pending",
            State::Confirmed => "confirmed",
            State::Released | State::Expired => "released",
        }
    }

    pub fn code(self) -> u8 {
        match self {
            State::Pending => 0,
            State::Confirmed => 1,
            State::Released => 2,
            State::Expired => 3,
        }
    }

    pub fn from_code(code: u64) -> Option<State> {
        Some(match code {
            0 => State::Pending,
            1 => State::Confirmed,
            2 => State::Released,
            3 => State::Expired,
            _ => return None,
        })
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Reservation {
    pub id: Box<[u8]>,
    pub user: Box<[u8]>,
    pub qty: u64,
    pub state: State,
    pub created_ms: u64,
    /// 0 when the hold never runs out.
    pub deadline_ms: u64,
    /// Where the stock came from, while the reservation is live; empty once
    /// released (the stock went back).
    pub takes: Vec<Take>,
}

impl Reservation {
    pub fn as_new(&self) -> NewRecord<'_> {
        NewRecord {
            id: &self.id,
            user: &self.user,
            qty: self.qty,
            state: self.state,
            created_ms: self.created_ms,
            deadline_ms: self.deadline_ms,
            takes: &self.takes,
        }
    }
}

/// A reservation to add, borrowed from wherever it was read (an RDB
/// payload, an effect, a decision), so loading copies each id only once:
/// into the sale.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NewRecord<'a> {
    pub id: &'a [u8],
    pub user: &'a [u8],
    pub qty: u64,
    pub state: State,
    pub created_ms: u64,
    pub deadline_ms: u64,
    pub takes: &'a [Take],
}

impl NewRecord<'_> {
    pub fn to_owned(&self) -> Reservation {
        Reservation {
            id: self.id.into(),
            user: self.user.into(),
            qty: self.qty,
            state: self.state,
            created_ms: self.created_ms,
            deadline_ms: self.deadline_ms,
            takes: self.takes.to_vec(),
        }
    }
}

/// The longest user id or reservation id accepted.
pub const MAX_ID_LEN: usize = 256;

/// Whether `id` is a usable user or reservation id.
pub fn valid_id(id: &[u8]) -> bool {
    !id.is_empty() && id.len() <= MAX_ID_LEN
}
