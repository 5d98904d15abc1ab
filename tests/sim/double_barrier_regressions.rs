//! Replays of double barrier simulator schedules that once failed.

use std::time::Duration;

use zk_recipes_sim::sim::SimConfig;
use zk_recipes_sim::testkit::sim_double_barrier;

/// The fault mix of `the_double_barrier_under_any_fault_mix` (tests/sim/double_barrier_sim.rs).
#[allow(clippy::too_many_arguments)]
fn fault_mix(
    seed: u64,
    clients: usize,
    lose: u32,
    drop: u32,
    pause: u32,
    expire: u32,
    crash: u32,
) -> SimConfig {
    let mut config = SimConfig::with_faults(seed, clients);
    config.duration = Duration::from_millis(5500);
    config.quiet = Duration::from_secs(3);
    config.lose_request = lose;
    config.lose_reply = lose;
    config.drop_connection = drop;
    config.pause_server = pause;
    config.expire_session = expire;
    config.crash_client = crash;
    config
}

/// N = K = 3, heavy connection faults. Client 0's connections kept breaking before they
/// were stable, so its reconnect backoff grew to the cap; its connection dropped at
/// 2.4 s (last answer at 2.03 s), just before the quiet stretch (2.5 s). Its session
/// was still backing off when its own expiry estimate ended it at 3.53 s (last answer +
/// 1.5 s); its participation failed, the session renewed with backoff (1.98 s), and
/// the participant's next participation (started at 3.53 s, in the quiet stretch, to
/// join a waiting one) had its requests waiting in the session until the dial at
/// 5.514 s — after the 5.5 s run had ended. The recipe was never given a connection;
/// the harness's quiet stretch was shorter than the client's recovery. The harness now
/// lengthens it to `SimConfig::recovery_bound` plus the workload's time.
#[test]
fn a_client_backing_off_past_its_session_expiry_still_completes_its_round() {
    let config = fault_mix(1473328831373542487, 3, 26, 156, 1, 1, 21);
    if let Err(e) = sim_double_barrier::run_with(config, 3) {
        panic!("{e}");
    }
}

/// The quiet stretch must outlast the worst recovery: an expiry estimate a session
/// timeout after the last answer, then a dial up to the backoff cap (2 s) later; or a
/// crashed client's restart.
#[test]
fn the_recovery_bound_covers_expiry_then_capped_backoff_and_restarts() {
    let config = SimConfig::with_faults(1, 3);
    let bound = config.recovery_bound();
    assert!(
        bound >= config.session_timeout + Duration::from_secs(2),
        "{bound:?}"
    );
    assert!(bound >= zk_recipes_sim::sim::RESTART_DELAY_MAX, "{bound:?}");
}
