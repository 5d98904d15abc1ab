//! A [`TreeCache`] (or a children cache) against a small model of a ZooKeeper tree,
//! driven by bytes (proptest and libFuzzer share it). The first byte picks the setup:
//! a 3.6+ server (persistent recursive watches) or a 3.5 one (`addWatch` answers
//! `Unimplemented`: one-shot watches), or one-shot watches asked for; a tree or a
//! children cache; a roomy or a tiny `max_nodes`. Each further byte is one step:
//!
//! * the server answers the oldest request on the wire; or applies it and the
//!   connection breaks before the reply arrives; or the connection breaks; the client
//!   refuses the next request (`Overloaded`); a reconnect, possibly to a lagging server
//!   that answers reads from the state at the disconnect until a `sync` reaches it;
//!   the session expires (and a new one starts, as the client renews it);
//! * another session creates, deletes or rewrites nodes in the subtree (and next to it:
//!   `/ra` must not be cached); time passes.
//!
//! Notifications follow ZooKeeper: in order with replies; one-shot watches fire once
//! and are re-armed by the session after a reconnect (what fired while away is
//! delivered then); persistent recursive watches stay, and what they would have
//! reported while the connection was down is lost (the cache must resync). A watch set
//! on a lagging server fires, right behind the reply that set it, for what that server
//! had not applied yet (as it would on catching up).
//!
//! Safety, after every step: the events replayed from an empty map equal the cache's
//! contents (no `Created` of a cached node, no `Changed` or `Deleted` of an unknown
//! one); every `Created`/`Changed` carries a version the server really had, and a
//! `Changed` or `Deleted` is only reported once the server moved past what was cached
//! (no invented change); at most `max_nodes` nodes; at most one watch per kind per
//! node; no event after a final one; `Initialized` once; deadlines not in the past.
//!
//! Liveness, once faults stop (connected, everything answered, time passes): the cache
//! is synced and equals the server's subtree (to its depth), node for node, with data
//! and versions — or it ended with `Failed(TooLarge)` because the subtree really
//! exceeded `max_nodes`.

use alloc::collections::{BTreeMap, BTreeSet, VecDeque};
use alloc::format;
use alloc::string::{String, ToString};
use alloc::vec::Vec;
use bytes::Bytes;
use core::time::Duration;

use zk_recipes::error::Error;
use zk_recipes::proto::*;
use zk_recipes::recipe::cache::{CacheConfig, CacheEvent, TreeCache, WatchStyle};
use zk_recipes::recipe::{OpId, Recipe, SessionChange};
use zk_recipes::session::WatchEvent;
use zk_recipes::time::Instant;

const ROOT: &str = "/r";
const PATHS: [&str; 10] = [
    "/r", "/r/a", "/r/b", "/r/a/a", "/r/a/b", "/r/b/a", "/r/a/a/a", "/ra", "/r/b/b", "/ra/a",
];

