//! Regressions of the queue recipe found by the simulator and property harnesses
//! (`tests/sim/queue_sim.rs`, `tests/props/queue_props.rs`), as transcripts: scripted replies in,
//! exact requests and events out (the notation of `queue_transcripts.rs`).
#![allow(dead_code)]

use crate::queue_script;
use queue_script::*;
fn consumer(delivery: Delivery) -> Script<Consumer> {
    let mut c = ConsumerConfig::new(DIR, "c1");
    c.delivery = delivery;
    c.spread = 0;
    script(Consumer::new(c))
}

const OTHER: i64 = 0x99;

/// An at-least-once consumer holding `qn-0000000001`.
fn holding() -> Script<Consumer> {
    let mut s = consumer(Delivery::AtLeastOnce);
    s.r.take(T, 1, None);
    s.reply("list M", children(&[]));
    s.reply("list Q", children(&["qn-0000000001"]));
    s.reply("create", Ok(Response::Path("x".into())));
    s.reply("multiRead[", multi(vec![data("one")]));
    assert!(matches!(&s.events()[..], [ConsumerEvent::Taken { .. }]));
    s
}

fn reconnect(s: &mut Script<Consumer>) {
    s.r.handle_session(
        T,
        SessionChange::Reconnected {
            session_id: SESSION,
        },
    );
}

/// Found by the simulator: a release whose reply was lost was sent again as a blind
/// `delete claim`. The first one had landed, another consumer had claimed the item
/// since, and the second delete removed *its* claim — two live holders of one item.
/// After a lost reply the consumer now checks whose claim it is before deleting again.
#[test]
fn a_release_whose_reply_was_lost_never_deletes_another_consumers_claim() {
    let mut s = holding();
    s.r.release(T, "qn-0000000001").unwrap();
    assert_eq!(s.sent(), ["delete M/claim-qn-0000000001"]);
    s.disconnect();
    reconnect(&mut s);
    assert_eq!(s.sent(), ["sync M", "exists M/claim-qn-0000000001"]);
    s.reply("sync", Ok(Response::Path(META.into())));
    // Someone else's claim now: ours is gone, the release landed.
    s.reply("exists", Ok(Response::Stat(st().version(0).owner(OTHER))));
    assert_eq!(s.sent(), Vec::<String>::new());
    assert_eq!(
        s.events(),
        [ConsumerEvent::Released {
            item: "qn-0000000001".into()
        }]
    );
}

#[test]
fn a_release_whose_reply_was_lost_is_sent_again_while_the_claim_is_ours() {
    let mut s = holding();
    s.r.release(T, "qn-0000000001").unwrap();
    s.disconnect();
    reconnect(&mut s);
    s.reply("sync", Ok(Response::Path(META.into())));
    s.reply("exists", Ok(Response::Stat(st().version(0).owner(SESSION))));
    assert_eq!(s.sent(), ["delete M/claim-qn-0000000001"]);
    s.reply("delete", Ok(Response::Empty));
    assert_eq!(
        s.events(),
        [ConsumerEvent::Released {
            item: "qn-0000000001".into()
        }]
    );
}

/// The same for a completion: a claim of another session under our item's name (the
/// item was completed, and the directory deleted and made again — reaped, when it was
/// a container — and the new item of the same name claimed) means ours is gone — completed; the old code sent
/// the multi again and deleted the other consumer's claim and item.
#[test]
fn a_completion_whose_reply_was_lost_never_deletes_another_consumers_claim() {
    let mut s = holding();
    s.r.complete(T, "qn-0000000001").unwrap();
    s.disconnect();
    reconnect(&mut s);
    assert_eq!(s.sent(), ["sync M", "exists M/claim-qn-0000000001"]);
    s.reply("sync", Ok(Response::Path(META.into())));
    s.reply("exists", Ok(Response::Stat(st().version(0).owner(OTHER))));
    assert_eq!(s.sent(), Vec::<String>::new());
    assert_eq!(
        s.events(),
        [ConsumerEvent::Completed {
            item: "qn-0000000001".into()
        }]
    );
}

