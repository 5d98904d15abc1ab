//! Transcript tests for `recipe::queue`: scripted replies in, exact requests and events
//! out, in the lines of `kit.rs` in the `short` form (`M` for the meta directory, `Q`
//! for the queue; see `queue_script.rs`).

use crate::queue_script;
use queue_script::*;
fn producer() -> Script<Producer> {
    script(Producer::new(ProducerConfig::new(DIR, "p1")))
}

fn consumer(delivery: Delivery, format: Format) -> Script<Consumer> {
    let mut c = ConsumerConfig::new(DIR, "c1");
    c.delivery = delivery;
    c.format = format;
    c.spread = 0; // no jumps: transcripts stay in order
    script(Consumer::new(c))
}

/// The answer to a consumer's first take `multi` (its marker created, set to version 1)
/// deleting `items` items.
fn first_take_applied(items: usize) -> Result<Response, Error> {
    let mut r = vec![
        MultiResult::Create(format!("{META}/c-c1")),
        MultiResult::SetData(st().version(1).owner(SESSION)),
    ];
    r.extend((0..items).map(|_| MultiResult::Delete));
    multi(r)
}

/// `Taken` for take `t`: one item `name` holding `data`.
fn taken(t: TakeId, name: &str, data: &'static str) -> ConsumerEvent {
    ConsumerEvent::Taken {
        take: t,
        items: vec![Item {
            name: name.into(),
            data: Bytes::from_static(data.as_bytes()),
        }],
    }
}

#[test]
fn puts_are_pipelined_chained_on_the_marker_and_report_names() {
    let mut s = producer();
    let a = s.r.put(T, Bytes::from_static(b"a")).unwrap();
    // The first batch of a session creates the marker; nothing is chained behind it.
    assert_eq!(
        s.sent(),
        ["multi[create M/p-p1 e, set M/p-p1 '' @0, create Q/qn- s 'a']"]
    );
    s.reply(
        "multi[create",
        multi(vec![
            MultiResult::Create(format!("{META}/p-p1")),
            MultiResult::SetData(st().version(1).owner(SESSION)),
            created("qn-0000000007"),
        ]),
    );
    let b = s.r.put(T, Bytes::from_static(b"b")).unwrap();
    let c = s.r.put(T, Bytes::from_static(b"c")).unwrap();
    // Then each put goes out at once, without waiting for the previous reply.
    assert_eq!(
        s.sent(),
        [
            "multi[set M/p-p1 '' @1, create Q/qn- s 'b']",
            "multi[set M/p-p1 '' @2, create Q/qn- s 'c']",
        ]
    );
    let ok = |n: &str| {
        multi(vec![
            MultiResult::SetData(st().version(1).owner(SESSION)),
            created(n),
        ])
    };
    s.reply("multi[set M/p-p1 '' @1", ok("qn-0000000008"));
    s.reply("multi[set M/p-p1 '' @2", ok("qn-0000000009"));
    assert_eq!(
        s.events(),
        [
            ProducerEvent::Put {
                id: a,
                node: Some("qn-0000000007".into())
            },
            ProducerEvent::Put {
                id: b,
                node: Some("qn-0000000008".into())
            },
            ProducerEvent::Put {
                id: c,
                node: Some("qn-0000000009".into())
            },
        ]
    );
}

#[test]
fn puts_queued_while_the_window_is_full_go_out_as_one_batch() {
    let mut cfg = ProducerConfig::new(DIR, "p1");
    cfg.max_in_flight = 1;
    let mut s = script(Producer::new(cfg));
    s.r.put(T, Bytes::from_static(b"a")).unwrap();
    assert_eq!(s.sent().len(), 1);
    // The item bound: one on the wire.
    s.r.put(T, Bytes::from_static(b"b")).unwrap();
    s.r.put(T, Bytes::from_static(b"c")).unwrap();
    assert!(s.sent().is_empty()); // the window is full
    s.reply(
        "multi[create",
        multi(vec![
            MultiResult::Create(format!("{META}/p-p1")),
            MultiResult::SetData(st().version(1).owner(SESSION)),
            created("qn-0000000001"),
        ]),
    );
    // max_in_flight 1 still sends one item per batch; the next is the second put.
    assert_eq!(s.sent(), ["multi[set M/p-p1 '' @1, create Q/qn- s 'b']"]);

    // The batch bound: four batches out, the rest wait and go together.
    let mut s = script(Producer::new(ProducerConfig::new(DIR, "p2")));
    s.r.put(T, Bytes::from_static(b"x")).unwrap();
    s.reply(
        "multi[create",
        multi(vec![
            MultiResult::Create(format!("{META}/p-p2")),
            MultiResult::SetData(st().version(1).owner(SESSION)),
            created("qn-0000000001"),
        ]),
    );
    for _ in 0..6 {
        s.r.put(T, Bytes::from_static(b"x")).unwrap();
    }
    let sent = s.sent();
    assert_eq!(sent.len(), 4, "one batch per put while the window has room");
    s.reply(
        "multi[set M/p-p2 '' @1",
        multi(vec![
            MultiResult::SetData(st().version(2).owner(SESSION)),
            created("qn-0000000002"),
        ]),
    );
    // The two that waited go out together, in one multi.
    assert_eq!(
        s.sent(),
        ["multi[set M/p-p2 '' @5, create Q/qn- s 'x', create Q/qn- s 'x']"]
    );
}

