//! Exclusive, read and write locks (ZooKeeper recipes "Locks" and "Shared locks";
//! paper: "Simple locks without herd effect"), Curator-compatible and fenced.
//!
//! # Protocol
//!
//! 1. Create `<dir>/_c_<id>-<marker>` as `EPHEMERAL_SEQUENTIAL` with `create2` and, in
//!    the same breath, `getChildren(<dir>)`: one round trip, since the server executes a
//!    session's requests in order and the listing therefore contains our node. Markers:
//!    `lock-` (exclusive, Curator's `InterProcessMutex`), `__READ__` / `__WRIT__`
//!    (Curator's `InterProcessReadWriteLock`). If `<dir>` is missing, its ancestors are
//!    created as containers in the same pipeline and the pair is sent again.
//! 2. Sort the children by the sequence after their last known marker (unknown
//!    children are ignored). Our *blockers*: every lower contender for exclusive and
//!    write locks; every lower writer for read locks.
//! 3. No blocker: acquired. Otherwise `getData(watch)` on the nearest blocker only (the
//!    predecessor; for a reader the highest lower writer) — no herd. When it goes and it
//!    was our only blocker, we hold the lock without listing again (lower sequence numbers
//!    never reappear); otherwise list again.
//! 4. Holding: a data watch on our own node (unless disabled) reports its deletion by
//!    someone else as `Lost`, and, for revocable locks, `unlock` written into it as
//!    `RevocationRequested`.
//! 5. Release or cancel deletes our node; a delete that hits connection loss is retried
//!    after reconnecting. A create whose reply was lost is found again by its unique
//!    prefix and adopted only if its `ephemeralOwner` is our session.
//!
//! # Fencing
//!
//! `Acquired { fencing_token }` carries the creation zxid of our node. Holders acquire
//! in sequence order and zxids grow with it, so tokens strictly increase from one holder
//! to the next: a protected resource that remembers the highest token it has seen and
//! rejects lower ones cannot be written by a holder whose session has quietly expired.
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
use alloc::string::{String, ToString};
use alloc::vec::Vec;
use bytes::Bytes;

use super::contender;
use super::{OpId, Recipe, RecipeEvent, SessionChange};
use crate::proto::*;
use crate::session::WatchEvent;
use crate::time::Instant;

/// Data a revoker writes into a holder's node (Curator writes `__REVOKE__`; both count).
pub const REVOKE: &[u8] = b"unlock";
const CURATOR_REVOKE: &[u8] = b"__REVOKE__";

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
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LockKind {
    /// Exclusive (`lock-`).
    Exclusive,
    /// Shared with other readers, excluded by writers (`__READ__`).
    Read,
    /// Exclusive against readers and writers (`__WRIT__`).
    Write,
}

impl LockKind {
    fn marker(self) -> &'static str {
        match self {
            LockKind::Exclusive => contender::LOCK,
            LockKind::Read => contender::READ,
            LockKind::Write => contender::WRITE,
        }
    }
}

/// How to take a lock.
#[derive(Clone, Debug)]
pub struct LockConfig {
    /// The contention directory.
    pub dir: String,
    /// Exclusive, read or write.
    pub kind: LockKind,
    /// A fresh unique id per session (a UUID string, as Curator uses) from the driver.
    pub id: String,
    /// Data stored in our node (Curator: the host's address by default; here empty).
    pub data: Bytes,
    /// ACL of our node and of parents we create.
    pub acl: Vec<Acl>,
    /// Watch our own node while waiting too, and report `unlock` written into it.
    pub revocable: bool,
    /// Watch our own node while holding (one read per acquisition) to report its
    /// deletion by someone else as `Lost`. On by default.
    pub watch_own_node: bool,
}

impl LockConfig {
    /// A config with empty data, the open ACL, not revocable, own node watched.
    pub fn new(dir: &str, kind: LockKind, id: &str) -> Self {
        LockConfig {
            dir: dir.into(),
            kind,
            id: id.into(),
            data: Bytes::new(),
            acl: Acl::open_unsafe(),
            revocable: false,
            watch_own_node: true,
        }
    }
}

/// Why a held lock is no longer held.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LostReason {
    /// The session expired (its ephemeral node is or will be gone).
    SessionExpired,
    /// The session was closed.
    SessionClosed,
    /// Our node was deleted by someone else (an administrator or a revoker).
    NodeDeleted,
}

