//! Property test for the configuration writer and readers over arbitrary replies and
//! faults (`zk_recipes_sim::testkit::config`): no snapshot ever mixes two configurations;
//! once faults stop every write ends and both readers converge to the last one.

use proptest::prelude::*;

proptest! {
    #![proptest_config(ProptestConfig::with_cases(10_000))]
    #[test]
    fn config_invariants_hold(schedule in proptest::collection::vec(any::<u8>(), 0..300)) {
        if let Err(e) = zk_recipes_sim::testkit::config::run(&schedule) {
            prop_assert!(false, "{}", e);
        }
    }
}

/// The harness is not vacuous: over many pseudo-random schedules, in both modes,
/// writes complete, snapshots and `NotReady` are reported, and every fault happens.
#[test]
fn schedules_exercise_every_path() {
    let mut total = zk_recipes_sim::testkit::config::Stats::default();
    for schedule in zk_recipes_sim::testkit::schedules(0x9e37_79b9_7f4a_7c15, 2_000, 200) {
        let s = zk_recipes_sim::testkit::config::run(&schedule).unwrap();
        total.written += s.written;
        total.snapshots += s.snapshots;
        total.not_ready += s.not_ready;
        total.lost_replies += s.lost_replies;
        total.disconnects += s.disconnects;
        total.expiries += s.expiries;
        total.stale_catch_ups += s.stale_catch_ups;
        total.refreshes += s.refreshes;
    }
    println!("{total:?}");
    // 2,000 of the writes are the final ones, written without faults.
    assert!(total.written > 4_000, "{total:?}");
    assert!(
        total.snapshots > 8_000 && total.not_ready > 1_000,
        "{total:?}"
    );
    assert!(
        total.lost_replies > 100 && total.disconnects > 1_000,
        "{total:?}"
    );
    assert!(
        total.expiries > 100 && total.stale_catch_ups > 100,
        "{total:?}"
    );
}