#[test]
fn a_lost_put_reply_is_resolved_by_the_marker_version_without_duplicates() {
    let mut s = producer();
    s.r.put(T, Bytes::from_static(b"first")).unwrap();
    s.reply(
        "multi[create",
        multi(vec![
            MultiResult::Create(format!("{META}/p-p1")),
            MultiResult::SetData(st().version(1).owner(SESSION)),
            created("qn-0000000001"),
        ]),
    );
    s.events();
    let a = s.r.put(T, Bytes::from_static(b"a")).unwrap();
    let b = s.r.put(T, Bytes::from_static(b"b")).unwrap();
    assert_eq!(s.sent().len(), 2);
    s.disconnect();
    assert!(s.sent().is_empty(), "nothing while suspended");
    assert!(s.events().is_empty());
    s.r.handle_session(
        T,
        SessionChange::Reconnected {
            session_id: SESSION,
        },
    );
    assert_eq!(s.sent(), ["sync M", "exists M/p-p1"]);
    s.reply("sync", Ok(Response::Path(META.into())));
    // The first batch was applied (version 2), the second was not.
    s.reply("exists", Ok(Response::Stat(st().version(2).owner(SESSION))));
    assert_eq!(s.events(), [ProducerEvent::Put { id: a, node: None }]);
    // The second is sent again, chained on version 2: never twice in the queue.
    assert_eq!(s.sent(), ["multi[set M/p-p1 '' @2, create Q/qn- s 'b']"]);
    s.reply(
        "multi[",
        multi(vec![
            MultiResult::SetData(st().version(3).owner(SESSION)),
            created("qn-0000000003"),
        ]),
    );
    assert_eq!(
        s.events(),
        [ProducerEvent::Put {
            id: b,
            node: Some("qn-0000000003".into())
        }]
    );
}

#[test]
fn missing_directories_are_created_the_queue_persistent_then_the_batch_goes_again() {
    let mut s = producer();
    let a = s.r.put(T, Bytes::from_static(b"a")).unwrap();
    s.sent();
    s.reply(
        "multi[create",
        multi(vec![
            err(ErrorCode::NoNode),
            err(ErrorCode::RuntimeInconsistency),
            err(ErrorCode::RuntimeInconsistency),
        ]),
    );
    assert_eq!(
        s.sent(),
        [
            "container /app",
            "create Q",
            "container /app",
            "container M",
            "multi[create M/p-p1 e, set M/p-p1 '' @0, create Q/qn- s 'a']",
        ]
    );
    for line in [
        "container /app",
        "create Q",
        "container /app",
        "container M",
    ] {
        s.reply(line, Ok(Response::Path("x".into())));
    }
    s.reply(
        "multi[",
        multi(vec![
            MultiResult::Create(format!("{META}/p-p1")),
            MultiResult::SetData(st().version(1).owner(SESSION)),
            created("qn-0000000000"),
        ]),
    );
    assert_eq!(
        s.events(),
        [ProducerEvent::Put {
            id: a,
            node: Some("qn-0000000000".into())
        }]
    );
}

#[test]
fn session_expiry_fails_puts_in_flight_as_maybe_applied_and_sends_the_rest_later() {
    let mut cfg = ProducerConfig::new(DIR, "p1");
    cfg.max_batches_in_flight = 1;
    let mut s = script(Producer::new(cfg));
    let a = s.r.put(T, Bytes::from_static(b"a")).unwrap();
    let b = s.r.put(T, Bytes::from_static(b"b")).unwrap();
    s.disconnect();
    s.r.handle_session(T, SessionChange::Expired);
    assert_eq!(
        s.events(),
        [ProducerEvent::PutFailed {
            id: a,
            error: Error::SessionExpired,
            may_have_applied: true
        }]
    );
    s.r.handle_session(T, SessionChange::Connected { session_id: 0x88 });
    assert_eq!(
        s.sent(),
        ["multi[create M/p-p1 e, set M/p-p1 '' @0, create Q/qn- s 'b']"]
    );
    let _ = b;
}

#[test]
fn close_deletes_the_marker_and_ends() {
    let mut s = producer();
    s.r.put(T, Bytes::from_static(b"a")).unwrap();
    s.r.close(T);
    s.reply(
        "multi[",
        multi(vec![
            MultiResult::Create(format!("{META}/p-p1")),
            MultiResult::SetData(st().version(1).owner(SESSION)),
            created("qn-0000000000"),
        ]),
    );
    assert_eq!(s.sent(), ["delete M/p-p1"]);
    s.reply("delete", Ok(Response::Empty));
    let ev = s.events();
    assert_eq!(ev.last(), Some(&ProducerEvent::Closed));
    assert!(s.r.is_done());
    assert_eq!(s.r.put(T, Bytes::new()), Err(Error::Closed));
}

