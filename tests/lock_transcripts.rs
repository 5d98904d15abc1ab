//! Transcript tests for `recipe::lock`: scripted replies in, exact requests and events out.

use bytes::Bytes;
use zk_recipes::proto::*;
use zk_recipes::recipe::lock::{Lock, LockConfig, LockEvent, LockKind, LostReason};
use zk_recipes::recipe::{OpId, Recipe, RecipeEvent, SessionChange};
use zk_recipes::session::WatchEvent;
use zk_recipes::time::Instant;

const ID: &str = "6f1c2a4e-2b1d-4d7e-9a63-0c2f5a7b8d90";
const SESSION: i64 = 0x77;
const T: Instant = Instant::ZERO;

fn lock(kind: LockKind) -> Lock {
    let mut l = Lock::new(LockConfig::new("/locks/job", kind, ID));
    l.handle_session(
        T,
        SessionChange::Connected {
            session_id: SESSION,
        },
    );
    l
}

fn requests(l: &mut Lock) -> Vec<(OpId, Request)> {
    std::iter::from_fn(|| l.poll_request()).collect()
}

fn events(l: &mut Lock) -> Vec<LockEvent> {
    std::iter::from_fn(|| l.poll_event())
        .map(|e| match e {
            RecipeEvent::Lock(e) => e,
            other => panic!("{other:?}"),
        })
        .collect()
}

fn stat(czxid: i64, owner: i64) -> Stat {
    Stat {
        czxid,
        ephemeral_owner: owner,
        ..Stat::default()
    }
}

fn created(name: &str, czxid: i64) -> Result<Response, ErrorCode> {
    Ok(Response::PathStat {
        path: format!("/locks/job/{name}"),
        stat: stat(czxid, SESSION),
    })
}

fn children(names: &[&str]) -> Result<Response, ErrorCode> {
    Ok(Response::Children(
        names.iter().map(|s| s.to_string()).collect(),
    ))
}

fn data(d: &'static [u8]) -> Result<Response, ErrorCode> {
    Ok(Response::Data {
        data: Bytes::from_static(d),
        stat: stat(1, SESSION),
    })
}

fn ours(n: u32) -> String {
    format!("_c_{ID}-lock-{n:010}")
}

fn path(name: &str) -> String {
    format!("/locks/job/{name}")
}

fn deleted(p: &str) -> WatchEvent {
    WatchEvent {
        event_type: EventType::NodeDeleted,
        path: p.into(),
    }
}

