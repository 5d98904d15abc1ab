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

/// Issue 25: four lock users on each of four clients, each session with a window of 2
/// requests, so the users' listings queue and are shared (one request answering
/// several recipes) under every fault: the same invariants as one user per client.
#[test]
fn lock_users_sharing_a_session_and_its_listings_under_every_fault() {
    let seeds = sim_support::seeds_scaled(3_000_000, 4, 500);
    let n = seeds.len();
    let outcomes = sim_support::run_each(seeds, |seed| {
        zk_recipes_sim::testkit::sim_lock::run_shared(seed, 4, 4)
    });
    let grants: usize = outcomes.iter().map(|(g, _, _)| g).sum();
    let handed: usize = outcomes.iter().map(|(_, h, _)| h).sum();
    let shared: u64 = outcomes.iter().map(|(_, _, s)| s).sum();
    println!(
        "{n} schedules x 4 clients x 4 users: {grants} grants, {handed} handed over, {shared} listings shared"
    );
    assert!(grants > n * 16);
    assert!(shared > 0, "listings were shared");
}
