//! Leader election (ZooKeeper recipes "Leader Election"), Curator-compatible, herd-free,
//! fenced, with the recipe documents' *leader acknowledgement*.
//!
//! # Protocol
//!
//! A candidate is a [`Lock`] of kind [`LockKind::Latch`](crate::recipe::lock::LockKind::Latch): an `EPHEMERAL_SEQUENTIAL`
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
//! use zk_recipes::recipe::{Machine, Recipe, SessionChange};
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

mod event;
mod machine;
pub mod observer;

use alloc::boxed::Box;
use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;

pub use event::{CandidateStatus, ElectionEvent, Join, Leadership};

use super::kit::Kit;
use super::lock::Lock;
use crate::proto::Acl;
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

/// What our own requests (not the candidate lock's) are for.
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

/// Where a leader's acknowledgement stands.
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

/// A leadership: what exists only while we lead.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct Leader {
    /// Our node's creation zxid.
    token: i64,
    /// Our node's name.
    node: String,
    ack: Ack,
    /// Rounds of creating the acknowledgement directory (this attempt).
    parent_rounds: u8,
}

/// A candidacy: the candidate lock of one generation and what only it has.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct Candidacy {
    lock: Lock,
    /// Its `Joined` was reported.
    joined: bool,
    /// Leading.
    leader: Option<Leader>,
}

/// The election's phases.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum Phase {
    /// No candidacy: not joined, resigned, ended, or between two candidacies.
    Out,
    /// In line (or leading) with a candidate lock.
    Candidate(Box<Candidacy>),
}

/// Our acknowledgement node, from the first write of it sent until a delete (or the
/// directory's absence, or the session's end) says it does not exist: it outlives the
/// leadership that wrote it.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum Written {
    /// None of ours can exist.
    Nothing,
    /// This node may exist.
    Maybe(String),
    /// This node may exist: delete it (resigning, or deposed) when the session allows.
    Withdraw(String),
}

impl Written {
    /// Withdraw what may exist.
    fn withdraw(&mut self) {
        if let Written::Maybe(path) = self {
            *self = Written::Withdraw(core::mem::take(path));
        }
    }

    fn withdrawing(&self) -> bool {
        matches!(self, Written::Withdraw(_))
    }
}

/// What sends the election's requests: the kit (our own requests: odd op ids) and the
/// candidacy, whose lock sends the rest (even op ids, tagged with the candidacy's
/// generation, so a late reply to an earlier candidacy finds nobody).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct Parts {
    kit: Kit<Purpose, ElectionEvent>,
    /// Candidacies made so far (the current lock's generation).
    generation: u32,
    phase: Phase,
}

/// The election state machine. See the [module docs](self).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Election {
    config: ElectionConfig,
    session_id: Option<i64>,
    /// We should be a candidate.
    wanted: bool,
    /// Resigning (our node is being deleted), and what follows it.
    resigning: Resigning,
    /// Closing, or ended, and how.
    end: End,
    written: Written,
    parts: Parts,
}

impl Election {
    /// An election that does nothing until [`join`](Self::join).
    pub fn new(config: ElectionConfig) -> Election {
        Election {
            config,
            session_id: None,
            wanted: false,
            resigning: Resigning::No,
            end: End::Open,
            written: Written::Nothing,
            parts: Parts {
                kit: Kit::default(),
                generation: 0,
                phase: Phase::Out,
            },
        }
    }

    // ----- getters -----

    /// The configuration.
    pub fn config(&self) -> &ElectionConfig {
        &self.config
    }

    /// Do we lead with the connection up?
    pub fn is_leader(&self) -> bool {
        self.candidacy()
            .is_some_and(|c| c.leader.is_some() && c.lock.is_held())
    }

    /// Our leadership's fencing token and node, while leading.
    pub fn leadership(&self) -> Option<(i64, &str)> {
        self.leader().map(|l| (l.token, l.node.as_str()))
    }

    /// Our current candidate node's name, once created.
    pub fn node(&self) -> Option<&str> {
        self.candidacy().and_then(|c| c.lock.node())
    }

    /// Is our acknowledgement written for the current leadership?
    pub fn is_acknowledged(&self) -> bool {
        self.leader().is_some_and(|l| l.ack == Ack::Done)
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
        if self.candidacy().is_some_and(|c| c.joined) {
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
        if self.candidacy().is_none() || self.end.ended() {
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
            self.written.withdraw();
            if let Some(leader) = self.leader_mut() {
                leader.ack = Ack::Idle;
            }
            if !self.written.withdrawing() {
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
        if self.candidacy().is_some() {
            self.resign(now, false);
        }
        self.wanted = false;
        self.maybe_end();
    }

    /// After the leader procedure: writes our acknowledgement (see the
    /// [module docs](self)); `Acknowledged` or `AckFailed` follows. `false` if we do
    /// not lead now. Called again once written, `Acknowledged` is told again at once
    /// while nothing questions our hold; after a reconnect whose check of our node is
    /// still open, it is written again (its `check` of our node decides).
    pub fn acknowledge(&mut self, now: Instant) -> bool {
        if self.resigning != Resigning::No {
            return false;
        }
        // Our acknowledgement is told again at once only while nothing questions our
        // hold; otherwise (suspended, our node being checked after a reconnect) it is
        // written again, its `check` of our node deciding.
        let unquestioned = self
            .candidacy()
            .is_some_and(|c| c.lock.is_held_unquestioned());
        let Some(leader) = self.leader_mut() else {
            return false;
        };
        let token = leader.token;
        match leader.ack {
            Ack::Done if unquestioned => self.emit(ElectionEvent::Acknowledged {
                fencing_token: token,
            }),
            Ack::Done => leader.ack = Ack::Wanted,
            // Already on its way.
            Ack::Busy | Ack::Wanted => {}
            Ack::Idle => {
                // A new attempt: its own rounds of creating the directory (an earlier
                // one may have spent them on creates lost with the connection).
                leader.parent_rounds = 0;
                leader.ack = Ack::Wanted;
            }
        }
        self.drive(now);
        true
    }

    // ----- the phase -----

    fn candidacy(&self) -> Option<&Candidacy> {
        match &self.parts.phase {
            Phase::Candidate(c) => Some(c),
            Phase::Out => None,
        }
    }

    fn candidacy_mut(&mut self) -> Option<&mut Candidacy> {
        match &mut self.parts.phase {
            Phase::Candidate(c) => Some(c),
            Phase::Out => None,
        }
    }

    fn leader(&self) -> Option<&Leader> {
        self.candidacy().and_then(|c| c.leader.as_ref())
    }

    fn leader_mut(&mut self) -> Option<&mut Leader> {
        self.candidacy_mut().and_then(|c| c.leader.as_mut())
    }

    fn emit(&mut self, e: ElectionEvent) {
        self.parts.kit.emit(e);
    }
}
