//! A [`Lock`] against a small model of one contention directory, driven by bytes
//! (proptest and libFuzzer share it). The bytes choose the lock (kind, deadline,
//! revocable, re-entrant), the directory at the start (missing, a missing chroot, a
//! parent we may not create, lower contenders of other sessions, a node with our prefix
//! owned by another session), and then a schedule of steps:
//!
//! * the server answers the oldest request on the wire, or answers it and the
//!   connection breaks before the reply arrives (applied, reply lost), or the connection
//!   breaks before it is read; the session refuses a request (`Overloaded`) or the
//!   server throttles one;
//! * a reconnect, possibly to a *lagging follower* whose reads miss recent writes until
//!   the lock sends `sync` or writes; the session expires;
//! * other sessions add and remove contenders (a leaving holder may grant the lock to
//!   the next contender: one transaction writes the grant and deletes it); an operator
//!   deletes our node; a revoker writes `unlock` into it or into another contender's;
//!   time passes; the user releases (granting when it knows a successor) or re-enters.
//!
//! Safety, after every step: `Acquired` only when no lower blocking node exists in the
//! live directory, with our node's real czxid as fencing token; one final event per
//! attempt and nothing after it; `Released`/`Cancelled` only when our node is really
//! gone; no request but cleanup after the final event; `poll_timeout` never in the past
//! after `handle_timeout`.
//!
//! Liveness, at the end — no cancel: faults stop, the connection comes back, other
//! contenders leave one by one, a holder releases what it holds, time passes. Within a
//! bounded number of rounds the attempt must have reported its final event, the machine
//! must be done, and no node of our session may be left in the directory.

use alloc::format;
use alloc::string::{String, ToString};
use alloc::vec::Vec;
use bytes::Bytes;
use core::time::Duration;

use zk_recipes::error::Error;
use zk_recipes::proto::*;
use zk_recipes::recipe::contender;
use zk_recipes::recipe::lock::{Acquire, Lock, LockConfig, LockEvent, LockKind};
use zk_recipes::recipe::{OpId, Recipe, SessionChange};
use zk_recipes::session::WatchEvent;
use zk_recipes::time::Instant;

const DIR: &str = "/l";
const SESSION: i64 = 0x5e55;
const OTHER: i64 = 0x0be7;
const ID: &str = "fuzz";

#[derive(Clone, Debug, PartialEq)]
struct Node {
    name: String,
    owner: i64,
    czxid: i64,
    /// zxid of the last write to its data.
    mzxid: i64,
    data: Bytes,
    version: i32,
}

/// The directory as one server sees it.
#[derive(Clone, Debug, Default, PartialEq)]
struct View {
    dir_exists: bool,
    nodes: Vec<Node>,
    zxid: i64,
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Parents {
    Creatable,
    ChrootMissing,
    NoAuth,
}

/// What the server writes: a reply (`Ok`) or a watch notification (`Err`).
type Outbound = Result<Result<Response, Error>, WatchEvent>;

struct World {
    live: View,
    /// Reads of a lagging follower come from here until it catches up.
    stale: Option<View>,
    /// Snapshots after each write, for lagging followers.
    history: Vec<View>,
    parents: Parents,
    seq: u32,
    connected: bool,
    alive: bool,
    /// Highest zxid the client has seen (a follower behind it refuses the client).
    seen_zxid: i64,
    /// Sent, not yet read by the server.
    wire: Vec<(OpId, Request)>,
    /// What the server wrote and the client has not read yet, in order: replies
    /// (`Ok`) and watch notifications (`Err`), each with its zxid.
    replies: Vec<(OpId, Outbound, i64)>,
    /// Submitted while disconnected: sent after the reconnect.
    queued: Vec<(OpId, Request)>,
    /// One-shot watches: (path, op, children watch). A children watch on a node fires
    /// on its deletion only.
    watches: Vec<(String, OpId, bool)>,
    /// Watch events that fired while disconnected: the session re-arms its watches
    /// after the reconnect and the server sends them then.
    notify: Vec<(OpId, WatchEvent, i64)>,
    /// Deleted nodes and the zxid of their deletion: what the client may not have heard
    /// of yet.
    graveyard: Vec<(Node, i64)>,
    /// Notifications a SetWatches2 fired at once: sent right after its reply.
    immediate: Vec<(OpId, WatchEvent)>,
    /// Inside one transaction (a multi, a holder's grant-and-leave): its zxid. Its
    /// writes share it, and one snapshot follows the whole: no follower ever shows a
    /// half-applied multi.
    txn: Option<i64>,
}

fn seq_of(name: &str) -> String {
    contender::Contender::parse(name)
        .map(|c| c.sequence)
        .unwrap_or_default()
}

impl World {
    fn view(&self) -> &View {
        self.stale.as_ref().unwrap_or(&self.live)
    }

