//! Seeds and a two-core runner for the simulator tests of the lock recipe.

use zk_recipes_sim::testkit::sim_lock;

/// `SIM_SEED=n` replays one seed; `SIM_SEEDS=n` runs n seeds from `first`; else
/// `default` of them.
pub fn seeds(first: u64, default: u64) -> Vec<u64> {
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

/// Runs every seed (8 clients) on both cores; panics with the first failure's report;
/// returns the grants.
pub fn run_all(seeds: Vec<u64>, readers: bool) -> (usize, usize) {
    std::thread::scope(|s| {
        let handles: Vec<_> = (0..2)
            .map(|t| {
                let chunk: Vec<u64> = seeds.iter().copied().skip(t).step_by(2).collect();
                s.spawn(move || {
                    chunk
                        .into_iter()
                        .map(|seed| {
                            sim_lock::run(seed, 8, readers).unwrap_or_else(|e| panic!("{e}"))
                        })
                        .fold((0, 0), |(a, h), (a2, h2)| (a + a2, h + h2))
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap())
            .fold((0, 0), |(a, h), (a2, h2)| (a + a2, h + h2))
    })
}

/// Runs `one` on every seed on both cores; panics with the first failure's report;
/// returns the outcomes in no particular order.
#[allow(dead_code)] // not every suite uses it
pub fn run_each<T: Send>(seeds: Vec<u64>, one: impl Fn(u64) -> Result<T, String> + Sync) -> Vec<T> {
    let one = &one;
    std::thread::scope(|s| {
        let handles: Vec<_> = (0..2)
            .map(|t| {
                let chunk: Vec<u64> = seeds.iter().copied().skip(t).step_by(2).collect();
                s.spawn(move || {
                    chunk
                        .into_iter()
                        .map(|seed| one(seed).unwrap_or_else(|e| panic!("{e}")))
                        .collect::<Vec<T>>()
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().unwrap())
            .collect()
    })
}

/// `SIM_SEED=n` replays one seed; `SIM_SEEDS=n` runs `n / per` seeds from `first` (at
/// least one): for suites whose schedule costs `per` times a cheap one; else `default`
/// of them.
#[allow(dead_code)] // not every suite uses it
pub fn seeds_scaled(first: u64, per: u64, default: u64) -> Vec<u64> {
    match std::env::var("SIM_SEED").ok().and_then(|s| s.parse().ok()) {
        Some(seed) => vec![seed],
        None => {
            let n = std::env::var("SIM_SEEDS")
                .ok()
                .and_then(|s| s.parse::<u64>().ok())
                .map_or(default, |n| (n / per).max(1));
            (first..first + n).collect()
        }
    }
}
