//! An in-memory ZooKeeper 3.8 server model that speaks the real wire protocol.
//!
//! It consumes request frames and emits reply and notification frames made by our
//! codec, so the whole client stack runs against it unchanged. Semantics follow a single
//! 3.8 server where recipes depend on them (reference §2–§10); the order of checks
//! inside each operation follows the server's `PrepRequestProcessor`, so the error a
//! request gets is the one the real server would give.
//!
//! Modelled: data tree with versions, cversion/pzxid/czxid/mzxid; persistent,
//! ephemeral, sequential (10-digit suffix from the parent's create counter), container
//! (reaped at `container_check`) and TTL nodes; sessions with timeouts, re-attach,
//! expiry and close with ephemeral cleanup; one-shot watches with the trigger table of
//! §8.3, persistent and recursive watches, SetWatches(2) with a relative zxid;
//! multi (atomic, per-op error results) and multiRead; sync; auth (digest) and ACLs for
//! world, digest, ip and auth; zxids consumed exactly like the server (failed writes and
//! session create/close included). Notifications precede the reply that caused them.
//! A re-attaching session may land on a lagging follower
//! ([`ServerModel::connect_lagging`]): its reads see an older tree until it catches up
//! (on `sync`, on a write of its own, or after a while).
//!
//! Not modelled, each answered as a 3.8 standalone server answers it with the feature
//! off (`tests/server/sim_differential.rs` checks them against one): quorum and
//! replication (beyond that lag; a standalone server), persistence, read-only mode (a
//! client that would accept a read-only server gets a read-write session), SASL (no
//! SASL set up: a SASL token is answered with an empty one; `addAuth` with `sasl` or
//! `x509` is refused `AuthFailed` and the connection closed; `ip` is accepted),
//! quotas (`/zookeeper/quota` is an ordinary node: nothing is enforced), reconfig
//! (`ReconfigDisabled`, a failed write: it consumes a zxid; `/zookeeper/config` is
//! empty and read-only). Also not modelled: getACL's digest masking, and the 3.8 quirk
//! where a standard watch turns a persistent watch on the same path into a one-shot.

use alloc::boxed::Box;
use alloc::collections::{BTreeMap, BTreeSet, VecDeque};
use alloc::format;
use alloc::string::{String, ToString};
use alloc::sync::Arc;
use alloc::vec::Vec;
use bytes::{Bytes, BytesMut};

use zk_recipes::client::ops::digest_id;
use zk_recipes::proto::*;

/// A connection to the server, as numbered by the server.
pub type ConnId = u64;

/// Server settings.
#[derive(Clone, Debug)]
pub struct ServerConfig {
    /// Shortest session timeout granted, ms.
    pub min_session_timeout_ms: i32,
    /// Longest session timeout granted, ms.
    pub max_session_timeout_ms: i32,
    /// TTL nodes enabled (`zookeeper.extendedTypesEnabled`).
    pub ttl_enabled: bool,
    /// How often empty containers and expired TTL nodes are reaped, ms.
    pub container_check_ms: i64,
    /// Keep a copy of the tree at most this often (server time, ms), for connections
    /// that model a lagging follower ([`ServerModel::connect_lagging`]). 0 (the default):
    /// never, and no connection ever lags.
    pub snapshot_every_ms: i64,
    /// How many of those copies to keep (the oldest goes first).
    pub snapshots_kept: usize,
    /// The first session id handed out (then one more per session). ZooKeeper derives it
    /// from the clock, so a restarted server never hands out an id a client of the
    /// previous one still holds; a deterministic simulation keeps the default.
    pub first_session_id: i64,
}

impl Default for ServerConfig {
    fn default() -> Self {
        // As the test support starts real servers: tickTime 2000, min 1000.
        ServerConfig {
            min_session_timeout_ms: 1000,
            max_session_timeout_ms: 40_000,
            ttl_enabled: true,
            container_check_ms: 60_000,
            snapshot_every_ms: 0,
            snapshots_kept: 8,
            first_session_id: 0x0100_0000_0000_0000,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum Kind {
    Persistent,
    Ephemeral(i64),
    Container,
    Ttl(i64),
}

#[derive(Clone, Debug)]
struct Node {
    data: Bytes,
    acl: Vec<Acl>,
    stat: Stat,
    kind: Kind,
    children: BTreeSet<String>,
    /// Successful child creates (the sequence counter) and deletes.
    creates: i32,
    deletes: i32,
}

impl Node {
    fn visible_stat(&self) -> Stat {
        let mut s = self.stat;
        s.cversion = self.creates.wrapping_add(self.deletes);
        s.num_children = i32::try_from(self.children.len()).unwrap_or(i32::MAX);
        s.data_length = i32::try_from(self.data.len()).unwrap_or(i32::MAX);
        s.ephemeral_owner = match self.kind {
            Kind::Ephemeral(owner) => owner,
            _ => 0,
        };
        s
    }
}

#[derive(Clone, Debug)]
struct SimSession {
    passwd: Bytes,
    timeout_ms: i32,
    last_heard_ms: i64,
    conn: Option<ConnId>,
    ephemerals: BTreeSet<String>,
}

#[derive(Debug)]
struct Conn {
    decoder: FrameDecoder,
    session: Option<i64>,
    auth: Vec<Id>,
    out: BytesMut,
    /// Closed by the server: the driver should drop the socket after sending `out`.
    closed: bool,
    /// Asked for by [`ServerModel::connect_lagging`]; applies if the handshake re-attaches.
    lag: Option<Lag>,
    /// Reads come from an old tree until the follower catches up.
    lagging: Option<Box<Lagging>>,
}

/// How a connection to a lagging follower lags; see [`ServerModel::connect_lagging`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Lag {
    /// The follower catches up by itself this long (server time, ms) after the
    /// handshake, if nothing made it catch up earlier. 0 or less: no lag.
    pub catch_up_ms: i64,
    /// Which of the eligible snapshots the follower is at: the `pick % n`-th newest of
    /// the `n` eligible ones (0 is the newest, so the least stale). Pass a random number
    /// for a uniform choice.
    pub pick: u64,
}

/// A copy of the tree as it was after `zxid`.
#[derive(Debug)]
struct Snapshot {
    zxid: i64,
    taken_ms: i64,
    tree: Arc<Tree>,
}

/// A connection on a follower that has applied the transactions up to `zxid` only.
#[derive(Debug)]
struct Lagging {
    tree: Arc<Tree>,
    zxid: i64,
    /// Server time at which it catches up by itself.
    until_ms: i64,
    /// Watches registered while lagging: the follower fires them as it applies what it
    /// missed, which the model does at catch-up (`relative_zxid` is unused).
    watches: SetWatches2,
}

/// Which one-shot watch a read registers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum WatchOn {
    /// getData, or exists on a node that exists.
    Data,
    /// exists on a missing node.
    Exist,
    /// getChildren.
    Child,
}

#[derive(Debug, Default)]
struct Watches {
    data: BTreeMap<String, BTreeSet<ConnId>>,
    child: BTreeMap<String, BTreeSet<ConnId>>,
    persistent: BTreeMap<String, BTreeSet<ConnId>>,
    recursive: BTreeMap<String, BTreeSet<ConnId>>,
}

fn add(map: &mut BTreeMap<String, BTreeSet<ConnId>>, path: &str, conn: ConnId) {
    map.entry(path.to_string()).or_default().insert(conn);
}

fn take(map: &mut BTreeMap<String, BTreeSet<ConnId>>, path: &str) -> BTreeSet<ConnId> {
    map.remove(path).unwrap_or_default()
}

fn get(map: &BTreeMap<String, BTreeSet<ConnId>>, path: &str) -> BTreeSet<ConnId> {
    map.get(path).cloned().unwrap_or_default()
}

/// The tree and the counters a multi may have to roll back.
#[derive(Clone, Debug)]
struct Tree {
    nodes: BTreeMap<String, Node>,
}

type OpResult = Result<Response, ErrorCode>;

/// A change to fire watches for, after an operation committed.
#[derive(Clone, Debug)]
enum Change {
    Created(String),
    /// With the deleted node's ACL, which decides who may hear about it.
    Deleted(String, Vec<Acl>),
    DataChanged(String),
}

/// See the [module docs](self).
#[derive(Debug)]
pub struct ServerModel {
    config: ServerConfig,
    tree: Tree,
    zxid: i64,
    now_ms: i64,
    sessions: BTreeMap<i64, SimSession>,
    next_session: i64,
    conns: BTreeMap<ConnId, Conn>,
    next_conn: ConnId,
    watches: Watches,
    last_reap_ms: i64,
    /// Connections that may have output or were closed since the last `conns_with_output`.
    dirty: Vec<ConnId>,
    /// Old trees, oldest first, for lagging connections (see `ServerConfig`).
    snapshots: VecDeque<Snapshot>,
    /// Frames handled (requests, pings, handshakes), for benchmarks.
    pub requests_handled: u64,
    /// Paths [`operator_delete`](Self::operator_delete) deleted: the deleted node's
    /// czxid and the deletion's zxid.
    operator_deleted: BTreeMap<String, (i64, i64)>,
    /// Frames written (replies, notifications, handshake answers).
    replies_sent: u64,
    /// The next requests to answer with an error, unapplied ([`fail_requests`](Self::fail_requests)).
    failing: Option<(u32, ErrorCode)>,
    /// Sessions whose next connection lands on a follower stopped at a past state
    /// ([`lag_session`](Self::lag_session)).
    pending_lags: BTreeMap<i64, PendingLag>,
    /// A connection may lag: snapshots are kept, or a lag was asked for.
    may_lag: bool,
}

/// A follower stopped at `zxid` that a session's next connection will land on.
#[derive(Debug)]
struct PendingLag {
    zxid: i64,
    tree: Arc<Tree>,
    catch_up_ms: i64,
}

/// What the server holds, as ZooKeeper's `mntr` counts it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Stats {
    /// Nodes in the tree as ZooKeeper's `zk_znode_count` counts them: the system nodes
    /// included and the root twice (a fresh server has 5).
    pub znodes: usize,
    /// Ephemeral nodes (`zk_ephemerals_count`).
    pub ephemerals: usize,
    /// Watch registrations, one per connection and path and kind (`zk_watch_count`).
    pub watches: usize,
    /// Open connections (`zk_num_alive_connections`).
    pub connections: usize,
    /// Live sessions.
    pub sessions: usize,
    /// Frames received: requests, pings and handshakes (`zk_packets_received`).
    pub received: u64,
    /// Frames sent: replies, notifications and handshake answers (`zk_packets_sent`).
    pub sent: u64,
    /// The last zxid.
    pub zxid: i64,
}

