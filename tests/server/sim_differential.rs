//! Keeps the simulator honest: the same random operation sequences run against a real
//! ZooKeeper 3.8, against `sim::SimServer` and against the embedded server (the same
//! model over TCP) must produce the same replies, Stats (zxids relative to a base,
//! times dropped, owners as session numbers) and notifications. `DIFF_SEQUENCES=n` runs more sequences; `DIFF_SEED=s` one seed.

use bytes::{Bytes, BytesMut};
use zk_recipes::proto::*;
use zk_recipes_sim::sim::{ConnId, ServerConfig, SimServer};
use zk_recipes_testing::{EmbeddedServer, RawClient, TestServer};

/// One session's view of a backend.
trait Backend {
    fn open(&mut self) -> usize;
    /// Sends a request, returns the reply; notifications that arrived are kept.
    fn call(&mut self, s: usize, req: &Request) -> (ReplyHeader, Option<Response>);
    /// Pings, collecting every notification queued before the ping's reply.
    fn drain(&mut self, s: usize) -> Vec<WatcherEvent>;
    fn session_id(&self, s: usize) -> i64;
    /// The server's container check runs now (only for the models).
    fn reap(&mut self) {}
}

struct Real {
    addr: std::net::SocketAddr,
    clients: Vec<Option<RawClient>>,
}

impl Backend for Real {
    fn open(&mut self) -> usize {
        self.clients
            .push(Some(RawClient::connect(self.addr, 30_000).unwrap()));
        self.clients.len() - 1
    }
    fn call(&mut self, s: usize, req: &Request) -> (ReplyHeader, Option<Response>) {
        self.clients[s].as_mut().unwrap().call(req).unwrap()
    }
    fn drain(&mut self, s: usize) -> Vec<WatcherEvent> {
        let c = self.clients[s].as_mut().unwrap();
        c.call(&Request::Ping).unwrap();
        c.take_events()
    }
    fn session_id(&self, s: usize) -> i64 {
        self.clients[s].as_ref().unwrap().session.session_id
    }
}

struct SimConn {
    conn: ConnId,
    xid: i32,
    decoder: FrameDecoder,
    events: Vec<WatcherEvent>,
    session_id: i64,
}

struct Sim {
    server: SimServer,
    conns: Vec<SimConn>,
    /// Server time, ms (moved on only to run the container check).
    now: i64,
}

impl Sim {
    fn send(&mut self, s: usize, xid: i32, req: &Request) -> Vec<Bytes> {
        let mut out = BytesMut::new();
        encode_request(&mut out, xid, req, DEFAULT_MAX_REQUEST).unwrap();
        let c = &mut self.conns[s];
        self.server.handle_bytes(0, c.conn, &out);
        let bytes = self.server.take_output(c.conn);
        let mut input = &bytes[..];
        let mut frames = Vec::new();
        while let Some(f) = c.decoder.decode(&mut input).unwrap() {
            frames.push(f);
        }
        frames
    }
}

impl Backend for Sim {
    fn open(&mut self) -> usize {
        let conn = self.server.connect(DEFAULT_MAX_REQUEST);
        let mut out = BytesMut::new();
        encode_connect(
            &mut out,
            &ConnectRequest {
                timeout_ms: 30_000,
                passwd: Bytes::from_static(&[0; 16]),
                ..Default::default()
            },
        );
        self.server.handle_bytes(0, conn, &out);
        let hello = self.server.take_output(conn);
        let mut decoder = FrameDecoder::new(DEFAULT_MAX_REPLY);
        let resp: ConnectResponse =
            decode_exact(decoder.decode(&mut &hello[..]).unwrap().unwrap()).unwrap();
        self.conns.push(SimConn {
            conn,
            xid: 1,
            decoder,
            events: Vec::new(),
            session_id: resp.session_id,
        });
        self.conns.len() - 1
    }
    fn call(&mut self, s: usize, req: &Request) -> (ReplyHeader, Option<Response>) {
        let xid = match req {
            Request::Ping => xid::PING,
            _ => {
                self.conns[s].xid += 1;
                self.conns[s].xid
            }
        };
        let frames = self.send(s, xid, req);
        let mut reply = None;
        for f in frames {
            let (h, body) = decode_reply(f).unwrap();
            if h.xid == xid::NOTIFICATION {
                self.conns[s].events.push(decode_exact(body).unwrap());
            } else {
                let r = (h.err == 0).then(|| Response::decode(req.op_code(), body).unwrap());
                reply = Some((h, r));
            }
        }
        reply.unwrap_or_else(|| panic!("model did not answer {req:?}"))
    }
    fn drain(&mut self, s: usize) -> Vec<WatcherEvent> {
        // Notifications for this connection that other sessions' ops queued.
        let bytes = self.server.take_output(self.conns[s].conn);
        let c = &mut self.conns[s];
        let mut input = &bytes[..];
        while let Some(f) = c.decoder.decode(&mut input).unwrap() {
            let (h, body) = decode_reply(f).unwrap();
            assert_eq!(h.xid, xid::NOTIFICATION);
            c.events.push(decode_exact(body).unwrap());
        }
        self.call(s, &Request::Ping);
        std::mem::take(&mut self.conns[s].events)
    }
    fn session_id(&self, s: usize) -> i64 {
        self.conns[s].session_id
    }
    fn reap(&mut self) {
        self.now += 1; // container_check_ms
        self.server.tick(self.now);
    }
}

