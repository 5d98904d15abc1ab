//! Property test for the group member, the view and a rendezvous worker over arbitrary
//! replies, faults and other sessions' changes (`zk_recipes_sim::testkit::group`): safety
//! after every step, liveness and cleanliness once faults stop.

use proptest::prelude::*;

proptest! {
    #![proptest_config(ProptestConfig::with_cases(20_000))]
    #[test]
    fn group_invariants_hold(schedule in proptest::collection::vec(any::<u8>(), 0..300)) {
        if let Err(e) = zk_recipes_sim::testkit::group::run(&schedule) {
            prop_assert!(false, "{}", e);
        }
    }
}

/// The harness is not vacuous: over many pseudo-random schedules every kind of event
/// it checks does happen, and so do the common faults (lost replies, reconnects to a
/// lagging follower, refusals, expiries) and an operator deleting our member node.
#[test]
fn schedules_exercise_every_path() {
    let mut total = zk_recipes_sim::testkit::group::Stats::default();
    for schedule in zk_recipes_sim::testkit::schedules(0x9e37_79b9_7f4a_7c15, 2_000, 200) {
        total += zk_recipes_sim::testkit::group::run(&schedule).unwrap();
    }
    println!("{total:?}");
    assert!(total.view_changes > 0 && total.syncs > 2_000, "{total:?}");
    assert!(
        total.member_created > 2_000 && total.member_lost > 0,
        "{total:?}"
    );
    assert!(
        total.member_reconnected > 0 && total.operator_deletes > 0,
        "{total:?}"
    );
    assert!(total.addresses > 0 && total.gone > 0, "{total:?}");
    let f = total.faults;
    assert!(f.lost_replies > 0 && f.stale_reconnects > 0, "{f:?}");
    assert!(f.refusals > 0 && f.expiries > 0, "{f:?}");
}
