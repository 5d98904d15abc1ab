//! A [`DoubleBarrier`] participant against a small model of one barrier node and its
//! peers, driven by bytes (proptest and libFuzzer share it). The bytes choose `N`,
//! deadlines, and then a schedule of steps:
//!
//! * the server answers the oldest request on the wire, or applies it and the
//!   connection breaks before the reply arrives (reply lost), or the connection breaks
//!   before it is read; the session refuses a request (`Overloaded`) or the server
//!   throttles one (never applied);
//! * a reconnect (watches that fired meanwhile are delivered then, as the session's
//!   re-arming does); the session expires;
//! * peers arrive (one that finds `N` members makes `ready`), peers leave (the last one
//!   removes `ready` and `b` with its node, as ours does); time passes; the user leaves.
//!
//! Safety, after every step: we create `ready` only after `N` members were present
//! together (since the last round); `Entered`
//! only if `ready` and our node existed together;
//! `Left` only when our node is gone and the round is over (`ready` gone, or nobody in
//! `b`); one final event per participation and nothing after it; after the final event
//! no request but the deletion of our node; `poll_timeout` never in the past after
//! `handle_timeout`.
//!
//! Liveness, at the end — no cancel: faults stop, the connection comes back, peers
//! arrive until `N` and leave (one a round) once we have entered, the user leaves, time
//! passes. Within a bounded number of rounds (200 plus one for every member present
//! when faults stop) the participation must have ended, the machine must be done, and
//! our node must be gone.

use alloc::format;
use alloc::string::{String, ToString};
use alloc::vec::Vec;
use core::time::Duration;

use zk_recipes::error::Error;
use zk_recipes::proto::*;
use zk_recipes::recipe::double_barrier::{DoubleBarrier, DoubleBarrierConfig, DoubleBarrierEvent};
use zk_recipes::recipe::{OpId, Recipe, SessionChange};
use zk_recipes::session::WatchEvent;
use zk_recipes::time::Instant;

const B: &str = "/p/b";
const READY: &str = "/p/b/ready";
const ME: &str = "55555555-0000-4000-8000-000000000000";
const SESSION: i64 = 0x5e55;

/// What the server writes: a reply (`Ok`) or a watch notification (`Err`).
type Outbound = Result<Result<Response, Error>, WatchEvent>;

#[derive(Default)]
struct World {
    b: bool,
    ready: bool,
    /// Member names (ours is `ME`).
    members: Vec<String>,
    peers: u32,
    connected: bool,
    alive: bool,
    wire: Vec<(OpId, Request)>,
    out: Vec<(OpId, Outbound)>,
    queued: Vec<(OpId, Request)>,
    /// One-shot exists watches: (path, op).
    watches: Vec<(String, OpId)>,
    /// Fired while disconnected: delivered after the reconnect.
    notify: Vec<(OpId, WatchEvent)>,
    /// `ready` and our node existed together at some point.
    round_with_us: bool,
    /// `N`, and a `ready` we created with fewer members present.
    n: usize,
    early_ready: Option<usize>,
    /// Most members present together since `ready` was last gone (what the creator of
    /// `ready` may have counted; one may have left since).
    forming: usize,
}

fn child(name: &str) -> String {
    format!("{B}/{name}")
}

impl World {
    fn ours(&self) -> bool {
        self.members.iter().any(|m| m == ME)
    }

    fn note(&mut self) {
        if self.ready && self.ours() {
            self.round_with_us = true;
        }
        if !self.ready {
            self.forming = self.forming.max(self.members.len());
        }
    }

    fn fire(&mut self, path: &str, event_type: EventType) {
        let (hit, keep): (Vec<_>, Vec<_>) = core::mem::take(&mut self.watches)
            .into_iter()
            .partition(|(p, _)| p == path);
        self.watches = keep;
        for (_, op) in hit {
            let ev = WatchEvent {
                event_type,
                path: path.to_string(),
            };
            if self.connected {
                self.out.push((op, Err(ev)));
            } else {
                self.notify.push((op, ev));
            }
        }
    }

    fn create(&mut self, path: &str) -> Result<Response, Error> {
        if path == B {
            if self.b {
                return Err(ErrorCode::NodeExists.into());
            }
            self.b = true;
        } else if !self.b {
            return Err(ErrorCode::NoNode.into());
        } else if path == READY {
            if self.ready {
                return Err(ErrorCode::NodeExists.into());
            }
            self.ready = true;
            self.fire(READY, EventType::NodeCreated);
        } else {
            let name = path.rsplit('/').next().unwrap_or("").to_string();
            if self.members.contains(&name) {
                return Err(ErrorCode::NodeExists.into());
            }
            self.members.push(name);
        }
        self.note();
        Ok(Response::Path(path.into()))
    }

