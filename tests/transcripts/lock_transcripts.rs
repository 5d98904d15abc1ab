//! Transcript tests for `recipe::lock`: scripted replies in, exact requests and events
//! out, in the one vocabulary of `kit.rs` (`create2 <path> es`, `list <dir>`, `list!
//! <dir>` for a listing that also watches the directory, `get! <path>` / `get <path>`,
//! `exists <path>`, `delete <path>`, `container <path>`, `setWatches2 @zxid data[..]
//! child[..]`).
//!
//! A holder of an exclusive or write lock releases by handing the lock on: one multi
//! {setData(successor, `__GRANT__` + the names after it, expected version 0),
//! delete(own node, any version)}, shown as `multi[set <successor path>
//! '__GRANT__\n<tail names>' @0, delete <own path>]`. A waiter whose blocker went reads
//! its own node (the turn read, `get! <own path>` or `get <own path>`): a grant found
//! there (data `__GRANT__`… at version >= 1) means it holds.

use super::kit::*;
use std::time::Duration;
use zk_recipes::recipe::lock::{
    Acquire, AcquireWait, HoldState, Lock, LockChange, LockConfig, LockEvent, LockKind, LockStatus,
    LostReason, Release, GRANT, NOTICE,
};

const ID: &str = "6f1c2a4e-2b1d-4d7e-9a63-0c2f5a7b8d90";
const SESSION: i64 = 0x77;
const T: Instant = Instant::ZERO;
const DIR: &str = "/locks/job";

fn config(kind: LockKind) -> LockConfig {
    LockConfig::new(DIR, kind, ID)
}

fn lock_with(config: LockConfig) -> Lock {
    let mut l = Lock::new(config);
    l.handle_session(
        T,
        SessionChange::Connected {
            session_id: SESSION,
        },
    );
    l
}

fn lock(kind: LockKind) -> Lock {
    lock_with(config(kind))
}

/// The line of an exclusive waiter's request arming both its watches: on `blocker`'s
/// deletion and on its own node `own` (created at `czxid`).
fn await_line(blocker: &str, own: &str, czxid: i64) -> String {
    format!(
        "setWatches2 @{czxid} data[{}] child[{}]",
        path(own),
        path(blocker)
    )
}

/// The line of a grant to `successor` (a name in `DIR`) carrying `tail`, releasing
/// `own`.
fn grant_line(successor: &str, tail: &[&str], own: &str) -> String {
    format!(
        "multi[{}, delete {}]",
        grant_set(successor, tail),
        path(own)
    )
}

/// The setData of a grant to `successor` carrying `tail` (at version 0, the fresh node).
fn grant_set(successor: &str, tail: &[&str]) -> String {
    format!(
        "set {} {} @0",
        path(successor),
        data_text(&marked_data(GRANT, tail))
    )
}

/// The setData of a notice to `receiver` that `holder` holds, carrying `tail`.
fn notice_set(receiver: &str, holder: &str, tail: &[&str]) -> String {
    let names: Vec<&str> = std::iter::once(holder)
        .chain(tail.iter().copied())
        .collect();
    format!(
        "set {} {} @0",
        path(receiver),
        data_text(&marked_data(NOTICE, &names))
    )
}

/// `marker`, then `names` one a line.
fn marked_data(marker: &[u8], names: &[&str]) -> Vec<u8> {
    let mut d = marker.to_vec();
    for name in names {
        d.push(b'\n');
        d.extend_from_slice(name.as_bytes());
    }
    d
}

fn created(name: &str, czxid: i64) -> Result<Response, Error> {
    Ok(Response::PathStat {
        path: path(name),
        stat: st().czxid(czxid).owner(SESSION),
    })
}

fn data(d: &'static [u8]) -> Result<Response, Error> {
    data_at(d, 0)
}

/// Node data at a data version (a fresh node is at 0; each write adds one).
fn data_at(d: &[u8], version: i32) -> Result<Response, Error> {
    Ok(Response::Data {
        data: Bytes::copy_from_slice(d),
        stat: st().czxid(1).owner(SESSION).version(version),
    })
}

/// Data as a releasing holder writes it: `marker`, then `names` one a line, at
/// version 1 (written once over the fresh node).
fn marked(marker: &[u8], names: &[&str]) -> Result<Response, Error> {
    data_at(&marked_data(marker, names), 1)
}

/// A grant: [`GRANT`], then `tail`.
fn grant(tail: &[&str]) -> Result<Response, Error> {
    marked(GRANT, tail)
}

/// A notice: [`NOTICE`], the holder, then the names after the receiver.
fn notice(names: &[&str]) -> Result<Response, Error> {
    marked(NOTICE, names)
}

/// The grant multi {setData, delete} answered OK.
fn multi_ok() -> Result<Response, Error> {
    Ok(Response::Multi(vec![
        MultiResult::SetData(Stat {
            version: 1,
            ..Stat::default()
        }),
        MultiResult::Delete,
    ]))
}

/// The grant multi failed at op `at` (0: the setData, 1: the delete) with `c`: the
/// ops before it say OK, the ones after it RuntimeInconsistency, as ZooKeeper does.
fn multi_failed(at: usize, c: ErrorCode) -> Result<Response, Error> {
    Ok(Response::Multi(failed_multi(2, at, c)))
}

/// The refusals that say "not applied, try later": the session's own (too many
/// requests pending) and the server's throttle.
fn refusals() -> [Error; 2] {
    [Error::Overloaded, Error::Server(ErrorCode::Throttled)]
}

fn ours(n: u32) -> String {
    format!("_c_{ID}-lock-{n:010}")
}

fn path(name: &str) -> String {
    format!("{DIR}/{name}")
}

fn deleted(p: &str) -> WatchEvent {
    WatchEvent {
        event_type: EventType::NodeDeleted,
        path: p.into(),
    }
}

fn changed(p: &str) -> WatchEvent {
    WatchEvent {
        event_type: EventType::NodeDataChanged,
        path: p.into(),
    }
}

fn children_changed(p: &str) -> WatchEvent {
    WatchEvent {
        event_type: EventType::NodeChildrenChanged,
        path: p.into(),
    }
}

fn reconnect(l: &mut Lock) {
    l.handle_session(T, SessionChange::Suspended);
    l.handle_session(
        T,
        SessionChange::Reconnected {
            session_id: SESSION,
        },
    );
}

/// acquire(): create2 and getChildren go out back to back. Returns their ops.
fn start(l: &mut Lock, deadline: Option<Instant>) -> (OpId, OpId) {
    assert_eq!(l.acquire(T, deadline), Acquire::Pending);
    let marker = match l.config().kind {
        LockKind::Read => "__READ__",
        LockKind::Write => "__WRIT__",
        _ => "lock-",
    };
    // The listing watches the directory where that stands in for a holder's own-node
    // watch: a lock that may be granted, watching its node, not revocable.
    let c = l.config();
    let stand_in = c.watch_own_node
        && !c.revocable
        && matches!(
            c.kind,
            LockKind::Exclusive | LockKind::Read | LockKind::Write
        );
    let list = if stand_in { "list!" } else { "list" };
    let r = sent(l);
    assert_eq!(
        r.iter().map(|(_, s)| s.as_str()).collect::<Vec<_>>(),
        [
            format!("create2 {DIR}/_c_{ID}-{marker} es"),
            format!("{list} {DIR}")
        ],
        "one round trip"
    );
    (r[0].0, r[1].0)
}

/// Requests as [`sent`] returns them.
type Sent = Vec<(OpId, String)>;

/// A revocable exclusive waiter `ours(2)` (token 20) behind one blocker: returns the
/// lock, its own-node read (sent at its creation) and its blocker watch, unanswered.
fn revocable_behind_one() -> (Lock, Sent, Sent) {
    let mut c = config(LockKind::Exclusive);
    c.revocable = true;
    let mut l = lock_with(c);
    let (create, list) = start(&mut l, None);
    l.handle_reply(T, create, created(&ours(2), 20));
    let own = sent(&mut l);
    l.handle_reply(T, list, children(&[&ours(2), "_c_a-lock-0000000001"]));
    let w = sent(&mut l);
    (l, own, w)
}

/// A lock that holds `ours(5)` (token 50), own-node watch armed and answered.
fn held_with(config: LockConfig) -> Lock {
    held_among(config, &[])
}

/// A lock that holds `ours(5)` (token 50) from a listing that also shows `others`
/// (all after it), own-node watch armed and answered.
fn held_among(config: LockConfig, others: &[&str]) -> Lock {
    let mut l = lock_with(config);
    let (create, list) = start(&mut l, None);
    l.handle_reply(T, create, created(&ours(5), 50));
    let mut all = vec![ours(5)];
    all.extend(others.iter().map(|s| s.to_string()));
    let all: Vec<&str> = all.iter().map(String::as_str).collect();
    let early = sent(&mut l);
    l.handle_reply(T, list, children(&all));
    assert!(matches!(events(&mut l)[..], [LockEvent::Acquired { .. }]));
    // A revocable lock watches its node from its creation; any other from its hold.
    for (op, _) in early.into_iter().chain(sent(&mut l)) {
        l.handle_reply(T, op, data(b""));
    }
    l
}

fn held() -> Lock {
    held_with(config(LockKind::Exclusive))
}

#[test]
fn uncontended_acquire_is_one_round_trip_and_release_one_delete() {
    let mut l = lock(LockKind::Exclusive);
    let (create, list) = start(&mut l, None);
    l.handle_reply(T, create, created(&ours(5), 0x500));
    assert!(
        sent(&mut l).is_empty(),
        "no own-node watch while the listing decides: a waiter reads its node at its turn"
    );
    // A kazoo contender behind us reads no grant: a plain delete wakes it.
    l.handle_reply(
        T,
        list,
        children(&[&ours(5), "config", "k__lock__0000000009"]),
    );
    assert_eq!(
        events(&mut l),
        vec![LockEvent::Acquired {
            fencing_token: 0x500,
            node: ours(5)
        }]
    );
    assert!(
        sent(&mut l).is_empty(),
        "no read of its own: the listing's directory watch stands in for the own-node watch"
    );
    assert_eq!(l.release(T), Release::Pending);
    let del = sent(&mut l);
    assert_eq!(
        del.iter().map(|(_, s)| s.clone()).collect::<Vec<_>>(),
        [format!("delete {}", path(&ours(5)))],
        "nobody to hand on to: one plain delete"
    );
    l.handle_reply(T, del[0].0, Ok(Response::Empty));
    assert_eq!(events(&mut l), vec![LockEvent::Released]);
    assert!(l.is_done());
}

/// The listing that makes a lock holder set a children watch on the directory: it fires
/// on our node's deletion, so it stands in for the own-node watch until it fires; on
/// any change the holder arms the real one, and a deletion of its node is `Lost`.
#[test]
fn the_directory_watch_of_the_deciding_listing_stands_in_for_the_own_node_watch() {
    let mut l = lock(LockKind::Exclusive);
    let (create, list) = start(&mut l, None);
    l.handle_reply(T, create, created(&ours(5), 0x500));
    l.handle_reply(T, list, children(&[&ours(5)]));
    assert!(matches!(events(&mut l)[..], [LockEvent::Acquired { .. }]));
    assert!(sent_lines(&mut l).is_empty());
    // A contender arrives (or anything else changes): now watch our own node.
    l.handle_watch(T, list, &children_changed(DIR));
    let own = sent(&mut l);
    assert_eq!(
        own.iter().map(|(_, s)| s.clone()).collect::<Vec<_>>(),
        [format!("get! {}", path(&ours(5)))]
    );
    l.handle_reply(T, own[0].0, data(b""));
    // Later changes of the directory cost nothing more.
    l.handle_watch(T, list, &children_changed(DIR));
    assert!(sent_lines(&mut l).is_empty());
    assert!(events(&mut l).is_empty());

    // The change was our own node's deletion: the read says so, the hold is lost.
    let mut l = lock(LockKind::Exclusive);
    let (create, list) = start(&mut l, None);
    l.handle_reply(T, create, created(&ours(5), 0x500));
    l.handle_reply(T, list, children(&[&ours(5)]));
    events(&mut l);
    l.handle_watch(T, list, &children_changed(DIR));
    let own = sent(&mut l);
    l.handle_reply(T, own[0].0, code(ErrorCode::NoNode));
    assert_eq!(
        events(&mut l),
        vec![LockEvent::Lost {
            reason: LostReason::NodeDeleted
        }]
    );

    // A waiter ignores the directory's changes (it watches its own node).
    let mut l = lock(LockKind::Exclusive);
    let (create, list) = start(&mut l, None);
    l.handle_reply(T, create, created(&ours(5), 0x500));
    l.handle_reply(T, list, children(&["_c_a-lock-0000000001", &ours(5)]));
    assert_eq!(
        sent_lines(&mut l),
        [await_line("_c_a-lock-0000000001", &ours(5), 0x500)]
    );
    l.handle_watch(T, list, &children_changed(DIR));
    assert!(sent_lines(&mut l).is_empty());
    assert!(events(&mut l).is_empty());

    // The directory watch removed (removeWatches by another user of the session) or
    // the directory deleted: no stand-in any more, the holder watches its node.
    for t in [EventType::ChildWatchRemoved, EventType::NodeDeleted] {
        let mut l = lock(LockKind::Exclusive);
        let (create, list) = start(&mut l, None);
        l.handle_reply(T, create, created(&ours(5), 0x500));
        l.handle_reply(T, list, children(&[&ours(5)]));
        events(&mut l);
        let ev = WatchEvent {
            event_type: t,
            path: DIR.into(),
        };
        l.handle_watch(T, list, &ev);
        let own = sent(&mut l);
        assert_eq!(
            own.iter().map(|(_, s)| s.clone()).collect::<Vec<_>>(),
            [format!("get! {}", path(&ours(5)))],
            "{t:?}"
        );
        // And that watch removed in turn: armed again.
        l.handle_reply(T, own[0].0, data(b""));
        let ev = WatchEvent {
            event_type: EventType::DataWatchRemoved,
            path: path(&ours(5)),
        };
        l.handle_watch(T, own[0].0, &ev);
        assert_eq!(
            sent_lines(&mut l),
            [format!("get! {}", path(&ours(5)))],
            "{t:?}"
        );
    }

    // No stand-in where the own node must be watched for its data (revocable) or is
    // not watched at all.
    for (revocable, watch_own_node) in [(true, true), (false, false)] {
        let mut c = config(LockKind::Exclusive);
        c.revocable = revocable;
        c.watch_own_node = watch_own_node;
        let mut l = lock_with(c);
        let r = sent_after_acquire(&mut l);
        assert_eq!(
            r[1].1,
            format!("list {DIR}"),
            "{revocable} {watch_own_node}"
        );
    }
}

