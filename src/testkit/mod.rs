//! Test harnesses shared by the property tests and the fuzz targets (feature `testkit`).
//! Each takes plain bytes, so proptest and libFuzzer drive the same code.

pub mod cache;
pub mod double_barrier;
pub mod election;
pub mod group;
pub mod lock;
pub mod queue;
pub mod session;
#[cfg(feature = "sim")]
pub mod sim_barrier;
#[cfg(feature = "sim")]
pub mod sim_double_barrier;
#[cfg(feature = "sim")]
pub mod sim_election;
#[cfg(feature = "sim")]
pub mod sim_lock;
#[cfg(feature = "sim")]
pub mod sim_naive;
#[cfg(feature = "sim")]
pub mod sim_queue;
#[cfg(feature = "sim")]
pub mod sim_two_phase;
pub mod two_phase;
pub mod value;
