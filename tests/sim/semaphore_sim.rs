//! The counting semaphore in the simulator: 5 real clients take leases of a semaphore
//! of 2 under every fault — never more than 2 live holders, each holder's lease node on
//! the server; once faults stop every attempt ends and no lease or mutex node is left
//! (no orphaned lease, CURATOR-315). See `zk_recipes_sim::testkit::sim_semaphore`.
//! `SIM_SEED=n` replays one schedule; `SIM_SEEDS=n` runs n/10 of them (a schedule here
//! costs about ten of the cheapest suites').

#![allow(clippy::disallowed_methods)] // wall-clock time of the run, for the report
#[allow(dead_code)] // this suite uses only part of the shared support
use crate::sim_support;

use zk_recipes_sim::testkit::sim_semaphore;

const CLIENTS: usize = 5;
const MAX: u32 = 2;

#[test]
fn the_semaphore_survives_every_schedule() {
    let seeds = sim_support::seeds_scaled(3_000_000, 10, 300);
    let n = seeds.len();
    let started = std::time::Instant::now();
    let outcomes = sim_support::run_each(seeds, |seed| sim_semaphore::run(seed, CLIENTS, MAX));
    let grants: usize = outcomes.iter().map(|o| o.grants).sum();
    let full = outcomes.iter().filter(|o| o.peak == MAX as usize).count();
    println!(
        "{n} schedules x {CLIENTS} clients, {MAX} leases in {:.1} s: {grants} grants; \
         all {MAX} leases held at once in {full} schedules",
        started.elapsed().as_secs_f64()
    );
    assert!(grants > n * CLIENTS, "leases must change hands ({grants})");
    assert!(
        full * 2 > n,
        "the semaphore must be full often ({full} of {n})"
    );
}

/// The checker can fail: a semaphore of 3 leases checked against a limit of 2 is caught
/// (more than 3 live holders) in some schedule, and the seed replays it exactly.
#[test]
fn the_checker_catches_one_holder_too_many() {
    let run = |seed| {
        let config = sim_semaphore::config(seed, CLIENTS);
        sim_semaphore::run_with(config, MAX + 1, MAX as usize)
    };
    let failing = (3_000_000..3_000_050)
        .find(|&seed| run(seed).is_err())
        .expect("one holder too many was never caught");
    let first = run(failing).unwrap_err();
    assert!(first.contains("live holders"), "{first}");
    assert_eq!(
        first,
        run(failing).unwrap_err(),
        "a seed must replay exactly"
    );
}
