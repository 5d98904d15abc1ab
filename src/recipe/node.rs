//! Single-node recipes the group and rendezvous recipes are built from: a node we keep
//! in place ([`OwnedNode`], Curator's `PersistentNode`) and a node we follow
//! ([`NodeWatch`], the watched-value half of the paper's rendezvous and configuration
//! recipes).
//!
//! # [`OwnedNode`]: keep one node of ours in place
//!
//! 1. [`create`](OwnedNode::create) sends `create2(<path>, data)` (ephemeral by default)
//!    and, pipelined behind it, `getData(<path>, watch)`: the read answers after the
//!    create, so one round trip tells whether the node is ours (its `ephemeralOwner` is
//!    our session) and arms a watch on it. Missing ancestors are created as containers
//!    (at most twice; a parent that cannot be created ends with [`Error::NoParent`] or
//!    [`Error::ChrootMissing`]).
//! 2. `NodeExists` is not an error: the read decides. Our own node (a create whose reply
//!    was lost) is adopted; another session's node at our path is reported as
//!    [`Blocked`](OwnedNodeEvent::Blocked) and watched until it goes, then we create ours.
//! 3. Our data is kept: if the node holds other data (adopted, or written by someone
//!    else) it is set back, unless [`OwnedNodeConfig::restore_data`] is off.
//!    [`set_data`](OwnedNode::set_data) changes what we keep there.
//! 4. Deleted by someone else while our session lives, or gone with an expired session:
//!    [`Lost`](OwnedNodeEvent::Lost), then re-created (after the next `Connected` for an
//!    expiry) if [`OwnedNodeConfig::recreate`] is on (the default); otherwise `Failed`.
//! 5. [`delete`](OwnedNode::delete) (and abandoning) deletes the node if it is ours —
//!    never another session's — and ends with [`Removed`](OwnedNodeEvent::Removed).
//!
//! # [`NodeWatch`]: follow one node's existence and data
//!
//! 1. `getData(<path>, watch)`: the node's data and Stat ([`Data`](NodeWatchEvent::Data)).
//! 2. `NoNode`: [`Missing`](NodeWatchEvent::Missing), and `exists(<path>, watch)` so its
//!    creation is noticed (if `exists` finds it, it is read at once).
//! 3. Every notification leads to one read; a version already reported is not reported
//!    again, so the events are the node's versions in server order, the latest last.
//! 4. After a reconnect the node is read again (after `sync`): nothing is missed.
//!
//! # Session semantics (both)
//!
//! `Suspended` on connection loss, `Reconnected` when the session is back (for an owned
//! node: once the node is verified ours). Both machines carry on across a session
//! expiry when the client renews the session (its default): the watch follows the
//! node again from the next `Connected`; the owned node is re-created if asked to.
//! `Closed` ends both with `Failed(Error::Closed)`.
//!
//! Each machine holds at most one watch registration at a time, so watches never pile
//! up however often the node changes.

use alloc::string::String;
use alloc::vec::Vec;
use bytes::Bytes;

use super::kit::{parent_of, Kit, ParentStep, Plumbing, Protocol};
use super::lock::LostReason;
use super::{OpId, Recipe, SessionChange};
use crate::error::Error;
use crate::proto::*;
use crate::session::WatchEvent;
use crate::time::Instant;

// ======================================================================================
// OwnedNode
// ======================================================================================

/// What [`OwnedNode`] keeps in place.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct OwnedNodeConfig {
    /// The node's full path.
    pub path: String,
    /// Its data.
    pub data: Bytes,
    /// Its ACL (and that of parents created for it).
    pub acl: Vec<Acl>,
    /// `Ephemeral` (default) or `Persistent`; other modes are refused.
    pub mode: CreateMode,
    /// Re-create the node when it was deleted by someone else, or when the session
    /// expired and a new one started (default: on).
    pub recreate: bool,
    /// Set our data back when the node holds other data (default: on).
    pub restore_data: bool,
}

impl OwnedNodeConfig {
    /// An ephemeral node at `path` with `data`, open ACL, re-created, data restored.
    pub fn new(path: &str, data: impl Into<Bytes>) -> Self {
        OwnedNodeConfig {
            path: path.into(),
            data: data.into(),
            acl: Acl::open_unsafe(),
            mode: CreateMode::Ephemeral,
            recreate: true,
            restore_data: true,
        }
    }
}

