//! Three [`Counter`]s, each on its own session, adding to one node against a small model
//! of a ZooKeeper server, driven by bytes (proptest and libFuzzer share it). Each byte
//! picks a client (`(b >> 4) % 3`) and one step:
//!
//! * the server answers the client's oldest request; or applies it and the connection
//!   breaks before the reply arrives; or the connection breaks; the client refuses the
//!   next request (`Overloaded`); a reconnect; the session expires (a new one starts);
//! * another writer adds 100 to the node in one atomic step (its own compare-and-set);
//! * time passes; the user asks the client to add 1, 2 or 3, or to read the value.
//!
//! The server knows which operation of which client each write belongs to (the harness
//! tags every write request with the index of the operation running when it was sent).
//! Safety, after every step:
//!
//! * no operation's write is applied twice, and every applied write is a compare-and-set
//!   on the version it read (the node's value is always the other writer's additions plus
//!   the deltas of the applied writes: no increment lost);
//! * `Added { before, after }` is reported only for an operation whose write was applied,
//!   exactly once, and `before`/`after` are what that write replaced and wrote;
//! * a `Failed` whose error is not `may_have_applied` belongs to an operation whose write
//!   was never applied (and never is later);
//! * answers come in the order asked; no event after `Closed`; `poll_timeout` is never
//!   in the past after `handle_timeout`.
//!
//! Liveness, once faults stop (connections back, everything answered, time passes): every
//! operation asked is answered within bounded virtual time; then one more `add` on every
//! client ends with `Added`, and the node holds the other writer's additions plus the
//! `Added` deltas plus some of the deltas whose `Failed` said `may_have_applied`.

use alloc::collections::{BTreeMap, VecDeque};
use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;
use bytes::Bytes;
use core::time::Duration;

use zk_recipes::error::Error;
use zk_recipes::proto::*;
use zk_recipes::recipe::value::{counter_value, Counter, CounterEvent, CounterFormat};
use zk_recipes::recipe::{OpId, Recipe, SessionChange};
use zk_recipes::time::Instant;

const PATH: &str = "/cnt/c";
const DIR: &str = "/cnt";
const CLIENTS: usize = 3;
const OTHER_DELTA: i64 = 100;
/// Operations a client may have waiting (bounded memory).
const MAX_PENDING: usize = 4;

#[derive(Clone, Debug)]
struct Node {
    data: Bytes,
    czxid: i64,
    mzxid: i64,
    version: i32,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Asked {
    Add(i64),
    Get,
}

/// What happened to one operation's write on the server.
#[derive(Clone, Copy, Debug, Default)]
struct Applied {
    count: u32,
    before: i64,
    after: i64,
}

struct Client {
    counter: Counter,
    session: i64,
    connected: bool,
    wire: VecDeque<(OpId, Request)>,
    queued: Vec<(OpId, Request)>,
    inbox: VecDeque<(OpId, Result<Response, Error>)>,
    refuse_next: bool,
    /// Operations asked, in order.
    asked: Vec<Asked>,
    /// How many were answered.
    answered: usize,
    /// Write requests on their way: op id → operation index.
    writes: BTreeMap<OpId, usize>,
    closed: bool,
}

struct World {
    format: CounterFormat,
    nodes: BTreeMap<String, Node>,
    zxid: i64,
    next_session: i64,
    now: Instant,
    clients: Vec<Client>,
    /// (client, operation) → its write's fate.
    applied: BTreeMap<(usize, usize), Applied>,
    /// Operations reported as not applied.
    not_applied: Vec<(usize, usize)>,
    other_sum: i64,
    added_sum: i64,
    in_doubt: Vec<i64>,
    /// A request the machine must never send (an unconditional write of the counter).
    violation: Option<String>,
    stats: Stats,
}

/// What a schedule exercised (to show the harness is not vacuous).
#[derive(Clone, Copy, Debug, Default)]
pub struct Stats {
    /// `Added` events.
    pub added: usize,
    /// `Failed` events whose error says `may_have_applied`.
    pub in_doubt: usize,
    /// `Failed` events for an add that was not applied (closed, malformed, ...).
    pub failed: usize,
    /// `BadVersion` / `NodeExists` answers (lost races).
    pub races: usize,
    /// Writes applied whose reply was lost.
    pub lost_writes: usize,
    /// `Value` events.
    pub values: usize,
}

impl World {
    fn new(format: CounterFormat) -> World {
        let mut w = World {
            format,
            nodes: BTreeMap::new(),
            zxid: 1,
            next_session: 0x5e55,
            now: Instant::ZERO,
            clients: Vec::new(),
            applied: BTreeMap::new(),
            not_applied: Vec::new(),
            other_sum: 0,
            added_sum: 0,
            in_doubt: Vec::new(),
            violation: None,
            stats: Stats::default(),
        };
        w.nodes.insert(
            "/".into(),
            Node {
                data: Bytes::new(),
                czxid: 0,
                mzxid: 0,
                version: 0,
            },
        );
        for _ in 0..CLIENTS {
            let session = w.next_session;
            w.next_session += 1;
            let mut counter = Counter::new(PATH, format);
            counter.handle_session(
                w.now,
                SessionChange::Connected {
                    session_id: session,
                },
            );
            w.clients.push(Client {
                counter,
                session,
                connected: true,
                wire: VecDeque::new(),
                queued: Vec::new(),
                inbox: VecDeque::new(),
                refuse_next: false,
                asked: Vec::new(),
                answered: 0,
                writes: BTreeMap::new(),
                closed: false,
            });
        }
        w
    }

