//! Transcript tests for `recipe::lease` (kazoo's `NonBlockingLease`): scripted replies
//! in, exact requests and events out, in the lines of `kit.rs`. Path `/ls`, identifier
//! `me`, one hour; the wall clock at the start is 2025-11-30T00:00:00Z. Our kazoo lock
//! node `<ID without dashes>__lock__<seq>` is shortened to `L` in the lines.

use super::kit::*;
use std::time::Duration;
use zk_recipes::recipe::lease::{
    encode_record, Holder, Lease, LeaseConfig, LeaseEvent, LeaseOutcome,
};
use zk_recipes::recipe::Machine;

const ID: &str = "6f1c2a4e-2b1d-4d7e-9a63-0c2f5a7b8d90";
const HEX: &str = "6f1c2a4e2b1d4d7e9a630c2f5a7b8d90";
const SESSION: i64 = 0x77;
/// 2025-11-30T00:00:00Z.
const WALL: Duration = Duration::from_secs(1_764_460_800);
const HOUR: Duration = Duration::from_secs(3600);

fn script(identifier: &str) -> Script<Lease> {
    let c = LeaseConfig::new("/ls", HOUR, identifier, ID);
    Script::connected(Lease::new(c), SESSION).short(&[(HEX, "L")])
}

fn lock_node(seq: u32) -> String {
    format!("{HEX}__lock__{seq:010}")
}

/// Starts, takes kazoo's lock uncontended, and sees the sync and read go out.
fn locked(s: &mut Script<Lease>, identifier: &str) {
    s.r.start(s.now, WALL);
    assert_eq!(
        s.sent(),
        [
            format!("create2 /ls/L__lock__ es '{identifier}'"),
            "list! /ls".to_string()
        ]
    );
    let name = lock_node(3);
    s.reply(
        "create2 /ls/",
        created2(&format!("/ls/{name}"), st().czxid(9).owner(SESSION)),
    );
    s.reply("list! /ls", children(&[&name, "lease_holder"]));
    assert_eq!(
        s.sent(),
        ["sync /ls/lease_holder", "get /ls/lease_holder"],
        "read only while holding the lock"
    );
}

/// Lets go of the lock and returns the outcome.
fn released(s: &mut Script<Lease>) -> Vec<LeaseEvent> {
    assert_eq!(s.events(), [], "no outcome while the lock is held");
    assert_eq!(s.sent(), ["delete /ls/L__lock__0000000003"]);
    s.reply("delete /ls/", ok());
    let e = s.events();
    assert!(s.r.is_done());
    e
}

fn granted(end: Duration) -> LeaseEvent {
    LeaseEvent::Decided(LeaseOutcome::Granted { end })
}

#[test]
fn no_record_is_granted_with_kazoos_record_written_under_kazoos_lock() {
    let mut s = script("me");
    locked(&mut s, "me");
    s.reply("sync", ok());
    s.reply("get /ls/lease_holder", no_node());
    assert_eq!(
        s.sent(),
        [
            r#"create /ls/lease_holder '{"version": 1, "holder": "me", "end": "2025-11-30T01:00:00"}'"#
        ]
    );
    s.reply("create /ls/lease_holder", created("/ls/lease_holder"));
    assert_eq!(released(&mut s), [granted(WALL + HOUR)]);
}

#[test]
fn another_holders_live_record_is_refused_naming_it_and_nothing_is_written() {
    let mut s = script("me");
    locked(&mut s, "me");
    s.reply("sync", ok());
    let end = WALL + Duration::from_secs(1);
    s.reply(
        "get /ls/lease_holder",
        data(&encode_record("kz", end), st().version(0)),
    );
    let holder = Some(Holder {
        identifier: "kz".into(),
        end,
    });
    assert_eq!(
        released(&mut s),
        [LeaseEvent::Decided(LeaseOutcome::Refused { holder })]
    );
}

