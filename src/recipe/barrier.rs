//! Barrier (ZooKeeper recipe "Barriers"): a node `b` that holds waiters back while it
//! exists. Compatible with Curator's `DistributedBarrier`, which is just the node.
//!
//! # Protocol
//!
//! * **Set** — `create(b)` (persistent, empty). A missing parent is created as a
//!   container in the same pipeline and the create sent again (bounded); `NodeExists`
//!   is success (the barrier is up). A create whose reply was lost is sent again.
//! * **Remove** — `delete(b)`; `NoNode` is success. A lost reply is sent again.
//! * **Wait** — `sync(b)` and `exists(b, watch)` back to back (one round trip; the
//!   sync keeps a lagging follower from answering with a state older than the wait):
//!   `NoNode` releases at once; otherwise the waiter
//!   is released by the node's deletion. Only a deletion heard *after* this wait's
//!   `exists` answered counts: a notification for an older node of the same path
//!   arrives before that answer (ZooKeeper orders notifications before the replies that
//!   follow the change). After a reconnect the waiter looks again (`sync` + `exists`),
//!   so a barrier removed while the connection was down releases it; a barrier that
//!   was removed and set again meanwhile does not (the waiter saw it up).
//!
//! Each [`Barrier`] machine runs one command and ends with one final event. A `wait`
//! on a barrier that is set again after it released us is a new machine: a new wait.
//!
//! # Events
//!
//! `Set`, `Removed`, `Released`, `TimedOut` (the wait's deadline passed) and `Failed`
//! are final; `Suspended` and `Reconnected` tell a waiter its connection dropped and
//! came back (the wait carries on). An expired or closed session ends the command with
//! `Failed`. [`BarrierEvent::outcome`] says which event ends the call.
//!
//! ```
//! use zk_recipes::recipe::barrier::{Barrier, BarrierConfig, BarrierEvent};
//! use zk_recipes::recipe::{Machine, Recipe, SessionChange};
//! use zk_recipes::proto::{ErrorCode, OpCode};
//! use zk_recipes::time::Instant;
//!
//! let mut w = Barrier::wait(BarrierConfig::new("/jobs/b"), None);
//! w.handle_session(Instant::ZERO, SessionChange::Connected { session_id: 7 });
//! w.start(Instant::ZERO);
//! let (_, sync) = w.poll_request().unwrap();
//! assert_eq!(sync.op_code(), OpCode::Sync);
//! let (op, exists) = w.poll_request().unwrap();
//! assert_eq!(exists.op_code(), OpCode::Exists);
//! w.handle_reply(Instant::ZERO, op, Err(ErrorCode::NoNode.into()));
//! assert_eq!(w.poll_event(), Some(BarrierEvent::Released));
//! ```

use alloc::string::String;
use alloc::vec::Vec;
use bytes::Bytes;

use super::kit::{parent_of, protocol_head, valid_path, Kit, ParentStep, Protocol, Reply};
use super::{OpId, SessionChange};
use crate::error::Error;
use crate::proto::*;
use crate::session::WatchEvent;
use crate::time::Instant;

/// Where the barrier is and how its node is made.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct BarrierConfig {
    /// The barrier node.
    pub path: String,
    /// Data of the node `set` creates.
    pub data: Bytes,
    /// ACL of the node and of parents created for it.
    pub acl: Vec<Acl>,
}

impl BarrierConfig {
    /// A barrier at `path`: empty data, the open ACL.
    pub fn new(path: &str) -> Self {
        BarrierConfig {
            path: path.into(),
            data: Bytes::new(),
            acl: Acl::open_unsafe(),
        }
    }
}

/// What a barrier command reports.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum BarrierEvent {
    /// `set`: the barrier node exists (created now, or already there).
    Set,
    /// `remove`: the barrier node is gone.
    Removed,
    /// `wait`: the barrier node does not exist (any more).
    Released,
    /// `wait`: the deadline passed first.
    TimedOut,
    /// The connection dropped while waiting (the wait carries on).
    Suspended,
    /// The same session is back; the waiter looks again.
    Reconnected,
    /// The command failed (session expired or closed, no permission, a parent that
    /// cannot be created, ...).
    Failed {
        /// The cause.
        error: Error,
    },
}

