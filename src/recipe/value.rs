//! Versioned compare-and-set updates of one node ([`Update`]: the paper's "read, compute,
//! `setData` with the version read, retry on `BadVersion`") and a shared counter built on
//! them ([`Counter`]: Curator's `SharedCount` and `DistributedAtomicLong` formats), and a
//! watched counter ([`CounterWatch`]: every new value, decoded in the same formats).
//!
//! # [`Update`]: one compare-and-set update of one node
//!
//! 1. [`start`](Update::start) sends `getData(<path>)` — preceded by `sync(<path>)` when
//!    [`UpdateConfig::sync_first`] is set (the paper's read after an out-of-band notice:
//!    "I changed it" heard on another channel must not be answered from a lagging
//!    follower).
//! 2. The node's value is reported as [`Current`](UpdateEvent::Current) (`None` = the
//!    node does not exist). The user answers with [`propose`](Update::propose):
//!    [`Proposal::Set`] with the new data, or [`Proposal::Keep`] to give up
//!    ([`Kept`](UpdateEvent::Kept), nothing written).
//! 3. `setData(<path>, data, version read)`; for a missing node (when
//!    [`UpdateConfig::create_if_missing`] is on) `create2(<path>, data)` (persistent;
//!    missing ancestors are created as containers first, in the same pipeline, at most
//!    twice, as `OwnedNode` does). Success: [`Updated`](UpdateEvent::Updated).
//! 4. `BadVersion` (someone wrote since our read), `NoNode` (deleted since) or
//!    `NodeExists` (created since): a lost race. Read again and report `Current` again
//!    — the user's function runs again on the fresh value. That is the retry loop. (No
//!    `sync` is needed: the server that answered `BadVersion` has applied the write that
//!    beat us, and our next read goes to it after that answer.) The read waits first:
//!    after the n-th race lost in a row, a delay drawn in `[span / 2, span]` with
//!    `span` = min(this round's duration (read sent → write answered) × 2^min(n, 5),
//!    250 ms), drawn from [`UpdateConfig::seed`], the session id and the draw count.
//!    Writers that collided read again at spread-out times instead of all at once
//!    (and collide again); the wait scales with the server's latency and grows while
//!    the node stays contended.
//! 5. A refusal (`Overloaded`, `Throttled`: never applied) sends the same request again
//!    after the [`Retry`] backoff; a read that failed is read again (after `sync`).
//!
//! # A write whose reply was lost
//!
//! When the connection drops (or the session ends) while our `setData`/`create` is in
//! flight, it may or may not have been applied. After the session is back the machine
//! sends `sync` + `getData` (the sync makes the read see everything our old connection
//! got applied: ZooKeeper fails requests of a session that moved away from its server,
//! so nothing of ours is applied after the move) and decides:
//!
//! * The node has exactly the version (and `czxid`) we wrote against — or, for a create,
//!   is still missing: ours was **not** applied (a node's version never goes back). The
//!   loop goes on: `Current` again, as after `BadVersion`. (A create that was applied and
//!   then deleted by someone else looks the same; the node does not hold our data either
//!   way, and the function runs again on "missing".)
//! * The node is at the version after ours, same `czxid`, holding exactly the bytes we
//!   proposed (version 0 and our bytes for a create), and
//!   [`UpdateConfig::confirm_by_data`] is on (the default): `Updated`. The node holds what
//!   the function proposed on top of the value it was given. A second writer that read
//!   the same value and proposed the same bytes cannot be told apart from us; that is
//!   harmless for a value but not for counting, so [`Counter`] turns this off.
//! * Anything else: the outcome cannot be known. The update ends with
//!   [`Failed`](UpdateEvent::Failed) and an error whose
//!   [`may_have_applied`](Error::may_have_applied) is true (`ConnectionLoss`). Running the
//!   function again on the fresh value could apply it twice, so the machine never does.
//!
//! So `Updated` always means the node holds our proposal at the version after the one we
//! read; a `Failed` whose error does not say `may_have_applied` means nothing of ours was
//! written; and the function is never applied twice.
//!
//! # Session semantics
//!
//! Suspended: the machine waits for `Reconnected`. An expired session is not an end (the
//! node is persistent): the machine waits for the next `Connected` and goes on (a write
//! in flight at the expiry is verified as above). `Closed` ends it with `Failed`
//! (`ConnectionLoss` if a write of ours is in doubt, else `Closed`).
//!
//! # [`Counter`]: a shared counter
//!
//! [`add`](Counter::add) is an [`Update`] whose function is "parse, add, encode"
//! (one update at a time, in the order asked): a missing node counts as 0 and is created;
//! [`Added`](CounterEvent::Added) reports the value before and after. [`get`](Counter::get)
//! is an update that keeps the value ([`Value`](CounterEvent::Value)).
//!
//! A burst of adds: an add asked within one round (as measured by the last write) of
//! our last write's answer, with no session change since, does not read: it writes
//! against the data and version that write left (`setData(v)`), one request instead of
//! two. If anyone wrote meanwhile that is a lost race (`BadVersion`): wait, read, write,
//! as above. A get always reads. (As with every compare-and-set on a version, a node
//! deleted and re-created up to the same version in between cannot be told apart; the
//! window is one round.) Under contention the writer that just won keeps writing at one
//! request per add while the ones that lost wait: 8 sessions × 100 adds on one node
//! cost 1.3 requests per add (`cargo bench --bench counter`), where reading again at
//! once cost 8.8.
//!
//! The node formats, the ones Curator writes:
//!
//! * [`CounterFormat::I32`]: 4-byte big-endian two's-complement `int`, Curator's
//!   `SharedCount` (`curator-recipes/.../shared/SharedCount.java`: `toBytes` is
//!   `ByteBuffer.wrap(new byte[4]).putInt(value)`, `fromBytes` is `getInt()`; Java's
//!   `ByteBuffer` is big-endian by default).
//! * [`CounterFormat::I64`]: 8-byte big-endian `long`, Curator's `DistributedAtomicLong`
//!   (`.../atomic/DistributedAtomicLong.java`: `valueToBytes` is `putLong` into 8 bytes;
//!   `bytesToValue` reads a missing or empty node as 0 and reports a short one as
//!   corrupt; `add` computes `previous + delta` in a `MakeValue` handed to
//!   `DistributedAtomicValue`'s compare-and-set loop).
//!
//! Empty data counts as 0 in both formats (a node made by an "ensure path" helper); any
//! other length ends that operation with [`Failed`](CounterEvent::Failed) carrying
//! [`Error::BadCounter`], and nothing is written (Curator would read the first bytes of a
//! longer node; we refuse to guess). An add whose result leaves the format's range
//! ends with `Failed` carrying [`Error::CounterOverflow`], and nothing is written (Java's
//! arithmetic would wrap silently, `i32::MAX + 1` becoming `i32::MIN`); an `I32` delta
//! outside `i32` is refused (`BadArguments`).
//!
//! Counting guarantee: every `Added` is exactly one applied increment (the counter's
//! updates never trust same-bytes confirmation, see above), and every applied increment
//! is reported `Added` or `Failed` with a `may_have_applied` error. So, without other
//! writers, the node's value is the sum of the `Added` deltas plus some of the deltas
//! whose `Failed` says `may_have_applied`. Curator's `DistributedAtomicValue.tryOnce`
//! (read, `makeFrom`, `setData().withVersion(v)`) treats `BadVersion` and `NodeExists` as
//! a lost race and tries again; the framework retries a `setData` whose connection was
//! lost, and if the lost attempt was applied the retry answers `BadVersion`, so the
//! increment is applied a second time. Here a lost reply is verified instead, and an
//! increment is never applied twice.
//!
//! ```
//! use zk_recipes::recipe::value::{Counter, CounterEvent, CounterFormat};
//! use zk_recipes::recipe::{Recipe, SessionChange};
//! use zk_recipes::proto::{Response, Stat};
//! use zk_recipes::time::Instant;
//! let t = Instant::ZERO;
//! let mut c = Counter::new("/hits", CounterFormat::I32);
//! c.handle_session(t, SessionChange::Connected { session_id: 1 });
//! c.add(t, 5);
//! let (read, _) = c.poll_request().unwrap(); // getData /hits
//! let data = CounterFormat::I32.encode(37);
//! c.handle_reply(t, read, Ok(Response::Data { data, stat: Stat::default() }));
//! let (set, _) = c.poll_request().unwrap(); // setData /hits 42, version 0
//! c.handle_reply(t, set, Ok(Response::Stat(Stat { version: 1, ..Stat::default() })));
//! assert!(matches!(c.poll_event(), Some(CounterEvent::Added { before: 37, after: 42, .. })));
//! ```