impl Sim {
    fn new() -> Sim {
        Sim {
            server: SimServer::new(ServerConfig {
                container_check_ms: 1,
                ..ServerConfig::default()
            }),
            conns: Vec::new(),
            now: 0,
        }
    }
}

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
        items[self.below(items.len())]
    }
}

const PATHS: &[&str] = &[
    "/d/a", "/d/b", "/d/a/x", "/d/a/y", "/d/b/x", "/d/c", "/d/q-", "/d/a/q-",
];

fn acl(rng: &mut Rng) -> Vec<Acl> {
    match rng.below(8) {
        0 => vec![Acl::new(perms::READ, "world", "anyone")],
        1 => vec![Acl::new(
            perms::ALL,
            "digest",
            &zk_recipes::client::ops::digest_id("u", "p"),
        )],
        _ => Acl::open_unsafe(),
    }
}

fn create(rng: &mut Rng) -> CreateRequest {
    let mode = match rng.below(10) {
        0..=3 => CreateMode::Persistent,
        4 | 5 => CreateMode::Ephemeral,
        6 => CreateMode::PersistentSequential,
        7 => CreateMode::EphemeralSequential,
        _ => CreateMode::Container,
    };
    CreateRequest::new(
        rng.pick(PATHS),
        Bytes::from(vec![b'v'; rng.below(4)]),
        acl(rng),
        mode,
    )
}

fn version(rng: &mut Rng) -> i32 {
    if rng.below(3) == 0 {
        rng.below(3) as i32
    } else {
        -1
    }
}

fn random_request(rng: &mut Rng) -> Request {
    let path = rng.pick(PATHS).to_string();
    let watch = rng.below(2) == 0;
    match rng.below(17) {
        0..=2 => Request::Create(create(rng)),
        3 => Request::Create2(create(rng)),
        4 => Request::CreateTtl(CreateTtlRequest {
            path,
            data: Bytes::new(),
            acl: Acl::open_unsafe(),
            flags: CreateMode::PersistentWithTtl.to_i32(),
            ttl: 600_000,
        }),
        5 | 6 => Request::Delete(DeleteRequest {
            path,
            version: version(rng),
        }),
        7 | 8 => Request::SetData(SetDataRequest {
            path,
            data: Bytes::from_static(b"new"),
            version: version(rng),
        }),
        9 => Request::GetData(PathWatch { path, watch }),
        10 => Request::Exists(PathWatch { path, watch }),
        11 => Request::GetChildren2(PathWatch { path, watch }),
        12 => Request::GetChildren(PathWatch {
            path: "/d".into(),
            watch,
        }),
        13 => Request::Multi(
            (0..1 + rng.below(3))
                .map(|_| match rng.below(4) {
                    0 => MultiOp::Create(create(rng)),
                    1 => MultiOp::Delete(DeleteRequest {
                        path: rng.pick(PATHS).into(),
                        version: version(rng),
                    }),
                    2 => MultiOp::SetData(SetDataRequest {
                        path: rng.pick(PATHS).into(),
                        data: Bytes::from_static(b"m"),
                        version: version(rng),
                    }),
                    _ => MultiOp::Check(CheckVersionRequest {
                        path: rng.pick(PATHS).into(),
                        version: version(rng),
                    }),
                })
                .collect(),
        ),
        14 => Request::MultiRead(vec![
            ReadOp::GetData(PathWatch {
                path: path.clone(),
                watch: false,
            }),
            ReadOp::GetChildren(PathWatch { path, watch: false }),
        ]),
        15 => Request::GetAllChildrenNumber(PathRequest { path: "/d".into() }),
        _ => Request::GetEphemerals(PathRequest { path: "/d".into() }),
    }
}

