//! Transcript tests for `recipe::node::NodeWatch` and `recipe::rendezvous`: scripted
//! replies in, exact requests and events out, in the lines of `kit.rs`.

use super::kit::*;
use zk_recipes::recipe::node::{
    NodeWatch, NodeWatchEvent, OwnedNode, OwnedNodeConfig, OwnedNodeEvent,
};
use zk_recipes::recipe::rendezvous::{
    coordinator_config, publisher_config, Master, RendezvousEvent, Worker,
};

const T: Instant = Instant::ZERO;
const S: i64 = 0x77;
const ZR: &str = "/job/zr";

fn started<R: Recipe>(mut r: R, start: impl FnOnce(&mut R)) -> R {
    r.handle_session(T, SessionChange::Connected { session_id: S });
    start(&mut r);
    r
}

fn addr(d: &'static str, st: Stat) -> RendezvousEvent {
    RendezvousEvent::Address {
        data: Bytes::from_static(d.as_bytes()),
        stat: st,
    }
}

// ----- NodeWatch -----

#[test]
fn watch_reports_versions_and_deletion() {
    let mut w = started(NodeWatch::new(ZR), |w| w.start(T));
    let s = expect_sent!(w, ["get! /job/zr"]);
    w.handle_reply(T, s[0].0, data("x", st().czxid(1).mzxid(1).owner(0x42)));
    assert_eq!(
        events(&mut w),
        [NodeWatchEvent::Data {
            data: "x".into(),
            stat: st().czxid(1).mzxid(1).owner(0x42)
        }]
    );
    w.handle_watch(T, s[0].0, &ev(EventType::NodeDataChanged, ZR));
    let s = expect_sent!(w, ["get! /job/zr"]);
    w.handle_reply(T, s[0].0, data("y", st().czxid(1).mzxid(2).owner(0x42)));
    w.handle_watch(T, s[0].0, &ev(EventType::NodeDeleted, ZR));
    let s = sent(&mut w);
    w.handle_reply(T, s[0].0, no_node());
    assert_eq!(
        events(&mut w),
        [
            NodeWatchEvent::Data {
                data: "y".into(),
                stat: st().czxid(1).mzxid(2).owner(0x42)
            },
            NodeWatchEvent::Missing { gone: true }
        ]
    );
    assert_eq!(lines(&sent(&mut w)), ["exists! /job/zr"]);
}

#[test]
fn watch_same_version_is_not_reported_twice() {
    let mut w = started(NodeWatch::new(ZR), |w| w.start(T));
    let s = sent(&mut w);
    w.handle_reply(T, s[0].0, data("x", st().czxid(1).mzxid(1).owner(0x42)));
    events(&mut w);
    w.handle_session(T, SessionChange::Suspended);
    w.handle_session(T, SessionChange::Reconnected { session_id: S });
    let s = expect_sent!(w, ["sync /job/zr", "get /job/zr"]);
    w.handle_reply(T, s[0].0, Ok(Response::Path(ZR.into())));
    w.handle_reply(T, s[1].0, data("x", st().czxid(1).mzxid(1).owner(0x42)));
    assert_eq!(
        events(&mut w),
        [NodeWatchEvent::Suspended, NodeWatchEvent::Reconnected]
    );
}

#[test]
fn watch_exists_finds_node_created_meanwhile() {
    let mut w = started(NodeWatch::new(ZR), |w| w.start(T));
    let s = sent(&mut w);
    w.handle_reply(T, s[0].0, no_node());
    assert_eq!(events(&mut w), [NodeWatchEvent::Missing { gone: false }]);
    let e = sent(&mut w);
    w.handle_reply(
        T,
        e[0].0,
        Ok(Response::Stat(st().czxid(3).mzxid(3).owner(0x42))),
    );
    let s = expect_sent!(w, ["get /job/zr"]); // the exists watch is registered
    w.handle_reply(T, s[0].0, data("", st().czxid(3).mzxid(3).owner(0x42)));
    assert_eq!(
        events(&mut w),
        [NodeWatchEvent::Data {
            data: Bytes::new(),
            stat: st().czxid(3).mzxid(3).owner(0x42)
        }]
    );
    // That exists watch reports the next change.
    w.handle_watch(T, e[0].0, &ev(EventType::NodeDataChanged, ZR));
    assert_eq!(lines(&sent(&mut w)), ["get! /job/zr"]);
}

