//! Both adapters against a misbehaving fake server (issue 9, defects 1, 9, 10, 11):
//! every mode of `zk_recipes_testing::FakeServer` — malformed frames of each kind,
//! resets, silence after the handshake, a trickle, no handshake, an HTTP server, a
//! refused session, a tiny granted timeout, a server that stops reading. For each:
//! `connect` ends with a clear error or a session; a raw call ends with a clear error
//! within its deadline; a lock's `acquire_timeout(2 s)` returns within the deadline
//! plus the try grace; nothing panics; and the client opens no more connections than
//! its backoff schedule allows.
// A test (or example) is a driver: it owns the clock.
#![allow(clippy::disallowed_methods)]

use crate::support;

use std::time::{Duration, Instant};

use bytes::Bytes;
use support::Zk;
use zk_recipes::client::{Error, Status};
use zk_recipes::session::{DisconnectReason, TransportError};
use zk_recipes_testing::{FakeServer, Misbehaviour};

type B = zk_recipes_blocking::Client;
type T = zk_recipes_tokio::Client;

/// 1 s sessions: read timeout 0.67 s, under the blocking adapter's 1 s call timeout, so
/// the session's own verdict is what a raw call reports.
const SESSION: Duration = Duration::from_secs(1);

/// How long `connect` keeps trying a server that never gives a session.
const CONNECT: Duration = Duration::from_secs(2);

fn connect<Z: Zk>(server: &FakeServer) -> Result<Z, Error> {
    Z::connect_within(&server.connect_string(), SESSION, true, CONNECT, false)
}

/// What a mode must give, checked through one adapter.
fn check<Z: Zk>(mode: Misbehaviour) {
    let server = FakeServer::start(mode).unwrap();
    let started = Instant::now();
    let zk = match connect::<Z>(&server) {
        Ok(zk) => zk,
        Err(e) => {
            let took = started.elapsed();
            assert!(
                matches!(e, Error::Unreachable(_)),
                "{} {mode:?}: connect failed with {e:?}",
                Z::NAME
            );
            // Issue 25, item 2: it kept trying (every mode here fails every attempt)
            // until its connect timeout, not just once.
            assert!(
                took >= CONNECT && took < CONNECT + Duration::from_secs(2),
                "{} {mode:?}: connect took {took:?}",
                Z::NAME
            );
            assert!(
                server.connections() >= 2,
                "{} {mode:?}: {} connection(s) in {took:?}",
                Z::NAME,
                server.connections()
            );
            expect_unreachable(mode, &e);
            return;
        }
    };
    // A raw call ends with a clear error within its deadline.
    let t = Instant::now();
    let r = zk.exists("/x");
    let took = t.elapsed();
    assert!(
        took < Duration::from_millis(3000),
        "{} {mode:?}: raw call took {took:?}",
        Z::NAME
    );
    match mode {
        Misbehaviour::Healthy => assert_eq!(r, Ok(false), "{} {mode:?}", Z::NAME),
        _ => assert!(
            matches!(
                r,
                Err(Error::ConnectionLoss | Error::SessionExpired | Error::Timeout)
            ) || r == Ok(false),
            "{} {mode:?}: {r:?}",
            Z::NAME
        ),
    }
    // A lock attempt ends by its deadline plus the try grace.
    let t = Instant::now();
    let got = zk.lock_timeout("/app/lock", Duration::from_secs(2));
    let took = t.elapsed();
    assert!(
        took < Duration::from_millis(4000),
        "{} {mode:?}: acquire_timeout(2 s) took {took:?} ({:?})",
        Z::NAME,
        got.as_ref().map(|g| g.is_some())
    );
    assert!(
        matches!(got, Ok(None) | Err(_)),
        "{} {mode:?}: a lock from a server that stores nothing",
        Z::NAME
    );
    // The reconnect schedule: 50 ms doubling to 2 s after connections that fail soon
    // after the handshake. Over the whole check (about 5 s) that is a handful.
    std::thread::sleep(Duration::from_millis(500));
    let total = started.elapsed();
    let conns = server.connections();
    let bound = 6 + (total.as_millis() / 250) as usize;
    assert!(
        conns <= bound,
        "{} {mode:?}: {conns} connections in {total:?} (bound {bound})",
        Z::NAME
    );
    zk.close();
}

fn expect_unreachable(mode: Misbehaviour, e: &Error) {
    let Error::Unreachable(hosts) = e else {
        panic!("{e:?}")
    };
    // The one host, named with its reason.
    assert_eq!(hosts.hosts.len(), 1, "{e}");
    assert_eq!(hosts.hosts[0].1.as_ref(), Some(&hosts.last), "{e}");
    assert!(e.to_string().contains("127.0.0.1:"), "{e}");
    let reason = &hosts.last;
    let ok = match mode {
        Misbehaviour::ResetAtAccept | Misbehaviour::CloseBeforeHandshake => {
            matches!(reason, DisconnectReason::ClosedBeforeHandshake(_))
        }
        Misbehaviour::NoHandshake => *reason == DisconnectReason::NoHandshakeReply,
        Misbehaviour::Http => *reason == DisconnectReason::NotZooKeeper,
        Misbehaviour::ExpiredHandshake => *reason == DisconnectReason::SessionRefused,
        _ => false,
    };
    assert!(ok, "{mode:?}: {reason:?} ({e})");
}

