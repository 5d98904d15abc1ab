//! Inspecting recipes: what the nodes under a path mean, read-only (for dashboards and
//! `zkr inspect`). The interpretation is written once, here: which layout a directory
//! has ([`kind_of`]), how its nodes sort (the recipes' own rules, [`contender`] and
//! [`queue`]), and who holds, leads, waits or has entered.
//!
//! # What each layout reads as
//!
//! | layout (children of the path) | [`Shape`] |
//! |---|---|
//! | `…latch-<seq>` (Curator `LeaderLatch`, our election) | [`Election`](Shape::Election): the leader (lowest sequence) and the other candidates in order; a candidate's data is its participant id |
//! | `…__READ__<seq>` / `…__WRIT__<seq>` (Curator `InterProcessReadWriteLock`; kazoo's `__rlock__`) | [`ReadWriteLock`](Shape::ReadWriteLock): the holders (a lowest writer alone, or every reader below the lowest writer) and the waiters in order |
//! | `…lock-<seq>` (Curator `InterProcessMutex`, our lock; kazoo's `__lock__`) | [`Lock`](Shape::Lock): the holder (lowest sequence) and the waiters in order |
//! | `leases` (and `locks`) directories (Curator `InterProcessSemaphoreV2`, our semaphore) | [`Semaphore`](Shape::Semaphore): the lease nodes in order and the contenders queued in `locks` for the right to take one |
//! | `qn-<seq>` or `entry-<ppp>-<seq>` items (Curator `SimpleDistributedQueue`, kazoo's `Queue`, ours) | [`Queue`](Shape::Queue): the length, the oldest item (its `ctime`), and the at-least-once claims in progress (`<path>-meta/claim-*`) |
//! | `ready` and member nodes, or only UUID-named members (Curator `DistributedDoubleBarrier`, ours) | [`DoubleBarrier`](Shape::DoubleBarrier): who has entered, and whether the round is open (`ready`) |
//! | anything else | [`Node`](Shape::Node) (a Curator `DistributedBarrier` is such a node: set while it exists) |
//!
//! Every participant comes with its node's [`Stat`]: the owning session
//! (`ephemeralOwner`), since when (`ctime`, the server's clock) and, for locks and
//! elections, the fencing token (`czxid`). A lock node carries no identity of ours: a
//! releasing holder writes its grant into the next contender's node (see
//! [`lock`](super::lock)), so data there would not survive a handoff; the session id is
//! the identity (the server's `cons` command maps it to a client address). Curator's
//! lock nodes hold the client's IP address and a latch its participant id:
//! [`Participant::label`] gives such text, never a grant, a notice or a revocation.
//!
//! # Protocol ([`Inspect`])
//!
//! 1. `sync(<path>)` and `getChildren2(<path>)` back to back (a reconnect may land on a
//!    lagging follower): the node's Stat and children. `NoNode`: `Failed(NoNode)`.
//! 2. The layout decides the reads, pipelined: `getData` of each contender (each lease,
//!    each member, each claim), or the listings of a semaphore's `leases` and `locks`
//!    (then their contenders) and of a queue's side directory (then its claims), and of
//!    a queue the oldest item only (the next one if it was taken meanwhile). A node gone
//!    between the listing and its read is left out (it was released, taken or left).
//! 3. With [`InspectConfig::below`], a node of no known layout has each child listed in
//!    turn (depth first in the result, at most [`InspectConfig::max_reads`] requests in
//!    all, then `truncated`): every recipe directory at or below the path.
//! 4. Once every answer is in: one [`InspectEvent::Described`], final. A retryable
//!    failure (connection lost, a refusal) starts the whole look again after the
//!    session is back or a backoff, at most [`Inspect::MAX_ROUNDS`] times; then, or on
//!    any other failure of the path itself, or the session's end: `Failed`, final.
//!
//! Read-only: nothing is created, watched or deleted, so there is nothing to clean up.
//! The description is a snapshot assembled from several reads, not one atomic view:
//! a holder that released between the listing and its read is left out and the next
//! contender reads as the holder, which it is by then (or is about to be).
//!
//! ```
//! use zk_recipes::recipe::inspect::{kind_of, Kind};
//! let kids: Vec<String> = ["_c_0f1e-lock-0000000003", "_c_9a8b-lock-0000000001"]
//!     .iter().map(|s| s.to_string()).collect();
//! assert_eq!(kind_of(&kids), Kind::Lock);
//! let kids: Vec<String> = ["qn-0000000000", "qn-0000000001"].iter().map(|s| s.to_string()).collect();
//! assert_eq!(kind_of(&kids), Kind::Queue);
//! assert_eq!(kind_of(&[]), Kind::Node);
//! ```

