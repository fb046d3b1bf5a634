//! A RESERVE decided and not applied yet: what `Sale::accept_reserve`
//! returns and `Sale::add_record` applies.

use crate::rules::buckets::Take;
use crate::rules::reservation::{NewRecord, Reservation, State};

use super::records::NewId;

/// A RESERVE the sale accepted, not applied yet: `add_record(a.as_new())`
/// applies it, on the master as a replayed PENDING effect does. Borrowed
/// and inline, so accepting allocates nothing unless the take borrows from
/// several buckets.
#[derive(Debug)]
pub struct Accepted<'a> {
    pub(super) id: AcceptedId<'a>,
    pub user: &'a [u8],
    pub qty: u64,
    pub created_ms: u64,
    pub deadline_ms: u64,
    pub(super) takes: Takes,
    /// `user`'s hash in this sale's buyer index (`Records::hash`), made
    /// for the LIMIT check and used again when the record joins.
    pub(super) user_hash: u64,
}

/// A client's REQID, borrowed, or the generated id, inline.
#[derive(Debug)]
pub(super) enum AcceptedId<'a> {
    Client(&'a [u8]),
    Generated(NewId),
}

/// Where an accepted reservation's units come from.
#[derive(Debug)]
pub(super) enum Takes {
    One([Take; 1]),
    Many(Vec<Take>),
}

impl Accepted<'_> {
    pub fn id(&self) -> &[u8] {
        match &self.id {
            AcceptedId::Client(id) => id,
            AcceptedId::Generated(id) => id.text.as_bytes(),
        }
    }

    pub fn takes(&self) -> &[Take] {
        match &self.takes {
            Takes::One(one) => one,
            Takes::Many(many) => many,
        }
    }

    pub fn as_new(&self) -> NewRecord<'_> {
        NewRecord {
            id: self.id(),
            user: self.user,
            qty: self.qty,
            state: State::Pending,
            created_ms: self.created_ms,
            deadline_ms: self.deadline_ms,
            takes: self.takes(),
        }
    }

    /// The record this RESERVE's generated id was made for (see `NewId`).
    pub(super) fn fresh(&self) -> Option<u32> {
        match &self.id {
            AcceptedId::Client(_) => None,
            AcceptedId::Generated(id) => id.fresh,
        }
    }

    /// What deciding this RESERVE found out, for `Sale::add_accepted`.
    pub(super) fn known(&self) -> Known {
        Known { fresh: self.fresh(), user_hash: Some(self.user_hash) }
    }

    pub fn to_reservation(&self) -> Reservation {
        self.as_new().to_owned()
    }
}

/// What the master knows of a record it decided itself, so that adding it
/// does not work it out again: the record its generated id was made for
/// (`NewId::fresh`) and its user's hash. A replayed or loaded record comes
/// with `Known::NOTHING`.
#[derive(Clone, Copy)]
pub(super) struct Known {
    pub(super) fresh: Option<u32>,
    pub(super) user_hash: Option<u64>,
}

impl Known {
    pub(super) const NOTHING: Known = Known { fresh: None, user_hash: None };
}