fn root_node() -> Node {
    Node {
        data: Bytes::new(),
        acl: Acl::open_unsafe(),
        stat: Stat::default(),
        kind: Kind::Persistent,
        children: BTreeSet::new(),
        creates: 0,
        deletes: 0,
    }
}

fn parent_of(path: &str) -> Option<&str> {
    match path.rfind('/') {
        Some(0) if path.len() > 1 => Some("/"),
        Some(0) | None => None,
        Some(i) => Some(&path[..i]),
    }
}

fn name_of(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or("")
}

impl ServerModel {
    /// A server with `/`, `/zookeeper` (which, as in the real server, does not count as
    /// a child create of the root), `/zookeeper/quota` and `/zookeeper/config` (readable
    /// by anyone, writable by no one), with the Stats a 3.8 server gives them.
    pub fn new(config: ServerConfig) -> ServerModel {
        let mut nodes = BTreeMap::new();
        let mut root = root_node();
        root.children.insert("zookeeper".into());
        nodes.insert("/".to_string(), root);
        let mut system = root_node();
        system.children.insert("config".into());
        system.children.insert("quota".into());
        system.deletes = -2; // 3.8 shows cversion -2 on /zookeeper
        nodes.insert("/zookeeper".to_string(), system);
        nodes.insert("/zookeeper/quota".to_string(), root_node());
        let mut config_node = root_node();
        config_node.acl = alloc::vec![Acl::new(perms::READ, "world", "anyone")];
        config_node.stat.aversion = -1;
        nodes.insert("/zookeeper/config".to_string(), config_node);
        let next_session = config.first_session_id;
        ServerModel {
            config,
            tree: Tree { nodes },
            zxid: 0,
            now_ms: 0,
            sessions: BTreeMap::new(),
            next_session,
            conns: BTreeMap::new(),
            next_conn: 1,
            watches: Watches::default(),
            last_reap_ms: 0,
            dirty: Vec::new(),
            snapshots: VecDeque::new(),
            requests_handled: 0,
            operator_deleted: BTreeMap::new(),
            replies_sent: 0,
            failing: None,
            pending_lags: BTreeMap::new(),
            may_lag: false,
        }
    }

    /// The last zxid.
    pub fn zxid(&self) -> i64 {
        self.zxid
    }

    /// Does a node exist?
    pub fn exists(&self, path: &str) -> bool {
        self.tree.nodes.contains_key(path)
    }

    /// Children of a node (sorted), if it exists.
    pub fn children(&self, path: &str) -> Option<Vec<String>> {
        self.tree
            .nodes
            .get(path)
            .map(|n| n.children.iter().cloned().collect())
    }

    /// Data and owner of a node, if it exists.
    pub fn node(&self, path: &str) -> Option<(Bytes, Stat)> {
        self.tree
            .nodes
            .get(path)
            .map(|n| (n.data.clone(), n.visible_stat()))
    }

    /// Live sessions.
    pub fn session_ids(&self) -> Vec<i64> {
        self.sessions.keys().copied().collect()
    }

    /// Is this session alive on the server?
    pub fn session_alive(&self, id: i64) -> bool {
        self.sessions.contains_key(&id)
    }

    /// A new client connection.
    pub fn connect(&mut self, max_request: usize) -> ConnId {
        self.open_conn(max_request, None)
    }

    /// A new client connection to a follower that may lag behind the leader.
    ///
    /// If the handshake re-attaches an existing session (a new session is created
    /// through the leader, so its follower is fresh), the connection serves reads from
    /// one of the kept snapshots of the tree (see [`ServerConfig::snapshot_every_ms`]):
    /// one whose zxid is at least the client's `last_zxid_seen` (a follower never
    /// accepts a client that has seen more than it has) and older than the live tree,
    /// chosen by [`Lag::pick`]. With no such snapshot the connection does not lag.
    ///
    /// While lagging, exists, getData, getChildren(2), getACL, getAllChildrenNumber,
    /// getEphemerals and multiRead answer from the snapshot (Stats, owners and versions
    /// included) with the snapshot's zxid in the reply header, as do pings. Watches the
    /// connection sets (by reads, addWatch or setWatches) are checked against the
    /// snapshot and otherwise held back: writes the leader applies meanwhile notify it
    /// of nothing, as a real follower, which has not applied them yet, would not.
    ///
    /// It catches up — reads the live tree from then on — at the first of: a `sync` on
    /// it (answered after catching up), any write request on it (writes go through the
    /// leader and the follower applies everything up to them before the reply), or
    /// [`Lag::catch_up_ms`] of server time (at [`tick`](Self::tick) or the next request).
    /// Catching up fires the held-back one-shot watches as SetWatches would with the
    /// snapshot's zxid as the relative zxid (so NodeDeleted, NodeCreated,
    /// NodeDataChanged and NodeChildrenChanged for what changed since), one notification
    /// per path and type, and persistent watches once per changed path (a coalesced
    /// version of the events the follower would have sent one by one); those
    /// notifications precede the reply to the request that caused the catch-up.
    pub fn connect_lagging(&mut self, max_request: usize, lag: Lag) -> ConnId {
        self.open_conn(max_request, Some(lag))
    }

    fn open_conn(&mut self, max_request: usize, lag: Option<Lag>) -> ConnId {
        let id = self.next_conn;
        self.next_conn += 1;
        self.conns.insert(
            id,
            Conn {
                decoder: FrameDecoder::new(max_request),
                session: None,
                auth: Vec::new(),
                out: BytesMut::new(),
                closed: false,
                lag,
                lagging: None,
            },
        );
        id
    }

    /// If `conn` is lagging, the zxid of the snapshot it reads from.
    pub fn lag_zxid(&self, conn: ConnId) -> Option<i64> {
        self.lagging(conn).map(|l| l.zxid)
    }

    /// `conn`'s lag, if it lags. Without snapshots or an asked-for lag no connection
    /// can (the fast path).
    fn lagging(&self, conn: ConnId) -> Option<&Lagging> {
        if self.snapshots.is_empty() && !self.may_lag {
            return None;
        }
        self.conns.get(&conn).and_then(|c| c.lagging.as_deref())
    }

    fn lagging_mut(&mut self, conn: ConnId) -> Option<&mut Lagging> {
        if self.snapshots.is_empty() && !self.may_lag {
            return None;
        }
        self.conns
            .get_mut(&conn)
            .and_then(|c| c.lagging.as_deref_mut())
    }

    /// Zxids of the snapshots kept for lagging connections, oldest first.
    pub fn snapshot_zxids(&self) -> Vec<i64> {
        self.snapshots.iter().map(|s| s.zxid).collect()
    }

    /// The client closed its socket (or the network lost it).
    pub fn disconnect(&mut self, conn: ConnId) {
        self.drop_conn(conn);
    }

    /// Bytes the server wrote on `conn` since the last call.
    pub fn take_output(&mut self, conn: ConnId) -> BytesMut {
        self.conns
            .get_mut(&conn)
            .map(|c| c.out.split())
            .unwrap_or_default()
    }

