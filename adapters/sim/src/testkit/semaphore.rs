//! Several [`Semaphore`] clients (one session each, `N = 2`) against a small model of a
//! ZooKeeper server, driven by bytes (proptest and libFuzzer share it).
//!
//! The model holds the tree under `/sem` (containers `locks` and `leases`, created by
//! the clients), sequential names, ephemeral owners, one-shot data, exists and children
//! watches. Each step the bytes pick a client and one of:
//!
//! * the server reads the oldest request on that client's wire; the client reads the
//!   oldest reply or notification; the server applies a request and the connection
//!   breaks before the reply (applied, reply lost); the connection breaks; the client
//!   reconnects (notifications that fired meanwhile arrive then, queued requests go
//!   out); the session refuses the next request (`Overloaded`, never applied); the
//!   session expires (its ephemeral nodes and watches go; a new session starts);
//! * an operator deletes a lease node; the server reaps an empty container;
//! * time passes (deadlines and backoffs run out); a client starts an attempt (with or
//!   without a deadline); a holder releases, or a waiter gives up.
//!
//! Safety, after every step: at most `N` clients hold a lease whose node exists on the
//! server (holder = told `Acquired`, not yet a final event); one `Acquired` and one final
//! event per attempt, nothing after the final one; `Released` only once the attempt's
//! lease node is gone.
//!
//! Liveness, at the end — no cancelling: faults stop, every client reconnects, the
//! server answers everything, holders release what they got, time passes. Within a
//! bounded number of rounds (bounded virtual time) every attempt must have reported its
//! final event and be done, and no lock or lease node may be left on the server.
//! (Not modelled: lagging followers; `testkit::lock` covers them for the `Lock` machine
//! both halves of a semaphore are made of.)

use alloc::collections::{BTreeMap, VecDeque};
use alloc::format;
use alloc::string::{String, ToString};
use alloc::vec::Vec;
use bytes::Bytes;
use core::time::Duration;

use zk_recipes::error::Error;
use zk_recipes::proto::*;
use zk_recipes::recipe::semaphore::{Semaphore, SemaphoreConfig, SemaphoreEvent};
use zk_recipes::recipe::{OpId, Recipe, SessionChange};
use zk_recipes::session::WatchEvent;
use zk_recipes::time::Instant;

const PATH: &str = "/sem";
const LEASES: &str = "/sem/leases";
const LOCKS: &str = "/sem/locks";
const N: u32 = 2;
const CLIENTS: usize = 3;

/// What happened over a run (to show a harness is not vacuous).
#[derive(Clone, Copy, Debug, Default)]
pub struct Stats {
    /// `Acquired` events.
    pub acquired: u32,
    /// Steps at which `N` clients held at once.
    pub full: u32,
    /// `TimedOut` events.
    pub timed_out: u32,
    /// `Lost` events.
    pub lost: u32,
    /// `Failed` events.
    pub failed: u32,
    /// Lease creates applied whose reply was lost.
    pub lost_lease_creates: u32,
    /// Lease nodes deleted by the operator.
    pub operator_deletes: u32,
    /// Attempts that started over with a new lease node after such a deletion.
    pub restarts: u32,
}