    fn write(&mut self) -> i64 {
        if let Some(zxid) = self.txn {
            return zxid;
        }
        self.live.zxid += 1;
        self.stale = None; // a write catches the follower up
        self.live.zxid
    }

    /// Applies `f` as one transaction: one zxid, one snapshot.
    fn atomically<R>(&mut self, f: impl FnOnce(&mut Self) -> R) -> R {
        let zxid = self.write();
        self.txn = Some(zxid);
        let r = f(self);
        self.txn = None;
        self.snapshot();
        r
    }

    fn snapshot(&mut self) {
        if self.txn.is_some() {
            return;
        }
        self.history.push(self.live.clone());
        if self.history.len() > 16 {
            self.history.remove(0);
        }
    }

    fn path(name: &str) -> String {
        format!("{DIR}/{name}")
    }

    fn fire(&mut self, path: &str, t: EventType) {
        let mut i = 0;
        while i < self.watches.len() {
            let (p, _, child) = &self.watches[i];
            // A children watch fires on its node's deletion and on a change of its
            // children; a data watch on anything but a change of children.
            let fires = if *child {
                matches!(t, EventType::NodeDeleted | EventType::NodeChildrenChanged)
            } else {
                t != EventType::NodeChildrenChanged
            };
            if p == path && fires {
                let (p, op, _) = self.watches.remove(i);
                let ev = WatchEvent {
                    event_type: t,
                    path: p,
                };
                if self.connected {
                    self.replies.push((op, Err(ev), self.live.zxid));
                } else {
                    self.notify.push((op, ev, self.live.zxid));
                }
            } else {
                i += 1;
            }
        }
    }

    fn remove(&mut self, name: &str) -> bool {
        match self.live.nodes.iter().position(|n| n.name == name) {
            Some(i) => {
                let node = self.live.nodes.remove(i);
                let zxid = self.write();
                self.graveyard.push((node, zxid));
                self.fire(&Self::path(name), EventType::NodeDeleted);
                self.fire(DIR, EventType::NodeChildrenChanged);
                self.snapshot();
                true
            }
            None => false,
        }
    }

    fn add(&mut self, prefix: &str, owner: i64) -> Node {
        let zxid = self.write();
        let name = format!("{prefix}{:010}", self.seq);
        self.seq += 1;
        let node = Node {
            name,
            owner,
            czxid: zxid,
            mzxid: zxid,
            data: Bytes::new(),
            version: 0,
        };
        self.live.nodes.push(node.clone());
        self.fire(DIR, EventType::NodeChildrenChanged);
        self.snapshot();
        node
    }

