//! Several exclusive locks taken as one, all or none (Apache Curator's
//! `InterProcessMultiLock` over `InterProcessMutex`es), fenced per lock.
//!
//! A multi-lock is a composite of ordinary exclusive [`Lock`] machines, one per path:
//! each path is a Curator-compatible lock (`<path>/_c_<id>-<i>-lock-<seq>`, see the
//! [lock's module docs](super::lock)), so a Curator `InterProcessMutex` on any of the
//! paths excludes us and we exclude it; the multi-lock adds no node of its own.
//!
//! # Protocol
//!
//! 1. The paths are sorted (byte order) and deduplicated when the machine is made; an
//!    empty set, more than [`MAX_LOCKS`] paths or an invalid path ends the attempt at
//!    once with `Failed` (nothing sent).
//! 2. The locks are acquired **one at a time, in that order**: lock `i + 1` is started
//!    only once lock `i` reported `Acquired`. Every lock gets the attempt's deadline.
//! 3. Once the last one is acquired and every lock is held with the connection up and
//!    nothing heard that questions it (a lock acquired before a reconnect is verified
//!    by its own machine first; one whose directory changed reads its node first:
//!    [`Lock::is_held_unquestioned`]), the multi-lock reports [`MultiLockEvent::Acquired`] with each lock's fencing token.
//! 4. Any way out — the deadline ([`MultiLockEvent::TimedOut`]), a lock that cannot be
//!    had ([`MultiLockEvent::Failed`]), a held lock lost while still acquiring the
//!    rest, a release ([`MultiLockEvent::Released`]), a cancel
//!    ([`MultiLockEvent::Cancelled`]) or a dropped handle — releases every lock
//!    started, held or pending (each lock's machine deletes its node, a create whose
//!    reply was lost included). That final event is reported only once **every** lock
//!    machine is done: when a caller hears `TimedOut`, `Failed`, `Released` or
//!    `Cancelled`, no node of the attempt is left (or the session that owned them
//!    ended). A release one lock's server refused for good ends as `Failed`, never as
//!    `Released`.
//! 5. While held, [`MultiLockEvent::Lost`] (any one lock lost: the session ended or
//!    its node was deleted) is reported at once, naming the path, and the other locks
//!    are released behind it.
//!
//! # Why two multi-locks cannot deadlock
//!
//! A deadlock needs a cycle of waiters, each holding a lock the next one waits for.
//! Every multi-lock waits for at most one lock at a time, and only while holding locks
//! whose paths sort strictly *before* the one it waits for (it acquires in sorted
//! order and never goes back). Along a cycle `A₁ → A₂ → … → A₁` (Aₖ waits for a path
//! `pₖ` held by Aₖ₊₁), Aₖ₊₁ holds `pₖ` and waits for `pₖ₊₁`, so `pₖ < pₖ₊₁`; going
//! around gives `p₁ < p₁`: no cycle. Two multi-locks over `{a, b}` and `{b, c}` (or
//! `{b, a}` given in the opposite order) both take the smaller path first. Plain
//! locks hold one path and wait for none while holding, so they cannot close a cycle
//! either. (Curator's `InterProcessMultiLock` takes its locks in the order it was
//! given: a Curator multi-lock over the same paths in another order is outside this
//! argument, and can deadlock against us as against itself until a timeout ends it.)
//!
//! # Fencing
//!
//! [`MultiLockEvent::Acquired`] carries one [`HeldLock`] per path, in sorted order,
//! each with its lock's fencing token (the creation zxid of our node in that path): a
//! resource guarded by one path checks that path's token, as with a single lock.
//!
//! # Session semantics
//!
//! While held, `Suspended` is reported once when the first lock hears of a
//! disconnection, and `Reconnected` once, when every lock is verified again (each
//! lock's own `sync` + `exists`). `Lost` ends the hold. While acquiring, a reconnect is
//! each lock's business; an expiry ends the attempt with `Failed`.
//!
//! # Cost
//!
//! `k` locks cost `k` times a single lock's requests (3 each uncontended: create, list,
//! delete), and `k` round trips to acquire: a lock is not started before the previous
//! one is held (starting them all at once would hold waits in an order no other
//! multi-lock agreed to).
//!
//! ```
//! use zk_recipes::recipe::multi_lock::{MultiLock, MultiLockConfig};
//! use zk_recipes::recipe::{Machine, Recipe, SessionChange};
//! use zk_recipes::proto::Request;
//! use zk_recipes::time::Instant;
//!
//! let mut m = MultiLock::new(MultiLockConfig::new(&["/locks/b", "/locks/a", "/locks/b"], "id"));
//! assert_eq!(m.paths(), ["/locks/a", "/locks/b"]); // sorted, deduplicated
//! m.handle_session(Instant::ZERO, SessionChange::Connected { session_id: 7 });
//! m.acquire(Instant::ZERO, None);
//! match m.poll_request().unwrap().1 {
//!     Request::Create2(c) => assert_eq!(c.path, "/locks/a/_c_id-0-lock-"), // /locks/a first
//!     other => panic!("{other:?}"),
//! }
//! ```