    fn delete(&mut self, path: &str) -> Result<Response, Error> {
        if path == B {
            if !self.b {
                return Err(ErrorCode::NoNode.into());
            }
            if self.ready || !self.members.is_empty() {
                return Err(ErrorCode::NotEmpty.into());
            }
            self.b = false;
        } else if path == READY {
            if !self.ready {
                return Err(ErrorCode::NoNode.into());
            }
            self.ready = false;
            self.forming = self.members.len();
        } else {
            let name = path.rsplit('/').next().unwrap_or("");
            let Some(at) = self.members.iter().position(|m| m == name) else {
                return Err(ErrorCode::NoNode.into());
            };
            self.members.remove(at);
        }
        self.fire(path, EventType::NodeDeleted);
        Ok(Response::Empty)
    }

    fn exists(&self, path: &str) -> bool {
        match path {
            B => self.b,
            READY => self.ready,
            p => {
                let name = p.rsplit('/').next().unwrap_or("");
                p.starts_with(B) && self.members.iter().any(|m| m == name)
            }
        }
    }

    /// Applies `req` to the live state; its reply.
    fn apply(&mut self, op: OpId, req: &Request) -> Result<Response, Error> {
        match req {
            Request::Create(c) | Request::Create2(c) | Request::CreateContainer(c) => {
                if c.path == READY && !self.ready && self.forming < self.n {
                    self.early_ready = Some(self.forming);
                }
                if c.path == "/p" {
                    Err(ErrorCode::NodeExists.into())
                } else {
                    self.create(&c.path)
                }
            }
            Request::Delete(d) => self.delete(&d.path),
            Request::Exists(e) => {
                if e.watch {
                    self.watches.push((e.path.clone(), op));
                }
                if self.exists(&e.path) {
                    Ok(Response::Stat(Stat::default()))
                } else {
                    Err(ErrorCode::NoNode.into())
                }
            }
            Request::GetChildren(_) => {
                if !self.b {
                    return Err(ErrorCode::NoNode.into());
                }
                let mut c = self.members.clone();
                if self.ready {
                    c.push("ready".into());
                }
                Ok(Response::Children(c))
            }
            Request::Sync(p) => Ok(Response::Path(p.path.clone())),
            Request::Multi(ops) => {
                // All or nothing: try on a copy.
                let mut results = Vec::new();
                let (b, ready, members) = (self.b, self.ready, self.members.clone());
                let mut failed = None;
                for (i, o) in ops.iter().enumerate() {
                    let r = match o {
                        MultiOp::Delete(d) => {
                            // No watch fires until the whole multi is in.
                            let w = core::mem::take(&mut self.watches);
                            let r = self.delete(&d.path);
                            self.watches = w;
                            r.map(|_| MultiResult::Delete)
                        }
                        _ => Err(Error::from(ErrorCode::Unimplemented)),
                    };
                    match r {
                        Ok(x) => results.push(x),
                        Err(Error::Server(c)) => {
                            failed = Some((i, c));
                            break;
                        }
                        Err(_) => {
                            failed = Some((i, ErrorCode::SystemError));
                            break;
                        }
                    }
                }
                if let Some((at, code)) = failed {
                    self.b = b;
                    self.ready = ready;
                    self.members = members;
                    let r = (0..ops.len())
                        .map(|i| {
                            MultiResult::Error(match i.cmp(&at) {
                                core::cmp::Ordering::Less => ErrorCode::Ok,
                                core::cmp::Ordering::Equal => code,
                                core::cmp::Ordering::Greater => ErrorCode::RuntimeInconsistency,
                            })
                        })
                        .collect();
                    return Ok(Response::Multi(r));
                }
                for o in ops {
                    if let MultiOp::Delete(d) = o {
                        self.fire(&d.path, EventType::NodeDeleted);
                    }
                }
                Ok(Response::Multi(results))
            }
            _ => Err(ErrorCode::Unimplemented.into()),
        }
    }

    fn peer_arrives(&mut self) {
        if !self.b {
            self.b = true;
        }
        self.peers += 1;
        let name = format!("{:08x}-peer", self.peers.wrapping_mul(0x9E37_79B9));
        self.members.push(name);
        self.note();
    }

    fn peer_count_makes_ready(&mut self, n: u32) {
        if !self.ready && self.b && self.members.len() >= n as usize {
            self.ready = true;
            self.fire(READY, EventType::NodeCreated);
            self.note();
        }
    }

