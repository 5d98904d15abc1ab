//! A [`GroupMember`], a [`View`] of its group and a rendezvous [`Worker`], all on one
//! session, against a small model of a ZooKeeper tree, driven by bytes (proptest and
//! libFuzzer share it). Each byte is one step:
//!
//! * the server answers the oldest request on the wire; or applies it and the
//!   connection breaks before the reply arrives; or the connection breaks before it is
//!   read; the client refuses the next request (`Overloaded`); a reconnect; the
//!   session expires (and a new one starts, as the client renews it);
//! * another session adds, removes or rewrites a member; an operator deletes our member
//!   node; the rendezvous node `/z` is created, written, or deleted; time passes; the
//!   user changes the member's data.
//!
//! Safety, after every step: the view's events replay exactly to its snapshot (no
//! `Joined` twice, no `Left` of a stranger); at most one watch per machine per node;
//! no event after a final one; `poll_timeout` never in the past after `handle_timeout`.
//!
//! Liveness and cleanliness, once faults stop (the connection comes back, everything
//! is answered, time passes): the view is synced and equals the server's children with
//! their data; our member node exists, is owned by the current session and holds our
//! data; a worker still waiting holds the latest non-empty address in `/z`. Then the
//! member leaves: it must end with `Removed` and no node of ours may be left.

use alloc::collections::{BTreeMap, VecDeque};
use alloc::format;
use alloc::string::{String, ToString};
use alloc::vec::Vec;
use bytes::Bytes;
use core::time::Duration;

use zk_recipes::error::Error;
use zk_recipes::proto::*;
use zk_recipes::recipe::group::{
    GroupMember, MemberConfig, MemberEvent, View, ViewConfig, ViewEvent,
};
use zk_recipes::recipe::rendezvous::{RendezvousEvent, Worker};
use zk_recipes::recipe::{OpId, Recipe, SessionChange};
use zk_recipes::session::WatchEvent;
use zk_recipes::time::Instant;

const DIR: &str = "/g";
const ME: &str = "/g/me";
const ZR: &str = "/z";
const OTHER: i64 = 0x0be7;
const NAMES: [&str; 3] = ["a", "b", "me"];

#[derive(Clone, Debug)]
struct Node {
    data: Bytes,
    owner: i64,
    czxid: i64,
    mzxid: i64,
    version: i32,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Data,
    Exist,
    Child,
}

/// Which machine: 0 member, 1 view, 2 worker.
type Who = usize;

enum Msg {
    Reply(OpId, Result<Response, Error>),
    Watch(OpId, WatchEvent),
}

struct World {
    nodes: BTreeMap<String, Node>,
    zxid: i64,
    session: i64,
    connected: bool,
    now: Instant,
    wire: VecDeque<(Who, OpId, Request)>,
    queued: Vec<(Who, OpId, Request)>,
    inbox: VecDeque<(Who, Msg)>,
    /// Notifications that fired while disconnected (sent after the reconnect).
    notify: Vec<(Who, Msg)>,
    watches: Vec<(String, Kind, Who, OpId)>,
    refuse_next: bool,
    member: GroupMember,
    view: View,
    worker: Worker,
    member_events: Vec<MemberEvent>,
    view_events: Vec<ViewEvent>,
    worker_events: Vec<RendezvousEvent>,
    /// The view's members replayed from its events.
    shadow: BTreeMap<String, (Bytes, i64)>,
    /// `/z` existed at some point (a worker that saw it go may have ended).
    zr_deleted: bool,
}

fn parent(path: &str) -> &str {
    match path.rfind('/') {
        Some(0) => "/",
        Some(i) => &path[..i],
        None => "/",
    }
}

