//! Rendezvous (ZooKeeper paper: "rendezvous"): a coordinator creates the rendezvous
//! node `z_r` and hands its path to a master and its workers; the master, once
//! started, writes its address into `z_r`; workers read `z_r` and wait for the
//! address; when `z_r` goes (its ephemeral creator left), master and workers are told,
//! so they can clean up and exit.
//!
//! # Roles
//!
//! 1. **Coordinator**: an [`OwnedNode`] from [`coordinator_config`]: creates `z_r`
//!    (ephemeral by default; missing parents as containers), never re-creates it (its
//!    going is the signal), never overwrites what the master writes, deletes it on
//!    `delete`.
//! 2. **[`Master`]**: `setData(z_r, address)`. `z_r` not created yet (`NoNode`): it
//!    waits for its creation (an `exists` watch) and writes then:
//!    [`Published`](RendezvousEvent::Published). [`publish`](Master::publish) writes a
//!    new address.
//! 3. **[`Worker`]**: follows `z_r` ([`NodeWatch`]). Not created yet, or created but
//!    still empty: it waits (for the creation, then the data-change notification).
//!    Each new non-empty version is an [`Address`](RendezvousEvent::Address): a
//!    master that writes again is followed, the latest address last.
//! 4. **The simpler form**: a publisher creates `z_r` itself with its address as data —
//!    an [`OwnedNode`] from [`publisher_config`]; workers are the same.
//!
//! `z_r` deleted after it existed — even if it was created and deleted before we
//! could read it — ends master and workers with [`Gone`](RendezvousEvent::Gone).
//!
//! # Session semantics
//!
//! `Suspended` on connection loss; `Reconnected` when a session is back, after which
//! `z_r` is read again (after `sync`), so no version and no deletion is missed. Both
//! carry on across a session expiry when the client renews the session. A master's
//! write whose reply was lost is written again (it is idempotent).
//!
//! ```
//! use zk_recipes::recipe::rendezvous::{RendezvousEvent, Worker};
//! use zk_recipes::recipe::{Machine, Recipe, SessionChange};
//! use zk_recipes::time::Instant;
//!
//! let mut w = Worker::new("/jobs/42/rendezvous");
//! w.handle_session(Instant::ZERO, SessionChange::Connected { session_id: 7 });
//! w.start(Instant::ZERO);
//! let (_, read) = w.poll_request().unwrap(); // getData(z_r, watch)
//! assert_eq!(read.op_code(), zk_recipes::proto::OpCode::GetData);
//! assert_eq!(w.address(), None);
//! ```

use bytes::Bytes;

use super::kit::{Events, Kit, Reply};
#[cfg(doc)]
use super::node::OwnedNode;
use super::node::{NodeWatch, NodeWatchEvent, OwnedNodeConfig};
use super::watcher::Link;
use super::{Machine, OpId, Recipe, SessionChange};
use crate::error::Error;
use crate::proto::*;
use crate::session::WatchEvent;
use crate::time::Instant;

/// The coordinator's `z_r`: ephemeral, empty, not re-created, the master's data left
/// alone. Host it as an [`OwnedNode`]; set `mode` to `Persistent` for a `z_r` that
/// outlives the coordinator's session.
pub fn coordinator_config(path: &str) -> OwnedNodeConfig {
    let mut c = OwnedNodeConfig::new(path, Bytes::new());
    c.recreate = false;
    c.restore_data = false;
    c
}

/// A publisher that creates `z_r` itself with `address` as its data: ephemeral, not
/// re-created. Host it as an [`OwnedNode`]; `set_data` publishes a new address.
pub fn publisher_config(path: &str, address: impl Into<Bytes>) -> OwnedNodeConfig {
    let mut c = OwnedNodeConfig::new(path, address);
    c.recreate = false;
    c
}

/// What a [`Master`] or [`Worker`] reports. `Gone`, `Failed` and `Closed` are final.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum RendezvousEvent {
    /// Master: our address is in `z_r`.
    Published {
        /// `z_r`'s Stat after the write.
        stat: Stat,
    },
    /// Worker: the (new) address in `z_r`; the latest one wins.
    Address {
        /// The address.
        data: Bytes,
        /// `z_r`'s Stat.
        stat: Stat,
    },
    /// `z_r` was deleted: the rendezvous is over. Final.
    Gone,
    /// The connection dropped (or the session expired).
    Suspended,
    /// A session is back; `z_r` is read again.
    Reconnected,
    /// Ended: `z_r` cannot be read or written (`NoAuth`, ...), or the session was
    /// closed. Final.
    Failed(Error),
    /// Ended by `close`. Final.
    Closed,
}

impl RendezvousEvent {
    /// Does this event end the role?
    pub fn is_final(&self) -> bool {
        matches!(
            self,
            RendezvousEvent::Gone | RendezvousEvent::Failed(_) | RendezvousEvent::Closed
        )
    }