#[test]
fn watch_expiry_then_new_session_rereads() {
    let mut w = started(NodeWatch::new(ZR), |w| w.start(T));
    let s = sent(&mut w);
    w.handle_reply(T, s[0].0, data("x", st().czxid(1).mzxid(1).owner(0x42)));
    events(&mut w);
    w.handle_session(T, SessionChange::Expired);
    assert!(sent(&mut w).is_empty());
    w.handle_session(T, SessionChange::Connected { session_id: 0x88 });
    let s = expect_sent!(w, ["sync /job/zr", "get! /job/zr"]);
    w.handle_reply(T, s[0].0, Ok(Response::Path(ZR.into())));
    w.handle_reply(T, s[1].0, no_node());
    assert_eq!(
        events(&mut w),
        [
            NodeWatchEvent::Suspended,
            NodeWatchEvent::Reconnected,
            NodeWatchEvent::Missing { gone: true }
        ]
    );
}

// ----- worker -----

#[test]
fn worker_waits_for_creation_then_for_data() {
    let mut w = started(Worker::new(ZR), |w| w.start(T));
    let s = sent(&mut w);
    w.handle_reply(T, s[0].0, no_node()); // not yet created
    let e = expect_sent!(w, ["exists! /job/zr"]);
    w.handle_reply(T, e[0].0, no_node());
    assert!(events(&mut w).is_empty());
    w.handle_watch(T, e[0].0, &ev(EventType::NodeCreated, ZR));
    let s = expect_sent!(w, ["get! /job/zr"]);
    w.handle_reply(T, s[0].0, data("", st().czxid(2).mzxid(2).owner(0x42))); // created, still empty
    assert!(events(&mut w).is_empty());
    w.handle_watch(T, s[0].0, &ev(EventType::NodeDataChanged, ZR));
    let s = sent(&mut w);
    w.handle_reply(
        T,
        s[0].0,
        data("10.0.0.1:7000", st().czxid(2).mzxid(3).owner(0x42)),
    );
    assert_eq!(
        events(&mut w),
        [addr("10.0.0.1:7000", st().czxid(2).mzxid(3).owner(0x42))]
    );
    assert_eq!(w.address().map(|b| &b[..]), Some(&b"10.0.0.1:7000"[..]));
    // The master writes again: followed.
    w.handle_watch(T, s[0].0, &ev(EventType::NodeDataChanged, ZR));
    let s = sent(&mut w);
    w.handle_reply(
        T,
        s[0].0,
        data("10.0.0.2:7000", st().czxid(2).mzxid(4).owner(0x42)),
    );
    assert_eq!(
        events(&mut w),
        [addr("10.0.0.2:7000", st().czxid(2).mzxid(4).owner(0x42))]
    );
    // z_r deleted: the rendezvous is over.
    w.handle_watch(T, s[0].0, &ev(EventType::NodeDeleted, ZR));
    let s = sent(&mut w);
    w.handle_reply(T, s[0].0, no_node());
    assert_eq!(events(&mut w), [RendezvousEvent::Gone]);
    assert!(sent(&mut w).is_empty());
    assert!(w.is_done());
}

