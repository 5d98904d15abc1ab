//! Transcript tests for `recipe::multi_lock`: scripted replies in, exact requests and
//! events out, in the lines of `kit.rs`. Paths `/l/a`, `/l/b`, `/l/c`; our lock on the
//! `i`-th path (sorted) is `_c_<ID>-<i>-lock-`, shortened to `A<i>-` in the lines.

use super::kit::*;
use std::time::Duration;
use zk_recipes::recipe::lock::LostReason;
use zk_recipes::recipe::multi_lock::{
    HeldLock, MultiLock, MultiLockConfig, MultiLockEvent, MAX_LOCKS,
};

const ID: &str = "6f1c2a4e-2b1d-4d7e-9a63-0c2f5a7b8d90";
const SESSION: i64 = 0x77;

fn script(paths: &[&str]) -> Script<MultiLock> {
    Script::connected(MultiLock::new(MultiLockConfig::new(paths, ID)), SESSION)
        .short(&[("_c_6f1c2a4e-2b1d-4d7e-9a63-0c2f5a7b8d90-", "A")])
}

/// Our node in the `i`-th lock (as the server names it, long form).
fn ours(i: usize, seq: u32) -> String {
    format!("_c_{ID}-{i}-lock-{seq:010}")
}

fn other(seq: u32) -> String {
    format!("_c_ffffffff-0000-4000-8000-000000000000-lock-{seq:010}")
}

fn made(dir: &str, name: &str, czxid: i64) -> Result<Response, Error> {
    created2(&format!("{dir}/{name}"), st().czxid(czxid).owner(SESSION))
}

fn held(path: &str, i: usize, seq: u32, token: i64) -> HeldLock {
    HeldLock {
        path: path.into(),
        node: ours(i, seq),
        fencing_token: token,
    }
}

/// Takes lock `i` in `dir` uncontended (our node `seq`, token `czxid`).
fn take(s: &mut Script<MultiLock>, dir: &str, i: usize, seq: u32, czxid: i64) {
    assert_eq!(
        s.sent(),
        [
            format!("create2 {dir}/A{i}-lock- es"),
            format!("list! {dir}")
        ]
    );
    s.reply(&format!("create2 {dir}/"), made(dir, &ours(i, seq), czxid));
    s.reply(&format!("list! {dir}"), children(&[&ours(i, seq)]));
}

/// Every request sent and not answered yet, sorted (the locks' requests interleave).
fn pending(s: &mut Script<MultiLock>) -> Vec<String> {
    s.sent();
    let mut p: Vec<String> = s.pending.iter().map(|(_, l)| l.clone()).collect();
    p.sort();
    p
}

/// Lock `i` in `dir` queues behind another contender (our node `seq`, token `czxid`):
/// it arms the watch on its predecessor (and its own node) and waits.
fn queue(s: &mut Script<MultiLock>, dir: &str, i: usize, seq: u32, czxid: i64) {
    assert_eq!(
        s.sent(),
        [
            format!("create2 {dir}/A{i}-lock- es"),
            format!("list! {dir}")
        ]
    );
    s.reply(&format!("create2 {dir}/"), made(dir, &ours(i, seq), czxid));
    s.reply(
        &format!("list! {dir}"),
        children(&[&other(1), &ours(i, seq)]),
    );
    let w = s.sent();
    assert_eq!(w.len(), 1, "one watch request: {w:?}");
    assert!(w[0].starts_with("setWatches2"), "{w:?}");
    s.reply("setWatches2", Ok(Response::Empty));
}

/// Both of `/l/a`, `/l/b` held (tokens 10, 20).
fn held_both() -> Script<MultiLock> {
    let mut s = script(&["/l/b", "/l/a"]);
    s.r.acquire(s.now, None);
    take(&mut s, "/l/a", 0, 1, 10);
    take(&mut s, "/l/b", 1, 2, 20);
    assert_eq!(
        s.events(),
        [MultiLockEvent::Acquired {
            locks: vec![held("/l/a", 0, 1, 10), held("/l/b", 1, 2, 20)]
        }]
    );
    s
}

