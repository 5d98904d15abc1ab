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
//!    ([`Machine::yields`](crate::recipe::Machine::yields)): queued in the session, it lets other recipes' later
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
//! use zk_recipes::recipe::{Machine, Recipe, SessionChange};
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
//!
//! [`Error::NoParent`]: crate::error::Error::NoParent
//! [`Error::ChrootMissing`]: crate::error::Error::ChrootMissing

mod data;
mod machine;
mod phase;
mod replies;
mod revoke;
mod types;

pub use machine::Lock;
pub use revoke::Revoke;
pub(crate) use types::compact_acl;
pub use types::{
    node_id, Acquire, AcquireWait, HoldState, LockChange, LockConfig, LockEvent, LockKind,
    LockStatus, LostReason, Naming, Release, CURATOR_REVOKE, GRANT, MAX_SUCCESSORS, NOTICE, REVOKE,
};
