//! A two-phase commit machine ([`Coordinator`] or [`Site`]) against a small model of
//! the transaction's nodes, driven by bytes (proptest and libFuzzer share it). The
//! bytes choose the machine, the variant, whether the transaction exists at the start,
//! and a schedule of steps:
//!
//! * the server answers the oldest request on the wire, or applies it and the
//!   connection breaks before the reply arrives, or the connection breaks before it is
//!   read; the session refuses a request (`Overloaded`); a reconnect; the session
//!   expires (a new session follows, or the client closes);
//! * the other participants act: another site votes (a versioned write), another site
//!   decides by the rule, the coordinator's process dies (its presence node goes), a
//!   site's presence comes and goes; the user votes or drops the machine; time passes.
//!
//! Safety, after every step: votes and outcomes are only ever written with version 0
//! (never changed), a commit only in a `multi` checking every vote at version 1; at most
//! one final event and nothing after it; `Decided` only with the outcome the model's
//! transaction node holds; `Started` only when the transaction exists with our id;
//! `poll_timeout` never in the past after `handle_timeout`.
//!
//! Liveness, at the end — nothing cancelled: faults stop, the connection comes back,
//! every other site votes and the (model) coordinator decides by the rule, time passes.
//! Within a bounded number of rounds the machine must have reported its final event
//! and be done, with no presence node of ours left.

use alloc::collections::{BTreeMap, VecDeque};
use alloc::format;
use alloc::string::{String, ToString};
use alloc::vec::Vec;
use bytes::Bytes;
use core::time::Duration;

use zk_recipes::error::Error;
use zk_recipes::proto::*;
use zk_recipes::recipe::two_phase::*;
use zk_recipes::recipe::{OpId, Recipe, SessionChange};
use zk_recipes::session::WatchEvent;
use zk_recipes::time::Instant;

const TX: &str = "/t/x";
const ME: &str = "a";
const OTHERS: [&str; 2] = ["b", "c"];

#[derive(Clone, Debug, PartialEq)]
struct Node {
    data: Bytes,
    version: i32,
    owner: i64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Data,
    Exists,
    Child,
}

#[derive(Clone, Default)]
struct Model {
    nodes: BTreeMap<String, Node>,
    zxid: i64,
}

fn parent(path: &str) -> &str {
    match path.rfind('/') {
        Some(0) | None => "/",
        Some(i) => &path[..i],
    }
}

impl Model {
    fn stat(&self, n: &Node) -> Stat {
        Stat {
            version: n.version,
            ephemeral_owner: n.owner,
            czxid: self.zxid,
            ..Stat::default()
        }
    }

    /// Applies one write; the changes it makes (path, event) for watches.
    fn write(
        &mut self,
        sid: i64,
        op: &MultiOp,
        fired: &mut Vec<(String, EventType)>,
    ) -> Result<MultiResult, ErrorCode> {
        self.zxid += 1;
        match op {
            MultiOp::Create(c) | MultiOp::Create2(c) | MultiOp::CreateContainer(c) => {
                if self.nodes.contains_key(&c.path) {
                    return Err(ErrorCode::NodeExists);
                }
                let p = parent(&c.path);
                if p != "/" && !self.nodes.contains_key(p) {
                    return Err(ErrorCode::NoNode);
                }
                let ephemeral = matches!(
                    CreateMode::from_i32(c.flags),
                    Some(CreateMode::Ephemeral | CreateMode::EphemeralSequential)
                );
                let owner = if ephemeral { sid } else { 0 };
                self.nodes.insert(
                    c.path.clone(),
                    Node {
                        data: c.data.clone(),
                        version: 0,
                        owner,
                    },
                );
                fired.push((c.path.clone(), EventType::NodeCreated));
                fired.push((p.to_string(), EventType::NodeChildrenChanged));
                Ok(MultiResult::Create(c.path.clone()))
            }
            MultiOp::Delete(d) => {
                let n = self.nodes.get(&d.path).ok_or(ErrorCode::NoNode)?;
                if d.version >= 0 && d.version != n.version {
                    return Err(ErrorCode::BadVersion);
                }
                let prefix = format!("{}/", d.path);
                if self.nodes.keys().any(|k| k.starts_with(&prefix)) {
                    return Err(ErrorCode::NotEmpty);
                }
                self.nodes.remove(&d.path);
                fired.push((d.path.clone(), EventType::NodeDeleted));
                fired.push((parent(&d.path).to_string(), EventType::NodeChildrenChanged));
                Ok(MultiResult::Delete)
            }
            MultiOp::SetData(s) => {
                let n = self.nodes.get_mut(&s.path).ok_or(ErrorCode::NoNode)?;
                if s.version >= 0 && s.version != n.version {
                    return Err(ErrorCode::BadVersion);
                }
                n.data = s.data.clone();
                n.version += 1;
                let n = n.clone();
                fired.push((s.path.clone(), EventType::NodeDataChanged));
                Ok(MultiResult::SetData(self.stat(&n)))
            }
            MultiOp::Check(c) => {
                let n = self.nodes.get(&c.path).ok_or(ErrorCode::NoNode)?;
                if c.version >= 0 && c.version != n.version {
                    return Err(ErrorCode::BadVersion);
                }
                Ok(MultiResult::Check)
            }
            MultiOp::CreateTtl(_) => Err(ErrorCode::Unimplemented),
        }
    }

