//! Submitting and the request window: refusals, bounds, chroot, `max_in_flight`,
//! the throttled window, counters, the transmit buffer.

use super::*;

#[test]
fn bad_requests_are_refused_before_anything_is_queued() {
    let mut s = connected();
    let e = s.submit(ms(3), get("/a/", false), Token(1)).unwrap_err();
    assert_eq!(
        e,
        SubmitError::InvalidPath {
            path: "/a/".into(),
            error: PathError::TrailingSlash
        }
    );
    let big = Request::SetData(SetDataRequest {
        path: "/a".into(),
        data: Bytes::from(vec![0; DEFAULT_MAX_REQUEST]),
        version: -1,
    });
    assert!(matches!(
        s.submit(ms(3), big, Token(2)),
        Err(SubmitError::TooLarge(_))
    ));
    assert_eq!(
        s.submit(ms(3), Request::Ping, Token(3)),
        Err(SubmitError::NotAllowed(OpCode::Ping))
    );
    // Sequential prefixes may end in '/'.
    let seq = create("/q/", CreateMode::PersistentSequential);
    s.submit(ms(3), seq, Token(4)).unwrap();
    assert_eq!(sent(&mut s).len(), 1);
    assert_eq!(s.pending(), 1);
}

#[test]
fn pending_requests_are_bounded() {
    let mut c = config("h:1");
    c.max_pending = 2;
    let mut s = Session::new(c, T0);
    s.submit(T0, get("/a", false), Token(1)).unwrap();
    s.submit(T0, get("/a", false), Token(2)).unwrap();
    assert_eq!(
        s.submit(T0, get("/a", false), Token(3)),
        Err(SubmitError::TooManyPending)
    );
}

#[test]
fn chroot_is_applied_and_stripped() {
    let mut s = Session::new(config("h:1/app"), T0);
    establish(&mut s, 1, 6000);
    let create = create("/x-", CreateMode::EphemeralSequential);
    s.submit(ms(3), create, Token(1)).unwrap();
    s.submit(ms(3), get("/", true), Token(2)).unwrap();
    let frames = sent(&mut s);
    assert!(matches!(&frames[0].1, Request::Create(r) if r.path == "/app/x-"));
    assert_eq!(frames[1].1, get("/app", true));
    let mut r = reply(
        1,
        1,
        ErrorCode::Ok,
        Some(Response::Path("/app/x-0000000001".into())),
    );
    r.extend_from_slice(&reply(
        2,
        1,
        ErrorCode::Ok,
        Some(Response::Data {
            data: Bytes::new(),
            stat: stat(1),
        }),
    ));
    r.extend_from_slice(&notification(EventType::NodeDataChanged, "/app"));
    s.handle_bytes(ms(4), &r);
    let ev = events(&mut s);
    assert_eq!(
        ev[0],
        SessionEvent::Reply(Reply {
            token: Token(1),
            zxid: 1,
            result: Ok(Response::Path("/x-0000000001".into())),
            watch: None,
        })
    );
    assert_eq!(
        ev[2],
        SessionEvent::Watch {
            token: Token(2),
            event: WatchEvent {
                event_type: EventType::NodeDataChanged,
                path: "/".into()
            }
        }
    );
}

/// A session with a window of `bound` that submitted reads of `/1` to `/<n>` (tokens
/// 1 to `n`) at 3 ms.
fn reads(bound: usize, n: u64) -> Session {
    let mut s = connected_bounded(bound, 100);
    for i in 1..=n {
        s.submit(ms(3), get(&alloc::format!("/{i}"), false), Token(i))
            .unwrap();
    }
    s
}