#[derive(Clone, Debug)]
struct Node {
    data: Bytes,
    czxid: i64,
    mzxid: i64,
    pzxid: i64,
    version: i32,
    cversion: i32,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Kind {
    Data,
    Exist,
    Child,
    Recursive,
}

enum Msg {
    Reply(OpId, Result<Response, Error>),
    Watch(OpId, WatchEvent),
}

type Shadow = BTreeMap<String, (Bytes, i64, i64)>;

struct World {
    nodes: BTreeMap<String, Node>,
    /// What a lagging server still shows (until a sync reaches it).
    lag: Option<BTreeMap<String, Node>>,
    /// What a watch just set on the lagging server missed (see `World::missed`): sent
    /// right behind the reply that set it.
    missed: Vec<WatchEvent>,
    zxid: i64,
    session: i64,
    connected: bool,
    persistent_ok: bool,
    now: Instant,
    wire: VecDeque<(OpId, Request)>,
    inbox: VecDeque<Msg>,
    notify: Vec<Msg>,
    watches: Vec<(String, Kind, OpId)>,
    refuse_next: bool,
    cache: TreeCache,
    max_depth: Option<usize>,
    max_nodes: usize,
    events: Vec<CacheEvent>,
    shadow: Shadow,
    /// Every (path, czxid, mzxid) version that existed, with its data.
    history: BTreeMap<(String, i64, i64), Bytes>,
    /// The most nodes the subtree (to the cache's depth) ever had.
    most: usize,
}

fn parent(path: &str) -> &str {
    match path.rfind('/') {
        Some(0) | None => "/",
        Some(i) => &path[..i],
    }
}

fn in_subtree(path: &str) -> bool {
    path == ROOT || path.starts_with("/r/")
}

fn depth(path: &str) -> usize {
    path.matches('/').count() - 1
}

impl World {
    fn new(setup: u8) -> World {
        let persistent_ok = setup & 1 == 0;
        let children = setup & 2 != 0;
        let one_shot = setup & 4 != 0;
        let tiny = setup & 24 == 24;
        let mut config = if children {
            CacheConfig::children(ROOT)
        } else {
            CacheConfig::tree(ROOT)
        };
        config.persistent_watch = !one_shot;
        config.max_nodes = if tiny { 4 } else { 64 };
        config.max_in_flight = if setup & 32 != 0 { 2 } else { 8 };
        let max_depth = config.max_depth;
        let max_nodes = config.max_nodes;
        let mut w = World {
            nodes: BTreeMap::new(),
            lag: None,
            missed: Vec::new(),
            zxid: 1,
            session: 0x5e55,
            connected: true,
            persistent_ok,
            now: Instant::ZERO,
            wire: VecDeque::new(),
            inbox: VecDeque::new(),
            notify: Vec::new(),
            watches: Vec::new(),
            refuse_next: false,
            cache: TreeCache::new(config),
            max_depth,
            max_nodes,
            events: Vec::new(),
            shadow: BTreeMap::new(),
            history: BTreeMap::new(),
            most: 0,
        };
        w.nodes.insert(
            "/".into(),
            Node {
                data: Bytes::new(),
                czxid: 0,
                mzxid: 0,
                pzxid: 0,
                version: 0,
                cversion: 0,
            },
        );
        if setup & 64 != 0 {
            // Start with something to load.
            for p in ["/r", "/r/a", "/r/b", "/r/a/a"] {
                let _ = w.create(p, Bytes::from(p.to_string()));
            }
        }
        let now = w.now;
        w.cache.handle_session(
            now,
            SessionChange::Connected {
                session_id: w.session,
            },
        );
        w.cache.start(now);
        w
    }

    fn cached(&self, path: &str) -> bool {
        in_subtree(path) && self.max_depth.is_none_or(|m| depth(path) <= m)
    }

    fn subtree(&self) -> Shadow {
        self.nodes
            .iter()
            .filter(|(p, _)| self.cached(p))
            .map(|(p, n)| (p.clone(), (n.data.clone(), n.czxid, n.mzxid)))
            .collect()
    }

    fn record(&mut self, path: &str) {
        if let Some(n) = self.nodes.get(path) {
            self.history
                .insert((path.into(), n.czxid, n.mzxid), n.data.clone());
        }
        let count = self.nodes.keys().filter(|p| self.cached(p)).count();
        self.most = self.most.max(count);
    }

    fn children_in(view: &BTreeMap<String, Node>, path: &str) -> Vec<String> {
        let prefix = if path == "/" {
            "/".to_string()
        } else {
            format!("{path}/")
        };
        view.keys()
            .filter(|k| k.starts_with(&prefix) && k.len() > prefix.len())
            .filter(|k| !k[prefix.len()..].contains('/'))
            .map(|k| k[prefix.len()..].to_string())
            .collect()
    }