    fn children(&self, path: &str) -> Vec<String> {
        let prefix = format!("{path}/");
        self.nodes
            .keys()
            .filter_map(|k| k.strip_prefix(&prefix))
            .filter(|rest| !rest.contains('/'))
            .map(str::to_string)
            .collect()
    }

    fn outcome(&self) -> Option<Outcome> {
        let n = self.nodes.get(TX)?;
        Outcome::read(&n.data, n.version)
    }

    fn vote(&self, site: &str) -> Option<Vote> {
        let n = self.nodes.get(&vote_path(TX, site))?;
        Vote::read(&n.data, n.version)
    }
}

/// The machine under test.
enum Machine {
    Coordinator(Coordinator),
    Site(Site),
}

/// One final event or none, and what it said.
#[derive(Clone, Debug, Default, PartialEq)]
struct Seen {
    finals: u32,
    decided: Option<Outcome>,
}

struct World {
    model: Model,
    m: Machine,
    variant: Variant,
    sid: i64,
    next_sid: i64,
    now: Instant,
    wire: VecDeque<(OpId, Request)>,
    watches: Vec<(String, Kind, OpId)>,
    missed: Vec<(OpId, String, EventType)>,
    connected: bool,
    ended: bool,
    abandoned: bool,
    seen: Seen,
    log: Vec<String>,
}

impl World {
    fn recipe(&mut self) -> &mut dyn RecipeDyn {
        match &mut self.m {
            Machine::Coordinator(c) => c,
            Machine::Site(s) => s,
        }
    }

    fn pull(&mut self) -> Result<(), String> {
        while let Some((op, r)) = self.recipe().poll_request_dyn() {
            check_request(&r)?;
            self.log.push(format!("-> {op} {}", brief(&r)));
            self.wire.push_back((op, r));
        }
        loop {
            let e = match &mut self.m {
                Machine::Coordinator(c) => c.poll_event().map(|e| {
                    let fin = e.is_final();
                    let started = e == CoordinatorEvent::Started;
                    let o = match e {
                        CoordinatorEvent::Decided { outcome } => Some(outcome),
                        _ => None,
                    };
                    (format!("{e:?}"), fin, o, started)
                }),
                Machine::Site(s) => s.poll_event().map(|e| {
                    let fin = e.is_final();
                    let o = match e {
                        SiteEvent::Decided { outcome } => Some(outcome),
                        _ => None,
                    };
                    (format!("{e:?}"), fin, o, false)
                }),
            };
            let Some((text, fin, outcome, started)) = e else {
                break;
            };
            self.log.push(format!("event {text}"));
            if self.seen.finals > 0 {
                return Err(format!("an event after the final one: {text}"));
            }
            if fin {
                self.seen.finals += 1;
            }
            if let Some(o) = outcome {
                if self.model.outcome() != Some(o) {
                    return Err(format!(
                        "Decided {o:?} but the node says {:?}",
                        self.model.outcome()
                    ));
                }
                self.seen.decided = Some(o);
            }
            if started {
                let id = self.model.nodes.get(&votes_dir(TX)).map(|n| n.data.clone());
                let ours = match &self.m {
                    Machine::Coordinator(c) => Some(Bytes::from(c.config().id.clone())),
                    Machine::Site(_) => None,
                };
                if id != ours {
                    return Err(String::from("Started without our transaction"));
                }
            }
        }
        Ok(())
    }

