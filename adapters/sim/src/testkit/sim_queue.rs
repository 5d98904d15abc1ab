//! The real queue recipe ([`Producer`], [`Consumer`]) in the simulator: producer and
//! consumer clients, each running the full stack (codec → session → client → recipe),
//! putting, taking (at most once, or at least once with claims, completing and
//! releasing), closing and starting again, under every fault the simulator has — a
//! request or a reply lost after the server applied it (a lost put or take reply), a
//! reconnect to a lagging follower, dropped connections, server pauses, session expiry,
//! a client crash (a consumer crashing in the middle of a claim).
//!
//! The checker watches the server's tree after every event: every item that appears
//! (with the data the put gave it, unique per put), and who deleted every item that
//! goes — at most once, the consumer whose marker the same transaction bumped; at least
//! once, the holder of the item's claim, which must go in the same transaction.
//!
//! Safety, after every event:
//! * no item is created twice (a retried put never duplicates), and a producer's items
//!   land in its put order;
//! * at most once: an item is delivered at most once, and only to the consumer whose
//!   session deleted it;
//! * at least once: never two live holders of one item; a live holder's claim is on the
//!   server, owned by its session, and the item is still there; an item is deleted only
//!   together with its claim, by the claim's session; an item is completed at most once,
//!   by the session that deleted it.
//!
//! Liveness, once faults stop (the last stretch of the run is quiet; nothing is
//! cancelled): producers stop putting, consumers keep taking. Within a bounded time every
//! put is answered, the queue holds no item and (at least once) no claim. Then every
//! machine closes; by the end each has reported `Closed`, no machine is hosted, and
//! neither the queue nor the side directory holds anything. Accounting at the end: every
//! put reported `Put` is an item that existed (under the name reported); a put reported
//! failed without `may_have_applied` never created one; every item that existed was
//! delivered (and completed) exactly once — unless the session that deleted it died
//! before reporting it (at most once: a claim in doubt when its session expired or its
//! process crashed).
//!
//! The harness must be able to fail: [`Taker::NaiveGetDelete`] consumers take with
//! `getData` + `delete` and deliver whatever the delete answered, and are caught
//! delivering an item twice.

use alloc::collections::BTreeMap;
use alloc::format;
use alloc::string::{String, ToString};
use alloc::vec::Vec;
use bytes::Bytes;
use core::time::Duration;

use crate::sim::{Actor, SimConfig, SimServer, Simulation, View};
use zk_recipes::client::{Client, ClientEvent, RecipeHandle};
use zk_recipes::proto::*;
use zk_recipes::recipe::queue::{
    meta_dir, parse_item, sorted_items, Consumer, ConsumerConfig, ConsumerEvent, Delivery, Format,
    Producer, ProducerConfig, ProducerEvent, PutId, TakeId, CLAIM_PREFIX,
};
use zk_recipes::session::{SessionEvent, Token};
use zk_recipes::time::Instant;

/// The queue directory.
pub const DIR: &str = "/app/queue/jobs";

/// How consumers claim.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// [`Delivery::AtMostOnce`].
    AtMostOnce,
    /// [`Delivery::AtLeastOnce`]: claim, hold, complete (or release).
    AtLeastOnce,
}

/// What takes the items.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Taker {
    /// The [`Consumer`] recipe.
    Recipe,
    /// A broken raw-API consumer (at most once only), to prove the harness can fail:
    /// list, `getData` the lowest item, `delete` it, and deliver it whatever the delete
    /// answered.
    NaiveGetDelete,
}

/// When the phases of a run start (virtual time).
#[derive(Clone, Copy, Debug)]
pub struct Phases {
    /// Faults stop; producers stop putting.
    pub quiet_at: Instant,
    /// Every put is answered and the queue is empty; every machine closes.
    pub close_at: Instant,
}

/// What became of a put.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PutOutcome {
    /// Not answered yet.
    Pending,
    /// `Put`, with the node name if the server's answer arrived.
    Put(Option<String>),
    /// `PutFailed`.
    Failed {
        /// The item may be in the queue all the same.
        may_have_applied: bool,
    },
    /// Its process crashed before the answer.
    Abandoned,
}

/// One put: its (unique) data and outcome.
#[derive(Clone, Debug)]
pub struct PutRecord {
    /// The item's data.
    pub data: String,
    /// What became of it.
    pub outcome: PutOutcome,
}

/// One item delivered to a user (`Taken`).
#[derive(Clone, Debug)]
pub struct Delivered {
    /// The consumer's session at the time.
    pub session: i64,
    /// The item's name.
    pub name: String,
    /// Its data.
    pub data: Bytes,
    /// Delivered by the naive consumer.
    pub naive: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Role {
    Producer,
    Consumer,
}

/// The naive consumer's state.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Naive {
    Idle(Instant),
    Listing(Token),
    Reading(Token, String),
    Deleting(Token, String, Bytes),
}

