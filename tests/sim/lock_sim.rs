//! The read/write lock in the simulator: 8 real clients mixing readers and writers
//! under every fault — never a writer beside anyone, writers' fencing tokens rising,
//! and once faults stop every attempt ends and no node is left (see
//! `zk_recipes_sim::testkit::sim_lock`). The exclusive lock's 10,000 schedules are in
//! `sim_harness`. `SIM_SEED=n` replays one schedule; `SIM_SEEDS=n` runs more.

use crate::sim_support;

#[test]
fn read_write_lock_under_every_fault() {
    let seeds = sim_support::seeds(1_000_000, 3_000);
    let n = seeds.len();
    let (grants, handed) = sim_support::run_all(seeds, true);
    println!("{n} read/write schedules x 8 clients: {grants} grants, {handed} handed over by the holder's release");
    assert!(grants > n * 8);
    assert!(handed > 0, "writers hand the lock on");
}

/// Issue 26: an operator deletes contender nodes (a holder's, a waiter's, a recovering
/// attempt's) under every other fault. No two holders of nodes the server has; a
/// holder watching its node hears of its deletion within the recovery bound; once
/// faults stop every attempt ends and no node is left.
#[test]
fn exclusive_lock_with_an_operator_deleting_nodes() {
    let seeds = sim_support::seeds_scaled(2_000_000, 10, 1_000);
    let n = seeds.len();
    let outcomes = sim_support::run_each(seeds, |seed| {
        zk_recipes_sim::testkit::sim_lock::run_with_operator(seed, 8)
    });
    let grants: usize = outcomes.iter().map(|(g, _)| g).sum();
    println!("{n} schedules with an operator deleting nodes x 8 clients: {grants} grants");
    assert!(grants > n * 8);
}
