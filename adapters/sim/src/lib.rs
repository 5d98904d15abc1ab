//! # zk-recipes-sim
//!
//! The test kit of `zk-recipes`, kept out of the published core: one more driver of the
//! core's sans-IO machines.
//!
//! - [`sim`] — the deterministic simulator: an in-memory ZooKeeper model over the real
//!   codec, a virtual network with seeded faults, and a harness that runs many real
//!   clients in virtual time with invariants checked after every step.
//! - [`testkit`] — byte-driven harnesses shared by the property tests and the fuzz
//!   targets, the recipes' simulator suites, and the model checker's abstract ZooKeeper.
//!
//! Like the core it is `no_std` + `alloc`, deterministic, and takes its randomness as
//! seeds; it is test support (`publish = false`).
#![no_std]
#![forbid(unsafe_code)]
#![warn(missing_docs)]

extern crate alloc;

pub mod sim;
pub mod testkit;
