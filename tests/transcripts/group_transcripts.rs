//! Transcript tests for `recipe::group` (and the `OwnedNode` under `GroupMember`):
//! scripted replies in, exact requests and events out, in the lines of `kit.rs`.

use super::kit::*;
use zk_recipes::recipe::group::{
    GroupMember, Member, MemberConfig, MemberEvent, View, ViewConfig, ViewEvent,
};
use zk_recipes::recipe::lock::LostReason;

const T: Instant = Instant::ZERO;
const S: i64 = 0x77;
const DIR: &str = "/g";
const ME: &str = "/g/me";

fn member(name: &str, d: &'static str, st: Stat) -> Member {
    Member {
        name: name.into(),
        data: Bytes::from_static(d.as_bytes()),
        stat: st,
    }
}

fn connected<R: Recipe>(r: &mut R) {
    r.handle_session(T, SessionChange::Connected { session_id: S });
}

fn reconnect<R: Recipe>(r: &mut R) {
    r.handle_session(T, SessionChange::Suspended);
    r.handle_session(T, SessionChange::Reconnected { session_id: S });
}

// ----- member -----

fn joined_member() -> (GroupMember, OpId) {
    let mut m = GroupMember::new(MemberConfig::new(DIR, "me", "a"));
    connected(&mut m);
    m.join(T);
    let s = expect_sent!(m, ["create2 /g/me e 'a'", "get! /g/me"]);
    m.handle_reply(
        T,
        s[0].0,
        Ok(Response::PathStat {
            path: ME.into(),
            stat: st().czxid(5).mzxid(5).owner(S),
        }),
    );
    assert_eq!(
        events(&mut m),
        [MemberEvent::Created {
            stat: st().czxid(5).mzxid(5).owner(S)
        }]
    );
    m.handle_reply(T, s[1].0, data("a", st().czxid(5).mzxid(5).owner(S)));
    assert!(sent(&mut m).is_empty());
    assert!(events(&mut m).is_empty());
    assert!(m.is_joined());
    (m, s[1].0)
}

#[test]
fn member_join_and_leave() {
    let (mut m, _) = joined_member();
    m.leave(T);
    let s = expect_sent!(m, ["delete /g/me"]);
    assert!(!m.is_done());
    m.handle_reply(T, s[0].0, Ok(Response::Empty));
    assert_eq!(events(&mut m), [MemberEvent::Removed]);
    assert!(m.is_done());
}

#[test]
fn member_missing_parents_are_created_as_containers() {
    let mut m = GroupMember::new(MemberConfig::new("/a/g", "me", "x"));
    connected(&mut m);
    m.join(T);
    let s = sent(&mut m);
    m.handle_reply(T, s[0].0, code(ErrorCode::NoNode));
    m.handle_reply(T, s[1].0, code(ErrorCode::NoNode));
    expect_sent!(
        m,
        [
            "container /a",
            "container /a/g",
            "create2 /a/g/me e 'x'",
            "get! /a/g/me"
        ]
    );
}

#[test]
fn member_parent_that_cannot_be_created_fails_naming_it() {
    let mut m = GroupMember::new(MemberConfig::new("/a/g", "me", "x"));
    connected(&mut m);
    m.join(T);
    let s = sent(&mut m);
    m.handle_reply(T, s[0].0, code(ErrorCode::NoNode));
    m.handle_reply(T, s[1].0, code(ErrorCode::NoNode));
    let s = sent(&mut m);
    m.handle_reply(T, s[0].0, Ok(Response::Path("/a".into())));
    m.handle_reply(T, s[1].0, code(ErrorCode::NoAuth));
    m.handle_reply(T, s[2].0, code(ErrorCode::NoNode));
    m.handle_reply(T, s[3].0, code(ErrorCode::NoNode));
    assert_eq!(
        events(&mut m),
        [MemberEvent::Failed {
            error: Error::NoParent {
                path: "/a/g".into(),
                code: ErrorCode::NoAuth
            }
        }]
    );
    assert!(m.is_done());
}

