//! The queue producer: pipelined, batched, duplicate-free puts.
//!
//! # Protocol
//!
//! Puts queue up locally and go out in batches: one `multi` per batch holding
//! `setData(<meta>/p-<id>, version = n - 1)` (the batch number `n` chained on our
//! marker, see the [module docs](super)) and one sequential `create` per item. A batch
//! does not wait for the previous one's reply: up to [`ProducerConfig::max_in_flight`]
//! items are on the wire at once (ZooKeeper applies one session's requests in order),
//! and whatever queued up while the window was full goes out as the next batch — low
//! latency when idle, large batches under load. The first batch of a session creates
//! the marker (ephemeral) in the same transaction, and nothing is pipelined behind it:
//! a marker of the same name left by our previous session (expired by the client's
//! estimate, not yet by the server) must not let a chained batch apply out of order.
//!
//! # Failures
//!
//! When a batch fails, later batches fail too (their versioned `setData` no longer
//! matches); once every batch in flight has answered, the producer decides:
//!
//! * connection lost (the batch may have been applied): after `Reconnected`, `sync` and
//!   `exists(marker)`: batches numbered up to the marker's version were applied (each of
//!   their items is reported [`Put`](ProducerEvent::Put) with `node: None`), the others
//!   are sent again, in order. No duplicate, no loss.
//! * the queue directory or the side directory is missing: both are created (the queue's
//!   persistent, the side directory and the ancestors as containers) and the batches
//!   sent again; at most twice, then
//!   [`Error::NoParent`] / [`Error::ChrootMissing`].
//! * a refusal (too many requests pending, throttled): sent again after a backoff.
//! * a final error (no permission, an item too large): its batch's puts fail.
//! * session expired: puts whose batch was in flight fail with `may_have_applied: true`
//!   (the marker went with the session: their fate cannot be known); puts not yet sent
//!   go out in the next session.
//!
//! # Commands and events
//!
//! [`put`](Producer::put) answers a [`PutId`] at once (or refuses: bounds, bad
//! priority, closed); exactly one [`ProducerEvent::Put`] or
//! [`ProducerEvent::PutFailed`] follows for it. [`close`](Producer::close) sends what is
//! queued, waits for every answer, deletes the marker and reports
//! [`ProducerEvent::Closed`].

use alloc::collections::VecDeque;
use alloc::string::{String, ToString};
use alloc::vec::Vec;
use bytes::Bytes;

use super::names::{item_prefix, meta_dir, Format, DEFAULT_PRIORITY, MAX_PRIORITY};
use super::state::{in_doubt, marker_ops, Life, Marker, Mine, Parents};
use crate::client::ops::{delete, exists};
use crate::error::Error;
use crate::proto::*;
use crate::recipe::kit::{
    join, name_of, protocol_head, timeout_drives, valid_path, Kit, Protocol, Reply,
};
use crate::recipe::path::ancestor_result;
use crate::recipe::{OpId, SessionChange};
use crate::time::Instant;

/// Names one put.
pub type PutId = u64;

/// How to produce.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ProducerConfig {
    /// The queue directory.
    pub dir: String,
    /// The side directory for our marker ([`super::meta_dir`] by default).
    pub meta_dir: String,
    /// A fresh unique id (a UUID string from the driver's entropy): names our marker.
    pub id: String,
    /// FIFO (`qn-`) or priority (`entry-ppp-`) names.
    pub format: Format,
    /// Items vanish with our session (`EPHEMERAL_SEQUENTIAL`). Off by default.
    pub ephemeral: bool,
    /// ACL of items, the marker and parents we create.
    pub acl: Vec<Acl>,
    /// Items on the wire at once (default 10,000).
    pub max_in_flight: usize,
    /// Batches on the wire at once (default 4): puts made while they are all out wait
    /// and go together as the next batch, so batches grow with the load.
    pub max_batches_in_flight: usize,
    /// Items per batch (default 512).
    pub max_batch: usize,
    /// Data bytes per batch (default 256 KiB; an item larger than this goes alone).
    pub max_batch_bytes: usize,
    /// Puts queued locally, not yet sent (default 100,000); more are refused.
    pub max_queued: usize,
}

