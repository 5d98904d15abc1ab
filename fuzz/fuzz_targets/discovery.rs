//! Service discovery: the registration and the cache of its service on one session fed
//! arbitrary replies, faults, other sessions' changes and time (see
//! `zk_recipes_sim::testkit::discovery` for the invariants), and the instance JSON
//! reader fed the same bytes (an instance or an error, never a panic; what it reads
//! writes back and reads the same).
#![no_main]

use libfuzzer_sys::fuzz_target;
use zk_recipes::recipe::discovery::ServiceInstance;

fuzz_target!(|data: &[u8]| {
    if let Ok(i) = ServiceInstance::from_json(data) {
        let json = i.to_json().expect("a payload read is valid JSON");
        assert_eq!(ServiceInstance::from_json(json.as_bytes()).as_ref(), Ok(&i));
    }
    if let Err(e) = zk_recipes_sim::testkit::discovery::run(data) {
        panic!("discovery invariant broken: {e}");
    }
});
