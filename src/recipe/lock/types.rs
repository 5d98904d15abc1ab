//! The lock's plain types: its kinds, configuration, events, calls and status, and the
//! node data it writes. A leaf: the lock's parts import these from here and
//! [`lock`](super) re-exports them.

use alloc::collections::VecDeque;
use alloc::string::String;
use alloc::vec::Vec;
use bytes::Bytes;
use core::time::Duration;

use crate::error::Error;
use crate::proto::*;
use crate::recipe::contender;

/// Data a revoker writes into a holder's node (Curator writes `__REVOKE__`; both count).
pub const REVOKE: &[u8] = b"unlock";
/// Curator's revocation data.
pub const CURATOR_REVOKE: &[u8] = b"__REVOKE__";
/// What a releasing holder writes into its successor's node (followed by the names of
/// the successors after it, one per line): "every node below yours is gone, you hold".
pub const GRANT: &[u8] = b"__GRANT__";
/// What a releasing exclusive holder writes, in the same `multi` as its grant and its
/// delete, into the contender *after* its successor (followed by the successor's name,
/// then the names after the receiver, one per line): "your predecessor holds the lock
/// as of this write; when it goes, you hold". The receiver, which watches its own
/// node's data, reads it while its predecessor holds, and takes over on that
/// predecessor's deletion with no read.
pub const NOTICE: &[u8] = b"__NEXT__";
/// How many successors a holder keeps from its listing to hand the lock on: the grant
/// carries the rest of them, so a chain of grants runs this long without any listing.
pub const MAX_SUCCESSORS: usize = 128;

/// A UUID-formatted node id (version 4 layout, as Curator's protection ids) from 128
/// bits of the driver's entropy: the core has no random source of its own.
///
/// ```
/// let id = zk_recipes::recipe::lock::node_id(0x0123_4567_89ab_cdef, 0xfedc_ba98_7654_3210);
/// assert_eq!(id, "01234567-89ab-4def-bedc-ba9876543210"); // version 4, variant bits set
/// assert_eq!(id.len(), 36);
/// ```
pub fn node_id(a: u64, b: u64) -> String {
    alloc::format!(
        "{:08x}-{:04x}-{:04x}-{:04x}-{:012x}",
        a >> 32,
        (a >> 16) & 0xffff,
        0x4000 | (a & 0x0fff),
        0x8000 | ((b >> 48) & 0x3fff),
        b & 0xffff_ffff_ffff
    )
}

/// Which lock.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum LockKind {
    /// Exclusive (`lock-`).
    Exclusive,
    /// Shared with other readers, excluded by writers (`__READ__`).
    Read,
    /// Exclusive against readers and writers (`__WRIT__`).
    Write,
    /// A leader-election candidate (`latch-`, Curator's `LeaderLatch`): exclusive, held
    /// until resigned. Used by [`election`](crate::recipe::election).
    Latch,
    /// A semaphore lease (`lease-`, Curator's `InterProcessSemaphoreV2`): held while
    /// fewer than `max` lease contenders are ahead of ours. Listings set a children
    /// watch and a waiter lists again when it fires (no single node's deletion can be
    /// the one that lets it in). Used by [`semaphore`](crate::recipe::semaphore).
    Lease {
        /// How many leases may be held at once.
        max: u32,
    },
}

impl LockKind {
    /// Does a holder of this kind hand the lock to its successor on release (exclusive
    /// and write locks)? Readers never do: a reader cannot know it is the last one.
    pub(super) fn grants(self) -> bool {
        matches!(self, LockKind::Exclusive | LockKind::Write)
    }

    /// Can a waiter of this kind be granted the lock (it then reads its own node when
    /// its blocker goes, instead of watching it all along)?
    pub(super) fn is_granted_to(self) -> bool {
        matches!(self, LockKind::Exclusive | LockKind::Read | LockKind::Write)
    }

    pub(super) fn marker(self) -> &'static str {
        match self {
            LockKind::Exclusive => contender::LOCK,
            LockKind::Read => contender::READ,
            LockKind::Write => contender::WRITE,
            LockKind::Latch => contender::LATCH,
            LockKind::Lease { .. } => contender::LEASE,
        }
    }
}

