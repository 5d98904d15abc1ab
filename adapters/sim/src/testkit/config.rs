//! One [`ConfigWriter`] writing numbered configurations and two [`ConfigReader`]s, each
//! on its own session, in the model world ([`harness`]), driven by bytes (proptest and
//! libFuzzer share it). Configuration `k` holds the value `"k"` in every node. The first
//! byte picks the protocols: the paper's ready node (writer and two ready-node readers,
//! the second syncing before every round), or `multi` (a multi writer, a multiRead
//! reader that syncs first, and a ready-node reader with `ready` created once by an
//! operator). Reader 0 is [`ME`] and meets the common faults; then the script's steps:
//!
//! * the common steps for any of the three sessions ([`Harness::client_step`]): serve,
//!   read, applied-then-break, reconnect (perhaps to a lagging follower), refuse or
//!   throttle, expiry, time;
//! * a reader's follower falls behind while its connection stays up (later writes and
//!   their notifications reach it only when it catches up: on a `sync`, a write, or by
//!   itself), or catches up;
//! * the writer starts the next configuration (once the previous write ended), or has
//!   a quiet moment (everything it sent is answered and read); a reader is told out of
//!   band to read again;
//! * an operator deletes `ready` (in the multi mode it creates it again later), or, in
//!   the ready-node mode and between writes, retires the configuration: `ready` first,
//!   then the nodes, children first, perhaps stopping part-way (emptied containers are
//!   then reaped).
//!
//! Safety, after every step: every `Snapshot` holds one configuration (every node `"k"`
//! for one `k`, or every node missing before the first write), never older than the
//! reader's previous one nor newer than the last write started, and is what the server
//! held as the reader last heard (every node's value, and `ready` existing in the
//! ready-node protocol); a reader that syncs first and was told out of band that
//! configuration `k` was written never reports an older one from a round begun after
//! the notice, nor sits idle on an older one; at most one watch per reader per node; a
//! write ends only `Written`; no event after a final one; a handled deadline is never in
//! the past.
//!
//! Liveness, once faults stop (connections back, followers caught up, everything
//! answered, time passes, `ready` back in the multi mode, one more configuration
//! written): every write ended with `Written`; every node holds the last configuration;
//! `ready` exists; both readers are running and their last `Snapshot` is the last
//! configuration.

use alloc::collections::{BTreeMap, BTreeSet};
use alloc::format;
use alloc::string::{String, ToString};
use alloc::vec::Vec;
use bytes::Bytes;
use core::time::Duration;

use zk_recipes::proto::*;
use zk_recipes::recipe::config::{
    ConfigReader, ConfigWriter, ReaderConfig, ReaderEvent, WriterConfig, WriterEvent,
};

use super::either::Either;
use super::harness::{self, FaultCounts, Harness, Machines, Script, CLIENT_STEPS, ME};
use super::zk::{Happened, Link, Outbound};
use zk_recipes::recipe::OpId;

const CFG: &str = "/cfg";
const READY: &str = "/cfg/ready";
const PATHS: [&str; 3] = ["/cfg/a", "/cfg/b", "/cfg/sub/c"];
/// Configurations written at most in one schedule (besides the one after the faults).
const MAX_WRITES: u32 = 12;
/// The writer's client; the readers are clients 0 ([`ME`]) and 1.
const WRITER: usize = 2;
const CLIENTS: usize = 3;

type M = Either<ConfigReader, ConfigWriter>;
type Event = Either<ReaderEvent, WriterEvent>;
type H = Harness<M>;

stats! {
    /// What a schedule exercised (to show the harness is not vacuous).
    pub struct Stats {
        /// Writes that ended `Written` (including the one after the faults).
        pub written: usize,
        /// Snapshots reported by both readers.
        pub snapshots: usize,
        /// `NotReady` reported by both readers.
        pub not_ready: usize,
        /// A reader's follower fell behind while connected.
        pub fell_behind: usize,
        /// Out-of-band notices to a `sync_first` reader.
        pub refreshes: usize,
        /// Nodes an operator deleted.
        pub operator_deletes: usize,
        /// The common faults, on every session.
        pub faults: FaultCounts,
    }
}