/// One client's user of the queue: a producer or a consumer.
pub struct QueueUser {
    slot: usize,
    role: Role,
    mode: Mode,
    taker: Taker,
    format: Format,
    rng: u64,
    phases: Phases,
    trace: bool,
    last_now: Instant,
    machines: u32,
    producer: Option<RecipeHandle<Producer>>,
    /// Puts of the current producer not answered yet: id → index in `puts`.
    outstanding: BTreeMap<PutId, usize>,
    next_put: Instant,
    puts_made: u32,
    consumer: Option<RecipeHandle<Consumer>>,
    take: Option<TakeId>,
    next_take: Instant,
    /// Items held (at least once), and when the user is done with each.
    held: Vec<(String, Bytes, Instant)>,
    closing: bool,
    idle_until: Instant,
    naive: Naive,
    /// Every put this slot made.
    pub puts: Vec<PutRecord>,
    /// Every item delivered to this slot.
    pub deliveries: Vec<Delivered>,
    /// Every `Completed`: (session, item, data).
    pub completions: Vec<(i64, String, Bytes)>,
    /// `close` calls, and the `Closed` events that answered them.
    pub closes: (u32, u32),
    close_pending: bool,
    /// Sessions this slot had while its current take was outstanding.
    take_sessions: Vec<i64>,
    /// Items we asked to complete, and the session we asked in.
    completing: Vec<(String, Bytes, i64)>,
    /// Sessions that died with a take or a completion of ours in doubt: items they
    /// deleted may be lost (reported `TakeFailed`/`ClaimLost`, or the process crashed).
    pub doubts: Vec<i64>,
    /// What the machines reported that should never happen here.
    pub problems: Vec<String>,
    /// The last events, for failure reports.
    pub log: Vec<String>,
}

