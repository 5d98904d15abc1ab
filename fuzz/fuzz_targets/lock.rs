//! The lock machine fed arbitrary replies, watch events, session changes, commands and
//! time; see `zk_recipes_sim::testkit::lock` for the invariants.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Err(e) = zk_recipes_sim::testkit::lock::run(data) {
        panic!("lock invariant broken: {e}");
    }
});