impl World {
    fn new() -> World {
        let mut w = World {
            nodes: BTreeMap::new(),
            zxid: 1,
            session: 0x5e55,
            connected: true,
            now: Instant::ZERO,
            wire: VecDeque::new(),
            queued: Vec::new(),
            inbox: VecDeque::new(),
            notify: Vec::new(),
            watches: Vec::new(),
            refuse_next: false,
            member: GroupMember::new(MemberConfig::new(DIR, "me", "mine")),
            view: View::new(ViewConfig::new(DIR)),
            worker: Worker::new(ZR),
            member_events: Vec::new(),
            view_events: Vec::new(),
            worker_events: Vec::new(),
            shadow: BTreeMap::new(),
            zr_deleted: false,
        };
        let root = w.node(Bytes::new(), 0);
        w.nodes.insert("/".into(), root);
        let c = SessionChange::Connected {
            session_id: w.session,
        };
        let now = w.now;
        w.member.handle_session(now, c);
        w.view.handle_session(now, c);
        w.worker.handle_session(now, c);
        w.member.join(now);
        w.view.start(now);
        w.worker.start(now);
        w
    }

    fn node(&mut self, data: Bytes, owner: i64) -> Node {
        self.zxid += 1;
        Node {
            data,
            owner,
            czxid: self.zxid,
            mzxid: self.zxid,
            version: 0,
        }
    }

    fn stat(&self, path: &str) -> Option<Stat> {
        let n = self.nodes.get(path)?;
        let prefix = if path == "/" {
            "/".to_string()
        } else {
            format!("{path}/")
        };
        let kids = self
            .nodes
            .keys()
            .filter(|k| k.starts_with(&prefix) && !k[prefix.len()..].contains('/') && *k != path)
            .count();
        Some(Stat {
            czxid: n.czxid,
            mzxid: n.mzxid,
            version: n.version,
            ephemeral_owner: n.owner,
            data_length: n.data.len() as i32,
            num_children: kids as i32,
            ..Stat::default()
        })
    }

    fn children(&self, path: &str) -> Vec<String> {
        let prefix = format!("{path}/");
        self.nodes
            .keys()
            .filter(|k| k.starts_with(&prefix) && !k[prefix.len()..].contains('/'))
            .map(|k| k[prefix.len()..].to_string())
            .collect()
    }

    fn fire(&mut self, path: &str, kinds: &[Kind], t: EventType) {
        let mut i = 0;
        while i < self.watches.len() {
            if self.watches[i].0 == path && kinds.contains(&self.watches[i].1) {
                let (p, _, who, op) = self.watches.remove(i);
                let ev = WatchEvent {
                    event_type: t,
                    path: p,
                };
                if self.connected {
                    self.inbox.push_back((who, Msg::Watch(op, ev)));
                } else {
                    self.notify.push((who, Msg::Watch(op, ev)));
                }
            } else {
                i += 1;
            }
        }
    }

    fn create(&mut self, path: &str, data: Bytes, owner: i64) -> Result<Stat, ErrorCode> {
        if self.nodes.contains_key(path) {
            return Err(ErrorCode::NodeExists);
        }
        if !self.nodes.contains_key(parent(path)) {
            return Err(ErrorCode::NoNode);
        }
        let n = self.node(data, owner);
        self.nodes.insert(path.into(), n);
        self.fire(path, &[Kind::Exist], EventType::NodeCreated);
        self.fire(parent(path), &[Kind::Child], EventType::NodeChildrenChanged);
        Ok(self.stat(path).unwrap_or_default())
    }

    fn remove(&mut self, path: &str) -> Result<(), ErrorCode> {
        if !self.nodes.contains_key(path) {
            return Err(ErrorCode::NoNode);
        }
        if !self.children(path).is_empty() {
            return Err(ErrorCode::NotEmpty);
        }
        self.nodes.remove(path);
        self.zxid += 1;
        if path == ZR {
            self.zr_deleted = true;
        }
        self.fire(
            path,
            &[Kind::Data, Kind::Exist, Kind::Child],
            EventType::NodeDeleted,
        );
        self.fire(parent(path), &[Kind::Child], EventType::NodeChildrenChanged);
        Ok(())
    }

