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

/// The harness is not vacuous: over many pseudo-random schedules machines are elected,
/// acknowledge, lose, reconnect and resign, an operator deletes candidate nodes, the
/// peers meet faults, and the machine under test meets lost replies, reconnects to
/// lagging followers, refusals, expiries and reaped containers.
/// Found by `election_invariants_hold` (fresh seed): a leader's acknowledgement was
/// queued when the client gave up on its session; the session answers the queued write
/// with `SessionExpired` before it reports `Expired`, and between the two the machine
/// still said "an acknowledgement in flight" with nothing in flight (its `check` rule).
/// A write the session's end answered leaves nothing to do: the leadership ends with it.
#[test]
fn an_acknowledgement_answered_by_the_session_end_is_not_left_in_flight() {
    let schedule = [
        140, 0, 0, 0, 0, 0, 0, 15, 0, 0, 0, 0, 0, 0, 0, 0, 0, 9, 0, 9, 0, 9, 0, 0, 0, 0, 0, 0, 0,
        0, 0, 75, 1, 0, 25, 0, 9, 0, 132, 0, 73, 0, 59, 1, 0, 0, 0, 212, 0, 93, 0, 203, 73, 69, 0,
        0, 0, 0, 148, 0, 36, 0, 4, 0, 15, 0, 15, 0, 20, 0, 39, 0, 42, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
        0, 0, 0, 15, 0, 0, 0, 0, 0, 15, 0, 0, 0, 61, 249,
    ];
    zk_recipes_sim::testkit::election::run(&schedule).unwrap();
}

/// Found by `election_invariants_hold` (fresh seed): a leader's acknowledgement was
/// written, then an operator deleted its candidate node and the connection broke; on the
/// reconnect the check of its node was still open (its `sync` refused) when the user
/// called `acknowledge()` again, and the machine told `Acknowledged` at once on what it
/// knew before. Now it tells it at once only while nothing questions its hold; otherwise
/// it writes the acknowledgement again, whose `check` of our node decides.
#[test]
fn acknowledge_again_while_the_hold_is_questioned_writes_again() {
    let schedule = [
        140, 111, 0, 0, 0, 68, 0, 4, 0, 176, 0, 91, 1, 0, 106, 0, 153, 0, 20, 0, 48, 0, 48, 0, 43,
        1, 13, 59, 1, 45, 15, 0, 171, 1, 55, 0, 0, 218, 0, 9, 0, 25, 0, 89, 0, 144, 0, 9, 0, 0, 0,
        75, 1, 0, 52, 0, 144, 0, 4, 0, 48, 0, 9, 0, 43, 0, 0, 0, 0, 123, 0, 0, 0, 0, 91, 0, 0, 52,
        0, 87, 0, 0, 0, 0, 0, 0, 0, 31, 0, 15, 0, 0, 0, 57, 0, 41, 0, 171, 0, 0, 170, 43, 0, 0, 0,
        0, 0, 0, 31, 0, 91, 0, 0, 116, 0, 91, 61, 93,
    ];
    zk_recipes_sim::testkit::election::run(&schedule).unwrap();
}

#[test]
fn schedules_exercise_every_path() {
    let mut total = zk_recipes_sim::testkit::election::Stats::default();
    for schedule in zk_recipes_sim::testkit::schedules(0x9e37_79b9_7f4a_7c15, 2_000, 400) {
        total += zk_recipes_sim::testkit::election::run_stats(&schedule)
            .unwrap_or_else(|e| panic!("{schedule:?}: {e}"));
    }
    println!("{total:?}");
    assert!(total.elected > 500 && total.acknowledged > 400 && total.lost > 50);
    assert!(total.reconnected > 20 && total.resigned > 1_000);
    assert!(total.operator_deletes > 500 && total.peer_faults > 1_000);
    let f = total.faults;
    assert!(f.lost_replies > 1_000 && f.stale_reconnects > 1_000 && f.refusals > 1_000);
    assert!(f.expiries > 200 && f.reaps > 20);
}

/// Found by this harness once the acknowledgement directory may be missing at the
/// start: both creates of the directory were lost with the connection, the
/// acknowledgement failed (`NoParent`), and every later `acknowledge` failed at once
/// without creating the directory again (the give-up bound counted the earlier call's
/// rounds), so the leader was never acknowledged once faults stopped. Each
/// `acknowledge` call now has its own rounds.
#[test]
fn a_new_acknowledge_creates_the_missing_directory_again() {
    let schedule = [
        129, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 15, 0, 0, 0, 0, 0, 45, 0, 0, 0, 0, 0,
        0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 15, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 141, 0, 0, 0, 61,
        0, 15, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 111, 0, 0, 0, 0, 0, 47, 0, 0, 0, 0, 0, 0, 0,
        0, 0, 0, 0, 15, 0, 0, 0, 0, 0, 141, 0, 0, 0, 0, 0, 93, 0, 0, 0, 25, 0, 31, 0, 0, 0, 105, 0,
        0, 0, 171, 61, 16, 13, 0, 96, 0, 0, 0, 20, 0, 152, 0, 47, 0, 201, 0, 0, 0, 4, 0, 4, 0, 164,
        0, 0, 0, 36, 0, 0, 0, 8, 0,
    ];
    zk_recipes_sim::testkit::election::run(&schedule).unwrap();
}
