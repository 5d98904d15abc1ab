//! The misbehaving fake server itself: each mode, seen from a bare socket.

use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use zk_recipes::proto::*;
use zk_recipes_testing::*;

fn connect(server: &FakeServer) -> TcpStream {
    let s = TcpStream::connect_timeout(&server.addr(), Duration::from_secs(2)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(3))).unwrap();
    s.set_write_timeout(Some(Duration::from_secs(3))).unwrap();
    s.set_nodelay(true).unwrap();
    s
}

fn connect_request(timeout_ms: i32, session_id: i64) -> Vec<u8> {
    let mut out = BytesMut::new();
    encode_connect(
        &mut out,
        &ConnectRequest {
            timeout_ms,
            session_id,
            passwd: Bytes::from_static(&[0; 16]),
            ..Default::default()
        },
    );
    out.to_vec()
}

fn request(xid: i32, req: &Request) -> Vec<u8> {
    let mut out = BytesMut::new();
    encode_request(&mut out, xid, req, DEFAULT_MAX_REQUEST).unwrap();
    out.to_vec()
}

fn ping() -> Vec<u8> {
    request(xid::PING, &Request::Ping)
}

fn get_data() -> Request {
    Request::GetData(PathWatch {
        path: "/x".into(),
        watch: false,
    })
}

/// Reads exactly `n` bytes.
fn read_n(s: &mut TcpStream, n: usize) -> Vec<u8> {
    let mut buf = vec![0; n];
    s.read_exact(&mut buf).unwrap();
    buf
}

/// Reads one whole frame body with the client-side decoder.
fn read_frame(s: &mut TcpStream) -> Bytes {
    let mut dec = FrameDecoder::new(DEFAULT_MAX_REPLY);
    let mut byte = [0u8; 1];
    loop {
        // One byte at a time, so nothing past the frame is consumed.
        s.read_exact(&mut byte).unwrap();
        if let Some(frame) = dec.decode(&mut &byte[..]).unwrap() {
            return frame;
        }
    }
}

/// Sends a ConnectRequest and decodes the answer.
fn handshake(s: &mut TcpStream, timeout_ms: i32, session_id: i64) -> ConnectResponse {
    s.write_all(&connect_request(timeout_ms, session_id))
        .unwrap();
    decode_exact(read_frame(s)).unwrap()
}

/// Reads until EOF (or a reset), returning what came.
fn read_to_close(s: &mut TcpStream) -> Vec<u8> {
    let mut out = Vec::new();
    let mut buf = [0u8; 1024];
    loop {
        match s.read(&mut buf) {
            Ok(0) => return out,
            Ok(n) => out.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == ErrorKind::ConnectionReset => return out,
            Err(e) => panic!("expected the server to close, got {e}"),
        }
    }
}

/// Asserts nothing arrives for `wait` and the socket is still open.
fn assert_silent_and_open(s: &mut TcpStream, wait: Duration) {
    s.set_read_timeout(Some(wait)).unwrap();
    let mut buf = [0u8; 16];
    match s.read(&mut buf) {
        Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
        Ok(0) => panic!("the server closed the connection"),
        Ok(n) => panic!("unexpected {n} bytes: {:02x?}", &buf[..n]),
        Err(e) => panic!("unexpected error {e}"),
    }
    s.set_read_timeout(Some(Duration::from_secs(3))).unwrap();
}

