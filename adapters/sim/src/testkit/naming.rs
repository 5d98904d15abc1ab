//! Two [`IdGenerator`]s on two sessions drawing ids from one directory of a small
//! model ZooKeeper tree, driven by bytes (proptest and libFuzzer share it). The model
//! names sequential nodes as the server does: the parent's `cversion` (a signed 32-bit
//! counter bumped by every child create and delete), `%010d`, wrapping negative after
//! 2^31 - 1. The first byte picks the start: no directory yet, a directory whose
//! counter is a few steps from the wrap, or a fresh one. Each later byte is one step
//! for one of the two clients:
//!
//! * the server answers its oldest request; or applies it and the connection breaks
//!   before the reply arrives; or the connection breaks; the client refuses the next
//!   request (`Overloaded`); a reconnect; the session expires (and a new one starts);
//! * the application asks for one to three ids; time passes.
//!
//! Safety, after every step: every id reported was drawn by that generator's own
//! create (the model records who drew each number) and by no one else, is reported
//! once across both generators, is larger than the generator's previous one and than
//! every id either generator was given before the request was made;
//! every request ends at most once, in request order; a request fails only with
//! `SequenceOverflow`, and only once the counter wrapped; `poll_timeout` is never in
//! the past after `handle_timeout`.
//!
//! Liveness and cleanliness, once faults stop (both connections come back, everything
//! is answered, time passes): every request has ended within bounded virtual time, and
//! no `id-` node is left in the directory.

use alloc::collections::{BTreeMap, BTreeSet, VecDeque};
use alloc::format;
use alloc::string::{String, ToString};
use alloc::vec::Vec;
use core::time::Duration;

use zk_recipes::error::Error;
use zk_recipes::proto::*;
use zk_recipes::recipe::naming::{IdEvent, IdGenerator, IdGeneratorConfig};
use zk_recipes::recipe::{OpId, Recipe, SessionChange};
use zk_recipes::time::Instant;

const DIR: &str = "/app/ids";

struct Client {
    gen: IdGenerator,
    session: i64,
    connected: bool,
    wire: VecDeque<(OpId, Request)>,
    queued: Vec<(OpId, Request)>,
    inbox: VecDeque<(OpId, Result<Response, Error>)>,
    refuse_next: bool,
    requested: u64,
    /// The last request that ended, and the last id reported.
    last_request: u64,
    last_id: Option<i64>,
    ended: usize,
    /// The largest id reported (by anyone) when each request was made.
    floor: BTreeMap<u64, i64>,
}

struct World {
    /// Path → ephemeral owner (0: persistent).
    nodes: BTreeMap<String, i64>,
    cversion: BTreeMap<String, i32>,
    /// Who drew each number in `DIR`: client index.
    drawn: BTreeMap<i64, usize>,
    /// Ids reported, by anyone.
    reported: BTreeSet<i64>,
    wrapped: bool,
    now: Instant,
    clients: [Client; 2],
    stats: Stats,
}

fn parent(path: &str) -> &str {
    match path.rfind('/') {
        Some(0) | None => "/",
        Some(i) => &path[..i],
    }
}

impl Client {
    fn new(i: usize) -> Client {
        let session = 0x100 * (i as i64 + 1);
        let mut gen = IdGenerator::new(IdGeneratorConfig::new(DIR, 1));
        gen.handle_session(
            Instant::ZERO,
            SessionChange::Connected {
                session_id: session,
            },
        );
        Client {
            gen,
            session,
            connected: true,
            wire: VecDeque::new(),
            queued: Vec::new(),
            inbox: VecDeque::new(),
            refuse_next: false,
            requested: 0,
            last_request: 0,
            last_id: None,
            ended: 0,
            floor: BTreeMap::new(),
        }
    }
}

impl World {
    fn new(first: u8) -> World {
        let mut w = World {
            nodes: BTreeMap::new(),
            cversion: BTreeMap::new(),
            drawn: BTreeMap::new(),
            reported: BTreeSet::new(),
            wrapped: false,
            now: Instant::ZERO,
            clients: [Client::new(0), Client::new(1)],
            stats: Stats::default(),
        };
        w.nodes.insert("/".into(), 0);
        match first % 4 {
            0 => {} // no directory: the generators create it
            1 => {
                w.nodes.insert("/app".into(), 0);
                w.nodes.insert(DIR.into(), 0);
                w.cversion
                    .insert(DIR.into(), i32::MAX - i32::from(first >> 2 & 15));
            }
            _ => {
                w.nodes.insert("/app".into(), 0);
                w.nodes.insert(DIR.into(), 0);
            }
        }
        w
    }