    /// Applies one request as the server would; returns the reply and its zxid.
    fn apply(&mut self, req: &Request, op: OpId) -> (Result<Response, Error>, i64) {
        let no_node = Err(Error::Server(ErrorCode::NoNode));
        match req {
            Request::CreateContainer(c) | Request::Create(c) => {
                self.write();
                // Any other ancestor ("/") exists.
                let r = if c.path != DIR || self.live.dir_exists {
                    Err(Error::Server(ErrorCode::NodeExists))
                } else {
                    match self.parents {
                        Parents::Creatable => {
                            self.live.dir_exists = true;
                            self.snapshot();
                            Ok(Response::Path(c.path.clone()))
                        }
                        Parents::ChrootMissing => no_node,
                        Parents::NoAuth => Err(Error::Server(ErrorCode::NoAuth)),
                    }
                };
                (r, self.live.zxid)
            }
            Request::Create2(c) => {
                if !self.live.dir_exists {
                    self.write();
                    return (no_node, self.live.zxid);
                }
                let prefix = c.path.rsplit('/').next().unwrap_or("").to_string();
                let node = self.add(&prefix, SESSION);
                let stat = Stat {
                    czxid: node.czxid,
                    ephemeral_owner: SESSION,
                    ..Stat::default()
                };
                (
                    Ok(Response::PathStat {
                        path: Self::path(&node.name),
                        stat,
                    }),
                    node.czxid,
                )
            }
            Request::Delete(d) => {
                let name = d.path.rsplit('/').next().unwrap_or("").to_string();
                let r = if self.remove(&name) {
                    Ok(Response::Empty)
                } else {
                    self.write();
                    no_node
                };
                (r, self.live.zxid)
            }
            Request::Sync(p) => {
                self.stale = None;
                (Ok(Response::Path(p.path.clone())), self.live.zxid)
            }
            Request::GetChildren(g) if g.path != DIR => {
                // A children watch on a contender (it has none): a deletion watch.
                let name = g.path.rsplit('/').next().unwrap_or("");
                let v = self.view();
                let zxid = v.zxid;
                if !v.nodes.iter().any(|n| n.name == name) {
                    return (no_node, zxid);
                }
                if g.watch {
                    self.watches.push((g.path.clone(), op, true));
                    if self.stale.is_some() && !self.live.nodes.iter().any(|n| n.name == name) {
                        // The lagging follower fires it when it applies the deletion.
                        self.fire(&g.path, EventType::NodeDeleted);
                    }
                }
                (Ok(Response::Children(Vec::new())), zxid)
            }
            Request::GetChildren(g) => {
                let v = self.view().clone();
                if g.watch && v.dir_exists {
                    self.watches.push((g.path.clone(), op, true));
                    let names = |ns: &[Node]| ns.iter().map(|n| n.name.clone()).collect::<Vec<_>>();
                    if self.stale.is_some() && names(&v.nodes) != names(&self.live.nodes) {
                        // The lagging follower fires it when it applies the change.
                        self.fire(DIR, EventType::NodeChildrenChanged);
                    }
                }
                let r = if v.dir_exists {
                    Ok(Response::Children(
                        v.nodes.iter().map(|n| n.name.clone()).collect(),
                    ))
                } else {
                    no_node
                };
                (r, v.zxid)
            }
            Request::GetData(g) | Request::Exists(g) => {
                let name = g.path.rsplit('/').next().unwrap_or("");
                let v = self.view();
                let zxid = v.zxid;
                match v.nodes.iter().find(|n| n.name == name).cloned() {
                    Some(n) => {
                        if g.watch {
                            self.watches.push((g.path.clone(), op, false));
                            if self.stale.is_some() {
                                // A lagging follower fires the watch when it applies
                                // the change it has not seen yet.
                                let live = self.live.nodes.iter().find(|x| x.name == name);
                                match live {
                                    None => self.fire(&g.path, EventType::NodeDeleted),
                                    Some(l) if l.data != n.data => {
                                        self.fire(&g.path, EventType::NodeDataChanged)
                                    }
                                    Some(_) => {}
                                }
                            }
                        }
                        let stat = Stat {
                            czxid: n.czxid,
                            ephemeral_owner: n.owner,
                            version: n.version,
                            ..Stat::default()
                        };
                        let r = if matches!(req, Request::Exists(_)) {
                            Ok(Response::Stat(stat))
                        } else {
                            Ok(Response::Data { data: n.data, stat })
                        };
                        (r, zxid)
                    }
                    None => (no_node, zxid),
                }
            }
            Request::Multi(ops) => (self.multi(ops), self.live.zxid),
            Request::SetWatches2(w) => {
                // Against the leader's tree (the follower catches up, as it may at any
                // time): a watch whose node changed after the zxid fires at once, after
                // the reply (as the session delivers it), and stays unarmed.
                self.stale = None;
                let rel = w.relative_zxid;
                let lists = [(&w.data_watches, false), (&w.child_watches, true)];
                for (paths, child) in lists {
                    for path in paths {
                        let name = path.rsplit('/').next().unwrap_or("");
                        let node = self.live.nodes.iter().find(|n| n.name == name);
                        let fire = match node {
                            None if path != DIR => Some(EventType::NodeDeleted),
                            Some(n) if !child && n.mzxid > rel => Some(EventType::NodeDataChanged),
                            _ => None,
                        };
                        match fire {
                            Some(t) => self.immediate.push((
                                op,
                                WatchEvent {
                                    event_type: t,
                                    path: path.clone(),
                                },
                            )),
                            None => self.watches.push((path.clone(), op, child)),
                        }
                    }
                }
                (Ok(Response::Empty), self.live.zxid)
            }
            _ => (Err(Error::Server(ErrorCode::Unimplemented)), self.live.zxid),
        }
    }

