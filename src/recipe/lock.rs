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
//!    ([`Recipe::yields`]): queued in the session, it lets other recipes' later
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
//! is marked as soon as the session allows ([`Retry`]: after `Reconnected` when
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

use alloc::boxed::Box;
use alloc::collections::VecDeque;
use alloc::string::{String, ToString};
use alloc::vec::Vec;
use bytes::Bytes;
use core::time::Duration;

use super::kit::{join, name_of, Kit, ParentStep};
use super::{contender, OpId, Recipe, Retry, SessionChange, SharedListing};
use crate::error::Error;
use crate::proto::*;
use crate::session::WatchEvent;
use crate::time::Instant;

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

/// `marker`, then `names` one per line: the data of a grant or a notice.
fn marked<'a>(marker: &[u8], names: impl Iterator<Item = &'a str> + Clone) -> Bytes {
    let mut v =
        Vec::with_capacity(marker.len() + names.clone().map(|n| n.len() + 1).sum::<usize>());
    v.extend_from_slice(marker);
    for name in names {
        v.push(b'\n');
        v.extend_from_slice(name.as_bytes());
    }
    Bytes::from(v)
}

/// The grant data for a successor: [`GRANT`], then `tail` one name per line.
fn grant_data(tail: &[String]) -> Bytes {
    marked(GRANT, tail.iter().map(String::as_str))
}

/// The notice data for the contender after `holder`: [`NOTICE`], `holder`, then `tail`.
fn notice_data(holder: &str, tail: &[String]) -> Bytes {
    marked(
        NOTICE,
        core::iter::once(holder).chain(tail.iter().map(String::as_str)),
    )
}

/// A notice found in our node: the sequence number of the contender it says holds
/// (our predecessor, by its writer's listing) and the successors after us; `None` if
/// the data is no notice. Like a grant, only a write puts one there (version ≥ 1).
fn parse_notice(data: &[u8], version: i32, ours: &str) -> Option<(i64, Vec<String>)> {
    let rest = data.strip_prefix(NOTICE).filter(|_| version >= 1)?;
    let rest = rest.strip_prefix(b"\n")?;
    let (holder, tail) = match rest.iter().position(|b| *b == b'\n') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, &[][..]),
    };
    let holder = core::str::from_utf8(holder).ok()?;
    if !contender::may_be_granted(holder)
        || contender::order_key(holder)? >= contender::order_key(ours)?
    {
        return None;
    }
    Some((seq_number(holder)?, parse_tail(tail, ours)?))
}

/// A contender's sequence number (unique in its directory).
fn seq_number(name: &str) -> Option<i64> {
    contender::order_key(name).and_then(|(seq, _)| seq.parse().ok())
}

/// The successors a grant found in our node hands on, or `None` if the data is no
/// grant. Only a write can put one there (a fresh node has version 0, and a grant is
/// written with version 0 expected); the names must follow `ours` in lock order.
fn parse_grant(data: &[u8], version: i32, ours: &str) -> Option<Vec<String>> {
    parse_tail(data.strip_prefix(GRANT).filter(|_| version >= 1)?, ours)
}

/// The names after a grant's or a notice's head (`rest` empty or starting with a line
/// break), kept while they are `_c_` contenders after `ours` in lock order.
fn parse_tail(rest: &[u8], ours: &str) -> Option<Vec<String>> {
    if rest.first().is_some_and(|b| *b != b'\n') {
        return None;
    }
    let mut tail = Vec::new();
    let mut last = contender::order_key(ours)?;
    for part in rest.split(|b| *b == b'\n').skip(1) {
        let Ok(name) = core::str::from_utf8(part) else {
            break;
        };
        match contender::order_key(name) {
            Some(key)
                if key > last && contender::may_be_granted(name) && tail.len() < MAX_SUCCESSORS =>
            {
                last = key;
                tail.push(name.to_string());
            }
            _ => break,
        }
    }
    Some(tail)
}

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

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum Purpose {
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
    /// getChildren(watch) on the blocker we wait for (a deletion watch).
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

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum State {
    Idle,
    /// Our create is in flight, or its outcome unknown.
    Creating,
    /// We have a node and wait (listing or watching a blocker).
    Waiting,
    Held,
    /// Deleting our node: after release, cancel, timeout or failure.
    Deleting,
    Done,
}

/// What to report once our node is deleted.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum Finish {
    Released,
    Cancelled,
    NotAcquired,
    /// Boxed: an error is large and a waiter carries its `Option<Finish>` all along.
    Failed(Box<Error>),
}

// What must be (re)sent; `drive` sends it when the session allows.
const CREATE: u16 = 1;
const PARENTS: u16 = 2;
const RECOVER: u16 = 4;
const LIST: u16 = 8;
const BLOCKER: u16 = 16;
const OWN: u16 = 32;
const VERIFY: u16 = 64;
const DELETE: u16 = 128;
const ORPHANS: u16 = 256;
const TURN: u16 = 512;

/// The lock state machine. See the [module docs](self).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Lock {
    config: LockConfig,
    state: State,
    session_id: i64,
    /// Our node's name and creation zxid, once known.
    node: Option<(String, i64)>,
    /// A create may have landed without our hearing of it: find it before anything else.
    in_doubt: bool,
    need: u16,
    /// The next read after a reconnect or a failure goes after a `sync`.
    sync_next: bool,
    /// Blockers in the last listing (1 means: when it goes, we hold).
    blockers: usize,
    /// The contenders right after ours (nearest first), from the listing that made us
    /// holder (or showed one blocker left) or from the grant that made us holder;
    /// release hands the lock to the first of them.
    successors: Vec<String>,
    /// The grant was refused (successor gone or written meanwhile): delete plainly.
    grant_failed: bool,
    /// The hold was handed to us by a grant (no listing).
    by_grant: bool,
    /// The blocker we watch now (only its deletion counts: older watches may fire late).
    watching: Option<Watching>,
    /// That blocker holds the lock (a read of it showed a grant): its deletion hands
    /// the lock to us, with no read.
    blocker_holds: bool,
    /// The state of the rare paths (a create in doubt, missing parents), boxed: a
    /// queued waiter does not carry it. `None` whenever it would be all defaults.
    rare: Option<Box<Rare>>,
    deadline: Option<Instant>,
    /// The deadline passed while the first listing was on its way: decide on it, but
    /// not after this.
    deadline_passed: Option<Instant>,
    finish: Option<Finish>,
    /// A holder was told `Suspended` and not yet `Reconnected`.
    suspended: bool,
    /// A data watch on our own node is registered (or being registered).
    own_armed: bool,
    /// The children watch on the directory set by the listing that decided is armed
    /// (nothing fired it since): while we hold, it stands in for the own-node watch.
    dir_armed: bool,
    /// A listing with that directory watch was refused: list without it.
    stand_in_refused: bool,
    /// The server holds that watch: an own-node read answered and nothing fired it
    /// since. Only then does a blocker's deletion prove our node still queues (the
    /// server would have told us of its deletion first).
    own_live: bool,
    revocation_told: bool,
    /// Re-entrant levels held, and callers waiting to join the hold.
    depth: u32,
    joining: u32,
    lost: Option<LostReason>,
    kit: Kit<Purpose, LockEvent>,
}