use alloc::collections::VecDeque;
use alloc::string::String;
use alloc::vec::Vec;
use bytes::Bytes;
use core::time::Duration;

use super::kit::{parent_of, Events, Kit, ParentStep, Plumbing, Protocol};
use super::{OpId, Recipe, Retry, SessionChange};
use crate::error::Error;
use crate::proto::*;
use crate::session::WatchEvent;
use crate::time::Instant;

/// The wait after a lost race spans at most 2^this rounds...
const MAX_LOSS_DOUBLINGS: u32 = 5;
/// ...and at most this long (a round stretched by a slow server or a reconnect).
const MAX_LOSS_WAIT: Duration = Duration::from_millis(250);
/// A round is taken to last at least this long (a reply within the same instant).
const MIN_ROUND: Duration = Duration::from_micros(100);

// ======================================================================================
// Update
// ======================================================================================

/// What an [`Update`] changes and how.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct UpdateConfig {
    /// The node's full path.
    pub path: String,
    /// A missing node is created with the proposed data (default: on). Off: proposing
    /// data for a missing node ends with `Failed(NoNode)`.
    pub create_if_missing: bool,
    /// `sync` before the first read (default: off): for a read after an out-of-band
    /// notice. Reads after a reconnect are always preceded by `sync`.
    pub sync_first: bool,
    /// A lost write reply is confirmed by a re-read that shows our bytes at the next
    /// version (default: on; see the [module docs](self)). Off: such a write ends in
    /// `Failed` with a `may_have_applied` error.
    pub confirm_by_data: bool,
    /// The ACL of a node created (and of ancestors created for it).
    pub acl: Vec<Acl>,
    /// Mixed (with the session id) into the jitter of the wait after a lost race (see
    /// the [module docs](self)); drivers pass entropy, so that updates of one node in
    /// one session do not wait in step (default 0).
    pub seed: u64,
}

impl UpdateConfig {
    /// An update of `path`: created if missing, no `sync` first, open ACL.
    pub fn new(path: &str) -> Self {
        UpdateConfig {
            path: path.into(),
            create_if_missing: true,
            sync_first: false,
            confirm_by_data: true,
            acl: Acl::open_unsafe(),
            seed: 0,
        }
    }
}

/// The user's answer to [`UpdateEvent::Current`].
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Proposal {
    /// Write this (compare-and-set against the version reported).
    Set(Bytes),
    /// Give up: nothing is written; [`UpdateEvent::Kept`].
    Keep,
}