#[test]
fn member_lost_create_reply_adopts_own_node_and_sets_data() {
    let mut m = GroupMember::new(MemberConfig::new(DIR, "me", "new"));
    connected(&mut m);
    m.join(T);
    let s = sent(&mut m);
    m.handle_reply(T, s[0].0, Err(Error::ConnectionLoss));
    m.handle_reply(T, s[1].0, Err(Error::ConnectionLoss));
    assert!(sent(&mut m).is_empty());
    reconnect(&mut m);
    let s = expect_sent!(m, ["sync /g/me", "get! /g/me"]);
    m.handle_reply(T, s[0].0, Ok(Response::Path(ME.into())));
    // Ours, but with other data (say an older payload): set ours.
    m.handle_reply(T, s[1].0, data("old", st().czxid(5).mzxid(5).owner(S)));
    assert_eq!(
        events(&mut m),
        [MemberEvent::Created {
            stat: st().czxid(5).mzxid(5).owner(S)
        }]
    );
    assert_eq!(lines(&sent(&mut m)), ["set /g/me 'new'"]);
}

#[test]
fn member_node_of_another_session_is_waited_out() {
    let mut m = GroupMember::new(MemberConfig::new(DIR, "me", "a"));
    connected(&mut m);
    m.join(T);
    let s = sent(&mut m);
    m.handle_reply(T, s[0].0, code(ErrorCode::NodeExists));
    m.handle_reply(T, s[1].0, data("x", st().czxid(3).mzxid(3).owner(0x99)));
    assert_eq!(events(&mut m), [MemberEvent::Blocked { owner: 0x99 }]);
    assert!(sent(&mut m).is_empty()); // watched, never deleted
    m.handle_watch(T, s[1].0, &ev(EventType::NodeDeleted, ME));
    assert_eq!(lines(&sent(&mut m)), ["create2 /g/me e 'a'", "get! /g/me"]);
}

#[test]
fn member_deleted_by_someone_else_is_recreated() {
    let (mut m, watch) = joined_member();
    m.handle_watch(T, watch, &ev(EventType::NodeDeleted, ME));
    assert_eq!(
        events(&mut m),
        [MemberEvent::Lost {
            reason: LostReason::NodeDeleted
        }]
    );
    assert_eq!(lines(&sent(&mut m)), ["create2 /g/me e 'a'", "get! /g/me"]);
}

#[test]
fn member_without_recreate_fails_when_deleted() {
    let mut c = MemberConfig::new(DIR, "me", "a");
    c.recreate = false;
    let mut m = GroupMember::new(c);
    connected(&mut m);
    m.join(T);
    let s = sent(&mut m);
    m.handle_reply(
        T,
        s[0].0,
        Ok(Response::PathStat {
            path: ME.into(),
            stat: st().czxid(5).mzxid(5).owner(S),
        }),
    );
    m.handle_reply(T, s[1].0, data("a", st().czxid(5).mzxid(5).owner(S)));
    m.handle_watch(T, s[1].0, &ev(EventType::NodeDeleted, ME));
    assert_eq!(
        events(&mut m),
        [
            MemberEvent::Created {
                stat: st().czxid(5).mzxid(5).owner(S)
            },
            MemberEvent::Lost {
                reason: LostReason::NodeDeleted
            },
            MemberEvent::Failed {
                error: Error::Server(ErrorCode::NoNode)
            }
        ]
    );
    assert!(sent(&mut m).is_empty());
    assert!(m.is_done());
}

#[test]
fn member_session_expiry_recreates_on_the_new_session() {
    let (mut m, _) = joined_member();
    m.handle_session(T, SessionChange::Suspended);
    m.handle_session(T, SessionChange::Expired);
    assert_eq!(
        events(&mut m),
        [
            MemberEvent::Suspended,
            MemberEvent::Lost {
                reason: LostReason::SessionExpired
            }
        ]
    );
    assert!(sent(&mut m).is_empty());
    m.handle_session(T, SessionChange::Connected { session_id: 0x88 });
    let s = expect_sent!(m, ["create2 /g/me e 'a'", "get! /g/me"]);
    m.handle_reply(
        T,
        s[0].0,
        Ok(Response::PathStat {
            path: ME.into(),
            stat: st().czxid(9).mzxid(9).owner(0x88),
        }),
    );
    assert_eq!(
        events(&mut m),
        [MemberEvent::Created {
            stat: st().czxid(9).mzxid(9).owner(0x88)
        }]
    );
}

