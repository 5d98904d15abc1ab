//! Leader election (ZooKeeper recipes "Leader Election"), Curator-compatible, herd-free,
//! fenced, with the recipe documents' *leader acknowledgement*.
//!
//! # Protocol
//!
//! A candidate is a [`Lock`] of kind [`LockKind::Latch`]: an `EPHEMERAL_SEQUENTIAL`
//! node `<dir>/_c_<uuid>-latch-<seq>` holding the participant id — Apache Curator
//! `LeaderLatch`'s format, so a Rust service and a Java service using `LeaderLatch` on
//! the same path elect one leader between them. Candidates are ordered by the sequence
//! after the marker; the lowest leads. Everything the lock does, a candidate does: one
//! round trip to join (create + list, pipelined), a watch on its predecessor only (no
//! herd; when the predecessor goes and it was the only lower candidate, we lead
//! without listing again), lost creates found again by the protected prefix, a
//! reconnect verified with `sync` + `exists`, a watch on our own node from its
//! creation (someone deleting it deposes us at once).
//!
//! # The one rule: act as leader only between `Elected` and the next `Suspended`/`Lost`
//!
//! [`ElectionEvent::Elected`] means our node was the lowest when the server answered.
//! The client reports [`Suspended`](ElectionEvent::Suspended) when it has not heard from
//! the server for 2/3 of the session timeout (its read timeout); the server expires
//! the session — deleting our node, which is what lets the next candidate lead — only
//! after the full timeout without hearing from us. So a leader that stops acting at
//! `Suspended` has stopped at least 1/3 of the timeout before anyone else is elected
//! (less the clock drift between the two machines over that time). `Reconnected`
//! (same session, our node verified after a `sync`) makes it leader again; `Lost` ends
//! it (expiry, our node deleted, session closed). For protected resources that cannot
//! rely on timing, `Elected { fencing_token }` carries our node's creation zxid: it
//! rises from one leader to the next.
//!
//! # Acknowledgement
//!
//! "The absence of a predecessor does not mean the creator knows it is the leader":
//! after its leader procedure the application calls
//! [`acknowledge`](Election::acknowledge); the leader creates the ephemeral node
//! `<ack_dir>/<fencing token>` holding its participant id ([`ack_node`]), in one
//! `multi` that also checks our candidate node still exists, so a deposed leader cannot
//! acknowledge. [`ElectionConfig::ack_dir`] is by default the sibling `<dir>-leader`,
//! outside the candidates' directory (Curator counts every child there as a
//! candidate); it is created as a container when missing. The node's name is unique
//! to one leadership, which makes everything else simple: a write whose reply was
//! lost answers `NodeExists` next time — ours; a leader that resigns deletes its
//! acknowledgement before its candidate node (observers never see an acknowledgement
//! of a candidate that is gone); a leader deposed while its session lives (an operator
//! deleted its node) deletes its own without any risk of touching the next leader's.
//! Observers count the acknowledgement whose token is the current leader's.
//!
//! # Commands and events
//!
//! * [`join`](Election::join) becomes a candidate (again); [`resign`](Election::resign)
//!   deletes our node (`Resigned` once it is gone), then joins again if asked;
//!   [`close`](Election::close) resigns for good and ends the machine.
//! * With [`ElectionConfig::rejoin`] (the default, as Curator's `LeaderLatch`), a
//!   candidacy that ends by itself — the session expired and a new one started, or our
//!   node was deleted — is made again with a fresh node.
//! * Events: `Joined` (our node exists: we are in line), `Elected`, `Suspended`,
//!   `Reconnected`, `Lost`, `Acknowledged`,
//!   `AckFailed`, `Resigned`, `Failed` (final: the candidacy cannot be made, e.g. no
//!   permission), and `Closed` (final).
//!
//! ```
//! use zk_recipes::recipe::election::{Election, ElectionConfig};
//! use zk_recipes::recipe::{Recipe, SessionChange};
//! use zk_recipes::time::Instant;
//!
//! let mut e = Election::new(ElectionConfig::new("/election/app", "node-1", (7, 9)));
//! e.handle_session(Instant::ZERO, SessionChange::Connected { session_id: 7 });
//! e.join(Instant::ZERO);
//! let (_, create) = e.poll_request().unwrap(); // create2 _c_<uuid>-latch- ...
//! let (_, list) = e.poll_request().unwrap(); // ... and getChildren, back to back
//! let zk_recipes::proto::Request::Create2(c) = create else { panic!() };
//! assert_eq!(c.path, "/election/app/_c_00000000-0000-4007-8000-00000000000a-latch-");
//! assert_eq!(c.data.as_ref(), b"node-1"); // the participant id, as Curator writes it
//! assert_eq!(list.op_code(), zk_recipes::proto::OpCode::GetChildren);
//! ```