    /// The server has closed `conn` (after its output).
    pub fn is_closed(&self, conn: ConnId) -> bool {
        self.conns.get(&conn).is_none_or(|c| c.closed)
    }

    /// Connections with output waiting.
    pub fn conns_with_output(&self) -> Vec<ConnId> {
        self.conns
            .iter()
            .filter(|(_, c)| !c.out.is_empty() || c.closed)
            .map(|(id, _)| *id)
            .collect()
    }

    /// Expires a session now (as if its timeout passed), deleting its ephemerals.
    pub fn expire_session(&mut self, id: i64) {
        if self.sessions.contains_key(&id) {
            self.maybe_snapshot();
            self.zxid += 1;
            self.end_session(id);
        }
    }

    /// Deletes `path` now from outside every simulated session (an operator, a
    /// revoker's forced delete, a cleanup tool): its watches fire as for any delete.
    /// False if it is missing, has children, or is one the server keeps.
    pub fn operator_delete(&mut self, path: &str) -> bool {
        let childless = self
            .tree
            .nodes
            .get(path)
            .is_some_and(|n| n.children.is_empty());
        if !childless
            || validate_path(path).is_err()
            || path == "/"
            || path.starts_with("/zookeeper")
        {
            return false;
        }
        self.maybe_snapshot();
        self.zxid += 1;
        let zxid = self.zxid;
        let czxid = self.tree.nodes.get(path).map_or(0, |n| n.stat.czxid);
        if let Some(acl) = self.remove_node(path, zxid) {
            self.fire(&[Change::Deleted(path.to_string(), acl)]);
        }
        self.operator_deleted
            .insert(path.to_string(), (czxid, zxid));
        true
    }

    /// Did [`operator_delete`](Self::operator_delete) delete `path` (a report about it
    /// that arrives later is stale, not a recipe's mistake)?
    pub fn deleted_by_operator(&self, path: &str) -> bool {
        self.operator_deleted.contains_key(path)
    }

    /// The zxid at which the operator deleted the node created at `czxid`, if it did.
    pub fn operator_deletion_of(&self, czxid: i64) -> Option<i64> {
        self.operator_deleted
            .values()
            .find(|(c, _)| *c == czxid)
            .map(|(_, d)| *d)
    }

    /// Answers the next `n` requests with `code` without applying them (pings, auth,
    /// setWatches and closeSession excepted): a refusing or throttling server. With
    /// [`ErrorCode::Throttled`] it is ZooKeeper's request throttle, which answers
    /// `THROTTLEDOP` without a transaction (no zxid consumed). `n` = 0 stops it.
    pub fn fail_requests(&mut self, n: u32, code: ErrorCode) {
        self.failing = (n > 0).then_some((n, code));
    }

    /// Requests still to be failed by [`fail_requests`](Self::fail_requests).
    pub fn failing_requests(&self) -> u32 {
        self.failing.map_or(0, |(n, _)| n)
    }

    /// Serves session `id` from a lagging follower: the follower stops applying
    /// transactions now, the session's connection is closed, and its next connection
    /// lands on that follower. There its reads (and pings) see the tree as it is now,
    /// Stats and zxids included, and the watches it sets hear nothing of later writes,
    /// until it catches up: at a `sync`, at a write of its own, or `catch_up_ms` of
    /// server time after the handshake, as with [`connect_lagging`](Self::connect_lagging).
    /// False if no such session is alive (or `catch_up_ms` is not positive).
    pub fn lag_session(&mut self, id: i64, catch_up_ms: i64) -> bool {
        let Some(session) = self.sessions.get(&id) else {
            return false;
        };
        if catch_up_ms <= 0 {
            return false;
        }
        let conn = session.conn;
        self.may_lag = true;
        self.pending_lags.insert(
            id,
            PendingLag {
                zxid: self.zxid,
                tree: Arc::new(self.tree.clone()),
                catch_up_ms,
            },
        );
        if let Some(conn) = conn {
            self.close_conn(conn);
        }
        true
    }

    /// Runs the container check now: empty containers that once had a child and TTL
    /// nodes unmodified for longer than their TTL are deleted (their watches fire), as
    /// ZooKeeper's container manager does every `znode.container.checkIntervalMs`.
    pub fn reap_now(&mut self, now_ms: i64) {
        self.now_ms = self.now_ms.max(now_ms);
        self.last_reap_ms = self.now_ms;
        self.reap();
    }

    /// When [`tick`](Self::tick) runs the next container check, ms.
    pub fn next_reap_ms(&self) -> i64 {
        self.last_reap_ms
            .saturating_add(self.config.container_check_ms)
    }

    /// What the server holds, as `mntr` counts it.
    pub fn stats(&self) -> Stats {
        let w = &self.watches;
        let watches = [&w.data, &w.child, &w.persistent, &w.recursive]
            .iter()
            .flat_map(|m| m.values())
            .map(BTreeSet::len)
            .sum();
        Stats {
            // As ZooKeeper counts: its root twice (a fresh 3.8 server says 5).
            znodes: self.tree.nodes.len() + 1,
            ephemerals: self.sessions.values().map(|s| s.ephemerals.len()).sum(),
            watches,
            connections: self.conns.values().filter(|c| !c.closed).count(),
            sessions: self.sessions.len(),
            received: self.requests_handled,
            sent: self.replies_sent,
            zxid: self.zxid,
        }
    }

    /// Advances the server clock: expires silent sessions, reaps containers and TTLs,
    /// lets lagging connections whose time is up catch up.
    pub fn tick(&mut self, now_ms: i64) {
        self.now_ms = self.now_ms.max(now_ms);
        self.maybe_snapshot();
        let due: Vec<ConnId> = self
            .conns
            .iter()
            .filter(|(_, c)| {
                c.lagging
                    .as_ref()
                    .is_some_and(|l| l.until_ms <= self.now_ms)
            })
            .map(|(id, _)| *id)
            .collect();
        for conn in due {
            self.catch_up(conn);
        }
        let dead: Vec<i64> = self
            .sessions
            .iter()
            .filter(|(_, s)| self.now_ms - s.last_heard_ms > i64::from(s.timeout_ms))
            .map(|(id, _)| *id)
            .collect();
        for id in dead {
            self.expire_session(id);
        }
        if self.now_ms - self.last_reap_ms >= self.config.container_check_ms {
            self.last_reap_ms = self.now_ms;
            self.reap();
        }
    }

    /// The next time `tick` has something to do, ms.
    pub fn next_deadline_ms(&self) -> Option<i64> {
        let expiry = self
            .sessions
            .values()
            .map(|s| s.last_heard_ms + i64::from(s.timeout_ms) + 1);
        let catch_up = self
            .conns
            .values()
            .filter_map(|c| c.lagging.as_ref().map(|l| l.until_ms));
        expiry.chain(catch_up).min()
    }

    /// Keeps a copy of the tree if the last one is old enough and the tree moved on.
    fn maybe_snapshot(&mut self) {
        let every = self.config.snapshot_every_ms;
        let kept = self.config.snapshots_kept;
        if every <= 0 || kept == 0 {
            return;
        }
        if let Some(last) = self.snapshots.back() {
            if last.zxid == self.zxid || self.now_ms.saturating_sub(last.taken_ms) < every {
                return;
            }
        }
        while self.snapshots.len() >= kept {
            self.snapshots.pop_front();
        }
        self.snapshots.push_back(Snapshot {
            zxid: self.zxid,
            taken_ms: self.now_ms,
            tree: Arc::new(self.tree.clone()),
        });
    }

    /// The snapshot a follower that has seen up to `last_zxid_seen` may be at, if any.
    fn lag_snapshot(&self, last_zxid_seen: i64, pick: u64) -> Option<(i64, Arc<Tree>)> {
        let eligible = || {
            self.snapshots
                .iter()
                .rev()
                .filter(|s| s.zxid >= last_zxid_seen && s.zxid < self.zxid)
        };
        let n = eligible().count();
        if n == 0 {
            return None;
        }
        let index = usize::try_from(pick % n as u64).unwrap_or(0);
        eligible().nth(index).map(|s| (s.zxid, Arc::clone(&s.tree)))
    }

