//! A site: votes once, learns the outcome (see the [module docs](super)).

use alloc::collections::{BTreeMap, BTreeSet};
use alloc::string::String;
use alloc::vec::Vec;
use bytes::Bytes;

use super::{
    alive_path, check_names, coordinator_path, payload_path, vote_path, votes_dir, Outcome,
    Variant, Vote, MAX_SITES,
};
use crate::error::Error;
use crate::proto::*;
use crate::recipe::kit::{Kit, Plumbing, Protocol};
use crate::recipe::{OpId, SessionChange};
use crate::session::WatchEvent;
use crate::time::Instant;

/// How to take part in a transaction as a site.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct SiteConfig {
    /// The transaction node.
    pub tx: String,
    /// Our site name: one of the coordinator's sites (one path component).
    pub name: String,
    /// Must match the coordinator's: with [`Variant::Peers`] we watch every vote and may
    /// decide ourselves.
    pub variant: Variant,
    /// ACL of our presence node.
    pub acl: Vec<Acl>,
}

impl SiteConfig {
    /// A config with the open ACL.
    pub fn new(tx: &str, name: &str, variant: Variant) -> Self {
        SiteConfig {
            tx: tx.into(),
            name: name.into(),
            variant,
            acl: Acl::open_unsafe(),
        }
    }
}

/// What a site reports. `Ready` and `Voted` come at most once each; `Decided` and
/// `Failed` are final (nothing follows).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum SiteEvent {
    /// The transaction exists and is undecided (in the peers variant, we watch every
    /// vote now): here is its payload. `voted` is our
    /// vote if it was written before (by an earlier incarnation of this site, before a
    /// restart): a vote is never changed, so [`Site::vote`] will answer with it.
    Ready {
        /// The coordinator's payload (`<tx>/payload`).
        payload: Bytes,
        /// Our earlier vote, if any.
        voted: Option<Vote>,
    },
    /// Our vote is written (after [`Site::vote`]); if an earlier incarnation had voted,
    /// this is that vote, which may differ from the one asked for.
    Voted {
        /// The vote in our vote node.
        vote: Vote,
    },
    /// The outcome, as written in the transaction node (the same for every site).
    Decided {
        /// Commit or abort.
        outcome: Outcome,
    },
    /// This site cannot take part: not a site of this transaction (no vote node), the
    /// transaction node deleted before we learned the outcome, no permission, an
    /// invalid path, or the session closed.
    Failed {
        /// The cause (`Server(NoNode)` for "not a site" and "deleted").
        error: Error,
    },
}

/// How a [`Site::vote`] ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum VoteOutcome {
    /// Our vote node holds this vote (ours, or an earlier incarnation's).
    Cast(Vote),
    /// The transaction was decided before our vote was written (it is not written).
    TooLate(Outcome),
}

impl SiteEvent {
    /// Is it final (nothing follows)?
    pub fn is_final(&self) -> bool {
        matches!(self, SiteEvent::Decided { .. } | SiteEvent::Failed { .. })
    }
}

/// A site's events folded into what its owner asks: the payload, our vote, the
/// outcome. What both adapters' waits return is decided here.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct SiteStatus {
    payload: Option<Bytes>,
    vote: Option<Vote>,
    outcome: Option<Outcome>,
    error: Option<Error>,
}

impl SiteStatus {
    /// Folds one event in.
    pub fn apply(&mut self, event: &SiteEvent) {
        match event {
            SiteEvent::Ready { payload, voted } => {
                self.payload = Some(payload.clone());
                self.vote = self.vote.or(*voted);
            }
            SiteEvent::Voted { vote } => self.vote = Some(*vote),
            SiteEvent::Decided { outcome } => self.outcome = Some(*outcome),
            SiteEvent::Failed { error } => {
                self.error.get_or_insert(error.clone());
            }
        }
    }

    /// The payload, once known (a site that starts after the decision may never see
    /// it: it learns only the outcome).
    pub fn payload(&self) -> Option<&Bytes> {
        self.payload.as_ref()
    }

