//! Queue [`Producer`]s and [`Consumer`]s in the model world ([`harness`]),
//! driven by bytes (proptest and libFuzzer share it). Each machine has its own session
//! (client `i` hosts machine `i`). The first byte chooses one or two producers, one to
//! three consumers, the delivery (at most once or at least once), the item format, and
//! whether the queue and side directories exist; the second whether the side
//! directory is a container (reaped once empty) and
//! whether the machine under test ([`ME`], which meets the common faults: lost replies,
//! lagging followers, refusals, expiries, reaps) is the first consumer or the first
//! producer. Then the common faults, and the queue's actors:
//!
//! * every machine (not only [`ME`]): the server answers its oldest request, or answers
//!   it and the connection breaks before the reply arrives (a lost put or take reply),
//!   it reads a reply, its connection breaks or comes back (perhaps to a lagging
//!   follower), the session refuses a request or the server throttles one, its session
//!   expires (on the server, or the client gives up on it), its time passes;
//! * the users: put, take (with and without deadline), complete or release a held item,
//!   close; a quiet moment for one machine (it works and exchanges until nothing is on
//!   its way, while others may be down);
//! * an operator purges an item; the server reaps an empty container (the side
//!   directory or its marker-less state; more often than the common steps do). The
//!   queue's directory is persistent (the recipe makes it so; made beforehand here, it
//!   is too): its names are never reused. A container made by someone else, or an
//!   operator deleting the empty directory, would reuse names under a reader: outside
//!   the recipe's contract (see the queue module docs), so never done here.
//!
//! Safety, after every step: no item is created twice (a retried put never duplicates)
//! and a producer's items land in put order; an item is deleted only by a purge or by a
//! transaction that bumps the deleter's consumer marker (at most once) or deletes the
//! deleter's own claim on it (at least once) — judged on the model's zxids; at most
//! once, an item is delivered at most once and only to the session that deleted it; at
//! least once, `Taken` only while its claim exists as the consumer last heard, never two
//! live holders of one item, a live holder's claim and item are on the server (unless
//! purged), an item is completed at most once and by the session that deleted it; one
//! final event per machine and nothing after it (no request either); a handled
//! deadline never in the past.
//!
//! Liveness, at the end — faults stop, every session comes back, consumers keep taking
//! and completing (a consumer that was closed is replaced). Within a bounded number of
//! rounds every put is answered and the queue holds no item and no claim. Then every
//! machine closes: each reports `Closed` once and is done, and the side directory is
//! empty. Accounting: a put reported `Put` created its item (under the name reported), a
//! put failed without `may_have_applied` created none, and every item not purged was
//! delivered (completed) exactly once — unless the session that deleted it expired
//! with that take or completion in doubt.

use alloc::collections::BTreeMap;
use alloc::format;
use alloc::string::{String, ToString};
use alloc::vec::Vec;
use bytes::Bytes;
use core::time::Duration;

use zk_recipes::error::Error;
use zk_recipes::proto::*;
use zk_recipes::recipe::delay_queue;
use zk_recipes::recipe::queue::{
    meta_dir, parse_item, Consumer, ConsumerConfig, ConsumerEvent, Delivery, Format, Producer,
    ProducerConfig, ProducerEvent, PutId, TakeId, CLAIM_PREFIX,
};
use zk_recipes::recipe::{Machine, OpId, Recipe, SessionChange};
use zk_recipes::session::WatchEvent;
use zk_recipes::time::Instant;

use super::harness::{self, FaultCounts, Harness, Machines, Script, ME};
use super::zk::{Happened, Link};

const DIR: &str = "/q";

/// A producer or a consumer: what one client of the world hosts.
// A handful of machines per run: boxing them would buy nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Debug)]
pub enum QueueMachine {
    /// A producer.
    P(Producer),
    /// A consumer.
    C(Consumer),
}

/// What a [`QueueMachine`] reports.
#[derive(Clone, Debug)]
pub enum QueueEvent {
    /// A producer's event.
    P(ProducerEvent),
    /// A consumer's event.
    C(ConsumerEvent),
}

macro_rules! both {
    ($self:expr, $m:ident => $e:expr) => {
        match $self {
            QueueMachine::P($m) => $e,
            QueueMachine::C($m) => $e,
        }
    };
}

