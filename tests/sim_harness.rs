//! The invariant harness must be able to fail: a naive raw-API lock is caught violating
//! mutual exclusion under lost replies, with a seed that replays the same failure; the
//! careful version of the same lock survives thousands of faulty schedules.
//!
//! `SIM_SEED=n cargo test --all-features --test sim_harness` replays one seed with its trace.

use proptest::prelude::*;
use zk_recipes::sim::SimConfig;
use zk_recipes::testkit::sim_lock::{run, run_with};

fn replay_seed() -> Option<u64> {
    std::env::var("SIM_SEED").ok().and_then(|s| s.parse().ok())
}

#[test]
fn the_harness_catches_a_naive_lock_and_replays_it() {
    if let Some(seed) = replay_seed() {
        if let Err(e) = run(false, seed) {
            println!("{e}");
        }
        return;
    }
    let failing = (0..2000)
        .find(|&seed| run(false, seed).is_err())
        .expect("the naive lock was never caught");
    let first = run(false, failing).unwrap_err();
    let again = run(false, failing).unwrap_err();
    assert_eq!(first, again, "a seed must replay exactly");
    assert!(first.contains(&format!("seed {failing}")), "{first}");
    assert!(first.contains("two live holders"), "{first}");
    println!("naive lock caught at seed {failing}:\n{first}");
}

#[test]
fn a_careful_lock_survives_every_schedule() {
    if let Some(seed) = replay_seed() {
        run(true, seed).unwrap_or_else(|e| panic!("{e}"));
        return;
    }
    let seeds: u64 = std::env::var("SIM_SEEDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(10_000);
    let threads = 2;
    let total: u64 = std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                s.spawn(move || {
                    let mut acquired = 0;
                    for seed in (t..seeds).step_by(threads as usize) {
                        acquired += run(true, seed).unwrap_or_else(|e| panic!("{e}"));
                    }
                    acquired
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).sum()
    });
    println!("{seeds} schedules x 8 clients, {total} acquisitions, no double holder");
    assert!(
        total > seeds * 8,
        "the lock should change hands many times per schedule ({total})"
    );
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]
    /// Shrinking-friendly: fault rates and client counts are inputs, so a failure shrinks
    /// to the fewest faults that still break the invariant.
    #[test]
    fn careful_lock_under_any_fault_mix(
        seed in any::<u64>(),
        clients in 2usize..10,
        lose in 0u32..30,
        drop in 0u32..200,
        pause in 0u32..30,
        expire in 0u32..50,
        crash in 0u32..50,
    ) {
        let mut config = SimConfig::with_faults(seed, clients);
        config.lose_request = lose;
        config.lose_reply = lose;
        config.drop_connection = drop;
        config.pause_server = pause;
        config.expire_session = expire;
        config.crash_client = crash;
        if let Err(e) = run_with(true, config) {
            prop_assert!(false, "{}", e);
        }
    }
}
