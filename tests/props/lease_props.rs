//! Property test for kazoo's `NonBlockingLease`: our attempts and a kazoo holder
//! (written as kazoo's `NonBlockingLease` runs) contend for one lease in the shared
//! model of ZooKeeper (`testkit::zk`), under lost replies, dropped connections, lagging
//! followers, refusals, expiries, container reaping, kazoo's process dying, dropped
//! attempts and time (`zk_recipes_sim::testkit::lease`): never two holders whose
//! leases overlap on the one clock, a grant only with our record written, a refusal
//! only behind a live record of another holder; once faults stop an attempt decides
//! and no lock node (nor any node of our sessions) is left.

use proptest::prelude::*;
use zk_recipes_sim::testkit::lease::{run, Stats};

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1_000))]
    #[test]
    fn lease_invariants_hold(schedule in proptest::collection::vec(any::<u8>(), 0..400)) {
        if let Err(e) = run(&schedule) {
            prop_assert!(false, "{}", e);
        }
    }
}

/// The harness is not vacuous: over many pseudo-random schedules our attempts are
/// granted (renewals and takeovers from kazoo), refused, fail with the session and are
/// dropped; kazoo is granted, refused and dies; the common faults hit the machine.
#[test]
fn schedules_exercise_every_path() {
    let mut total = Stats::default();
    for schedule in zk_recipes_sim::testkit::schedules(0x51ed_2701_a3c4_9b17, 500, 400) {
        total += run(&schedule).unwrap();
    }
    println!("{total:?}");
    // Observed (seed above): attempts 1,213, granted 377 (170 renewals, 176 takeovers
    // from kazoo), refused 500, failed 126, dropped 210; kazoo granted 1,128, refused
    // 117, died 278; lost replies 1,225, lagging reconnects 1,292, refusals 1,245,
    // expiries 158 (no reaps: kazoo's `ensure_path` makes the path persistent).
    assert!(total.attempts > 600 && total.grants > 180 && total.refusals > 250);
    assert!(total.renewals > 80 && total.takeovers > 80, "{total:?}");
    assert!(total.failures > 60 && total.drops > 100, "{total:?}");
    assert!(total.kazoo_grants > 500 && total.kazoo_refusals > 50 && total.kazoo_deaths > 130);
    let f = total.faults;
    assert!(f.lost_replies > 600 && f.stale_reconnects > 600 && f.refusals > 600);
    assert!(f.expiries > 75, "{f:?}");
}
