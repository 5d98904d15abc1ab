//! The server model (`zk_recipes_server::model::ServerModel`, what the embedded server
//! serves) fed a schedule decoded from bytes: connections opened and dropped, handshakes
//! (new sessions, resumed ones, wrong passwords, a client from the future), well-formed
//! requests of every kind, raw bytes (garbage, bad lengths, unknown opcodes, half
//! frames), time jumps, and the fault controls (expiry, refusals, lagging followers,
//! the container check). Checked after every step:
//!
//! * nothing panics, whatever the bytes;
//! * everything the server writes is well-formed: a connection's first frame is a
//!   handshake answer, every later one a reply header (and a notification decodes);
//! * on a connection fed only well-formed requests, replies come in request order
//!   (FIFO, as ZooKeeper answers a session), one per request;
//! * a closed connection says nothing more, and the server holds no more connections
//!   and sessions than were opened.

use alloc::collections::VecDeque;
use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;
use bytes::{Bytes, BytesMut};

use zk_recipes::proto::*;
use zk_recipes_server::model::{ConnId, ServerConfig, ServerModel};

use super::session::Input;

/// The client side of one connection, as the harness sees it.
struct Client {
    conn: ConnId,
    decoder: FrameDecoder,
    /// The handshake answer has come.
    hello: bool,
    /// Only well-formed frames were written on it (so replies must follow requests).
    clean: bool,
    /// xids of requests sent and not yet answered, oldest first.
    expect: VecDeque<i32>,
    next_xid: i32,
    closed: bool,
}

const PATHS: [&str; 6] = ["/a", "/a/b", "/a/b/c", "/c", "/", "/zookeeper"];

stats! {
    /// What a schedule made the server do (so a test can see the harness gets past the
    /// handshake).
    pub struct ServerInputStats {
        /// Handshake answers.
        pub handshakes: usize,
        /// Replies checked against the request order.
        pub ordered_replies: usize,
        /// Watch notifications.
        pub notifications: usize,
        /// Connections the server closed.
        pub closed_by_server: usize,
    }
}

/// Runs one schedule; `Err` names the first broken rule.
pub fn run(bytes: &[u8]) -> Result<(), String> {
    run_with_stats(bytes).map(drop)
}

