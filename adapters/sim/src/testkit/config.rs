//! One [`ConfigWriter`] writing numbered configurations and two [`ConfigReader`]s, each
//! on its own session, against a small model of a ZooKeeper tree, driven by bytes
//! (proptest and libFuzzer share it). Configuration `k` holds the value `"k"` in every
//! node. The first byte picks the protocols: the paper's ready node (writer and two
//! ready-node readers, one of them syncing before every round), or `multi` (a multi
//! writer, a multiRead reader, and a ready-node reader with `ready` created once by an
//! operator). Each further byte is one step:
//!
//! * a session's server answers its oldest request, or a notification or reply is
//!   delivered; the server applies a request and the connection breaks before the reply
//!   arrives (a lost reply after apply); a connection breaks; a reconnect; the client
//!   refuses a session's next request (`Overloaded`); a session expires (a new one
//!   starts, as the client renews it);
//! * a reader's server falls behind, or a reader reconnects to a server that lags (it
//!   reads the tree as it was when the connection broke): it gets later changes and
//!   their notifications only when that server catches up (on a `sync`, on a step, or
//!   once faults stop);
//! * the writer starts the next configuration (once the previous write ended); a reader
//!   is told out of band to read again; time passes.
//!
//! The model keeps ZooKeeper's ordering guarantee: a session's notifications and
//! replies share one FIFO queue, so a notification arrives before any reply that
//! reflects its change; notifications fired while disconnected arrive after the
//! reconnect (the session re-arms its watches).
//!
//! Safety, after every step: every `Snapshot` holds one configuration (every node `"k"`
//! for one `k`, or every node missing before the first write), never older than the
//! reader's previous one nor newer than the last write started; a reader that syncs
//! first and was told out of band that configuration `k` was written never reports an
//! older one from a round begun after the notice (the paper's case for `sync`: the
//! reader may sit on a lagging server); at most one watch per
//! reader per node; no event after a final one; `poll_timeout` never in the past after
//! `handle_timeout`.
//!
//! Liveness, once faults stop (connections back, everything answered, time passes):
//! every write ended with `Written`; every node holds the last configuration; `ready`
//! exists; both readers are running and their last `Snapshot` is the last configuration.

use alloc::collections::{BTreeMap, VecDeque};
use alloc::format;
use alloc::string::{String, ToString};
use alloc::vec::Vec;
use bytes::Bytes;
use core::time::Duration;

use zk_recipes::error::Error;
use zk_recipes::proto::*;
use zk_recipes::recipe::config::{
    ConfigReader, ConfigWriter, ReaderConfig, ReaderEvent, WriterConfig, WriterEvent,
};
use zk_recipes::recipe::{OpId, Recipe, SessionChange};
use zk_recipes::session::WatchEvent;
use zk_recipes::time::Instant;

const READY: &str = "/cfg/ready";
const PATHS: [&str; 3] = ["/cfg/a", "/cfg/b", "/cfg/sub/c"];
/// Configurations written at most in one schedule (besides the one after the faults).
const MAX_WRITES: u32 = 12;

#[derive(Clone, Debug)]
struct Node {
    data: Bytes,
    czxid: i64,
    mzxid: i64,
    version: i32,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Data,
    Exist,
}

/// Which machine (and session): 0 writer, 1 and 2 readers.
type Who = usize;

enum Msg {
    Reply(OpId, Result<Response, Error>),
    Watch(OpId, WatchEvent),
}

#[derive(Default)]
struct Sess {
    id: i64,
    connected: bool,
    wire: VecDeque<(OpId, Request)>,
    queued: Vec<(OpId, Request)>,
    inbox: VecDeque<Msg>,
    /// Notifications that fired while disconnected (sent after the reconnect).
    notify: Vec<Msg>,
    refuse_next: bool,
    /// The tree as this session last saw it before a disconnect (a reader's).
    at_disconnect: Option<BTreeMap<String, Node>>,
    /// Reconnected to a lagging server: reads are served from this older tree until
    /// a `sync` (or the server catches up); its notifications wait until then.
    lag: Option<BTreeMap<String, Node>>,
}

