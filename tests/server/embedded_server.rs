//! The embedded server (`zk_recipes_server::EmbeddedServer`) over TCP, at the protocol
//! level: it starts and stops, answers four-letter words, expires sessions on real
//! time, survives bad input (the offending connection closed, the others served), keeps
//! its buffers bounded, and each fault control does what it says. The same faults seen
//! through both adapters: `tests/adapters/embedded_faults.rs`.
// A test is a driver: it owns the clock.
#![allow(clippy::disallowed_methods)]

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use zk_recipes::proto::*;
use zk_recipes_testing::{four_letter, EmbeddedServer, RawClient};

fn create(path: &str, data: &'static [u8], mode: CreateMode) -> Request {
    Request::Create(CreateRequest::new(
        path,
        Bytes::from_static(data),
        Acl::open_unsafe(),
        mode,
    ))
}

fn exists(path: &str) -> Request {
    Request::Exists(PathWatch {
        path: path.into(),
        watch: false,
    })
}

/// The error code of a call (0: success).
fn err(c: &mut RawClient, req: &Request) -> i32 {
    c.call(req).unwrap().0.err
}

/// Whether the server closed this connection (reads EOF or a reset within 5 s).
fn closed(s: &mut TcpStream) -> bool {
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut buf = [0u8; 4096];
    loop {
        match s.read(&mut buf) {
            Ok(0) => return true,
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return false,
            Err(e) if e.kind() == std::io::ErrorKind::TimedOut => return false,
            Err(_) => return true,
        }
    }
}

#[test]
fn it_starts_on_a_free_port_serves_and_stops_when_dropped() {
    let server = EmbeddedServer::start().unwrap();
    let addr = server.addr();
    assert!(addr.ip().is_loopback() && addr.port() != 0);
    let mut c = RawClient::connect(addr, 5_000).unwrap();
    assert_ne!(c.session.session_id, 0);
    assert_eq!(c.session.timeout_ms, 5_000);
    assert_eq!(err(&mut c, &create("/a", b"x", CreateMode::Persistent)), 0);
    let (_, r) = c
        .call(&Request::GetData(PathWatch {
            path: "/a".into(),
            watch: false,
        }))
        .unwrap();
    assert!(matches!(r, Some(Response::Data { data, .. }) if data == "x"));
    assert_eq!(server.sessions(), vec![c.session.session_id]);
    drop(server);
    // The client's connection is gone and nothing listens any more.
    assert!(c.call(&exists("/a")).is_err());
    assert!(TcpStream::connect_timeout(&addr, Duration::from_secs(1)).is_err());
}

#[test]
fn it_answers_four_letter_words_as_a_standalone_server() {
    let server = EmbeddedServer::start().unwrap();
    let _c = RawClient::connect(server.addr(), 5_000).unwrap();
    assert_eq!(four_letter(server.addr(), "ruok").unwrap(), "imok");
    let srvr = four_letter(server.addr(), "srvr").unwrap();
    assert!(srvr.contains("Mode: standalone"), "{srvr}");
    let mntr = four_letter(server.addr(), "mntr").unwrap();
    assert!(mntr.contains("zk_znode_count\t5\n"), "{mntr}");
    assert!(mntr.contains("zk_num_alive_connections\t"), "{mntr}");
    assert!(four_letter(server.addr(), "dump")
        .unwrap()
        .contains("not in the whitelist"));
}

#[test]
fn a_silent_session_expires_on_real_time_and_its_ephemerals_go() {
    let server = EmbeddedServer::start().unwrap();
    let mut watcher = RawClient::connect(server.addr(), 10_000).unwrap();
    let mut c = RawClient::connect(server.addr(), 1_000).unwrap();
    assert_eq!(c.session.timeout_ms, 1_000);
    assert_eq!(err(&mut c, &create("/e", b"", CreateMode::Ephemeral)), 0);
    let (h, _) = watcher
        .call(&Request::Exists(PathWatch {
            path: "/e".into(),
            watch: true,
        }))
        .unwrap();
    assert_eq!(h.err, 0);
    // No pings: after the timeout the server expires the session by itself.
    let t0 = Instant::now();
    let event = watcher.next_event().unwrap();
    assert_eq!(event.event_type, EventType::NodeDeleted.to_i32());
    assert_eq!(event.path, "/e");
    let took = t0.elapsed();
    assert!(
        took >= Duration::from_millis(900) && took < Duration::from_secs(5),
        "expired after {took:?}"
    );
    assert!(!server.sessions().contains(&c.session.session_id));
}

