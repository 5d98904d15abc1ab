//! Property test for the two-phase commit machines over arbitrary inputs (the same
//! harness as the `two_phase` fuzz target; see `zk_recipes_sim::testkit::two_phase`).

use proptest::prelude::*;

proptest! {
    #![proptest_config(ProptestConfig::with_cases(20_000))]
    #[test]
    fn two_phase_invariants_hold(schedule in proptest::collection::vec(any::<u8>(), 0..400)) {
        if let Err(e) = zk_recipes_sim::testkit::two_phase::run(&schedule) {
            prop_assert!(false, "{}", e);
        }
    }
}

/// The harness is not vacuous: over many pseudo-random schedules the coordinator
/// starts, votes are seen, transactions commit and abort, machines fail on deleted
/// nodes, an operator deletes nodes, and every common fault happens.
#[test]
fn schedules_exercise_every_path() {
    let mut total = zk_recipes_sim::testkit::two_phase::Stats::default();
    for schedule in zk_recipes_sim::testkit::schedules(0x9e37_79b9_7f4a_7c15, 2_000, 400) {
        total += zk_recipes_sim::testkit::two_phase::run_stats(&schedule).unwrap();
    }
    println!("{total:?}");
    // Seen: started 642, voted 312, commits 69, aborts 873, failed 662, operator deletes
    // 5,452, deaths 8,622; lost replies 5,348, stale reconnects 6,471, refusals 5,424,
    // expiries 624, reaps 101.
    assert!(total.started > 300 && total.voted > 150, "{total:?}");
    assert!(total.commits > 30 && total.aborts > 400 && total.failed > 300);
    assert!(total.operator_deletes > 2_000 && total.deaths > 4_000);
    let f = total.faults;
    assert!(f.lost_replies > 2_000 && f.stale_reconnects > 3_000 && f.refusals > 2_000);
    assert!(f.expiries > 300 && f.reaps > 50, "{f:?}");
}