macro_rules! modes {
    ($($name:ident: $mode:ident,)*) => {
        $(
            #[test]
            fn $name() {
                check::<B>(Misbehaviour::$mode);
                check::<T>(Misbehaviour::$mode);
            }
        )*
    };
}

modes! {
    garbage_frames: Garbage,
    negative_length: NegativeLength,
    two_gib_length: HugeLength,
    truncated_reply_then_close: Truncated,
    reply_with_an_xid_never_sent: UnknownXid,
    reset_at_accept: ResetAtAccept,
    closed_before_the_handshake: CloseBeforeHandshake,
    silent_after_the_handshake: SilentAfterHandshake,
    a_reply_trickled_a_byte_a_second: Trickle,
    no_handshake_answer: NoHandshake,
    an_http_server: Http,
    a_session_refused: ExpiredHandshake,
    a_one_millisecond_session: TinyTimeout,
    healthy_baseline: Healthy,
}

#[test]
fn a_refused_connection_says_so_at_once() {
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let cs = format!("127.0.0.1:{port}");
    let refused = Some(DisconnectReason::Transport(TransportError::Refused));
    for (fast, name) in [(true, "fail fast"), (false, "until the deadline")] {
        let started = Instant::now();
        for e in [
            B::connect_within(&cs, SESSION, true, CONNECT, fast).err(),
            T::connect_within(&cs, SESSION, true, CONNECT, fast).err(),
        ] {
            let Some(Error::Unreachable(hosts)) = &e else {
                panic!("{name}: {e:?}")
            };
            assert_eq!(hosts.hosts, vec![(cs.clone(), refused.clone())], "{name}");
            assert_eq!(Some(hosts.last.clone()), refused, "{name}");
            let text = e.as_ref().unwrap().to_string();
            assert!(
                text.contains(&format!("{cs}: connection refused")),
                "{name}: {text}"
            );
        }
        let took = started.elapsed();
        if fast {
            assert!(took < CONNECT, "{name}: {took:?}");
        } else {
            assert!(took >= 2 * CONNECT, "{name}: {took:?}");
        }
    }
}

/// Issue 25, item 2: every host of a connection string is named with its own reason.
#[test]
fn every_host_is_named_with_its_last_failure() {
    let refused = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let http = FakeServer::start(Misbehaviour::Http).unwrap();
    let cs = format!("127.0.0.1:{refused},{}", http.addr());
    for e in [
        B::connect_within(&cs, SESSION, true, CONNECT, false).err(),
        T::connect_within(&cs, SESSION, true, CONNECT, false).err(),
    ] {
        let Some(Error::Unreachable(hosts)) = &e else {
            panic!("{e:?}")
        };
        assert_eq!(
            hosts.hosts,
            vec![
                (
                    format!("127.0.0.1:{refused}"),
                    Some(DisconnectReason::Transport(TransportError::Refused))
                ),
                (
                    http.addr().to_string(),
                    Some(DisconnectReason::NotZooKeeper)
                ),
            ]
        );
    }
}

/// Issue 9, defect 1: with writes blocked (the peer stopped reading, 40 × 1 MiB
/// queued), timers still run: `Suspended` at the read timeout, `Expired` at the
/// session timeout.
fn writes_never_stall_timers<Z: Zk>() {
    let server = FakeServer::start(Misbehaviour::StopReading).unwrap();
    let zk = Z::connect_with(&server.connect_string(), Duration::from_secs(2), false).unwrap();
    let started = Instant::now();
    let big = Bytes::from(vec![7u8; 1_000_000]);
    for _ in 0..40 {
        zk.fire_set_data("/big", big.clone());
    }
    let suspended = zk.wait_status(Duration::from_secs(5), |s| *s == Status::Suspended);
    let at = started.elapsed();
    assert_eq!(suspended, Some(Status::Suspended), "{}", Z::NAME);
    assert!(
        at < Duration::from_millis(2500),
        "{}: Suspended after {at:?} (read timeout 1.33 s)",
        Z::NAME
    );
    let expired = zk.wait_status(Duration::from_secs(5), |s| {
        matches!(s, Status::Expired { .. })
    });
    let at = started.elapsed();
    assert!(
        expired.is_some() || matches!(zk.status(), Status::Expired { .. }),
        "{}",
        Z::NAME
    );
    assert!(
        at < Duration::from_millis(3500),
        "{}: Expired after {at:?}",
        Z::NAME
    );
}

#[test]
fn a_peer_that_stops_reading_does_not_stop_the_timers() {
    writes_never_stall_timers::<B>();
    writes_never_stall_timers::<T>();
}
