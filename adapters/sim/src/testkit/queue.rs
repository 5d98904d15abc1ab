//! Queue [`Producer`]s and [`Consumer`]s against a small model server, driven by bytes
//! (proptest and libFuzzer share it). Each machine has its own session. The first byte
//! chooses one or two producers, one to three consumers, the delivery (at most once or
//! at least once), the item format, and whether the queue and side directories exist;
//! then a schedule of steps:
//!
//! * the server answers the oldest request of a machine, or answers it and the
//!   connection breaks before the reply arrives (applied, reply lost — a lost put or
//!   take reply), or the connection breaks; the session refuses a request
//!   (`Overloaded`, an immediate error reply) or the server throttles one;
//! * a reconnect (after an expiry: a new session); a session expires (its ephemeral
//!   markers and claims go, its requests are never answered); time passes;
//! * the users: put, take (with and without deadline), complete or release a held item,
//!   close.
//!
//! Safety, after every step: no item is created twice (a retried put never duplicates)
//! and a producer's items land in put order; an item is deleted only by a transaction
//! that bumps the deleter's consumer marker (at most once) or deletes the deleter's
//! own claim on it (at least once); at most once, an item is delivered at most once and
//! only to the session that deleted it; at least once, never two live holders of one
//! item, a live holder's claim and item are on the server, an item is completed at
//! most once and by the session that deleted it; one final event per machine and
//! nothing after it; `poll_timeout` never in the past after `handle_timeout`.
//!
//! Liveness, at the end: faults stop, every session comes back, consumers keep taking
//! and completing (a consumer that was closed is replaced). Within a bounded number of
//! rounds every put is answered and the queue holds no item and no claim. Then every
//! machine closes: each reports `Closed` once and is done, and the side directory is
//! empty. Accounting: a put reported `Put` created its item (under the name reported), a
//! put failed without `may_have_applied` created none, and every item was delivered
//! (completed) exactly once — unless the session that deleted it expired with that take
//! or completion in doubt.

use alloc::collections::BTreeMap;
use alloc::format;
use alloc::string::{String, ToString};
use alloc::vec::Vec;
use bytes::Bytes;
use core::time::Duration;

use zk_recipes::error::Error;
use zk_recipes::proto::*;
use zk_recipes::recipe::queue::{
    meta_dir, parse_item, Consumer, ConsumerConfig, ConsumerEvent, Delivery, Format, Producer,
    ProducerConfig, ProducerEvent, PutId, TakeId, CLAIM_PREFIX,
};
use zk_recipes::recipe::{OpId, Recipe, SessionChange};
use zk_recipes::session::WatchEvent;
use zk_recipes::time::Instant;

const DIR: &str = "/q";

#[derive(Clone, Debug)]
struct Node {
    data: Bytes,
    owner: i64,
    version: i32,
}

fn parent(path: &str) -> &str {
    match path.rfind('/') {
        Some(0) => "/",
        Some(i) => &path[..i],
        None => "/",
    }
}

fn name_of(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or("")
}

/// What a multi changed, applied only if it commits.
enum Effect {
    Created(String, Bytes),
    Deleted(String, Node),
    Bumped(String),
}

/// What the server writes to a connection: a reply, or a watch notification.
type Outbound = Result<Result<Response, Error>, WatchEvent>;

// A handful of machines per run: boxing them would buy nothing.
#[allow(clippy::large_enum_variant)]
enum Kind {
    P(Producer),
    C(Consumer),
}

struct Machine {
    kind: Kind,
    session: i64,
    alive: bool,
    connected: bool,
    wire: Vec<(OpId, Request)>,
    replies: Vec<(OpId, Outbound)>,
    queued: Vec<(OpId, Request)>,
    notify: Vec<(OpId, WatchEvent)>,
    finals: u32,
    closing: bool,
    /// Producer: puts not answered yet → index in `Run::puts`.
    outstanding: BTreeMap<PutId, usize>,
    /// Consumer: the take waiting, items held, completions asked (name, data, session).
    take: Option<TakeId>,
    held: Vec<(String, Bytes)>,
    completing: Vec<(String, Bytes, i64)>,
}

impl Machine {
    fn r(&mut self) -> &mut dyn RecipeOps {
        match &mut self.kind {
            Kind::P(p) => p,
            Kind::C(c) => c,
        }
    }
}

/// The recipe methods the harness needs, on either machine.
trait RecipeOps {
    fn poll_request(&mut self) -> Option<(OpId, Request)>;
    fn handle_reply(&mut self, now: Instant, op: OpId, result: Result<Response, Error>);
    fn handle_watch(&mut self, now: Instant, op: OpId, event: &WatchEvent);
    fn handle_session(&mut self, now: Instant, change: SessionChange);
    fn handle_timeout(&mut self, now: Instant);
    fn poll_timeout(&self) -> Option<Instant>;
    fn is_done(&self) -> bool;
}