impl BarrierEvent {
    /// `Some` when this event ends the command: `Ok(true)` done (set, removed,
    /// released), `Ok(false)` the wait's deadline passed, `Err` the failure.
    pub fn outcome(&self) -> Option<Result<bool, Error>> {
        match self {
            BarrierEvent::Set | BarrierEvent::Removed | BarrierEvent::Released => Some(Ok(true)),
            BarrierEvent::TimedOut => Some(Ok(false)),
            BarrierEvent::Failed { error } => Some(Err(error.clone())),
            BarrierEvent::Suspended | BarrierEvent::Reconnected => None,
        }
    }
}

/// Which command a [`Barrier`] machine runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BarrierCommand {
    /// Create the node.
    Set,
    /// Delete the node.
    Remove,
    /// Wait until the node does not exist.
    Wait,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum Purpose {
    Parent(String),
    Create,
    Delete,
    Sync,
    Exists,
}

/// Where a command stands: each phase with what exists only in it.
///
/// | phase | what it carries |
/// | --- | --- |
/// | `Idle` | nothing: not started |
/// | `Writing` | set or remove: the write to send (with the node's ancestors first), or sent |
/// | `Waiting` | wait: what the last look said ([`Seen`]), a look to send, the `Suspended` told |
/// | `Done` | nothing: the final event is reported (or the command was abandoned) |
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum Phase {
    Idle,
    Writing(Write),
    Waiting(Waiter),
    Done,
}

/// The write of `set` (create) or `remove` (delete).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Write {
    /// To be sent when the session allows; `parents`: the node's missing ancestors are
    /// created first, in the same pipeline (`set` only).
    Send { parents: bool },
    /// In flight.
    Sent,
}

/// A wait.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
struct Waiter {
    seen: Seen,
    /// A look (`sync` + `exists`) is to be sent when the session allows.
    look: bool,
    /// `Suspended` was reported: `Reconnected` follows when the session is back.
    suspended: bool,
}

/// What the wait's looks said so far.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Seen {
    /// No look answered yet; `deferred`: the deadline passed before it, its answer
    /// decides (a wait with a past deadline still looks once).
    First { deferred: bool },
    /// The last look found the node: its deletion releases us.
    Up,
    /// A look answered, but the last one did not find the node up (refused or lost),
    /// or a new look is on its way.
    Again,
}

/// One barrier command as a machine; see the [module docs](self).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Barrier {
    config: BarrierConfig,
    command: BarrierCommand,
    deadline: Option<Instant>,
    phase: Phase,
    kit: Kit<Purpose, BarrierEvent>,
}

impl Barrier {
    fn new(config: BarrierConfig, command: BarrierCommand, deadline: Option<Instant>) -> Self {
        Barrier {
            config,
            command,
            deadline,
            phase: Phase::Idle,
            kit: Kit::default(),
        }
    }

    /// A machine that sets the barrier (creates its node) once [`start`](Self::start)ed.
    pub fn set(config: BarrierConfig) -> Self {
        Self::new(config, BarrierCommand::Set, None)
    }

    /// A machine that removes the barrier (deletes its node).
    pub fn remove(config: BarrierConfig) -> Self {
        Self::new(config, BarrierCommand::Remove, None)
    }

    /// A machine that waits until the barrier does not exist, or `deadline`.
    pub fn wait(config: BarrierConfig, deadline: Option<Instant>) -> Self {
        Self::new(config, BarrierCommand::Wait, deadline)
    }

    /// Sets (or clears) the wait's deadline before [`start`](Self::start) (a driver that
    /// knows its clock only inside a command computes it there).
    pub fn set_deadline(&mut self, deadline: Option<Instant>) {
        if self.phase == Phase::Idle {
            self.deadline = deadline;
        }
    }

    /// The command this machine runs.
    pub fn command(&self) -> BarrierCommand {
        self.command
    }

    /// Has the command ended?
    pub fn has_ended(&self) -> bool {
        self.phase == Phase::Done
    }

    /// Starts the command (once).
    pub fn start(&mut self, now: Instant) {
        if self.phase != Phase::Idle {
            return;
        }
        if let Err(error) = valid_path(&self.config.path) {
            return self.finish(BarrierEvent::Failed { error });
        }
        self.phase = match self.command {
            BarrierCommand::Set | BarrierCommand::Remove => {
                Phase::Writing(Write::Send { parents: false })
            }
            BarrierCommand::Wait => Phase::Waiting(Waiter {
                seen: Seen::First { deferred: false },
                look: true,
                suspended: false,
            }),
        };
        self.on_timeout(now);
    }

    fn finish(&mut self, event: BarrierEvent) {
        self.kit.end(&mut self.phase, Phase::Done, event);
    }

