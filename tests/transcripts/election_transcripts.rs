//! Transcript tests for `recipe::election`: scripted replies in, exact requests and
//! events out, in the lines of `kit.rs`.

use super::kit::*;
use zk_recipes::recipe::election::observer::{Observer, ObserverEvent, Participant};
use zk_recipes::recipe::election::{
    CandidateStatus, Election, ElectionConfig, ElectionEvent, Join, Leadership,
};
use zk_recipes::recipe::lock::LostReason;

const DIR: &str = "/app/election";
const ACK: &str = "/app/election-leader";
/// The acknowledgement node of the leadership with token 50.
const ACK50: &str = "/app/election-leader/50";
const SESSION: i64 = 0x77;
const T: Instant = Instant::ZERO;

fn node(id_n: u32, seq: u32) -> String {
    format!("_c_{}-latch-{seq:010}", id(id_n))
}

/// The node id of candidacy `n` (config entropy (7, 9)).
fn id(n: u32) -> String {
    zk_recipes::recipe::lock::node_id(7, 9 + n as u64)
}

fn path(name: &str) -> String {
    format!("{DIR}/{name}")
}

fn created(name: &str, czxid: i64) -> Result<Response, Error> {
    Ok(Response::PathStat {
        path: path(name),
        stat: st().czxid(czxid).owner(SESSION),
    })
}

fn data(d: &[u8], czxid: i64, version: i32) -> Result<Response, Error> {
    Ok(Response::Data {
        data: Bytes::copy_from_slice(d),
        stat: Stat {
            czxid,
            version,
            ephemeral_owner: SESSION,
            ..Stat::default()
        },
    })
}

fn multi_ok(n: usize) -> Result<Response, Error> {
    Ok(Response::Multi(vec![MultiResult::Check; n]))
}

fn election() -> Script<Election> {
    let mut s = Script::new(Election::new(ElectionConfig::new(DIR, "node-1", (7, 9))));
    s.session(SessionChange::Connected {
        session_id: SESSION,
    });
    s
}

/// Joins and leads as candidacy 1 with `node(1, 5)`, token 50; own watch answered.
fn leading() -> Script<Election> {
    let mut s = election();
    assert_eq!(s.r.join(T), Join::Pending);
    assert_eq!(
        s.sent(),
        [
            format!("create2 {DIR}/_c_{}-latch- es 'node-1'", id(1)),
            format!("list {DIR}")
        ],
        "one round trip to join"
    );
    s.reply("create2", created(&node(1, 5), 50));
    assert_eq!(s.events(), [ElectionEvent::Joined { node: node(1, 5) }]);
    assert_eq!(s.sent(), [format!("get! {}", path(&node(1, 5)))]);
    s.reply("list", children(&[&node(1, 5), "config"]));
    assert_eq!(
        s.events(),
        [ElectionEvent::Elected {
            fencing_token: 50,
            node: node(1, 5)
        }]
    );
    s.reply("get!", data(b"node-1", 50, 0));
    assert!(s.r.is_leader());
    s
}

#[test]
fn a_lone_candidate_leads_after_one_round_trip_with_curator_latch_nodes() {
    let s = leading();
    assert_eq!(s.r.leadership(), Some((50, node(1, 5).as_str())));
}

#[test]
fn a_follower_watches_only_its_predecessor_and_leads_when_it_goes_without_listing_again() {
    let mut s = election();
    s.r.join(T);
    s.reply("create2", created(&node(1, 7), 70));
    assert_eq!(s.events(), [ElectionEvent::Joined { node: node(1, 7) }]);
    // Curator's and kazoo's contenders count too; unknown children do not.
    s.reply(
        "list",
        children(&[
            &node(1, 7),
            "_c_j-latch-0000000003",
            "_c_k-lock-0000000005",
            "x",
        ]),
    );
    assert_eq!(
        s.sent(),
        [format!("list! {DIR}/_c_k-lock-0000000005")],
        "the nearest lower candidate only (our own node's watch went out with the listing)"
    );
    assert!(s.events().is_empty());
    s.reply(
        &format!("get! {}", path(&node(1, 7))),
        data(b"node-1", 70, 0),
    );
    s.reply("list! /app/election/_c_k", children(&[]));
    s.fire(
        EventType::NodeDeleted,
        &format!("{DIR}/_c_k-lock-0000000005"),
    );
    // Two blockers were listed: list again, watch the next.
    assert_eq!(s.sent(), [format!("list {DIR}")]);
    s.reply("list", children(&[&node(1, 7), "_c_j-latch-0000000003"]));
    assert_eq!(s.sent(), [format!("list! {DIR}/_c_j-latch-0000000003")]);
    s.reply("list! /app/election/", children(&[]));
    s.fire(
        EventType::NodeDeleted,
        &format!("{DIR}/_c_j-latch-0000000003"),
    );
    assert!(
        s.sent().is_empty(),
        "the only lower candidate went: no listing"
    );
    assert_eq!(
        s.events(),
        [ElectionEvent::Elected {
            fencing_token: 70,
            node: node(1, 7)
        }]
    );
}