#[derive(Clone, Debug)]
struct Node {
    owner: i64,
    czxid: i64,
    /// Next sequence number for children.
    cseq: u32,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum WatchKind {
    Data,
    Children,
}

type Inbound = Result<Result<Response, Error>, WatchEvent>;

struct Client {
    session: i64,
    connected: bool,
    sem: Option<Semaphore>,
    attempts: u32,
    /// Told Acquired, no final event yet.
    holding: bool,
    acquired: bool,
    finals: u32,
    lease_prefix: String,
    refuse_next: bool,
    /// The reply to this client's next lease create is lost (applied, then the
    /// connection breaks): CURATOR-315's situation.
    lose_lease_create: bool,
    /// Sent, not yet read by the server.
    wire: VecDeque<(OpId, Request)>,
    /// Written by the server, not yet read by the client.
    inbox: VecDeque<(OpId, Inbound)>,
    /// Submitted while disconnected.
    queued: VecDeque<(OpId, Request)>,
    /// Notifications that fired while disconnected.
    notify: Vec<(OpId, WatchEvent)>,
}

struct World {
    nodes: BTreeMap<String, Node>,
    zxid: i64,
    /// (session, path, kind, op).
    watches: Vec<(i64, String, WatchKind, OpId)>,
    clients: Vec<Client>,
    next_session: i64,
    now: Instant,
    stats: Stats,
    trace: Vec<String>,
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

fn fire_for(
    watches: &mut Vec<(i64, String, WatchKind, OpId)>,
    path: &str,
    kind: WatchKind,
    t: EventType,
) -> Vec<(i64, OpId, WatchEvent)> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < watches.len() {
        if watches[i].1 == path && watches[i].2 == kind {
            let (s, p, _, op) = watches.remove(i);
            out.push((
                s,
                op,
                WatchEvent {
                    event_type: t,
                    path: p,
                },
            ));
        } else {
            i += 1;
        }
    }
    out
}

impl World {
    fn note(&mut self, line: String) {
        if self.trace.len() == 300 {
            self.trace.remove(0);
        }
        self.trace.push(line);
    }

    fn notify(&mut self, fired: Vec<(i64, OpId, WatchEvent)>) {
        for (s, op, ev) in fired {
            if let Some(c) = self.clients.iter_mut().find(|c| c.session == s) {
                if c.connected {
                    c.inbox.push_back((op, Err(ev)));
                } else {
                    c.notify.push((op, ev));
                }
            }
        }
    }

    fn delete_node(&mut self, path: &str) {
        if self.nodes.remove(path).is_none() {
            return;
        }
        self.zxid += 1;
        let mut fired = fire_for(
            &mut self.watches,
            path,
            WatchKind::Data,
            EventType::NodeDeleted,
        );
        // Children watches on the node itself fire too (ZooKeeper: NodeDeleted).
        fired.extend(fire_for(
            &mut self.watches,
            path,
            WatchKind::Children,
            EventType::NodeDeleted,
        ));
        fired.extend(fire_for(
            &mut self.watches,
            parent(path),
            WatchKind::Children,
            EventType::NodeChildrenChanged,
        ));
        self.notify(fired);
    }

    fn children(&self, path: &str) -> Vec<String> {
        self.nodes
            .keys()
            .filter(|k| parent(k) == path && k.as_str() != path)
            .map(|k| name_of(k).to_string())
            .collect()
    }

    fn stat(&self, path: &str) -> Option<Stat> {
        self.nodes.get(path).map(|n| Stat {
            czxid: n.czxid,
            ephemeral_owner: n.owner,
            ..Stat::default()
        })
    }