    /// A multi of setData, delete and check: all or nothing, as the server does it.
    fn multi(&mut self, ops: &[MultiOp]) -> Result<Response, Error> {
        let name = |p: &str| p.rsplit('/').next().unwrap_or("").to_string();
        let check = |w: &World, path: &str, version: i32| match w
            .live
            .nodes
            .iter()
            .find(|n| n.name == name(path))
        {
            None => Err(ErrorCode::NoNode),
            Some(n) if version != -1 && n.version != version => Err(ErrorCode::BadVersion),
            Some(_) => Ok(()),
        };
        let failed = ops.iter().enumerate().find_map(|(i, op)| {
            let r = match op {
                MultiOp::SetData(r) => check(self, &r.path, r.version),
                MultiOp::Delete(r) => check(self, &r.path, r.version),
                MultiOp::Check(r) => check(self, &r.path, r.version),
                _ => Err(ErrorCode::Unimplemented),
            };
            r.err().map(|c| (i, c))
        });
        if let Some((at, code)) = failed {
            self.write();
            self.snapshot();
            return Ok(Response::Multi(failed_multi(ops.len(), at, code)));
        }
        self.atomically(|w| {
            let mut results = Vec::new();
            for op in ops {
                match op {
                    MultiOp::SetData(r) => {
                        let stat = w.set_data(&name(&r.path), r.data.clone());
                        results.push(MultiResult::SetData(stat));
                    }
                    MultiOp::Delete(r) => {
                        w.remove(&name(&r.path));
                        results.push(MultiResult::Delete);
                    }
                    _ => results.push(MultiResult::Check),
                }
            }
            Ok(Response::Multi(results))
        })
    }

    /// Writes a node's data (it exists): a new version, and its data watches fire.
    fn set_data(&mut self, name: &str, data: Bytes) -> Stat {
        let mut stat = Stat::default();
        let zxid = self.txn.unwrap_or(self.live.zxid + 1);
        if let Some(node) = self.live.nodes.iter_mut().find(|x| x.name == name) {
            node.data = data;
            node.mzxid = zxid;
            node.version += 1;
            stat = Stat {
                czxid: node.czxid,
                ephemeral_owner: node.owner,
                version: node.version,
                ..Stat::default()
            };
        }
        self.write();
        self.fire(&Self::path(name), EventType::NodeDataChanged);
        self.snapshot();
        stat
    }

    /// The lowest contender leaves as a granting holder would: one transaction writes
    /// the grant into the next contender (if it has version 0) and deletes the leaver.
    ///
    /// An exclusive leaver followed by exclusive contenders also writes a notice into
    /// the one after the next ("the next holds now") and, if `told` (the next heard of
    /// its turn from our own predecessor's notice), no grant into the next.
    fn leave_granting(&mut self, leaver: &str, told: bool) {
        let mut order: Vec<&Node> = self.live.nodes.iter().collect();
        order.sort_by_key(|n| seq_of(&n.name));
        let at = order.iter().position(|n| n.name == leaver);
        let grantable = |n: &&&Node| n.version == 0 && contender::may_be_granted(&n.name);
        let next = at
            .and_then(|i| order.get(i + 1))
            .filter(grantable)
            .map(|n| n.name.clone());
        let exclusive = |name: &str| name.contains(contender::LOCK);
        let after = at
            .and_then(|i| order.get(i + 2))
            .filter(grantable)
            .map(|n| n.name.clone())
            .filter(|a| {
                exclusive(leaver) && exclusive(a) && next.as_deref().is_some_and(exclusive)
            });
        self.atomically(|w| {
            if let Some(next) = &next {
                if !told || after.is_none() {
                    w.set_data(next, Bytes::from_static(zk_recipes::recipe::lock::GRANT));
                }
                if let Some(after) = &after {
                    let mut notice = zk_recipes::recipe::lock::NOTICE.to_vec();
                    notice.push(b'\n');
                    notice.extend_from_slice(next.as_bytes());
                    w.set_data(after, Bytes::from(notice));
                }
            }
            w.remove(leaver);
        });
    }

    /// The connection breaks: everything unanswered fails with `ConnectionLoss`.
    fn drop_connection(&mut self) -> Vec<(OpId, Result<Response, Error>)> {
        self.connected = false;
        self.stale = None;
        let mut lost: Vec<(OpId, Result<Response, Error>)> = Vec::new();
        for (op, r, zxid) in self.replies.drain(..) {
            match r {
                Ok(_) => lost.push((op, Err(Error::ConnectionLoss))),
                // Not lost: the watch is re-armed after the reconnect and fires then.
                Err(ev) => self.notify.push((op, ev, zxid)),
            }
        }
        lost.extend(
            self.wire
                .drain(..)
                .map(|(op, _)| (op, Err(Error::ConnectionLoss))),
        );
        lost
    }

    /// The nodes that existed when the server was at `zxid`.
    fn at(&self, zxid: i64) -> Vec<&Node> {
        self.live
            .nodes
            .iter()
            .filter(|n| n.czxid <= zxid)
            .chain(
                self.graveyard
                    .iter()
                    .filter(|(n, gone)| n.czxid <= zxid && *gone > zxid)
                    .map(|(n, _)| n),
            )
            .collect()
    }