    /// The follower behind `conn` applies what it missed: it reads the live tree from
    /// now on, and the watches it registered meanwhile fire for what changed since.
    fn catch_up(&mut self, conn: ConnId) {
        let Some(lag) = self.conns.get_mut(&conn).and_then(|c| c.lagging.take()) else {
            return;
        };
        let Lagging {
            tree: old,
            zxid,
            mut watches,
            ..
        } = *lag;
        let persistent = core::mem::take(&mut watches.persistent_watches);
        let recursive = core::mem::take(&mut watches.persistent_recursive_watches);
        watches.relative_zxid = zxid;
        let (notes, arm) = check_watches(&self.tree, &watches);
        let mut sent: BTreeSet<(String, i32)> = BTreeSet::new();
        for (path, t) in notes {
            // A follower applying a change triggers each watcher once per path.
            if sent.insert((path.clone(), t.to_i32())) {
                self.notify(conn, t, &path);
            }
        }
        self.arm(conn, arm);
        let mut changed: Vec<(String, EventType)> = Vec::new();
        for path in &persistent {
            diff_node(&old, &self.tree, path, true, &mut changed);
            add(&mut self.watches.persistent, path, conn);
        }
        for path in &recursive {
            let prefix = if path == "/" {
                String::from("/")
            } else {
                format!("{path}/")
            };
            let under = |tree: &Tree| -> Vec<String> {
                tree.nodes
                    .range(path.clone()..)
                    .take_while(|(p, _)| *p == path || p.starts_with(&prefix))
                    .map(|(p, _)| p.clone())
                    .collect()
            };
            let mut paths: BTreeSet<String> = under(&old).into_iter().collect();
            paths.extend(under(&self.tree));
            for p in &paths {
                diff_node(&old, &self.tree, p, false, &mut changed);
            }
            add(&mut self.watches.recursive, path, conn);
        }
        for (path, t) in changed {
            if sent.insert((path.clone(), t.to_i32())) {
                self.notify(conn, t, &path);
            }
        }
    }

    fn reap(&mut self) {
        let now = self.now_ms;
        let doomed: Vec<String> = self
            .tree
            .nodes
            .iter()
            .filter(|(_, n)| {
                n.children.is_empty()
                    && match n.kind {
                        Kind::Container => n.creates > 0,
                        Kind::Ttl(ttl) => now - n.stat.mtime > ttl,
                        _ => false,
                    }
            })
            .map(|(p, _)| p.clone())
            .collect();
        for path in doomed {
            self.zxid += 1;
            let zxid = self.zxid;
            if let Some(acl) = self.remove_node(&path, zxid) {
                self.fire(&[Change::Deleted(path, acl)]);
            }
        }
    }

    /// Feeds bytes a client wrote on `conn`.
    pub fn handle_bytes(&mut self, now_ms: i64, conn: ConnId, bytes: &[u8]) {
        self.handle_bytes_until(now_ms, conn, bytes, usize::MAX);
    }

    /// Feeds bytes a client wrote on `conn`, stopping after the request whose answer
    /// leaves more than `max_output` bytes waiting for `conn` (a driver whose client
    /// reads slowly feeds the rest once it has read). Returns how many bytes of `bytes`
    /// it took; all of them if the connection is closed.
    pub fn handle_bytes_until(
        &mut self,
        now_ms: i64,
        conn: ConnId,
        bytes: &[u8],
        max_output: usize,
    ) -> usize {
        self.now_ms = self.now_ms.max(now_ms);
        self.maybe_snapshot();
        let mut rest = bytes;
        while !rest.is_empty() {
            let Some(c) = self.conns.get_mut(&conn) else {
                break;
            };
            if c.closed {
                break;
            }
            if c.out.len() > max_output {
                return bytes.len() - rest.len();
            }
            let frame = match c.decoder.decode(&mut rest) {
                Ok(Some(f)) => f,
                Ok(None) => break,
                Err(_) => {
                    self.close_conn(conn); // "Len error": close, no answer
                    break;
                }
            };
            self.requests_handled += 1;
            if c.session.is_none() {
                self.handshake(conn, frame);
            } else {
                self.request(conn, frame);
            }
        }
        bytes.len()
    }

    fn close_conn(&mut self, conn: ConnId) {
        if let Some(c) = self.conns.get_mut(&conn) {
            c.closed = true;
            c.lagging = None; // nothing left to catch up for
            self.dirty.push(conn);
        }
        self.forget_watches(conn);
        if let Some(sid) = self.conns.get(&conn).and_then(|c| c.session) {
            if let Some(s) = self.sessions.get_mut(&sid) {
                if s.conn == Some(conn) {
                    s.conn = None;
                }
            }
        }
    }

    fn drop_conn(&mut self, conn: ConnId) {
        self.close_conn(conn);
        self.conns.remove(&conn);
    }

    fn forget_watches(&mut self, conn: ConnId) {
        for map in [
            &mut self.watches.data,
            &mut self.watches.child,
            &mut self.watches.persistent,
            &mut self.watches.recursive,
        ] {
            map.retain(|_, set| {
                set.remove(&conn);
                !set.is_empty()
            });
        }
    }

    fn handshake(&mut self, conn: ConnId, mut frame: Bytes) {
        let Ok(req) = ConnectRequest::decode(&mut frame) else {
            return self.close_conn(conn);
        };
        if req.last_zxid_seen > self.zxid {
            return self.close_conn(conn); // the client has seen a future: refuse silently
        }
        let timeout = req.timeout_ms.clamp(
            self.config.min_session_timeout_ms,
            self.config.max_session_timeout_ms,
        );
        let answer = if req.session_id == 0 {
            self.zxid += 1; // createSession
            let id = self.next_session;
            self.next_session += 1;
            let passwd = Bytes::from(id.to_be_bytes().repeat(2));
            self.sessions.insert(
                id,
                SimSession {
                    passwd: passwd.clone(),
                    timeout_ms: timeout,
                    last_heard_ms: self.now_ms,
                    conn: Some(conn),
                    ephemerals: BTreeSet::new(),
                },
            );
            Some((id, passwd, timeout))
        } else {
            match self.sessions.get(&req.session_id) {
                Some(s) if s.passwd == req.passwd => {
                    let old = s.conn;
                    let (passwd, timeout) = (s.passwd.clone(), s.timeout_ms);
                    if let Some(old) = old.filter(|o| *o != conn) {
                        self.close_conn(old); // re-attach closes the older connection
                    }
                    let s = self.sessions.get_mut(&req.session_id).expect("checked");
                    s.conn = Some(conn);
                    s.last_heard_ms = self.now_ms;
                    self.start_lag(conn, req.last_zxid_seen);
                    self.start_pending_lag(conn, req.session_id, req.last_zxid_seen);
                    Some((req.session_id, passwd, timeout))
                }
                _ => None,
            }
        };
        let Some(c) = self.conns.get_mut(&conn) else {
            return;
        };
        let resp = match &answer {
            Some((id, passwd, timeout)) => {
                c.session = Some(*id);
                ConnectResponse {
                    protocol_version: 0,
                    timeout_ms: *timeout,
                    session_id: *id,
                    passwd: passwd.clone(),
                    read_only: false,
                }
            }
            None => ConnectResponse {
                passwd: Bytes::from_static(&[0; 16]),
                ..Default::default()
            },
        };
        encode_connect_response(&mut c.out, &resp);
        self.replies_sent += 1;
        self.dirty.push(conn);
        if answer.is_none() {
            c.closed = true;
        }
    }

    /// A re-attach on a connection made by `connect_lagging`: pick the follower's state.
    fn start_lag(&mut self, conn: ConnId, last_zxid_seen: i64) {
        let Some(lag) = self.conns.get_mut(&conn).and_then(|c| c.lag.take()) else {
            return;
        };
        if lag.catch_up_ms <= 0 {
            return;
        }
        let Some((zxid, tree)) = self.lag_snapshot(last_zxid_seen, lag.pick) else {
            return;
        };
        let until_ms = self.now_ms.saturating_add(lag.catch_up_ms);
        if let Some(c) = self.conns.get_mut(&conn) {
            c.lagging = Some(Box::new(Lagging {
                tree,
                zxid,
                until_ms,
                watches: SetWatches2::default(),
            }));
        }
    }

    /// The follower [`lag_session`](Self::lag_session) stopped, for the session's new
    /// connection (unless the client has seen more than it has: then no lag).
    fn start_pending_lag(&mut self, conn: ConnId, id: i64, last_zxid_seen: i64) {
        let Some(lag) = self.pending_lags.remove(&id) else {
            return;
        };
        if last_zxid_seen > lag.zxid {
            return;
        }
        let until_ms = self.now_ms.saturating_add(lag.catch_up_ms);
        if let Some(c) = self.conns.get_mut(&conn) {
            c.lagging = Some(Box::new(Lagging {
                tree: lag.tree,
                zxid: lag.zxid,
                until_ms,
                watches: SetWatches2::default(),
            }));
        }
    }

    fn reply(&mut self, conn: ConnId, xid: i32, zxid: i64, result: &OpResult) {
        let Some(c) = self.conns.get_mut(&conn) else {
            return;
        };
        self.replies_sent += 1;
        match result {
            Ok(body) => encode_reply(&mut c.out, &ReplyHeader { xid, zxid, err: 0 }, Some(body)),
            Err(code) => encode_reply(
                &mut c.out,
                &ReplyHeader {
                    xid,
                    zxid,
                    err: code.to_i32(),
                },
                None,
            ),
        }
    }