struct ConfigScript {
    multi: bool,
    /// The configuration being written (or last written).
    k: u32,
    written: Option<u32>,
    writer_events: Vec<WriterEvent>,
    reader_events: [Vec<ReaderEvent>; 2],
    /// Each reader's last snapshot: `Some(k)`, or `Some(0)` for "all missing".
    last_snapshot: [Option<u32>; 2],
    /// A `sync_first` reader told to read again when configuration `k` was written:
    /// (k, a round began since: it sent a request after the notice).
    fresh_floor: [Option<(u32, bool)>; 2],
    /// Once faults stopped: the last configuration has been started.
    last_started: bool,
    /// Each reader's connection and unanswered requests at the last look.
    pending: [(Link, Vec<OpId>); 2],
    /// Each reader's requests whose replies were lost with a connection: a watch they
    /// set is not one the reader knows of (ZooKeeper drops a connection's watches; the
    /// client re-arms only those it learned of from a reply; the model keeps them).
    lost: [BTreeSet<OpId>; 2],
    stats: Stats,
}

fn create(path: &str, mode: CreateMode) -> Request {
    Request::Create(CreateRequest::new(
        path.to_string(),
        Bytes::new(),
        Acl::open_unsafe(),
        mode,
    ))
}

impl ConfigScript {
    fn reader(h: &H, i: usize) -> Option<&ConfigReader> {
        h.world.machines[i].as_ref().and_then(|m| m.a())
    }

    fn sync_first(h: &H, i: usize) -> bool {
        Self::reader(h, i).is_some_and(|r| r.config().sync_first)
    }

    fn check_reader(&mut self, h: &H, i: usize, e: &ReaderEvent) -> Result<(), String> {
        if self.reader_events[i].last().is_some_and(|l| l.is_final()) {
            return Err(format!("reader {i}: event after final: {e:?}"));
        }
        match e {
            ReaderEvent::Snapshot(s) => {
                self.stats.snapshots += 1;
                let first = s.values.first().and_then(|(_, v)| v.clone());
                if s.values.iter().any(|(_, v)| *v != first) {
                    return Err(format!("reader {i}: mixed configuration {s:?}"));
                }
                let k = match &first {
                    None => 0,
                    Some(v) => core::str::from_utf8(v)
                        .ok()
                        .and_then(|v| v.parse::<u32>().ok())
                        .ok_or_else(|| format!("reader {i}: unknown value {v:?}"))?,
                };
                if k > self.k {
                    return Err(format!("reader {i}: configuration {k} not written yet"));
                }
                if self.last_snapshot[i].is_some_and(|l| l > k) {
                    return Err(format!(
                        "reader {i}: went back from {:?} to {k}",
                        self.last_snapshot[i]
                    ));
                }
                if let Some((floor, true)) = self.fresh_floor[i] {
                    if k < floor {
                        return Err(format!(
                            "reader {i}: read {k} after being told {floor} was written"
                        ));
                    }
                }
                // What the server held as the reader last heard.
                let seen = h.world.zk.sessions[i].seen_zxid;
                for (p, v) in &s.values {
                    let held = h.world.zk.data_at_zxid(p, seen).map(|(d, _)| d);
                    if held != *v {
                        return Err(format!(
                            "reader {i}: Snapshot says {p} = {v:?}, the server held {held:?} \
                             as the reader last heard"
                        ));
                    }
                }
                let ready_mode = Self::reader(h, i).is_some_and(|r| {
                    r.config().mode == zk_recipes::recipe::config::ConfigMode::ReadyNode
                });
                if ready_mode && h.world.zk.data_at_zxid(READY, seen).is_none() {
                    return Err(format!(
                        "reader {i}: Snapshot while ready is gone as the reader last heard"
                    ));
                }
                self.last_snapshot[i] = Some(k);
            }
            ReaderEvent::NotReady => self.stats.not_ready += 1,
            e => return Err(format!("reader {i} ended: {e:?}")),
        }
        Ok(())
    }

