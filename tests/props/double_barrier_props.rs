//! Property test for the double barrier machine over arbitrary schedules (the same
//! harness as the `double_barrier` fuzz target): lost replies, refusals, reconnects,
//! expiry, peers arriving and leaving, deadlines; safety after every step, liveness at
//! the end (see `zk_recipes_sim::testkit::double_barrier`).

use proptest::prelude::*;

proptest! {
    #![proptest_config(ProptestConfig::with_cases(20_000))]
    #[test]
    fn double_barrier_invariants_hold(schedule in proptest::collection::vec(any::<u8>(), 0..300)) {
        if let Err(e) = zk_recipes_sim::testkit::double_barrier::run(&schedule) {
            prop_assert!(false, "{}", e);
        }
    }
}