#[test]
fn a_suspended_leader_is_told_and_leads_again_only_after_a_synced_check_of_its_node() {
    let mut s = leading();
    s.session(SessionChange::Suspended);
    assert_eq!(s.events(), [ElectionEvent::Suspended]);
    assert!(!s.r.is_leader());
    s.session(SessionChange::Reconnected {
        session_id: SESSION,
    });
    assert_eq!(
        s.sent(),
        [
            format!("sync {DIR}"),
            format!("exists {}", path(&node(1, 5)))
        ]
    );
    assert!(s.events().is_empty(), "not before the check");
    s.reply("sync", Ok(Response::Path(DIR.into())));
    s.reply("exists", Ok(Response::Stat(st().czxid(50).owner(SESSION))));
    assert_eq!(s.events(), [ElectionEvent::Reconnected]);
    assert!(s.r.is_leader());
}

#[test]
fn expiry_ends_the_leadership_and_the_next_session_stands_again_with_a_fresh_node_id() {
    let mut s = leading();
    s.session(SessionChange::Suspended);
    s.session(SessionChange::Expired);
    assert_eq!(
        s.events(),
        [
            ElectionEvent::Suspended,
            ElectionEvent::Lost {
                reason: LostReason::SessionExpired
            }
        ]
    );
    s.pending.clear(); // the session answered everything
    assert!(s.sent().is_empty(), "nothing until a new session");
    s.session(SessionChange::Connected { session_id: 0x88 });
    assert_eq!(
        s.sent(),
        [
            format!("create2 {DIR}/_c_{}-latch- es 'node-1'", id(2)),
            format!("list {DIR}")
        ],
        "a new candidacy, a new protected id"
    );
    assert!(!s.r.is_done());
}

#[test]
fn expiry_with_no_new_session_ends_the_machine() {
    let mut s = leading();
    s.session(SessionChange::Expired);
    s.session(SessionChange::Closed); // the client says no new session follows
    assert_eq!(
        s.events(),
        [
            ElectionEvent::Lost {
                reason: LostReason::SessionExpired
            },
            ElectionEvent::Closed
        ]
    );
    assert!(s.r.is_done());
}

#[test]
fn without_rejoin_an_expiry_ends_the_candidate() {
    let mut config = ElectionConfig::new(DIR, "node-1", (7, 9));
    config.rejoin = false;
    let mut s = Script::new(Election::new(config));
    s.session(SessionChange::Connected {
        session_id: SESSION,
    });
    s.r.join(T);
    s.session(SessionChange::Expired);
    s.pending.clear();
    assert_eq!(s.events(), [ElectionEvent::Closed]);
    assert!(s.r.is_done());
}

#[test]
fn acknowledgement_is_one_multi_checked_against_our_candidate_node() {
    let mut s = leading();
    assert!(s.r.acknowledge(T));
    assert_eq!(
        s.sent(),
        [format!(
            "multi[check {} @-1, create {ACK50} e 'node-1']",
            path(&node(1, 5))
        )]
    );
    s.reply("multi", multi_ok(2));
    assert_eq!(
        s.events(),
        [ElectionEvent::Acknowledged { fencing_token: 50 }]
    );
    assert!(s.r.is_acknowledged());
}