#[test]
fn worker_node_deleted_before_it_could_be_read_is_gone() {
    let mut w = started(Worker::new(ZR), |w| w.start(T));
    let s = sent(&mut w);
    w.handle_reply(T, s[0].0, no_node());
    let e = sent(&mut w);
    w.handle_reply(T, e[0].0, no_node());
    w.handle_watch(T, e[0].0, &ev(EventType::NodeCreated, ZR));
    let s = sent(&mut w);
    w.handle_reply(T, s[0].0, no_node()); // created and deleted already
    assert_eq!(events(&mut w), [RendezvousEvent::Gone]);
    assert!(w.is_done());
}

#[test]
fn worker_reconnect_rereads_and_misses_nothing() {
    let mut w = started(Worker::new(ZR), |w| w.start(T));
    let s = sent(&mut w);
    w.handle_reply(T, s[0].0, data("", st().czxid(2).mzxid(2).owner(0x42)));
    w.handle_session(T, SessionChange::Suspended);
    w.handle_session(T, SessionChange::Reconnected { session_id: S });
    let s = sent(&mut w);
    w.handle_reply(T, s[0].0, Ok(Response::Path(ZR.into())));
    w.handle_reply(T, s[1].0, data("m:1", st().czxid(2).mzxid(5).owner(0x42)));
    assert_eq!(
        events(&mut w),
        [
            RendezvousEvent::Suspended,
            RendezvousEvent::Reconnected,
            addr("m:1", st().czxid(2).mzxid(5).owner(0x42))
        ]
    );
}

#[test]
fn worker_close_ends() {
    let mut w = started(Worker::new(ZR), |w| w.start(T));
    sent(&mut w);
    w.close(T);
    assert_eq!(events(&mut w), [RendezvousEvent::Closed]);
    assert!(w.is_done());
}

// ----- master -----

#[test]
fn master_publishes_once_zr_exists() {
    let mut m = started(Master::new(ZR, "m:1"), |m| m.start(T));
    let s = expect_sent!(m, ["set /job/zr 'm:1'", "get! /job/zr"]);
    m.handle_reply(T, s[0].0, no_node()); // not yet created
    m.handle_reply(T, s[1].0, no_node());
    let e = expect_sent!(m, ["exists! /job/zr"]);
    m.handle_reply(T, e[0].0, no_node());
    assert!(events(&mut m).is_empty());
    m.handle_watch(T, e[0].0, &ev(EventType::NodeCreated, ZR));
    let s = expect_sent!(m, ["get! /job/zr"]);
    m.handle_reply(T, s[0].0, data("", st().czxid(2).mzxid(2).owner(0x42)));
    let w = expect_sent!(m, ["set /job/zr 'm:1'"]);
    m.handle_reply(
        T,
        w[0].0,
        Ok(Response::Stat(st().czxid(2).mzxid(3).owner(0x42))),
    );
    assert_eq!(
        events(&mut m),
        [RendezvousEvent::Published {
            stat: st().czxid(2).mzxid(3).owner(0x42)
        }]
    );
    assert!(m.is_published());
    // New address.
    m.publish(T, "m:2".into());
    let w = expect_sent!(m, ["set /job/zr 'm:2'"]);
    m.handle_reply(T, w[0].0, Err(Error::ConnectionLoss));
    m.handle_session(T, SessionChange::Suspended);
    m.handle_session(T, SessionChange::Reconnected { session_id: S });
    let w = expect_sent!(m, ["set /job/zr 'm:2'", "sync /job/zr", "get /job/zr"]);
    m.handle_reply(
        T,
        w[0].0,
        Ok(Response::Stat(st().czxid(2).mzxid(5).owner(0x42))),
    );
    assert_eq!(
        events(&mut m),
        [
            RendezvousEvent::Suspended,
            RendezvousEvent::Reconnected,
            RendezvousEvent::Published {
                stat: st().czxid(2).mzxid(5).owner(0x42)
            }
        ]
    );
    // z_r goes: told.
    m.handle_watch(T, s[0].0, &ev(EventType::NodeDeleted, ZR));
    m.handle_reply(T, w[1].0, Ok(Response::Path(ZR.into())));
    m.handle_reply(T, w[2].0, no_node());
    assert_eq!(events(&mut m), [RendezvousEvent::Gone]);
    assert!(m.is_done());
}