/// What an [`OwnedNode`] reports. `Removed` and `Failed` are final; the others are
/// edges.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum OwnedNodeEvent {
    /// Our node is in place (created, or found ours after a lost reply), after
    /// `create` and after every re-creation.
    Created {
        /// Its Stat.
        stat: Stat,
    },
    /// Another session's node holds our path; we wait for it to go.
    Blocked {
        /// Its `ephemeralOwner`.
        owner: i64,
    },
    /// The data given to [`set_data`](OwnedNode::set_data) is in the node.
    DataSet {
        /// The node's Stat after the write.
        stat: Stat,
    },
    /// The server refused to write our data (`NoAuth`, ...); the node stays as it is
    /// until the next `set_data`.
    DataRefused {
        /// Why.
        error: Error,
    },
    /// The connection dropped while our node was in place: it may be gone.
    Suspended,
    /// The session is back and our node verified.
    Reconnected,
    /// Our node is gone. Followed by `Created` again if it is re-created, else by
    /// `Failed`.
    Lost {
        /// Why.
        reason: LostReason,
    },
    /// Deleted after [`delete`](OwnedNode::delete) (or it was not ours / not there).
    /// Final.
    Removed,
    /// Ended: the node could not be created or kept (no permission, missing chroot,
    /// lost without re-creation, session closed). Final.
    Failed {
        /// The cause.
        error: Error,
    },
}

impl OwnedNodeEvent {
    /// Does this event end the machine?
    pub fn is_final(&self) -> bool {
        matches!(
            self,
            OwnedNodeEvent::Removed | OwnedNodeEvent::Failed { .. }
        )
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Phase {
    Idle,
    Active,
    Leaving,
    Done,
}

/// What we know of the node at our path.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Known {
    /// Read it to find out.
    Unknown,
    /// Not there.
    Absent,
    /// Our create is in flight.
    Creating,
    /// Ours.
    Ours,
    /// Another session's (its owner).
    Other(i64),
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum NodeOp {
    Parent(String),
    Create(Bytes),
    Read,
    Sync,
    Set(Bytes),
    Delete,
}

/// Keeps one node of ours in place; see the [module docs](self).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct OwnedNode {
    config: OwnedNodeConfig,
    phase: Phase,
    session_id: i64,
    /// A session is up (false before the first `Connected` and after an expiry).
    live: bool,
    known: Known,
    stat: Stat,
    /// The data last seen in our node.
    server_data: Option<Bytes>,
    /// `Created` reported and no `Lost` since.
    present: bool,
    created_once: bool,
    suspended: bool,
    blocked_by: Option<i64>,
    /// The op whose watch on our path is registered.
    watch: Option<OpId>,
    /// A `set_data` waits for `DataSet`.
    set_pending: bool,
    /// Data the server refused to write (not retried until it changes).
    refused: Option<Bytes>,
    parents: bool,
    sync_next: bool,
    /// Something waits for the backoff to end.
    waiting: bool,
    finish: Option<OwnedNodeEvent>,
    kit: Kit<NodeOp, OwnedNodeEvent>,
}

impl OwnedNode {
    /// A node that does nothing until [`create`](Self::create).
    pub fn new(config: OwnedNodeConfig) -> Self {
        OwnedNode {
            config,
            phase: Phase::Idle,
            session_id: 0,
            live: false,
            known: Known::Absent,
            stat: Stat::default(),
            server_data: None,
            present: false,
            created_once: false,
            suspended: false,
            blocked_by: None,
            watch: None,
            set_pending: false,
            refused: None,
            parents: false,
            sync_next: false,
            waiting: false,
            finish: None,
            kit: Kit::default(),
        }
    }

    // ----- getters -----

    /// The configuration (its `data` is what we keep in the node now).
    pub fn config(&self) -> &OwnedNodeConfig {
        &self.config
    }

    /// Our node is in place (as far as we know; `false` while suspended).
    pub fn is_present(&self) -> bool {
        self.present && !self.suspended
    }

    /// Our node's last known Stat, while it is in place.
    pub fn stat(&self) -> Option<&Stat> {
        self.present.then_some(&self.stat)
    }

    /// Has it ended (final event queued)?
    pub fn has_ended(&self) -> bool {
        self.phase == Phase::Done
    }

    // ----- commands -----

