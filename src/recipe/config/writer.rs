//! The configuration writer: one write, in the ready mode or as one `multi`.

use alloc::collections::BTreeSet;
use alloc::string::{String, ToString};
use alloc::vec::Vec;
use bytes::{Bytes, BytesMut};

use super::mode::{check_paths, ConfigMode, MAX_MULTI_ROUNDS};
use crate::error::Error;
use crate::proto::*;
use crate::recipe::kit::{protocol_head, Kit, Protocol, Reply, MAX_PARENT_ROUNDS};
use crate::recipe::path::{ancestor_creates, ancestor_result};
use crate::recipe::watcher::{link_protocol, Link};
use crate::recipe::{OpId, SessionChange};
use crate::time::Instant;

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

/// Writes one configuration; see the [module docs](super).
///
/// | before | after |
/// | --- | --- |
/// | `live`, `waiting` | `link` (`Down`, `Up`, `BackingOff`), as the watchers' |
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
    link: Link,
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
            link: Link::Down,
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

    /// Ends with `e`, once: a writer that ended reports nothing more.
    fn finish(&mut self, e: WriterEvent) {
        self.kit.clear_requests();
        self.kit.end(&mut self.stage, Stage::Done, e);
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
        if matches!(self.stage, Stage::Idle | Stage::Done) || !self.link.gate(&self.kit, now) {
            return;
        }
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
                self.send_writes();
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
            Stage::Multi => self.send_multi(),
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

    /// The ready mode's batch: a set or a create (with its parents) for each item not
    /// sent or applied yet.
    fn send_writes(&mut self) {
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
    }

    /// The multi mode's batch: the parents still missing, then the `multi`.
    fn send_multi(&mut self) {
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

    fn on_purpose(&mut self, now: Instant, op: WriteOp, result: Reply) {
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
            WriteOp::Create(i, with_parents) => self.on_create(now, i, with_parents, result),
            WriteOp::CreateReady(with_parents) => self.on_create_ready(now, with_parents, result),
            WriteOp::Multi => self.on_multi(now, result),
            WriteOp::Probe(i) => match result {
                Ok(_) => self.items[i] = Item::Set,
                Err(Error::Server(ErrorCode::NoNode)) => self.items[i] = Item::Parents,
                Err(e) if e.is_retryable() => self.retryable(now),
                Err(e) if e.ends_session() => {}
                Err(e) => self.fail(e),
            },
        }
    }

    fn on_create(&mut self, now: Instant, i: usize, with_parents: bool, result: Reply) {
        match result {
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
        }
    }

    fn on_create_ready(&mut self, now: Instant, with_parents: bool, result: Reply) {
        match result {
            Ok(_) | Err(Error::Server(ErrorCode::NodeExists)) => self.finish(WriterEvent::Written),
            Err(Error::Server(ErrorCode::NoNode)) if !with_parents || self.again => {
                self.ready_parents = true;
            }
            Err(Error::Server(ErrorCode::NoNode)) => {
                if self.ready_parent_rounds >= MAX_PARENT_ROUNDS || self.parent_error.is_some() {
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
        }
    }

    fn on_multi(&mut self, now: Instant, result: Reply) {
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
}

impl ConfigWriter {
    /// The answer to request `op`, sent for `purpose` (`on_reply`: `protocol_head!`).
    fn on_answer(&mut self, now: Instant, _op: OpId, purpose: WriteOp, result: Reply) {
        if self.stage == Stage::Done {
            return;
        }
        let probe = matches!(purpose, WriteOp::Probe(_));
        if probe && result.is_err() && result != Err(Error::Server(ErrorCode::NoNode)) {
            self.probe_failed = true;
        }
        self.on_purpose(now, purpose, result);
        if probe && self.stage == Stage::Probe && self.kit.is_quiet() {
            if core::mem::take(&mut self.probe_failed) {
                // Not every node was probed: probe again (drive resends).
            } else {
                self.stage = Stage::Multi;
            }
        }
        self.drive(now);
    }
}

impl Protocol for ConfigWriter {
    protocol_head!(WriterEvent, take);

    fn on_session(&mut self, now: Instant, change: SessionChange) {
        if matches!(self.stage, Stage::Done) {
            return;
        }
        match change {
            SessionChange::Connected { .. } | SessionChange::Reconnected { .. } => {
                self.link.up();
            }
            SessionChange::Suspended => {}
            SessionChange::Expired => {
                // Every request was answered (failed); resend what is not known applied.
                self.kit.clear_requests();
                self.link.down();
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

    link_protocol!(stage == Stage::Done);

    fn on_abandon(&mut self, _now: Instant) {
        self.fail(Error::Finished);
    }

    fn check(&self) {
        debug_assert!(
            self.items.len() == self.updates.len()
                && self.parent_rounds.len() == self.updates.len(),
            "one item and one parent count per update"
        );
        debug_assert!(
            self.parent_rounds.iter().all(|r| *r <= MAX_PARENT_ROUNDS)
                && self.ready_parent_rounds <= MAX_PARENT_ROUNDS
                && self.multi_rounds <= MAX_MULTI_ROUNDS,
            "the rounds stay bounded"
        );
        debug_assert!(
            self.stage != Stage::Done || self.kit.is_quiet(),
            "an ended write sends nothing"
        );
    }
}
