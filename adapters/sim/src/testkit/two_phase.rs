//! A two-phase commit machine ([`Coordinator`] or [`Site`]) in the model world
//! ([`harness`]), driven by bytes (proptest and libFuzzer share it). The first byte
//! chooses the machine, the variant, whether the transaction exists at the start (site
//! runs) and a hard vote timeout (coordinator runs); then the common faults, and the
//! transaction's actors:
//!
//! * the other sites (one session, [`OTHERS`]) vote as the recipe does (`multi[check
//!   <tx> v0, setData <vote> v0]`), and their presence nodes come and go; in site runs
//!   a model coordinator (its own session) creates the transaction in one `multi` with
//!   its presence node; whoever may decide (the model coordinator, or a peer site in
//!   the peers variant) writes the outcome by the rule, a commit in a `multi` checking
//!   every vote at version 1;
//! * the model coordinator's process dies, or the other sites' session closes (their
//!   presence nodes go);
//! * an operator deletes presence nodes, or the transaction's subtree as `delete_all`
//!   does (children first), perhaps stopping part-way once the transaction is decided;
//! * the user votes (site), drops the machine, or closes the session.
//!
//! Safety, after every step: votes and outcomes are only ever written with version 0
//! (never changed), a commit only in a `multi` checking every vote at version 1; on the
//! server, an outcome once written never changes, and a commit lands only while every
//! vote is `commit`; at most one final event and nothing after it; `Decided` only with
//! the outcome the transaction node holds as the client last heard, `Voted` only with
//! the vote the vote node holds as last heard, `Started` only while the transaction's
//! votes directory holds our id as last heard, `Failed(NoNode)` only when a node the
//! machine relies on is gone as last heard; a handled deadline is never in the past.
//!
//! Liveness, at the end — nothing cancelled: faults stop, the connection comes back,
//! the transaction exists, every other site votes `commit` (a site under test that was
//! not told to vote votes `commit`) and whoever may decide does, time passes. Within a
//! bounded number of rounds the machine must have reported its final event (unless
//! dropped) and be done, it must know the outcome if the transaction was decided
//! (unless its session closed or a node it relied on was deleted), and no node of its
//! sessions may be left.

use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;
use bytes::Bytes;
use core::time::Duration;

use zk_recipes::error::Error;
use zk_recipes::proto::*;
use zk_recipes::recipe::two_phase::*;

use super::either::Either;
use super::harness::{self, FaultCounts, Harness, Script, ME};
use super::zk::Happened;

const TX: &str = "/t/x";
/// The site the machine under test is, in site runs.
const SITE: &str = "a";
/// The other sites, whose votes and presence the script writes (in coordinator runs
/// `SITE` is one of them too).
pub const OTHERS: [&str; 2] = ["b", "c"];
/// The client that writes as the other sites.
const OTHER: usize = 1;
/// The client that writes as the model coordinator (site runs).
const COORD: usize = 2;
/// The model coordinator's id in `<tx>/votes`.
const MODEL_ID: &[u8] = b"model-coordinator";

type M = Either<Coordinator, Site>;
type Event = Either<CoordinatorEvent, SiteEvent>;
type H = Harness<M>;

stats! {
    /// What a run saw, to show the harness is not vacuous.
    pub struct Stats {
        /// Coordinator `Started` events.
        pub started: u32,
        /// `Voted` events (a site's own, or one the coordinator saw).
        pub voted: u32,
        /// `Decided { Commit }` events.
        pub commits: u32,
        /// `Decided { Abort }` events.
        pub aborts: u32,
        /// `Failed` events.
        pub failed: u32,
        /// Nodes an operator deleted.
        pub operator_deletes: u32,
        /// The model coordinator's process died (its presence went), or the other sites'
        /// session closed.
        pub deaths: u32,
        /// The common faults.
        pub faults: FaultCounts,
    }
}

struct TwoPhaseScript {
    stats: Stats,
    coordinator: bool,
    variant: Variant,
    /// Our id in `<tx>/votes` (coordinator runs).
    id: Bytes,
    finals: u32,
    decided: Option<Outcome>,
    /// A `Failed` justified by a node it relies on gone (or a close).
    failed_justly: bool,
    /// An operator deleted a node the machine relies on (the transaction, its votes).
    relied_deleted: bool,
    voted: bool,
    abandoned: bool,
    closed: bool,
    /// The transaction node as the server last had it: (czxid, outcome).
    tx_seen: Option<(i64, Option<Outcome>)>,
    /// The model coordinator made the transaction (site runs).
    tx_made: bool,
}