#[test]
fn take_lists_once_reads_then_deletes_a_batch_in_one_multi() {
    let mut s = consumer(Delivery::AtMostOnce, Format::Fifo);
    let t = s.r.take(T, 2, None);
    assert_eq!(s.sent(), ["list Q"]);
    s.reply(
        "list",
        children(&["qn-0000000003", "qn-0000000001", "qn-0000000002", "foreign"]),
    );
    assert_eq!(
        s.sent(),
        ["multiRead[get Q/qn-0000000001, get Q/qn-0000000002]"]
    );
    s.reply("multiRead[", multi(vec![data("one"), data("two")]));
    assert_eq!(
        s.sent(),
        ["multi[create M/c-c1 e, set M/c-c1 '' @0, delete Q/qn-0000000001, delete Q/qn-0000000002]"]
    );
    s.reply("multi[", first_take_applied(2));
    let ev = s.events();
    assert_eq!(
        ev,
        [ConsumerEvent::Taken {
            take: t,
            items: vec![
                Item {
                    name: "qn-0000000001".into(),
                    data: Bytes::from_static(b"one")
                },
                Item {
                    name: "qn-0000000002".into(),
                    data: Bytes::from_static(b"two")
                },
            ]
        }]
    );
    // The next take works through the same listing: no new listing.
    let t2 = s.r.take(T, 5, None);
    assert_eq!(s.sent(), ["multiRead[get Q/qn-0000000003]"]);
    s.reply("multiRead[", multi(vec![data("three")]));
    assert_eq!(
        s.sent(),
        ["multi[set M/c-c1 '' @1, delete Q/qn-0000000003]"]
    );
    s.reply(
        "multi[",
        multi(vec![
            MultiResult::SetData(st().version(2).owner(SESSION)),
            MultiResult::Delete,
        ]),
    );
    assert!(
        matches!(&s.events()[..], [ConsumerEvent::Taken { take, items }] if *take == t2 && items.len() == 1)
    );
    // Exhausted: list again.
    s.r.take(T, 1, None);
    assert_eq!(s.sent(), ["list Q"]);
}

#[test]
fn an_item_taken_by_another_consumer_is_skipped_without_a_second_claim() {
    let mut s = consumer(Delivery::AtMostOnce, Format::Fifo);
    let t = s.r.take(T, 3, None);
    s.reply(
        "list",
        children(&["qn-0000000001", "qn-0000000002", "qn-0000000003"]),
    );
    // qn-1 already gone when read: not in the multi.
    s.reply(
        "multiRead[",
        multi(vec![err(ErrorCode::NoNode), data("two"), data("three")]),
    );
    assert_eq!(
        s.sent(),
        ["multi[create M/c-c1 e, set M/c-c1 '' @0, delete Q/qn-0000000002, delete Q/qn-0000000003]"]
    );
    // qn-3 taken between our read and our multi: the multi fails on it, goes again.
    s.reply(
        "multi[",
        multi(vec![
            MultiResult::Error(ErrorCode::Ok),
            MultiResult::Error(ErrorCode::Ok),
            MultiResult::Error(ErrorCode::Ok),
            err(ErrorCode::NoNode),
        ]),
    );
    assert_eq!(
        s.sent(),
        ["multi[create M/c-c1 e, set M/c-c1 '' @0, delete Q/qn-0000000002]"]
    );
    s.reply("multi[", first_take_applied(1));
    assert_eq!(s.events(), [taken(t, "qn-0000000002", "two")]);
}

#[test]
fn a_lost_take_reply_is_resolved_by_the_marker_never_lost_never_doubled() {
    let mut s = consumer(Delivery::AtMostOnce, Format::Fifo);
    let t = s.r.take(T, 1, None);
    s.reply("list", children(&["qn-0000000001"]));
    s.reply("multiRead[", multi(vec![data("one")]));
    s.sent();
    s.disconnect();
    assert!(s.events().is_empty());
    s.r.handle_session(
        T,
        SessionChange::Reconnected {
            session_id: SESSION,
        },
    );
    assert_eq!(s.sent(), ["sync M", "exists M/c-c1"]);
    s.reply("sync", Ok(Response::Path(META.into())));
    s.reply("exists", Ok(Response::Stat(st().version(1).owner(SESSION))));
    assert_eq!(s.events(), [taken(t, "qn-0000000001", "one")]);

    // Not applied: the items are read again (the name may be another item by now, if
    // the directory was deleted and made again meanwhile — by an operator, or reaped
    // as a container someone else made — its sequence starting over), then the multi goes again with what that read found.
    let mut s = consumer(Delivery::AtMostOnce, Format::Fifo);
    let t = s.r.take(T, 1, None);
    s.reply("list", children(&["qn-0000000001"]));
    s.reply("multiRead[", multi(vec![data("one")]));
    s.disconnect();
    s.r.handle_session(
        T,
        SessionChange::Reconnected {
            session_id: SESSION,
        },
    );
    s.reply("sync", Ok(Response::Path(META.into())));
    s.reply("exists", Err(Error::Server(ErrorCode::NoNode)));
    assert_eq!(s.sent(), ["multiRead[get Q/qn-0000000001]"]);
    s.reply("multiRead[", multi(vec![data("another")]));
    assert_eq!(
        s.sent(),
        ["multi[create M/c-c1 e, set M/c-c1 '' @0, delete Q/qn-0000000001]"]
    );
    s.reply("multi[", first_take_applied(1));
    assert_eq!(
        s.events(),
        [taken(t, "qn-0000000001", "another")],
        "the item that name is now, with its own data (not the data read before)"
    );
}

