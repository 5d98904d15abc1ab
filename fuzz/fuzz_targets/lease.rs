//! kazoo's `NonBlockingLease` fed lost replies, refusals, connection losses, lagging
//! followers, expiry, reaps, a kazoo holder contending (and dying) and time; see
//! `zk_recipes_sim::testkit::lease` for the invariants.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Err(e) = zk_recipes_sim::testkit::lease::run(data) {
        panic!("lease invariant broken: {e}");
    }
});