fn ok(r: &Result<Response, Error>) -> bool {
    match r {
        Ok(Response::Multi(rs)) => !rs.iter().any(|r| matches!(r, MultiResult::Error(_))),
        Ok(_) => true,
        Err(_) => false,
    }
}

/// Votes and outcomes are written only with version 0, a commit only with every vote
/// checked at version 1.
fn check_request(r: &Request) -> Result<(), String> {
    let ops: Vec<MultiOp> = match r {
        Request::Multi(ops) => ops.clone(),
        Request::SetData(s) => alloc::vec![MultiOp::SetData(s.clone())],
        _ => return Ok(()),
    };
    for op in &ops {
        if let MultiOp::SetData(s) = op {
            if s.version != 0 {
                return Err(format!("an unversioned write of {}", s.path));
            }
            if s.path == TX && s.data.as_ref() == COMMIT {
                let checked = |site: &str| {
                    ops.iter().any(|o| {
                        matches!(o, MultiOp::Check(c) if c.path == vote_path(TX, site) && c.version == 1)
                    })
                };
                if !(checked(SITE) && OTHERS.iter().all(|s| checked(s))) {
                    return Err(format!("a commit without every vote checked: {ops:?}"));
                }
            }
        }
    }
    Ok(())
}

impl TwoPhaseScript {
    /// The sites the script votes for.
    fn actor_sites(&self) -> Vec<&'static str> {
        let mut v = Vec::new();
        if self.coordinator {
            v.push(SITE);
        }
        v.extend(OTHERS);
        v
    }

    fn all_sites() -> [&'static str; 3] {
        [SITE, OTHERS[0], OTHERS[1]]
    }

    /// Node `path` as the client last heard of it: (data, version).
    fn heard(h: &H, path: &str) -> Option<(Bytes, i32)> {
        h.world
            .zk
            .data_at_zxid(path, h.seen_zxid())
            .map(|(d, st)| (d, st.version))
    }

    /// Did node `path` hold what `held` accepts at some point the client has heard of?
    /// (A vote, an outcome or a transaction's id, once written, is a fact: an operator
    /// who deletes the node later does not make it untrue.)
    fn held_once(h: &H, path: &str, held: impl Fn(&Bytes, i32) -> bool) -> bool {
        (0..=h.seen_zxid()).rev().any(|z| {
            h.world
                .zk
                .data_at_zxid(path, z)
                .is_some_and(|(d, st)| held(&d, st.version))
        })
    }

    fn outcome_on_server(h: &H) -> Option<Outcome> {
        let n = h.world.zk.nodes.get(TX)?;
        Outcome::read(&n.data, n.version)
    }

    fn vote_on_server(h: &H, site: &str) -> Option<Vote> {
        let n = h.world.zk.nodes.get(&vote_path(TX, site))?;
        Vote::read(&n.data, n.version)
    }

    fn write(h: &mut H, who: Option<usize>, what: &str, req: Request) -> bool {
        let r = h.world.zk.write_as(who, &req);
        let done = ok(&r);
        h.note(format!("  {what}: {}", if done { "ok" } else { "refused" }));
        done
    }

    /// Another site votes, as the recipe does.
    fn vote_as(h: &mut H, site: &str, vote: Vote) {
        let req = Request::Multi(alloc::vec![
            MultiOp::Check(CheckVersionRequest {
                path: TX.into(),
                version: 0,
            }),
            MultiOp::SetData(SetDataRequest {
                path: vote_path(TX, site),
                data: vote.data(),
                version: 0,
            }),
        ]);
        Self::write(h, Some(OTHER), &format!("site {site} votes {vote:?}"), req);
    }

    /// Whoever may decide (the model coordinator, a peer site) writes the outcome by
    /// the rule.
    fn decide(&mut self, h: &mut H) {
        if self.coordinator && self.variant == Variant::Coordinator {
            return; // only the coordinator under test decides
        }
        if !h.world.zk.nodes.contains_key(TX) || Self::outcome_on_server(h).is_some() {
            return;
        }
        let votes: Vec<Option<Vote>> = Self::all_sites()
            .iter()
            .map(|s| Self::vote_on_server(h, s))
            .collect();
        let coordinator_gone =
            !self.coordinator && !h.world.zk.nodes.contains_key(&coordinator_path(TX));
        let outcome = if votes.contains(&Some(Vote::Abort)) || coordinator_gone {
            Outcome::Abort
        } else if votes.iter().all(|v| *v == Some(Vote::Commit)) {
            Outcome::Commit
        } else {
            return;
        };
        let set = MultiOp::SetData(SetDataRequest {
            path: TX.into(),
            data: outcome.data(),
            version: 0,
        });
        let mut ops: Vec<MultiOp> = Vec::new();
        if outcome == Outcome::Commit {
            ops.extend(Self::all_sites().iter().map(|s| {
                MultiOp::Check(CheckVersionRequest {
                    path: vote_path(TX, s),
                    version: 1,
                })
            }));
        }
        ops.push(set);
        let by = if self.coordinator { OTHER } else { COORD };
        Self::write(
            h,
            Some(by),
            &format!("decided {outcome:?}"),
            Request::Multi(ops),
        );
    }

    /// The model coordinator creates the transaction (site runs, once: a transaction's
    /// path is not used again), as the recipe does: its parent as a container, then one
    /// `multi`.
    fn create_tx(&mut self, h: &mut H) {
        if self.tx_made {
            return;
        }
        self.tx_made = true;
        let create = |path: String, data: &'static [u8], mode: CreateMode| {
            CreateRequest::new(path, Bytes::from_static(data), Acl::open_unsafe(), mode)
        };
        let _ = h.world.zk.write_as(
            Some(COORD),
            &Request::CreateContainer(create("/t".into(), b"", CreateMode::Container)),
        );
        let mut ops = alloc::vec![
            MultiOp::Create(create(TX.into(), b"", CreateMode::Persistent)),
            MultiOp::Create(create(payload_path(TX), b"P", CreateMode::Persistent)),
            MultiOp::Create(create(votes_dir(TX), MODEL_ID, CreateMode::Persistent)),
        ];
        for s in Self::all_sites() {
            ops.push(MultiOp::Create(create(
                vote_path(TX, s),
                b"",
                CreateMode::Persistent,
            )));
        }
        ops.push(MultiOp::Create(create(
            alive_dir(TX),
            b"",
            CreateMode::Persistent,
        )));
        ops.push(MultiOp::Create(create(
            coordinator_path(TX),
            b"",
            CreateMode::Ephemeral,
        )));
        Self::write(
            h,
            Some(COORD),
            "the model coordinator creates the transaction",
            Request::Multi(ops),
        );
    }

    /// The transaction's nodes, children before their parent (as `delete_all` deletes).
    fn subtree(h: &H) -> Vec<String> {
        let prefix = format!("{TX}/");
        let mut v: Vec<String> = h
            .world
            .zk
            .nodes
            .keys()
            .filter(|p| p.as_str() == TX || p.starts_with(&prefix))
            .cloned()
            .collect();
        v.sort_by_key(|p| core::cmp::Reverse(p.matches('/').count()));
        v
    }

    fn delete(&mut self, h: &mut H, path: &str) {
        let req = Request::Delete(DeleteRequest {
            path: path.into(),
            version: -1,
        });
        if Self::write(h, None, &format!("an operator deletes {path}"), req) {
            self.stats.operator_deletes += 1;
            if path == TX || path.starts_with(&votes_dir(TX)) {
                self.relied_deleted = true;
            }
        }
    }

    /// Was a node the machine relies on deleted, or does it miss as the client last
    /// heard?
    fn relied_on_gone(&self, h: &H) -> bool {
        if self.relied_deleted {
            return true;
        }
        let mut relied = alloc::vec![String::from(TX), votes_dir(TX)];
        if self.coordinator {
            relied.extend(Self::all_sites().iter().map(|s| vote_path(TX, s)));
        } else {
            relied.push(vote_path(TX, SITE));
        }
        relied.iter().any(|p| Self::heard(h, p).is_none())
    }

    fn judge(&mut self, h: &H, e: &Event) -> Result<(), String> {
        if self.finals > 0 {
            return Err(format!("{e:?} after the final event"));
        }
        let (final_, decided, failed) = match e {
            Either::A(c) => (
                c.is_final(),
                match c {
                    CoordinatorEvent::Decided { outcome } => Some(*outcome),
                    _ => None,
                },
                match c {
                    CoordinatorEvent::Failed { error } => Some(error),
                    _ => None,
                },
            ),
            Either::B(s) => (
                s.is_final(),
                match s {
                    SiteEvent::Decided { outcome } => Some(*outcome),
                    _ => None,
                },
                match s {
                    SiteEvent::Failed { error } => Some(error),
                    _ => None,
                },
            ),
        };
        if final_ {
            self.finals += 1;
        }
        if let Some(o) = decided {
            if !Self::held_once(h, TX, |d, v| Outcome::read(d, v) == Some(o)) {
                let heard = Self::heard(h, TX).and_then(|(d, v)| Outcome::read(&d, v));
                return Err(format!(
                    "Decided {o:?} but the transaction node never said so as far as the \
                     client heard (now {heard:?})"
                ));
            }
            self.decided = Some(o);
            match o {
                Outcome::Commit => self.stats.commits += 1,
                Outcome::Abort => self.stats.aborts += 1,
            }
        }
        if let Some(error) = failed {
            self.stats.failed += 1;
            match error {
                Error::Server(ErrorCode::NoNode) => {
                    if !self.relied_on_gone(h) {
                        return Err(String::from(
                            "Failed(NoNode) while every node it relies on exists as last heard \
                             and none was deleted",
                        ));
                    }
                    self.failed_justly = true;
                }
                // Another's transaction, or ours damaged beyond recognition.
                Error::Server(ErrorCode::NodeExists) if self.coordinator => {
                    let ours = Self::heard(h, &votes_dir(TX)).is_some_and(|(d, _)| d == self.id);
                    self.failed_justly = self.relied_deleted || !ours;
                }
                Error::Closed => self.failed_justly = self.closed,
                _ => {}
            }
        }
        match e {
            Either::A(CoordinatorEvent::Started) => {
                self.stats.started += 1;
                if !Self::held_once(h, &votes_dir(TX), |d, _| *d == self.id) {
                    let id = Self::heard(h, &votes_dir(TX)).map(|(d, _)| d);
                    return Err(format!(
                        "Started but the transaction never had our id as far as the client \
                         heard (now {id:?})"
                    ));
                }
            }
            Either::A(CoordinatorEvent::Voted { site, vote }) => {
                self.stats.voted += 1;
                if !Self::held_once(h, &vote_path(TX, site), |d, v| {
                    Vote::read(d, v) == Some(*vote)
                }) {
                    return Err(format!(
                        "Voted {site} {vote:?} but its node never said so as far as the \
                         client heard"
                    ));
                }
            }
            Either::B(SiteEvent::Voted { vote }) => {
                self.stats.voted += 1;
                if !Self::held_once(h, &vote_path(TX, SITE), |d, v| {
                    Vote::read(d, v) == Some(*vote)
                }) {
                    return Err(format!(
                        "Voted {vote:?} but our vote node never said so as far as the client \
                         heard"
                    ));
                }
            }
            _ => {}
        }
        Ok(())
    }

    /// A site still waiting for a transaction an operator deleted (decided) before it
    /// saw it: nothing will come.
    fn waits_for_deleted(&self, h: &H) -> bool {
        self.relied_deleted
            && self.finals == 0
            && !h.world.zk.nodes.contains_key(TX)
            && h.machine().is_some_and(|m| m.b().is_some())
    }

    /// The user closes the session: the server drops it (its ephemerals go), the
    /// machine hears `Closed`.
    fn close(&mut self, h: &mut H) -> Result<(), String> {
        self.closed = true;
        h.note("  the user closes the session".into());
        let happened = h.world.close(ME);
        h.record("", &happened);
        self.check(h, &happened)
    }
}

