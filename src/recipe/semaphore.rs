//! A counting semaphore: at most `N` holders of a lease at once, Apache Curator
//! `InterProcessSemaphoreV2`-compatible (same nodes, same protocol), built from two
//! [`Lock`] machines.
//!
//! # What Curator does (read from its sources)
//!
//! Curator 5.x, `curator-recipes/.../locks/InterProcessSemaphoreV2.java` (with
//! `InterProcessMutex`, `StandardLockInternalsDriver` and `Lease`):
//!
//! * a semaphore at `<path>` uses an `InterProcessMutex` at `<path>/locks` (children
//!   `_c_<uuid>-lock-<10-digit seq>`) and lease nodes `<path>/leases/_c_<uuid>-lease-<seq>`,
//!   created `EPHEMERAL_SEQUENTIAL` "with protection" (the `_c_<uuid>-` prefix), parents
//!   as containers;
//! * `internalAcquire1Lease`: take the mutex; create the lease node; then, still holding
//!   the mutex, loop: `getChildren(<path>/leases, watcher)`; our node missing →
//!   "RETRY_DUE_TO_MISSING_NODE" (start over); `children.size() <= maxLeases` → done;
//!   else wait for the watcher (or the deadline, then delete the lease: "RETURN_NULL").
//!   Finally release the mutex. `Lease.close()` is a guaranteed delete of the node;
//! * the maximum is either a number every participant must agree on, or a
//!   `SharedCountReader` (a `SharedCount` node, 4-byte big-endian int, at a path of the
//!   user's choosing) whose changes wake the waiter.
//!
//! Curator's history of orphaned leases — nodes left behind that count as held
//! forever, so the semaphore ends up with fewer than `N` usable leases (apache/curator
//! issues #835 = CURATOR-315 "Reconnect during InterProcessSemaphoreV2.acquire can lead
//! to orphaned node", #855 = CURATOR-335 "can deadlock under network stress": a network
//! event between the create and `getChildren`, #982 = CURATOR-462: an interrupted wait):
//! in each, a path out of `internalAcquire1Lease` forgot the node it had created.
//!
//! # Protocol (ours, the same nodes)
//!
//! 1. Take the mutex `<path>/locks` as an exclusive [`Lock`] (`_c_<id>-lock-`): waiters
//!    queue herd-free, each watching only its predecessor.
//! 2. Holding it, take a lease as a [`Lock`] of kind [`LockKind::Lease`] in
//!    `<path>/leases` (`_c_<id>-lease-`): create `EPHEMERAL_SEQUENTIAL` and list the
//!    directory in one round trip. Held when fewer than `N` lease nodes are ahead of
//!    ours. Otherwise wait on a children watch set by that listing and list again when
//!    it fires.
//! 3. Acquired (or timed out, failed, cancelled): release the mutex.
//! 4. Release deletes the lease node; `Released` once the delete answered.
//!
//! # Why at most `N` hold (with or without the mutex)
//!
//! Take the holder `h` whose lease has the highest sequence number. Every other holder's
//! node has a lower number, so it was created before `h`'s node, hence before `h`'s
//! deciding listing, and it still exists (a holder's node exists), so that listing
//! contained it, ahead of `h`. `h` saw fewer than `N` nodes ahead of it: at most `N`
//! holders. Curator's rule (`children.size() <= N`) is stricter than ours (position
//! `< N`), and the same argument covers a mix of both: the newest holder's listing
//! contains every other holder. Safety thus never depends on the mutex (an operator
//! deleting a mutex node cannot break it).
//!
//! # Why waiting ends (and is herd-free)
//!
//! The mutex lets one waiter at a time into `<path>/leases`; everyone else queues in
//! `<path>/locks` watching one predecessor each. So a lease's release wakes exactly
//! one client (the one waiter's children watch), however many wait — the herd Curator's
//! design avoids too, and so do we by using the same one. (Without the mutex, `k`
//! waiters in the leases directory would each need a watch; no single node's deletion
//! is the one that lets a waiter in, since holders leave in any order.) The waiter is
//! live: the watch is set by the very listing that found `N` or more ahead, so any
//! deletion after it fires the watch, and deletions only lower our position.
//!
//! Why not let every waiter into `<path>/leases` and have the one at position `p >= N`
//! watch only the lease at `p - N`? Safe (the argument above holds for any waiter that
//! decides by position), but not live: with `N = 2` and leases `[a, b, c, me]`, `me`
//! watches `b`; `c` (a waiter) times out and `a` leaves: `me` is at position 1 and may
//! hold, but `b` is still there and nothing fires. A waiter must watch `N` of the nodes
//! ahead of it (while those `N` exist it has `N` ahead, so one of them must go before it
//! may enter): `N` watches per waiter and up to `N` woken per release, and a mix with
//! Curator's waiters (which count *all* children, ours included) could then stall.
//! The mutex keeps one waiter and one watch, whatever `N` and the queue length.
//!
//! # No orphaned lease (the CURATOR-315 class)
//!
//! The lease node belongs to its [`Lock`] machine from the moment its create is sent:
//! a create whose reply was lost is looked for by the unique `_c_<id>-` prefix (after
//! `sync`) before anything else, and every way out — timeout, cancel, release, a dropped
//! handle, a failure — deletes what was found (a second node with our prefix too). Only
//! the session's end takes the node along without a delete. `tests/transcripts/semaphore_transcripts.rs`
//! shows a lost create reply followed by the deadline; the property harness
//! (`testkit::semaphore`) checks no node of an ended attempt is left.
//!
//! # Interoperability with Curator
//!
//! Same node layout and protocol: a Java Curator `InterProcessSemaphoreV2(client,
//! path, N)` and ours count leases together (`adapters/tokio/tests/curator/semaphore.rs`
//! runs one against the other). Differences: the maximum is a fixed number (no
//! `SharedCountReader`); our waiter decides by position (fewer than `N` ahead),
//! Curator's by the total count — both safe together, as shown above; a lease node
//! carries the data configured (Curator: `setNodeData`, default none). As in Curator, a
//! waiting lease node deleted by someone else makes the attempt start over with a new
//! node (id `<lease_id>-<n>`), at most [`MAX_RESTARTS`] times, then `Failed`.
//!
//! # Events
//!
//! [`SemaphoreEvent::Acquired`] starts a hold; `Suspended`/`Reconnected` are edges while
//! holding; `TimedOut`, `Lost`, `Released`, `Failed` end the attempt (one of them, once).
//! A `Semaphore` is one attempt: acquire again with a new one (new ids).
//!
//! ```
//! use zk_recipes::recipe::semaphore::{Semaphore, SemaphoreConfig};
//! use zk_recipes::recipe::{Machine, Recipe, SessionChange};
//! use zk_recipes::proto::{OpCode, Request};
//! use zk_recipes::time::Instant;
//!
//! let mut s = Semaphore::new(SemaphoreConfig::new("/sem", 2, "mutex-id", "lease-id"));
//! s.handle_session(Instant::ZERO, SessionChange::Connected { session_id: 7 });
//! s.acquire(Instant::ZERO, None);
//! let (_, create) = s.poll_request().unwrap(); // the mutex first
//! match create {
//!     Request::Create2(c) => assert_eq!(c.path, "/sem/locks/_c_mutex-id-lock-"),
//!     other => panic!("{other:?}"),
//! }
//! assert_eq!(s.poll_request().unwrap().1.op_code(), OpCode::GetChildren);
//! ```

