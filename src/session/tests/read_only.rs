//! Read-only mode: the handshake's flag, a session only a read-only server knows, and
//! the search for a read-write server (probes, the move, the watches re-armed).

use super::*;

/// A `ConnectResponse` from a server that is read-only if `read_only`.
fn response(session_id: i64, read_only: bool) -> BytesMut {
    let mut b = BytesMut::new();
    encode_connect_response(
        &mut b,
        &ConnectResponse {
            protocol_version: 0,
            timeout_ms: 6000,
            session_id,
            passwd: Bytes::from_static(&[7; 16]),
            read_only,
        },
    );
    b
}

/// Dials the host the session asks for, at `at`; returns it and the handshake's request.
fn dial(s: &mut Session, at: Instant) -> (usize, ConnectRequest) {
    let host = transports(s)
        .into_iter()
        .find_map(|t| match t {
            Transport::Connect { host } => Some(host),
            _ => None,
        })
        .expect("a dial");
    s.handle_connected(at);
    let mut out = BytesMut::new();
    assert!(s.poll_transmit(&mut out));
    (host, connect_request(&out))
}

/// A read-only session on three hosts: connected first to a read-write server (the
/// session 0x42 is known everywhere), then to a read-only one after a lost connection.
fn on_a_read_only_server() -> (Session, usize) {
    let mut c = config("a:1,b:1,c:1");
    c.read_only = true;
    let mut s = Session::new(c, T0);
    let (_, req) = dial(&mut s, ms(1));
    assert!(req.read_only, "the handshake asks for a read-only server");
    s.handle_bytes(ms(2), &response(0x42, false));
    s.submit(ms(3), get("/w", true), Token(1)).unwrap();
    s.handle_bytes(ms(4), &data_reply(1));
    events(&mut s);
    s.handle_disconnect(ms(10));
    let (ro, req) = dial(&mut s, ms(11));
    assert_eq!(
        req.session_id, 0x42,
        "a session a read-write server knows resumes"
    );
    s.handle_bytes(ms(12), &response(0x42, true));
    let ev = events(&mut s);
    assert!(
        ev.contains(&SessionEvent::Reconnected { read_only: true }),
        "{ev:?}"
    );
    sent(&mut s);
    (s, ro)
}

#[test]
fn a_session_only_a_read_only_server_granted_is_not_presented_again() {
    let mut c = config("a:1,b:1");
    c.read_only = true;
    let mut s = Session::new(c, T0);
    dial(&mut s, ms(1));
    s.handle_bytes(ms(2), &response(0x51, true));
    assert_eq!(
        events(&mut s),
        vec![SessionEvent::Connected {
            session_id: 0x51,
            timeout: Duration::from_millis(6000),
            read_only: true
        }]
    );
    s.handle_disconnect(ms(10));
    let (_, req) = dial(&mut s, ms(11));
    assert_eq!(
        req.session_id, 0,
        "the read-only server's session is its own"
    );
    assert_eq!(&req.passwd[..], &[0u8; 16][..]);
    // A read-write server's session is presented from then on.
    s.handle_bytes(ms(12), &response(0x52, false));
    events(&mut s);
    s.handle_disconnect(ms(20));
    let (_, req) = dial(&mut s, ms(21));
    assert_eq!(req.session_id, 0x52);
}

#[test]
fn probes_go_to_the_other_hosts_with_a_doubling_wait_and_stop_on_a_read_write_server() {
    let (mut s, ro) = on_a_read_only_server();
    // The first probe after 100 ms, then after 200, 400, ...: each to another host.
    let mut probed = Vec::new();
    let mut at = ms(12);
    for wait in [100, 200, 400, 800] {
        let due = s.poll_timeout().unwrap();
        assert_eq!(due, at + Duration::from_millis(wait), "probe {wait}");
        s.handle_timeout(due);
        at = due;
        match &transports(&mut s)[..] {
            [Transport::Probe { host }] => probed.push(*host),
            other => panic!("{other:?}"),
        }
        // A host that says "ro", or nothing, changes nothing.
        s.handle_probe(
            at,
            probed[probed.len() - 1],
            if wait == 100 { b"ro" } else { b"" },
        );
        assert!(transports(&mut s).is_empty());
        assert_eq!(s.state(), SessionState::Connected);
    }
    assert!(
        !probed.contains(&ro),
        "{probed:?} probes the current host {ro}"
    );
    assert_ne!(probed[0], probed[1], "{probed:?}: each other host in turn");
    assert_eq!((probed[0], probed[1]), (probed[2], probed[3]));
    // On a read-write server nothing is probed.
    let rw = probed[0];
    s.handle_probe(at, rw, b"rw");
    s.handle_bytes(at, &[]);
    let (host, req) = dial(&mut s, at + Duration::from_millis(1));
    assert_eq!(host, rw);
    s.handle_bytes(at, &response(0x42, false));
    assert!(events(&mut s).contains(&SessionEvent::Reconnected { read_only: false }));
    sent(&mut s);
    assert_eq!(req.session_id, 0x42);
    for _ in 0..5 {
        let due = s.poll_timeout().unwrap();
        s.handle_timeout(due);
        assert!(
            !transports(&mut s)
                .iter()
                .any(|t| matches!(t, Transport::Probe { .. })),
            "a probe from a read-write server"
        );
        s.handle_bytes(due, &reply(xid::PING, 0, ErrorCode::Ok, None));
    }
}

#[test]
fn a_read_write_answer_moves_the_session_there_with_its_watches() {
    let (mut s, ro) = on_a_read_only_server();
    let due = s.poll_timeout().unwrap();
    s.handle_timeout(due);
    let Some(Transport::Probe { host: rw }) = s.poll_transport() else {
        panic!("no probe")
    };
    // An answer for the host the session is on, or for no host, changes nothing.
    s.handle_probe(due, ro, b"rw");
    s.handle_probe(due, 7, b"rw");
    assert!(transports(&mut s).is_empty());
    s.handle_probe(due, rw, b"rw");
    assert_eq!(
        events(&mut s),
        vec![SessionEvent::Suspended {
            reason: DisconnectReason::ReadWriteServerFound { host: rw }
        }]
    );
    // Dialled at once (the delay after a stable connection is at most 0 here).
    assert_eq!(
        transports(&mut s),
        vec![Transport::Close, Transport::Connect { host: rw }]
    );
    s.handle_connected(due);
    let mut out = BytesMut::new();
    assert!(s.poll_transmit(&mut out));
    assert_eq!(connect_request(&out).session_id, 0x42);
    s.handle_bytes(due, &response(0x42, false));
    assert_eq!(
        events(&mut s),
        vec![SessionEvent::Reconnected { read_only: false }]
    );
    // The watch set before is armed again on the read-write server.
    let frames = sent(&mut s);
    assert!(
        frames.iter().any(|(x, r)| *x == xid::SET_WATCHES
            && matches!(r, Request::SetWatches(w) if w.data_watches == vec![String::from("/w")])),
        "{frames:?}"
    );
    // A late "rw" from an old probe, now that the server is read-write: nothing.
    s.handle_probe(due, ro, b"rw");
    assert!(transports(&mut s).is_empty());
}

#[test]
fn one_host_is_never_probed() {
    let mut c = config("a:1");
    c.read_only = true;
    let mut s = Session::new(c, T0);
    dial(&mut s, ms(1));
    s.handle_bytes(ms(2), &response(0x51, true));
    events(&mut s);
    // The next deadline is the ping's (half of 2/3 of 6 s after the handshake was
    // sent), not a probe.
    assert_eq!(s.poll_timeout(), Some(ms(1) + Duration::from_millis(2000)));
}
