//! Deterministic simulation: an in-memory ZooKeeper model over the real
//! codec, and a harness that runs many real clients against it in virtual time with
//! seeded faults and invariants checked after every step.

pub mod server;
pub mod world;

pub use server::{ConnId, Lag, ServerConfig, SimServer};
pub use world::{Actor, SimConfig, Simulation, View, RESTART_DELAY_MAX};