/// What an [`Update`] reports. `Updated`, `Kept` and `Failed` are final.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum UpdateEvent {
    /// The node's value now: answer with [`Update::propose`]. Reported again after every
    /// lost race (the function runs again on the fresh value).
    Current {
        /// Its data; `None`: the node does not exist.
        data: Option<Bytes>,
        /// Its Stat; `None`: the node does not exist.
        stat: Option<Stat>,
    },
    /// Our proposal is in the node. Final.
    Updated {
        /// The node's Stat after our write.
        stat: Stat,
    },
    /// The user gave up ([`Proposal::Keep`]); nothing written. Final.
    Kept,
    /// Ended without a confirmed write. `error.may_have_applied()` says whether our
    /// write may be in the node all the same. Final.
    Failed {
        /// The cause.
        error: Error,
    },
}

impl UpdateEvent {
    /// Does this event end the update?
    pub fn is_final(&self) -> bool {
        !matches!(self, UpdateEvent::Current { .. })
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Stage {
    Idle,
    /// Reading the value to report it.
    Reading,
    /// `Current` reported; waiting for `propose`.
    Proposing,
    /// Our write is (to be) sent.
    Writing,
    /// Our write's reply was lost: reading to decide.
    Verifying,
    Done,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum Op {
    Sync,
    Read,
    Set,
    Create,
    Parent(String),
}

/// One compare-and-set update of one node; see the [module docs](self).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Update {
    config: UpdateConfig,
    stage: Stage,
    live: bool,
    /// The Stat reported in the last `Current` (`None`: missing).
    seen: Option<Stat>,
    proposal: Bytes,
    /// A write of ours may have been applied.
    in_doubt: bool,
    sync_next: bool,
    waiting: bool,
    parents: bool,
    rounds: u32,
    /// Races lost in a row in this update.
    losses: u32,
    /// When this round's read was sent (or its write, when nothing was read).
    round_start: Option<Instant>,
    /// How long the last round took, read sent → write answered (clamped).
    last_round: Duration,
    /// What our last write left in the node (its data and Stat), and when it was
    /// answered; taken by the next [`begin`](Self::begin).
    known: Option<(Bytes, Stat, Instant)>,
    kit: Kit<Op, UpdateEvent>,
}

impl Update {
    /// An update that does nothing until [`start`](Self::start).
    pub fn new(config: UpdateConfig) -> Self {
        Update {
            kit: Kit::with_retry(Retry::with_seed(config.seed)),
            config,
            stage: Stage::Idle,
            live: false,
            seen: None,
            proposal: Bytes::new(),
            in_doubt: false,
            sync_next: false,
            waiting: false,
            parents: false,
            rounds: 0,
            losses: 0,
            round_start: None,
            last_round: MIN_ROUND,
            known: None,
        }
    }

    /// The configuration.
    pub fn config(&self) -> &UpdateConfig {
        &self.config
    }

    /// How many times `Current` was reported (1 + the races lost).
    pub fn rounds(&self) -> u32 {
        self.rounds
    }

    /// Does it wait for [`propose`](Self::propose)?
    pub fn is_proposing(&self) -> bool {
        self.stage == Stage::Proposing
    }

    /// Has it ended (final event queued)?
    pub fn has_ended(&self) -> bool {
        self.stage == Stage::Done
    }

    /// Reads the node and reports [`UpdateEvent::Current`] (once; later calls do
    /// nothing).
    pub fn start(&mut self, now: Instant) {
        if self.stage != Stage::Idle {
            return;
        }
        self.begin(now, false);
    }

    /// Starts one more update of the same node once the last one ended (the counter's
    /// next operation). Op ids keep counting, so late replies of the last one are
    /// ignored. `reuse`: if our last write was answered within one round of `now` (and
    /// nothing happened to the session since), report what it left as `Current`
    /// without reading (a burst of increments); a write against it that someone beat
    /// is a lost race like any other.
    fn begin(&mut self, now: Instant, reuse: bool) {
        let known = self.known.take();
        self.kit.clear_requests();
        if let Err(error) = validate_path(&self.config.path) {
            self.stage = Stage::Done;
            self.kit.emit(UpdateEvent::Failed {
                error: Error::InvalidPath {
                    path: self.config.path.clone(),
                    error,
                },
            });
            return;
        }
        self.stage = Stage::Reading;
        self.seen = None;
        self.proposal = Bytes::new();
        self.in_doubt = false;
        self.sync_next |= self.config.sync_first;
        self.parents = false;
        self.kit.reset_parents();
        self.rounds = 0;
        self.losses = 0;
        self.round_start = None;
        if reuse && self.live && !self.sync_next && self.kit.allows(now) {
            if let Some((data, stat, _)) = known.filter(|k| now - k.2 <= self.last_round) {
                self.round_start = Some(now);
                return self.present(Some((data, stat)));
            }
        }
        self.drive(now);
    }

    /// Answers the last [`Current`](UpdateEvent::Current): write `Set(data)` against the
    /// version reported, or `Keep` (give up). Ignored unless an answer is awaited.
    pub fn propose(&mut self, now: Instant, proposal: Proposal) {
        if self.stage != Stage::Proposing {
            return;
        }
        match proposal {
            Proposal::Keep => self.finish(UpdateEvent::Kept),
            Proposal::Set(data) => {
                if self.seen.is_none() && !self.config.create_if_missing {
                    return self.fail(Error::Server(ErrorCode::NoNode));
                }
                self.proposal = data;
                self.stage = Stage::Writing;
                self.drive(now);
            }
        }
    }

    fn finish(&mut self, e: UpdateEvent) {
        self.stage = Stage::Done;
        self.kit.clear_requests();
        self.waiting = false;
        self.kit.emit(e);
    }

    /// Ends with `error` — or `ConnectionLoss` if a write of ours is in doubt (its reply
    /// was lost, or it is still on its way), so the error always tells whether something
    /// of ours may be in the node.
    fn fail(&mut self, error: Error) {
        // A write still on its way may yet be applied.
        self.in_doubt |= self.kit.any(|p| matches!(p, Op::Set | Op::Create));
        let error = if self.in_doubt && !error.may_have_applied() {
            Error::ConnectionLoss
        } else {
            error
        };
        self.finish(UpdateEvent::Failed { error });
    }

    fn again(&mut self, now: Instant) {
        self.sync_next = true;
        self.kit.failed(now);
    }

    fn drive(&mut self, now: Instant) {
        if !matches!(
            self.stage,
            Stage::Reading | Stage::Writing | Stage::Verifying
        ) || !self.live
        {
            return;
        }
        if !self.kit.allows(now) {
            self.waiting = !self.kit.is_suspended();
            return;
        }
        self.waiting = false;
        if !self.kit.is_quiet() {
            return; // one round at a time: its answer decides
        }
        let path = self.config.path.clone();
        match self.stage {
            Stage::Reading | Stage::Verifying => {
                self.round_start = Some(now);
                if core::mem::take(&mut self.sync_next) {
                    self.kit
                        .send(Op::Sync, Request::Sync(PathRequest { path: path.clone() }));
                }
                self.kit
                    .send(Op::Read, Request::GetData(PathWatch { path, watch: false }));
            }
            Stage::Writing => {
                let data = self.proposal.clone();
                match self.seen {
                    Some(stat) => {
                        self.kit.send(
                            Op::Set,
                            Request::SetData(SetDataRequest {
                                path,
                                data,
                                version: stat.version,
                            }),
                        );
                    }
                    None => {
                        if core::mem::take(&mut self.parents) {
                            let acl = &self.config.acl;
                            self.kit
                                .send_parents(&path, acl, CreateMode::Container, Op::Parent);
                        }
                        let create = CreateRequest::new(
                            path,
                            data,
                            self.config.acl.clone(),
                            CreateMode::Persistent,
                        );
                        self.kit.send(Op::Create, Request::Create2(create));
                    }
                }
            }
            _ => {}
        }
    }

    /// `Current` for what was read.
    fn present(&mut self, found: Option<(Bytes, Stat)>) {
        self.stage = Stage::Proposing;
        self.in_doubt = false;
        self.rounds = self.rounds.saturating_add(1);
        match found {
            Some((data, stat)) => {
                self.seen = Some(stat);
                self.kit.emit(UpdateEvent::Current {
                    data: Some(data),
                    stat: Some(stat),
                });
            }
            None => {
                self.seen = None;
                self.kit.emit(UpdateEvent::Current {
                    data: None,
                    stat: None,
                });
            }
        }
    }

    /// A write of ours may have been applied: what the (synced) re-read shows decides.
    fn verify(&mut self, found: Option<(Bytes, Stat)>) {
        let confirm = self.config.confirm_by_data;
        match (self.seen, &found) {
            // Not applied: the version we wrote against is still there / still missing.
            (Some(s), Some((_, st))) if st.czxid == s.czxid && st.version == s.version => {
                self.present(found)
            }
            (None, None) => self.present(None),
            // Our bytes at the next version.
            (Some(s), Some((d, st)))
                if confirm
                    && st.czxid == s.czxid
                    && st.version == s.version.wrapping_add(1)
                    && *d == self.proposal =>
            {
                let stat = *st;
                self.finish(UpdateEvent::Updated { stat })
            }
            (None, Some((d, st))) if confirm && st.version == 0 && *d == self.proposal => {
                let stat = *st;
                self.finish(UpdateEvent::Updated { stat })
            }
            _ => self.fail(Error::ConnectionLoss),
        }
    }

    fn on_read(&mut self, now: Instant, result: Result<Response, Error>) {
        // Without its sync the read may come from a lagging follower: a node, or its
        // absence (our own create, applied with its reply lost, not there yet), may be
        // stale either way; the outbox reads it as lost (`Outbox::answer`).
        let found = match result {
            Ok(Response::Data { data, stat }) => Some((data, stat)),
            Ok(_) => return self.fail(Error::UnexpectedReply),
            Err(Error::Server(ErrorCode::NoNode)) => None,
            Err(e) if e.is_retryable() => return self.again(now),
            Err(e) if e.ends_session() => return, // the session change decides
            Err(e) => return self.fail(e),
        };
        self.kit.succeeded();
        if self.stage == Stage::Verifying {
            self.verify(found)
        } else {
            self.present(found)
        }
    }

    /// Our write failed with `e`: lost (verify), refused (again), or final.
    fn write_failed(&mut self, now: Instant, e: Error) {
        if e.may_have_applied() || e.ends_session() {
            self.in_doubt = true;
            self.stage = Stage::Verifying;
            self.again(now);
        } else if e.is_retryable() {
            self.again(now); // refused: never applied; the same write after a backoff
        } else {
            self.fail(e)
        }
    }

    fn on_set(&mut self, now: Instant, result: Result<Response, Error>) {
        match result {
            Ok(Response::Stat(stat)) => self.written(now, stat),
            Ok(_) => {
                self.in_doubt = true;
                self.fail(Error::UnexpectedReply)
            }
            Err(Error::Server(ErrorCode::BadVersion | ErrorCode::NoNode)) => self.lost_race(now),
            Err(e) => self.write_failed(now, e),
        }
    }

    /// Someone else wrote since our read: read again, after a wait drawn in
    /// `[span / 2, span]`, `span` = this round's duration (read sent → write answered)
    /// × 2^(races lost in a row, at most [`MAX_LOSS_DOUBLINGS`]), at most
    /// [`MAX_LOSS_WAIT`].
    fn lost_race(&mut self, now: Instant) {
        self.kit.succeeded();
        self.stage = Stage::Reading;
        self.losses = self.losses.saturating_add(1);
        let round = self.round_ended(now);
        let span = round
            .saturating_mul(1 << self.losses.min(MAX_LOSS_DOUBLINGS))
            .min(MAX_LOSS_WAIT);
        self.kit.back_off(now, span);
    }

    /// Our write was answered at `now`: how long its round took (clamped), remembered.
    fn round_ended(&mut self, now: Instant) -> Duration {
        self.last_round = self
            .round_start
            .map_or(MIN_ROUND, |start| now - start)
            .max(MIN_ROUND);
        self.last_round
    }

    /// Our write is applied: what it left in the node is known as of `now`.
    fn written(&mut self, now: Instant, stat: Stat) {
        self.kit.succeeded();
        self.round_ended(now);
        self.known = Some((self.proposal.clone(), stat, now));
        self.finish(UpdateEvent::Updated { stat });
    }

    fn on_create(&mut self, now: Instant, result: Result<Response, Error>) {
        match result {
            Ok(Response::PathStat { stat, .. }) => self.written(now, stat),
            Ok(_) => {
                self.in_doubt = true;
                self.fail(Error::UnexpectedReply)
            }
            Err(Error::Server(ErrorCode::NodeExists)) => self.lost_race(now),
            Err(Error::Server(ErrorCode::NoNode)) => {
                match self.kit.parents_missing(parent_of(&self.config.path)) {
                    ParentStep::Again => self.again(now),
                    ParentStep::Create => {}
                    ParentStep::Fail(e) => return self.fail(e),
                }
                self.parents = true;
            }
            Err(e) => self.write_failed(now, e),
        }
    }
}

impl Protocol for Update {
    type Event = UpdateEvent;

    fn kit(&mut self) -> &mut dyn Plumbing<Self::Event> {
        &mut self.kit
    }

    fn on_reply(&mut self, now: Instant, op: OpId, result: Result<Response, Error>) {
        let Some((purpose, result)) = self.kit.answer(op, result) else {
            return;
        };
        if self.stage == Stage::Done {
            return;
        }
        match purpose {
            Op::Sync => {} // a failure reads the read behind it as lost
            Op::Read => self.on_read(now, result),
            Op::Set => self.on_set(now, result),
            Op::Create => self.on_create(now, result),
            Op::Parent(p) => self.kit.parent_answered(&p, &result),
        }
        self.drive(now);
    }

    fn on_watch(&mut self, _now: Instant, _op: OpId, _event: &WatchEvent) {}

    fn on_session(&mut self, now: Instant, change: SessionChange) {
        self.known = None; // what we wrote may have been overwritten meanwhile
        match change {
            SessionChange::Connected { .. } => {
                self.live = true;
                // A new session: whatever we knew may be stale.
                self.sync_next |= !matches!(self.stage, Stage::Idle | Stage::Done);
            }
            SessionChange::Reconnected { .. } => {
                self.live = true;
                self.sync_next = true;
            }
            SessionChange::Suspended => {}
            SessionChange::Expired => {
                let writing = self.kit.any(|p| matches!(p, Op::Set | Op::Create));
                self.kit.clear_requests();
                self.live = false;
                self.waiting = false;
                if writing && self.stage != Stage::Done {
                    self.in_doubt = true;
                    self.stage = Stage::Verifying;
                }
            }
            SessionChange::Closed => {
                self.live = false;
                if self.stage != Stage::Done {
                    self.fail(Error::Closed);
                }
            }
        }
        self.drive(now);
    }

    fn on_timeout(&mut self, now: Instant) {
        self.drive(now);
    }

    fn on_abandon(&mut self, _now: Instant) {
        if self.stage != Stage::Done {
            self.fail(Error::Closed);
        }
    }

    fn deadline(&self) -> Option<Instant> {
        if self.waiting && self.stage != Stage::Done {
            self.kit.retry_at()
        } else {
            None
        }
    }

    fn finished(&self) -> bool {
        self.stage == Stage::Done && self.kit.no_events()
    }
}

// ======================================================================================
// Counter
// ======================================================================================

/// How a counter is stored in its node (see the [module docs](self)).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CounterFormat {
    /// 4-byte big-endian `int`: Curator's `SharedCount`.
    I32,
    /// 8-byte big-endian `long`: Curator's `DistributedAtomicLong`.
    I64,
}

impl CounterFormat {
    /// The node's data length in this format, in bytes.
    pub fn width(self) -> usize {
        match self {
            CounterFormat::I32 => 4,
            CounterFormat::I64 => 8,
        }
    }