impl Script<M> for TwoPhaseScript {
    const ACTS: u8 = 8;

    fn act(&mut self, h: &mut H, which: u8, arg: u8) -> Result<(), String> {
        match which {
            0 => {
                let sites = self.actor_sites();
                let site = sites[usize::from(arg >> 2) % sites.len()];
                let vote = if arg & 3 == 0 {
                    Vote::Abort
                } else {
                    Vote::Commit
                };
                Self::vote_as(h, site, vote);
            }
            1 => self.decide(h),
            2 => {
                // The model coordinator's process dies (its presence goes), or the other
                // sites' session closes (theirs go).
                let who = if !self.coordinator && arg & 1 == 0 {
                    COORD
                } else {
                    OTHER
                };
                h.note(format!("  client {who}'s session closes"));
                h.world.zk.close_session(who);
                self.stats.deaths += 1;
            }
            3 => {
                let sites = self.actor_sites();
                let site = sites[usize::from(arg >> 1) % sites.len()];
                let path = alive_path(TX, site);
                if arg & 1 == 0 {
                    let req = Request::Create(CreateRequest::new(
                        path,
                        Bytes::new(),
                        Acl::open_unsafe(),
                        CreateMode::Ephemeral,
                    ));
                    Self::write(h, Some(OTHER), &format!("site {site} shows presence"), req);
                } else {
                    let req = Request::Delete(DeleteRequest { path, version: -1 });
                    Self::write(h, Some(OTHER), &format!("site {site} leaves"), req);
                }
            }
            4 => {
                // An operator deletes presence nodes: ours (a site's), the coordinator's,
                // or another site's.
                let path = match arg % 3 {
                    0 if !self.coordinator => alive_path(TX, SITE),
                    0 | 1 => coordinator_path(TX),
                    _ => alive_path(TX, OTHERS[usize::from(arg >> 2) % OTHERS.len()]),
                };
                self.delete(h, &path);
            }
            5 => {
                // An operator deletes a decided transaction's subtree (`delete_all`),
                // perhaps stopping part-way. (Deleting an undecided one is outside the
                // recipe's contract: part-way, votes gone and `<tx>` kept, a peers site
                // commits on the votes it can list; see docs/testing.md.)
                if Self::outcome_on_server(h).is_none() {
                    return Ok(());
                }
                let nodes = Self::subtree(h);
                let n = if arg & 1 == 0 {
                    nodes.len()
                } else {
                    usize::from(arg >> 1) % nodes.len().max(1)
                };
                for p in nodes.iter().take(n) {
                    self.delete(h, p);
                }
            }
            6 if self.coordinator => {}
            6 if arg & 1 == 0 => self.create_tx(h),
            6 => {
                if !self.voted {
                    self.voted = true;
                    let vote = if arg & 6 == 0 {
                        Vote::Abort
                    } else {
                        Vote::Commit
                    };
                    h.note(format!("  the user votes {vote:?}"));
                    h.user(self, |m, now| {
                        if let Either::B(s) = m {
                            s.vote(now, vote);
                        }
                    })?;
                }
            }
            _ => match arg % 16 {
                0 if !self.abandoned => {
                    self.abandoned = true;
                    h.note("  the user drops the machine".into());
                    h.user(self, |m, now| {
                        zk_recipes::recipe::Machine::handle_abandon(m, now)
                    })?;
                }
                1 if !self.closed && h.machine().is_some() => self.close(h)?,
                _ => {}
            },
        }
        Ok(())
    }

