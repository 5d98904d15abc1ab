//! Property test for the TTL node (Curator's `PersistentTtlNode` format) over arbitrary
//! inputs (the same harness as the `ttl_node` fuzz target): every common fault, time
//! jumps past the TTL so the touch child lapses and is reaped, an operator deleting our
//! nodes; safety after every step (`Present` only after an applied touch and while the
//! node is there), liveness and cleanliness once faults stop (present, then closed,
//! then nothing left once the TTL passes); see `zk_recipes_sim::testkit::ttl_node`.

use proptest::prelude::*;
use zk_recipes::error::Error;
use zk_recipes::recipe::ttl_node::TtlNodeEvent;
use zk_recipes_sim::testkit::ttl_node::{run, ttl_nodes_off, Stats};

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2_000))]
    #[test]
    fn ttl_node_invariants_hold(schedule in proptest::collection::vec(any::<u8>(), 0..400)) {
        if let Err(e) = run(&schedule) {
            prop_assert!(false, "{}", e);
        }
    }
}

/// The harness is not vacuous: over many pseudo-random schedules the node is touched
/// and reported present, lapses (reaped by the TTL check) and is found gone and made
/// again, is deleted by an operator, and the common faults hit the machine.
#[test]
fn schedules_exercise_every_path() {
    let mut total = Stats::default();
    for schedule in zk_recipes_sim::testkit::schedules(0x7711_9c3d_2b4e_0a61, 1_000, 400) {
        total += run(&schedule).unwrap();
    }
    println!("{total:?}");
    assert!(total.presents > 800 && total.touches > 1_500, "{total:?}");
    assert!(total.gones > 200 && total.lapses > 200, "{total:?}");
    assert!(
        total.operator_deletes > 300 && total.early_closes > 50,
        "{total:?}"
    );
    let f = total.faults;
    assert!(f.lost_replies > 1_000 && f.stale_reconnects > 1_000 && f.refusals > 1_000);
    assert!(f.expiries > 200 && f.reaps > 30, "{f:?}");
}

/// A server with TTL nodes off: the machine ends with `TtlNodesDisabled` naming the
/// touch child, not with a retry loop or a bare `Unimplemented`.
#[test]
fn ttl_nodes_off_ends_with_an_error_naming_the_cause() {
    let events = ttl_nodes_off();
    assert_eq!(
        events,
        vec![TtlNodeEvent::Failed {
            error: Error::TtlNodesDisabled {
                path: "/app/lease/touch".into()
            }
        }]
    );
    let text = Error::TtlNodesDisabled {
        path: "/x/touch".into(),
    }
    .to_string();
    assert!(text.contains("extendedTypesEnabled"), "{text}");
}

/// Found by `ttl_node_invariants_hold` (fresh seed): the server expired the session
/// while a round of parent creates was on the wire; the round was never answered, yet it
/// counted, so the next `NoNode` (the emptied containers reaped meanwhile) found the
/// rounds used up and failed with `ChrootMissing`. An expired session's round does not
/// count (`Kit::session`).
#[test]
fn a_parent_round_cut_by_an_expired_session_does_not_count() {
    let schedule = [
        63, 0, 16, 0, 27, 0, 0, 218, 90, 0, 0, 0, 0, 25, 0, 68, 0, 0, 0, 91, 0, 0, 48, 0, 0, 0, 0,
        0, 0, 0, 48, 0, 141, 249, 80, 0, 39, 0, 57, 0, 25, 0, 96, 0, 84, 0, 4, 0, 0, 0, 47, 0, 31,
        0, 47, 0, 95, 0, 157, 252,
    ];
    zk_recipes_sim::testkit::ttl_node::run(&schedule).unwrap();
}