    /// `value` as this format stores it (an `I32` keeps the low 32 bits).
    ///
    /// ```
    /// use zk_recipes::recipe::value::CounterFormat;
    /// assert_eq!(&CounterFormat::I32.encode(258)[..], [0, 0, 1, 2]);
    /// assert_eq!(&CounterFormat::I64.encode(-2)[..], [0xff; 7].iter().chain(&[0xfe]).copied().collect::<Vec<_>>());
    /// ```
    pub fn encode(self, value: i64) -> Bytes {
        match self {
            CounterFormat::I32 => Bytes::copy_from_slice(&(value as i32).to_be_bytes()),
            CounterFormat::I64 => Bytes::copy_from_slice(&value.to_be_bytes()),
        }
    }

    /// `value + delta`; `None` if `delta` or the sum does not fit this format's width.
    fn add(self, value: i64, delta: i64) -> Option<i64> {
        match self {
            CounterFormat::I32 => {
                let d = i32::try_from(delta).ok()?;
                (value as i32).checked_add(d).map(i64::from)
            }
            CounterFormat::I64 => value.checked_add(delta),
        }
    }
}

/// The counter value stored in `data` (empty data counts as 0); [`Error::BadCounter`]
/// for any other length than the format's.
///
/// ```
/// use zk_recipes::recipe::value::{counter_value, CounterFormat};
/// assert_eq!(counter_value(&[0, 0, 0, 42], CounterFormat::I32), Ok(42));
/// assert_eq!(counter_value(&[0xff; 8], CounterFormat::I64), Ok(-1));
/// assert_eq!(counter_value(&[], CounterFormat::I64), Ok(0));
/// assert!(counter_value(&[1, 2, 3], CounterFormat::I32).is_err());
/// ```
pub fn counter_value(data: &[u8], format: CounterFormat) -> Result<i64, Error> {
    let bad = || Error::BadCounter {
        expected: format.width(),
        found: data.len(),
    };
    if data.is_empty() {
        return Ok(0);
    }
    match format {
        CounterFormat::I32 => <[u8; 4]>::try_from(data)
            .map(|b| i64::from(i32::from_be_bytes(b)))
            .map_err(|_| bad()),
        CounterFormat::I64 => <[u8; 8]>::try_from(data)
            .map(i64::from_be_bytes)
            .map_err(|_| bad()),
    }
}

/// What a [`Counter`] reports: one of `Added`, `Value` or `Failed` per operation, in the
/// order the operations were asked; `Closed` is final.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum CounterEvent {
    /// An [`add`](Counter::add) is applied, exactly once.
    Added {
        /// The value it was applied to.
        before: i64,
        /// The value written.
        after: i64,
        /// The node's Stat after the write.
        stat: Stat,
    },
    /// A [`get`](Counter::get): the value (0 for a missing node).
    Value {
        /// The value.
        value: i64,
        /// The node's Stat (`None`: missing).
        stat: Option<Stat>,
    },
    /// The operation failed; the counter goes on with the next one. For an `add`,
    /// `error.may_have_applied()` says whether it may be in the node all the same.
    Failed {
        /// The cause ([`Error::BadCounter`] for malformed data,
        /// [`Error::CounterOverflow`] for an add out of the format's range: nothing
        /// written).
        error: Error,
    },
    /// Ended by [`close`](Counter::close), abandonment or a closed session. Final.
    Closed,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum CounterOp {
    Add(i64),
    Get,
}

/// A shared counter; see the [module docs](self).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Counter {
    format: CounterFormat,
    update: Update,
    ops: VecDeque<CounterOp>,
    current: Option<CounterOp>,
    /// The add in flight: (before, after).
    plan: Option<(i64, i64)>,
    /// The get's answer, or why the operation ends with `Keep`.
    outcome: Option<Result<(i64, Option<Stat>), Error>>,
    started: bool,
    closed: bool,
    events: Events<CounterEvent>,
}

