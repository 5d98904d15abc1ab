//! Transcript tests for `recipe::semaphore`: scripted replies in, exact requests and
//! events out, in the lines of `kit.rs`.

use super::kit::*;
use zk_recipes::recipe::lock::LostReason;
use zk_recipes::recipe::semaphore::{Semaphore, SemaphoreConfig, SemaphoreEvent};

const M: &str = "6f1c2a4e-2b1d-4d7e-9a63-0c2f5a7b8d90";
const L: &str = "0a1b2c3d-4e5f-4a6b-8c7d-8e9fa0b1c2d3";
const SESSION: i64 = 0x77;
const T: Instant = Instant::ZERO;

fn sem(max: u32) -> Semaphore {
    let mut s = Semaphore::new(SemaphoreConfig::new("/sem", max, M, L));
    s.handle_session(
        T,
        SessionChange::Connected {
            session_id: SESSION,
        },
    );
    s
}

fn op(v: &[(OpId, String)], line: &str) -> OpId {
    v.iter()
        .find(|(_, s)| s == line)
        .unwrap_or_else(|| panic!("{line} not in {v:?}"))
        .0
}

fn created(path: &str, czxid: i64) -> Result<Response, Error> {
    Ok(Response::PathStat {
        path: path.into(),
        stat: st().czxid(czxid).owner(SESSION),
    })
}

fn data() -> Result<Response, Error> {
    Ok(Response::Data {
        data: Default::default(),
        stat: st().czxid(1).owner(SESSION),
    })
}

fn mutex_node(n: u32) -> String {
    format!("_c_{M}-lock-{n:010}")
}

fn lease_node(n: u32) -> String {
    format!("_c_{L}-lease-{n:010}")
}

fn other_lease(n: u32) -> String {
    format!(
        "_c_ffffffff-0000-4000-8000-00000000000{}-lease-{n:010}",
        n % 10
    )
}

const MUTEX_CREATE: &str = "create2 /sem/locks/_c_6f1c2a4e-2b1d-4d7e-9a63-0c2f5a7b8d90-lock- es";
const LEASE_CREATE: &str = "create2 /sem/leases/_c_0a1b2c3d-4e5f-4a6b-8c7d-8e9fa0b1c2d3-lease- es";

/// Takes the mutex (free): returns the lease requests sent next.
fn take_mutex(s: &mut Semaphore, now: Instant) -> Vec<(OpId, String)> {
    s.acquire(now, Some(ms(10_000)));
    let out = sent(s);
    // The mutex's listing watches its directory: that stands in for the own-node
    // watch of the (brief) mutex holder.
    assert_eq!(lines(&out), [MUTEX_CREATE, "list! /sem/locks"]);
    let m = format!("/sem/locks/{}", mutex_node(1));
    s.handle_reply(now, out[0].0, created(&m, 10));
    assert!(sent(s).is_empty(), "no own-node watch while waiting");
    s.handle_reply(now, out[1].0, children(&[&mutex_node(1)]));
    // Holding the mutex: no read of its own node; the lease's create and a watched
    // listing, back to back.
    let lease = sent(s);
    assert_eq!(lines(&lease), [LEASE_CREATE, "list! /sem/leases"]);
    assert_eq!(events(s), []);
    lease
}

