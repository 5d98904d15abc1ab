//! A small abstract ZooKeeper with several sessions, for model checking the real recipe
//! machines (and for any harness that wants more than one client): every state is
//! `Clone + Hash + Eq`, so a checker stores states directly, and every fault is an
//! explicit step a checker can choose.
//!
//! The server: a tree of nodes (persistent, ephemeral, sequential, container), one-shot
//! data, exists and child watches, persistent and persistent recursive watches
//! (`addWatch`; `removeWatches` and `checkWatches` answer for them all; a 3.5 server
//! without them: [`Zk::persistent_watches`]),
//! `sync`, `multi` (all or nothing, ZooKeeper's error results), per-session FIFO:
//! requests are read in order, and the notifications a write causes are written before
//! its reply.
//!
//! The session as a recipe sees it ([`ModelWorld`] hosts one machine per client, as
//! the real client does): `Connected` when hosted; a dropped connection fails every
//! unanswered request with `ConnectionLoss` (whether or not the server applied it),
//! then `Suspended`; requests submitted while down wait for the reconnect;
//! `Reconnected`, after which notifications the session missed are delivered (the
//! real session re-arms its watches with `SetWatches`); a server-side expiry (only of
//! a session whose connection is down) deletes its ephemerals at once, and the client
//! hears `Expired` (then `Connected` to a new session) when it next tries to reconnect;
//! a client-side expiry (the local estimate) gives up on a session the server still
//! holds, whose ephemerals stay until the server expires it too.
//!
//! Faults as steps: drop a connection between any two replies, expire a session (either
//! side), reconnect to a lagging follower (reads miss nodes created or deleted after
//! the client's last seen zxid, until the session writes or syncs), the session
//! refuses the newest unread request (`Overloaded`), the server throttles the oldest
//! (`Throttled`, not applied), the server reaps an empty container (one that ever had a
//! child, as ZooKeeper's container manager does, and as the simulator's server does at
//! its `container_check`): a delete by no session, at any point; a container made again
//! starts with a fresh child counter, so its sequence numbers start over.
//!
//! Watches, as the server and the client keep them: a notification goes to every watch
//! the change triggers, one-shot ones first (the node's data/exist watches, its child
//! watches on a delete), then persistent ones on the node, then recursive ones on the
//! node and its ancestors (never `NodeChildrenChanged`), then the parent's child and
//! persistent watches (`NodeChildrenChanged`). A watch is the client's only once the
//! reply of the request that set it arrives: a request whose reply is lost with the
//! connection leaves no watch (the client would not re-arm it), and what it fired is
//! lost too. Across a reconnect the session re-arms every watch (`SetWatches2`): a
//! one-shot watch whose node changed meanwhile fires then, as the server does for
//! changes after the relative zxid; a persistent watch is re-armed without firing, so
//! what it would have reported while the connection was down is lost — except, on a
//! lagging follower, the changes the follower applies after the reconnect (newer than
//! the client's last seen zxid), which it reports as it catches up. `addWatch`,
//! `removeWatches` and `checkWatches` (like `setWatches2`) are served after the
//! follower caught up, as it may at any time.
//!
//! TTL nodes (`createTTL`; off: [`Zk::ttl_nodes`]) are reaped like containers, at any
//! point, once childless and unmodified for their TTL by the server's clock
//! ([`Zk::clock_ms`]: the latest time of any client, started by a harness that uses
//! TTL nodes).
//!
//! Not modelled: ACLs (a create may be refused by path: [`Zk::refused`]),
//! the client-side `*WatchRemoved` events a `removeWatches` tells registrants of.

use alloc::collections::{BTreeMap, VecDeque};
use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;
use bytes::Bytes;

use zk_recipes::error::Error;
use zk_recipes::proto::*;
use zk_recipes::recipe::{OpId, Recipe, SessionChange};
use zk_recipes::session::WatchEvent;
use zk_recipes::time::Instant;

/// A node of the model tree.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ZNode {
    /// Data.
    pub data: Bytes,
    /// Owning session of an ephemeral node, else 0.
    pub owner: i64,
    /// zxid of the create.
    pub czxid: i64,
    /// zxid of the last data change.
    pub mzxid: i64,
    /// zxid of the last child change.
    pub pzxid: i64,
    /// Data version.
    pub version: i32,
    /// Child version: child creates and deletes.
    pub cversion: i32,
    /// Child creates: the next sequence number of a sequential child (deletes do not
    /// count, as in the server).
    pub creates: i32,
    /// Created as a container: reaped once it has had a child and has none.
    pub container: bool,
    /// A TTL node (`createTTL`): reaped once childless and unmodified for its TTL.
    pub ttl: Option<NodeTtl>,
}

/// A TTL node's clock: its TTL and the server time of its last create or `setData`
/// (its `mtime`, which the server's TTL check counts from).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct NodeTtl {
    /// The TTL, ms.
    pub ttl_ms: i64,
    /// Server time of the last modification, ms.
    pub mtime_ms: i64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
enum WatchKind {
    Data,
    Child,
    /// addWatch PERSISTENT: the node's own changes and its children changing.
    Persistent,
    /// addWatch PERSISTENT_RECURSIVE: the node's and every descendant's own changes.
    Recursive,
}

impl WatchKind {
    fn persistent(self) -> bool {
        matches!(self, WatchKind::Persistent | WatchKind::Recursive)
    }
}

/// What a server writes to a session: a reply or a notification.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Outbound {
    /// The reply to request `op`.
    Reply(OpId, Result<Response, Error>),
    /// A watch set by request `op` fired.
    Watch(OpId, WatchEvent),
}

/// The state of a client's connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Link {
    /// Connected.
    Up,
    /// Connection down, session alive.
    Down,
    /// Connection down and the server expired the session; the client does not know.
    Expired,
}

/// One client's session, server and client side.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ZkSession {
    /// Session id (the `ephemeralOwner` of its nodes).
    pub id: i64,
    /// Connection state.
    pub link: Link,
    /// Sent, not yet read by the server.
    pub wire: VecDeque<(OpId, Request)>,
    /// Written by the server, not yet read by the client, each with the server's zxid
    /// when written.
    pub out: VecDeque<(Outbound, i64)>,
    /// Submitted while the connection was down.
    queued: Vec<(OpId, Request)>,
    /// One-shot watches the server holds: (path, kind, op).
    watches: Vec<(String, WatchKind, OpId)>,
    /// Notifications that fired while the connection was down.
    /// Notifications that fired while the connection was down, each with the zxid of
    /// the change.
    missed: Vec<(OpId, WatchEvent, i64)>,
    /// Reads come from a follower at this zxid until the session writes or syncs (or
    /// the follower catches up by itself: [`Zk::catch_up`]).
    stale_at: Option<i64>,
    /// Notifications the session missed while down, of changes the lagging follower
    /// has not applied yet: it sends them as it catches up.
    held: Vec<(OpId, WatchEvent, i64)>,
    /// Persistent watches' notifications of changes while the connection was down,
    /// each with the zxid of the change: lost on the reconnect, except those a lagging
    /// follower has not applied yet (it reports them as it catches up).
    missed_persistent: Vec<(OpId, WatchEvent, i64)>,
    /// The highest zxid the client has heard of.
    pub seen_zxid: i64,
    /// A session the client gave up on (local expiry) that the server still holds.
    pub zombie: Option<i64>,
}