impl<R: Recipe> RecipeOps for R {
    fn poll_request(&mut self) -> Option<(OpId, Request)> {
        Recipe::poll_request(self)
    }
    fn handle_reply(&mut self, now: Instant, op: OpId, result: Result<Response, Error>) {
        Recipe::handle_reply(self, now, op, result)
    }
    fn handle_watch(&mut self, now: Instant, op: OpId, event: &WatchEvent) {
        Recipe::handle_watch(self, now, op, event)
    }
    fn handle_session(&mut self, now: Instant, change: SessionChange) {
        Recipe::handle_session(self, now, change)
    }
    fn handle_timeout(&mut self, now: Instant) {
        Recipe::handle_timeout(self, now)
    }
    fn poll_timeout(&self) -> Option<Instant> {
        Recipe::poll_timeout(self)
    }
    fn is_done(&self) -> bool {
        Recipe::is_done(self)
    }
}

/// What became of a put.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Outcome {
    Pending,
    Put(Option<String>),
    Failed(bool),
}

#[derive(Clone, Debug)]
struct Seen {
    name: String,
    deleted_by: Option<i64>,
    delivered: u32,
    completed: u32,
}

struct Run {
    delivery: Delivery,
    format: Format,
    meta: String,
    tree: BTreeMap<String, Node>,
    seq: BTreeMap<String, u32>,
    zxid: i64,
    /// Child watches: (path, machine, session, op).
    watches: Vec<(String, usize, i64, OpId)>,
    ms: Vec<Machine>,
    next_session: i64,
    now: Instant,
    puts: Vec<(Bytes, Outcome)>,
    put_count: u32,
    seen: BTreeMap<Bytes, Seen>,
    /// Per producer: highest put number landed.
    order: BTreeMap<usize, u64>,
    /// Sessions that expired with a take or completion in doubt.
    doubts: Vec<i64>,
    violation: Option<String>,
    trace: Vec<String>,
}

impl Run {
    fn note(&mut self, line: impl FnOnce() -> String) {
        if self.trace.len() == 300 {
            self.trace.remove(0);
        }
        self.trace.push(line());
    }

    fn fail(&mut self, what: String) {
        if self.violation.is_none() {
            self.violation = Some(what);
        }
    }