    fn set(&mut self, path: &str, data: Bytes) -> Result<Stat, ErrorCode> {
        self.zxid += 1;
        let z = self.zxid;
        let n = self.nodes.get_mut(path).ok_or(ErrorCode::NoNode)?;
        n.data = data;
        n.mzxid = z;
        n.version += 1;
        self.fire(path, &[Kind::Data, Kind::Exist], EventType::NodeDataChanged);
        Ok(self.stat(path).unwrap_or_default())
    }

    fn apply(&mut self, who: Who, op: OpId, req: &Request) -> Result<Response, Error> {
        let e = |c: ErrorCode| Err(Error::Server(c));
        let watch = |w: &mut World, path: &str, kind: Kind| {
            w.watches.push((path.to_string(), kind, who, op));
        };
        match req {
            Request::Create(c) | Request::CreateContainer(c) | Request::Create2(c) => {
                let owner = if c.flags == CreateMode::Ephemeral.to_i32() {
                    self.session
                } else {
                    0
                };
                match self.create(&c.path, c.data.clone(), owner) {
                    Ok(stat) => Ok(Response::PathStat {
                        path: c.path.clone(),
                        stat,
                    }),
                    Err(code) => e(code),
                }
            }
            Request::Delete(d) => self.remove(&d.path).map(|_| Response::Empty).or_else(e),
            Request::SetData(s) => self
                .set(&s.path, s.data.clone())
                .map(Response::Stat)
                .or_else(e),
            Request::Exists(p) => match self.stat(&p.path) {
                Some(stat) => {
                    if p.watch {
                        watch(self, &p.path, Kind::Data);
                    }
                    Ok(Response::Stat(stat))
                }
                None => {
                    if p.watch {
                        watch(self, &p.path, Kind::Exist);
                    }
                    e(ErrorCode::NoNode)
                }
            },
            Request::GetData(p) => match (self.stat(&p.path), self.nodes.get(&p.path)) {
                (Some(stat), Some(n)) => {
                    let data = n.data.clone();
                    if p.watch {
                        watch(self, &p.path, Kind::Data);
                    }
                    Ok(Response::Data { data, stat })
                }
                _ => e(ErrorCode::NoNode),
            },
            Request::GetChildren(p) => {
                if !self.nodes.contains_key(&p.path) {
                    return e(ErrorCode::NoNode);
                }
                if p.watch {
                    watch(self, &p.path, Kind::Child);
                }
                Ok(Response::Children(self.children(&p.path)))
            }
            Request::Sync(p) => Ok(Response::Path(p.path.clone())),
            _ => Err(Error::UnexpectedReply),
        }
    }

    // ----- the client side -----

    fn machine(&mut self, who: Who) -> &mut dyn zk_recipes::recipe::AnyRecipe {
        match who {
            0 => &mut self.member,
            1 => &mut self.view,
            _ => &mut self.worker,
        }
    }

    /// Moves requests out and events in until nothing moves; checks invariants.
    fn pump(&mut self) -> Result<(), String> {
        loop {
            let mut moved = false;
            for who in 0..3 {
                while let Some((op, req)) = self.machine(who).poll_request() {
                    moved = true;
                    let now = self.now;
                    if core::mem::take(&mut self.refuse_next) {
                        self.machine(who)
                            .handle_reply(now, op, Err(Error::Overloaded));
                    } else if self.connected {
                        self.wire.push_back((who, op, req));
                    } else {
                        self.queued.push((who, op, req));
                    }
                }
            }
            while let Some(e) = self.member.poll_event() {
                moved = true;
                if self.member_events.last().is_some_and(|l| l.is_final()) {
                    return Err(format!("member event after final: {e:?}"));
                }
                self.member_events.push(e);
            }
            while let Some(e) = self.view.poll_event() {
                moved = true;
                self.replay_view(&e)?;
                self.view_events.push(e);
            }
            while let Some(e) = self.worker.poll_event() {
                moved = true;
                if self.worker_events.last().is_some_and(|l| l.is_final()) {
                    return Err(format!("worker event after final: {e:?}"));
                }
                self.worker_events.push(e);
            }
            if !moved {
                break;
            }
        }
        self.check_watches()
    }