pub mod observer;

use alloc::collections::VecDeque;
use alloc::format;
use alloc::string::String;
use alloc::vec;
use alloc::vec::Vec;
use bytes::Bytes;

use super::kit::{Kit, MAX_PARENT_ROUNDS};
use super::lock::{compact_acl, node_id, Lock, LockConfig, LockEvent, LockKind, LostReason};
use super::path::ancestor_creates;
use super::{OpId, Recipe, SessionChange};
use crate::error::Error;
use crate::proto::*;
use crate::session::WatchEvent;
use crate::time::Instant;

/// How to stand for election.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ElectionConfig {
    /// The candidates' directory (Curator's latch path).
    pub dir: String,
    /// Our participant id: the data of our candidate node (Curator's `LeaderLatch` id).
    pub participant: String,
    /// 128 bits of the driver's entropy: each candidacy's node id (the protected
    /// prefix) is made from it and the candidacy's number.
    pub entropy: (u64, u64),
    /// The directory where leaders acknowledge (default `<dir>-leader`), outside
    /// `dir`: the leader with fencing token `t` creates `<ack_dir>/<t>` (see
    /// [`ack_node`]).
    pub ack_dir: String,
    /// ACL of our nodes and of parents we create.
    pub acl: Vec<Acl>,
    /// Stand again when a candidacy ends by itself (session expired and renewed, our
    /// node deleted). Default true, as Curator's `LeaderLatch`.
    pub rejoin: bool,
}

impl ElectionConfig {
    /// A config with the default acknowledgement path, the open ACL, rejoining.
    pub fn new(dir: &str, participant: &str, entropy: (u64, u64)) -> Self {
        ElectionConfig {
            dir: dir.into(),
            participant: participant.into(),
            entropy,
            ack_dir: default_ack_dir(dir),
            acl: Acl::open_unsafe(),
            rejoin: true,
        }
    }
}

/// The default acknowledgement directory for a candidates' directory: `<dir>-leader`.
pub fn default_ack_dir(dir: &str) -> String {
    format!("{}-leader", dir.trim_end_matches('/'))
}

/// The acknowledgement node of the leadership with `fencing_token`:
/// `<ack_dir>/<fencing_token>` (ephemeral, data = the participant id). Its name is
/// unique to one leadership, so its leader can always delete it — even after being
/// deposed — without any risk of deleting another leader's.
///
/// ```
/// use zk_recipes::recipe::election::{ack_node, parse_ack_node};
/// assert_eq!(ack_node("/app/election-leader", 42), "/app/election-leader/42");
/// assert_eq!(parse_ack_node("42"), Some(42));
/// assert_eq!(parse_ack_node("ready"), None);
/// ```
pub fn ack_node(ack_dir: &str, fencing_token: i64) -> String {
    format!("{}/{fencing_token}", ack_dir.trim_end_matches('/'))
}

/// The fencing token an acknowledgement node's name carries.
pub fn parse_ack_node(name: &str) -> Option<i64> {
    name.parse().ok()
}

