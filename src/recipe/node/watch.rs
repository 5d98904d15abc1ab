//! [`NodeWatch`]: follow one node's existence and data (see the [module docs](super)).

use alloc::string::String;
use bytes::Bytes;

use super::phase::{Link, Run, Seen};
use crate::error::Error;
use crate::proto::*;
use crate::recipe::kit::{protocol_head, timeout_drives, valid_path, Kit, Protocol, Reply};
use crate::recipe::{OpId, SessionChange};
use crate::session::WatchEvent;
use crate::time::Instant;

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
enum WatchOp {
    Sync,
    Read,
    Exists,
}

/// Follows one node's existence and data; see the [module docs](super).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct NodeWatch {
    path: String,
    run: Run,
    link: Link,
    /// What we reported of the node (and whether it existed since).
    seen: Seen,
    need_read: bool,
    need_exists: bool,
    watch: Option<OpId>,
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
            run: Run::Idle,
            link: Link::Down,
            seen: Seen::Nothing,
            need_read: false,
            need_exists: false,
            watch: None,
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
        if self.run == Run::Running {
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
        self.run == Run::Done
    }

    /// Starts following (once).
    pub fn start(&mut self, now: Instant) {
        if self.run != Run::Idle {
            return;
        }
        if let Err(e) = valid_path(&self.path) {
            return self.finish(NodeWatchEvent::Failed(e));
        }
        self.run = Run::Running;
        self.need_read = true;
        self.drive(now);
    }

    /// Stops following; [`NodeWatchEvent::Closed`].
    pub fn close(&mut self, _now: Instant) {
        if self.run != Run::Done {
            self.finish(NodeWatchEvent::Closed);
        }
    }

    fn finish(&mut self, e: NodeWatchEvent) {
        self.run = Run::Done;
        self.kit.clear_requests();
        self.watch = None;
        self.kit.emit(e);
    }

    /// The node exists (an `exists` found it, or it was created): a `NoNode` read next
    /// means it came and went.
    fn appeared(&mut self) {
        if matches!(self.seen, Seen::Nothing | Seen::Missing) {
            self.seen = Seen::Appeared;
        }
    }

    fn again(&mut self, now: Instant) {
        self.sync_next = true;
        self.kit.failed(now);
    }

    fn drive(&mut self, now: Instant) {
        if self.run != Run::Running || !self.link.live() {
            return;
        }
        if !self.kit.gate(now, &mut self.waiting) {
            return;
        }
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

    fn on_read(&mut self, now: Instant, op: OpId, armed: bool, result: Reply) {
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
                if self.seen != v {
                    self.seen = v;
                    self.value = Some((data.clone(), stat));
                    self.kit.emit(NodeWatchEvent::Data { data, stat });
                }
            }
            Ok(_) => self.finish(NodeWatchEvent::Failed(Error::UnexpectedReply)),
            Err(Error::Server(ErrorCode::NoNode)) => {
                self.kit.succeeded();
                let gone = matches!(self.seen, Seen::Appeared | Seen::Version { .. });
                if self.seen != Seen::Missing || gone {
                    self.value = None;
                    self.kit.emit(NodeWatchEvent::Missing { gone });
                }
                self.seen = Seen::Missing;
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

    fn on_exists(&mut self, now: Instant, op: OpId, armed: bool, result: Reply) {
        let watch_gone = self.watch == Some(op) && !armed;
        match result {
            Ok(_) => {
                // Created meanwhile (a data watch is set): read it.
                self.kit.succeeded();
                self.appeared();
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

impl NodeWatch {
    /// The answer to request `op`, sent for `purpose` (`on_reply`: `protocol_head!`).
    fn on_answer(&mut self, now: Instant, op: OpId, purpose: WatchOp, result: Reply, armed: bool) {
        // A read behind a failed sync reads as lost (`Outbox::answer`): read again,
        // without asking for a second watch if the first was left.
        if self.run == Run::Done {
            return;
        }
        match purpose {
            WatchOp::Sync => {}
            WatchOp::Read => self.on_read(now, op, armed, result),
            WatchOp::Exists => self.on_exists(now, op, armed, result),
        }
        self.drive(now);
    }
}

impl Protocol for NodeWatch {
    protocol_head!(NodeWatchEvent, armed);

    fn on_watch(&mut self, now: Instant, op: OpId, event: &WatchEvent) {
        if self.watch != Some(op) || self.run == Run::Done {
            return;
        }
        self.watch = None;
        if event.event_type == EventType::NodeCreated {
            self.appeared();
        }
        self.need_read = true;
        self.drive(now);
    }

    fn on_session(&mut self, now: Instant, change: SessionChange) {
        if self.run == Run::Done {
            return;
        }
        match change {
            SessionChange::Connected { .. } | SessionChange::Reconnected { .. } => {
                let running = self.run == Run::Running;
                // A reconnect may land on a lagging follower.
                self.sync_next = running;
                if running {
                    self.need_read = true;
                    if self.link.suspended() {
                        self.kit.emit(NodeWatchEvent::Reconnected);
                    }
                }
                self.link = Link::Up;
            }
            SessionChange::Suspended => {
                if self.run == Run::Running && !self.link.suspended() {
                    self.link = if self.link.live() {
                        Link::Suspended
                    } else {
                        Link::Gone
                    };
                    self.kit.emit(NodeWatchEvent::Suspended);
                }
            }
            SessionChange::Expired => {
                self.kit.clear_requests();
                self.watch = None;
                self.waiting = false;
                if self.run == Run::Running {
                    if !self.link.suspended() {
                        self.kit.emit(NodeWatchEvent::Suspended);
                    }
                    self.link = Link::Gone;
                } else {
                    self.link = Link::Down;
                }
            }
            SessionChange::Closed => self.finish(NodeWatchEvent::Failed(Error::Closed)),
        }
        self.drive(now);
    }

    timeout_drives!(abandon => close);

    fn deadline(&self) -> Option<Instant> {
        self.kit
            .timeout(None, self.waiting && self.run == Run::Running)
    }

    fn finished(&self) -> bool {
        self.run == Run::Done && self.kit.no_events()
    }

    fn check(&self) {
        if self.run != Run::Running {
            debug_assert!(
                self.kit.in_flight() == 0 && self.watch.is_none(),
                "a node watch sends nothing unless it runs"
            );
        }
        if self.run == Run::Idle {
            debug_assert!(!self.link.suspended(), "nothing reported before start");
        }
        if !self.link.live() {
            debug_assert!(self.kit.in_flight() == 0, "no request without a session");
        }
        match (&self.seen, &self.value) {
            (Seen::Version { mzxid, .. }, Some((_, stat))) => {
                debug_assert_eq!(*mzxid, stat.mzxid, "the value is the version reported")
            }
            (Seen::Version { .. }, None) => debug_assert!(false, "a version without its value"),
            (_, Some(_)) => debug_assert!(false, "a value without its version"),
            (_, None) => {}
        }
    }
}
