//! Property test for the lock machine over arbitrary inputs (the same harness as the
//! `lock` fuzz target).

use proptest::prelude::*;

proptest! {
    #![proptest_config(ProptestConfig::with_cases(20_000))]
    #[test]
    fn lock_invariants_hold(schedule in proptest::collection::vec(any::<u8>(), 0..400)) {
        if let Err(e) = zk_recipes::testkit::lock::run(&schedule) {
            prop_assert!(false, "{}", e);
        }
    }
}

/// Inputs the `lock` fuzz target once crashed on (`tests/data/lock-fuzz-*.bin`): each
/// must now pass. Drop new crash artifacts there.
#[test]
fn fuzz_regressions() {
    let dir = format!("{}/tests/data", env!("CARGO_MANIFEST_DIR"));
    let mut checked = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().to_string();
        if name.starts_with("lock-fuzz-") {
            let bytes = std::fs::read(&path).unwrap();
            zk_recipes::testkit::lock::run(&bytes).unwrap_or_else(|e| panic!("{name}: {e}"));
            checked += 1;
        }
    }
    assert!(checked >= 1, "no regression inputs found in {dir}");
}