    fn children(&self, path: &str) -> Vec<String> {
        let prefix = if path == "/" {
            "/".to_string()
        } else {
            format!("{path}/")
        };
        self.nodes
            .keys()
            .filter(|k| k.starts_with(&prefix) && k.len() > prefix.len())
            .filter(|k| !k[prefix.len()..].contains('/'))
            .map(|k| k[prefix.len()..].to_string())
            .collect()
    }

    fn bump(&mut self, dir: &str) {
        let c = self.cversion.entry(dir.to_string()).or_insert(0);
        *c = c.wrapping_add(1);
    }

    fn apply(&mut self, who: usize, req: &Request) -> Result<Response, Error> {
        let session = self.clients[who].session;
        let e = |c: ErrorCode| Err(Error::Server(c));
        match req {
            Request::Create(c) | Request::Create2(c) | Request::CreateContainer(c) => {
                let p = parent(&c.path).to_string();
                if !self.nodes.contains_key(&p) {
                    return e(ErrorCode::NoNode);
                }
                let mode = CreateMode::from_i32(c.flags).unwrap_or(CreateMode::Persistent);
                let mut path = c.path.clone();
                if mode.is_sequential() {
                    let seq = self.cversion.get(&p).copied().unwrap_or(0);
                    path = format!("{path}{seq:010}");
                    if seq < 0 {
                        self.wrapped = true;
                    }
                    if p == DIR {
                        self.drawn.insert(i64::from(seq), who);
                    }
                }
                if self.nodes.contains_key(&path) {
                    return e(ErrorCode::NodeExists);
                }
                let owner = if mode.is_ephemeral() { session } else { 0 };
                self.nodes.insert(path.clone(), owner);
                self.bump(&p);
                Ok(match req {
                    Request::Create(_) => Response::Path(path),
                    _ => Response::PathStat {
                        path,
                        stat: Stat {
                            ephemeral_owner: owner,
                            ..Stat::default()
                        },
                    },
                })
            }
            Request::Delete(d) => {
                if !self.nodes.contains_key(&d.path) {
                    return e(ErrorCode::NoNode);
                }
                if !self.children(&d.path).is_empty() {
                    return e(ErrorCode::NotEmpty);
                }
                self.nodes.remove(&d.path);
                let p = parent(&d.path).to_string();
                self.bump(&p);
                Ok(Response::Empty)
            }
            Request::GetChildren(p) => {
                if !self.nodes.contains_key(&p.path) {
                    return e(ErrorCode::NoNode);
                }
                Ok(Response::Children(self.children(&p.path)))
            }
            Request::Sync(p) => Ok(Response::Path(p.path.clone())),
            _ => Err(Error::UnexpectedReply),
        }
    }

    /// Moves requests out and events in until nothing moves; checks safety.
    fn pump(&mut self) -> Result<(), String> {
        loop {
            let mut moved = false;
            for who in 0..2 {
                let now = self.now;
                while let Some((op, req)) = self.clients[who].gen.poll_request() {
                    moved = true;
                    let c = &mut self.clients[who];
                    if core::mem::take(&mut c.refuse_next) {
                        self.stats.refused += 1;
                        c.gen.handle_reply(now, op, Err(Error::Overloaded));
                    } else if c.connected {
                        c.wire.push_back((op, req));
                    } else {
                        c.queued.push((op, req));
                    }
                }
                while let Some(e) = self.clients[who].gen.poll_event() {
                    moved = true;
                    self.check_event(who, e)?;
                }
            }
            if !moved {
                return Ok(());
            }
        }
    }