    fn replay_view(&mut self, e: &ViewEvent) -> Result<(), String> {
        if matches!(
            self.view_events.last(),
            Some(ViewEvent::Failed(_) | ViewEvent::Closed)
        ) {
            return Err(format!("view event after final: {e:?}"));
        }
        let entry = |m: &zk_recipes::recipe::group::Member| (m.data.clone(), m.stat.czxid);
        let (name, had, wants) = match e {
            ViewEvent::Joined(m) => (&m.name, self.shadow.insert(m.name.clone(), entry(m)), false),
            ViewEvent::Left(m) => (&m.name, self.shadow.remove(&m.name), true),
            ViewEvent::Changed(m) => (&m.name, self.shadow.insert(m.name.clone(), entry(m)), true),
            _ => return Ok(()),
        };
        if had.is_some() != wants {
            return Err(format!(
                "{e:?} does not fit the view's events so far ({name})"
            ));
        }
        Ok(())
    }

    fn check_watches(&self) -> Result<(), String> {
        for who in 0..3 {
            let mut per: BTreeMap<&str, usize> = BTreeMap::new();
            for (p, _, w, _) in &self.watches {
                if *w == who {
                    *per.entry(p.as_str()).or_default() += 1;
                }
            }
            // One registration per node; the view may hold a child watch and an exists
            // watch on the directory at once.
            let limit = |p: &str| if who == 1 && p == DIR { 2 } else { 1 };
            if let Some((p, n)) = per.iter().find(|(p, n)| **n > limit(p)) {
                return Err(format!("machine {who}: {n} watches on {p}"));
            }
        }
        let snap: BTreeMap<String, (Bytes, i64)> = self
            .view
            .members()
            .iter()
            .map(|m| (m.name.clone(), (m.data.clone(), m.stat.czxid)))
            .collect();
        if snap != self.shadow {
            return Err(format!(
                "view snapshot {snap:?} is not its events {:?}",
                self.shadow
            ));
        }
        Ok(())
    }

    /// The server reads the oldest request; `deliver`: its reply arrives.
    fn serve_one(&mut self, deliver: bool) -> bool {
        let Some((who, op, req)) = self.wire.pop_front() else {
            return false;
        };
        let r = self.apply(who, op, &req);
        if deliver {
            self.inbox.push_back((who, Msg::Reply(op, r)));
        } else {
            self.wire.push_front((who, op, Request::Ping)); // failed by the disconnect
        }
        true
    }

    /// A reply that never arrives registers no watch: the client's registry (which
    /// the session re-arms after a reconnect) only learns of a watch from its reply.
    fn unwatch(&mut self, who: Who, op: OpId) {
        self.watches.retain(|(_, _, w, o)| !(*w == who && *o == op));
    }

    fn deliver_one(&mut self) -> bool {
        let Some((who, msg)) = self.inbox.pop_front() else {
            return false;
        };
        let now = self.now;
        match msg {
            Msg::Reply(op, r) => self.machine(who).handle_reply(now, op, r),
            Msg::Watch(op, ev) => self.machine(who).handle_watch(now, op, &ev),
        }
        true
    }

    fn disconnect(&mut self) {
        if !self.connected {
            return;
        }
        self.connected = false;
        let now = self.now;
        // Replies not read yet are lost; notifications are sent again after the reconnect.
        let inbox: Vec<_> = self.inbox.drain(..).collect();
        let mut failed = Vec::new();
        for (who, msg) in inbox {
            match msg {
                Msg::Reply(op, _) => failed.push((who, op)),
                Msg::Watch(..) => self.notify.push((who, msg)),
            }
        }
        for (who, op, _) in self.wire.drain(..) {
            failed.push((who, op));
        }
        for (who, op) in failed {
            self.unwatch(who, op);
            self.machine(who)
                .handle_reply(now, op, Err(Error::ConnectionLoss));
        }
        for who in 0..3 {
            self.machine(who)
                .handle_session(now, SessionChange::Suspended);
        }
    }