/// How a lock names its contender node.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Naming {
    /// Curator's: `_c_<id>-<marker><sequence>` (what every recipe of the project uses).
    #[default]
    Curator,
    /// kazoo's `Lock`: `<id>__lock__<sequence>` (exclusive locks only; the set
    /// partitioner's item locks, which kazoo's `SetPartitioner` must see). The id is
    /// still what finds a create whose reply was lost.
    Kazoo,
}

/// How to take a lock.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct LockConfig {
    /// The contention directory.
    pub dir: String,
    /// Exclusive, read or write.
    pub kind: LockKind,
    /// A fresh unique id for this lock (one attempt, or one re-entrant hold): a UUID
    /// string, as Curator uses, from the driver's entropy. It is how a create whose
    /// reply was lost is found again, so it must never be shared.
    pub id: String,
    /// Data stored in our node (Curator: the host's address by default; here empty).
    pub data: Bytes,
    /// ACL of our node and of parents we create. Empty (what [`LockConfig::new`]
    /// sets) stands for the open ACL, [`Acl::open_unsafe`], without keeping a copy of
    /// it: ten thousand queued waiters would otherwise hold ten thousand. (ZooKeeper
    /// refuses an empty ACL, so empty never means anything else.)
    pub acl: Vec<Acl>,
    /// Watch our own node while waiting too, and report `unlock` written into it.
    pub revocable: bool,
    /// Watch our own node while holding to notice its deletion by someone else: `Lost`
    /// while holding; a waiter learns it from that watch (exclusive) or at its turn
    /// read (`Failed`). Costs at most one read per hold, often none: an exclusive
    /// waiter arms it with its blocker's watch in one request; a holder by grant has it
    /// from its turn read; a holder by listing starts with the listing's children
    /// watch on the directory standing in, and reads its node only once the directory
    /// changes. On by default; off saves that read and the directory watch, but such a
    /// deletion then goes unnoticed until the session ends. For read and write locks
    /// off also makes the handoff faster: a waiter reads the grant in its blocker while
    /// the blocker holds, and takes over on the blocker's deletion alone, with no turn
    /// read (see the module docs, protocol step 5); an exclusive lock hands over that
    /// fast either way (the notice, step 4).
    pub watch_own_node: bool,
    /// Re-entrant: `acquire` on a held lock adds a level, `release` removes one; the
    /// node goes with the last level.
    pub reentrant: bool,
    /// How long a try-lock (or an attempt whose deadline passed while its first
    /// listing was on the way) waits for that listing. Default 1 s.
    pub try_grace: Duration,
    /// How our node is named (Curator's by default).
    pub naming: Naming,
}

/// `acl` as a [`LockConfig::acl`] keeps it: the open ACL as empty (no copy).
pub(crate) fn compact_acl(acl: &[Acl]) -> Vec<Acl> {
    if acl == Acl::open_unsafe().as_slice() {
        Vec::new()
    } else {
        acl.to_vec()
    }
}

impl LockConfig {
    /// A config with empty data, the open ACL (`acl` empty), not revocable, not
    /// re-entrant, own node watched.
    pub fn new(dir: &str, kind: LockKind, id: &str) -> Self {
        LockConfig {
            dir: dir.into(),
            kind,
            id: id.into(),
            data: Bytes::new(),
            acl: Vec::new(),
            revocable: false,
            watch_own_node: true,
            reentrant: false,
            try_grace: Duration::from_secs(1),
            naming: Naming::Curator,
        }
    }
}

/// Why a held lock is no longer held.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum LostReason {
    /// The session expired (its ephemeral node is or will be gone).
    SessionExpired,
    /// The session was closed.
    SessionClosed,
    /// Our node was deleted by someone else (an administrator or a revoker).
    NodeDeleted,
}

impl LostReason {
    /// The error a call on a lock lost this way fails with.
    pub fn error(self) -> Error {
        match self {
            LostReason::SessionExpired => Error::SessionExpired,
            LostReason::SessionClosed => Error::Closed,
            LostReason::NodeDeleted => Error::Server(ErrorCode::NoNode),
        }
    }
}

