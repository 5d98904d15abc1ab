//! One to three [`Election`] machines against a small model server, driven by bytes
//! (proptest and libFuzzer share it). Each machine has its own session. The bytes
//! choose how many machines there are and which of them rejoin by themselves, then a
//! schedule of steps:
//!
//! * the server answers the oldest request of a machine, or answers it and the
//!   connection breaks before the reply arrives (applied, reply lost), or the
//!   connection breaks; the session refuses a request (`Overloaded`, an immediate error
//!   reply) or the server throttles one;
//! * a reconnect (after an expiry: a new session); a session expires (its nodes go, its
//!   requests are never answered);
//! * an operator deletes a candidate node; time passes;
//! * the users: join, resign (with and without rejoin), close, acknowledge.
//!
//! Safety, after every step: at most one machine leads among those whose session lives
//! and whose candidate node still exists (leading: `Elected` folded with
//! [`Leadership::after`], not resigned or closed since); `Elected` by a live machine
//! whose node exists: no lower candidate exists and the token is the node's czxid;
//! `Acknowledged` by a live leader: the acknowledgement node is its session's and
//! carries its token; an acknowledgement on the server carries the czxid of a candidate
//! node its session owned, and if that node still exists it is the lowest; one final
//! event per machine and nothing after it; `Closed` by a live machine only when no node
//! of its session is left; `poll_timeout` never in the past after `handle_timeout`.
//!
//! Liveness, at the end: faults stop, every session comes back, every machine that has
//! not ended stands for election. Within a bounded number of rounds exactly one of them
//! leads, it owns the lowest node, the directory holds exactly one node per candidate
//! (the node its machine reports) and nothing else, and the leader's acknowledgement is
//! written. Then everyone closes: every machine must end, be done, and leave no node.

use alloc::format;
use alloc::string::{String, ToString};
use alloc::vec::Vec;
use bytes::Bytes;
use core::time::Duration;

use zk_recipes::error::Error;
use zk_recipes::proto::*;
use zk_recipes::recipe::contender::Contender;
use zk_recipes::recipe::election::{
    default_ack_dir, parse_ack_node, Election, ElectionConfig, ElectionEvent, Leadership,
};
use zk_recipes::recipe::{OpId, Recipe, SessionChange};
use zk_recipes::session::WatchEvent;
use zk_recipes::time::Instant;

const DIR: &str = "/e";

#[derive(Clone, Debug)]
struct Node {
    name: String,
    owner: i64,
    czxid: i64,
}

#[derive(Clone, Debug)]
struct AckNode {
    /// The token its name carries (`<ack_dir>/<token>`).
    token: i64,
    owner: i64,
}

/// The server's tree: the candidates' directory (which always exists) and the
/// acknowledgement node.
#[derive(Clone, Debug, Default)]
struct Tree {
    nodes: Vec<Node>,
    /// The acknowledgement directory's children (the directory always exists).
    acks: Vec<AckNode>,
    zxid: i64,
    seq: u32,
}

fn seq_of(name: &str) -> String {
    Contender::parse(name)
        .map(|c| c.sequence)
        .unwrap_or_default()
}

fn name_of(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or("")
}

impl Tree {
    fn lowest(&self) -> Option<&Node> {
        self.nodes
            .iter()
            .min_by(|a, b| (seq_of(&a.name), &a.name).cmp(&(seq_of(&b.name), &b.name)))
    }

    fn candidate(&self, path: &str) -> Option<&Node> {
        let name = path.strip_prefix(DIR)?.strip_prefix('/')?;
        self.nodes.iter().find(|n| n.name == name)
    }
}

/// What the server writes to a connection: a reply, or a watch notification.
type Outbound = Result<Result<Response, Error>, WatchEvent>;

/// One machine, its session and its connection.
struct Machine {
    e: Election,
    rejoin: bool,
    session: i64,
    alive: bool,
    connected: bool,
    wire: Vec<(OpId, Request)>,
    replies: Vec<(OpId, Outbound)>,
    queued: Vec<(OpId, Request)>,
    notify: Vec<(OpId, WatchEvent)>,
    leadership: Leadership,
    stepped_down: bool,
    /// Our node while leading (from `Elected`).
    leading_node: Option<(i64, String)>,
    joined: bool,
    closing: bool,
    finals: u32,
    acks: u32,
}

