//! Transcript tests for `recipe::barrier` and `recipe::double_barrier`: scripted replies
//! in, exact requests and events out, in the lines of `kit.rs`.

use super::kit::*;
use std::time::Duration;

use zk_recipes::recipe::barrier::{Barrier, BarrierConfig, BarrierEvent};
use zk_recipes::recipe::double_barrier::{
    DoubleBarrier, DoubleBarrierConfig, DoubleBarrierEvent as E, Phase,
};

const B: &str = "/jobs/b";
const SESSION: i64 = 0x77;

fn script<R: Recipe>(r: R) -> Script<R> {
    Script::connected(r, SESSION)
}

fn stat() -> Result<Response, Error> {
    Ok(Response::Stat(Stat::default()))
}

fn multi_deleted(n: usize) -> Result<Response, Error> {
    Ok(Response::Multi(vec![MultiResult::Delete; n]))
}

// ----- barrier -----

fn waiter(deadline: Option<Instant>) -> Script<Barrier> {
    let mut s = script(Barrier::wait(BarrierConfig::new(B), deadline));
    s.r.start(Instant::ZERO);
    assert_eq!(s.sent(), [format!("sync {B}"), format!("exists! {B}")]);
    s.reply("sync", created(B));
    s
}

#[test]
fn wait_on_a_missing_barrier_is_released_at_once() {
    let mut s = waiter(None);
    s.reply("exists", code(ErrorCode::NoNode));
    assert_eq!(s.events(), [BarrierEvent::Released]);
    assert!(s.r.is_done());
}

#[test]
fn wait_is_released_by_the_deletion() {
    let mut s = waiter(None);
    s.reply("exists", stat());
    assert!(s.events().is_empty());
    s.fire(EventType::NodeDataChanged, B); // still up: watch on
    assert_eq!(s.sent(), [format!("sync {B}"), format!("exists! {B}")]);
    s.reply("sync", created(B));
    s.reply("exists", stat());
    s.fire(EventType::NodeDeleted, B);
    assert_eq!(s.events(), [BarrierEvent::Released]);
    assert!(s.r.is_done());
}

#[test]
fn wait_deadline_is_honoured() {
    let mut s = waiter(Some(Instant::ZERO + Duration::from_millis(50)));
    s.reply("exists", stat());
    assert_eq!(
        s.r.poll_timeout(),
        Some(Instant::ZERO + Duration::from_millis(50))
    );
    s.advance(Duration::from_millis(50));
    assert_eq!(s.events(), [BarrierEvent::TimedOut]);
    assert!(s.r.is_done());
}

#[test]
fn waiter_is_told_of_suspension_and_looks_again_after_reconnect() {
    let mut s = waiter(None);
    s.reply("exists", stat());
    s.disconnect();
    assert_eq!(s.events(), [BarrierEvent::Suspended]);
    assert!(s.sent().is_empty());
    s.session(SessionChange::Reconnected {
        session_id: SESSION,
    });
    assert_eq!(s.events(), [BarrierEvent::Reconnected]);
    // Removed while we were away: a synced look releases us.
    assert_eq!(s.sent(), [format!("sync {B}"), format!("exists! {B}")]);
    s.reply("sync", created(B));
    s.reply("exists", code(ErrorCode::NoNode));
    assert_eq!(s.events(), [BarrierEvent::Released]);
}

#[test]
fn waiter_is_told_when_the_session_is_lost() {
    let mut s = waiter(None);
    s.reply("exists", stat());
    s.session(SessionChange::Expired);
    assert_eq!(
        s.events(),
        [BarrierEvent::Failed {
            error: Error::SessionExpired
        }]
    );
    assert!(s.r.is_done());
}

#[test]
fn an_old_deletion_heard_before_the_answer_does_not_release_a_new_wait() {
    // The barrier was removed and set again; the removal's notification (for an older
    // wait's watch) arrives before this wait's `exists` answer, which says it is up.
    let mut s = waiter(None);
    s.r.handle_watch(
        s.now,
        1,
        &WatchEvent {
            event_type: EventType::NodeDeleted,
            path: B.into(),
        },
    );
    assert!(s.events().is_empty());
    s.reply("exists", stat());
    assert!(s.events().is_empty());
    s.fire(EventType::NodeDeleted, B);
    assert_eq!(s.events(), [BarrierEvent::Released]);
}