#[test]
fn a_free_lease_is_acquired_and_the_mutex_released_at_once() {
    let mut s = sem(2);
    let lease = take_mutex(&mut s, T);
    let p = format!("/sem/leases/{}", lease_node(3));
    s.handle_reply(T, lease[0].0, created(&p, 20));
    let own = expect_sent!(s, [format!("get! {p}").as_str()]);
    // One other holder ahead of us: 1 < 2.
    s.handle_reply(T, lease[1].0, children(&[&other_lease(1), &lease_node(3)]));
    assert_eq!(
        events(&mut s),
        [SemaphoreEvent::Acquired { lease: p.clone() }]
    );
    assert_eq!(s.lease(), Some(p.as_str()));
    // The mutex goes at once.
    let out = expect_sent!(s, [format!("delete /sem/locks/{}", mutex_node(1)).as_str()]);
    s.handle_reply(T, out[0].0, Ok(Response::Empty));
    s.handle_reply(T, own[0].0, data());
    assert!(s.is_held());
    // Release: the lease node is deleted, then Released.
    s.release(T);
    let out = expect_sent!(s, [format!("delete {p}").as_str()]);
    assert_eq!(events(&mut s), []);
    s.handle_reply(T, out[0].0, Ok(Response::Empty));
    assert_eq!(events(&mut s), [SemaphoreEvent::Released]);
    assert!(s.is_done());
}

#[test]
fn a_full_semaphore_waits_on_one_children_watch_and_enters_when_any_holder_leaves() {
    let mut s = sem(2);
    let lease = take_mutex(&mut s, T);
    let p = format!("/sem/leases/{}", lease_node(5));
    s.handle_reply(T, lease[0].0, created(&p, 20));
    let own = sent(&mut s);
    s.handle_reply(T, own[0].0, data());
    // Two holders ahead: wait. No further request: the listing set the watch.
    s.handle_reply(
        T,
        lease[1].0,
        children(&[&other_lease(1), &other_lease(2), &lease_node(5)]),
    );
    assert_eq!(events(&mut s), []);
    assert_eq!(lines(&sent(&mut s)), Vec::<&str>::new());
    // The *older* holder leaves (not the nearest one): the children watch fires.
    s.handle_watch(
        ms(5),
        lease[1].0,
        &WatchEvent {
            event_type: EventType::NodeChildrenChanged,
            path: "/sem/leases".into(),
        },
    );
    let again = expect_sent!(s, ["list! /sem/leases"]);
    s.handle_reply(
        ms(5),
        again[0].0,
        children(&[&other_lease(2), &lease_node(5)]),
    );
    assert_eq!(events(&mut s), [SemaphoreEvent::Acquired { lease: p }]);
    assert_eq!(
        lines(&sent(&mut s)),
        [format!("delete /sem/locks/{}", mutex_node(1)).as_str()]
    );
}

#[test]
fn mutex_waiters_watch_only_their_predecessor() {
    let mut s = sem(2);
    s.acquire(T, None);
    let out = sent(&mut s);
    let m = format!("/sem/locks/{}", mutex_node(7));
    s.handle_reply(T, out[0].0, created(&m, 10));
    assert!(sent(&mut s).is_empty(), "no own-node read while waiting");
    let a = "_c_aaaaaaaa-0000-4000-8000-000000000000-lock-0000000002";
    let b = "_c_bbbbbbbb-0000-4000-8000-000000000000-lock-0000000004";
    s.handle_reply(T, out[1].0, children(&[a, b, &mutex_node(7)]));
    // Only the nearest lower mutex node (a deletion watch): no herd; with it, in the
    // same request, a data watch on our own node.
    assert_eq!(
        lines(&sent(&mut s)),
        [format!("setWatches2 @10 data[{m}] child[/sem/locks/{b}]").as_str()]
    );
    assert_eq!(events(&mut s), []);
}