    /// Creates the node and keeps it in place (once; later calls do nothing).
    pub fn create(&mut self, now: Instant) {
        if self.phase != Phase::Idle {
            return;
        }
        if let Err(e) = self.check_config() {
            self.phase = Phase::Done;
            self.emit(OwnedNodeEvent::Failed { error: e });
            return;
        }
        self.phase = Phase::Active;
        self.known = Known::Absent;
        self.drive(now);
    }

    /// Keeps `data` in the node from now on (written even when
    /// [`restore_data`](OwnedNodeConfig::restore_data) is off); once the node holds it,
    /// [`OwnedNodeEvent::DataSet`]. Before [`create`](Self::create), it is just the
    /// data the node is created with.
    pub fn set_data(&mut self, now: Instant, data: Bytes) {
        self.config.data = data;
        self.refused = None;
        if self.phase == Phase::Active {
            self.set_pending = true;
        }
        self.drive(now);
    }

    /// Deletes the node (if it is ours) and ends with [`OwnedNodeEvent::Removed`].
    pub fn delete(&mut self, now: Instant) {
        self.stop(OwnedNodeEvent::Removed);
        self.drive(now);
    }

    // ----- internals -----

    fn check_config(&self) -> Result<(), Error> {
        validate_path(&self.config.path).map_err(|error| Error::InvalidPath {
            path: self.config.path.clone(),
            error,
        })?;
        match self.config.mode {
            CreateMode::Ephemeral | CreateMode::Persistent => Ok(()),
            _ => Err(Error::Server(ErrorCode::BadArguments)),
        }
    }

    fn ephemeral(&self) -> bool {
        self.config.mode == CreateMode::Ephemeral
    }

    fn emit(&mut self, e: OwnedNodeEvent) {
        self.kit.emit(e);
    }

    /// Ends with `finish` once our node is gone (deleting it if it is or may be ours).
    fn stop(&mut self, finish: OwnedNodeEvent) {
        match self.phase {
            Phase::Idle => {
                self.phase = Phase::Done;
                self.emit(finish);
            }
            Phase::Active => {
                self.phase = Phase::Leaving;
                self.finish = Some(finish);
                self.set_pending = false;
                if !self.live && self.ephemeral() {
                    self.end(); // no session: nothing of ours exists
                }
            }
            Phase::Leaving | Phase::Done => {}
        }
    }

    fn end(&mut self) {
        self.phase = Phase::Done;
        self.kit.clear_requests();
        self.watch = None;
        if self.present {
            self.present = false;
        }
        if let Some(f) = self.finish.take() {
            self.emit(f);
        }
    }

    fn fail(&mut self, error: Error) {
        match self.known {
            Known::Ours | Known::Creating | Known::Unknown if self.phase == Phase::Active => {
                self.stop(OwnedNodeEvent::Failed { error }) // delete what we made first
            }
            _ => {
                self.finish = Some(OwnedNodeEvent::Failed { error });
                self.end();
            }
        }
    }

    fn again(&mut self, now: Instant) {
        self.sync_next = true;
        self.kit.failed(now);
    }

    fn path(&self) -> String {
        self.config.path.clone()
    }

    fn owned_by_us(&self, stat: &Stat) -> bool {
        if self.ephemeral() {
            stat.ephemeral_owner == self.session_id && self.session_id != 0
        } else {
            stat.ephemeral_owner == 0
        }
    }

    /// Sends what is needed if the session allows it now.
    fn drive(&mut self, now: Instant) {
        if !matches!(self.phase, Phase::Active | Phase::Leaving) || !self.live {
            return;
        }
        if !self.kit.allows(now) {
            self.waiting = !self.kit.is_suspended();
            return;
        }
        self.waiting = false;
        if self
            .kit
            .any(|p| matches!(p, NodeOp::Create(_) | NodeOp::Read | NodeOp::Delete))
        {
            return; // an answer on its way decides
        }
        match (self.phase, self.known) {
            (_, Known::Unknown) => self.read(),
            (Phase::Active, Known::Absent) => self.send_create(),
            (Phase::Active, Known::Ours) => {
                let data = self.config.data.clone();
                if (self.config.restore_data || self.set_pending)
                    && self.server_data.as_ref() != Some(&data)
                    && self.refused.as_ref() != Some(&data)
                    && !self.kit.any(|p| matches!(p, NodeOp::Set(_)))
                {
                    let path = self.path();
                    self.kit.send(
                        NodeOp::Set(data.clone()),
                        Request::SetData(SetDataRequest {
                            path,
                            data,
                            version: -1,
                        }),
                    );
                }
                if self.watch.is_none() {
                    self.read();
                }
            }
            (Phase::Active, Known::Other(_)) if self.watch.is_none() => self.read(),
            (Phase::Leaving, Known::Ours) => {
                let path = self.path();
                self.kit.send(
                    NodeOp::Delete,
                    Request::Delete(DeleteRequest { path, version: -1 }),
                );
            }
            (Phase::Leaving, Known::Absent | Known::Other(_)) => self.end(),
            _ => {}
        }
    }

