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
//! use zk_recipes::recipe::{Recipe, SessionChange};
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

use super::kit::{parent_of, Kit, ParentStep, Plumbing, Protocol};
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

/// One barrier command as a machine; see the [module docs](self).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Barrier {
    config: BarrierConfig,
    command: BarrierCommand,
    deadline: Option<Instant>,
    started: bool,
    done: bool,
    /// Something must be (re)sent when the session allows.
    need: bool,
    with_parents: bool,
    sync_next: bool,
    /// Waiting: the last `exists` said the node is there (a deletion releases us).
    watching: bool,
    /// An `exists` has answered (a wait with a past deadline still looks once).
    looked: bool,
    /// The deadline passed before the first look: decided by its answer.
    deferred: bool,
    suspended: bool,
    kit: Kit<Purpose, BarrierEvent>,
}

impl Barrier {
    fn new(config: BarrierConfig, command: BarrierCommand, deadline: Option<Instant>) -> Self {
        Barrier {
            config,
            command,
            deadline,
            started: false,
            done: false,
            need: false,
            with_parents: false,
            sync_next: false,
            watching: false,
            looked: false,
            deferred: false,
            suspended: false,
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
        if !self.started {
            self.deadline = deadline;
        }
    }

    /// The command this machine runs.
    pub fn command(&self) -> BarrierCommand {
        self.command
    }

    /// Has the command ended?
    pub fn has_ended(&self) -> bool {
        self.done
    }

    /// Starts the command (once).
    pub fn start(&mut self, now: Instant) {
        if self.started || self.done {
            return;
        }
        self.started = true;
        if let Err(error) = validate_path(&self.config.path) {
            let path = self.config.path.clone();
            return self.finish(BarrierEvent::Failed {
                error: Error::InvalidPath { path, error },
            });
        }
        self.need = true;
        self.on_timeout(now);
    }

    fn finish(&mut self, event: BarrierEvent) {
        if !self.done {
            self.done = true;
            self.need = false;
            self.kit.emit(event);
        }
    }

    fn again(&mut self, now: Instant) {
        self.need = true;
        self.sync_next = true;
        self.kit.failed(now);
    }

    fn drive(&mut self, now: Instant) {
        if !self.need || self.done || !self.kit.allows(now) || !self.kit.is_quiet() {
            return;
        }
        self.need = false;
        let path = self.config.path.clone();
        match self.command {
            BarrierCommand::Set => {
                if core::mem::take(&mut self.with_parents) {
                    let acl = &self.config.acl;
                    self.kit
                        .send_parents(&path, acl, CreateMode::Container, Purpose::Parent);
                }
                let req = CreateRequest::new(
                    path,
                    self.config.data.clone(),
                    self.config.acl.clone(),
                    CreateMode::Persistent,
                );
                self.kit.send(Purpose::Create, Request::Create(req));
            }
            BarrierCommand::Remove => {
                self.kit.send(
                    Purpose::Delete,
                    Request::Delete(DeleteRequest { path, version: -1 }),
                );
            }
            BarrierCommand::Wait => {
                // Always synced (pipelined: no extra round trip): a follower behind the
                // leader must not release us with a removal older than the wait.
                self.sync_next = false;
                self.kit.send(
                    Purpose::Sync,
                    Request::Sync(PathRequest { path: path.clone() }),
                );
                self.watching = false;
                self.kit.send(
                    Purpose::Exists,
                    Request::Exists(PathWatch { path, watch: true }),
                );
            }
        }
    }

    fn on_create(&mut self, now: Instant, result: Result<Response, Error>) {
        match result {
            Ok(_) | Err(Error::Server(ErrorCode::NodeExists)) => {
                self.finish(BarrierEvent::Set);
            }
            Err(Error::Server(ErrorCode::NoNode)) => {
                match self.kit.parents_missing(parent_of(&self.config.path)) {
                    ParentStep::Again => self.again(now),
                    ParentStep::Create => self.need = true,
                    ParentStep::Fail(error) => return self.finish(BarrierEvent::Failed { error }),
                }
                self.with_parents = true;
            }
            Err(e) if e.is_retryable() => self.again(now),
            Err(e) if e.ends_session() => {}
            Err(error) => self.finish(BarrierEvent::Failed { error }),
        }
    }

    fn on_delete(&mut self, now: Instant, result: Result<Response, Error>) {
        match result {
            Ok(_) | Err(Error::Server(ErrorCode::NoNode)) => self.finish(BarrierEvent::Removed),
            Err(e) if e.is_retryable() => self.again(now),
            Err(e) if e.ends_session() => {}
            Err(error) => self.finish(BarrierEvent::Failed { error }),
        }
    }

    fn on_exists(&mut self, now: Instant, result: Result<Response, Error>) {
        match result {
            Ok(Response::Stat(_)) => {
                self.kit.succeeded();
                self.looked = true;
                self.watching = true;
                if self.deadline.is_some_and(|d| now >= d) {
                    self.finish(BarrierEvent::TimedOut);
                }
            }
            Ok(_) => self.finish(BarrierEvent::Failed {
                error: Error::UnexpectedReply,
            }),
            Err(Error::Server(ErrorCode::NoNode)) => self.finish(BarrierEvent::Released),
            Err(e) if e.is_retryable() => {
                self.looked = true;
                self.again(now);
                if self.deadline.is_some_and(|d| now >= d) {
                    self.finish(BarrierEvent::TimedOut);
                }
            }
            Err(e) if e.ends_session() => {}
            Err(error) => self.finish(BarrierEvent::Failed { error }),
        }
    }
}

impl Protocol for Barrier {
    type Event = BarrierEvent;