impl QueueUser {
    /// A user for slot `slot`: the first `producers` slots produce, the others consume.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        slot: usize,
        producers: usize,
        seed: u64,
        mode: Mode,
        taker: Taker,
        format: Format,
        phases: Phases,
    ) -> Self {
        QueueUser {
            slot,
            role: if slot < producers {
                Role::Producer
            } else {
                Role::Consumer
            },
            mode,
            taker,
            format,
            rng: seed | 1,
            phases,
            trace: false,
            last_now: Instant::ZERO,
            machines: 0,
            producer: None,
            outstanding: BTreeMap::new(),
            next_put: Instant::ZERO,
            puts_made: 0,
            consumer: None,
            take: None,
            next_take: Instant::ZERO,
            held: Vec::new(),
            closing: false,
            idle_until: Instant::ZERO,
            naive: Naive::Idle(Instant::ZERO),
            puts: Vec::new(),
            deliveries: Vec::new(),
            completions: Vec::new(),
            closes: (0, 0),
            close_pending: false,
            take_sessions: Vec::new(),
            completing: Vec::new(),
            doubts: Vec::new(),
            problems: Vec::new(),
            log: Vec::new(),
        }
    }

    fn next(&mut self) -> u64 {
        self.rng ^= self.rng << 13;
        self.rng ^= self.rng >> 7;
        self.rng ^= self.rng << 17;
        self.rng
    }

    fn ms(&mut self, lo: u64, hi: u64) -> Duration {
        Duration::from_millis(lo + self.next() % (hi - lo))
    }

    fn note(&mut self, now: Instant, what: impl FnOnce() -> String) {
        if !self.trace {
            return;
        }
        let what = what();
        if self.log.len() == 60 {
            self.log.remove(0);
        }
        self.log.push(format!("{} us: {what}", now.as_micros()));
    }

    /// Items this user holds (at least once).
    pub fn held(&self) -> impl Iterator<Item = (&str, &Bytes)> {
        self.held.iter().map(|(n, d, _)| (n.as_str(), d))
    }

    /// Is a machine still running (no `Closed` yet)?
    pub fn running(&self) -> bool {
        self.producer.is_some() || self.consumer.is_some()
    }

    fn on_producer_event(&mut self, now: Instant, e: &ProducerEvent) {
        self.note(now, || format!("{e:?}"));
        match e {
            ProducerEvent::Put { id, node } => {
                if let Some(at) = self.outstanding.remove(id) {
                    self.puts[at].outcome = PutOutcome::Put(node.clone());
                }
            }
            ProducerEvent::PutFailed {
                id,
                may_have_applied,
                ..
            } => {
                if let Some(at) = self.outstanding.remove(id) {
                    self.puts[at].outcome = PutOutcome::Failed {
                        may_have_applied: *may_have_applied,
                    };
                }
            }
            ProducerEvent::Closed => {
                if !self.outstanding.is_empty() {
                    self.problems.push(format!(
                        "producer Closed with puts unanswered: {:?}",
                        self.outstanding.keys().collect::<Vec<_>>()
                    ));
                }
                self.machine_ended(now);
            }
            _ => self
                .problems
                .push(format!("unexpected producer event {e:?}")),
        }
    }

    fn on_consumer_event(&mut self, now: Instant, session: i64, e: &ConsumerEvent) {
        self.note(now, || format!("{e:?}"));
        match e {
            ConsumerEvent::Taken { take, items } => {
                if Some(*take) == self.take {
                    self.take = None;
                    self.next_take = now + self.ms(0, 6);
                }
                for it in items {
                    self.deliveries.push(Delivered {
                        session,
                        name: it.name.clone(),
                        data: it.data.clone(),
                        naive: false,
                    });
                    if self.mode == Mode::AtLeastOnce {
                        let until = now + self.ms(0, 20);
                        self.held.push((it.name.clone(), it.data.clone(), until));
                    }
                }
            }
            ConsumerEvent::TimedOut { take } | ConsumerEvent::TakeFailed { take, .. } => {
                if matches!(e, ConsumerEvent::TakeFailed { .. }) {
                    // A take in doubt when its session ended: what it deleted is lost.
                    let doubt = core::mem::take(&mut self.take_sessions);
                    self.doubts.extend(doubt);
                }
                if Some(*take) == self.take {
                    self.take = None;
                    self.next_take = now + self.ms(0, 6);
                }
            }
            ConsumerEvent::Completed { item } => {
                match self.completing.iter().position(|(n, _, _)| n == item) {
                    Some(at) => {
                        let (name, data, _) = self.completing.remove(at);
                        self.completions.push((session, name, data));
                    }
                    None => self
                        .problems
                        .push(format!("Completed {item} never completed")),
                }
            }
            ConsumerEvent::ClaimLost { item } => {
                self.held.retain(|(n, _, _)| n != item);
                if let Some(at) = self.completing.iter().position(|(n, _, _)| n == item) {
                    // A completion in doubt when the session ended.
                    let (_, _, s) = self.completing.remove(at);
                    self.doubts.push(s);
                }
            }
            ConsumerEvent::Released { .. } => {}
            ConsumerEvent::CompleteFailed { item, error } => {
                // Nothing here deletes items outside the protocol, and no operation is
                // refused for good.
                self.problems
                    .push(format!("CompleteFailed {{ {item}, {error:?} }}"));
            }
            ConsumerEvent::Closed => {
                let doubt = core::mem::take(&mut self.take_sessions);
                self.doubts.extend(doubt);
                self.machine_ended(now)
            }
            _ => self
                .problems
                .push(format!("unexpected consumer event {e:?}")),
        }
    }

    fn machine_ended(&mut self, now: Instant) {
        self.producer = None;
        self.consumer = None;
        self.outstanding.clear();
        self.take = None;
        self.held.clear();
        self.closing = false;
        if self.close_pending {
            self.close_pending = false;
            self.closes.1 += 1;
        } else {
            self.problems.push("Closed without close".into());
        }
        self.idle_until = now + self.ms(1, 30);
    }

    fn start(&mut self, now: Instant, client: &mut Client) {
        self.machines += 1;
        let r = self.next() & 0xff_ffff;
        let id = format!("s{}m{}-{r:06x}", self.slot, self.machines);
        let role = self.role;
        self.note(now, || format!("new {role:?} {id}"));
        self.closing = false;
        match self.role {
            Role::Producer => {
                let mut config = ProducerConfig::new(DIR, &id);
                config.format = self.format;
                // Small batches and windows: several batches in flight, puts waiting.
                config.max_batch = 1 + (self.next() % 4) as usize;
                config.max_batches_in_flight = 1 + (self.next() % 3) as usize;
                self.producer = Some(client.add(now, Producer::new(config)));
                self.next_put = now;
            }
            Role::Consumer => {
                let mut config = ConsumerConfig::new(DIR, &id);
                config.format = self.format;
                config.spread = self.next();
                config.delivery = match self.mode {
                    Mode::AtMostOnce => Delivery::AtMostOnce,
                    Mode::AtLeastOnce => Delivery::AtLeastOnce,
                };
                self.consumer = Some(client.add(now, Consumer::new(config)));
                self.next_take = now;
            }
        }
    }

    fn close(&mut self, now: Instant, client: &mut Client) {
        self.closing = true;
        self.close_pending = true;
        self.closes.0 += 1;
        self.note(now, || "close".into());
        if let Some(h) = self.producer {
            client.command(now, h, |p, now| p.close(now));
        }
        if let Some(h) = self.consumer {
            self.held.clear();
            self.take = None;
            client.command(now, h, |c, now| c.close(now));
        }
    }

    fn act_producer(&mut self, now: Instant, client: &mut Client, h: RecipeHandle<Producer>) {
        if now >= self.phases.quiet_at || now < self.next_put {
            return;
        }
        self.next_put = now + self.ms(30, 160);
        if self.next() % 40 == 0 {
            return self.close(now, client);
        }
        for _ in 0..1 + self.next() % 3 {
            self.puts_made += 1;
            let data = format!("{}.{}.{}", self.slot, self.machines, self.puts_made);
            let priority = match self.format {
                Format::Fifo => 0,
                Format::Priority => (self.next() % 3) as u16,
                Format::Delay => 0,
            };
            let bytes = Bytes::from(data.clone());
            let r = client
                .command(now, h, |p, now| p.put_with_priority(now, bytes, priority))
                .unwrap_or(Err(zk_recipes::error::Error::Closed));
            self.note(now, || format!("put {data} -> {r:?}"));
            if let Ok(id) = r {
                self.outstanding.insert(id, self.puts.len());
                self.puts.push(PutRecord {
                    data,
                    outcome: PutOutcome::Pending,
                });
            }
        }
    }

    fn act_consumer(&mut self, now: Instant, client: &mut Client, h: RecipeHandle<Consumer>) {
        let quiet = now >= self.phases.quiet_at;
        // Settle what is done (at least once).
        let mut i = 0;
        while i < self.held.len() {
            if now < self.held[i].2 {
                i += 1;
                continue;
            }
            let (name, data, _) = self.held.remove(i);
            let release = !quiet && self.next() % 10 == 0;
            let r = if release {
                client.command(now, h, |c, now| c.release(now, &name))
            } else {
                let session = client.session().session_id();
                self.completing.push((name.clone(), data, session));
                client.command(now, h, |c, now| c.complete(now, &name))
            };
            let what = if release { "release" } else { "complete" };
            self.note(now, || format!("{what} {name} -> {r:?}"));
        }
        if self.take.is_some() || now < self.next_take || self.held.len() >= 6 {
            return;
        }
        if !quiet && self.next() % 50 == 0 {
            return self.close(now, client);
        }
        let max = 1 + (self.next() % 4) as usize;
        let deadline = match (quiet, self.next() % 5) {
            (true, 0..=2) => None,
            (true, _) => Some(now + self.ms(20, 200)),
            (false, 0) => Some(now),
            (false, 1 | 2) => Some(now + self.ms(1, 30)),
            (false, _) => None,
        };
        let take = client.command(now, h, |c, now| c.take(now, max, deadline));
        self.take_sessions.clear();
        self.note(now, || format!("take {max} until {deadline:?} -> {take:?}"));
        self.take = take;
    }

    fn act_naive(&mut self, now: Instant, client: &mut Client, events: &[ClientEvent]) {
        let session = client.session().session_id();
        for ev in events {
            let ClientEvent::Session(SessionEvent::Reply(r)) = ev else {
                continue;
            };
            let next = match (self.naive.clone(), &r.result) {
                (Naive::Listing(t), Ok(Response::Children(kids))) if t == r.token => {
                    match sorted_items(self.format, kids, 1).first() {
                        Some(name) => {
                            let path = format!("{DIR}/{name}");
                            let req = zk_recipes::client::ops::get_data(&path, false);
                            match client.submit(now, req) {
                                Ok(t) => Naive::Reading(t, name.clone()),
                                Err(_) => Naive::Idle(now + self.ms(1, 10)),
                            }
                        }
                        None => Naive::Idle(now + self.ms(1, 10)),
                    }
                }
                (Naive::Reading(t, name), Ok(Response::Data { data, .. })) if t == r.token => {
                    let path = format!("{DIR}/{name}");
                    let req = zk_recipes::client::ops::delete(&path, None);
                    match client.submit(now, req) {
                        Ok(t) => Naive::Deleting(t, name, data.clone()),
                        Err(_) => Naive::Idle(now + self.ms(1, 10)),
                    }
                }
                (Naive::Deleting(t, name, data), result) if t == r.token => {
                    // The bug: the delete's answer is not looked at.
                    self.note(now, || {
                        format!("naive delete {name} -> {result:?}; delivered")
                    });
                    self.deliveries.push(Delivered {
                        session,
                        name,
                        data,
                        naive: true,
                    });
                    Naive::Idle(now + self.ms(0, 5))
                }
                (Naive::Listing(t) | Naive::Reading(t, _), _) if t == r.token => {
                    Naive::Idle(now + self.ms(1, 10))
                }
                _ => continue,
            };
            self.naive = next;
        }
        if let Naive::Idle(until) = self.naive {
            if now >= until && now < self.phases.close_at {
                let req = zk_recipes::client::ops::get_children(DIR, false);
                self.naive = match client.submit(now, req) {
                    Ok(t) => Naive::Listing(t),
                    Err(_) => Naive::Idle(now + self.ms(1, 10)),
                };
            }
        }
    }
}

