//! Name service (ZooKeeper paper: "naming"): register a name with data under a
//! registry directory, resolve it, watch it; and unique, increasing ids from
//! sequential nodes ([`IdGenerator`]).
//!
//! # Names
//!
//! A name is one path segment (not empty, no `/`, not `.` or `..`, only characters
//! ZooKeeper allows) and lives at `<dir>/<name>`; its data is whatever the registrant
//! stores there (an address, say). [`name_path`] checks a name and builds the path; a
//! bad name is refused before anything is sent, with [`Error::InvalidPath`] naming the
//! rule it breaks.
//!
//! 1. **Register**: [`register`] gives an [`OwnedNode`] that keeps `<dir>/<name>` in
//!    place with our data (missing parents are created as containers). An ephemeral
//!    name goes with our session and is registered again when the session expires and
//!    a new one starts (Curator's `PersistentNode`); a name another session holds is
//!    reported as [`Blocked`](OwnedNodeEvent::Blocked) and taken once it goes.
//!    `set_data` publishes new data; `delete` unregisters (only our own node).
//! 2. **Resolve**: [`Resolve`] is one `getData(<dir>/<name>)`:
//!    [`Resolved`](ResolveEvent::Resolved) with data and Stat, or
//!    [`NotFound`](ResolveEvent::NotFound). With [`ResolveConfig::sync_first`] it sends
//!    `sync(<dir>/<name>)` first, pipelined: for a reader told out of band that the
//!    name changed (the paper's case for `sync`), whose server might lag behind the
//!    writer's. A lost reply or a refusal is retried (after the reconnect, or after a
//!    backoff); a read lost with an expired session is sent again in the next session;
//!    `Closed` ends it with [`Failed`](ResolveEvent::Failed).
//! 3. **Watch**: [`watch`] gives a [`NodeWatch`] on `<dir>/<name>`: every version in
//!    server order, `Missing` when it is unregistered, re-read after a reconnect.
//!
//! # Ids ([`IdGenerator`])
//!
//! Every id is the sequence number ZooKeeper gives a sequential node in directory
//! `<dir>`. For each id requested:
//!
//! 1. `create2(<dir>/id-<session>-<nonce>-<attempt>-, EPHEMERAL_SEQUENTIAL)`: the
//!    server appends its 10-digit sequence number; that number is the id. `<session>`
//!    is our session id (hex), `<nonce>` (hex) tells generators on one session apart
//!    ([`IdGeneratorConfig::nonce`]), `<attempt>` numbers this generator's creates:
//!    the prefix names exactly one create of ours. (Finding our node by its name
//!    takes one `getChildren`; by `ephemeralOwner` it would take a read per child.)
//! 2. `delete(<node>)` as soon as the create's reply is in, without waiting for it:
//!    pipelined with the creates of later requests. The node is only there to draw a
//!    number. It is ephemeral, so a crash leaves nothing behind past the session.
//!
//! Several ids may be requested at once ([`request`](IdGenerator::request) returns a
//! request number at once): their creates are pipelined, and ids are reported in
//! request order, each larger than the one before.
//!
//! **A create whose reply was lost** (`ConnectionLoss`: it may have applied): after
//! the reconnect, `sync(<dir>)` then `getChildren(<dir>)`. A child named with that
//! create's prefix is our node: its suffix is the id, and it is deleted. None: the
//! create did not apply (or applied after the listing, on a server that had not seen
//! it yet — that number is then never used, and the node goes with the session); it
//! is created again. Creates lost with an expired session are created again in the
//! next one (their nodes went with the session). A refusal (`Overloaded`) never
//! applied: created again after a backoff.
//!
//! **Order.** ZooKeeper executes one session's requests in order, so our creates get
//! increasing numbers in the order they are sent. Ids are handed out in that order,
//! oldest request first; an id is handed out only when every create sent before it is
//! settled. Numbers drawn for requests that failed meanwhile are dropped, never kept
//! for later requests: every id is drawn after its request was made.
//!
//! # Guarantees
//!
//! * Every id was drawn by one of our creates and is returned once: ZooKeeper never
//!   gives the same number twice in a directory, and no other create has our prefix.
//! * Ids are strictly increasing across all clients in the server's order: the number
//!   is the directory's `cversion` when the create is applied, and it only grows (it
//!   also grows on every delete, so ids are not dense: two per id when one client is
//!   alone).
//! * An id is larger than every id any client was given before it was requested
//!   (its create is applied after that).
//! * Per generator, ids increase in request order. An id that would not be larger than
//!   the previous one is never returned.
//!
//! # Limits
//!
//! * The sequence is a signed 32-bit counter per directory (the parent's
//!   `cversion`). After 2^31 - 1 it wraps: the server names the next node
//!   `...-2147483648`. Since each id costs two counts (create and delete), a
//!   directory gives about 2^30 ids. When the wrap (or any number not above the last)
//!   is seen, the request and every later one fail with [`Error::SequenceOverflow`]:
//!   use a new directory.
//! * The directory must stay: it is created persistent (never as a container, which
//!   the server deletes when empty) and must not be deleted, since a new directory's
//!   counter starts again at 0.
//!
//! # Session semantics
//!
//! A lost connection holds requests until the session is back; an expired session's
//! creates are made again in the next session; `Closed` fails every waiting request
//! with [`Error::Closed`] and ends the generator. [`close`](IdGenerator::close) (or
//! abandoning it) fails the waiting requests, deletes whatever node of ours is left,
//! and ends.
//!
//! ```
//! use zk_recipes::recipe::naming::{IdGenerator, IdGeneratorConfig};
//! use zk_recipes::recipe::{Machine, Recipe, SessionChange};
//! use zk_recipes::proto::Request;
//! use zk_recipes::time::Instant;
//!
//! let mut g = IdGenerator::new(IdGeneratorConfig::new("/ids", 1));
//! g.handle_session(Instant::ZERO, SessionChange::Connected { session_id: 0x42 });
//! let r = g.request(Instant::ZERO);
//! let (_, create) = g.poll_request().unwrap();
//! match create {
//!     Request::Create2(c) => assert_eq!(c.path, "/ids/id-42-1-1-"),
//!     other => panic!("{other:?}"),
//! }
//! assert_eq!(r, 1);
//! ```

