//! Many lock waiters hosted by one session (tokio), all queued at once, then passing the
//! lock along: every acquisition succeeds, one holder at a time. Issue 15 measured
//! acquisitions failing at 1,000+ waiters on one session (`Finished`): commands to the
//! tokio driver beyond a batch of 256 were dropped (see `burst.rs`), so some lock
//! machines were never hosted. `LOCK_WAITERS=n` for another count (default 1,000).
//!
//! With tight session bounds (`max_pending`, `max_in_flight` far below the number of
//! waiters) most requests are first refused (`Overloaded`: never applied) or held in
//! the session's queue: every waiter must still acquire (the recipe backs off and
//! retries; a refusal is never a failed acquisition) and no node may be left.
//!
//! Tokio only: a thousand waiting tasks are the point (a thread each would measure the
//! machine, not the session).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use zk_recipes_tokio as zt;

#[test]
fn a_thousand_waiters_on_one_session_all_acquire_in_turn() {
    let n: usize = std::env::var("LOCK_WAITERS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1_000);
    many_waiters(n, "/many/lock", zt::Options::default());
}

#[test]
fn tight_session_bounds_refuse_and_queue_but_every_waiter_acquires() {
    // 24 waiters, at most 4 requests on the wire and 8 pending: each waiter needs a
    // create, a listing and a watch, so most first attempts are refused.
    many_waiters(
        24,
        "/tight/lock",
        zt::Options::default().max_pending(8).max_in_flight(4),
    );
    // Even tighter: one request at a time, two pending.
    many_waiters(
        30,
        "/tighter/lock",
        zt::Options::default().max_pending(2).max_in_flight(1),
    );
}

/// Issue 25, item 4: N waiters of one session each listed the directory after their
/// create, waiter *i* receiving about *i* names: the bytes the session received per
/// acquisition grew with N (about 6 KB at 100 waiters, 34 KB at 1,000, 302 KB at
/// 10,000). Listings queued behind the session's full window are now shared (one
/// request, one reply for every waiter that joined it): what a session receives per
/// acquisition must not grow with the number of waiters.
#[test]
fn bytes_received_per_acquisition_do_not_grow_with_the_number_of_waiters() {
    let small = many_waiters(100, "/flat/small", zt::Options::default());
    let big = many_waiters(2_000, "/flat/big", zt::Options::default());
    println!("bytes received per acquisition: {small:.0} at 100 waiters, {big:.0} at 2,000");
    assert!(
        big < 2.0 * small,
        "{big:.0} B per acquisition at 2,000 waiters against {small:.0} at 100"
    );
}

/// Runs `n` waiters on one session; returns the bytes the session received per
/// acquisition.
fn many_waiters(n: usize, dir: &'static str, options: zt::Options) -> f64 {
    let server = crate::common::server();
    let cs = server.connect_string();
    crate::tokio_rt::run(async {
        let zk = zt::connect(&cs, options.connect_timeout(Duration::from_secs(10)))
            .await
            .unwrap();
        let inside = Arc::new(AtomicUsize::new(0));
        let acquired = Arc::new(AtomicUsize::new(0));
        let before = zk.counters().await.unwrap();
        let started = Instant::now();
        let tasks: Vec<_> = (0..n)
            .map(|_| {
                let zk = zk.clone();
                let inside = inside.clone();
                let acquired = acquired.clone();
                tokio::spawn(async move {
                    let guard = zk.lock(dir).acquire().await?;
                    acquired.fetch_add(1, Ordering::SeqCst);
                    assert_eq!(inside.fetch_add(1, Ordering::SeqCst), 0, "two holders");
                    inside.fetch_sub(1, Ordering::SeqCst);
                    guard.release().await
                })
            })
            .collect();
        // A stall is reported, not hung on (`LOCK_WAITERS_TIMEOUT` seconds, default 300).
        let limit = std::env::var("LOCK_WAITERS_TIMEOUT")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(300);
        let mut failed = Vec::new();
        let all = async {
            for t in tasks {
                if let Err(e) = t.await.unwrap() {
                    failed.push(format!("{e:?}"));
                }
            }
        };
        if tokio::time::timeout(Duration::from_secs(limit), all)
            .await
            .is_err()
        {
            panic!(
                "stalled: {} of {n} waiters acquired within {limit} s",
                acquired.load(Ordering::SeqCst)
            );
        }
        let took = started.elapsed();
        let after = zk.counters().await.unwrap();
        let per_acq = |a: u64, b: u64| (a - b) as f64 / n as f64;
        let rx = per_acq(after.bytes_received, before.bytes_received);
        println!(
            "{n} waiters on one session ({dir}): {:.2} ms, {:.2} requests, {rx:.0} B received per acquisition",
            took.as_secs_f64() * 1e3 / n as f64,
            per_acq(after.requests_sent, before.requests_sent),
        );
        assert!(
            failed.is_empty(),
            "{} of {n} failed: {:?}",
            failed.len(),
            &failed[..failed.len().min(5)]
        );
        // The listing itself may be refused while the last deletions drain.
        let left = loop {
            match zk.get_children(dir).await {
                Err(zt::Error::Overloaded) => tokio::time::sleep(Duration::from_millis(10)).await,
                other => break other.unwrap(),
            }
        };
        assert!(left.is_empty(), "nodes left: {left:?}");
        rx
    })
}
