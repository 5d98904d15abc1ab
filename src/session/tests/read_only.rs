//! Read-only mode: the handshake's flag, a session only a read-only server knows, and
//! the search for a read-write server (probes, the move, the watches re-armed); then
//! what a real ZooKeeper 3.8.0 read-only server does (bytes recorded through a relay):
//! a refused new-session handshake, a session refused there served by a read-only
//! stand-in, a refusal overtaking replies, `sync` answered by the session.

use super::*;

/// A `ConnectResponse` (6 s) from a server that is read-only if `read_only`.
fn response(session_id: i64, read_only: bool) -> BytesMut {
    server_connect_response(session_id, 6000, read_only)
}

/// A session on `hosts` that accepts read-only servers.
fn read_only_session(hosts: &str) -> Session {
    let mut c = config(hosts);
    c.read_only = true;
    Session::new(c, T0)
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
    let mut s = read_only_session("a:1,b:1,c:1");
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
    let mut s = read_only_session("a:1,b:1");
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
    let mut s = read_only_session("a:1");
    dial(&mut s, ms(1));
    s.handle_bytes(ms(2), &response(0x51, true));
    events(&mut s);
    // The next deadline is the ping's (half of 2/3 of 6 s after the handshake was
    // sent), not a probe.
    assert_eq!(s.poll_timeout(), Some(ms(1) + Duration::from_millis(2000)));
}

// ----- what a real ZooKeeper 3.8.0 read-only server does (bytes recorded by a relay
// between a client and a server of a 3-server ensemble with two servers killed) -----

/// Bytes as recorded (hex).
fn recorded(hex: &str) -> Vec<u8> {
    (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap())
        .collect()
}

/// 3.8.0's read-only server without local sessions, to a new-session handshake
/// (session 0, read-only byte 1; the Java client's and ours alike): a bare reply
/// header, xid 0, zxid 0x100000009, err -119 NotReadOnly, in place of a
/// ConnectResponse (its `ReadOnlyRequestProcessor` refuses a global `createSession`).
const REFUSED_NEW_SESSION: &str = "00000010000000000000000100000009ffffff89";

/// The same server with `localSessionsEnabled=true`, to the same handshake: a
/// ConnectResponse granting a local session, read-only byte 1.
const READ_ONLY_SESSION: &str =
    "0000002500000000000027100100022a5c8d000000000010e9b432a4c28e81196fe044c1db91ede901";

#[test]
fn a_reply_header_in_place_of_the_handshake_names_the_read_only_refusal() {
    let mut s = read_only_session("a:1");
    let (_, req) = dial(&mut s, ms(1));
    assert_eq!((req.session_id, req.read_only), (0, true));
    s.handle_bytes(ms(2), &recorded(REFUSED_NEW_SESSION));
    let reason = events(&mut s)
        .into_iter()
        .find_map(|e| match e {
            SessionEvent::Unreachable { reason, .. } => Some(reason),
            _ => None,
        })
        .expect("the attempt failed");
    assert_eq!(
        reason,
        DisconnectReason::HandshakeRefused {
            code: ErrorCode::NotReadOnly
        }
    );
    let text = alloc::format!("{reason}");
    assert!(text.contains("localSessionsEnabled"), "{text}");
    assert_eq!(s.state(), SessionState::Connecting, "not an expiry");
}

/// A session a read-write server granted (0x42, a watch on /w), then its server
/// lost: the handshake presenting it on host `refusing` is closed unanswered (3.8's
/// read-only server: "Refusing global session reconnection in RO mode"); returns the
/// session and that host.
fn refused_on_a_read_only_server() -> (Session, usize) {
    let mut s = read_only_session("a:1,b:1,c:1");
    dial(&mut s, ms(1));
    s.handle_bytes(ms(2), &response(0x42, false));
    s.submit(ms(3), get("/w", true), Token(1)).unwrap();
    s.handle_bytes(ms(4), &data_reply(1));
    events(&mut s);
    sent(&mut s);
    s.handle_disconnect(ms(10));
    let (refusing, req) = dial(&mut s, ms(11));
    assert_eq!(req.session_id, 0x42);
    s.handle_disconnect(ms(12));
    assert!(matches!(
        &events(&mut s)[..],
        [SessionEvent::Suspended { .. }]
    ));
    (s, refusing)
}