    fn ours(&self) -> Vec<&Node> {
        self.live
            .nodes
            .iter()
            .filter(|n| n.owner == SESSION)
            .collect()
    }
}

struct Run {
    world: World,
    lock: Lock,
    kind: LockKind,
    now: Instant,
    /// Final events so far (must end at 1).
    finals: u32,
    acquired: u32,
    /// Re-entrant levels the user holds.
    levels: u32,
    holding: bool,
    trace: Vec<String>,
}

fn blocks(kind: LockKind, other: &str) -> bool {
    kind != LockKind::Read
        || !matches!(contender::Contender::parse(other).map(|c| c.marker), Some(m) if m == contender::READ)
}

impl Run {
    fn note(&mut self, line: String) {
        if self.trace.len() == 400 {
            self.trace.remove(0);
        }
        self.trace.push(line);
    }

    /// Moves the lock's requests out: refused, queued, or on the wire.
    fn pump(&mut self, refuse: bool) -> Result<(), String> {
        let mut refused_one = false;
        while let Some((op, req)) = self.lock.poll_request() {
            if self.finals > 0
                && !matches!(
                    req,
                    Request::Delete(_)
                        | Request::Sync(_)
                        | Request::GetChildren(_)
                        | Request::Exists(_)
                )
            {
                return Err(format!("request {req:?} after the attempt ended"));
            }
            self.note(format!(
                "  sent {op} {:?} {}",
                req.op_code(),
                req_path(&req)
            ));
            if !self.world.alive {
                self.lock
                    .handle_reply(self.now, op, Err(Error::SessionExpired));
            } else if refuse && !refused_one {
                refused_one = true;
                self.note(format!("  refused {op}"));
                self.lock.handle_reply(self.now, op, Err(Error::Overloaded));
            } else if self.world.connected {
                self.world.wire.push((op, req));
            } else {
                self.world.queued.push((op, req));
            }
        }
        self.events()
    }

    fn events(&mut self) -> Result<(), String> {
        while let Some(e) = self.lock.poll_event() {
            self.note(format!("  event {e:?}"));
            match &e {
                LockEvent::Acquired {
                    fencing_token,
                    node,
                } => {
                    self.acquired += 1;
                    if self.acquired > 1 {
                        return Err("Acquired twice in one attempt".into());
                    }
                    // Judged against the directory as of the last thing the client
                    // heard: later changes may still be on their way.
                    let our_seq = seq_of(node);
                    let seen = self.world.at(self.world.seen_zxid);
                    match seen.iter().find(|n| n.name == *node) {
                        Some(ours) if ours.czxid != *fencing_token => {
                            return Err(format!(
                                "fencing token {fencing_token} is not our czxid {}",
                                ours.czxid
                            ));
                        }
                        None if self.lock.config().watch_own_node => {
                            return Err(format!("Acquired on {node}, which was deleted"));
                        }
                        _ => {}
                    }
                    if let Some(b) = seen.iter().find(|n| {
                        n.name != *node
                            && (seq_of(&n.name), n.name.as_str()) < (our_seq.clone(), node.as_str())
                            && blocks(self.kind, &n.name)
                            && contender::Contender::parse(&n.name).is_some()
                    }) {
                        return Err(format!("Acquired while lower blocker {} exists", b.name));
                    }
                    self.holding = true;
                    self.levels = 1;
                }
                e if e.ends_attempt() => {
                    self.finals += 1;
                    if self.finals > 1 {
                        return Err(format!("second final event {e:?}"));
                    }
                    self.holding = false;
                    if matches!(e, LockEvent::Released | LockEvent::Cancelled)
                        && self.world.alive
                        && !self.world.ours().is_empty()
                    {
                        let left: Vec<&String> =
                            self.world.ours().iter().map(|n| &n.name).collect();
                        return Err(format!("{e:?} reported while our nodes {left:?} exist"));
                    }
                }
                _ => {
                    if self.finals > 0 {
                        return Err(format!("{e:?} after the final event"));
                    }
                }
            }
        }
        Ok(())
    }

    /// The server reads the oldest request on the wire.
    fn serve_one(&mut self) {
        if self.world.wire.is_empty() {
            return;
        }
        let (op, req) = self.world.wire.remove(0);
        let (r, zxid) = self.world.apply(&req, op);
        self.note(format!("  server {op} {:?} -> {r:?}", req.op_code()));
        self.world.replies.push((op, Ok(r), zxid));
        for (op, ev) in core::mem::take(&mut self.world.immediate) {
            self.world.replies.push((op, Err(ev), zxid));
        }
    }