#[test]
fn an_empty_queue_is_listed_again_with_a_watch_and_waits_for_it() {
    let mut s = consumer(Delivery::AtMostOnce, Format::Fifo);
    let t = s.r.take(T, 1, None);
    s.reply("list Q", children(&[]));
    assert_eq!(s.sent(), ["list! Q"]);
    s.reply("list! Q", children(&[]));
    assert!(s.sent().is_empty());
    s.fire(EventType::NodeChildrenChanged, DIR);
    assert_eq!(s.sent(), ["list! Q"]);
    s.reply("list! Q", children(&["qn-0000000009"]));
    assert_eq!(s.sent(), ["multiRead[get Q/qn-0000000009]"]);
    let _ = t;
}

#[test]
fn a_cancelled_take_ends_at_once_or_with_its_batch_and_takes_nothing_after() {
    let mut s = consumer(Delivery::AtMostOnce, Format::Fifo);
    // Waiting on an empty queue: cancelled, it ends at once.
    let t = s.r.take(T, 1, None);
    s.reply("list Q", children(&[]));
    s.reply("list! Q", children(&[]));
    assert!(s.r.cancel_take(T, t));
    assert_eq!(s.events(), [ConsumerEvent::TimedOut { take: t }]);
    assert!(!s.r.cancel_take(T, t), "ended: nothing to cancel");
    // An item comes: no take waits, nothing is taken.
    s.fire(EventType::NodeChildrenChanged, DIR);
    assert!(s.sent().is_empty(), "a cancelled take starts nothing");
    // A batch on the wire when the take is cancelled: its outcome ends it (the items
    // were deleted: they are reported, not lost).
    let t = s.r.take(T, 1, None);
    assert_eq!(s.sent(), ["list! Q"]);
    s.reply("list", children(&["qn-0000000001"]));
    assert_eq!(s.sent(), ["multiRead[get Q/qn-0000000001]"]);
    assert!(s.r.cancel_take(T, t));
    assert!(s.events().is_empty());
    s.reply("multiRead[", multi(vec![data("x")]));
    s.reply("multi[", first_take_applied(1));
    assert!(matches!(&s.events()[..], [ConsumerEvent::Taken { take, .. }] if *take == t));
}

#[test]
fn a_take_with_a_deadline_times_out_on_an_empty_queue() {
    let mut s = consumer(Delivery::AtMostOnce, Format::Fifo);
    let d = Instant::from_micros(1_000_000);
    let t = s.r.take(T, 1, Some(d));
    s.reply("list Q", children(&[]));
    s.reply("list! Q", children(&[]));
    assert_eq!(s.r.poll_timeout(), Some(d));
    s.r.handle_timeout(d);
    assert_eq!(s.events(), [ConsumerEvent::TimedOut { take: t }]);
    // The watch fires: a try-take (deadline now) still gets one look at the listing.
    s.fire(EventType::NodeChildrenChanged, DIR);
    let t = s.r.take(d, 1, Some(d));
    assert_eq!(s.sent(), ["list! Q"]);
    s.r.handle_timeout(d);
    assert!(s.events().is_empty());
    s.reply("list", children(&["qn-0000000001"]));
    s.reply("multiRead[", multi(vec![data("x")]));
    s.reply("multi[", first_take_applied(1));
    assert!(matches!(&s.events()[..], [ConsumerEvent::Taken { take, .. }] if *take == t));
}

#[test]
fn at_least_once_claims_with_ephemeral_nodes_and_completes_in_one_multi() {
    let mut s = consumer(Delivery::AtLeastOnce, Format::Fifo);
    let t = s.r.take(T, 3, None);
    assert_eq!(s.sent(), ["list M", "list Q"]);
    s.reply("list M", children(&["claim-qn-0000000001", "c-x"]));
    s.reply(
        "list Q",
        children(&["qn-0000000001", "qn-0000000002", "qn-0000000003"]),
    );
    // qn-1 is claimed by someone: not tried.
    assert_eq!(
        s.sent(),
        [
            "create M/claim-qn-0000000002 e 'c1'",
            "create M/claim-qn-0000000003 e 'c1'",
            "multiRead[get Q/qn-0000000002, get Q/qn-0000000003]",
        ]
    );
    s.reply(
        "create M/claim-qn-0000000002 e 'c1'",
        Ok(Response::Path("x".into())),
    );
    s.reply(
        "create M/claim-qn-0000000003 e 'c1'",
        Err(Error::Server(ErrorCode::NodeExists)),
    );
    s.reply("multiRead[", multi(vec![data("two"), data("three")]));
    assert_eq!(s.events(), [taken(t, "qn-0000000002", "two")]);
    assert_eq!(s.r.held(), ["qn-0000000002"]);
    s.r.complete(T, "qn-0000000002").unwrap();
    assert_eq!(
        s.sent(),
        ["multi[delete M/claim-qn-0000000002, delete Q/qn-0000000002]"]
    );
    s.reply(
        "multi[",
        multi(vec![MultiResult::Delete, MultiResult::Delete]),
    );
    assert_eq!(
        s.events(),
        [ConsumerEvent::Completed {
            item: "qn-0000000002".into()
        }]
    );
    assert_eq!(s.r.complete(T, "qn-0000000002"), Err(Error::Finished));
}