/// What a lock reports. `Acquired`, `NotAcquired`, `Released`, `Cancelled`, `Lost` and
/// `Failed` end an attempt; `Suspended`, `Reconnected` and `RevocationRequested` are
/// edges while holding.
#[derive(Clone, Debug, PartialEq, Eq)]
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
    /// The attempt failed (no permission, bad path, session gone while waiting, ...).
    Failed {
        /// The cause.
        error: ErrorCode,
    },
}

/// A change while holding, as guards report it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
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

    /// Does this event end the attempt (nothing more will follow, except node cleanup)?
    pub fn ends_attempt(&self) -> bool {
        !matches!(
            self,
            LockEvent::Acquired { .. }
                | LockEvent::Suspended
                | LockEvent::Reconnected
                | LockEvent::RevocationRequested
        )
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum Purpose {
    /// A container for an ancestor of the directory.
    Parent,
    /// create2 of our node, in attempt `n`.
    Create(u32),
    /// getChildren paired with create `n` (or a later relisting, `u32::MAX`).
    List(u32),
    /// exists on a child with our prefix, found after a lost create reply.
    Adopt(String),
    /// getData(watch) on the blocker we wait for.
    Blocker(String),
    /// getData(watch) on our own node.
    Own,
    /// exists on our own node after a reconnect: is it still ours?
    Verify,
    /// delete of our node.
    Delete,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    Idle,
    /// Our create is in flight or its outcome unknown.
    Creating,
    /// We have a node and wait (listing or watching a blocker).
    Waiting,
    Held,
    /// Deleting our node: after release, cancel, timeout or failure.
    Deleting,
    Done,
}

/// What to report once our node is deleted.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Finish {
    Released,
    Cancelled,
    NotAcquired,
    Failed(ErrorCode),
}

/// The lock state machine. See the [module docs](self).
#[derive(Debug)]
pub struct Lock {
    config: LockConfig,
    prefix: String,
    state: State,
    session_id: i64,
    /// Our node's name and creation zxid, once known.
    node: Option<(String, i64)>,
    attempt: u32,
    /// The create reply was lost: look for our node by prefix before creating again.
    in_doubt: bool,
    /// Blockers in the last listing (1 means: when it goes, we hold).
    blockers: usize,
    /// Children with our prefix still to check after a lost create reply.
    candidates: Vec<String>,
    /// The blocker we watch now (only its deletion counts: older watches may fire late).
    watching: Option<String>,
    deadline: Option<Instant>,
    /// The deadline passed before the first listing: give up right after it.
    deadline_passed: bool,
    finish: Option<Finish>,
    suspended: bool,
    /// A data watch on our own node is registered (or being registered).
    own_armed: bool,
    revocation_told: bool,
    next_op: OpId,
    ops: Vec<(OpId, Purpose)>,
    requests: VecDeque<(OpId, Request)>,
    events: VecDeque<RecipeEvent>,
}

fn join(dir: &str, name: &str) -> String {
    let mut s = String::with_capacity(dir.len() + name.len() + 1);
    s.push_str(dir);
    if !dir.ends_with('/') {
        s.push('/');
    }
    s.push_str(name);
    s
}

impl Lock {
    /// A lock that does nothing until [`acquire`](Self::acquire).
    pub fn new(config: LockConfig) -> Lock {
        let mut prefix = contender::protected_prefix(&config.id);
        prefix.push_str(config.kind.marker());
        Lock {
            config,
            prefix,
            state: State::Idle,
            session_id: 0,
            node: None,
            attempt: 0,
            in_doubt: false,
            blockers: 0,
            candidates: Vec::new(),
            watching: None,
            deadline: None,
            deadline_passed: false,
            finish: None,
            suspended: false,
            own_armed: false,
            revocation_told: false,
            next_op: 1,
            ops: Vec::new(),
            requests: VecDeque::new(),
            events: VecDeque::new(),
        }
    }

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

    /// Starts acquiring; `deadline` bounds the wait (`Some(now)` is a try-lock).
    pub fn acquire(&mut self, now: Instant, deadline: Option<Instant>) {
        if self.state != State::Idle {
            return;
        }
        if validate_path(&self.config.dir).is_err() {
            self.state = State::Done;
            self.emit(LockEvent::Failed {
                error: ErrorCode::BadArguments,
            });
            return;
        }
        let _ = now; // the deadline is absolute; nothing else depends on the time
        self.deadline = deadline;
        self.state = State::Creating;
        self.send_create();
    }

