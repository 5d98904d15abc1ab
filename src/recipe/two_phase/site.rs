//! A site: votes once, learns the outcome (see the [module docs](super)).

use alloc::collections::{BTreeMap, BTreeSet};
use alloc::string::String;
use alloc::vec::Vec;
use bytes::Bytes;

use super::phase::{self, Coord, Life, Participating, Role, Told, TxView, Wanted};
use super::types::{
    alive_path, check_names, coordinator_path, payload_path, vote_path, voter, votes_dir, Outcome,
    Variant, Vote, MAX_SITES,
};
use super::types::{decide_request, delete, exists, list, read, written, Written};
use crate::error::Error;
use crate::proto::*;
use crate::recipe::kit::{protocol_head, Protocol, Reply};
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

type Need = phase::Need<Participating>;

/// A site of a two-phase commit. See the [module docs](super).
///
/// Commands: [`start`](Self::start) (join: read the transaction, announce our
/// presence), [`vote`](Self::vote). Dropping its owner before it voted votes `abort`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Site {
    config: SiteConfig,
    /// The kit, the session, the needs, and the life (`Ended`: a final event was
    /// reported, or the owner left: only cleanup remains).
    role: Role<Participating, P, SiteEvent>,
    /// Our owner left.
    leaving: bool,
    tx: TxView,
    payload: Option<Bytes>,
    own: Own,
    coord: Coord,
    presence: Presence,
    peers: Option<BTreeMap<String, Option<Vote>>>,
    peer_reads: BTreeSet<String>,
    wanted: Option<Wanted>,
    told: Told,
}