    /// A peer in leave deletes its node; the last one removes `ready` and `b` too.
    fn peer_leaves(&mut self, pick: u8) {
        let peers: Vec<String> = self.members.iter().filter(|m| *m != ME).cloned().collect();
        if peers.is_empty() {
            return;
        }
        let name = peers[pick as usize % peers.len()].clone();
        let _ = self.delete(&child(&name));
        if self.members.is_empty() && self.ready {
            let _ = self.delete(READY);
            let _ = self.delete(B);
        }
    }
}

struct Harness {
    m: DoubleBarrier,
    w: World,
    now: Instant,
    finals: u32,
    entered: bool,
    left: bool,
    ended: bool,
    leave_called: bool,
    log: Vec<String>,
}

impl Harness {
    fn pump(&mut self) -> Result<(), String> {
        while let Some((op, req)) = self.m.poll_request() {
            if self.ended {
                let cleanup = match &req {
                    Request::Delete(d) => d.path == child(ME),
                    _ => false,
                };
                if !cleanup {
                    return Err(format!("request after the final event: {req:?}"));
                }
            }
            if !self.w.alive {
                self.m
                    .handle_reply(self.now, op, Err(Error::SessionExpired));
            } else if self.w.connected {
                self.w.wire.push((op, req));
            } else {
                self.w.queued.push((op, req));
            }
        }
        if let Some(k) = self.w.early_ready {
            return Err(format!(
                "we created ready with at most {k} members present together, N = {}",
                self.w.n
            ));
        }
        while let Some(e) = self.m.poll_event() {
            self.log.push(format!("{e:?}"));
            if self.ended {
                return Err(format!("event after the final one: {e:?}"));
            }
            match e {
                DoubleBarrierEvent::Entered { .. } => {
                    if !self.w.round_with_us {
                        return Err("Entered without ready and our node together".into());
                    }
                    self.entered = true;
                }
                DoubleBarrierEvent::Left => {
                    if self.w.alive
                        && (self.w.ours() || (self.w.ready && !self.w.members.is_empty()))
                    {
                        return Err(format!(
                            "Left while the round is on: ready {}, members {:?}",
                            self.w.ready, self.w.members
                        ));
                    }
                    self.left = true;
                }
                DoubleBarrierEvent::Suspended | DoubleBarrierEvent::Reconnected => {}
                _ => {}
            }
            if e.is_final() {
                self.finals += 1;
                self.ended = true;
            }
        }
        Ok(())
    }

    /// The server handles the oldest request; `deliver`: its reply reaches us.
    fn serve(&mut self, deliver: bool) {
        if self.w.wire.is_empty() {
            return;
        }
        let (op, req) = self.w.wire.remove(0);
        let r = self.w.apply(op, &req);
        if deliver {
            self.w.out.push((op, Ok(r)));
        } else {
            // Applied, but the connection breaks before the reply.
            self.w.wire.insert(0, (op, req));
            self.disconnect();
        }
    }

    fn deliver_all(&mut self) {
        for (op, o) in core::mem::take(&mut self.w.out) {
            match o {
                Ok(r) => self.m.handle_reply(self.now, op, r),
                Err(ev) => self.m.handle_watch(self.now, op, &ev),
            }
        }
    }

    fn disconnect(&mut self) {
        if !self.w.connected {
            return;
        }
        self.deliver_all();
        self.w.connected = false;
        for (op, _) in core::mem::take(&mut self.w.wire) {
            self.m
                .handle_reply(self.now, op, Err(Error::ConnectionLoss));
        }
        self.m.handle_session(self.now, SessionChange::Suspended);
    }

    fn reconnect(&mut self) {
        if self.w.connected || !self.w.alive {
            return;
        }
        self.w.connected = true;
        self.m.handle_session(
            self.now,
            SessionChange::Reconnected {
                session_id: SESSION,
            },
        );
        for (op, ev) in core::mem::take(&mut self.w.notify) {
            self.w.out.push((op, Err(ev)));
        }
        let q = core::mem::take(&mut self.w.queued);
        self.w.wire.extend(q);
    }

    fn expire(&mut self) {
        if !self.w.alive {
            return;
        }
        self.deliver_all();
        self.w.alive = false;
        self.w.connected = false;
        self.w.members.retain(|m| m != ME);
        for (op, _) in core::mem::take(&mut self.w.wire)
            .into_iter()
            .chain(core::mem::take(&mut self.w.queued))
        {
            self.m
                .handle_reply(self.now, op, Err(Error::ConnectionLoss));
        }
        self.w.out.clear();
        self.w.notify.clear();
        self.w.watches.clear();
        self.m.handle_session(self.now, SessionChange::Expired);
        self.m.handle_session(self.now, SessionChange::Closed);
    }
}