use super::kit::{forward_parts, join, recipe_events, to_parts, Events, Parts};
use alloc::string::String;
use alloc::vec::Vec;
use bytes::Bytes;

use super::lock::{compact_acl, Lock, LockConfig, LockEvent, LockKind, LostReason};
use super::{Machine, Recipe, SessionChange};
use crate::error::Error;
use crate::proto::{Acl, ErrorCode};
use crate::time::Instant;

/// Curator's name of the mutex directory under the semaphore's path.
pub const LOCKS: &str = "locks";
/// Curator's name of the lease directory under the semaphore's path.
pub const LEASES: &str = "leases";

/// How many times an attempt starts over after its waiting lease node was deleted by
/// someone else, before it ends with `Failed`.
pub const MAX_RESTARTS: u32 = 8;

/// How to take a lease.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct SemaphoreConfig {
    /// The semaphore's path (`<path>/locks`, `<path>/leases` below it).
    pub path: String,
    /// At most this many holders (every participant must use the same number). At
    /// least 1.
    pub max_leases: u32,
    /// A fresh unique id (a UUID string from the driver's entropy) for our mutex node.
    pub mutex_id: String,
    /// A fresh unique id for our lease node: how a lost create is found again.
    pub lease_id: String,
    /// Data stored in the lease node.
    pub data: Bytes,
    /// ACL of our nodes and of the parents we create.
    pub acl: Vec<Acl>,
}