/// The server's tree and the sessions.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Zk {
    /// Nodes by full path ("/" always exists).
    pub nodes: BTreeMap<String, ZNode>,
    /// The last zxid.
    pub zxid: i64,
    /// Deleted nodes (path, czxid, zxid of the delete), for lagging followers.
    graveyard: Vec<(String, i64, i64)>,
    /// Data that was overwritten or deleted, for lagging followers' reads.
    overwritten: Vec<OldData>,
    /// One session per client.
    pub sessions: Vec<ZkSession>,
    next_id: i64,
    /// Watches a lagging follower fires as it catches up, after the read's reply.
    catch_up: Vec<(String, WatchKind, EventType)>,
    /// Paths whose create the server refuses, with the error: a parent the client may
    /// not write to (`NoAuth`), a chroot that does not exist (`NoNode`).
    pub refused: Vec<(String, ErrorCode)>,
    /// Inside a multi: its zxid, which every write of it shares (a multi is one
    /// transaction).
    txn: Option<i64>,
    /// A failed write consumes a zxid, as in the server (the default). The model
    /// checker turns it off: the recipes compare zxids only by order, and the gaps would
    /// multiply its states (exclusive_3c: 0.3 M → over 2 M).
    pub failed_writes_take_zxids: bool,
    /// Off (`None`) unless a harness turns it on: the single-node writes
    /// ([`serve`](Self::serve)d requests) the server applied, in order, for a harness
    /// that judges which request of which session wrote what.
    pub journal: Option<Vec<Applied>>,
    /// `addWatch` is served (ZooKeeper 3.6+, the default); off: answered
    /// `Unimplemented`, as a 3.5 server does.
    pub persistent_watches: bool,
    /// TTL nodes on (`zookeeper.extendedTypesEnabled`, the default here); off:
    /// `createTTL` is answered `Unimplemented`, as a real 3.8 server does.
    pub ttl_nodes: bool,
    /// The server's clock in ms, for TTL nodes: `None` (the default: states carry no
    /// clock, and TTL nodes never lapse) unless a harness that uses TTL nodes starts it
    /// (`Some(0)`, at the clients' time zero); then the latest time of any client
    /// ([`ModelWorld`] moves it as the clients' time passes).
    pub clock_ms: Option<i64>,
}

/// A served single-node write the server applied (see [`Zk::journal`]).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Applied {
    /// The writing session (index into [`Zk::sessions`]).
    pub session: usize,
    /// The request.
    pub op: OpId,
    /// The node written (a sequential create's requested path).
    pub path: String,
    /// Its data before the write (`None`: it did not exist).
    pub before: Option<Bytes>,
    /// Its data after the write (`None`: deleted).
    pub after: Option<Bytes>,
}

/// A node's data as it was until a write (a setData or its delete) at `until`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct OldData {
    path: String,
    czxid: i64,
    mzxid: i64,
    version: i32,
    owner: i64,
    data: Bytes,
    until: i64,
}

impl OldData {
    /// Node `n` at `path` as it was until the write at `until`.
    fn of(path: &str, n: &ZNode, until: i64) -> Self {
        OldData {
            path: String::from(path),
            czxid: n.czxid,
            mzxid: n.mzxid,
            version: n.version,
            owner: n.owner,
            data: n.data.clone(),
            until,
        }
    }
}

fn parent_of(path: &str) -> &str {
    match path.rfind('/') {
        Some(0) => "/",
        Some(i) => &path[..i],
        None => "/",
    }
}

fn stat_of(n: &ZNode, children: i32) -> Stat {
    Stat {
        czxid: n.czxid,
        mzxid: n.mzxid,
        pzxid: n.pzxid,
        version: n.version,
        cversion: n.cversion,
        ephemeral_owner: n.owner,
        data_length: n.data.len() as i32,
        num_children: children,
        ..Stat::default()
    }
}

fn code(e: ErrorCode) -> Error {
    Error::Server(e)
}

impl Zk {
    /// A server with only "/" and `clients` connected sessions.
    pub fn new(clients: usize) -> Self {
        let mut nodes = BTreeMap::new();
        nodes.insert(
            String::from("/"),
            ZNode {
                data: Bytes::new(),
                owner: 0,
                czxid: 0,
                mzxid: 0,
                pzxid: 0,
                version: 0,
                cversion: 0,
                creates: 0,
                container: false,
                ttl: None,
            },
        );
        let mut zk = Zk {
            nodes,
            zxid: 0,
            graveyard: Vec::new(),
            overwritten: Vec::new(),
            sessions: Vec::new(),
            next_id: 0x100,
            catch_up: Vec::new(),
            refused: Vec::new(),
            txn: None,
            failed_writes_take_zxids: true,
            journal: None,
            persistent_watches: true,
            ttl_nodes: true,
            clock_ms: None,
        };
        for _ in 0..clients {
            zk.open_session();
        }
        zk
    }

    /// A new connected session; returns its index in [`sessions`](Self::sessions).
    pub fn open_session(&mut self) -> usize {
        let id = self.new_id();
        self.sessions.push(ZkSession {
            id,
            link: Link::Up,
            wire: VecDeque::new(),
            out: VecDeque::new(),
            queued: Vec::new(),
            watches: Vec::new(),
            missed: Vec::new(),
            stale_at: None,
            held: Vec::new(),
            missed_persistent: Vec::new(),
            seen_zxid: 0,
            zombie: None,
        });
        self.sessions.len() - 1
    }

    /// Session `s` closes (closeSession, a transaction): its ephemerals go and its
    /// watches with it; the index stays, with a new session id that nothing owns.
    pub fn close_session(&mut self, s: usize) {
        let id = self.sessions[s].id;
        self.sessions[s].watches.clear();
        self.sessions[s].missed_persistent.clear();
        self.expire_nodes(id);
        self.sessions[s].id = self.new_id();
    }

    /// The zxid of the next write: a new one, or the open multi's.
    fn bump(&mut self) -> i64 {
        self.zxid = self.txn.unwrap_or(self.zxid + 1);
        self.zxid
    }

    fn new_id(&mut self) -> i64 {
        self.next_id += 1;
        self.next_id
    }

    /// The children of `path`, by name, sorted.
    pub fn children(&self, path: &str) -> Vec<String> {
        let prefix = if path == "/" {
            String::from("/")
        } else {
            format!("{path}/")
        };
        self.nodes
            .range(prefix.clone()..)
            .take_while(|(p, _)| p.starts_with(&prefix))
            .filter(|(p, _)| p.len() > prefix.len() && !p[prefix.len()..].contains('/'))
            .map(|(p, _)| String::from(&p[prefix.len()..]))
            .collect()
    }

    /// The children of `path` as a follower at `zxid` saw them.
    fn children_at(&self, path: &str, zxid: i64) -> Vec<String> {
        let mut names: Vec<String> = self
            .children(path)
            .into_iter()
            .filter(|n| {
                let full = join(path, n);
                self.nodes.get(&full).is_some_and(|x| x.czxid <= zxid)
            })
            .collect();
        for (p, czxid, gone) in &self.graveyard {
            if parent_of(p) == path && *czxid <= zxid && *gone > zxid {
                names.push(String::from(&p[p.rfind('/').map_or(0, |i| i + 1)..]));
            }
        }
        names.sort();
        names.dedup();
        names
    }

    /// The data and stat of `path` as a follower at `zxid` has them (`None`: the
    /// leader's), if it exists there.
    fn data_at(&self, path: &str, zxid: Option<i64>) -> Option<(Bytes, Stat)> {
        let live = self.nodes.get(path);
        let children = self.children(path).len() as i32;
        let Some(z) = zxid else {
            return live.map(|n| (n.data.clone(), stat_of(n, children)));
        };
        if let Some(n) = live.filter(|n| n.czxid <= z && n.mzxid <= z) {
            return Some((n.data.clone(), stat_of(n, children)));
        }
        let o = self
            .overwritten
            .iter()
            .find(|o| o.path == path && o.czxid <= z && o.mzxid <= z && o.until > z)?;
        let stat = Stat {
            czxid: o.czxid,
            mzxid: o.mzxid,
            version: o.version,
            ephemeral_owner: o.owner,
            data_length: o.data.len() as i32,
            ..Stat::default()
        };
        Some((o.data.clone(), stat))
    }

    fn exists_at(&self, path: &str, zxid: Option<i64>) -> bool {
        match zxid {
            None => self.nodes.contains_key(path),
            Some(z) => {
                self.nodes.get(path).is_some_and(|n| n.czxid <= z)
                    || self
                        .graveyard
                        .iter()
                        .any(|(p, c, gone)| p == path && *c <= z && *gone > z)
            }
        }
    }

    /// Paths of nodes owned by session `id`.
    pub fn owned_by(&self, id: i64) -> Vec<String> {
        self.nodes
            .iter()
            .filter(|(_, n)| n.owner == id)
            .map(|(p, _)| p.clone())
            .collect()
    }

