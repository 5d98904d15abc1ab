//! The leader election in the simulator: 5 real clients (`SIM_CLIENTS` for more) standing for election,
//! resigning, acknowledging and closing under every fault, 10,000 schedules — never two
//! leaders, fencing tokens rising, acknowledgements only by the current leader; once
//! faults stop exactly one leader, exactly the live candidates' nodes, then after the
//! close nothing left (see `zk_recipes_sim::testkit::sim_election`). The harness must be able
//! to fail: a user that ignores `Suspended`/`Lost` is caught, and its seed replays.
//!
//! `SIM_SEED=n cargo test --all-features --test sim election_sim:: -- --nocapture` replays one
//! seed; `SIM_SEEDS=n` runs more.
// The wall clock only reports how long the schedules took.
#![allow(clippy::disallowed_methods)]

use std::time::Instant;

use proptest::prelude::*;
use zk_recipes_sim::sim::SimConfig;
use zk_recipes_sim::testkit::sim_election::{self, Totals, User, FAULTS};

/// `SIM_SEED=n` replays one seed; `SIM_SEEDS=n` runs n seeds from `first`; else
/// `default` of them.
fn seeds(first: u64, default: u64) -> Vec<u64> {
    match std::env::var("SIM_SEED").ok().and_then(|s| s.parse().ok()) {
        Some(seed) => vec![seed],
        None => {
            let n = std::env::var("SIM_SEEDS")
                .ok()
                .and_then(|s| s.parse().ok())
                .unwrap_or(default);
            (first..first + n).collect()
        }
    }
}

/// Runs every seed on every core; panics with the first failure's report.
fn run_all(seeds: &[u64], clients: usize) -> Totals {
    run_each(seeds, |seed| {
        sim_election::run(seed, clients, User::Careful)
    })
}

/// Runs `one` on every seed on every core; panics with the first failure's report.
fn run_each(seeds: &[u64], one: impl Fn(u64) -> Result<Totals, String> + Sync) -> Totals {
    let one = &one;
    let threads = std::thread::available_parallelism().map_or(2, |n| n.get());
    std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                let chunk: Vec<u64> = seeds.iter().copied().skip(t).step_by(threads).collect();
                s.spawn(move || {
                    let mut totals = Totals::default();
                    for seed in chunk {
                        totals += one(seed).unwrap_or_else(|e| panic!("{e}"));
                    }
                    totals
                })
            })
            .collect();
        let mut totals = Totals::default();
        for h in handles {
            totals += h.join().unwrap();
        }
        totals
    })
}

#[test]
fn the_harness_catches_a_user_that_ignores_suspended_and_lost() {
    let failing = (0..3000)
        .find(|&seed| sim_election::run(seed, 8, User::Naive).is_err())
        .expect("the naive user was never caught");
    let first = sim_election::run(failing, 8, User::Naive).unwrap_err();
    let again = sim_election::run(failing, 8, User::Naive).unwrap_err();
    assert_eq!(first, again, "a seed must replay exactly");
    assert!(first.contains(&format!("seed {failing}")), "{first}");
    assert!(first.contains("two leaders"), "{first}");
    // The careful user passes the same schedule.
    sim_election::run(failing, 8, User::Careful).unwrap_or_else(|e| panic!("{e}"));
}

#[test]
fn the_election_survives_every_schedule() {
    let seeds = seeds(0, 10_000);
    let n = seeds.len();
    let started = Instant::now();
    let totals = run_all(&seeds, clients());
    println!(
        "{n} schedules x {} clients in {:.1} s: {} elections, {} acknowledgements ({} failed), \
         {} leaders reported by observers, {} events in liveness windows; every invariant held",
        clients(),
        started.elapsed().as_secs_f64(),
        totals.elections,
        totals.acks,
        totals.ack_failures,
        totals.observed,
        totals.window_checks,
    );
    assert!(
        totals.observed > n * clients(),
        "observers must see leaders come and go ({})",
        totals.observed
    );
    assert!(
        totals.elections > n * clients(),
        "leadership must change hands many times ({})",
        totals.elections
    );
    assert!(
        totals.acks > n * 4,
        "leaders must acknowledge ({})",
        totals.acks
    );
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]
    /// Fault rates and client counts are inputs, so a failure shrinks to the fewest
    /// faults that still break an invariant.
    #[test]
    fn the_election_under_any_fault_mix(
        seed in any::<u64>(),
        clients in 2usize..9,
        lose in 0u32..30,
        drop in 0u32..200,
        pause in 0u32..30,
        expire in 0u32..50,
        crash in 0u32..50,
        stale in 0u32..400,
    ) {
        let mut config = SimConfig::with_faults(seed, clients);
        config.duration = FAULTS;
        config.lose_request = lose;
        config.lose_reply = lose;
        config.drop_connection = drop;
        config.pause_server = pause;
        config.expire_session = expire;
        config.crash_client = crash;
        config.stale_reconnect = stale;
        if let Err(e) = sim_election::run_with(config, User::Careful) {
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

/// Issue 26: an operator deletes candidate nodes (a leader's, a follower's, one being
/// recovered after a reconnect) under every other fault. Never two leaders on nodes the
/// server has; a leader whose node was deleted hears so within the recovery bound; an
/// `Elected` or `Acknowledged` is excused only for a node the operator deleted; once
/// faults stop, one leader, acknowledged, and after the close nothing left.
#[test]
fn the_election_survives_an_operator_deleting_candidates() {
    let mut seeds = seeds(5_000_000, 1_000);
    if std::env::var("SIM_SEED").is_err() && std::env::var("SIM_SEEDS").is_ok() {
        seeds.truncate((seeds.len() / 5).max(1)); // a fifth of SIM_SEEDS
    }
    let n = seeds.len();
    let totals = run_each(&seeds, |seed| {
        sim_election::run_with_operator(seed, clients())
    });
    println!(
        "{n} schedules with an operator deleting candidates: {} elections, {} acknowledgements",
        totals.elections, totals.acks
    );
    assert!(totals.elections > n * clients());
}