    fn reconnect(&mut self) {
        if self.connected {
            return;
        }
        self.connected = true;
        let now = self.now;
        let s = self.session;
        for (who, msg) in core::mem::take(&mut self.notify) {
            self.inbox.push_back((who, msg));
        }
        for who in 0..3 {
            self.machine(who)
                .handle_session(now, SessionChange::Reconnected { session_id: s });
        }
        for q in core::mem::take(&mut self.queued) {
            self.wire.push_back(q);
        }
    }

    fn expire(&mut self) {
        let now = self.now;
        let mut failed: Vec<(Who, OpId)> = Vec::new();
        for (who, msg) in self.inbox.drain(..) {
            if let Msg::Reply(op, _) = msg {
                failed.push((who, op));
            }
        }
        failed.extend(self.wire.drain(..).map(|(w, o, _)| (w, o)));
        failed.extend(self.queued.drain(..).map(|(w, o, _)| (w, o)));
        self.notify.clear();
        self.watches.clear();
        for (who, op) in failed {
            self.machine(who)
                .handle_reply(now, op, Err(Error::SessionExpired));
        }
        for who in 0..3 {
            self.machine(who)
                .handle_session(now, SessionChange::Expired);
        }
        // The server deletes the old session's ephemerals (no watches of ours remain).
        let old = self.session;
        let mine: Vec<String> = self
            .nodes
            .iter()
            .filter(|(_, n)| n.owner == old)
            .map(|(p, _)| p.clone())
            .collect();
        for p in mine {
            let _ = self.remove(&p);
        }
        self.session += 1;
        self.connected = true;
        let s = self.session;
        for who in 0..3 {
            self.machine(who)
                .handle_session(now, SessionChange::Connected { session_id: s });
        }
    }

    fn advance(&mut self, by: Duration) -> Result<(), String> {
        self.now = self.now + by;
        let now = self.now;
        for who in 0..3 {
            if self.machine(who).poll_timeout().is_some_and(|t| t <= now) {
                self.machine(who).handle_timeout(now);
                if let Some(t) = self.machine(who).poll_timeout() {
                    if t <= now {
                        return Err(format!("machine {who}: deadline {t:?} not after {now:?}"));
                    }
                }
            }
        }
        Ok(())
    }

