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
