//! Property test for the delay queue over arbitrary inputs (the same harness as the
//! `delay_queue` fuzz target): the queue's script with items put for times from the past
//! to 410 ms ahead, every fault of the queue's (refusals, lost replies after apply,
//! dropped connections, lagging followers, expiry, reaping, purges); safety after every
//! step (nothing delivered before its time, nothing lost or doubled), liveness and
//! accounting once faults stop (see `zk_recipes_sim::testkit::delay_queue`).

use proptest::prelude::*;
use zk_recipes_sim::testkit::delay_queue::{run, Stats};

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2_000))]
    #[test]
    fn delay_queue_invariants_hold(schedule in proptest::collection::vec(any::<u8>(), 0..400)) {
        if let Err(e) = run(&schedule) {
            prop_assert!(false, "{}", e);
        }
    }
}

/// The harness is not vacuous: over many pseudo-random schedules items are put for
/// later and delivered at their time, taken at most once and at least once (completed),
/// purged; takes and puts fail; and the common faults hit the machines.
#[test]
fn schedules_exercise_every_path() {
    let mut total = Stats::default();
    for schedule in zk_recipes_sim::testkit::schedules(0x5851_f42d_4c95_7f2d, 1_000, 400) {
        total += run(&schedule).unwrap();
    }
    println!("{total:?}");
    assert!(total.items > 2_000 && total.delivered > 2_000 && total.completed > 500);
    assert!(
        total.delayed > 1_000,
        "items put for later and delivered: {}",
        total.delayed
    );
    assert!(total.purged > 50 && total.take_failed > 500 && total.put_failed > 50);
    let f = total.faults;
    assert!(f.lost_replies > 500 && f.stale_reconnects > 500 && f.refusals > 500);
    assert!(f.expiries > 200 && f.reaps > 20);
}