/// Runs one schedule; `Err` describes a broken invariant.
pub fn run(bytes: &[u8]) -> Result<(), String> {
    let mut it = bytes.iter().copied();
    let mut next = move || it.next();
    let n = 1 + u32::from(next().unwrap_or(1) % 4);
    let enter_deadline = match next().unwrap_or(0) % 4 {
        0 => Some(Duration::from_millis(50)),
        _ => None,
    };
    let mut h = Harness {
        m: DoubleBarrier::new(DoubleBarrierConfig::new(B, n, ME)),
        w: World {
            connected: true,
            alive: true,
            b: next().unwrap_or(0) % 2 == 0,
            n: n as usize,
            ..World::default()
        },
        now: Instant::ZERO,
        finals: 0,
        entered: false,
        left: false,
        ended: false,
        leave_called: false,
        log: Vec::new(),
    };
    h.m.handle_session(
        h.now,
        SessionChange::Connected {
            session_id: SESSION,
        },
    );
    h.m.enter(h.now, enter_deadline.map(|d| h.now + d))
        .map_err(|e| format!("enter: {e}"))?;
    let fail = |h: &Harness, e: String| {
        Err(format!(
            "{e}\nevents: {:?}\nworld: b {} ready {} members {:?}\nmachine: {:?}",
            h.log, h.w.b, h.w.ready, h.w.members, h.m
        ))
    };
    while let Some(b) = next() {
        match b % 12 {
            0..=2 => {
                h.serve(true);
                h.deliver_all();
            }
            3 => h.serve(false),
            4 => h.disconnect(),
            // A refusal (never applied).
            5 if !h.w.wire.is_empty() => {
                let (op, _) = h.w.wire.remove(0);
                let e = if b & 0x80 == 0 {
                    Error::Overloaded
                } else {
                    Error::Server(ErrorCode::Throttled)
                };
                h.m.handle_reply(h.now, op, Err(e));
            }
            6 => h.reconnect(),
            7 => {
                h.w.peer_arrives();
                h.w.peer_count_makes_ready(n);
            }
            8 => h.w.peer_leaves(b >> 4),
            9 => {
                h.now = h.now + Duration::from_millis(u64::from(b >> 4) * 7);
                h.m.handle_timeout(h.now);
                if h.m.poll_timeout().is_some_and(|t| t <= h.now) {
                    return fail(&h, "poll_timeout not after handle_timeout's now".into());
                }
            }
            10 if b >> 4 == 0 => h.expire(),
            10 | 11 if h.entered && !h.leave_called => {
                h.leave_called = true;
                let d = (b & 0x80 != 0).then(|| h.now + Duration::from_millis(40));
                let _ = h.m.leave(h.now, d);
            }
            _ => {}
        }
        if let Err(e) = h.pump() {
            return fail(&h, e);
        }
    }
    // Liveness: faults stop; peers arrive until N and leave once we are in; we leave.
    // Peers leave one a round, and a schedule may have brought any number of them: the
    // rounds for recovery and the round itself, plus one for every member present.
    let rounds = 200 + h.w.members.len();
    for _ in 0..rounds {
        h.reconnect();
        h.deliver_all();
        if let Err(e) = h.pump() {
            return fail(&h, e);
        }
        while !h.w.wire.is_empty() {
            h.serve(true);
            h.deliver_all();
            if let Err(e) = h.pump() {
                return fail(&h, e);
            }
        }
        if h.m.is_done() && h.ended {
            break;
        }
        if !h.entered && !h.w.ready && h.w.members.len() < n as usize {
            h.w.peer_arrives();
        }
        h.w.peer_count_makes_ready(n);
        if h.entered && !h.leave_called {
            h.leave_called = true;
            let _ = h.m.leave(h.now, None);
        }
        if h.leave_called {
            h.w.peer_leaves(0);
        }
        h.now = h.now + Duration::from_millis(500);
        h.m.handle_timeout(h.now);
        if let Err(e) = h.pump() {
            return fail(&h, e);
        }
    }
    if !(h.ended && h.m.is_done()) {
        return fail(&h, "liveness: the participation never ended".into());
    }
    if h.finals != 1 {
        return fail(&h, format!("{} final events", h.finals));
    }
    if h.w.ours() {
        return fail(&h, "our node is left behind".into());
    }
    Ok(())
}
