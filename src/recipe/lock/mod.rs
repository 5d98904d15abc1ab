//! Exclusive, read and write locks (ZooKeeper recipes "Locks" and "Shared locks";
//! paper: "Simple locks without herd effect"), Curator-compatible, fenced, optionally
//! re-entrant and revocable.
//!
//! # Protocol
//!
//! 1. Create `<dir>/_c_<id>-<marker>` as `EPHEMERAL_SEQUENTIAL` with `create2` and, in
//!    the same breath, `getChildren(<dir>)`: one round trip, since the server executes a
//!    session's requests in order and the listing therefore contains our node. Markers:
//!    `lock-` (exclusive, Curator's `InterProcessMutex`), `__READ__` / `__WRIT__`
//!    (Curator's `InterProcessReadWriteLock`). If `<dir>` is missing, its ancestors are
//!    created as containers in the same pipeline and the pair is sent again — at most
//!    twice; an ancestor that cannot be created ends the attempt with
//!    [`Error::NoParent`] naming it, or [`Error::ChrootMissing`]. This entry yields
//!    ([`Recipe::yields`](crate::recipe::Recipe::yields)): queued in the session, it lets other recipes' later
//!    requests go first (a holder's release is not queued behind the entries of
//!    thousands of waiters of the same session); the pair itself stays in order. So
//!    does the watch-arming request of a waiter more than two places from the lock.
//! 2. Sort the children by the sequence after their last known marker (unknown
//!    children are ignored). Our *blockers*: every lower contender for exclusive and
//!    write locks; every lower writer for read locks.
//! 3. No blocker: acquired. Otherwise a watch on the nearest blocker only (the
//!    predecessor; for a reader the highest lower writer) — no herd. It is a children
//!    watch on the blocker (which has no children): it fires on the blocker's deletion
//!    and, unlike a data watch, not when someone writes the blocker's data (a grant
//!    handed to it, a revocation aimed at it). An **exclusive** waiter (not revocable)
//!    arms it together with a data watch on its *own* node, in one `SetWatches2`
//!    relative to its node's creation zxid (each fires at once if its node changed
//!    since: the blocker gone, our node written): the own-node watch costs no request,
//!    and through it the waiter hears what a releasing holder writes into its node.
//! 4. **Grant on release.** A holder of an exclusive or write lock knows the contenders
//!    that follow it (from the listing that made it holder, or the one that showed a
//!    single blocker left, or from the grant or notice that made it holder): nothing
//!    can ever sort between two of them, since sequence numbers only grow. It releases
//!    with one `multi` { `setData(successor, GRANT + the names after it, version 0)`,
//!    `delete(own)` }: one write hands the lock on. The version check keeps the grant
//!    off a node someone wrote meanwhile (a revocation); a successor that left makes
//!    the whole `multi` fail, and a plain `delete` follows. The tail carried in the
//!    grant ([`MAX_SUCCESSORS`] at most) lets the chain go on without any listing;
//!    readers never grant (a reader cannot know it is the last one) and a grant lands
//!    on the immediate successor only, reader or writer: granting a whole batch of
//!    readers would write each of their nodes in one transaction that fails as a whole
//!    when any of them left, and readers behind the first wake on the writer's deletion
//!    anyway. Curator contenders are unaffected: a Curator waiter ignores the data
//!    written into its node and takes over on our node's deletion, as it always does.
//!
//!    **Notices (exclusive locks).** The same `multi` also writes a [`NOTICE`] into the
//!    contender after the successor: "the successor holds from this write on" (the
//!    writer deletes itself in it; everything below it is gone; nothing sorts between
//!    them). That contender reads it while the successor holds — off the handoff — and
//!    the successor's deletion alone then hands it the lock: one write and one
//!    notification per handoff, with the own-node watch kept. A holder made by a grant
//!    or a notice writes no grant (its successor was told by the same write that told
//!    it), only the next notice: in a steady chain every release is {notice, delete}.
//!    A notice counts only if it names the blocker we wait for. Like a grant, it is
//!    trusted as written by a releasing holder (whoever may write the lock's nodes
//!    could forge either, as it could delete them).
//! 5. **When the blocker goes.** A waiter whose blocker was told to hold (a notice
//!    naming it, read in our node) holds. A waiter whose own-node watch is live (armed
//!    and not fired) knows that nothing was written into its node (a grant or a notice
//!    written with the blocker's deletion would have fired it first: a `multi`'s
//!    notifications come in the order of its ops): if the blocker was the only one it
//!    holds, otherwise it lists again — no read. A read of our node on its way when
//!    the blocker goes decides (a grant: we hold). Otherwise (the read-then-list path
//!    of readers, writers and revocable locks) the **turn read**: a waiter reads its
//!    own node (`getData`, arming the own-node watch a holder keeps): a grant there
//!    means we hold — no listing, O(1) bytes whatever the queue's length; otherwise, if
//!    that blocker was the only one, we hold too (our node is still there, lower
//!    sequence numbers never come back); otherwise list again. The read also proves our
//!    node was not deleted by someone else while we waited. Without the own-node watch
//!    and with a single blocker, we hold without the read, as before.
//!
//!    **Without the own-node watch (read and write locks), no turn read.** Such a
//!    waiter watches its blocker with a *data* watch (`getData(watch)`) instead: the
//!    grant the blocker receives wakes it while the blocker holds, it reads the grant
//!    then — off the handoff — and the blocker's deletion alone hands it the lock. A
//!    grant in the blocker proves it held (only a holder's release writes one, into its
//!    successor, and lower sequence numbers never come back); anything else written
//!    there (a revocation, a version-0 "grant") proves nothing, and its deletion leads
//!    to the turn read as before. The names the grant carries after ours are our
//!    successors. (An exclusive waiter does better with the notice, with the own-node
//!    watch or without it.)
//! 6. A holder watches its own node (unless disabled) and reports its deletion by
//!    someone else as `Lost` and, for revocable locks, `unlock` (or Curator's
//!    `__REVOKE__`) written into it as `RevocationRequested`. A holder made by a
//!    listing needs no read for that at first: the listing set a children watch on the
//!    directory (one-shot, at no extra request), which fires on our node's deletion;
//!    it stands in for the own-node watch until anything in the directory changes,
//!    and then one read arms the own-node watch (and finds the node gone, if that was
//!    the change: `Lost`, one read later than a watch on the node would tell; a
//!    `release` sent meanwhile ends as `Released`). If that watch is removed
//!    (`removeWatches` by another user of the session) or the directory deleted, the
//!    holder arms the own-node watch at once. A waiter ignores that watch (it fires at
//!    most once per listing; no herd). Revocable locks watch their node for its data
//!    instead, waiters too, from its creation, and hear a grant through it. A waiter whose node is deleted
//!    by someone else learns it at its turn read (`Failed`).
//! 7. Release or cancel deletes our node. `Released`/`Cancelled` only once the delete
//!    (or the grant) answered OK or `NoNode` (or the session ended, taking the node
//!    along).
//!
//! Requests per acquisition: 3 uncontended, with the own-node watch or without
//! (create, list, delete: the listing's directory watch stands in for the own-node
//! watch; one more read if the directory changes while we hold). An exclusive waiter:
//! 5 — create, list, the `SetWatches2` of both watches, the read of the notice (or the
//! grant) written into its node, release; at a chain's end (its blocker released with
//! no word for it) the read is a listing instead, and behind a single blocker there is
//! neither: 4. A read or write waiter handed the lock by a grant: 5 (create, list,
//! blocker watch, turn read, release); one that is not granted lists once more.
//!
//! # Liveness: every attempt ends, nothing is left behind
//!
//! The machine is a reconcile loop: each reply either moves the state on or marks what
//! must be done again (create, list, watch, verify, delete); one `drive` step sends what
//! is marked as soon as the session allows ([`Retry`](crate::recipe::Retry): after `Reconnected` when
//! suspended, after a backoff when a request was refused). So every failure that is
//! not final leads to a retry, and every final one to a final event. A create whose
//! reply was lost is looked for after `sync(<dir>)` (a reconnect may land on a lagging
//! follower) by its unique prefix; a child with our prefix is adopted only if its
//! `ephemeralOwner` is our session, and any second one of ours (an orphan) is deleted.
//! A holder's reconnect is verified the same way (`sync` + `exists`).
//!
//! # Fencing
//!
//! `Acquired { fencing_token }` carries the creation zxid of our node. Holders acquire
//! in sequence order and zxids grow with it, so tokens strictly increase from one holder
//! to the next: a protected resource that remembers the highest token it has seen and
//! rejects lower ones cannot be written by a holder whose session has quietly expired.
//!
//! # Commands and the events that end them
//!
//! * [`acquire`](Lock::acquire) answers [`Acquire::Held`] at once for a re-entrant hold,
//!   or [`Acquire::Pending`]: then [`LockEvent::acquire_outcome`] says which event ends
//!   the wait (`Acquired`, `NotAcquired` at the deadline, `Failed`, ...). A deadline of
//!   `now + w` ends the wait by `now + w` — a try-lock (`w = 0`) still looks at one
//!   listing if the connection is up, for at most [`LockConfig::try_grace`].
//! * [`release`](Lock::release) answers [`Release::StillHeld`] for an inner re-entrant
//!   level, or [`Release::Pending`]: [`LockEvent::release_outcome`] ends the wait.
//! * A holder folds the events into a [`LockStatus`] (held, suspended, lost; the
//!   changes not yet reported, a revocation asked while waiting included).
//!
//! # Session semantics
//!
//! Holder: `Suspended` on connection loss (the lock may be gone: stop touching the
//! resource or use the fencing token), `Reconnected` once the same session is back and
//! our node verified, `Lost` on expiry (server-confirmed or the client-side estimate) or
//! when our node is deleted. Waiters carry on across reconnects; on expiry they end
//! with `Failed`.
//!
//! ```
//! use zk_recipes::recipe::lock::{Lock, LockConfig, LockKind};
//! use zk_recipes::recipe::{Recipe, SessionChange};
//! use zk_recipes::time::Instant;
//!
//! let mut lock = Lock::new(LockConfig::new("/locks/job", LockKind::Exclusive, "6f1c2a4e-2b1d-4d7e-9a63-0c2f5a7b8d90"));
//! lock.handle_session(Instant::ZERO, SessionChange::Connected { session_id: 7 });
//! lock.acquire(Instant::ZERO, None);
//! let (_, create) = lock.poll_request().unwrap();   // create2 ...
//! let (_, list) = lock.poll_request().unwrap();     // ... and getChildren, back to back
//! assert_eq!(create.op_code(), zk_recipes::proto::OpCode::Create2);
//! assert_eq!(list.op_code(), zk_recipes::proto::OpCode::GetChildren);
//! ```