    fn value(&self) -> Result<i64, String> {
        match self.nodes.get(PATH) {
            None => Ok(0),
            Some(n) => counter_value(&n.data, self.format).map_err(|e| format!("{e}")),
        }
    }

    fn stat(n: &Node) -> Stat {
        Stat {
            czxid: n.czxid,
            mzxid: n.mzxid,
            version: n.version,
            data_length: n.data.len() as i32,
            ..Stat::default()
        }
    }

    fn parent(path: &str) -> &str {
        match path.rfind('/') {
            Some(0) | None => "/",
            Some(i) => &path[..i],
        }
    }

    fn create(&mut self, path: &str, data: Bytes) -> Result<Stat, ErrorCode> {
        if self.nodes.contains_key(path) {
            return Err(ErrorCode::NodeExists);
        }
        if !self.nodes.contains_key(Self::parent(path)) {
            return Err(ErrorCode::NoNode);
        }
        self.zxid += 1;
        let n = Node {
            data,
            czxid: self.zxid,
            mzxid: self.zxid,
            version: 0,
        };
        let stat = Self::stat(&n);
        self.nodes.insert(path.into(), n);
        Ok(stat)
    }

    fn set(&mut self, path: &str, data: Bytes, version: i32) -> Result<Stat, ErrorCode> {
        self.zxid += 1;
        let z = self.zxid;
        let n = self.nodes.get_mut(path).ok_or(ErrorCode::NoNode)?;
        if version != -1 && version != n.version {
            return Err(ErrorCode::BadVersion);
        }
        n.data = data;
        n.mzxid = z;
        n.version += 1;
        Ok(Self::stat(n))
    }

    /// Applies client `who`'s request `op`; records a write of the counter node.
    fn apply(&mut self, who: usize, op: OpId, req: &Request) -> Result<Response, Error> {
        let before = self.value();
        let tag = self.clients[who].writes.remove(&op);
        let r = match req {
            Request::Create(c) | Request::CreateContainer(c) | Request::Create2(c) => self
                .create(&c.path, c.data.clone())
                .map(|stat| Response::PathStat {
                    path: c.path.clone(),
                    stat,
                }),
            Request::SetData(s) => {
                if s.version == -1 && s.path == PATH {
                    self.violation = Some(format!("client {who}: unconditional write {s:?}"));
                }
                self.set(&s.path, s.data.clone(), s.version)
                    .map(Response::Stat)
            }
            Request::GetData(p) => match self.nodes.get(&p.path) {
                Some(n) => Ok(Response::Data {
                    data: n.data.clone(),
                    stat: Self::stat(n),
                }),
                None => Err(ErrorCode::NoNode),
            },
            Request::Sync(p) => Ok(Response::Path(p.path.clone())),
            _ => return Err(Error::UnexpectedReply),
        };
        if matches!(r, Err(ErrorCode::BadVersion | ErrorCode::NodeExists)) {
            self.stats.races += 1;
        }
        let wrote = r.is_ok() && matches!(req, Request::SetData(s) if s.path == PATH)
            || r.is_ok() && matches!(req, Request::Create2(c) if c.path == PATH);
        if wrote {
            if let (Some(k), Ok(before)) = (tag, before) {
                let after = self.value().unwrap_or(i64::MIN);
                let a = self.applied.entry((who, k)).or_default();
                a.count += 1;
                a.before = before;
                a.after = after;
            }
        }
        r.map_err(Error::Server)
    }

