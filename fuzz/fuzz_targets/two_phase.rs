//! The two-phase commit machines (coordinator or site, either variant) fed arbitrary
//! replies, faults, other participants' writes, session changes, commands and time;
//! see `zk_recipes_sim::testkit::two_phase` for the invariants.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Err(e) = zk_recipes_sim::testkit::two_phase::run(data) {
        panic!("two-phase commit invariant broken: {e}");
    }
});