#[test]
fn member_expiry_while_old_node_lingers_waits_for_it() {
    let (mut m, _) = joined_member();
    m.handle_session(T, SessionChange::Expired);
    m.handle_session(T, SessionChange::Connected { session_id: 0x88 });
    events(&mut m);
    let s = sent(&mut m);
    // The old session's node is still there (the expiry is not applied yet).
    m.handle_reply(T, s[0].0, code(ErrorCode::NodeExists));
    m.handle_reply(T, s[1].0, data("a", st().czxid(5).mzxid(5).owner(S)));
    assert_eq!(events(&mut m), [MemberEvent::Blocked { owner: S }]);
    m.handle_watch(T, s[1].0, &ev(EventType::NodeDeleted, ME));
    assert_eq!(lines(&sent(&mut m)), ["create2 /g/me e 'a'", "get! /g/me"]);
}

#[test]
fn member_reconnect_verifies_the_node() {
    let (mut m, _) = joined_member();
    m.handle_session(T, SessionChange::Suspended);
    assert_eq!(events(&mut m), [MemberEvent::Suspended]);
    assert!(!m.is_joined());
    m.handle_session(T, SessionChange::Reconnected { session_id: S });
    let s = sent(&mut m);
    // The watch is still registered (re-armed by the session): read without one.
    assert_eq!(lines(&s), ["sync /g/me", "get /g/me"]);
    m.handle_reply(T, s[0].0, Ok(Response::Path(ME.into())));
    m.handle_reply(T, s[1].0, data("a", st().czxid(5).mzxid(5).owner(S)));
    assert_eq!(events(&mut m), [MemberEvent::Reconnected]);
    assert!(m.is_joined());
}

#[test]
fn member_set_data_and_restore_after_foreign_write() {
    let (mut m, watch) = joined_member();
    m.set_data(T, Bytes::from_static(b"b"));
    let s = expect_sent!(m, ["set /g/me 'b'"]);
    m.handle_reply(
        T,
        s[0].0,
        Ok(Response::Stat(st().czxid(5).mzxid(6).owner(S))),
    );
    assert_eq!(
        events(&mut m),
        [MemberEvent::DataSet {
            stat: st().czxid(5).mzxid(6).owner(S)
        }]
    );
    // Our own write fires the watch; a re-read finds our data: nothing more.
    m.handle_watch(T, watch, &ev(EventType::NodeDataChanged, ME));
    let s = expect_sent!(m, ["get! /g/me"]);
    m.handle_reply(T, s[0].0, data("b", st().czxid(5).mzxid(6).owner(S)));
    assert!(sent(&mut m).is_empty());
    // Someone else writes: ours is set back.
    m.handle_watch(T, s[0].0, &ev(EventType::NodeDataChanged, ME));
    let s = sent(&mut m);
    m.handle_reply(T, s[0].0, data("zzz", st().czxid(5).mzxid(7).owner(S)));
    assert_eq!(lines(&sent(&mut m)), ["set /g/me 'b'"]);
    assert!(events(&mut m).is_empty());
}

#[test]
fn member_refused_write_is_reported_not_retried() {
    let (mut m, _) = joined_member();
    m.set_data(T, Bytes::from_static(b"b"));
    let s = sent(&mut m);
    m.handle_reply(T, s[0].0, code(ErrorCode::NoAuth));
    assert_eq!(
        events(&mut m),
        [MemberEvent::DataRefused {
            error: Error::Server(ErrorCode::NoAuth)
        }]
    );
    assert!(sent(&mut m).is_empty());
}

#[test]
fn member_leave_after_lost_delete_reply_checks_first() {
    let (mut m, _) = joined_member();
    m.leave(T);
    let s = sent(&mut m);
    m.handle_reply(T, s[0].0, Err(Error::ConnectionLoss));
    assert!(events(&mut m).is_empty());
    reconnect(&mut m);
    let s = expect_sent!(m, ["sync /g/me", "get /g/me"]);
    m.handle_reply(T, s[0].0, Ok(Response::Path(ME.into())));
    m.handle_reply(T, s[1].0, code(ErrorCode::NoNode)); // it was applied
    assert_eq!(events(&mut m), [MemberEvent::Removed]);
    assert!(m.is_done());
}

#[test]
fn member_leave_never_deletes_another_sessions_node() {
    let mut m = GroupMember::new(MemberConfig::new(DIR, "me", "a"));
    connected(&mut m);
    m.join(T);
    let s = sent(&mut m);
    m.leave(T); // while the create is on its way
    m.handle_reply(T, s[0].0, code(ErrorCode::NodeExists));
    m.handle_reply(T, s[1].0, data("x", st().czxid(3).mzxid(3).owner(0x99)));
    assert!(sent(&mut m).is_empty());
    assert_eq!(events(&mut m), [MemberEvent::Removed]);
}