#[test]
fn set_creates_parents_as_containers_and_exists_is_success() {
    let mut s = script(Barrier::set(BarrierConfig::new(B)));
    s.r.start(Instant::ZERO);
    assert_eq!(s.sent(), [format!("create {B}")]);
    s.reply("create", code(ErrorCode::NoNode));
    assert_eq!(
        s.sent(),
        ["container /jobs".to_string(), format!("create {B}")]
    );
    s.reply("container", created("/jobs"));
    s.reply("create", code(ErrorCode::NodeExists));
    assert_eq!(s.events(), [BarrierEvent::Set]);
    assert!(s.r.is_done());
}

#[test]
fn remove_is_retried_after_a_lost_reply_and_no_node_is_success() {
    let mut s = script(Barrier::remove(BarrierConfig::new(B)));
    s.r.start(Instant::ZERO);
    assert_eq!(s.sent(), [format!("delete {B}")]);
    s.disconnect();
    assert!(s.sent().is_empty());
    s.session(SessionChange::Reconnected {
        session_id: SESSION,
    });
    assert_eq!(s.sent(), [format!("delete {B}")]);
    s.reply("delete", code(ErrorCode::NoNode)); // the first one had landed
    assert_eq!(s.events(), [BarrierEvent::Removed]);
}

#[test]
fn a_refused_set_is_retried_after_a_backoff_never_reported_as_success() {
    let mut s = script(Barrier::set(BarrierConfig::new(B)));
    s.r.start(Instant::ZERO);
    s.reply("create", Err(Error::Overloaded));
    assert!(s.events().is_empty());
    assert!(s.sent().is_empty());
    s.advance(Duration::from_millis(10));
    assert_eq!(s.sent(), [format!("create {B}")]);
    s.reply("create", created(B));
    assert_eq!(s.events(), [BarrierEvent::Set]);
}

#[test]
fn a_wait_whose_deadline_passed_before_its_first_look_still_looks_once() {
    // A zero timeout is a poll: the first look decides, and no past deadline is
    // reported as a timer meanwhile.
    let mut s = waiter(Some(Instant::ZERO));
    assert_eq!(s.r.poll_timeout(), None);
    assert!(s.events().is_empty());
    s.reply("exists", code(ErrorCode::NoNode));
    assert_eq!(s.events(), [BarrierEvent::Released]);

    let mut s = waiter(Some(Instant::ZERO));
    s.reply("exists", stat());
    assert_eq!(s.events(), [BarrierEvent::TimedOut]);
    assert!(s.r.is_done());
}

#[test]
fn a_past_deadline_ends_a_refused_first_look() {
    let mut s = waiter(Some(Instant::ZERO));
    s.reply("exists", Err(Error::Overloaded));
    assert_eq!(s.events(), [BarrierEvent::TimedOut]);
    assert!(s.sent().is_empty());
    assert!(s.r.is_done());
}

#[test]
fn a_deadline_passing_while_suspended_before_any_look_times_out() {
    let mut s = waiter(Some(Instant::ZERO + Duration::from_millis(50)));
    s.disconnect();
    assert_eq!(s.events(), [BarrierEvent::Suspended]);
    s.advance(Duration::from_millis(50));
    assert_eq!(s.events(), [BarrierEvent::TimedOut]);
    assert!(s.r.is_done());
}

#[test]
fn a_refused_look_is_made_again_after_a_backoff_and_the_deadline_still_counts() {
    let mut s = waiter(Some(Instant::ZERO + Duration::from_millis(500)));
    s.reply("exists", Err(Error::Overloaded));
    assert!(s.events().is_empty());
    assert!(s.sent().is_empty());
    // The backoff ends before the deadline: the earlier of the two is the timer.
    let t = s.r.poll_timeout().expect("a timer");
    assert!(t < Instant::ZERO + Duration::from_millis(500), "{t:?}");
    s.advance(Duration::from_millis(10));
    assert_eq!(s.sent(), [format!("sync {B}"), format!("exists! {B}")]);
    s.reply("sync", created(B));
    s.reply("exists", stat());
    assert_eq!(
        s.r.poll_timeout(),
        Some(Instant::ZERO + Duration::from_millis(500))
    );
    s.fire(EventType::NodeDeleted, B);
    assert_eq!(s.events(), [BarrierEvent::Released]);
}

