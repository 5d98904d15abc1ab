//! The coordinator: creates the transaction, enforces its deadline, decides (in the
//! O(n) variant) or waits for the sites' decision (see the [module docs](super)).

use alloc::collections::{BTreeMap, BTreeSet};
use alloc::string::String;
use alloc::vec::Vec;
use bytes::Bytes;
use core::time::Duration;

use super::phase::{self, Coordinating, Life, Presence, Role, Setup, Step, Timer};
use super::types::{
    alive_dir, check_names, coordinator_path, payload_path, vote_path, voter, votes_dir, Outcome,
    Variant, Vote, MAX_SITES,
};
use super::types::{decide_request, delete, list, read, written, Written};
use crate::error::Error;
use crate::proto::*;
use crate::recipe::kit::{parent_of, protocol_head, ParentStep, Protocol, Reply};
use crate::recipe::lock::node_id;
use crate::recipe::{OpId, SessionChange};
use crate::session::WatchEvent;
use crate::time::Instant;

/// How to run a transaction as its coordinator.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct CoordinatorConfig {
    /// The transaction node (must not exist yet).
    pub tx: String,
    /// The sites, by name (each one path component; at most [`MAX_SITES`], no repeats).
    pub sites: Vec<String>,
    /// Who watches the votes.
    pub variant: Variant,
    /// The transaction itself, stored in `<tx>/payload` for the sites.
    pub payload: Bytes,
    /// How long after [`Coordinator::start`] a site that has not voted and has no
    /// presence node makes the transaction abort. Default 10 s.
    pub deadline: Duration,
    /// Abort anyway if not every vote is in by this long after the start (the classic
    /// 2PC coordinator timeout). Default none: live sites are waited for.
    pub vote_timeout: Option<Duration>,
    /// Our unique id (a UUID string from the driver's entropy), written into
    /// `<tx>/votes` so a setup whose reply was lost is recognised as ours.
    pub id: String,
    /// ACL of the nodes we create (and of parents).
    pub acl: Vec<Acl>,
}

impl CoordinatorConfig {
    /// A config with an empty payload, a 10 s deadline, no vote timeout, the open ACL;
    /// `entropy` (128 bits from the driver) makes the id.
    pub fn new(tx: &str, sites: &[&str], variant: Variant, entropy: (u64, u64)) -> Self {
        CoordinatorConfig {
            tx: tx.into(),
            sites: sites.iter().map(|s| String::from(*s)).collect(),
            variant,
            payload: Bytes::new(),
            deadline: Duration::from_secs(10),
            vote_timeout: None,
            id: node_id(entropy.0, entropy.1),
            acl: Acl::open_unsafe(),
        }
    }
}

/// What a coordinator reports. `Started` comes once, `Voted` once per site it sees
/// vote; `Decided` and `Failed` are final.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum CoordinatorEvent {
    /// The transaction node, the payload and every site's vote node exist: sites may
    /// vote.
    Started,
    /// A site's vote (always in the O(n) variant; in the peers variant only votes read
    /// after the deadline).
    Voted {
        /// The site.
        site: String,
        /// Its vote.
        vote: Vote,
    },
    /// The outcome, as written in the transaction node.
    Decided {
        /// Commit or abort.
        outcome: Outcome,
    },
    /// The transaction could not be run: the node exists already (another
    /// transaction's), a parent cannot be created, an invalid path or site list, no
    /// permission, the transaction node deleted before the outcome, the session closed.
    Failed {
        /// The cause.
        error: Error,
    },
}

impl CoordinatorEvent {
    /// Is it final (nothing follows)?
    pub fn is_final(&self) -> bool {
        matches!(
            self,
            CoordinatorEvent::Decided { .. } | CoordinatorEvent::Failed { .. }
        )
    }

    /// For a caller waiting after [`Coordinator::start`]: `Some` when the transaction
    /// exists (or is even decided) or cannot be made.
    pub fn started_outcome(&self) -> Option<Result<(), Error>> {
        match self {
            CoordinatorEvent::Started | CoordinatorEvent::Decided { .. } => Some(Ok(())),
            CoordinatorEvent::Failed { error } => Some(Err(error.clone())),
            CoordinatorEvent::Voted { .. } => None,
        }
    }

