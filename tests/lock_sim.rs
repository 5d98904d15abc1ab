//! The read/write lock in the simulator: 8 real clients mixing readers and writers
//! under every fault — never a writer beside anyone, writers' fencing tokens rising,
//! and once faults stop every attempt ends and no node is left (see
//! `zk_recipes::testkit::sim_lock`). The exclusive lock's 10,000 schedules are in
//! `sim_harness`. `SIM_SEED=n` replays one schedule; `SIM_SEEDS=n` runs more.

use zk_recipes::testkit::sim_lock;

#[test]
fn read_write_lock_under_every_fault() {
    let seeds: Vec<u64> = match std::env::var("SIM_SEED").ok().and_then(|s| s.parse().ok()) {
        Some(seed) => vec![seed],
        None => (0..std::env::var("SIM_SEEDS")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(3_000u64))
            .map(|s| s + 1_000_000)
            .collect(),
    };
    let n = seeds.len();
    let grants: usize = std::thread::scope(|s| {
        let handles: Vec<_> = (0..2)
            .map(|t| {
                let chunk: Vec<u64> = seeds.iter().copied().skip(t).step_by(2).collect();
                s.spawn(move || {
                    chunk
                        .into_iter()
                        .map(|seed| sim_lock::run(seed, 8, true).unwrap_or_else(|e| panic!("{e}")))
                        .sum::<usize>()
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).sum()
    });
    println!("{n} read/write schedules x 8 clients: {grants} grants");
    assert!(grants > n * 8);
}