impl Counter {
    /// A counter in node `path`, stored in `format`.
    pub fn new(path: &str, format: CounterFormat) -> Self {
        Self::with_config(UpdateConfig::new(path), format)
    }

    /// A counter with the update options of `config` (`sync_first`, `acl`;
    /// `create_if_missing` is forced on and `confirm_by_data` off).
    pub fn with_config(mut config: UpdateConfig, format: CounterFormat) -> Self {
        config.create_if_missing = true;
        config.confirm_by_data = false;
        Counter {
            format,
            update: Update::new(config),
            ops: VecDeque::new(),
            current: None,
            plan: None,
            outcome: None,
            started: false,
            closed: false,
            events: Events::default(),
        }
    }

    /// The format.
    pub fn format(&self) -> CounterFormat {
        self.format
    }

    /// The node's path.
    pub fn path(&self) -> &str {
        &self.update.config().path
    }

    /// Operations asked and not answered yet.
    pub fn pending(&self) -> usize {
        self.ops.len() + usize::from(self.current.is_some())
    }

    /// Adds `delta` (negative subtracts): [`CounterEvent::Added`] or `Failed`. Ignored
    /// once the counter has ended.
    pub fn add(&mut self, now: Instant, delta: i64) {
        self.ask(now, CounterOp::Add(delta));
    }

