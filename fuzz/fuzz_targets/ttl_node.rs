//! The TTL node (Curator's `PersistentTtlNode` format) fed arbitrary replies, lost
//! replies, refusals, connection losses, expiry, reaps, operator deletes and time past
//! its TTL; see `zk_recipes_sim::testkit::ttl_node` for the invariants.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Err(e) = zk_recipes_sim::testkit::ttl_node::run(data) {
        panic!("ttl node invariant broken: {e}");
    }
});
