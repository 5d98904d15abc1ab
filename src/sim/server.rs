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
//!
//! Not modelled: quorum, read-only mode, SASL, quotas, reconfig (answered
//! `ReconfigDisabled`), getACL's digest masking, and the 3.8 quirk where a standard watch
//! turns a persistent watch on the same path into a one-shot.

use alloc::collections::{BTreeMap, BTreeSet};
use alloc::format;
use alloc::string::{String, ToString};
use alloc::vec::Vec;
use bytes::{Bytes, BytesMut};

use crate::client::ops::digest_id;
use crate::proto::*;

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
}

impl Default for ServerConfig {
    fn default() -> Self {
        // As the test support starts real servers: tickTime 2000, min 1000.
        ServerConfig {
            min_session_timeout_ms: 1000,
            max_session_timeout_ms: 40_000,
            ttl_enabled: true,
            container_check_ms: 60_000,
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
pub struct SimServer {
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
    /// Frames handled (requests, pings, handshakes), for benchmarks.
    pub requests_handled: u64,
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

impl SimServer {
    /// A server with `/` and `/zookeeper` (which, as in the real server, does not count
    /// as a child create of the root).
    pub fn new(config: ServerConfig) -> SimServer {
        let mut nodes = BTreeMap::new();
        let mut root = root_node();
        root.children.insert("zookeeper".into());
        nodes.insert("/".to_string(), root);
        nodes.insert("/zookeeper".to_string(), root_node());
        SimServer {
            config,
            tree: Tree { nodes },
            zxid: 0,
            now_ms: 0,
            sessions: BTreeMap::new(),
            next_session: 0x0100_0000_0000_0000,
            conns: BTreeMap::new(),
            next_conn: 1,
            watches: Watches::default(),
            last_reap_ms: 0,
            dirty: Vec::new(),
            requests_handled: 0,
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
            },
        );
        id
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
            self.zxid += 1;
            self.end_session(id);
        }
    }

    /// Advances the server clock: expires silent sessions, reaps containers and TTLs.
    pub fn tick(&mut self, now_ms: i64) {
        self.now_ms = self.now_ms.max(now_ms);
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
        self.sessions
            .values()
            .map(|s| s.last_heard_ms + i64::from(s.timeout_ms) + 1)
            .min()
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
    pub fn handle_bytes(&mut self, now_ms: i64, conn: ConnId, mut bytes: &[u8]) {
        self.now_ms = self.now_ms.max(now_ms);
        while !bytes.is_empty() {
            let Some(c) = self.conns.get_mut(&conn) else {
                return;
            };
            if c.closed {
                return;
            }
            let frame = match c.decoder.decode(&mut bytes) {
                Ok(Some(f)) => f,
                Ok(None) => return,
                Err(_) => return self.close_conn(conn), // "Len error": close, no answer
            };
            self.requests_handled += 1;
            if c.session.is_none() {
                self.handshake(conn, frame);
            } else {
                self.request(conn, frame);
            }
        }
    }

    fn close_conn(&mut self, conn: ConnId) {
        if let Some(c) = self.conns.get_mut(&conn) {
            c.closed = true;
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
        self.dirty.push(conn);
        if answer.is_none() {
            c.closed = true;
        }
    }

    fn reply(&mut self, conn: ConnId, xid: i32, zxid: i64, result: &OpResult) {
        let Some(c) = self.conns.get_mut(&conn) else {
            return;
        };
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
                self.reply(
                    conn,
                    header.xid,
                    self.zxid,
                    &Err(ErrorCode::MarshallingError),
                );
                return;
            }
        };
        match request {
            Request::Ping => self.reply(conn, header.xid, self.zxid, &Ok(Response::Empty)),
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
                } else {
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
                self.reply(conn, header.xid, self.zxid, &Ok(Response::Empty));
            }
            Request::SetWatches2(w) => {
                self.set_watches(conn, &w);
                self.reply(conn, header.xid, self.zxid, &Ok(Response::Empty));
            }
            request if is_write(&request) => {
                self.zxid += 1; // failed writes consume a zxid too
                let zxid = self.zxid;
                let mut changes = Vec::new();
                let result = self.write(conn, sid, request, zxid, &mut changes);
                self.fire(&changes);
                self.reply(conn, header.xid, zxid, &result);
            }
            request => {
                let result = self.read(conn, sid, request);
                self.reply(conn, header.xid, self.zxid, &result);
            }
        }
    }

    fn end_session(&mut self, id: i64) {
        let Some(session) = self.sessions.remove(&id) else {
            return;
        };
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

    fn read(&mut self, conn: ConnId, sid: i64, request: Request) -> OpResult {
        let two = matches!(request, Request::GetChildren2(_));
        match request {
            Request::Exists(r) => {
                if r.watch {
                    add(&mut self.watches.data, &r.path, conn);
                }
                self.tree
                    .nodes
                    .get(&r.path)
                    .map(|n| Response::Stat(n.visible_stat()))
                    .ok_or(ErrorCode::NoNode)
            }
            Request::GetData(r) => {
                let data = self.get_data(conn, &r.path)?;
                if r.watch {
                    add(&mut self.watches.data, &r.path, conn);
                }
                Ok(data)
            }
            Request::GetChildren(r) | Request::GetChildren2(r) => {
                let node = self.tree.nodes.get(&r.path).ok_or(ErrorCode::NoNode)?;
                if !self.allowed(conn, &node.acl, perms::READ) {
                    return Err(ErrorCode::NoAuth);
                }
                let children: Vec<String> = node.children.iter().cloned().collect();
                let stat = node.visible_stat();
                if r.watch {
                    add(&mut self.watches.child, &r.path, conn);
                }
                Ok(if two {
                    Response::Children2 { children, stat }
                } else {
                    Response::Children(children)
                })
            }
            Request::GetAcl(r) => {
                let node = self.tree.nodes.get(&r.path).ok_or(ErrorCode::NoNode)?;
                if !self.allowed(conn, &node.acl, perms::READ | perms::ADMIN) {
                    return Err(ErrorCode::NoAuth);
                }
                Ok(Response::Acl {
                    acl: node.acl.clone(),
                    stat: node.visible_stat(),
                })
            }
            Request::Sync(r) => Ok(Response::Path(r.path)),
            Request::MultiRead(ops) => {
                let mut results = Vec::new();
                for op in ops {
                    let r = match op {
                        ReadOp::GetData(r) => match self.get_data(conn, &r.path) {
                            Ok(Response::Data { data, stat }) => {
                                MultiResult::GetData { data, stat }
                            }
                            Ok(_) => MultiResult::Error(ErrorCode::SystemError),
                            Err(e) => MultiResult::Error(e),
                        },
                        ReadOp::GetChildren(r) => match self.tree.nodes.get(&r.path) {
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
            Request::AddWatch(r) => {
                match AddWatchMode::from_i32(r.mode) {
                    Some(AddWatchMode::Persistent) => {
                        add(&mut self.watches.persistent, &r.path, conn)
                    }
                    Some(AddWatchMode::PersistentRecursive) => {
                        add(&mut self.watches.recursive, &r.path, conn)
                    }
                    None => return Err(ErrorCode::BadArguments),
                }
                Ok(Response::WatchAdded)
            }
            Request::CheckWatches(r) => self.watch_tables(conn, &r, false),
            Request::RemoveWatches(r) => self.watch_tables(conn, &r, true),
            Request::GetEphemerals(r) => {
                let session = self.sessions.get(&sid).ok_or(ErrorCode::SessionExpired)?;
                let prefix = if r.path == "/" { "" } else { r.path.as_str() };
                Ok(Response::Children(
                    session
                        .ephemerals
                        .iter()
                        .filter(|p| p.starts_with(prefix))
                        .cloned()
                        .collect(),
                ))
            }
            Request::GetAllChildrenNumber(r) => {
                if !self.tree.nodes.contains_key(&r.path) {
                    return Err(ErrorCode::NoNode);
                }
                let prefix = if r.path == "/" {
                    String::from("/")
                } else {
                    format!("{}/", r.path)
                };
                let n = self
                    .tree
                    .nodes
                    .range(prefix.clone()..)
                    .take_while(|(p, _)| p.starts_with(&prefix))
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
            Request::Reconfig(_) => Err(ErrorCode::ReconfigDisabled),
            _ => Err(ErrorCode::Unimplemented),
        }
    }

    fn get_data(&self, conn: ConnId, path: &str) -> OpResult {
        let node = self.tree.nodes.get(path).ok_or(ErrorCode::NoNode)?;
        if !self.allowed(conn, &node.acl, perms::READ) {
            return Err(ErrorCode::NoAuth);
        }
        Ok(Response::Data {
            data: node.data.clone(),
            stat: node.visible_stat(),
        })
    }
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
    )
}

impl SimServer {
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

    fn set_watches(&mut self, conn: ConnId, w: &SetWatches2) {
        let mut notes: Vec<(String, EventType)> = Vec::new();
        for path in &w.data_watches {
            match self.tree.nodes.get(path) {
                None => notes.push((path.clone(), EventType::NodeDeleted)),
                Some(n) if n.stat.mzxid > w.relative_zxid => {
                    notes.push((path.clone(), EventType::NodeDataChanged))
                }
                Some(_) => add(&mut self.watches.data, path, conn),
            }
        }
        for path in &w.exist_watches {
            if self.tree.nodes.contains_key(path) {
                notes.push((path.clone(), EventType::NodeCreated));
            } else {
                add(&mut self.watches.data, path, conn);
            }
        }
        for path in &w.child_watches {
            match self.tree.nodes.get(path) {
                None => notes.push((path.clone(), EventType::NodeDeleted)),
                Some(n) if n.stat.pzxid > w.relative_zxid => {
                    notes.push((path.clone(), EventType::NodeChildrenChanged))
                }
                Some(_) => add(&mut self.watches.child, path, conn),
            }
        }
        for path in &w.persistent_watches {
            add(&mut self.watches.persistent, path, conn);
        }
        for path in &w.persistent_recursive_watches {
            add(&mut self.watches.recursive, path, conn);
        }
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
        (0..count)
            .map(|i| {
                MultiResult::Error(match i.cmp(&at) {
                    core::cmp::Ordering::Less => ErrorCode::Ok,
                    core::cmp::Ordering::Equal => code,
                    core::cmp::Ordering::Greater => ErrorCode::RuntimeInconsistency,
                })
            })
            .collect()
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
