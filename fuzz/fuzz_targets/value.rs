//! Three shared counters on their own sessions adding to one node under faults and
//! another writer; see `zk_recipes_sim::testkit::value` for the invariants (no increment
//! lost or doubled, every operation answered once faults stop).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Err(e) = zk_recipes_sim::testkit::value::run(data) {
        panic!("counter invariant broken: {e}");
    }
});
