//! Real ZooKeeper servers for tests: our own "TestingServer".
//!
//! Starts ZooKeeper from Debian's `zookeeper` package (`/usr/share/java/zookeeper.jar`,
//! run by the installed Java) on free 127.0.0.1 ports with temporary data directories,
//! as a standalone [`TestServer`] or a three-server [`TestEnsemble`]. Servers can be
//! stopped, killed, paused and restarted on the same port and data; everything is cleaned
//! up on drop. [`RawClient`] talks to a server with nothing but the `zk-recipes` codec.
//! [`FakeServer`] is the opposite of a real server: a loopback listener that misbehaves
//! on purpose (garbage, bad lengths, silence, resets, ...; see [`Misbehaviour`]).
//! [`Nemesis`] puts an ensemble behind proxies the test controls: partitions, one-way
//! links, delays, paused client processes, drawn from a seed, and the checkers of the
//! workloads run under it (the [`nemesis`] module).
//!
//! ```no_run
//! use zk_recipes_testing::TestServer;
//! let server = TestServer::start().unwrap();
//! println!("ZooKeeper at {}", server.connect_string());
//! assert_eq!(server.four_letter("ruok").unwrap(), "imok");
//! // dropped: the JVM is killed and the temp dir removed
//! ```
//!
//! Environment: where the server's jar is, [`jar`] (`ZOOKEEPER_JAR`, `ZOOKEEPER_HOME`, or
//! Debian's package); `JAVA` the java binary.

#![warn(missing_docs)]

mod curator;
mod fake;
pub mod jar;
pub mod nemesis;
mod proxy;
mod raw;
mod server;
mod tls;

pub use curator::CuratorProgram;
pub use fake::{
    FakeServer, Misbehaviour, FAKE_PASSWORD, FAKE_SESSION_ID, FAKE_ZXID, GARBAGE_FRAME, HTTP_400,
    MAX_LIVE_CONNECTIONS, MAX_RECORDED_TIMES, UNKNOWN_XID,
};
pub use nemesis::{Endpoint, Nemesis, NemesisOptions};
pub use proxy::{Flow, FlowControl, LinkProxy};
pub use raw::{expire_session, RawClient};
pub use server::{
    four_letter, shared_options, EnsembleOptions, Options, PeerPorts, PeerView, SaslUsers,
    TestEnsemble, TestServer, SUPERUSER,
};
pub use tls::{
    tls_failure, ClientAuth, CountingProxy, Issued, SecureServer, ServerTls, TestCa, Validity,
};
pub use zk_recipes_server::{Builder as EmbeddedBuilder, EmbeddedServer};

/// The crate README's examples, compiled as doctests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
