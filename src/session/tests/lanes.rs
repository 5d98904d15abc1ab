//! The queue's lanes: shared listings and the yielding lane.

use super::*;

/// A session whose window of one holds a read of `/busy` (token 1): what comes next
/// queues.
fn busy() -> Session {
    let mut s = connected_bounded(1, 100);
    s.submit(ms(3), get("/busy", false), Token(1)).unwrap();
    s
}

/// Submits `request` of `requester` at 3 ms under `token`, to share.
fn shared(s: &mut Session, request: Request, token: u64, requester: u64) {
    s.submit_from(ms(3), request, Token(token), requester, false)
        .unwrap();
}

/// Submits `request` of `requester` at 3 ms under `token`, to yield.
fn yielding(s: &mut Session, request: Request, token: u64, requester: u64) {
    s.submit_from(ms(3), request, Token(token), requester, true)
        .unwrap();
}

fn children(path: &str, watch: bool) -> Request {
    Request::GetChildren(PathWatch {
        path: path.into(),
        watch,
    })
}

fn children_reply(xid: i32, names: &[&str]) -> BytesMut {
    reply(
        xid,
        i64::from(xid),
        ErrorCode::Ok,
        Some(Response::Children(
            names.iter().map(|n| String::from(*n)).collect(),
        )),
    )
}

/// Lets the window of one take the queued requests in turn: `n` times, what is sent
/// (xid `x`) is answered at 4 ms with `answer(x)`. Returns what went out, in order.
fn one_by_one(s: &mut Session, n: i32, answer: impl Fn(i32) -> BytesMut) -> Vec<(i32, Request)> {
    let mut order = Vec::new();
    for xid in 1..=n {
        order.extend(sent(s));
        s.handle_bytes(ms(4), &answer(xid));
    }
    order
}

/// Issue 25: waiters of one session each list the directory after their create. Behind
/// a full window, the listing of requester 10 moves back to the identical one of
/// requester 11 (after 11's create): one request, one reply for both, the watch
/// registered for each. A listing whose requester sent more after it stays put; raw
/// submits never share.
#[test]
fn queued_identical_listings_of_two_requesters_are_one_request() {
    let mut s = busy();
    shared(&mut s, exists("/d/a", false), 2, 10);
    shared(&mut s, children("/d", true), 3, 10);
    shared(&mut s, exists("/d/b", false), 4, 11);
    shared(&mut s, children("/d", true), 5, 11);
    assert_eq!(s.pending(), 4, "one on the wire, three queued");
    assert_eq!(sent(&mut s), vec![(1, get("/busy", false))]);
    s.handle_bytes(ms(4), &data_reply(1));
    assert_eq!(sent(&mut s), vec![(2, exists("/d/a", false))]);
    s.handle_bytes(ms(5), &reply(2, 2, ErrorCode::NoNode, None));
    assert_eq!(sent(&mut s), vec![(3, exists("/d/b", false))]);
    s.handle_bytes(ms(6), &reply(3, 3, ErrorCode::NoNode, None));
    assert_eq!(sent(&mut s), vec![(4, children("/d", true))]);
    s.handle_bytes(ms(7), &children_reply(4, &["x"]));
    let ev = events(&mut s);
    assert_eq!(reply_tokens(&ev), vec![1, 2, 4]);
    assert_eq!(
        ev.last(),
        Some(&SessionEvent::SharedReply(SharedReply {
            tokens: vec![Token(3), Token(5)],
            zxid: 4,
            result: Ok(Response::Children(vec!["x".into()])),
            watch: Some(WatchKind::Child),
        }))
    );
    s.handle_bytes(ms(8), &notification(EventType::NodeChildrenChanged, "/d"));
    let fired: Vec<u64> = events(&mut s)
        .iter()
        .filter_map(|e| match e {
            SessionEvent::Watch { token, .. } => Some(token.0),
            _ => None,
        })
        .collect();
    assert_eq!(fired, vec![3, 5], "each requester's watch fires");
    let c = s.counters();
    assert_eq!((c.requests_sent, c.replies_received), (4, 4));
}