/// A listing with the directory watch refused by the session (at its watch limit, say):
/// the lock lists again without it, and as holder reads its own node instead — never
/// stuck retrying a watch the session will not take.
#[test]
fn a_refused_directory_watch_is_not_asked_for_again() {
    let mut l = lock(LockKind::Exclusive);
    let (create, list) = start(&mut l, None);
    l.handle_reply(T, create, created(&ours(5), 0x500));
    l.handle_reply(T, list, Err(Error::Overloaded));
    let t = l.poll_timeout().unwrap();
    l.handle_timeout(t);
    let relist = sent(&mut l);
    assert_eq!(
        relist.iter().map(|(_, s)| s.clone()).collect::<Vec<_>>(),
        [format!("sync {DIR}"), format!("list {DIR}")]
    );
    l.handle_reply(t, relist[0].0, Ok(Response::Path(DIR.into())));
    l.handle_reply(t, relist[1].0, children(&[&ours(5)]));
    assert!(matches!(events(&mut l)[..], [LockEvent::Acquired { .. }]));
    assert_eq!(sent_lines(&mut l), [format!("get! {}", path(&ours(5)))]);
}

fn sent_after_acquire(l: &mut Lock) -> Vec<(OpId, String)> {
    assert_eq!(l.acquire(T, None), Acquire::Pending);
    sent(l)
}

#[test]
fn without_the_own_node_watch_it_is_three_requests_in_all() {
    let mut c = config(LockKind::Exclusive);
    c.watch_own_node = false;
    let mut l = lock_with(c);
    let (create, list) = start(&mut l, None);
    l.handle_reply(T, create, created(&ours(1), 9));
    l.handle_reply(T, list, children(&[&ours(1)]));
    assert!(matches!(events(&mut l)[..], [LockEvent::Acquired { .. }]));
    assert!(sent(&mut l).is_empty());
    l.release(T);
    assert_eq!(sent_lines(&mut l), [format!("delete {}", path(&ours(1)))]);
}

#[test]
fn a_waiter_watches_only_its_predecessor_and_takes_over_without_listing() {
    let mut l = lock(LockKind::Exclusive);
    let (create, list) = start(&mut l, None);
    l.handle_reply(T, create, created(&ours(7), 70));
    assert!(
        sent(&mut l).is_empty(),
        "a waiter does not watch its own node"
    );
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
    let w = sent(&mut l);
    assert_eq!(w[0].1, await_line("_c_b-lock-0000000006", &ours(7), 70));
    assert_eq!(
        w.len(),
        1,
        "the predecessor only (no herd), and our own node, in one request"
    );
    l.handle_reply(T, w[0].0, Ok(Response::Empty));
    assert!(events(&mut l).is_empty());
    // Two blockers: when the predecessor goes and nothing was written into our node
    // (its watch did not fire: a grant or a notice would have, first), list again.
    l.handle_watch(T, w[0].0, &deleted(&path("_c_b-lock-0000000006")));
    let relist = sent(&mut l);
    assert_eq!(relist.len(), 1);
    assert_eq!(relist[0].1, format!("list {DIR}"), "no turn read");
    l.handle_reply(
        T,
        relist[0].0,
        children(&[&ours(7), "_c_a-lock-0000000003"]),
    );
    let w = sent(&mut l);
    assert_eq!(w[0].1, await_line("_c_a-lock-0000000003", &ours(7), 70));
    l.handle_reply(T, w[0].0, Ok(Response::Empty));
    // Only one blocker left: its deletion hands over the lock with no listing.
    l.handle_watch(T, w[0].0, &deleted(&path("_c_a-lock-0000000003")));
    assert_eq!(
        events(&mut l),
        vec![LockEvent::Acquired {
            fencing_token: 70,
            node: ours(7)
        }]
    );
    assert!(
        sent(&mut l).is_empty(),
        "the own-node watch is armed already (with the blocker's)"
    );
}