    fn read(&mut self) {
        let path = self.path();
        if self.sync_next {
            self.sync_next = false;
            self.kit.send(
                NodeOp::Sync,
                Request::Sync(PathRequest { path: path.clone() }),
            );
        }
        let watch = self.watch.is_none() && self.phase == Phase::Active;
        let op = self
            .kit
            .send(NodeOp::Read, Request::GetData(PathWatch { path, watch }));
        if watch {
            self.watch = Some(op);
        }
    }

    fn send_create(&mut self) {
        let path = self.path();
        if core::mem::take(&mut self.parents) {
            let acl = &self.config.acl;
            self.kit
                .send_parents(&path, acl, CreateMode::Container, NodeOp::Parent);
        }
        let data = self.config.data.clone();
        let create = CreateRequest::new(
            path,
            data.clone(),
            self.config.acl.clone(),
            self.config.mode,
        );
        self.kit
            .send(NodeOp::Create(data), Request::Create2(create));
        self.known = Known::Creating;
        self.sync_next = false; // the read follows our own write
        self.read();
    }

    fn became_ours(&mut self, stat: Stat) {
        self.known = Known::Ours;
        self.stat = stat;
        self.blocked_by = None;
        if !self.present {
            self.present = true;
            self.created_once = true;
            self.suspended = false;
            self.emit(OwnedNodeEvent::Created { stat });
        } else if self.suspended {
            self.suspended = false;
            self.emit(OwnedNodeEvent::Reconnected);
        }
    }

    /// A pending `set_data` is done if the node holds its data.
    fn data_confirmed(&mut self, stat: Stat) {
        if self.set_pending && self.server_data.as_ref() == Some(&self.config.data) {
            self.set_pending = false;
            self.emit(OwnedNodeEvent::DataSet { stat });
        }
    }

    /// Our node is gone while the session lives.
    fn gone(&mut self, now: Instant) {
        self.known = Known::Absent;
        self.server_data = None;
        if self.present {
            self.present = false;
            self.suspended = false;
            if self.phase == Phase::Active {
                self.emit(OwnedNodeEvent::Lost {
                    reason: LostReason::NodeDeleted,
                });
            }
        }
        if self.phase == Phase::Active && self.created_once && !self.config.recreate {
            self.fail(Error::Server(ErrorCode::NoNode));
        }
        let _ = now;
    }

    fn on_create(&mut self, now: Instant, sent: Bytes, result: Result<Response, Error>) {
        if self.known == Known::Creating {
            self.known = Known::Unknown; // the paired read decides, unless we learn more
        }
        match result {
            Ok(Response::PathStat { stat, .. }) => {
                self.kit.succeeded();
                self.server_data = Some(sent);
                self.kit.reset_parents();
                if self.phase == Phase::Active {
                    self.became_ours(stat);
                    self.data_confirmed(stat);
                } else {
                    self.known = Known::Ours; // leaving: delete it
                }
            }
            Ok(_) => self.fail(Error::UnexpectedReply),
            Err(Error::Server(ErrorCode::NodeExists)) => {}
            Err(Error::Server(ErrorCode::NoNode)) => {
                let path = self.path();
                match self.kit.parents_missing(parent_of(&path)) {
                    ParentStep::Again => self.again(now),
                    ParentStep::Create => {}
                    ParentStep::Fail(e) => return self.fail(e),
                }
                self.parents = true;
            }
            Err(e) if e.may_have_applied() => self.again(now),
            Err(e) if e.is_retryable() => self.again(now), // refused: the read says absent
            Err(e) if e.ends_session() => {}
            Err(e) => {
                if self.phase == Phase::Leaving {
                    self.known = Known::Absent;
                }
                self.fail(e)
            }
        }
    }