#[test]
fn master_refused_write_fails() {
    let mut m = started(Master::new(ZR, "m:1"), |m| m.start(T));
    let s = sent(&mut m);
    m.handle_reply(T, s[0].0, Err(Error::from(ErrorCode::NoAuth)));
    assert_eq!(
        events(&mut m),
        [RendezvousEvent::Failed(Error::Server(ErrorCode::NoAuth))]
    );
    m.handle_reply(T, s[1].0, no_node());
    assert!(sent(&mut m).is_empty());
    assert!(m.is_done());
}

#[test]
fn a_write_answered_after_a_newer_publish_is_not_reported_and_the_newer_one_goes() {
    let mut m = started(Master::new(ZR, "m:1"), |m| m.start(T));
    let s = expect_sent!(m, ["set /job/zr 'm:1'", "get! /job/zr"]);
    m.publish(T, "m:2".into());
    assert!(sent(&mut m).is_empty(), "one write at a time");
    m.handle_reply(T, s[0].0, Ok(Response::Stat(st().czxid(2).mzxid(3))));
    assert!(events(&mut m).is_empty(), "m:1 is not our address any more");
    assert!(!m.is_published());
    let w = expect_sent!(m, ["set /job/zr 'm:2'"]);
    m.handle_reply(T, w[0].0, Ok(Response::Stat(st().czxid(2).mzxid(4))));
    assert_eq!(
        events(&mut m),
        [RendezvousEvent::Published {
            stat: st().czxid(2).mzxid(4)
        }]
    );
    assert!(m.is_published());
}

#[test]
fn a_write_that_finds_zr_gone_after_it_was_seen_ends_with_gone() {
    let mut m = started(Master::new(ZR, "m:1"), |m| m.start(T));
    let s = expect_sent!(m, ["set /job/zr 'm:1'", "get! /job/zr"]);
    m.handle_reply(T, s[0].0, Ok(Response::Stat(st().czxid(2).mzxid(3))));
    assert_eq!(events(&mut m).len(), 1);
    m.publish(T, "m:2".into());
    let w = expect_sent!(m, ["set /job/zr 'm:2'"]);
    m.handle_reply(T, w[0].0, no_node());
    assert_eq!(events(&mut m), [RendezvousEvent::Gone]);
    assert!(!m.is_published());
    m.handle_reply(T, s[1].0, no_node());
    assert!(sent(&mut m).is_empty(), "nothing sent after Gone");
    assert!(events(&mut m).is_empty(), "one final event");
    assert!(m.is_done());
}

#[test]
fn a_master_closed_before_its_start_reports_closed_and_never_writes() {
    let mut m = started(Master::new(ZR, "m:1"), |_| {});
    m.close(T);
    assert_eq!(events(&mut m), [RendezvousEvent::Closed]);
    m.start(T);
    m.publish(T, "m:2".into());
    assert!(sent(&mut m).is_empty());
    assert!(!m.is_published());
    assert!(m.is_done());
}

#[test]
fn an_address_published_before_the_start_is_the_one_written() {
    let mut m = started(Master::new(ZR, "m:1"), |_| {});
    m.publish(T, "m:2".into());
    assert!(sent(&mut m).is_empty(), "nothing before the start");
    assert!(!m.is_published());
    m.start(T);
    let s = expect_sent!(m, ["set /job/zr 'm:2'", "get! /job/zr"]);
    m.handle_reply(T, s[0].0, Ok(Response::Stat(st().czxid(2).mzxid(3))));
    assert!(m.is_published());
}