/// What a lock reports. `Acquired` starts a hold; `Suspended`, `Reconnected` and
/// `RevocationRequested` are edges while holding (a revocable waiter may hear
/// `RevocationRequested` before `Acquired`); `NotAcquired`, `Lost`, `Released`,
/// `Cancelled` and `Failed` end the attempt.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum LockEvent {
    /// We hold the lock.
    Acquired {
        /// Creation zxid of our node; strictly increasing across holders.
        fencing_token: i64,
        /// Our node's name in the directory.
        node: String,
    },
    /// The deadline passed first (our node is being removed).
    NotAcquired,
    /// Connection lost while holding: the lock may be gone.
    Suspended,
    /// Same session back and our node verified: still held.
    Reconnected,
    /// Someone asked us to let go (`unlock` written into our node).
    RevocationRequested,
    /// No longer held.
    Lost {
        /// Why.
        reason: LostReason,
    },
    /// Released: our node is deleted.
    Released,
    /// Cancelled before acquiring: our node (if any) is deleted.
    Cancelled,
    /// The attempt failed (no permission, missing chroot, session gone while waiting,
    /// a delete the server refused for good, ...).
    Failed {
        /// The cause.
        error: Error,
    },
}

/// A change while holding, as guards report it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum LockChange {
    /// The connection dropped: the lock may be gone. Stop touching the resource (or rely
    /// on the fencing token) until `Reconnected`.
    Suspended,
    /// The session is back and our node verified: held again.
    Reconnected,
    /// Someone asked us to let go (`unlock` written into our node).
    RevocationRequested,
    /// No longer held.
    Lost(LostReason),
}

impl LockEvent {
    /// The change this event means for a holder, if any.
    pub fn change(&self) -> Option<LockChange> {
        match self {
            LockEvent::Suspended => Some(LockChange::Suspended),
            LockEvent::Reconnected => Some(LockChange::Reconnected),
            LockEvent::RevocationRequested => Some(LockChange::RevocationRequested),
            LockEvent::Lost { reason } => Some(LockChange::Lost(*reason)),
            _ => None,
        }
    }

    /// Does this event end the attempt (nothing more will follow)?
    pub fn ends_attempt(&self) -> bool {
        !matches!(
            self,
            LockEvent::Acquired { .. }
                | LockEvent::Suspended
                | LockEvent::Reconnected
                | LockEvent::RevocationRequested
        )
    }

    /// For a caller waiting after [`Acquire::Pending`]: `Some` when this event ends the
    /// wait — `Ok(true)` held (`Acquired`, or `Reconnected` for a re-entry made while
    /// suspended), `Ok(false)` not acquired by the deadline, `Err` the reason it
    /// cannot be had.
    pub fn acquire_outcome(&self) -> Option<Result<bool, Error>> {
        match self {
            LockEvent::Acquired { .. } | LockEvent::Reconnected => Some(Ok(true)),
            LockEvent::NotAcquired => Some(Ok(false)),
            LockEvent::Failed { error } => Some(Err(error.clone())),
            LockEvent::Lost { reason } => Some(Err(reason.error())),
            LockEvent::Released | LockEvent::Cancelled => Some(Err(Error::Closed)),
            LockEvent::Suspended | LockEvent::RevocationRequested => None,
        }
    }

    /// For a caller waiting after [`Release::Pending`]: `Some` when this event ends the
    /// wait. A lock that was lost is released too (its node is gone).
    pub fn release_outcome(&self) -> Option<Result<(), Error>> {
        match self {
            LockEvent::Released | LockEvent::Cancelled | LockEvent::Lost { .. } => Some(Ok(())),
            LockEvent::NotAcquired => Some(Ok(())),
            LockEvent::Failed { error } => Some(Err(error.clone())),
            _ => None,
        }
    }
}

/// What [`Lock::acquire`](super::Lock::acquire) answers at once.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Acquire {
    /// Held now: a re-entrant level was added to a verified hold.
    Held {
        /// The hold's fencing token.
        fencing_token: i64,
        /// Our node's name.
        node: String,
    },
    /// Wait for the outcome ([`AcquireWait`]).
    Pending,
    /// A re-entrant level joins a hold whose connection is down: wait for
    /// `Reconnected` (held) or `Lost` ([`AcquireWait`]).
    Suspended {
        /// The hold's fencing token.
        fencing_token: i64,
        /// Our node's name.
        node: String,
    },
    /// The hold this re-entrant lock had is lost (guards of it are still alive).
    Failed(Error),
    /// This machine's attempt is over; a new attempt needs a new `Lock` (new id).
    Ended,
}

