//! A node that lives while its owner keeps touching it (Curator's `PersistentTtlNode`
//! format, on ZooKeeper's TTL nodes): independent of one session, it survives the
//! owner's reconnects, session expiries and process restarts within its TTL, and
//! disappears once the owner stops touching it.
//!
//! # Node format (Curator `PersistentTtlNode`)
//!
//! * `<path>`: a **container** node holding the owner's data;
//! * `<path>/touch` (the child's name is [`TtlNodeConfig::child`]): an empty
//!   `PERSISTENT_WITH_TTL` node (`createTTL`, mode 5) with the TTL in ms.
//!
//! The server deletes the touch child once it was not modified for its TTL (and has no
//! children), then the container once it is empty — both by its container manager,
//! which runs every `znode.container.checkIntervalMs` (60 s by default): a node whose
//! owner stopped is gone between `ttl` and `ttl + checkInterval` after the last touch.
//! A Curator `PersistentTtlNode` and ours on one path keep the same node up together.
//!
//! # Protocol
//!
//! 1. **Create** — `createContainer(<path>, data)` and, pipelined behind it,
//!    `createTTL(<path>/touch, ttl)`: one round trip. Missing ancestors of `<path>` are
//!    created as containers first (bounded rounds; a parent that cannot be created
//!    ends with `Failed`). `NodeExists` on the container is not an error: our data is
//!    written into it (`setData`), as Curator's `PersistentNode` does. `NodeExists`
//!    on the touch child (a create whose reply was lost, or another owner's) leads
//!    to a touch at once, so its TTL counts from now.
//! 2. **Touch** — every `ttl / touch_factor` (Curator's schedule, factor 2):
//!    `setData(<path>/touch)`, which moves the child's `mtime`, the time its TTL counts
//!    from. `NoNode` (the node lapsed or was deleted) means the node is
//!    [`Gone`](TtlNodeEvent::Gone): it is created again (step 1).
//! 3. **Reconnect** — after the connection comes back (or a new session starts) the
//!    node is touched at once, not at the next tick: the time without a connection
//!    counts against the TTL.
//! 4. **Close** — [`close`](TtlNode::close) (and dropping the owner) stops touching and
//!    sends `delete(<path>)`, which the server refuses (`NotEmpty`) while the touch
//!    child is there: then the node lapses after its TTL, unless another owner keeps
//!    it (Curator's `close` deletes nothing). The delete removes only a container that
//!    never got its touch child (closed before the first touch landed), which the
//!    server's container manager would never reap (it reaps only containers that had
//!    a child) — Curator leaves that one behind.
//!
//! A server with TTL nodes off answers the `createTTL` with `Unimplemented`: the machine
//! ends with [`Error::TtlNodesDisabled`], which names the node and the server flag.
//!
//! # Events
//!
//! [`Present`](TtlNodeEvent::Present) is reported only from a touch the server applied
//! (the child's create or `setData` answered OK), the first time and again after each
//! [`Suspended`](TtlNodeEvent::Suspended) or [`Gone`](TtlNodeEvent::Gone): never from a
//! container create alone, never on a reconnect by itself. `Closed` and `Failed` are
//! final. The node does not depend on the session: an expiry is a `Suspended` until
//! the next session's first touch, not an end; only a closed session ends the machine.
//!
//! ```
//! use core::time::Duration;
//! use zk_recipes::recipe::ttl_node::{TtlNode, TtlNodeConfig, TtlNodeEvent};
//! use zk_recipes::recipe::{Machine, Recipe, SessionChange};
//! use zk_recipes::proto::{OpCode, Response, Stat};
//! use zk_recipes::time::Instant;
//!
//! let mut n = TtlNode::new(TtlNodeConfig::new("/svc/me", "data", Duration::from_secs(10)));
//! n.handle_session(Instant::ZERO, SessionChange::Connected { session_id: 7 });
//! n.start(Instant::ZERO);
//! let (_, container) = n.poll_request().unwrap();
//! assert_eq!(container.op_code(), OpCode::CreateContainer);
//! let (touch, create) = n.poll_request().unwrap();
//! assert_eq!(create.op_code(), OpCode::CreateTtl);
//! let created = |path: &str| Ok(Response::PathStat { path: path.into(), stat: Stat::default() });
//! n.handle_reply(Instant::ZERO, touch, created("/svc/me/touch"));
//! assert_eq!(n.poll_event(), Some(TtlNodeEvent::Present));
//! // The next touch is due at ttl / 2.
//! assert_eq!(n.poll_timeout(), Some(Instant::ZERO + Duration::from_secs(5)));
//! ```