    /// For a caller waiting for the outcome: `Some` when decided or failed.
    pub fn outcome(&self) -> Option<Result<Outcome, Error>> {
        match self {
            CoordinatorEvent::Decided { outcome } => Some(Ok(*outcome)),
            CoordinatorEvent::Failed { error } => Some(Err(error.clone())),
            _ => None,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum P {
    Parent(String),
    Setup,
    Sync,
    Find,
    Tx,
    Vote(String),
    Alive,
    Decide(Outcome),
    Leave,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum TxView {
    Unknown,
    Undecided,
    Decided(Outcome),
}

type Need = phase::Need<Coordinating>;

/// The coordinator of a two-phase commit. See the [module docs](super).
///
/// Command: [`start`](Self::start). Dropping its owner before the outcome is known
/// writes `abort`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Coordinator {
    config: CoordinatorConfig,
    /// The kit, the session, the needs and the life.
    role: Role<Coordinating, P, CoordinatorEvent>,
    setup: Setup,
    presence: Presence,
    tx: TxView,
    votes: BTreeMap<String, Option<Vote>>,
    vote_reads: BTreeSet<String>,
    present: Option<BTreeSet<String>>,
    /// The deadline for sites without vote or presence ([`CoordinatorConfig::deadline`]).
    deadline: Timer,
    /// The hard vote timeout ([`CoordinatorConfig::vote_timeout`]).
    hard: Timer,
    /// Our owner left: the outcome is `abort` unless it is known already.
    abandoned: bool,
    /// Vote watches are (being) armed.
    tracking: bool,
}

impl Coordinator {
    /// A coordinator that does nothing until [`start`](Self::start).
    pub fn new(config: CoordinatorConfig) -> Coordinator {
        Coordinator {
            config,
            role: Role::default(),
            setup: Setup {
                step: Step::Idle,
                found_tx: false,
                without_votes: 0,
            },
            presence: Presence::Absent,
            tx: TxView::Unknown,
            votes: BTreeMap::new(),
            vote_reads: BTreeSet::new(),
            present: None,
            deadline: Timer::Off,
            hard: Timer::Off,
            abandoned: false,
            tracking: false,
        }
    }

    /// The configuration.
    pub fn config(&self) -> &CoordinatorConfig {
        &self.config
    }

    /// The outcome, once known.
    pub fn outcome(&self) -> Option<Outcome> {
        match self.tx {
            TxView::Decided(o) => Some(o),
            _ => None,
        }
    }

    /// The votes seen so far, by site (`None`: not voted as far as we know).
    pub fn votes(&self) -> impl Iterator<Item = (&str, Option<Vote>)> {
        self.votes.iter().map(|(s, v)| (s.as_str(), *v))
    }

    /// Has it reported its final event?
    pub fn has_ended(&self) -> bool {
        self.role.ended()
    }

    /// Creates the transaction (once) and runs it to its outcome: `Started`, then
    /// `Decided` (or `Failed`).
    pub fn start(&mut self, now: Instant) {
        if !self.role.start() {
            return;
        }
        if let Err(error) = self.validate() {
            return self.fail(error);
        }
        self.votes = self
            .config
            .sites
            .iter()
            .map(|s| (s.clone(), None))
            .collect();
        self.deadline = Timer::At(now + self.config.deadline);
        self.hard = Timer::at(self.config.vote_timeout.map(|d| now + d));
        self.setup.step = Step::Sending;
        self.role.need.add(Need::SETUP);
        self.settle(now);
    }

    fn validate(&self) -> Result<(), Error> {
        let sites = &self.config.sites;
        check_names(&self.config.tx, None)?;
        for s in sites {
            check_names(&self.config.tx, Some(s))?;
        }
        let unique: BTreeSet<&String> = sites.iter().collect();
        if sites.is_empty() || sites.len() > MAX_SITES || unique.len() != sites.len() {
            return Err(Error::Server(ErrorCode::BadArguments));
        }
        Ok(())
    }

    // ----- internals -----

    fn fail(&mut self, error: Error) {
        self.role.end(CoordinatorEvent::Failed { error });
    }

    fn decision(&self) -> Option<Outcome> {
        if self.presence == Presence::Lost || self.abandoned || self.hard.passed() {
            return Some(Outcome::Abort);
        }
        if self.votes.values().any(|v| *v == Some(Vote::Abort)) {
            return Some(Outcome::Abort);
        }
        if self.votes.values().all(|v| *v == Some(Vote::Commit)) {
            return Some(Outcome::Commit);
        }
        if let (true, Some(present)) = (self.deadline.passed(), &self.present) {
            // A site whose vote is being read (its notification said it changed) has
            // not been shown to have no vote: its read decides.
            let reading = |s: &String| {
                self.vote_reads.contains(s)
                    || self.role.kit.any(|p| matches!(p, P::Vote(x) if x == s))
            };
            let gone = self
                .votes
                .iter()
                .any(|(s, v)| v.is_none() && !present.contains(s) && !reading(s));
            if gone {
                return Some(Outcome::Abort);
            }
        }
        None
    }

    fn evaluate(&mut self, now: Instant) {
        if self.role.life == Life::Idle || self.role.session.between {
            return;
        }
        self.deadline.tick(now);
        self.hard.tick(now);
        if !self.role.ended() {
            self.progress();
        }
        if self.role.ended() {
            self.role.need.keep(Need::LEAVE);
            if self.presence == Presence::Ours && !self.role.in_flight(&P::Leave) {
                self.role.need.add(Need::LEAVE);
            }
        }
    }

    fn progress(&mut self) {
        if self.setup.step == Step::InDoubt && !self.role.in_flight(&P::Find) {
            self.role.need.add(Need::FIND);
        }
        if self.setup.step != Step::Done {
            return;
        }
        if let TxView::Decided(outcome) = self.tx {
            return self.role.end(CoordinatorEvent::Decided { outcome });
        }
        if self.tx == TxView::Unknown && !self.role.in_flight(&P::Tx) {
            self.role.need.add(Need::TX);
        }
        // Votes matter while we may still decide on them (not once we must abort).
        let track = (self.config.variant == Variant::Coordinator || self.deadline.passed())
            && self.presence != Presence::Lost;
        if track && !self.tracking {
            self.tracking = true;
            for (s, v) in &self.votes {
                if v.is_none() {
                    self.vote_reads.insert(s.clone());
                }
            }
        }
        if self.tracking && !self.vote_reads.is_empty() {
            self.role.need.add(Need::VOTES);
        }
        if self.deadline.passed() && self.present.is_none() && !self.role.in_flight(&P::Alive) {
            self.role.need.add(Need::ALIVE);
        }
        if self.tx == TxView::Undecided
            && self.decision().is_some()
            && !self.role.kit.any(|p| matches!(p, P::Decide(_)))
        {
            self.role.need.add(Need::DECIDE);
        }
    }

    fn setup_request(&self) -> Request {
        let tx = &self.config.tx;
        let acl = &self.config.acl;
        let create = |path: String, data: Bytes, mode| {
            MultiOp::Create(CreateRequest::new(path, data, acl.clone(), mode))
        };
        let persistent = CreateMode::Persistent;
        let mut ops = Vec::with_capacity(self.config.sites.len() + 5);
        ops.push(create(tx.clone(), Bytes::new(), persistent));
        ops.push(create(
            payload_path(tx),
            self.config.payload.clone(),
            persistent,
        ));
        let id = Bytes::from(self.config.id.clone().into_bytes());
        ops.push(create(votes_dir(tx), id.clone(), persistent));
        for s in &self.config.sites {
            ops.push(create(vote_path(tx, s), Bytes::new(), persistent));
        }
        ops.push(create(alive_dir(tx), Bytes::new(), persistent));
        ops.push(create(coordinator_path(tx), id, CreateMode::Ephemeral));
        Request::Multi(ops)
    }

    /// The end of every input: what is known is evaluated, then the requests it calls
    /// for are sent.
    fn settle(&mut self, now: Instant) {
        self.evaluate(now);
        self.drive(now);
    }

    fn drive(&mut self, now: Instant) {
        let Some(need) = self.role.due(now) else {
            return;
        };
        let tx = self.config.tx.clone();
        if self.setup.step == Step::Sending {
            self.send_setup(need, &tx);
        }
        if need.any(Need::READS) && self.role.session.take_sync() {
            self.role.kit.sync(P::Sync, &tx);
        }
        if need.any(Need::FIND) && self.setup.step == Step::InDoubt {
            self.role.kit.send(P::Find, read(votes_dir(&tx), false));
        }
        if !self.role.ended() {
            self.send_reads(need, &tx);
        }
        if need.any(Need::DECIDE) && !self.role.ended() && self.tx == TxView::Undecided {
            if let Some(outcome) = self.decision() {
                let checked: &[String] = match outcome {
                    Outcome::Commit => &self.config.sites,
                    Outcome::Abort => &[],
                };
                let request = decide_request(&tx, outcome, checked.iter());
                self.role.kit.send(P::Decide(outcome), request);
            }
        }
        if need.any(Need::LEAVE) && self.presence == Presence::Ours {
            self.role.kit.send(P::Leave, delete(coordinator_path(&tx)));
        }
    }

    /// The parents' round and the setup `multi`, with the reads of what it makes.
    fn send_setup(&mut self, need: Need, tx: &str) {
        if need.any(Need::PARENTS) {
            let acl = &self.config.acl;
            self.role
                .kit
                .send_parents(tx, acl, CreateMode::Container, P::Parent);
        }
        if !need.any(Need::SETUP) {
            return;
        }
        let request = self.setup_request();
        self.role.kit.send(P::Setup, request);
        // Executed after the setup: read (and watch) what it made, same round trip.
        self.tx = TxView::Unknown;
        self.role.kit.send(P::Tx, read(tx.into(), true));
        if self.config.variant == Variant::Coordinator {
            self.tracking = true;
            self.vote_reads.clear(); // all read here
            for s in self.config.sites.clone() {
                let path = vote_path(tx, &s);
                self.role.kit.send(P::Vote(s), read(path, true));
            }
        }
    }

    /// The reads (and watches) of `<tx>`, the votes and the presence nodes.
    fn send_reads(&mut self, need: Need, tx: &str) {
        if need.any(Need::TX) {
            self.role.kit.send(P::Tx, read(tx.into(), true));
        }
        if need.any(Need::VOTES) {
            for s in core::mem::take(&mut self.vote_reads) {
                let path = vote_path(tx, &s);
                self.role.kit.send(P::Vote(s), read(path, true));
            }
        }
        if need.any(Need::ALIVE) {
            self.role.kit.send(P::Alive, list(alive_dir(tx), true));
        }
    }

    fn setup_done(&mut self) {
        self.role.kit.succeeded();
        if self.setup.step != Step::Done {
            // Made by our own multi in this session; else (a restarted process found
            // its transaction) the presence node is an earlier session's: not touched.
            self.presence = match self.presence {
                Presence::Lost => Presence::Lost,
                Presence::InDoubt | Presence::Ours => Presence::Ours,
                Presence::Absent if self.setup.step == Step::Sending => Presence::Ours,
                Presence::Absent => Presence::Absent,
            };
            self.setup.step = Step::Done;
            self.role.kit.emit(CoordinatorEvent::Started);
        }
    }

    /// The setup was not applied: send it again, unless our owner left.
    fn setup_again(&mut self, now: Instant, need: Need) {
        if self.abandoned {
            self.setup.step = Step::Idle;
            self.role.life = Life::Ended; // nothing was made, nobody waits
            return;
        }
        // Never made, so no presence of ours was lost either: make it in this session.
        self.setup.step = Step::Sending;
        if self.presence == Presence::Lost {
            self.presence = Presence::Absent;
        }
        if !need.is_empty() {
            self.role.again(now, need);
        } else {
            self.role.need.add(Need::SETUP);
        }
    }

    fn on_setup(&mut self, now: Instant, result: Reply) {
        if self.setup.step != Step::Sending {
            return;
        }
        self.setup.found_tx = false;
        match (multi_failure(&result), result) {
            (None, Ok(Response::Multi(_))) => self.setup_done(),
            (Some((0, ErrorCode::NodeExists)), _) => {
                self.setup.found_tx = true;
                // Ours, made by a request whose reply was lost? Look for our id.
                self.setup.step = Step::InDoubt;
                self.role.session.sync_next = true;
            }
            (Some((0, ErrorCode::NoNode)), _) => {
                match self.role.kit.parents_missing(parent_of(&self.config.tx)) {
                    ParentStep::Again => self.role.again(now, Need::PARENTS | Need::SETUP),
                    ParentStep::Create => self.role.need.add(Need::PARENTS | Need::SETUP),
                    ParentStep::Fail(e) => self.fail(e),
                }
            }
            (Some((_, code)), _) => self.fail(Error::Server(code)),
            (None, Err(e)) if e.may_have_applied() => {
                if self.presence != Presence::Lost {
                    self.presence = Presence::InDoubt;
                }
                self.setup.step = Step::InDoubt;
                self.role.again(now, Need::default());
            }
            (None, Err(e)) if e.is_retryable() => self.setup_again(now, Need::SETUP),
            (None, Err(e)) if e.ends_session() => {}
            (None, Err(e)) => self.fail(e),
            (None, Ok(_)) => self.fail(Error::UnexpectedReply),
        }
    }

    /// The lookup of our id after a setup in doubt.
    fn on_find(&mut self, now: Instant, result: Reply) {
        match result {
            Ok(Response::Data { data, .. }) if data == self.config.id.as_bytes() => {
                self.setup_done()
            }
            Ok(_) => {
                self.setup.step = Step::Idle;
                self.fail(Error::Server(ErrorCode::NodeExists)); // another's
            }
            Err(Error::Server(ErrorCode::NoNode)) => {
                if self.setup.found_tx {
                    // `<tx>` without `<tx>/votes`: gone since the setup read it (set
                    // up again), or not a transaction at all (the second time: fail
                    // as for another's, instead of setting up for ever).
                    self.setup.without_votes += 1;
                    if self.setup.without_votes >= 2 {
                        self.setup.step = Step::Idle;
                        return self.fail(Error::Server(ErrorCode::NodeExists));
                    }
                } else {
                    self.setup.without_votes = 0;
                }
                self.setup_again(now, Need::default())
            }
            Err(e) if e.is_retryable() => self.role.again(now, Need::default()),
            Err(e) => self.fail(e),
        }
    }

    /// The answer to request `op`, sent for `p` (`on_reply`: `protocol_head!`).
    fn on_answer(&mut self, now: Instant, _op: OpId, p: P, result: Reply) {
        // A refused request: the session change decides.
        if !self.role.session.refused(&result) {
            match p {
                P::Parent(path) => self.role.kit.parent_answered(&path, &result),
                P::Setup => self.on_setup(now, result),
                // The reads behind it read as lost (`Outbox::answer`): sync again.
                P::Sync => self.role.session.sync_next |= result.is_err(),
                P::Find => self.on_find(now, result),
                P::Tx => match result {
                    Ok(Response::Data { data, stat }) => {
                        self.tx = Outcome::read(&data, stat.version)
                            .map_or(TxView::Undecided, TxView::Decided);
                    }
                    Ok(_) => self.fail(Error::UnexpectedReply),
                    // Not made (the setup's answer decides; read again once it is).
                    Err(_) if self.setup.step != Step::Done => self.tx = TxView::Unknown,
                    Err(e) if e.is_retryable() => self.role.again(now, Need::TX),
                    Err(e) => self.fail(e), // deleted under us, no permission
                },
                P::Vote(site) => self.on_vote(now, site, result),
                P::Alive => match result {
                    Ok(Response::Children(c)) | Ok(Response::Children2 { children: c, .. }) => {
                        let present = c
                            .into_iter()
                            .filter(|s| self.votes.contains_key(s))
                            .collect();
                        self.present = Some(present);
                    }
                    Err(e) if e.is_retryable() => self.role.again(now, Need::ALIVE),
                    _ => self.present = Some(BTreeSet::new()),
                },
                P::Decide(outcome) => self.on_decide(now, outcome, result),
                P::Leave => match result {
                    Err(e) if e.is_retryable() => self.role.again(now, Need::LEAVE),
                    _ => {
                        if self.presence == Presence::Ours {
                            self.presence = Presence::Absent;
                        }
                    }
                },
            }
        }
        self.settle(now);
    }

    /// A site's vote, read (and watched).
    fn on_vote(&mut self, now: Instant, site: String, result: Reply) {
        match result {
            Ok(Response::Data { data, stat }) => {
                let vote = Vote::read(&data, stat.version);
                if let (Some(slot), Some(v)) = (self.votes.get_mut(&site), vote) {
                    if slot.is_none() {
                        *slot = Some(v);
                        if !self.role.ended() {
                            self.role
                                .kit
                                .emit(CoordinatorEvent::Voted { site, vote: v });
                        }
                    }
                }
            }
            Err(e) if e.is_retryable() => {
                self.vote_reads.insert(site);
                self.role.again(now, Need::VOTES);
            }
            // Not made yet: read again once it is.
            Err(_) if self.setup.step != Step::Done => {
                self.vote_reads.insert(site);
            }
            _ => {} // gone: the transaction node tells
        }
    }

    fn on_decide(&mut self, now: Instant, outcome: Outcome, result: Reply) {
        match written(outcome, self.config.sites.len(), &result) {
            Written::Done => {
                self.role.kit.succeeded();
                self.tx = TxView::Decided(outcome);
            }
            Written::Retry => self.role.again(now, Need::default()),
            Written::Taken => {
                self.role.session.sync_next = true;
                self.tx = TxView::Unknown; // decided by someone else: read it
            }
            Written::VoteChanged => {
                // A vote is not what we read: read the votes again.
                for (s, v) in self.votes.iter_mut() {
                    *v = None;
                    self.vote_reads.insert(s.clone());
                }
                self.role.again(now, Need::VOTES);
            }
            Written::Failed(e) => self.fail(e),
        }
    }

    /// The session expired: our presence node and watches are gone with it.
    fn expired(&mut self) {
        self.role.drop_requests();
        self.tracking = false;
        self.vote_reads.clear();
        self.present = None;
        if !matches!(self.tx, TxView::Decided(_)) {
            self.tx = TxView::Unknown;
        }
        if self.setup.step == Step::Sending {
            self.setup.step = Step::InDoubt;
        }
        self.presence = match (self.setup.step, self.presence) {
            (Step::Idle, Presence::Lost) => Presence::Lost,
            (Step::Idle, _) => Presence::Absent,
            _ => Presence::Lost,
        };
        self.role.session.sync_next = false;
        self.role.session.between = self.role.life == Life::Running;
    }
}

impl Protocol for Coordinator {
    protocol_head!(CoordinatorEvent, answer, role.kit);

    fn on_watch(&mut self, now: Instant, _op: OpId, event: &WatchEvent) {
        let tx = &self.config.tx;
        let path = event.path.as_str();
        let t = event.event_type;
        if path == tx {
            if matches!(t, EventType::NodeDataChanged | EventType::NodeDeleted) {
                self.role.need.add(Need::TX);
            }
        } else if path == alive_dir(tx) {
            if t == EventType::NodeChildrenChanged {
                self.role.need.add(Need::ALIVE);
            }
        } else if let Some(site) = voter(tx, path) {
            if t == EventType::NodeDataChanged && self.votes.get(site) == Some(&None) {
                self.vote_reads.insert(site.into());
                self.role.need.add(Need::VOTES);
            }
        }
        self.settle(now);
    }

    fn on_session(&mut self, now: Instant, change: SessionChange) {
        match change {
            SessionChange::Expired => self.expired(),
            SessionChange::Closed => {
                if self.presence == Presence::Ours {
                    self.presence = Presence::Absent;
                }
                self.role.closed(CoordinatorEvent::Failed {
                    error: Error::Closed,
                });
            }
            _ => {
                self.role.session.follow(change);
            }
        }
        self.settle(now);
    }

    fn on_timeout(&mut self, now: Instant) {
        self.settle(now);
    }

    fn on_abandon(&mut self, now: Instant) {
        self.abandoned = true;
        if self.setup.step == Step::Idle {
            self.role.life = Life::Ended;
        }
        self.settle(now);
    }

    fn deadline(&self) -> Option<Instant> {
        let own = if self.role.life == Life::Running {
            match (self.deadline.pending(), self.hard.pending()) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            }
        } else {
            None
        };
        self.role.timeout(own)
    }

    fn finished(&self) -> bool {
        self.role.ended() && self.role.kit.is_idle() && self.presence != Presence::Ours
    }

    fn check(&self) {
        debug_assert!(
            self.presence != Presence::Ours || self.setup.step == Step::Done,
            "a presence node of ours before the setup is done"
        );
        debug_assert!(
            self.role.life != Life::Idle
                || (self.setup.step == Step::Idle && self.votes.is_empty()),
            "a coordinator not started has a setup or votes"
        );
        debug_assert!(
            self.role.life != Life::Running || self.votes.len() == self.config.sites.len(),
            "a running coordinator has a vote slot per site"
        );
        debug_assert!(
            self.vote_reads.iter().all(|s| self.votes.contains_key(s)),
            "a vote read of a site not in the transaction"
        );
        debug_assert!(
            self.present
                .iter()
                .flatten()
                .all(|s| self.votes.contains_key(s)),
            "a presence node of a site not in the transaction counted"
        );
    }
}
