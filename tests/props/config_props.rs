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
/// writes complete, snapshots and `NotReady` are reported, followers fall behind,
/// readers are told to read again, an operator deletes nodes, and every common fault
/// happens.
#[test]
fn schedules_exercise_every_path() {
    let mut total = zk_recipes_sim::testkit::config::Stats::default();
    for schedule in zk_recipes_sim::testkit::schedules(0x9e37_79b9_7f4a_7c15, 2_000, 200) {
        total += zk_recipes_sim::testkit::config::run(&schedule).unwrap();
    }
    println!("{total:?}");
    // Seen: written 3,912 (2,000 of them the last ones, without faults), snapshots 8,039,
    // not ready 2,947, fell behind 812, refreshes 1,521, operator deletes 772; lost
    // replies 4,213, stale reconnects 2,061, refusals 4,702, expiries 707, reaps 1 (an
    // emptied container must meet a reap step before the next write makes it again).
    assert!(
        total.written > 3_000 && total.snapshots > 4_000,
        "{total:?}"
    );
    assert!(total.not_ready > 1_400 && total.fell_behind > 400 && total.refreshes > 700);
    assert!(total.operator_deletes > 350, "{total:?}");
    let f = total.faults;
    assert!(f.lost_replies > 2_000 && f.stale_reconnects > 1_000 && f.refusals > 2_000);
    assert!(f.expiries > 350 && f.reaps > 0, "{f:?}");
}
