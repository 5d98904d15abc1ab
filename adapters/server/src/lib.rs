//! # zk-recipes-server
//!
//! A ZooKeeper-compatible server **for development and tests, never for production**:
//! one node, everything in memory (no persistence, no quorum, no replication).
//!
//! - [`model`]: the wire-level model of a ZooKeeper 3.8 server, sans-IO (`no_std` +
//!   `alloc`): it takes the bytes clients write and the time, and gives back the bytes
//!   to send. The simulator of `zk-recipes` runs its clients against it; a differential
//!   test checks it reply for reply against a real 3.8 server.
//! - `EmbeddedServer` (feature `std`, on by default): that model served over real TCP
//!   on loopback by a background thread, on real time, with one-call fault controls for
//!   a test (expire a session, drop every connection, freeze, throttle, reap, lag).
#![cfg_attr(not(feature = "std"), no_std)]
#![forbid(unsafe_code)]
#![warn(missing_docs)]

extern crate alloc;

pub mod model;

#[cfg(feature = "std")]
mod embedded;
pub mod four_letter;

#[cfg(feature = "std")]
pub use embedded::{Builder, EmbeddedServer};
pub use model::{ServerConfig, ServerModel, Stats};