struct World {
    nodes: BTreeMap<String, Node>,
    zxid: i64,
    now: Instant,
    sess: [Sess; 3],
    watches: Vec<(String, Kind, Who, OpId)>,
    multi: bool,
    writer: Option<ConfigWriter>,
    /// The configuration being written (or last written).
    k: u32,
    written: Option<u32>,
    writer_events: Vec<WriterEvent>,
    readers: [ConfigReader; 2],
    reader_events: [Vec<ReaderEvent>; 2],
    /// Each reader's last snapshot: `Some(k)`, or `Some(0)` for "all missing".
    last_snapshot: [Option<u32>; 2],
    /// A `sync_first` reader told to read again when configuration `k` was written:
    /// (k, a round began since: it sent a request after the notice).
    fresh_floor: [Option<(u32, bool)>; 2],
    stats: Stats,
}

fn parent(path: &str) -> &str {
    match path.rfind('/') {
        Some(0) | None => "/",
        Some(i) => &path[..i],
    }
}

impl World {
    fn new(multi: bool) -> World {
        let readers = if multi {
            [
                ConfigReader::new(ReaderConfig::multi(&PATHS).sync_first(true)),
                ConfigReader::new(ReaderConfig::ready_node(READY, &PATHS)),
            ]
        } else {
            [
                ConfigReader::new(ReaderConfig::ready_node(READY, &PATHS)),
                ConfigReader::new(ReaderConfig::ready_node(READY, &PATHS).sync_first(true)),
            ]
        };
        let mut w = World {
            nodes: BTreeMap::new(),
            zxid: 1,
            now: Instant::ZERO,
            sess: Default::default(),
            watches: Vec::new(),
            multi,
            writer: None,
            k: 0,
            written: None,
            writer_events: Vec::new(),
            readers,
            reader_events: [Vec::new(), Vec::new()],
            last_snapshot: [None, None],
            fresh_floor: [None, None],
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
        if multi {
            // An operator created `ready` once; the multi writer never touches it.
            let _ = w.create("/cfg", Bytes::new());
            let _ = w.create(READY, Bytes::new());
        }
        for (i, s) in w.sess.iter_mut().enumerate() {
            s.id = 0x100 * (i as i64 + 1);
            s.connected = true;
        }
        let now = w.now;
        for who in 0..3 {
            let id = w.sess[who].id;
            if let Some(m) = w.machine(who) {
                m.handle_session(now, SessionChange::Connected { session_id: id });
            }
        }
        for r in &mut w.readers {
            r.start(now);
        }
        w
    }

    fn machine(&mut self, who: Who) -> Option<&mut dyn zk_recipes::recipe::AnyRecipe> {
        match who {
            0 => self
                .writer
                .as_mut()
                .map(|w| w as &mut dyn zk_recipes::recipe::AnyRecipe),
            i => Some(&mut self.readers[i - 1]),
        }
    }

    // ----- the server -----

    fn stat(&self, path: &str) -> Option<Stat> {
        stat_in(&self.nodes, path)
    }

    /// The tree session `who` reads (older while it lags).
    fn view(&self, who: Who) -> &BTreeMap<String, Node> {
        self.sess[who].lag.as_ref().unwrap_or(&self.nodes)
    }

    /// A lagging server catches up: the notifications it held back for `who`'s
    /// watches fire now (before any later reply).
    fn catch_up(&mut self, who: Who) {
        let Some(old) = self.sess[who].lag.take() else {
            return;
        };
        self.stats.stale_catch_ups += 1;
        let mut i = 0;
        while i < self.watches.len() {
            let (p, _, w, _) = &self.watches[i];
            let (before, after) = (old.get(p), self.nodes.get(p));
            let t = match (before, after) {
                _ if *w != who => None,
                (None, Some(_)) => Some(EventType::NodeCreated),
                (Some(_), None) => Some(EventType::NodeDeleted),
                (Some(a), Some(b)) if a.czxid != b.czxid => Some(EventType::NodeDeleted),
                (Some(a), Some(b)) if a.mzxid != b.mzxid => Some(EventType::NodeDataChanged),
                _ => None,
            };
            match t {
                Some(t) => {
                    let (p, _, _, op) = self.watches.remove(i);
                    let msg = Msg::Watch(
                        op,
                        WatchEvent {
                            event_type: t,
                            path: p,
                        },
                    );
                    let s = &mut self.sess[who];
                    if s.connected {
                        s.inbox.push_back(msg);
                    } else {
                        s.notify.push(msg);
                    }
                }
                None => i += 1,
            }
        }
    }
}

fn stat_in(nodes: &BTreeMap<String, Node>, path: &str) -> Option<Stat> {
    {
        let n = nodes.get(path)?;
        Some(Stat {
            czxid: n.czxid,
            mzxid: n.mzxid,
            version: n.version,
            data_length: n.data.len() as i32,
            ..Stat::default()
        })
    }
}

impl World {
    fn has_children(&self, path: &str) -> bool {
        let prefix = format!("{path}/");
        self.nodes.keys().any(|k| k.starts_with(&prefix))
    }