use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;
use bytes::Bytes;
use core::mem;

use super::kit::{forward_parts, recipe_events, to_parts, Events, Parts};
use super::lock::{compact_acl, Lock, LockConfig, LockEvent, LockKind, LostReason};
use super::{Machine, Recipe};
use crate::error::Error;
use crate::proto::{validate_path, Acl, ErrorCode};
use crate::time::Instant;

/// The most paths one multi-lock takes (bounded memory; more is `BadArguments`).
pub const MAX_LOCKS: usize = 256;

/// How to take several locks.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct MultiLockConfig {
    /// The lock paths (each a lock's contention directory), in any order, repeats
    /// allowed: the machine sorts and deduplicates them.
    pub paths: Vec<String>,
    /// A fresh unique id for this attempt (a UUID string from the driver's entropy):
    /// the lock on the `i`-th path (sorted) uses `<id>-<i>`.
    pub id: String,
    /// Data stored in each of our lock nodes.
    pub data: Bytes,
    /// ACL of our nodes and of the parents we create.
    pub acl: Vec<Acl>,
}

impl MultiLockConfig {
    /// A config with empty data and the open ACL.
    pub fn new<S: AsRef<str>>(paths: &[S], id: &str) -> Self {
        MultiLockConfig {
            paths: paths.iter().map(|p| String::from(p.as_ref())).collect(),
            id: id.into(),
            data: Bytes::new(),
            acl: Acl::open_unsafe(),
        }
    }
}

/// One lock of a held multi-lock.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct HeldLock {
    /// The lock's path.
    pub path: String,
    /// Our node's name in it.
    pub node: String,
    /// Its fencing token (our node's creation zxid): strictly increasing across the
    /// holders of that path.
    pub fencing_token: i64,
}

/// What a multi-lock reports. `Acquired` starts a hold; `Suspended` and `Reconnected`
/// are edges while holding; `TimedOut`, `Failed`, `Lost`, `Released` and `Cancelled`
/// end the attempt (one of them, once).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum MultiLockEvent {
    /// Every lock is held (one entry per path, sorted).
    Acquired {
        /// The locks and their fencing tokens.
        locks: Vec<HeldLock>,
    },
    /// Connection lost while holding: some lock may be gone. Stop touching the
    /// resources (or rely on the fencing tokens) until `Reconnected`.
    Suspended,
    /// Every lock verified again on the same session.
    Reconnected,
    /// A held lock is gone (the others are being released).
    Lost {
        /// The path of the lock lost first.
        path: String,
        /// Why.
        reason: LostReason,
    },
    /// The deadline passed before every lock was held; no node of ours is left.
    TimedOut,
    /// Released: no node of ours is left.
    Released,
    /// Given up before every lock was held: no node of ours is left.
    Cancelled,
    /// The attempt failed (a lock refused, the session ended while acquiring, an
    /// invalid path, a release refused for good, ...); every other node is deleted.
    Failed {
        /// The cause.
        error: Error,
    },
}

impl MultiLockEvent {
    /// Does this event end the attempt?
    pub fn ends_attempt(&self) -> bool {
        !matches!(
            self,
            MultiLockEvent::Acquired { .. }
                | MultiLockEvent::Suspended
                | MultiLockEvent::Reconnected
        )
    }

    /// For a caller waiting to acquire: `Some` when the wait is over — `Ok(Some(locks))`
    /// held, `Ok(None)` timed out, `Err` why it cannot be had.
    pub fn acquire_outcome(&self) -> Option<Result<Option<Vec<HeldLock>>, Error>> {
        match self {
            MultiLockEvent::Acquired { locks } => Some(Ok(Some(locks.clone()))),
            MultiLockEvent::TimedOut => Some(Ok(None)),
            MultiLockEvent::Failed { error } => Some(Err(error.clone())),
            MultiLockEvent::Lost { reason, .. } => Some(Err(reason.error())),
            MultiLockEvent::Released | MultiLockEvent::Cancelled => Some(Err(Error::Closed)),
            MultiLockEvent::Suspended | MultiLockEvent::Reconnected => None,
        }
    }

