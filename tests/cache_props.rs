//! Property test for the tree and children caches over arbitrary replies, faults and
//! other sessions' changes (`zk_recipes::testkit::cache`): safety after every step
//! (the events replay to the cache, no invented change), liveness once faults stop
//! (the cache equals the server's subtree).

use proptest::prelude::*;

proptest! {
    #![proptest_config(ProptestConfig::with_cases(10_000))]
    #[test]
    fn cache_invariants_hold(schedule in proptest::collection::vec(any::<u8>(), 0..300)) {
        if let Err(e) = zk_recipes::testkit::cache::run(&schedule) {
            prop_assert!(false, "{}", e);
        }
    }
}

/// The harness is not vacuous: over many pseudo-random schedules every kind of event
/// it checks does happen, in every setup.
#[test]
fn schedules_exercise_every_path() {
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut total = zk_recipes::testkit::cache::Stats::default();
    let runs = 2_000;
    for _ in 0..runs {
        let schedule: Vec<u8> = (0..200)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x as u8
            })
            .collect();
        let s = zk_recipes::testkit::cache::run(&schedule).unwrap();
        total.created += s.created;
        total.changed += s.changed;
        total.deleted += s.deleted;
        total.resynced += s.resynced;
        total.synced += s.synced;
        total.one_shot += s.one_shot;
        total.too_large += s.too_large;
    }
    println!("{total:?}");
    assert!(total.created > runs && total.changed > runs / 4 && total.deleted > runs / 2);
    assert!(total.resynced > runs / 2);
    assert!(total.synced > runs / 2 && total.too_large > 0);
    assert!(total.one_shot > runs / 4 && total.one_shot < runs);
}
