//! The election's inner workings: its candidacies (each a candidate [`Lock`]), its
//! acknowledgement, and its [`Protocol`] on the kit.

use alloc::boxed::Box;
use alloc::format;
use alloc::string::String;
use alloc::vec;
use bytes::Bytes;

use super::{
    ack_node, Ack, Candidacy, Election, ElectionEvent, End, Leader, Parts, Phase, Purpose,
    Resigning, Written,
};
use crate::error::Error;
use crate::proto::*;
use crate::recipe::kit::{Plumbing, Protocol, Reply, MAX_PARENT_ROUNDS};
use crate::recipe::lock::{compact_acl, node_id, Lock, LockConfig, LockEvent, LockKind};
use crate::recipe::path::ancestor_creates;
use crate::recipe::{Machine, OpId, Recipe, SessionChange};
use crate::session::WatchEvent;
use crate::time::Instant;

/// Op ids: the candidate lock's ops are even (its generation in the high bits, so a
/// late reply to an earlier candidacy finds nobody), ours odd.
const GEN_SHIFT: u32 = 33;

impl Parts {
    fn encode(&self, op: OpId) -> OpId {
        (u64::from(self.generation) << GEN_SHIFT) | ((op & 0xffff_ffff) << 1)
    }

    /// The current lock's op for `op`, if it is one.
    fn lock_op(&self, op: OpId) -> Option<OpId> {
        (op & 1 == 0 && (op >> GEN_SHIFT) as u32 == self.generation)
            .then_some((op >> 1) & 0xffff_ffff)
    }

    fn lock_mut(&mut self) -> Option<&mut Lock> {
        match &mut self.phase {
            Phase::Candidate(c) => Some(&mut c.lock),
            Phase::Out => None,
        }
    }
}

impl Plumbing<ElectionEvent> for Parts {
    fn poll_request(&mut self) -> Option<(OpId, Request)> {
        if let Some((op, r)) = self.kit.poll_request() {
            return Some(((op << 1) | 1, r));
        }
        let (op, r) = self.lock_mut()?.poll_request()?;
        Some((self.encode(op), r))
    }

    fn poll_event(&mut self) -> Option<ElectionEvent> {
        self.kit.poll_event()
    }

    fn session(&mut self, change: SessionChange) {
        self.kit.session(change);
    }
}

impl Election {
    fn our_path(&self) -> Option<String> {
        let node = self.node()?;
        Some(format!(
            "{}/{}",
            self.config.dir.trim_end_matches('/'),
            node
        ))
    }

    /// Makes a new candidacy if one is wanted and possible.
    pub(super) fn start(&mut self, now: Instant) {
        let Some(session_id) = self.session_id else {
            return;
        };
        if self.candidacy().is_some() || !self.wanted || self.end.closing() || self.end.ended() {
            return;
        }
        if let Err(error) = self.check_paths() {
            self.fail(error);
            return;
        }
        self.parts.generation = self.parts.generation.wrapping_add(1);
        let (a, b) = self.config.entropy;
        let id = node_id(a, b.wrapping_add(u64::from(self.parts.generation)));
        let mut config = LockConfig::new(&self.config.dir, LockKind::Latch, &id);
        config.data = Bytes::from(self.config.participant.clone().into_bytes());
        config.acl = compact_acl(&self.config.acl);
        let mut lock = Lock::new(config);
        lock.handle_session(now, SessionChange::Connected { session_id });
        lock.acquire(now, None);
        self.parts.phase = Phase::Candidate(Box::new(Candidacy {
            lock,
            joined: false,
            leader: None,
        }));
        self.pump(now);
    }

    fn check_paths(&self) -> Result<(), Error> {
        let dir = self.config.dir.trim_end_matches('/');
        let ack = self.config.ack_dir.trim_end_matches('/');
        validate_path(ack).map_err(|error| Error::InvalidPath {
            path: ack.into(),
            error,
        })?;
        if dir.is_empty() || ack == "/" || ack.starts_with(&format!("{dir}/")) || ack == dir {
            return Err(Error::InvalidPath {
                path: ack.into(),
                error: PathError::Empty,
            });
        }
        Ok(())
    }

    fn fail(&mut self, error: Error) {
        self.wanted = false;
        self.end = self.end.end();
        self.emit(ElectionEvent::Failed { error });
    }

    pub(super) fn release_lock(&mut self, now: Instant) {
        if let Some(l) = self.parts.lock_mut() {
            l.release(now);
        }
        self.pump(now);
    }