    fn check_event(&mut self, who: usize, e: IdEvent) -> Result<(), String> {
        let c = &mut self.clients[who];
        let request = match &e {
            IdEvent::Id { request, .. } | IdEvent::Failed { request, .. } => *request,
            _ => return Err(format!("generator {who}: unexpected event {e:?}")),
        };
        if request <= c.last_request || request > c.requested {
            return Err(format!(
                "generator {who}: {e:?} out of order (last ended {}, requested {})",
                c.last_request, c.requested
            ));
        }
        c.last_request = request;
        c.ended += 1;
        match e {
            IdEvent::Id { id, .. } => {
                if self.drawn.get(&id) != Some(&who) {
                    return Err(format!(
                        "generator {who}: id {id} not drawn by it (drawn by {:?})",
                        self.drawn.get(&id)
                    ));
                }
                if let Some(f) = c.floor.remove(&request).filter(|f| id <= *f) {
                    return Err(format!(
                        "generator {who}: id {id} for request {request}, made after id {f} was given"
                    ));
                }
                if !self.reported.insert(id) {
                    return Err(format!("generator {who}: id {id} reported twice"));
                }
                if c.last_id.is_some_and(|l| id <= l) {
                    return Err(format!("generator {who}: id {id} after {:?}", c.last_id));
                }
                c.last_id = Some(id);
                self.stats.ids += 1;
            }
            IdEvent::Failed { error, .. } => {
                if !matches!(error, Error::SequenceOverflow { .. }) || !self.wrapped {
                    return Err(format!(
                        "generator {who}: request {request} failed with {error:?} (wrapped: {})",
                        self.wrapped
                    ));
                }
                self.stats.overflows += 1;
            }
            _ => return Err(format!("generator {who}: unexpected event {e:?}")),
        }
        Ok(())
    }

    fn serve_one(&mut self, who: usize, deliver: bool) -> bool {
        let Some((op, req)) = self.clients[who].wire.pop_front() else {
            return false;
        };
        let r = self.apply(who, &req);
        if deliver {
            self.clients[who].inbox.push_back((op, r));
        } else {
            self.clients[who].wire.push_front((op, Request::Ping)); // failed by the break
        }
        true
    }

    fn deliver_one(&mut self, who: usize) -> bool {
        let now = self.now;
        let c = &mut self.clients[who];
        let Some((op, r)) = c.inbox.pop_front() else {
            return false;
        };
        c.gen.handle_reply(now, op, r);
        true
    }

    fn disconnect(&mut self, who: usize) {
        let now = self.now;
        let c = &mut self.clients[who];
        if !c.connected {
            return;
        }
        c.connected = false;
        let failed: Vec<OpId> = c
            .inbox
            .drain(..)
            .map(|(op, _)| op)
            .chain(c.wire.drain(..).map(|(op, _)| op))
            .collect();
        for op in failed {
            c.gen.handle_reply(now, op, Err(Error::ConnectionLoss));
        }
        c.gen.handle_session(now, SessionChange::Suspended);
    }

    fn reconnect(&mut self, who: usize) {
        let now = self.now;
        let c = &mut self.clients[who];
        if c.connected {
            return;
        }
        c.connected = true;
        c.gen.handle_session(
            now,
            SessionChange::Reconnected {
                session_id: c.session,
            },
        );
        let q: Vec<_> = c.queued.drain(..).collect();
        c.wire.extend(q);
    }

    fn expire(&mut self, who: usize) {
        let now = self.now;
        let c = &mut self.clients[who];
        let failed: Vec<OpId> = c
            .inbox
            .drain(..)
            .map(|(op, _)| op)
            .chain(c.wire.drain(..).map(|(op, _)| op))
            .chain(c.queued.drain(..).map(|(op, _)| op))
            .collect();
        for op in failed {
            c.gen.handle_reply(now, op, Err(Error::SessionExpired));
        }
        c.gen.handle_session(now, SessionChange::Expired);
        let old = c.session;
        c.session += 1;
        c.connected = true;
        let s = c.session;
        let mine: Vec<String> = self
            .nodes
            .iter()
            .filter(|(_, o)| **o == old)
            .map(|(p, _)| p.clone())
            .collect();
        for p in mine {
            self.nodes.remove(&p);
            let d = parent(&p).to_string();
            self.bump(&d);
        }
        self.stats.expiries += 1;
        self.clients[who]
            .gen
            .handle_session(now, SessionChange::Connected { session_id: s });
    }

