//! The lease's machine: kazoo's lock on the lease path as its one part (a [`Lock`]
//! with [`Naming::Kazoo`]), and its own requests on a [`Kit`] while that lock is held.

use alloc::string::String;
use alloc::vec::Vec;
use bytes::Bytes;
use core::mem;
use core::time::Duration;

use super::record::Holder;
use super::record::{self, Record, MAX_END};
use super::types::{LeaseConfig, LeaseEvent, LeaseOutcome, HOLDER, MAX_IDENTIFIER};
use crate::error::Error;
use crate::proto::*;
use crate::recipe::kit::{join, one_part, own_and_parts, recipe_events, Kit, OwnSlot, Parts};
use crate::recipe::lock::{compact_acl, Lock, LockConfig, LockEvent, LockKind, Naming};
use crate::recipe::{Machine, OpId, Recipe, SessionChange};
use crate::session::WatchEvent;
use crate::time::Instant;

/// What each of our own requests is for.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum Purpose {
    Sync,
    Read,
    Write,
}

/// Where the attempt stands; each variant carries the data of that phase.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum Phase {
    Idle,
    /// Taking kazoo's lock on the path.
    Locking,
    /// Holding it: reading the record (`sent`: the `sync` and the read are out).
    Reading {
        sent: bool,
    },
    /// Holding it: writing our record, ending at `end`, in place of the record of
    /// version `prior` (`None`: there is none).
    Writing {
        end: Duration,
        prior: Option<i32>,
        sent: bool,
    },
    /// Letting go of the lock; then `outcome` (`None`: abandoned, nobody listens).
    Releasing {
        outcome: Option<LeaseEvent>,
    },
    Done,
}

/// One attempt at a kazoo `NonBlockingLease`. See the [module docs](super).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Lease {
    config: LeaseConfig,
    kit: Kit<Purpose, LeaseEvent>,
    /// kazoo's lock on the lease path.
    lock: Lock,
    phase: Phase,
    /// The wall clock given at the start, and the instant it was read at: the wall
    /// time at `now` is `wall + (now - at)`.
    clock: (Instant, Duration),
}

impl Lease {
    /// An attempt that does nothing until [`start`](Self::start).
    pub fn new(mut config: LeaseConfig) -> Lease {
        config.acl = compact_acl(&config.acl);
        let hex: String = config.id.chars().filter(|c| *c != '-').collect();
        let mut lock = LockConfig::new(&config.path, LockKind::Exclusive, &hex);
        lock.naming = Naming::Kazoo;
        lock.data = Bytes::from(config.identifier.clone().into_bytes());
        lock.acl = config.acl.clone();
        Lease {
            kit: Kit::new(&config.id),
            lock: Lock::new(lock),
            config,
            phase: Phase::Idle,
            clock: (Instant::ZERO, Duration::ZERO),
        }
    }

    /// The configuration.
    pub fn config(&self) -> &LeaseConfig {
        &self.config
    }

    /// The record's path, `<path>/lease_holder`.
    pub fn holder_path(&self) -> String {
        join(&self.config.path, HOLDER)
    }

    /// Our lock node's name, once known (while the attempt runs).
    pub fn lock_node(&self) -> Option<&str> {
        self.lock.node()
    }

    /// Has the final event been reported?
    pub fn has_ended(&self) -> bool {
        self.phase == Phase::Done
    }

    /// Starts the attempt; `wall` is the wall clock at `now`: time since the Unix epoch,
    /// UTC (the adapters read `SystemTime`). Only the first call counts.
    pub fn start(&mut self, now: Instant, wall: Duration) {
        if self.phase != Phase::Idle {
            return;
        }
        self.clock = (now, wall);
        if let Some(error) = self.invalid() {
            self.phase = Phase::Done;
            self.lock.handle_abandon(now); // never started: it ends at once
            self.kit.emit(LeaseEvent::Failed { error });
            return self.after_input(now);
        }
        self.phase = Phase::Locking;
        let _ = self.lock.acquire(now, None);
        self.after_input(now);
    }

    /// The wall clock at `now`.
    pub fn wall(&self, now: Instant) -> Duration {
        self.clock.1 + now.saturating_since(self.clock.0)
    }

    /// Why the config cannot run, if it cannot.
    fn invalid(&self) -> Option<Error> {
        let c = &self.config;
        if let Err(error) = validate_path(&c.path) {
            return Some(Error::InvalidPath {
                path: c.path.clone(),
                error,
            });
        }
        let bad_id = c.id.is_empty()
            || !c
                .id
                .chars()
                .all(|ch| ch.is_ascii_alphanumeric() || ch == '-');
        let late = self.clock.1.saturating_add(c.duration) > MAX_END;
        let long = c.identifier.is_empty() || c.identifier.len() > MAX_IDENTIFIER;
        (bad_id || late || long).then_some(Error::Server(ErrorCode::BadArguments))
    }

