//! A [`TreeCache`] (or a children cache) in the model world ([`harness`]), driven by
//! bytes (proptest and libFuzzer share it). The first byte picks the setup: a 3.6+
//! server (persistent recursive watches) or a 3.5 one (`addWatch` answers
//! `Unimplemented`: one-shot watches), or one-shot watches asked for; a tree or a
//! children cache; a roomy or a tiny `max_nodes`; 2 or 8 reads in flight; an empty
//! tree or a subtree to load. Then the common faults, and the cache's actors:
//!
//! * an operator creates, deletes (with everything below), rewrites or toggles nodes
//!   in the subtree (and next to it: `/ra` must not be cached);
//! * an operator deletes a node and makes it again with new data, in two
//!   transactions or in one `multi` (between the notification of the first change and
//!   the cache's read of it, which may come from a lagging follower);
//! * another session creates ephemeral nodes there, and closes (they go together).
//!
//! The model ([`zk`](super::zk)) delivers the notifications as ZooKeeper does: in order
//! with replies; one-shot watches fire once and are re-armed by the session after a
//! reconnect (what fired while away is delivered then); the persistent recursive watch
//! stays, and what it would have reported while the connection was down is lost (the
//! cache must resync); a watch whose request's reply was lost was never the client's.
//!
//! Safety, after every step: the events replayed from an empty map equal the cache's
//! contents (no `Created` of a cached node, no `Changed` or `Deleted` of an unknown
//! one); every `Created`/`Changed` carries data and a version the node really had at
//! some zxid (never a node that did not have it), and a `Changed` is newer than what
//! was shown (the cache never shows a state older than one it showed); a `Deleted` only
//! once that node is gone; at most `max_nodes` nodes; at most one watch per kind per
//! node on the server; nothing sent while the connection is down or after the final
//! event; no event after a final one; `Initialized` once; `TooLarge` only if the subtree
//! really had more than `max_nodes` nodes; deadlines not in the past.
//!
//! Liveness, once faults stop (connected, everything answered, time passes): the cache
//! is synced and equals the server's subtree (to its depth), node for node, with data
//! and versions — or it ended with `Failed(TooLarge)` because the subtree really
//! exceeded `max_nodes`.

use alloc::collections::BTreeMap;
use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;
use bytes::Bytes;

use zk_recipes::error::Error;
use zk_recipes::proto::*;
use zk_recipes::recipe::cache::{CacheConfig, CacheEvent, TreeCache, WatchStyle};
use zk_recipes::recipe::Machine;

use super::harness::{self, FaultCounts, Harness, Script, ME};
use super::zk::{Happened, Zk};

const ROOT: &str = "/r";
const PATHS: [&str; 10] = [
    "/r", "/r/a", "/r/b", "/r/a/a", "/r/a/b", "/r/b/a", "/r/a/a/a", "/ra", "/r/b/b", "/ra/a",
];
/// The client that writes as another session.
const OTHER: usize = 1;

type H = Harness<TreeCache>;
/// Path → (data, czxid, mzxid).
type Shadow = BTreeMap<String, (Bytes, i64, i64)>;

fn in_subtree(path: &str) -> bool {
    path == ROOT || path.starts_with("/r/")
}

fn depth(path: &str) -> usize {
    path.matches('/').count() - 1
}

stats! {
    /// What a schedule exercised (to show the harness is not vacuous).
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
        /// Operator writes and deletes applied.
        pub operator_writes: usize,
        /// Nodes an operator deleted and made again in one step.
        pub recreated: usize,
        /// Ephemeral nodes another session made, and its closes that deleted some.
        pub other_session: usize,
        /// The common faults.
        pub faults: FaultCounts,
    }
}

struct CacheScript {
    max_depth: Option<usize>,
    max_nodes: usize,
    /// The events replayed from an empty map.
    shadow: Shadow,
    /// Every (path, czxid, mzxid) version the subtree had, with its data.
    history: BTreeMap<(String, i64, i64), Bytes>,
    /// The newest state of each path the events showed: (czxid, mzxid) of a node
    /// shown, or (czxid, `i64::MAX`) once it was shown deleted. Nothing older may be
    /// shown again.
    shown: BTreeMap<String, (i64, i64)>,
    /// The most nodes the subtree (to the cache's depth) ever had.
    most: usize,
    initialized: bool,
    /// The final event, once reported.
    last: Option<CacheEvent>,
    stats: Stats,
}