/// [`refused_on_a_read_only_server`], the probe of the refusing host `ro` answered
/// `isro` (`answer`), and the next host down too.
fn probed_then_next_refused(answer: &[u8]) -> (Session, usize) {
    let (mut s, ro) = refused_on_a_read_only_server();
    transports(&mut s);
    s.handle_probe(ms(13), ro, answer);
    s.handle_transport_error(ms(14), TransportError::Refused);
    (s, ro)
}

/// The session 0x42, refused by the read-only host `ro`, served there by a read-only
/// stand-in (the bytes a real 3.8.0 read-only server sent), its watch re-armed on it.
fn on_a_stand_in() -> (Session, usize) {
    let (mut s, ro) = refused_on_a_read_only_server();
    // The refusing host is probed; the session meanwhile dials the next one.
    let t = transports(&mut s);
    assert!(t.contains(&Transport::Probe { host: ro }), "{t:?}");
    let next = t
        .iter()
        .find_map(|t| match t {
            Transport::Connect { host } => Some(*host),
            _ => None,
        })
        .expect("the next host dialled");
    assert_ne!(next, ro);
    s.handle_probe(ms(13), ro, b"ro");
    // The next host is down too: the read-only one is dialled next, for a stand-in.
    s.handle_transport_error(ms(14), TransportError::Refused);
    let (host, req) = dial(&mut s, ms(15));
    assert_eq!(host, ro);
    assert_eq!(
        (req.session_id, &req.passwd[..], req.read_only),
        (0, &[0u8; 16][..], true),
        "a new (read-only, local) session is asked for: the held one is not presented"
    );
    s.handle_bytes(ms(16), &recorded(READ_ONLY_SESSION));
    assert_eq!(
        events(&mut s),
        vec![SessionEvent::Reconnected { read_only: true }],
        "for the user the session is back, read-only"
    );
    assert_eq!(s.session_id(), 0x42, "the held session stays the session");
    assert_eq!(s.state(), SessionState::Connected);
    let frames = sent(&mut s);
    assert!(
        frames.iter().any(|(x, r)| *x == xid::SET_WATCHES
            && matches!(r, Request::SetWatches(w) if w.data_watches == vec![String::from("/w")])),
        "the watches are armed on the stand-in: {frames:?}"
    );
    (s, ro)
}

#[test]
fn a_session_a_read_only_server_refuses_is_served_there_by_a_read_only_stand_in() {
    let (mut s, _) = on_a_stand_in();
    // Reads go through it; a write gets the server's NotReadOnly, final.
    s.submit(ms(20), get("/w", false), Token(2)).unwrap();
    sent(&mut s);
    s.handle_bytes(ms(21), &data_reply(2));
    assert!(reply_tokens(&events(&mut s)).contains(&2));
    // The quorum is back: a probe finds a read-write host and the held session is
    // presented there, resumed, its watches re-armed.
    let (rw, at) = next_probe(&mut s);
    s.handle_probe(at, rw, b"rw");
    events(&mut s);
    let (host, req) = dial(&mut s, at);
    assert_eq!((host, req.session_id), (rw, 0x42));
    s.handle_bytes(at, &response(0x42, false));
    assert_eq!(
        events(&mut s),
        vec![SessionEvent::Reconnected { read_only: false }]
    );
    assert!(sent(&mut s).iter().any(|(x, _)| *x == xid::SET_WATCHES));
    assert_eq!(s.session_id(), 0x42);
}

/// Runs the session's timers (its pings answered) until it probes a host: that host
/// and when.
fn next_probe(s: &mut Session) -> (usize, Instant) {
    loop {
        let due = s.poll_timeout().unwrap();
        s.handle_timeout(due);
        if let Some(Transport::Probe { host }) = s.poll_transport() {
            return (host, due);
        }
        s.handle_bytes(due, &reply(xid::PING, 0, ErrorCode::Ok, None));
    }
}

