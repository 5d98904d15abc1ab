//! Tree and children caches: a local copy of a subtree (or of one node's children),
//! kept up to date, with an ordered stream of `Created` / `Changed` / `Deleted` events
//! (Curator's `CuratorCache`, kazoo's `TreeCache`).
//!
//! [`TreeCache`] holds the root and every descendant, each with its data and [`Stat`];
//! [`CacheConfig::children`] makes the same machine a *children cache* (depth 1: the
//! root and its children, with data). Nothing is written to the server.
//!
//! # Protocol, step by step
//!
//! 1. **Arm first.** `addWatch(<root>, PERSISTENT_RECURSIVE)` (ZooKeeper 3.6+). From then
//!    on the server reports `NodeCreated`, `NodeDeleted` and `NodeDataChanged` for the
//!    root and every descendant (never `NodeChildrenChanged`), and the session re-arms
//!    the watch after every reconnect.
//! 2. **Load.** Pipelined behind it: `sync(<root>)`, then for each node, breadth-first,
//!    `getData(<node>)` and (above the depth limit) `getChildren2(<node>)`, with at most
//!    [`CacheConfig::max_in_flight`] reads in flight. Every node read is reported as
//!    [`Created`](CacheEvent::Created) (parents before children), then
//!    [`Initialized`](CacheEvent::Initialized) once the whole subtree is in.
//! 3. **Follow.** `NodeCreated` → read the node (and its children); `NodeDataChanged` →
//!    read its data; `NodeDeleted` → [`Deleted`](CacheEvent::Deleted) at once (the node
//!    and whatever is still cached below it, deepest first). Notifications that arrive
//!    during the load are applied in the same way, in order.
//! 4. **Resync.** After a reconnect (and, with a renewed session, after an expiry: the
//!    watch is armed again first), the subtree is read again exactly as in step 2 and
//!    compared with the cache: only real differences are reported (a node created,
//!    a newer data version, a node gone), then [`Resynced`](CacheEvent::Resynced).
//!
//! ## Which answer wins (the ordering rule)
//!
//! ZooKeeper sends a session's replies and notifications in the order of its state, so
//! a read answered after a notification already reflects that change. The cache does not
//! rely on it alone; a reply is applied only if it is not older than what is held:
//!
//! * **data**: a `getData` reply replaces the cached node only if `(czxid, mzxid)` is
//!   greater (a newer write, or a re-created node); equal is "no change" (no event),
//!   smaller is a stale read and is ignored;
//! * **children**: a `getChildren2` listing is applied only if the parent's `pzxid` is not
//!   smaller than that of the last listing applied, and its `czxid` is the cached node's;
//! * **deletions**: a node deleted by a notification leaves a tombstone (its `czxid`)
//!   while reads are in flight; a reply for that path with a `czxid` not greater is the
//!   deleted node seen before its deletion and is ignored;
//! * a `NoNode` answer removes the node: the reply is at least as new as the cache.
//!
//! A re-created node (same path, greater `czxid`, its deletion missed while
//! disconnected) is reported as `Deleted` (with the nodes cached below it that are
//! older than the new node) and `Created`.
//! `Changed` is reported for a greater `mzxid` only: children coming and going update
//! the cached `Stat` silently.
//!
//! ## Servers without persistent watches (3.5)
//!
//! If `addWatch` fails with anything but a retryable error (3.5 answers
//! `Unimplemented`), or [`CacheConfig::persistent_watch`] is off, the cache falls back
//! to one-shot watches, like Curator's `TreeCache`: each cached node holds one data
//! watch (`getData(watch)`) and, above the depth limit, one child watch
//! (`getChildren2(watch)`); a missing root holds an `exists` watch. `NodeDataChanged`
//! → data read; `NodeChildrenChanged` → a new listing diffed against the cache;
//! `NodeDeleted` → `Deleted`. A node holds at most one watch of each kind at a time: a
//! read sent while one is held goes without; if that watch then fires `NodeDeleted`,
//! the node is read again with watches (the read may find it re-created).
//! The load is restarted with watches when the fallback is decided.
//!
//! # Guarantees
//!
//! * **Safety.** The events, replayed from an empty map, always give exactly the cache's
//!   contents: no `Deleted` of a node never `Created`, no `Created` twice, no event for a
//!   change that did not happen.
//! * **Liveness.** Every retryable failure (a lost connection, a refusal) is retried —
//!   after the reconnect or a backoff ([`Retry`](crate::recipe::Retry)) — and a reconnect re-reads everything:
//!   once faults stop, the cache equals the server's subtree.
//! * **Bounded memory.** At most [`CacheConfig::max_nodes`] nodes are cached; only a
//!   subtree known to exceed it ends the cache with [`Failed`](CacheEvent::Failed)
//!   (`Error::TooLarge { len, max }`: `len` nodes known to be there, more than `max`).
//!   Known means seen by the current load (or followed since): during a resync, a
//!   cached node not re-read yet may be gone and does not count; a new node that does
//!   not fit while such nodes remain waits (its path only, at most `max_nodes` of
//!   them) and is read again once the resync has seen every cached node. At
//!   most `max_in_flight` reads are in flight; queued reads are deduplicated per node.
//!   A cached node's data is a copy of its own (`kept`), not a slice of the reply it
//!   came in, which would keep the whole receive buffer alive.
//!
//! # Session semantics
//!
//! `Suspended` on connection loss or expiry (the cache keeps its contents, possibly
//! stale), then `Resynced` once re-read. The cache carries on into a renewed session.
//! `Closed` ends it with `Failed(Error::Closed)`; [`close`](TreeCache::close) with
//! [`CacheEvent::Closed`]. The server keeps the persistent watch until the session
//! ends (its notifications then reach nobody).
//!
//! ```
//! use zk_recipes::recipe::cache::{CacheConfig, CacheEvent, TreeCache};
//! use zk_recipes::recipe::{Machine, Recipe, SessionChange};
//! use zk_recipes::proto::Request;
//! use zk_recipes::time::Instant;
//!
//! let mut cache = TreeCache::new(CacheConfig::tree("/app"));
//! cache.handle_session(Instant::ZERO, SessionChange::Connected { session_id: 1 });
//! cache.start(Instant::ZERO);
//! let (_, first) = cache.poll_request().unwrap();
//! assert!(matches!(first, Request::AddWatch(_))); // armed before anything is read
//! ```