    /// The one-shot watches the server holds for session `s` (index into
    /// [`sessions`](Self::sessions)): (path, a child watch?, the request that set it).
    pub fn armed(&self, s: usize) -> Vec<(&str, bool, OpId)> {
        self.sessions.get(s).map_or_else(Vec::new, |s| {
            s.watches
                .iter()
                .filter(|(_, k, _)| !k.persistent())
                .map(|(p, k, op)| (p.as_str(), *k == WatchKind::Child, *op))
                .collect()
        })
    }

    /// The persistent watches the server holds for session `s`: (path, recursive?, the
    /// request that set it).
    pub fn persistent_armed(&self, s: usize) -> Vec<(&str, bool, OpId)> {
        self.sessions.get(s).map_or_else(Vec::new, |s| {
            s.watches
                .iter()
                .filter(|(_, k, _)| k.persistent())
                .map(|(p, k, op)| (p.as_str(), *k == WatchKind::Recursive, *op))
                .collect()
        })
    }

    /// The children of `path` as a server at `zxid` had them (what a client that has
    /// heard up to `zxid` may know of), with each one's czxid, in name order.
    pub fn children_at_zxid(&self, path: &str, zxid: i64) -> Vec<(String, i64)> {
        self.children_at(path, zxid)
            .into_iter()
            .filter_map(|name| {
                let full = join(path, &name);
                let czxid = match self.nodes.get(&full) {
                    Some(n) if n.czxid <= zxid => Some(n.czxid),
                    _ => self
                        .graveyard
                        .iter()
                        .rev()
                        .find(|(p, c, gone)| *p == full && *c <= zxid && *gone > zxid)
                        .map(|(_, c, _)| *c),
                }?;
                Some((name, czxid))
            })
            .collect()
    }

    /// The data and stat of `path` as a server at `zxid` had them (what a client that
    /// has heard up to `zxid` may know of), if it existed then.
    pub fn data_at_zxid(&self, path: &str, zxid: i64) -> Option<(Bytes, Stat)> {
        self.data_at(path, Some(zxid))
    }

    /// Session `s`'s follower stops applying writes for a while (its connection stays
    /// up): its reads show the tree as it is now and its notifications of later changes
    /// wait, until the session writes or syncs or the follower catches up
    /// ([`catch_up`](Self::catch_up)). `false` if it lags already or is not connected.
    pub fn fall_behind(&mut self, s: usize) -> bool {
        let zxid = self.zxid;
        match self.sessions.get_mut(s) {
            Some(session) if session.link == Link::Up && session.stale_at.is_none() => {
                session.stale_at = Some(zxid);
                true
            }
            _ => false,
        }
    }

    /// A write by another client's session `s` (index into [`sessions`](Self::sessions)),
    /// or by an operator (`None`: no session, so an ephemeral create is refused), applied
    /// at once as the server would: watches fire, lagging followers still show the old
    /// tree. Reads are not served here.
    pub fn write_as(&mut self, s: Option<usize>, req: &Request) -> Result<Response, Error> {
        let owner = match s {
            Some(s) => match self.sessions.get(s) {
                Some(session) => session.id,
                None => return Err(code(ErrorCode::SessionExpired)),
            },
            None => 0,
        };
        if let Request::Create(c) | Request::Create2(c) | Request::CreateContainer(c) = req {
            let ephemeral = CreateMode::from_i32(c.flags).is_some_and(|m| m.is_ephemeral());
            if owner == 0 && ephemeral {
                return Err(code(ErrorCode::BadArguments));
            }
        }
        self.write(owner, req)
            .unwrap_or(Err(code(ErrorCode::Unimplemented)))
    }

    /// A write request of `owner` (`None`: not a write). A failed write consumes a zxid
    /// too, as in the server.
    fn write(&mut self, owner: i64, req: &Request) -> Option<Result<Response, Error>> {
        let r = match req {
            Request::Create(c) | Request::Create2(c) | Request::CreateContainer(c) => {
                self.create(owner, c).map(|(path, node)| match req {
                    Request::Create(_) => Response::Path(path),
                    _ => Response::PathStat {
                        path,
                        stat: stat_of(&node, 0),
                    },
                })
            }
            Request::CreateTtl(c) => self.create_ttl(c).map(|(path, node)| Response::PathStat {
                path,
                stat: stat_of(&node, 0),
            }),
            Request::Delete(d) => self.delete(&d.path, d.version).map(|()| Response::Empty),
            Request::SetData(d) => self
                .set_data(&d.path, &d.data, d.version)
                .map(Response::Stat),
            Request::Multi(ops) => Ok(self.multi(owner, ops)),
            _ => return None,
        };
        Some(r.map_err(|e| {
            if self.failed_writes_take_zxids {
                self.zxid += 1;
            }
            code(e)
        }))
    }

    fn fire(&mut self, path: &str, kind: WatchKind, event_type: EventType) {
        for s in &mut self.sessions {
            let mut i = 0;
            while i < s.watches.len() {
                if s.watches[i].0 == path && s.watches[i].1 == kind {
                    let (p, _, op) = s.watches.remove(i);
                    let ev = WatchEvent {
                        event_type,
                        path: p,
                    };
                    if s.link == Link::Up && s.stale_at.is_some() {
                        // A lagging follower tells of a change once it applied it.
                        s.held.push((op, ev, self.zxid));
                    } else if s.link == Link::Up {
                        s.out.push_back((Outbound::Watch(op, ev), self.zxid));
                    } else {
                        s.missed.push((op, ev, self.zxid));
                    }
                } else {
                    i += 1;
                }
            }
        }
    }

    /// Fires the persistent watches a change of `path` triggers: persistent ones on it,
    /// recursive ones on it and its ancestors (not for `NodeChildrenChanged`, which only
    /// persistent ones on the parent hear). They stay armed.
    fn fire_persistent(&mut self, path: &str, event_type: EventType) {
        let zxid = self.zxid;
        for s in &mut self.sessions {
            let hit: Vec<OpId> = s
                .watches
                .iter()
                .filter(|(p, k, _)| match k {
                    WatchKind::Persistent => p == path,
                    WatchKind::Recursive => {
                        event_type != EventType::NodeChildrenChanged
                            && (p == path
                                || p == "/"
                                || path
                                    .strip_prefix(p.as_str())
                                    .is_some_and(|rest| rest.starts_with('/')))
                    }
                    _ => false,
                })
                .map(|(_, _, op)| *op)
                .collect();
            for op in hit {
                let ev = WatchEvent {
                    event_type,
                    path: String::from(path),
                };
                if s.link == Link::Up && s.stale_at.is_some() {
                    s.held.push((op, ev, zxid));
                } else if s.link == Link::Up {
                    s.out.push_back((Outbound::Watch(op, ev), zxid));
                } else {
                    s.missed_persistent.push((op, ev, zxid));
                }
            }
        }
    }

    fn watch(&mut self, s: usize, path: &str, kind: WatchKind, op: OpId) {
        self.sessions[s]
            .watches
            .push((String::from(path), kind, op));
    }

    /// Creates a node; returns its final path.
    fn create(&mut self, owner: i64, c: &CreateRequest) -> Result<(String, ZNode), ErrorCode> {
        let mode = CreateMode::from_i32(c.flags).ok_or(ErrorCode::BadArguments)?;
        if let Some((_, code)) = self.refused.iter().find(|(p, _)| *p == c.path) {
            return Err(*code);
        }
        let parent = String::from(parent_of(&c.path));
        let p = self.nodes.get(&parent).ok_or(ErrorCode::NoNode)?;
        if p.owner != 0 {
            return Err(ErrorCode::NoChildrenForEphemerals);
        }
        let path = if mode.is_sequential() {
            format!("{}{:010}", c.path, p.creates)
        } else {
            c.path.clone()
        };
        if self.nodes.contains_key(&path) {
            return Err(ErrorCode::NodeExists);
        }
        let zxid = self.bump();
        let node = ZNode {
            data: c.data.clone(),
            owner: if mode.is_ephemeral() { owner } else { 0 },
            czxid: zxid,
            mzxid: zxid,
            pzxid: zxid,
            version: 0,
            cversion: 0,
            creates: 0,
            container: mode == CreateMode::Container,
            ttl: None,
        };
        self.nodes.insert(path.clone(), node.clone());
        if let Some(p) = self.nodes.get_mut(&parent) {
            p.cversion = p.cversion.wrapping_add(1);
            p.creates = p.creates.wrapping_add(1);
            p.pzxid = zxid;
        }
        self.fire(&path, WatchKind::Data, EventType::NodeCreated);
        self.fire_persistent(&path, EventType::NodeCreated);
        self.fire(&parent, WatchKind::Child, EventType::NodeChildrenChanged);
        self.fire_persistent(&parent, EventType::NodeChildrenChanged);
        Ok((path, node))
    }