#[test]
fn a_deposed_leader_cannot_acknowledge() {
    let mut s = leading();
    s.r.acknowledge(T);
    // Our node was deleted under us (the watch has not fired yet): the check fails.
    s.reply("multi", multi_failed(0, ErrorCode::NoNode, 2));
    assert_eq!(
        s.events(),
        [ElectionEvent::AckFailed {
            error: Error::Server(ErrorCode::NoNode)
        }]
    );
    let mut follower = election();
    assert!(!follower.r.acknowledge(T), "not leading: refused at once");
}

#[test]
fn a_missing_acknowledgement_directory_is_created_as_a_container_then_written_again() {
    let mut s = leading();
    s.r.acknowledge(T);
    s.reply("multi", multi_failed(1, ErrorCode::NoNode, 2));
    assert_eq!(
        s.sent(),
        ["container /app".to_string(), format!("container {ACK}")]
    );
    assert!(s.events().is_empty());
    s.reply("container /app", code(ErrorCode::NodeExists));
    s.reply("container", Ok(Response::Path(ACK.into())));
    assert_eq!(
        s.sent(),
        [format!(
            "multi[check {} @-1, create {ACK50} e 'node-1']",
            path(&node(1, 5))
        )]
    );
    s.reply("multi", multi_ok(2));
    assert_eq!(
        s.events(),
        [ElectionEvent::Acknowledged { fencing_token: 50 }]
    );
}

#[test]
fn an_acknowledgement_directory_that_cannot_be_made_is_a_clear_error() {
    let mut s = leading();
    s.r.acknowledge(T);
    for _ in 0..2 {
        s.reply("multi", multi_failed(1, ErrorCode::NoNode, 2));
        s.reply("container /app", code(ErrorCode::NoAuth));
        s.reply("container", code(ErrorCode::NoNode));
    }
    s.reply("multi", multi_failed(1, ErrorCode::NoNode, 2));
    assert_eq!(
        s.events(),
        [ElectionEvent::AckFailed {
            error: Error::NoParent {
                path: ACK.into(),
                code: ErrorCode::NoNode
            }
        }]
    );
    assert!(s.sent().is_empty(), "bounded: no third round");
}

#[test]
fn an_acknowledgement_whose_reply_was_lost_is_found_to_be_ours() {
    let mut s = leading();
    s.r.acknowledge(T);
    s.sent();
    s.session(SessionChange::Suspended);
    s.reply("multi", Err(Error::ConnectionLoss));
    assert_eq!(s.events(), [ElectionEvent::Suspended]);
    s.session(SessionChange::Reconnected {
        session_id: SESSION,
    });
    s.reply("sync", Ok(Response::Path(DIR.into())));
    s.reply("exists", Ok(Response::Stat(st().czxid(50).owner(SESSION))));
    assert_eq!(s.events(), [ElectionEvent::Reconnected]);
    // Sent again only once leading again; the first one had been applied.
    assert_eq!(
        s.sent(),
        [format!(
            "multi[check {} @-1, create {ACK50} e 'node-1']",
            path(&node(1, 5))
        )]
    );
    // Its name is ours alone: it exists, so it is ours.
    s.reply("multi", multi_failed(1, ErrorCode::NodeExists, 2));
    assert_eq!(
        s.events(),
        [ElectionEvent::Acknowledged { fencing_token: 50 }]
    );
}

#[test]
fn a_refused_acknowledgement_is_retried_after_a_backoff_never_taken_for_success() {
    let mut s = leading();
    s.r.acknowledge(T);
    s.reply("multi", Err(Error::Overloaded));
    assert!(s.events().is_empty());
    assert!(s.sent().is_empty(), "not at once");
    let at = s.r.poll_timeout().expect("a retry deadline");
    s.r.handle_timeout(at);
    assert_eq!(
        s.sent(),
        [format!(
            "multi[check {} @-1, create {ACK50} e 'node-1']",
            path(&node(1, 5))
        )]
    );
    s.reply("multi", multi_ok(2));
    assert_eq!(
        s.events(),
        [ElectionEvent::Acknowledged { fencing_token: 50 }]
    );
}

