//! Three [`Counter`]s, each on its own session of the model world
//! ([`harness`]), adding to one node, driven by bytes (proptest and
//! libFuzzer share it). The counter on [`ME`] meets the common faults; the others
//! (clients 1 and 2) are the counter's actors, with faults of their own:
//!
//! * another writer adds 100 to the node in one atomic step (an operator's write);
//! * the user asks a client to add 1, 2 or 3, or to read the value;
//! * client 1 or 2: the server answers its oldest request, or it reads its oldest
//!   reply; the server applies its request and the connection breaks; its connection
//!   breaks, comes back, or its session expires on the server.
//!
//! The server's journal ([`Zk::journal`](super::zk::Zk::journal)) says which request
//! of which session wrote the node; every write request is tagged with the operation
//! running when it was sent ([`Tagged`]). Safety, after every step:
//!
//! * no operation's write is applied twice, and the counter never writes without a
//!   version (the node's value is always the other writer's additions plus the deltas
//!   of the applied writes: no increment lost);
//! * `Added { before, after }` is reported only for an operation whose write was applied,
//!   exactly once, and `before`/`after` are what that write replaced and wrote;
//! * a `Failed` whose error is not `may_have_applied` belongs to an operation whose write
//!   was never applied (and never is later);
//! * answers come in the order asked; no event after `Closed`; `poll_timeout` is never
//!   in the past after `handle_timeout`.
//!
//! Liveness, once faults stop (connections back, everything answered, time passes): every
//! operation asked is answered within bounded virtual time; then one more `add` on every
//! client ends with `Added`; then each session closes with one more add on the wire
//! (which the server still applies): `Failed` with a `may_have_applied` error, `Closed`,
//! the machine done; and the node holds the other writer's additions plus the `Added`
//! deltas plus some of the deltas whose `Failed` said `may_have_applied`.

use alloc::collections::{BTreeMap, BTreeSet, VecDeque};
use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;
use bytes::Bytes;
use core::time::Duration;

use zk_recipes::error::Error;
use zk_recipes::proto::*;
use zk_recipes::recipe::value::{counter_value, Counter, CounterEvent, CounterFormat};
use zk_recipes::recipe::{Machine, OpId, Recipe, SessionChange};
use zk_recipes::session::WatchEvent;
use zk_recipes::time::Instant;

use super::harness::{self, FaultCounts, Harness, Script, ME};
use super::zk::{Happened, Link};

const PATH: &str = "/cnt/c";
const DIR: &str = "/cnt";
const CLIENTS: usize = 3;
const OTHER_DELTA: i64 = 100;
/// Operations a client may have waiting (bounded memory).
const MAX_PENDING: usize = 4;
/// The longest each phase of the settle may take in virtual time once faults stop.
const SETTLE_BOUND: Duration = Duration::from_secs(30);

/// A [`Counter`] whose write requests are tagged with the operation running when each
/// was sent (the index of the first operation not answered yet).
pub struct Tagged {
    /// The counter.
    pub counter: Counter,
    /// Events drained from the counter ahead of a request (so the tag is right).
    events: VecDeque<CounterEvent>,
    /// Answers drained so far.
    answered: usize,
    /// Write requests: op id → operation index.
    writes: BTreeMap<OpId, usize>,
    /// A request the machine must never send (an unconditional write of the counter).
    violation: Option<String>,
    /// Requests whose reply was lost (`ConnectionLoss`, `SessionExpired`).
    lost: BTreeSet<OpId>,
}

impl Tagged {
    fn new(counter: Counter) -> Self {
        Tagged {
            counter,
            events: VecDeque::new(),
            answered: 0,
            writes: BTreeMap::new(),
            violation: None,
            lost: BTreeSet::new(),
        }
    }
}