    /// Creates a TTL node (`createTTL`): refused with `Unimplemented` when TTL nodes
    /// are off, `BadArguments` for a mode other than the two TTL modes or a TTL out of
    /// 1 ..= 2^40 - 1 ms, as ZooKeeper does.
    fn create_ttl(&mut self, r: &CreateTtlRequest) -> Result<(String, ZNode), ErrorCode> {
        if !self.ttl_nodes {
            return Err(ErrorCode::Unimplemented);
        }
        let mode = CreateMode::from_i32(r.flags);
        let ttl_mode = matches!(
            mode,
            Some(CreateMode::PersistentWithTtl | CreateMode::PersistentSequentialWithTtl)
        );
        if !ttl_mode || !(1..(1 << 40)).contains(&r.ttl) {
            return Err(ErrorCode::BadArguments);
        }
        let c = CreateRequest {
            path: r.path.clone(),
            data: r.data.clone(),
            acl: r.acl.clone(),
            flags: r.flags,
        };
        let (path, mut node) = self.create(0, &c)?;
        let now = self.clock_ms.unwrap_or(0);
        node.ttl = Some(NodeTtl {
            ttl_ms: r.ttl,
            mtime_ms: now,
        });
        if let Some(n) = self.nodes.get_mut(&path) {
            n.ttl = node.ttl;
        }
        Ok((path, node))
    }

    /// The server's clock moves to `ms` (never back), if it was started.
    pub fn clock_to(&mut self, ms: i64) {
        if let Some(c) = self.clock_ms.as_mut() {
            *c = (*c).max(ms);
        }
    }

    fn delete(&mut self, path: &str, version: i32) -> Result<(), ErrorCode> {
        let n = self.nodes.get(path).ok_or(ErrorCode::NoNode)?;
        if version != -1 && version != n.version {
            return Err(ErrorCode::BadVersion);
        }
        if !self.children(path).is_empty() {
            return Err(ErrorCode::NotEmpty);
        }
        if path == "/" {
            return Err(ErrorCode::BadArguments);
        }
        let mut old = OldData::of(path, n, 0);
        let czxid = n.czxid;
        let zxid = self.bump();
        old.until = zxid;
        self.overwritten.push(old);
        self.nodes.remove(path);
        self.graveyard.push((String::from(path), czxid, zxid));
        let parent = String::from(parent_of(path));
        if let Some(p) = self.nodes.get_mut(&parent) {
            p.cversion = p.cversion.wrapping_add(1);
            p.pzxid = zxid;
        }
        self.fire(path, WatchKind::Data, EventType::NodeDeleted);
        self.fire(path, WatchKind::Child, EventType::NodeDeleted);
        self.fire_persistent(path, EventType::NodeDeleted);
        self.fire(&parent, WatchKind::Child, EventType::NodeChildrenChanged);
        self.fire_persistent(&parent, EventType::NodeChildrenChanged);
        Ok(())
    }

    fn set_data(&mut self, path: &str, data: &Bytes, version: i32) -> Result<Stat, ErrorCode> {
        let n = self.nodes.get(path).ok_or(ErrorCode::NoNode)?;
        if version != -1 && version != n.version {
            return Err(ErrorCode::BadVersion);
        }
        let mut old = OldData::of(path, n, 0);
        let zxid = self.bump();
        old.until = zxid;
        self.overwritten.push(old);
        let children = self.children(path).len() as i32;
        let n = self.nodes.get_mut(path).ok_or(ErrorCode::NoNode)?;
        n.data = data.clone();
        n.version += 1;
        n.mzxid = zxid;
        if let (Some(t), Some(now)) = (n.ttl.as_mut(), self.clock_ms) {
            t.mtime_ms = now;
        }
        let stat = stat_of(n, children);
        self.fire(path, WatchKind::Data, EventType::NodeDataChanged);
        self.fire_persistent(path, EventType::NodeDataChanged);
        Ok(stat)
    }

    fn stat(&self, path: &str) -> Option<Stat> {
        let n = self.nodes.get(path)?;
        Some(stat_of(n, self.children(path).len() as i32))
    }

    /// Forgets what no lagging read can ask about any more, so that states differing
    /// only in it are one state for a checker: deleted nodes older than every
    /// session's last seen zxid (a lagging follower never lags behind what its client
    /// saw). With `stale_possible` false (no reconnect to a lagging follower can come,
    /// and no session reads from one now) the zxids the clients have seen are
    /// forgotten too (zero), and every deleted node.
    pub fn forget(&mut self, stale_possible: bool) {
        if !stale_possible && self.sessions.iter().all(|s| s.stale_at.is_none()) {
            self.graveyard.clear();
            self.overwritten.clear();
            for s in &mut self.sessions {
                s.seen_zxid = 0;
                for (_, z) in &mut s.out {
                    *z = 0;
                }
            }
            return;
        }
        let floor = self
            .sessions
            .iter()
            .map(|s| s.stale_at.unwrap_or(s.seen_zxid).min(s.seen_zxid))
            .min()
            .unwrap_or(0);
        self.graveyard.retain(|(_, _, gone)| *gone > floor);
        self.overwritten.retain(|o| o.until > floor);
    }

    /// The containers the server may reap now, in path order: created as containers,
    /// with no child, and a child counter past zero (they had a child: ZooKeeper's
    /// container manager reaps only those, so a container just made is not reaped
    /// before its first child lands); and the TTL nodes with no child whose last
    /// modification is older than their TTL by the server's clock.
    pub fn reapable(&self) -> Vec<String> {
        let now = self.clock_ms.unwrap_or(0);
        self.nodes
            .iter()
            .filter(|(p, n)| {
                let container = n.container && n.creates > 0;
                let lapsed = n.ttl.is_some_and(|t| now - t.mtime_ms > t.ttl_ms);
                (container || lapsed) && self.children(p).is_empty()
            })
            .map(|(p, _)| p.clone())
            .collect()
    }

    /// The server reaps the `i`-th of [`reapable`](Self::reapable): deleted as by a
    /// delete request (watches fire, a lagging follower still shows it); made again, it
    /// starts with a fresh child counter, so its sequence numbers start over at 0.
    pub fn reap(&mut self, i: usize) -> bool {
        match self.reapable().get(i) {
            Some(path) => {
                let path = path.clone();
                self.delete(&path, -1).is_ok()
            }
            None => false,
        }
    }

    /// The server's container check: reaps every container [`reapable`](Self::reapable)
    /// now, each a transaction of its own, in path order.
    pub fn reap_all(&mut self) {
        for path in self.reapable() {
            let _ = self.delete(&path, -1);
        }
    }

    /// Deletes every ephemeral node of session `id`: its expiry or close, one
    /// transaction (a closeSession).
    pub fn expire_nodes(&mut self, id: i64) {
        self.txn = Some(self.zxid + 1);
        self.zxid += 1;
        for p in self.owned_by(id) {
            let _ = self.delete(&p, -1);
        }
        self.txn = None;
    }