#[test]
fn resigning_withdraws_the_acknowledgement_first_then_the_node_and_can_requeue() {
    let mut s = leading();
    s.r.acknowledge(T);
    s.reply("multi", multi_ok(2));
    s.events();
    assert!(s.r.resign(T, true));
    assert_eq!(
        s.sent(),
        [format!("delete {ACK50}")],
        "the acknowledgement first: never one of a candidate that is gone"
    );
    s.reply(&format!("delete {ACK50}"), Ok(Response::Empty));
    assert_eq!(s.sent(), [format!("delete {}", path(&node(1, 5)))]);
    s.reply("delete", Ok(Response::Empty));
    // The own-node watch request is still answered later; the lock ends after it.
    assert_eq!(s.events(), [ElectionEvent::Resigned]);
    assert_eq!(
        s.sent(),
        [
            format!("create2 {DIR}/_c_{}-latch- es 'node-1'", id(2)),
            format!("list {DIR}")
        ],
        "requeued at the back of the line"
    );
}

#[test]
fn close_ends_with_closed_and_nothing_left() {
    let mut s = leading();
    s.r.close(T);
    s.reply("delete", Ok(Response::Empty));
    assert_eq!(s.events(), [ElectionEvent::Resigned, ElectionEvent::Closed]);
    assert!(s.r.is_done());
    assert_eq!(s.r.join(T), Join::Ended, "a closed election stays closed");
}

#[test]
fn an_acknowledgement_path_inside_the_candidates_directory_is_refused() {
    let mut config = ElectionConfig::new(DIR, "node-1", (7, 9));
    config.ack_dir = format!("{DIR}/leader");
    let mut s = Script::new(Election::new(config));
    s.session(SessionChange::Connected {
        session_id: SESSION,
    });
    s.r.join(T);
    assert!(s.sent().is_empty());
    assert!(matches!(
        s.events()[..],
        [ElectionEvent::Failed {
            error: Error::InvalidPath { .. }
        }]
    ));
    assert!(s.r.is_done());
}

#[test]
fn the_candidate_status_is_what_both_adapters_report() {
    let mut st = CandidateStatus::default();
    assert_eq!(st.elected_outcome(), None);
    st.apply(&ElectionEvent::Elected {
        fencing_token: 9,
        node: "n".into(),
    });
    assert_eq!(st.elected_outcome(), Some(Ok(9)));
    st.apply(&ElectionEvent::Suspended);
    assert_eq!(st.state(), Leadership::Suspended);
    assert_eq!(st.elected_outcome(), None, "do not act while suspended");
    st.apply(&ElectionEvent::Reconnected);
    assert!(st.is_leader());
    st.apply(&ElectionEvent::Lost {
        reason: LostReason::NodeDeleted,
    });
    assert_eq!(st.state(), Leadership::Follower);
    st.apply(&ElectionEvent::Closed);
    assert_eq!(st.elected_outcome(), Some(Err(Error::Closed)));
    assert_eq!(
        ElectionEvent::Lost {
            reason: LostReason::NodeDeleted
        }
        .ack_outcome(),
        Some(Err(Error::NotLeader))
    );
}

// ----- observer -----

fn observer() -> Script<Observer> {
    let mut s = Script::new(Observer::new(DIR));
    s.session(SessionChange::Connected {
        session_id: SESSION,
    });
    s.r.start(T);
    assert_eq!(s.sent(), [format!("list! {DIR}"), format!("list! {ACK}")]);
    s
}

fn participant(id: &str, node: &str, token: i64) -> Participant {
    Participant {
        id: id.into(),
        node: node.into(),
        fencing_token: token,
    }
}