impl SemaphoreConfig {
    /// A config with empty data and the open ACL.
    pub fn new(path: &str, max_leases: u32, mutex_id: &str, lease_id: &str) -> Self {
        SemaphoreConfig {
            path: path.into(),
            max_leases,
            mutex_id: mutex_id.into(),
            lease_id: lease_id.into(),
            data: Bytes::new(),
            acl: Acl::open_unsafe(),
        }
    }

    /// The mutex directory, `<path>/locks`.
    pub fn locks_dir(&self) -> String {
        join(&self.path, LOCKS)
    }

    /// The lease directory, `<path>/leases`.
    pub fn leases_dir(&self) -> String {
        join(&self.path, LEASES)
    }
}

/// What a semaphore attempt reports.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum SemaphoreEvent {
    /// We hold a lease.
    Acquired {
        /// The lease node's full path.
        lease: String,
    },
    /// Connection lost while holding: the lease may be gone.
    Suspended,
    /// Same session back and the lease node verified.
    Reconnected,
    /// The lease is gone (session expired or closed, or the node was deleted).
    Lost {
        /// Why.
        reason: LostReason,
    },
    /// The deadline passed before a lease was free (our nodes are being removed).
    TimedOut,
    /// Released (or cancelled while waiting): no lease node of ours is left.
    Released,
    /// The attempt failed (session ended while waiting, no permission, ...).
    Failed {
        /// The cause.
        error: Error,
    },
}

impl SemaphoreEvent {
    /// Does this event end the attempt?
    pub fn ends_attempt(&self) -> bool {
        !matches!(
            self,
            SemaphoreEvent::Acquired { .. }
                | SemaphoreEvent::Suspended
                | SemaphoreEvent::Reconnected
        )
    }

    /// For a caller waiting for a lease: `Some` when the wait is over — `Ok(Some(lease))`
    /// held, `Ok(None)` timed out, `Err` why it cannot be had.
    pub fn acquire_outcome(&self) -> Option<Result<Option<String>, Error>> {
        match self {
            SemaphoreEvent::Acquired { lease } => Some(Ok(Some(lease.clone()))),
            SemaphoreEvent::TimedOut => Some(Ok(None)),
            SemaphoreEvent::Failed { error } => Some(Err(error.clone())),
            SemaphoreEvent::Lost { reason } => Some(Err(reason.error())),
            SemaphoreEvent::Released => Some(Err(Error::Closed)),
            SemaphoreEvent::Suspended | SemaphoreEvent::Reconnected => None,
        }
    }