    /// Moves the candidate lock's events into ours; drops it when it is done.
    fn pump(&mut self, now: Instant) {
        self.report_joined();
        while let Some(e) = self.parts.lock_mut().and_then(|l| l.poll_event()) {
            self.report_joined();
            self.on_lock_event(now, e);
        }
        if self.candidacy().is_some_and(|c| c.lock.is_done()) {
            self.parts.phase = Phase::Out;
            self.candidacy_over();
            self.start(now);
            self.maybe_end();
        }
    }

    fn on_lock_event(&mut self, _now: Instant, e: LockEvent) {
        match e {
            LockEvent::Acquired {
                fencing_token,
                node,
            } => {
                if let Some(c) = self.candidacy_mut() {
                    c.leader = Some(Leader {
                        token: fencing_token,
                        node: node.clone(),
                        ack: Ack::Idle,
                        parent_rounds: 0,
                    });
                }
                self.emit(ElectionEvent::Elected {
                    fencing_token,
                    node,
                });
            }
            LockEvent::Suspended => self.emit(ElectionEvent::Suspended),
            LockEvent::Reconnected => self.emit(ElectionEvent::Reconnected),
            LockEvent::Lost { reason } => {
                self.deposed();
                self.emit(ElectionEvent::Lost { reason });
                if !self.config.rejoin && self.resigning == Resigning::No {
                    // The candidacy ended by itself and we do not stand again: the
                    // candidate ends with it (`Closed` once the lock is done).
                    self.wanted = false;
                    self.end = self.end.close();
                }
            }
            LockEvent::Released | LockEvent::Cancelled | LockEvent::NotAcquired => {
                self.deposed();
            }
            LockEvent::Failed { error } => {
                self.deposed();
                self.lock_failed(error);
            }
            LockEvent::RevocationRequested => {}
        }
    }

    /// The candidate lock failed with `error` (we were deposed already).
    fn lock_failed(&mut self, error: Error) {
        let node_deleted = error == Error::Server(ErrorCode::NoNode);
        if node_deleted && self.resigning != Resigning::No {
            // Our node went while we were withdrawing it: that is the point.
        } else if error.ends_session() && self.config.rejoin && !self.end.closing() {
            // The session is gone: stand again in the next one.
        } else if error.ends_session() {
            self.wanted = false;
        } else if node_deleted && self.config.rejoin && !self.end.closing() {
            // Our node was deleted while we waited (an operator, or the server
            // expiring our session before we heard of it): stand again.
        } else {
            self.fail(error);
        }
    }

    /// Reports `Joined` once per candidacy, when its node is known.
    fn report_joined(&mut self) {
        let Some(c) = self.candidacy_mut() else {
            return;
        };
        if c.joined {
            return;
        }
        if let Some(node) = c.lock.node() {
            let node = node.into();
            c.joined = true;
            self.emit(ElectionEvent::Joined { node });
        }
    }

    /// Our candidate node is gone (the lock ended) and our acknowledgement withdrawn:
    /// a resignation is complete, however it ended (deleted, deposed, the session gone).
    fn candidacy_over(&mut self) {
        if let Resigning::Yes { then_join } = self.resigning {
            if self.candidacy().is_none() && !self.written.withdrawing() {
                self.resigning = Resigning::No;
                self.wanted = then_join && !self.end.closing();
                self.emit(ElectionEvent::Resigned);
            }
        }
    }

    fn deposed(&mut self) {
        if let Some(c) = self.candidacy_mut() {
            c.leader = None;
        }
        // Our acknowledgement, if any, must go too: its name is ours alone, so deleting
        // it cannot touch a later leader's.
        self.written.withdraw();
    }

    pub(super) fn maybe_end(&mut self) {
        if self.end == End::Closing && self.candidacy().is_none() && !self.written.withdrawing() {
            self.end = End::Closed;
            self.emit(ElectionEvent::Closed);
        }
    }