#[test]
fn at_most_max_in_flight_on_the_wire_the_rest_go_out_in_order_as_replies_come() {
    let mut s = reads(2, 5);
    assert_eq!(
        sent(&mut s),
        vec![(1, get("/1", false)), (2, get("/2", false))],
        "two on the wire, three queued"
    );
    assert_eq!((s.in_flight(), s.pending()), (2, 5));
    // One reply makes room for exactly one more, the next in submission order.
    s.handle_bytes(ms(4), &data_reply(1));
    assert_eq!(sent(&mut s), vec![(3, get("/3", false))]);
    assert_eq!(reply_tokens(&events(&mut s)), vec![1]);
    // A request submitted now queues behind the older ones, even with room later.
    s.submit(ms(5), get("/6", false), Token(6)).unwrap();
    assert!(sent(&mut s).is_empty());
    let mut two = data_reply(2);
    two.extend_from_slice(&data_reply(3));
    s.handle_bytes(ms(6), &two);
    assert_eq!(
        sent(&mut s),
        vec![(4, get("/4", false)), (5, get("/5", false))]
    );
    let mut rest = data_reply(4);
    rest.extend_from_slice(&data_reply(5));
    s.handle_bytes(ms(7), &rest);
    assert_eq!(sent(&mut s), vec![(6, get("/6", false))]);
    s.handle_bytes(ms(8), &data_reply(6));
    assert_eq!(reply_tokens(&events(&mut s)), vec![2, 3, 4, 5, 6]);
    assert_eq!(s.pending(), 0);
    let c = s.counters();
    assert_eq!((c.requests_sent, c.replies_received), (6, 6));
    assert_eq!(c.control_sent, 1, "the connect request");
}

#[test]
fn pings_and_auth_bypass_the_in_flight_bound() {
    let mut s = connected_bounded(1, 100);
    s.submit(ms(3), get("/a", false), Token(1)).unwrap();
    s.submit(ms(3), get("/b", false), Token(2)).unwrap();
    assert_eq!(sent(&mut s), vec![(1, get("/a", false))]);
    // Auth goes out at once although the wire is full.
    let auth = digest_auth();
    s.submit(ms(3), auth.clone(), Token(3)).unwrap();
    assert_eq!(sent(&mut s), vec![(xid::AUTH, auth)]);
    // So does a ping once the connection has been quiet for the ping interval (2 s of
    // a 6 s session), and nothing else.
    s.handle_bytes(ms(1000), &reply(xid::AUTH, 0, ErrorCode::Ok, None));
    s.handle_timeout(ms(2004));
    assert_eq!(sent(&mut s), vec![(xid::PING, Request::Ping)]);
    s.handle_bytes(ms(2005), &reply(xid::PING, 0, ErrorCode::Ok, None));
    assert!(sent(&mut s).is_empty(), "a ping answer makes no room");
    s.handle_bytes(ms(2006), &data_reply(1));
    assert_eq!(sent(&mut s), vec![(2, get("/b", false))]);
    let c = s.counters();
    assert_eq!(c.requests_sent, 2);
    assert_eq!(c.control_sent, 3, "connect, auth, ping");
}

#[test]
fn beyond_max_pending_a_request_is_refused_as_overloaded() {
    let mut s = connected_bounded(1, 3);
    for i in 1..=3u64 {
        s.submit(ms(3), get("/a", false), Token(i)).unwrap();
    }
    let refused = s.submit(ms(3), get("/a", false), Token(4));
    assert_eq!(refused, Err(SubmitError::TooManyPending));
    let e = Error::from(refused.unwrap_err());
    assert_eq!(e, Error::Overloaded);
    assert!(e.is_retryable() && !e.may_have_applied());
    assert_eq!(sent(&mut s).len(), 1, "the refused one was not queued");
    // Once a reply came back there is room for one more.
    s.handle_bytes(ms(4), &data_reply(1));
    s.submit(ms(4), get("/b", false), Token(5)).unwrap();
    assert_eq!(sent(&mut s), vec![(2, get("/a", false))]);
}

#[test]
fn close_goes_after_everything_queued_under_the_bound() {
    let mut s = connected_bounded(1, 100);
    s.submit(ms(3), get("/a", false), Token(1)).unwrap();
    s.submit(ms(3), get("/b", false), Token(2)).unwrap();
    s.close(ms(3), ms(5003));
    assert_eq!(s.state(), SessionState::Closing);
    assert_eq!(sent(&mut s), vec![(1, get("/a", false))]);
    // The last queued request goes out, and the close right behind it (nothing
    // follows a close, so it is not held back by the bound).
    s.handle_bytes(ms(4), &data_reply(1));
    assert_eq!(
        sent(&mut s),
        vec![(2, get("/b", false)), (3, Request::CloseSession)]
    );
    let mut r = data_reply(2);
    r.extend_from_slice(&reply(3, 3, ErrorCode::Ok, None));
    s.handle_bytes(ms(6), &r);
    let ev = events(&mut s);
    assert_eq!(reply_tokens(&ev), vec![1, 2]);
    assert_eq!(ev.last(), Some(&SessionEvent::Closed { confirmed: true }));
}

