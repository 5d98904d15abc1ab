//! The server model (what the embedded server serves) fed a fuzzer-chosen schedule of
//! connections, handshakes, requests, raw bytes, time jumps and fault controls;
//! invariants from `zk_recipes_sim::testkit::server_input` must hold.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Err(e) = zk_recipes_sim::testkit::server_input::run(data) {
        panic!("server invariant broken: {e}");
    }
});
