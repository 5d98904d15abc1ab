//! Property test for the session: arbitrary schedules of server frames, garbage,
//! disconnects, time jumps and commands (see `zk_recipes_sim::testkit::session`).

use proptest::prelude::*;

proptest! {
    #![proptest_config(ProptestConfig::with_cases(3000))]
    #[test]
    fn session_invariants_hold(schedule in proptest::collection::vec(any::<u8>(), 0..600)) {
        if let Err(e) = zk_recipes_sim::testkit::session::run(&schedule) {
            prop_assert!(false, "{}", e);
        }
    }
}

#[test]
fn schedules_reach_deep_states() {
    // No chroot; submit getData /a and exists /b (watch); answer both OK; submit
    // getChildren2; drop the connection (it fails with ConnectionLoss); reconnect; submit
    // and answer getData /a with NoNode.
    let s = [
        0u8, 0, 0x00, 1, 0x18, 5, 0, 5, 0, 2, 0x22, 11, 0, 0, 0x00, 5, 2,
    ];
    let (submitted, ok) = zk_recipes_sim::testkit::session::run_with_stats(&s).unwrap();
    assert_eq!((submitted, ok), (4, 2));
}

#[test]
fn random_schedules_get_real_replies() {
    // Guard against a harness that never gets past the handshake.
    let mut rng = 0x2545F4914F6CDD1Du64;
    let (mut submitted, mut ok) = (0, 0);
    for _ in 0..300 {
        let schedule: Vec<u8> = (0..400)
            .map(|_| {
                rng ^= rng << 13;
                rng ^= rng >> 7;
                rng ^= rng << 17;
                rng as u8
            })
            .collect();
        let (s, o) = zk_recipes_sim::testkit::session::run_with_stats(&schedule).unwrap();
        submitted += s;
        ok += o;
    }
    println!("submitted {submitted}, answered ok {ok}");
    assert!(
        ok * 10 > submitted,
        "too few real replies: {ok} of {submitted}"
    );
}