impl Machine for QueueMachine {
    fn handle_reply(&mut self, now: Instant, op: OpId, result: Result<Response, Error>) {
        both!(self, m => m.handle_reply(now, op, result))
    }
    fn handle_watch(&mut self, now: Instant, op: OpId, event: &WatchEvent) {
        both!(self, m => m.handle_watch(now, op, event))
    }
    fn handle_session(&mut self, now: Instant, change: SessionChange) {
        both!(self, m => m.handle_session(now, change))
    }
    fn handle_timeout(&mut self, now: Instant) {
        both!(self, m => m.handle_timeout(now))
    }
    fn handle_abandon(&mut self, now: Instant) {
        both!(self, m => m.handle_abandon(now))
    }
    fn poll_request(&mut self) -> Option<(OpId, Request)> {
        both!(self, m => m.poll_request())
    }
    fn poll_timeout(&self) -> Option<Instant> {
        both!(self, m => m.poll_timeout())
    }
    fn is_done(&self) -> bool {
        both!(self, m => m.is_done())
    }
}

impl Recipe for QueueMachine {
    type Event = QueueEvent;
    fn poll_event(&mut self) -> Option<QueueEvent> {
        match self {
            QueueMachine::P(m) => m.poll_event().map(QueueEvent::P),
            QueueMachine::C(m) => m.poll_event().map(QueueEvent::C),
        }
    }
}

type H = Harness<QueueMachine>;

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
    purged: bool,
    delivered: u32,
    completed: u32,
}

/// The user's view of one client's machine.
struct Slot {
    producer: bool,
    /// The client's session as of the last look (events that come with a new session
    /// may be about this one: a take in doubt when it expired).
    session: i64,
    finals: u32,
    closing: bool,
    /// Producer: puts not answered yet → index in `puts`.
    outstanding: BTreeMap<PutId, usize>,
    /// Consumer: the take waiting, items held, completions asked (name, data, session).
    take: Option<TakeId>,
    held: Vec<(String, Bytes)>,
    completing: Vec<(String, Bytes, i64)>,
}

stats! {
    /// Counts of one run, to show the harness is not vacuous.
    pub struct Stats {
        /// Items that existed.
        pub items: usize,
        /// Items delivered (counting re-deliveries).
        pub delivered: usize,
        /// Items completed (at least once).
        pub completed: usize,
        /// Items lost with a session that expired holding them in doubt.
        pub lost: usize,
        /// Items an operator purged.
        pub purged: usize,
        /// `TakeFailed` events.
        pub take_failed: u32,
        /// `PutFailed` events.
        pub put_failed: u32,
        /// `ClaimLost` events.
        pub claims_lost: u32,
        /// A delay queue: items delivered that were put with a time in the future.
        pub delayed: usize,
        /// The common faults, on every machine (not only [`ME`]).
        pub faults: FaultCounts,
    }
}

struct QueueScript {
    delivery: Delivery,
    format: Format,
    meta: String,
    slots: Vec<Slot>,
    puts: Vec<(Bytes, Outcome)>,
    put_count: u32,
    /// Items by data (unique per put; a delay item's payload, not its frame).
    seen: BTreeMap<Bytes, Seen>,
    /// A delay queue: each put's time (Unix ms) and whether it was in the future.
    ready: BTreeMap<Bytes, (u64, bool)>,
    /// Per producer: highest put number landed.
    order: BTreeMap<usize, u64>,
    /// Sessions that expired with a take or completion in doubt.
    doubts: Vec<i64>,
    /// The queue directory at the last look: name → (data, czxid).
    items: BTreeMap<String, (Bytes, i64)>,
    /// The side directory at the last look: name → (owner, version, mzxid, czxid).
    side: BTreeMap<String, (i64, i32, i64, i64)>,
    /// The zxid of the last look.
    looked: i64,
    /// An item the operator is purging now (name, czxid).
    purging: Option<(String, i64)>,
    /// Replacement consumers made in settle.
    replaced: u32,
    /// Settle: every machine was told to close.
    closing_all: bool,
    stats: Stats,
}

impl QueueScript {
    fn n(&self) -> usize {
        self.slots.len()
    }

    fn children_with<T>(
        h: &H,
        dir: &str,
        f: impl Fn(&super::zk::ZNode) -> T,
    ) -> BTreeMap<String, T> {
        let zk = &h.world.zk;
        if !zk.nodes.contains_key(dir) {
            return BTreeMap::new();
        }
        zk.children(dir)
            .into_iter()
            .filter_map(|n| {
                let x = zk.nodes.get(&format!("{dir}/{n}"))?;
                Some((n, f(x)))
            })
            .collect()
    }

    /// The zxid at which `name` (created at `czxid`) left `dir`, after `from`.
    fn gone_at(h: &H, dir: &str, name: &str, czxid: i64, from: i64) -> Option<i64> {
        (from + 1..=h.world.zk.zxid).find(|&z| {
            !h.world
                .zk
                .children_at_zxid(dir, z)
                .iter()
                .any(|(n, c)| n == name && *c == czxid)
        })
    }

