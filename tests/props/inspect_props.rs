//! Property test for the inspect machine over arbitrary schedules (the same harness as
//! the `inspect` fuzz target): lost replies, refusals, reconnects (to lagging followers
//! too), expiry, peers entering a lock and an operator deleting contenders while looks
//! run; safety after every step, liveness and an exact last look at the end (see
//! `zk_recipes_sim::testkit::inspect`).

use proptest::prelude::*;

proptest! {
    #![proptest_config(ProptestConfig::with_cases(5_000))]
    #[test]
    fn inspect_invariants_hold(schedule in proptest::collection::vec(any::<u8>(), 0..300)) {
        if let Err(e) = zk_recipes_sim::testkit::inspect::run(&schedule) {
            prop_assert!(false, "{}", e);
        }
    }
}

/// The harness is not vacuous: over many pseudo-random schedules looks end both ways,
/// read contenders, peers enter and an operator deletes, and the common faults hit.
#[test]
fn schedules_exercise_every_path() {
    let mut total = zk_recipes_sim::testkit::inspect::Stats::default();
    for schedule in zk_recipes_sim::testkit::schedules(0x2545_f491_4f6c_dd1d, 2_000, 300) {
        total += zk_recipes_sim::testkit::inspect::run_stats(&schedule)
            .unwrap_or_else(|e| panic!("{schedule:?}: {e}"));
    }
    println!("{total:?}");
    assert!(total.described > 2_000 && total.failed > 50, "{total:?}");
    assert!(total.contenders_seen > 5_000, "{total:?}");
    assert!(total.entered > 5_000 && total.deleted > 1_000, "{total:?}");
    let f = total.faults;
    assert!(
        f.lost_replies > 500 && f.stale_reconnects > 500 && f.refusals > 500,
        "{f:?}"
    );
}