use alloc::collections::VecDeque;
use alloc::format;
use alloc::string::{String, ToString};
use alloc::vec::Vec;
use bytes::Bytes;

use super::kit::{protocol_head, valid_path, Kit, Protocol, Reply, MAX_PARENT_ROUNDS};
use super::node::{NodeWatch, OwnedNode, OwnedNodeConfig, Run};
use super::path::ancestor_result;
use super::watcher::{link_protocol, Link};
use super::{OpId, SessionChange};
use crate::error::Error;
use crate::proto::*;
use crate::time::Instant;

#[cfg(doc)]
use super::node::OwnedNodeEvent;

// ======================================================================================
// Names
// ======================================================================================

/// Checks `name` (one path segment) and returns `<dir>/<name>`.
///
/// ```
/// use zk_recipes::recipe::naming::name_path;
/// assert_eq!(name_path("/services", "db").unwrap(), "/services/db");
/// assert!(name_path("/services", "a/b").is_err());
/// assert!(name_path("/services", "").is_err());
/// assert!(name_path("services", "db").is_err()); // the directory is absolute
/// ```
pub fn name_path(dir: &str, name: &str) -> Result<String, Error> {
    let invalid = |path: &str, error| Error::InvalidPath {
        path: path.to_string(),
        error,
    };
    validate_path(dir).map_err(|e| invalid(dir, e))?;
    if name.is_empty() {
        return Err(invalid(name, PathError::Empty));
    }
    if let Some(offset) = name.find('/') {
        return Err(invalid(name, PathError::InvalidChar { offset, ch: '/' }));
    }
    if name == "." || name == ".." {
        return Err(invalid(name, PathError::RelativeSegment));
    }
    let path = if dir == "/" {
        format!("/{name}")
    } else {
        format!("{dir}/{name}")
    };
    validate_path(&path).map_err(|e| invalid(&path, e))?;
    Ok(path)
}