#[test]
fn a_deletion_of_another_path_or_before_the_look_is_up_does_not_release() {
    let mut s = waiter(None);
    s.reply("exists", stat());
    s.fire_at(2, EventType::NodeDeleted, "/jobs/other");
    assert!(s.events().is_empty());
    assert!(!s.r.is_done());
    // A data change: look again; a deletion heard before that look answers does not
    // count (the look decides).
    s.fire(EventType::NodeDataChanged, B);
    assert_eq!(s.sent(), [format!("sync {B}"), format!("exists! {B}")]);
    s.fire_at(2, EventType::NodeDeleted, B);
    assert!(s.events().is_empty());
    s.reply("sync", created(B));
    s.reply("exists", stat());
    assert!(s.events().is_empty());
}

#[test]
fn set_creates_the_parents_again_after_a_refused_parent_create() {
    let mut s = script(Barrier::set(BarrierConfig::new(B)));
    s.r.start(Instant::ZERO);
    assert_eq!(s.sent(), [format!("create {B}")]);
    s.reply("create", code(ErrorCode::NoNode));
    assert_eq!(
        s.sent(),
        ["container /jobs".to_string(), format!("create {B}")]
    );
    s.reply("container", Err(Error::Overloaded));
    s.reply("create", code(ErrorCode::NoNode));
    assert!(s.sent().is_empty());
    s.advance(Duration::from_millis(10));
    assert_eq!(
        s.sent(),
        ["container /jobs".to_string(), format!("create {B}")]
    );
    s.reply("container", created("/jobs"));
    s.reply("create", created(B));
    assert_eq!(s.events(), [BarrierEvent::Set]);
    assert!(s.r.is_done());
}

#[test]
fn a_command_abandoned_or_ended_before_start_reports_nothing() {
    let mut s = script(Barrier::set(BarrierConfig::new(B)));
    s.session(SessionChange::Expired);
    s.r.start(Instant::ZERO);
    assert!(s.sent().is_empty());
    assert!(s.events().is_empty());
    assert!(s.r.is_done());

    let mut s = waiter(None);
    s.r.handle_abandon(s.now);
    s.reply("exists", code(ErrorCode::NoNode));
    assert!(s.events().is_empty());
    assert!(s.r.is_done());
}

// ----- double barrier -----

const ME: &str = "55555555-0000-4000-8000-000000000000";
const LOW: &str = "11111111-0000-4000-8000-000000000000";
const HIGH: &str = "99999999-0000-4000-8000-000000000000";

fn me() -> String {
    format!("{B}/{ME}")
}
/// Our create of `ready`: only while our node is there (a multi with a check of it).
fn ready_create() -> String {
    format!("multi[check {} @-1, create {}]", me(), ready())
}

/// The reply to [`ready_create`]: made.
fn ready_made() -> Result<Response, Error> {
    multi(vec![MultiResult::Check, MultiResult::Create(ready())])
}

fn ready() -> String {
    format!("{B}/ready")
}
fn child(n: &str) -> String {
    format!("{B}/{n}")
}

fn triple() -> Vec<String> {
    vec![
        format!("container {B}"),
        format!("exists! {}", ready()),
        format!("create {} e", me()),
        format!("list {B}"),
    ]
}

fn participant(n: u32, deadline: Option<Instant>) -> Script<DoubleBarrier> {
    let mut s = script(DoubleBarrier::new(DoubleBarrierConfig::new(B, n, ME)));
    s.r.enter(Instant::ZERO, deadline).unwrap();
    assert_eq!(s.sent(), triple(), "one round trip");
    s.reply("container", code(ErrorCode::NodeExists));
    s
}

/// After `ready` was created: we look at our node (it is there) before `Entered`.
fn our_node_is_there(s: &mut Script<DoubleBarrier>) {
    assert!(s.events().is_empty(), "not entered before our node is seen");
    assert_eq!(s.sent(), [format!("exists {}", me())]);
    s.reply(&format!("exists {}", me()), stat());
}

/// `N` = `n`; `ready` absent, our node created, the listing shows `names`.
fn listed(n: u32, names: &[&str]) -> Script<DoubleBarrier> {
    let mut s = participant(n, None);
    s.reply("exists", code(ErrorCode::NoNode));
    s.reply("create", created(&me()));
    s.reply("list", children(names));
    s
}

/// The look at our node finds it gone: the participation fails, nothing left to do.
fn our_node_is_gone(s: &mut Script<DoubleBarrier>) {
    s.reply(&format!("exists {}", me()), code(ErrorCode::NoNode));
    assert_eq!(
        s.events(),
        [E::Failed {
            error: Error::Server(ErrorCode::NoNode)
        }]
    );
    assert!(s.sent().is_empty(), "nothing of ours left to delete");
    assert!(s.r.is_done());
}

