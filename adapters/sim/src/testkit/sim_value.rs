//! The versioned-update recipes ([`Counter`], [`Update`]) and the watched value
//! ([`NodeWatch`]) in the simulator, under every fault the simulator has. Every client
//! runs, one operation at a time, either an increment of a shared [`Counter`]
//! (Curator's `I32` format on odd seeds, `I64` on even ones) or an [`Update`] that
//! appends a token unique to that update to a list node (a compare-and-set of the whole
//! list), and follows the counter node with a [`NodeWatch`].
//!
//! Safety, after every event:
//! * counter: no two `Added` report the same value written (an increment applied twice
//!   or lost shows up as a repeated `after`);
//! * list: no token is in the node twice (the update function never applied twice); a
//!   token reported `Updated` is in the node; a token whose `Failed` does not say
//!   `may_have_applied` is not (and never comes);
//! * watcher: every `Data` it reports is a state the counter node had (its value is its
//!   version plus one, since the node is created holding 1 and every applied increment
//!   adds one and bumps the version), versions strictly rise, and it never reports the
//!   node missing once it saw it (the node is never deleted).
//!
//! Once faults stop: clients start no new operation, but every running one goes on. A
//! little before the end each client records what its watcher holds and closes its
//! recipes. Then every operation must have ended; the counter's value `V` must satisfy
//! `A <= V <= A + D` with `A` the `Added` reports and `D` the increments whose outcome
//! is unknown to their client (a `Failed` that says `may_have_applied`, or in flight
//! when the process crashed) — each of those applied at most once, so this is the exact
//! bound; the list holds exactly the `Updated` tokens plus some of the in-doubt ones;
//! every watcher held the node's final data and version; no recipe is still hosted.

use alloc::collections::{BTreeMap, BTreeSet};
use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;
use bytes::{BufMut, Bytes, BytesMut};
use core::time::Duration;

use crate::sim::{Actor, SimConfig, Simulation, View};
use zk_recipes::client::{Client, ClientEvent, RecipeHandle};
use zk_recipes::proto::Stat;
use zk_recipes::recipe::node::{NodeWatch, NodeWatchEvent};
use zk_recipes::recipe::value::{
    counter_value, Counter, CounterEvent, CounterFormat, Proposal, Update, UpdateConfig,
    UpdateEvent,
};
use zk_recipes::time::Instant;

/// The counter node (watched by every client).
pub const COUNTER: &str = "/app/values/hits";
/// The list node (tokens appended by compare-and-set).
pub const LIST: &str = "/app/values/list";

/// What a token's update reported.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// In flight.
    Running,
    /// `Updated`.
    Updated,
    /// `Failed` that says `may_have_applied`, or in flight when the process crashed.
    InDoubt,
    /// `Failed`, nothing written.
    NotApplied,
}

enum Op {
    Add,
    Append(u32),
}

/// One client.
pub struct ValueUser {
    slot: u8,
    life: u8,
    seq: u16,
    rng: u64,
    naive: bool,
    format: CounterFormat,
    stop_at: Instant,
    close_at: Instant,
    idle_until: Instant,
    /// The time of the last step.
    now: Instant,
    counter: Option<RecipeHandle<Counter>>,
    update: Option<RecipeHandle<Update>>,
    watch: Option<RecipeHandle<NodeWatch>>,
    op: Option<Op>,
    closed: bool,
    /// `after` of every `Added`.
    pub added: Vec<i64>,
    /// Increments whose outcome this client cannot know.
    pub in_doubt: usize,
    /// Tokens appended and what their updates reported.
    pub tokens: BTreeMap<u32, Outcome>,
    /// What the watcher reported: `Some((value, version))` for data, `None` for missing.
    pub watched: Vec<Option<(i64, i32)>>,
    /// What the watcher held when the client closed it, and whether an operation was
    /// still running then.
    pub at_close: Option<(Option<(Bytes, Stat)>, bool)>,
    /// Events, for failure reports.
    pub log: Vec<String>,
}

impl ValueUser {
    /// Slot `slot`'s user; `naive`: an increment that failed in doubt is simply tried
    /// again and only its retry's outcome counted (what Curator's framework does with a
    /// lost `setData`) — the must-fail variant.
    pub fn new(
        slot: usize,
        seed: u64,
        naive: bool,
        format: CounterFormat,
        stop_at: Instant,
        close_at: Instant,
    ) -> Self {
        ValueUser {
            slot: slot as u8,
            life: 0,
            seq: 0,
            rng: seed | 1,
            naive,
            format,
            stop_at,
            close_at,
            idle_until: Instant::ZERO,
            now: Instant::ZERO,
            counter: None,
            update: None,
            watch: None,
            op: None,
            closed: false,
            added: Vec::new(),
            in_doubt: 0,
            tokens: BTreeMap::new(),
            watched: Vec::new(),
            at_close: None,
            log: Vec::new(),
        }
    }

