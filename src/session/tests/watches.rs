//! Watches: registration by reply, fan-out, removal, a caller's SetWatches2, what
//! is still watched while events wait to be polled.

use super::*;

#[test]
fn watch_registration_follows_the_reply() {
    let mut s = connected();
    s.submit(ms(3), exists("/missing", true), Token(1)).unwrap();
    s.submit(ms(3), get("/missing", true), Token(2)).unwrap();
    s.submit(
        ms(3),
        Request::GetChildren(PathWatch {
            path: "/missing".into(),
            watch: true,
        }),
        Token(3),
    )
    .unwrap();
    sent(&mut s);
    let mut r = reply(1, 1, ErrorCode::NoNode, None);
    r.extend_from_slice(&reply(2, 1, ErrorCode::NoNode, None));
    r.extend_from_slice(&reply(3, 1, ErrorCode::NoNode, None));
    s.handle_bytes(ms(4), &r);
    assert_eq!(
        s.watch_registrants("/missing", WatchKind::Exist),
        &[Token(1)]
    );
    assert_eq!(
        s.watch_registrants("/missing", WatchKind::Data),
        &[] as &[Token]
    );
    assert_eq!(s.watch_count(), 1);
    events(&mut s);
    s.handle_bytes(ms(5), &notification(EventType::NodeCreated, "/missing"));
    assert_eq!(
        events(&mut s),
        vec![SessionEvent::Watch {
            token: Token(1),
            event: WatchEvent {
                event_type: EventType::NodeCreated,
                path: "/missing".into()
            }
        }]
    );
    assert_eq!(s.watch_count(), 0, "one-shot");
}

#[test]
fn one_notification_reaches_every_registrant_once() {
    let mut s = connected();
    s.submit(ms(3), get("/n", true), Token(1)).unwrap();
    s.submit(ms(3), exists("/n", true), Token(2)).unwrap();
    s.submit(ms(3), get("/n", true), Token(1)).unwrap();
    s.submit(ms(3), add_watch("/", 1), Token(3)).unwrap();
    s.submit(ms(3), add_watch("/n", 0), Token(4)).unwrap();
    sent(&mut s);
    let data = Some(Response::Data {
        data: Bytes::new(),
        stat: stat(1),
    });
    let mut r = reply(1, 1, ErrorCode::Ok, data.clone());
    r.extend_from_slice(&reply(2, 1, ErrorCode::Ok, Some(Response::Stat(stat(1)))));
    r.extend_from_slice(&reply(3, 1, ErrorCode::Ok, data));
    r.extend_from_slice(&reply(4, 1, ErrorCode::Ok, Some(Response::WatchAdded)));
    r.extend_from_slice(&reply(5, 1, ErrorCode::Ok, Some(Response::WatchAdded)));
    s.handle_bytes(ms(4), &r);
    events(&mut s);
    let fired = |s: &mut Session| -> Vec<u64> {
        events(s)
            .into_iter()
            .map(|e| match e {
                SessionEvent::Watch { token, .. } => token.0,
                other => panic!("{other:?}"),
            })
            .collect()
    };
    s.handle_bytes(ms(5), &notification(EventType::NodeDataChanged, "/n"));
    assert_eq!(
        fired(&mut s),
        vec![1, 2, 3, 4],
        "each registrant once, in registration order; persistent and recursive fire too"
    );
    s.handle_bytes(ms(6), &notification(EventType::NodeDataChanged, "/n"));
    assert_eq!(
        fired(&mut s),
        vec![3, 4],
        "one-shot ones are gone; persistent stay"
    );
    s.handle_bytes(ms(7), &notification(EventType::NodeChildrenChanged, "/n"));
    assert_eq!(
        fired(&mut s),
        vec![4],
        "recursive watches never get child events"
    );
    s.handle_bytes(ms(8), &notification(EventType::NodeCreated, "/n/deep/er"));
    assert_eq!(fired(&mut s), vec![3], "recursive reaches descendants");
}