/// CURATOR-315's class: a lease create whose reply is lost, then the deadline passes
/// while the connection is down. The node is found by its protected prefix once the
/// session is back, and deleted; nothing of ours is left.
#[test]
fn a_lost_lease_create_reply_cannot_orphan_the_lease() {
    let mut s = sem(2);
    let lease = take_mutex(&mut s, T);
    s.handle_reply(T, lease[0].0, Err(Error::ConnectionLoss));
    s.handle_reply(T, lease[1].0, Err(Error::ConnectionLoss));
    s.handle_session(ms(1), SessionChange::Suspended);
    assert_eq!(lines(&sent(&mut s)), Vec::<&str>::new());
    // The deadline passes while suspended: the caller hears TimedOut at once...
    s.handle_timeout(ms(10_000));
    assert_eq!(events(&mut s), [SemaphoreEvent::TimedOut]);
    assert!(
        !s.is_done(),
        "the lease may exist: not done before it is found"
    );
    // ...and the cleanup goes on after the reconnect: sync, then look for our prefix.
    s.handle_session(
        ms(10_001),
        SessionChange::Reconnected {
            session_id: SESSION,
        },
    );
    let out = expect_sent!(
        s,
        [
            format!("delete /sem/locks/{}", mutex_node(1)).as_str(),
            "sync /sem/leases",
            "list /sem/leases",
        ]
    );
    s.handle_reply(ms(10_001), out[0].0, Ok(Response::Empty));
    s.handle_reply(
        ms(10_001),
        out[1].0,
        Ok(Response::Path("/sem/leases".into())),
    );
    // The create had landed.
    s.handle_reply(
        ms(10_001),
        out[2].0,
        children(&[&other_lease(1), &lease_node(9)]),
    );
    let p = format!("/sem/leases/{}", lease_node(9));
    let out = expect_sent!(s, [format!("exists {p}").as_str()]);
    s.handle_reply(
        ms(10_001),
        out[0].0,
        Ok(Response::Stat(st().czxid(30).owner(SESSION))),
    );
    let out = expect_sent!(s, [format!("delete {p}").as_str()]);
    assert!(!s.is_done());
    s.handle_reply(ms(10_001), out[0].0, Ok(Response::Empty));
    assert_eq!(events(&mut s), []);
    assert!(s.is_done());
}

#[test]
fn expiry_while_holding_is_lost_and_a_deleted_lease_is_lost_too() {
    let mut s = sem(1);
    let lease = take_mutex(&mut s, T);
    let p = format!("/sem/leases/{}", lease_node(0));
    s.handle_reply(T, lease[0].0, created(&p, 20));
    let own = sent(&mut s);
    s.handle_reply(T, lease[1].0, children(&[&lease_node(0)]));
    s.handle_reply(T, own[0].0, data());
    assert_eq!(
        events(&mut s),
        [SemaphoreEvent::Acquired { lease: p.clone() }]
    );
    s.handle_session(ms(1), SessionChange::Suspended);
    assert_eq!(events(&mut s), [SemaphoreEvent::Suspended]);
    s.handle_session(ms(2), SessionChange::Expired);
    assert_eq!(
        events(&mut s),
        [SemaphoreEvent::Lost {
            reason: LostReason::SessionExpired
        }]
    );

    // An operator deletes a holder's lease: Lost.
    let mut s = sem(1);
    let lease = take_mutex(&mut s, T);
    s.handle_reply(T, lease[0].0, created(&p, 20));
    let own = sent(&mut s);
    s.handle_reply(T, lease[1].0, children(&[&lease_node(0)]));
    s.handle_reply(T, own[0].0, data());
    events(&mut s);
    s.handle_watch(
        ms(3),
        own[0].0,
        &WatchEvent {
            event_type: EventType::NodeDeleted,
            path: p,
        },
    );
    assert_eq!(
        events(&mut s),
        [SemaphoreEvent::Lost {
            reason: LostReason::NodeDeleted
        }]
    );
}

#[test]
fn zero_leases_fail_at_once_and_send_nothing() {
    let mut s = sem(0);
    s.acquire(T, None);
    assert_eq!(lines(&sent(&mut s)), Vec::<&str>::new());
    assert_eq!(
        events(&mut s),
        [SemaphoreEvent::Failed {
            error: Error::Server(ErrorCode::BadArguments)
        }]
    );
    assert!(s.is_done());
}