#[test]
fn queued_requests_wait_across_a_reconnect_and_keep_their_order() {
    let mut s = reads(2, 4);
    assert_eq!(sent(&mut s).len(), 2);
    s.handle_disconnect(ms(4));
    let ev = events(&mut s);
    assert_eq!(reply_tokens(&ev), vec![1, 2], "in flight: ConnectionLoss");
    assert_eq!(s.pending(), 2);
    transports(&mut s);
    s.handle_connected(ms(5));
    s.poll_transmit(&mut BytesMut::new());
    s.handle_bytes(ms(6), &connect_response(0x42, 6000));
    assert_eq!(
        sent(&mut s),
        vec![(3, get("/3", false)), (4, get("/4", false))]
    );
}

#[test]
fn counters_count_bytes_both_ways() {
    let mut s = connected_bounded(4, 100);
    let before = s.counters();
    assert_eq!(before.bytes_sent, 4 + 45, "the connect request");
    assert_eq!(
        before.bytes_received,
        connect_response(0x42, 6000).len() as u64
    );
    s.submit(ms(3), get("/a", false), Token(1)).unwrap();
    let mut out = BytesMut::new();
    s.poll_transmit(&mut out);
    let r = data_reply(1);
    s.handle_bytes(ms(4), &r);
    s.handle_bytes(ms(4), &notification(EventType::NodeDeleted, "/a"));
    let after = s.counters();
    assert_eq!(after.bytes_sent - before.bytes_sent, out.len() as u64);
    assert_eq!(
        after.bytes_received - before.bytes_received,
        (r.len() + notification(EventType::NodeDeleted, "/a").len()) as u64
    );
    assert_eq!(after.notifications_received, 1);
}

#[test]
fn a_throttled_reply_halves_the_window_once_and_good_replies_grow_it_back() {
    let mut s = reads(8, 40);
    assert_eq!(sent(&mut s).len(), 8, "the full window on the wire");
    // The server throttles the first two: the window halves once (the second throttled
    // reply is of a request sent before the cut), to 4.
    let mut two = reply(1, 1, ErrorCode::Throttled, None);
    two.extend_from_slice(&reply(2, 2, ErrorCode::Throttled, None));
    s.handle_bytes(ms(4), &two);
    assert!(
        sent(&mut s).is_empty(),
        "6 on the wire, over the new window of 4"
    );
    assert_eq!(s.counters().throttled, 2);
    s.handle_bytes(ms(5), &data_reply(3));
    s.handle_bytes(ms(5), &data_reply(4));
    assert!(sent(&mut s).is_empty(), "4 on the wire: the window is full");
    s.handle_bytes(ms(6), &data_reply(5));
    assert_eq!(sent(&mut s).len(), 1, "one out, one in");
    // Four good replies (3 to 6: a window's worth) grow it by one: two go out for one.
    s.handle_bytes(ms(7), &data_reply(6));
    assert_eq!(sent(&mut s).len(), 2, "the window grew to 5");
    assert_eq!(s.in_flight(), 5);
}

#[test]
fn a_burst_of_writes_leaves_no_big_buffer_behind() {
    let mut s = connected();
    let mut out = BytesMut::new();
    for i in 0..400 {
        s.submit(
            ms(2),
            get(
                &alloc::format!("/a/rather/long/path/to/read/{i:0200}"),
                false,
            ),
            Token(i),
        )
        .unwrap();
    }
    assert!(s.poll_transmit(&mut out));
    assert!(out.len() > 2 * TX_KEEP, "a burst: {} bytes", out.len());
    out.clear(); // written; the driver keeps its (big) buffer
    s.submit(ms(3), get("/b", false), Token(1000)).unwrap();
    assert!(s.poll_transmit(&mut out)); // swaps: the session would get the big one
    assert!(s.link.tx.capacity() <= TX_KEEP, "{}", s.link.tx.capacity());
}
