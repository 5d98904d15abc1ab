//! [`Update`]: one compare-and-set update of one node (see the [module docs](super)).

use alloc::string::String;
use alloc::vec::Vec;
use bytes::Bytes;
use core::time::Duration;

use crate::error::Error;
use crate::proto::*;
use crate::recipe::kit::{parent_of, protocol_head, valid_path, Kit, ParentStep, Protocol, Reply};
use crate::recipe::watcher::{link_protocol, Link};
use crate::recipe::{OpId, Retry, SessionChange};
use crate::time::Instant;

/// The wait after a lost race spans at most 2^this rounds...
const MAX_LOSS_DOUBLINGS: u32 = 5;
/// ...and at most this long (a round stretched by a slow server or a reconnect).
const MAX_LOSS_WAIT: Duration = Duration::from_millis(250);
/// A round is taken to last at least this long (a reply within the same instant).
const MIN_ROUND: Duration = Duration::from_micros(100);

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
    /// version (default: on; see the [module docs](super)). Off: such a write ends in
    /// `Failed` with a `may_have_applied` error.
    pub confirm_by_data: bool,
    /// The ACL of a node created (and of ancestors created for it).
    pub acl: Vec<Acl>,
    /// Mixed (with the session id) into the jitter of the wait after a lost race (see
    /// the [module docs](super)); drivers pass entropy, so that updates of one node in
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