impl CacheScript {
    fn cached(&self, path: &str) -> bool {
        in_subtree(path) && self.max_depth.is_none_or(|m| depth(path) <= m)
    }

    /// The server's subtree, to the cache's depth.
    fn subtree(&self, zk: &Zk) -> Shadow {
        zk.nodes
            .iter()
            .filter(|(p, _)| self.cached(p))
            .map(|(p, n)| (p.clone(), (n.data.clone(), n.czxid, n.mzxid)))
            .collect()
    }

    /// Notes every version the subtree has now (after each write).
    fn record(&mut self, zk: &Zk) {
        let now = self.subtree(zk);
        self.most = self.most.max(now.len());
        for (p, (data, czxid, mzxid)) in now {
            self.history.insert((p, czxid, mzxid), data);
        }
    }

    /// A write by another session (`Some(OTHER)`) or an operator (`None`).
    fn write(&mut self, h: &mut H, by: Option<usize>, req: Request) -> bool {
        let r = h.world.zk.write_as(by, &req);
        h.note(format!("  {by:?} {}: {r:?}", harness::describe(&req)));
        self.record(&h.world.zk);
        if r.is_ok() && by.is_none() {
            self.stats.operator_writes += 1;
        }
        r.is_ok()
    }

    fn create(&mut self, h: &mut H, by: Option<usize>, path: &str, data: Bytes) -> bool {
        let mode = if by.is_some() {
            CreateMode::Ephemeral
        } else {
            CreateMode::Persistent
        };
        let req = Request::Create(CreateRequest::new(path, data, Acl::open_unsafe(), mode));
        self.write(h, by, req)
    }

    fn delete_req(path: &str) -> Request {
        Request::Delete(DeleteRequest {
            path: path.into(),
            version: -1,
        })
    }

    fn set(&mut self, h: &mut H, path: &str, data: Bytes) -> bool {
        let req = Request::SetData(SetDataRequest {
            path: path.into(),
            data,
            version: -1,
        });
        self.write(h, None, req)
    }

    /// The node at `path` and everything below it, deepest first.
    fn below(h: &H, path: &str) -> Vec<String> {
        let prefix = format!("{path}/");
        h.world
            .zk
            .nodes
            .keys()
            .filter(|k| *k == path || k.starts_with(&prefix))
            .rev()
            .cloned()
            .collect()
    }

    /// An operator deletes `path` and everything below it (deepest first, one
    /// transaction each).
    fn delete_tree(&mut self, h: &mut H, path: &str) {
        for p in Self::below(h, path) {
            self.write(h, None, Self::delete_req(&p));
        }
    }