    fn on_read(&mut self, now: Instant, op: OpId, armed: bool, result: Result<Response, Error>) {
        if self.watch == Some(op) && !armed {
            self.watch = None;
        }
        match result {
            Ok(Response::Data { data, stat }) => {
                if self.owned_by_us(&stat) {
                    self.kit.succeeded();
                    self.server_data = Some(data);
                    if self.phase == Phase::Active {
                        self.became_ours(stat);
                        self.data_confirmed(stat);
                    } else {
                        self.known = Known::Ours;
                    }
                } else {
                    if self.present {
                        // Replaced by another session's node.
                        self.gone(now);
                    }
                    self.known = Known::Other(stat.ephemeral_owner);
                    if self.phase == Phase::Active && self.blocked_by != Some(stat.ephemeral_owner)
                    {
                        self.blocked_by = Some(stat.ephemeral_owner);
                        self.emit(OwnedNodeEvent::Blocked {
                            owner: stat.ephemeral_owner,
                        });
                    }
                }
            }
            Ok(_) => self.fail(Error::UnexpectedReply),
            Err(Error::Server(ErrorCode::NoNode)) => self.gone(now),
            Err(e) if e.is_retryable() => {
                if self.known != Known::Absent {
                    self.known = Known::Unknown;
                }
                self.again(now);
            }
            Err(e) if e.ends_session() => {}
            Err(e) => self.fail(e),
        }
    }

    fn on_set(&mut self, now: Instant, sent: Bytes, result: Result<Response, Error>) {
        match result {
            Ok(Response::Stat(stat)) => {
                self.kit.succeeded();
                if self.known == Known::Ours {
                    self.stat = stat;
                    self.server_data = Some(sent.clone());
                }
                if self.set_pending && sent == self.config.data && self.phase == Phase::Active {
                    self.set_pending = false;
                    self.emit(OwnedNodeEvent::DataSet { stat });
                }
            }
            Ok(_) => {}
            Err(Error::Server(ErrorCode::NoNode)) => {
                if self.known == Known::Ours {
                    self.known = Known::Unknown;
                }
            }
            Err(e) if e.is_retryable() => self.again(now),
            Err(e) if e.ends_session() => {}
            Err(error) => {
                self.refused = Some(sent);
                self.set_pending = false;
                self.emit(OwnedNodeEvent::DataRefused { error });
            }
        }
    }

    fn on_delete(&mut self, now: Instant, result: Result<Response, Error>) {
        match result {
            Ok(_) | Err(Error::Server(ErrorCode::NoNode)) => {
                self.known = Known::Absent;
                self.end();
            }
            Err(e) if e.is_retryable() => {
                self.known = Known::Unknown;
                self.again(now);
            }
            Err(e) if e.ends_session() => {}
            Err(error) => {
                // Refused for good: the node stays (until the session ends, if ephemeral).
                self.finish = Some(OwnedNodeEvent::Failed { error });
                self.end();
            }
        }
    }

    fn session_gone(&mut self, reason: LostReason) {
        self.kit.clear_requests();
        self.watch = None;
        self.live = false;
        self.waiting = false;
        let ephemeral = self.ephemeral();
        if ephemeral {
            self.known = Known::Absent;
            self.server_data = None;
            self.blocked_by = None;
            if self.present {
                self.present = false;
                self.suspended = false;
                self.emit(OwnedNodeEvent::Lost { reason });
            }
        } else {
            self.known = Known::Unknown;
            if self.present && !self.suspended {
                self.suspended = true;
                self.emit(OwnedNodeEvent::Suspended);
            }
        }
        let closed = reason == LostReason::SessionClosed;
        match self.phase {
            Phase::Leaving if ephemeral || closed => self.end(),
            Phase::Active if closed || (ephemeral && !self.config.recreate) => {
                self.finish = Some(OwnedNodeEvent::Failed {
                    error: reason.error(),
                });
                self.end();
            }
            Phase::Idle if closed => {
                self.phase = Phase::Done;
                self.emit(OwnedNodeEvent::Failed {
                    error: Error::Closed,
                });
            }
            _ => {}
        }
    }
}

impl Protocol for OwnedNode {
    type Event = OwnedNodeEvent;

    fn kit(&mut self) -> &mut dyn Plumbing<Self::Event> {
        &mut self.kit
    }