impl Site {
    /// A site that does nothing until [`start`](Self::start).
    pub fn new(config: SiteConfig) -> Site {
        Site {
            config,
            role: Role::default(),
            leaving: false,
            tx: TxView::Unseen,
            payload: None,
            own: Own::Unknown,
            coord: Coord::Unknown,
            presence: Presence::None,
            peers: None,
            peer_reads: BTreeSet::new(),
            wanted: None,
            told: Told::default(),
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
        self.role.ended()
    }

    /// Joins the transaction (once): waits for it to exist, reads it, announces our
    /// presence. Reports `Ready` (or `Decided` if it is decided already).
    pub fn start(&mut self, now: Instant) {
        if !self.role.start() {
            return;
        }
        if let Err(error) = check_names(&self.config.tx, Some(&self.config.name)) {
            return self.fail(error);
        }
        self.read_all();
        self.settle(now);
    }

    /// Votes (once; later calls are ignored): written once the transaction is known and
    /// undecided, ended by `Voted` or, if the transaction is decided first, `Decided`
    /// (see [`SiteStatus::vote_outcome`]). Returns false if a vote was already asked
    /// for or the site has ended.
    pub fn vote(&mut self, now: Instant, vote: Vote) -> bool {
        if self.role.ended() || self.wanted.is_some() {
            return false;
        }
        self.want(vote);
        self.settle(now);
        true
    }

    // ----- internals -----

    fn want(&mut self, vote: Vote) {
        self.wanted = Some(Wanted {
            vote,
            in_doubt: false,
        });
    }

    fn fail(&mut self, error: Error) {
        self.role.end(SiteEvent::Failed { error });
    }

    fn read_all(&mut self) {
        self.role
            .need
            .add(Need::TX | Need::PAYLOAD | Need::OWN | Need::COORD | Need::PRESENCE);
        if self.config.variant == Variant::Peers {
            self.role.need.add(Need::PEERS);
        }
    }

    /// Has the transaction node existed (see [`TxView::seen`])?
    fn tx_exists(&self) -> bool {
        self.tx.seen()
    }

    /// What we would write as the outcome, from what we know.
    fn decision(&self) -> Option<Outcome> {
        if self.coord == Coord::Gone {
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
        if self.role.life == Life::Idle || self.role.session.between {
            return;
        }
        if !self.role.ended() {
            self.progress();
        }
        if self.role.ended() {
            self.cleanup();
        }
    }

    /// Reports `Ready` and `Voted` once each, when they are true.
    fn tell(&mut self) {
        // In the peers variant, ready means watching every vote too.
        let watching = self.config.variant != Variant::Peers
            || (self.peers.is_some()
                && self.peer_reads.is_empty()
                && !self.role.kit.any(|p| matches!(p, P::Peer(_))));
        if self.tx == TxView::Undecided && !self.told.ready && watching {
            if let (Some(payload), Own::Empty | Own::Cast(_)) = (self.payload.clone(), self.own) {
                self.told.ready = true;
                let voted = self.vote_cast();
                self.told.voted = voted.is_some();
                self.role.kit.emit(SiteEvent::Ready { payload, voted });
            }
        }
        if let (Own::Cast(vote), Some(_), false) = (self.own, self.wanted, self.told.voted) {
            self.told.voted = true;
            self.role.kit.emit(SiteEvent::Voted { vote });
        }
    }

    fn progress(&mut self) {
        self.tell();
        if let TxView::Decided(outcome) = self.tx {
            // We asked to vote and an attempt may have counted (its reply lost): our
            // vote node tells whether it did, before the outcome is reported.
            if self.wanted.is_some() && !self.told.voted && self.own == Own::Unknown {
                if !self.role.in_flight(&P::Own) {
                    self.role.need.add(Need::OWN);
                }
                return;
            }
            return self.role.end(SiteEvent::Decided { outcome });
        }
        if self.tx != TxView::Undecided {
            return;
        }
        if self.own == Own::NotASite {
            return self.fail(Error::Server(ErrorCode::NoNode));
        }
        if self.leaving && !matches!(self.own, Own::Unknown | Own::Empty) {
            self.role.life = Life::Ended; // our vote is in: nobody waits for us any more
            return;
        }
        self.ask();
    }

    /// Facts still unknown, and writes due: ask for them.
    fn ask(&mut self) {
        let unknown = [
            (self.payload.is_none(), P::Payload, Need::PAYLOAD),
            (self.own == Own::Unknown, P::Own, Need::OWN),
            (self.coord == Coord::Unknown, P::Coord, Need::COORD),
            (self.presence == Presence::None, P::Presence, Need::PRESENCE),
            (
                self.config.variant == Variant::Peers && self.peers.is_none(),
                P::Peers,
                Need::PEERS,
            ),
        ];
        for (wanted, p, need) in unknown {
            if wanted && !self.role.in_flight(&p) {
                self.role.need.add(need);
            }
        }
        if self.wanted.is_some()
            && self.own == Own::Empty
            && !self.role.kit.any(|p| matches!(p, P::Vote(_)))
        {
            self.role.need.add(Need::VOTE);
        }
        if self.decision().is_some() && !self.role.kit.any(|p| matches!(p, P::Decide(_))) {
            self.role.need.add(Need::DECIDE);
        }
    }

    /// After the final event: remove our presence node.
    fn cleanup(&mut self) {
        self.role.need.keep(Need::LEAVE | Need::CHECK_PRESENCE);
        match self.presence {
            Presence::Ours if !self.role.in_flight(&P::Leave) => self.role.need.add(Need::LEAVE),
            Presence::InDoubt if !self.role.in_flight(&P::CheckPresence) => {
                self.role.need.add(Need::CHECK_PRESENCE)
            }
            _ => {}
        }
    }

    /// The end of every input: what is known is evaluated, then the requests it calls
    /// for are sent.
    fn settle(&mut self, now: Instant) {
        self.evaluate(now);
        self.drive(now);
    }

    /// Sends what is needed, if the session allows it now.
    fn drive(&mut self, now: Instant) {
        let Some(need) = self.role.due(now) else {
            return;
        };
        let tx = self.config.tx.clone();
        let name = self.config.name.clone();
        if need.any(Need::READS) && self.role.session.take_sync() {
            self.role.kit.sync(P::Sync, &tx);
        }
        self.send_reads(need, &tx, &name);
        if need.any(Need::PRESENCE) && self.presence == Presence::None && !self.role.ended() {
            self.presence = Presence::Creating;
            let create = CreateRequest::new(
                alive_path(&tx, &name),
                Bytes::new(),
                self.config.acl.clone(),
                CreateMode::Ephemeral,
            );
            self.role.kit.send(P::Presence, Request::Create(create));
        }
        if need.any(Need::VOTE) && !self.role.ended() {
            self.send_vote(&tx, &name);
        }
        if need.any(Need::DECIDE) && !self.role.ended() {
            if let Some(outcome) = self.decision() {
                let peers = self.peers.as_ref().map(|p| p.keys());
                let request = match (outcome, peers) {
                    (Outcome::Commit, Some(peers)) => decide_request(&tx, Outcome::Commit, peers),
                    _ => decide_request(&tx, Outcome::Abort, core::iter::empty()),
                };
                let outcome = match request {
                    Request::Multi(_) => Outcome::Commit,
                    _ => Outcome::Abort,
                };
                self.role.kit.send(P::Decide(outcome), request);
            }
        }
        if need.any(Need::LEAVE) && self.presence == Presence::Ours {
            self.role.kit.send(P::Leave, delete(alive_path(&tx, &name)));
        }
    }

    /// The reads (and watches) `need` asks for.
    fn send_reads(&mut self, need: Need, tx: &str, name: &str) {
        if need.any(Need::TX) {
            self.role.kit.send(P::Tx, read(tx.into(), true));
        }
        if need.any(Need::WAIT_TX) {
            self.role.kit.send(P::WaitTx, exists(tx.into()));
        }
        if need.any(Need::PAYLOAD) {
            self.role
                .kit
                .send(P::Payload, read(payload_path(tx), false));
        }
        if need.any(Need::OWN) {
            self.role.kit.send(P::Own, read(vote_path(tx, name), false));
        }
        if need.any(Need::COORD) {
            self.role.kit.send(P::Coord, exists(coordinator_path(tx)));
        }
        if need.any(Need::PEERS) {
            self.role.kit.send(P::Peers, list(votes_dir(tx), false));
        }
        if need.any(Need::PEER) {
            for peer in core::mem::take(&mut self.peer_reads) {
                let path = vote_path(tx, &peer);
                self.role.kit.send(P::Peer(peer), read(path, true));
            }
        }
        if need.any(Need::CHECK_PRESENCE) {
            self.role
                .kit
                .send(P::CheckPresence, exists(alive_path(tx, name)));
        }
    }

    /// Our vote: `multi[check(<tx>, version 0), setData(<tx>/votes/<site>, vote, version 0)]`.
    fn send_vote(&mut self, tx: &str, name: &str) {
        if let (Some(Wanted { vote, .. }), Own::Empty) = (self.wanted, self.own) {
            let ops = alloc::vec![
                MultiOp::Check(CheckVersionRequest {
                    path: tx.into(),
                    version: 0,
                }),
                MultiOp::SetData(SetDataRequest {
                    path: vote_path(tx, name),
                    data: vote.data(),
                    version: 0,
                }),
            ];
            self.role.kit.send(P::Vote(vote), Request::Multi(ops));
        }
    }

    /// The answer to request `op`, sent for `p` (`on_reply`: `protocol_head!`).
    fn on_answer(&mut self, now: Instant, _op: OpId, p: P, result: Reply) {
        // A refused request: the session change decides.
        if !self.role.session.refused(&result) {
            match p {
                // The reads behind it read as lost (`Outbox::answer`): sync again.
                P::Sync => self.role.session.sync_next |= result.is_err(),
                P::Tx => self.on_tx(now, result),
                P::WaitTx => match result {
                    Ok(_) => self.read_all(),
                    Err(Error::Server(ErrorCode::NoNode)) => {} // the watch tells
                    Err(e) if e.is_retryable() => self.role.again(now, Need::WAIT_TX),
                    Err(e) => self.fail(e),
                },
                P::Payload | P::Own | P::Coord => self.on_fact(now, p, result),
                P::Presence => self.on_presence(now, result),
                P::CheckPresence => self.on_check_presence(now, result),
                P::Peers => self.on_peers(now, result),
                P::Peer(name) => match result {
                    Ok(Response::Data { data, stat }) => {
                        if let Some(slot) = self.peers.as_mut().and_then(|p| p.get_mut(&name)) {
                            *slot = slot.or(Vote::read(&data, stat.version));
                        }
                    }
                    Err(e) if e.is_retryable() => {
                        self.peer_reads.insert(name);
                        self.role.again(now, Need::PEER);
                    }
                    // Gone (the transaction deleted) or refused: the transaction node tells.
                    _ => {}
                },
                P::Vote(vote) => self.on_vote(now, vote, result),
                P::Decide(outcome) => self.on_decide(now, outcome, result),
                P::Leave => match result {
                    Err(e) if e.is_retryable() => self.role.kit.failed(now),
                    // Deleted, gone, or refused for good (it goes with the session).
                    _ => self.presence = Presence::None,
                },
            }
        }
        self.settle(now);
    }

    /// The payload, our vote node, the coordinator's presence: read once they are
    /// unknown.
    fn on_fact(&mut self, now: Instant, p: P, result: Reply) {
        match p {
            P::Payload => match result {
                Ok(Response::Data { data, .. }) => self.payload = Some(data),
                Ok(_) => self.fail(Error::UnexpectedReply),
                Err(Error::Server(ErrorCode::NoNode)) if self.tx_exists() => {
                    self.fail(Error::Server(ErrorCode::NoNode))
                }
                Err(e) if e.is_retryable() => self.role.kit.failed(now),
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
                Err(e) if e.is_retryable() => self.role.again(now, Need::default()),
                Err(Error::Server(ErrorCode::NoNode)) => {}
                Err(e) => self.fail(e),
            },
            P::Coord => match result {
                Ok(_) => self.coord = Coord::Present,
                Err(Error::Server(ErrorCode::NoNode)) if self.tx_exists() => {
                    self.coord = Coord::Gone
                }
                Err(e) if e.is_retryable() => self.role.again(now, Need::COORD),
                Err(Error::Server(ErrorCode::NoNode)) => {}
                Err(e) => self.fail(e),
            },
            _ => {}
        }
    }

    fn on_tx(&mut self, now: Instant, result: Reply) {
        match result {
            Ok(Response::Data { data, stat }) => {
                self.role.kit.succeeded();
                // Every path to here asked for the other facts in the same batch.
                self.tx =
                    Outcome::read(&data, stat.version).map_or(TxView::Undecided, TxView::Decided);
            }
            Ok(_) => self.fail(Error::UnexpectedReply),
            Err(Error::Server(ErrorCode::NoNode)) => {
                if self.tx_exists() {
                    self.fail(Error::Server(ErrorCode::NoNode)); // deleted under us
                } else {
                    self.tx = TxView::Missing;
                    self.role.need.add(Need::WAIT_TX);
                }
            }
            Err(e) if e.is_retryable() => self.role.again(now, Need::TX),
            Err(e) => self.fail(e),
        }
    }

    fn on_presence(&mut self, now: Instant, result: Reply) {
        match result {
            Ok(_) => self.presence = Presence::Ours,
            Err(Error::Server(ErrorCode::NodeExists)) => {
                self.presence = Presence::InDoubt;
                self.role.need.add(Need::CHECK_PRESENCE);
            }
            Err(e) if e.may_have_applied() => {
                self.presence = Presence::InDoubt;
                self.role.again(now, Need::CHECK_PRESENCE);
            }
            Err(e) if e.is_retryable() => {
                self.presence = Presence::None;
                self.role.kit.failed(now);
            }
            Err(Error::Server(ErrorCode::NoNode)) if !self.tx_exists() => {
                self.presence = Presence::None; // made again once the transaction exists
            }
            Err(e) => {
                self.presence = Presence::None;
                self.fail(e);
            }
        }
    }

    fn on_check_presence(&mut self, now: Instant, result: Reply) {
        match result {
            Ok(Response::Stat(stat)) => {
                self.presence = if stat.ephemeral_owner == self.role.session.id {
                    Presence::Ours
                } else {
                    Presence::Foreign // watched: made again once it goes
                };
            }
            Ok(_) => self.presence = Presence::None,
            Err(Error::Server(ErrorCode::NoNode)) => self.presence = Presence::None,
            Err(e) if e.is_retryable() => self.role.again(now, Need::CHECK_PRESENCE),
            Err(_) => self.presence = Presence::None,
        }
    }

    fn on_peers(&mut self, now: Instant, result: Reply) {
        match result {
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
                self.role.need.add(Need::PEER);
            }
            Ok(_) => self.fail(Error::UnexpectedReply),
            Err(e) if e.is_retryable() => self.role.again(now, Need::default()),
            Err(Error::Server(ErrorCode::NoNode)) if !self.tx_exists() => {}
            Err(e) => self.fail(e),
        }
    }

    fn on_vote(&mut self, now: Instant, vote: Vote, result: Reply) {
        match (multi_failure(&result), result) {
            (None, Ok(Response::Multi(_))) => {
                self.role.kit.succeeded();
                self.own = Own::Cast(vote);
            }
            // Decided (or deleted) before this attempt: the transaction node tells —
            // and our vote node whether an earlier attempt (its reply lost) counted.
            (Some((0, _)), _) => {
                self.role.session.sync_next = true;
                self.tx.forget();
                self.role.need.add(Need::TX);
                if self.wanted.is_some_and(|w| w.in_doubt) {
                    self.own = Own::Unknown;
                }
            }
            // Already voted (an earlier incarnation, or our own lost reply), or not a site.
            (Some((1, ErrorCode::BadVersion | ErrorCode::NoNode)), _) => {
                self.role.session.sync_next = true;
                self.own = Own::Unknown;
            }
            (Some((_, code)), _) => self.fail(Error::Server(code)),
            (None, Err(e)) if e.is_retryable() => {
                if let Some(w) = self.wanted.as_mut() {
                    w.in_doubt |= e.may_have_applied();
                }
                self.role.again(now, Need::default());
            }
            (None, Err(e)) => self.fail(e),
            (None, Ok(_)) => self.fail(Error::UnexpectedReply),
        }
    }

    fn on_decide(&mut self, now: Instant, outcome: Outcome, result: Reply) {
        match written(outcome, self.peers.as_ref().map_or(0, |p| p.len()), &result) {
            Written::Done => {
                self.role.kit.succeeded();
                self.tx = TxView::Decided(outcome);
            }
            // Retried by the rule (a lost write comes back as `BadVersion`).
            Written::Retry => self.role.again(now, Need::default()),
            Written::Taken => {
                self.role.session.sync_next = true;
                self.tx.forget();
                self.role.need.add(Need::TX); // decided by someone else: read it
            }
            Written::VoteChanged => {
                // A vote is not what we read: list the votes again.
                self.peers = None;
                self.role.again(now, Need::default());
            }
            Written::Failed(e) => self.fail(e),
        }
    }

    /// The session expired: our presence node and watches are gone; votes and the
    /// outcome stay.
    fn expired(&mut self) {
        self.role.drop_requests();
        self.presence = Presence::None;
        self.coord = Coord::Unknown;
        self.peers = None;
        self.peer_reads.clear();
        if !matches!(self.tx, TxView::Decided(_)) {
            self.tx.forget();
        }
        if !matches!(self.own, Own::Cast(_)) {
            self.own = Own::Unknown;
        }
        self.role.session.sync_next = false;
        self.role.session.between = true;
    }
}

impl Protocol for Site {
    protocol_head!(SiteEvent, answer, role.kit);