    fn next(&mut self) -> u64 {
        self.rng ^= self.rng << 13;
        self.rng ^= self.rng >> 7;
        self.rng ^= self.rng << 17;
        self.rng
    }

    fn idle(&mut self, now: Instant) {
        self.op = None;
        self.idle_until = now + Duration::from_millis(1 + self.next() % 30);
    }

    /// Is an operation running?
    pub fn busy(&self) -> bool {
        self.op.is_some()
    }
}

/// The tokens in a list node's data (4 bytes each).
pub fn tokens(data: &[u8]) -> Vec<u32> {
    data.chunks(4)
        .map(|c| {
            let mut b = [0u8; 4];
            b[..c.len()].copy_from_slice(c);
            u32::from_be_bytes(b)
        })
        .collect()
}

impl Actor for ValueUser {
    fn step(&mut self, now: Instant, client: &mut Client, events: &[ClientEvent]) {
        self.now = now;
        for ev in events {
            let ClientEvent::Recipe { id, event } = ev else {
                continue;
            };
            if let Some(e) = event.downcast_ref::<CounterEvent>() {
                if Some(*id) != self.counter.map(|h| h.id()) {
                    continue;
                }
                self.log.push(format!("{} counter {e:?}", now.as_micros()));
                match e {
                    CounterEvent::Added { after, .. } => {
                        self.added.push(*after);
                        self.idle(now);
                    }
                    CounterEvent::Failed { error } if error.may_have_applied() && self.naive => {
                        // Naive: try again, as if the lost attempt never happened.
                        if let Some(h) = self.counter {
                            client.command(now, h, |c, now| c.add(now, 1));
                        }
                    }
                    CounterEvent::Failed { error } => {
                        if error.may_have_applied() {
                            self.in_doubt += 1;
                        }
                        self.idle(now);
                    }
                    CounterEvent::Closed => self.counter = None,
                    _ => {}
                }
            } else if let Some(e) = event.downcast_ref::<UpdateEvent>() {
                if Some(*id) != self.update.map(|h| h.id()) {
                    continue;
                }
                self.log.push(format!("{} update {e:?}", now.as_micros()));
                let Some(Op::Append(token)) = self.op else {
                    continue;
                };
                let outcome = match e {
                    UpdateEvent::Current { data, .. } => {
                        let mut list = BytesMut::new();
                        list.put_slice(data.as_deref().unwrap_or(&[]));
                        list.put_u32(token);
                        let h = self.update.expect("checked");
                        client.command(now, h, |u, now| {
                            u.propose(now, Proposal::Set(list.freeze()))
                        });
                        continue;
                    }
                    UpdateEvent::Updated { .. } => Outcome::Updated,
                    UpdateEvent::Failed { error } if error.may_have_applied() => Outcome::InDoubt,
                    _ => Outcome::NotApplied,
                };
                self.tokens.insert(token, outcome);
                self.update = None;
                self.idle(now);
            } else if let Some(e) = event.downcast_ref::<NodeWatchEvent>() {
                if Some(*id) != self.watch.map(|h| h.id()) {
                    continue;
                }
                match e {
                    NodeWatchEvent::Data { data, stat } => self.watched.push(Some((
                        counter_value(data, self.format).unwrap_or(i64::MIN),
                        stat.version,
                    ))),
                    NodeWatchEvent::Missing { .. } => self.watched.push(None),
                    NodeWatchEvent::Closed | NodeWatchEvent::Failed(_) => self.watch = None,
                    _ => {}
                }
            }
        }
        if self.closed {
            return;
        }
        if now >= self.close_at {
            self.closed = true;
            let held = self
                .watch
                .and_then(|h| client.recipe(h))
                .and_then(|w| w.value().map(|(d, s)| (d.clone(), *s)));
            self.at_close = Some((held, self.op.is_some()));
            if let Some(h) = self.watch {
                client.command(now, h, |w, now| w.close(now));
            }
            if let Some(h) = self.counter {
                client.command(now, h, |c, now| c.close(now));
            }
            return;
        }
        if self.watch.is_none() {
            let h = client.add(now, NodeWatch::new(COUNTER));
            client.command(now, h, |w, now| w.start(now));
            self.watch = Some(h);
        }
        if self.counter.is_none() {
            self.counter = Some(client.add(now, Counter::new(COUNTER, self.format)));
        }
        if self.op.is_some() || now < self.idle_until || now >= self.stop_at {
            return;
        }
        if self.next() % 2 == 0 {
            self.op = Some(Op::Add);
            self.log.push(format!("{} add", now.as_micros()));
            let h = self.counter.expect("added above");
            client.command(now, h, |c, now| c.add(now, 1));
        } else {
            self.seq += 1;
            let token =
                u32::from(self.slot) << 24 | u32::from(self.life) << 16 | u32::from(self.seq);
            self.op = Some(Op::Append(token));
            self.tokens.insert(token, Outcome::Running);
            self.log
                .push(format!("{} append {token:08x}", now.as_micros()));
            let h = client.add(now, Update::new(UpdateConfig::new(LIST)));
            self.update = Some(h);
            client.command(now, h, |u, now| u.start(now));
        }
    }