use alloc::collections::VecDeque;
use alloc::string::String;
use alloc::vec::Vec;
use bytes::Bytes;

use super::contender::{self, LATCH, LEASE, LOCK, READ, WRITE};
use super::kit::join;
use super::kit::{protocol_head, valid_path, Kit, Protocol, Reply};
use super::queue::{self, Format};
use super::{OpId, SessionChange};
use crate::error::Error;
use crate::proto::{ErrorCode, PathRequest, PathWatch, Request, Response, Stat};
use crate::time::Instant;

/// The layouts [`kind_of`] recognises (see the [module docs](self)).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Kind {
    /// An exclusive lock's directory.
    Lock,
    /// A read/write lock's directory.
    ReadWriteLock,
    /// A leader election's (latch's) directory.
    Election,
    /// A semaphore: its `leases` (and `locks`) directories, or a `leases` directory.
    Semaphore,
    /// A FIFO or priority queue's directory.
    Queue,
    /// A double barrier's node.
    DoubleBarrier,
    /// No recipe layout.
    Node,
}

impl Kind {
    /// A short lower-case name: `lock`, `read-write lock`, `election`, `semaphore`,
    /// `queue`, `double barrier`, `node`.
    pub fn name(self) -> &'static str {
        match self {
            Kind::Lock => "lock",
            Kind::ReadWriteLock => "read-write lock",
            Kind::Election => "election",
            Kind::Semaphore => "semaphore",
            Kind::Queue => "queue",
            Kind::DoubleBarrier => "double barrier",
            Kind::Node => "node",
        }
    }
}

/// The double barrier's `ready` node.
const READY: &str = "ready";

/// Is `name` a UUID in its text form (what Curator and we name double-barrier members)?
fn is_uuid(name: &str) -> bool {
    let b = name.as_bytes();
    b.len() == 36
        && b.iter().enumerate().all(|(i, c)| match i {
            8 | 13 | 18 | 23 => *c == b'-',
            _ => c.is_ascii_hexdigit(),
        })
}

/// The layout a directory's children show (the first rule that matches, in the order
/// of the table in the [module docs](self)).
pub fn kind_of(children: &[String]) -> Kind {
    let (mut latch, mut rw, mut lock, mut lease) = (false, false, false, false);
    for (marker, _) in children.iter().filter_map(|c| contender::split(c)) {
        match marker {
            LATCH => latch = true,
            READ | WRITE | contender::KAZOO_READ => rw = true,
            LOCK | contender::KAZOO_LOCK => lock = true,
            LEASE => lease = true,
            _ => {}
        }
    }
    let has = |n: &str| children.iter().any(|c| c == n);
    if latch {
        Kind::Election
    } else if rw {
        Kind::ReadWriteLock
    } else if lock {
        Kind::Lock
    } else if lease || (has("leases") && children.iter().all(|c| c == "leases" || c == "locks")) {
        Kind::Semaphore
    } else if queue_format(children).is_some() {
        Kind::Queue
    } else if has(READY) || (!children.is_empty() && children.iter().all(|c| is_uuid(c))) {
        Kind::DoubleBarrier
    } else {
        Kind::Node
    }
}

/// The item format of a queue directory's children, if any child is an item.
fn queue_format(children: &[String]) -> Option<Format> {
    [Format::Fifo, Format::Priority]
        .into_iter()
        .find(|&f| children.iter().any(|c| queue::parse_item(f, c).is_some()))
}

