//! The SASL step of the handshake, with a scripted mechanism (the DIGEST-MD5 hashes
//! are checked in `crate::sasl`, the real exchange against a real server in
//! `tests/adapters/sasl_both.rs`).

use super::*;
use crate::sasl::{Exchange, Mechanism};
use alloc::boxed::Box;
use alloc::string::ToString;
use alloc::sync::Arc;
use alloc::vec::Vec;

/// Sends `hello`, answers `c1` with `r1`, completes on `ok`; records the random bytes.
#[derive(Debug)]
struct Scripted;

#[derive(Debug)]
struct ScriptedExchange {
    random: [u8; 32],
    step: u8,
}

impl Mechanism for Scripted {
    fn name(&self) -> &'static str {
        "SCRIPTED"
    }
    fn start(&self, random: [u8; 32]) -> Box<dyn Exchange> {
        Box::new(ScriptedExchange { random, step: 0 })
    }
}

impl Exchange for ScriptedExchange {
    fn initial_response(&mut self) -> Result<Vec<u8>, SaslFailure> {
        let mut t = b"hello".to_vec();
        t.push(self.random[0]);
        Ok(t)
    }
    fn evaluate_challenge(&mut self, c: &[u8]) -> Result<Option<Vec<u8>>, SaslFailure> {
        self.step += 1;
        match (self.step, c) {
            (1, b"c1") => Ok(Some(b"r1".to_vec())),
            (2, b"ok") => Ok(None),
            _ => Err(SaslFailure::BadChallenge("script")),
        }
    }
    fn is_complete(&self) -> bool {
        self.step == 2
    }
}

fn sasl_config() -> SessionConfig {
    let mut c = config("h:1");
    c.sasl = Some(Arc::new(Scripted));
    c
}

fn token(t: &[u8]) -> Request {
    Request::Sasl(SaslToken {
        token: Bytes::copy_from_slice(t),
    })
}

fn server_token(xid: i32, t: &'static [u8]) -> BytesMut {
    reply(
        xid,
        0,
        ErrorCode::Ok,
        Some(Response::Sasl(Bytes::from_static(t))),
    )
}

/// Gives `random` bytes, connects at `at` and answers the handshake with `session_id`
/// (timeout 6 s) at `at + 1`: the SASL exchange starts.
fn handshake(s: &mut Session, at: u64, session_id: i64, random: u8) {
    s.handle_random([random; 32]);
    s.handle_connected(ms(at));
    s.poll_transmit(&mut BytesMut::new());
    s.handle_bytes(ms(at + 1), &connect_response(session_id, 6000));
}

/// Dials, handshakes with `session_id`, and checks that only the SASL exchange goes
/// out until it completes; returns the events of the completion.
fn authenticate(s: &mut Session, at: u64, session_id: i64, random: u8) -> Vec<SessionEvent> {
    handshake(s, at, session_id, random);
    let xid = s.window.next_xid();
    assert_eq!(
        sent(s),
        vec![(xid, token(&[b'h', b'e', b'l', b'l', b'o', random]))]
    );
    assert_eq!(
        events(s),
        vec![],
        "not established before the exchange completes"
    );
    assert_eq!(
        s.state(),
        if s.identity.suspended {
            SessionState::Suspended
        } else {
            SessionState::Connecting
        }
    );
    s.handle_bytes(ms(at + 2), &server_token(xid, b"c1"));
    assert_eq!(sent(s), vec![(xid, token(b"r1"))]);
    s.handle_bytes(ms(at + 3), &server_token(xid, b"ok"));
    events(s)
}

#[test]
fn sasl_runs_first_on_every_connection_before_auth_watches_and_requests() {
    let mut s = Session::new(sasl_config(), T0);
    transports(&mut s);
    s.submit(T0, digest_auth(), Token(9)).unwrap();
    s.submit(T0, get("/d", true), Token(1)).unwrap();
    let ev = authenticate(&mut s, 1, 0x42, 1);
    assert_connected(&ev, 0x42);
    let frames = sent(&mut s);
    assert_eq!(frames[0].0, xid::AUTH);
    assert_eq!(frames[1], (1, get("/d", true)));
    let mut r = reply(xid::AUTH, 0, ErrorCode::Ok, None);
    r.extend_from_slice(&data_reply(1));
    s.handle_bytes(ms(6), &r);
    events(&mut s);

    // A resumed session is authenticated again, before the replay and the watches.
    s.handle_disconnect(ms(7));
    events(&mut s);
    transports(&mut s);
    let ev = authenticate(&mut s, 10, 0x42, 2);
    assert_eq!(ev, vec![SessionEvent::Reconnected { read_only: false }]);
    let frames = sent(&mut s);
    assert_eq!(frames[0].0, xid::AUTH);
    assert_eq!(frames[1].0, xid::SET_WATCHES);
}