    fn fire(&mut self, path: &str, kinds: &[Kind], t: EventType) {
        let mut i = 0;
        while i < self.watches.len() {
            // A lagging server has not applied the change yet: it notifies later.
            let lagging = self.sess[self.watches[i].2].lag.is_some();
            if !lagging && self.watches[i].0 == path && kinds.contains(&self.watches[i].1) {
                let (p, _, who, op) = self.watches.remove(i);
                let msg = Msg::Watch(
                    op,
                    WatchEvent {
                        event_type: t,
                        path: p,
                    },
                );
                let s = &mut self.sess[who];
                if s.connected {
                    s.inbox.push_back(msg);
                } else {
                    s.notify.push(msg);
                }
            } else {
                i += 1;
            }
        }
    }

    fn check_create(&self, path: &str) -> Result<(), ErrorCode> {
        if self.nodes.contains_key(path) {
            Err(ErrorCode::NodeExists)
        } else if !self.nodes.contains_key(parent(path)) {
            Err(ErrorCode::NoNode)
        } else {
            Ok(())
        }
    }

    fn create(&mut self, path: &str, data: Bytes) -> Result<Stat, ErrorCode> {
        self.check_create(path)?;
        self.zxid += 1;
        let n = Node {
            data,
            czxid: self.zxid,
            mzxid: self.zxid,
            version: 0,
        };
        self.nodes.insert(path.into(), n);
        self.fire(path, &[Kind::Exist], EventType::NodeCreated);
        Ok(self.stat(path).unwrap_or_default())
    }

    fn remove(&mut self, path: &str) -> Result<(), ErrorCode> {
        if !self.nodes.contains_key(path) {
            return Err(ErrorCode::NoNode);
        }
        if self.has_children(path) {
            return Err(ErrorCode::NotEmpty);
        }
        self.nodes.remove(path);
        self.zxid += 1;
        self.fire(path, &[Kind::Data, Kind::Exist], EventType::NodeDeleted);
        Ok(())
    }

    fn set(&mut self, path: &str, data: Bytes) -> Result<Stat, ErrorCode> {
        if !self.nodes.contains_key(path) {
            return Err(ErrorCode::NoNode);
        }
        self.zxid += 1;
        let z = self.zxid;
        if let Some(n) = self.nodes.get_mut(path) {
            n.data = data;
            n.mzxid = z;
            n.version += 1;
        }
        self.fire(path, &[Kind::Data, Kind::Exist], EventType::NodeDataChanged);
        Ok(self.stat(path).unwrap_or_default())
    }