    fn check(&mut self, h: &H, happened: &[Happened<Event>]) -> Result<(), String> {
        for x in happened {
            match x {
                Happened::Sent(r) => check_request(r)?,
                Happened::Event(e) => self.judge(h, e)?,
            }
        }
        // On the server: an outcome once written never changes; a commit lands only
        // while every vote is `commit`.
        let now = h
            .world
            .zk
            .nodes
            .get(TX)
            .map(|n| (n.czxid, Outcome::read(&n.data, n.version)));
        if let (Some((c0, Some(o0))), Some((c1, o1))) = (self.tx_seen, now) {
            if c0 == c1 && o1 != Some(o0) {
                return Err(format!("the outcome {o0:?} changed to {o1:?}"));
            }
        }
        let was = self.tx_seen.and_then(|(c, o)| o.map(|o| (c, o)));
        if let Some((c1, Some(Outcome::Commit))) = now {
            if was != Some((c1, Outcome::Commit)) {
                let votes: Vec<Option<Vote>> = Self::all_sites()
                    .iter()
                    .map(|s| Self::vote_on_server(h, s))
                    .collect();
                if votes.iter().any(|v| *v != Some(Vote::Commit)) {
                    return Err(format!("a commit landed with the votes {votes:?}"));
                }
            }
        }
        self.tx_seen = now;
        Ok(())
    }