/// The [`OwnedNode`] configuration of name `name` in `dir` with `data`: `mode` is
/// [`CreateMode::Ephemeral`] (gone with our session, registered again in the next one)
/// or [`CreateMode::Persistent`]; other modes are refused with
/// `Error::Server(BadArguments)`. Our data is kept in place (set back if someone
/// overwrites it).
pub fn register_config(
    dir: &str,
    name: &str,
    data: impl Into<Bytes>,
    mode: CreateMode,
) -> Result<OwnedNodeConfig, Error> {
    let path = name_path(dir, name)?;
    if !matches!(mode, CreateMode::Ephemeral | CreateMode::Persistent) {
        return Err(Error::Server(ErrorCode::BadArguments));
    }
    let mut c = OwnedNodeConfig::new(&path, data);
    c.mode = mode;
    Ok(c)
}

/// Registers a name: an [`OwnedNode`] for [`register_config`], idle until `create`.
///
/// ```
/// use zk_recipes::recipe::naming::register;
/// use zk_recipes::proto::CreateMode;
/// let node = register("/services", "db", "10.0.0.7:5432", CreateMode::Ephemeral).unwrap();
/// assert_eq!(node.config().path, "/services/db");
/// assert!(register("/services", "a/b", "", CreateMode::Ephemeral).is_err());
/// ```
pub fn register(
    dir: &str,
    name: &str,
    data: impl Into<Bytes>,
    mode: CreateMode,
) -> Result<OwnedNode, Error> {
    Ok(OwnedNode::new(register_config(dir, name, data, mode)?))
}

/// Watches a name: a [`NodeWatch`] on `<dir>/<name>`, idle until `start`.
pub fn watch(dir: &str, name: &str) -> Result<NodeWatch, Error> {
    Ok(NodeWatch::new(&name_path(dir, name)?))
}

/// What [`Resolve`] reads.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ResolveConfig {
    /// The name's full path (`<dir>/<name>`).
    pub path: String,
    /// Send `sync` before the read (default: off).
    pub sync_first: bool,
}

impl ResolveConfig {
    /// Resolves `name` in `dir` (checked as [`name_path`] does).
    pub fn new(dir: &str, name: &str) -> Result<Self, Error> {
        Ok(ResolveConfig {
            path: name_path(dir, name)?,
            sync_first: false,
        })
    }
}

/// What a [`Resolve`] reports: exactly one of them, then it is done.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ResolveEvent {
    /// The name is registered with this data.
    Resolved {
        /// Its data.
        data: Bytes,
        /// Its Stat.
        stat: Stat,
    },
    /// The name is not registered.
    NotFound,
    /// The read failed for good (`NoAuth`, the session closed, ...).
    Failed(Error),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum ReadOp {
    Sync,
    Read,
}

/// Resolves a name with one read; see the [module docs](self).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Resolve {
    config: ResolveConfig,
    run: Run,
    /// The session, and whether the read waits for the backoff to end.
    link: Link,
    /// The read is to be sent (again).
    need: bool,
    kit: Kit<ReadOp, ResolveEvent>,
}

impl Resolve {
    /// A read that waits for [`start`](Self::start).
    pub fn new(config: ResolveConfig) -> Self {
        Resolve {
            config,
            run: Run::Idle,
            link: Link::Down,
            need: false,
            kit: Kit::default(),
        }
    }

    /// Sends the read (once).
    pub fn start(&mut self, now: Instant) {
        if self.run != Run::Idle {
            return;
        }
        self.run = Run::Running;
        if let Err(e) = valid_path(&self.config.path) {
            return self.finish(ResolveEvent::Failed(e));
        }
        self.need = true;
        self.drive(now);
    }

    fn finish(&mut self, e: ResolveEvent) {
        self.kit.clear_requests();
        self.kit.end(&mut self.run, Run::Done, e);
    }

    fn drive(&mut self, now: Instant) {
        if !self.need || self.run == Run::Done || !self.link.gate(&self.kit, now) {
            return;
        }
        self.need = false;
        let path = self.config.path.clone();
        if self.config.sync_first {
            self.kit.send(
                ReadOp::Sync,
                Request::Sync(PathRequest { path: path.clone() }),
            );
        }
        self.kit.send(
            ReadOp::Read,
            Request::GetData(PathWatch { path, watch: false }),
        );
    }
}