#[test]
fn cancelling_a_waiter_deletes_both_nodes_then_reports_released() {
    let mut s = sem(1);
    let lease = take_mutex(&mut s, T);
    let p = format!("/sem/leases/{}", lease_node(4));
    s.handle_reply(T, lease[0].0, created(&p, 20));
    let own = sent(&mut s);
    s.handle_reply(T, own[0].0, data());
    s.handle_reply(T, lease[1].0, children(&[&other_lease(1), &lease_node(4)]));
    assert_eq!(events(&mut s), []);
    s.release(ms(1));
    let out = expect_sent!(
        s,
        [
            format!("delete /sem/locks/{}", mutex_node(1)).as_str(),
            format!("delete {p}").as_str(),
        ]
    );
    s.handle_reply(ms(1), out[0].0, Ok(Response::Empty));
    assert_eq!(events(&mut s), []);
    s.handle_reply(ms(1), out[1].0, Ok(Response::Empty));
    assert_eq!(events(&mut s), [SemaphoreEvent::Released]);
    assert!(s.is_done());
}

#[test]
fn op_ids_of_the_two_locks_never_collide() {
    let mut s = sem(2);
    let lease = take_mutex(&mut s, T);
    for (op, _) in &lease {
        assert_eq!(op % 2, 1, "lease ops are odd");
    }
    let _ = op(&lease, "list! /sem/leases");
}

/// As Curator (RETRY_DUE_TO_MISSING_NODE): a waiting lease node deleted by someone
/// else makes the attempt start over with a new node, still holding the mutex.
#[test]
fn a_waiting_lease_deleted_by_someone_else_starts_over_with_a_new_node() {
    let mut s = sem(1);
    let lease = take_mutex(&mut s, T);
    let p = format!("/sem/leases/{}", lease_node(4));
    s.handle_reply(T, lease[0].0, created(&p, 20));
    let own = sent(&mut s);
    s.handle_reply(T, own[0].0, data());
    s.handle_reply(T, lease[1].0, children(&[&other_lease(1), &lease_node(4)]));
    s.handle_watch(
        ms(1),
        own[0].0,
        &WatchEvent {
            event_type: EventType::NodeDeleted,
            path: p,
        },
    );
    assert_eq!(events(&mut s), []);
    let again = expect_sent!(
        s,
        [
            format!("create2 /sem/leases/_c_{L}-1-lease- es").as_str(),
            "list! /sem/leases"
        ]
    );
    let p2 = format!("/sem/leases/_c_{L}-1-lease-0000000006");
    s.handle_reply(ms(1), again[0].0, created(&p2, 30));
    expect_sent!(s, [format!("get! {p2}").as_str()]);
    s.handle_reply(
        ms(1),
        again[1].0,
        children(&[&format!("_c_{L}-1-lease-0000000006")]),
    );
    assert_eq!(events(&mut s), [SemaphoreEvent::Acquired { lease: p2 }]);
    assert_eq!(
        lines(&sent(&mut s)),
        [format!("delete /sem/locks/{}", mutex_node(1)).as_str()]
    );
}

/// A restart waiting for the old lease machine to settle still honours the deadline
/// and a release.
#[test]
fn a_release_between_two_lease_nodes_ends_the_attempt() {
    let mut s = sem(1);
    let lease = take_mutex(&mut s, T);
    let p = format!("/sem/leases/{}", lease_node(4));
    s.handle_reply(T, lease[0].0, created(&p, 20));
    let own = sent(&mut s);
    // The listing says our node is gone while the own-node read is still out.
    s.handle_reply(T, lease[1].0, children(&[&other_lease(1)]));
    assert_eq!(
        lines(&sent(&mut s)),
        Vec::<&str>::new(),
        "waits for the old read"
    );
    s.release(ms(1));
    assert_eq!(events(&mut s), [SemaphoreEvent::Released]);
    let out = expect_sent!(s, [format!("delete /sem/locks/{}", mutex_node(1)).as_str()]);
    s.handle_reply(ms(1), own[0].0, code(ErrorCode::NoNode));
    s.handle_reply(ms(1), out[0].0, Ok(Response::Empty));
    assert_eq!(lines(&sent(&mut s)), Vec::<&str>::new(), "no new lease");
    assert!(s.is_done());
}