    fn kit(&mut self) -> &mut dyn Plumbing<Self::Event> {
        &mut self.kit
    }

    fn on_reply(&mut self, now: Instant, op: OpId, result: Result<Response, Error>) {
        // A look behind a failed sync reads as lost (`Outbox::answer`): look again.
        let Some((purpose, result)) = self.kit.answer(op, result) else {
            return;
        };
        if !self.done {
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

    fn on_watch(&mut self, now: Instant, _op: OpId, event: &WatchEvent) {
        if self.command == BarrierCommand::Wait
            && !self.done
            && self.watching
            && event.path == self.config.path
        {
            match event.event_type {
                EventType::NodeDeleted => self.finish(BarrierEvent::Released),
                // Still up (its data changed): watch on.
                _ => self.need = true,
            }
        }
        self.drive(now);
    }

    fn on_session(&mut self, now: Instant, change: SessionChange) {
        if let Some(error) = change.end_error() {
            self.kit.clear_requests();
            if self.started {
                self.finish(BarrierEvent::Failed { error });
            } else {
                self.done = true;
            }
            return;
        }
        let waiting = self.command == BarrierCommand::Wait && self.started && !self.done;
        match change {
            SessionChange::Suspended if waiting && !self.suspended => {
                self.suspended = true;
                self.kit.emit(BarrierEvent::Suspended);
            }
            SessionChange::Reconnected { .. } if waiting => {
                if core::mem::take(&mut self.suspended) {
                    self.kit.emit(BarrierEvent::Reconnected);
                }
                // Look again (a lagging follower is synced first): a removal while the
                // connection was down releases us.
                if self.kit.is_quiet() {
                    self.need = true;
                    self.sync_next = true;
                }
            }
            _ => {}
        }
        self.drive(now);
    }

    fn on_timeout(&mut self, now: Instant) {
        // A wait whose deadline passed before its first look still looks once (if the
        // connection is up): a zero timeout is a "poll".
        if self.command == BarrierCommand::Wait
            && self.started
            && self.deadline.is_some_and(|d| now >= d)
        {
            if self.looked || self.kit.is_suspended() {
                self.finish(BarrierEvent::TimedOut);
            } else {
                self.deferred = true;
            }
        }
        self.drive(now);
    }

    fn on_abandon(&mut self, _now: Instant) {
        // Set and remove are idempotent writes: one in flight completes on its own.
        self.done = true;
        self.need = false;
        self.kit.clear_events();
    }

    fn deadline(&self) -> Option<Instant> {
        if self.done || !self.started {
            return None;
        }
        let waits = self.command == BarrierCommand::Wait && !self.deferred;
        self.kit.timeout(self.deadline.filter(|_| waits), self.need)
    }

    fn finished(&self) -> bool {
        self.done && self.kit.is_idle()
    }
}