impl Actor for QueueUser {
    fn step(&mut self, now: Instant, client: &mut Client, events: &[ClientEvent]) {
        self.last_now = now;
        if self.role == Role::Consumer && self.taker == Taker::NaiveGetDelete {
            return self.act_naive(now, client, events);
        }
        let session = client.session().session_id();
        if self.take.is_some() && session != 0 && !self.take_sessions.contains(&session) {
            self.take_sessions.push(session);
        }
        for ev in events {
            match ev {
                ClientEvent::Recipe { id, event } => {
                    if Some(*id) == self.producer.map(|h| h.id()) {
                        if let Some(e) = event.downcast_ref::<ProducerEvent>() {
                            self.on_producer_event(now, e);
                        }
                    } else if Some(*id) == self.consumer.map(|h| h.id()) {
                        if let Some(e) = event.downcast_ref::<ConsumerEvent>() {
                            self.on_consumer_event(now, session, e);
                        }
                    }
                }
                ClientEvent::Session(s) if s.is_state_change() => {
                    self.note(now, || format!("session {s:?}"));
                }
                _ => {}
            }
        }
        if now >= self.phases.close_at {
            if self.running() && !self.closing {
                self.close(now, client);
            }
            return;
        }
        if self.closing {
            return;
        }
        match (self.producer, self.consumer) {
            (Some(h), _) => self.act_producer(now, client, h),
            (_, Some(h)) => self.act_consumer(now, client, h),
            (None, None) if now >= self.idle_until => {
                self.start(now, client);
                self.step(now, client, &[]);
            }
            (None, None) => {}
        }
    }

