//! Configuration with the ready node (the paper's protocol) and with `multi` /
//! `multiRead`, in the simulator: one writer writes configuration after configuration,
//! 3 readers follow it, under every fault. `ready` never stands over a half-written
//! configuration, no reader ever reports a mix of two writes (or one never complete with
//! `ready`) or goes back, and after quiet every reader's last report is the server's
//! last configuration (values and versions). See `zk_recipes_sim::testkit::sim_config`.
//!
//! A third test runs ready-node readers under a `multi` writer (safe by the module's
//! table). `SIM_SEED=n` replays one schedule; `SIM_SEEDS=n` runs n/30 schedules in each
//! of the three (a schedule here costs about ten of the cheapest suites').

#![allow(clippy::disallowed_methods)] // wall-clock time of the run, for the report
#[allow(dead_code)] // this suite uses only part of the shared support
use crate::sim_support;

use zk_recipes::recipe::config::ConfigMode;
use zk_recipes_sim::testkit::sim_config::{self, Writers};

const CLIENTS: usize = 4;

fn survives(mode: ConfigMode, writers: Writers, first: u64) {
    let seeds = sim_support::seeds_scaled(first, 30, 100);
    let n = seeds.len();
    let started = std::time::Instant::now();
    let all = sim_support::run_each(seeds, |seed| sim_config::run(seed, CLIENTS, mode, writers));
    let written: usize = all.iter().map(|t| t.written).sum();
    let snapshots: usize = all.iter().map(|t| t.snapshots).sum();
    let not_ready: usize = all.iter().map(|t| t.not_ready).sum();
    println!(
        "{mode:?} readers, {writers:?} writer: {n} schedules x {CLIENTS} clients in {:.1} s: {written} writes, \
         {snapshots} snapshots, {not_ready} NotReady",
        started.elapsed().as_secs_f64()
    );
    assert!(
        written > n * 10,
        "configurations must be written ({written})"
    );
    assert!(snapshots > n * 10, "readers must report them ({snapshots})");
}

#[test]
fn ready_node_configuration_survives_every_schedule() {
    survives(ConfigMode::ReadyNode, Writers::Protocol, 5_000_000);
}

#[test]
fn multi_configuration_survives_every_schedule() {
    survives(ConfigMode::Multi, Writers::Protocol, 5_100_000);
}

/// The module's table: a `multi` writer under a standing `ready` is safe for ready-node
/// readers.
#[test]
fn multi_writes_under_ready_survive_every_schedule() {
    survives(ConfigMode::ReadyNode, Writers::MultiUnderReady, 5_200_000);
}

/// The readers' check can fail (with the server's check off): a writer that sets the
/// nodes one at a time under a standing `ready` is caught through a reader reporting a
/// mixed configuration, and the seed replays it exactly.
#[test]
fn a_writer_that_ignores_ready_is_caught_by_the_readers() {
    let run = |seed| {
        let config = sim_config::config(seed, CLIENTS);
        sim_config::run_with(config, ConfigMode::ReadyNode, Writers::Naive)
    };
    let failing = (5_000_000..5_000_050)
        .find(|&seed| run(seed).is_err())
        .expect("the naive writer was never caught");
    let first = run(failing).unwrap_err();
    assert!(first.contains("mixed configuration"), "{first}");
    assert_eq!(
        first,
        run(failing).unwrap_err(),
        "a seed must replay exactly"
    );
}