    fn advance(&mut self, by: Duration) -> Result<(), String> {
        self.now = self.now + by;
        let now = self.now;
        for who in 0..2 {
            let g = &mut self.clients[who].gen;
            if g.poll_timeout().is_some_and(|t| t <= now) {
                g.handle_timeout(now);
                if let Some(t) = g.poll_timeout() {
                    if t <= now {
                        return Err(format!("generator {who}: deadline {t:?} not after {now:?}"));
                    }
                }
            }
        }
        Ok(())
    }

    fn request(&mut self, who: usize, n: u8) {
        let now = self.now;
        let floor = self.reported.last().copied();
        for _ in 0..n {
            let c = &mut self.clients[who];
            let r = c.gen.request(now);
            c.requested = r;
            if let Some(f) = floor {
                c.floor.insert(r, f);
            }
        }
    }

    fn step(&mut self, b: u8) -> Result<(), String> {
        let who = usize::from(b >> 4 & 1);
        let arg = b >> 5;
        match b % 16 {
            0..=3 => {
                if !self.deliver_one(who) {
                    self.serve_one(who, true);
                }
            }
            4 | 5 => {
                self.serve_one(who, true);
            }
            6 => {
                // Applied, reply lost.
                if self.clients[who].connected && self.serve_one(who, false) {
                    self.stats.lost_replies += 1;
                    self.disconnect(who);
                }
            }
            7 => self.disconnect(who),
            8 | 9 => self.reconnect(who),
            10 => self.clients[who].refuse_next = true,
            11 => {
                if arg % 4 == 0 {
                    self.expire(who);
                }
            }
            12 | 13 => self.request(who, arg % 3 + 1),
            _ => self.advance(Duration::from_millis(5 << (arg % 8)))?,
        }
        self.pump()
    }

    /// Faults stop: connected, everything answered, time passes.
    fn settle(&mut self) -> Result<(), String> {
        let start = self.now;
        self.reconnect(0);
        self.reconnect(1);
        self.pump()?;
        for _ in 0..10_000 {
            let mut moved = false;
            for who in 0..2 {
                while self.deliver_one(who) || self.serve_one(who, true) {
                    moved = true;
                    self.pump()?;
                }
            }
            let next = (0..2)
                .filter_map(|w| self.clients[w].gen.poll_timeout())
                .min();
            if let Some(t) = next {
                moved = true;
                let by = t.saturating_since(self.now);
                self.advance(by)?;
            }
            self.pump()?;
            if !moved {
                let took = self.now.saturating_since(start);
                if took > Duration::from_secs(10) {
                    return Err(format!("settling took {took:?} of virtual time"));
                }
                return Ok(());
            }
        }
        Err("no quiescence after faults stopped".into())
    }
}

/// What a schedule exercised (to show the harness is not vacuous).
#[derive(Clone, Copy, Debug, Default)]
pub struct Stats {
    /// Ids reported.
    pub ids: usize,
    /// Ids found by listing after a lost create reply.
    pub recovered: u64,
    /// Requests failed with `SequenceOverflow`.
    pub overflows: usize,
    /// Replies lost after the request applied.
    pub lost_replies: usize,
    /// Requests refused by the client.
    pub refused: usize,
    /// Session expiries.
    pub expiries: usize,
}

/// Runs one schedule; `Err` names the violated invariant.
pub fn run(schedule: &[u8]) -> Result<Stats, String> {
    let (first, rest) = match schedule.split_first() {
        Some((f, r)) => (*f, r),
        None => (2, schedule),
    };
    let mut w = World::new(first);
    w.request(0, 1);
    w.request(1, 1);
    w.pump()?;
    for &b in rest {
        w.step(b)?;
    }
    w.settle()?;
    for (who, c) in w.clients.iter().enumerate() {
        if c.ended as u64 != c.requested || c.gen.pending() != 0 {
            return Err(format!(
                "generator {who}: {} of {} requests ended after faults stopped",
                c.ended, c.requested
            ));
        }
    }
    let left: Vec<String> = w
        .children(DIR)
        .into_iter()
        .filter(|n| n.starts_with("id-"))
        .collect();
    if !left.is_empty() && w.nodes.contains_key(DIR) {
        return Err(format!("nodes left after faults stopped: {left:?}"));
    }
    w.stats.recovered = w.clients[0].gen.recovered() + w.clients[1].gen.recovered();
    Ok(w.stats)
}
