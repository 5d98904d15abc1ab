//! The simulator driven by fuzzer bytes: they choose the seed, the number of clients,
//! every fault rate and the lock kinds; the real lock recipe must keep exclusion and
//! fencing after every event, and once faults stop every attempt must end with nothing
//! left behind (see `zk_recipes_sim::testkit::sim_lock`).
#![no_main]

use core::time::Duration;
use libfuzzer_sys::fuzz_target;
use zk_recipes_sim::sim::SimConfig;

fuzz_target!(|data: &[u8]| {
    let mut bytes = [0u8; 17];
    for (b, d) in bytes.iter_mut().zip(data) {
        *b = *d;
    }
    let seed = u64::from_le_bytes([bytes[0], bytes[1], bytes[2], bytes[3], bytes[4], bytes[5], bytes[6], bytes[7]]);
    let mut config = SimConfig::with_faults(seed, 2 + usize::from(bytes[8] % 8));
    config.quiet = Duration::from_secs(3);
    config.duration = config.quiet + Duration::from_millis(300 + u64::from(bytes[9]) * 4);
    config.lose_request = u32::from(bytes[10] % 50);
    config.lose_reply = u32::from(bytes[11] % 50);
    config.drop_connection = u32::from(bytes[12]);
    config.pause_server = u32::from(bytes[13] % 60);
    config.expire_session = u32::from(bytes[14] % 100);
    config.crash_client = u32::from(bytes[15] % 100);
    config.trace = false;
    if let Err(e) = zk_recipes_sim::testkit::sim_lock::run_with(config, bytes[16] & 1 == 1) {
        panic!("{e}");
    }
});
