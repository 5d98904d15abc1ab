//! The inspect machine fed arbitrary schedules; see `zk_recipes_sim::testkit::inspect`
//! for the invariants.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Err(e) = zk_recipes_sim::testkit::inspect::run(data) {
        panic!("inspect invariant broken: {e}");
    }
});