    /// Another writer adds 100 in one atomic step.
    fn other_add(&mut self) {
        let Ok(v) = self.value() else { return };
        let after = match self.format {
            CounterFormat::I32 => i64::from((v as i32).wrapping_add(OTHER_DELTA as i32)),
            CounterFormat::I64 => v.wrapping_add(OTHER_DELTA),
        };
        let data = self.format.encode(after);
        if self.nodes.contains_key(PATH) {
            let _ = self.set(PATH, data, -1);
        } else {
            if !self.nodes.contains_key(DIR) {
                let _ = self.create(DIR, Bytes::new());
            }
            let _ = self.create(PATH, data);
        }
        self.other_sum += OTHER_DELTA;
    }

    // ----- the client side -----

    fn on_event(&mut self, who: usize, e: CounterEvent) -> Result<(), String> {
        let c = &mut self.clients[who];
        if c.closed {
            return Err(format!("client {who}: event after Closed: {e:?}"));
        }
        if e == CounterEvent::Closed {
            c.closed = true;
            return Ok(());
        }
        let k = c.answered;
        let Some(&asked) = c.asked.get(k) else {
            return Err(format!("client {who}: answer {e:?} to nothing asked"));
        };
        c.answered += 1;
        let applied = self.applied.get(&(who, k)).copied().unwrap_or_default();
        match (asked, &e) {
            (Asked::Add(delta), CounterEvent::Added { before, after, .. }) => {
                if applied.count != 1 {
                    return Err(format!(
                        "client {who} op {k}: Added but applied {} times",
                        applied.count
                    ));
                }
                if (applied.before, applied.after) != (*before, *after) {
                    return Err(format!(
                        "client {who} op {k}: Added {before}->{after}, server wrote {}->{}",
                        applied.before, applied.after
                    ));
                }
                let expect = match self.format {
                    CounterFormat::I32 => i64::from((*before as i32).wrapping_add(delta as i32)),
                    CounterFormat::I64 => before.wrapping_add(delta),
                };
                if *after != expect {
                    return Err(format!("client {who}: {before} + {delta} != {after}"));
                }
                self.added_sum += delta;
                self.stats.added += 1;
            }
            (Asked::Add(delta), CounterEvent::Failed { error }) => {
                if error.may_have_applied() {
                    self.in_doubt.push(delta);
                    self.stats.in_doubt += 1;
                } else {
                    if applied.count != 0 {
                        return Err(format!(
                            "client {who} op {k}: Failed({error:?}) but its write was applied"
                        ));
                    }
                    self.not_applied.push((who, k));
                    self.stats.failed += 1;
                }
            }
            (Asked::Get, CounterEvent::Value { .. }) => self.stats.values += 1,
            (Asked::Get, CounterEvent::Failed { error }) if !error.may_have_applied() => {}
            (a, e) => return Err(format!("client {who}: {e:?} answers {a:?}")),
        }
        Ok(())
    }

    fn pump(&mut self) -> Result<(), String> {
        loop {
            let mut moved = false;
            for who in 0..CLIENTS {
                // Events first: a write is tagged with the operation running now.
                while let Some(e) = self.clients[who].counter.poll_event() {
                    moved = true;
                    self.on_event(who, e)?;
                }
                let c = &mut self.clients[who];
                while let Some((op, req)) = c.counter.poll_request() {
                    moved = true;
                    if matches!(&req, Request::SetData(_))
                        || matches!(&req, Request::Create2(r) if r.path == PATH)
                    {
                        c.writes.insert(op, c.answered);
                    }
                    if core::mem::take(&mut c.refuse_next) {
                        c.writes.remove(&op);
                        let now = self.now;
                        c.counter.handle_reply(now, op, Err(Error::Overloaded));
                    } else if c.connected {
                        c.wire.push_back((op, req));
                    } else {
                        c.queued.push((op, req));
                    }
                }
            }
            if !moved {
                break;
            }
        }
        self.check()
    }

    fn check(&self) -> Result<(), String> {
        if let Some(v) = &self.violation {
            return Err(v.clone());
        }
        for ((who, k), a) in &self.applied {
            if a.count > 1 {
                return Err(format!(
                    "client {who} op {k}: write applied {} times",
                    a.count
                ));
            }
        }
        for key in &self.not_applied {
            if self.applied.contains_key(key) {
                return Err(format!("{key:?}: reported not applied, applied later"));
            }
        }
        // The node is the other writer's additions plus the applied deltas (mod width).
        let mut sum = self.other_sum;
        for ((who, k), _) in self.applied.iter() {
            if let Some(Asked::Add(d)) = self.clients[*who].asked.get(*k) {
                sum = sum.wrapping_add(*d);
            }
        }
        let v = self.value()?;
        let same = match self.format {
            CounterFormat::I32 => v as i32 == sum as i32,
            CounterFormat::I64 => v == sum,
        };
        if !same {
            return Err(format!("node holds {v}, applied writes sum to {sum}"));
        }
        Ok(())
    }

