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

mod conn;
mod read;
mod request;
mod watch;
mod write;

use read::{check_watches, diff_node};
use write::is_write;

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
}