/// Makes replies comparable: zxids relative to `base`, times dropped, owners as
/// session numbers, unordered lists sorted.
struct Norm<'a> {
    base: i64,
    sessions: &'a [i64],
}

impl Norm<'_> {
    fn zxid(&self, z: i64) -> i64 {
        if z <= 0 {
            z
        } else {
            z - self.base
        }
    }
    fn stat(&self, s: &Stat) -> Stat {
        let owner = match s.ephemeral_owner {
            0 => 0,
            o => self
                .sessions
                .iter()
                .position(|x| *x == o)
                .map(|i| i as i64 + 1)
                .unwrap_or(-1),
        };
        Stat {
            czxid: self.zxid(s.czxid),
            mzxid: self.zxid(s.mzxid),
            pzxid: self.zxid(s.pzxid),
            ctime: 0,
            mtime: 0,
            ephemeral_owner: owner,
            ..*s
        }
    }
    fn response(&self, r: Response) -> Response {
        match r {
            Response::PathStat { path, stat } => Response::PathStat {
                path,
                stat: self.stat(&stat),
            },
            Response::Stat(s) => Response::Stat(self.stat(&s)),
            Response::Data { data, stat } => Response::Data {
                data,
                stat: self.stat(&stat),
            },
            Response::Children(mut c) => {
                c.sort();
                Response::Children(c)
            }
            Response::Children2 { mut children, stat } => {
                children.sort();
                Response::Children2 {
                    children,
                    stat: self.stat(&stat),
                }
            }
            Response::Multi(results) => Response::Multi(
                results
                    .into_iter()
                    .map(|r| match r {
                        MultiResult::Create2 { path, stat } => MultiResult::Create2 {
                            path,
                            stat: self.stat(&stat),
                        },
                        MultiResult::SetData(s) => MultiResult::SetData(self.stat(&s)),
                        MultiResult::GetData { data, stat } => MultiResult::GetData {
                            data,
                            stat: self.stat(&stat),
                        },
                        MultiResult::GetChildren(mut c) => {
                            c.sort();
                            MultiResult::GetChildren(c)
                        }
                        other => other,
                    })
                    .collect(),
            ),
            other => other,
        }
    }
}

type Step = (
    String,
    Option<(i32, i64, Option<Response>)>,
    Vec<Vec<(i32, String)>>,
);

/// Runs one sequence; returns a transcript of normalized steps.
fn run(backend: &mut dyn Backend, seed: u64, ops: usize) -> Vec<Step> {
    run_with(backend, seed, ops, random_request, false)
}

/// [`run`] with requests from `next`.
fn run_with(
    backend: &mut dyn Backend,
    seed: u64,
    ops: usize,
    next: fn(&mut Rng) -> Request,
    reaps: bool,
) -> Vec<Step> {
    let mut rng = Rng(seed | 1);
    let mut sessions: Vec<usize> = (0..3).map(|_| backend.open()).collect();
    // Session 0 authenticates so digest ACLs have someone who may pass them.
    let auth = Request::Auth(AuthPacket {
        auth_type: 0,
        scheme: "digest".into(),
        auth: Bytes::from_static(b"u:p"),
    });
    backend.call(sessions[0], &auth);
    let (h, _) = backend.call(
        sessions[0],
        &Request::Create(CreateRequest::new(
            "/d",
            Bytes::new(),
            Acl::open_unsafe(),
            CreateMode::Persistent,
        )),
    );
    assert_eq!(h.err, 0);
    let base = h.zxid;
    let mut ids: Vec<i64> = sessions.iter().map(|s| backend.session_id(*s)).collect();
    let mut transcript = Vec::new();
    for _ in 0..ops {
        let who = rng.below(sessions.len());
        let (label, reply) = if reaps && rng.below(12) == 0 {
            backend.reap();
            ("container check".to_string(), None)
        } else if rng.below(40) == 0 {
            // Close a session and open a replacement.
            let (h, _) = backend.call(sessions[who], &Request::CloseSession);
            let n = backend.open();
            sessions[who] = n;
            ids.push(backend.session_id(n));
            (format!("s{who} closeSession"), Some((h.err, 0, None)))
        } else {
            let req = next(&mut rng);
            let (h, r) = backend.call(sessions[who], &req);
            let norm = Norm {
                base,
                sessions: &ids,
            };
            (
                format!("s{who} {req:?}"),
                Some((h.err, norm.zxid(h.zxid), r.map(|r| norm.response(r)))),
            )
        };
        let mut notes: Vec<Vec<(i32, String)>> = Vec::new();
        for s in &sessions {
            let mut n: Vec<(i32, String)> = backend
                .drain(*s)
                .into_iter()
                .map(|e| (e.event_type, e.path))
                .collect();
            if label.ends_with("closeSession") {
                n.sort(); // ephemerals of a closed session go in Java hash-set order
            }
            notes.push(n);
        }
        transcript.push((label, reply, notes));
    }
    transcript
}