    fn wake_at(&self) -> Option<Instant> {
        let now = self.last_now;
        let mut at: Option<Instant> = None;
        let mut consider = |t: Instant| {
            let t = t.max(now + Duration::from_micros(1));
            at = Some(at.map_or(t, |a| a.min(t)));
        };
        if self.role == Role::Consumer && self.taker == Taker::NaiveGetDelete {
            if let Naive::Idle(t) = self.naive {
                if t < self.phases.close_at {
                    consider(t);
                }
            }
            return at;
        }
        if now < self.phases.close_at {
            consider(self.phases.close_at);
        }
        if self.closing {
            return at;
        }
        if self.running() {
            if now < self.phases.quiet_at {
                consider(self.phases.quiet_at);
            }
            if self.producer.is_some() && now < self.phases.quiet_at {
                consider(self.next_put);
            }
            if self.consumer.is_some() {
                for (_, _, t) in &self.held {
                    consider(*t);
                }
                if self.take.is_none() && self.held.len() < 6 {
                    consider(self.next_take);
                }
            }
        } else if now < self.phases.close_at {
            consider(self.idle_until);
        }
        at
    }

    fn restart(&mut self) {
        self.note(self.last_now, || "restart (new client)".into());
        for (_, at) in core::mem::take(&mut self.outstanding) {
            self.puts[at].outcome = PutOutcome::Abandoned;
        }
        self.producer = None;
        self.consumer = None;
        self.take = None;
        self.held.clear();
        self.closing = false;
        self.idle_until = Instant::ZERO;
        self.naive = Naive::Idle(Instant::ZERO);
        if self.close_pending {
            self.close_pending = false;
            self.closes.0 -= 1;
        }
        // The process crashed: whatever it had in doubt is lost with its session.
        let doubt = core::mem::take(&mut self.take_sessions);
        self.doubts.extend(doubt);
        self.doubts.extend(
            core::mem::take(&mut self.completing)
                .into_iter()
                .map(|(_, _, s)| s),
        );
    }
}

/// What the checker knows about an item that ever existed (by its data: unique per
/// put; names would not be if the queue directory were a container, reaped once empty
/// and made again with its sequence at 0 — the recipe makes it persistent).
#[derive(Clone, Debug)]
struct Seen {
    name: String,
    /// The session that deleted it (`Some(None)`: deleted, by whom is unknown).
    deleted_by: Option<Option<i64>>,
    delivered: u32,
    completed: u32,
}

/// Checks the invariants after every event.
pub struct Checker {
    mode: Mode,
    meta: String,
    close_at: Instant,
    zxid: i64,
    /// Items in the queue now: name → data.
    items: BTreeMap<String, Bytes>,
    /// Claims now (at least once): item → owner session.
    claims: BTreeMap<String, i64>,
    /// Every item that existed, by data.
    seen: BTreeMap<Bytes, Seen>,
    /// Per producer machine (`slot.machine`): the highest put number and its sequence,
    /// and the czxid of the queue directory it landed in.
    order: BTreeMap<String, (u64, i64, i64)>,
    seen_deliveries: Vec<usize>,
    seen_completions: Vec<usize>,
    drained: bool,
}

fn children(server: &SimServer, dir: &str) -> Vec<String> {
    server.children(dir).unwrap_or_default()
}

fn sequence(name: &str) -> Option<i64> {
    parse_item(Format::Fifo, name)
        .or_else(|| parse_item(Format::Priority, name))
        .map(|k| k.sequence)
}

impl Checker {
    /// A checker for a run in `mode`.
    pub fn new(mode: Mode, close_at: Instant) -> Self {
        Checker {
            mode,
            meta: meta_dir(DIR),
            close_at,
            zxid: -1,
            items: BTreeMap::new(),
            claims: BTreeMap::new(),
            seen: BTreeMap::new(),
            order: BTreeMap::new(),
            seen_deliveries: Vec::new(),
            seen_completions: Vec::new(),
            drained: false,
        }
    }

    /// The safety invariants, and the liveness check once at `close_at`.
    pub fn check(&mut self, view: &View<'_, QueueUser>) -> Result<(), String> {
        if view.server.zxid() != self.zxid {
            self.tree_changed(view.server)?;
            self.zxid = view.server.zxid();
        }
        self.deliveries(view)?;
        if self.mode == Mode::AtLeastOnce {
            self.holders(view)?;
        }
        if view.now >= self.close_at && !self.drained {
            self.drained = true;
            self.drain(view)?;
        }
        Ok(())
    }

