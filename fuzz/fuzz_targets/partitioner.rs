//! Three set-partitioner members on their own sessions fed faults, operator deletions and
//! time; see `zk_recipes_sim::testkit::partitioner` for the invariants (never an item
//! held by two live members; every item held once, and nothing left, once faults stop).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Err(e) = zk_recipes_sim::testkit::partitioner::run(data) {
        panic!("partitioner invariant broken: {e}");
    }
});