#[test]
fn locks_are_taken_one_at_a_time_in_sorted_order_and_released_together() {
    let mut s = script(&["/l/b", "/l/a", "/l/b"]);
    assert_eq!(s.r.paths(), ["/l/a", "/l/b"], "sorted, deduplicated");
    s.r.acquire(s.now, None);
    // Only /l/a goes out: /l/b is not started before /l/a is held.
    take(&mut s, "/l/a", 0, 1, 10);
    assert_eq!(s.events(), [], "not before every lock is held");
    assert_eq!(s.r.held_count(), 1);
    take(&mut s, "/l/b", 1, 2, 20);
    assert_eq!(
        s.events(),
        [MultiLockEvent::Acquired {
            locks: vec![held("/l/a", 0, 1, 10), held("/l/b", 1, 2, 20)]
        }]
    );
    assert!(s.r.is_held());
    // Release: both deletes at once; Released once both answered.
    s.r.release(s.now);
    assert_eq!(
        s.sent(),
        [
            "delete /l/a/A0-lock-0000000001",
            "delete /l/b/A1-lock-0000000002"
        ]
    );
    s.reply("delete /l/a/", ok());
    assert_eq!(s.events(), [], "not before every node is deleted");
    s.reply("delete /l/b/", ok());
    assert_eq!(s.events(), [MultiLockEvent::Released]);
    assert!(s.r.is_done());
}

#[test]
fn a_deadline_on_the_second_lock_releases_the_first_before_timed_out() {
    let mut s = script(&["/l/a", "/l/b"]);
    s.r.acquire(s.now, Some(ms(500)));
    take(&mut s, "/l/a", 0, 1, 10);
    queue(&mut s, "/l/b", 1, 2, 20);
    assert_eq!(s.r.poll_timeout(), Some(ms(500)));
    s.advance(Duration::from_millis(500));
    // The waiting node and the held lock go together.
    let mut out = s.sent();
    out.sort();
    assert_eq!(
        out,
        [
            "delete /l/a/A0-lock-0000000001",
            "delete /l/b/A1-lock-0000000002"
        ]
    );
    s.reply("delete /l/b/", ok());
    assert_eq!(s.events(), [], "TimedOut only once nothing of ours is left");
    s.reply("delete /l/a/", ok());
    assert_eq!(s.events(), [MultiLockEvent::TimedOut]);
    assert!(s.r.is_done());
}

#[test]
fn a_refused_lock_fails_the_whole_and_releases_what_was_held() {
    let mut s = script(&["/l/a", "/l/b"]);
    s.r.acquire(s.now, None);
    take(&mut s, "/l/a", 0, 1, 10);
    s.sent();
    s.reply("create2 /l/b/", code(ErrorCode::NoAuth));
    s.reply("list! /l/b", children(&[]));
    assert_eq!(pending(&mut s), ["delete /l/a/A0-lock-0000000001"]);
    assert_eq!(s.events(), []);
    s.reply("delete /l/a/", ok());
    let e = s.events();
    assert!(
        matches!(&e[..], [MultiLockEvent::Failed { error }] if error.code() == Some(ErrorCode::NoAuth)),
        "{e:?}"
    );
    assert!(s.r.is_done());
}

#[test]
fn a_release_refused_for_good_is_never_reported_as_released() {
    let mut s = held_both();
    s.r.release(s.now);
    s.sent();
    s.reply("delete /l/a/", ok());
    s.reply("delete /l/b/", code(ErrorCode::NoAuth));
    let e = s.events();
    assert!(
        matches!(&e[..], [MultiLockEvent::Failed { .. }]),
        "not Released: {e:?}"
    );
}

#[test]
fn a_cancel_while_waiting_deletes_the_held_lock_and_the_waiting_node() {
    let mut s = script(&["/l/a", "/l/b"]);
    s.r.acquire(s.now, None);
    take(&mut s, "/l/a", 0, 1, 10);
    queue(&mut s, "/l/b", 1, 2, 20);
    s.r.release(s.now);
    let mut out = s.sent();
    out.sort();
    assert_eq!(
        out,
        [
            "delete /l/a/A0-lock-0000000001",
            "delete /l/b/A1-lock-0000000002"
        ]
    );
    s.reply("delete /l/a/", ok());
    s.reply("delete /l/b/", ok());
    assert_eq!(s.events(), [MultiLockEvent::Cancelled]);
    assert!(s.r.is_done());
}

