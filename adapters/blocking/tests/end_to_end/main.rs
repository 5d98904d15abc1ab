//! The blocking adapter end to end against a real ZooKeeper (started by the test
//! support on 127.0.0.1), one test binary.

use std::time::Duration;

use zk_recipes_blocking::{connect, Client, Options};
use zk_recipes_testing::TestServer;

mod locks;
mod raw_api;

/// A client of `server` with a 6 s session.
fn client(server: &TestServer) -> Client {
    connect(
        &server.connect_string(),
        Options::default().session_timeout(Duration::from_secs(6)),
    )
    .unwrap()
}