impl Machine for Tagged {
    fn handle_reply(&mut self, now: Instant, op: OpId, result: Result<Response, Error>) {
        if matches!(result, Err(Error::ConnectionLoss | Error::SessionExpired)) {
            self.lost.insert(op);
        }
        self.counter.handle_reply(now, op, result)
    }
    fn handle_watch(&mut self, now: Instant, op: OpId, event: &WatchEvent) {
        self.counter.handle_watch(now, op, event)
    }
    fn handle_session(&mut self, now: Instant, change: SessionChange) {
        self.counter.handle_session(now, change)
    }
    fn handle_timeout(&mut self, now: Instant) {
        self.counter.handle_timeout(now)
    }
    fn handle_abandon(&mut self, now: Instant) {
        self.counter.handle_abandon(now)
    }
    fn poll_request(&mut self) -> Option<(OpId, Request)> {
        // Events first: a write is tagged with the operation running now.
        while let Some(e) = self.counter.poll_event() {
            if e != CounterEvent::Closed {
                self.answered += 1;
            }
            self.events.push_back(e);
        }
        let (op, req) = self.counter.poll_request()?;
        match &req {
            Request::SetData(s) if s.path == PATH => {
                if s.version == -1 {
                    self.violation = Some(format!("unconditional write {s:?}"));
                }
                self.writes.insert(op, self.answered);
            }
            Request::Create2(c) | Request::Create(c) if c.path == PATH => {
                self.writes.insert(op, self.answered);
            }
            _ => {}
        }
        Some((op, req))
    }
    fn poll_timeout(&self) -> Option<Instant> {
        self.counter.poll_timeout()
    }
    fn is_done(&self) -> bool {
        self.counter.is_done() && self.events.is_empty()
    }
}