#[test]
fn a_listing_whose_requester_sent_more_keeps_its_place_and_raw_ones_never_share() {
    let mut s = busy();
    shared(&mut s, children("/d", false), 2, 10);
    shared(&mut s, get("/d/a", false), 3, 10);
    shared(&mut s, children("/d", false), 4, 11);
    s.submit(ms(3), children("/d", false), Token(5)).unwrap();
    s.submit(ms(3), children("/d", false), Token(6)).unwrap();
    // A different watch flag is another request.
    shared(&mut s, children("/d", true), 7, 12);
    assert_eq!(s.pending(), 7, "nothing joined");
    let order = one_by_one(&mut s, 7, |xid| match xid {
        1 | 3 => data_reply(xid),
        _ => children_reply(xid, &[]),
    });
    let xids: Vec<i32> = order.into_iter().map(|(x, _)| x).collect();
    assert_eq!(xids, vec![1, 2, 3, 4, 5, 6, 7]);
    assert_eq!(reply_tokens(&events(&mut s)), vec![1, 2, 3, 4, 5, 6, 7]);
}

#[test]
fn a_shared_listing_lost_with_the_connection_fails_for_each_requester() {
    let mut s = busy();
    shared(&mut s, children("/d", true), 2, 10);
    shared(&mut s, children("/d", true), 3, 11);
    assert_eq!(s.pending(), 2, "the second joined the first");
    assert_eq!(sent(&mut s), vec![(1, get("/busy", false))]);
    s.handle_bytes(ms(4), &data_reply(1));
    assert_eq!(sent(&mut s), vec![(2, children("/d", true))]);
    events(&mut s);
    s.handle_disconnect(ms(5));
    let lost: Vec<(u64, Result<Response, Error>)> = events(&mut s)
        .into_iter()
        .filter_map(|e| match e {
            SessionEvent::Reply(r) => Some((r.token.0, r.result)),
            _ => None,
        })
        .collect();
    assert_eq!(
        lost,
        vec![
            (2, Err(Error::ConnectionLoss)),
            (3, Err(Error::ConnectionLoss))
        ]
    );
    assert_eq!(s.pending(), 0);
}

/// Issue 25: a yielding request (a lock waiter's entry) waits, while queued, behind
/// later requests of other requesters (a holder's release, a raw read); a requester's
/// own requests keep their order (its request after a queued yielding one yields too);
/// yielding requests keep theirs; a close goes after everything.
#[test]
fn later_requests_of_others_pass_queued_yielding_ones_never_a_requesters_own() {
    let mut s = busy();
    yielding(&mut s, exists("/e/1", false), 2, 10);
    yielding(&mut s, exists("/e/2", false), 3, 11);
    // Requester 10 again, not yielding: behind its own yielding request.
    shared(&mut s, get("/e/1b", false), 4, 10);
    // Requester 12 (a release) and a raw request pass every queued yielding one.
    shared(&mut s, get("/release", false), 5, 12);
    s.submit(ms(3), get("/raw", false), Token(6)).unwrap();
    // Requester 0 never yields.
    yielding(&mut s, get("/raw2", false), 7, 0);
    s.close(ms(3), ms(1000));
    assert_eq!(
        s.pending(),
        8,
        "one on the wire, the rest and the close queued"
    );
    let order = one_by_one(&mut s, 7, data_reply);
    let want = vec![
        (1, get("/busy", false)),
        (2, get("/release", false)),
        (3, get("/raw", false)),
        (4, get("/raw2", false)),
        (5, exists("/e/1", false)),
        (6, exists("/e/2", false)),
        (7, get("/e/1b", false)),
        (8, Request::CloseSession),
    ];
    assert_eq!(order, want, "the close last, as soon as it is at the front");
    assert_eq!(
        reply_tokens(&events(&mut s)),
        vec![1, 5, 6, 7, 2, 3, 4],
        "each answered under its own token"
    );
}

/// Yielding listings share among themselves (each requester's listing moves back only
/// within the yielding lane), and a listing shared by several requesters keeps each of
/// their later requests behind it.
#[test]
fn yielding_listings_share_and_hold_their_members_later_requests() {
    let mut s = busy();
    yielding(&mut s, children("/d", false), 2, 10);
    yielding(&mut s, children("/d", false), 3, 11);
    assert_eq!(s.pending(), 2, "the second joined the first");
    // Both members' next requests wait behind their shared listing; another's passes.
    shared(&mut s, get("/a", false), 4, 11);
    shared(&mut s, get("/b", false), 5, 12);
    let order = one_by_one(&mut s, 4, |xid| match xid {
        3 => children_reply(3, &["x"]),
        _ => data_reply(xid),
    });
    assert_eq!(
        order,
        vec![
            (1, get("/busy", false)),
            (2, get("/b", false)),
            (3, children("/d", false)),
            (4, get("/a", false)),
        ]
    );
    assert_eq!(s.pending(), 0);
}