/// Follows a pending [`Lock::acquire`](super::Lock::acquire) through the lock's events: what both adapters
/// wait for, decided once.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct AcquireWait {
    status: LockStatus,
    held: Option<(i64, String)>,
}

impl AcquireWait {
    /// A wait after `answer`; `None` if the answer needs no wait (the caller has its
    /// outcome already).
    pub fn after(answer: &Acquire) -> Option<AcquireWait> {
        match answer {
            Acquire::Pending => Some(AcquireWait::default()),
            Acquire::Suspended {
                fencing_token,
                node,
            } => Some(AcquireWait {
                status: LockStatus::held(),
                held: Some((*fencing_token, node.clone())),
            }),
            _ => None,
        }
    }

    /// Folds one event in; `Some` when the wait is over: `Ok(Some((fencing_token,
    /// node)))` held, `Ok(None)` not acquired by the deadline, `Err` the reason it
    /// cannot be had.
    pub fn feed(&mut self, event: &LockEvent) -> Option<Result<Option<(i64, String)>, Error>> {
        self.status.apply(event);
        if let LockEvent::Acquired {
            fencing_token,
            node,
        } = event
        {
            self.held = Some((*fencing_token, node.clone()));
        }
        match event.acquire_outcome()? {
            Ok(true) => Some(self.held.clone().ok_or(Error::Finished).map(Some)),
            Ok(false) => Some(Ok(None)),
            Err(e) => Some(Err(e)),
        }
    }

    /// The hold's status so far (a revocation asked while waiting included).
    pub fn into_status(self) -> LockStatus {
        self.status
    }
}

/// What [`Lock::release`](super::Lock::release) answers at once.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Release {
    /// An inner re-entrant level was released; the lock is still held.
    StillHeld {
        /// Levels left.
        depth: u32,
    },
    /// Wait for [`LockEvent::release_outcome`].
    Pending,
    /// Nothing to release (the attempt already ended).
    Done,
}

/// A hold as its owner sees it, folded from the lock's events: the guard state both
/// adapters report, decided once here.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct LockStatus {
    state: HoldState,
    unreported: VecDeque<LockChange>,
    revocation_requested: bool,
}

/// Where a hold stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum HoldState {
    /// Not (yet) held.
    Waiting,
    /// Held, connection up.
    Held,
    /// Held as far as we know, but the connection is down: do not act.
    Suspended,
    /// Lost.
    Lost(LostReason),
    /// Released or the attempt ended.
    Ended,
}

impl Default for LockStatus {
    fn default() -> Self {
        LockStatus {
            state: HoldState::Waiting,
            unreported: VecDeque::new(),
            revocation_requested: false,
        }
    }
}

impl LockStatus {
    /// A status for a hold that is held now (a re-entrant level joining it).
    pub fn held() -> Self {
        LockStatus {
            state: HoldState::Held,
            ..Self::default()
        }
    }

    /// Folds one event in.
    pub fn apply(&mut self, event: &LockEvent) {
        match event {
            LockEvent::Acquired { .. } => self.state = HoldState::Held,
            LockEvent::Suspended if self.state == HoldState::Held => {
                self.state = HoldState::Suspended
            }
            LockEvent::Reconnected if self.state == HoldState::Suspended => {
                self.state = HoldState::Held
            }
            LockEvent::RevocationRequested => self.revocation_requested = true,
            LockEvent::Lost { reason } => self.state = HoldState::Lost(*reason),
            e if e.ends_attempt() && !matches!(self.state, HoldState::Lost(_)) => {
                self.state = HoldState::Ended
            }
            _ => {}
        }
        if let Some(change) = event.change() {
            if self.unreported.len() < 64 {
                self.unreported.push_back(change);
            }
        }
    }

    /// The next change not reported yet (for a guard's `changed()`).
    pub fn next_change(&mut self) -> Option<LockChange> {
        self.unreported.pop_front()
    }

    /// Where the hold stands.
    pub fn state(&self) -> HoldState {
        self.state
    }

    /// Held with the connection up: safe to act (within the session timeout's 1/3
    /// margin; see the module docs on session semantics).
    pub fn is_held(&self) -> bool {
        self.state == HoldState::Held
    }

    /// Someone asked for the lock back (`unlock` was written into our node).
    pub fn revocation_requested(&self) -> bool {
        self.revocation_requested
    }
}