    /// Releases a held lock (or cancels an attempt). `Released` follows once our node
    /// is deleted.
    pub fn release(&mut self, now: Instant) {
        let _ = now; // commands take `now` like every input; release needs no clock
        let finish = if self.state == State::Held {
            Finish::Released
        } else {
            Finish::Cancelled
        };
        self.stop_with(finish);
    }

    /// Gives up an attempt (or releases a held lock). `Cancelled` follows once whatever
    /// we created is deleted.
    pub fn cancel(&mut self, now: Instant) {
        self.release(now);
    }

    fn op(&mut self, purpose: Purpose, request: Request) {
        let id = self.next_op;
        self.next_op += 1;
        self.ops.push((id, purpose));
        self.requests.push_back((id, request));
    }

    fn emit(&mut self, event: LockEvent) {
        self.events.push_back(RecipeEvent::Lock(event));
    }

    fn our_path(&self) -> Option<String> {
        self.node.as_ref().map(|(n, _)| join(&self.config.dir, n))
    }

    fn send_create(&mut self) {
        self.attempt += 1;
        let create = CreateRequest::new(
            join(&self.config.dir, &self.prefix),
            self.config.data.clone(),
            self.config.acl.clone(),
            CreateMode::EphemeralSequential,
        );
        self.op(Purpose::Create(self.attempt), Request::Create2(create));
        self.list(self.attempt);
    }

    fn list(&mut self, attempt: u32) {
        self.op(
            Purpose::List(attempt),
            Request::GetChildren(PathWatch {
                path: self.config.dir.clone(),
                watch: false,
            }),
        );
    }

    fn send_parents_then_create(&mut self) {
        // Every ancestor, top down, as a container; NodeExists is fine.
        let dir = self.config.dir.clone();
        let mut ends: Vec<usize> = dir
            .match_indices('/')
            .map(|(i, _)| i)
            .filter(|&i| i > 0)
            .collect();
        ends.push(dir.len());
        for end in ends {
            let path = &dir[..end];
            let req = CreateRequest::new(
                path,
                Bytes::new(),
                self.config.acl.clone(),
                CreateMode::Container,
            );
            self.op(Purpose::Parent, Request::CreateContainer(req));
        }
        self.send_create();
    }

    fn watch_node(&mut self, purpose: Purpose, path: String) {
        self.op(purpose, Request::GetData(PathWatch { path, watch: true }));
    }

    /// Holders watch their own node (unless disabled); revocable locks while waiting too.
    fn wants_own_watch(&self) -> bool {
        match self.state {
            State::Held => self.config.watch_own_node || self.config.revocable,
            State::Waiting => self.config.revocable,
            _ => false,
        }
    }

    /// Arms the data watch on our own node unless it is armed already.
    fn arm_own(&mut self) {
        if !self.own_armed {
            if let Some(path) = self.our_path() {
                self.own_armed = true;
                self.watch_node(Purpose::Own, path);
            }
        }
    }

    fn acquired(&mut self) {
        self.state = State::Held;
        let Some((node, czxid)) = self.node.clone() else {
            return;
        };
        self.emit(LockEvent::Acquired {
            fencing_token: czxid,
            node,
        });
        if self.config.watch_own_node || self.config.revocable {
            self.arm_own();
        }
    }

    /// Decides from a listing: held, or wait for the nearest blocker.
    fn evaluate(&mut self, children: &[String]) {
        let Some((ours, _)) = self.node.clone() else {
            return;
        };
        let reader = self.config.kind == LockKind::Read;
        let Some((count, nearest)) = contender::blockers(children, &ours, reader) else {
            // Our node is gone while we wait: deleted by someone else.
            self.node = None;
            return self.fail(ErrorCode::NoNode);
        };
        self.blockers = count;
        match nearest {
            None => self.acquired(),
            Some(_) if self.deadline_passed => self.stop_with(Finish::NotAcquired),
            Some(nearest) => {
                let path = join(&self.config.dir, nearest);
                let name = nearest.to_string();
                self.state = State::Waiting;
                self.watching = Some(name.clone());
                self.watch_node(Purpose::Blocker(name), path);
            }
        }
    }

