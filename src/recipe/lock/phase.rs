//! The lock's states as types: where an attempt stands ([`Phase`]), each phase with the
//! data that exists only in it, and the few flags that are truly independent of it.
//!
//! | phase | what it carries |
//! | --- | --- |
//! | `Idle` | nothing: `acquire` not called yet |
//! | `Entering` | our node as far as we know it ([`Ours`]: a create to send, one in flight, one in doubt with its search, or the node), the attempt ([`Attempt`]: deadline, try-lock grace, re-entrant callers waiting) |
//! | `Waiting` | our node, how many contenders block it, the one we watch ([`Blocker`]), the contenders after ours when one blocker is left, the attempt |
//! | `Held` | our node (its czxid is the fencing token), the contenders after ours, re-entrant levels, whether the hold was handed to us, whether the holder was told `Suspended`, whether its node must be verified |
//! | `Leaving` | our node as far as we know it, why we leave ([`Finish`]; a release carries its handoff), whether the delete is to be sent |
//! | `Done` | re-entrant levels still held by guards, why the hold was lost |

use alloc::boxed::Box;
use alloc::string::String;
use alloc::vec::Vec;

use super::data::seq_number;
use crate::error::Error;
use crate::recipe::OpId;
use crate::time::Instant;

use super::types::LostReason;

/// What each request of the lock is for.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(super) enum Purpose {
    /// A container for an ancestor of the directory.
    Parent(String),
    /// create2 of our node.
    Create,
    /// getChildren to decide (paired with the create, or again); `true` if it set a
    /// children watch on the directory to stand in for the holder's own-node watch.
    List(bool),
    /// sync before a read that recovery or verification relies on.
    Sync,
    /// getChildren to find our node after a lost create reply.
    Recover,
    /// exists on a child with our prefix, found by recovery.
    Adopt(String),
    /// The watch on the blocker we wait for (a deletion watch, or a data watch).
    Blocker,
    /// getData(watch) on our own node.
    Own,
    /// exists on our own node after a reconnect: is it still ours?
    Verify,
    /// delete of our node.
    Delete,
    /// multi {setData(successor, grant), delete(our node)}: release by handing on.
    Grant,
    /// getData on our own node once our blocker went: were we granted the lock?
    Turn,
    /// delete of a second node of ours found by recovery.
    Orphan(String),
}

/// Our node: its name in the directory and its creation zxid (the fencing token).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(super) struct Node {
    pub name: String,
    pub czxid: i64,
}

/// Where the attempt stands. See the [module docs](self).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(super) enum Phase {
    Idle,
    Entering(Entering),
    Waiting(Waiter),
    Held(Holder),
    Leaving(Leaving),
    Done(Ended),
}

/// Creating our node; the listing that decides comes with the create.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(super) struct Entering {
    pub ours: Ours,
    pub attempt: Attempt,
}

/// What we know of our node while entering or leaving.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(super) enum Ours {
    /// None: a create (with the directory's ancestors first if `parents`) is to be sent
    /// when the session allows.
    Send { parents: bool },
    /// The create is in flight.
    Sent,
    /// A create may have landed without our hearing of it: found by its unique prefix
    /// before anything else.
    InDoubt(Box<Search>),
    /// Created.
    Known(Node),
}

/// The search for a create in doubt (kept boxed: a queued waiter does not carry it).
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub(super) struct Search {
    /// The best node of ours found so far (the lowest: our place in line).
    pub adopted: Option<Node>,
    /// A listing or a look at a child failed: search again once this one is over.
    pub again: bool,
    /// A search is to be sent when the session allows (none is in flight).
    pub send: bool,
}

/// What a waiting attempt keeps until it holds or ends.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub(super) struct Attempt {
    /// The wait ends by then.
    pub deadline: Option<Instant>,
    /// The deadline passed while the first listing was on its way: decide on it, but
    /// not after this (a try-lock's grace).
    pub grace: Option<Instant>,
    /// Callers waiting to join the hold (re-entrant `acquire` while it is pending).
    pub joining: u32,
}

/// A node that queues behind others.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(super) struct Waiter {
    pub node: Node,
    /// Blockers in the last listing (1 means: when it goes, we hold).
    pub blockers: usize,
    pub blocker: Blocker,
    /// The contenders right after ours (nearest first), from a listing that showed one
    /// blocker left, or from a notice or a grant: release hands the lock to the first.
    pub successors: Vec<String>,
    pub attempt: Attempt,
}

/// The blocker a waiter waits for.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub(super) struct Blocker {
    /// The watch on it (none for a lease waiter, which watches the whole listing, and
    /// while a turn read or a listing decides).
    pub watch: Option<Watching>,
    /// It holds the lock (a notice naming it, or a grant in its node): its deletion
    /// hands the lock to us, with no read.
    pub holds: bool,
}