/// One node of a recipe, as read: a contender, a lease, a queue item or claim, a
/// barrier member.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Participant {
    /// The node's name.
    pub name: String,
    /// Its Stat (session, times, zxids).
    pub stat: Stat,
    /// Its data.
    pub data: Bytes,
}

impl Participant {
    /// The session that owns it (`ephemeralOwner`; 0 for a persistent node).
    pub fn session(&self) -> i64 {
        self.stat.ephemeral_owner
    }

    /// When it was created: ms since the epoch, by the server's clock (`ctime`).
    pub fn created_ms(&self) -> i64 {
        self.stat.ctime
    }

    /// The fencing token of a lock or an election contender: its creation zxid.
    pub fn fencing_token(&self) -> i64 {
        self.stat.czxid
    }

    /// A read contender of a read/write lock (it shares the lock with other readers)?
    pub fn is_reader(&self) -> bool {
        contender::Contender::parse(&self.name).is_some_and(|c| !c.is_writer())
    }

    /// What the node's data says about its owner, as text: the participant id of an
    /// election candidate, the client address Curator stores in its lock nodes, any
    /// label a user configured. `None` for empty or binary data and for what the lock
    /// protocol writes into contenders (a grant, a notice, a revocation request).
    pub fn label(&self) -> Option<&str> {
        let d = &self.data[..];
        let protocol = [super::lock::GRANT, super::lock::NOTICE]
            .iter()
            .any(|m| d.starts_with(m))
            || d == super::lock::REVOKE
            || d == super::lock::CURATOR_REVOKE;
        let text = core::str::from_utf8(d).ok()?;
        (!d.is_empty() && !protocol && !text.chars().any(char::is_control)).then_some(text)
    }
}

/// What a path holds, by layout (see the [module docs](self)).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Shape {
    /// An exclusive lock.
    Lock {
        /// The contender holding it (the lowest).
        holder: Option<Participant>,
        /// The others, in the order they will hold.
        waiters: Vec<Participant>,
    },
    /// A read/write lock.
    ReadWriteLock {
        /// The lowest writer alone, or every reader below the lowest writer.
        holders: Vec<Participant>,
        /// The others, in order.
        waiters: Vec<Participant>,
    },
    /// A leader election (latch).
    Election {
        /// The leader's candidate node (the lowest).
        leader: Option<Participant>,
        /// The other candidates, in the order they would lead.
        candidates: Vec<Participant>,
    },
    /// A semaphore. (The maximum is not stored: the participants agree on it.)
    Semaphore {
        /// The lease nodes, in order: the holders, and at most one contender that
        /// holds the `locks` mutex and waits for a lease to free up.
        leases: Vec<Participant>,
        /// The contenders queued in `locks`, in order (the first one is the one
        /// taking a lease, or waiting for one).
        queued: Vec<Participant>,
    },
    /// A queue.
    Queue {
        /// `entry-<ppp>-<seq>` (kazoo's priority) items rather than `qn-<seq>`.
        priority: bool,
        /// How many items it holds.
        items: usize,
        /// The item taken next (priority, then sequence): its `ctime` is its age.
        oldest: Option<Participant>,
        /// At-least-once claims in progress (`<path>-meta/claim-<item>`, ephemeral,
        /// owned by the consumer's session), in item order.
        claims: Vec<Participant>,
    },
    /// A double barrier.
    DoubleBarrier {
        /// The `ready` node exists: the round is open (members are inside).
        ready: bool,
        /// The members that have entered (or are entering), by name.
        members: Vec<Participant>,
    },
    /// No recipe layout (a Curator `DistributedBarrier` is set while its node exists).
    Node,
}

impl Shape {
    /// The layout.
    pub fn kind(&self) -> Kind {
        match self {
            Shape::Lock { .. } => Kind::Lock,
            Shape::ReadWriteLock { .. } => Kind::ReadWriteLock,
            Shape::Election { .. } => Kind::Election,
            Shape::Semaphore { .. } => Kind::Semaphore,
            Shape::Queue { .. } => Kind::Queue,
            Shape::DoubleBarrier { .. } => Kind::DoubleBarrier,
            Shape::Node => Kind::Node,
        }
    }
}