use alloc::string::String;
use alloc::vec::Vec;
use bytes::Bytes;
use core::time::Duration;

use super::kit::{join, protocol_head, Kit, ParentStep, Protocol, Reply};
use super::{OpId, SessionChange};
use crate::error::Error;
use crate::proto::*;
use crate::time::Instant;

/// Curator's name of the touch child.
pub const DEFAULT_CHILD: &str = "touch";

/// Curator's touch schedule factor: the child is touched every `ttl / 2`.
pub const DEFAULT_TOUCH_FACTOR: u32 = 2;

/// The largest TTL ZooKeeper accepts, ms (`2^40 - 1`).
pub const MAX_TTL_MS: u64 = (1 << 40) - 1;

/// Where the node is, what it holds, and how long it lives untouched.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct TtlNodeConfig {
    /// The node (a container).
    pub path: String,
    /// Its data.
    pub data: Bytes,
    /// ACL of the node, its touch child and parents created for it.
    pub acl: Vec<Acl>,
    /// How long the node lives after the last touch (1 ms ..= 2^40 - 1 ms).
    pub ttl: Duration,
    /// The touch child's name (Curator: `touch`).
    pub child: String,
    /// The child is touched every `ttl / touch_factor` (Curator: 2; 0 counts as 1).
    pub touch_factor: u32,
}

impl TtlNodeConfig {
    /// A node at `path` with `data` living `ttl` after its last touch: open ACL,
    /// Curator's child name and touch schedule.
    pub fn new(path: &str, data: impl Into<Bytes>, ttl: Duration) -> Self {
        TtlNodeConfig {
            path: path.into(),
            data: data.into(),
            acl: Acl::open_unsafe(),
            ttl,
            child: DEFAULT_CHILD.into(),
            touch_factor: DEFAULT_TOUCH_FACTOR,
        }
    }

    /// The touch child's path.
    pub fn touch_path(&self) -> String {
        join(&self.path, &self.child)
    }

    /// Time between two touches.
    pub fn interval(&self) -> Duration {
        self.ttl / self.touch_factor.max(1)
    }

    fn ttl_ms(&self) -> Option<i64> {
        let ms = u64::try_from(self.ttl.as_millis()).ok()?;
        (1..=MAX_TTL_MS).contains(&ms).then_some(ms as i64)
    }
}

/// What a [`TtlNode`] reports. `Closed` and `Failed` are final; the others are edges.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum TtlNodeEvent {
    /// A touch the server applied: the node and its touch child exist, with the TTL
    /// counting from that touch. Reported first, and again after `Suspended` or `Gone`.
    Present,
    /// The connection dropped (or the session expired): no touch gets through; the node
    /// lapses if this lasts longer than its TTL.
    Suspended,
    /// A touch found the node gone (it lapsed, or was deleted): it is created again.
    Gone,
    /// [`close`](TtlNode::close)d: no more touches; the node lapses after its TTL.
    Closed,
    /// The machine ended: TTL nodes off ([`Error::TtlNodesDisabled`]), a bad TTL or
    /// path, no permission, a parent that cannot be created, the session closed.
    Failed {
        /// The cause.
        error: Error,
    },
}

impl TtlNodeEvent {
    /// `Some` when this event ends a wait for the node to be up: `Ok` present, `Err`
    /// the failure ([`Error::Finished`] when closed).
    pub fn outcome(&self) -> Option<Result<(), Error>> {
        match self {
            TtlNodeEvent::Present => Some(Ok(())),
            TtlNodeEvent::Failed { error } => Some(Err(error.clone())),
            TtlNodeEvent::Closed => Some(Err(Error::Finished)),
            TtlNodeEvent::Suspended | TtlNodeEvent::Gone => None,
        }
    }