    /// Compares the tree with the last look: items created (no duplicate, in put order
    /// per producer) and deleted (only by the protocol, a purge), by the model's zxids.
    fn look(&mut self, h: &H) -> Result<(), String> {
        let delay = self.format == Format::Delay;
        let items = Self::children_with(h, DIR, |x| {
            // A delay item is known by its payload (its data is Curator's frame of it).
            let data = if delay {
                delay_queue::payload(x.data.clone())
            } else {
                x.data.clone()
            };
            (data, x.czxid)
        });
        let side = Self::children_with(h, &self.meta, |x| (x.owner, x.version, x.mzxid, x.czxid));
        // Created, in creation order (a batch is one transaction: then by sequence).
        let mut came: Vec<(i64, i64, String, Bytes)> = items
            .iter()
            .filter(|(n, (_, c))| self.items.get(*n).is_none_or(|o| o.1 != *c))
            .map(|(n, (d, c))| {
                let seq = parse_item(self.format, n).map_or(-1, |k| k.sequence);
                (*c, seq, n.clone(), d.clone())
            })
            .collect();
        came.sort();
        for (_, _, name, data) in came {
            if let Some(other) = self.seen.get(&data) {
                return Err(format!("duplicate item {name}: the data of {}", other.name));
            }
            // Data: "<client>.<put>".
            let text = String::from_utf8_lossy(&data).to_string();
            if let Some((pm, k)) = text.split_once('.') {
                let (pm, k): (usize, u64) = (pm.parse().unwrap_or(0), k.parse().unwrap_or(0));
                let last = self.order.entry(pm).or_insert(0);
                if k <= *last {
                    return Err(format!("producer m{pm}: put {k} landed after put {last}"));
                }
                *last = k;
            }
            self.seen.insert(
                data,
                Seen {
                    name,
                    deleted_by: None,
                    purged: false,
                    delivered: 0,
                    completed: 0,
                },
            );
        }
        // Deleted.
        let gone: Vec<(String, Bytes, i64)> = self
            .items
            .iter()
            .filter(|(n, (_, c))| items.get(*n).is_none_or(|x| x.1 != *c))
            .map(|(n, (d, c))| (n.clone(), d.clone(), *c))
            .collect();
        for (name, data, czxid) in gone {
            let purged = self
                .purging
                .as_ref()
                .is_some_and(|(n, c)| *n == name && *c == czxid);
            let by = if purged {
                None
            } else {
                let z = Self::gone_at(h, DIR, &name, czxid, self.looked)
                    .ok_or_else(|| format!("{name} gone at no zxid"))?;
                let by = match self.delivery {
                    // The transaction bumped the deleter's marker: its mzxid is z.
                    Delivery::AtMostOnce => side
                        .iter()
                        .find(|(n, (_, v, mzxid, czxid))| {
                            n.starts_with("c-")
                                && *mzxid == z
                                && self.side.get(*n).is_none_or(|o| o.3 != *czxid || o.1 < *v)
                        })
                        .map(|(_, (owner, ..))| *owner),
                    // The transaction deleted the deleter's own claim on it.
                    Delivery::AtLeastOnce => {
                        let claim = format!("{CLAIM_PREFIX}{name}");
                        self.side.get(&claim).and_then(|&(owner, _, _, czxid)| {
                            let at = Self::gone_at(h, &self.meta, &claim, czxid, self.looked);
                            (at == Some(z)).then_some(owner)
                        })
                    }
                };
                if by.is_none() {
                    return Err(format!(
                        "{name} deleted at zxid {z} outside the protocol ({:?})",
                        self.delivery
                    ));
                }
                by
            };
            if let Some(s) = self.seen.get_mut(&data) {
                s.deleted_by = by;
                s.purged = purged;
            }
        }
        self.items = items;
        self.side = side;
        self.looked = h.world.zk.zxid;
        Ok(())
    }