/// `close()` on a stand-in closes the stand-in (its closeSession goes to the read-only
/// server, which answers it for the stand-in) but not the session, which that server
/// refused: it is not reported closed (`confirmed: false`); it expires at its timeout
/// on the quorum's side, its ephemeral nodes staying until then. The Java client,
/// which never serves a refused session through a stand-in, closes unconfirmed too:
/// without a connection to the session's server it sends nothing.
#[test]
fn closing_on_a_read_only_stand_in_does_not_report_the_session_closed() {
    let (mut s, _) = on_a_stand_in();
    s.close(ms(20), ms(1020));
    let frames = sent(&mut s);
    let close = frames
        .iter()
        .find_map(|(x, r)| matches!(r, Request::CloseSession).then_some(*x))
        .expect("the stand-in is closed");
    s.handle_bytes(ms(21), &reply(close, 0, ErrorCode::Ok, None));
    let ev = events(&mut s);
    assert_eq!(
        ev.last(),
        Some(&SessionEvent::Closed { confirmed: false }),
        "the stand-in's answer does not close the session: {ev:?}"
    );
    assert_eq!(s.state(), SessionState::Ended(SessionEnd::Closed));
}

/// Moving back to a read-write server leaves the stand-in to the read-only server, as
/// the Java client leaves a session a read-only server granted: no closeSession for
/// it (it holds no node: a read-only server creates none; its watches go when that
/// server times it out or rejoins a quorum and drops its clients); the connection is
/// closed and the session itself presented to the read-write server.
#[test]
fn a_stand_in_is_left_behind_when_the_session_moves_to_a_read_write_server() {
    let (mut s, ro) = on_a_stand_in();
    let (rw, at) = next_probe(&mut s);
    sent(&mut s);
    s.handle_probe(at, rw, b"rw");
    assert!(
        !sent(&mut s)
            .iter()
            .any(|(_, r)| matches!(r, Request::CloseSession)),
        "nothing more is written to the stand-in"
    );
    let t = transports(&mut s);
    assert_eq!(
        t,
        vec![Transport::Close, Transport::Connect { host: rw }],
        "the stand-in's connection closed, the read-write server dialled"
    );
    assert_ne!(rw, ro);
    assert!(matches!(
        &events(&mut s)[..],
        [SessionEvent::Suspended {
            reason: DisconnectReason::ReadWriteServerFound { .. }
        }]
    ));
    s.handle_connected(at);
    let mut out = BytesMut::new();
    assert!(s.poll_transmit(&mut out));
    assert_eq!(connect_request(&out).session_id, 0x42, "the session itself");
}

#[test]
fn a_stand_in_a_read_write_server_grants_is_not_taken_for_the_session() {
    let (mut s, ro) = probed_then_next_refused(b"ro");
    let (host, req) = dial(&mut s, ms(15));
    assert_eq!((host, req.session_id), (ro, 0));
    // Between the probe and the handshake the server became read-write: it grants
    // a new global session. It is not the session: the held one is presented next.
    s.handle_bytes(ms(16), &response(0x77, false));
    let ev = events(&mut s);
    assert!(
        !ev.iter().any(|e| matches!(
            e,
            SessionEvent::Connected { .. } | SessionEvent::Reconnected { .. }
        )),
        "{ev:?}"
    );
    assert_eq!(s.session_id(), 0x42);
    let (_, req) = dial(&mut s, ms(17));
    assert_eq!(req.session_id, 0x42);
}

#[test]
fn a_refusal_by_a_server_the_probe_does_not_find_read_only_changes_nothing() {
    // A server not serving at all (electing) answers `isro` with "null".
    let (mut s, _) = probed_then_next_refused(b"null");
    for _ in 0..3 {
        let (_, req) = dial(&mut s, ms(15));
        assert_eq!(req.session_id, 0x42, "never a new session");
        s.handle_disconnect(ms(16));
    }
}