    fn tree_changed(&mut self, server: &SimServer) -> Result<(), String> {
        let now_items: BTreeMap<String, Bytes> = children(server, DIR)
            .into_iter()
            .map(|n| {
                let data = server
                    .node(&format!("{DIR}/{n}"))
                    .map(|(d, _)| d)
                    .unwrap_or_default();
                (n, data)
            })
            .collect();
        let dir_czxid = server.node(DIR).map_or(0, |(_, s)| s.czxid);
        let mut now_claims = BTreeMap::new();
        let mut bumped = Vec::new();
        for n in children(server, &self.meta) {
            let Some((_, stat)) = server.node(&format!("{}/{n}", self.meta)) else {
                continue;
            };
            if let Some(item) = n.strip_prefix(CLAIM_PREFIX) {
                now_claims.insert(item.to_string(), stat.ephemeral_owner);
            } else if n.starts_with("c-") && stat.mzxid > self.zxid {
                bumped.push(stat.ephemeral_owner);
            }
        }
        // Items that went: who deleted them?
        for (name, data) in &self.items {
            if now_items.get(name) == Some(data) {
                continue;
            }
            let by = match self.mode {
                Mode::AtMostOnce => match bumped[..] {
                    [one] => Some(one),
                    _ => None,
                },
                Mode::AtLeastOnce => {
                    let claim = self.claims.get(name).copied();
                    match claim {
                        Some(owner) if !now_claims.contains_key(name) => Some(owner),
                        _ => {
                            return Err(format!(
                                "item {name} deleted without its claim (claim before: \
                                 {claim:?}, after: {:?})",
                                now_claims.get(name)
                            ))
                        }
                    }
                }
            };
            if let Some(s) = self.seen.get_mut(data) {
                s.deleted_by = Some(by);
            }
        }
        // Items that came (in sequence order): unique data, in each producer's order.
        let mut came: Vec<(i64, &String, &Bytes)> = now_items
            .iter()
            .filter(|(n, d)| self.items.get(*n) != Some(*d))
            .map(|(n, d)| (sequence(n).unwrap_or(-1), n, d))
            .collect();
        came.sort();
        for (seq, name, data) in came {
            if let Some(other) = self.seen.get(data) {
                return Err(format!(
                    "duplicate item: {name} holds the data of {} ({:?})",
                    other.name,
                    String::from_utf8_lossy(data)
                ));
            }
            let text = String::from_utf8_lossy(data).to_string();
            let mut parts = text.rsplitn(2, '.');
            let (k, machine) = (parts.next(), parts.next());
            match (machine, k.and_then(|k| k.parse::<u64>().ok())) {
                (Some(machine), Some(k)) if seq >= 0 => {
                    let last = self
                        .order
                        .entry(machine.to_string())
                        .or_insert((0, -1, dir_czxid));
                    let same_dir = last.2 == dir_czxid;
                    if k <= last.0 || (same_dir && seq <= last.1) {
                        return Err(format!(
                            "producer {machine}: put {k} landed as {name} after put {} \
                             landed with sequence {}",
                            last.0, last.1
                        ));
                    }
                    *last = (k, seq, dir_czxid);
                }
                _ => return Err(format!("foreign item {name} {text:?}")),
            }
            self.seen.insert(
                data.clone(),
                Seen {
                    name: name.clone(),
                    deleted_by: None,
                    delivered: 0,
                    completed: 0,
                },
            );
        }
        self.items = now_items;
        self.claims = now_claims;
        Ok(())
    }

    fn deliveries(&mut self, view: &View<'_, QueueUser>) -> Result<(), String> {
        let n = view.actors.len();
        self.seen_deliveries.resize(n, 0);
        self.seen_completions.resize(n, 0);
        for i in 0..n {
            let a = &view.actors[i];
            for d in &a.deliveries[self.seen_deliveries[i]..] {
                let text = String::from_utf8_lossy(&d.data);
                let Some(s) = self.seen.get_mut(&d.data) else {
                    return Err(format!("c{i}: delivered {text:?} which never existed"));
                };
                if s.name != d.name {
                    return Err(format!(
                        "c{i}: delivered {text:?} as {}, it was {}",
                        d.name, s.name
                    ));
                }
                s.delivered += 1;
                if self.mode == Mode::AtMostOnce {
                    if s.delivered > 1 {
                        return Err(format!(
                            "item {} ({text:?}) delivered twice (the second time to c{i})",
                            d.name
                        ));
                    }
                    if !d.naive && s.deleted_by != Some(Some(d.session)) {
                        return Err(format!(
                            "c{i} (session 0x{:x}): delivered {} ({text:?}) deleted by {:?}",
                            d.session, d.name, s.deleted_by
                        ));
                    }
                }
            }
            self.seen_deliveries[i] = a.deliveries.len();
            for (session, name, data) in &a.completions[self.seen_completions[i]..] {
                let Some(s) = self.seen.get_mut(data) else {
                    return Err(format!("c{i}: completed {name} which never existed"));
                };
                s.completed += 1;
                if s.completed > 1 {
                    return Err(format!("item {name} completed twice (again by c{i})"));
                }
                if s.deleted_by != Some(Some(*session)) {
                    return Err(format!(
                        "c{i} (session 0x{session:x}): Completed {name}, deleted by {:?}",
                        s.deleted_by
                    ));
                }
            }
            self.seen_completions[i] = a.completions.len();
        }
        Ok(())
    }