use alloc::collections::{BTreeMap, BTreeSet, VecDeque};
use alloc::string::String;
use alloc::vec::Vec;
use bytes::Bytes;

use super::kit::{join, protocol_head, valid_path, Kit, Protocol, Reply};
use super::watcher::{watcher_calls, watcher_protocol, Need, Watcher};
use super::{OpId, SessionChange};

mod replies;
use crate::error::Error;
use crate::proto::*;
use crate::session::WatchEvent;
use crate::time::Instant;

/// What a [`TreeCache`] follows and its bounds.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct CacheConfig {
    /// The root's full path.
    pub path: String,
    /// How deep below the root nodes are cached (`None`: the whole subtree; `Some(1)`:
    /// the root and its children).
    pub max_depth: Option<usize>,
    /// The most nodes cached (default 100,000); more ends the cache with `Failed`.
    pub max_nodes: usize,
    /// The most requests in flight at once (default 256; at least 2).
    pub max_in_flight: usize,
    /// Try a persistent recursive watch first (default on); off: one-shot watches.
    pub persistent_watch: bool,
}

impl CacheConfig {
    /// The whole subtree at `path`, root included.
    pub fn tree(path: &str) -> Self {
        CacheConfig {
            path: path.into(),
            max_depth: None,
            max_nodes: 100_000,
            max_in_flight: 256,
            persistent_watch: true,
        }
    }

    /// The node at `path` and its children (depth 1).
    pub fn children(path: &str) -> Self {
        CacheConfig {
            max_depth: Some(1),
            ..CacheConfig::tree(path)
        }
    }
}

/// One cached node.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct CachedNode {
    /// Its data.
    pub data: Bytes,
    /// Its Stat, as last read.
    pub stat: Stat,
}