/// The watch a waiter keeps on its blocker: its name until the watch on it is sent,
/// then only the op that sets that watch — its reply and its notification carry the
/// op, so a queued waiter keeps no copy of another contender's name.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(super) enum Watching {
    /// To be sent when the session allows.
    Name(String),
    /// A deletion watch (children watch on the blocker), and the blocker's sequence
    /// number (-1 if unknown): a notice naming it says it holds.
    Op(OpId, i64),
    /// The same deletion watch and a data watch on our own node, armed together by one
    /// `SetWatches2` (an exclusive waiter's: see the module docs, step 3).
    Both(OpId, i64),
    /// That blocker went while a read of our own node was on its way: the read decides.
    Gone(i64),
    /// A data watch (the fast handoff, see [`LockConfig::watch_own_node`]): the
    /// blocker's name is kept to read the grant written into it.
    ///
    /// [`LockConfig::watch_own_node`]: super::LockConfig::watch_own_node
    Data(OpId, String),
}

impl Watching {
    /// A watch to send on the blocker `name`.
    pub fn on(name: &str) -> Watching {
        Watching::Name(name.into())
    }

    /// The op that set it, once sent.
    pub fn op(&self) -> Option<OpId> {
        match self {
            Watching::Name(_) | Watching::Gone(_) => None,
            Watching::Op(op, _) | Watching::Both(op, _) | Watching::Data(op, _) => Some(*op),
        }
    }

    /// The blocker's sequence number, if a notice can name it.
    pub fn seq(&self) -> Option<i64> {
        match self {
            Watching::Op(_, seq) | Watching::Both(_, seq) | Watching::Gone(seq) if *seq >= 0 => {
                Some(*seq)
            }
            _ => None,
        }
    }

    /// The sequence number of the blocker `name` (-1 if it has none).
    pub fn seq_of(name: &str) -> i64 {
        seq_number(name).unwrap_or(-1)
    }
}

/// We hold the lock.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(super) struct Holder {
    pub node: Node,
    /// The contenders right after ours (see [`Waiter::successors`]), or the tail of the
    /// grant that made us holder.
    pub successors: Vec<String>,
    /// Re-entrant levels held, and callers waiting to join while suspended.
    pub depth: u32,
    pub joining: u32,
    /// The hold was handed to us by the previous holder (a grant or a notice).
    pub by_grant: bool,
    /// Told `Suspended` and not yet `Reconnected`.
    pub suspended: bool,
    /// Our node must be verified (`sync` + `exists`) when the session allows.
    pub verify: bool,
}

/// Deleting our node (or waiting to learn whether we have one): after a release, a
/// cancel, a deadline or a failure.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(super) struct Leaving {
    /// `Sent` or `InDoubt` until the create's answer or the search says; `Known` then.
    pub ours: Ours,
    pub finish: Finish,
    /// The delete (or the release's `multi`) is to be sent when the session allows.
    pub send: bool,
}

/// What to report once our node is deleted.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(super) enum Finish {
    /// A release: hands the lock on as it deletes.
    Released(Handoff),
    Cancelled,
    NotAcquired,
    /// Boxed: an error is large.
    Failed(Box<Error>),
}

/// How a release hands the lock on (see the module docs, protocol step 4).
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub(super) struct Handoff {
    /// The contenders after ours: the first is granted the lock, the second told.
    pub successors: Vec<String>,
    /// We were handed the lock ourselves: our successor was told by the same write.
    pub by_grant: bool,
    /// The grant was refused (successor gone or written meanwhile): delete plainly.
    pub refused: bool,
}

/// The attempt is over.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub(super) struct Ended {
    /// Re-entrant levels whose guards are still alive (a hold lost while held).
    pub depth: u32,
    /// Why the hold was lost, if it was.
    pub lost: Option<LostReason>,
}

/// The data watch on our own node.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub(super) enum OwnWatch {
    /// None registered (or none known to be).
    #[default]
    Off,
    /// Asked for by a request not answered yet.
    Asked,
    /// The server holds it: an own-node read answered and nothing fired it since. Only
    /// then does a blocker's deletion prove our node still queues (the server would
    /// have told us of its deletion first).
    Live,
}

/// Reads to send again when the session allows; independent of one another.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub(super) struct Need(u8);

impl Need {
    /// A listing of the directory (entering or waiting).
    pub const LIST: Need = Need(1);
    /// A read of our own node (arming its watch if none is left).
    pub const OWN: Need = Need(2);
    /// The turn read (a waiter whose blocker went).
    pub const TURN: Need = Need(4);

    pub fn add(&mut self, n: Need) {
        self.0 |= n.0;
    }

    pub fn has(self, n: Need) -> bool {
        self.0 & n.0 != 0
    }

    pub fn is_empty(self) -> bool {
        self.0 == 0
    }
}