    fn on_watch(&mut self, now: Instant, _op: OpId, event: &WatchEvent) {
        let tx = &self.config.tx;
        let path = event.path.as_str();
        let t = event.event_type;
        if path == tx {
            match t {
                EventType::NodeCreated => self.read_all(),
                EventType::NodeDataChanged | EventType::NodeDeleted => self.role.need.add(Need::TX),
                _ => {}
            }
        } else if path == coordinator_path(tx) {
            match t {
                EventType::NodeDeleted => self.coord = Coord::Gone,
                EventType::NodeCreated => self.role.need.add(Need::COORD),
                _ => {}
            }
        } else if path == alive_path(tx, &self.config.name) {
            if t == EventType::NodeDeleted && !self.role.in_flight(&P::Leave) {
                self.presence = Presence::None; // made again if still wanted
            }
        } else if let Some(peer) = voter(tx, path) {
            if t == EventType::NodeDataChanged
                && self.peers.as_ref().is_some_and(|p| p.contains_key(peer))
            {
                self.peer_reads.insert(peer.into());
                self.role.need.add(Need::PEER);
            }
        }
        self.settle(now);
    }

    fn on_session(&mut self, now: Instant, change: SessionChange) {
        match change {
            SessionChange::Expired => self.expired(),
            SessionChange::Closed => {
                self.presence = Presence::None;
                self.role.closed(SiteEvent::Failed {
                    error: Error::Closed,
                });
            }
            _ => {
                if self.role.session.follow(change) && !self.role.ended() {
                    self.read_all();
                }
            }
        }
        self.settle(now);
    }

    fn on_timeout(&mut self, now: Instant) {
        self.settle(now);
    }

    fn on_abandon(&mut self, now: Instant) {
        self.leaving = true;
        if self.role.life == Life::Idle {
            self.role.life = Life::Ended;
        } else if self.wanted.is_none() && !self.role.ended() {
            // We will not vote commit now: say so, so nobody waits for the deadline.
            self.want(Vote::Abort);
        }
        if matches!(self.tx, TxView::Unseen | TxView::Stale | TxView::Missing) {
            self.role.life = Life::Ended; // nothing to vote on yet
        }
        self.settle(now);
    }

    fn deadline(&self) -> Option<Instant> {
        self.role.timeout(None)
    }

    fn finished(&self) -> bool {
        self.role.ended()
            && self.role.kit.is_quiet()
            && self.role.kit.no_events()
            && !matches!(
                self.presence,
                Presence::Ours | Presence::InDoubt | Presence::Creating
            )
    }

    fn check(&self) {
        debug_assert!(
            !self.told.ready || self.payload.is_some(),
            "Ready told without a payload"
        );
        debug_assert!(
            !self.told.voted || self.wanted.is_some() || self.told.ready,
            "Voted told before a vote was asked for or Ready told it"
        );
    }
}