    fn multi(&mut self, ops: &[MultiOp]) -> Response {
        // Dry run on the node set: all or nothing.
        let mut present: BTreeMap<String, ()> =
            self.nodes.keys().map(|k| (k.clone(), ())).collect();
        let mut failed = None;
        for (i, op) in ops.iter().enumerate() {
            let r = match op {
                MultiOp::Create(c) | MultiOp::Create2(c) | MultiOp::CreateContainer(c) => {
                    if present.contains_key(&c.path) {
                        Err(ErrorCode::NodeExists)
                    } else if !present.contains_key(parent(&c.path)) {
                        Err(ErrorCode::NoNode)
                    } else {
                        present.insert(c.path.clone(), ());
                        Ok(())
                    }
                }
                MultiOp::SetData(s) if present.contains_key(&s.path) => Ok(()),
                MultiOp::Check(c) if present.contains_key(&c.path) => Ok(()),
                MultiOp::Delete(d) if present.contains_key(&d.path) => {
                    present.remove(&d.path);
                    Ok(())
                }
                _ => Err(ErrorCode::NoNode),
            };
            if let Err(code) = r {
                failed = Some((i, code));
                break;
            }
        }
        if let Some((at, code)) = failed {
            return Response::Multi(
                (0..ops.len())
                    .map(|i| {
                        MultiResult::Error(match i.cmp(&at) {
                            core::cmp::Ordering::Less => ErrorCode::Ok,
                            core::cmp::Ordering::Equal => code,
                            core::cmp::Ordering::Greater => ErrorCode::RuntimeInconsistency,
                        })
                    })
                    .collect(),
            );
        }
        let results = ops
            .iter()
            .map(|op| match op {
                MultiOp::Create(c) | MultiOp::Create2(c) | MultiOp::CreateContainer(c) => {
                    let _ = self.create(&c.path, c.data.clone());
                    MultiResult::Create(c.path.clone())
                }
                MultiOp::SetData(s) => {
                    MultiResult::SetData(self.set(&s.path, s.data.clone()).unwrap_or_default())
                }
                MultiOp::Delete(d) => {
                    let _ = self.remove(&d.path);
                    MultiResult::Delete
                }
                _ => MultiResult::Check,
            })
            .collect();
        Response::Multi(results)
    }

    fn apply(&mut self, who: Who, op: OpId, req: &Request) -> Result<Response, Error> {
        let e = |c: ErrorCode| Err(Error::Server(c));
        match req {
            Request::Create(c) | Request::CreateContainer(c) | Request::Create2(c) => {
                match self.create(&c.path, c.data.clone()) {
                    Ok(_) => Ok(Response::Path(c.path.clone())),
                    Err(code) => e(code),
                }
            }
            Request::Delete(d) => self.remove(&d.path).map(|_| Response::Empty).or_else(e),
            Request::SetData(s) => self
                .set(&s.path, s.data.clone())
                .map(Response::Stat)
                .or_else(e),
            Request::Exists(p) => {
                let stat = stat_in(self.view(who), &p.path);
                if p.watch {
                    let kind = if stat.is_some() {
                        Kind::Data
                    } else {
                        Kind::Exist
                    };
                    self.watches.push((p.path.clone(), kind, who, op));
                }
                stat.map(Response::Stat)
                    .ok_or(Error::Server(ErrorCode::NoNode))
            }
            Request::GetData(p) => match (
                stat_in(self.view(who), &p.path),
                self.view(who).get(&p.path),
            ) {
                (Some(stat), Some(n)) => {
                    let data = n.data.clone();
                    if p.watch {
                        self.watches.push((p.path.clone(), Kind::Data, who, op));
                    }
                    Ok(Response::Data { data, stat })
                }
                _ => e(ErrorCode::NoNode),
            },
            Request::Sync(p) => {
                self.catch_up(who);
                Ok(Response::Path(p.path.clone()))
            }
            Request::Multi(ops) => Ok(self.multi(ops)),
            Request::MultiRead(ops) => Ok(Response::Multi(
                ops.iter()
                    .map(|op| match op {
                        ReadOp::GetData(p) => match (
                            stat_in(self.view(who), &p.path),
                            self.view(who).get(&p.path),
                        ) {
                            (Some(stat), Some(n)) => MultiResult::GetData {
                                data: n.data.clone(),
                                stat,
                            },
                            _ => MultiResult::Error(ErrorCode::NoNode),
                        },
                        ReadOp::GetChildren(_) => MultiResult::Error(ErrorCode::Unimplemented),
                    })
                    .collect(),
            )),
            _ => Err(Error::UnexpectedReply),
        }
    }

    // ----- the client side -----