impl Resolve {
    /// The answer to request `op`, sent for `purpose` (`on_reply`: `protocol_head!`).
    fn on_answer(&mut self, now: Instant, _op: OpId, purpose: ReadOp, result: Reply) {
        // A read behind a sync that did not happen may be stale: the outbox reads it
        // as lost (`Outbox::answer`), and it is read again.
        if self.run == Run::Done || purpose == ReadOp::Sync {
            return;
        }
        match result {
            Ok(Response::Data { data, stat }) => self.finish(ResolveEvent::Resolved { data, stat }),
            Ok(_) => self.finish(ResolveEvent::Failed(Error::UnexpectedReply)),
            Err(Error::Server(ErrorCode::NoNode)) => self.finish(ResolveEvent::NotFound),
            Err(e) if e.is_retryable() => {
                self.need = true;
                self.kit.failed(now);
            }
            Err(e) if e.ends_session() => {} // handle_session decides
            Err(e) => self.finish(ResolveEvent::Failed(e)),
        }
        self.drive(now);
    }
}

impl Protocol for Resolve {
    protocol_head!(ResolveEvent, answer);

    fn on_session(&mut self, now: Instant, change: SessionChange) {
        if self.run == Run::Done {
            return;
        }
        match change {
            SessionChange::Connected { .. } | SessionChange::Reconnected { .. } => self.link.up(),
            SessionChange::Suspended => {}
            SessionChange::Expired => {
                // A read holds nothing of the session: read again in the next one.
                self.kit.clear_requests();
                self.link.down();
                self.need = self.run == Run::Running;
            }
            SessionChange::Closed => return self.finish(ResolveEvent::Failed(Error::Closed)),
        }
        self.drive(now);
    }

    link_protocol!(run == Run::Done);

    fn on_abandon(&mut self, _now: Instant) {
        if self.run != Run::Done {
            self.run = Run::Done;
            self.kit.clear_requests();
        }
    }

    fn check(&self) {
        if self.run != Run::Running || !self.link.is_up() {
            debug_assert_eq!(
                self.kit.in_flight(),
                0,
                "a read only while running, in a session"
            );
        }
        if self.run == Run::Idle {
            debug_assert!(!self.need, "nothing to read before start");
        }
    }
}

// ======================================================================================
// IdGenerator
// ======================================================================================

/// How many creates one generator keeps on the wire at once.
const MAX_CREATES: usize = 64;
/// Where an [`IdGenerator`] draws its numbers.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct IdGeneratorConfig {
    /// The directory (created persistent, with its parents, if missing).
    pub dir: String,
    /// Different for every generator on one session (the adapters number them); it
    /// is part of the node names, so after a lost reply each generator finds only its
    /// own nodes. The session id in the names tells sessions apart.
    pub nonce: u64,
    /// ACL of the nodes and of a directory created for them.
    pub acl: Vec<Acl>,
}

impl IdGeneratorConfig {
    /// Ids from `dir`, generator `nonce`, open ACL.
    pub fn new(dir: &str, nonce: u64) -> Self {
        IdGeneratorConfig {
            dir: dir.into(),
            nonce,
            acl: Acl::open_unsafe(),
        }
    }
}

/// What an [`IdGenerator`] reports: exactly one event per request.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum IdEvent {
    /// Request `request` got `id`.
    Id {
        /// The number [`request`](IdGenerator::request) returned.
        request: u64,
        /// The id: larger than every id this generator reported before.
        id: i64,
    },
    /// Request `request` failed (the directory cannot be created or written,
    /// [`Error::SequenceOverflow`], the session closed, the generator closed).
    Failed {
        /// The number [`request`](IdGenerator::request) returned.
        request: u64,
        /// Why.
        error: Error,
    },
}

/// What became of one create.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum Draw {
    /// On the wire.
    Sent,
    /// Its reply was lost: it may have applied. `listed`: the listing in flight
    /// covers it.
    Lost { listed: bool },
    /// Applied: this number.
    Got(i64),
    /// Applied, but the number wrapped (or did not grow).
    Overflow,
    /// Applied with a name we cannot read.
    Bad(Error),
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct Attempt {
    n: u64,
    session: i64,
    round: u32,
    draw: Draw,
    /// The requests it was sent for have failed: its number serves no one.
    orphan: bool,
}