/// What a [`TreeCache`] reports. `Failed` and `Closed` are final.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum CacheEvent {
    /// A node entered the cache (during the load, or created later).
    Created {
        /// Its full path.
        path: String,
        /// Its data.
        data: Bytes,
        /// Its Stat.
        stat: Stat,
    },
    /// A cached node has a newer data version.
    Changed {
        /// Its full path.
        path: String,
        /// Its new data.
        data: Bytes,
        /// Its new Stat.
        stat: Stat,
    },
    /// A cached node is gone.
    Deleted {
        /// Its full path.
        path: String,
    },
    /// The first load is complete: the events so far are the subtree.
    Initialized,
    /// The connection dropped (or the session expired): the cache may be stale.
    Suspended,
    /// Re-read after a reconnect or a new session; the differences were reported.
    Resynced,
    /// Ended: the subtree exceeds `max_nodes`, a read was refused for good, or the
    /// session closed. Final.
    Failed(Error),
    /// Ended by [`close`](TreeCache::close). Final.
    Closed,
}

impl CacheEvent {
    /// Does this event end the cache?
    pub fn is_final(&self) -> bool {
        matches!(self, CacheEvent::Failed(_) | CacheEvent::Closed)
    }
}

/// Which watches follow the subtree.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum WatchStyle {
    /// `addWatch` not answered yet.
    Unknown,
    /// One persistent recursive watch on the root.
    Persistent,
    /// One-shot data and child watches per node (pre-3.6 servers).
    OneShot,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
enum Job {
    /// Data and children of a node; `full`: read every child too (a load).
    Node { path: String, full: bool },
    /// Data only.
    Data(String),
    /// Children only (a new listing; new children read, or all of them if `full`).
    Children { path: String, full: bool },
    /// `exists(watch)` on the missing root (one-shot style).
    Exists,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum Op {
    AddWatch,
    Sync(u64),
    Data {
        path: String,
        gen: u64,
        watch: bool,
    },
    Children {
        path: String,
        gen: u64,
        full: bool,
        watch: bool,
    },
    Exists {
        gen: u64,
    },
}

/// What a read of a node reads: its data, or its children (`full`: for a full load, see
/// `Job::Children`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Read {
    /// `getData`.
    Data,
    /// `getChildren2`.
    Children { full: bool },
}

/// Where the cache's loads stand.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Load {
    /// Nothing loaded yet, no load under way.
    Unloaded,
    /// The first load is under way (`Initialized` when it is in).
    First,
    /// Loaded (the first load is complete), no load under way.
    Loaded,
    /// A resync's load is under way (`Resynced` when it is in, if `Suspended` was
    /// reported).
    Again,
}

impl Load {
    /// A load begins (the first, or a resync).
    fn begin(&mut self) {
        *self = match self {
            Load::Unloaded | Load::First => Load::First,
            Load::Loaded | Load::Again => Load::Again,
        };
    }

    fn is_loading(self) -> bool {
        matches!(self, Load::First | Load::Again)
    }

    fn is_initialized(self) -> bool {
        matches!(self, Load::Loaded | Load::Again)
    }
}

/// A resync: `sync`, then read the whole subtree again.
const RESYNC: Need = Need::bit(0);
/// `addWatch(<root>, PERSISTENT_RECURSIVE)` to send (again).
const WATCH: Need = Need::bit(1);

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct Entry {
    node: CachedNode,
    /// `pzxid` of the last listing applied (-1: none).
    pzxid: i64,
    /// The load (read generation) that last saw the node on the server; older: cached
    /// before this resync and not re-read yet, possibly gone.
    seen: u64,
}

/// A children cache: the same machine, made with [`CacheConfig::children`] (or
/// [`TreeCache::children_of`]).
pub type ChildrenCache = TreeCache;