#[test]
fn a_dropped_handle_while_the_second_create_is_in_flight_deletes_both() {
    let mut s = script(&["/l/a", "/l/b"]);
    s.r.acquire(s.now, None);
    take(&mut s, "/l/a", 0, 1, 10);
    s.sent();
    s.r.handle_abandon(s.now);
    // The create lands after the abandon: found by its reply, and deleted.
    s.reply("create2 /l/b/", made("/l/b", &ours(1, 2), 20));
    s.reply("list! /l/b", children(&[&ours(1, 2)]));
    assert_eq!(
        pending(&mut s),
        [
            "delete /l/a/A0-lock-0000000001",
            "delete /l/b/A1-lock-0000000002"
        ]
    );
    s.reply("delete /l/a/", ok());
    s.reply("delete /l/b/", ok());
    assert!(s.r.is_done());
}

#[test]
fn suspended_once_and_reconnected_once_every_lock_is_verified() {
    let mut s = held_both();
    s.session(SessionChange::Suspended);
    assert_eq!(
        s.events(),
        [MultiLockEvent::Suspended],
        "once for the whole"
    );
    assert!(!s.r.is_held());
    s.session(SessionChange::Reconnected {
        session_id: SESSION,
    });
    let mut v = s.sent();
    v.sort();
    assert_eq!(
        v,
        [
            "exists /l/a/A0-lock-0000000001",
            "exists /l/b/A1-lock-0000000002",
            "sync /l/a",
            "sync /l/b"
        ]
    );
    s.reply("sync /l/a", Ok(Response::Path("/l/a".into())));
    s.reply("exists /l/a/", stat_reply(st().czxid(10).owner(SESSION)));
    assert_eq!(s.events(), [], "not before every lock is verified");
    s.reply("sync /l/b", Ok(Response::Path("/l/b".into())));
    s.reply("exists /l/b/", stat_reply(st().czxid(20).owner(SESSION)));
    assert_eq!(s.events(), [MultiLockEvent::Reconnected]);
    assert!(s.r.is_held());
}

#[test]
fn a_lost_lock_is_reported_at_once_naming_its_path() {
    let mut s = held_both();
    s.session(SessionChange::Expired);
    assert_eq!(
        s.events(),
        [MultiLockEvent::Lost {
            path: "/l/a".into(),
            reason: LostReason::SessionExpired
        }],
        "one Lost for the whole"
    );
    assert!(s.r.is_done());

    // A verification after a reconnect finds one node gone: Lost, the other released.
    let mut s = held_both();
    s.session(SessionChange::Suspended);
    s.session(SessionChange::Reconnected {
        session_id: SESSION,
    });
    s.reply("sync /l/a", Ok(Response::Path("/l/a".into())));
    s.reply("exists /l/a/", stat_reply(st().czxid(10).owner(SESSION)));
    s.reply("sync /l/b", Ok(Response::Path("/l/b".into())));
    s.reply("exists /l/b/", no_node());
    assert_eq!(
        s.events(),
        [
            MultiLockEvent::Suspended,
            MultiLockEvent::Lost {
                path: "/l/b".into(),
                reason: LostReason::NodeDeleted
            }
        ]
    );
    assert_eq!(s.sent(), ["delete /l/a/A0-lock-0000000001"]);
    s.reply("delete /l/a/", ok());
    assert_eq!(s.events(), [], "Lost was the final event");
    assert!(s.r.is_done());
}

#[test]
fn an_expiry_while_acquiring_fails_the_whole() {
    let mut s = script(&["/l/a", "/l/b"]);
    s.r.acquire(s.now, None);
    take(&mut s, "/l/a", 0, 1, 10);
    queue(&mut s, "/l/b", 1, 2, 20);
    s.session(SessionChange::Expired);
    let e = s.events();
    assert!(
        matches!(
            &e[..],
            [MultiLockEvent::Failed {
                error: Error::SessionExpired
            }]
        ),
        "{e:?}"
    );
    assert!(s.r.is_done());
}

#[test]
fn bad_sets_fail_before_anything_is_sent() {
    let none: [&str; 0] = [];
    let too_many: Vec<String> = (0..=MAX_LOCKS).map(|i| format!("/l/{i}")).collect();
    for paths in [
        none.iter().map(|p| p.to_string()).collect::<Vec<_>>(),
        vec!["/l/a".into(), "relative".into()],
        too_many,
    ] {
        let mut s = script(&paths.iter().map(String::as_str).collect::<Vec<_>>());
        s.r.acquire(s.now, None);
        assert_eq!(s.sent(), Vec::<String>::new(), "{paths:?}");
        let e = s.events();
        assert!(matches!(&e[..], [MultiLockEvent::Failed { .. }]), "{e:?}");
        assert!(s.r.is_done());
    }
}