/// A stale claim (its item completed meanwhile) whose delete reply was lost: checked,
/// never deleted again blindly.
#[test]
fn an_orphan_claim_whose_delete_reply_was_lost_is_checked_before_deleting_again() {
    let mut s = consumer(Delivery::AtLeastOnce);
    s.r.take(T, 1, None);
    s.reply("list M", children(&[]));
    s.reply("list Q", children(&["qn-0000000001"]));
    s.reply("create", Ok(Response::Path("x".into())));
    s.reply("multiRead[", multi(vec![err(ErrorCode::NoNode)]));
    let sent = s.sent();
    assert!(
        sent.contains(&"delete M/claim-qn-0000000001".to_string()),
        "{sent:?}"
    );
    s.disconnect();
    reconnect(&mut s);
    let sent = s.sent();
    assert!(
        !sent.contains(&"delete M/claim-qn-0000000001".to_string()),
        "{sent:?}"
    );
    assert!(
        sent.contains(&"exists M/claim-qn-0000000001".to_string()),
        "{sent:?}"
    );
    s.reply("sync", Ok(Response::Path(META.into())));
    s.reply("exists", Ok(Response::Stat(st().version(0).owner(OTHER))));
    let sent = s.sent();
    assert!(
        !sent.contains(&"delete M/claim-qn-0000000001".to_string()),
        "{sent:?}"
    );
}

/// Found by the simulator: every item left was claimed by a consumer whose session then
/// died. The other consumers had filtered the claimed items out, found nothing, and
/// waited on the queue directory's watch — but a claim going away changes only the side
/// directory, so nobody woke up and the item stayed until the next put. A listing that
/// finds only claimed items now watches the side directory too.
#[test]
fn a_consumer_that_finds_only_claimed_items_wakes_when_a_claim_goes() {
    let mut s = consumer(Delivery::AtLeastOnce);
    let t = s.r.take(T, 1, None);
    assert_eq!(s.sent(), ["list M", "list Q"]);
    s.reply("list M", children(&["claim-qn-0000000001", "c-x"]));
    s.reply("list Q", children(&["qn-0000000001"]));
    // Nothing to take: list again with watches, on the claims too.
    assert_eq!(s.sent(), ["list! M", "list! Q"]);
    s.reply("list! M", children(&["claim-qn-0000000001", "c-x"]));
    s.reply("list! Q", children(&["qn-0000000001"]));
    assert_eq!(s.sent(), Vec::<String>::new());
    // The holder's session expires: its claim goes.
    s.fire(EventType::NodeChildrenChanged, META);
    assert_eq!(s.sent(), ["list! M", "list! Q"]);
    s.reply("list! M", children(&["c-x"]));
    s.reply("list! Q", children(&["qn-0000000001"]));
    assert_eq!(
        s.sent(),
        [
            "create M/claim-qn-0000000001 e 'c1'",
            "multiRead[get Q/qn-0000000001]"
        ]
    );
    s.reply("create", Ok(Response::Path("x".into())));
    s.reply("multiRead[", multi(vec![data("one")]));
    assert!(matches!(&s.events()[..], [ConsumerEvent::Taken { take, .. }] if *take == t));
}

/// The claim may go while the listing is on the wire (after the claims were listed,
/// before the queue was): the side directory's watch fires then, and the consumer
/// lists again instead of waiting for a watch that already fired.
#[test]
fn a_claim_that_goes_while_listing_is_not_missed() {
    let mut s = consumer(Delivery::AtLeastOnce);
    s.r.take(T, 1, None);
    s.reply("list M", children(&["claim-qn-0000000001"]));
    s.reply("list Q", children(&["qn-0000000001"]));
    s.reply("list! M", children(&["claim-qn-0000000001"]));
    s.fire(EventType::NodeChildrenChanged, META);
    s.reply("list! Q", children(&["qn-0000000001"]));
    assert_eq!(s.sent(), ["list! M", "list! Q"]);
}