/// The connection drops and the same session comes back: a waiter looks again, synced.
fn reconnect_and_look_again(s: &mut Script<DoubleBarrier>) {
    s.disconnect();
    s.session(SessionChange::Reconnected {
        session_id: SESSION,
    });
    assert_eq!(
        s.sent(),
        [
            format!("sync {B}"),
            format!("exists! {}", ready()),
            format!("list {B}")
        ]
    );
    s.reply("sync", created(B));
}

/// Entered with `others` (as the listing says), ready created by us.
fn entered(others: &[&str]) -> Script<DoubleBarrier> {
    let mut s = participant(others.len() as u32 + 1, None);
    s.reply("exists", code(ErrorCode::NoNode));
    s.reply("create", created(&me()));
    let mut names = others.to_vec();
    names.push(ME);
    s.reply("list", children(&names));
    assert_eq!(s.sent(), [ready_create(), format!("exists {}", me())]);
    s.reply("multi", ready_made());
    s.reply(&format!("exists {}", me()), stat());
    assert_eq!(s.events(), [E::Entered { late: false }]);
    s
}

#[test]
fn fewer_than_n_wait_for_ready_and_its_creation_releases_them() {
    let mut s = participant(3, None);
    s.reply("exists", code(ErrorCode::NoNode));
    s.reply("create", created(&me()));
    s.reply("list", children(&[LOW, ME]));
    assert!(s.sent().is_empty(), "wait: nothing more to send");
    assert!(s.events().is_empty());
    s.fire(EventType::NodeCreated, &ready());
    our_node_is_there(&mut s);
    assert_eq!(s.events(), [E::Entered { late: false }]);
    assert_eq!(s.r.phase(), Phase::Entered);
}

#[test]
fn the_nth_arrival_creates_ready() {
    let s = entered(&[LOW, HIGH]);
    assert_eq!(s.r.phase(), Phase::Entered);
}

#[test]
fn nth_arrival_finding_ready_created_concurrently_is_entered() {
    let mut s = participant(2, None);
    s.reply("exists", code(ErrorCode::NoNode));
    s.reply("create", created(&me()));
    s.reply("list", children(&[LOW, ME]));
    s.reply("multi", multi_failed(1, ErrorCode::NodeExists, 2));
    s.reply(&format!("exists {}", me()), stat());
    assert_eq!(s.events(), [E::Entered { late: false }]);
}

#[test]
fn a_late_arrival_is_released_at_once() {
    let mut s = participant(3, None);
    s.reply("exists", stat());
    s.reply("create", created(&me()));
    s.reply("list", children(&[LOW, "ready", ME]));
    assert_eq!(s.events(), [E::Entered { late: true }]);
    assert!(s.sent().is_empty());
}

#[test]
fn released_by_ready_even_if_it_is_gone_before_we_look() {
    // Curator 5.4's hang: the others entered and left (ready created and deleted)
    // before the slow participant counted. The creation notification, heard after our
    // create's answer, releases us; no count.
    let mut s = participant(2, None);
    s.reply("exists", code(ErrorCode::NoNode));
    s.reply("create", created(&me()));
    s.fire(EventType::NodeCreated, &ready());
    our_node_is_there(&mut s);
    assert_eq!(s.events(), [E::Entered { late: false }]);
    s.reply("list", children(&[ME])); // ready gone by now: ignored
    assert!(s.sent().is_empty());
    assert!(s.events().is_empty());
}

#[test]
fn an_old_ready_never_releases_a_straggler_of_the_last_round() {
    // Our exists saw the last round's ready; the round ended (ready and b deleted)
    // before our create: b is made again and we wait in the next round.
    let mut s = participant(2, None);
    s.reply("exists", stat());
    s.reply("create", code(ErrorCode::NoNode));
    assert_eq!(
        s.sent(),
        [
            "container /jobs".to_string(),
            format!("container {B}"),
            format!("exists! {}", ready()),
            format!("create {} e", me()),
            format!("list {B}"),
        ]
    );
    s.reply("list", code(ErrorCode::NoNode)); // the first triple's listing: ignored
                                              // The old ready's deletion (our first exists watched it) arrives before the answers.
    s.fire(EventType::NodeDeleted, &ready());
    s.reply("container", created("/jobs"));
    s.reply("container", created(B));
    s.reply("exists", code(ErrorCode::NoNode));
    s.reply("create", created(&me()));
    s.reply("list", children(&[ME]));
    assert!(s.events().is_empty(), "not released by the old round");
    assert!(s.sent().is_empty());
    s.fire(EventType::NodeCreated, &ready());
    our_node_is_there(&mut s);
    assert_eq!(s.events(), [E::Entered { late: false }]);
}

