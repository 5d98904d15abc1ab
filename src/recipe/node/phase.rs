//! The node recipes' states as types.
//!
//! [`OwnedNode`](super::OwnedNode):
//!
//! | before (fields of `OwnedNode`) | after |
//! | --- | --- |
//! | `phase: Idle/Active/Leaving/Done`, `set_pending`, `finish` | `Phase` (in `owned.rs`: it carries the final event): `Idle`, `Active { set_pending }`, `Leaving { finish }`, `Done` |
//! | `live`, `session_id`, `waiting` | `link` ([`watcher::Link`](crate::recipe::watcher::Link): `Down`, `Up`, `BackingOff`), as the one-shot recipes'; the id is the kit's |
//! | `present`, `suspended`, `created_once` | [`Presence`]: `Unseen`, `Present`, `Suspended`, `Lost` |
//! | `known` | [`Known`] (unchanged) |
//! | `parents`, `sync_next` | kept: independent of the phase |
//!
//! [`NodeWatch`](super::NodeWatch):
//!
//! | before (fields of `NodeWatch`) | after |
//! | --- | --- |
//! | `running`, `done` | [`Run`]: `Idle`, `Running`, `Done` |
//! | `live`, `suspended` | [`Link`]: `Down`, `Up`, `Suspended`, `Gone` |
//! | `seen`, `existed` | [`Seen`]: `Nothing`, `Appeared`, `Missing`, `Version { .. }` |
//! | `need_read`, `need_exists`, `sync_next`, `waiting` | kept: independent of each other |

/// What an [`OwnedNode`](super::OwnedNode) has reported of its node.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(super) enum Presence {
    /// Never reported `Created`.
    Unseen,
    /// `Created` (or `Reconnected`) reported, no `Lost` or `Suspended` since.
    Present,
    /// In place, but the connection dropped (`Suspended` reported).
    Suspended,
    /// Created once, `Lost` reported since (or ended).
    Lost,
}

impl Presence {
    /// `Created` reported and no `Lost` since (suspended or not).
    pub fn held(self) -> bool {
        matches!(self, Presence::Present | Presence::Suspended)
    }
}

/// What we know of the node at our path.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(super) enum Known {
    /// Read it to find out.
    Unknown,
    /// Not there.
    Absent,
    /// Our create is in flight.
    Creating,
    /// Ours.
    Ours,
    /// Another session's (its owner).
    Other(i64),
}

/// Whether a machine that runs once started runs ([`NodeWatch`](super::NodeWatch),
/// the naming recipe's `Resolve`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Run {
    /// Before `start`.
    Idle,
    /// Following.
    Running,
    /// Ended.
    Done,
}

/// The session as a [`NodeWatch`](super::NodeWatch) heard of it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(super) enum Link {
    /// No session (before the first `Connected`, or after an expiry while idle).
    Down,
    /// A session is up.
    Up,
    /// The connection dropped while following: `Suspended` reported; the session may
    /// come back.
    Suspended,
    /// No session while following (it expired, or none came yet): `Suspended`
    /// reported, waiting for a new one.
    Gone,
}

impl Link {
    /// A session is up (possibly disconnected): requests may be sent.
    pub fn live(self) -> bool {
        matches!(self, Link::Up | Link::Suspended)
    }

    /// `Suspended` reported and no `Reconnected` since.
    pub fn suspended(self) -> bool {
        matches!(self, Link::Suspended | Link::Gone)
    }
}

/// What a [`NodeWatch`](super::NodeWatch) has reported of its node.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(super) enum Seen {
    /// Nothing yet.
    Nothing,
    /// Not a version yet, but the node existed since the last event (an `exists` found
    /// it, or it was created): a `NoNode` now means it came and went.
    Appeared,
    /// Reported missing.
    Missing,
    /// This version reported.
    Version {
        czxid: i64,
        mzxid: i64,
        version: i32,
    },
}
