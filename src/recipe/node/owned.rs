//! [`OwnedNode`]: keep one node of ours in place (see the [module docs](super)).

use alloc::string::String;
use alloc::vec::Vec;
use bytes::Bytes;

use super::phase::{Known, Presence};
use crate::error::Error;
use crate::proto::*;
use crate::recipe::kit::{parent_of, protocol_head, valid_path, Kit, ParentStep, Protocol, Reply};
use crate::recipe::lock::LostReason;
use crate::recipe::watcher::{link_protocol, Link};
use crate::recipe::{OpId, Recipe, SessionChange};
use crate::session::WatchEvent;
use crate::time::Instant;

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

/// Where an [`OwnedNode`] is in its life.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum Phase {
    /// Before `create`.
    Idle,
    /// Keeping the node in place.
    Active {
        /// A `set_data` waits for `DataSet`.
        set_pending: bool,
    },
    /// Deleting our node (if it is or may be ours), then `finish` and the end.
    Leaving {
        /// The final event, once our node is gone.
        finish: OwnedNodeEvent,
    },
    /// Ended (final event queued).
    Done,
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

/// Keeps one node of ours in place; see the [module docs](super).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct OwnedNode {
    config: OwnedNodeConfig,
    phase: Phase,
    /// The session (`Down` before the first `Connected` and after an expiry; its id is
    /// the kit's), and whether something waits for the backoff to end.
    link: Link,
    known: Known,
    stat: Stat,
    /// The data last seen in our node.
    server_data: Option<Bytes>,
    /// What we reported of our node.
    presence: Presence,
    blocked_by: Option<i64>,
    /// The op whose watch on our path is registered.
    watch: Option<OpId>,
    /// Data the server refused to write (not retried until it changes).
    refused: Option<Bytes>,
    /// Create the missing ancestors before the next create.
    parents: bool,
    sync_next: bool,
    kit: Kit<NodeOp, OwnedNodeEvent>,
}

