//! The configuration reader: rounds of reads that report complete snapshots.

use alloc::string::{String, ToString};
use alloc::vec::Vec;
use bytes::Bytes;

use super::mode::{check_paths, ConfigMode};
use crate::error::Error;
use crate::proto::*;
use crate::recipe::kit::{protocol_head, Kit, Protocol, Reply};
use crate::recipe::watcher::{watcher_calls, watcher_protocol, Need, Watcher};
use crate::recipe::{OpId, SessionChange};
use crate::session::WatchEvent;
use crate::time::Instant;

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

/// What the reader last reported of `ready` (always `Ready` in the multi mode).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Readiness {
    /// `ready` existed at the last completed round.
    Ready,
    /// `ready` is missing (or nothing was read yet in the ready mode), `NotReady` not
    /// reported since the last snapshot.
    NotReady,
    /// `ready` is missing and `NotReady` was reported.
    Reported,
}

/// A round to read (a notification, a reconnect, a refresh, a failed round).
const ROUND: Need = Need::bit(0);
/// A `sync` before the next round (after a reconnect or a failed round).
const SYNC: Need = Need::bit(1);

/// Reads a configuration and reports complete snapshots; see the [module docs](super).
///
/// | before | after |
/// | --- | --- |
/// | `running`, `done` | `watcher`'s life (`Idle`, `Running`, `Done`) |
/// | `live`, `waiting` | `watcher`'s link (`Down`, `Up`, `BackingOff`) |
/// | `need_round`, `sync_next` | `need`: `ROUND`, `SYNC` |
/// | `not_ready`, `reported_not_ready` | `readiness`: `Ready`, `NotReady`, `Reported` |
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ConfigReader {
    config: ReaderConfig,
    watcher: Watcher,
    ready_watch: Option<OpId>,
    watches: Vec<Option<OpId>>,
    missing: Vec<bool>,
    round: Option<Round>,
    need: Need,
    readiness: Readiness,
    last: Option<Vec<(i64, i64)>>,
    kit: Kit<ReadOpKind, ReaderEvent>,
}

impl ConfigReader {
    /// A reader that does nothing until [`start`](Self::start).
    pub fn new(config: ReaderConfig) -> Self {
        let n = config.paths.len();
        // In the ready mode nothing is ready until a round has seen `ready`.
        let readiness = if config.mode == ConfigMode::ReadyNode {
            Readiness::NotReady
        } else {
            Readiness::Ready
        };
        ConfigReader {
            config,
            watcher: Watcher::default(),
            ready_watch: None,
            watches: alloc::vec![None; n],
            missing: alloc::vec![false; n],
            round: None,
            need: Need::default(),
            readiness,
            last: None,
            kit: Kit::default(),
        }
    }

    /// The configuration read.
    pub fn config(&self) -> &ReaderConfig {
        &self.config
    }

    /// Has it ended?
    pub fn has_ended(&self) -> bool {
        self.watcher.is_done()
    }

    /// Nothing to do until a notification, a session change or a command: the last
    /// round completed and its result was reported (or was the same as the last one).
    pub fn is_idle(&self) -> bool {
        self.watcher.is_running()
            && self.watcher.is_live()
            && self.round.is_none()
            && !self.need.has(ROUND)
    }

    /// `ready` existed at the last completed round (always, in the multi mode).
    pub fn is_ready(&self) -> bool {
        self.readiness == Readiness::Ready
    }

    watcher_calls!(ReaderEvent, "reading"; ask_round);

    /// Reads again now (after `sync` if [`sync_first`](ReaderConfig::sync_first)): for
    /// a reader told by another channel that the configuration changed.
    pub fn refresh(&mut self, now: Instant) {
        if self.watcher.is_running() {
            self.need.add(ROUND);
            self.drive(now);
        }
    }

    fn valid(&self) -> Result<(), Error> {
        let ready =
            (self.config.mode == ConfigMode::ReadyNode).then_some(self.config.ready.as_str());
        check_paths(self.config.paths.iter().map(|p| p.as_str()).chain(ready))
    }

    /// A round to read.
    fn ask_round(&mut self) {
        self.need.add(ROUND);
    }

