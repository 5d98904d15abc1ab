//! Property test for the shared counter over arbitrary replies, faults, expiries and
//! another writer (`zk_recipes_sim::testkit::value`): no increment lost or doubled after
//! every step, every operation answered once faults stop.

use proptest::prelude::*;

proptest! {
    #![proptest_config(ProptestConfig::with_cases(10_000))]
    #[test]
    fn counter_invariants_hold(schedule in proptest::collection::vec(any::<u8>(), 0..300)) {
        if let Err(e) = zk_recipes_sim::testkit::value::run(&schedule) {
            prop_assert!(false, "{}", e);
        }
    }
}

/// The harness is not vacuous: over many pseudo-random schedules every outcome it
/// checks does happen.
#[test]
fn schedules_exercise_every_path() {
    let mut total = zk_recipes_sim::testkit::value::Stats::default();
    for schedule in zk_recipes_sim::testkit::schedules(0x9e37_79b9_7f4a_7c15, 2_000, 200) {
        let s = zk_recipes_sim::testkit::value::run(&schedule).unwrap();
        total.added += s.added;
        total.in_doubt += s.in_doubt;
        total.failed += s.failed;
        total.races += s.races;
        total.lost_writes += s.lost_writes;
        total.values += s.values;
    }
    println!("{total:?}");
    assert!(total.added > 10_000, "{total:?}");
    assert!(total.races > 1_000 && total.lost_writes > 100, "{total:?}");
    assert!(total.in_doubt > 0 && total.values > 1_000, "{total:?}");
}