#[test]
fn at_least_once_lost_replies_check_the_claim_owner_and_the_completion() {
    let mut s = consumer(Delivery::AtLeastOnce, Format::Fifo);
    let t = s.r.take(T, 1, None);
    s.reply("list M", children(&[]));
    s.reply("list Q", children(&["qn-0000000001"]));
    s.disconnect();
    s.r.handle_session(
        T,
        SessionChange::Reconnected {
            session_id: SESSION,
        },
    );
    assert_eq!(s.sent(), ["sync M", "exists M/claim-qn-0000000001"]);
    s.reply("sync", Ok(Response::Path(META.into())));
    s.reply("exists", Ok(Response::Stat(st().version(0).owner(SESSION))));
    assert_eq!(s.sent(), ["multiRead[get Q/qn-0000000001]"]);
    s.reply("multiRead[", multi(vec![data("one")]));
    assert!(matches!(&s.events()[..], [ConsumerEvent::Taken { take, .. }] if *take == t));
    s.r.complete(T, "qn-0000000001").unwrap();
    s.disconnect();
    s.r.handle_session(
        T,
        SessionChange::Reconnected {
            session_id: SESSION,
        },
    );
    assert_eq!(s.sent(), ["sync M", "exists M/claim-qn-0000000001"]);
    s.reply("sync", Ok(Response::Path(META.into())));
    s.reply("exists", Err(Error::Server(ErrorCode::NoNode)));
    assert_eq!(
        s.events(),
        [ConsumerEvent::Completed {
            item: "qn-0000000001".into()
        }]
    );
}

#[test]
fn at_least_once_claims_go_with_the_session() {
    let mut s = consumer(Delivery::AtLeastOnce, Format::Fifo);
    s.r.take(T, 1, None);
    s.reply("list M", children(&[]));
    s.reply("list Q", children(&["qn-0000000001"]));
    s.reply("create", Ok(Response::Path("x".into())));
    s.reply("multiRead[", multi(vec![data("one")]));
    s.events();
    s.r.handle_session(T, SessionChange::Expired);
    assert_eq!(
        s.events(),
        [ConsumerEvent::ClaimLost {
            item: "qn-0000000001".into()
        }]
    );
    assert!(s.r.held().is_empty());
}

#[test]
fn a_priority_watch_invalidates_the_cached_listing() {
    let mut s = consumer(Delivery::AtMostOnce, Format::Priority);
    s.r.take(T, 1, None);
    assert_eq!(s.sent(), ["list! Q"]);
    s.reply(
        "list!",
        children(&[
            "entry-100-0000000001",
            "entry-005-0000000003",
            "entry-100-0000000002",
        ]),
    );
    assert_eq!(s.sent(), ["multiRead[get Q/entry-005-0000000003]"]);
    s.reply("multiRead[", multi(vec![data("urgent")]));
    s.reply("multi[", first_take_applied(1));
    s.events();
    // A higher priority item arrives after our listing.
    s.fire(EventType::NodeChildrenChanged, DIR);
    s.r.take(T, 1, None);
    assert_eq!(s.sent(), ["list! Q"]);
    s.reply(
        "list!",
        children(&[
            "entry-100-0000000001",
            "entry-000-0000000004",
            "entry-100-0000000002",
        ]),
    );
    assert_eq!(s.sent(), ["multiRead[get Q/entry-000-0000000004]"]);
}

#[test]
fn close_fails_waiting_takes_releases_claims_and_deletes_the_marker() {
    let mut s = consumer(Delivery::AtLeastOnce, Format::Fifo);
    s.r.take(T, 1, None);
    s.reply("list M", children(&[]));
    s.reply("list Q", children(&["qn-0000000001"]));
    s.reply("create", Ok(Response::Path("x".into())));
    s.reply("multiRead[", multi(vec![data("one")]));
    s.events();
    let t = s.r.take(T, 1, None);
    s.sent();
    s.r.close(T);
    let ev = s.events();
    assert_eq!(
        ev,
        [ConsumerEvent::TakeFailed {
            take: t,
            error: Error::Closed
        }]
    );
    let sent = s.sent();
    assert!(
        sent.contains(&"delete M/claim-qn-0000000001".to_string()),
        "{sent:?}"
    );
    s.reply("delete M/claim", Ok(Response::Empty));
    s.reply("list M", children(&[]));
    s.reply("list Q", children(&[]));
    s.sent();
    let ev = s.events();
    assert!(
        ev.contains(&ConsumerEvent::Released {
            item: "qn-0000000001".into()
        }),
        "{ev:?}"
    );
    assert_eq!(ev.last(), Some(&ConsumerEvent::Closed));
}

