//! The real barrier in the simulator: one client sets and removes it, the others (3 by
//! default, `SIM_CLIENTS` for more) wait on it,
//! every fault, 10,000 schedules — release safety after every event, liveness and
//! cleanliness once faults stop (see `zk_recipes_sim::testkit::sim_barrier`).
//!
//! `SIM_SEED=n cargo test --all-features --test sim barrier_sim:: -- --nocapture` replays one
//! seed; `SIM_SEEDS=n` runs more.

use zk_recipes_sim::testkit::sim_barrier;

#[test]
fn the_barrier_survives_every_schedule() {
    let seeds: Vec<u64> = match std::env::var("SIM_SEED").ok().and_then(|s| s.parse().ok()) {
        Some(seed) => vec![seed],
        None => (0..std::env::var("SIM_SEEDS")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(10_000u64))
            .collect(),
    };
    let n = seeds.len();
    let threads = std::thread::available_parallelism()
        .map(|p| p.get())
        .unwrap_or(2)
        .clamp(2, 4);
    let released: usize = std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                let chunk: Vec<u64> = seeds.iter().copied().skip(t).step_by(threads).collect();
                s.spawn(move || {
                    chunk
                        .into_iter()
                        .map(|seed| {
                            sim_barrier::run(seed, clients()).unwrap_or_else(|e| panic!("{e}"))
                        })
                        .sum::<usize>()
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).sum()
    });
    println!("{n} schedules x {} clients: {released} waits released; release safety, liveness and cleanliness held", clients());
    assert!(
        released > n * (clients() - 1),
        "waiters must be released many times ({released})"
    );
}

/// Clients per schedule: `SIM_CLIENTS`, else 4 (what fits the CI's time budget
/// with 10,000 schedules; every fault still occurs).
fn clients() -> usize {
    std::env::var("SIM_CLIENTS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(4)
}