    /// Applies `r` to the model; the reply, and fires watches.
    fn apply(&mut self, r: &Request) -> Result<Response, Error> {
        let mut fired = Vec::new();
        let sid = self.sid;
        let result = match r {
            Request::Create(c) | Request::CreateContainer(c) | Request::Create2(c) => self
                .model
                .write(sid, &MultiOp::Create(c.clone()), &mut fired)
                .map(|_| Response::Path(c.path.clone())),
            Request::Delete(d) => self
                .model
                .write(sid, &MultiOp::Delete(d.clone()), &mut fired)
                .map(|_| Response::Empty),
            Request::SetData(s) => {
                match self
                    .model
                    .write(sid, &MultiOp::SetData(s.clone()), &mut fired)
                {
                    Ok(MultiResult::SetData(st)) => Ok(Response::Stat(st)),
                    Ok(_) => Err(ErrorCode::SystemError),
                    Err(e) => Err(e),
                }
            }
            Request::Multi(ops) => {
                let mut trial = self.model.clone();
                let mut trial_fired = Vec::new();
                let mut results = Vec::new();
                let mut failed = None;
                for (i, op) in ops.iter().enumerate() {
                    match trial.write(sid, op, &mut trial_fired) {
                        Ok(r) => results.push(r),
                        Err(e) => {
                            failed = Some((i, e));
                            break;
                        }
                    }
                }
                match failed {
                    None => {
                        self.model = trial;
                        fired = trial_fired;
                        Ok(Response::Multi(results))
                    }
                    Some((at, code)) => Ok(Response::Multi(
                        (0..ops.len())
                            .map(|i| {
                                MultiResult::Error(match i.cmp(&at) {
                                    core::cmp::Ordering::Less => ErrorCode::Ok,
                                    core::cmp::Ordering::Equal => code,
                                    core::cmp::Ordering::Greater => ErrorCode::RuntimeInconsistency,
                                })
                            })
                            .collect(),
                    )),
                }
            }
            Request::Sync(p) => Ok(Response::Path(p.path.clone())),
            Request::Exists(g) => match self.model.nodes.get(&g.path) {
                Some(n) => {
                    let st = self.model.stat(n);
                    self.watch(g, Kind::Exists, r);
                    Ok(Response::Stat(st))
                }
                None => {
                    self.watch(g, Kind::Exists, r);
                    Err(ErrorCode::NoNode)
                }
            },
            Request::GetData(g) => match self.model.nodes.get(&g.path) {
                Some(n) => {
                    let (data, stat) = (n.data.clone(), self.model.stat(n));
                    self.watch(g, Kind::Data, r);
                    Ok(Response::Data { data, stat })
                }
                None => Err(ErrorCode::NoNode),
            },
            Request::GetChildren(g) => {
                if self.model.nodes.contains_key(&g.path) {
                    self.watch(g, Kind::Child, r);
                    Ok(Response::Children(self.model.children(&g.path)))
                } else {
                    Err(ErrorCode::NoNode)
                }
            }
            _ => Err(ErrorCode::Unimplemented),
        };
        self.fire(fired);
        result.map_err(Error::from)
    }

    fn watch(&mut self, g: &PathWatch, kind: Kind, _r: &Request) {
        if g.watch {
            // The op is filled in by `answer` (the request being answered).
            self.watches.push((g.path.clone(), kind, OpId::MAX));
        }
    }