/// A cache of a subtree (or of one node's children); see the [module docs](self).
///
/// | before | after |
/// | --- | --- |
/// | `started`, `done` | `watcher`'s life (`Idle`, `Running`, `Done`) |
/// | `live`, `waiting` | `watcher`'s link (`Down`, `Up`, `BackingOff`) |
/// | `suspended` | `watcher`: `Suspended` reported, `Resynced` not yet |
/// | `initialized`, `loading` | `load`: `Unloaded`, `First`, `Loaded`, `Again` |
/// | `need_resync`, `need_watch` | `need`: `RESYNC`, `WATCH` |
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct TreeCache {
    config: CacheConfig,
    style: WatchStyle,
    nodes: BTreeMap<String, Entry>,
    tombstones: BTreeMap<String, i64>,
    pending: VecDeque<Job>,
    queued: BTreeSet<Job>,
    /// Read generation: replies to reads of an older one are ignored.
    gen: u64,
    watcher: Watcher,
    load: Load,
    need: Need,
    /// Cached nodes this load has not seen yet (a resync's nodes not re-read yet: some
    /// may be gone on the server). They do not count toward `max_nodes` until seen.
    unseen: usize,
    /// Nodes this load found that did not fit while unseen nodes could still go: read
    /// again once the load has seen every cached node (at most `max_nodes` paths).
    deferred: BTreeSet<String>,
    /// A reply failed with `ConnectionLoss`: the connection is down even if `Suspended`
    /// has not been heard yet; nothing is sent until the session is back.
    conn_lost: bool,
    /// Ops whose persistent watch is registered.
    watch_ops: BTreeSet<OpId>,
    /// One-shot style: the op whose data / child watch is registered (or asked for)
    /// on each node, and the root's `exists` watch.
    armed_data: BTreeMap<String, OpId>,
    armed_child: BTreeMap<String, OpId>,
    armed_exists: Option<OpId>,
    kit: Kit<Op, CacheEvent>,
}

/// The data a cache keeps (and reports): a copy of its own. A reply's data is a slice
/// of the buffer the reply was received in (the codec does not copy), and a `Bytes`
/// slice keeps that whole allocation alive for as long as the node stays cached.
/// Measured with `benches/cache.rs` (10,001 nodes, 32-byte leaves, real server): 510
/// heap bytes per cached node with slices, 350 with copies.
fn kept(data: &Bytes) -> Bytes {
    Bytes::copy_from_slice(data)
}

/// Forgets the registration of `path` if `op` made it (a notification or a failure of an
/// older registration leaves a newer one alone).
fn disarm(armed: &mut BTreeMap<String, OpId>, path: &str, op: OpId) {
    if armed.get(path) == Some(&op) {
        armed.remove(path);
    }
}

fn parent_of(path: &str) -> &str {
    match path.rfind('/') {
        Some(0) | None => "/",
        Some(i) => &path[..i],
    }
}

impl TreeCache {
    /// A cache that does nothing until [`start`](Self::start).
    pub fn new(config: CacheConfig) -> Self {
        let style = if config.persistent_watch {
            WatchStyle::Unknown
        } else {
            WatchStyle::OneShot
        };
        TreeCache {
            config,
            style,
            nodes: BTreeMap::new(),
            tombstones: BTreeMap::new(),
            pending: VecDeque::new(),
            queued: BTreeSet::new(),
            gen: 0,
            watcher: Watcher::default(),
            load: Load::Unloaded,
            need: Need::default(),
            unseen: 0,
            deferred: BTreeSet::new(),
            conn_lost: false,
            watch_ops: BTreeSet::new(),
            armed_data: BTreeMap::new(),
            armed_child: BTreeMap::new(),
            armed_exists: None,
            kit: Kit::default(),
        }
    }

    /// A cache of the subtree at `path` ([`CacheConfig::tree`]).
    pub fn tree(path: &str) -> Self {
        TreeCache::new(CacheConfig::tree(path))
    }

    /// A cache of the node at `path` and its children ([`CacheConfig::children`]).
    pub fn children_of(path: &str) -> ChildrenCache {
        TreeCache::new(CacheConfig::children(path))
    }

    // ----- getters (snapshots) -----

    /// The configuration.
    pub fn config(&self) -> &CacheConfig {
        &self.config
    }

    /// The cached node at `path`.
    pub fn get(&self, path: &str) -> Option<&CachedNode> {
        self.nodes.get(path).map(|e| &e.node)
    }

    /// The names of the cached children of `path`, sorted.
    pub fn children(&self, path: &str) -> Vec<String> {
        let prefix = join(path, "");
        let prefix = if path == "/" {
            String::from("/")
        } else {
            prefix
        };
        self.nodes
            .range::<str, _>((
                core::ops::Bound::Included(prefix.as_str()),
                core::ops::Bound::Unbounded,
            ))
            .take_while(|(k, _)| k.starts_with(&prefix))
            .filter(|(k, _)| k.len() > prefix.len() && !k[prefix.len()..].contains('/'))
            .map(|(k, _)| String::from(&k[prefix.len()..]))
            .collect()
    }