    /// At least once: a live holder's claim is its session's and its item is there;
    /// never two live holders of one item.
    fn holders(&self, view: &View<'_, QueueUser>) -> Result<(), String> {
        let mut holders: BTreeMap<&str, usize> = BTreeMap::new();
        for i in 0..view.actors.len() {
            if !view.live(i) {
                continue;
            }
            let session = view.session(i).0;
            for (name, data) in view.actors[i].held() {
                if let Some(j) = holders.insert(name, i) {
                    return Err(format!("two live holders of {name}: c{j} and c{i}"));
                }
                let claim = self.claims.get(name).copied();
                let item = self.items.get(name);
                if claim != Some(session) || item != Some(data) {
                    return Err(format!(
                        "c{i} (session 0x{session:x}) holds {name} ({:?}): claim owner \
                         {claim:?}, item {:?}",
                        String::from_utf8_lossy(data),
                        item.map(|d| String::from_utf8_lossy(d))
                    ));
                }
            }
        }
        Ok(())
    }

    /// Liveness at `close_at`: every put answered, the queue (and its claims) empty.
    fn drain(&self, view: &View<'_, QueueUser>) -> Result<(), String> {
        let mut problems = Vec::new();
        if !self.items.is_empty() {
            let left: Vec<&String> = self.items.keys().collect();
            problems.push(format!("items left in the queue: {left:?}"));
        }
        if !self.claims.is_empty() {
            problems.push(format!("claims left: {:?}", self.claims));
        }
        for (i, a) in view.actors.iter().enumerate() {
            let pending: Vec<&str> = a
                .puts
                .iter()
                .filter(|p| p.outcome == PutOutcome::Pending)
                .map(|p| p.data.as_str())
                .collect();
            if !pending.is_empty() {
                problems.push(format!("c{i}: puts never answered: {pending:?}"));
            }
        }
        if problems.is_empty() {
            Ok(())
        } else {
            Err(format!(
                "liveness: not drained 5 s after the faults stopped: {}",
                problems.join("; ")
            ))
        }
    }

    /// Accounting at the end of the run.
    fn account(&self, server: &SimServer, actors: &[QueueUser]) -> Vec<String> {
        let mut problems = Vec::new();
        for (data, s) in &self.seen {
            let name = &s.name;
            let text = String::from_utf8_lossy(data);
            let done = match self.mode {
                Mode::AtMostOnce => s.delivered,
                Mode::AtLeastOnce => s.completed,
            };
            if self.mode == Mode::AtLeastOnce && s.completed > 0 && s.delivered == 0 {
                problems.push(format!("{name} ({text:?}) completed, never delivered"));
            }
            if done == 1 {
                continue;
            }
            match s.deleted_by {
                None => problems.push(format!("{name} ({text:?}) never taken")),
                // Lost with a taker whose session died with it in doubt.
                Some(Some(by))
                    if !server.session_alive(by)
                        && actors.iter().any(|a| a.doubts.contains(&by)) => {}
                Some(by) => problems.push(format!(
                    "{name} ({text:?}) deleted by {by:?} but delivered {} / completed {}",
                    s.delivered, s.completed
                )),
            }
        }
        for (i, a) in actors.iter().enumerate() {
            for p in &a.puts {
                let name = self.seen.get(p.data.as_bytes()).map(|s| &s.name);
                match &p.outcome {
                    PutOutcome::Put(node)
                        if name.is_none() || (node.is_some() && node.as_ref() != name) =>
                    {
                        problems.push(format!(
                            "c{i}: put {} reported Put({node:?}), the item was {name:?}",
                            p.data
                        ))
                    }
                    PutOutcome::Put(_) => {}
                    PutOutcome::Failed {
                        may_have_applied: false,
                    } if name.is_some() => problems.push(format!(
                        "c{i}: put {} failed (not applied) but {name:?} exists",
                        p.data
                    )),
                    PutOutcome::Pending => {
                        problems.push(format!("c{i}: put {} never answered", p.data))
                    }
                    _ => {}
                }
            }
        }
        problems
    }
}

/// Totals of a run.
#[derive(Clone, Copy, Debug, Default)]
pub struct Totals {
    /// Puts made.
    pub puts: usize,
    /// Items that existed.
    pub items: usize,
    /// Items delivered (`Taken`), counting re-deliveries.
    pub delivered: usize,
    /// Items completed (at least once).
    pub completed: usize,
    /// Items lost with a consumer whose session died holding them (at most once).
    pub lost: usize,
}