#[test]
fn malformed_frames_close_their_connection_only() {
    let server = EmbeddedServer::start().unwrap();
    let mut good = RawClient::connect(server.addr(), 10_000).unwrap();
    let bad_inputs: [&[u8]; 5] = [
        // A negative length.
        &[0xff, 0xff, 0xff, 0xf0, 1, 2, 3],
        // A 2 GiB length: refused before a byte of it is buffered.
        &[0x7f, 0xff, 0xff, 0xff],
        // A handshake frame too short to be one.
        &[0, 0, 0, 3, 1, 2, 3],
        // Text that is no four-letter word.
        b"GET / HTTP/1.1\r\n\r\n",
        // A length just past the largest request (1 MiB).
        &[0, 0x10, 0, 0],
    ];
    for input in bad_inputs {
        let mut s = TcpStream::connect(server.addr()).unwrap();
        s.write_all(input).unwrap();
        assert!(closed(&mut s), "{input:?} left the connection open");
        assert_eq!(err(&mut good, &exists("/")), 0, "after {input:?}");
    }
    // Garbage after a good handshake: a request whose body does not decode.
    let mut c = RawClient::connect(server.addr(), 10_000).unwrap();
    c.send_raw(&[0, 0, 0, 3, 0, 0, 0]).unwrap();
    assert!(c.call(&exists("/")).is_err(), "a 3-byte request closes");
    assert_eq!(err(&mut good, &exists("/")), 0);
    assert_eq!(server.stats().connections, 1);
}

#[test]
fn an_unknown_opcode_is_answered_unimplemented_and_the_connection_closed() {
    let server = EmbeddedServer::start().unwrap();
    let mut good = RawClient::connect(server.addr(), 10_000).unwrap();
    let mut c = RawClient::connect(server.addr(), 10_000).unwrap();
    // xid 7, opcode 999, no body.
    c.send_raw(&[0, 0, 0, 8, 0, 0, 0, 7, 0, 0, 0x03, 0xe7])
        .unwrap();
    let (h, _) = c.recv_reply(OpCode::Exists).unwrap();
    assert_eq!((h.xid, h.err), (7, ErrorCode::Unimplemented.to_i32()));
    assert!(c.call(&exists("/")).is_err());
    assert_eq!(err(&mut good, &exists("/")), 0);
    // A request the codec knows but whose body is malformed: MarshallingError, and the
    // connection stays (as the real server answers).
    let mut bad = BytesMut::new();
    bad.extend_from_slice(&[0, 0, 0, 10, 0, 0, 0, 8, 0, 0, 0, 3, 0xff, 0xff]);
    good.send_raw(&bad).unwrap();
    let (h, _) = good.recv_reply(OpCode::Exists).unwrap();
    assert_eq!((h.xid, h.err), (8, ErrorCode::MarshallingError.to_i32()));
    assert_eq!(err(&mut good, &exists("/")), 0);
}