impl Machine {
    fn leads(&self) -> bool {
        self.leadership == Leadership::Leading && !self.stepped_down
    }
}

struct Run {
    tree: Tree,
    /// Every candidate node that ever existed (for acknowledgements left behind).
    history: Vec<Node>,
    /// One-shot watches: (path, machine, session, op).
    watches: Vec<(String, usize, i64, OpId)>,
    ms: Vec<Machine>,
    next_session: i64,
    now: Instant,
    ack_dir: String,
    /// Candidate nodes an operator deleted.
    operator_deleted: Vec<String>,
    trace: Vec<String>,
}

impl Run {
    /// The token of an acknowledgement node path, if it is one.
    fn ack_token(&self, path: &str) -> Option<i64> {
        let (dir, name) = path.rsplit_once('/')?;
        if dir == self.ack_dir {
            parse_ack_node(name)
        } else {
            None
        }
    }

    fn note(&mut self, line: String) {
        if self.trace.len() == 300 {
            self.trace.remove(0);
        }
        self.trace.push(line);
    }

    fn write(&mut self) -> i64 {
        self.tree.zxid += 1;
        self.tree.zxid
    }

    fn fire(&mut self, path: &str) {
        let mut i = 0;
        while i < self.watches.len() {
            if self.watches[i].0 != path {
                i += 1;
                continue;
            }
            let (p, m, sid, op) = self.watches.remove(i);
            let ev = WatchEvent {
                event_type: EventType::NodeDeleted,
                path: p,
            };
            let Some(mach) = self.ms.get_mut(m) else {
                continue;
            };
            if mach.session != sid || !mach.alive {
                continue;
            }
            if mach.connected {
                mach.replies.push((op, Err(ev)));
            } else {
                mach.notify.push((op, ev));
            }
        }
    }

    fn remove_candidate(&mut self, name: &str) -> bool {
        match self.tree.nodes.iter().position(|n| n.name == name) {
            Some(i) => {
                self.tree.nodes.remove(i);
                self.write();
                self.fire(&format!("{DIR}/{name}"));
                true
            }
            None => false,
        }
    }

    /// One op of a multi, on `tree`: the result or the error code.
    fn multi_op(&self, tree: &mut Tree, sid: i64, op: &MultiOp) -> Result<MultiResult, ErrorCode> {
        match op {
            MultiOp::Check(c) => {
                if c.version != -1 {
                    return Err(ErrorCode::Unimplemented);
                }
                if tree.candidate(&c.path).is_some() {
                    Ok(MultiResult::Check)
                } else {
                    Err(ErrorCode::NoNode)
                }
            }
            MultiOp::Create(c) if self.ack_token(&c.path).is_some() => {
                let token = self.ack_token(&c.path).unwrap_or(0);
                if tree.acks.iter().any(|a| a.token == token) {
                    return Err(ErrorCode::NodeExists);
                }
                tree.acks.push(AckNode { token, owner: sid });
                Ok(MultiResult::Create(c.path.clone()))
            }
            _ => Err(ErrorCode::Unimplemented),
        }
    }

