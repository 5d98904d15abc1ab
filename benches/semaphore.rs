//! Semaphore benchmark against a real ZooKeeper 3.8 with its data dir on disk (not
//! tmpfs: every lease create and delete is an fsync'd transaction): `cargo bench
//! --bench semaphore` (`BENCH_QUICK=1`: 10 acquisitions per contender).
//!
//! 8 contenders, each on its own session, on one semaphore of 2 leases; each acquires
//! and releases a lease 50 times in a row, all at once. The same for Apache Curator
//! 5.4's `InterProcessSemaphoreV2` (`benches/curator/CuratorSemaphoreBench.java`, 8
//! `CuratorFramework` clients on 8 threads) on the same server. Reported: acquisitions
//! per second, and requests per acquisition (`mntr`'s `zk_packets_received` delta over
//! the run, pings included, the probe's own packet subtracted).
//!
//! Ours fails (panics) if more than 2 leases are ever held at once.
// A benchmark is a driver: it owns the clock.
#![allow(clippy::disallowed_methods)]

#[path = "support/curator.rs"]
mod curator;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use zk_recipes_testing::TestServer;
use zk_recipes_tokio::{connect, Options};

const CONTENDERS: usize = 8;
const LEASES: u32 = 2;

struct Figures {
    acquisitions: usize,
    elapsed: Duration,
    requests: i64,
}

async fn ours(server: &TestServer, each: usize) -> Figures {
    const PATH: &str = "/bench-sem/ours";
    let cs = server.connect_string();
    let mut sems = Vec::new();
    for _ in 0..CONTENDERS {
        let zk = connect(&cs, Options::default()).await.unwrap();
        let sem = zk.semaphore(PATH, LEASES);
        sem.acquire().await.unwrap().release().await.unwrap(); // parents exist
        sems.push(sem);
    }
    let holders = Arc::new(AtomicUsize::new(0));
    let before = curator::mntr(server.addr(), "zk_packets_received");
    let t = Instant::now();
    let tasks: Vec<_> = sems
        .into_iter()
        .map(|sem| {
            let holders = holders.clone();
            tokio::spawn(async move {
                for _ in 0..each {
                    let lease = sem.acquire().await.unwrap();
                    let n = holders.fetch_add(1, Ordering::SeqCst) + 1;
                    assert!(n <= LEASES as usize, "{n} leases held at once");
                    holders.fetch_sub(1, Ordering::SeqCst);
                    lease.release().await.unwrap();
                }
            })
        })
        .collect();
    for task in tasks {
        task.await.unwrap();
    }
    let elapsed = t.elapsed();
    let after = curator::mntr(server.addr(), "zk_packets_received");
    Figures {
        acquisitions: CONTENDERS * each,
        elapsed,
        requests: after - before - 1,
    }
}

fn curator(server: &TestServer, each: usize) -> Figures {
    let args = [
        server.connect_string(),
        "/bench-sem/curator".into(),
        LEASES.to_string(),
        CONTENDERS.to_string(),
        each.to_string(),
    ];
    let (result, requests) = curator::run_measured("CuratorSemaphoreBench", &args, server.addr());
    let ms: u64 = result
        .parse()
        .unwrap_or_else(|_| panic!("CuratorSemaphoreBench said {result}"));
    Figures {
        acquisitions: CONTENDERS * each,
        elapsed: Duration::from_millis(ms),
        requests,
    }
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let each = if std::env::var_os("BENCH_QUICK").is_some() {
        10
    } else {
        50
    };
    // The default data dir is a temp dir under the system temp dir: on disk here
    // (`/dev/shm` would be tmpfs).
    let server = TestServer::start().unwrap();
    println!(
        "server {} (data dir on disk under {})",
        server.connect_string(),
        std::env::temp_dir().display()
    );
    let a = ours(&server, each).await;
    let c = tokio::task::spawn_blocking(move || {
        let c = curator(&server, each);
        drop(server);
        c
    })
    .await
    .unwrap();
    println!();
    println!(
        "| {:<35} | {:>12} | {:>8} | {:>16} | {:>16} |",
        "semaphore (8 sessions, 2 leases)",
        "acquisitions",
        "ms",
        "acquisitions / s",
        "requests / acq."
    );
    println!(
        "|{:-<37}|{:->14}|{:->10}|{:->18}|{:->18}|",
        "", "", "", "", ""
    );
    for (name, f) in [
        ("zk-recipes Semaphore", &a),
        ("Curator 5.4 InterProcessSemaphoreV2", &c),
    ] {
        println!(
            "| {:<35} | {:>12} | {:>8} | {:>16.0} | {:>16.1} |",
            name,
            f.acquisitions,
            f.elapsed.as_millis(),
            f.acquisitions as f64 / f.elapsed.as_secs_f64(),
            f.requests as f64 / f.acquisitions as f64
        );
    }
}