/// What an election reports.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ElectionEvent {
    /// Our candidate node exists: we are in line (each candidacy, rejoins included).
    Joined {
        /// Our node's name.
        node: String,
    },
    /// We lead. Act as leader until the next `Suspended` or `Lost`.
    Elected {
        /// Our node's creation zxid: rises from one leader to the next.
        fencing_token: i64,
        /// Our node's name.
        node: String,
    },
    /// The connection dropped while leading: stop acting as leader until `Reconnected`.
    Suspended,
    /// The same session is back and our node verified: leading again.
    Reconnected,
    /// We lead no more (and were leading).
    Lost {
        /// Why.
        reason: LostReason,
    },
    /// Our acknowledgement is written (see [`Election::acknowledge`]).
    Acknowledged {
        /// The token it carries (the current leadership's).
        fencing_token: i64,
    },
    /// Our acknowledgement could not be written (we were deposed, no permission, ...).
    AckFailed {
        /// Why.
        error: Error,
    },
    /// Our candidacy is withdrawn: our node (and acknowledgement) deleted.
    Resigned,
    /// The candidacy cannot be made (no permission, invalid path, missing chroot,
    /// session ended and not rejoining, ...). Final.
    Failed {
        /// Why.
        error: Error,
    },
    /// Closed: resigned for good, or the session ended. Final.
    Closed,
}

impl ElectionEvent {
    /// Does this event end the machine?
    pub fn is_final(&self) -> bool {
        matches!(self, ElectionEvent::Failed { .. } | ElectionEvent::Closed)
    }
}

/// What [`Election::join`] answers at once.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Join {
    /// Wait for [`ElectionEvent::join_outcome`] (`Joined` once our node exists).
    Pending,
    /// Already in line: our node exists.
    InLine,
    /// The machine has ended.
    Ended,
}

/// Where leadership stands, folded from the events (what guards report).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Leadership {
    /// Not leading (a candidate, resigned, or not joined).
    Follower,
    /// Leading, connection up: act as leader.
    Leading,
    /// Leading as far as we know, connection down: do not act.
    Suspended,
    /// The machine ended.
    Ended,
}

impl Leadership {
    /// The state after `event`.
    pub fn after(self, event: &ElectionEvent) -> Leadership {
        match event {
            ElectionEvent::Elected { .. } => Leadership::Leading,
            ElectionEvent::Suspended if self == Leadership::Leading => Leadership::Suspended,
            ElectionEvent::Reconnected if self == Leadership::Suspended => Leadership::Leading,
            ElectionEvent::Lost { .. } | ElectionEvent::Resigned => Leadership::Follower,
            e if e.is_final() => Leadership::Ended,
            _ => self,
        }
    }
}

impl ElectionEvent {
    /// For a caller waiting after [`Election::join`]: `Some` once we are in line
    /// (`Joined`), or the candidacy cannot be made.
    pub fn join_outcome(&self) -> Option<Result<(), Error>> {
        match self {
            ElectionEvent::Joined { .. } => Some(Ok(())),
            ElectionEvent::Failed { error } => Some(Err(error.clone())),
            ElectionEvent::Closed => Some(Err(Error::Closed)),
            _ => None,
        }
    }

    /// For a caller waiting for an acknowledgement: `Some` when this event ends the
    /// wait — `Ok(token)` written, `Err` why not (deposed: [`Error::NotLeader`]).
    pub fn ack_outcome(&self) -> Option<Result<i64, Error>> {
        match self {
            ElectionEvent::Acknowledged { fencing_token } => Some(Ok(*fencing_token)),
            ElectionEvent::AckFailed { error } => Some(Err(error.clone())),
            ElectionEvent::Suspended
            | ElectionEvent::Lost { .. }
            | ElectionEvent::Resigned
            | ElectionEvent::Closed => Some(Err(Error::NotLeader)),
            ElectionEvent::Failed { error } => Some(Err(error.clone())),
            _ => None,
        }
    }

    /// For a caller waiting after [`Election::resign`]: `Some` when the wait is over.
    pub fn resign_outcome(&self) -> Option<Result<(), Error>> {
        match self {
            ElectionEvent::Resigned | ElectionEvent::Closed => Some(Ok(())),
            ElectionEvent::Failed { error } => Some(Err(error.clone())),
            _ => None,
        }
    }