    fn apply(&mut self, session: i64, op: OpId, req: &Request) -> Result<Response, Error> {
        let no_node = Err(Error::Server(ErrorCode::NoNode));
        match req {
            Request::CreateContainer(c) | Request::Create(c) | Request::Create2(c) => {
                let p = parent(&c.path).to_string();
                if p != "/" && !self.nodes.contains_key(&p) {
                    return no_node;
                }
                let sequential = matches!(req, Request::Create2(_));
                let path = if sequential {
                    let n = self.nodes.get_mut(&p).map(|n| {
                        n.cseq += 1;
                        n.cseq - 1
                    });
                    format!("{}{:010}", c.path, n.unwrap_or(0))
                } else {
                    c.path.clone()
                };
                if self.nodes.contains_key(&path) {
                    return Err(Error::Server(ErrorCode::NodeExists));
                }
                self.zxid += 1;
                let owner = if sequential { session } else { 0 };
                self.nodes.insert(
                    path.clone(),
                    Node {
                        owner,
                        czxid: self.zxid,
                        cseq: 0,
                    },
                );
                let mut fired = fire_for(
                    &mut self.watches,
                    &path,
                    WatchKind::Data,
                    EventType::NodeCreated,
                );
                fired.extend(fire_for(
                    &mut self.watches,
                    &p,
                    WatchKind::Children,
                    EventType::NodeChildrenChanged,
                ));
                self.notify(fired);
                if sequential {
                    let stat = self.stat(&path).unwrap_or_default();
                    Ok(Response::PathStat { path, stat })
                } else {
                    Ok(Response::Path(path))
                }
            }
            Request::Delete(d) => {
                if !self.nodes.contains_key(&d.path) {
                    return no_node;
                }
                if !self.children(&d.path).is_empty() {
                    return Err(Error::Server(ErrorCode::NotEmpty));
                }
                self.delete_node(&d.path);
                Ok(Response::Empty)
            }
            Request::Sync(p) => Ok(Response::Path(p.path.clone())),
            Request::GetChildren(g) => {
                if !self.nodes.contains_key(&g.path) {
                    return no_node;
                }
                if g.watch {
                    self.watches
                        .push((session, g.path.clone(), WatchKind::Children, op));
                }
                Ok(Response::Children(self.children(&g.path)))
            }
            Request::GetData(g) | Request::Exists(g) => {
                let exists = matches!(req, Request::Exists(_));
                match self.stat(&g.path) {
                    Some(stat) => {
                        if g.watch {
                            self.watches
                                .push((session, g.path.clone(), WatchKind::Data, op));
                        }
                        if exists {
                            Ok(Response::Stat(stat))
                        } else {
                            Ok(Response::Data {
                                data: Bytes::new(),
                                stat,
                            })
                        }
                    }
                    None => {
                        if g.watch && exists {
                            self.watches
                                .push((session, g.path.clone(), WatchKind::Data, op));
                        }
                        no_node
                    }
                }
            }
            _ => Err(Error::Server(ErrorCode::Unimplemented)),
        }
    }

    /// Holders whose lease node exists on the server.
    fn live_holders(&self) -> usize {
        self.clients
            .iter()
            .filter(|c| {
                c.holding
                    && c.sem
                        .as_ref()
                        .and_then(|s| s.lease())
                        .is_some_and(|l| self.nodes.contains_key(l))
            })
            .count()
    }

    fn check(&mut self) -> Result<(), String> {
        let h = self.live_holders();
        if h > N as usize {
            return Err(format!("{h} live holders > {N}"));
        }
        if h == N as usize {
            self.stats.full += 1;
        }
        Ok(())
    }

    /// Moves client `i`'s requests and events out.
    fn pump(&mut self, i: usize) -> Result<(), String> {
        loop {
            let c = &mut self.clients[i];
            let Some(sem) = c.sem.as_mut() else {
                return Ok(());
            };
            let mut progressed = false;
            while let Some((op, req)) = sem.poll_request() {
                progressed = true;
                if c.refuse_next {
                    c.refuse_next = false;
                    sem.handle_reply(self.now, op, Err(Error::Overloaded));
                } else if c.connected {
                    c.wire.push_back((op, req));
                } else {
                    c.queued.push_back((op, req));
                }
            }
            let mut events = Vec::new();
            while let Some(e) = sem.poll_event() {
                progressed = true;
                events.push(e);
            }
            for e in events {
                self.note(format!("  client {i} event {e:?}"));
                self.on_event(i, e)?;
            }
            let c = &mut self.clients[i];
            if c.sem.as_ref().is_some_and(|s| s.is_done()) {
                if c.finals != 1 {
                    return Err(format!("client {i}: done after {} final events", c.finals));
                }
                self.stats.restarts += c.sem.as_ref().map_or(0, |s| s.restarts());
                c.sem = None;
                return Ok(());
            }
            if !progressed {
                return Ok(());
            }
        }
    }