/// An [`IdGenerator`]'s life.
///
/// | before (fields of `IdGenerator`) | after |
/// | --- | --- |
/// | `closing`, `done` | `Life::{Open, Closing, Done}` |
/// | `live`, `timer` | `link` ([`Link`]: `Down`, `Up`, `BackingOff`), as the watchers' |
/// | `session_id` | the kit's ([`Kit::session_id`]: read while the link is up) |
/// | `exhausted`, `parents` | kept: independent of the life |
///
/// (`Resolve`: `started`, `done` became [`Run`]`::{Idle, Running, Done}`; `live`,
/// `waiting` became `link`; `need` kept.)
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Life {
    /// Taking requests.
    Open,
    /// Closed: deleting what is left of ours.
    Closing,
    /// Ended.
    Done,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum IdOp {
    Parent(String),
    Create(u64),
    Delete(String),
    Sync,
    List,
}

/// Unique, increasing ids from sequential nodes; see the [module docs](self).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct IdGenerator {
    config: IdGeneratorConfig,
    /// The session (`Down` before the first `Connected` and after an expiry), and
    /// whether something waits for the backoff to end.
    link: Link,
    life: Life,
    /// A number wrapped: every request fails with [`Error::SequenceOverflow`].
    exhausted: bool,
    next_request: u64,
    next_attempt: u64,
    waiting: VecDeque<u64>,
    attempts: VecDeque<Attempt>,
    /// Nodes of ours to delete (not on the wire).
    deletes: Vec<String>,
    last: Option<i64>,
    /// Create the directory before the next creates.
    parents: bool,
    /// Rounds of directory creates sent since a create last worked.
    round: u32,
    recovered: u64,
    kit: Kit<IdOp, IdEvent>,
}

impl IdGenerator {
    /// A generator; requests wait for a session.
    pub fn new(config: IdGeneratorConfig) -> Self {
        IdGenerator {
            config,
            link: Link::Down,
            life: Life::Open,
            exhausted: false,
            next_request: 1,
            next_attempt: 1,
            waiting: VecDeque::new(),
            attempts: VecDeque::new(),
            deletes: Vec::new(),
            last: None,
            parents: false,
            round: 0,
            recovered: 0,
            kit: Kit::default(),
        }
    }

    /// The directory.
    pub fn dir(&self) -> &str {
        &self.config.dir
    }

    /// The last id reported.
    pub fn last_id(&self) -> Option<i64> {
        self.last
    }

    /// Requests waiting for an id.
    pub fn pending(&self) -> usize {
        self.waiting.len()
    }

    /// How many ids were found by listing after a lost create reply.
    pub fn recovered(&self) -> u64 {
        self.recovered
    }

    /// Asks for one id; returns the request number its [`IdEvent`] will carry.
    /// Request numbers start at 1 and grow by one.
    pub fn request(&mut self, now: Instant) -> u64 {
        let r = self.next_request;
        self.next_request += 1;
        if self.life != Life::Open {
            self.kit.emit(IdEvent::Failed {
                request: r,
                error: Error::Closed,
            });
        } else if self.exhausted {
            let error = self.overflow();
            self.kit.emit(IdEvent::Failed { request: r, error });
        } else if let Err(error) = valid_path(&self.config.dir) {
            self.kit.emit(IdEvent::Failed { request: r, error });
        } else {
            self.waiting.push_back(r);
            self.drive(now);
        }
        r
    }

    /// Fails the waiting requests with [`Error::Closed`], deletes what is left of
    /// ours, and ends.
    pub fn close(&mut self, now: Instant) {
        if self.life != Life::Open {
            return;
        }
        self.life = Life::Closing;
        self.fail_all(Error::Closed);
        self.drive(now);
        self.check_done();
    }

    fn overflow(&self) -> Error {
        Error::SequenceOverflow {
            path: self.config.dir.clone(),
        }
    }

    fn fail_all(&mut self, error: Error) {
        // Numbers still being drawn were drawn for these requests: a later request
        // must not get a number drawn before it was made.
        for a in self.attempts.iter_mut() {
            a.orphan = true;
        }
        for request in self.waiting.drain(..) {
            self.kit.emit(IdEvent::Failed {
                request,
                error: error.clone(),
            });
        }
    }

    fn prefix(&self, session: i64, n: u64) -> String {
        format!("id-{:x}-{:x}-{n}-", session, self.config.nonce)
    }

