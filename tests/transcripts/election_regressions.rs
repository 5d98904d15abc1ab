//! Regressions found in the election machine by its simulator harness
//! (`zk_recipes_sim::testkit::sim_election`), each reduced to a hand-driven transcript.

use super::kit::*;
use zk_recipes::recipe::election::{Election, ElectionConfig, ElectionEvent};

const DIR: &str = "/e";

fn requests(e: &mut Election) -> Vec<(u64, Request)> {
    core::iter::from_fn(|| e.poll_request()).collect()
}

/// A candidate waiting behind a lower node: returns the machine and the op of the read
/// that watches its own node.
fn waiting_candidate(config: ElectionConfig) -> (Election, u64, String) {
    let now = Instant::ZERO;
    let mut e = Election::new(config);
    e.handle_session(now, SessionChange::Connected { session_id: 7 });
    assert_eq!(e.join(now), zk_recipes::recipe::election::Join::Pending);
    let sent = requests(&mut e);
    let (create, list) = (sent[0].0, sent[1].0);
    let Request::Create2(c) = &sent[0].1 else {
        panic!("{sent:?}")
    };
    let ours = format!("{}0000000002", c.path.rsplit('/').next().unwrap());
    let stat = Stat {
        czxid: 20,
        ephemeral_owner: 7,
        ..Stat::default()
    };
    e.handle_reply(
        now,
        create,
        Ok(Response::PathStat {
            path: format!("{DIR}/{ours}"),
            stat,
        }),
    );
    let lower = "_c_other-latch-0000000001".to_string();
    e.handle_reply(now, list, Ok(Response::Children(vec![lower, ours.clone()])));
    // Two reads with watches: the predecessor's and our own node's; both answered.
    let reads = requests(&mut e);
    let own = reads
        .iter()
        .find(|(_, r)| matches!(r, Request::GetData(g) if g.path.ends_with(&ours)))
        .expect("a watch on our own node")
        .0;
    for (op, _) in reads {
        let data = Response::Data {
            data: bytes::Bytes::new(),
            stat: Stat::default(),
        };
        e.handle_reply(now, op, Ok(data));
    }
    assert!(requests(&mut e).is_empty());
    assert!(
        matches!(events(&mut e)[..], [ElectionEvent::Joined { .. }]),
        "in line, not leading"
    );
    (e, own, ours)
}

/// The module docs: "a candidacy that ends by itself — the session expired and a new
/// one started, or our node was deleted — is made again with a fresh node". A waiting
/// candidate whose node is deleted (by an operator, or by the server expiring our
/// session while the connection is still up: the deletion's watch can reach us before
/// the expiry does) ended the machine with `Failed { NoNode }` instead.
#[test]
fn a_waiting_candidate_whose_node_is_deleted_stands_again() {
    let (mut e, own, ours) = waiting_candidate(ElectionConfig::new(DIR, "p1", (1, 2)));
    let now = Instant::from_micros(1_000);
    e.handle_watch(
        now,
        own,
        &WatchEvent {
            event_type: EventType::NodeDeleted,
            path: format!("{DIR}/{ours}"),
        },
    );
    let evs = events(&mut e);
    assert!(
        !evs.iter().any(ElectionEvent::is_final),
        "the candidacy must be made again, not end the machine: {evs:?}"
    );
    let again = requests(&mut e);
    assert!(
        again.iter().any(|(_, r)| matches!(r, Request::Create2(_))),
        "a fresh candidate node: {again:?}"
    );
    assert!(!e.is_done());
}

/// Without `rejoin`, the same deletion ends the candidacy for good (a final event).
#[test]
fn without_rejoin_a_deleted_candidate_ends() {
    let mut config = ElectionConfig::new(DIR, "p1", (1, 2));
    config.rejoin = false;
    let (mut e, own, ours) = waiting_candidate(config);
    e.handle_watch(
        Instant::ZERO,
        own,
        &WatchEvent {
            event_type: EventType::NodeDeleted,
            path: format!("{DIR}/{ours}"),
        },
    );
    let evs = events(&mut e);
    assert!(evs.iter().any(ElectionEvent::is_final), "{evs:?}");
    assert!(!requests(&mut e)
        .iter()
        .any(|(_, r)| matches!(r, Request::Create2(_))));
}