/// The blocker a waiter waits for: its name until the watch on it is sent, then only
/// the op that sets that watch — its reply and its notification carry the op, so a
/// queued waiter keeps no copy of another contender's name.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum Watching {
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
    Data(OpId, String),
}

impl Watching {
    fn op(&self) -> Option<OpId> {
        match self {
            Watching::Name(_) | Watching::Gone(_) => None,
            Watching::Op(op, _) | Watching::Both(op, _) | Watching::Data(op, _) => Some(*op),
        }
    }

    /// The blocker's sequence number, if a notice can name it.
    fn seq(&self) -> Option<i64> {
        match self {
            Watching::Op(_, seq) | Watching::Both(_, seq) | Watching::Gone(seq) if *seq >= 0 => {
                Some(*seq)
            }
            _ => None,
        }
    }
}

/// See [`Lock::rare`](Lock).
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
struct Rare {
    /// Recovery: the best node of ours found so far, and whether to look again.
    adopted: Option<(String, i64)>,
    recover_again: bool,
    /// Nodes of ours found besides the one adopted: deleted.
    orphans: Vec<String>,
}

impl Lock {
    /// A lock that does nothing until [`acquire`](Self::acquire).
    pub fn new(config: LockConfig) -> Lock {
        // Backoffs jittered by our id: waiters refused together come back apart.
        let retry = Retry::for_id(&config.id);
        Lock {
            config,
            state: State::Idle,
            session_id: 0,
            node: None,
            in_doubt: false,
            need: 0,
            sync_next: false,
            blockers: 0,
            successors: Vec::new(),
            grant_failed: false,
            by_grant: false,
            watching: None,
            blocker_holds: false,
            rare: None,
            deadline: None,
            deadline_passed: None,
            finish: None,
            suspended: false,
            own_armed: false,
            dir_armed: false,
            stand_in_refused: false,
            own_live: false,
            revocation_told: false,
            depth: 0,
            joining: 0,
            lost: None,
            kit: Kit::with_retry(retry),
        }
    }

    // ----- getters -----

    /// The configuration.
    pub fn config(&self) -> &LockConfig {
        &self.config
    }

    /// Do we hold the lock (and is the connection up)?
    pub fn is_held(&self) -> bool {
        self.state == State::Held && !self.suspended
    }

    /// Our node's name, once created.
    pub fn node(&self) -> Option<&str> {
        self.node.as_ref().map(|(n, _)| n.as_str())
    }

    /// Our node and its fencing token while held.
    pub fn held_node(&self) -> Option<(i64, String)> {
        match (&self.node, self.state) {
            (Some((n, token)), State::Held) => Some((*token, n.clone())),
            _ => None,
        }
    }

    /// Was the current (or last) hold handed to us by the previous holder — its grant
    /// or a notice read in our node, or (read and write locks without the own-node
    /// watch) a grant in our blocker's before it went — rather than decided from a
    /// listing or a blocker's deletion alone?
    pub fn held_by_grant(&self) -> bool {
        self.by_grant
    }

    /// Re-entrant levels held.
    pub fn depth(&self) -> u32 {
        self.depth
    }

    /// Has the attempt ended (held no more, nothing to wait for)?
    pub fn has_ended(&self) -> bool {
        self.state == State::Done
    }

    // ----- commands -----

    /// Starts acquiring; `deadline` bounds the wait (`Some(now)` is a try-lock). On a
    /// re-entrant lock that is held, adds a level. See [`Acquire`].
    pub fn acquire(&mut self, now: Instant, deadline: Option<Instant>) -> Acquire {
        match self.state {
            State::Idle => {
                self.joining = 1;
                if let Err(error) = validate_path(&self.config.dir) {
                    self.state = State::Done;
                    self.emit(LockEvent::Failed {
                        error: Error::InvalidPath {
                            path: self.config.dir.clone(),
                            error,
                        },
                    });
                    return Acquire::Pending;
                }
                self.deadline = deadline;
                self.state = State::Creating;
                self.need |= CREATE;
                self.drive(now);
                Acquire::Pending
            }
            State::Held if self.config.reentrant && !self.suspended => {
                self.depth += 1;
                match &self.node {
                    Some((node, token)) => Acquire::Held {
                        fencing_token: *token,
                        node: node.clone(),
                    },
                    None => Acquire::Ended,
                }
            }
            State::Held if self.config.reentrant => {
                self.joining += 1;
                match &self.node {
                    Some((node, token)) => Acquire::Suspended {
                        fencing_token: *token,
                        node: node.clone(),
                    },
                    None => Acquire::Ended,
                }
            }
            State::Creating | State::Waiting if self.config.reentrant => {
                self.joining += 1;
                Acquire::Pending
            }
            State::Done if self.config.reentrant && self.depth > 0 => match self.lost {
                Some(reason) => Acquire::Failed(reason.error()),
                None => Acquire::Ended,
            },
            _ => Acquire::Ended,
        }
    }

    /// Releases one level of a held lock, or cancels an attempt. See [`Release`].
    pub fn release(&mut self, now: Instant) -> Release {
        let answer = self.release_level(now);
        self.drive(now);
        answer
    }

    fn release_level(&mut self, now: Instant) -> Release {
        match self.state {
            State::Held if self.depth > 1 => {
                self.depth -= 1;
                Release::StillHeld { depth: self.depth }
            }
            State::Held => {
                self.depth = 0;
                self.stop_with(Finish::Released, now);
                Release::Pending
            }
            State::Creating | State::Waiting if self.joining > 1 => {
                self.joining -= 1;
                Release::StillHeld {
                    depth: self.joining,
                }
            }
            State::Idle | State::Creating | State::Waiting => {
                self.joining = 0;
                self.stop_with(Finish::Cancelled, now);
                if self.state == State::Done {
                    Release::Done
                } else {
                    Release::Pending
                }
            }
            State::Deleting => Release::Pending,
            State::Done => {
                self.depth = self.depth.saturating_sub(1);
                Release::Done
            }
        }
    }

    /// Gives up an attempt (or releases a held lock): [`release`](Self::release).
    pub fn cancel(&mut self, now: Instant) -> Release {
        self.release(now)
    }

    // ----- internals -----

    fn emit(&mut self, event: LockEvent) {
        self.kit.emit(event);
    }

    /// What every node of this lock starts with: `_c_<id>-<marker>` (made when needed:
    /// a waiter keeps no copy).
    fn prefix(&self) -> String {
        let mut prefix = contender::protected_prefix(&self.config.id);
        prefix.push_str(self.config.kind.marker());
        prefix
    }

    /// The ACL to create with (see [`LockConfig::acl`]).
    fn acl(&self) -> Vec<Acl> {
        if self.config.acl.is_empty() {
            Acl::open_unsafe()
        } else {
            self.config.acl.clone()
        }
    }

    fn our_path(&self) -> Option<String> {
        self.node.as_ref().map(|(n, _)| join(&self.config.dir, n))
    }

    fn dir_path(&self, name: &str) -> String {
        join(&self.config.dir, name)
    }

