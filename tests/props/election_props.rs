//! Property test for the election machine over arbitrary inputs (the same harness as
//! the `election` fuzz target): several machines, each with its own session, against a
//! model server with refusals, lost replies, dropped connections, expiry and operator
//! deletions; safety after every step, liveness once faults stop (see
//! `zk_recipes_sim::testkit::election`).

use proptest::prelude::*;

proptest! {
    #![proptest_config(ProptestConfig::with_cases(10_000))]
    #[test]
    fn election_invariants_hold(schedule in proptest::collection::vec(any::<u8>(), 0..400)) {
        if let Err(e) = zk_recipes_sim::testkit::election::run(&schedule) {
            prop_assert!(false, "{}", e);
        }
    }
}

/// Schedules that once broke an invariant: each must now pass.
#[test]
fn regressions() {
    let cases: &[&[u8]] = &[&[], &[0], &[2, 7, 0], &[1, 11, 255, 9, 0]];
    for case in cases {
        zk_recipes_sim::testkit::election::run(case).unwrap_or_else(|e| panic!("{case:?}: {e}"));
    }
}

/// Found by this harness: a leader acknowledges, then an operator deletes its
/// candidate node; the machine hears `Lost` and later closes. Its acknowledgement (an
/// ephemeral node of its still-live session) used to stay after `Closed`, since it
/// could not tell its own from a newer leader's. Acknowledgements are now named by
/// their leadership's token (`<ack_dir>/<token>`), so a deposed leader deletes its own.
#[test]
fn the_acknowledgement_of_a_deleted_candidate_does_not_outlive_close() {
    let schedule = [
        55, 14, 0, 8, 91, 11, 0, 16, 62, 46, 0, 14, 0, 29, 87, 84, 44, 13, 15, 80, 14, 13, 87, 84,
        74, 0, 0, 205, 18, 61, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
        0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
        0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 76, 0, 0, 0, 0, 0, 0, 0,
        0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
        0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 109, 206,
    ];
    zk_recipes_sim::testkit::election::run(&schedule).unwrap();
}