    /// Replays one event onto the shadow, judging it.
    fn replay(&mut self, h: &H, e: &CacheEvent) -> Result<(), String> {
        if self.last.is_some() {
            return Err(format!("event after the final one: {e:?}"));
        }
        let real = |s: &Self, p: &str, d: &Bytes, st: &Stat| {
            s.history.get(&(String::from(p), st.czxid, st.mzxid)) == Some(d)
        };
        if let CacheEvent::Created { path, stat, .. } | CacheEvent::Changed { path, stat, .. } = e {
            let now = (stat.czxid, stat.mzxid);
            if let Some(was) = self.shown.get(path).filter(|was| now <= **was) {
                return Err(format!(
                    "an older state than one shown (czxid, mzxid) {was:?}: {e:?}"
                ));
            }
            self.shown.insert(path.clone(), now);
        }
        match e {
            CacheEvent::Created { path, data, stat } => {
                self.stats.created += 1;
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
                self.stats.changed += 1;
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
                self.stats.deleted += 1;
                let Some(old) = self.shadow.remove(path) else {
                    return Err(format!("Deleted of an unknown node: {e:?}"));
                };
                self.shown.insert(path.clone(), (old.1, i64::MAX));
                if h.world.zk.nodes.get(path).is_some_and(|n| n.czxid == old.1) {
                    return Err(format!("Deleted of a node still there: {path} {old:?}"));
                }
            }
            CacheEvent::Initialized => {
                if self.initialized {
                    return Err("Initialized twice".into());
                }
                self.initialized = true;
            }
            CacheEvent::Resynced => self.stats.resynced += 1,
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
        if e.is_final() {
            self.last = Some(e.clone());
        }
        Ok(())
    }

    /// Safety of the state: the cache is its events, within bounds, and holds at most
    /// one watch per kind per node.
    fn state(&self, h: &H) -> Result<(), String> {
        if let Some(cache) = h.machine() {
            let snap: Shadow = cache
                .nodes()
                .map(|(p, n)| {
                    (
                        String::from(p),
                        (n.data.clone(), n.stat.czxid, n.stat.mzxid),
                    )
                })
                .collect();
            if snap != self.shadow {
                return Err(format!(
                    "cache {snap:?} is not its events {:?}",
                    self.shadow
                ));
            }
            if cache.len() > self.max_nodes {
                return Err(format!("{} nodes cached", cache.len()));
            }
        }
        // (path, kind): data, child, persistent, persistent recursive.
        let zk = &h.world.zk;
        let one_shot = zk.armed(ME).into_iter().map(|(p, c, _)| (p, u8::from(c)));
        let persistent = zk.persistent_armed(ME).into_iter();
        let mut watches: Vec<(&str, u8)> = one_shot
            .chain(persistent.map(|(p, r, _)| (p, 2 + u8::from(r))))
            .collect();
        let n = watches.len();
        watches.sort_unstable();
        watches.dedup();
        if watches.len() != n {
            return Err(format!(
                "two watches of one kind on a node: {n} for {watches:?}"
            ));
        }
        Ok(())
    }
}

impl Script<TreeCache> for CacheScript {
    const ACTS: u8 = 7;

    fn act(&mut self, h: &mut H, which: u8, arg: u8) -> Result<(), String> {
        let path = PATHS[usize::from(arg) % PATHS.len()];
        let tag = arg / 16;
        // A node there now (odd `arg`: any path, which may be missing).
        let existing: Vec<String> = h
            .world
            .zk
            .nodes
            .keys()
            .filter(|p| in_subtree(p) || p.starts_with("/ra"))
            .cloned()
            .collect();
        let there = match existing.get(usize::from(arg / 2) % existing.len().max(1)) {
            Some(p) if arg & 1 == 0 => p.clone(),
            _ => String::from(path),
        };
        match which {
            0 => {
                self.create(h, None, path, Bytes::from(format!("c{tag}")));
            }
            1 => self.delete_tree(h, &there),
            2 => {
                let data = Bytes::from(format!("s{}", h.world.zk.zxid % 3));
                self.set(h, &there, data);
            }
            3 => {
                // Toggle, creating missing parents: bigger changes in one step.
                if h.world.zk.nodes.contains_key(path) {
                    if !self.write(h, None, Self::delete_req(path)) {
                        self.set(h, path, Bytes::from_static(b"t"));
                    }
                } else {
                    let mut at = String::new();
                    for part in path.split('/').skip(1) {
                        at.push('/');
                        at.push_str(part);
                        if !h.world.zk.nodes.contains_key(&at) {
                            self.create(h, None, &at, Bytes::from_static(b"t"));
                        }
                    }
                }
            }
            4 => {
                // Another session's ephemeral node (a leaf: nothing goes below it).
                if self.create(h, Some(OTHER), path, Bytes::from(format!("e{tag}"))) {
                    self.stats.other_session += 1;
                }
            }
            5 => {
                // Another session closes: its ephemerals go in one transaction.
                let id = h.world.zk.sessions[OTHER].id;
                if !h.world.zk.owned_by(id).is_empty() {
                    self.stats.other_session += 1;
                    h.note("  the other session closes".into());
                    h.world.zk.close_session(OTHER);
                    self.record(&h.world.zk);
                }
            }
            _ => {
                // Deleted and made again with new data: in two transactions, or in one.
                let path = there.as_str();
                if !h.world.zk.nodes.contains_key(path) {
                    return Ok(());
                }
                let data = Bytes::from(format!("n{}", h.world.zk.zxid));
                let made =
                    CreateRequest::new(path, data, Acl::open_unsafe(), CreateMode::Persistent);
                let again = if tag & 1 == 0 {
                    self.delete_tree(h, path);
                    self.write(h, None, Request::Create(made))
                } else {
                    let mut ops: Vec<MultiOp> = Self::below(h, path)
                        .iter()
                        .map(|p| {
                            MultiOp::Delete(DeleteRequest {
                                path: p.clone(),
                                version: -1,
                            })
                        })
                        .collect();
                    ops.push(MultiOp::Create(made));
                    self.write(h, None, Request::Multi(ops));
                    h.world.zk.nodes.contains_key(path)
                };
                if again {
                    self.stats.recreated += 1;
                }
            }
        }
        Ok(())
    }