    /// The rare-path state, created on first use.
    fn rare(&mut self) -> &mut Rare {
        self.rare.get_or_insert_with(Box::default)
    }

    fn has_orphans(&self) -> bool {
        self.rare.as_ref().is_some_and(|r| !r.orphans.is_empty())
    }

    /// Sends what is needed, if the session allows it now; drops an all-default
    /// rare-path state.
    fn drive(&mut self, now: Instant) {
        self.drive_needs(now);
        if self.rare.as_deref().is_some_and(|r| *r == Rare::default()) {
            self.rare = None;
        }
    }

    fn drive_needs(&mut self, now: Instant) {
        if self.need == 0 || !self.kit.allows(now) {
            return;
        }
        let dir = self.config.dir.clone();
        if self.state != State::Done && (self.in_doubt || self.need & RECOVER != 0) {
            // Nothing else makes sense until we know whether our create landed.
            if self
                .kit
                .any(|p| matches!(p, Purpose::Recover | Purpose::Adopt(_)))
            {
                return; // the search is on; its end decides
            }
            self.need &= ORPHANS;
            self.in_doubt = true;
            self.rare().adopted = None;
            self.rare().recover_again = false;
            self.sync(&dir);
            self.kit.send(
                Purpose::Recover,
                Request::GetChildren(PathWatch {
                    path: dir,
                    watch: false,
                }),
            );
            return;
        }
        let need = core::mem::take(&mut self.need);
        if need & (CREATE | PARENTS) != 0 && self.state == State::Creating {
            if need & PARENTS != 0 {
                let node = self.dir_path(&self.prefix());
                let acl = self.acl();
                self.kit
                    .send_parents(&node, &acl, CreateMode::Container, Purpose::Parent);
            }
            let create = CreateRequest::new(
                self.dir_path(&self.prefix()),
                self.config.data.clone(),
                self.acl(),
                CreateMode::EphemeralSequential,
            );
            self.kit.send(Purpose::Create, Request::Create2(create));
            // Executed after the create: the listing contains our node.
            self.list(false);
        }
        if need & LIST != 0 && matches!(self.state, State::Creating | State::Waiting) {
            self.list(true);
        }
        if need & BLOCKER != 0 && self.state == State::Waiting {
            if let Some(Watching::Name(b)) = &self.watching {
                let path = self.dir_path(b);
                let seq = seq_number(b).unwrap_or(-1);
                let own = self
                    .node
                    .as_ref()
                    .map(|(n, czxid)| (self.dir_path(n), *czxid));
                if let (true, Some((own, czxid))) = (self.notified_waiting(), own) {
                    // One request arms both watches: the blocker's deletion (a children
                    // watch) and our own node's data (a grant or a notice lands
                    // there), each firing at once if it changed after our node's
                    // creation.
                    let op = self.kit.send(
                        Purpose::Blocker,
                        Request::SetWatches2(SetWatches2 {
                            relative_zxid: czxid,
                            data_watches: alloc::vec![own],
                            child_watches: alloc::vec![path],
                            ..SetWatches2::default()
                        }),
                    );
                    self.watching = Some(Watching::Both(op, seq));
                    self.own_armed = true;
                    self.own_live = false; // until the server answers
                } else if self.fast_handoff() {
                    // A data watch: the grant written into our blocker wakes us (we
                    // read it while the blocker holds), and then its deletion alone
                    // hands the lock on.
                    let name = b.clone();
                    let op = self.kit.send(
                        Purpose::Blocker,
                        Request::GetData(PathWatch { path, watch: true }),
                    );
                    self.watching = Some(Watching::Data(op, name));
                } else {
                    // A children watch on the blocker (it has none: the reply is an
                    // empty list) fires on its deletion only, never on a write to its
                    // data: a grant handed to our blocker, or a revocation aimed at
                    // it, does not wake us for nothing.
                    let op = self.kit.send(
                        Purpose::Blocker,
                        Request::GetChildren(PathWatch { path, watch: true }),
                    );
                    self.watching = Some(Watching::Op(op, seq));
                }
            }
        }
        if need & VERIFY != 0 && self.state == State::Held {
            if let Some(path) = self.our_path() {
                self.sync(&dir);
                self.kit.send(
                    Purpose::Verify,
                    Request::Exists(PathWatch { path, watch: false }),
                );
            }
        }
        let notified = self.state == State::Waiting && self.notified_waiting();
        if need & OWN != 0 && (self.wants_own_watch() || notified) {
            self.read_own(Purpose::Own);
        }
        if need & TURN != 0 && self.state == State::Waiting {
            if self.sync_next {
                self.sync(&dir);
            }
            self.read_own(Purpose::Turn);
        }
        if need & DELETE != 0 && self.state == State::Deleting {
            if let Some(path) = self.our_path() {
                let successor = match self.finish {
                    Some(Finish::Released) if !self.grant_failed => self.successors.first(),
                    _ => None,
                };
                let exclusive = self.config.kind == LockKind::Exclusive;
                let mut ops = Vec::new();
                if let Some(next) = successor {
                    // An exclusive holder handed the lock by a grant or a notice: the
                    // same write told our successor that we hold, so its deletion watch
                    // hands it the lock; no grant.
                    if !(exclusive && self.by_grant) {
                        ops.push(MultiOp::SetData(SetDataRequest {
                            path: self.dir_path(next),
                            data: grant_data(&self.successors[1..]),
                            version: 0,
                        }));
                    }
                    if let (true, Some(after)) = (exclusive, self.successors.get(1)) {
                        ops.push(MultiOp::SetData(SetDataRequest {
                            path: self.dir_path(after),
                            data: notice_data(next, &self.successors[2..]),
                            version: 0,
                        }));
                    }
                }
                match ops.is_empty() {
                    false => {
                        ops.push(MultiOp::Delete(DeleteRequest { path, version: -1 }));
                        self.kit.send(Purpose::Grant, Request::Multi(ops));
                    }
                    true => {
                        self.kit.send(
                            Purpose::Delete,
                            Request::Delete(DeleteRequest { path, version: -1 }),
                        );
                    }
                }
            }
        }
        if need & ORPHANS != 0 {
            for name in core::mem::take(&mut self.rare().orphans) {
                let path = self.dir_path(&name);
                self.kit.send(
                    Purpose::Orphan(name),
                    Request::Delete(DeleteRequest { path, version: -1 }),
                );
            }
        }
    }

    /// getData on our own node, with a watch if we keep one on it and none is left
    /// there already.
    fn read_own(&mut self, purpose: Purpose) {
        if let Some(path) = self.our_path() {
            let watch = self.watches_own() && !self.own_armed;
            if watch {
                self.own_armed = true;
                self.own_live = false;
            }
            self.kit
                .send(purpose, Request::GetData(PathWatch { path, watch }));
        }
    }

    fn sync(&mut self, dir: &str) {
        self.sync_next = false;
        self.kit.send(
            Purpose::Sync,
            Request::Sync(PathRequest { path: dir.into() }),
        );
    }