    /// Every cached node, by path (sorted).
    pub fn nodes(&self) -> impl Iterator<Item = (&str, &CachedNode)> {
        self.nodes.iter().map(|(k, e)| (k.as_str(), &e.node))
    }

    /// How many nodes are cached.
    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    /// Nothing cached.
    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }

    /// The first load is complete.
    pub fn is_initialized(&self) -> bool {
        self.load.is_initialized()
    }

    /// Loaded and not suspended or resyncing: the cache was equal to the server's
    /// subtree at the last reply.
    pub fn is_synced(&self) -> bool {
        self.load == Load::Loaded
            && !self.watcher.is_suspended()
            && !self.need.has(RESYNC)
            && !self.watcher.is_done()
    }

    /// Which watches are used.
    pub fn watch_style(&self) -> WatchStyle {
        self.style
    }

    /// Has it ended?
    pub fn has_ended(&self) -> bool {
        self.watcher.is_done()
    }

    // ----- commands -----

    watcher_calls!(CacheEvent, "the load"; begin);

    // ----- internals -----

    fn valid(&self) -> Result<(), Error> {
        valid_path(&self.config.path)
    }

    /// The first load, and the persistent watch unless one-shot.
    fn begin(&mut self) {
        if self.style != WatchStyle::OneShot {
            self.need.add(WATCH);
        }
        self.need.add(RESYNC);
    }

    fn finish(&mut self, e: CacheEvent) {
        self.watcher.end();
        self.kit.clear_requests();
        self.pending.clear();
        self.queued.clear();
        self.tombstones.clear();
        self.deferred.clear();
        self.kit.emit(e);
    }

    fn too_large(&mut self, len: usize) {
        let max = self.config.max_nodes;
        self.finish(CacheEvent::Failed(Error::TooLarge(TooLarge { len, max })));
    }

    /// This load saw `path` on the server (a reply about it, or its parent's listing).
    fn saw(&mut self, path: &str) {
        let gen = self.gen;
        if let Some(e) = self.nodes.get_mut(path) {
            if e.seen != gen {
                e.seen = gen;
                self.unseen = self.unseen.saturating_sub(1);
            }
        }
    }

    /// Counts every cached node as seen by this load.
    fn all_seen(&mut self) {
        if self.unseen > 0 {
            let gen = self.gen;
            for e in self.nodes.values_mut() {
                e.seen = gen;
            }
            self.unseen = 0;
        }
    }

    /// How many nodes the subtree is known to hold now, with `more` found besides the
    /// cache and the deferred ones: the cached nodes this load has seen (a node seen
    /// and gone since has been removed), the deferred ones, and `more`. Unseen nodes
    /// are not counted: they may be gone.
    fn known(&self, more: usize) -> usize {
        (self.nodes.len() - self.unseen.min(self.nodes.len()))
            .saturating_add(self.deferred.len())
            .saturating_add(more)
    }

    /// Depth below the root, if `path` is in the subtree.
    fn depth(&self, path: &str) -> Option<usize> {
        let root = self.config.path.as_str();
        if path == root {
            return Some(0);
        }
        let rest = if root == "/" {
            path.strip_prefix('/')?
        } else {
            path.strip_prefix(root)?.strip_prefix('/')?
        };
        if rest.is_empty() {
            return None;
        }
        Some(1 + rest.bytes().filter(|b| *b == b'/').count())
    }

    fn cached_depth(&self, path: &str) -> Option<usize> {
        let d = self.depth(path)?;
        match self.config.max_depth {
            Some(m) if d > m => None,
            _ => Some(d),
        }
    }

    fn lists_children(&self, depth: usize) -> bool {
        self.config.max_depth.is_none_or(|m| depth < m)
    }

    fn push(&mut self, job: Job) {
        if self.queued.insert(job.clone()) {
            self.pending.push_back(job);
        }
        let limit = self.config.max_nodes.saturating_mul(3).saturating_add(16);
        if self.pending.len() > limit {
            let len = self.nodes.len() + self.pending.len() / 3;
            self.too_large(len);
        }
    }

    fn reads_in_flight(&self) -> usize {
        self.kit.in_flight()
    }

    fn current_reads(&self) -> bool {
        let gen = self.gen;
        self.kit.any(|p| match p {
            Op::Sync(g) | Op::Data { gen: g, .. } | Op::Children { gen: g, .. } => *g == gen,
            Op::Exists { gen: g } => *g == gen,
            Op::AddWatch => false,
        })
    }

    fn drive(&mut self, now: Instant) {
        if self.conn_lost || !self.watcher.gate(&self.kit, now) {
            return;
        }
        let root = self.config.path.clone();
        if self.need.take(WATCH) && self.style != WatchStyle::OneShot {
            self.kit.send(
                Op::AddWatch,
                Request::AddWatch(AddWatchRequest {
                    path: root.clone(),
                    mode: AddWatchMode::PersistentRecursive.to_i32(),
                }),
            );
        }
        if self.need.take(RESYNC) {
            self.begin_load(root);
        }
        self.pump();
        if self.watcher.is_done() {
            return;
        }
        if !self
            .kit
            .any(|p| matches!(p, Op::Data { .. } | Op::Children { .. }))
        {
            self.tombstones.clear();
        }
        if self.load_read_everything() {
            self.end_load();
        }
    }

    /// A load (the first, or a resync): `sync`, then the whole subtree again.
    fn begin_load(&mut self, root: String) {
        self.gen += 1;
        self.pending.clear();
        self.queued.clear();
        self.load.begin();
        // Everything cached is unseen until this load reads it again.
        self.unseen = self.nodes.len();
        self.deferred.clear();
        self.kit.send(
            Op::Sync(self.gen),
            Request::Sync(PathRequest { path: root.clone() }),
        );
        self.push(Job::Node {
            path: root,
            full: true,
        });
    }

    /// A load is under way and has nothing left to read.
    fn load_read_everything(&self) -> bool {
        self.load.is_loading() && self.pending.is_empty() && !self.current_reads()
    }

    /// Sends what is queued, at most `max_in_flight` reads in flight; a load that has
    /// read everything counts its nodes seen and reads again what did not fit.
    fn pump(&mut self) {
        let max = self.config.max_in_flight.max(2);
        loop {
            while let Some(job) = self.pending.front() {
                if self.reads_in_flight() + self.cost(job) > max {
                    break;
                }
                let Some(job) = self.pending.pop_front() else {
                    break;
                };
                self.queued.remove(&job);
                self.send(job);
            }
            if self.watcher.is_done() || !self.load_read_everything() {
                break;
            }
            // The load has read everything: a cached node it did not see (its parent's
            // listing was older than the one applied) stays as it was, seen.
            self.all_seen();
            if self.deferred.is_empty() {
                break;
            }
            // What did not fit is read again, now against seen nodes only: a subtree
            // really over the limit fails then.
            for path in core::mem::take(&mut self.deferred) {
                self.push(Job::Node { path, full: true });
            }
        }
    }

    /// The load is in: `Initialized` the first time, `Resynced` after a `Suspended`.
    fn end_load(&mut self) {
        self.pending.shrink_to_fit(); // a load's queue can be as long as the tree
        let first = self.load == Load::First;
        self.load = Load::Loaded;
        let resumed = self.watcher.resume();
        if first {
            self.kit.emit(CacheEvent::Initialized);
        } else if resumed {
            self.kit.emit(CacheEvent::Resynced);
        }
    }

    /// A listing of `path` is queued or in flight (this load); with `full_only`, a full
    /// one (which reads again the children already cached).
    fn listing_pending(&self, path: &str, full_only: bool) -> bool {
        let gen = self.gen;
        [false, true]
            .iter()
            .filter(|&&full| full || !full_only)
            .any(|&full| {
                let path = String::from(path);
                self.queued.contains(&Job::Children {
                    path: path.clone(),
                    full,
                }) || self.queued.contains(&Job::Node { path, full })
            })
            || self.kit.any(|o| {
                matches!(o, Op::Children { path: p, gen: g, full: f, .. }
                    if p == path && *g == gen && (*f || !full_only))
            })
    }

    /// How many requests `job` sends.
    fn cost(&self, job: &Job) -> usize {
        match job {
            Job::Node { path, .. } => match self.cached_depth(path) {
                Some(d) if self.lists_children(d) => 2,
                _ => 1,
            },
            _ => 1,
        }
    }

    fn one_shot(&self) -> bool {
        self.style == WatchStyle::OneShot
    }

    fn send(&mut self, job: Job) {
        let gen = self.gen;
        match job {
            Job::Node { path, full } => {
                let Some(depth) = self.cached_depth(&path) else {
                    return;
                };
                self.send_read(&path, Read::Data);
                if self.lists_children(depth) {
                    self.send_read(&path, Read::Children { full });
                }
            }
            Job::Data(path) => self.send_read(&path, Read::Data),
            // Sent even if the node is not cached yet: a data read queued before it
            // answers first and decides.
            Job::Children { path, full } => self.send_read(&path, Read::Children { full }),
            Job::Exists => {
                let root = &self.config.path;
                if self.one_shot()
                    && self.armed_exists.is_none()
                    && !self.armed_data.contains_key(root)
                {
                    let path = self.config.path.clone();
                    let op = self.kit.send(
                        Op::Exists { gen },
                        Request::Exists(PathWatch { path, watch: true }),
                    );
                    self.armed_exists = Some(op);
                }
            }
        }
    }

    /// Reads `path` (`read`: its data or its children); in the one-shot style with a
    /// watch, unless one is armed there.
    fn send_read(&mut self, path: &str, read: Read) {
        let children = read != Read::Data;
        // An `exists` watch on the root becomes its data watch if it finds it.
        let exists_armed = !children && self.armed_exists.is_some() && path == self.config.path;
        let watch = self.one_shot() && !exists_armed && !self.armed(children).contains_key(path);
        let (gen, path) = (self.gen, String::from(path));
        let at = PathWatch {
            path: path.clone(),
            watch,
        };
        let op = match read {
            Read::Data => self.kit.send(
                Op::Data {
                    path: path.clone(),
                    gen,
                    watch,
                },
                Request::GetData(at),
            ),
            Read::Children { full } => self.kit.send(
                Op::Children {
                    path: path.clone(),
                    gen,
                    full,
                    watch,
                },
                Request::GetChildren2(at),
            ),
        };
        if watch {
            self.armed(children).insert(path, op);
        }
    }

    /// The one-shot watches armed: the child watches, or the data watches.
    fn armed(&mut self, children: bool) -> &mut BTreeMap<String, OpId> {
        if children {
            &mut self.armed_child
        } else {
            &mut self.armed_data
        }
    }

    /// Removes `path` and everything cached below it, reporting each, deepest first.
    fn remove_subtree(&mut self, path: &str) {
        self.remove_below(path, i64::MAX)
    }

    /// Removes `path` and the nodes cached below it created before `czxid`, reporting
    /// each, deepest first.
    fn remove_below(&mut self, path: &str, czxid: i64) {
        let prefix = if path == "/" {
            String::from("/")
        } else {
            join(path, "")
        };
        let mut gone: Vec<String> = self
            .nodes
            .range::<str, _>((
                core::ops::Bound::Included(prefix.as_str()),
                core::ops::Bound::Unbounded,
            ))
            .take_while(|(k, _)| k.starts_with(&prefix))
            .filter(|(k, e)| *k != path && e.node.stat.czxid < czxid)
            .map(|(k, _)| k.clone())
            .collect();
        gone.reverse(); // descendants sort after their ancestors
        if self.nodes.contains_key(path) {
            gone.push(path.into());
        }
        for p in gone {
            if self.nodes.remove(&p).is_some_and(|e| e.seen != self.gen) {
                self.unseen = self.unseen.saturating_sub(1);
            }
            self.kit.emit(CacheEvent::Deleted { path: p });
        }
        // Deferred nodes there go too (a listing brings back any still there).
        let below: Vec<String> = self
            .deferred
            .range::<str, _>((
                core::ops::Bound::Included(prefix.as_str()),
                core::ops::Bound::Unbounded,
            ))
            .take_while(|k| k.starts_with(&prefix))
            .cloned()
            .collect();
        for p in below {
            self.deferred.remove(&p);
        }
        self.deferred.remove(path);
    }

    fn insert(&mut self, path: String, data: Bytes, stat: Stat) {
        if self.nodes.len() >= self.config.max_nodes {
            let len = self.known(usize::from(!self.deferred.contains(&path)));
            if len > self.config.max_nodes {
                return self.too_large(len);
            }
            // Full only with nodes this load has not seen, which may be gone: wait.
            self.deferred.insert(path);
            return;
        }
        let data = kept(&data);
        self.kit.emit(CacheEvent::Created {
            path: path.clone(),
            data: data.clone(),
            stat,
        });
        self.nodes.insert(
            path,
            Entry {
                node: CachedNode { data, stat },
                pzxid: -1,
                seen: self.gen,
            },
        );
    }

    fn retryable(&mut self, now: Instant, job: Job) {
        self.push(job);
        self.kit.failed(now);
    }
}