    fn multi(&mut self, owner: i64, ops: &[MultiOp]) -> Response {
        let before = self.clone();
        self.txn = Some(self.zxid + 1);
        let mut results = Vec::new();
        for (i, op) in ops.iter().enumerate() {
            let r = match op {
                // 3.8 turns create2 inside a multi into create (path only), except for
                // containers, which become createContainer (path and Stat).
                MultiOp::Create(c) | MultiOp::Create2(c)
                    if c.flags != CreateMode::Container.to_i32() =>
                {
                    self.create(owner, c).map(|(p, _)| MultiResult::Create(p))
                }
                MultiOp::Create(c) | MultiOp::Create2(c) | MultiOp::CreateContainer(c) => {
                    self.create(owner, c).map(|(path, n)| MultiResult::Create2 {
                        path,
                        stat: stat_of(&n, 0),
                    })
                }
                MultiOp::Delete(d) => self
                    .delete(&d.path, d.version)
                    .map(|()| MultiResult::Delete),
                MultiOp::SetData(d) => self
                    .set_data(&d.path, &d.data, d.version)
                    .map(MultiResult::SetData),
                MultiOp::Check(c) => match self.nodes.get(&c.path) {
                    None => Err(ErrorCode::NoNode),
                    Some(n) if c.version != -1 && n.version != c.version => {
                        Err(ErrorCode::BadVersion)
                    }
                    Some(_) => Ok(MultiResult::Check),
                },
                MultiOp::CreateTtl(_) => Err(ErrorCode::Unimplemented),
            };
            match r {
                Ok(r) => results.push(r),
                Err(e) => {
                    // All or nothing: the tree and the watches as they were; the failed
                    // transaction consumes a zxid.
                    *self = before;
                    if self.failed_writes_take_zxids {
                        self.zxid += 1;
                    }
                    return Response::Multi(failed_multi(ops.len(), i, e));
                }
            }
        }
        // A multi is one transaction, checks only or not.
        self.zxid = self.txn.take().unwrap_or(self.zxid);
        Response::Multi(results)
    }

    /// Applies request `req` of session `s` as the server does (notifications first).
    fn apply(&mut self, s: usize, op: OpId, req: &Request) -> Result<Response, Error> {
        let owner = self.sessions[s].id;
        let is_write = !matches!(
            req,
            Request::Exists(_)
                | Request::GetData(_)
                | Request::GetChildren(_)
                | Request::GetChildren2(_)
                | Request::MultiRead(_)
        );
        if is_write {
            // A write (or sync) goes through the leader: the follower catches up. (So
            // do the watch requests, addWatch, setWatches2, removeWatches and
            // checkWatches: a follower may catch up at any time.)
            self.sessions[s].stale_at = None;
        }
        let stale = self.sessions[s].stale_at;
        if let Some(r) = self.write(owner, req) {
            return r;
        }
        match req {
            Request::Sync(p) => Ok(Response::Path(p.path.clone())),
            Request::AddWatch(a) => {
                if !self.persistent_watches {
                    return Err(code(ErrorCode::Unimplemented));
                }
                let kind = match AddWatchMode::from_i32(a.mode) {
                    Some(AddWatchMode::Persistent) => WatchKind::Persistent,
                    Some(AddWatchMode::PersistentRecursive) => WatchKind::Recursive,
                    None => return Err(code(ErrorCode::BadArguments)),
                };
                self.watch(s, &a.path, kind, op);
                Ok(Response::WatchAdded)
            }
            Request::CheckWatches(r) | Request::RemoveWatches(r) => {
                let kinds: &[WatchKind] = match WatcherType::from_i32(r.watcher_type) {
                    Some(WatcherType::Children) => &[WatchKind::Child],
                    Some(WatcherType::Data) => &[WatchKind::Data],
                    Some(WatcherType::Any) => &[
                        WatchKind::Data,
                        WatchKind::Child,
                        WatchKind::Persistent,
                        WatchKind::Recursive,
                    ],
                    Some(WatcherType::Persistent) => &[WatchKind::Persistent],
                    Some(WatcherType::PersistentRecursive) => &[WatchKind::Recursive],
                    None => return Err(code(ErrorCode::BadArguments)),
                };
                let hit = |(p, k, _): &(String, WatchKind, OpId)| *p == r.path && kinds.contains(k);
                let watches = &mut self.sessions[s].watches;
                if !watches.iter().any(hit) {
                    return Err(code(ErrorCode::NoWatcher));
                }
                if matches!(req, Request::RemoveWatches(_)) {
                    watches.retain(|w| !hit(w));
                }
                Ok(Response::Empty)
            }
            Request::SetWatches2(w) => {
                // Persistent watches are armed again as they are: what they would have
                // reported meanwhile is not sent.
                for path in &w.persistent_watches {
                    self.watch(s, path, WatchKind::Persistent, op);
                }
                for path in &w.persistent_recursive_watches {
                    self.watch(s, path, WatchKind::Recursive, op);
                }
                // Against the leader's tree (the follower caught up above, as it may at
                // any time). A watch whose node changed after the zxid fires at once,
                // after the reply (as the session delivers it), and stays unarmed.
                let rel = w.relative_zxid;
                let lists = [
                    (&w.data_watches, WatchKind::Data),
                    (&w.exist_watches, WatchKind::Data),
                    (&w.child_watches, WatchKind::Child),
                ];
                for (exist, (paths, kind)) in lists.into_iter().enumerate() {
                    for path in paths {
                        self.watch(s, path, kind, op);
                        let node = self.nodes.get(path);
                        let fire = match (exist == 1, kind, node) {
                            (true, _, Some(_)) => Some(EventType::NodeCreated),
                            (true, _, None) => None,
                            (false, _, None) => Some(EventType::NodeDeleted),
                            (false, WatchKind::Child, Some(n)) if n.pzxid > rel => {
                                Some(EventType::NodeChildrenChanged)
                            }
                            (false, WatchKind::Data, Some(n)) if n.mzxid > rel => {
                                Some(EventType::NodeDataChanged)
                            }
                            _ => None,
                        };
                        if let Some(t) = fire {
                            self.catch_up.push((path.clone(), kind, t));
                        }
                    }
                }
                Ok(Response::Empty)
            }
            Request::Exists(g) => {
                let found = self.exists_at(&g.path, stale);
                if g.watch {
                    self.watch(s, &g.path, WatchKind::Data, op);
                    if stale.is_some() && found != self.nodes.contains_key(&g.path) {
                        // The lagging follower applies what it missed: the watch fires.
                        let t = if found {
                            EventType::NodeDeleted
                        } else {
                            EventType::NodeCreated
                        };
                        self.catch_up.push((g.path.clone(), WatchKind::Data, t));
                    }
                }
                // The Stat as the (perhaps lagging) server has it.
                let stat = self.data_at(&g.path, stale).map(|(_, st)| st);
                match (found, stat.or_else(|| self.stat(&g.path))) {
                    (true, Some(st)) => Ok(Response::Stat(st)),
                    (true, None) => Ok(Response::Stat(Stat::default())),
                    (false, _) => Err(code(ErrorCode::NoNode)),
                }
            }
            Request::GetData(g) => {
                let (data, stat) = self
                    .data_at(&g.path, stale)
                    .ok_or(code(ErrorCode::NoNode))?;
                if g.watch {
                    self.watch(s, &g.path, WatchKind::Data, op);
                    if stale.is_some() {
                        // The lagging follower fires it as it applies what it missed.
                        let fire = match self.nodes.get(&g.path) {
                            None => Some(EventType::NodeDeleted),
                            Some(n) if n.czxid != stat.czxid => Some(EventType::NodeDeleted),
                            Some(n) if n.mzxid != stat.mzxid => Some(EventType::NodeDataChanged),
                            Some(_) => None,
                        };
                        if let Some(t) = fire {
                            self.catch_up.push((g.path.clone(), WatchKind::Data, t));
                        }
                    }
                }
                Ok(Response::Data { data, stat })
            }
            Request::GetChildren(g) | Request::GetChildren2(g) => {
                if !self.exists_at(&g.path, stale) {
                    return Err(code(ErrorCode::NoNode));
                }
                let names = match stale {
                    Some(z) => self.children_at(&g.path, z),
                    None => self.children(&g.path),
                };
                if g.watch {
                    self.watch(s, &g.path, WatchKind::Child, op);
                    if stale.is_some() && !self.nodes.contains_key(&g.path) {
                        // Gone on the leader: the follower fires it when it catches up.
                        self.catch_up.push((
                            g.path.clone(),
                            WatchKind::Child,
                            EventType::NodeDeleted,
                        ));
                    } else if stale.is_some() && names != self.children(&g.path) {
                        self.catch_up.push((
                            g.path.clone(),
                            WatchKind::Child,
                            EventType::NodeChildrenChanged,
                        ));
                    }
                }
                Ok(match req {
                    Request::GetChildren(_) => Response::Children(names),
                    _ => Response::Children2 {
                        children: names,
                        stat: self.stat(&g.path).unwrap_or_default(),
                    },
                })
            }
            Request::MultiRead(ops) => {
                // Each read on its own (a multiRead is not atomic): its result or error.
                let mut results = Vec::with_capacity(ops.len());
                for read in ops {
                    let one = match read {
                        ReadOp::GetData(g) => Request::GetData(g.clone()),
                        ReadOp::GetChildren(g) => Request::GetChildren(g.clone()),
                    };
                    results.push(match self.apply(s, op, &one) {
                        Ok(Response::Data { data, stat }) => MultiResult::GetData { data, stat },
                        Ok(Response::Children(names)) => MultiResult::GetChildren(names),
                        Ok(_) => MultiResult::Error(ErrorCode::SystemError),
                        Err(Error::Server(c)) => MultiResult::Error(c),
                        Err(_) => MultiResult::Error(ErrorCode::SystemError),
                    });
                }
                Ok(Response::Multi(results))
            }
            _ => Err(code(ErrorCode::Unimplemented)),
        }
    }

