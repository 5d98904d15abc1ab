//! Configuration: several nodes read and written as one (the paper's "configuration
//! management" with its *ready* node, and the same over `multi`).
//!
//! A configuration is a fixed list of node paths. A [`ConfigWriter`] writes new values
//! to all of them; a [`ConfigReader`] reports [`Snapshot`](ReaderEvent::Snapshot)s that
//! never mix two writes. Two protocols ([`ConfigMode`]):
//!
//! # [`ConfigMode::ReadyNode`]: the paper's protocol
//!
//! Interoperable with processes that follow it by hand.
//!
//! **Writer** ([`ConfigWriter`]), three pipelined batches (three round trips, however
//! many nodes):
//!
//! 1. `delete(<ready>)` (`NoNode` is fine), alone: every node write must come after it
//!    on the server, and a refused request does not refuse the ones behind it, so the
//!    writes wait for its reply.
//! 2. `setData(<node>, value, -1)` for every node, back to back without waiting (the
//!    paper: 5,000 parameters pipelined in under a second). A node that is missing
//!    (`NoNode`) is created in the next batch (its missing ancestors as containers,
//!    at most twice); one created meanwhile by someone else (`NodeExists`) is set.
//! 3. `create(<ready>)` (persistent, empty; ancestors as containers if missing), once
//!    every node is known written: `ready` never exists over a half-written
//!    configuration. `NodeExists` is fine.
//!
//! Lost replies: the writes are unconditional sets, so resending is safe. After a lost
//! connection (or an expiry and a new session) the writer starts again with
//! `delete(<ready>)`, then resends every write not known to be applied, then creates
//! `ready`: `ready` always comes back last. A failed write (`NoAuth`, session closed)
//! may leave `ready` deleted: readers then report [`NotReady`](ReaderEvent::NotReady),
//! never a half-written configuration.
//!
//! **Reader** ([`ConfigReader`]), one round trip per round: `exists(<ready>, watch)`
//! then `getData(<node>, watch)` for every node, pipelined (`sync(<ready>)` first when
//! [`ReaderConfig::sync_first`] is set or after a reconnect). ZooKeeper delivers a
//! notification before any reply that reflects the change, so:
//!
//! * `ready` exists and no notification (of `ready` or of a node) arrived before the
//!   round's last reply: every value read is the value at the time of the last read,
//!   while `ready` existed — one complete configuration:
//!   [`Snapshot`](ReaderEvent::Snapshot).
//! * `ready` is missing: [`NotReady`](ReaderEvent::NotReady), and the `exists` watch
//!   waits for its creation; then a new round.
//! * A notification arrived during the round: what was read is discarded and the round
//!   is done again (a deletion of `ready` is reported as `NotReady` at once).
//! * A node changes while `ready` exists (a writer in the `multi` mode): a new round,
//!   a new `Snapshot`.
//!
//! Each node carries at most one watch registration of the reader at a time: a node
//! whose watch is armed is read without one; a node last seen missing is watched with
//! `exists(<node>, watch)` pipelined before its `getData` (a `getData` that finds no
//! node sets no watch, so the round is done again).
//!
//! # [`ConfigMode::Multi`]: one transaction (ZooKeeper 3.4+ to write, 3.6+ to read)
//!
//! **Writer**: one `multi` holding a `setData` (or `create`, for a node found missing)
//! for every node: the server applies it at one point of its order, all or nothing.
//! One request must fit the server's `jute.maxbuffer` (about 1 MB by default), so a
//! write larger than [`WriterConfig::max_multi_bytes`] is refused up front with
//! [`Error::TooLarge`]. A failed `multi` (`NoNode`: a node is missing; `NodeExists`:
//! created meanwhile) is followed by `exists` of every node and a new `multi` (at most
//! four). A lost reply: the `multi` is sent again (sets are idempotent; a create that
//! was applied fails the `multi`, and the next one sets).
//!
//! **Reader**: `exists(<node>, watch)` for every node not watched yet, then one
//! `multiRead` of all nodes (ZooKeeper 3.6+): one request, served at one point of the
//! server's order, so it can never see half of a `multi`. Any notification leads to
//! another round.
//!
//! # Which reader a writer needs
//!
//! | writer \ reader | `ReadyNode` reader | `Multi` reader |
//! |---|---|---|
//! | `ReadyNode` writer | safe | **unsafe**: a `multiRead` may land between two sets |
//! | `Multi` writer | safe if `ready` exists (create it once) | safe |
//!
//! A `ReadyNode` reader is safe with both writers (the notification rule above catches
//! a `multi` that lands during a round); a `Multi` reader only with a `Multi` writer.
//! Either way, writers must not write concurrently (use a lock).
//!
//! # Example (sans-IO: the host sends the requests and feeds the replies back)
//!
//! ```
//! use zk_recipes::proto::{ErrorCode, Request, Response};
//! use zk_recipes::recipe::config::{ConfigWriter, WriterConfig, WriterEvent};
//! use zk_recipes::recipe::{Recipe, SessionChange};
//! use zk_recipes::time::Instant;
//! use zk_recipes::client::Error;
//!
//! let t = Instant::ZERO;
//! let update = vec![("/app/db".to_string(), bytes::Bytes::from("10.0.0.7"))];
//! let mut w = ConfigWriter::new(WriterConfig::ready_node("/app/ready"), update);
//! w.handle_session(t, SessionChange::Connected { session_id: 1 });
//! w.start(t);
//! let (op, req) = w.poll_request().unwrap();
//! assert!(matches!(req, Request::Delete(_))); // 1. delete ready
//! w.handle_reply(t, op, Err(Error::Server(ErrorCode::NoNode)));
//! let (op, req) = w.poll_request().unwrap();
//! assert!(matches!(req, Request::SetData(_))); // 2. every node, pipelined
//! w.handle_reply(t, op, Ok(Response::Stat(Default::default())));
//! let (op, req) = w.poll_request().unwrap();
//! assert!(matches!(req, Request::Create(_))); // 3. ready, last
//! w.handle_reply(t, op, Ok(Response::Path("/app/ready".into())));
//! assert_eq!(w.poll_event(), Some(WriterEvent::Written));
//! ```
//!
//! # Session semantics
//!
//! Reader: after a reconnect, `sync` and a new round (nothing written while away is
//! missed); after an expiry and a new session, it starts over (new watches);
//! `Closed` ends it with `Failed(Error::Closed)`. Writer: resumes after a reconnect or
//! a new session as described; `Closed` ends it with `Failed(Error::Closed)`.

