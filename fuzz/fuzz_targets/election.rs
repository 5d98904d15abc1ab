//! Election machines fed arbitrary replies, watch events, session changes, operator
//! deletions, commands and time; see `zk_recipes_sim::testkit::election` for the invariants.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Err(e) = zk_recipes_sim::testkit::election::run(data) {
        panic!("election invariant broken: {e}");
    }
});