    /// Is this event final?
    pub fn is_final(&self) -> bool {
        matches!(self, TtlNodeEvent::Closed | TtlNodeEvent::Failed { .. })
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum Purpose {
    Parent(String),
    /// `createContainer(<path>)`.
    Container,
    /// `setData(<path>)`: our data into a container that was there.
    Data,
    /// `createTTL(<path>/touch)`.
    Create,
    /// `setData(<path>/touch)`.
    Touch,
    /// `delete(<path>)` on close: refused (`NotEmpty`) while the touch child is there.
    Delete,
}

/// Where the machine stands: each phase with what exists only in it.
///
/// | phase | what it carries |
/// | --- | --- |
/// | `Idle` | nothing: not started |
/// | `Running` | the touch ([`Touch`]) and the last edge reported ([`Told`]) |
/// | `Closing` | the delete of an empty container ([`Leave`]) |
/// | `Done` | nothing: the final event is reported (or the owner went away) |
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum Phase {
    Idle,
    Running { touch: Touch, told: Told },
    Closing(Leave),
    Done,
}

/// The close's delete of the container, which the server refuses while the touch child
/// is there (the child lapses, then the server reaps the container); a container that
/// never got its child (closed before the first touch landed) is never reaped by the
/// server, so it is deleted here.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Leave {
    /// To send when the session allows.
    Send,
    /// In flight.
    Sent,
}

/// The touch cycle.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Touch {
    /// The node is up; the next touch is due at `at`.
    Due { at: Instant },
    /// A touch (`setData` of the child) to send when the session allows.
    Set,
    /// The node to create (container, then the TTL child) when the session allows;
    /// `parents`: its missing ancestors first.
    Create { parents: bool },
    /// A touch or a create is in flight, sent at `at`: an answer later than `at + ttl`
    /// does not say the node is still there (it may have lapsed since).
    Sent { at: Instant },
}

/// The last of the edges `Present` / `Suspended` / `Gone` reported.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Told {
    Nothing,
    Present,
    Suspended,
    Gone,
}

/// A TTL node kept alive by touching it; see the [module docs](self).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct TtlNode {
    config: TtlNodeConfig,
    phase: Phase,
    kit: Kit<Purpose, TtlNodeEvent>,
}

impl TtlNode {
    /// A machine for `config`, started by [`start`](Self::start).
    pub fn new(config: TtlNodeConfig) -> Self {
        TtlNode {
            config,
            phase: Phase::Idle,
            kit: Kit::default(),
        }
    }

    /// The configuration.
    pub fn config(&self) -> &TtlNodeConfig {
        &self.config
    }

    /// Has the machine ended (closed or failed)?
    pub fn has_ended(&self) -> bool {
        self.phase == Phase::Done
    }

    /// Was the node present at our last touch (and nothing since said otherwise)?
    pub fn is_present(&self) -> bool {
        matches!(
            self.phase,
            Phase::Running {
                told: Told::Present,
                ..
            }
        )
    }

    /// Starts keeping the node (once): creates it and touches it from then on.
    pub fn start(&mut self, now: Instant) {
        if self.phase != Phase::Idle {
            return;
        }
        let path = self.config.path.clone();
        if let Err(error) = validate_path(&self.config.touch_path()) {
            return self.finish(TtlNodeEvent::Failed {
                error: Error::InvalidPath { path, error },
            });
        }
        if self.config.ttl_ms().is_none() {
            return self.finish(TtlNodeEvent::Failed {
                error: Error::Node {
                    code: ErrorCode::BadArguments,
                    path,
                },
            });
        }
        self.phase = Phase::Running {
            touch: Touch::Create { parents: false },
            told: Told::Nothing,
        };
        self.drive(now);
    }

