//! Property test for the server model the embedded server serves: arbitrary schedules of
//! connections, handshakes, requests, garbage, time jumps and fault controls (see
//! `zk_recipes_sim::testkit::server_input`); the fuzz target `server_input` runs the
//! same harness.

use proptest::prelude::*;
use zk_recipes_sim::testkit::server_input::{run, run_with_stats, ServerInputStats};

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]
    #[test]
    fn the_server_survives_any_input(schedule in proptest::collection::vec(any::<u8>(), 0..600)) {
        if let Err(e) = run(&schedule) {
            prop_assert!(false, "{}", e);
        }
    }
}

#[test]
fn schedules_get_past_the_handshake_to_replies_notifications_and_closures() {
    let mut seen = ServerInputStats::default();
    for schedule in zk_recipes_sim::testkit::schedules(0x5e4e_1234_0000_0037, 500, 600) {
        seen += run_with_stats(&schedule).unwrap();
    }
    assert!(seen.handshakes > 2000, "{seen:?}");
    assert!(seen.ordered_replies > 4000, "{seen:?}");
    assert!(seen.notifications > 300, "{seen:?}");
    assert!(seen.closed_by_server > 1000, "{seen:?}");
}
