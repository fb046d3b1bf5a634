//! What a sale's changes answer: a refused RESERVE, the outcome of a
//! RELEASE or CONFIRM, a refused transfer, an effect that does not fit.
//!
//! Apart from `sale` because `transfers` answers with them too, and
//! `sale` imports `transfers`: here both import them without a circle.
//! `sale` re-exports them, so their outside paths stay `rules::sale::*`.

/// Why a RESERVE changes nothing.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Refusal {
    Duplicate(Box<[u8]>),
    NotStarted,
    Ended,
    /// Carries the user's latest live reservation id.
    Limit(Option<Box<[u8]>>),
    SoldOut,
}

/// Why an ENTER adds no entrant (statuses, then the REQID errors).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EnterRefusal {
    /// Not a draw sale: an error.
    NotDraw,
    AlreadyEntered,
    /// Another entrant gave this REQID: an error.
    ReqidOfEntrant,
    /// A reservation has this id: an error.
    ReqidOfReservation,
    Drawn,
    NotStarted,
    Ended,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReleaseOutcome {
    Released,
    AlreadyReleased,
    Confirmed,
    NotFound,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ConfirmOutcome {
    Confirmed,
    AlreadyConfirmed,
    Released,
    NotFound,
}

/// Why a SEND or RECV is refused before anything is decided.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TransferRefusal {
    /// A plain sale: it was not created as a part of a split sale.
    NotSplit,
    /// The call names another round than the key's.
    StaleRound,
    /// The peer is not one the key declared.
    UnknownPeer,
    /// A draw part that has begun drawing: its stock is the draw's.
    Drawing,
    /// SEND: this key's counter for the peer was counted for another
    /// incarnation of it (the peer was deleted and re-created).
    PeerRecreated,
    /// RECV: the total was counted for another incarnation of this key.
    OtherIncarnation,
}

/// A change that does not fit the state it is applied to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EffectError(pub &'static str);