#[test]
fn a_take_made_while_waiting_on_the_watch_times_out_too() {
    let mut s = consumer(Delivery::AtMostOnce, Format::Fifo);
    let d = Instant::from_micros(1_000);
    let t1 = s.r.take(T, 1, Some(d));
    s.reply("list Q", children(&[]));
    s.reply("list! Q", children(&[]));
    s.r.handle_timeout(d);
    assert_eq!(s.events(), [ConsumerEvent::TimedOut { take: t1 }]);
    // The next take finds the consumer waiting on its watch: no listing, and its
    // deadline still ends it (regression: it used to wait forever).
    let d2 = Instant::from_micros(2_000);
    let t2 = s.r.take(d, 1, Some(d2));
    assert!(s.sent().is_empty());
    assert_eq!(s.r.poll_timeout(), Some(d2));
    s.r.handle_timeout(d2);
    assert_eq!(s.events(), [ConsumerEvent::TimedOut { take: t2 }]);
}

/// At least once: the claim's create is accepted, the multiRead behind it is refused by
/// the session at once (a local refusal comes before the replies to requests sent
/// earlier), then the claim's create answers Ok. The claimed item must be read again.
#[test]
fn claim_answered_after_its_read_was_refused_is_read_again() {
    let mut s = consumer(Delivery::AtLeastOnce, Format::Fifo);
    let t = s.r.take(T, 1, None);
    s.reply("list M", children(&[]));
    s.reply("list Q", children(&["qn-0000000001"]));
    assert_eq!(
        s.sent(),
        [
            "create M/claim-qn-0000000001 e 'c1'",
            "multiRead[get Q/qn-0000000001]"
        ]
    );
    // The read is refused locally: its error comes first.
    s.reply("multiRead[", Err(Error::Overloaded));
    s.reply(
        "create M/claim-qn-0000000001 e 'c1'",
        Ok(Response::Path("x".into())),
    );
    // Let any backoff pass.
    let mut sent = s.sent();
    for _ in 0..20 {
        if !sent.is_empty() {
            break;
        }
        match s.r.poll_timeout() {
            Some(at) => {
                s.r.handle_timeout(at);
                sent = s.sent();
            }
            None => break,
        }
    }
    assert_eq!(
        sent,
        ["multiRead[get Q/qn-0000000001]"],
        "the claimed item is never read: the take {t} hangs"
    );
}

/// The same with a deadline: the claimed item is read again and the take answered
/// (its batch was on the wire, so its outcome decides, past the deadline too).
#[test]
fn a_claimed_item_whose_read_was_refused_first_is_read_again_past_the_deadline() {
    let mut s = consumer(Delivery::AtLeastOnce, Format::Fifo);
    let deadline = Instant::from_micros(1_000_000);
    let t = s.r.take(T, 1, Some(deadline));
    s.reply("list M", children(&[]));
    s.reply("list Q", children(&["qn-0000000001"]));
    s.reply("multiRead[", Err(Error::Overloaded));
    s.reply(
        "create M/claim-qn-0000000001 e 'c1'",
        Ok(Response::Path("x".into())),
    );
    let later = Instant::from_micros(10_000_000);
    s.r.handle_timeout(later);
    assert_eq!(
        s.sent(),
        ["multiRead[get Q/qn-0000000001]"],
        "take {t} hangs"
    );
    s.reply("multiRead[", multi(vec![data("one")]));
    assert!(
        matches!(&s.events()[..], [ConsumerEvent::Taken { take, items }] if *take == t && items.len() == 1)
    );
}

/// At most once, in a new session whose previous session's marker `c-c1` is still on
/// the server (expired by the client's estimate, not yet by the server): the claim's
/// `create marker` fails `NodeExists`, the marker read finds another session's marker:
/// the take goes out again after a backoff (as the producer's), not every round trip
/// until the old session expires on the server.
#[test]
fn another_sessions_marker_is_waited_out_with_a_backoff() {
    let mut s = consumer(Delivery::AtMostOnce, Format::Fifo);
    s.r.take(T, 1, None);
    s.reply("list Q", children(&["qn-0000000001"]));
    s.reply("multiRead[", multi(vec![data("one")]));
    // What is sent next, letting backoffs pass.
    fn next_sent(s: &mut Script<Consumer>) -> Vec<String> {
        for _ in 0..10 {
            let sent = s.sent();
            if !sent.is_empty() {
                return sent;
            }
            let Some(at) = s.r.poll_timeout() else {
                break;
            };
            s.r.handle_timeout(at);
        }
        Vec::new()
    }
    for round in 0..3 {
        if round > 0 {
            // Not applied: read again before taking again.
            assert_eq!(
                next_sent(&mut s),
                ["multiRead[get Q/qn-0000000001]"],
                "round {round}"
            );
            s.reply("multiRead[", multi(vec![data("one")]));
        }
        assert_eq!(
            next_sent(&mut s),
            ["multi[create M/c-c1 e, set M/c-c1 '' @0, delete Q/qn-0000000001]"],
            "round {round}"
        );
        s.reply(
            "multi[",
            multi(vec![
                err(ErrorCode::NodeExists),
                err(ErrorCode::RuntimeInconsistency),
                err(ErrorCode::RuntimeInconsistency),
            ]),
        );
        assert_eq!(next_sent(&mut s), ["sync M", "exists M/c-c1"]);
        s.reply("sync", Ok(Response::Path(META.into())));
        s.reply("exists", Ok(Response::Stat(st().version(3).owner(0x55))));
        let again = s.sent();
        assert!(
            again.is_empty(),
            "sent again at once with no backoff: {again:?}"
        );
        assert!(s.r.poll_timeout().is_some(), "a backoff, then again");
    }
}

