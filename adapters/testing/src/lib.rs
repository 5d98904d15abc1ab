//! Real ZooKeeper servers for tests: our own "TestingServer".
//!
//! Starts ZooKeeper from Debian's `zookeeper` package (`/usr/share/java/zookeeper.jar`,
//! run by the installed Java) on free 127.0.0.1 ports with temporary data directories,
//! as a standalone [`TestServer`] or a three-server [`TestEnsemble`]. Servers can be
//! stopped, killed, paused and restarted on the same port and data; everything is cleaned
//! up on drop. [`RawClient`] talks to a server with nothing but the `zk-recipes` codec.
//!
//! ```no_run
//! use zk_recipes_testing::TestServer;
//! let server = TestServer::start().unwrap();
//! println!("ZooKeeper at {}", server.connect_string());
//! assert_eq!(server.four_letter("ruok").unwrap(), "imok");
//! // dropped: the JVM is killed and the temp dir removed
//! ```
//!
//! Environment: `ZOOKEEPER_JAR` overrides the jar path, `JAVA` the java binary.

mod raw;
mod server;

pub use raw::RawClient;
pub use server::{four_letter, Options, TestEnsemble, TestServer};