    fn settle(&mut self, h: &mut H, round: u32) -> Result<bool, String> {
        if h.machine().is_none() || (round > 10 && self.waits_for_deleted(h)) {
            return Ok(true);
        }
        if !self.coordinator && round == 0 {
            self.create_tx(h);
        }
        if !self.coordinator && !self.voted && round == 2 {
            self.voted = true;
            h.user(self, |m, now| {
                if let Either::B(s) = m {
                    s.vote(now, Vote::Commit);
                }
            })?;
        }
        if round >= 3 {
            for s in self.actor_sites() {
                if Self::vote_on_server(h, s).is_none() {
                    Self::vote_as(h, s, Vote::Commit);
                }
            }
            self.decide(h);
        }
        Ok(false)
    }

    fn end(&mut self, h: &H) -> Result<(), String> {
        if self.waits_for_deleted(h) {
            // A site still waiting for a transaction an operator deleted, decided, before
            // it saw it: nothing will come. It holds nothing.
            return match h.ours() {
                left if left.is_empty() => Ok(()),
                left => Err(format!("cleanliness: our nodes left: {left:?}")),
            };
        }
        if h.machine().is_some() {
            return Err(format!(
                "liveness: the machine never ended: {:?}",
                h.machine()
            ));
        }
        if self.finals != 1 && !self.abandoned {
            return Err(format!("liveness: {} final events", self.finals));
        }
        if self.decided.is_none()
            && !self.abandoned
            && !self.failed_justly
            && Self::outcome_on_server(h).is_some()
        {
            return Err(String::from("liveness: ended without learning the outcome"));
        }
        let left = h.ours();
        if !left.is_empty() {
            return Err(format!("cleanliness: our nodes left: {left:?}"));
        }
        Ok(())
    }
}