#[test]
fn a_refused_exchange_ends_the_session_naming_mechanism_and_reason() {
    let mut s = Session::new(sasl_config(), T0);
    transports(&mut s);
    s.submit(T0, get("/a", false), Token(1)).unwrap();
    handshake(&mut s, 1, 0x42, 0);
    let xid = sent(&mut s)[0].0;
    s.handle_bytes(ms(3), &server_token(xid, b"c1"));
    sent(&mut s);
    s.handle_bytes(
        ms(4),
        &reply(xid, 0, ErrorCode::SessionClosedRequireSaslAuth, None),
    );
    let why = AuthFailure::Sasl {
        mechanism: "SCRIPTED",
        reason: SaslFailure::Refused(ErrorCode::SessionClosedRequireSaslAuth),
    };
    let ev = events(&mut s);
    assert_eq!(ev.last(), Some(&SessionEvent::AuthFailed(why)));
    assert!(ev.contains(&SessionEvent::Reply(Reply {
        token: Token(1),
        zxid: 0,
        result: Err(Error::AuthFailed(why)),
        watch: None,
    })));
    // Final: the socket is closed and nothing is dialled again, whatever time passes.
    s.handle_disconnect(ms(5));
    s.handle_timeout(ms(60_000));
    assert_eq!(transports(&mut s), vec![Transport::Close]);
    assert_eq!(s.state(), SessionState::Ended(SessionEnd::AuthFailed(why)));
    assert!(Error::AuthFailed(why)
        .to_string()
        .contains("SASL SCRIPTED: the server refused the credentials"));
}

#[test]
fn a_challenge_the_mechanism_rejects_and_missing_random_bytes_are_final() {
    let mut s = Session::new(sasl_config(), T0);
    handshake(&mut s, 1, 0x42, 0);
    let xid = sent(&mut s)[0].0;
    s.handle_bytes(ms(3), &server_token(xid, b"nonsense"));
    assert_eq!(
        s.state(),
        SessionState::Ended(SessionEnd::AuthFailed(AuthFailure::Sasl {
            mechanism: "SCRIPTED",
            reason: SaslFailure::BadChallenge("script"),
        }))
    );

    let mut s = Session::new(sasl_config(), T0);
    s.handle_connected(ms(1));
    s.poll_transmit(&mut BytesMut::new());
    s.handle_bytes(ms(2), &connect_response(0x42, 6000));
    assert!(sent(&mut s).is_empty());
    assert_eq!(
        s.state(),
        SessionState::Ended(SessionEnd::AuthFailed(AuthFailure::Sasl {
            mechanism: "SCRIPTED",
            reason: SaslFailure::NoRandom,
        }))
    );
}

#[test]
fn a_silent_or_closed_connection_during_the_exchange_is_retried_not_final() {
    let mut s = Session::new(sasl_config(), T0);
    transports(&mut s);
    handshake(&mut s, 1, 0x42, 0);
    sent(&mut s);
    // No answer within the attempt's time: the connection is dropped and redialled.
    let deadline = s.poll_timeout().unwrap();
    s.handle_timeout(deadline);
    assert_eq!(
        transports(&mut s),
        vec![Transport::Close, Transport::Connect { host: 0 }]
    );
    assert_eq!(s.last_failure(), Some(&DisconnectReason::NoHandshakeReply));
    assert!(matches!(
        events(&mut s)[..],
        [SessionEvent::Unreachable { .. }]
    ));
    // The server made the session on the first connection: it is resumed, and
    // reported established for the first time.
    let ev = authenticate(&mut s, 3000, 0x42, 3);
    assert_connected(&ev, 0x42);
}

#[test]
fn a_server_requiring_sasl_ends_a_session_without_it_once() {
    let mut s = connected();
    s.submit(ms(3), get("/a", false), Token(1)).unwrap();
    sent(&mut s);
    s.handle_bytes(
        ms(4),
        &reply(1, 0, ErrorCode::SessionClosedRequireSaslAuth, None),
    );
    s.handle_disconnect(ms(5));
    s.handle_timeout(ms(60_000));
    assert_eq!(transports(&mut s), vec![Transport::Close]);
    let ev = events(&mut s);
    assert_eq!(
        ev.last(),
        Some(&SessionEvent::AuthFailed(AuthFailure::SaslRequired))
    );
    assert_eq!(
        ev[0],
        SessionEvent::Reply(Reply {
            token: Token(1),
            zxid: 0,
            result: Err(Error::AuthFailed(AuthFailure::SaslRequired)),
            watch: None,
        })
    );
}