    fn on_reply(&mut self, now: Instant, op: OpId, result: Result<Response, Error>) {
        // A read behind a failed sync reads as lost (`Outbox::answer`): read again,
        // without asking for a second watch if the first was left.
        let Some((purpose, result, watch)) = self.kit.answer_armed(op, result) else {
            return;
        };
        let armed = watch == Some(true);
        if self.phase == Phase::Done {
            return;
        }
        match purpose {
            NodeOp::Parent(p) => self.kit.parent_answered(&p, &result),
            NodeOp::Sync => {}
            NodeOp::Create(sent) => self.on_create(now, sent, result),
            NodeOp::Read => self.on_read(now, op, armed, result),
            NodeOp::Set(sent) => self.on_set(now, sent, result),
            NodeOp::Delete => self.on_delete(now, result),
        }
        self.drive(now);
    }

    fn on_watch(&mut self, now: Instant, op: OpId, event: &WatchEvent) {
        if self.watch != Some(op) || self.phase == Phase::Done {
            return; // an older registration, or we are done
        }
        self.watch = None;
        match event.event_type {
            // A read or create on its way tells more (and later) than this.
            EventType::NodeDeleted
                if !self
                    .kit
                    .any(|p| matches!(p, NodeOp::Create(_) | NodeOp::Read)) =>
            {
                self.gone(now)
            }
            EventType::NodeDataChanged | EventType::NodeCreated => {
                if matches!(self.known, Known::Ours | Known::Other(_) | Known::Absent) {
                    self.known = Known::Unknown;
                }
            }
            _ => {}
        }
        self.drive(now);
    }

    fn on_session(&mut self, now: Instant, change: SessionChange) {
        match change {
            SessionChange::Connected { session_id } => {
                self.session_id = session_id;
                self.live = true;
            }
            SessionChange::Suspended => {
                if self.present && !self.suspended && self.phase == Phase::Active {
                    self.suspended = true;
                    self.emit(OwnedNodeEvent::Suspended);
                }
            }
            SessionChange::Reconnected { session_id } => {
                self.session_id = session_id;
                self.live = true;
                self.sync_next = true;
                if matches!(self.known, Known::Ours | Known::Other(_)) {
                    self.known = Known::Unknown; // verify
                }
            }
            SessionChange::Expired => self.session_gone(LostReason::SessionExpired),
            SessionChange::Closed => self.session_gone(LostReason::SessionClosed),
        }
        self.drive(now);
    }

    fn on_timeout(&mut self, now: Instant) {
        self.drive(now);
    }

    fn on_abandon(&mut self, now: Instant) {
        self.delete(now);
    }

    fn deadline(&self) -> Option<Instant> {
        if self.waiting && matches!(self.phase, Phase::Active | Phase::Leaving) {
            self.kit.retry_at()
        } else {
            None
        }
    }

    fn finished(&self) -> bool {
        self.phase == Phase::Done && self.kit.no_events()
    }
}

/// The commands of a machine that keeps one node in place ([`OwnedNode`], and
/// [`GroupMember`](super::group::GroupMember) built on it), so hosts can wrap both the
/// same way.
pub trait NodeCommands: Recipe<Event = OwnedNodeEvent> {
    /// Creates the node and keeps it ([`OwnedNode::create`]).
    fn create_node(&mut self, now: Instant);
    /// Deletes it if it is ours and ends ([`OwnedNode::delete`]).
    fn delete_node(&mut self, now: Instant);
    /// Keeps new data in it ([`OwnedNode::set_data`]).
    fn set_node_data(&mut self, now: Instant, data: Bytes);
}

impl NodeCommands for OwnedNode {
    fn create_node(&mut self, now: Instant) {
        self.create(now)
    }
    fn delete_node(&mut self, now: Instant) {
        self.delete(now)
    }
    fn set_node_data(&mut self, now: Instant, data: Bytes) {
        self.set_data(now, data)
    }
}

// ======================================================================================
// NodeWatch
// ======================================================================================

/// What a [`NodeWatch`] reports. `Failed` and `Closed` are final.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum NodeWatchEvent {
    /// The node exists with this data (a version not reported before: a new write, or
    /// a new node). The latest one wins.
    Data {
        /// Its data.
        data: Bytes,
        /// Its Stat.
        stat: Stat,
    },
    /// The node does not exist.
    Missing {
        /// It existed since the previous event (or since the start) and was deleted:
        /// a node created and deleted before it could be read counts.
        gone: bool,
    },
    /// The connection dropped (or the session expired): what we know may be stale.
    Suspended,
    /// The session is back (the same or a renewed one); the node is read again.
    Reconnected,
    /// Ended: the node cannot be read (`NoAuth`, an invalid path) or the session was
    /// closed. Final.
    Failed(Error),
    /// Ended by [`close`](NodeWatch::close). Final.
    Closed,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Seen {
    Nothing,
    Missing,
    Version {
        czxid: i64,
        mzxid: i64,
        version: i32,
    },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum WatchOp {
    Sync,
    Read,
    Exists,
}

/// Follows one node's existence and data; see the [module docs](self).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct NodeWatch {
    path: String,
    running: bool,
    done: bool,
    live: bool,
    seen: Seen,
    /// The node existed since the last event (an `exists` found it, or it was created).
    existed: bool,
    need_read: bool,
    need_exists: bool,
    watch: Option<OpId>,
    suspended: bool,
    sync_next: bool,
    waiting: bool,
    kit: Kit<WatchOp, NodeWatchEvent>,
    /// The last data and Stat reported (`None`: missing, or not read yet).
    value: Option<(Bytes, Stat)>,
}

impl NodeWatch {
    /// Follows `path` once [`start`](Self::start)ed.
    pub fn new(path: &str) -> Self {
        NodeWatch {
            path: path.into(),
            running: false,
            done: false,
            live: false,
            seen: Seen::Nothing,
            existed: false,
            need_read: false,
            need_exists: false,
            watch: None,
            suspended: false,
            sync_next: false,
            waiting: false,
            kit: Kit::default(),
            value: None,
        }
    }

