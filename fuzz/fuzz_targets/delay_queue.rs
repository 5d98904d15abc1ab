//! Delay-queue producers and consumers (at most once and at least once, items with times
//! past and future) fed arbitrary replies, lost replies, refusals, connection losses,
//! expiry, commands and time; see `zk_recipes_sim::testkit::delay_queue` for the
//! invariants.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Err(e) = zk_recipes_sim::testkit::delay_queue::run(data) {
        panic!("delay queue invariant broken: {e}");
    }
});