    pub(super) fn drive(&mut self, now: Instant) {
        let kit = &self.parts.kit;
        if !kit.allows(now) || !kit.is_quiet() || self.session_id.is_none() {
            return;
        }
        if let Written::Withdraw(path) = &self.written {
            let path = path.clone();
            self.parts.kit.send(
                Purpose::Withdraw,
                Request::Delete(DeleteRequest { path, version: -1 }),
            );
            return;
        }
        let ours = self.our_path();
        let Phase::Candidate(c) = &mut self.parts.phase else {
            return;
        };
        let (Some(ours), true, Some(leader)) = (ours, c.lock.is_held(), c.leader.as_mut()) else {
            return;
        };
        if leader.ack != Ack::Wanted {
            return;
        }
        leader.ack = Ack::Busy;
        let path = ack_node(&self.config.ack_dir, leader.token);
        let ops = vec![
            MultiOp::Check(CheckVersionRequest {
                path: ours,
                version: -1,
            }),
            MultiOp::Create(CreateRequest::new(
                path.clone(),
                Bytes::from(self.config.participant.clone().into_bytes()),
                self.config.acl.clone(),
                CreateMode::Ephemeral,
            )),
        ];
        self.written = Written::Maybe(path);
        self.parts.kit.send(Purpose::Write, Request::Multi(ops));
    }

    fn on_own_reply(&mut self, now: Instant, purpose: Purpose, result: Reply) {
        if purpose == Purpose::Parent {
            // What the parents' creation came to shows in the next write.
            return;
        }
        if let Err(e) = &result {
            if e.is_retryable() {
                // Retried when the session allows (a write that was applied after all
                // answers `NodeExists` next time: ours, by its name).
                self.parts.kit.failed(now);
                if let Some(leader) = self.leader_mut().filter(|l| l.ack == Ack::Busy) {
                    leader.ack = Ack::Wanted;
                }
                return;
            }
            if e.ends_session() {
                // The session's end answered our write: nothing is in flight, and
                // nothing is to be written (this leadership ends with the session,
                // whose event comes next).
                if let Some(leader) = self.leader_mut().filter(|l| l.ack == Ack::Busy) {
                    leader.ack = Ack::Idle;
                }
                return;
            }
        }
        self.parts.kit.succeeded();
        match purpose {
            Purpose::Parent => {}
            Purpose::Withdraw => {
                // Deleted or not there (anything else: nothing more we can do).
                self.written = Written::Nothing;
                if self.resigning != Resigning::No && self.candidacy().is_some() {
                    self.release_lock(now);
                }
                self.candidacy_over();
            }
            Purpose::Write => match self.leader_mut() {
                Some(leader) if leader.ack == Ack::Busy => self.on_write(result),
                // Deposed (or resigning) while it was in flight. (`written` stays: an
                // earlier attempt may have been applied; the withdrawal deletes it, or
                // finds it absent.)
                _ => {}
            },
        }
    }

    /// The answer to our acknowledgement's multi, sent by the current leadership.
    fn on_write(&mut self, result: Reply) {
        let failure = multi_failure(&result);
        let rounds = self.leader().map_or(0, |l| l.parent_rounds);
        match (result, failure) {
            (Ok(Response::Multi(_)), None) => self.acknowledged(),
            // Applied before (its reply lost): the name is ours alone.
            (_, Some((1, ErrorCode::NodeExists))) => self.acknowledged(),
            // No acknowledgement directory: so no acknowledgement of ours either.
            (_, Some((1, ErrorCode::NoNode))) if rounds < MAX_PARENT_ROUNDS => {
                if let Some(leader) = self.leader_mut() {
                    leader.parent_rounds += 1;
                    leader.ack = Ack::Wanted;
                }
                self.written = Written::Nothing;
                let node = ack_node(&self.config.ack_dir, 0);
                for (_, req) in ancestor_creates(&node, &self.config.acl, CreateMode::Container) {
                    self.parts.kit.send(Purpose::Parent, req);
                }
            }
            (_, Some((1, ErrorCode::NoNode))) => {
                self.written = Written::Nothing;
                self.ack_failed(Error::NoParent {
                    path: self.config.ack_dir.clone(),
                    code: ErrorCode::NoNode,
                })
            }
            // Refused (deposed: the check failed; no permission...). An earlier
            // attempt may have been applied: `written` stays for the withdrawal.
            (_, Some((_, code))) => self.ack_failed(Error::Server(code)),
            (Err(e), None) => self.ack_failed(e),
            (Ok(_), None) => self.ack_failed(Error::UnexpectedReply),
        }
    }

    fn acknowledged(&mut self) {
        let Some(leader) = self.leader_mut() else {
            return;
        };
        leader.ack = Ack::Done;
        leader.parent_rounds = 0;
        let fencing_token = leader.token;
        self.emit(ElectionEvent::Acknowledged { fencing_token });
    }