/// What one path holds.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Description {
    /// The path.
    pub path: String,
    /// Its node's Stat.
    pub stat: Stat,
    /// What its children mean.
    pub shape: Shape,
    /// Participants left unread (the read budget ran out): in no list of `shape`.
    pub unread: usize,
}

/// How to inspect.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct InspectConfig {
    /// The path.
    pub path: String,
    /// Also every recipe directory below a path of no known layout (else only the
    /// path itself is described).
    pub below: bool,
    /// At most this many requests per look (listings and reads); beyond it the
    /// description is `truncated` (default 10,000).
    pub max_reads: usize,
}

impl InspectConfig {
    /// The path alone, the default budget.
    pub fn new(path: &str) -> Self {
        InspectConfig {
            path: path.into(),
            below: false,
            max_reads: 10_000,
        }
    }
}

/// What one look found.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Survey {
    /// One per path, in path order: the path itself when it has a layout or
    /// [`InspectConfig::below`] is off; with `below` and no layout at the path, only
    /// the recipe directories found below it.
    pub descriptions: Vec<Description>,
    /// The request budget ran out: some participants or directories were not read.
    pub truncated: bool,
}

/// What [`Inspect`] reports: one event, final.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum InspectEvent {
    /// What the look found.
    Described(Survey),
    /// The look failed (the path does not exist, the session ended, ...).
    Failed(Error),
}

/// What a participant is to its directory.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Role {
    /// A lock, latch or lease contender, a barrier member: read, in order.
    Member,
    /// A semaphore's lease node (in `leases`).
    Lease,
    /// A semaphore's mutex contender (in `locks`).
    Queued,
    /// A queue's item taken next (or the next candidate if it was taken meanwhile).
    Oldest,
    /// A queue's claim (in the side directory).
    Claim,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct Slot {
    role: Role,
    name: String,
    path: String,
    read: Option<(Stat, Bytes)>,
}

/// One directory being looked at.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct Dir {
    path: String,
    depth: u32,
    stat: Stat,
    kind: Kind,
    /// Listed (its node exists and was readable).
    listed: bool,
    ready: bool,
    priority: bool,
    items: usize,
    /// Queue items after the oldest one read, to read next if it was taken meanwhile.
    spare: VecDeque<String>,
    slots: Vec<Slot>,
    unread: usize,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Sub {
    Leases,
    Locks,
    Claims,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Step {
    Sync,
    List(usize),
    Sub(usize, Sub),
    Read(usize, usize),
}

fn get(path: &str) -> Request {
    Request::GetData(PathWatch {
        path: path.into(),
        watch: false,
    })
}

/// How many queue items after the oldest are kept to read if the oldest is taken
/// between the listing and its read.
const SPARE_ITEMS: usize = 8;
/// How deep [`InspectConfig::below`] goes.
const MAX_DEPTH: u32 = 64;

/// Describes the recipes at (and optionally below) a path; see the [module docs](self).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Inspect {
    config: InspectConfig,
    kit: Kit<Step, InspectEvent>,
    phase: Phase,
    dirs: Vec<Dir>,
    requests: usize,
    truncated: bool,
    rounds: u32,
    /// A retryable failure in this round: look again once the outbox drained.
    again: Option<Error>,
}

/// Where a look is: not started, looking (round after round), or over.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Phase {
    New,
    Looking,
    Done,
}

impl Inspect {
    /// Looks (rounds) before a run of retryable failures ends it with `Failed`.
    pub const MAX_ROUNDS: u32 = 8;

    /// A look as `config` says; [`start`](Self::start) sends it.
    pub fn new(config: InspectConfig) -> Self {
        Inspect {
            config,
            kit: Kit::default(),
            phase: Phase::New,
            dirs: Vec::new(),
            requests: 0,
            truncated: false,
            rounds: 0,
            again: None,
        }
    }

    /// Starts (once).
    pub fn start(&mut self, now: Instant) {
        if self.phase != Phase::New {
            return;
        }
        self.phase = Phase::Looking;
        match valid_path(&self.config.path) {
            Ok(()) => self.begin(now),
            Err(e) => self.finish(InspectEvent::Failed(e)),
        }
    }