    /// For a caller waiting for a release: `Some` when it is over (a lost hold is
    /// released too: its other nodes are deleted behind it).
    pub fn release_outcome(&self) -> Option<Result<(), Error>> {
        match self {
            MultiLockEvent::Released
            | MultiLockEvent::Cancelled
            | MultiLockEvent::TimedOut
            | MultiLockEvent::Lost { .. } => Some(Ok(())),
            MultiLockEvent::Failed { error } => Some(Err(error.clone())),
            _ => None,
        }
    }
}

/// Where the attempt stands; each variant carries the data that exists only in it.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum Phase {
    Idle,
    /// `locks[..held.len()]` are held; `locks[held.len()]` is being acquired — or, once
    /// `held` has every lock, each must be verified held (connection up) before
    /// `Acquired`.
    Acquiring {
        held: Vec<HeldLock>,
    },
    /// `Acquired` was reported.
    Held {
        held: Vec<HeldLock>,
        /// `Suspended` was reported, `Reconnected` not yet.
        suspended: bool,
    },
    /// Every started lock is being released; `end` is reported once all are done
    /// (`None`: the final event was reported already, a `Lost`).
    Unwinding {
        end: Option<MultiLockEvent>,
    },
    /// The final event was reported.
    Done,
}

/// One multi-lock attempt (and its hold). See the [module docs](self).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct MultiLock {
    config: MultiLockConfig,
    /// One exclusive lock per path, sorted by path.
    locks: Vec<Lock>,
    /// `locks[..started]` were told to acquire (the rest never sent anything).
    started: usize,
    deadline: Option<Instant>,
    phase: Phase,
    events: Events<MultiLockEvent>,
}

impl MultiLock {
    /// An attempt that does nothing until [`acquire`](Self::acquire).
    pub fn new(config: MultiLockConfig) -> MultiLock {
        let paths = sorted_paths(&config.paths);
        let acl = compact_acl(&config.acl);
        let locks = paths
            .iter()
            .take(MAX_LOCKS)
            .enumerate()
            .map(|(i, p)| {
                let mut c = LockConfig::new(p, LockKind::Exclusive, &format!("{}-{i}", config.id));
                c.acl = acl.clone();
                c.data = config.data.clone();
                Lock::new(c)
            })
            .collect();
        MultiLock {
            config,
            locks,
            started: 0,
            deadline: None,
            phase: Phase::Idle,
            events: Events::default(),
        }
    }

    /// The configuration.
    pub fn config(&self) -> &MultiLockConfig {
        &self.config
    }

    /// The paths, sorted and deduplicated: the order the locks are taken in.
    pub fn paths(&self) -> Vec<&str> {
        self.locks.iter().map(|l| l.config().dir.as_str()).collect()
    }

    /// The locks while held (after `Acquired`, before the final event).
    pub fn held(&self) -> Option<&[HeldLock]> {
        match &self.phase {
            Phase::Held { held, .. } => Some(held),
            _ => None,
        }
    }

    /// Held, every lock verified, connection up: safe to act.
    pub fn is_held(&self) -> bool {
        matches!(
            self.phase,
            Phase::Held {
                suspended: false,
                ..
            }
        ) && self.locks.iter().all(Lock::is_held)
    }

    /// How many locks are held now (while acquiring or holding).
    pub fn held_count(&self) -> usize {
        match &self.phase {
            Phase::Acquiring { held } | Phase::Held { held, .. } => held.len(),
            _ => 0,
        }
    }

    /// Has the attempt reported its final event?
    pub fn has_ended(&self) -> bool {
        self.phase == Phase::Done
    }

    /// Starts the attempt; `deadline` bounds the wait (`Some(now)` tries each lock
    /// once). Only the first call counts; the outcome comes as an event
    /// ([`MultiLockEvent::acquire_outcome`]).
    pub fn acquire(&mut self, now: Instant, deadline: Option<Instant>) {
        if self.phase != Phase::Idle {
            return;
        }
        if let Some(error) = self.invalid() {
            self.phase = Phase::Done;
            self.events.emit(MultiLockEvent::Failed { error });
            return;
        }
        self.deadline = deadline;
        self.phase = Phase::Acquiring { held: Vec::new() };
        self.start_next(now);
        self.pump(now);
    }