    fn request(&mut self, conn: ConnId, frame: Bytes) {
        let Ok((header, body)) = decode_request(frame) else {
            return self.close_conn(conn);
        };
        let Some(sid) = self.conns.get(&conn).and_then(|c| c.session) else {
            return;
        };
        match self.sessions.get_mut(&sid) {
            Some(s) => s.last_heard_ms = self.now_ms,
            None => return self.close_conn(conn), // session gone under the connection
        }
        if self
            .lagging(conn)
            .is_some_and(|l| l.until_ms <= self.now_ms)
        {
            self.catch_up(conn);
        }
        if header.op == OpCode::Check.to_i32() {
            return; // 3.8 never answers a standalone check
        }
        let request = match Request::decode(header.op, body) {
            Ok(r) => r,
            Err(_) if OpCode::from_i32(header.op).is_none() => {
                self.reply(conn, header.xid, -1, &Err(ErrorCode::Unimplemented));
                return self.close_conn(conn);
            }
            Err(_) => {
                let zxid = self.read_zxid(conn);
                self.reply(conn, header.xid, zxid, &Err(ErrorCode::MarshallingError));
                return;
            }
        };
        if let Some((n, code)) = self.failing {
            let plumbing = matches!(
                request,
                Request::Ping
                    | Request::Auth(_)
                    | Request::SetWatches(_)
                    | Request::SetWatches2(_)
                    | Request::CloseSession
            );
            if !plumbing {
                self.failing = (n > 1).then_some((n - 1, code));
                let zxid = self.read_zxid(conn);
                return self.reply(conn, header.xid, zxid, &Err(code));
            }
        }
        match request {
            Request::Ping => {
                let zxid = self.read_zxid(conn);
                self.reply(conn, header.xid, zxid, &Ok(Response::Empty));
            }
            Request::Auth(p) => {
                if p.scheme == "digest" {
                    let text = String::from_utf8_lossy(&p.auth).into_owned();
                    let (user, password) = text.split_once(':').unwrap_or((&text, ""));
                    let id = Id {
                        scheme: "digest".into(),
                        id: digest_id(user, password),
                    };
                    if let Some(c) = self.conns.get_mut(&conn) {
                        if !c.auth.contains(&id) {
                            c.auth.push(id);
                        }
                    }
                    self.reply(conn, header.xid, 0, &Ok(Response::Empty));
                } else if p.scheme == "ip" {
                    // ZooKeeper's IP provider vouches for the client's address, which
                    // every connection has already (whoAmI lists it once).
                    self.reply(conn, header.xid, 0, &Ok(Response::Empty));
                } else {
                    // sasl and x509 without their server set-up, or an unknown scheme.
                    self.reply(conn, header.xid, 0, &Err(ErrorCode::AuthFailed));
                    self.close_conn(conn);
                }
            }
            Request::CloseSession => {
                self.zxid += 1;
                let zxid = self.zxid;
                self.reply(conn, header.xid, zxid, &Ok(Response::Empty));
                self.end_session(sid);
                self.close_conn(conn);
            }
            Request::SetWatches(w) => {
                let w = SetWatches2 {
                    relative_zxid: w.relative_zxid,
                    data_watches: w.data_watches,
                    exist_watches: w.exist_watches,
                    child_watches: w.child_watches,
                    ..Default::default()
                };
                self.set_watches(conn, &w);
                let zxid = self.read_zxid(conn);
                self.reply(conn, header.xid, zxid, &Ok(Response::Empty));
            }
            Request::SetWatches2(w) => {
                self.set_watches(conn, &w);
                let zxid = self.read_zxid(conn);
                self.reply(conn, header.xid, zxid, &Ok(Response::Empty));
            }
            Request::Sasl(_) => {
                // A server with no SASL set up answers every token with an empty one.
                self.reply(conn, header.xid, 0, &Ok(Response::Sasl(Bytes::new())));
            }
            Request::Sync(r) => {
                // The follower applies everything up to the leader's state first.
                self.catch_up(conn);
                self.reply(conn, header.xid, self.zxid, &Ok(Response::Path(r.path)));
            }
            request if is_write(&request) => {
                // Through the leader: the follower applies what it missed, then this.
                self.catch_up(conn);
                self.zxid += 1; // failed writes consume a zxid too
                let zxid = self.zxid;
                let mut changes = Vec::new();
                let result = self.write(conn, sid, request, zxid, &mut changes);
                self.fire(&changes);
                self.reply(conn, header.xid, zxid, &result);
            }
            request => {
                let result = self.read(conn, sid, request);
                let zxid = self.read_zxid(conn);
                self.reply(conn, header.xid, zxid, &result);
            }
        }
    }

    fn end_session(&mut self, id: i64) {
        let Some(session) = self.sessions.remove(&id) else {
            return;
        };
        self.pending_lags.remove(&id);
        let zxid = self.zxid;
        let mut changes = Vec::new();
        // Deepest first would not matter: ephemerals have no children.
        for path in &session.ephemerals {
            if let Some(acl) = self.remove_node(path, zxid) {
                changes.push(Change::Deleted(path.clone(), acl));
            }
        }
        self.fire(&changes);
        if let Some(conn) = session.conn {
            self.close_conn(conn);
        }
    }

    // ----- ACLs -----

    fn allowed(&self, conn: ConnId, acl: &[Acl], perm: i32) -> bool {
        let auth = self.conns.get(&conn).map(|c| &c.auth[..]).unwrap_or(&[]);
        acl.iter().any(|a| {
            a.perms & perm != 0
                && match a.id.scheme.as_str() {
                    "world" => a.id.id == "anyone",
                    "ip" => a.id.id == "127.0.0.1" || a.id.id.starts_with("127."),
                    "digest" => auth.iter().any(|i| i.scheme == "digest" && i.id == a.id.id),
                    _ => false,
                }
        })
    }

    /// Java's `fixupACL`: rejects empty lists and unknown schemes; expands `auth`.
    fn fixup_acl(&self, conn: ConnId, acl: &[Acl]) -> Result<Vec<Acl>, ErrorCode> {
        if acl.is_empty() {
            return Err(ErrorCode::InvalidAcl);
        }
        let auth = self
            .conns
            .get(&conn)
            .map(|c| c.auth.clone())
            .unwrap_or_default();
        let mut out = Vec::new();
        for a in acl {
            match a.id.scheme.as_str() {
                "world" if a.id.id == "anyone" => out.push(a.clone()),
                "digest" if a.id.id.contains(':') => out.push(a.clone()),
                "ip" => out.push(a.clone()),
                "auth" => {
                    if auth.is_empty() {
                        return Err(ErrorCode::InvalidAcl);
                    }
                    out.extend(auth.iter().map(|id| Acl {
                        perms: a.perms,
                        id: id.clone(),
                    }));
                }
                _ => return Err(ErrorCode::InvalidAcl),
            }
        }
        Ok(out)
    }

    // ----- reads -----

    /// The old tree a lagging `conn` reads from.
    fn lagging_tree(&self, conn: ConnId) -> Option<Arc<Tree>> {
        self.lagging(conn).map(|l| Arc::clone(&l.tree))
    }

    /// The zxid a read on `conn` is answered with: the follower's.
    fn read_zxid(&self, conn: ConnId) -> i64 {
        self.lag_zxid(conn).unwrap_or(self.zxid)
    }

    /// Registers a one-shot watch: live, or held back on a lagging connection.
    fn watch(&mut self, conn: ConnId, on: WatchOn, path: &str) {
        let mut w = SetWatches2::default();
        let list = match on {
            WatchOn::Data => &mut w.data_watches,
            WatchOn::Exist => &mut w.exist_watches,
            WatchOn::Child => &mut w.child_watches,
        };
        list.push(path.to_string());
        self.arm(conn, w);
    }

    /// Registers watches (the relative zxid is ignored): in the live tables, or, on a
    /// lagging connection, held back until it catches up.
    fn arm(&mut self, conn: ConnId, w: SetWatches2) {
        if let Some(l) = self.lagging_mut(conn) {
            let held = &mut l.watches;
            for (from, to) in [
                (w.data_watches, &mut held.data_watches),
                (w.exist_watches, &mut held.exist_watches),
                (w.child_watches, &mut held.child_watches),
                (w.persistent_watches, &mut held.persistent_watches),
                (
                    w.persistent_recursive_watches,
                    &mut held.persistent_recursive_watches,
                ),
            ] {
                for path in from {
                    if !to.contains(&path) {
                        to.push(path);
                    }
                }
            }
            return;
        }
        // As in the server, exist watches live in the data watch table.
        for path in w.data_watches.iter().chain(&w.exist_watches) {
            add(&mut self.watches.data, path, conn);
        }
        for path in &w.child_watches {
            add(&mut self.watches.child, path, conn);
        }
        for path in &w.persistent_watches {
            add(&mut self.watches.persistent, path, conn);
        }
        for path in &w.persistent_recursive_watches {
            add(&mut self.watches.recursive, path, conn);
        }
    }