    /// A reader told out of band, idle after a round begun since, holds at least what
    /// was written when it was told; at most one watch per reader per node.
    fn check_readers(&mut self, h: &H) -> Result<(), String> {
        for i in 0..2 {
            let s = &h.world.zk.sessions[i];
            let (was, before) = core::mem::replace(&mut self.pending[i], (Link::Up, Vec::new()));
            if was == Link::Up && s.link != Link::Up {
                self.lost[i].extend(before);
            }
            let now: Vec<OpId> = s
                .wire
                .iter()
                .map(|(op, _)| *op)
                .chain(s.out.iter().filter_map(|(o, _)| match o {
                    Outbound::Reply(op, _) => Some(*op),
                    Outbound::Watch(..) => None,
                }))
                .collect();
            self.pending[i] = (s.link, now);
            if let (Some((floor, true)), Some(r)) = (self.fresh_floor[i], Self::reader(h, i)) {
                if r.is_idle() && r.is_ready() && self.last_snapshot[i].unwrap_or(0) < floor {
                    return Err(format!(
                        "reader {i}: idle on {:?} after being told {floor} was written",
                        self.last_snapshot[i]
                    ));
                }
            }
            let mut per: BTreeMap<&str, usize> = BTreeMap::new();
            for (p, _, op) in h.world.zk.armed(i) {
                if !self.lost[i].contains(&op) {
                    *per.entry(p).or_default() += 1;
                }
            }
            if let Some((p, n)) = per.iter().find(|(_, n)| **n > 1) {
                return Err(format!("reader {i}: {n} watches on {p}"));
            }
        }
        Ok(())
    }

    /// Starts writing configuration `k + 1` if no write is running.
    fn next_write(&mut self, h: &mut H) -> Result<(), String> {
        if h.world.machines[WRITER].is_some() {
            return Ok(());
        }
        self.k += 1;
        let value = Bytes::from(format!("{}", self.k));
        let updates = PATHS
            .iter()
            .map(|p| (p.to_string(), value.clone()))
            .collect();
        let config = if self.multi {
            WriterConfig::multi()
        } else {
            WriterConfig::ready_node(READY)
        };
        h.note(format!("  the writer starts configuration {}", self.k));
        let w = ConfigWriter::new(config, updates);
        let happened = h.world.host(WRITER, Either::B(w), |m, now| {
            if let Either::B(w) = m {
                w.start(now);
            }
        });
        self.happened(h, WRITER, happened)
    }

    fn operator(&mut self, h: &mut H, req: Request, what: &str) -> bool {
        let r = h.world.zk.write_as(None, &req);
        h.note(format!("  an operator {what}: {r:?}"));
        r.is_ok()
    }

    fn delete(&mut self, h: &mut H, path: &str) {
        let req = Request::Delete(DeleteRequest {
            path: path.into(),
            version: -1,
        });
        if self.operator(h, req, &format!("deletes {path}")) {
            self.stats.operator_deletes += 1;
        }
    }
}

impl Machines<M> for ConfigScript {
    fn who(&self, k: usize) -> String {
        if k == WRITER {
            String::from("writer")
        } else {
            format!("reader {k}")
        }
    }

    /// Checks what client `k`'s machine did.
    fn judge(&mut self, h: &H, k: usize, happened: &[Happened<Event>]) -> Result<(), String> {
        // Events first: a round that ends reports before the next one starts, so a
        // request sent in the same batch belongs to a round begun after every event.
        for x in happened {
            match x {
                Happened::Sent(_) => {}
                Happened::Event(Either::A(e)) => {
                    self.check_reader(h, k, e)?;
                    self.reader_events[k].push(e.clone());
                }
                Happened::Event(Either::B(e)) => {
                    match e {
                        WriterEvent::Written => {
                            self.written = Some(self.k);
                            self.stats.written += 1;
                        }
                        e => return Err(format!("write {} ended with {e:?}", self.k)),
                    }
                    self.writer_events.push(e.clone());
                }
            }
        }
        if k < 2 && happened.iter().any(|x| matches!(x, Happened::Sent(_))) {
            if let Some((_, began)) = &mut self.fresh_floor[k] {
                *began = true;
            }
        }
        self.check_readers(h)
    }
}

impl Script<M> for ConfigScript {
    /// `which % 11` is the kind of step, `which / 11` (mod 3) the session.
    const ACTS: u8 = 33;

