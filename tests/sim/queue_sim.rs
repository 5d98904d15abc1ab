//! The queue in the simulator: 2 producers and 3 consumers, every fault (lost replies
//! after apply, lagging followers, dropped connections, server pauses, expiry, crashes),
//! 10,000 schedules per delivery mode — no duplicate item from a retried put, at most
//! once: no item delivered twice and none lost unless its taker died holding it; at
//! least once: never two live claims, deleted only by its claim's holder, completed
//! exactly once; once faults stop everything put is taken and every machine ends
//! leaving nothing behind (see `zk_recipes_sim::testkit::sim_queue`). The harness must be
//! able to fail: a consumer taking by `getData` + `delete` without looking at the
//! delete's answer is caught, and its seed replays.
//!
//! `SIM_SEED=n cargo test --all-features --test sim queue_sim:: -- --nocapture` replays one
//! seed (with the simulator's trace); `SIM_SEEDS=n` runs more.
// The wall clock only reports how long the schedules took.
#![allow(clippy::disallowed_methods)]

use std::time::Instant;

use proptest::prelude::*;
use zk_recipes_sim::testkit::sim_queue::{self, Mode, Taker, Totals};

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

/// One schedule; a failure is run again with the simulator's trace for the report.
fn run_one(seed: u64, mode: Mode) -> Totals {
    sim_queue::run(seed, mode, Taker::Recipe).unwrap_or_else(|_| {
        let mut config = sim_queue::config(seed, sim_queue::PRODUCERS + sim_queue::CONSUMERS);
        config.trace = true;
        let e = sim_queue::run_with(config, sim_queue::PRODUCERS, mode, Taker::Recipe)
            .expect_err("a failing seed must replay");
        panic!("{e}")
    })
}

/// Runs every seed on every core; panics with the first failure's report.
fn run_all(seeds: &[u64], mode: Mode) -> Totals {
    let threads = std::thread::available_parallelism().map_or(2, |n| n.get());
    std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                let chunk: Vec<u64> = seeds.iter().copied().skip(t).step_by(threads).collect();
                s.spawn(move || {
                    let mut totals = Totals::default();
                    for seed in chunk {
                        totals += run_one(seed, mode);
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

fn survives(mode: Mode, first: u64, default: u64) {
    let seeds = seeds(first, default);
    let n = seeds.len();
    let started = Instant::now();
    let t = run_all(&seeds, mode);
    println!(
        "{mode:?}: {n} schedules x 5 clients in {:.1} s: {} puts, {} items, {} delivered, \
         {} completed, {} lost with a dead taker; every invariant held",
        started.elapsed().as_secs_f64(),
        t.puts,
        t.items,
        t.delivered,
        t.completed,
        t.lost,
    );
    assert!(t.items > n * 10, "items must flow ({})", t.items);
    assert!(t.delivered >= t.items - t.lost);
}

#[test]
fn at_most_once_survives_every_schedule() {
    survives(Mode::AtMostOnce, 0, 10_000);
}

/// Found by 30,000 schedules: a take in doubt over a long disconnection, resent by
/// item name after the directory (then a container) was deleted and made again, took the
/// new item under that name and delivered the old one's data (delivered twice, one
/// lost). The directory is persistent now (issue 26); the seeds stay as regressions.
#[test]
fn a_take_in_doubt_reads_its_items_again_before_taking_them() {
    for seed in [21226, 28480] {
        run_one(seed, Mode::AtMostOnce);
    }
}

#[test]
fn at_least_once_survives_every_schedule() {
    survives(Mode::AtLeastOnce, 1_000_000, 10_000);
}

#[test]
fn the_harness_catches_a_consumer_that_ignores_the_delete_answer() {
    let failing = (0..500)
        .find(|&seed| sim_queue::run(seed, Mode::AtMostOnce, Taker::NaiveGetDelete).is_err())
        .expect("the naive consumer was never caught");
    let first = sim_queue::run(failing, Mode::AtMostOnce, Taker::NaiveGetDelete).unwrap_err();
    let again = sim_queue::run(failing, Mode::AtMostOnce, Taker::NaiveGetDelete).unwrap_err();
    assert_eq!(first, again, "a seed must replay exactly");
    assert!(first.contains(&format!("seed {failing} ")), "{first}");
    assert!(first.contains("delivered twice"), "{first}");
    // The recipe passes the same schedule.
    sim_queue::run(failing, Mode::AtMostOnce, Taker::Recipe).unwrap_or_else(|e| panic!("{e}"));
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(16))]
    /// Fault rates, client counts and the mode are inputs, so a failure shrinks to the
    /// fewest faults that still break an invariant.
    #[test]
    fn the_queue_under_any_fault_mix(
        seed in any::<u64>(),
        producers in 1usize..4,
        consumers in 1usize..5,
        lose in 0u32..30,
        drop in 0u32..200,
        pause in 0u32..30,
        expire in 0u32..80,
        crash in 0u32..80,
        stale in 0u32..400,
        alo in any::<bool>(),
    ) {
        let mut config = sim_queue::config(seed, producers + consumers);
        config.lose_request = lose;
        config.lose_reply = lose;
        config.drop_connection = drop;
        config.pause_server = pause;
        config.expire_session = expire;
        config.crash_client = crash;
        config.stale_reconnect = stale;
        let mode = if alo { Mode::AtLeastOnce } else { Mode::AtMostOnce };
        if let Err(e) = sim_queue::run_with(config, producers, mode, Taker::Recipe) {
            prop_assert!(false, "{}", e);
        }
    }
}

/// At-most-once seed 3204 once livelocked a consumer inside one input: each refused
/// container create started a new round of them at once (see
/// `a_refused_round_of_parent_creates_goes_again_once_after_a_backoff`). It must finish;
/// a wall-clock limit turns a hang into a failure (the run takes milliseconds).
#[test]
fn at_most_once_seed_3204_finishes() {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(sim_queue::run(3204, Mode::AtMostOnce, Taker::Recipe));
    });
    match rx.recv_timeout(std::time::Duration::from_secs(120)) {
        Ok(result) => {
            result.unwrap();
        }
        Err(_) => panic!("seed 3204 did not finish in 120 s: a livelock"),
    }
}