fn producer() -> Script<Producer> {
    script(Producer::new(ProducerConfig::new(DIR, "p1")))
}

/// Found by the simulator: after an expiry the client estimated before the server
/// acted on it, the old session's marker (same path) was still there. The new
/// session's first batch (creating the marker) failed with `NodeExists`, but the second
/// batch, pipelined behind it and chained on version 1, matched the *old* marker's
/// version and applied — its items landed before the first batch's, which was sent
/// again: the producer's put order broken (and the marker no longer counting only this
/// session's batches). Now nothing is pipelined behind a batch that creates the marker,
/// and a marker of another session is waited out with a backoff.
#[test]
fn a_new_sessions_batches_wait_for_the_marker_and_never_chain_on_a_stale_one() {
    const NEW: i64 = 0x78;
    let mut s = producer();
    s.r.handle_session(T, SessionChange::Expired);
    s.r.handle_session(T, SessionChange::Connected { session_id: NEW });
    s.r.put(T, Bytes::from_static(b"a")).unwrap();
    assert_eq!(
        s.sent(),
        ["multi[create M/p-p1 e, set M/p-p1 '' @0, create Q/qn- s 'a']"]
    );
    s.r.put(T, Bytes::from_static(b"b")).unwrap();
    // Nothing chained behind the batch that creates the marker.
    assert_eq!(s.sent(), Vec::<String>::new());
    s.reply(
        "multi[create",
        multi(vec![
            err(ErrorCode::NodeExists),
            err(ErrorCode::RuntimeInconsistency),
            err(ErrorCode::RuntimeInconsistency),
        ]),
    );
    assert_eq!(s.sent(), ["sync M", "exists M/p-p1"]);
    s.reply("sync", Ok(Response::Path(META.into())));
    // The old session's marker, not expired on the server yet.
    s.reply("exists", Ok(Response::Stat(st().version(3).owner(SESSION))));
    assert_eq!(s.sent(), Vec::<String>::new(), "waits before trying again");
    let at = s.r.poll_timeout().expect("a retry deadline");
    s.r.handle_timeout(at);
    assert_eq!(
        s.sent(),
        ["multi[create M/p-p1 e, set M/p-p1 '' @0, create Q/qn- s 'a', create Q/qn- s 'b']"]
    );
}

/// Found by the property harness: once a retry had waited (its backoff deadline in the
/// past), a producer with puts queued but no room to send them (the window full, or the
/// first batch still creating the marker) kept answering that past deadline from
/// `poll_timeout` — a host would spin on `handle_timeout` until the reply came. Only a
/// producer that could send but for the backoff (or must resolve, create parents or
/// delete its marker) has a deadline.
#[test]
fn a_producer_waiting_for_replies_has_no_deadline_in_the_past() {
    let mut s = producer();
    s.r.put(T, Bytes::from_static(b"a")).unwrap();
    // Refused once: sent again after the backoff.
    s.reply("multi[create", Err(Error::Overloaded));
    assert_eq!(s.sent(), Vec::<String>::new());
    let at = s.r.poll_timeout().expect("the backoff");
    s.r.handle_timeout(at);
    assert_eq!(
        s.sent(),
        ["multi[create M/p-p1 e, set M/p-p1 '' @0, create Q/qn- s 'a']"]
    );
    // A second put waits for the first batch (it creates the marker).
    s.r.put(at, Bytes::from_static(b"b")).unwrap();
    assert_eq!(s.sent(), Vec::<String>::new());
    assert!(
        s.r.poll_timeout().is_none_or(|t| t > at),
        "deadline {:?} not after {at:?}",
        s.r.poll_timeout()
    );
}