    fn begin(&mut self, _now: Instant) {
        self.rounds += 1;
        self.dirs.clear();
        self.requests = 0;
        self.truncated = false;
        let root = self.config.path.clone();
        self.kit.send(
            Step::Sync,
            Request::Sync(PathRequest { path: root.clone() }),
        );
        self.list(root, 0);
    }

    /// One more request within the budget?
    fn budget(&mut self) -> bool {
        if self.requests < self.config.max_reads.max(1) {
            self.requests += 1;
            true
        } else {
            self.truncated = true;
            false
        }
    }

    fn list(&mut self, path: String, depth: u32) {
        let d = self.dirs.len();
        self.kit.send(
            Step::List(d),
            Request::GetChildren2(PathWatch {
                path: path.clone(),
                watch: false,
            }),
        );
        self.requests += 1;
        self.dirs.push(Dir {
            path,
            depth,
            stat: Stat::default(),
            kind: Kind::Node,
            listed: false,
            ready: false,
            priority: false,
            items: 0,
            spare: VecDeque::new(),
            slots: Vec::new(),
            unread: 0,
        });
    }

    fn sub(&mut self, d: usize, sub: Sub) {
        let path = match sub {
            Sub::Leases => join(&self.dirs[d].path, "leases"),
            Sub::Locks => join(&self.dirs[d].path, "locks"),
            Sub::Claims => queue::meta_dir(&self.dirs[d].path),
        };
        if self.budget() {
            let req = Request::GetChildren(PathWatch { path, watch: false });
            self.kit.send(Step::Sub(d, sub), req);
        }
    }

    /// Reads the participant `name` of directory `d` (in `parent`) as `role`; counted
    /// as unread once the budget ran out.
    fn read(&mut self, d: usize, role: Role, parent: &str, name: &str) {
        if !self.budget() {
            self.dirs[d].unread += 1;
            return;
        }
        let path = join(parent, name);
        let dir = &mut self.dirs[d];
        let s = dir.slots.len();
        self.kit.send(Step::Read(d, s), get(&path));
        dir.slots.push(Slot {
            role,
            name: name.into(),
            path,
            read: None,
        });
    }

    /// Reads every contender of `children` with a known marker, in lock order.
    fn read_contenders(&mut self, d: usize, role: Role, parent: &str, children: &[String]) {
        for c in contender::sorted(children) {
            self.read(d, role, parent, &c.name);
        }
    }

    /// The directory `d` was listed: decide what to read.
    fn listed(&mut self, d: usize, children: Vec<String>, stat: Stat) {
        let kind = kind_of(&children);
        let path = self.dirs[d].path.clone();
        {
            let dir = &mut self.dirs[d];
            dir.stat = stat;
            dir.kind = kind;
            dir.listed = true;
        }
        match kind {
            Kind::Lock | Kind::ReadWriteLock | Kind::Election => {
                self.read_contenders(d, Role::Member, &path, &children)
            }
            Kind::Semaphore if children.iter().any(|c| contender::split(c).is_some()) => {
                // A `leases` directory itself.
                self.read_contenders(d, Role::Lease, &path, &children)
            }
            Kind::Semaphore => {
                self.sub(d, Sub::Leases);
                if children.iter().any(|c| c == "locks") {
                    self.sub(d, Sub::Locks);
                }
            }
            Kind::Queue => {
                let format = queue_format(&children).unwrap_or(Format::Fifo);
                let dir = &mut self.dirs[d];
                dir.priority = format == Format::Priority;
                dir.items = children
                    .iter()
                    .filter(|c| queue::parse_item(format, c).is_some())
                    .count();
                dir.spare = queue::sorted_items(format, &children, SPARE_ITEMS + 1).into();
                self.next_oldest(d);
                self.sub(d, Sub::Claims);
            }
            Kind::DoubleBarrier => {
                self.dirs[d].ready = children.iter().any(|c| c == READY);
                let mut members: Vec<&String> = children.iter().filter(|c| *c != READY).collect();
                members.sort();
                for m in members {
                    self.read(d, Role::Member, &path, m);
                }
            }
            Kind::Node => {
                if self.config.below && self.dirs[d].depth < MAX_DEPTH {
                    let mut names = children;
                    names.sort();
                    let depth = self.dirs[d].depth + 1;
                    for n in names {
                        if self.requests >= self.config.max_reads.max(1) {
                            self.truncated = true;
                            break;
                        }
                        self.list(join(&path, &n), depth);
                    }
                }
            }
        }
    }