    fn check(&mut self, h: &H, happened: &[Happened<CacheEvent>]) -> Result<(), String> {
        for x in happened {
            match x {
                Happened::Sent(req) => {
                    if self.last.is_some() {
                        return Err(format!("request {req:?} after the final event"));
                    }
                    if !h.connected() {
                        // A read sent now would go out after the reconnect, before the
                        // resync's sync.
                        return Err(format!("request while disconnected: {req:?}"));
                    }
                }
                Happened::Event(e) => self.replay(h, e)?,
            }
        }
        self.state(h)
    }

    fn settle(&mut self, h: &mut H, _round: u32) -> Result<bool, String> {
        let Some(cache) = h.machine() else {
            return Ok(true);
        };
        let s = &h.world.zk.sessions[ME];
        let quiet = s.wire.is_empty() && s.out.is_empty() && !h.world.zk.lagging(ME);
        Ok(quiet && cache.is_synced() && cache.poll_timeout().is_none())
    }

    fn end(&mut self, h: &H) -> Result<(), String> {
        match &self.last {
            Some(CacheEvent::Failed(Error::TooLarge(_))) => {
                self.stats.too_large = 1;
                return Ok(());
            }
            Some(e) => return Err(format!("ended with {e:?}")),
            None => {}
        }
        let Some(cache) = h.machine() else {
            return Err("liveness: the cache is gone without a final event".into());
        };
        if !cache.is_synced() {
            return Err(format!(
                "liveness: not synced after faults stopped (initialized: {})",
                cache.is_initialized()
            ));
        }
        let server = self.subtree(&h.world.zk);
        if server != self.shadow {
            return Err(format!(
                "liveness: cache {:?} != server {server:?}",
                self.shadow
            ));
        }
        self.stats.synced = 1;
        if cache.watch_style() == WatchStyle::OneShot {
            self.stats.one_shot = 1;
        }
        Ok(())
    }
}

/// Runs one schedule; `Err` names the violated invariant and the last steps taken.
pub fn run(schedule: &[u8]) -> Result<(), String> {
    run_stats(schedule).map(|_| ())
}

/// [`run`], and what the run saw.
pub fn run_stats(schedule: &[u8]) -> Result<Stats, String> {
    let mut input = schedule.iter().copied();
    let setup = input.next().unwrap_or(0);
    let children = setup & 2 != 0;
    let mut config = if children {
        CacheConfig::children(ROOT)
    } else {
        CacheConfig::tree(ROOT)
    };
    config.persistent_watch = setup & 4 == 0;
    config.max_nodes = if setup & 24 == 24 { 4 } else { 64 };
    config.max_in_flight = if setup & 32 != 0 { 2 } else { 8 };
    let mut script = CacheScript {
        max_depth: config.max_depth,
        max_nodes: config.max_nodes,
        shadow: BTreeMap::new(),
        history: BTreeMap::new(),
        shown: BTreeMap::new(),
        most: 0,
        initialized: false,
        last: None,
        stats: Stats::default(),
    };
    let mut h: H = Harness::new(2);
    // A 3.5 server: addWatch answers Unimplemented.
    h.world.zk.persistent_watches = setup & 1 == 0;
    if setup & 64 != 0 {
        // Start with something to load.
        for p in ["/r", "/r/a", "/r/b", "/r/a/a"] {
            script.create(&mut h, None, p, Bytes::from(p));
        }
        script.stats.operator_writes = 0;
        let zxid = h.world.zk.zxid;
        h.world.zk.sessions[ME].seen_zxid = zxid;
    }
    h.note(format!("setup {setup}: {config:?}"));
    let started = h.host(&mut script, TreeCache::new(config), |c, now| c.start(now));
    started.and_then(|()| harness::run(&mut h, &mut script, &mut input))?;
    script.stats.faults = h.faults;
    Ok(script.stats)
}