    fn wake_at(&self) -> Option<Instant> {
        if self.closed {
            None
        } else if self.op.is_none() && self.now < self.idle_until && self.idle_until < self.stop_at
        {
            Some(self.idle_until.min(self.close_at))
        } else {
            Some(self.close_at)
        }
    }

    fn restart(&mut self) {
        match self.op.take() {
            Some(Op::Add) => self.in_doubt += 1,
            Some(Op::Append(token)) => {
                self.tokens.insert(token, Outcome::InDoubt);
            }
            None => {}
        }
        self.life = self.life.wrapping_add(1);
        self.seq = 0;
        self.counter = None;
        self.update = None;
        self.watch = None;
        self.log.push(String::from("restart"));
    }
}

/// The safety invariants, after every event.
#[derive(Default)]
pub struct Checker {
    seen_added: Vec<usize>,
    seen_watched: Vec<usize>,
    afters: BTreeSet<i64>,
    last_watched: Vec<Option<(i64, i32)>>,
    /// The server's zxid and the clients' log lengths at the last list check: the list
    /// is checked again only when one of them moved.
    list_checked: (i64, usize),
}

impl Checker {
    /// After every event.
    pub fn check(&mut self, view: &View<'_, ValueUser>) -> Result<(), String> {
        let n = view.actors.len();
        self.seen_added.resize(n, 0);
        self.seen_watched.resize(n, 0);
        self.last_watched.resize(n, None);
        let stamp = (
            view.server.zxid(),
            view.actors.iter().map(|a| a.log.len()).sum::<usize>(),
        );
        if stamp != self.list_checked {
            self.list_checked = stamp;
            check_list(view)?;
        }
        for (i, a) in view.actors.iter().enumerate() {
            for &after in &a.added[self.seen_added[i]..] {
                if !self.afters.insert(after) {
                    return Err(format!(
                        "client {i}: a second increment reported writing {after}"
                    ));
                }
            }
            self.seen_added[i] = a.added.len();
            for w in &a.watched[self.seen_watched[i]..] {
                let last = self.last_watched[i];
                match (*w, last) {
                    (Some((value, version)), _) if value != i64::from(version) + 1 => {
                        return Err(format!(
                            "client {i}: watcher reported value {value} at version {version}"
                        ));
                    }
                    (Some((_, version)), Some((_, before))) if version <= before => {
                        return Err(format!(
                            "client {i}: watcher reported version {version} after {before}"
                        ));
                    }
                    (None, Some(before)) => {
                        return Err(format!(
                            "client {i}: watcher reported the node missing after {before:?}"
                        ));
                    }
                    _ => {}
                }
                if w.is_some() {
                    self.last_watched[i] = *w;
                }
            }
            self.seen_watched[i] = a.watched.len();
        }
        Ok(())
    }

    fn restarted(&mut self, i: usize) {
        self.last_watched.resize(i + 1, None);
        self.last_watched[i] = None;
    }
}

/// No token twice in the list; every `Updated` token in it, no `NotApplied` one.
fn check_list(view: &View<'_, ValueUser>) -> Result<(), String> {
    let list = view
        .server
        .node(LIST)
        .map(|(d, _)| tokens(&d))
        .unwrap_or_default();
    let mut in_list = BTreeSet::new();
    for t in &list {
        if !in_list.insert(*t) {
            return Err(format!("token {t:08x} appended twice: {list:08x?}"));
        }
    }
    for (i, a) in view.actors.iter().enumerate() {
        for (t, o) in &a.tokens {
            match o {
                Outcome::Updated if !in_list.contains(t) => {
                    return Err(format!(
                        "client {i}: token {t:08x} Updated, not in the list"
                    ));
                }
                Outcome::NotApplied if in_list.contains(t) => {
                    return Err(format!(
                        "client {i}: token {t:08x} failed as not applied, but is in the list"
                    ));
                }
                _ => {}
            }
        }
    }
    Ok(())
}