impl ProducerConfig {
    /// FIFO, persistent items, open ACL, default bounds.
    pub fn new(dir: &str, id: &str) -> Self {
        ProducerConfig {
            dir: dir.into(),
            meta_dir: meta_dir(dir),
            id: id.into(),
            format: Format::Fifo,
            ephemeral: false,
            acl: Acl::open_unsafe(),
            max_in_flight: 10_000,
            max_batches_in_flight: 4,
            max_batch: 512,
            max_batch_bytes: 256 * 1024,
            max_queued: 100_000,
        }
    }
}

/// What a producer reports.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ProducerEvent {
    /// The item is in the queue.
    Put {
        /// Which put.
        id: PutId,
        /// The item's name, when the server's answer arrived (`None` when the put was
        /// confirmed by recovery after a lost reply).
        node: Option<String>,
    },
    /// The put failed.
    PutFailed {
        /// Which put.
        id: PutId,
        /// Why.
        error: Error,
        /// The item may be in the queue all the same (the session ended while its
        /// batch was in flight).
        may_have_applied: bool,
    },
    /// Closed: every put was answered, the marker is gone. Nothing follows.
    Closed,
}

impl ProducerEvent {
    /// For a caller waiting on put `id`: `Some` when this event answers it.
    pub fn put_outcome(&self, id: PutId) -> Option<Result<Option<String>, Error>> {
        match self {
            ProducerEvent::Put { id: i, node } if *i == id => Some(Ok(node.clone())),
            ProducerEvent::PutFailed { id: i, error, .. } if *i == id => Some(Err(error.clone())),
            _ => None,
        }
    }
}

/// Follows a run of consecutive puts (as one command makes them) to their outcomes:
/// what both adapters wait for, decided once.
///
/// ```
/// use zk_recipes::recipe::queue::producer::{ProducerEvent, PutsWait};
/// let mut w = PutsWait::new(5, 2);
/// assert_eq!(w.feed(&ProducerEvent::Put { id: 6, node: None }), None);
/// assert_eq!(w.feed(&ProducerEvent::Put { id: 5, node: Some("qn-0000000001".into()) }),
///            Some(Ok(vec![Some("qn-0000000001".into()), None])));
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct PutsWait {
    first: PutId,
    nodes: Vec<Option<String>>,
    answered: Vec<bool>,
    left: usize,
    error: Option<Error>,
}

impl PutsWait {
    /// Waits for puts `first .. first + n`.
    pub fn new(first: PutId, n: usize) -> Self {
        PutsWait {
            first,
            nodes: alloc::vec![None; n],
            answered: alloc::vec![false; n],
            left: n,
            error: None,
        }
    }