    /// The node's data and Stat as last reported (`None`: missing, or not read yet).
    pub fn value(&self) -> Option<(&Bytes, &Stat)> {
        self.value.as_ref().map(|(d, s)| (d, s))
    }

    /// Reads the node again now, after a `sync`: for a reader told by some other
    /// channel that the node changed (the paper's case for `sync`: without it the
    /// server we read from may not have applied that change yet). A newer version is
    /// reported as usual; the same version is not reported again.
    pub fn refresh(&mut self, now: Instant) {
        if self.running && !self.done {
            self.sync_next = true;
            self.need_read = true;
            self.drive(now);
        }
    }

    /// The path followed.
    pub fn path(&self) -> &str {
        &self.path
    }

    /// Has it ended?
    pub fn has_ended(&self) -> bool {
        self.done
    }

    /// Starts following (once).
    pub fn start(&mut self, now: Instant) {
        if self.running || self.done {
            return;
        }
        if let Err(error) = validate_path(&self.path) {
            return self.finish(NodeWatchEvent::Failed(Error::InvalidPath {
                path: self.path.clone(),
                error,
            }));
        }
        self.running = true;
        self.need_read = true;
        self.drive(now);
    }

    /// Stops following; [`NodeWatchEvent::Closed`].
    pub fn close(&mut self, _now: Instant) {
        if !self.done {
            self.finish(NodeWatchEvent::Closed);
        }
    }

    fn finish(&mut self, e: NodeWatchEvent) {
        self.done = true;
        self.running = false;
        self.kit.clear_requests();
        self.watch = None;
        self.kit.emit(e);
    }

    fn again(&mut self, now: Instant) {
        self.sync_next = true;
        self.kit.failed(now);
    }

    fn drive(&mut self, now: Instant) {
        if !self.running || !self.live {
            return;
        }
        if !self.kit.allows(now) {
            self.waiting = !self.kit.is_suspended();
            return;
        }
        self.waiting = false;
        if self
            .kit
            .any(|p| matches!(p, WatchOp::Read | WatchOp::Exists))
        {
            return;
        }
        let path = self.path.clone();
        if self.need_read {
            self.need_read = false;
            if self.sync_next {
                self.sync_next = false;
                self.kit.send(
                    WatchOp::Sync,
                    Request::Sync(PathRequest { path: path.clone() }),
                );
            }
            let watch = self.watch.is_none();
            let op = self
                .kit
                .send(WatchOp::Read, Request::GetData(PathWatch { path, watch }));
            if watch {
                self.watch = Some(op);
            }
        } else if self.need_exists {
            self.need_exists = false;
            if self.watch.is_none() {
                let op = self.kit.send(
                    WatchOp::Exists,
                    Request::Exists(PathWatch { path, watch: true }),
                );
                self.watch = Some(op);
            }
        }
    }