    /// At least once: every live holder's claim and item are on the server (unless an
    /// operator purged the item), and no item has two live holders.
    fn holders(&self, h: &H) -> Result<(), String> {
        if self.delivery != Delivery::AtLeastOnce {
            return Ok(());
        }
        let mut holders: BTreeMap<&str, usize> = BTreeMap::new();
        for (k, slot) in self.slots.iter().enumerate() {
            let s = &h.world.zk.sessions[k];
            if s.link == Link::Expired {
                continue;
            }
            for (name, data) in &slot.held {
                if self.seen.get(data).is_some_and(|x| x.purged) {
                    continue;
                }
                if let Some(other) = holders.insert(name, k) {
                    return Err(format!("two live holders of {name}: m{other} and m{k}"));
                }
                let claim = h
                    .world
                    .zk
                    .nodes
                    .get(&format!("{}/{CLAIM_PREFIX}{name}", self.meta))
                    .map(|n| n.owner);
                let item =
                    h.world
                        .zk
                        .nodes
                        .get(&format!("{DIR}/{name}"))
                        .map(|n| match self.format {
                            Format::Delay => delay_queue::payload(n.data.clone()),
                            _ => n.data.clone(),
                        });
                if claim != Some(s.id) || item.as_ref() != Some(data) {
                    return Err(format!(
                        "m{k} holds {name}: claim owner {claim:?} (session {:#x}), item {item:?}",
                        s.id
                    ));
                }
            }
        }
        Ok(())
    }

    fn on_producer(&mut self, k: usize, e: &ProducerEvent) -> Result<(), String> {
        let slot = &mut self.slots[k];
        match e {
            ProducerEvent::Put { id, node } => {
                if let Some(at) = slot.outstanding.remove(id) {
                    self.puts[at].1 = Outcome::Put(node.clone());
                }
            }
            ProducerEvent::PutFailed {
                id,
                may_have_applied,
                ..
            } => {
                self.stats.put_failed += 1;
                if let Some(at) = slot.outstanding.remove(id) {
                    self.puts[at].1 = Outcome::Failed(*may_have_applied);
                }
            }
            ProducerEvent::Closed => {
                slot.finals += 1;
                if !slot.outstanding.is_empty() {
                    return Err(format!("m{k}: Closed with puts unanswered"));
                }
            }
            _ => return Err(format!("m{k}: unexpected producer event {e:?}")),
        }
        Ok(())
    }

    fn on_consumer(
        &mut self,
        h: &H,
        k: usize,
        before: i64,
        e: &ConsumerEvent,
    ) -> Result<(), String> {
        let sid = h.world.zk.sessions[k].id;
        let alo = self.delivery == Delivery::AtLeastOnce;
        match e {
            ConsumerEvent::Taken { take, items } => {
                if Some(*take) == self.slots[k].take {
                    self.slots[k].take = None;
                }
                for it in items {
                    let Some(s) = self.seen.get_mut(&it.data) else {
                        return Err(format!("m{k}: delivered {it:?} which never existed"));
                    };
                    if s.name != it.name {
                        return Err(format!("m{k}: delivered {it:?}, it was {}", s.name));
                    }
                    s.delivered += 1;
                    self.stats.delivered += 1;
                    if let Some(&(at, later)) = self.ready.get(&it.data) {
                        // A delay item: never before its time, and named by it.
                        let now_ms = h.world.now[k].as_micros() / 1000;
                        let named = delay_queue::ready_at(&it.name).map(|(t, _)| t);
                        if named != Some(at) || now_ms < at {
                            return Err(format!(
                                "m{k}: delivered {} at {now_ms} ms, its time {at} ms",
                                it.name
                            ));
                        }
                        self.stats.delayed += usize::from(later);
                    }
                    if !alo {
                        if s.delivered > 1 {
                            return Err(format!("m{k}: {} delivered twice", it.name));
                        }
                        if s.deleted_by != Some(sid) {
                            return Err(format!(
                                "m{k} (session {sid:#x}): delivered {} deleted by {:?}",
                                it.name, s.deleted_by
                            ));
                        }
                    } else {
                        // The claim it relies on exists as the consumer last heard.
                        let claim = format!("{CLAIM_PREFIX}{}", it.name);
                        let seen = h.world.zk.sessions[k].seen_zxid;
                        if !h
                            .world
                            .zk
                            .children_at_zxid(&self.meta, seen)
                            .iter()
                            .any(|(n, _)| *n == claim)
                        {
                            return Err(format!(
                                "m{k}: Taken {} while its claim is gone as last heard",
                                it.name
                            ));
                        }
                        self.slots[k].held.push((it.name.clone(), it.data.clone()));
                    }
                }
            }
            ConsumerEvent::TimedOut { take } => {
                if Some(*take) == self.slots[k].take {
                    self.slots[k].take = None;
                }
            }
            ConsumerEvent::TakeFailed { take, .. } => {
                self.stats.take_failed += 1;
                self.doubts.push(sid);
                self.doubts.push(before);
                if Some(*take) == self.slots[k].take {
                    self.slots[k].take = None;
                }
            }
            ConsumerEvent::Completed { item } => {
                let slot = &mut self.slots[k];
                let Some(at) = slot.completing.iter().position(|c| c.0 == *item) else {
                    return Err(format!("m{k}: Completed {item} never completed"));
                };
                let (_, data, by) = slot.completing.remove(at);
                let Some(s) = self.seen.get_mut(&data) else {
                    return Err(format!("m{k}: completed {item} which never existed"));
                };
                s.completed += 1;
                self.stats.completed += 1;
                if s.completed > 1 || s.deleted_by != Some(by) {
                    return Err(format!(
                        "m{k} (session {by:#x}): Completed {item} (completed {} times, \
                         deleted by {:?})",
                        s.completed, s.deleted_by
                    ));
                }
            }
            ConsumerEvent::ClaimLost { item } => {
                self.stats.claims_lost += 1;
                let slot = &mut self.slots[k];
                slot.held.retain(|h| h.0 != *item);
                if let Some(at) = slot.completing.iter().position(|c| c.0 == *item) {
                    let (_, _, s) = slot.completing.remove(at);
                    self.doubts.push(s);
                }
            }
            ConsumerEvent::Released { item } => {
                self.slots[k].held.retain(|h| h.0 != *item);
            }
            ConsumerEvent::CompleteFailed { item, error } => {
                // Only an item an operator purged may fail to complete.
                let slot = &mut self.slots[k];
                let data = slot
                    .completing
                    .iter()
                    .position(|c| c.0 == *item)
                    .map(|at| slot.completing.remove(at).1);
                let purged = data
                    .as_ref()
                    .and_then(|d| self.seen.get(d))
                    .is_some_and(|s| s.purged);
                if !purged || *error != Error::Server(ErrorCode::NoNode) {
                    return Err(format!("m{k}: CompleteFailed {{ {item}, {error:?} }}"));
                }
            }
            ConsumerEvent::Closed => {
                let slot = &mut self.slots[k];
                slot.finals += 1;
                slot.take = None;
                slot.held.clear();
            }
            _ => return Err(format!("m{k}: unexpected consumer event {e:?}")),
        }
        Ok(())
    }