#[test]
fn a_watch_on_an_older_ready_is_replaced_by_a_creation_watch() {
    // exists saw a ready that is gone by the listing: our watch fires on its deletion,
    // not on the next creation, so we arm again.
    let mut s = participant(3, None);
    s.reply("exists", stat());
    s.reply("create", created(&me()));
    s.reply("list", children(&[ME]));
    assert_eq!(
        s.sent(),
        [format!("exists! {}", ready()), format!("list {B}")]
    );
    s.reply("exists", code(ErrorCode::NoNode));
    s.reply("list", children(&[ME, LOW]));
    assert!(s.sent().is_empty());
    s.fire(EventType::NodeCreated, &ready());
    our_node_is_there(&mut s);
    assert_eq!(s.events(), [E::Entered { late: false }]);
}

#[test]
fn a_lost_create_reply_is_sent_again_and_node_exists_is_ours() {
    let mut s = participant(2, None);
    s.disconnect();
    assert_eq!(s.events(), [E::Suspended], "a waiter is told");
    assert!(s.sent().is_empty());
    s.session(SessionChange::Reconnected {
        session_id: SESSION,
    });
    let mut expected = triple();
    expected.insert(1, format!("sync {B}"));
    assert_eq!(s.sent(), expected);
    s.reply("container", code(ErrorCode::NodeExists));
    s.reply("sync", created(B));
    s.reply("exists", code(ErrorCode::NoNode));
    s.reply("create", code(ErrorCode::NodeExists));
    s.reply("list", children(&[ME, LOW]));
    assert_eq!(s.sent(), [ready_create(), format!("exists {}", me())]);
    s.reply("multi", ready_made());
    s.reply(&format!("exists {}", me()), stat());
    assert_eq!(s.events(), [E::Reconnected, E::Entered { late: false }]);
}

#[test]
fn a_waiter_looks_again_after_reconnect() {
    let mut s = participant(3, None);
    s.reply("exists", code(ErrorCode::NoNode));
    s.reply("create", created(&me()));
    s.reply("list", children(&[ME]));
    reconnect_and_look_again(&mut s);
    s.reply("exists", stat());
    s.reply("list", children(&[ME, LOW, HIGH, "ready"]));
    assert_eq!(
        s.events(),
        [E::Suspended, E::Reconnected, E::Entered { late: true }]
    );
}

#[test]
fn enter_deadline_is_honoured_and_our_node_removed() {
    let mut s = participant(3, Some(Instant::ZERO + Duration::from_secs(1)));
    s.reply("exists", code(ErrorCode::NoNode));
    s.reply("create", created(&me()));
    s.reply("list", children(&[ME]));
    s.advance(Duration::from_secs(1));
    assert_eq!(s.events(), [E::NotEntered]);
    assert_eq!(s.sent(), [format!("delete {}", me())]);
    assert!(!s.r.is_done());
    s.reply("delete", ok());
    assert!(s.r.is_done());
}

#[test]
fn enter_deadline_while_the_create_is_in_flight_deletes_after_it() {
    let mut s = participant(3, Some(Instant::ZERO + Duration::from_secs(1)));
    s.advance(Duration::from_secs(1));
    assert_eq!(s.events(), [E::NotEntered]);
    assert_eq!(s.sent(), [format!("delete {}", me())]);
    s.reply("exists", code(ErrorCode::NoNode));
    s.reply("create", created(&me()));
    s.reply("list", children(&[ME]));
    assert!(s.sent().is_empty());
    s.reply("delete", ok());
    assert!(s.r.is_done());
}

/// Issue 26: an operator deleted our node while we waited for `ready`; the creation of
/// `ready` (by `N` others) then released us on a node that was gone. The creation now
/// makes us look at our node first: gone, the participation fails (final, seen by the
/// user), never `Entered`.
#[test]
fn an_operator_deleting_our_node_while_we_wait_fails_the_enter() {
    let mut s = listed(3, &[LOW, ME]);
    assert!(s.sent().is_empty());
    // Meanwhile an operator deletes our node, and three others make `ready`.
    s.fire(EventType::NodeCreated, &ready());
    assert!(s.events().is_empty(), "not entered before our node is seen");
    assert_eq!(s.sent(), [format!("exists {}", me())]);
    our_node_is_gone(&mut s);
}