/// [`run`], with what the schedule made the server do.
pub fn run_with_stats(bytes: &[u8]) -> Result<ServerInputStats, String> {
    let mut stats = ServerInputStats::default();
    let mut input = Input(bytes);
    let mut server = ServerModel::new(ServerConfig {
        container_check_ms: 500,
        snapshot_every_ms: 50,
        ..ServerConfig::default()
    });
    let mut now: i64 = 0;
    let mut clients: Vec<Client> = Vec::new();
    let mut sessions: Vec<(i64, Bytes)> = Vec::new();
    let mut opened = 0usize;
    while let Some(op) = input.byte() {
        let pick = usize::from(input.or0());
        match op % 16 {
            0 if clients.iter().filter(|c| !c.closed).count() < 4 => {
                let conn = if pick % 4 == 0 {
                    let lag = zk_recipes_server::model::Lag {
                        catch_up_ms: i64::from(input.or0()) * 10,
                        pick: u64::from(input.or0()),
                    };
                    server.connect_lagging(DEFAULT_MAX_REQUEST, lag)
                } else {
                    server.connect(DEFAULT_MAX_REQUEST)
                };
                opened += 1;
                clients.push(Client {
                    conn,
                    decoder: FrameDecoder::new(DEFAULT_MAX_REPLY),
                    hello: false,
                    clean: true,
                    expect: VecDeque::new(),
                    next_xid: 1,
                    closed: false,
                });
                if pick % 8 != 0 {
                    // Mostly a new session at once (the explicit handshake below
                    // tries the odd ones).
                    let mut out = BytesMut::new();
                    encode_connect(
                        &mut out,
                        &ConnectRequest {
                            timeout_ms: 10_000,
                            passwd: Bytes::from_static(&[0; 16]),
                            ..Default::default()
                        },
                    );
                    server.handle_bytes(now, conn, &out);
                }
            }
            1 => {
                let Some(c) = pick_client(&mut clients, pick) else {
                    continue;
                };
                let resume = sessions.get(usize::from(input.or0()) % (sessions.len() + 1));
                let (session_id, passwd) = match resume {
                    Some((id, pw)) if pick % 3 != 0 => (*id, pw.clone()),
                    Some((id, _)) => (*id, Bytes::from_static(&[9; 16])),
                    None => (0, Bytes::from_static(&[0; 16])),
                };
                let req = ConnectRequest {
                    timeout_ms: i32::from(input.or0()) * 100,
                    session_id,
                    passwd,
                    last_zxid_seen: if pick % 7 == 0 { i64::MAX } else { 0 },
                    ..Default::default()
                };
                let mut out = BytesMut::new();
                encode_connect(&mut out, &req);
                c.clean &= !c.hello; // a second handshake is not a request
                server.handle_bytes(now, c.conn, &out);
            }
            2..=8 => {
                let Some(c) = pick_client(&mut clients, pick) else {
                    continue;
                };
                let req = request(&mut input);
                let xid = match req {
                    Request::Ping => xid::PING,
                    Request::Auth(_) => xid::AUTH,
                    _ => {
                        c.next_xid += 1;
                        c.next_xid
                    }
                };
                let mut out = BytesMut::new();
                if encode_request(&mut out, xid, &req, DEFAULT_MAX_REQUEST).is_err() {
                    continue;
                }
                if c.hello {
                    c.expect.push_back(xid);
                } else {
                    c.clean = false; // before the handshake: it is read as one
                }
                server.handle_bytes(now, c.conn, &out);
            }
            9 => {
                let Some(c) = pick_client(&mut clients, pick) else {
                    continue;
                };
                let n = usize::from(input.or0());
                let raw = input.take(n);
                c.clean = false;
                server.handle_bytes(now, c.conn, raw);
            }
            10 => {
                now += i64::from(input.or0()) * 37;
                server.tick(now);
            }
            11 => {
                let Some(c) = pick_client(&mut clients, pick) else {
                    continue;
                };
                c.closed = true;
                server.disconnect(c.conn);
            }
            12 => {
                if let Some((id, _)) = sessions.get(pick % sessions.len().max(1)) {
                    server.expire_session(*id);
                }
            }
            13 => {
                let code = [
                    ErrorCode::Throttled,
                    ErrorCode::SystemError,
                    ErrorCode::ConnectionLoss,
                    ErrorCode::SessionMoved,
                ][pick % 4];
                server.fail_requests(u32::from(input.or0() % 4), code);
            }
            14 => {
                if let Some((id, _)) = sessions.get(pick % sessions.len().max(1)) {
                    server.lag_session(*id, i64::from(input.or0()) * 20);
                }
            }
            15 => server.reap_now(now),
            _ => {}
        }
        check(&mut server, &mut clients, &mut sessions, &mut stats)?;
        let held = server.stats();
        if held.connections > opened || held.sessions > opened {
            return Err(format!(
                "{} connections and {} sessions from {opened} opened",
                held.connections, held.sessions
            ));
        }
    }
    Ok(stats)
}

/// An open client, by a fuzzer's pick.
fn pick_client(clients: &mut [Client], pick: usize) -> Option<&mut Client> {
    let open: Vec<usize> = (0..clients.len()).filter(|&i| !clients[i].closed).collect();
    let i = *open.get(pick % open.len().max(1))?;
    clients.get_mut(i)
}

