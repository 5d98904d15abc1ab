//! Transcript tests for `recipe::ttl_node` (Curator's `PersistentTtlNode` format):
//! scripted replies in, exact requests and events out.

use super::kit::*;
use std::time::Duration;

use zk_recipes::recipe::ttl_node::{TtlNode, TtlNodeConfig, TtlNodeEvent as E};

const P: &str = "/svc/lease";
const TOUCH: &str = "/svc/lease/touch";
const TTL: Duration = Duration::from_millis(1000);

fn started() -> Script<TtlNode> {
    let mut s = Script::connected(TtlNode::new(TtlNodeConfig::new(P, "me", TTL)), 0x77);
    s.r.start(s.now);
    assert_eq!(
        s.sent(),
        [
            format!("container {P} 'me'"),
            format!("createTTL {TOUCH} ttl=1000")
        ]
    );
    s
}

fn present() -> Script<TtlNode> {
    let mut s = started();
    s.reply("container", created2(P, st()));
    assert!(s.events().is_empty(), "the container alone is not the node");
    s.reply("createTTL", created2(TOUCH, st()));
    assert_eq!(s.events(), [E::Present]);
    s
}

#[test]
fn the_node_is_a_container_with_a_ttl_touch_child_created_in_one_round_trip() {
    let s = present();
    assert_eq!(s.r.poll_timeout(), Some(ms(500)), "touched every ttl / 2");
}

#[test]
fn it_is_touched_every_half_ttl_and_present_is_reported_once() {
    let mut s = present();
    s.advance(Duration::from_millis(500));
    assert_eq!(s.sent(), [format!("set {TOUCH} ''")]);
    s.reply("set", stat_reply(st()));
    assert!(s.events().is_empty());
    assert_eq!(s.r.poll_timeout(), Some(ms(1000)));
}

#[test]
fn a_touch_that_finds_the_node_gone_reports_gone_and_creates_it_again() {
    let mut s = present();
    s.advance(Duration::from_millis(500));
    s.reply("set", no_node());
    assert_eq!(s.events(), [E::Gone]);
    assert_eq!(
        s.sent(),
        [
            format!("container {P} 'me'"),
            format!("createTTL {TOUCH} ttl=1000")
        ]
    );
    s.reply("container", created2(P, st()));
    s.reply("createTTL", created2(TOUCH, st()));
    assert_eq!(s.events(), [E::Present]);
}

#[test]
fn an_existing_node_gets_our_data_and_is_touched_at_once() {
    // A restart within the TTL: the container and the child are there.
    let mut s = started();
    s.reply("container", code(ErrorCode::NodeExists));
    assert_eq!(s.sent(), [format!("set {P} 'me'")]);
    s.reply("createTTL", code(ErrorCode::NodeExists));
    assert!(
        s.events().is_empty(),
        "an existing child is not touched yet"
    );
    s.reply("set /svc/lease ", stat_reply(st()));
    assert_eq!(s.sent(), [format!("set {TOUCH} ''")]);
    s.reply("set", stat_reply(st()));
    assert_eq!(s.events(), [E::Present]);
}

#[test]
fn missing_parents_are_created_as_containers_first() {
    let mut s = started();
    s.reply("container", no_node());
    s.reply("createTTL", no_node());
    assert_eq!(
        s.sent(),
        [
            "container /svc".to_string(),
            format!("container {P} 'me'"),
            format!("createTTL {TOUCH} ttl=1000")
        ]
    );
}

#[test]
fn a_server_with_ttl_nodes_off_ends_with_an_error_naming_the_cause() {
    let mut s = started();
    s.reply("container", created2(P, st()));
    s.reply("createTTL", code(ErrorCode::Unimplemented));
    assert_eq!(
        s.events(),
        [E::Failed {
            error: Error::TtlNodesDisabled { path: TOUCH.into() }
        }]
    );
    assert!(s.r.is_done());
}

#[test]
fn a_touch_answered_later_than_the_ttl_is_not_reported_present() {
    let mut s = started();
    s.reply("container", created2(P, st()));
    s.now = s.now + TTL;
    s.reply("createTTL", created2(TOUCH, st()));
    assert!(s.events().is_empty(), "the node may have lapsed since");
    assert_eq!(s.sent(), [format!("set {TOUCH} ''")]);
    s.reply("set", stat_reply(st()));
    assert_eq!(s.events(), [E::Present]);
}

#[test]
fn after_a_reconnect_it_is_touched_at_once_and_present_again() {
    let mut s = present();
    s.disconnect();
    assert_eq!(s.events(), [E::Suspended]);
    assert!(s.sent().is_empty());
    s.session(SessionChange::Reconnected { session_id: 0x77 });
    assert_eq!(s.sent(), [format!("set {TOUCH} ''")]);
    s.reply("set", stat_reply(st()));
    assert_eq!(s.events(), [E::Present]);
}

#[test]
fn an_expired_session_is_not_an_end_the_next_session_keeps_the_node() {
    let mut s = present();
    s.session(SessionChange::Expired);
    assert_eq!(s.events(), [E::Suspended]);
    s.session(SessionChange::Connected { session_id: 0x78 });
    assert_eq!(
        s.sent(),
        [
            format!("container {P} 'me'"),
            format!("createTTL {TOUCH} ttl=1000")
        ]
    );
    s.reply("container", code(ErrorCode::NodeExists));
    s.reply("createTTL", code(ErrorCode::NodeExists));
    s.reply("set /svc/lease ", stat_reply(st()));
    s.reply("set", stat_reply(st()));
    assert_eq!(s.events(), [E::Present]);
}

#[test]
fn close_stops_touching_and_deletes_only_an_empty_container() {
    let mut s = present();
    s.r.close(s.now);
    assert_eq!(s.sent(), [format!("delete {P}")]);
    assert!(s.events().is_empty());
    // The touch child is there: it lapses after its TTL, then the server reaps the
    // container.
    s.reply("delete", code(ErrorCode::NotEmpty));
    assert_eq!(s.events(), [E::Closed]);
    assert!(s.sent().is_empty());
    assert_eq!(s.r.poll_timeout(), None);
    assert!(s.r.is_done());
}

#[test]
fn a_container_closed_before_its_first_touch_is_deleted() {
    let mut s = started();
    s.reply("container", created2(P, st()));
    s.r.close(s.now);
    s.reply("createTTL", code(ErrorCode::Unimplemented));
    assert!(
        s.events().is_empty(),
        "a touch answered after the close decides nothing"
    );
    assert_eq!(s.sent(), [format!("delete {P}")]);
    s.reply("delete", ok());
    assert_eq!(s.events(), [E::Closed]);
    assert!(s.r.is_done());
}

#[test]
fn a_closed_session_ends_it() {
    let mut s = present();
    s.session(SessionChange::Closed);
    assert_eq!(
        s.events(),
        [E::Failed {
            error: Error::Closed
        }]
    );
}

#[test]
fn a_bad_ttl_is_refused_at_the_start() {
    let cfg = TtlNodeConfig::new(P, "me", Duration::ZERO);
    let mut s = Script::connected(TtlNode::new(cfg), 0x77);
    s.r.start(s.now);
    assert!(s.sent().is_empty());
    assert!(
        matches!(&s.events()[..], [E::Failed { error }] if error.code() == Some(ErrorCode::BadArguments))
    );
}