    fn fire(&mut self, path: &str, t: EventType) {
        let mut i = 0;
        while i < self.watches.len() {
            if self.watches[i].0 != path {
                i += 1;
                continue;
            }
            let (p, m, sid, op) = self.watches.remove(i);
            let ev = WatchEvent {
                event_type: t,
                path: p,
            };
            let mach = &mut self.ms[m];
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

    fn exists(tree: &BTreeMap<String, Node>, path: &str) -> bool {
        path == "/" || tree.contains_key(path)
    }

    /// One write on `tree` (a multi's copy or the tree itself).
    fn write_op(
        &mut self,
        tree: &mut BTreeMap<String, Node>,
        seq: &mut BTreeMap<String, u32>,
        sid: i64,
        op: &MultiOp,
        effects: &mut Vec<Effect>,
    ) -> Result<MultiResult, ErrorCode> {
        match op {
            MultiOp::CreateTtl(_) => Err(ErrorCode::Unimplemented),
            MultiOp::Create(c) | MultiOp::Create2(c) | MultiOp::CreateContainer(c) => {
                let p = parent(&c.path).to_string();
                if !Self::exists(tree, &p) {
                    return Err(ErrorCode::NoNode);
                }
                let mode = CreateMode::from_i32(c.flags).unwrap_or(CreateMode::Persistent);
                let counter = seq.entry(p).or_insert(0);
                let n = *counter;
                *counter += 1;
                let path = if matches!(
                    mode,
                    CreateMode::PersistentSequential | CreateMode::EphemeralSequential
                ) {
                    format!("{}{:010}", c.path, n)
                } else {
                    c.path.clone()
                };
                if tree.contains_key(&path) {
                    return Err(ErrorCode::NodeExists);
                }
                let owner = if matches!(
                    mode,
                    CreateMode::Ephemeral | CreateMode::EphemeralSequential
                ) {
                    sid
                } else {
                    0
                };
                tree.insert(
                    path.clone(),
                    Node {
                        data: c.data.clone(),
                        owner,
                        version: 0,
                    },
                );
                effects.push(Effect::Created(path.clone(), c.data.clone()));
                Ok(MultiResult::Create(path))
            }
            MultiOp::Delete(d) => {
                let Some(node) = tree.get(&d.path) else {
                    return Err(ErrorCode::NoNode);
                };
                if d.version != -1 && d.version != node.version {
                    return Err(ErrorCode::BadVersion);
                }
                if tree.keys().any(|k| parent(k) == d.path) {
                    return Err(ErrorCode::NotEmpty);
                }
                let node = tree.remove(&d.path).unwrap_or(Node {
                    data: Bytes::new(),
                    owner: 0,
                    version: 0,
                });
                effects.push(Effect::Deleted(d.path.clone(), node));
                Ok(MultiResult::Delete)
            }
            MultiOp::SetData(s) => {
                let Some(node) = tree.get_mut(&s.path) else {
                    return Err(ErrorCode::NoNode);
                };
                if s.version != -1 && s.version != node.version {
                    return Err(ErrorCode::BadVersion);
                }
                node.version += 1;
                node.data = s.data.clone();
                let stat = Stat {
                    version: node.version,
                    ephemeral_owner: node.owner,
                    ..Stat::default()
                };
                effects.push(Effect::Bumped(s.path.clone()));
                Ok(MultiResult::SetData(stat))
            }
            MultiOp::Check(c) => match tree.get(&c.path) {
                Some(n) if c.version == -1 || c.version == n.version => Ok(MultiResult::Check),
                Some(_) => Err(ErrorCode::BadVersion),
                None => Err(ErrorCode::NoNode),
            },
        }
    }

    /// A committed write: watches, and the item bookkeeping and checks.
    fn commit(&mut self, m: usize, sid: i64, effects: Vec<Effect>) {
        self.zxid += 1;
        // Items deleted here: by whom, and did the deleter follow the protocol?
        let bumped_marker = effects.iter().any(|e| match e {
            Effect::Bumped(p) => {
                parent(p) == self.meta
                    && name_of(p).starts_with("c-")
                    && self.tree.get(p).is_some_and(|n| n.owner == sid)
            }
            _ => false,
        });
        let mut came: Vec<(i64, String, Bytes)> = Vec::new();
        for e in &effects {
            match e {
                Effect::Deleted(path, node) if parent(path) == DIR => {
                    let name = name_of(path);
                    let ok = match self.delivery {
                        Delivery::AtMostOnce => bumped_marker,
                        Delivery::AtLeastOnce => {
                            let claim = format!("{}/{CLAIM_PREFIX}{name}", self.meta);
                            effects.iter().any(|x| {
                                matches!(x, Effect::Deleted(p, n) if *p == claim && n.owner == sid)
                            })
                        }
                    };
                    if !ok {
                        self.fail(format!(
                            "m{m} (session 0x{sid:x}) deleted {name} outside the protocol"
                        ));
                    }
                    if let Some(s) = self.seen.get_mut(&node.data) {
                        s.deleted_by = Some(sid);
                    }
                }
                Effect::Created(path, data) if parent(path) == DIR => {
                    let name = name_of(path).to_string();
                    let seq = parse_item(self.format, &name).map_or(-1, |k| k.sequence);
                    came.push((seq, name, data.clone()));
                }
                _ => {}
            }
        }
        came.sort();
        for (_, name, data) in came {
            if let Some(other) = self.seen.get(&data) {
                let other = other.name.clone();
                self.fail(format!("duplicate item {name}: the data of {other}"));
                continue;
            }
            // Data: "<machine>.<put>".
            let text = String::from_utf8_lossy(&data).to_string();
            if let Some((pm, k)) = text.split_once('.') {
                let (pm, k) = (pm.parse().unwrap_or(0), k.parse().unwrap_or(0));
                let last = self.order.entry(pm).or_insert(0);
                if k <= *last {
                    let last = *last;
                    self.fail(format!("producer m{pm}: put {k} landed after put {last}"));
                }
                self.order.insert(pm, k);
            }
            self.seen.insert(
                data,
                Seen {
                    name,
                    deleted_by: None,
                    delivered: 0,
                    completed: 0,
                },
            );
        }
        for e in effects {
            match e {
                Effect::Created(p, _) => {
                    self.fire(parent(&p), EventType::NodeChildrenChanged);
                }
                Effect::Deleted(p, _) => {
                    self.fire(&p, EventType::NodeDeleted);
                    self.fire(parent(&p), EventType::NodeChildrenChanged);
                }
                Effect::Bumped(_) => {}
            }
        }
    }

    /// Applies one request of machine `m` as the server would.
    fn apply(&mut self, m: usize, op: OpId, req: &Request) -> Result<Response, Error> {
        let sid = self.ms[m].session;
        let write = |c: &CreateRequest, container: bool| {
            let mut c = c.clone();
            if container {
                c.flags = CreateMode::Container.to_i32();
            }
            MultiOp::Create(c)
        };
        let single = match req {
            Request::Create(c) | Request::Create2(c) => Some(write(c, false)),
            Request::CreateContainer(c) => Some(write(c, true)),
            Request::Delete(d) => Some(MultiOp::Delete(d.clone())),
            Request::SetData(s) => Some(MultiOp::SetData(s.clone())),
            _ => None,
        };
        if let Some(w) = single {
            let mut tree = self.tree.clone();
            let mut seq = self.seq.clone();
            let mut effects = Vec::new();
            let r = self.write_op(&mut tree, &mut seq, sid, &w, &mut effects);
            return match r {
                Ok(r) => {
                    self.tree = tree;
                    self.seq = seq;
                    self.commit(m, sid, effects);
                    Ok(match r {
                        MultiResult::Create(p) => Response::Path(p),
                        MultiResult::SetData(s) => Response::Stat(s),
                        _ => Response::Empty,
                    })
                }
                Err(code) => {
                    self.zxid += 1;
                    Err(Error::Server(code))
                }
            };
        }
        match req {
            Request::Multi(ops) => {
                let mut tree = self.tree.clone();
                let mut seq = self.seq.clone();
                let mut effects = Vec::new();
                let mut results = Vec::new();
                let mut failed = None;
                for (i, op) in ops.iter().enumerate() {
                    match self.write_op(&mut tree, &mut seq, sid, op, &mut effects) {
                        Ok(r) => results.push(r),
                        Err(code) => {
                            failed = Some((i, code));
                            break;
                        }
                    }
                }
                match failed {
                    None => {
                        self.tree = tree;
                        self.seq = seq;
                        self.commit(m, sid, effects);
                        Ok(Response::Multi(results))
                    }
                    Some((at, code)) => {
                        self.zxid += 1;
                        Ok(Response::Multi(
                            (0..ops.len())
                                .map(|i| {
                                    MultiResult::Error(match i.cmp(&at) {
                                        core::cmp::Ordering::Less => ErrorCode::Ok,
                                        core::cmp::Ordering::Equal => code,
                                        core::cmp::Ordering::Greater => {
                                            ErrorCode::RuntimeInconsistency
                                        }
                                    })
                                })
                                .collect(),
                        ))
                    }
                }
            }
            Request::MultiRead(ops) => Ok(Response::Multi(
                ops.iter()
                    .map(|o| match o {
                        ReadOp::GetData(g) => match self.tree.get(&g.path) {
                            Some(n) => MultiResult::GetData {
                                data: n.data.clone(),
                                stat: Stat {
                                    version: n.version,
                                    ephemeral_owner: n.owner,
                                    ..Stat::default()
                                },
                            },
                            None => MultiResult::Error(ErrorCode::NoNode),
                        },
                        ReadOp::GetChildren(g) => MultiResult::GetChildren(self.children(&g.path)),
                    })
                    .collect(),
            )),
            Request::GetChildren(g) | Request::GetChildren2(g) => {
                if !Self::exists(&self.tree, &g.path) {
                    return Err(Error::Server(ErrorCode::NoNode));
                }
                if g.watch {
                    self.watches.push((g.path.clone(), m, sid, op));
                }
                Ok(Response::Children(self.children(&g.path)))
            }
            Request::Exists(g) | Request::GetData(g) => match self.tree.get(&g.path) {
                Some(n) => {
                    let stat = Stat {
                        version: n.version,
                        ephemeral_owner: n.owner,
                        ..Stat::default()
                    };
                    if matches!(req, Request::Exists(_)) {
                        Ok(Response::Stat(stat))
                    } else {
                        Ok(Response::Data {
                            data: n.data.clone(),
                            stat,
                        })
                    }
                }
                None => Err(Error::Server(ErrorCode::NoNode)),
            },
            Request::Sync(p) => Ok(Response::Path(p.path.clone())),
            _ => Err(Error::Server(ErrorCode::Unimplemented)),
        }
    }

    fn children(&self, path: &str) -> Vec<String> {
        self.tree
            .keys()
            .filter(|k| parent(k) == path && k.as_str() != path)
            .map(|k| name_of(k).to_string())
            .collect()
    }

    /// Moves machine `m`'s requests out (refusing the first if asked), then its events.
    fn pump(&mut self, m: usize, refuse: bool) -> Result<(), String> {
        let mut refused = false;
        while let Some((op, req)) = self.ms[m].r().poll_request() {
            self.note(|| format!("  m{m} sent {op} {req:?}"));
            let now = self.now;
            let mach = &mut self.ms[m];
            if mach.finals > 0 {
                return Err(format!("m{m}: request {req:?} after its final event"));
            }
            if !mach.alive {
                mach.r().handle_reply(now, op, Err(Error::SessionExpired));
            } else if refuse && !refused {
                refused = true;
                mach.r().handle_reply(now, op, Err(Error::Overloaded));
            } else if mach.connected {
                mach.wire.push((op, req));
            } else {
                mach.queued.push((op, req));
            }
        }
        self.events(m)
    }

    fn pump_all(&mut self) -> Result<(), String> {
        for _ in 0..2 {
            for m in 0..self.ms.len() {
                self.pump(m, false)?;
            }
        }
        self.check()
    }

    fn events(&mut self, m: usize) -> Result<(), String> {
        loop {
            let sid = self.ms[m].session;
            let event = match &mut self.ms[m].kind {
                Kind::P(p) => p.poll_event().map(Ok),
                Kind::C(c) => c.poll_event().map(Err),
            };
            let Some(event) = event else {
                return Ok(());
            };
            self.note(|| format!("  m{m} event {event:?}"));
            if self.ms[m].finals > 0 {
                return Err(format!("m{m}: {event:?} after its final event"));
            }
            match event {
                Ok(e) => self.on_producer(m, e),
                Err(e) => self.on_consumer(m, sid, e)?,
            }
        }
    }

    fn on_producer(&mut self, m: usize, e: ProducerEvent) {
        let mach = &mut self.ms[m];
        match e {
            ProducerEvent::Put { id, node } => {
                if let Some(at) = mach.outstanding.remove(&id) {
                    self.puts[at].1 = Outcome::Put(node);
                }
            }
            ProducerEvent::PutFailed {
                id,
                may_have_applied,
                ..
            } => {
                if let Some(at) = mach.outstanding.remove(&id) {
                    self.puts[at].1 = Outcome::Failed(may_have_applied);
                }
            }
            ProducerEvent::Closed => {
                mach.finals += 1;
                if !mach.outstanding.is_empty() {
                    self.fail(format!("m{m}: Closed with puts unanswered"));
                }
            }
            _ => self.fail(format!("m{m}: unexpected producer event {e:?}")),
        }
    }

    fn on_consumer(&mut self, m: usize, sid: i64, e: ConsumerEvent) -> Result<(), String> {
        let alo = self.delivery == Delivery::AtLeastOnce;
        match e {
            ConsumerEvent::Taken { take, items } => {
                if Some(take) == self.ms[m].take {
                    self.ms[m].take = None;
                }
                for it in items {
                    let Some(s) = self.seen.get_mut(&it.data) else {
                        return Err(format!("m{m}: delivered {it:?} which never existed"));
                    };
                    if s.name != it.name {
                        return Err(format!("m{m}: delivered {it:?}, it was {}", s.name));
                    }
                    s.delivered += 1;
                    if !alo {
                        if s.delivered > 1 {
                            return Err(format!("m{m}: {} delivered twice", it.name));
                        }
                        if s.deleted_by != Some(sid) {
                            return Err(format!(
                                "m{m} (session 0x{sid:x}): delivered {} deleted by {:?}",
                                it.name, s.deleted_by
                            ));
                        }
                    } else {
                        self.ms[m].held.push((it.name, it.data));
                    }
                }
            }
            ConsumerEvent::TimedOut { take } => {
                if Some(take) == self.ms[m].take {
                    self.ms[m].take = None;
                }
            }
            ConsumerEvent::TakeFailed { take, .. } => {
                self.doubts.push(sid);
                if Some(take) == self.ms[m].take {
                    self.ms[m].take = None;
                }
            }
            ConsumerEvent::Completed { item } => {
                let mach = &mut self.ms[m];
                let Some(at) = mach.completing.iter().position(|c| c.0 == item) else {
                    return Err(format!("m{m}: Completed {item} never completed"));
                };
                let (_, data, _) = mach.completing.remove(at);
                let Some(s) = self.seen.get_mut(&data) else {
                    return Err(format!("m{m}: completed {item} which never existed"));
                };
                s.completed += 1;
                if s.completed > 1 || s.deleted_by != Some(sid) {
                    return Err(format!(
                        "m{m} (session 0x{sid:x}): Completed {item} (completed {} times, \
                         deleted by {:?})",
                        s.completed, s.deleted_by
                    ));
                }
            }
            ConsumerEvent::ClaimLost { item } => {
                let mach = &mut self.ms[m];
                mach.held.retain(|h| h.0 != item);
                if let Some(at) = mach.completing.iter().position(|c| c.0 == item) {
                    let (_, _, s) = mach.completing.remove(at);
                    self.doubts.push(s);
                }
            }
            ConsumerEvent::Released { .. } => {}
            ConsumerEvent::CompleteFailed { item, error } => {
                return Err(format!("m{m}: CompleteFailed {{ {item}, {error:?} }}"));
            }
            ConsumerEvent::Closed => {
                let mach = &mut self.ms[m];
                mach.finals += 1;
                mach.take = None;
                mach.held.clear();
            }
            _ => return Err(format!("m{m}: unexpected consumer event {e:?}")),
        }
        Ok(())
    }

    /// Invariants over every machine and the tree.
    fn check(&mut self) -> Result<(), String> {
        if let Some(v) = self.violation.take() {
            return Err(v);
        }
        if self.delivery != Delivery::AtLeastOnce {
            return Ok(());
        }
        let mut holders: BTreeMap<&str, usize> = BTreeMap::new();
        for (m, mach) in self.ms.iter().enumerate() {
            if !mach.alive {
                continue;
            }
            for (name, data) in &mach.held {
                if let Some(other) = holders.insert(name, m) {
                    return Err(format!("two live holders of {name}: m{other} and m{m}"));
                }
                let claim = self
                    .tree
                    .get(&format!("{}/{CLAIM_PREFIX}{name}", self.meta))
                    .map(|n| n.owner);
                let item = self.tree.get(&format!("{DIR}/{name}")).map(|n| &n.data);
                if claim != Some(mach.session) || item != Some(data) {
                    return Err(format!(
                        "m{m} holds {name}: claim owner {claim:?}, item {item:?}"
                    ));
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
        self.note(|| format!("  server m{m} {op} -> {r:?}"));
        self.ms[m].replies.push((op, Ok(r)));
    }

    fn deliver_one(&mut self, m: usize) {
        let now = self.now;
        let mach = &mut self.ms[m];
        if !mach.connected || mach.replies.is_empty() {
            return;
        }
        let (op, r) = mach.replies.remove(0);
        match r {
            Ok(r) => mach.r().handle_reply(now, op, r),
            Err(ev) => mach.r().handle_watch(now, op, &ev),
        }
    }

    fn disconnect(&mut self, m: usize) {
        let now = self.now;
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
            mach.r().handle_reply(now, op, Err(Error::ConnectionLoss));
        }
        mach.r().handle_session(now, SessionChange::Suspended);
    }

    fn reconnect(&mut self, m: usize) {
        let now = self.now;
        if self.ms[m].connected {
            return;
        }
        if !self.ms[m].alive {
            self.next_session += 1;
            let sid = self.next_session;
            let mach = &mut self.ms[m];
            mach.session = sid;
            mach.alive = true;
            mach.connected = true;
            mach.r()
                .handle_session(now, SessionChange::Connected { session_id: sid });
            return;
        }
        let mach = &mut self.ms[m];
        mach.connected = true;
        let sid = mach.session;
        mach.r()
            .handle_session(now, SessionChange::Reconnected { session_id: sid });
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
            .iter()
            .filter(|(_, n)| n.owner == sid)
            .map(|(p, _)| p.clone())
            .collect();
        let mut effects = Vec::new();
        for p in ours {
            if let Some(node) = self.tree.remove(&p) {
                effects.push(Effect::Deleted(p, node));
            }
        }
        // Only ephemeral side-directory nodes go (items are persistent).
        self.commit(m, sid, effects);
        let now = self.now;
        let mach = &mut self.ms[m];
        mach.alive = false;
        mach.connected = false;
        mach.wire.clear();
        mach.replies.clear();
        mach.queued.clear();
        mach.notify.clear();
        mach.r().handle_session(now, SessionChange::Expired);
    }

    fn tick(&mut self, by: Duration) -> Result<(), String> {
        self.now = self.now + by;
        let now = self.now;
        for m in 0..self.ms.len() {
            let r = self.ms[m].r();
            if r.poll_timeout().is_some_and(|t| t <= now) {
                r.handle_timeout(now);
                if r.poll_timeout().is_some_and(|t| t <= now) {
                    let state = match &self.ms[m].kind {
                        Kind::P(p) => format!("{p:?}"),
                        Kind::C(c) => format!("{c:?}"),
                    };
                    return Err(format!(
                        "m{m}: deadline not after now after handle_timeout: {state}"
                    ));
                }
            }
        }
        Ok(())
    }

    /// A user command on machine `m`.
    fn user(&mut self, m: usize, what: u8) {
        let now = self.now;
        if self.ms[m].finals > 0 || self.ms[m].closing {
            return;
        }
        if what % 8 == 7 {
            self.note(|| format!("  m{m} user close"));
            let mach = &mut self.ms[m];
            mach.closing = true;
            mach.take = None;
            mach.held.clear();
            match &mut mach.kind {
                Kind::P(p) => p.close(now),
                Kind::C(c) => c.close(now),
            }
            return;
        }
        let is_producer = matches!(self.ms[m].kind, Kind::P(_));
        match is_producer {
            true => {
                for _ in 0..1 + what % 3 {
                    self.put_count += 1;
                    let data = Bytes::from(format!("{m}.{}", self.put_count));
                    let priority = u16::from(what >> 5);
                    let Kind::P(p) = &mut self.ms[m].kind else {
                        return;
                    };
                    let r = p.put_with_priority(now, data.clone(), priority);
                    self.note(|| format!("  m{m} put {data:?} -> {r:?}"));
                    if let Ok(id) = r {
                        self.ms[m].outstanding.insert(id, self.puts.len());
                        self.puts.push((data, Outcome::Pending));
                    }
                }
            }
            false => {
                let held = self.ms[m].held.len();
                if what % 8 >= 4 && held > 0 {
                    // Complete (or release) a held item.
                    let (name, data) = self.ms[m].held.remove(usize::from(what >> 4) % held);
                    let sid = self.ms[m].session;
                    let Kind::C(c) = &mut self.ms[m].kind else {
                        return;
                    };
                    let r = if what % 8 == 6 {
                        c.release(now, &name)
                    } else {
                        let r = c.complete(now, &name);
                        if r.is_ok() {
                            self.ms[m].completing.push((name.clone(), data, sid));
                        }
                        r
                    };
                    self.note(|| format!("  m{m} settle {name} ({}) -> {r:?}", what % 8));
                } else if self.ms[m].take.is_none() {
                    let deadline = match what % 4 {
                        0 => None,
                        1 => Some(now),
                        _ => Some(now + Duration::from_millis(u64::from(what))),
                    };
                    let max = 1 + usize::from(what >> 6);
                    let Kind::C(c) = &mut self.ms[m].kind else {
                        return;
                    };
                    let t = c.take(now, max, deadline);
                    self.note(|| format!("  m{m} take {max} until {deadline:?} -> {t}"));
                    self.ms[m].take = Some(t);
                }
            }
        }
    }

    fn round(&mut self) -> Result<(), String> {
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

    fn drained(&self) -> Result<(), String> {
        let items: Vec<&String> = self.tree.keys().filter(|k| parent(k) == DIR).collect();
        let claims: Vec<&String> = self
            .tree
            .keys()
            .filter(|k| parent(k) == self.meta && name_of(k).starts_with(CLAIM_PREFIX))
            .collect();
        let pending = self.puts.iter().filter(|p| p.1 == Outcome::Pending).count();
        if items.is_empty() && claims.is_empty() && pending == 0 {
            Ok(())
        } else {
            Err(format!(
                "items {items:?}, claims {claims:?}, {pending} puts unanswered"
            ))
        }
    }
}

/// Counts of one run.
#[derive(Clone, Copy, Debug, Default)]
pub struct Stats {
    /// Items that existed.
    pub items: usize,
    /// Items delivered (counting re-deliveries).
    pub delivered: usize,
    /// Items lost with a session that expired holding them in doubt.
    pub lost: usize,
}

/// Runs one schedule; `Err` describes the broken invariant and the last steps taken.
pub fn run(schedule: &[u8]) -> Result<Stats, String> {
    let mut trace = Vec::new();
    run_traced(schedule, &mut trace).map_err(|e| {
        let from = trace.len().saturating_sub(300);
        format!("{e}\nlast steps:\n{}", trace[from..].join("\n"))
    })
}

fn run_traced(schedule: &[u8], trace: &mut Vec<String>) -> Result<Stats, String> {
    let mut input = schedule.iter().copied();
    let a = input.next().unwrap_or(0);
    let producers = 1 + usize::from(a & 1);
    let consumers = 1 + usize::from((a >> 1) % 3);
    let delivery = if a & 8 == 0 {
        Delivery::AtMostOnce
    } else {
        Delivery::AtLeastOnce
    };
    let format = if a & 16 == 0 {
        Format::Fifo
    } else {
        Format::Priority
    };
    let meta = meta_dir(DIR);
    let mut tree = BTreeMap::new();
    let dir = Node {
        data: Bytes::new(),
        owner: 0,
        version: 0,
    };
    if a & 32 == 0 {
        tree.insert(DIR.to_string(), dir.clone());
    }
    if a & 64 == 0 {
        tree.insert(meta.clone(), dir);
    }
    let mut ms = Vec::new();
    for i in 0..producers + consumers {
        let id = format!("m{i}");
        let kind = if i < producers {
            let mut c = ProducerConfig::new(DIR, &id);
            c.format = format;
            c.max_batch = 1 + i % 3;
            c.max_batches_in_flight = 1 + (usize::from(a >> 7) + i) % 3;
            Kind::P(Producer::new(c))
        } else {
            let mut c = ConsumerConfig::new(DIR, &id);
            c.format = format;
            c.delivery = delivery;
            c.spread = i as u64 * 3;
            Kind::C(Consumer::new(c))
        };
        ms.push(Machine {
            kind,
            session: 0x100 + i as i64,
            alive: true,
            connected: true,
            wire: Vec::new(),
            replies: Vec::new(),
            queued: Vec::new(),
            notify: Vec::new(),
            finals: 0,
            closing: false,
            outstanding: BTreeMap::new(),
            take: None,
            held: Vec::new(),
            completing: Vec::new(),
        });
    }
    let mut run = Run {
        delivery,
        format,
        meta,
        tree,
        seq: BTreeMap::new(),
        zxid: 1,
        watches: Vec::new(),
        ms,
        next_session: 0x1000,
        now: Instant::ZERO,
        puts: Vec::new(),
        put_count: 0,
        seen: BTreeMap::new(),
        order: BTreeMap::new(),
        doubts: Vec::new(),
        violation: None,
        trace: Vec::new(),
    };
    let result = drive(&mut run, &mut input);
    core::mem::swap(trace, &mut run.trace);
    result
}

fn drive(run: &mut Run, input: &mut impl Iterator<Item = u8>) -> Result<Stats, String> {
    for m in 0..run.ms.len() {
        let sid = run.ms[m].session;
        let now = run.now;
        run.ms[m]
            .r()
            .handle_session(now, SessionChange::Connected { session_id: sid });
        run.user(m, 0);
    }
    run.pump_all()?;
    let n = run.ms.len();
    while let Some(op) = input.next() {
        let arg = input.next().unwrap_or(0);
        let m = usize::from(arg) % n;
        run.note(|| format!("step {} m{m} arg {arg}", op % 16));
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
            12 | 13 => run.user(m, arg >> 2),
            14 if arg >= 224 => run.user(m, 7),
            _ => run.tick(Duration::from_millis(u64::from(arg) * 4))?,
        }
        run.pump_all()?;
    }
    settle(run)
}

/// Faults stop; consumers take and complete until everything put is taken; then all
/// close and nothing may be left.
fn settle(run: &mut Run) -> Result<Stats, String> {
    run.note(|| "settle".into());
    let n = run.ms.len();
    let mut drained = false;
    for round in 0..300 {
        for m in 0..n {
            if let Kind::C(_) = run.ms[m].kind {
                if run.ms[m].finals > 0 {
                    // A closed consumer is replaced.
                    let mut c = ConsumerConfig::new(DIR, &format!("m{m}r{round}"));
                    c.format = run.format;
                    c.delivery = run.delivery;
                    let mach = &mut run.ms[m];
                    mach.kind = Kind::C(Consumer::new(c));
                    mach.finals = 0;
                    mach.closing = false;
                    mach.take = None;
                    mach.held.clear();
                    let (sid, now, alive) = (mach.session, run.now, mach.alive);
                    if alive {
                        mach.r()
                            .handle_session(now, SessionChange::Connected { session_id: sid });
                    }
                }
                if run.ms[m].take.is_none() {
                    run.user(m, 0); // take, no deadline
                }
                while !run.ms[m].held.is_empty() {
                    run.user(m, 4); // complete
                }
            }
        }
        run.round()?;
        if round >= 4 && run.drained().is_ok() {
            drained = true;
            break;
        }
    }
    if !drained {
        let states: Vec<String> = run
            .ms
            .iter()
            .enumerate()
            .map(|(m, x)| match &x.kind {
                Kind::P(_) => String::new(),
                Kind::C(c) => format!("\nm{m} (finals {}): {c:?}", x.finals),
            })
            .collect();
        return Err(format!(
            "liveness: not drained once faults stopped: {}{}",
            run.drained().err().unwrap_or_default(),
            states.concat()
        ));
    }
    run.note(|| "close all".into());
    for m in 0..n {
        run.user(m, 7);
    }
    for _ in 0..200 {
        run.round()?;
        if run.ms.iter_mut().all(|x| x.r().is_done()) {
            break;
        }
    }
    for m in 0..n {
        if run.ms[m].finals != 1 {
            let state = match &run.ms[m].kind {
                Kind::P(p) => format!("{p:?}"),
                Kind::C(c) => format!("{c:?}"),
            };
            return Err(format!("liveness: m{m} never reported Closed: {state}"));
        }
        if !run.ms[m].r().is_done() {
            return Err(format!("liveness: m{m} is not done after Closed"));
        }
    }
    let left: Vec<&String> = run
        .tree
        .keys()
        .filter(|k| parent(k) == run.meta || parent(k) == DIR)
        .collect();
    if !left.is_empty() {
        return Err(format!("cleanliness: left behind {left:?}"));
    }
    let mut stats = Stats::default();
    let mut problems = Vec::new();
    for s in run.seen.values() {
        stats.items += 1;
        stats.delivered += s.delivered as usize;
        let done = match run.delivery {
            Delivery::AtMostOnce => s.delivered,
            Delivery::AtLeastOnce => s.completed,
        };
        if done == 1 {
            continue;
        }
        match s.deleted_by {
            Some(by) if run.doubts.contains(&by) && !run.ms.iter().any(|x| x.session == by) => {
                stats.lost += 1
            }
            by => problems.push(format!(
                "{} deleted by {by:?}, delivered {}, completed {}",
                s.name, s.delivered, s.completed
            )),
        }
    }
    for (data, outcome) in &run.puts {
        let name = run.seen.get(data).map(|s| &s.name);
        match outcome {
            Outcome::Put(node) if name.is_none() || (node.is_some() && node.as_ref() != name) => {
                problems.push(format!(
                    "put {data:?} reported Put({node:?}), item {name:?}"
                ))
            }
            Outcome::Failed(false) if name.is_some() => {
                problems.push(format!("put {data:?} failed (not applied), item {name:?}"))
            }
            Outcome::Pending => problems.push(format!("put {data:?} never answered")),
            _ => {}
        }
    }
    if problems.is_empty() {
        Ok(stats)
    } else {
        Err(format!("accounting: {}", problems.join("; ")))
    }
}
