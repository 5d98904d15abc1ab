//! Multi-lock benchmark against a real ZooKeeper 3.8 (data dir on disk: every lock node
//! create and delete is an fsync'd transaction): `cargo bench --bench multi_lock`
//! (`BENCH_QUICK=1`: 50 cycles after 20).
//!
//! One session takes 3 locks as one (`<dir>/a`, `<dir>/b`, `<dir>/c`) and releases them,
//! uncontended, in a row: ours (`Client::multi_lock`) and Apache Curator 5.4's
//! `InterProcessMultiLock` over the same 3 paths
//! (`benches/curator/CuratorMultiLockBench.java`), on the same server one after the
//! other, each after the same warm-up (Curator's JIT, the server's own). Reported: the
//! median and p90 cycle, cycles per second, requests per cycle (`mntr`'s
//! `zk_packets_received` delta over the run, pings included, the probe's own packet
//! subtracted), and the cycle in write round trips (the median `setData` of 100 bytes
//! measured in the same run against the same server).
// A benchmark is a driver: it owns the clock.
#![allow(clippy::disallowed_methods)]

#[path = "support/curator.rs"]
mod curator;

use std::time::{Duration, Instant};

use zk_recipes_testing::TestServer;
use zk_recipes_tokio::{connect, Client, CreateOptions, Options};

const PATHS: [&str; 3] = [
    "/bench-multi/ours/a",
    "/bench-multi/ours/b",
    "/bench-multi/ours/c",
];

struct Figures {
    cycles: usize,
    elapsed: Duration,
    median: Duration,
    p90: Duration,
    requests: i64,
}

fn median_p90(mut v: Vec<Duration>) -> (Duration, Duration) {
    v.sort();
    (v[v.len() / 2], v[v.len() * 9 / 10])
}

async fn cycle(zk: &Client) {
    let held = zk.multi_lock(&PATHS).acquire().await.unwrap();
    assert_eq!(held.locks().len(), 3);
    held.release().await.unwrap();
}

async fn ours(server: &TestServer, warm_up: usize, cycles: usize) -> Figures {
    let zk = connect(&server.connect_string(), Options::default())
        .await
        .unwrap();
    for _ in 0..warm_up {
        cycle(&zk).await;
    }
    let before = curator::mntr(server.addr(), "zk_packets_received");
    let mut times = Vec::new();
    let t0 = Instant::now();
    for _ in 0..cycles {
        let t = Instant::now();
        cycle(&zk).await;
        times.push(t.elapsed());
    }
    let elapsed = t0.elapsed();
    let after = curator::mntr(server.addr(), "zk_packets_received");
    let (median, p90) = median_p90(times);
    zk.close().await;
    Figures {
        cycles,
        elapsed,
        median,
        p90,
        requests: after - before - 1,
    }
}

fn curator(server: &TestServer, warm_up: usize, cycles: usize) -> Figures {
    let args = [
        server.connect_string(),
        "/bench-multi/curator".into(),
        warm_up.to_string(),
        cycles.to_string(),
    ];
    let (result, requests) = curator::run_measured("CuratorMultiLockBench", &args, server.addr());
    let f: Vec<u64> = result
        .split_whitespace()
        .map(|v| v.parse().unwrap())
        .collect();
    Figures {
        cycles: f[0] as usize,
        elapsed: Duration::from_nanos(f[1]),
        median: Duration::from_nanos(f[2]),
        p90: Duration::from_nanos(f[3]),
        requests,
    }
}

/// The median write round trip (`setData` of 100 bytes) over `n` samples.
async fn write_rtt(server: &TestServer, n: usize) -> Duration {
    let zk = connect(&server.connect_string(), Options::default())
        .await
        .unwrap();
    let _ = zk
        .create("/rtt", vec![0u8; 100], &CreateOptions::default())
        .await;
    let mut w = Vec::new();
    for _ in 0..n {
        let t = Instant::now();
        zk.set_data("/rtt", vec![1u8; 100], None).await.unwrap();
        w.push(t.elapsed());
    }
    zk.close().await;
    median_p90(w).0
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let (warm_up, cycles) = if std::env::var_os("BENCH_QUICK").is_some() {
        (20, 50)
    } else {
        (200, 500)
    };
    let server = TestServer::start().unwrap();
    println!(
        "server {} (data dir on disk under {}); {cycles} cycles after {warm_up}",
        server.connect_string(),
        std::env::temp_dir().display()
    );
    let rtt_before = write_rtt(&server, 200).await;
    let a = ours(&server, warm_up, cycles).await;
    let (c, server) = tokio::task::spawn_blocking(move || {
        let c = curator(&server, warm_up, cycles);
        (c, server)
    })
    .await
    .unwrap();
    let rtt_after = write_rtt(&server, 200).await;
    let rtt = (rtt_before + rtt_after) / 2;
    println!(
        "write RTT median {:.3} ms before, {:.3} ms after",
        rtt_before.as_secs_f64() * 1e3,
        rtt_after.as_secs_f64() * 1e3
    );
    println!();
    println!(
        "| {:<36} | {:>10} | {:>10} | {:>9} | {:>14} | {:>16} |",
        "3 locks as one, acquire + release",
        "median ms",
        "p90 ms",
        "cycles/s",
        "requests/cycle",
        "cycle / write RTT"
    );
    println!(
        "|{:-<38}|{:->12}|{:->12}|{:->11}|{:->16}|{:->18}|",
        "", "", "", "", "", ""
    );
    for (name, f) in [
        ("zk-recipes multi_lock", &a),
        ("Curator 5.4 InterProcessMultiLock", &c),
    ] {
        println!(
            "| {:<36} | {:>10.3} | {:>10.3} | {:>9.0} | {:>14.1} | {:>16.1} |",
            name,
            f.median.as_secs_f64() * 1e3,
            f.p90.as_secs_f64() * 1e3,
            f.cycles as f64 / f.elapsed.as_secs_f64(),
            f.requests as f64 / f.cycles as f64,
            f.median.as_secs_f64() / rtt.as_secs_f64()
        );
    }
}