/// Waits (bounded) until the server has counted `n` connections.
fn wait_connections(server: &FakeServer, n: usize) {
    let deadline = Instant::now() + Duration::from_secs(2);
    while server.connections() < n {
        assert!(
            Instant::now() < deadline,
            "{} < {n} connections",
            server.connections()
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

fn assert_granted(resp: &ConnectResponse, timeout_ms: i32) {
    assert_eq!(resp.protocol_version, 0);
    assert_eq!(resp.timeout_ms, timeout_ms);
    assert_eq!(resp.session_id, FAKE_SESSION_ID);
    assert_eq!(&resp.passwd[..], FAKE_PASSWORD);
}

#[test]
fn healthy_answers_pings_requests_and_close() {
    let mut server = FakeServer::start(Misbehaviour::Healthy).unwrap();
    assert!(server.addr().ip().is_loopback());
    assert_eq!(
        server.connect_string(),
        format!("127.0.0.1:{}", server.addr().port())
    );
    assert_eq!(server.mode(), Misbehaviour::Healthy);

    let mut c = RawClient::connect(server.addr(), 6000).unwrap();
    assert_granted(&c.session, 6000);

    let (h, body) = c.call(&Request::Ping).unwrap();
    assert_eq!((h.xid, h.zxid, h.err), (xid::PING, FAKE_ZXID, 0));
    assert_eq!(body, Some(Response::Empty)); // nothing after the header

    let (h, body) = c.call(&get_data()).unwrap();
    assert_eq!(h.err, ErrorCode::NoNode.to_i32());
    assert_eq!(body, None);
    // Pipelined requests are answered in order, each with its own xid.
    let x1 = c.send(&get_data()).unwrap();
    let x2 = c.send(&Request::Ping).unwrap();
    let x3 = c.send(&get_data()).unwrap();
    for (x, op) in [
        (x1, OpCode::GetData),
        (x2, OpCode::Ping),
        (x3, OpCode::GetData),
    ] {
        assert_eq!(c.recv_reply(op).unwrap().0.xid, x);
    }

    // closeSession: err 0, then the server closes.
    let (h, _) = c.call(&Request::CloseSession).unwrap();
    assert_eq!(h.err, 0);
    assert!(c.call(&Request::Ping).is_err());

    assert_eq!(server.connections(), 1);
    server.stop();
    server.stop(); // idempotent
}

#[test]
fn a_reconnect_resumes_the_same_session() {
    let server = FakeServer::start(Misbehaviour::Healthy).unwrap();
    let mut s1 = connect(&server);
    let first = handshake(&mut s1, 4000, 0);
    assert_granted(&first, 4000);
    drop(s1);
    let mut s2 = connect(&server);
    let resumed = handshake(&mut s2, 5000, first.session_id);
    assert_granted(&resumed, 5000);
    assert_eq!(resumed.passwd, first.passwd);
    wait_connections(&server, 2);
    assert_eq!(server.connections(), 2);
}

#[test]
fn tiny_timeout_grants_one_millisecond_and_stays_healthy() {
    let server = FakeServer::start(Misbehaviour::TinyTimeout).unwrap();
    let mut c = RawClient::connect(server.addr(), 30_000).unwrap();
    assert_granted(&c.session, 1);
    let (h, _) = c.call(&Request::Ping).unwrap();
    assert_eq!((h.xid, h.err), (xid::PING, 0));
    let (h, _) = c.call(&get_data()).unwrap();
    assert_eq!(h.err, -101);
}

#[test]
fn expired_handshake_answers_timeout_zero_and_closes() {
    let server = FakeServer::start(Misbehaviour::ExpiredHandshake).unwrap();
    let mut s = connect(&server);
    let resp = handshake(&mut s, 6000, FAKE_SESSION_ID);
    assert!(resp.is_expired());
    assert_eq!((resp.timeout_ms, resp.session_id), (0, 0));
    assert_eq!(&resp.passwd[..], &[0; 16]);
    assert_eq!(read_to_close(&mut s), b"");
}

#[test]
fn garbage_sends_a_frame_that_is_not_a_reply() {
    let server = FakeServer::start(Misbehaviour::Garbage).unwrap();
    let mut s = connect(&server);
    assert_granted(&handshake(&mut s, 6000, 0), 6000);
    // Nothing until a request comes.
    assert_silent_and_open(&mut s, Duration::from_millis(200));
    s.write_all(&ping()).unwrap();
    assert_eq!(read_n(&mut s, GARBAGE_FRAME.len()), GARBAGE_FRAME);
    let mut dec = FrameDecoder::new(DEFAULT_MAX_REPLY);
    let body = dec.decode(&mut &GARBAGE_FRAME[..]).unwrap().unwrap();
    assert!(decode_reply(body).is_err());
    assert_silent_and_open(&mut s, Duration::from_millis(200));
}

#[test]
fn negative_length_sends_minus_one() {
    let server = FakeServer::start(Misbehaviour::NegativeLength).unwrap();
    let mut s = connect(&server);
    assert_granted(&handshake(&mut s, 6000, 0), 6000);
    s.write_all(&request(1, &get_data())).unwrap();
    let prefix = read_n(&mut s, 4);
    assert_eq!(prefix, [0xff; 4]);
    let mut dec = FrameDecoder::new(DEFAULT_MAX_REPLY);
    assert_eq!(
        dec.decode(&mut &prefix[..]),
        Err(FrameError::NegativeLength(-1))
    );
    assert_silent_and_open(&mut s, Duration::from_millis(200));
}

#[test]
fn huge_length_claims_two_gibibytes() {
    let server = FakeServer::start(Misbehaviour::HugeLength).unwrap();
    let mut s = connect(&server);
    assert_granted(&handshake(&mut s, 6000, 0), 6000);
    // Sent right after the handshake, without waiting for a request.
    let prefix = read_n(&mut s, 4);
    assert_eq!(prefix, [0x7f, 0xff, 0xff, 0xff]);
    let mut dec = FrameDecoder::new(DEFAULT_MAX_REPLY);
    assert!(matches!(
        dec.decode(&mut &prefix[..]),
        Err(FrameError::TooLarge {
            len: 0x7fff_ffff,
            ..
        })
    ));
    assert_eq!(read_n(&mut s, 8).len(), 8);
    assert_silent_and_open(&mut s, Duration::from_millis(200));
}

#[test]
fn truncated_sends_half_a_reply_then_closes() {
    let server = FakeServer::start(Misbehaviour::Truncated).unwrap();
    let mut s = connect(&server);
    assert_granted(&handshake(&mut s, 6000, 0), 6000);
    s.write_all(&request(7, &get_data())).unwrap();
    let rest = read_to_close(&mut s);
    assert!(rest.len() >= 4, "{rest:02x?}");
    let announced = i32::from_be_bytes([rest[0], rest[1], rest[2], rest[3]]);
    assert_eq!(announced, 16);
    assert_eq!(rest.len() - 4, 8);
    // What did come is the start of a reply to xid 7.
    assert_eq!(&rest[4..8], &7i32.to_be_bytes());
}

#[test]
fn unknown_xid_answers_with_an_xid_never_sent() {
    let server = FakeServer::start(Misbehaviour::UnknownXid).unwrap();
    let mut c = RawClient::connect(server.addr(), 6000).unwrap();
    assert_granted(&c.session, 6000);
    let sent = c.send(&get_data()).unwrap();
    let (h, _) = c.recv_reply(OpCode::GetData).unwrap();
    assert_ne!(h.xid, sent);
    assert_eq!(h.xid, UNKNOWN_XID);
    assert_eq!(h.err, ErrorCode::NoNode.to_i32());
    // Then healthy: pings are answered.
    let (h, _) = c.call(&Request::Ping).unwrap();
    assert_eq!((h.xid, h.err), (xid::PING, 0));
}

#[test]
fn reset_at_accept_closes_at_once() {
    let server = FakeServer::start(Misbehaviour::ResetAtAccept).unwrap();
    let mut s = connect(&server);
    let _ = s.write_all(&connect_request(6000, 0));
    assert_eq!(read_to_close(&mut s), b"");
    assert_eq!(server.connections(), 1);
}

#[test]
fn close_before_handshake_reads_the_request_and_closes() {
    let server = FakeServer::start(Misbehaviour::CloseBeforeHandshake).unwrap();
    let mut s = connect(&server);
    // Open until the ConnectRequest arrives.
    assert_silent_and_open(&mut s, Duration::from_millis(200));
    s.write_all(&connect_request(6000, 0)).unwrap();
    assert_eq!(read_to_close(&mut s), b"");
}

#[test]
fn silent_after_handshake_never_answers_a_ping() {
    let server = FakeServer::start(Misbehaviour::SilentAfterHandshake).unwrap();
    let mut s = connect(&server);
    assert_granted(&handshake(&mut s, 6000, 0), 6000);
    for _ in 0..3 {
        s.write_all(&ping()).unwrap();
    }
    s.write_all(&request(1, &get_data())).unwrap();
    assert_silent_and_open(&mut s, Duration::from_millis(500));
}

#[test]
fn no_handshake_never_answers() {
    let server = FakeServer::start(Misbehaviour::NoHandshake).unwrap();
    let mut s = connect(&server);
    s.write_all(&connect_request(6000, 0)).unwrap();
    assert_silent_and_open(&mut s, Duration::from_millis(500));
}

#[test]
fn http_answers_400_and_closes() {
    let server = FakeServer::start(Misbehaviour::Http).unwrap();
    let mut s = connect(&server);
    s.write_all(&connect_request(6000, 0)).unwrap();
    let answer = read_to_close(&mut s);
    assert_eq!(answer, HTTP_400);
    assert!(answer.starts_with(b"HTTP/1.1 400"));
}

#[test]
fn stop_reading_lets_the_client_writes_block() {
    let mut server = FakeServer::start(Misbehaviour::StopReading).unwrap();
    let mut s = connect(&server);
    assert_granted(&handshake(&mut s, 6000, 0), 6000);

    // Write until the socket buffers are full (bounded: 256 MiB at most).
    s.set_write_timeout(Some(Duration::from_millis(300)))
        .unwrap();
    let chunk = vec![0u8; 64 * 1024];
    let mut written = 0usize;
    let blocked = loop {
        assert!(written < 256 << 20, "the server keeps reading");
        match s.write(&chunk) {
            Ok(n) => written += n,
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                break true
            }
            Err(e) => panic!("unexpected error {e}"),
        }
    };
    assert!(blocked);
    assert!(written > 0);

    // A later connection is never answered.
    let mut s2 = connect(&server);
    s2.write_all(&connect_request(6000, 0)).unwrap();
    assert_silent_and_open(&mut s2, Duration::from_millis(300));
    assert_eq!(server.connections(), 2);

    // Stopping closes both.
    let t = Instant::now();
    server.stop();
    assert!(t.elapsed() < Duration::from_secs(2), "{:?}", t.elapsed());
    assert_eq!(read_to_close(&mut s2), b"");
}

#[test]
fn trickle_sends_one_byte_a_second() {
    let mut server = FakeServer::start(Misbehaviour::Trickle).unwrap();
    let mut s = connect(&server);
    assert_granted(&handshake(&mut s, 6000, 0), 6000);
    s.write_all(&ping()).unwrap();
    let first = read_n(&mut s, 1);
    let t = Instant::now();
    let second = read_n(&mut s, 1);
    let gap = t.elapsed();
    assert!(
        gap >= Duration::from_millis(800) && gap < Duration::from_millis(2500),
        "{gap:?}"
    );
    // The start of a 16-byte reply frame.
    assert_eq!([first[0], second[0]], [0, 0]);

    // Stopping does not wait for the rest of the reply.
    let t = Instant::now();
    server.stop();
    assert!(t.elapsed() < Duration::from_secs(1), "{:?}", t.elapsed());
    assert_eq!(read_to_close(&mut s), b"");
}

#[test]
fn stop_and_drop_close_every_connection() {
    for mode in Misbehaviour::ALL {
        let mut server = FakeServer::start(mode).unwrap();
        let mut clients: Vec<TcpStream> = (0..3).map(|_| connect(&server)).collect();
        for c in &mut clients {
            let _ = c.write_all(&connect_request(6000, 0));
        }
        wait_connections(&server, 3);
        let t = Instant::now();
        if mode == Misbehaviour::Healthy {
            drop(server);
        } else {
            server.stop();
        }
        assert!(
            t.elapsed() < Duration::from_secs(2),
            "{mode:?}: {:?}",
            t.elapsed()
        );
        for c in &mut clients {
            // Whatever came before, the connection ends.
            c.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
            read_to_close(c);
        }
    }
}

#[test]
fn connection_times_follow_the_client() {
    let server = FakeServer::start(Misbehaviour::ResetAtAccept).unwrap();
    for i in 0..3 {
        if i > 0 {
            std::thread::sleep(Duration::from_millis(100));
        }
        drop(connect(&server));
    }
    wait_connections(&server, 3);
    let times = server.connection_times();
    assert_eq!(times.len(), 3);
    for w in times.windows(2) {
        let gap = w[1] - w[0];
        assert!(
            gap >= Duration::from_millis(90) && gap < Duration::from_millis(1000),
            "{times:?}"
        );
    }
}
