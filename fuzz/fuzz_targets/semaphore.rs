//! Three semaphore clients (`N = 2`) on their own sessions fed faults, operator
//! deletions and time; see `zk_recipes_sim::testkit::semaphore` for the invariants (never
//! more than `N` live holders; liveness and cleanliness once faults stop).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Err(e) = zk_recipes_sim::testkit::semaphore::run(data) {
        panic!("semaphore invariant broken: {e}");
    }
});