    /// Our vote, once written.
    pub fn vote(&self) -> Option<Vote> {
        self.vote
    }

    /// The outcome, once known.
    pub fn outcome(&self) -> Option<Outcome> {
        self.outcome
    }

    /// For a caller waiting to join: `Some` once the transaction is known (ready to
    /// vote, or already decided) or the site failed.
    pub fn ready_outcome(&self) -> Option<Result<(), Error>> {
        if self.payload.is_some() || self.outcome.is_some() {
            Some(Ok(()))
        } else {
            self.error.clone().map(Err)
        }
    }

    /// For a caller waiting after [`Site::vote`]: `Some` once our vote is written, the
    /// transaction was decided without it, or the site failed.
    pub fn vote_outcome(&self) -> Option<Result<VoteOutcome, Error>> {
        match (self.vote, self.outcome, &self.error) {
            (Some(v), _, _) => Some(Ok(VoteOutcome::Cast(v))),
            (None, Some(o), _) => Some(Ok(VoteOutcome::TooLate(o))),
            (None, None, Some(e)) => Some(Err(e.clone())),
            _ => None,
        }
    }

    /// For a caller waiting for the outcome: `Some` once decided or failed.
    pub fn outcome_result(&self) -> Option<Result<Outcome, Error>> {
        match (self.outcome, &self.error) {
            (Some(o), _) => Some(Ok(o)),
            (None, Some(e)) => Some(Err(e.clone())),
            _ => None,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum P {
    Sync,
    Tx,
    WaitTx,
    Payload,
    Own,
    Coord,
    Presence,
    CheckPresence,
    Peers,
    Peer(String),
    Vote(Vote),
    Decide(Outcome),
    Leave,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum TxView {
    Unknown,
    Missing,
    Undecided,
    Decided(Outcome),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Own {
    Unknown,
    NotASite,
    Empty,
    Cast(Vote),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Presence {
    None,
    Creating,
    /// A create whose reply was lost.
    InDoubt,
    Ours,
    /// A node of another session under our name (our earlier incarnation's, until its
    /// session expires): watched.
    Foreign,
}

const TX: u32 = 1;
const WAIT_TX: u32 = 2;
const PAYLOAD: u32 = 4;
const OWN: u32 = 8;
const COORD: u32 = 16;
const PRESENCE: u32 = 32;
const CHECK_PRESENCE: u32 = 64;
const PEERS: u32 = 128;
const PEER: u32 = 256;
const VOTE: u32 = 512;
const DECIDE: u32 = 1024;
const LEAVE: u32 = 2048;
const READS: u32 = TX | WAIT_TX | PAYLOAD | OWN | COORD | CHECK_PRESENCE | PEERS | PEER;

/// A site of a two-phase commit. See the [module docs](super).
///
/// Commands: [`start`](Self::start) (join: read the transaction, announce our
/// presence), [`vote`](Self::vote). Dropping its owner before it voted votes `abort`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Site {
    config: SiteConfig,
    session_id: i64,
    started: bool,
    /// A final event was reported (or the owner left): only cleanup remains.
    finished: bool,
    leaving: bool,
    /// Expired: waiting for the next session.
    between_sessions: bool,
    tx: TxView,
    seen: bool,
    payload: Option<Bytes>,
    own: Own,
    /// A vote attempt may have been applied with its reply lost.
    vote_in_doubt: bool,
    coord: Option<bool>,
    presence: Presence,
    peers: Option<BTreeMap<String, Option<Vote>>>,
    peer_reads: BTreeSet<String>,
    wanted: Option<Vote>,
    ready_told: bool,
    voted_told: bool,
    need: u32,
    sync_next: bool,
    kit: Kit<P, SiteEvent>,
}

impl Site {
    /// A site that does nothing until [`start`](Self::start).
    pub fn new(config: SiteConfig) -> Site {
        Site {
            config,
            session_id: 0,
            started: false,
            finished: false,
            leaving: false,
            between_sessions: false,
            tx: TxView::Unknown,
            seen: false,
            payload: None,
            own: Own::Unknown,
            vote_in_doubt: false,
            coord: None,
            presence: Presence::None,
            peers: None,
            peer_reads: BTreeSet::new(),
            wanted: None,
            ready_told: false,
            voted_told: false,
            need: 0,
            sync_next: false,
            kit: Kit::default(),
        }
    }

    /// The configuration.
    pub fn config(&self) -> &SiteConfig {
        &self.config
    }

    /// The outcome, once known.
    pub fn outcome(&self) -> Option<Outcome> {
        match self.tx {
            TxView::Decided(o) => Some(o),
            _ => None,
        }
    }

    /// Our vote, once known to be written.
    pub fn vote_cast(&self) -> Option<Vote> {
        match self.own {
            Own::Cast(v) => Some(v),
            _ => None,
        }
    }

    /// Has it reported its final event?
    pub fn has_ended(&self) -> bool {
        self.finished
    }

    /// Joins the transaction (once): waits for it to exist, reads it, announces our
    /// presence. Reports `Ready` (or `Decided` if it is decided already).
    pub fn start(&mut self, now: Instant) {
        if self.started {
            return;
        }
        self.started = true;
        if let Err(error) = check_names(&self.config.tx, Some(&self.config.name)) {
            return self.fail(error);
        }
        self.read_all();
        self.evaluate(now);
        self.drive(now);
    }

    /// Votes (once; later calls are ignored): written once the transaction is known and
    /// undecided, ended by `Voted` or, if the transaction is decided first, `Decided`
    /// (see [`SiteStatus::vote_outcome`]). Returns false if a vote was already asked
    /// for or the site has ended.
    pub fn vote(&mut self, now: Instant, vote: Vote) -> bool {
        if self.finished || self.wanted.is_some() {
            return false;
        }
        self.wanted = Some(vote);
        self.evaluate(now);
        self.drive(now);
        true
    }

    // ----- internals -----

    fn emit(&mut self, e: SiteEvent) {
        self.kit.emit(e);
    }

    fn fail(&mut self, error: Error) {
        if !self.finished {
            self.finished = true;
            self.emit(SiteEvent::Failed { error });
        }
    }

    fn in_flight(&self, p: &P) -> bool {
        self.kit.any(|q| q == p)
    }

    fn read_all(&mut self) {
        self.need |= TX | PAYLOAD | OWN | COORD | PRESENCE;
        if self.config.variant == Variant::Peers {
            self.need |= PEERS;
        }
    }

    fn again(&mut self, now: Instant, need: u32) {
        self.need |= need;
        self.sync_next = true;
        self.kit.failed(now);
    }

    /// Has the transaction node existed (it is never re-made: a later `NoNode` means
    /// deleted, and a reply after a reply that saw it is not "not made yet")?
    fn tx_exists(&self) -> bool {
        self.seen
    }

    /// What we would write as the outcome, from what we know.
    fn decision(&self) -> Option<Outcome> {
        if self.coord == Some(false) {
            return Some(Outcome::Abort);
        }
        if self.config.variant == Variant::Peers {
            let peers = self.peers.as_ref()?;
            if peers.values().any(|v| *v == Some(Vote::Abort)) {
                return Some(Outcome::Abort);
            }
            if !peers.is_empty() && peers.values().all(|v| *v == Some(Vote::Commit)) {
                return Some(Outcome::Commit);
            }
        }
        None
    }

    /// Decides what to do from what we know (the reconcile step).
    fn evaluate(&mut self, _now: Instant) {
        if !self.started || self.between_sessions {
            return;
        }
        if !self.finished {
            self.progress();
        }
        if self.finished {
            self.cleanup();
        }
    }

    fn progress(&mut self) {
        // In the peers variant, ready means watching every vote too.
        let watching = self.config.variant != Variant::Peers
            || (self.peers.is_some()
                && self.peer_reads.is_empty()
                && !self.kit.any(|p| matches!(p, P::Peer(_))));
        if self.tx == TxView::Undecided && !self.ready_told && watching {
            if let (Some(payload), Own::Empty | Own::Cast(_)) = (self.payload.clone(), self.own) {
                self.ready_told = true;
                let voted = self.vote_cast();
                self.voted_told = voted.is_some();
                self.emit(SiteEvent::Ready { payload, voted });
            }
        }
        if let (Own::Cast(vote), Some(_), false) = (self.own, self.wanted, self.voted_told) {
            self.voted_told = true;
            self.emit(SiteEvent::Voted { vote });
        }
        if let TxView::Decided(outcome) = self.tx {
            // We asked to vote and an attempt may have counted (its reply lost): our
            // vote node tells whether it did, before the outcome is reported.
            if self.wanted.is_some() && !self.voted_told && self.own == Own::Unknown {
                if !self.in_flight(&P::Own) {
                    self.need |= OWN;
                }
                return;
            }
            self.finished = true;
            self.emit(SiteEvent::Decided { outcome });
            return;
        }
        if self.tx != TxView::Undecided {
            return;
        }
        if self.own == Own::NotASite {
            return self.fail(Error::Server(ErrorCode::NoNode));
        }
        if self.leaving && !matches!(self.own, Own::Unknown | Own::Empty) {
            self.finished = true; // our vote is in: nobody waits for us any more
            return;
        }
        // Facts still unknown: read them.
        if self.payload.is_none() && !self.in_flight(&P::Payload) {
            self.need |= PAYLOAD;
        }
        if self.own == Own::Unknown && !self.in_flight(&P::Own) {
            self.need |= OWN;
        }
        if self.coord.is_none() && !self.in_flight(&P::Coord) {
            self.need |= COORD;
        }
        if self.presence == Presence::None && !self.in_flight(&P::Presence) {
            self.need |= PRESENCE;
        }
        if self.config.variant == Variant::Peers
            && self.peers.is_none()
            && !self.in_flight(&P::Peers)
        {
            self.need |= PEERS;
        }
        if self.wanted.is_some()
            && self.own == Own::Empty
            && !self.kit.any(|p| matches!(p, P::Vote(_)))
        {
            self.need |= VOTE;
        }
        if self.decision().is_some() && !self.kit.any(|p| matches!(p, P::Decide(_))) {
            self.need |= DECIDE;
        }
    }

    /// After the final event: remove our presence node.
    fn cleanup(&mut self) {
        self.need &= LEAVE | CHECK_PRESENCE;
        match self.presence {
            Presence::Ours if !self.in_flight(&P::Leave) => self.need |= LEAVE,
            Presence::InDoubt if !self.in_flight(&P::CheckPresence) => self.need |= CHECK_PRESENCE,
            _ => {}
        }
    }

    /// Sends what is needed, if the session allows it now.
    fn drive(&mut self, now: Instant) {
        if self.need == 0 || self.between_sessions || !self.kit.allows(now) {
            return;
        }
        let need = core::mem::take(&mut self.need);
        let tx = self.config.tx.clone();
        let name = self.config.name.clone();
        if need & READS != 0 && self.sync_next {
            self.sync_next = false;
            self.kit
                .send(P::Sync, Request::Sync(PathRequest { path: tx.clone() }));
        }
        let read = |path: String, watch: bool| Request::GetData(PathWatch { path, watch });
        if need & TX != 0 {
            self.kit.send(P::Tx, read(tx.clone(), true));
        }
        if need & WAIT_TX != 0 {
            let path = tx.clone();
            self.kit
                .send(P::WaitTx, Request::Exists(PathWatch { path, watch: true }));
        }
        if need & PAYLOAD != 0 {
            self.kit.send(P::Payload, read(payload_path(&tx), false));
        }
        if need & OWN != 0 {
            self.kit.send(P::Own, read(vote_path(&tx, &name), false));
        }
        if need & COORD != 0 {
            let path = coordinator_path(&tx);
            self.kit
                .send(P::Coord, Request::Exists(PathWatch { path, watch: true }));
        }
        if need & PEERS != 0 {
            let path = votes_dir(&tx);
            self.kit.send(
                P::Peers,
                Request::GetChildren(PathWatch { path, watch: false }),
            );
        }
        if need & PEER != 0 {
            for peer in core::mem::take(&mut self.peer_reads) {
                let path = vote_path(&tx, &peer);
                self.kit.send(P::Peer(peer), read(path, true));
            }
        }
        if need & CHECK_PRESENCE != 0 {
            let path = alive_path(&tx, &name);
            self.kit.send(
                P::CheckPresence,
                Request::Exists(PathWatch { path, watch: true }),
            );
        }
        if need & PRESENCE != 0 && self.presence == Presence::None && !self.finished {
            self.presence = Presence::Creating;
            let create = CreateRequest::new(
                alive_path(&tx, &name),
                Bytes::new(),
                self.config.acl.clone(),
                CreateMode::Ephemeral,
            );
            self.kit.send(P::Presence, Request::Create(create));
        }
        if need & VOTE != 0 && !self.finished {
            if let (Some(vote), Own::Empty) = (self.wanted, self.own) {
                let ops = alloc::vec![
                    MultiOp::Check(CheckVersionRequest {
                        path: tx.clone(),
                        version: 0,
                    }),
                    MultiOp::SetData(SetDataRequest {
                        path: vote_path(&tx, &name),
                        data: vote.data(),
                        version: 0,
                    }),
                ];
                self.kit.send(P::Vote(vote), Request::Multi(ops));
            }
        }
        if need & DECIDE != 0 && !self.finished {
            if let Some(outcome) = self.decision() {
                let request = match (outcome, &self.peers) {
                    (Outcome::Commit, Some(peers)) => {
                        let mut ops: Vec<MultiOp> = peers
                            .keys()
                            .map(|p| {
                                MultiOp::Check(CheckVersionRequest {
                                    path: vote_path(&tx, p),
                                    version: 1,
                                })
                            })
                            .collect();
                        ops.push(MultiOp::SetData(SetDataRequest {
                            path: tx.clone(),
                            data: outcome.data(),
                            version: 0,
                        }));
                        Request::Multi(ops)
                    }
                    _ => Request::SetData(SetDataRequest {
                        path: tx.clone(),
                        data: Outcome::Abort.data(),
                        version: 0,
                    }),
                };
                let outcome = match request {
                    Request::Multi(_) => Outcome::Commit,
                    _ => Outcome::Abort,
                };
                self.kit.send(P::Decide(outcome), request);
            }
        }
        if need & LEAVE != 0 && self.presence == Presence::Ours {
            let path = alive_path(&tx, &name);
            self.kit.send(
                P::Leave,
                Request::Delete(DeleteRequest { path, version: -1 }),
            );
        }
    }

    fn on_answer(&mut self, now: Instant, p: P, result: Result<Response, Error>) {
        if let Err(e) = &result {
            if e.ends_session() {
                // Refused because the session is ending: send nothing more until the
                // session change says what comes next (a new session, or the end).
                self.between_sessions = true;
                return; // the session change decides
            }
        }
        match p {
            P::Sync => {
                // The reads behind it read as lost (`Outbox::answer`): sync again.
                if result.is_err() {
                    self.sync_next = true;
                }
            }
            P::Tx => match result {
                Ok(Response::Data { data, stat }) => {
                    self.kit.succeeded();
                    // Every path to here asked for the other facts in the same batch.
                    self.seen = true;
                    self.tx = match Outcome::read(&data, stat.version) {
                        Some(o) => TxView::Decided(o),
                        None => TxView::Undecided,
                    };
                }
                Ok(_) => self.fail(Error::UnexpectedReply),
                Err(Error::Server(ErrorCode::NoNode)) => {
                    if self.tx_exists() {
                        self.fail(Error::Server(ErrorCode::NoNode)); // deleted under us
                    } else {
                        self.tx = TxView::Missing;
                        self.need |= WAIT_TX;
                    }
                }
                Err(e) if e.is_retryable() => self.again(now, TX),
                Err(e) => self.fail(e),
            },
            P::WaitTx => match result {
                Ok(_) => self.read_all(),
                Err(Error::Server(ErrorCode::NoNode)) => {} // the watch tells
                Err(e) if e.is_retryable() => self.again(now, WAIT_TX),
                Err(e) => self.fail(e),
            },
            P::Payload => match result {
                Ok(Response::Data { data, .. }) => self.payload = Some(data),
                Ok(_) => self.fail(Error::UnexpectedReply),
                Err(Error::Server(ErrorCode::NoNode)) if self.tx_exists() => {
                    self.fail(Error::Server(ErrorCode::NoNode))
                }
                Err(e) if e.is_retryable() => self.kit.failed(now),
                Err(Error::Server(ErrorCode::NoNode)) => {}
                Err(e) => self.fail(e),
            },
            P::Own => match result {
                Ok(Response::Data { data, stat }) => {
                    self.own = match Vote::read(&data, stat.version) {
                        Some(v) => Own::Cast(v),
                        None => Own::Empty,
                    }
                }
                Ok(_) => self.fail(Error::UnexpectedReply),
                Err(Error::Server(ErrorCode::NoNode)) if self.tx_exists() => {
                    self.own = Own::NotASite
                }
                Err(e) if e.is_retryable() => self.again(now, 0),
                Err(Error::Server(ErrorCode::NoNode)) => {}
                Err(e) => self.fail(e),
            },
            P::Coord => match result {
                Ok(_) => self.coord = Some(true),
                Err(Error::Server(ErrorCode::NoNode)) if self.tx_exists() => {
                    self.coord = Some(false)
                }
                Err(e) if e.is_retryable() => self.again(now, COORD),
                Err(Error::Server(ErrorCode::NoNode)) => {}
                Err(e) => self.fail(e),
            },
            P::Presence => match result {
                Ok(_) => self.presence = Presence::Ours,
                Err(Error::Server(ErrorCode::NodeExists)) => {
                    self.presence = Presence::InDoubt;
                    self.need |= CHECK_PRESENCE;
                }
                Err(e) if e.may_have_applied() => {
                    self.presence = Presence::InDoubt;
                    self.again(now, CHECK_PRESENCE);
                }
                Err(e) if e.is_retryable() => {
                    self.presence = Presence::None;
                    self.kit.failed(now);
                }
                Err(Error::Server(ErrorCode::NoNode)) if !self.tx_exists() => {
                    self.presence = Presence::None; // made again once the transaction exists
                }
                Err(e) => {
                    self.presence = Presence::None;
                    self.fail(e);
                }
            },
            P::CheckPresence => match result {
                Ok(Response::Stat(stat)) => {
                    self.presence = if stat.ephemeral_owner == self.session_id {
                        Presence::Ours
                    } else {
                        Presence::Foreign // watched: made again once it goes
                    };
                }
                Ok(_) => self.presence = Presence::None,
                Err(Error::Server(ErrorCode::NoNode)) => self.presence = Presence::None,
                Err(e) if e.is_retryable() => self.again(now, CHECK_PRESENCE),
                Err(_) => self.presence = Presence::None,
            },
            P::Peers => match result {
                Ok(Response::Children(c)) | Ok(Response::Children2 { children: c, .. }) => {
                    if c.len() > MAX_SITES {
                        return self.fail(Error::Overloaded);
                    }
                    let old = self.peers.take().unwrap_or_default();
                    let mut peers = BTreeMap::new();
                    for name in c {
                        let known = old.get(&name).copied().flatten();
                        if known.is_none() {
                            self.peer_reads.insert(name.clone());
                        }
                        peers.insert(name, known);
                    }
                    self.peers = Some(peers);
                    self.need |= PEER;
                }
                Ok(_) => self.fail(Error::UnexpectedReply),
                Err(e) if e.is_retryable() => self.again(now, 0),
                Err(Error::Server(ErrorCode::NoNode)) if !self.tx_exists() => {}
                Err(e) => self.fail(e),
            },
            P::Peer(name) => match result {
                Ok(Response::Data { data, stat }) => {
                    if let Some(slot) = self.peers.as_mut().and_then(|p| p.get_mut(&name)) {
                        *slot = slot.or(Vote::read(&data, stat.version));
                    }
                }
                Err(e) if e.is_retryable() => {
                    self.peer_reads.insert(name);
                    self.again(now, PEER);
                }
                // Gone (the transaction deleted) or refused: the transaction node tells.
                _ => {}
            },
            P::Vote(vote) => self.on_vote(now, vote, result),
            P::Decide(outcome) => self.on_decide(now, outcome, result),
            P::Leave => match result {
                Err(e) if e.is_retryable() => self.kit.failed(now),
                // Deleted, gone, or refused for good (it goes with the session).
                _ => self.presence = Presence::None,
            },
        }
    }

    fn on_vote(&mut self, now: Instant, vote: Vote, result: Result<Response, Error>) {
        match (multi_failure(&result), result) {
            (None, Ok(Response::Multi(_))) => {
                self.kit.succeeded();
                self.own = Own::Cast(vote);
            }
            // Decided (or deleted) before this attempt: the transaction node tells —
            // and our vote node whether an earlier attempt (its reply lost) counted.
            (Some((0, _)), _) => {
                self.sync_next = true;
                self.tx = TxView::Unknown;
                self.need |= TX;
                if self.vote_in_doubt {
                    self.own = Own::Unknown;
                }
            }
            // Already voted (an earlier incarnation, or our own lost reply), or not a site.
            (Some((1, ErrorCode::BadVersion | ErrorCode::NoNode)), _) => {
                self.sync_next = true;
                self.own = Own::Unknown;
            }
            (Some((_, code)), _) => self.fail(Error::Server(code)),
            (None, Err(e)) if e.is_retryable() => {
                self.vote_in_doubt |= e.may_have_applied();
                self.sync_next = true;
                self.kit.failed(now);
            }
            (None, Err(e)) => self.fail(e),
            (None, Ok(_)) => self.fail(Error::UnexpectedReply),
        }
    }

    fn on_decide(&mut self, now: Instant, outcome: Outcome, result: Result<Response, Error>) {
        let tx_index = match outcome {
            Outcome::Commit => self.peers.as_ref().map_or(0, |p| p.len()),
            Outcome::Abort => 0,
        };
        let failure = match &result {
            Ok(Response::Multi(_)) => multi_failure(&result).map(|(i, c)| (i, Error::Server(c))),
            Ok(_) => None,
            Err(e) => Some((tx_index, e.clone())),
        };
        match failure {
            None => {
                self.kit.succeeded();
                self.tx = TxView::Decided(outcome);
            }
            Some((_, e)) if e.is_retryable() => {
                // Retried by the rule (a lost write comes back as `BadVersion`).
                self.sync_next = true;
                self.kit.failed(now);
            }
            Some((i, Error::Server(ErrorCode::BadVersion | ErrorCode::NoNode)))
                if i == tx_index =>
            {
                self.sync_next = true;
                self.tx = TxView::Unknown;
                self.need |= TX; // decided by someone else: read it
            }
            Some((i, Error::Server(ErrorCode::BadVersion | ErrorCode::NoNode))) if i < tx_index => {
                // A vote is not what we read: list the votes again.
                self.peers = None;
                self.again(now, 0);
            }
            Some((_, e)) => self.fail(e),
        }
    }
}

impl Protocol for Site {
    type Event = SiteEvent;

    fn kit(&mut self) -> &mut dyn Plumbing<Self::Event> {
        &mut self.kit
    }

    fn on_reply(&mut self, now: Instant, op: OpId, result: Result<Response, Error>) {
        let Some((p, result)) = self.kit.answer(op, result) else {
            return;
        };
        self.on_answer(now, p, result);
        self.evaluate(now);
        self.drive(now);
    }

    fn on_watch(&mut self, now: Instant, _op: OpId, event: &WatchEvent) {
        let tx = &self.config.tx;
        let path = event.path.as_str();
        let t = event.event_type;
        if path == tx {
            match t {
                EventType::NodeCreated => self.read_all(),
                EventType::NodeDataChanged | EventType::NodeDeleted => self.need |= TX,
                _ => {}
            }
        } else if path == coordinator_path(tx) {
            match t {
                EventType::NodeDeleted => self.coord = Some(false),
                EventType::NodeCreated => self.need |= COORD,
                _ => {}
            }
        } else if path == alive_path(tx, &self.config.name) {
            if t == EventType::NodeDeleted && !self.in_flight(&P::Leave) {
                self.presence = Presence::None; // made again if still wanted
            }
        } else if let Some(peer) = path
            .strip_prefix(votes_dir(tx).as_str())
            .and_then(|p| p.strip_prefix('/'))
        {
            if t == EventType::NodeDataChanged
                && self.peers.as_ref().is_some_and(|p| p.contains_key(peer))
            {
                self.peer_reads.insert(peer.into());
                self.need |= PEER;
            }
        }
        self.evaluate(now);
        self.drive(now);
    }

    fn on_session(&mut self, now: Instant, change: SessionChange) {
        match change {
            SessionChange::Connected { session_id } => {
                self.session_id = session_id;
                if self.between_sessions {
                    self.between_sessions = false;
                    if !self.finished {
                        self.read_all();
                    }
                }
            }
            SessionChange::Suspended => {}
            SessionChange::Reconnected { session_id } => {
                self.session_id = session_id;
                self.sync_next = true;
            }
            SessionChange::Expired => {
                // Our presence node and watches are gone; votes and the outcome stay.
                self.kit.clear_requests();
                self.need = 0;
                self.presence = Presence::None;
                self.coord = None;
                self.peers = None;
                self.peer_reads.clear();
                if !matches!(self.tx, TxView::Decided(_)) {
                    self.tx = TxView::Unknown;
                }
                if !matches!(self.own, Own::Cast(_)) {
                    self.own = Own::Unknown;
                }
                self.sync_next = false;
                self.between_sessions = true;
            }
            SessionChange::Closed => {
                self.kit.clear_requests();
                self.need = 0;
                self.presence = Presence::None;
                self.between_sessions = false;
                self.fail(Error::Closed);
            }
        }
        self.evaluate(now);
        self.drive(now);
    }

    fn on_timeout(&mut self, now: Instant) {
        self.evaluate(now);
        self.drive(now);
    }

    fn on_abandon(&mut self, now: Instant) {
        self.leaving = true;
        if !self.started {
            self.started = true;
            self.finished = true;
        } else if self.wanted.is_none() && !self.finished {
            // We will not vote commit now: say so, so nobody waits for the deadline.
            self.wanted = Some(Vote::Abort);
        }
        if matches!(self.tx, TxView::Unknown | TxView::Missing) {
            self.finished = true; // nothing to vote on yet
        }
        self.evaluate(now);
        self.drive(now);
    }

    fn deadline(&self) -> Option<Instant> {
        if self.need != 0 && !self.between_sessions {
            self.kit.retry_at()
        } else {
            None
        }
    }

    fn finished(&self) -> bool {
        self.finished
            && self.kit.is_quiet()
            && self.kit.no_events()
            && !matches!(
                self.presence,
                Presence::Ours | Presence::InDoubt | Presence::Creating
            )
    }
}