    /// For a caller waiting after [`Election::close`]: `Some` when the wait is over.
    pub fn close_outcome(&self) -> Option<Result<(), Error>> {
        match self {
            ElectionEvent::Closed => Some(Ok(())),
            ElectionEvent::Failed { error } => Some(Err(error.clone())),
            _ => None,
        }
    }
}

/// A candidate as its owner sees it, folded from the election's events: what both
/// adapters report, decided once here.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct CandidateStatus {
    state: Leadership,
    token: Option<i64>,
    unreported: VecDeque<ElectionEvent>,
    end: Option<Error>,
}

impl Default for CandidateStatus {
    fn default() -> Self {
        CandidateStatus {
            state: Leadership::Follower,
            token: None,
            unreported: VecDeque::new(),
            end: None,
        }
    }
}

impl CandidateStatus {
    /// Folds one event in.
    pub fn apply(&mut self, event: &ElectionEvent) {
        self.state = self.state.after(event);
        match event {
            ElectionEvent::Elected { fencing_token, .. } => self.token = Some(*fencing_token),
            ElectionEvent::Failed { error } => self.end = Some(error.clone()),
            ElectionEvent::Closed => self.end = Some(Error::Closed),
            _ => {}
        }
        if self.unreported.len() < 64 {
            self.unreported.push_back(event.clone());
        }
    }

    /// Where leadership stands.
    pub fn state(&self) -> Leadership {
        self.state
    }

    /// Leading with the connection up: safe to act as leader.
    pub fn is_leader(&self) -> bool {
        self.state == Leadership::Leading
    }

    /// The fencing token of the current (or last) leadership.
    pub fn fencing_token(&self) -> Option<i64> {
        self.token
    }

    /// The next event not reported yet (for a candidate's `changed()`).
    pub fn next_change(&mut self) -> Option<ElectionEvent> {
        self.unreported.pop_front()
    }

    /// For a caller waiting to lead: `Some` once the wait is over — `Ok(token)`
    /// leading (elected, or reconnected after a suspension), `Err` the machine ended.
    pub fn elected_outcome(&self) -> Option<Result<i64, Error>> {
        if let Some(e) = &self.end {
            return Some(Err(e.clone()));
        }
        match (self.is_leader(), self.token) {
            (true, Some(t)) => Some(Ok(t)),
            _ => None,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum Purpose {
    /// multi [check candidate, create `<ack_dir>/<token>`].
    Write,
    /// A container for an ancestor of the acknowledgement node.
    Parent,
    /// delete of our acknowledgement node (before resigning, or once deposed).
    Withdraw,
}

/// A resignation in progress.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Resigning {
    No,
    /// Our acknowledgement, then our node, are being deleted; `then_join`: stand again
    /// afterwards.
    Yes {
        then_join: bool,
    },
}

/// How far the candidate is from its end.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum End {
    /// Running.
    Open,
    /// Resigning for good: `Closed` once our nodes are gone.
    Closing,
    /// Ended by a failure (not closing).
    Failed,
    /// Ended after closing (or closing asked after a failure).
    Closed,
}

impl End {
    fn closing(self) -> bool {
        matches!(self, End::Closing | End::Closed)
    }

    fn ended(self) -> bool {
        matches!(self, End::Failed | End::Closed)
    }

    /// Closing asked (whether ended or not).
    fn close(self) -> End {
        match self {
            End::Open | End::Closing => End::Closing,
            End::Failed | End::Closed => End::Closed,
        }
    }