use alloc::collections::VecDeque;
use alloc::string::String;
use alloc::vec::Vec;
use bytes::Bytes;
use core::time::Duration;

use super::contender;
use crate::error::Error;
use crate::proto::*;

mod data;
mod machine;
mod phase;
mod replies;
mod revoke;

pub use machine::Lock;
pub use revoke::Revoke;

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
    /// until resigned. Used by [`election`](super::election).
    Latch,
    /// A semaphore lease (`lease-`, Curator's `InterProcessSemaphoreV2`): held while
    /// fewer than `max` lease contenders are ahead of ours. Listings set a children
    /// watch and a waiter lists again when it fires (no single node's deletion can be
    /// the one that lets it in). Used by [`semaphore`](super::semaphore).
    Lease {
        /// How many leases may be held at once.
        max: u32,
    },
}

impl LockKind {
    /// Does a holder of this kind hand the lock to its successor on release (exclusive
    /// and write locks)? Readers never do: a reader cannot know it is the last one.
    fn grants(self) -> bool {
        matches!(self, LockKind::Exclusive | LockKind::Write)
    }

    /// Can a waiter of this kind be granted the lock (it then reads its own node when
    /// its blocker goes, instead of watching it all along)?
    fn is_granted_to(self) -> bool {
        matches!(self, LockKind::Exclusive | LockKind::Read | LockKind::Write)
    }

    fn marker(self) -> &'static str {
        match self {
            LockKind::Exclusive => contender::LOCK,
            LockKind::Read => contender::READ,
            LockKind::Write => contender::WRITE,
            LockKind::Latch => contender::LATCH,
            LockKind::Lease { .. } => contender::LEASE,
        }
    }
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

/// What [`Lock::acquire`] answers at once.
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

/// Follows a pending [`Lock::acquire`] through the lock's events: what both adapters
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

/// What [`Lock::release`] answers at once.
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