    fn node_path(&self, name: &str) -> String {
        if self.config.dir == "/" {
            format!("/{name}")
        } else {
            format!("{}/{name}", self.config.dir)
        }
    }

    fn attempt(&mut self, n: u64) -> Option<&mut Attempt> {
        self.attempts.iter_mut().find(|a| a.n == n)
    }

    /// Creates whose number may still serve a waiting request.
    fn drawing(&self) -> usize {
        self.attempts
            .iter()
            .filter(|a| !a.orphan)
            .filter(|a| matches!(a.draw, Draw::Sent | Draw::Lost { .. } | Draw::Got(_)))
            .count()
    }

    /// Parses the sequence suffix of node `name` created with `prefix`.
    fn parse(&self, name: &str, prefix: &str) -> Draw {
        let Some(suffix) = name.strip_prefix(prefix) else {
            return Draw::Bad(Error::UnexpectedReply);
        };
        if suffix.starts_with('-') && suffix[1..].bytes().all(|b| b.is_ascii_digit()) {
            return Draw::Overflow; // Java's %010d of the wrapped (negative) counter
        }
        if suffix.len() != 10 || !suffix.bytes().all(|b| b.is_ascii_digit()) {
            return Draw::Bad(Error::UnexpectedReply);
        }
        match suffix.parse::<i32>() {
            Ok(n) => Draw::Got(n as i64),
            Err(_) => Draw::Bad(Error::UnexpectedReply),
        }
    }

    /// Sends what can be sent now.
    fn drive(&mut self, now: Instant) {
        self.settle();
        if self.life == Life::Done || !self.link.gate(&self.kit, now) {
            return self.settle();
        }
        let session = self.kit.session_id();
        // 1. Lost creates: list before any new create (a node found was applied before
        //    the sync, so before every create sent after it).
        let unlisted = self
            .attempts
            .iter()
            .any(|a| a.draw == Draw::Lost { listed: false });
        if unlisted && !self.kit.any(|p| *p == IdOp::List) {
            for a in self.attempts.iter_mut() {
                if a.draw == (Draw::Lost { listed: false }) {
                    a.draw = Draw::Lost { listed: true };
                }
            }
            let path = self.config.dir.clone();
            self.kit.send(
                IdOp::Sync,
                Request::Sync(PathRequest { path: path.clone() }),
            );
            self.kit.send(
                IdOp::List,
                Request::GetChildren(PathWatch { path, watch: false }),
            );
        }
        // 2. The directory, when a create found it missing.
        if core::mem::take(&mut self.parents) {
            self.round += 1;
            let probe = self.node_path("x");
            let acl = &self.config.acl;
            self.kit
                .send_parents(&probe, acl, CreateMode::Persistent, IdOp::Parent);
        }
        // 3. New creates for waiting requests.
        if self.life == Life::Open && !self.exhausted {
            let sent = self
                .attempts
                .iter()
                .filter(|a| a.draw == Draw::Sent)
                .count();
            let want = self.waiting.len().saturating_sub(self.drawing());
            for _ in 0..want.min(MAX_CREATES.saturating_sub(sent)) {
                let n = self.next_attempt;
                self.next_attempt += 1;
                let name = self.prefix(session, n);
                let path = self.node_path(&name);
                self.attempts.push_back(Attempt {
                    n,
                    session,
                    round: self.round,
                    draw: Draw::Sent,
                    orphan: false,
                });
                let create = CreateRequest::new(
                    path,
                    Bytes::new(),
                    self.config.acl.clone(),
                    CreateMode::EphemeralSequential,
                );
                self.kit.send(IdOp::Create(n), Request::Create2(create));
            }
        }
        // 4. Deletes, behind the creates.
        for path in core::mem::take(&mut self.deletes) {
            self.kit.send(
                IdOp::Delete(path.clone()),
                Request::Delete(DeleteRequest { path, version: -1 }),
            );
        }
        self.settle();
    }