    fn on_event(&mut self, i: usize, e: SemaphoreEvent) -> Result<(), String> {
        let c = &mut self.clients[i];
        if c.finals > 0 {
            return Err(format!("client {i}: {e:?} after the final event"));
        }
        match &e {
            SemaphoreEvent::Acquired { lease } => {
                if c.acquired {
                    return Err(format!("client {i}: Acquired twice"));
                }
                if !lease.starts_with(&c.lease_prefix) {
                    return Err(format!("client {i}: lease {lease} is not ours"));
                }
                c.acquired = true;
                c.holding = true;
                self.stats.acquired += 1;
            }
            SemaphoreEvent::Suspended | SemaphoreEvent::Reconnected => {}
            e => {
                c.finals += 1;
                c.holding = false;
                match e {
                    SemaphoreEvent::TimedOut => self.stats.timed_out += 1,
                    SemaphoreEvent::Lost { .. } => self.stats.lost += 1,
                    SemaphoreEvent::Failed { .. } => self.stats.failed += 1,
                    _ => {}
                }
                if matches!(e, SemaphoreEvent::Released) {
                    let prefix = c.lease_prefix.clone();
                    if let Some(left) = self.nodes.keys().find(|k| k.starts_with(&prefix)) {
                        return Err(format!("client {i}: Released while {left} exists"));
                    }
                }
            }
        }
        Ok(())
    }

    fn start(&mut self, i: usize, deadline: Option<Duration>) {
        let now = self.now;
        let c = &mut self.clients[i];
        if c.sem.is_some() {
            return;
        }
        c.attempts += 1;
        let m = format!("m{i}-{}", c.attempts);
        let l = format!("l{i}-{}", c.attempts);
        c.lease_prefix = format!("{LEASES}/_c_{l}-");
        let mut s = Semaphore::new(SemaphoreConfig::new(PATH, N, &m, &l));
        s.handle_session(
            now,
            SessionChange::Connected {
                session_id: c.session,
            },
        );
        if !c.connected {
            s.handle_session(now, SessionChange::Suspended);
        }
        c.holding = false;
        c.acquired = false;
        c.finals = 0;
        s.acquire(now, deadline.map(|d| now + d));
        c.sem = Some(s);
    }

    fn serve(&mut self, i: usize) -> bool {
        let Some((op, req)) = self.clients[i].wire.pop_front() else {
            return false;
        };
        let session = self.clients[i].session;
        let r = self.apply(session, op, &req);
        self.note(format!(
            "  client {i} server {op} {:?} -> {r:?}",
            req.op_code()
        ));
        let lease_create = matches!(&req, Request::Create2(c) if c.path.starts_with(LEASES));
        if lease_create && r.is_ok() && self.clients[i].lose_lease_create {
            self.clients[i].lose_lease_create = false;
            self.stats.lost_lease_creates += 1;
            self.note(format!("  client {i} loses the lease create reply"));
            self.clients[i].inbox.push_back((op, Ok(r)));
            self.disconnect(i);
            return true;
        }
        self.clients[i].inbox.push_back((op, Ok(r)));
        true
    }

    fn deliver(&mut self, i: usize) {
        let now = self.now;
        let c = &mut self.clients[i];
        if !c.connected {
            return;
        }
        let Some((op, r)) = c.inbox.pop_front() else {
            return;
        };
        let Some(sem) = c.sem.as_mut() else {
            return;
        };
        match r {
            Ok(r) => sem.handle_reply(now, op, r),
            Err(ev) => sem.handle_watch(now, op, &ev),
        }
    }

    fn disconnect(&mut self, i: usize) {
        let now = self.now;
        let c = &mut self.clients[i];
        if !c.connected {
            return;
        }
        c.connected = false;
        let mut lost: Vec<OpId> = Vec::new();
        for (op, r) in c.inbox.drain(..) {
            match r {
                Ok(_) => lost.push(op),
                Err(ev) => c.notify.push((op, ev)),
            }
        }
        lost.extend(c.wire.drain(..).map(|(op, _)| op));
        if let Some(sem) = c.sem.as_mut() {
            for op in lost {
                sem.handle_reply(now, op, Err(Error::ConnectionLoss));
            }
            sem.handle_session(now, SessionChange::Suspended);
        }
    }