    fn on_read(&mut self, now: Instant, op: OpId, armed: bool, result: Result<Response, Error>) {
        if self.watch == Some(op) && !armed {
            self.watch = None;
        }
        match result {
            Ok(Response::Data { data, stat }) => {
                self.kit.succeeded();
                let v = Seen::Version {
                    czxid: stat.czxid,
                    mzxid: stat.mzxid,
                    version: stat.version,
                };
                self.existed = true;
                if self.seen != v {
                    self.seen = v;
                    self.value = Some((data.clone(), stat));
                    self.kit.emit(NodeWatchEvent::Data { data, stat });
                }
            }
            Ok(_) => self.finish(NodeWatchEvent::Failed(Error::UnexpectedReply)),
            Err(Error::Server(ErrorCode::NoNode)) => {
                self.kit.succeeded();
                let gone = self.existed || matches!(self.seen, Seen::Version { .. });
                if self.seen != Seen::Missing || gone {
                    self.value = None;
                    self.kit.emit(NodeWatchEvent::Missing { gone });
                }
                self.seen = Seen::Missing;
                self.existed = false;
                self.need_exists = true;
            }
            Err(e) if e.is_retryable() => {
                self.need_read = true;
                self.again(now);
            }
            Err(e) if e.ends_session() => {}
            Err(e) => self.finish(NodeWatchEvent::Failed(e)),
        }
    }

    fn on_exists(&mut self, now: Instant, op: OpId, armed: bool, result: Result<Response, Error>) {
        let watch_gone = self.watch == Some(op) && !armed;
        match result {
            Ok(_) => {
                // Created meanwhile (a data watch is set): read it.
                self.kit.succeeded();
                self.existed = true;
                self.need_read = true;
            }
            Err(Error::Server(ErrorCode::NoNode)) => self.kit.succeeded(), // armed
            Err(e) if e.is_retryable() => {
                if watch_gone {
                    self.watch = None;
                }
                self.need_exists = true;
                self.again(now);
            }
            Err(e) if e.ends_session() => {}
            Err(e) => self.finish(NodeWatchEvent::Failed(e)),
        }
    }
}

impl Protocol for NodeWatch {
    type Event = NodeWatchEvent;

    fn kit(&mut self) -> &mut dyn Plumbing<Self::Event> {
        &mut self.kit
    }

    fn on_reply(&mut self, now: Instant, op: OpId, result: Result<Response, Error>) {
        // A read behind a failed sync reads as lost (`Outbox::answer`): read again,
        // without asking for a second watch if the first was left.
        let Some((purpose, result, watch)) = self.kit.answer_armed(op, result) else {
            return;
        };
        let armed = watch == Some(true);
        if self.done {
            return;
        }
        match purpose {
            WatchOp::Sync => {}
            WatchOp::Read => self.on_read(now, op, armed, result),
            WatchOp::Exists => self.on_exists(now, op, armed, result),
        }
        self.drive(now);
    }

    fn on_watch(&mut self, now: Instant, op: OpId, event: &WatchEvent) {
        if self.watch != Some(op) || self.done {
            return;
        }
        self.watch = None;
        if event.event_type == EventType::NodeCreated {
            self.existed = true;
        }
        self.need_read = true;
        self.drive(now);
    }

    fn on_session(&mut self, now: Instant, change: SessionChange) {
        if self.done {
            return;
        }
        match change {
            SessionChange::Connected { .. } | SessionChange::Reconnected { .. } => {
                self.live = true;
                // A reconnect may land on a lagging follower.
                self.sync_next = self.running;
                if self.running {
                    self.need_read = true;
                    if core::mem::take(&mut self.suspended) {
                        self.kit.emit(NodeWatchEvent::Reconnected);
                    }
                }
            }
            SessionChange::Suspended => {
                if self.running && !self.suspended {
                    self.suspended = true;
                    self.kit.emit(NodeWatchEvent::Suspended);
                }
            }
            SessionChange::Expired => {
                self.kit.clear_requests();
                self.watch = None;
                self.live = false;
                self.waiting = false;
                if self.running && !self.suspended {
                    self.suspended = true;
                    self.kit.emit(NodeWatchEvent::Suspended);
                }
            }
            SessionChange::Closed => self.finish(NodeWatchEvent::Failed(Error::Closed)),
        }
        self.drive(now);
    }

    fn on_timeout(&mut self, now: Instant) {
        self.drive(now);
    }

    fn on_abandon(&mut self, now: Instant) {
        self.close(now);
    }

    fn deadline(&self) -> Option<Instant> {
        if self.waiting && self.running {
            self.kit.retry_at()
        } else {
            None
        }
    }

    fn finished(&self) -> bool {
        self.done && self.kit.no_events()
    }
}
