//! # zk-recipes
//!
//! ZooKeeper coordination recipes written as **sans-IO state machines**.
//!
//! The core consumes ZooKeeper replies, watch notifications and the current time, and
//! emits requests and application events. It owns no socket, clock, thread or random
//! number generator, and builds with `#![no_std]` + `alloc`. The `zk-recipes-tokio` and
//! `zk-recipes-blocking` crates drive the same machines over real TCP connections.
//!
//! Layers, bottom up (each only uses the ones below it):
//!
//! 1. [`proto`] — the jute wire codec: frames, records, requests, replies, error codes.
//!    Pure functions, total on any input.
//! 2. [`error`] — every error type, a leaf: it uses nothing above [`proto`].
//! 3. [`session`] — one logical ZooKeeper session across many TCP connections, in
//!    named parts.
//! 4. [`client`] — a session plus the routing of replies and watches to their owners;
//!    the only type an adapter drives.
//!
//! Time is a [`time::Instant`] chosen by the driver (microseconds since an arbitrary
//! epoch); randomness arrives as seeds. One vocabulary everywhere: `handle_*` feeds
//! input, `poll_*` drains output.
//!
//! ```
//! use zk_recipes::proto::{Request, PathWatch};
//! use bytes::BytesMut;
//!
//! // Encode a getData request as one length-prefixed frame.
//! let req = Request::GetData(PathWatch { path: "/app/config".into(), watch: true });
//! let mut out = BytesMut::new();
//! zk_recipes::proto::encode_request(&mut out, 7, &req, zk_recipes::proto::DEFAULT_MAX_REQUEST).unwrap();
//! // Length prefix: 8-byte header + 16-byte body (4 + 11 path bytes + 1 watch flag).
//! assert_eq!(&out[..4], &[0, 0, 0, 24]);
//! ```
#![no_std]
#![forbid(unsafe_code)]
#![warn(missing_docs)]

extern crate alloc;
#[cfg(feature = "std")]
extern crate std;

pub mod client;
pub mod error;
pub mod hash;
pub mod proto;
pub mod recipe;
pub mod sasl;
pub mod session;
pub mod time;

// The README's examples are compiled and run as doctests, and so are those of the
// pages under docs/ that have Rust examples.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;

#[cfg(doctest)]
#[doc = include_str!("../docs/recipes.md")]
struct RecipesDoctests;

#[cfg(doctest)]
#[doc = include_str!("../docs/design.md")]
struct DesignDoctests;

#[cfg(doctest)]
#[doc = include_str!("../docs/testing.md")]
struct TestingDoctests;
