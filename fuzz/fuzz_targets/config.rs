//! A configuration writer and two readers, each on its own session, fed arbitrary
//! replies, faults and time; see `zk_recipes_sim::testkit::config` for the invariants (no
//! snapshot mixes two configurations; once faults stop every write ends and both
//! readers hold the last configuration).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Err(e) = zk_recipes_sim::testkit::config::run(data) {
        panic!("config invariant broken: {e}");
    }
});