    fn list(&mut self, may_sync: bool) {
        let dir = self.config.dir.clone();
        if may_sync && self.sync_next {
            self.sync(&dir);
        }
        // A lease waiter is let in by whichever holder goes: watch the whole listing.
        let lease = matches!(self.config.kind, LockKind::Lease { .. });
        // If this listing makes us holder, its children watch on the directory stands
        // in for the own-node watch (it fires on our node's deletion; on any other
        // change we arm the real one): an uncontended hold costs no read of its own.
        let stand_in = self.config.watch_own_node
            && !self.config.revocable
            && self.config.kind.is_granted_to()
            && !self.own_armed
            && !self.stand_in_refused;
        self.kit.send(
            Purpose::List(stand_in),
            Request::GetChildren(PathWatch {
                path: dir,
                watch: lease || stand_in,
            }),
        );
    }

    /// Marks `need` for a retry after a retryable failure at `now`.
    fn again(&mut self, now: Instant, need: u16) {
        self.need |= need;
        self.sync_next = true;
        self.kit.failed(now);
    }

    /// Do reads of our own node set a watch on it (a holder keeps one armed)?
    fn watches_own(&self) -> bool {
        self.config.watch_own_node || self.config.revocable
    }

    /// Waiting without an own-node watch, a waiter watches its blocker's data: once a
    /// read of it shows a grant, the blocker's deletion alone hands us the lock — one
    /// write and one notification per handoff, no turn read (which today also arms the
    /// own-node watch: with that watch, the turn read stays).
    fn fast_handoff(&self) -> bool {
        !self.watches_own()
            && self.config.kind.is_granted_to()
            && self.config.kind != LockKind::Exclusive
    }

    /// An exclusive waiter (not revocable: that one watches its node from creation)
    /// arms the watch on its blocker and a data watch on its own node in one request,
    /// and hears through the latter the grant or the notice a holder's release writes.
    fn notified_waiting(&self) -> bool {
        self.config.kind == LockKind::Exclusive && !self.config.revocable
    }

    /// Is a watch on our own node wanted now? A holder's (unless disabled), to notice
    /// its deletion or a revocation. A waiter's only if revocable, or of a kind that is
    /// never granted (latches, leases): the others read their node when their blocker
    /// goes (the turn read: granted? still there?), which is all a waiter needs — a
    /// blocker's deletion never hands us a lock unless that read finds our node.
    fn wants_own_watch(&self) -> bool {
        match self.state {
            State::Held => self.watches_own(),
            State::Waiting | State::Creating => {
                self.config.revocable
                    || (self.config.watch_own_node && !self.config.kind.is_granted_to())
            }
            _ => false,
        }
    }

    fn arm_own(&mut self) {
        let stood_in = self.state == State::Held && self.dir_armed;
        if !self.own_armed && !stood_in && self.wants_own_watch() {
            self.need |= OWN;
        }
    }

    /// Held by a grant found in our node: its tail names our own successors.
    fn granted(&mut self, tail: Vec<String>) {
        self.acquired();
        self.by_grant = true;
        if self.config.kind.grants() {
            self.successors = tail;
        }
    }

    fn acquired(&mut self) {
        self.state = State::Held;
        self.by_grant = false;
        self.depth = self.joining.max(1);
        self.joining = 0;
        self.deadline = None;
        self.deadline_passed = None;
        let Some((node, czxid)) = self.node.clone() else {
            return;
        };
        self.emit(LockEvent::Acquired {
            fencing_token: czxid,
            node,
        });
        self.arm_own();
    }

    /// Decides from a listing: held, or wait for the nearest blocker.
    /// A listing shared with other waiters is looked up in its sorted form, built once.
    fn evaluate(&mut self, children: &[String], shared: Option<&mut SharedListing>, now: Instant) {
        let Some((ours, _)) = self.node.clone() else {
            return;
        };
        let reader = self.config.kind == LockKind::Read;
        let sorted =
            shared.and_then(|s| s.get_or_build(|| contender::SortedListing::new(children)));
        let found = match sorted {
            Some(sorted) => sorted.blockers(children, &ours, reader),
            None => contender::blockers(children, &ours, reader),
        };
        // Who follows us, if we hold now or when our only blocker goes (a later listing
        // or a grant tells more otherwise).
        self.successors.clear();
        if self.config.kind.grants() && matches!(found, Some((0 | 1, _))) {
            self.successors = match sorted {
                Some(sorted) => sorted.successors(children, &ours, MAX_SUCCESSORS),
                None => contender::successors(children, &ours, MAX_SUCCESSORS),
            };
        }
        match found {
            None => {
                // Our node is gone while we wait: deleted by someone else.
                self.node = None;
                self.fail(Error::Server(ErrorCode::NoNode), now);
            }
            Some((_, None)) => self.acquired(),
            Some((count, _)) if matches!(self.config.kind, LockKind::Lease { max } if count < max as usize) => {
                self.acquired()
            }
            Some(_) if self.deadline_passed.is_some() => self.stop_with(Finish::NotAcquired, now),
            Some((count, _)) if matches!(self.config.kind, LockKind::Lease { .. }) => {
                // The listing that told us set a children watch: it fires on the change.
                self.state = State::Waiting;
                self.blockers = count;
                self.watching = None;
                self.arm_own();
            }
            Some((count, Some(nearest))) => {
                self.state = State::Waiting;
                self.blockers = count;
                self.blocker_holds = false;
                self.watching = Some(Watching::Name(nearest.to_string()));
                self.need |= BLOCKER;
                self.arm_own();
            }
        }
    }

    /// The blocker watched by `op` is gone; only the one we watch now matters.
    fn blocker_gone(&mut self, op: OpId) {
        if self.state != State::Waiting || self.watching_op() != Some(op) {
            return;
        }
        let seq = self.watching.take().and_then(|w| w.seq()).unwrap_or(-1);
        let own_known = self.own_live || !self.watches_own();
        if (self.blockers == 1 || self.blocker_holds) && own_known {
            self.acquired(); // lower sequence numbers never come back
            self.by_grant = self.blocker_holds; // handed on by a holder
        } else if self.kit.any(|p| *p == Purpose::Own) {
            // Our node's data changed (a notice, a grant?) and the read is on its way:
            // it decides.
            self.watching = Some(Watching::Gone(seq));
        } else if self.config.kind.is_granted_to() && !self.own_live {
            // Its holder may have granted us the lock (a grant written with the
            // deletion would have fired a live own-node watch first): read our node.
            self.need |= TURN;
        } else {
            // More blockers; or our own node went unwatched for a while (a watch fired
            // or a read was lost): it may have been deleted unseen, so list.
            self.need |= LIST;
        }
    }

    fn fail(&mut self, error: Error, now: Instant) {
        self.stop_with(Finish::Failed(Box::new(error)), now);
    }

    /// Ends the attempt: delete our node if we have one (or may have one), then report.
    fn stop_with(&mut self, finish: Finish, _now: Instant) {
        match self.state {
            State::Done | State::Deleting => {} // keep the first reason
            State::Idle => {
                self.state = State::Done;
                self.report(finish);
            }
            _ => {
                if finish == Finish::NotAcquired {
                    self.emit(LockEvent::NotAcquired); // tell the caller now; clean up after
                }
                self.finish = Some(finish);
                self.state = State::Deleting;
                self.joining = 0;
                self.deadline = None;
                self.deadline_passed = None;
                self.watching = None;
                self.need &= RECOVER | ORPHANS;
                if self.node.is_some() {
                    self.need |= DELETE;
                } else if !self.in_doubt
                    && !self.kit.any(|p| {
                        matches!(p, Purpose::Create | Purpose::Recover | Purpose::Adopt(_))
                    })
                {
                    self.done(); // nothing was created
                }
                // Otherwise the create's answer, or the search for it, leads to the delete.
            }
        }
    }

