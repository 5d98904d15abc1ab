//! Blocking driver for [`zk_recipes`]: a real ZooKeeper session over TCP for plain
//! threaded code. Exactly one I/O thread per session, waiting in `mio` for the socket,
//! commands and the core's deadlines at once (a write that cannot proceed never holds
//! up reads, pings or timers); bytes read go straight into the core. Raw calls wait at
//! most the call timeout; recipe calls wait as the recipe decides (a lock's
//! `acquire_timeout(w)` returns within `w` plus one round trip, in both adapters);
//! watches arrive on channels.
//!
//! ```no_run
//! use zk_recipes_blocking::{connect, CreateOptions, Options};
//! let zk = connect("127.0.0.1:2181", Options::default())?;
//! zk.create("/config", "v1", &CreateOptions::default())?;
//! let ((data, _stat), changed) = zk.get_data_watch("/config")?;
//! zk.set_data("/config", "v2", None)?;
//! println!("{data:?} then {:?}", changed.wait()?);
//! zk.close();
//! # Ok::<(), zk_recipes_blocking::Error>(())
//! ```
//!
//! Every type this crate's calls take or return is reachable from it alone, so a
//! program needs no other crate of ours (the core is there too, as [`zk_recipes`]):
//!
//! ```
//! use zk_recipes_blocking::{
//!     Bytes, HostFailures, Master, Member, MemberConfig, NodeWatchEvent, OwnedNodeConfig,
//!     OwnedNodeEvent, RendezvousEvent, ResolveConfig, UpdateConfig, ViewConfig, ViewEvent,
//!     Worker,
//! };
//! let data: Bytes = Bytes::from_static(b"v1");
//! # let _ = data;
//! ```

mod driver;
#[cfg(feature = "tls")]
mod tls_io;

pub use zk_recipes_surface::blocking::*;

/// Connects and waits for a session, trying every host with backoff until
/// `options.connect_timeout`. Fails then with [`Error::Unreachable`], naming every host
/// and what happened to it last (refused, reset, closed before the handshake, not a
/// ZooKeeper server, no handshake answer, ...), or [`Error::Timeout`] if some host was
/// not tried to the end; with `options.fail_fast`, as soon as every host has failed
/// once.
pub fn connect(connect_string: &str, options: Options) -> Result<Client, Error> {
    let core = options.core(connect_string)?;
    let (inputs, io) = driver::channel().map_err(|_| Error::Closed)?;
    #[cfg(feature = "tls")]
    let tls = options.tls.clone();
    #[cfg(not(feature = "tls"))]
    let tls = options.refuse_tls("zk-recipes-blocking").map(|()| None)?;
    let (board_tx, board) = rt::board();
    std::thread::Builder::new()
        .name("zk-session".into())
        .spawn(move || driver::run(core, io, board_tx, tls))
        .map_err(|_| Error::Closed)?;
    Client::connected(Box::new(inputs), board, &options)
}

/// The crate README's examples, compiled as doctests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