    /// Ended (whether closing or not).
    fn end(self) -> End {
        match self {
            End::Open | End::Failed => End::Failed,
            End::Closing | End::Closed => End::Closed,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Ack {
    /// Nothing to do.
    Idle,
    /// To write (again) when the session allows.
    Wanted,
    /// A request of ours is in flight.
    Busy,
    /// Written.
    Done,
}

/// Op ids: the candidate lock's ops are even (its generation in the high bits, so a
/// late reply to an earlier candidacy finds nobody), ours odd.
const GEN_SHIFT: u32 = 33;

/// The election state machine. See the [module docs](self).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Election {
    config: ElectionConfig,
    lock: Option<Lock>,
    /// Candidacies made so far (the current lock's generation).
    generation: u32,
    session_id: Option<i64>,
    /// We should be a candidate.
    wanted: bool,
    /// Resigning (our node is being deleted), and what follows it.
    resigning: Resigning,
    /// Closing, or ended, and how.
    end: End,
    /// Leading: (fencing token, node).
    leading: Option<(i64, String)>,
    /// The candidacy (generation) whose `Joined` was reported.
    joined: u32,
    ack: Ack,
    /// Our acknowledgement node, once a write of it was sent: it may exist until a
    /// delete (or the directory's absence, or the session's end) says it does not.
    written: Option<String>,
    /// Delete `written` (resigning, or deposed) when the session allows.
    withdraw: bool,
    /// Rounds of creating the acknowledgement directory.
    parent_rounds: u8,
    kit: Kit<Purpose, ElectionEvent>,
}

impl Election {
    /// An election that does nothing until [`join`](Self::join).
    pub fn new(config: ElectionConfig) -> Election {
        Election {
            config,
            lock: None,
            generation: 0,
            session_id: None,
            wanted: false,
            resigning: Resigning::No,
            end: End::Open,
            leading: None,
            joined: 0,
            ack: Ack::Idle,
            written: None,
            withdraw: false,
            parent_rounds: 0,
            kit: Kit::default(),
        }
    }

    // ----- getters -----

    /// The configuration.
    pub fn config(&self) -> &ElectionConfig {
        &self.config
    }

    /// Do we lead with the connection up?
    pub fn is_leader(&self) -> bool {
        self.leading.is_some() && self.lock.as_ref().is_some_and(|l| l.is_held())
    }

    /// Our leadership's fencing token and node, while leading.
    pub fn leadership(&self) -> Option<(i64, &str)> {
        self.leading.as_ref().map(|(t, n)| (*t, n.as_str()))
    }

    /// Our current candidate node's name, once created.
    pub fn node(&self) -> Option<&str> {
        self.lock.as_ref().and_then(|l| l.node())
    }

    /// Is our acknowledgement written for the current leadership?
    pub fn is_acknowledged(&self) -> bool {
        self.ack == Ack::Done && self.leading.is_some()
    }

    // ----- commands -----

    /// Stands for election (again). See [`Join`].
    pub fn join(&mut self, now: Instant) -> Join {
        if self.end.ended() || self.end.closing() {
            return Join::Ended;
        }
        self.wanted = true;
        if let Resigning::Yes { then_join } = &mut self.resigning {
            *then_join = true;
            return Join::Pending;
        }
        if self.lock.is_some() && self.joined == self.generation {
            return Join::InLine;
        }
        self.start(now);
        // `start` may have reported it already (a failure), or it comes later.
        Join::Pending
    }

    /// Withdraws our candidacy: deletes our acknowledgement, if any, then our node;
    /// `Resigned` once both are gone. With `rejoin`, stands again right after (at the
    /// back of the line). `false` if there was no candidacy.
    pub fn resign(&mut self, now: Instant, rejoin: bool) -> bool {
        if self.lock.is_none() || self.end.ended() {
            // Nothing to withdraw (nothing to wait for): just follow `rejoin`.
            if rejoin {
                self.join(now);
            } else {
                self.wanted = false;
            }
            return false;
        }
        self.wanted = rejoin;
        let resigning = self.resigning != Resigning::No;
        self.resigning = Resigning::Yes { then_join: rejoin };
        if !resigning {
            // Our acknowledgement goes first (observers never see one of a candidate
            // that is gone), then our node.
            self.withdraw = self.written.is_some();
            self.ack = Ack::Idle;
            if !self.withdraw {
                self.release_lock(now);
            }
        }
        self.drive(now);
        true
    }

    /// Resigns for good; `Closed` once our nodes are gone. The machine then ends.
    pub fn close(&mut self, now: Instant) {
        if self.end.ended() {
            return;
        }
        self.end = self.end.close();
        if self.lock.is_some() {
            self.resign(now, false);
        }
        self.wanted = false;
        self.maybe_end();
    }

    /// After the leader procedure: writes our acknowledgement (see the
    /// [module docs](self)); `Acknowledged` or `AckFailed` follows. `false` if we do
    /// not lead now.
    pub fn acknowledge(&mut self, now: Instant) -> bool {
        if self.leading.is_none() || self.resigning != Resigning::No {
            return false;
        }
        if self.ack != Ack::Done && self.ack != Ack::Busy {
            if self.ack == Ack::Idle {
                // A new attempt: its own rounds of creating the directory (an earlier
                // one may have spent them on creates lost with the connection).
                self.parent_rounds = 0;
            }
            self.ack = Ack::Wanted;
        }
        if self.ack == Ack::Done {
            if let Some((token, _)) = self.leading {
                self.emit(ElectionEvent::Acknowledged {
                    fencing_token: token,
                });
            }
        }
        self.drive(now);
        true
    }

    // ----- internals -----

    fn emit(&mut self, e: ElectionEvent) {
        self.kit.emit(e);
    }

    fn our_path(&self) -> Option<String> {
        let node = self.lock.as_ref()?.node()?;
        Some(format!(
            "{}/{}",
            self.config.dir.trim_end_matches('/'),
            node
        ))
    }

    /// Makes a new candidacy if one is wanted and possible.
    fn start(&mut self, now: Instant) {
        let Some(session_id) = self.session_id else {
            return;
        };
        if self.lock.is_some() || !self.wanted || self.end.closing() || self.end.ended() {
            return;
        }
        if let Err(error) = self.check_paths() {
            self.fail(error);
            return;
        }
        self.generation = self.generation.wrapping_add(1);
        let (a, b) = self.config.entropy;
        let id = node_id(a, b.wrapping_add(u64::from(self.generation)));
        let mut config = LockConfig::new(&self.config.dir, LockKind::Latch, &id);
        config.data = Bytes::from(self.config.participant.clone().into_bytes());
        config.acl = compact_acl(&self.config.acl);
        let mut lock = Lock::new(config);
        lock.handle_session(now, SessionChange::Connected { session_id });
        lock.acquire(now, None);
        self.lock = Some(lock);
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

    fn release_lock(&mut self, now: Instant) {
        if let Some(l) = self.lock.as_mut() {
            l.release(now);
        }
        self.pump(now);
    }

    /// Moves the candidate lock's events into ours; drops it when it is done.
    fn pump(&mut self, now: Instant) {
        self.report_joined();
        while let Some(e) = self.lock.as_mut().and_then(|l| l.poll_event()) {
            self.report_joined();
            self.on_lock_event(now, e);
        }
        if self.lock.as_ref().is_some_and(|l| l.is_done()) {
            self.lock = None;
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
                self.leading = Some((fencing_token, node.clone()));
                self.ack = Ack::Idle;
                self.parent_rounds = 0;
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
            LockEvent::RevocationRequested => {}
        }
    }

    /// Reports `Joined` once per candidacy, when its node is known.
    fn report_joined(&mut self) {
        if self.joined != self.generation {
            if let Some(node) = self.node() {
                let node = node.into();
                self.joined = self.generation;
                self.emit(ElectionEvent::Joined { node });
            }
        }
    }

    /// Our candidate node is gone (the lock ended) and our acknowledgement withdrawn:
    /// a resignation is complete, however it ended (deleted, deposed, the session gone).
    fn candidacy_over(&mut self) {
        if let Resigning::Yes { then_join } = self.resigning {
            if self.lock.is_none() && !self.withdraw {
                self.resigning = Resigning::No;
                self.wanted = then_join && !self.end.closing();
                self.emit(ElectionEvent::Resigned);
            }
        }
    }

    fn deposed(&mut self) {
        self.leading = None;
        // Our acknowledgement, if any, must go too: its name is ours alone, so deleting
        // it cannot touch a later leader's.
        self.withdraw = self.written.is_some();
        if self.ack == Ack::Wanted || self.ack == Ack::Done {
            self.ack = Ack::Idle;
        }
    }

    fn maybe_end(&mut self) {
        if self.end == End::Closing && self.lock.is_none() && !self.withdraw {
            self.end = End::Closed;
            self.emit(ElectionEvent::Closed);
        }
    }

    fn drive(&mut self, now: Instant) {
        if !self.kit.allows(now) || !self.kit.is_quiet() || self.session_id.is_none() {
            return;
        }
        if self.withdraw {
            if let Some(path) = self.written.clone() {
                self.kit.send(
                    Purpose::Withdraw,
                    Request::Delete(DeleteRequest { path, version: -1 }),
                );
            }
            return;
        }
        let held = self.lock.as_ref().is_some_and(|l| l.is_held());
        let (Some(ours), true, Some((token, _))) = (self.our_path(), held, &self.leading) else {
            return;
        };
        if self.ack == Ack::Wanted {
            let path = ack_node(&self.config.ack_dir, *token);
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
            self.ack = Ack::Busy;
            self.written = Some(path);
            self.kit.send(Purpose::Write, Request::Multi(ops));
        }
    }

    fn on_reply(&mut self, now: Instant, purpose: Purpose, result: Result<Response, Error>) {
        if purpose == Purpose::Parent {
            // What the parents' creation came to shows in the next write.
            return;
        }
        if let Err(e) = &result {
            if e.is_retryable() {
                // Retried when the session allows (a write that was applied after all
                // answers `NodeExists` next time: ours, by its name).
                self.kit.failed(now);
                if self.ack == Ack::Busy {
                    self.ack = Ack::Wanted;
                }
                return;
            }
            if e.ends_session() {
                return;
            }
        }
        self.kit.succeeded();
        let failure = multi_failure(&result);
        match purpose {
            Purpose::Parent => {}
            Purpose::Withdraw => {
                // Deleted or not there (anything else: nothing more we can do).
                self.withdraw = false;
                self.written = None;
                if self.resigning != Resigning::No && self.lock.is_some() {
                    self.release_lock(now);
                }
                self.candidacy_over();
            }
            _ if self.ack != Ack::Busy || self.leading.is_none() => {
                // Deposed (or resigning) while it was in flight.
                // (`written` stays: an earlier attempt may have been applied; the
                // withdrawal deletes it, or finds it absent.)
                if self.ack == Ack::Busy {
                    self.ack = Ack::Idle;
                }
            }
            Purpose::Write => match (result, failure) {
                (Ok(Response::Multi(_)), None) => self.acknowledged(),
                // Applied before (its reply lost): the name is ours alone.
                (_, Some((1, ErrorCode::NodeExists))) => self.acknowledged(),
                // No acknowledgement directory: so no acknowledgement of ours either.
                (_, Some((1, ErrorCode::NoNode))) if self.parent_rounds < MAX_PARENT_ROUNDS => {
                    self.parent_rounds += 1;
                    self.written = None;
                    self.ack = Ack::Wanted;
                    let node = ack_node(&self.config.ack_dir, 0);
                    for (_, req) in ancestor_creates(&node, &self.config.acl, CreateMode::Container)
                    {
                        self.kit.send(Purpose::Parent, req);
                    }
                }
                (_, Some((1, ErrorCode::NoNode))) => {
                    self.written = None;
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
            },
        }
    }

    fn acknowledged(&mut self) {
        self.ack = Ack::Done;
        self.parent_rounds = 0;
        if let Some((token, _)) = self.leading {
            self.emit(ElectionEvent::Acknowledged {
                fencing_token: token,
            });
        }
    }

    fn ack_failed(&mut self, error: Error) {
        self.ack = Ack::Idle;
        self.emit(ElectionEvent::AckFailed { error });
    }
}

impl Election {
    fn encode(&self, op: OpId) -> OpId {
        (u64::from(self.generation) << GEN_SHIFT) | ((op & 0xffff_ffff) << 1)
    }

    /// The current lock's op for `op`, if it is one.
    fn lock_op(&self, op: OpId) -> Option<OpId> {
        (op & 1 == 0 && (op >> GEN_SHIFT) as u32 == self.generation)
            .then_some((op >> 1) & 0xffff_ffff)
    }
}

impl Recipe for Election {
    type Event = ElectionEvent;

    fn handle_reply(&mut self, now: Instant, op: OpId, result: Result<Response, Error>) {
        if op & 1 == 1 {
            if let Some(purpose) = self.kit.take(op >> 1) {
                self.on_reply(now, purpose, result);
            }
        } else if let (Some(op), Some(lock)) = (self.lock_op(op), self.lock.as_mut()) {
            lock.handle_reply(now, op, result);
        }
        self.pump(now);
        // A resignation that ended with our acknowledgement's withdrawal may stand again.
        self.start(now);
        self.drive(now);
        self.maybe_end();
    }

    fn handle_watch(&mut self, now: Instant, op: OpId, event: &WatchEvent) {
        if let (Some(op), Some(lock)) = (self.lock_op(op), self.lock.as_mut()) {
            lock.handle_watch(now, op, event);
        }
        self.pump(now);
        self.drive(now);
    }

    fn handle_session(&mut self, now: Instant, change: SessionChange) {
        self.kit.session(change);
        if let Some(lock) = self.lock.as_mut() {
            lock.handle_session(now, change);
        }
        match change {
            SessionChange::Connected { session_id } => self.session_id = Some(session_id),
            SessionChange::Reconnected { session_id } => self.session_id = Some(session_id),
            SessionChange::Suspended => {}
            SessionChange::Expired | SessionChange::Closed => {
                // Every request was answered; our nodes went with the session.
                self.session_id = None;
                self.kit.clear_requests();
                self.withdraw = false;
                self.written = None;
                if change == SessionChange::Closed || !self.config.rejoin {
                    self.wanted = false;
                    self.end = self.end.close();
                }
            }
        }
        self.pump(now);
        if matches!(change, SessionChange::Expired | SessionChange::Closed) {
            // The lock has ended with the session; a resignation is complete.
            self.lock = None;
            self.candidacy_over();
        }
        self.start(now);
        self.drive(now);
        self.maybe_end();
    }

    fn handle_timeout(&mut self, now: Instant) {
        if let Some(lock) = self.lock.as_mut() {
            lock.handle_timeout(now);
        }
        self.pump(now);
        self.drive(now);
    }

    fn handle_abandon(&mut self, now: Instant) {
        self.close(now);
    }

    fn poll_request(&mut self) -> Option<(OpId, Request)> {
        if let Some((op, r)) = self.kit.poll_request() {
            return Some(((op << 1) | 1, r));
        }
        let (op, r) = self.lock.as_mut()?.poll_request()?;
        Some((self.encode(op), r))
    }

    fn poll_event(&mut self) -> Option<ElectionEvent> {
        self.kit.poll_event()
    }

    fn poll_timeout(&self) -> Option<Instant> {
        // Our retry deadline matters only while `drive` waits for it to send: not while
        // our request is in flight (the deadline has passed by then).
        let waiting = self.kit.is_quiet()
            && (self.withdraw
                || self.ack == Ack::Wanted && self.lock.as_ref().is_some_and(|l| l.is_held()));
        let ours = if waiting { self.kit.retry_at() } else { None };
        let lock = self.lock.as_ref().and_then(|l| l.poll_timeout());
        match (ours, lock) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    fn is_done(&self) -> bool {
        self.end.ended() && self.lock.is_none() && self.kit.is_idle()
    }
}