/// The same for the `N`-th arrival: its listing showed `N` members with ours, and an
/// operator deleted ours before its `ready` was created: it fails, never `Entered`.
#[test]
fn an_operator_deleting_our_node_before_we_make_ready_fails_the_enter() {
    let mut s = listed(2, &[LOW, ME]);
    assert_eq!(s.sent(), [ready_create(), format!("exists {}", me())]);
    s.reply("multi", ready_made());
    assert!(s.events().is_empty(), "not entered before our node is seen");
    our_node_is_gone(&mut s);
}

/// The `N`-th arrival's listing counted our node, but an operator deleted it before the
/// create of `ready` reached the server: the create goes with a check of our node, so
/// `ready` is not made with too few members (found by `double_barrier_props`: "ready
/// created with at most 1 members present together, N = 2"), and the participation
/// fails, never `Entered`.
#[test]
fn a_ready_create_checks_our_node_and_fails_the_enter_if_it_is_gone() {
    let mut s = listed(2, &[LOW, ME]);
    assert_eq!(s.sent(), [ready_create(), format!("exists {}", me())]);
    s.reply("multi", multi_failed(0, ErrorCode::NoNode, 2));
    assert_eq!(
        s.events(),
        [E::Failed {
            error: Error::Server(ErrorCode::NoNode)
        }]
    );
    s.reply(&format!("exists {}", me()), code(ErrorCode::NoNode));
    assert!(s.events().is_empty(), "one final event");
}

/// The look at our node sent behind the create of `ready` was refused by the session
/// before the create was answered (a refusal answers the newest request at once): once
/// the create says `ready` exists, the look is made again — the participation does not
/// wait for ever (found by `double_barrier_props` in CI, seed 20261123).
#[test]
fn a_look_at_our_node_refused_before_the_ready_create_is_answered_is_made_again() {
    let mut s = listed(2, &[LOW, ME]);
    assert_eq!(s.sent(), [ready_create(), format!("exists {}", me())]);
    s.reply(&format!("exists {}", me()), Err(Error::Overloaded));
    s.reply("multi", multi_failed(1, ErrorCode::NodeExists, 2));
    s.advance(Duration::from_secs(1));
    assert_eq!(s.sent(), [format!("exists {}", me())]);
    s.reply(&format!("exists {}", me()), stat());
    assert_eq!(s.events(), [E::Entered { late: false }]);
}

/// Our create of `ready` lost its reply: it is not sent again blindly (the round may end
/// without us meanwhile — our node deleted, the others gone — and a `ready` made then
/// would open the next round with too few members); we look again, synced.
#[test]
fn a_ready_create_in_doubt_looks_again_instead_of_sending_it_again() {
    let mut s = listed(2, &[LOW, ME]);
    assert_eq!(s.sent(), [ready_create(), format!("exists {}", me())]);
    reconnect_and_look_again(&mut s);
    s.reply("exists", code(ErrorCode::NoNode));
    s.reply("list", children(&[LOW]));
    assert_eq!(
        s.events(),
        [
            E::Suspended,
            E::Reconnected,
            E::Failed {
                error: Error::Server(ErrorCode::NoNode)
            }
        ]
    );
}

#[test]
fn session_expiry_mid_enter_is_told() {
    let mut s = participant(3, None);
    s.reply("exists", code(ErrorCode::NoNode));
    s.reply("create", created(&me()));
    s.reply("list", children(&[ME]));
    s.session(SessionChange::Expired);
    assert_eq!(
        s.events(),
        [E::Failed {
            error: Error::SessionExpired
        }]
    );
    assert!(s.r.is_done());
}

#[test]
fn the_only_one_left_removes_its_node_ready_and_the_barrier_in_one_multi() {
    let mut s = entered(&[HIGH]);
    s.r.leave(s.now, None).unwrap();
    assert_eq!(s.sent(), [format!("list {B}")]);
    s.reply("list", children(&[ME, "ready"]));
    assert_eq!(
        s.sent(),
        [format!(
            "multi[delete {}, delete {}, delete {B}]",
            me(),
            ready()
        )]
    );
    s.reply("multi", multi_deleted(3));
    assert_eq!(s.events(), [E::Left]);
    assert!(s.r.is_done());
}