use alloc::collections::BTreeSet;
use alloc::string::{String, ToString};
use alloc::vec::Vec;
use bytes::{Bytes, BytesMut};

use super::kit::{Kit, Plumbing, Protocol, MAX_PARENT_ROUNDS};
use super::path::{ancestor_creates, ancestor_result};
use super::{OpId, SessionChange};
use crate::error::Error;
use crate::proto::*;
use crate::session::WatchEvent;
use crate::time::Instant;

/// How many failed `multi`s a multi-mode write tries before giving up.
const MAX_MULTI_ROUNDS: u8 = 4;

/// Which protocol keeps readers from seeing half a write; see the [module docs](self).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ConfigMode {
    /// The paper's protocol: a `ready` node exists only over a complete configuration.
    ReadyNode,
    /// One `multi` per write, one `multiRead` per read (ZooKeeper 3.6+ to read).
    Multi,
}

fn check_paths<'a>(paths: impl Iterator<Item = &'a str>) -> Result<(), Error> {
    let mut seen = BTreeSet::new();
    for p in paths {
        validate_path(p).map_err(|error| Error::InvalidPath {
            path: p.to_string(),
            error,
        })?;
        if !seen.insert(p) {
            return Err(Error::Server(ErrorCode::BadArguments));
        }
    }
    Ok(())
}

// ======================================================================================
// Reader
// ======================================================================================

/// What a [`ConfigReader`] reads.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ReaderConfig {
    /// The `ready` node (unused in [`ConfigMode::Multi`]).
    pub ready: String,
    /// The configuration nodes, in the order of [`ConfigSnapshot::values`].
    pub paths: Vec<String>,
    /// The protocol.
    pub mode: ConfigMode,
    /// `sync` before every round, not only after a reconnect: for a reader told "the
    /// configuration changed" by another channel (the paper's case for `sync`).
    pub sync_first: bool,
}

impl ReaderConfig {
    /// The paper's protocol: `paths` under the `ready` node.
    pub fn ready_node(ready: &str, paths: &[&str]) -> Self {
        ReaderConfig {
            ready: ready.into(),
            paths: paths.iter().map(|p| p.to_string()).collect(),
            mode: ConfigMode::ReadyNode,
            sync_first: false,
        }
    }

    /// `paths` read with one `multiRead` (for a [`ConfigMode::Multi`] writer).
    pub fn multi(paths: &[&str]) -> Self {
        ReaderConfig {
            ready: String::new(),
            paths: paths.iter().map(|p| p.to_string()).collect(),
            mode: ConfigMode::Multi,
            sync_first: false,
        }
    }

    /// Sets [`sync_first`](Self::sync_first).
    pub fn sync_first(mut self, on: bool) -> Self {
        self.sync_first = on;
        self
    }
}

/// One complete configuration, as read.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ConfigSnapshot {
    /// Every node's path and value (`None`: the node does not exist), in the order of
    /// [`ReaderConfig::paths`].
    pub values: Vec<(String, Option<Bytes>)>,
    /// Every node's data version (`None`: missing), same order.
    pub versions: Vec<Option<i32>>,
    /// The largest `mzxid` among the nodes read (and `ready`'s): the snapshot is the
    /// server's state at or after this transaction.
    pub zxid: i64,
}

/// What a [`ConfigReader`] reports. `Failed` and `Closed` are final.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ReaderEvent {
    /// A complete configuration, different from the last one reported.
    Snapshot(ConfigSnapshot),
    /// `ready` does not exist (or was deleted): a write is in progress; what was read
    /// before must not be combined with what comes next.
    NotReady,
    /// Ended: a node cannot be read (`NoAuth`, invalid path, `multiRead` unsupported)
    /// or the session was closed. Final.
    Failed(Error),
    /// Ended by [`close`](ConfigReader::close). Final.
    Closed,
}

