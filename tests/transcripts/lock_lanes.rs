//! Issue 25 (item 4): thousands of lock waiters of one session entering at once must
//! not hold up the holder's release. Driven through the core `Client` by hand: a holder
//! and twenty waiters of one session on one lock, the session's window two requests
//! wide; the waiters' entries (creates and listings) fill the window and queue behind
//! it when the holder releases. The release must be the next request written, not the
//! one after every queued entry (measured at 10,000 waiters before the fix: the first
//! release waited 200–450 ms in the session's queue behind up to 9,500 requests).
#![allow(clippy::disallowed_methods)]

use bytes::{Bytes, BytesMut};
use zk_recipes::client::{Client, ClientEvent, Options, RecipeHandle};
use zk_recipes::proto::*;
use zk_recipes::recipe::lock::{node_id, Lock, LockConfig, LockEvent, LockKind};
use zk_recipes::time::Instant;

const DIR: &str = "/lanes";

/// A connected client whose session keeps at most `window` requests on the wire.
fn connected_client(window: usize) -> Client {
    let t = Instant::ZERO;
    let options = Options::new("127.0.0.1:2181")
        .unwrap()
        .max_in_flight(window);
    let mut client = Client::new(options, t);
    assert!(client.poll_transport().is_some(), "it dials");
    client.handle_connected(t);
    let mut out = BytesMut::new();
    assert!(client.poll_transmit(&mut out), "the connect request");
    let mut answer = BytesMut::new();
    encode_connect_response(
        &mut answer,
        &ConnectResponse {
            protocol_version: 0,
            timeout_ms: 10_000,
            session_id: 0x42,
            passwd: Bytes::from_static(&[7; 16]),
            read_only: false,
        },
    );
    client.handle_bytes(t, &answer);
    while client.poll_event().is_some() {}
    client
}

/// The requests written since the last call, as the server decodes them.
fn written(client: &mut Client) -> Vec<(i32, Request)> {
    let mut out = BytesMut::new();
    while client.poll_transmit(&mut out) {}
    let mut dec = FrameDecoder::new(usize::MAX >> 1);
    let mut input = &out[..];
    let mut frames = Vec::new();
    while let Some(f) = dec.decode(&mut input).unwrap() {
        let (h, body) = decode_request(f).unwrap();
        frames.push((h.xid, Request::decode(h.op, body).unwrap()));
    }
    frames
}

fn answer(client: &mut Client, xid: i32, body: Response) {
    let mut b = BytesMut::new();
    encode_reply(
        &mut b,
        &ReplyHeader {
            xid,
            zxid: i64::from(xid),
            err: 0,
        },
        Some(&body),
    );
    client.handle_bytes(Instant::ZERO, &b);
}

fn waiter(client: &mut Client, i: u64) -> RecipeHandle<Lock> {
    let id = node_id(7, i);
    let h = client.add(
        Instant::ZERO,
        Lock::new(LockConfig::new(DIR, LockKind::Exclusive, &id)),
    );
    client.command(Instant::ZERO, h, |l, now| l.acquire(now, None));
    h
}

#[test]
fn a_release_is_written_before_the_entries_queued_ahead_of_it() {
    let mut c = connected_client(2);
    // The holder: its create and listing, answered: it holds.
    let holder = waiter(&mut c, 0);
    let w = written(&mut c);
    assert_eq!(w.len(), 2, "create and listing: {w:?}");
    let name = format!("_c_{}-lock-0000000000", node_id(7, 0));
    let own = format!("{DIR}/{name}");
    answer(
        &mut c,
        w[0].0,
        Response::PathStat {
            path: own.clone(),
            stat: Stat {
                czxid: 1,
                ephemeral_owner: 0x42,
                ..Stat::default()
            },
        },
    );
    answer(&mut c, w[1].0, Response::Children(vec![name.clone()]));
    let mut acquired = false;
    while let Some(e) = c.poll_event() {
        if let ClientEvent::Recipe { event, .. } = e {
            acquired |= matches!(
                event.downcast_ref::<LockEvent>(),
                Some(LockEvent::Acquired { .. })
            );
        }
    }
    assert!(acquired, "the holder holds");
    // Twenty waiters enter: the first one's create and listing fill the window, the
    // rest queue.
    for i in 1..=20 {
        waiter(&mut c, i);
    }
    let entry = written(&mut c);
    assert_eq!(entry.len(), 2, "the window is full: {entry:?}");
    assert!(matches!(entry[0].1, Request::Create2(_)));
    // The holder releases: nothing can go out yet.
    c.command(Instant::ZERO, holder, |l, now| l.release(now));
    assert_eq!(written(&mut c), vec![], "the window is still full");
    // One answer makes room for one request: the release, not the next entry.
    let waiter_node = format!("{DIR}/_c_{}-lock-0000000001", node_id(7, 1));
    answer(
        &mut c,
        entry[0].0,
        Response::PathStat {
            path: waiter_node,
            stat: Stat {
                czxid: 3,
                ephemeral_owner: 0x42,
                ..Stat::default()
            },
        },
    );
    let next = written(&mut c);
    assert_eq!(
        next.first().map(|(_, r)| r.clone()),
        Some(Request::Delete(DeleteRequest {
            path: own,
            version: -1
        })),
        "the holder's release goes first: {next:?}"
    );
}