#[test]
fn a_throttled_write_is_sent_again_after_its_backoff() {
    let mut m = started(Master::new(ZR, "m:1"), |m| m.start(T));
    let s = expect_sent!(m, ["set /job/zr 'm:1'", "get! /job/zr"]);
    m.handle_reply(T, s[1].0, data("", st().czxid(2).mzxid(2)));
    m.handle_reply(T, s[0].0, Err(Error::Overloaded));
    assert!(sent(&mut m).is_empty());
    let at = m.poll_timeout().expect("the backoff's end");
    m.handle_timeout(at);
    let w = expect_sent!(m, ["set /job/zr 'm:1'"]);
    m.handle_reply(at, w[0].0, Ok(Response::Stat(st().czxid(2).mzxid(3))));
    assert!(m.is_published());
}

// ----- coordinator and publisher -----

#[test]
fn coordinator_creates_zr_and_leaves_the_masters_data_alone() {
    let mut c = started(OwnedNode::new(coordinator_config(ZR)), |c| c.create(T));
    let s = expect_sent!(c, ["create2 /job/zr e", "get! /job/zr"]);
    let own = st().czxid(2).mzxid(2).owner(S);
    c.handle_reply(
        T,
        s[0].0,
        Ok(Response::PathStat {
            path: ZR.into(),
            stat: own,
        }),
    );
    c.handle_reply(T, s[1].0, data("", own));
    assert_eq!(events(&mut c), [OwnedNodeEvent::Created { stat: own }]);
    c.handle_watch(T, s[1].0, &ev(EventType::NodeDataChanged, ZR));
    let r = sent(&mut c);
    c.handle_reply(T, r[0].0, data("m:1", own));
    assert!(sent(&mut c).is_empty()); // not restored
    c.delete(T);
    let d = expect_sent!(c, ["delete /job/zr"]);
    c.handle_reply(T, d[0].0, Ok(Response::Empty));
    assert_eq!(events(&mut c), [OwnedNodeEvent::Removed]);
}

#[test]
fn coordinator_session_expiry_is_final() {
    let mut c = started(OwnedNode::new(coordinator_config(ZR)), |c| c.create(T));
    let s = sent(&mut c);
    let own = st().czxid(2).mzxid(2).owner(S);
    c.handle_reply(
        T,
        s[0].0,
        Ok(Response::PathStat {
            path: ZR.into(),
            stat: own,
        }),
    );
    c.handle_session(T, SessionChange::Expired);
    assert_eq!(
        events(&mut c),
        [
            OwnedNodeEvent::Created { stat: own },
            OwnedNodeEvent::Lost {
                reason: zk_recipes::recipe::lock::LostReason::SessionExpired
            },
            OwnedNodeEvent::Failed {
                error: Error::SessionExpired
            }
        ]
    );
    assert!(c.is_done());
}

#[test]
fn publisher_creates_zr_with_its_address() {
    let mut p = started(OwnedNode::new(publisher_config(ZR, "m:1")), |p| p.create(T));
    expect_sent!(p, ["create2 /job/zr e 'm:1'", "get! /job/zr"]);
}

// ----- pinned before the node recipes became states as types (issue 38) -----

/// An `exists` that finds the node, then a read that finds it gone: it came and went
/// (`gone: true`), though no version of it was ever read.
#[test]
fn watch_a_node_found_by_exists_then_gone_before_its_read_is_reported_gone() {
    let mut w = started(NodeWatch::new(ZR), |w| w.start(T));
    let s = expect_sent!(w, ["get! /job/zr"]);
    w.handle_reply(T, s[0].0, no_node());
    assert_eq!(events(&mut w), [NodeWatchEvent::Missing { gone: false }]);
    let e = expect_sent!(w, ["exists! /job/zr"]);
    w.handle_reply(T, e[0].0, Ok(Response::Stat(st().czxid(3).mzxid(3))));
    let s = expect_sent!(w, ["get /job/zr"]);
    w.handle_reply(T, s[0].0, no_node());
    assert_eq!(events(&mut w), [NodeWatchEvent::Missing { gone: true }]);
    assert_eq!(w.value(), None);
}

