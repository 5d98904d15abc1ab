//! Three multi-lock clients on their own sessions whose sets overlap in a cycle, fed
//! faults, operator deletions and time; the harness of `tests/props/multi_lock_props.rs`
//! (see `zk_recipes_sim::testkit::multi_lock` for the invariants: never two live holders
//! of a path; once faults stop every attempt ends in bounded virtual time and no lock
//! node is left).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Err(e) = zk_recipes_sim::testkit::multi_lock::run(data) {
        panic!("multi-lock invariant broken: {e}");
    }
});