#[test]
fn member_leave_while_create_in_flight_deletes_it() {
    let mut m = GroupMember::new(MemberConfig::new(DIR, "me", "a"));
    connected(&mut m);
    m.join(T);
    let s = sent(&mut m);
    m.leave(T);
    m.handle_reply(
        T,
        s[0].0,
        Ok(Response::PathStat {
            path: ME.into(),
            stat: st().czxid(5).mzxid(5).owner(S),
        }),
    );
    m.handle_reply(T, s[1].0, data("a", st().czxid(5).mzxid(5).owner(S)));
    let s = expect_sent!(m, ["delete /g/me"]);
    m.handle_reply(T, s[0].0, code(ErrorCode::NoNode));
    assert_eq!(events(&mut m), [MemberEvent::Removed]);
}

#[test]
fn member_refusal_backs_off() {
    let mut m = GroupMember::new(MemberConfig::new(DIR, "me", "a"));
    connected(&mut m);
    m.join(T);
    let s = sent(&mut m);
    m.handle_reply(T, s[0].0, Err(Error::Overloaded));
    m.handle_reply(T, s[1].0, code(ErrorCode::NoNode));
    assert!(sent(&mut m).is_empty());
    let at = m.poll_timeout().expect("a backoff deadline");
    m.handle_timeout(at);
    assert_eq!(lines(&sent(&mut m)), ["create2 /g/me e 'a'", "get! /g/me"]);
    assert!(m.poll_timeout().is_none_or(|t| t > at));
}

#[test]
fn member_bad_id_fails() {
    let mut m = GroupMember::new(MemberConfig::new(DIR, "a/b", "x"));
    connected(&mut m);
    m.join(T);
    assert!(matches!(
        events(&mut m)[..],
        [MemberEvent::Failed {
            error: Error::InvalidPath { .. }
        }]
    ));
    assert!(m.is_done());
}

#[test]
fn member_session_closed_ends() {
    let (mut m, _) = joined_member();
    m.handle_session(T, SessionChange::Closed);
    assert_eq!(
        events(&mut m),
        [
            MemberEvent::Lost {
                reason: LostReason::SessionClosed
            },
            MemberEvent::Failed {
                error: Error::Closed
            }
        ]
    );
    assert!(m.is_done());
}

// ----- view -----

/// A started view whose first listing found `a` and `b`; returns the view and the ops
/// of the listing and the two reads.
fn synced_view() -> (View, OpId, OpId, OpId) {
    let mut v = View::new(ViewConfig::new(DIR));
    connected(&mut v);
    v.start(T);
    let s = expect_sent!(v, ["list! /g"]);
    v.handle_reply(T, s[0].0, children(&["b", "a"]));
    let r = expect_sent!(v, ["get! /g/a", "get! /g/b"]);
    v.handle_reply(T, r[0].0, data("A", st().czxid(1).mzxid(1).owner(0x1)));
    assert_eq!(
        events(&mut v),
        [ViewEvent::Joined(member(
            "a",
            "A",
            st().czxid(1).mzxid(1).owner(0x1)
        ))]
    );
    assert!(!v.is_synced());
    v.handle_reply(T, r[1].0, data("B", st().czxid(2).mzxid(2).owner(0x2)));
    assert_eq!(
        events(&mut v),
        [
            ViewEvent::Joined(member("b", "B", st().czxid(2).mzxid(2).owner(0x2))),
            ViewEvent::Synced
        ]
    );
    assert!(v.is_synced());
    assert_eq!(v.members().len(), 2);
    (v, s[0].0, r[0].0, r[1].0)
}

#[test]
fn view_first_listing_reads_every_member_then_synced() {
    let (v, ..) = synced_view();
    assert_eq!(v.members()[0].name, "a");
    assert_eq!(v.members()[1].name, "b");
}