    /// A user command on client `k`'s machine.
    fn user(&mut self, h: &mut H, k: usize, what: u8) -> Result<(), String> {
        if self.slots[k].finals > 0 || self.slots[k].closing {
            return Ok(());
        }
        let now = h.world.now[k];
        let sid = h.world.zk.sessions[k].id;
        let mut lines = Vec::new();
        let Some(m) = h.world.machines[k].as_mut() else {
            return Ok(());
        };
        if what % 8 == 7 {
            lines.push(format!("  m{k} user close"));
            let slot = &mut self.slots[k];
            slot.closing = true;
            slot.take = None;
            slot.held.clear();
            both!(m, x => x.close(now));
        } else {
            match m {
                QueueMachine::P(p) => {
                    for _ in 0..1 + what % 3 {
                        self.put_count += 1;
                        let data = Bytes::from(format!("{k}.{}", self.put_count));
                        let r = if self.format == Format::Delay {
                            // A time from the past (10 ms ago) to 410 ms ahead.
                            let ahead = u64::from((what >> 2) % 8) * 60;
                            let at = (now.as_micros() / 1000 + ahead).saturating_sub(10);
                            self.ready.insert(data.clone(), (at, ahead > 10));
                            p.put_at(now, data.clone(), at)
                        } else {
                            p.put_with_priority(now, data.clone(), u16::from(what >> 5))
                        };
                        lines.push(format!("  m{k} put {data:?} -> {r:?}"));
                        if let Ok(id) = r {
                            self.slots[k].outstanding.insert(id, self.puts.len());
                            self.puts.push((data, Outcome::Pending));
                        }
                    }
                }
                QueueMachine::C(c) => {
                    let slot = &mut self.slots[k];
                    let held = slot.held.len();
                    if what % 8 >= 4 && held > 0 {
                        // Complete (or release) a held item.
                        let (name, data) = slot.held.remove(usize::from(what >> 4) % held);
                        let r = if what % 8 == 6 {
                            c.release(now, &name)
                        } else {
                            let r = c.complete(now, &name);
                            if r.is_ok() {
                                slot.completing.push((name.clone(), data, sid));
                            }
                            r
                        };
                        lines.push(format!("  m{k} settle {name} ({}) -> {r:?}", what % 8));
                    } else if slot.take.is_none() {
                        let deadline = match what % 4 {
                            0 => None,
                            1 => Some(now),
                            _ => Some(now + Duration::from_millis(u64::from(what))),
                        };
                        let max = 1 + usize::from(what >> 6);
                        let t = c.take(now, max, deadline);
                        slot.take = Some(t);
                        lines.push(format!("  m{k} take {max} until {deadline:?} -> {t}"));
                    }
                }
            }
        }
        for l in lines {
            h.note(l);
        }
        let happened = h.world.pump(k);
        self.happened(h, k, happened)
    }

