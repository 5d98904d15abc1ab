//! Transcript tests for `recipe::partitioner`: scripted replies in, exact requests and
//! events out, in the lines of `kit.rs`. Path `/sp`, items `b` and `a`, identifier `w1`;
//! our party node is `/sp/party/<ID without dashes>-w1` (kazoo's `ShallowParty`), our
//! item locks `<ID without dashes><round><i>__lock__` (kazoo's `Lock`), shortened to
//! `P` and `L` in the lines.

use super::kit::*;
use std::time::Duration;
use zk_recipes::recipe::partitioner::{
    partition, HeldItem, PartitionEvent, Partitioner, PartitionerConfig,
};
use zk_recipes::recipe::Machine;

const ID: &str = "6f1c2a4e-2b1d-4d7e-9a63-0c2f5a7b8d90";
const HEX: &str = "6f1c2a4e2b1d4d7e9a630c2f5a7b8d90";
const SESSION: i64 = 0x77;

fn script() -> Script<Partitioner> {
    let mut c = PartitionerConfig::new("/sp", &["b", "a"], "w1", ID);
    c.time_boundary = Duration::from_millis(100);
    Script::connected(Partitioner::new(c), SESSION).short(&[(HEX, "P")])
}

fn lock(round: u16, i: usize, seq: u32) -> String {
    format!("{HEX}{round:04x}{i:04x}__lock__{seq:010}")
}

/// Joins, lists behind a sync, sees `members`, waits the boundary.
fn join(s: &mut Script<Partitioner>, members: &[&str]) {
    s.r.start(s.now);
    assert_eq!(
        s.sent(),
        [
            "create /sp/party/P-w1 e 'w1'",
            "sync /sp/party",
            "list! /sp/party"
        ]
    );
    s.reply("create /sp/party/P-w1", created("/sp/party/P-w1"));
    s.reply("sync", ok());
    let long: Vec<String> = members.iter().map(|m| m.replace('P', HEX)).collect();
    let long: Vec<&str> = long.iter().map(String::as_str).collect();
    s.reply("list! /sp/party", children(&long));
    assert_eq!(
        s.sent(),
        Vec::<String>::new(),
        "nothing before the boundary"
    );
    assert_eq!(s.r.poll_timeout(), Some(s.now + Duration::from_millis(100)));
    s.now = s.now + Duration::from_millis(100);
    s.r.handle_timeout(s.now);
}

/// Item `i` (`/sp/locks/<item>`) taken uncontended: our lock node `seq`, token `czxid`.
fn take(s: &mut Script<Partitioner>, item: &str, i: usize, czxid: i64) {
    let dir = format!("/sp/locks/{item}");
    let name = lock(1, i, 0);
    s.reply(
        &format!("create2 {dir}/"),
        created2(&format!("{dir}/{name}"), st().czxid(czxid).owner(SESSION)),
    );
    s.reply(&format!("list! {dir}"), children(&[&name]));
}

#[test]
fn a_lone_member_joins_waits_the_time_boundary_and_takes_every_item_with_kazoo_locks() {
    let mut s = script();
    join(&mut s, &["P-w1"]);
    assert_eq!(
        s.sent(),
        [
            "create2 /sp/locks/a/P00010000__lock__ es",
            "list! /sp/locks/a",
            "create2 /sp/locks/b/P00010001__lock__ es",
            "list! /sp/locks/b",
        ]
    );
    take(&mut s, "a", 0, 10);
    assert_eq!(s.events(), [], "not before every item is held");
    take(&mut s, "b", 1, 11);
    let held = |item: &str, i, t| HeldItem {
        item: item.into(),
        node: lock(1, i, 0),
        fencing_token: t,
    };
    assert_eq!(
        s.events(),
        [PartitionEvent::Acquired {
            items: vec![held("a", 0, 10), held("b", 1, 11)]
        }]
    );
    assert!(s.r.is_acquired());
}

#[test]
fn a_member_takes_its_share_as_kazoo_deals_it() {
    // Members sorted `w0`, `w1`: `w1` takes the items at 1, 3, ... of the sorted set.
    let mut s = script();
    join(&mut s, &["ffff-w0", "P-w1"]);
    assert_eq!(
        s.sent(),
        [
            "create2 /sp/locks/b/P00010000__lock__ es",
            "list! /sp/locks/b"
        ]
    );
    let items = ["a".to_string(), "b".to_string()];
    assert_eq!(partition("w1", &["w0".into(), "w1".into()], &items), [1]);
}

