//! Property test for the counting semaphore: three clients on their own sessions,
//! `N = 2`, under lost replies, dropped connections, refusals, expiry, operator
//! deletions and time (`zk_recipes_sim::testkit::semaphore`): never more than `N` live
//! holders after every step; once faults stop every attempt ends in bounded virtual
//! time and no lock or lease node is left.

use proptest::prelude::*;

proptest! {
    #![proptest_config(ProptestConfig::with_cases(10_000))]
    #[test]
    fn semaphore_invariants_hold(schedule in proptest::collection::vec(any::<u8>(), 0..400)) {
        if let Err(e) = zk_recipes_sim::testkit::semaphore::run(&schedule) {
            prop_assert!(false, "{}", e);
        }
    }
}

/// The harness is not vacuous: over many pseudo-random schedules the semaphore fills
/// up, times out, loses leases, lease creates lose their replies, and waiting leases
/// deleted by the operator start over.
#[test]
fn schedules_exercise_every_path() {
    let mut total = zk_recipes_sim::testkit::semaphore::Stats::default();
    for schedule in zk_recipes_sim::testkit::schedules(0x9e37_79b9_7f4a_7c15, 2_000, 300) {
        let s = zk_recipes_sim::testkit::semaphore::run(&schedule).unwrap();
        total.acquired += s.acquired;
        total.full += s.full;
        total.timed_out += s.timed_out;
        total.lost += s.lost;
        total.failed += s.failed;
        total.lost_lease_creates += s.lost_lease_creates;
        total.operator_deletes += s.operator_deletes;
        total.restarts += s.restarts;
    }
    println!("{total:?}");
    assert!(total.acquired > 2_000 && total.full > 1_000);
    assert!(total.timed_out > 0 && total.lost > 0 && total.failed > 0);
    assert!(total.lost_lease_creates > 100 && total.operator_deletes > 0);
    assert!(total.restarts > 0);
}