    fn stat_in(view: &BTreeMap<String, Node>, path: &str) -> Option<Stat> {
        let n = view.get(path)?;
        Some(Stat {
            czxid: n.czxid,
            mzxid: n.mzxid,
            pzxid: n.pzxid,
            version: n.version,
            cversion: n.cversion,
            data_length: n.data.len() as i32,
            num_children: Self::children_in(view, path).len() as i32,
            ..Stat::default()
        })
    }

    fn fire(&mut self, path: &str, kinds: &[Kind], t: EventType) {
        let mut i = 0;
        while i < self.watches.len() {
            let (p, k, op) = &self.watches[i];
            let recursive = *k == Kind::Recursive
                && t != EventType::NodeChildrenChanged
                && kinds.contains(&Kind::Recursive)
                && (path == p || path.starts_with(&format!("{p}/")) || p == "/");
            if recursive {
                let ev = WatchEvent {
                    event_type: t,
                    path: path.into(),
                };
                // Missed while the connection is down.
                if self.connected {
                    self.inbox.push_back(Msg::Watch(*op, ev));
                }
                i += 1;
            } else if p == path && *k != Kind::Recursive && kinds.contains(k) {
                let (p, _, op) = self.watches.remove(i);
                let ev = WatchEvent {
                    event_type: t,
                    path: p,
                };
                if self.connected {
                    self.inbox.push_back(Msg::Watch(op, ev));
                } else {
                    self.notify.push(Msg::Watch(op, ev));
                }
            } else {
                i += 1;
            }
        }
    }

    fn create(&mut self, path: &str, data: Bytes) -> Result<(), ErrorCode> {
        if self.nodes.contains_key(path) {
            return Err(ErrorCode::NodeExists);
        }
        self.zxid += 1;
        let z = self.zxid;
        let pn = self.nodes.get_mut(parent(path)).ok_or(ErrorCode::NoNode)?;
        pn.pzxid = z;
        pn.cversion += 1;
        self.nodes.insert(
            path.into(),
            Node {
                data,
                czxid: z,
                mzxid: z,
                pzxid: z,
                version: 0,
                cversion: 0,
            },
        );
        self.record(path);
        self.fire(
            path,
            &[Kind::Exist, Kind::Recursive],
            EventType::NodeCreated,
        );
        self.fire(parent(path), &[Kind::Child], EventType::NodeChildrenChanged);
        Ok(())
    }

    fn remove(&mut self, path: &str) -> Result<(), ErrorCode> {
        if !self.nodes.contains_key(path) {
            return Err(ErrorCode::NoNode);
        }
        if !Self::children_in(&self.nodes, path).is_empty() {
            return Err(ErrorCode::NotEmpty);
        }
        self.zxid += 1;
        let z = self.zxid;
        self.nodes.remove(path);
        if let Some(pn) = self.nodes.get_mut(parent(path)) {
            pn.pzxid = z;
            pn.cversion += 1;
        }
        self.fire(
            path,
            &[Kind::Data, Kind::Exist, Kind::Child, Kind::Recursive],
            EventType::NodeDeleted,
        );
        self.fire(parent(path), &[Kind::Child], EventType::NodeChildrenChanged);
        Ok(())
    }

    fn set(&mut self, path: &str, data: Bytes) -> Result<(), ErrorCode> {
        let n = self.nodes.get_mut(path).ok_or(ErrorCode::NoNode)?;
        self.zxid += 1;
        n.data = data;
        n.mzxid = self.zxid;
        n.version += 1;
        self.record(path);
        self.fire(
            path,
            &[Kind::Data, Kind::Exist, Kind::Recursive],
            EventType::NodeDataChanged,
        );
        Ok(())
    }