    fn act(&mut self, h: &mut H, which: u8, arg: u8) -> Result<(), String> {
        let k = usize::from(which / 11) % CLIENTS;
        match which % 11 {
            w @ 0..=5 => {
                let happened = h.client_step(k, w % CLIENT_STEPS, arg);
                self.happened(h, k, happened)
            }
            6 => {
                // The writer starts the next configuration, or has a quiet moment:
                // everything it sent is answered and read.
                if h.world.machines[WRITER].is_some() {
                    harness::exchange_with(h, self, WRITER)
                } else if self.k < MAX_WRITES {
                    self.next_write(h)
                } else {
                    Ok(())
                }
            }
            7 => {
                // Reader `i` is told out of band that configuration `written` is out.
                let i = usize::from(arg & 1);
                if Self::sync_first(h, i) {
                    self.fresh_floor[i] = Some((self.written.unwrap_or(0), false));
                    self.stats.refreshes += 1;
                }
                h.note(format!("  reader {i} is told to read again"));
                let happened = h.world.call(i, |m, now| {
                    if let Either::A(r) = m {
                        r.refresh(now);
                    }
                });
                self.happened(h, i, happened)
            }
            8 => {
                // A reader's follower falls behind, or catches up.
                let i = usize::from(arg & 1);
                if arg & 2 == 0 {
                    if h.world.zk.fall_behind(i) {
                        self.stats.fell_behind += 1;
                        h.note(format!("  reader {i}'s follower falls behind"));
                    }
                } else if h.world.zk.catch_up(i) {
                    h.note(format!("  reader {i}'s follower catches up"));
                }
                Ok(())
            }
            9 if self.multi => {
                if arg & 1 == 0 {
                    self.delete(h, READY);
                } else {
                    self.operator(h, create(READY, CreateMode::Persistent), "creates ready");
                }
                Ok(())
            }
            9 if h.world.machines[WRITER].is_some() => Ok(()),
            9 => {
                // Between writes (an operator is one more writer: writers must not
                // write concurrently), retires the configuration: ready first, then the
                // nodes (children first), perhaps stopping part-way. What a reader was
                // told was written is gone.
                self.fresh_floor = [None, None];
                let mut nodes = alloc::vec![String::from(READY)];
                nodes.extend(PATHS.iter().map(|p| p.to_string()));
                let n = if arg & 1 == 0 {
                    1
                } else {
                    1 + usize::from(arg >> 1) % nodes.len()
                };
                for p in nodes.iter().take(n) {
                    self.delete(h, p);
                }
                Ok(())
            }
            _ => {
                // Every session's oldest traffic moves on.
                for k in 0..CLIENTS {
                    let happened = h.client_step(k, 1, 0);
                    self.happened(h, k, happened)?;
                    let happened = h.client_step(k, 0, 0);
                    self.happened(h, k, happened)?;
                }
                Ok(())
            }
        }
    }

    fn check(&mut self, h: &H, happened: &[Happened<Event>]) -> Result<(), String> {
        self.judge(h, ME, happened)
    }

    fn settle(&mut self, h: &mut H, round: u32) -> Result<bool, String> {
        if round == 0 {
            for k in 0..CLIENTS {
                h.world.expire_zombie(k);
            }
            if self.multi && !h.world.zk.nodes.contains_key(READY) {
                // The operator's part of the multi mode: `ready` exists.
                if !h.world.zk.nodes.contains_key(CFG) {
                    self.operator(h, create(CFG, CreateMode::Persistent), "creates /cfg");
                }
                self.operator(h, create(READY, CreateMode::Persistent), "creates ready");
            }
        }
        for k in 1..CLIENTS {
            if h.world.zk.sessions[k].link != Link::Up {
                let happened = h.world.reconnect(k, false);
                self.happened(h, k, happened)?;
            }
        }
        for k in 0..CLIENTS {
            harness::exchange_with(h, self, k)?;
        }
        if h.world.machines[WRITER].is_none() && !self.last_started {
            // One more configuration, written without faults: everything converges to it.
            self.last_started = true;
            self.next_write(h)?;
            for k in 0..CLIENTS {
                harness::exchange_with(h, self, k)?;
            }
        }
        let quiet = (0..CLIENTS).all(|k| {
            let s = &h.world.zk.sessions[k];
            s.wire.is_empty() && s.out.is_empty()
        });
        let idle = (0..2).all(|i| Self::reader(h, i).is_none_or(|r| r.is_idle()));
        if self.last_started && h.world.machines[WRITER].is_none() && quiet && idle {
            return Ok(true);
        }
        self.others_wait(h, CLIENTS, Duration::from_millis(50))?;
        Ok(false)
    }

