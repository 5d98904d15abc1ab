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
/// it checks does happen.
#[test]
fn schedules_exercise_every_path() {
    let mut total = zk_recipes_sim::testkit::group::Stats::default();
    for schedule in zk_recipes_sim::testkit::schedules(0x9e37_79b9_7f4a_7c15, 2_000, 200) {
        let s = zk_recipes_sim::testkit::group::run(&schedule).unwrap();
        total.view_changes += s.view_changes;
        total.syncs += s.syncs;
        total.member_created += s.member_created;
        total.member_lost += s.member_lost;
        total.addresses += s.addresses;
        total.gone += s.gone;
    }
    println!("{total:?}");
    assert!(total.view_changes > 0 && total.syncs > 2_000);
    assert!(total.member_created > 2_000 && total.member_lost > 0);
    assert!(total.addresses > 0 && total.gone > 0);
}