    /// Moves requests out and events in until nothing moves; checks invariants.
    fn pump(&mut self) -> Result<(), String> {
        loop {
            let mut moved = false;
            // Events first: a round that ends reports before the next one starts, so a
            // `sync` polled below belongs to a round begun after every event seen.
            if let Some(w) = &mut self.writer {
                while let Some(e) = w.poll_event() {
                    moved = true;
                    match &e {
                        WriterEvent::Written => {
                            self.written = Some(self.k);
                            self.stats.written += 1;
                        }
                        e => return Err(format!("write {} ended with {e:?}", self.k)),
                    }
                    self.writer_events.push(e);
                }
                if w.is_done() {
                    self.writer = None;
                }
            }
            for i in 0..2 {
                while let Some(e) = self.readers[i].poll_event() {
                    moved = true;
                    self.check_reader(i, &e)?;
                    self.reader_events[i].push(e);
                }
            }
            for who in 0..3 {
                loop {
                    let Some((op, req)) = self.machine(who).and_then(|m| m.poll_request()) else {
                        break;
                    };
                    moved = true;
                    if who > 0 {
                        if let Some((_, began)) = &mut self.fresh_floor[who - 1] {
                            *began = true;
                        }
                    }
                    let now = self.now;
                    let s = &mut self.sess[who];
                    if core::mem::take(&mut s.refuse_next) {
                        if let Some(m) = self.machine(who) {
                            m.handle_reply(now, op, Err(Error::Overloaded));
                        }
                    } else if s.connected {
                        s.wire.push_back((op, req));
                    } else {
                        s.queued.push((op, req));
                    }
                }
            }
            if !moved {
                break;
            }
        }
        // A reader told out of band, idle after a round begun since: it holds at least
        // what was written when it was told (unless a newer write is under way).
        for i in 0..2 {
            if let Some((floor, true)) = self.fresh_floor[i] {
                let r = &self.readers[i];
                if r.is_idle() && r.is_ready() && self.last_snapshot[i].unwrap_or(0) < floor {
                    return Err(format!(
                        "reader {i}: idle on {:?} after being told {floor} was written",
                        self.last_snapshot[i]
                    ));
                }
            }
        }
        self.check_watches()
    }