    fn fire(&mut self, fired: Vec<(String, EventType)>) {
        let mut due = Vec::new();
        self.watches.retain(|(p, k, op)| {
            let hit = fired.iter().find(|(fp, t)| {
                fp == p
                    && match k {
                        Kind::Data => {
                            matches!(t, EventType::NodeDataChanged | EventType::NodeDeleted)
                        }
                        Kind::Exists => matches!(
                            t,
                            EventType::NodeCreated
                                | EventType::NodeDataChanged
                                | EventType::NodeDeleted
                        ),
                        Kind::Child => {
                            matches!(t, EventType::NodeChildrenChanged | EventType::NodeDeleted)
                        }
                    }
            });
            match hit {
                Some((fp, t)) => {
                    due.push((*op, fp.clone(), *t));
                    false
                }
                None => true,
            }
        });
        if !self.connected {
            // Re-armed at the reconnect, which reports what was missed (SetWatches).
            self.missed.extend(due);
            return;
        }
        if !self.ended {
            for (op, path, t) in due {
                self.log.push(format!("watch {t:?} {path}"));
                let ev = WatchEvent {
                    event_type: t,
                    path,
                };
                let now = self.now;
                self.recipe().handle_watch_dyn(now, op, &ev);
            }
        }
    }

    /// Answers (or loses) the oldest request.
    fn answer(&mut self, how: u8) -> Result<(), String> {
        let Some((op, r)) = self.wire.pop_front() else {
            return Ok(());
        };
        let now = self.now;
        match how {
            // Applied, reply delivered.
            0 => {
                let before = self.watches.len();
                let result = self.apply(&r);
                for w in self.watches.iter_mut().skip(before) {
                    w.2 = op;
                }
                self.log.push(format!("<- {op} {result:?}"));
                self.recipe().handle_reply_dyn(now, op, result);
            }
            // Applied, then the connection broke: everything else is lost unread.
            1 => {
                let _ = self.apply(&r);
                self.watches.retain(|w| w.2 != OpId::MAX);
                self.disconnect(op);
            }
            // The connection broke before it was read.
            2 => self.disconnect(op),
            // Refused by the session.
            _ => {
                self.log.push(format!("<- {op} refused"));
                self.recipe()
                    .handle_reply_dyn(now, op, Err(Error::Overloaded));
            }
        }
        Ok(())
    }

    fn disconnect(&mut self, first: OpId) {
        let now = self.now;
        self.log.push(String::from("connection lost"));
        self.connected = false;
        self.recipe()
            .handle_session_dyn(now, SessionChange::Suspended);
        self.recipe()
            .handle_reply_dyn(now, first, Err(Error::ConnectionLoss));
        for (op, _) in core::mem::take(&mut self.wire) {
            self.recipe()
                .handle_reply_dyn(now, op, Err(Error::ConnectionLoss));
        }
    }

    fn reconnect(&mut self) {
        if !self.connected && !self.ended {
            self.connected = true;
            let now = self.now;
            let sid = self.sid;
            self.log.push(String::from("reconnected"));
            self.recipe()
                .handle_session_dyn(now, SessionChange::Reconnected { session_id: sid });
            for (op, path, t) in core::mem::take(&mut self.missed) {
                self.log.push(format!("watch (missed) {t:?} {path}"));
                let ev = WatchEvent {
                    event_type: t,
                    path,
                };
                self.recipe().handle_watch_dyn(now, op, &ev);
            }
        }
    }

    fn expire(&mut self, renew: bool) {
        if self.ended {
            return;
        }
        let now = self.now;
        let old = self.sid;
        let gone: Vec<String> = self
            .model
            .nodes
            .iter()
            .filter(|(_, n)| n.owner == old)
            .map(|(p, _)| p.clone())
            .collect();
        self.watches.clear();
        self.missed.clear();
        let mut fired = Vec::new();
        for p in gone {
            self.model.nodes.remove(&p);
            fired.push((p.clone(), EventType::NodeDeleted));
            fired.push((parent(&p).to_string(), EventType::NodeChildrenChanged));
        }
        self.log.push(format!("expired (renew {renew})"));
        let lost: Vec<OpId> = self.wire.drain(..).map(|(op, _)| op).collect();
        for op in lost {
            self.recipe()
                .handle_reply_dyn(now, op, Err(Error::SessionExpired));
        }
        self.recipe()
            .handle_session_dyn(now, SessionChange::Expired);
        if renew {
            self.sid = self.next_sid;
            self.next_sid += 1;
            self.connected = true;
            let sid = self.sid;
            self.recipe()
                .handle_session_dyn(now, SessionChange::Connected { session_id: sid });
        } else {
            self.ended = true;
            self.connected = false;
            self.recipe().handle_session_dyn(now, SessionChange::Closed);
        }
    }

