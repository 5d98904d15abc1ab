//! Many lock waiters hosted by one session (tokio), all queued at once, then passing the
//! lock along: every acquisition succeeds, one holder at a time. Issue 15 measured
//! acquisitions failing at 1,000+ waiters on one session (`Finished`): commands to the
//! tokio driver beyond a batch of 256 were dropped (see `burst.rs`), so some lock
//! machines were never hosted. `LOCK_WAITERS=n` for another count (default 1,000).
#![allow(clippy::disallowed_methods)]

mod support;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use support::runtime;
use zk_recipes_testing::TestServer;
use zk_recipes_tokio as zt;

#[test]
fn a_thousand_waiters_on_one_session_all_acquire_in_turn() {
    let n: usize = std::env::var("LOCK_WAITERS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1_000);
    let server = TestServer::start().expect("a real ZooKeeper");
    let cs = server.connect_string();
    runtime().block_on(async {
        let zk = zt::connect(
            &cs,
            zt::Options::default().connect_timeout(Duration::from_secs(10)),
        )
        .await
        .unwrap();
        let inside = Arc::new(AtomicUsize::new(0));
        let started = Instant::now();
        let tasks: Vec<_> = (0..n)
            .map(|_| {
                let zk = zk.clone();
                let inside = inside.clone();
                tokio::spawn(async move {
                    let guard = zk.lock("/many/lock").acquire().await?;
                    assert_eq!(inside.fetch_add(1, Ordering::SeqCst), 0, "two holders");
                    inside.fetch_sub(1, Ordering::SeqCst);
                    guard.release().await
                })
            })
            .collect();
        let mut failed = Vec::new();
        for t in tasks {
            if let Err(e) = t.await.unwrap() {
                failed.push(format!("{e:?}"));
            }
        }
        let took = started.elapsed();
        println!(
            "{n} waiters on one session: {:.2} ms per acquisition",
            took.as_secs_f64() * 1e3 / n as f64
        );
        assert!(
            failed.is_empty(),
            "{} of {n} failed: {:?}",
            failed.len(),
            &failed[..failed.len().min(5)]
        );
        assert!(
            zk.get_children("/many/lock").await.unwrap().is_empty(),
            "nodes left"
        );
    });
}