    fn serve_one(&mut self, who: usize, deliver: bool) -> bool {
        let Some((op, req)) = self.clients[who].wire.pop_front() else {
            return false;
        };
        let r = self.apply(who, op, &req);
        if deliver {
            self.clients[who].inbox.push_back((op, r));
        } else {
            if matches!(req, Request::SetData(_) | Request::Create2(_)) && r.is_ok() {
                self.stats.lost_writes += 1;
            }
            self.clients[who].wire.push_front((op, Request::Ping)); // failed by the drop
        }
        true
    }

    fn deliver_one(&mut self, who: usize) -> bool {
        let now = self.now;
        let c = &mut self.clients[who];
        let Some((op, r)) = c.inbox.pop_front() else {
            return false;
        };
        c.counter.handle_reply(now, op, r);
        true
    }

    fn disconnect(&mut self, who: usize) {
        let now = self.now;
        let c = &mut self.clients[who];
        if !c.connected {
            return;
        }
        c.connected = false;
        let mut failed: Vec<OpId> = c.inbox.drain(..).map(|(op, _)| op).collect();
        failed.extend(c.wire.drain(..).map(|(op, _)| op));
        for op in failed {
            c.writes.remove(&op);
            c.counter.handle_reply(now, op, Err(Error::ConnectionLoss));
        }
        c.counter.handle_session(now, SessionChange::Suspended);
    }

    fn reconnect(&mut self, who: usize) {
        let now = self.now;
        let c = &mut self.clients[who];
        if c.connected {
            return;
        }
        c.connected = true;
        let s = c.session;
        c.counter
            .handle_session(now, SessionChange::Reconnected { session_id: s });
        for q in core::mem::take(&mut c.queued) {
            c.wire.push_back(q);
        }
    }

    fn expire(&mut self, who: usize) {
        let now = self.now;
        let session = self.next_session;
        self.next_session += 1;
        let c = &mut self.clients[who];
        let mut failed: Vec<OpId> = c.inbox.drain(..).map(|(op, _)| op).collect();
        failed.extend(c.wire.drain(..).map(|(op, _)| op));
        failed.extend(c.queued.drain(..).map(|(op, _)| op));
        for op in failed {
            c.writes.remove(&op);
            c.counter.handle_reply(now, op, Err(Error::SessionExpired));
        }
        c.counter.handle_session(now, SessionChange::Expired);
        c.session = session;
        c.connected = true;
        c.counter.handle_session(
            now,
            SessionChange::Connected {
                session_id: session,
            },
        );
    }

    fn advance(&mut self, by: Duration) -> Result<(), String> {
        self.now = self.now + by;
        let now = self.now;
        for (who, c) in self.clients.iter_mut().enumerate() {
            if c.counter.poll_timeout().is_some_and(|t| t <= now) {
                c.counter.handle_timeout(now);
                if let Some(t) = c.counter.poll_timeout() {
                    if t <= now {
                        return Err(format!("client {who}: deadline {t:?} not after {now:?}"));
                    }
                }
            }
        }
        Ok(())
    }

    fn ask(&mut self, who: usize, a: Asked) {
        let now = self.now;
        let c = &mut self.clients[who];
        if c.counter.pending() >= MAX_PENDING || c.closed {
            return;
        }
        c.asked.push(a);
        match a {
            Asked::Add(d) => c.counter.add(now, d),
            Asked::Get => c.counter.get(now),
        }
    }

    fn step(&mut self, b: u8) -> Result<(), String> {
        let who = usize::from(b >> 4) % CLIENTS;
        let arg = b >> 4;
        match b % 16 {
            0..=3 => {
                if !self.deliver_one(who) {
                    self.serve_one(who, true);
                }
            }
            4 => {
                self.serve_one(who, true);
            }
            5 => {
                // Applied, reply lost.
                if self.clients[who].connected && self.serve_one(who, false) {
                    self.disconnect(who);
                }
            }
            6 => self.disconnect(who),
            7 => self.reconnect(who),
            8 => self.clients[who].refuse_next = true,
            9 => {
                if b >> 6 == 0 {
                    self.expire(who);
                }
            }
            10 => self.other_add(),
            11 => self.advance(Duration::from_millis(5 << (arg % 8)))?,
            12 => self.ask(who, Asked::Get),
            _ => self.ask(who, Asked::Add(i64::from(b % 16 - 12))),
        }
        self.pump()
    }

