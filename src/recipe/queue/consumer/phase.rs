//! The consumer's states as types: what is known of the queue's listing ([`View`]), the
//! side directory ([`Side`]), our marker ([`Marker`]), the batch being claimed
//! ([`Batch`], at most once its [`Multi`], at least once its claims), the settlements
//! of held items ([`Settling`]), and the consumer's life ([`Life`]).
//!
//! | before (flags of `Consumer`) | after |
//! | --- | --- |
//! | `listing`, `cursor`, `listing_valid`, `listing_in_flight`, `waiting_watch` | [`View`]: `Stale`, `Listing { watched }`, `Waiting`, `Held { names, cursor }` |
//! | `claims_listing`, `claims_blocked`, `claims_watched`, `claims_fired` | [`Side`]: `claims`, `blocked`, [`SideWatch`] `Off`/`Set`/`Fired` |
//! | `marker_present`, `applied` | [`Marker`]: `Absent`, `Present(version)` |
//! | `reading_marker` | the `ReadMarker` request in the outbox |
//! | `need_parents`, `parent_rounds`, `parent_error` | [`Parents`] |
//! | `closing`, `deleting_marker`, `ended` | [`Life`]: `Open`, `Closing { deleting }`, `Ended` |
//! | `Batch::{doubt, send_claim}`, `Batch::claimed` | [`Mode`]: `Once(Multi)` (`Read`, `Send`, `Doubt`, `Taken`) or `Claims(ours)` |
//! | `settling: (String, Settle, SettleState)` | [`Settling`] |

use alloc::string::String;
use alloc::vec::Vec;
use bytes::Bytes;

use crate::error::Error;
use crate::time::Instant;

pub(super) use super::super::state::{Life, Marker, Parents};

/// Names one take.
pub type TakeId = u64;

/// One item of the batch being claimed.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(super) enum Slot {
    /// At least once: create its claim.
    ToClaim,
    /// A request about it is in flight.
    Busy,
    /// At least once: our claim's create may have landed: check its owner.
    Check,
    /// Claimed (at least once) or present (at most once); data wanted.
    NeedData,
    /// Claimed / present, with its data.
    Ready(Bytes),
    /// Taken by someone else, gone, or failed.
    Skip,
}

/// At most once: where the batch's take (one `multi`) stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(super) enum Multi {
    /// The items are being read, or the `multi` is on the wire.
    Read,
    /// The `multi` is to be sent (again).
    Send,
    /// The `multi` may have been applied: our marker's version tells.
    Doubt,
    /// Applied: the items are ours, to deliver.
    Taken,
}

/// How the batch's items become ours.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(super) enum Mode {
    /// At most once: one `multi` takes them all.
    Once(Multi),
    /// At least once: which slots' claims are ours.
    Claims(Vec<bool>),
}

/// The batch being claimed for take `take`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(super) struct Batch {
    pub take: TakeId,
    pub names: Vec<String>,
    pub slots: Vec<Slot>,
    pub mode: Mode,
    pub error: Option<Error>,
}

impl Batch {
    /// At least once: is slot `i`'s claim ours? (Never at most once.)
    pub fn claimed(&self, i: usize) -> bool {
        match &self.mode {
            Mode::Once(_) => false,
            Mode::Claims(c) => c.get(i).copied().unwrap_or(false),
        }
    }

    /// At least once: marks slot `i`'s claim ours (or not).
    pub fn set_claimed(&mut self, i: usize, ours: bool) {
        if let Mode::Claims(c) = &mut self.mode {
            if let Some(c) = c.get_mut(i) {
                *c = ours;
            }
        }
    }

    /// At most once: where the take stands (`None` at least once).
    pub fn multi(&self) -> Option<Multi> {
        match self.mode {
            Mode::Once(m) => Some(m),
            Mode::Claims(_) => None,
        }
    }

    /// At most once: the take moves to `m`.
    pub fn set_multi(&mut self, m: Multi) {
        if let Mode::Once(x) = &mut self.mode {
            *x = m;
        }
    }

    /// Every slot is skipped and the batch fails with `error`.
    pub fn fail(&mut self, error: Error) {
        for s in self.slots.iter_mut() {
            *s = Slot::Skip;
        }
        self.error = Some(error);
    }
}

/// What is known of the queue directory's listing.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(super) enum View {
    /// No listing held: list when a take wants items.
    Stale,
    /// A listing is on the wire; `watched`: it set a watch that has not fired (a
    /// notification meanwhile, in a priority queue, clears it).
    Listing { watched: bool },
    /// The last listing was empty (or held only claimed items) and set a watch: wait
    /// for it.
    Waiting,
    /// A listing, worked through from `cursor`.
    Held { names: Vec<String>, cursor: usize },
}

impl View {
    /// A listing is on the wire.
    pub fn in_flight(&self) -> bool {
        matches!(self, View::Listing { .. })
    }

    /// Waiting on a watch (set by the listing on the wire, or by the last one).
    pub fn watching(&self) -> bool {
        matches!(self, View::Listing { watched: true } | View::Waiting)
    }
}

/// The side directory's watch, at least once.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(super) enum SideWatch {
    /// The claims listing on the wire (or the last) set none.
    Off,
    /// The claims listing set one, which has not fired.
    Set,
    /// The side directory changed since the claims were listed.
    Fired,
}

/// At least once: what the last listing of the side directory found.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(super) struct Side {
    /// The claims listed with the queue (their items are skipped).
    pub claims: Vec<String>,
    /// The last listing found items, all claimed by others: waiting then watches the
    /// side directory too (a claim that goes changes only that).
    pub blocked: bool,
    pub watch: SideWatch,
}

/// How a held item is settled.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(super) enum Settle {
    Complete,
    Release,
}

/// Where a settlement stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(super) enum SettleState {
    /// To send.
    Send,
    /// In flight.
    Busy,
    /// A complete or release whose reply was lost: check our claim (gone, or another
    /// session's, iff it was applied).
    Check,
}

/// A held item being completed or released.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(super) struct Settling {
    pub item: String,
    pub how: Settle,
    pub state: SettleState,
}

/// One take waiting.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(super) struct Take {
    pub id: TakeId,
    pub max: usize,
    pub deadline: Option<Instant>,
    /// Had one listing or batch (a past deadline still gets one look).
    pub looked: bool,
}