    /// Reads the value: [`CounterEvent::Value`] or `Failed`. Ignored once the counter
    /// has ended.
    pub fn get(&mut self, now: Instant) {
        self.ask(now, CounterOp::Get);
    }

    /// Ends: operations not answered yet fail with `Closed`, then
    /// [`CounterEvent::Closed`]. (A write on the wire may still be applied: its add
    /// fails with a `may_have_applied` error.)
    pub fn close(&mut self, now: Instant) {
        if self.closed {
            return;
        }
        self.closed = true; // no next operation starts
        self.update.handle_abandon(now);
        self.pump(now);
        for _ in self.ops.drain(..) {
            self.events.emit(CounterEvent::Failed {
                error: Error::Closed,
            });
        }
        self.events.emit(CounterEvent::Closed);
    }

    fn ask(&mut self, now: Instant, op: CounterOp) {
        if self.closed {
            return; // ended: nothing follows `Closed`
        }
        self.ops.push_back(op);
        self.pump(now);
    }

    /// Starts the next operation when none runs; turns the update's events into ours.
    fn pump(&mut self, now: Instant) {
        loop {
            if self.current.is_none() && !self.closed {
                match self.ops.pop_front() {
                    Some(CounterOp::Add(delta)) if self.format.add(0, delta).is_none() => {
                        self.events.emit(CounterEvent::Failed {
                            error: Error::Server(ErrorCode::BadArguments),
                        });
                        continue;
                    }
                    Some(op) => {
                        self.current = Some(op);
                        self.plan = None;
                        self.outcome = None;
                        if self.started {
                            let add = matches!(op, CounterOp::Add(_));
                            self.update.begin(now, add);
                        } else {
                            self.started = true;
                            self.update.start(now);
                        }
                    }
                    None => {}
                }
            }
            let Some(e) = self.update.poll_event() else {
                return;
            };
            let Some(op) = self.current else {
                continue; // an update's end with no operation (closed while idle)
            };
            match e {
                UpdateEvent::Current { data, stat } => {
                    let value = counter_value(data.as_deref().unwrap_or(&[]), self.format);
                    match (op, value) {
                        (CounterOp::Add(delta), Ok(before)) => {
                            match self.format.add(before, delta) {
                                Some(after) => {
                                    self.plan = Some((before, after));
                                    let data = self.format.encode(after);
                                    self.update.propose(now, Proposal::Set(data));
                                }
                                None => {
                                    self.outcome = Some(Err(Error::CounterOverflow {
                                        value: before,
                                        delta,
                                        width: self.format.width(),
                                    }));
                                    self.update.propose(now, Proposal::Keep);
                                }
                            }
                        }
                        (CounterOp::Get, Ok(v)) => {
                            self.outcome = Some(Ok((v, stat)));
                            self.update.propose(now, Proposal::Keep);
                        }
                        (_, Err(e)) => {
                            self.outcome = Some(Err(e));
                            self.update.propose(now, Proposal::Keep);
                        }
                    }
                }
                UpdateEvent::Updated { stat } => {
                    self.current = None;
                    if let Some((before, after)) = self.plan.take() {
                        self.events.emit(CounterEvent::Added {
                            before,
                            after,
                            stat,
                        });
                    }
                }
                UpdateEvent::Kept => {
                    self.current = None;
                    let e = match self.outcome.take() {
                        Some(Ok((value, stat))) => CounterEvent::Value { value, stat },
                        Some(Err(error)) => CounterEvent::Failed { error },
                        None => CounterEvent::Failed {
                            error: Error::UnexpectedReply,
                        },
                    };
                    self.events.emit(e);
                }
                UpdateEvent::Failed { error } => {
                    self.current = None;
                    self.events.emit(CounterEvent::Failed { error });
                }
            }
        }
    }
}