    fn ack_failed(&mut self, error: Error) {
        if let Some(leader) = self.leader_mut() {
            leader.ack = Ack::Idle;
        }
        self.emit(ElectionEvent::AckFailed { error });
    }

    /// The session ended: every request was answered; our nodes went with it.
    fn session_ended(&mut self, change: SessionChange) {
        self.session_id = None;
        self.parts.kit.clear_requests();
        self.written = Written::Nothing;
        if change == SessionChange::Closed || !self.config.rejoin {
            self.wanted = false;
            self.end = self.end.close();
        }
    }

    /// After every input: the lock's events in, a candidacy made if wanted, our
    /// requests sent, the end reported if reached.
    fn settle(&mut self, now: Instant) {
        self.pump(now);
        // A resignation that ended with our acknowledgement's withdrawal may stand again.
        self.start(now);
        self.drive(now);
        self.maybe_end();
    }
}

impl Protocol for Election {
    type Event = ElectionEvent;

    fn kit(&mut self) -> &mut dyn Plumbing<ElectionEvent> {
        &mut self.parts
    }

    fn on_reply(&mut self, now: Instant, op: OpId, result: Reply) {
        if op & 1 == 1 {
            if let Some(purpose) = self.parts.kit.take(op >> 1) {
                self.on_own_reply(now, purpose, result);
            }
        } else if let Some(op) = self.parts.lock_op(op) {
            if let Some(lock) = self.parts.lock_mut() {
                lock.handle_reply(now, op, result);
            }
        }
        self.settle(now);
    }

    fn on_watch(&mut self, now: Instant, op: OpId, event: &WatchEvent) {
        if let Some(op) = self.parts.lock_op(op) {
            if let Some(lock) = self.parts.lock_mut() {
                lock.handle_watch(now, op, event);
            }
        }
        self.pump(now);
        self.drive(now);
    }

    fn on_session(&mut self, now: Instant, change: SessionChange) {
        if let Some(lock) = self.parts.lock_mut() {
            lock.handle_session(now, change);
        }
        match change {
            SessionChange::Connected { session_id } => self.session_id = Some(session_id),
            SessionChange::Reconnected { session_id } => self.session_id = Some(session_id),
            SessionChange::Suspended => {}
            SessionChange::Expired | SessionChange::Closed => self.session_ended(change),
        }
        self.pump(now);
        if matches!(change, SessionChange::Expired | SessionChange::Closed) {
            // The lock has ended with the session; a resignation is complete.
            self.parts.phase = Phase::Out;
            self.candidacy_over();
        }
        self.start(now);
        self.drive(now);
        self.maybe_end();
    }

    fn on_timeout(&mut self, now: Instant) {
        if let Some(lock) = self.parts.lock_mut() {
            lock.handle_timeout(now);
        }
        self.pump(now);
        self.drive(now);
    }

    fn on_abandon(&mut self, now: Instant) {
        self.close(now);
    }

    fn deadline(&self) -> Option<Instant> {
        // Our retry deadline matters only while `drive` waits for it to send: not while
        // our request is in flight (the deadline has passed by then).
        let ack_waits = self.candidacy().is_some_and(|c| {
            c.lock.is_held() && c.leader.as_ref().is_some_and(|l| l.ack == Ack::Wanted)
        });
        let waiting = self.parts.kit.is_quiet() && (self.written.withdrawing() || ack_waits);
        let ours = if waiting {
            self.parts.kit.retry_at()
        } else {
            None
        };
        let lock = self.candidacy().and_then(|c| c.lock.poll_timeout());
        match (ours, lock) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    fn finished(&self) -> bool {
        self.end.ended() && self.candidacy().is_none() && self.parts.kit.is_idle()
    }

    /// The rules the phases cannot spell, checked after every input in debug builds.
    fn check(&self) {
        if let Some(c) = self.candidacy() {
            if let Some(leader) = &c.leader {
                debug_assert!(c.joined, "leading before `Joined` was reported");
                debug_assert!(
                    leader.ack != Ack::Busy || self.parts.kit.any(|p| *p == Purpose::Write),
                    "an acknowledgement in flight with no write in flight"
                );
                debug_assert!(
                    self.resigning == Resigning::No || leader.ack == Ack::Idle,
                    "an acknowledgement wanted while resigning"
                );
                debug_assert!(!self.end.ended(), "leading after the end");
            }
        }
        debug_assert!(
            self.session_id.is_some() || self.parts.kit.is_quiet(),
            "requests of ours with no session"
        );
    }
}