    fn check_reader(&mut self, i: usize, e: &ReaderEvent) -> Result<(), String> {
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
                self.last_snapshot[i] = Some(k);
            }
            ReaderEvent::NotReady => self.stats.not_ready += 1,
            e => return Err(format!("reader {i} ended: {e:?}")),
        }
        Ok(())
    }

    fn check_watches(&self) -> Result<(), String> {
        let mut per: BTreeMap<(Who, &str), usize> = BTreeMap::new();
        for (p, _, w, _) in &self.watches {
            *per.entry((*w, p.as_str())).or_default() += 1;
        }
        if let Some(((w, p), n)) = per.iter().find(|(_, n)| **n > 1) {
            return Err(format!("machine {w}: {n} watches on {p}"));
        }
        Ok(())
    }

    /// Session `who`'s server reads the oldest request; `deliver`: its reply arrives.
    fn serve_one(&mut self, who: Who, deliver: bool) -> bool {
        let Some((op, req)) = self.sess[who].wire.pop_front() else {
            return false;
        };
        let r = self.apply(who, op, &req);
        if deliver {
            self.sess[who].inbox.push_back(Msg::Reply(op, r));
        } else {
            self.sess[who].wire.push_front((op, Request::Ping)); // failed by the disconnect
        }
        true
    }

    fn deliver_one(&mut self, who: Who) -> bool {
        let Some(msg) = self.sess[who].inbox.pop_front() else {
            return false;
        };
        let now = self.now;
        if let Some(m) = self.machine(who) {
            match msg {
                Msg::Reply(op, r) => m.handle_reply(now, op, r),
                Msg::Watch(op, ev) => m.handle_watch(now, op, &ev),
            }
        }
        true
    }

    /// A reply that never arrives registers no watch (the client only learns of a
    /// watch from its reply, and re-arms only those after a reconnect).
    fn unwatch(&mut self, who: Who, op: OpId) {
        self.watches.retain(|(_, _, w, o)| !(*w == who && *o == op));
    }

    fn disconnect(&mut self, who: Who) {
        if !self.sess[who].connected {
            return;
        }
        self.sess[who].connected = false;
        self.stats.disconnects += 1;
        if who != 0 {
            let seen = self.view(who).clone();
            self.sess[who].at_disconnect = Some(seen);
        }
        let now = self.now;
        let mut failed = Vec::new();
        let inbox: Vec<Msg> = self.sess[who].inbox.drain(..).collect();
        for msg in inbox {
            match msg {
                Msg::Reply(op, _) => failed.push(op),
                Msg::Watch(..) => self.sess[who].notify.push(msg),
            }
        }
        failed.extend(self.sess[who].wire.drain(..).map(|(op, _)| op));
        for op in failed {
            self.unwatch(who, op);
            if let Some(m) = self.machine(who) {
                m.handle_reply(now, op, Err(Error::ConnectionLoss));
            }
        }
        if let Some(m) = self.machine(who) {
            m.handle_session(now, SessionChange::Suspended);
        }
    }

    /// `stale`: a reader lands on a server that lags (still at the tree it saw when the
    /// connection broke: ZooKeeper never lets a client see an older one).
    fn reconnect(&mut self, who: Who, stale: bool) {
        if self.sess[who].connected {
            return;
        }
        let now = self.now;
        let s = &mut self.sess[who];
        s.connected = true;
        let seen = s.at_disconnect.take();
        if stale && s.lag.is_none() {
            s.lag = seen;
        }
        let notify = core::mem::take(&mut s.notify);
        s.inbox.extend(notify);
        let id = s.id;
        if let Some(m) = self.machine(who) {
            m.handle_session(now, SessionChange::Reconnected { session_id: id });
        }
        let s = &mut self.sess[who];
        let queued = core::mem::take(&mut s.queued);
        s.wire.extend(queued);
    }

    fn expire(&mut self, who: Who) {
        let now = self.now;
        self.stats.expiries += 1;
        let s = &mut self.sess[who];
        let mut failed: Vec<OpId> = Vec::new();
        for msg in s.inbox.drain(..) {
            if let Msg::Reply(op, _) = msg {
                failed.push(op);
            }
        }
        failed.extend(s.wire.drain(..).map(|(o, _)| o));
        failed.extend(s.queued.drain(..).map(|(o, _)| o));
        s.notify.clear();
        s.lag = None;
        s.at_disconnect = None;
        s.id += 1;
        s.connected = true;
        let id = s.id;
        self.watches.retain(|(_, _, w, _)| *w != who);
        if let Some(m) = self.machine(who) {
            for op in failed {
                m.handle_reply(now, op, Err(Error::SessionExpired));
            }
            m.handle_session(now, SessionChange::Expired);
            m.handle_session(now, SessionChange::Connected { session_id: id });
        }
    }

    fn advance(&mut self, by: Duration) -> Result<(), String> {
        self.now = self.now + by;
        let now = self.now;
        for who in 0..3 {
            let Some(m) = self.machine(who) else { continue };
            if m.poll_timeout().is_some_and(|t| t <= now) {
                m.handle_timeout(now);
                if let Some(t) = m.poll_timeout() {
                    if t <= now {
                        return Err(format!("machine {who}: deadline {t:?} not after {now:?}"));
                    }
                }
            }
        }
        Ok(())
    }

    /// Starts writing configuration `k + 1` if no write is running.
    fn next_write(&mut self) {
        if self.writer.is_some() {
            return;
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
        let mut w = ConfigWriter::new(config, updates);
        let now = self.now;
        let s = &self.sess[0];
        w.handle_session(now, SessionChange::Connected { session_id: s.id });
        if !s.connected {
            w.handle_session(now, SessionChange::Suspended);
        }
        w.start(now);
        self.writer = Some(w);
    }

    fn step(&mut self, b: u8) -> Result<(), String> {
        let arg = b >> 4;
        let who = (arg % 3) as usize;
        match b % 16 {
            0..=4 => {
                if !self.deliver_one(who) {
                    self.serve_one(who, true);
                }
            }
            5 => {
                self.serve_one(who, true);
            }
            6 => {
                // Applied, reply lost.
                if self.sess[who].connected && self.serve_one(who, false) {
                    self.stats.lost_replies += 1;
                    self.disconnect(who);
                }
            }
            7 => self.disconnect(who),
            8 => self.reconnect(who, arg >= 8),
            9 => self.sess[who].refuse_next = true,
            10 => {
                if arg < 3 {
                    self.expire(who);
                }
            }
            11 => {
                if self.k < MAX_WRITES {
                    self.next_write();
                }
            }
            12 => self.advance(Duration::from_millis(5 << (arg % 8)))?,
            13 if arg < 8 => {
                // Told out of band that configuration `written` is out.
                let i = (arg % 2) as usize;
                let now = self.now;
                self.readers[i].refresh(now);
                if self.readers[i].config().sync_first {
                    let floor = self.written.unwrap_or(0);
                    self.fresh_floor[i] = Some((floor, false));
                    self.stats.refreshes += 1;
                }
            }
            13 if arg < 12 => self.catch_up(1 + (arg % 2) as usize),
            13 => {
                // A reader's server falls behind: later writes reach it only when it
                // catches up (its notifications too).
                let who = 1 + (arg % 2) as usize;
                if self.sess[who].lag.is_none() {
                    self.sess[who].lag = Some(self.nodes.clone());
                }
            }
            _ => {
                for who in 0..3 {
                    if !self.deliver_one(who) {
                        self.serve_one(who, true);
                    }
                }
            }
        }
        self.pump()
    }

    /// Faults stop: connected, everything answered, time passes.
    fn settle(&mut self) -> Result<(), String> {
        for who in 0..3 {
            self.reconnect(who, false);
            self.catch_up(who); // lagging servers catch up eventually
        }
        self.pump()?;
        for _ in 0..200 {
            let mut moved = false;
            loop {
                let mut any = false;
                for who in 0..3 {
                    if self.deliver_one(who) || self.serve_one(who, true) {
                        any = true;
                        self.pump()?;
                    }
                }
                if !any {
                    break;
                }
                moved = true;
            }
            let next = (0..3)
                .filter_map(|w| self.machine(w).and_then(|m| m.poll_timeout()))
                .min();
            if let Some(t) = next {
                moved = true;
                let by = t.saturating_since(self.now);
                self.advance(by)?;
            }
            self.pump()?;
            if !moved {
                return Ok(());
            }
        }
        Err("no quiescence after faults stopped".into())
    }
}