    /// Hands out settled numbers in create order; drops creates that drew nothing.
    fn settle(&mut self) {
        while let Some(front) = self.attempts.front() {
            match front.draw.clone() {
                Draw::Sent | Draw::Lost { .. } => break,
                Draw::Got(id) => {
                    let orphan = front.orphan;
                    self.attempts.pop_front();
                    if self.exhausted || orphan {
                        continue;
                    }
                    if self.last.is_some_and(|l| id <= l) {
                        self.exhaust();
                        continue;
                    }
                    if let Some(request) = self.waiting.pop_front() {
                        self.last = Some(id);
                        self.kit.emit(IdEvent::Id { request, id });
                    }
                }
                Draw::Overflow => {
                    self.attempts.pop_front();
                    self.exhaust();
                }
                Draw::Bad(error) => {
                    let orphan = front.orphan;
                    self.attempts.pop_front();
                    if orphan {
                        continue;
                    }
                    if let Some(request) = self.waiting.pop_front() {
                        self.kit.emit(IdEvent::Failed { request, error });
                    }
                }
            }
        }
        self.check_done();
    }

    fn exhaust(&mut self) {
        self.exhausted = true;
        let e = self.overflow();
        self.fail_all(e);
    }

    fn check_done(&mut self) {
        if self.life == Life::Closing
            && self.kit.is_quiet()
            && self.deletes.is_empty()
            && self.attempts.is_empty()
        {
            self.life = Life::Done;
        }
    }

    fn on_create(&mut self, now: Instant, n: u64, result: Reply) {
        let Some(a) = self.attempts.iter().find(|a| a.n == n).cloned() else {
            return;
        };
        let prefix = self.prefix(a.session, n);
        let drop = |g: &mut Self| g.attempts.retain(|a| a.n != n);
        match result {
            Ok(Response::PathStat { path, .. }) | Ok(Response::Path(path)) => {
                self.kit.succeeded();
                self.round_ok();
                let name = path.rsplit('/').next().unwrap_or("").to_string();
                let draw = self.parse(&name, &prefix);
                self.deletes.push(path);
                if let Some(a) = self.attempt(n) {
                    a.draw = draw;
                }
            }
            Ok(_) => {
                if let Some(a) = self.attempt(n) {
                    a.draw = Draw::Bad(Error::UnexpectedReply);
                }
            }
            Err(Error::Server(ErrorCode::NoNode)) => {
                drop(self);
                // Sent before the latest round of directory creates: that round decides.
                if a.round < self.round || self.parents {
                    return;
                }
                if self.kit.parents_refused() {
                    // The round was refused or lost: send it again.
                    self.parents = true;
                    self.kit.failed(now);
                } else if self.round >= u32::from(MAX_PARENT_ROUNDS) {
                    let e = self.kit.take_parent_error().unwrap_or_else(|| {
                        let dir = self.config.dir.clone();
                        ancestor_result(&dir, &Err(Error::Server(ErrorCode::NoNode)))
                            .unwrap_or(Error::Server(ErrorCode::NoNode))
                    });
                    self.round = 0;
                    self.fail_all(e);
                } else {
                    self.parents = true;
                }
            }
            Err(e) if e.may_have_applied() => {
                if let Some(a) = self.attempt(n) {
                    a.draw = Draw::Lost { listed: false };
                }
                self.kit.failed(now);
            }
            Err(e) if e.is_retryable() => {
                drop(self); // refused: never applied
                self.kit.failed(now);
            }
            Err(e) if e.ends_session() => {} // handle_session decides
            Err(e) => {
                drop(self);
                self.fail_all(e);
            }
        }
    }

    fn round_ok(&mut self) {
        if !self.kit.any(|p| matches!(p, IdOp::Parent(_))) {
            self.round = 0;
        }
    }

