//! # zk-recipes-server
//!
//! A ZooKeeper-compatible server **for development and tests, never for production**:
//! one node, everything in memory.
//!
//! - [`model`]: the wire-level model of a ZooKeeper 3.8 server, sans-IO (`no_std` +
//!   `alloc`): it takes the bytes clients write and the time, and gives back the bytes
//!   to send. The simulator of `zk-recipes` runs its clients against it, and a
//!   differential test checks it reply for reply (Stats and notifications included)
//!   against a real 3.8 server.
//! - [`EmbeddedServer`] (feature `std`, on by default): that model served over real TCP
//!   on loopback by a background thread (`mio`; no async runtime), on real time, with
//!   one-call fault controls for tests. `zkr serve` runs it from the command line.
//!
//! ```
//! use zk_recipes_server::EmbeddedServer;
//!
//! let server = EmbeddedServer::start()?; // 127.0.0.1, a free port
//! let connect_string = server.connect_string();
//! // ... connect any ZooKeeper client to it; in a test, cause faults:
//! for session in server.sessions() {
//!     server.expire_session(session);
//! }
//! drop(server); // stopped: its clients see the connection go
//! # let _ = connect_string;
//! # Ok::<(), std::io::Error>(())
//! ```
//!
//! ## What it does
//!
//! The semantics of a 3.8 standalone server where clients depend on them: the data
//! tree with versions and zxids; persistent, ephemeral, sequential, container and TTL
//! nodes (containers and TTL nodes reaped by a container check every 60 s, as
//! ZooKeeper's container manager, or at [`EmbeddedServer::reap_now`]); sessions with
//! negotiated timeouts that expire on real time, re-attach and close; one-shot,
//! persistent and persistent recursive watches, `setWatches`; `multi` and `multiRead`;
//! `sync`; ACLs (`world`, `digest`, `ip`, `auth`) and `digest` authentication;
//! `whoAmI`, `getEphemerals`, `getAllChildrenNumber`; the four-letter words `ruok`,
//! `srvr`, `stat`, `mntr` and `isro`.
//!
//! ## What it is not
//!
//! Not modelled, and answered as a 3.8 standalone server with the feature off answers
//! (a test in `zk-recipes` sends the same requests to both):
//!
//! - **Persistence, quorum, replication**: nothing survives the process; `srvr` says
//!   `standalone`. A lagging follower is modelled only for [`EmbeddedServer::lag_session`].
//! - **Read-only mode**: a client that would accept a read-only server gets a read-write
//!   session.
//! - **SASL**: no SASL is set up: a SASL token is answered with an empty one, and
//!   `addAuth` with `sasl` or `x509` is refused (`AuthFailed`, connection closed).
//! - **Quotas**: `/zookeeper/quota` is an ordinary node; nothing is enforced.
//! - **Reconfiguration**: `reconfig` is refused `ReconfigDisabled` (a failed write);
//!   `/zookeeper/config` is empty and read-only.
//! - **TLS** and the admin server: plain TCP only.
//!
//! Bounds: requests of at most 1 MiB (`jute.maxbuffer`); a client that leaves more
//! than 1 MiB of answers unread is not read until it reads (so it cannot make the
//! server buffer without limit); 1024 connections at most by default.
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

/// The crate README's examples, compiled as doctests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
