//! The coordinator: creates the transaction, enforces its deadline, decides (in the
//! O(n) variant) or waits for the sites' decision (see the [module docs](super)).

use alloc::collections::{BTreeMap, BTreeSet};
use alloc::string::String;
use alloc::vec::Vec;
use bytes::Bytes;
use core::time::Duration;

use super::{
    alive_dir, check_names, coordinator_path, payload_path, vote_path, votes_dir, Outcome, Variant,
    Vote, MAX_SITES,
};
use crate::error::Error;
use crate::proto::*;
use crate::recipe::kit::{parent_of, Kit, ParentStep, Plumbing, Protocol};
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
enum Setup {
    Idle,
    Sending,
    /// Its reply was lost: look for our id.
    InDoubt,
    Done,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum TxView {
    Unknown,
    Undecided,
    Decided(Outcome),
}

const PARENTS: u32 = 1;
const SETUP: u32 = 2;
const FIND: u32 = 4;
const TX: u32 = 8;
const VOTES: u32 = 16;
const ALIVE: u32 = 32;
const DECIDE: u32 = 64;
const LEAVE: u32 = 128;
const READS: u32 = FIND | TX | VOTES | ALIVE;

/// The coordinator of a two-phase commit. See the [module docs](super).
///
/// Command: [`start`](Self::start). Dropping its owner before the outcome is known
/// writes `abort`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Coordinator {
    config: CoordinatorConfig,
    session_id: i64,
    started: bool,
    finished: bool,
    abandoned: bool,
    between_sessions: bool,
    setup: Setup,
    /// The last setup found `<tx>` made already (`NodeExists`).
    found_tx: bool,
    /// Setups in a row that found `<tx>` but no `<tx>/votes` (not a transaction: an
    /// operator's `delete_all` stopped part-way, or someone's node): the second ends it.
    found_without_votes: u8,
    /// Our presence node went with an expired session: the sites abort; so do we.
    lost_presence: bool,
    /// `<tx>/coordinator` exists and is ours.
    ours: bool,
    /// A setup of this session may have been applied without our hearing of it (so a
    /// transaction found with our id has our presence node too).
    applied_here: bool,
    tx: TxView,
    votes: BTreeMap<String, Option<Vote>>,
    /// Vote watches are (being) armed.
    tracking: bool,
    vote_reads: BTreeSet<String>,
    present: Option<BTreeSet<String>>,
    deadline_at: Option<Instant>,
    hard_at: Option<Instant>,
    deadline_passed: bool,
    hard_passed: bool,
    need: u32,
    sync_next: bool,
    kit: Kit<P, CoordinatorEvent>,
}