/// A leader closes while its acknowledgement's write is in flight; the write is
/// refused (retryable), so the withdrawal waits for the backoff. Once it is sent,
/// `poll_timeout` kept answering the backoff's deadline, now in the past: a host that
/// sleeps until `poll_timeout` spun until the reply came.
#[test]
fn no_deadline_in_the_past_while_the_withdrawal_is_in_flight() {
    let now = Instant::ZERO;
    let mut e = Election::new(ElectionConfig::new(DIR, "p1", (1, 2)));
    e.handle_session(now, SessionChange::Connected { session_id: 7 });
    assert_eq!(e.join(now), zk_recipes::recipe::election::Join::Pending);
    let sent = requests(&mut e);
    let Request::Create2(c) = &sent[0].1 else {
        panic!("{sent:?}")
    };
    let ours = format!("{}0000000001", c.path.rsplit('/').next().unwrap());
    let stat = Stat {
        czxid: 20,
        ephemeral_owner: 7,
        ..Stat::default()
    };
    e.handle_reply(
        now,
        sent[0].0,
        Ok(Response::PathStat {
            path: format!("{DIR}/{ours}"),
            stat,
        }),
    );
    e.handle_reply(now, sent[1].0, Ok(Response::Children(vec![ours.clone()])));
    assert!(matches!(
        events(&mut e)[..],
        [ElectionEvent::Joined { .. }, ElectionEvent::Elected { .. }]
    ));
    let _own_watch = requests(&mut e);
    assert!(e.acknowledge(now));
    let write = requests(&mut e);
    let [(write, Request::Multi(_))] = write[..] else {
        panic!("{write:?}")
    };
    e.close(now);
    assert!(
        requests(&mut e).is_empty(),
        "the withdrawal waits for the write"
    );
    e.handle_reply(now, write, Err(zk_recipes::error::Error::Overloaded));
    let backoff = e.poll_timeout().expect("a retry deadline");
    assert!(backoff > now);
    e.handle_timeout(backoff);
    let withdraw = requests(&mut e);
    assert!(
        matches!(withdraw[..], [(_, Request::Delete(_))]),
        "{withdraw:?}"
    );
    assert!(
        e.poll_timeout().is_none_or(|t| t > backoff),
        "deadline {:?} is not after now ({backoff:?}) while the withdrawal is in flight",
        e.poll_timeout()
    );
}

/// A leader closes while its acknowledgement's write is in flight, and its candidate
/// node is deleted (an operator) before the withdrawal of the acknowledgement could
/// run: the machine hears `Lost`, the write fails its check, and — the withdrawal still
/// marked pending with no candidate left to check it against — `close` never reached
/// `Closed`.
#[test]
fn close_ends_even_if_the_candidate_is_lost_before_the_withdrawal() {
    let now = Instant::ZERO;
    let mut e = Election::new(ElectionConfig::new(DIR, "p1", (1, 2)));
    e.handle_session(now, SessionChange::Connected { session_id: 7 });
    assert_eq!(e.join(now), zk_recipes::recipe::election::Join::Pending);
    let sent = requests(&mut e);
    let Request::Create2(c) = &sent[0].1 else {
        panic!("{sent:?}")
    };
    let ours = format!("{}0000000001", c.path.rsplit('/').next().unwrap());
    let path = format!("{DIR}/{ours}");
    let stat = Stat {
        czxid: 20,
        ephemeral_owner: 7,
        ..Stat::default()
    };
    e.handle_reply(
        now,
        sent[0].0,
        Ok(Response::PathStat {
            path: path.clone(),
            stat,
        }),
    );
    e.handle_reply(now, sent[1].0, Ok(Response::Children(vec![ours.clone()])));
    assert!(matches!(
        events(&mut e)[..],
        [ElectionEvent::Joined { .. }, ElectionEvent::Elected { .. }]
    ));
    let own = requests(&mut e);
    let [(own, Request::GetData(_))] = own[..] else {
        panic!("{own:?}")
    };
    let data = Response::Data {
        data: bytes::Bytes::new(),
        stat,
    };
    e.handle_reply(now, own, Ok(data));
    assert!(e.acknowledge(now));
    let write = requests(&mut e);
    let [(write, Request::Multi(_))] = write[..] else {
        panic!("{write:?}")
    };
    e.close(now);
    // The operator deletes our node: the watch fires, then the write fails its check.
    e.handle_watch(
        now,
        own,
        &WatchEvent {
            event_type: EventType::NodeDeleted,
            path,
        },
    );
    let failed = Response::Multi(vec![
        MultiResult::Error(ErrorCode::NoNode),
        MultiResult::Error(ErrorCode::RuntimeInconsistency),
    ]);
    e.handle_reply(now, write, Ok(failed));
    // The acknowledgement is withdrawn all the same (an earlier attempt could have been
    // applied); it is not there.
    let withdraw = requests(&mut e);
    let [(withdraw, Request::Delete(_))] = withdraw[..] else {
        panic!("{withdraw:?}")
    };
    e.handle_reply(
        now,
        withdraw,
        Err(zk_recipes::error::Error::Server(ErrorCode::NoNode)),
    );
    let evs = events(&mut e);
    let more = requests(&mut e);
    assert!(
        evs.contains(&ElectionEvent::Closed) && e.is_done(),
        "close must end the machine: events {evs:?}, requests {more:?}"
    );
}