impl OwnedNode {
    /// A node that does nothing until [`create`](Self::create).
    pub fn new(config: OwnedNodeConfig) -> Self {
        OwnedNode {
            config,
            phase: Phase::Idle,
            link: Link::Down,
            known: Known::Absent,
            stat: Stat::default(),
            server_data: None,
            presence: Presence::Unseen,
            blocked_by: None,
            watch: None,
            refused: None,
            parents: false,
            sync_next: false,
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
        self.presence == Presence::Present
    }

    /// Our node's last known Stat, while it is in place.
    pub fn stat(&self) -> Option<&Stat> {
        self.presence.held().then_some(&self.stat)
    }

    /// Has it ended (final event queued)?
    pub fn has_ended(&self) -> bool {
        self.phase == Phase::Done
    }

    // ----- commands -----

    /// Creates the node and keeps it in place (once; later calls do nothing).
    pub fn create(&mut self, now: Instant) {
        if !matches!(self.phase, Phase::Idle) {
            return;
        }
        if let Err(e) = self.check_config() {
            self.phase = Phase::Done;
            self.emit(OwnedNodeEvent::Failed { error: e });
            return;
        }
        self.phase = Phase::Active { set_pending: false };
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
        if let Phase::Active { set_pending } = &mut self.phase {
            *set_pending = true;
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
        valid_path(&self.config.path)?;
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
            Phase::Active { .. } => {
                self.phase = Phase::Leaving { finish };
                if !self.link.is_up() && self.ephemeral() {
                    self.end(); // no session: nothing of ours exists
                }
            }
            Phase::Leaving { .. } | Phase::Done => {}
        }
    }

    /// Ends now, with the final event a `Leaving` phase carries (if any).
    fn end(&mut self) {
        let finish = match core::mem::replace(&mut self.phase, Phase::Done) {
            Phase::Leaving { finish } => Some(finish),
            _ => None,
        };
        self.kit.clear_requests();
        self.watch = None;
        if self.presence.held() {
            self.presence = Presence::Lost;
        }
        if let Some(f) = finish {
            self.emit(f);
        }
    }

    /// Ends now with `finish` (in place of any a `Leaving` phase carries).
    fn end_with(&mut self, finish: OwnedNodeEvent) {
        self.phase = Phase::Leaving { finish };
        self.end();
    }

    fn fail(&mut self, error: Error) {
        match self.known {
            Known::Ours | Known::Creating | Known::Unknown if self.is_active() => {
                self.stop(OwnedNodeEvent::Failed { error }) // delete what we made first
            }
            _ => self.end_with(OwnedNodeEvent::Failed { error }),
        }
    }

    fn is_active(&self) -> bool {
        matches!(self.phase, Phase::Active { .. })
    }

    /// A `set_data` waits for `DataSet`.
    fn set_pending(&self) -> bool {
        matches!(self.phase, Phase::Active { set_pending: true })
    }

    /// The pending `set_data` is done (or refused).
    fn settle_set(&mut self) {
        if let Phase::Active { set_pending } = &mut self.phase {
            *set_pending = false;
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
            self.link.is_up()
                && stat.ephemeral_owner == self.kit.session_id()
                && stat.ephemeral_owner != 0
        } else {
            stat.ephemeral_owner == 0
        }
    }

    /// Sends what is needed if the session allows it now.
    fn drive(&mut self, now: Instant) {
        let active = match self.phase {
            Phase::Active { .. } => true,
            Phase::Leaving { .. } => false,
            Phase::Idle | Phase::Done => return,
        };
        if !self.link.gate(&self.kit, now) {
            return;
        }
        if self
            .kit
            .any(|p| matches!(p, NodeOp::Create(_) | NodeOp::Read | NodeOp::Delete))
        {
            return; // an answer on its way decides
        }
        match (active, self.known) {
            (_, Known::Unknown) => self.read(),
            (true, Known::Absent) => self.send_create(),
            (true, Known::Ours) => {
                self.keep_data();
                if self.watch.is_none() {
                    self.read();
                }
            }
            (true, Known::Other(_)) if self.watch.is_none() => self.read(),
            (false, Known::Ours) => {
                let path = self.path();
                self.kit.send(
                    NodeOp::Delete,
                    Request::Delete(DeleteRequest { path, version: -1 }),
                );
            }
            (false, Known::Absent | Known::Other(_)) => self.end(),
            _ => {}
        }
    }

    /// Writes our data into our node if it holds other data (and is to be set back).
    fn keep_data(&mut self) {
        let data = self.config.data.clone();
        if (self.config.restore_data || self.set_pending())
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
        let watch = self.watch.is_none() && self.is_active();
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
        match core::mem::replace(&mut self.presence, Presence::Present) {
            Presence::Unseen | Presence::Lost => self.emit(OwnedNodeEvent::Created { stat }),
            Presence::Suspended => self.emit(OwnedNodeEvent::Reconnected),
            Presence::Present => {}
        }
    }

    /// A pending `set_data` is done if the node holds its data.
    fn data_confirmed(&mut self, stat: Stat) {
        if self.set_pending() && self.server_data.as_ref() == Some(&self.config.data) {
            self.settle_set();
            self.emit(OwnedNodeEvent::DataSet { stat });
        }
    }

    /// Our node is gone while the session lives.
    fn gone(&mut self, now: Instant) {
        self.known = Known::Absent;
        self.server_data = None;
        if self.presence.held() {
            self.presence = Presence::Lost;
            if self.is_active() {
                self.emit(OwnedNodeEvent::Lost {
                    reason: LostReason::NodeDeleted,
                });
            }
        }
        if self.is_active() && self.presence != Presence::Unseen && !self.config.recreate {
            self.fail(Error::Server(ErrorCode::NoNode));
        }
        let _ = now;
    }

    fn on_create(&mut self, now: Instant, sent: Bytes, result: Reply) {
        if self.known == Known::Creating {
            self.known = Known::Unknown; // the paired read decides, unless we learn more
        }
        match result {
            Ok(Response::PathStat { stat, .. }) => {
                self.kit.succeeded();
                self.server_data = Some(sent);
                self.kit.reset_parents();
                if self.is_active() {
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
                if matches!(self.phase, Phase::Leaving { .. }) {
                    self.known = Known::Absent;
                }
                self.fail(e)
            }
        }
    }

    fn on_read(&mut self, now: Instant, op: OpId, armed: bool, result: Reply) {
        if self.watch == Some(op) && !armed {
            self.watch = None;
        }
        match result {
            Ok(Response::Data { data, stat }) => {
                if self.owned_by_us(&stat) {
                    self.kit.succeeded();
                    self.server_data = Some(data);
                    if self.is_active() {
                        self.became_ours(stat);
                        self.data_confirmed(stat);
                    } else {
                        self.known = Known::Ours;
                    }
                } else {
                    if self.presence.held() {
                        // Replaced by another session's node.
                        self.gone(now);
                    }
                    self.known = Known::Other(stat.ephemeral_owner);
                    if self.is_active() && self.blocked_by != Some(stat.ephemeral_owner) {
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

    fn on_set(&mut self, now: Instant, sent: Bytes, result: Reply) {
        match result {
            Ok(Response::Stat(stat)) => {
                self.kit.succeeded();
                if self.known == Known::Ours {
                    self.stat = stat;
                    self.server_data = Some(sent.clone());
                }
                if self.set_pending() && sent == self.config.data {
                    self.settle_set();
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
                self.settle_set();
                self.emit(OwnedNodeEvent::DataRefused { error });
            }
        }
    }

    fn on_delete(&mut self, now: Instant, result: Reply) {
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
            // Refused for good: the node stays (until the session ends, if ephemeral).
            Err(error) => self.end_with(OwnedNodeEvent::Failed { error }),
        }
    }

    fn session_gone(&mut self, reason: LostReason) {
        self.kit.clear_requests();
        self.watch = None;
        self.link.down();
        let ephemeral = self.ephemeral();
        if ephemeral {
            self.known = Known::Absent;
            self.server_data = None;
            self.blocked_by = None;
            if self.presence.held() {
                self.presence = Presence::Lost;
                self.emit(OwnedNodeEvent::Lost { reason });
            }
        } else {
            self.known = Known::Unknown;
            if self.presence == Presence::Present {
                self.presence = Presence::Suspended;
                self.emit(OwnedNodeEvent::Suspended);
            }
        }
        let closed = reason == LostReason::SessionClosed;
        match self.phase {
            Phase::Leaving { .. } if ephemeral || closed => self.end(),
            Phase::Active { .. } if closed || (ephemeral && !self.config.recreate) => self
                .end_with(OwnedNodeEvent::Failed {
                    error: reason.error(),
                }),
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

impl OwnedNode {
    /// The answer to request `op`, sent for `purpose` (`on_reply`: `protocol_head!`).
    fn on_answer(&mut self, now: Instant, op: OpId, purpose: NodeOp, result: Reply, armed: bool) {
        // A read behind a failed sync reads as lost (`Outbox::answer`): read again,
        // without asking for a second watch if the first was left.
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
}

impl Protocol for OwnedNode {
    protocol_head!(OwnedNodeEvent, armed);

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
            SessionChange::Connected { .. } => self.link.up(),
            SessionChange::Suspended => {
                if self.presence == Presence::Present && self.is_active() {
                    self.presence = Presence::Suspended;
                    self.emit(OwnedNodeEvent::Suspended);
                }
            }
            SessionChange::Reconnected { .. } => {
                self.link.up();
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

    link_protocol!(phase == Phase::Done, abandon => delete);

    fn check(&self) {
        match self.phase {
            Phase::Idle => debug_assert!(
                self.presence == Presence::Unseen && self.kit.in_flight() == 0,
                "nothing happens before create"
            ),
            Phase::Done => debug_assert!(
                self.kit.in_flight() == 0 && self.watch.is_none() && !self.presence.held(),
                "an ended node machine holds nothing"
            ),
            Phase::Active { .. } | Phase::Leaving { .. } => {}
        }
        if self.presence.held() {
            debug_assert!(
                matches!(self.known, Known::Ours | Known::Unknown),
                "a node reported in place is ours or being verified: {:?}",
                self.known
            );
            debug_assert!(self.blocked_by.is_none(), "not blocked while ours");
        }
        if !self.link.is_up() {
            debug_assert!(
                self.presence != Presence::Present,
                "in place without a session"
            );
        }
    }
}

/// The commands of a machine that keeps one node in place ([`OwnedNode`], and
/// [`GroupMember`](crate::recipe::group::GroupMember) built on it), so hosts can wrap both the
/// same way.
pub trait NodeCommands: Recipe<Event = OwnedNodeEvent> {
    /// Creates the node and keeps it ([`OwnedNode::create`]).
    fn create_node(&mut self, now: Instant);
    /// Deletes it if it is ours and ends ([`OwnedNode::delete`]).
    fn delete_node(&mut self, now: Instant);
    /// Keeps new data in it ([`OwnedNode::set_data`]).
    fn set_node_data(&mut self, now: Instant, data: Bytes);
}

/// `impl NodeCommands for $machine` by its methods of the three commands (the last
/// may be a field's: `node.set_data`).
macro_rules! node_commands {
    ($machine:ty: $create:ident, $delete:ident, $($set:ident).+) => {
        impl $crate::recipe::node::owned::NodeCommands for $machine {
            fn create_node(&mut self, now: $crate::time::Instant) {
                self.$create(now)
            }
            fn delete_node(&mut self, now: $crate::time::Instant) {
                self.$delete(now)
            }
            fn set_node_data(&mut self, now: $crate::time::Instant, data: bytes::Bytes) {
                self.$($set).+(now, data)
            }
        }
    };
}
pub(crate) use node_commands;

node_commands!(OwnedNode: create, delete, set_data);
