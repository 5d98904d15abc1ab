//! The double barrier's states as types: where a participant stands ([`Stage`]), each
//! stage with the data that exists only in it, and what is to be sent ([`Need`]).
//!
//! | stage | what it carries |
//! | --- | --- |
//! | `Idle` | nothing: `enter` not called yet |
//! | `Entering` | what we know of our node and of `ready` ([`Entering`]: our create answered, a creation watch on `ready` armed, `ready` created after our node) |
//! | `Entered` | nothing: passed enter, `leave` not called yet |
//! | `Leaving` | what the last listing said ([`Leaving`]: `ready` still there, the member we wait for) |
//! | `Stopping` | nothing: a deadline passed, the enter failed or the owner went away; our node is being removed |
//! | `Done` | nothing |
//!
//! What stays on the participant spans the stages: our node deleted (enter's failure,
//! leave and the stop all ask), `b` kept (its deletion refused for good), the next read
//! synced, `Suspended` told, the deadline of the call in progress.

use alloc::string::String;
use core::ops::{BitOr, BitOrAssign};

/// Where a participant stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Phase {
    /// `enter` not called yet.
    Idle,
    /// Entering: our node being created, or waiting for `ready`.
    Entering,
    /// Passed enter; `leave` not called yet.
    Entered,
    /// Leaving.
    Leaving,
    /// A deadline passed or the owner went away: our node is being removed.
    Stopping,
    /// Finished.
    Done,
}

/// What each request of the participant is for.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(super) enum Purpose {
    Parent(String),
    /// createContainer of `b` in front of our create (its answer does not matter: the
    /// create's does).
    Dir,
    Sync,
    ReadyExists,
    Create,
    List,
    ReadyCreate,
    /// `exists(b/<id>)` once `ready` was created: is our node still there?
    Confirm,
    Wait(String),
    DeleteOwn,
    Final {
        with_ready: bool,
        with_dir: bool,
    },
    Cleanup {
        with_dir: bool,
    },
    StopDelete,
}

/// What must be (re)sent; `drive` sends it when the session allows. Each stage has its
/// own bits ([`Need::within`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub(super) struct Need(u16);

/// exists(ready, watch) + create + list.
pub(super) const ENTER: Need = Need(1);
/// The ancestors of `b` first (with `ENTER`).
pub(super) const PARENTS: Need = Need(2);
/// exists(ready, watch) + list.
pub(super) const ARM: Need = Need(4);
/// A listing of `b`.
pub(super) const LIST: Need = Need(8);
/// multi(check(b/<id>), create(b/ready)).
pub(super) const READY_CREATE: Need = Need(16);
/// exists(b/<watched>, watch) in leave.
pub(super) const WAIT: Need = Need(32);
/// delete(b/<id>) in leave.
pub(super) const DELETE_OWN: Need = Need(64);
/// The last leaver's multi.
pub(super) const FINAL: Need = Need(128);
/// A crashed last leaver's `ready` (and `b`) removed.
pub(super) const CLEANUP: Need = Need(256);
/// delete(b/<id>) when stopping.
pub(super) const STOP_DELETE: Need = Need(512);
/// exists(b/<id>) before `Entered`.
pub(super) const CONFIRM: Need = Need(1024);

impl Need {
    /// Nothing.
    pub const NONE: Need = Need(0);

    /// Any of `n`?
    pub fn has(self, n: Need) -> bool {
        self.0 & n.0 != 0
    }

    /// Without `n`.
    pub fn remove(&mut self, n: Need) {
        self.0 &= !n.0;
    }

    pub fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// Is every bit of `self` one that `phase` sends?
    pub fn within(self, phase: Phase) -> bool {
        let allowed = match phase {
            Phase::Entering => ENTER | PARENTS | ARM | LIST | READY_CREATE | CONFIRM,
            Phase::Leaving => DELETE_OWN | WAIT | FINAL | CLEANUP | LIST,
            Phase::Stopping => STOP_DELETE,
            Phase::Idle | Phase::Entered | Phase::Done => Need::NONE,
        };
        self.0 & !allowed.0 == 0
    }
}

impl BitOr for Need {
    type Output = Need;
    fn bitor(self, rhs: Need) -> Need {
        Need(self.0 | rhs.0)
    }
}

impl BitOrAssign for Need {
    fn bitor_assign(&mut self, rhs: Need) {
        self.0 |= rhs.0;
    }
}

/// Where a participant stands, with what exists only there. See the
/// [module docs](self).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(super) enum Stage {
    Idle,
    Entering(Entering),
    Entered,
    Leaving(Leaving),
    Stopping,
    Done,
}

impl Stage {
    /// The public summary.
    pub fn phase(&self) -> Phase {
        match self {
            Stage::Idle => Phase::Idle,
            Stage::Entering(_) => Phase::Entering,
            Stage::Entered => Phase::Entered,
            Stage::Leaving(_) => Phase::Leaving,
            Stage::Stopping => Phase::Stopping,
            Stage::Done => Phase::Done,
        }
    }
}

/// Entering: what we know of our node and of `ready`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub(super) struct Entering {
    /// Our create was answered (OK or `NodeExists`): our node exists.
    pub created: bool,
    /// A creation watch on `ready` is armed (the last `exists` said it is absent).
    pub ready_armed: bool,
    /// `ready` was created after our node (heard, or made by us); we enter once an
    /// `exists` of our node, answered after that, finds it.
    pub ready_seen: bool,
}

/// Leaving: what the last listing said.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub(super) struct Leaving {
    /// The last listing showed `ready` (delete it with the last node).
    pub saw_ready: bool,
    /// The member we wait for.
    pub watching: Option<String>,
}