/// Totals of one schedule.
#[derive(Clone, Copy, Debug, Default)]
pub struct Totals {
    /// `Added` reports.
    pub added: usize,
    /// Increments in doubt.
    pub in_doubt: usize,
    /// Tokens `Updated`.
    pub updated: usize,
    /// Tokens in doubt.
    pub tokens_in_doubt: usize,
}

/// One schedule with every fault (1.5 s of faults, then 3 s of quiet).
pub fn run(seed: u64, clients: usize, naive: bool) -> Result<Totals, String> {
    let mut config = SimConfig::with_faults(seed, clients);
    config.duration = Duration::from_millis(4500);
    config.quiet = Duration::from_secs(3);
    config.trace = false;
    run_with(config.clone(), naive).or_else(|_| {
        config.trace = true;
        run_with(config, naive)
    })
}

/// One schedule with the given settings. Operations start until `duration - quiet`;
/// clients close their recipes 200 ms before the end.
pub fn run_with(config: SimConfig, naive: bool) -> Result<Totals, String> {
    let seed = config.seed;
    let clients = config.clients;
    let stop_at = Instant::ZERO + config.duration.saturating_sub(config.quiet);
    let close_at = Instant::ZERO + config.duration.saturating_sub(Duration::from_millis(200));
    // Curator's two formats: `SharedCount` (I32) on odd seeds, `DistributedAtomicLong`
    // (I64) on even ones.
    let format = match seed % 2 {
        0 => CounterFormat::I64,
        _ => CounterFormat::I32,
    };
    let mut sim = Simulation::new(config, |i| {
        ValueUser::new(
            i,
            ((seed << 8) | i as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ 0x2545_F491_4F6C_DD1D,
            naive,
            format,
            stop_at,
            close_at,
        )
    });
    let mut checker = Checker::default();
    let mut lives: Vec<u8> = alloc::vec![0; clients];
    sim.run(|v| {
        for (i, life) in lives.iter_mut().enumerate() {
            if v.actors[i].life != *life {
                *life = v.actors[i].life;
                checker.restarted(i);
            }
        }
        checker.check(v)
    })?;
    let mut problems = Vec::new();
    let server = sim.server();
    let node = server.node(COUNTER);
    let value = node
        .as_ref()
        .map(|(d, _)| counter_value(d, format).unwrap_or(i64::MIN))
        .unwrap_or(0);
    let mut t = Totals::default();
    let mut in_list = BTreeSet::new();
    for tok in server
        .node(LIST)
        .map(|(d, _)| tokens(&d))
        .unwrap_or_default()
    {
        in_list.insert(tok);
    }
    for (i, a) in sim.actors().iter().enumerate() {
        t.added += a.added.len();
        t.in_doubt += a.in_doubt;
        let tail = || a.log.iter().rev().take(6).collect::<Vec<_>>();
        for (tok, o) in &a.tokens {
            match o {
                Outcome::Updated => t.updated += 1,
                Outcome::InDoubt => t.tokens_in_doubt += 1,
                Outcome::Running => problems.push(format!(
                    "client {i}: update of token {tok:08x} never ended: {:?}",
                    tail()
                )),
                Outcome::NotApplied => {}
            }
            in_list.remove(tok);
        }
        match &a.at_close {
            None => problems.push(format!("client {i}: never closed")),
            Some((_, true)) => problems.push(format!(
                "client {i}: an operation still ran when faults had long stopped: {:?}",
                tail()
            )),
            Some((held, false)) => {
                let held = held.as_ref().map(|(d, s)| (d.clone(), s.version, s.mzxid));
                let on_server = node.as_ref().map(|(d, s)| (d.clone(), s.version, s.mzxid));
                if held != on_server {
                    problems.push(format!(
                        "client {i}: watcher held {held:?}, the server has {on_server:?}"
                    ));
                }
            }
        }
    }
    if !in_list.is_empty() {
        problems.push(format!("tokens nobody appended: {in_list:08x?}"));
    }
    let (a, d) = (t.added as i64, t.in_doubt as i64);
    if value < a || value > a + d {
        problems.push(format!(
            "counter is {value}: {a} increments reported Added, {d} in doubt"
        ));
    }
    problems.extend(sim.still_hosted());
    super::verdict(
        &format!("seed {seed}: broken once faults stopped"),
        &problems,
    )?;
    Ok(t)
}