    /// Every machine that is not done and not closing: put on, take, complete.
    fn work(&mut self, h: &mut H, k: usize, round: u32) -> Result<(), String> {
        if self.slots[k].producer {
            return Ok(());
        }
        if self.slots[k].finals > 0 && !self.closing_all {
            // A closed consumer is replaced.
            self.replaced += 1;
            let mut c = ConsumerConfig::new(DIR, &format!("m{k}r{round}"));
            c.format = self.format;
            c.delivery = self.delivery;
            let slot = &mut self.slots[k];
            slot.finals = 0;
            slot.closing = false;
            slot.take = None;
            slot.held.clear();
            let happened = h
                .world
                .host(k, QueueMachine::C(Consumer::new(c)), |_, _| {});
            self.happened(h, k, happened)?;
        }
        if self.closing_all {
            return Ok(());
        }
        if self.slots[k].take.is_none() {
            self.user(h, k, 0)?; // take, no deadline
        }
        while !self.slots[k].held.is_empty() && !self.slots[k].closing {
            self.user(h, k, 4)?; // complete
        }
        Ok(())
    }

    fn drained(&self, h: &H) -> Result<(), String> {
        let items = h.world.zk.children(DIR);
        let items: Vec<&String> = if h.world.zk.nodes.contains_key(DIR) {
            items.iter().collect()
        } else {
            Vec::new()
        };
        let claims: Vec<String> = if h.world.zk.nodes.contains_key(&self.meta) {
            h.world
                .zk
                .children(&self.meta)
                .into_iter()
                .filter(|n| n.starts_with(CLAIM_PREFIX))
                .collect()
        } else {
            Vec::new()
        };
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

impl Machines<QueueMachine> for QueueScript {
    fn who(&self, k: usize) -> String {
        format!("m{k}")
    }

    fn judge(&mut self, h: &H, k: usize, happened: &[Happened<QueueEvent>]) -> Result<(), String> {
        self.look(h)?;
        let before = self.slots[k].session;
        for x in happened {
            match x {
                Happened::Sent(req) => {
                    if self.slots[k].finals > 0 {
                        return Err(format!("m{k}: request {req:?} after its final event"));
                    }
                }
                Happened::Event(e) => {
                    if self.slots[k].finals > 0 {
                        return Err(format!("m{k}: {e:?} after its final event"));
                    }
                    match e {
                        QueueEvent::P(e) => self.on_producer(k, e)?,
                        QueueEvent::C(e) => self.on_consumer(h, k, before, e)?,
                    }
                }
            }
        }
        self.slots[k].session = h.world.zk.sessions[k].id;
        self.holders(h)
    }
}

impl Script<QueueMachine> for QueueScript {
    /// `which % 10` is the kind of step, `which / 10` (mod the clients) the client.
    const ACTS: u8 = 250;

    fn act(&mut self, h: &mut H, which: u8, arg: u8) -> Result<(), String> {
        let k = usize::from(which / 10) % self.n();
        match which % 10 {
            // The common steps, on any client: serve (twice as often), read, break,
            // reconnect, refuse or expire, time.
            w @ 0..=6 => {
                let happened = h.client_step(k, w.saturating_sub(1), arg);
                self.happened(h, k, happened)
            }
            7 => {
                // The users: put, take, complete, release, close.
                self.user(h, k, arg >> 2)
            }
            8 => {
                // A quiet moment for client k: it and the server exchange until nothing
                // is on its way; its user works on (other machines move on a lot while
                // one is down).
                harness::exchange_with(h, self, k)?;
                self.user(h, k, arg >> 2)?;
                harness::exchange_with(h, self, k)
            }
            _ if arg & 1 == 1 => {
                // The server reaps an empty container (the queue or the side
                // directory): made again, its sequence numbers start over.
                let reapable = h.world.zk.reapable().len().max(1);
                if h.world.zk.reap(usize::from(arg >> 1) % reapable) {
                    h.faults.reaps += 1;
                    h.note("  the server reaps a container".into());
                }
                self.look(h)
            }
            _ => {
                // An operator purges an item — from a persistent queue directory only
                // (always so now; the check stays as a guard). In a container the purge
                // could empty it, the server reap it, and a put make it again under a
                // reused name: outside the recipe's contract.
                if h.world.zk.nodes.get(DIR).is_none_or(|d| d.container) {
                    return Ok(());
                }
                let items = h.world.zk.children(DIR);
                let Some(n) = items.get(usize::from(arg) % items.len().max(1)) else {
                    return Ok(());
                };
                let path = format!("{DIR}/{n}");
                let Some(czxid) = h.world.zk.nodes.get(&path).map(|x| x.czxid) else {
                    return Ok(());
                };
                self.look(h)?;
                self.purging = Some((n.clone(), czxid));
                let r = h
                    .world
                    .zk
                    .write_as(None, &Request::Delete(DeleteRequest { path, version: -1 }));
                h.note(format!("  an operator purges {n}: {r:?}"));
                self.look(h)?;
                self.purging = None;
                if r.is_ok() {
                    self.stats.purged += 1;
                }
                Ok(())
            }
        }
    }

    fn check(&mut self, h: &H, happened: &[Happened<QueueEvent>]) -> Result<(), String> {
        self.judge(h, ME, happened)
    }

    fn settle(&mut self, h: &mut H, round: u32) -> Result<bool, String> {
        let n = self.n();
        if round == 0 {
            for k in 1..n {
                h.world.expire_zombie(k);
            }
        }
        for k in 0..n {
            if h.world.zk.sessions[k].link != Link::Up {
                let happened = h.world.reconnect(k, false);
                self.happened(h, k, happened)?;
            }
        }
        for k in 0..n {
            self.work(h, k, round)?;
        }
        for _ in 0..64 {
            let busy = h
                .world
                .zk
                .sessions
                .iter()
                .any(|s| !s.wire.is_empty() || !s.out.is_empty());
            if !busy {
                break;
            }
            for k in 0..n {
                harness::exchange_with(h, self, k)?;
            }
        }
        self.others_wait(h, n, Duration::from_millis(50))?;
        if !self.closing_all {
            if round >= 4 && self.drained(h).is_ok() {
                h.note("close all".into());
                self.closing_all = true;
                for k in 0..n {
                    self.user(h, k, 7)?;
                }
            } else if round + 1 == harness::SETTLE_ROUNDS / 2 {
                let states: Vec<String> = (0..n)
                    .map(|k| {
                        format!(
                            "\nm{k} (finals {}): {:?}",
                            self.slots[k].finals, h.world.machines[k]
                        )
                    })
                    .collect();
                return Err(format!(
                    "liveness: not drained once faults stopped: {}{}",
                    self.drained(h).err().unwrap_or_default(),
                    states.concat()
                ));
            }
            return Ok(false);
        }
        Ok((0..n).all(|k| h.world.machines[k].is_none()))
    }

    fn end(&mut self, h: &H) -> Result<(), String> {
        if !self.closing_all {
            return Err(format!(
                "liveness: not drained once faults stopped: {}",
                self.drained(h).err().unwrap_or_default()
            ));
        }
        for (k, slot) in self.slots.iter().enumerate() {
            if slot.finals != 1 {
                return Err(format!(
                    "liveness: m{k} never reported Closed: {:?}",
                    h.world.machines[k]
                ));
            }
            if h.world.machines[k].is_some() {
                return Err(format!("liveness: m{k} is not done after Closed"));
            }
        }
        // No child left behind. The queue's directory itself stays by design (it is
        // persistent so that its names are never reused); the side directory is a
        // container and may stay or go.
        let mut left = Vec::new();
        for dir in [DIR, self.meta.as_str()] {
            if h.world.zk.nodes.contains_key(dir) {
                left.extend(
                    h.world
                        .zk
                        .children(dir)
                        .into_iter()
                        .map(|n| format!("{dir}/{n}")),
                );
            }
        }
        if !left.is_empty() {
            return Err(format!("cleanliness: left behind {left:?}"));
        }
        let mut problems = Vec::new();
        let current: Vec<i64> = h.world.zk.sessions.iter().map(|s| s.id).collect();
        for s in self.seen.values() {
            self.stats.items += 1;
            if s.purged {
                continue;
            }
            let done = match self.delivery {
                Delivery::AtMostOnce => s.delivered,
                Delivery::AtLeastOnce => s.completed,
            };
            if done == 1 {
                continue;
            }
            match s.deleted_by {
                Some(by) if self.doubts.contains(&by) && !current.contains(&by) => {
                    self.stats.lost += 1
                }
                by => problems.push(format!(
                    "{} deleted by {by:?}, delivered {}, completed {}",
                    s.name, s.delivered, s.completed
                )),
            }
        }
        for (data, outcome) in &self.puts {
            let name = self.seen.get(data).map(|s| &s.name);
            match outcome {
                Outcome::Put(node)
                    if name.is_none() || (node.is_some() && node.as_ref() != name) =>
                {
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
            Ok(())
        } else {
            Err(format!("accounting: {}", problems.join("; ")))
        }
    }
}

/// Runs one schedule; `Err` describes the broken invariant and the last steps taken.
pub fn run(schedule: &[u8]) -> Result<Stats, String> {
    run_format(schedule, None)
}

/// [`run`] with the item format `format` (else the schedule's choice of FIFO or
/// priority): the delay queue's script is this one with [`Format::Delay`].
pub fn run_format(schedule: &[u8], format: Option<Format>) -> Result<Stats, String> {
    let mut input = schedule.iter().copied();
    let a = input.next().unwrap_or(0);
    let b = input.next().unwrap_or(0);
    let producers = 1 + usize::from(a & 1);
    let consumers = 1 + usize::from((a >> 1) % 3);
    let delivery = if a & 8 == 0 {
        Delivery::AtMostOnce
    } else {
        Delivery::AtLeastOnce
    };
    let format = match format {
        Some(f) => f,
        None if a & 16 == 0 => Format::Fifo,
        None => Format::Priority,
    };
    let meta = meta_dir(DIR);
    let n = producers + consumers;
    let mut h: H = Harness::new(n);
    let meta_mode = if b & 2 == 0 {
        CreateMode::Container
    } else {
        CreateMode::Persistent
    };
    // The queue's directory, if made beforehand, is persistent as the recipe makes it
    // (one made as a container by someone else — Curator's `SimpleDistributedQueue`
    // makes its path a container — may be reaped and made again under an at-most-once
    // consumer's read: outside the recipe's contract, see the queue module docs).
    for (bit, dir, mode) in [
        (32, DIR, CreateMode::Persistent),
        (64, meta.as_str(), meta_mode),
    ] {
        if a & bit == 0 {
            let _ = h
                .world
                .zk
                .write_as(None, &harness::create_request(dir, mode));
        }
    }
    let zxid = h.world.zk.zxid;
    for s in &mut h.world.zk.sessions {
        s.seen_zxid = zxid;
    }
    // Client 0 ([`ME`], the common faults) hosts the first consumer, or with `b & 1` the
    // first producer; the rest follow.
    let mut kinds: Vec<bool> = (0..n).map(|i| i >= consumers).collect();
    if b & 1 == 1 {
        kinds.reverse();
    }
    let slots = kinds
        .iter()
        .map(|&producer| Slot {
            producer,
            session: 0,
            finals: 0,
            closing: false,
            outstanding: BTreeMap::new(),
            take: None,
            held: Vec::new(),
            completing: Vec::new(),
        })
        .collect();
    let mut script = QueueScript {
        delivery,
        format,
        meta: meta.clone(),
        slots,
        puts: Vec::new(),
        put_count: 0,
        seen: BTreeMap::new(),
        ready: BTreeMap::new(),
        order: BTreeMap::new(),
        doubts: Vec::new(),
        items: BTreeMap::new(),
        side: BTreeMap::new(),
        looked: zxid,
        purging: None,
        replaced: 0,
        closing_all: false,
        stats: Stats::default(),
    };
    let machine = |i: usize, producer: bool| {
        let id = format!("m{i}");
        if producer {
            let mut c = ProducerConfig::new(DIR, &id);
            c.format = format;
            c.max_batch = 1 + i % 3;
            c.max_batches_in_flight = 1 + (usize::from(a >> 7) + i) % 3;
            QueueMachine::P(Producer::new(c))
        } else {
            let mut c = ConsumerConfig::new(DIR, &id);
            c.format = format;
            c.delivery = delivery;
            c.spread = i as u64 * 3;
            QueueMachine::C(Consumer::new(c))
        }
    };
    let started = (|| {
        for (i, &producer) in kinds.iter().enumerate() {
            let happened = h.world.host(i, machine(i, producer), |_, _| {});
            script.happened(&mut h, i, happened)?;
            script.user(&mut h, i, 0)?;
        }
        Ok::<(), String>(())
    })();
    started
        .map_err(|e| format!("{e}\nlast steps:\n{}", h.trace().join("\n")))
        .and_then(|()| harness::run(&mut h, &mut script, &mut input))?;
    script.stats.faults = h.faults;
    Ok(script.stats)
}