    fn apply(&mut self, op: OpId, req: &Request) -> Result<Response, Error> {
        let e = |c: ErrorCode| Err(Error::Server(c));
        let view = self.lag.as_ref().unwrap_or(&self.nodes);
        let mut watch = None;
        let r = match req {
            Request::AddWatch(a) => {
                if !self.persistent_ok {
                    return e(ErrorCode::Unimplemented);
                }
                if a.mode != AddWatchMode::PersistentRecursive.to_i32() {
                    return e(ErrorCode::BadArguments);
                }
                watch = Some((a.path.clone(), Kind::Recursive));
                Ok(Response::WatchAdded)
            }
            Request::Sync(p) => {
                self.lag = None;
                Ok(Response::Path(p.path.clone()))
            }
            Request::Exists(p) => match Self::stat_in(view, &p.path) {
                Some(stat) => {
                    if p.watch {
                        watch = Some((p.path.clone(), Kind::Data));
                    }
                    Ok(Response::Stat(stat))
                }
                None => {
                    if p.watch {
                        watch = Some((p.path.clone(), Kind::Exist));
                    }
                    e(ErrorCode::NoNode)
                }
            },
            Request::GetData(p) => match (Self::stat_in(view, &p.path), view.get(&p.path)) {
                (Some(stat), Some(n)) => {
                    if p.watch {
                        watch = Some((p.path.clone(), Kind::Data));
                    }
                    Ok(Response::Data {
                        data: n.data.clone(),
                        stat,
                    })
                }
                _ => e(ErrorCode::NoNode),
            },
            Request::GetChildren2(p) => match Self::stat_in(view, &p.path) {
                Some(stat) => {
                    if p.watch {
                        watch = Some((p.path.clone(), Kind::Child));
                    }
                    Ok(Response::Children2 {
                        children: Self::children_in(view, &p.path),
                        stat,
                    })
                }
                None => e(ErrorCode::NoNode),
            },
            _ => Err(Error::UnexpectedReply),
        };
        if let Some((p, k)) = watch {
            self.missed = self.missed(&p, k);
            // A one-shot watch that fires at once is gone; a persistent one stays.
            if k == Kind::Recursive || self.missed.is_empty() {
                self.watches.push((p, k, op));
            }
        }
        r
    }

    /// A watch set on a lagging server is checked against its old tree: when the server
    /// catches up (the model lets it catch up for this watch right behind the reply), the
    /// watch fires for what changed since, as `SetWatches` would with the old tree's zxid
    /// (data: `NodeDeleted` or `NodeDataChanged`; exist: `NodeCreated`; child:
    /// `NodeDeleted` or `NodeChildrenChanged`; persistent recursive: each changed node
    /// below it). Without this a watch set on a node the server had already deleted would
    /// never fire, which ZooKeeper does not do.
    fn missed(&self, path: &str, kind: Kind) -> Vec<WatchEvent> {
        let Some(old) = &self.lag else {
            return Vec::new();
        };
        let new = &self.nodes;
        let mut out = Vec::new();
        let mut push = |p: &str, t: EventType| {
            out.push(WatchEvent {
                event_type: t,
                path: p.into(),
            })
        };
        match kind {
            Kind::Data => match (old.get(path), new.get(path)) {
                (Some(_), None) => push(path, EventType::NodeDeleted),
                (Some(a), Some(b)) if a.mzxid != b.mzxid => push(path, EventType::NodeDataChanged),
                _ => {}
            },
            Kind::Exist => {
                if !old.contains_key(path) && new.contains_key(path) {
                    push(path, EventType::NodeCreated);
                }
            }
            Kind::Child => match (old.get(path), new.get(path)) {
                (Some(_), None) => push(path, EventType::NodeDeleted),
                (Some(a), Some(b)) if a.pzxid != b.pzxid => {
                    push(path, EventType::NodeChildrenChanged)
                }
                _ => {}
            },
            Kind::Recursive => {
                let prefix = format!("{path}/");
                let under = |p: &&String| path == "/" || *p == path || p.starts_with(&prefix);
                let paths: BTreeSet<&String> = old.keys().chain(new.keys()).filter(under).collect();
                for p in paths {
                    match (old.get(p), new.get(p)) {
                        (None, Some(_)) => push(p, EventType::NodeCreated),
                        (Some(_), None) => push(p, EventType::NodeDeleted),
                        (Some(a), Some(b)) if a.czxid != b.czxid => {
                            push(p, EventType::NodeDeleted);
                            push(p, EventType::NodeCreated);
                        }
                        (Some(a), Some(b)) if a.mzxid != b.mzxid => {
                            push(p, EventType::NodeDataChanged)
                        }
                        _ => {}
                    }
                }
            }
        }
        out
    }