impl ReaderEvent {
    /// Does this event end the reader?
    pub fn is_final(&self) -> bool {
        matches!(self, ReaderEvent::Failed(_) | ReaderEvent::Closed)
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum ReadOpKind {
    Sync,
    Ready,
    Exists(usize),
    Read(usize),
    MultiRead,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct Round {
    pending: usize,
    ready: Option<Option<Stat>>,
    values: Vec<Option<(Bytes, Stat)>>,
    /// A notification arrived, or a node is missing without a watch: read again.
    spoiled: bool,
    /// A request failed with a retryable error.
    failed: bool,
}

/// Reads a configuration and reports complete snapshots; see the [module docs](self).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ConfigReader {
    config: ReaderConfig,
    running: bool,
    done: bool,
    live: bool,
    ready_watch: Option<OpId>,
    watches: Vec<Option<OpId>>,
    missing: Vec<bool>,
    round: Option<Round>,
    need_round: bool,
    /// The last report was `NotReady` (or nothing yet in the ready mode).
    not_ready: bool,
    reported_not_ready: bool,
    last: Option<Vec<(i64, i64)>>,
    sync_next: bool,
    waiting: bool,
    kit: Kit<ReadOpKind, ReaderEvent>,
}

impl ConfigReader {
    /// A reader that does nothing until [`start`](Self::start).
    pub fn new(config: ReaderConfig) -> Self {
        let n = config.paths.len();
        // In the ready mode nothing is ready until a round has seen `ready`.
        let not_ready = config.mode == ConfigMode::ReadyNode;
        ConfigReader {
            config,
            running: false,
            done: false,
            live: false,
            ready_watch: None,
            watches: alloc::vec![None; n],
            missing: alloc::vec![false; n],
            round: None,
            need_round: false,
            not_ready,
            reported_not_ready: false,
            last: None,
            sync_next: false,
            waiting: false,
            kit: Kit::default(),
        }
    }

    /// The configuration read.
    pub fn config(&self) -> &ReaderConfig {
        &self.config
    }

    /// Has it ended?
    pub fn has_ended(&self) -> bool {
        self.done
    }

    /// Nothing to do until a notification, a session change or a command: the last
    /// round completed and its result was reported (or was the same as the last one).
    pub fn is_idle(&self) -> bool {
        self.running && self.live && self.round.is_none() && !self.need_round
    }

    /// `ready` existed at the last completed round (always, in the multi mode).
    pub fn is_ready(&self) -> bool {
        !self.not_ready
    }

    /// Starts reading (once).
    pub fn start(&mut self, now: Instant) {
        if self.running || self.done {
            return;
        }
        let ready =
            (self.config.mode == ConfigMode::ReadyNode).then_some(self.config.ready.as_str());
        if let Err(e) = check_paths(self.config.paths.iter().map(|p| p.as_str()).chain(ready)) {
            return self.finish(ReaderEvent::Failed(e));
        }
        self.running = true;
        self.need_round = true;
        self.drive(now);
    }

    /// Reads again now (after `sync` if [`sync_first`](ReaderConfig::sync_first)): for
    /// a reader told by another channel that the configuration changed.
    pub fn refresh(&mut self, now: Instant) {
        if self.running {
            self.need_round = true;
            self.drive(now);
        }
    }

    /// Stops; [`ReaderEvent::Closed`].
    pub fn close(&mut self, _now: Instant) {
        if !self.done {
            self.finish(ReaderEvent::Closed);
        }
    }

    fn finish(&mut self, e: ReaderEvent) {
        self.done = true;
        self.running = false;
        self.kit.clear_requests();
        self.round = None;
        self.ready_watch = None;
        self.watches.iter_mut().for_each(|w| *w = None);
        self.kit.emit(e);
    }

    fn ready_mode(&self) -> bool {
        self.config.mode == ConfigMode::ReadyNode
    }

    fn drive(&mut self, now: Instant) {
        if !self.running || !self.live || self.round.is_some() || !self.need_round {
            return;
        }
        if !self.kit.allows(now) {
            self.waiting = !self.kit.is_suspended();
            return;
        }
        self.waiting = false;
        self.need_round = false;
        let n = self.config.paths.len();
        let mut round = Round {
            pending: 0,
            ready: None,
            values: alloc::vec![None; n],
            spoiled: false,
            failed: false,
        };
        if core::mem::take(&mut self.sync_next) || self.config.sync_first {
            let path = if self.ready_mode() {
                self.config.ready.clone()
            } else {
                self.config
                    .paths
                    .first()
                    .cloned()
                    .unwrap_or_else(|| "/".into())
            };
            self.kit
                .send(ReadOpKind::Sync, Request::Sync(PathRequest { path }));
            round.pending += 1;
        }
        if self.ready_mode() {
            let watch = self.ready_watch.is_none();
            let op = self.kit.send(
                ReadOpKind::Ready,
                Request::Exists(PathWatch {
                    path: self.config.ready.clone(),
                    watch,
                }),
            );
            if watch {
                self.ready_watch = Some(op);
            }
            round.pending += 1;
        }
        let multi = !self.ready_mode();
        for i in 0..n {
            let path = self.config.paths[i].clone();
            let armed = self.watches[i].is_some();
            if !armed && (multi || self.missing[i]) {
                let op = self.kit.send(
                    ReadOpKind::Exists(i),
                    Request::Exists(PathWatch {
                        path: path.clone(),
                        watch: true,
                    }),
                );
                self.watches[i] = Some(op);
                round.pending += 1;
            }
            if !multi {
                let watch = self.watches[i].is_none();
                let op = self.kit.send(
                    ReadOpKind::Read(i),
                    Request::GetData(PathWatch { path, watch }),
                );
                if watch {
                    self.watches[i] = Some(op);
                }
                round.pending += 1;
            }
        }
        if multi {
            let ops = self
                .config
                .paths
                .iter()
                .map(|p| {
                    ReadOp::GetData(PathWatch {
                        path: p.clone(),
                        watch: false,
                    })
                })
                .collect();
            self.kit
                .send(ReadOpKind::MultiRead, Request::MultiRead(ops));
            round.pending += 1;
        }
        self.round = Some(round);
    }

    /// A request of the round failed: retryable errors redo the round, others end.
    fn round_error(&mut self, e: Error) {
        if e.is_retryable() || e.ends_session() {
            // (After a session ends, `Expired` or `Closed` follows and decides.)
            if let Some(r) = &mut self.round {
                r.failed = true;
            }
        } else {
            self.finish(ReaderEvent::Failed(e));
        }
    }

    fn on_answer(&mut self, op: OpId, kind: ReadOpKind, result: Result<Response, Error>) {
        match kind {
            ReadOpKind::Sync => {
                if let Err(e) = result {
                    self.round_error(e);
                }
            }
            ReadOpKind::Ready => {
                let ours = self.ready_watch == Some(op);
                match result {
                    Ok(Response::Stat(stat)) => {
                        if let Some(r) = &mut self.round {
                            r.ready = Some(Some(stat));
                        }
                    }
                    Ok(_) => self.finish(ReaderEvent::Failed(Error::UnexpectedReply)),
                    Err(Error::Server(ErrorCode::NoNode)) => {
                        if let Some(r) = &mut self.round {
                            r.ready = Some(None);
                        }
                    }
                    Err(e) => {
                        if ours {
                            self.ready_watch = None;
                        }
                        self.round_error(e);
                    }
                }
            }
            ReadOpKind::Exists(i) => match result {
                Ok(_) => self.missing[i] = false,
                Err(Error::Server(ErrorCode::NoNode)) => {}
                Err(e) => {
                    if self.watches[i] == Some(op) {
                        self.watches[i] = None;
                    }
                    self.round_error(e);
                }
            },
            ReadOpKind::Read(i) => match result {
                Ok(Response::Data { data, stat }) => {
                    self.missing[i] = false;
                    if let Some(r) = &mut self.round {
                        r.values[i] = Some((data, stat));
                    }
                }
                Ok(_) => self.finish(ReaderEvent::Failed(Error::UnexpectedReply)),
                Err(Error::Server(ErrorCode::NoNode)) => {
                    self.missing[i] = true;
                    if self.watches[i] == Some(op) {
                        // No watch was set: its creation would go unnoticed.
                        self.watches[i] = None;
                        if let Some(r) = &mut self.round {
                            r.spoiled = true;
                        }
                    }
                }
                Err(e) => {
                    if self.watches[i] == Some(op) {
                        self.watches[i] = None;
                    }
                    self.round_error(e);
                }
            },
            ReadOpKind::MultiRead => match result {
                Ok(Response::Multi(results)) if results.len() == self.config.paths.len() => {
                    for (i, res) in results.into_iter().enumerate() {
                        match res {
                            MultiResult::GetData { data, stat } => {
                                if let Some(r) = &mut self.round {
                                    r.values[i] = Some((data, stat));
                                }
                            }
                            MultiResult::Error(ErrorCode::NoNode) => {}
                            MultiResult::Error(code) => {
                                return self.round_error(Error::from(code));
                            }
                            _ => return self.finish(ReaderEvent::Failed(Error::UnexpectedReply)),
                        }
                    }
                }
                Ok(_) => self.finish(ReaderEvent::Failed(Error::UnexpectedReply)),
                Err(e) => self.round_error(e),
            },
        }
    }

    fn complete(&mut self, now: Instant) {
        let Some(round) = self.round.take() else {
            return;
        };
        if round.failed {
            self.need_round = true;
            self.sync_next = true;
            self.kit.failed(now);
            return;
        }
        self.kit.succeeded();
        if round.spoiled {
            self.need_round = true;
            return;
        }
        let mut zxid = 0;
        let mut key = Vec::with_capacity(round.values.len() + 1);
        if self.ready_mode() {
            match round.ready {
                Some(Some(stat)) => {
                    zxid = stat.mzxid;
                    key.push((stat.czxid, stat.mzxid));
                }
                _ => {
                    self.not_ready = true;
                    self.last = None;
                    if !self.reported_not_ready {
                        self.reported_not_ready = true;
                        self.kit.emit(ReaderEvent::NotReady);
                    }
                    return;
                }
            }
        }
        self.not_ready = false;
        let mut values = Vec::with_capacity(round.values.len());
        let mut versions = Vec::with_capacity(round.values.len());
        for (i, v) in round.values.into_iter().enumerate() {
            let path = self.config.paths[i].clone();
            match v {
                Some((data, stat)) => {
                    zxid = zxid.max(stat.mzxid);
                    key.push((stat.czxid, stat.mzxid));
                    versions.push(Some(stat.version));
                    values.push((path, Some(data)));
                }
                None => {
                    key.push((0, 0));
                    versions.push(None);
                    values.push((path, None));
                }
            }
        }
        if self.last.as_ref() != Some(&key) {
            self.last = Some(key);
            self.reported_not_ready = false;
            self.kit.emit(ReaderEvent::Snapshot(ConfigSnapshot {
                values,
                versions,
                zxid,
            }));
        }
    }
}

impl Protocol for ConfigReader {
    type Event = ReaderEvent;

    fn kit(&mut self) -> &mut dyn Plumbing<Self::Event> {
        &mut self.kit
    }

    fn on_reply(&mut self, now: Instant, op: OpId, result: Result<Response, Error>) {
        let Some(kind) = self.kit.take(op) else {
            return;
        };
        if self.done {
            return;
        }
        self.on_answer(op, kind, result);
        if let Some(r) = &mut self.round {
            r.pending = r.pending.saturating_sub(1);
            if r.pending == 0 {
                self.complete(now);
            }
        }
        self.drive(now);
    }

    fn on_watch(&mut self, now: Instant, op: OpId, event: &WatchEvent) {
        if self.done {
            return;
        }
        if self.ready_watch == Some(op) {
            self.ready_watch = None;
            if let Some(r) = &mut self.round {
                r.spoiled = true;
            }
            if event.event_type == EventType::NodeDeleted {
                self.not_ready = true;
                self.last = None;
                if !self.reported_not_ready {
                    self.reported_not_ready = true;
                    self.kit.emit(ReaderEvent::NotReady);
                }
            }
            self.need_round = true;
        } else if let Some(i) = self.watches.iter().position(|w| *w == Some(op)) {
            self.watches[i] = None;
            if let Some(r) = &mut self.round {
                r.spoiled = true;
            }
            if event.event_type == EventType::NodeDeleted {
                self.missing[i] = true;
            }
            // While `ready` is missing, its creation starts the next round.
            if !(self.ready_mode() && self.not_ready) {
                self.need_round = true;
            }
        } else {
            return;
        }
        self.drive(now);
    }

    fn on_session(&mut self, now: Instant, change: SessionChange) {
        if self.done {
            return;
        }
        match change {
            SessionChange::Connected { .. } | SessionChange::Reconnected { .. } => {
                self.live = true;
                if self.running {
                    // A reconnect may land on a lagging server: sync, then read.
                    self.sync_next = true;
                    self.need_round = true;
                }
            }
            SessionChange::Suspended => {}
            SessionChange::Expired => {
                self.kit.clear_requests();
                self.round = None;
                self.ready_watch = None;
                self.watches.iter_mut().for_each(|w| *w = None);
                self.live = false;
                self.waiting = false;
            }
            SessionChange::Closed => self.finish(ReaderEvent::Failed(Error::Closed)),
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

// ======================================================================================
// Writer
// ======================================================================================

/// How a [`ConfigWriter`] writes.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct WriterConfig {
    /// The `ready` node (unused in [`ConfigMode::Multi`]).
    pub ready: String,
    /// The protocol.
    pub mode: ConfigMode,
    /// ACL of nodes created (configuration nodes, `ready`, containers).
    pub acl: Vec<Acl>,
    /// The largest `multi` sent, in bytes ([`ConfigMode::Multi`]); ZooKeeper refuses a
    /// request larger than its `jute.maxbuffer` (1 MB less a little by default).
    pub max_multi_bytes: usize,
}

impl WriterConfig {
    /// The default limit on one `multi`: 1,000,000 bytes, under ZooKeeper's default
    /// `jute.maxbuffer` (0xfffff) with room for the frame headers.
    pub const MAX_MULTI_BYTES: usize = 1_000_000;

    /// The paper's protocol with the `ready` node at `ready`.
    pub fn ready_node(ready: &str) -> Self {
        WriterConfig {
            ready: ready.into(),
            mode: ConfigMode::ReadyNode,
            acl: Acl::open_unsafe(),
            max_multi_bytes: Self::MAX_MULTI_BYTES,
        }
    }

    /// One `multi` per write.
    pub fn multi() -> Self {
        WriterConfig {
            ready: String::new(),
            mode: ConfigMode::Multi,
            acl: Acl::open_unsafe(),
            max_multi_bytes: Self::MAX_MULTI_BYTES,
        }
    }
}

/// What a [`ConfigWriter`] reports: exactly one final event.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum WriterEvent {
    /// Every node holds its new value (and `ready` exists again). Final.
    Written,
    /// The write failed (`NoAuth`, too large, missing parents, session closed). In the
    /// ready mode `ready` may be left deleted. Final.
    Failed(Error),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Item {
    /// To send as a set.
    Set,
    /// To send as a create (found missing).
    Create,
    /// To send as a create after its ancestors.
    Parents,
    /// Sent; the reply decides.
    Sent,
    /// Known applied.
    Done,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum WriteOp {
    DeleteReady,
    Set(usize),
    Create(usize, bool),
    Parent(String),
    CreateReady(bool),
    Multi,
    Probe(usize),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Stage {
    Idle,
    DeleteReady,
    Write,
    CreateReady,
    Multi,
    Probe,
    Done,
}

/// Writes one configuration; see the [module docs](self).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ConfigWriter {
    config: WriterConfig,
    updates: Vec<(String, Bytes)>,
    items: Vec<Item>,
    parent_rounds: Vec<u8>,
    ready_parents: bool,
    ready_parent_rounds: u8,
    parent_error: Option<Error>,
    multi_rounds: u8,
    /// A probe of this batch failed: the batch is sent again.
    probe_failed: bool,
    stage: Stage,
    live: bool,
    waiting: bool,
    /// A batch failed with a retryable error: resend once allowed.
    again: bool,
    kit: Kit<WriteOp, WriterEvent>,
}

impl ConfigWriter {
    /// A write of `updates` (path, value) that does nothing until
    /// [`start`](Self::start).
    pub fn new(config: WriterConfig, updates: Vec<(String, Bytes)>) -> Self {
        let n = updates.len();
        ConfigWriter {
            config,
            updates,
            items: alloc::vec![Item::Set; n],
            parent_rounds: alloc::vec![0; n],
            ready_parents: false,
            ready_parent_rounds: 0,
            parent_error: None,
            multi_rounds: 0,
            probe_failed: false,
            stage: Stage::Idle,
            live: false,
            waiting: false,
            again: false,
            kit: Kit::default(),
        }
    }

    /// Has it ended?
    pub fn has_ended(&self) -> bool {
        self.stage == Stage::Done
    }

    /// The write's updates.
    pub fn updates(&self) -> &[(String, Bytes)] {
        &self.updates
    }

    /// Starts the write (once). Checks the paths and, in the multi mode, the size.
    pub fn start(&mut self, now: Instant) {
        if self.stage != Stage::Idle {
            return;
        }
        let ready =
            (self.config.mode == ConfigMode::ReadyNode).then_some(self.config.ready.as_str());
        if let Err(e) = check_paths(self.updates.iter().map(|(p, _)| p.as_str()).chain(ready)) {
            return self.fail(e);
        }
        if self.config.mode == ConfigMode::Multi {
            if let Err(e) = self.multi_request() {
                return self.fail(e);
            }
            self.stage = Stage::Multi;
        } else {
            self.stage = Stage::DeleteReady;
        }
        self.drive(now);
    }

    fn fail(&mut self, e: Error) {
        self.finish(WriterEvent::Failed(e));
    }

    fn finish(&mut self, e: WriterEvent) {
        self.stage = Stage::Done;
        self.kit.clear_requests();
        self.kit.emit(e);
    }

    /// The `multi` for the items as they stand, refused if too large.
    fn multi_request(&self) -> Result<Request, Error> {
        let ops = self
            .updates
            .iter()
            .zip(&self.items)
            .map(|((path, data), item)| match item {
                Item::Create | Item::Parents => MultiOp::Create(CreateRequest::new(
                    path.clone(),
                    data.clone(),
                    self.config.acl.clone(),
                    CreateMode::Persistent,
                )),
                _ => MultiOp::SetData(SetDataRequest {
                    path: path.clone(),
                    data: data.clone(),
                    version: -1,
                }),
            })
            .collect();
        let request = Request::Multi(ops);
        let mut buf = BytesMut::new();
        request.encode_body(&mut buf);
        if buf.len() > self.config.max_multi_bytes {
            return Err(Error::TooLarge(TooLarge {
                len: buf.len(),
                max: self.config.max_multi_bytes,
            }));
        }
        Ok(request)
    }

    fn send_parents(&mut self, path: &str, sent: &mut BTreeSet<String>) {
        for (p, request) in ancestor_creates(path, &self.config.acl, CreateMode::Container) {
            if sent.insert(p.clone()) {
                self.kit.send(WriteOp::Parent(p), request);
            }
        }
    }

    fn drive(&mut self, now: Instant) {
        if matches!(self.stage, Stage::Idle | Stage::Done) || !self.live {
            return;
        }
        if !self.kit.allows(now) {
            self.waiting = !self.kit.is_suspended();
            return;
        }
        self.waiting = false;
        if !self.kit.is_quiet() {
            return; // a batch at a time
        }
        self.again = false;
        self.parent_error = None;
        match self.stage {
            Stage::DeleteReady => {
                let path = self.config.ready.clone();
                self.kit.send(
                    WriteOp::DeleteReady,
                    Request::Delete(DeleteRequest { path, version: -1 }),
                );
            }
            Stage::Write => {
                let mut parents = BTreeSet::new();
                for i in 0..self.items.len() {
                    let (path, data) = self.updates[i].clone();
                    match self.items[i] {
                        Item::Set => {
                            self.kit.send(
                                WriteOp::Set(i),
                                Request::SetData(SetDataRequest {
                                    path,
                                    data,
                                    version: -1,
                                }),
                            );
                        }
                        Item::Create | Item::Parents => {
                            let with_parents = self.items[i] == Item::Parents;
                            if with_parents {
                                self.send_parents(&path, &mut parents);
                            }
                            self.kit.send(
                                WriteOp::Create(i, with_parents),
                                Request::Create(CreateRequest::new(
                                    path,
                                    data,
                                    self.config.acl.clone(),
                                    CreateMode::Persistent,
                                )),
                            );
                        }
                        Item::Sent | Item::Done => continue,
                    }
                    self.items[i] = Item::Sent;
                }
                if self.kit.is_quiet() {
                    self.stage = Stage::CreateReady;
                    self.drive(now);
                }
            }
            Stage::CreateReady => {
                let path = self.config.ready.clone();
                if self.ready_parents {
                    self.send_parents(&path, &mut BTreeSet::new());
                }
                self.kit.send(
                    WriteOp::CreateReady(self.ready_parents),
                    Request::Create(CreateRequest::new(
                        path,
                        Bytes::new(),
                        self.config.acl.clone(),
                        CreateMode::Persistent,
                    )),
                );
            }
            Stage::Multi => {
                let mut parents = BTreeSet::new();
                for i in 0..self.items.len() {
                    if self.items[i] == Item::Parents {
                        let path = self.updates[i].0.clone();
                        self.send_parents(&path, &mut parents);
                    }
                }
                match self.multi_request() {
                    Ok(request) => {
                        self.kit.send(WriteOp::Multi, request);
                    }
                    Err(e) => self.fail(e),
                }
            }
            Stage::Probe => {
                for i in 0..self.items.len() {
                    let path = self.updates[i].0.clone();
                    self.kit.send(
                        WriteOp::Probe(i),
                        Request::Exists(PathWatch { path, watch: false }),
                    );
                }
                if self.items.is_empty() {
                    self.stage = Stage::Multi;
                    self.drive(now);
                }
            }
            Stage::Idle | Stage::Done => {}
        }
    }

    /// A retryable failure: the batch is sent again; in the ready mode a lost write
    /// starts over from `delete(<ready>)` so `ready` comes back last.
    fn retryable(&mut self, now: Instant) {
        if !self.again {
            self.again = true;
            self.kit.failed(now);
        }
        if self.stage == Stage::Write {
            self.stage = Stage::DeleteReady;
        }
    }

    fn on_answer(&mut self, now: Instant, op: WriteOp, result: Result<Response, Error>) {
        match op {
            WriteOp::Parent(p) => {
                if let Some(e) = ancestor_result(&p, &result) {
                    if e.is_retryable() {
                        self.retryable(now);
                    } else if !e.ends_session() && !self.again && self.parent_error.is_none() {
                        self.parent_error = Some(e);
                    }
                }
            }
            WriteOp::DeleteReady => match result {
                Ok(_) | Err(Error::Server(ErrorCode::NoNode)) => {
                    self.kit.succeeded();
                    self.stage = Stage::Write;
                }
                Err(e) if e.is_retryable() => self.retryable(now),
                Err(e) if e.ends_session() => {}
                Err(e) => self.fail(e),
            },
            WriteOp::Set(i) => match result {
                Ok(_) => self.items[i] = Item::Done,
                Err(Error::Server(ErrorCode::NoNode)) => self.items[i] = Item::Create,
                Err(e) if e.is_retryable() => {
                    self.items[i] = Item::Set;
                    self.retryable(now);
                }
                Err(e) if e.ends_session() => self.items[i] = Item::Set,
                Err(e) => self.fail(e),
            },
            WriteOp::Create(i, with_parents) => match result {
                Ok(_) => self.items[i] = Item::Done,
                Err(Error::Server(ErrorCode::NodeExists)) => self.items[i] = Item::Set,
                // Not sent with its parents yet, or one of them was refused: again,
                // with parents.
                Err(Error::Server(ErrorCode::NoNode)) if !with_parents || self.again => {
                    self.items[i] = Item::Parents;
                }
                Err(Error::Server(ErrorCode::NoNode)) => {
                    if self.parent_rounds[i] >= MAX_PARENT_ROUNDS || self.parent_error.is_some() {
                        let e = self.parent_error.take().unwrap_or(Error::NoParent {
                            path: parent(&self.updates[i].0).unwrap_or("/").to_string(),
                            code: ErrorCode::NoNode,
                        });
                        return self.fail(e);
                    }
                    self.parent_rounds[i] += 1;
                    self.items[i] = Item::Parents;
                }
                Err(e) if e.is_retryable() => {
                    self.items[i] = if with_parents {
                        Item::Parents
                    } else {
                        Item::Create
                    };
                    self.retryable(now);
                }
                Err(e) if e.ends_session() => {
                    self.items[i] = if with_parents {
                        Item::Parents
                    } else {
                        Item::Create
                    };
                }
                Err(e) => self.fail(e),
            },
            WriteOp::CreateReady(with_parents) => match result {
                Ok(_) | Err(Error::Server(ErrorCode::NodeExists)) => {
                    self.finish(WriterEvent::Written)
                }
                Err(Error::Server(ErrorCode::NoNode)) if !with_parents || self.again => {
                    self.ready_parents = true;
                }
                Err(Error::Server(ErrorCode::NoNode)) => {
                    if self.ready_parent_rounds >= MAX_PARENT_ROUNDS || self.parent_error.is_some()
                    {
                        let e = self.parent_error.take().unwrap_or(Error::NoParent {
                            path: parent(&self.config.ready).unwrap_or("/").to_string(),
                            code: ErrorCode::NoNode,
                        });
                        return self.fail(e);
                    }
                    self.ready_parent_rounds += 1;
                    self.ready_parents = true;
                }
                Err(e) if e.is_retryable() => self.retryable(now),
                Err(e) if e.ends_session() => {}
                Err(e) => self.fail(e),
            },
            WriteOp::Multi => {
                let failed = match result {
                    Ok(Response::Multi(results)) => match first_error(&results) {
                        None => return self.finish(WriterEvent::Written),
                        Some(code) => Error::from(code),
                    },
                    Ok(_) => return self.fail(Error::UnexpectedReply),
                    Err(e) => e,
                };
                match failed {
                    Error::Server(ErrorCode::NoNode | ErrorCode::NodeExists) => {
                        if let Some(e) = self.parent_error.take() {
                            return self.fail(e); // a parent that cannot be created
                        }
                        // A parent refused in this batch explains the failure: no count.
                        if !self.again {
                            self.multi_rounds += 1;
                            if self.multi_rounds >= MAX_MULTI_ROUNDS {
                                return self.fail(failed);
                            }
                        }
                        self.stage = Stage::Probe;
                    }
                    e if e.is_retryable() => self.retryable(now),
                    e if e.ends_session() => {}
                    e => self.fail(e),
                }
            }
            WriteOp::Probe(i) => match result {
                Ok(_) => self.items[i] = Item::Set,
                Err(Error::Server(ErrorCode::NoNode)) => self.items[i] = Item::Parents,
                Err(e) if e.is_retryable() => self.retryable(now),
                Err(e) if e.ends_session() => {}
                Err(e) => self.fail(e),
            },
        }
    }
}

impl Protocol for ConfigWriter {
    type Event = WriterEvent;

    fn kit(&mut self) -> &mut dyn Plumbing<Self::Event> {
        &mut self.kit
    }

    fn on_reply(&mut self, now: Instant, op: OpId, result: Result<Response, Error>) {
        let Some(purpose) = self.kit.take(op) else {
            return;
        };
        if self.stage == Stage::Done {
            return;
        }
        let probe = matches!(purpose, WriteOp::Probe(_));
        if probe && result.is_err() && result != Err(Error::Server(ErrorCode::NoNode)) {
            self.probe_failed = true;
        }
        self.on_answer(now, purpose, result);
        if probe && self.stage == Stage::Probe && self.kit.is_quiet() {
            if core::mem::take(&mut self.probe_failed) {
                // Not every node was probed: probe again (drive resends).
            } else {
                self.stage = Stage::Multi;
            }
        }
        self.drive(now);
    }

    fn on_watch(&mut self, _now: Instant, _op: OpId, _event: &WatchEvent) {}

    fn on_session(&mut self, now: Instant, change: SessionChange) {
        if matches!(self.stage, Stage::Done) {
            return;
        }
        match change {
            SessionChange::Connected { .. } | SessionChange::Reconnected { .. } => {
                self.live = true;
            }
            SessionChange::Suspended => {}
            SessionChange::Expired => {
                // Every request was answered (failed); resend what is not known applied.
                self.kit.clear_requests();
                self.live = false;
                self.waiting = false;
                for item in &mut self.items {
                    if *item == Item::Sent {
                        *item = Item::Set;
                    }
                }
                if self.stage == Stage::Write {
                    self.stage = Stage::DeleteReady;
                }
            }
            SessionChange::Closed => self.fail(Error::Closed),
        }
        self.drive(now);
    }

    fn on_timeout(&mut self, now: Instant) {
        self.drive(now);
    }

    fn on_abandon(&mut self, _now: Instant) {
        if self.stage != Stage::Done {
            self.fail(Error::Finished);
        }
    }

    fn deadline(&self) -> Option<Instant> {
        if self.waiting && !matches!(self.stage, Stage::Idle | Stage::Done) {
            self.kit.retry_at()
        } else {
            None
        }
    }

    fn finished(&self) -> bool {
        self.stage == Stage::Done && self.kit.no_events()
    }
}