impl Coordinator {
    /// A coordinator that does nothing until [`start`](Self::start).
    pub fn new(config: CoordinatorConfig) -> Coordinator {
        Coordinator {
            config,
            session_id: 0,
            started: false,
            finished: false,
            abandoned: false,
            between_sessions: false,
            setup: Setup::Idle,
            found_tx: false,
            found_without_votes: 0,
            lost_presence: false,
            ours: false,
            applied_here: false,
            tx: TxView::Unknown,
            votes: BTreeMap::new(),
            tracking: false,
            vote_reads: BTreeSet::new(),
            present: None,
            deadline_at: None,
            hard_at: None,
            deadline_passed: false,
            hard_passed: false,
            need: 0,
            sync_next: false,
            kit: Kit::default(),
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
        self.finished
    }

    /// Creates the transaction (once) and runs it to its outcome: `Started`, then
    /// `Decided` (or `Failed`).
    pub fn start(&mut self, now: Instant) {
        if self.started {
            return;
        }
        self.started = true;
        if let Err(error) = self.validate() {
            return self.fail(error);
        }
        self.votes = self
            .config
            .sites
            .iter()
            .map(|s| (s.clone(), None))
            .collect();
        self.deadline_at = Some(now + self.config.deadline);
        self.hard_at = self.config.vote_timeout.map(|d| now + d);
        self.setup = Setup::Sending;
        self.need |= SETUP;
        self.evaluate(now);
        self.drive(now);
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

    fn emit(&mut self, e: CoordinatorEvent) {
        self.kit.emit(e);
    }

    fn fail(&mut self, error: Error) {
        if !self.finished {
            self.finished = true;
            self.emit(CoordinatorEvent::Failed { error });
        }
    }

    fn in_flight(&self, p: &P) -> bool {
        self.kit.any(|q| q == p)
    }

    fn again(&mut self, now: Instant, need: u32) {
        self.need |= need;
        self.sync_next = true;
        self.kit.failed(now);
    }

    fn decision(&self) -> Option<Outcome> {
        if self.lost_presence || self.abandoned || self.hard_passed {
            return Some(Outcome::Abort);
        }
        if self.votes.values().any(|v| *v == Some(Vote::Abort)) {
            return Some(Outcome::Abort);
        }
        if self.votes.values().all(|v| *v == Some(Vote::Commit)) {
            return Some(Outcome::Commit);
        }
        if let (true, Some(present)) = (self.deadline_passed, &self.present) {
            // A site whose vote is being read (its notification said it changed) has
            // not been shown to have no vote: its read decides.
            let reading = |s: &String| {
                self.vote_reads.contains(s) || self.kit.any(|p| matches!(p, P::Vote(x) if x == s))
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
        if !self.started || self.between_sessions {
            return;
        }
        if self.deadline_at.is_some_and(|t| now >= t) {
            self.deadline_passed = true;
        }
        if self.hard_at.is_some_and(|t| now >= t) {
            self.hard_passed = true;
        }
        if !self.finished {
            self.progress();
        }
        if self.finished {
            self.need &= LEAVE;
            if self.ours && !self.in_flight(&P::Leave) {
                self.need |= LEAVE;
            }
        }
    }

    fn progress(&mut self) {
        if self.setup == Setup::InDoubt && !self.in_flight(&P::Find) {
            self.need |= FIND;
        }
        if self.setup != Setup::Done {
            return;
        }
        if let TxView::Decided(outcome) = self.tx {
            self.finished = true;
            self.emit(CoordinatorEvent::Decided { outcome });
            return;
        }
        if self.tx == TxView::Unknown && !self.in_flight(&P::Tx) {
            self.need |= TX;
        }
        // Votes matter while we may still decide on them (not once we must abort).
        let track = (self.config.variant == Variant::Coordinator || self.deadline_passed)
            && !self.lost_presence;
        if track && !self.tracking {
            self.tracking = true;
            for (s, v) in &self.votes {
                if v.is_none() {
                    self.vote_reads.insert(s.clone());
                }
            }
        }
        if self.tracking && !self.vote_reads.is_empty() {
            self.need |= VOTES;
        }
        if self.deadline_passed && self.present.is_none() && !self.in_flight(&P::Alive) {
            self.need |= ALIVE;
        }
        if self.tx == TxView::Undecided
            && self.decision().is_some()
            && !self.kit.any(|p| matches!(p, P::Decide(_)))
        {
            self.need |= DECIDE;
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

    fn drive(&mut self, now: Instant) {
        if self.need == 0 || self.between_sessions || !self.kit.allows(now) {
            return;
        }
        let need = core::mem::take(&mut self.need);
        let tx = self.config.tx.clone();
        if need & PARENTS != 0 && self.setup == Setup::Sending {
            let acl = &self.config.acl;
            self.kit
                .send_parents(&tx, acl, CreateMode::Container, P::Parent);
        }
        if need & SETUP != 0 && self.setup == Setup::Sending {
            let request = self.setup_request();
            self.kit.send(P::Setup, request);
            // Executed after the setup: read (and watch) what it made, same round trip.
            self.tx = TxView::Unknown;
            self.kit.send(
                P::Tx,
                Request::GetData(PathWatch {
                    path: tx.clone(),
                    watch: true,
                }),
            );
            if self.config.variant == Variant::Coordinator {
                self.tracking = true;
                self.vote_reads.clear(); // all read here
                for s in self.config.sites.clone() {
                    let path = vote_path(&tx, &s);
                    self.kit.send(
                        P::Vote(s),
                        Request::GetData(PathWatch { path, watch: true }),
                    );
                }
            }
        }
        if need & READS != 0 && self.sync_next {
            self.sync_next = false;
            self.kit
                .send(P::Sync, Request::Sync(PathRequest { path: tx.clone() }));
        }
        if need & FIND != 0 && self.setup == Setup::InDoubt {
            let path = votes_dir(&tx);
            self.kit
                .send(P::Find, Request::GetData(PathWatch { path, watch: false }));
        }
        if need & TX != 0 && !self.finished {
            let path = tx.clone();
            self.kit
                .send(P::Tx, Request::GetData(PathWatch { path, watch: true }));
        }
        if need & VOTES != 0 && !self.finished {
            for s in core::mem::take(&mut self.vote_reads) {
                let path = vote_path(&tx, &s);
                self.kit.send(
                    P::Vote(s),
                    Request::GetData(PathWatch { path, watch: true }),
                );
            }
        }
        if need & ALIVE != 0 && !self.finished {
            let path = alive_dir(&tx);
            self.kit.send(
                P::Alive,
                Request::GetChildren(PathWatch { path, watch: true }),
            );
        }
        if need & DECIDE != 0 && !self.finished && self.tx == TxView::Undecided {
            if let Some(outcome) = self.decision() {
                let request = match outcome {
                    Outcome::Commit => {
                        let mut ops: Vec<MultiOp> = self
                            .config
                            .sites
                            .iter()
                            .map(|s| {
                                MultiOp::Check(CheckVersionRequest {
                                    path: vote_path(&tx, s),
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
                    Outcome::Abort => Request::SetData(SetDataRequest {
                        path: tx.clone(),
                        data: outcome.data(),
                        version: 0,
                    }),
                };
                self.kit.send(P::Decide(outcome), request);
            }
        }
        if need & LEAVE != 0 && self.ours {
            let path = coordinator_path(&tx);
            self.kit.send(
                P::Leave,
                Request::Delete(DeleteRequest { path, version: -1 }),
            );
        }
    }

    fn setup_done(&mut self) {
        self.kit.succeeded();
        if self.setup != Setup::Done {
            // Made by our own multi in this session; else (a restarted process found
            // its transaction) the presence node is an earlier session's: not touched.
            let made_here = self.setup == Setup::Sending || self.applied_here;
            self.ours = !self.lost_presence && made_here;
            self.setup = Setup::Done;
            self.emit(CoordinatorEvent::Started);
        }
    }

    /// The setup was not applied: send it again, unless our owner left.
    fn setup_again(&mut self, now: Instant, need: u32) {
        if self.abandoned {
            self.setup = Setup::Idle;
            self.finished = true; // nothing was made, nobody waits
            return;
        }
        // Never made, so no presence of ours was lost either: make it in this session.
        self.setup = Setup::Sending;
        self.lost_presence = false;
        if need != 0 {
            self.again(now, need);
        } else {
            self.need |= SETUP;
        }
    }

    fn on_setup(&mut self, now: Instant, result: Result<Response, Error>) {
        if self.setup != Setup::Sending {
            return;
        }
        self.found_tx = false;
        match (multi_failure(&result), result) {
            (None, Ok(Response::Multi(_))) => self.setup_done(),
            (Some((0, ErrorCode::NodeExists)), _) => {
                self.found_tx = true;
                // Ours, made by a request whose reply was lost? Look for our id.
                self.setup = Setup::InDoubt;
                self.sync_next = true;
            }
            (Some((0, ErrorCode::NoNode)), _) => {
                match self.kit.parents_missing(parent_of(&self.config.tx)) {
                    ParentStep::Again => self.again(now, PARENTS | SETUP),
                    ParentStep::Create => self.need |= PARENTS | SETUP,
                    ParentStep::Fail(e) => self.fail(e),
                }
            }
            (Some((_, code)), _) => self.fail(Error::Server(code)),
            (None, Err(e)) if e.may_have_applied() => {
                self.applied_here = true;
                self.setup = Setup::InDoubt;
                self.again(now, 0);
            }
            (None, Err(e)) if e.is_retryable() => self.setup_again(now, SETUP),
            (None, Err(e)) if e.ends_session() => {}
            (None, Err(e)) => self.fail(e),
            (None, Ok(_)) => self.fail(Error::UnexpectedReply),
        }
    }

    fn on_answer(&mut self, now: Instant, p: P, result: Result<Response, Error>) {
        if let Err(e) = &result {
            if e.ends_session() {
                // Refused because the session is ending: send nothing more until the
                // session change says what comes next (a new session, or the end).
                self.between_sessions = true;
                return;
            }
        }
        match p {
            P::Parent(path) => self.kit.parent_answered(&path, &result),
            P::Setup => self.on_setup(now, result),
            P::Sync => {
                // The reads behind it read as lost (`Outbox::answer`): sync again.
                if result.is_err() {
                    self.sync_next = true;
                }
            }
            P::Find => match result {
                Ok(Response::Data { data, .. }) if data == self.config.id.as_bytes() => {
                    self.setup_done()
                }
                Ok(_) => {
                    self.setup = Setup::Idle;
                    self.fail(Error::Server(ErrorCode::NodeExists)); // another's
                }
                Err(Error::Server(ErrorCode::NoNode)) => {
                    if self.found_tx {
                        // `<tx>` without `<tx>/votes`: gone since the setup read it (set
                        // up again), or not a transaction at all (the second time: fail
                        // as for another's, instead of setting up for ever).
                        self.found_without_votes += 1;
                        if self.found_without_votes >= 2 {
                            self.setup = Setup::Idle;
                            return self.fail(Error::Server(ErrorCode::NodeExists));
                        }
                    } else {
                        self.found_without_votes = 0;
                    }
                    self.setup_again(now, 0)
                }
                Err(e) if e.is_retryable() => self.again(now, 0),
                Err(e) => self.fail(e),
            },
            P::Tx => match result {
                Ok(Response::Data { data, stat }) => {
                    self.tx = match Outcome::read(&data, stat.version) {
                        Some(o) => TxView::Decided(o),
                        None => TxView::Undecided,
                    };
                }
                Ok(_) => self.fail(Error::UnexpectedReply),
                // Not made (the setup's answer decides; read again once it is).
                Err(_) if self.setup != Setup::Done => self.tx = TxView::Unknown,
                Err(e) if e.is_retryable() => self.again(now, TX),
                Err(e) => self.fail(e), // deleted under us, no permission
            },
            P::Vote(site) => match result {
                Ok(Response::Data { data, stat }) => {
                    let vote = Vote::read(&data, stat.version);
                    if let (Some(slot), Some(v)) = (self.votes.get_mut(&site), vote) {
                        if slot.is_none() {
                            *slot = Some(v);
                            if !self.finished {
                                self.emit(CoordinatorEvent::Voted { site, vote: v });
                            }
                        }
                    }
                }
                Err(e) if e.is_retryable() => {
                    self.vote_reads.insert(site);
                    self.again(now, VOTES);
                }
                // Not made yet: read again once it is.
                Err(_) if self.setup != Setup::Done => {
                    self.vote_reads.insert(site);
                }
                _ => {} // gone: the transaction node tells
            },
            P::Alive => match result {
                Ok(Response::Children(c)) | Ok(Response::Children2 { children: c, .. }) => {
                    let present = c
                        .into_iter()
                        .filter(|s| self.votes.contains_key(s))
                        .collect();
                    self.present = Some(present);
                }
                Err(e) if e.is_retryable() => self.again(now, ALIVE),
                _ => self.present = Some(BTreeSet::new()),
            },
            P::Decide(outcome) => self.on_decide(now, outcome, result),
            P::Leave => match result {
                Err(e) if e.is_retryable() => self.again(now, LEAVE),
                _ => self.ours = false,
            },
        }
    }

    fn on_decide(&mut self, now: Instant, outcome: Outcome, result: Result<Response, Error>) {
        let tx_index = match outcome {
            Outcome::Commit => self.config.sites.len(),
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
                self.sync_next = true;
                self.kit.failed(now);
            }
            Some((i, Error::Server(ErrorCode::BadVersion | ErrorCode::NoNode)))
                if i == tx_index =>
            {
                self.sync_next = true;
                self.tx = TxView::Unknown; // decided by someone else: read it
            }
            Some((i, Error::Server(ErrorCode::BadVersion | ErrorCode::NoNode))) if i < tx_index => {
                // A vote is not what we read: read the votes again.
                for (s, v) in self.votes.iter_mut() {
                    *v = None;
                    self.vote_reads.insert(s.clone());
                }
                self.again(now, VOTES);
            }
            Some((_, e)) => self.fail(e),
        }
    }
}

impl Protocol for Coordinator {
    type Event = CoordinatorEvent;

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
            if matches!(t, EventType::NodeDataChanged | EventType::NodeDeleted) {
                self.need |= TX;
            }
        } else if path == alive_dir(tx) {
            if t == EventType::NodeChildrenChanged {
                self.need |= ALIVE;
            }
        } else if let Some(site) = path
            .strip_prefix(votes_dir(tx).as_str())
            .and_then(|p| p.strip_prefix('/'))
        {
            if t == EventType::NodeDataChanged && self.votes.get(site) == Some(&None) {
                self.vote_reads.insert(site.into());
                self.need |= VOTES;
            }
        }
        self.evaluate(now);
        self.drive(now);
    }

    fn on_session(&mut self, now: Instant, change: SessionChange) {
        match change {
            SessionChange::Connected { session_id } => {
                self.session_id = session_id;
                self.between_sessions = false;
            }
            SessionChange::Suspended => {}
            SessionChange::Reconnected { session_id } => {
                self.session_id = session_id;
                self.sync_next = true;
            }
            SessionChange::Expired => {
                self.kit.clear_requests();
                self.need = 0;
                self.ours = false;
                self.tracking = false;
                self.vote_reads.clear();
                self.present = None;
                if !matches!(self.tx, TxView::Decided(_)) {
                    self.tx = TxView::Unknown;
                }
                if self.setup == Setup::Sending {
                    self.setup = Setup::InDoubt;
                }
                if self.setup != Setup::Idle {
                    self.lost_presence = true;
                }
                self.applied_here = false;
                self.sync_next = false;
                self.between_sessions = self.started && !self.finished;
            }
            SessionChange::Closed => {
                self.kit.clear_requests();
                self.need = 0;
                self.ours = false;
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
        self.abandoned = true;
        if matches!(self.setup, Setup::Idle) {
            self.started = true;
            self.finished = true;
        }
        self.evaluate(now);
        self.drive(now);
    }

    fn deadline(&self) -> Option<Instant> {
        let retry = if self.need != 0 && !self.between_sessions {
            self.kit.retry_at()
        } else {
            None
        };
        let mut t = retry;
        if self.started && !self.finished {
            for d in [
                self.deadline_at.filter(|_| !self.deadline_passed),
                self.hard_at.filter(|_| !self.hard_passed),
            ]
            .into_iter()
            .flatten()
            {
                t = Some(t.map_or(d, |t| t.min(d)));
            }
        }
        t
    }

    fn finished(&self) -> bool {
        self.finished && self.kit.is_idle() && !self.ours
    }
}
