//! A draw sale's entrant: what became of it (`EntrantResult`), its plain
//! form (`EntrantRec`) and the 16 bytes `draw_state` keeps per entrant.

use crate::rules::config::MAX_TOTAL;

/// What became of an entrant (ENTRANTS' `result`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum EntrantResult {
    /// Not a reservation: not drawn yet, or on the waitlist.
    Entered,
    /// Won in the draw.
    Drawn,
    /// Won from the waitlist.
    Promoted,
}

impl EntrantResult {
    pub fn word(self) -> &'static str {
        match self {
            EntrantResult::Entered => "entered",
            EntrantResult::Drawn => "drawn",
            EntrantResult::Promoted => "promoted",
        }
    }

    pub fn code(self) -> u8 {
        match self {
            EntrantResult::Entered => 0,
            EntrantResult::Drawn => 1,
            EntrantResult::Promoted => 2,
        }
    }

    pub fn from_code(code: u64) -> Option<EntrantResult> {
        Some(match code {
            0 => EntrantResult::Entered,
            1 => EntrantResult::Drawn,
            2 => EntrantResult::Promoted,
            _ => return None,
        })
    }
}

/// One entrant as a plain value (effects, RDB, tests).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct EntrantRec {
    pub user: Box<[u8]>,
    pub qty: u64,
    pub reqid: Option<Box<[u8]>>,
    pub result: EntrantResult,
}

/// `Entrant::reqid` when the entrant gave none.
pub(super) const NO_REQID: u32 = u32::MAX;
const QTY_MASK: u64 = (1 << 50) - 1;
const RESULT_SHIFT: u32 = 62;
const _: () = assert!(MAX_TOTAL <= QTY_MASK && std::mem::size_of::<Entrant>() == 16);

/// One entrant, 16 bytes: quantity and result in one word, the arena
/// offsets of its user id and REQID.
#[derive(Clone, Copy, Debug)]
pub(super) struct Entrant {
    pub(super) meta: u64,
    pub(super) user: u32,
    pub(super) reqid: u32,
}

impl Entrant {
    pub(super) fn qty(&self) -> u64 {
        self.meta & QTY_MASK
    }

    pub(super) fn result(&self) -> EntrantResult {
        EntrantResult::from_code(self.meta >> RESULT_SHIFT).unwrap_or(EntrantResult::Entered)
    }

    pub(super) fn set_result(&mut self, r: EntrantResult) {
        self.meta = (self.meta & QTY_MASK) | (u64::from(r.code()) << RESULT_SHIFT);
    }

    pub(super) fn waiting(&self) -> bool {
        self.result() == EntrantResult::Entered
    }
}