/// What a schedule exercised (to show the harness is not vacuous).
#[derive(Clone, Copy, Debug, Default)]
pub struct Stats {
    /// Writes that ended `Written` (including the one after the faults).
    pub written: usize,
    /// Snapshots reported by both readers.
    pub snapshots: usize,
    /// `NotReady` reported by both readers.
    pub not_ready: usize,
    /// Replies lost after the server applied the request.
    pub lost_replies: usize,
    /// Connections dropped.
    pub disconnects: usize,
    /// Sessions expired.
    pub expiries: usize,
    /// Lagging servers that caught up (after a reconnect that served stale reads).
    pub stale_catch_ups: usize,
    /// Out-of-band notices to a `sync_first` reader.
    pub refreshes: usize,
}

/// Runs one schedule; `Err` names the violated invariant.
pub fn run(schedule: &[u8]) -> Result<Stats, String> {
    let multi = schedule.first().is_some_and(|b| b & 1 == 1);
    let mut w = World::new(multi);
    w.pump()?;
    for &b in schedule.iter().skip(1) {
        w.step(b)?;
    }
    w.settle()?;
    if w.writer.is_some() {
        return Err(format!("write {} did not end: {:?}", w.k, w.writer));
    }
    // One more configuration, written without faults: everything converges to it.
    w.next_write();
    w.pump()?;
    w.settle()?;
    if w.writer.is_some() || w.written != Some(w.k) {
        return Err(format!(
            "last write {} did not end Written: {:?}",
            w.k, w.writer_events
        ));
    }
    let want = Bytes::from(format!("{}", w.k));
    for p in PATHS {
        if w.nodes.get(p).map(|n| &n.data) != Some(&want) {
            return Err(format!("{p} holds {:?}, not {want:?}", w.nodes.get(p)));
        }
    }
    if !w.nodes.contains_key(READY) {
        return Err("ready missing after the last write".into());
    }
    for i in 0..2 {
        if w.readers[i].has_ended() {
            return Err(format!("reader {i} ended: {:?}", w.reader_events[i]));
        }
        if w.last_snapshot[i] != Some(w.k) {
            return Err(format!(
                "reader {i}: last snapshot {:?}, last written {}; events {:?}",
                w.last_snapshot[i], w.k, w.reader_events[i]
            ));
        }
        if !matches!(w.reader_events[i].last(), Some(ReaderEvent::Snapshot(_))) {
            return Err(format!(
                "reader {i} ends on {:?}",
                w.reader_events[i].last()
            ));
        }
    }
    Ok(w.stats)
}