/// Found by the property harness: the consumer's `poll_timeout` answered the last
/// backoff's deadline — in the past — whenever a take was waiting, even while its batch
/// was on the wire or the session was gone (expired, a new one not yet connected): a
/// host would spin on `handle_timeout`. Only a consumer that could send but for the
/// backoff has that deadline now.
#[test]
fn a_consumer_waiting_for_replies_or_a_session_has_no_deadline_in_the_past() {
    let mut s = consumer(Delivery::AtMostOnce);
    s.r.take(T, 1, None);
    s.reply("list Q", Err(Error::Server(ErrorCode::Throttled)));
    let at = s.r.poll_timeout().expect("the backoff");
    s.r.handle_timeout(at);
    assert_eq!(s.sent(), ["list Q"]);
    s.reply("list Q", children(&["qn-0000000001"]));
    // (The script answers at time zero: still inside the backoff.)
    s.r.handle_timeout(at);
    assert_eq!(s.sent(), ["multiRead[get Q/qn-0000000001]"]);
    let after = |s: &Script<Consumer>| s.r.poll_timeout().is_none_or(|t| t > at);
    assert!(after(&s), "reading: deadline {:?}", s.r.poll_timeout());
    s.r.handle_session(at, SessionChange::Expired);
    assert!(after(&s), "expired: deadline {:?}", s.r.poll_timeout());
}

/// Found by the property harness: an at-least-once take whose claims were on the wire
/// when the user closed the consumer still delivered its items (`Taken` after `close`)
/// and kept them held — nothing released those claims, `Closed` followed, and the items
/// stayed claimed by a live session: never taken again. Now such a take fails with
/// `Closed` and its claims are released before `Closed`.
#[test]
fn claims_that_land_after_close_are_released_not_delivered() {
    let mut s = consumer(Delivery::AtLeastOnce);
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
    s.r.close(T);
    s.reply("create", Ok(Response::Path("x".into())));
    s.reply("multiRead[", multi(vec![data("one")]));
    assert_eq!(
        s.events(),
        [ConsumerEvent::TakeFailed {
            take: t,
            error: Error::Closed
        }]
    );
    assert_eq!(s.sent(), ["delete M/claim-qn-0000000001"]);
    s.reply("delete", Ok(Response::Empty));
    assert_eq!(
        s.events(),
        [
            ConsumerEvent::Released {
                item: "qn-0000000001".into()
            },
            ConsumerEvent::Closed
        ]
    );
}

/// The same with a failed batch waiting for the batches behind it to answer: nothing can
/// be sent until they do, so no deadline either.
#[test]
fn a_producer_resolving_a_failed_batch_waits_for_replies_without_a_deadline() {
    let mut cfg = ProducerConfig::new(DIR, "p1");
    cfg.max_batches_in_flight = 2;
    let mut s = script(Producer::new(cfg));
    s.r.put(T, Bytes::from_static(b"a")).unwrap();
    s.reply(
        "multi[create",
        multi(vec![
            MultiResult::Create(format!("{META}/p-p1")),
            MultiResult::SetData(st().version(1).owner(SESSION)),
            created("qn-0000000001"),
        ]),
    );
    for d in [b"b", b"c", b"d"] {
        s.r.put(T, Bytes::from_static(d)).unwrap();
    }
    assert_eq!(s.sent().len(), 2);
    s.reply("multi[set M/p-p1 '' @1", Err(Error::Overloaded));
    let at = s.r.poll_timeout().unwrap_or(T);
    s.r.handle_timeout(at);
    assert!(
        s.r.poll_timeout().is_none_or(|t| t > at),
        "deadline {:?} not after {at:?}",
        s.r.poll_timeout()
    );
}