    /// Reads the next candidate for a queue's oldest item.
    fn next_oldest(&mut self, d: usize) {
        if let Some(name) = self.dirs[d].spare.pop_front() {
            let path = self.dirs[d].path.clone();
            self.read(d, Role::Oldest, &path, &name);
        }
    }

    fn sub_listed(&mut self, d: usize, sub: Sub, children: &[String]) {
        match sub {
            Sub::Leases => {
                let parent = join(&self.dirs[d].path, "leases");
                self.read_contenders(d, Role::Lease, &parent, children);
            }
            Sub::Locks => {
                let parent = join(&self.dirs[d].path, "locks");
                self.read_contenders(d, Role::Queued, &parent, children);
            }
            Sub::Claims => {
                let parent = queue::meta_dir(&self.dirs[d].path);
                let mut claims: Vec<&String> = children
                    .iter()
                    .filter(|c| c.starts_with(queue::CLAIM_PREFIX))
                    .collect();
                claims.sort();
                for c in claims {
                    self.read(d, Role::Claim, &parent, c);
                }
            }
        }
    }

    fn finish(&mut self, event: InspectEvent) {
        if self.phase != Phase::Done {
            self.phase = Phase::Done;
            self.kit.clear_requests();
            self.kit.emit(event);
        }
    }

    /// Every answer of the round is in: describe, or look again.
    fn round_done(&mut self, now: Instant) {
        if self.phase == Phase::Done || !self.kit.is_quiet() {
            return;
        }
        match self.again.take() {
            Some(e) if self.rounds >= Self::MAX_ROUNDS => self.finish(InspectEvent::Failed(e)),
            Some(e) => {
                self.again = Some(e);
                self.kit.failed(now);
                self.on_timeout(now);
            }
            None => {
                let descriptions = self.describe();
                let truncated = self.truncated;
                self.finish(InspectEvent::Described(Survey {
                    descriptions,
                    truncated,
                }));
            }
        }
    }

    /// The round's reads as descriptions, in path order.
    fn describe(&mut self) -> Vec<Description> {
        let mut out: Vec<Description> = Vec::new();
        for (i, dir) in core::mem::take(&mut self.dirs).into_iter().enumerate() {
            if !dir.listed || (i > 0 && dir.kind == Kind::Node) {
                continue; // gone, unreadable, or no recipe below the root
            }
            if i == 0 && dir.kind == Kind::Node && self.config.below {
                continue; // the root has no layout: only what was found below it
            }
            let unread = dir.unread;
            let (path, stat) = (dir.path.clone(), dir.stat);
            let shape = shape_of(dir);
            out.push(Description {
                path,
                stat,
                shape,
                unread,
            });
        }
        out.sort_by(|a, b| a.path.cmp(&b.path));
        out
    }
}

/// The participants of `dir` in `role` that were read (still there), in read order.
fn present(slots: &mut Vec<Slot>, role: Role) -> Vec<Participant> {
    let mut out = Vec::new();
    slots.retain_mut(|s| {
        if s.role != role {
            return true;
        }
        if let Some((stat, data)) = s.read.take() {
            out.push(Participant {
                name: core::mem::take(&mut s.name),
                stat,
                data,
            });
        }
        false
    });
    out
}