    /// For a caller waiting for a release: `Some` when it is over (a lost lease is
    /// released too: its node is gone).
    pub fn release_outcome(&self) -> Option<Result<(), Error>> {
        match self {
            SemaphoreEvent::Released | SemaphoreEvent::Lost { .. } | SemaphoreEvent::TimedOut => {
                Some(Ok(()))
            }
            SemaphoreEvent::Failed { error } => Some(Err(error.clone())),
            _ => None,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Phase {
    Idle,
    /// Waiting for the mutex.
    Mutex,
    /// Holding the mutex, waiting for a lease.
    Lease,
    Held,
    /// The final event was reported; the locks clean up.
    Ended,
}

/// One semaphore attempt (and its hold). See the [module docs](self).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Semaphore {
    config: SemaphoreConfig,
    mutex: Lock,
    lease: Lock,
    mutex_started: bool,
    lease_started: bool,
    deadline: Option<Instant>,
    /// Lease nodes deleted by someone else while we waited (each one restarted).
    restarts: u32,
    /// Our lease node was deleted while we waited: a new lease starts once the old
    /// machine is done.
    restart_pending: bool,
    session_id: i64,
    suspended: bool,
    phase: Phase,
    held: Option<String>,
    events: Events<SemaphoreEvent>,
}

impl Semaphore {
    /// An attempt that does nothing until [`acquire`](Self::acquire).
    pub fn new(config: SemaphoreConfig) -> Semaphore {
        let mut m = LockConfig::new(&config.locks_dir(), LockKind::Exclusive, &config.mutex_id);
        m.acl = compact_acl(&config.acl);
        let mut l = LockConfig::new(
            &config.leases_dir(),
            LockKind::Lease {
                max: config.max_leases,
            },
            &config.lease_id,
        );
        l.acl = compact_acl(&config.acl);
        l.data = config.data.clone();
        Semaphore {
            mutex: Lock::new(m),
            lease: Lock::new(l),
            config,
            mutex_started: false,
            lease_started: false,
            deadline: None,
            restarts: 0,
            restart_pending: false,
            session_id: 0,
            suspended: false,
            phase: Phase::Idle,
            held: None,
            events: Events::default(),
        }
    }

    /// The configuration.
    pub fn config(&self) -> &SemaphoreConfig {
        &self.config
    }

    /// The lease node's full path while held.
    pub fn lease(&self) -> Option<&str> {
        match self.phase {
            Phase::Held => self.held.as_deref(),
            _ => None,
        }
    }

    /// Held with the connection up.
    pub fn is_held(&self) -> bool {
        self.phase == Phase::Held && self.lease.is_held()
    }

    /// How many times this attempt started over because its waiting lease node was
    /// deleted by someone else.
    pub fn restarts(&self) -> u32 {
        self.restarts
    }

    /// Has the attempt reported its final event?
    pub fn has_ended(&self) -> bool {
        self.phase == Phase::Ended
    }

    /// Starts the attempt; `deadline` bounds the wait. Only the first call counts;
    /// the outcome comes as an event ([`SemaphoreEvent::acquire_outcome`]).
    pub fn acquire(&mut self, now: Instant, deadline: Option<Instant>) {
        if self.phase != Phase::Idle {
            return;
        }
        if self.config.max_leases == 0 {
            // No lease can ever be had: ZooKeeper's "bad arguments".
            self.finish(SemaphoreEvent::Failed {
                error: Error::Server(ErrorCode::BadArguments),
            });
            return;
        }
        self.phase = Phase::Mutex;
        self.mutex_started = true;
        self.deadline = deadline;
        self.mutex.acquire(now, deadline);
        self.pump(now);
    }

    /// Releases the lease, or gives up waiting; `Released` follows once our nodes are
    /// deleted.
    pub fn release(&mut self, now: Instant) {
        if self.stop_restart(SemaphoreEvent::Released, now) {
            return self.pump(now);
        }
        match self.phase {
            Phase::Idle => self.finish(SemaphoreEvent::Released),
            Phase::Ended => {}
            _ => {
                if self.lease_started {
                    self.lease.release(now);
                }
                self.mutex.release(now);
            }
        }
        self.pump(now);
    }

    /// Ends an attempt between two lease machines (the old one reported already).
    fn stop_restart(&mut self, event: SemaphoreEvent, now: Instant) -> bool {
        if !self.restart_pending {
            return false;
        }
        self.restart_pending = false;
        self.finish(event);
        self.mutex.release(now);
        true
    }

    fn finish(&mut self, event: SemaphoreEvent) {
        if self.phase != Phase::Ended {
            self.phase = Phase::Ended;
            self.held = None;
            self.events.emit(event);
        }
    }

    /// Moves the two locks' events into ours until both are quiet.
    fn pump(&mut self, now: Instant) {
        loop {
            let mut any = false;
            while let Some(e) = self.mutex.poll_event() {
                any = true;
                self.on_mutex(now, e);
            }
            while let Some(e) = self.lease.poll_event() {
                any = true;
                self.on_lease(now, e);
            }
            if self.restart_pending && self.lease.is_done() {
                self.restart_pending = false;
                self.restart_lease(now);
                any = true;
            }
            if !any {
                break;
            }
        }
    }

    /// A new lease machine with a new id (`<lease_id>-<n>`: its own protected prefix),
    /// on the session as we know it. The old one is done: nothing of it is in flight, so
    /// op ids may start over (a late watch of the old one names a path no longer ours).
    fn restart_lease(&mut self, now: Instant) {
        let mut config = self.lease.config().clone();
        config.id = alloc::format!("{}-{}", self.config.lease_id, self.restarts);
        self.lease = Lock::new(config);
        self.lease.handle_session(
            now,
            SessionChange::Connected {
                session_id: self.session_id,
            },
        );
        if self.suspended {
            self.lease.handle_session(now, SessionChange::Suspended);
        }
        let deadline = self.deadline;
        self.lease.acquire(now, deadline);
    }

    fn on_mutex(&mut self, now: Instant, e: LockEvent) {
        if self.lease_started {
            return; // the lease decides; the mutex only cleans up
        }
        match e {
            LockEvent::Acquired { .. } => {
                if self.phase == Phase::Mutex {
                    self.phase = Phase::Lease;
                    self.lease_started = true;
                    // The mutex's deadline passed with it: the lease's own is the same.
                    let deadline = self.deadline;
                    self.lease.acquire(now, deadline);
                } else {
                    self.mutex.release(now);
                }
            }
            LockEvent::NotAcquired => self.finish(SemaphoreEvent::TimedOut),
            LockEvent::Failed { error } => self.finish(SemaphoreEvent::Failed { error }),
            LockEvent::Lost { reason } => self.finish(SemaphoreEvent::Failed {
                error: reason.error(),
            }),
            LockEvent::Released | LockEvent::Cancelled => self.finish(SemaphoreEvent::Released),
            _ => {}
        }
    }

    fn on_lease(&mut self, now: Instant, e: LockEvent) {
        match e {
            LockEvent::Acquired { node, .. } => {
                if self.phase == Phase::Lease {
                    self.phase = Phase::Held;
                    let lease = join(&self.config.leases_dir(), &node);
                    self.held = Some(lease.clone());
                    self.events.emit(SemaphoreEvent::Acquired { lease });
                }
                self.mutex.release(now);
            }
            LockEvent::Suspended if self.phase == Phase::Held => {
                self.events.emit(SemaphoreEvent::Suspended)
            }
            LockEvent::Reconnected if self.phase == Phase::Held => {
                self.events.emit(SemaphoreEvent::Reconnected)
            }
            LockEvent::NotAcquired => {
                self.finish(SemaphoreEvent::TimedOut);
                self.mutex.release(now);
            }
            LockEvent::Failed {
                error: Error::Server(ErrorCode::NoNode),
            } if self.phase == Phase::Lease && self.restarts < MAX_RESTARTS => {
                // Our waiting lease was deleted by someone else: start over with a new
                // node, still holding the mutex (Curator: RETRY_DUE_TO_MISSING_NODE).
                self.restarts += 1;
                self.restart_pending = true;
            }
            LockEvent::Failed { error } => {
                self.finish(SemaphoreEvent::Failed { error });
                self.mutex.release(now);
            }
            LockEvent::Lost { reason } => {
                self.finish(SemaphoreEvent::Lost { reason });
                self.mutex.release(now);
            }
            LockEvent::Released | LockEvent::Cancelled => {
                self.finish(SemaphoreEvent::Released);
                self.mutex.release(now);
            }
            _ => {}
        }
    }
}

/// Its parts: the mutex (0: even op ids) and the lease (1: odd).
impl Parts for Semaphore {
    type Part = Lock;

    fn count(&self) -> usize {
        2
    }

    fn part(&self, i: usize) -> &Lock {
        if i == 0 {
            &self.mutex
        } else {
            &self.lease
        }
    }

    fn part_mut(&mut self, i: usize) -> &mut Lock {
        if i == 0 {
            &mut self.mutex
        } else {
            &mut self.lease
        }
    }
}

impl Machine for Semaphore {
    forward_parts!(pump; handle_reply, handle_watch, poll_request);

    fn handle_session(&mut self, now: Instant, change: SessionChange) {
        match change {
            SessionChange::Connected { session_id } | SessionChange::Reconnected { session_id } => {
                self.session_id = session_id;
                self.suspended = false;
            }
            SessionChange::Suspended => self.suspended = true,
            SessionChange::Expired | SessionChange::Closed => {
                if let Some(error) = change.end_error() {
                    self.stop_restart(SemaphoreEvent::Failed { error }, now);
                }
            }
        }
        to_parts::session(self, now, change);
        self.pump(now);
    }

    fn handle_timeout(&mut self, now: Instant) {
        if self.deadline.is_some_and(|d| now >= d) {
            self.stop_restart(SemaphoreEvent::TimedOut, now);
        }
        self.mutex.handle_timeout(now);
        if self.lease_started {
            self.lease.handle_timeout(now);
        }
        self.pump(now);
    }

    fn handle_abandon(&mut self, now: Instant) {
        self.stop_restart(SemaphoreEvent::Released, now);
        self.mutex.handle_abandon(now);
        if self.lease_started {
            self.lease.handle_abandon(now);
        }
        self.pump(now);
        if self.phase == Phase::Idle {
            self.finish(SemaphoreEvent::Released);
        }
    }

    fn poll_timeout(&self) -> Option<Instant> {
        let a = self.mutex.poll_timeout();
        let b = if self.lease_started {
            self.lease.poll_timeout()
        } else {
            None
        };
        // Between two lease machines the attempt's own deadline counts too.
        let b = match (b, self.deadline.filter(|_| self.restart_pending)) {
            (Some(x), Some(y)) => Some(x.min(y)),
            (x, y) => x.or(y),
        };
        match (a, b) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    fn is_done(&self) -> bool {
        self.phase == Phase::Ended
            && !self.restart_pending
            && self.events.is_empty()
            && (!self.mutex_started || self.mutex.is_done())
            && (!self.lease_started || self.lease.is_done())
    }
}

recipe_events!(Semaphore => SemaphoreEvent, events.poll);