#[test]
fn view_join_leave_change() {
    let (mut v, list, a, _b) = synced_view();
    v.handle_watch(T, list, &ev(EventType::NodeChildrenChanged, DIR));
    let s = expect_sent!(v, ["list! /g"]);
    v.handle_reply(T, s[0].0, children(&["a", "c"])); // b left, c joined
    assert_eq!(
        events(&mut v),
        [ViewEvent::Left(member(
            "b",
            "B",
            st().czxid(2).mzxid(2).owner(0x2)
        ))]
    );
    let r = expect_sent!(v, ["get! /g/c"]);
    v.handle_reply(T, r[0].0, data("C", st().czxid(4).mzxid(4).owner(0x3)));
    assert_eq!(
        events(&mut v),
        [ViewEvent::Joined(member(
            "c",
            "C",
            st().czxid(4).mzxid(4).owner(0x3)
        ))]
    );
    // a's data changes.
    v.handle_watch(T, a, &ev(EventType::NodeDataChanged, "/g/a"));
    let r = expect_sent!(v, ["get! /g/a"]);
    v.handle_reply(T, r[0].0, data("A2", st().czxid(1).mzxid(5).owner(0x1)));
    assert_eq!(
        events(&mut v),
        [ViewEvent::Changed(member(
            "a",
            "A2",
            st().czxid(1).mzxid(5).owner(0x1)
        ))]
    );
    let names: Vec<&str> = v.members().iter().map(|m| m.name.as_str()).collect();
    assert_eq!(names, ["a", "c"]);
}

#[test]
fn view_member_deleted_is_left_at_once() {
    let (mut v, list, _a, b) = synced_view();
    v.handle_watch(T, b, &ev(EventType::NodeDeleted, "/g/b"));
    assert_eq!(
        events(&mut v),
        [ViewEvent::Left(member(
            "b",
            "B",
            st().czxid(2).mzxid(2).owner(0x2)
        ))]
    );
    // The child watch fires too: the listing confirms; nothing is reported twice.
    v.handle_watch(T, list, &ev(EventType::NodeChildrenChanged, DIR));
    let s = sent(&mut v);
    v.handle_reply(T, s[0].0, children(&["a"]));
    assert!(events(&mut v).is_empty());
    assert!(sent(&mut v).is_empty());
}

#[test]
fn view_member_gone_before_its_read_is_never_reported() {
    let mut v = View::new(ViewConfig::new(DIR));
    connected(&mut v);
    v.start(T);
    let s = sent(&mut v);
    v.handle_reply(T, s[0].0, children(&["a"]));
    let r = sent(&mut v);
    v.handle_reply(T, r[0].0, code(ErrorCode::NoNode));
    assert_eq!(events(&mut v), [ViewEvent::Synced]);
    assert!(v.members().is_empty());
}

#[test]
fn view_recreated_member_is_left_then_joined() {
    let (mut v, list, ..) = synced_view();
    // Without the data watch telling (say it was lost with a reconnect) a re-read
    // finds a new node under the same name.
    v.handle_session(T, SessionChange::Suspended);
    v.handle_session(T, SessionChange::Expired);
    v.handle_session(T, SessionChange::Connected { session_id: 0x88 });
    assert_eq!(
        events(&mut v),
        [ViewEvent::Suspended, ViewEvent::Reconnected]
    );
    let s = expect_sent!(v, ["sync /g", "list! /g"]);
    let _ = list;
    v.handle_reply(T, s[0].0, Ok(Response::Path(DIR.into())));
    v.handle_reply(T, s[1].0, children(&["a", "b"]));
    let r = expect_sent!(v, ["get! /g/a", "get! /g/b"]);
    v.handle_reply(T, r[0].0, data("A", st().czxid(1).mzxid(1).owner(0x1))); // unchanged
    v.handle_reply(T, r[1].0, data("B", st().czxid(7).mzxid(7).owner(0x5))); // new node
    assert_eq!(
        events(&mut v),
        [
            ViewEvent::Left(member("b", "B", st().czxid(2).mzxid(2).owner(0x2))),
            ViewEvent::Joined(member("b", "B", st().czxid(7).mzxid(7).owner(0x5))),
            ViewEvent::Synced
        ]
    );
}