fn shape_of(mut dir: Dir) -> Shape {
    let slots = &mut dir.slots;
    match dir.kind {
        Kind::Lock => {
            let mut all = present(slots, Role::Member).into_iter();
            Shape::Lock {
                holder: all.next(),
                waiters: all.collect(),
            }
        }
        Kind::Election => {
            let mut all = present(slots, Role::Member).into_iter();
            Shape::Election {
                leader: all.next(),
                candidates: all.collect(),
            }
        }
        Kind::ReadWriteLock => {
            let mut waiters = present(slots, Role::Member);
            let held = match waiters.first() {
                Some(first) if !first.is_reader() => 1,
                _ => waiters.iter().take_while(|p| p.is_reader()).count(),
            };
            let holders = waiters.drain(..held).collect();
            Shape::ReadWriteLock { holders, waiters }
        }
        Kind::Semaphore => Shape::Semaphore {
            leases: present(slots, Role::Lease),
            queued: present(slots, Role::Queued),
        },
        Kind::Queue => Shape::Queue {
            priority: dir.priority,
            items: dir.items,
            oldest: present(slots, Role::Oldest).into_iter().next(),
            claims: present(slots, Role::Claim),
        },
        Kind::DoubleBarrier => Shape::DoubleBarrier {
            ready: dir.ready,
            members: present(slots, Role::Member),
        },
        Kind::Node => Shape::Node,
    }
}

impl Inspect {
    /// The answer to request `op`, sent for `step` (`on_reply`: `protocol_head!`).
    fn on_answer(&mut self, now: Instant, _op: OpId, step: Step, result: Reply) {
        if self.phase == Phase::Done {
            return;
        }
        match (step, result) {
            (_, Err(e)) if e.is_retryable() => {
                self.again.get_or_insert(e);
            }
            // This round is lost already: let its answers drain, read nothing more.
            _ if self.again.is_some() => {}
            (Step::Sync, Ok(_)) => self.kit.succeeded(),
            // A sync of a missing path: the listing tells.
            (Step::Sync, Err(Error::Server(ErrorCode::NoNode))) => {}
            (Step::List(d), Ok(Response::Children2 { children, stat })) => {
                self.listed(d, children, stat)
            }
            (Step::Sub(d, sub), Ok(Response::Children(children))) => {
                self.sub_listed(d, sub, &children)
            }
            (Step::Read(d, s), Ok(Response::Data { data, stat })) => {
                if let Some(slot) = self.dirs.get_mut(d).and_then(|dir| dir.slots.get_mut(s)) {
                    slot.read = Some((stat, data));
                }
            }
            // The path itself: missing, not readable, refused.
            (Step::Sync | Step::List(0), Err(e)) => return self.finish(InspectEvent::Failed(e)),
            // Below it: a node gone since its parent's listing (released, taken,
            // left), or one we may not read, is left out.
            (Step::List(_) | Step::Sub(..), Err(_)) => {}
            (Step::Read(d, s), Err(_)) => {
                let oldest = self
                    .dirs
                    .get(d)
                    .and_then(|dir| dir.slots.get(s))
                    .is_some_and(|slot| slot.role == Role::Oldest);
                if oldest {
                    self.next_oldest(d);
                }
            }
            (_, Ok(_)) => return self.finish(InspectEvent::Failed(Error::UnexpectedReply)),
        }
        self.round_done(now);
    }
}

impl Protocol for Inspect {
    protocol_head!(InspectEvent, answer);

    fn on_session(&mut self, now: Instant, change: SessionChange) {
        match change.end_error() {
            Some(e) => self.finish(InspectEvent::Failed(e)),
            None => self.on_timeout(now),
        }
    }

    fn on_timeout(&mut self, now: Instant) {
        let waiting = self.again.is_some() && self.phase == Phase::Looking;
        if waiting && self.kit.is_quiet() && self.kit.allows(now) {
            self.again = None;
            self.begin(now);
        }
    }

    fn on_abandon(&mut self, _: Instant) {
        self.phase = Phase::Done;
        self.kit.clear_requests();
    }

    fn deadline(&self) -> Option<Instant> {
        match &self.again {
            Some(_) if self.phase == Phase::Looking && self.kit.is_quiet() => self.kit.retry_at(),
            _ => None,
        }
    }

    fn finished(&self) -> bool {
        self.phase == Phase::Done && self.kit.no_events()
    }

    fn check(&self) {
        // A round waiting to look again has nothing in flight once it drained, and a
        // finished look sends nothing more.
        debug_assert!(self.phase != Phase::Done || self.kit.is_quiet());
        debug_assert!(self.phase != Phase::New || (self.kit.is_quiet() && self.again.is_none()));
    }
}