    /// Stops touching (the node lapses after its TTL unless another owner keeps it);
    /// deletes the container only if it has no child (one that never got its touch
    /// child would never be reaped); ends with [`TtlNodeEvent::Closed`].
    pub fn close(&mut self, now: Instant) {
        if matches!(self.phase, Phase::Running { .. }) {
            self.phase = Phase::Closing(Leave::Send);
            self.drive(now);
        }
    }

    fn finish(&mut self, event: TtlNodeEvent) {
        self.kit.end(&mut self.phase, Phase::Done, event);
    }

    /// The touch goes on as `next`.
    fn set_touch(&mut self, next: Touch) {
        if let Phase::Running { touch, .. } = &mut self.phase {
            *touch = next;
        }
    }

    /// Reports `edge` unless it was the last one reported.
    fn tell(&mut self, edge: Told, event: TtlNodeEvent) {
        if let Phase::Running { told, .. } = &mut self.phase {
            if *told != edge {
                *told = edge;
                self.kit.emit(event);
            }
        }
    }

    fn sending(&self) -> bool {
        matches!(
            self.phase,
            Phase::Running {
                touch: Touch::Set | Touch::Create { .. },
                ..
            } | Phase::Closing(Leave::Send)
        )
    }

    fn drive(&mut self, now: Instant) {
        if !self.sending() || !self.kit.allows(now) || !self.kit.is_quiet() {
            return;
        }
        let touch = match &mut self.phase {
            Phase::Running { touch, .. } => touch,
            Phase::Closing(leave) => {
                *leave = Leave::Sent;
                let path = self.config.path.clone();
                let req = Request::Delete(DeleteRequest { path, version: -1 });
                self.kit.send(Purpose::Delete, req);
                return;
            }
            Phase::Idle | Phase::Done => return,
        };
        let send = core::mem::replace(touch, Touch::Sent { at: now });
        let (acl, child) = (self.config.acl.clone(), self.config.touch_path());
        match send {
            Touch::Create { parents } => {
                let path = self.config.path.clone();
                if parents {
                    self.kit
                        .send_parents(&path, &acl, CreateMode::Container, Purpose::Parent);
                }
                let data = self.config.data.clone();
                let req = CreateRequest::new(path, data, acl.clone(), CreateMode::Container);
                self.kit
                    .send(Purpose::Container, Request::CreateContainer(req));
                let ttl = self.config.ttl_ms().unwrap_or(1);
                let req = CreateTtlRequest {
                    path: child,
                    data: Bytes::new(),
                    acl,
                    flags: CreateMode::PersistentWithTtl.to_i32(),
                    ttl,
                };
                self.kit.send(Purpose::Create, Request::CreateTtl(req));
            }
            _ => {
                let req = SetDataRequest {
                    path: child,
                    data: Bytes::new(),
                    version: -1,
                };
                self.kit.send(Purpose::Touch, Request::SetData(req));
            }
        }
    }

    /// A retryable failure (or a session that ended under the request: the next one
    /// carries on): the same step again after the backoff (a lost create is sent as a
    /// create again: `NodeExists` then leads to a touch). Once per round: the second
    /// reply of a pipelined pair finds the step already set.
    fn again(&mut self, now: Instant, step: Touch) {
        if let Phase::Running { touch, .. } = &mut self.phase {
            if let Touch::Sent { .. } = touch {
                *touch = step;
                self.kit.failed(now);
            }
        }
    }

    /// A touch the server applied: the node lives at least until `sent + ttl`. An
    /// answer that comes later than that (a slow or queued reply) proves nothing now:
    /// the node is touched again at once instead of reported present.
    fn touched(&mut self, now: Instant) {
        self.kit.succeeded();
        self.kit.reset_parents();
        let Phase::Running { touch, .. } = &mut self.phase else {
            return;
        };
        let Touch::Sent { at } = *touch else { return };
        if now.saturating_since(at) >= self.config.ttl {
            *touch = Touch::Set;
            return;
        }
        *touch = Touch::Due {
            at: now + self.config.interval(),
        };
        self.tell(Told::Present, TtlNodeEvent::Present);
    }