    fn from_watch(e: NodeWatchEvent) -> Option<Self> {
        match e {
            NodeWatchEvent::Suspended => Some(RendezvousEvent::Suspended),
            NodeWatchEvent::Reconnected => Some(RendezvousEvent::Reconnected),
            NodeWatchEvent::Failed(e) => Some(RendezvousEvent::Failed(e)),
            NodeWatchEvent::Closed => Some(RendezvousEvent::Closed),
            _ => None,
        }
    }
}

// ======================================================================================
// Worker
// ======================================================================================

/// A worker: waits for the master's address in `z_r`; see the [module docs](self).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Worker {
    watch: NodeWatch,
    seen: bool,
    address: Option<(Bytes, Stat)>,
    ended: bool,
    events: Events<RendezvousEvent>,
}

impl Worker {
    /// A worker of rendezvous `path` (`z_r`), idle until [`start`](Self::start).
    pub fn new(path: &str) -> Self {
        Worker {
            watch: NodeWatch::new(path),
            seen: false,
            address: None,
            ended: false,
            events: Events::default(),
        }
    }

    /// The latest address reported.
    pub fn address(&self) -> Option<&Bytes> {
        self.address.as_ref().map(|(d, _)| d)
    }

    crate::recipe::kit::part_calls!(
        watch, pump;
        /// Starts waiting (once).
        start,
        /// Stops; [`RendezvousEvent::Closed`].
        close,
    );

    fn pump(&mut self) {
        while let Some(e) = self.watch.poll_event() {
            if self.ended {
                continue;
            }
            match e {
                NodeWatchEvent::Data { data, stat } => {
                    self.seen = true;
                    if !data.is_empty() {
                        self.address = Some((data.clone(), stat));
                        self.events.emit(RendezvousEvent::Address { data, stat });
                    }
                }
                NodeWatchEvent::Missing { gone } => {
                    if gone || self.seen {
                        self.ended = true;
                        self.events.emit(RendezvousEvent::Gone);
                        self.watch.close(Instant::ZERO);
                    }
                }
                other => {
                    if let Some(e) = RendezvousEvent::from_watch(other) {
                        self.ended |= e.is_final();
                        self.events.emit(e);
                    }
                }
            }
        }
    }
}

impl Machine for Worker {
    super::kit::follow_part!(watch, pump);

    fn handle_abandon(&mut self, now: Instant) {
        self.close(now);
    }
}

super::kit::recipe_events!(Worker => RendezvousEvent, events.poll);

// ======================================================================================
// Master
// ======================================================================================

/// Op ids of the master's own writes (the watch's ops are small numbers).
const OWN: OpId = 1 << 62;

/// Where a master stands: each stage with what exists only in it.
///
/// | stage | what it carries |
/// | --- | --- |
/// | `Idle` | nothing: not started |
/// | `Running` | what we know of `z_r` and whether our address is to be written ([`Run`]) |
/// | `Ended` | nothing: its final event is reported |
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Stage {
    Idle,
    Running(Run),
    Ended,
}

/// A running master.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
struct Run {
    /// Our address (the latest `publish`) is still to be written.
    due: bool,
    /// `z_r` was seen to exist: its absence now means it went.
    seen: bool,
    /// The last write, or the watch, found no `z_r`: the write waits for the watch to
    /// see it.
    missing: bool,
}

/// A master: writes its address into `z_r` once it exists; see the
/// [module docs](self).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Master {
    watch: NodeWatch,
    address: Bytes,
    stage: Stage,
    /// The session (up: connected, not expired), and whether a write waits for the end
    /// of a backoff (not for a reconnect).
    link: Link,
    kit: Kit<Bytes, RendezvousEvent>,
}

impl Master {
    /// The master of rendezvous `path` (`z_r`) at `address`, idle until
    /// [`start`](Self::start).
    pub fn new(path: &str, address: impl Into<Bytes>) -> Self {
        Master {
            watch: NodeWatch::new(path),
            address: address.into(),
            stage: Stage::Idle,
            link: Link::Down,
            kit: Kit::default(),
        }
    }

    /// Has our current address been written (and not replaced by a newer `publish`)?
    pub fn is_published(&self) -> bool {
        matches!(self.stage, Stage::Running(Run { due: false, .. }))
    }

    /// Starts: writes the address as soon as `z_r` exists (once).
    pub fn start(&mut self, now: Instant) {
        if self.stage != Stage::Idle {
            return;
        }
        self.stage = Stage::Running(Run {
            due: true,
            seen: false,
            missing: false,
        });
        self.watch.start(now);
        self.pump(now);
    }

    /// Writes a new address; [`RendezvousEvent::Published`] again.
    pub fn publish(&mut self, now: Instant, address: Bytes) {
        self.address = address;
        if let Stage::Running(run) = &mut self.stage {
            run.due = true;
        }
        self.pump(now);
    }