/// A close that found the consumer inside a backoff must still end once it is over
/// (the deadline fix above must not drop the close's own).
#[test]
fn a_close_inside_a_backoff_ends_when_the_backoff_is_over() {
    let mut s = consumer(Delivery::AtMostOnce);
    s.r.take(T, 1, None);
    s.reply("list Q", Err(Error::Server(ErrorCode::Throttled)));
    s.r.close(T);
    s.events();
    let at = s.r.poll_timeout().expect("the close waits for the backoff");
    s.r.handle_timeout(at);
    assert_eq!(s.events(), [ConsumerEvent::Closed]);
}

/// Found by the property harness: a take whose batch was on the wire at `close` ended
/// with nothing (every item of the batch claimed by someone else) and then went on
/// waiting — the consumer never reported `Closed`. A take left when the batch ends
/// during a close now fails with `Closed`.
#[test]
fn a_take_whose_batch_comes_back_empty_during_close_fails_and_the_close_ends() {
    let mut s = consumer(Delivery::AtLeastOnce);
    let t = s.r.take(T, 1, None);
    s.reply("list M", children(&[]));
    s.reply("list Q", children(&["qn-0000000001"]));
    s.r.close(T);
    s.reply("create", Err(Error::Server(ErrorCode::NodeExists)));
    s.reply("multiRead[", multi(vec![data("one")]));
    assert_eq!(
        s.events(),
        [
            ConsumerEvent::TakeFailed {
                take: t,
                error: Error::Closed
            },
            ConsumerEvent::Closed
        ]
    );
}

/// Found by the simulator (at-most-once seed 3204): every refused reply of a round of
/// parent creates started a whole new round at once, with no backoff, so a session
/// refusing requests (too many pending) fed the consumer's in-flight list without
/// bound inside one input. Now one round is on the wire at a time, and a refused round
/// goes again once, after a backoff.
#[test]
fn a_refused_round_of_parent_creates_goes_again_once_after_a_backoff() {
    let mut s = consumer(Delivery::AtMostOnce);
    s.r.take(T, 1, None);
    s.reply("list", Err(Error::Server(ErrorCode::NoNode)));
    let round = [
        "container /app",
        "create Q",
        "container /app",
        "container M",
    ];
    assert_eq!(s.sent(), [&round[..], &["list Q"]].concat());
    for line in round {
        s.reply(line, Err(Error::Overloaded));
        assert_eq!(
            s.sent(),
            Vec::<String>::new(),
            "nothing until the backoff ends"
        );
    }
    // The listing behind the round finds no directory: no new round yet either.
    s.reply("list", Err(Error::Server(ErrorCode::NoNode)));
    assert_eq!(
        s.sent(),
        Vec::<String>::new(),
        "nothing until the backoff ends"
    );
    let at = s.r.poll_timeout().expect("the backoff's deadline");
    assert!(at > T);
    s.r.handle_timeout(at);
    assert_eq!(s.sent()[..4], round, "one round again");
    assert_eq!(s.sent(), Vec::<String>::new());
}

#[test]
fn a_producers_refused_round_of_parent_creates_goes_again_once_after_a_backoff() {
    let mut s = producer();
    s.r.put(T, Bytes::from_static(b"a")).unwrap();
    s.reply(
        "multi[create",
        multi(vec![
            err(ErrorCode::NoNode),
            err(ErrorCode::RuntimeInconsistency),
            err(ErrorCode::RuntimeInconsistency),
        ]),
    );
    let round = [
        "container /app",
        "create Q",
        "container /app",
        "container M",
    ];
    assert_eq!(s.sent()[..4], round);
    for line in round {
        s.reply(line, Err(Error::Overloaded));
    }
    // The put that went behind the round fails for the missing parent: no new round yet.
    s.reply("multi[", multi(vec![err(ErrorCode::NoNode)]));
    assert!(!s.sent().iter().any(|l| round.contains(&l.as_str())));
    let at = s.r.poll_timeout().expect("the backoff's deadline");
    assert!(at > T);
    s.r.handle_timeout(at);
    let again = s.sent();
    assert_eq!(
        again.iter().filter(|l| round.contains(&l.as_str())).count(),
        4,
        "{again:?}"
    );
}