    fn step(&mut self, b: u8) -> Result<(), String> {
        let arg = b >> 4;
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
                // Applied, reply lost.
                if self.connected && self.serve_one(false) {
                    self.disconnect();
                }
            }
            7 => self.disconnect(),
            8 => self.reconnect(),
            9 => self.refuse_next = true,
            10 => {
                if arg % 4 == 0 {
                    self.expire();
                }
            }
            11 => {
                let name = NAMES[(arg % 2) as usize];
                let path = format!("{DIR}/{name}");
                if self.nodes.contains_key(&path) {
                    let _ = self.remove(&path);
                } else {
                    if !self.nodes.contains_key(DIR) {
                        let _ = self.create(DIR, Bytes::new(), 0);
                    }
                    let _ = self.create(&path, Bytes::from(format!("{arg}")), OTHER);
                }
            }
            12 => {
                let path = format!("{DIR}/{}", NAMES[(arg % 3) as usize]);
                if arg & 4 != 0 {
                    let _ = self.remove(&path); // an operator deletes a member (ours too)
                } else {
                    let _ = self.set(&path, Bytes::from(format!("w{arg}")));
                }
            }
            13 => match arg % 3 {
                0 => {
                    let _ = self.create(ZR, Bytes::new(), OTHER);
                }
                1 => {
                    let _ = self.set(ZR, Bytes::from(format!("addr{arg}")));
                }
                _ => {
                    let _ = self.remove(ZR);
                }
            },
            14 => self.advance(Duration::from_millis(5 << (arg % 8)))?,
            _ => {
                let now = self.now;
                self.member
                    .set_data(now, Bytes::from(format!("mine{}", arg % 3)));
            }
        }
        self.pump()
    }

    /// Faults stop: connected, everything answered, time passes.
    fn settle(&mut self) -> Result<(), String> {
        self.reconnect();
        self.pump()?;
        for _ in 0..200 {
            let mut moved = false;
            while self.deliver_one() || self.serve_one(true) {
                moved = true;
                self.pump()?;
            }
            let next = (0..3).filter_map(|w| self.machine(w).poll_timeout()).min();
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
    /// View `Joined` + `Left` + `Changed` events.
    pub view_changes: usize,
    /// View resyncs completed (`Synced` events).
    pub syncs: usize,
    /// Member `Created` events (joins and re-creations).
    pub member_created: usize,
    /// Member `Lost` events.
    pub member_lost: usize,
    /// Worker `Address` events.
    pub addresses: usize,
    /// Worker `Gone` events.
    pub gone: usize,
}

/// Runs one schedule; `Err` names the violated invariant.
pub fn run(schedule: &[u8]) -> Result<Stats, String> {
    let mut w = World::new();
    w.pump()?;
    for &b in schedule {
        w.step(b)?;
    }
    w.settle()?;
    // The view equals the server's children with their data.
    if !w.view.has_ended() {
        if !w.view.is_synced() {
            return Err(format!("view not synced: {:?}", w.view_events));
        }
        let server: BTreeMap<String, (Bytes, i64)> = if w.nodes.contains_key(DIR) {
            w.children(DIR)
                .into_iter()
                .map(|n| {
                    let node = &w.nodes[&format!("{DIR}/{n}")];
                    (n, (node.data.clone(), node.czxid))
                })
                .collect()
        } else {
            BTreeMap::new()
        };
        if server != w.shadow {
            return Err(format!("view {:?} != server {server:?}", w.shadow));
        }
    }
    // Our member node is in place, ours, with our data.
    if !w.member.has_ended() {
        match w.nodes.get(ME) {
            Some(n) if n.owner == w.session && n.data == *w.member.data() => {}
            Some(n) if n.owner == OTHER => {} // another session's node holds our id
            n => return Err(format!("member node {n:?}; events {:?}", w.member_events)),
        }
    }
    // A worker still waiting has the latest non-empty address.
    if !w.worker.is_done() {
        if let Some(n) = w.nodes.get(ZR) {
            if !n.data.is_empty() && w.worker.address() != Some(&n.data) {
                return Err(format!(
                    "worker has {:?}, z_r holds {:?}",
                    w.worker.address(),
                    n.data
                ));
            }
        }
    }
    // Leave: the node goes, Removed is reported.
    let now = w.now;
    w.member.leave(now);
    w.pump()?;
    w.settle()?;
    match w.member_events.last() {
        Some(MemberEvent::Removed) | Some(MemberEvent::Failed { .. }) => {}
        e => return Err(format!("leave did not end: {e:?}")),
    }
    if !w.member.is_done() {
        return Err("member not done after leaving".into());
    }
    if w.nodes.get(ME).is_some_and(|n| n.owner == w.session) {
        return Err(format!(
            "our member node outlived the member: {:?}",
            w.member_events
        ));
    }
    let count = |f: &dyn Fn(&ViewEvent) -> bool| w.view_events.iter().filter(|e| f(e)).count();
    Ok(Stats {
        view_changes: count(&|e| {
            matches!(
                e,
                ViewEvent::Joined(_) | ViewEvent::Left(_) | ViewEvent::Changed(_)
            )
        }),
        syncs: count(&|e| *e == ViewEvent::Synced),
        member_created: w
            .member_events
            .iter()
            .filter(|e| matches!(e, MemberEvent::Created { .. }))
            .count(),
        member_lost: w
            .member_events
            .iter()
            .filter(|e| matches!(e, MemberEvent::Lost { .. }))
            .count(),
        addresses: w
            .worker_events
            .iter()
            .filter(|e| matches!(e, RendezvousEvent::Address { .. }))
            .count(),
        gone: w
            .worker_events
            .iter()
            .filter(|e| matches!(e, RendezvousEvent::Gone))
            .count(),
    })
}