    // ----- the client side -----

    fn pump(&mut self) -> Result<(), String> {
        loop {
            let mut moved = false;
            while let Some((op, req)) = self.cache.poll_request() {
                moved = true;
                let now = self.now;
                if core::mem::take(&mut self.refuse_next) {
                    self.cache.handle_reply(now, op, Err(Error::Overloaded));
                } else if self.connected {
                    self.wire.push_back((op, req));
                } else {
                    // The recipe sends nothing while suspended; a session would queue it.
                    return Err(format!("request while disconnected: {req:?}"));
                }
            }
            while let Some(e) = self.cache.poll_event() {
                moved = true;
                self.replay(&e)?;
                self.events.push(e);
            }
            if !moved {
                break;
            }
        }
        self.check()
    }

    fn replay(&mut self, e: &CacheEvent) -> Result<(), String> {
        if self.events.last().is_some_and(|l| l.is_final()) {
            return Err(format!("event after final: {e:?}"));
        }
        let real = |w: &World, p: &str, d: &Bytes, s: &Stat| {
            w.history.get(&(p.to_string(), s.czxid, s.mzxid)) == Some(d)
        };
        match e {
            CacheEvent::Created { path, data, stat } => {
                if self.shadow.contains_key(path) {
                    return Err(format!("Created of a cached node: {e:?}"));
                }
                if !real(self, path, data, stat) || !self.cached(path) {
                    return Err(format!("Created of a version that never was: {e:?}"));
                }
                self.shadow
                    .insert(path.clone(), (data.clone(), stat.czxid, stat.mzxid));
            }
            CacheEvent::Changed { path, data, stat } => {
                let Some(old) = self.shadow.get(path) else {
                    return Err(format!("Changed of an unknown node: {e:?}"));
                };
                if old.1 != stat.czxid || old.2 >= stat.mzxid || !real(self, path, data, stat) {
                    return Err(format!("Changed to no newer real version: {old:?} {e:?}"));
                }
                self.shadow
                    .insert(path.clone(), (data.clone(), stat.czxid, stat.mzxid));
            }
            CacheEvent::Deleted { path } => {
                let Some(old) = self.shadow.remove(path) else {
                    return Err(format!("Deleted of an unknown node: {e:?}"));
                };
                if self.nodes.get(path).is_some_and(|n| n.czxid == old.1) {
                    return Err(format!("Deleted of a node still there: {path} {old:?}"));
                }
            }
            CacheEvent::Initialized if self.events.contains(&CacheEvent::Initialized) => {
                return Err("Initialized twice".into());
            }
            CacheEvent::Failed(Error::TooLarge(t))
                if self.most <= self.max_nodes || t.max != self.max_nodes =>
            {
                return Err(format!(
                    "TooLarge but the subtree never had more than {} nodes",
                    self.most
                ));
            }
            CacheEvent::Failed(Error::TooLarge(_)) => {}
            CacheEvent::Failed(Error::Closed) | CacheEvent::Closed => {}
            CacheEvent::Failed(e) => return Err(format!("failed: {e:?}")),
            _ => {}
        }
        Ok(())
    }

    fn check(&self) -> Result<(), String> {
        let snap: Shadow = self
            .cache
            .nodes()
            .map(|(p, n)| (p.to_string(), (n.data.clone(), n.stat.czxid, n.stat.mzxid)))
            .collect();
        if snap != self.shadow {
            return Err(format!(
                "cache {snap:?} is not its events {:?}",
                self.shadow
            ));
        }
        if self.cache.len() > self.max_nodes {
            return Err(format!("{} nodes cached", self.cache.len()));
        }
        let mut seen = BTreeSet::new();
        for (p, k, _) in &self.watches {
            if !seen.insert((p.as_str(), *k)) {
                return Err(format!("two {k:?} watches on {p}"));
            }
        }
        Ok(())
    }