    /// Something is to be sent again after the backoff.
    fn again(&mut self, now: Instant) {
        self.resend(false);
        self.kit.failed(now);
    }

    /// Something is to be sent (`parents`: the node's ancestors first).
    fn resend(&mut self, parents: bool) {
        match &mut self.phase {
            Phase::Writing(write) => *write = Write::Send { parents },
            Phase::Waiting(waiter) => waiter.look = true,
            Phase::Idle | Phase::Done => {}
        }
    }

    /// Is something to be sent?
    fn sending(&self) -> bool {
        match &self.phase {
            Phase::Writing(write) => matches!(write, Write::Send { .. }),
            Phase::Waiting(waiter) => waiter.look,
            Phase::Idle | Phase::Done => false,
        }
    }

    fn passed(&self, now: Instant) -> bool {
        self.deadline.is_some_and(|d| now >= d)
    }

    fn drive(&mut self, now: Instant) {
        if !self.sending() || !self.kit.allows(now) || !self.kit.is_quiet() {
            return;
        }
        let path = self.config.path.clone();
        match (&mut self.phase, self.command) {
            (Phase::Writing(write), BarrierCommand::Set) => {
                if let Write::Send { parents: true } = write {
                    let acl = &self.config.acl;
                    self.kit
                        .send_parents(&path, acl, CreateMode::Container, Purpose::Parent);
                }
                *write = Write::Sent;
                let req = CreateRequest::new(
                    path,
                    self.config.data.clone(),
                    self.config.acl.clone(),
                    CreateMode::Persistent,
                );
                self.kit.send(Purpose::Create, Request::Create(req));
            }
            (Phase::Writing(write), _) => {
                *write = Write::Sent;
                self.kit.send(
                    Purpose::Delete,
                    Request::Delete(DeleteRequest { path, version: -1 }),
                );
            }
            (Phase::Waiting(waiter), _) => {
                // Always synced (pipelined: no extra round trip): a follower behind the
                // leader must not release us with a removal older than the wait.
                waiter.look = false;
                if waiter.seen == Seen::Up {
                    waiter.seen = Seen::Again;
                }
                self.kit.sync(Purpose::Sync, &path);
                self.kit.send(
                    Purpose::Exists,
                    Request::Exists(PathWatch { path, watch: true }),
                );
            }
            (Phase::Idle | Phase::Done, _) => {}
        }
    }

    fn on_create(&mut self, now: Instant, result: Reply) {
        match result {
            Ok(_) | Err(Error::Server(ErrorCode::NodeExists)) => {
                self.finish(BarrierEvent::Set);
            }
            Err(Error::Server(ErrorCode::NoNode)) => {
                match self.kit.parents_missing(parent_of(&self.config.path)) {
                    ParentStep::Again => self.kit.failed(now),
                    ParentStep::Create => {}
                    ParentStep::Fail(error) => return self.finish(BarrierEvent::Failed { error }),
                }
                self.resend(true);
            }
            Err(e) if e.is_retryable() => self.again(now),
            Err(e) if e.ends_session() => {}
            Err(error) => self.finish(BarrierEvent::Failed { error }),
        }
    }

    fn on_delete(&mut self, now: Instant, result: Reply) {
        match result {
            Ok(_) | Err(Error::Server(ErrorCode::NoNode)) => self.finish(BarrierEvent::Removed),
            Err(e) if e.is_retryable() => self.again(now),
            Err(e) if e.ends_session() => {}
            Err(error) => self.finish(BarrierEvent::Failed { error }),
        }
    }

    fn on_exists(&mut self, now: Instant, result: Reply) {
        let seen = match result {
            Ok(Response::Stat(_)) => {
                self.kit.succeeded();
                Seen::Up
            }
            Ok(_) => {
                return self.finish(BarrierEvent::Failed {
                    error: Error::UnexpectedReply,
                })
            }
            Err(Error::Server(ErrorCode::NoNode)) => return self.finish(BarrierEvent::Released),
            Err(e) if e.is_retryable() => {
                self.again(now);
                Seen::Again
            }
            Err(e) if e.ends_session() => return,
            Err(error) => return self.finish(BarrierEvent::Failed { error }),
        };
        if let Phase::Waiting(waiter) = &mut self.phase {
            waiter.seen = seen;
        }
        if self.passed(now) {
            self.finish(BarrierEvent::TimedOut);
        }
    }