    fn report(&mut self, finish: Finish) {
        match finish {
            Finish::Released => self.emit(LockEvent::Released),
            Finish::Cancelled => self.emit(LockEvent::Cancelled),
            Finish::NotAcquired => {}
            Finish::Failed(error) => self.emit(LockEvent::Failed { error: *error }),
        }
    }

    fn done(&mut self) {
        self.state = State::Done;
        self.node = None;
        self.successors = Vec::new();
        self.need &= ORPHANS;
        if let Some(f) = self.finish.take() {
            self.report(f);
        }
    }

    fn check_revocation(&mut self, data: &[u8]) {
        if self.config.revocable
            && matches!(self.state, State::Creating | State::Waiting | State::Held)
            && !self.revocation_told
            && (data == REVOKE || data == CURATOR_REVOKE)
        {
            self.revocation_told = true;
            self.emit(LockEvent::RevocationRequested);
        }
    }

    fn lost(&mut self, reason: LostReason) {
        if self.state == State::Held {
            self.emit(LockEvent::Lost { reason });
            self.state = State::Done;
            self.lost = Some(reason);
            self.node = None;
            self.need &= ORPHANS;
        }
    }

    /// Our node is gone while we wait or hold.
    fn own_node_gone(&mut self, now: Instant) {
        match self.state {
            State::Held => self.lost(LostReason::NodeDeleted),
            State::Creating | State::Waiting => {
                self.node = None;
                self.fail(Error::Server(ErrorCode::NoNode), now);
            }
            _ => {}
        }
    }

    fn on_create(&mut self, now: Instant, result: Result<Response, Error>) {
        match result {
            Ok(Response::PathStat { path, stat }) => {
                self.kit.succeeded();
                self.node = Some((name_of(&path).to_string(), stat.czxid));
                self.in_doubt = false;
                if self.state == State::Deleting {
                    self.need |= DELETE;
                } else {
                    self.arm_own(); // revocable waiters hear revocation too
                }
                // The paired listing follows and decides.
            }
            Ok(_) => self.fail(Error::UnexpectedReply, now),
            Err(Error::Server(ErrorCode::NoNode)) => {
                if self.state == State::Deleting {
                    return self.done();
                }
                match self.kit.parents_missing(&self.config.dir) {
                    ParentStep::Again => self.again(now, PARENTS | CREATE),
                    ParentStep::Create => self.need |= PARENTS | CREATE,
                    ParentStep::Fail(e) => self.fail(e, now),
                }
            }
            Err(e) if e.may_have_applied() => {
                // Did it land? Look for our prefix once connected again.
                self.in_doubt = true;
                self.again(now, RECOVER);
            }
            Err(e) if e.is_retryable() => {
                // Refused: never applied.
                if self.state == State::Deleting {
                    self.done();
                } else {
                    self.again(now, CREATE);
                }
            }
            Err(e) if e.ends_session() => {} // the session change decides
            Err(e) => {
                if self.state == State::Deleting {
                    self.done();
                } else {
                    self.fail(e, now);
                }
            }
        }
    }

    fn on_list(&mut self, now: Instant, watched: bool, result: Result<Response, Error>) {
        if !matches!(self.state, State::Creating | State::Waiting) {
            return; // we are leaving
        }
        if self.node.is_none() {
            // The listing paired with our create. Refused by the session while the
            // create went out (never applied, create's answer still to come): list again
            // after a backoff; it executes after the create and shows our node. Any other
            // answer comes with the create's own, which decides.
            if result
                .as_ref()
                .is_err_and(|e| e.is_retryable() && !e.may_have_applied())
            {
                self.stand_in_refused |= watched;
                self.again(now, LIST);
            }
            return;
        }
        match result {
            Ok(Response::Children(c)) | Ok(Response::Children2 { children: c, .. }) => {
                self.kit.succeeded();
                self.dir_armed = watched;
                self.evaluate(&c, None, now);
            }
            Ok(_) => self.fail(Error::UnexpectedReply, now),
            Err(e) if e.is_retryable() => {
                // Refused (the session may be at its watch limit): list without the
                // directory watch from now on; a holder then reads its own node.
                self.stand_in_refused |= watched && !e.may_have_applied();
                self.again(now, LIST)
            }
            Err(Error::Server(ErrorCode::NoNode)) => self.own_node_gone(now),
            Err(e) if e.ends_session() => {}
            Err(e) => self.fail(e, now),
        }
    }

    /// [`on_list`](Self::on_list) for a listing shared with other waiters of the
    /// session: read in place, looked up in the sorted listing the first one built.
    fn on_shared_list(
        &mut self,
        now: Instant,
        watched: bool,
        unsynced: bool,
        children: &[String],
        shared: &mut SharedListing,
    ) {
        if !matches!(self.state, State::Creating | State::Waiting) || self.node.is_none() {
            return; // leaving; or the create's answer decides (see `on_list`)
        }
        if unsynced {
            return self.again(now, LIST); // possibly stale (see `Outbox::answer`)
        }
        self.kit.succeeded();
        self.dir_armed = watched;
        self.evaluate(children, Some(shared), now);
    }

    fn on_recover(&mut self, now: Instant, result: Result<Response, Error>) {
        match result {
            Ok(Response::Children(children)) | Ok(Response::Children2 { children, .. }) => {
                let prefix = self.prefix();
                let mine: Vec<String> = children
                    .into_iter()
                    .filter(|c| c.starts_with(&prefix))
                    .collect();
                for name in mine {
                    let path = self.dir_path(&name);
                    self.kit.send(
                        Purpose::Adopt(name),
                        Request::Exists(PathWatch { path, watch: false }),
                    );
                }
            }
            Err(Error::Server(ErrorCode::NoNode)) => {} // no directory, no node of ours
            Err(e) if e.is_retryable() => self.rare().recover_again = true,
            Err(e) if e.ends_session() => {}
            Err(e) => {
                // We cannot look: our node (if any) stays until the session ends.
                self.in_doubt = false;
                if self.state == State::Deleting {
                    self.done();
                } else {
                    self.fail(e, now);
                }
            }
            Ok(_) => self.rare().recover_again = true,
        }
        self.recovery_step(now);
    }

    fn on_adopt(&mut self, now: Instant, name: String, result: Result<Response, Error>) {
        match result {
            Ok(Response::Stat(stat))
                if stat.ephemeral_owner == self.session_id && self.session_id != 0 =>
            {
                let seq = |n: &str| contender::Contender::parse(n).map(|c| c.sequence);
                match self.rare().adopted.take() {
                    // Keep the lower one (our place in line); the other is an orphan.
                    Some(prev) if seq(&prev.0) <= seq(&name) => {
                        self.rare().orphans.push(name);
                        self.rare().adopted = Some(prev);
                    }
                    Some(prev) => {
                        self.rare().orphans.push(prev.0);
                        self.rare().adopted = Some((name, stat.czxid));
                    }
                    None => self.rare().adopted = Some((name, stat.czxid)),
                }
            }
            Err(e) if e.is_retryable() => self.rare().recover_again = true,
            // Another session's (not ours), or gone.
            _ => {}
        }
        self.recovery_step(now);
    }

