//! The user surface of zk-recipes, written once: the session handle ([`Client`]'s raw
//! API), hosting ([`hosted`]), and every recipe's handle, guard, builder, waits and
//! cancellation rule. What events mean is decided in the core (`zk_recipes`); this
//! crate only waits for them.
//!
//! The source is compiled twice. [`asynchronous`] (feature `tokio`) is the code as
//! written, re-exported by `zk-recipes-tokio`; [`blocking`] (feature `blocking`) is the
//! same code with `async` and `.await` removed by `#[form]`, re-exported by
//! `zk-recipes-blocking`, and uses no tokio. Each form has a runtime module (`rt`) whose
//! waiting primitives have the same names in both, async in one and blocking in the
//! other. An adapter adds only its I/O: a [`asynchronous::Driver`] fed by its socket.
//!
//! [`Client`]: asynchronous::Client
//! [`hosted`]: asynchronous::hosted
//! [`asynchronous::Driver`]: asynchronous::Driver

#![forbid(unsafe_code)]
#![warn(missing_docs)]
// The point of the crate: each shared file is loaded once per form.
#![allow(clippy::duplicate_mod)]

mod common;
#[cfg(feature = "tls")]
pub mod tls;

pub use common::{
    final_for_host, node_id, probe, random_bytes, random_seed, transport_error, unix_ms, Options,
    Published, Timeout, PROBE_TIMEOUT,
};
/// The `rustls` the adapters speak TLS with (for [`Tls::from_config`]; feature `tls`).
#[cfg(feature = "tls")]
pub use rustls;
#[cfg(feature = "tls")]
pub use tls::Tls;

#[cfg(feature = "tokio")]
pub mod asynchronous;

#[cfg(feature = "blocking")]
pub mod blocking;