    /// Blocker `name` is gone; only the one we watch now matters.
    fn blocker_gone(&mut self, name: &str) {
        if self.state != State::Waiting || self.watching.as_deref() != Some(name) {
            return;
        }
        self.watching = None;
        if self.blockers == 1 {
            self.acquired(); // lower sequence numbers never come back
        } else {
            self.list(u32::MAX);
        }
    }

    fn fail(&mut self, error: ErrorCode) {
        self.stop_with(Finish::Failed(error));
    }

    /// Ends the attempt: delete our node if we have one (or may have one), then report.
    fn stop_with(&mut self, finish: Finish) {
        match self.state {
            State::Done => {}
            State::Deleting => {
                // Already on the way out; keep the first reason.
            }
            State::Idle => {
                self.state = State::Done;
                self.report(finish);
            }
            _ => {
                self.finish = Some(finish);
                self.state = State::Deleting;
                if matches!(self.finish, Some(Finish::NotAcquired)) {
                    self.emit(LockEvent::NotAcquired); // tell the caller now; clean up after
                }
                if let Some(path) = self.our_path() {
                    self.op(
                        Purpose::Delete,
                        Request::Delete(DeleteRequest { path, version: -1 }),
                    );
                } else if !self.in_flight(|p| matches!(p, Purpose::Create(_) | Purpose::Adopt(_)))
                    && !self.in_doubt
                {
                    self.done();
                }
                // Otherwise: the create (or the search for it) is in flight; its answer
                // leads to the delete.
            }
        }
    }

    fn in_flight(&self, f: impl Fn(&Purpose) -> bool) -> bool {
        self.ops.iter().any(|(_, p)| f(p))
    }

    fn report(&mut self, finish: Finish) {
        match finish {
            Finish::Released => self.emit(LockEvent::Released),
            Finish::Cancelled => self.emit(LockEvent::Cancelled),
            Finish::NotAcquired => {}
            Finish::Failed(error) => self.emit(LockEvent::Failed { error }),
        }
    }

    fn done(&mut self) {
        self.state = State::Done;
        self.node = None;
        if let Some(f) = self.finish.take() {
            self.report(f);
        }
    }