#[test]
fn view_reconnect_resyncs_reporting_only_real_differences() {
    let (mut v, ..) = synced_view();
    v.handle_session(T, SessionChange::Suspended);
    assert_eq!(events(&mut v), [ViewEvent::Suspended]);
    assert!(!v.is_synced());
    v.handle_session(T, SessionChange::Reconnected { session_id: S });
    assert_eq!(events(&mut v), [ViewEvent::Reconnected]);
    let s = sent(&mut v);
    // Watches were re-armed by the session: list without one, no re-reads.
    assert_eq!(lines(&s), ["sync /g", "list /g"]);
    v.handle_reply(T, s[0].0, Ok(Response::Path(DIR.into())));
    v.handle_reply(T, s[1].0, children(&["a", "b"]));
    assert_eq!(events(&mut v), [ViewEvent::Synced]);
    assert!(sent(&mut v).is_empty());
    assert!(v.is_synced());
}

#[test]
fn view_reconnect_with_reads_in_flight_rereads_them() {
    let mut v = View::new(ViewConfig::new(DIR));
    connected(&mut v);
    v.start(T);
    let s = sent(&mut v);
    v.handle_reply(T, s[0].0, children(&["a"]));
    let r = sent(&mut v);
    v.handle_reply(T, r[0].0, Err(Error::ConnectionLoss));
    reconnect(&mut v);
    assert_eq!(
        events(&mut v),
        [ViewEvent::Suspended, ViewEvent::Reconnected]
    );
    let s = expect_sent!(v, ["sync /g", "list /g", "get! /g/a"]);
    v.handle_reply(T, s[0].0, Ok(Response::Path(DIR.into())));
    v.handle_reply(T, s[1].0, children(&["a"]));
    v.handle_reply(T, s[2].0, data("A", st().czxid(1).mzxid(1).owner(0x1)));
    assert_eq!(
        events(&mut v),
        [
            ViewEvent::Joined(member("a", "A", st().czxid(1).mzxid(1).owner(0x1))),
            ViewEvent::Synced
        ]
    );
}

#[test]
fn view_missing_directory_is_an_empty_group_until_created() {
    let mut v = View::new(ViewConfig::new(DIR));
    connected(&mut v);
    v.start(T);
    let s = sent(&mut v);
    v.handle_reply(T, s[0].0, code(ErrorCode::NoNode));
    assert_eq!(events(&mut v), [ViewEvent::Synced]);
    let e = expect_sent!(v, ["exists! /g"]);
    v.handle_reply(T, e[0].0, code(ErrorCode::NoNode));
    assert!(sent(&mut v).is_empty());
    v.handle_watch(T, e[0].0, &ev(EventType::NodeCreated, DIR));
    let s = expect_sent!(v, ["list! /g"]);
    v.handle_reply(T, s[0].0, children(&["a"]));
    let r = sent(&mut v);
    v.handle_reply(T, r[0].0, data("A", st().czxid(1).mzxid(1).owner(0x1)));
    assert_eq!(
        events(&mut v),
        [ViewEvent::Joined(member(
            "a",
            "A",
            st().czxid(1).mzxid(1).owner(0x1)
        ))]
    );
}

#[test]
fn view_directory_deleted_empties_the_view() {
    let (mut v, list, ..) = synced_view();
    v.handle_watch(T, list, &ev(EventType::NodeDeleted, DIR));
    let s = sent(&mut v);
    v.handle_reply(T, s[0].0, code(ErrorCode::NoNode));
    assert_eq!(
        events(&mut v),
        [
            ViewEvent::Left(member("a", "A", st().czxid(1).mzxid(1).owner(0x1))),
            ViewEvent::Left(member("b", "B", st().czxid(2).mzxid(2).owner(0x2)))
        ]
    );
    assert_eq!(lines(&sent(&mut v)), ["exists! /g"]);
}

#[test]
fn view_no_auth_fails_and_close_ends() {
    let mut v = View::new(ViewConfig::new(DIR));
    connected(&mut v);
    v.start(T);
    let s = sent(&mut v);
    v.handle_reply(T, s[0].0, code(ErrorCode::NoAuth));
    assert_eq!(
        events(&mut v),
        [ViewEvent::Failed(Error::Server(ErrorCode::NoAuth))]
    );
    assert!(v.is_done());

    let (mut v, ..) = synced_view();
    v.close(T);
    assert_eq!(events(&mut v), [ViewEvent::Closed]);
    assert!(v.is_done());
    assert!(sent(&mut v).is_empty());
}