/// Where an [`Update`] stands; a variant carries what exists only in it.
///
/// | before (fields of `Update`) | after |
/// | --- | --- |
/// | `stage: Idle/Reading/Proposing/Writing/Verifying/Done` | `Stage` |
/// | `seen` (the Stat reported in `Current`) | `Proposing { seen }`, `Writing { seen, .. }`, `Verifying { seen, .. }` |
/// | `proposal` | `Writing { proposal, .. }`, `Verifying { proposal, .. }` |
/// | `in_doubt` (a write of ours may have been applied) | `Verifying` (or a write on the wire) |
/// | `live`, `waiting` | `link` (`Down`, `Up`, `BackingOff`), as the watchers' |
/// | `sync_next`, `parents` | kept: independent of the stage |
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum Stage {
    Idle,
    /// Reading the value to report it.
    Reading,
    /// `Current` reported (`seen`: its Stat, `None` for a missing node); waiting for
    /// `propose`.
    Proposing {
        seen: Option<Stat>,
    },
    /// Our write of `proposal` against `seen` is (to be) sent.
    Writing {
        seen: Option<Stat>,
        proposal: Bytes,
    },
    /// Our write's reply was lost: it may have been applied; reading to decide.
    Verifying {
        seen: Option<Stat>,
        proposal: Bytes,
    },
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

/// One compare-and-set update of one node; see the [module docs](super).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Update {
    config: UpdateConfig,
    stage: Stage,
    /// The session, and whether a request waits for the backoff to end.
    link: Link,
    sync_next: bool,
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
            link: Link::Down,
            sync_next: false,
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
        matches!(self.stage, Stage::Proposing { .. })
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
    pub(super) fn begin(&mut self, now: Instant, reuse: bool) {
        let known = self.known.take();
        self.kit.clear_requests();
        if let Err(error) = valid_path(&self.config.path) {
            self.stage = Stage::Done;
            self.kit.emit(UpdateEvent::Failed { error });
            return;
        }
        self.stage = Stage::Reading;
        self.sync_next |= self.config.sync_first;
        self.parents = false;
        self.kit.reset_parents();
        self.rounds = 0;
        self.losses = 0;
        self.round_start = None;
        if reuse && self.link.is_up() && !self.sync_next && self.kit.allows(now) {
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
        let Stage::Proposing { seen } = self.stage else {
            return;
        };
        match proposal {
            Proposal::Keep => self.finish(UpdateEvent::Kept),
            Proposal::Set(data) => {
                if seen.is_none() && !self.config.create_if_missing {
                    return self.fail(Error::Server(ErrorCode::NoNode));
                }
                self.stage = Stage::Writing {
                    seen,
                    proposal: data,
                };
                self.drive(now);
            }
        }
    }

    /// Ends with `e`, once: an update that ended reports nothing more.
    fn finish(&mut self, e: UpdateEvent) {
        self.kit.clear_requests();
        self.link.rest();
        self.kit.end(&mut self.stage, Stage::Done, e);
    }

    /// Ends with `error` — or `ConnectionLoss` if a write of ours is in doubt (its reply
    /// was lost, or it is still on its way), so the error always tells whether something
    /// of ours may be in the node.
    fn fail(&mut self, error: Error) {
        // A write still on its way may yet be applied.
        let doubt = matches!(self.stage, Stage::Verifying { .. })
            || self.kit.any(|p| matches!(p, Op::Set | Op::Create));
        self.fail_in_doubt(error, doubt);
    }

    /// Ends with `error`, or `ConnectionLoss` if `doubt` (a write of ours may be in the
    /// node) and `error` does not say so.
    fn fail_in_doubt(&mut self, error: Error, doubt: bool) {
        let error = if doubt && !error.may_have_applied() {
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
            Stage::Reading | Stage::Writing { .. } | Stage::Verifying { .. }
        ) || !self.link.gate(&self.kit, now)
        {
            return;
        }
        if !self.kit.is_quiet() {
            return; // one round at a time: its answer decides
        }
        let path = self.config.path.clone();
        match &self.stage {
            Stage::Reading | Stage::Verifying { .. } => {
                self.round_start = Some(now);
                if core::mem::take(&mut self.sync_next) {
                    self.kit
                        .send(Op::Sync, Request::Sync(PathRequest { path: path.clone() }));
                }
                self.kit
                    .send(Op::Read, Request::GetData(PathWatch { path, watch: false }));
            }
            Stage::Writing { seen, proposal } => {
                let data = proposal.clone();
                match *seen {
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
        self.stage = Stage::Proposing {
            seen: found.as_ref().map(|(_, stat)| *stat),
        };
        self.rounds = self.rounds.saturating_add(1);
        match found {
            Some((data, stat)) => {
                self.kit.emit(UpdateEvent::Current {
                    data: Some(data),
                    stat: Some(stat),
                });
            }
            None => {
                self.kit.emit(UpdateEvent::Current {
                    data: None,
                    stat: None,
                });
            }
        }
    }

    /// A write of ours may have been applied: what the (synced) re-read shows decides.
    fn verify(&mut self, found: Option<(Bytes, Stat)>) {
        let Stage::Verifying { seen, proposal } = &self.stage else {
            return self.present(found);
        };
        let seen = *seen;
        // Our bytes (only when the data may confirm a write).
        let ours =
            self.config.confirm_by_data && found.as_ref().is_some_and(|(d, _)| d == proposal);
        match (seen, &found) {
            // Not applied: the version we wrote against is still there / still missing.
            (Some(s), Some((_, st))) if st.czxid == s.czxid && st.version == s.version => {
                self.present(found)
            }
            (None, None) => self.present(None),
            // Our bytes at the next version.
            (Some(s), Some((_, st)))
                if ours && st.czxid == s.czxid && st.version == s.version.wrapping_add(1) =>
            {
                let stat = *st;
                self.finish(UpdateEvent::Updated { stat })
            }
            (None, Some((_, st))) if ours && st.version == 0 => {
                let stat = *st;
                self.finish(UpdateEvent::Updated { stat })
            }
            _ => self.fail(Error::ConnectionLoss),
        }
    }

    fn on_read(&mut self, now: Instant, result: Reply) {
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
        if matches!(self.stage, Stage::Verifying { .. }) {
            self.verify(found)
        } else {
            self.present(found)
        }
    }

    /// Our write failed with `e`: lost (verify), refused (again), or final.
    fn write_failed(&mut self, now: Instant, e: Error) {
        if e.may_have_applied() || e.ends_session() {
            self.doubt();
            self.again(now);
        } else if e.is_retryable() {
            self.again(now); // refused: never applied; the same write after a backoff
        } else {
            self.fail(e)
        }
    }

    fn on_set(&mut self, now: Instant, result: Reply) {
        match result {
            Ok(Response::Stat(stat)) => self.written(now, stat),
            Ok(_) => self.fail_in_doubt(Error::UnexpectedReply, true),
            Err(Error::Server(ErrorCode::BadVersion | ErrorCode::NoNode)) => self.lost_race(now),
            Err(e) => self.write_failed(now, e),
        }
    }

    /// Our write may have been applied: verify it.
    fn doubt(&mut self) {
        self.stage = match core::mem::replace(&mut self.stage, Stage::Reading) {
            Stage::Writing { seen, proposal } | Stage::Verifying { seen, proposal } => {
                Stage::Verifying { seen, proposal }
            }
            other => other,
        };
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
        if let Stage::Writing { proposal, .. } = &self.stage {
            self.known = Some((proposal.clone(), stat, now));
        }
        self.finish(UpdateEvent::Updated { stat });
    }

    fn on_create(&mut self, now: Instant, result: Reply) {
        match result {
            Ok(Response::PathStat { stat, .. }) => self.written(now, stat),
            Ok(_) => self.fail_in_doubt(Error::UnexpectedReply, true),
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

impl Update {
    /// The answer to request `op`, sent for `purpose` (`on_reply`: `protocol_head!`).
    fn on_answer(&mut self, now: Instant, _op: OpId, purpose: Op, result: Reply) {
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
}

impl Protocol for Update {
    protocol_head!(UpdateEvent, answer);

    fn on_session(&mut self, now: Instant, change: SessionChange) {
        self.known = None; // what we wrote may have been overwritten meanwhile
        match change {
            SessionChange::Connected { .. } => {
                self.link.up();
                // A new session: whatever we knew may be stale.
                self.sync_next |= !matches!(self.stage, Stage::Idle | Stage::Done);
            }
            SessionChange::Reconnected { .. } => {
                self.link.up();
                self.sync_next = true;
            }
            SessionChange::Suspended => {}
            SessionChange::Expired => {
                let writing = self.kit.any(|p| matches!(p, Op::Set | Op::Create));
                self.kit.clear_requests();
                self.link.down();
                if writing {
                    self.doubt();
                }
            }
            SessionChange::Closed => {
                self.link.down();
                self.fail(Error::Closed);
            }
        }
        self.drive(now);
    }

    link_protocol!(stage == Stage::Done);

    fn on_abandon(&mut self, _now: Instant) {
        self.fail(Error::Closed);
    }

    fn check(&self) {
        match &self.stage {
            Stage::Idle | Stage::Done => {
                debug_assert_eq!(self.kit.in_flight(), 0, "no request unless updating")
            }
            Stage::Writing { seen: None, .. } | Stage::Verifying { seen: None, .. } => {
                debug_assert!(
                    self.config.create_if_missing,
                    "a create only when asked to create a missing node"
                )
            }
            _ => {}
        }
        if !self.link.is_up() {
            debug_assert_eq!(self.kit.in_flight(), 0, "no request without a session");
        }
        if self.kit.any(|p| matches!(p, Op::Set | Op::Create)) {
            debug_assert!(
                matches!(self.stage, Stage::Writing { .. }),
                "a write on the wire only while writing: {:?}",
                self.stage
            );
        }
    }
}