    /// Folds one event in; `Some` once every put is answered: the item names (`None`
    /// where only recovery confirmed the put), or the first error (the other puts may
    /// have succeeded). `Closed` ends the wait at once.
    pub fn feed(&mut self, event: &ProducerEvent) -> Option<Result<Vec<Option<String>>, Error>> {
        let (id, outcome) = match event {
            ProducerEvent::Put { id, node } => (*id, Ok(node.clone())),
            ProducerEvent::PutFailed {
                id,
                error,
                may_have_applied,
            } => (
                *id,
                Err(if *may_have_applied {
                    in_doubt(error)
                } else {
                    error.clone()
                }),
            ),
            ProducerEvent::Closed => return Some(Err(self.error.clone().unwrap_or(Error::Closed))),
        };
        let at = usize::try_from(id.checked_sub(self.first)?).ok()?;
        if at >= self.nodes.len() || self.answered[at] {
            return None;
        }
        self.answered[at] = true;
        self.left -= 1;
        match outcome {
            Ok(node) => self.nodes[at] = node,
            Err(e) => {
                self.error.get_or_insert(e);
            }
        }
        if self.left > 0 {
            return None;
        }
        Some(match self.error.clone() {
            Some(e) => Err(e),
            None => Ok(core::mem::take(&mut self.nodes)),
        })
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct PutItem {
    id: PutId,
    data: Bytes,
    priority: u16,
    /// A delay item's time (Unix ms); 0 in the other formats.
    ready_at: u64,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum Fail {
    /// May have been applied.
    Doubt,
    /// Not applied; send again.
    Again,
    /// Not applied; the parents are missing.
    Parents,
    /// Not applied; the marker is not as we think.
    Marker,
    /// Not applied, never will be.
    Final(Error),
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct Batch {
    no: u32,
    items: Vec<PutItem>,
    creates_marker: bool,
    fail: Option<Fail>,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum Purpose {
    Batch(u32),
    Parent(String),
    Sync,
    ReadMarker,
    DeleteMarker,
}

impl Purpose {
    fn is_parent(&self) -> bool {
        matches!(self, Purpose::Parent(_))
    }
}

/// Batches on the wire at once.
const MAX_BATCHES: usize = 64;

/// The producer state machine; see the [module docs](self).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Producer {
    config: ProducerConfig,
    /// Our marker (absent, or there with the number of batches applied since it was
    /// created: its version), and the session we work in.
    mine: Mine,
    next_id: PutId,
    pending: VecDeque<PutItem>,
    in_flight: VecDeque<Batch>,
    items_in_flight: usize,
    /// Failed batches waiting for the others to answer, in order.
    failed: Vec<Batch>,
    /// A batch of this marker lifetime was confirmed applied.
    marker_used: bool,
    parents: Parents,
    life: Life,
    kit: Kit<Purpose, ProducerEvent>,
}

impl Producer {
    /// A producer; puts wait for the session's `Connected`.
    pub fn new(config: ProducerConfig) -> Self {
        Producer {
            mine: Mine::new(&config.meta_dir, "p-", &config.id),
            config,
            next_id: 1,
            pending: VecDeque::new(),
            in_flight: VecDeque::new(),
            items_in_flight: 0,
            failed: Vec::new(),
            marker_used: false,
            parents: Parents::default(),
            life: Life::Open,
            kit: Kit::default(),
        }
    }

    /// The configuration.
    pub fn config(&self) -> &ProducerConfig {
        &self.config
    }

    /// Our marker's path.
    pub fn marker(&self) -> &str {
        &self.mine.path
    }

    /// Puts not yet answered (queued or in flight).
    pub fn outstanding(&self) -> usize {
        self.pending.len()
            + self.items_in_flight
            + self.failed.iter().map(|b| b.items.len()).sum::<usize>()
    }

    /// Has the producer ended?
    pub fn has_ended(&self) -> bool {
        self.life == Life::Ended
    }

    /// Puts `data` (priority [`DEFAULT_PRIORITY`] in a priority queue; takeable at once
    /// in a delay queue).
    pub fn put(&mut self, now: Instant, data: Bytes) -> Result<PutId, Error> {
        self.put_with_priority(now, data, DEFAULT_PRIORITY)
    }

    /// Puts `data` with `priority` (0..=999, lower first; ignored by FIFO queues).
    /// Refused at once when the producer is closing, `max_queued` puts wait already
    /// ([`Error::Overloaded`]), or the priority is out of range.
    pub fn put_with_priority(
        &mut self,
        now: Instant,
        data: Bytes,
        priority: u16,
    ) -> Result<PutId, Error> {
        self.enqueue(now, data, priority, 0)
    }

    /// Puts `data` into a delay queue ([`Format::Delay`]), takeable from `ready_at_ms`
    /// (milliseconds since the Unix epoch) on; see
    /// [`delay_queue`](crate::recipe::delay_queue). Refused as
    /// [`put_with_priority`](Self::put_with_priority) is, and with `BadArguments` when
    /// the producer's format is not `Delay` or the time is past Java's `long`.
    pub fn put_at(&mut self, now: Instant, data: Bytes, ready_at_ms: u64) -> Result<PutId, Error> {
        if self.config.format != Format::Delay || ready_at_ms > super::delay::MAX_READY_AT {
            return Err(Error::Server(ErrorCode::BadArguments));
        }
        self.enqueue(now, data, DEFAULT_PRIORITY, ready_at_ms)
    }

    fn enqueue(
        &mut self,
        now: Instant,
        data: Bytes,
        priority: u16,
        ready_at: u64,
    ) -> Result<PutId, Error> {
        if self.life != Life::Open {
            return Err(Error::Closed);
        }
        if priority > MAX_PRIORITY {
            return Err(Error::Server(ErrorCode::BadArguments));
        }
        valid_path(&self.config.dir)?;
        if self.pending.len() >= self.config.max_queued {
            return Err(Error::Overloaded);
        }
        let id = self.next_id;
        self.next_id += 1;
        // A delay item's data is Curator's frame of it.
        let data = match self.config.format {
            Format::Delay => super::delay::frame(&data),
            _ => data,
        };
        self.pending.push_back(PutItem {
            id,
            data,
            priority,
            ready_at,
        });
        self.drive(now);
        Ok(id)
    }

    /// Sends what is queued, waits for every answer, deletes the marker, then reports
    /// [`ProducerEvent::Closed`].
    pub fn close(&mut self, now: Instant) {
        if self.life == Life::Open {
            self.life = Life::Closing { deleting: false };
        }
        self.drive(now);
    }

    fn emit(&mut self, e: ProducerEvent) {
        self.kit.emit(e);
    }

    fn can_send(&self, now: Instant) -> bool {
        self.mine.in_session()
            && self.kit.allows(now)
            && self.failed.is_empty()
            && !self.reading_marker()
            && !self.deleting_marker()
    }

    /// Resolving failed batches: the marker's read is on the wire.
    fn reading_marker(&self) -> bool {
        self.kit.any(|p| *p == Purpose::ReadMarker)
    }

    fn deleting_marker(&self) -> bool {
        self.life == (Life::Closing { deleting: true })
    }

    fn drive(&mut self, now: Instant) {
        if self.life == Life::Ended {
            return;
        }
        if !self.failed.is_empty() && self.in_flight.is_empty() {
            self.resolve(now);
        }
        if self.can_send(now) {
            let dirs = (&*self.config.dir, &*self.config.meta_dir, &*self.config.acl);
            self.parents
                .send_round(&mut self.kit, dirs, Purpose::Parent, Purpose::is_parent);
        }
        // Nothing is chained behind a batch that creates the marker: a marker of the
        // same name left by our previous session (expired by our estimate, not yet by
        // the server) could match the chained version and apply it out of order.
        while self.can_send(now)
            && !self.pending.is_empty()
            && (self.mine.present() || self.in_flight.is_empty())
            && self.items_in_flight < self.config.max_in_flight.max(1)
            && self.in_flight.len() < self.config.max_batches_in_flight.clamp(1, MAX_BATCHES)
        {
            self.send_batch();
        }
        if self.life == (Life::Closing { deleting: false })
            && self.pending.is_empty()
            && self.in_flight.is_empty()
            && self.failed.is_empty()
            && !self.reading_marker()
        {
            let present = self.mine.present();
            if present && self.mine.in_session() && self.kit.allows(now) {
                self.life = Life::Closing { deleting: true };
                self.kit
                    .send(Purpose::DeleteMarker, delete(&self.mine.path, None));
            } else if !present || !self.mine.in_session() {
                self.end();
            }
        }
    }

    fn end(&mut self) {
        if self.life != Life::Ended {
            self.life = Life::Ended;
            for item in core::mem::take(&mut self.pending) {
                self.kit.emit(ProducerEvent::PutFailed {
                    id: item.id,
                    error: Error::Closed,
                    may_have_applied: false,
                });
            }
            self.emit(ProducerEvent::Closed);
        }
    }

    fn send_batch(&mut self) {
        let room = self
            .config
            .max_in_flight
            .max(1)
            .saturating_sub(self.items_in_flight)
            .clamp(1, self.config.max_batch.max(1));
        let mut items = Vec::new();
        let mut bytes = 0usize;
        while let Some(first) = self.pending.front() {
            if items.len() >= room
                || (!items.is_empty() && bytes + first.data.len() > self.config.max_batch_bytes)
            {
                break;
            }
            bytes += first.data.len();
            if let Some(item) = self.pending.pop_front() {
                items.push(item);
            }
        }
        let no = self.mine.marker.applied() + self.in_flight.len() as u32 + 1;
        let creates_marker = !self.mine.present() && self.in_flight.is_empty();
        let mut ops = marker_ops(
            &self.mine.path,
            &self.config.acl,
            creates_marker,
            (no.wrapping_sub(1)) as i32,
            items.len(),
        );
        let mode = if self.config.ephemeral {
            CreateMode::EphemeralSequential
        } else {
            CreateMode::PersistentSequential
        };
        for item in &items {
            let prefix = match self.config.format {
                Format::Delay => super::delay::item_prefix(item.ready_at),
                format => item_prefix(format, item.priority),
            };
            let path = join(&self.config.dir, &prefix);
            ops.push(MultiOp::Create(CreateRequest::new(
                path,
                item.data.clone(),
                self.config.acl.clone(),
                mode,
            )));
        }
        self.items_in_flight += items.len();
        self.kit.send(Purpose::Batch(no), Request::Multi(ops));
        self.in_flight.push_back(Batch {
            no,
            items,
            creates_marker,
            fail: None,
        });
    }

    /// Every batch in flight has answered and some failed: decide.
    fn resolve(&mut self, now: Instant) {
        if self.reading_marker() {
            return;
        }
        let needs_read = self
            .failed
            .iter()
            .any(|b| matches!(b.fail, Some(Fail::Doubt) | Some(Fail::Marker)));
        if needs_read {
            if !self.mine.in_session() || !self.kit.allows(now) {
                return;
            }
            self.kit.sync(Purpose::Sync, &self.config.meta_dir);
            self.kit
                .send(Purpose::ReadMarker, exists(&self.mine.path, false));
            return;
        }
        // Nothing in doubt: the marker is as we know it.
        self.settle(self.mine.marker);
    }

    /// The marker's state is known (`found`): report applied batches, fail final ones,
    /// queue the rest again in order.
    fn settle(&mut self, found: Marker) {
        let (present, version) = (found != Marker::Absent, found.applied());
        let lost_marker = !present && self.marker_used;
        let mut again: Vec<PutItem> = Vec::new();
        for batch in core::mem::take(&mut self.failed) {
            let applied = present && version >= batch.no;
            match batch.fail {
                Some(Fail::Doubt) if applied => {
                    for item in batch.items {
                        self.kit.emit(ProducerEvent::Put {
                            id: item.id,
                            node: None,
                        });
                    }
                }
                Some(Fail::Doubt) if lost_marker => {
                    // Our marker vanished under us: the fate of these is unknowable.
                    for item in batch.items {
                        self.kit.emit(ProducerEvent::PutFailed {
                            id: item.id,
                            error: Error::ConnectionLoss,
                            may_have_applied: true,
                        });
                    }
                }
                Some(Fail::Final(e)) => {
                    for item in batch.items {
                        self.kit.emit(ProducerEvent::PutFailed {
                            id: item.id,
                            error: e.clone(),
                            may_have_applied: false,
                        });
                    }
                }
                _ => again.extend(batch.items),
            }
        }
        if lost_marker || !present {
            self.marker_used = false;
        }
        self.mine.marker = found;
        for item in again.into_iter().rev() {
            self.pending.push_front(item);
        }
    }

    fn on_batch(&mut self, now: Instant, no: u32, result: Reply) {
        let Some(at) = self.in_flight.iter().position(|b| b.no == no) else {
            return;
        };
        let Some(mut batch) = self.in_flight.remove(at) else {
            return;
        };
        self.items_in_flight = self.items_in_flight.saturating_sub(batch.items.len());
        let failure = multi_failure(&result);
        match (&result, failure) {
            (Ok(Response::Multi(results)), None) => {
                self.kit.succeeded();
                self.parents.rounds = 0;
                self.parents.error = None;
                self.mine.marker = Marker::Present(self.mine.marker.applied().max(no));
                self.marker_used = true;
                let skip = if batch.creates_marker { 2 } else { 1 };
                for (i, item) in batch.items.into_iter().enumerate() {
                    let node = match results.get(skip + i) {
                        Some(MultiResult::Create(p))
                        | Some(MultiResult::Create2 { path: p, .. }) => {
                            Some(name_of(p).to_string())
                        }
                        _ => None,
                    };
                    self.kit.emit(ProducerEvent::Put { id: item.id, node });
                }
                return;
            }
            (_, Some((i, code))) => {
                let marker_ops = if batch.creates_marker { 2 } else { 1 };
                batch.fail = Some(match code {
                    ErrorCode::NoNode if batch.creates_marker && i == 0 => Fail::Parents,
                    ErrorCode::NoNode if i >= marker_ops => Fail::Parents,
                    ErrorCode::NoNode | ErrorCode::BadVersion | ErrorCode::NodeExists => {
                        Fail::Marker
                    }
                    c => Fail::Final(Error::Server(c)),
                });
                if batch.fail == Some(Fail::Parents) {
                    if self.parents.done() {
                        let e = self.parents.error.clone().unwrap_or_else(|| {
                            ancestor_result(
                                &self.config.dir,
                                &Err(Error::Server(ErrorCode::NoNode)),
                            )
                            .unwrap_or(Error::Server(ErrorCode::NoNode))
                        });
                        batch.fail = Some(Fail::Final(e));
                    } else {
                        self.parents.need = true;
                    }
                }
            }
            (Err(e), None) if e.may_have_applied() || e.ends_session() => {
                // Resolved once connected again (the marker read waits for it).
                self.kit.failed(now);
                batch.fail = Some(Fail::Doubt);
            }
            (Err(e), None) if e.is_retryable() => {
                self.kit.failed(now);
                batch.fail = Some(Fail::Again);
            }
            (Err(e), None) => batch.fail = Some(Fail::Final(e.clone())),
            (Ok(_), None) => batch.fail = Some(Fail::Final(Error::UnexpectedReply)),
        }
        self.failed.push(batch);
        self.failed.sort_by_key(|b| b.no);
    }

    fn on_read_marker(&mut self, now: Instant, result: Reply) {
        match self.mine.read(&mut self.kit, now, result) {
            Ok(found) => self.settle(found),
            Err(e) if e.is_retryable() => self.kit.failed(now),
            Err(e) if e.ends_session() => {}
            Err(e) => {
                for b in &mut self.failed {
                    if b.fail == Some(Fail::Doubt) {
                        b.fail = Some(Fail::Final(e.clone()));
                    }
                }
                self.settle(Marker::Absent);
            }
        }
    }

    fn on_session_end(&mut self, error: Error, terminal: bool) {
        self.kit.clear_requests();
        self.life.delete_over();
        self.parents.need = false;
        let mut batches: Vec<Batch> = core::mem::take(&mut self.failed);
        batches.extend(self.in_flight.drain(..));
        batches.sort_by_key(|b| b.no);
        self.items_in_flight = 0;
        let mut again = Vec::new();
        for b in batches {
            let doubt = matches!(b.fail, None | Some(Fail::Doubt));
            if doubt || terminal {
                for item in b.items {
                    self.kit.emit(ProducerEvent::PutFailed {
                        id: item.id,
                        error: error.clone(),
                        may_have_applied: doubt,
                    });
                }
            } else if let Some(Fail::Final(e)) = b.fail {
                for item in b.items {
                    self.kit.emit(ProducerEvent::PutFailed {
                        id: item.id,
                        error: e.clone(),
                        may_have_applied: false,
                    });
                }
            } else {
                again.extend(b.items);
            }
        }
        for item in again.into_iter().rev() {
            self.pending.push_front(item);
        }
        self.mine.end_session();
        self.marker_used = false;
        if terminal {
            for item in core::mem::take(&mut self.pending) {
                self.kit.emit(ProducerEvent::PutFailed {
                    id: item.id,
                    error: error.clone(),
                    may_have_applied: false,
                });
            }
            self.life = Life::Ended;
            self.emit(ProducerEvent::Closed);
        }
    }
}

impl Producer {
    /// The answer to request `op`, sent for `purpose` (`on_reply`: `protocol_head!`).
    fn on_answer(&mut self, now: Instant, _op: OpId, purpose: Purpose, result: Reply) {
        // A read behind a failed sync reads as lost (`Outbox::answer`): read again.
        match purpose {
            Purpose::Batch(no) => self.on_batch(now, no, result),
            Purpose::Parent(p) => self.parents.answered(&mut self.kit, now, &p, &result),
            Purpose::Sync => {}
            Purpose::ReadMarker => self.on_read_marker(now, result),
            Purpose::DeleteMarker => {
                self.life.delete_over();
                if self.mine.deleted(&mut self.kit, now, &result) {
                    self.end();
                }
            }
        }
        self.drive(now);
    }
}

impl Protocol for Producer {
    protocol_head!(ProducerEvent, answer);

    fn on_session(&mut self, now: Instant, change: SessionChange) {
        if let Some((error, terminal)) = self.mine.follow_session(change) {
            self.on_session_end(error, terminal);
        }
        self.drive(now);
    }

    timeout_drives!();

    fn on_abandon(&mut self, now: Instant) {
        // The owner is gone: nobody waits for the queued puts; what is on the wire ends.
        self.pending.clear();
        self.close(now);
    }

    fn deadline(&self) -> Option<Instant> {
        if self.life == Life::Ended {
            return None;
        }
        // Only what could go out but for the backoff waits on it: queued puts with room
        // on the wire, failed batches to resolve, parents, the marker's delete. A
        // producer waiting for replies has no deadline (the backoff's may be past).
        let room = !self.pending.is_empty()
            && self.failed.is_empty()
            && self.items_in_flight < self.config.max_in_flight.max(1)
            && self.in_flight.len() < self.config.max_batches_in_flight.clamp(1, MAX_BATCHES)
            && (self.mine.present() || self.in_flight.is_empty());
        let closing = self.life != Life::Open;
        let waiting = self.mine.in_session()
            && !self.reading_marker()
            && !self.deleting_marker()
            && (room
                || (!self.failed.is_empty() && self.in_flight.is_empty())
                || (self.parents.due(&self.kit, Purpose::is_parent) && self.failed.is_empty())
                || (closing && self.mine.present() && self.in_flight.is_empty()));
        self.kit.timeout(None, waiting)
    }

    fn finished(&self) -> bool {
        self.life == Life::Ended && self.kit.is_idle()
    }

    fn check(&self) {
        let items: usize = self.in_flight.iter().map(|b| b.items.len()).sum();
        debug_assert_eq!(self.items_in_flight, items, "items on the wire counted");
        debug_assert!(
            self.failed.windows(2).all(|w| w[0].no <= w[1].no),
            "failed batches in order"
        );
        debug_assert!(
            self.in_flight.iter().all(|b| b.fail.is_none()),
            "a batch on the wire has not failed"
        );
        debug_assert!(
            !self.reading_marker() || self.in_flight.is_empty(),
            "nothing goes out while failed batches are resolved"
        );
        debug_assert!(
            !self.deleting_marker() || self.kit.any(|p| *p == Purpose::DeleteMarker),
            "deleting the marker: its delete is on the wire"
        );
        if self.life == Life::Ended {
            debug_assert!(self.pending.is_empty(), "nothing queued once ended");
        }
        if self.marker_used && self.life != Life::Ended {
            debug_assert!(self.mine.present(), "a used marker is there");
        }
    }
}