impl Recipe for Tagged {
    type Event = CounterEvent;
    fn poll_event(&mut self) -> Option<CounterEvent> {
        if let Some(e) = self.events.pop_front() {
            return Some(e);
        }
        let e = self.counter.poll_event()?;
        if e != CounterEvent::Closed {
            self.answered += 1;
        }
        Some(e)
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Asked {
    Add(i64),
    Get,
}

/// What happened to one operation's write on the server.
#[derive(Clone, Copy, Debug, Default)]
struct Fate {
    count: u32,
    before: i64,
    after: i64,
}

#[derive(Default)]
struct Client {
    /// Operations asked, in order.
    asked: Vec<Asked>,
    /// How many were answered.
    answered: usize,
    /// Write requests: op id → operation index (copied from the machine's tags).
    writes: BTreeMap<OpId, usize>,
    /// Requests whose reply was lost (copied from the machine).
    lost: BTreeSet<OpId>,
    closed: bool,
}

stats! {
    /// What a schedule exercised (to show the harness is not vacuous).
    pub struct Stats {
        /// `Added` events.
        pub added: usize,
        /// `Failed` events whose error says `may_have_applied`.
        pub in_doubt: usize,
        /// `Failed` events for an add that was not applied (closed, malformed, ...).
        pub failed: usize,
        /// Lost races (`BadVersion` / `NodeExists`) of clients 1 and 2.
        pub races: usize,
        /// Writes of the counter node applied whose reply was lost (any client).
        pub lost_writes: usize,
        /// `Value` events.
        pub values: usize,
        /// The common faults (of the counter on [`ME`]).
        pub faults: FaultCounts,
    }
}

type H = Harness<Tagged>;

struct ValueScript {
    format: CounterFormat,
    clients: Vec<Client>,
    /// (client, operation) → its write's fate.
    applied: BTreeMap<(usize, usize), Fate>,
    /// Journal entries judged so far.
    journal_seen: usize,
    /// Operations reported as not applied.
    not_applied: Vec<(usize, usize)>,
    other_sum: i64,
    added_sum: i64,
    in_doubt: Vec<i64>,
    stats: Stats,
    /// Settle phase: 0 answer everything, 1 one more add each, 2 done.
    phase: u8,
    phase_start: Instant,
    added_at_phase: usize,
}

fn value_of(data: Option<&Bytes>, format: CounterFormat) -> Result<i64, String> {
    match data {
        None => Ok(0),
        Some(d) => counter_value(d, format).map_err(|e| format!("{e}")),
    }
}

impl ValueScript {
    fn value(&self, h: &H) -> Result<i64, String> {
        value_of(h.world.zk.nodes.get(PATH).map(|n| &n.data), self.format)
    }

    /// Copies the machines' write tags, then judges the server's new journal entries.
    fn judge_journal(&mut self, h: &H) {
        for (who, c) in self.clients.iter_mut().enumerate() {
            if let Some(m) = h.world.machines[who].as_ref() {
                c.writes.extend(m.writes.iter().map(|(k, v)| (*k, *v)));
                c.lost.extend(m.lost.iter().copied());
            }
        }
        let Some(journal) = h.world.zk.journal.as_ref() else {
            return;
        };
        for a in &journal[self.journal_seen.min(journal.len())..] {
            if a.path != PATH {
                continue;
            }
            let Some(&k) = self.clients[a.session].writes.get(&a.op) else {
                continue;
            };
            let before = value_of(a.before.as_ref(), self.format);
            let after = value_of(a.after.as_ref(), self.format);
            if let (Ok(before), Ok(after)) = (before, after) {
                let f = self.applied.entry((a.session, k)).or_default();
                f.count += 1;
                f.before = before;
                f.after = after;
            }
        }
        self.journal_seen = journal.len();
    }

    fn on_event(&mut self, who: usize, e: &CounterEvent) -> Result<(), String> {
        let c = &mut self.clients[who];
        if c.closed {
            return Err(format!("client {who}: event after Closed: {e:?}"));
        }
        if *e == CounterEvent::Closed {
            c.closed = true;
            return Ok(());
        }
        let k = c.answered;
        let Some(&asked) = c.asked.get(k) else {
            return Err(format!("client {who}: answer {e:?} to nothing asked"));
        };
        c.answered += 1;
        let applied = self.applied.get(&(who, k)).copied().unwrap_or_default();
        match (asked, e) {
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

    /// The server-side invariants: no write applied twice, none applied after it was
    /// reported not applied, and the node is the sum of what was applied.
    fn check_server(&self, h: &H) -> Result<(), String> {
        for who in 0..CLIENTS {
            if let Some(v) = h.world.machines[who]
                .as_ref()
                .and_then(|m| m.violation.as_ref())
            {
                return Err(format!("client {who}: {v}"));
            }
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
        for (who, k) in self.applied.keys() {
            if let Some(Asked::Add(d)) = self.clients[*who].asked.get(*k) {
                sum = sum.wrapping_add(*d);
            }
        }
        let v = self.value(h)?;
        let same = match self.format {
            CounterFormat::I32 => v as i32 == sum as i32,
            CounterFormat::I64 => v == sum,
        };
        if !same {
            return Err(format!("node holds {v}, applied writes sum to {sum}"));
        }
        Ok(())
    }

    /// Events and requests of client `who` (1 or 2: ME's go through the harness).
    fn other(
        &mut self,
        h: &mut H,
        who: usize,
        happened: Vec<Happened<CounterEvent>>,
    ) -> Result<(), String> {
        self.judge_journal(h);
        for x in &happened {
            match x {
                Happened::Event(e) => {
                    h.note(format!("  client {who} event {e:?}"));
                    self.on_event(who, e)?;
                }
                Happened::Sent(r) => {
                    h.note(format!("  client {who} sent {}", harness::describe(r)))
                }
            }
        }
        self.judge_journal(h);
        self.check_server(h)
    }

    /// The user asks client `who` for `a` (if it runs and has room).
    fn ask(&mut self, h: &mut H, who: usize, a: Asked) -> Result<(), String> {
        let Some(m) = h.world.machines[who].as_ref() else {
            return Ok(());
        };
        if m.counter.pending() >= MAX_PENDING || self.clients[who].closed {
            return Ok(());
        }
        self.clients[who].asked.push(a);
        h.note(format!("  client {who} asked {a:?}"));
        let f = move |m: &mut Tagged, now: Instant| match a {
            Asked::Add(d) => m.counter.add(now, d),
            Asked::Get => m.counter.get(now),
        };
        if who == ME {
            h.user(self, f)?;
            Ok(())
        } else {
            let happened = h.world.call(who, f);
            self.other(h, who, happened)
        }
    }

    /// Another writer adds 100 in one atomic step.
    fn other_add(&mut self, h: &mut H) {
        let Ok(v) = self.value(h) else { return };
        let after = match self.format {
            CounterFormat::I32 => i64::from((v as i32).wrapping_add(OTHER_DELTA as i32)),
            CounterFormat::I64 => v.wrapping_add(OTHER_DELTA),
        };
        let data = self.format.encode(after);
        let zk = &mut h.world.zk;
        let r = if zk.nodes.contains_key(PATH) {
            zk.write_as(
                None,
                &Request::SetData(SetDataRequest {
                    path: PATH.into(),
                    data,
                    version: -1,
                }),
            )
        } else {
            let create = |path: &str, data: Bytes| {
                Request::Create2(CreateRequest {
                    path: path.into(),
                    data,
                    acl: Acl::open_unsafe(),
                    flags: CreateMode::Persistent.to_i32(),
                })
            };
            if !zk.nodes.contains_key(DIR) {
                let _ = zk.write_as(None, &create(DIR, Bytes::new()));
            }
            zk.write_as(None, &create(PATH, data))
        };
        h.note(format!("  another writer adds {OTHER_DELTA}: {r:?}"));
        if r.is_ok() {
            self.other_sum += OTHER_DELTA;
        }
    }

    /// A step of client `who` (1 or 2), with its own faults.
    fn other_step(&mut self, h: &mut H, who: usize, arg: u8) -> Result<(), String> {
        // Its time passes with ME's.
        if h.world.now[who] < h.now() {
            h.world.now[who] = h.now();
            let happened = h.world.pump(who);
            self.other(h, who, happened)?;
        }
        let happened = match arg % 8 {
            0..=2 => {
                self.count_race(h, who);
                h.world.zk.serve(who);
                Vec::new()
            }
            3 | 4 => h.world.deliver(who),
            5 => {
                let s = &h.world.zk.sessions[who];
                if s.link == Link::Up && !s.wire.is_empty() {
                    h.world.zk.serve(who);
                }
                h.world.drop_connection(who)
            }
            6 => h.world.drop_connection(who),
            _ => {
                if arg & 8 != 0 && h.world.zk.sessions[who].link == Link::Down {
                    h.note(format!("  client {who}: the server expires its session"));
                    h.world.expire_on_server(who);
                    Vec::new()
                } else {
                    h.world.reconnect(who, arg & 16 != 0)
                }
            }
        };
        self.other(h, who, happened)
    }

    /// Counts a lost race if client `who`'s next request will be refused for its version.
    fn count_race(&mut self, h: &H, who: usize) {
        let zk = &h.world.zk;
        if let Some((_, r)) = zk.sessions[who].wire.front() {
            let lost = match r {
                Request::SetData(s) if s.path == PATH => {
                    zk.nodes.get(PATH).is_none_or(|n| n.version != s.version)
                }
                Request::Create2(c) | Request::Create(c) if c.path == PATH => {
                    zk.nodes.contains_key(PATH)
                }
                _ => false,
            };
            if lost {
                self.stats.races += 1;
            }
        }
    }

    /// Everything of every client is answered and no timer waits.
    fn quiet(h: &H) -> bool {
        (0..CLIENTS).all(|c| {
            let s = &h.world.zk.sessions[c];
            s.link == Link::Up
                && s.wire.is_empty()
                && s.out.is_empty()
                && h.world.deadline(c).is_none()
        })
    }

    /// Faults stopped: the other clients reconnect and exchange everything.
    fn settle_others(&mut self, h: &mut H) -> Result<(), String> {
        for who in 1..CLIENTS {
            if h.world.zk.sessions[who].link != Link::Up {
                let happened = h.world.reconnect(who, false);
                self.other(h, who, happened)?;
            }
            for _ in 0..64 {
                let s = &h.world.zk.sessions[who];
                if s.wire.is_empty() && s.out.is_empty() {
                    break;
                }
                while !h.world.zk.sessions[who].wire.is_empty() {
                    self.count_race(h, who);
                    h.world.zk.serve(who);
                }
                while !h.world.zk.sessions[who].out.is_empty() {
                    let happened = h.world.deliver(who);
                    self.other(h, who, happened)?;
                }
            }
            // Their time passes with ME's (the harness advances ME's clock).
            if h.world.now[who] < h.now() {
                h.world.now[who] = h.now();
                let happened = h.world.pump(who);
                self.other(h, who, happened)?;
            }
        }
        Ok(())
    }

    /// The sessions close with an add on the wire, which the server still applies: the
    /// add is answered `Failed` with a `may_have_applied` error, then `Closed`.
    fn close_all(&mut self, h: &mut H) -> Result<(), String> {
        for who in 0..CLIENTS {
            self.ask(h, who, Asked::Add(1))?;
        }
        for who in 0..CLIENTS {
            // The read, if any (an add right after our last write sends its set at
            // once); its reply arrives: the set goes out.
            if matches!(
                h.world.zk.sessions[who].wire.front(),
                Some((_, Request::GetData(_)))
            ) {
                h.world.zk.serve(who);
                let happened = h.world.deliver(who);
                self.after_any(h, who, happened)?;
            }
            if h.world.zk.sessions[who].wire.is_empty() {
                return Err(format!("client {who}: no write after the read"));
            }
            // Kept by the script: the host drops a done machine.
            let happened = h
                .world
                .call(who, |m, now| m.handle_session(now, SessionChange::Closed));
            self.after_any(h, who, happened)?;
            // The server applies what was sent before the close; the replies go nowhere.
            while h.world.zk.serve(who) {}
            h.world.zk.sessions[who].out.clear();
            self.judge_journal(h);
            self.check_server(h)?;
            let c = &self.clients[who];
            if !c.closed || c.answered != c.asked.len() || h.world.machines[who].is_some() {
                return Err(format!(
                    "client {who}: closed {}, {} of {} answered, done {}",
                    c.closed,
                    c.answered,
                    c.asked.len(),
                    h.world.machines[who].is_none()
                ));
            }
        }
        Ok(())
    }

    fn after_any(
        &mut self,
        h: &mut H,
        who: usize,
        happened: Vec<Happened<CounterEvent>>,
    ) -> Result<(), String> {
        if who == ME {
            // ME's events through the script's check, as the harness would.
            self.check(h, &happened)
        } else {
            self.other(h, who, happened)
        }
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

impl Script<Tagged> for ValueScript {
    const ACTS: u8 = 5;

    fn act(&mut self, h: &mut H, which: u8, arg: u8) -> Result<(), String> {
        match which {
            0 => self.other_add(h),
            1 => {
                let a = if arg % 4 == 0 {
                    Asked::Get
                } else {
                    Asked::Add(i64::from(arg % 4))
                };
                self.ask(h, ME, a)?;
            }
            2 => {
                let who = 1 + usize::from(arg & 1);
                let a = if (arg >> 1) % 4 == 0 {
                    Asked::Get
                } else {
                    Asked::Add(i64::from((arg >> 1) % 4))
                };
                self.ask(h, who, a)?;
            }
            _ => {
                let who = 1 + usize::from(arg >> 7);
                self.other_step(h, who, arg)?;
            }
        }
        Ok(())
    }

    fn check(&mut self, h: &H, happened: &[Happened<CounterEvent>]) -> Result<(), String> {
        self.judge_journal(h);
        for x in happened {
            if let Happened::Event(e) = x {
                self.on_event(ME, e)?;
            }
        }
        self.judge_journal(h);
        self.check_server(h)
    }

    fn settle(&mut self, h: &mut H, round: u32) -> Result<bool, String> {
        if round == 0 {
            self.phase_start = h.now();
        }
        self.settle_others(h)?;
        if h.now().saturating_since(self.phase_start) > SETTLE_BOUND {
            return Err(format!(
                "liveness: settle phase {} took over {SETTLE_BOUND:?}",
                self.phase
            ));
        }
        if !Self::quiet(h) {
            return Ok(false);
        }
        match self.phase {
            0 => {
                for (who, c) in self.clients.iter().enumerate() {
                    let pending = h.world.machines[who]
                        .as_ref()
                        .map_or(0, |m| m.counter.pending());
                    if c.answered != c.asked.len() || pending != 0 {
                        return Err(format!(
                            "client {who}: {} asked, {} answered after faults stopped",
                            c.asked.len(),
                            c.answered
                        ));
                    }
                }
                // One more add each, without faults: every one ends with Added.
                self.phase = 1;
                self.phase_start = h.now();
                self.added_at_phase = self.stats.added;
                for who in 0..CLIENTS {
                    self.ask(h, who, Asked::Add(1))?;
                }
                Ok(false)
            }
            _ => {
                if self.stats.added != self.added_at_phase + CLIENTS {
                    return Err(format!(
                        "final adds: {} Added of {CLIENTS}",
                        self.stats.added - self.added_at_phase
                    ));
                }
                self.close_all(h)?;
                self.phase = 2;
                Ok(true)
            }
        }
    }

    fn end(&mut self, h: &H) -> Result<(), String> {
        if self.phase != 2 {
            return Err(format!(
                "liveness: the settle never ended (phase {})",
                self.phase
            ));
        }
        // Nothing lost or doubled: the node is the other writer's additions, the Added
        // deltas, and some of the in-doubt deltas.
        let v = self.value(h)?;
        let rest = v - self.other_sum - self.added_sum;
        let no_wrap = self.format == CounterFormat::I64 || v.abs() < i64::from(i32::MAX) / 2;
        if no_wrap && !Self::subset_sum(&self.in_doubt, rest) {
            return Err(format!(
                "node {v} = other {} + added {} + {rest}, not a sum of in-doubt deltas {:?}",
                self.other_sum, self.added_sum, self.in_doubt
            ));
        }
        Ok(())
    }
}

/// Runs one schedule; `Err` names the violated invariant and the last steps taken.
pub fn run(schedule: &[u8]) -> Result<Stats, String> {
    let mut input = schedule.iter().copied();
    let format = if input.next().is_some_and(|b| b & 0x80 != 0) {
        CounterFormat::I64
    } else {
        CounterFormat::I32
    };
    let mut h: H = Harness::new(CLIENTS);
    h.world.zk.journal = Some(Vec::new());
    let mut script = ValueScript {
        format,
        clients: (0..CLIENTS).map(|_| Client::default()).collect(),
        applied: BTreeMap::new(),
        journal_seen: 0,
        not_applied: Vec::new(),
        other_sum: 0,
        added_sum: 0,
        in_doubt: Vec::new(),
        stats: Stats::default(),
        phase: 0,
        phase_start: Instant::ZERO,
        added_at_phase: 0,
    };
    for who in 1..CLIENTS {
        let happened = h
            .world
            .host(who, Tagged::new(Counter::new(PATH, format)), |_, _| {});
        script.other(&mut h, who, happened)?;
    }
    let started = h.host(
        &mut script,
        Tagged::new(Counter::new(PATH, format)),
        |_, _| {},
    );
    started.and_then(|()| harness::run(&mut h, &mut script, &mut input))?;
    script.stats.faults = h.faults;
    // Writes of the counter node applied whose reply was lost.
    script.stats.lost_writes = h.world.zk.journal.as_ref().map_or(0, |j| {
        j.iter()
            .filter(|a| a.path == PATH && script.clients[a.session].lost.contains(&a.op))
            .count()
    });
    Ok(script.stats)
}
