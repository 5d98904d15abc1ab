//! Two id generators on two sessions fed arbitrary replies, faults and time; see
//! `zk_recipes_sim::testkit::naming` for the invariants (ids unique, drawn by their
//! generator, increasing per generator; every request ends and no node is left once
//! faults stop).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Err(e) = zk_recipes_sim::testkit::naming::run(data) {
        panic!("naming invariant broken: {e}");
    }
});