// Pinned before the consumer's port to states as types (issue 38): paths the property
// and simulator suites reach only by chance.

/// At least once, a listing that finds only items claimed by others waits for a claim
/// to go, which changes only the side directory: when that listing did not watch the
/// side directory (the one before it was empty, so only the queue was watched), it
/// lists again watching both; then it waits, and the side directory's notification
/// wakes it.
#[test]
fn a_wait_on_items_all_claimed_by_others_watches_the_side_directory_too() {
    let mut s = consumer(Delivery::AtLeastOnce, Format::Fifo);
    s.r.take(T, 1, None);
    s.reply("list M", children(&[]));
    s.reply("list Q", children(&[]));
    assert_eq!(s.sent(), ["list M", "list! Q"]);
    s.reply("list M", children(&["claim-qn-0000000001"]));
    s.reply("list! Q", children(&["qn-0000000001"]));
    assert_eq!(
        s.sent(),
        ["list! M", "list! Q"],
        "the side directory was not watched: list again, watching it"
    );
    s.reply("list! M", children(&["claim-qn-0000000001"]));
    s.reply("list! Q", children(&["qn-0000000001"]));
    assert!(s.sent().is_empty(), "both watched: wait");
    s.fire(EventType::NodeChildrenChanged, META);
    assert_eq!(s.sent(), ["list! M", "list! Q"]);
    assert!(s.events().is_empty());
}

/// At least once, the delete of a stale claim (its item was completed by someone else)
/// whose reply was lost is checked after a `sync` (another consumer may hold a claim of
/// that name by now), and deleted again only if it is still ours.
#[test]
fn a_lost_delete_of_a_stale_claim_is_checked_after_a_sync() {
    let mut s = consumer(Delivery::AtLeastOnce, Format::Fifo);
    let t = s.r.take(T, 1, None);
    s.reply("list M", children(&[]));
    s.reply("list Q", children(&["qn-0000000001"]));
    s.reply("create", Ok(Response::Path("x".into())));
    s.reply("multiRead[", multi(vec![err(ErrorCode::NoNode)]));
    assert_eq!(
        s.sent(),
        ["delete M/claim-qn-0000000001", "list M", "list Q"]
    );
    s.disconnect();
    s.r.handle_session(
        T,
        SessionChange::Reconnected {
            session_id: SESSION,
        },
    );
    assert_eq!(
        s.sent(),
        ["sync M", "exists M/claim-qn-0000000001", "list M", "list Q"]
    );
    s.reply("sync", Ok(Response::Path(META.into())));
    s.reply("exists", Ok(Response::Stat(st().version(0).owner(SESSION))));
    assert_eq!(s.sent(), ["delete M/claim-qn-0000000001"], "still ours");
    assert!(s.events().is_empty());
    let _ = t;
}

/// At least once, a release whose reply was lost that finds the claim held by another
/// session has landed (another consumer claimed the item since): `Released`, and that
/// claim is not touched.
#[test]
fn a_lost_release_that_finds_another_sessions_claim_has_landed() {
    let mut s = consumer(Delivery::AtLeastOnce, Format::Fifo);
    s.r.take(T, 1, None);
    s.reply("list M", children(&[]));
    s.reply("list Q", children(&["qn-0000000001"]));
    s.reply("create", Ok(Response::Path("x".into())));
    s.reply("multiRead[", multi(vec![data("one")]));
    s.events();
    s.r.release(T, "qn-0000000001").unwrap();
    assert_eq!(s.sent(), ["delete M/claim-qn-0000000001"]);
    s.disconnect();
    s.r.handle_session(
        T,
        SessionChange::Reconnected {
            session_id: SESSION,
        },
    );
    assert_eq!(s.sent(), ["sync M", "exists M/claim-qn-0000000001"]);
    s.reply("sync", Ok(Response::Path(META.into())));
    s.reply("exists", Ok(Response::Stat(st().version(0).owner(0x99))));
    assert!(s.sent().is_empty(), "another's claim: never deleted");
    assert_eq!(
        s.events(),
        [ConsumerEvent::Released {
            item: "qn-0000000001".into()
        }]
    );
}