    /// The server reads session `s`'s oldest request and writes its reply.
    pub fn serve(&mut self, s: usize) -> bool {
        let Some((op, req)) = self.sessions[s].wire.pop_front() else {
            return false;
        };
        let written = match &req {
            Request::Create(c) | Request::Create2(c) | Request::CreateContainer(c) => {
                Some(c.path.clone())
            }
            Request::CreateTtl(c) => Some(c.path.clone()),
            Request::SetData(d) => Some(d.path.clone()),
            Request::Delete(d) => Some(d.path.clone()),
            _ => None,
        }
        .filter(|_| self.journal.is_some());
        let before = written
            .as_ref()
            .and_then(|p| self.nodes.get(p).map(|n| n.data.clone()));
        let was_stale = self.sessions[s].stale_at.is_some();
        let r = self.apply(s, op, &req);
        if was_stale && self.sessions[s].stale_at.is_none() {
            // A write or sync: the follower applied what it missed first.
            self.release_held(s);
        }
        if let (Some(path), true) = (written, r.is_ok()) {
            let after = self.nodes.get(&path).map(|n| n.data.clone());
            if let Some(j) = self.journal.as_mut() {
                j.push(Applied {
                    session: s,
                    op,
                    path,
                    before,
                    after,
                });
            }
        }
        let zxid = self.sessions[s].stale_at.unwrap_or(self.zxid);
        let session = &mut self.sessions[s];
        session.out.push_back((Outbound::Reply(op, r), zxid));
        // The follower catches up after answering: the watch the read set fires now
        // (only this session's: the others hear changes from their own servers), and it
        // lags no more.
        if !self.catch_up.is_empty() {
            session.stale_at = None;
        }
        for (path, kind, event_type) in core::mem::take(&mut self.catch_up) {
            let mut i = 0;
            while i < session.watches.len() {
                if session.watches[i].0 == path && session.watches[i].1 == kind {
                    let (p, _, op) = session.watches.remove(i);
                    let ev = WatchEvent {
                        event_type,
                        path: p,
                    };
                    session.out.push_back((Outbound::Watch(op, ev), self.zxid));
                } else {
                    i += 1;
                }
            }
        }
        if was_stale && self.sessions[s].stale_at.is_none() {
            self.release_held(s);
        }
        true
    }

    /// Session `s`'s lagging follower catches up by itself: it lags no more, and sends
    /// the notifications it held back.
    pub fn catch_up(&mut self, s: usize) -> bool {
        let session = &mut self.sessions[s];
        if session.stale_at.is_none() && session.held.is_empty() {
            return false;
        }
        session.stale_at = None;
        self.release_held(s);
        true
    }

    /// Is session `s` on a lagging follower?
    pub fn lagging(&self, s: usize) -> bool {
        self.sessions[s].stale_at.is_some()
    }

    fn release_held(&mut self, s: usize) {
        let session = &mut self.sessions[s];
        for (op, ev, zxid) in core::mem::take(&mut session.held) {
            session.out.push_back((Outbound::Watch(op, ev), zxid));
        }
    }

    /// The server answers session `s`'s oldest request with `Throttled` (not applied).
    pub fn throttle(&mut self, s: usize) -> bool {
        let Some((op, _)) = self.sessions[s].wire.pop_front() else {
            return false;
        };
        let zxid = self.sessions[s].stale_at.unwrap_or(self.zxid);
        self.sessions[s]
            .out
            .push_back((Outbound::Reply(op, Err(code(ErrorCode::Throttled))), zxid));
        true
    }
}

fn join(dir: &str, name: &str) -> String {
    if dir == "/" {
        format!("/{name}")
    } else {
        format!("{dir}/{name}")
    }
}

/// What happened to a hosted machine in one step, for the checker's user model.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Happened<E> {
    /// The machine reported an event.
    Event(E),
    /// The machine sent a request.
    Sent(Request),
}

/// Clients, each hosting at most one recipe machine, on one model server.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ModelWorld<R> {
    /// The server and the sessions.
    pub zk: Zk,
    /// Each client's machine.
    pub machines: Vec<Option<R>>,
    /// Each client's virtual time. Clients share no clock: a machine sees time only
    /// through its own timers, and each client's time passes on its own (`Step::Tick`),
    /// so its timers fire in any order with the others' steps (every ordering a shared
    /// clock allows, and more). Time passing is then a step of one client, independent
    /// of the others' (which a checker's partial-order reduction relies on).
    pub now: Vec<Instant>,
    /// Requests sent by each client, in all (a bound on spinning).
    pub sent: Vec<u32>,
}

impl<R: Recipe> ModelWorld<R> {
    /// `clients` connected clients, hosting nothing.
    pub fn new(clients: usize) -> Self {
        ModelWorld {
            zk: Zk::new(clients),
            machines: (0..clients).map(|_| None).collect(),
            now: (0..clients).map(|_| Instant::ZERO).collect(),
            sent: (0..clients).map(|_| 0).collect(),
        }
    }

    /// Hosts `machine` on client `c` (it hears the session state at once, as from the
    /// real client); `start` is the user's call that sets it going (`acquire`, ...).
    pub fn host(
        &mut self,
        c: usize,
        mut machine: R,
        start: impl FnOnce(&mut R, Instant),
    ) -> Vec<Happened<R::Event>> {
        let s = &self.zk.sessions[c];
        machine.handle_session(self.now[c], SessionChange::Connected { session_id: s.id });
        if s.link != Link::Up {
            machine.handle_session(self.now[c], SessionChange::Suspended);
        }
        start(&mut machine, self.now[c]);
        self.machines[c] = Some(machine);
        self.pump(c)
    }

    /// Calls `f` on client `c`'s machine (a user's call), then moves its output.
    pub fn call(&mut self, c: usize, f: impl FnOnce(&mut R, Instant)) -> Vec<Happened<R::Event>> {
        if let Some(m) = self.machines[c].as_mut() {
            f(m, self.now[c]);
        }
        self.pump(c)
    }

    /// Moves client `c`'s requests out (to the wire, or queued while down) and
    /// collects its events; a done machine is dropped, as hosts do.
    pub fn pump(&mut self, c: usize) -> Vec<Happened<R::Event>> {
        let mut out = Vec::new();
        self.zk.clock_to((self.now[c].as_micros() / 1000) as i64);
        let Some(m) = self.machines[c].as_mut() else {
            return out;
        };
        loop {
            let mut any = false;
            if let Some(t) = m.poll_timeout() {
                if t <= self.now[c] {
                    m.handle_timeout(self.now[c]);
                }
            }
            while let Some((op, req)) = m.poll_request() {
                any = true;
                self.sent[c] = self.sent[c].saturating_add(1);
                out.push(Happened::Sent(req.clone()));
                let s = &mut self.zk.sessions[c];
                match s.link {
                    Link::Up => s.wire.push_back((op, req)),
                    Link::Down | Link::Expired => s.queued.push((op, req)),
                }
            }
            while let Some(e) = m.poll_event() {
                any = true;
                out.push(Happened::Event(e));
            }
            if !any {
                break;
            }
        }
        if m.is_done() {
            self.machines[c] = None;
        }
        out
    }

