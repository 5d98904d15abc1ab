//! The two-phase commit recipe in the deterministic simulator: the coordinator and 4
//! sites on their own sessions, 3 transactions per schedule, both variants, every fault;
//! safety after every event and liveness once faults stop (see
//! `zk_recipes_sim::testkit::sim_two_phase`).
//!
//! `SIM_SEED=n cargo test --all-features --test sim two_phase_sim:: -- --nocapture` replays one
//! seed; `SIM_SEEDS=n` runs more.

use proptest::prelude::*;
use zk_recipes_sim::sim::SimConfig;
use zk_recipes_sim::testkit::sim_two_phase;

fn seeds(default: u64) -> Vec<u64> {
    match std::env::var("SIM_SEED").ok().and_then(|s| s.parse().ok()) {
        Some(seed) => vec![seed],
        None => {
            let n = std::env::var("SIM_SEEDS")
                .ok()
                .and_then(|s| s.parse().ok())
                .unwrap_or(default);
            (0..n).collect()
        }
    }
}

#[test]
fn the_harness_catches_an_unchecked_commit_and_replays_it() {
    let failing = (0..200)
        .find(|&seed| sim_two_phase::run_sabotaged(seed).is_err())
        .expect("the unchecked commit was never caught");
    let first = sim_two_phase::run_sabotaged(failing).unwrap_err();
    let again = sim_two_phase::run_sabotaged(failing).unwrap_err();
    assert_eq!(first, again, "a seed must replay exactly");
    assert!(first.contains(&format!("seed {failing}")), "{first}");
    assert!(
        first.contains("commit without every vote commit"),
        "{first}"
    );
}

#[test]
fn two_phase_commit_survives_every_schedule() {
    let seeds = seeds(10_000);
    let n = seeds.len();
    let (commits, aborts) = std::thread::scope(|s| {
        let handles: Vec<_> = (0..2)
            .map(|t| {
                let chunk: Vec<u64> = seeds.iter().copied().skip(t).step_by(2).collect();
                s.spawn(move || {
                    chunk.into_iter().fold((0, 0), |(c, a), seed| {
                        let (c2, a2) =
                            sim_two_phase::run(seed, 5).unwrap_or_else(|e| panic!("{e}"));
                        (c + c2, a + a2)
                    })
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap())
            .fold((0, 0), |(c, a), (c2, a2)| (c + c2, a + a2))
    });
    println!("{n} schedules x 5 clients x 3 transactions: {commits} commits, {aborts} aborts; safety and liveness held");
    if n >= 100 {
        assert!(
            commits > n / 10 && aborts > n / 10,
            "both outcomes must occur ({commits}/{aborts})"
        );
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]
    /// Fault rates and client counts are inputs, so a failure shrinks to the fewest
    /// faults that still break an invariant.
    #[test]
    fn two_phase_commit_under_any_fault_mix(
        seed in any::<u64>(),
        clients in 2usize..8,
        lose in 0u32..30,
        drop in 0u32..200,
        pause in 0u32..30,
        expire in 0u32..50,
        crash in 0u32..50,
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
        if let Err(e) = sim_two_phase::run_with(config) {
            prop_assert!(false, "{}", e);
        }
    }
}