/// At least once, a claim whose create reply was lost that turns out to be another
/// session's is skipped: its item is neither read nor delivered.
#[test]
fn a_lost_claim_that_turns_out_to_be_another_sessions_is_skipped() {
    let mut s = consumer(Delivery::AtLeastOnce, Format::Fifo);
    s.r.take(T, 1, None);
    s.reply("list M", children(&[]));
    s.reply("list Q", children(&["qn-0000000001"]));
    s.disconnect();
    s.r.handle_session(
        T,
        SessionChange::Reconnected {
            session_id: SESSION,
        },
    );
    assert_eq!(s.sent(), ["sync M", "exists M/claim-qn-0000000001"]);
    s.reply("sync", Ok(Response::Path(META.into())));
    s.reply("exists", Ok(Response::Stat(st().version(0).owner(0x99))));
    assert_eq!(s.sent(), ["list M", "list Q"], "skipped: list again");
    assert!(s.events().is_empty());
}

/// At most once, a session that expires while the take's `multi` is in doubt fails that
/// take (`SessionExpired`: the items may be gone with no one holding them); one that
/// expires while the batch is only being read keeps the take, which lists again on the
/// new session.
#[test]
fn an_expiry_fails_a_take_in_doubt_and_keeps_one_that_only_read() {
    let mut s = consumer(Delivery::AtMostOnce, Format::Fifo);
    let t = s.r.take(T, 1, None);
    s.reply("list", children(&["qn-0000000001"]));
    s.reply("multiRead[", multi(vec![data("one")]));
    assert_eq!(
        s.sent(),
        ["multi[create M/c-c1 e, set M/c-c1 '' @0, delete Q/qn-0000000001]"]
    );
    s.disconnect();
    s.r.handle_session(T, SessionChange::Expired);
    assert_eq!(
        s.events(),
        [ConsumerEvent::TakeFailed {
            take: t,
            error: Error::SessionExpired
        }]
    );

    let mut s = consumer(Delivery::AtMostOnce, Format::Fifo);
    let t = s.r.take(T, 1, None);
    s.reply("list", children(&["qn-0000000001"]));
    assert_eq!(s.sent(), ["multiRead[get Q/qn-0000000001]"]);
    s.disconnect();
    s.r.handle_session(T, SessionChange::Expired);
    assert!(s.events().is_empty(), "nothing was taken: the take goes on");
    s.r.handle_session(
        T,
        SessionChange::Connected {
            session_id: SESSION + 1,
        },
    );
    assert_eq!(s.sent(), ["list Q"]);
    let _ = t;
}

// Pinned before the producer's port to states as types (issue 38).

/// A put in doubt whose marker is gone when it is read (an operator deleted it after
/// a batch of ours was applied with it) cannot be decided: it fails as maybe applied,
/// never put twice; a put in doubt before any batch of this marker was applied is sent
/// again; the marker is made again by the next batch, chained from version 0.
#[test]
fn a_put_in_doubt_whose_used_marker_vanished_fails_as_maybe_applied() {
    let mut s = producer();
    s.r.put(T, Bytes::from_static(b"first")).unwrap();
    s.reply(
        "multi[create",
        multi(vec![
            MultiResult::Create(format!("{META}/p-p1")),
            MultiResult::SetData(st().version(1).owner(SESSION)),
            created("qn-0000000001"),
        ]),
    );
    s.events();
    let a = s.r.put(T, Bytes::from_static(b"a")).unwrap();
    assert_eq!(s.sent(), ["multi[set M/p-p1 '' @1, create Q/qn- s 'a']"]);
    s.disconnect();
    s.r.handle_session(
        T,
        SessionChange::Reconnected {
            session_id: SESSION,
        },
    );
    assert_eq!(s.sent(), ["sync M", "exists M/p-p1"]);
    s.reply("sync", Ok(Response::Path(META.into())));
    s.reply("exists", Err(Error::Server(ErrorCode::NoNode)));
    assert_eq!(
        s.events(),
        [ProducerEvent::PutFailed {
            id: a,
            error: Error::ConnectionLoss,
            may_have_applied: true
        }]
    );
    let b = s.r.put(T, Bytes::from_static(b"b")).unwrap();
    assert_eq!(
        s.sent(),
        ["multi[create M/p-p1 e, set M/p-p1 '' @0, create Q/qn- s 'b']"]
    );
    let _ = b;

    // The marker's first batch in doubt, the marker not there: not applied, sent again.
    let mut s = producer();
    let a = s.r.put(T, Bytes::from_static(b"a")).unwrap();
    s.disconnect();
    s.r.handle_session(
        T,
        SessionChange::Reconnected {
            session_id: SESSION,
        },
    );
    s.reply("sync", Ok(Response::Path(META.into())));
    s.reply("exists", Err(Error::Server(ErrorCode::NoNode)));
    assert!(s.events().is_empty(), "not applied: nothing to report yet");
    assert_eq!(
        s.sent(),
        ["multi[create M/p-p1 e, set M/p-p1 '' @0, create Q/qn- s 'a']"]
    );
    let _ = a;
}