/// 3.8's read-only server refuses a write from the first step of its pipeline
/// (`ReadOnlyRequestProcessor` answers NotReadOnly itself) while reads go on through
/// the rest: the refusal can overtake the replies to reads sent before it. Seen on a
/// real server as a dropped connection (requests in flight failing with
/// `ConnectionLoss`) while a tree cache and a reader shared the read-only session.
#[test]
fn a_write_refused_ahead_of_earlier_reads_completes_out_of_order() {
    let (mut s, _) = on_a_read_only_server();
    s.submit(ms(20), get("/w", false), Token(2)).unwrap();
    s.submit(
        ms(20),
        Request::SetData(SetDataRequest {
            path: String::from("/w"),
            data: Bytes::from_static(b"x"),
            version: -1,
        }),
        Token(3),
    )
    .unwrap();
    let xids: Vec<i32> = sent(&mut s).iter().map(|(x, _)| *x).collect();
    let [read, write] = xids[..] else {
        panic!("{xids:?}")
    };
    s.handle_bytes(ms(21), &reply(write, 9, ErrorCode::NotReadOnly, None));
    s.handle_bytes(ms(22), &data_reply(read));
    let ev = events(&mut s);
    assert!(
        !ev.iter()
            .any(|e| matches!(e, SessionEvent::Suspended { .. })),
        "the connection is kept: {ev:?}"
    );
    let replies: Vec<(u64, bool)> = ev
        .iter()
        .filter_map(|e| match e {
            SessionEvent::Reply(r) => Some((r.token.0, r.result.is_ok())),
            _ => None,
        })
        .collect();
    assert_eq!(replies, vec![(3, false), (2, true)]);
    assert_eq!(s.state(), SessionState::Connected);
}

/// A read-only server refuses `sync` (NotReadOnly) though it has no leader to catch
/// up with; every reader (a tree cache's load, a watched value, a config reader)
/// syncs first. Seen on a real server: the tree cache failed on its resync. On a
/// read-only server the session answers a sync itself, queued or not.
#[test]
fn a_recipes_sync_on_a_read_only_server_is_answered_by_the_session() {
    let (mut s, _) = on_a_read_only_server();
    let sync = || {
        Request::Sync(PathRequest {
            path: String::from("/w"),
        })
    };
    // A recipe's sync (requester 1): see the next test for a raw one.
    s.submit_from(ms(20), sync(), Token(2), 1, false).unwrap();
    s.submit(ms(20), get("/w", false), Token(3)).unwrap();
    let frames = sent(&mut s);
    assert!(
        !frames.iter().any(|(_, r)| matches!(r, Request::Sync(_))),
        "no sync on the wire: {frames:?}"
    );
    let ev = events(&mut s);
    assert!(
        ev.iter().any(|e| matches!(e, SessionEvent::Reply(r)
            if r.token == Token(2) && r.result == Ok(Response::Path(String::from("/w"))))),
        "{ev:?}"
    );
    // Queued behind a full window, too.
    s.handle_bytes(ms(21), &data_reply(frames[0].0));
    events(&mut s);
    s.handle_disconnect(ms(22));
    s.submit_from(ms(23), sync(), Token(4), 1, false).unwrap();
    assert!(events(&mut s)
        .iter()
        .all(|e| !matches!(e, SessionEvent::Reply(_))));
}

#[test]
fn a_raw_sync_on_a_read_only_server_goes_to_it_and_its_refusal_is_reported() {
    let (mut s, _) = on_a_read_only_server();
    let sync = Request::Sync(PathRequest {
        path: String::from("/w"),
    });
    s.submit(ms(20), sync, Token(2)).unwrap();
    let frames = sent(&mut s);
    assert!(
        matches!(frames.as_slice(), [(_, Request::Sync(_))]),
        "the caller's sync is on the wire: {frames:?}"
    );
    s.handle_bytes(ms(21), &reply(frames[0].0, 9, ErrorCode::NotReadOnly, None));
    let ev = events(&mut s);
    assert!(
        ev.iter().any(|e| matches!(e, SessionEvent::Reply(r)
            if r.token == Token(2) && r.result == Err(Error::from(ErrorCode::NotReadOnly)))),
        "{ev:?}"
    );
}