    fn finish(&mut self, e: ReaderEvent) {
        self.watcher.end();
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
        if self.round.is_some() || !self.need.has(ROUND) || !self.watcher.gate(&self.kit, now) {
            return;
        }
        self.need.take(ROUND);
        let n = self.config.paths.len();
        let mut round = Round {
            pending: 0,
            ready: None,
            values: alloc::vec![None; n],
            spoiled: false,
            failed: false,
        };
        if self.need.take(SYNC) || self.config.sync_first {
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
        round.pending += self.send_reads();
        self.round = Some(round);
    }

    /// The round's reads of the nodes (and the `exists` watches they need): how many
    /// requests were sent.
    fn send_reads(&mut self) -> usize {
        let mut sent = 0;
        let multi = !self.ready_mode();
        for i in 0..self.config.paths.len() {
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
                sent += 1;
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
                sent += 1;
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
            sent += 1;
        }
        sent
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

    fn on_purpose(&mut self, op: OpId, kind: ReadOpKind, result: Reply) {
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
            ReadOpKind::Read(i) => self.on_read(op, i, result),
            ReadOpKind::MultiRead => self.on_multi_read(result),
        }
    }

    fn on_read(&mut self, op: OpId, i: usize, result: Reply) {
        match result {
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
        }
    }

    fn on_multi_read(&mut self, result: Reply) {
        match result {
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
        }
    }

    fn complete(&mut self, now: Instant) {
        let Some(round) = self.round.take() else {
            return;
        };
        if round.failed {
            self.need.add(ROUND);
            self.need.add(SYNC);
            self.kit.failed(now);
            return;
        }
        self.kit.succeeded();
        if round.spoiled {
            self.need.add(ROUND);
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
                _ => return self.not_ready(),
            }
        }
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
        self.readiness = Readiness::Ready;
        if self.last.as_ref() != Some(&key) {
            self.last = Some(key);
            self.kit.emit(ReaderEvent::Snapshot(ConfigSnapshot {
                values,
                versions,
                zxid,
            }));
        }
    }
}

impl ConfigReader {
    /// `ready` is missing: what was read before must not be combined with what comes
    /// next; `NotReady` is reported once until the next snapshot.
    fn not_ready(&mut self) {
        self.last = None;
        if self.readiness != Readiness::Reported {
            self.readiness = Readiness::Reported;
            self.kit.emit(ReaderEvent::NotReady);
        }
    }
}

impl ConfigReader {
    /// The answer to request `op`, sent for `kind` (`on_reply`: `protocol_head!`).
    fn on_answer(&mut self, now: Instant, op: OpId, kind: ReadOpKind, result: Reply) {
        if self.watcher.is_done() {
            return;
        }
        self.on_purpose(op, kind, result);
        if let Some(r) = &mut self.round {
            r.pending = r.pending.saturating_sub(1);
            if r.pending == 0 {
                self.complete(now);
            }
        }
        self.drive(now);
    }

    /// A notification of a watch of ours (`on_watch`: `watcher_protocol!`): false if it
    /// is not one we hold.
    fn on_notice(&mut self, op: OpId, event: &WatchEvent) -> bool {
        if self.ready_watch == Some(op) {
            self.ready_watch = None;
            if let Some(r) = &mut self.round {
                r.spoiled = true;
            }
            if event.event_type == EventType::NodeDeleted {
                self.not_ready();
            }
            self.need.add(ROUND);
        } else if let Some(i) = self.watches.iter().position(|w| *w == Some(op)) {
            self.watches[i] = None;
            if let Some(r) = &mut self.round {
                r.spoiled = true;
            }
            if event.event_type == EventType::NodeDeleted {
                self.missing[i] = true;
            }
            // While `ready` is missing, its creation starts the next round.
            if !(self.ready_mode() && self.readiness != Readiness::Ready) {
                self.need.add(ROUND);
            }
        } else {
            return false;
        }
        true
    }

    /// A session is back (`on_session`: `watcher_protocol!`).
    fn on_resync(&mut self, _: bool) {
        // No `Suspended` to answer: the reader reports rounds only.
        self.watcher.resume();
        // A reconnect may land on a lagging server: sync, then read.
        self.need.add(SYNC);
        self.need.add(ROUND);
    }

    /// The reader reports rounds only, not the session's state.
    fn on_suspend(&mut self) {}

    /// The session expired: its round and watches went with it.
    fn forget(&mut self) {
        self.round = None;
        self.ready_watch = None;
        self.watches.iter_mut().for_each(|w| *w = None);
    }
}

impl Protocol for ConfigReader {
    protocol_head!(ReaderEvent, take);

    watcher_protocol!(ReaderEvent);

    fn check(&self) {
        debug_assert!(
            self.watches.len() == self.config.paths.len()
                && self.missing.len() == self.config.paths.len(),
            "one watch and one missing flag per path"
        );
        debug_assert!(
            self.watcher.is_live() || (self.round.is_none() && self.kit.is_quiet()),
            "without a session no round is under way"
        );
        debug_assert!(
            !self.watcher.is_done() || (self.round.is_none() && self.ready_watch.is_none()),
            "an ended reader reads and watches nothing"
        );
        debug_assert!(
            self.readiness == Readiness::Ready || self.ready_mode(),
            "only the ready mode is ever not ready"
        );
    }
}