impl TreeCache {
    /// The answer to request `op`, sent for `purpose` (`on_reply`: `protocol_head!`).
    fn on_answer(&mut self, now: Instant, op: OpId, purpose: Op, result: Reply) {
        if self.watcher.is_done() {
            return;
        }
        if result == Err(Error::ConnectionLoss) {
            // A read sent now would go out after the reconnect, before our sync.
            self.conn_lost = true;
        }
        match purpose {
            Op::AddWatch => self.on_add_watch(now, op, result),
            Op::Sync(gen) => {
                if gen == self.gen {
                    match result {
                        Ok(_) => {}
                        Err(e) if e.is_retryable() => {
                            // The reads behind it may be stale: load again.
                            self.need.add(RESYNC);
                            self.kit.failed(now);
                        }
                        Err(e) if e.ends_session() => {}
                        Err(e) => self.finish(CacheEvent::Failed(e)),
                    }
                }
            }
            Op::Data { path, gen, watch } => {
                self.on_read(now, op, path, gen, watch, Read::Data, result)
            }
            Op::Children {
                path,
                gen,
                full,
                watch,
            } => self.on_read(now, op, path, gen, watch, Read::Children { full }, result),
            Op::Exists { gen } => self.on_exists(now, op, gen, result),
        }
        self.drive(now);
    }