#[test]
fn the_lowest_waits_on_the_highest_then_leaves_last() {
    let mut s = entered(&[HIGH]);
    // ME < HIGH: we are the lowest.
    s.r.leave(s.now, None).unwrap();
    s.reply("list", children(&[HIGH, ME, "ready"]));
    assert_eq!(s.sent(), [format!("exists! {}", child(HIGH))]);
    s.reply("exists", stat());
    s.fire(EventType::NodeDeleted, &child(HIGH));
    assert_eq!(s.sent(), [format!("list {B}")]);
    s.reply("list", children(&[ME, "ready"]));
    s.reply("multi", multi_deleted(3));
    assert_eq!(s.events(), [E::Left]);
}

#[test]
fn others_delete_their_node_and_wait_on_the_lowest() {
    let mut s = entered(&[LOW, HIGH]);
    s.r.leave(s.now, None).unwrap();
    s.reply("list", children(&[HIGH, ME, LOW, "ready"]));
    assert_eq!(
        s.sent(),
        [
            format!("delete {}", me()),
            format!("exists! {}", child(LOW))
        ],
        "delete and watch in one round trip"
    );
    s.reply("delete", ok());
    s.reply("exists", stat());
    assert!(s.events().is_empty());
    s.fire(EventType::NodeDeleted, &child(LOW));
    assert_eq!(s.sent(), [format!("list {B}")]);
    s.reply("list", code(ErrorCode::NoNode)); // the last leaver removed b
    assert_eq!(s.events(), [E::Left]);
    assert!(s.r.is_done());
}

#[test]
fn the_last_leavers_multi_fails_if_someone_arrived_and_it_waits_for_them() {
    let mut s = entered(&[HIGH]);
    s.r.leave(s.now, None).unwrap();
    s.reply("list", children(&[ME, "ready"]));
    s.reply("multi", multi_failed(2, ErrorCode::NotEmpty, 3));
    assert!(s.events().is_empty());
    assert_eq!(s.sent(), [format!("list {B}")]);
    s.reply("list", children(&[ME, "ready", HIGH])); // a late arrival
    assert_eq!(s.sent(), [format!("exists! {}", child(HIGH))]);
}

#[test]
fn a_crashed_last_leavers_ready_is_cleaned_up() {
    let mut s = entered(&[LOW]);
    s.r.leave(s.now, None).unwrap();
    s.reply("list", children(&[LOW, ME, "ready"]));
    s.reply("delete", ok());
    s.reply("exists", stat());
    // LOW's session ended between its node and its multi... ready stays behind.
    s.fire(EventType::NodeDeleted, &child(LOW));
    s.reply("list", children(&["ready"]));
    assert_eq!(s.sent(), [format!("multi[delete {}, delete {B}]", ready())]);
    s.reply("multi", multi_deleted(2));
    assert_eq!(s.events(), [E::Left]);
}

#[test]
fn leave_deadline_is_honoured_and_our_node_removed() {
    let mut s = entered(&[HIGH]);
    s.r.leave(s.now, Some(s.now + Duration::from_secs(2)))
        .unwrap();
    s.reply("list", children(&[ME, HIGH, "ready"]));
    s.reply("exists", stat());
    s.advance(Duration::from_secs(2));
    assert_eq!(s.events(), [E::NotLeft]);
    assert_eq!(s.sent(), [format!("delete {}", me())]);
    s.reply("delete", ok());
    assert!(s.r.is_done());
}

#[test]
fn a_participant_whose_session_expires_in_leave_is_told() {
    let mut s = entered(&[HIGH]);
    s.r.leave(s.now, None).unwrap();
    s.disconnect();
    assert_eq!(s.events(), [E::Suspended]);
    s.session(SessionChange::Expired);
    assert_eq!(
        s.events(),
        [E::Failed {
            error: Error::SessionExpired
        }]
    );
    assert!(s.r.is_done());
}

#[test]
fn leave_after_reconnect_lists_again_synced() {
    let mut s = entered(&[LOW]);
    s.r.leave(s.now, None).unwrap();
    s.reply("list", children(&[LOW, ME, "ready"]));
    s.reply("delete", ok());
    s.reply("exists", stat());
    s.disconnect();
    assert_eq!(s.events(), [E::Suspended]);
    s.session(SessionChange::Reconnected {
        session_id: SESSION,
    });
    assert_eq!(s.events(), [E::Reconnected]);
    assert_eq!(s.sent(), [format!("sync {B}"), format!("list {B}")]);
    s.reply("sync", created(B));
    s.reply("list", children(&[]));
    assert_eq!(s.events(), [E::Left]);
}

