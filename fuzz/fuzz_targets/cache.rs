//! Tree / children cache fed arbitrary replies, faults, other sessions' changes and
//! time; see `zk_recipes_sim::testkit::cache` for the invariants (the events replay to the
//! cache, no invented change, liveness once faults stop).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Err(e) = zk_recipes_sim::testkit::cache::run(data) {
        panic!("cache invariant broken: {e}");
    }
});
