//! The shared counter, the compare-and-set update and the watched value in the
//! simulator: 4 real clients increment one counter and append unique tokens to one list
//! node under every fault, each following the counter with a watcher. Increments are
//! never doubled nor lost (final value between the `Added` reports and those plus the
//! ones in doubt), no token is applied twice or lost, every watcher reports only real
//! states in order and ends holding the last written data and version; once faults stop
//! every operation ends. See `zk_recipes_sim::testkit::sim_value`.
//!
//! `SIM_SEED=n` replays one schedule; `SIM_SEEDS=n` runs n/10 of them (a schedule here
//! costs about ten of the cheapest suites').

#![allow(clippy::disallowed_methods)] // wall-clock time of the run, for the report
#[allow(dead_code)] // this suite uses only part of the shared support
use crate::sim_support;

use zk_recipes_sim::testkit::sim_value;

const CLIENTS: usize = 4;

#[test]
fn counter_update_and_watch_survive_every_schedule() {
    let seeds = sim_support::seeds_scaled(4_000_000, 10, 300);
    let n = seeds.len();
    let started = std::time::Instant::now();
    let all = sim_support::run_each(seeds, |seed| sim_value::run(seed, CLIENTS, false));
    let sum = |f: fn(&sim_value::Totals) -> usize| all.iter().map(f).sum::<usize>();
    println!(
        "{n} schedules x {CLIENTS} clients in {:.1} s: {} increments Added, {} in doubt; \
         {} tokens Updated, {} in doubt",
        started.elapsed().as_secs_f64(),
        sum(|t| t.added),
        sum(|t| t.in_doubt),
        sum(|t| t.updated),
        sum(|t| t.tokens_in_doubt),
    );
    assert!(sum(|t| t.added) > n * 20, "the counter must move");
    assert!(sum(|t| t.updated) > n * 20, "the list must grow");
    assert!(
        sum(|t| t.in_doubt) > 0,
        "lost replies must leave some increment in doubt"
    );
}

/// The invariant can fail: a user that simply tries an increment again after a failure
/// in doubt (Curator's framework retrying a lost `setData`) is caught counting more than
/// it was told, and the seed replays it exactly.
#[test]
fn a_retried_increment_in_doubt_is_caught() {
    let failing = (4_000_000..4_000_200)
        .find(|&seed| sim_value::run(seed, CLIENTS, true).is_err())
        .expect("the naive retry was never caught");
    let first = sim_value::run(failing, CLIENTS, true).unwrap_err();
    assert!(first.contains("counter is"), "{first}");
    assert_eq!(
        first,
        sim_value::run(failing, CLIENTS, true).unwrap_err(),
        "a seed must replay exactly"
    );
}
