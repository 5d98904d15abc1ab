//! tokio driver for [`zk_recipes`]: a real ZooKeeper session over TCP, with the whole
//! raw API and every recipe as async methods. The surface (every handle, guard and
//! wait) is `zk-recipes-surface`'s async form, the same code as the blocking adapter's:
//! this crate adds only the driver task.
//!
//! One driver task per session owns the sans-IO core, the socket and the timer; a
//! [`Client`] is a cheap, cloneable, `Send + Sync` handle to it. Dropping any future is
//! safe: the session is not affected, the reply is simply discarded. A recipe call
//! dropped midway (a timeout, a `select!`) leaves nothing behind: a lock or
//! re-entrant lock attempt, a double barrier `enter` is abandoned and its node deleted;
//! a queue `take` is given up, and the items it had already taken go to the next
//! `take`; a counter operation still applies once, and its answer is not taken for the
//! next call's. (A dropped `NodeHandle::set_data` still writes; the next one may report
//! the earlier write's Stat.) When the last handle drops, the session is closed.
//!
//! ```no_run
//! # async fn demo() -> Result<(), zk_recipes_tokio::Error> {
//! use zk_recipes_tokio::{connect, CreateOptions, Options};
//! let zk = connect("127.0.0.1:2181/app", Options::default()).await?;
//! zk.create("/config", "v1", &CreateOptions::default()).await?;
//! let ((data, stat), changed) = zk.get_data_watch("/config").await?;
//! println!("{:?} at version {}", data, stat.version);
//! zk.set_data("/config", "v2", None).await?;
//! println!("watch fired: {:?}", changed.await?);
//! zk.close().await;
//! # Ok(()) }
//! ```
//!
//! Every type this crate's calls take or return is reachable from it alone, so a
//! program needs no other crate of ours (the core is there too, as [`zk_recipes`]):
//!
//! ```
//! use zk_recipes_tokio::{
//!     Bytes, HostFailures, Master, Member, MemberConfig, NodeWatchEvent, OwnedNodeConfig,
//!     OwnedNodeEvent, RendezvousEvent, ResolveConfig, UpdateConfig, ViewConfig, ViewEvent,
//!     Worker,
//! };
//! let data: Bytes = Bytes::from_static(b"v1");
//! # let _ = data;
//! ```

mod driver;

pub use zk_recipes_surface::asynchronous::*;

use tokio::sync::mpsc;

/// Connects and waits for a session, trying every host with backoff until
/// `options.connect_timeout`. Fails then with [`Error::Unreachable`], naming every host
/// and what happened to it last (refused, reset, closed before the handshake, not a
/// ZooKeeper server, no handshake answer, ...), or [`Error::Timeout`] if some host was
/// not tried to the end; with `options.fail_fast`, as soon as every host has failed
/// once.
///
/// How long calls wait: a request in flight ends with `ConnectionLoss` once the
/// connection is declared dead (no complete frame for 2/3 of the session timeout); one
/// waiting for a connection ends when the session is back or expired (the session
/// timeout at most). Bound a single call further with `tokio::time::timeout`.
pub async fn connect(connect_string: &str, options: Options) -> Result<Client, Error> {
    let core = options.core(connect_string)?;
    let (tx, rx) = mpsc::unbounded_channel();
    #[cfg(feature = "tls")]
    let tls = options.tls.clone();
    #[cfg(not(feature = "tls"))]
    let tls = options.refuse_tls("zk-recipes-tokio").map(|()| None)?;
    let (board_tx, board) = rt::board();
    tokio::spawn(driver::run(core, rx, board_tx, tls));
    Client::connected(Box::new(driver::Commands(tx)), board, &options).await
}

/// The crate README's examples, compiled as doctests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
