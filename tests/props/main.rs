//! Property tests: the codec, the session, and each recipe's byte-driven harness (`zk_recipes_sim::testkit`),
//! plus the fuzz targets' saved crash inputs replayed.
//!
//! One test binary per layer (issue 28); each former test file is a module here.

mod cache_props;
mod codec_props;
mod config_props;
mod contender_props;
mod delay_queue_props;
mod discovery_props;
mod double_barrier_props;
mod election_props;
mod fuzz_regressions;
mod group_props;
mod inspect_props;
mod lease_props;
mod lock_props;
mod multi_lock_props;
mod naming_props;
mod partitioner_props;
mod queue_props;
mod semaphore_props;
mod server_input_props;
mod session_props;
mod ttl_node_props;
mod two_phase_props;
mod value_props;