    fn serve_one(&mut self, deliver: bool) -> bool {
        let Some((op, req)) = self.wire.pop_front() else {
            return false;
        };
        let r = self.apply(op, &req);
        let missed = core::mem::take(&mut self.missed);
        if deliver {
            self.inbox.push_back(Msg::Reply(op, r));
            // A reply that never arrives set no watch (see `disconnect`).
            for ev in missed {
                self.inbox.push_back(Msg::Watch(op, ev));
            }
        } else {
            self.wire.push_front((op, Request::Ping)); // failed by the disconnect
        }
        true
    }

    fn deliver_one(&mut self) -> bool {
        let Some(msg) = self.inbox.pop_front() else {
            return false;
        };
        let now = self.now;
        match msg {
            Msg::Reply(op, r) => self.cache.handle_reply(now, op, r),
            Msg::Watch(op, ev) => self.cache.handle_watch(now, op, &ev),
        }
        true
    }

    fn disconnect(&mut self) {
        if !self.connected {
            return;
        }
        self.connected = false;
        let now = self.now;
        let inbox = core::mem::take(&mut self.inbox);
        let mut failed: Vec<OpId> = inbox
            .iter()
            .filter_map(|m| match m {
                Msg::Reply(op, _) => Some(*op),
                Msg::Watch(..) => None,
            })
            .collect();
        failed.extend(self.wire.drain(..).map(|(o, _)| o));
        for msg in inbox {
            if let Msg::Watch(op, ev) = msg {
                // One-shot notifications are re-sent after the reconnect (SetWatches)
                // if the client knows the watch (its reply arrived); persistent ones
                // not read are lost.
                let recursive = self
                    .watches
                    .iter()
                    .any(|(_, k, o)| *o == op && *k == Kind::Recursive);
                if !recursive && !failed.contains(&op) {
                    self.notify.push(Msg::Watch(op, ev));
                }
            }
        }
        for op in failed {
            // A reply that never arrives registers no watch the session would re-arm.
            self.watches.retain(|(_, _, o)| *o != op);
            self.cache.handle_reply(now, op, Err(Error::ConnectionLoss));
        }
        self.cache.handle_session(now, SessionChange::Suspended);
    }

    fn reconnect(&mut self, lagging: bool) {
        if self.connected {
            return;
        }
        if lagging {
            self.lag = Some(self.nodes.clone());
        }
        self.connected = true;
        let now = self.now;
        for msg in core::mem::take(&mut self.notify) {
            self.inbox.push_back(msg);
        }
        self.cache.handle_session(
            now,
            SessionChange::Reconnected {
                session_id: self.session,
            },
        );
    }

    fn expire(&mut self) {
        let now = self.now;
        let mut failed: Vec<OpId> = Vec::new();
        for msg in self.inbox.drain(..) {
            if let Msg::Reply(op, _) = msg {
                failed.push(op);
            }
        }
        failed.extend(self.wire.drain(..).map(|(o, _)| o));
        self.notify.clear();
        self.watches.clear();
        self.lag = None;
        for op in failed {
            self.cache.handle_reply(now, op, Err(Error::SessionExpired));
        }
        self.cache.handle_session(now, SessionChange::Expired);
        self.session += 1;
        self.connected = true;
        self.cache.handle_session(
            now,
            SessionChange::Connected {
                session_id: self.session,
            },
        );
    }

    fn advance(&mut self, by: Duration) -> Result<(), String> {
        self.now = self.now + by;
        let now = self.now;
        if self.cache.poll_timeout().is_some_and(|t| t <= now) {
            self.cache.handle_timeout(now);
            if let Some(t) = self.cache.poll_timeout() {
                if t <= now {
                    return Err(format!("deadline {t:?} not after {now:?}"));
                }
            }
        }
        Ok(())
    }