    /// Applies one request of machine `m` as the server would.
    fn apply(&mut self, m: usize, op: OpId, req: &Request) -> Result<Response, Error> {
        let sid = self.ms[m].session;
        let no_node = Err(Error::Server(ErrorCode::NoNode));
        match req {
            Request::Create(_) | Request::CreateContainer(_) => {
                // Ancestors of the directory and the directory itself exist.
                Err(Error::Server(ErrorCode::NodeExists))
            }
            Request::Create2(c) => {
                if c.path.rsplit_once('/').map(|(d, _)| d) != Some(DIR) {
                    return no_node;
                }
                let czxid = self.write();
                let name = format!("{}{:010}", name_of(&c.path), self.tree.seq);
                self.tree.seq += 1;
                let node = Node {
                    name: name.clone(),
                    owner: sid,
                    czxid,
                };
                self.tree.nodes.push(node.clone());
                self.history.push(node);
                Ok(Response::PathStat {
                    path: format!("{DIR}/{name}"),
                    stat: Stat {
                        czxid,
                        ephemeral_owner: sid,
                        ..Stat::default()
                    },
                })
            }
            Request::GetChildren(p) if p.path == DIR => Ok(Response::Children(
                self.tree.nodes.iter().map(|n| n.name.clone()).collect(),
            )),
            Request::Sync(p) => Ok(Response::Path(p.path.clone())),
            Request::GetChildren(g) => match self.tree.candidate(&g.path) {
                // A children watch on a candidate (it has none): a deletion watch.
                Some(_) => {
                    if g.watch {
                        self.watches.push((g.path.clone(), m, sid, op));
                    }
                    Ok(Response::Children(Vec::new()))
                }
                None => no_node,
            },
            Request::GetData(g) | Request::Exists(g) => {
                let stat = self.tree.candidate(&g.path).map(|n| {
                    (
                        Bytes::new(),
                        Stat {
                            czxid: n.czxid,
                            ephemeral_owner: n.owner,
                            ..Stat::default()
                        },
                    )
                });
                match stat {
                    Some((data, stat)) => {
                        if g.watch {
                            self.watches.push((g.path.clone(), m, sid, op));
                        }
                        if matches!(req, Request::Exists(_)) {
                            Ok(Response::Stat(stat))
                        } else {
                            Ok(Response::Data { data, stat })
                        }
                    }
                    None => no_node,
                }
            }
            Request::Delete(d) => {
                if let Some(token) = self.ack_token(&d.path) {
                    let before = self.tree.acks.len();
                    self.tree.acks.retain(|a| a.token != token);
                    let r = if self.tree.acks.len() < before {
                        Ok(Response::Empty)
                    } else {
                        no_node
                    };
                    self.write();
                    return r;
                }
                let name = name_of(&d.path).to_string();
                if d.path.rsplit_once('/').map(|(p, _)| p) == Some(DIR)
                    && self.remove_candidate(&name)
                {
                    Ok(Response::Empty)
                } else {
                    no_node
                }
            }
            Request::Multi(ops) => {
                let mut tree = self.tree.clone();
                tree.zxid += 1;
                let mut results = Vec::new();
                let mut failed = None;
                for (i, op) in ops.iter().enumerate() {
                    match self.multi_op(&mut tree, sid, op) {
                        Ok(r) => results.push(r),
                        Err(code) => {
                            failed = Some((i, code));
                            break;
                        }
                    }
                }
                self.write();
                match failed {
                    None => {
                        self.tree = tree;
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
            _ => Err(Error::Server(ErrorCode::Unimplemented)),
        }
    }

    /// Moves machine `m`'s requests out (refusing the first if asked), then checks its
    /// events.
    fn pump(&mut self, m: usize, refuse: bool) -> Result<(), String> {
        let mut refused = false;
        loop {
            let Some((op, req)) = self.ms[m].e.poll_request() else {
                break;
            };
            self.note(format!("  m{m} sent {op} {req:?}"));
            let mach = &mut self.ms[m];
            if mach.finals > 0 {
                return Err(format!("m{m}: request {req:?} after its final event"));
            }
            if !mach.alive {
                // No session: the client refuses it at once.
                mach.e
                    .handle_reply(self.now, op, Err(Error::SessionExpired));
            } else if refuse && !refused {
                refused = true;
                mach.e.handle_reply(self.now, op, Err(Error::Overloaded));
            } else if mach.connected {
                mach.wire.push((op, req));
            } else {
                mach.queued.push((op, req));
            }
        }
        self.events(m)
    }

    fn pump_all(&mut self) -> Result<(), String> {
        for m in 0..self.ms.len() {
            self.pump(m, false)?;
        }
        // A request a machine sent can change what another must check: pump again.
        for m in 0..self.ms.len() {
            self.pump(m, false)?;
        }
        self.check()
    }

    fn events(&mut self, m: usize) -> Result<(), String> {
        while let Some(e) = self.ms[m].e.poll_event() {
            self.note(format!("  m{m} event {e:?}"));
            let sid = self.ms[m].session;
            let alive = self.ms[m].alive;
            if self.ms[m].finals > 0 {
                return Err(format!("m{m}: {e:?} after its final event"));
            }
            self.ms[m].leadership = self.ms[m].leadership.after(&e);
            match &e {
                ElectionEvent::Elected {
                    fencing_token,
                    node,
                } => {
                    let mach = &mut self.ms[m];
                    mach.stepped_down = false;
                    mach.leading_node = Some((*fencing_token, node.clone()));
                    let ours = self.tree.nodes.iter().find(|n| n.name == *node);
                    if let (true, Some(ours)) = (alive, ours) {
                        if ours.czxid != *fencing_token || ours.owner != sid {
                            return Err(format!(
                                "m{m}: Elected with token {fencing_token}, node {ours:?}"
                            ));
                        }
                        if let Some(low) = self.tree.lowest() {
                            if low.name != *node {
                                return Err(format!(
                                    "m{m}: Elected on {node} while {} is lower",
                                    low.name
                                ));
                            }
                        }
                    }
                }
                ElectionEvent::Acknowledged { fencing_token } => {
                    self.ms[m].acks += 1;
                    let node = self.ms[m].leading_node.clone();
                    let exists = node
                        .as_ref()
                        .is_some_and(|(_, n)| self.tree.nodes.iter().any(|x| x.name == *n));
                    if alive && exists {
                        let ack = self.tree.acks.iter().find(|a| a.token == *fencing_token);
                        if ack.map(|a| a.owner) != Some(sid)
                            || node.map(|(t, _)| t) != Some(*fencing_token)
                        {
                            return Err(format!(
                                "m{m}: Acknowledged {{ {fencing_token} }} but the \
                                 acknowledgements are {:?}",
                                self.tree.acks
                            ));
                        }
                    }
                }
                // Without rejoin a lost candidacy is not made again until joined.
                ElectionEvent::Lost { .. } if !self.ms[m].rejoin => self.ms[m].joined = false,
                ElectionEvent::Failed { error } if self.ms[m].rejoin => {
                    // Nothing here makes a candidacy impossible: one that ends by
                    // itself is made again.
                    return Err(format!("m{m}: Failed {{ {error:?} }} though it rejoins"));
                }
                ElectionEvent::Closed if alive => {
                    let left = self.tree.nodes.iter().any(|n| n.owner == sid)
                        || self.tree.acks.iter().any(|a| a.owner == sid);
                    if left {
                        return Err(format!("m{m}: Closed while nodes of its session exist"));
                    }
                }
                _ => {}
            }
            if matches!(
                self.ms[m].leadership,
                Leadership::Follower | Leadership::Ended
            ) {
                self.ms[m].leading_node = None;
            }
            if e.is_final() {
                self.ms[m].finals += 1;
                self.ms[m].joined = false;
            }
        }
        Ok(())
    }

    /// Invariants over every machine and the tree.
    fn check(&self) -> Result<(), String> {
        let leaders: Vec<usize> = (0..self.ms.len())
            .filter(|&m| {
                let mach = &self.ms[m];
                mach.leads()
                    && mach.alive
                    && mach
                        .leading_node
                        .as_ref()
                        .is_some_and(|(_, n)| self.tree.nodes.iter().any(|x| x.name == *n))
            })
            .collect();
        if leaders.len() > 1 {
            return Err(format!("two leaders at once: {leaders:?}"));
        }
        for ack in &self.tree.acks {
            let written_by = self
                .history
                .iter()
                .find(|n| n.czxid == ack.token && n.owner == ack.owner);
            match written_by {
                None => {
                    return Err(format!(
                        "acknowledgement {ack:?} does not carry a candidate of its session"
                    ))
                }
                Some(n) => {
                    let live = self.tree.nodes.iter().any(|x| x.name == n.name);
                    let lowest = self.tree.lowest().map(|l| l.name.clone());
                    if live && lowest.as_deref() != Some(n.name.as_str()) {
                        return Err(format!(
                            "acknowledgement of {} while {lowest:?} is the lowest",
                            n.name
                        ));
                    }
                }
            }
        }
        Ok(())
    }

    fn serve_one(&mut self, m: usize) {
        if self.ms[m].wire.is_empty() {
            return;
        }
        let (op, req) = self.ms[m].wire.remove(0);
        let r = self.apply(m, op, &req);
        self.note(format!("  server m{m} {op} -> {r:?}"));
        self.ms[m].replies.push((op, Ok(r)));
    }

    fn deliver_one(&mut self, m: usize) {
        let mach = &mut self.ms[m];
        if !mach.connected || mach.replies.is_empty() {
            return;
        }
        let (op, r) = mach.replies.remove(0);
        match r {
            Ok(r) => mach.e.handle_reply(self.now, op, r),
            Err(ev) => mach.e.handle_watch(self.now, op, &ev),
        }
    }

    fn disconnect(&mut self, m: usize) {
        let mach = &mut self.ms[m];
        if !mach.connected {
            return;
        }
        mach.connected = false;
        let mut lost = Vec::new();
        for (op, r) in mach.replies.drain(..) {
            match r {
                Ok(_) => lost.push(op),
                Err(ev) => mach.notify.push((op, ev)),
            }
        }
        lost.extend(mach.wire.drain(..).map(|(op, _)| op));
        for op in lost {
            mach.e
                .handle_reply(self.now, op, Err(Error::ConnectionLoss));
        }
        mach.e.handle_session(self.now, SessionChange::Suspended);
    }

    fn reconnect(&mut self, m: usize) {
        if self.ms[m].connected {
            return;
        }
        if !self.ms[m].alive {
            // A new session after an expiry.
            self.next_session += 1;
            let sid = self.next_session;
            let mach = &mut self.ms[m];
            mach.session = sid;
            mach.alive = true;
            mach.connected = true;
            mach.e
                .handle_session(self.now, SessionChange::Connected { session_id: sid });
            return;
        }
        let mach = &mut self.ms[m];
        mach.connected = true;
        mach.e.handle_session(
            self.now,
            SessionChange::Reconnected {
                session_id: mach.session,
            },
        );
        let fired = core::mem::take(&mut mach.notify);
        mach.replies
            .extend(fired.into_iter().map(|(op, ev)| (op, Err(ev))));
        let queued = core::mem::take(&mut mach.queued);
        mach.wire.extend(queued);
    }

    fn expire(&mut self, m: usize) {
        if !self.ms[m].alive {
            return;
        }
        let sid = self.ms[m].session;
        self.watches.retain(|w| w.2 != sid);
        let ours: Vec<String> = self
            .tree
            .nodes
            .iter()
            .filter(|n| n.owner == sid)
            .map(|n| n.name.clone())
            .collect();
        for n in ours {
            self.remove_candidate(&n);
        }
        self.tree.acks.retain(|a| a.owner != sid);
        self.write();
        let mach = &mut self.ms[m];
        mach.alive = false;
        mach.connected = false;
        mach.wire.clear();
        mach.replies.clear();
        mach.queued.clear();
        mach.notify.clear();
        mach.e.handle_session(self.now, SessionChange::Expired);
    }

    fn tick(&mut self, by: Duration) -> Result<(), String> {
        self.now = self.now + by;
        for m in 0..self.ms.len() {
            let e = &mut self.ms[m].e;
            if e.poll_timeout().is_some_and(|t| t <= self.now) {
                e.handle_timeout(self.now);
                if e.poll_timeout().is_some_and(|t| t <= self.now) {
                    return Err(format!("m{m}: deadline not after now after handle_timeout"));
                }
            }
        }
        Ok(())
    }

    /// A user command on machine `m`.
    fn user(&mut self, m: usize, what: u8) {
        let now = self.now;
        let mach = &mut self.ms[m];
        if mach.finals > 0 {
            return;
        }
        let r = match what % 6 {
            0 => {
                mach.joined = true;
                mach.e.join(now) != zk_recipes::recipe::election::Join::Ended
            }
            1 | 2 => {
                let rejoin = what % 6 == 1;
                let r = mach.e.resign(now, rejoin);
                if r {
                    mach.stepped_down = true;
                }
                mach.joined = rejoin;
                r
            }
            3 => {
                mach.closing = true;
                mach.stepped_down = true;
                mach.e.close(now);
                true
            }
            _ => mach.e.acknowledge(now),
        };
        self.note(format!("  m{m} user {} -> {r}", what % 6));
    }

    fn settle_round(&mut self) -> Result<(), String> {
        for m in 0..self.ms.len() {
            if !self.ms[m].connected {
                self.reconnect(m);
            }
        }
        self.pump_all()?;
        for _ in 0..64 {
            let busy = self
                .ms
                .iter()
                .any(|x| !x.wire.is_empty() || !x.replies.is_empty());
            if !busy {
                break;
            }
            for m in 0..self.ms.len() {
                self.serve_one(m);
                self.deliver_one(m);
                self.pump(m, false)?;
            }
            self.check()?;
        }
        self.tick(Duration::from_millis(50))?;
        self.pump_all()
    }
}

/// Runs one schedule; `Err` describes the broken invariant and the last steps taken.
/// Nothing is tolerated: a leader deposed by an operator deleting its node still
/// withdraws its acknowledgement (its name is unique to its leadership).
pub fn run(schedule: &[u8]) -> Result<(), String> {
    let mut trace = Vec::new();
    run_traced(schedule, &mut trace).map_err(|e| {
        let from = trace.len().saturating_sub(300);
        format!("{e}\nlast steps:\n{}", trace[from..].join("\n"))
    })
}

fn run_traced(schedule: &[u8], trace: &mut Vec<String>) -> Result<(), String> {
    let mut input = schedule.iter().copied();
    let a = input.next().unwrap_or(0);
    let count = 1 + usize::from(a % 3);
    let mut ms = Vec::new();
    for i in 0..count {
        let mut config = ElectionConfig::new(DIR, &format!("p{i}"), (i as u64 + 1, 42));
        config.rejoin = a & (8 << i) == 0;
        ms.push(Machine {
            rejoin: config.rejoin,
            e: Election::new(config),
            session: 0x100 + i as i64,
            alive: true,
            connected: true,
            wire: Vec::new(),
            replies: Vec::new(),
            queued: Vec::new(),
            notify: Vec::new(),
            leadership: Leadership::Follower,
            stepped_down: false,
            leading_node: None,
            joined: false,
            closing: false,
            finals: 0,
            acks: 0,
        });
    }
    let mut run = Run {
        tree: Tree {
            zxid: 1,
            ..Tree::default()
        },
        history: Vec::new(),
        watches: Vec::new(),
        ms,
        next_session: 0x1000,
        now: Instant::ZERO,
        ack_dir: default_ack_dir(DIR),
        operator_deleted: Vec::new(),
        trace: Vec::new(),
    };
    let result = drive(&mut run, &mut input);
    core::mem::swap(trace, &mut run.trace);
    result
}

fn drive(run: &mut Run, input: &mut impl Iterator<Item = u8>) -> Result<(), String> {
    for m in 0..run.ms.len() {
        let sid = run.ms[m].session;
        run.ms[m]
            .e
            .handle_session(run.now, SessionChange::Connected { session_id: sid });
        run.user(m, 0);
    }
    run.pump_all()?;
    let n = run.ms.len();
    while let Some(op) = input.next() {
        let arg = input.next().unwrap_or(0);
        let m = usize::from(arg) % n;
        run.note(format!("step {} m{m} arg {arg}", op % 16));
        match op % 16 {
            0..=3 => run.serve_one(m),
            4..=6 => run.deliver_one(m),
            7 => {
                // Applied, then the connection breaks before the reply arrives.
                run.serve_one(m);
                run.disconnect(m);
            }
            8 => run.disconnect(m),
            9 => run.reconnect(m),
            10 => {
                // The session refuses the next request, or the server throttles one.
                if arg & 4 == 0 {
                    run.pump(m, true)?;
                } else if !run.ms[m].wire.is_empty() {
                    let (op, _) = run.ms[m].wire.remove(0);
                    run.ms[m]
                        .replies
                        .push((op, Ok(Err(Error::Server(ErrorCode::Throttled)))));
                }
            }
            11 if arg >= 192 => run.expire(m),
            12 => {
                // An operator deletes a candidate node.
                let k = usize::from(arg >> 2);
                if !run.tree.nodes.is_empty() {
                    let name = run.tree.nodes[k % run.tree.nodes.len()].name.clone();
                    run.note(format!("  operator deletes {name}"));
                    run.remove_candidate(&name);
                    run.operator_deleted.push(name);
                }
            }
            13 => run.user(m, arg >> 2),
            _ => run.tick(Duration::from_millis(u64::from(arg) * 4))?,
        }
        run.pump_all()?;
    }
    settle(run)
}

/// Faults stop. Every machine still running stands for election; one must lead, with
/// exactly the candidates' nodes in the directory and its acknowledgement written;
/// then everyone closes and nothing may be left.
fn settle(run: &mut Run) -> Result<(), String> {
    run.note("settle".into());
    let n = run.ms.len();
    let mut settled = false;
    for round in 0..200 {
        for m in 0..n {
            let mach = &run.ms[m];
            if mach.finals == 0 && !mach.closing && !mach.joined {
                run.user(m, 0);
            }
            if run.ms[m].leads() && round % 4 == 3 && !run.ms[m].e.is_acknowledged() {
                run.user(m, 5);
            }
        }
        run.settle_round()?;
        if round >= 8 && standing(run).is_ok() {
            settled = true;
            break;
        }
    }
    if !settled {
        return Err(format!(
            "liveness: no settled leadership once faults stopped: {}",
            standing(run).err().unwrap_or_default()
        ));
    }
    run.note("close all".into());
    for m in 0..n {
        run.user(m, 3);
    }
    for _ in 0..200 {
        run.settle_round()?;
        if run.ms.iter().all(|x| x.e.is_done()) {
            break;
        }
    }
    for (m, mach) in run.ms.iter().enumerate() {
        if mach.finals != 1 {
            return Err(format!("liveness: m{m} never reported its final event"));
        }
        if !mach.e.is_done() {
            return Err(format!("liveness: m{m} is not done after its final event"));
        }
    }
    if !run.tree.nodes.is_empty() || !run.tree.acks.is_empty() {
        return Err(format!(
            "cleanliness: left behind {:?}, acknowledgements {:?}",
            run.tree.nodes, run.tree.acks
        ));
    }
    Ok(())
}

/// Exactly one leader among the candidates, exactly their nodes, its acknowledgement.
fn standing(run: &Run) -> Result<(), String> {
    let candidates: Vec<usize> = (0..run.ms.len())
        .filter(|&m| run.ms[m].finals == 0 && !run.ms[m].closing)
        .collect();
    let mut expected: Vec<(String, i64)> = Vec::new();
    for &m in &candidates {
        match run.ms[m].e.node() {
            Some(n) => expected.push((n.to_string(), run.ms[m].session)),
            None => return Err(format!("m{m} has no candidate node")),
        }
    }
    let mut actual: Vec<(String, i64)> = run
        .tree
        .nodes
        .iter()
        .map(|n| (n.name.clone(), n.owner))
        .collect();
    expected.sort();
    actual.sort();
    if expected != actual {
        return Err(format!(
            "directory {actual:?}, candidates' nodes {expected:?}"
        ));
    }
    let leaders: Vec<usize> = (0..run.ms.len()).filter(|&m| run.ms[m].leads()).collect();
    if candidates.is_empty() {
        return if leaders.is_empty() {
            Ok(())
        } else {
            Err(format!("leaders {leaders:?} without candidates"))
        };
    }
    let [l] = leaders[..] else {
        return Err(format!("{} leaders: {leaders:?}", leaders.len()));
    };
    let lowest = run.tree.lowest().map(|x| x.owner);
    if lowest != Some(run.ms[l].session) {
        return Err(format!("leader m{l} does not own the lowest node"));
    }
    let ours = run.ms[l].leading_node.as_ref().map(|(t, _)| *t);
    let token = ours.filter(|t| run.tree.acks.iter().any(|a| a.token == *t));
    if token.is_none() || !run.ms[l].e.is_acknowledged() {
        return Err(format!(
            "leader m{l} (token {ours:?}) not acknowledged: acknowledgement {token:?}"
        ));
    }
    Ok(())
}