    fn read(&mut self, conn: ConnId, sid: i64, request: Request) -> OpResult {
        match request {
            Request::AddWatch(r) => {
                let mut w = SetWatches2::default();
                match AddWatchMode::from_i32(r.mode) {
                    Some(AddWatchMode::Persistent) => w.persistent_watches.push(r.path),
                    Some(AddWatchMode::PersistentRecursive) => {
                        w.persistent_recursive_watches.push(r.path)
                    }
                    None => return Err(ErrorCode::BadArguments),
                }
                self.arm(conn, w);
                Ok(Response::WatchAdded)
            }
            Request::CheckWatches(r) => self.watch_tables(conn, &r, false),
            Request::RemoveWatches(r) => self.watch_tables(conn, &r, true),
            request => {
                let snapshot = self.lagging_tree(conn);
                let tree = snapshot.as_deref().unwrap_or(&self.tree);
                let mut watch = None;
                let result = self.read_tree(tree, conn, sid, request, &mut watch);
                if let Some((on, path)) = watch {
                    self.watch(conn, on, &path);
                }
                result
            }
        }
    }

    /// Reads that only look at `tree` (the live one, or a lagging follower's); the
    /// watch to register goes to `watch`.
    fn read_tree(
        &self,
        tree: &Tree,
        conn: ConnId,
        sid: i64,
        request: Request,
        watch: &mut Option<(WatchOn, String)>,
    ) -> OpResult {
        let two = matches!(request, Request::GetChildren2(_));
        match request {
            Request::Exists(r) => {
                let node = tree.nodes.get(&r.path);
                if r.watch {
                    let on = if node.is_some() {
                        WatchOn::Data
                    } else {
                        WatchOn::Exist
                    };
                    *watch = Some((on, r.path));
                }
                node.map(|n| Response::Stat(n.visible_stat()))
                    .ok_or(ErrorCode::NoNode)
            }
            Request::GetData(r) => {
                let data = self.get_data(tree, conn, &r.path)?;
                if r.watch {
                    *watch = Some((WatchOn::Data, r.path));
                }
                Ok(data)
            }
            Request::GetChildren(r) | Request::GetChildren2(r) => {
                let node = tree.nodes.get(&r.path).ok_or(ErrorCode::NoNode)?;
                if !self.allowed(conn, &node.acl, perms::READ) {
                    return Err(ErrorCode::NoAuth);
                }
                let children: Vec<String> = node.children.iter().cloned().collect();
                let stat = node.visible_stat();
                if r.watch {
                    *watch = Some((WatchOn::Child, r.path));
                }
                Ok(if two {
                    Response::Children2 { children, stat }
                } else {
                    Response::Children(children)
                })
            }
            Request::GetAcl(r) => {
                let node = tree.nodes.get(&r.path).ok_or(ErrorCode::NoNode)?;
                if !self.allowed(conn, &node.acl, perms::READ | perms::ADMIN) {
                    return Err(ErrorCode::NoAuth);
                }
                Ok(Response::Acl {
                    acl: node.acl.clone(),
                    stat: node.visible_stat(),
                })
            }
            Request::MultiRead(ops) => {
                let mut results = Vec::new();
                for op in ops {
                    let r = match op {
                        ReadOp::GetData(r) => match self.get_data(tree, conn, &r.path) {
                            Ok(Response::Data { data, stat }) => {
                                MultiResult::GetData { data, stat }
                            }
                            Ok(_) => MultiResult::Error(ErrorCode::SystemError),
                            Err(e) => MultiResult::Error(e),
                        },
                        ReadOp::GetChildren(r) => match tree.nodes.get(&r.path) {
                            None => MultiResult::Error(ErrorCode::NoNode),
                            Some(n) if !self.allowed(conn, &n.acl, perms::READ) => {
                                MultiResult::Error(ErrorCode::NoAuth)
                            }
                            Some(n) => {
                                MultiResult::GetChildren(n.children.iter().cloned().collect())
                            }
                        },
                    };
                    results.push(r);
                }
                Ok(Response::Multi(results))
            }
            Request::GetEphemerals(r) => {
                let session = self.sessions.get(&sid).ok_or(ErrorCode::SessionExpired)?;
                let prefix = if r.path == "/" { "" } else { r.path.as_str() };
                let ephemerals = if core::ptr::eq(tree, &self.tree) {
                    session
                        .ephemerals
                        .iter()
                        .filter(|p| p.starts_with(prefix))
                        .cloned()
                        .collect()
                } else {
                    // A follower knows the session's ephemerals as of its own tree.
                    tree.nodes
                        .iter()
                        .filter(|(p, n)| n.kind == Kind::Ephemeral(sid) && p.starts_with(prefix))
                        .map(|(p, _)| p.clone())
                        .collect()
                };
                Ok(Response::Children(ephemerals))
            }
            Request::GetAllChildrenNumber(r) => {
                if !tree.nodes.contains_key(&r.path) {
                    return Err(ErrorCode::NoNode);
                }
                let prefix = if r.path == "/" {
                    String::from("/")
                } else {
                    format!("{}/", r.path)
                };
                // Descendants only: "/" starts its own prefix.
                let n = tree
                    .nodes
                    .range(prefix.clone()..)
                    .take_while(|(p, _)| p.starts_with(&prefix))
                    .filter(|(p, _)| **p != r.path)
                    .count();
                Ok(Response::Count(i32::try_from(n).unwrap_or(i32::MAX)))
            }
            Request::WhoAmI => {
                let mut infos = alloc::vec![ClientInfo {
                    auth_scheme: "ip".into(),
                    user: "127.0.0.1".into()
                }];
                if let Some(c) = self.conns.get(&conn) {
                    for id in &c.auth {
                        let user = id.id.split(':').next().unwrap_or("").to_string();
                        infos.push(ClientInfo {
                            auth_scheme: id.scheme.clone(),
                            user,
                        });
                    }
                }
                Ok(Response::WhoAmI(infos))
            }
            _ => Err(ErrorCode::Unimplemented),
        }
    }

    fn get_data(&self, tree: &Tree, conn: ConnId, path: &str) -> OpResult {
        let node = tree.nodes.get(path).ok_or(ErrorCode::NoNode)?;
        if !self.allowed(conn, &node.acl, perms::READ) {
            return Err(ErrorCode::NoAuth);
        }
        Ok(Response::Data {
            data: node.data.clone(),
            stat: node.visible_stat(),
        })
    }
}

/// What a watch on `path` hears while a follower goes from `old` to `new`, coalesced
/// to one event per kind of change: created, deleted (deleted and re-created is both),
/// data changed, and children changed if `children` (persistent, not recursive).
fn diff_node(
    old: &Tree,
    new: &Tree,
    path: &str,
    children: bool,
    out: &mut Vec<(String, EventType)>,
) {
    let mut push = |t| out.push((path.to_string(), t));
    match (old.nodes.get(path), new.nodes.get(path)) {
        (None, None) => {}
        (None, Some(_)) => push(EventType::NodeCreated),
        (Some(_), None) => push(EventType::NodeDeleted),
        (Some(a), Some(b)) if a.stat.czxid != b.stat.czxid => {
            push(EventType::NodeDeleted);
            push(EventType::NodeCreated);
        }
        (Some(a), Some(b)) => {
            if a.stat.mzxid != b.stat.mzxid {
                push(EventType::NodeDataChanged);
            }
            if children && a.stat.pzxid != b.stat.pzxid {
                push(EventType::NodeChildrenChanged);
            }
        }
    }
}

/// SetWatches against `tree`: the notifications due now (for changes after
/// `relative_zxid`), and the watches to register. Exist watches on a node that exists
/// fire NodeCreated; data and child watches on a missing node fire NodeDeleted.
fn check_watches(tree: &Tree, w: &SetWatches2) -> (Vec<(String, EventType)>, SetWatches2) {
    let mut notes: Vec<(String, EventType)> = Vec::new();
    let mut arm = SetWatches2::default();
    for path in &w.data_watches {
        match tree.nodes.get(path) {
            None => notes.push((path.clone(), EventType::NodeDeleted)),
            Some(n) if n.stat.mzxid > w.relative_zxid => {
                notes.push((path.clone(), EventType::NodeDataChanged))
            }
            Some(_) => arm.data_watches.push(path.clone()),
        }
    }
    for path in &w.exist_watches {
        if tree.nodes.contains_key(path) {
            notes.push((path.clone(), EventType::NodeCreated));
        } else {
            arm.exist_watches.push(path.clone());
        }
    }
    for path in &w.child_watches {
        match tree.nodes.get(path) {
            None => notes.push((path.clone(), EventType::NodeDeleted)),
            Some(n) if n.stat.pzxid > w.relative_zxid => {
                notes.push((path.clone(), EventType::NodeChildrenChanged))
            }
            Some(_) => arm.child_watches.push(path.clone()),
        }
    }
    arm.persistent_watches.clone_from(&w.persistent_watches);
    arm.persistent_recursive_watches
        .clone_from(&w.persistent_recursive_watches);
    (notes, arm)
}