#[test]
fn bad_configs_fail_at_once() {
    let mut b = DoubleBarrier::new(DoubleBarrierConfig::new(B, 0, ME));
    assert!(b.enter(Instant::ZERO, None).is_err());
    let mut b = DoubleBarrier::new(DoubleBarrierConfig::new(B, 2, "ready"));
    assert!(b.enter(Instant::ZERO, None).is_err());
    let mut b = DoubleBarrier::new(DoubleBarrierConfig::new("no-slash", 2, ME));
    assert!(b.enter(Instant::ZERO, None).is_err());
    let mut b = DoubleBarrier::new(DoubleBarrierConfig::new(B, 2, ME));
    assert!(b.leave(Instant::ZERO, None).is_err(), "leave before enter");
}

#[test]
fn the_last_leaver_keeps_b_when_its_deletion_is_refused_for_good() {
    let mut s = entered(&[HIGH]);
    s.r.leave(s.now, None).unwrap();
    s.reply("list", children(&[ME, "ready"]));
    s.reply("multi", multi_failed(2, ErrorCode::NoAuth, 3));
    assert!(s.events().is_empty());
    assert_eq!(s.sent(), [format!("list {B}")]);
    s.reply("list", children(&[ME, "ready"]));
    // `b` is left (no permission): our node and `ready` go without it.
    assert_eq!(
        s.sent(),
        [format!("multi[delete {}, delete {}]", me(), ready())]
    );
    s.reply("multi", multi_deleted(2));
    assert_eq!(s.events(), [E::Left]);
    assert!(s.r.is_done());
}

#[test]
fn a_refused_delete_of_our_node_in_leave_is_sent_again_after_a_backoff() {
    let mut s = entered(&[LOW]);
    s.r.leave(s.now, None).unwrap();
    s.reply("list", children(&[LOW, ME, "ready"]));
    s.reply("delete", Err(Error::Overloaded));
    s.reply("exists", stat());
    assert!(s.sent().is_empty());
    s.advance(Duration::from_millis(10));
    assert_eq!(s.sent(), [format!("delete {}", me())]);
    s.reply("delete", ok());
    s.fire(EventType::NodeDeleted, &child(LOW));
    // Synced: the refusal asked for a fresh read.
    assert_eq!(s.sent(), [format!("sync {B}"), format!("list {B}")]);
    s.reply("sync", created(B));
    s.reply("list", code(ErrorCode::NoNode));
    assert_eq!(s.events(), [E::Left]);
}

#[test]
fn a_deletion_of_another_member_while_leaving_is_not_ours_to_follow() {
    let mut s = entered(&[LOW, HIGH]);
    s.r.leave(s.now, None).unwrap();
    s.reply("list", children(&[HIGH, ME, LOW, "ready"]));
    s.reply("delete", ok());
    s.reply("exists", stat());
    // HIGH goes: we wait on LOW, nothing to do.
    s.fire_at(1, EventType::NodeDeleted, &child(HIGH));
    assert!(s.sent().is_empty());
    // LOW's data changes: still there, watch on.
    s.fire(EventType::NodeDataChanged, &child(LOW));
    assert_eq!(s.sent(), [format!("exists! {}", child(LOW))]);
    s.reply("exists", code(ErrorCode::NoNode));
    assert_eq!(s.sent(), [format!("list {B}")]);
}

#[test]
fn abandoning_an_entered_participant_deletes_its_node_and_reports_nothing() {
    let mut s = entered(&[HIGH]);
    s.r.handle_abandon(s.now);
    assert_eq!(s.r.phase(), Phase::Stopping);
    assert_eq!(s.sent(), [format!("delete {}", me())]);
    assert!(s.r.leave(s.now, None).is_err(), "no leave after abandon");
    s.reply("delete", ok());
    assert!(s.events().is_empty());
    assert_eq!(s.r.phase(), Phase::Done);
    assert!(s.r.is_done());
}

#[test]
fn a_stop_delete_refused_for_a_while_is_sent_again_and_then_done() {
    let mut s = participant(3, Some(Instant::ZERO + Duration::from_secs(1)));
    s.reply("exists", code(ErrorCode::NoNode));
    s.reply("create", created(&me()));
    s.reply("list", children(&[ME]));
    s.advance(Duration::from_secs(1));
    assert_eq!(s.events(), [E::NotEntered]);
    assert_eq!(s.sent(), [format!("delete {}", me())]);
    s.reply("delete", Err(Error::Overloaded));
    assert!(!s.r.is_done());
    s.advance(Duration::from_millis(10));
    assert_eq!(s.sent(), [format!("delete {}", me())]);
    s.reply("delete", code(ErrorCode::NoNode));
    assert!(s.r.is_done());
}