/// Starts an attempt and checks the pipelined pair.
fn start(l: &mut Lock) -> (OpId, OpId) {
    l.acquire(T, None);
    let r = requests(l);
    assert_eq!(r.len(), 2, "create2 and getChildren back to back: {r:?}");
    match &r[0].1 {
        Request::Create2(c) => {
            assert_eq!(c.path, format!("/locks/job/_c_{ID}-lock-"));
            assert_eq!(c.flags, CreateMode::EphemeralSequential.to_i32());
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(
        r[1].1,
        Request::GetChildren(PathWatch {
            path: "/locks/job".into(),
            watch: false
        })
    );
    (r[0].0, r[1].0)
}

#[test]
fn uncontended_acquire_is_one_round_trip_and_release_one_delete() {
    let mut l = lock(LockKind::Exclusive);
    let (create, list) = start(&mut l);
    l.handle_reply(T, create, created(&ours(5), 0x500));
    assert!(requests(&mut l).is_empty());
    l.handle_reply(
        T,
        list,
        children(&[&ours(5), "config", "_c_x-latch-0000000009"]),
    );
    assert_eq!(
        events(&mut l),
        vec![LockEvent::Acquired {
            fencing_token: 0x500,
            node: ours(5)
        }]
    );
    let own = requests(&mut l);
    assert_eq!(
        own[0].1,
        Request::GetData(PathWatch {
            path: path(&ours(5)),
            watch: true
        }),
        "watch our own node"
    );
    l.handle_reply(T, own[0].0, data(b""));
    l.release(T);
    let del = requests(&mut l);
    assert_eq!(
        del[0].1,
        Request::Delete(DeleteRequest {
            path: path(&ours(5)),
            version: -1
        })
    );
    l.handle_reply(T, del[0].0, Ok(Response::Empty));
    assert_eq!(events(&mut l), vec![LockEvent::Released]);
    assert!(l.is_done());
}

#[test]
fn without_the_own_node_watch_it_is_three_requests_in_all() {
    let mut config = LockConfig::new("/locks/job", LockKind::Exclusive, ID);
    config.watch_own_node = false;
    let mut l = Lock::new(config);
    let (create, list) = start(&mut l);
    l.handle_reply(T, create, created(&ours(1), 9));
    l.handle_reply(T, list, children(&[&ours(1)]));
    assert!(matches!(events(&mut l)[..], [LockEvent::Acquired { .. }]));
    assert!(requests(&mut l).is_empty());
}

#[test]
fn a_waiter_watches_only_its_predecessor_and_takes_over_without_listing() {
    let mut l = lock(LockKind::Exclusive);
    let (create, list) = start(&mut l);
    l.handle_reply(T, create, created(&ours(7), 70));
    l.handle_reply(
        T,
        list,
        children(&[
            &ours(7),
            "_c_a-lock-0000000003",
            "_c_b-lock-0000000006",
            "other",
        ]),
    );
    let w = requests(&mut l);
    assert_eq!(
        w,
        vec![(
            w[0].0,
            Request::GetData(PathWatch {
                path: path("_c_b-lock-0000000006"),
                watch: true
            })
        )]
    );
    l.handle_reply(T, w[0].0, data(b""));
    assert!(events(&mut l).is_empty());
    // Two blockers: when the predecessor goes, list again.
    l.handle_watch(T, w[0].0, &deleted(&path("_c_b-lock-0000000006")));
    let relist = requests(&mut l);
    assert_eq!(
        relist[0].1,
        Request::GetChildren(PathWatch {
            path: "/locks/job".into(),
            watch: false
        })
    );
    l.handle_reply(
        T,
        relist[0].0,
        children(&[&ours(7), "_c_a-lock-0000000003"]),
    );
    let w = requests(&mut l);
    assert_eq!(
        w[0].1,
        Request::GetData(PathWatch {
            path: path("_c_a-lock-0000000003"),
            watch: true
        })
    );
    l.handle_reply(T, w[0].0, data(b""));
    // Only one blocker left: its deletion hands over the lock with no listing.
    l.handle_watch(T, w[0].0, &deleted(&path("_c_a-lock-0000000003")));
    assert_eq!(
        events(&mut l),
        vec![LockEvent::Acquired {
            fencing_token: 70,
            node: ours(7)
        }]
    );
    let after = requests(&mut l);
    assert_eq!(after.len(), 1, "only the own-node watch: {after:?}");
}

#[test]
fn a_predecessor_gone_before_the_watch_is_set_counts_as_gone() {
    let mut l = lock(LockKind::Exclusive);
    let (create, list) = start(&mut l);
    l.handle_reply(T, create, created(&ours(2), 20));
    l.handle_reply(T, list, children(&[&ours(2), "_c_a-lock-0000000001"]));
    let w = requests(&mut l);
    l.handle_reply(T, w[0].0, Err(ErrorCode::NoNode));
    assert!(matches!(
        events(&mut l)[..],
        [LockEvent::Acquired {
            fencing_token: 20,
            ..
        }]
    ));
}

#[test]
fn missing_parents_are_created_as_containers_in_the_same_pipeline() {
    let mut l = lock(LockKind::Exclusive);
    let (create, list) = start(&mut l);
    l.handle_reply(T, create, Err(ErrorCode::NoNode));
    let r = requests(&mut l);
    let kinds: Vec<String> = r
        .iter()
        .map(|(_, q)| match q {
            Request::CreateContainer(c) => format!("container {}", c.path),
            Request::Create2(c) => format!("create2 {}", c.path),
            Request::GetChildren(g) => format!("list {}", g.path),
            other => format!("{other:?}"),
        })
        .collect();
    assert_eq!(
        kinds,
        vec![
            "container /locks".to_string(),
            "container /locks/job".into(),
            format!("create2 /locks/job/_c_{ID}-lock-"),
            "list /locks/job".into()
        ]
    );
    l.handle_reply(T, list, Err(ErrorCode::NoNode)); // the old listing is ignored
    l.handle_reply(
        T,
        r[0].0,
        Ok(Response::PathStat {
            path: "/locks".into(),
            stat: stat(1, 0),
        }),
    );
    l.handle_reply(T, r[1].0, Err(ErrorCode::NodeExists));
    l.handle_reply(T, r[2].0, created(&ours(0), 3));
    l.handle_reply(T, r[3].0, children(&[&ours(0)]));
    assert!(matches!(
        events(&mut l)[..],
        [LockEvent::Acquired {
            fencing_token: 3,
            ..
        }]
    ));
}

#[test]
fn a_lost_create_reply_is_recovered_by_prefix_and_adopted_only_if_ours() {
    let mut l = lock(LockKind::Exclusive);
    let (create, list) = start(&mut l);
    l.handle_reply(T, create, Err(ErrorCode::ConnectionLoss));
    l.handle_reply(T, list, Err(ErrorCode::ConnectionLoss));
    l.handle_session(T, SessionChange::Suspended);
    l.handle_session(
        T,
        SessionChange::Reconnected {
            session_id: SESSION,
        },
    );
    let r = requests(&mut l);
    assert_eq!(r.len(), 1, "one listing to look for our node: {r:?}");
    l.handle_reply(T, r[0].0, children(&[&ours(4), "_c_z-lock-0000000002"]));
    let adopt = requests(&mut l);
    assert_eq!(
        adopt[0].1,
        Request::Exists(PathWatch {
            path: path(&ours(4)),
            watch: false
        })
    );
    l.handle_reply(T, adopt[0].0, Ok(Response::Stat(stat(40, SESSION))));
    let relist = requests(&mut l);
    assert_eq!(
        relist[0].1,
        Request::GetChildren(PathWatch {
            path: "/locks/job".into(),
            watch: false
        })
    );
    l.handle_reply(
        T,
        relist[0].0,
        children(&[&ours(4), "_c_z-lock-0000000002"]),
    );
    let w = requests(&mut l);
    assert_eq!(
        w[0].1,
        Request::GetData(PathWatch {
            path: path("_c_z-lock-0000000002"),
            watch: true
        })
    );
    assert_eq!(
        l.node(),
        Some(ours(4).as_str()),
        "adopted, not created twice"
    );
}

#[test]
fn a_node_with_our_prefix_from_another_session_is_never_adopted() {
    let mut l = lock(LockKind::Exclusive);
    let (create, _list) = start(&mut l);
    l.handle_reply(T, create, Err(ErrorCode::ConnectionLoss));
    let r = requests(&mut l);
    l.handle_reply(T, r[0].0, children(&[&ours(4)]));
    let adopt = requests(&mut l);
    l.handle_reply(T, adopt[0].0, Ok(Response::Stat(stat(40, 0x999))));
    let again = requests(&mut l);
    assert!(
        matches!(&again[0].1, Request::Create2(_)),
        "creates anew: {again:?}"
    );
    assert_eq!(again.len(), 2);
}

#[test]
fn cancel_while_the_create_is_in_flight_deletes_what_it_created() {
    let mut l = lock(LockKind::Exclusive);
    let (create, list) = start(&mut l);
    l.cancel(T);
    assert!(
        events(&mut l).is_empty(),
        "nothing to report until cleaned up"
    );
    l.handle_reply(T, create, created(&ours(3), 30));
    let del = requests(&mut l);
    assert_eq!(
        del[0].1,
        Request::Delete(DeleteRequest {
            path: path(&ours(3)),
            version: -1
        })
    );
    l.handle_reply(T, list, children(&[&ours(3)]));
    assert!(events(&mut l).is_empty(), "the listing no longer acquires");
    l.handle_reply(T, del[0].0, Ok(Response::Empty));
    assert_eq!(events(&mut l), vec![LockEvent::Cancelled]);
    assert!(l.is_done());
}

#[test]
fn try_lock_looks_once_then_gives_up_and_removes_its_node() {
    let mut l = lock(LockKind::Exclusive);
    l.acquire(T, Some(T));
    let r = requests(&mut l);
    // The deadline is already here, but a try-lock decides on the first listing.
    l.handle_timeout(T);
    assert!(events(&mut l).is_empty());
    assert_eq!(
        l.poll_timeout(),
        None,
        "no busy timer while waiting for the listing"
    );
    l.handle_reply(T, r[0].0, created(&ours(9), 90));
    l.handle_reply(T, r[1].0, children(&[&ours(9), "_c_a-lock-0000000001"]));
    assert_eq!(events(&mut l), vec![LockEvent::NotAcquired]);
    let del = requests(&mut l);
    assert_eq!(
        del[0].1,
        Request::Delete(DeleteRequest {
            path: path(&ours(9)),
            version: -1
        })
    );
    l.handle_reply(T, del[0].0, Ok(Response::Empty));
    assert!(l.is_done());
}

#[test]
fn a_free_lock_is_taken_by_a_try_lock() {
    let mut l = lock(LockKind::Exclusive);
    l.acquire(T, Some(T));
    let r = requests(&mut l);
    l.handle_timeout(T);
    l.handle_reply(T, r[0].0, created(&ours(2), 20));
    l.handle_reply(T, r[1].0, children(&[&ours(2)]));
    assert!(matches!(events(&mut l)[..], [LockEvent::Acquired { .. }]));
}

#[test]
fn a_waiting_deadline_gives_up_and_removes_its_node() {
    let mut l = lock(LockKind::Exclusive);
    let later = Instant::from_micros(5_000);
    l.acquire(T, Some(later));
    let r = requests(&mut l);
    l.handle_reply(T, r[0].0, created(&ours(9), 90));
    l.handle_reply(T, r[1].0, children(&[&ours(9), "_c_a-lock-0000000001"]));
    let w = requests(&mut l);
    assert_eq!(l.poll_timeout(), Some(later));
    l.handle_timeout(later);
    assert_eq!(events(&mut l), vec![LockEvent::NotAcquired]);
    let del = requests(&mut l);
    assert_eq!(
        del[0].1,
        Request::Delete(DeleteRequest {
            path: path(&ours(9)),
            version: -1
        })
    );
    l.handle_reply(T, w[0].0, data(b""));
    l.handle_reply(T, del[0].0, Ok(Response::Empty));
    assert!(events(&mut l).is_empty());
    assert!(l.is_done());
}

fn held() -> (Lock, OpId) {
    let mut l = lock(LockKind::Exclusive);
    let (create, list) = start(&mut l);
    l.handle_reply(T, create, created(&ours(1), 11));
    l.handle_reply(T, list, children(&[&ours(1)]));
    events(&mut l);
    let own = requests(&mut l);
    l.handle_reply(T, own[0].0, data(b""));
    (l, own[0].0)
}

#[test]
fn suspended_then_reconnected_after_verifying_the_node() {
    let (mut l, _) = held();
    l.handle_session(T, SessionChange::Suspended);
    assert_eq!(events(&mut l), vec![LockEvent::Suspended]);
    assert!(!l.is_held());
    l.handle_session(
        T,
        SessionChange::Reconnected {
            session_id: SESSION,
        },
    );
    let v = requests(&mut l);
    assert_eq!(
        v,
        vec![(
            v[0].0,
            Request::Exists(PathWatch {
                path: path(&ours(1)),
                watch: false
            })
        )]
    );
    l.handle_reply(T, v[0].0, Ok(Response::Stat(stat(11, SESSION))));
    assert_eq!(events(&mut l), vec![LockEvent::Reconnected]);
    assert!(l.is_held());
}

#[test]
fn lost_on_expiry_and_on_deletion_by_someone_else() {
    let (mut l, _) = held();
    l.handle_session(T, SessionChange::Expired);
    assert_eq!(
        events(&mut l),
        vec![LockEvent::Lost {
            reason: LostReason::SessionExpired
        }]
    );
    assert!(l.is_done());

    let (mut l, own) = held();
    l.handle_watch(T, own, &deleted(&path(&ours(1))));
    assert_eq!(
        events(&mut l),
        vec![LockEvent::Lost {
            reason: LostReason::NodeDeleted
        }]
    );

    let (mut l, _) = held();
    l.handle_session(T, SessionChange::Suspended);
    l.handle_session(
        T,
        SessionChange::Reconnected {
            session_id: SESSION,
        },
    );
    let v = requests(&mut l);
    l.handle_reply(T, v[0].0, Err(ErrorCode::NoNode));
    assert_eq!(
        events(&mut l),
        vec![
            LockEvent::Suspended,
            LockEvent::Lost {
                reason: LostReason::NodeDeleted
            }
        ]
    );
}

#[test]
fn a_release_that_hits_connection_loss_is_retried() {
    let (mut l, _) = held();
    l.release(T);
    let d = requests(&mut l);
    l.handle_reply(T, d[0].0, Err(ErrorCode::ConnectionLoss));
    let again = requests(&mut l);
    assert_eq!(
        again[0].1,
        Request::Delete(DeleteRequest {
            path: path(&ours(1)),
            version: -1
        })
    );
    l.handle_reply(T, again[0].0, Err(ErrorCode::NoNode));
    assert_eq!(events(&mut l), vec![LockEvent::Released]);
}

#[test]
fn invalid_paths_fail_at_once() {
    let mut l = Lock::new(LockConfig::new("locks/no-slash", LockKind::Exclusive, ID));
    l.acquire(T, None);
    assert_eq!(
        events(&mut l),
        vec![LockEvent::Failed {
            error: ErrorCode::BadArguments
        }]
    );
    assert!(requests(&mut l).is_empty());
}

#[test]
fn revocation_is_reported_once() {
    let mut config = LockConfig::new("/locks/job", LockKind::Exclusive, ID);
    config.revocable = true;
    let mut l = Lock::new(config);
    l.handle_session(
        T,
        SessionChange::Connected {
            session_id: SESSION,
        },
    );
    let (create, list) = start(&mut l);
    l.handle_reply(T, create, created(&ours(1), 11));
    let own = requests(&mut l);
    assert_eq!(
        own[0].1,
        Request::GetData(PathWatch {
            path: path(&ours(1)),
            watch: true
        }),
        "waiters watch their own node"
    );
    l.handle_reply(T, list, children(&[&ours(1)]));
    assert!(matches!(events(&mut l)[..], [LockEvent::Acquired { .. }]));
    l.handle_reply(T, own[0].0, data(b""));
    let changed = WatchEvent {
        event_type: EventType::NodeDataChanged,
        path: path(&ours(1)),
    };
    l.handle_watch(T, own[0].0, &changed);
    let rearm = requests(&mut l);
    l.handle_reply(T, rearm[0].0, data(b"unlock"));
    assert_eq!(events(&mut l), vec![LockEvent::RevocationRequested]);
    l.handle_watch(T, rearm[0].0, &changed);
    let rearm2 = requests(&mut l);
    l.handle_reply(T, rearm2[0].0, data(b"unlock"));
    assert!(events(&mut l).is_empty(), "once per hold");
}

fn rw(kind: LockKind, me: &str, others: &[&str]) -> Vec<Request> {
    let mut l = lock(kind);
    let (create, list) = {
        l.acquire(T, None);
        let r = requests(&mut l);
        (r[0].0, r[1].0)
    };
    l.handle_reply(T, create, created(me, 50));
    let mut all: Vec<&str> = others.to_vec();
    all.push(me);
    l.handle_reply(T, list, children(&all));
    let evs = events(&mut l);
    let reqs: Vec<Request> = requests(&mut l).into_iter().map(|r| r.1).collect();
    if matches!(evs[..], [LockEvent::Acquired { .. }]) {
        vec![]
    } else {
        reqs
    }
}

#[test]
fn readers_wait_only_for_the_highest_lower_writer() {
    let me = format!("_c_{ID}-__READ__0000000005");
    // Readers below don't block; the highest lower writer does.
    let r = rw(
        LockKind::Read,
        &me,
        &[
            "_c_a-__WRIT__0000000001",
            "_c_b-__READ__0000000002",
            "_c_c-__WRIT__0000000003",
            "_c_d-__READ__0000000004",
        ],
    );
    assert_eq!(
        r,
        vec![Request::GetData(PathWatch {
            path: path("_c_c-__WRIT__0000000003"),
            watch: true
        })]
    );
    // kazoo 2.8 (#649) waited on *higher* writers: we must not.
    let r = rw(
        LockKind::Read,
        &me,
        &[
            "_c_b-__READ__0000000002",
            "_c_w-__WRIT__0000000007",
            "_c_x-__WRIT__0000000009",
        ],
    );
    assert_eq!(r, vec![], "acquired: only higher writers exist");
    // Exclusive `lock-` and kazoo's `__lock__` exclude readers too; kazoo readers do not.
    let r = rw(
        LockKind::Read,
        &me,
        &["k__rlock__0000000001", "k__lock__0000000002"],
    );
    assert_eq!(
        r,
        vec![Request::GetData(PathWatch {
            path: path("k__lock__0000000002"),
            watch: true
        })]
    );
}

#[test]
fn writers_wait_for_anything_lower() {
    let me = format!("_c_{ID}-__WRIT__0000000005");
    let r = rw(
        LockKind::Write,
        &me,
        &[
            "_c_a-__READ__0000000001",
            "_c_b-__READ__0000000004",
            "_c_c-__WRIT__0000000009",
        ],
    );
    assert_eq!(
        r,
        vec![Request::GetData(PathWatch {
            path: path("_c_b-__READ__0000000004"),
            watch: true
        })]
    );
    let r = rw(LockKind::Write, &me, &["_c_c-__READ__0000000006"]);
    assert_eq!(r, vec![]);
}

#[test]
fn a_waiter_whose_node_is_deleted_fails() {
    let mut l = lock(LockKind::Exclusive);
    let (create, list) = start(&mut l);
    l.handle_reply(T, create, created(&ours(7), 70));
    l.handle_reply(
        T,
        list,
        children(&[&ours(7), "_c_a-lock-0000000003", "_c_b-lock-0000000005"]),
    );
    let w = requests(&mut l);
    l.handle_reply(T, w[0].0, data(b""));
    l.handle_watch(T, w[0].0, &deleted(&path("_c_b-lock-0000000005")));
    let relist = requests(&mut l);
    // Someone deleted our node meanwhile (a forced revocation, an administrator).
    l.handle_reply(T, relist[0].0, children(&["_c_a-lock-0000000003"]));
    assert_eq!(
        events(&mut l),
        vec![LockEvent::Failed {
            error: ErrorCode::NoNode
        }]
    );
    assert!(
        requests(&mut l).is_empty(),
        "nothing of ours left to delete"
    );
    assert!(l.is_done());
}

#[test]
fn a_late_event_from_an_older_watch_does_not_hand_over_the_lock() {
    let mut l = lock(LockKind::Exclusive);
    let (create, list) = start(&mut l);
    l.handle_reply(T, create, created(&ours(7), 70));
    l.handle_reply(
        T,
        list,
        children(&[&ours(7), "_c_a-lock-0000000003", "_c_b-lock-0000000005"]),
    );
    let w = requests(&mut l);
    l.handle_reply(T, w[0].0, data(b""));
    l.handle_watch(T, w[0].0, &deleted(&path("_c_b-lock-0000000005")));
    let relist = requests(&mut l);
    l.handle_reply(
        T,
        relist[0].0,
        children(&[&ours(7), "_c_a-lock-0000000003"]),
    );
    let w2 = requests(&mut l);
    l.handle_reply(T, w2[0].0, data(b""));
    // A second registration on the old blocker fires late: it must not count.
    l.handle_watch(T, w[0].0, &deleted(&path("_c_b-lock-0000000005")));
    assert!(events(&mut l).is_empty(), "still blocked by _c_a");
    l.handle_watch(T, w2[0].0, &deleted(&path("_c_a-lock-0000000003")));
    assert!(matches!(events(&mut l)[..], [LockEvent::Acquired { .. }]));
}