    fn step(&mut self, b: u8) -> Result<(), String> {
        let arg = b >> 4;
        let path = PATHS[arg as usize % PATHS.len()];
        match b % 16 {
            0..=4 => {
                if !self.deliver_one() {
                    self.serve_one(true);
                }
            }
            5 => {
                self.serve_one(true);
            }
            6 => {
                if self.connected && self.serve_one(false) {
                    self.disconnect();
                }
            }
            7 => self.disconnect(),
            8 => self.reconnect(arg & 1 == 1),
            9 => self.refuse_next = true,
            10 => {
                if arg % 4 == 0 {
                    self.expire();
                }
            }
            11 => {
                let _ = self.create(path, Bytes::from(format!("c{arg}")));
            }
            12 => {
                // Delete the node and everything below it (deepest first).
                let below: Vec<String> = self
                    .nodes
                    .keys()
                    .filter(|k| *k == path || k.starts_with(&format!("{path}/")))
                    .rev()
                    .cloned()
                    .collect();
                for p in below {
                    let _ = self.remove(&p);
                }
            }
            13 => {
                let _ = self.set(path, Bytes::from(format!("s{}", self.zxid % 3)));
            }
            14 => self.advance(Duration::from_millis(5 << (arg % 8)))?,
            _ => {
                // Toggle, creating missing parents: bigger changes in one step.
                if self.nodes.contains_key(path) {
                    if self.remove(path).is_err() {
                        let _ = self.set(path, Bytes::from_static(b"t"));
                    }
                } else {
                    let mut at = String::new();
                    for part in path.split('/').skip(1) {
                        at.push('/');
                        at.push_str(part);
                        let _ = self.create(&at, Bytes::from_static(b"t"));
                    }
                }
            }
        }
        self.pump()
    }

    fn settle(&mut self) -> Result<(), String> {
        self.reconnect(false);
        self.pump()?;
        for _ in 0..500 {
            let mut moved = false;
            while self.deliver_one() || self.serve_one(true) {
                moved = true;
                self.pump()?;
            }
            if let Some(t) = self.cache.poll_timeout() {
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
    /// `Created` events.
    pub created: usize,
    /// `Changed` events.
    pub changed: usize,
    /// `Deleted` events.
    pub deleted: usize,
    /// `Resynced` events.
    pub resynced: usize,
    /// Runs that ended initialized and synced.
    pub synced: usize,
    /// Runs on one-shot watches.
    pub one_shot: usize,
    /// Runs that ended with `Failed(TooLarge)`.
    pub too_large: usize,
}

/// Runs one schedule; `Err` names the violated invariant.
pub fn run(schedule: &[u8]) -> Result<Stats, String> {
    let (setup, steps) = match schedule.split_first() {
        Some((s, rest)) => (*s, rest),
        None => (0, schedule),
    };
    let mut w = World::new(setup);
    w.pump()?;
    for &b in steps {
        w.step(b)?;
    }
    w.settle()?;
    let mut stats = Stats::default();
    match w.events.last() {
        Some(CacheEvent::Failed(Error::TooLarge(_))) => stats.too_large = 1,
        _ => {
            if !w.cache.is_synced() {
                return Err(format!("not synced after faults stopped: {:?}", w.events));
            }
            let server = w.subtree();
            if server != w.shadow {
                return Err(format!("cache {:?} != server {server:?}", w.shadow));
            }
            stats.synced = 1;
        }
    }
    for e in &w.events {
        match e {
            CacheEvent::Created { .. } => stats.created += 1,
            CacheEvent::Changed { .. } => stats.changed += 1,
            CacheEvent::Deleted { .. } => stats.deleted += 1,
            CacheEvent::Resynced => stats.resynced += 1,
            _ => {}
        }
    }
    if w.cache.watch_style() == WatchStyle::OneShot {
        stats.one_shot = 1;
    }
    Ok(stats)
}