/// A connection loss, then the session's expiry: one `Suspended`, then one
/// `Reconnected` with the new session, and a read behind a `sync`.
#[test]
fn watch_suspended_then_expired_reports_one_suspension_and_one_reconnection() {
    let mut w = started(NodeWatch::new(ZR), |w| w.start(T));
    let s = sent(&mut w);
    w.handle_reply(T, s[0].0, data("x", st().czxid(1).mzxid(1).owner(0x42)));
    events(&mut w);
    w.handle_session(T, SessionChange::Suspended);
    w.handle_session(T, SessionChange::Expired);
    assert!(sent(&mut w).is_empty());
    w.handle_session(T, SessionChange::Connected { session_id: 0x88 });
    let s = expect_sent!(w, ["sync /job/zr", "get! /job/zr"]);
    w.handle_reply(T, s[0].0, Ok(Response::Path(ZR.into())));
    w.handle_reply(T, s[1].0, data("x", st().czxid(1).mzxid(1).owner(0x42)));
    assert_eq!(
        events(&mut w),
        [NodeWatchEvent::Suspended, NodeWatchEvent::Reconnected]
    );
    assert!(!w.has_ended());
}

/// A persistent node outlives its session: the expiry is a suspension (not `Lost`),
/// and the new session's read of our node (no owner) reports `Reconnected`, not a
/// second `Created`.
#[test]
fn a_persistent_owned_node_survives_an_expiry_as_suspended_then_reconnected() {
    let mut config = OwnedNodeConfig::new(ZR, "d");
    config.mode = CreateMode::Persistent;
    let mut c = started(OwnedNode::new(config), |c| c.create(T));
    let s = expect_sent!(c, ["create2 /job/zr 'd'", "get! /job/zr"]);
    let own = st().czxid(2).mzxid(2);
    c.handle_reply(
        T,
        s[0].0,
        Ok(Response::PathStat {
            path: ZR.into(),
            stat: own,
        }),
    );
    c.handle_reply(T, s[1].0, data("d", own));
    assert_eq!(events(&mut c), [OwnedNodeEvent::Created { stat: own }]);
    c.handle_session(T, SessionChange::Expired);
    assert_eq!(events(&mut c), [OwnedNodeEvent::Suspended]);
    assert!(!c.is_present() && c.stat().is_some());
    c.handle_session(T, SessionChange::Connected { session_id: 0x88 });
    let r = expect_sent!(c, ["get! /job/zr"]);
    c.handle_reply(T, r[0].0, data("d", own));
    assert_eq!(events(&mut c), [OwnedNodeEvent::Reconnected]);
    assert!(c.is_present());
    assert!(sent(&mut c).is_empty());
}

/// A `set_data` answered after `delete` began: no `DataSet` (the call ended with the
/// delete), only `Removed`.
#[test]
fn an_owned_nodes_write_answered_while_it_leaves_reports_no_data_set() {
    let mut c = started(OwnedNode::new(publisher_config(ZR, "m:1")), |c| c.create(T));
    let s = sent(&mut c);
    let own = st().czxid(2).mzxid(2).owner(S);
    c.handle_reply(
        T,
        s[0].0,
        Ok(Response::PathStat {
            path: ZR.into(),
            stat: own,
        }),
    );
    c.handle_reply(T, s[1].0, data("m:1", own));
    assert_eq!(events(&mut c), [OwnedNodeEvent::Created { stat: own }]);
    c.set_data(T, Bytes::from_static(b"m:2"));
    let w = expect_sent!(c, ["set /job/zr 'm:2'"]);
    c.delete(T);
    let d = expect_sent!(c, ["delete /job/zr"]);
    c.handle_reply(
        T,
        w[0].0,
        Ok(Response::Stat(st().czxid(2).mzxid(3).owner(S))),
    );
    c.handle_reply(T, d[0].0, Ok(Response::Empty));
    assert_eq!(events(&mut c), [OwnedNodeEvent::Removed]);
    assert!(c.has_ended());
}
