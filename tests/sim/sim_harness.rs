//! The headline simulator test: the real lock recipe, 8 clients, every fault, 10,000
//! schedules — safety after every event, liveness and cleanliness once faults stop
//! (see `zk_recipes_sim::testkit::sim_lock`). The harness itself must be able to fail: a
//! naive raw-API lock is caught violating mutual exclusion, with a seed that replays
//! the same failure.
//!
//! `SIM_SEED=n cargo test --all-features --test sim sim_harness:: -- --nocapture` replays one
//! seed; `SIM_SEEDS=n` runs more.

use crate::sim_support;
use proptest::prelude::*;
use zk_recipes_sim::sim::SimConfig;

use sim_support::{run_all, seeds};
use zk_recipes_sim::testkit::{sim_lock, sim_naive};

#[test]
fn the_harness_catches_a_naive_lock_and_replays_it() {
    let failing = (0..2000)
        .find(|&seed| sim_naive::run(false, seed).is_err())
        .expect("the naive lock was never caught");
    let first = sim_naive::run(false, failing).unwrap_err();
    let again = sim_naive::run(false, failing).unwrap_err();
    assert_eq!(first, again, "a seed must replay exactly");
    assert!(first.contains(&format!("seed {failing}")), "{first}");
    assert!(first.contains("two live holders"), "{first}");
}

#[test]
fn the_lock_recipe_survives_every_schedule() {
    let seeds = seeds(0, 10_000);
    let n = seeds.len();
    let (grants, handed) = run_all(seeds, false);
    println!("{n} schedules x 8 clients: {grants} grants, {handed} handed over by the holder's release; exclusion, fencing, liveness and cleanliness held");
    assert!(
        grants > n * 8,
        "the lock must change hands many times ({grants})"
    );
    assert!(
        handed * 10 > grants,
        "grant on release must carry a good part of the handoffs ({handed} of {grants})"
    );
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]
    /// Fault rates and client counts are inputs, so a failure shrinks to the fewest
    /// faults that still break an invariant.
    #[test]
    fn the_lock_recipe_under_any_fault_mix(
        seed in any::<u64>(),
        clients in 2usize..10,
        lose in 0u32..30,
        drop in 0u32..200,
        pause in 0u32..30,
        expire in 0u32..50,
        crash in 0u32..50,
        readers in any::<bool>(),
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
        if let Err(e) = sim_lock::run_with(config, readers) {
            prop_assert!(false, "{}", e);
        }
    }
}
