//! Transcript tests: scripted server frames in, exact requests and events out.
//! Split by the session's parts: `connection`, `requests`, `watches`, `lanes`; the
//! helpers shared by all of them are here.

mod connection;
mod lanes;
mod read_only;
mod requests;
mod sasl;
mod watches;

use super::*;
use crate::error::Error;
use crate::proto::*;
use alloc::string::String;
use alloc::vec;
use bytes::{Bytes, BytesMut};
use core::time::Duration;
use link::TX_KEEP;

const T0: Instant = Instant::ZERO;

fn ms(n: u64) -> Instant {
    Instant::from_micros(n * 1000)
}

/// Transcript settings: 6 s sessions, no reconnect delay (so transcripts stay short),
/// expiry terminal. The tests of backoff and renewal use the defaults.
fn config(cs: &str) -> SessionConfig {
    let mut c = SessionConfig::new(cs.parse().unwrap());
    c.session_timeout = Duration::from_millis(6000);
    c.backoff_min = Duration::ZERO;
    c.renew_on_expiry = false;
    c
}

fn connect_response(session_id: i64, timeout_ms: i32) -> BytesMut {
    let mut b = BytesMut::new();
    encode_connect_response(
        &mut b,
        &ConnectResponse {
            protocol_version: 0,
            timeout_ms,
            session_id,
            passwd: Bytes::from_static(&[7; 16]),
            read_only: false,
        },
    );
    b
}

fn reply(xid: i32, zxid: i64, err: ErrorCode, body: Option<Response>) -> BytesMut {
    let mut b = BytesMut::new();
    encode_reply(
        &mut b,
        &ReplyHeader {
            xid,
            zxid,
            err: err.to_i32(),
        },
        body.as_ref(),
    );
    b
}

fn notification(t: EventType, path: &str) -> BytesMut {
    let mut b = BytesMut::new();
    encode_notification(
        &mut b,
        &WatcherEvent {
            event_type: t.to_i32(),
            state: 3,
            path: path.into(),
        },
    );
    b
}

/// Frames written since the last call, decoded as the server would.
fn sent(s: &mut Session) -> Vec<(i32, Request)> {
    let mut out = BytesMut::new();
    s.poll_transmit(&mut out);
    let mut dec = FrameDecoder::new(usize::MAX >> 1);
    let mut input = &out[..];
    let mut frames = Vec::new();
    while let Some(f) = dec.decode(&mut input).unwrap() {
        let (h, body) = decode_request(f).unwrap();
        frames.push((h.xid, Request::decode(h.op, body).unwrap()));
    }
    frames
}

fn events(s: &mut Session) -> Vec<SessionEvent> {
    core::iter::from_fn(|| s.poll_event()).collect()
}

/// `ev` is exactly one `Connected` event, for session `id`.
fn assert_connected(ev: &[SessionEvent], id: i64) {
    assert!(
        matches!(ev, [SessionEvent::Connected { session_id, .. }] if *session_id == id),
        "{ev:?}"
    );
}

fn transports(s: &mut Session) -> Vec<Transport> {
    core::iter::from_fn(|| s.poll_transport()).collect()
}

fn get(path: &str, watch: bool) -> Request {
    Request::GetData(PathWatch {
        path: path.into(),
        watch,
    })
}

fn exists(path: &str, watch: bool) -> Request {
    Request::Exists(PathWatch {
        path: path.into(),
        watch,
    })
}

/// The handshake's request, first in `out`.
fn add_watch(path: &str, mode: i32) -> Request {
    Request::AddWatch(AddWatchRequest {
        path: path.into(),
        mode,
    })
}

/// An empty node at `path` (open ACL) created as `mode` says.
fn create(path: &str, mode: CreateMode) -> Request {
    Request::Create(CreateRequest::new(
        path,
        Bytes::new(),
        Acl::open_unsafe(),
        mode,
    ))
}

fn connect_request(out: &[u8]) -> ConnectRequest {
    decode_exact(
        FrameDecoder::new(100)
            .decode(&mut &out[..])
            .unwrap()
            .unwrap(),
    )
    .unwrap()
}

/// `addauth digest u:p`.
fn digest_auth() -> Request {
    Request::Auth(AuthPacket {
        auth_type: 0,
        scheme: "digest".into(),
        auth: Bytes::from_static(b"u:p"),
    })
}

/// A session connected to host 0 with session id 0x42, timeout 6 s.
fn connected() -> Session {
    let mut s = Session::new(config("h:1"), T0);
    assert_eq!(transports(&mut s), vec![Transport::Connect { host: 0 }]);
    s.handle_connected(ms(1));
    let mut out = BytesMut::new();
    assert!(s.poll_transmit(&mut out));
    let req = connect_request(&out);
    assert_eq!(req.timeout_ms, 6000);
    assert_eq!(req.session_id, 0);
    s.handle_bytes(ms(2), &connect_response(0x42, 6000));
    assert_eq!(
        events(&mut s),
        vec![SessionEvent::Connected {
            session_id: 0x42,
            timeout: Duration::from_millis(6000),
            read_only: false
        }]
    );
    s
}

fn stat(mzxid: i64) -> Stat {
    Stat {
        czxid: 1,
        mzxid,
        ..Stat::default()
    }
}

/// A connected session with `max_in_flight` = `bound` and `max_pending` = `pending`.
fn connected_bounded(bound: usize, pending: usize) -> Session {
    let mut c = config("h:1");
    c.max_in_flight = bound;
    c.max_pending = pending;
    let mut s = Session::new(c, T0);
    establish(&mut s, 0x42, 6000);
    s
}

/// Connects `s` (at 1 ms) and establishes session `id` with `timeout_ms` (at 2 ms);
/// the events it reports are dropped.
fn establish(s: &mut Session, id: i64, timeout_ms: i32) {
    s.handle_connected(ms(1));
    s.poll_transmit(&mut BytesMut::new());
    s.handle_bytes(ms(2), &connect_response(id, timeout_ms));
    events(s);
}

fn data_reply(xid: i32) -> BytesMut {
    reply(
        xid,
        i64::from(xid),
        ErrorCode::Ok,
        Some(Response::Data {
            data: Bytes::new(),
            stat: stat(1),
        }),
    )
}

fn reply_tokens(ev: &[SessionEvent]) -> Vec<u64> {
    ev.iter()
        .filter_map(|e| match e {
            SessionEvent::Reply(r) => Some(r.token.0),
            _ => None,
        })
        .collect()
}