    fn reconnect(&mut self, i: usize) {
        let now = self.now;
        let c = &mut self.clients[i];
        if c.connected {
            return;
        }
        c.connected = true;
        if let Some(sem) = c.sem.as_mut() {
            sem.handle_session(
                now,
                SessionChange::Reconnected {
                    session_id: c.session,
                },
            );
        }
        for (op, ev) in core::mem::take(&mut c.notify) {
            c.inbox.push_back((op, Err(ev)));
        }
        let queued = core::mem::take(&mut c.queued);
        c.wire.extend(queued);
    }

    fn expire(&mut self, i: usize) {
        let now = self.now;
        let session = self.clients[i].session;
        let mine: Vec<String> = self
            .nodes
            .iter()
            .filter(|(_, n)| n.owner == session)
            .map(|(k, _)| k.clone())
            .collect();
        for p in mine {
            self.delete_node(&p);
        }
        self.watches.retain(|w| w.0 != session);
        self.next_session += 1;
        let next = self.next_session;
        let c = &mut self.clients[i];
        let mut failed: Vec<OpId> = c
            .inbox
            .drain(..)
            .filter(|r| r.1.is_ok())
            .map(|r| r.0)
            .collect();
        failed.extend(c.wire.drain(..).map(|r| r.0));
        failed.extend(c.queued.drain(..).map(|r| r.0));
        c.notify.clear();
        c.inbox.clear();
        if let Some(sem) = c.sem.as_mut() {
            for op in failed {
                sem.handle_reply(now, op, Err(Error::SessionExpired));
            }
            sem.handle_session(now, SessionChange::Expired);
        }
        c.session = next;
        c.connected = true;
    }

    fn timeouts(&mut self) {
        let now = self.now;
        for c in &mut self.clients {
            if let Some(sem) = c.sem.as_mut() {
                if sem.poll_timeout().is_some_and(|t| t <= now) {
                    sem.handle_timeout(now);
                }
            }
        }
    }

    fn pump_all(&mut self) -> Result<(), String> {
        for i in 0..CLIENTS {
            self.pump(i)?;
        }
        self.check()
    }

    fn step(&mut self, b: u8, arg: u8) -> Result<(), String> {
        let i = usize::from(arg) % CLIENTS;
        match b % 32 {
            0..=9 => {
                self.serve(i);
            }
            10..=17 => self.deliver(i),
            18 | 19 => {
                // A quiet moment for this client: everything answered and read.
                while self.serve(i) {}
                while !self.clients[i].inbox.is_empty() {
                    self.deliver(i);
                    self.pump(i)?;
                    while self.serve(i) {}
                }
            }
            20 => {
                // Applied, reply lost.
                let lease_create = matches!(
                    self.clients[i].wire.front(),
                    Some((_, Request::Create2(c))) if c.path.starts_with(LEASES)
                );
                if self.serve(i) {
                    if lease_create {
                        self.stats.lost_lease_creates += 1;
                    }
                    self.disconnect(i);
                }
            }
            21 => self.disconnect(i),
            22 | 23 => self.reconnect(i),
            24 if arg & 1 == 0 => self.clients[i].refuse_next = true,
            24 => self.clients[i].lose_lease_create = true,
            25 if arg & 0x18 == 0 => self.expire(i),
            26 if arg & 0x18 == 0 => {
                // The operator deletes a lease node.
                let leases = self.children(LEASES);
                if !leases.is_empty() {
                    let p = format!("{LEASES}/{}", leases[usize::from(arg) % leases.len()]);
                    self.note(format!("  operator deletes {p}"));
                    self.delete_node(&p);
                    self.stats.operator_deletes += 1;
                } else if self.nodes.contains_key(LEASES) {
                    self.delete_node(LEASES); // an empty container is reaped
                }
            }
            27 | 28 => {
                self.now = self.now + Duration::from_millis(u64::from(arg) * 20);
                self.timeouts();
            }
            29 => {
                let deadline = match arg >> 6 {
                    0 => None,
                    d => Some(Duration::from_millis(u64::from(d) * 700)),
                };
                self.start(i, deadline);
            }
            30 | 31 => {
                let now = self.now;
                let c = &mut self.clients[i];
                if let Some(sem) = c.sem.as_mut() {
                    if (c.holding && arg & 0x18 == 0) || arg & 0xf8 == 0x40 {
                        sem.release(now);
                    }
                }
            }
            _ => {}
        }
        self.pump_all()
    }