#[test]
fn remove_watches_tells_the_registrants() {
    let mut s = connected();
    s.submit(ms(3), add_watch("/p", 0), Token(1)).unwrap();
    s.submit(
        ms(3),
        Request::RemoveWatches(WatchesRequest {
            path: "/p".into(),
            watcher_type: 3,
        }),
        Token(2),
    )
    .unwrap();
    sent(&mut s);
    let mut r = reply(1, 1, ErrorCode::Ok, Some(Response::WatchAdded));
    r.extend_from_slice(&reply(2, 1, ErrorCode::Ok, Some(Response::Empty)));
    s.handle_bytes(ms(4), &r);
    let ev = events(&mut s);
    assert_eq!(
        ev[1],
        SessionEvent::Watch {
            token: Token(1),
            event: WatchEvent {
                event_type: EventType::PersistentWatchRemoved,
                path: "/p".into()
            }
        }
    );
    assert_eq!(s.watch_count(), 0);
}

#[test]
fn fan_out_and_forgetting_scale_to_tens_of_thousands_of_registrants() {
    // Issue 9, defect 7: fan-out to 40,000 registrants was quadratic (292 ms).
    let mut s = connected();
    let n = 40_000u64;
    for chunk in 0..4u64 {
        let mut r = BytesMut::new();
        for i in 0..10_000u64 {
            let t = chunk * 10_000 + i;
            s.submit(ms(3), exists("/hot", true), Token(t + 10))
                .unwrap();
            r.extend_from_slice(&reply(
                t as i32 + 1,
                1,
                ErrorCode::Ok,
                Some(Response::Stat(stat(1))),
            ));
        }
        sent(&mut s);
        s.handle_bytes(ms(4), &r);
        events(&mut s);
    }
    assert_eq!(s.watch_count(), n as usize);
    // Half the waiters go away (their recipes ended): O(log n) each.
    for t in (0..n).step_by(2) {
        s.forget_watches(Token(t + 10));
    }
    assert_eq!(s.watch_count(), n as usize / 2);
    s.handle_bytes(ms(5), &notification(EventType::NodeDeleted, "/hot"));
    let fired: Vec<u64> = events(&mut s)
        .into_iter()
        .map(|e| match e {
            SessionEvent::Watch { token, .. } => token.0,
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(
        fired.len(),
        n as usize / 2,
        "each remaining registrant once"
    );
    assert!(
        fired.windows(2).all(|w| w[0] < w[1]),
        "in registration order"
    );
    assert_eq!(s.watch_count(), 0);
}

fn set_watches2(relative_zxid: i64, data: &[&str], child: &[&str]) -> Request {
    Request::SetWatches2(SetWatches2 {
        relative_zxid,
        data_watches: data.iter().map(|p| String::from(*p)).collect(),
        child_watches: child.iter().map(|p| String::from(*p)).collect(),
        ..Default::default()
    })
}

fn watch_event(token: u64, t: EventType, path: &str) -> SessionEvent {
    SessionEvent::Watch {
        token: Token(token),
        event: WatchEvent {
            event_type: t,
            path: path.into(),
        },
    }
}

/// A session that submitted (under token 7) a caller's SetWatches2 at zxid 9: a
/// data watch on `/d`, an exist watch on `/c`.
fn watching_d_and_c() -> Session {
    let mut s = connected();
    s.submit(ms(3), set_watches2(9, &["/d"], &["/c"]), Token(7))
        .unwrap();
    s
}

#[test]
fn a_callers_set_watches_arms_several_watches_in_one_request_and_its_reply_comes_first() {
    let mut s = watching_d_and_c();
    // Written under a normal xid (ZooKeeper answers it like any request), and armed as
    // it is written.
    let written = sent(&mut s);
    assert_eq!(written.len(), 1);
    assert_eq!(written[0].0, 1);
    assert_eq!(s.watch_registrants("/d", WatchKind::Data), &[Token(7)]);
    assert_eq!(s.watch_registrants("/c", WatchKind::Child), &[Token(7)]);
    assert!(s.is_watching(Token(7)));
    // The server fires /d at once (changed after zxid 9), then answers: the caller hears
    // the reply first, then the event.
    s.handle_bytes(ms(4), &notification(EventType::NodeDataChanged, "/d"));
    assert_eq!(events(&mut s), vec![], "held back until the reply");
    assert!(s.is_watching(Token(7)));
    s.handle_bytes(ms(5), &reply(1, 10, ErrorCode::Ok, Some(Response::Empty)));
    let ev = events(&mut s);
    assert!(
        matches!(&ev[0], SessionEvent::Reply(r) if r.token == Token(7) && r.result == Ok(Response::Empty) && r.watch.is_some()),
        "{ev:?}"
    );
    assert_eq!(ev[1..], [watch_event(7, EventType::NodeDataChanged, "/d")]);
    // The other watch is still armed; its event is the token's last.
    assert!(s.is_watching(Token(7)));
    s.handle_bytes(ms(6), &notification(EventType::NodeDeleted, "/c"));
    assert_eq!(
        events(&mut s),
        [watch_event(7, EventType::NodeDeleted, "/c")]
    );
    assert!(!s.is_watching(Token(7)));
    assert_eq!(s.watch_count(), 0);
}

#[test]
fn a_callers_set_watches_lost_with_the_connection_registers_nothing() {
    let mut s = watching_d_and_c();
    sent(&mut s);
    s.handle_bytes(ms(4), &notification(EventType::NodeDataChanged, "/d"));
    s.handle_disconnect(ms(5));
    let ev = events(&mut s);
    let reply = ev.iter().find_map(|e| match e {
        SessionEvent::Reply(r) => Some(r.clone()),
        _ => None,
    });
    let reply = reply.expect("a reply");
    assert_eq!(reply.token, Token(7));
    assert_eq!(reply.result, Err(Error::ConnectionLoss));
    assert_eq!(reply.watch, None);
    assert!(
        !ev.iter().any(|e| matches!(e, SessionEvent::Watch { .. })),
        "{ev:?}"
    );
    // Nothing of it is re-armed on the next connection: the caller arms again.
    assert_eq!(s.watch_count(), 0);
    assert!(!s.is_watching(Token(7)));
    // A SetWatches (version 1) stays the session's own.
    assert!(matches!(
        s.submit(ms(6), Request::SetWatches(SetWatches::default()), Token(8)),
        Err(SubmitError::NotAllowed(OpCode::SetWatches))
    ));
}

/// Found by the lock simulator: both watches of a SetWatches2 fired at once (its
/// blocker gone, its node written); the client, asked after the first event whether
/// the token still watched, heard no, dropped its route, and the second event — the
/// blocker's deletion — reached nobody. Events queued and not yet polled count.
#[test]
fn a_token_still_watches_while_its_events_wait_to_be_polled() {
    let mut s = watching_d_and_c();
    sent(&mut s);
    let mut frames = notification(EventType::NodeDataChanged, "/d");
    frames.extend_from_slice(&notification(EventType::NodeDeleted, "/c"));
    frames.extend_from_slice(&reply(1, 10, ErrorCode::Ok, Some(Response::Empty)));
    s.handle_bytes(ms(4), &frames);
    assert!(matches!(s.poll_event(), Some(SessionEvent::Reply(r)) if r.watch.is_some()));
    assert_eq!(
        s.poll_event(),
        Some(watch_event(7, EventType::NodeDataChanged, "/d"))
    );
    assert!(s.is_watching(Token(7)), "one more event is on its way");
    assert_eq!(
        s.poll_event(),
        Some(watch_event(7, EventType::NodeDeleted, "/c"))
    );
    assert!(!s.is_watching(Token(7)));

    // The same for two notifications after the reply, in one read.
    s.submit(ms(5), set_watches2(9, &["/d2"], &["/c2"]), Token(8))
        .unwrap();
    sent(&mut s);
    s.handle_bytes(ms(6), &reply(2, 11, ErrorCode::Ok, Some(Response::Empty)));
    events(&mut s);
    let mut frames = notification(EventType::NodeDataChanged, "/d2");
    frames.extend_from_slice(&notification(EventType::NodeDeleted, "/c2"));
    s.handle_bytes(ms(7), &frames);
    s.poll_event();
    assert!(s.is_watching(Token(8)), "one more event is on its way");
    s.poll_event();
    assert!(!s.is_watching(Token(8)));
}