    /// Client `c` reads the oldest thing its server wrote.
    pub fn deliver(&mut self, c: usize) -> Vec<Happened<R::Event>> {
        let s = &mut self.zk.sessions[c];
        if s.link != Link::Up {
            return Vec::new();
        }
        let Some((o, zxid)) = s.out.pop_front() else {
            return Vec::new();
        };
        s.seen_zxid = s.seen_zxid.max(zxid);
        if let Some(m) = self.machines[c].as_mut() {
            match o {
                Outbound::Reply(op, r) => m.handle_reply(self.now[c], op, r),
                Outbound::Watch(op, ev) => m.handle_watch(self.now[c], op, &ev),
            }
        }
        self.pump(c)
    }

    /// Client `c`'s connection drops.
    pub fn drop_connection(&mut self, c: usize) -> Vec<Happened<R::Event>> {
        let s = &mut self.zk.sessions[c];
        if s.link != Link::Up {
            return Vec::new();
        }
        s.link = Link::Down;
        s.stale_at = None;
        // Replies written and not read: their requests' watches never reach the client,
        // which would not re-arm them, and what those watches fired is lost with them.
        let mut lost: Vec<OpId> = s
            .out
            .iter()
            .filter_map(|(o, _)| match o {
                Outbound::Reply(op, _) => Some(*op),
                Outbound::Watch(..) => None,
            })
            .collect();
        s.watches.retain(|(_, _, op)| !lost.contains(op));
        let persistent: Vec<OpId> = s
            .watches
            .iter()
            .filter(|(_, k, _)| k.persistent())
            .map(|(_, _, op)| *op)
            .collect();
        let held = core::mem::take(&mut s.held);
        let unread: Vec<_> = s
            .out
            .drain(..)
            .filter_map(|(o, zxid)| match o {
                Outbound::Reply(..) => None,
                Outbound::Watch(op, ev) => Some((op, ev, zxid)),
            })
            .collect();
        for (op, ev, zxid) in held.into_iter().chain(unread) {
            if lost.contains(&op) {
                continue;
            }
            if persistent.contains(&op) {
                s.missed_persistent.push((op, ev, zxid));
            } else {
                s.missed.push((op, ev, zxid));
            }
        }
        lost.extend(s.wire.drain(..).map(|(op, _)| op));
        if let Some(m) = self.machines[c].as_mut() {
            for op in lost {
                m.handle_reply(self.now[c], op, Err(Error::ConnectionLoss));
            }
            m.handle_session(self.now[c], SessionChange::Suspended);
        }
        self.pump(c)
    }

    /// Client `c` reconnects (to a follower lagging at its last seen zxid if `stale`);
    /// if the server expired its session meanwhile it hears `Expired`, then `Connected`
    /// to a new session.
    pub fn reconnect(&mut self, c: usize, stale: bool) -> Vec<Happened<R::Event>> {
        match self.zk.sessions[c].link {
            Link::Up => Vec::new(),
            Link::Down => {
                let zxid = self.zk.zxid;
                let s = &mut self.zk.sessions[c];
                s.link = Link::Up;
                if stale && s.seen_zxid < zxid {
                    s.stale_at = Some(s.seen_zxid);
                }
                let id = s.id;
                // A lagging follower sends at once only the notifications of changes it
                // has applied; the rest as it catches up (a client never hears of a
                // change and then reads from before it).
                let (now, mut later): (Vec<_>, Vec<_>) = core::mem::take(&mut s.missed)
                    .into_iter()
                    .partition(|m| s.stale_at.is_none_or(|at| m.2 <= at));
                // Persistent watches re-armed without firing: what they missed is lost,
                // but for what a lagging follower has still to apply.
                let persistent = core::mem::take(&mut s.missed_persistent);
                if let Some(at) = s.stale_at {
                    later.extend(persistent.into_iter().filter(|m| m.2 > at));
                    later.sort_by_key(|m| m.2);
                }
                s.held = later;
                if let Some(m) = self.machines[c].as_mut() {
                    m.handle_session(self.now[c], SessionChange::Reconnected { session_id: id });
                }
                let s = &mut self.zk.sessions[c];
                s.out.extend(
                    now.into_iter()
                        .map(|(op, ev, zxid)| (Outbound::Watch(op, ev), zxid)),
                );
                let queued = core::mem::take(&mut s.queued);
                s.wire.extend(queued);
                self.pump(c)
            }
            Link::Expired => self.renew(c),
        }
    }

    /// The server expires client `c`'s session (only while its connection is down):
    /// its ephemerals go at once; the client hears of it when it reconnects.
    pub fn expire_on_server(&mut self, c: usize) -> bool {
        let s = &mut self.zk.sessions[c];
        if s.link != Link::Down {
            return false;
        }
        s.link = Link::Expired;
        s.watches.clear();
        s.missed.clear();
        s.held.clear();
        s.missed_persistent.clear();
        let id = s.id;
        self.zk.expire_nodes(id);
        true
    }

    /// The client gives up on its session (local expiry estimate, connection down);
    /// the server keeps it as a zombie until [`expire_zombie`](Self::expire_zombie).
    pub fn expire_locally(&mut self, c: usize) -> Vec<Happened<R::Event>> {
        let s = &mut self.zk.sessions[c];
        if s.link != Link::Down || s.zombie.is_some() {
            return Vec::new();
        }
        s.zombie = Some(s.id);
        self.renew(c)
    }

    /// The server expires client `c`'s zombie session.
    pub fn expire_zombie(&mut self, c: usize) -> bool {
        match self.zk.sessions[c].zombie.take() {
            Some(id) => {
                self.zk.expire_nodes(id);
                true
            }
            None => false,
        }
    }

    fn renew(&mut self, c: usize) -> Vec<Happened<R::Event>> {
        let id = self.zk.new_id();
        let s = &mut self.zk.sessions[c];
        s.link = Link::Up;
        s.id = id;
        s.stale_at = None;
        s.watches.clear();
        s.missed.clear();
        s.held.clear();
        s.missed_persistent.clear();
        s.out.clear();
        let queued = core::mem::take(&mut s.queued);
        if let Some(m) = self.machines[c].as_mut() {
            for (op, _) in queued {
                m.handle_reply(self.now[c], op, Err(Error::SessionExpired));
            }
            m.handle_session(self.now[c], SessionChange::Expired);
            m.handle_session(self.now[c], SessionChange::Connected { session_id: id });
        }
        self.pump(c)
    }

    /// Client `c` closes its session (the user's `close()`): the requests the server
    /// has been sent are served first (they are ahead of the `closeSession`), then the
    /// session closes on the server ([`Zk::close_session`]: its ephemerals go); replies
    /// not yet read and requests not yet sent fail with `Closed`, and the machine hears
    /// `Closed`.
    pub fn close(&mut self, c: usize) -> Vec<Happened<R::Event>> {
        if self.zk.sessions[c].link == Link::Up {
            while self.zk.serve(c) {}
        }
        self.zk.close_session(c);
        let s = &mut self.zk.sessions[c];
        let mut failed: Vec<OpId> = s
            .out
            .drain(..)
            .filter_map(|(o, _)| match o {
                Outbound::Reply(op, _) => Some(op),
                Outbound::Watch(..) => None,
            })
            .collect();
        failed.extend(s.wire.drain(..).map(|(op, _)| op));
        failed.extend(s.queued.drain(..).map(|(op, _)| op));
        s.missed.clear();
        s.held.clear();
        s.stale_at = None;
        if let Some(m) = self.machines[c].as_mut() {
            for op in failed {
                m.handle_reply(self.now[c], op, Err(Error::Closed));
            }
            m.handle_session(self.now[c], SessionChange::Closed);
        }
        self.pump(c)
    }