    fn on_container(&mut self, now: Instant, result: Reply) {
        if matches!(&result, Ok(_) | Err(Error::Server(ErrorCode::NodeExists))) {
            // Its parents exist: a later round of parent creates starts afresh.
            self.kit.reset_parents();
        }
        match result {
            Ok(_) => {}
            Err(Error::Server(ErrorCode::NodeExists)) => {
                // Someone's container (ours from before a restart, another owner's):
                // our data goes into it, as Curator's PersistentNode does.
                let req = SetDataRequest {
                    path: self.config.path.clone(),
                    data: self.config.data.clone(),
                    version: -1,
                };
                self.kit.send(Purpose::Data, Request::SetData(req));
            }
            Err(Error::Server(ErrorCode::NoNode)) => {
                let dir = super::kit::parent_of(&self.config.path);
                match self.kit.parents_missing(dir) {
                    ParentStep::Again => self.kit.failed(now),
                    ParentStep::Create => {}
                    ParentStep::Fail(error) => {
                        return self.finish(TtlNodeEvent::Failed { error });
                    }
                }
                self.set_touch(Touch::Create { parents: true });
            }
            Err(e) => self.create_failed(now, e),
        }
    }

    /// A create (of the container or the node) failed with `e`, none of the errors
    /// its caller reads: refused, lost or in a session that ended, it goes again;
    /// anything else ends the node.
    fn create_failed(&mut self, now: Instant, e: Error) {
        if e.is_retryable() || e.ends_session() {
            self.again(now, Touch::Create { parents: false })
        } else {
            self.finish(TtlNodeEvent::Failed { error: e })
        }
    }

    fn on_create(&mut self, now: Instant, result: Reply) {
        match result {
            Ok(_) => self.touched(now),
            // There already (our create whose reply was lost, another owner's): touch
            // it now so that its TTL counts from now.
            Err(Error::Server(ErrorCode::NodeExists)) => self.set_touch(Touch::Set),
            // The container's answer decided (parents to create), or the container
            // went between the two creates: create again.
            Err(Error::Server(ErrorCode::NoNode)) => {
                self.again(now, Touch::Create { parents: false })
            }
            Err(Error::Server(ErrorCode::Unimplemented)) => self.finish(TtlNodeEvent::Failed {
                error: Error::TtlNodesDisabled {
                    path: self.config.touch_path(),
                },
            }),
            Err(e) => self.create_failed(now, e),
        }
    }

    fn on_touch(&mut self, now: Instant, result: Reply) {
        match result {
            Ok(_) => self.touched(now),
            Err(Error::Server(ErrorCode::NoNode)) => {
                self.tell(Told::Gone, TtlNodeEvent::Gone);
                self.set_touch(Touch::Create { parents: false });
            }
            Err(e) if e.is_retryable() || e.ends_session() => self.again(now, Touch::Set),
            Err(error) => self.finish(TtlNodeEvent::Failed { error }),
        }
    }
}

impl TtlNode {
    fn on_delete(&mut self, now: Instant, result: Reply) {
        match result {
            Err(e) if e.is_retryable() || e.ends_session() => {
                self.phase = Phase::Closing(Leave::Send);
                self.kit.failed(now);
            }
            // Deleted, already gone, or the touch child is there (it lapses, then the
            // server reaps the container); a refusal (no permission) leaves the node to
            // its TTL and the server too.
            _ => self.finish(TtlNodeEvent::Closed),
        }
    }
}

impl TtlNode {
    /// The answer to request `op`, sent for `purpose` (`on_reply`: `protocol_head!`).
    fn on_answer(&mut self, now: Instant, _op: OpId, purpose: Purpose, result: Reply) {
        match (&self.phase, purpose) {
            (Phase::Running { .. }, Purpose::Parent(p)) => {
                if result.is_ok() {
                    // Created now: a later `NoNode` for our node means the server reaped
                    // it again (an emptied container), not that it cannot be created —
                    // the rounds count from here.
                    self.kit.reset_parents();
                }
                self.kit.parent_answered(&p, &result)
            }
            (Phase::Running { .. }, Purpose::Container) => self.on_container(now, result),
            // Our data refused (no permission on someone's container): the node is kept
            // all the same, as Curator does.
            (Phase::Running { .. }, Purpose::Data) => {}
            (Phase::Running { .. }, Purpose::Create) => self.on_create(now, result),
            (Phase::Running { .. }, Purpose::Touch) => self.on_touch(now, result),
            (Phase::Closing(_), Purpose::Delete) => self.on_delete(now, result),
            // A touch answered after the close, or anything after the end: nothing to do.
            _ => {}
        }
        self.drive(now);
    }
}