fn is_write(r: &Request) -> bool {
    matches!(
        r,
        Request::Create(_)
            | Request::Create2(_)
            | Request::CreateContainer(_)
            | Request::CreateTtl(_)
            | Request::Delete(_)
            | Request::SetData(_)
            | Request::SetAcl(_)
            | Request::Multi(_)
            | Request::Reconfig(_)
    )
}

impl ServerModel {
    /// checkWatches / removeWatches: does `conn` hold watches of this type on the path?
    fn watch_tables(&mut self, conn: ConnId, r: &WatchesRequest, remove: bool) -> OpResult {
        let w = &mut self.watches;
        let tables: Vec<&mut BTreeMap<String, BTreeSet<ConnId>>> =
            match WatcherType::from_i32(r.watcher_type) {
                Some(WatcherType::Children) => alloc::vec![&mut w.child],
                Some(WatcherType::Data) => alloc::vec![&mut w.data],
                Some(WatcherType::Any) => alloc::vec![
                    &mut w.data,
                    &mut w.child,
                    &mut w.persistent,
                    &mut w.recursive
                ],
                Some(WatcherType::Persistent) => alloc::vec![&mut w.persistent],
                Some(WatcherType::PersistentRecursive) => alloc::vec![&mut w.recursive],
                None => return Err(ErrorCode::BadArguments),
            };
        let mut found = false;
        if let Some(l) = self.conns.get_mut(&conn).and_then(|c| c.lagging.as_mut()) {
            // Watches a lagging follower holds for this connection.
            let held = &mut l.watches;
            let lists: Vec<&mut Vec<String>> = match WatcherType::from_i32(r.watcher_type) {
                Some(WatcherType::Children) => alloc::vec![&mut held.child_watches],
                Some(WatcherType::Data) => {
                    alloc::vec![&mut held.data_watches, &mut held.exist_watches]
                }
                Some(WatcherType::Any) => alloc::vec![
                    &mut held.data_watches,
                    &mut held.exist_watches,
                    &mut held.child_watches,
                    &mut held.persistent_watches,
                    &mut held.persistent_recursive_watches
                ],
                Some(WatcherType::Persistent) => alloc::vec![&mut held.persistent_watches],
                Some(WatcherType::PersistentRecursive) => {
                    alloc::vec![&mut held.persistent_recursive_watches]
                }
                None => Vec::new(),
            };
            for list in lists {
                if list.contains(&r.path) {
                    found = true;
                    if remove {
                        list.retain(|p| *p != r.path);
                    }
                }
            }
        }
        for table in tables {
            if let Some(set) = table.get_mut(&r.path) {
                if set.contains(&conn) {
                    found = true;
                    if remove {
                        set.remove(&conn);
                        if set.is_empty() {
                            table.remove(&r.path);
                        }
                    }
                }
            }
        }
        if found {
            Ok(Response::Empty)
        } else {
            Err(ErrorCode::NoWatcher)
        }
    }

    /// SetWatches(2): against the live tree, or a lagging connection's old one (whose
    /// remaining watches are then held back until it catches up).
    fn set_watches(&mut self, conn: ConnId, w: &SetWatches2) {
        let snapshot = self.lagging_tree(conn);
        let (notes, arm) = check_watches(snapshot.as_deref().unwrap_or(&self.tree), w);
        self.arm(conn, arm);
        for (path, t) in notes {
            self.notify(conn, t, &path);
        }
    }

    fn acl_of(&self, path: &str) -> Vec<Acl> {
        self.tree
            .nodes
            .get(path)
            .map(|n| n.acl.clone())
            .unwrap_or_else(Acl::open_unsafe)
    }

    fn notify(&mut self, conn: ConnId, t: EventType, path: &str) {
        if let Some(c) = self.conns.get_mut(&conn) {
            if !c.closed {
                self.dirty.push(conn);
                self.replies_sent += 1;
                encode_notification(
                    &mut c.out,
                    &WatcherEvent {
                        event_type: t.to_i32(),
                        state: 3,
                        path: path.into(),
                    },
                );
            }
        }
    }

    /// Fires the watches for committed changes, in order: the node's own event, then
    /// its parent's child event; one notification per connection per path and event.
    /// As in 3.8, a connection without READ on the node hears nothing (its one-shot
    /// watch is used up all the same).
    fn fire(&mut self, changes: &[Change]) {
        let w = &self.watches;
        if w.data.is_empty()
            && w.child.is_empty()
            && w.persistent.is_empty()
            && w.recursive.is_empty()
        {
            return;
        }
        for change in changes {
            let (path, t, acl) = match change {
                Change::Created(p) => (p.as_str(), EventType::NodeCreated, self.acl_of(p)),
                Change::Deleted(p, acl) => (p.as_str(), EventType::NodeDeleted, acl.clone()),
                Change::DataChanged(p) => (p.as_str(), EventType::NodeDataChanged, self.acl_of(p)),
            };
            let mut to: BTreeSet<ConnId> = take(&mut self.watches.data, path);
            if t == EventType::NodeDeleted {
                to.extend(take(&mut self.watches.child, path));
            }
            to.extend(get(&self.watches.persistent, path));
            let mut at = Some(path);
            while let Some(p) = at {
                to.extend(get(&self.watches.recursive, p));
                at = parent_of(p);
            }
            for conn in to {
                if self.allowed(conn, &acl, perms::READ) {
                    self.notify(conn, t, path);
                }
            }
            if t != EventType::NodeDataChanged {
                if let Some(parent) = parent_of(path) {
                    let mut to = take(&mut self.watches.child, parent);
                    to.extend(get(&self.watches.persistent, parent));
                    let acl = self.acl_of(parent);
                    for conn in to {
                        if self.allowed(conn, &acl, perms::READ) {
                            self.notify(conn, EventType::NodeChildrenChanged, parent);
                        }
                    }
                }
            }
        }
    }

    // ----- writes -----

    fn write(
        &mut self,
        conn: ConnId,
        sid: i64,
        request: Request,
        zxid: i64,
        changes: &mut Vec<Change>,
    ) -> OpResult {
        match request {
            Request::Create(r) => self
                .create(
                    conn, sid, &r.path, r.data, &r.acl, r.flags, -1, zxid, changes,
                )
                .map(|(p, _)| Response::Path(p)),
            Request::Create2(r) | Request::CreateContainer(r) => self
                .create(
                    conn, sid, &r.path, r.data, &r.acl, r.flags, -1, zxid, changes,
                )
                .map(|(path, stat)| Response::PathStat { path, stat }),
            Request::CreateTtl(r) => {
                if !self.config.ttl_enabled {
                    return Err(ErrorCode::Unimplemented);
                }
                self.create(
                    conn, sid, &r.path, r.data, &r.acl, r.flags, r.ttl, zxid, changes,
                )
                .map(|(path, stat)| Response::PathStat { path, stat })
            }
            Request::Delete(r) => self
                .delete(conn, &r.path, r.version, zxid, changes)
                .map(|_| Response::Empty),
            Request::SetData(r) => self
                .set_data(conn, &r.path, r.data, r.version, zxid, changes)
                .map(Response::Stat),
            Request::SetAcl(r) => self
                .set_acl(conn, &r.path, &r.acl, r.version, zxid)
                .map(Response::Stat),
            Request::Multi(ops) => Ok(Response::Multi(self.multi(conn, sid, ops, zxid, changes))),
            // reconfigEnabled=false: refused in the leader's pipeline, a failed write.
            Request::Reconfig(_) => Err(ErrorCode::ReconfigDisabled),
            _ => Err(ErrorCode::Unimplemented),
        }
    }