impl Recipe for Counter {
    type Event = CounterEvent;

    fn handle_reply(&mut self, now: Instant, op: OpId, result: Result<Response, Error>) {
        self.update.handle_reply(now, op, result);
        self.pump(now);
    }

    fn handle_watch(&mut self, _now: Instant, _op: OpId, _event: &WatchEvent) {}

    fn handle_session(&mut self, now: Instant, change: SessionChange) {
        if change == SessionChange::Closed {
            // The update in flight ends as abandoned (ConnectionLoss if in doubt).
            return self.close(now);
        }
        self.update.handle_session(now, change);
        self.pump(now);
    }

    fn handle_timeout(&mut self, now: Instant) {
        self.update.handle_timeout(now);
        self.pump(now);
    }

    fn handle_abandon(&mut self, now: Instant) {
        self.close(now);
    }

    fn poll_request(&mut self) -> Option<(OpId, Request)> {
        self.update.poll_request()
    }

    fn poll_event(&mut self) -> Option<CounterEvent> {
        self.events.poll()
    }

    fn poll_timeout(&self) -> Option<Instant> {
        self.update.poll_timeout()
    }

    fn is_done(&self) -> bool {
        self.closed && self.events.is_empty()
    }
}

// ======================================================================================
// CounterWatch
// ======================================================================================

/// What a [`CounterWatch`] reports. `Failed` and `Closed` are final.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum CounterWatchEvent {
    /// The counter's value: the first one read, then one per new version of the node
    /// (a write of the same value is a new version and is reported too). A missing node
    /// counts as 0, as for [`Counter::get`] (`stat` is `None`).
    Value {
        /// The value.
        value: i64,
        /// The node's Stat (`None`: missing).
        stat: Option<Stat>,
    },
    /// The node holds data of the wrong length for the format
    /// ([`Error::BadCounter`]). Not final: the watch goes on, and the next valid version
    /// is reported as `Value`.
    Malformed {
        /// [`Error::BadCounter`] with the lengths.
        error: Error,
        /// The node's Stat.
        stat: Stat,
    },
    /// The connection dropped (or the session expired): the value may be stale.
    Suspended,
    /// The session is back; the node is read again (a change missed meanwhile is
    /// reported as `Value`).
    Reconnected,
    /// Ended: the node cannot be read (`NoAuth`, an invalid path) or the session was
    /// closed. Final.
    Failed(Error),
    /// Ended by [`close`](CounterWatch::close). Final.
    Closed,
}

impl CounterWatchEvent {
    /// What a "next change" call answers for this event, the same in every adapter:
    /// `Ok(value)` for a [`Value`](Self::Value), `Err(BadCounter)` for a
    /// [`Malformed`](Self::Malformed) node (the watch goes on), the final error for
    /// [`Failed`](Self::Failed), `Err(Finished)` for [`Closed`](Self::Closed); `None`
    /// for `Suspended` / `Reconnected` (no change to report: keep waiting).
    pub fn change(&self) -> Option<Result<i64, Error>> {
        match self {
            CounterWatchEvent::Value { value, .. } => Some(Ok(*value)),
            CounterWatchEvent::Malformed { error, .. } | CounterWatchEvent::Failed(error) => {
                Some(Err(error.clone()))
            }
            CounterWatchEvent::Closed => Some(Err(Error::Finished)),
            CounterWatchEvent::Suspended | CounterWatchEvent::Reconnected => None,
        }
    }