    /// The harness's own participants write to the model directly.
    fn other(&mut self, what: u8) {
        let mut fired = Vec::new();
        let sid = 0x0be7;
        let votes: Vec<Option<Vote>> = self.sites().iter().map(|s| self.model.vote(s)).collect();
        let op = match what % 6 {
            0 | 1 => {
                let site = OTHERS[usize::from(what / 6) % OTHERS.len()];
                let vote = if what % 2 == 0 {
                    Vote::Commit
                } else {
                    Vote::Abort
                };
                Some(MultiOp::SetData(SetDataRequest {
                    path: vote_path(TX, site),
                    data: vote.data(),
                    version: 0,
                }))
            }
            2 => {
                // A decider by the rule.
                let outcome = if votes.contains(&Some(Vote::Abort)) {
                    Some(Outcome::Abort)
                } else if votes.iter().all(|v| *v == Some(Vote::Commit)) {
                    Some(Outcome::Commit)
                } else {
                    None
                };
                outcome.map(|o| {
                    MultiOp::SetData(SetDataRequest {
                        path: TX.into(),
                        data: o.data(),
                        version: 0,
                    })
                })
            }
            3 if matches!(self.m, Machine::Site(_)) => {
                // The coordinator dies: its presence goes; undecided, a site aborts.
                Some(MultiOp::Delete(DeleteRequest {
                    path: coordinator_path(TX),
                    version: -1,
                }))
            }
            4 => Some(MultiOp::Create(CreateRequest::new(
                alive_path(TX, OTHERS[0]),
                Bytes::new(),
                Acl::open_unsafe(),
                CreateMode::Ephemeral,
            ))),
            _ => Some(MultiOp::Delete(DeleteRequest {
                path: alive_path(TX, OTHERS[0]),
                version: -1,
            })),
        };
        if let Some(op) = op {
            if self.model.write(sid, &op, &mut fired).is_ok() {
                self.log.push(format!(
                    "other: {}",
                    brief(&Request::Multi(alloc::vec![op]))
                ));
                self.fire(fired);
            }
        }
    }

    fn sites(&self) -> Vec<&'static str> {
        let mut s = alloc::vec![ME];
        s.extend(OTHERS);
        s
    }

    /// The model coordinator creates the transaction (for site runs).
    fn create_tx(&mut self) {
        if self.model.nodes.contains_key(TX) {
            return;
        }
        let mut fired = Vec::new();
        let mut ops = alloc::vec![
            (String::from("/t"), 0),
            (String::from(TX), 0),
            (payload_path(TX), 0),
            (votes_dir(TX), 0),
        ];
        for s in self.sites() {
            ops.push((vote_path(TX, s), 0));
        }
        ops.push((alive_dir(TX), 0));
        ops.push((coordinator_path(TX), 0x0c0));
        for (path, owner) in ops {
            if self.model.nodes.contains_key(&path) {
                continue;
            }
            let data = if path == payload_path(TX) {
                Bytes::from_static(b"P")
            } else {
                Bytes::new()
            };
            self.model.nodes.insert(
                path.clone(),
                Node {
                    data,
                    version: 0,
                    owner,
                },
            );
            fired.push((path.clone(), EventType::NodeCreated));
            fired.push((parent(&path).to_string(), EventType::NodeChildrenChanged));
        }
        self.log
            .push(String::from("other: the transaction is created"));
        self.fire(fired);
    }

    fn tick(&mut self, by: Duration) -> Result<(), String> {
        let target = match self.recipe().poll_timeout_dyn() {
            Some(t) if t <= self.now + by => t,
            _ => self.now + by,
        };
        self.now = target.max(self.now);
        let now = self.now;
        self.recipe().handle_timeout_dyn(now);
        if let Some(t) = self.recipe().poll_timeout_dyn() {
            if t <= now {
                return Err(format!(
                    "poll_timeout {} not after handle_timeout({})",
                    t.as_micros(),
                    now.as_micros()
                ));
            }
        }
        Ok(())
    }
}

