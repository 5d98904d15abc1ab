//! The double barrier machine fed arbitrary schedules; see
//! `zk_recipes_sim::testkit::double_barrier` for the invariants.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Err(e) = zk_recipes_sim::testkit::double_barrier::run(data) {
        panic!("double barrier invariant broken: {e}");
    }
});