    /// The client receives the oldest reply (after any notification sent before it).
    fn deliver_one(&mut self) {
        if !self.world.connected {
            return;
        }
        if self.world.replies.is_empty() {
            return;
        }
        let (op, r, zxid) = self.world.replies.remove(0);
        self.world.seen_zxid = self.world.seen_zxid.max(zxid);
        match r {
            Ok(r) => self.lock.handle_reply(self.now, op, r),
            Err(ev) => {
                self.note(format!("  watch {op} {ev:?}"));
                self.lock.handle_watch(self.now, op, &ev);
            }
        }
    }

    fn disconnect(&mut self) {
        if !self.world.connected {
            return;
        }
        for (op, r) in self.world.drop_connection() {
            self.lock.handle_reply(self.now, op, r);
        }
        self.lock.handle_session(self.now, SessionChange::Suspended);
    }

    fn reconnect(&mut self, lag: Option<u8>) {
        if self.world.connected || !self.world.alive {
            return;
        }
        self.world.connected = true;
        if let Some(pick) = lag {
            // A follower that has the client's last zxid but not everything since.
            let seen = self.world.seen_zxid;
            let eligible: Vec<&View> = self
                .world
                .history
                .iter()
                .filter(|v| v.zxid >= seen && v.zxid < self.world.live.zxid)
                .collect();
            if !eligible.is_empty() {
                let v = eligible[usize::from(pick) % eligible.len()].clone();
                self.note(format!(
                    "  lagging follower at zxid {} (live {})",
                    v.zxid, self.world.live.zxid
                ));
                self.world.stale = Some(v);
            }
        }
        self.lock.handle_session(
            self.now,
            SessionChange::Reconnected {
                session_id: SESSION,
            },
        );
        // Then the session re-arms watches (events pending go out) and sends what waited.
        let fired = core::mem::take(&mut self.world.notify);
        self.world
            .replies
            .extend(fired.into_iter().map(|(op, ev, z)| (op, Err(ev), z)));
        let queued = core::mem::take(&mut self.world.queued);
        self.world.wire.extend(queued);
    }

    fn expire(&mut self) {
        if !self.world.alive {
            return;
        }
        self.world.alive = false;
        self.world.connected = false;
        let ours: Vec<String> = self.world.ours().iter().map(|n| n.name.clone()).collect();
        for n in ours {
            self.world.remove(&n);
        }
        let mut failed: Vec<OpId> = self
            .world
            .replies
            .drain(..)
            .filter(|r| r.1.is_ok())
            .map(|r| r.0)
            .collect();
        failed.extend(self.world.wire.drain(..).map(|r| r.0));
        failed.extend(self.world.queued.drain(..).map(|r| r.0));
        for op in failed {
            self.lock
                .handle_reply(self.now, op, Err(Error::SessionExpired));
        }
        self.world.watches.clear();
        self.world.notify.clear();
        self.lock.handle_session(self.now, SessionChange::Expired);
    }

    fn tick(&mut self, by: Duration) -> Result<(), String> {
        self.now = self.now + by;
        if self.lock.poll_timeout().is_some_and(|t| t <= self.now) {
            self.lock.handle_timeout(self.now);
            if self.lock.poll_timeout().is_some_and(|t| t <= self.now) {
                return Err("deadline not after now after handle_timeout".into());
            }
        }
        Ok(())
    }