    /// Faults stop: reconnect, answer everything, holders release, time passes.
    fn settle(&mut self) -> Result<(), String> {
        for i in 0..CLIENTS {
            self.clients[i].refuse_next = false;
            self.clients[i].lose_lease_create = false;
            self.reconnect(i);
        }
        self.pump_all()?;
        let start = self.now;
        for _ in 0..5_000 {
            if self.clients.iter().all(|c| c.sem.is_none()) {
                break;
            }
            for i in 0..CLIENTS {
                while self.serve(i) {}
                while !self.clients[i].inbox.is_empty() {
                    self.deliver(i);
                    self.pump(i)?;
                }
                let now = self.now;
                let c = &mut self.clients[i];
                if c.holding {
                    if let Some(sem) = c.sem.as_mut() {
                        sem.release(now);
                    }
                }
                self.pump(i)?;
            }
            self.check()?;
            self.now = self.now + Duration::from_millis(50);
            self.timeouts();
            self.pump_all()?;
        }
        if let Some((i, _)) = self
            .clients
            .iter()
            .enumerate()
            .find(|(_, c)| c.sem.is_some())
        {
            return Err(format!(
                "client {i}: attempt not done {:?} after faults stopped",
                self.now - start
            ));
        }
        if let Some(left) = self
            .nodes
            .keys()
            .find(|k| parent(k) == LEASES || parent(k) == LOCKS)
        {
            return Err(format!("{left} left behind"));
        }
        Ok(())
    }
}

/// Runs one schedule; `Err` names the broken invariant (with the last steps).
pub fn run(schedule: &[u8]) -> Result<Stats, String> {
    let mut w = World {
        nodes: BTreeMap::new(),
        zxid: 0,
        watches: Vec::new(),
        clients: (0..CLIENTS)
            .map(|i| Client {
                session: 0x100 + i as i64,
                connected: true,
                sem: None,
                attempts: 0,
                holding: false,
                acquired: false,
                finals: 0,
                lease_prefix: String::new(),
                refuse_next: false,
                lose_lease_create: false,
                wire: VecDeque::new(),
                inbox: VecDeque::new(),
                queued: VecDeque::new(),
                notify: Vec::new(),
            })
            .collect(),
        next_session: 0x200,
        now: Instant::ZERO,
        stats: Stats::default(),
        trace: Vec::new(),
    };
    for i in 0..CLIENTS {
        w.start(i, None);
    }
    let fail = |w: &World, e: String| format!("{e}\ntrace:\n{}", w.trace.join("\n"));
    if let Err(e) = w.pump_all() {
        return Err(fail(&w, e));
    }
    for pair in schedule.chunks(2) {
        let (b, arg) = (pair[0], pair.get(1).copied().unwrap_or(0));
        w.note(format!("step {b} {arg}"));
        if let Err(e) = w.step(b, arg) {
            return Err(fail(&w, e));
        }
    }
    w.note("settle".into());
    if let Err(e) = w.settle() {
        return Err(fail(&w, e));
    }
    Ok(w.stats)
}