    fn on_list(&mut self, now: Instant, result: Reply) {
        // A listing behind a sync that did not happen reads as lost (`Outbox::answer`):
        // listed again.
        let children = match result {
            Ok(Response::Children(c)) => c,
            Ok(Response::Children2 { children, .. }) => children,
            Ok(_) => Vec::new(), // cannot happen; treated as nothing found
            Err(Error::Server(ErrorCode::NoNode)) => Vec::new(), // no directory: nothing applied
            Err(e) if e.ends_session() => return,
            Err(e) => {
                if e.is_retryable() {
                    // Not known yet: list again.
                    for a in self.attempts.iter_mut() {
                        if a.draw == (Draw::Lost { listed: true }) {
                            a.draw = Draw::Lost { listed: false };
                        }
                    }
                    self.kit.failed(now);
                } else {
                    // The directory cannot be listed (`NoAuth`, ...): those numbers stay
                    // unknown and are never used; the nodes go with the session.
                    self.attempts
                        .retain(|a| a.draw != Draw::Lost { listed: true });
                    self.fail_all(e);
                }
                return;
            }
        };
        self.kit.succeeded();
        let listed: Vec<(u64, i64)> = self
            .attempts
            .iter()
            .filter(|a| a.draw == Draw::Lost { listed: true })
            .map(|a| (a.n, a.session))
            .collect();
        for (n, session) in listed {
            let prefix = self.prefix(session, n);
            let found = children.iter().find(|c| c.starts_with(prefix.as_str()));
            match found {
                Some(name) => {
                    let draw = self.parse(name, &prefix);
                    let path = self.node_path(name);
                    self.deletes.push(path);
                    self.recovered += 1;
                    if let Some(a) = self.attempt(n) {
                        a.draw = draw;
                    }
                }
                None => self.attempts.retain(|a| a.n != n), // never applied
            }
        }
    }

    fn on_delete(&mut self, now: Instant, path: String, result: Reply) {
        match result {
            Ok(_) | Err(Error::Server(ErrorCode::NoNode)) => self.kit.succeeded(),
            Err(e) if e.is_retryable() => {
                self.deletes.push(path);
                self.kit.failed(now);
            }
            // Gone with the session, or refused for good (the node is ephemeral: it
            // goes with the session).
            Err(_) => {}
        }
    }
}

impl IdGenerator {
    /// The answer to request `op`, sent for `purpose` (`on_reply`: `protocol_head!`).
    fn on_answer(&mut self, now: Instant, _op: OpId, purpose: IdOp, result: Reply) {
        if self.life == Life::Done {
            return;
        }
        match purpose {
            IdOp::Parent(p) => self.kit.parent_answered(&p, &result),
            IdOp::Sync => {} // a failure reads the listing behind it as lost
            IdOp::List => self.on_list(now, result),
            IdOp::Create(n) => self.on_create(now, n, result),
            IdOp::Delete(path) => self.on_delete(now, path, result),
        }
        self.drive(now);
    }
}

impl Protocol for IdGenerator {
    protocol_head!(IdEvent, answer);

    fn on_session(&mut self, now: Instant, change: SessionChange) {
        if self.life == Life::Done {
            return;
        }
        match change {
            SessionChange::Connected { .. } | SessionChange::Reconnected { .. } => self.link.up(),
            SessionChange::Suspended => {}
            SessionChange::Expired => {
                // Our nodes went with the session; numbers already drawn stay valid.
                self.kit.clear_requests();
                self.deletes.clear();
                self.link.down();
                self.parents = false; // the kit forgot its rounds (`Kit::session`)
                self.round = 0;
                self.attempts
                    .retain(|a| !matches!(a.draw, Draw::Sent | Draw::Lost { .. }));
            }
            SessionChange::Closed => {
                self.kit.clear_requests();
                self.deletes.clear();
                self.attempts.clear();
                self.fail_all(Error::Closed);
                self.life = Life::Done;
                return;
            }
        }
        self.drive(now);
    }

    link_protocol!(life == Life::Done, abandon => close);

    fn check(&self) {
        if self.life != Life::Open || self.exhausted {
            debug_assert!(
                self.waiting.is_empty(),
                "no request waits once closing or exhausted"
            );
        }
        if self.life == Life::Done {
            debug_assert!(
                self.attempts.is_empty() && self.deletes.is_empty() && self.kit.in_flight() == 0,
                "an ended generator holds nothing"
            );
        }
        if !self.link.is_up() {
            debug_assert_eq!(self.kit.in_flight(), 0, "no request without a session");
            debug_assert!(
                !self
                    .attempts
                    .iter()
                    .any(|a| matches!(a.draw, Draw::Sent | Draw::Lost { .. })),
                "no create in doubt without a session"
            );
        }
        debug_assert!(
            self.attempts
                .iter()
                .zip(self.attempts.iter().skip(1))
                .all(|(a, b)| a.n < b.n),
            "creates in the order they were sent"
        );
    }
}