    /// Does this event end the watch?
    pub fn is_final(&self) -> bool {
        matches!(
            self,
            CounterWatchEvent::Failed(_) | CounterWatchEvent::Closed
        )
    }
}

/// Follows a shared counter's value: a [`NodeWatch`](super::node::NodeWatch) on its node
/// whose data is decoded in `format` (the rules of [`counter_value`]: empty data and a
/// missing node count as 0, any other wrong length is
/// [`Malformed`](CounterWatchEvent::Malformed)). Every version the server reports is
/// reported; a deleted and re-created node is followed; after a reconnect the node is
/// read again after a `sync` (nothing missed, nothing reported twice).
///
/// ```
/// use zk_recipes::recipe::value::{CounterFormat, CounterWatch, CounterWatchEvent};
/// use zk_recipes::recipe::{Recipe, SessionChange};
/// use zk_recipes::proto::{Response, Stat};
/// use zk_recipes::time::Instant;
/// let t = Instant::ZERO;
/// let mut w = CounterWatch::new("/hits", CounterFormat::I32);
/// w.handle_session(t, SessionChange::Connected { session_id: 1 });
/// w.start(t);
/// let (read, _) = w.poll_request().unwrap(); // getData /hits, watch
/// let data = CounterFormat::I32.encode(7);
/// w.handle_reply(t, read, Ok(Response::Data { data, stat: Stat::default() }));
/// assert_eq!(w.poll_event().and_then(|e| e.change()), Some(Ok(7)));
/// assert_eq!(w.value(), Some(Ok(7)));
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct CounterWatch {
    format: CounterFormat,
    watch: super::node::NodeWatch,
    events: Events<CounterWatchEvent>,
    /// The last value reported (`None`: nothing read yet).
    last: Option<Result<i64, Error>>,
}

impl CounterWatch {
    /// Follows the counter in node `path`, stored in `format`, once
    /// [`start`](Self::start)ed.
    pub fn new(path: &str, format: CounterFormat) -> Self {
        CounterWatch {
            format,
            watch: super::node::NodeWatch::new(path),
            events: Events::default(),
            last: None,
        }
    }

    /// The format.
    pub fn format(&self) -> CounterFormat {
        self.format
    }

    /// The node's path.
    pub fn path(&self) -> &str {
        self.watch.path()
    }

    /// The value as last reported: `None` before the first read, `Err(BadCounter)`
    /// while the node is malformed.
    pub fn value(&self) -> Option<Result<i64, Error>> {
        self.last.clone()
    }

    /// Has it ended?
    pub fn has_ended(&self) -> bool {
        self.watch.has_ended()
    }

    /// Starts following (once).
    pub fn start(&mut self, now: Instant) {
        self.watch.start(now);
        self.pump();
    }

    /// `sync`, then read again (see [`NodeWatch::refresh`](super::node::NodeWatch::refresh)).
    pub fn refresh(&mut self, now: Instant) {
        self.watch.refresh(now);
        self.pump();
    }

    /// Stops following; [`CounterWatchEvent::Closed`].
    pub fn close(&mut self, now: Instant) {
        self.watch.close(now);
        self.pump();
    }

    fn pump(&mut self) {
        use super::node::NodeWatchEvent as N;
        while let Some(e) = self.watch.poll_event() {
            let e = match e {
                N::Data { data, stat } => match counter_value(&data, self.format) {
                    Ok(value) => CounterWatchEvent::Value {
                        value,
                        stat: Some(stat),
                    },
                    Err(error) => CounterWatchEvent::Malformed { error, stat },
                },
                N::Missing { .. } => CounterWatchEvent::Value {
                    value: 0,
                    stat: None,
                },
                N::Suspended => CounterWatchEvent::Suspended,
                N::Reconnected => CounterWatchEvent::Reconnected,
                N::Failed(error) => CounterWatchEvent::Failed(error),
                N::Closed => CounterWatchEvent::Closed,
            };
            if let Some(v) = e.change().filter(|_| !e.is_final()) {
                self.last = Some(v);
            }
            self.events.emit(e);
        }
    }
}

impl Recipe for CounterWatch {
    type Event = CounterWatchEvent;

    fn handle_reply(&mut self, now: Instant, op: OpId, result: Result<Response, Error>) {
        self.watch.handle_reply(now, op, result);
        self.pump();
    }

    fn handle_watch(&mut self, now: Instant, op: OpId, event: &WatchEvent) {
        self.watch.handle_watch(now, op, event);
        self.pump();
    }

    fn handle_session(&mut self, now: Instant, change: SessionChange) {
        self.watch.handle_session(now, change);
        self.pump();
    }

    fn handle_timeout(&mut self, now: Instant) {
        self.watch.handle_timeout(now);
        self.pump();
    }

    fn handle_abandon(&mut self, now: Instant) {
        self.watch.handle_abandon(now);
        self.pump();
    }

    fn poll_request(&mut self) -> Option<(OpId, Request)> {
        self.watch.poll_request()
    }

    fn poll_event(&mut self) -> Option<CounterWatchEvent> {
        self.events.poll()
    }

    fn poll_timeout(&self) -> Option<Instant> {
        self.watch.poll_timeout()
    }

    fn is_done(&self) -> bool {
        self.watch.is_done() && self.events.is_empty()
    }
}