    /// The session refuses client `c`'s newest unread request (`Overloaded`).
    pub fn refuse(&mut self, c: usize) -> Vec<Happened<R::Event>> {
        let Some((op, _)) = self.zk.sessions[c].wire.pop_back() else {
            return Vec::new();
        };
        if let Some(m) = self.machines[c].as_mut() {
            m.handle_reply(self.now[c], op, Err(Error::Overloaded));
        }
        self.pump(c)
    }

    /// Client `c`'s machine's deadline.
    pub fn deadline(&self, c: usize) -> Option<Instant> {
        self.machines[c].as_ref().and_then(|m| m.poll_timeout())
    }

    /// Client `c`'s time passes to its machine's deadline, which it handles.
    pub fn tick(&mut self, c: usize) -> Vec<Happened<R::Event>> {
        let Some(t) = self.deadline(c) else {
            return Vec::new();
        };
        if t > self.now[c] {
            self.now[c] = t;
        }
        self.pump(c)
    }
}

/// What faults a run may still inject (each use spends one).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Faults {
    /// Connection drops (a drop right after the server applied a request loses its reply).
    pub drops: u8,
    /// Session expiries, server-side or client-side (the latter leaves a zombie).
    pub expiries: u8,
    /// Reconnects to a lagging follower.
    pub stale: u8,
    /// Refusals: the session refuses a request, or the server throttles one.
    pub refusals: u8,
    /// Reaps: the server deletes an empty container (one that had a child), at any
    /// point (about no client: any client's run may meet it).
    pub reaps: u8,
}

/// One step of a model run: the server, the network, time or a fault. (User calls are
/// the checker's own.)
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Step {
    /// The server reads and answers client `c`'s oldest request.
    Serve(u8),
    /// Client `c` reads the oldest reply or notification.
    Deliver(u8),
    /// Client `c`'s time passes to its machine's next deadline.
    Tick(u8),
    /// Client `c`'s connection comes back.
    Reconnect(u8),
    /// The server expires client `c`'s zombie session.
    ExpireZombie(u8),
    /// Fault: client `c`'s connection drops.
    Drop(u8),
    /// Fault: client `c` reconnects to a lagging follower.
    ReconnectStale(u8),
    /// Fault: the server expires client `c`'s session (its connection drops first if up).
    ExpireServer(u8),
    /// Fault: client `c` gives up on its session (its connection drops first if up),
    /// leaving a zombie.
    ExpireLocal(u8),
    /// Fault: the session refuses client `c`'s newest unread request.
    Refuse(u8),
    /// Fault: the server throttles client `c`'s oldest request.
    Throttle(u8),
    /// Fault: the server reaps the `i`-th empty container ([`Zk::reapable`]). About no
    /// client.
    Reap(u8),
    /// Client `c`'s lagging follower catches up by itself (not a fault: it always does,
    /// in time).
    CatchUp(u8),
}

impl Step {
    /// The client the step is about (`None` for a reap, which is about no client).
    pub fn client(self) -> Option<u8> {
        Some(match self {
            Step::Serve(c)
            | Step::Deliver(c)
            | Step::Tick(c)
            | Step::Reconnect(c)
            | Step::ExpireZombie(c)
            | Step::Drop(c)
            | Step::ReconnectStale(c)
            | Step::ExpireServer(c)
            | Step::ExpireLocal(c)
            | Step::Refuse(c)
            | Step::Throttle(c)
            | Step::CatchUp(c) => c,
            Step::Reap(_) => return None,
        })
    }

    /// Is this a fault (spending the budget)? Once none remain possible, the run must
    /// reach its end by the other steps.
    pub fn is_fault(self) -> bool {
        matches!(
            self,
            Step::Drop(_)
                | Step::ReconnectStale(_)
                | Step::ExpireServer(_)
                | Step::ExpireLocal(_)
                | Step::Refuse(_)
                | Step::Throttle(_)
                | Step::Reap(_)
        )
    }
}

impl<R: Recipe> ModelWorld<R> {
    /// The steps possible now: progress steps, and faults within `faults`.
    pub fn steps(&self, faults: &Faults, out: &mut Vec<Step>) {
        if faults.reaps > 0 {
            let n = self.zk.reapable().len().min(usize::from(u8::MAX));
            out.extend((0..n).map(|i| Step::Reap(i as u8)));
        }
        for (i, s) in self.zk.sessions.iter().enumerate() {
            let c = i as u8;
            match s.link {
                Link::Up => {
                    if !s.wire.is_empty() {
                        out.push(Step::Serve(c));
                        if faults.refusals > 0 {
                            out.push(Step::Refuse(c));
                            out.push(Step::Throttle(c));
                        }
                    }
                    if !s.out.is_empty() {
                        out.push(Step::Deliver(c));
                    }
                    if faults.drops > 0 && self.machines[i].is_some() {
                        out.push(Step::Drop(c));
                    }
                    if faults.expiries > 0 && self.machines[i].is_some() {
                        // The connection drops and the session expires: one fault.
                        out.push(Step::ExpireServer(c));
                        if s.zombie.is_none() {
                            out.push(Step::ExpireLocal(c));
                        }
                    }
                }
                Link::Down => {
                    out.push(Step::Reconnect(c));
                    if faults.stale > 0 && s.seen_zxid < self.zk.zxid {
                        out.push(Step::ReconnectStale(c));
                    }
                    if faults.expiries > 0 {
                        out.push(Step::ExpireServer(c));
                        if s.zombie.is_none() {
                            out.push(Step::ExpireLocal(c));
                        }
                    }
                }
                Link::Expired => out.push(Step::Reconnect(c)),
            }
            if s.zombie.is_some() {
                out.push(Step::ExpireZombie(c));
            }
            if s.link == Link::Up && (s.stale_at.is_some() || !s.held.is_empty()) {
                out.push(Step::CatchUp(c));
            }
            if self.deadline(i).is_some() {
                out.push(Step::Tick(c));
            }
        }
    }

    /// Takes one step, spending `faults`; returns what each client's machine did.
    pub fn take(
        &mut self,
        step: Step,
        faults: &mut Faults,
    ) -> Vec<(usize, Vec<Happened<R::Event>>)> {
        let one = |c: u8, h: Vec<Happened<R::Event>>| alloc::vec![(usize::from(c), h)];
        match step {
            Step::Serve(c) => {
                self.zk.serve(usize::from(c));
                // Notifications may have gone to any session; nothing is read yet.
                Vec::new()
            }
            Step::Deliver(c) => one(c, self.deliver(usize::from(c))),
            Step::Tick(c) => one(c, self.tick(usize::from(c))),
            Step::Reconnect(c) => one(c, self.reconnect(usize::from(c), false)),
            Step::ExpireZombie(c) => {
                self.expire_zombie(usize::from(c));
                Vec::new()
            }
            Step::Drop(c) => {
                faults.drops = faults.drops.saturating_sub(1);
                one(c, self.drop_connection(usize::from(c)))
            }
            Step::ReconnectStale(c) => {
                faults.stale = faults.stale.saturating_sub(1);
                one(c, self.reconnect(usize::from(c), true))
            }
            Step::ExpireServer(c) => {
                faults.expiries = faults.expiries.saturating_sub(1);
                let dropped = self.drop_connection(usize::from(c));
                self.expire_on_server(usize::from(c));
                one(c, dropped)
            }
            Step::ExpireLocal(c) => {
                faults.expiries = faults.expiries.saturating_sub(1);
                let mut happened = self.drop_connection(usize::from(c));
                happened.extend(self.expire_locally(usize::from(c)));
                one(c, happened)
            }
            Step::Refuse(c) => {
                faults.refusals = faults.refusals.saturating_sub(1);
                one(c, self.refuse(usize::from(c)))
            }
            Step::Throttle(c) => {
                faults.refusals = faults.refusals.saturating_sub(1);
                self.zk.throttle(usize::from(c));
                Vec::new()
            }
            Step::CatchUp(c) => {
                self.zk.catch_up(usize::from(c));
                Vec::new()
            }
            Step::Reap(i) => {
                faults.reaps = faults.reaps.saturating_sub(1);
                self.zk.reap(usize::from(i));
                // Notifications may have gone to any session; nothing is read yet.
                Vec::new()
            }
        }
    }
}
