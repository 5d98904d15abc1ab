//! Property test for the lock machine over arbitrary inputs (the same harness as the
//! `lock` fuzz target).

use proptest::prelude::*;

proptest! {
    #![proptest_config(ProptestConfig::with_cases(3000))]
    #[test]
    fn lock_invariants_hold(schedule in proptest::collection::vec(any::<u8>(), 0..400)) {
        if let Err(e) = zk_recipes::testkit::lock::run(&schedule) {
            prop_assert!(false, "{}", e);
        }
    }
}