    /// Stops; [`RendezvousEvent::Closed`].
    pub fn close(&mut self, now: Instant) {
        self.watch.close(now);
        self.pump(now);
    }

    /// Ends with `e` (final): nothing of ours is sent after it.
    fn end(&mut self, e: RendezvousEvent) {
        self.stage = Stage::Ended;
        self.link.rest();
        self.kit.clear_requests();
        self.kit.emit(e);
    }

    fn pump(&mut self, now: Instant) {
        while let Some(e) = self.watch.poll_event() {
            match (&mut self.stage, e) {
                (Stage::Ended, _) => {}
                (Stage::Running(run), NodeWatchEvent::Data { .. }) => {
                    run.seen = true;
                    run.missing = false;
                }
                (Stage::Running(run), NodeWatchEvent::Missing { gone }) => {
                    run.missing = true;
                    if gone || run.seen {
                        self.end(RendezvousEvent::Gone);
                        self.watch.close(Instant::ZERO);
                    }
                }
                (_, other) => {
                    if let Some(e) = RendezvousEvent::from_watch(other) {
                        if e.is_final() {
                            self.end(e);
                        } else {
                            self.kit.emit(e);
                        }
                    }
                }
            }
        }
        self.drive(now);
        self.check();
    }

    fn drive(&mut self, now: Instant) {
        let Stage::Running(run) = self.stage else {
            return;
        };
        if !run.due || run.missing || !self.link.gate(&self.kit, now) {
            return;
        }
        if !self.kit.is_quiet() {
            return; // one write at a time; its answer decides
        }
        let path = self.watch.path().into();
        let data = self.address.clone();
        self.kit.send(
            data.clone(),
            Request::SetData(SetDataRequest {
                path,
                data,
                version: -1,
            }),
        );
    }

    fn on_set(&mut self, now: Instant, sent: Bytes, result: Reply) {
        let Stage::Running(run) = &mut self.stage else {
            return;
        };
        match result {
            Ok(Response::Stat(stat)) => {
                self.kit.succeeded();
                run.seen = true;
                if sent == self.address {
                    run.due = false;
                    self.kit.emit(RendezvousEvent::Published { stat });
                }
            }
            Ok(_) => self.failed(Error::UnexpectedReply),
            Err(Error::Server(ErrorCode::NoNode)) => {
                if run.seen {
                    self.end(RendezvousEvent::Gone);
                    self.watch.close(Instant::ZERO);
                } else {
                    run.missing = true; // not created yet: the watch tells us when
                }
            }
            Err(e) if e.is_retryable() => self.kit.failed(now),
            Err(e) if e.ends_session() => {}
            Err(e) => self.failed(e),
        }
    }

    fn failed(&mut self, e: Error) {
        self.end(RendezvousEvent::Failed(e));
        self.watch.close(Instant::ZERO);
    }

    /// The rules that span the fields (debug builds): nothing of ours in flight
    /// before the start nor once ended.
    fn check(&self) {
        if cfg!(debug_assertions) && matches!(self.stage, Stage::Idle | Stage::Ended) {
            debug_assert!(self.kit.is_quiet(), "a write outside the run");
        }
    }
}

impl Machine for Master {
    fn handle_reply(&mut self, now: Instant, op: OpId, result: Reply) {
        if op & OWN != 0 {
            if let Some(sent) = self.kit.take(op & !OWN) {
                self.on_set(now, sent, result);
            }
        } else {
            self.watch.handle_reply(now, op, result);
        }
        self.pump(now);
    }
    fn handle_watch(&mut self, now: Instant, op: OpId, event: &WatchEvent) {
        self.watch.handle_watch(now, op, event);
        self.pump(now);
    }
    fn handle_session(&mut self, now: Instant, change: SessionChange) {
        self.kit.session(change);
        match change {
            SessionChange::Connected { .. } | SessionChange::Reconnected { .. } => self.link.up(),
            SessionChange::Expired => {
                self.link.down();
                self.kit.clear_requests();
            }
            _ => {}
        }
        self.watch.handle_session(now, change);
        self.pump(now);
    }
    fn handle_timeout(&mut self, now: Instant) {
        self.watch.handle_timeout(now);
        self.pump(now);
    }
    fn handle_abandon(&mut self, now: Instant) {
        self.close(now);
    }
    fn poll_request(&mut self) -> Option<(OpId, Request)> {
        if let Some((op, r)) = self.kit.poll_request() {
            return Some((op | OWN, r));
        }
        self.watch.poll_request()
    }
    fn poll_timeout(&self) -> Option<Instant> {
        let own = if matches!(self.stage, Stage::Running(_)) {
            self.link.deadline(&self.kit)
        } else {
            None
        };
        match (own, self.watch.poll_timeout()) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }
    fn is_done(&self) -> bool {
        self.stage == Stage::Ended && self.watch.is_done() && self.kit.no_events()
    }
}

super::kit::recipe_events!(Master => RendezvousEvent, kit.poll_event);