#[test]
fn an_observer_reads_each_candidate_once_and_reports_the_leader_and_its_acknowledgement() {
    let mut s = observer();
    s.reply(
        "list",
        children(&["_c_b-latch-0000000002", "_c_a-latch-0000000001", "stray"]),
    );
    assert_eq!(
        s.sent(),
        [
            format!("get {DIR}/_c_a-latch-0000000001"),
            format!("get {DIR}/_c_b-latch-0000000002"),
            format!("get {DIR}/stray")
        ],
        "every child is read once (as Curator's getParticipants does)"
    );
    s.reply("get /app/election/stray", data(b"?", 3, 0));
    s.reply("get /app/election/_c_b", data(b"b", 20, 0));
    assert!(s.events().is_empty(), "the leader's data is not in yet");
    s.reply("get /app/election/_c_a", data(b"a", 10, 0));
    let a = participant("a", "_c_a-latch-0000000001", 10);
    let b = participant("b", "_c_b-latch-0000000002", 20);
    assert_eq!(s.events(), [ObserverEvent::Leader(Some(a.clone()))]);
    assert_eq!(s.r.participants(), [a.clone(), b.clone()]);
    // The acknowledgements: an earlier leader's (token 5) does not count.
    s.reply("list! /app/election-leader", children(&["5"]));
    s.reply("get /app/election-leader/5", data(b"z", 5, 0));
    assert!(s.events().is_empty());
    assert_eq!(s.r.acknowledged(), None);
    s.fire(EventType::NodeChildrenChanged, ACK);
    s.reply("list! /app/election-leader", children(&["5", "10"]));
    s.reply("get /app/election-leader/10", data(b"a", 10, 0));
    assert_eq!(s.events(), [ObserverEvent::Acknowledged(a.clone())]);
    // The leader goes: one new listing, no new reads (b is known).
    s.fire(EventType::NodeChildrenChanged, DIR);
    s.reply("list", children(&["_c_b-latch-0000000002"]));
    assert!(s.sent().is_empty());
    assert_eq!(s.events(), [ObserverEvent::Leader(Some(b))]);
    assert_eq!(s.r.acknowledged(), None, "a's acknowledgement is not b's");
}

#[test]
fn an_observer_of_a_missing_directory_sees_nobody_and_waits_for_it() {
    let mut s = observer();
    s.reply("list", code(ErrorCode::NoNode));
    assert_eq!(s.sent(), [format!("exists! {DIR}")]);
    assert_eq!(s.events(), [ObserverEvent::Leader(None)]);
    s.reply("list! /app/election-leader", code(ErrorCode::NoNode));
    assert_eq!(s.sent(), [format!("exists! {ACK}")]);
    s.reply(&format!("exists! {DIR}"), code(ErrorCode::NoNode));
    s.fire(EventType::NodeCreated, DIR);
    assert_eq!(s.sent(), [format!("list! {DIR}")]);
}

#[test]
fn a_synced_observer_reports_no_leader_before_it_read_the_lowest_candidate() {
    // Seen against a real server: the directory appears with two candidates in one
    // listing; reads go out in name order, and the later candidate's name sorts first.
    let mut s = observer();
    s.reply("list", code(ErrorCode::NoNode));
    s.reply("list! /app/election-leader", code(ErrorCode::NoNode));
    assert_eq!(s.events(), [ObserverEvent::Leader(None)]);
    s.reply(&format!("exists! {DIR}"), code(ErrorCode::NoNode));
    s.fire(EventType::NodeCreated, DIR);
    s.reply(
        "list",
        children(&["_c_z-latch-0000000001", "_c_a-latch-0000000002"]),
    );
    s.reply("get /app/election/_c_a", data(b"b", 20, 0));
    assert!(
        s.events().is_empty(),
        "the lowest candidate is listed but not read: nobody known to lead yet"
    );
    assert_eq!(s.r.leader(), None);
    s.reply("get /app/election/_c_z", data(b"a", 10, 0));
    let a = participant("a", "_c_z-latch-0000000001", 10);
    assert_eq!(s.events(), [ObserverEvent::Leader(Some(a))]);
}

#[test]
fn participants_stop_before_a_listed_candidate_not_read_yet() {
    let mut s = observer();
    s.reply("list", children(&["_c_m-latch-0000000001"]));
    s.reply("get /app/election/_c_m", data(b"m", 5, 0));
    s.reply("list! /app/election-leader", children(&[]));
    let m = participant("m", "_c_m-latch-0000000001", 5);
    assert_eq!(s.events(), [ObserverEvent::Leader(Some(m))]);
    // m goes; two candidates joined meanwhile; the later one's name sorts first.
    s.fire(EventType::NodeChildrenChanged, DIR);
    s.reply(
        "list",
        children(&["_c_z-latch-0000000002", "_c_a-latch-0000000003"]),
    );
    s.reply("get /app/election/_c_a", data(b"b", 30, 0));
    assert!(s.events().is_empty());
    assert_eq!(
        s.r.participants(),
        [],
        "the first in election order is not read yet: no later one is put first"
    );
    s.reply("get /app/election/_c_z", data(b"z", 20, 0));
    let z = participant("z", "_c_z-latch-0000000002", 20);
    let b = participant("b", "_c_a-latch-0000000003", 30);
    assert_eq!(s.events(), [ObserverEvent::Leader(Some(z.clone()))]);
    assert_eq!(s.r.participants(), [z, b]);
}