    fn multi(
        &mut self,
        conn: ConnId,
        sid: i64,
        ops: Vec<MultiOp>,
        zxid: i64,
        changes: &mut Vec<Change>,
    ) -> Vec<MultiResult> {
        let tree = self.tree.clone();
        let ephemerals: Vec<(i64, BTreeSet<String>)> = self
            .sessions
            .iter()
            .map(|(id, s)| (*id, s.ephemerals.clone()))
            .collect();
        let count = ops.len();
        let mut results = Vec::new();
        let mut failed = None;
        for (i, op) in ops.into_iter().enumerate() {
            let r = match op {
                MultiOp::Create(r) | MultiOp::Create2(r) => {
                    // 3.8 turns create2 inside a multi into create (path only), except
                    // for containers, which become createContainer (path and Stat).
                    let container = r.flags == CreateMode::Container.to_i32();
                    self.create(
                        conn, sid, &r.path, r.data, &r.acl, r.flags, -1, zxid, changes,
                    )
                    .map(|(path, stat)| {
                        if container {
                            MultiResult::Create2 { path, stat }
                        } else {
                            MultiResult::Create(path)
                        }
                    })
                }
                MultiOp::CreateContainer(r) => self
                    .create(
                        conn, sid, &r.path, r.data, &r.acl, r.flags, -1, zxid, changes,
                    )
                    .map(|(path, stat)| MultiResult::Create2 { path, stat }),
                MultiOp::CreateTtl(r) => {
                    if self.config.ttl_enabled {
                        self.create(
                            conn, sid, &r.path, r.data, &r.acl, r.flags, r.ttl, zxid, changes,
                        )
                        .map(|(path, stat)| MultiResult::Create2 { path, stat })
                    } else {
                        Err(ErrorCode::Unimplemented)
                    }
                }
                MultiOp::Delete(r) => self
                    .delete(conn, &r.path, r.version, zxid, changes)
                    .map(|_| MultiResult::Delete),
                MultiOp::SetData(r) => self
                    .set_data(conn, &r.path, r.data, r.version, zxid, changes)
                    .map(MultiResult::SetData),
                MultiOp::Check(r) => self
                    .check(conn, &r.path, r.version)
                    .map(|_| MultiResult::Check),
            };
            match r {
                Ok(result) => results.push(result),
                Err(code) => {
                    failed = Some((i, code));
                    break;
                }
            }
        }
        let Some((at, code)) = failed else {
            return results;
        };
        // Roll back and answer like 3.8: Ok before the failing op, its code, then -2.
        self.tree = tree;
        for (id, eph) in ephemerals {
            if let Some(s) = self.sessions.get_mut(&id) {
                s.ephemerals = eph;
            }
        }
        changes.clear();
        failed_multi(count, at, code)
    }

    fn check_version(current: i32, expected: i32) -> Result<(), ErrorCode> {
        if expected != -1 && expected != current {
            Err(ErrorCode::BadVersion)
        } else {
            Ok(())
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn create(
        &mut self,
        conn: ConnId,
        sid: i64,
        path: &str,
        data: Bytes,
        acl: &[Acl],
        flags: i32,
        ttl: i64,
        zxid: i64,
        changes: &mut Vec<Change>,
    ) -> Result<(String, Stat), ErrorCode> {
        let mode = CreateMode::from_i32(flags).ok_or(ErrorCode::BadArguments)?;
        if mode.is_ttl() && !self.config.ttl_enabled {
            return Err(ErrorCode::Unimplemented);
        }
        if mode.is_ttl() {
            if !(1..=0xFF_FFFF_FFFF).contains(&ttl) {
                return Err(ErrorCode::BadArguments);
            }
        } else if ttl >= 0 {
            return Err(ErrorCode::BadArguments);
        }
        let Some(slash) = path.rfind('/') else {
            return Err(ErrorCode::BadArguments);
        };
        if path.contains('\0') {
            return Err(ErrorCode::BadArguments);
        }
        let parent_path = if slash == 0 { "/" } else { &path[..slash] };
        let acl = self.fixup_acl(conn, acl)?;
        let parent = self.tree.nodes.get(parent_path).ok_or(ErrorCode::NoNode)?;
        if !self.allowed(conn, &parent.acl, perms::CREATE) {
            return Err(ErrorCode::NoAuth);
        }
        let full = if mode.is_sequential() {
            format!("{path}{:010}", parent.creates)
        } else {
            path.to_string()
        };
        validate_path(&full).map_err(|_| ErrorCode::BadArguments)?;
        if self.tree.nodes.contains_key(&full) {
            return Err(ErrorCode::NodeExists);
        }
        if matches!(parent.kind, Kind::Ephemeral(_)) {
            return Err(ErrorCode::NoChildrenForEphemerals);
        }
        let kind = match mode {
            CreateMode::Ephemeral | CreateMode::EphemeralSequential => Kind::Ephemeral(sid),
            CreateMode::Container => Kind::Container,
            CreateMode::PersistentWithTtl | CreateMode::PersistentSequentialWithTtl => {
                Kind::Ttl(ttl)
            }
            _ => Kind::Persistent,
        };
        let now = self.now_ms;
        let stat = Stat {
            czxid: zxid,
            mzxid: zxid,
            ctime: now,
            mtime: now,
            pzxid: zxid,
            ..Stat::default()
        };
        let node = Node {
            data,
            acl,
            stat,
            kind: kind.clone(),
            children: BTreeSet::new(),
            creates: 0,
            deletes: 0,
        };
        let visible = node.visible_stat();
        let parent = self
            .tree
            .nodes
            .get_mut(parent_path)
            .expect("looked up above");
        parent.children.insert(name_of(&full).to_string());
        parent.creates = parent.creates.wrapping_add(1);
        parent.stat.pzxid = zxid;
        self.tree.nodes.insert(full.clone(), node);
        if let Kind::Ephemeral(owner) = kind {
            if let Some(s) = self.sessions.get_mut(&owner) {
                s.ephemerals.insert(full.clone());
            }
        }
        changes.push(Change::Created(full.clone()));
        Ok((full, visible))
    }

    fn delete(
        &mut self,
        conn: ConnId,
        path: &str,
        version: i32,
        zxid: i64,
        changes: &mut Vec<Change>,
    ) -> Result<(), ErrorCode> {
        validate_path(path).map_err(|_| ErrorCode::BadArguments)?;
        if matches!(
            path,
            "/" | "/zookeeper" | "/zookeeper/quota" | "/zookeeper/config"
        ) {
            return Err(ErrorCode::BadArguments);
        }
        let parent_path = parent_of(path).ok_or(ErrorCode::BadArguments)?;
        let parent = self.tree.nodes.get(parent_path).ok_or(ErrorCode::NoNode)?;
        if !self.allowed(conn, &parent.acl, perms::DELETE) {
            return Err(ErrorCode::NoAuth);
        }
        let node = self.tree.nodes.get(path).ok_or(ErrorCode::NoNode)?;
        Self::check_version(node.stat.version, version)?;
        if !node.children.is_empty() {
            return Err(ErrorCode::NotEmpty);
        }
        if let Some(acl) = self.remove_node(path, zxid) {
            changes.push(Change::Deleted(path.to_string(), acl));
        }
        Ok(())
    }

    /// Removes a childless node and updates its parent and owner; its ACL if it was there.
    fn remove_node(&mut self, path: &str, zxid: i64) -> Option<Vec<Acl>> {
        let node = self.tree.nodes.remove(path)?;
        if let Some(parent) = parent_of(path).and_then(|p| self.tree.nodes.get_mut(p)) {
            parent.children.remove(name_of(path));
            parent.deletes = parent.deletes.wrapping_add(1);
            parent.stat.pzxid = zxid;
        }
        if let Kind::Ephemeral(owner) = node.kind {
            if let Some(s) = self.sessions.get_mut(&owner) {
                s.ephemerals.remove(path);
            }
        }
        Some(node.acl)
    }

    fn set_data(
        &mut self,
        conn: ConnId,
        path: &str,
        data: Bytes,
        version: i32,
        zxid: i64,
        changes: &mut Vec<Change>,
    ) -> Result<Stat, ErrorCode> {
        validate_path(path).map_err(|_| ErrorCode::BadArguments)?;
        let node = self.tree.nodes.get(path).ok_or(ErrorCode::NoNode)?;
        if !self.allowed(conn, &node.acl, perms::WRITE) {
            return Err(ErrorCode::NoAuth);
        }
        Self::check_version(node.stat.version, version)?;
        let now = self.now_ms;
        let node = self.tree.nodes.get_mut(path).expect("looked up above");
        node.data = data;
        node.stat.version = node.stat.version.wrapping_add(1);
        node.stat.mzxid = zxid;
        node.stat.mtime = now;
        let stat = node.visible_stat();
        changes.push(Change::DataChanged(path.to_string()));
        Ok(stat)
    }

    fn set_acl(
        &mut self,
        conn: ConnId,
        path: &str,
        acl: &[Acl],
        version: i32,
        _zxid: i64,
    ) -> Result<Stat, ErrorCode> {
        validate_path(path).map_err(|_| ErrorCode::BadArguments)?;
        let acl = self.fixup_acl(conn, acl)?;
        let node = self.tree.nodes.get(path).ok_or(ErrorCode::NoNode)?;
        if !self.allowed(conn, &node.acl, perms::ADMIN) {
            return Err(ErrorCode::NoAuth);
        }
        Self::check_version(node.stat.aversion, version)?;
        let node = self.tree.nodes.get_mut(path).expect("looked up above");
        node.acl = acl;
        node.stat.aversion = node.stat.aversion.wrapping_add(1);
        Ok(node.visible_stat())
    }

    fn check(&self, conn: ConnId, path: &str, version: i32) -> Result<(), ErrorCode> {
        validate_path(path).map_err(|_| ErrorCode::BadArguments)?;
        let node = self.tree.nodes.get(path).ok_or(ErrorCode::NoNode)?;
        if !self.allowed(conn, &node.acl, perms::READ) {
            return Err(ErrorCode::NoAuth);
        }
        Self::check_version(node.stat.version, version)
    }
}
