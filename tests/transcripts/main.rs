//! Transcript tests: each recipe and client machine driven by hand, request by request and reply by reply
//! (no server, no simulator), plus the golden wire vectors and the regressions reduced to transcripts.
//!
//! One test binary per layer (issue 28); each former test file is a module here.

mod barrier_transcripts;
mod cache_transcripts;
mod client_refusals;
mod config_transcripts;
mod delay_queue_transcripts;
mod discovery_transcripts;
mod election_regressions;
mod election_transcripts;
mod golden;
mod group_transcripts;
mod inspect_transcripts;
mod kit;
mod lease_transcripts;
mod lock_lanes;
mod lock_transcripts;
mod multi_lock_transcripts;
mod naming_transcripts;
mod partitioner_transcripts;
mod path_transcripts;
mod queue_regressions;
mod queue_script;
mod queue_transcripts;
mod rendezvous_transcripts;
mod semaphore_transcripts;
mod ttl_node_transcripts;
mod two_phase_transcripts;
mod value_transcripts;