#[test]
fn an_ended_record_is_taken_over_in_one_multi_over_the_version_read() {
    let mut s = script("me");
    locked(&mut s, "me");
    s.advance(Duration::from_millis(1500)); // the wall clock moves with the instants
    s.reply("sync", ok());
    let end = WALL + Duration::from_secs(1); // ended half a second ago
    s.reply(
        "get /ls/lease_holder",
        data(&encode_record("kz", end), st().version(4)),
    );
    assert_eq!(
        s.sent(),
        [
            r#"multi[delete /ls/lease_holder @4, create /ls/lease_holder '{"version": 1, "holder": "me", "end": "2025-11-30T01:00:01"}']"#
        ]
    );
    s.reply(
        "multi",
        multi(vec![
            MultiResult::Delete,
            MultiResult::Create("/ls/lease_holder".into()),
        ]),
    );
    assert_eq!(
        released(&mut s),
        [granted(WALL + HOUR + Duration::from_secs(1))]
    );
}

#[test]
fn the_holder_renews_its_live_lease() {
    let mut s = script("me");
    locked(&mut s, "me");
    s.reply("sync", ok());
    let end = WALL + Duration::from_secs(600);
    s.reply(
        "get /ls/lease_holder",
        data(&encode_record("me", end), st().version(2)),
    );
    assert_eq!(s.sent().len(), 1, "the multi");
    s.reply(
        "multi",
        multi(vec![
            MultiResult::Delete,
            MultiResult::Create("/ls/lease_holder".into()),
        ]),
    );
    assert_eq!(released(&mut s), [granted(WALL + HOUR)]);
}

#[test]
fn a_lost_write_reply_reads_again_and_a_landed_write_is_renewed_not_refused() {
    let mut s = script("me");
    locked(&mut s, "me");
    s.reply("sync", ok());
    s.reply("get /ls/lease_holder", no_node());
    s.sent();
    s.disconnect();
    assert_eq!(s.events(), [], "no outcome on a lost reply");
    s.session(SessionChange::Reconnected {
        session_id: SESSION,
    });
    // The lock verifies its node first; then the record is read again.
    let verify = s.sent();
    assert!(
        verify.iter().all(|l| !l.contains("lease_holder")),
        "{verify:?}"
    );
    for l in &verify {
        let name = lock_node(3);
        if l.starts_with("list") {
            s.reply(l, children(&[&name, "lease_holder"]));
        } else if l.starts_with("sync") {
            s.reply(l, ok());
        } else if l.starts_with("exists") || l.starts_with("get") {
            s.reply(l, stat_reply(st().czxid(9).owner(SESSION)));
        }
    }
    s.advance(Duration::from_secs(1));
    assert_eq!(s.sent(), ["sync /ls/lease_holder", "get /ls/lease_holder"]);
    s.reply("sync", ok());
    s.reply(
        "get /ls/lease_holder",
        data(&encode_record("me", WALL + HOUR), st().version(0)),
    );
    assert!(s.sent()[0].starts_with("multi[delete /ls/lease_holder @0, create"));
}

#[test]
fn a_record_not_in_kazoos_format_fails_with_a_clear_error_and_writes_nothing() {
    let mut s = script("me");
    locked(&mut s, "me");
    s.reply("sync", ok());
    s.reply("get /ls/lease_holder", data("not json", st()));
    let e = released(&mut s);
    assert_eq!(
        e,
        [LeaseEvent::Failed {
            error: Error::BadLease {
                path: "/ls/lease_holder".into()
            }
        }]
    );
}

#[test]
fn a_record_of_another_version_is_left_alone() {
    let mut s = script("me");
    locked(&mut s, "me");
    s.reply("sync", ok());
    s.reply("get /ls/lease_holder", data(r#"{"version": 2}"#, st()));
    assert_eq!(
        released(&mut s),
        [LeaseEvent::Decided(LeaseOutcome::Refused { holder: None })]
    );
}

#[test]
fn an_expired_session_while_waiting_fails_and_an_empty_identifier_is_refused_at_once() {
    let mut s = script("me");
    s.r.start(s.now, WALL);
    s.sent();
    s.session(SessionChange::Expired);
    assert_eq!(
        s.events(),
        [LeaseEvent::Failed {
            error: Error::SessionExpired
        }]
    );
    assert!(s.r.is_done());
    let mut s = script("");
    s.r.start(s.now, WALL);
    assert_eq!(s.sent(), Vec::<String>::new());
    assert_eq!(
        s.events(),
        [LeaseEvent::Failed {
            error: Error::Server(ErrorCode::BadArguments)
        }]
    );
    assert!(s.r.is_done());
}
