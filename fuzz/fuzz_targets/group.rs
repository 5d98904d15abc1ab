//! Group member, view and rendezvous worker on one session fed arbitrary replies,
//! faults, other sessions' changes and time; see `zk_recipes_sim::testkit::group` for the
//! invariants (the view replays to its snapshot, one watch per node, liveness and
//! cleanliness once faults stop).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Err(e) = zk_recipes_sim::testkit::group::run(data) {
        panic!("group invariant broken: {e}");
    }
});