    /// A notification of a watch of ours (`on_watch`: `watcher_protocol!`).
    fn on_notice(&mut self, op: OpId, event: &WatchEvent) -> bool {
        if event.event_type == EventType::PersistentWatchRemoved {
            if self.watch_ops.remove(&op) && self.watch_ops.is_empty() {
                self.need.add(WATCH);
                self.need.add(RESYNC);
            }
        } else {
            self.on_notification(op, event);
        }
        true
    }

    /// A session is back (`on_session`: `watcher_protocol!`).
    fn on_resync(&mut self, new: bool) {
        self.conn_lost = false;
        if new {
            if self.style != WatchStyle::OneShot {
                self.need.add(WATCH);
            } else {
                self.need.take(WATCH);
            }
        }
        // A reconnect may land on a lagging follower, and changes made while away may
        // not be notified: sync and read everything.
        self.need.add(RESYNC);
    }

    fn on_suspend(&mut self) {
        self.kit.emit(CacheEvent::Suspended);
    }

    /// The session expired: its watches went with it.
    fn forget(&mut self) {
        self.watch_ops.clear();
        self.armed_data.clear();
        self.armed_child.clear();
        self.armed_exists = None;
    }
}

impl Protocol for TreeCache {
    protocol_head!(CacheEvent, take);

    watcher_protocol!(CacheEvent);

    fn check(&self) {
        debug_assert!(
            self.unseen <= self.nodes.len(),
            "unseen nodes are cached nodes"
        );
        debug_assert!(
            self.deferred.len() <= self.config.max_nodes,
            "at most max_nodes paths wait"
        );
        debug_assert!(
            self.pending.len() == self.queued.len(),
            "every queued job is pending once"
        );
        debug_assert!(
            !self.watcher.is_done() || (self.pending.is_empty() && self.kit.is_quiet()),
            "an ended cache reads nothing"
        );
        debug_assert!(
            self.watcher.is_live() || self.kit.is_quiet(),
            "without a session nothing is in flight"
        );
    }
}