#[test]
fn view_without_data_watches_reads_once() {
    let mut c = ViewConfig::new(DIR);
    c.watch_data = false;
    let mut v = View::new(c);
    connected(&mut v);
    v.start(T);
    let s = sent(&mut v);
    v.handle_reply(T, s[0].0, children(&["a"]));
    assert_eq!(lines(&sent(&mut v)), ["get /g/a"]);
}

#[test]
fn view_listing_refused_backs_off() {
    let mut v = View::new(ViewConfig::new(DIR));
    connected(&mut v);
    v.start(T);
    let s = sent(&mut v);
    v.handle_reply(T, s[0].0, Err(Error::Overloaded));
    assert!(sent(&mut v).is_empty());
    let at = v.poll_timeout().expect("backoff");
    v.handle_timeout(at);
    assert_eq!(lines(&sent(&mut v)), ["sync /g", "list! /g"]);
    assert!(v.poll_timeout().is_none_or(|t| t > at));
}

// ----- view: the watcher lifecycle (pinned before the port to the shared watcher) -----

#[test]
fn view_started_before_its_session_waits_for_it_then_syncs_and_lists() {
    let mut v = View::new(ViewConfig::new(DIR));
    v.handle_session(T, SessionChange::Suspended); // not running yet: nothing to report
    v.start(T);
    assert!(sent(&mut v).is_empty());
    assert!(v.poll_timeout().is_none());
    connected(&mut v);
    assert!(events(&mut v).is_empty());
    assert_eq!(lines(&sent(&mut v)), ["sync /g", "list! /g"]);
}

#[test]
fn view_expired_without_suspended_reports_suspended_once_then_rearms_everything() {
    let (mut v, ..) = synced_view();
    v.handle_session(T, SessionChange::Expired);
    v.handle_session(T, SessionChange::Suspended);
    assert_eq!(events(&mut v), [ViewEvent::Suspended]);
    assert!(!v.is_synced());
    assert!(sent(&mut v).is_empty());
    assert!(v.poll_timeout().is_none());
    v.handle_session(T, SessionChange::Connected { session_id: 0x88 });
    assert_eq!(events(&mut v), [ViewEvent::Reconnected]);
    let s = expect_sent!(v, ["sync /g", "list! /g"]);
    v.handle_reply(T, s[0].0, Ok(Response::Path(DIR.into())));
    v.handle_reply(T, s[1].0, children(&["a", "b"]));
    // The data watches went with the old session: each member is read with one.
    let r = expect_sent!(v, ["get! /g/a", "get! /g/b"]);
    v.handle_reply(T, r[0].0, data("A", st().czxid(1).mzxid(1).owner(0x1)));
    v.handle_reply(T, r[1].0, data("B", st().czxid(2).mzxid(2).owner(0x2)));
    assert_eq!(events(&mut v), [ViewEvent::Synced]);
    assert!(v.is_synced());
}

#[test]
fn view_refused_while_suspended_waits_for_the_reconnect_not_a_timer() {
    let mut v = View::new(ViewConfig::new(DIR));
    connected(&mut v);
    v.start(T);
    let s = sent(&mut v);
    v.handle_session(T, SessionChange::Suspended);
    v.handle_reply(T, s[0].0, Err(Error::ConnectionLoss));
    assert!(sent(&mut v).is_empty());
    assert!(v.poll_timeout().is_none(), "no timer while suspended");
    v.handle_session(T, SessionChange::Reconnected { session_id: S });
    assert_eq!(
        events(&mut v),
        [ViewEvent::Suspended, ViewEvent::Reconnected]
    );
    // The lost listing may not have set its watch: listed again with one.
    assert_eq!(lines(&sent(&mut v)), ["sync /g", "list! /g"]);
}

#[test]
fn view_closed_while_backing_off_has_no_deadline_and_ignores_the_session() {
    let mut v = View::new(ViewConfig::new(DIR));
    connected(&mut v);
    v.start(T);
    let s = sent(&mut v);
    v.handle_reply(T, s[0].0, Err(Error::Overloaded));
    assert!(v.poll_timeout().is_some());
    v.close(T);
    assert!(v.poll_timeout().is_none());
    v.handle_session(T, SessionChange::Suspended);
    v.handle_session(T, SessionChange::Reconnected { session_id: S });
    v.handle_timeout(T + core::time::Duration::from_secs(60));
    assert_eq!(events(&mut v), [ViewEvent::Closed]);
    assert!(sent(&mut v).is_empty());
    assert!(v.is_done());
}