    /// Concludes a recovery once every answer is in.
    fn recovery_step(&mut self, now: Instant) {
        if !self.in_doubt
            || self
                .kit
                .any(|p| matches!(p, Purpose::Recover | Purpose::Adopt(_)))
        {
            return;
        }
        if self.rare().recover_again {
            self.rare().recover_again = false;
            return self.again(now, RECOVER);
        }
        self.in_doubt = false;
        if !self.rare().orphans.is_empty() {
            self.need |= ORPHANS;
        }
        match self.rare().adopted.take() {
            Some(node) => {
                self.node = Some(node);
                if self.state == State::Deleting {
                    self.need |= DELETE;
                } else {
                    self.need |= LIST;
                    self.arm_own();
                }
            }
            None if self.state == State::Deleting => self.done(),
            None => self.need |= CREATE,
        }
    }

    /// Our blocker's data, read with its watch (fast handoff): a grant there means it
    /// holds (only a holder's release writes one, into its successor: every node below
    /// it was gone, and lower sequence numbers never come back), so its deletion will
    /// hand us the lock. The grant names the contenders after it: if we come first,
    /// the rest follow us, and we hand the lock on to them in turn.
    fn blocker_data(&mut self, data: &[u8], stat: &Stat) {
        let Some(Watching::Data(_, name)) = &self.watching else {
            return;
        };
        let Some(tail) = parse_grant(data, stat.version, name) else {
            return;
        };
        self.blocker_holds = true;
        let ours = self.node.as_ref().map(|(n, _)| n.as_str());
        if self.config.kind.grants() && tail.first().map(String::as_str) == ours {
            self.successors = tail[1..].to_vec();
        }
    }

    /// Did `event_type`, heard through `op`, use up the watch on our blocker without
    /// its deletion: a data change seen by a data watch, or a watch removed?
    fn blocker_watch_spent(&self, op: OpId, event_type: EventType) -> bool {
        match self.watching {
            Some(Watching::Data(current, _)) if current == op => matches!(
                event_type,
                EventType::NodeDataChanged | EventType::DataWatchRemoved
            ),
            Some(Watching::Op(current, _) | Watching::Both(current, _)) if current == op => {
                event_type == EventType::ChildWatchRemoved
            }
            _ => false,
        }
    }

    fn watching_op(&self) -> Option<OpId> {
        self.watching.as_ref().and_then(Watching::op)
    }

    fn on_blocker(&mut self, now: Instant, op: OpId, result: Result<Response, Error>) {
        if self.watching_op() != Some(op) {
            return; // an older blocker
        }
        let both = matches!(self.watching, Some(Watching::Both(..)));
        match result {
            Ok(Response::Data { data, stat }) => {
                self.kit.succeeded(); // armed: wait for the watch
                self.blocker_data(&data, &stat);
            }
            Ok(_) => {
                self.kit.succeeded(); // armed: wait for the watch
                if both {
                    // Both watches are on the server now (unless one fired at once:
                    // its event follows this reply, and clears this).
                    self.own_live = self.own_armed;
                }
            }
            Err(Error::Server(ErrorCode::NoNode)) => self.blocker_gone(op),
            Err(e) if e.is_retryable() => {
                self.watching = None;
                if both {
                    self.own_armed = false; // nothing was armed
                    self.own_live = false;
                }
                self.again(now, LIST);
            }
            Err(e) if e.ends_session() => {}
            Err(e) => self.fail(e, now),
        }
    }

    fn on_verify(&mut self, now: Instant, result: Result<Response, Error>) {
        if self.state != State::Held {
            return; // lost or released meanwhile
        }
        match result {
            Ok(Response::Stat(stat)) if stat.ephemeral_owner == self.session_id => {
                if self.suspended {
                    self.suspended = false;
                    self.emit(LockEvent::Reconnected);
                    self.depth += core::mem::take(&mut self.joining);
                }
                self.arm_own();
            }
            Ok(_) | Err(Error::Server(ErrorCode::NoNode)) => self.lost(LostReason::NodeDeleted),
            Err(e) if e.is_retryable() => self.again(now, VERIFY),
            Err(_) => {} // the session change decides
        }
    }

    /// Our node's data: a revocation, or a grant (then we hold).
    fn own_data(&mut self, data: &[u8], stat: &Stat) {
        self.own_live = self.own_armed;
        self.check_revocation(data);
        if matches!(self.state, State::Creating | State::Waiting)
            && self.config.kind.is_granted_to()
        {
            let tail = self
                .node
                .as_ref()
                .and_then(|(ours, _)| parse_grant(data, stat.version, ours));
            if let Some(tail) = tail {
                self.granted(tail);
            }
        }
        if matches!(self.state, State::Creating | State::Waiting)
            && self.config.kind == LockKind::Exclusive
        {
            let notice = self
                .node
                .as_ref()
                .and_then(|(ours, _)| parse_notice(data, stat.version, ours));
            // Only about the blocker we wait for (or that just went): the notice's
            // writer deleted itself as it wrote, so that blocker holds from then on.
            if let Some((holder, tail)) = notice {
                if self.watching.as_ref().and_then(Watching::seq) == Some(holder) {
                    self.blocker_holds = true;
                    self.successors = tail;
                }
            }
        }
    }

    /// The turn read: granted, or (the only blocker gone) held, or list again.
    fn on_turn(&mut self, now: Instant, watch: Option<bool>, result: Result<Response, Error>) {
        match result {
            Ok(Response::Data { data, stat }) => {
                self.kit.succeeded();
                self.own_data(&data, &stat);
                if self.state == State::Waiting
                    && matches!(self.watching, None | Some(Watching::Gone(_)))
                {
                    self.turn_decided();
                }
            }
            _ if self.state != State::Waiting => {}
            Ok(_) => self.fail(Error::UnexpectedReply, now),
            Err(Error::Server(ErrorCode::NoNode)) => self.own_node_gone(now),
            Err(e) if e.is_retryable() => {
                self.own_armed &= watch != Some(false);
                self.again(now, TURN);
            }
            Err(e) if e.ends_session() => {}
            Err(e) => self.fail(e, now),
        }
    }

    /// The release that hands on: done, or (successor gone or written meanwhile) a
    /// plain delete.
    fn on_grant(&mut self, now: Instant, result: Result<Response, Error>) {
        // Our delete is the last op.
        let last = match &result {
            Ok(Response::Multi(results)) => results.len().saturating_sub(1),
            _ => usize::MAX,
        };
        match (multi_failure(&result), result) {
            (None, Ok(Response::Multi(_))) => self.done(),
            (None, Err(e)) if e.is_retryable() || e.ends_session() => self.on_delete(now, Err(e)),
            // Our own delete failed (nothing applied): as a plain delete's answer.
            (Some((at, code)), _) if at == last => self.on_delete(now, Err(Error::Server(code))),
            _ => {
                self.grant_failed = true;
                self.need |= DELETE;
            }
        }
    }