/// Reads what the server wrote to every client and checks it.
fn check(
    server: &mut ServerModel,
    clients: &mut [Client],
    sessions: &mut Vec<(i64, Bytes)>,
    stats: &mut ServerInputStats,
) -> Result<(), String> {
    for c in clients.iter_mut() {
        if c.closed {
            if !server.take_output(c.conn).is_empty() {
                return Err(format!("conn {} spoke after it was dropped", c.conn));
            }
            continue;
        }
        let out = server.take_output(c.conn);
        let mut rest = &out[..];
        loop {
            let frame = match c.decoder.decode(&mut rest) {
                Ok(Some(f)) => f,
                Ok(None) => break,
                Err(e) => return Err(format!("conn {}: a malformed frame: {e:?}", c.conn)),
            };
            if !c.hello {
                let hello: ConnectResponse = decode_exact(frame)
                    .map_err(|e| format!("conn {}: a bad handshake answer: {e:?}", c.conn))?;
                c.hello = true;
                stats.handshakes += 1;
                if hello.session_id != 0 && !sessions.iter().any(|(id, _)| *id == hello.session_id)
                {
                    sessions.push((hello.session_id, hello.passwd));
                }
                continue;
            }
            let (header, body) = decode_reply(frame)
                .map_err(|e| format!("conn {}: a bad reply header: {e:?}", c.conn))?;
            if header.xid == xid::NOTIFICATION {
                decode_exact::<WatcherEvent>(body)
                    .map_err(|e| format!("conn {}: a bad notification: {e:?}", c.conn))?;
                stats.notifications += 1;
                continue;
            }
            if c.clean {
                match c.expect.pop_front() {
                    Some(x) if x == header.xid => stats.ordered_replies += 1,
                    other => {
                        return Err(format!(
                            "conn {}: reply to xid {} while {other:?} was due",
                            c.conn, header.xid
                        ))
                    }
                }
            }
        }
        if server.is_closed(c.conn) {
            // As a driver does: the socket goes once written.
            c.closed = true;
            stats.closed_by_server += 1;
            server.disconnect(c.conn);
        }
    }
    Ok(())
}

/// A well-formed request, chosen by the schedule.
fn request(input: &mut Input<'_>) -> Request {
    let path = String::from(PATHS[usize::from(input.or0()) % PATHS.len()]);
    let watch = input.or0() % 2 == 0;
    let n = input.or0();
    let create = |path: String, n: u8| {
        let mode = [
            CreateMode::Persistent,
            CreateMode::Ephemeral,
            CreateMode::PersistentSequential,
            CreateMode::EphemeralSequential,
            CreateMode::Container,
        ][usize::from(n) % 5];
        CreateRequest::new(&path, Bytes::from_static(b"d"), Acl::open_unsafe(), mode)
    };
    let version = if n % 3 == 0 { i32::from(n % 4) } else { -1 };
    match input.or0() % 20 {
        0 | 1 => Request::Create(create(path, n)),
        2 => Request::Create2(create(path, n)),
        3 => Request::CreateTtl(CreateTtlRequest {
            path,
            data: Bytes::new(),
            acl: Acl::open_unsafe(),
            flags: CreateMode::PersistentWithTtl.to_i32(),
            ttl: i64::from(n) * 10,
        }),
        4 => Request::Delete(DeleteRequest { path, version }),
        5 => Request::SetData(SetDataRequest {
            path,
            data: Bytes::from_static(b"x"),
            version,
        }),
        6 => Request::GetData(PathWatch { path, watch }),
        7 => Request::Exists(PathWatch { path, watch }),
        8 => Request::GetChildren2(PathWatch { path, watch }),
        9 => Request::Multi(
            (0..1 + n % 3)
                .map(|i| match (n >> i) % 3 {
                    0 => MultiOp::Create(create(String::from(PATHS[usize::from(i)]), n)),
                    1 => MultiOp::Delete(DeleteRequest {
                        path: String::from(PATHS[usize::from(i) + 1]),
                        version: -1,
                    }),
                    _ => MultiOp::Check(CheckVersionRequest {
                        path: String::from(PATHS[usize::from(i)]),
                        version,
                    }),
                })
                .collect(),
        ),
        10 => Request::Sync(PathRequest { path }),
        11 => Request::AddWatch(AddWatchRequest {
            path,
            mode: i32::from(n % 3),
        }),
        12 => Request::RemoveWatches(WatchesRequest {
            path,
            watcher_type: i32::from(n % 6),
        }),
        13 => {
            let mut w = SetWatches2::default();
            w.data_watches.push(path.clone());
            w.exist_watches.push(String::from("/c"));
            w.child_watches.push(path);
            w.relative_zxid = i64::from(n);
            Request::SetWatches2(w)
        }
        14 => Request::GetEphemerals(PathRequest { path }),
        15 => Request::GetAllChildrenNumber(PathRequest { path }),
        16 => Request::Auth(AuthPacket {
            auth_type: 0,
            scheme: String::from(if n % 8 == 0 { "sasl" } else { "digest" }),
            auth: Bytes::from_static(b"u:p"),
        }),
        17 => Request::Ping,
        18 => Request::WhoAmI,
        _ => Request::CloseSession,
    }
}