#[test]
fn an_observer_retries_what_the_connection_lost_after_the_reconnect() {
    let mut s = observer();
    s.session(SessionChange::Suspended);
    s.reply("list", Err(Error::ConnectionLoss));
    s.reply("list", Err(Error::ConnectionLoss));
    assert!(s.sent().is_empty(), "not while suspended");
    s.session(SessionChange::Reconnected {
        session_id: SESSION,
    });
    assert_eq!(
        s.sent(),
        [
            format!("sync {DIR}"),
            format!("list! {DIR}"),
            format!("sync {ACK}"),
            format!("list! {ACK}")
        ],
        "synced first: the reconnect may land on a lagging follower"
    );
}

#[test]
fn a_leader_whose_node_is_deleted_is_deposed_at_once_and_stands_again() {
    let mut s = leading();
    s.r.acknowledge(T);
    s.reply("multi", multi_ok(2));
    s.events();
    s.fire(EventType::NodeDeleted, &path(&node(1, 5)));
    assert_eq!(
        s.events(),
        [ElectionEvent::Lost {
            reason: LostReason::NodeDeleted
        }]
    );
    assert!(!s.r.is_leader());
    // Our acknowledgement goes (its name is ours alone: no risk of deleting the next
    // leader's), and we stand again.
    assert_eq!(
        s.sent(),
        [
            format!("delete {ACK50}"),
            format!("create2 {DIR}/_c_{}-latch- es 'node-1'", id(2)),
            format!("list {DIR}")
        ]
    );
}

#[test]
fn a_resignation_ends_even_when_the_session_expires_before_our_node_could_be_deleted() {
    let mut s = leading();
    s.session(SessionChange::Suspended);
    assert!(s.r.resign(T, false));
    assert!(s.sent().is_empty(), "the delete waits for the connection");
    s.session(SessionChange::Expired);
    s.pending.clear();
    let ev = s.events();
    assert_eq!(ev.last(), Some(&ElectionEvent::Resigned), "{ev:?}");
    s.session(SessionChange::Connected { session_id: 0x88 });
    assert!(
        s.sent().is_empty(),
        "resigned without rejoin: no new candidacy"
    );
}

#[test]
fn a_resignation_ends_when_our_node_was_deleted_under_the_withdrawal() {
    let mut s = leading();
    s.r.acknowledge(T);
    s.reply("multi", multi_ok(2));
    s.events();
    s.r.resign(T, false);
    assert_eq!(s.sent(), [format!("delete {ACK50}")]);
    s.fire(EventType::NodeDeleted, &path(&node(1, 5)));
    s.reply(&format!("delete {ACK50}"), Ok(Response::Empty));
    assert_eq!(
        s.events(),
        [
            ElectionEvent::Lost {
                reason: LostReason::NodeDeleted
            },
            ElectionEvent::Resigned
        ]
    );
    assert!(s.sent().is_empty());
}

#[test]
fn without_rejoin_a_leader_whose_node_is_deleted_ends() {
    let mut config = ElectionConfig::new(DIR, "node-1", (7, 9));
    config.rejoin = false;
    let mut s = Script::new(Election::new(config));
    s.session(SessionChange::Connected {
        session_id: SESSION,
    });
    s.r.join(T);
    s.reply("create2", created(&node(1, 5), 50));
    s.reply("list", children(&[&node(1, 5)]));
    s.reply("get!", data(b"node-1", 50, 0));
    s.events();
    s.fire(EventType::NodeDeleted, &path(&node(1, 5)));
    assert_eq!(
        s.events(),
        [
            ElectionEvent::Lost {
                reason: LostReason::NodeDeleted
            },
            ElectionEvent::Closed
        ]
    );
    assert!(s.sent().is_empty());
    assert!(s.r.is_done());
}