    fn on_own(&mut self, now: Instant, watch: Option<bool>, result: Result<Response, Error>) {
        let went = self.state == State::Waiting && matches!(self.watching, Some(Watching::Gone(_)));
        match result {
            Ok(Response::Data { data, stat }) => {
                self.own_data(&data, &stat);
                if went && self.state == State::Waiting {
                    // Our blocker went while this read was on its way (after the event,
                    // on the same server): our node is there.
                    self.turn_decided();
                }
            }
            Ok(_) => {}
            Err(Error::Server(ErrorCode::NoNode)) => self.own_node_gone(now),
            Err(e) if e.is_retryable() => {
                // Our watch stays if the server left it (an answer read as lost behind a
                // failed sync, `Outbox::answer_armed`) or came with an earlier read.
                self.own_armed &= watch != Some(false);
                // Our blocker went meanwhile: the turn read decides (after a sync if the
                // refusal came with a new server), else the next read of our node.
                self.again(now, if went { TURN } else { OWN });
            }
            Err(e) if went && !e.ends_session() => {
                self.own_armed = false;
                self.watching = None;
                self.need |= LIST;
            }
            Err(_) => self.own_armed = false, // the session change decides
        }
    }

    /// Our blocker went and a read showed our node there: held if that blocker held
    /// (a notice named it) or was the only one, else list again.
    fn turn_decided(&mut self) {
        self.watching = None;
        if self.blocker_holds || self.blockers == 1 {
            self.acquired(); // lower sequence numbers never come back
            self.by_grant = self.blocker_holds;
        } else {
            self.need |= LIST;
        }
    }

    fn on_delete(&mut self, now: Instant, result: Result<Response, Error>) {
        match result {
            Ok(_) | Err(Error::Server(ErrorCode::NoNode)) => self.done(),
            Err(e) if e.is_retryable() => self.again(now, DELETE),
            Err(e) if e.ends_session() => {}
            Err(e) => {
                // Refused for good (no permission): the node stays; say so.
                self.finish = Some(Finish::Failed(Box::new(e)));
                self.done();
            }
        }
    }

    fn on_orphan(&mut self, now: Instant, name: String, result: Result<Response, Error>) {
        if let Err(e) = result {
            if e.is_retryable() {
                self.rare().orphans.push(name);
                self.again(now, ORPHANS);
            }
        }
    }

    fn on_session_end(&mut self, reason: LostReason) {
        self.kit.clear_requests();
        self.need = 0;
        if let Some(rare) = &mut self.rare {
            rare.orphans.clear();
        }
        self.in_doubt = false;
        match self.state {
            State::Held => self.lost(reason),
            State::Done => {}
            State::Deleting => self.done(), // the node went with the session
            State::Idle | State::Creating | State::Waiting => {
                self.state = State::Done;
                self.node = None;
                self.joining = 0;
                self.emit(LockEvent::Failed {
                    error: reason.error(),
                });
            }
        }
    }
}

impl Recipe for Lock {
    type Event = LockEvent;

    fn handle_reply(&mut self, now: Instant, op: OpId, result: Result<Response, Error>) {
        // A read behind a failed sync reads as lost (`Outbox::answer`): read again,
        // without asking for a second watch on our node if the first was left.
        let Some((purpose, result, watch)) = self.kit.answer_armed(op, result) else {
            return;
        };
        match purpose {
            Purpose::Parent(p) => self.kit.parent_answered(&p, &result),
            Purpose::Sync => {}
            Purpose::Create => self.on_create(now, result),
            Purpose::List(watched) => self.on_list(now, watched, result),
            Purpose::Recover => self.on_recover(now, result),
            Purpose::Adopt(name) => self.on_adopt(now, name, result),
            Purpose::Blocker => self.on_blocker(now, op, result),
            Purpose::Own => self.on_own(now, watch, result),
            Purpose::Verify => self.on_verify(now, result),
            Purpose::Delete => self.on_delete(now, result),
            Purpose::Grant => self.on_grant(now, result),
            Purpose::Turn => self.on_turn(now, watch, result),
            Purpose::Orphan(name) => self.on_orphan(now, name, result),
        }
        self.drive(now);
    }

    fn handle_shared_reply(
        &mut self,
        now: Instant,
        op: OpId,
        result: &Result<Response, Error>,
        shared: &mut SharedListing,
    ) {
        let children = match result {
            Ok(Response::Children(c)) | Ok(Response::Children2 { children: c, .. })
                if matches!(self.kit.purpose(op), Some(Purpose::List(_))) =>
            {
                c
            }
            _ => return Recipe::handle_reply(self, now, op, result.clone()),
        };
        if let Some((Purpose::List(watched), unsynced)) = self.kit.take_unsynced(op) {
            self.on_shared_list(now, watched, unsynced, children, shared);
        }
        self.drive(now);
    }

    fn handle_watch(&mut self, now: Instant, op: OpId, event: &WatchEvent) {
        let ours = self.our_path();
        let is_ours = Some(&event.path) == ours.as_ref();
        match event.event_type {
            // The directory's children watch fired, or went (removeWatches, the
            // directory deleted): it no longer stands in for the own-node watch.
            t if event.path == self.config.dir => {
                self.dir_armed = false;
                if self.state == State::Held {
                    self.arm_own(); // was it our node? watch that from now on
                } else if t == EventType::NodeChildrenChanged
                    && self.state == State::Waiting
                    && matches!(self.config.kind, LockKind::Lease { .. })
                {
                    self.need |= LIST; // a lease may have gone: look again
                }
            }
            EventType::NodeDeleted if is_ours => self.own_node_gone(now),
            EventType::NodeDeleted => self.blocker_gone(op),
            // Our data watch fired, or was removed (removeWatches): arm it again; the
            // data tells whether it is a revocation.
            EventType::NodeDataChanged | EventType::DataWatchRemoved if is_ours => {
                self.own_armed = false;
                self.own_live = false;
                self.arm_own();
                if self.state == State::Waiting && self.notified_waiting() {
                    self.need |= OWN; // a grant, or a notice? read it (and watch again)
                }
            }
            // Our blocker's data changed (a grant: does it hold now?), or the watch on
            // it was removed (removeWatches): watch it, and read it, again.
            t if self.state == State::Waiting && self.blocker_watch_spent(op, t) => {
                self.watching = Some(Watching::Name(name_of(&event.path).to_string()));
                self.need |= BLOCKER;
            }
            _ => {}
        }
        self.drive(now);
    }

    fn handle_session(&mut self, now: Instant, change: SessionChange) {
        self.kit.session(change);
        match change {
            SessionChange::Connected { session_id } => self.session_id = session_id,
            SessionChange::Suspended => {
                if self.state == State::Held && !self.suspended {
                    self.suspended = true;
                    self.emit(LockEvent::Suspended);
                }
            }
            SessionChange::Reconnected { session_id } => {
                self.session_id = session_id;
                self.sync_next = true;
                if self.state == State::Held {
                    // Still ours? (The session re-armed our watches itself.)
                    self.need |= VERIFY;
                }
            }
            SessionChange::Expired => self.on_session_end(LostReason::SessionExpired),
            SessionChange::Closed => self.on_session_end(LostReason::SessionClosed),
        }
        self.drive(now);
    }