    /// Reads the lock's events, then moves on: sends what is due while the lock is
    /// held, ends once it is let go.
    fn drive(&mut self, now: Instant) {
        while let Some(e) = self.lock.poll_event() {
            self.on_lock(now, e);
        }
        if let Phase::Releasing { .. } = self.phase {
            if self.lock.has_ended() {
                if let Phase::Releasing { outcome: Some(o) } =
                    mem::replace(&mut self.phase, Phase::Done)
                {
                    self.kit.emit(o);
                }
            }
            return;
        }
        if !self.due() || !self.kit.allows(now) {
            return;
        }
        let (holder, acl) = (self.holder_path(), self.acl());
        match &mut self.phase {
            Phase::Reading { sent } => {
                *sent = true;
                self.kit.sync(Purpose::Sync, &holder);
                let read = PathWatch {
                    path: holder,
                    watch: false,
                };
                self.kit.send(Purpose::Read, Request::GetData(read));
            }
            Phase::Writing { end, prior, sent } => {
                *sent = true;
                let data = Bytes::from(record::encode_record(&self.config.identifier, *end));
                let create = CreateRequest::new(&holder, data, acl, CreateMode::Persistent);
                let request = match *prior {
                    None => Request::Create(create),
                    Some(version) => Request::Multi(Vec::from([
                        MultiOp::Delete(DeleteRequest {
                            path: holder,
                            version,
                        }),
                        MultiOp::Create(create),
                    ])),
                };
                self.kit.send(Purpose::Write, request);
            }
            _ => {}
        }
    }

    /// Is a request of ours waiting to be sent (the lock held and verified)?
    fn due(&self) -> bool {
        let unsent = matches!(
            self.phase,
            Phase::Reading { sent: false } | Phase::Writing { sent: false, .. }
        );
        unsent && self.lock.is_held_unquestioned()
    }

    fn acl(&self) -> Vec<Acl> {
        if self.config.acl.is_empty() {
            Acl::open_unsafe()
        } else {
            self.config.acl.clone()
        }
    }

    /// One event of the lock.
    fn on_lock(&mut self, now: Instant, e: LockEvent) {
        match (&mut self.phase, e) {
            (Phase::Locking, LockEvent::Acquired { .. }) => {
                self.phase = Phase::Reading { sent: false };
            }
            (Phase::Locking | Phase::Reading { .. } | Phase::Writing { .. }, e)
                if e.ends_attempt() =>
            {
                let error = match e.acquire_outcome() {
                    Some(Err(error)) => error,
                    _ => Error::Closed,
                };
                self.end(now, LeaseEvent::Failed { error });
            }
            // A release refused for good is never reported as a success.
            (
                Phase::Releasing {
                    outcome: Some(outcome),
                },
                LockEvent::Failed { error },
            ) if !error.ends_session() => *outcome = LeaseEvent::Failed { error },
            _ => {}
        }
    }

    /// Lets go of the lock, then reports `outcome`.
    fn end(&mut self, now: Instant, outcome: LeaseEvent) {
        self.phase = Phase::Releasing {
            outcome: Some(outcome),
        };
        if !self.lock.has_ended() {
            let _ = self.lock.release(now);
        }
    }

    /// The record as read (or none): refuse, or write ours.
    fn decide(&mut self, now: Instant, found: Option<(Bytes, i32)>) {
        let wall = self.wall(now);
        let end = Duration::from_secs(wall.saturating_add(self.config.duration).as_secs());
        let Some((data, version)) = found else {
            let prior = None;
            self.phase = Phase::Writing {
                end,
                prior,
                sent: false,
            };
            return;
        };
        match record::decode_record(&data) {
            None => {
                let path = self.holder_path();
                self.end(
                    now,
                    LeaseEvent::Failed {
                        error: Error::BadLease { path },
                    },
                );
            }
            Some(Record::OtherVersion(_)) => self.refuse(now, None),
            Some(Record::Holder(h)) if h.identifier != self.config.identifier && wall < h.end => {
                self.refuse(now, Some(h))
            }
            Some(Record::Holder(_)) => {
                let prior = Some(version);
                self.phase = Phase::Writing {
                    end,
                    prior,
                    sent: false,
                };
            }
        }
    }

    fn refuse(&mut self, now: Instant, holder: Option<Holder>) {
        self.end(now, LeaseEvent::Decided(LeaseOutcome::Refused { holder }));
    }