    fn end(&mut self, h: &H) -> Result<(), String> {
        if h.world.machines[WRITER].is_some() || self.written != Some(self.k) {
            return Err(format!(
                "liveness: the last write {} did not end Written: {:?}",
                self.k, self.writer_events
            ));
        }
        let want = Bytes::from(format!("{}", self.k));
        for p in PATHS {
            if h.world.zk.nodes.get(p).map(|n| &n.data) != Some(&want) {
                return Err(format!(
                    "liveness: {p} holds {:?}, not {want:?}",
                    h.world.zk.nodes.get(p)
                ));
            }
        }
        if !h.world.zk.nodes.contains_key(READY) {
            return Err("liveness: ready missing after the last write".into());
        }
        for i in 0..2 {
            if Self::reader(h, i).is_none_or(|r| r.has_ended()) {
                return Err(format!(
                    "liveness: reader {i} ended: {:?}",
                    self.reader_events[i]
                ));
            }
            if self.last_snapshot[i] != Some(self.k) {
                return Err(format!(
                    "liveness: reader {i}: last snapshot {:?}, last written {}; events {:?}",
                    self.last_snapshot[i], self.k, self.reader_events[i]
                ));
            }
            if !matches!(self.reader_events[i].last(), Some(ReaderEvent::Snapshot(_))) {
                return Err(format!(
                    "liveness: reader {i} ends on {:?}",
                    self.reader_events[i].last()
                ));
            }
        }
        Ok(())
    }
}

/// Runs one schedule; `Err` names the violated invariant and the last steps taken.
pub fn run(schedule: &[u8]) -> Result<Stats, String> {
    let mut input = schedule.iter().copied();
    let multi = input.next().is_some_and(|b| b & 1 == 1);
    let mut h: H = Harness::new(CLIENTS);
    if multi {
        // An operator created `ready` once; the multi writer never touches it.
        let _ = h
            .world
            .zk
            .write_as(None, &create(CFG, CreateMode::Persistent));
        let _ = h
            .world
            .zk
            .write_as(None, &create(READY, CreateMode::Persistent));
    }
    let readers = if multi {
        [
            ReaderConfig::multi(&PATHS).sync_first(true),
            ReaderConfig::ready_node(READY, &PATHS),
        ]
    } else {
        [
            ReaderConfig::ready_node(READY, &PATHS),
            ReaderConfig::ready_node(READY, &PATHS).sync_first(true),
        ]
    };
    let mut script = ConfigScript {
        multi,
        k: 0,
        written: None,
        writer_events: Vec::new(),
        reader_events: [Vec::new(), Vec::new()],
        last_snapshot: [None, None],
        fresh_floor: [None, None],
        last_started: false,
        pending: [(Link::Up, Vec::new()), (Link::Up, Vec::new())],
        lost: [BTreeSet::new(), BTreeSet::new()],
        stats: Stats::default(),
    };
    h.note(format!(
        "{} mode",
        if multi { "multi" } else { "ready-node" }
    ));
    let [r0, r1] = readers;
    let start = |m: &mut M, now| {
        if let Either::A(r) = m {
            r.start(now);
        }
    };
    let started = h
        .host(&mut script, Either::A(ConfigReader::new(r0)), start)
        .and_then(|()| {
            let happened = h.world.host(1, Either::A(ConfigReader::new(r1)), start);
            script.happened(&mut h, 1, happened)
        });
    started.and_then(|()| harness::run(&mut h, &mut script, &mut input))?;
    script.stats.faults = h.faults;
    Ok(script.stats)
}