    fn handle_timeout(&mut self, now: Instant) {
        if let Some(d) = self.deadline {
            if now >= d && matches!(self.state, State::Creating | State::Waiting) {
                self.deadline = None;
                let first_listing_on_its_way = self.state == State::Creating
                    && !self.kit.is_suspended()
                    && self.need == 0
                    && self.kit.any(|p| matches!(p, Purpose::List(_)));
                if first_listing_on_its_way {
                    // A try-lock deserves one look at the directory, but not forever.
                    self.deadline_passed = Some(d + self.config.try_grace);
                } else {
                    self.stop_with(Finish::NotAcquired, now);
                }
            }
        }
        if self.deadline_passed.is_some_and(|t| now >= t) && self.state == State::Creating {
            self.stop_with(Finish::NotAcquired, now);
        }
        self.drive(now);
    }

    fn handle_abandon(&mut self, now: Instant) {
        self.depth = 0;
        self.joining = 0;
        let finish = if self.state == State::Held {
            Finish::Released
        } else {
            Finish::Cancelled
        };
        self.stop_with(finish, now);
        self.drive(now);
    }

    fn poll_request(&mut self) -> Option<(OpId, Request)> {
        self.kit.poll_request()
    }

    /// A waiter's entry — its create (and the directory's ancestors) and the listing
    /// sent with it — yields to other recipes' later requests while queued: nobody
    /// waits for it, and a holder's release must not wait behind thousands of them.
    fn yields(&self, op: OpId) -> bool {
        match self.kit.purpose(op) {
            Some(Purpose::Create | Purpose::Parent(_) | Purpose::List(_)) => {
                self.state == State::Creating && !self.in_doubt
            }
            // Arming the watches of a waiter deep in the queue: the lock reaches it
            // only after a few handoffs (and a late `SetWatches2` fires at once for
            // what changed since our node's creation).
            Some(Purpose::Blocker) => self.state == State::Waiting && self.blockers > 2,
            _ => false,
        }
    }

    fn poll_event(&mut self) -> Option<LockEvent> {
        self.kit.poll_event()
    }

    fn poll_timeout(&self) -> Option<Instant> {
        let deadline = match self.state {
            State::Creating | State::Waiting => self.deadline.or(self.deadline_passed),
            _ => None,
        };
        let retry = if self.need != 0 && self.state != State::Done || self.has_orphans() {
            self.kit.retry_at()
        } else {
            None
        };
        match (deadline, retry) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    fn is_done(&self) -> bool {
        self.state == State::Done
            && self.kit.is_quiet()
            && self.kit.no_events()
            && !self.has_orphans()
            && self.need & ORPHANS == 0
            && (!self.config.reentrant || self.depth == 0)
    }
}

/// Asks the holder of a lock node to let go: writes [`REVOKE`] into it and, with a
/// grace period, deletes the node if it is still there afterwards (its holder then
/// sees `Lost`). Reports one `Result<(), Error>`; a node already gone is success.
/// Refusals and lost connections are retried (both writes are idempotent).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Revoke {
    node: String,
    force_after: Option<Duration>,
    force_at: Option<Instant>,
    step: RevokeStep,
    kit: Kit<RevokeStep, Result<(), Error>>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum RevokeStep {
    Idle,
    Ask,
    Grace,
    Force,
    Done,
}

impl Revoke {
    /// Revokes `node` (a full path), deleting it `force_after` the request if given.
    pub fn new(node: &str, force_after: Option<Duration>) -> Self {
        Revoke {
            node: node.into(),
            force_after,
            force_at: None,
            step: RevokeStep::Idle,
            kit: Kit::default(),
        }
    }

    /// Starts (once).
    pub fn start(&mut self, now: Instant) {
        if self.step == RevokeStep::Idle {
            self.step = RevokeStep::Ask;
            self.send(now);
        }
    }

    fn send(&mut self, now: Instant) {
        if !self.kit.allows(now) || !self.kit.is_quiet() {
            return;
        }
        let path = self.node.clone();
        match self.step {
            RevokeStep::Ask => {
                self.kit.send(
                    RevokeStep::Ask,
                    Request::SetData(SetDataRequest {
                        path,
                        data: Bytes::from_static(REVOKE),
                        version: -1,
                    }),
                );
            }
            RevokeStep::Force => {
                self.kit.send(
                    RevokeStep::Force,
                    Request::Delete(DeleteRequest { path, version: -1 }),
                );
            }
            _ => {}
        }
    }

    fn finish(&mut self, result: Result<(), Error>) {
        if self.step != RevokeStep::Done {
            self.step = RevokeStep::Done;
            self.kit.emit(result);
        }
    }
}

impl Recipe for Revoke {
    type Event = Result<(), Error>;

    fn handle_reply(&mut self, now: Instant, op: OpId, result: Result<Response, Error>) {
        let Some(step) = self.kit.take(op) else {
            return;
        };
        match (step, result) {
            (_, Err(Error::Server(ErrorCode::NoNode))) => self.finish(Ok(())),
            (_, Err(e)) if e.is_retryable() => self.kit.failed(now),
            (_, Err(e)) => self.finish(Err(e)),
            (RevokeStep::Ask, Ok(_)) => match self.force_after {
                Some(grace) => {
                    self.step = RevokeStep::Grace;
                    self.force_at = Some(now + grace);
                }
                None => self.finish(Ok(())),
            },
            (_, Ok(_)) => self.finish(Ok(())),
        }
        self.send(now);
    }

    fn handle_watch(&mut self, _: Instant, _: OpId, _: &WatchEvent) {}

    fn handle_session(&mut self, now: Instant, change: SessionChange) {
        self.kit.session(change);
        match change.end_error() {
            Some(e) => self.finish(Err(e)),
            None => self.send(now),
        }
        if self.step == RevokeStep::Done {
            self.kit.clear_requests();
        }
    }

    fn handle_timeout(&mut self, now: Instant) {
        if self.step == RevokeStep::Grace && self.force_at.is_some_and(|t| now >= t) {
            self.step = RevokeStep::Force;
        }
        self.send(now);
    }

    fn handle_abandon(&mut self, _: Instant) {
        // The caller went away: stop asking (a write in flight completes on its own).
        self.finish(Err(Error::Closed));
        self.kit.clear_events();
    }

    fn poll_request(&mut self) -> Option<(OpId, Request)> {
        self.kit.poll_request()
    }

    fn poll_event(&mut self) -> Option<Result<(), Error>> {
        self.kit.poll_event()
    }

    fn poll_timeout(&self) -> Option<Instant> {
        match self.step {
            RevokeStep::Grace => self.force_at,
            RevokeStep::Ask | RevokeStep::Force if self.kit.is_quiet() => self.kit.retry_at(),
            _ => None,
        }
    }

    fn is_done(&self) -> bool {
        self.step == RevokeStep::Done && self.kit.is_idle()
    }
}