#[test]
fn a_client_that_stops_reading_holds_up_only_itself_and_nothing_grows() {
    let server = EmbeddedServer::start().unwrap();
    let mut good = RawClient::connect(server.addr(), 10_000).unwrap();
    let big = Bytes::from(vec![b'x'; 1_000_000]);
    let (h, _) = good
        .call(&Request::Create(CreateRequest::new(
            "/big",
            big,
            Acl::open_unsafe(),
            CreateMode::Persistent,
        )))
        .unwrap();
    assert_eq!(h.err, 0);
    // A client with a 2 s session asks for the 1 MB node 200 times and reads nothing:
    // 200 MB of answers it will not take.
    let mut greedy = RawClient::connect(server.addr(), 2_000).unwrap();
    let id = greedy.session.session_id;
    let mut frame = BytesMut::new();
    for xid in 1..=200 {
        encode_request(
            &mut frame,
            xid,
            &Request::GetData(PathWatch {
                path: "/big".into(),
                watch: false,
            }),
            DEFAULT_MAX_REQUEST,
        )
        .unwrap();
    }
    greedy.send_raw(&frame).unwrap();
    // Meanwhile everyone else is served at once, and what waits for the greedy client
    // stays bounded (the server stops reading it past 1 MiB of unread answers).
    let t0 = Instant::now();
    while t0.elapsed() < Duration::from_millis(1500) {
        let t = Instant::now();
        assert_eq!(err(&mut good, &exists("/big")), 0);
        assert!(t.elapsed() < Duration::from_millis(500));
        let unwritten = server.unwritten_bytes();
        assert!(unwritten < 4 * 1024 * 1024, "{unwritten} bytes waiting");
        std::thread::sleep(Duration::from_millis(50));
    }
    // Its requests wait unread, so the server hears nothing from it, not even pings:
    // its session expires and its connection is closed.
    let t0 = Instant::now();
    while server.sessions().contains(&id) {
        assert!(t0.elapsed() < Duration::from_secs(10), "still alive");
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(err(&mut good, &exists("/big")), 0);
    assert_eq!(server.unwritten_bytes(), 0);
}

#[test]
fn connections_past_the_limit_are_closed_as_accepted() {
    let server = EmbeddedServer::builder()
        .max_connections(2)
        .start()
        .unwrap();
    let _a = RawClient::connect(server.addr(), 10_000).unwrap();
    let _b = RawClient::connect(server.addr(), 10_000).unwrap();
    assert!(RawClient::connect(server.addr(), 10_000).is_err());
    assert_eq!(server.refused_connections(), 1);
}

#[test]
fn throttled_and_refused_requests_are_answered_unapplied() {
    let server = EmbeddedServer::start().unwrap();
    let mut c = RawClient::connect(server.addr(), 10_000).unwrap();
    server.throttle_next(2);
    let (h, _) = c.call(&create("/t", b"", CreateMode::Persistent)).unwrap();
    assert_eq!(h.err, ErrorCode::Throttled.to_i32());
    // Pings are not throttled.
    assert_eq!(err(&mut c, &Request::Ping), 0);
    assert_eq!(err(&mut c, &exists("/t")), ErrorCode::Throttled.to_i32());
    assert_eq!(err(&mut c, &exists("/t")), ErrorCode::NoNode.to_i32());
    server.fail_next(1, ErrorCode::SystemError);
    assert_eq!(
        err(&mut c, &create("/t", b"", CreateMode::Persistent)),
        ErrorCode::SystemError.to_i32()
    );
    assert_eq!(err(&mut c, &exists("/t")), ErrorCode::NoNode.to_i32());
}

#[test]
fn reap_now_deletes_empty_containers_and_expired_ttl_nodes() {
    let server = EmbeddedServer::start().unwrap();
    let mut c = RawClient::connect(server.addr(), 10_000).unwrap();
    assert_eq!(err(&mut c, &create("/box", b"", CreateMode::Container)), 0);
    assert_eq!(
        err(&mut c, &create("/box/x", b"", CreateMode::Persistent)),
        0
    );
    assert_eq!(
        err(
            &mut c,
            &Request::CreateTtl(CreateTtlRequest {
                path: "/ttl".into(),
                data: Bytes::new(),
                acl: Acl::open_unsafe(),
                flags: CreateMode::PersistentWithTtl.to_i32(),
                ttl: 1,
            })
        ),
        0
    );
    std::thread::sleep(Duration::from_millis(20));
    server.reap_now();
    // A container with a child stays; the TTL node, unmodified past its TTL, goes.
    assert_eq!(err(&mut c, &exists("/box")), 0);
    assert_eq!(err(&mut c, &exists("/ttl")), ErrorCode::NoNode.to_i32());
    let delete = Request::Delete(DeleteRequest {
        path: "/box/x".into(),
        version: -1,
    });
    assert_eq!(err(&mut c, &delete), 0);
    assert_eq!(err(&mut c, &exists("/box")), 0, "reaped at the check only");
    server.reap_now();
    assert_eq!(err(&mut c, &exists("/box")), ErrorCode::NoNode.to_i32());
}

#[test]
fn containers_are_reaped_on_real_time() {
    let server = EmbeddedServer::builder()
        .container_check(Duration::from_millis(200))
        .start()
        .unwrap();
    let mut c = RawClient::connect(server.addr(), 10_000).unwrap();
    assert_eq!(err(&mut c, &create("/box", b"", CreateMode::Container)), 0);
    assert_eq!(
        err(&mut c, &create("/box/x", b"", CreateMode::Ephemeral)),
        0
    );
    assert_eq!(err(&mut c, &Request::CloseSession), 0);
    let t0 = Instant::now();
    let mut c = RawClient::connect(server.addr(), 10_000).unwrap();
    while err(&mut c, &exists("/box")) == 0 {
        assert!(t0.elapsed() < Duration::from_secs(3), "never reaped");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn a_frozen_server_answers_nothing_until_resumed() {
    let server = EmbeddedServer::start().unwrap();
    let mut c = RawClient::connect(server.addr(), 10_000).unwrap();
    server.freeze();
    assert!(server.is_frozen());
    c.set_read_timeout(Some(Duration::from_millis(300)))
        .unwrap();
    let xid = c.send(&exists("/")).unwrap();
    assert!(
        c.recv_reply(OpCode::Exists).is_err(),
        "answered while frozen"
    );
    // New connections wait too.
    let mut late = TcpStream::connect(server.addr()).unwrap();
    late.write_all(b"ruok").unwrap();
    assert_eq!(answer_within(&mut late, Duration::from_millis(300)), None);
    server.resume();
    c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let (h, _) = c.recv_reply(OpCode::Exists).unwrap();
    assert_eq!((h.xid, h.err), (xid, 0));
    assert_eq!(
        answer_within(&mut late, Duration::from_secs(5)).as_deref(),
        Some("imok")
    );
    // freeze_for thaws by itself.
    server.freeze_for(Duration::from_millis(300));
    let t0 = Instant::now();
    assert_eq!(err(&mut c, &exists("/")), 0);
    assert!(t0.elapsed() >= Duration::from_millis(250));
    assert!(!server.is_frozen());
}

/// Writes `ruok` on `s` and reads the answer, if it comes within `wait`.
/// What the server wrote back on `s` within `wait` (the four-letter word was sent once:
/// sending it again could leave unread bytes at the server's close, which resets the
/// connection and can lose the answer).
fn answer_within(s: &mut TcpStream, wait: Duration) -> Option<String> {
    s.set_read_timeout(Some(wait)).unwrap();
    let mut out = String::new();
    match s.read_to_string(&mut out) {
        Ok(_) if !out.is_empty() => Some(out),
        _ => None,
    }
}

#[test]
fn a_frozen_server_expires_sessions_it_did_not_hear_from_when_it_resumes() {
    let server = EmbeddedServer::start().unwrap();
    let c = RawClient::connect(server.addr(), 1_000).unwrap();
    let id = c.session.session_id;
    server.freeze_for(Duration::from_millis(1500));
    std::thread::sleep(Duration::from_millis(1700));
    assert!(!server.sessions().contains(&id));
}

#[test]
fn dropped_connections_leave_the_sessions_alive() {
    let server = EmbeddedServer::start().unwrap();
    let mut c = RawClient::connect(server.addr(), 10_000).unwrap();
    assert_eq!(err(&mut c, &create("/e", b"", CreateMode::Ephemeral)), 0);
    assert_eq!(server.drop_connections(), 1);
    assert!(c.call(&exists("/e")).is_err(), "the connection is gone");
    let mut again = RawClient::handshake(
        server.addr(),
        ConnectRequest {
            timeout_ms: 10_000,
            session_id: c.session.session_id,
            passwd: c.session.passwd.clone(),
            ..Default::default()
        },
    )
    .unwrap();
    assert_eq!(again.session.session_id, c.session.session_id);
    let (h, r) = again.call(&exists("/e")).unwrap();
    assert_eq!(h.err, 0);
    assert!(matches!(r, Some(Response::Stat(s)) if s.ephemeral_owner == c.session.session_id));
}

#[test]
fn an_expired_session_is_told_so_when_it_reconnects() {
    let server = EmbeddedServer::start().unwrap();
    let mut c = RawClient::connect(server.addr(), 10_000).unwrap();
    assert_eq!(err(&mut c, &create("/e", b"", CreateMode::Ephemeral)), 0);
    assert!(server.expire_session(c.session.session_id));
    assert!(!server.expire_session(c.session.session_id), "already gone");
    assert!(c.call(&exists("/e")).is_err(), "its connection is closed");
    let again = RawClient::handshake(
        server.addr(),
        ConnectRequest {
            timeout_ms: 10_000,
            session_id: c.session.session_id,
            passwd: c.session.passwd.clone(),
            ..Default::default()
        },
    )
    .unwrap();
    assert_eq!(again.session.timeout_ms, 0, "expired");
    let mut other = RawClient::connect(server.addr(), 10_000).unwrap();
    assert_eq!(err(&mut other, &exists("/e")), ErrorCode::NoNode.to_i32());
}

#[test]
fn a_lagging_follower_serves_stale_reads_until_a_sync() {
    let server = EmbeddedServer::start().unwrap();
    let mut a = RawClient::connect(server.addr(), 10_000).unwrap();
    let mut b = RawClient::connect(server.addr(), 10_000).unwrap();
    assert_eq!(err(&mut a, &create("/n", b"", CreateMode::Persistent)), 0);
    assert!(server.lag_session(a.session.session_id, Duration::from_secs(30)));
    assert!(a.call(&exists("/n")).is_err(), "its connection is closed");
    // Written after the follower stopped: a's reconnect does not see it.
    let delete = Request::Delete(DeleteRequest {
        path: "/n".into(),
        version: -1,
    });
    assert_eq!(err(&mut b, &delete), 0);
    let mut a = RawClient::handshake(
        server.addr(),
        ConnectRequest {
            timeout_ms: 10_000,
            session_id: a.session.session_id,
            passwd: a.session.passwd.clone(),
            ..Default::default()
        },
    )
    .unwrap();
    assert_eq!(err(&mut a, &exists("/n")), 0, "stale: still there");
    let sync = Request::Sync(PathRequest { path: "/n".into() });
    assert_eq!(err(&mut a, &sync), 0);
    assert_eq!(err(&mut a, &exists("/n")), ErrorCode::NoNode.to_i32());
}

#[test]
fn a_restarted_server_on_the_same_port_does_not_resume_the_old_ones_sessions() {
    let server = EmbeddedServer::start().unwrap();
    let port = server.addr().port();
    let c = RawClient::connect(server.addr(), 10_000).unwrap();
    drop(server);
    std::thread::sleep(Duration::from_millis(5));
    let again = EmbeddedServer::builder().port(port).start().unwrap();
    let other = RawClient::connect(again.addr(), 10_000).unwrap();
    assert_ne!(other.session.session_id, c.session.session_id);
    // The old client comes back with its session: unknown here, so expired.
    let back = RawClient::handshake(
        again.addr(),
        ConnectRequest {
            timeout_ms: 10_000,
            session_id: c.session.session_id,
            passwd: c.session.passwd.clone(),
            ..Default::default()
        },
    )
    .unwrap();
    assert_eq!(back.session.timeout_ms, 0);
}