// ----- pinned before the port onto the kit's `Protocol` (issue 38): interleavings
// the property and simulator suites reach only by chance -----

#[test]
fn resigning_with_an_acknowledgement_in_flight_waits_for_it_reports_nothing_and_deletes_it_first() {
    let mut s = leading();
    s.r.acknowledge(T);
    s.sent();
    assert!(s.r.resign(T, false));
    assert!(
        s.sent().is_empty(),
        "nothing more while the multi is in flight"
    );
    // It was applied: not reported (we are resigning), but deleted before our node.
    s.reply("multi", multi_ok(2));
    assert!(s.events().is_empty(), "no Acknowledged while resigning");
    assert!(!s.r.is_acknowledged());
    assert_eq!(s.sent(), [format!("delete {ACK50}")]);
    assert!(!s.r.acknowledge(T), "no acknowledgement while resigning");
    s.reply(&format!("delete {ACK50}"), Ok(Response::Empty));
    assert_eq!(s.sent(), [format!("delete {}", path(&node(1, 5)))]);
    s.reply("delete", Ok(Response::Empty));
    assert_eq!(s.events(), [ElectionEvent::Resigned]);
    assert!(
        s.sent().is_empty(),
        "resigned without rejoin: no new candidacy"
    );
}

#[test]
fn an_acknowledgement_waiting_for_its_retry_is_dropped_when_deposed_and_its_node_withdrawn() {
    let mut s = leading();
    s.r.acknowledge(T);
    s.sent();
    // Refused or lost: perhaps applied. It waits for the backoff...
    s.reply("multi", Err(Error::Overloaded));
    assert!(s.sent().is_empty());
    // ... and we are deposed meanwhile.
    s.fire(EventType::NodeDeleted, &path(&node(1, 5)));
    assert_eq!(
        s.events(),
        [ElectionEvent::Lost {
            reason: LostReason::NodeDeleted
        }]
    );
    let sent = s.sent();
    assert!(
        sent.iter().all(|l| !l.starts_with("multi")),
        "the acknowledgement is never sent again once deposed: {sent:?}"
    );
    let at =
        s.r.poll_timeout()
            .expect("the withdrawal waits for the backoff");
    s.r.handle_timeout(at);
    assert_eq!(
        s.sent(),
        [format!("delete {ACK50}")],
        "what the refused write may have made is withdrawn"
    );
    s.reply(&format!("delete {ACK50}"), no_node());
    assert!(s.sent().is_empty());
    assert!(s.events().is_empty());
}

#[test]
fn joining_while_resigning_stands_again_once_the_resignation_is_over() {
    let mut s = leading();
    assert!(s.r.resign(T, false));
    assert_eq!(s.sent(), [format!("delete {}", path(&node(1, 5)))]);
    assert_eq!(
        s.r.join(T),
        Join::Pending,
        "in line again only after Resigned"
    );
    assert!(s.sent().is_empty());
    s.reply("delete", Ok(Response::Empty));
    assert_eq!(s.events(), [ElectionEvent::Resigned]);
    assert_eq!(
        s.sent(),
        [
            format!("create2 {DIR}/_c_{}-latch- es 'node-1'", id(2)),
            format!("list {DIR}")
        ]
    );
    s.reply("create2", created(&node(2, 9), 90));
    assert_eq!(s.events(), [ElectionEvent::Joined { node: node(2, 9) }]);
    assert_eq!(s.r.join(T), Join::InLine);
}

#[test]
fn acknowledging_again_answers_at_once_and_a_new_leadership_acknowledges_afresh() {
    let mut s = leading();
    s.r.acknowledge(T);
    s.reply("multi", multi_ok(2));
    s.events();
    assert!(s.r.acknowledge(T));
    assert!(s.sent().is_empty(), "written already: nothing sent");
    assert_eq!(
        s.events(),
        [ElectionEvent::Acknowledged { fencing_token: 50 }]
    );
    assert_eq!(s.r.leadership(), Some((50, node(1, 5).as_str())));
    s.r.close(T);
    assert_eq!(s.sent(), [format!("delete {ACK50}")]);
    assert!(!s.r.is_acknowledged());
    assert_eq!(s.r.join(T), Join::Ended);
    assert!(!s.r.acknowledge(T), "closing: refused");
}