    /// The waiter's `Suspended`/`Reconnected` edges, and its look after a reconnect.
    fn waiter_session(&mut self, change: SessionChange) {
        let quiet = self.kit.is_quiet();
        let Phase::Waiting(waiter) = &mut self.phase else {
            return;
        };
        match change {
            SessionChange::Suspended if !waiter.suspended => {
                waiter.suspended = true;
                self.kit.emit(BarrierEvent::Suspended);
            }
            SessionChange::Reconnected { .. } => {
                if core::mem::take(&mut waiter.suspended) {
                    self.kit.emit(BarrierEvent::Reconnected);
                }
                // Look again (a lagging follower is synced first): a removal while the
                // connection was down releases us.
                if quiet {
                    waiter.look = true;
                }
            }
            _ => {}
        }
    }
}

impl Barrier {
    /// The answer to request `op`, sent for `purpose` (`on_reply`: `protocol_head!`).
    fn on_answer(&mut self, now: Instant, _op: OpId, purpose: Purpose, result: Reply) {
        // A look behind a failed sync reads as lost (`Outbox::answer`): look again.
        if self.phase != Phase::Done {
            match purpose {
                Purpose::Parent(p) => self.kit.parent_answered(&p, &result),
                Purpose::Sync => {}
                Purpose::Create => self.on_create(now, result),
                Purpose::Delete => self.on_delete(now, result),
                Purpose::Exists => self.on_exists(now, result),
            }
        }
        self.drive(now);
    }
}

impl Protocol for Barrier {
    protocol_head!(BarrierEvent, answer);

    fn on_watch(&mut self, now: Instant, _op: OpId, event: &WatchEvent) {
        if let Phase::Waiting(waiter) = &mut self.phase {
            if waiter.seen == Seen::Up && event.path == self.config.path {
                match event.event_type {
                    EventType::NodeDeleted => self.finish(BarrierEvent::Released),
                    // Still up (its data changed): watch on.
                    _ => waiter.look = true,
                }
            }
        }
        self.drive(now);
    }

    fn on_session(&mut self, now: Instant, change: SessionChange) {
        if let Some(error) = change.end_error() {
            self.kit.clear_requests();
            match self.phase {
                Phase::Idle => self.phase = Phase::Done,
                _ => self.finish(BarrierEvent::Failed { error }),
            }
            return;
        }
        self.waiter_session(change);
        self.drive(now);
    }

    fn on_timeout(&mut self, now: Instant) {
        // A wait whose deadline passed before its first look still looks once (if the
        // connection is up): a zero timeout is a "poll".
        let passed = self.passed(now);
        let suspended = self.kit.is_suspended();
        if let Phase::Waiting(waiter) = &mut self.phase {
            match &mut waiter.seen {
                _ if !passed => {}
                Seen::First { deferred } if !suspended => *deferred = true,
                _ => self.finish(BarrierEvent::TimedOut),
            }
        }
        self.drive(now);
    }

    fn on_abandon(&mut self, _now: Instant) {
        // Set and remove are idempotent writes: one in flight completes on its own.
        self.phase = Phase::Done;
        self.kit.clear_events();
    }

    fn deadline(&self) -> Option<Instant> {
        let deadline = match &self.phase {
            Phase::Waiting(Waiter {
                seen: Seen::First { deferred: true },
                ..
            }) => None,
            Phase::Waiting(_) => self.deadline,
            Phase::Writing(_) => None,
            Phase::Idle | Phase::Done => return None,
        };
        self.kit.timeout(deadline, self.sending())
    }

    fn finished(&self) -> bool {
        self.phase == Phase::Done && self.kit.is_idle()
    }

    fn check(&self) {
        // The phase is the command's; nothing is sent before the start.
        match &self.phase {
            Phase::Idle => debug_assert!(self.kit.is_quiet(), "a request before the start"),
            Phase::Writing(write) => {
                debug_assert!(self.command != BarrierCommand::Wait, "a wait that writes");
                debug_assert!(
                    self.command == BarrierCommand::Set
                        || *write != (Write::Send { parents: true }),
                    "a remove that creates parents"
                );
            }
            Phase::Waiting(waiter) => {
                debug_assert!(self.command == BarrierCommand::Wait, "a write that waits");
                // Only one look at a time: a look is sent once the last one is over.
                debug_assert!(
                    !(waiter.seen == Seen::Up && self.kit.any(|p| *p == Purpose::Exists)),
                    "watching on a look whose answer is still to come"
                );
            }
            Phase::Done => {}
        }
    }
}