/// The object-safe subset the harness uses (both machines implement it).
trait RecipeDyn {
    fn handle_reply_dyn(&mut self, now: Instant, op: OpId, result: Result<Response, Error>);
    fn handle_watch_dyn(&mut self, now: Instant, op: OpId, event: &WatchEvent);
    fn handle_session_dyn(&mut self, now: Instant, change: SessionChange);
    fn handle_timeout_dyn(&mut self, now: Instant);
    fn handle_abandon_dyn(&mut self, now: Instant);
    fn poll_request_dyn(&mut self) -> Option<(OpId, Request)>;
    fn poll_timeout_dyn(&self) -> Option<Instant>;
    fn is_done_dyn(&self) -> bool;
}

impl<R: Recipe> RecipeDyn for R {
    fn handle_reply_dyn(&mut self, now: Instant, op: OpId, result: Result<Response, Error>) {
        self.handle_reply(now, op, result)
    }
    fn handle_watch_dyn(&mut self, now: Instant, op: OpId, event: &WatchEvent) {
        self.handle_watch(now, op, event)
    }
    fn handle_session_dyn(&mut self, now: Instant, change: SessionChange) {
        self.handle_session(now, change)
    }
    fn handle_timeout_dyn(&mut self, now: Instant) {
        self.handle_timeout(now)
    }
    fn handle_abandon_dyn(&mut self, now: Instant) {
        self.handle_abandon(now)
    }
    fn poll_request_dyn(&mut self) -> Option<(OpId, Request)> {
        self.poll_request()
    }
    fn poll_timeout_dyn(&self) -> Option<Instant> {
        self.poll_timeout()
    }
    fn is_done_dyn(&self) -> bool {
        self.is_done()
    }
}

fn brief(r: &Request) -> String {
    match r {
        Request::Multi(ops) => {
            let ops: Vec<String> = ops
                .iter()
                .map(|o| match o {
                    MultiOp::Create(c) => format!("create {}", c.path),
                    MultiOp::Delete(d) => format!("delete {}", d.path),
                    MultiOp::SetData(s) => format!("set {}@{}", s.path, s.version),
                    MultiOp::Check(c) => format!("check {}@{}", c.path, c.version),
                    other => format!("{other:?}"),
                })
                .collect();
            format!("multi[{}]", ops.join(", "))
        }
        Request::Create(c) | Request::CreateContainer(c) => format!("create {}", c.path),
        Request::Delete(d) => format!("delete {}", d.path),
        Request::SetData(s) => format!("set {}@{}", s.path, s.version),
        Request::Exists(g) => format!("exists {} {}", g.path, g.watch),
        Request::GetData(g) => format!("get {} {}", g.path, g.watch),
        Request::GetChildren(g) => format!("list {} {}", g.path, g.watch),
        Request::Sync(p) => format!("sync {}", p.path),
        other => format!("{:?}", other.op_code()),
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
                if !(checked(ME) && OTHERS.iter().all(|s| checked(s))) {
                    return Err(format!("a commit without every vote checked: {}", brief(r)));
                }
            }
        }
    }
    Ok(())
}

/// Runs one schedule; `Err` describes the broken invariant and the trace.
pub fn run(bytes: &[u8]) -> Result<(), String> {
    let mut it = bytes.iter().copied();
    let mut byte = move || it.next();
    let head = byte().unwrap_or(0);
    let variant = if head & 1 == 0 {
        Variant::Coordinator
    } else {
        Variant::Peers
    };
    let coordinator = head & 2 == 0;
    let tx_first = head & 4 != 0;
    let mut sites = alloc::vec![ME];
    sites.extend(OTHERS);
    let m = if coordinator {
        let mut config = CoordinatorConfig::new(TX, &sites, variant, (3, 4));
        config.deadline = Duration::from_millis(100);
        if head & 8 != 0 {
            config.vote_timeout = Some(Duration::from_millis(400));
        }
        Machine::Coordinator(Coordinator::new(config))
    } else {
        Machine::Site(Site::new(SiteConfig::new(TX, ME, variant)))
    };
    let mut w = World {
        model: Model::default(),
        m,
        variant,
        sid: 0x5e55,
        next_sid: 0x5e56,
        now: Instant::ZERO,
        wire: VecDeque::new(),
        watches: Vec::new(),
        missed: Vec::new(),
        connected: true,
        ended: false,
        abandoned: false,
        seen: Seen::default(),
        log: Vec::new(),
    };
    let result = schedule(&mut w, &mut byte, coordinator, tx_first);
    result.map_err(|e| {
        let start = w.log.len().saturating_sub(60);
        format!(
            "{e}\n{:?} {} run; last steps:\n{}",
            w.variant,
            if coordinator { "coordinator" } else { "site" },
            w.log[start..].join("\n")
        )
    })
}