impl core::ops::AddAssign for Totals {
    fn add_assign(&mut self, o: Totals) {
        self.puts += o.puts;
        self.items += o.items;
        self.delivered += o.delivered;
        self.completed += o.completed;
        self.lost += o.lost;
    }
}

/// The fault stretch of a default run.
pub const FAULTS: Duration = Duration::from_millis(1500);

/// Producers in a default run.
pub const PRODUCERS: usize = 2;

/// Consumers in a default run.
pub const CONSUMERS: usize = 3;

/// The fault settings of a default run: every fault, expiry and crashes more often than
/// the simulator's defaults (a run is short).
pub fn config(seed: u64, clients: usize) -> SimConfig {
    let mut config = SimConfig::with_faults(seed, clients);
    config.duration = FAULTS;
    config.session_timeout = Duration::from_millis(1000);
    config.lose_request = 8;
    config.lose_reply = 8;
    config.drop_connection = 60;
    config.pause_server = 10;
    config.expire_session = 25;
    config.crash_client = 25;
    config.trace = false;
    config
}

/// One default schedule: 2 producers, 3 consumers, every fault for 1.5 s, then quiet.
pub fn run(seed: u64, mode: Mode, taker: Taker) -> Result<Totals, String> {
    run_with(config(seed, PRODUCERS + CONSUMERS), PRODUCERS, mode, taker)
}

/// One schedule with the given settings; `config.duration` is the fault stretch (the
/// quiet stretch is added to it), the first `producers` clients produce.
pub fn run_with(
    mut config: SimConfig,
    producers: usize,
    mode: Mode,
    taker: Taker,
) -> Result<Totals, String> {
    let seed = config.seed;
    let clients = config.clients;
    let quiet_at = Instant::ZERO + config.duration;
    // After the faults: a crashed client comes back within 2.5 s, a dead session (and
    // its claims) expires within its timeout, a backoff waits at most 2 s.
    let close_at = quiet_at + Duration::from_millis(5000);
    let end = close_at + Duration::from_millis(3000);
    let phases = Phases { quiet_at, close_at };
    config.quiet = end.saturating_since(quiet_at);
    config.duration = end.saturating_since(Instant::ZERO);
    let format = if seed % 3 == 2 {
        Format::Priority
    } else {
        Format::Fifo
    };
    let trace = config.trace;
    let mut sim = Simulation::new(config, |i| {
        let mut user = QueueUser::new(
            i,
            producers,
            ((seed << 8) | i as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ 0x2545_F491_4F6C_DD1D,
            mode,
            taker,
            format,
            phases,
        );
        user.trace = trace;
        user
    });
    let mut checker = Checker::new(mode, close_at);
    if let Err(e) = sim.run(|v| checker.check(v)) {
        return Err(format!(
            "seed {seed} ({mode:?}, {format:?}): {e}{}",
            logs(sim.actors())
        ));
    }
    let mut problems = checker.account(sim.server(), sim.actors());
    for i in 0..clients {
        let a = &sim.actors()[i];
        problems.extend(a.problems.iter().map(|p| format!("c{i}: {p}")));
        if taker == Taker::NaiveGetDelete && a.role == Role::Consumer {
            continue;
        }
        if a.running() || a.closes.0 != a.closes.1 {
            problems.push(format!(
                "c{i}: close never reached Closed ({} closes, {} Closed)",
                a.closes.0, a.closes.1
            ));
        }
        if sim.client(i).recipes() != 0 {
            problems.push(format!(
                "c{i}: {} machines still hosted",
                sim.client(i).recipes()
            ));
        }
    }
    for dir in [DIR.to_string(), meta_dir(DIR)] {
        for n in children(sim.server(), &dir) {
            let owner = sim
                .server()
                .node(&format!("{dir}/{n}"))
                .map(|(_, s)| s.ephemeral_owner)
                .unwrap_or(0);
            problems.push(format!(
                "{dir}/{n} left (owner 0x{owner:x}, alive {})",
                sim.server().session_alive(owner)
            ));
        }
    }
    if !problems.is_empty() {
        return Err(format!(
            "seed {seed} ({mode:?}, {format:?}): broken at the end:\n{}{}",
            problems.join("\n"),
            logs(sim.actors())
        ));
    }
    let mut totals = Totals {
        items: checker.seen.len(),
        ..Totals::default()
    };
    for a in sim.actors() {
        totals.puts += a.puts.len();
        totals.delivered += a.deliveries.len();
        totals.completed += a.completions.len();
    }
    totals.lost = checker
        .seen
        .values()
        .filter(|s| match mode {
            Mode::AtMostOnce => s.delivered == 0,
            Mode::AtLeastOnce => s.completed == 0,
        })
        .count();
    Ok(totals)
}

fn logs(actors: &[QueueUser]) -> String {
    let mut s = String::from("\nclient logs (last events):\n");
    for (i, a) in actors.iter().enumerate() {
        s.push_str(&format!("c{i}: {:#?}\n", a.log));
    }
    s
}