    /// Faults stop: connected, everything answered, time passes. Returns the virtual
    /// time it took.
    fn settle(&mut self) -> Result<Duration, String> {
        let start = self.now;
        for who in 0..CLIENTS {
            self.reconnect(who);
        }
        self.pump()?;
        for _ in 0..500 {
            let mut moved = false;
            for who in 0..CLIENTS {
                while self.deliver_one(who) || self.serve_one(who, true) {
                    moved = true;
                    self.pump()?;
                }
            }
            let next = self
                .clients
                .iter()
                .filter_map(|c| c.counter.poll_timeout())
                .min();
            if let Some(t) = next {
                moved = true;
                let by = t.saturating_since(self.now);
                self.advance(by)?;
            }
            self.pump()?;
            if !moved {
                return Ok(self.now.saturating_since(start));
            }
        }
        Err("no quiescence after faults stopped".into())
    }

    /// Can `rest` be written as a sum of some of `deltas` (each used at most once)?
    fn subset_sum(deltas: &[i64], rest: i64) -> bool {
        let Ok(rest) = usize::try_from(rest) else {
            return false;
        };
        let mut can = alloc::vec![false; rest + 1];
        can[0] = true;
        for &d in deltas {
            let Ok(d) = usize::try_from(d) else { continue };
            for s in (d..=rest).rev() {
                can[s] = can[s] || can[s - d];
            }
        }
        can[rest]
    }
}

/// The longest a settle may take in virtual time once faults stop.
const SETTLE_BOUND: Duration = Duration::from_secs(30);

/// Runs one schedule; `Err` names the violated invariant.
pub fn run(schedule: &[u8]) -> Result<Stats, String> {
    let format = if schedule.first().is_some_and(|b| b & 0x80 != 0) {
        CounterFormat::I64
    } else {
        CounterFormat::I32
    };
    let mut w = World::new(format);
    w.pump()?;
    for &b in schedule {
        w.step(b)?;
    }
    let took = w.settle()?;
    if took > SETTLE_BOUND {
        return Err(format!("settling took {took:?}"));
    }
    for (who, c) in w.clients.iter().enumerate() {
        if c.answered != c.asked.len() || c.counter.pending() != 0 {
            return Err(format!(
                "client {who}: {} asked, {} answered after faults stopped",
                c.asked.len(),
                c.answered
            ));
        }
    }
    // One more add each, without faults: every one ends with Added.
    let added = w.stats.added;
    for who in 0..CLIENTS {
        w.ask(who, Asked::Add(1));
    }
    w.pump()?;
    let took = w.settle()?;
    if took > SETTLE_BOUND || w.stats.added != added + CLIENTS {
        return Err(format!(
            "final adds: {} Added of {CLIENTS} in {took:?}",
            w.stats.added - added
        ));
    }
    // The sessions close with an add on the wire, which the server still applies: the
    // add is answered `Failed` with a `may_have_applied` error, then `Closed`.
    for who in 0..CLIENTS {
        w.ask(who, Asked::Add(1));
    }
    w.pump()?;
    let now = w.now;
    for who in 0..CLIENTS {
        // The read, if any (an add right after our last write sends its set at once);
        // its reply arrives: the set goes out.
        if matches!(w.clients[who].wire.front(), Some((_, Request::GetData(_)))) {
            w.serve_one(who, true);
            w.deliver_one(who);
            w.pump()?;
        }
        if w.clients[who].wire.is_empty() {
            return Err(format!("client {who}: no write after the read"));
        }
        w.clients[who]
            .counter
            .handle_session(now, SessionChange::Closed);
        w.pump()?;
        // The server applies what was sent before the close.
        while let Some((op, req)) = w.clients[who].wire.pop_front() {
            let _ = w.apply(who, op, &req);
        }
        w.pump()?;
        let c = &w.clients[who];
        if !c.closed || c.answered != c.asked.len() || !c.counter.is_done() {
            return Err(format!(
                "client {who}: closed {}, {} of {} answered",
                c.closed,
                c.answered,
                c.asked.len()
            ));
        }
    }
    // Nothing lost or doubled: the node is the other writer's additions, the Added
    // deltas, and some of the in-doubt deltas.
    let v = w.value()?;
    let rest = v - w.other_sum - w.added_sum;
    let no_wrap = w.format == CounterFormat::I64 || v.abs() < i64::from(i32::MAX) / 2;
    if no_wrap && !World::subset_sum(&w.in_doubt, rest) {
        return Err(format!(
            "node {v} = other {} + added {} + {rest}, not a sum of in-doubt deltas {:?}",
            w.other_sum, w.added_sum, w.in_doubt
        ));
    }
    Ok(w.stats)
}