    /// Releases every lock (or gives up acquiring); `Released` (or `Cancelled`) follows
    /// once every node of ours is deleted.
    pub fn release(&mut self, now: Instant) {
        let end = match self.phase {
            Phase::Idle => {
                self.phase = Phase::Done;
                self.events.emit(MultiLockEvent::Cancelled);
                return;
            }
            Phase::Acquiring { .. } => MultiLockEvent::Cancelled,
            Phase::Held { .. } => MultiLockEvent::Released,
            Phase::Unwinding { .. } | Phase::Done => return,
        };
        self.unwind(now, Some(end));
        self.pump(now);
    }

    /// Why the configured paths cannot be taken, if they cannot.
    fn invalid(&self) -> Option<Error> {
        let distinct = sorted_paths(&self.config.paths).len();
        if distinct == 0 || distinct > MAX_LOCKS {
            return Some(Error::Server(ErrorCode::BadArguments));
        }
        self.locks.iter().find_map(|l| {
            let path = &l.config().dir;
            validate_path(path).err().map(|error| Error::InvalidPath {
                path: path.clone(),
                error,
            })
        })
    }

    /// Starts the next lock, if one is left to start.
    fn start_next(&mut self, now: Instant) {
        let Phase::Acquiring { held } = &self.phase else {
            return;
        };
        let next = held.len();
        if next == self.started && next < self.locks.len() {
            self.started += 1;
            let deadline = self.deadline;
            // A plain lock answers `Pending`: its outcome comes as an event.
            let _ = self.locks[next].acquire(now, deadline);
        }
    }

    /// Releases every started lock that has not ended; `end` is reported once all are
    /// done.
    fn unwind(&mut self, now: Instant, end: Option<MultiLockEvent>) {
        self.phase = Phase::Unwinding { end };
        for lock in &mut self.locks[..self.started] {
            if !lock.has_ended() {
                let _ = lock.release(now);
            }
        }
    }

    /// Moves the locks' events into ours until all are quiet, then reports what the
    /// whole now is.
    fn pump(&mut self, now: Instant) {
        loop {
            let mut any = false;
            for i in 0..self.started {
                while let Some(e) = self.locks[i].poll_event() {
                    any = true;
                    self.on_lock(now, i, e);
                }
            }
            if !any {
                break;
            }
        }
        self.settle();
    }

    /// What the whole is after the locks' events: `Acquired` once every lock is held
    /// and verified, `Reconnected` once every lock is verified again, the final event
    /// once every lock is done.
    fn settle(&mut self) {
        let all_held = self.locks.iter().all(Lock::is_held_unquestioned);
        match &mut self.phase {
            Phase::Acquiring { held } if held.len() == self.locks.len() && all_held => {
                let held = mem::take(held);
                self.events.emit(MultiLockEvent::Acquired {
                    locks: held.clone(),
                });
                self.phase = Phase::Held {
                    held,
                    suspended: false,
                };
            }
            Phase::Held { suspended, .. } if *suspended && all_held => {
                *suspended = false;
                self.events.emit(MultiLockEvent::Reconnected);
            }
            Phase::Unwinding { end } if self.locks[..self.started].iter().all(Lock::is_done) => {
                if let Some(end) = end.take() {
                    self.events.emit(end);
                }
                self.phase = Phase::Done;
            }
            _ => {}
        }
    }