#[test]
fn a_party_change_during_the_boundary_lists_again_and_waits_again() {
    let mut s = script();
    s.r.start(s.now);
    s.reply("create /sp/party/P-w1", created("/sp/party/P-w1"));
    s.reply("sync", ok());
    s.reply("list! /sp/party", children(&[&format!("{HEX}-w1")]));
    s.now = s.now + Duration::from_millis(60);
    s.fire(EventType::NodeChildrenChanged, "/sp/party");
    assert_eq!(s.sent(), ["sync /sp/party", "list! /sp/party"]);
    s.reply("sync", ok());
    s.reply(
        "list! /sp/party",
        children(&[&format!("{HEX}-w1"), "ffff-w2"]),
    );
    assert_eq!(s.r.poll_timeout(), Some(s.now + Duration::from_millis(100)));
    s.now = s.now + Duration::from_millis(100);
    s.r.handle_timeout(s.now);
    // `w1` of `w1`, `w2`: the items at 0, 2, ...
    assert_eq!(
        s.sent(),
        [
            "create2 /sp/locks/a/P00010000__lock__ es",
            "list! /sp/locks/a"
        ]
    );
}

#[test]
fn a_party_change_while_held_asks_for_a_release_which_deletes_every_lock() {
    let mut s = script();
    join(&mut s, &["P-w1"]);
    take(&mut s, "a", 0, 10);
    take(&mut s, "b", 1, 11);
    s.events();
    s.fire(EventType::NodeChildrenChanged, "/sp/party");
    assert_eq!(s.events(), [PartitionEvent::ReleaseNeeded]);
    assert_eq!(
        s.sent(),
        Vec::<String>::new(),
        "the locks stay held until release"
    );
    s.r.release(s.now);
    assert_eq!(
        s.sent(),
        [
            format!("delete /sp/locks/a/{}", lock(1, 0, 0)).replace(HEX, "P"),
            format!("delete /sp/locks/b/{}", lock(1, 1, 0)).replace(HEX, "P"),
        ]
    );
    s.reply("delete /sp/locks/a", ok());
    assert_eq!(s.events(), [], "not before every lock is deleted");
    s.reply("delete /sp/locks/b", ok());
    assert_eq!(s.events(), [PartitionEvent::Released]);
    assert_eq!(
        s.sent(),
        ["sync /sp/party", "list! /sp/party"],
        "a new division"
    );
}

#[test]
fn finish_releases_the_locks_then_leaves_the_party() {
    let mut s = script();
    join(&mut s, &["P-w1"]);
    take(&mut s, "a", 0, 10);
    take(&mut s, "b", 1, 11);
    s.events();
    s.r.finish(s.now);
    let deletes = s.sent();
    assert_eq!(deletes.len(), 2, "{deletes:?}");
    s.reply("delete /sp/locks/a", ok());
    s.reply("delete /sp/locks/b", ok());
    assert_eq!(s.sent(), ["delete /sp/party/P-w1"]);
    assert_eq!(s.events(), []);
    s.reply("delete /sp/party/P-w1", ok());
    assert_eq!(s.events(), [PartitionEvent::Finished]);
    assert!(s.r.is_done());
}

#[test]
fn a_lost_join_reply_is_retried_and_an_existing_node_is_ours() {
    let mut s = script();
    s.r.start(s.now);
    s.sent();
    s.disconnect();
    s.session(zk_recipes::recipe::SessionChange::Reconnected {
        session_id: SESSION,
    });
    assert_eq!(
        s.sent(),
        [
            "create /sp/party/P-w1 e 'w1'",
            "sync /sp/party",
            "list! /sp/party"
        ]
    );
    s.reply("create /sp/party/P-w1", code(ErrorCode::NodeExists));
    s.reply("sync", ok());
    s.reply("list! /sp/party", children(&[&format!("{HEX}-w1")]));
    s.now = s.now + Duration::from_millis(100);
    s.r.handle_timeout(s.now);
    assert_eq!(s.sent().len(), 4, "both items' locks");
}

#[test]
fn an_invalid_item_fails_at_once_and_sends_nothing() {
    let c = PartitionerConfig::new("/sp", &["a/b"], "w1", ID);
    let mut s = Script::connected(Partitioner::new(c), SESSION);
    s.r.start(s.now);
    assert_eq!(s.sent(), Vec::<String>::new());
    assert!(matches!(s.events()[..], [PartitionEvent::Failed { .. }]));
}
