//! Simulator suites: the real recipes over `zk_recipes_sim::sim` (virtual time, seeded faults);
//! `SIM_SEEDS=n` schedules per suite, `SIM_SEED=s` replays one.
//!
//! One test binary per layer (issue 28); each former test file is a module here.

mod barrier_sim;
mod cache_sim;
mod config_sim;
mod double_barrier_regressions;
mod double_barrier_sim;
mod election_sim;
mod lock_leaks;
mod lock_sim;
mod queue_sim;
mod semaphore_sim;
mod sim_faults;
mod sim_harness;
mod sim_support;
mod two_phase_sim;
mod value_sim;