/// Runs one schedule; `Err` describes the broken invariant and the last steps taken.
pub fn run(schedule: &[u8]) -> Result<(), String> {
    run_stats(schedule).map(|_| ())
}

/// [`run`], and what the run saw.
pub fn run_stats(schedule: &[u8]) -> Result<Stats, String> {
    let mut input = schedule.iter().copied();
    let head = input.next().unwrap_or(0);
    let variant = if head & 1 == 0 {
        Variant::Coordinator
    } else {
        Variant::Peers
    };
    let coordinator = head & 2 == 0;
    let tx_first = head & 4 != 0;
    let mut h: H = Harness::new(3);
    let sites = TwoPhaseScript::all_sites();
    let (machine, id) = if coordinator {
        let mut config = CoordinatorConfig::new(TX, &sites, variant, (3, 4));
        config.deadline = Duration::from_millis(100);
        if head & 8 != 0 {
            config.vote_timeout = Some(Duration::from_millis(400));
        }
        let id = Bytes::from(config.id.clone());
        (Either::A(Coordinator::new(config)), id)
    } else {
        (
            Either::B(Site::new(SiteConfig::new(TX, SITE, variant))),
            Bytes::new(),
        )
    };
    let mut script = TwoPhaseScript {
        stats: Stats::default(),
        coordinator,
        variant,
        id,
        finals: 0,
        decided: None,
        failed_justly: false,
        relied_deleted: false,
        voted: false,
        abandoned: false,
        closed: false,
        tx_seen: None,
        tx_made: false,
    };
    if !coordinator && tx_first {
        script.create_tx(&mut h);
        let zxid = h.world.zk.zxid;
        h.world.zk.sessions[ME].seen_zxid = zxid;
    }
    h.note(format!(
        "{variant:?} {} run",
        if coordinator { "coordinator" } else { "site" }
    ));
    let started = h.host(&mut script, machine, |m, now| match m {
        Either::A(c) => c.start(now),
        Either::B(s) => s.start(now),
    });
    started.and_then(|()| harness::run(&mut h, &mut script, &mut input))?;
    script.stats.faults = h.faults;
    Ok(script.stats)
}