fn schedule(
    w: &mut World,
    byte: &mut impl FnMut() -> Option<u8>,
    coordinator: bool,
    tx_first: bool,
) -> Result<(), String> {
    // The root of the transaction exists (the coordinator creates `/t` itself otherwise).
    if !coordinator && tx_first {
        w.create_tx();
    }
    let sid = w.sid;
    w.recipe()
        .handle_session_dyn(Instant::ZERO, SessionChange::Connected { session_id: sid });
    match &mut w.m {
        Machine::Coordinator(c) => c.start(Instant::ZERO),
        Machine::Site(s) => s.start(Instant::ZERO),
    }
    w.pull()?;
    let mut voted = false;
    for _ in 0..400 {
        let Some(b) = byte() else { break };
        let arg = byte().unwrap_or(0);
        match b % 16 {
            0..=4 => w.answer(0)?,
            5 => w.answer(1)?,
            6 => w.answer(2)?,
            7 => w.answer(3)?,
            8 => w.reconnect(),
            9 => w.other(arg),
            10 => w.tick(Duration::from_millis(u64::from(arg) * 4))?,
            11 if arg % 8 == 0 => w.expire(arg % 16 != 0),
            12 if !coordinator => w.create_tx(),
            13 if !voted => {
                voted = true;
                let vote = if arg % 4 == 0 {
                    Vote::Abort
                } else {
                    Vote::Commit
                };
                let now = w.now;
                if let Machine::Site(s) = &mut w.m {
                    s.vote(now, vote);
                }
            }
            14 if arg % 8 == 0 && !w.abandoned => {
                w.abandoned = true;
                let now = w.now;
                w.recipe().handle_abandon_dyn(now);
            }
            _ => w.answer(0)?,
        }
        w.pull()?;
    }
    // Liveness: no more faults; everybody else does their part.
    w.log.push(String::from("--- faults stop ---"));
    for round in 0..300 {
        w.reconnect();
        if !coordinator && round == 0 {
            w.create_tx();
        }
        while !w.wire.is_empty() {
            w.answer(0)?;
            w.pull()?;
        }
        if !voted && round == 2 {
            voted = true;
            let now = w.now;
            if let Machine::Site(s) = &mut w.m {
                s.vote(now, Vote::Commit);
            }
        }
        if round >= 3 {
            for i in 0..OTHERS.len() as u8 {
                w.other(i * 6); // every other site votes (commit, if not yet)
            }
            w.other(2); // the model coordinator decides by the rule
        }
        w.pull()?;
        if w.recipe().is_done_dyn() && w.wire.is_empty() {
            break;
        }
        w.tick(Duration::from_millis(50))?;
        w.pull()?;
    }
    if !w.recipe().is_done_dyn() {
        return Err(String::from("liveness: the machine never ended"));
    }
    if w.seen.finals != 1 && !w.abandoned {
        return Err(format!("liveness: {} final events", w.seen.finals));
    }
    if !w.ended && !w.abandoned && w.seen.decided.is_none() {
        // The session is live and the transaction decided: we must know it (unless we
        // failed for a reason the model gave: none here but "closed").
        if w.model.outcome().is_some() {
            return Err(String::from("liveness: ended without learning the outcome"));
        }
    }
    let ours: Vec<&String> = w
        .model
        .nodes
        .iter()
        .filter(|(_, n)| n.owner == w.sid && !w.ended)
        .map(|(p, _)| p)
        .collect();
    if !ours.is_empty() {
        return Err(format!("cleanliness: our nodes left: {ours:?}"));
    }
    Ok(())
}
