//! Property test for the queue over arbitrary inputs (the same harness as the `queue`
//! fuzz target): producers and consumers, each with its own session, at most once or
//! at least once, in the shared model of ZooKeeper (`testkit::zk`, driven by
//! `testkit::harness`) with refusals, lost replies after apply, dropped connections,
//! lagging followers, expiry, container reaping and an operator's purges; safety after
//! every step, liveness and accounting once faults stop (see
//! `zk_recipes_sim::testkit::queue`).

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

/// The harness is not vacuous: over many pseudo-random schedules items are put, taken,
/// completed and purged, takes and puts fail, claims are lost, and the common faults
/// (lost replies, lagging followers, refusals, expiries, reaps) hit the machines.
#[test]
fn schedules_exercise_every_path() {
    let mut total = zk_recipes_sim::testkit::queue::Stats::default();
    for schedule in zk_recipes_sim::testkit::schedules(0x9e37_79b9_7f4a_7c15, 2_000, 400) {
        total += zk_recipes_sim::testkit::queue::run(&schedule).unwrap();
    }
    println!("{total:?}");
    // Observed (seed above): items 11,908, delivered 11,165, completed 5,428, purged 747,
    // take failures 4,362, put failures 552, claims lost 1, items lost in doubt 8; lost
    // replies 5,164, lagging reconnects 2,299, refusals 5,868, expiries 1,463, reaps 209.
    assert!(total.items > 5_000 && total.delivered > 5_000 && total.completed > 2_000);
    assert!(total.purged > 300 && total.take_failed > 2_000 && total.put_failed > 200);
    assert!(total.claims_lost > 0 && total.lost > 0);
    let f = total.faults;
    assert!(f.lost_replies > 2_000 && f.stale_reconnects > 1_000 && f.refusals > 2_000);
    assert!(f.expiries > 500 && f.reaps > 100);
}