/// The same sequence against a real server, the model in this process, and the model
/// served over TCP by the embedded server (both TCP backends through the same raw
/// client): every step alike.
fn compare(seed: u64, ops: usize) {
    let server = TestServer::start().unwrap();
    let mut real = Real {
        addr: server.addr(),
        clients: Vec::new(),
    };
    let embedded_server = EmbeddedServer::start().unwrap();
    let mut embedded = Real {
        addr: embedded_server.addr(),
        clients: Vec::new(),
    };
    let mut sim = Sim::new();
    let a = run(&mut real, seed, ops);
    let b = run(&mut sim, seed, ops);
    let c = run(&mut embedded, seed, ops);
    for (other, b) in [("model", &b), ("embedded server over TCP", &c)] {
        for (i, (x, y)) in a.iter().zip(b).enumerate() {
            if x != y {
                for (j, step) in a.iter().take(i).enumerate() {
                    eprintln!("{j}: {step:?}");
                }
            }
            assert_eq!(
                x, y,
                "seed {seed}: step {i} differs (left: real ZooKeeper, right: {other})"
            );
        }
        assert_eq!(a.len(), b.len());
    }
}

#[test]
fn model_matches_a_real_server() {
    if let Ok(seed) = std::env::var("DIFF_SEED") {
        return compare(seed.parse().unwrap(), 80);
    }
    let n: u64 = std::env::var("DIFF_SEQUENCES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(12);
    for seed in 1..=n {
        compare(seed * 7919, 80);
    }
}

// ----- the compact model (`testkit::zk`, used by the harnesses and the model checker)
// against the simulator's server: the same rules, checked by the same sequences -----

use zk_recipes_sim::testkit::zk::{Outbound, Zk};

/// [`Zk`] as a backend: each call is sent, served at once and its output read.
struct Model {
    zk: Zk,
    /// Backend session → model session index.
    sessions: Vec<usize>,
    events: Vec<Vec<WatcherEvent>>,
    /// The watches (by the request that set them) behind each session's last event.
    fired: Vec<Vec<u64>>,
    op: u64,
}

impl Model {
    fn read(&mut self, s: usize) -> Option<(i64, Result<Response, zk_recipes::error::Error>)> {
        let mut reply = None;
        let idx = self.sessions[s];
        while let Some((o, zxid)) = self.zk.sessions[idx].out.pop_front() {
            match o {
                Outbound::Reply(_, r) => reply = Some((zxid, r)),
                Outbound::Watch(op, ev) => {
                    let e = WatcherEvent {
                        event_type: ev.event_type.to_i32(),
                        state: 3,
                        path: ev.path,
                    };
                    // The model keeps a watch per request that set it; the server one
                    // per connection, and it fires once for all of them: the same event
                    // again for another watch is the same change (a watch that hears
                    // it again heard a second change).
                    if self.events[s].last() == Some(&e) && !self.fired[s].contains(&op) {
                        self.fired[s].push(op);
                    } else {
                        self.events[s].push(e);
                        self.fired[s] = vec![op];
                    }
                }
            }
        }
        reply
    }
}

impl Backend for Model {
    fn open(&mut self) -> usize {
        let idx = self.zk.open_session();
        self.zk.zxid += 1; // createSession is a transaction
        self.sessions.push(idx);
        self.events.push(Vec::new());
        self.fired.push(Vec::new());
        self.sessions.len() - 1
    }
    fn call(&mut self, s: usize, req: &Request) -> (ReplyHeader, Option<Response>) {
        let idx = self.sessions[s];
        match req {
            Request::Auth(_) => {
                let h = ReplyHeader {
                    xid: 0,
                    zxid: 0,
                    err: 0,
                };
                return (h, Some(Response::Empty));
            }
            Request::CloseSession => {
                self.zk.close_session(idx);
                let h = ReplyHeader {
                    xid: 0,
                    zxid: self.zk.zxid,
                    err: 0,
                };
                return (h, None);
            }
            _ => {}
        }
        self.op += 1;
        self.zk.sessions[idx].wire.push_back((self.op, req.clone()));
        self.zk.serve(idx);
        let (zxid, r) = self.read(s).expect("the model answers every request");
        match r {
            Ok(r) => (
                ReplyHeader {
                    xid: 0,
                    zxid,
                    err: 0,
                },
                Some(r),
            ),
            Err(zk_recipes::error::Error::Server(code)) => (
                ReplyHeader {
                    xid: 0,
                    zxid,
                    err: code.to_i32(),
                },
                None,
            ),
            Err(e) => panic!("the model failed {req:?} with {e:?}"),
        }
    }
    fn drain(&mut self, s: usize) -> Vec<WatcherEvent> {
        self.read(s);
        std::mem::take(&mut self.events[s])
    }
    fn session_id(&self, s: usize) -> i64 {
        self.zk.sessions[self.sessions[s]].id
    }
    fn reap(&mut self) {
        self.zk.reap_all();
    }
}

/// Paths a watch request names: the nodes, their parent, the root.
const WATCHED: &[&str] = &["/", "/d", "/d/a", "/d/b", "/d/a/x", "/d/c"];

/// A persistent (recursive) watch added (by addWatch, or re-armed by setWatches2 as
/// after a reconnect), or a check or removal of watches of a type.
fn watch_request(rng: &mut Rng) -> Request {
    let path = rng.pick(WATCHED).to_string();
    match rng.below(6) {
        5 => {
            let mut w = SetWatches2::default();
            if rng.below(2) == 0 {
                w.persistent_watches.push(path);
            } else {
                w.persistent_recursive_watches.push(path);
            }
            Request::SetWatches2(w)
        }
        0 | 1 => Request::AddWatch(AddWatchRequest {
            path,
            mode: if rng.below(2) == 0 {
                AddWatchMode::Persistent
            } else {
                AddWatchMode::PersistentRecursive
            }
            .to_i32(),
        }),
        n => {
            let r = WatchesRequest {
                path,
                watcher_type: [
                    WatcherType::Children,
                    WatcherType::Data,
                    WatcherType::Any,
                    WatcherType::Persistent,
                    WatcherType::PersistentRecursive,
                ][rng.below(5)]
                .to_i32(),
            };
            if n == 2 {
                Request::CheckWatches(r)
            } else {
                Request::RemoveWatches(r)
            }
        }
    }
}

/// What the compact model covers: open ACLs, no TTL nodes, no server-wide counts; and
/// watch requests (persistent watches, their checks and removal).
fn compact_request(rng: &mut Rng) -> Request {
    if rng.below(6) == 0 {
        return watch_request(rng);
    }
    loop {
        let mut r = random_request(rng);
        let open = |c: &mut CreateRequest| c.acl = Acl::open_unsafe();
        match &mut r {
            Request::CreateTtl(_)
            | Request::GetAllChildrenNumber(_)
            | Request::GetEphemerals(_) => continue,
            Request::Create(c) | Request::Create2(c) => open(c),
            Request::Multi(ops) => {
                for op in ops {
                    if let MultiOp::Create(c) = op {
                        open(c);
                    }
                }
            }
            _ => {}
        }
        return r;
    }
}

#[test]
fn the_compact_model_matches_the_simulator() {
    let n: u64 = std::env::var("DIFF_SEQUENCES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(300);
    for seed in 1..=n {
        let seed = seed * 7919;
        let mut sim = Sim::new();
        let mut model = Model {
            zk: Zk::new(0),
            sessions: Vec::new(),
            events: Vec::new(),
            fired: Vec::new(),
            op: 0,
        };
        let a = run_with(&mut sim, seed, 80, compact_request, true);
        let b = run_with(&mut model, seed, 80, compact_request, true);
        for (i, (x, y)) in a.iter().zip(&b).enumerate() {
            if x != y {
                for (j, step) in a.iter().take(i).enumerate() {
                    eprintln!("{j}: {step:?}");
                }
            }
            assert_eq!(
                x, y,
                "seed {seed}: step {i} differs (left: the simulator, right: the compact model)"
            );
        }
    }
}

// ----- what the model does not model, answered as a real server with the feature off -----

/// Requests about what neither the model nor a default 3.8 standalone server does
/// (quorum reconfiguration, SASL, quotas' enforcement, read-only mode, x509), and the
/// system nodes: the embedded server must answer each as the real server does. One
/// connection per group, since some answers close it.
fn unmodelled(addr: std::net::SocketAddr) -> Vec<String> {
    let mut log = Vec::new();
    let mut c = RawClient::connect(addr, 10_000).unwrap();
    let path = |p: &str| PathWatch {
        path: p.into(),
        watch: false,
    };
    let requests = [
        Request::GetChildren(path("/zookeeper")),
        Request::Exists(path("/zookeeper")),
        // getConfig: the config node (empty: no dynamic config in standalone mode).
        Request::GetData(path("/zookeeper/config")),
        Request::GetAcl(PathRequest {
            path: "/zookeeper/config".into(),
        }),
        Request::SetData(SetDataRequest {
            path: "/zookeeper/config".into(),
            data: Bytes::from_static(b"server.1=x"),
            version: -1,
        }),
        Request::Delete(DeleteRequest {
            path: "/zookeeper/config".into(),
            version: -1,
        }),
        // Quotas: the node is there and writable; nothing is enforced.
        Request::GetData(path("/zookeeper/quota")),
        Request::Create(CreateRequest::new(
            "/zookeeper/quota/app",
            Bytes::new(),
            Acl::open_unsafe(),
            CreateMode::Persistent,
        )),
        Request::GetAllChildrenNumber(PathRequest { path: "/".into() }),
        // Reconfiguration is off (reconfigEnabled=false).
        Request::Reconfig(ReconfigRequest {
            joining_servers: "server.2=127.0.0.1:2888:3888".into(),
            leaving_servers: String::new(),
            new_members: String::new(),
            cur_config_id: -1,
        }),
        // SASL with no SASL set up: every token answered with an empty one.
        Request::Sasl(SaslToken {
            token: Bytes::from_static(b"token"),
        }),
        Request::Auth(AuthPacket {
            auth_type: 0,
            scheme: "ip".into(),
            auth: Bytes::new(),
        }),
        Request::WhoAmI,
    ];
    for r in &requests {
        log.push(format!(
            "{:?} -> {:?}",
            r.op_code(),
            c.call(r).map_err(|e| e.kind())
        ));
    }
    // Authentication schemes the server has no provider set up for: refused, closed.
    for scheme in ["sasl", "x509", "kerberos"] {
        let mut c = RawClient::connect(addr, 10_000).unwrap();
        let auth = Request::Auth(AuthPacket {
            auth_type: 0,
            scheme: scheme.into(),
            auth: Bytes::from_static(b"x"),
        });
        let answer = c.call(&auth).map(|(h, _)| h.err).map_err(|e| e.kind());
        let after = c.call(&Request::Ping).is_ok();
        log.push(format!("auth {scheme} -> {answer:?}, still open: {after}"));
    }
    // A client that would accept a read-only server gets a read-write session.
    let ro = RawClient::handshake(
        addr,
        ConnectRequest {
            timeout_ms: 10_000,
            passwd: Bytes::from_static(&[0; 16]),
            read_only: true,
            ..Default::default()
        },
    )
    .unwrap();
    log.push(format!(
        "read-only handshake -> timeout {} read_only {}",
        ro.session.timeout_ms, ro.session.read_only
    ));
    log
}

#[test]
fn what_is_not_modelled_is_answered_as_a_real_server_with_it_off() {
    let server = TestServer::start().unwrap();
    let real = unmodelled(server.addr());
    let embedded_server = EmbeddedServer::start().unwrap();
    let embedded = unmodelled(embedded_server.addr());
    for (i, (a, b)) in real.iter().zip(&embedded).enumerate() {
        assert_eq!(
            a, b,
            "step {i} (left: real ZooKeeper, right: the embedded server)"
        );
    }
    assert_eq!(real.len(), embedded.len());
}