    fn check_revocation(&mut self, data: &[u8]) {
        if self.config.revocable
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
            self.node = None;
        }
    }

    fn on_create(&mut self, attempt: u32, result: Result<Response, ErrorCode>) {
        if attempt != self.attempt {
            return;
        }
        match result {
            Ok(Response::PathStat { path, stat }) => {
                let name = path.rsplit('/').next().unwrap_or("").to_string();
                self.node = Some((name, stat.czxid));
                self.in_doubt = false;
                if self.config.revocable && self.state != State::Deleting {
                    self.arm_own(); // waiters hear revocation too
                }
                if self.state == State::Deleting {
                    let path = join(
                        &self.config.dir,
                        &self.node.as_ref().map(|n| n.0.clone()).unwrap_or_default(),
                    );
                    self.op(
                        Purpose::Delete,
                        Request::Delete(DeleteRequest { path, version: -1 }),
                    );
                }
                // The paired listing follows and decides.
            }
            Ok(_) => self.fail(ErrorCode::MarshallingError),
            Err(ErrorCode::NoNode) if self.state == State::Creating => {
                self.send_parents_then_create()
            }
            Err(ErrorCode::ConnectionLoss) => {
                // Did it land? Look for our prefix once connected again.
                self.in_doubt = true;
                self.list(u32::MAX - 1);
            }
            Err(ErrorCode::NoNode) => {
                self.state = State::Done;
                self.finish = None;
                self.emit(LockEvent::Cancelled);
            }
            Err(e) if self.state == State::Deleting => {
                let _ = e;
                self.done();
            }
            Err(e) => {
                self.state = State::Done;
                self.emit(LockEvent::Failed { error: e });
            }
        }
    }

    fn on_list(&mut self, attempt: u32, result: Result<Response, ErrorCode>) {
        if attempt != u32::MAX && attempt != u32::MAX - 1 && attempt != self.attempt {
            return; // the listing paired with a create we already retried
        }
        let children = match result {
            Ok(Response::Children(c)) | Ok(Response::Children2 { children: c, .. }) => c,
            Ok(_) => return self.fail(ErrorCode::MarshallingError),
            Err(ErrorCode::ConnectionLoss) => {
                let pending = self.in_flight(|p| matches!(p, Purpose::List(_)));
                if !pending
                    && (self.in_doubt || (self.node.is_some() && self.state == State::Waiting))
                {
                    self.list(attempt); // again once connected
                }
                return;
            }
            Err(ErrorCode::NoNode) if self.in_doubt => {
                // The directory is gone, so is any node of ours: start over (or finish).
                self.in_doubt = false;
                return if self.state == State::Deleting {
                    self.done()
                } else {
                    self.send_create()
                };
            }
            Err(_) => return, // the paired create's error decides
        };
        if self.in_doubt {
            self.in_doubt = false;
            match children.iter().find(|c| c.starts_with(&self.prefix)) {
                Some(found) => {
                    let path = join(&self.config.dir, found);
                    let name = found.clone();
                    self.op(
                        Purpose::Adopt(name),
                        Request::Exists(PathWatch { path, watch: false }),
                    );
                }
                None if self.state == State::Deleting => self.done(),
                None => self.send_create(),
            }
            return;
        }
        if self.state == State::Waiting || self.state == State::Creating {
            self.evaluate(&children);
        }
    }

    /// Checks the next child carrying our prefix, or concludes our create never landed.
    fn next_candidate(&mut self) {
        match self.candidates.pop() {
            Some(name) => {
                let path = join(&self.config.dir, &name);
                self.op(
                    Purpose::Adopt(name),
                    Request::Exists(PathWatch { path, watch: false }),
                );
            }
            None if self.state == State::Deleting => self.done(),
            None => self.send_create(),
        }
    }

    fn on_adopt(&mut self, name: String, result: Result<Response, ErrorCode>) {
        match result {
            Ok(Response::Stat(stat))
                if stat.ephemeral_owner == self.session_id && self.session_id != 0 =>
            {
                self.node = Some((name, stat.czxid));
                if self.state == State::Deleting {
                    if let Some(path) = self.our_path() {
                        self.op(
                            Purpose::Delete,
                            Request::Delete(DeleteRequest { path, version: -1 }),
                        );
                    }
                } else {
                    self.state = State::Waiting;
                    self.list(u32::MAX);
                }
            }
            Err(ErrorCode::ConnectionLoss) => {
                self.candidates.clear();
                self.in_doubt = true;
                self.list(u32::MAX - 1);
            }
            // Not ours (another session's) or gone: try the next one.
            _ => self.next_candidate(),
        }
    }

    fn on_blocker(&mut self, name: &str, result: Result<Response, ErrorCode>) {
        match result {
            Ok(_) => {} // armed: wait for the watch
            Err(ErrorCode::NoNode) => self.blocker_gone(name),
            Err(ErrorCode::ConnectionLoss)
                if self.state == State::Waiting && self.watching.as_deref() == Some(name) =>
            {
                self.watching = None;
                self.list(u32::MAX);
            }
            Err(_) => {}
        }
    }

    fn on_verify(&mut self, result: Result<Response, ErrorCode>) {
        match result {
            Ok(_) if self.state == State::Held => {
                if self.suspended {
                    self.suspended = false;
                    self.emit(LockEvent::Reconnected);
                }
                if self.config.watch_own_node || self.config.revocable {
                    self.arm_own();
                }
            }
            Err(ErrorCode::NoNode) => self.lost(LostReason::NodeDeleted),
            Err(ErrorCode::ConnectionLoss) => {} // asked again after the next reconnect
            _ => {}
        }
    }

    fn on_own(&mut self, result: Result<Response, ErrorCode>) {
        match result {
            Ok(Response::Data { data, .. }) => self.check_revocation(&data),
            Ok(_) => {}
            Err(ErrorCode::NoNode) => {
                if self.state == State::Held {
                    self.lost(LostReason::NodeDeleted);
                } else if self.state == State::Waiting {
                    self.node = None;
                    self.fail(ErrorCode::NoNode);
                }
            }
            Err(ErrorCode::ConnectionLoss) => self.own_armed = false, // armed again on reconnect
            Err(_) => {}
        }
    }

    fn on_delete(&mut self, result: Result<Response, ErrorCode>) {
        match result {
            Err(ErrorCode::ConnectionLoss) => {
                // Retried once the connection is back (the session queues it).
                if let Some(path) = self.our_path() {
                    self.op(
                        Purpose::Delete,
                        Request::Delete(DeleteRequest { path, version: -1 }),
                    );
                }
            }
            _ => self.done(),
        }
    }
}