impl Protocol for TtlNode {
    protocol_head!(TtlNodeEvent, answer);

    fn on_session(&mut self, now: Instant, change: SessionChange) {
        match change {
            SessionChange::Closed => {
                self.kit.clear_requests();
                match self.phase {
                    Phase::Idle => self.phase = Phase::Done,
                    _ => self.finish(TtlNodeEvent::Failed {
                        error: Error::Closed,
                    }),
                }
                return;
            }
            SessionChange::Suspended => self.tell(Told::Suspended, TtlNodeEvent::Suspended),
            SessionChange::Expired => {
                // The session's requests are over (answered or not): the node does not
                // depend on it; the next session creates or touches it again (or sends
                // the close's delete).
                self.kit.clear_requests();
                self.set_touch(Touch::Create { parents: false });
                if let Phase::Closing(leave) = &mut self.phase {
                    *leave = Leave::Send;
                }
                self.tell(Told::Suspended, TtlNodeEvent::Suspended);
            }
            SessionChange::Connected { .. } | SessionChange::Reconnected { .. } => {
                // The time without a connection counts against the TTL: touch now.
                if let Phase::Running { touch, .. } = &mut self.phase {
                    if let Touch::Due { .. } = touch {
                        *touch = Touch::Set;
                    }
                }
            }
        }
        self.drive(now);
    }

    fn on_timeout(&mut self, now: Instant) {
        if let Phase::Running { touch, .. } = &mut self.phase {
            if matches!(touch, Touch::Due { at } if *at <= now) {
                *touch = Touch::Set;
            }
        }
        self.drive(now);
    }

    fn on_abandon(&mut self, now: Instant) {
        // The owner went away: no more touches; the node lapses after its TTL (an empty
        // container is deleted, as on close).
        match self.phase {
            Phase::Running { .. } => self.close(now),
            Phase::Closing(_) => {}
            Phase::Idle | Phase::Done => self.phase = Phase::Done,
        }
        self.kit.clear_events();
    }

    fn deadline(&self) -> Option<Instant> {
        match &self.phase {
            Phase::Running {
                touch: Touch::Due { at },
                ..
            } => Some(*at),
            // Something in flight: its answer drives the machine, not the clock.
            Phase::Running { .. } | Phase::Closing(_) if !self.kit.is_quiet() => None,
            Phase::Running { .. } | Phase::Closing(_) => self.kit.timeout(None, self.sending()),
            Phase::Idle | Phase::Done => None,
        }
    }

    fn finished(&self) -> bool {
        self.phase == Phase::Done && self.kit.is_idle()
    }

    fn check(&self) {
        match &self.phase {
            Phase::Idle => debug_assert!(self.kit.is_quiet(), "a request before the start"),
            Phase::Running { touch, told } => {
                // A touch marked in flight has its request in the outbox.
                debug_assert!(
                    !matches!(touch, Touch::Sent { .. })
                        || self
                            .kit
                            .any(|p| matches!(p, Purpose::Create | Purpose::Touch)),
                    "a touch in flight with no request"
                );
                // The node is up between touches only after a touch was applied.
                debug_assert!(
                    !matches!(touch, Touch::Due { .. }) || *told != Told::Nothing,
                    "a touch scheduled before the node was ever present"
                );
            }
            Phase::Closing(leave) => debug_assert!(
                *leave == Leave::Send || self.kit.any(|p| *p == Purpose::Delete),
                "a close's delete in flight with no request"
            ),
            Phase::Done => {}
        }
    }
}