    /// One of our own replies.
    fn on_own_reply(&mut self, now: Instant, op: OpId, result: Result<Response, Error>) {
        let Some((purpose, result)) = self.kit.answer(op, result) else {
            return;
        };
        let failed = multi_failure(&result).map(|(_, code)| Error::Server(code));
        let result = match failed {
            Some(error) => Err(error),
            None => result,
        };
        match (purpose, &self.phase) {
            (Purpose::Sync, _) => {}
            (Purpose::Read, Phase::Reading { sent: true }) => match result {
                Ok(Response::Data { data, stat }) => self.decide(now, Some((data, stat.version))),
                Err(Error::Server(ErrorCode::NoNode)) => self.decide(now, None),
                result => self.retry_or_fail(now, result),
            },
            (
                Purpose::Write,
                Phase::Writing {
                    end, sent: true, ..
                },
            ) => match result {
                Ok(_) => {
                    let end = *end;
                    self.kit.succeeded();
                    self.end(now, LeaseEvent::Decided(LeaseOutcome::Granted { end }));
                }
                // The record changed under us (a writer that does not take the lock):
                // read it again, after a pause.
                Err(Error::Server(
                    ErrorCode::NodeExists | ErrorCode::NoNode | ErrorCode::BadVersion,
                )) => {
                    self.kit.failed(now);
                    self.phase = Phase::Reading { sent: false };
                }
                // In doubt whether it landed: read again (ours then, renewed).
                result => self.retry_or_fail(now, result),
            },
            _ => {}
        }
    }

    /// A read or a write that did not get through: read again (after a pause) if it
    /// may, end if it cannot; the session's end is the lock's to report.
    fn retry_or_fail(&mut self, now: Instant, result: Result<Response, Error>) {
        match result {
            Err(e) if e.ends_session() => {}
            Err(e) if e.is_retryable() => {
                self.kit.failed(now);
                self.phase = Phase::Reading { sent: false };
            }
            Err(error) => self.end(now, LeaseEvent::Failed { error }),
            Ok(_) => self.end(
                now,
                LeaseEvent::Failed {
                    error: Error::UnexpectedReply,
                },
            ),
        }
    }

    /// We set no watch of our own.
    fn on_own_watch(&mut self, _: Instant, _: &WatchEvent) {}

    /// After the kit and the lock followed a session change.
    fn on_own_session(&mut self, _: Instant, change: SessionChange) {
        if matches!(change, SessionChange::Expired | SessionChange::Closed) {
            // The session's requests may never be answered: the lock reports the end.
            self.kit.clear_requests();
        }
    }

    /// The owner went away: release what we hold, report nothing.
    fn on_own_abandon(&mut self, now: Instant) {
        match self.phase {
            Phase::Idle => {
                self.phase = Phase::Done;
                self.lock.handle_abandon(now);
            }
            Phase::Done => {}
            Phase::Releasing { ref mut outcome } => *outcome = None,
            _ => {
                self.phase = Phase::Releasing { outcome: None };
                self.lock.handle_abandon(now);
            }
        }
    }

    /// Every input and command ends here: send what is due, then (debug builds) check.
    fn after_input(&mut self, now: Instant) {
        self.drive(now);
        if cfg!(debug_assertions) {
            self.check();
        }
    }

    /// The rules the types cannot spell, checked after every input in debug builds.
    fn check(&self) {
        match &self.phase {
            Phase::Idle => debug_assert!(self.kit.is_quiet()),
            Phase::Reading { sent: true } | Phase::Writing { sent: true, .. } => {
                debug_assert!(
                    !self.kit.is_quiet(),
                    "a read or write marked sent is answered"
                );
            }
            Phase::Done => debug_assert!(self.lock.has_ended()),
            _ => {}
        }
        if let Phase::Writing { end, .. } = &self.phase {
            debug_assert_eq!(end.subsec_nanos(), 0);
            debug_assert!(*end <= MAX_END);
        }
    }
}

impl Parts for Lease {
    type Part = Lock;

    one_part!(lock);

    fn own_deadline(&self) -> Option<Instant> {
        self.kit.timeout(None, self.due())
    }

    /// The lock's ops are even (slot 0), ours odd (`OWN`).
    fn encode(&self, _: usize, op: OpId) -> OpId {
        op.saturating_mul(OWN.slots)
    }

    fn route(&self, op: OpId) -> Option<(usize, OpId)> {
        (op % OWN.slots == 0).then_some((0, op / OWN.slots))
    }
}

/// Of every two op ids, the even one is the lock's, the odd one ours.
const OWN: OwnSlot = OwnSlot { slots: 2, own: 1 };

impl Machine for Lease {
    own_and_parts!(OWN);

    fn is_done(&self) -> bool {
        self.phase == Phase::Done && self.kit.is_idle() && self.lock.is_done()
    }
}

recipe_events!(Lease => LeaseEvent, kit.poll_event);