impl Recipe for Lock {
    fn handle_reply(&mut self, _now: Instant, op: OpId, result: Result<Response, ErrorCode>) {
        let Some(at) = self.ops.iter().position(|(id, _)| *id == op) else {
            return;
        };
        let (_, purpose) = self.ops.swap_remove(at);
        if result == Err(ErrorCode::SessionExpired) || self.state == State::Done {
            return; // the session change handles expiry
        }
        match purpose {
            Purpose::Parent => {}
            Purpose::Create(n) => self.on_create(n, result),
            Purpose::List(n) => self.on_list(n, result),
            Purpose::Adopt(name) => self.on_adopt(name, result),
            Purpose::Blocker(name) => self.on_blocker(&name, result),
            Purpose::Own => self.on_own(result),
            Purpose::Verify => self.on_verify(result),
            Purpose::Delete => self.on_delete(result),
        }
    }

    fn handle_watch(&mut self, _now: Instant, op: OpId, event: &WatchEvent) {
        let ours = self.our_path();
        match event.event_type {
            EventType::NodeDeleted if Some(&event.path) == ours.as_ref() => {
                if self.state == State::Held {
                    self.lost(LostReason::NodeDeleted);
                } else if self.state == State::Waiting {
                    self.node = None;
                    self.fail(ErrorCode::NoNode);
                }
            }
            EventType::NodeDeleted => {
                let name = event.path.rsplit('/').next().unwrap_or("").to_string();
                self.blocker_gone(&name);
            }
            EventType::NodeDataChanged if Some(&event.path) == ours.as_ref() => {
                self.own_armed = false;
                if self.wants_own_watch() {
                    self.arm_own(); // re-arm; the data tells whether it is a revocation
                }
            }
            EventType::NodeDataChanged if self.state == State::Waiting => {
                // Someone wrote to our blocker (a revocation aimed at it): watch on.
                let name = event.path.rsplit('/').next().unwrap_or("").to_string();
                let path = event.path.clone();
                self.watch_node(Purpose::Blocker(name), path);
            }
            _ => {}
        }
        let _ = op;
    }

    fn handle_session(&mut self, _now: Instant, change: SessionChange) {
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
                if self.state == State::Held {
                    // Still ours? (The session re-armed our watches itself.)
                    if let Some(path) = self.our_path() {
                        self.op(
                            Purpose::Verify,
                            Request::Exists(PathWatch { path, watch: false }),
                        );
                    }
                } else if self.state == State::Waiting && self.config.revocable {
                    self.arm_own();
                }
            }
            SessionChange::Expired | SessionChange::Closed => {
                let reason = if change == SessionChange::Expired {
                    LostReason::SessionExpired
                } else {
                    LostReason::SessionClosed
                };
                self.ops.clear();
                self.requests.clear();
                match self.state {
                    State::Held => self.lost(reason),
                    State::Done => {}
                    State::Deleting => self.done(), // the node went with the session
                    _ => {
                        self.state = State::Done;
                        self.node = None;
                        let error = if reason == LostReason::SessionExpired {
                            ErrorCode::SessionExpired
                        } else {
                            ErrorCode::ConnectionLoss
                        };
                        self.emit(LockEvent::Failed { error });
                    }
                }
            }
        }
    }

    fn handle_timeout(&mut self, now: Instant) {
        if let Some(d) = self.deadline {
            if now >= d {
                match self.state {
                    State::Waiting => {
                        self.deadline = None;
                        self.stop_with(Finish::NotAcquired);
                    }
                    // A try-lock still deserves one look at the directory.
                    State::Creating => {
                        self.deadline = None;
                        self.deadline_passed = true;
                    }
                    _ => {}
                }
            }
        }
    }

    fn poll_request(&mut self) -> Option<(OpId, Request)> {
        self.requests.pop_front()
    }

    fn poll_event(&mut self) -> Option<RecipeEvent> {
        self.events.pop_front()
    }

    fn poll_timeout(&self) -> Option<Instant> {
        match self.state {
            State::Creating | State::Waiting => self.deadline,
            _ => None,
        }
    }

    fn is_done(&self) -> bool {
        self.state == State::Done
            && self.ops.is_empty()
            && self.requests.is_empty()
            && self.events.is_empty()
    }
}