    /// One event of lock `i`.
    fn on_lock(&mut self, now: Instant, i: usize, e: LockEvent) {
        let path = self.locks[i].config().dir.clone();
        match (&mut self.phase, e) {
            (
                Phase::Acquiring { held },
                LockEvent::Acquired {
                    fencing_token,
                    node,
                },
            ) if i == held.len() => {
                held.push(HeldLock {
                    path,
                    node,
                    fencing_token,
                });
                self.start_next(now);
            }
            (Phase::Acquiring { .. }, LockEvent::NotAcquired) => {
                self.unwind(now, Some(MultiLockEvent::TimedOut))
            }
            (Phase::Acquiring { .. }, LockEvent::Failed { error }) => {
                self.unwind(now, Some(MultiLockEvent::Failed { error }))
            }
            (Phase::Acquiring { .. }, LockEvent::Lost { reason }) => self.unwind(
                now,
                Some(MultiLockEvent::Failed {
                    error: reason.error(),
                }),
            ),
            (Phase::Held { suspended, .. }, LockEvent::Suspended) if !*suspended => {
                *suspended = true;
                self.events.emit(MultiLockEvent::Suspended);
            }
            (Phase::Held { .. }, LockEvent::Lost { reason }) => {
                self.events.emit(MultiLockEvent::Lost { path, reason });
                self.unwind(now, None);
            }
            (Phase::Held { .. }, LockEvent::Failed { error }) => {
                self.unwind(now, Some(MultiLockEvent::Failed { error }))
            }
            // A release refused for good is never reported as a success.
            (Phase::Unwinding { end }, LockEvent::Failed { error }) if end.is_some() => {
                *end = Some(MultiLockEvent::Failed { error });
            }
            (Phase::Unwinding { .. }, LockEvent::Acquired { .. }) => {
                // Acquired as we gave up (the lock was told to release already).
            }
            (Phase::Acquiring { .. } | Phase::Held { .. }, e) if e.ends_attempt() => {
                // A lock ended in a way its phase does not expect (it was not asked to
                // release): end the whole rather than hold a part of it.
                self.unwind(
                    now,
                    Some(MultiLockEvent::Failed {
                        error: Error::Closed,
                    }),
                )
            }
            _ => {}
        }
    }

    /// The rules the types cannot spell, checked after every input in debug builds.
    fn check(&self) {
        debug_assert!(self.started <= self.locks.len());
        match &self.phase {
            Phase::Idle => debug_assert_eq!(self.started, 0),
            Phase::Acquiring { held } => {
                debug_assert!(held.len() <= self.started);
                debug_assert!(self.started <= held.len() + 1);
            }
            Phase::Held { held, .. } => {
                debug_assert_eq!(held.len(), self.locks.len());
                debug_assert_eq!(self.started, self.locks.len());
            }
            Phase::Unwinding { .. } | Phase::Done => {}
        }
    }

    fn after_input(&mut self, now: Instant) {
        self.pump(now);
        self.check();
    }
}

/// `paths` sorted (byte order) and deduplicated: the order locks are taken in.
fn sorted_paths(paths: &[String]) -> Vec<&str> {
    let mut sorted: Vec<&str> = paths.iter().map(String::as_str).collect();
    sorted.sort_unstable();
    sorted.dedup();
    sorted
}

impl Parts for MultiLock {
    type Part = Lock;

    fn count(&self) -> usize {
        self.locks.len()
    }

    /// `locks[..started]` were told to acquire (the rest never sent anything).
    fn started(&self) -> usize {
        self.started
    }

    fn part(&self, i: usize) -> &Lock {
        &self.locks[i]
    }

    fn part_mut(&mut self, i: usize) -> &mut Lock {
        &mut self.locks[i]
    }

    /// Every lock is ours: the attempt's deadline still ends the wait until the last
    /// one is verified.
    fn own_deadline(&self) -> Option<Instant> {
        match &self.phase {
            Phase::Acquiring { held } if held.len() == self.locks.len() => self.deadline,
            _ => None,
        }
    }
}

impl Machine for MultiLock {
    forward_parts!(
        after_input;
        handle_reply,
        handle_shared_reply,
        handle_watch,
        handle_session,
        poll_request,
        yields,
        poll_timeout,
    );

    fn handle_timeout(&mut self, now: Instant) {
        to_parts::timeout(self, now);
        self.pump(now);
        // Every lock is ours but one is not verified yet (a reconnect): the deadline
        // still ends the wait.
        let past = self.deadline.is_some_and(|d| now >= d);
        if past && matches!(self.phase, Phase::Acquiring { .. }) {
            self.unwind(now, Some(MultiLockEvent::TimedOut));
        }
        self.after_input(now);
    }

    fn handle_abandon(&mut self, now: Instant) {
        to_parts::abandon(self, now);
        // Nobody listens any more (as the kit does): no event, only the cleanup.
        self.events.clear();
        self.phase = match self.phase {
            Phase::Idle | Phase::Done => Phase::Done,
            _ => Phase::Unwinding { end: None },
        };
        self.after_input(now);
    }

    fn is_done(&self) -> bool {
        self.phase == Phase::Done && self.events.is_empty() && to_parts::all_done(self)
    }
}

recipe_events!(MultiLock => MultiLockEvent, events.poll);