    fn release_one(&mut self) {
        if self.levels > 0 {
            self.levels -= 1;
            let r = self.lock.release(self.now);
            self.note(format!("  user release -> {r:?}"));
        }
    }
}

fn req_path(r: &Request) -> String {
    match r {
        Request::Create2(c) | Request::CreateContainer(c) | Request::Create(c) => c.path.clone(),
        Request::Delete(d) => d.path.clone(),
        Request::GetChildren(g) | Request::GetData(g) | Request::Exists(g) => g.path.clone(),
        Request::Sync(p) => p.path.clone(),
        _ => String::new(),
    }
}

/// Runs one schedule; `Err` describes the broken invariant and the last steps taken.
pub fn run(schedule: &[u8]) -> Result<(), String> {
    let mut trace = Vec::new();
    run_traced(schedule, &mut trace).map_err(|e| {
        let from = trace.len().saturating_sub(400);
        format!("{e}\nlast steps:\n{}", trace[from..].join("\n"))
    })
}

fn run_traced(schedule: &[u8], trace: &mut Vec<String>) -> Result<(), String> {
    let mut input = schedule.iter().copied();
    let a = input.next().unwrap_or(0);
    let b = input.next().unwrap_or(0);
    let kind = match a % 3 {
        0 => LockKind::Exclusive,
        1 => LockKind::Read,
        _ => LockKind::Write,
    };
    let mut config = LockConfig::new(DIR, kind, ID);
    config.revocable = a & 4 != 0;
    config.reentrant = a & 8 != 0;
    config.watch_own_node = a & 16 == 0;
    let parents = match b % 8 {
        6 => Parents::ChrootMissing,
        7 => Parents::NoAuth,
        _ => Parents::Creatable,
    };
    let mut world = World {
        live: View {
            dir_exists: b & 8 == 0,
            nodes: Vec::new(),
            zxid: 1,
        },
        stale: None,
        history: Vec::new(),
        parents,
        seq: 0,
        connected: true,
        alive: true,
        seen_zxid: 1,
        wire: Vec::new(),
        replies: Vec::new(),
        queued: Vec::new(),
        watches: Vec::new(),
        notify: Vec::new(),
        graveyard: Vec::new(),
        immediate: Vec::new(),
        txn: None,
    };
    if world.live.dir_exists {
        // Lower contenders of another session, and perhaps a node with our prefix that
        // is not ours (it must never be adopted).
        for i in 0..(b >> 4) % 4 {
            let marker = match (a >> (5 + i)) & 3 {
                0 => "_c_o-__READ__",
                1 => "_c_o-__WRIT__",
                _ => "_c_o-lock-",
            };
            world.add(marker, OTHER);
        }
        if a & 128 != 0 {
            let prefix = format!(
                "{}{}",
                contender::protected_prefix(ID),
                match kind {
                    LockKind::Exclusive => contender::LOCK,
                    LockKind::Read => contender::READ,
                    LockKind::Write => contender::WRITE,
                    LockKind::Latch => contender::LATCH,
                    LockKind::Lease { .. } => contender::LEASE,
                }
            );
            world.add(&prefix, OTHER);
        }
        world.seen_zxid = world.live.zxid;
    }
    let mut run = Run {
        world,
        lock: Lock::new(config),
        kind,
        now: Instant::ZERO,
        finals: 0,
        acquired: 0,
        levels: 0,
        holding: false,
        trace: Vec::new(),
    };
    let result = drive(&mut run, &mut input);
    core::mem::swap(trace, &mut run.trace);
    result
}

fn drive(run: &mut Run, input: &mut impl Iterator<Item = u8>) -> Result<(), String> {
    run.lock.handle_session(
        run.now,
        SessionChange::Connected {
            session_id: SESSION,
        },
    );
    let deadline = match input.next().unwrap_or(0) % 4 {
        0 => Some(run.now), // try-lock
        1 => Some(run.now + Duration::from_millis(300)),
        _ => None,
    };
    run.note(format!("acquire deadline {deadline:?}"));
    let _ = run.lock.acquire(run.now, deadline);
    run.pump(false)?;

    while let Some(op) = input.next() {
        let arg = input.next().unwrap_or(0);
        run.note(format!("step {} arg {arg}", op % 16));
        match op % 16 {
            0..=3 => run.serve_one(),
            4..=6 => run.deliver_one(),
            7 => {
                // Applied, then the connection breaks before the reply arrives.
                run.serve_one();
                run.disconnect();
            }
            8 => run.disconnect(),
            9 => run.reconnect((arg & 1 == 1).then_some(arg >> 1)),
            10 => {
                // The session refuses the next request, or the server throttles one.
                if arg & 1 == 0 {
                    run.pump(true)?;
                } else if !run.world.wire.is_empty() {
                    let (op, _) = run.world.wire.remove(0);
                    run.world
                        .replies
                        .push((op, Ok(Err(Error::Server(ErrorCode::Throttled))), 0));
                }
            }
            11 => {
                // Other sessions: a new contender, or one leaves.
                if arg & 1 == 0 && run.world.live.dir_exists {
                    run.world.add("_c_n-lock-", OTHER);
                } else if let Some(n) = {
                    let others: Vec<&Node> = run
                        .world
                        .live
                        .nodes
                        .iter()
                        .filter(|n| n.owner == OTHER)
                        .collect();
                    let at = usize::from(arg >> 2) % others.len().max(1);
                    others.get(at).map(|n| n.name.clone())
                } {
                    // A holder (the lowest of all, a writer) may hand the lock on.
                    let lowest = run.world.live.nodes.iter().map(|n| seq_of(&n.name)).min();
                    let writer = contender::Contender::parse(&n).is_some_and(|c| c.is_writer());
                    if arg & 2 != 0 && writer && lowest == Some(seq_of(&n)) {
                        run.world.leave_granting(&n, arg & 8 != 0);
                    } else {
                        run.world.remove(&n);
                    }
                }
            }
            12 if arg & 2 != 0 => {
                // A revoker writes into another contender's node (a successor our grant
                // must then leave alone: its version is no longer 0).
                let others: Vec<String> = run
                    .world
                    .live
                    .nodes
                    .iter()
                    .filter(|n| n.owner == OTHER)
                    .map(|n| n.name.clone())
                    .collect();
                if let Some(n) = others.get(usize::from(arg >> 2) % others.len().max(1)) {
                    run.world
                        .set_data(&n.clone(), Bytes::from_static(b"__REVOKE__"));
                }
            }
            12 => {
                // An operator deletes our node, or a revoker writes `unlock` into it.
                let ours: Vec<String> = run.world.ours().iter().map(|n| n.name.clone()).collect();
                if let Some(n) = ours.first() {
                    if arg & 1 == 0 {
                        run.world.remove(n);
                    } else {
                        run.world.set_data(n, Bytes::from_static(b"unlock"));
                    }
                }
            }
            13 if arg > 240 => run.expire(),
            14 => {
                // The user: release a level, or re-enter a re-entrant hold.
                if arg & 1 == 0 {
                    run.release_one();
                } else if run.lock.config().reentrant && run.holding {
                    match run.lock.acquire(run.now, None) {
                        Acquire::Held { .. } => run.levels += 1,
                        Acquire::Pending | Acquire::Suspended { .. } => {
                            run.levels += 1; // joins; reconnect verification decides
                        }
                        other => run.note(format!("  re-entry -> {other:?}")),
                    }
                }
            }
            _ => run.tick(Duration::from_millis(u64::from(arg) * 4))?,
        }
        run.pump(false)?;
    }
    settle(run)
}

/// Faults stop; the world behaves. The attempt must end, and leave nothing behind.
/// Sends what the lock wants, and serves and delivers until nothing is on its way.
fn exchange(run: &mut Run) -> Result<(), String> {
    run.pump(false)?;
    for _ in 0..64 {
        if run.world.wire.is_empty() && run.world.replies.is_empty() && run.world.notify.is_empty()
        {
            break;
        }
        run.serve_one();
        run.deliver_one();
        run.pump(false)?;
    }
    Ok(())
}

fn settle(run: &mut Run) -> Result<(), String> {
    run.note("settle".into());
    for round in 0..400 {
        if run.world.alive && !run.world.connected {
            run.reconnect(None);
        }
        exchange(run)?;
        if run.lock.is_done() {
            break;
        }
        // Everything sent has been answered and told, and what waited for a backoff (a
        // refused read, say) has gone and been answered too: a holder whose node is
        // gone knows it (with the own-node watch, or the directory watch standing in).
        if round == 0 {
            for _ in 0..64 {
                if run.lock.poll_timeout().is_none() || !run.lock.is_held() {
                    break;
                }
                run.tick(Duration::from_millis(50))?;
                exchange(run)?;
            }
        }
        if round == 0
            && run.world.alive
            && run.world.connected
            && run.lock.config().watch_own_node
            && run.lock.is_held()
            && run.lock.poll_timeout().is_none()
        {
            if let Some(node) = run.lock.node() {
                if !run.world.live.nodes.iter().any(|n| n.name == node) {
                    return Err(format!("a holder did not notice that {node} was deleted"));
                }
            }
        }
        // A holder finishes its work (every guard goes); other contenders leave, one
        // per round.
        while run.levels > 0 {
            run.release_one();
        }
        if !run.holding && round % 2 == 1 {
            if let Some(n) = run
                .world
                .live
                .nodes
                .iter()
                .find(|n| n.owner == OTHER)
                .map(|n| n.name.clone())
            {
                run.world.remove(&n);
            }
        }
        run.pump(false)?;
        run.tick(Duration::from_millis(50))?;
        run.pump(false)?;
    }
    if run.finals != 1 {
        return Err(format!(
            "liveness: the attempt did not end ({} final events) once faults stopped",
            run.finals
        ));
    }
    if !run.lock.is_done() {
        return Err("liveness: the machine is not done after its final event settled".into());
    }
    let left: Vec<String> = run.world.ours().iter().map(|n| n.name.clone()).collect();
    if !left.is_empty() {
        return Err(format!("cleanliness: nodes of ours left behind: {left:?}"));
    }
    Ok(())
}
