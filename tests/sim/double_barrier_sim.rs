//! The real double barrier in the simulator: 5 clients (`SIM_CLIENTS` for more), every
//! fault, 10,000 schedules
//! (N from 2 to the client count) — round safety after every event, liveness and cleanliness once
//! faults stop (see `zk_recipes_sim::testkit::sim_double_barrier`).
//!
//! `SIM_SEED=n cargo test --all-features --test sim double_barrier_sim:: -- --nocapture`
//! replays one seed; `SIM_SEEDS=n` runs more.

use proptest::prelude::*;
use zk_recipes_sim::sim::SimConfig;
use zk_recipes_sim::testkit::sim_double_barrier;

fn seeds(default: u64) -> Vec<u64> {
    match std::env::var("SIM_SEED").ok().and_then(|s| s.parse().ok()) {
        Some(seed) => vec![seed],
        None => {
            let n = std::env::var("SIM_SEEDS")
                .ok()
                .and_then(|s| s.parse().ok())
                .unwrap_or(default);
            (0..n).collect()
        }
    }
}

#[test]
fn the_double_barrier_survives_every_schedule() {
    let seeds = seeds(10_000);
    let n = seeds.len();
    let threads = std::thread::available_parallelism()
        .map(|p| p.get())
        .unwrap_or(2)
        .clamp(2, 4);
    let left: usize = std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                let chunk: Vec<u64> = seeds.iter().copied().skip(t).step_by(threads).collect();
                s.spawn(move || {
                    chunk
                        .into_iter()
                        .map(|seed| {
                            sim_double_barrier::run(seed, clients())
                                .unwrap_or_else(|e| panic!("{e}"))
                        })
                        .sum::<usize>()
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).sum()
    });
    println!("{n} schedules x {} clients: {left} participations left their round; round safety, liveness and cleanliness held", clients());
    assert!(
        left > n * clients(),
        "rounds must complete many times ({left})"
    );
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(32))]
    /// Fault rates, client counts and N are inputs, so a failure shrinks.
    ///
    /// `run_with` lengthens the quiet stretch to the clients' recovery bound: with heavy
    /// connection faults a client's reconnect backoff reaches its cap, and a quiet 3 s
    /// was shorter than a session expiring a timeout in and redialling up to 2 s later
    /// (replayed in `tests/sim/double_barrier_regressions.rs`).
    #[test]
    fn the_double_barrier_under_any_fault_mix(
        seed in any::<u64>(),
        clients in 2usize..9,
        n in 1u32..9,
        lose in 0u32..30,
        drop in 0u32..200,
        pause in 0u32..30,
        expire in 0u32..50,
        crash in 0u32..50,
    ) {
        let mut config = SimConfig::with_faults(seed, clients);
        config.duration = std::time::Duration::from_millis(5500);
        config.quiet = std::time::Duration::from_secs(3);
        config.lose_request = lose;
        config.lose_reply = lose;
        config.drop_connection = drop;
        config.pause_server = pause;
        config.expire_session = expire;
        config.crash_client = crash;
        if let Err(e) = sim_double_barrier::run_with(config, n.min(clients as u32)) {
            prop_assert!(false, "{}", e);
        }
    }
}

/// Clients per schedule: `SIM_CLIENTS`, else 5 (what fits the CI's time budget
/// with 10,000 schedules; every fault still occurs).
fn clients() -> usize {
    std::env::var("SIM_CLIENTS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(5)
}