#[test]
fn a_predecessor_gone_before_the_watch_is_set_counts_as_gone() {
    let mut l = lock(LockKind::Exclusive);
    let (create, list) = start(&mut l, None);
    l.handle_reply(T, create, created(&ours(2), 20));
    l.handle_reply(T, list, children(&[&ours(2), "_c_a-lock-0000000001"]));
    let w = sent(&mut l);
    // The server fires the deletion watch at once (its node is gone), after its reply
    // (the session holds it back until then); our own node's watch is armed.
    l.handle_reply(T, w[0].0, Ok(Response::Empty));
    l.handle_watch(T, w[0].0, &deleted(&path("_c_a-lock-0000000001")));
    assert!(matches!(
        events(&mut l)[..],
        [LockEvent::Acquired {
            fencing_token: 20,
            ..
        }]
    ));
    assert!(
        sent_lines(&mut l).is_empty(),
        "no read: our node's watch is live"
    );

    // A waiter whose blocker watch is a plain children watch (revocable: it watches
    // its node from its creation) hears NoNode for a blocker gone before the watch.
    let (mut l, own, w) = revocable_behind_one();
    assert_eq!(w[0].1, format!("list! {}", path("_c_a-lock-0000000001")));
    l.handle_reply(T, w[0].0, code(ErrorCode::NoNode));
    // As its deletion: its own node read is still on its way; it decides.
    assert!(sent_lines(&mut l).is_empty());
    let turn = own;
    assert_eq!(
        turn.iter().map(|(_, s)| s.clone()).collect::<Vec<_>>(),
        [format!("get! {}", path(&ours(2)))]
    );
    assert!(events(&mut l).is_empty(), "not before our node is seen");
    l.handle_reply(T, turn[0].0, data(b""));
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
    let (create, list) = start(&mut l, None);
    l.handle_reply(T, create, code(ErrorCode::NoNode));
    let r = sent(&mut l);
    assert_eq!(
        r.iter().map(|(_, s)| s.clone()).collect::<Vec<_>>(),
        [
            "container /locks".to_string(),
            "container /locks/job".into(),
            format!("create2 {DIR}/_c_{ID}-lock- es"),
            format!("list! {DIR}"),
        ]
    );
    l.handle_reply(T, list, code(ErrorCode::NoNode)); // the old listing is ignored
    l.handle_reply(T, r[0].0, Ok(Response::Path("/locks".into())));
    l.handle_reply(T, r[1].0, code(ErrorCode::NodeExists));
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

/// Issue 9, defect 4: an ancestor that cannot be created used to loop forever.
#[test]
fn a_parent_that_cannot_be_created_fails_with_its_name() {
    // A missing chroot: the top-level container cannot be created.
    let mut l = lock(LockKind::Exclusive);
    let (create, list) = start(&mut l, None);
    l.handle_reply(T, create, code(ErrorCode::NoNode));
    l.handle_reply(T, list, code(ErrorCode::NoNode));
    let r = sent(&mut l);
    l.handle_reply(T, r[0].0, code(ErrorCode::NoNode));
    l.handle_reply(T, r[1].0, code(ErrorCode::NoNode));
    l.handle_reply(T, r[2].0, code(ErrorCode::NoNode));
    l.handle_reply(T, r[3].0, code(ErrorCode::NoNode));
    assert_eq!(
        events(&mut l),
        vec![LockEvent::Failed {
            error: Error::ChrootMissing
        }]
    );
    assert!(sent(&mut l).is_empty(), "no loop");
    assert!(l.is_done());

    // No permission on an ancestor: named.
    let mut l = lock(LockKind::Exclusive);
    let (create, _) = start(&mut l, None);
    l.handle_reply(T, create, code(ErrorCode::NoNode));
    let r = sent(&mut l);
    l.handle_reply(T, r[0].0, code(ErrorCode::NodeExists));
    l.handle_reply(T, r[1].0, code(ErrorCode::NoAuth));
    l.handle_reply(T, r[2].0, code(ErrorCode::NoNode));
    assert_eq!(
        events(&mut l),
        vec![LockEvent::Failed {
            error: Error::NoParent {
                path: DIR.into(),
                code: ErrorCode::NoAuth
            }
        }]
    );

    // Parents "created" but the create keeps failing (reaped in between): bounded.
    let mut l = lock(LockKind::Exclusive);
    let (create, list) = start(&mut l, None);
    l.handle_reply(T, create, code(ErrorCode::NoNode));
    l.handle_reply(T, list, code(ErrorCode::NoNode));
    let mut rounds = 0;
    while l.poll_event().is_none() {
        let r = sent(&mut l);
        assert!(!r.is_empty(), "it neither retries nor ends");
        for (op, line) in r {
            let reply = if line.starts_with("container") {
                Ok(Response::Path(line))
            } else {
                code(ErrorCode::NoNode)
            };
            l.handle_reply(T, op, reply);
        }
        rounds += 1;
        assert!(rounds < 5, "unbounded parent creation");
    }
    assert!(l.is_done(), "{l:?}");
}

#[test]
fn a_lost_create_reply_is_recovered_by_prefix_after_a_sync_and_adopted_only_if_ours() {
    let mut l = lock(LockKind::Exclusive);
    let (create, list) = start(&mut l, None);
    l.handle_reply(T, create, code(ErrorCode::ConnectionLoss));
    l.handle_reply(T, list, code(ErrorCode::ConnectionLoss));
    l.handle_session(T, SessionChange::Suspended);
    assert!(sent(&mut l).is_empty(), "nothing while suspended");
    l.handle_session(
        T,
        SessionChange::Reconnected {
            session_id: SESSION,
        },
    );
    let r = sent(&mut l);
    assert_eq!(
        r.iter().map(|(_, s)| s.clone()).collect::<Vec<_>>(),
        [format!("sync {DIR}"), format!("list {DIR}")],
        "sync first: a reconnect may land on a lagging follower"
    );
    l.handle_reply(T, r[0].0, Ok(Response::Path(DIR.into())));
    l.handle_reply(T, r[1].0, children(&[&ours(4), "_c_z-lock-0000000002"]));
    let adopt = sent(&mut l);
    assert_eq!(adopt[0].1, format!("exists {}", path(&ours(4))));
    l.handle_reply(
        T,
        adopt[0].0,
        Ok(Response::Stat(st().czxid(40).owner(SESSION))),
    );
    let next = sent_lines(&mut l);
    assert_eq!(
        next,
        [format!("list! {DIR}")],
        "the recovery's sync still holds on this connection; no own-node watch while waiting"
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
    let (create, list) = start(&mut l, None);
    l.handle_reply(T, create, code(ErrorCode::ConnectionLoss));
    l.handle_reply(T, list, code(ErrorCode::ConnectionLoss));
    reconnect(&mut l);
    let r = sent(&mut l);
    l.handle_reply(T, r[0].0, Ok(Response::Path(DIR.into())));
    l.handle_reply(T, r[1].0, children(&[&ours(4)]));
    let adopt = sent(&mut l);
    l.handle_reply(
        T,
        adopt[0].0,
        Ok(Response::Stat(st().czxid(40).owner(0x999))),
    );
    assert_eq!(
        sent_lines(&mut l),
        [
            format!("create2 {DIR}/_c_{ID}-lock- es"),
            format!("list! {DIR}")
        ],
        "not ours: create our own"
    );
}

/// Issue 9, defect 6: a second node of ours (the create landed twice) is an orphan.
#[test]
fn recovery_adopts_the_lower_of_two_nodes_and_deletes_the_orphan() {
    let mut l = lock(LockKind::Exclusive);
    let (create, list) = start(&mut l, None);
    l.handle_reply(T, create, code(ErrorCode::ConnectionLoss));
    l.handle_reply(T, list, code(ErrorCode::ConnectionLoss));
    reconnect(&mut l);
    let r = sent(&mut l);
    l.handle_reply(T, r[0].0, Ok(Response::Path(DIR.into())));
    l.handle_reply(T, r[1].0, children(&[&ours(9), &ours(4)]));
    let adopt = sent(&mut l);
    assert_eq!(adopt.len(), 2);
    for (op, line) in &adopt {
        let czxid = if line.ends_with(&ours(4)) { 40 } else { 90 };
        l.handle_reply(T, *op, Ok(Response::Stat(st().czxid(czxid).owner(SESSION))));
    }
    let next = sent_lines(&mut l);
    assert!(
        next.contains(&format!("delete {}", path(&ours(9)))),
        "{next:?}"
    );
    assert!(next.contains(&format!("list! {DIR}")), "{next:?}");
    assert_eq!(
        l.node(),
        Some(ours(4).as_str()),
        "the lower one keeps our place"
    );
}

/// Issue 9, defect 3: the create landed, the paired listing was lost with the
/// connection; the lock used to stay `Creating` forever.
#[test]
fn a_listing_lost_after_a_successful_create_is_done_again_after_the_reconnect() {
    let mut l = lock(LockKind::Exclusive);
    let (create, list) = start(&mut l, None);
    l.handle_reply(T, create, created(&ours(3), 30));
    assert!(sent(&mut l).is_empty());
    l.handle_reply(T, list, code(ErrorCode::ConnectionLoss));
    l.handle_session(T, SessionChange::Suspended);
    assert!(sent(&mut l).is_empty());
    l.handle_session(
        T,
        SessionChange::Reconnected {
            session_id: SESSION,
        },
    );
    let r = sent(&mut l);
    assert_eq!(
        r.iter().map(|(_, s)| s.clone()).collect::<Vec<_>>(),
        [format!("sync {DIR}"), format!("list! {DIR}")]
    );
    l.handle_reply(T, r[1].0, children(&[&ours(3)]));
    assert!(matches!(events(&mut l)[..], [LockEvent::Acquired { .. }]));
    assert!(
        sent_lines(&mut l).is_empty(),
        "the listing's directory watch stands in for the own-node watch"
    );
}

/// Issue 9, defect 5: a delete refused locally used to end as `Released`.
#[test]
fn a_refused_delete_is_retried_and_released_only_when_it_answered() {
    let mut l = held();
    l.release(T);
    let del = sent(&mut l);
    // The session refuses it (too many requests pending).
    l.handle_reply(T, del[0].0, Err(Error::Overloaded));
    assert!(events(&mut l).is_empty(), "a refusal is not a release");
    assert!(sent(&mut l).is_empty(), "backing off");
    let at = l.poll_timeout().expect("a retry is scheduled");
    assert!(at > T && at <= ms(10), "{at:?}");
    l.handle_timeout(at);
    let del = sent(&mut l);
    assert_eq!(del[0].1, format!("delete {}", path(&ours(5))));
    // Then the connection drops before the answer: retried after the reconnect.
    l.handle_reply(T, del[0].0, code(ErrorCode::ConnectionLoss));
    l.handle_session(T, SessionChange::Suspended);
    assert!(sent(&mut l).is_empty());
    l.handle_session(
        T,
        SessionChange::Reconnected {
            session_id: SESSION,
        },
    );
    let del = sent(&mut l);
    assert_eq!(del[0].1, format!("delete {}", path(&ours(5))));
    l.handle_reply(T, del[0].0, code(ErrorCode::NoNode)); // it had landed
    assert_eq!(events(&mut l), vec![LockEvent::Released]);
    assert!(l.is_done());
}

#[test]
fn refused_watches_and_verifications_are_retried() {
    // A refused blocker watch: list and watch again.
    let mut l = lock(LockKind::Exclusive);
    let (create, list) = start(&mut l, None);
    l.handle_reply(T, create, created(&ours(7), 70));
    l.handle_reply(T, list, children(&[&ours(7), "_c_a-lock-0000000003"]));
    let w = sent(&mut l);
    l.handle_reply(T, w[0].0, Err(Error::Server(ErrorCode::Throttled)));
    l.handle_timeout(l.poll_timeout().unwrap());
    assert_eq!(
        sent_lines(&mut l),
        [format!("sync {DIR}"), format!("list! {DIR}")],
        "a waiter is never left without a watch"
    );

    // A refused verification after a reconnect: asked again until answered.
    let mut l = held();
    reconnect(&mut l);
    assert_eq!(events(&mut l), vec![LockEvent::Suspended]);
    let v = sent(&mut l);
    assert_eq!(
        v.iter().map(|(_, s)| s.clone()).collect::<Vec<_>>(),
        [format!("sync {DIR}"), format!("exists {}", path(&ours(5)))]
    );
    l.handle_reply(T, v[0].0, Ok(Response::Path(DIR.into())));
    l.handle_reply(T, v[1].0, Err(Error::Overloaded));
    assert!(events(&mut l).is_empty(), "still suspended");
    l.handle_timeout(l.poll_timeout().unwrap());
    let v = sent(&mut l);
    l.handle_reply(T, v[0].0, Ok(Response::Path(DIR.into())));
    l.handle_reply(T, v[1].0, Ok(Response::Stat(st().czxid(50).owner(SESSION))));
    assert_eq!(events(&mut l), vec![LockEvent::Reconnected]);

    // A refused own-node watch: armed again.
    let mut l = lock(LockKind::Exclusive);
    let (create, list) = start(&mut l, None);
    l.handle_reply(T, create, created(&ours(1), 10));
    l.handle_reply(T, list, children(&[&ours(1)]));
    events(&mut l);
    l.handle_watch(T, list, &children_changed(DIR));
    let own = sent(&mut l);
    l.handle_reply(T, own[0].0, Err(Error::Overloaded));
    l.handle_timeout(l.poll_timeout().unwrap());
    assert_eq!(sent_lines(&mut l), [format!("get! {}", path(&ours(1)))]);
}

#[test]
fn a_sync_that_fails_makes_its_read_count_for_nothing() {
    let mut l = held();
    reconnect(&mut l);
    events(&mut l);
    let v = sent(&mut l);
    l.handle_reply(T, v[0].0, Err(Error::Server(ErrorCode::Throttled)));
    // The exists after it went to a possibly stale server: not trusted.
    l.handle_reply(T, v[1].0, Ok(Response::Stat(st().czxid(50).owner(SESSION))));
    assert!(events(&mut l).is_empty(), "not verified by a stale read");
    l.handle_timeout(l.poll_timeout().unwrap());
    assert_eq!(
        sent_lines(&mut l),
        [format!("sync {DIR}"), format!("exists {}", path(&ours(5)))]
    );
}

#[test]
fn cancel_while_the_create_is_in_flight_deletes_what_it_created() {
    let mut l = lock(LockKind::Exclusive);
    let (create, list) = start(&mut l, None);
    assert_eq!(l.cancel(T), Release::Pending);
    l.handle_reply(T, create, created(&ours(1), 10));
    let del = sent(&mut l);
    assert_eq!(del[0].1, format!("delete {}", path(&ours(1))));
    l.handle_reply(T, list, children(&[&ours(1)]));
    assert!(events(&mut l).is_empty(), "no Acquired after cancel");
    l.handle_reply(T, del[0].0, Ok(Response::Empty));
    assert_eq!(events(&mut l), vec![LockEvent::Cancelled]);
    assert!(l.is_done());
}

#[test]
fn try_lock_looks_once_then_gives_up_and_removes_its_node() {
    let mut l = lock(LockKind::Exclusive);
    let (create, list) = start(&mut l, Some(T));
    l.handle_timeout(T); // the deadline passes at once; the first listing still counts
    assert!(events(&mut l).is_empty());
    l.handle_reply(T, create, created(&ours(2), 20));
    l.handle_reply(T, list, children(&[&ours(2), "_c_a-lock-0000000001"]));
    assert_eq!(events(&mut l), vec![LockEvent::NotAcquired]);
    let del = sent(&mut l);
    assert_eq!(del[0].1, format!("delete {}", path(&ours(2))));
    l.handle_reply(T, del[0].0, Ok(Response::Empty));
    assert!(events(&mut l).is_empty(), "NotAcquired was the final word");
    assert!(l.is_done());
}

#[test]
fn a_free_lock_is_taken_by_a_try_lock() {
    let mut l = lock(LockKind::Exclusive);
    let (create, list) = start(&mut l, Some(T));
    l.handle_timeout(T);
    l.handle_reply(T, create, created(&ours(2), 20));
    l.handle_reply(T, list, children(&[&ours(2)]));
    assert!(matches!(events(&mut l)[..], [LockEvent::Acquired { .. }]));
}

/// Issue 9, defect 8: the deadline was not enforced while creating (a 2 s try took
/// 30 s); a try-lock on a dead connection must give up at its deadline.
#[test]
fn a_deadline_is_kept_while_creating() {
    // Disconnected: give up at the deadline.
    let mut l = lock(LockKind::Exclusive);
    let (create, list) = start(&mut l, Some(ms(2000)));
    l.handle_reply(T, create, code(ErrorCode::ConnectionLoss));
    l.handle_reply(T, list, code(ErrorCode::ConnectionLoss));
    l.handle_session(T, SessionChange::Suspended);
    assert_eq!(l.poll_timeout(), Some(ms(2000)));
    l.handle_timeout(ms(2000));
    assert_eq!(events(&mut l), vec![LockEvent::NotAcquired]);
    // Cleanup goes on after the reconnect: find what may have landed and delete it.
    l.handle_session(
        T,
        SessionChange::Reconnected {
            session_id: SESSION,
        },
    );
    let r = sent(&mut l);
    l.handle_reply(T, r[0].0, Ok(Response::Path(DIR.into())));
    l.handle_reply(T, r[1].0, children(&[&ours(8)]));
    let adopt = sent(&mut l);
    l.handle_reply(
        T,
        adopt[0].0,
        Ok(Response::Stat(st().czxid(80).owner(SESSION))),
    );
    let del = sent(&mut l);
    assert_eq!(del[0].1, format!("delete {}", path(&ours(8))));
    l.handle_reply(T, del[0].0, Ok(Response::Empty));
    assert!(l.is_done());

    // Connected but the listing never comes: give up after the grace.
    let mut l = lock(LockKind::Exclusive);
    let _ = start(&mut l, Some(T));
    l.handle_timeout(T);
    assert_eq!(l.poll_timeout(), Some(ms(1000)), "the try grace");
    l.handle_timeout(ms(1000));
    assert_eq!(events(&mut l), vec![LockEvent::NotAcquired]);
}

#[test]
fn a_waiting_deadline_gives_up_and_removes_its_node() {
    let mut l = lock(LockKind::Exclusive);
    let (create, list) = start(&mut l, Some(ms(500)));
    l.handle_reply(T, create, created(&ours(2), 20));
    sent(&mut l);
    l.handle_reply(T, list, children(&[&ours(2), "_c_a-lock-0000000001"]));
    sent(&mut l);
    assert_eq!(l.poll_timeout(), Some(ms(500)));
    l.handle_timeout(ms(500));
    assert_eq!(events(&mut l), vec![LockEvent::NotAcquired]);
    assert_eq!(sent_lines(&mut l), [format!("delete {}", path(&ours(2)))]);
}

#[test]
fn suspended_then_reconnected_after_verifying_the_node() {
    let mut l = held();
    l.handle_session(T, SessionChange::Suspended);
    assert_eq!(events(&mut l), vec![LockEvent::Suspended]);
    assert!(!l.is_held());
    l.handle_session(
        T,
        SessionChange::Reconnected {
            session_id: SESSION,
        },
    );
    assert!(events(&mut l).is_empty(), "not before verifying");
    let v = sent(&mut l);
    l.handle_reply(T, v[0].0, Ok(Response::Path(DIR.into())));
    l.handle_reply(T, v[1].0, Ok(Response::Stat(st().czxid(50).owner(SESSION))));
    assert_eq!(events(&mut l), vec![LockEvent::Reconnected]);
    assert!(l.is_held());
}

#[test]
fn lost_on_expiry_and_on_deletion_by_someone_else() {
    let mut l = held();
    l.handle_session(T, SessionChange::Expired);
    assert_eq!(
        events(&mut l),
        vec![LockEvent::Lost {
            reason: LostReason::SessionExpired
        }]
    );
    assert!(l.is_done());

    let mut l = held();
    l.handle_watch(T, 0, &deleted(&path(&ours(5))));
    assert_eq!(
        events(&mut l),
        vec![LockEvent::Lost {
            reason: LostReason::NodeDeleted
        }]
    );
    assert!(sent(&mut l).is_empty());

    // A verification that finds the node gone.
    let mut l = held();
    reconnect(&mut l);
    events(&mut l);
    let v = sent(&mut l);
    l.handle_reply(T, v[1].0, code(ErrorCode::NoNode));
    assert_eq!(
        events(&mut l),
        vec![LockEvent::Lost {
            reason: LostReason::NodeDeleted
        }]
    );
}

#[test]
fn invalid_paths_fail_at_once() {
    let mut l = lock_with(LockConfig::new("no-slash", LockKind::Exclusive, ID));
    assert_eq!(l.acquire(T, None), Acquire::Pending);
    assert!(matches!(
        events(&mut l)[..],
        [LockEvent::Failed {
            error: Error::InvalidPath { .. }
        }]
    ));
    assert!(sent(&mut l).is_empty());
    assert!(l.is_done());
}

#[test]
fn revocation_is_reported_once_including_curators_marker() {
    let mut c = config(LockKind::Exclusive);
    c.revocable = true;
    let mut l = held_with(c);
    l.handle_watch(T, 0, &changed(&path(&ours(5))));
    let own = sent(&mut l);
    assert_eq!(own[0].1, format!("get! {}", path(&ours(5))));
    l.handle_reply(T, own[0].0, data(b"__REVOKE__"));
    assert_eq!(events(&mut l), vec![LockEvent::RevocationRequested]);
    l.handle_watch(T, 0, &changed(&path(&ours(5))));
    let own = sent(&mut l);
    l.handle_reply(T, own[0].0, data(b"unlock"));
    assert!(events(&mut l).is_empty(), "once");
}

/// Issue 9, defect 8: a revocation written while waiting was dropped by the adapters;
/// the status a guard starts from carries it.
#[test]
fn a_revocation_asked_while_waiting_reaches_the_holder() {
    let mut c = config(LockKind::Exclusive);
    c.revocable = true;
    let mut l = lock_with(c);
    let (create, list) = start(&mut l, None);
    l.handle_reply(T, create, created(&ours(7), 70));
    let own = sent(&mut l);
    l.handle_reply(T, list, children(&[&ours(7), "_c_a-lock-0000000003"]));
    let w = sent(&mut l);
    l.handle_reply(T, own[0].0, data(b"unlock"));
    l.handle_reply(T, w[0].0, data(b""));
    l.handle_watch(T, w[0].0, &deleted(&path("_c_a-lock-0000000003")));
    let mut wait = AcquireWait::after(&Acquire::Pending).unwrap();
    let mut outcome = None;
    for e in events(&mut l) {
        if let Some(o) = wait.feed(&e) {
            outcome = Some(o);
        }
    }
    assert_eq!(outcome, Some(Ok(Some((70, ours(7))))));
    let mut status = wait.into_status();
    assert!(status.is_held());
    assert!(status.revocation_requested());
    assert_eq!(status.next_change(), Some(LockChange::RevocationRequested));
}

#[test]
fn reentrant_levels_count_in_the_core() {
    let mut c = config(LockKind::Exclusive);
    c.reentrant = true;
    let mut l = held_with(c);
    assert_eq!(l.depth(), 1);
    assert_eq!(
        l.acquire(T, None),
        Acquire::Held {
            fencing_token: 50,
            node: ours(5)
        }
    );
    assert!(sent(&mut l).is_empty(), "re-entry costs no request");
    assert_eq!(l.release(T), Release::StillHeld { depth: 1 });
    assert!(sent(&mut l).is_empty());
    assert_eq!(l.release(T), Release::Pending);
    assert_eq!(sent_lines(&mut l), [format!("delete {}", path(&ours(5)))]);
}

/// Issue 10, defect 1: re-entry on a hold that is already lost returned `Ok`.
#[test]
fn reentry_on_a_lost_hold_fails_and_one_while_suspended_waits_for_the_verification() {
    let mut c = config(LockKind::Exclusive);
    c.reentrant = true;
    let mut l = held_with(c.clone());
    l.handle_watch(T, 0, &deleted(&path(&ours(5))));
    events(&mut l);
    assert_eq!(
        l.acquire(T, None),
        Acquire::Failed(Error::Server(ErrorCode::NoNode))
    );
    assert!(!l.is_done(), "a guard of the lost hold still lives");
    assert_eq!(l.release(T), Release::Done);
    assert!(l.is_done(), "the last guard went");
    assert_eq!(
        l.acquire(T, None),
        Acquire::Ended,
        "a new hold needs a new lock"
    );

    let mut l = held_with(c);
    l.handle_session(T, SessionChange::Suspended);
    events(&mut l);
    let answer = l.acquire(T, None);
    assert_eq!(
        answer,
        Acquire::Suspended {
            fencing_token: 50,
            node: ours(5)
        }
    );
    let mut wait = AcquireWait::after(&answer).unwrap();
    l.handle_session(
        T,
        SessionChange::Reconnected {
            session_id: SESSION,
        },
    );
    let v = sent(&mut l);
    l.handle_reply(T, v[1].0, Ok(Response::Stat(st().czxid(50).owner(SESSION))));
    let outcome = events(&mut l).iter().find_map(|e| wait.feed(e));
    assert_eq!(outcome, Some(Ok(Some((50, ours(5))))));
    assert_eq!(l.depth(), 2);
}

#[test]
fn a_holder_status_folds_events_none_dropped() {
    let mut s = LockStatus::held();
    for e in [
        LockEvent::Suspended,
        LockEvent::Reconnected,
        LockEvent::Lost {
            reason: LostReason::SessionExpired,
        },
    ] {
        s.apply(&e);
    }
    assert_eq!(s.next_change(), Some(LockChange::Suspended));
    assert_eq!(s.next_change(), Some(LockChange::Reconnected));
    assert_eq!(
        s.next_change(),
        Some(LockChange::Lost(LostReason::SessionExpired))
    );
    assert_eq!(s.state(), HoldState::Lost(LostReason::SessionExpired));
}

fn rw(kind: LockKind, me: &str, others: &[&str]) -> Vec<String> {
    let mut l = lock(kind);
    l.acquire(T, None);
    let r = sent(&mut l);
    l.handle_reply(T, r[0].0, created(me, 50));
    assert!(sent(&mut l).is_empty(), "no own-node watch while waiting");
    let mut all: Vec<&str> = others.to_vec();
    all.push(me);
    l.handle_reply(T, r[1].0, children(&all));
    let evs = events(&mut l);
    if matches!(evs[..], [LockEvent::Acquired { .. }]) {
        vec![]
    } else {
        sent_lines(&mut l)
    }
}

#[test]
fn readers_wait_only_for_the_highest_lower_writer() {
    let me = format!("_c_{ID}-__READ__0000000005");
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
    assert_eq!(r, [format!("list! {}", path("_c_c-__WRIT__0000000003"))]);
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
    assert!(r.is_empty(), "acquired: only higher writers exist");
    // Exclusive `lock-` and kazoo's `__lock__` exclude readers too; kazoo readers do not.
    let r = rw(
        LockKind::Read,
        &me,
        &["k__rlock__0000000001", "k__lock__0000000002"],
    );
    assert_eq!(r, [format!("list! {}", path("k__lock__0000000002"))]);
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
    assert_eq!(r, [format!("list! {}", path("_c_b-__READ__0000000004"))]);
    let r = rw(LockKind::Write, &me, &["_c_c-__READ__0000000006"]);
    assert!(r.is_empty());
}

/// Someone deletes a waiter's node (a forced revocation, an administrator), then its
/// blocker goes: it must not take a lock it no longer queues for. A waiter does not
/// watch its own node; the turn read finds it gone.
#[test]
fn a_waiter_whose_node_is_deleted_fails_at_the_notification() {
    for blockers in [
        vec!["_c_b-lock-0000000005"],
        vec!["_c_a-lock-0000000003", "_c_b-lock-0000000005"],
    ] {
        let mut l = lock(LockKind::Exclusive);
        let (create, list) = start(&mut l, None);
        l.handle_reply(T, create, created(&ours(7), 70));
        let mut all = vec![ours(7)];
        all.extend(blockers.iter().map(|s| s.to_string()));
        let all: Vec<&str> = all.iter().map(String::as_str).collect();
        l.handle_reply(T, list, children(&all));
        let w = sent(&mut l);
        assert_eq!(
            w.iter().map(|(_, s)| s.clone()).collect::<Vec<_>>(),
            [await_line("_c_b-lock-0000000005", &ours(7), 70)]
        );
        l.handle_reply(T, w[0].0, Ok(Response::Empty));
        // Our node is deleted (by someone else): its watch, armed with the blocker's,
        // tells at once.
        l.handle_watch(T, w[0].0, &deleted(&path(&ours(7))));
        assert_eq!(
            events(&mut l),
            vec![LockEvent::Failed {
                error: Error::from(ErrorCode::NoNode)
            }]
        );
        assert!(sent(&mut l).is_empty(), "nothing of ours left to delete");
        assert!(l.is_done());
    }
}

/// A revocable waiter watches its own node from its creation: its deletion is heard
/// at once, before any blocker goes.
#[test]
fn a_revocable_waiter_whose_node_is_deleted_fails_at_the_notification() {
    let mut c = config(LockKind::Exclusive);
    c.revocable = true;
    let mut l = lock_with(c);
    let (create, list) = start(&mut l, None);
    l.handle_reply(T, create, created(&ours(7), 70));
    let own = sent(&mut l);
    assert_eq!(
        own.iter().map(|(_, s)| s.clone()).collect::<Vec<_>>(),
        [format!("get! {}", path(&ours(7)))],
        "a revocable waiter hears revocation"
    );
    l.handle_reply(
        T,
        list,
        children(&[&ours(7), "_c_a-lock-0000000003", "_c_b-lock-0000000005"]),
    );
    let w = sent(&mut l);
    l.handle_reply(T, own[0].0, data(b""));
    l.handle_reply(T, w[0].0, data(b""));
    l.handle_watch(T, own[0].0, &deleted(&path(&ours(7))));
    assert_eq!(
        events(&mut l),
        vec![LockEvent::Failed {
            error: Error::from(ErrorCode::NoNode)
        }]
    );
    l.handle_watch(T, w[0].0, &deleted(&path("_c_b-lock-0000000005")));
    assert!(events(&mut l).is_empty());
    assert!(sent(&mut l).is_empty(), "nothing of ours left to delete");
    assert!(l.is_done());
}

#[test]
fn a_late_event_from_an_older_watch_does_not_hand_over_the_lock() {
    let mut l = lock(LockKind::Exclusive);
    let (create, list) = start(&mut l, None);
    l.handle_reply(T, create, created(&ours(7), 70));
    l.handle_reply(
        T,
        list,
        children(&[&ours(7), "_c_a-lock-0000000003", "_c_b-lock-0000000005"]),
    );
    let w = sent(&mut l);
    l.handle_reply(T, w[0].0, Ok(Response::Empty));
    l.handle_watch(T, w[0].0, &deleted(&path("_c_b-lock-0000000005")));
    let relist = sent(&mut l);
    assert_eq!(relist[0].1, format!("list {DIR}"));
    l.handle_reply(
        T,
        relist[0].0,
        children(&[&ours(7), "_c_a-lock-0000000003"]),
    );
    let w2 = sent(&mut l);
    l.handle_reply(T, w2[0].0, Ok(Response::Empty));
    // A second registration on the old blocker fires late: it must not count.
    l.handle_watch(T, w[0].0, &deleted(&path("_c_b-lock-0000000005")));
    assert!(events(&mut l).is_empty(), "still blocked by _c_a");
    assert!(sent(&mut l).is_empty(), "no listing for an older blocker");
    l.handle_watch(T, w2[0].0, &deleted(&path("_c_a-lock-0000000003")));
    assert!(matches!(events(&mut l)[..], [LockEvent::Acquired { .. }]));
}

#[test]
fn a_waiter_on_a_closed_session_fails_with_closed_not_connection_loss() {
    // Issue 9, defect 8.
    let mut l = lock(LockKind::Exclusive);
    let _ = start(&mut l, None);
    l.handle_session(T, SessionChange::Closed);
    assert_eq!(
        events(&mut l),
        vec![LockEvent::Failed {
            error: Error::Closed
        }]
    );
    let _ = Duration::ZERO;
}

/// Found by the lock's property harness: our node's data watch fired (a revoker wrote
/// to it), the re-arming read was refused, and an operator deleted our node in that gap
/// (no watch of ours was on it, so no notification). When the last blocker then went,
/// the lock took its deletion for a handover and reported `Acquired` on a deleted node.
/// A blocker's deletion proves our node still queues only while the server holds our
/// own-node watch (a revocable waiter's); otherwise the lock reads its node first (the
/// turn read, after a sync: the refusal may have moved us to another server).
#[test]
fn a_blocker_gone_while_our_own_node_was_unwatched_is_checked_by_the_turn_read() {
    let (mut l, own, w) = revocable_behind_one();
    l.handle_reply(T, own[0].0, data(b""));
    l.handle_reply(T, w[0].0, data(b""));
    // Our watch fires; the re-arming read is refused; the retry waits for a backoff.
    l.handle_watch(T, own[0].0, &changed(&path(&ours(2))));
    let rearm = sent(&mut l);
    assert_eq!(rearm[0].1, format!("get! {}", path(&ours(2))));
    l.handle_reply(T, rearm[0].0, Err(Error::Overloaded));
    // (Our node is deleted now, unseen.) The blocker goes.
    l.handle_watch(T, w[0].0, &deleted(&path("_c_a-lock-0000000001")));
    assert!(events(&mut l).is_empty(), "not acquired on trust");
    assert!(sent(&mut l).is_empty(), "backing off");
    let at = l.poll_timeout().expect("the backoff");
    l.handle_timeout(at);
    let r = sent(&mut l);
    assert_eq!(
        r.iter().map(|(_, s)| s.clone()).collect::<Vec<_>>(),
        [
            format!("get! {}", path(&ours(2))),
            format!("sync {DIR}"),
            format!("get {}", path(&ours(2)))
        ],
        "the re-armed watch, then the turn read after a sync (no second watch on our \
         node: the read before it asks for one)"
    );
    for (op, _) in &r {
        let reply = if op == &r[1].0 {
            Ok(Response::Path(DIR.into()))
        } else {
            code(ErrorCode::NoNode)
        };
        l.handle_reply(T, *op, reply);
    }
    assert_eq!(
        events(&mut l),
        vec![LockEvent::Failed {
            error: Error::from(ErrorCode::NoNode)
        }]
    );
    assert!(l.is_done());
}

// ----- grant on release, turn read -----

const B6: &str = "_c_b-lock-0000000006";
const C7: &str = "_c_c-lock-0000000007";
const D9: &str = "_c_d-lock-0000000009";

/// The line of an exclusive holder's release that knows `successors` from a listing:
/// a grant to the first (carrying the rest), a notice to the second that the first
/// holds (carrying the rest after it), and the delete of `own`.
fn hand_on_line(successors: &[&str], own: &str) -> String {
    let mut ops = vec![grant_set(successors[0], &successors[1..])];
    if let Some(after) = successors.get(1) {
        ops.push(notice_set(after, successors[0], &successors[2..]));
    }
    ops.push(format!("delete {}", path(own)));
    format!("multi[{}]", ops.join(", "))
}

/// Releases `l` and returns the one request it sends, checking its line.
fn release_expecting(l: &mut Lock, line: &str) -> OpId {
    assert_eq!(l.release(T), Release::Pending);
    let r = sent(l);
    assert_eq!(
        r.iter().map(|(_, s)| s.clone()).collect::<Vec<_>>(),
        [line.to_string()]
    );
    r[0].0
}

#[test]
fn a_holder_hands_the_lock_to_its_successor_with_one_multi() {
    // The listing that made us holder, in no order; a kazoo node ends the run.
    let mut l = held_among(
        config(LockKind::Exclusive),
        &[D9, "config", B6, "k__lock__0000000011", C7],
    );
    assert_eq!(l.release(T), Release::Pending);
    let r: Vec<(OpId, Request)> = std::iter::from_fn(|| l.poll_request()).collect();
    assert_eq!(r.len(), 1, "one request: {r:?}");
    // The request itself, field by field.
    let Request::Multi(ops) = &r[0].1 else {
        panic!("not a multi: {:?}", r[0].1)
    };
    let [MultiOp::SetData(set), MultiOp::SetData(notice), MultiOp::Delete(del)] = &ops[..] else {
        panic!("not setData + setData + delete: {ops:?}")
    };
    assert_eq!(set.path, path(B6), "the nearest successor");
    assert_eq!(
        &set.data[..],
        format!("__GRANT__\n{C7}\n{D9}").as_bytes(),
        "grant, then the successors after it, nearest first"
    );
    assert_eq!(set.version, 0, "only a node never written is granted");
    assert_eq!(notice.path, path(C7), "the one after the successor");
    assert_eq!(
        &notice.data[..],
        format!("__NEXT__\n{B6}\n{D9}").as_bytes(),
        "a notice: who holds from this write on, then the successors after the receiver"
    );
    assert_eq!(notice.version, 0);
    assert_eq!(del.path, path(&ours(5)));
    assert_eq!(del.version, -1);
    assert!(events(&mut l).is_empty(), "not released before the answer");
    l.handle_reply(T, r[0].0, multi_ok());
    assert_eq!(events(&mut l), vec![LockEvent::Released]);
    assert!(sent(&mut l).is_empty(), "no delete after a grant");
    assert!(l.is_done());

    // The line format shows the same.
    let mut l = held_among(config(LockKind::Exclusive), &[B6, C7]);
    let op = release_expecting(&mut l, &hand_on_line(&[B6, C7], &ours(5)));
    l.handle_reply(T, op, multi_ok());
    assert_eq!(events(&mut l), vec![LockEvent::Released]);

    // With the own-node watch off too.
    let mut c = config(LockKind::Exclusive);
    c.watch_own_node = false;
    let mut l = held_among(c, &[B6]);
    let op = release_expecting(&mut l, &grant_line(B6, &[], &ours(5)));
    l.handle_reply(T, op, multi_ok());
    assert_eq!(events(&mut l), vec![LockEvent::Released]);
}

#[test]
fn a_grant_to_a_successor_gone_or_written_falls_back_to_a_plain_delete() {
    for c in [ErrorCode::NoNode, ErrorCode::BadVersion, ErrorCode::NoAuth] {
        let mut l = held_among(config(LockKind::Exclusive), &[B6, C7]);
        let op = release_expecting(&mut l, &hand_on_line(&[B6, C7], &ours(5)));
        l.handle_reply(T, op, multi_failed(0, c));
        assert!(events(&mut l).is_empty(), "{c:?}: nothing applied yet");
        let del = sent(&mut l);
        assert_eq!(
            del.iter().map(|(_, s)| s.clone()).collect::<Vec<_>>(),
            [format!("delete {}", path(&ours(5)))],
            "{c:?}"
        );
        l.handle_reply(T, del[0].0, Ok(Response::Empty));
        assert_eq!(events(&mut l), vec![LockEvent::Released], "{c:?}");
        assert!(sent(&mut l).is_empty());
        assert!(l.is_done());
    }
}

#[test]
fn a_grant_whose_reply_is_lost_is_sent_again_and_released_once() {
    let mut l = held_among(config(LockKind::Exclusive), &[B6, C7]);
    let line = hand_on_line(&[B6, C7], &ours(5));
    let op = release_expecting(&mut l, &line);
    // It landed (or not): the reply is lost with the connection.
    l.handle_reply(T, op, code(ErrorCode::ConnectionLoss));
    l.handle_session(T, SessionChange::Suspended);
    assert!(events(&mut l).is_empty(), "not released on a lost reply");
    assert!(sent(&mut l).is_empty(), "nothing while suspended");
    l.handle_session(
        T,
        SessionChange::Reconnected {
            session_id: SESSION,
        },
    );
    let again = sent(&mut l);
    assert_eq!(
        again.iter().map(|(_, s)| s.clone()).collect::<Vec<_>>(),
        [line],
        "the same multi again"
    );
    // It had landed: the successor's node was written meanwhile.
    l.handle_reply(T, again[0].0, multi_failed(0, ErrorCode::BadVersion));
    assert!(events(&mut l).is_empty());
    let del = sent(&mut l);
    assert_eq!(
        del.iter().map(|(_, s)| s.clone()).collect::<Vec<_>>(),
        [format!("delete {}", path(&ours(5)))]
    );
    l.handle_reply(T, del[0].0, code(ErrorCode::NoNode)); // gone with the first multi
    assert_eq!(events(&mut l), vec![LockEvent::Released]);
    assert!(sent(&mut l).is_empty());
    assert!(l.is_done());
    assert!(events(&mut l).is_empty(), "exactly one Released");
}

#[test]
fn a_grant_that_finds_our_own_node_gone_is_a_release() {
    let mut l = held_among(config(LockKind::Exclusive), &[B6]);
    let op = release_expecting(&mut l, &grant_line(B6, &[], &ours(5)));
    l.handle_reply(T, op, multi_failed(1, ErrorCode::NoNode));
    assert_eq!(events(&mut l), vec![LockEvent::Released]);
    assert!(sent(&mut l).is_empty(), "no plain delete: the node is gone");
    assert!(l.is_done());
}

/// A waiter with three blockers whose predecessor goes reads its node; a grant there
/// (written by the releasing holder with its deletion) means it holds, with no listing;
/// and it hands the lock on to the grant's tail in turn.
#[test]
fn a_granted_waiter_holds_without_listing_and_hands_on_to_the_tail() {
    let mut l = lock(LockKind::Exclusive);
    let (create, list) = start(&mut l, None);
    l.handle_reply(T, create, created(&ours(7), 70));
    let after = [
        "_c_e-lock-0000000008",
        "_c_f-lock-0000000010",
        "_c_g-lock-0000000012",
    ];
    let mut all = vec![
        ours(7),
        "_c_a-lock-0000000002".into(),
        "_c_b-lock-0000000004".into(),
        "_c_c-lock-0000000006".into(),
    ];
    all.extend(after.iter().map(|s| s.to_string()));
    let all: Vec<&str> = all.iter().map(String::as_str).collect();
    l.handle_reply(T, list, children(&all));
    let w = sent(&mut l);
    assert_eq!(w[0].1, await_line("_c_c-lock-0000000006", &ours(7), 70));
    l.handle_reply(T, w[0].0, Ok(Response::Empty));
    // _c_c releases, granting us: the grant lands in our node (its watch fires first),
    // then _c_c goes.
    l.handle_watch(T, w[0].0, &changed(&path(&ours(7))));
    let turn = sent(&mut l);
    assert_eq!(
        turn.iter().map(|(_, s)| s.clone()).collect::<Vec<_>>(),
        [format!("get! {}", path(&ours(7)))],
        "a read of our node (and its watch again), no listing"
    );
    l.handle_watch(T, w[0].0, &deleted(&path("_c_c-lock-0000000006")));
    assert!(events(&mut l).is_empty());
    assert!(sent(&mut l).is_empty(), "the read on its way decides");
    l.handle_reply(T, turn[0].0, grant(&after));
    assert_eq!(
        events(&mut l),
        vec![LockEvent::Acquired {
            fencing_token: 70,
            node: ours(7)
        }]
    );
    assert!(
        sent(&mut l).is_empty(),
        "no listing; that read armed the own-node watch"
    );
    assert!(l.is_held());
    assert!(l.held_by_grant());
    // The grant's writer told _c_e that we hold (a notice): we tell _c_f that _c_e does.
    let op = release_expecting(&mut l, &told_line(&after, &ours(7)));
    l.handle_reply(T, op, multi_ok());
    assert_eq!(events(&mut l), vec![LockEvent::Released]);
}

#[test]
fn a_turn_read_without_a_grant_lists_again_or_holds_if_its_blocker_was_the_last() {
    // More than one blocker: list again.
    let mut l = lock(LockKind::Exclusive);
    let (create, list) = start(&mut l, None);
    l.handle_reply(T, create, created(&ours(7), 70));
    l.handle_reply(
        T,
        list,
        children(&[&ours(7), "_c_a-lock-0000000003", "_c_b-lock-0000000005"]),
    );
    let w = sent(&mut l);
    l.handle_reply(T, w[0].0, data(b""));
    l.handle_watch(T, w[0].0, &deleted(&path("_c_b-lock-0000000005")));
    let turn = sent(&mut l);
    // No watch: the setWatches2 that watched the blocker left one on our node.
    assert_eq!(turn[0].1, format!("get {}", path(&ours(7))));
    l.handle_reply(T, turn[0].0, data(b""));
    assert!(events(&mut l).is_empty(), "_c_a may still be there");
    assert_eq!(sent_lines(&mut l), [format!("list {DIR}")]);

    // The only blocker: held, no listing.
    let mut l = lock(LockKind::Exclusive);
    let (create, list) = start(&mut l, None);
    l.handle_reply(T, create, created(&ours(7), 70));
    l.handle_reply(T, list, children(&[&ours(7), "_c_b-lock-0000000005"]));
    let w = sent(&mut l);
    l.handle_reply(T, w[0].0, data(b""));
    l.handle_watch(T, w[0].0, &deleted(&path("_c_b-lock-0000000005")));
    let turn = sent(&mut l);
    assert_eq!(
        turn.iter().map(|(_, s)| s.clone()).collect::<Vec<_>>(),
        [format!("get {}", path(&ours(7)))]
    );
    assert!(events(&mut l).is_empty(), "not before our node is seen");
    l.handle_reply(T, turn[0].0, data(b""));
    assert!(matches!(
        events(&mut l)[..],
        [LockEvent::Acquired {
            fencing_token: 70,
            ..
        }]
    ));
    assert!(sent(&mut l).is_empty(), "no listing, the watch is armed");
    assert!(!l.held_by_grant(), "held by a blocker's plain deletion");
    // Its listing showed nobody after it: a plain delete.
    l.release(T);
    assert_eq!(sent_lines(&mut l), [format!("delete {}", path(&ours(7)))]);

    // Without the own-node watch: the turn read sets none; the only blocker's deletion
    // hands over with no read at all.
    let mut c = config(LockKind::Exclusive);
    c.watch_own_node = false;
    let mut l = lock_with(c);
    let (create, list) = start(&mut l, None);
    l.handle_reply(T, create, created(&ours(7), 70));
    l.handle_reply(
        T,
        list,
        children(&[&ours(7), "_c_a-lock-0000000003", "_c_b-lock-0000000005"]),
    );
    let w = sent(&mut l);
    l.handle_reply(T, w[0].0, data(b""));
    l.handle_watch(T, w[0].0, &deleted(&path("_c_b-lock-0000000005")));
    let turn = sent(&mut l);
    assert_eq!(
        turn.iter().map(|(_, s)| s.clone()).collect::<Vec<_>>(),
        [format!("get {}", path(&ours(7)))]
    );
    l.handle_reply(T, turn[0].0, data(b""));
    let relist = sent(&mut l);
    assert_eq!(relist[0].1, format!("list {DIR}"));
    l.handle_reply(
        T,
        relist[0].0,
        children(&[&ours(7), "_c_a-lock-0000000003"]),
    );
    let w = sent(&mut l);
    l.handle_reply(T, w[0].0, data(b""));
    l.handle_watch(T, w[0].0, &deleted(&path("_c_a-lock-0000000003")));
    assert!(matches!(events(&mut l)[..], [LockEvent::Acquired { .. }]));
    assert!(sent(&mut l).is_empty(), "no read at all");
    assert!(!l.held_by_grant());
}

/// Only a grant written over the fresh node is one: revocation data is not, neither is
/// `__GRANT__` at version 0 (the data the node was created with, the user's), nor data
/// that merely starts with `__GRANT__`.
#[test]
fn revocation_data_and_unwritten_grant_data_are_no_grant() {
    // A revocable waiter: its own-node watch fired (a revoker wrote), and the blocker
    // went before the re-armed watch answered.
    for revoke in [&b"__REVOKE__"[..], b"unlock"] {
        let mut c = config(LockKind::Exclusive);
        c.revocable = true;
        let mut l = lock_with(c);
        let (create, list) = start(&mut l, None);
        l.handle_reply(T, create, created(&ours(7), 70));
        let own = sent(&mut l);
        l.handle_reply(
            T,
            list,
            children(&[&ours(7), "_c_a-lock-0000000003", "_c_b-lock-0000000005"]),
        );
        let w = sent(&mut l);
        l.handle_reply(T, own[0].0, data(b""));
        l.handle_reply(T, w[0].0, data(b""));
        l.handle_watch(T, own[0].0, &changed(&path(&ours(7))));
        let rearm = sent(&mut l);
        l.handle_watch(T, w[0].0, &deleted(&path("_c_b-lock-0000000005")));
        assert_eq!(
            rearm
                .iter()
                .chain(&sent(&mut l))
                .map(|(_, s)| s.clone())
                .collect::<Vec<_>>(),
            [format!("get! {}", path(&ours(7)))],
            "the re-armed watch, whose read decides (no turn read of its own)"
        );
        l.handle_reply(T, rearm[0].0, data_at(revoke, 1));
        assert_eq!(
            events(&mut l),
            vec![LockEvent::RevocationRequested],
            "a revocation, not a grant"
        );
        assert_eq!(sent_lines(&mut l), [format!("list {DIR}")]);
        assert!(!l.is_held());
        assert!(!l.held_by_grant());
    }

    // Not revocable: revocation data in our node says nothing; grant data never
    // written (version 0) is the user's; nor is a notice at version 0, or one that
    // names a contender other than our blocker.
    for (d, version) in [
        (&b"__REVOKE__"[..], 1),
        (b"unlock", 1),
        (b"__GRANT__", 0),
        (b"__GRANT__\n_c_z-lock-0000000009", 0),
        (b"__GRANT__X", 1),
        (b"__NEXT__\n_c_b-lock-0000000005", 0),
        (b"__NEXT__\n_c_a-lock-0000000003", 1),
        (b"__NEXT__\n_c_z-lock-0000000009", 1),
        (b"__NEXT__X\n_c_b-lock-0000000005", 1),
    ] {
        let (mut l, turn) = at_its_turn(config(LockKind::Exclusive), None);
        l.handle_reply(T, turn, data_at(d, version));
        assert!(events(&mut l).is_empty(), "{d:?} v{version}: no event");
        assert_eq!(
            sent_lines(&mut l),
            [format!("list {DIR}")],
            "{d:?} v{version}: not a grant"
        );
    }
}

#[test]
fn readers_never_grant_writers_grant_to_readers_and_a_granted_reader_holds() {
    let me_r = |n: u32| format!("_c_{ID}-__READ__{n:010}");
    let me_w = |n: u32| format!("_c_{ID}-__WRIT__{n:010}");
    let (r6, r7, w8) = (
        "_c_b-__READ__0000000006",
        "_c_c-__READ__0000000007",
        "_c_d-__WRIT__0000000008",
    );

    // A reader holding, with readers and a writer behind it: a plain delete.
    let mut l = lock(LockKind::Read);
    let (create, list) = start(&mut l, None);
    l.handle_reply(T, create, created(&me_r(5), 50));
    l.handle_reply(T, list, children(&[&me_r(5), r6, r7, w8]));
    assert!(matches!(events(&mut l)[..], [LockEvent::Acquired { .. }]));
    for (op, _) in sent(&mut l) {
        l.handle_reply(T, op, data(b""));
    }
    l.release(T);
    assert_eq!(
        sent_lines(&mut l),
        [format!("delete {}", path(&me_r(5)))],
        "a reader cannot know it is the last one: no grant"
    );

    // A writer holding grants to the reader after it.
    let mut l = lock(LockKind::Write);
    let (create, list) = start(&mut l, None);
    l.handle_reply(T, create, created(&me_w(5), 50));
    l.handle_reply(T, list, children(&[&me_w(5), w8, r7, r6]));
    assert!(matches!(events(&mut l)[..], [LockEvent::Acquired { .. }]));
    for (op, _) in sent(&mut l) {
        l.handle_reply(T, op, data(b""));
    }
    let op = release_expecting(&mut l, &grant_line(r6, &[r7, w8], &me_w(5)));
    l.handle_reply(T, op, multi_ok());
    assert_eq!(events(&mut l), vec![LockEvent::Released]);

    // A reader behind two writers, granted by the nearer: it holds with no listing,
    // and releases plainly all the same (the tail it was given is not its to use).
    let mut l = lock(LockKind::Read);
    let (create, list) = start(&mut l, None);
    l.handle_reply(T, create, created(&me_r(6), 60));
    l.handle_reply(
        T,
        list,
        children(&[
            "_c_a-__WRIT__0000000003",
            "_c_w-__WRIT__0000000005",
            &me_r(6),
            r7,
            w8,
        ]),
    );
    let w = sent(&mut l);
    assert_eq!(w[0].1, format!("list! {}", path("_c_w-__WRIT__0000000005")));
    l.handle_reply(T, w[0].0, data(b""));
    l.handle_watch(T, w[0].0, &deleted(&path("_c_w-__WRIT__0000000005")));
    let turn = sent(&mut l);
    assert_eq!(
        turn.iter().map(|(_, s)| s.clone()).collect::<Vec<_>>(),
        [format!("get! {}", path(&me_r(6)))]
    );
    l.handle_reply(T, turn[0].0, grant(&[r7, w8]));
    assert_eq!(
        events(&mut l),
        vec![LockEvent::Acquired {
            fencing_token: 60,
            node: me_r(6)
        }]
    );
    assert!(sent(&mut l).is_empty(), "no listing");
    l.release(T);
    assert_eq!(sent_lines(&mut l), [format!("delete {}", path(&me_r(6)))]);
}

#[test]
fn a_refused_grant_is_retried_after_the_backoff_and_released_only_when_it_answered() {
    for refusal in refusals() {
        let mut l = held_among(config(LockKind::Exclusive), &[B6, C7]);
        let line = hand_on_line(&[B6, C7], &ours(5));
        let op = release_expecting(&mut l, &line);
        l.handle_reply(T, op, Err(refusal.clone()));
        assert!(
            events(&mut l).is_empty(),
            "{refusal:?}: a refusal is not a release"
        );
        assert!(sent(&mut l).is_empty(), "{refusal:?}: backing off");
        let at = l.poll_timeout().expect("a retry is scheduled");
        assert!(at > T && at <= ms(10), "{at:?}");
        l.handle_timeout(at);
        let again = sent(&mut l);
        assert_eq!(
            again.iter().map(|(_, s)| s.clone()).collect::<Vec<_>>(),
            [line],
            "{refusal:?}: the grant again, not a plain delete"
        );
        l.handle_reply(at, again[0].0, multi_ok());
        assert_eq!(events(&mut l), vec![LockEvent::Released]);
        assert!(l.is_done());
    }
}

/// A node of a recipe that is never granted (a leader latch, a semaphore lease) reads
/// no grant: writing one into it only overwrites that recipe's data (Curator's
/// `LeaderLatch` keeps its participant id there, a semaphore lease its lease data) and
/// costs a write. Its contender wakes by our deletion anyway, so a plain delete is the
/// release. (The old version of this file's uncontended test listed such a latch node
/// behind the holder.)
#[test]
fn a_holder_never_grants_to_a_latch_or_lease_node() {
    for other in ["_c_x-latch-0000000009", "_c_x-lease-0000000009"] {
        let mut l = held_among(config(LockKind::Exclusive), &[other]);
        l.release(T);
        assert_eq!(
            sent_lines(&mut l),
            [format!("delete {}", path(&ours(5)))],
            "{other}: not a lock contender"
        );
        // Behind a lock contender, the run of successors ends at it.
        let mut l = held_among(config(LockKind::Exclusive), &[B6, other]);
        l.release(T);
        assert_eq!(
            sent_lines(&mut l),
            [grant_line(B6, &[], &ours(5))],
            "{other}: not in the tail"
        );
    }
}

/// A revocable waiter keeps its own-node watch: the grant fires it before the
/// granter's deletion (one multi, its ops in order), and the re-arming read finds it.
/// The turn read the deletion asks for then finds it too: one `Acquired`, no listing.
#[test]
fn a_revocable_waiter_hears_its_grant_through_its_own_node_watch() {
    let mut c = config(LockKind::Exclusive);
    c.revocable = true;
    let mut l = lock_with(c);
    let (create, list) = start(&mut l, None);
    l.handle_reply(T, create, created(&ours(7), 70));
    let own = sent(&mut l);
    l.handle_reply(
        T,
        list,
        children(&[&ours(7), "_c_a-lock-0000000003", "_c_b-lock-0000000005"]),
    );
    let w = sent(&mut l);
    l.handle_reply(T, own[0].0, data(b""));
    l.handle_reply(T, w[0].0, data(b""));
    // _c_b releases: grant to us, then its deletion.
    l.handle_watch(T, own[0].0, &changed(&path(&ours(7))));
    l.handle_watch(T, w[0].0, &deleted(&path("_c_b-lock-0000000005")));
    let r = sent(&mut l);
    assert_eq!(
        r.iter().map(|(_, s)| s.clone()).collect::<Vec<_>>(),
        [format!("get! {}", path(&ours(7)))],
        "the re-armed watch, whose read decides; no turn read, no listing"
    );
    l.handle_reply(T, r[0].0, grant(&[D9]));
    assert_eq!(
        events(&mut l),
        vec![LockEvent::Acquired {
            fencing_token: 70,
            node: ours(7)
        }]
    );
    assert!(sent(&mut l).is_empty());
    let op = release_expecting(&mut l, &told_line(&[D9], &ours(7)));
    l.handle_reply(T, op, multi_ok());
    assert_eq!(events(&mut l), vec![LockEvent::Released]);
}

/// A turn read lost with the connection is sent again after the reconnect, behind a
/// sync (the new server may lag behind the grant); one that a failed sync preceded
/// counts for nothing, granted or not.
#[test]
fn a_lost_turn_read_is_sent_again_after_a_sync() {
    let mut l = lock(LockKind::Exclusive);
    let (create, list) = start(&mut l, None);
    l.handle_reply(T, create, created(&ours(7), 70));
    l.handle_reply(
        T,
        list,
        children(&[&ours(7), "_c_a-lock-0000000003", "_c_b-lock-0000000005"]),
    );
    let w = sent(&mut l);
    l.handle_reply(T, w[0].0, data(b""));
    l.handle_watch(T, w[0].0, &deleted(&path("_c_b-lock-0000000005")));
    let turn = sent(&mut l);
    l.handle_reply(T, turn[0].0, code(ErrorCode::ConnectionLoss));
    l.handle_session(T, SessionChange::Suspended);
    assert!(sent(&mut l).is_empty());
    assert!(events(&mut l).is_empty());
    l.handle_session(
        T,
        SessionChange::Reconnected {
            session_id: SESSION,
        },
    );
    // (No watch on the turn reads: the setWatches2 that watched the blocker left one on
    // our node, and the session re-arms it on the reconnect.)
    let r = sent(&mut l);
    assert_eq!(
        r.iter().map(|(_, s)| s.clone()).collect::<Vec<_>>(),
        [format!("sync {DIR}"), format!("get {}", path(&ours(7)))]
    );
    // The sync fails: whatever the read says is not trusted; both go again.
    l.handle_reply(T, r[0].0, Err(Error::Server(ErrorCode::Throttled)));
    l.handle_reply(T, r[1].0, grant(&[]));
    assert!(events(&mut l).is_empty(), "not on a possibly stale read");
    l.handle_timeout(l.poll_timeout().expect("a retry"));
    let r = sent(&mut l);
    assert_eq!(
        r.iter().map(|(_, s)| s.clone()).collect::<Vec<_>>(),
        [format!("sync {DIR}"), format!("get {}", path(&ours(7)))]
    );
    l.handle_reply(T, r[0].0, Ok(Response::Path(DIR.into())));
    l.handle_reply(T, r[1].0, grant(&[]));
    assert!(matches!(
        events(&mut l)[..],
        [LockEvent::Acquired {
            fencing_token: 70,
            ..
        }]
    ));
    assert!(sent(&mut l).is_empty(), "no listing");
}

/// The waiter behind a grantee watches the grantee: the grant fires that watch as a data
/// change. It re-arms the blocker watch, nothing more; the grantee's deletion later is
/// its turn.
#[test]
fn a_grant_to_our_blocker_does_not_wake_us() {
    let mut l = lock(LockKind::Exclusive);
    let (create, list) = start(&mut l, None);
    l.handle_reply(T, create, created(&ours(7), 70));
    l.handle_reply(
        T,
        list,
        children(&[&ours(7), "_c_a-lock-0000000003", "_c_b-lock-0000000005"]),
    );
    let w = sent(&mut l);
    assert_eq!(
        w.iter().map(|(_, s)| s.clone()).collect::<Vec<_>>(),
        [await_line("_c_b-lock-0000000005", &ours(7), 70)],
        "a children watch on the blocker: its data may change (a grant), it wakes us only by going"
    );
    l.handle_reply(T, w[0].0, Ok(Response::Empty));
    // _c_a releases, granting _c_b: a data watch would fire here; a children watch does
    // not, and even a stray data event for our blocker sends nothing.
    l.handle_watch(T, w[0].0, &changed(&path("_c_b-lock-0000000005")));
    assert!(sent(&mut l).is_empty() && events(&mut l).is_empty());
    // _c_b releases in turn, granting us: our node's watch fires, then _c_b goes.
    l.handle_watch(T, w[0].0, &changed(&path(&ours(7))));
    l.handle_watch(T, w[0].0, &deleted(&path("_c_b-lock-0000000005")));
    let turn = sent(&mut l);
    assert_eq!(
        turn.iter().map(|(_, s)| s.clone()).collect::<Vec<_>>(),
        [format!("get! {}", path(&ours(7)))]
    );
    l.handle_reply(T, turn[0].0, grant(&[]));
    assert!(matches!(events(&mut l)[..], [LockEvent::Acquired { .. }]));
}

/// A waiter of three blockers whose nearest (`_c_b-lock-0000000005`) just went: its
/// turn read is out. Returns the lock and the turn read's op.
fn at_its_turn(c: LockConfig, deadline: Option<Instant>) -> (Lock, OpId) {
    let mut l = lock_with(c);
    let (create, list) = start(&mut l, deadline);
    l.handle_reply(T, create, created(&ours(7), 70));
    l.handle_reply(
        T,
        list,
        children(&[&ours(7), "_c_a-lock-0000000003", "_c_b-lock-0000000005"]),
    );
    let w = sent(&mut l);
    match &w[0].1 {
        line if line.starts_with("setWatches2 ") => {
            // Our node's data changes (a holder's release wrote into it), and our
            // blocker goes: the read of our node decides.
            l.handle_reply(T, w[0].0, Ok(Response::Empty));
            l.handle_watch(T, w[0].0, &changed(&path(&ours(7))));
            l.handle_watch(T, w[0].0, &deleted(&path("_c_b-lock-0000000005")));
        }
        _ => {
            l.handle_reply(T, w[0].0, data(b""));
            l.handle_watch(T, w[0].0, &deleted(&path("_c_b-lock-0000000005")));
        }
    }
    let turn = sent(&mut l);
    assert_eq!(
        turn.iter().map(|(_, s)| s.clone()).collect::<Vec<_>>(),
        [format!("get! {}", path(&ours(7)))]
    );
    (l, turn[0].0)
}

/// The line of the release of an exclusive holder handed the lock by a grant (or a
/// notice) carrying `successors`: the same write told the first of them that we held,
/// so it gets no grant; the second gets a notice that the first holds.
fn told_line(successors: &[&str], own: &str) -> String {
    match successors {
        [first, after, rest @ ..] => format!(
            "multi[{}, delete {}]",
            notice_set(after, first, rest),
            path(own)
        ),
        _ => format!("delete {}", path(own)),
    }
}

/// A grant's tail is kept only while it names `_c_` contenders after ours, in lock
/// order: the first name that is not ends it.
#[test]
fn a_grant_tail_is_kept_only_while_it_names_later_contenders_in_order() {
    let y8 = "_c_y-lock-0000000008";
    let z9 = "_c_z-lock-0000000009";
    for (tail, kept) in [
        (vec![y8, z9], vec![y8, z9]),
        (vec!["_c_z-lock-0000000003", y8], vec![]), // before ours
        (vec![z9, y8], vec![z9]),                   // out of order
        (vec![y8, y8], vec![y8]),                   // twice
        (vec!["k__lock__0000000008", z9], vec![]),  // kazoo's: reads no grant
        (vec![y8, "", z9], vec![y8]),               // an empty line
    ] {
        let (mut l, turn) = at_its_turn(config(LockKind::Exclusive), None);
        l.handle_reply(T, turn, grant(&tail));
        assert!(
            matches!(events(&mut l)[..], [LockEvent::Acquired { .. }]),
            "{tail:?}: a grant all the same"
        );
        assert!(l.held_by_grant(), "{tail:?}");
        l.release(T);
        let want = told_line(&kept, &ours(7));
        assert_eq!(sent_lines(&mut l), [want], "{tail:?}");
    }
}

#[test]
fn a_release_while_suspended_grants_after_the_reconnect() {
    let mut l = held_among(config(LockKind::Exclusive), &[B6]);
    l.handle_session(T, SessionChange::Suspended);
    assert_eq!(events(&mut l), vec![LockEvent::Suspended]);
    assert_eq!(l.release(T), Release::Pending);
    assert!(sent(&mut l).is_empty(), "nothing while suspended");
    l.handle_session(
        T,
        SessionChange::Reconnected {
            session_id: SESSION,
        },
    );
    let r = sent(&mut l);
    assert_eq!(
        r.iter().map(|(_, s)| s.clone()).collect::<Vec<_>>(),
        [grant_line(B6, &[], &ours(5))]
    );
    assert!(events(&mut l).is_empty());
    l.handle_reply(T, r[0].0, multi_ok());
    assert_eq!(events(&mut l), vec![LockEvent::Released]);
    assert!(l.is_done());
}

/// A waiter that gave up (cancel, deadline) while its turn read was out does not take
/// the grant that read finds: it deletes its node plainly (its successor wakes by that).
#[test]
fn a_grant_found_after_a_cancel_or_a_deadline_is_not_taken() {
    let (mut l, turn) = at_its_turn(config(LockKind::Exclusive), None);
    assert_eq!(l.cancel(T), Release::Pending);
    let del = sent(&mut l);
    assert_eq!(
        del.iter().map(|(_, s)| s.clone()).collect::<Vec<_>>(),
        [format!("delete {}", path(&ours(7)))]
    );
    l.handle_reply(T, turn, grant(&[D9]));
    assert!(events(&mut l).is_empty(), "no Acquired after cancel");
    assert!(sent(&mut l).is_empty());
    l.handle_reply(T, del[0].0, Ok(Response::Empty));
    assert_eq!(events(&mut l), vec![LockEvent::Cancelled]);
    assert!(l.is_done());

    let (mut l, turn) = at_its_turn(config(LockKind::Exclusive), Some(ms(100)));
    l.handle_timeout(ms(100));
    assert_eq!(events(&mut l), vec![LockEvent::NotAcquired]);
    let del = sent(&mut l);
    assert_eq!(
        del.iter().map(|(_, s)| s.clone()).collect::<Vec<_>>(),
        [format!("delete {}", path(&ours(7)))]
    );
    l.handle_reply(T, turn, grant(&[D9]));
    assert!(events(&mut l).is_empty(), "NotAcquired was the final word");
    l.handle_reply(T, del[0].0, Ok(Response::Empty));
    assert!(events(&mut l).is_empty());
    assert!(l.is_done());
}

/// Callers that joined a re-entrant attempt while it waited all hold once it is granted;
/// the last release hands on.
#[test]
fn re_entrant_joins_hold_when_granted_and_the_last_release_hands_on() {
    let mut c = config(LockKind::Exclusive);
    c.reentrant = true;
    let (mut l, turn) = at_its_turn(c, None);
    assert_eq!(l.acquire(T, None), Acquire::Pending, "joins the wait");
    l.handle_reply(T, turn, grant(&[D9]));
    assert!(matches!(events(&mut l)[..], [LockEvent::Acquired { .. }]));
    assert_eq!(l.depth(), 2);
    assert_eq!(l.release(T), Release::StillHeld { depth: 1 });
    assert!(sent(&mut l).is_empty());
    // D9 heard that we held from the grant's writer (a notice): a plain delete hands on.
    let op = release_expecting(&mut l, &told_line(&[D9], &ours(7)));
    l.handle_reply(T, op, multi_ok());
    assert_eq!(events(&mut l), vec![LockEvent::Released]);
}

/// A waiter whose listing shows one blocker left keeps the contenders after it from that
/// listing: when that blocker goes (no grant for us) it holds and hands on with no
/// listing of its own. A listing that shows more blockers keeps none (a later listing
/// or a grant tells).
#[test]
fn a_waiter_behind_one_blocker_keeps_its_successors_from_that_listing() {
    // The turn read finds no grant: held, and the listing's successors are handed on.
    let mut l = lock(LockKind::Exclusive);
    let (create, list) = start(&mut l, None);
    l.handle_reply(T, create, created(&ours(7), 70));
    l.handle_reply(T, list, children(&[&ours(7), "_c_b-lock-0000000005", D9]));
    let w = sent(&mut l);
    l.handle_reply(T, w[0].0, Ok(Response::Empty));
    l.handle_watch(T, w[0].0, &deleted(&path("_c_b-lock-0000000005")));
    assert!(matches!(events(&mut l)[..], [LockEvent::Acquired { .. }]));
    assert!(sent(&mut l).is_empty(), "no read: our node's watch is live");
    assert!(!l.held_by_grant());
    let op = release_expecting(&mut l, &grant_line(D9, &[], &ours(7)));
    l.handle_reply(T, op, multi_ok());
    assert_eq!(events(&mut l), vec![LockEvent::Released]);

    // Without the own-node watch: held on the deletion with no read at all, same.
    let mut c = config(LockKind::Exclusive);
    c.watch_own_node = false;
    let mut l = lock_with(c);
    let (create, list) = start(&mut l, None);
    l.handle_reply(T, create, created(&ours(7), 70));
    l.handle_reply(T, list, children(&[&ours(7), "_c_b-lock-0000000005", D9]));
    let w = sent(&mut l);
    l.handle_reply(T, w[0].0, Ok(Response::Empty));
    l.handle_watch(T, w[0].0, &deleted(&path("_c_b-lock-0000000005")));
    assert!(matches!(events(&mut l)[..], [LockEvent::Acquired { .. }]));
    assert!(sent(&mut l).is_empty());
    release_expecting(&mut l, &grant_line(D9, &[], &ours(7)));

    // Two blockers: the relisting that shows one left is the one that counts.
    let mut l = lock(LockKind::Exclusive);
    let (create, list) = start(&mut l, None);
    l.handle_reply(T, create, created(&ours(7), 70));
    l.handle_reply(
        T,
        list,
        children(&[
            &ours(7),
            "_c_a-lock-0000000003",
            "_c_b-lock-0000000005",
            "_c_c-lock-0000000008",
        ]),
    );
    let w = sent(&mut l);
    l.handle_reply(T, w[0].0, Ok(Response::Empty));
    l.handle_watch(T, w[0].0, &deleted(&path("_c_b-lock-0000000005")));
    let relist = sent(&mut l);
    assert_eq!(relist[0].1, format!("list {DIR}"));
    // _c_c went meanwhile, _c_d came.
    l.handle_reply(
        T,
        relist[0].0,
        children(&[&ours(7), "_c_a-lock-0000000003", D9]),
    );
    let w = sent(&mut l);
    l.handle_reply(T, w[0].0, Ok(Response::Empty));
    l.handle_watch(T, w[0].0, &deleted(&path("_c_a-lock-0000000003")));
    assert!(matches!(events(&mut l)[..], [LockEvent::Acquired { .. }]));
    release_expecting(&mut l, &grant_line(D9, &[], &ours(7)));
}

#[test]
fn an_empty_acl_creates_with_the_open_acl_and_a_given_one_is_used_as_given() {
    let create_acl = |l: &mut Lock| {
        l.acquire(T, None);
        std::iter::from_fn(|| l.poll_request())
            .find_map(|(_, r)| match r {
                Request::Create2(c) => Some(c.acl),
                _ => None,
            })
            .unwrap()
    };
    let mut l = lock(LockKind::Exclusive);
    assert!(
        l.config().acl.is_empty(),
        "the default keeps no copy of the open ACL"
    );
    assert_eq!(create_acl(&mut l), Acl::open_unsafe());
    let mut c = config(LockKind::Exclusive);
    c.acl = Acl::creator_all();
    let mut l = lock_with(c);
    assert_eq!(create_acl(&mut l), Acl::creator_all());
}

/// A waiter knows its blocker by the op that watches it, not by its name: a watch sent
/// again on the same blocker (after a lost reply) is a new op, and only it counts; the
/// blocker's deletion heard through the older one is not taken for it, and the newer
/// watch's own answer (`NoNode`) moves the waiter on.
#[test]
fn a_blocker_counts_through_the_watch_the_waiter_keeps_on_it_now() {
    let mut l = lock(LockKind::Exclusive);
    let (create, list) = start(&mut l, None);
    l.handle_reply(T, create, created(&ours(7), 70));
    l.handle_reply(T, list, children(&[&ours(7), "_c_b-lock-0000000005"]));
    let w1 = sent(&mut l);
    assert_eq!(w1[0].1, await_line("_c_b-lock-0000000005", &ours(7), 70));
    // Its reply is lost (the server may have set the watch all the same).
    l.handle_reply(T, w1[0].0, Err(Error::ConnectionLoss));
    reconnect(&mut l);
    let relist = sent(&mut l);
    let list = relist
        .iter()
        .find(|(_, s)| s.starts_with("list"))
        .unwrap()
        .0;
    for (op, s) in &relist {
        if s.starts_with("sync") {
            l.handle_reply(T, *op, Ok(Response::Path(DIR.into())));
        }
    }
    l.handle_reply(T, list, children(&[&ours(7), "_c_b-lock-0000000005"]));
    let w2 = sent(&mut l);
    assert_eq!(w2[0].1, await_line("_c_b-lock-0000000005", &ours(7), 70));
    assert_ne!(w1[0].0, w2[0].0);
    l.handle_reply(T, w2[0].0, Ok(Response::Empty));
    // The older watch fires: not the one the waiter keeps.
    l.handle_watch(T, w1[0].0, &deleted(&path("_c_b-lock-0000000005")));
    assert!(sent(&mut l).is_empty() && events(&mut l).is_empty());
    // The newer one fires: the blocker was the only one, so we hold (our own node's
    // watch, armed with it, is live: no read).
    l.handle_watch(T, w2[0].0, &deleted(&path("_c_b-lock-0000000005")));
    assert!(sent(&mut l).is_empty());
    assert!(matches!(
        events(&mut l)[..],
        [LockEvent::Acquired {
            fencing_token: 70,
            ..
        }]
    ));
}

/// An exclusive waiter hears through its own node's watch (armed with its blocker's
/// deletion watch, in one request) the notice a holder's release writes into it: "your
/// blocker holds from this write on". It reads the notice while its blocker holds, and
/// the blocker's deletion alone then hands it the lock — no read after it, no listing.
/// The notice's names after ours are our successors. With the own-node watch or
/// without: the same requests (without it, the read does not watch again).
#[test]
fn a_notice_in_our_node_makes_the_blockers_deletion_our_turn() {
    let b5 = "_c_b-lock-0000000005";
    let c9 = "_c_c-lock-0000000009";
    let d11 = "_c_d-lock-0000000011";
    for own_watch in [true, false] {
        let mut c = config(LockKind::Exclusive);
        c.watch_own_node = own_watch;
        let mut l = lock_with(c);
        let (create, list) = start(&mut l, None);
        l.handle_reply(T, create, created(&ours(7), 70));
        l.handle_reply(T, list, children(&[&ours(7), "_c_a-lock-0000000003", b5]));
        let w = sent(&mut l);
        assert_eq!(
            w.iter().map(|(_, s)| s.clone()).collect::<Vec<_>>(),
            [await_line(b5, &ours(7), 70)],
            "the predecessor only (no herd) and our own node, one request"
        );
        l.handle_reply(T, w[0].0, Ok(Response::Empty));
        assert!(sent(&mut l).is_empty() && events(&mut l).is_empty());
        // _c_a releases: it grants _c_b and tells us that _c_b holds.
        l.handle_watch(T, w[0].0, &changed(&path(&ours(7))));
        let read = sent(&mut l);
        let verb = if own_watch { "get!" } else { "get" };
        assert_eq!(
            read.iter().map(|(_, s)| s.clone()).collect::<Vec<_>>(),
            [format!("{verb} {}", path(&ours(7)))]
        );
        l.handle_reply(T, read[0].0, notice(&[b5, c9, d11]));
        assert!(sent(&mut l).is_empty() && events(&mut l).is_empty());
        // _c_b releases (with a notice to _c_c that we hold): its deletion is our turn.
        l.handle_watch(T, w[0].0, &deleted(&path(b5)));
        assert_eq!(
            events(&mut l),
            vec![LockEvent::Acquired {
                fencing_token: 70,
                node: ours(7)
            }]
        );
        assert!(sent(&mut l).is_empty(), "no read after it, no listing");
        assert!(l.held_by_grant(), "handed on by the holder");
        l.release(T);
        assert_eq!(sent_lines(&mut l), [told_line(&[c9, d11], &ours(7))]);
    }

    // The blocker goes while the read of the notice is on its way: the read decides.
    let (mut l, read) = at_its_turn(config(LockKind::Exclusive), None);
    assert!(events(&mut l).is_empty());
    l.handle_reply(T, read, notice(&[b5]));
    assert!(matches!(events(&mut l)[..], [LockEvent::Acquired { .. }]));
    assert!(sent(&mut l).is_empty());
}

/// The read of our node that is to decide (our blocker went while it was on its way)
/// is refused: after the backoff the turn read goes instead, behind a sync (a refusal
/// may come with another server), and a notice naming the blocker that went still
/// counts.
#[test]
fn a_refused_read_of_a_notice_becomes_the_turn_read() {
    let b5 = "_c_b-lock-0000000005";
    for refusal in refusals() {
        let (mut l, read) = at_its_turn(config(LockKind::Exclusive), None);
        l.handle_reply(T, read, Err(refusal.clone()));
        assert!(
            events(&mut l).is_empty(),
            "{refusal:?}: not acquired on trust"
        );
        assert!(sent(&mut l).is_empty(), "{refusal:?}: backing off");
        let at = l.poll_timeout().expect("a retry is scheduled");
        l.handle_timeout(at);
        let turn = sent(&mut l);
        assert_eq!(
            turn.iter().map(|(_, s)| s.clone()).collect::<Vec<_>>(),
            [format!("sync {DIR}"), format!("get! {}", path(&ours(7)))],
            "{refusal:?}"
        );
        l.handle_reply(at, turn[0].0, Ok(Response::Path(DIR.into())));
        l.handle_reply(at, turn[1].0, notice(&[b5]));
        assert!(
            matches!(events(&mut l)[..], [LockEvent::Acquired { .. }]),
            "{refusal:?}"
        );
        assert!(l.held_by_grant());
    }
}

fn writer(n: &str) -> String {
    format!("_c_{ID}-__WRIT__{n}")
}

/// Without the own-node watch, a write-lock waiter watches its blocker's data: the
/// grant written into the blocker wakes it while the blocker holds (it reads the grant
/// then, off the handoff), and the blocker's deletion alone hands it the lock — no turn
/// read. The grant's names after ours are our successors.
#[test]
fn without_the_own_node_watch_a_granted_blocker_hands_over_on_its_deletion_alone() {
    let mut c = config(LockKind::Write);
    c.watch_own_node = false;
    let mut l = lock_with(c);
    let me = writer("0000000007");
    let (create, list) = start(&mut l, None);
    l.handle_reply(T, create, created(&me, 70));
    let b5 = "_c_b-__WRIT__0000000005";
    let c9 = "_c_c-__WRIT__0000000009";
    l.handle_reply(T, list, children(&[&me, "_c_a-__WRIT__0000000003", b5]));
    let w = sent(&mut l);
    assert_eq!(
        w.iter().map(|(_, s)| s.clone()).collect::<Vec<_>>(),
        [format!("get! {}", path(b5))],
        "a data watch on the predecessor only: no herd"
    );
    l.handle_reply(T, w[0].0, data(b""));
    assert!(sent(&mut l).is_empty() && events(&mut l).is_empty());
    // _c_a releases, granting _c_b (and naming us, then _c_c, after it).
    l.handle_watch(T, w[0].0, &changed(&path(b5)));
    let w2 = sent(&mut l);
    assert_eq!(w2.len(), 1);
    assert_eq!(w2[0].1, format!("get! {}", path(b5)));
    l.handle_reply(T, w2[0].0, grant(&[&me, c9]));
    assert!(sent(&mut l).is_empty() && events(&mut l).is_empty());
    // _c_b releases: its deletion is our turn, and nothing needs reading.
    l.handle_watch(T, w2[0].0, &deleted(&path(b5)));
    assert_eq!(
        events(&mut l),
        vec![LockEvent::Acquired {
            fencing_token: 70,
            node: me.clone()
        }]
    );
    assert!(sent(&mut l).is_empty(), "no turn read, no listing");
    assert!(l.held_by_grant(), "handed on by the holder");
    l.release(T);
    assert_eq!(sent_lines(&mut l), [grant_line(c9, &[], &me)]);
}

/// What is not a grant in the blocker (a revocation aimed at it, a grant at version 0
/// that no holder wrote) does not make it a holder: its deletion then means the turn
/// read, as with the children watch. A blocker gone before its data could be read
/// leads to the turn read too.
#[test]
fn without_the_own_node_watch_only_a_grant_in_the_blocker_skips_the_turn_read() {
    let b5 = "_c_b-__WRIT__0000000005";
    let me = writer("0000000007");
    for (what, reread) in [
        ("a revocation", data_at(b"__REVOKE__", 1)),
        ("a grant no holder wrote", data_at(GRANT, 0)),
        ("gone before it was read", code(ErrorCode::NoNode)),
    ] {
        let mut c = config(LockKind::Write);
        c.watch_own_node = false;
        let mut l = lock_with(c);
        let (create, list) = start(&mut l, None);
        l.handle_reply(T, create, created(&me, 70));
        l.handle_reply(T, list, children(&[&me, "_c_a-__WRIT__0000000003", b5]));
        let w = sent(&mut l);
        l.handle_reply(T, w[0].0, data(b""));
        l.handle_watch(T, w[0].0, &changed(&path(b5)));
        let w2 = sent(&mut l);
        let gone = reread.is_err();
        l.handle_reply(T, w2[0].0, reread);
        if !gone {
            assert!(sent(&mut l).is_empty(), "{what}");
            l.handle_watch(T, w2[0].0, &deleted(&path(b5)));
        }
        assert!(events(&mut l).is_empty(), "{what}");
        let turn = sent(&mut l);
        assert_eq!(
            turn.iter().map(|(_, s)| s.clone()).collect::<Vec<_>>(),
            [format!("get {}", path(&me))],
            "{what}: the turn read"
        );
        l.handle_reply(T, turn[0].0, data(b""));
        assert_eq!(sent_lines(&mut l), [format!("list {DIR}")], "{what}");
    }
}

/// The data watch on the blocker removed by another user of the session
/// (`removeWatches`): watched again, not waited on forever.
#[test]
fn a_removed_blocker_watch_is_set_again() {
    for (kind, own_watch) in [
        (LockKind::Exclusive, true),
        (LockKind::Exclusive, false),
        (LockKind::Write, true),
        (LockKind::Write, false),
    ] {
        let exclusive = kind == LockKind::Exclusive;
        let (me, a3, b5) = if exclusive {
            (ours(7), "_c_a-lock-0000000003", "_c_b-lock-0000000005")
        } else {
            (
                writer("0000000007"),
                "_c_a-__WRIT__0000000003",
                "_c_b-__WRIT__0000000005",
            )
        };
        let mut c = config(kind);
        c.watch_own_node = own_watch;
        let mut l = lock_with(c);
        let (create, list) = start(&mut l, None);
        l.handle_reply(T, create, created(&me, 70));
        l.handle_reply(T, list, children(&[&me, a3, b5]));
        let w = sent(&mut l);
        l.handle_reply(T, w[0].0, data(b""));
        // A children watch on the blocker (with our own node's data watch, or alone),
        // or, for a write lock without the own-node watch, a data watch.
        let removed = if exclusive || own_watch {
            EventType::ChildWatchRemoved
        } else {
            EventType::DataWatchRemoved
        };
        l.handle_watch(
            T,
            w[0].0,
            &WatchEvent {
                event_type: removed,
                path: path(b5),
            },
        );
        assert_eq!(
            sent_lines(&mut l),
            [w[0].1.clone()],
            "{kind:?}, own-node watch {own_watch}: the same watch again"
        );
    }
}

/// Issue 25: a waiter's entry (create, listing) yields to other recipes' later requests
/// in the session's queue, and so does the arming of a waiter more than two places
/// from the lock; a waiter next in line (or the one after) arms at once.
#[test]
fn the_entry_and_deep_waiters_watches_yield_the_next_ones_do_not() {
    for (ahead, yields) in [(1usize, false), (2, false), (3, true), (10, true)] {
        let mut l = lock(LockKind::Exclusive);
        let (create, list) = start(&mut l, None);
        assert!(l.yields(create) && l.yields(list), "the entry yields");
        l.handle_reply(T, create, created(&ours(50), 500));
        let mut names: Vec<String> = (0..ahead)
            .map(|i| format!("_c_x{i}-lock-{:010}", 10 + i))
            .collect();
        names.push(ours(50));
        let refs: Vec<&str> = names.iter().map(String::as_str).collect();
        l.handle_reply(T, list, children(&refs));
        let w = sent(&mut l);
        assert_eq!(w.len(), 1, "{ahead} ahead: the arming only: {w:?}");
        assert_eq!(l.yields(w[0].0), yields, "{ahead} ahead: {w:?}");
    }
}

/// A holder's own-node read sent behind the reconnect's `sync` that then fails is read
/// as lost; its watch was left all the same (the read was answered), so the read made
/// again asks for no second one (`Outbox::answer_armed`). Found by a review of the one
/// fresh-read rule: the lock asked again, two registrations on its node, each data
/// change then heard twice and read twice.
#[test]
fn an_own_read_behind_a_failed_sync_does_not_watch_twice() {
    let mut l = held();
    reconnect(&mut l);
    events(&mut l);
    let v = sent(&mut l);
    assert_eq!(
        lines(&v),
        [format!("sync {DIR}"), format!("exists {}", path(&ours(5)))]
    );
    // The stand-in directory watch fires (while the sync is on its way): the holder
    // arms its own-node watch, behind the sync.
    let list_op = 2; // the stand-in listing of `held()` (create2 = 1, list! = 2)
    l.handle_watch(T, list_op, &children_changed(DIR));
    let own = sent(&mut l);
    assert_eq!(lines(&own), [format!("get! {}", path(&ours(5)))]);
    l.handle_reply(T, v[0].0, Err(Error::Server(ErrorCode::Throttled)));
    l.handle_reply(T, v[1].0, Ok(Response::Stat(st().czxid(50).owner(SESSION))));
    l.handle_reply(T, own[0].0, data(b""));
    let at = l.poll_timeout().unwrap();
    l.handle_timeout(at);
    let again = sent(&mut l);
    for (op, line) in &again {
        match line.split(' ').next() {
            Some("sync") => l.handle_reply(at, *op, Ok(Response::Path(DIR.into()))),
            Some("exists") => {
                l.handle_reply(at, *op, Ok(Response::Stat(st().czxid(50).owner(SESSION))))
            }
            _ => l.handle_reply(at, *op, data(b"")),
        }
    }
    events(&mut l);
    // One write to our node: the server fires every registration left on it.
    let changed = WatchEvent {
        event_type: EventType::NodeDataChanged,
        path: path(&ours(5)),
    };
    let mut reads = Vec::new();
    for (op, line) in own.iter().chain(&again) {
        if line.starts_with("get!") {
            l.handle_watch(at, *op, &changed);
            reads.extend(sent_lines(&mut l));
        }
    }
    assert!(
        !lines(&again).iter().any(|s| s.starts_with("get!")),
        "a second watch on our node, the first was left: {:?}; one change then reads: {reads:?}",
        lines(&again)
    );
}
