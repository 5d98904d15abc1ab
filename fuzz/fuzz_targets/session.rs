//! The session fed a fuzzer-chosen schedule of server frames, garbage, disconnects, time
//! jumps and commands; invariants from `zk_recipes_sim::testkit::session` must hold.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Err(e) = zk_recipes_sim::testkit::session::run(data) {
        panic!("session invariant broken: {e}");
    }
});
