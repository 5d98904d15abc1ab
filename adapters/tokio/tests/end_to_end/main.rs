//! The tokio adapter end to end against a real ZooKeeper (started by the test support
//! on 127.0.0.1), one test binary.

use std::time::Duration;

use zk_recipes_testing::TestServer;
use zk_recipes_tokio::{connect, Client, Options};

mod cancel;
mod election;
mod locks;
mod raw_api;

/// A client of `server` with a 6 s session.
async fn client(server: &TestServer) -> Client {
    connect(
        &server.connect_string(),
        Options::default().session_timeout(Duration::from_secs(6)),
    )
    .await
    .unwrap()
}

/// `f`, or a panic naming `what` after 20 s.
async fn within<T>(what: &str, f: impl std::future::Future<Output = T>) -> T {
    tokio::time::timeout(Duration::from_secs(20), f)
        .await
        .unwrap_or_else(|_| panic!("{what} did not happen in 20 s"))
}
