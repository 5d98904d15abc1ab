//! Property test for the queue over arbitrary inputs (the same harness as the `queue`
//! fuzz target): producers and consumers, each with its own session, at most once or
//! at least once, against a model server with refusals, lost replies after apply,
//! dropped connections and expiry; safety after every step, liveness and accounting
//! once faults stop (see `zk_recipes_sim::testkit::queue`).

use proptest::prelude::*;

proptest! {
    #![proptest_config(ProptestConfig::with_cases(10_000))]
    #[test]
    fn queue_invariants_hold(schedule in proptest::collection::vec(any::<u8>(), 0..400)) {
        if let Err(e) = zk_recipes_sim::testkit::queue::run(&schedule) {
            prop_assert!(false, "{}", e);
        }
    }
}

/// Schedules that once broke an invariant: each must now pass.
#[test]
fn regressions() {
    let cases: &[&[u8]] = &[
        &[],
        &[0],
        &[8],
        &[255],
        &[96, 12, 0, 13, 4],
        &[9, 7, 1, 11, 255],
        &[
            144, 68, 0, 11, 0, 9, 0, 0, 62, 16, 73, 164, 19, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 9, 0,
            16, 19, 20, 29, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 48, 29, 12, 0, 68, 13, 0, 0, 0, 0, 0, 0,
            105, 0, 164, 47, 108, 53, 0, 32, 0, 8, 0, 20, 0, 92, 138, 215, 212, 1, 75, 0,
        ],
    ];
    for case in cases {
        zk_recipes_sim::testkit::queue::run(case).unwrap_or_else(|e| panic!("{case:?}: {e}"));
    }
}

/// Items flow: most schedules put, take and (at least once) complete items.
#[test]
fn items_flow() {
    let mut items = 0;
    for (seed, schedule) in (0u64..200).map(|seed| {
        let schedule =
            zk_recipes_sim::testkit::schedules(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15), 1, 300);
        (seed, schedule.into_iter().flatten().collect::<Vec<u8>>())
    }) {
        let stats = zk_recipes_sim::testkit::queue::run(&schedule)
            .unwrap_or_else(|e| panic!("{seed}: {e}"));
        items += stats.items;
    }
    assert!(items > 200, "{items} items in 200 schedules");
}
